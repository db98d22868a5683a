"""The words of a question that say what it is about (issue 45; docs/design.md, "The read path", steps 2-3):
the question without the speaker it names and without its function words ("What martial arts has John
done?" -> "What martial arts done").

A question about one speaker of a chat is searched again among that speaker's lines
(retrieval._speaker_candidates). MiniLM's vector of the whole question, name removed or not, stays near
the chat's other questions ("What's the main idea of your art?") and the lines that address the speaker;
the vector of its content words lies nearer the statements that answer it ("I'm off to do some
taekwondo!"). Their best CONTENT_BEST are lifted beside the question's best (content_lift), as the speaker
search's are. Chosen on LoCoMo's tuning conversations (bench/README.md, "Retrieval, issue 45: session 6").
"""

from __future__ import annotations

import re

# How many of the content words' best lines are lifted (content_lift); 0: none.
CONTENT_BEST = 3
# Where the content words' vector is used: "lift" (a search of its own among the speaker's lines, its best
# lifted), "speaker" (it replaces the nameless question in the speaker search; nothing lifted apart).
CONTENT_MODE = "lift"
_QUESTION_WORDS = frozenset("what where when who whom whose which why how".split())


def content_words(text: str, name: str) -> str:
    """The question without `name` (and its "'s"), stop words (ranking's, which BM25 leaves out too) and
    punctuation, question words kept: "" when nothing is left."""
    from memvault.reading.ranking import _STOP_WORDS

    text = re.sub(rf"\b{re.escape(name)}(?:['’]s)?\b", " ", text)
    words = re.findall(r"[^\W_]+", text)
    return " ".join(w for w in words if w.lower() in _QUESTION_WORDS or w.lower() not in _STOP_WORDS)


def content_lift(pool: list, relevance: list[float]) -> list[float]:
    """The n-th nearest line to the content words (scores "content": its place; n <= CONTENT_BEST) gets at
    least the pool's n-th best relevance, no more than its own match (scores "content_lift": the gain)."""
    ranked = sorted((r.scores["content"], j) for j, r in enumerate(pool) if "content" in r.scores)
    if not ranked or CONTENT_BEST <= 0:
        return relevance
    ladder = sorted(relevance, reverse=True)
    lifted = list(relevance)
    for place, (_, j) in enumerate(ranked[:CONTENT_BEST]):
        value = min(ladder[place], pool[j].scores["match"])
        if value > lifted[j]:
            pool[j].scores["content_lift"] = value - lifted[j]
            lifted[j] = value
    return lifted
