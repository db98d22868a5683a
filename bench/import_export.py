#!/usr/bin/env python3
"""Import and export at scale: a synthetic ChatGPT export of N conversations x M messages.

    python bench/import_export.py                       # 2,000 conversations x 50 messages = 100,000
    python bench/import_export.py --quick               # 20 x 6, for the smoke test
    python bench/import_export.py --table bench/out/import_export.json

Each step is a fresh process (wall time, CPU time and its own peak RSS from wait4):
1. the reader alone: memvault.moving.jsonstream over the file, against `json.load` of it (the memory a
   reader that holds the whole export would need);
2. `memvault import chatgpt` into a new vault (no --extract: no LLM);
3. the same import again: everything is there, nothing is written;
4. `memvault export --all` (JSON lines), `import jsonl` of it into a second vault, and its export
   again, which must be byte-identical.

The export is written in the shape ChatGPT writes (tests/export_fixtures.py explains it): each
conversation a `mapping` of nodes with a root, a hidden system message, then user and assistant
messages alternating, with a regenerated reply on a side branch every tenth conversation.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checkout import REPO, git_commit, with_this_checkout
from processes import stop_process

OUT = REPO / "bench" / "out"
START = 1_600_000_000.0  # 2020-09-13

WORDS = ("the a my our trip plan budget garden recipe bread sourdough flour oven week weekend project deadline "
         "meeting report python script error function test data model train bike route climb Lisbon Porto "
         "Anne Rita sister mother school homework math essay deadline doctor appointment run marathon shoes "
         "book novel chapter write draft email job interview salary move flat rent kitchen paint colour blue "
         "green light window coffee tea morning night sleep early late because however maybe should could "
         "would really quite about with from into over under after before during since until while").split()


def sentence(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def message_text(rng: random.Random, role: str) -> str:
    if role == "user":
        return " ".join(sentence(rng, 6, 18) for _ in range(rng.randint(1, 3)))
    return "\n\n".join(" ".join(sentence(rng, 8, 20) for _ in range(rng.randint(2, 4)))
                       for _ in range(rng.randint(1, 3)))


def node_message(node_id: str, role: str, text: str, when: float | None, hidden: bool = False) -> dict:
    return {"id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": when,
            "update_time": None, "content": {"content_type": "text", "parts": [text]},
            "status": "finished_successfully", "end_turn": True, "weight": 1.0,
            "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {}, "recipient": "all"}


def conversation(rng: random.Random, number: int, messages: int) -> dict:
    cid = f"{number:08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
    start = START + number * 3600 * 5
    mapping: dict[str, dict] = {}

    def add(node_id: str, parent: str | None, message: dict | None) -> None:
        mapping[node_id] = {"id": node_id, "message": message, "parent": parent, "children": []}
        if parent:
            mapping[parent]["children"].append(node_id)

    add(f"{cid}-root", None, None)
    add(f"{cid}-sys", f"{cid}-root", node_message(f"{cid}-sys", "system", "", None, hidden=True))
    parent = f"{cid}-sys"
    for m in range(messages):
        role = "user" if m % 2 == 0 else "assistant"
        node_id = f"{cid}-{m:04d}"
        when = start + m * 40 + rng.random()
        if number % 10 == 0 and m == 1:
            add(f"{node_id}-old", parent, node_message(f"{node_id}-old", role, message_text(rng, role), when - 20))
        add(node_id, parent, node_message(node_id, role, message_text(rng, role), when))
        parent = node_id
    title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))).capitalize()
    return {"title": title, "create_time": start, "update_time": start + messages * 40, "mapping": mapping,
            "moderation_results": [], "current_node": parent, "plugin_ids": None, "conversation_id": cid,
            "conversation_template_id": None, "gizmo_id": None, "is_archived": False, "safe_urls": [], "id": cid}


def write_export(path: Path, conversations: int, messages: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("[")
        for number in range(conversations):
            if number:
                handle.write(", ")
            handle.write(json.dumps(conversation(rng, number, messages), ensure_ascii=False))
        handle.write("]")


READER = """
import json, sys, time
start = time.perf_counter()
if sys.argv[1] == "stream":
    from memvault.moving.jsonstream import iter_array
    n = sum(1 for _ in iter_array(sys.argv[2]))
else:
    with open(sys.argv[2], encoding="utf-8") as handle:
        n = len(json.load(handle))
print(json.dumps({"conversations": n, "seconds": time.perf_counter() - start}))
"""


class Child:
    def __init__(self, wall: float, cpu: float, rss_mb: float, rc: int, stdout: str, stderr: str):
        self.wall, self.cpu, self.rss_mb, self.rc, self.stdout, self.stderr = wall, cpu, rss_mb, rc, stdout, stderr

    def figures(self) -> dict:
        return {"wall_s": round(self.wall, 2), "cpu_s": round(self.cpu, 2), "peak_rss_mb": round(self.rss_mb, 1)}


def run(argv: list[str], env: dict[str, str], stdout_path: Path | None = None) -> Child:
    """One fresh process: wall, CPU (user + system) and its own peak RSS (wait4)."""
    with tempfile.TemporaryFile() as err, (open(stdout_path, "wb") if stdout_path else tempfile.TemporaryFile()) as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # Ctrl-C of the benchmark: its child goes too
            stop_process(proc)
            raise
        wall = time.perf_counter() - start
        rc = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = ""
        if stdout_path is None:
            out.seek(0)
            text = out.read().decode(errors="replace")
        child = Child(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, rc, text,
                      err.read().decode(errors="replace"))
    if rc != 0:
        raise SystemExit(f"failed ({rc}): {' '.join(argv)}\n{child.stderr[-3000:]}")
    return child


def memvault_exe() -> list[str]:
    beside = Path(sys.executable).parent / "memvault"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "memvault"]


def measure(args) -> dict:
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = with_this_checkout({k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")})
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["MEMVAULT_CACHE_DIR"] = os.environ.get("MEMVAULT_CACHE_DIR", str(REPO / ".pytest_cache" / "model-cache"))
    export = work / "conversations.json"
    started = time.perf_counter()
    write_export(export, args.conversations, args.messages)
    report: dict = {"meta": {"commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M"),
                             "conversations": args.conversations, "messages": args.conversations * args.messages,
                             "export_mb": round(export.stat().st_size / 1048576, 1),
                             "generate_s": round(time.perf_counter() - started, 1),
                             "loadavg_at_start": os.getloadavg(), "nproc": os.cpu_count()}}
    steps = report["steps"] = {}

    def step(name: str, figures: dict) -> None:
        """Record a step and save the report so far: a long run cut short still has its numbers."""
        steps[name] = {**figures, "loadavg": round(os.getloadavg()[0], 1)}
        report["meta"]["loadavg_at_end"] = os.getloadavg()
        save(report, args)
        print(f"{name}: {steps[name]}", file=sys.stderr, flush=True)

    for mode in ("stream", "json.load"):
        child = run([sys.executable, "-c", READER, mode, str(export)], env)
        step(f"read ({mode})", child.figures())
    exe = memvault_exe()
    vault, other = work / "vault", work / "other"
    child = run([*exe, "-q", "--vault", str(vault), "import", "chatgpt", str(export), "--dry-run", "--json"], env)
    step("import chatgpt --dry-run (empty vault)", {**child.figures(), "would_add": json.loads(child.stdout)["added"]})
    child = run([*exe, "-q", "--vault", str(vault), "import", "chatgpt", str(export), "--json"], env)
    outcome = json.loads(child.stdout)
    step("import chatgpt", {**child.figures(), "added": outcome["added"]})
    child = run([*exe, "-q", "--vault", str(vault), "import", "chatgpt", str(export), "--json"], env)
    outcome = json.loads(child.stdout)
    step("import chatgpt again (all there)", {**child.figures(), "added": outcome["added"],
                                              "already": outcome["already"]})
    first, second = work / "export-1.jsonl", work / "export-2.jsonl"
    child = run([*exe, "-q", "--vault", str(vault), "export", "--all"], env, stdout_path=first)
    step("export --all (jsonl)", {**child.figures(), "mb": round(first.stat().st_size / 1048576, 1)})
    child = run([*exe, "-q", "--vault", str(other), "import", "jsonl", str(first)], env)
    step("import jsonl (of that export)", child.figures())
    run([*exe, "-q", "--vault", str(other), "export", "--all"], env, stdout_path=second)
    report["round_trip_identical"] = first.read_bytes() == second.read_bytes()
    report["meta"]["loadavg_at_end"] = os.getloadavg()
    return report


def save(report: dict, args) -> None:
    path = Path(args.out) if args.out else OUT / ("import_export-quick.json" if args.quick else "import_export.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))


def table(report: dict) -> str:
    meta = report["meta"]
    lines = [f"{meta['conversations']:,} conversations, {meta['messages']:,} messages, {meta['export_mb']} MB "
             f"conversations.json (commit {meta['commit']}, {meta['date']}, load {meta['loadavg_at_start'][0]:.1f} "
             f"-> {meta['loadavg_at_end'][0]:.1f})", "",
             "| step | wall | CPU | peak RSS | notes |", "|---|---|---|---|---|"]
    for name, fig in report["steps"].items():
        notes = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in fig.items()
                          if k not in ("wall_s", "cpu_s", "peak_rss_mb"))
        lines.append(f"| {name} | {fig['wall_s']:.1f} s | {fig['cpu_s']:.1f} s | {fig['peak_rss_mb']:.0f} MB | {notes} |")
    lines.append("")
    lines.append(f"export -> import jsonl -> export byte-identical: {report.get('round_trip_identical', 'not reached')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=50, help="messages per conversation")
    parser.add_argument("--quick", action="store_true", help="20 conversations x 6 messages")
    parser.add_argument("--out", metavar="JSON", help="where the report goes (default: bench/out/import_export"
                                                      "[-quick].json)")
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "memvault-bench-import"))
    parser.add_argument("--table", metavar="JSON", help="print the table of an earlier run")
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    if args.quick:
        args.conversations, args.messages = 20, 6
    report = measure(args)
    save(report, args)
    print(table(report))
    return 0 if report["round_trip_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
