"""The ranking math, checked against values computed by hand."""

import math

import pytest

from memvault.reading import ranking


def test_rrf_sums_reciprocal_ranks():
    fused = ranking.rrf([["a", "b", "c"], ["b", "d"]])
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 62)
    assert max(fused, key=fused.get) == "b"


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


def test_fuse_scores_convex():
    from memvault.reading.retrieval import Result, fuse_scores

    def pool():
        items = [Result(id=i, path="", role="memory", conversation_id="global", created_at="", text="", meta={})
                 for i in "abc"]
        for item, dense, bm25 in zip(items, (0.9, 0.5, 0.1), (0.0, 4.0, 2.0)):
            item.scores.update(dense=dense, **({"bm25": bm25} if bm25 else {}))
        return items

    even = pool()
    fuse_scores(even)  # 0.5 * min-max(dense) + 0.5 * min-max(bm25)
    assert [r.scores["fused"] for r in even] == pytest.approx([0.5, 0.75, 0.25])
    only_dense = pool()
    fuse_scores(only_dense, use_bm25=False)  # one retriever: its weight is 1
    assert [r.scores["fused"] for r in only_dense] == pytest.approx([1.0, 0.5, 0.0])


def test_candidate_depth():
    from memvault.store.config import Settings
    from memvault.reading.retrieval import Query, candidate_depth

    assert candidate_depth(Query.from_settings(Settings(), "q", top_k=5)) == 15
    assert candidate_depth(Query.from_settings(Settings(), "q", top_k=25)) == 75


def test_blend_scales_relevance_by_recency():
    # recency can take at most recency_weight off the relevance, and never adds to it
    assert ranking.blend(0.5, 1.0, 0.2) == pytest.approx(0.5)
    assert ranking.blend(0.5, 0.0, 0.2) == pytest.approx(0.4)
    assert ranking.blend(0.0, 1.0, 0.2) == 0.0  # a fresh but irrelevant memory stays at 0


def test_mmr_pushes_down_only_near_duplicates():
    scores = [0.9, 0.88, 0.8]
    sim = [[1.0, 0.98, 0.1], [0.98, 1.0, 0.1], [0.1, 0.1, 1.0]]
    assert ranking.mmr(scores, sim, k=3, lam=0.7, min_similarity=0.9) == [0, 2, 1]  # 0.98: a near-duplicate
    related = [[1.0, 0.8, 0.1], [0.8, 1.0, 0.1], [0.1, 0.1, 1.0]]
    assert ranking.mmr(scores, related, k=3, lam=0.7, min_similarity=0.9) == [0, 1, 2]  # 0.8: distinct
    assert ranking.mmr(scores, related, k=3, lam=0.7) == [0, 2, 1]  # plain MMR would push it down


def test_stretch_is_min_max_except_for_a_narrow_range():
    assert ranking.stretch([0.9, 0.5, 0.1], 0.2) == pytest.approx([1.0, 0.5, 0.0])  # wide: min-max
    assert ranking.stretch([0.77, 0.75], 0.2) == pytest.approx([1.0, 0.9])  # min-max would say 1.0, 0.0
    assert ranking.stretch([0.3], 0.2) == [1.0] and ranking.stretch([], 0.2) == []


def test_absolute_match_parts():
    assert ranking.query_terms("What is my wife's name?") == {"wife", "name"}
    assert ranking.query_terms("what should I not eat") == {"eat"}
    assert ranking.dense_match(0.4) == pytest.approx(0.5) and ranking.dense_match(0.95) == 1.0
    assert ranking.dense_match(-0.1) == 0.0
    # a word found in 1 memory of 1,000 scores about its IDF, ln(1000 / 1.5) ~ 6.5: nearly a full match
    assert ranking.lexical_match(6.5, 1000, 1) == pytest.approx(6.5 / math.log(1001))
    assert ranking.lexical_match(6.5, 1000, 2) == pytest.approx(6.5 / math.log(1001) / 2)  # half the words
    assert ranking.lexical_match(0.0, 1000, 2) == 0.0 and ranking.lexical_match(50.0, 10, 1) == 1.0


def test_session_lift_by_hand():
    # Memories 0 and 1 share a session, 2 is alone: 0's peer is 1 (0.2, the missing second counts
    # 0: s = 0.1), 1's is 0 (s = 0.4); r + 0.4 * s * (1 - r).
    lifted = ranking.session_lift([0.8, 0.2, 0.5], [[0, 1]], 0.4)
    assert lifted == pytest.approx([0.8 + 0.4 * 0.1 * 0.2, 0.2 + 0.4 * 0.4 * 0.8, 0.5])
    assert ranking.session_lift([0.8, 0.2], [[0, 1]], 0.0) == [0.8, 0.2]
    assert all(v < 1.0 for v in ranking.session_lift([0.99, 0.99, 0.99], [[0, 1, 2]], 1.0))


def test_speaker_focus_by_hand():
    # Lines 0 and 2 said by Maria, 1 by John, 3 a fact (no speaker): John's keeps 1 - 0.4 of its relevance.
    assert ranking.speaker_focus([0.5, 0.9, 0.3, 0.7], ["Maria", "John", "Maria", None], "Maria") == \
        pytest.approx([0.5, 0.9 * 0.6, 0.3, 0.7])
    assert ranking.speaker_focus([0.5, 0.9], ["Maria", "John"], None) == [0.5, 0.9]  # no speaker asked


def test_a_line_that_only_asks_back_by_hand():
    asks = ranking.asks_only
    # a reaction, then questions
    assert asks("Melanie: Wow, that's cool, Caroline! What happened? Did you hear any stories?")
    assert asks("How do you unwind?") and asks("John: Where? When?")
    assert not asks("Caroline: I went to a support group yesterday. Was it fun?")  # a statement before the question
    assert not asks("Maria: What do you think? [shares a photo of a painted bowl]")  # a photo tells something
    assert not asks("John: I ran. I won!") and not asks("Is it? I think not.")
    # Such a line keeps 1 - ASKING_WEIGHT (0.4) of its relevance, one that says something and then asks
    # 1 - TRAILING_WEIGHT (0.3), a statement or a photo all of it.
    lines = ("Maria: Oh! Where?", "Maria: I bought a kayak last week. Have you tried it?", "Maria: I bought a kayak.",
             "Maria: Like it? [shares a photo of a kayak]")
    weights = [ranking.question_weight(t) for t in lines]
    assert weights == [0.4, 0.3, 0.0, 0.0]
    assert ranking.asking_focus([0.5, 0.5, 0.5, 0.5], weights) == pytest.approx([0.3, 0.35, 0.5, 0.5])


def test_the_speaker_a_question_names():
    from memvault.reading.retrieval import asked_speaker

    speakers = {"Maria", "John", "Ana Lopez"}
    assert asked_speaker("What has Maria painted?", speakers) == "Maria"
    assert asked_speaker("Where did Maria's dog come from?", speakers) == "Maria"  # a possessive counts
    assert asked_speaker("Maria, what did I say?", speakers) == "Maria"  # the first word too
    assert asked_speaker("What did Ana Lopez study?", speakers) == "Ana Lopez"
    assert asked_speaker("What did Ana study?", speakers) is None  # not every word of the name
    assert asked_speaker("What do John and Maria both like?", speakers) is None  # two: no focus
    assert asked_speaker("what has maria painted?", speakers) is None  # a name is capitalised
    assert asked_speaker("What did I paint in May?", {"May", "John"}) is None  # a month is no name


def test_category_words_answer_everyday_questions_only():
    assert ranking.category_words("What are my hobbies?") == ["enjoy", "enjoys", "play", "plays"]
    assert ranking.category_words("What do I do for a living?") == ["work", "works", "job"]
    assert ranking.category_words("what's the name of our pet") == ["dog", "dogs", "cat", "cats"]
    assert ranking.category_words("Who cleaned the living room?") == []  # "living" alone is no job
    assert ranking.category_words("Which car does he drive?") == ["drives"]  # not the words it has
