"""Shared fixtures: an isolated environment per test, a CLI runner, the installed entry point."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memvault.cli import app
from fixtures_models import *  # noqa: F401,F403  (embedder, tiny_reranker_dir)
from fake_llm import *  # noqa: F401,F403  (fake_llm, refused_url)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """No test reads the developer's vault, settings or git identity."""
    shared_cache = os.environ.get("MEMVAULT_TEST_CACHE") or str(REPO / ".pytest_cache" / "model-cache")
    for name in list(os.environ):
        if name.startswith("MEMVAULT_") or name.startswith("GIT_"):
            monkeypatch.delenv(name)
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


def run_memvault(*args: str, input: str | bytes | None = None, env: dict | None = None,
                 timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """Run the installed `memvault` entry point in a subprocess."""
    exe = shutil.which("memvault") or sys.executable
    argv = [exe, *args] if exe != sys.executable else [exe, "-m", "memvault", *args]
    return subprocess.run(argv, input=input.encode() if isinstance(input, str) else input,
                          capture_output=True, env={**os.environ, **(env or {})}, timeout=timeout, **kwargs)


def seed(*texts: str, vault_dir: Path | None = None, **options):
    """Memories stored through the library (`Memvault.add`, one commit): the one way tests give a vault
    its content ($MEMVAULT_DIR unless vault_dir is given; options as `add` takes them). Tests of the
    `add` command itself drive the CLI instead."""
    import memvault

    return memvault.open_vault(vault_dir).add(list(texts), **options)


KILL_AT = REPO / "tests" / "kill_at.py"


def start_memvault(*args: str, env: dict | None = None) -> subprocess.Popen:
    """`memvault ARGS` in its own process group, through kill_at.py (a no-op without KILL_AT or
    PAUSE_AT in env). Stop it with stop_process in a finally."""
    return subprocess.Popen([sys.executable, str(KILL_AT), *args], env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_line(proc: subprocess.Popen, marker: str, timeout: float = 180) -> None:
    """Read proc's stderr until a line holds marker; fail when it ends or the time is up first."""
    import time

    deadline = time.time() + timeout
    while True:
        line = proc.stderr.readline()
        if marker in line:
            return
        assert line and time.time() < deadline, f"no {marker!r} from {proc.args}"


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL after timeout seconds (the standard for anything a test starts)."""
    import signal

    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


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
