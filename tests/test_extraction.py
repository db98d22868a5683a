"""Fact extraction and reconciliation decisions, through real litellm to the fake server."""

import json
import math
import os

import pytest
from fake_llm import *  # noqa: F403  (the fake_llm fixture, FakeLLM, refused_url)
from fake_llm import refused_url

from memvault.learning.extraction import (
    MAX_PAIRS_PER_FACT, Decision, StillTrue, extract_facts, is_small_talk, reconcile, third_person,
)
from memvault.store.llm import LLMConfig, LLMError, structured_probs
from memvault.learning.prompts import still_true_messages

ID_TEA = "3f6c1d2e-0000-4000-8000-000000000001"
ID_CITY = "3f6c1d2e-0000-4000-8000-000000000002"
ID_CAR = "3f6c1d2e-0000-4000-8000-000000000003"
EXISTING = [
    (ID_TEA, "The user drinks green tea every morning"),
    (ID_CITY, "The user lives in Lyon"),
    (ID_CAR, "The user owns a bicycle"),
]


def adds(decisions: list[Decision]) -> list[str]:
    return [d.text for d in decisions if d.event == "ADD"]


def changes(decisions: list[Decision]) -> list[tuple[str, str | None, str | None]]:
    return [(d.event, d.text, d.target) for d in decisions if d.event in ("UPDATE", "DELETE")]


# --- extraction --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["", "   \n", "Thanks!", "ok", "Good morning :)", "thank you so much", "🙂", "What time is it in Tokyo?"],
)
def test_extract_small_talk_skips_the_model(fake_llm, text):
    assert extract_facts(fake_llm.config(), text) == []
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    "text",
    ["Hi, I'm Sam and I teach chemistry.", "Can you suggest a gift for my sister?", "Moving to Oslo next week"],
)
def test_small_talk_rule_is_conservative(text):
    assert not is_small_talk(text)


def test_extract_returns_the_models_facts(fake_llm):
    fake_llm.push('{"facts": ["The user teaches chemistry", "The user\'s sister is named Ida"]}')
    facts = extract_facts(fake_llm.config(), "I teach chemistry, and my sister Ida visits on Sundays.")
    assert facts == ["The user teaches chemistry", "The user's sister is named Ida"]
    (body,) = fake_llm.requests
    assert "my sister Ida" in body["messages"][-1]["content"]
    assert body["response_format"]["json_schema"]["schema"]["properties"]["facts"]["maxItems"] == 3


def test_extract_cleans_dedupes_and_caps(fake_llm):
    fake_llm.push(
        '```json\n{"facts": ["  The user  plays chess ", "the user plays chess.", "", '
        '"The user has two sons", "The user likes jazz", "The user hikes"]}\n```'
    )
    facts = extract_facts(fake_llm.config(), "I play chess with my two sons while listening to jazz.")
    assert facts == ["The user plays chess", "The user has two sons", "The user likes jazz"]


def test_extract_accepts_a_bare_list_of_objects(fake_llm):
    fake_llm.push('[{"fact": "The user plays chess"}]')
    assert extract_facts(fake_llm.config(), "I play chess.") == ["The user plays chess"]


def test_extract_drops_facts_not_grounded_in_the_text(fake_llm):
    # A small model echoing an example, or inventing: no word of the fact is in the message.
    fake_llm.push('{"facts": ["The user\'s wife is named Anne", "The user\'s son Tim reads comics"]}')
    facts = extract_facts(fake_llm.config(), "My son Tim reads comic books every night.")
    assert facts == ["The user's son Tim reads comics"]


def test_extract_empty_list_from_model(fake_llm):
    fake_llm.push('{"facts": []}')
    assert extract_facts(fake_llm.config(), "My router is acting up again.") == []
    assert len(fake_llm.requests) == 1


def test_extract_invalid_twice_is_an_error_not_no_facts(fake_llm):
    from memvault.errors import LLMNoValidAnswer

    fake_llm.push("The user plays chess.", "Still not JSON")
    with pytest.raises(LLMNoValidAnswer, match="no valid answer after a retry"):
        extract_facts(fake_llm.config(), "I play chess.")
    assert len(fake_llm.requests) == 2


def test_extract_endpoint_down_raises():
    with pytest.raises(LLMError, match="llm_base_url"):
        extract_facts(LLMConfig("openai/test-model", refused_url()), "I play chess.")


# --- reconciliation ------------------------------------------------------------------------
# One question per (memory, new fact) pair: "is the memory still true?"; answers are
# {"answer": "yes"|"no"}. The model never sees or returns ids.

YES, NO = '{"answer": "yes"}', '{"answer": "no"}'


def asked(fake) -> list[str]:
    """The memory each reconciliation question was about (its first sentence)."""
    out = []
    for body in fake.requests:
        content = body["messages"][-1]["content"]
        out.append(content.split("Earlier we learned: ", 1)[1].split(". Today we learned:", 1)[0])
    return out


def test_reconcile_without_existing_adds_all_without_the_model(fake_llm):
    decisions = reconcile(fake_llm.config(), ["The user plays chess", "The user has a cat"], [])
    assert [(d.event, d.text, d.target) for d in decisions] == [
        ("ADD", "The user plays chess", None),
        ("ADD", "The user has a cat", None),
    ]
    assert fake_llm.requests == []


def test_reconcile_exact_duplicate_is_none_without_the_model(fake_llm):
    decisions = reconcile(fake_llm.config(), ["the user lives in  LYON."], EXISTING)
    assert [(d.event, d.target) for d in decisions] == [("NONE", ID_CITY)]
    assert fake_llm.requests == []


def test_reconcile_asks_one_question_per_pair_without_ids(fake_llm):
    fake_llm.push(YES, YES, YES)
    decisions = reconcile(fake_llm.config(), ["The user plays chess"], EXISTING)
    assert asked(fake_llm) == [text for _, text in EXISTING]
    (first, *_) = fake_llm.requests
    assert first["messages"] == [{"role": "user", "content": (
        "Earlier we learned: The user drinks green tea every morning. Today we learned: The user plays "
        "chess. Is it still true that the user drinks green tea every morning? "
        'Answer with JSON: {"answer": "yes"} or {"answer": "no"}.')}]
    schema = first["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["enum"] == ["yes", "no"]
    body = json.dumps(fake_llm.requests)
    assert ID_TEA not in body and ID_CITY not in body and ID_CAR not in body
    assert adds(decisions) == ["The user plays chess"] and changes(decisions) == []


def test_reconcile_asks_only_about_the_given_neighbours(fake_llm):
    # Ids the caller chose, nearest first; ids that are not existing memories are skipped.
    fake_llm.push(NO)
    neighbours = {"The user lives in Porto": [ID_CITY, "not-a-memory"], "The user has a cat": []}
    decisions = reconcile(fake_llm.config(), ["The user lives in Porto", "The user has a cat"], EXISTING, neighbours)
    assert asked(fake_llm) == ["The user lives in Lyon"]
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == ["The user lives in Porto", "The user has a cat"]


def test_reconcile_caps_the_questions_per_fact(fake_llm):
    many = [(f"id-{i}", f"The user visited country number {i}") for i in range(6)]
    fake_llm.push(*[YES] * MAX_PAIRS_PER_FACT)
    reconcile(fake_llm.config(), ["The user visited Peru"], many)
    assert len(fake_llm.requests) == MAX_PAIRS_PER_FACT


def test_reconcile_restated_memory_is_not_asked_about(fake_llm):
    fake_llm.push(YES)
    neighbours = {"The user plays chess": [ID_CITY, ID_TEA]}
    decisions = reconcile(fake_llm.config(), ["The user lives in Lyon", "The user plays chess"], EXISTING, neighbours)
    assert asked(fake_llm) == ["The user drinks green tea every morning"]
    assert ("NONE", ID_CITY) in [(d.event, d.target) for d in decisions]
    assert adds(decisions) == ["The user plays chess"]


def test_reconcile_no_deletes_and_still_adds_the_new_fact(fake_llm):
    fake_llm.push(NO)
    decisions = reconcile(fake_llm.config(), ["The user lives in Porto"], EXISTING, {"The user lives in Porto": [ID_CITY]})
    assert [(d.event, d.target, d.by) for d in decisions if d.event == "DELETE"] == [
        ("DELETE", ID_CITY, "The user lives in Porto")
    ]
    assert adds(decisions) == ["The user lives in Porto"]


def test_reconcile_no_on_a_memory_the_new_fact_carries_is_an_update(fake_llm):
    # The new fact says everything the memory said, and more: replace it, mapped to its real id.
    fake_llm.push(NO)
    fact = "The user owns a bicycle from 1985"
    decisions = reconcile(fake_llm.config(), [fact], EXISTING, {fact: [ID_CAR]})
    assert changes(decisions) == [("UPDATE", fact, ID_CAR)]
    assert adds(decisions) == []  # the UPDATE carries the new fact


def test_reconcile_one_update_per_fact_then_deletes(fake_llm):
    existing = [("a", "The user owns a bicycle"), ("b", "The user owns a red bicycle")]
    fake_llm.push(NO, NO)
    fact = "The user owns a red bicycle from 1985"
    decisions = reconcile(fake_llm.config(), [fact], existing)
    assert [(d.event, d.text, d.target, d.by) for d in decisions] == [
        ("UPDATE", fact, "a", None), ("DELETE", None, "b", fact)
    ]


def test_reconcile_yes_on_a_memory_that_carries_the_fact_means_stored(fake_llm):
    fake_llm.push(YES)
    fact = "The user drinks green tea"
    decisions = reconcile(fake_llm.config(), [fact], EXISTING, {fact: [ID_TEA]})
    assert adds(decisions) == []
    assert [(d.event, d.target) for d in decisions] == [("NONE", ID_TEA)]


def test_reconcile_lazy_yes_does_not_drop_a_new_fact(fake_llm):
    fake_llm.push(YES, YES)
    fact = "The user no longer drinks green tea"
    decisions = reconcile(fake_llm.config(), [fact], EXISTING, {fact: [ID_TEA, ID_CITY]})
    assert adds(decisions) == [fact]
    assert changes(decisions) == []


def test_reconcile_stored_fact_is_added_when_its_memory_is_replaced(fake_llm):
    # Fact 1 is carried by the tea memory, but fact 2 makes that memory untrue.
    fake_llm.push(YES, NO)
    facts = ["The user drinks green tea", "The user drinks only water now"]
    neighbours = {facts[0]: [ID_TEA], facts[1]: [ID_TEA]}
    decisions = reconcile(fake_llm.config(), facts, EXISTING, neighbours)
    assert changes(decisions) == [("DELETE", None, ID_TEA)]
    assert adds(decisions) == facts


def test_reconcile_a_replaced_memory_is_not_asked_about_again(fake_llm):
    fake_llm.push(NO)
    facts = ["The user lives in Porto", "The user lives in Porto near the sea"]
    neighbours = {f: [ID_CITY] for f in facts}
    decisions = reconcile(fake_llm.config(), facts, EXISTING, neighbours)
    assert len(fake_llm.requests) == 1
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == facts


@pytest.mark.parametrize("reply", ['{"answer": "No."}', '{"answer": false}', '```json\n{"answer": "NO"}\n```'])
def test_reconcile_accepts_lenient_answers(fake_llm, reply):
    fake_llm.push(reply)
    decisions = reconcile(fake_llm.config(), ["The user lives in Porto"], EXISTING, {"The user lives in Porto": [ID_CITY]})
    assert changes(decisions) == [("DELETE", None, ID_CITY)]


def test_reconcile_invalid_answer_keeps_the_memory(fake_llm):
    fake_llm.push('{"answer": "maybe"}', "no json here")
    fact = "The user lives in Porto"
    decisions = reconcile(fake_llm.config(), [fact], EXISTING, {fact: [ID_CITY]})
    assert changes(decisions) == [] and adds(decisions) == [fact]
    assert len(fake_llm.requests) == 2  # one retry


@pytest.mark.parametrize(
    "failure",
    [
        [{"status": 500, "body": "boom"}],  # LLMError, caught: no more questions
        [{"raw": "<html>not an API</html>"}],
        [NO, {"status": 500}],  # fails half-way: the answer already given stands
    ],
)
def test_reconcile_failure_adds_all(fake_llm, failure):
    fake_llm.push(*failure)
    facts = ["The user lives in Porto", "The user plays chess"]
    decisions = reconcile(fake_llm.config(), facts, EXISTING, {f: [ID_CITY, ID_CAR] for f in facts})
    assert adds(decisions) == facts
    assert changes(decisions) == ([("DELETE", None, ID_CITY)] if failure[0] == NO else [])


def test_reconcile_endpoint_down_adds_all():
    cfg = LLMConfig("openai/test-model", refused_url())
    decisions = reconcile(cfg, ["The user plays chess"], EXISTING)
    assert [(d.event, d.text, d.target) for d in decisions] == [("ADD", "The user plays chess", None)]


def test_reconcile_dedupes_new_facts(fake_llm):
    decisions = reconcile(fake_llm.config(), ["The user plays chess", "the user plays chess."], [])
    assert adds(decisions) == ["The user plays chess"]


# --- reconciliation as one list (reconcile_mode = "list", SPEC section 5) -------------------


def answer(*items: tuple[int, str, str]) -> str:
    return json.dumps({"memory": [{"id": i, "text": t, "event": e} for i, t, e in items]})


def reconcile_list(cfg, new_facts, existing):
    return reconcile(cfg, new_facts, existing, mode="list")


def test_list_reconcile_shows_short_ids_never_uuids(fake_llm):
    fake_llm.push(answer((0, "The user drinks green tea every morning", "NONE")))
    reconcile_list(fake_llm.config(), ["The user plays chess"], EXISTING)
    body = json.dumps(fake_llm.requests[0])
    assert ID_TEA not in body and ID_CITY not in body and ID_CAR not in body
    assert '{\\"id\\": 1, \\"text\\": \\"The user lives in Lyon\\"}' in body


def test_list_reconcile_restated_memory_is_not_shown(fake_llm):
    fake_llm.push(answer((0, "The user drinks green tea every morning", "NONE")))
    decisions = reconcile_list(fake_llm.config(), ["The user lives in Lyon", "The user plays chess"], EXISTING)
    prompt = fake_llm.requests[0]["messages"][-1]["content"]
    assert "Lyon" not in prompt.split("New facts:")[0]
    assert ("NONE", ID_CITY) in [(d.event, d.target) for d in decisions]
    assert adds(decisions) == ["The user plays chess"]


def test_list_reconcile_update_maps_short_id_to_real_id(fake_llm):
    fake_llm.push(
        answer(
            (0, "The user drinks green tea every morning", "NONE"),
            (1, "The user lives in Lyon", "NONE"),
            (2, "The user owns a red bicycle from 1985", "UPDATE"),
            (3, "The user's bicycle is from 1985", "ADD"),
        )
    )
    decisions = reconcile_list(fake_llm.config(), ["The user's bicycle is from 1985"], EXISTING)
    assert changes(decisions) == [("UPDATE", "The user owns a red bicycle from 1985", ID_CAR)]
    assert adds(decisions) == []  # the UPDATE carries the new fact


def test_list_reconcile_delete_only_still_adds_the_new_fact(fake_llm):
    fake_llm.push(answer((1, "The user lives in Lyon", "DELETE")))
    decisions = reconcile_list(fake_llm.config(), ["The user lives in Porto"], EXISTING)
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == ["The user lives in Porto"]


def test_list_reconcile_delete_and_add(fake_llm):
    fake_llm.push(answer((1, "The user lives in Lyon", "DELETE"), (3, "The user lives in Porto", "ADD")))
    decisions = reconcile_list(fake_llm.config(), ["The user lives in Porto"], EXISTING)
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == ["The user lives in Porto"]  # once


def test_list_reconcile_hallucinated_ids_are_ignored(fake_llm):
    fake_llm.push(
        answer(
            (7, "The user lives in Lyon", "DELETE"),
            (3, "The user plays chess", "UPDATE"),
            (-1, "whatever", "NONE"),
        )
    )
    decisions = reconcile_list(fake_llm.config(), ["The user plays chess"], EXISTING)
    assert changes(decisions) == []
    assert all(d.target in (ID_TEA, ID_CITY, ID_CAR) for d in decisions if d.event != "ADD")
    assert adds(decisions) == ["The user plays chess"]


def test_list_reconcile_none_on_a_memory_that_carries_the_fact_means_stored(fake_llm):
    fake_llm.push(answer((0, "The user drinks green tea every morning", "NONE")))
    decisions = reconcile_list(fake_llm.config(), ["The user drinks green tea"], EXISTING)
    assert adds(decisions) == []
    assert [(d.event, d.target) for d in decisions] == [("NONE", ID_TEA)]


def test_list_reconcile_lazy_none_does_not_drop_a_new_fact(fake_llm):
    fake_llm.push(answer((0, "The user drinks green tea every morning", "NONE"), (1, "The user lives in Lyon", "NONE")))
    decisions = reconcile_list(fake_llm.config(), ["The user no longer drinks green tea"], EXISTING)
    assert adds(decisions) == ["The user no longer drinks green tea"]


def test_list_reconcile_update_unrelated_to_new_facts_is_rejected(fake_llm):
    fake_llm.push(answer((1, "The user lives in central Lyon near the river", "UPDATE")))
    decisions = reconcile_list(fake_llm.config(), ["The user plays chess"], EXISTING)
    assert changes(decisions) == []
    assert adds(decisions) == ["The user plays chess"]


def test_list_reconcile_first_change_per_memory_wins(fake_llm):
    fake_llm.push(
        answer(
            (1, "The user lives in Lyon", "NONE"),
            (1, "The user lives in Lyon", "DELETE"),
            (1, "The user lives in Porto", "UPDATE"),
        )
    )
    decisions = reconcile_list(fake_llm.config(), ["The user lives in Porto"], EXISTING)
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == ["The user lives in Porto"]


def test_list_reconcile_accepts_a_bare_list_and_lowercase_events(fake_llm):
    fake_llm.push('[{"id": "1", "text": "The user lives in Lyon", "event": "delete"}]')
    decisions = reconcile_list(fake_llm.config(), ["The user lives in Porto"], EXISTING)
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == ["The user lives in Porto"]


@pytest.mark.parametrize(
    "failure",
    [
        ["no json here", "still no json"],  # invalid twice -> structured() gives None
        [{"status": 500, "body": "boom"}],  # LLMError, caught
        [{"raw": "<html>not an API</html>"}],
    ],
)
def test_list_reconcile_failure_adds_all(fake_llm, failure):
    fake_llm.push(*failure)
    facts = ["The user lives in Porto", "The user plays chess"]
    decisions = reconcile_list(fake_llm.config(), facts, EXISTING)
    assert [(d.event, d.text) for d in decisions] == [("ADD", f) for f in facts]


def test_list_reconcile_endpoint_down_adds_all():
    cfg = LLMConfig("openai/test-model", refused_url())
    decisions = reconcile_list(cfg, ["The user plays chess"], EXISTING)
    assert [(d.event, d.text, d.target) for d in decisions] == [("ADD", "The user plays chess", None)]


def with_probs(tokens: list[tuple[str, list[tuple[str, float]]]]) -> dict:
    """A raw chat completion whose content is the tokens, with top log-probabilities
    [(token, [(alternative, probability), ...]), ...] as llama-server reports them."""
    content = "".join(t for t, _ in tokens)
    logprobs = [
        {"token": t, "logprob": math.log(dict(tops).get(t, 1.0)), "bytes": None,
         "top_logprobs": [{"token": a, "logprob": math.log(p), "bytes": None} for a, p in tops]}
        for t, tops in tokens
    ]
    return {"raw": json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "logprobs": {"content": logprobs}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    })}


def answer_with(p_no: float, chosen: str | None = None) -> dict:
    chosen = chosen or ("no" if p_no >= 0.5 else "yes")
    tops = [("no", p_no), ("yes", (1 - p_no) * 0.98), ("Yes", (1 - p_no) * 0.02)]
    return with_probs([('{"', []), ("answer", []), ('":', []), (' "', []), (chosen, tops), ('"}', [])])


@pytest.mark.parametrize("p_no, replaced", [(0.507, False), (0.45, False), (0.6, True), (0.9, True)])
def test_reconcile_replaces_only_when_the_model_is_not_on_the_fence(fake_llm, p_no, replaced):
    fake_llm.push(answer_with(p_no))
    fact = "The user lives in Porto"
    decisions = reconcile(fake_llm.config(), [fact], EXISTING, {fact: [ID_CITY]})
    assert changes(decisions) == ([("DELETE", None, ID_CITY)] if replaced else [])
    assert adds(decisions) == [fact]
    assert fake_llm.requests[0]["logprobs"] is True


def test_probabilities_where_the_quote_and_value_share_a_token(fake_llm):
    fake_llm.push(with_probs([('{"answer":', []), (' "no', [(' "no', 0.3), (' "yes', 0.6), (" no", 0.1)]), ('"}', [])]))
    parsed, probs = structured_probs(fake_llm.config(), [{"role": "user", "content": "?"}], StillTrue, "answer")
    assert parsed.answer == "no" and probs == pytest.approx({"no": 1 / 3, "yes": 2 / 3})


def test_probabilities_fall_back_to_the_answer_without_logprobs(fake_llm):
    fake_llm.push(NO)
    parsed, probs = structured_probs(fake_llm.config(), [{"role": "user", "content": "?"}], StillTrue, "answer")
    assert probs == {"yes": 0.0, "no": 1.0}


def test_probabilities_asked_again_without_logprobs_when_refused(fake_llm):
    fake_llm.push({"status": 400, "body": {"error": {"message": "logprobs are not supported"}}}, YES)
    parsed, probs = structured_probs(fake_llm.config(), [{"role": "user", "content": "?"}], StillTrue, "answer")
    assert probs == {"yes": 1.0, "no": 0.0}
    assert fake_llm.requests[0]["logprobs"] is True and "logprobs" not in fake_llm.requests[1]


@pytest.mark.parametrize(
    "old, inline",
    [
        ("The user lives in Lyon.", "the user lives in Lyon"),
        ("Rex is a golden retriever", "Rex is a golden retriever"),
        ("My sister is Ida", "my sister is Ida"),
        ("  The   user likes tea!", "the user likes tea"),
    ],
)
def test_still_true_question_restates_the_memory_inline(old, inline):
    [message] = still_true_messages(old, "The user moved.")
    assert f"Is it still true that {inline}?" in message["content"]
    assert "Today we learned: The user moved. Is" in message["content"]


# --- third person ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fact, expected",
    [
        ("The user loves pizza", "The user loves pizza"),
        ("Rex is a golden retriever", "Rex is a golden retriever"),
        ("I love pizza", "The user loves pizza"),
        ("I love pizza, it's my favourite food", "The user loves pizza, it's their favourite food"),
        ("I\u2019m vegetarian", "The user is vegetarian"),
        ("I have two kids", "The user has two kids"),
        ("I've been to Peru", "The user has been to Peru"),
        ("I also play the piano", "The user also plays the piano"),
        ("I watch films", "The user watches films"),
        ("I study law", "The user studies law"),
        ("I go hiking", "The user goes hiking"),
        ("I sold my Volvo", "The user sold their Volvo"),
        ("I moved to Lisbon", "The user moved to Lisbon"),
        ("I can swim", "The user can swim"),
        ("I don't drink alcohol", "The user doesn't drink alcohol"),
        ("My wife is Anne", "The user's wife is Anne"),
        ("Rex is my dog", "Rex is the user's dog"),
        ("Ida and I play chess", "Ida and the user play chess"),
        ("Irene likes Italy", "Irene likes Italy"),
    ],
)
def test_third_person(fact, expected):
    assert third_person(fact) == expected


def test_extract_rewrites_first_person_facts(fake_llm):
    fake_llm.push('{"facts": ["I love pizza", "My favourite food is pizza"]}')
    facts = extract_facts(fake_llm.config(), "I love pizza, it's my favourite food.")
    assert facts == ["The user loves pizza", "The user's favourite food is pizza"]


# --- live: a real OpenAI-compatible server, opt-in ------------------------------------------
# MEMVAULT_LIVE_LLM=<base url, e.g. http://127.0.0.1:8083/v1>, MEMVAULT_LIVE_MODEL and
# MEMVAULT_LIVE_API_KEY as for tests/test_live_llm.py.
# Read at import: the autouse isolated_env fixture clears MEMVAULT_* before each test.
# Assertions stick to what the guards make certain, whatever the model answers.

LIVE_URL = os.environ.get("MEMVAULT_LIVE_LLM")
LIVE_MODEL = os.environ.get("MEMVAULT_LIVE_MODEL", "openai/qwen2.5-coder-1.5b")
LIVE_KEY = os.environ.get("MEMVAULT_LIVE_API_KEY")
live = pytest.mark.skipif(not LIVE_URL, reason="set MEMVAULT_LIVE_LLM to a /v1 base URL")


@pytest.fixture
def live_cfg():
    return LLMConfig(LIVE_MODEL, LIVE_URL or "", api_key=LIVE_KEY, timeout=300)


@live
@pytest.mark.live
def test_live_extraction(live_cfg):
    facts = extract_facts(live_cfg, "My daughter Mara just started school, and I work night shifts as a nurse.")
    assert len(facts) <= 3 and all(isinstance(f, str) and f for f in facts)


@live
@pytest.mark.live
def test_live_reconcile_keeps_the_new_fact(live_cfg):
    decisions = reconcile(live_cfg, ["The user lives in Porto"], EXISTING)
    stored = [d.text for d in decisions if d.event in ("ADD", "UPDATE")]
    assert any("Porto" in (text or "") for text in stored)
    assert all(d.target in (ID_TEA, ID_CITY, ID_CAR) for d in decisions if d.event != "ADD")
