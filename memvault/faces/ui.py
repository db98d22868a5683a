"""`memvault ui`: the page in the user's browser (docs/design.md, "The library API and its faces"). The page
is served by `memvault serve` (routes_page.py); this finds the one running for the vault, or the CLI starts
one in the foreground, and opens the page with Python's `webbrowser` (which honours $BROWSER) once it
answers. The URL is printed either way: a machine without a browser, or one over ssh, opens it elsewhere.

A running serve says where it listens in .memvault/serve.json (written once it listens, owner-only, taken
away when it stops); a record left by a serve that died is recognised by its process being gone or its
URL not answering, and is passed over.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Callable

RECORD = "serve.json"
DEFAULT_PORT = 8100


def record_path(root: Path) -> Path:
    return Path(root) / ".memvault" / RECORD


def page_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def announce(root: Path, host: str, port: int) -> None:
    """serve, once it listens: where the vault's page is (a record `running` reads). Best effort: a vault
    on a read-only disk still serves."""
    path = record_path(root)
    try:
        path.parent.mkdir(exist_ok=True)
        temp = path.with_name(f".{RECORD}.{os.getpid()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"pid": os.getpid(), "url": page_url(host, port), "vault": str(root)}, handle)
        os.replace(temp, path)
    except OSError:
        pass


def withdraw(root: Path) -> None:
    """serve, as it stops: its record goes (when it is still its own)."""
    path = record_path(root)
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def answers(url: str, timeout: float = 1.0) -> bool:
    """Whether a memvault serve answers at `url` (its /health)."""
    try:
        with urllib.request.urlopen(url + "health", timeout=timeout) as response:  # noqa: S310 (our own URL)
            return json.loads(response.read()).get("status") == "ok"
    except (OSError, ValueError):
        return False


def running(root: Path) -> str | None:
    """The page's URL of the serve running for this vault, or None."""
    try:
        found = json.loads(record_path(root).read_text())
        pid, url = int(found["pid"]), str(found["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # another user's process: its URL decides
    return url if answers(url) else None


def free_port(host: str, wanted: int) -> int:
    """`wanted` when nothing listens there, else a port the system has free (another vault's serve may
    hold the default one)."""
    for port in (wanted, 0):
        try:
            with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind((host.strip("[]"), port))
                return probe.getsockname()[1]
        except OSError:
            continue
    return wanted


def open_page(url: str, say: Callable[[str], None], browser: bool = True) -> None:
    """Say where the page is, and open it in the user's browser (unless browser=False)."""
    say(f"memvault ui: the page is at {url}")
    if browser:
        import webbrowser

        try:
            opened = webbrowser.open(url)
        except Exception:  # noqa: BLE001  (a browser that fails to start is said, not raised)
            opened = False
        if not opened:
            say("memvault ui: no browser could be started here; open the address above in one")


def open_when_ready(url: str, say: Callable[[str], None], browser: bool = True, timeout: float = 600.0) -> threading.Thread:
    """A thread that waits until the server it was started beside answers, then opens the page."""

    def wait() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if answers(url, timeout=2.0):
                open_page(url, say, browser)
                return
            time.sleep(0.25)

    thread = threading.Thread(target=wait, name="memvault-ui", daemon=True)
    thread.start()
    return thread
