"""bench/answers.py (issues 29 and 45): its scoring follows the LoCoMo paper's normalisation (and a date score), its
questions are spread over the seven dev conversations, and a run end to end through the fake LLM
(real HTTP) writes one scored line per row and leaves no asked question behind in the vaults."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "bench" / "locomo"


def _load_answers():
    """bench/answers.py as a module, without putting bench/ on sys.path (its mcp.py would hide the SDK)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_answers", REPO / "bench" / "answers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


answers = _load_answers()


def test_scores_follow_the_locomo_normalisation():
    assert answers.normalise("The Sunday before 25 May, 2023.") == "sunday before 25 may 2023"
    assert answers.f1("On 7 May 2023", "7 May 2023") == pytest.approx(2 * 0.75 * 1.0 / 1.75)
    assert answers.f1("Lisbon", "Porto") == 0.0
    assert answers.contains("She went on the 7 May, 2023!", "7 May 2023")
    assert not answers.contains("17 May 2023", "7 May 2023")  # whole words only
    assert answers.f1("2022", 2022) == 1.0  # LoCoMo has numbers as gold answers


def test_the_date_score_counts_a_near_date_not_like_a_wrong_one():
    assert answers.date_score("On 7 May 2023", "7 May 2023") == 1.0
    assert answers.date_score("2023-05-07", "7 May 2023") == 1.0  # F1 scores this 0
    assert answers.date_score("8 May, 2023", "7 May 2023") == pytest.approx(6 / 7)  # the day after
    assert answers.date_score("May 2023", "7 May 2023") == 0.5  # right, less precise
    assert answers.date_score("Yesterday", "7 May 2023") == 0.0
    assert answers.date_score("3 March 2021", "7 May 2023") == 0.0
    assert answers.date_score("Friday, 2 June 2023", "The week before 9 June 2023") == 1.0
    assert answers.date_score("October 2022", "September, 2022") == 0.5
    assert answers.date_score("it may be", "7 May 2023") == 0.0  # the verb, not the month
    assert answers.date_score("Valorant", "Valorant") is None  # no date in the gold: not scored by dates


@pytest.mark.skipif(not (LOCOMO / "locomo_queries.jsonl").exists(), reason="LoCoMo data not on this machine")
def test_questions_are_spread_over_the_seven_conversations_and_four_categories():
    drawn = answers.questions(LOCOMO)
    assert len(drawn) == 168 and len({q["qid"] for q in drawn}) == 168
    assert collections.Counter(q["conv_id"] for q in drawn) == {c: 24 for c in answers.DEV_CONVERSATIONS}
    assert {q["category"] for q in drawn} == {1, 2, 3, 4}
    assert [q["conv_id"] for q in drawn[:7]] == list(answers.DEV_CONVERSATIONS)  # a short run is spread
    assert drawn == answers.questions(LOCOMO)  # the same draw every time


@pytest.mark.slow
@pytest.mark.skipif(not (LOCOMO / "locomo_queries.jsonl").exists(), reason="LoCoMo data not on this machine")
def test_a_run_scores_every_row_and_leaves_no_question_in_the_vaults(tmp_path, llm_env):
    first = answers.questions(LOCOMO)[0]
    llm_env.default = f"It was {first['answer']}."
    out = tmp_path / "answers.jsonl"
    command = [sys.executable, str(REPO / "bench" / "answers.py"), "--main", str(REPO), "--after", str(REPO),
               "--rows", "none,main,after", "--workdir", str(tmp_path / "work"), "--out", str(out),
               "--cache", str(tmp_path / "cache.jsonl")]
    done = subprocess.run([*command, "--time", "1"], capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["row"] for r in lines) == ["after", "main", "none"]
    assert all(r["qid"] == first["qid"] and r["reply"] == f"It was {first['answer']}." and r["contains"]
               for r in lines)
    # Rows with memory had the block; the question's two turns were removed after each ask.
    assert not any(r["evidence_injected"] for r in lines if r["row"] == "none")
    [commit] = {r["commit"] for r in lines}
    vault = tmp_path / "work" / commit.replace("+", "-edited") / first["conv_id"] / "entries"
    assert not any("origin: chat" in p.read_text() for p in vault.rglob("*.md") if "deleted" not in p.parts)
    # main and after ask the reader the same (one checkout here): the second is the cache's answer.
    asked = len(llm_env.requests)
    assert sum(r["cached"] for r in lines) == 1
    # A run resumes: the answer a cut-short run did not write is given again, from the cache.
    kept = out.read_text().splitlines()
    out.write_text("\n".join(kept[:2]) + "\n")
    again = subprocess.run([*command, "--time", "1"], capture_output=True, text=True, timeout=600)
    redone = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(redone) == 3 and redone[2]["row"] == json.loads(kept[2])["row"] and redone[2]["cached"]
    assert len(llm_env.requests) == asked  # the reader was not asked again
    report = subprocess.run([*command, "--report"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and report.returncode == 0 and "after - main, f1" in report.stdout
