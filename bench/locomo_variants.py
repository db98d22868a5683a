"""The in-process variants of `bench/locomo.py --experiments`: issue 15's ablations, and the
experiments that lost before it (issues 5 and 12: they live here, not as options of the product).

A variant is search options for `Memvault.search_many` plus patches: product functions or
constants swapped for the variant's own while it runs (`patched`). So every variant goes through
the library call the CLI makes, on the same vaults, and the product keeps no switch for an
experiment. No rerank in any (none is available here). BEFORE is the read path as it was before
issue 15 (main at 1cf0e50, arithmetic reproduced below); ISSUE15 the defaults after issue 15; NOW
the defaults after issue 32. Each direction of an issue is measured alone (added to the read path
before it) and taken out of NOW. LOST are run only when named (`--variants`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from memvault.store import index
from memvault.reading import ranking, retrieval, when
from memvault.store.config import Settings

_S = Settings()


# -- the arithmetic of the variants ----------------------------------------------------------
def _fuse(pool, use_dense, use_bm25, scale, weight=0.5):
    parts = []
    if use_dense:
        parts.append((weight if use_bm25 else 1.0, scale([r.scores["dense"] for r in pool])))
    if use_bm25:
        parts.append((1.0 - weight if use_dense else 1.0, scale([r.scores.get("bm25", 0.0) for r in pool])))
    total = sum(w for w, _ in parts) or 1.0
    for i, result in enumerate(pool):
        result.scores["fused"] = sum(w * p[i] for w, p in parts) / total


def minmax_fuse(pool, use_dense=True, use_bm25=True):
    """The fusion before issue 15: plain min-max of each retriever, a narrow range stretched to 0-1."""
    _fuse(pool, use_dense, use_bm25, ranking.min_max)


def rrf_fuse(pool, use_dense=True, use_bm25=True):
    """Ordered by the candidates' RRF score (issue 5: lost, R@10 -.08)."""
    for result in pool:
        result.scores["fused"] = result.scores.get("rrf", 0.0)


def _from_zero(values):
    high = max(values, default=0.0)
    return [max(v, 0.0) / high if high > 1e-12 else 0.5 for v in values]


def _z(values):
    if not values:
        return []
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return [(v - mean) / sd if sd > 1e-12 else 0.0 for v in values]


def from_zero_fuse(pool, use_dense=True, use_bm25=True):
    """value / max per retriever, 0 the theoretical minimum (issue 5's convex-tm: a tie)."""
    _fuse(pool, use_dense, use_bm25, _from_zero)


def z_fuse(pool, use_dense=True, use_bm25=True):
    """z-scores per retriever (issue 5's convex-z: a tie)."""
    _fuse(pool, use_dense, use_bm25, _z)


def minmax_relevance(pool, query, rows):
    """Relevance before issue 15: min-max of the fused score, whatever it is in absolute terms
    (the best candidate of any search scores 1.0). The match is still computed, for the floor."""
    retrieval.fuse_scores(pool, query.use_dense, query.use_bm25)
    retrieval.match_scores(pool, query, rows)
    return ranking.min_max([r.scores["fused"] for r in pool])


def additive_blend(relevance, recency_score, recency_weight):
    """The recency blend before issue 15: (1 - w) * relevance + w * recency."""
    return (1.0 - recency_weight) * relevance + recency_weight * recency_score


def weighted_rrf(dense, bm25):
    def rrf(rankings, k=ranking.RRF_K):
        fused = {}
        for weight, ranked in zip((dense, bm25), rankings):
            for rank, key in enumerate(ranked, 1):
                fused[key] = fused.get(key, 0.0) + weight / (k + rank)
        return fused
    return rrf


# -- variants -----------------------------------------------------------------------------------
@dataclass
class Variant:
    options: dict  # Memvault.search_many options
    patches: dict = field(default_factory=dict)  # "module.attribute" -> the variant's value
    needs_text_fts: bool = False  # BM25 on the bare text: the vault's table gets an FTS index on it

    def described(self) -> dict:
        return {"options": self.options, "patches": {k: getattr(v, "__name__", v) for k, v in self.patches.items()}}


MODULES = {"index": index, "retrieval": retrieval, "ranking": ranking, "when": when}


@contextlib.contextmanager
def patched(variant: Variant):
    saved = []
    try:
        for target, value in variant.patches.items():
            module, attribute = target.split(".")
            saved.append((MODULES[module], attribute, getattr(MODULES[module], attribute)))
            setattr(MODULES[module], attribute, value)
        yield
    finally:
        for module, attribute, value in reversed(saved):
            setattr(module, attribute, value)


def no_category_words(text):
    """BM25 looks for the query's own words only (before issue 32)."""
    return []


# What each direction of issue 15 changes, as the patches that undo it.
UNDO = {
    "turn context": {"index.FTS_COLUMN": "text"},
    "relevance x match": {"retrieval.fuse_scores": minmax_fuse, "retrieval.fused_relevance": minmax_relevance},
    "recency as a factor": {"ranking.blend": additive_blend},
    "MMR on near-duplicates only": {"ranking.NEAR_DUPLICATE": 0.0},
}
# Issue 32's: the session lift is an option (session_weight 0 undoes it); paraphrases of facts
# counted as near-duplicates from 0.9 again; no category words. (The turn's own words read twice by
# BM25 lost on the untouched conversations; it changed what the index holds, so it was measured at
# a09b748, where the product had it: variants "issue 15 + own words twice", "now - own words twice".)
UNDO32 = {
    "session lift": {},
    "paraphrase band": {"ranking.PARAPHRASE": ranking.NEAR_DUPLICATE},
    "category words": {"ranking.category_words": no_category_words},
}
UNDO_ALL = {**UNDO, **UNDO32}
BEFORE_OPTIONS = {"rerank": False, "recency_weight": 0.2, "mmr_lambda": 0.7, "relevance_floor": 0.0,
                  "session_weight": 0.0}
ISSUE15_OPTIONS = {"rerank": False, "recency_weight": _S.recency_weight, "mmr_lambda": _S.mmr_lambda,
                   "relevance_floor": _S.relevance_floor, "session_weight": 0.0}
NOW_OPTIONS = {**ISSUE15_OPTIONS, "session_weight": _S.session_weight}
PURE = {"recency_weight": 0.0, "mmr_lambda": 1.0, "relevance_floor": 0.0, "session_weight": 0.0}


def variant(options: dict, undone: list[str], **patches) -> Variant:
    merged = {k: v for name in undone for k, v in UNDO_ALL[name].items()}
    merged.update({k.replace("__", "."): v for k, v in patches.items()})
    if "session lift" in undone:
        options = {**options, "session_weight": 0.0}
    return Variant(options, merged, merged.get("index.FTS_COLUMN") == "text")


def before(added: str | None = None, **options) -> Variant:
    return variant({**BEFORE_OPTIONS, **options}, [d for d in UNDO_ALL if d != added])


def issue15(added: str | None = None, **options) -> Variant:
    """The defaults of issue 15 (issue 32's directions undone), or with one of issue 32's added."""
    return variant({**ISSUE15_OPTIONS, **({"session_weight": _S.session_weight} if added == "session lift" else {}),
                    **options}, [d for d in UNDO32 if d != added])


def now(removed: str | None = None, **options) -> Variant:
    return variant({**NOW_OPTIONS, **options}, [removed] if removed else [])


# Issue 15's rows: each of its directions alone on the read path before it, and taken out of its
# defaults (ISSUE15: issue 32's directions undone throughout).
ISSUE15_VARIANTS = {
    "before": before(),
    "before, retrieval only": before(**PURE),
    "before + turn context": before("turn context"),
    "before + relevance x match": before("relevance x match"),
    "before + recency as a factor": before("recency as a factor"),
    "before + MMR on near-duplicates only": before("MMR on near-duplicates only"),
    "before + relevance floor": before(relevance_floor=_S.relevance_floor),
    "issue 15": issue15(),
    "issue 15 - turn context": variant(ISSUE15_OPTIONS, [*UNDO32, "turn context"]),
    "issue 15 - relevance x match": variant(ISSUE15_OPTIONS, [*UNDO32, "relevance x match"]),
    "issue 15 - recency as a factor (additive 0.2)": variant(ISSUE15_OPTIONS, [*UNDO32, "recency as a factor"]),
    "issue 15 - MMR on near-duplicates only": variant(ISSUE15_OPTIONS, [*UNDO32, "MMR on near-duplicates only"]),
    "issue 15 - relevance floor": issue15(relevance_floor=0.0),
}
# Issue 32's rows: each direction alone on issue 15's defaults, the new defaults, each taken out.
VARIANTS = {
    "issue 15": issue15(),
    "issue 15 + session lift": issue15("session lift"),
    "issue 15 + paraphrase band": issue15("paraphrase band"),
    "issue 15 + category words": issue15("category words"),
    "now": now(),
    "now, retrieval only": now(**PURE),
    "now - session lift": now("session lift"),
    "now - paraphrase band": now("paraphrase band"),
    "now - category words": now("category words"),
    "now, no recency": now(recency_weight=0.0),
    "now, no MMR": now(mmr_lambda=1.0),
    "now - relevance floor": now(relevance_floor=0.0),
}

# Issue 5's experiments, on today's read path without recency, MMR or floor (as measured then).
LOST = {
    "lost: ordered by RRF score": variant({"rerank": False, **PURE}, [], retrieval__fuse_scores=rrf_fuse),
    "lost: value/max scaling": variant({"rerank": False, **PURE}, [], retrieval__fuse_scores=from_zero_fuse),
    "lost: z-score scaling": variant({"rerank": False, **PURE}, [], retrieval__fuse_scores=z_fuse),
    "lost: dense weight 0.3": variant({"rerank": False, **PURE}, [], retrieval__DENSE_WEIGHT=0.3),
    "lost: dense weight 0.7": variant({"rerank": False, **PURE}, [], retrieval__DENSE_WEIGHT=0.7),
    "lost: depth top_k x 5": variant({"rerank": False, **PURE}, [], retrieval__CANDIDATE_FACTOR=5),
    "lost: RRF weights BM25 1.5": variant({"rerank": False, **PURE}, [], ranking__rrf=weighted_rrf(1.0, 1.5)),
}
# Issue 32's that lost (bench/README.md, "Retrieval, issue 32"); those that needed hooks in the read
# path (pseudo-relevance feedback, a cap per session, the lexical gate) were measured at 4d4fa8b.
LOST.update({
    "lost: near-duplicates of turns from 0.8": variant(NOW_OPTIONS, [], ranking__NEAR_DUPLICATE=0.8),
    "lost: near-duplicates of turns from 0.7": variant(NOW_OPTIONS, [], ranking__NEAR_DUPLICATE=0.7),
    "lost: session lift 0.25": now(session_weight=0.25),
    "lost: session lift 0.6": now(session_weight=0.6),
})


def no_time(text, now):
    """The query's time is not read (before issue 29's time in questions)."""
    return None


def _when_only(text, now, _read=when.read):
    """The query's "when" is read, the times it names are not."""
    asked = _read(text, now)
    return when.QueryTime((), True) if asked is not None and asked.asks_when else None


# Issue 29's time in questions (bench/README.md, "Time in questions"): the read path before it
# (issue 32's defaults), today's, each half taken out, and the weights tried on the tuning split.
TIME_VARIANTS = {
    "issue 32": variant(NOW_OPTIONS, [], when__read=no_time),
    "now": now(),
    "now - when lift": variant(NOW_OPTIONS, [], when__WHEN_WEIGHT=0.0),
    "now - time ranges": variant(NOW_OPTIONS, [], when__read=_when_only),
}
for weight in (0.1, 0.2, 0.3, 0.5, 0.7):
    TIME_VARIANTS[f"when lift {weight}"] = variant(NOW_OPTIONS, [], when__WHEN_WEIGHT=weight)
for weight in (0.1, 0.25, 0.5, 0.75):
    TIME_VARIANTS[f"range lift {weight}"] = variant(NOW_OPTIONS, [], when__RANGE_WEIGHT=weight)
TIME_VARIANTS["range lift 0.25 without range candidates"] = variant(NOW_OPTIONS, [], when__RANGE_WEIGHT=0.25,
                                                                retrieval___in_range_rows=lambda *a: [])
ALL = {**ISSUE15_VARIANTS, **VARIANTS, **LOST, **TIME_VARIANTS}
