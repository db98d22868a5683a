"""The agent's socket (issue 33; docs/design.md, "The agent"): where it is, who may use it, how the
agent is started in the background, and the wire (a length and a JSON object each way, the client's
standard streams passed as file descriptors). Shared by the client (warm.py) and the agent
(agent.py); standard library only, since the warm path imports it before anything else.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import sys
import time
from pathlib import Path

from memvault import __version__

SOCKET_NAME = "agent.sock"
LOCK_NAME = "agent.lock"  # held (flock) by the running agent for its whole life; holds its pid
LOG_NAME = "agent.log"  # an agent started by `agent = auto` writes its notices here

# How long an `auto` client waits for the agent it started to listen (it loads the model first).
START_WAIT_S = 60.0



def code_identity() -> str:
    """What the agent must share with the client: memvault's version, the interpreter, and each of the
    package's source files by size and modification time (an edited checkout or a new install
    differs). About 80 stat calls."""
    import hashlib

    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"{__version__}\0{sys.version}\0{sys.prefix}\0{package}".encode())
    for folder, subfolders, names in sorted(os.walk(package)):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                info = os.stat(os.path.join(folder, name))
                digest.update(f"{folder[len(str(package)):]}/{name}:{info.st_size}:{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:24]


# -- the wire: a length and a JSON object each way ------------------------------------------------
def send_message(conn: socket.socket, message: dict) -> None:
    data = json.dumps(message).encode()
    conn.sendall(struct.pack(">I", len(data)) + data)


def read_message(conn: socket.socket) -> dict | None:
    """The next message, or None when the other side closed first."""
    head = _read_exactly(conn, 4)
    if head is None:
        return None
    body = _read_exactly(conn, struct.unpack(">I", head)[0])
    return None if body is None else json.loads(body)


def _read_exactly(conn: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 16))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def peer_ids(conn: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end (SO_PEERCRED, Linux)."""
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


class NotOurs(Exception):
    """The socket, or the process behind it, belongs to another user."""


def connect(sidecar: Path, uid: int | None = None) -> socket.socket | None:
    """A connection to the vault's agent, or None when none listens (a stale socket is removed).
    Raises NotOurs when the socket file or the listening process is not the user's."""
    uid = os.getuid() if uid is None else uid
    path = sidecar / SOCKET_NAME
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != uid:
        raise NotOurs(f"{path} belongs to user {info.st_uid}, not to you ({uid}), or is not a socket")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _at_short_path(path, conn.connect)
    except (ConnectionRefusedError, FileNotFoundError):
        conn.close()
        remove_stale_socket(sidecar)
        return None
    except OSError:
        conn.close()
        return None
    _pid, peer_uid = peer_ids(conn)
    if peer_uid != uid:
        conn.close()
        raise NotOurs(f"the process listening on {path} runs as user {peer_uid}, not as you ({uid})")
    return conn


def _at_short_path(path: Path, call) -> None:
    """call(path), through the folder when the path is longer than a Unix socket address may be
    (108 bytes): a deep vault path still gets its agent."""
    if len(os.fsencode(str(path))) < 100:
        call(str(path))
        return
    here = os.open(".", os.O_RDONLY)
    try:
        os.chdir(path.parent)
        call(path.name)
    finally:
        os.fchdir(here)
        os.close(here)


def remove_stale_socket(sidecar: Path) -> bool:
    """Remove the socket a killed agent left, when no agent holds the vault's agent lock."""
    import fcntl

    try:
        fd = os.open(sidecar / LOCK_NAME, os.O_RDWR)
    except OSError:
        fd = None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # an agent holds it: it is starting up, and binds its socket anew
        try:
            os.unlink(sidecar / SOCKET_NAME)
            return True
        except FileNotFoundError:
            return False
    finally:
        if fd is not None:
            os.close(fd)


def ask(sidecar: Path, kind: str) -> dict | None:
    """A status or stop request to the vault's agent: its answer, or None when none runs."""
    conn = connect(sidecar)
    if conn is None:
        return None
    with conn:
        socket.send_fds(conn, [b"\0"], [])
        send_message(conn, {"kind": kind})
        return read_message(conn)


def spawn_agent(root: Path, idle_minutes: float | None = None):
    """Start the vault's agent in the background (detached: its own session, no terminal, notices to
    .memvault/agent.log) without waiting for it; the Popen."""
    import subprocess

    sidecar = root / ".memvault"
    with open(sidecar / LOG_NAME, "ab") as log:
        os.chmod(sidecar / LOG_NAME, 0o600)
        idle = ["--idle", repr(idle_minutes)] if idle_minutes is not None else []
        return subprocess.Popen([sys.executable, "-m", "memvault", "--vault", str(root), "agent", *idle],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                close_fds=True, cwd=str(root))


def agent_lock_held(sidecar: Path) -> bool:
    """Whether an agent holds the vault's agent lock (it runs, or is starting and not listening yet)."""
    import fcntl

    try:
        fd = os.open(sidecar / LOCK_NAME, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def wait_for_agent(sidecar: Path, deadline: float, child=None) -> socket.socket | None:
    """A connection to the agent once it listens, or None at `deadline` (time.monotonic) or when `child`
    (the Popen that was to be it) ended without one listening."""
    while time.monotonic() < deadline:
        conn = connect(sidecar)
        if conn is not None:
            return conn
        if child is not None and child.poll() is not None and not (sidecar / SOCKET_NAME).exists():
            return None  # it could not start (another one won the race, or it failed: agent.log says)
        time.sleep(0.02)
    return None


def start_agent(root: Path, idle_minutes: float | None = None) -> socket.socket | None:
    """`agent = auto`: start the vault's agent in the background and wait for it to listen; None if it
    does not."""
    child = spawn_agent(root, idle_minutes)
    return wait_for_agent(root / ".memvault", time.monotonic() + START_WAIT_S, child)
