#!/usr/bin/env python3
"""Learning only from statements: wrong facts created and true facts replaced, with a real model.

Each message of a set goes through the learning plan that
`chat` and `add --extract` run (`learn.plan`: extraction, then reconciliation against the nearest
facts), against a vault that already holds twelve true facts about the user. Nothing is written,
so every message meets the same vault. The sets (--set):
  tuning   bench/learning_gate.jsonl (issue 11, written with the rules)
  heldout  learning_gate_heldout.jsonl (issue 11, written blind by another engineer)
  exact    learning_gate_exact.jsonl (issue 26: reply instructions, tag questions, hypotheticals
           and wishes, reported speech, statements inside requests, statements pointing back)

Reported per kind of message (question, request, greeting, instruction, tag_question,
hypothetical, reported: nothing to learn; statement, mixed, statement_as_question,
statement_in_request, referent: something to learn):
  created   messages with nothing to learn that produced a fact (and how many facts)
  replaced  true facts a message would have deleted or rewritten (a fact the message really
            changes, `may_replace`, does not count)
  learned   messages with something to learn whose facts name it (a keyword)
  calls     LLM calls per message

--referents picks how a statement keeps the name it points back to ("Tell me about Lisbon. I was
born there."): `resolve` (the name in place of "there": what ships), `context` (the sentence that
names it kept before the statement), `none`.

--extract-only stops after extraction (one call per message that reaches the model): created and
learned are measured, replaced is not (a cheaper baseline when the shared model is slow).

--rules-only runs no model and opens no vault: per kind, the messages whose statement part
(statements.statement_part, what extraction would be sent) is not empty, and for the messages with
something to learn, those whose statement part still holds a keyword; and the rules' cost per
message. A message with nothing to learn that reaches the model is where a wrong fact can start.

--gate picks what runs before extraction: `product` (the rules of memvault/learning/statements.py; what
ships), `model` (the rules, then the model's own yes/no "does this tell anything lasting?" with
its token probabilities, stopping at p(no) >= 0.5: measured, not shipped), `none` (extraction on
the whole message, as before issue #11: the baseline).

Start the local model first:
    ../shared/llm/local-llm.sh start && eval "$(../shared/llm/local-llm.sh env)"
usage: bench/learning_gate.py [--gate product|model|none] [--set tuning|heldout|exact]
                              [--referents resolve|context|none] [--extract-only] [--json OUT]
       bench/learning_gate.py --rules-only [--set ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from checkout import REPO, git_commit

sys.path.insert(0, str(REPO))

import memvault  # noqa: E402
from memvault.learning import extraction, learn, prompts, statements
from memvault.store import llm  # noqa: E402
from memvault.errors import MemvaultError  # noqa: E402
from memvault.store.llm import LLMConfig  # noqa: E402

HERE = Path(__file__).resolve().parent
# What states nothing about the user (issue 11's kinds, then issue 26's: reply instructions, tag
# questions, hypotheticals and wishes, reported or quoted speech) and what does.
NOTHING_TO_LEARN = ("question", "request", "greeting", "instruction", "tag_question", "hypothetical", "reported")
LEARNABLE = ("statement", "mixed", "statement_as_question", "statement_in_request", "referent")
SETS = {"tuning": "learning_gate.jsonl", "heldout": "learning_gate_heldout.jsonl", "exact": "learning_gate_exact.jsonl"}
KNOWN = [
    "The user works as a nurse at the city hospital", "The user lives in Porto", "The user's wife is named Anne",
    "The user is allergic to peanuts", "The user's daughter Mara is 7 years old", "The user drives a Volvo",
    "The user plays tennis on Sundays", "The user is vegetarian", "The user's birthday is on 3 March",
    "The user works night shifts", "The user has a dog named Rex", "The user speaks Portuguese and English",
]


def extract_without_gate(cfg: LLMConfig, user_text: str) -> list[str]:
    """Extraction as it was before issue #11: the whole message, only small talk skipped."""
    if extraction.is_small_talk(user_text):
        return []
    answer = llm.structured(cfg, prompts.extraction_messages(user_text), extraction.ExtractedFacts)
    facts = [extraction.third_person(" ".join(f.split())) for f in (answer.facts if answer else [])]
    return [f for f in facts if extraction._grounded(f, user_text)][: extraction.MAX_FACTS]


class TellsSomething(extraction.StillTrue):
    """The gate's answer: yes or no."""


TELLS_SOMETHING = (
    'The user wrote: "{text}"\n'
    "Does this tell something lasting about the user or their life (who they are, people in their "
    "life, likes, dislikes, plans, work, places, things they own or did)? Reactions such as "
    '"that was helpful", moods of the moment and small talk tell nothing. '
    'Answer with JSON: {{"answer": "yes"}} or {{"answer": "no"}}.'
)
P_NOTHING = []  # every p(no) the gate gave, for the report


def extract_after_model_gate(cfg: LLMConfig, user_text: str) -> list[str]:
    """The rules, then the model's yes/no on what they kept; extraction only on a yes."""
    from memvault.learning.statements import statement_part

    statement = statement_part(user_text)
    if statement and not extraction.is_small_talk(statement):
        messages = [{"role": "user", "content": TELLS_SOMETHING.format(text=" ".join(statement.split()))}]
        answer = llm.structured_probs(cfg, messages, TellsSomething, "answer")
        if answer is not None:
            P_NOTHING.append(round(answer[1]["no"], 2))
            if answer[1]["no"] >= 0.5:
                return []
    return PRODUCT_EXTRACT(cfg, user_text)


PRODUCT_EXTRACT = extraction.extract_facts


def rules_only(rows: list[dict], source: Path) -> int:
    """What the statement rules alone send to the model, per kind, and what they cost."""
    by_kind: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        part = statements.statement_part(row["text"])
        reaches = bool(part) and not extraction.is_small_talk(part)
        stats = by_kind[row["kind"]]
        stats["messages"] += 1
        stats["reaches"] += reaches
        kept = reaches and any(k in part.lower() for k in row.get("keywords", []))
        stats["keeps"] += kept
        if reaches and row["kind"] in NOTHING_TO_LEARN:
            print(f"  {row['kind']:<22} REACHES {row['text']!r} -> {part!r}", file=sys.stderr)
        elif row["kind"] in LEARNABLE and not kept:
            print(f"  {row['kind']:<22} LOST    {row['text']!r} -> {part!r}", file=sys.stderr)
    texts = [row["text"] for row in rows]
    rounds = 20
    for text in texts:  # once first: the patterns compiled, the modules warm
        extraction.is_small_talk(statements.statement_part(text))
    started = time.perf_counter()
    for _ in range(rounds):
        for text in texts:
            extraction.is_small_talk(statements.statement_part(text))
    per_message = (time.perf_counter() - started) / (rounds * len(texts))
    print(f"statement rules only (no model), {source.name} ({len(rows)} messages), commit {git_commit()}, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'kind':<22} {'msgs':>4} {'reach the model':>15} {'keyword kept':>12}")
    quiet = [k for k in NOTHING_TO_LEARN if k in by_kind]
    for kind in (*quiet, *(k for k in LEARNABLE if k in by_kind)):
        s = by_kind[kind]
        kept = "" if kind in NOTHING_TO_LEARN else f"{s['keeps']}/{s['messages']}"
        print(f"{kind:<22} {s['messages']:>4} {s['reaches']:>15} {kept:>12}")
    reached = sum(by_kind[k]["reaches"] for k in quiet)
    quiet_messages = sum(by_kind[k]["messages"] for k in quiet)
    learnable = [k for k in LEARNABLE if k in by_kind]
    print(f"nothing to learn, reaching the model: {reached} of {quiet_messages}; something to learn, statement "
          f"kept with its keyword: {sum(by_kind[k]['keeps'] for k in learnable)} of "
          f"{sum(by_kind[k]['messages'] for k in learnable)}; rules {per_message * 1e6:.0f} us per message")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gate", choices=("product", "model", "none"), default="product")
    ap.add_argument("--heldout", action="store_true", help="the held-out set (same as --set heldout)")
    ap.add_argument("--set", choices=SETS, default="tuning", help="which set of messages (default: tuning)")
    ap.add_argument("--referents", choices=("resolve", "context", "none"), default="resolve",
                    help="how a statement keeps what it points back to (default: resolve, what ships)")
    ap.add_argument("--extract-only", action="store_true", help="no reconciliation: replaced is not measured")
    ap.add_argument("--messages", help="a JSON-lines file of messages (default: the tuning or held-out set)")
    ap.add_argument("--json", help="write every message's outcome here")
    ap.add_argument("--rules-only", action="store_true", help="no model: what the statement rules send to it")
    args = ap.parse_args()
    if args.rules_only:
        source = Path(args.messages or HERE / SETS["heldout" if args.heldout else args.set])
        statements.REFERENTS = args.referents
        return rules_only([json.loads(line) for line in source.read_text().splitlines() if line.strip()], source)
    if not os.environ.get("MEMVAULT_LLM_BASE_URL"):
        print('set the LLM first: eval "$(../shared/llm/local-llm.sh env)"', file=sys.stderr)
        return 2
    source = Path(args.messages or HERE / SETS["heldout" if args.heldout else args.set])
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]

    statements.REFERENTS = args.referents
    if args.extract_only:
        extraction.reconcile = lambda *a, **k: []  # learn.plan looks it up at each call
    if args.gate == "none":
        extraction.extract_facts = extract_without_gate  # learn.plan looks it up at each call
    elif args.gate == "model":
        extraction.extract_facts = extract_after_model_gate
    calls = [0]
    completion = llm._completion

    def counted(*a, **k):
        calls[0] += 1
        return completion(*a, **k)

    llm._completion = counted

    vault_dir = Path(tempfile.mkdtemp(prefix="memvault-gate-"))
    # The shared server has one slot: a request queued behind others' is not a failure (120 s, the default,
    # turned one message into an error at load 20). MEMVAULT_LLM_TIMEOUT still wins when set.
    timeout = {} if os.environ.get("MEMVAULT_LLM_TIMEOUT") else {"llm_timeout": 1800}
    vault = memvault.open_vault(vault_dir, enable_summarization=False, **timeout)
    stored = vault.add(KNOWN, conversation="bench")
    text_of = {m.id: m.text for m in stored}
    cfg = LLMConfig.from_settings(vault.settings)
    vault.warm()

    by_kind: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    outcomes, seconds, errors = [], [], []
    for row in rows:
        calls[0] = 0
        started = time.perf_counter()
        try:
            plan = learn.plan(vault.vault, cfg, row["text"], "bench", summarize=False)
        except MemvaultError as exc:  # an endpoint that timed out: say so, count it, go on
            print(f"  {row['kind']:<22} ERROR {exc}", file=sys.stderr)
            errors.append({**row, "error": str(exc)})
            continue
        seconds.append(time.perf_counter() - started)
        changed = [text_of[d.target] for d in plan.decisions if d.event in ("DELETE", "UPDATE") and d.target in text_of]
        wrongly_replaced = [t for t in changed if t not in row.get("may_replace", [])]
        named = any(k in f.lower() for f in plan.facts for k in row.get("keywords", []))
        stats = by_kind[row["kind"]]
        stats["messages"] += 1
        stats["calls"] += calls[0]
        stats["replaced"] += len(wrongly_replaced)
        if row["kind"] in NOTHING_TO_LEARN:
            stats["created_messages"] += bool(plan.facts)
            stats["created_facts"] += len(plan.facts)
        else:
            stats["learned"] += named
        outcomes.append({**row, "facts": plan.facts, "replaced": changed, "wrongly_replaced": wrongly_replaced,
                         "calls": calls[0], "seconds": round(seconds[-1], 2)})
        flag = ("REPLACED " if wrongly_replaced else "") + (
            "CREATED " if row["kind"] in NOTHING_TO_LEARN and plan.facts else "") + (
            "MISSED " if row["kind"] not in NOTHING_TO_LEARN and not named else "")
        print(f"  {row['kind']:<22} {seconds[-1]:4.1f}s {calls[0]} calls {flag:<9} {row['text'][:60]!r} -> {plan.facts}",
              file=sys.stderr)

    print(f"learning gate: --gate {args.gate} --referents {args.referents}"
          f"{' --extract-only (replaced not measured)' if args.extract_only else ''}, {source.name} ({len(rows)} messages), model "
          f"{os.environ.get('MEMVAULT_LLM_MODEL', '?')}, commit {git_commit()}, load {os.getloadavg()[0]:.1f}")
    print(f"{'kind':<22} {'msgs':>4} {'created (facts)':>15} {'replaced':>8} {'learned':>8} {'calls/msg':>9}")
    total = defaultdict(int)
    for kind in (*NOTHING_TO_LEARN, *LEARNABLE):
        s = by_kind.get(kind)
        if not s:
            continue
        for key, value in s.items():
            total[key] += value
        learnable = kind not in NOTHING_TO_LEARN
        created = "" if learnable else f"{s['created_messages']} ({s['created_facts']})"
        learned = f"{s['learned']}/{s['messages']}" if learnable else ""
        print(f"{kind:<22} {s['messages']:>4} {created:>15} {s['replaced']:>8} {learned:>8} {s['calls'] / s['messages']:>9.2f}")
    quiet = sum(by_kind[k]["messages"] for k in NOTHING_TO_LEARN)
    learnable = total["messages"] - quiet
    print(f"{'all':<22} {total['messages']:>4} {total['created_messages']} ({total['created_facts']}) "
          f"of {quiet} = {total['created_messages'] / max(quiet, 1):.1%}; replaced {total['replaced']}; "
          f"learned {total['learned']}/{learnable} = {total['learned'] / max(learnable, 1):.0%}; "
          f"calls/msg {total['calls'] / total['messages']:.2f}; "
          f"seconds/msg median {statistics.median(seconds):.2f}; LLM errors {len(errors)}")
    if P_NOTHING:
        print(f"the model gate's p(no): min {min(P_NOTHING)}, median {statistics.median(P_NOTHING)}, "
              f"max {max(P_NOTHING)} over {len(P_NOTHING)} statements")
    if args.json:
        Path(args.json).write_text(json.dumps(outcomes + errors, indent=1))
    vault.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
