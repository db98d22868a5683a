"""The warm path: a CLI command carried out by the vault's running `memvault agent` (issue 33;
docs/design.md, "The agent").

`memvault` starts here. Before anything heavy is imported (typer, rich, LanceDB, fastembed,
litellm), it looks for an agent's Unix socket under the vault's `.memvault/` and, when one answers
and runs this very code, hands it the command: the argv, the working directory, the environment,
the umask and the process's own stdin, stdout and stderr (as file descriptors, SCM_RIGHTS). The
agent runs the same typer app on them and answers with the exit code. Output, colours, terminal
width and exit codes are then those of the cold path by construction: one code path, the same
streams. Whenever anything is off (no agent, another version, another user's socket, a command
that needs the terminal to itself), this returns None and the command runs cold, as before.

Only the standard library and memvault.store.config are imported here (`python -X importtime`).
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
AGENT_MODES = ("off", "use", "auto")

# Commands the agent carries out. Left cold: those that need the terminal or the process to
# themselves (edit opens $EDITOR, chat streams and may read a REPL, review asks one at a time,
# serve, mcp and agent are long-lived, sync and clone talk to remotes with git's prompts, scrub
# rewrites history, models may download with a progress bar), `reindex --watch`, and any --help
# or --version (cheap anyway).
WARM_COMMANDS = {"add", "search", "ls", "show", "log", "rm", "restore", "undo", "conversations", "stats",
                 "reindex", "review", "reconcile", "learn", "episodes", "summarize", "export", "import"}
_GLOBAL_FLAGS = {"--json", "-q", "--quiet", "-v", "--verbose"}

# How long an `auto` client waits for the agent it started to listen (it loads the model first).
START_WAIT_S = 60.0


class AgentDied(Exception):
    """The agent accepted the command and ended before it answered."""


def vault_root(argv: list[str]) -> Path | None:
    """The vault the command names (--vault before the command, else $MEMVAULT_DIR, else the
    default), or None when the arguments before the command are not the plain global options."""
    from memvault.store.config import default_vault_path

    vault = None
    position = 0
    while position < len(argv) and argv[position].startswith("-"):
        arg = argv[position]
        if arg == "--vault" and position + 1 < len(argv):
            vault = argv[position + 1]
            position += 2
            continue
        if arg.startswith("--vault="):
            vault = arg.split("=", 1)[1]
        elif arg not in _GLOBAL_FLAGS:
            return None  # --help, --version, or an option this does not know: cold
        position += 1
    if position >= len(argv):
        return None
    root = Path(vault).expanduser() if vault is not None else default_vault_path()
    return Path(os.path.abspath(root))


def command_of(argv: list[str]) -> str | None:
    position = 0
    while position < len(argv) and argv[position].startswith("-"):
        position += 2 if argv[position] == "--vault" else 1
    return argv[position] if position < len(argv) else None


def goes_warm(argv: list[str]) -> bool:
    """Whether this command line may be carried out by an agent (WARM_COMMANDS, with their
    interactive forms left cold)."""
    command = command_of(argv)
    if command not in WARM_COMMANDS:
        return False
    rest = argv[argv.index(command) + 1:]
    words = rest[:rest.index("--")] if "--" in rest else rest
    if any(word in ("--help", "-h") for word in words):
        return False
    if command == "reindex" and "--watch" in words:
        return False
    if command == "review" and "--json" not in argv and _is_terminal(0):
        return False  # one at a time, asking on the terminal
    return True


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


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


# -- the client --------------------------------------------------------------------------------
def handed_over(argv: list[str]) -> int | None:
    """Carry the command out in the vault's agent: its exit code, or None to run it cold."""
    if not goes_warm(argv):
        return None
    root = vault_root(argv)
    if root is None or not (root / ".memvault").is_dir():
        return None  # no vault yet: its first write is cold, and creates it
    mode = agent_mode(root)
    if mode == "off":
        return None
    sidecar = root / ".memvault"
    try:
        conn = connect(sidecar)
        if conn is None and mode == "auto":
            conn = start_agent(root)
    except NotOurs as refused:
        sys.stderr.write(f"memvault: not using the agent: {refused}\n")
        return None
    if conn is None:
        return None
    try:
        return _run_there(conn, argv)
    except AgentDied as died:
        sys.stderr.write(f"memvault: error: {died}\n")
        return 1
    except KeyboardInterrupt:
        # As click says it of a cold command. The agent finishes the command it took (one command's
        # work, its writes atomic); its output goes where this one's went.
        sys.stderr.write("\nAborted!\n")
        return 1
    finally:
        conn.close()


def agent_mode(root: Path) -> str:
    """The `agent` setting ($MEMVAULT_AGENT, else memvault.toml, else the default); "off" when the
    settings do not load (the cold path then says why)."""
    from memvault.errors import MemvaultError
    from memvault.store.config import load_settings

    try:
        return load_settings(root).agent
    except (MemvaultError, OSError):
        return "off"


def _run_there(conn: socket.socket, argv: list[str]) -> int | None:
    streams = []
    for fd, stream in ((0, sys.stdin), (1, sys.stdout), (2, sys.stderr)):
        try:
            os.fstat(fd)
        except OSError:
            return None  # a closed standard stream: the cold path meets it as it always has
        streams.append({"encoding": getattr(stream, "encoding", None) or "utf-8",
                        "errors": getattr(stream, "errors", None) or "strict"})
    umask = os.umask(0)
    os.umask(umask)
    try:
        cwd = os.getcwd()
    except OSError:
        return None  # a working folder that is gone: the cold path says what it says of it
    request = {"kind": "run", "identity": code_identity(), "argv": argv, "cwd": cwd,
               "env": dict(os.environ), "umask": umask, "streams": streams, "pid": os.getpid()}
    try:
        socket.send_fds(conn, [b"\0"], [0, 1, 2])
        send_message(conn, request)
        answer = read_message(conn)
    except OSError:
        return None  # it went away before it took the command: nothing was done
    if answer is None or not answer.get("accepted"):
        return None  # another version, or it is stopping: cold
    try:
        answer = read_message(conn)
    except OSError:
        answer = None
    if answer is None:
        raise AgentDied("the memvault agent (pid {}) ended while it carried out the command; whatever it "
                        "had committed stays, nothing is half-written (see `memvault log`)".format(
                            peer_ids(conn)[0] if conn.fileno() >= 0 else "?"))
    return int(answer["exit"])


def start_agent(root: Path, idle_minutes: float | None = None) -> socket.socket | None:
    """`agent = auto`: start the vault's agent in the background (detached: its own session, no
    terminal, notices to .memvault/agent.log) and wait for it to listen; None if it does not."""
    import subprocess

    sidecar = root / ".memvault"
    with open(sidecar / LOG_NAME, "ab") as log:
        os.chmod(sidecar / LOG_NAME, 0o600)
        idle = ["--idle", repr(idle_minutes)] if idle_minutes is not None else []
        child = subprocess.Popen([sys.executable, "-m", "memvault", "--vault", str(root), "agent", *idle],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                 close_fds=True, cwd=str(root))
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        conn = connect(sidecar)
        if conn is not None:
            return conn
        if child.poll() is not None and not (sidecar / SOCKET_NAME).exists():
            return None  # it could not start (another one won the race, or it failed: agent.log says)
        time.sleep(0.05)
    return None


def main() -> None:
    """The `memvault` command: warm when an agent carries it out, else the CLI itself."""
    code = handed_over(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from memvault.faces.cli import app

    app(prog_name="memvault")
