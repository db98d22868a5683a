"""Pseudo-relevance feedback (issue 45; docs/design.md, "The read path", step 2): the words the best
candidates share, that the question does not say, searched again by BM25 (RM3-like), so that a fact
the question reaches only through another ("Where did Caroline move from?": "since I moved from my
home country" -> "my home country, Sweden") joins the pool before the ranking's final cut.

No model, no new query of the embedding: one more BM25 query per scope, over words read from the
candidates' texts. The same pool gives the same words (ties by the word), so the same question on the
same vault gives the same result.
"""

from __future__ import annotations

import math
import re

# How many of the best candidates are read, how many of their words are searched, how many of the
# feedback search's best are lifted beside the question's (feedback_lift).
FEEDBACK_HITS = 3
FEEDBACK_TERMS = 5
FEEDBACK_BEST = 3
FEEDBACK = False  # measured on the tuning conversations: multi-hop -.013 (bench/README.md, session 6); off
# "lift": the feedback search's n-th best gets at least the pool's n-th relevance (at most its own match);
# "max": a candidate's BM25 is the larger of the question's and the expanded query's.
FEEDBACK_MODE = "lift"
# Only questions with no time named (a time's range already brings its own rows).
FEEDBACK_TIMELESS_ONLY = False

_WORD = re.compile(r"[^\W\d_][^\W_'’]{2,}")
_CAPTION = re.compile(r"\[shares? [^\]]*\]")


def _words(text: str) -> list[str]:
    from memvault.reading.ranking import _STOP_WORDS

    return [w for w in (m.group().lower() for m in _WORD.finditer(text)) if w not in _STOP_WORDS]


def terms(question: str, best: list, pool: list, names: set[str]) -> list[str]:
    """The FEEDBACK_TERMS words the best candidates (their relevance beside them) have and the question
    has not: each word weighted by the relevance of the hits that say it, times its rarity among the
    candidates (a word of half the pool, "awesome", says nothing). Speakers' names are left out."""
    asked = set(_words(question)) | {n.lower() for name in names for n in name.split()}
    df: dict[str, int] = {}
    for r in pool:
        for w in set(_words(r.text)):
            df[w] = df.get(w, 0) + 1
    weight: dict[str, float] = {}
    for r, rel in best:
        words = _words(r.text)
        if not words:
            continue
        for w in set(words):
            if w in asked:
                continue
            share = words.count(w) / len(words)
            weight[w] = weight.get(w, 0.0) + rel * share * math.log(1 + len(pool) / df.get(w, 1))
    return [w for w, _ in sorted(weight.items(), key=lambda item: (-item[1], item[0]))[:FEEDBACK_TERMS]]


def expand(table, query, pool: dict, query_vector, rows: int, parts: tuple[str, ...] = ()) -> list[str]:
    """The question's feedback search: the candidates ranked as the read path ranks them without a
    reranker (fused relevance, the asked speaker first), the words of the best FEEDBACK_HITS
    (terms), and the question with them (speakers' names left out) searched by BM25 in the query's
    scopes. Its best join the pool (scores "feedback": the place in that search). Returns the words."""
    if not FEEDBACK or not query.use_bm25 or len(pool) < FEEDBACK_HITS + 1:
        return []
    import numpy as np

    from memvault.reading import retrieval

    found = list(pool.values())
    saved = [dict(r.scores) for r in found]
    relevance = retrieval.fused_relevance(found, query, rows)
    relevance = retrieval._speaker_focus(found, relevance, query.text)
    for r, scores in zip(found, saved):
        r.scores = scores
    order = sorted(range(len(found)), key=lambda i: (-relevance[i], found[i].id))[:FEEDBACK_HITS]
    names = {who for who in (retrieval.speaker_of(r) for r in found) if who}
    words = terms(query.text, [(found[i], relevance[i]) for i in order], found, names)
    if not words:
        return []
    question = query.text
    for name in sorted(names, key=len, reverse=True):
        question = re.sub(rf"\b{re.escape(name)}(?:['’]s)?\b", " ", question)
    text = " ".join([*question.split(), *words])
    depth = retrieval.candidate_depth(query)
    ranked: list[tuple[float, str, dict]] = []
    for scope in retrieval._scopes(query):
        ranked += [(float(row["_score"]), row["id"], row) for row in
                   retrieval._bm25_rows(table, text, retrieval._filter(query, [scope]).sql(), depth)]
    ranked.sort(key=lambda item: (-item[0], item[1]))
    from memvault.reading.ranking import query_terms

    scale = len(query_terms(query.text)) / max(len(query_terms(text)), 1)
    for place, (score, key, row) in enumerate(ranked[:depth], 1):
        new = key not in pool
        result = retrieval._result(pool, row)
        result.scores["feedback"] = place
        if new:
            vector = np.asarray(result.vector, dtype=np.float32)
            result.scores["dense"] = float(np.dot(vector, query_vector))
            result.parts = [{"dense": float(np.dot(vector, pv)), "bm25": 0.0} for _, pv in parts]
        if FEEDBACK_MODE == "max":
            result.scores["bm25"] = max(result.scores.get("bm25", 0.0), score * scale)
    return words


def feedback_lift(pool: list, relevance: list[float]) -> list[float]:
    """The n-th best of the feedback search (n <= FEEDBACK_BEST) gets at least the pool's n-th best
    relevance, no more than its own match (scores "feedback_lift": what it gained)."""
    if FEEDBACK_MODE != "lift":
        return relevance
    ranked = sorted((r.scores["feedback"], j) for j, r in enumerate(pool) if "feedback" in r.scores)
    if not ranked or FEEDBACK_BEST <= 0:
        return relevance
    ladder = sorted(relevance, reverse=True)
    lifted = list(relevance)
    for place, (_, j) in enumerate(ranked[:FEEDBACK_BEST]):
        value = min(ladder[place], pool[j].scores["match"])
        if value > lifted[j]:
            pool[j].scores["feedback_lift"] = value - lifted[j]
            lifted[j] = value
    return lifted
