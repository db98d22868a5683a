"""Terminal manners: results on stdout and the rest on stderr, --json is JSON and nothing else,
-q leaves only results and errors, no colour or progress bars off a terminal or with NO_COLOR."""

import json
import os
import re
import select
import subprocess
import sys

import pytest

from conftest import run_cli, run_memvault, seed, stop_process
from memvault.faces import term

ANSI = re.compile(r"\x1b\[([0-9;]*)m")
COLOUR_CODES = {str(n) for n in [*range(30, 39), *range(40, 49), *range(90, 98), *range(100, 108)]}


def has_colour(text: str) -> bool:
    return any(set(m.group(1).split(";")) & COLOUR_CODES for m in ANSI.finditer(text))


def run_in_pty(args: list[str], env: dict, answers: str = "", timeout: float = 120) -> str:
    """Run a command with stdin/stdout/stderr on a pseudo-terminal, typing `answers`; returns what it
    wrote there."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    if answers:
        os.write(master, answers.encode())
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the other side is closed
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=timeout)
    finally:
        stop_process(proc)
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture(autouse=True)
def loud_again():
    """`-q` sets a process-wide flag (memvault.faces.term); later tests in this process start loud."""
    yield
    from memvault.faces import term

    term.configure(quiet=False)


@pytest.fixture
def vault_with_memories(vault_dir):
    seed("My wife is Anne", "Anne likes tea", "The car is blue")
    return vault_dir


def first_id(vault_dir) -> str:
    return json.loads(run_cli("search", "--json", "--no-rerank", "Anne").stdout)[0]["id"]


# -- --json ---------------------------------------------------------------------------------------

def test_json_is_valid_json_and_nothing_else_global_and_per_command(vault_with_memories, tmp_path, monkeypatch):
    vault_dir = vault_with_memories
    memory_id = first_id(vault_dir)
    monkeypatch.setenv("EDITOR", "true")
    monkeypatch.setenv("MEMVAULT_RERANKER_MODEL", str(tmp_path / "no-such-reranker"))  # a notice on stderr
    (vault_dir / "entries" / "global" / "notes").mkdir(parents=True, exist_ok=True)
    (vault_dir / "entries" / "global" / "notes" / "dropped.md").write_text("a hand-written note\n")
    commands = [
        ["add", "from json"],
        ["search", "Anne"],
        ["search", "--explain", "Anne"],
        ["search", "--format", "prompt", "Anne"],
        ["show", memory_id[:8]],
        ["edit", memory_id[:8]],
        ["log", "-n", "2"],
        ["reindex", "--check"],
        ["reindex"],
        ["models"],
    ]
    for argv in commands:
        for form in ([*argv[:1], "--json", *argv[1:]], ["--json", *argv]):
            result = run_cli(*form)
            assert result.exit_code in (0, 1), (form, result.stderr)
            try:
                json.loads(result.stdout)
            except ValueError:
                pytest.fail(f"memvault {' '.join(form)}: stdout is not JSON: {result.stdout[:300]!r}")
    removed = run_cli("--json", "rm", memory_id)
    assert json.loads(removed.stdout)[0]["id"] == memory_id


def test_reindex_check_json_is_only_json(vault_with_memories):
    path = next(p for p in (vault_with_memories / "entries" / "global" / "facts").iterdir() if "blue" in p.read_text())
    path.write_text(path.read_text().replace("blue", "red"))
    result = run_cli("reindex", "--check", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["changed"] == [str(path.relative_to(vault_with_memories))]


# -- -q -------------------------------------------------------------------------------------------

def test_quiet_leaves_results_and_errors(vault_with_memories, tmp_path, monkeypatch):
    vault_dir = vault_with_memories
    notes = vault_dir / "entries" / "global" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "one.md").write_text("dropped in by hand\n")
    loud = run_cli("reindex")
    assert "adopted" in loud.stderr and "1 added" in loud.stdout
    (notes / "two.md").write_text("another one\n")
    quiet = run_cli("-q", "reindex")
    assert quiet.exit_code == 0 and quiet.stderr == "" and "1 added" in quiet.stdout

    monkeypatch.setenv("MEMVAULT_RERANKER_MODEL", str(tmp_path / "no-such-reranker"))
    loud = run_cli("search", "Anne")
    assert "reranker" in loud.stderr and loud.stdout
    quiet = run_cli("-q", "search", "Anne")
    assert quiet.stderr == "" and quiet.stdout == loud.stdout

    # Errors are never silenced.
    failed = run_cli("-q", "show", "0000ffff")
    assert failed.exit_code == 1 and failed.stderr.startswith("memvault: error: ")
    monkeypatch.setenv("MEMVAULT_EMBEDDING_MODEL", "no-such/embedding-model")
    broken = run_cli("-q", "models")
    assert broken.exit_code == 1 and "no-such/embedding-model" in broken.stderr


@pytest.mark.slow  # end to end: cold commands (~10 s here)
def test_results_on_stdout_everything_else_on_stderr(vault_dir):
    result = run_memvault("add", "a fact")
    assert result.returncode == 0
    assert re.fullmatch(rb"[0-9a-f-]{36}  entries/global/facts/\S+\.md\n", result.stdout)
    usage = run_memvault("search", "--kind", "bogus", "x")
    assert usage.returncode == 2 and usage.stdout == b"" and b"bogus" in usage.stderr


# -- colour and progress --------------------------------------------------------------------------

@pytest.mark.slow  # end to end: five cold commands (~15 s here)
def test_no_escape_codes_when_not_a_terminal(vault_with_memories):
    for argv in (["--help"], ["search", "--help"], ["search", "--explain", "--no-rerank", "Anne"], ["log"],
                 ["show", first_id(vault_with_memories)]):
        result = run_memvault(*argv)
        assert result.returncode == 0, result.stderr
        assert b"\x1b[" not in result.stdout + result.stderr, argv


@pytest.mark.slow  # end to end: cold commands in a pseudo-terminal (~14 s here)
def test_colour_only_on_a_terminal_without_no_color(vault_with_memories):
    memory_id = first_id(vault_with_memories)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "PY_COLORS")}
    env["TERM"] = "xterm-256color"
    exe = [sys.executable, "-m", "memvault"]
    assert has_colour(run_in_pty([*exe, "--help"], env))  # the check below would mean nothing otherwise
    assert has_colour(run_in_pty([*exe, "show", memory_id], env))
    env["NO_COLOR"] = "1"
    for argv in (["--help"], ["show", memory_id], ["search", "--explain", "--no-rerank", "Anne"]):
        output = run_in_pty([*exe, *argv], env)
        assert output.strip() and not has_colour(output), argv


def test_progress_bars_only_on_a_terminal_without_no_color_or_quiet(monkeypatch):
    from memvault.faces.term import progress_bar as _progress_bar

    class Tty:
        def isatty(self):
            return True

        def write(self, text):
            pass

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys, "stderr", Tty())
    try:
        term.configure(quiet=False)
        assert term.progress_allowed() and _progress_bar(True).enabled
        assert not _progress_bar(False).enabled
        monkeypatch.setenv("NO_COLOR", "1")
        assert not term.progress_allowed() and not _progress_bar(True).enabled
        monkeypatch.setenv("NO_COLOR", "")
        assert term.progress_allowed()
        term.configure(quiet=True)
        assert not term.progress_allowed()
        monkeypatch.setattr(sys, "stderr", sys.__stderr__ if not sys.__stderr__.isatty() else open(os.devnull, "w"))
        term.configure(quiet=False)
        assert not term.progress_allowed()
    finally:
        term.configure(quiet=False)


def test_third_party_progress_bars_are_off_when_progress_is(tmp_path):
    code = "import os; from memvault.faces import term; term.configure(); print(os.environ.get('TQDM_DISABLE'))"
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "1"
