#!/usr/bin/env python3
"""`memvault sync` pulling 1,000 new memories from another machine (issue 17).

Per round: a bare repository, a vault pushed to it, two clones of it on "this machine" (A1, A2),
one on "the other machine" (B). B adds N memories (`add --jsonl`, one commit) and syncs; A1 and
A2 each add one memory of their own (so the sync merges) and then sync:

- A2 through the command (`memvault sync --json --no-push`, a fresh process, the model loaded by
  it): wall and CPU time (user + system, wait4), and the command's own breakdown (commit, fetch,
  integrate = merge + files + index);
- A1 in this process through the library, with the embedder's `embed` timed: how much of the
  sync is embedding the pulled memories.

    python bench/sync.py                # N = 1,000, 3 rounds
    python bench/sync.py --quick        # N = 50, 1 round (smoke)

Writes bench/out/sync.json and prints the figures with the load average.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's memvault
import synth  # noqa: E402
from checkout import git_commit  # noqa: E402
from perf import child_env, memvault_exe, run  # noqa: E402


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def one_round(work: Path, n: int, mv: list[str], env: dict, r: int) -> dict:
    import memvault
    from memvault.store import models

    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    bare, a1, a2, b = work / "remote.git", work / "a1", work / "a2", work / "b"
    git("init", "-q", "--bare", str(bare))
    a1.mkdir()
    (a1 / "memvault.toml").write_text("max_entries = 1000000\n", encoding="utf-8")
    run([*mv, "-q", "--vault", str(a1), "add", "The user keeps bees"], env)  # its first commit has memvault.toml
    git("-C", str(a1), "remote", "add", "origin", str(bare))
    run([*mv, "-q", "--vault", str(a1), "sync"], env)
    run([*mv, "-q", "clone", str(bare), str(a2)], env)
    run([*mv, "-q", "clone", str(bare), str(b)], env)
    jsonl = work / "b.jsonl"
    jsonl.write_text("".join(json.dumps(rec) + "\n" for rec in synth.memories(n, seed=100 + r)), encoding="utf-8")
    run([*mv, "-q", "--vault", str(b), "add", "--allow-duplicate", "--jsonl", str(jsonl)], env)
    run([*mv, "-q", "--vault", str(b), "sync"], env)
    for vault in (a1, a2):
        run([*mv, "-q", "--vault", str(vault), "add", f"Written on {vault.name} before the sync"], env)

    load_before = os.getloadavg()[0]
    child = run([*mv, "-q", "--vault", str(a2), "sync", "--json", "--no-push"], env)  # A1 pulls B's alone
    report = json.loads(child.stdout)
    assert report["integration"] == "merge" and len(report["reindexed"]["added"]) == n, report["reindexed"]

    embedder = models.get_embedder()
    spent = [0.0]
    original = type(embedder).embed

    def timed(self, texts, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, texts, *args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    type(embedder).embed = timed
    try:
        embedder.embed(["warm-up"])  # the model is loaded already, as in a warm process
        spent[0] = 0.0
        start, cpu = time.perf_counter(), time.process_time()
        result = memvault.open_vault(a1).sync()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        type(embedder).embed = original
    assert len(result.reindexed.added) == n, (result.integration, result.reindexed, result.hand_edits)
    return {"command": {"wall_s": child.wall, "cpu_s": child.cpu, "seconds": report["seconds"]},
            "library": {"wall_s": wall, "cpu_s": cpu, "embedding_s": spent[0], "seconds": result.seconds},
            "load": [load_before, os.getloadavg()[0]]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="memories the other machine adds (default 1000)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smoke: 50 memories, 1 round")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "memvault-sync-bench")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "sync.json")
    args = ap.parse_args(argv)
    n, rounds = (50, 1) if args.quick else (args.n, args.rounds)
    os.environ.setdefault("GIT_AUTHOR_NAME", "bench")
    os.environ.setdefault("GIT_AUTHOR_EMAIL", "bench@localhost")
    os.environ.setdefault("GIT_COMMITTER_NAME", "bench")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "bench@localhost")
    mv, env = memvault_exe(), child_env(False)
    rows = [one_round(args.workdir, n, mv, env, r) for r in range(rounds)]
    shutil.rmtree(args.workdir, ignore_errors=True)

    def med(path):
        values = []
        for row in rows:
            value = row
            for key in path:
                value = value[key]
            values.append(value)
        return statistics.median(values)

    out = {"n": n, "rounds": rows, "commit": git_commit()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1), encoding="utf-8")
    loads = [x for row in rows for x in row["load"]]
    print(f"sync pulling {n} new memories from the other machine (a merge), median of {rounds} round(s), "
          f"commit {out['commit']}, load average {min(loads):.1f}-{max(loads):.1f}")
    print(f"  command (fresh process):  wall {med(['command', 'wall_s']):.2f} s, cpu {med(['command', 'cpu_s']):.2f} s; "
          + ", ".join(f"{k} {med(['command', 'seconds', k]):.2f} s" for k in rows[0]["command"]["seconds"]))
    print(f"  library (model loaded):   wall {med(['library', 'wall_s']):.2f} s, cpu {med(['library', 'cpu_s']):.2f} s, "
          f"of which embedding {med(['library', 'embedding_s']):.2f} s; "
          + ", ".join(f"{k} {med(['library', 'seconds', k]):.2f} s" for k in rows[0]["library"]["seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
