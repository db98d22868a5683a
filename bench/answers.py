#!/usr/bin/env python3
"""The answer, end to end (issues 29 and 45): LoCoMo questions asked through `Memvault.ask` with a
local model as the reader, the replies scored against the gold answers.

Rows, same reader and the same questions, interleaved per question (so a run cut short still
compares like with like):
  none    `ask(..., use_memory=False)`: the reader alone (the --after checkout's prompt: it states today)
  main    the checkout given by --main (a detached worktree of main at the commit to compare against)
  after   the checkout given by --after (default this one)
  ranked  --after's code with the block's results in rank order instead of by session (issue 45:
          "measure both orders"; needs an injection_block that takes `order`)
  before  the checkout given by --before (issue 29's run: the commit before branch `time`, undated)
Each checkout's worker is a subprocess of this file with PYTHONPATH set to it, and builds its own
vaults (one per conversation, every LoCoMo turn a chat turn, as bench/locomo.py does) with its own
code, in a folder named by its commit. Every ask is in the question's conversation with the clock at
the question's query_now, learning off and history [] (no chat session: each question stands alone);
the two turns an ask stores are removed right after it, so no question sees an earlier one's answer.

The reader's answers are cached per request (the messages, so per question and block; temperature 0):
the workers talk to the LLM through a small caching proxy in this process, so a row whose block did not
change, or a rerun, asks the model nothing (--cache).

Scores, per answer: token F1 against the gold answer after the LoCoMo paper's normalisation
(lowercase, punctuation and the articles a/an/the removed; no stemming, no comma splitting of
multi-hop answers), "contains": the normalised gold answer appears in the normalised reply, and for
temporal questions whose gold names a date the date score (`date_score`: the day, month or year the
reply names against the gold's; a near date scores part, a wrong or missing one 0).

    python bench/answers.py --limit 30            # the next 30 questions (all rows), appended to --out
    python bench/answers.py --time 3              # time 3 questions (all rows) and stop
    python bench/answers.py --first 2             # the drawn temporal questions first, then the others
    python bench/answers.py --report              # the table, with paired bootstrap intervals
"""

from __future__ import annotations

import argparse
import calendar
import collections
import datetime as dt
import hashlib
import json
import os
import random
import re
import shutil
import string
import subprocess
import threading
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench" / "locomo"
DEV_CONVERSATIONS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47")
PER_CONVERSATION = 24  # 7 x 24 = 168 questions of categories 1-4
SEED = 29
ROWS = ("none", "main", "after")
KNOWN_ROWS = ("none", "main", "after", "ranked", "before")
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



# The date score (issue 45): LoCoMo's temporal answers are dates ("7 May 2023", "The week before 9 June
# 2023", "September, 2022", "2022"); token F1 scores "8 May 2023" as a third wrong and "2023-05-07" as all
# wrong. Each date the reply names is a span of days (a day, a month, a year), and so is the gold's;
# the score is how close the nearest of them is, on the gold's own scale.
MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_DATE_PATTERNS = [  # (pattern, the groups' meaning), most precise first; a span found is cut out of the text
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), "ymd"),
    (re.compile(rf"\b{_DAY}\s*(?:of\s+)?{_MONTH}\s*,?\s*{_YEAR}\b", re.I), "dmy"),
    (re.compile(rf"\b{_MONTH}\s*{_DAY}\s*,?\s*{_YEAR}\b", re.I), "mdy"),
    (re.compile(rf"\b{_DAY}\s*(?:of\s+)?{_MONTH}(?![a-z])", re.I), "dm"),
    (re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!\s*(?:years?|days?|weeks?|months?))", re.I), "md"),
    (re.compile(rf"\b{_MONTH}\s*,?\s*(?:of\s+)?{_YEAR}\b", re.I), "my"),
    (re.compile(rf"\b{_MONTH}(?![a-z])", re.I), "m"),
    (re.compile(rf"\b{_YEAR}\b"), "y"),
]
_WEEKDAY_NAMES = [d.lower() for d in calendar.day_name]
# The gold's phrases around a date: "The week before 9 June 2023" is the seven days before it.
_BEFORE = re.compile(r"\b(week|weekend|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\s+(before|of|after)\s*$", re.I)


def date_spans(text: str, year: int | None = None) -> list[tuple[dt.date, dt.date, str]]:
    """The dates a text names, each as (first day, last day, precision day|month|year). A day or month
    without a year takes `year` (the gold's: "On 7 May" for "7 May 2023" is that day); without one it is
    left out. "the week/weekend/Friday before D" is the span it means."""
    text = str(text)
    found, taken = [], [False] * len(text)
    for pattern, kind in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if any(taken[m.start():m.end()]):
                continue
            parts = dict(zip(kind, m.groups()))
            if kind == "m" and parts["m"] == "may":
                continue  # the modal verb ("it may be"), not the month
            y = int(parts["y"]) if "y" in parts else year
            if y is None:
                continue
            month = parts.get("m")
            month = (int(month) if month.isdigit() else MONTHS.get(month.lower().rstrip("."))) if month else None
            try:
                if "d" in parts:
                    first = last = dt.date(y, month, int(parts["d"]))
                    precision = "day"
                elif month:
                    first = dt.date(y, month, 1)
                    last = dt.date(y, month, calendar.monthrange(y, month)[1])
                    precision = "month"
                else:
                    first, last, precision = dt.date(y, 1, 1), dt.date(y, 12, 31), "year"
            except (ValueError, TypeError):
                continue
            phrase = _BEFORE.search(text[:m.start()])
            if phrase and precision == "day":
                unit, where = phrase.group(1).lower(), phrase.group(2).lower()
                if unit in _WEEKDAY_NAMES and where == "before":
                    back = (first.weekday() - _WEEKDAY_NAMES.index(unit)) % 7 or 7
                    first = last = first - dt.timedelta(days=back)
                elif where == "before":
                    first, last = first - dt.timedelta(days=7 if unit == "week" else 3), first - dt.timedelta(days=1)
                elif where == "of":
                    last = first + dt.timedelta(days=6 if unit == "week" else 2)
                else:
                    first, last = first + dt.timedelta(days=1), first + dt.timedelta(days=7 if unit == "week" else 3)
            for i in range(m.start(), m.end()):
                taken[i] = True
            found.append((m.start(), first, last, precision))
    return [(first, last, precision) for _, first, last, precision in sorted(found)]


# How far off a date may be before it scores nothing, in the gold's unit (a week of days, two months,
# two years), and what a reply less precise than the gold gets when it holds the gold's date ("May 2023"
# for "7 May 2023": half).
_WINDOW = {"day": 7, "month": 2, "year": 2}
_COARSER = {("day", "month"): 0.5, ("day", "year"): 0.25, ("month", "year"): 0.5}


def date_score(reply: str, gold) -> float | None:
    """How near the reply's date is to the gold's (0-1); None when the gold names no date (the question
    is not scored by dates: "10 years ago", "Valorant"). Per pair of spans: 1 when the reply's lies within
    the gold's, falling linearly to 0 at _WINDOW of the gold's units away (the day after scores .86, the
    month after .5, the year after .5); a coarser reply that holds the gold's date gets _COARSER."""
    golds = date_spans(gold)
    if not golds:
        return None
    best = 0.0
    for g_first, g_last, g_precision in golds:
        for r_first, r_last, r_precision in date_spans(reply, year=g_first.year):
            coarser = _COARSER.get((g_precision, r_precision))
            if coarser is not None:
                if r_first <= g_last and g_first <= r_last:
                    best = max(best, coarser)
                continue
            if g_precision == "day":
                gap = max((g_first - r_last).days, (r_first - g_last).days, 0)
            elif g_precision == "month":
                gap = abs((r_first.year * 12 + r_first.month) - (g_first.year * 12 + g_first.month))
            else:
                gap = abs(r_first.year - g_first.year)
            best = max(best, max(0.0, 1.0 - gap / _WINDOW[g_precision]))
    return best

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
    import functools

    import memvault
    from memvault.learning import chat as chat_module
    from memvault.reading import retrieval

    print(json.dumps({"ready": memvault.__file__}), flush=True)
    opened = {}
    plain_block = chat_module.injection_block
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
        # The row "ranked": this checkout's block with the results in rank order (issue 45).
        chat_module.injection_block = functools.partial(retrieval.injection_block, order=request["order"]) \
            if request.get("order") else plain_block
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
    def __init__(self, checkout: Path, vaults: Path, data: Path, llm_url: str | None = None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_") or k.startswith("MEMVAULT_LLM_")}
        env.update(PYTHONPATH=str(checkout), MEMVAULT_MAX_ENTRIES="1000000", MEMVAULT_LLM_TIMEOUT="900",
                   GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
                   GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
        if llm_url:
            env["MEMVAULT_LLM_BASE_URL"] = llm_url
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


# -- the reader's cache: a proxy in front of the LLM -------------------------------------------
class ReaderCache:
    """An HTTP proxy on 127.0.0.1 in front of the reader's OpenAI endpoint that answers a request it saw
    before (the same body: model, messages, so the question and its block, and sampling options) from
    a JSON-lines file, and asks the reader otherwise. Temperature 0: the reader's answer to the same
    request is its answer. hits/misses count this run's requests."""

    def __init__(self, upstream: str, path: Path):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import urllib.error
        import urllib.request

        self.upstream, self.path = upstream.rstrip("/"), path
        self.answers: dict[str, dict] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.answers[row["key"]] = row
        self.hits = self.misses = 0
        self.lock = threading.Lock()
        cache = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self, method: str, body: bytes | None):
                suffix = self.path[len("/v1"):] if self.path.startswith("/v1") else self.path
                request = urllib.request.Request(cache.upstream + suffix, data=body, method=method, headers={
                    "Content-Type": "application/json", "Authorization": self.headers.get("Authorization", "")})
                try:
                    with urllib.request.urlopen(request, timeout=1800) as answer:
                        return answer.status, answer.read(), answer.headers.get("Content-Type", "application/json")
                except urllib.error.HTTPError as exc:
                    return exc.code, exc.read(), exc.headers.get("Content-Type", "application/json")

            def do_GET(self):
                self._send(*self._forward("GET", None))

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    key = hashlib.sha256(json.dumps(json.loads(body), sort_keys=True).encode()).hexdigest()
                except ValueError:
                    key = None
                with cache.lock:
                    known = cache.answers.get(key) if key else None
                if known is not None:
                    cache.hits += 1
                    self._send(200, known["body"].encode(), known["content_type"])
                    return
                status, answer, content_type = self._forward("POST", body)
                if status == 200 and key:
                    row = {"key": key, "body": answer.decode(), "content_type": content_type}
                    with cache.lock:
                        cache.misses += 1
                        cache.answers[key] = row
                        with open(cache.path, "a", encoding="utf-8") as sink:
                            sink.write(json.dumps(row) + "\n")
                self._send(status, answer, content_type)

        path.parent.mkdir(parents=True, exist_ok=True)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, name="reader-cache", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the run -----------------------------------------------------------------------------------
def done_so_far(out: Path) -> dict[tuple[str, str, str], dict]:
    """The answers written so far, by (question, row, commit)."""
    if not out.exists():
        return {}
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(r["qid"], r["row"], r["commit"]): r for r in rows}


def commit_of(path: Path) -> str:
    """The checkout's commit, with "+" when its tracked files differ from it (a worktree being edited)."""
    head = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(path), "diff", "--quiet", "HEAD", "--", "memvault"]).returncode != 0
    return head + ("+" if dirty else "")


def run(args) -> int:
    asked = questions(args.data)
    checkout = {"none": args.after, "after": args.after, "ranked": args.after, "main": args.main,
                "before": args.before}
    commits = {row: commit_of(checkout[row]) for row in args.rows}
    done = done_so_far(args.out)
    todo = [q for q in asked if any((q["qid"], row, commits[row]) not in done for row in args.rows)]
    if args.first:  # these categories' questions first (a run the machine's load will cut short)
        first = {int(c) for c in args.first.split(",")}
        todo = [q for q in todo if q["category"] in first] + [q for q in todo if q["category"] not in first]
    todo = todo[:args.time or args.limit or len(todo)]
    if not todo:
        print(f"all {len(asked)} questions answered in {args.out}")
        return 0
    upstream = os.environ.get("MEMVAULT_LLM_BASE_URL")
    cache = ReaderCache(upstream, args.cache) if upstream and args.cache else None
    workers: dict[Path, Worker] = {}
    try:
        for row in args.rows:
            path = checkout[row]
            if path not in workers:
                workers[path] = Worker(path, args.workdir / commits[row].replace("+", "-edited"), args.data,
                                       cache.url if cache else None)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a", encoding="utf-8") as sink:
            for n, q in enumerate(todo):
                rows = [r for r in args.rows if (q["qid"], r, commits[r]) not in done]
                rows = rows[n % len(rows):] + rows[:n % len(rows)]  # who goes first rotates
                for row in rows:
                    request = {"conv_id": q["conv_id"], "question": q["question"] + SUFFIX, "now": q["query_now"],
                               "use_memory": row != "none", "order": "rank" if row == "ranked" else None}
                    hits = cache.hits if cache else 0
                    answer = workers[checkout[row]].ask(request)
                    if answer["error"] and not answer["reply"]:
                        print(f"{q['qid']} {row}: no answer ({answer['error']}); asked again in the next run",
                              file=sys.stderr, flush=True)
                        return 0
                    gold = str(q["answer"])
                    record = {"qid": q["qid"], "row": row, "conv_id": q["conv_id"], "category": q["category"],
                              "question": q["question"], "gold": gold, "reply": answer["reply"],
                              "f1": round(f1(answer["reply"], gold), 4), "contains": contains(answer["reply"], gold),
                              "date": date_score(answer["reply"], gold) if q["category"] == 2 else None,
                              "evidence_injected": bool(set(q["evidence_memory_ids"]) & set(answer["injected"])),
                              "seconds": round(answer["seconds"], 2), "cached": bool(cache and cache.hits > hits),
                              "error": answer["error"], "commit": commits[row],
                              "load": round(os.getloadavg()[0], 2),
                              "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                    print(f"{q['qid']:>14} {row:>6} {answer['seconds']:5.1f}s{'*' if record['cached'] else ' '}"
                          f"f1 {record['f1']:.2f} {'C' if record['contains'] else '-'}  {answer['reply'][:70]!r}",
                          file=sys.stderr, flush=True)
    finally:
        for w in workers.values():
            w.stop()
        if cache:
            cache.stop()
            print(f"reader cache: {cache.hits} answers reused, {cache.misses} asked", file=sys.stderr)
    return 0


# -- the report --------------------------------------------------------------------------------
def chosen(out: Path, rows: tuple[str, ...], pins: dict[str, str]) -> dict[str, dict[str, dict]]:
    """qid -> row -> answer, each row's answers of one commit: the pinned one, else the row's latest."""
    done = done_so_far(out)
    latest: dict[str, tuple[str, str]] = {}
    for (qid, row, commit), r in done.items():
        if row in rows and (row not in latest or r["at"] > latest[row][0]):
            latest[row] = (r["at"], commit)
    by_q = collections.defaultdict(dict)
    for (qid, row, commit), r in done.items():
        if row in latest and commit == pins.get(row, latest[row][1]):
            by_q[qid][row] = r
    return {qid: rs for qid, rs in by_q.items() if all(row in rs for row in rows)}


def report(out: Path, rows: tuple[str, ...], pins: dict[str, str] | None = None, samples: int = 2000) -> int:
    complete = chosen(out, rows, pins or {})
    if not complete:
        print("no question answered in every row yet")
        return 1
    qids = sorted(complete)
    first = complete[qids[0]]
    loads = [r["load"] for rs in complete.values() for r in rs.values()]
    seconds = [r["seconds"] for rs in complete.values() for r in rs.values() if not r.get("cached")]
    print(f"{len(qids)} questions answered in every row ({', '.join(rows)}); "
          f"{len({complete[q][rows[0]]['conv_id'] for q in qids})} conversations; "
          f"reader seconds/answer median {sorted(seconds)[len(seconds) // 2] if seconds else 0:.1f}; "
          f"load {min(loads):.1f}-{max(loads):.1f}; commits " + ", ".join(f"{row} {first[row]['commit']}" for row in rows))

    def mean(values):
        values = list(values)
        return sum(values) / len(values) if values else float("nan")

    def date_of(r):  # a temporal question whose gold names no date is scored by F1 alone
        return r.get("date") if r.get("date") is not None else None

    dated = [q for q in qids if complete[q][rows[0]]["category"] == 2 and date_of(complete[q][rows[0]]) is not None]
    header = f"{'row':<8}{'F1':>7}{'contains':>10}{'evidence':>10}" + "".join(
        f"{CATEGORY_NAMES[c][:11]:>13}" for c in CATEGORY_NAMES) + f"{'date score':>12}"
    print(header + f"   (per category: F1, n; date score: temporal questions with a dated gold, n = {len(dated)})")
    for row in rows:
        cats = "".join(f"{mean(complete[q][row]['f1'] for q in qids if complete[q][row]['category'] == c):>8.3f}"
                       f" {sum(1 for q in qids if complete[q][row]['category'] == c):>4}" for c in CATEGORY_NAMES)
        print(f"{row:<8}{mean(complete[q][row]['f1'] for q in qids):>7.3f}"
              f"{mean(complete[q][row]['contains'] for q in qids):>10.3f}"
              f"{mean(complete[q][row]['evidence_injected'] for q in qids) if row != 'none' else float('nan'):>10.3f}"
              + cats + f"{mean(date_of(complete[q][row]) for q in dated):>12.3f}")
    rng = random.Random(SEED)
    pairs = [(b, w) for b, w in (("after", "main"), ("main", "none"), ("after", "ranked"), ("after", "before"),
                                 ("before", "none")) if b in rows and w in rows]
    for better, worse in pairs:
        for measure, among in (("f1", qids), ("contains", qids),
                               ("f1 temporal", [q for q in qids if complete[q][rows[0]]["category"] == 2]),
                               ("date score", dated)):
            key = {"f1 temporal": "f1", "date score": "date"}.get(measure, measure)
            if not among:
                continue
            diffs = [float(complete[q][better][key]) - float(complete[q][worse][key]) for q in among]
            boots = sorted(mean(rng.choice(diffs) for _ in diffs) for _ in range(samples))
            low, high = boots[int(0.025 * samples)], boots[int(0.975 * samples) - 1]
            per_conv = collections.defaultdict(list)
            for q, d in zip(among, diffs):
                per_conv[complete[q][better]["conv_id"]].append(d)
            convs = " ".join(f"{c[5:]}:{mean(v):+.2f}" for c, v in sorted(per_conv.items()))
            print(f"{better} - {worse}, {measure} (n {len(among)}): {mean(diffs):+.3f} "
                  f"(95% paired bootstrap {low:+.3f} to {high:+.3f}); per conversation {convs}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=HERE / "out" / "answers.jsonl", help="results, one line per answer")
    ap.add_argument("--cache", type=Path, default=HERE / "out" / "answers-reader-cache.jsonl",
                    help="the reader's answers per request (question and block), reused by every run")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/memvault-answers"),
                    help="the rows' vaults, one folder per checkout commit")
    ap.add_argument("--main", type=Path, default=Path("/tmp/mv-main"),
                    help="a checkout of main to compare against (git worktree add --detach DIR main)")
    ap.add_argument("--before", type=Path, default=Path("/tmp/mv-before"),
                    help="a checkout of memvault before issue 29 (git worktree add --detach DIR 753848a)")
    ap.add_argument("--after", type=Path, default=HERE.parent,
                    help="the checkout of the 'after', 'ranked' and 'none' rows (default this one; a fixed "
                         "commit's worktree keeps a long run on one version while this one changes)")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"of {', '.join(KNOWN_ROWS)}")
    ap.add_argument("--pin", action="append", default=[], metavar="ROW=COMMIT",
                    help="--report: that row's answers of this commit (default: the row's latest)")
    ap.add_argument("--first", default="", metavar="CATEGORIES",
                    help="answer these categories' drawn questions first (e.g. 2: temporal), then the rest")
    ap.add_argument("--limit", type=int, default=None, help="answer the next N questions (every row), then stop")
    ap.add_argument("--time", type=int, default=None, help="like --limit, to see the seconds per question")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--vaults", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.rows = tuple(args.rows.split(","))
    unknown = set(args.rows) - set(KNOWN_ROWS)
    if unknown:
        ap.error(f"unknown rows {', '.join(sorted(unknown))} (known: {', '.join(KNOWN_ROWS)})")
    if args.worker:
        return worker(args.vaults, args.data)
    if args.report:
        return report(args.out, args.rows, dict(p.split("=", 1) for p in args.pin))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
