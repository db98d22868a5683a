"""`memvault agent`: a process that carries out the CLI's commands for one vault, with the model,
LanceDB and litellm loaded once (issue 33; docs/design.md, "The agent"). The client side, and
the wire, are in agent_socket.py.

One request at a time: the vault's lock decides writes as it does between cold commands, and
one at a time lets a request have the process to itself: its standard streams (the client's
file descriptors, put on 0, 1 and 2), its working directory, environment and umask, restored
after. The command itself runs through the same typer app as a cold `memvault`, opening the
vault as a cold command does, so it sees every other process's writes (the files are walked
before a read, as cold) and holds the lock no longer than a cold command would. The agent does not
watch the folder, so a `reindex --watch` never shares it with a second watcher.
"""

from __future__ import annotations

import fcntl
import io
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from memvault import __version__
from memvault.errors import MemvaultError
from memvault.faces import agent_socket

ACCEPT_TICK_S = 2.0  # how often an idle agent looks at the clock, its socket file and the signals


class AgentError(MemvaultError):
    """The agent cannot start (another one runs, the socket cannot be made)."""


@dataclass
class Agent:
    root: Path
    idle_s: float
    notice: object = print
    identity: str = field(default_factory=agent_socket.code_identity)
    started: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    requests: int = 0
    last_request: float = field(default_factory=time.monotonic)
    stopping: bool = False

    @property
    def sidecar(self) -> Path:
        return self.root / ".memvault"

    def status(self) -> dict:
        return {"pid": os.getpid(), "vault": str(self.root), "since": self.started.isoformat(timespec="seconds"),
                "version": __version__, "identity": self.identity, "requests": self.requests,
                "rss_mb": _rss_mb("VmRSS"), "peak_rss_mb": _rss_mb("VmHWM"), "idle_minutes": self.idle_s / 60,
                "socket": str(self.sidecar / agent_socket.SOCKET_NAME)}

    # -- life ------------------------------------------------------------------------------
    def serve_forever(self) -> None:
        from memvault.store import signals

        signals.stop_on_signals()
        lock = self._take_lock()
        try:
            listener, inode = self._listen()
            try:
                self._warm_up()
                self.notice(f"memvault agent: pid {os.getpid()} listening on {self.sidecar / agent_socket.SOCKET_NAME} "
                            f"(exits after {self.idle_s / 60:g} min idle)")
                self._loop(listener, inode, signals)
            finally:
                listener.close()
                try:
                    if os.lstat(self.sidecar / agent_socket.SOCKET_NAME).st_ino == inode:
                        os.unlink(self.sidecar / agent_socket.SOCKET_NAME)
                except OSError:
                    pass
        finally:
            os.close(lock)

    def _take_lock(self) -> int:
        """One agent per vault: its lock file, held for its whole life, names its pid."""
        self.sidecar.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.sidecar / agent_socket.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            held = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise AgentError(f"an agent already runs for {self.root} (pid {held or '?'}); "
                             "`memvault agent status` says more") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def _listen(self) -> tuple[socket.socket, int]:
        """The socket, owner-only (made under umask 0177, then chmod 0600): a socket a killed agent
        left is removed first (the lock says none other runs)."""
        path = self.sidecar / agent_socket.SOCKET_NAME
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            agent_socket._at_short_path(path, listener.bind)
        except OSError as exc:
            listener.close()
            raise AgentError(f"cannot listen on {path}: {exc.strerror or exc}") from None
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        listener.listen(16)
        listener.settimeout(ACCEPT_TICK_S)
        return listener, os.lstat(path).st_ino

    def _warm_up(self) -> None:
        """Load what every command needs before the first one comes: the index's library and the
        embedding model (a search then costs what it costs serve); the CLI started this, so it is loaded."""
        from memvault.api import open_vault

        try:
            open_vault(self.root).warm(search=False)
        except MemvaultError as exc:
            self.notice(f"memvault agent: not warmed up: {exc}")  # a command will say it again, its own way

    def _loop(self, listener: socket.socket, inode: int, signals) -> None:
        while not self.stopping and not signals.requested.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                if time.monotonic() - self.last_request >= self.idle_s:
                    self.notice(f"memvault agent: idle for {self.idle_s / 60:g} min, exiting")
                    return
                if not self._socket_is_mine(inode):
                    self.notice("memvault agent: its socket was removed, exiting")
                    return
                continue
            except InterruptedError:
                continue
            with conn:
                conn.settimeout(None)
                try:
                    if self._answer(conn) == "run":
                        self.last_request = time.monotonic()  # a status poll does not keep it alive
                except (OSError, ValueError) as exc:
                    self.notice(f"memvault agent: a request failed: {exc}")

    def _socket_is_mine(self, inode: int) -> bool:
        try:
            return os.lstat(self.sidecar / agent_socket.SOCKET_NAME).st_ino == inode
        except OSError:
            return False

    # -- one request -----------------------------------------------------------------------
    def _answer(self, conn: socket.socket) -> str | None:
        """One request: its kind (run, status, stop), or None when refused."""
        _pid, uid = agent_socket.peer_ids(conn)
        if uid != os.getuid():
            self.notice(f"memvault agent: refused a connection from user {uid}")
            return None
        _, fds, _, _ = socket.recv_fds(conn, 1, 3)
        try:
            request = agent_socket.read_message(conn)
            if request is None:
                return None
            kind = request.get("kind")
            if kind == "status":
                agent_socket.send_message(conn, self.status())
            elif kind == "stop":
                self.stopping = True
                agent_socket.send_message(conn, {"stopping": os.getpid()})
            elif kind == "run":
                self._run(conn, request, fds)
                fds = []  # _run closed them
            return kind
        finally:
            for fd in fds:
                os.close(fd)

    def _run(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        if request.get("identity") != self.identity or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            agent_socket.send_message(conn, {"accepted": False, "identity": self.identity})
            if agent_socket.code_identity() != self.identity:
                self.notice("memvault agent: memvault's files changed since it started, exiting")
                self.stopping = True
            return
        agent_socket.send_message(conn, {"accepted": True})
        self.requests += 1
        code = run_command(request, fds)
        agent_socket.send_message(conn, {"exit": code})


def run_command(request: dict, fds: list[int]) -> int:
    """The command of one request, as a cold `memvault` would run it: the client's stdin, stdout
    and stderr on 0, 1 and 2 (and as sys.std*), its cwd, environment and umask; all restored after.
    Returns the exit code."""
    saved_fds = [os.dup(n) for n in (0, 1, 2)]
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_umask = os.umask(request.get("umask", 0o022))
    try:
        for n, fd in enumerate(fds):
            os.dup2(fd, n)
            os.close(fd)
        fds.clear()
        os.environ.clear()
        os.environ.update(request["env"])
        (stdin, stdout, stderr) = request["streams"]
        sys.stdin = _text(0, "rb", stdin, line_buffering=False)
        sys.stdout = _text(1, "wb", stdout, line_buffering=os.isatty(1))
        sys.stderr = _text(2, "wb", stderr, line_buffering=True)
        sys.argv = ["memvault", *request["argv"]]
        try:
            os.chdir(request["cwd"])
        except OSError as exc:
            sys.stderr.write(f"memvault: error: {request['cwd']}: {exc.strerror}\n")
            return 1
        return _invoke(request["argv"])
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass  # the reader left (`| head`): as a cold process, nothing more to say
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        for n, fd in enumerate(saved_fds):
            os.dup2(fd, n)
            os.close(fd)
        for fd in fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        os.umask(saved_umask)
        sys.argv = saved_argv


def _text(fd: int, mode: str, facts: dict, line_buffering: bool):
    raw = io.open(fd, mode, closefd=False)
    return io.TextIOWrapper(raw, encoding=facts.get("encoding") or "utf-8", errors=facts.get("errors") or "strict",
                            line_buffering=line_buffering, write_through=False)


def _invoke(argv: list[str]) -> int:
    """The typer app on argv, standalone as `memvault` runs it: SystemExit's code, 1 for a crash."""
    from memvault.faces import term
    from memvault.store.signals import Stopped

    term.configure(quiet=False)  # -q of the last request must not linger (the main callback sets it anew)
    try:
        _command().main(args=argv, prog_name="memvault", standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        sys.stderr.write(f"{code}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except Stopped:
        sys.stderr.write("memvault: error: the memvault agent was asked to stop while this command waited for the "
                         "vault lock; nothing was changed: run it again\n")
        return 1
    except BaseException:  # a crash: as a cold process prints it
        traceback.print_exc()
        return 1
    return 0


_app = None  # the CLI's typer app, handed over by the `agent` command (agent.py does not import the CLI)
_click_command = None


def in_agent() -> bool:
    """Whether this process is a vault's agent (a command runs in it, and must not end the process)."""
    return _app is not None


def _command():
    """The CLI's click command, as `memvault` builds it (typer's app(): typer.main.get_command), built
    once: typer makes it anew on every call of the app, 30 ms of each warm command."""
    global _click_command
    if _click_command is None:
        import typer.main

        _click_command = typer.main.get_command(_app)
    return _click_command


def _rss_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def run(root: Path, idle_minutes: float, notice, app) -> None:
    """`memvault agent`: serve the vault's CLI commands (app: the CLI's typer app) until idle for
    idle_minutes, `agent stop`, or SIGTERM/SIGHUP/SIGINT."""
    global _app
    _app = app
    from memvault.store.native_memory import settle_for_long_life

    settle_for_long_life()  # before LanceDB and ONNX Runtime start their threads
    from memvault.api import keep_index_handles

    keep_index_handles()  # each command opens the vault anew; its LanceDB connection and table are kept
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    Agent(Path(os.path.abspath(root)), idle_minutes * 60, notice).serve_forever()


def status(sidecar: Path) -> dict | None:
    """What the vault's agent says of itself, or None when none runs."""
    return agent_socket.ask(sidecar, "status")


def status_lines(status: dict) -> list[str]:
    rss = f"{status['rss_mb']:.0f} MB" if status.get("rss_mb") is not None else "?"
    peak = f" (peak {status['peak_rss_mb']:.0f} MB)" if status.get("peak_rss_mb") is not None else ""
    return [f"pid       {status['pid']}",
            f"vault     {status['vault']}",
            f"since     {status['since']}",
            f"version   memvault {status['version']} ({status['identity']})",
            f"memory    {rss} resident{peak}",
            f"requests  {status['requests']}",
            f"idle exit after {status['idle_minutes']:g} min without a command",
            f"socket    {status['socket']}"]


def start(root: Path, idle_minutes: float) -> dict:
    """`memvault agent start`: the running agent's status, starting one in the background first if none
    runs. Raises AgentError when it does not come up (.memvault/agent.log says why)."""
    sidecar = Path(os.path.abspath(root)) / ".memvault"
    running = status(sidecar)
    if running:
        return running
    sidecar.mkdir(parents=True, exist_ok=True)
    conn = agent_socket.start_agent(Path(os.path.abspath(root)), idle_minutes)
    if conn is None:
        raise AgentError(f"the agent did not start; {sidecar / agent_socket.LOG_NAME} says why")
    conn.close()
    started = status(sidecar)
    if not started:
        raise AgentError(f"the agent did not answer; {sidecar / agent_socket.LOG_NAME} says why")
    return started


def stop(sidecar: Path, timeout: float = 30.0) -> int | None:
    """`memvault agent stop`: ask the vault's agent to exit (after the command it is carrying out) and
    wait until the process is gone: its pid, or None when none ran. Its lock is free a moment before
    (ONNX Runtime's and LanceDB's threads wind down after it), and "stopped" meant a live process then
    (issue 44). Not gone within timeout: AgentError saying it is still stopping."""
    answer = agent_socket.ask(sidecar, "stop")
    if not answer:
        return None
    pid = int(answer["stopping"])
    born = _start_time(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid, born):
            return pid
        time.sleep(0.02)
    raise AgentError(f"the agent (pid {pid}) is still stopping after {timeout:g} s (it takes no more commands); "
                     f"`kill {pid}` ends it")


def _start_time(pid: int) -> str | None:
    """The process's start time (/proc/PID/stat, field 22): tells it from a later process given its pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, born: str | None) -> bool:
    """Whether the process runs: not gone, not a zombie (ended, its parent has not reaped it), not a
    later process that got its pid. Without /proc, whether a signal 0 reaches it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    return fields[0] not in ("Z", "X") and (born is None or fields[19] == born)
