"""The in-process variants of `bench/locomo.py --experiments`: issue 15's ablations.

name -> {"query": retrieval.Query fields, "fts_column": the column BM25 searches (optional,
default index_text), "fts": full-text index options (optional)}. No rerank in any (none is
available here). BEFORE is the read path as it was before issue 15; NOW the defaults after it.
Each direction is measured alone (added to BEFORE) and taken out of NOW.
"""

from memvault.config import Settings

_S = Settings()
BEFORE = {"rerank": False, "threshold": None, "bm25_column": "text", "relevance": "minmax", "recency_blend": "add",
          "recency_weight": 0.2, "mmr_lambda": 0.7, "mmr_min_similarity": 0.0, "relevance_floor": 0.0}
NOW = {"rerank": False, "threshold": None, "recency_weight": _S.recency_weight, "mmr_lambda": _S.mmr_lambda,
       "relevance_floor": _S.relevance_floor}
PURE = {"recency_weight": 0.0, "mmr_lambda": 1.0, "relevance_floor": 0.0}


def before(**changes):
    query = {**BEFORE, **changes}
    return {"query": query, **({"fts_column": "text"} if query["bm25_column"] == "text" else {})}


def now(**changes):
    query = {**NOW, **changes}
    return {"query": query, **({"fts_column": "text"} if query.get("bm25_column") == "text" else {})}


VARIANTS = {
    "before": before(),
    "before, retrieval only": before(**PURE),
    # each direction alone, on the read path as it was
    "before + turn context": before(bm25_column="index_text"),
    "before + recency as a factor 0.1": before(recency_blend="scale", recency_weight=0.1),
    "before + MMR on near-duplicates only": before(mmr_min_similarity=0.9),
    "before + relevance x match": before(relevance="match"),
    "before + relevance floor 0.15": before(relevance_floor=0.15),
    # all of them: the new defaults, and each taken out again
    "now": now(),
    "now, retrieval only": now(**PURE),
    "now - turn context": now(bm25_column="text"),
    "now - recency as a factor (additive 0.2)": now(recency_blend="add", recency_weight=0.2),
    "now - MMR on near-duplicates only": now(mmr_min_similarity=0.0),
    "now - relevance x match": now(relevance="minmax"),
    "now - relevance floor": now(relevance_floor=0.0),
    "now, no recency": now(recency_weight=0.0),
    "now, no MMR": now(mmr_lambda=1.0),
}
