#!/usr/bin/env python3
"""The reconciliation question alone, on labelled (memory, new fact) pairs, with a real model.

memvault asks one question per pair: "is the memory still true?" (memvault/learning/prompts.py
STILL_TRUE), replaces the memory when the model's probability of "no" is at least
extraction.MIN_UNTRUE, and only asks about memories with cosine >= learn.SIMILARITY_FLOOR.
This prints, for the pairs of reconcile_pairs.jsonl, how often that decision is right, and the
errors for other thresholds and floors, so those two constants can be re-checked for another
model. Labels: "contradicts" (the memory should be replaced); "same", "adds", "unrelated"
(it should stay). Sets: "dev" (written alongside the first prompts; some paraphrase the memory
scenarios), "held-out" (written afterwards, never used to pick a prompt), "held-out-raw" (the
new side is the user's own words rather than an extracted fact; cosine is not meaningful there,
so the floor is not applied to it).

Start the local model first:
    ../shared/llm/local-llm.sh start && eval "$(../shared/llm/local-llm.sh env)"
usage: bench/reconcile_pairs.py [--pairs FILE] [--sets dev held-out ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from memvault.learning import prompts  # noqa: E402
from memvault.learning.extraction import MIN_UNTRUE, StillTrue  # noqa: E402
from memvault.learning.learn import SIMILARITY_FLOOR  # noqa: E402
from memvault.store.llm import LLMConfig, structured_probs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default=str(HERE / "reconcile_pairs.jsonl"))
    ap.add_argument("--sets", nargs="*", help="only these sets (default: all)")
    ap.add_argument("--json", help="write the per-pair results here")
    args = ap.parse_args()
    if not os.environ.get("MEMVAULT_LLM_BASE_URL"):
        print("set the LLM first: eval \"$(../shared/llm/local-llm.sh env)\"", file=sys.stderr)
        return 2
    from memvault.store.models import get_embedder

    cfg = LLMConfig(os.environ.get("MEMVAULT_LLM_MODEL", "openai/qwen2.5-coder-1.5b"),
                    os.environ["MEMVAULT_LLM_BASE_URL"], api_key=os.environ.get("MEMVAULT_LLM_API_KEY"),
                    timeout=600)
    embedder = get_embedder()
    pairs = [json.loads(line) for line in open(args.pairs) if line.strip()]
    if args.sets:
        pairs = [p for p in pairs if p["set"] in args.sets]
    started = time.perf_counter()
    for p in pairs:
        answer = structured_probs(cfg, prompts.still_true_messages(p["old"], p["new"]), StillTrue, "answer")
        p["p_no"] = answer[1]["no"] if answer else None
        a, b = embedder.embed([p["old"], p["new"]])
        p["cosine"] = float(a @ b)
        wrong = (p["p_no"] is not None and p["p_no"] >= MIN_UNTRUE) != (p["label"] == "contradicts")
        print(f"{'WRONG' if wrong else 'ok   '} p(no) {p['p_no']:.3f} cos {p['cosine']:.2f} {p['label']:<11} "
              f"{p['old']} | {p['new']}", file=sys.stderr)
    per_call = (time.perf_counter() - started) / max(len(pairs), 1)

    def errors(rows, threshold, floor):
        missed = false = 0
        for p in rows:
            asked = p["set"] == "held-out-raw" or p["cosine"] >= floor
            replaced = asked and p["p_no"] is not None and p["p_no"] >= threshold
            if p["label"] == "contradicts" and not replaced:
                missed += 1
            elif p["label"] != "contradicts" and replaced:
                false += 1
        return missed, false

    sets = sorted({p["set"] for p in pairs})
    n_contra = {s: sum(p["label"] == "contradicts" for p in pairs if p["set"] == s) for s in sets}
    print(f"{len(pairs)} pairs, {per_call:.1f}s per question; MIN_UNTRUE {MIN_UNTRUE}, "
          f"SIMILARITY_FLOOR {SIMILARITY_FLOOR}")
    print("errors = contradictions missed + true memories replaced")
    header = "threshold floor | " + " | ".join(f"{s} ({sum(p['set'] == s for p in pairs)}, {n_contra[s]} contra.)"
                                              for s in sets)
    print(header)
    for floor in (0.0, SIMILARITY_FLOOR):
        for threshold in (0.45, 0.5, MIN_UNTRUE, 0.55, 0.6):
            cells = []
            for s in sets:
                missed, false = errors([p for p in pairs if p["set"] == s], threshold, floor)
                cells.append(f"{missed} missed + {false} false = {missed + false}")
            mark = " <- memvault" if (threshold, floor) == (MIN_UNTRUE, SIMILARITY_FLOOR) else ""
            print(f"{threshold:<9} {floor:<5} | " + " | ".join(cells) + mark)
    if args.json:
        Path(args.json).write_text(json.dumps(pairs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
