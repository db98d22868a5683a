"""The CLI at warm speed (issue 33): a running `memvault agent` carries out the CLI's commands with the
same output, exit codes and changes as a cold `memvault`; it is refused, or bypassed, whenever
it should be (another user's socket, another version, a stale socket, a dead agent).

Every command runs in a fresh `memvault` process (the installed entry point), as a user's shell runs
it; the agent is a real process on a real Unix socket, stopped in `finally` (stop_process).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import memvault
from conftest import REPO, run_cli, run_memvault, seed, start_memvault, stop_process, wait_for_line
from memvault.faces import agent_socket, warm

# Every test here runs the warm agent beside cold commands, each a process paying the imports and the model:
# end to end, in .ci/run's second step.
pytestmark = pytest.mark.slow

WARM = {"MEMVAULT_AGENT": "use"}
COLD = {"MEMVAULT_AGENT": "off"}


def start_agent(env: dict | None = None, *args: str) -> subprocess.Popen:
    proc = start_memvault("agent", "--idle", "10", *args, env=env)
    try:
        wait_for_line(proc, "listening on")
    except BaseException:
        stop_process(proc)
        raise
    return proc


def settle(vault: Path | None = None) -> None:
    """A first search says once per vault what it lacks (the reranker here); said, it is not news. The
    vault remembers it, so this search runs in the test's process (the model loaded once), not cold."""
    run_cli(*(["--vault", str(vault)] if vault else []), "search", "anything")


def cli_json(*args: str):
    """`memvault ARGS --json` in the test's process: what a test reads to set up or check the vault, where
    the command's own process is not what is compared (a cold one pays the imports and the model)."""
    done = run_cli(*args, "--json")
    assert done.exit_code == 0, done.stderr
    return json.loads(done.stdout)


def served(vault: Path) -> int:
    status = agent_socket.ask(vault / ".memvault", "status")
    return -1 if status is None else status["requests"]


def both_ways(vault: Path, *args: str, input: bytes | None = None, env: dict | None = None):
    """(cold, warm) runs of `memvault ARGS`; asserts the warm one went to the agent."""
    cold = run_memvault(*args, input=input, env={**(env or {}), **COLD})
    before = served(vault)
    warm_run = run_memvault(*args, input=input, env={**(env or {}), **WARM})
    assert served(vault) == before + 1, f"{args} did not go to the agent: {warm_run.stderr!r}"
    return cold, warm_run


def same(cold, warm_run, mask=lambda text: text) -> None:
    assert warm_run.returncode == cold.returncode, (cold, warm_run)
    assert mask(warm_run.stdout.decode()) == mask(cold.stdout.decode())
    assert mask(warm_run.stderr.decode()) == mask(cold.stderr.decode())


@pytest.fixture(scope="module")
def shared_agent(tmp_path_factory):
    """One seeded vault and its agent for the tests that only read (started once: an agent loads the
    model). Its environment is built here, as isolated_env builds each test's."""
    base = tmp_path_factory.mktemp("agent")
    vault, home = base / "vault", base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Test User\n\temail = test@example.com\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMVAULT_", "GIT_"))}
    env["MEMVAULT_FETCH_MODELS"] = "false"  # as isolated_env: no test fetches a model
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local/share"), XDG_CACHE_HOME=str(home / ".cache"),
               GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), GIT_CONFIG_NOSYSTEM="1", MEMVAULT_DIR=str(vault),
               MEMVAULT_AGENT="off", MEMVAULT_CACHE_DIR=os.environ.get("MEMVAULT_TEST_CACHE")
               or str(REPO / ".pytest_cache" / "model-cache"))
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        seed("My wife is Anne", "Anne likes tulips and roses", "The car is a blue Volvo", vault_dir=vault)
        seed("Standup moved to 9:30", conversation="work", kind="decision", rationale="the team asked",
             vault_dir=vault)
        settle(vault)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    proc = subprocess.Popen([sys.executable, "-m", "memvault", "agent", "--idle", "10"], env=env, cwd=str(base),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for_line(proc, "listening on")
        yield vault, env
    finally:
        stop_process(proc)


@pytest.fixture
def agent_vault(shared_agent, monkeypatch):
    vault, env = shared_agent
    for name in ("HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "GIT_CONFIG_GLOBAL", "MEMVAULT_DIR"):
        monkeypatch.setenv(name, env[name])
    return vault


NOW = "2026-12-01T00:00:00+00:00"  # recency is scored against the clock: the same clock both ways
READS = [
    ("search", "--now", NOW, "wife"),
    ("search", "--now", NOW, "--json", "-k", "2", "flowers"),
    ("--json", "search", "--now", NOW, "car", "--all"),
    ("search", "--now", NOW, "--explain", "wife"),
    ("ls",),
    ("ls", "--json", "-c", "work"),
    ("log",),
    ("log", "--json", "-n", "1"),
    ("stats",),
    ("conversations",),
    ("show", "nosuchid"),                  # exit 1: not found
    ("search", "--top-k", "0", "wife"),    # exit 2: a usage error from the option parser
    ("search", "--since", "yesterday-ish", "wife"),  # exit 2: the library's words with the CLI's flag
    ("review", "--json"),
    ("reindex", "--json"),
]
_TIMINGS = re.compile(r"\d+(\.\d+)? ?(ms|s)\b")


def reads_compared(vault: Path, reads) -> None:
    differ = []
    for args in reads:
        cold, warm_run = both_ways(vault, *args)
        try:
            same(cold, warm_run, lambda text: _TIMINGS.sub("<t>", text))
        except AssertionError as exc:
            differ.append(f"{' '.join(args)}: {exc}")
    assert not differ, "\n".join(differ)


def test_reads_give_the_same_bytes_and_exit_codes_warm_as_cold(agent_vault):
    """A representative set: a search as text and as JSON, ls, log, a not-found (exit 1), a usage
    error (exit 2)."""
    reads_compared(agent_vault, [READS[i] for i in (0, 1, 4, 6, 10, 11)])


def test_every_read_gives_the_same_bytes_and_exit_codes_warm_as_cold(agent_vault):
    reads_compared(agent_vault, READS)


def test_show_of_an_id_and_stdin_piped_in(agent_vault):
    memory_id = cli_json("ls")[0]["id"]
    for args in (("show", memory_id[:8]), ("show", "--raw", memory_id), ("show", "--json", memory_id)):
        same(*both_ways(agent_vault, *args))
    # stdin reaches the command: a bad byte is refused the same way
    same(*both_ways(agent_vault, "add", input=b"\xff\xfe broken"))


_IDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{7,40}\b|\d{8}T\d{6}\d*Z|"
                  r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(\+00:00|Z)?")


def mask(text: str) -> str:
    """Ids, commits and times told apart only by when they were made."""
    return _IDS.sub("<x>", text)


@pytest.fixture
def two_vaults(tmp_path, monkeypatch):
    """One seeded vault copied: the cold run writes to one, the agent to the other."""
    first = tmp_path / "cold"
    seed("My wife is Anne", "The car is a blue Volvo", vault_dir=first)
    settle(first)
    second = tmp_path / "warm"
    shutil.copytree(first, second, symlinks=True)
    shutil.rmtree(second / ".memvault" / "index")  # rebuilt: LanceDB's files name their own folder
    memvault.open_vault(second).reindex()
    monkeypatch.setenv("MEMVAULT_DIR", str(second))
    proc = start_agent()
    try:
        yield first, second
    finally:
        stop_process(proc)


WRITES = [
    (("add", "Tim reads comics"), None),
    (("add", "--json", "--tag", "kids", "Ida plays chess"), None),
    (("add", "-"), b"Piped in: the boiler is serviced in May\n"),
    (("add", "--each-line", "-"), b"- one\n- two\n"),
    (("add", "My wife is Anne"), None),  # a duplicate: said on stderr, not stored
    (("add", "--jsonl", "-"), b'{"text": "from jsonl"}\n{"text": ""}\n'),  # line 2 is bad: exit 1, nothing stored
    # a bulk add's output (each memory read back from its file) and a duplicate in it, warm as cold
    (("add", "--jsonl", "--json", "-"), b'{"text": "from jsonl", "tags": ["x"]}\n{"text": "Tim reads comics"}\n'),
]


def test_writes_do_the_same_warm_as_cold(two_vaults, llm_env, monkeypatch):
    """add (arguments, --json, stdin, --each-line, a duplicate, a bad --jsonl), add --extract, rm (twice:
    the second an error), restore and undo, each in both vaults: the same output, exit code and
    commits (ids and times masked)."""
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    llm_env.default = '{"answer": "no"}'  # each nearby fact asked about: not the same, the new one is added
    cold_vault, warm_vault = two_vaults
    memory_id = cli_json("--vault", str(cold_vault), "ls")[0]["id"]
    steps = [*WRITES, (("add", "--extract", "My son is Tim"), None), (("rm", memory_id), None),
             (("rm", memory_id), None), (("restore", memory_id), None), (("undo",), None)]
    for args, stdin in steps:
        runs = []
        for vault, env in ((cold_vault, COLD), (warm_vault, WARM)):
            if "--extract" in args:
                llm_env.push(facts("The user's son is named Tim"))
            before = served(warm_vault)
            runs.append(run_memvault("--vault", str(vault), *args, input=stdin, env=env))
            assert served(warm_vault) == before + (vault == warm_vault), args
        same(*runs, mask)
    # what each vault holds afterwards, read in this process (the commands above are what is compared)
    listed = [run_cli("--vault", str(v), "ls", "-n", "50").stdout for v in two_vaults]
    assert mask(listed[0]) == mask(listed[1])
    assert "The user's son is named Tim" in listed[1] and "Piped in: the boiler" in listed[1]
    logs = [run_cli("--vault", str(v), "log").stdout for v in two_vaults]
    assert mask(logs[0]) == mask(logs[1])


def facts(*texts: str) -> str:
    return json.dumps({"facts": list(texts)})


def test_the_socket_is_owner_only_and_one_agent_per_vault(agent_vault):
    sock = agent_vault / ".memvault" / agent_socket.SOCKET_NAME
    assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
    second = run_memvault("agent", "--idle", "1")
    assert second.returncode == 1
    assert b"an agent already runs for" in second.stderr
    status = run_memvault("agent", "status", "--json")
    assert status.returncode == 0
    shown = json.loads(status.stdout)
    assert shown["vault"] == str(agent_vault) and shown["rss_mb"] > 0 and shown["version"]
    lines = run_memvault("agent", "status").stdout.decode()
    assert f"pid       {shown['pid']}" in lines and "resident" in lines


@pytest.mark.skipif(os.getuid() != 0, reason="giving the socket to another user needs root")
def test_another_users_socket_is_refused_and_the_command_runs_cold(agent_vault):
    sock = agent_vault / ".memvault" / agent_socket.SOCKET_NAME
    cold = run_memvault("search", "wife", env=COLD)
    os.chown(sock, 65534, -1)
    try:
        before = served_as(agent_vault, 65534)
        result = run_memvault("search", "wife", env=WARM)
        assert result.returncode == 0 and result.stdout == cold.stdout
        assert b"not using the agent" in result.stderr and b"belongs to user 65534" in result.stderr
        # the socket file passes for user 65534's, but the process behind it is not theirs
        with pytest.raises(agent_socket.NotOurs, match="runs as user 0"):
            agent_socket.connect(agent_vault / ".memvault", uid=65534)
        assert served_as(agent_vault, 65534) == before
    finally:
        os.chown(sock, 0, -1)


def gone(pid: int, timeout: float = 10) -> bool:
    """Whether the process has ended (a zombie its new parent has not reaped yet counts as ended)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in "ZX":
                return True
        except OSError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def served_as(vault: Path, uid: int) -> int:
    sock = vault / ".memvault" / agent_socket.SOCKET_NAME
    owner = os.lstat(sock).st_uid
    os.chown(sock, os.getuid(), -1)
    try:
        return served(vault)
    finally:
        os.chown(sock, owner, -1)


def test_a_stale_socket_is_removed_and_the_command_runs_cold(vault_dir):
    seed("My wife is Anne")
    settle()
    proc = start_agent()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # as a crash or the OOM killer would
        proc.wait(timeout=10)
    finally:
        stop_process(proc)
    sock = vault_dir / ".memvault" / agent_socket.SOCKET_NAME
    assert sock.exists()
    cold = run_memvault("search", "wife", env=COLD)
    result = run_memvault("search", "wife", env=WARM)
    assert (result.returncode, result.stdout, result.stderr) == (0, cold.stdout, cold.stderr)
    assert not sock.exists()


def test_another_version_of_memvault_is_not_served_and_runs_cold(agent_vault, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(REPO / "memvault", other / "memvault", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**WARM, "PYTHONPATH": str(other)}
    cold = run_memvault("search", "wife", env=COLD)
    before = served(agent_vault)
    result = subprocess.run([sys.executable, "-m", "memvault", "search", "wife"], capture_output=True,
                            env={**os.environ, **env}, timeout=300, cwd=tmp_path)  # not the checkout's memvault
    assert (result.returncode, result.stdout, result.stderr) == (0, cold.stdout, cold.stderr)
    assert served(agent_vault) == before  # it said no; the agent's own files are unchanged: it stays
    assert agent_socket.ask(agent_vault / ".memvault", "status") is not None


def test_an_agent_whose_files_changed_exits_and_the_command_runs_cold(vault_dir, tmp_path):
    seed("My wife is Anne")
    other = tmp_path / "install"
    shutil.copytree(REPO / "memvault", other / "memvault", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(other)}
    proc = start_agent(env)
    try:
        edited = other / "memvault" / "faces" / "term.py"  # a new install over the old one
        edited.write_text(edited.read_text() + "\n# upgraded\n")
        result = subprocess.run([sys.executable, "-m", "memvault", "search", "wife"], capture_output=True,
                                env={**os.environ, **env, **WARM}, timeout=300, cwd=tmp_path)
        assert result.returncode == 0 and b"My wife is Anne" in result.stdout
        assert proc.wait(timeout=30) == 0  # it left: the next command may start a fresh one
    finally:
        stop_process(proc)


def test_an_agent_killed_mid_command_is_reported_and_nothing_is_half_written(vault_dir):
    seed("My wife is Anne")
    proc = start_agent({"KILL_AT": "memvault/store/gitrepo.py:commit_paths"})  # the file written, not committed
    try:
        result = run_memvault("add", "The boiler is serviced in May", env=WARM)
        proc.wait(timeout=30)
    finally:
        stop_process(proc)
    assert result.returncode == 1
    assert b"memvault: error: the memvault agent" in result.stderr and b"ended while" in result.stderr
    # The next command (cold: the agent is gone) finds a whole vault and recovers as after a cold
    # command's kill: the memory whose file was in place is kept once, and committed with the next write.
    again = run_memvault("add", "The next command recovers", env=WARM)
    assert again.returncode == 0, again.stderr
    texts = [m["text"] for m in cli_json("ls")]
    assert texts.count("The boiler is serviced in May") == 1 and "My wife is Anne" in texts
    history = run_cli("log")  # what the error message points to
    assert history.exit_code == 0 and "The next command recovers" in history.stdout
    # No partial file or git lock left behind (a kill at this point of a cold add leaves the same:
    # the whole memory file, kept, found and listed).
    assert not [p for p in vault_dir.rglob("*") if p.name.endswith((".tmp", ".lock")) and ".memvault" not in p.parts]


def test_an_agent_killed_mid_add_jsonl_leaves_nothing_for_reindex_to_commit(vault_dir, tmp_path):
    """SIGKILL of the agent half way through an 80-line `add --jsonl` (issue 44): the client says the next
    command settles the change, and it does: `reindex` takes back the files the agent had written (no
    "81 hand edits" commit), and the same add run again stores each text once."""
    seed("My wife is Anne")
    lines = tmp_path / "turns.jsonl"
    texts = [f"Line {i} of 80: the heating was serviced on day {i}" for i in range(80)]
    lines.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    proc = start_agent({"KILL_AT": "memvault/store/files.py:write_memory;40"})
    try:
        result = run_memvault("add", "--jsonl", str(lines), env=WARM)
        proc.wait(timeout=30)
    finally:
        stop_process(proc)
    assert result.returncode == 1 and b"ended while" in result.stderr, result.stderr
    assert len(list((vault_dir / "entries/global/facts").glob("*.md"))) == 1 + 39  # what the kill left
    reindex = run_memvault("reindex", env=COLD)
    assert reindex.returncode == 0, reindex.stderr
    subjects = subprocess.run(["git", "-C", str(vault_dir), "log", "--format=%s"], capture_output=True,
                              text=True).stdout
    assert "hand edit" not in subjects, subjects
    assert b"took back the change memvault add" in reindex.stderr, reindex.stderr
    assert [m["text"] for m in cli_json("ls")] == ["My wife is Anne"]
    again = run_cli("add", "--jsonl", str(lines))  # in this process: the agent and its client are gone
    assert again.exit_code == 0, again.stderr
    stored = [m["text"] for m in cli_json("ls", "-n", "200")]
    assert sorted(stored) == sorted([*texts, "My wife is Anne"])
    status = subprocess.run(["git", "-C", str(vault_dir), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""
    assert b"takes back the one it had begun" in result.stderr  # what the client said, now true


def test_agent_stop_ends_it_and_removes_its_socket(vault_dir):
    seed("My wife is Anne")
    started = run_memvault("agent", "start", "--idle", "10")
    pid = None
    try:
        assert started.returncode == 0, started.stderr
        pid = int(re.search(rb"pid (\d+)", started.stderr).group(1))
        assert run_memvault("search", "wife", env=WARM).returncode == 0
        assert served(vault_dir) == 1
        stopped = run_memvault("agent", "stop")
        assert stopped.returncode == 0 and f"pid {pid} stopped".encode() in stopped.stderr
        assert not (vault_dir / ".memvault" / agent_socket.SOCKET_NAME).exists()
        assert gone(pid, timeout=0)  # when it says stopped, it is gone (issue 44: it was still winding down)
        assert run_memvault("agent", "status").returncode == 1
        assert b"none runs" in run_memvault("agent", "stop").stderr
    finally:
        if pid is not None:
            stop_process(pid)


def test_auto_starts_an_agent_that_exits_when_idle(vault_dir):
    seed("My wife is Anne")
    settle()
    env = {"MEMVAULT_AGENT": "auto", "MEMVAULT_AGENT_IDLE_MINUTES": "0.05"}  # 3 s
    cold = run_memvault("search", "wife", env=COLD)
    pid = None
    try:
        first = run_memvault("search", "wife", env=env)
        assert (first.returncode, first.stdout, first.stderr) == (0, cold.stdout, cold.stderr)
        status = agent_socket.ask(vault_dir / ".memvault", "status")
        assert status is not None and status["requests"] == 1
        pid = status["pid"]
        second = run_memvault("search", "wife", env=env)
        assert second.stdout == cold.stdout and served(vault_dir) == 2
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (vault_dir / ".memvault" / agent_socket.SOCKET_NAME).exists():
            time.sleep(0.2)
        assert not (vault_dir / ".memvault" / agent_socket.SOCKET_NAME).exists()
        assert "idle for" in (vault_dir / ".memvault" / agent_socket.LOG_NAME).read_text()
    finally:
        if pid is not None:
            stop_process(pid)


def test_interactive_commands_stay_cold():
    for argv in (["edit", "abcd"], ["chat"], ["serve"], ["mcp"], ["agent", "status"], ["sync"],
                 ["reindex", "--watch"], ["search", "--help"], ["--version"], ["--help"]):
        assert not warm.goes_warm(argv), argv
    for argv in (["search", "x"], ["-q", "--vault", "/v", "add", "x"], ["review", "--json"], ["ls"]):
        assert warm.goes_warm(argv), argv


def test_the_warm_path_imports_no_heavy_library(agent_vault):
    probe = ("import sys, runpy\nsys.argv = ['memvault', 'search', 'wife']\n"
             "try:\n    runpy.run_module('memvault', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
             "heavy = [m for m in ('typer', 'rich', 'lancedb', 'fastembed', 'litellm', 'numpy', 'git') if m in sys.modules]\n"
             "print('HEAVY', heavy, code, file=sys.stderr)\n")
    before = served(agent_vault)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, env={**os.environ, **WARM}, timeout=300)
    assert b"My wife is Anne" in result.stdout
    assert b"HEAVY [] 0" in result.stderr
    assert served(agent_vault) == before + 1


def test_the_agent_sees_other_writers_hand_edits_and_an_index_rebuilt_meanwhile(vault_dir):
    """The agent keeps its LanceDB connection and table between commands (index.keep_handles); each command
    still sees what changed since the last: another process's add, a hand edit of a memory's file, and the
    index rebuilt by another process (its table folder removed and made anew: the kept one is dropped)."""
    seed("My wife is Anne", "The car is a blue Volvo")
    settle()
    proc = start_agent()
    try:
        def warm_texts(*words: str) -> list[str]:
            before = served(vault_dir)
            result = run_memvault("search", "--json", "--relevance-floor", "0", *words, env=WARM)
            assert result.returncode == 0, result.stderr
            assert served(vault_dir) == before + 1
            return [row["text"] for row in json.loads(result.stdout)]

        # The other writers are this test's process (the model loaded once), not cold commands.
        assert "The car is a blue Volvo" in warm_texts("car")  # the table is kept from here on
        seed("The boat is a red canoe")
        assert warm_texts("boat")[0] == "The boat is a red canoe"
        car = next(p for p in (vault_dir / "entries").rglob("*.md") if "blue Volvo" in p.read_text())
        car.write_text(car.read_text().replace("blue Volvo", "green Saab"))  # in place: no folder changes
        texts = warm_texts("car")
        assert "The car is a green Saab" in texts and "The car is a blue Volvo" not in texts
        assert run_cli("reindex", "--full").exit_code == 0
        seed("The bike is a yellow tandem")
        assert warm_texts("bike")[0] == "The bike is a yellow tandem"
        assert warm_texts("canoe")[0] == "The boat is a red canoe"
    finally:
        stop_process(proc)
