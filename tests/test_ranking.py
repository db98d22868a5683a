"""The ranking math, checked against values computed by hand."""

import math

import pytest

from memvault import ranking


def test_rrf_sums_reciprocal_ranks():
    fused = ranking.rrf([["a", "b", "c"], ["b", "d"]])
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 62)
    assert max(fused, key=fused.get) == "b"


def test_rrf_weights():
    fused = ranking.rrf([["a"], ["b"]], weights=[2.0, 1.0])
    assert fused == {"a": pytest.approx(2 / 61), "b": pytest.approx(1 / 61)}


def test_min_max():
    assert ranking.min_max([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert ranking.min_max([7.0, 7.0]) == [0.5, 0.5]
    assert ranking.min_max([1.5]) == [0.5]
    assert ranking.min_max([]) == []


def test_sigmoid_is_absolute_and_stable():
    assert ranking.sigmoid(0.0) == 0.5
    assert ranking.sigmoid(2.0) == pytest.approx(1 / (1 + math.exp(-2)))
    assert ranking.sigmoid(-1000.0) == 0.0 and ranking.sigmoid(1000.0) == 1.0


def test_recency_and_blend():
    assert ranking.recency(0) == 1.0
    assert ranking.recency(30) == pytest.approx(math.exp(-1))
    assert ranking.recency(-5) == 1.0
    assert ranking.blend(1.0, math.exp(-1), 0.2) == pytest.approx(0.8 + 0.2 * 0.36787944)


def test_mmr_trades_relevance_for_diversity():
    # Candidates 0 and 1 are near-duplicates; 2 is different but slightly less relevant.
    scores = [0.9, 0.88, 0.8]
    sim = [[1.0, 0.98, 0.1], [0.98, 1.0, 0.1], [0.1, 0.1, 1.0]]
    # Second pick: 1 -> 0.7*0.88 - 0.3*0.98 = 0.322; 2 -> 0.7*0.8 - 0.3*0.1 = 0.53
    assert ranking.mmr(scores, sim, k=2, lam=0.7) == [0, 2]
    assert ranking.mmr(scores, sim, k=3, lam=1.0) == [0, 1, 2]
    assert ranking.mmr(scores, sim, k=5, lam=0.7) == [0, 2, 1]
    assert ranking.mmr([], [], k=3, lam=0.7) == []
