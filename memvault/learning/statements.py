"""Which words of a user message state something about the user, before any model sees them
(docs/design.md, "The write path").

A memory tool must not learn from a question: "What is my job?" handed to a small model as
"extract facts" comes back as "The user's job is a software developer", which then replaces
the true fact. So only the sentences (or clauses) that state something reach extraction. Cut:
questions, requests, greetings, reactions to the reply, instructions about the reply ("One
word.", "Answer in French.", "Be brief."), tag questions and statements asked back ("my wife's
name is not Anne, right?", "So I live in Porto?": the user checks, never asserts),
hypotheticals and wishes ("If I had a cat I'd call it Miso", "I wish ...", "maybe one day",
"I'd love to"), and reported or quoted speech ("My boss says I work too much"). Kept: a
statement inside a request to remember it ("Please remind me that my mother is called
Lucia" -> "my mother is called Lucia."), and a statement keeps the name it points back to
("Tell me about Lisbon. I was born there." -> "I was born in Lisbon."). The rules are plain
regular expressions: they run on every chat turn, so they cost no import and no model call;
a missed statement only means a fact not learned, a kept non-statement can replace a true fact.

    statement_part("I just moved to Berlin. Any tips for cafés?") == "I just moved to Berlin."
    statement_part("What is my job, and where do I live?") == ""
    statement_part("Did I tell you I got a dog?") == "I got a dog."
    statement_part("my wife's name is not Anne, right?") == ""
"""

from __future__ import annotations

import re

__all__ = ["statement_part", "split_sentences"]

# How a statement keeps what it points back to: "resolve" names it in the statement ("I was born
# there" -> "I was born in Lisbon"), "context" keeps the sentence that names it before the
# statement, "none" neither. bench/learning_gate.py --referents measured all three (bench/README.md).
REFERENTS = "resolve"

_WH = "what|who|whom|whose|where|when|why|how|which"
_AUX = ("is|are|am|was|were|do|does|did|can|could|would|should|will|shall|may|might|must|have|has|had|"
        "isn't|aren't|wasn't|weren't|don't|doesn't|didn't|can't|couldn't|wouldn't|shouldn't|won't|haven't|hasn't")
_SUBJECT = "i|you|we|my|your|our|he|she|they|it|there|the|this|that|these|those|his|her|their|anyone|someone|a|an"
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|im|ive|me|my|mine|myself|we|we're|we've|we'd|our|ours|us)\b",
                           re.IGNORECASE)

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
# Asking for something: imperatives and polite forms, instructions about the reply among them
# ("Answer in French", "Be brief", "Don't explain"). A request is not a statement, even when it
# names the user's things ("Recommend a book for my son"). Not before an apostrophe: "Name's Rex".
_REQUEST = re.compile(
    r"^(?:please\s+|pls\s+|kindly\s+|now\s+|just\s+|only\s+|simply\s+|ok(?:ay)?,?\s+|so,?\s+|and\s+|but\s+)?"
    r"(?:tell|remind|help|give|show|list|recommend|suggest|write|explain|find|make|create|plan|"
    r"summari[sz]e|translate|draft|describe|compare|check|book|send|calculate|convert|generate|fix|"
    r"let's|lets|let\s+me\s+(?:know|think|see|check)|imagine|pretend|act|search|look\s+up|name|define|teach|quiz|"
    r"brainstorm|outline|rewrite|edit|proofread|order|schedule|set|add|call|text|email|read|keep\s+it|make\s+it|"
    r"include|use|mention|avoid|answer|reply|respond|be|stay|format|limit|stick\s+to|focus\s+on|skip|"
    r"don't|do\s+not|no\s+need|"
    r"i\s+(?:want|need|would\s+like)\s+you\s+to|i'd\s+like\s+you\s+to|i\s+(?:need|want|could\s+use|would\s+like)\s+(?:some\s+|a\s+few\s+|your\s+)?(?:help|advice|ideas|tips|suggestions|recommendations)|"
    r"(?:i\s+)?(?:wonder|was\s+wondering|wondering)|(?:i'm\s+|i\s+am\s+)?(?:wondering|curious)|any\s+(?:ideas|tips|suggestions|thoughts|advice|recommendations)|"
    r"thoughts|ideas|suggestions|recommendations)\b(?!')",
    re.IGNORECASE,
)
# An instruction about the reply without a verb of its own: its length, format, language, tone.
# ("One word.", "In French.", "Short answer.", "No explanation needed.")
_REPLY_SHAPE = re.compile(
    r"^(?:(?:please|pls|and|but|so|just|only|now|also)[,\s]+)*(?:"
    r"(?:in|with|using|as|into)\s+(?:(?:one|two|three|four|five|a\s+few|few|a\s+single|single|a|an|\d+)\s+)?"
    r"(?:(?:short|simple|plain|numbered|bullet)\s+)?(?:words?|sentences?|lines?|paragraphs?|bullet\s+points|bullets|"
    r"points|steps|list|table|number|digits?|json|markdown|csv|haiku|poem|tweet|emojis?|terms|english)\b"
    r"|in\s+(?-i:[A-Z])[a-z]+\s*(?:please)?\s*[.!]*$"
    r"|(?:one|two|three|four|five|a\s+few|\d+)\s+(?:words?|sentences?|lines?|paragraphs?|bullet\s+points)\b"
    r"|short(?:er)?\s*(?:answer|reply|version|please)?\s*[.!]*$|brief(?:ly)?\b|concise(?:ly)?\b|quick(?:ly)?\s*[.!]*$"
    r"|simply\s*[.!]*$|yes\s+or\s+no\b|step\s+by\s+step\b|in\s+detail\b|eli5\b|tl;?dr\b"
    r"|(?:less|fewer|no\s+more)\s+than\s+\w+\s+(?:words?|sentences?|lines?|characters?)\b|under\s+\w+\s+words\b"
    r"|(?:max(?:imum)?|at\s+most)\s+\w+\s+(?:words?|sentences?|lines?)\b"
    r"|(?:formal|informal|casual|friendly|polite|neutral|professional|funny)\s*(?:tone|style)?\s*(?:please)?\s*[.!]*$"
    r"|(?:lower|upper)\s*case\b|all\s+caps\b"
    r"|no\s+(?:\w+\s+){0,2}?(?:needed|necessary|required|please)\b|no\s+need\b|nothing\s+else\b"
    r"|without\s+(?:any\s+)?(?:explanation|details|comments?|jargon|emojis?)\b"
    r"|(?:the\s+)?(?:number|name|answer)\s+only\b|just\s+(?:the|a|one)\b)",
    re.IGNORECASE,
)
# Words that open a statement the user wants kept, or wraps around one: peeled off, the rest
# judged as a sentence of its own. "Did I tell you I got a dog?" states that the user got a dog;
# "Please remind me that my mother is called Lucia" states who the mother is.
_TELLING = re.compile(
    r"^(?:(?:hey|so|oh|well|btw|by\s+the\s+way|also|anyway|and|ok(?:ay)?)[,\s]+)*"
    r"(?:(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:remember|note|keep\s+in\s+mind|don't\s+forget|do\s+not\s+forget|take\s+note|make\s+a\s+note(?:\s+of\s+this)?|"
    r"(?:write|jot|note)\s+(?:it\s+|this\s+)?down|save\s+(?:this|that)|remind\s+me(?=\s+that\b)|"
    r"keep\s+a\s+note)(?:\s+that)?\b"
    r"|for\s+the\s+record\b|for\s+future\s+reference\b|fyi\b|just\s+so\s+you\s+(?:know|remember)\b|you\s+should\s+know\b"
    r"|news\b|update\b|i\s+(?:already\s+)?told\s+you(?:\s+(?:already|before))?(?:\s+that)?\b|as\s+i\s+(?:said|told\s+you|mentioned)\b"
    r"|like\s+i\s+said\b|i\s+may\s+have\s+(?:mentioned|told\s+you)(?:\s+that)?\b"
    r"|did\s+i\s+(?:tell|mention\s+to)\s+you(?:\s+that)?\b|did\s+i\s+mention(?:\s+that)?\b"
    r"|have\s+i\s+(?:told|mentioned\s+to)\s+you(?:\s+that)?\b|have\s+i\s+mentioned(?:\s+that)?\b"
    r"|did\s+you\s+know(?:\s+that)?\b|you\s+know(?:\s+that)?\b|guess\s+what\b)[,:!?.\s-]*",
    re.IGNORECASE,
)
# A question tag or a check at the end: "my wife's name is not Anne, right?", "I live in Porto,
# don't I?". The user asks whether it is so; what comes before the tag is never taken as said.
_TAG = re.compile(
    rf"(?:^|[,\s])(?:right|correct|true|yes|yeah|yep|no|ok(?:ay)?|eh|huh|innit|remember|you\s+know|or\s+not|"
    rf"am\s+i\s+right|(?:{_AUX})(?:n't)?\s+(?:i|you|he|she|it|we|they|there|that)(?:\s+(?:right|so|true|correct))?|"
    rf"do\s+you\s+remember|remember\s+that)\s*\?+\s*$",
    re.IGNORECASE,
)
# A clause that reads as a finite statement about someone: a verb form after the opening words.
# Possessive 's is left out on purpose: "my wife's name" is a noun phrase, not a statement.
_FINITE = re.compile(
    r"\b(?:am|is|are|was|were|has|have|had|got|get|gets|will|did|do|does|just|now|never|always|still|"
    r"no\s+longer|live|lives|work|works|love|loves|like|likes|hate|hates|own|owns)\b|'(?:m|re|ve|ll|d)\b|\b\w+ed\b",
    re.IGNORECASE,
)
# The same without the adverbs: whether a sentence has a verb at all ("Just the name." has none).
_VERB = re.compile(
    r"\b(?:am|is|are|was|were|has|have|had|got|get|gets|will|did|do|does|live|lives|work|works|love|loves|"
    r"like|likes|hate|hates|own|owns|im|ive)\b|'(?:m|re|ve|ll|d|s\s+(?:a|an|the|my|our|\w+ing|been|got|not))\b"
    r"|\b\w+(?:ed|ing)\b|^(?-i:[A-Z])\w+\s+\w+s\b",
    re.IGNORECASE,
)
# "My daughter turns 8 next week": the user speaking of themselves or theirs, with a verb after;
# "my wife's passport expires in July": a present-tense verb after a possessive noun phrase.
_FIRST_PERSON_CLAUSE = re.compile(r"^(?:i|we|my|our)\s+\w+\s+\w+|^(?:my|our)\s+[\w']+(?:\s+[\w']+)?\s+\w+s\s+\w",
                                  re.IGNORECASE)
# A fragment without a verb still says something when the user names themselves or theirs in it
# ("My wife, Anne."); "One word." and "In French." do not.
_SPEAKS_OF_ITSELF = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|im|ive|my|we|we're|we've|our)\b", re.IGNORECASE)
# A leading clause that only sets up a hypothetical ("If I move to Berlin, what ...") states nothing.
_HYPOTHETICAL = re.compile(
    r"^(?:if|unless|suppose|supposing|assuming|in\s+case|whether|when|once|say|hypothetically|would|should|could)\b",
    re.IGNORECASE,
)
# What is not so, or not yet, or not for sure: a condition, a wish, a hope, a maybe, "would" and
# "could" ("If I had a cat I'd call it Miso", "I wish I spoke Japanese", "I'd love to live in
# Tokyo", "Maybe one day I'll open a bakery", "I'm thinking about getting a dog"). "I'd" stays a
# statement when "had" is meant ("I'd been there before").
_UNREAL = re.compile(
    r"\b(?:if|unless|suppose|supposing|imagine|imagining|hypothetically|whether|as\s+though|in\s+theory|"
    r"wish|wished|wishes|wishing|hope|hoped|hopes|hoping|hopefully|dream|dreams|dreamed|dreamt|dreaming|"
    r"fantasi[sz]e|someday|some\s+day|one\s+day(?!\s+(?:a|per|each|every)\b)|maybe|perhaps|possibly|"
    r"bucket\s+list|in\s+another\s+life|in\s+an\s+ideal\s+world|"
    r"thinking\s+(?:about|of)|considering|torn\s+between|can't\s+decide|cannot\s+decide|undecided|"
    r"would|could|might|wouldn't|couldn't|mightn't|would've|could've|might've)\b"
    r"|\b(?:i|we|he|she|they|it|you)\s+may\b"
    r"|\b(?:i|we|you|he|she|they|it|that)'d\b(?!\s+(?:(?:already|never|just|always|only|once|not)\s+)?"
    r"(?:been|had|gone|done|seen|got|gotten|taken|known|eaten|given|written|driven|made|met|found|lost|left|"
    r"heard|told|said|sold|bought|thought|brought|kept|spent|won|\w+ed)\b)"
    r"|\b(?:will|'ll)\s+probably\b|\bprobably\s+(?:will|going\s+to|gonna)\b",
    re.IGNORECASE,
)
# A condition that only hedges what is said: "I'm vegan, if that matters" states that the user is vegan.
_HEDGE = re.compile(
    r",?\s*\bif\s+(?:(?:that|it)\s+(?:matters|helps)|you\s+(?:must|need\s+to|want\s+to)\s+know|"
    r"you(?:'re|\s+are)\s+(?:curious|wondering|asking)|you\s+ask\s+me|i\s+(?:remember|recall)\s+(?:correctly|right)|"
    r"memory\s+serves|i'm\s+(?:being\s+)?honest|i\s+am\s+(?:being\s+)?honest)\b",
    re.IGNORECASE,
)
# Someone else's words, reported: "My boss says I work too much", "Anne told me she's moving",
# "Apparently I snore", "I heard that ...". Not the user stating anything about themselves.
_SOMEONE = (r"(?:(?:my|our|his|her|their|the|a|an)\s+(?:[\w'-]+\s+){0,2}?[\w'-]+|(?-i:[A-Z])[\w'-]+(?:\s+(?-i:[A-Z])[\w'-]+)?|"
            r"he|she|they|everyone|everybody|people|someone|somebody|nobody|no\s+one|mum|mom|dad)")
_SAYS = (r"(?:said|says|saying|thinks|thought|believes|believed|claims|claimed|insists|insisted|swears|swore|"
         r"reckons|reckoned|tells|told|telling|keeps\s+saying|kept\s+saying)")
_REPORTS = (r"(?:wrote|writes|texted|texts|asked|asks|mentioned|mentions|joked|jokes|complained|complains|suggested|"
            r"suggests|warned|warns|promised|promises|announced|announces|replied|explained|informed|messaged|emailed)")
_CLAUSE_AFTER = r"(?:\s+(?:me|us|him|her|them|everyone))?(?:\s+that\b|\s*[:,\"]|\s+(?:i|i'm|i've|we|we're|my|our|he|she|they|it|you)\b)"
_REPORTED = re.compile(
    rf"^(?:(?:and|but|so|also|well|oh|anyway|although|though)[,\s]+)?(?:"
    rf"(?:apparently|reportedly|allegedly|supposedly|rumou?r\s+has\s+it|they\s+say|according\s+to)\b"
    rf"|(?:i|we)\s+(?:(?:just|once|recently|also)\s+)?(?:heard|was\s+told|were\s+told|'ve\s+been\s+told|have\s+been\s+told|got\s+told)\b"
    rf"|(?:i|we)\s+(?:(?:just|once|recently|also)\s+)?read\s+(?:somewhere|online|in\s+the\s+\w+)\b"
    rf"|(?:i|we)\s+(?:(?:just|once|recently|also)\s+)?read\s+that\s+(?:[\w'-]+\s+)?(?:is|are|was|were|has|have|had|will|can|\w+s)\b"
    rf"|(?:i|we)\s+(?:(?:just|once|also|already)\s+)?(?:told|tell|said|say|promised|texted|wrote|emailed|asked)\s+(?!you\b|u\b)"
    rf"(?:my|our|him|her|them|the|to|everyone|(?-i:[A-Z])\w+)\b"
    rf"|(?:i|we)\s+thought\s+(?:that\b|(?:i|i'm|my|we|our|he|she|it|you)\b)"
    rf"|{_SOMEONE}\s+(?:(?:always|often|never|once|just|also|still|even|constantly|keeps|kept)\s+)*{_SAYS}\b"
    rf"|{_SOMEONE}\s+(?:(?:always|often|never|once|just|also|still|even)\s+)*{_REPORTS}\b"
    rf"(?={_CLAUSE_AFTER}|(?:\s+[\w'-]+){{1,4}}?\s+that\b))",
    re.IGNORECASE,
)
_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|yo|good\s+(?:morning|afternoon|evening|night)|thanks|thank\s+you|cheers|ok(?:ay)?|"
    r"cool|great|nice|sure|yes|yeah|yep|no|nope|alright|fine|i\s+see|got\s+it|makes\s+sense|sounds\s+good|"
    r"that's\s+(?:great|good|nice|helpful|fine|ok(?:ay)?)|perfect|awesome|wow|lol|haha|hmm|anyway|anyhow)"
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
# Where a sentence divides into clauses: commas, semicolons, dashes, and "but"/"although" ("I live
# in Porto but I'd love to move": the first clause states, the second wishes).
_CLAUSE_SPLIT = re.compile(r"\s*[,;\u2014\u2013]\s+|\s+-{1,2}\s+|\s*[\u2014\u2013]\s*|\s+(?=(?:but|although|though|whereas)\s)",
                           re.IGNORECASE)


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
    """The sentences and clauses of `text` that state something about the user; "" when it only
    asks, requests, greets, instructs, checks, wishes or reports (see the module docstring).
    A statement that points back with "there", "it", "she"... to a name in the sentence cut just
    before it gets that name (REFERENTS)."""
    kept: list[str] = []
    cut: str | None = None  # the sentence just before, when nothing of it was kept
    for sentence in split_sentences(_without_quoted_content(text)):
        statements = _statements_in(sentence)
        source = cut if cut is not None else (sentence if statements else None)
        for statement in statements:
            kept.append(_with_referent(statement, source) if source else statement)
        cut = None if statements else sentence
    return " ".join(kept)


def _without_quoted_content(text: str) -> str:
    """The message without the material it hands over: what follows a request's colon
    ("translate this note: ..."), quoted passages of three words or more and quoted lines
    ("> ...") are someone's text to work on or someone's words, not the user speaking of
    themselves."""
    text = re.sub(r"([\"\u201c])[^\"\u201c\u201d]*?\s\S+\s[^\"\u201c\u201d]*?[\"\u201d]", " ", text)
    text = re.sub(r"(?<![\w'])'[^']*?\s\S+\s[^']*?'(?![\w'])", " ", text)
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith(">"):
            continue
        head, colon, _ = line.partition(":")
        lines.append(head + "." if colon and _REQUEST.match(head.strip()) else line)
    return "\n".join(lines)


def _statements_in(sentence: str) -> list[str]:
    sentence = _strip_greeting(sentence)
    if not re.search(r"[a-zA-Z]", sentence):
        return []
    if _TAG.search(sentence):  # "my wife's name is not Anne, right?": a check, not a statement
        return []
    told = _TELLING.match(sentence)
    if told and told.end() < len(sentence):
        # "Did I tell you I got a dog?" -> "I got a dog"; "Remind me that my mother is Lucia" -> the rest.
        rest = sentence[told.end():].strip().rstrip("?").strip()
        if rest and _states(rest) and not _is_question_start(rest) and not re.match(rf"(?:{_WH})\b", rest, re.IGNORECASE):
            return [_close(c) for c in _statement_clauses(rest)]
        if re.match(r"(?:please|can|could|would|will|remember|note|keep|don't|do\s+not|remind|make|write|jot|save|take)\b",
                    told.group(0).strip(), re.IGNORECASE):
            return []  # "Remember my wife's name?" / "Note the time": nothing stated
    sentence = _HEDGE.sub("", sentence).strip()
    if _REQUEST.match(sentence) or _REPLY_SHAPE.match(sentence):
        return _trailing_statements(sentence)
    if _is_reaction(sentence):
        return []
    if sentence.endswith("?") or _is_question_start(sentence):
        return _leading_statements(sentence)
    return _statement_clauses(sentence)


def _statement_clauses(sentence: str) -> list[str]:
    """The sentence up to its first clause that wishes, supposes, reports or asks: "I live in
    Porto but I'd love to move to Lisbon" -> "I live in Porto."; nothing when that is its first.
    A verbless fragment that names nothing of the user ("One word.", "In French.") states nothing."""
    stop = len(sentence)
    for match in _clauses(sentence):
        clause = match[0]
        if _UNREAL.search(clause) or _REPORTED.match(clause) or _REQUEST.match(clause) or _REPLY_SHAPE.match(clause):
            stop = match[1]
            break
    kept = sentence[:stop].strip().rstrip(",;:-\u2014\u2013 ")
    if not kept or not _VERB.search(kept) and not _SPEAKS_OF_ITSELF.search(kept):
        return []
    return [_close(kept) if stop < len(sentence) else kept]


def _clauses(sentence: str) -> list[tuple[str, int]]:
    """(clause, where it starts) for each clause of the sentence."""
    out, start = [], 0
    for split in _CLAUSE_SPLIT.finditer(sentence):
        out.append((sentence[start:split.start()], start))
        start = split.end()
    out.append((sentence[start:], start))
    return [(c.strip(), s) for c, s in out if c.strip()]


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
        if _HYPOTHETICAL.match(clause) or not _states(clause) or not _plain(clause):
            return []  # a condition, a wish or a fragment: the whole sentence is the question
        kept.append(re.sub(r"^(?:since|because|as|and|but|so)\s+", "", clause, flags=re.IGNORECASE))
    return [_close(c) for c in kept] if len(kept) < len(clauses) else []


def _plain(clause: str) -> bool:
    """Whether a clause states as it is: no condition, wish, maybe, nor someone else's words."""
    return not (_UNREAL.search(clause) or _REPORTED.match(clause))


def _states(clause: str) -> bool:
    """Whether a clause reads as a statement (a verb in it), not a noun phrase ("my wife's name")."""
    return bool(_FINITE.search(clause) or _FIRST_PERSON_CLAUSE.match(clause))


def _trailing_statements(request: str) -> list[str]:
    """The user's own clauses after a request: "Write me a training plan, I signed up for a half
    marathon" states the sign-up."""
    clauses = re.split(r"\s*[,;:\u2014\u2013]\s+|\s+-{1,2}\s+", request)[1:]
    return [_close(c) for c in clauses if re.match(r"(?:i|i'm|i've|we|we're|we've|my|our)\b", c, re.IGNORECASE)
            and _states(c) and _plain(c) and not _is_question_start(c) and not c.rstrip().endswith("?")]


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
    return sentence.lstrip(",;:.!- ")


def _close(clause: str) -> str:
    clause = clause.strip().rstrip(",;:")
    return clause if clause.endswith((".", "!")) else clause + "."


# -- what a statement points back to ------------------------------------------------------------
# "Tell me about Lisbon. I was born there.": the question is cut, so the model would see only "I
# was born there." The one name the cut sentence gives (capitalised words, a sentence's first word
# only when it is no common opener) takes the place of "there", "it", "she"... in the statement.

_CONNECTORS = frozenset("of de da do dos das del di du la le van von à the".split())
_NOT_NAMES = frozenset(
    """i i'm i've i'd i'll a an the this that these those what who whom whose where when why how which is are am
    was were do does did can could would should will shall may might must have has had tell give show list
    recommend suggest write explain find make create plan describe compare check help please any some hi hello hey
    thanks ok okay so well oh and but also anyway any my your our his her their you we he she it they there
    let let's lets remind remember do don't is isn't have you've yes no what's who's where's how's
    monday tuesday wednesday thursday friday saturday sunday january february march april june july august
    september october november december""".split()
)
_THERE = re.compile(r"\b(?:(from|to|near|around|over|out|up|down|in|at)\s+)?there\b(?!\s+(?:is|are|was|were|'s|has|have|"
                    r"had|will|used|isn't|aren't|wasn't|weren't|seems?|must)\b)", re.IGNORECASE)
_MOTION = re.compile(r"\b(?:go|goes|going|went|gone|move|moves|moving|moved|travel\w*|fly|flying|flew|drive|driving|drove|"
                     r"head\w*|come|coming|came|return\w*|get|getting|got)\s+$", re.IGNORECASE)
_PERSON_OBJECT = re.compile(r"(?<=\s)(?:him|them)\b|(?<=\s)her\b(?=\s*(?:[.,!?;]|$|live|again|every|last|yesterday|today|"
                            r"once|twice|in|at|on|for|since|a\s+lot|now|years?|recently)\b|\s*[.,!?;]|\s*$)",
                            re.IGNORECASE)
_SUBJECT_PRONOUN = re.compile(r"^(?:he|she|they)\b", re.IGNORECASE)
_IT = re.compile(r"(?<=\w\s)it\b(?!')|^it\b(?=\s+(?:is|was)\s+(?:\w+\s+)?(?:my|our)\b)", re.IGNORECASE)


def _names(sentence: str) -> list[str]:
    """The distinct capitalised names of a sentence ("Tell me about Marie Curie." -> ["Marie Curie"])."""
    words = re.findall(r"[^\W\d_][\w'-]*", sentence)
    names, run = [], []
    for position, word in enumerate(words):
        capital = word[0].isupper() and not (position == 0 and word.lower() in _NOT_NAMES) and word.lower() not in _NOT_NAMES
        if capital:
            run.append(word)
        elif run and word.lower() in _CONNECTORS and position + 1 < len(words) and words[position + 1][0].isupper():
            run.append(word)
        else:
            if run:
                names.append(" ".join(run))
            run = []
    if run:
        names.append(" ".join(run))
    return list(dict.fromkeys(names))


def _with_referent(statement: str, source: str) -> str:
    """The statement with the one name `source` gives in place of what points back to it."""
    if REFERENTS == "none" or source == statement:
        return statement
    names = [n for n in _names(source) if n.lower() not in statement.lower()]
    if len(names) != 1 or not re.search(r"\b(?:there|it|he|she|him|her|they|them)\b", statement, re.IGNORECASE):
        return statement
    if REFERENTS == "context":
        return f"{_close(source.rstrip('?').strip())} {statement}" if source not in statement else statement
    name = names[0]

    def there(match: re.Match) -> str:
        if match.group(1):
            return f"{match.group(1)} {name}"
        return ("to " if _MOTION.search(statement[:match.start()]) else "in ") + name

    resolved, count = _THERE.subn(there, statement, count=1)
    if not count:
        resolved, count = _SUBJECT_PRONOUN.subn(name, statement, count=1)
    if not count:
        resolved, count = _PERSON_OBJECT.subn(name, statement, count=1)
    if not count:
        resolved, count = _IT.subn(name, statement, count=1)
    return resolved
