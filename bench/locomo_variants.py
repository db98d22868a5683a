"""The in-process variants of `bench/locomo.py --experiments`.

name -> {"query": retrieval.Query fields, "fts": full-text index options (optional)}. All of
them: no rerank (none is available here) and, unless the name says otherwise, no recency and
no MMR, so that they compare how candidates are found and how the fused score becomes relevance.
"""

PURE = {"rerank": False, "recency_weight": 0.0, "mmr_lambda": 1.0}
DEFAULTS = {"rerank": False}  # the product's recency and MMR


def v(fts=None, **query):
    return {"query": {**PURE, **query}, **({"fts": fts} if fts else {})}


VARIANTS = {
    # retrievers alone, and the fusion of the two
    "dense": v(use_bm25=False),
    "bm25": v(use_dense=False),
    "hybrid-convex": v(fusion="convex"),
    "hybrid-rrf": v(fusion="rrf"),
    # how dense and BM25 are scaled before the convex combination
    "convex-tm": v(fusion="convex-tm"),
    "convex-z": v(fusion="convex-z"),
    # convex weights
    "convex-dense0.3": v(fusion="convex", dense_weight=0.3),
    "convex-dense0.7": v(fusion="convex", dense_weight=0.7),
    # candidate depth (top_k * factor per retriever), and the union of both lists
    "convex-depth5": v(fusion="convex", candidate_factor=5),
    "convex-depth10": v(fusion="convex", candidate_factor=10),
    "convex-union": v(fusion="convex", pool="union"),
    "rrf-depth5": v(fusion="rrf", candidate_factor=5),
    # RRF weighting of the candidate lists (dense, BM25)
    "rrf-bm25x1.5": v(fusion="rrf", rrf_weights=(1.0, 1.5)),
    "rrf-densex1.5": v(fusion="rrf", rrf_weights=(1.5, 1.0)),
    # the full-text index's tokenizer and stemming
    "bm25-nostem": v(use_dense=False, fts={"stem": False}),
    "bm25-stopwords-kept": v(use_dense=False, fts={"remove_stop_words": False}),
    "bm25-nostem-stopwords-kept": v(use_dense=False, fts={"stem": False, "remove_stop_words": False}),
    "convex-nostem": v(fusion="convex", fts={"stem": False}),
    # a floor under the candidate depth, for small top_k (run these with -k 5)
    "convex-min50": v(fusion="convex", min_candidates=50),
    "convex-min50+recency+mmr": {"query": {**DEFAULTS, "fusion": "convex", "min_candidates": 50}},
    # the product's recency and MMR on top
    "convex+recency+mmr": {"query": {**DEFAULTS, "fusion": "convex"}},
    "rrf+recency+mmr": {"query": {**DEFAULTS, "fusion": "rrf"}},
}
