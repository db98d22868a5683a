"""Questions in parts (issue 45, reading/parts.py): a question that joins two facts or names two
people is searched as its parts too, and each part's best answers stand beside the question's."""

from __future__ import annotations

import memvault
from conftest import run_cli
from memvault.reading.parts import split


def test_the_rules_split_joined_questions_and_leave_single_ones_alone():
    assert split("Where does Lena live and what does Maya do for a living?") == [
        "Where does Lena live?", "what does Maya do for a living?"]
    assert split("What do Jon and Gina both have in common?") == [
        "What do Jon have in common?", "What do Gina have in common?"]
    assert split("Is Lena older than Maya?") == ["Is Lena older?", "Is older than Maya?"]
    assert split("Which city did both my sister and Maya move to?") == [
        "Which city did my sister move to?", "Which city did Maya move to?"]
    assert split("Did I visit both Paris and New York?") == ["Did I visit Paris?", "Did I visit New York?"]
    for one in ("Where does Lena live?", "What did Melanie and her family do on vacation in May?",
                "What bread and butter do I like?", "When did Jon and Gina meet in Paris?",  # three names: one event
                "What does Tim have that serves as a reminder of hard work and is his prized possession?"):
        assert split(one) == [], one


FACTS = ["My sister Lena lives in Lisbon", "Lena lived in Berlin as a student", "Lena would love to live by the sea",
         "Lena lives with two cats", "Lena's flat is five minutes from the beach",
         "Lena lived with us for a year after college", "Lena's neighbours are very loud",
         "Maya teaches maths at a high school", "Maya loves jazz", "I play tennis on Saturdays",
         "I drive a blue Volvo", "My mother lives in Seville", "Our dog is called Rex"]


def seeded(vault_dir):
    vault = memvault.open_vault(vault_dir)
    vault.add_jsonl("\n".join('{"text": "%s", "created_at": "2024-0%d-1%dT10:00:00Z"}' % (f, 1 + i % 9, i % 9)
                              for i, f in enumerate(FACTS)))
    return vault


def test_the_second_fact_of_a_two_part_question_reaches_the_top_five(vault_dir):
    """Seven lines about where Lena lives filled the five places; Maya's job (no word of "do for a
    living" in it) came sixth or lower."""
    vault = seeded(vault_dir)
    question = "Where does Lena live and what does Maya do for a living?"
    outcome = vault.search(question, now="2024-12-01T10:00:00Z")
    texts = [r.text for r in outcome.results]
    assert "Maya teaches maths at a high school" in texts[:5]
    assert sum(t.startswith("Lena") or "Lena" in t for t in texts) >= 2  # the first part keeps its answers
    assert outcome.parts == ("Where does Lena live?", "what does Maya do for a living?")
    maya = outcome.results[texts.index("Maya teaches maths at a high school")]
    assert maya.scores["part"] == 2
    assert vault.search(question, now="2024-12-01T10:00:00Z").to_json() == outcome.to_json()  # the same every time
    explained = run_cli("search", "--explain", "--now", "2024-12-01T10:00:00Z", question).stdout
    assert "part = the part of the question that ranked it" in explained and "2 'what does Maya do" in explained


def test_the_llm_splits_what_the_rules_do_not_when_asked(vault_dir, llm_env, monkeypatch):
    """Setting llm_query_parts: one call per search; the model's parts take the rules' place. An LLM
    that cannot be reached leaves the rules to decide, said once."""
    vault = seeded(vault_dir)
    vault.close()
    question = "Tell me where Lena lives, plus Maya's line of work"
    assert split(question) == []
    monkeypatch.setenv("MEMVAULT_LLM_QUERY_PARTS", "true")
    llm_env.push('{"questions": ["Where does Lena live?", "What is Maya\'s job?"]}')
    outcome = memvault.open_vault(vault_dir).search(question, now="2024-12-01T10:00:00Z")
    assert question in llm_env.requests[0]["messages"][-1]["content"]
    assert outcome.parts == ("Where does Lena live?", "What is Maya's job?")
    assert "Maya teaches maths at a high school" in [r.text for r in outcome.results][:5]
    assert "llm_parts" in outcome.timings
    llm_env.push('{"questions": []}')  # one question: no parts
    assert memvault.open_vault(vault_dir).search("Where does Lena live?").parts == ()

    from fake_llm import refused_url

    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", refused_url())
    down = run_cli("search", "Where does Lena live and what does Maya do for a living?")
    assert down.exit_code == 0 and down.stderr.count("llm_query_parts") == 1
    assert "Maya teaches maths at a high school" in down.stdout  # the rules split it
