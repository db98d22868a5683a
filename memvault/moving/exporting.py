"""`memvault export`: the memories out of the vault, for another tool or another vault (docs/design.md,
"Import and export").

- jsonl: one memory per line, exactly what `show --json` prints for it (id, path, role, kind,
  conversation_id, created_at, text, every other front-matter key under meta, deleted), in path
  order. `import jsonl` reads it back into the same files, so export -> import -> export gives
  the same bytes.
- markdown: a digest per conversation for reading or pasting into another tool: its rolling
  summary, then its facts, notes and decisions, newest first (turns are left out: they are the
  conversation itself, not what it taught).

Memories are read and written one at a time (one conversation at a time for the digest), so an
export of a large vault holds little in memory. Written to a file, the output appears whole or
not at all (a temp file renamed at the end).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, TextIO

from memvault.store import files
from memvault.errors import MemoryFileError, MemvaultError, NotFound, UsageError
from memvault.store.files import Memory

FORMATS = ("jsonl", "markdown")


@dataclass
class ExportResult:
    format: str
    memories: int = 0
    conversations: int = 0
    output: str | None = None  # the file written, None for a stream
    skipped: list[MemoryFileError] = field(default_factory=list)  # files that could not be read

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "memories": self.memories, "conversations": self.conversations,
                "output": self.output, "skipped": [{"path": str(e.path), "reason": e.reason} for e in self.skipped]}


def export(vault, output: Path | TextIO, *, conversations: list[str] | None, include_deleted: bool = False,
           since: datetime | None = None, fmt: str = "jsonl") -> ExportResult:
    """Write the memories of `conversations` (None: every one) to `output`, a path (written whole or
    not at all) or an open text stream."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (jsonl or markdown)")
    vault.require_existing()
    folders = _folders(vault, conversations)
    result = ExportResult(fmt)
    if not isinstance(output, (str, Path)):
        _write(vault, output, folders, include_deleted, since, result)
        return result
    target = Path(output).expanduser()
    if target.is_dir():
        raise UsageError(f"output {target} is a folder; give a file name", params="output")
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise MemvaultError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            _write(vault, stream, folders, include_deleted, since, result)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    result.output = str(target)
    return result


def _folders(vault, conversations: list[str] | None) -> list[Path]:
    """The conversation folders to export, sorted (every one under entries/ for None)."""
    if conversations is None:
        return sorted(p for p in vault.entries.iterdir() if p.is_dir() and not p.is_symlink()
                      and not p.name.startswith(".")) if vault.entries.is_dir() else []
    folders = []
    for conversation in conversations:
        folder = vault.entries / files.conversation_slug(conversation)
        if not folder.is_dir():
            from memvault.reading.browse import close_ones

            raise NotFound(f"no conversation {conversation!r} in {vault.root}{close_ones(vault, conversation)}")
        folders.append(folder)
    return folders


def _write(vault, stream: TextIO, folders: list[Path], include_deleted: bool, since: datetime | None,
           result: ExportResult) -> None:
    for folder in folders:
        memories = _memories(vault, folder, include_deleted, since, result)
        if result.format == "jsonl":
            count = 0
            for memory in memories:
                line = memory.to_json(vault.root)
                dates = memory.date_paths()
                if dates:  # JSON has no dates: where they were, for `import jsonl`
                    line["dates"] = dates
                stream.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
                count += 1
        else:
            count = _digest(stream, list(memories), _title(vault, folder), first=result.conversations == 0)
        result.memories += count
        result.conversations += 1 if count else 0


def _memories(vault, folder: Path, include_deleted: bool, since: datetime | None,
              result: ExportResult) -> Iterator[Memory]:
    digest = result.format == "markdown"
    for path in files.walk_entries_under(folder, include_deleted):
        if digest and "turns" in path.relative_to(folder).parts[:2]:
            continue  # a digest shows what a conversation taught, not the conversation
        try:
            memory = files.read_memory(path, vault.root)[0]
        except MemoryFileError as exc:
            result.skipped.append(exc)
            continue
        if since is not None and memory.created_at < since:
            continue
        yield memory


# -- the markdown digest -------------------------------------------------------------------------

_SECTIONS = (("memory", "Facts"), ("note", "Notes"), ("decision", "Decisions"))


def _title(vault, folder: Path) -> str | None:
    """An imported conversation's title, from one of its turns."""
    turns = folder / "turns" / "user"
    if not turns.is_dir():
        return None
    first = next(iter(sorted(p for p in turns.iterdir() if files.is_memory_file(p))), None)
    if first is None:
        return None
    try:
        title = files.read_memory(first, vault.root)[0].extra.get("conversation_title")
    except MemoryFileError:
        return None
    return str(title) if title else None


def _digest(stream: TextIO, memories: list[Memory], title: str | None, first: bool) -> int:
    """One conversation: its title, its rolling summary, then facts, notes and decisions, newest
    first; deleted ones (with --include-deleted) in a section of their own. Returns how many memories
    it shows (0: nothing written)."""
    summary = next((m for m in memories if m.role == "summary" and not m.is_deleted
                    and m.extra.get("summary_kind") not in ("session", "chunk", "group")), None)
    shown = [m for m in memories if m.role in ("memory", "note", "decision")]
    if not shown and summary is None:
        return 0
    conversation = (summary or shown[0]).conversation_id
    title = title or conversation
    lines = [] if first else [""]
    lines += [f"# {title}", ""]
    if title != conversation:
        lines += [f"Conversation `{conversation}`.", ""]
    if summary is not None:
        lines += ["## Summary", "", summary.text.strip(), ""]
    newest_first = sorted(shown, key=lambda m: (m.created_at, m.id), reverse=True)
    for role, heading in _SECTIONS:
        group = [m for m in newest_first if m.role == role and not m.is_deleted]
        if group:
            lines += [f"## {heading}", ""] + [line for m in group for line in _item(m)] + [""]
    gone = [m for m in newest_first if m.is_deleted]
    if gone:
        lines += ["## Deleted or replaced", ""] + [line for m in gone for line in _item(m)] + [""]
    stream.write("\n".join(lines).rstrip("\n") + "\n")
    return len(shown) + (summary is not None)


def _item(memory: Memory) -> list[str]:
    when = memory.created_at.strftime("%Y-%m-%d")
    text = memory.text.strip()
    tags = f" #{' #'.join(memory.tags)}" if memory.tags else ""
    gone = ""
    if memory.is_deleted:
        reason = memory.extra.get("deleted_reason") or "deleted"
        gone = f" ({reason}" + (f", replaced by {str(memory.extra['replaced_by'])[:8]}" if memory.extra.get(
            "replaced_by") else "") + ")"
    if memory.role == "note":
        title = memory.extra.get("title")
        head = f"### {title} ({when}){gone}" if title else f"### {when}{gone}"
        source = [f"Source: {memory.extra['source']}", ""] if memory.extra.get("source") else []
        return [head, "", *source, text, ""]
    lines = [f"- {_indent(text)} ({when}){tags}{gone}"]
    if memory.role == "decision":
        if memory.extra.get("rationale"):
            lines.append(f"  - Why: {_indent(str(memory.extra['rationale']))}")
        alternatives = memory.extra.get("alternatives") or []
        if isinstance(alternatives, list) and alternatives:
            lines.append(f"  - Alternatives: {'; '.join(str(a) for a in alternatives)}")
    return lines


def _indent(text: str) -> str:
    """A multi-line text as one list item."""
    return "\n  ".join(text.splitlines())

