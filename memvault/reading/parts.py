"""Questions in parts (issue 45; docs/design.md, "The read path", step 2): a question that names
two things or joins two facts is searched as its parts too, and the candidates of every part join
one pool, each ranked by the part it answers best (retrieval.py).

Rules, no model (a question matches at most one, in this order):

- two questions joined: "Where does Lena live and what does Maya do?" -> each clause;
- two named people (capitalised words inside the question) joined by and/or/than, or with "both":
  "What do Jon and Gina both have in common?" -> "What do Jon have in common?", "What do Gina ...";
  "Is Lena older than Maya?" -> one without each name;
- two things of one kind: "both my sister and my best friend", "my sister and my brother",
  "both tennis and golf": the question with each (the second thing is taken as long as the first:
  a question has no parse here, and a stray word costs a search nothing).

The parts are for finding candidates; nothing is shown of them but `search --explain`'s part column.
An LLM's decomposition, where one is configured and `llm_query_parts` is on, takes the rules' place
(api.py asks it; this module only reads its answer).
"""

from __future__ import annotations

import re

# Words that begin a second question after "and": "... and what does Maya do?"
_CLAUSE = re.compile(r",?\s+\band\s+(?=(?:what|where|when|who|whom|whose|which|why|how)\b|(?:does|do|did|is|are|was|"
                     r"were|has|have|had|can|could|will|would)\s+(?:i|you|he|she|we|they|it|(?-i:[A-Z]))\b)", re.IGNORECASE)
_CONNECTOR = r"(?:and|or|than|vs\.?|versus|&|,)"
# Capitalised words that are not names of people or things a question is about.
_NOT_NAMES = frozenset("I I'm I've I'd I'll What Where When Who Whom Whose Which Why How Did Do Does Is Are Was Were "
                       "Has Have Had Can Could Will Would Should The A An My Our Your His Her Their And Or But Both "
                       "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May "
                       "June July August September October November December".split())
_OWNER = r"(?:my|your|his|her|our|their|the)"
_TWO_OF_A_KIND = re.compile(rf"\b(both\s+)?({_OWNER})\s+((?:[\w'’-]+\s+){{0,2}}?[\w'’-]+)\s+and\s+(\2)\s+",
                            re.IGNORECASE)
_PREPOSITION = frozenset("for of in to with at on from by about".split())
_BOTH = re.compile(r"\bboth\s+((?:[\w'’-]+\s+){0,2}?[\w'’-]+)\s+and\s+", re.IGNORECASE)
MAX_PARTS = 2


def split(text: str) -> list[str]:
    """The parts of a question (empty when it is one question about one thing)."""
    text = " ".join(text.split())
    if len(text) < 8:
        return []
    for rule in (_clauses, _two_names, _two_of_a_kind, _both):
        parts = [p + "?" if text.endswith("?") and not p.endswith("?") else p for p in rule(text)]
        parts = [p for p in parts if p and p.lower() != text.lower()]
        if len(parts) >= 2:
            return list(dict.fromkeys(parts))[:MAX_PARTS]
    return []


def _clauses(text: str) -> list[str]:
    pieces = _CLAUSE.split(text)
    if len(pieces) < 2 or any(len(re.findall(r"[^\W_]+", p)) < 3 for p in pieces):
        return []
    return [p.strip(" ,") + ("" if p.rstrip().endswith("?") or not text.endswith("?") else "?") for p in pieces]


def _names(text: str) -> list[str]:
    """Capitalised words inside the question (not its first word, not question words, months or
    weekdays), neighbours joined: "Jon", "Gina", "New York"."""
    found: list[str] = []
    last_end = -2
    for match in re.finditer(r"[A-Z][\w'’-]*", text):
        word = match.group()
        bare = re.sub(r"['’]s$", "", word)
        if match.start() == 0 or word in _NOT_NAMES or bare in _NOT_NAMES:
            last_end = -2
            continue
        if found and match.start() == last_end + 1 and not text[last_end - 1:last_end].endswith(("s", ",")):
            found[-1] = f"{found[-1]} {bare}"
        else:
            found.append(bare)
        last_end = match.end()
    return list(dict.fromkeys(found))


def _two_names(text: str) -> list[str]:
    names = _names(text)
    if len(names) != 2:
        return []
    first, second = names
    joined = re.search(rf"\b{re.escape(first)}(?:['’]s)?\s*{_CONNECTOR}\s*(?:{_CONNECTOR}\s+)?{re.escape(second)}\b",
                       text) or re.search(rf"\b{re.escape(second)}(?:['’]s)?\s*{_CONNECTOR}\s*{re.escape(first)}\b", text)
    if not joined and not re.search(r"\bboth\b|\bcompared?\b|\bthan\b", text, re.IGNORECASE):
        return []
    return [_without(text, second), _without(text, first)]


def _without(text: str, name: str) -> str:
    """The question without a name, the word that joined it and "both"."""
    out = re.sub(rf"\s*(?<!\w){_CONNECTOR}\s+{re.escape(name)}\b(?:['’]s)?", "", text, count=1)
    if out == text:
        out = re.sub(rf"\b{re.escape(name)}(?:['’]s)?\s*{_CONNECTOR}(?!\w)\s*", "", text, count=1)
    if out == text:
        out = re.sub(rf"\b{re.escape(name)}\b(?:['’]s)?\s*", "", text, count=1)
    return _tidy(out)


def _tidy(text: str) -> str:
    text = re.sub(r"\bboth\s+", "", text, flags=re.IGNORECASE)
    return " ".join(text.replace(" ?", "?").replace(" ,", ",").split())


def _two_of_a_kind(text: str) -> list[str]:
    match = _TWO_OF_A_KIND.search(text)
    if not match or _PREPOSITION & set(match.group(3).lower().split()):
        return []
    first = f"{match.group(2)} {match.group(3)}"
    size = len(match.group(3).split())
    rest = text[match.end():].split()
    size = _size_of_second(rest, size)
    second_words = rest[:size]
    if len(second_words) < size:
        return []
    second = " ".join([match.group(4), *second_words])
    tail = " ".join(rest[size:])
    head = text[:match.start()]
    return [_tidy(f"{head}{first} {tail}"), _tidy(f"{head}{second} {tail}")]


def _both(text: str) -> list[str]:
    match = _BOTH.search(text)
    if not match:
        return []
    first = match.group(1)
    size = len(first.split())
    rest = text[match.end():].split()
    if len(rest) < size:
        return []
    size = _size_of_second(rest, size)
    second, tail = " ".join(rest[:size]), " ".join(rest[size:])
    head = text[:match.start()]
    return [_tidy(f"{head}{first} {tail}"), _tidy(f"{head}{second} {tail}")]


def _size_of_second(rest: list[str], size: int) -> int:
    """How many words the second thing takes: a name as long as it is capitalised ("Maya move to"
    -> "Maya"), else as many as the first took."""
    capitalised = 0
    while capitalised < len(rest) and rest[capitalised][:1].isupper():
        capitalised += 1
    return capitalised if capitalised else size
