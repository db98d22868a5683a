"""The ranking math of the read path (docs/design.md, "The read path"), as pure functions.

Kept free of I/O and models so that every number `search --explain` shows can be
checked by hand in tests.
"""

from __future__ import annotations

import math
from typing import Sequence

RRF_K = 60


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K, weights: Sequence[float] | None = None) -> dict[str, float]:
    """Reciprocal Rank Fusion: sum over lists of weight / (k + rank), rank starting at 1."""
    fused: dict[str, float] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        for rank, key in enumerate(ranking, 1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return fused


def min_max(values: Sequence[float]) -> list[float]:
    """Batch-relative scaling: best 1.0, worst 0.0; all equal (or one value) 0.5."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high - low <= 1e-12:
        return [0.5] * len(values)
    return [(v - low) / (high - low) for v in values]


def sigmoid(logit: float) -> float:
    """Absolute probability of a cross-encoder logit; what score_threshold is compared to."""
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    z = math.exp(logit)
    return z / (1.0 + z)


def recency(age_days: float, half_scale_days: float = 30.0) -> float:
    """exp(-age_days / 30); memories from the future count as brand new."""
    return math.exp(-max(age_days, 0.0) / half_scale_days)


def blend(relevance: float, recency_score: float, recency_weight: float) -> float:
    """score = (1 - w) * relevance + w * recency."""
    return (1.0 - recency_weight) * relevance + recency_weight * recency_score


def mmr(scores: Sequence[float], similarity: Sequence[Sequence[float]], k: int, lam: float) -> list[int]:
    """Maximal Marginal Relevance: greedily pick argmax lam*score - (1-lam)*max_sim(candidate, picked).

    `similarity` is the candidates' pairwise cosine matrix. Returns indices in pick order;
    ties go to the earlier candidate so results are deterministic.
    """
    remaining = list(range(len(scores)))
    picked: list[int] = []
    while remaining and len(picked) < k:
        best, best_value = remaining[0], -math.inf
        for i in remaining:
            penalty = max((similarity[i][j] for j in picked), default=0.0)
            value = lam * scores[i] - (1.0 - lam) * penalty
            if value > best_value + 1e-12:
                best, best_value = i, value
        picked.append(best)
        remaining.remove(best)
    return picked
