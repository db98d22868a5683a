"""Opt-in: the whole chat loop against a real local model.

Run with MEMVAULT_LIVE_LLM=<base url> (and MEMVAULT_LIVE_MODEL, default the local
llama-server's alias), e.g. after `../shared/llm/local-llm.sh start`:
    MEMVAULT_LIVE_LLM=http://127.0.0.1:8083/v1 python -m pytest tests/test_live_llm.py
"""

import json
import os

import pytest

from conftest import git, run_memvault

LIVE = os.environ.get("MEMVAULT_LIVE_LLM")
# `-m live` selects these (and `-m "not live"` leaves them out); without MEMVAULT_LIVE_LLM they skip, saying why.
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(not LIVE, reason="set MEMVAULT_LIVE_LLM=<base url> to run against a real model")]


@pytest.fixture
def live_env(vault_dir):
    return {"MEMVAULT_LLM_BASE_URL": LIVE,
            "MEMVAULT_LLM_MODEL": os.environ.get("MEMVAULT_LIVE_MODEL", "openai/qwen2.5-coder-1.5b"),
            "MEMVAULT_LLM_API_KEY": os.environ.get("MEMVAULT_LIVE_API_KEY", "local"),
            "MEMVAULT_LLM_TIMEOUT": "300"}


def test_chat_remembers_across_sessions(vault_dir, live_env):
    first = run_memvault("chat", "--json", "My wife is called Anne and she is a doctor.", env=live_env, timeout=900)
    assert first.returncode == 0, first.stderr
    learned = json.loads(first.stdout)["learned"]
    assert any("anne" in row["text"].lower() for row in learned), learned
    run_memvault("chat", "--clear", env=live_env)
    second = run_memvault("chat", "--json", "--no-learn", "What is my wife's name?", env=live_env, timeout=900)
    assert second.returncode == 0, second.stderr
    data = json.loads(second.stdout)
    assert any("Anne" in m["text"] for m in data["memories"])
    assert "anne" in data["reply"].lower()
    assert git(vault_dir, "status", "--porcelain") == ""
