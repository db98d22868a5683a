#!/usr/bin/env python3
"""Warm search in-process (issue 45): the read path's own time on a vault of N synthetic memories
(bench/synth.py, as bench/serve.py builds it), without HTTP or a server, split by whether the
question has a word that can name a time (when.TIME_WORD) and whether the question is in parts.

Each question of synth.questions(--questions) is searched --rounds times through one warm
`Memvault.search` (model and table loaded; the first round not counted); per search the wall and
the process's CPU time (LanceDB's own threads included). Run it once per checkout on the same vault (PYTHONPATH picks the code):

    PYTHONPATH=/work/main python3 bench/warm_search.py --vault /tmp/v10k --build   # once: builds the vault
    PYTHONPATH=/work/main python3 bench/warm_search.py --vault /tmp/v10k --label main
    PYTHONPATH=$PWD       python3 bench/warm_search.py --vault /tmp/v10k --label branch

Prints JSON: p50 / p90 of wall and CPU ms per group, the load average before and after.

--cold N --baseline DIR: instead, N rounds of cold `python -m memvault search` processes, this
checkout's and DIR's alternating (which goes first alternates too), each a plain question and one
naming a month; CPU (user + system, wait4) and wall medians with min-max:

    python3 bench/warm_search.py --vault /tmp/v10k --cold 8 --baseline /work/main [--baseline-vault /tmp/v10k-main]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(1, str(HERE))  # synth, perf; memvault comes from PYTHONPATH (the checkout measured)


def build(vault: Path, n: int) -> None:
    from perf import build_vault, child_env

    env = child_env(False)
    built = build_vault([sys.executable, "-m", "memvault"], env, vault, n)
    print(f"built {n:,} memories in {built['seconds']:.0f} s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vault", type=Path, required=True)
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--build", action="store_true", help="build the vault anew (add --jsonl of synth.memories)")
    ap.add_argument("--questions", type=int, default=190)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--label", default="")
    ap.add_argument("--cold", type=int, default=0, help="rounds of cold search processes (with --baseline)")
    ap.add_argument("--baseline", type=Path, help="the other checkout for --cold")
    ap.add_argument("--baseline-vault", type=Path,
                    help="with --cold: the baseline's own copy of the vault (default --vault): a checkout that "
                         "adds index columns on a write keeps its table, and the other its own")
    args = ap.parse_args(argv)
    for key in [k for k in os.environ if k.startswith("MEMVAULT_")]:
        del os.environ[key]
    if args.build:
        build(args.vault, args.memories)
        return 0
    if args.cold:
        return cold(args)
    import synth

    import memvault
    from memvault.reading import when

    try:
        from memvault.reading.parts import split
    except ImportError:  # a checkout from before issue 45
        def split(text):
            return []
    vault = memvault.open_vault(args.vault)
    vault.warm()
    asked = synth.questions(args.questions)
    load_before = os.getloadavg()
    groups: dict[str, dict[str, list[float]]] = {}
    for round_no in range(args.rounds + 1):
        for conversation, question in asked:
            wall, cpu = time.perf_counter(), time.process_time()
            vault.search(question, **({"conversation": conversation} if conversation else {}))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if round_no == 0:
                continue  # the first pass warms caches (dateparser's data, the table's pages)
            kinds = ["all", "time word" if when.TIME_WORD.search(question) else "no time word"]
            if split(question):
                kinds.append("in parts")
            for kind in kinds:
                group = groups.setdefault(kind, {"wall": [], "cpu": []})
                group["wall"].append(wall * 1000)
                group["cpu"].append(cpu * 1000)

    def pct(values: list[float], q: float) -> float:
        values = sorted(values)
        return round(values[min(len(values) - 1, int(q * len(values)))], 1)

    report = {"label": args.label, "memvault": memvault.__file__, "memories": args.memories,
              "questions": len(asked), "rounds": args.rounds, "load": [load_before, os.getloadavg()],
              "groups": {kind: {"n": len(g["wall"]), "wall_p50": round(statistics.median(g["wall"]), 1),
                                "wall_p90": pct(g["wall"], 0.9), "cpu_p50": round(statistics.median(g["cpu"]), 1),
                                "cpu_p90": pct(g["cpu"], 0.9)} for kind, g in groups.items()}}
    print(json.dumps(report, indent=1))
    return 0


def cold(args) -> int:
    from perf import child_env, run

    from checkout import REPO

    trees = {"this": REPO, "baseline": args.baseline.resolve()}
    vaults = {"this": args.vault, "baseline": args.baseline_vault or args.vault}
    questions = {"plain": "where did Dana go hiking with Sam", "month": "the trip to Lisbon in March"}
    samples = {(tree, kind): {"cpu": [], "wall": []} for tree in trees for kind in questions}
    loads = []
    for round_no in range(args.cold + 1):
        order = list(trees) if round_no % 2 == 0 else list(trees)[::-1]
        loads.append(os.getloadavg()[0])
        for tree in order:
            env = {**child_env(False), "PYTHONPATH": str(trees[tree])}
            for kind, question in questions.items():
                child = run([sys.executable, "-m", "memvault", "-q", "--vault", str(vaults[tree]), "search",
                             f"{question} ({round_no})"], env)
                if round_no:  # the first round warms the page cache and the .pyc files
                    samples[(tree, kind)]["cpu"].append(child.cpu)
                    samples[(tree, kind)]["wall"].append(child.wall)

    def spread(values):
        return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}

    print(json.dumps({"rounds": args.cold, "load": [min(loads), max(loads)],
                      "trees": {k: str(v) for k, v in trees.items()}, "vaults": {k: str(v) for k, v in vaults.items()},
                      "results": {f"{tree} {kind}": {"cpu_s": spread(v["cpu"]), "wall_s": spread(v["wall"])}
                                  for (tree, kind), v in samples.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
