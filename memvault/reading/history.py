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

A commit memvault made says in its trailers what it did to which memory (gitrepo.CommitRecord), and
`log` follows them where the files alone are ambiguous (a restore git does not see as a rename).
A sync's merge is shown by what it made itself (git's combined diff: the tombstones of the versions
that lost a conflict) and by its `Memvault-Resolved` trailers (each memory it settled, as
`resolved`); `log ID` walks every side of a merge (`--full-history`), so the deletion on one
machine and the resolution that brought the memory back on the other are both in its story.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from memvault.store import files
from memvault.errors import MemvaultError, NotFound, UsageError

RS, US = "\x1e", "\x1f"
# A commit's trailers (gitrepo.CommitRecord) as the action `log` shows for each memory they name.
TRAILER_ACTIONS = {"Memvault-Added": "added", "Memvault-Deleted": "deleted", "Memvault-Edited": "edited",
                   "Memvault-Evicted": "evicted", "Memvault-Restored": "restored", "Memvault-Removed": "removed",
                   "Memvault-Scrubbed": "scrubbed"}
# The rest of a `Memvault-Resolved: <id or path>: <case>: <rest>` trailer (merge.Resolution.trailer).
_RESOLVED = re.compile(r"^kept (?P<whose>.+?)(?: \((?P<path>.+?)(?: as of (?P<sha>[0-9a-f]{7,64}))?\))?"
                       r"(?:; the other is the tombstone (?P<sibling>.+))?$")


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
    conflict: str | None = field(default=None, repr=False)  # a sync's tombstone: why it exists (sync_conflict)


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
    from memvault.store import gitrepo

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
    `git log --raw` lines (`:old-mode new-mode old-blob new-blob status<TAB>path[<TAB>new path]`, and
    for a merge `-c`'s combined lines, `::` and a mode and blob per parent). The blob is the file
    after the commit, or before it when the commit removed it; the blob before is given for a file
    changed in place (an edit, to show what it said before)."""
    rows = []
    for line in block.split("\n"):  # an import's commit has 100,000 of these lines: kept lean
        if line[:1] != ":":
            continue
        head, _, paths = line.partition("\t")
        if line[:2] == "::":  # a merge: what it made that none of its parents had
            parents = len(head) - len(head.lstrip(":"))
            meta = head[parents:].split(" ")
            if not paths or len(meta) < 2 * parents + 3:
                continue
            before, after = meta[parents + 1:2 * parents + 1], meta[2 * parents + 1]
            letter = "A" if not any(b.strip("0") for b in before) else "M" if after.strip("0") else "D"
            rows.append((letter, paths, None, before[0] if letter == "D" else after,
                         before[0] if letter == "M" else None))
            continue
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


@dataclass
class _Resolved:
    """One `Memvault-Resolved` trailer of a sync's merge: the memory it settled and how."""

    id: str
    case: str
    whose: str
    path: str | None  # where the memory is in the merge (None: a trailer of an older memvault, without it)
    kept_commit: str | None
    sibling: str | None  # the tombstone the other version became


@dataclass
class _Commit:
    sha: str
    date: datetime
    subject: str
    body: str
    merge: bool
    rows: list = field(default_factory=list)
    _events: dict | None = field(default=None, repr=False, compare=False)

    def events(self) -> dict[str, str]:
        """{memory id: action} as the commit's trailers name them (memvault's commits only). Read once:
        `log ID` asks again on every pass of its replacements, and an import's commit names 10,000."""
        if self._events is None:
            self._events = self._read_events()
        return self._events

    def _read_events(self) -> dict[str, str]:
        found: dict[str, str] = {}
        if not self.subject.startswith("memvault "):
            return found
        for line in self.body.split("\n"):
            if not line.startswith("Memvault-"):
                continue
            key, _, value = line.partition(": ")
            if key == "Memvault-Replaced":
                old, _, new = value.partition(" -> ")
                found[old.strip()] = "replaced"
                found.setdefault(new.strip(), "added")
            elif key in TRAILER_ACTIONS:
                found[value.strip()] = TRAILER_ACTIONS[key]
        return found

    def resolved(self) -> list[_Resolved]:
        """The memories a sync's merge settled, from its trailers."""
        found = []
        if not (self.merge and self.subject.startswith("memvault ")):
            return found
        for line in self.body.split("\n"):
            if not line.startswith("Memvault-Resolved: "):
                continue
            what, case, rest = (line[len("Memvault-Resolved: "):].split(": ", 2) + ["", ""])[:3]
            parsed = _RESOLVED.match(rest)
            if parsed is None or what.startswith(files.ENTRIES + "/") or "/" in what:
                continue  # a file that is not a memory (memvault.toml), or words this memvault does not know
            sibling = parsed["sibling"]
            path = parsed["path"]
            if path is None and sibling and "__" in sibling:  # an older trailer: the memory's usual name
                parts = sibling.split("/")
                if len(parts) >= 4 and parts[2] == files.DELETED:
                    stamp = parts[-1].split("__")[0]
                    path = "/".join(parts[:2] + parts[3:-1] + [f"{stamp}__{what}.md"])
            found.append(_Resolved(what, case, parsed["whose"], path, parsed["sha"], sibling))
        return found


def id_resolver(vault):
    """For `history(..., resolve=)`: the files that hold memories whose id starts with a prefix now
    (by their front matter, whatever their names say), found through the index's record; git is
    asked once, here, which files changed, for every id the story links."""
    index = vault.index
    changed = index.changed_paths()

    def resolve(wanted: str) -> dict[str, list[str]]:
        held: dict[str, list[str]] = {}
        for memory in vault.read_all(index.id_candidates(wanted.lower(), changed)):
            if memory.id.lower().startswith(wanted.lower()):
                held.setdefault(memory.id, []).append(vault.relative(memory.path))
        return held

    return resolve


def history(root: Path, limit: int | None = None, since: str | None = None, follow: str | None = None,
            max_changes: int | None = None, resolve=None, until: str | None = None) -> list[LogEntry]:
    """Newest first. `follow` is an id or unique prefix, traced through replacements.

    max_changes: read and list at most this many changes of one commit (an import is one commit
    of 100,000 files); `changes_total` still counts them all. resolve(id or prefix): {id: [paths
    relative to the vault]} of the memories the folder holds now (see _follow); without it,
    memories are looked for by the ids in their file names."""
    if not (root / ".git").exists():
        raise MemvaultError(f"{root} has no git history (is enable_git_versioning off?)")
    git_dates, since_time, until_time = [], None, None
    if since:
        try:  # ISO dates are compared exactly; git's own parser takes the rest ("2 weeks ago")
            since_time = files.parse_time(since, "since")
        except ValueError:
            git_dates.append(f"--since={since}")
    if until:
        try:
            until_time = files.parse_time(until, "until")
        except ValueError:
            git_dates.append(f"--until={until}")

    def within(entry) -> bool:
        return (since_time is None or entry.date >= since_time) and (until_time is None or entry.date <= until_time)

    git_limits = since_time is None and until_time is None  # an ISO bound is checked here, after git
    if follow:
        entries = [e for e in _follow(root, follow, git_dates, resolve or (lambda wanted: {})) if within(e)]
        return entries[:limit] if limit else entries
    commits = [c for c in _entries_log(root, git_dates, limit if git_limits else None) if within(c)]
    if limit:
        commits = commits[:limit]
    shown = {c.sha: _memory_rows(c.rows)[:max_changes] if max_changes is not None else _memory_rows(c.rows)
             for c in commits}
    # Read each shown file as it was after the commit (or before it, when removed; and before an
    # edit, to show what it said), by blob id; a memory a merge settled, by its path in the merge.
    resolved = {c.sha: c.resolved() for c in commits}
    blobs = _read_blobs(root, {blob for rows in shown.values() for row in rows for blob in row[3:5]},
                        {f"{sha}:{r.path}" for sha, found in resolved.items() for r in found if r.path})
    entries = []
    for commit in commits:
        entry = LogEntry(commit.sha, commit.date, commit.subject, _command_of(commit.subject))
        entry.changes = _changes(shown[commit.sha], blobs, root, commit.events())
        entry.changes += _resolutions(commit, resolved[commit.sha], blobs, root, {c.id for c in entry.changes})
        if not entry.changes and shown[commit.sha]:
            continue  # every change of it unseen (an older vault's commit that only marked turns learned from)
        _name_causes(entry, root)
        every = _memory_rows(commit.rows)
        entry.changes_total = len(entry.changes) if len(shown[commit.sha]) == len(every) else \
            _count_memories(every) + len(resolved[commit.sha])
        if max_changes is not None:
            entry.changes = entry.changes[:max_changes]
        entries.append(entry)
    return entries


def _read_blobs(root: Path, blobs, names=()) -> dict[str, str | None]:
    """The contents of these blob ids (empty and all-zero ids left out) and `<commit>:<path>` names,
    through one cat-file."""
    from memvault.store.gitrepo import read_blobs

    return read_blobs(root, sorted(b for b in blobs if b and b.strip("0")) + sorted(names))


def _raw_log(root: Path, *args: str) -> list[_Commit]:
    """The commits of `git log --raw` with these arguments, each with its changed files; a merge with
    what it made itself (`-c`: the files that differ from every parent).

    --raw names each file's blob, which cat-file reads directly; `<commit>:<path>` names made it
    walk the commit's trees for every file, which took minutes for an import of 10,000 memories."""
    try:
        raw = _git(root, "-c", "core.quotePath=false", "log", "-M", "-c", "--raw", "--no-abbrev",
                   f"--format={RS}%H{US}%P{US}%aI{US}%s{US}%b{US}", *args)
    except MemvaultError as exc:
        if "does not have any commits" in str(exc):
            return []
        raise
    commits = []
    for chunk in raw.split(RS)[1:]:
        sha, parents, date, subject, body, status = chunk.split(US, 5)
        commits.append(_Commit(sha, datetime.fromisoformat(date), subject, body, len(parents.split()) > 1,
                               _parse_status(status)))
    return commits


def _entries_log(root: Path, since_args: list[str], limit: int | None):
    """The newest `limit` commits that changed something under entries/ (or are a sync's merge),
    with those changes.

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


def _entry_rows(commit: _Commit) -> bool:
    """Keep only the changes under entries/; whether the commit is one `log` shows: it changed
    something there, or it is a merge a sync made (its resolutions are in its trailers)."""
    commit.rows[:] = [row for row in commit.rows if row[1].startswith(files.ENTRIES + "/")]
    return bool(commit.rows) or (commit.merge and commit.subject.startswith("memvault "))


def _memory_rows(rows):
    return [row for row in rows if row[1].endswith(".md")]


def _count_memories(rows) -> int:
    """How many memories these changed files are, without reading them: a file and its tombstone
    share a name (<ts>__<id>.md), so a move that git saw as a delete plus an add counts once."""
    names = [row[1].rpartition("/")[2] for row in rows]  # not PurePosixPath: 0.6 s at 100,000 rows
    return len({name for name in names if "__" in name}) + sum(1 for name in names if "__" not in name)


# Which row of one commit speaks for a memory when several do (a move git did not see as a rename
# is a delete plus an add; `log ID` asks git about a memory's path and about its tombstone folder
# apart): a rename, then an edit, then an addition, then a deletion.
_ROW_RANK = {"R": 0, "C": 0, "M": 1, "A": 2, "D": 3}


def _changes(rows, blobs: dict[str, str | None], root: Path, events: dict[str, str] | None = None
             ) -> list[MemoryChange]:
    """One change per memory of these rows, with the action the commit's trailers name where the
    files alone are ambiguous (a memory restored: git may see its tombstone removed and the memory
    added, or an undone edit)."""
    by_id: dict[str, tuple[int, MemoryChange]] = {}
    for letter, path, old, blob, before in sorted(rows, key=lambda row: (_ROW_RANK.get(row[0], 4), row[1])):
        change = _describe(letter, path, old, blobs.get(blob), root)
        if change is None or change.id in by_id:
            continue
        if change.action == "edited" and before and _unseen(blobs.get(before), blobs.get(blob), root, path):
            continue  # nothing a reader sees changed (a turn marked learned from)
        if change.action == "edited" and before:
            change.before, change.text = _edit_lines(blobs.get(before), blobs.get(blob), root, path, change.text)
        by_id[change.id] = (len(by_id), change)
    changes = [change for _, change in sorted(by_id.values(), key=lambda item: item[0])]
    for change in changes:
        if (events or {}).get(change.id) == "restored":
            change.action = "restored"
        elif (events or {}).get(change.id) == "scrubbed":  # its text before held the secret: not shown
            change.action, change.before = "scrubbed", None
    return changes


def _resolutions(commit: _Commit, resolved: list[_Resolved], blobs: dict[str, str | None], root: Path,
                 shown: set[str]) -> list[MemoryChange]:
    """A sync merge's `Memvault-Resolved` trailers as `resolved` changes: the memory that stands, as the
    merge left it, and why."""
    changes = []
    for r in resolved:
        if r.id in shown:
            continue
        content = blobs.get(f"{commit.sha}:{r.path}") if r.path else None
        change = _describe("M", r.path, None, content, root) if r.path and content is not None else None
        if change is None:
            change = MemoryChange(r.id, "resolved", "", r.path or "")
        change.id, change.action, change.before = r.id, "resolved", None
        kept = f"kept the version of {r.kept_commit[:8]}" if r.kept_commit else f"kept {r.whose}"
        other = f"; the other is the tombstone {_id_in_name(r.sibling)[:8]}" if r.sibling else ""
        change.cause = f"{_command_of(commit.subject)}: {r.case}: {kept}{other}"
        changes.append(change)
    return changes


def taken_out(root: Path, id_or_prefix: str) -> str | None:
    """Why no file holds a memory any more, from git: the newest commit that removed a file named for
    it (memvault names every file `<ts>__<id>.md`), as words for a "no memory with id" error: an
    `undo` (its `Memvault-Undoes` trailer: which commit it took back) or another removal (by hand, a
    purge). None when git has no such file, or is not there to ask. Asked only after a lookup failed:
    it reads every commit's tree."""
    from memvault.store import gitrepo

    needle = id_or_prefix.strip().lower()
    if not re.fullmatch(r"[0-9a-f-]{4,36}", needle) or not gitrepo.is_repo(root):
        return None
    try:
        out = gitrepo.git_output(root, "log", "-1", "--no-renames", "--diff-filter=D",
                                 "--format=%H%x1f%s%x1f%(trailers:key=Memvault-Undoes,valueonly)%x1e", "--",
                                 f":(glob){files.ENTRIES}/**/*__{needle}*.md")
    except MemvaultError:
        return None
    record = out.split(RS)[0].strip()
    if not record:
        return None
    commit, subject, undoes = (record.split(US) + ["", ""])[:3]
    undoes = undoes.strip()
    if undoes:
        return f"it was taken out by an undo, commit {commit[:8]}, which took back {undoes[:8]}"
    return f"its file was removed in commit {commit[:8]} ({subject})"


def _id_in_name(path: str) -> str:
    return PurePosixPath(path).stem.split("__")[-1]


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def counterparts(path: str) -> list[str]:
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
    (a replaced fact names its successor only in its tombstone). Every side of a merge is walked
    (`--full-history`: git would otherwise follow only the side whose file the merge kept, and
    leave out what the other machine did), and a sync's merge tells what it resolved in its
    trailers."""
    needle = wanted.strip().lower()
    if len(needle) < 4:
        raise UsageError(f"id prefix {wanted!r} is too short (at least 4 characters)")
    commits: dict[str, _Commit] = {}
    parsed: dict[tuple, MemoryChange | None] = {}

    def collect(*pathspecs: str, walk: tuple[str, ...] = ()) -> None:
        if pathspecs:
            for commit in _raw_log(root, "--full-history", *since_args, *walk, "--", *pathspecs):
                held = commits.setdefault(commit.sha, _Commit(commit.sha, commit.date, commit.subject, commit.body,
                                                              commit.merge, []))
                held.rows = sorted(set(held.rows) | set(_memory_rows(commit.rows)))

    def look_for(needles: set[str]) -> None:
        """The history of the files that hold these ids (or prefixes) now, else of their names."""
        literal, by_name = set(), set()
        for wanted_id in needles:
            held = resolve(wanted_id)
            if not held:
                by_name.add(wanted_id)
            for paths in held.values():
                literal.update(p for path in paths for p in counterparts(path))
        collect(*(f":(literal){p}" for p in sorted(literal)),
                *(f":(glob,icase)entries/**/*__{_glob_escape(i)}*.md" for i in sorted(by_name)))

    def changes() -> dict[str, list[MemoryChange]]:
        settled = {sha: commit.resolved() for sha, commit in commits.items()}
        blobs = _read_blobs(root, {blob for commit in commits.values() for row in commit.rows if row not in parsed
                                   for blob in row[3:5]},
                            {f"{sha}:{r.path}" for sha, found in settled.items() for r in found if r.path})
        out: dict[str, list[MemoryChange]] = {}
        for sha, commit in commits.items():
            for row in commit.rows:
                if row not in parsed:
                    parsed[row] = _describe(row[0], row[1], row[2], blobs.get(row[3]), root)
                    if parsed[row] is not None and parsed[row].action == "edited" and row[4] and \
                            _unseen(blobs.get(row[4]), blobs.get(row[3]), root, row[1]):
                        parsed[row] = None  # nothing a reader sees changed
                    if parsed[row] is not None and parsed[row].action == "edited" and row[4]:
                        parsed[row].before, parsed[row].text = _edit_lines(blobs.get(row[4]), blobs.get(row[3]), root,
                                                                           row[1], parsed[row].text)
            found = _pick_rows(commit.rows, parsed, commit.events())
            found += _resolutions(commit, settled[sha], blobs, root, {c.id for c in found})
            if found:
                out[sha] = found
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
                              if c.id in ids and c.path})
            collect(*(f"{folder}/{files.DELETED}" for folder in folders),
                    walk=("--no-walk=unsorted", *sorted(touching)))
        fresh = new_ids - searched
        searched |= fresh
        look_for(fresh)
        by_commit = changes()

    order = {sha: n for n, sha in enumerate(_git(root, "rev-list", "HEAD").split())}
    entries = []
    for sha in sorted(commits, key=lambda s: (order.get(s, len(order)), s)):
        commit = commits[sha]
        found = by_commit.get(sha, [])
        if not any(c.id in ids for c in found):
            continue
        entry = LogEntry(sha, commit.date, commit.subject, _command_of(commit.subject))
        entry.changes = list(found)  # all that was read of the commit: causes are named from it
        _name_causes(entry, root)
        entry.changes = [c for c in entry.changes if c.id in ids]
        entry.changes_total = len(entry.changes)
        entries.append(entry)
    return entries


def _pick_rows(rows, parsed: dict, events: dict[str, str]) -> list[MemoryChange]:
    """_changes for rows described already (`log ID` reads them once, whatever pass found them)."""
    by_id: dict[str, MemoryChange] = {}
    for row in sorted(rows, key=lambda row: (_ROW_RANK.get(row[0], 4), row[1])):
        change = parsed.get(row)
        if change is not None and change.id not in by_id:
            by_id[change.id] = change
    for change in by_id.values():
        if events.get(change.id) == "restored":
            change.action = "restored"
    return list(by_id.values())


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
    conflict = meta.get("sync_conflict") if _in_deleted(path) else None
    return MemoryChange(memory_id, action, text, path, reason=reason, replaced_by=replaced_by,
                        replaces=meta.get("replaces"), note=str(note) if note else None,
                        role=role, kind=files.kind_of_role(role) if role else None,
                        learned_from=meta.get("learned_from"), conflict=str(conflict) if conflict else None)


# How much of a line an edit's row shows (`~ edited  before -> after`).
EDIT_WIDTH = 80


def _edit_lines(before: str | None, after: str | None, root: Path, path: str, shown: str) -> tuple[str | None, str]:
    """What an edit's row shows, before and after: the first lines when they differ, else the first
    line that differs (after "…", cut around where it differs), else, the text the same, the first line
    and the front-matter keys that changed: `~ edited # Lena -> # Lena` read as no change at all (issue
    44). shown: the after side as _describe gave it (the first line)."""
    if before is None or after is None:
        return _first_line(before, root, path), shown
    try:
        old = files.parse_memory(before, root / path, root=root)[0]
        new = files.parse_memory(after, root / path, root=root)[0]
    except Exception:
        return _first_line(before, root, path), shown
    if old.text == new.text:
        keys = sorted(k for k in set(old.front_matter()) | set(new.front_matter())
                      if old.front_matter().get(k) != new.front_matter().get(k) and k != "updated_at")
        line = new.first_line()
        return line, f"{line} (front matter: {', '.join(keys)})" if keys else line
    old_lines = [ln.strip() for ln in old.text.splitlines() if ln.strip()]
    new_lines = [ln.strip() for ln in new.text.splitlines() if ln.strip()]
    at = next((i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b), min(len(old_lines), len(new_lines)))
    a = old_lines[at] if at < len(old_lines) else "(no line)"
    b = new_lines[at] if at < len(new_lines) else "(no line)"
    lead = "… " if at else ""
    return lead + _around(a, b), lead + _around(b, a)


def _around(line: str, other: str) -> str:
    """The line cut to EDIT_WIDTH, so that where it first differs from `other` is in what is shown."""
    if len(line) <= EDIT_WIDTH:
        return line
    first = next((i for i, (x, y) in enumerate(zip(line, other)) if x != y), min(len(line), len(other)))
    start = max(0, min(first - EDIT_WIDTH // 4, len(line) - (EDIT_WIDTH - 2)))
    cut = line[start:start + EDIT_WIDTH - (2 if start else 1)]
    return ("…" if start else "") + cut + ("…" if start + len(cut) < len(line) else "")
# Front matter memvault keeps for itself about a turn's handling, not what it says: an edit that changed
# only these (a user turn marked learned from, its `unanswered` mark dropped when its reply came) is not
# shown by `log`.
BOOKKEEPING = frozenset({files.EXTRACTED, "unanswered"})


def _unseen(before: str | None, after: str | None, root: Path, path: str) -> bool:
    """Whether an edit changed nothing a reader sees: the same text, the same front matter but for
    BOOKKEEPING keys."""
    if before is None or after is None:
        return False
    try:
        old, new = (files.parse_memory(content, root / path, root=root)[0] for content in (before, after))
    except Exception:
        return False
    visible = lambda m: (m.text, {k: v for k, v in m.front_matter().items() if k not in BOOKKEEPING})  # noqa: E731
    return visible(old) == visible(new)


def _first_line(content: str | None, root: Path, path: str) -> str | None:
    if content is None:
        return None
    try:
        return files.parse_memory(content, root / path, root=root)[0].first_line()
    except Exception:
        return "(unreadable)"


def _name_causes(entry: LogEntry, root: Path) -> None:
    """Say what retired each memory the commit replaced, deleted or evicted: the user's message
    a learned fact came from (its chat turn), else the command (and the user's reason; for the
    tombstone a sync made of a version that lost a conflict, why)."""
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
        elif change.conflict:
            change.cause = f"{entry.command}: {change.conflict}"
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


def log(vault, id_or_prefix: str | None = None, *, limit: int | None = None, since: str | None = None,
        until: str | None = None, max_changes: int | None = None) -> list:
    """`Memvault.log`: the vault's history (history), after what must hold first: a vault, git (a merge
    under way, a detached HEAD: VaultStateError), a commit (none yet: nothing, or NotFound for an id),
    `since` and `until` an ISO date (compared exactly) or one git reads."""
    from memvault.errors import VaultStateError
    from memvault.store import gitrepo

    vault.require_existing()
    missing = vault.history_missing()
    if missing:
        raise VaultStateError(missing)
    if vault.settings.enable_git_versioning and not (vault.root / ".git").exists():
        if id_or_prefix is not None:
            raise NotFound(f"no memory with id {id_or_prefix!r} in the history")
        return []  # nothing committed yet (a watching server made the folders, or files came by hand)
    for option, value in (("since", since), ("until", until)):
        if value is not None:
            try:
                files.parse_time(value)
            except ValueError:
                gitrepo.check_date(vault.root, value, option)
    if id_or_prefix is None:
        return history(vault.root, limit=limit, since=since, until=until, max_changes=max_changes)
    return history(vault.root, limit=limit, since=since, until=until, follow=id_or_prefix, max_changes=max_changes,
                   resolve=id_resolver(vault))
