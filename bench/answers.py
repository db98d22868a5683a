#!/usr/bin/env python3
"""The answer, end to end (issue 29, measure 3): LoCoMo questions asked through `Memvault.ask`
with a local model as the reader, the replies scored against the gold answers.

Rows, same reader and the same questions, interleaved per question (so a run cut short still
compares like with like):
  none    `ask(..., use_memory=False)`: the reader alone (this checkout's prompt: it states today's date)
  before  memvault before issue 29 (--before: a checkout of the commit before branch `time` was
          merged, 753848a; its injection block is undated), run as a subprocess with its own PYTHONPATH
  after   this checkout (dated block, time in questions)
Each row's worker is a subprocess of this file with PYTHONPATH set to its checkout, and builds its
own vaults (one per conversation, every LoCoMo turn a chat turn, as bench/locomo.py does) with its
own code. Every ask is in the question's conversation with the clock at the question's query_now,
learning off and history [] (no chat session: each question stands alone); the two turns an ask
stores are removed right after it, so no question sees an earlier one's answer.

Scores, per answer: token F1 against the gold answer after the LoCoMo paper's normalisation
(lowercase, punctuation and the articles a/an/the removed; no stemming, no comma splitting of
multi-hop answers) and "contains": the normalised gold answer appears in the normalised reply.

    python bench/answers.py --limit 30            # the next 30 questions (all rows), appended to --out
    python bench/answers.py --time 3              # time 3 questions (all rows) and stop
    python bench/answers.py --report              # the table, with paired bootstrap intervals

Run every asking invocation under the shared LLM lock: `flock /work/coord/llm.lock python3 bench/answers.py ...`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import shutil
import string
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench" / "locomo"
DEV_CONVERSATIONS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47")
PER_CONVERSATION = 24  # 7 x 24 = 168 questions of categories 1-4
SEED = 29
ROWS = ("none", "before", "after")
SUFFIX = " Answer with a short phrase."  # the same for every row: LoCoMo's gold answers are short
MAX_TOKENS = 48
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


# -- scoring -----------------------------------------------------------------------------------
def normalise(text: str) -> str:
    """The LoCoMo paper's (and SQuAD's) answer normalisation."""
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def f1(reply: str, gold: str) -> float:
    said, wanted = normalise(reply).split(), normalise(gold).split()
    common = collections.Counter(said) & collections.Counter(wanted)
    same = sum(common.values())
    if not said or not wanted or same == 0:
        return 0.0
    precision, recall = same / len(said), same / len(wanted)
    return 2 * precision * recall / (precision + recall)


def contains(reply: str, gold: str) -> bool:
    wanted = normalise(gold)
    return bool(wanted) and f" {wanted} " in f" {normalise(reply)} "


# -- the questions -----------------------------------------------------------------------------
def questions(data: Path) -> list[dict]:
    """PER_CONVERSATION questions of categories 1-4 from each dev conversation, drawn with a fixed
    seed, in an order that takes one conversation after another (a run cut short is spread)."""
    by_conv = collections.defaultdict(list)
    for line in open(data / "locomo_queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        if q["conv_id"] in DEV_CONVERSATIONS and q["category"] in CATEGORY_NAMES:
            by_conv[q["conv_id"]].append(q)
    rng = random.Random(SEED)
    drawn = {c: rng.sample(by_conv[c], PER_CONVERSATION) for c in DEV_CONVERSATIONS}
    return [drawn[c][i] for i in range(PER_CONVERSATION) for c in DEV_CONVERSATIONS]


# -- the worker: one checkout's memvault, in its own process -----------------------------------
def turn_lines(conv: str, turns: list[dict]) -> str:
    """bench/locomo.py's turn_lines (copied: the worker may not import this checkout's bench)."""
    speakers = list(dict.fromkeys(t["speaker"] for t in turns))
    return "".join(json.dumps({
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, "locomo:" + t["memory_id"])),
        "role": "user" if t["speaker"] == speakers[0] else "assistant", "conversation_id": conv,
        "created_at": t["created_at"], "text": t["content"], "meta": {"memory_id": t["memory_id"]}}) + "\n"
        for t in turns)


def worker(vaults: Path, data: Path) -> int:
    """Answer requests from stdin (JSON lines) on stdout, one line each."""
    import memvault

    print(json.dumps({"ready": memvault.__file__}), flush=True)
    opened = {}
    for line in sys.stdin:
        request = json.loads(line)
        conv = request["conv_id"]
        if conv not in opened:
            folder = vaults / conv
            done = folder / ".built"
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                turns = [json.loads(t) for t in open(data / "locomo_memories.jsonl", encoding="utf-8")]
                source = vaults / f"{conv}.jsonl"
                source.write_text(turn_lines(conv, [t for t in turns if t["conv_id"] == conv]), encoding="utf-8")
                memvault.open_vault(folder).import_from("jsonl", source)
                done.write_text("ok")
            opened[conv] = memvault.open_vault(folder)
        vault = opened[conv]
        started = time.perf_counter()
        try:
            result = vault.ask(request["question"], conversation=conv, now=request["now"], learn=False,
                               history=[], use_memory=request["use_memory"],
                               llm_options={"max_tokens": MAX_TOKENS})
            error = result.upkeep_error
        except Exception as exc:  # the reader failed (a timeout under load): said, not scored, asked again later
            result, error = None, f"{type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - started
        injected = [m.meta.get("memory_id") for m in (result.memories if result else [])]
        if result is not None:
            stored = [t.id for t in (result.user_turn, result.assistant_turn) if t is not None]
        else:  # the user's turn was stored before the model was asked
            stored = [m.id for m in vault.recent(conv, limit=5) if m.extra.get("origin") == "chat"]
        if stored:
            vault.remove(stored)  # no later question sees this one's exchange
        print(json.dumps({"reply": result.reply if result else "", "error": error, "seconds": seconds,
                          "injected": injected}), flush=True)
    return 0


class Worker:
    def __init__(self, checkout: Path, vaults: Path, data: Path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_") or k.startswith("MEMVAULT_LLM_")}
        env.update(PYTHONPATH=str(checkout), MEMVAULT_MAX_ENTRIES="1000000", MEMVAULT_LLM_TIMEOUT="900",
                   GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
                   GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
        vaults.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", "--vaults", str(vaults),
                                      "--data", str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, cwd=str(vaults))
        hello = json.loads(self.proc.stdout.readline())
        self.module = hello["ready"]
        if not self.module.startswith(str(checkout)):
            raise SystemExit(f"worker for {checkout} imported {self.module}")

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("a worker stopped")
        return json.loads(line)

    def stop(self) -> None:
        """Its stdin closed, it ends; SIGTERM, then SIGKILL, if it does not."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- the run -----------------------------------------------------------------------------------
def done_so_far(out: Path) -> dict[tuple[str, str], dict]:
    if not out.exists():
        return {}
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(r["qid"], r["row"]): r for r in rows}


def run(args) -> int:
    asked = questions(args.data)
    done = done_so_far(args.out)
    todo = [q for q in asked if any((q["qid"], row) not in done for row in args.rows)]
    todo = todo[:args.time or args.limit or len(todo)]
    if not todo:
        print(f"all {len(asked)} questions answered in {args.out}")
        return 0
    workdir = args.workdir
    workers = {"after": Worker(args.after, workdir / "after", args.data)}
    if "before" in args.rows:
        workers["before"] = Worker(args.before, workdir / "before", args.data)
    commits = {row: subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                                   text=True).stdout.strip() for row, path in (("after", args.after), ("before", args.before))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(args.out, "a", encoding="utf-8") as sink:
            for n, q in enumerate(todo):
                rows = [r for r in args.rows if (q["qid"], r) not in done]
                rows = rows[n % len(rows):] + rows[:n % len(rows)]  # who goes first rotates
                for row in rows:
                    request = {"conv_id": q["conv_id"], "question": q["question"] + SUFFIX, "now": q["query_now"],
                               "use_memory": row != "none"}
                    answer = workers["after" if row == "none" else row].ask(request)
                    if answer["error"] and not answer["reply"]:
                        print(f"{q['qid']} {row}: no answer ({answer['error']}); asked again in the next run",
                              file=sys.stderr, flush=True)
                        return 0
                    gold = str(q["answer"])
                    record = {"qid": q["qid"], "row": row, "conv_id": q["conv_id"], "category": q["category"],
                              "question": q["question"], "gold": gold, "reply": answer["reply"],
                              "f1": round(f1(answer["reply"], gold), 4), "contains": contains(answer["reply"], gold),
                              "evidence_injected": bool(set(q["evidence_memory_ids"]) & set(answer["injected"])),
                              "seconds": round(answer["seconds"], 2), "error": answer["error"],
                              "commit": commits["after" if row == "none" else row],
                              "load": round(os.getloadavg()[0], 2),
                              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                    print(f"{q['qid']:>14} {row:>6} {answer['seconds']:5.1f}s f1 {record['f1']:.2f} "
                          f"{'C' if record['contains'] else '-'}  {answer['reply'][:70]!r}", file=sys.stderr, flush=True)
    finally:
        for w in workers.values():
            w.stop()
    return 0


# -- the report --------------------------------------------------------------------------------
def report(out: Path, rows: tuple[str, ...], samples: int = 2000) -> int:
    done = done_so_far(out)
    by_q = collections.defaultdict(dict)
    for (qid, row), r in done.items():
        by_q[qid][row] = r
    complete = {qid: rs for qid, rs in by_q.items() if all(row in rs for row in rows)}
    if not complete:
        print("no question answered in every row yet")
        return 1
    qids = sorted(complete)
    first = complete[qids[0]]
    loads = [r["load"] for rs in complete.values() for r in rs.values()]
    seconds = [r["seconds"] for rs in complete.values() for r in rs.values()]
    print(f"{len(qids)} questions answered in every row ({', '.join(rows)}); "
          f"{len({complete[q][rows[0]]['conv_id'] for q in qids})} conversations; "
          f"reader seconds/answer median {sorted(seconds)[len(seconds) // 2]:.1f}; load {min(loads):.1f}-{max(loads):.1f}; "
          "commits " + ", ".join(f"{row} {first[row]['commit']}" for row in rows))

    def mean(values):
        values = list(values)
        return sum(values) / len(values) if values else float("nan")

    header = f"{'row':<8}{'F1':>7}{'contains':>10}{'evidence in block':>19}" + "".join(
        f"{CATEGORY_NAMES[c][:11]:>13}" for c in CATEGORY_NAMES)
    print(header + "   (per category: F1, n)")
    for row in rows:
        cats = "".join(f"{mean(complete[q][row]['f1'] for q in qids if complete[q][row]['category'] == c):>8.3f}"
                       f" {sum(1 for q in qids if complete[q][row]['category'] == c):>4}" for c in CATEGORY_NAMES)
        print(f"{row:<8}{mean(complete[q][row]['f1'] for q in qids):>7.3f}"
              f"{mean(complete[q][row]['contains'] for q in qids):>10.3f}"
              f"{mean(complete[q][row]['evidence_injected'] for q in qids) if row != 'none' else float('nan'):>19.3f}"
              + cats)
    rng = random.Random(SEED)
    for better, worse in zip(rows[::-1], rows[::-1][1:]):
        for measure in ("f1", "contains"):
            diffs = [float(complete[q][better][measure]) - float(complete[q][worse][measure]) for q in qids]
            boots = sorted(mean(rng.choice(diffs) for _ in diffs) for _ in range(samples))
            low, high = boots[int(0.025 * samples)], boots[int(0.975 * samples) - 1]
            per_conv = collections.defaultdict(list)
            for q, d in zip(qids, diffs):
                per_conv[complete[q][better]["conv_id"]].append(d)
            convs = " ".join(f"{c[5:]}:{mean(v):+.2f}" for c, v in sorted(per_conv.items()))
            print(f"{better} - {worse}, {measure}: {mean(diffs):+.3f} (95% paired bootstrap {low:+.3f} to {high:+.3f}); "
                  f"per conversation {convs}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=HERE / "out" / "answers.jsonl", help="results, one line per answer")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/memvault-answers"), help="the rows' vaults")
    ap.add_argument("--before", type=Path, default=Path("/tmp/mv-before"),
                    help="a checkout of memvault before issue 29 (git worktree add --detach DIR 753848a)")
    ap.add_argument("--after", type=Path, default=HERE.parent,
                    help="the checkout of the 'after' and 'none' rows (default this one; a fixed commit's "
                         "worktree keeps a long run on one version while this one changes)")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--limit", type=int, default=None, help="answer the next N questions (every row), then stop")
    ap.add_argument("--time", type=int, default=None, help="like --limit, to see the seconds per question")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--vaults", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.rows = tuple(args.rows.split(","))
    if args.worker:
        return worker(args.vaults, args.data)
    if args.report:
        return report(args.out, args.rows)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
