#!/usr/bin/env python3
"""Memory upkeep quality with a real model.

Feeds ../shared/bench/memory/scenarios_dev.jsonl through `memvault add --extract -c <id>`
(one vault for all scenarios, turns in order), scores the vault with the shared
score_scenarios.py, and reports the pass rate and wall time per turn.

Start the local model first:
    ../shared/llm/local-llm.sh start && eval "$(../shared/llm/local-llm.sh env)"
usage: bench/memory_quality.py [--scenarios FILE] [--vault DIR] [--only ID ...] [--json OUT] [--summaries]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checkout import with_this_checkout

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "bench" / "memory"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=str(SHARED / "scenarios_dev.jsonl"))
    ap.add_argument("--scorer", default=str(SHARED / "score_scenarios.py"))
    ap.add_argument("--vault", help="vault folder (default: a fresh temp folder)")
    ap.add_argument("--only", nargs="*", help="run only these scenario ids")
    ap.add_argument("--json", help="write the per-scenario results here")
    ap.add_argument("--summaries", action="store_true",
                    help="keep the rolling summary on (the default setting; off here by default because the "
                         "scorer does not read it and it costs one model call per turn that learned something)")
    args = ap.parse_args()
    if not os.environ.get("MEMVAULT_LLM_BASE_URL"):
        print("set the LLM first: eval \"$(../shared/llm/local-llm.sh env)\"", file=sys.stderr)
        return 2
    scenarios = [json.loads(line) for line in open(args.scenarios) if line.strip()]
    if args.only:
        scenarios = [s for s in scenarios if s["id"] in args.only]
    vault = Path(args.vault or tempfile.mkdtemp(prefix="memvault-quality-"))
    if args.vault and vault.exists():
        shutil.rmtree(vault)
    env = with_this_checkout({**os.environ, "MEMVAULT_DIR": str(vault),
                              "MEMVAULT_ENABLE_SUMMARIZATION": str(args.summaries).lower()})
    exe = shutil.which("memvault") or "memvault"
    times, failures = [], []
    started = time.perf_counter()
    for scenario in scenarios:
        for turn in scenario["turns"]:
            t0 = time.perf_counter()
            done = subprocess.run([exe, "add", "--extract", "-c", scenario["id"], turn], env=env,
                                  capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if done.returncode != 0:
                failures.append((scenario["id"], done.stderr.strip()))
            print(f"  {scenario['id']:<22} {times[-1]:5.1f}s  {done.stdout.strip()[:100]}", file=sys.stderr)
    total = time.perf_counter() - started
    out = Path(args.json) if args.json else vault / "scores.json"
    # The scorer only reads the files; scenarios without turns run are scored too, so pass --only's file.
    scenario_file = args.scenarios
    if args.only:
        scenario_file = str(vault / "scenarios.jsonl")
        Path(scenario_file).write_text("".join(json.dumps(s) + "\n" for s in scenarios))
    score = subprocess.run([sys.executable, args.scorer, "--vault", str(vault), "--scenarios", scenario_file,
                            "--json", str(out)], capture_output=True, text=True)
    print(score.stdout, end="")
    rows = json.loads(out.read_text())
    passed = sum(r["pass"] for r in rows)
    print(f"pass rate {passed}/{len(rows)} = {passed / max(len(rows), 1):.0%}; "
          f"{len(times)} turns, wall time per turn median {statistics.median(times):.1f}s "
          f"(min {min(times):.1f}, max {max(times):.1f}); total {total:.0f}s; command failures {len(failures)}")
    for row in rows:
        if not row["pass"]:
            print(f"  {row['id']} live facts: {row['facts']}")
    for scenario_id, message in failures:
        print(f"  failed command in {scenario_id}: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
