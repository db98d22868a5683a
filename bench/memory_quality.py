#!/usr/bin/env python3
"""Memory upkeep quality with a real model.

Feeds ../shared/bench/memory/scenarios_dev.jsonl through `memvault add --extract -c <id>`
(one vault for all scenarios, turns in order), scores the vault with the shared
score_scenarios.py, and reports the pass rate, the live facts stored, the LLM calls (counted by
a pass-through proxy in front of the endpoint) and wall time per turn.

--mode sets extraction_mode (issue 16): `message` (per message) or `predict-calibrate` (with
--feed turn, each `add --extract` is read as an episode of one message, checked against what the
facts known so far predict). --feed batch gives each scenario's turns as one batch of user turns,
a minute apart (`add --jsonl --extract`): one episode per scenario, written as a file.

Start the local model first:
    ../shared/llm/local-llm.sh start && eval "$(../shared/llm/local-llm.sh env)"
usage: bench/memory_quality.py [--mode message|predict-calibrate] [--feed turn|batch] [--scenarios FILE]
                               [--vault DIR] [--only ID ...] [--json OUT] [--summaries]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class CountingProxy:
    """A pass-through HTTP proxy on 127.0.0.1 in front of the LLM endpoint that counts the chat
    completion requests memvault makes (a real count, whatever path in memvault made them)."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.calls = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
                if self.path.rstrip("/").endswith("/chat/completions"):
                    proxy.calls += 1
                base = proxy.upstream.removesuffix("/v1")
                request = urllib.request.Request(base + self.path, data=body, method=method,
                                                 headers={k: v for k, v in self.headers.items()
                                                          if k.lower() not in ("host", "content-length")})
                try:
                    with urllib.request.urlopen(request, timeout=3600) as reply:
                        status, data, kind = reply.status, reply.read(), reply.headers.get("Content-Type", "")
                except urllib.error.HTTPError as exc:
                    status, data, kind = exc.code, exc.read(), exc.headers.get("Content-Type", "")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind or "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting

            def do_POST(self) -> None:
                self._forward("POST")

            def do_GET(self) -> None:
                self._forward("GET")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=str(SHARED / "scenarios_dev.jsonl"))
    ap.add_argument("--scorer", default=str(SHARED / "score_scenarios.py"))
    ap.add_argument("--vault", help="vault folder (default: a fresh temp folder)")
    ap.add_argument("--only", nargs="*", help="run only these scenario ids")
    ap.add_argument("--json", help="write the per-scenario results here")
    ap.add_argument("--mode", choices=("message", "predict-calibrate"), default="message",
                    help="extraction_mode (default message)")
    ap.add_argument("--feed", choices=("turn", "batch"), default="turn",
                    help="turn: `add --extract` per turn; batch: a scenario's turns as one `add --jsonl --extract`")
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
    proxy = CountingProxy(os.environ["MEMVAULT_LLM_BASE_URL"])
    # A shared server with one slot queues requests: a long timeout keeps a wait from reading as a failure
    # (a reconciliation that times out keeps the old fact, which would change the score).
    env = with_this_checkout({"MEMVAULT_LLM_TIMEOUT": "1800", **os.environ, "MEMVAULT_DIR": str(vault),
                              "MEMVAULT_LLM_BASE_URL": proxy.base_url,
                              "MEMVAULT_EXTRACTION_MODE": args.mode,
                              "MEMVAULT_ENABLE_SUMMARIZATION": str(args.summaries).lower()})
    exe = shutil.which("memvault") or "memvault"
    times, failures = [], []
    started = time.perf_counter()
    try:
        for scenario in scenarios:
            if args.feed == "batch":
                rows = "".join(json.dumps({"role": "user", "text": turn, "conversation_id": scenario["id"],
                                           "created_at": f"2026-01-01T12:{minute:02d}:00+00:00"}) + "\n"
                               for minute, turn in enumerate(scenario["turns"]))
                commands = [([exe, "add", "--jsonl", "-", "--extract"], rows)]
            else:
                commands = [([exe, "add", "--extract", "-c", scenario["id"], turn], None) for turn in scenario["turns"]]
            for argv, stdin in commands:
                t0 = time.perf_counter()
                done = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
                if done.returncode != 0:
                    failures.append((scenario["id"], done.stderr.strip()))
                print(f"  {scenario['id']:<22} {times[-1]:5.1f}s  {done.stdout.strip()[:100]}", file=sys.stderr)
    finally:
        proxy.close()
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
    turns = sum(len(s["turns"]) for s in scenarios)
    stored = sum(len(r["facts"]) for r in rows)
    print(f"mode {args.mode}, feed {args.feed}: pass rate {passed}/{len(rows)} = {passed / max(len(rows), 1):.0%}; "
          f"live facts {stored}; LLM calls {proxy.calls} ({proxy.calls / turns:.2f} per turn); {turns} turns in "
          f"{len(times)} commands, wall time per turn {total / turns:.1f}s (per command median "
          f"{statistics.median(times):.1f}s, min {min(times):.1f}, max {max(times):.1f}); total {total:.0f}s; "
          f"load average {os.getloadavg()[0]:.1f}; command failures {len(failures)}")
    if args.json:
        summary = {"mode": args.mode, "feed": args.feed, "passed": passed, "scenarios": len(rows),
                   "live_facts": stored, "llm_calls": proxy.calls, "turns": turns, "seconds": total,
                   "load": os.getloadavg()[0]}
        Path(args.json).with_suffix(".summary.json").write_text(json.dumps(summary, indent=1))
    for row in rows:
        if not row["pass"]:
            print(f"  {row['id']} live facts: {row['facts']}")
    for scenario_id, message in failures:
        print(f"  failed command in {scenario_id}: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
