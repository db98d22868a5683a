#!/usr/bin/env python3
"""The same commands from two checkouts, interleaved, against the floor (issue 17: the stack
change, python-frontmatter and GitPython, measured against the code before it).

    python bench/ab.py --baseline /work/main            # add at 10,000 memories, log at 1,000 commits
    python bench/ab.py --baseline /work/main --quick    # 300 memories, 100 commits, 2 runs
    python bench/ab.py --baseline /work/main --read     # search and reindex --full (issue 15's budget)

Each round runs, in this order and each in a fresh process: the floor (bench/perf.py's: imports,
the model, one query embedded), `add` of one memory with the baseline's code, `add` with this
checkout's, `log --json` of the whole history with each; both checkouts write to the same vault
(the format is the same). Wall time and CPU time (user + system of the child and its git
processes, from wait4) are reported as medians with min-max, and the load average per round.
Writes bench/out/ab.json (--read: bench/out/ab-read.json).

--read measures perf.py's read-path targets instead, each checkout on a vault it built itself
(the index formats may differ): the floor, a cold `search` with each (the two in alternating
order, a different question each round), raw fastembed over the vault's texts and `reindex
--full` with each, on perf.py's synthetic vault of facts, notes and decisions and on a vault of
as many chat turns (the same sentences as exchanges of four turns, through `import jsonl`: what
turn context reads).
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
from perf import FLOOR, RAW_EMBED, build_vault, child_env, memvault_exe, run  # noqa: E402

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
    ap.add_argument("--read", action="store_true", help="search and reindex --full instead of add and log")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.read:
        return read_path(args)
    args.out = args.out or HERE / "out" / "ab.json"
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


def turn_vault(mv, env, root: Path, n: int) -> Path:
    """A vault of n chat turns: synth's sentences as exchanges of four turns a minute apart, one
    exchange a day, in six conversations, through `import jsonl`. Returns the texts' file."""
    import shutil
    import uuid
    from datetime import timedelta

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "memvault.toml").write_text("max_entries = 1000000\n", encoding="utf-8")
    lines = []
    for i, record in enumerate(synth.memories(n)):
        exchange, turn = divmod(i, 4)
        when = synth.END - synth.SPAN + timedelta(days=exchange % 700, minutes=turn + 10 * (exchange // 700))
        lines.append({"id": str(uuid.UUID(int=i + 1)), "role": ("user", "assistant")[turn % 2],
                      "conversation_id": f"chat-{exchange % 6}", "created_at": when.isoformat(),
                      "text": record["text"]})
    jsonl = root.parent / f"{root.name}.jsonl"
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    run([*mv, "-q", "--vault", str(root), "import", "jsonl", str(jsonl)], env)
    return jsonl


def read_path(args) -> int:
    """--read: cold search and reindex --full of both checkouts, interleaved, against the floor and
    raw fastembed."""
    n, runs = (300, 2) if args.quick else (args.memories, args.runs)
    out = args.out or HERE / "out" / "ab-read.json"
    mv = memvault_exe()
    base_env = child_env(False)
    names = ("baseline", "this")
    envs = {"baseline": {**base_env, "PYTHONPATH": str(args.baseline.resolve())},
            "this": {**base_env, "PYTHONPATH": str(REPO)}}
    args.workdir.mkdir(parents=True, exist_ok=True)
    vaults, texts = {}, {}
    for name in names:  # each checkout builds its own: the same records, its own index format
        root = args.workdir / f"facts-{n}-{name}"
        print(f"building {root.name} ...", flush=True)
        texts["facts"] = build_vault(mv, envs[name], root, n)["jsonl"]
        vaults[("facts", name)] = root
        root = args.workdir / f"turns-{n}-{name}"
        print(f"building {root.name} ...", flush=True)
        texts["turns"] = str(turn_vault(mv, envs[name], root, n))
        vaults[("turns", name)] = root
    samples: dict[str, dict[str, list[float]]] = {}
    loads = []

    def measure(key: str, argv: list[str], env: dict):
        child = run(argv, env)  # exits with the child's stderr if it fails
        row = samples.setdefault(key, {"wall": [], "cpu": []})
        row["wall"].append(child.wall)
        row["cpu"].append(child.cpu)

    for name in names:  # page cache, .pyc files: not measured
        for kind in ("facts", "turns"):
            run([*mv, "-q", "--vault", str(vaults[(kind, name)]), "search", "warm up"], envs[name])
    for r in range(runs):
        loads.append(os.getloadavg()[0])
        order = names if r % 2 == 0 else names[::-1]
        measure("floor", [sys.executable, "-c", FLOOR], envs["this"])
        for kind in ("facts", "turns"):
            conversation, question = synth.QUERIES[r % len(synth.QUERIES)]
            conversation = conversation if kind == "facts" else f"chat-{r % 6}"
            for name in order:
                measure(f"search {kind} {name}", [*mv, "--vault", str(vaults[(kind, name)]), "search",
                                                  "-c", conversation, question], envs[name])
        for kind in ("facts", "turns"):
            child = run([sys.executable, "-c", RAW_EMBED, texts[kind]], envs["this"])
            row = samples.setdefault(f"raw embed {kind}", {"wall": [], "cpu": []})
            row["wall"].append(json.loads(child.stdout)["seconds"])
            row["cpu"].append(child.cpu)
            for name in order:
                measure(f"reindex --full {kind} {name}",
                        [*mv, "-q", "--vault", str(vaults[(kind, name)]), "reindex", "--full"], envs[name])
        print(f"round {r + 1}/{runs}: load {loads[-1]:.1f}", flush=True)
    result = {key: {k: stats(v) for k, v in row.items()} for key, row in samples.items()}
    derived = {}
    floor = result["floor"]
    for kind in ("facts", "turns"):
        raw = n / result[f"raw embed {kind}"]["wall"]["median"]
        for name in names:
            search = result[f"search {kind} {name}"]
            full = n / result[f"reindex --full {kind} {name}"]["wall"]["median"]
            derived[f"{kind} {name}"] = {
                "search_vs_floor": search["wall"]["median"] / floor["wall"]["median"],
                "cpu_search_vs_floor": search["cpu"]["median"] / floor["cpu"]["median"],
                "full_reindex_per_s": full, "raw_embed_per_s": raw, "full_reindex_vs_raw": full / raw,
                # CPU of whole processes (imports and model load in both): steadier than wall under load
                "cpu_full_reindex_vs_raw": result[f"raw embed {kind}"]["cpu"]["median"]
                / result[f"reindex --full {kind} {name}"]["cpu"]["median"]}
    report = {"commit": git_commit(), "baseline": str(args.baseline), "memories": n,
              "load": {"min": min(loads), "max": max(loads)}, "results": result, "derived": derived}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"\n{runs} interleaved rounds, {n:,} memories, load average {min(loads):.1f}-{max(loads):.1f}; this "
          f"checkout {report['commit']}, baseline {args.baseline}")
    for key, row in result.items():
        print(f"  {key:28s} wall {row['wall']['median']:.3f} s [{row['wall']['min']:.3f}-{row['wall']['max']:.3f}]"
              f"  cpu {row['cpu']['median']:.3f} s [{row['cpu']['min']:.3f}-{row['cpu']['max']:.3f}]")
    for key, d in derived.items():
        print(f"  {key:14s} search / floor {d['search_vs_floor']:.2f} x (cpu {d['cpu_search_vs_floor']:.2f} x); "
              f"reindex --full {d['full_reindex_per_s']:.0f}/s vs raw {d['raw_embed_per_s']:.0f}/s = "
              f"{d['full_reindex_vs_raw']:.2f} x (cpu {d['cpu_full_reindex_vs_raw']:.2f} x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
