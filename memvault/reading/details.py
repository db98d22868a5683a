"""One memory whole, for a face that shows it (`Memvault.details`, the page's memory view; docs/design.md,
"The library API and its faces"): the memory, the memories it is linked to (what replaced it, what it
replaced or retired, what it would retire once kept, the proposals waiting that would retire it), and its
story: the commits `log ID` shows (history.py, through its replacements), each with git's diff of the
memory's own file in that commit.

The diff is git's (`git log -p -M`), asked for the memory's file name in every folder of its conversation
it can be in (live, under deleted/, pending/ before a review kept it), as literal paths: git then reads
only the trees those paths are in. Nothing here is redacted: like `log`, this is history as git has it;
a face that shows it to someone who did not type it runs the texts through `Memvault.redact`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from memvault.errors import MemvaultError, NotFound, UsageError
from memvault.store import files
from memvault.store.files import Memory

DIFF_LINES = 400  # a commit's diff is cut after this many lines (a long note rewritten whole)
DIFF_COMMITS = 200  # commits of the file asked of git


@dataclass
class MemoryDetails:
    """A memory (`memory`, live or a tombstone) and what a face shows around it."""

    memory: Memory
    replaced_by: Memory | None = None  # what replaced it (a tombstone's replaced_by)
    replaces: list[Memory] = field(default_factory=list)  # what it replaced or retired (replaces, retired)
    would_replace: list[Memory] = field(default_factory=list)  # waiting or a proposal: what keeping it retires
    proposed: list[Memory] = field(default_factory=list)  # learned facts waiting for review that would retire it
    history: list = field(default_factory=list)  # history.LogEntry, newest first: `log ID`
    diffs: dict[str, str] = field(default_factory=dict)  # commit -> git's diff of the memory's file in it
    history_note: str | None = None  # why there is no story (no git history, a merge under way)

    def to_json(self, root=None) -> dict[str, Any]:
        def brief(memory: Memory) -> dict[str, Any]:
            return {"id": memory.id, "kind": memory.kind, "text": memory.text, "deleted": memory.is_deleted,
                    "created_at": files.format_time(memory.created_at)}

        return {**self.memory.to_json(root),
                "replaced_by": brief(self.replaced_by) if self.replaced_by else None,
                "replaces": [brief(m) for m in self.replaces],
                "would_replace": [brief(m) for m in self.would_replace],
                "proposed": [brief(m) for m in self.proposed],
                "history": [{**entry.to_json(), "diff": self.diffs.get(entry.commit)} for entry in self.history],
                "history_note": self.history_note}


def _ids(value: Any) -> list[str]:
    if not value:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def details(vault, id_or_prefix: str) -> MemoryDetails:
    """`Memvault.details`: the memory by id or unique prefix (live preferred, else its tombstone), its links,
    its story from git with each commit's diff of its file. Its lookups by id (the memory, its links, the
    ids its story follows) share one status of git (Index.one_status)."""
    vault.require_existing()
    with vault.index.one_status():
        return _details(vault, id_or_prefix)


def _details(vault, id_or_prefix: str) -> MemoryDetails:
    from memvault.reading import history

    memory = vault.find(id_or_prefix)
    found = MemoryDetails(memory)
    linked: dict[str, Memory | None] = {}

    def look_up(memory_id: str) -> Memory | None:
        if memory_id not in linked:
            try:
                linked[memory_id] = vault.find(memory_id)
            except (NotFound, UsageError):  # gone from the folder, or a prefix no longer unique
                linked[memory_id] = None
        return linked[memory_id]

    extra = memory.extra
    for target in _ids(extra.get("replaced_by"))[:1]:
        found.replaced_by = look_up(target)
    found.replaces = [m for m in map(look_up, _ids(extra.get("replaces")) + _ids(extra.get("retired"))) if m]
    found.would_replace = [m for m in map(look_up, _ids(extra.get("would_replace"))) if m]
    found.proposed = [m for m in map(look_up, sorted({row["new_id"] for row in vault.index.supersessions()
                                                     if row["old_id"] == memory.id and row["kind"] == "proposal"}))
                      if m and not m.is_deleted]
    try:
        found.history = history.log(vault, memory.id)
    except NotFound:
        found.history_note = "not committed yet (a file added by hand: the next change or reindex commits it)"
    except MemvaultError as exc:  # no history to read (git off, a merge under way): the memory is still shown
        found.history_note = str(exc)
    if found.history:
        found.diffs = file_diffs(vault, memory)
    return found


def file_diffs(vault, memory: Memory) -> dict[str, str]:
    """{commit: git's diff of the memory's file in it} over the file's history (its moves to deleted/ and
    back, from pending/ to facts/, followed: -M over every place the file can be)."""
    from memvault.store import gitrepo

    rel = PurePosixPath(vault.relative(memory.path))
    parts = rel.parts
    if len(parts) < 3 or parts[0] != files.ENTRIES:
        return {}
    folder, name = "/".join(parts[:2]), rel.name
    places = sorted({sub for role, sub in files.ROLE_FOLDERS.items() if role != "summary"} | {"summaries"})
    paths = [f":(literal){folder}/{where}{sub}/{name}" for sub in places for where in ("", files.DELETED + "/")]
    try:
        raw = gitrepo.git_output(vault.root, "-c", "core.quotePath=false", "log", "-p", "-M", "--full-history",
                                 "--no-color", "--no-ext-diff", f"-n{DIFF_COMMITS}", "--format=%x1e%H", "--", *paths)
    except gitrepo.GitError:
        return {}
    diffs = {}
    for chunk in raw.split("\x1e")[1:]:
        sha, _, patch = chunk.partition("\n")
        lines = patch.strip("\n").split("\n")
        if len(lines) > DIFF_LINES:
            lines = lines[:DIFF_LINES] + [f"… {len(lines) - DIFF_LINES:,} more lines (git show {sha[:12]})"]
        diffs[sha.strip()] = "\n".join(lines)
    return diffs
