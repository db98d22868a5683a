"""Time in questions (issue 29): the times a query names, read against its clock (`now`), lift
the memories of that time; a "when" question lifts memories whose words place something in time.
Real index, real embedding model, real dateparser; no LLM."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import memvault
from conftest import run_cli

NOW = "2023-10-23T12:00:00Z"  # a Monday: "last week" is Monday 16 to Sunday 22 October


def vault_of(vault_dir, *memories):
    vault = memvault.open_vault(vault_dir)
    vault.add_jsonl("".join(json.dumps({"text": t, "created_at": at}) + "\n" for t, at in memories))
    return vault


def texts(outcome):
    return [r.text for r in outcome.results]


def test_last_week_ranks_that_weeks_memory_above_a_closer_match_from_months_earlier(vault_dir):
    vault = vault_of(vault_dir,
                     ("I went hiking in the Alps with Marta", "2023-10-18T10:00:00Z"),
                     ("What I did: I spent the whole weekend doing my taxes, that is what I did", "2023-06-10T10:00:00Z"),
                     ("I bought a new kettle", "2023-10-23T09:00:00Z"),  # today: newer, but not last week
                     ("My favourite colour is green", "2023-05-12T10:00:00Z"))
    # Without the time the words and recency decide, and the hike is not first.
    plain = vault.search("what did I do", now=NOW, relevance_floor=0)
    assert texts(plain)[0] != "I went hiking in the Alps with Marta"
    assert texts(plain).index("What I did: I spent the whole weekend doing my taxes, that is what I did") < \
        texts(plain).index("I went hiking in the Alps with Marta")
    asked = vault.search("what did I do last week", now=NOW)
    assert texts(asked)[0] == "I went hiking in the Alps with Marta"
    first = asked.results[0]
    assert first.scores["time"] > 0 and first.scores["in_range"]
    # A boost, not a filter: the closer match from June is still there, below.
    assert any(t.startswith("What I did") for t in texts(asked)[1:])
    # The clock is the query's: a week later, "last week" is another week.
    later = {r.text: r for r in vault.search("what did I do last week", now="2023-10-30T12:00:00Z",
                                             relevance_floor=0).results}
    assert later["I bought a new kettle"].scores["in_range"] and later["I bought a new kettle"].scores["time"] > 0
    hike = later.get("I went hiking in the Alps with Marta")
    assert hike is None or not hike.scores.get("in_range")


def test_in_may_2023_lifts_may_2023(vault_dir):
    vault = vault_of(vault_dir,
                     ("We adopted a cat from the shelter.", "2022-05-20T10:00:00Z"),
                     ("We adopted a cat from the shelter!", "2023-05-20T10:00:00Z"),
                     ("we adopted a cat from the shelter", "2023-09-02T10:00:00Z"))
    # The same words three times (a stored text is not stored again): without a time the newest leads.
    plain = vault.search("adopting a cat", now=NOW, relevance_floor=0)
    assert plain.results[0].created_at.startswith("2023-09-02")
    outcome = vault.search("adopting a cat in May 2023", now=NOW, relevance_floor=0)
    assert outcome.results[0].created_at.startswith("2023-05-20")
    assert [r.created_at[:10] for r in outcome.results if "time" in r.scores] == ["2023-05-20"]
    # May 2022 is not May 2023; a lift, not a filter: all three stay findable.
    assert len(outcome.results) == 3


def test_a_when_question_favours_the_memory_that_says_when(vault_dir):
    vault = vault_of(vault_dir,
                     ("Caroline: Caroline went to the LGBTQ support group, it was so good", "2023-05-08T13:00:00Z"),
                     ("Caroline: I went to the LGBTQ support group yesterday", "2023-05-08T14:30:00Z"),
                     ("Melanie: I painted a sunrise by the lake", "2023-05-09T13:02:00Z"),
                     ("Melanie: The kids love the pottery class", "2023-05-10T13:02:00Z"))
    # Asked without "when", the line that names Caroline twice leads; neither is lifted.
    plain = vault.search("Did Caroline go to the LGBTQ support group?", now=NOW, relevance_floor=0)
    assert texts(plain)[0].startswith("Caroline: Caroline went")
    assert all("time" not in r.scores for r in plain.results)
    # Asked when, the turn that says when ("yesterday": its date is the day before 2023-05-08) leads.
    asked = vault.search("When did Caroline go to the LGBTQ support group?", now=NOW, relevance_floor=0)
    assert texts(asked)[0] == "Caroline: I went to the LGBTQ support group yesterday"
    assert asked.results[0].scores["time"] > 0
    assert [r.text for r in asked.results if "time" in r.scores] == [texts(asked)[0]]


def test_explain_shows_the_time_boost(vault_dir):
    vault_of(vault_dir, ("I went hiking in the Alps with Marta", "2023-10-18T10:00:00Z"),
             ("I started learning Japanese", "2023-01-20T10:00:00Z"))
    out = run_cli("search", "--explain", "--now", NOW, "what did I do last week").stdout
    assert "time" in out and "'last week': 2023-10-16 to 2023-10-22" in out


@pytest.mark.slow  # end to end: cold searches in child processes, their modules listed (~20 s here)
def test_a_query_without_a_time_word_does_not_import_dateparser(vault_dir):
    """Nor anything else a plain search did not import before issue 45: the LLM's parts (litellm)
    only with llm_query_parts on."""
    vault_of(vault_dir, ("I went hiking in the Alps with Marta", "2023-10-18T10:00:00Z"))
    heavy = ["dateparser", "litellm", "memvault.reading.llm_parts"]  # (lancedb imports pydantic anyway)
    probe = ("import sys, memvault\n"
             "v = memvault.open_vault(sys.argv[1])\n"
             "v.search(sys.argv[2], now='2023-10-23T12:00:00Z')\n"
             f"print(' '.join(m for m in {heavy!r} if m in sys.modules))\n")
    for plain_question in ("where did I go hiking", "where did Marta and Lena go hiking"):  # the second in parts
        plain = subprocess.run([sys.executable, "-c", probe, str(vault_dir), plain_question],
                               capture_output=True, text=True, check=True)
        assert plain.stdout.strip() == "", plain_question
    timed = subprocess.run([sys.executable, "-c", probe, str(vault_dir), "where did I go hiking last week"],
                           capture_output=True, text=True, check=True)
    assert timed.stdout.strip() == "dateparser"  # the probe can see it when it is used


def test_a_warm_process_reads_a_ranges_memories_anew_after_a_change(vault_dir):
    """The rows of a named range are kept per table version by a long-lived process (issue 45: no
    LanceDB query for the next question naming that range): a memory added to the range, or removed
    from it, is seen by the next search."""
    vault = vault_of(vault_dir, ("I went hiking in the Alps with Marta", "2023-10-18T10:00:00Z"),
                     ("My favourite colour is green", "2023-05-12T10:00:00Z"))
    assert texts(vault.search("what did I do last week", now=NOW))[0] == "I went hiking in the Alps with Marta"
    assert texts(vault.search("anything from last week?", now=NOW))[0] == "I went hiking in the Alps with Marta"
    [tax] = vault.add("Filed the tax return", created_at="2023-10-19T09:00:00Z")  # no word of the question
    assert "Filed the tax return" in texts(vault.search("what did I do last week", now=NOW))
    vault.remove(tax.id)
    assert "Filed the tax return" not in texts(vault.search("what did I do last week", now=NOW))


def test_reading_time_in_words():
    from datetime import datetime, timezone

    from memvault.reading import when

    now = datetime(2023, 10, 23, 12, tzinfo=timezone.utc)

    def ranges(text):
        asked = when.read(text, now)
        return [(r.start and r.start.date().isoformat(), r.end and r.end.date().isoformat()) for r in asked.ranges]

    assert ranges("what did I do last week") == [("2023-10-16", "2023-10-23")]
    assert ranges("in May 2023") == [("2023-05-01", "2023-06-01")]
    assert ranges("two years ago") == [("2021-01-01", "2022-01-01")]
    assert ranges("yesterday") == [("2023-10-22", "2023-10-23")]
    assert ranges("what happened before May 2023") == [(None, "2023-05-01")]
    assert ranges("anything after June 2022") == [("2022-07-01", None)]
    assert when.read("When did Caroline go to the support group?", now).asks_when
    assert when.read("what is my name", now) is None
    assert when.read("what happened in 9999", now) is None  # past datetime's last year: no range, no error
    assert when.read("we may go", now) is None  # dateparser's "Wednesday" and "May" are not times here
    assert not when.names_time("Caroline: We may go", now) and when.names_time("Nate: Last Friday I won", now)


def test_yesterday_is_the_day_before_in_the_zone_of_the_clock(vault_dir):
    """--now 2026-11-27T19:00:00-08:00: it is already the 28th in UTC, but "yesterday" is the 26th
    where that clock is (issue 44: it was read as the 27th)."""
    from datetime import datetime, timedelta, timezone

    from memvault.reading import when

    clock = datetime(2026, 11, 27, 19, tzinfo=timezone(timedelta(hours=-8)))
    (found,) = when.read("what did I do yesterday", clock).ranges
    assert (found.start.isoformat(), found.end.isoformat()) == ("2026-11-26T00:00:00-08:00", "2026-11-27T00:00:00-08:00")
    assert str(found) == "'yesterday': 2026-11-26 to 2026-11-26"
    vault_of(vault_dir, ("I repotted the ficus on the balcony", "2026-11-26T20:00:00Z"),  # noon on the 26th there
             ("I cleaned the windows of the flat", "2026-11-27T20:00:00Z"),  # noon on the 27th: today there
             ("I baked bread with rye flour", "2026-11-27T06:00:00Z"))  # 22:00 on the 26th there, the 27th in UTC
    result = run_cli("search", "--json", "--now", "2026-11-27T19:00:00-08:00", "what did I do yesterday")
    assert result.exit_code == 0, result.stderr
    in_range = {r["text"] for r in json.loads(result.stdout) if r["scores"].get("in_range")}
    assert in_range == {"I repotted the ficus on the balcony", "I baked bread with rye flour"}


def test_words_that_only_look_like_times_name_none():
    """A book title, a name, a verb, a number in brackets, a weekday asked about as a habit: no
    range lifts a day the user did not mean (each was read as one before: "the Sun" as last
    Sunday, "Jan" as January, "(34)" as the year 1934, "on Wednesday" as last Wednesday)."""
    from datetime import datetime, timezone

    from memvault.reading import when

    now = datetime(2023, 10, 23, 12, tzinfo=timezone.utc)  # a Monday

    def ranges(text):
        asked = when.read(text, now)
        return [(r.phrase, r.start.date().isoformat()) for r in asked.ranges] if asked else []

    assert ranges("progress with Klara and the Sun") == []
    assert ranges("lunch with Jan on Sat") == []
    assert ranges("I Sat down with Mum") == []
    assert ranges("what does Ruth do on Thursday (34)") == []
    assert ranges("what does Leo do on Wednesday") == []  # what is usual on Wednesdays
    assert ranges("what is on my calendar this month") == [("this month", "2023-10-01")]  # "mon", not Monday
    assert ranges("what did Leo do on Wednesday") == [("on Wednesday", "2023-10-18")]  # the last one
    assert ranges("the trip to Berlin in April (35)") == [("in April", "2023-04-01")]  # the month kept
    assert ranges("lunch on Sat 21st") == [("on Sat 21st", "2023-10-21")]  # beside a number, a day
