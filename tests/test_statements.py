"""Learning only from statements (issues #11 and #26): what of a user message may teach the vault anything.

The rules (memvault/learning/statements.py) cut questions, requests, greetings, reactions, instructions about
the reply, tag questions, hypotheticals and wishes, and reported speech out before a model sees the
message; extraction sees only what is left. The figures with the local 1.5B model are in
bench/README.md (bench/learning_gate.py, three sets).
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from memvault.store.vault import Vault
from memvault.learning.extraction import extract_facts
from memvault.learning.statements import statement_part


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


# -- issue #26: statements, exactly ---------------------------------------------------------------


@pytest.mark.parametrize("text", [
    # The issue's own: "One word." became "The user is named One word".
    "Where does my sister live now? One word.",
    "Answer in one word, in French.",
    "Be brief.",
    "In French.",
    "Answer with a number.",
    "How many kids do I have? Just the number.",
    "What car do I drive? Two words, lowercase.",
    "What's my dog's name? No explanation needed.",
    "Explain photosynthesis like I'm five.",
    "Formal tone, please.",
    "Where did I grow up? Keep it to one sentence.",
])
def test_an_instruction_about_the_reply_states_nothing(text):
    assert statement_part(text) == ""


@pytest.mark.parametrize("text", [
    # The issue's own: sent as "my wife's name is not Anne." it replaced "My wife is Anne".
    "my wife's name is not Anne, right?",
    "I live in Porto, don't I?",
    "My daughter is seven, isn't she?",
    "I work day shifts now, is that right?",
    "my dog is called Max, no?",
    "You know I'm allergic to shellfish too, right?",
    "I told you I drive a Fiat, yeah?",
    "So I'm allergic to walnuts?",  # a statement asked back: no tag, the question mark is enough
])
def test_a_tag_question_is_never_rewritten_into_a_statement(text):
    assert statement_part(text) == ""


@pytest.mark.parametrize("text", [
    "If I had a cat I'd call it Miso",  # the issue's own: stored as "The user has a cat named Miso"
    "I wish I could speak Japanese.",
    "Maybe one day I'll open a bakery.",
    "I'd love to live in Tokyo someday.",
    "If we moved to Lisbon, Anne would have to change jobs.",
    "I might switch to day shifts next year.",
    "I'm thinking about getting a second dog.",
    "Hopefully we'll move to a bigger flat next year.",
    "i would rather be a carpenter than a nurse tbh",
])
def test_a_hypothetical_or_a_wish_states_nothing(text):
    assert statement_part(text) == ""


@pytest.mark.parametrize("text", [
    "My mother says I work too much.",
    "My boss told me I'm getting a promotion.",
    "My friend Rui said he is moving to Berlin.",
    "The doctor said I might be lactose intolerant.",
    'My son keeps saying "I want a cat".',
    "Apparently I snore.",
    "According to my sister, I'm a terrible cook.",
    "I heard that Porto is getting a new metro line.",
    "He said: I live in Lisbon now.",
    '"I\'m quitting my job," my colleague told me.',
    "> I moved to Berlin last year.",  # a quoted line
])
def test_reported_or_quoted_speech_states_nothing_about_the_user(text):
    assert statement_part(text) == ""


@pytest.mark.parametrize("text, statement", [
    ("Please remind me that my mother is called Lucia", "my mother is called Lucia."),  # the issue's own
    ("Remind me that my wife's passport expires in July.", "my wife's passport expires in July."),
    ("Can you remember that my son's name is Tiago?", "my son's name is Tiago."),
    ("Could you keep in mind that I'm left-handed?", "I'm left-handed."),
    ("Make a note that my sister Luisa is vegan.", "my sister Luisa is vegan."),
    ("Save this: my gym is on Rua Augusta.", "my gym is on Rua Augusta."),
    ("For future reference, I'm a Benfica fan.", "I'm a Benfica fan."),
    ("I told you, I'm vegetarian.", "I'm vegetarian."),
])
def test_a_statement_inside_a_request_to_remember_it_is_kept(text, statement):
    assert statement_part(text) == statement


@pytest.mark.parametrize("text", ["Remind me to call my mother tomorrow.", "Remember my wife's name?",
                                  "Remember what my wife's name is?", "Can you remember that?"])
def test_a_request_to_remember_without_a_statement_states_nothing(text):
    assert statement_part(text) == ""


@pytest.mark.parametrize("text, statement", [
    ("Tell me about Lisbon. I was born there.", "I was born in Lisbon."),  # the issue's own: "I was born there."
    ("Tell me about Lisbon, I was born there.", "I was born in Lisbon."),
    ("Have you heard of Coimbra? I studied there.", "I studied in Coimbra."),
    ("Any tips for visiting Kyoto? I'm going there in April.", "I'm going to Kyoto in April."),
    ("What do you think of Dune? I've read it three times.", "I've read Dune three times."),
    ("Tell me about Marie Curie. She is my hero.", "Marie Curie is my hero."),
    ("Is Benfica playing tonight? I've supported them since I was a kid.",
     "I've supported Benfica since I was a kid."),
    ("My wife's name is Anne, right? Anyway, she just started a new job at a bank.",
     "Anne just started a new job at a bank."),
    # Nothing to point back to, or two candidates: the statement stays as it was said.
    ("Do you like jazz? I play it on Sundays.", "I play it on Sundays."),
    ("Is Porto nicer than Braga? I lived there for years.", "I lived there for years."),
    # A kept sentence before it: the model sees both, nothing is rewritten.
    ("I moved to Lisbon. I love it there.", "I moved to Lisbon. I love it there."),
])
def test_a_statement_keeps_the_name_it_points_back_to(text, statement):
    assert statement_part(text) == statement


@pytest.mark.parametrize("text, statement", [
    ("I'm vegan, if that matters.", "I'm vegan."),  # a hedge is no condition
    ("I live in Porto but I'd love to move to Lisbon.", "I live in Porto."),  # the wish cut, the fact kept
    ("I'm learning Italian, so answer in Italian from now on.", "I'm learning Italian."),
    ("I just moved to Braga. Keep your answers short.", "I just moved to Braga."),
    ("My boss says I'm too quiet. I started a public speaking course.", "I started a public speaking course."),
    ("I'd been to Paris twice before I met Anne.", "I'd been to Paris twice before I met Anne."),  # "I'd" = "I had"
    ("My daughter wrote a book about dragons.", "My daughter wrote a book about dragons."),  # no reported speech
    ("Mara swims every morning.", "Mara swims every morning."),
    ("When I retire I want to move to the Algarve.", "When I retire I want to move to the Algarve."),
    ("I read that book twice.", "I read that book twice."),
    ("In short, I'm moving to Lisbon.", "In short, I'm moving to Lisbon."),
    ("Briefly: I moved to Lisbon.", "I moved to Lisbon."),
])
def test_statements_near_the_new_rules_are_still_kept(text, statement):
    assert statement_part(text) == statement


def test_a_tag_question_sends_nothing_and_replaces_nothing_the_user_added(vault_dir, llm_env):
    """The issue's case 2 through the CLI: the fact the user added stays, and no model is asked."""
    assert run_cli("add", "My wife is Anne").exit_code == 0
    llm_env.push('{"facts": ["The user\'s wife\'s name is not Anne"]}', '{"answer": "no"}')
    result = run_cli("add", "--extract", "--json", "my wife's name is not Anne, right?")
    assert result.exit_code == 0, result.stderr
    assert llm_env.requests == []
    assert [m.text for m in Vault(vault_dir).iter_memories(roles=("memory",))] == ["My wife is Anne"]


def test_an_instruction_after_a_question_reaches_no_extraction_in_chat(vault_dir, llm_env):
    """The issue's case 1: "One word." became "The user is named One word"."""
    llm_env.push("Lisbon.", '{"facts": ["The user is named One word"]}')
    result = run_cli("chat", "--json", "Where does my sister live now? One word.")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["learned"] == []
    assert len(llm_env.requests) == 1  # the reply only
    assert list(Vault(vault_dir).iter_memories(roles=("memory",))) == []


@pytest.mark.parametrize("text, seen", [
    ("Please remind me that my mother is called Lucia", "my mother is called Lucia."),
    ("Tell me about Lisbon. I was born there.", "I was born in Lisbon."),
])
def test_extraction_sees_the_statement_whole(fake_llm, text, seen):
    """The issue's case 4: the first never reached the model, the second reached it as "I was born there."."""
    fake_llm.push('{"facts": ["The user was born in Lisbon", "The user\'s mother is called Lucia"]}')
    extract_facts(fake_llm.config(), text)
    assert fake_llm.requests[0]["messages"][-1]["content"].endswith(seen)


def test_a_hypothetical_reaches_no_model(fake_llm):
    """The issue's case 3: "If I had a cat I'd call it Miso" became "The user has a cat named Miso"."""
    fake_llm.push('{"facts": ["The user has a cat named Miso"]}')
    assert extract_facts(fake_llm.config(), "If I had a cat I'd call it Miso") == []
    assert fake_llm.requests == []
