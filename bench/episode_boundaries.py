#!/usr/bin/env python3
"""How well the embedding similarity of consecutive windows of turns finds topic boundaries
(issue 16): the measurement behind `episodes.TOPIC_THRESHOLD` and `episodes.TOPIC_WINDOW`.

Ground truth, with time left out (segmentation by time gap is a separate, exact rule):
- LoCoMo sessions: each conversation's turns in order, a boundary where a session ends. Sessions
  of the same two people often go on with the same topics, so this is the hard case.
- Spliced conversations: stretches of 12-30 turns taken in turn from two different LoCoMo
  conversations, a boundary at each splice: a plain change of topic (and of people).

For each window size and threshold it runs `episodes.topic_cuts` (the product's own function, with
its minimum episode length) and counts a found cut as right when it lies within 2 turns of a true
boundary. Prints precision, recall and F1 per setting, and the similarity distribution at true
boundaries and elsewhere.

usage: bench/episode_boundaries.py [--data DIR] [--windows 2,3,4] [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench" / "locomo"
TOLERANCE = 2  # a cut within this many turns of a true boundary counts as finding it


def load(data: Path):
    conversations = collections.defaultdict(list)
    for line in open(data / "locomo_memories.jsonl", encoding="utf-8"):
        m = json.loads(line)
        conversations[m["conv_id"]].append(m)
    return conversations


def sessions_case(conversations):
    """(texts, true boundary positions) per conversation: a boundary before the first turn of each session."""
    cases = []
    for turns in conversations.values():
        truth = [i for i in range(1, len(turns)) if turns[i]["session"] != turns[i - 1]["session"]]
        cases.append(([t["text"] for t in turns], truth))
    return cases


def spliced_case(conversations, seed: int = 7):
    """Stretches of 12-30 turns from two conversations in turn, a boundary at each splice."""
    rng = random.Random(seed)
    names = sorted(conversations)
    cases = []
    for a, b in zip(names, names[1:] + names[:1]):
        texts, truth, pos = [], [], {a: 0, b: 0}
        source = a
        while all(pos[n] < len(conversations[n]) - 30 for n in (a, b)) and len(texts) < 600:
            n = rng.randint(12, 30)
            if texts:
                truth.append(len(texts))
            texts += [t["text"] for t in conversations[source][pos[source]:pos[source] + n]]
            pos[source] += n
            source = b if source == a else a
        cases.append((texts, truth))
    return cases


def score(found: list[int], truth: list[int]) -> tuple[int, int, int]:
    """(true positives, found, true) with each true boundary matched at most once."""
    left = set(truth)
    hits = 0
    for cut in found:
        near = [t for t in left if abs(t - cut) <= TOLERANCE]
        if near:
            left.discard(min(near, key=lambda t: abs(t - cut)))
            hits += 1
    return hits, len(found), len(truth)


def main() -> int:
    import numpy as np

    from memvault.learning import episodes
    from memvault.store.models import get_embedder

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--windows", default="2,3,4")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    conversations = load(args.data)
    embedder = get_embedder()
    started = time.perf_counter()
    cache: dict[str, np.ndarray] = {}
    all_texts = sorted({t["text"] for turns in conversations.values() for t in turns})
    for i in range(0, len(all_texts), 256):
        batch = all_texts[i:i + 256]
        for text, vector in zip(batch, embedder.embed(batch)):
            cache[text] = np.asarray(vector, dtype=np.float32)
    print(f"embedded {len(all_texts)} turns in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    cases = {"sessions": sessions_case(conversations), "spliced": spliced_case(conversations)}
    report: dict = {"tolerance": TOLERANCE, "min_turns": episodes.MIN_EPISODE_TURNS, "results": []}
    for window in [int(w) for w in args.windows.split(",")]:
        for name, items in cases.items():
            at_truth, elsewhere = [], []
            for texts, truth in items:
                sims = episodes.window_similarities([cache[t] for t in texts], window)
                near = {p for t in truth for p in range(t - TOLERANCE, t + TOLERANCE + 1)}
                for position, sim in sims.items():
                    (at_truth if position in truth else elsewhere if position not in near else []).append(sim)
            quantiles = lambda xs: [round(float(np.quantile(xs, q)), 3) for q in (0.1, 0.25, 0.5, 0.75)]
            report.setdefault("distributions", []).append(
                {"case": name, "window": window, "at_boundary": quantiles(at_truth), "elsewhere": quantiles(elsewhere)})
            for threshold in [round(x, 2) for x in np.arange(0.20, 0.71, 0.05)]:
                tp = n_found = n_true = 0
                for texts, truth in items:
                    cuts = episodes.topic_cuts([cache[t] for t in texts], threshold, window)
                    a, b, c = score(cuts, truth)
                    tp, n_found, n_true = tp + a, n_found + b, n_true + c
                precision = tp / n_found if n_found else 0.0
                recall = tp / n_true if n_true else 0.0
                f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
                report["results"].append({"case": name, "window": window, "threshold": threshold, "found": n_found,
                                          "true": n_true, "precision": precision, "recall": recall, "f1": f1})
    print("similarity quantiles (10/25/50/75%): at true boundaries | elsewhere (more than 2 turns away)")
    for d in report["distributions"]:
        print(f"  {d['case']:<9} window {d['window']}: {d['at_boundary']} | {d['elsewhere']}")
    print(f"\n{'case':<9} {'window':>6} {'threshold':>9} {'found':>6} {'true':>5} {'precision':>9} {'recall':>6} {'F1':>5}")
    for r in report["results"]:
        print(f"{r['case']:<9} {r['window']:>6} {r['threshold']:>9.2f} {r['found']:>6} {r['true']:>5} "
              f"{r['precision']:>9.3f} {r['recall']:>6.3f} {r['f1']:>5.3f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
