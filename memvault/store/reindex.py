"""`memvault reindex`: sync the index, commit hand edits, or watch the folder.

The index module does the syncing; this module adds what only reindex does:
front matter for adopted files, a commit for the hand edits it accepted, and the
watch loop.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from memvault.store import files
from memvault.store.index import SyncReport
from memvault.store.vault import Vault


def check(vault: Vault) -> SyncReport:
    """Drift between files and index (every row compared with the record, state.db), writing nothing.

    A shared lock waits for a writer to finish, so a sync half-way through is not reported as
    drift; a vault that cannot be locked (read-only) is checked as it is.
    """
    from contextlib import ExitStack

    from memvault.store.lock import vault_lock

    with ExitStack() as stack:
        if vault.sidecar.is_dir():
            try:
                stack.enter_context(vault_lock(vault.lock_path, shared=True))
            except OSError:
                pass
        return vault.index.check()


def reindex(vault: Vault, full: bool = False, progress: Callable[[int, int], None] | None = None) -> SyncReport:
    """Sync under the vault lock and commit the hand edits it accepted (the report says which)."""
    edits = commit_hand_edits(vault, "reindex", full=full, progress=progress)
    edits.report.committed, edits.report.commit = edits.paths, edits.commit
    return edits.report


@dataclass
class HandEdits:
    report: SyncReport  # the index sync that accepted them
    paths: list[str]  # committed (vault-relative)
    commit: str | None


def commit_hand_edits(vault: Vault, command: str, full: bool = False,
                      progress: Callable[[int, int], None] | None = None,
                      first: Callable[[], None] | None = None, verify: bool = True) -> HandEdits:
    """Under the vault lock: `first` (sync finishes an interrupted sync there), then an index sync
    that adopts files without front matter, then one commit of the hand edits it accepted.
    verify: compare every index row with the record (state.db) too (reindex does; sync need not)."""
    auto_index, vault.auto_index = vault.auto_index, False  # this command syncs the index itself
    try:
        with vault.change(command) as change:
            if first is not None:
                first()
            report = vault.index.reindex(full=full, verify=verify, progress=progress)
            _record_hand_edits(vault, change, report)
    finally:
        vault.auto_index = auto_index
    return HandEdits(report, sorted(vault.relative(p) for p in change.accepted_paths), change.commit_sha)


def _record_hand_edits(vault: Vault, change, report: SyncReport) -> None:
    """Commit the memory files under entries/ that changed outside memvault and that this sync
    accepted; a file it rejected (broken front matter, a duplicate id) stays out of git, and
    so does anything that is not a memory file."""
    if not vault.settings.enable_git_versioning:
        return
    from memvault.store import gitrepo

    if not gitrepo.is_repo(vault.root):
        return
    rejected = {vault.relative(problem.path) for problem in report.skipped}
    at_head: dict[str, bool] = {}  # path -> whether HEAD has the file
    if report.unlike_head is not None:
        # The sync asked git already: what it indexed that HEAD does not have, but for files git
        # ignores (never committed by hand-edit commits, as `git status` would not name them).
        untracked = [path for path, blob in report.unlike_head.items() if not blob and (vault.root / path).exists()]
        ignored = set(gitrepo.ignored(vault.root, untracked)) if untracked else set()
        dirty = sorted(path for path in report.unlike_head if path not in ignored and path not in rejected)
        at_head = {path: bool(report.unlike_head[path]) for path in dirty}
        for _, moved_to in report.moved:  # a file it moved into a kind folder (its old path: above, if git had it)
            if moved_to not in at_head:
                dirty.append(moved_to)
                at_head[moved_to] = False
    else:
        status = gitrepo.git_output(vault.root, "status", "--porcelain", "-z", "--untracked-files=all",
                                    "--", files.ENTRIES)
        dirty, fields = [], iter(status.split("\0"))
        for field in fields:
            if len(field) < 4:
                continue
            if field[0] in "RC":
                next(fields, None)  # a staged rename or copy: its old path follows
            path = field[3:]
            if path.endswith(".md") and not path.rsplit("/", 1)[-1].startswith(".") and path not in rejected:
                dirty.append(path)
                at_head[path] = field[:2] not in ("??", "A ", "AM")
    if not dirty:
        return
    from memvault.store import secret_scan

    rewritten = secret_scan.withhold_files(vault, change, [vault.root / rel for rel in dirty])
    if rewritten:  # a key typed into a file by hand is committed, and indexed, as a placeholder
        vault.index.take_in(rewritten)
    ids, actions = [], []
    for rel in dirty:
        memory_id = report.ids.get(rel)
        if memory_id is None and (vault.root / rel).is_file():
            try:
                memory_id = files.read_memory(vault.root / rel, vault.root)[0].id
            except Exception:
                memory_id = None
        ids.append(memory_id or rel.rsplit("__", 1)[-1].removesuffix(".md"))
        actions.append(_hand_edit_action(vault, rel, at_head.get(rel, True)))
    change.accept([vault.root / rel for rel in dirty], ids, actions)
    change.title = f"{len(dirty)} hand edit{'s' if len(dirty) != 1 else ''}"


def _hand_edit_action(vault: Vault, rel: str, in_head: bool) -> str:
    """What a hand edit did, as the event its commit names (and `log` shows): a file removed by hand,
    a file new to git (a tombstone made by hand is a deletion), or an edit."""
    from memvault.store.vault import ADD, DELETE, EDIT, REMOVE

    if not (vault.root / rel).exists():
        return REMOVE
    if not in_head:
        return DELETE if files.is_deleted_path(Path(rel)) else ADD
    return EDIT


def watch(vault: Vault, on_report: Callable[[SyncReport], None], debounce: float = 0.5,
          stop: threading.Event | None = None, on_start: Callable[[], None] | None = None) -> None:
    """Reindex whenever files under entries/ change, until Ctrl-C (or `stop` is set: between two
    syncs, a sync under way finishes); each sync's report goes to `on_report`, and `on_start` is
    called once the watch is on.

    Editors that save through a temp file and a rename produce a burst of events;
    waiting for `debounce` seconds of quiet turns each burst into one sync.
    """
    stop = stop or threading.Event()
    vault.create()
    on_report(reindex(vault))
    folder = FolderWatch(vault, sidecar=False)
    folder.take_changes()  # its first "walk everything": the reindex above did
    if on_start is not None and not stop.is_set():
        on_start()
    try:
        while not stop.is_set():
            if not folder.noted.wait(timeout=0.2):
                continue
            while folder.noted.is_set():  # debounce: wait for a quiet spell
                folder.noted.clear()
                time.sleep(debounce)
            if _worth_a_sync(folder.take_changes()):
                on_report(reindex(vault))
    except KeyboardInterrupt:
        pass
    finally:
        folder.stop()


def fresh_index(vault: Vault, watcher: "FolderWatch | None", read_lock: threading.Lock,
                say: Callable[[str], None]):
    """The index, in step with the files before a read: the read policy of every search (docs/design.md,
    "Reading while others write"). Synced here unless another process is writing right now (then read
    as it is: that process is syncing it), except when there is no index state yet (a build or rebuild
    is under way: wait for it). A read-only vault is read as it is. With a watcher (open_vault's
    watch=True), only what changed since the last read is looked at: the files the folder's events
    named, or every file after a folder was created, moved or removed. read_lock: one sync at a time
    in this process; say: the notices (skipped files, adopted notes, a read-only vault)."""
    import errno

    from memvault.store.lock import vault_lock

    index = vault.index
    if not vault.root.is_dir():
        return index  # no vault yet: nothing to read, and reading creates nothing
    changes = watcher.take_changes() if watcher is not None else None
    if watcher is not None and changes is None:
        return index
    if changes is not None and changes.paths and not changes.walk:
        # A chat's user turn written aside (Vault.write_aside) is indexed by the change that stores its
        # exchange: not by the searches of other conversations meanwhile (a sync, an embedding and a
        # row written twice, under 20 clients 60-260 ms inside someone else's search). Its events wait.
        aside = vault.written_aside(changes.paths)
        if aside:
            changes.paths -= aside
            watcher.put_back(Changes(paths=aside))
            if not changes.paths and not changes.indexed:
                return index  # nothing else changed: no sync, no look at the table
    if changes is not None and changes.paths and not changes.walk and index.state_path.exists():
        # The files whose bytes are the ones the index has (this process's own writes, another
        # process's it has indexed): nothing to sync for them; a sync of them would still ask git and
        # LanceDB (serve: ~15 ms before each next message's search).
        changes.paths -= _as_indexed(vault, changes.paths)
    paths = None if changes is None or changes.walk or not index.state_path.exists() else changes.paths
    with read_lock:
        try:
            vault.sidecar.mkdir(exist_ok=True)
            with vault_lock(vault.lock_path, timeout=0, holder="search (index sync)") as got:
                if got and watcher is not None:  # a killed writer's change, beside a long-lived process
                    _settle_for_a_read(vault)
                report = (index.take_in(paths, hand=True) if paths else index.catch_up() if paths is None else None) \
                    if got else None
            if not got and changes is not None:
                watcher.put_back(changes)  # the writer syncs its own files, not the hand edits
            if not got and not index.state_path.exists():
                with vault_lock(vault.lock_path, timeout=vault.settings.lock_timeout,
                                holder="search (index sync)", on_wait=vault.notice):
                    report = index.catch_up()
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            say(f"memvault: vault {vault.root} is read-only ({exc.strerror}); searching the index as it is")
            return index
        if watcher is not None and report is None:
            # Rows another process added since the table was opened; a sync that ran here brought the
            # table to its latest version itself (index._Sync.judge_table), under the vault lock.
            index.refresh()
    if report is not None:
        for problem in report.skipped:
            say(f"memvault: skipped {problem}")
        if report.adopted:
            say(f"memvault: {len(report.adopted)} file(s) without front matter read as notes; "
                      "`memvault reindex` adds their front matter")
    return index


def _as_indexed(vault: Vault, paths: set[Path]) -> set[Path]:
    """Of these changed paths, those whose bytes are the ones the index's record has (its sha256), and
    those gone that it has no live row for (an atomic write's temporary file)."""
    import hashlib

    rels: dict[str, Path] = {}
    for path in paths:
        try:
            rels[path.relative_to(vault.root).as_posix()] = path
        except ValueError:
            continue
    try:
        recorded = vault.index.state.entries(rels)
    except Exception:  # noqa: BLE001 (an unreadable record: the sync says what is wrong)
        return set()
    same = set()
    for rel, path in rels.items():
        entry = recorded.get(rel)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            if entry is None or not entry["live"]:
                same.add(path)
            continue
        except OSError:
            continue
        if entry is not None and entry["live"] and entry["sha256"] == hashlib.sha256(raw).hexdigest():
            same.add(path)
    return same


def _settle_for_a_read(vault: Vault) -> None:
    """A change a killed writer left half done, settled (journal.py) before a long-lived process reads:
    its files would otherwise be searched as hand edits until the next write. A failure is said, and
    the read goes on."""
    from memvault.errors import MemvaultError

    try:
        vault.settle_interrupted(held=True)
    except MemvaultError as exc:
        vault.say(f"memvault: {exc}")


def _worth_a_sync(changes: "Changes | None") -> bool:
    """A memory file changed, or a folder came, moved or went; not a read, nor a dot-file (an
    editor's swap file)."""
    if changes is None:
        return False
    return changes.walk or any(p.suffix == ".md" and not p.name.startswith(".") for p in changes.paths)


@dataclass
class Changes:
    """What the folder's events said since the last read: the files named, or that a folder was
    created, moved or removed (its files were not named one by one: every file must be looked at)."""

    paths: set = dataclasses.field(default_factory=set)
    walk: bool = False
    indexed: bool = False  # state.db changed: a process (this one or another) indexed


def _events_heard() -> list:
    """The events the handlers act on: not opens and closes, nor a folder's "modified" (each file that
    changed in it has its own event). watchdog asks the kernel for these only (the inotify mask), so the
    others are never made: every read of a memory file, of state.db and of the lock file, and every
    write's open and close, was an event the watcher's thread decoded and dropped (issue 41, under twenty
    clients: bench/README.md)."""
    from watchdog import events

    return [events.FileCreatedEvent, events.DirCreatedEvent, events.FileDeletedEvent, events.DirDeletedEvent,
            events.FileMovedEvent, events.DirMovedEvent, events.FileModifiedEvent, events.FileAttribEvent,
            events.DirAttribEvent]


class FolderWatch:
    """File-system events under the vault (watchdog), the package's one folder watcher: they tell
    a warm process its index may lag (a hand edit, a `git pull`, another process's write: its files,
    and with sidecar its state.db), and `memvault reindex --watch` when to sync. `noted` is set at
    each change noted."""

    def __init__(self, vault, sidecar: bool = True):
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        self._lock = threading.Lock()
        self.noted = threading.Event()
        self._changes: Changes | None = Changes(walk=True)  # the first read syncs everything
        watch = self

        class Entries(FileSystemEventHandler):
            def on_any_event(self, event):
                if event.event_type in ("opened", "closed", "closed_no_write"):  # reads and our own writes' closes
                    return
                if event.is_directory:
                    if event.event_type != "modified":  # a file in it changed: that file has its own event
                        watch._note(walk=True)
                    return
                watch._note(event.src_path, getattr(event, "dest_path", "") or None)

        class Sidecar(FileSystemEventHandler):  # only state.db: the lock file changes on every read
            def on_any_event(self, event):
                names = (getattr(event, "dest_path", "") or "", event.src_path or "")
                if any(Path(str(name)).name == "state.db" for name in names) \
                        and event.event_type not in ("opened", "closed", "closed_no_write"):
                    watch._note(indexed=True)  # another process indexed: see its rows (its files have events too)

        vault.root.mkdir(parents=True, exist_ok=True)
        for folder in (vault.entries, vault.sidecar):
            folder.mkdir(exist_ok=True)
        self._observer = Observer()
        heard = _events_heard()
        self._observer.schedule(Entries(), str(vault.entries), recursive=True, event_filter=heard)
        if sidecar:
            self._observer.schedule(Sidecar(), str(vault.sidecar), recursive=False, event_filter=heard)
        self._observer.daemon = True
        self._observer.start()

    def _note(self, *paths: str | None, walk: bool = False, indexed: bool = False) -> None:
        with self._lock:
            if self._changes is None:
                self._changes = Changes()
            self._changes.paths.update(Path(str(p)) for p in paths if p)
            self._changes.walk |= walk
            self._changes.indexed |= indexed
        self.noted.set()

    def take_changes(self) -> "Changes | None":
        """What changed since the last call (None: nothing)."""
        with self._lock:
            changes, self._changes = self._changes, None
            return changes

    def put_back(self, changes: "Changes") -> None:
        """Changes a read could not sync (another process held the lock): for the next read."""
        self._note(*changes.paths, walk=changes.walk, indexed=changes.indexed)

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=5)
