#!/usr/bin/env python3
"""`memvault serve` (issue 13): warm search latency, proxy overhead, concurrency, memory over time.

On an N-memory vault built as bench/perf.py builds it (default 10,000), with the scripted fake
OpenAI-protocol server of tests/fake_llm.py as the upstream LLM (it answers at once: what is
measured is memvault's share), in processes of their own (server, upstream, this client):

- **search**: --searches `POST /v1/memories/search` requests over keep-alive HTTP, each a different
  question (half naming a conversation: two scopes searched), p50 and p99 of the time to the parsed
  response (goal: p50 <= 30 ms, p99 <= 100 ms), beside a few cold `memvault search` processes run
  at the same moment (the CLI pays its start-up every time).
- **overhead**: --chats rounds of four interleaved requests, the same message each: straight to the
  upstream, then through the proxy, plain and streamed (to the end of `[DONE]`). The proxy's
  overhead is the difference of the medians (goal: p50 <= 50 ms). The server is left idle (its
  memory upkeep done) before each proxied request, so the figure is the request's own.
- **concurrency**: --clients threads each sending --per-client streamed chats, back to back, as
  fast as they are answered; then: errors (goal 0), the user and assistant turn files against the
  requests (every turn stored, none marked unanswered or partial), `git status` clean and
  `git fsck --strict` clean.
- **rss**: a fresh server, then requests alternating a search and a streamed chat; its resident
  memory (VmRSS) after --rss-first requests and after --rss-total (goal: within 10%).
- **ttfb** (issue 41): conversations never wait on each other. A fresh server whose upstream streams
  each reply over --ttfb-stream-s seconds (a model takes time to answer; an instant one makes 20
  clients a CPU-bound queue, whatever the server does), then time to first byte (the first event of
  the stream) of --ttfb-single streamed chats of one client in one conversation, back to back, against
  --clients clients in a conversation each, --per-client chats each (goal: p50 <= 2x the single
  client's). Each next message of a conversation waits for its last exchange to be stored. Then the
  floor no store design can lower: the same conversations' searches alone (`POST /v1/memories/search`
  of each chat's text), one client and then the clients, each search followed by a reply's streaming time.

The server's CPU time (user + system, all threads, from /proc) is given beside wall times: the
machine is shared, and load stretches wall time far more than CPU time. So is the load average. The
ttfb phase gives the whole machine's CPU a chat too: the server's git commands, the bench's clients,
the upstream and every process's busy time (two cores hold that goal, not one process).

    python bench/serve.py               # 10,000 memories: 500 searches, 100 rounds, 20 x 25, RSS 100 / 1,000
    python bench/serve.py --quick       # smoke: 60 memories, small counts (a minute or two)
    python bench/serve.py --reuse       # keep a vault built earlier in --workdir
    python bench/serve.py --only overhead,rss   # some of the phases (search, cold, overhead, concurrency, writer, rss, ttfb)

Writes bench/out/serve.json (or --out) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402
from checkout import REPO, git_commit  # noqa: E402
from perf import (child_env, load, machine, memvault_exe, percentiles, prepare_vault, run_together,  # noqa: E402
                  versions)
from processes import stop_process  # noqa: E402

PHASES = ("search", "cold", "overhead", "concurrency", "writer", "rss", "ttfb")
GOALS = {"search_p50_ms": 30.0, "search_p99_ms": 100.0, "overhead_p50_ms": 50.0, "overhead_p99_ms": 150.0,
         "rss_growth": 0.10, "ttfb_ratio": 2.0}

# The upstream: tests/fake_llm.py in a process of its own, answering every request at once; its
# reply is what the memory upkeep parses as "no facts", so upkeep costs one quick call a turn.
UPSTREAM = r"""
import sys
sys.path.insert(0, sys.argv[1])
from fake_llm import FakeLLM
from fake_server import split as _split
fake = FakeLLM()
fake.default = '{"facts": []}'
stream_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
if stream_s:  # a stream of 8 pieces over stream_s seconds; the same text at once when not streamed
    pieces = _split(fake.default, 8)
    fake.default = {"chunks": pieces, "chunk_delay": stream_s / len(pieces)}
print(fake.base_url, flush=True)
sys.stdin.read()
fake.close()
"""


def process_cpu_seconds(pid: int, children: bool = False) -> float:
    """A process's own CPU (all its threads), user + system, from /proc; children=True: that of the child
    processes it has waited for (a server's git commands)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    at = 13 if children else 11
    return (int(fields[at]) + int(fields[at + 1])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU-seconds the whole machine spent busy (every process, every core) since boot, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Upstream:
    def __init__(self, env: dict[str, str], stream_s: float = 0.0):
        self.proc = subprocess.Popen([sys.executable, "-c", UPSTREAM, str(REPO / "tests"), str(stream_s)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.close()
            raise SystemExit("the fake upstream did not start")

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # it serves until its stdin ends
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            stop_process(self.proc)


class Server:
    """`memvault serve --port 0` on the vault; stopped with SIGTERM in stop() (SIGKILL after 30 s)."""

    def __init__(self, mv: list[str], env: dict[str, str], vault: Path, timeout: float = 600):
        import httpx

        started = time.perf_counter()
        self.proc = subprocess.Popen([*mv, "--vault", str(vault), "serve", "--port", "0"], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stderr] and lines.put(None),
                         daemon=True).start()
        self.said: list[str] = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                if line is None:
                    raise SystemExit(f"memvault serve exited ({self.proc.wait()}): {''.join(self.said)}")
                self.said.append(line)
                found = re.search(r"listening on (http://127\.0\.0\.1:\d+)/v1", line)
                if found:
                    break
        except BaseException:
            stop_process(self.proc)
            raise
        self.start_s = time.perf_counter() - started
        self.url = found.group(1)
        self.client = httpx.Client(base_url=self.url, timeout=300)
        try:  # the learning an earlier run left owed, caught up at the start, is not measured with the rest
            self.idle(timeout)
        except BaseException:
            self.stop()
            raise

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.proc.pid)

    def children_cpu_seconds(self) -> float:
        """CPU of the server's child processes it has waited for (its git commands), user + system."""
        return process_cpu_seconds(self.proc.pid, children=True)

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return round(kb / 1024, 1)

    def idle(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while True:
            health = self.client.get("/health").json()
            if health["replies_in_flight"] == 0 and health["upkeep_pending"] == 0:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"the server did not become idle: {health}")
            time.sleep(0.02)

    def stop(self) -> dict:
        """Stopped with stop_process (SIGTERM; SIGKILL after 30 s): its exit code and how long it took."""
        self.client.close()
        started = time.perf_counter()
        code = stop_process(self.proc, timeout=30)
        return {"exit_code": code, "stop_s": round(time.perf_counter() - started, 2)}


def chat_body(text: str, conversation: str, stream: bool) -> dict:
    return {"model": "test-model", "user": conversation, "stream": stream,
            "messages": [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": text}]}


def send_chat(client, path: str, body: dict) -> str:
    """One chat request; the reply text (a stream read to its `[DONE]`)."""
    if not body["stream"]:
        response = client.post(path, json=body)
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"]
    pieces = []
    with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line == "data: [DONE]":
                return "".join(pieces)
            if line.startswith("data: "):
                data = json.loads(line[6:])
                if "error" in data:
                    raise RuntimeError(data["error"]["message"])
                pieces.append(data["choices"][0]["delta"].get("content") or "")
    raise RuntimeError("the stream ended without [DONE]")


# -- the measurements ----------------------------------------------------------------------------

def search_latency(server: Server, n: int) -> dict:
    calls = synth.questions(n + 5)

    def body(conversation, question):
        return {"query": question, **({"conversation_id": conversation} if conversation else
                                      {"all_conversations": True})}

    for conversation, question in calls[:5]:  # warm: caches, connection (not measured)
        server.client.post("/v1/memories/search", json=body(conversation, question)).raise_for_status()
    before, cpu_before = load(), server.cpu_seconds()
    times, found = [], 0
    for conversation, question in calls[5:]:
        start = time.perf_counter()
        response = server.client.post("/v1/memories/search", json=body(conversation, question))
        results = response.json()
        times.append((time.perf_counter() - start) * 1000)
        response.raise_for_status()
        found += bool(results)
    cpu = server.cpu_seconds() - cpu_before
    return {**percentiles(times), "with_results": found, "server_cpu_ms": round(cpu * 1000 / n, 2),
            "load_before": before, "load_after": load()}


def cold_search(mv, env, vault: Path, runs: int) -> dict:
    times, loads = [], []
    for conversation, question in synth.questions(runs):
        loads.append(load())
        start = time.perf_counter()
        subprocess.run([*mv, "-q", "--vault", str(vault), "search", "-c", conversation or "global", question],
                       env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
            "max_s": round(max(times), 3), "runs": runs, "loads": loads}


def chat_overhead(server: Server, upstream: Upstream, rounds: int) -> dict:
    import httpx

    direct = httpx.Client(base_url=upstream.base_url, timeout=300)
    samples: dict[str, list[float]] = {"direct": [], "proxy": [], "direct_stream": [], "proxy_stream": []}
    cpu_spent = 0.0
    before = load()
    try:
        for i in range(-2, rounds):  # two rounds of warm-up, not measured
            text = f"Bench message {i}: remind me that the standup moved to 9:15 on {synth.WEEKDAYS[i % 7]}."
            for stream in (False, True):
                suffix = "_stream" if stream else ""
                start = time.perf_counter()
                send_chat(direct, "/chat/completions", chat_body(text, "overhead", stream))
                elapsed = (time.perf_counter() - start) * 1000
                if i >= 0:
                    samples["direct" + suffix].append(elapsed)
                server.idle()
                cpu_before = server.cpu_seconds()
                start = time.perf_counter()
                send_chat(server.client, "/v1/chat/completions", chat_body(text, "overhead", stream))
                elapsed = (time.perf_counter() - start) * 1000
                if i >= 0:
                    samples["proxy" + suffix].append(elapsed)
                    cpu_spent += server.cpu_seconds() - cpu_before  # the request's own (upkeep after, mostly)
    finally:
        direct.close()
    out = {name: percentiles(values) for name, values in samples.items()}
    out["overhead_ms"] = {"plain": round(out["proxy"]["p50"] - out["direct"]["p50"], 2),
                          "stream": round(out["proxy_stream"]["p50"] - out["direct_stream"]["p50"], 2)}
    out["overhead_p99_ms"] = {"plain": round(out["proxy"]["p99"] - out["direct"]["p99"], 2),
                              "stream": round(out["proxy_stream"]["p99"] - out["direct_stream"]["p99"], 2)}
    out["server_cpu_ms_per_request"] = round(cpu_spent * 1000 / (2 * rounds), 2)
    out["load_before"], out["load_after"] = before, load()
    server.idle()
    return out


def turn_files(vault: Path, prefix: str) -> dict[str, int]:
    counts = {"user": 0, "assistant": 0, "unanswered": 0, "partial": 0}
    for conversation in (vault / "entries").glob(f"{prefix}*"):
        for role in ("user", "assistant"):
            for path in (conversation / "turns" / role).glob("*.md"):
                counts[role] += 1
                head = path.read_text(encoding="utf-8").split("\n---", 1)[0]
                counts["unanswered"] += "\nunanswered: true" in head
                counts["partial"] += "\npartial: true" in head
    return counts


def concurrency(server: Server, vault: Path, clients: int, per_client: int) -> dict:
    import httpx

    errors: list[str] = []
    times: list[float] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        with httpx.Client(base_url=server.url, timeout=300) as http:
            for n in range(per_client):
                text = f"Client {number} says: message {n} about {synth.PROJECTS[(number + n) % 15]}."
                start = time.perf_counter()
                try:
                    reply = send_chat(http, "/v1/chat/completions", chat_body(text, f"bench-c{number % 5}", True))
                    if not reply:
                        raise RuntimeError("empty reply")
                except Exception as exc:  # noqa: BLE001 (counted and shown)
                    with lock:
                        errors.append(f"client {number} request {n}: {exc!r}"[:300])
                    continue
                with lock:
                    times.append((time.perf_counter() - start) * 1000)

    before, cpu_before = load(), server.cpu_seconds()
    health_before = server.client.get("/health").json()
    started = time.perf_counter()
    wall = run_together([threading.Thread(target=client, args=(i,)) for i in range(clients)])
    server.idle()
    drained = time.perf_counter() - started
    cpu = server.cpu_seconds() - cpu_before
    requests = clients * per_client
    health = server.client.get("/health").json()
    # Read-your-writes (issue 30): requests that waited for their conversation's last exchange to be stored.
    waits = {key: round(health.get(key, 0) - health_before.get(key, 0), 1)
             for key in ("waited_for_stores", "store_wait_ms")}
    status = subprocess.run(["git", "-C", str(vault), "status", "--porcelain"], capture_output=True, text=True)
    fsck = subprocess.run(["git", "-C", str(vault), "fsck", "--strict"], capture_output=True, text=True)
    return {"clients": clients, "per_client": per_client, "requests": requests, "errors": len(errors),
            "error_samples": errors[:5], "latency": percentiles(times) if times else None,
            "wall_s": round(wall, 2), "requests_per_s": round(requests / wall, 2),
            "until_upkeep_done_s": round(drained, 2), "server_cpu_ms_per_request": round(cpu * 1000 / requests, 2),
            "turns": turn_files(vault, "bench-c"), "git_status_clean": status.stdout == "",
            "git_fsck_clean": fsck.returncode == 0 and not fsck.stdout.strip() and not fsck.stderr.strip(),
            "fsck_said": (fsck.stdout + fsck.stderr).strip()[:300], "load_before": before, "load_after": load(),
            **waits}


def other_writer(server: Server, mv, env, vault: Path, rounds: int, warm_searches: int) -> dict:
    """Issue 30: a terminal `memvault add` beside the warm server, then the server's next search.
    The warm p50 (no write between searches) against the p50 of the first search after each add
    (goal: within 2x); each add's memory must be found, and the server must not have "repaired" its
    index (another process's write is taken in by the files it changed, not by a look at every file)."""
    calls = [question for _, question in synth.questions(warm_searches + rounds)]

    def search(question: str) -> tuple[float, list[str]]:
        start = time.perf_counter()
        response = server.client.post("/v1/memories/search", json={"query": question, "top_k": 5,
                                                                    "conversation_id": "terminal"})
        response.raise_for_status()
        return (time.perf_counter() - start) * 1000, [r["text"] for r in response.json()]

    before = load()
    server.idle()
    for question in calls[:5]:
        search(question)  # warm
    warm = [search(question)[0] for question in calls[5:warm_searches]]
    after, adds, missed = [], [], 0
    for r in range(rounds):
        text = f"Written in a terminal while the server runs, round {r}: the {synth.PROJECTS[r % 15]} review moved."
        start = time.perf_counter()
        subprocess.run([*mv, "-q", "--vault", str(vault), "add", "-c", "terminal", text], env=env, check=True,
                       capture_output=True)
        adds.append((time.perf_counter() - start) * 1000)
        took, found = search(f"round {r} {synth.PROJECTS[r % 15]} review moved terminal")
        after.append(took)
        missed += text not in found
        search(calls[warm_searches + r])  # and one more, as warm again
    said = "".join(server.said)
    warm_p, after_p = percentiles(warm), percentiles(after)
    return {"rounds": rounds, "warm": warm_p, "after_add": after_p, "add_ms": percentiles(adds),
            "ratio_p50": round(after_p["p50"] / warm_p["p50"], 2), "not_found": missed,
            "repairs_said": said.count("did not match its files"), "load_before": before, "load_after": load()}


def first_bytes(mv, env, vault: Path, single: int, clients: int, per_client: int, stream_s: float) -> dict:
    """Issue 41: time to first byte of streamed chats, one client in one conversation, then `clients` in
    a conversation each; a fresh server whose upstream streams each reply over `stream_s` seconds."""
    import httpx

    slow = Upstream(env, stream_s)
    server = Server(mv, {**env, "MEMVAULT_LLM_BASE_URL": slow.base_url}, vault)
    lock = threading.Lock()

    def message(number: int, n: int) -> str:
        """Client `number`'s n-th message (its chat, and the floor's search of the same text)."""
        return f"Client {number} says: message {n} about {synth.PROJECTS[(number + n) % 15]}."

    def chats(number: int, conversation: str, count: int, firsts: list, wholes: list, errors: list) -> None:
        with httpx.Client(base_url=server.url, timeout=300) as http:
            for n in range(count):
                body = chat_body(message(number, n), conversation, True)
                start, first = time.perf_counter(), None
                try:
                    with http.stream("POST", "/v1/chat/completions", json=body) as response:
                        response.raise_for_status()
                        for line in response.iter_lines():
                            if first is None and line.startswith("data: "):
                                first = time.perf_counter()
                            if line == "data: [DONE]":
                                break
                        else:
                            raise RuntimeError("the stream ended without [DONE]")
                except Exception as exc:  # noqa: BLE001 (counted and shown)
                    with lock:
                        errors.append(f"{conversation} {n}: {exc!r}"[:300])
                    continue
                with lock:
                    firsts.append((first - start) * 1000)
                    wholes.append((time.perf_counter() - start) * 1000)

    def searches(number: int, conversation: str, count: int, firsts: list, wholes: list, errors: list) -> None:
        """The read path alone at the chats' pace: the search a chat of this conversation makes (POST
        /v1/memories/search of the same text), then as long as a reply takes to stream; no chat, no store."""
        with httpx.Client(base_url=server.url, timeout=300) as http:
            for n in range(count):
                body = {"query": message(number, n), "conversation_id": conversation}
                start = time.perf_counter()
                try:
                    http.post("/v1/memories/search", json=body).raise_for_status()
                except Exception as exc:  # noqa: BLE001 (counted and shown)
                    with lock:
                        errors.append(f"{conversation} {n}: {exc!r}"[:300])
                    continue
                took = (time.perf_counter() - start) * 1000
                with lock:
                    firsts.append(took)
                    wholes.append(took)
                time.sleep(stream_s)

    def machine_cpu() -> tuple[float, float, float, float]:
        """CPU-seconds so far: the server's git commands, this bench, the upstream, the whole machine."""
        return (server.children_cpu_seconds(), process_cpu_seconds(os.getpid()), process_cpu_seconds(slow.proc.pid),
                machine_busy_seconds())

    def phase(count: int, each: int, prefix: str, work: Callable = chats) -> dict:
        firsts: list[float] = []
        wholes: list[float] = []
        errors: list[str] = []
        health = server.client.get("/health").json()
        before, cpu = load(), server.cpu_seconds()
        cpus = machine_cpu()
        wall = run_together([threading.Thread(target=work, args=(i, f"{prefix}-{i}", each, firsts, wholes, errors))
                             for i in range(count)])
        server.idle()
        after = server.client.get("/health").json()
        spent = [now - then for now, then in zip(machine_cpu(), cpus)]
        done = max(1, count * each)
        # the whole machine's CPU a chat, by part: the server's git commands, this bench's clients (and its
        # /health polls), the upstream, and everything (other processes on the machine included)
        machine = dict(zip(("server_children", "clients", "upstream", "machine_busy"),
                           (round(v * 1000 / done, 1) for v in spent)))
        return {"clients": count, "chats": count * each, "errors": len(errors), "error_samples": errors[:3],
                "ttfb": percentiles(firsts) if firsts else None, "whole": percentiles(wholes) if wholes else None,
                "wall_s": round(wall, 2), "server_cpu_ms_per_chat": round((server.cpu_seconds() - cpu) * 1000
                                                                          / max(1, count * each), 1),
                "waited_for_stores": after["waited_for_stores"] - health["waited_for_stores"],
                "store_wait_ms": round(after["store_wait_ms"] - health["store_wait_ms"], 1),
                "cpu_ms_per_chat": machine, "load_before": before, "load_after": load()}

    try:
        phase(1, 3, "ttfb-warm")  # the first chats of a fresh server: not measured
        one = phase(1, single, "ttfb-one")
        many = phase(clients, per_client, "ttfb-many")
        # The floor no store can lower: the same conversations' searches alone, at the same pace
        read_one = phase(1, single, "ttfb-one", searches)
        read_many = phase(clients, per_client, "ttfb-many", searches)
    finally:
        stopped = server.stop()
        slow.close()

    def ratio(one: dict, many: dict) -> float | None:
        return round(many["ttfb"]["p50"] / one["ttfb"]["p50"], 2) if one["ttfb"] and many["ttfb"] else None

    return {"stream_s": stream_s, "single": one, "many": many, "ratio_p50": ratio(one, many),
            "read_single": read_one, "read_many": read_many, "read_ratio_p50": ratio(read_one, read_many), **stopped}


def rss_growth(mv, env, vault: Path, first: int, total: int) -> dict:
    server = Server(mv, env, vault)
    readings = {"after_start_mb": server.rss_mb()}
    calls = synth.questions(total)
    try:
        for i in range(total):
            conversation, question = calls[i]
            if i % 2 == 0:
                server.client.post("/v1/memories/search", json={"query": question}).raise_for_status()
            else:
                send_chat(server.client, "/v1/chat/completions", chat_body(question, "rss", stream=True))
            if i + 1 in (first, total) or (i + 1) % max(first, 1) == 0:
                server.idle()
                readings.setdefault("curve_mb", []).append((i + 1, server.rss_mb()))
                if i + 1 in (first, total):
                    readings[f"after_{i + 1}_mb"] = server.rss_mb()
                    readings[f"load_at_{i + 1}"] = load()
    finally:
        stopped = server.stop()
    first_mb, last_mb = readings[f"after_{first}_mb"], readings[f"after_{total}_mb"]
    return {**readings, "first": first, "total": total, "growth": round((last_mb - first_mb) / first_mb, 4),
            "start_s": round(server.start_s, 2), **stopped}


def table(report: dict) -> str:
    """The report as a markdown table and a few lines; phases left out by --only are left out here."""
    meta = report["meta"]
    search, cold, over, conc, rss = (report.get(k) for k in ("search", "cold_search", "overhead", "concurrency", "rss"))
    lines = [f"memvault serve on a {meta['memories']:,}-memory vault ({meta['commit']}, "
             f"{meta['machine'].get('cpus')} CPUs; upstream: the instant fake LLM)", ""]
    lines += ["| figure | p50 | p99 | min-max | server CPU | load (1 min) |", "|---|---:|---:|---:|---:|---|"]
    if search:
        lines.append(f"| POST /v1/memories/search, warm ({search['n']} queries) | {search['p50']:.1f} ms | "
                     f"{search['p99']:.1f} ms | {search['min']:.1f}-{search['max']:.1f} ms | "
                     f"{search['server_cpu_ms']:.1f} ms | {search['load_before']} -> {search['load_after']} |")
    if cold:
        lines.append(f"| cold `memvault search` ({cold['runs']} processes) | {cold['median_s'] * 1000:.0f} ms | | "
                     f"{cold['min_s'] * 1000:.0f}-{cold['max_s'] * 1000:.0f} ms | | {cold['loads']} |")
    for name, label in (("direct", "chat, straight to the upstream"), ("proxy", "chat through memvault serve"),
                        ("direct_stream", "streamed chat, straight to the upstream"),
                        ("proxy_stream", "streamed chat through memvault serve")) if over else ():
        s = over[name]
        cpu = f"{over['server_cpu_ms_per_request']:.1f} ms" if name == "proxy" else ""
        lines.append(f"| {label} ({s['n']}) | {s['p50']:.1f} ms | {s['p99']:.1f} ms | {s['min']:.1f}-{s['max']:.1f} ms"
                     f" | {cpu} | {over['load_before']} -> {over['load_after']} |")
    if conc and conc["latency"]:
        s = conc["latency"]
        lines.append(f"| {conc['clients']} clients x {conc['per_client']} streamed chats, each | {s['p50']:.0f} ms | "
                     f"{s['p99']:.0f} ms | {s['min']:.0f}-{s['max']:.0f} ms | {conc['server_cpu_ms_per_request']:.0f}"
                     f" ms | {conc['load_before']} -> {conc['load_after']} |")
    lines.append("")
    if over:
        lines.append(f"proxy overhead (p50 through the proxy - p50 straight): plain {over['overhead_ms']['plain']:.1f} ms, "
                     f"streamed {over['overhead_ms']['stream']:.1f} ms")
        if over.get("overhead_p99_ms"):
            lines.append(f"proxy overhead at p99: plain {over['overhead_p99_ms']['plain']:.1f} ms, streamed "
                         f"{over['overhead_p99_ms']['stream']:.1f} ms")
    if conc:
        turns = conc["turns"]
        lines.append(f"concurrency: {conc['requests']} requests in {conc['wall_s']:.1f} s ({conc['requests_per_s']:.1f}/s; "
                     f"upkeep done at {conc['until_upkeep_done_s']:.1f} s), {conc['errors']} errors; turn files: "
                     f"{turns['user']} user, {turns['assistant']} assistant ({turns['unanswered']} unanswered, "
                     f"{turns['partial']} partial); git status clean: {conc['git_status_clean']}; "
                     f"git fsck clean: {conc['git_fsck_clean']}")
        if "waited_for_stores" in conc:
            lines.append(f"read-your-writes: {conc['waited_for_stores']:.0f} of {conc['requests']} requests waited for "
                         f"their conversation's last store, {conc['store_wait_ms']:.0f} ms in all")
    writer = report.get("writer")
    if writer:
        lines.append(f"another process's `add`, then the server's next search ({writer['rounds']} rounds): p50 "
                     f"{writer['after_add']['p50']:.1f} ms (p99 {writer['after_add']['p99']:.1f}) against warm "
                     f"{writer['warm']['p50']:.1f} ms: {writer['ratio_p50']:.2f}x; not found {writer['not_found']}, "
                     f"repairs said {writer['repairs_said']}; the `add` itself {writer['add_ms']['p50']:.0f} ms; load "
                     f"{writer['load_before']} -> {writer['load_after']}")
    if rss:
        first, total = rss["first"], rss["total"]
        lines += [f"RSS: {rss['after_start_mb']:.0f} MB at start, {rss[f'after_{first}_mb']:.0f} MB after {first} requests, "
                  f"{rss[f'after_{total}_mb']:.0f} MB after {total} (growth {rss['growth'] * 100:+.1f}%); SIGTERM: exit "
                  f"{rss['exit_code']} in {rss['stop_s']} s",
                  "RSS (MB) every " + str(first) + " requests: " + ", ".join(f"{mb:.0f}" for _, mb in rss.get("curve_mb", []))]
    ttfb = report.get("ttfb")
    if ttfb:
        one, many = ttfb["single"], ttfb["many"]
        lines.append(f"time to first byte (upstream streaming each reply over {ttfb['stream_s']} s): one client, "
                     f"{one['chats']} chats: p50 {one['ttfb']['p50']:.1f} ms (p99 {one['ttfb']['p99']:.1f}; server "
                     f"CPU {one['server_cpu_ms_per_chat']:.0f} ms a chat); {many['clients']} clients in a "
                     f"conversation each, {many['chats']} chats: p50 {many['ttfb']['p50']:.1f} ms (p99 "
                     f"{many['ttfb']['p99']:.1f}; CPU {many['server_cpu_ms_per_chat']:.0f} ms a chat; "
                     f"{many['waited_for_stores']} waited for their store, {many['store_wait_ms']:.0f} ms in all; "
                     f"{many['errors']} errors): {ttfb['ratio_p50']}x; load {one['load_before']} -> "
                     f"{many['load_after']}")
        if ttfb.get("read_single"):
            r1, rn = ttfb["read_single"], ttfb["read_many"]
            lines.append(f"the read path alone at the same pace (the same conversations' searches, no chat, no store): "
                         f"one client p50 {r1['ttfb']['p50']:.1f} ms (server CPU {r1['server_cpu_ms_per_chat']:.0f} ms "
                         f"a search), {rn['clients']} clients p50 {rn['ttfb']['p50']:.1f} ms (server CPU "
                         f"{rn['server_cpu_ms_per_chat']:.0f} ms; the whole machine busy "
                         f"{rn['cpu_ms_per_chat']['machine_busy']:.0f} ms a search; {rn['errors']} errors): "
                         f"{ttfb['read_ratio_p50']}x")
        for label, part in (("one client", one), (f"{many['clients']} clients", many)):
            cpu = part["cpu_ms_per_chat"]
            lines.append(f"CPU a chat, {label}: server {part['server_cpu_ms_per_chat']:.0f} ms + its git commands "
                         f"{cpu['server_children']:.0f} ms, the bench's clients {cpu['clients']:.0f} ms, the upstream "
                         f"{cpu['upstream']:.0f} ms; the whole machine busy {cpu['machine_busy']:.0f} ms")
    start_s = report.get("start_s", rss and rss["start_s"])
    if start_s is not None:
        lines.append(f"start-up to listening (models, index, litellm loaded): {start_s:.1f} s")
    lines.append("")
    verdicts = report["verdicts"]
    lines.append("goals: " + "; ".join(f"{name} {'yes' if v['ok'] else 'no'} ({v['value']})"
                                       for name, v in verdicts.items()))
    return "\n".join(lines)


def verdicts(report: dict) -> dict:
    """Each goal of the issue met or not, for the phases that ran."""
    search, over, conc, rss = (report.get(k) for k in ("search", "overhead", "concurrency", "rss"))
    found = {}
    if search:
        found["search p50 <= 30 ms"] = {"ok": search["p50"] <= GOALS["search_p50_ms"], "value": f"{search['p50']:.1f} ms"}
        found["search p99 <= 100 ms"] = {"ok": search["p99"] <= GOALS["search_p99_ms"], "value": f"{search['p99']:.1f} ms"}
    if over:
        found["overhead p50 <= 50 ms"] = {"ok": max(over["overhead_ms"].values()) <= GOALS["overhead_p50_ms"],
                                          "value": f"{over['overhead_ms']['plain']:.1f} / {over['overhead_ms']['stream']:.1f} ms"}
        p99 = over.get("overhead_p99_ms")
        if p99:
            found["overhead p99 <= 150 ms"] = {"ok": max(p99.values()) <= GOALS["overhead_p99_ms"],
                                               "value": f"{p99['plain']:.1f} / {p99['stream']:.1f} ms"}
    ttfb = report.get("ttfb")
    if ttfb and ttfb["ratio_p50"] is not None:
        found["ttfb p50, 20 conversations <= 2x one"] = {
            "ok": ttfb["ratio_p50"] <= GOALS["ttfb_ratio"] and not ttfb["many"]["errors"],
            "value": f"{ttfb['ratio_p50']}x"}
    writer = report.get("writer")
    if writer:
        found["search after another process's add <= 2x warm"] = {
            "ok": writer["ratio_p50"] <= 2 and not writer["not_found"] and not writer["repairs_said"],
            "value": f"{writer['ratio_p50']:.2f}x"}
    if conc:
        turns = conc["turns"]
        stored = turns["user"] == turns["assistant"] == conc["requests"] and not turns["unanswered"] and not turns["partial"]
        found["0 errors"] = {"ok": conc["errors"] == 0, "value": conc["errors"]}
        found["every turn stored"] = {"ok": stored, "value": f"{turns['user']}+{turns['assistant']} of {conc['requests']}"}
        found["git fsck clean"] = {"ok": conc["git_fsck_clean"] and conc["git_status_clean"], "value": conc["git_fsck_clean"]}
    if rss:
        found["RSS growth <= 10%"] = {"ok": rss["growth"] <= GOALS["rss_growth"], "value": f"{rss['growth'] * 100:+.1f}%"}
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=10000, help="memories in the vault (default 10,000)")
    ap.add_argument("--searches", type=int, default=500, help="warm searches measured (default 500)")
    ap.add_argument("--cold", type=int, default=3, help="cold `memvault search` processes beside them (default 3)")
    ap.add_argument("--chats", type=int, default=100, help="rounds of the overhead measurement (default 100)")
    ap.add_argument("--clients", type=int, default=20, help="concurrent clients (default 20)")
    ap.add_argument("--per-client", type=int, default=25, help="streamed chats per client (default 25)")
    ap.add_argument("--rss-first", type=int, default=100, help="requests before the first RSS reading (default 100)")
    ap.add_argument("--rss-total", type=int, default=1000, help="requests before the second (default 1,000)")
    ap.add_argument("--writer-rounds", type=int, default=20,
                    help="terminal adds, each followed by a search (default 20)")
    ap.add_argument("--writer-warm", type=int, default=60, help="warm searches to compare with (default 60)")
    ap.add_argument("--ttfb-single", type=int, default=40, help="ttfb: chats of the one client (default 40)")
    ap.add_argument("--ttfb-stream-s", type=float, default=2.0,
                    help="ttfb: seconds the upstream streams each reply over (default 2)")
    ap.add_argument("--only", default=",".join(PHASES), metavar="PHASES",
                    help="the phases to run, comma-separated (default all: " + ",".join(PHASES) + ")")
    ap.add_argument("--quick", action="store_true", help="smoke mode: 60 memories and small counts")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "memvault-serve-bench")
    ap.add_argument("--reuse", action="store_true", help="use the vault an earlier run left in --workdir "
                                                          "(it holds that run's chat turns too)")
    ap.add_argument("--keep", action="store_true", help="keep the vault afterwards (for --reuse)")
    ap.add_argument("--out", type=Path, default=None, help="JSON report (default bench/out/serve[-quick].json)")
    ap.add_argument("--table", type=Path, metavar="JSON", help="only print the table of an earlier report")
    args = ap.parse_args(argv)
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    if only - set(PHASES):
        ap.error(f"--only: unknown phase(s) {', '.join(sorted(only - set(PHASES)))}; known: {', '.join(PHASES)}")
    if args.table:
        print(table(json.loads(args.table.read_text(encoding="utf-8"))))
        return 0
    if args.quick:
        args.size, args.searches, args.cold, args.chats = 60, 20, 1, 5
        args.clients, args.per_client, args.rss_first, args.rss_total = 3, 3, 10, 30
        args.writer_rounds, args.writer_warm = 3, 10
        args.ttfb_single, args.ttfb_stream_s = 4, 0.4
    out = args.out or HERE / "out" / ("serve-quick.json" if args.quick else "serve.json")
    mv, env = memvault_exe(), child_env(keep_bytecode_env=False)
    vault = args.workdir / f"vault-{args.size}"

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if not (args.reuse and (vault / ".git").is_dir()):
        prepare_vault(mv, env, vault, args.size, log)
    memories = sum(1 for _ in (vault / "entries").rglob("*.md"))
    upstream = Upstream(env)
    env = {**env, "MEMVAULT_LLM_BASE_URL": upstream.base_url, "MEMVAULT_LLM_MODEL": "openai/test-model",
           "MEMVAULT_LLM_TIMEOUT": "60"}
    report: dict = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
                             "machine": machine(), "versions": versions(), "memvault": mv, "memories": memories,
                             "goals": GOALS}}
    try:
        if only & {"search", "cold", "overhead", "concurrency", "writer"}:
            log("starting memvault serve ...")
            server = Server(mv, env, vault)
            report["start_s"] = round(server.start_s, 2)
            try:
                log(f"listening after {server.start_s:.1f} s")
                if "search" in only:
                    log(f"{args.searches} warm searches ...")
                    report["search"] = search_latency(server, args.searches)
                    log(f"search p50 {report['search']['p50']:.1f} ms, p99 {report['search']['p99']:.1f} ms")
                if "cold" in only:
                    log("cold searches ...")
                    report["cold_search"] = cold_search(mv, env, vault, args.cold)
                if "overhead" in only:
                    log(f"{args.chats} rounds of chats, straight and through the proxy ...")
                    report["overhead"] = chat_overhead(server, upstream, args.chats)
                    log(f"overhead {report['overhead']['overhead_ms']}")
                if "concurrency" in only:
                    log(f"{args.clients} clients x {args.per_client} ...")
                    report["concurrency"] = concurrency(server, vault, args.clients, args.per_client)
                    log(f"{report['concurrency']['errors']} errors, {report['concurrency']['wall_s']:.1f} s")
                if "writer" in only:
                    log(f"{args.writer_rounds} rounds of a terminal add, then a search ...")
                    report["writer"] = other_writer(server, mv, env, vault, args.writer_rounds, args.writer_warm)
                    log(f"after another process's add: {report['writer']['ratio_p50']}x the warm p50")
            finally:
                report["stop"] = server.stop()
        if "rss" in only:
            log(f"RSS: a fresh server, {args.rss_total} requests ...")
            report["rss"] = rss_growth(mv, env, vault, args.rss_first, args.rss_total)
        if "ttfb" in only:
            log(f"time to first byte: one client x {args.ttfb_single}, then {args.clients} x {args.per_client} ...")
            report["ttfb"] = first_bytes(mv, env, vault, args.ttfb_single, args.clients, args.per_client,
                                         args.ttfb_stream_s)
            log(f"ttfb ratio {report['ttfb']['ratio_p50']}x")
    finally:
        upstream.close()
    report["verdicts"] = verdicts(report)
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
