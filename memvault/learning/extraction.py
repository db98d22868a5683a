"""Fact extraction and reconciliation: what to remember, and how it changes existing memories.

Decisions only; the ingest code applies them to the vault. The model does the judging
(is this a fact? does it contradict that memory?); everything that can be decided without
it, is: empty input and small talk, facts with no word from the user's text, exact
duplicates, which memory each question is about (the model never handles ids), and the
rule that a new fact is never lost to a DELETE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import pydantic

from memvault.learning import prompts
from memvault.store.llm import LLMConfig, LLMError, structured, structured_probs

__all__ = [
    "Decision", "MAX_FACTS", "MAX_PAIRS_PER_FACT", "extract_facts", "is_small_talk", "reconcile", "third_person",
]

MAX_FACTS = 3
# Existing memories asked about per new fact (one call each), nearest first.
MAX_PAIRS_PER_FACT = 3
# A memory is replaced only when the model's probability of "no, no longer true" is at least
# this: a coin flip keeps it (bench/reconcile_pairs.py: on its 122 labelled pairs, the plain
# argmax, 0.5, replaced 3 more true memories and caught 1 more contradiction).
MIN_UNTRUE = 0.52

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
    """0-3 short standalone facts about the user from what their message states.

    Only the statement part of the message is looked at (statements.statement_part: its
    questions, requests, greetings and reactions are cut out by rules, so "What is my job?"
    never reaches the model and can never create or replace a fact); facts are extracted
    from that part alone. (A yes/no "does this tell anything lasting?" asked of the 1.5B
    model before extraction was measured and dropped: its p(no) stayed within 0.35-0.54 for
    every statement and reaction alike; bench/learning_gate.py --gate model.) A fact must
    share a word with the statement part (see `_grounded`):
    small models echo the prompt's example or invent facts. Invalid model output (after
    one retry) raises LLMNoValidAnswer, as a down endpoint raises LLMError: the caller decides
    whether that is fatal (add --extract) or a warning (chat upkeep); never "no facts found".
    """
    from memvault.learning.statements import statement_part

    statement = statement_part(user_text)
    if not statement or is_small_talk(statement):
        return []
    answer = structured(cfg, prompts.extraction_messages(statement), ExtractedFacts)
    if answer is None:  # garbage is a failure the user must see, never "no facts found"
        raise _no_valid_answer(cfg)
    facts: list[str] = []
    seen: set[str] = set()
    for fact in answer.facts:
        fact = third_person(" ".join(fact.split()))
        key = _norm(fact)
        if key and key not in seen and _grounded(fact, statement):
            seen.add(key)
            facts.append(fact)
    return facts[:MAX_FACTS]


class Answer(pydantic.BaseModel):
    answer: Literal["yes", "no"]

    @pydantic.field_validator("answer", mode="before")
    @classmethod
    def _lenient(cls, value: Any) -> Any:
        """Accept true/false and "Yes." (servers that do not enforce the schema)."""
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, str):
            return value.strip().rstrip(".!").lower()
        return value


class StillTrue(Answer):
    """Is it still true that ...? (reconciliation)"""


# --- first person to third person ------------------------------------------------------
# Small models sometimes copy the user's words ("I love pizza") despite the prompt. Such a
# fact reads wrong when shown back, and the reconciliation question about it ("is it still
# true that I love pizza?") gets answered as if the model were "I". A rewrite of the
# pronouns fixes both; the verb after "I" gets its third-person form when it is plainly a
# present-tense verb, and stays as it is otherwise.

_SUBJECT_FORMS = {  # "I" + verb/contraction -> "the user" + verb
    "i'm": "is", "i am": "is", "i was": "was", "i've": "has", "i have": "has", "i'd": "would",
    "i'll": "will", "i do": "does", "i don't": "doesn't", "i didn't": "didn't", "i can't": "can't",
}
_OBJECT_FORMS = {"my": "the user's", "mine": "the user's", "me": "the user", "myself": "the user"}
_LATER_FORMS = {"my": "their", "mine": "theirs", "me": "them", "myself": "themselves"}
# Words after "I" that keep their form: modals, and past tenses that do not end in -ed.
_NO_S = frozenset(
    """can could will would shall should may might must also still often never always just really
    usually sometimes recently only already was had did went got made sold bought left took came
    became began met ran saw said told gave found felt knew thought brought kept lost paid quit put
    read set spent taught won wrote drove ate drank grew fell flew broke chose spoke swam sang wore
    woke forgot heard held built sent slept stood understood lent meant caught fought sat shot hid
    led fed hung struck dealt used""".split()
)
_ADVERBS = frozenset("also still often never always just really usually sometimes recently only already".split())


def third_person(fact: str) -> str:
    """"I love pizza, my favourite food" -> "The user loves pizza, the user's favourite food".

    Only first-person singular words change; a fact without them comes back as it was.
    """
    text = fact.replace("\u2019", "'")
    if not re.search(r"\b(I|I'\w+|my|mine|me|myself)\b", text, re.IGNORECASE):
        return fact

    def subject(match: re.Match) -> str:
        words = match.group(0)
        key = " ".join(words.lower().split())
        if key in _SUBJECT_FORMS:
            return "the user " + _SUBJECT_FORMS[key]
        adverb, verb = match.group("adverb") or "", match.group("verb")
        return f"the user {adverb}{_third_person_verb(verb)}"

    text = re.sub(
        r"(?<!and )(?:\bI (?:am|was|have|do|don't|didn't|can't)\b|\bI'(?:m|ve|d|ll)\b"
        r"|\bI (?P<adverb>(?:(?:" + "|".join(sorted(_ADVERBS)) + r") )?)(?P<verb>[a-z]+)\b)",
        subject, text,
    )
    text = re.sub(r"\bI\b", "the user", text)

    def other(match: re.Match) -> str:
        word = match.group(1).lower()
        if "the user" in text[: match.start()].lower():  # named already: "sold their Volvo"
            return _LATER_FORMS[word]
        return _OBJECT_FORMS[word]

    text = re.sub(r"\b(my|mine|me|myself)\b", other, text, flags=re.IGNORECASE)
    return text[0].upper() + text[1:]


def first_person(fact: str) -> str:
    """"The user lives in Porto, the user's favourite city" -> "I live in Porto, my favourite city".

    Crude on purpose: only to find the facts a user wrote in their own words ("I live in Lisbon") near
    a learned fact, which MiniLM places far from its third-person form (0.32 where the first-person
    form is 0.55: bench/README.md, issue 26). Never stored, never shown to a model."""
    if not re.search(r"\bthe user\b", fact, re.IGNORECASE):
        return fact

    def subject(match: re.Match) -> str:
        verb = match.group(1).lower()
        irregular = {"is": "am", "was": "was", "has": "have", "does": "do", "doesn't": "don't"}
        if verb in irregular:
            return "I " + irregular[verb]
        if verb.endswith("ies"):
            return "I " + verb[:-3] + "y"
        if re.search(r"(ches|shes|sses|xes|zes|oes)$", verb):
            return "I " + verb[:-2]
        if verb.endswith("s") and not verb.endswith("ss"):
            return "I " + verb[:-1]
        return "I " + verb

    text = re.sub(r"\bthe user's\b", "my", fact, flags=re.IGNORECASE)
    text = re.sub(r"\bthe user ([a-z']+)", subject, text, flags=re.IGNORECASE)
    text = re.sub(r"\bthe user\b", "me", text, flags=re.IGNORECASE)
    text = re.sub(r"\btheir\b", "my", text, flags=re.IGNORECASE)
    text = re.sub(r"\bthemselves\b", "myself", text, flags=re.IGNORECASE)
    return text[0].upper() + text[1:]


def _third_person_verb(verb: str) -> str:
    if verb in _NO_S or verb.endswith("ed"):
        return verb
    if re.search(r"(s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


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
    by: str | None = None  # DELETE: the new fact that made the memory untrue
    p_no: float | None = None  # pairs mode: the model's p("no") about this memory (bench/user_fact_pairs.py)


def reconcile(
    cfg: LLMConfig,
    new_facts: list[str],
    existing: list[tuple[str, str]],
    neighbours: dict[str, list[str]] | None = None,
    mode: str = "pairs",
    strict: bool = False,
) -> list[Decision]:
    """Decide how `new_facts` change `existing` = [(real_id, text), ...], the nearest facts.

    `neighbours` maps a new fact to the ids of the memories worth asking about (nearest
    first, already cut by similarity); without it every existing memory is a candidate.
    `mode` is the reconcile_mode setting: "pairs" (`_reconcile_pairs`, the default) or
    "list" (`_reconcile_list`, one call for all facts). In both, an exact duplicate
    (ignoring case, spacing, trailing punctuation) of a memory is NONE without asking the
    model, and a DELETE never drops the new fact.

    Returns the decisions on existing memories (UPDATE, DELETE, and NONE for those left
    as they are, which the caller may ignore), then the ADDs.

    strict (the `reconcile` command): an endpoint that fails, or answers that stay invalid,
    raise LLMError instead of falling back, since no new fact is at stake there and a plan
    made of fallbacks would say "keep" where the model was never really asked.
    """
    texts = {real_id: text for real_id, text in existing}
    by_norm = {_norm(text): real_id for real_id, text in texts.items()}
    restated: list[Decision] = []
    pending: list[str] = []
    for fact in _unique(new_facts):
        if _norm(fact) in by_norm:
            restated.append(Decision("NONE", None, by_norm[_norm(fact)]))
        else:
            pending.append(fact)
    # A memory the user just restated is current: no other new fact gets to delete it.
    for decision in restated:
        texts.pop(decision.target, None)
    if mode == "list":
        return restated + _reconcile_list(cfg, pending, texts, neighbours, strict)
    return restated + _reconcile_pairs(cfg, pending, texts, neighbours, strict)


def _no_valid_answer(cfg: LLMConfig) -> LLMError:
    from memvault.errors import LLMNoValidAnswer
    from memvault.store.llm import display_url

    return LLMNoValidAnswer(f"LLM {cfg.model} at {display_url(cfg.base_url)} gave no valid answer after a retry; "
                    "check llm_model (MEMVAULT_LLM_MODEL)")


def _reconcile_pairs(
    cfg: LLMConfig, pending: list[str], texts: dict[str, str], neighbours: dict[str, list[str]] | None,
    strict: bool = False,
) -> list[Decision]:
    """One question per (memory, new fact) pair. `texts`: real id -> text of the memories
    that may change; `pending`: the new facts that are not exact duplicates.

    - A fact without candidates is ADDed without asking.
    - Otherwise one question per (memory, new fact) pair, at most MAX_PAIRS_PER_FACT per
      fact: "is the memory still true?" (yes/no, schema-constrained). The model never sees
      or returns an id: the pairing is ours, so no answer can point at the wrong memory.
    - "no" (with probability >= MIN_UNTRUE when the server reports probabilities): the
      memory is DELETEd (by that fact), or UPDATEd to the new fact when the new fact says
      everything the memory said (a refinement: nothing is lost). Else it is kept.
    - Every new fact is ADDed, verbatim, unless the model showed it is already stored: it
      answered "yes" for a memory that carries it (see `_carries`), or the fact UPDATEd a
      memory. So a DELETE never drops the new fact.
    - An invalid answer keeps the memory. LLM failure (LLMError: endpoint down) stops the
      questions and the new facts are ADDed: it is caught here so a chat's memory upkeep
      never loses a fact.
    """
    decided: dict[str, Decision] = {}  # real id -> the first change, or NONE
    stored: dict[str, list[str]] = {}  # new fact -> ids of memories the model kept that carry it
    updated: set[str] = set()  # new facts that became an UPDATE's text
    for fact in pending:
        ids = list(texts) if neighbours is None else neighbours.get(fact, [])
        candidates = [i for i in dict.fromkeys(ids) if i in texts]
        for real_id in candidates[:MAX_PAIRS_PER_FACT]:
            if decided.get(real_id, Decision("NONE", None, None)).event != "NONE":
                continue  # an earlier new fact already replaced it
            try:
                # A fact the user wrote in the first person is asked about in the third: "is it still
                # true that I ...?" gets answered as if the model were "I".
                answer = structured_probs(cfg, prompts.still_true_messages(third_person(texts[real_id]), fact),
                                          StillTrue, "answer")
            except LLMError:
                if strict:
                    raise
                return _with_adds(list(decided.values()), pending, stored, updated, decided)
            if answer is None and strict:
                raise _no_valid_answer(cfg)
            old = third_person(texts[real_id])  # "I live in Lisbon" carries and is carried as the user's words
            p_no = answer[1]["no"] if answer is not None else None
            if p_no is not None and p_no >= MIN_UNTRUE:
                if fact not in updated and _carries(fact, old):
                    decided[real_id] = Decision("UPDATE", fact, real_id, p_no=p_no)
                    updated.add(fact)
                else:
                    decided[real_id] = Decision("DELETE", None, real_id, by=fact, p_no=p_no)
            else:
                kept = decided.setdefault(real_id, Decision("NONE", None, real_id))
                kept.p_no = max(kept.p_no or 0.0, p_no or 0.0) if p_no is not None else kept.p_no
                if answer is not None and _carries(old, fact):
                    stored.setdefault(fact, []).append(real_id)
    return _with_adds(list(decided.values()), pending, stored, updated, decided)


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


def _reconcile_list(
    cfg: LLMConfig, pending: list[str], texts: dict[str, str], neighbours: dict[str, list[str]] | None,
    strict: bool = False,
) -> list[Decision]:
    """One call for all new facts: the candidate memories with ids 0..n-1, every memory
    returned with ADD/UPDATE/DELETE/NONE.

    - Ids the model was not given are ignored; the first change per memory wins.
    - UPDATE is accepted only when its text carries one of the new facts (else a small
      model could rewrite unrelated memories); DELETE on a given id is trusted.
    - Every new fact is ADDed, verbatim, unless the model showed it is already stored:
      an accepted UPDATE text carries it, or it answered NONE for a memory that carries it.
      So a DELETE without an ADD still stores the new fact, and the model's own ADD texts
      are not needed (nor trusted: small models echo old memories as ADDs).
    - Invalid answers (after one retry) or LLM failure: all new facts are ADDed.
    """
    if neighbours is None:
        ids = list(texts)
    else:  # the neighbours of every new fact, nearest first, each once
        ids = list(dict.fromkeys(i for fact in pending for i in neighbours.get(fact, [])[:MAX_PAIRS_PER_FACT]))
    shown = [(real_id, texts[real_id]) for real_id in ids if real_id in texts]
    if not pending:
        return []
    if not shown:
        return [Decision("ADD", fact, None) for fact in pending]
    try:
        answer = structured(cfg, prompts.reconciliation_messages([t for _, t in shown], pending), ReconcileAnswer)
    except LLMError:
        if strict:
            raise
        answer = None
    if answer is None:
        if strict:
            raise _no_valid_answer(cfg)
        return [Decision("ADD", fact, None) for fact in pending]

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
    kept = [d.text if d.event == "UPDATE" else texts[real_id] for real_id, d in decided.items() if d.event != "DELETE"]
    adds = [Decision("ADD", fact, None) for fact in pending if not any(_carries(t, fact) for t in kept)]
    return list(decided.values()) + adds


def _with_adds(
    decisions: list[Decision], pending: list[str], stored: dict[str, list[str]], updated: set[str],
    decided: dict[str, Decision],
) -> list[Decision]:
    """`decisions` plus an ADD for each new fact not shown to be in the vault already."""
    for fact in pending:
        kept = any(decided[real_id].event == "NONE" for real_id in stored.get(fact, []))
        if fact not in updated and not kept:
            decisions.append(Decision("ADD", fact, None))
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


# --- predict-calibrate (extraction_mode = "predict-calibrate", docs/design.md "Episodes") ------
# Per closed episode: the model predicts, from the related known facts alone, what the user said;
# the model extracts the facts the user's messages state (without seeing the prediction, which a
# small model copies back); memvault keeps the facts the prediction did not already say: new ones,
# and changed ones (a changed fact has other words or another polarity, so no prediction carries
# it). The facts kept go through `reconcile` like any others. None from either call means "no
# valid answer": the caller falls back to per-message extraction for that episode.

MAX_EPISODE_FACTS = 5


class Prediction(pydantic.BaseModel):
    prediction: list[str] = pydantic.Field(json_schema_extra={"maxItems": 4})

    @pydantic.field_validator("prediction", mode="before")
    @classmethod
    def _lenient(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        if isinstance(value, list):
            return [_single_string(v) if isinstance(v, dict) else v for v in value]
        return value


class CalibratedFacts(ExtractedFacts):
    facts: list[str] = pydantic.Field(json_schema_extra={"maxItems": MAX_EPISODE_FACTS})


def predict(cfg: LLMConfig, known: list[str]) -> list[str] | None:
    """What the user most likely said, from the known facts alone ([] without any: no call)."""
    if not known:
        return []
    answer = structured(cfg, prompts.predict_messages(known), Prediction)
    if answer is None:
        return None
    return [" ".join(p.split()) for p in answer.prediction if p and p.strip()][:4]


def calibrate(cfg: LLMConfig, prediction: list[str], user_texts: list[str]) -> list[str] | None:
    """The facts `user_texts` state (their statement parts: statements.statement_part) that
    `prediction` missed or got wrong: extracted by the model
    (third person, each sharing a word with the user's texts, no two alike), then every fact a
    prediction statement already says (`_carries`: all its words, the same polarity) dropped; at
    most MAX_EPISODE_FACTS. None: no valid answer."""
    from memvault.learning.statements import statement_part

    # As for one message (extract_facts): only what the messages state, never a question or request.
    said = [part for part in map(statement_part, user_texts) if part and not is_small_talk(part)]
    if not said:
        return []
    answer = structured(cfg, prompts.calibrate_messages(said), CalibratedFacts)
    if answer is None:
        return None
    source = "\n".join(said)
    facts: list[str] = []
    seen: set[str] = set()
    for fact in answer.facts:
        fact = third_person(" ".join(fact.split()))
        key = _norm(fact)
        if not key or key in seen or not _grounded(fact, source):
            continue
        seen.add(key)
        if not any(_carries(expected, fact) for expected in prediction):
            facts.append(fact)
    return facts[:MAX_EPISODE_FACTS]
