#!/usr/bin/env python3
"""The workbench behind issue 15's choices: LoCoMo retrieval variants, fast, on the TUNING split.

Not the product's numbers (bench/locomo.py measures those, through the CLI): a re-implementation
of the read path's arithmetic in numpy (exact dense cosine, as LanceDB's flat search computes it)
with LanceDB's own BM25 (same full-text options as memvault/store/index.py), so that one variant of the
*indexed text* costs one embedding pass (cached on disk) instead of building vaults, and one
variant of the *ranking* costs seconds. Every choice made here was checked afterwards with
bench/locomo.py on the product itself.

    python bench/locomo_lab.py                       # the tuning conversations, every experiment
    python bench/locomo_lab.py --only ctx-prev,base  # some experiments
    python bench/locomo_lab.py --split untouched     # only once the choices are made
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import os
import pickle
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench" / "locomo"
CACHE = Path(tempfile.gettempdir()) / "memvault-lab"

from locomo import (ABSENT, DEV_CONVERSATIONS, PERSONAL_ABSENT, PERSONAL_FACTS, PERSONAL_PRESENT,  # noqa: E402
                    TUNING, UNTOUCHED, absent_questions)


# -- data -------------------------------------------------------------------------------------
def load(data: Path, convs):
    turns = collections.defaultdict(list)
    for line in open(data / "locomo_memories.jsonl", encoding="utf-8"):
        m = json.loads(line)
        if m["conv_id"] in convs:
            turns[m["conv_id"]].append(m)
    queries = collections.defaultdict(list)
    for line in open(data / "locomo_queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        if q["conv_id"] in convs:
            queries[q["conv_id"]].append(q)
    return turns, queries


def scorer(data: Path):
    sys.path.insert(0, str(data))
    import locomo_score

    return locomo_score.score_one


# -- embeddings, cached by text ---------------------------------------------------------------
class Vectors:
    def __init__(self, path: Path):
        self.path = path
        self.store: dict[str, np.ndarray] = {}
        if path.exists():
            self.store = pickle.loads(path.read_bytes())
        self.dirty = False
        self._embedder = None

    @property
    def embedder(self):
        if self._embedder is None:
            from memvault.store.models import get_embedder

            self._embedder = get_embedder()
        return self._embedder

    def docs(self, texts: list[str]) -> np.ndarray:
        keys = ["d" + hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts) if k not in self.store}.items())
        if missing:
            start = time.process_time()
            rows = self.embedder.embed([t for _, t in missing])
            print(f"  embedded {len(missing)} texts in {time.process_time() - start:.1f} s CPU", file=sys.stderr)
            for (k, _), row in zip(missing, rows):
                self.store[k] = row
            self.dirty = True
        return np.stack([self.store[k] for k in keys])

    def query(self, text: str) -> np.ndarray:
        k = "q" + hashlib.sha1(text.encode()).hexdigest()
        if k not in self.store:
            self.store[k] = self.embedder.embed_query(text)
            self.dirty = True
        return self.store[k]

    def save(self):
        if self.dirty:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(self.store))
            os.replace(tmp, self.path)
            self.dirty = False


# -- BM25 through LanceDB ---------------------------------------------------------------------
class Bm25:
    """One LanceDB table per (conversation, text variant), FTS index with the product's options."""

    def __init__(self, root: Path):
        from memvault.store.index import import_lancedb

        self.root = root
        self.db = import_lancedb().connect(str(root))
        self.tables = {}

    def table(self, name: str, ids: list[str], texts: list[str]):
        import warnings

        import pyarrow as pa

        from memvault.store.index import FTS_OPTIONS

        key = name + "-" + hashlib.sha1(json.dumps([ids, texts]).encode()).hexdigest()[:12]
        if key in self.tables:
            return self.tables[key]
        try:
            table = self.db.open_table(key)
        except Exception:
            table = self.db.create_table(key, pa.table({"id": ids, "text": texts}))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                table.create_fts_index("text", replace=True, **FTS_OPTIONS)
        self.tables[key] = table
        return table

    @staticmethod
    def search(table, text: str, limit: int) -> list[tuple[str, float]]:
        if not text.strip():
            return []
        try:
            rows = table.search(text, query_type="fts", fts_columns="text").limit(limit).to_list()
        except Exception:
            return []
        return [(r["id"], float(r["_score"])) for r in rows]


# -- the indexed text of a turn ---------------------------------------------------------------
def date_words(when: str) -> str:
    return datetime.fromisoformat(when).strftime("%-d %B %Y")


def doc_texts(turns: list[dict], how: str) -> list[str]:
    """The text indexed for each turn: `how` is a '+'-list of parts, e.g. "self+prev"."""
    out = []
    for i, t in enumerate(turns):
        parts = []
        same_session = lambda j: 0 <= j < len(turns) and turns[j]["session"] == t["session"]  # noqa: E731
        for part in how.split("+"):
            if part == "self":
                parts.append(t["content"])
            elif part == "prev" and same_session(i - 1):
                parts.append(turns[i - 1]["content"])
            elif part == "prevany" and i > 0:
                parts.append(turns[i - 1]["content"])
            elif part == "prev2":
                parts += [turns[j]["content"] for j in (i - 2, i - 1) if same_session(j)]
            elif part == "prev3":
                parts += [turns[j]["content"] for j in (i - 3, i - 2, i - 1) if same_session(j)]
            elif part == "next" and same_session(i + 1):
                parts.append(turns[i + 1]["content"])
            elif part == "date":
                parts.append(date_words(t["created_at"]))
            elif part.startswith("prevw"):  # the previous turn's last N words
                n = int(part[5:])
                if same_session(i - 1):
                    parts.append(" ".join(turns[i - 1]["content"].split()[-n:]))
        out.append("\n".join(parts))
    return out


# -- query handling ---------------------------------------------------------------------------
QUESTION_WORDS = re.compile(r"^\s*(when|what|who|whom|whose|where|which|why|how( long| many| much| often)?|did|does|do|"
                            r"is|are|was|were|has|have|had|can|could|would|will|should)\b[\s,]*", re.I)


def strip_question(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, QUESTION_WORDS.sub("", text)
    return text.rstrip(" ?") or previous


def personal(cfg: "Config", vecs: "Vectors", bm: "Bm25", floor_key="match", floor=0.0, k=5):
    """(share of present questions whose answer is returned, mean results of absent ones, share of
    absent ones with none) in the personal vault."""
    turns = {"personal": [{"memory_id": f"p{i}", "content": t, "session": 0, "created_at": "2024-01-01T00:00:00",
                           "speaker": "x"} for i, t in enumerate(PERSONAL_FACTS)]}
    qs = [{"qid": f"pp{i}", "conv_id": "personal", "category": 1, "question": q,
           "evidence_memory_ids": [f"p{j}" for j in gold], "evidence_sessions": [0], "query_now": "2024-01-02T00:00:00"}
          for i, (q, gold) in enumerate(PERSONAL_PRESENT)]
    qs += [{"qid": f"pa{i}", "conv_id": "personal", "category": 0, "question": q, "evidence_memory_ids": ["none"],
            "evidence_sessions": [0], "query_now": "2024-01-02T00:00:00"} for i, q in enumerate(PERSONAL_ABSENT)]
    per = run_config(replace(cfg, k=k, depth=max(cfg.depth, 15)), turns, {"personal": qs}, vecs, bm,
                     lambda ranked, gold, sess: {})
    found, absent, none, misses = [], [], [], []
    for q, _s, f in per.values():
        kept = [x["id"] for x in f if x[floor_key] >= floor]
        if q["category"] == 0:
            absent.append(len(kept))
            none.append(not kept)
        else:
            hit = bool(set(kept) & set(q["evidence_memory_ids"]))
            found.append(hit)
            if not hit:
                misses.append(q["question"])
    return sum(found) / len(found), sum(absent) / len(absent), sum(none) / len(none), misses


def absent_queries(turns) -> dict[str, list[dict]]:
    """ABSENT for each conversation, as questions of category 0 with no evidence."""
    return {conv: [{**q, "evidence_memory_ids": ["none"], "evidence_sessions": [0]} for q in items]
            for conv, items in absent_questions(turns).items()}


# The full-text index drops these (NLTK's English list, applied after stemming: "does", "why",
# "only" stem to words not on it and stay); measured on LanceDB 0.40 with memvault's FTS_OPTIONS.
STOP = set("""i me my myself we our ours you you're you've you'll you'd your yours yourself he him his himself she
she's her hers herself it it's its itself they them their theirs what which who whom this that that'll these those am
is are was were be been being have has had having do did doing a an the and but if or as until while of at by for with
about against between into through after below to from up down in out on off over under again further then here there
when where how all both each few more most other some such no nor not own same so than too s t can will just don
don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't
hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn
wasn't weren weren't won won't wouldn wouldn't""".split())


def n_terms(text: str) -> int:
    return len({w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP})


# -- the pipeline -----------------------------------------------------------------------------
@dataclass
class Config:
    dense_doc: str = "self"  # what is embedded for a turn
    bm25_doc: str = "self"  # what BM25 indexes for a turn
    dual_dense: str = ""  # also embed this, dense = max of the two cosines
    depth: int = 75  # candidates per retriever (top_k * 3 at k = 25)
    dense_weight: float = 0.5
    recency_weight: float = 0.0
    recency_mode: str = "blend"  # blend | tie
    mmr_lambda: float = 1.0
    mmr_floor: float = 0.0  # MMR penalty only for similarity above this
    query_dense: str = "raw"  # raw | strip
    query_bm25: str = "raw"
    prf_dense: float = 0.0  # Rocchio: q + a * mean(top m vectors)
    prf_m: int = 3
    prf_bm25_terms: int = 0
    neighbour: float = 0.0  # + b * max(relevance of the turns before / after)
    scale: str = "minmax"  # minmax | abs
    gate: float = 0.05
    delta: float = 0.2
    bdelta: float = 0.5
    fdelta: float = 0.5
    c0: float = 0.1
    match: str = "avg"
    times_match: float = 0.0
    beta: float = 0.0  # relevance = (beta + (1 - beta) * min-max fused) * match ** times_match
    c1: float = 0.7
    k: int = 25


def run_config(cfg: Config, turns, queries, vecs: Vectors, bm: Bm25, score_one):
    per_q = {}
    for conv, items in queries.items():
        tl = turns[conv]
        ids = [t["memory_id"] for t in tl]
        pos = {m: i for i, m in enumerate(ids)}
        dv = vecs.docs(doc_texts(tl, cfg.dense_doc))
        dv2 = vecs.docs(doc_texts(tl, cfg.dual_dense)) if cfg.dual_dense else None
        selfv = vecs.docs(doc_texts(tl, "self"))
        table = bm.table(conv, ids, doc_texts(tl, cfg.bm25_doc))
        created = np.array([datetime.fromisoformat(t["created_at"]).timestamp() for t in tl])
        for q in items:
            qtext = q["question"]
            qd = strip_question(qtext) if cfg.query_dense == "strip" else qtext
            qb = strip_question(qtext) if cfg.query_bm25 == "strip" else qtext
            qv = vecs.query(qd)
            cos = dv @ qv
            if dv2 is not None:
                cos = np.maximum(cos, dv2 @ qv)
            hits = Bm25.search(table, qb, cfg.depth)
            if cfg.prf_dense:
                top = np.argsort(-cos)[: cfg.prf_m]
                q2 = qv + cfg.prf_dense * dv[top].mean(axis=0)
                q2 /= np.linalg.norm(q2)
                cos = dv @ q2
            dense_top = list(np.argsort(-cos)[: cfg.depth])
            bm25 = {pos[i]: s for i, s in hits}
            rrf = collections.defaultdict(float)
            for r, i in enumerate(dense_top, 1):
                rrf[i] += 1 / (60 + r)
            for r, (i, _) in enumerate(hits, 1):
                rrf[pos[i]] += 1 / (60 + r)
            pool = sorted(rrf, key=lambda i: (-rrf[i], i))[: cfg.depth]
            d = np.array([cos[i] for i in pool])
            b = np.array([bm25.get(i, 0.0) for i in pool])

            def mm(x):
                lo, hi = x.min(), x.max()
                return (x - lo) / (hi - lo) if hi - lo > 1e-12 else np.full_like(x, 0.5)

            if cfg.scale == "abs":
                sd = np.clip((d - cfg.c0) / (cfg.c1 - cfg.c0), 0, 1)
                sl = np.clip(b / (math.log(1 + len(ids)) * max(n_terms(qb), 1)), 0, 1)
                rel = cfg.dense_weight * sd + (1 - cfg.dense_weight) * sl
            elif cfg.scale.startswith("damp"):  # min-max, but a spread under delta is not stretched to 0-1
                def damp(x, delta):
                    hi, lo = x.max(), x.min()
                    return np.clip(1 - (hi - x) / max(hi - lo, delta, 1e-12), 0, 1)
                fused = cfg.dense_weight * damp(d, cfg.delta) + (1 - cfg.dense_weight) * damp(b, cfg.bdelta * b.max())
                rel = {"damp": fused, "damp-mm": mm(fused), "damp-max": fused / max(fused.max(), 1e-12),
                       "damp2": damp(fused, cfg.fdelta)}[cfg.scale]
            elif cfg.scale in ("tm", "tm-mm"):  # value / max per retriever (0 the theoretical minimum)
                tm = lambda x: np.maximum(x, 0) / x.max() if x.max() > 1e-12 else np.full_like(x, 0.5)  # noqa: E731
                fused = cfg.dense_weight * tm(d) + (1 - cfg.dense_weight) * tm(b)
                rel = fused / fused.max() if cfg.scale == "tm" else mm(fused)
            else:
                fused = cfg.dense_weight * mm(d) + (1 - cfg.dense_weight) * mm(b)
                rel = mm(fused)
            sd = np.clip((d - cfg.c0) / (cfg.c1 - cfg.c0), 0, 1)
            sl = np.clip(b / (math.log(1 + len(ids)) * max(n_terms(qb), 1)), 0, 1)
            match = np.maximum(sd, sl) if cfg.match == "max" else cfg.dense_weight * sd + (1 - cfg.dense_weight) * sl
            if cfg.times_match:
                rel = (cfg.beta + (1 - cfg.beta) * rel) * match ** cfg.times_match
            if cfg.neighbour:
                relmap = dict(zip(pool, rel))
                rel = np.array([r + cfg.neighbour * max(relmap.get(i - 1, 0), relmap.get(i + 1, 0))
                                for i, r in zip(pool, rel)])
            now = datetime.fromisoformat(q["query_now"]).timestamp()
            age = np.maximum(now - created[pool], 0) / 86400
            rec = np.exp(-age / 30)
            if cfg.recency_mode == "mult":
                score = rel * (1 - cfg.recency_weight + cfg.recency_weight * rec)
            elif cfg.recency_mode == "gate":  # recency only among the near-best
                score = rel + cfg.recency_weight * rec * (rel >= rel.max() - cfg.gate)
            else:
                score = (1 - cfg.recency_weight) * rel + cfg.recency_weight * rec
            order = list(np.argsort(-score, kind="stable"))
            if cfg.mmr_lambda < 1.0:
                order = mmr([score[o] for o in order], selfv[[pool[o] for o in order]], cfg.k, cfg.mmr_lambda,
                            cfg.mmr_floor, order)
            ranked = [ids[pool[o]] for o in order[: cfg.k]]
            feats = [{"id": ids[pool[o]], "cos": float(d[o]), "bm25": float(b[o]), "rel": float(rel[o]),
                      "match": float(match[o]), "sd": float(sd[o]), "sl": float(sl[o]),
                      "n": len(ids)} for o in order[: cfg.k]]
            per_q[q["qid"]] = (q, score_one(ranked, q["evidence_memory_ids"], q["evidence_sessions"]), feats)
    return per_q


def mmr(scores, vectors, k, lam, floor, order):
    sim = vectors @ vectors.T
    remaining = list(range(len(scores)))
    picked = []
    while remaining and len(picked) < k:
        best, best_value = remaining[0], -math.inf
        for i in remaining:
            penalty = max((sim[i][j] for j in picked), default=0.0)
            penalty = penalty if penalty > floor else 0.0
            value = lam * scores[i] - (1 - lam) * penalty
            if value > best_value + 1e-12:
                best, best_value = i, value
        picked.append(best)
        remaining.remove(best)
    return [order[p] for p in picked]


def summarise(per_q) -> dict:
    groups = collections.defaultdict(list)
    for q, s, _ in per_q.values():
        groups["c5" if q["category"] == 5 else "c14"].append(s)
        if q["category"] != 5:
            groups[f"c{q['category']}"].append(s)
    return {g: {"n": len(v), **{m: sum(x[m] for x in v) / len(v) for m in ("recall@5", "recall@10", "mrr")}}
            for g, v in groups.items()}


EXPERIMENTS: dict[str, Config] = {}


def exp(name, **kw):
    EXPERIMENTS[name] = Config(**kw)


exp("base")
exp("product-today", recency_weight=0.2, mmr_lambda=0.7)
# context for turns
for how in ("self+prev", "prev+self", "self+prevany", "self+next", "self+prev+next", "self+prev2", "self+date",
            "self+prev+date", "self+prevw20"):
    exp(f"ctx[{how}]", dense_doc=how, bm25_doc=how)
    exp(f"ctx-dense[{how}]", dense_doc=how)
    exp(f"ctx-bm25[{how}]", bm25_doc=how)
exp("dual[self|self+prev]", dual_dense="self+prev", bm25_doc="self+prev")
# query handling
exp("q-strip", query_dense="strip", query_bm25="strip")
exp("q-strip-dense", query_dense="strip")
# PRF
for a in (0.3, 0.6, 1.0):
    exp(f"prf{a}", prf_dense=a)
# neighbours at query time
for b in (0.1, 0.2, 0.3):
    exp(f"nb{b}", neighbour=b)
# fusion weights
for w in (0.4, 0.6):
    exp(f"dw{w}", dense_weight=w)


B = "self+prev+date"
for how in ("self+prev2+date", "self+prev+next+date", "self+prev2+next", "self+prev3", "self+prev3+date",
            "self+self+prev", "self+self+prev+date", "self+self+prev2+date", "self+prevw20+date"):
    exp(f"ctx-bm25[{how}]", bm25_doc=how)
for w in (0.3, 0.4, 0.6):
    exp(f"B dw{w}", bm25_doc=B, dense_weight=w)
for b in (0.1, 0.2, 0.3):
    exp(f"B nb{b}", bm25_doc=B, neighbour=b)
for w in (0.02, 0.05, 0.1, 0.2):
    exp(f"B rec{w}", bm25_doc=B, recency_weight=w)
for w in (0.05, 0.2):
    exp(f"B gate{w}", bm25_doc=B, recency_weight=w, recency_mode="gate")
for lam, floor in ((0.7, 0.0), (0.7, 0.8), (0.7, 0.9), (0.85, 0.0), (0.5, 0.9)):
    exp(f"B mmr{lam}/{floor}", bm25_doc=B, mmr_lambda=lam, mmr_floor=floor)
for a in (0.3, 0.6):
    exp(f"B prf{a}", bm25_doc=B, prf_dense=a)
exp("B q-strip", bm25_doc=B, query_dense="strip", query_bm25="strip")
exp("B q-strip-dense", bm25_doc=B, query_dense="strip")
exp("B depth150", bm25_doc=B, depth=150)
exp("B k5", bm25_doc=B, depth=15, k=5)
exp("base k5", depth=15, k=5)
exp("B k5 depth50", bm25_doc=B, depth=50, k=5)

for c0, c1 in ((0.0, 0.6), (0.0, 0.8), (0.1, 0.7), (0.2, 0.7), (0.2, 0.6), (0.3, 0.7)):
    for w in (0.4, 0.5, 0.6):
        exp(f"B abs{c0}-{c1} w{w}", bm25_doc=B, scale="abs", c0=c0, c1=c1, dense_weight=w)
B2 = "self+prev2+date"
for m in ("avg", "max"):
    for g in (1.0, 0.5, 0.25):
        for c0, c1 in ((0.0, 0.8), (0.1, 0.7), (0.2, 0.6)):
            exp(f"B2 x{m}^{g} {c0}-{c1}", bm25_doc=B2, match=m, times_match=g, c0=c0, c1=c1)
exp("B2", bm25_doc=B2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--split", choices=("tuning", "untouched", "all"), default="tuning")
    ap.add_argument("--only", default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    convs = {"tuning": TUNING, "untouched": UNTOUCHED, "all": DEV_CONVERSATIONS}[args.split]
    turns, queries = load(args.data, convs)
    CACHE.mkdir(exist_ok=True)
    vecs = Vectors(CACHE / "vectors.pkl")
    bm = Bm25(CACHE / "bm25")
    score_one = scorer(args.data)
    names = [n for n in EXPERIMENTS if re.search(args.only, n)] if args.only else list(EXPERIMENTS)
    report = {}
    print(f"{'experiment':34s} {'R@5':>6s} {'R@10':>6s} {'MRR':>6s}  {'c5R@10':>6s}  c1 c2 c3 c4 R@10")
    for name in names:
        start = time.perf_counter()
        per_q = run_config(EXPERIMENTS[name], turns, queries, vecs, bm, score_one)
        vecs.save()
        s = summarise(per_q)
        report[name] = s
        c = s["c14"]
        print(f"{name:34s} {c['recall@5']:6.3f} {c['recall@10']:6.3f} {c['mrr']:6.3f}  "
              f"{s['c5']['recall@10']:6.3f}  " + " ".join(f"{s[f'c{i}']['recall@10']:.3f}" for i in (1, 2, 3, 4))
              + f"  ({time.perf_counter() - start:.0f} s)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
