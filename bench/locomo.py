#!/usr/bin/env python3
"""Retrieval quality on LoCoMo (issues 5 and 15), following shared/bench/locomo/README.md.

One vault per conversation, built with the library's `import_from("jsonl", ...)` (what `memvault
import jsonl` runs): one chat turn per LoCoMo turn (the first speaker's turns as role user, the
other's as assistant, in conversation <conv id>), body = the turn's content ("Speaker: text"),
created_at = the turn's time, the turn's memory_id kept in the front matter. Every question goes
through `Memvault.search_many` (what `memvault search --queries` runs) in conversation <conv id>
with the clock at the question's query_now and k = 25; runs are scored with locomo_score.py.

The honest protocol of issue 15: every change and parameter was chosen on the TUNING
conversations; the table reports them, the UNTOUCHED ones, and all seven apart. Besides
recall on categories 1-4 it counts what comes back for questions that have no answer:
category 5 (adversarial), ABSENT (topics none of the conversations has) and a small personal
vault's own absent topics (with its answerable questions beside them).

    python bench/locomo.py                 # all conversations, the pipeline and its ablations
    python bench/locomo.py --quick         # smoke: 150 turns of one conversation, 30 questions, 3 configs
    python bench/locomo.py --experiments   # also the ablations of bench/locomo_variants.py
    python bench/locomo.py --reuse --only-experiments --variants "lost: z-score scaling,before"

Writes bench/out/locomo.json (or --out) and prints a table.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import sqlite3
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from checkout import git_commit  # bench/, the script's folder, is on sys.path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # in-process experiments use this checkout's memvault
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench" / "locomo"

# name -> (description, `Memvault.search` options)
PURE = {"rerank": False, "recency_weight": 0.0, "mmr_lambda": 1.0, "relevance_floor": 0.0, "session_weight": 0.0}
CONFIGS = {
    "default": ("default pipeline (rerank when available)", {}),
    "no-floor": ("no relevance floor", {"relevance_floor": 0.0}),
    "no-session": ("no session lift (weight 0)", {"session_weight": 0.0}),
    "no-recency": ("no recency (weight 0)", {"recency_weight": 0.0}),
    "no-mmr": ("no MMR (lambda 1.0)", {"mmr_lambda": 1.0}),
    "dense": ("dense only (no rerank, session, recency, MMR or floor)", {"retriever": "dense", **PURE}),
    "bm25": ("BM25 only (no rerank, session, recency, MMR or floor)", {"retriever": "bm25", **PURE}),
    "hybrid": ("hybrid candidates only (no rerank, session, recency, MMR or floor)", PURE),
}
# Configurations that need the LLM (the settings in MEMVAULT_LLM_* of this process, e.g.
# `eval "$(../shared/llm/local-llm.sh env)"`); not run unless named in --configs. The third item:
# settings the vault is opened with.
LLM_CONFIGS = {"llm-rerank": ("default + LLM reranker (llm_rerank)", {}, {"llm_rerank": True})}
QUICK_CONFIGS = ["default", "bm25", "hybrid"]
# LoCoMo's categories 1-4 by name, in the order of their number (locomo_score.py's summary keys).
CATEGORY_NAMES = ("multi-hop", "temporal", "open-domain", "single-hop")
K = 25  # locomo_score.py wants at least 25 ranked ids
KEPT_AT = 10  # "results returned" for unanswerable questions: how many of the first 10 places are filled

# The honest protocol of issue 15: every change and parameter is chosen on the TUNING
# conversations only; the UNTOUCHED ones are measured, never looked at while choosing. The split
# was fixed before any measurement, by a rule that knows nothing of the data: the first four of
# the seven development conversations in the order of sha256(conversation id).
DEV_CONVERSATIONS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47")
TUNING = tuple(sorted(sorted(DEV_CONVERSATIONS, key=lambda c: hashlib.sha256(c.encode()).hexdigest())[:4]))
UNTOUCHED = tuple(c for c in DEV_CONVERSATIONS if c not in TUNING)
assert TUNING == ("conv-26", "conv-41", "conv-44", "conv-47"), TUNING  # fixed up front; never changed

# Questions about topics no conversation has: none of their key words occurs in the seven
# (checked with grep). {A} and {B} are a conversation's two speakers: a question about a person
# the vault knows, on a topic it does not.
ABSENT = [
    "What is the wifi password?", "Which bank holds the mortgage?", "What is the dentist's phone number?",
    "What is the router's IP address?", "How much does the car insurance cost per month?",
    "What did the plumber charge to fix the sink?", "When does the passport expire?",
    "Which airline lost the luggage?", "What is on the electricity bill this month?",
    "Which credit card has the lowest interest rate?",
    "What is {A}'s blood type?", "What salary does {B} earn?", "Which cryptocurrency did {A} buy?",
    "When is {B}'s surgery scheduled?", "What is the license plate of {A}'s car?", "Which stocks does {B} own?",
    "Did {A} pay the parking ticket?", "What is in {B}'s spreadsheet?", "Which antibiotic was {A} prescribed?",
    "How many square meters is {B}'s apartment?",
]

# A small personal vault (tests/test_search.py's facts, the three, a password), with
# questions it answers (the numbers of the facts that answer) and questions it has nothing for.
PERSONAL_FACTS = [
    "The user works as a software engineer in Berlin", "The user's favourite colour is green",
    "The user has a dog named Rex", "The user plays tennis on Saturdays", "The user is allergic to peanuts",
    "The user drives a blue Volvo", "The user's wife is named Anne", "The user's sister lives in Madrid",
    "The user is learning Japanese", "The user prefers window seats on planes", "The user was born in 1985",
    "The user's daughter is called Lily", "The user reads science fiction", "The user lives in Lisbon",
    "My wifi password is zebra42",
]
PERSONAL_PRESENT = [
    ("What is my wife's name?", {6}), ("what should I not eat", {4}), ("which car do I drive", {5}),
    ("where does my sister live", {7}), ("what sport do I play", {3}), ("what are my hobbies", {3, 8, 12}),
    ("pet", {2}), ("Who is Anne?", {6}), ("languages", {8}), ("when was I born", {10}),
    ("what do I do for a living", {0}), ("zebra42", {14}), ("what books do I like", {12}), ("my kids", {11}),
    ("where do I work", {0}), ("favorite color", {1}), ("where do I live", {13}), ("what is the wifi password", {14}),
]
PERSONAL_ABSENT = [
    "abc", "what is my blood type", "what's my mortgage rate", "dentist appointment", "which stocks do I own",
    "how much is my rent", "what did the plumber charge", "when does my passport expire", "what is my shoe size",
    "the quarterly tax report", "what medication do I take", "who is my doctor", "what's the weather tomorrow",
    "how old is my mother", "what is my brother's job",
]
PERSONAL_K = 5  # the default top_k: what a chat would inject


def clean_environment() -> None:
    """This process's MEMVAULT_* settings must not leak into the vaults it opens (all but the LLM's
    endpoint, which the LLM configurations use); git needs a name for the commits of the build."""
    for key in [k for k in os.environ if k.startswith("MEMVAULT_")]:
        if not key.startswith("MEMVAULT_LLM_") or key == "MEMVAULT_LLM_RERANK":
            del os.environ[key]
    for key, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@localhost"),
                       ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@localhost")):
        os.environ.setdefault(key, value)


def load(data: Path, conversations: list[str] | None, max_questions: int | None, max_turns: int | None = None):
    """Turns and questions per conversation. max_turns keeps the first turns of each conversation and
    only the questions whose evidence is all among them (smoke mode)."""
    memories = collections.defaultdict(list)
    for line in open(data / "locomo_memories.jsonl", encoding="utf-8"):
        m = json.loads(line)
        memories[m["conv_id"]].append(m)
    queries = collections.defaultdict(list)
    for line in open(data / "locomo_queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        queries[q["conv_id"]].append(q)
    chosen = conversations or sorted(memories)
    missing = [c for c in chosen if c not in memories]
    if missing:
        raise SystemExit(f"no conversation {missing[0]!r} in {data}")
    for conv in chosen:
        if max_turns:
            memories[conv] = memories[conv][:max_turns]
            kept = {m["memory_id"] for m in memories[conv]}
            queries[conv] = [q for q in queries[conv] if set(q["evidence_memory_ids"]) <= kept]
        if max_questions:
            queries[conv] = queries[conv][:max_questions]
    return {c: memories[c] for c in chosen}, {c: queries[c] for c in chosen}


def absent_questions(memories) -> dict[str, list[dict]]:
    """ABSENT for each conversation ({A}, {B}: its speakers), as questions of category 0."""
    out = {}
    for conv, turns in memories.items():
        speakers = list(dict.fromkeys(t["speaker"] for t in turns)) + ["Alex", "Sam"]
        out[conv] = [{"qid": f"{conv}:absent{i}", "conv_id": conv, "category": 0, "named": "{" in q,
                      "question": q.format(A=speakers[0], B=speakers[1]), "query_now": turns[-1]["created_at"]}
                     for i, q in enumerate(ABSENT)]
    return out


def vault_count(vault: Path) -> int:
    try:
        with sqlite3.connect(f"file:{vault / '.memvault' / 'state.db'}?mode=ro", uri=True) as db:
            return db.execute("SELECT count(*) FROM files WHERE live = 1").fetchone()[0]
    except sqlite3.Error:
        return -1


def turn_lines(conv: str, turns: list[dict], as_facts: bool = False) -> str:
    """`memvault export` lines: each LoCoMo turn a chat turn of conversation `conv` (as_facts: a
    plain fact of that conversation, role memory, which BM25 reads without turn context)."""
    speakers = list(dict.fromkeys(t["speaker"] for t in turns))
    return "".join(json.dumps({
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, "locomo:" + t["memory_id"])),
        "role": "memory" if as_facts else "user" if t["speaker"] == speakers[0] else "assistant",
        "conversation_id": conv,
        "created_at": t["created_at"], "text": t["content"], "meta": {"memory_id": t["memory_id"]}}) + "\n"
        for t in turns)


def build_vaults(memories, workdir: Path, reuse: bool, full_reindex: bool, log, as_facts: bool = False) -> dict[str, dict]:
    """One vault per conversation, through the library's import_from("jsonl")."""
    import memvault

    info = {}
    for conv, turns in memories.items():
        vault = workdir / "vaults" / conv
        if reuse and vault_count(vault) == len(turns):
            if full_reindex:
                start = time.perf_counter()
                memvault.open_vault(vault).reindex(full=True)
                log(f"{conv}: reused, reindex --full in {time.perf_counter() - start:.1f} s")
            info[conv] = {"vault": str(vault), "memories": len(turns), "reused": True}
            continue
        shutil.rmtree(vault, ignore_errors=True)
        vault.mkdir(parents=True)
        jsonl = workdir / "vaults" / f"{conv}.jsonl"
        jsonl.write_text(turn_lines(conv, turns, as_facts), encoding="utf-8")
        start = time.perf_counter()
        memvault.open_vault(vault).import_from("jsonl", jsonl)
        seconds = time.perf_counter() - start
        log(f"{conv}: {len(turns)} turns imported in {seconds:.1f} s")
        info[conv] = {"vault": str(vault), "memories": len(turns), "seconds": seconds, "reused": False}
    return info


def build_personal(workdir: Path) -> str:
    import memvault

    vault = workdir / "vaults" / "personal"
    if vault_count(vault) != len(PERSONAL_FACTS):
        shutil.rmtree(vault, ignore_errors=True)
        vault.mkdir(parents=True)
        lines = "".join(json.dumps({"text": t, "created_at": "2026-01-01T12:00:00Z", "meta": {"memory_id": f"p{i}"}})
                        + "\n" for i, t in enumerate(PERSONAL_FACTS))
        memvault.open_vault(vault).add_jsonl(lines)
    return str(vault)


class Vaults:
    """The vaults opened through the library, once each per set of settings (the index, its
    full-text index and the model stay loaded across configurations)."""

    def __init__(self):
        self.opened = {}

    def get(self, path: str, **settings):
        import memvault

        key = (path, json.dumps(settings, sort_keys=True))
        if key not in self.opened:
            self.opened[key] = memvault.open_vault(path, **settings)
            self.opened[key].warm()  # the model and the table loaded before the clock starts
        return self.opened[key]


def ranked_ids(results: list[dict]) -> list[str]:
    return [r.get("meta", {}).get("memory_id") for r in results if r.get("meta", {}).get("memory_id")]


def search_api(vault, requests: list[dict], options: dict) -> tuple[dict, float]:
    """{qid: ranked memory ids} for requests through one `Memvault.search_many`, and its seconds."""
    start = time.perf_counter()
    out = {qid: [r.meta.get("memory_id") for r in outcome.results if r.meta.get("memory_id")]
           for qid, outcome in vault.search_many(requests, **options)}
    return out, time.perf_counter() - start


def requests_for(conv: str, items, k: int) -> list[dict]:
    return [{"qid": q["qid"], "query": q["question"], "now": q["query_now"], "k": k, "conversation_id": conv}
            for q in items]


def run_config(options: dict, queries, absent, vaults, opened: Vaults, k: int, settings: dict | None = None):
    """Every question (and every absent-topic question) of every conversation through the library;
    returns {qid: ranked ids} and the seconds of the LoCoMo questions."""
    ranked, seconds = {}, 0.0
    for conv, items in queries.items():
        vault = opened.get(vaults[conv]["vault"], **(settings or {}))
        found, spent = search_api(vault, requests_for(conv, items, k), options)
        ranked.update(found)
        seconds += spent
        if absent.get(conv):
            ranked.update(search_api(vault, requests_for(conv, absent[conv], KEPT_AT), options)[0])
    return ranked, seconds


def run_personal(vault: str, options: dict, opened: Vaults, settings: dict | None = None) -> dict:
    requests = [{"qid": f"present{i}", "query": q, "k": PERSONAL_K} for i, (q, _) in enumerate(PERSONAL_PRESENT)]
    requests += [{"qid": f"absent{i}", "query": q, "k": PERSONAL_K} for i, q in enumerate(PERSONAL_ABSENT)]
    ranked, _ = search_api(opened.get(vault, **(settings or {})), requests, options)
    return personal_summary(ranked)


def personal_summary(ranked: dict[str, list[str]]) -> dict:
    found = [bool({f"p{j}" for j in gold} & set(ranked.get(f"present{i}", [])))
             for i, (_, gold) in enumerate(PERSONAL_PRESENT)]
    absent = [len(ranked.get(f"absent{i}", [])) for i in range(len(PERSONAL_ABSENT))]
    return {"answered": sum(found) / len(found), "present_returned": sum(len(ranked.get(f"present{i}", []))
                                                                         for i in range(len(PERSONAL_PRESENT)))
            / len(PERSONAL_PRESENT), "absent_returned": sum(absent) / len(absent),
            "absent_none": sum(1 for a in absent if a == 0) / len(absent),
            "missed": [q for (q, _), hit in zip(PERSONAL_PRESENT, found) if not hit],
            "absent_answered": [q for q, n in zip(PERSONAL_ABSENT, absent) if n]}


def score(ranked: dict[str, list[str]], queries, data: Path, workdir: Path, tag: str) -> dict:
    """locomo_score.py over exactly these questions."""
    qs = [q for items in queries.values() for q in items]
    (workdir / "runs").mkdir(parents=True, exist_ok=True)
    qfile = workdir / "runs" / f"questions-{tag}.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
    run_path = workdir / "runs" / f"run-{tag}.jsonl"
    run_path.write_text("".join(json.dumps({"qid": q["qid"], "ranked": ranked.get(q["qid"], [])}) + "\n"
                                for q in qs), encoding="utf-8")
    summary = run_path.with_suffix(".score.json")
    done = subprocess.run([sys.executable, str(data / "locomo_score.py"), str(run_path), "--queries", str(qfile),
                           "--json", str(summary)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"locomo_score.py failed: {done.stderr[-2000:]}")
    return json.loads(summary.read_text())


def returned(ranked, questions) -> float | None:
    """Mean number of results among the first KEPT_AT places, over these questions."""
    counts = [min(len(ranked.get(q["qid"], [])), KEPT_AT) for q in questions]
    return sum(counts) / len(counts) if counts else None


def headline(summary: dict, ranked=None, queries=None, absent=None) -> dict:
    out = {}
    for group, key in (("cat1-4", "cat1_4"), ("adversarial", "cat5")):
        g = summary.get(group)
        if g:
            out[key] = {"n": g["n"], "recall@5": g["recall@5"], "recall@10": g["recall@10"], "mrr": g["mrr"],
                        "recall@25": g["recall@25"], "ndcg@10": g["ndcg@10"]}
    # per category of 1-4 (multi-hop, temporal, open-domain, single-hop), as the table shows them
    out["categories"] = {name: {"n": summary[name]["n"], "recall@5": summary[name]["recall@5"],
                                "recall@10": summary[name]["recall@10"]}
                         for name in CATEGORY_NAMES if name in summary}
    if ranked is not None:
        cat5 = [q for items in queries.values() for q in items if q["category"] == 5]
        if cat5:
            out["cat5"]["returned@10"] = returned(ranked, cat5)
        items = [q for v in (absent or {}).values() for q in v]
        if items:
            out["absent"] = {"n": len(items), "returned@10": returned(ranked, items),
                             "generic_returned@10": returned(ranked, [q for q in items if not q["named"]]),
                             "named_returned@10": returned(ranked, [q for q in items if q["named"]]),
                             "none": sum(1 for q in items if not ranked.get(q["qid"])) / len(items)}
    return out


def splits_of(queries) -> dict[str, list[str]]:
    """The splits present in this run: tuning, untouched, all (when a split has a conversation)."""
    convs = list(queries)
    out = {"tuning": [c for c in convs if c in TUNING], "untouched": [c for c in convs if c in UNTOUCHED]}
    out = {name: cs for name, cs in out.items() if cs}
    if len(out) != 1 or sum(map(len, out.values())) != len(convs):
        out["all"] = convs
    return out


def score_splits(ranked, queries, absent, data, workdir, tag) -> dict:
    out = {}
    for split, convs in splits_of(queries).items():
        qs = {c: queries[c] for c in convs}
        summary = score(ranked, qs, data, workdir, f"{tag}-{split}")
        out[split] = {"summary": summary, **headline(summary, ranked, qs, {c: absent.get(c, []) for c in convs})}
    return out


# -- in-process experiments ------------------------------------------------------------------------
def text_fts(vault) -> None:
    """BM25 on the bare text, beside the product's (variants without turn context read it)."""
    import warnings

    from memvault.store.index import FTS_OPTIONS

    table = vault.vault.index.table()
    if "text_idx" not in {getattr(i, "name", "") for i in table.list_indices()}:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            table.create_fts_index("text", replace=True, **FTS_OPTIONS)


def experiments(queries, absent, vaults, opened: Vaults, k: int, log, only: list[str] | None = None,
                personal: str | None = None):
    """Variants the product has no option for (bench/locomo_variants.py): the same library call
    as the configurations, with the variant's patches in place while it runs."""
    import locomo_variants

    chosen = {n: v for n, v in locomo_variants.ALL.items() if (n in only if only else n in locomo_variants.VARIANTS)}
    runs: dict[str, dict[str, list[str]]] = {name: {} for name in chosen}
    timing = {name: 0.0 for name in chosen}
    mine = {}
    if personal:  # the small personal vault's answered and absent questions, per variant
        if any(v.needs_text_fts for v in chosen.values()):
            text_fts(opened.get(personal))
        for name, variant in chosen.items():
            with locomo_variants.patched(variant):
                mine[name] = run_personal(personal, variant.options, opened)
    for conv, items in queries.items():
        vault = opened.get(vaults[conv]["vault"])
        if any(v.needs_text_fts for v in chosen.values()):
            text_fts(vault)
        for name, variant in chosen.items():
            with locomo_variants.patched(variant):
                found, spent = search_api(vault, requests_for(conv, items, k), variant.options)
                runs[name].update(found)
                timing[name] += spent
                if absent.get(conv):
                    runs[name].update(search_api(vault, requests_for(conv, absent[conv], KEPT_AT),
                                                 variant.options)[0])
        log(f"experiments: {conv} done")
    return {name: {"ranked": runs[name], "seconds": timing[name], "personal": mine.get(name),
                   **chosen[name].described()} for name in chosen}


def fmt_table(rows: list[tuple[str, str, dict, float]], n_queries: int, note: str) -> str:
    header = ("configuration", "split", "R@5", "R@10", "MRR", "multi R@10", "temp R@10", "open R@10", "single R@10",
              "c5 R@10", "c5 ret", "abs ret", "abs none", "ms/q")
    lines = [header]
    for name, split, h, seconds in rows:
        a, b, c = h.get("cat1_4", {}), h.get("cat5", {}), h.get("absent", {})

        def f(d, m, digits=3):
            return f"{d[m]:.{digits}f}" if d.get(m) is not None else "-"

        per = h.get("categories", {})
        lines.append((name, split, f(a, "recall@5"), f(a, "recall@10"), f(a, "mrr"),
                      *(f(per.get(c, {}), "recall@10") for c in CATEGORY_NAMES), f(b, "recall@10"),
                      f(b, "returned@10", 1), f(c, "returned@10", 1), f(c, "none", 2),
                      f"{1000 * seconds / max(n_queries, 1):.0f}" if seconds else "-"))
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    out = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    if note:
        out.append(note)
    return "\n".join(out)


def reranker_available(vault: str) -> tuple[bool, str]:
    import memvault

    status = memvault.open_vault(vault).models().reranker_model
    return bool(status["available"]), status.get("name", "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo folder (default {DEFAULT_DATA})")
    ap.add_argument("--conversations", default=None,
                    help="comma-separated conv ids, or 'tuning' / 'untouched' (default: all)")
    ap.add_argument("--max-questions", type=int, default=None, help="first N questions per conversation")
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help=f"which of: {', '.join([*CONFIGS, *LLM_CONFIGS])} (default: all but {', '.join(LLM_CONFIGS)})")
    ap.add_argument("-k", type=int, default=K, help=f"results per question (default {K}; the scorer wants >= 25)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke: the first 150 turns of conv-26, 30 questions on them, 3 configurations")
    ap.add_argument("--experiments", action="store_true", help="also run the in-process variants")
    ap.add_argument("--only-experiments", action="store_true", help="only the in-process variants")
    ap.add_argument("--variants", default=None, help="with --experiments: only these variants (comma-separated)")
    ap.add_argument("--no-absent", action="store_true", help="skip the absent-topic questions and personal vault")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "memvault-locomo",
                    help="vaults and run files (default /tmp/memvault-locomo)")
    ap.add_argument("--as-facts", action="store_true",
                    help="store each turn as a plain fact of its conversation (role memory, no turn context); "
                         "vaults under WORKDIR-facts")
    ap.add_argument("--reuse", action="store_true", help="reuse vaults already built in --workdir")
    ap.add_argument("--reindex-full", action="store_true", help="with --reuse: reindex --full them first")
    ap.add_argument("--out", type=Path, default=None, help="JSON report (default bench/out/locomo[-quick].json)")
    args = ap.parse_args(argv)
    max_turns = None
    if args.quick:
        conversations, max_q, max_turns, configs = ["conv-26"], 30, 150, QUICK_CONFIGS
        workdir = args.workdir.with_name(args.workdir.name + "-quick") if args.workdir == ap.get_default("workdir") \
            else args.workdir
    else:
        named = {"tuning": list(TUNING), "untouched": list(UNTOUCHED)}
        conversations = (named.get(args.conversations) or args.conversations.split(",")) if args.conversations \
            else None
        max_q, configs, workdir = args.max_questions, args.configs.split(","), args.workdir
        if args.as_facts:
            workdir = workdir.with_name(workdir.name + "-facts")
    unknown = [c for c in configs if c not in CONFIGS and c not in LLM_CONFIGS]
    if unknown:
        ap.error(f"unknown configuration {unknown[0]!r}")
    out = args.out or HERE / "out" / ("locomo-quick.json" if args.quick else "locomo.json")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    clean_environment()
    memories, queries = load(args.data, conversations, max_q, max_turns)
    absent = {} if args.no_absent or args.quick else absent_questions(memories)
    n_queries = sum(len(v) for v in queries.values())
    workdir.mkdir(parents=True, exist_ok=True)
    vaults = build_vaults(memories, workdir, args.reuse, args.reindex_full, log, args.as_facts)
    personal = None if args.no_absent or args.quick else build_personal(workdir)
    opened = Vaults()
    if args.quick:  # smoke: no model probe
        rerank_ok, rerank_name = False, ""
        note = "reranker not probed (--quick)"
    else:
        rerank_ok, rerank_name = reranker_available(next(iter(vaults.values()))["vault"])
        note = (f"reranker {rerank_name} available: 'default' includes the rerank stage" if rerank_ok else
                f"no trained cross-encoder on this machine ({rerank_name} not downloadable): 'default' runs "
                "without the rerank stage")
    note += (f"; c5 ret / abs ret = results among the first {KEPT_AT} for category 5 / absent-topic questions "
             f"({len(ABSENT)} per conversation), abs none = share of those with none")
    report = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
                       "load": os.getloadavg(), "k": args.k, "conversations": list(memories),
                       "tuning": list(TUNING), "untouched": list(UNTOUCHED), "questions": n_queries,
                       "as_facts": args.as_facts,
                       "memories": sum(len(v) for v in memories.values()), "reranker_available": rerank_ok,
                       "note": note},
              "configs": {}, "experiments": {}}
    rows, experiment_rows = [], []
    if not args.only_experiments:
        for name in configs:
            desc, options, settings = CONFIGS[name] + ({},) if name in CONFIGS else LLM_CONFIGS[name]
            ranked, seconds = run_config(options, queries, absent, vaults, opened, args.k, settings)
            splits = score_splits(ranked, queries, absent, args.data, workdir, name)
            whole = splits.get("all") or next(iter(splits.values()))
            entry = {"description": desc, "options": options, "settings": settings, "seconds": seconds, "splits": splits,
                     **{k: v for k, v in whole.items() if k != "summary"}, "summary": whole["summary"]}
            if personal:
                entry["personal"] = run_personal(personal, options, opened, settings)
            report["configs"][name] = entry
            for split, h in splits.items():
                rows.append((name, split, h, seconds if split == "all" or len(splits) == 1 else 0.0))
            log(f"{name}: R@10 {whole['cat1_4']['recall@10']:.3f} ({seconds:.0f} s)")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=1, default=list), encoding="utf-8")  # so far
    if args.experiments or args.only_experiments:
        sys.path.insert(0, str(HERE))
        only = args.variants.split(",") if args.variants else None
        found = experiments(queries, absent, vaults, opened, args.k, log, only, personal)
        for name, item in found.items():
            splits = score_splits(item["ranked"], queries, absent, args.data, workdir, f"x-{name}")
            report["experiments"][name] = {"seconds": item["seconds"], "options": item["options"],
                                           "patches": item["patches"], "splits": splits, "personal": item["personal"]}
            for split, h in splits.items():
                experiment_rows.append((name, split, h, item["seconds"] if split == "all" or len(splits) == 1
                                        else 0.0))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=list), encoding="utf-8")
    print(f"LoCoMo retrieval, {len(memories)} conversations, {n_queries} questions "
          f"({sum(1 for v in queries.values() for q in v if q['category'] != 5)} in categories 1-4), k = {args.k}; "
          f"tuning = {', '.join(TUNING)}; untouched = {', '.join(UNTOUCHED)}")
    if rows:
        print(fmt_table(rows, n_queries, note))
    if experiment_rows:
        print("\nvariants (bench/locomo_variants.py: the same library call with the product's functions swapped):")
        print(fmt_table(experiment_rows, n_queries, ""))
    for name, entry in [*report["configs"].items(), *report["experiments"].items()]:
        if entry.get("personal"):
            p = entry["personal"]
            print(f"personal vault, {name}: answered {p['answered']:.2f} of {len(PERSONAL_PRESENT)} questions "
                  f"(missed: {', '.join(p['missed']) or 'none'}); {len(PERSONAL_ABSENT)} absent topics: "
                  f"{p['absent_returned']:.2f} results each, none for {p['absent_none']:.2f}")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
