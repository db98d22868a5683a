#!/usr/bin/env python3
"""A learned fact against a fact the user added, with a real model (issue 26, case 5).

Each pair of user_fact_pairs.jsonl is a fact the user added (`memvault add`, plain) and a later
message learned from (`add --extract`: extraction, then the "is it still true?" question about the
nearby facts). Label `update`: the message really changes the user's fact (it should be retired, or
proposed for retirement); `compatible`: an unrelated or related-but-compatible message (the user's
fact must stay). Each pair runs in a vault of its own, through the library as the CLI runs it.

Counted per pair, from the files afterwards: the user's fact retired (a tombstone: what learning
did before issue 26), proposed (a live learned fact whose `would_replace` names it: kept or rejected
in `memvault review`), or left alone. Goal: 0 user facts wrongly retired; reported: the share of
true updates applied or proposed, and the false proposals a user would have to reject.

Before issue 26 the same decisions retired the user's fact at once (temperature 0: the same
extraction and the same answers), so each proposal counted here is what was then a retirement. The
model's p("no") about the user's fact is kept per pair: the table at the end shows what another
threshold for a proposal would catch, without running the model again.

Start the local model first:
    ../shared/llm/local-llm.sh start && eval "$(../shared/llm/local-llm.sh env)"
usage: bench/user_fact_pairs.py [--pairs FILE] [--only N ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(HERE.parent))


def run_pair(pair: dict, root: Path) -> dict:
    """`add --extract` of the message after a plain `add` of the user's fact: learn.Learner's plan and
    store, as Memvault.add_extracted runs them, keeping the plan for the model's p(no)."""
    import memvault

    vault = memvault.open_vault(root, enable_summarization=False, llm_timeout=1800, notice=lambda _: None)
    [mine] = vault.add(pair["user_fact"])
    started = time.perf_counter()
    error, facts, p_no = None, [], None
    try:
        learner = vault._learner("add")
        plan = learner.plan(pair["said"], "global")
        with vault.vault.change("add") as change:
            learner.store(change, plan, None)
        facts = list(plan.facts)
        asked = [d.p_no for d in plan.decisions if d.target == mine.id and d.p_no is not None]
        p_no = round(max(asked), 3) if asked else None
    except Exception as exc:  # an LLM failure or garbage: counted, the pair goes on
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    memories = list(vault.vault.iter_memories(roles=("memory", "pending"), include_deleted=True))
    user = next(m for m in memories if m.id == mine.id)
    proposed = any(mine.id in (m.extra.get("would_replace") or []) for m in memories if not m.is_deleted)
    return {**pair, "facts": facts, "retired": user.is_deleted, "proposed": proposed, "p_no": p_no, "error": error,
            "seconds": round(seconds, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default=str(HERE / "user_fact_pairs.jsonl"))
    ap.add_argument("--only", nargs="*", type=int, help="only these pairs (line numbers from 1)")
    ap.add_argument("--json", help="write the per-pair results here")
    args = ap.parse_args()
    if not os.environ.get("MEMVAULT_LLM_BASE_URL"):
        print("set the LLM first: eval \"$(../shared/llm/local-llm.sh env)\"", file=sys.stderr)
        return 2
    import memvault

    pairs = [json.loads(line) for line in open(args.pairs) if line.strip()]
    numbered = [(n, p) for n, p in enumerate(pairs, 1) if not args.only or n in args.only]
    work = Path(tempfile.mkdtemp(prefix="memvault-user-facts-"))
    rows = []
    started = time.perf_counter()
    try:
        for number, pair in numbered:
            row = run_pair(pair, work / f"pair-{number}")
            rows.append(row)
            outcome = "RETIRED" if row["retired"] else "proposed" if row["proposed"] else "kept"
            wrong = (row["label"] == "compatible" and (row["retired"] or row["proposed"])) or \
                    (row["label"] == "update" and not (row["retired"] or row["proposed"]))
            asked = "-" if row["p_no"] is None else f"{row['p_no']:.2f}"
            print(f"{'x' if wrong else ' '} {number:>2} {row['label']:<10} {outcome:<8} p(no) {asked:<4} {row['seconds']:5.1f}s "
                  f"{pair['user_fact']} | {pair['said']} -> {row['facts']}{'  ' + row['error'] if row['error'] else ''}",
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - started
    updates = [r for r in rows if r["label"] == "update"]
    compatible = [r for r in rows if r["label"] == "compatible"]

    def count(items, key):
        return sum(1 for r in items if r[key])

    print(f"memvault at {Path(memvault.__file__).parent.parent}; {len(rows)} pairs ({len(updates)} updates, "
          f"{len(compatible)} compatible); model {os.environ.get('MEMVAULT_LLM_MODEL')}; {total:.0f} s, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"user facts wrongly retired (compatible pairs): {count(compatible, 'retired')} of {len(compatible)}")
    print(f"user facts retired by a true update, at once:  {count(updates, 'retired')} of {len(updates)}")
    print(f"true updates proposed for review:               {count(updates, 'proposed')} of {len(updates)}")
    applied_or_proposed = sum(1 for r in updates if r["retired"] or r["proposed"])
    print(f"true updates applied or proposed:               {applied_or_proposed} of {len(updates)} = "
          f"{applied_or_proposed / max(len(updates), 1):.0%}")
    print(f"false proposals (compatible pairs):             {count(compatible, 'proposed')} of {len(compatible)}")
    print(f"pairs with nothing extracted: {sum(1 for r in rows if not r['facts'])}; "
          f"errors: {sum(1 for r in rows if r['error'])}; the user's fact not asked about (cosine below "
          f"the floor): {sum(1 for r in rows if r['p_no'] is None and r['facts'])}")
    # Before issue 26 the same decisions retired the user's fact at once: a proposal now is a retirement then.
    print(f"before issue 26 (the same decisions applied at once): {count(compatible, 'proposed')} user facts "
          f"wrongly retired of {len(compatible)}, {applied_or_proposed} true updates applied of {len(updates)}")
    print("p(no) threshold for a proposal | true updates proposed | false proposals")
    for threshold in (0.35, 0.4, 0.45, 0.5, 0.52, 0.55):
        hits = sum(1 for r in updates if r["p_no"] is not None and r["p_no"] >= threshold)
        false = sum(1 for r in compatible if r["p_no"] is not None and r["p_no"] >= threshold)
        print(f"  {threshold:<28} | {hits} of {len(updates)} | {false} of {len(compatible)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
