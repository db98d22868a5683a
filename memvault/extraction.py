"""Fact extraction and reconciliation: what to remember, and how it changes existing memories.

Decisions only; the ingest code applies them to the vault. The model does the judging
(is this a fact? does it contradict that memory?); everything that can be decided without
it, is: empty input and small talk, facts with no word from the user's text, exact
duplicates, invented ids, and the rule that a new fact is never lost to a DELETE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import pydantic

from memvault import prompts
from memvault.llm import LLMConfig, LLMError, structured

__all__ = ["Decision", "MAX_FACTS", "MAX_CANDIDATES", "extract_facts", "is_small_talk", "reconcile"]

MAX_FACTS = 3
# Memories shown to the model at once; a small model judges a few candidates far better.
MAX_CANDIDATES = 10

Event = Literal["ADD", "UPDATE", "DELETE", "NONE"]


# --- extraction --------------------------------------------------------------------------


class ExtractedFacts(pydantic.BaseModel):
    # maxItems steers a grammar-constrained model; longer lists still validate and are cut
    # after cleaning, rather than spending a retry on them.
    facts: list[str] = pydantic.Field(json_schema_extra={"maxItems": MAX_FACTS})

    @pydantic.field_validator("facts", mode="before")
    @classmethod
    def _lenient(cls, value: Any) -> Any:
        """Accept [{"fact": "..."}] items, a common small-model variation."""
        if not isinstance(value, list):
            return value
        return [_single_string(v) if isinstance(v, dict) else v for v in value]


def _single_string(item: dict) -> Any:
    strings = [v for v in item.values() if isinstance(v, str)]
    return strings[0] if len(strings) == 1 else item


def extract_facts(cfg: LLMConfig, user_text: str) -> list[str]:
    """0-3 short standalone facts about the user from their own words.

    A fact must share a word with the user's text (see `_grounded`): small models echo
    the prompt's example or invent facts. Invalid model output (after one retry) gives
    []. LLMError propagates: the caller decides whether a down endpoint is fatal
    (add --extract) or not (chat upkeep).
    """
    if is_small_talk(user_text):
        return []
    answer = structured(cfg, prompts.extraction_messages(user_text), ExtractedFacts)
    if answer is None:
        return []
    facts: list[str] = []
    seen: set[str] = set()
    for fact in answer.facts:
        fact = " ".join(fact.split())
        key = _norm(fact)
        if key and key not in seen and _grounded(fact, user_text):
            seen.add(key)
            facts.append(fact)
    return facts[:MAX_FACTS]


# Function words a third-person rewrite adds or shares with any text; they prove nothing.
_FUNCTION_WORDS = frozenset(
    """the a an and or but of to in on at by for with from as is are was were be been am has
    have had do does did not no user user's their they them he she his her its it this that who
    which what named name very also""".split()
)


def _grounded(fact: str, source: str) -> bool:
    """Whether the fact shares a content word with the source, loosely (crude stems).

    "The user enjoys hiking" is grounded in "I love hikes"; the prompt's own example
    ("The user's wife is named Anne") is not grounded in "Recommend a book for my son".
    """
    return bool(_stems(fact) & _stems(source))


def _stems(text: str) -> set[str]:
    stems = set()
    for word in re.findall(r"[\w']+", text.casefold().replace("\u2019", "'")):
        if word.isdigit():
            stems.add(word)  # numbers must match exactly
        elif len(word) > 2 and word not in _FUNCTION_WORDS:
            stems.add(re.sub(r"(ing|ed|es|s|'s)$", "", word)[:5])
    return stems


# Words that make up greetings, thanks and acknowledgements, and nothing else.
_PHATIC = frozenset(
    """hi hello hey hiya yo thanks thank you thx ty ok okay k cool great nice awesome perfect
    there good morning afternoon evening night bye goodbye see later yes yeah yep no nope sure lol
    haha hmm wow cheers please welcome np got it alright fine much very so a lot again that's
    thats right exactly indeed oh ah well done all the best have day too""".split()
)
_FIRST_PERSON = frozenset("i i'm im i've i'd i'll me my mine myself we we're we've our ours us".split())


def is_small_talk(text: str) -> bool:
    """True for input that cannot hold a fact about the user, judged without the model.

    Conservative on purpose (anything doubtful goes to the model): empty or letterless
    text; up to 6 words that are all greeting/thanks/acknowledgement words; a single-line,
    single-sentence question that says nothing in the first person.
    """
    text = text.strip().replace("\u2019", "'")
    words = re.findall(r"[a-z']+", text.lower())
    if not words:
        return True
    if len(words) <= 6 and all(w in _PHATIC for w in words):
        return True
    one_sentence = "\n" not in text and not re.search(r"[.!?]\s", text[:-1])
    return text.endswith("?") and one_sentence and not _FIRST_PERSON.intersection(words)


# --- reconciliation -----------------------------------------------------------------------


@dataclass
class Decision:
    event: Event
    text: str | None  # the fact text for ADD/UPDATE (the new text)
    target: str | None  # the existing memory's real id for UPDATE/DELETE/NONE; None for ADD


class MemoryEvent(pydantic.BaseModel):
    id: int
    text: str
    event: Event

    @pydantic.model_validator(mode="before")
    @classmethod
    def _lenient(cls, value: Any) -> Any:
        """Accept lower-case events and a missing text (DELETE/NONE need none)."""
        if isinstance(value, dict):
            value = {"text": "", **value}
            if isinstance(value.get("event"), str):
                value["event"] = value["event"].strip().upper()
        return value


class ReconcileAnswer(pydantic.BaseModel):
    memory: list[MemoryEvent]


def reconcile(cfg: LLMConfig, new_facts: list[str], existing: list[tuple[str, str]]) -> list[Decision]:
    """Decide how `new_facts` change `existing` = [(real_id, text), ...], the nearest facts.

    - Exact duplicates (ignoring case, spacing, trailing punctuation) of an existing
      memory are NONE without asking the model; no existing memories means all ADD.
    - The model sees ids 0..n-1; ids it returns that it was not given are ignored.
    - UPDATE is accepted only when its text carries one of the new facts (else a small
      model could rewrite unrelated memories); DELETE on a given id is trusted.
    - Every new fact is ADDed, verbatim, unless the model showed it is already stored:
      an accepted UPDATE text carries it, or it answered NONE for a memory that carries
      it. So a DELETE without an ADD still stores the new fact, and the model's own ADD
      texts are not needed (nor trusted: small models echo old memories as ADDs).
    - LLM failure (invalid answers, or LLMError: endpoint down) means all new facts are
      ADDed: the LLMError is caught here so a chat's memory upkeep never loses a fact.

    Returns the decisions on existing memories (UPDATE, DELETE, and NONE for those left
    as they are, which the caller may ignore), then the ADDs.
    """
    texts = {real_id: text for real_id, text in existing}
    by_norm = {_norm(text): real_id for real_id, text in texts.items()}
    decisions: list[Decision] = []
    pending: list[str] = []
    for fact in _unique(new_facts):
        if _norm(fact) in by_norm:
            decisions.append(Decision("NONE", None, by_norm[_norm(fact)]))
        else:
            pending.append(fact)
    # A memory the user just restated is current: the model gets no chance to delete it.
    restated = {d.target for d in decisions}
    shown = [(real_id, text) for real_id, text in texts.items() if real_id not in restated]
    shown = shown[:MAX_CANDIDATES]
    if not pending:
        return decisions
    if not shown:
        return decisions + [Decision("ADD", fact, None) for fact in pending]

    try:
        answer = structured(
            cfg, prompts.reconciliation_messages([t for _, t in shown], pending), ReconcileAnswer
        )
    except LLMError:
        answer = None
    if answer is None:
        return decisions + [Decision("ADD", fact, None) for fact in pending]

    decided: dict[str, Decision] = {}  # real id -> the first accepted change, or NONE
    for item in answer.memory:
        if item.event == "ADD" or not 0 <= item.id < len(shown):
            continue
        real_id, old_text = shown[item.id]
        previous = decided.get(real_id)
        if previous is not None and previous.event != "NONE":
            continue
        text = " ".join(item.text.split())
        if item.event == "UPDATE" and _norm(text) != _norm(old_text):
            if any(_carries(text, fact) for fact in pending):
                decided[real_id] = Decision("UPDATE", text, real_id)
        elif item.event == "DELETE":
            decided[real_id] = Decision("DELETE", None, real_id)
        elif previous is None:  # NONE, or an UPDATE that changes nothing
            decided[real_id] = Decision("NONE", None, real_id)

    # Texts that will be in the vault and that the model linked to the new facts.
    kept = [
        d.text if d.event == "UPDATE" else texts[real_id]
        for real_id, d in decided.items()
        if d.event != "DELETE"
    ]
    decisions += decided.values()
    decisions += [Decision("ADD", f, None) for f in pending if not any(_carries(t, f) for t in kept)]
    return decisions


# --- text comparison ----------------------------------------------------------------------


def _norm(text: str) -> str:
    """Case, spacing and trailing punctuation folded: the key for exact duplicates."""
    return " ".join(text.casefold().split()).rstrip(" .!?;:,")


def _unique(facts: list[str]) -> list[str]:
    out: dict[str, str] = {}
    for fact in facts:
        fact = " ".join(fact.split())
        if _norm(fact):
            out.setdefault(_norm(fact), fact)
    return list(out.values())


# Ignored when comparing wording: articles, present-tense "is", and "user" (every fact has it).
_FILLER = frozenset({"a", "an", "the", "and", "is", "are", "user"})
# Words that negate or date a statement ("no longer likes", "ex-wife", "was"): both texts
# must agree on them.
_POLARITY = frozenset(
    {"not", "no", "never", "nor", "neither", "none", "nothing", "nobody", "cannot", "without",
     "longer", "ex", "former", "formerly", "previously", "used", "was", "were", "had"}
)


def _words(text: str) -> set[str]:
    words = set()
    for w in re.findall(r"[\w']+", text.casefold().replace("\u2019", "'")):
        if w.endswith("n't"):
            words.add("not")
            w = w[:-3]
        words.add(w.removesuffix("'s").strip("'"))
    return words - {""}


def _carries(text: str, fact: str) -> bool:
    """Whether `text` says everything `fact` says: all its words, with the same polarity.

    Strict on purpose: a miss only costs a near-duplicate memory, a false match loses the
    fact. "The user likes green tea" carries "The user likes tea"; "The user no longer
    likes tea" does not.
    """
    fact_words, text_words = _words(fact), _words(text)
    if fact_words & _POLARITY != text_words & _POLARITY:
        return False
    content = fact_words - _FILLER
    return content <= text_words if content else _norm(fact) == _norm(text)
