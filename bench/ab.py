#!/usr/bin/env python3
"""The same commands from two checkouts, interleaved, against the floor (issue 17: the stack
change, python-frontmatter and GitPython, measured against the code before it).

    python bench/ab.py --baseline /work/main            # add at 10,000 memories, log at 1,000 commits
    python bench/ab.py --baseline /work/main --quick    # 300 memories, 100 commits, 2 runs

Each round runs, in this order and each in a fresh process: the floor (bench/perf.py's: imports,
the model, one query embedded), `add` of one memory with the baseline's code, `add` with this
checkout's, `log --json` of the whole history with each; both checkouts write to the same vault
(the format is the same). Wall time and CPU time (user + system of the child and its git
processes, from wait4) are reported as medians with min-max, and the load average per round.
Writes bench/out/ab.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402
from checkout import REPO, git_commit  # noqa: E402
from perf import FLOOR, build_vault, child_env, memvault_exe, run  # noqa: E402

LOG_BUILDER = r"""
import random, sys
import memvault
vault, n = memvault.open_vault(sys.argv[1]), int(sys.argv[2])
rng, ids = random.Random(7), []
for i in range(n):  # one commit each: adds, edits and removals, as memvault makes them
    r = rng.random()
    if ids and r < 0.15:
        vault.remove(ids.pop(rng.randrange(len(ids))))
    elif ids and r < 0.3:
        vault.edit(rng.choice(ids), f"edited memory {i}: the user changed their mind about item {i}")
    else:
        ids += [m.id for m in vault.add(f"memory {i}: the user mentioned topic {rng.randint(0, 500)} on day {i}",
                                         conversation=rng.choice(["global", "work", "home"]))]
"""


def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, metavar="CHECKOUT", help="the checkout to compare with")
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "memvault-ab")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "ab.json")
    args = ap.parse_args(argv)
    memories, commits, runs = (300, 100, 2) if args.quick else (args.memories, args.commits, args.runs)
    mv = memvault_exe()
    base_env = child_env(False)
    envs = {"baseline": {**base_env, "PYTHONPATH": str(args.baseline.resolve())},
            "this": {**base_env, "PYTHONPATH": str(REPO)}}
    args.workdir.mkdir(parents=True, exist_ok=True)
    add_vault, log_vault = args.workdir / f"add-{memories}", args.workdir / f"log-{commits}"
    if not (add_vault / ".git").exists():
        print(f"building a {memories}-memory vault ...", flush=True)
        build_vault(mv, envs["baseline"], add_vault, memories)
    if not (log_vault / ".git").exists():
        print(f"building a vault of {commits} commits ...", flush=True)
        subprocess.run([sys.executable, "-c", LOG_BUILDER, str(log_vault), str(commits)], env=envs["baseline"],
                       check=True)
    samples: dict[str, dict[str, list[float]]] = {}
    loads = []

    def measure(key: str, argv: list[str], env: dict) -> None:
        child = run(argv, env)
        row = samples.setdefault(key, {"wall": [], "cpu": []})
        row["wall"].append(child.wall)
        row["cpu"].append(child.cpu)

    rng = random.Random(3)
    run([*mv, "--help"], envs["this"])  # page cache, .pyc files: not measured
    for r in range(runs):
        loads.append(os.getloadavg()[0])
        measure("floor", [sys.executable, "-c", FLOOR], envs["this"])
        for name in ("baseline", "this"):
            text = f"Dana noted benchmark memory {r} from {name} on {synth.WEEKDAYS[rng.randrange(7)]}."
            measure(f"add {name}", [*mv, "-q", "--vault", str(add_vault), "add", text], envs[name])
        for name in ("baseline", "this"):
            measure(f"log {name}", [*mv, "-q", "--vault", str(log_vault), "log", "--json"], envs[name])
        print(f"round {r + 1}/{runs}: load {loads[-1]:.1f}", flush=True)
    result = {key: {k: stats(v) for k, v in row.items()} for key, row in samples.items()}
    floor = result["floor"]
    for name in ("baseline", "this"):
        add = result[f"add {name}"]
        result[f"add {name}"]["over_floor"] = {"wall": add["wall"]["median"] - floor["wall"]["median"],
                                               "cpu": add["cpu"]["median"] - floor["cpu"]["median"]}
    report = {"commit": git_commit(), "baseline": str(args.baseline), "memories": memories, "commits": commits,
              "load": {"min": min(loads), "max": max(loads)}, "results": result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"\n{runs} interleaved rounds, load average {min(loads):.1f}-{max(loads):.1f}; this checkout "
          f"{report['commit']}, baseline {args.baseline}")
    for key, row in result.items():
        extra = ""
        if "over_floor" in row:
            extra = f"   - floor: {row['over_floor']['wall']:+.3f} s wall, {row['over_floor']['cpu']:+.3f} s cpu"
        print(f"  {key:14s} wall {row['wall']['median']:.3f} s [{row['wall']['min']:.3f}-{row['wall']['max']:.3f}]"
              f"  cpu {row['cpu']['median']:.3f} s [{row['cpu']['min']:.3f}-{row['cpu']['max']:.3f}]{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
