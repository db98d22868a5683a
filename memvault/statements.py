"""Which words of a user message state something, before any model sees them (docs/design.md,
"The write path").

A memory tool must not learn from a question: "What is my job?" handed to a small model as
"extract facts" comes back as "The user's job is a software developer", which then replaces
the true fact. So questions, requests and greetings never reach extraction; only the
sentences (or leading clauses) that state something do. The rules are cheap and decide the
clear cases; the model's own yes/no (with its token probabilities) judges what is left
(extraction.states_something).

    statement_part("I just moved to Berlin. Any tips for cafés?") == "I just moved to Berlin."
    statement_part("What is my job, and where do I live?") == ""
    statement_part("Did I tell you I got a dog?") == "I got a dog."
"""

from __future__ import annotations

import re

__all__ = ["statement_part", "split_sentences"]

_WH = "what|who|whom|whose|where|when|why|how|which"
_AUX = ("is|are|am|was|were|do|does|did|can|could|would|should|will|shall|may|might|must|have|has|had|"
        "isn't|aren't|wasn't|weren't|don't|doesn't|didn't|can't|couldn't|wouldn't|shouldn't|won't|haven't|hasn't")
_SUBJECT = "i|you|we|my|your|our|he|she|they|it|there|the|this|that|these|those|his|her|their|anyone|someone|a|an"

# A wh-question: the wh-word directly followed by a verb ("where do I live"), a contraction
# ("what's"), a question adverb ("how many", "how old") or, for what/which, a noun and a verb
# ("what food do I avoid"). "When I was young, ..." is not one: a subject follows the wh-word.
_WH_QUESTION = re.compile(
    rf"^(?:(?:{_WH})(?:'s|'re|'d|'ll)?\s+(?:{_AUX}|much|many|long|old|often|far|about|else|kind|sort|type)\b"
    rf"|(?:{_WH})'(?:s|re|d|ll)\b"
    rf"|(?:what|which|whose|how many|how much)\s+\w+\s+(?:{_AUX})\b"
    rf"|(?:what|how)\s+about\b|what\s+if\b)",
    re.IGNORECASE,
)
# Inversion: "do I ...", "is my ...", "can you ...".
_YES_NO_QUESTION = re.compile(rf"^(?:{_AUX})\s+(?:n't\s+)?(?:{_SUBJECT})\b", re.IGNORECASE)
# Asking for something: imperatives and polite forms. A request is not a statement, even when it
# names the user's things ("Recommend a book for my son").
_REQUEST = re.compile(
    r"^(?:please\s+|pls\s+|kindly\s+|now\s+|ok(?:ay)?,?\s+|so,?\s+)?"
    r"(?:tell|remind|help|give|show|list|recommend|suggest|write|explain|find|make|create|plan|"
    r"summari[sz]e|translate|draft|describe|compare|check|book|send|calculate|convert|generate|fix|"
    r"let's|lets|let\s+me\s+(?:know|think|see|check)|imagine|pretend|act|search|look\s+up|name|define|teach|quiz|"
    r"brainstorm|outline|rewrite|edit|proofread|order|schedule|set|add|call|text|email|read|keep\s+it|make\s+it|"
    r"include|use|mention|avoid|"
    r"i\s+(?:want|need|would\s+like)\s+you\s+to|i'd\s+like\s+you\s+to|i\s+(?:need|want|could\s+use|would\s+like)\s+(?:some\s+|a\s+few\s+|your\s+)?(?:help|advice|ideas|tips|suggestions|recommendations)|"
    r"(?:i\s+)?(?:wonder|was\s+wondering|wondering)|(?:i'm\s+|i\s+am\s+)?(?:wondering|curious)|any\s+(?:ideas|tips|suggestions|thoughts|advice|recommendations)|"
    r"thoughts|ideas|suggestions|recommendations)\b",
    re.IGNORECASE,
)
# Words that open a statement the user wants kept, or wraps around one: peeled off, the rest
# judged as a sentence of its own. "Did I tell you I got a dog?" states that the user got a dog.
_TELLING = re.compile(
    r"^(?:(?:hey|so|oh|well|btw|by\s+the\s+way|also|anyway|and|ok(?:ay)?)[,\s]+)*"
    r"(?:(?:please\s+)?(?:remember|note|keep\s+in\s+mind|don't\s+forget|do\s+not\s+forget)(?:\s+that)?\b"
    r"|for\s+the\s+record\b|fyi\b|just\s+so\s+you\s+know\b|you\s+should\s+know\b|news\b|update\b"
    r"|did\s+i\s+(?:tell|mention\s+to)\s+you(?:\s+that)?\b|did\s+i\s+mention(?:\s+that)?\b"
    r"|have\s+i\s+(?:told|mentioned\s+to)\s+you(?:\s+that)?\b|have\s+i\s+mentioned(?:\s+that)?\b"
    r"|did\s+you\s+know(?:\s+that)?\b|you\s+know(?:\s+that)?\b|guess\s+what\b)[,:!?.\s-]*",
    re.IGNORECASE,
)
# A question tag after a statement: "I'm vegetarian, right?" states; the tag only checks.
_TAG = re.compile(
    r"[,\s]+(?:right|correct|true|yes|no|ok(?:ay)?|remember|you\s+know|isn't\s+it|aren't\s+i|don't\s+i|"
    r"didn't\s+i|haven't\s+i|wasn't\s+i|do\s+you\s+remember|remember\s+that)\s*\?+\s*$",
    re.IGNORECASE,
)
# A clause that reads as a finite statement about someone: a verb form after the opening words.
# Possessive 's is left out on purpose: "my wife's name" is a noun phrase, not a statement.
_FINITE = re.compile(
    r"\b(?:am|is|are|was|were|has|have|had|got|get|gets|will|did|do|does|just|now|never|always|still|"
    r"no\s+longer|live|lives|work|works|love|loves|like|likes|hate|hates|own|owns)\b|'(?:m|re|ve|ll|d)\b|\b\w+ed\b",
    re.IGNORECASE,
)
# "My daughter turns 8 next week": the user speaking of themselves or theirs, with a verb after.
_FIRST_PERSON_CLAUSE = re.compile(r"^(?:i|we|my|our)\s+\w+\s+\w+", re.IGNORECASE)
# A leading clause that only sets up a hypothetical ("If I move to Berlin, what ...") states nothing.
_HYPOTHETICAL = re.compile(
    r"^(?:if|unless|suppose|supposing|assuming|in\s+case|whether|when|once|say|hypothetically|would|should|could)\b",
    re.IGNORECASE,
)
_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|yo|good\s+(?:morning|afternoon|evening|night)|thanks|thank\s+you|cheers|ok(?:ay)?|"
    r"cool|great|nice|sure|yes|yeah|yep|no|nope|alright|fine|i\s+see|got\s+it|makes\s+sense|sounds\s+good|"
    r"that's\s+(?:great|good|nice|helpful|fine|ok(?:ay)?)|perfect|awesome|wow|lol|haha|hmm)"
    r"(?:\s+(?:there|again|so\s+much|a\s+lot|everyone|all))?(?:\s*[,!.]+\s*|\s*$)",
    re.IGNORECASE,
)


# A reaction to the assistant's answer ("that was helpful", "sounds good", "it was amazing"): about the
# reply or the moment, not the user. Only when it names no one (no first person, no name, no number).
_REACTION = re.compile(
    r"^(?:that|that's|thats|it|it's|its|this|this\s+is|sounds|looks|seems|what\s+a|so|very|really|wow|haha|lol|"
    r"nice|great|cool|awesome|ok|okay|sure|true|right|exactly|indeed|interesting|amazing|perfect|fair|good|"
    r"brilliant|lovely|excellent|fantastic|wonderful)\b",
    re.IGNORECASE,
)
_NAMES_SOMEONE = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|ours|us)\b|\d", re.IGNORECASE)


def _is_reaction(sentence: str) -> bool:
    rest = sentence.split(None, 1)[1] if " " in sentence else ""
    return bool(_REACTION.match(sentence) and not _NAMES_SOMEONE.search(sentence)
                and not re.search(r"\b[A-Z][a-z]", rest))


def split_sentences(text: str) -> list[str]:
    """Sentences and lines of `text`, each with its closing punctuation."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    pieces = re.split(r"(?<=[.!?])\s+|\n+|(?<=[.!?])(?=[A-Z])", text)
    return [p.strip() for p in pieces if p and p.strip()]


def statement_part(text: str) -> str:
    """The sentences and leading clauses of `text` that state something; "" when it only asks,
    requests or greets. Judged by rules alone (see the module docstring)."""
    kept: list[str] = []
    for sentence in split_sentences(_without_quoted_content(text)):
        kept.extend(_statements_in(sentence))
    return " ".join(kept)


def _without_quoted_content(text: str) -> str:
    """The message without the material it hands over: what follows a request's colon
    ("translate this note: ...") and quoted passages of three words or more are someone's text
    to work on, not the user speaking of themselves."""
    text = re.sub(r"([\"\u201c])[^\"\u201c\u201d]*?\s\S+\s[^\"\u201c\u201d]*?[\"\u201d]", " ", text)
    text = re.sub(r"(?<![\w'])'[^']*?\s\S+\s[^']*?'(?![\w'])", " ", text)
    lines = []
    for line in text.splitlines():
        head, colon, _ = line.partition(":")
        lines.append(head + "." if colon and _REQUEST.match(head.strip()) else line)
    return "\n".join(lines)


def _statements_in(sentence: str) -> list[str]:
    sentence = _strip_greeting(sentence)
    if not re.search(r"[a-zA-Z]", sentence):
        return []
    told = _TELLING.match(sentence)
    if told and told.end() < len(sentence):
        rest = _TAG.sub("", sentence[told.end():]).strip()
        rest = rest.rstrip("?").strip()
        # "Did I tell you I got a dog?" -> "I got a dog"; "Do you know my wife's name?" stays a question.
        if rest and _states(rest) and not _is_question_start(rest):
            return [_close(rest)]
        if told.group(0).strip().lower().startswith(("remember", "note", "keep", "don't", "do not", "please")):
            return []  # "Remember my wife's name?" / "Note the time": nothing stated
    tagged = _TAG.sub("", sentence)
    if tagged != sentence:  # "I'm vegetarian, right?": the tag only checks the statement
        return [] if _is_question_start(tagged) or _REQUEST.match(tagged) else [_close(tagged.strip())]
    if _REQUEST.match(sentence):
        return _trailing_statements(sentence)
    if _is_reaction(sentence):
        return []
    if sentence.endswith("?") or _is_question_start(sentence):
        return _leading_statements(sentence)
    return [sentence]


def _leading_statements(question: str) -> list[str]:
    """The clauses before the question in "My daughter turns 8 next week, what should I get her?"."""
    clauses = re.split(r"\s*[,;:\u2014\u2013]\s+|\s+-{1,2}\s+|\s*[\u2014\u2013]\s*", question)
    kept: list[str] = []
    for clause in clauses:
        clause = clause.strip()
        if not clause:
            continue
        if _is_question_start(clause) or _REQUEST.match(clause) or clause.endswith("?"):
            break  # from here on, the question
        if _HYPOTHETICAL.match(clause) or not _states(clause):
            return []  # a condition or a fragment: the whole sentence is the question
        kept.append(re.sub(r"^(?:since|because|as|and|but|so)\s+", "", clause, flags=re.IGNORECASE))
    return [_close(c) for c in kept] if len(kept) < len(clauses) else []


def _states(clause: str) -> bool:
    """Whether a clause reads as a statement (a verb in it), not a noun phrase ("my wife's name")."""
    return bool(_FINITE.search(clause) or _FIRST_PERSON_CLAUSE.match(clause))


def _trailing_statements(request: str) -> list[str]:
    """The user's own clauses after a request: "Write me a training plan, I signed up for a half
    marathon" states the sign-up."""
    clauses = re.split(r"\s*[,;\u2014\u2013]\s+|\s+-{1,2}\s+", request)[1:]
    return [_close(c) for c in clauses if re.match(r"(?:i|i'm|i've|we|we're|we've|my|our)\b", c, re.IGNORECASE)
            and _states(c) and not _is_question_start(c)]


def _is_question_start(text: str) -> bool:
    text = text.strip()
    return bool(_WH_QUESTION.match(text) or _YES_NO_QUESTION.match(text))


def _strip_greeting(sentence: str) -> str:
    """"Hi, I'm Sam" -> "I'm Sam"; "Thanks!" -> "". A greeting counts only when punctuation or
    the end follows it: "I see a therapist" keeps its "I see"."""
    sentence = sentence.strip()
    while match := _GREETING.match(sentence):
        if match.end() == 0:
            break
        sentence = sentence[match.end():].strip()
    return sentence


def _close(clause: str) -> str:
    clause = clause.strip().rstrip(",;:")
    return clause if clause.endswith((".", "!")) else clause + "."
