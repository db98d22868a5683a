"""Learning only from statements (issue #11): what of a user message may teach the vault anything.

The rules (memvault/statements.py) cut questions, requests, greetings and reactions out before a
model sees the message; extraction sees only what is left. The figures on 122 messages with the
local 1.5B model are in bench/README.md (bench/learning_gate.py).
"""

from __future__ import annotations

import pytest

from memvault.extraction import extract_facts
from memvault.statements import statement_part


@pytest.mark.parametrize("text", [
    "What is my job, and where do I live?",
    "What's my wife's name and what food do I avoid?",
    "How old is my daughter?",
    "Do you remember what car I drive?",
    "Where do I live again",  # no question mark
    "Remember my wife's name?",
    "Can you remind me what my wife's name is?",
    "Recommend a book for my daughter.",
    "Help me plan a birthday party for my wife.",
    "I need some ideas for a gift for Mara.",
    "If I move to Berlin, what should I pack?",  # a hypothetical, not a move
    "wondering what places near Porto I could take my daughter to",
    "translate this for my neighbour: 'Could you keep it down? I work nights and sleep by day'",  # their text
    "Hi, how are you today?",
    "Thanks!",
])
def test_questions_requests_and_greetings_state_nothing(text):
    assert statement_part(text) == ""


@pytest.mark.parametrize("text, statement", [
    ("I work as a nurse at the city hospital.", "I work as a nurse at the city hospital."),
    ("I just moved to Berlin. Any tips for good cafés?", "I just moved to Berlin."),
    ("Can you recommend a book? I enjoy science fiction.", "I enjoy science fiction."),
    ("My daughter turns 8 next week, what should I get her?", "My daughter turns 8 next week."),
    ("Since I'm vegan, what should I cook tonight?", "I'm vegan."),
    ("I'm moving to Oslo \u2014 any tips?", "I'm moving to Oslo."),
    ("Did I tell you I got promoted to head nurse?", "I got promoted to head nurse."),
    ("Guess what? I'm going to be a father again!", "I'm going to be a father again!"),
    ("You know I'm allergic to shellfish too, right?", "I'm allergic to shellfish too."),
    ("Remember that my wife's birthday is on 12 May.", "my wife's birthday is on 12 May."),
    ("Hi, I'm Sam and I teach chemistry.", "I'm Sam and I teach chemistry."),
    ("When I was young, I lived in Rome.", "When I was young, I lived in Rome."),
    ("I see a therapist every week.", "I see a therapist every week."),  # "I see" is no greeting here
    ("Write me a training plan, I signed up for the Porto half marathon.",
     "I signed up for the Porto half marathon."),  # the user's own clause after a request
])
def test_statements_are_kept_and_only_they(text, statement):
    assert statement_part(text) == statement


def test_a_question_reaches_no_model(fake_llm):
    assert extract_facts(fake_llm.config(), "Should I sell my Volvo, and what would I get for it?") == []
    assert fake_llm.requests == []


@pytest.mark.parametrize("text", ["Thanks, that was really helpful!", "Sounds good.", "Haha, that's funny."])
def test_a_reaction_to_the_reply_reaches_no_model(fake_llm, text):
    # The 1.5B model made "The user found the information helpful" of the first one.
    assert extract_facts(fake_llm.config(), text) == []
    assert fake_llm.requests == []


def test_extraction_sees_only_the_statement(fake_llm):
    fake_llm.push('{"facts": ["The user has a dog named Rex", "The user wants a vet in Porto"]}')
    facts = extract_facts(fake_llm.config(), "I have a dog named Rex. Can you find me a vet in Porto?")
    assert facts == ["The user has a dog named Rex"]  # nothing of the request is grounded in the statement
    assert fake_llm.requests[0]["messages"][-1]["content"].endswith("I have a dog named Rex.")
