"""The ranking math of the read path (docs/design.md, "The read path"), as pure functions.

Kept free of I/O and models so that every number `search --explain` shows can be
checked by hand in tests.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

RRF_K = 60
# The absolute match of a memory (no reranker): dense cosine of this much or more counts as a full
# semantic match (MiniLM: unrelated texts score about 0-0.2, a paraphrase 0.6-0.9).
FULL_COSINE = 0.8
# How far apart scores must be before they are stretched to 0-1 within a search (stretch()):
# cosine similarity, BM25 (a share of the best score), the fused score.
DENSE_SPREAD, BM25_SPREAD, FUSED_SPREAD = 0.2, 0.5, 0.5
# MMR pushes down only near-duplicates: pairs of candidates at least this similar (cosine). Distinct
# evidence of one topic (LoCoMo turns of one exchange: 0.5-0.85) is left in place.
NEAR_DUPLICATE = 0.9
# Two self-contained memories (facts, notes, decisions: not chat turns) this similar say the same
# thing (MiniLM: five phrasings of "likes coffee" at 0.66-0.93; distinct facts of one person up to
# 0.69, "lives in Lisbon" / "mother lives in Porto"), so MMR pushes the weaker down as it does
# near-duplicates; chat turns keep NEAR_DUPLICATE (at 0.8 LoCoMo R@10 fell .013, at 0.7 .065), and so
# do two facts of one session (retrieval.diversity_similarity: lines of one exchange are distinct evidence).
PARAPHRASE = 0.75
# A memory's session vouches for it (session_lift): with session_weight w, relevance r becomes
# r + w * s * (1 - r), s = the mean of the two best relevances of the others in its session.
SESSION_PEERS = 2
# A question about one of a chat's speakers (speaker_focus): the lines the other speakers said keep
# this share less of their relevance. An imported group chat's turns name their speaker ("Caroline:
# ...", bench/locomo.py's vaults); "What did Melanie paint?" is about what Melanie said, while her
# name also stands in every line Caroline addressed to her. Chosen on LoCoMo's tuning conversations
# (bench/README.md, "Retrieval, issue 45: one speaker"): 0.8 found more multi-hop evidence (.442 against
# .424) but lost a third of what questions naming the wrong speaker are about (category 5: .620 against .908).
SPEAKER_WEIGHT = 0.4

# Chat lines that ask (question_weight): one that only asks back ("Melanie: Wow! What did you paint?": every
# sentence a question, but for a short reaction or greeting before them; asks_only) keeps 1 - ASKING_WEIGHT
# of its relevance without a reranker, one that says something and then asks ("I took a pottery class.
# Have you tried it?") 1 - TRAILING_WEIGHT (asking_focus): a question echoes the words of the question
# searched for and holds no answer, while the statement that answers it often shares none. On LoCoMo's
# tuning conversations, lines ending with a question were 21% of what filled the multi-hop top 10 and 6%
# of the evidence found there. A photo shared ("[shares a photo of ...]") tells something. Chosen on those
# conversations (bench/README.md, "Retrieval, issue 45: session 7").
ASKING_WEIGHT = 0.4
TRAILING_WEIGHT = 0.3

# Everyday category words whose answers name a member of the category instead ("what are my
# hobbies?" / "plays the guitar", "our pet" / "a cat called Miso", "for a living" / "works as a
# nurse"): MiniLM scores such pairs no higher than unrelated ones (cosine 0.16-0.36), and without a
# shared word BM25 cannot help, so BM25 also looks for these words (category_words). A short
# English list, chosen from issue 32's examples; bench/README.md, "Retrieval, issue 32", has what
# it does elsewhere.
CATEGORY_WORDS = {
    ("hobby", "hobbies", "pastime", "pastimes"): "enjoy enjoys play plays",
    ("job", "jobs", "career", "profession", "occupation", "for a living"): "work works job",
    ("pet", "pets"): "dog dogs cat cats",
    ("car", "cars", "vehicle"): "drive drives",
    ("kid", "kids", "child", "children"): "son sons daughter daughters",
    ("parents",): "mother father mum dad",
}

# The words BM25 leaves out of a query: the full-text index's English stop words (NLTK's list,
# applied after stemming; index.FTS_OPTIONS), so that `query_terms` counts what BM25 can match.
_STOP_WORDS = frozenset("""
i me my myself we our ours you you're you've you'll you'd your yours yourself he him his himself she she's her hers
herself it it's its itself they them their theirs what which who whom this that that'll these those am is are was were
be been being have has had having do did doing a an the and but if or as until while of at by for with about against
between into through after below to from up down in out on off over under again further then here there when where
how all both each few more most other some such no nor not own same so than too s t can will just don don't should
should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven
haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren
weren't won won't wouldn wouldn't""".split())


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal Rank Fusion: sum over lists of 1 / (k + rank), rank starting at 1."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def min_max(values: Sequence[float]) -> list[float]:
    """Batch-relative scaling: best 1.0, worst 0.0; all equal (or one value) 0.5."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high - low <= 1e-12:
        return [0.5] * len(values)
    return [(v - low) / (high - low) for v in values]


def query_terms(text: str) -> set[str]:
    """The distinct words of a query that BM25 can match (lower-cased, stop words left out)."""
    return {w for w in re.findall(r"[^\W_]+", text.lower()) if w not in _STOP_WORDS}


def category_words(text: str) -> list[str]:
    """The CATEGORY_WORDS a query asks about, less the words it has already."""
    words = " " + " ".join(re.findall(r"[^\W_]+", text.lower())) + " "
    found: list[str] = []
    for asked, answers in CATEGORY_WORDS.items():
        if any(f" {word} " in words for word in asked):
            found += [w for w in answers.split() if f" {w} " not in words and w not in found]
    return found


def lexical_match(bm25: float, rows: int, terms: int) -> float:
    """BM25 on an absolute 0-1 scale: about the share of the query's words a memory has, rare words
    counting fully. A word found in one memory of N scores about ln(N) in BM25 (its IDF), so the
    score is divided by ln(1 + N) times the number of query words."""
    if bm25 <= 0 or terms <= 0:
        return 0.0
    return min(bm25 / (math.log(1 + max(rows, 1)) * terms), 1.0)


def dense_match(cosine: float) -> float:
    """Cosine similarity on an absolute 0-1 scale: 0 at orthogonal, 1 at FULL_COSINE and above."""
    return min(max(cosine / FULL_COSINE, 0.0), 1.0)


def stretch(values: Sequence[float], at_least: float) -> list[float]:
    """Min-max scaling that does not stretch a narrow range: the best 1.0, the others
    1 - gap / max(range, at_least). A pool of 60 candidates spans more than `at_least` and scales
    exactly as min-max; in a pool of two near-equal memories min-max would make them 1.0 and 0.0,
    and nothing (recency) could decide between them any more."""
    if not values:
        return []
    high = max(values)
    span = max(high - min(values), at_least)
    if span <= 1e-12:
        return [1.0] * len(values)
    return [max(0.0, 1.0 - (high - v) / span) for v in values]


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
    """score = relevance * (1 - w + w * recency): recency scales relevance down by at most w, so it
    decides between memories of near-equal relevance but never lifts an irrelevant one (the
    additive blend before, (1 - w) * relevance + w * recency, did: bench/locomo_variants.py)."""
    return relevance * (1.0 - recency_weight + recency_weight * recency_score)


def session_lift(relevance: Sequence[float], sessions: Sequence[Sequence[int]], weight: float) -> list[float]:
    """Relevance with each memory's session as a unit: r + weight * s * (1 - r), where s is the mean
    of the SESSION_PEERS best relevances of the other members of its session (a missing one counts
    0). A session is a list of indices into `relevance`; a memory in none keeps its relevance. The
    lift stays below 1, and is largest for the weak members of a strong session."""
    lifted = list(relevance)
    if weight <= 0:
        return lifted
    for members in sessions:
        for i in members:
            peers = sorted((relevance[j] for j in members if j != i), reverse=True)[:SESSION_PEERS]
            if peers:
                strength = sum(peers) / SESSION_PEERS
                lifted[i] = relevance[i] + weight * strength * (1.0 - relevance[i])
    return lifted


def speaker_focus(relevance: Sequence[float], speakers: Sequence[str | None], asked: str | None,
                  weight: float | None = None) -> list[float]:
    """Relevance with the question's speaker first: a line said by another speaker (speakers[i] set and
    not `asked`) keeps (1 - weight) of its relevance; lines of no known speaker and the asked one's
    keep theirs. No speaker asked: unchanged."""
    weight = SPEAKER_WEIGHT if weight is None else weight
    if asked is None or weight <= 0:
        return list(relevance)
    return [r * (1.0 - weight) if who is not None and who != asked else r for r, who in zip(relevance, speakers)]


def mmr(scores: Sequence[float], similarity: Sequence[Sequence[float]], k: int, lam: float,
        min_similarity: float = 0.0) -> list[int]:
    """Maximal Marginal Relevance: greedily pick argmax lam*score - (1-lam)*max_sim(candidate, picked),
    where a similarity below min_similarity counts as 0 (only near-duplicates are pushed down).

    `similarity` is the candidates' pairwise cosine matrix (a pair that should not count: 0).
    Returns indices in pick order; ties go to the earlier candidate so results are deterministic.
    """
    remaining = list(range(len(scores)))
    picked: list[int] = []
    while remaining and len(picked) < k:
        best, best_value = remaining[0], -math.inf
        for i in remaining:
            penalty = max((similarity[i][j] for j in picked), default=0.0)
            if penalty < min_similarity:
                penalty = 0.0
            value = lam * scores[i] - (1.0 - lam) * penalty
            if value > best_value + 1e-12:
                best, best_value = i, value
        picked.append(best)
        remaining.remove(best)
    return picked


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A chat turn that begins with a name and a colon names its speaker ("Caroline: I went to ..."; an imported
# group chat, a transcript): one to three capitalised words (retrieval.speaker_of, asks_only).
SPEAKER = re.compile(r"\s*([A-Z][\w'’-]*(?: [A-Z][\w'’-]*){0,2}):\s")
REACTION_WORDS = 4  # a first sentence this short before the questions is a reaction ("Wow, that's great, Maria!")


def asks_only(text: str) -> bool:
    """Whether a chat line only asks: it ends with "?" and so does each of its sentences, but for a first
    one of at most REACTION_WORDS words (a reaction: "Wow, that's great! Where was it?"; a speaker's
    "Name: " does not count). A line that shares a photo ("[shares a photo of ...]") tells something,
    and so does "I took a pottery class last week. Have you tried it?"."""
    body = text.strip()
    if not _ends_asking(body):
        return False
    said = SPEAKER.match(body)
    sentences = [s for s in _SENTENCE_END.split(body[said.end():] if said else body) if s.strip()]
    first = sentences[0].rstrip()
    return (first.endswith("?") or len(first.split()) <= REACTION_WORDS) and \
        all(s.rstrip().endswith("?") for s in sentences[1:])


def question_weight(text: str) -> float:
    """The share of its relevance a chat line gives up for asking: ASKING_WEIGHT for one that only asks
    (asks_only), TRAILING_WEIGHT for one that ends with a question after saying something, else 0."""
    if not _ends_asking(text.strip()):
        return 0.0
    return ASKING_WEIGHT if asks_only(text) else TRAILING_WEIGHT


def _ends_asking(body: str) -> bool:
    """A line that ends with a question and shares no photo (a photo shared tells something)."""
    return body.endswith("?") and "[shares" not in body


def asking_focus(relevance: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Relevance with each line keeping (1 - weights[i]) of its own (question_weight)."""
    return [r * (1.0 - w) if w > 0 else r for r, w in zip(relevance, weights)]
