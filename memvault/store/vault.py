"""The vault: a folder of memory files that is also a git repository.

`Vault.change(command)` is the one way to write: it takes the inter-process
lock, lets the command add, replace and soft-delete memories, then updates the
index for exactly those files and makes one git commit naming them.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import contextlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from memvault.store import files
from memvault.store.config import SETTINGS_FILE, Settings, load_settings
from memvault.errors import LockTimeout, MemoryFileError, MemvaultError, NotFound, UsageError
from memvault.store.files import Memory
from memvault.store.lock import vault_lock

SIDECAR = ".memvault"
# A group of chat stores takes in the writes that queue meanwhile, in rounds, for up to this long before
# its compaction and commit (Vault._write_group): a commit then holds up to a second of exchanges.
GROUP_SECONDS = 1.0


def _stderr(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()


class Vault:
    """The folder, its settings, its lock, its git repository and its index (docs/design.md)."""

    def __init__(self, root: Path, settings: Settings | None = None, auto_index: bool = True,
                 notice: Callable[[str], None] | None = None):
        self.root = Path(os.path.abspath(Path(root).expanduser()))
        self._settings = settings
        # Notices and warnings (a write waiting for the lock, a file skipped by the index); the CLI
        # passes one that -q silences, a server one that logs.
        self.notice: Callable[[str], None] | None = notice or _stderr
        # Index what a change wrote in the same invocation (costs a model load);
        # off only for callers that sync the index themselves.
        self.auto_index = auto_index
        self._index = None
        # The threads of one process (a server's) queue here for their writes, in turn, rather than
        # all polling the flock, which favours none of them (docs/design.md, "Locking").
        self._writers = threading.RLock()
        # Group commit (`grouped`): the writes waiting, and whether a thread is writing a group now.
        self._group = threading.Condition()
        self._group_waiting: list[_GroupWrite] = []
        self._group_writing = False
        # The files this process wrote aside (`write_aside`: a chat's user turn, neither indexed nor
        # committed yet) until the change that stores them has (`stored_aside`): a warm search does not
        # index them meanwhile (reindex.fresh_index defers their folder events).
        self._aside: set[str] = set()
        self._aside_lock = threading.Lock()
        # Bumped before every file a change of this process writes or removes: a status of git kept
        # for one read (Index.one_status) is not reused past a write.
        self.writes = 0

    @classmethod
    def open(cls, root: Path, overrides: dict | None = None, notice: Callable[[str], None] | None = None) -> "Vault":
        root = Path(os.path.abspath(Path(root).expanduser()))
        if root.exists() and not root.is_dir():
            raise UsageError(f"vault path {root} exists and is not a folder")
        return cls(root, load_settings(root if root.is_dir() else None, overrides=overrides), notice=notice)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.root if self.root.is_dir() else None)
        return self._settings

    # -- layout --------------------------------------------------------------
    @property
    def index(self):
        """The vault's index, opened once: reads and this process's writes share one table handle."""
        if self._index is None:
            from memvault.store.index import Index

            self._index = Index(self, notice=self.notice)
        return self._index

    def say(self, message: str) -> None:
        if self.notice is not None and message:
            self.notice(message)

    @property
    def sidecar(self) -> Path:
        return self.root / SIDECAR

    @property
    def lock_path(self) -> Path:
        return self.sidecar / "lock"

    @property
    def entries(self) -> Path:
        return self.root / files.ENTRIES

    def exists(self) -> bool:
        return self.entries.is_dir() or (self.root / ".git").is_dir()

    def require_existing(self) -> "Vault":
        """For commands that read: a clear line instead of creating an empty vault."""
        if not self.exists():
            raise MemvaultError(f"no vault at {self.root} (it is created by the first `memvault add`)")
        return self

    def relative(self, path: Path) -> str:
        return Path(path).relative_to(self.root).as_posix()

    # -- creation ------------------------------------------------------------
    def create(self) -> None:
        """Make the folder, git init it, write .gitignore, initial commit. Idempotent."""
        self._refuse_foreign_repository()
        self._make_folders()
        with vault_lock(self.lock_path, timeout=self.settings.lock_timeout, holder="init", on_wait=self.notice):
            self._init_repository()

    def _make_folders(self) -> None:
        # Safe to race: every mkdir tolerates an existing folder.
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"vault path {self.root} exists and is not a folder")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.sidecar.mkdir(exist_ok=True)
            self.entries.mkdir(exist_ok=True)
            # One name per thread: the threads of a server write at once, and a shared probe name
            # let one thread unlink another's probe ("not writable: No such file or directory").
            probe = self.sidecar / f".write-probe-{os.getpid()}-{threading.get_ident()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise MemvaultError(f"vault {self.root} is not writable: {exc.strerror or exc}") from None

    def _refuse_foreign_repository(self) -> None:
        """A first write into a git repository that tracks other files (`--vault` pointed at a project's
        code) is refused before anything is written: every memory would be a commit of that project.
        Setting share_repository allows it. A folder with entries/ is a vault already (one stat)."""
        if self.settings.share_repository or not self.settings.enable_git_versioning or self.entries.is_dir():
            return
        from memvault.store import gitrepo
        from memvault.errors import VaultStateError

        if not gitrepo.is_repo(self.root) or gitrepo.head_sha(self.root) is None:
            return
        tracked = [p for p in gitrepo.git_output(self.root, "ls-files", "-z").split("\0") if p]
        foreign = [p for p in tracked if p not in (".gitignore", SETTINGS_FILE) and not p.startswith(files.ENTRIES + "/")]
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise VaultStateError(f"{self.root} is a git repository that tracks other files ({shown}): memvault "
                                  "would commit every memory into it; give --vault a folder of its own, or set "
                                  "share_repository = true (memvault.toml, or MEMVAULT_SHARE_REPOSITORY=1) to keep "
                                  "the vault there; nothing was written")

    def history_missing(self) -> str | None:
        """Why the vault cannot be written with git as it is, when it holds memory files but has no git
        repository (its .git deleted, or files put there by hand), with what to run; else None. A new
        repository made silently would leave every memory out of git until a reindex."""
        from memvault.store import gitrepo

        if not self.settings.enable_git_versioning or gitrepo.is_repo(self.root) or not self.entries.is_dir():
            return None
        if next(iter(files.walk_entries(self.root, include_deleted=True, placed_only=False)), None) is None:
            return None
        return (f"the vault {self.root} has memory files but no git repository (.git is missing): to start a new "
                f"history with the files as they are, run `git -C {self.root} init` then `memvault --vault "
                f"{self.root} reindex`; if it has a copy on a git remote, `memvault clone` that into a new folder "
                "instead")

    def _init_repository(self) -> None:
        # Under the lock: two first writers must not both run git init.
        if self.settings.enable_git_versioning:
            from memvault.store import gitrepo
            from memvault.errors import VaultStateError

            missing = self.history_missing()
            if missing:
                raise VaultStateError(f"{missing}; nothing was written")
            gitrepo.init_repo(self.root)
        elif not (self.root / ".gitignore").exists():
            from memvault.store.gitrepo import GITIGNORE

            files.atomic_write(self.root / ".gitignore", GITIGNORE)

    # -- writing -------------------------------------------------------------
    @contextmanager
    def change(self, command: str, lock_timeout: float | None = None, commit: bool = True,
               progress: Callable[[int, int], None] | None = None, index: bool = True) -> Iterator["Change"]:
        """Lock, create if needed, collect writes, then index + commit (also when the command fails,
        so that what was already written is kept and recorded).

        Waits up to `lock_timeout` (default: the lock_timeout setting) for another writer.
        commit=False: write and index only; a later change of the same command rewrites these
        files and commits them (a chat's user turn, written before the model answers).
        index=False (with commit=False): write only; that later change indexes them too, and a
        process killed in between leaves a file that the next sync reads like a hand edit.
        progress(done, total): called while the written files are embedded.
        """
        if self.settings.enable_git_versioning:
            from memvault.store import gitrepo

            gitrepo.check_writable(self.root)  # before anything is written
        self._refuse_foreign_repository()
        self._make_folders()
        timeout = self.settings.lock_timeout if lock_timeout is None else lock_timeout
        if not self._writers.acquire(timeout=timeout):
            raise LockTimeout(f"another write of this process has held {self.lock_path} for over {timeout:.0f}s "
                              "(setting lock_timeout); try again")
        with contextlib.ExitStack() as held:
            held.callback(self._writers.release)
            held.enter_context(vault_lock(self.lock_path, timeout=timeout, holder=command, on_wait=self.notice))
            self._init_repository()
            self.settle_interrupted(held=True)
            from memvault.store.journal import Journal

            change = Change(self, command, progress=progress, index=index)
            change.journal = Journal(self.root, self.sidecar, command)
            try:
                yield change
            finally:
                try:
                    change.make_durable()  # before the journal says done: its files are whole
                    if change.touched:
                        git = commit and self.settings.enable_git_versioning
                        head = None
                        if git and change.journal.opened:
                            from memvault.store import gitrepo

                            head = gitrepo.head_sha(self.root)
                        record = change.commit_record() if git or change.journal.opened else None
                        if change.journal.opened:
                            # From here on a kill leaves a change the next command finishes, not one it takes back
                            change.journal.done(record.subject, record.message(), git, head,
                                                [self.relative(p) for p in change.accepted_paths])
                        # Those waiting to read its files (a conversation's next message) go on once its
                        # rows are in, before the table's compaction and the commit.
                        if change.after_index:  # its files searchable now, before the compaction and commit
                            change.readable_now()
                            change.compact_index()
                        else:
                            change.index_pending(last=True)
                        if git:
                            from memvault.store import gitrepo

                            change.commit_sha = gitrepo.commit_paths(self.root, record, change.commit_paths())
                except BaseException:
                    change.journal.release()  # indexed or committed in part: the next command finishes it
                    raise
                change.journal.finish()
                if change.withheld:
                    from memvault.store import secret_scan

                    self.say(secret_scan.notice(change.withheld, self.root))

    def grouped(self, command: str, write: Callable[["Change"], str | None]) -> Any:
        """One small write (`write(change)`, which may return the commit subject's title for its part)
        made with the others of this process that wait meanwhile, in one change: one lock, one
        index update, one commit (group commit, docs/design.md, "Locking"). Twenty conversations'
        stores then make one commit instead of queueing twenty on the vault lock, while one write alone
        is committed at once, as `change` would. Returns what `write` returned; an exception of `write`
        is raised here (the others' writes are committed all the same), as is one of the commit."""
        mine = _GroupWrite(write)
        with self._group:
            self._group_waiting.append(mine)
            while not mine.done and self._group_writing:
                self._group.wait()
            if mine.done:
                return mine.outcome()
            self._group_writing = True  # this thread writes every write waiting now, its own among them
            group, self._group_waiting = self._group_waiting, []
        try:
            self._write_group(command, group)
        finally:
            with self._group:
                self._group_writing = False
                for each in group:
                    each.done = True
                self._group.notify_all()
        return mine.outcome()

    def _write_group(self, command: str, group: list["_GroupWrite"]) -> None:
        """The group's writes in one change. Writes that queue while it runs join it in rounds: each
        round's rows are indexed and its readers told (Change.after_index) before the next round, and
        the compaction and the commit come once, after the last round (GROUP_SECONDS at most). A
        conversation's next message then waits for its own round's rows, not for another
        conversation's commit (issue 41). `group` gets the writes of every round."""
        import time

        titles: list[str] = []
        started = time.monotonic()
        try:
            with self.change(command) as change:
                change.sync_later = True
                round_ = list(group)
                while round_:
                    for each in round_:
                        change.title = None
                        try:
                            each.result = each.write(change)
                        except BaseException as exc:  # noqa: BLE001 (its caller raises it; the others go on)
                            each.error = exc
                        if change.title:
                            titles.append(change.title)
                    if time.monotonic() - started >= GROUP_SECONDS:
                        break
                    change.readable_now()  # this round's rows in, its readers on their way
                    with self._group:
                        round_, self._group_waiting = self._group_waiting, []
                    group.extend(round_)
                change.title = _group_title(titles)
        except BaseException as exc:  # the commit failed: every write of the group says so
            for each in group:
                each.error = each.error or exc

    def write_aside(self, command: str, memory: Memory) -> Memory:
        """Write a new memory's file without the vault lock, neither indexed nor committed: a chat's
        user turn, on disk before the model is asked, which the change storing the exchange indexes and
        commits. No lock, so that a message's start waits for no other conversation's store (it writes
        a file of its own, atomically; the lock is taken when the vault has no repository yet)."""
        from memvault.store import gitrepo

        if self.settings.enable_git_versioning and not gitrepo.is_repo(self.root):
            with self.change(command, commit=False, index=False) as change:
                return change.add(memory)
        self._make_folders()
        change = Change(self, command, index=False)
        path = self.root / files.relative_path_for(memory)
        with self._aside_lock:  # before its folder event can come
            self._aside.add(os.path.normpath(path))
        try:
            change.add(memory)
        except BaseException:
            self.stored_aside(path)
            raise
        if change.withheld:
            from memvault.store import secret_scan

            self.say(secret_scan.notice(change.withheld, self.root))
        return memory

    def stored_aside(self, path) -> None:
        """A file written aside has been stored by a change (indexed, committed), or given up: the folder's
        events about it are a search's again (fresh_index)."""
        with self._aside_lock:
            self._aside.discard(os.path.normpath(path))

    def written_aside(self, paths) -> set:
        """Of these paths, those written aside and not stored yet (`write_aside`)."""
        with self._aside_lock:
            return {p for p in paths if os.path.normpath(p) in self._aside} if self._aside else set()

    def settle_interrupted(self, held: bool = False) -> None:
        """A change a killed memvault process left half done (.memvault/change.journal) rolled back or
        forward (journal.py), before anything else reads or writes: what every command does first
        (api.open_vault; a write under the lock it takes; a long-lived process's index sync). held: the
        caller holds the vault lock (a write: a change that cannot be settled refuses it); else the lock
        is taken if free (a reader whose settling fails says so and reads on), and when it is not, its
        holder settles first. One stat of .memvault/ when there is nothing to settle."""
        from memvault.store import journal

        if not journal.pending(self.sidecar):
            return
        if held:
            try:
                journal.settle(self, self.say)
            except Exception as exc:  # noqa: BLE001 (LanceDB's, git's, the file system's: said in one line)
                raise MemvaultError(f"a change a killed memvault process left could not be settled: "
                                    f"{exc or type(exc).__name__}; nothing new was written (its record: "
                                    f"{self.sidecar / journal.NAME})") from None
            return
        try:
            with vault_lock(self.lock_path, timeout=0, holder="recovery") as got:
                if got:
                    journal.settle(self, self.say)
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                return  # a read-only vault: read as it is
            self.say(f"memvault: a change a killed memvault process left could not be settled: {exc}")
        except Exception as exc:  # noqa: BLE001 (the read goes on; the next write tries again)
            self.say(f"memvault: a change a killed memvault process left could not be settled: "
                     f"{exc or type(exc).__name__}")

    # -- reading -------------------------------------------------------------
    def iter_memories(
        self,
        conversation: str | None = None,
        roles: Iterable[str] | None = None,
        include_deleted: bool = False,
        on_error: Callable[[MemoryFileError], None] | None = None,
    ) -> Iterator[Memory]:
        """Every readable memory, optionally of one conversation and some roles.

        Files that cannot be read are passed to on_error (or skipped) so one bad file
        never hides the rest.
        """
        role_set = set(roles) if roles else None
        base = self.root
        if conversation is not None:
            base_dir = self.entries / files.conversation_slug(conversation)
            paths = files.walk_entries_under(base_dir, include_deleted) if base_dir.is_dir() else iter(())
        else:
            paths = files.walk_entries(base, include_deleted)
        for memory in self.read_all(paths, on_error):
            if role_set and memory.role not in role_set:
                continue
            yield memory

    def read_all(self, paths: Iterable[Path], on_error: Callable[[MemoryFileError], None] | None = None
                 ) -> Iterator[Memory]:
        """The memories of these files, in order; a file that cannot be read is left out (on_error)."""
        for path in paths:
            try:
                memory, _adopted = files.read_memory(path, self.root)
            except MemoryFileError as exc:
                if on_error:
                    on_error(exc)
                continue
            yield memory

    def find(self, id_or_prefix: str, include_deleted: bool = True) -> Memory:
        """A memory by id or unique id prefix (like git), live ones preferred over tombstones.

        Only the files that may hold it are read: those the index's record gives that id and
        that have not changed since (git says which may have, else their size and mtime), plus
        those the record does not know as they are (hand edits, new files). Git is asked once per
        lookup, or once for all the lookups of one read within `self.index.one_status()`."""
        needle = id_or_prefix.strip().lower()
        if len(needle) < 4:
            raise UsageError(f"id prefix {id_or_prefix!r} is too short (at least 4 characters)")
        candidates = self.index.id_candidates(needle)
        if not include_deleted:
            candidates = [p for p in candidates if not files.is_deleted_path(Path(self.relative(p)))]
        matches = [m for m in self.read_all(candidates) if m.id.lower().startswith(needle)]
        live = [m for m in matches if not m.is_deleted]
        pool = live or matches
        ids = {m.id for m in pool}
        if not pool:
            raise NotFound(f"no memory with id {id_or_prefix!r} in {self.root}")
        if len(ids) > 1:
            shown = ", ".join(sorted(i[:12] for i in ids)[:5])
            raise UsageError(f"id prefix {id_or_prefix!r} is ambiguous: {shown}")
        if len(pool) > 1:  # a copy claiming the id too: the file the index holds is the memory
            owner = self.index.owner_of(pool[0].id)
            return next((m for m in pool if owner and self.relative(m.path) == owner), pool[0])
        return pool[0]


class _GroupWrite:
    """One write of a group (Vault.grouped) and how it went."""

    __slots__ = ("write", "done", "result", "error")

    def __init__(self, write: Callable[["Change"], Any]):
        self.write, self.done, self.result, self.error = write, False, None, None

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


def _group_title(titles: list[str]) -> str | None:
    """A group's commit subject: its one write's title, or its writes' titles with the same words once
    and the conversations of each ("exchange (a)", "exchange (b)": "2 exchanges (a, b)")."""
    if len(titles) <= 1:
        return titles[0] if titles else None
    import re

    kinds: dict[str, tuple[int, list[str]]] = {}
    for title in titles:
        found = re.fullmatch(r"(.*?) \((.*)\)", title)
        what, where = (found.group(1), found.group(2)) if found else (title, "")
        count, wheres = kinds.get(what, (0, []))
        kinds[what] = (count + 1, wheres + ([where] if where and where not in wheres else []))
    parts = []
    for what, (count, wheres) in kinds.items():
        shown = ", ".join(wheres[:3]) + (", …" if len(wheres) > 3 else "")
        parts.append(f"{count} {_plural(what) if count > 1 else what}" + (f" ({shown})" if shown else ""))
    return "; ".join(parts)


def _plural(words: str) -> str:
    head, _, last = words.rpartition(" ")
    if last.endswith("y") and last[-2:-1] not in ("a", "e", "i", "o", "u"):
        last = last[:-1] + "ies"
    elif last.endswith(("s", "x", "ch", "sh")):
        last += "es"
    else:
        last += "s"
    return f"{head} {last}".strip()


# Actions a change can record, as `Event.action`; what `--json` and the change lines show.
ADD, UPDATE, REPLACE, DELETE, EVICT, EDIT, RESTORE, REMOVE = (
    "ADD", "UPDATE", "REPLACE", "DELETE", "EVICT", "EDIT", "RESTORE", "REMOVE")
SCRUB = "SCRUB"  # `memvault scrub` replaced the secrets of a memory file with placeholders
WITHHELD = "WITHHELD"  # a learned fact not stored: it held a secret (learn.withheld_events)
# At most this many memories are evicted by one command. A chat turn writes at most five entries
# (two turns, three learned facts), so a conversation over max_entries still shrinks by fifteen a
# turn, while a vault that is far over (a limit lowered, an old vault) is trimmed a little at a
# time, each eviction shown, never thousands at once at an unrelated moment.
EVICT_BATCH = 20
# A bulk add is indexed this many memories at a time while it is written (Change.index_pending):
# what it holds at once, and one table fragment each (index.ADD_ROWS).
INDEX_BATCH = 8192


@dataclass(frozen=True, slots=True)
class Stored:
    """What a bulk add keeps of each memory it wrote (Change.slim): its id, where it is and what it
    is, not its text or front matter, which the file holds (`read`). A 100,000-line `add --jsonl`
    holds 100,000 of these to name in its commit and its output, not 100,000 memories."""

    id: str
    role: str
    kind: str
    conversation_id: str
    created_at: datetime
    root: Path
    rel: str  # the file, vault-relative (posix): a Path object per memory costs four times as much

    @classmethod
    def of(cls, memory: Memory, root: Path) -> "Stored":
        # Interned: a bulk add's 100,000 memories share a handful of conversation and role strings
        return cls(memory.id, sys.intern(memory.role), sys.intern(memory.kind), sys.intern(memory.conversation_id),
                   memory.created_at, root, memory.path.relative_to(root).as_posix())

    @property
    def path(self) -> Path:
        return self.root / self.rel

    def read(self) -> Memory:
        """The whole memory, from its file."""
        return files.read_memory(self.path, self.root)[0]

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        """What `--json` prints for the memory (Memory.to_json), read from its file."""
        return self.read().to_json(root)


@dataclass
class Event:
    """One thing a command did to one memory.

    ADD: `memory` was stored. UPDATE: `memory` (new id) replaces `other`, refined. REPLACE:
    `memory` was made untrue by `other` (a new fact) and moved under deleted/. DELETE and EVICT:
    `memory` moved under deleted/ (reason: user, contradiction, update, evicted). EDIT: `memory`
    was rewritten in place. RESTORE: `memory` is live again (or as it was, after an undo). REMOVE:
    `undo` took out a memory that the change it undid had added (git history keeps it). SCRUB: `memvault
    scrub` rewrote `memory` in place with its secrets replaced by placeholders. WITHHELD: `memory`, a
    fact learning found, was not written because it held a secret (it has no id).
    """

    action: str
    memory: Memory  # a Stored, for an ADD of a slim change
    other: Memory | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"event": self.action, "id": self.memory.id or None, "role": self.memory.role,
                                "conversation_id": self.memory.conversation_id, "text": self.memory.text}
        if self.reason:
            data["reason"] = self.reason
        if self.memory.extra.get(files.DELETED_NOTE) and self.action == DELETE:
            data["note"] = self.memory.extra[files.DELETED_NOTE]
        if self.action == ADD and self.memory.extra.get("would_replace"):  # a proposal: `memvault review`
            data["would_replace"] = list(self.memory.extra["would_replace"])
        if self.action == UPDATE and self.other is not None:
            data.update(replaces=self.other.id, old_text=self.other.text)
        elif self.action == REPLACE and self.other is not None:
            data.update(replaced_by=self.other.id, new_text=self.other.text)
        return data


@dataclass
class Change:
    """What one command did to the vault; becomes one commit of exactly the files it touched."""

    vault: Vault
    command: str
    events: list[Event] = field(default_factory=list)
    written_paths: set[Path] = field(default_factory=set)
    removed_paths: set[Path] = field(default_factory=set)
    accepted_paths: set[Path] = field(default_factory=set)  # hand edits reindex accepted (commit only)
    commit_sha: str | None = None
    title: str | None = None  # a commit subject of the command's own, instead of the generated one
    undoes: str | None = None  # the commit an undo takes back (its trailer lets the next undo go further back)
    # A bulk change (an import of 100,000 turns) names the conversations it added to in its commit
    # message, with a count each, instead of every memory id.
    by_conversation: bool = False
    progress: Callable[[int, int], None] | None = None  # (done, total) while the written files are embedded
    expected: int | None = None  # how many memories a bulk change will add, for `progress`
    index: bool = True  # False: write only; a later change of the same command indexes the files
    withheld: list = field(default_factory=list)  # secret_scan.Withheld: secrets kept out of the files written
    # A bulk add (a stream of memories made as they are written; adds only): each ADD event keeps a
    # Stored record, not the memory, and the file is named by its relative path in _added_files, not
    # in written_paths, so that what the change holds per memory is small and has no text in it.
    slim: bool = False
    _added_files: list[str] = field(default_factory=list)
    _pending: set[Path] = field(default_factory=set)  # written or removed, not indexed yet
    _indexed: int = 0
    _settled: set[Path] = field(default_factory=set)  # looked at for hand edits not committed yet
    # Called once what the change wrote is indexed, before its commit (a server's next request, which
    # waits to read what this one wrote, need not wait for git as well).
    after_index: list[Callable[[], Any]] = field(default_factory=list)
    journal: Any = None  # journal.Journal: each file noted before it is written or removed (Vault.change)
    # A group's change (Vault._write_group): its files' fsyncs made together before they are indexed
    # (make_durable), not one by one as each is written: twenty conversations' turns, four fsyncs each,
    # one after the other, were most of a round's time under load (18-50 ms a store).
    sync_later: bool = False
    _unsynced: list[Path] = field(default_factory=list)

    def make_durable(self) -> None:
        """The files written so far with their fsyncs left for later (sync_later), made durable together."""
        if self._unsynced:
            paths, self._unsynced = self._unsynced, []
            files.fsync_paths(sorted(set(paths)))

    def _before(self, path: Path) -> None:
        self.vault.writes += 1
        if self.journal is not None:
            self.journal.before(path)

    def index_pending(self, last: bool = False, compact: bool = True) -> None:
        """Index what was written since the last time: every INDEX_BATCH memories of a bulk add (so
        that what a 100,000-line add holds at once is one batch, not the whole), and at the end
        (last: also the index's upkeep, compaction and the BM25 index, once for the whole change;
        compact=False: the compaction left to compact_index())."""
        self.make_durable()  # a row is never there for a file a power cut could still take back
        if not self.vault.auto_index or not self.index or not (self._pending or last):
            return
        done = self._indexed

        def progress(current: int, total: int) -> None:
            if self.progress is not None:
                self.progress(done + current, max(self.expected or 0, done + total))

        report = self.vault.index.take_in(self._pending, progress=progress, upkeep=last, compact=compact) \
            if self._pending else None
        if last and report is None and self._indexed:
            self.vault.index.maintain(compact)
        self._indexed += len(self._pending)
        self._pending = set()
        for problem in report.skipped if report is not None else ():
            self.vault.say(f"memvault: skipped {problem}")

    def readable_now(self) -> None:
        """Index what was written so far (the compaction left for the end) and call after_index's
        readers: a change that goes on writing (Vault._write_group's rounds) lets them read first."""
        self.index_pending(last=True, compact=False)
        readers, self.after_index = self.after_index, []
        for readable in readers:
            with contextlib.suppress(Exception):
                readable()

    def compact_index(self) -> None:
        """The index's compaction that index_pending(compact=False) left (when it is due)."""
        if self.vault.auto_index and self.index:
            self.vault.index.maintain()

    @property
    def touched(self) -> bool:
        return bool(self.written_paths or self._added_files or self.removed_paths or self.accepted_paths)

    @property
    def root(self) -> Path:
        return self.vault.root

    def of(self, *actions: str) -> list[Event]:
        return [e for e in self.events if e.action in actions]

    def _write(self, memory: Memory, path: Path | None = None) -> Path:
        from memvault.store import secret_scan

        secret_scan.refuse_secret_id(self.vault, memory.conversation_id)  # a path and a commit message hold it
        secrets = secret_scan.withhold(self.vault, memory)  # the one door every memory file passes
        path = path or (self.root / files.relative_path_for(memory))
        self._before(path)
        try:
            written = files.write_memory(self.root, memory, path, durable=not self.sync_later)
            if self.sync_later:
                self._unsynced.append(written)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
                raise MemvaultError(f"vault {self.root} is not writable: {exc.strerror}") from None
            raise MemvaultError(f"cannot write {path or memory.id}: {exc.strerror or exc}") from None
        self.written_paths.add(written)
        self._pending.add(written)
        if secrets:
            self.withheld.append(secret_scan.keep(self.vault, self.command, memory, secrets))
        return written

    def add(self, memory: Memory, path: Path | None = None) -> Memory:
        """Write a new memory at its usual place, or at `path` (an exported memory imported back
        where it was)."""
        written = self._write(memory, path)
        if self.slim:
            stored = Stored.of(memory, self.root)
            self.written_paths.discard(written)
            self._added_files.append(stored.rel)
            self.events.append(Event(ADD, stored))
        else:
            self.events.append(Event(ADD, memory))
        if len(self._pending) >= INDEX_BATCH:
            self.index_pending()
        return memory

    def commit_hand_edits_first(self, paths: Iterable[Path]) -> None:
        """Commit on their own, before this change touches them, the edits made by hand to these files
        and not committed yet: else this change's commit would carry them, and its `undo` would take
        them back with it, unsaid (`rm` of a file edited by hand, then `undo`, brought back the text
        from before the edit). Files git does not track are left alone: they are this command's own
        (a chat turn written before the model answered) or new, and are committed with it."""
        fresh = [p for p in paths if p is not None and p not in self._settled and p not in self.written_paths]
        self._settled.update(fresh)
        if not fresh or not self.vault.settings.enable_git_versioning:
            return
        from memvault.store import gitrepo

        if not gitrepo.is_repo(self.root) or gitrepo.head_sha(self.root) is None:
            return
        edited = gitrepo.edited_since_head(self.root, [self.vault.relative(p) for p in fresh if p.exists()])
        if not edited:
            return
        ids = []
        for rel in edited:
            try:
                ids.append(files.read_memory(self.root / rel, self.root)[0].id)
            except MemoryFileError:
                ids.append(rel.rsplit("__", 1)[-1].removesuffix(".md"))
        count = len(edited)
        from memvault.store import secret_scan

        secret_scan.withhold_files(self.vault, self, [self.root / rel for rel in edited])  # never a key into git
        record = gitrepo.CommitRecord(subject=f"memvault {self.command}: {count} hand edit{'s' if count != 1 else ''}"
                                              f", committed before the {self.command}", edited=ids)
        gitrepo.commit_paths(self.root, record, edited)
        self.vault.say(f"memvault: committed the hand edit of {', '.join(edited)} first, on its own "
                       f"(`memvault undo` of this {self.command} leaves it)")

    def rewrite(self, memory: Memory, bookkeeping: bool = False) -> Memory:
        """Rewrite a live memory in place (summaries, `edit`); unknown keys are kept. bookkeeping: only
        memvault's own marks about its handling changed (a turn learned from, a message answered): the
        file is written and committed, but no EDIT is recorded (nothing a reader sees was edited, and
        the commit's subject and trailers do not say so)."""
        self.commit_hand_edits_first([memory.path])
        self._write(memory, memory.path)
        if not bookkeeping:
            self.events.append(Event(EDIT, memory))
        return memory

    def scrub(self, memory: Memory, moved: bool = False) -> Memory:
        """Rewrite in place a memory whose secrets `memvault scrub` replaced with placeholders (SCRUB). A
        hand edit not committed yet goes into this commit: it may be what held the secret. moved: its
        conversation id was a secret and is now its placeholder: the file goes to that conversation's
        folder (same file name, live or tombstone), and the old folder when it is left empty."""
        old_path = target = memory.path
        if moved and old_path is not None:
            parts = Path(self.vault.relative(old_path)).parts
            if len(parts) >= 3 and parts[0] == files.ENTRIES:
                target = self.root.joinpath(files.ENTRIES, files.conversation_slug(memory.conversation_id), *parts[2:])
        self._write_at(memory, old_path, target)
        if target != old_path and old_path is not None:
            _remove_empty_folders(old_path.parent, self.vault.entries)
        self.events.append(Event(SCRUB, memory))
        return memory

    def _write_at(self, memory: Memory, old_path: Path | None, target: Path) -> None:
        """Write a memory at `target`; the file it was read from, when that is another, goes."""
        self._write(memory, target)
        if old_path is not None and old_path != target:
            self._before(old_path)
            old_path.unlink(missing_ok=True)
            self.written_paths.discard(old_path)
            self.removed_paths.add(old_path)
            self._pending.add(old_path)

    def soft_delete(self, memory: Memory, reason: str, replaced_by: Memory | None = None,
                    now: datetime | None = None, note: str | None = None) -> Memory:
        """Move the file under deleted/ with deleted_at and deleted_reason: never unlink.

        replaced_by: the memory that made this one untrue (recorded as `replaced_by` and as a
        REPLACE); else a DELETE, or an EVICT for reason 'evicted'. note: why, in the user's
        own words (recorded as `deleted_note`)."""
        self._move_to_deleted(memory, reason, replaced_by.id if replaced_by else None, now, note)
        action = REPLACE if replaced_by else (EVICT if reason == "evicted" else DELETE)
        self.events.append(Event(action, memory, replaced_by, reason))
        return memory

    def _move_to_deleted(self, memory: Memory, reason: str, replaced_by: str | None, now: datetime | None,
                         note: str | None = None) -> None:
        if reason not in files.DELETE_REASONS:
            raise UsageError(f"unknown delete reason {reason!r}")
        if memory.path is None or memory.is_deleted:
            raise UsageError(f"memory {memory.id} is not a live file")
        old_path = memory.path
        self.commit_hand_edits_first([old_path])
        memory.extra["deleted_at"] = files.format_time(now or files.utcnow())
        memory.extra["deleted_reason"] = reason
        if note:
            memory.extra[files.DELETED_NOTE] = note
        if replaced_by:
            memory.extra["replaced_by"] = replaced_by
        target = files.deleted_path_for(self.root, old_path)
        self._write(memory, target)
        self._before(old_path)
        old_path.unlink(missing_ok=True)
        if old_path in self.written_paths:
            self.written_paths.discard(old_path)  # written by this very change: nothing to record
        self.removed_paths.add(old_path)
        self._pending.add(old_path)

    def replace(self, old: Memory, new_text: str, reason: str = "update", now: datetime | None = None,
                extra: dict[str, Any] | None = None) -> Memory:
        """UPDATE: a new file with a fresh id; the old one becomes a tombstone with replaced_by.
        The new memory keeps the old one's front matter, with `extra` on top."""
        carried = {k: v for k, v in old.extra.items() if k not in ("updated_at",)} | (extra or {})
        new = files.new_memory(new_text, old.role, old.conversation_id, created_at=now or files.utcnow(), extra=carried)
        new.extra["updated_at"] = files.format_time(now or files.utcnow())
        new.extra["replaces"] = old.id
        self._write(new)
        self._move_to_deleted(old, reason, new.id, now)
        self.events.append(Event(UPDATE, new, old, reason))
        return new

    def move(self, memory: Memory, role: str) -> Memory:
        """A live memory becomes one of another role, with its id and its file name, in that role's
        folder (a learned fact kept in review leaves pending/ for facts/): recorded as an ADD there."""
        old_path = memory.path
        memory.role = role
        target = self.root / files.relative_path_for(memory)
        if old_path is not None:
            target = target.with_name(old_path.name)
        self._write_at(memory, old_path, target)
        self.events.append(Event(ADD, memory))
        return memory

    def evict(self, conversation: str, max_entries: int, now: datetime | None = None) -> list[Memory]:
        """Past max_entries turns and learned facts (what memvault wrote itself) in the conversation,
        soft-delete the oldest with reason 'evicted', at most EVICT_BATCH per command. What the user
        added (`add`, `edit`, imports) never counts and is never evicted."""
        pool = [m for m in self.vault.iter_memories(conversation, roles=("memory", "user", "assistant"))
                if files.is_evictable(m)]
        excess = min(len(pool) - max_entries, EVICT_BATCH)
        if excess <= 0:
            return []
        pool.sort(key=lambda m: (m.created_at, m.id))
        self.commit_hand_edits_first([m.path for m in pool[:excess]])  # one git process for the batch
        return [self.soft_delete(m, "evicted", now=now) for m in pool[:excess]]

    def restore_file(self, memory: Memory, path: Path, content: str) -> Memory:
        """Put a file back exactly as it was (undo): its old bytes at its old path."""
        from memvault.store import secret_scan

        files.ensure_inside(self.root, path)
        secrets = secret_scan.withhold(self.vault, memory)  # an old version that held a key comes back without it
        if secrets:
            content = files.render(memory)
        self._before(path)
        try:
            files.atomic_write(path, content)
        except OSError as exc:
            raise MemvaultError(f"cannot write {path}: {exc.strerror or exc}") from None
        memory.path = path
        if secrets:
            self.withheld.append(secret_scan.keep(self.vault, self.command, memory, secrets))
        self.written_paths.add(path)
        self._pending.add(path)  # indexed by this change, like every file it writes
        if not memory.is_deleted:
            self.events.append(Event(RESTORE, memory))
        return memory

    def take_out(self, memory: Memory, show: bool = True) -> None:
        """Remove a file a memvault commit added (undo): git history keeps it."""
        self._before(memory.path)
        memory.path.unlink(missing_ok=True)
        self.written_paths.discard(memory.path)
        self.removed_paths.add(memory.path)
        self._pending.add(memory.path)
        if show:
            self.events.append(Event("REMOVE", memory))

    def move_back(self, tombstone: Memory, live_path: Path, reason: str | None = None) -> Event:
        """A deleted memory live again (`restore`): written at its live path, its tombstone gone."""
        old = tombstone.path
        self.commit_hand_edits_first([old])
        self._write(tombstone, live_path)
        self._before(old)
        old.unlink(missing_ok=True)
        self.removed_paths.add(old)
        self._pending.add(old)
        event = Event(RESTORE, tombstone, reason=reason)
        self.events.append(event)
        return event

    def accept(self, paths: Iterable[Path], ids: Iterable[str], actions: Iterable[str] | None = None) -> None:
        """Hand edits under entries/ that reindex accepted: committed as this change's, each as what it
        did (actions: ADD, EDIT, DELETE for a tombstone made by hand, REMOVE for a file removed; EDIT
        by default), so that the commit's trailers say what `log` shows."""
        paths, ids = list(paths), list(ids)
        for path, memory_id, action in zip(paths, ids, actions if actions is not None else [EDIT] * len(paths)):
            self.accepted_paths.add(Path(path))
            self.events.append(Event(action, Memory(memory_id, "note", "", files.utcnow(), "", path=Path(path))))

    def commit_paths(self) -> list[str]:
        return [self.vault.relative(p) for p in self.written_paths | self.removed_paths | self.accepted_paths] \
            + self._added_files

    def commit_record(self):
        from memvault.store.gitrepo import CommitRecord

        added = self.of(ADD)
        per_conversation: dict[str, int] = {}
        if self.by_conversation:
            for event in added:
                per_conversation[event.memory.conversation_id] = per_conversation.get(event.memory.conversation_id, 0) + 1
            added = []
        return CommitRecord(
            subject=self.subject(),
            added=[e.memory.id for e in added],
            conversations=sorted(per_conversation.items()),
            deleted=[e.memory.id for e in self.of(DELETE)],
            replaced=[(e.other.id, e.memory.id) for e in self.of(UPDATE)]
            + [(e.memory.id, e.other.id) for e in self.of(REPLACE)],
            edited=[e.memory.id for e in self.of(EDIT)],
            evicted=[e.memory.id for e in self.of(EVICT)],
            restored=[e.memory.id for e in self.of(RESTORE)],
            removed=[e.memory.id for e in self.of(REMOVE)],
            scrubbed=[e.memory.id for e in self.of(SCRUB)],
            undoes=self.undoes,
        )

    def subject(self) -> str:
        if self.title:
            return f"memvault {self.command}: {self.title}"
        conversations = sorted({e.memory.conversation_id for e in self.events if e.memory.conversation_id})
        scope = f" ({', '.join(conversations[:3])}{', …' if len(conversations) > 3 else ''})" if conversations else ""
        added = self.of(ADD)
        if added and len(added) == len([e for e in self.events if e.action != WITHHELD]):
            n = len(added)
            within = f" in {len(conversations)} conversation{'' if len(conversations) == 1 else 's'}" \
                if self.by_conversation else ""
            return f"memvault {self.command}: {n} memor{'y' if n == 1 else 'ies'}{within}{scope}"
        counts = [(len(self.of(ADD)), "added"), (len(self.of(UPDATE, REPLACE)), "replaced"),
                  (len(self.of(DELETE)), "deleted"), (len(self.of(EVICT)), "evicted"),
                  (len(self.of(EDIT)), "edited"), (len(self.of(RESTORE)), "restored"),
                  (len(self.of(REMOVE)), "taken out"), (len(self.of(SCRUB)), "scrubbed")]
        parts = [f"{n} {word}" for n, word in counts if n]
        return f"memvault {self.command}: {', '.join(parts) or 'changes'}{scope}"


def _remove_empty_folders(folder: Path, top: Path) -> None:
    """Remove `folder` and its parents up to (not including) `top` while they are empty."""
    while folder != top and top in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
