"""Fact extraction and reconciliation decisions, through real litellm to the fake server."""

import json
import os

import pytest
from fake_llm import *  # noqa: F403  (the fake_llm fixture, FakeLLM, refused_url)
from fake_llm import refused_url

from memvault.extraction import Decision, extract_facts, is_small_talk, reconcile
from memvault.llm import LLMConfig, LLMError

ID_TEA = "3f6c1d2e-0000-4000-8000-000000000001"
ID_CITY = "3f6c1d2e-0000-4000-8000-000000000002"
ID_CAR = "3f6c1d2e-0000-4000-8000-000000000003"
EXISTING = [
    (ID_TEA, "The user drinks green tea every morning"),
    (ID_CITY, "The user lives in Lyon"),
    (ID_CAR, "The user owns a bicycle"),
]


def answer(*items: tuple[int, str, str]) -> str:
    return json.dumps({"memory": [{"id": i, "text": t, "event": e} for i, t, e in items]})


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
    facts = extract_facts(fake_llm.config(), "Any comic books you would suggest for my son Tim?")
    assert facts == ["The user's son Tim reads comics"]


def test_extract_empty_list_from_model(fake_llm):
    fake_llm.push('{"facts": []}')
    assert extract_facts(fake_llm.config(), "Could you explain how my router's NAT works?") == []


def test_extract_invalid_twice_gives_empty(fake_llm):
    fake_llm.push("The user plays chess.", "Still not JSON")
    assert extract_facts(fake_llm.config(), "I play chess.") == []
    assert len(fake_llm.requests) == 2


def test_extract_endpoint_down_raises():
    with pytest.raises(LLMError, match="llm_base_url"):
        extract_facts(LLMConfig("openai/test-model", refused_url()), "I play chess.")


# --- reconciliation ------------------------------------------------------------------------


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


def test_reconcile_shows_short_ids_never_uuids(fake_llm):
    fake_llm.push(answer((0, "The user drinks green tea every morning", "NONE")))
    reconcile(fake_llm.config(), ["The user plays chess"], EXISTING)
    body = json.dumps(fake_llm.requests[0])
    assert ID_TEA not in body and ID_CITY not in body and ID_CAR not in body
    assert '{\\"id\\": 1, \\"text\\": \\"The user lives in Lyon\\"}' in body


def test_reconcile_restated_memory_is_not_shown(fake_llm):
    fake_llm.push(answer((0, "The user drinks green tea every morning", "NONE")))
    decisions = reconcile(fake_llm.config(), ["The user lives in Lyon", "The user plays chess"], EXISTING)
    prompt = fake_llm.requests[0]["messages"][-1]["content"]
    assert "Lyon" not in prompt.split("New facts:")[0]
    assert ("NONE", ID_CITY) in [(d.event, d.target) for d in decisions]
    assert adds(decisions) == ["The user plays chess"]


def test_reconcile_update_maps_short_id_to_real_id(fake_llm):
    fake_llm.push(
        answer(
            (0, "The user drinks green tea every morning", "NONE"),
            (1, "The user lives in Lyon", "NONE"),
            (2, "The user owns a red bicycle from 1985", "UPDATE"),
            (3, "The user's bicycle is from 1985", "ADD"),
        )
    )
    decisions = reconcile(fake_llm.config(), ["The user's bicycle is from 1985"], EXISTING)
    assert changes(decisions) == [("UPDATE", "The user owns a red bicycle from 1985", ID_CAR)]
    assert adds(decisions) == []  # the UPDATE carries the new fact


def test_reconcile_delete_only_still_adds_the_new_fact(fake_llm):
    fake_llm.push(answer((1, "The user lives in Lyon", "DELETE")))
    decisions = reconcile(fake_llm.config(), ["The user lives in Porto"], EXISTING)
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == ["The user lives in Porto"]


def test_reconcile_delete_and_add(fake_llm):
    fake_llm.push(answer((1, "The user lives in Lyon", "DELETE"), (3, "The user lives in Porto", "ADD")))
    decisions = reconcile(fake_llm.config(), ["The user lives in Porto"], EXISTING)
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == ["The user lives in Porto"]  # once


def test_reconcile_hallucinated_ids_are_ignored(fake_llm):
    fake_llm.push(
        answer(
            (7, "The user lives in Lyon", "DELETE"),
            (3, "The user plays chess", "UPDATE"),
            (-1, "whatever", "NONE"),
        )
    )
    decisions = reconcile(fake_llm.config(), ["The user plays chess"], EXISTING)
    assert changes(decisions) == []
    assert all(d.target in (ID_TEA, ID_CITY, ID_CAR) for d in decisions if d.event != "ADD")
    assert adds(decisions) == ["The user plays chess"]


def test_reconcile_none_on_a_memory_that_carries_the_fact_means_stored(fake_llm):
    fake_llm.push(answer((0, "The user drinks green tea every morning", "NONE")))
    decisions = reconcile(fake_llm.config(), ["The user drinks green tea"], EXISTING)
    assert adds(decisions) == []
    assert [(d.event, d.target) for d in decisions] == [("NONE", ID_TEA)]


def test_reconcile_lazy_none_does_not_drop_a_new_fact(fake_llm):
    fake_llm.push(answer((0, "The user drinks green tea every morning", "NONE"), (1, "The user lives in Lyon", "NONE")))
    decisions = reconcile(fake_llm.config(), ["The user no longer drinks green tea"], EXISTING)
    assert adds(decisions) == ["The user no longer drinks green tea"]


def test_reconcile_update_unrelated_to_new_facts_is_rejected(fake_llm):
    fake_llm.push(answer((1, "The user lives in central Lyon near the river", "UPDATE")))
    decisions = reconcile(fake_llm.config(), ["The user plays chess"], EXISTING)
    assert changes(decisions) == []
    assert adds(decisions) == ["The user plays chess"]


def test_reconcile_first_change_per_memory_wins(fake_llm):
    fake_llm.push(
        answer(
            (1, "The user lives in Lyon", "NONE"),
            (1, "The user lives in Lyon", "DELETE"),
            (1, "The user lives in Porto", "UPDATE"),
        )
    )
    decisions = reconcile(fake_llm.config(), ["The user lives in Porto"], EXISTING)
    assert changes(decisions) == [("DELETE", None, ID_CITY)]
    assert adds(decisions) == ["The user lives in Porto"]


def test_reconcile_accepts_a_bare_list_and_lowercase_events(fake_llm):
    fake_llm.push('[{"id": "1", "text": "The user lives in Lyon", "event": "delete"}]')
    decisions = reconcile(fake_llm.config(), ["The user lives in Porto"], EXISTING)
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
def test_reconcile_failure_adds_all(fake_llm, failure):
    fake_llm.push(*failure)
    facts = ["The user lives in Porto", "The user plays chess"]
    decisions = reconcile(fake_llm.config(), facts, EXISTING)
    assert [(d.event, d.text) for d in decisions] == [("ADD", f) for f in facts]


def test_reconcile_endpoint_down_adds_all():
    cfg = LLMConfig("openai/test-model", refused_url())
    decisions = reconcile(cfg, ["The user plays chess"], EXISTING)
    assert [(d.event, d.text, d.target) for d in decisions] == [("ADD", "The user plays chess", None)]


def test_reconcile_dedupes_new_facts(fake_llm):
    decisions = reconcile(fake_llm.config(), ["The user plays chess", "the user plays chess."], [])
    assert adds(decisions) == ["The user plays chess"]


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
