"""`memvault log`: the story of the memories, read back from git.

Works from what each commit did to the files under entries/ (`git log --raw`: each
file's status and blob, plus the blob's contents), so commits made by hand are
understood as well as memvault's own; memvault's trailers only name the command.
Two git processes, whatever the length of the history, through GitPython's command
wrapper: GitPython's own walk (`iter_commits`, then a diff and a trailer parse per
commit) starts two processes per commit, 2,000 for a log of 1,000 changes (bench/README.md,
"One vault on several machines").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from memvault import files
from memvault.errors import MemvaultError, NotFound, UsageError

RS, US = "\x1e", "\x1f"


@dataclass
class MemoryChange:
    id: str
    action: str  # added, edited, deleted, replaced, evicted, removed, restored
    text: str
    path: str
    reason: str | None = None
    replaced_by: str | None = None
    replaces: str | None = None
    note: str | None = None  # a removal's reason in the user's words (deleted_note)
    role: str | None = None  # memory, note, decision, user, assistant, summary (None: unreadable)
    kind: str | None = None  # the user's word for the role: fact, note, decision, turn, summary
    before: str | None = None  # an edit: the text before it
    cause: str | None = None  # a replacement, deletion or eviction: the message or command behind it
    learned_from: str | None = field(default=None, repr=False)  # the chat turn a learned fact came from


@dataclass
class LogEntry:
    commit: str
    date: datetime
    subject: str
    command: str
    changes: list[MemoryChange] = field(default_factory=list)

    def to_json(self) -> dict:
        # Field by field, not dataclasses.asdict: its deep copies were a third of `log --json`'s own time.
        changes = []
        for c in self.changes:
            # note, before, cause: only removals with a reason, edits, and retirements have them;
            # learned_from is shown as the cause of what the fact replaced
            row = {"id": c.id, "action": c.action, "text": c.text, "path": c.path, "reason": c.reason,
                   "replaced_by": c.replaced_by, "replaces": c.replaces, "note": c.note, "role": c.role,
                   "kind": c.kind, "before": c.before, "cause": c.cause}
            changes.append({k: v for k, v in row.items() if v is not None or k not in ("note", "before", "cause")})
        return {"commit": self.commit, "date": self.date.isoformat(), "subject": self.subject,
                "command": self.command, "changes": changes}


def _git(root: Path, *args: str) -> str:
    """One git command through GitPython's command wrapper (gitrepo); its stdout."""
    from memvault import gitrepo

    try:
        return gitrepo.git_output(root, *args)
    except gitrepo.GitError as exc:
        raise MemvaultError(f"git {args[0]} in {root} failed: {exc.cause}") from None


def _command_of(subject: str) -> str:
    if subject.startswith("memvault ") and ":" in subject:
        return subject[len("memvault ") : subject.index(":")].strip()
    return "hand edit"


def _parse_status(block: str) -> list[tuple[str, str, str | None, str, str | None]]:
    """(status letter, path, old path for renames, blob, blob before) for each changed file of
    `git log --raw` lines (`:old-mode new-mode old-blob new-blob status<TAB>path[<TAB>new path]`).
    The blob is the file after the commit, or before it when the commit removed it; the blob
    before is given for a file changed in place (an edit, to show what it said before)."""
    rows = []
    for line in block.splitlines():
        parts = line.split("\t")
        meta = parts[0].split()
        if not line.startswith(":") or len(parts) < 2 or len(meta) < 5:
            continue
        old_blob, new_blob, letter = meta[2], meta[3], meta[4][0]
        if letter in "RC" and len(parts) == 3:
            rows.append((letter, parts[2], parts[1], new_blob, old_blob if meta[4] != "R100" else None))
        else:
            rows.append((letter, parts[1], None, old_blob if letter == "D" else new_blob,
                         old_blob if letter == "M" else None))
    return rows


def _in_deleted(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return len(parts) >= 3 and parts[2] == files.DELETED


def history(root: Path, limit: int | None = None, since: str | None = None, follow: str | None = None) -> list[LogEntry]:
    """Newest first. `follow` is an id or unique prefix, traced through replacements."""
    if not (root / ".git").exists():
        raise MemvaultError(f"{root} has no git history (is enable_git_versioning off?)")
    # --raw names each file's blob, which cat-file reads directly; `<commit>:<path>` names made it
    # walk the commit's trees for every file, which took minutes for an import of 10,000 memories.
    args = ["-c", "core.quotePath=false", "log", "-M", "--raw", "--no-abbrev",
            f"--format={RS}%H{US}%aI{US}%s{US}"]
    since_time = None
    if since:
        try:  # ISO dates are compared exactly; git's own parser takes the rest ("2 weeks ago")
            since_time = files.parse_time(since, "--since")
        except ValueError:
            args.append(f"--since={since}")
    if limit and not follow and since_time is None:
        args.append(f"-n{limit}")
    args += ["--", files.ENTRIES]
    try:
        raw = _git(root, *args)
    except MemvaultError as exc:
        if "does not have any commits" in str(exc):
            return []
        raise
    commits = []
    for chunk in raw.split(RS)[1:]:
        sha, date, subject, status = chunk.split(US, 3)
        when = datetime.fromisoformat(date)
        if since_time is None or when >= since_time:
            commits.append((sha, when, subject, _parse_status(status)))
    if limit and not follow:
        commits = commits[:limit]

    # Read each touched file as it was after the commit (or before it, when removed).
    from memvault.gitrepo import read_blobs

    wanted = {blob for _, _, _, rows in commits for *_, blob, before in rows for blob in (blob, before)
              if blob and blob.strip("0")}
    blobs = read_blobs(root, sorted(wanted))

    entries = []
    for sha, date, subject, rows in commits:
        entry = LogEntry(sha, date, subject, _command_of(subject))
        by_id: dict[str, MemoryChange] = {}
        for letter, path, old, blob, before in rows:
            change = _describe(letter, path, old, blobs.get(blob), root)
            if change is None:
                continue
            if change.action == "edited" and before:
                change.before = _first_line(blobs.get(before), root, path)
            # A move seen as delete + add (no rename detected) is one soft delete, not a removal.
            if change.id not in by_id or by_id[change.id].action == "removed":
                by_id[change.id] = change
        entry.changes = list(by_id.values())
        _name_causes(entry, root)
        entries.append(entry)

    if follow:
        ids = _follow_ids(entries, follow)
        entries = [e for e in entries if any(c.id in ids for c in e.changes)]
        for e in entries:
            e.changes = [c for c in e.changes if c.id in ids]
        if limit:
            entries = entries[:limit]
    return entries


def _describe(letter: str, path: str, old: str | None, content: str | None, root: Path) -> MemoryChange | None:
    if not path.endswith(".md"):
        return None
    memory_id, text, meta, role = PurePosixPath(path).stem.split("__")[-1], "", {}, None
    if content is not None:
        try:
            memory, _ = files.parse_memory(content, root / path, root=root)
            memory_id, text, meta, role = memory.id, memory.first_line(), memory.extra, memory.role
        except Exception:  # a broken file in history still has a path to show
            text = "(unreadable)"
    reason = meta.get("deleted_reason")
    replaced_by = meta.get("replaced_by")
    if letter == "D":
        action = "removed" if not _in_deleted(path) else "purged"
    elif _in_deleted(path) and (letter == "A" or (old and not _in_deleted(old))):
        action = {"evicted": "evicted"}.get(str(reason), "replaced" if replaced_by else "deleted")
    elif letter in "RC" and old and _in_deleted(old) and not _in_deleted(path):
        action = "restored"
    elif letter == "A":
        action = "added"
    else:
        action = "edited"
    note = meta.get(files.DELETED_NOTE) if action == "deleted" else None
    return MemoryChange(memory_id, action, text, path, reason=reason, replaced_by=replaced_by,
                        replaces=meta.get("replaces"), note=str(note) if note else None,
                        role=role, kind=files.kind_of_role(role) if role else None,
                        learned_from=meta.get("learned_from"))


def _first_line(content: str | None, root: Path, path: str) -> str | None:
    if content is None:
        return None
    try:
        return files.parse_memory(content, root / path, root=root)[0].first_line()
    except Exception:
        return "(unreadable)"


def _name_causes(entry: LogEntry, root: Path) -> None:
    """Say what retired each memory the commit replaced, deleted or evicted: the user's message
    a learned fact came from (its chat turn), else the command (and the user's reason)."""
    by_id = {c.id: c for c in entry.changes}
    for change in entry.changes:
        if change.action not in ("replaced", "deleted", "evicted"):
            continue
        successor = by_id.get(change.replaced_by or "")
        turn_id = successor.learned_from if successor else None
        message = _turn_text(root, change.path, turn_id) if turn_id else None
        if message:
            change.cause = f'{entry.command}: "{message}"'
        elif change.action == "evicted":
            change.cause = f"{entry.command}: past max_entries"
        else:
            change.cause = entry.command + (f": {change.note}" if change.note else "")


def _turn_text(root: Path, path: str, turn_id: str) -> str | None:
    """The first line of the user turn `turn_id`, looked for in the conversation of `path`."""
    conversation = PurePosixPath(path).parts[1]
    folder = root / files.ENTRIES / conversation
    for pattern in (f"turns/user/*__{turn_id}.md", f"{files.DELETED}/turns/user/*__{turn_id}.md"):
        for found in folder.glob(pattern):
            try:
                return files.read_memory(found, root=root)[0].first_line(60)
            except Exception:
                return None
    return None


def _follow_ids(entries: list[LogEntry], wanted: str) -> set[str]:
    needle = wanted.strip().lower()
    if len(needle) < 4:
        raise UsageError(f"id prefix {wanted!r} is too short (at least 4 characters)")
    known = {c.id for e in entries for c in e.changes}
    matches = {i for i in known if i.lower().startswith(needle)}
    if not matches:
        raise NotFound(f"no memory with id {wanted!r} in the history")
    if len(matches) > 1:
        raise UsageError(f"id prefix {wanted!r} is ambiguous: {', '.join(sorted(m[:12] for m in matches)[:5])}")
    # Replacement links in both directions: old -> new (replaced_by) and new -> old (replaces).
    links: dict[str, set[str]] = {}
    for e in entries:
        for c in e.changes:
            for other in (c.replaced_by, c.replaces):
                if other:
                    links.setdefault(c.id, set()).add(other)
                    links.setdefault(other, set()).add(c.id)
    ids, todo = set(), list(matches)
    while todo:
        current = todo.pop()
        if current not in ids:
            ids.add(current)
            todo.extend(links.get(current, ()))
    return ids
