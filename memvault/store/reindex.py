"""`memvault reindex`: sync the index, commit hand edits, or watch the folder.

The index module does the syncing; this module adds what only reindex does:
front matter for adopted files, a commit for the hand edits it accepted, and the
watch loop.
"""

from __future__ import annotations

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
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    stop = stop or threading.Event()
    pending = threading.Event()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            if event.event_type in ("opened", "closed_no_write"):
                return  # a read (this very sync's, an editor's, a backup's) is not a change
            for name in (getattr(event, "src_path", ""), getattr(event, "dest_path", "")):
                if name and (str(name).endswith(".md") or getattr(event, "is_directory", False)) \
                        and not Path(str(name)).name.startswith("."):
                    pending.set()

    vault.create()
    on_report(reindex(vault))
    observer = Observer()
    observer.schedule(Handler(), str(vault.entries), recursive=True)
    observer.start()
    if on_start is not None and not stop.is_set():
        on_start()
    try:
        while not stop.is_set():
            if not pending.wait(timeout=0.2):
                continue
            while pending.is_set():  # debounce: wait for a quiet spell
                pending.clear()
                time.sleep(debounce)
            on_report(reindex(vault))
    except KeyboardInterrupt:
        pass
    finally:
        observer.stop()
        observer.join(timeout=5)
