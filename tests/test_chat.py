"""The LLM write path and chat, against a real HTTP server speaking the OpenAI protocol.

litellm is exercised for real: only the model behind the endpoint is scripted.
"""

import json
from datetime import datetime, timedelta, timezone

import pytest

import memvault
from conftest import git, run_cli
from fake_llm import refused_url
from memvault.store import files
from memvault.store.vault import Vault

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def facts(*texts):
    return json.dumps({"facts": list(texts)})


# Reconciliation asks one question per (memory, new fact) pair: is the memory still true?
YES, NO = '{"answer": "yes"}', '{"answer": "no"}'


def live(vault_dir, role="memory"):
    return sorted(m.text for m in Vault(vault_dir).iter_memories(roles=(role,)))


def deleted(vault_dir):
    return [m for m in Vault(vault_dir).iter_memories(include_deleted=True) if m.is_deleted]


def test_extract_my_wife_is_anne(vault_dir, llm_env):
    llm_env.push(facts("The user's wife is named Anne"), "The user is married to Anne.")
    result = run_cli("add", "--extract", "My wife is Anne")
    assert result.exit_code == 0, result.stderr
    assert live(vault_dir) == ["The user's wife is named Anne"]
    assert live(vault_dir, "summary") == ["The user is married to Anne."]
    # The extraction prompt saw only the user's words.
    assert "My wife is Anne" in llm_env.requests[0]["messages"][-1]["content"]
    assert llm_env.requests[0]["response_format"]["type"] == "json_schema"
    assert git(vault_dir, "status", "--porcelain") == ""
    assert "memvault add:" in git(vault_dir, "log", "-1", "--format=%s")
    found = json.loads(run_cli("search", "--json", "-k", "1", "wife").stdout)
    assert found[0]["text"] == "The user's wife is named Anne"


def test_contradiction_replaces_the_old_fact_and_log_shows_it(vault_dir, llm_env):
    llm_env.push(facts("The user loves pizza"), "The user loves pizza.")
    assert run_cli("add", "--extract", "I love pizza").exit_code == 0
    llm_env.push(facts("The user hates pizza"), NO, "The user hates pizza.")
    result = run_cli("add", "--extract", "I hate pizza")
    assert result.exit_code == 0, result.stderr
    assert live(vault_dir) == ["The user hates pizza"]
    [tomb] = deleted(vault_dir)
    assert tomb.text == "The user loves pizza" and tomb.extra["deleted_reason"] == "contradiction"
    new_id = next(m.id for m in Vault(vault_dir).iter_memories(roles=("memory",)))
    assert tomb.extra["replaced_by"] == new_id
    # The reconciliation question restated the old fact, and never showed an id.
    prompt = llm_env.requests[3]["messages"][-1]["content"]
    assert tomb.id not in prompt and "Is it still true that the user loves pizza?" in prompt
    history = json.loads(run_cli("log", "--json", new_id).stdout)
    actions = {(c["id"], c["action"]) for e in history for c in e["changes"]}
    assert (tomb.id, "replaced") in actions and (new_id, "added") in actions
    assert f"Memvault-Replaced: {tomb.id} -> {new_id}" in git(vault_dir, "log", "-1", "--format=%b")


def test_no_answer_replaces_the_old_fact_and_stores_the_new_one(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    llm_env.push(facts("The user lives in Berlin"))
    run_cli("add", "--extract", "I live in Berlin")
    llm_env.push(facts("The user lives in Lisbon"), NO)
    assert run_cli("add", "--extract", "I moved to Lisbon").exit_code == 0
    assert live(vault_dir) == ["The user lives in Lisbon"]


def test_contradicted_fact_points_at_the_fact_that_contradicted_it(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    llm_env.push(facts("The user lives in Berlin"))
    run_cli("add", "--extract", "I live in Berlin")
    llm_env.push(facts("The user lives in Lisbon", "The user plays chess"), NO)
    llm_env.default = YES  # chess may or may not be near enough to Berlin to be asked about
    assert run_cli("add", "--extract", "I moved to Lisbon and I play chess").exit_code == 0
    assert live(vault_dir) == ["The user lives in Lisbon", "The user plays chess"]
    [tomb] = deleted(vault_dir)
    lisbon = next(m for m in Vault(vault_dir).iter_memories(roles=("memory",)) if "Lisbon" in m.text)
    assert tomb.extra["replaced_by"] == lisbon.id


def test_yes_answer_keeps_both_facts(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    llm_env.push(facts("The user has a cat named Tom"))
    run_cli("add", "--extract", "I have a cat named Tom")
    llm_env.push(facts("The user has a dog named Rex"), YES)
    assert run_cli("add", "--extract", "I also have a dog named Rex").exit_code == 0
    assert live(vault_dir) == ["The user has a cat named Tom", "The user has a dog named Rex"]
    assert "Is it still true that the user has a cat named Tom?" in llm_env.requests[-1]["messages"][-1]["content"]


# reconcile_mode = "list": SPEC section 5's one call, short integer ids, an event per memory.


def decisions(*rows):
    return json.dumps({"memory": [{"id": i, "text": t, "event": e} for i, t, e in rows]})


@pytest.fixture
def list_mode(monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    monkeypatch.setenv("MEMVAULT_RECONCILE_MODE", "list")


def test_list_mode_delete_only_answer_still_stores_the_new_fact(vault_dir, llm_env, list_mode):
    llm_env.push(facts("The user lives in Berlin"))
    run_cli("add", "--extract", "I live in Berlin")
    berlin = next(Vault(vault_dir).iter_memories(roles=("memory",)))
    llm_env.push(facts("The user lives in Lisbon"), decisions((0, "The user lives in Berlin", "DELETE")))
    assert run_cli("add", "--extract", "I moved to Lisbon").exit_code == 0
    assert live(vault_dir) == ["The user lives in Lisbon"]
    # One reconciliation call that showed the memory under a short id, never its UUID.
    prompt = llm_env.requests[-1]["messages"][-1]["content"]
    assert '{"id": 0, "text": "The user lives in Berlin"}' in prompt and berlin.id not in prompt
    [tomb] = deleted(vault_dir)
    assert tomb.id == berlin.id and tomb.extra["deleted_reason"] == "contradiction"


def test_list_mode_hallucinated_ids_are_ignored(vault_dir, llm_env, list_mode):
    llm_env.push(facts("The user has a cat named Tom"))
    run_cli("add", "--extract", "I have a cat named Tom")
    llm_env.push(facts("The user has a dog named Rex"),
                 decisions((7, "whatever", "DELETE"), (-1, "x", "UPDATE"), (0, "The user has a cat named Tom", "NONE")))
    assert run_cli("add", "--extract", "I also have a dog named Rex").exit_code == 0
    assert live(vault_dir) == ["The user has a cat named Tom", "The user has a dog named Rex"]
    assert deleted(vault_dir) == []


def test_unknown_reconcile_mode_is_a_usage_error(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_RECONCILE_MODE", "vote")
    result = run_cli("add", "--extract", "I live in Berlin")
    assert result.exit_code == 2
    assert "reconcile_mode" in result.stderr and "pairs, list" in result.stderr
    assert llm_env.requests == []


def test_dissimilar_facts_are_not_asked_about(vault_dir, llm_env, monkeypatch):
    # Below the similarity floor there is no question (an unscripted call would fail the test).
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    llm_env.push(facts("The user likes jazz"))
    run_cli("add", "--extract", "I like jazz")
    llm_env.push(facts("The user's sister is named Maria"))
    assert run_cli("add", "--extract", "My sister is called Maria").exit_code == 0
    assert live(vault_dir) == ["The user likes jazz", "The user's sister is named Maria"]
    assert len(llm_env.requests) == 2


def test_garbage_is_retried_then_nothing_is_invented(vault_dir, llm_env):
    llm_env.push("Sure! Here are the facts: none really", "{not json")
    result = run_cli("add", "--extract", "I think I'll have lunch soon, maybe")
    # Garbage is a failure the user sees (issue 26, case 7), never "no facts found".
    assert result.exit_code == 1
    assert len(llm_env.requests) == 2  # one retry, with the validation error quoted
    assert "valid" in json.dumps(llm_env.requests[1]["messages"][-1]).lower()
    assert live(vault_dir) == []
    assert "no valid answer" in result.stderr and "no facts found" not in result.stderr


def test_reconcile_failure_adds_all_new_facts(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    llm_env.push(facts("The user plays chess"))
    run_cli("add", "--extract", "I play chess")
    llm_env.push(facts("The user plays chess on Sundays"), {"status": 500})
    assert run_cli("add", "--extract", "I play chess on Sundays").exit_code == 0
    assert live(vault_dir) == ["The user plays chess", "The user plays chess on Sundays"]


def test_a_chat_whose_learning_failed_still_has_a_learned_result(vault_dir, llm_env):
    """README's library example (`for change in result.learned.to_json()`) raised AttributeError when the
    model could not be asked for facts: `learned` was None. It is a result that says learning failed."""
    vault = memvault.open_vault(vault_dir, enable_summarization=False)
    llm_env.push("Noted.", {"status": 500})  # the reply, then an LLM that is down for the facts
    turn = vault.chat("Anne's birthday is on 12 May.", stream=False)
    assert "".join(turn) == "Noted."
    result = turn.finish()
    assert result.learned.to_json() == [] and result.upkeep_error
    assert result.learned.error.startswith("learning failed: ") and "memvault learn" in result.learned.error
    llm_env.push("Hello.")
    quiet = vault.chat("Just saying hello.", stream=False, learn=False)
    list(quiet)
    assert quiet.finish().learned.skipped == "learning is off for this message"


def test_extract_with_endpoint_down_is_one_line(vault_dir, monkeypatch):
    url = refused_url()
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", url)
    monkeypatch.setenv("MEMVAULT_LLM_API_KEY", "sk-very-secret")
    result = run_cli("add", "--extract", "My wife is Anne")
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and url in result.stderr and "llm_base_url" in result.stderr
    assert "sk-very-secret" not in result.stderr + result.stdout
    assert live(vault_dir) == []


def test_the_block_sent_upstream_dates_every_memory_and_states_today(vault_dir, llm_env):
    """What the model reads carries dates: each memory its day, the block today's date (the chat's
    clock), the rolling summary when it was written; so "when" and "how long ago" have an answer."""
    vault = memvault.open_vault(vault_dir)
    vault.add("The user lives in Porto", created_at="2025-05-03T09:00:00+00:00")
    summary = vault_dir / "entries/global/summaries/summary.md"
    summary.parent.mkdir(parents=True)
    summary.write_text("---\nid: s1\nrole: summary\nconversation_id: global\ncreated_at: 2025-06-01T00:00:00+00:00\n"
                       "updated_at: 2026-02-20T10:00:00+00:00\nsummary_kind: rolling\n---\nThe user moved a lot.\n")
    llm_env.push("Porto, since last May.", facts())
    turn = memvault.open_vault(vault_dir).chat("Where do I live?", now=T0)
    list(turn)
    turn.finish()
    system = llm_env.requests[0]["messages"][0]["content"]
    assert "Today is 2026-03-01 (Sunday)." in system
    assert "[2025-05-03] [memory] The user lives in Porto" in system
    assert "Conversation summary (written 2026-02-20):" in system
    # The next exchange reads the first one's turns, each with its day.
    llm_env.push("Still Porto.", facts())
    sent = len(llm_env.requests)
    turn = memvault.open_vault(vault_dir).chat("Where do I live?", now=T0 + timedelta(days=40))
    list(turn)
    turn.finish()
    system = llm_env.requests[sent]["messages"][0]["content"]
    assert "Today is 2026-04-10 (Friday)." in system
    assert "[2026-03-01] [user] Where do I live?" in system


def test_chat_streams_the_reply_and_persists_both_turns(vault_dir, llm_env):
    run_cli("add", "The user's wife is named Anne")
    llm_env.push({"chunks": ["Your wife", " is called", " Anne."]}, facts(), )
    turn = memvault.open_vault(vault_dir).chat("What is my wife's name?", now=T0)
    pieces = list(turn)
    result = turn.finish()
    assert pieces == ["Your wife", " is called", " Anne."]
    assert result.reply == "Your wife is called Anne."
    system = llm_env.requests[0]["messages"][0]["content"]
    assert "not instructions" in system and "[memory] The user's wife is named Anne" in system
    assert llm_env.requests[0]["stream"] is True
    assert live(vault_dir, "user") == ["What is my wife's name?"]
    assert live(vault_dir, "assistant") == ["Your wife is called Anne."]
    assert git(vault_dir, "status", "--porcelain") == ""
    assert "memvault chat:" in git(vault_dir, "log", "-1", "--format=%s")


def test_chat_cli_one_shot_json_and_stdin(vault_dir, llm_env):
    llm_env.push("Noted, Tom.", facts("The user's name is Tom"), "The user is Tom.")
    result = run_cli("chat", "--json", "--now", T0.isoformat(), "My name is Tom")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reply"] == "Noted, Tom."
    assert [row["text"] for row in data["learned"]] == ["The user's name is Tom"]
    llm_env.push("Hello again.")  # a greeting: no extraction call
    result = run_cli("chat", "--now", (T0 + timedelta(minutes=1)).isoformat(), input="hello\n")
    assert result.exit_code == 0 and result.stdout == "Hello again.\n"
    # The earlier turns of this session went to the model verbatim.
    reply_request = [r for r in llm_env.requests if r.get("stream")][-1]
    sent = [m["content"] for m in reply_request["messages"][1:]]
    assert sent == ["My name is Tom", "Noted, Tom.", "hello"]


def test_chat_with_endpoint_down_keeps_the_user_turn(vault_dir, monkeypatch):
    run_cli("add", "some memory")
    url = refused_url()
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", url)
    result = run_cli("chat", "Are you there?")
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("(MEMVAULT_LLM_BASE_URL)") or "llm_base_url" in result.stderr
    assert url in result.stderr and "Traceback" not in result.stderr
    assert live(vault_dir, "user") == ["Are you there?"]
    assert git(vault_dir, "status", "--porcelain") == ""
    assert run_cli("reindex", "--check").exit_code == 0  # the index is consistent


def _turns(vault_dir, *pairs):
    """Write past turns directly: (minutes after T0, role, text)."""
    vault = Vault.open(vault_dir)
    vault.auto_index = False
    with vault.change("test") as change:
        for minutes, role, text in pairs:
            change.add(files.new_memory(text, role, created_at=T0 + timedelta(minutes=minutes)))


def test_soft_decay_folds_older_turns(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    _turns(vault_dir, *[(i, "user" if i % 2 == 0 else "assistant", f"turn {i}") for i in range(6)])
    llm_env.push("Earlier: turns 0 and 1.", "Sure.", facts(),
                 '{"title": "Six turns", "narrative": "The user and the assistant took six turns."}')
    now = T0 + timedelta(minutes=5 + 15)  # 15 minutes of silence: past soft (10), before hard (30)
    result = run_cli("chat", "--now", now.isoformat(), "next")
    assert result.exit_code == 0, result.stderr
    fold_prompt = llm_env.requests[0]["messages"][-1]["content"]
    assert "turn 0" in fold_prompt and "turn 1" in fold_prompt and "turn 2" not in fold_prompt
    reply = llm_env.requests[1]["messages"]
    assert "Earlier: turns 0 and 1." in reply[0]["content"]
    assert [m["content"] for m in reply[1:]] == ["turn 2", "turn 3", "turn 4", "turn 5", "next"]
    context = json.loads(run_cli("chat", "--context", "--json", "--now", now.isoformat()).stdout)
    assert context["session_summary"] == "Earlier: turns 0 and 1."
    # The silence also closed an episode of the six older turns (docs/design.md, "Episodes").
    [episode] = Vault(vault_dir).iter_memories(roles=("episode",))
    assert episode.extra["boundary"] == "time-gap" and len(episode.extra["turn_ids"]) == 6


def test_hard_decay_starts_a_fresh_session(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    _turns(vault_dir, (0, "user", "old question"), (1, "assistant", "old answer"))
    llm_env.push("Fresh start.", facts(), '{"title": "An old question", "narrative": "The user asked a question."}')
    now = T0 + timedelta(minutes=45)
    context = json.loads(run_cli("chat", "--context", "--json", "--now", now.isoformat()).stdout)
    assert context["turns"] == [] and "silence" in context["fresh_session"]
    assert run_cli("chat", "--now", now.isoformat(), "new topic").exit_code == 0
    assert [m["content"] for m in llm_env.requests[0]["messages"][1:]] == ["new topic"]


def test_clear_starts_a_fresh_session(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    _turns(vault_dir, (0, "user", "question"), (1, "assistant", "answer"))
    now = T0 + timedelta(minutes=2)
    llm_env.push('{"title": "A question", "narrative": "The user asked a question."}')  # the episode --clear closes
    assert run_cli("chat", "--clear", "--now", now.isoformat()).exit_code == 0
    llm_env.push("Clean slate.", facts())
    assert run_cli("chat", "--now", (now + timedelta(minutes=1)).isoformat(), "hi again").exit_code == 0
    assert [m["content"] for m in llm_env.requests[1]["messages"][1:]] == ["hi again"]


def test_token_ceiling_folds_the_oldest_turns(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    monkeypatch.setenv("MEMVAULT_MAX_SESSION_TOKENS", "300")
    long = "word " * 100  # ~125 tokens each
    _turns(vault_dir, *[(i, "user" if i % 2 == 0 else "assistant", f"t{i} {long}") for i in range(6)])
    llm_env.push("Summary of the start.", "ok", facts())
    result = run_cli("chat", "--now", (T0 + timedelta(minutes=6)).isoformat(), "go on")
    assert result.exit_code == 0, result.stderr
    sent = [m["content"][:2] for m in llm_env.requests[1]["messages"][1:-1]]
    assert sent == ["t4", "t5"]  # only what fits under the ceiling stays verbatim
    assert "t0" in llm_env.requests[0]["messages"][-1]["content"]


def test_no_learn_and_no_memory(vault_dir, llm_env):
    run_cli("add", "The user's wife is named Anne")
    llm_env.push("Hi!")
    result = run_cli("chat", "--no-learn", "--no-memory", "--no-stream", "My dog is Rex")
    assert result.exit_code == 0, result.stderr
    assert "Anne" not in llm_env.requests[0]["messages"][0]["content"]
    assert live(vault_dir) == ["The user's wife is named Anne"]  # nothing learned
    assert len(llm_env.requests) == 1


@pytest.mark.parametrize("count, chars, depth, calls", [
    (2, 40, "none", 0),
    (5, 100, "one_sentence", 1),
    (30, 100, "paragraph", 1),
    (150, 100, "chunked", None),  # one call per chunk plus the meta-summary
    pytest.param(700, 100, "tree", None, marks=pytest.mark.slow),  # chunks, groups of five, then the summary (16 s CPU)
])
def test_summarize_rebuild_depth_by_size(vault_dir, llm_env, count, chars, depth, calls):
    lines = [json.dumps({"text": (f"memory {i:04d} " + "x" * chars)[:chars]}) for i in range(count)]
    assert run_cli("add", "--jsonl", "-", input="\n".join(lines)).exit_code == 0
    llm_env.default = "A summary."
    result = run_cli("summarize", "--rebuild", "--json")
    assert result.exit_code == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["kind"] == depth
    levels = outcome["levels"]
    if depth == "chunked":
        assert levels["L1"] >= 2 and "L2" not in levels and len(llm_env.requests) == levels["L1"] + 1
    elif depth == "tree":
        assert levels["L2"] == -(-levels["L1"] // 5) and len(llm_env.requests) == levels["L1"] + levels["L2"] + 1
    else:
        assert len(llm_env.requests) == calls
    if depth == "none":
        return
    summary = next(m for m in Vault(vault_dir).iter_memories(roles=("summary",)) if m.path.name == "summary.md")
    assert summary.extra["input_tokens"] == outcome["input_tokens"] and summary.extra["output_tokens"] > 0
    levels = {m.extra.get("summary_kind") for m in Vault(vault_dir).iter_memories(roles=("summary",))}
    assert ("chunk" in levels) == (depth in ("chunked", "tree")) and ("group" in levels) == (depth == "tree")
    if depth == "tree":
        assert (vault_dir / "entries/global/summaries/L1").is_dir() and (vault_dir / "entries/global/summaries/L2").is_dir()


def test_summarize_update_and_print(vault_dir, llm_env):
    run_cli("add", "The user likes hiking")
    llm_env.push("The user likes hiking.")
    result = run_cli("summarize", "--print")
    assert result.exit_code == 0 and result.stdout == "The user likes hiking.\n"
    result = run_cli("summarize", "--json")
    assert json.loads(result.stdout)["kind"] == "unchanged"


def test_reconcile_dry_run_changes_nothing_then_applies(vault_dir, llm_env):
    run_cli("add", "--each-line", input="The user loves pizza\nThe user really loves pizza\nThe user owns a bike")
    head = git(vault_dir, "rev-parse", "HEAD")
    llm_env.push(NO)  # is it still true that the user loves pizza?
    result = run_cli("reconcile", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "DELETE" in result.stdout and "The user loves pizza" in result.stdout
    assert git(vault_dir, "rev-parse", "HEAD") == head and len(live(vault_dir)) == 3
    llm_env.push(NO)
    assert run_cli("reconcile").exit_code == 0
    assert live(vault_dir) == ["The user owns a bike", "The user really loves pizza"]
    assert "memvault reconcile:" in git(vault_dir, "log", "-1", "--format=%s")


def test_a_long_session_takes_no_memory_place(vault_dir, llm_env, monkeypatch):
    """The session's turns go to the model word for word; the memories beside them are others (a
    fact, the turns of an earlier session), however many turns the session has: the search leaves
    the session out instead of asking for as many more results as it has turns."""
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    _turns(vault_dir, (0, "user", "My kayak is red and I paddle it on the lake"),
           (1, "assistant", "A red kayak on the lake, lovely."), (60, "memory", "The user's kayak is called Dory"),
           *[(120 + i, "user" if i % 2 == 0 else "assistant", f"kayak talk {i}: paddling the kayak again")
             for i in range(40)])
    llm_env.push("ok", facts(), '{"title": "A red kayak", "narrative": "The user told of a red kayak."}')
    now = T0 + timedelta(minutes=165)  # 6 minutes after the last turn: the same session, nothing folded
    result = run_cli("chat", "--now", now.isoformat(), "what do you know about my kayak?")
    assert result.exit_code == 0, result.stderr
    messages = llm_env.requests[0]["messages"]
    block = messages[0]["content"]
    assert "Dory" in block and "My kayak is red" in block and "A red kayak on the lake" in block
    assert "kayak talk" not in block  # the session's turns are sent as themselves, not as memories too
    assert sum(m["content"].startswith("kayak talk") for m in messages[1:]) == 40


def test_a_tool_round_finds_the_memories_not_its_own_message(vault_dir, llm_env):
    """A client that keeps the conversation sends the tool's result back with the same message: the
    message's turn, stored by the first round, is not searched as a memory of itself (it matched its
    own words best and took a place, leaving out the memory the answer needs)."""
    vault = memvault.open_vault(vault_dir)
    for text in ("The user lives in Lisbon", "The user plays chess on Sundays", "The user drinks green tea"):
        vault.add(text)
    question = "What is the weather where I live?"
    llm_env.push({"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Lisbon"}'}]})
    first = vault.chat(question, stream=False, history=[], upstream_objects=True, top_k=1)
    assert [m.text for m in first.result.memories] == ["The user lives in Lisbon"]
    list(first)
    called = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}]}
    llm_env.push("It is sunny in Lisbon.", facts())
    second = vault.chat(question, stream=False, history=[], upstream_objects=True, top_k=1,
                        after_user=[called, {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}])
    assert second.result.user_turn.id == first.result.user_turn.id  # one message, one turn
    assert [m.text for m in second.result.memories] == ["The user lives in Lisbon"]
    list(second)
    second.finish()
