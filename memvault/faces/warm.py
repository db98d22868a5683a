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

import os
import socket
import sys
from pathlib import Path

from memvault.faces.agent_socket import (NotOurs, code_identity, connect, peer_ids, read_message, send_message,
                                         start_agent)
from memvault.faces.command_line import command_of, vault_root


# Commands the agent carries out. Left cold: those that need the terminal or the process to
# themselves (edit opens $EDITOR, chat streams and may read a REPL, review asks one at a time,
# serve, mcp and agent are long-lived, sync and clone talk to remotes with git's prompts, scrub
# rewrites history, models may download with a progress bar), `reindex --watch`, and any --help
# or --version (cheap anyway).
WARM_COMMANDS = {"add", "search", "ls", "show", "log", "rm", "restore", "undo", "conversations", "stats",
                 "reindex", "review", "reconcile", "learn", "episodes", "summarize", "export", "import"}

class AgentDied(Exception):
    """The agent accepted the command and ended before it answered."""


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
        raise AgentDied("the memvault agent (pid {}) ended while it carried out the command; the next memvault "
                        "command finishes the change it had written whole or takes back the one it had begun, "
                        "never leaves it half-done (see `memvault log`)".format(
                            peer_ids(conn)[0] if conn.fileno() >= 0 else "?"))
    return int(answer["exit"])


def main() -> None:
    """The `memvault` command: warm when an agent carries it out, else the CLI itself; a coding agent's
    hook its own way (hook_client.py: a time limit, the agent started for it, never in the way)."""
    if command_of(sys.argv[1:]) == "hook":
        from memvault.faces import hook_client

        sys.exit(hook_client.main(sys.argv[1:]))
    code = handed_over(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from memvault.faces.cli import app

    app(prog_name="memvault")
