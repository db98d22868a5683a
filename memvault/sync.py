"""`memvault reindex`: sync the index, commit hand edits, or watch the folder.

The index module does the syncing; this module adds what only reindex does:
front matter for adopted files, a commit for edits made by hand, the
progress bar, and the watch loop.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

from memvault import files
from memvault.index import Index, SyncReport
from memvault.vault import Vault


def check(vault: Vault) -> SyncReport:
    """Drift between files and index (every row compared with state.json), writing nothing.

    A shared lock waits for a writer to finish, so a sync half-way through is not reported as
    drift; a vault that cannot be locked (read-only) is checked as it is.
    """
    from contextlib import ExitStack

    from memvault.lock import vault_lock

    with ExitStack() as stack:
        if vault.sidecar.is_dir():
            try:
                stack.enter_context(vault_lock(vault.lock_path, shared=True))
            except OSError:
                pass
        return Index(vault).sync(check_only=True, verify=True)


def reindex(vault: Vault, full: bool = False, notice: Callable[[str], None] | None = None,
            progress: bool = True) -> SyncReport:
    """Sync under the vault lock and commit whatever changed by hand."""
    vault.auto_index = False  # this command syncs the index itself
    index = Index(vault, notice=notice)
    with vault.change("reindex") as change, _progress_bar(progress) as bar:
        report = index.sync(full=full, adopt=True, progress=bar, verify=True)
        _record_hand_edits(vault, change, report)
    return report


def _record_hand_edits(vault: Vault, change, report: SyncReport) -> None:
    if not vault.settings.enable_git_versioning:
        return
    from memvault import gitrepo

    if not gitrepo.is_repo(vault.root):
        return
    status = gitrepo.git_output(vault.root, "status", "--porcelain", "--untracked-files=all", "--", files.ENTRIES)
    dirty = [line[3:].strip('"') for line in status.splitlines()]
    dirty = [p.split(" -> ")[-1] for p in dirty if p.endswith(".md")]
    if not dirty:
        return
    for rel in dirty:
        path = vault.root / rel
        memory_id = report.ids.get(rel)
        if memory_id is None and path.is_file():
            try:
                memory_id = files.read_memory(path, vault.root)[0].id
            except Exception:
                memory_id = None
        if memory_id:
            change.edited.append(files.Memory(memory_id, "note", "", files.utcnow(), "", path=path))
    change.external = True
    change.title = f"{len(dirty)} hand edit{'s' if len(dirty) != 1 else ''}"


class _progress_bar:
    """A rich progress bar on stderr, only on a terminal, only for long runs."""

    def __init__(self, enabled: bool):
        from memvault import term

        self.enabled = enabled and term.progress_allowed()  # a terminal, no -q, no NO_COLOR
        self.progress = None
        self.task = None

    def __enter__(self):
        return self if self.enabled else None

    def __call__(self, done: int, total: int) -> None:
        if total < 200:
            return
        if self.progress is None:
            from rich.progress import Progress

            self.progress = Progress(transient=True)
            self.progress.start()
            self.task = self.progress.add_task("embedding", total=total)
        self.progress.update(self.task, completed=done)

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()
        return False


def watch(vault: Vault, notice: Callable[[str], None], quiet: bool = False, debounce: float = 0.5,
          stop: threading.Event | None = None) -> None:
    """Reindex whenever files under entries/ change, until Ctrl-C (or `stop` is set).

    Editors that save through a temp file and a rename produce a burst of events;
    waiting for `debounce` seconds of quiet turns each burst into one sync.
    """
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    stop = stop or threading.Event()
    pending = threading.Event()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            for name in (getattr(event, "src_path", ""), getattr(event, "dest_path", "")):
                if name and (str(name).endswith(".md") or getattr(event, "is_directory", False)) \
                        and not Path(str(name)).name.startswith("."):
                    pending.set()

    vault.create()
    report = reindex(vault, notice=notice, progress=False)
    _say(report, notice, quiet)
    observer = Observer()
    observer.schedule(Handler(), str(vault.entries), recursive=True)
    observer.start()
    if not quiet:
        notice(f"memvault: watching {vault.entries} (Ctrl-C to stop)")
    try:
        while not stop.is_set():
            if not pending.wait(timeout=0.2):
                continue
            while pending.is_set():  # debounce: wait for a quiet spell
                pending.clear()
                time.sleep(debounce)
            report = reindex(vault, notice=notice, progress=False)
            _say(report, notice, quiet)
    except KeyboardInterrupt:
        pass
    finally:
        observer.stop()
        observer.join(timeout=5)


def _say(report: SyncReport, notice: Callable[[str], None], quiet: bool) -> None:
    for problem in report.skipped:
        notice(f"memvault: skipped {problem}")
    if report.drift and not quiet:
        print(report.summary(), flush=True)
