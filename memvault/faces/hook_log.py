"""What the hook process (hook_client.py) and the hook face (hooks.py) share: the hook log and what an agent
reads when there is nothing to say (docs/design.md, "Coding agents"). A module of its own so that neither
imports the other: the cold hook runs the CLI, which imports the face (standard library only here).
"""

from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
from pathlib import Path

NOTHING = {"gemini": "{}"}  # what an agent reads when the hook has nothing to say (Gemini CLI parses JSON)
LOG_NAME = "hook.log"
answered = threading.Event()  # set by the face once it has written its answer: the watchdog then stays quiet


def log_line(root: Path | None, agent: str, event: str | None, message: str, once: bool = False) -> None:
    """One line in the vault's hook log (`.memvault/hook.log`, owner-only); never raises. once: not when
    one of the log's last lines says the same (a notice every prompt repeats, such as a missing reranker)."""
    if root is None:
        return
    try:
        sidecar = root / ".memvault"
        sidecar.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        said = f"{agent} {event or '?'}: {' '.join(str(message).split())}"
        if once and said in _tail(sidecar / LOG_NAME):
            return
        line = f"{stamp} {said}\n"
        fd = os.open(sidecar / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass


def _tail(path: Path, size: int = 8192) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - size))
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""
