"""`memvault hook <agent>` before anything heavy loads (issue 42; docs/design.md, "Coding agents").

A coding agent runs the hook at every prompt and waits for it, so this is never in its way: whatever
happens, the process exits 0, prints the hook's JSON or nothing, and is gone within the `hook_timeout`
setting (2 s) for the events whose answer the agent waits for (a session's start, a prompt). It:

1. reads the event (stdin) and the vault's settings (the standard library and store/config.py only);
2. hands the event to the vault's agent (faces/agent.py) when one runs, as any warm command, but with
   the event in a memfd as its stdin and pipes as its stdout and stderr, so that an agent that is late
   cannot write to the coding agent's streams after the time limit, nor keep them open; with `agent` at
   use (the default) or auto, an absent agent is started in the background (hooks are what `auto` is
   for): a session's start does not wait for it (its answer needs no model), a prompt waits for it up
   to the time limit;
3. else runs the hook itself (cold), a session's start or a prompt under a watchdog that leaves at the
   time limit with nothing said. An event that writes (the end of a turn, a compaction, a session's end)
   is always answered at once: a child process of its own session hands it to the agent (waiting for a
   busy one as long as it takes) or runs it cold, so the coding agent never waits for the embedding
   model, git or a lock, and no write is lost to a time limit.

Every failure and every time limit reached is one line in `.memvault/hook.log`.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import threading
import time
from pathlib import Path

from memvault.faces import agent_socket
from memvault.faces.hook_log import NOTHING, answered, log_line

# The events whose answer the coding agent waits for (context to inject): the time limit applies.
ANSWERED = {"SessionStart", "UserPromptSubmit", "BeforeAgent"}
# The events that write (an exchange, a close): done in the background when no agent takes them. Any
# other event (one memvault does not answer, a broken one) is said in the log at once.
WRITES = {"Stop", "PreCompact", "SessionEnd", "AfterAgent", "PreCompress"}
STARTS = {"SessionStart"}  # answered without a model: cold is fast enough, the agent is not waited for
WRITE_WAIT_S = 600.0  # how long an event that writes waits, in the background, for the agent (the lock's own wait)
MAX_EVENT_BYTES = 64 << 20


def _settings(root: Path | None) -> tuple[float, str]:
    """(hook_timeout, agent mode) of the vault; when its settings do not load, the default time limit and
    no agent (it would not start either): the face, cold, logs why."""
    from memvault.errors import MemvaultError
    from memvault.store.config import Settings, load_settings

    try:
        settings = load_settings(root if root is not None and root.is_dir() else None)
    except (MemvaultError, OSError):
        try:
            return load_settings(None).hook_timeout, "off"  # the environment's time limit still holds
        except (MemvaultError, OSError):
            return Settings().hook_timeout, "off"
    return settings.hook_timeout, settings.agent


def main(argv: list[str]) -> int:
    """The `memvault hook` process: the exit code (0, always, unless the arguments are not a hook's)."""
    from memvault.faces.command_line import command_of, vault_root

    started = time.monotonic()
    rest = argv[argv.index("hook") + 1:] if "hook" in argv else []
    agent = rest[0] if rest and not rest[0].startswith("-") else "?"
    if agent == "?" or any(word in ("--help", "-h") for word in rest) or command_of(argv) != "hook":
        return _cold(argv, None)  # typer says what is wrong, or shows the help
    try:
        data = sys.stdin.buffer.read(MAX_EVENT_BYTES + 1) if sys.stdin is not None else b""
    except (OSError, ValueError):
        data = b""
    try:
        name = json.loads(data).get("hook_event_name")
    except (ValueError, AttributeError):
        name = None
    root = vault_root(argv)
    timeout, mode = _settings(root)
    deadline = started + timeout
    waits = name not in WRITES
    warm = root is not None and (root / ".memvault").is_dir() and mode != "off"
    if not waits:
        return _in_background(argv, data, root if warm else None, agent, name)
    if warm:
        outcome = _warm(argv, data, root, agent, name, deadline, waits)
        if outcome is not None:
            if outcome:
                sys.stdout.write(outcome)
            elif agent in NOTHING:
                sys.stdout.write(NOTHING[agent])
            sys.stdout.flush()
            return 0
    return _cold(argv, data, deadline, root, agent, name)


def _warm(argv, data: bytes, root: Path, agent: str, name: str | None, deadline: float, waits: bool,
          background: bool = False) -> str | None:
    """The agent's answer (its stdout, "" for none), or None to go cold. A time limit reached is "" (logged):
    nothing is injected, and the event is the agent's to finish. background: an agent that did not come up
    is None too (the write is then done cold, never dropped)."""
    sidecar = root / ".memvault"
    try:
        conn = agent_socket.connect(sidecar)
    except agent_socket.NotOurs as refused:
        log_line(root, agent, name, f"not using the agent: {refused}")
        return None
    if conn is None:
        child = None
        if not agent_socket.agent_lock_held(sidecar):
            try:
                child = agent_socket.spawn_agent(root)
            except OSError as exc:
                log_line(root, agent, name, f"the agent could not be started: {exc}")
                return None
        if name in STARTS or not waits:
            return None  # cold: no model needed, or a write that goes to the background
        conn = agent_socket.wait_for_agent(sidecar, deadline - 0.15, child)
        if conn is None:
            if background:
                return None
            log_line(root, agent, name, "the agent was starting and did not answer within the time limit; "
                                        "nothing injected")
            return ""
    try:
        return _run_there(conn, argv, data, root, agent, name, deadline)
    finally:
        conn.close()


def _run_there(conn: socket.socket, argv, data: bytes, root: Path, agent: str, name: str | None,
               deadline: float) -> str | None:
    event_fd = os.memfd_create("memvault-hook-event", 0)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        os.write(event_fd, data)
        os.lseek(event_fd, 0, os.SEEK_SET)
        umask = os.umask(0)
        os.umask(umask)
        streams = [{"encoding": "utf-8", "errors": "strict"}] * 3
        request = {"kind": "run", "identity": agent_socket.code_identity(), "argv": argv, "cwd": os.getcwd(),
                   "env": dict(os.environ), "umask": umask, "streams": streams, "pid": os.getpid()}
        try:
            socket.send_fds(conn, [b"\0"], [event_fd, out_w, err_w])
            agent_socket.send_message(conn, request)
        except OSError:
            return None
    finally:
        os.close(event_fd)
        os.close(out_w)
        os.close(err_w)
    try:
        out, err, code = _collect(conn, out_r, err_r, deadline)
    finally:
        os.close(out_r)
        os.close(err_r)
    if code == "refused":
        return None
    if code is None:
        log_line(root, agent, name, "the agent gave no answer within the time limit (hook_timeout); "
                 + ("nothing injected" if name in ANSWERED else "it carries the event on"))
        return ""
    if err.strip():
        sys.stderr.write(err.decode("utf-8", "replace"))
    return out.decode("utf-8", "replace")


def _collect(conn: socket.socket, out_r: int, err_r: int, deadline: float):
    """(stdout, stderr, exit code) of the agent's run: None for the code when the deadline came first,
    "refused" when the agent did not take the command (another version: go cold)."""
    out, err = bytearray(), bytearray()
    code = None
    accepted = False
    open_fds = {out_r, err_r}
    buffer = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bytes(out), bytes(err), None
        watch = list(open_fds) + ([conn] if code is None else [])
        if not watch:
            return bytes(out), bytes(err), code
        ready, _, _ = select.select(watch, [], [], remaining)
        for source in ready:
            if source is conn:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    if not accepted:
                        return bytes(out), bytes(err), "refused"
                    return bytes(out), bytes(err), None if code is None else code
                buffer.extend(chunk)
                while len(buffer) >= 4:
                    size = int.from_bytes(buffer[:4], "big")
                    if len(buffer) < 4 + size:
                        break
                    message = json.loads(bytes(buffer[4:4 + size]))
                    del buffer[:4 + size]
                    if not accepted:
                        if not message.get("accepted"):
                            return bytes(out), bytes(err), "refused"
                        accepted = True
                    else:
                        code = int(message.get("exit", 1))
            else:
                chunk = os.read(source, 1 << 16)
                if not chunk:
                    open_fds.discard(source)
                else:
                    (out if source == out_r else err).extend(chunk)


def _cold(argv, data: bytes | None, deadline: float | None = None, root: Path | None = None, agent: str = "?",
          name: str | None = None) -> int:
    """The CLI in this process, the event as its stdin; under a watchdog that leaves at the deadline."""
    if data is not None:
        _stdin_from(data)
    if deadline is not None:
        def expire() -> None:
            if answered.is_set():
                return
            log_line(root, agent, name, "no answer within the time limit (hook_timeout, without the agent); "
                                        "nothing injected")
            try:
                if agent in NOTHING:
                    os.write(1, NOTHING[agent].encode())
            finally:
                os._exit(0)

        timer = threading.Timer(max(0.0, deadline - time.monotonic()), expire)
        timer.daemon = True
        timer.start()
    if data is not None and root is not None and _plain(argv, agent):
        _face(agent, data, root)  # what the CLI's `hook` command does, without the CLI (typer, pydantic, rich)
    from memvault.faces.cli import app

    app(prog_name="memvault")
    return 0


def _plain(argv: list[str], agent: str) -> bool:
    """Whether the command line is `[--vault PATH] [-q] [-v] [--json] hook AGENT`, nothing else: a hook as
    `memvault setup` writes it, whose cold run needs nothing of the CLI but the face (faces/hooks.py)."""
    from memvault.faces.hooks import EVENTS
    from memvault.faces.command_line import command_of

    return command_of(argv) == "hook" and agent in EVENTS and argv[argv.index("hook") + 1:] == [agent]


def _face(agent: str, data: bytes, root: Path) -> None:
    """The `hook` command (cli.py) on the event, cold, without loading the CLI: the face, the vault opened
    at `root` (vault_root: --vault, else $MEMVAULT_DIR, else the default), the answer on stdout, then the
    process ends at once, as the command ends it (cli._leave)."""
    from memvault.faces import hooks

    def open_vault(**notice):
        from memvault.api import open_vault as open_it

        return open_it(root, **notice)

    code = hooks.run(agent, data, root, open_vault)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _in_background(argv, data: bytes, root: Path | None, agent: str, name: str | None) -> int:
    """An event that writes: done by a child in a session of its own, its streams on /dev/null (the face
    logs), while this process answers at once. The child hands it to the vault's agent when one runs or
    starts (root given), waiting as long as it takes (a busy agent takes it after the command it is
    carrying out), else runs it itself."""
    if agent in NOTHING:
        sys.stdout.write(NOTHING[agent])
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() > 0:
        return 0
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        try:
            if root is None or _warm(argv, data, root, agent, name, time.monotonic() + WRITE_WAIT_S, True,
                                     background=True) is None:
                _cold(argv, data)
        except SystemExit:
            pass
    finally:
        os._exit(0)


def _stdin_from(data: bytes) -> None:
    import io

    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace")
