"""What issue 15 changed in search, as a user notices it (bundled model, real LanceDB, no reranker):
a chat turn found through the turns before it, a fresh fact ahead of a stale one, nothing
returned or injected when nothing matches, scores that compare across searches."""

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest

import memvault
from conftest import run_cli, seed
from fake_llm import refused_url

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
ISSUE_VAULT = ["The user's wife is named Anne", "The user lives in Lisbon", "The user is allergic to peanuts"]
OTHER_TALK = [
    ("user", "Can you suggest a name for my new sourdough starter?"),
    ("assistant", "How about Clint Yeastwood?"),
    ("user", "Ha, perfect. Also, remind me to water the tomatoes."),
    ("assistant", "Noted: water the tomatoes this evening."),
]
DENTIST = [
    ("user", "I finally booked the dentist for my cracked molar."),
    ("assistant", "Good. When is it?"),
    ("user", "Thursday at three."),
]


def import_turns(tmp_path, exchanges, conversation="home"):
    """Chat turns as a `memvault export` brings them back: an exchange every day, a minute apart."""
    lines = []
    for day, exchange in enumerate(exchanges):
        for minute, (role, text) in enumerate(exchange):
            lines.append({"id": str(uuid.uuid4()), "role": role, "conversation_id": conversation, "text": text,
                          "created_at": (T0 + timedelta(days=day, minutes=minute)).isoformat()})
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run_cli("import", "jsonl", str(path))
    assert result.exit_code == 0, result.stderr
    return lines


def search(*args):
    result = run_cli("search", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_an_answer_turn_is_found_by_its_question_through_the_turns_before_it(vault_dir, tmp_path):
    import_turns(tmp_path, [OTHER_TALK, DENTIST, OTHER_TALK[:2]])
    results = search("-c", "home", "--now", (T0 + timedelta(days=3)).isoformat(), "When is my dentist appointment?")
    texts = [r["text"] for r in results]
    # "Thursday at three." shares no word with the question: it is found because BM25 reads it
    # with the two turns before it ("booked the dentist", "When is it?")...
    assert "Thursday at three." in texts[:3]
    answer = results[texts.index("Thursday at three.")]
    assert answer["scores"]["bm25"] > 0 and answer["role"] == "user"
    # ...while a search shows and returns only the turn itself.
    assert all("dentist" not in t or t == DENTIST[0][1] for t in texts)
    # An exchange a day later is not its context: the sourdough turns after it did not inherit it.
    assert "How about Clint Yeastwood?" not in texts


def test_removing_a_turn_takes_its_words_out_of_the_turns_after_it(vault_dir, tmp_path):
    lines = import_turns(tmp_path, [OTHER_TALK, DENTIST, OTHER_TALK])
    assert "Thursday at three." in [r["text"] for r in search("-c", "home", "molar")]
    molar = next(line["id"] for line in lines if "molar" in line["text"])
    assert run_cli("rm", molar).exit_code == 0
    # The removed turn's words no longer find the turns that followed it.
    assert search("-c", "home", "molar") == []


def test_a_fresh_fact_beats_a_stale_one_of_equal_relevance(vault_dir):
    now = datetime(2026, 5, 1, tzinfo=timezone.utc)
    vault = memvault.open_vault(vault_dir)
    vault.add([*ISSUE_VAULT, "The user's office is on the third floor", "The user works from home on Fridays",
               "The user's team has six engineers"], created_at=now - timedelta(days=400))
    vault.add(["The user's office is on the fifth floor"], created_at=now - timedelta(days=3))
    results = search("--now", now.isoformat(), "Which floor is my office on?")
    assert [r["text"] for r in results[:2]] == ["The user's office is on the fifth floor",
                                                "The user's office is on the third floor"]
    fresh, stale = results[0]["scores"], results[1]["scores"]
    assert abs(fresh["relevance"] - stale["relevance"]) < 0.15 * stale["relevance"]  # as relevant, nearly
    assert fresh["score"] > stale["score"]  # recency decided:
    timeless = search("--now", now.isoformat(), "--recency-weight", "0", "Which floor is my office on?")
    assert timeless[0]["text"] == "The user's office is on the third floor"


def test_nothing_unrelated_comes_back_in_a_small_vault(vault_dir):
    seed(*ISSUE_VAULT)
    assert [r["text"] for r in search("what should I not eat")] == ["The user is allergic to peanuts"]
    assert search("abc") == [] and search("what is my blood type") == []
    said = run_cli("search", "what is my blood type")
    assert said.exit_code == 0 and said.stdout == ""
    assert "no memory matches well enough" in said.stderr and "--relevance-floor 0" in said.stderr
    assert len(search("--relevance-floor", "0", "what is my blood type")) == 3


def test_an_unrelated_question_injects_no_memories_into_chat(vault_dir, llm_env):
    seed(*ISSUE_VAULT)
    llm_env.push("I don't know your blood type.")
    assert run_cli("chat", "--no-learn", "--no-stream", "What is my blood type?").exit_code == 0
    system = llm_env.requests[0]["messages"][0]["content"]
    assert "Anne" not in system and "Lisbon" not in system and "peanuts" not in system
    llm_env.push("Avoid peanuts.")
    assert run_cli("chat", "--no-learn", "--no-stream", "What should I not eat?").exit_code == 0
    system = llm_env.requests[1]["messages"][0]["content"]
    assert "[memory] The user is allergic to peanuts" in system and "Anne" not in system


def test_scores_compare_across_searches_and_the_threshold_applies_without_a_reranker(vault_dir):
    seed(*ISSUE_VAULT, "My locker code word is zebra42", "The user's favourite colour is green")
    exact = search("zebra42")
    assert exact[0]["text"] == "My locker code word is zebra42"
    assert all(r["score"] < exact[0]["score"] / 2 for r in exact[1:])  # no tie with an unrelated memory
    precise = search("What is my wife's name?")[0]
    vague = search("what should I not eat")[0]
    assert precise["score"] > 0.6 > 0.3 > vague["score"]  # a strong match scores high, a weak one low
    kept = search("--threshold", "0.5", "--relevance-floor", "0", "What is my wife's name?")
    assert [r["text"] for r in kept] == ["The user's wife is named Anne"]
    assert all(r["scores"]["relevance"] >= 0.5 for r in kept)


def test_the_printed_order_says_when_it_is_not_the_score_order(vault_dir):
    coffee = ["The user likes coffee", "The user really likes coffee", "The user loves coffee",
              "The user likes drinking coffee", "The user likes green tea"]
    seed(*coffee)
    result = run_cli("search", "-k", "3", "What does the user like to drink?")
    scores = [float(line.split()[0]) for line in result.stdout.splitlines()]
    assert "The user likes green tea" in result.stdout
    assert scores != sorted(scores, reverse=True)
    assert "near-duplicates were moved down" in result.stderr
    plain = run_cli("search", "-k", "3", "--mmr-lambda", "1", "What does the user like to drink?")
    assert "moved down" not in plain.stderr


def test_the_llm_reranker_orders_results_when_asked(vault_dir, llm_env, monkeypatch):
    seed("The user's wife is named Anne", "The user's sister is named Clara", "The user's dog is named Rex")
    plain = [r["text"] for r in search("-k", "2", "--relevance-floor", "0", "What is my sister called?")]
    monkeypatch.setenv("MEMVAULT_LLM_RERANK", "true")
    llm_env.push('{"numbers": [3]}')
    result = run_cli("search", "--relevance-floor", "0", "-k", "2", "What is my sister called?")
    assert result.exit_code == 0, result.stderr
    # The model read the question and the results (up to 10, though 2 were asked for) and chose one.
    asked = llm_env.requests[0]["messages"][-1]["content"]
    assert "What is my sister called?" in asked and asked.count("[") == 3
    chosen = asked.split("[3] ")[1].splitlines()[0]
    printed = [line.split("] ", 1)[1] for line in result.stdout.splitlines()]
    assert printed[0] == chosen and len(printed) == 2
    assert "ordered by the LLM" in result.stderr
    # Off by default, and an LLM that cannot be reached leaves the order as it was, said once.
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", refused_url())
    down = run_cli("search", "--relevance-floor", "0", "-k", "2", "What is my sister called?")
    assert down.exit_code == 0 and "llm_rerank" in down.stderr
    assert [line.split("] ", 1)[1] for line in down.stdout.splitlines()] == plain


# -- issue 32 -----------------------------------------------------------------------------------
# bench/personal.py holds the issue's vaults and the household test set (bench/locomo.py reports them).
# Loaded from its file: bench/ on sys.path would shadow packages (bench/mcp.py is not the mcp SDK).
import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

_spec = importlib.util.spec_from_file_location("personal", Path(__file__).resolve().parent.parent / "bench" / "personal.py")
personal = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(personal)


def test_five_phrasings_of_one_preference_leave_room_for_the_other(vault_dir):
    seed(*personal.COFFEE_FACTS)
    texts = [r["text"] for r in search("-k", "3", personal.COFFEE_QUESTION)]
    # The coffee facts say one thing five ways (cosine 0.66-0.93): the best of them, then the tea.
    assert "The user likes green tea" in texts
    assert sum("coffee" in t for t in texts) <= 2
    # Without diversity (--mmr-lambda 1) the paraphrases take the three places.
    plain = [r["text"] for r in search("-k", "3", "--mmr-lambda", "1", personal.COFFEE_QUESTION)]
    assert "The user likes green tea" not in plain


def test_short_personal_questions_find_their_answer_first(vault_dir):
    seed(*personal.ISSUE_FACTS)
    for question, (answer,) in personal.ISSUE_PRESENT:
        results = search("-k", "3", question)
        assert results and results[0]["text"] == personal.ISSUE_FACTS[answer], (question, [r["text"] for r in results])
    # "for a living" is not "lives in": the word shared with Lisbon's fact (stemmed) does not win.
    assert "The user lives in Lisbon" not in [r["text"] for r in search("-k", "1", "What do I do for a living?")]


def test_everyday_questions_of_a_household_vault(vault_dir):
    """Issue 32's test set: 38 everyday questions over 50 facts, each answered in the first three;
    and of 20 questions on topics the vault does not hold, those that return nothing stay so."""
    vault = memvault.open_vault(vault_dir)
    vault.add(personal.HOUSEHOLD_FACTS)
    missed = [q for q, gold in personal.HOUSEHOLD_PRESENT
              if not {personal.HOUSEHOLD_FACTS[i] for i in gold} & {r.text for r in vault.search(q, top_k=3).results}]
    assert missed == []
    silent = [q for q in personal.HOUSEHOLD_ABSENT if not vault.search(q, top_k=3).results]
    assert len(silent) >= 6, silent


def test_a_turn_is_lifted_by_the_turns_of_its_session(vault_dir, tmp_path):
    party = [("user", "Maya's birthday party is on Saturday."), ("assistant", "Lovely! Where are you having it?"),
             ("user", "We booked the climbing centre, the kids love the bouldering wall.")]
    other = [("user", "Sam wants a quiet birthday this year."), ("assistant", "Maybe a dinner at home then.")]
    # Another party, of another day: a statement (a question would rank lower anyway: retrieval._asking_focus).
    last_year = [("user", "Leo's birthday party last year was a blast."), ("assistant", "At the trampoline park, I think.")]
    import_turns(tmp_path, [party, [], [], other, [], [], last_year])
    seed("The climbing centre closes at 10 pm", "The user's favourite restaurant is Bundobust")
    now = (T0 + timedelta(days=30)).isoformat()
    vault = memvault.open_vault(vault_dir)
    answer = party[2][1]
    # The answer shares no word with the question; the turns before it in its session match it well.
    lifted = vault.search("Where is Maya's birthday party?", conversation="home", top_k=5, now=now).results
    texts = [r.text for r in lifted]
    assert answer in texts[:3] and texts.index(answer) < texts.index(last_year[0][1])
    assert lifted[texts.index(answer)].scores["session"] > 0.1
    # search --explain shows the lift in its own column, on the answer's row.
    explain = run_cli("search", "--explain", "-c", "home", "-k", "5", "--now", now, "Where is Maya's birthday party?")
    header = next(line for line in explain.stdout.splitlines() if "┃" in line and " session " in line)
    row = next(line for line in explain.stdout.splitlines() if lifted[texts.index(answer)].id[:8] in line)
    column = [cell.strip() for cell in header.split("┃")].index("session")
    assert float([cell.strip() for cell in row.split("│")][column]) == pytest.approx(
        lifted[texts.index(answer)].scores["session"], abs=1e-3)
    # Without the lift (session_weight 0) the line about another party of another day goes ahead of it.
    alone = [r.text for r in vault.search("Where is Maya's birthday party?", conversation="home", top_k=5, now=now,
                                          session_weight=0).results]
    assert answer not in alone[:2] and alone.index(last_year[0][1]) < alone.index(answer)
    # The command line's --session-weight is the same setting.
    cli = [r["text"] for r in search("-c", "home", "-k", "5", "--now", now, "--session-weight", "0",
                                     "Where is Maya's birthday party?")]
    assert cli == alone


def test_facts_of_one_exchange_are_not_folded_as_paraphrases(vault_dir, tmp_path):
    """Two facts learned minutes apart in one conversation are distinct evidence and both stay; the
    same two learned on different days are one preference said twice, and the second makes room."""
    facts = ["The user likes black coffee", "The user loves drinking coffee", "The user likes green tea"]
    lines = [{"id": str(uuid.uuid4()), "role": "memory", "conversation_id": conversation, "text": text,
              "created_at": (T0 + step * i).isoformat()}
             for conversation, step in (("one-chat", timedelta(minutes=2)), ("many-days", timedelta(days=2)))
             for i, text in enumerate(facts)]
    path = tmp_path / "facts.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert run_cli("import", "jsonl", str(path)).exit_code == 0
    now = (T0 + timedelta(days=10)).isoformat()
    question = "What does the user like to drink?"
    one_chat = [r["text"] for r in search("-c", "one-chat", "-k", "2", "--now", now, question)]
    assert sorted(one_chat) == sorted(facts[:2])  # cosine 0.8 apart, but of one session
    many_days = [r["text"] for r in search("-c", "many-days", "-k", "2", "--now", now, question)]
    assert "The user likes green tea" in many_days and sum("coffee" in t for t in many_days) == 1


GROUP_CHAT = [  # an imported chat whose turns name their speaker, a week apart
    [("user", "John: Maria, I saw your painting at the café, it is wonderful!"),
     ("assistant", "Maria: Thanks John! I painted that sunset over the harbour last month.")],
    [("user", "John: Are you painting this weekend, Maria?"), ("assistant", "Maria: No, I'm going hiking with my dog instead.")],
    [("user", "John: Maria, your paintings always make my day."),
     ("assistant", "Maria: I just finished a portrait of my grandmother, in oil.")],
    [("user", "John: Maria, are you painting anything for the art fair?"),
     ("assistant", "Maria: Not sure yet, I am busy at work.")],
    [("user", "John: I painted my fence yesterday, Maria, does that count as art?"), ("assistant", "Maria: Ha, it counts!")],
    [("user", "John: Maria, what paint brand do you like?"), ("assistant", "Maria: Any, really.")],
]


def import_weekly_chat(chat: list[list[tuple[str, str]]], tmp_path) -> None:
    """A chat of conversation "club" imported as the user would (`import jsonl`): one exchange a week from T0,
    its turns a minute apart."""
    lines = []
    for week, exchange in enumerate(chat):
        for minute, (role, text) in enumerate(exchange):
            lines.append({"id": str(uuid.uuid4()), "role": role, "conversation_id": "club", "text": text,
                          "created_at": (T0 + timedelta(days=7 * week, minutes=minute)).isoformat()})
    path = tmp_path / "club.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert run_cli("import", "jsonl", str(path)).exit_code == 0


def test_a_question_about_one_speaker_finds_what_that_speaker_said_in_each_session(vault_dir, tmp_path):
    """Issue 45's multi-hop questions: "What has Maria painted?" is answered by Maria's own lines of two
    sessions, while John's lines, which name Maria and painting at every turn, took their places."""
    import_weekly_chat(GROUP_CHAT, tmp_path)
    now = (T0 + timedelta(days=60)).isoformat()
    vault = memvault.open_vault(vault_dir)
    found = vault.search("What has Maria painted?", conversation="club", top_k=5, now=now).results
    texts = [r.text for r in found]
    sunset, portrait = GROUP_CHAT[0][1][1], GROUP_CHAT[2][1][1]
    assert sunset in texts and portrait in texts  # both sessions' answers in the top 5 (before: the portrait not)
    assert sum(t.startswith("Maria:") for t in texts) >= 3  # before: two of John's lines to her above each
    assert next(r for r in found if r.text.startswith("John:")).scores["speaker"] < 0  # kept, lower, said why
    # search --explain shows it in its own column, on the other speaker's row.
    explain = run_cli("search", "--explain", "-c", "club", "-k", "5", "--now", now, "What has Maria painted?")
    heads = [[cell.strip() for cell in line.split("┃")] for line in explain.stdout.splitlines() if "┃" in line]
    names = ["".join(cells) for cells in zip(*heads)]  # a narrow terminal folds a heading over two lines
    john = next(r for r in found if r.text.startswith("John:"))
    row = next(line for line in explain.stdout.splitlines() if john.id[:6] in line)
    column = names.index("speaker")
    assert float([cell.strip() for cell in row.split("│")][column]) == pytest.approx(john.scores["speaker"], abs=1e-3)
    # About the other speaker: his own lines, his fence among them; naming both speakers changes nothing.
    john = [r.text for r in vault.search("What has John painted?", conversation="club", top_k=5, now=now).results]
    assert GROUP_CHAT[4][0][1] in john and all(t.startswith("John:") for t in john)
    both = vault.search("What have John and Maria painted?", conversation="club", top_k=5, now=now).results
    assert not any("speaker" in r.scores for r in both)


def test_a_list_question_about_one_speaker_finds_her_lines_of_other_sessions(vault_dir, tmp_path):
    """Issue 45's retrieval goals (multi-hop): "What has Maria bought?" is answered by two of Maria's own
    lines from sessions weeks apart, while John asks her about buying at every turn of a dozen others: his
    questions and her replies to them fill every candidate place the question has. Searched again among
    Maria's lines without her name (retrieval._speaker_candidates), both answers reach the top 5."""
    chat = [[("user", "John: Maria, have you bought anything nice lately?"), ("assistant", "Maria: Not really, work was busy.")]
            for _ in range(14)]
    chat[3] = [("user", "John: How was your weekend?"), ("assistant", "Maria: Great, I finally bought a kayak.")]
    chat[9] = [("user", "John: Any news from the trip?"),
               ("assistant", "Maria: Yes! In Vienna I bought an old cello from a street market.")]
    import_weekly_chat(chat, tmp_path)
    now = (T0 + timedelta(days=120)).isoformat()
    found = memvault.open_vault(vault_dir).search("What has Maria bought?", conversation="club", top_k=5,
                                                  now=now).results
    texts = [r.text for r in found]
    assert chat[3][1][1] in texts and chat[9][1][1] in texts, texts  # before: John's questions in all five places


def test_the_line_that_answers_ranks_above_the_questions_that_echo_it(vault_dir, tmp_path):
    """Issue 45: a chat's other side asks "How do you unwind ...?" week after week; each question holds the
    words of "How do I unwind?" and no answer, while the one line that answers says more besides. A line
    that only asks back keeps 1 - ranking.ASKING_WEIGHT of its relevance, one that says something first and
    then asks 1 - ranking.TRAILING_WEIGHT: the answer comes first (before: fifth, under four of the
    questions; without the second rule, under "Work was hectic for me today. How do you unwind?"), the
    questions stay, lower, each with what it gave up."""
    asks = ["How do you unwind after a long week?", "Good morning! How do you unwind in the evenings?",
            "How do you unwind when stress piles up?", "Work was hectic for me today. How do you unwind?",
            "My week was long and tiring too. Did you unwind at all after the meeting?",
            "How do you unwind on holidays?"]
    answer = "Honestly, a long swim at the lake is the best way for me to unwind."
    replies = [answer, "Sometimes work follows me home.", "Hard to say, it changes.", "My sister visits on Saturday.",
               "Not really.", "We will see."]
    import_weekly_chat([[("assistant", ask), ("user", reply)] for ask, reply in zip(asks, replies)], tmp_path)
    now = (T0 + timedelta(days=60)).isoformat()
    found = search("-c", "club", "-k", "5", "--now", now, "How do I unwind?")
    assert found[0]["text"] == answer, [r["text"] for r in found]
    assert "asking" not in found[0]["scores"]
    questions = [r for r in found if r["text"] in asks]
    assert len(questions) == 4 and all(r["scores"]["asking"] < 0 for r in questions)
