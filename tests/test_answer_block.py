"""What the model reads (issue 45): dates written as a person writes them, the block by day in time
order, relative times resolved against the memory's own date (shown beside the words, never in them)
and found by a question about the day they name. Real index, embedding model and dateparser; the LLM
is tests/fake_llm.py (real HTTP) where a model reads the block."""

from __future__ import annotations

import json
import re

import memvault
from conftest import run_cli

NOW = "2023-10-23T09:00:00Z"  # Mon 23 October 2023
ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def turns(vault_dir, conversation: str, *said):
    """Chat turns (role, text, created_at) of one conversation, as an import or a chat stores them."""
    vault = memvault.open_vault(vault_dir)
    vault.add_jsonl("".join(json.dumps({"role": role, "text": text, "created_at": at, "conversation_id": conversation})
                            + "\n" for role, text, at in said))
    return vault


def memory_lines(block: str) -> list[str]:
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Relevant memories"))
    return lines[start + 1:lines.index("</memory>")]


def test_the_block_writes_dates_in_words_and_gives_the_days_oldest_first_in_the_order_said(vault_dir):
    vault = turns(vault_dir, "trip",
                  ("user", "Caroline: We swam in the lake at the camp, the water was cold", "2023-06-20T10:00:00Z"),
                  ("assistant", "Melanie: Cold lake water wakes you up! Did the kids swim too?", "2023-06-20T10:00:30Z"),
                  ("user", "Caroline: I am going camping by the lake with my kids", "2023-05-08T13:56:00Z"),
                  ("assistant", "Melanie: Camping by a lake with kids sounds lovely", "2023-05-08T13:57:00Z"),
                  ("user", "Caroline: I signed up for a pottery class", "2023-03-01T09:00:00Z"))
    query = "swimming in the cold lake water at the camp"
    ranked = [r.created_at[:10] for r in vault.search(query, conversation="trip", now=NOW, relevance_floor=0).results]
    assert ranked[0] == "2023-06-20"  # ranking picks; June's swim first: the block's order is not the ranking's
    block = run_cli("search", "-c", "trip", "--format", "prompt", "--now", NOW, "--relevance-floor", "0",
                    query).stdout
    assert "Today is Mon 23 October 2023." in block
    assert not ISO_DAY.search(block)  # no day a reader would copy as one token
    lines = memory_lines(block)
    headings = [line for line in lines if not line.startswith("  ")]
    assert headings == ["Wed 1 March 2023:", "Mon 8 May 2023:", "Tue 20 June 2023:"]  # each day once, oldest first
    may = lines[lines.index("Mon 8 May 2023:") + 1:lines.index("Tue 20 June 2023:")]
    assert may == ["  [user] Caroline: I am going camping by the lake with my kids",
                   "  [assistant] Melanie: Camping by a lake with kids sounds lovely"]  # in the order said
    june = lines[lines.index("Tue 20 June 2023:") + 1:]
    assert [line.split("]")[0] for line in june] == ["  [user", "  [assistant"]
    # The files and --json keep ISO 8601.
    as_json = json.loads(run_cli("search", "-c", "trip", "--json", "--now", NOW, "--relevance-floor", "0", query).stdout)
    assert {r["created_at"][:10] for r in as_json} == {"2023-03-01", "2023-05-08", "2023-06-20"}


JUNE_OUTINGS = ["the cinema with Ana", "the museum on my own", "the beach with my brother", "a concert in the park",
                "the market for bread", "the gym after work", "the library to study", "a wedding in Porto",
                "the zoo with the kids", "the dentist", "a pub quiz", "the mountains"]


def test_a_yesterday_turn_is_shown_with_its_day_and_found_by_a_question_about_that_day(vault_dir):
    vault = turns(vault_dir, "diary", ("user", "I went to the lake yesterday.", "2023-06-06T09:00:00Z"),
                  *[("user", f"I went to {place}.", f"2023-06-{8 + i:02d}T10:00:00Z") for i, place in enumerate(JUNE_OUTINGS)],
                  ("user", "We moved into the new flat last month.", "2023-08-03T10:00:00Z"))
    # Found by the day it names (Mon 5 June), though said on the 6th: first among a month of outings
    # (before, a June outing of another day came first); and by the month it names.
    asked = vault.search("Where did I go on 5 June 2023?", conversation="diary", now=NOW, top_k=3)
    assert asked.results[0].text == "I went to the lake yesterday."
    assert asked.results[0].scores["in_range"]
    moved = vault.search("What happened in July 2023?", conversation="diary", now=NOW)
    assert "We moved into the new flat last month." in [r.text for r in moved.results]
    # Shown with the day it names, to the model and to a person; the user's words stay as said.
    block = run_cli("search", "-c", "diary", "--format", "prompt", "--now", NOW, "Where did I go on 5 June 2023?").stdout
    assert "Tue 6 June 2023:\n  [user] I went to the lake yesterday (Mon 5 June 2023)." in block
    listed = run_cli("search", "-c", "diary", "-k", "3", "--now", NOW, "Where did I go on 5 June 2023?").stdout
    assert re.fullmatch(r"\d\.\d{3}  [0-9a-f]{8}  Tue 6 June 2023  \[user\] I went to the lake yesterday "
                        r"\(Mon 5 June 2023\)\.", listed.splitlines()[0]), listed
    found = json.loads(run_cli("search", "-c", "diary", "-k", "3", "--json", "--now", NOW,
                               "Where did I go on 5 June 2023?").stdout)[0]
    assert found["text"] == "I went to the lake yesterday."
    assert found["told"] == [{"phrase": "yesterday", "start": "2023-06-05", "end": "2023-06-06", "unit": "day",
                              "about": False}]
    [turn] = [p for p in (vault_dir / "entries").rglob("*.md") if "lake" in p.read_text()]
    assert "I went to the lake yesterday.\n" in turn.read_text() and "June" not in turn.read_text()


def test_an_index_from_before_gets_the_resolved_times_without_embedding_again(vault_dir, monkeypatch):
    vault = turns(vault_dir, "diary", ("user", "I went to the lake yesterday.", "2023-06-06T09:00:00Z"),
                  ("user", "I went to the cinema with Ana.", "2023-06-20T19:00:00Z"))
    table = vault.vault.index.table()
    table.drop_columns(["told", "told_from_us", "told_to_us"])  # as memvault wrote it before issue 45
    from memvault.store import models

    def no_embedding(*args, **kwargs):
        raise AssertionError("embedded again")

    monkeypatch.setattr(models.Embedder, "embed", no_embedding)
    reopened = memvault.open_vault(vault_dir)
    found = reopened.search("Where did I go on 5 June 2023?", conversation="diary", now=NOW, relevance_floor=0)
    assert found.results[0].text == "I went to the lake yesterday."
    assert found.results[0].shown_text == "I went to the lake yesterday (Mon 5 June 2023)."


def test_a_summary_reads_each_memory_dated_in_words_with_its_relative_times_resolved(vault_dir, llm_env):
    turns(vault_dir, "diary", ("user", "I went to the lake yesterday.", "2023-06-06T09:00:00Z"),
          *[("user", f"I read chapter {n} of the lake book, it was about the water and the fish", f"2023-06-{n:02d}T09:00:00Z")
            for n in range(7, 20)])
    llm_env.default = "The user went to the lake on 5 June 2023."
    assert run_cli("summarize", "-c", "diary", "--rebuild").exit_code == 0
    sent = llm_env.requests[0]["messages"][-1]["content"]
    assert "[Tue 6 June 2023] [user] I went to the lake yesterday (Mon 5 June 2023)." in sent
