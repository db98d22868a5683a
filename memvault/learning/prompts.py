"""Every prompt memvault sends to an LLM, and small builders returning `messages` lists.

Written for small local models (1.5B-4B): short, one task per prompt, one tiny example
where the output format matters, plain words instead of jargon.
"""

from __future__ import annotations

import json
from typing import Literal

Style = Literal["conversation", "journal", "document"]
SummaryKind = Literal["rolling", "one_sentence", "paragraph", "chunk", "meta", "session"]

def _extraction_prompt(source: str, at_most: int, newer_rule: str = "") -> str:
    """The rules both extraction prompts share (per message, and per episode: CALIBRATE)."""
    return f"""\
You extract lasting facts about the user from {source}; passing \
events and moods are not facts.
Rules:
- Only what the user states about themselves: identity, people in their life, likes and \
dislikes, plans, work, places, possessions.{newer_rule}
- Each fact is one short standalone sentence about "the user", never "I" or "my": \
"I love my wife Anne" gives "The user's wife is named Anne".
- At most {at_most} facts. Do not invent anything.
- Greetings, thanks and small talk have no facts: return an empty list. From questions and \
requests, keep only what the user reveals about themselves.
Answer with JSON only, like \
{{"facts": ["The user's wife is named Anne", "The user hates mushrooms"]}} or {{"facts": []}}."""


# Fact extraction: 0-3 short third-person facts about the user, from the user's own words.
FACT_EXTRACTION = _extraction_prompt("the user's message", 3)

# Reconciliation, one question per (existing memory, new fact) pair: is the memory still
# true? Small models judge "is it still true that ...?" as reading comprehension far better
# than they pick ADD/UPDATE/DELETE/NONE for a list, or a relation label for a pair (measured
# in bench/memory_quality.py). The memory is restated inside the question on purpose.
STILL_TRUE = (
    "Earlier we learned: {old}. Today we learned: {new}. Is it still true that {old_inline}? "
    'Answer with JSON: {{"answer": "yes"}} or {{"answer": "no"}}.'
)

# Reconciliation as one list (reconcile_mode = "list", docs/design.md "The write path"): the nearest memories
# with short integer ids and the new facts; every memory comes back with an event. Suits
# larger models; small ones do better with STILL_TRUE, one pair at a time.
RECONCILIATION = """\
You keep a user's memory list up to date. You get the current memories (with ids) and \
new facts.
Return every memory with one event:
- NONE: the memory stays as it is (also when a new fact only repeats it).
- UPDATE: a new fact adds detail to the same thing; give the merged text.
- DELETE: a new fact contradicts the memory.
Then return each new fact that is not already in the memories as ADD with a new id.
A contradicted memory is DELETEd and the new fact is ADDed.
Use only the given ids for NONE, UPDATE and DELETE.
Example:
Memories: [{"id": 0, "text": "The user likes tea"}, {"id": 1, "text": "The user lives in Oslo"}, \
{"id": 2, "text": "The user has a dog"}]
New facts: ["The user lives in Bergen", "The user's dog is named Rex"]
Answer: {"memory": [{"id": 0, "text": "The user likes tea", "event": "NONE"}, \
{"id": 1, "text": "The user lives in Oslo", "event": "DELETE"}, \
{"id": 2, "text": "The user has a dog named Rex", "event": "UPDATE"}, \
{"id": 3, "text": "The user lives in Bergen", "event": "ADD"}]}
Answer with JSON only."""

# Rolling summary: fold newly learned facts into the conversation's running summary.
ROLLING_SUMMARY = """\
You keep a short running summary of what is known about the user.
Merge the new facts into the previous summary. Keep durable information: who the user is, \
people, preferences, plans, ongoing work. Drop small talk, and drop anything a newer fact \
contradicts. Write plain sentences, at most 8. Output only the summary."""

# The kind of text being summarized, per --style, so the model knows what matters in it.
STYLES: dict[str, tuple[str, str]] = {
    "conversation": (
        "a conversation between a user and an assistant",
        "what the user said about themselves, what was decided, and open questions",
    ),
    "journal": (
        "personal journal entries",
        "events, people, feelings and plans, in the order they happened",
    ),
    "document": (
        "a document or notes",
        "the main points, key facts and conclusions",
    ),
}

# One-sentence summary, for short inputs (under ~500 tokens).
ONE_SENTENCE = (
    "Summarize the following text ({what}) in one sentence. Focus on {focus}. "
    "Output only the sentence."
)

# Paragraph summary, for medium inputs (under ~3,000 tokens).
PARAGRAPH = (
    "Summarize the following text ({what}) in one paragraph of 3 to 6 sentences. "
    "Focus on {focus}. Keep names, dates and numbers. Output only the paragraph."
)

# Chunk summary: one part of a long input; later combined by META.
CHUNK = (
    "The text below is one part of a longer text ({what}). Summarize this part in 3 to 5 "
    "sentences. Focus on {focus}. Keep names, dates and numbers. Output only the summary."
)

# Meta summary: combine ordered partial summaries into one.
META = (
    "These are summaries of consecutive parts of one long text ({what}), in order. Combine "
    "them into one coherent summary of at most 8 sentences, without repetition. "
    "Focus on {focus}. Output only the summary."
)

# Session fold: condense older chat turns so the chat can go on with less context.
SESSION_FOLD = """\
Condense the earlier part of this chat into a short summary the assistant can rely on to \
continue it: what the user asked and told, and what was answered or decided. At most 5 \
sentences. If there is a previous summary, merge it in. Output only the summary."""

_SUMMARY_TEMPLATES = {"one_sentence": ONE_SENTENCE, "paragraph": PARAGRAPH, "chunk": CHUNK, "meta": META}


def extraction_messages(user_text: str) -> list[dict]:
    return [
        {"role": "system", "content": FACT_EXTRACTION},
        {"role": "user", "content": f"User message:\n{user_text.strip()}"},
    ]


def reconciliation_messages(existing: list[str], new_facts: list[str]) -> list[dict]:
    """`existing` is shown with ids 0..n-1 (list positions); the caller maps them back."""
    memories = [{"id": i, "text": text} for i, text in enumerate(existing)]
    user = (
        f"Memories: {json.dumps(memories, ensure_ascii=False)}\n"
        f"New facts: {json.dumps(new_facts, ensure_ascii=False)}"
    )
    return [{"role": "system", "content": RECONCILIATION}, {"role": "user", "content": user}]


def still_true_messages(old: str, new: str) -> list[dict]:
    """Messages asking whether the memory `old` is still true now that `new` is known."""
    old, new = _clause(old), _clause(new)
    content = STILL_TRUE.format(old=old, new=new, old_inline=_inline(old))
    return [{"role": "user", "content": content}]


def _clause(text: str) -> str:
    return " ".join(text.split()).rstrip(" .!?;:,")


# Leading words that are not names, so they can be lower-cased inside a sentence.
_LOWERABLE = frozenset("the a an my our their his her its this that these those".split())


def _inline(text: str) -> str:
    """`text` to go after "that ...": "The user lives in Oslo" -> "the user lives in Oslo"."""
    first, _, rest = text.partition(" ")
    if first.casefold() in _LOWERABLE:
        return f"{first.casefold()} {rest}".rstrip()
    return text


def summary_messages(
    kind: SummaryKind, text: str, style: Style = "conversation", previous: str | None = None
) -> list[dict]:
    """Messages for one summary call.

    kind: "rolling" (text = new facts, one per line; previous = the current summary),
    "session" (text = older turns; previous = the session summary so far),
    "one_sentence" / "paragraph" / "chunk" (text = the input), "meta" (text = the chunk
    summaries, in order, separated by blank lines).
    """
    if kind == "rolling":
        user = f"Previous summary:\n{previous or '(none)'}\n\nNew facts:\n{text.strip()}"
        return [{"role": "system", "content": ROLLING_SUMMARY}, {"role": "user", "content": user}]
    if kind == "session":
        user = (f"Previous summary:\n{previous}\n\n" if previous else "") + f"Chat:\n{text.strip()}"
        return [{"role": "system", "content": SESSION_FOLD}, {"role": "user", "content": user}]
    what, focus = STYLES[style]
    system = _SUMMARY_TEMPLATES[kind].format(what=what, focus=focus)
    return [{"role": "system", "content": system}, {"role": "user", "content": text.strip()}]


def estimate_tokens(text: str) -> int:
    """About four characters a token: the measure of every budget here (session size, summary
    depth), close enough for the models memvault talks to without loading a tokenizer."""
    return (len(text) + 3) // 4


# --- episodes and predict-calibrate (docs/design.md, "Episodes") -------------------------------

# Title and narrative of one closed episode, from its turns. No concrete example: given a short
# conversation, the 1.5B model copied the one it was shown ("Planning a move to Lisbon ..."; issue
# 26, bench/episode_grounding.py). The answer's shape is enough, and the JSON schema constrains it;
# episodes.grounding rejects a record the turns do not bear out.
EPISODE = """\
You write a short record of one part of a conversation between a user and an assistant.
Give a "title" of at most 8 words saying what it was about, and a "narrative" of 1 to 4 \
sentences in the third person ("The user ..."): what the user told, asked or decided, and what \
the assistant answered. Use only what this conversation says, with its own names, dates and \
numbers. Do not invent anything.
Answer with JSON only, in this shape: \
{"title": "<what it was about>", "narrative": "The user <...>. The assistant <...>."}"""

# Predict: given only what is known, what did the user most likely say? (An episode's known
# facts, no turns.) What this misses is what the conversation taught.
PREDICT = """\
You guess what a user said in a conversation, knowing only some facts about them.
Write 1 to 4 short sentences about the user that the conversation most likely contained, using \
only the known facts. Do not invent new details.
Answer with JSON only, like \
{"prediction": ["The user still lives in Oslo", "The user talked about their dog Rex"]}"""

# Calibrate, the model's part: the lasting facts in the user's own messages of an episode. The
# prediction is NOT shown here: shown "what we expected" beside the real messages, the 1.5B model
# copied the expectation back ("The user loves pizza" for "I've come to hate pizza"; bench/README.md,
# "Episodes"). Which facts the prediction missed is decided by memvault (extraction.calibrate).
CALIBRATE = _extraction_prompt("the user's messages in one conversation", 5,
                               " When a message changes an earlier one, keep the newer.")


def episode_messages(transcript: str) -> list[dict]:
    """`transcript`: the episode's turns, one `user: ...` / `assistant: ...` line each."""
    return [{"role": "system", "content": EPISODE}, {"role": "user", "content": f"Conversation:\n{transcript.strip()}"}]


def predict_messages(known: list[str]) -> list[dict]:
    """Only the known facts: the episode's own title would leak what is new into the prediction,
    and a new fact the prediction "foresaw" would be lost."""
    facts = "\n".join(f"- {fact}" for fact in known)
    user = f"Known facts about the user:\n{facts}"
    return [{"role": "system", "content": PREDICT}, {"role": "user", "content": user}]


def calibrate_messages(user_texts: list[str]) -> list[dict]:
    said = "\n".join(f"- {' '.join(t.split())}" for t in user_texts)
    return [{"role": "system", "content": CALIBRATE}, {"role": "user", "content": f"User messages:\n{said}"}]
