#!/usr/bin/env python3
"""The product's own cost of the LLM commands, without model time.

Serves instant scripted answers from the tests' OpenAI-compatible fake server
(real HTTP, real litellm) and times each command in fresh processes:
`add --extract`, `chat` (one-shot, streaming), `reconcile`, `summarize`,
`summarize --rebuild`. Prints median/min/max of N runs.

usage: bench/llm_overhead.py [--runs 5] [--json OUT]
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from checkout import with_this_checkout  # noqa: E402
from fake_llm import FakeLLM  # noqa: E402  (the same server the tests use)

FACTS = json.dumps({"facts": ["The user's wife is named Anne"]})
# One answer that every structured prompt accepts; plain-text calls simply echo it.
DEFAULT = json.dumps({"facts": ["The user's wife is named Anne"], "memory": [], "answer": "yes"})


def timed(argv, env) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])} failed: {done.stderr.strip()}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    server = FakeLLM()
    server.default = DEFAULT
    exe = shutil.which("memvault") or "memvault"
    vault = Path(tempfile.mkdtemp(prefix="memvault-llm-overhead-"))
    env = with_this_checkout({**os.environ, "MEMVAULT_DIR": str(vault), "MEMVAULT_LLM_BASE_URL": server.base_url,
           "MEMVAULT_LLM_MODEL": "openai/bench", "MEMVAULT_RERANKER_MODEL": str(vault / "no-reranker")})
    lines = "\n".join(json.dumps({"text": f"The user remembers fact number {i} about the garden"})
                      for i in range(200))
    subprocess.run([exe, "add", "--allow-duplicate", "--jsonl", "-"], input=lines, env=env, capture_output=True, text=True, check=True)
    commands = {
        "add --extract": [exe, "add", "--extract", "My wife is Anne"],
        "chat (one-shot)": [exe, "chat", "What is my wife's name?"],
        "reconcile": [exe, "reconcile"],
        "summarize": [exe, "summarize"],
        "summarize --rebuild": [exe, "summarize", "--rebuild"],
        "search (no LLM, for scale)": [exe, "search", "wife"],
    }
    rows = {}
    for name, argv in commands.items():
        times = [timed(argv, env) for _ in range(args.runs)]
        rows[name] = {"median": statistics.median(times), "min": min(times), "max": max(times)}
    server.close()
    print(f"{'command':<28} {'median':>8} {'min':>8} {'max':>8}   (seconds, {args.runs} runs, fake LLM)")
    for name, row in rows.items():
        print(f"{name:<28} {row['median']:8.2f} {row['min']:8.2f} {row['max']:8.2f}")
    print(f"LLM requests served: {len(server.requests)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    shutil.rmtree(vault, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
