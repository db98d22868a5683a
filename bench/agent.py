#!/usr/bin/env python3
"""The CLI at warm speed (issue 33): the same commands cold and through a running `memvault agent`.

Every measurement is a fresh `python -m memvault` process (what the `memvault` script runs), as a
shell runs it: wall time and CPU time (wait4), the runs of cold and warm interleaved so that the
load of the moment hits both alike. Outputs are compared byte for byte (search, with a fixed
--now; an add's ids and times masked). Then the agent's RSS after 100 and after 1,000 CLI calls
(searches, ls and show), and what `agent = auto` costs a vault used once a day from cron: the
agent's start (wall and CPU) and the memory it holds until it exits idle.

    python bench/agent.py                          # 10,000 memories, 9 rounds, 1,000 calls
    python bench/agent.py --vault /tmp/agent-vaults/vault-10000 --runs 9
    python bench/agent.py --quick                  # smoke: 60 memories, 2 rounds, 20 calls

The vault is built once with bench/scale.py's builder (`add --jsonl` of bench/synth.py) and
kept (--vaults). The LLM of `add --extract` is tests/fake_llm.py answering at once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import perf  # noqa: E402
import synth  # noqa: E402
from processes import stop_process  # noqa: E402

NOW = "2026-12-01T00:00:00+00:00"
_MASK = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{8}T\d{6}\d*Z|\b[0-9a-f]{7,40}\b")
GOALS = {"search": 0.15, "add": 0.25, "add_extract": 0.5}


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_agent(mv, env, vault: Path):
    started = time.perf_counter()
    proc = subprocess.Popen([*mv, "--vault", str(vault), "agent", "--idle", "60"], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in proc.stderr:
        if "listening on" in line:
            return proc, time.perf_counter() - started
    stop_process(proc)
    raise SystemExit("the agent did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vault", type=Path, help="a built vault (default: --vaults/vault-N, built if missing)")
    ap.add_argument("--vaults", type=Path, default=Path("/tmp/agent-vaults"))
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "agent.json")
    ap.add_argument("--cron", type=int, metavar="N", default=0,
                    help="only what `agent = auto` costs a vault used once a day: N first calls (no agent "
                         "running) with auto against N with off")
    args = ap.parse_args()
    if args.quick:
        args.size, args.runs, args.calls = 60, 2, 20
        args.vaults = Path(tempfile.mkdtemp(prefix="memvault-agent-bench-"))
    mv = [sys.executable, "-m", "memvault"]
    env = perf.child_env(False)
    vault = args.vault or args.vaults / f"vault-{args.size}"
    if not (vault / ".memvault").is_dir():
        print(f"building {vault} ...", file=sys.stderr)
        perf.build_vault(mv, env, vault, args.size)

    if args.cron:
        print(json.dumps(cron_cost(mv, env, vault, args.cron), indent=1))
        return 0
    from fake_llm import FakeLLM

    llm = FakeLLM()
    llm.default = '{"facts": []}'  # at once, and nothing to reconcile: the command's own cost
    env.update(MEMVAULT_LLM_BASE_URL=llm.base_url, MEMVAULT_LLM_MODEL="openai/test-model",
               MEMVAULT_ENABLE_SUMMARIZATION="false")
    cold_env, warm_env = {**env, "MEMVAULT_AGENT": "off"}, {**env, "MEMVAULT_AGENT": "use"}
    # A first search says once per vault what it lacks (a reranker not downloaded): said before the rounds.
    perf.run([*mv, "--vault", str(vault), "search", "settle"], cold_env)
    loads = [os.getloadavg()[0]]
    floor = [perf.run([sys.executable, "-c", "pass"], env).wall for _ in range(5)]
    proc, start_wall = start_agent(mv, env, vault)
    report: dict = {"vault": str(vault), "size": args.size, "runs": args.runs, "machine": perf.machine()}
    try:
        report["agent_start"] = {"wall_s": start_wall, "cpu_s": cpu_s(proc.pid), "rss_mb": rss_mb(proc.pid)}
        samples = {key: {"cold": [], "warm": []} for key in GOALS}
        identical = {key: 0 for key in GOALS}
        for r in range(args.runs):
            conversation, query = synth.QUERIES[r % len(synth.QUERIES)]
            commands = {
                "search": (["--vault", str(vault), "search", "--now", NOW, "-c", conversation, query], None),
                "add": (["--vault", str(vault), "add", f"Dana noted agent bench memory {r} on {synth.WEEKDAYS[r % 7]}."],
                        None),
                "add_extract": (["--vault", str(vault), "add", "--extract", f"I had lunch with Dana on day {r}."], None),
            }
            for key, (argv, stdin) in commands.items():
                outs = {}
                for way, way_env in (("cold", cold_env), ("warm", warm_env)):
                    if key != "search" and way == "warm":
                        argv = [*argv[:-1], argv[-1] + " (again)"]  # not a duplicate of the cold one
                    loads.append(os.getloadavg()[0])
                    child = perf.run([*mv, *argv], way_env, stdin=stdin)
                    samples[key][way].append({"wall": child.wall, "cpu": child.cpu, "rss_mb": child.rss_mb})
                    outs[way] = (child.rc, _MASK.sub("<x>", child.stdout.replace(" (again)", "")),
                                 _MASK.sub("<x>", child.stderr.replace(" (again)", "")))
                identical[key] += outs["cold"] == outs["warm"]
            print(f"round {r + 1}: " + ", ".join(f"{k} {v['cold'][-1]['wall']:.2f}/{v['warm'][-1]['wall']:.2f}s"
                                                 for k, v in samples.items()), file=sys.stderr)
        report["commands"] = {key: {way: {f: perf.stats([s[f] for s in runs]) for f in ("wall", "cpu", "rss_mb")}
                                    for way, runs in ways.items()} for key, ways in samples.items()}
        report["identical"] = {key: f"{n}/{args.runs}" for key, n in identical.items()}
        report["rss_after_calls"] = calls(mv, warm_env, vault, proc.pid, args.calls)
        report["python_floor_s"] = perf.stats(floor)
        report["load"] = perf.stats(loads)
    finally:
        stop_process(proc)
        llm.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(table(report))
    return 0


def cron_cost(mv, env, vault: Path, runs: int) -> dict:
    """A cron job's one `search` a day: with agent = off, and with auto (no agent running: the call starts
    one, waits for it to listen, and goes warm). Then the agent it left: its CPU so far, its RSS (held
    until agent_idle_minutes pass), stopped by `agent stop`."""
    argv = [*mv, "--vault", str(vault), "search", "--now", NOW, "what did Dana decide"]
    out: dict = {"off": [], "auto": [], "agent_cpu_s": [], "agent_rss_mb": [], "load": []}
    for _ in range(runs):
        out["load"].append(os.getloadavg()[0])
        out["off"].append(perf.run(argv, {**env, "MEMVAULT_AGENT": "off"}).wall)
        out["auto"].append(perf.run(argv, {**env, "MEMVAULT_AGENT": "auto"}).wall)
        pid = int(open(vault / ".memvault" / "agent.lock").read().split()[0])
        out["agent_cpu_s"].append(cpu_s(pid))
        out["agent_rss_mb"].append(rss_mb(pid))
        perf.run([*mv, "--vault", str(vault), "agent", "stop"], env)
    return {key: perf.stats(values) for key, values in out.items()}


def calls(mv, env, vault: Path, pid: int, total: int) -> dict:
    """RSS of the agent after 100 and after `total` CLI calls: searches of varied questions, ls, show."""
    ids = [m["id"] for m in json.loads(perf.run([*mv, "--vault", str(vault), "ls", "--json", "-n", "50"], env).stdout)]
    marks, started = {}, time.perf_counter()
    for n in range(1, total + 1):
        conversation, query = synth.QUERIES[n % len(synth.QUERIES)]
        argv = (["ls", "-n", "20"] if n % 10 == 0 else ["show", ids[n % len(ids)][:8]] if n % 10 == 5
                else ["search", "-c", conversation, f"{query} {synth.WEEKDAYS[n % 7]}"])
        subprocess.run([*mv, "--vault", str(vault), *argv], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        if n in (100, total) or n % 250 == 0:
            marks[n] = rss_mb(pid)
    return {"rss_mb": marks, "growth_100_to_last": marks[total] / marks[min(100, total)] - 1,
            "seconds": time.perf_counter() - started}


def table(report: dict) -> str:
    lines = [f"{report['size']:,} memories, {report['runs']} rounds, load {report['load']['median']:.2f} "
             f"({report['load']['min']:.2f}-{report['load']['max']:.2f}); python -c pass "
             f"{report['python_floor_s']['median']:.3f} s",
             "| command | cold wall p50 | warm wall p50 (min-max) | warm CPU p50 | goal | byte-identical |",
             "|---|---|---|---|---|---|"]
    for key, ways in report["commands"].items():
        c, w = ways["cold"], ways["warm"]
        lines.append(f"| {key} | {c['wall']['median']:.2f} s | {w['wall']['median']:.3f} s "
                     f"({w['wall']['min']:.3f}-{w['wall']['max']:.3f}) | {w['cpu']['median']:.3f} s | "
                     f"<= {GOALS[key]} s | {report['identical'][key]} |")
    start = report["agent_start"]
    lines.append(f"agent start: {start['wall_s']:.2f} s wall to listening, {start['cpu_s']:.2f} s CPU, "
                 f"RSS {start['rss_mb']:.0f} MB")
    rss = report["rss_after_calls"]
    lines.append("agent RSS after N calls: " + ", ".join(f"{n}: {mb:.0f} MB" for n, mb in rss["rss_mb"].items())
                 + f" (growth from 100 to the last: {rss['growth_100_to_last'] * 100:+.1f}%)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
