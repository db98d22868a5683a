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
            row = {"id": c.id, "action": c.action, "text": c.text, "path": c.path, "reason": c.reason,
                   "replaced_by": c.replaced_by, "replaces": c.replaces}
            if c.note is not None:
                row["note"] = c.note  # only removals with a reason have one
            changes.append(row)
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


def _parse_status(block: str) -> list[tuple[str, str, str | None, str]]:
    """(status letter, path, old path for renames, blob) for each changed file of `git log --raw`
    lines (`:old-mode new-mode old-blob new-blob status<TAB>path[<TAB>new path]`). The blob is
    the file after the commit, or before it when the commit removed it."""
    rows = []
    for line in block.splitlines():
        parts = line.split("\t")
        meta = parts[0].split()
        if not line.startswith(":") or len(parts) < 2 or len(meta) < 5:
            continue
        old_blob, new_blob, letter = meta[2], meta[3], meta[4][0]
        if letter in "RC" and len(parts) == 3:
            rows.append((letter, parts[2], parts[1], new_blob))
        else:
            rows.append((letter, parts[1], None, old_blob if letter == "D" else new_blob))
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

    blobs = read_blobs(root, sorted({blob for _, _, _, rows in commits for *_, blob in rows if blob.strip("0")}))

    entries = []
    for sha, date, subject, rows in commits:
        entry = LogEntry(sha, date, subject, _command_of(subject))
        by_id: dict[str, MemoryChange] = {}
        for letter, path, old, blob in rows:
            change = _describe(letter, path, old, blobs.get(blob), root)
            if change is None:
                continue
            # A move seen as delete + add (no rename detected) is one soft delete, not a removal.
            if change.id not in by_id or by_id[change.id].action == "removed":
                by_id[change.id] = change
        entry.changes = list(by_id.values())
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
    memory_id, text, meta = PurePosixPath(path).stem.split("__")[-1], "", {}
    if content is not None:
        try:
            memory, _ = files.parse_memory(content, root / path, root=root)
            memory_id, text, meta = memory.id, memory.first_line(), memory.extra
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
                        replaces=meta.get("replaces"), note=str(note) if note else None)


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
