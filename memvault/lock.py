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
from typing import Iterator

from memvault.errors import LockTimeout


@contextmanager
def vault_lock(path: Path, timeout: float = 120.0, shared: bool = False) -> Iterator[bool]:
    """Hold the lock; yields True. With timeout=0, yields False at once when it is taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    if timeout == 0:
                        yield False
                        return
                    raise LockTimeout(
                        f"another memvault process has held {path} for over {timeout:.0f}s; try again"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
