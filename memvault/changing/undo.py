"""`memvault undo` and `memvault restore`: take back one memvault change, or bring one memory back.

Undo is the exact inverse of one memvault commit, made as a new commit: every file the commit
added under entries/ is taken out (git history keeps it), every file it changed or moved away
is put back as it was before. So a replaced or evicted memory is live again, a learned fact is
gone, and `memvault undo` of an undo brings it all back. It refuses a commit memvault did not
make, and a commit whose files changed since (undo the later change first), so it never
overwrites work it does not know about.

Restore brings one deleted or replaced memory back live, in place of its tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath

from memvault.store import files
from memvault.errors import MemvaultError, NotFound, UsageError
from memvault.store.vault import REMOVE, RESTORE, Event, Vault

# memvault's commits, by subject; "init" makes the vault and has nothing to take back.
_OURS = "memvault "


@dataclass
class UndoResult:
    commit: str  # the commit taken back
    subject: str
    events: list[Event] = field(default_factory=list)
    commit_sha: str | None = None  # the new commit

    def to_json(self) -> dict:
        return {"undone": self.commit, "subject": self.subject, "commit": self.commit_sha,
                "changes": [e.to_json() for e in self.events]}


def undo(vault: Vault, commit: str | None = None) -> UndoResult:
    """Take back one memvault commit (default: the newest one not taken back yet)."""
    from memvault.store import gitrepo

    vault.require_existing()
    if not gitrepo.is_repo(vault.root):
        raise MemvaultError(f"{vault.root} has no git history to undo (is enable_git_versioning off?)")
    sha, subject, parents = _pick(vault, commit)
    if not subject.startswith(_OURS) or subject.startswith("memvault init:"):
        raise UsageError(f"commit {sha[:12]} ({subject!r}) was not made by a memvault command; "
                         f"undo only takes back memvault's own changes (for others: `git -C {vault.root} revert "
                         f"{sha[:12]}`)")
    if len(parents) != 1:
        raise UsageError(f"commit {sha[:12]} is a merge; undo takes back one memvault change at a time")
    changes = _changes(vault, sha)
    if not changes:
        raise UsageError(f"commit {sha[:12]} ({subject!r}) changed no memories")
    # A rolling summary written since is no reason to refuse (it changes with every lesson): it is
    # left as it is and set aside below, so it no longer states what this undo takes back.
    moved_on = _refuse_if_changed_since(vault, sha, changes, allowed=_is_rolling_summary)
    changes = [(status, path) for status, path in changes if path not in moved_on]
    before = gitrepo.read_blobs(vault.root, [f"{sha}^:{path}" for status, path in changes if status != "A"])
    result = UndoResult(sha, subject)
    with vault.change("undo") as change:
        change.title = f"take back {sha[:8]} ({subject.split(':', 1)[0]})"
        change.undoes = sha
        restored_ids = set()
        for status, path in changes:
            if status == "A":
                continue
            target = vault.root / path
            content = before[f"{sha}^:{path}"]
            memory = files.parse_memory(content, target, root=vault.root)[0]
            change.restore_file(memory, target, content)
            if not files.is_deleted_path(PurePosixPath(path)):
                restored_ids.add(memory.id)
        taken_out: dict[str, list] = {}
        for status, path in changes:
            if status != "A":
                continue
            target = vault.root / path
            memory = files.read_memory(target, vault.root)[0]
            change.take_out(memory, show=memory.id not in restored_ids)
            taken_out.setdefault(memory.conversation_id, []).append(memory)
        _summaries_follow(change, taken_out, moved_on)
    result.events = [e for e in change.events if e.action in (RESTORE, REMOVE) and e.memory.role != "summary"]
    result.commit_sha = change.commit_sha
    return result


def restore(vault: Vault, id_or_prefix: str, now: datetime | None = None) -> Event:
    """Bring one deleted or replaced memory back live: its tombstone moves back to where it was,
    without deleted_at, deleted_reason and replaced_by, with restored_at."""
    vault.require_existing()
    memory = vault.find(id_or_prefix)
    if not memory.is_deleted:
        raise UsageError(f"memory {memory.id} is not deleted: {vault.relative(memory.path)}")
    rel = PurePosixPath(vault.relative(memory.path))
    live = vault.root.joinpath(*rel.parts[:2], *rel.parts[3:])
    if live.exists():
        raise MemvaultError(f"{vault.relative(live)} exists; nothing was restored")
    with vault.change("restore") as change:
        reason = memory.extra.get("deleted_reason")
        for key in ("deleted_at", "deleted_reason", "replaced_by"):
            memory.extra.pop(key, None)
        memory.extra["restored_at"] = files.format_time(now or files.utcnow())
        event = change.move_back(memory, live, reason)
    return event


def _pick(vault: Vault, commit: str | None) -> tuple[str, str, list[str]]:
    from memvault.store import gitrepo

    if commit is not None:
        try:
            out = gitrepo.git_output(vault.root, "log", "-n1", "--format=%H%x1f%s%x1f%P", f"{commit}^{{commit}}", "--")
        except MemvaultError:
            raise NotFound(f"no commit {commit!r} in {vault.root}") from None
        # Not strip(): it takes \x1f for white space, and a first commit's parent list is empty.
        sha, subject, parents = out.rstrip("\n").split("\x1f")
        return sha, subject, parents.split()
    # The newest memvault change not taken back yet, so that `undo`, `undo`, `undo` walks back
    # through the history; an undo's own trailer names what it took back. (Hand commits are
    # skipped, so are a sync's merges, and `init` never touches entries/.)
    out = gitrepo.git_output(vault.root, "log", "--format=%H%x1f%s%x1f%P%x1f%(trailers:key=Memvault-Undoes,valueonly)%x1e",
                             "--grep=^memvault ", "--no-merges", "--", files.ENTRIES)
    undone: set[str] = set()
    for record in out.split("\x1e"):
        if not record.strip("\n"):
            continue
        sha, subject, parents, target = record.strip("\n").split("\x1f")
        if sha in undone:
            continue  # taken back already (an undo that was itself undone counts as taken back too)
        if subject.startswith("memvault undo:"):
            undone.update(target.split())
            continue
        return sha, subject, parents.split()
    raise NotFound(f"no memvault change to undo in {vault.root}")


def _changes(vault: Vault, sha: str) -> list[tuple[str, str]]:
    """(status, path) of the memory files the commit touched; renames as a removal plus an addition."""
    from memvault.store import gitrepo

    out = gitrepo.git_output(vault.root, "-c", "core.quotePath=false", "diff-tree", "-r", "--no-renames", "-z",
                             "--name-status", f"{sha}^", sha, "--", files.ENTRIES)
    fields = out.split("\0")
    rows = [(fields[i][0], fields[i + 1]) for i in range(0, len(fields) - 1, 2) if fields[i]]
    return [(status, path) for status, path in rows if path.endswith(".md")]


def _is_rolling_summary(path: str) -> bool:
    """entries/<conversation>/summaries/summary.md"""
    parts = PurePosixPath(path).parts
    return len(parts) == 4 and parts[0] == files.ENTRIES and parts[2:] == ("summaries", "summary.md")


def _summaries_follow(change, taken_out: dict[str, list], moved_on: set[str]) -> None:
    """The rolling summary no longer states what the undo took out (docs/design.md, "The write
    path"): set aside when it changed since the commit (it was left as it is) or may state a memory
    taken out; a summary put back as the commit found it predates them and stays."""
    from memvault.learning import summaries

    for path in moved_on:
        memory = files.read_optional(change.root / path, change.root)
        if memory is not None:
            summaries.set_aside(change, memory.conversation_id, taken_out.get(memory.conversation_id) or [memory],
                                force=True)
    for conversation, memories in taken_out.items():
        summaries.set_aside(change, conversation, memories)


def _refuse_if_changed_since(vault: Vault, sha: str, changes: list[tuple[str, str]],
                             allowed=lambda path: False) -> set[str]:
    """Every file must be as the commit left it (present with its content, or absent), but those
    `allowed` may have changed: returns these."""
    from memvault.store import gitrepo

    after = gitrepo.read_blobs(vault.root, [f"{sha}:{path}" for status, path in changes if status != "D"])
    moved_on: set[str] = set()
    for status, path in changes:
        target = vault.root / path
        expected = None if status == "D" else after[f"{sha}:{path}"]
        try:
            current = target.read_bytes().decode("utf-8")
        except FileNotFoundError:
            current = None
        except (OSError, UnicodeDecodeError):
            current = "\0"  # unreadable now: certainly not what the commit left
        if current != expected and allowed(path):
            moved_on.add(path)
        elif current != expected:
            later = gitrepo.git_output(vault.root, "log", "-n1", "--format=%h %s", f"{sha}..", "--", path).strip()
            by = f" by {later}" if later else " by hand (not committed)"
            raise MemvaultError(f"{path} changed since {sha[:8]}{by}; undo the later change first, nothing was "
                                "written")
    return moved_on
