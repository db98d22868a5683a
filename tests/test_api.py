"""The library's public surface (`import memvault`): the README example runs as written, every public
operation is documented, errors are MemvaultErrors, and the JSON the CLI prints is the library's own."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

import memvault
from conftest import REPO, run_cli, run_memvault
from fake_llm import refused_url
from memvault.api import Memvault, ReconcileOutcome, SessionView
from memvault.store import files

NOW = "2026-03-01T12:00:00+00:00"


def readme_python_example() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow  # end to end: README's example run as written, with cold commands
def test_the_readme_example_runs_as_written(vault_dir, llm_env):
    llm_env.push("Noted: Anne's birthday is on 12 May.", json.dumps({"facts": ["Anne's birthday is on 12 May"]}))
    llm_env.default = '{"answer": "yes"}'  # the reconciliation questions, then the rolling summary
    done = subprocess.run([sys.executable, "-c", readme_python_example()], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"\d\.\d{3}  My wife is Anne", lines[0]), lines
    assert lines[1] == "Noted: Anne's birthday is on 12 May."
    assert lines[2] == "ADD Anne's birthday is on 12 May"
    assert "Anne's birthday is on 12 May" in [m.text for m in memvault.open_vault(vault_dir).vault.iter_memories()]


def public_methods(cls) -> list[str]:
    return [name for name, member in inspect.getmembers(cls) if not name.startswith("_") and callable(member)]


def test_every_public_operation_is_documented():
    undocumented = [name for name in public_methods(Memvault) if not inspect.getdoc(getattr(Memvault, name))]
    assert not undocumented
    for name in ("add", "add_jsonl", "add_extracted", "search", "search_many", "chat", "ask", "session",
                 "clear_session", "reconcile", "summarize", "reindex", "check", "watch", "log", "get", "edit",
                 "remove", "models"):
        assert name in public_methods(Memvault), name
    for thing in (memvault.open_vault, memvault.api.open_vault, SessionView, ReconcileOutcome, memvault):
        assert inspect.getdoc(thing), thing


def test_importing_memvault_loads_nothing_heavy():
    code = ("import sys, memvault; heavy = [m for m in ('lancedb', 'fastembed', 'litellm', 'typer', 'onnxruntime', "
            "'numpy', 'pyarrow', 'yaml') if m in sys.modules]; print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    assert memvault.Memvault is Memvault  # the class loads when first asked for


def test_errors_are_memvault_errors(vault_dir, monkeypatch):
    vault = memvault.open_vault(vault_dir)
    with pytest.raises(memvault.MemvaultError, match="no vault at"):
        vault.search("anything")
    vault.add("The user keeps bees")
    with pytest.raises(memvault.NotFound):
        vault.get("ffffffff")
    with pytest.raises(memvault.UsageError, match="too short"):
        vault.get("ab")
    with pytest.raises(memvault.UsageError, match="^since 'last tuesday-ish' is not an ISO 8601") as bad_since:
        vault.search("bees", since="last tuesday-ish")  # the library names its parameter; the CLI its flag
    assert bad_since.value.params == ("since",)
    with pytest.raises(memvault.UsageError, match="recency_weight"):
        vault.search("bees", recency_weight=3)
    with pytest.raises(memvault.UsageError, match="path component"):
        vault.add("x", conversation="../../etc")
    with pytest.raises(memvault.UsageError, match="unknown kind"):
        vault.search("bees", kinds=["memo"])
    with pytest.raises(memvault.MemvaultError, match="nothing to add") as empty:
        vault.add("  ")
    assert empty.value.params == ("text",)  # serve answers 400 with param "text", not a 500
    with pytest.raises(memvault.UsageError, match="the limit is") as huge:  # no CLI flag in the library's words
        vault.add("x" * (files.MAX_MEMORY_BYTES + 1))
    assert "--" not in str(huge.value)
    vault.remove(vault.recent(limit=1)[0].id)
    with pytest.raises(memvault.AlreadyDeleted, match="is deleted"):  # serve: 409
        vault.remove(vault.recent(limit=1, deleted=True)[0].id)
    down = memvault.open_vault(vault_dir, llm_base_url=refused_url())
    with pytest.raises(memvault.LLMError, match="unreachable") as caught:
        down.ask("Do I keep bees?")
    assert isinstance(caught.value, memvault.MemvaultError)


def test_json_shapes_are_the_cli_s(vault_dir):
    vault = memvault.open_vault(vault_dir)
    added = vault.add("The user keeps bees", tags=["hobby"])
    cli_added = json.loads(run_cli("add", "--json", "--tag", "garden", "The user grows leeks").stdout)[0]
    assert set(cli_added) == set(added.to_json(vault.root)[0])
    [added] = added
    search = json.loads(run_cli("search", "--json", "--now", NOW, "bees").stdout)
    assert search == vault.search("bees", now=NOW).to_json()
    show = json.loads(run_cli("show", "--json", added.id[:8]).stdout)
    assert show == vault.get(added.id[:8]).to_json(vault.root)
    log = json.loads(run_cli("log", "--json").stdout)
    assert log == json.loads(json.dumps([e.to_json() for e in vault.log()], default=str))
    lines = "\n".join(json.dumps({"qid": q, "query": q, "now": NOW}) for q in ("bees", "leeks"))
    cli_many = [json.loads(line) for line in run_cli("search", "--queries", "-", input=lines).stdout.splitlines()]
    # The library takes the requests as mappings; reading them from JSON lines is the CLI's (--queries).
    requests = [json.loads(line) for line in lines.splitlines()]
    api_many = [{"qid": qid, "results": outcome.to_json()} for qid, outcome in vault.search_many(requests)]
    assert cli_many == api_many and [row["results"][0]["text"] for row in api_many] == [
        "The user keeps bees", "The user grows leeks"]


def test_a_warm_vault_sees_other_writers_and_hand_edits(vault_dir):
    vault = memvault.open_vault(vault_dir, watch=True)
    try:
        [bees] = vault.add("The user keeps bees")
        assert [r.text for r in vault.search("bees").results] == ["The user keeps bees"]
        assert run_memvault("add", "The user keeps two goats").returncode == 0  # another process
        assert _eventually(lambda: "The user keeps two goats" in [r.text for r in vault.search("goats").results])
        bees.path.write_text(bees.path.read_text().replace("keeps bees", "keeps wild bees"))  # in place, by hand
        assert _eventually(lambda: vault.search("bees", top_k=1).results[0].text == "The user keeps wild bees")
    finally:
        vault.close()


def test_a_warm_vault_does_not_sync_its_own_writes_again_but_sees_a_hand_edit_of_them(vault_dir, monkeypatch):
    """The folder's events of a warm process's own writes name files whose bytes the index has: its
    next search syncs nothing (issue 41: serve's next message paid ~15 ms for
    it); a hand edit of the same file is synced."""
    from memvault.store import index

    vault = memvault.open_vault(vault_dir, watch=True)
    asked = []
    real = index._Sync.run
    monkeypatch.setattr(index._Sync, "run", lambda self: asked.append(self.how) or real(self))
    try:
        [bees] = vault.add("The user keeps bees")
        vault.search("bees")  # the first read of a warm vault syncs everything
        [goats] = vault.add("The user keeps goats")
        time.sleep(0.5)  # its files' events have arrived
        asked.clear()
        assert [r.text for r in vault.search("goats", top_k=1).results] == ["The user keeps goats"]
        assert asked == []
        goats.path.write_text(goats.path.read_text().replace("keeps goats", "keeps geese"))  # by hand
        # Until the edit's event arrives nothing matches "geese": an empty list, not an error.
        assert _eventually(lambda: [r.text for r in vault.search("geese", top_k=1).results] == ["The user keeps geese"])
        assert asked  # that one was synced
    finally:
        vault.close()


def test_a_warm_vault_makes_its_queries_vectors_ahead_on_one_kept_thread(vault_dir):
    """Issue 41: a thread per search paid ONNX Runtime's first inference in a new thread each time; the
    vectors are made ahead on one thread kept for the process, and the results are the same."""
    import threading

    vault = memvault.open_vault(vault_dir, watch=True)
    try:
        vault.add(["The user keeps bees", "The user rides a blue bike"])
        found = [[r.text for r in vault.search(question).results] for question in ("bees", "bike", "honey", "bees")]
        assert found[0][0] == "The user keeps bees" and found[1][0] == "The user rides a blue bike"
        assert found[3] == found[0]
        ahead = [t for t in threading.enumerate() if t.name.startswith("memvault-embed-ahead")]
        assert len(ahead) == 1 and ahead[0].is_alive()
    finally:
        vault.close()


def test_a_warm_vault_sees_whole_folders_change_and_edits_made_while_another_process_wrote(vault_dir):
    """A warm reader syncs the files the folder's events name, and walks every file when a folder
    was moved or removed (its files have no events of their own); a hand edit it could not sync
    because another process held the lock is synced by the next read."""
    import shutil

    from memvault.store.lock import vault_lock

    vault = memvault.open_vault(vault_dir, watch=True)
    try:
        vault.add("The user keeps bees", conversation="farm")
        vault.add("The user keeps two goats", conversation="farm")
        assert [r.text for r in vault.search("goats", conversation="farm").results][0] == "The user keeps two goats"
        shutil.move(str(vault_dir / "entries" / "farm"), str(vault_dir / "entries" / "ranch"))  # by hand
        # Both memories match "the user keeps" (the relevance floor leaves bees out of a search for goats).
        assert _eventually(lambda: [r.path.split("/")[1] for r in vault.search("the user keeps", conversation="farm")
                                    .results] == ["ranch", "ranch"])  # the rows follow the files (the conversation is in their front matter)
        shutil.rmtree(vault_dir / "entries" / "ranch")
        assert _eventually(lambda: vault.search("goats", all_conversations=True).results == [])
        [hens] = vault.add("The user keeps hens")
        with vault_lock(vault.vault.lock_path, holder="another writer"):
            hens.path.write_text(hens.path.read_text().replace("keeps hens", "keeps ducks"))
            time.sleep(1.0)  # the events arrive while the lock is held
            assert vault.search("ducks", top_k=1).results[0].text == "The user keeps hens"  # read as it is
        assert vault.search("ducks", top_k=1).results[0].text == "The user keeps ducks"
    finally:
        vault.close()


def _eventually(check, timeout: float = 10.0) -> bool:
    """File-system events arrive a moment after the write; a warm reader sees them by its next read."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_edit_with_text_keeps_the_front_matter_and_commits(vault_dir):
    vault = memvault.open_vault(vault_dir)
    [memory] = vault.add("The user keeps bees", tags=["hobby"], source="a chat at the market")
    result = vault.edit(memory.id, "The user keeps three hives of bees")
    assert result.changed and result.memory.text == "The user keeps three hives of bees"
    again = vault.get(memory.id)
    assert again.tags == ["hobby"] and again.extra["source"] == "a chat at the market" and "updated_at" in again.extra
    assert vault.log(limit=1)[0].command == "edit"
    assert vault.edit(memory.id, "The user keeps three hives of bees").changed is False


def test_session_view_and_reindex_report(vault_dir, llm_env):
    vault = memvault.open_vault(vault_dir)
    llm_env.push("Hi there.")
    result = vault.ask("hello", now=datetime(2026, 3, 1, 12, tzinfo=timezone.utc))
    assert result.reply == "Hi there." and result.learned is not None and result.learned.to_json() == []
    view = vault.session(now="2026-03-01T12:05:00+00:00")
    assert [t.text for t in view.turns] == ["hello", "Hi there."] and view.idle_seconds is not None
    assert view.to_json()["turns"][0]["role"] == "user"
    Path(vault.root, "entries", "global", "notes").mkdir(parents=True)
    Path(vault.root, "entries", "global", "notes", "plain.md").write_text("A note without front matter\n")
    report = vault.reindex()
    assert [Path(p).name for p in report.added] == ["plain.md"] and report.to_json()["adopted"]


def test_chat_with_a_client_history_sends_it_as_it_is(vault_dir, llm_env):
    """What `serve` does for an OpenAI client: its own history goes through unchanged, the memory
    block goes in right before the last message, sampling options reach the model."""
    vault = memvault.open_vault(vault_dir)
    vault.add("The user's wife is named Anne")
    llm_env.push({"chunks": ["Anne", "."]})
    history = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"},
               {"role": "assistant", "content": "hello"}]
    turn = vault.chat("What is my wife's name?", history=history, llm_options={"max_tokens": 7}, learn=False)
    assert "".join(turn) == "Anne."
    sent = llm_env.requests[-1]
    assert sent["messages"][:3] == history and sent["messages"][-1] == {"role": "user",
                                                                        "content": "What is my wife's name?"}
    assert sent["messages"][3]["role"] == "system" and "[memory] The user's wife is named Anne" in \
        sent["messages"][3]["content"]
    assert sent["max_tokens"] == 7
    result = turn.finish()
    assert result.reply == "Anne." and result.user_turn.extra.get("unanswered") is None
    # Both turns are stored, as for memvault's own chat (the earlier history was the client's).
    assert [t.text for t in vault.session().turns] == ["What is my wife's name?", "Anne."]
