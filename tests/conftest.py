"""Shared fixtures: an isolated environment per test, a CLI runner, the installed entry point."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memvault.faces.cli import app
from fixtures_models import *  # noqa: F401,F403  (embedder, tiny_reranker_dir)
from fake_llm import *  # noqa: F401,F403  (fake_llm, refused_url)
from fake_anthropic import *  # noqa: F401,F403  (fake_anthropic, request_text)

REPO = Path(__file__).resolve().parent.parent


def pytest_sessionstart(session) -> None:
    """memvault's .pyc files written once, before any test starts a `memvault` process. A normal install has
    them; an editable one under PYTHONDONTWRITEBYTECODE (this machine's environment sets it) has none, and each
    process the tests start would compile the package again: ~0.5 s of CPU a cold command, hundreds of them."""
    import compileall

    compileall.compile_dir(str(REPO / "memvault"), quiet=2)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """No test reads the developer's vault, settings or git identity."""
    shared_cache = os.environ.get("MEMVAULT_TEST_CACHE") or str(REPO / ".pytest_cache" / "model-cache")
    for name in list(os.environ):
        if name.startswith("MEMVAULT_") or name.startswith("GIT_"):
            monkeypatch.delenv(name)
    # Every CLI subprocess runs cold unless its test asks for the agent (tests/test_agent.py): none
    # uses, or (agent = auto) starts, one behind the test's back.
    monkeypatch.setenv("MEMVAULT_AGENT", "off")
    # No test fetches a model on its first use (tests/test_models.py asks for it, from a hub of its own).
    monkeypatch.setenv("MEMVAULT_FETCH_MODELS", "false")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    # A known git identity for the tests that do not test the fallback.
    gitconfig = home / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = Test User\n\temail = test@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # The embedding model's assembled folder is shared across tests, like a real user cache.
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", shared_cache)
    yield


@pytest.fixture
def vault_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "vault"
    monkeypatch.setenv("MEMVAULT_DIR", str(path))
    return path


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str, input: str | bytes | None = None) -> Result:
    """Run the CLI in-process (typer's runner), stdout and stderr apart."""
    runner = CliRunner()
    result = runner.invoke(app, list(args), input=input, catch_exceptions=False)
    return Result(result.exit_code, result.stdout, result.stderr)


def memvault_command() -> list[str]:
    """The installed `memvault` entry point of the Python that runs the tests (the script beside it), else
    the first on PATH, else `python -m memvault`. Not PATH's first when there is one beside: a version
    manager's shim (pyenv's) costs a bash and pyenv's own processes, about 0.1 s of CPU, per command."""
    beside = Path(sys.executable).with_name("memvault")
    if os.access(beside, os.X_OK):
        return [str(beside)]
    exe = shutil.which("memvault")
    return [exe] if exe else [sys.executable, "-m", "memvault"]


def run_memvault(*args: str, input: str | bytes | None = None, env: dict | None = None,
                 timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """Run the installed `memvault` entry point in a subprocess."""
    argv = [*memvault_command(), *args]
    return subprocess.run(argv, input=input.encode() if isinstance(input, str) else input,
                          capture_output=True, env={**os.environ, **(env or {})}, timeout=timeout, **kwargs)


def seed(*texts: str, vault_dir: Path | None = None, **options):
    """Memories stored through the library (`Memvault.add`, one commit): the one way tests give a vault
    its content ($MEMVAULT_DIR unless vault_dir is given; options as `add` takes them). Tests of the
    `add` command itself drive the CLI instead."""
    import memvault

    return memvault.open_vault(vault_dir).add(list(texts), **options)


KILL_AT = REPO / "tests" / "kill_at.py"


def start_memvault(*args: str, env: dict | None = None, **popen_options) -> subprocess.Popen:
    """`memvault ARGS` in its own process group, through kill_at.py (a no-op without KILL_AT or
    PAUSE_AT in env). Stop it with stop_process in a finally."""
    return subprocess.Popen([sys.executable, str(KILL_AT), *args], env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            **popen_options)


def wait_for_line(proc: subprocess.Popen, marker: str, timeout: float = 180) -> None:
    """Read proc's stderr until a line holds marker; fail when it ends or the time is up first."""
    deadline = time.time() + timeout
    while True:
        line = proc.stderr.readline()
        if marker in line:
            return
        assert line and time.time() < deadline, f"no {marker!r} from {proc.args}"


def stop_process(proc: subprocess.Popen | int, timeout: float = 10) -> int | None:
    """The one way a test or fixture stops a process it started (a Popen, or a pid): SIGTERM, then
    SIGKILL after timeout seconds; call it in a `finally`. A process that leads a process group of its
    own (start_new_session=True) gets the SIGKILL with its group, so its git children go too. Returns
    a Popen's exit code (0: it stopped cleanly on SIGTERM). Never SIGINT to stop a process: one started
    from a background job (`nohup`, `&` in a script, cron) has SIGINT ignored."""
    if isinstance(proc, int):
        _stop_pid(proc, timeout)
        return None
    if proc.poll() is None:
        leads_group = _leads_group(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc.pid, leads_group)
            proc.wait(timeout=timeout)
    return proc.returncode


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def _kill(pid: int, group: bool) -> None:
    try:
        os.killpg(pid, signal.SIGKILL) if group else os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stop_pid(pid: int, timeout: float) -> None:
    """stop_process for a pid this process cannot wait for (a grandchild, an orphan)."""
    start = _proc_table().get(pid, (0, "", None))[2]

    def running() -> bool:
        now = _proc_table().get(pid)
        return now is not None and now[2] == start and now[1] not in "ZX"

    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, timeout)):
        if not running():
            return
        group = _leads_group(pid)
        try:
            os.killpg(pid, sig) if group and sig == signal.SIGKILL else os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while running() and time.monotonic() < deadline:
            time.sleep(0.05)


# -- what the suite leaves running ------------------------------------------------------------------
# The suite fails when a process it started is still running at its end (README, Set up). Its
# processes are the descendants of this pytest, and, for one whose parent died first (it is then
# nobody's descendant), those that carry this session's mark in their environment: every child
# inherits it, and it names this run, not another suite running on the same machine. A pytest this
# one starts adds its own mark to the variable (tests/test_leftover_processes.py).
SESSION_MARK = "PYTEST_MEMVAULT_SESSION"
_SESSION_TOKEN = f"{os.getpid()}-{time.time_ns()}"
os.environ[SESSION_MARK] = ":".join(filter(None, [os.environ.get(SESSION_MARK), _SESSION_TOKEN]))


def _proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, state, start time) of every process on the machine (Linux's /proc)."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat_file:
                    stat = stat_file.read()
            except OSError:  # gone meanwhile
                continue
            fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (command name) "
            table[int(entry.name)] = (int(fields[1]), fields[0].decode(), int(fields[19]))
    return table


def _read_proc(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as proc_file:
            return proc_file.read()
    except OSError:  # gone, or another user's
        return b""


class SessionProcesses:
    """The processes of this session that are running, and the test after which each was first seen."""

    def __init__(self):
        self.me = os.getpid()
        self.token = _SESSION_TOKEN
        self.ours: dict[tuple[int, int], bool] = {}  # (pid, start time) -> of this session
        self.first_seen_after: dict[tuple[int, int], str] = {}

    def running(self) -> dict[tuple[int, int], str]:
        """(pid, start time) -> command line of each process of this session still running (not a zombie)."""
        table = _proc_table()
        children = defaultdict(list)
        for pid, (ppid, _, _) in table.items():
            children[ppid].append(pid)
        descendants, todo = set(), [self.me]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in descendants:
                    descendants.add(child)
                    todo.append(child)
        found = {}
        for pid, (_, state, start) in table.items():
            key = (pid, start)
            if pid == self.me or state in "ZX":
                continue
            if pid in descendants:
                self.ours[key] = True
            elif key not in self.ours:  # read once: a process's environment is what it started with
                self.ours[key] = self._carries_mark(pid)
            if self.ours[key]:
                found[key] = _read_proc(pid, "cmdline").replace(b"\0", b" ").decode("utf-8", "replace").strip()
        return found

    def _carries_mark(self, pid: int) -> bool:
        for variable in _read_proc(pid, "environ").split(b"\0"):
            name, _, value = variable.decode("utf-8", "replace").partition("=")
            if name == SESSION_MARK:
                return self.token in value.split(":")
        return False

    def note(self, test: str) -> None:
        for key in self.running():
            self.first_seen_after.setdefault(key, test)


@pytest.fixture(scope="session", autouse=True)
def leftover_processes():
    """At the end of the session: every process the suite started must have been stopped. A straggler
    is stopped (stop_process) and fails the session, naming the test after which it was first seen.
    Set up before any other session fixture, so torn down after them: what a session or module fixture
    starts and stops itself (the module's `memvault serve` in test_serve.py) is gone by then."""
    if not os.path.isdir(f"/proc/{os.getpid()}"):  # not Linux: nothing to look at
        yield None
        return
    processes = SessionProcesses()
    yield processes
    gc.collect()  # a GitPython Repo no longer used ends its git cat-file processes when collected
    deadline = time.monotonic() + 5  # and one stopped a moment ago may still be on its way out
    while (left := processes.running()) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not left:
        return
    lines = []
    for (pid, start), command in sorted(left.items()):
        stop_process(pid, timeout=5)
        test = processes.first_seen_after.get((pid, start))
        seen = f"first seen after test {test}" if test else "started after the last test (by a fixture's teardown)"
        lines.append(f"pid {pid} `{command[:200]}`, {seen}")
    pytest.fail(f"at the end of the session, {len(lines)} process(es) the suite started were still running "
                "(stopped now), each with the test after which it was first seen:\n" + "\n".join(lines), pytrace=False)


@pytest.fixture(autouse=True)
def processes_started_by_each_test(leftover_processes, request):
    """After each test and its fixtures: note the processes running that were not before it."""
    yield
    if leftover_processes is not None:
        leftover_processes.note(request.node.nodeid)


def git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(vault), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def llm_env(fake_llm, monkeypatch):
    """Point memvault's LLM settings at the scripted fake server."""
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("MEMVAULT_LLM_MODEL", "openai/test-model")
    monkeypatch.setenv("MEMVAULT_LLM_TIMEOUT", "20")
    return fake_llm
