"""Looking around a vault without a query: its conversations and its numbers (`memvault
conversations`, `memvault stats`).

Both read folder listings, not files: a memory's kind is its folder (facts/, notes/, turns/...)
and its time is in its name (<ts>__<id>.md), so a vault of 100,000 memories is listed without
opening them. The one file read per conversation is one front matter, for the conversation's
real id (a folder name may be a hashed slug of it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memvault.store import files

# Folder under entries/<c>/ -> kind (the user's word); summaries/ is not a kind of memory.
KIND_FOLDERS = {"facts": "fact", "notes": "note", "decisions": "decision", "turns": "turn", "episodes": "episode",
                "pending": "pending"}


@dataclass
class ConversationInfo:
    id: str
    folder: str
    counts: dict[str, int] = field(default_factory=dict)  # live memories by kind
    deleted: int = 0
    newest: datetime | None = None
    has_summary: bool = False

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {"conversation_id": self.id, "folder": self.folder, "counts": self.counts, "total": self.total,
                "deleted": self.deleted, "newest": self.newest.isoformat() if self.newest else None,
                "has_summary": self.has_summary}


def conversations(vault) -> list[ConversationInfo]:
    """Every conversation of the vault with its live memories counted by kind, newest activity first."""
    base = vault.entries
    if not base.is_dir():
        return []
    found = [folder_info(vault, folder.path, folder.name) for folder in sorted(os.scandir(base), key=lambda e: e.name)
             if folder.is_dir(follow_symlinks=False) and not folder.name.startswith(".")]
    found.sort(key=lambda c: (c.newest or datetime.min.replace(tzinfo=timezone.utc)), reverse=True)
    return found


def conversation_info(vault, conversation: str) -> ConversationInfo:
    """One conversation's ConversationInfo; NotFound (naming the close ones) when the vault has none of it."""
    from memvault.errors import NotFound

    folder = vault.entries / files.conversation_slug(conversation)
    if not folder.is_dir():
        raise NotFound(f"no conversation {conversation!r} in the vault{close_ones(vault, conversation)}")
    return folder_info(vault, str(folder), folder.name)


def folder_info(vault, path: str, name: str) -> ConversationInfo:
    """A conversation's folder counted: live memories by kind, tombstones, the newest time, the summary."""
    info = ConversationInfo(name, name)
    sample, stamps = None, []
    for kind_dir in os.scandir(path):
        if not kind_dir.is_dir(follow_symlinks=False):
            continue
        if kind_dir.name == files.DELETED:
            info.deleted = sum(1 for _ in _memory_files(kind_dir.path))
            continue
        if kind_dir.name == "summaries":
            info.has_summary = os.path.isfile(os.path.join(kind_dir.path, "summary.md"))
            continue
        kind = KIND_FOLDERS.get(kind_dir.name)
        if kind is None:
            continue
        for file_path in _memory_files(kind_dir.path):
            info.counts[kind] = info.counts.get(kind, 0) + 1
            stamps.append(os.path.basename(file_path).partition("__")[0])
            sample = sample or file_path
    # The names' times are fixed-width, so the newest is the greatest string: one parsed, not each
    # (strptime for each of 10,000 names was most of the page's time, bench/page.py).
    for stamp in sorted(set(stamps), reverse=True):
        info.newest = stamp_of(stamp + "__")
        if info.newest is not None:
            break
    if sample:  # the real id: a folder name may be a hashed slug of it
        memory = files.read_optional(Path(sample), vault.root)
        if memory is not None:
            info.id = memory.conversation_id
    return info


def close_ones(vault, conversation: str) -> str:
    """What to say after "no conversation X": the conversations whose names are close to X (a typo),
    else where to find them."""
    import difflib

    close = difflib.get_close_matches(conversation, [info.id for info in conversations(vault)], n=3, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else "; `memvault conversations` lists them"


def _memory_files(folder: str):
    """Memory files under a folder, recursively (turns/user, turns/assistant), as paths."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            yield from _memory_files(entry.path)
        elif entry.name.endswith(".md") and not entry.name.startswith((".", "#", "~")):
            yield entry.path


def stamp_of(path: str) -> datetime | None:
    """The time in a memory file's name (<YYYYMMDDTHHMMSSffffffZ>__<id>.md), or None."""
    name = os.path.basename(path)
    stamp, sep, _ = name.partition("__")
    if not sep:
        return None
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def folder_size(path: Path) -> int:
    """Bytes of the files under a folder (what `du --apparent-size` counts)."""
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


@dataclass
class Stats:
    """The vault in numbers (`memvault stats`): live memories by kind and per conversation, deleted ones,
    files the index leaves out (`skipped`), the index (`rows`, `in_step`, `out_of_step`, `drift`, ...), the
    models, what waits for review, the last commit, the disk each part takes. to_json: what `stats --json`,
    GET /v1/stats and MCP's vault_stats give."""

    vault: str
    memories: int
    by_kind: dict[str, int]
    deleted: int
    skipped: int
    conversations: dict[str, int]
    index: dict[str, Any]
    models: dict[str, str]
    review: dict[str, int]
    last_commit: dict[str, str] | None
    disk: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def stats(vault) -> Stats:
    """Counts by kind and conversation, the index's size and state, the models, the last commit, and
    the disk the vault takes."""
    from memvault.store import gitrepo

    from memvault.store.reindex import check

    listing = conversations(vault)
    index = vault.index
    state = index.state_summary()
    table = index.table()
    rows = table.count_rows() if table is not None else 0
    report = check(vault)  # the same answer as `reindex --check`
    # A file the index leaves out (unreadable, a copy claiming another file's id, a file outside the kind
    # folders that reindex has not moved in yet) is no memory.
    left_out = 0
    by_folder = {info.folder: info for info in listing}
    for problem in report.skipped:
        parts = Path(problem.path).relative_to(vault.root).parts if Path(problem.path).is_absolute() else ()
        info = by_folder.get(parts[1]) if len(parts) >= 4 else None
        kind = KIND_FOLDERS.get(parts[2]) if info is not None else None
        if kind is not None and info.counts.get(kind):
            info.counts[kind] -= 1
            left_out += 1
        elif parts and not files.in_kind_folder(parts):  # outside the kind folders: counted nowhere else
            left_out += 1
    by_kind: dict[str, int] = {}
    for info in listing:
        for kind, count in info.counts.items():
            if count:
                by_kind[kind] = by_kind.get(kind, 0) + count
    last = None
    if vault.settings.enable_git_versioning and gitrepo.is_repo(vault.root) and gitrepo.head_sha(vault.root):
        sha, date, subject = gitrepo.git_output(vault.root, "log", "-1", "--format=%H%x1f%aI%x1f%s").strip().split("\x1f")
        last = {"commit": sha, "date": date, "subject": subject}
    settings = vault.settings
    return Stats(**{
        "vault": str(vault.root),
        "memories": sum(by_kind.values()),
        "by_kind": dict(sorted(by_kind.items())),
        "deleted": sum(info.deleted for info in listing),
        "skipped": left_out,
        "conversations": {info.id: info.total for info in listing},
        "index": {"rows": rows, "files_in_state": state["files"] if state else 0,
                  "model": (state or {}).get("model", {}) and state["model"].get("name"),
                  "in_step": report.in_step, "out_of_step": report.out_of_step(),
                  "drift": {"added": len(report.added), "changed": len(report.changed),
                            "removed": len(report.removed), "skipped": len(report.skipped),
                            "unscrubbed": len(report.unscrubbed), "rebuild": report.rebuilt}},
        "models": {"embedding_model": settings.embedding_model, "reranker_model": settings.reranker_model,
                   "llm_model": settings.llm_model},
        "review": index.review_counts(),  # what waits for `memvault review`
        "last_commit": last,
        "disk": {"entries": folder_size(vault.entries), "index": folder_size(vault.sidecar),
                 "git": folder_size(vault.root / ".git")},
    })
