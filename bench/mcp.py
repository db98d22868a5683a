#!/usr/bin/env python3
"""`memvault mcp` over stdio (issue #14): tool-call latency and start-up time.

- **latency**: `search_memory` calls through the official SDK's client over a real stdio pipe to
  one `memvault mcp` process on an N-memory vault (default 10,000), as an agent makes them: the
  time from the call to its parsed result, p50 and p99 over --calls calls (default 300; goal:
  p50 <= 40 ms). Half the calls name a conversation (two scopes searched: it and `global`), half
  do not (every conversation, one scope); different questions throughout. The same calls are then
  made over a bare pipe (JSON lines in and out, no SDK on the client side) to a second server,
  alternating with the first, which is the server's own share.
  The server's CPU time per call (from /proc) is given too: on a shared machine it is the figure
  that other processes' load does not stretch.
- **start-up**: --starts fresh `memvault mcp` processes; for each, the time from spawning it to its
  answer to `initialize` (its first answer), to `tools/list`, and to the result of a first
  `search_memory` made at once (which waits for the models the server starts loading after
  `tools/list`); and, in another fresh process, the latency of a first `search_memory` made --idle
  seconds after `tools/list`, as when a person types a first request after the agent started.

The load average (1 min) is recorded beside every figure: the machine is shared.

    python bench/mcp.py                 # 10,000 memories, 300 calls, 5 starts
    python bench/mcp.py --quick         # smoke: 60 memories, 20 calls, 1 start
    python bench/mcp.py --reuse         # keep a vault built earlier in --workdir

Writes bench/out/mcp.json (or --out) and prints a table. The vault is built under --workdir
(default /tmp/memvault-mcp-bench) with `memvault add --jsonl` of bench/synth.py's memories.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This file is called mcp.py: bench/ goes last on the path, so that `import mcp` finds the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]
import synth  # noqa: E402
from checkout import git_commit  # noqa: E402
from perf import child_env, load, machine, memvault_exe, percentiles, prepare_vault, versions  # noqa: E402
from processes import stop_process  # noqa: E402

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]  # perf put it first again

GOAL_P50_MS = 40.0


def arguments(conversation: str | None, question: str) -> dict:
    return {"query": question, **({"conversation": conversation} if conversation else {})}


# -- a bare JSON-RPC pipe ------------------------------------------------------------------------
class Pipe:
    """`memvault mcp` as a child process spoken to in JSON lines; stopped in close()."""

    INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}

    def __init__(self, mv: list[str], env: dict[str, str], vault: Path):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([*mv, "--vault", str(vault), "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def request(self, method: str, params: dict | None = None, timeout: float = 300) -> dict:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, **({"params": params} if params else {})}
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.lines.get(timeout=timeout)
            if line is None:
                raise SystemExit(f"memvault mcp exited ({self.proc.wait()}) during {method}")
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                if "error" in answer or answer.get("result", {}).get("isError"):
                    raise SystemExit(f"{method} failed: {line[:500]!r}")
                return answer["result"]

    def cpu_seconds(self) -> float:
        """User + system CPU time the server process has used so far (all its threads)."""
        with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def notify(self, method: str) -> None:
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # the client leaves: the server exits by itself
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            stop_process(self.proc, timeout=5)


def start_up(mv, env, vault: Path, idle: float) -> dict:
    """One fresh server: its first answers, then (in a second one) the first search made `idle`
    seconds after tools/list, as when a person types their first request after the agent started."""
    pipe = Pipe(mv, env, vault)
    try:
        at = {"load": load()}
        pipe.request("initialize", Pipe.INIT)
        at["initialize_s"] = time.perf_counter() - pipe.started
        pipe.notify("notifications/initialized")
        pipe.request("tools/list")
        at["tools_list_s"] = time.perf_counter() - pipe.started
        result = pipe.request("tools/call", {"name": "search_memory",
                                             "arguments": arguments(*synth.QUERIES[0])})
        at["first_search_s"] = time.perf_counter() - pipe.started
        if not result["structuredContent"]["results"]:
            raise SystemExit(f"the first search found nothing: {result}")
    finally:
        pipe.close()
    pipe = Pipe(mv, env, vault)
    try:
        pipe.request("initialize", Pipe.INIT)
        pipe.notify("notifications/initialized")
        pipe.request("tools/list")
        time.sleep(idle)
        at["load_after_idle"] = load()
        start = time.perf_counter()
        pipe.request("tools/call", {"name": "search_memory", "arguments": arguments(*synth.QUERIES[1])})
        at["first_search_after_idle_ms"] = (time.perf_counter() - start) * 1000
        at["idle_s"] = idle
    finally:
        pipe.close()
    return at


async def latency(mv, env, vault: Path, calls: list[tuple[str | None, str]]) -> tuple[dict, dict]:
    """The same calls through the SDK client and over a bare pipe, to two servers, alternately: the
    load of the moment hits both alike."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=mv[0], args=[*mv[1:], "--vault", str(vault), "mcp"], env=env)
    pipe = Pipe(mv, env, vault)
    try:
        pipe.request("initialize", Pipe.INIT)
        pipe.notify("notifications/initialized")
        with open(os.devnull, "w") as quiet:
            async with Client(stdio_client(params, errlog=quiet), mode="legacy") as client:
                for conversation, question in calls[:5]:  # warm: models loaded, caches filled (not measured)
                    await client.call_tool("search_memory", arguments(conversation, question))
                    pipe.request("tools/call", {"name": "search_memory",
                                                "arguments": arguments(conversation, question)})
                before, cpu_before = load(), pipe.cpu_seconds()
                sdk, raw, by_scope, found = [], [], {"conversation": [], "all": []}, 0
                for conversation, question in calls:
                    start = time.perf_counter()
                    result = await client.call_tool("search_memory", arguments(conversation, question))
                    elapsed = (time.perf_counter() - start) * 1000
                    if result.is_error:
                        raise SystemExit(f"search_memory failed: {result.content[0].text}")
                    found += bool(result.structured_content["results"])
                    sdk.append(elapsed)
                    by_scope["conversation" if conversation else "all"].append(elapsed)
                    start = time.perf_counter()
                    pipe.request("tools/call", {"name": "search_memory", "arguments": arguments(conversation, question)})
                    raw.append((time.perf_counter() - start) * 1000)
                after, cpu = load(), pipe.cpu_seconds() - cpu_before
    finally:
        pipe.close()
    return ({**percentiles(sdk, "calls"), "load_before": before, "load_after": after, "with_results": found,
             "by_scope": {k: percentiles(v, "calls") for k, v in by_scope.items()}},
            {**percentiles(raw, "calls"), "load_before": before, "load_after": after,
             "server_cpu_ms_per_call": round(cpu * 1000 / len(calls), 2)})


def table(report: dict) -> str:
    lat, raw, starts = report["sdk_latency"], report["pipe_latency"], report["start_up"]
    n = report["meta"]["memories"]
    lines = [f"memvault mcp on a {n:,}-memory vault ({report['meta']['commit']}, "
             f"{report['meta']['machine'].get('cpus')} CPUs)", ""]
    lines.append("| figure | p50 | p90 | p99 | min-max | load (1 min) |")
    lines.append("|---|---:|---:|---:|---:|---|")

    def row(label, s, load_text):
        lines.append(f"| {label} | {s['p50']:.1f} ms | {s['p90']:.1f} ms | {s['p99']:.1f} ms | "
                     f"{s['min']:.1f}-{s['max']:.1f} ms | {load_text} |")

    row(f"search_memory, SDK client over stdio ({lat['calls']} calls)", lat,
        f"{lat['load_before']} -> {lat['load_after']}")
    for scope, label in (("conversation", "  with a conversation (2 scopes)"), ("all", "  every conversation (1 scope)")):
        row(label, lat["by_scope"][scope], "")
    row(f"search_memory, bare JSON-RPC pipe ({raw['calls']} calls)", raw, f"{raw['load_before']} -> {raw['load_after']}")
    lines += ["", f"server CPU time per call (user + system, all threads; what load does not stretch): "
                  f"{raw['server_cpu_ms_per_call']:.1f} ms"]
    verdict = "yes" if lat["p50"] <= GOAL_P50_MS else "no"
    lines += ["", f"goal p50 <= {GOAL_P50_MS:.0f} ms (SDK client): {verdict} ({lat['p50']:.1f} ms)", ""]
    lines.append("| start-up (fresh process) | median | min-max | load (1 min) at each start |")
    lines.append("|---|---:|---:|---|")
    loads = ", ".join(str(s["load"]) for s in starts)
    for key, label in (("initialize_s", "to the answer to initialize (first answer)"),
                       ("tools_list_s", "to tools/list"), ("first_search_s", "to a first search_memory result")):
        values = [s[key] for s in starts]
        lines.append(f"| {label} | {statistics.median(values):.2f} s | {min(values):.2f}-{max(values):.2f} s | "
                     f"{loads} |")
    values = [s["first_search_after_idle_ms"] for s in starts]
    lines.append(f"| a first search_memory made {starts[0]['idle_s']:g} s after tools/list (the call alone) | "
                 f"{statistics.median(values):.0f} ms | {min(values):.0f}-{max(values):.0f} ms | "
                 f"{', '.join(str(s['load_after_idle']) for s in starts)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=10000, help="memories in the vault (default 10,000)")
    ap.add_argument("--calls", type=int, default=300, help="search_memory calls measured (default 300)")
    ap.add_argument("--starts", type=int, default=5, help="fresh processes for the start-up figures (default 5)")
    ap.add_argument("--idle", type=float, default=15.0,
                    help="seconds between tools/list and the first search, for the warm first call (default 15)")
    ap.add_argument("--quick", action="store_true", help="smoke mode: 60 memories, 20 calls, 1 start, idle 3 s")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "memvault-mcp-bench")
    ap.add_argument("--reuse", action="store_true", help="use the vault an earlier run left in --workdir")
    ap.add_argument("--keep", action="store_true", help="keep the vault afterwards (for --reuse)")
    ap.add_argument("--out", type=Path, default=None, help="JSON report (default bench/out/mcp[-quick].json)")
    ap.add_argument("--table", type=Path, metavar="JSON", help="only print the table of an earlier report")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text(encoding="utf-8"))))
        return 0
    if args.quick:
        args.size, args.calls, args.starts, args.idle = 60, 20, 1, 3.0
    out = args.out or HERE / "out" / ("mcp-quick.json" if args.quick else "mcp.json")
    mv, env = memvault_exe(), child_env(keep_bytecode_env=False)
    vault = args.workdir / f"vault-{args.size}"

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if not (args.reuse and (vault / ".git").is_dir()):
        prepare_vault(mv, env, vault, args.size, log)
    memories = sum(1 for _ in (vault / "entries").rglob("*.md"))
    calls = synth.questions(args.calls)
    report = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
                       "machine": machine(), "versions": versions(), "memvault": mv, "memories": memories,
                       "goal_p50_ms": GOAL_P50_MS}}
    try:
        import importlib.metadata

        report["meta"]["versions"]["mcp"] = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        pass
    report["start_up"] = []
    for i in range(args.starts):
        report["start_up"].append(start_up(mv, env, vault, args.idle))
        s = report["start_up"][-1]
        log(f"start {i + 1}: initialize {s['initialize_s']:.2f} s, first search {s['first_search_s']:.2f} s "
            f"(load {s['load']})")
    import anyio

    report["sdk_latency"], report["pipe_latency"] = anyio.run(latency, mv, env, vault, calls)
    log(f"SDK client: p50 {report['sdk_latency']['p50']:.1f} ms, p99 {report['sdk_latency']['p99']:.1f} ms; "
        f"bare pipe: p50 {report['pipe_latency']['p50']:.1f} ms, p99 {report['pipe_latency']['p99']:.1f} ms")
    report["meta"]["machine"]["loadavg_at_end"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(table(report))
    print(f"\nwrote {out}")
    if not args.keep:
        shutil.rmtree(args.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
