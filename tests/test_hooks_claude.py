"""Claude Code remembers, through its hooks (issue 42), tested with the real `claude` CLI (slow).

`claude -p` (npm's @anthropic-ai/claude-code, installed by the set-up below into .pytest_cache/claude-code,
or MEMVAULT_TEST_CLAUDE naming a `claude` to use; skipped with the reason where npm cannot install it)
runs in the test's HOME after `memvault setup claude-code`, against tests/fake_anthropic.py as its
Anthropic upstream (ANTHROPIC_BASE_URL), which records every request. Session 1 states a fact; session 2
asks about it: the request of session 2 carries the memory, and the vault holds session 1's exchange as
turns, committed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import memvault
from conftest import REPO, run_memvault
from fake_anthropic import request_text
from fake_llm import refused_url
from test_hooks import _stop_upkeep as wait_for_upkeep

pytestmark = pytest.mark.slow
PREFIX = REPO / ".pytest_cache" / "claude-code"


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The `claude` command: MEMVAULT_TEST_CLAUDE, else npm's package installed once into .pytest_cache
    (under a lock: two test processes may ask at once)."""
    given = os.environ.get("MEMVAULT_TEST_CLAUDE")
    if given:
        return runs(Path(given))
    exe = PREFIX / "node_modules" / ".bin" / "claude"
    PREFIX.mkdir(parents=True, exist_ok=True)
    with open(PREFIX.parent / "claude-code.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.exists():
            if not shutil.which("npm"):
                pytest.skip("npm is not installed: the claude CLI cannot be installed")
            try:
                done = subprocess.run(["npm", "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund",
                                       "@anthropic-ai/claude-code"], capture_output=True, text=True, timeout=900)
            except subprocess.TimeoutExpired:
                pytest.skip("npm did not install @anthropic-ai/claude-code within 15 minutes")
            if done.returncode != 0 or not exe.exists():
                said = (done.stderr.strip().splitlines() or ["no output"])[-1]
                pytest.skip(f"npm could not install @anthropic-ai/claude-code (registry unreachable?): {said}")
    return runs(exe)


def runs(exe: Path) -> Path:
    """exe, once `claude --version` answers (node missing or too old: skipped, saying so)."""
    try:
        done = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"the claude CLI at {exe} does not run: {exc}")
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"the claude CLI at {exe} does not run (exit {done.returncode}): {said}")
    return exe


def claude(exe: Path, prompt: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), "-p", prompt], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def wait_for(check, what: str, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout:g} s: {what}")


def test_claude_code_remembers_across_sessions_through_memvaults_hooks(claude_bin, fake_anthropic, tmp_path):
    home = Path(os.environ["HOME"])
    project = home / "work" / "atlas"
    (project / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    vault = tmp_path / "vault"
    hook_env = {"MEMVAULT_DIR": str(vault), "MEMVAULT_LLM_BASE_URL": refused_url()}
    setup = run_memvault("setup", "claude-code", env=hook_env)
    assert setup.returncode == 0, setup.stderr
    settings_file = home / ".claude" / "settings.json"
    settings = json.loads(settings_file.read_text())
    assert settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].endswith(f"--vault {vault} hook claude-code")
    # What is tested is the memory's way, on a machine that may be loaded: claude's own limit on a hook run
    # (setup's 10 s backstop) and memvault's hook_timeout are raised (the speed is bench/hooks.py's).
    for groups in settings["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                hook["timeout"] = 90
    settings_file.write_text(json.dumps(settings))

    fake_anthropic.default = "Noted."
    env = {key: os.environ[key] for key in ("PATH", "PYTHONPATH", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
                                            "MEMVAULT_CACHE_DIR", "XDG_DATA_HOME", "XDG_CACHE_HOME")
           if key in os.environ}
    env.update(HOME=str(home), ANTHROPIC_BASE_URL=fake_anthropic.base_url, ANTHROPIC_API_KEY="sk-test",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
               MEMVAULT_LLM_BASE_URL=hook_env["MEMVAULT_LLM_BASE_URL"],  # hooks take memvault's settings from here
               MEMVAULT_HOOK_TIMEOUT="60")
    try:
        first = claude(claude_bin, "My favourite city is Lisbon.", project / "src", env)
        assert first.returncode == 0 and first.stdout.strip() == "Noted.", first.stderr
        opened = memvault.open_vault(vault)

        def stored():
            if not (vault / ".git").exists():
                return None
            turns = opened.recent("~/work/atlas", kinds=["turn"])
            return turns if len(turns) == 2 else None

        turns = {t.role: t for t in wait_for(stored, "session 1's exchange stored")}
        # The vault's agent, started by the hooks, answers session 2's prompt (as it would a user who types).
        wait_for(lambda: run_memvault("--vault", str(vault), "agent", "status").returncode == 0,
                 "the vault's agent listening")
        asked = len(fake_anthropic.requests)
        second = claude(claude_bin, "What is my favourite city?", project, env)
        assert second.returncode == 0, second.stderr
    finally:
        run_memvault("--vault", str(vault), "agent", "stop")
        wait_for_upkeep(vault)

    # The exchange of session 1, as turns, committed, from Claude Code's own transcript.
    assert turns["user"].text == "My favourite city is Lisbon." and turns["assistant"].text == "Noted."
    assert turns["user"].extra["agent"] == "claude-code" and turns["user"].extra["agent_session"]
    history = opened.log()
    assert any("claude-code exchange (~/work/atlas)" in entry.subject for entry in history)
    assert not subprocess.run(["git", "-C", str(vault), "status", "--porcelain", "entries"], capture_output=True,
                              text=True).stdout.strip()  # nothing left uncommitted
    # Session 2's request to the model carries the memory the hooks injected.
    session2 = [request_text(body) for body in fake_anthropic.requests[asked:]]
    assert any("What is my favourite city?" in text for text in session2)
    injected = [text for text in session2 if "<memory>" in text and "My favourite city is Lisbon." in text]
    log = vault / ".memvault" / "hook.log"
    assert injected, (log.read_text() if log.exists() else "no hook.log") + "\n" + session2[-1][-2000:]
    assert "UserPromptSubmit hook additional context" in injected[0]
    assert "a bug" not in (log.read_text() if log.exists() else "")
