"""`memvault log`: the story of the memories, read back from git.

Works from what each commit did to the files under entries/ (`git log --raw`: each
file's status and blob, plus the blob's contents), so commits made by hand are
understood as well as memvault's own; memvault's trailers only name the command.
A few git processes, whatever the length of the history (`git log --raw`, one `cat-file
--batch` for the contents), through GitPython's command wrapper: GitPython's own walk
(`iter_commits`, then a diff and a trailer parse per commit) starts two processes per commit,
2,000 for a log of 1,000 changes (bench/README.md, "One vault on several machines"). Only what
is shown is read: 20 changes of a commit unless asked for all, and for one memory only the
files that held it (docs/design.md, "Commits").
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
    changes_total: int = 0  # every memory the commit changed; `changes` may list fewer (max_changes)

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
                "command": self.command, "changes": changes, "changes_total": self.changes_total}


def _git(root: Path, *args: str) -> str:
    """One git command through GitPython's command wrapper (gitrepo); its stdout."""
    from memvault import gitrepo

    try:
        return gitrepo.git_output(root, *args)
    except gitrepo.GitError as exc:
        raise MemvaultError(f"git {args[0]} in {root} failed: {exc.cause}") from None


def _read_blobs(root: Path, blobs) -> dict[str, str | None]:
    """The contents of these blob ids (empty and all-zero ids left out), through one cat-file."""
    from memvault.gitrepo import read_blobs

    return read_blobs(root, sorted(b for b in blobs if b and b.strip("0")))


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
    for line in block.split("\n"):  # an import's commit has 100,000 of these lines: kept lean
        if line[:1] != ":":
            continue
        head, _, paths = line.partition("\t")
        meta = head.split(" ")
        if not paths or len(meta) < 5:
            continue
        old_blob, new_blob, status = meta[2], meta[3], meta[4]
        letter = status[0]
        if letter in "RC" and "\t" in paths:
            old_path, _, new_path = paths.partition("\t")
            rows.append((letter, new_path, old_path, new_blob, old_blob if status != "R100" else None))
        else:
            rows.append((letter, paths, None, old_blob if letter == "D" else new_blob,
                         old_blob if letter == "M" else None))
    return rows


def _in_deleted(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return len(parts) >= 3 and parts[2] == files.DELETED


def history(root: Path, limit: int | None = None, since: str | None = None, follow: str | None = None,
            max_changes: int | None = None, resolve=None) -> list[LogEntry]:
    """Newest first. `follow` is an id or unique prefix, traced through replacements.

    max_changes: read and list at most this many changes of one commit (an import is one commit
    of 100,000 files); `changes_total` still counts them all. resolve(id or prefix): {id: [paths
    relative to the vault]} of the memories the folder holds now (see _follow); without it,
    memories are looked for by the ids in their file names."""
    if not (root / ".git").exists():
        raise MemvaultError(f"{root} has no git history (is enable_git_versioning off?)")
    since_args, since_time = [], None
    if since:
        try:  # ISO dates are compared exactly; git's own parser takes the rest ("2 weeks ago")
            since_time = files.parse_time(since, "--since")
        except ValueError:
            since_args.append(f"--since={since}")
    if follow:
        entries = _follow(root, follow, since_args, resolve or (lambda wanted: {}))
        entries = [e for e in entries if since_time is None or e.date >= since_time]
        return entries[:limit] if limit else entries
    commits = [c for c in _entries_log(root, since_args, limit if since_time is None else None)
               if since_time is None or c[1] >= since_time]
    if limit:
        commits = commits[:limit]
    shown = {sha: _memory_rows(rows)[:max_changes] if max_changes is not None else _memory_rows(rows)
             for sha, _, _, rows in commits}
    # Read each shown file as it was after the commit (or before it, when removed; and before an
    # edit, to show what it said), by blob id.
    blobs = _read_blobs(root, {blob for rows in shown.values() for row in rows for blob in row[3:5]})
    entries = []
    for sha, date, subject, rows in commits:
        entry = LogEntry(sha, date, subject, _command_of(subject))
        entry.changes = _changes(shown[sha], blobs, root)
        _name_causes(entry, root)
        every = _memory_rows(rows)
        entry.changes_total = len(entry.changes) if len(shown[sha]) == len(every) else _count_memories(every)
        entries.append(entry)
    return entries


def _raw_log(root: Path, *args: str) -> list[tuple[str, datetime, str, list[tuple[str, str, str | None, str]]]]:
    """(sha, date, subject, changed files) per commit of `git log --raw` with these arguments.

    --raw names each file's blob, which cat-file reads directly; `<commit>:<path>` names made it
    walk the commit's trees for every file, which took minutes for an import of 10,000 memories."""
    try:
        raw = _git(root, "-c", "core.quotePath=false", "log", "-M", "--raw", "--no-abbrev",
                   f"--format={RS}%H{US}%aI{US}%s{US}", *args)
    except MemvaultError as exc:
        if "does not have any commits" in str(exc):
            return []
        raise
    commits = []
    for chunk in raw.split(RS)[1:]:
        sha, date, subject, status = chunk.split(US, 3)
        commits.append((sha, datetime.fromisoformat(date), subject, _parse_status(status)))
    return commits


def _entries_log(root: Path, since_args: list[str], limit: int | None):
    """The newest `limit` commits that changed something under entries/, with those changes.

    Asked without `-- entries`: with it, git diffs every commit's trees twice (to decide whether
    the commit touched entries/, then for --raw), and with every memory of a kind in one folder
    each diff reads that folder's tree (2 MB at 100,000 memories). The few commits that touch
    nothing under entries/ (settings, the first commit) are dropped here, and more are asked for
    when they made the page short."""
    if limit is None:
        return [c for c in _raw_log(root, *since_args) if _entry_rows(c)]
    found, skip, page = [], 0, limit
    while True:
        batch = _raw_log(root, *since_args, f"-n{page}", f"--skip={skip}")
        found += [c for c in batch if _entry_rows(c)]
        if len(found) >= limit or len(batch) < page:
            return found[:limit]
        skip += page
        page *= 2


def _entry_rows(commit) -> bool:
    """Keep only the changes under entries/; whether any is left."""
    commit[3][:] = [row for row in commit[3] if row[1].startswith(files.ENTRIES + "/")]
    return bool(commit[3])


def _memory_rows(rows):
    return [row for row in rows if row[1].endswith(".md")]


def _count_memories(rows) -> int:
    """How many memories these changed files are, without reading them: a file and its tombstone
    share a name (<ts>__<id>.md), so a move that git saw as a delete plus an add counts once."""
    names = [row[1].rpartition("/")[2] for row in rows]  # not PurePosixPath: 0.6 s at 100,000 rows
    return len({name for name in names if "__" in name}) + sum(1 for name in names if "__" not in name)


def _changes(rows, blobs: dict[str, str | None], root: Path) -> list[MemoryChange]:
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
    return list(by_id.values())


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _counterparts(path: str) -> list[str]:
    """A file's path and its tombstone's (entries/<c>/deleted/<rest>), or the live one's: a
    memory's history lies at both."""
    parts = path.split("/")
    if len(parts) >= 4 and parts[0] == files.ENTRIES and parts[2] == files.DELETED:
        return [path, "/".join(parts[:2] + parts[3:])]
    if len(parts) >= 3 and parts[0] == files.ENTRIES:
        return [path, "/".join(parts[:2] + [files.DELETED] + parts[2:])]
    return [path]


def _follow(root: Path, wanted: str, since_args: list[str], resolve) -> list[LogEntry]:
    """The commits that changed one memory or the memories it replaced or was replaced by.

    Reads only what may be that story, not every file ever committed. `resolve(id or prefix)`
    gives {id: [paths]} of the memories the folder holds now (live or tombstone; the index's
    record knows where); git is then asked for the history of exactly those paths and of their
    live or tombstone counterparts, which lets it skip every folder they are not in. A memory no
    longer in the folder is looked for by name (memvault names every file <ts>__<id>.md, and a
    tombstone keeps the name), which makes git look at every file of every commit. Replacements
    are followed through the linked ids, and through the tombstones written by the same commits
    (a replaced fact names its successor only in its tombstone)."""
    needle = wanted.strip().lower()
    if len(needle) < 4:
        raise UsageError(f"id prefix {wanted!r} is too short (at least 4 characters)")
    commits: dict[str, tuple[datetime, str, set]] = {}
    parsed: dict[tuple, MemoryChange | None] = {}

    def collect(*pathspecs: str, walk: tuple[str, ...] = ()) -> None:
        if pathspecs:
            for sha, date, subject, rows in _raw_log(root, *since_args, *walk, "--", *pathspecs):
                commits.setdefault(sha, (date, subject, set()))[2].update(_memory_rows(rows))

    def look_for(needles: set[str]) -> None:
        """The history of the files that hold these ids (or prefixes) now, else of their names."""
        literal, by_name = set(), set()
        for wanted_id in needles:
            held = resolve(wanted_id)
            if not held:
                by_name.add(wanted_id)
            for paths in held.values():
                literal.update(p for path in paths for p in _counterparts(path))
        collect(*(f":(literal){p}" for p in sorted(literal)),
                *(f":(glob,icase)entries/**/*__{_glob_escape(i)}*.md" for i in sorted(by_name)))

    def changes() -> dict[str, list[MemoryChange]]:
        blobs = _read_blobs(root, {blob for _, _, rows in commits.values() for row in rows if row not in parsed
                                   for blob in row[3:5]})
        out: dict[str, list[MemoryChange]] = {}
        for sha, (_, _, rows) in commits.items():
            for row in sorted(rows):
                if row not in parsed:
                    parsed[row] = _describe(row[0], row[1], row[2], blobs.get(row[3]), root)
                    if parsed[row] is not None and parsed[row].action == "edited" and row[4]:
                        parsed[row].before = _first_line(blobs.get(row[4]), root, row[1])
                if parsed[row] is not None:
                    out.setdefault(sha, []).append(parsed[row])
        return out

    held_now = resolve(needle)
    if len(held_now) > 1:
        raise UsageError(f"id prefix {wanted!r} is ambiguous: {', '.join(sorted(i[:12] for i in held_now)[:5])}")
    look_for({needle})
    by_commit = changes()
    matches = {c.id for found in by_commit.values() for c in found if c.id.lower().startswith(needle)}
    if held_now:
        matches &= set(held_now) or matches
    if not matches:
        raise NotFound(f"no memory with id {wanted!r} in the history")
    if len(matches) > 1:
        raise UsageError(f"id prefix {wanted!r} is ambiguous: {', '.join(sorted(m[:12] for m in matches)[:5])}")
    ids, searched, shown_commits = set(matches), set(matches) | {needle}, set()
    while True:
        # Replacement links in both directions: old -> new (replaced_by) and new -> old (replaces).
        linked = {other for found in by_commit.values() for c in found if c.id in ids
                  for other in (c.replaced_by, c.replaces) if other}
        linked |= {c.id for found in by_commit.values() for c in found if c.replaced_by in ids or c.replaces in ids}
        new_ids = linked - ids
        touching = {sha for sha, found in by_commit.items() if any(c.id in ids for c in found)} - shown_commits
        if not new_ids and not touching:
            break
        ids |= new_ids
        shown_commits |= touching
        if touching:  # the tombstones those commits wrote, in the conversations they touched
            folders = sorted({"/".join(c.path.split("/")[:2]) for sha in touching for c in by_commit[sha]
                              if c.id in ids})
            collect(*(f"{folder}/{files.DELETED}" for folder in folders),
                    walk=("--no-walk=unsorted", *sorted(touching)))
        fresh = new_ids - searched
        searched |= fresh
        look_for(fresh)
        by_commit = changes()

    order = {sha: n for n, sha in enumerate(_git(root, "rev-list", "HEAD").split())}
    entries = []
    for sha in sorted(commits, key=lambda s: (order.get(s, len(order)), s)):
        date, subject, _ = commits[sha]
        mine = [c for c in by_commit.get(sha, []) if c.id in ids]
        if not mine:
            continue
        entry = LogEntry(sha, date, subject, _command_of(subject))
        by_id: dict[str, MemoryChange] = {}
        for c in by_commit.get(sha, []):  # all that was read of the commit: causes are named from it
            if c.id not in by_id or by_id[c.id].action == "removed":
                by_id[c.id] = c
        entry.changes = list(by_id.values())
        _name_causes(entry, root)
        entry.changes = [c for c in entry.changes if c.id in ids]
        entry.changes_total = len(entry.changes)
        entries.append(entry)
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
