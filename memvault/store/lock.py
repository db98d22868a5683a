"""Inter-process lock around every write-and-commit (flock on .memvault/lock).

flock is released by the kernel when a process dies, so a lock file left by a
killed process never blocks the next command.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from memvault.store import signals
from memvault.errors import LockTimeout


# A command that waits longer than this for the lock says for whom it is waiting, once.
WAIT_NOTICE_SECONDS = 1.0


@contextmanager
def vault_lock(path: Path, timeout: float = 120.0, shared: bool = False, holder: str = "command",
               on_wait: Callable[[str], None] | None = None) -> Iterator[bool]:
    """Hold the lock; yields True. With timeout=0, yields False at once when it is taken.

    An exclusive holder writes "pid N: <holder>" into the lock file while it holds it, so
    that a command left waiting (a cron `add` behind a long `chat`) can say who it waits for:
    through `on_wait` after WAIT_NOTICE_SECONDS, and in the LockTimeout message.

    A long-running command stops while it waits (signals.pause raises signals.Stopped): the wait
    holds nothing, and the holder may keep the lock for long.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        started = time.monotonic()
        deadline = started + timeout
        delay = 0.005
        told = False
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if now >= deadline:
                    if timeout == 0:
                        yield False
                        return
                    raise LockTimeout(
                        f"{_holder(fd)} has held {path} for over {timeout:.0f}s "
                        "(setting lock_timeout); try again"
                    ) from None
                if on_wait is not None and not told and now - started >= WAIT_NOTICE_SECONDS:
                    on_wait(f"memvault: waiting for {_holder(fd)} to finish with the vault")
                    told = True
                signals.pause(delay)
                delay = min(delay * 2, 0.1)
        if not shared:
            _record(fd, f"pid {os.getpid()}: memvault {holder}")
        try:
            yield True
        finally:
            if not shared:
                _record(fd, "")
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _record(fd: int, text: str) -> None:
    try:
        os.ftruncate(fd, 0)
        if text:
            os.pwrite(fd, (text + "\n").encode("utf-8", "replace"), 0)
    except OSError:  # a full disk must not fail the command; the note is only for waiters
        pass


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it ("another memvault process" if it did not)."""
    try:
        text = os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return f"another memvault process ({text})" if text else "another memvault process"
