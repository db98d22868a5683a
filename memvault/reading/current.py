"""The current truth first (issues 29 and 45; docs/design.md, "The read path", step 4).

A search result is *superseded* when something newer took its place:

- `replaced`: the memory, or the turn it was learned from, was replaced (a tombstone's
  `replaced_by`); or it is a turn or fact from before the replacement that states the old value
  (it holds a word of the old fact that the new one dropped, and shares another with the old fact
  in its own words or the turns before it: "[assistant] Porto" after "where does Lena live?");
- `proposal`: it is a fact of the user's that a learned fact proposes to retire (`would_replace`,
  issue 26): it stays live until review, but the newer statement ranks first;
- `said`: nothing was learned, but a later statement by the same speaker says it changed
  (same_thing: a change word beside a word of it, "Lena moved to Lisbon" after "My sister Lena
  lives in Porto"; a move of the one who lived somewhere; "now"/"new"/"lately" in a short line
  close in meaning).

What files declare is kept in the index's record (store/supersession.py); the rest is read off the
candidates. A superseded result is marked (`Result.superseded`: the successor's id, text and since
when). A declared one is ranked right below its successor (or its score halved when the successor
is not among the candidates); for a change said, a guess from words, the statement is lifted just
above what it replaces instead, which keeps its score. Neither when the question asks about the
past (PAST_CUES): "where did Lena live before?" still finds Porto first. Nothing is removed: plain
history stays findable.
"""

from __future__ import annotations

import functools
import re
from datetime import timezone
from typing import Any

from memvault.reading import ranking
from memvault.store import files
from memvault.store.files import DEFAULT_CONVERSATION

# A question about an earlier value: superseded memories keep their rank (still marked). One list,
# in one place; a query-time parser of temporal expressions may take its place.
PAST_CUES = re.compile(r"\b(before|used to|previously|earlier|formerly|originally|at first|at the start|"
                       r"in the past|former|prior to|back then|anymore|any more|no longer)\b", re.IGNORECASE)
# A statement that something changed: the older value it shares a word with stopped being true.
# Words that say so and little else (issue 29); with issue 45's rules a statement with one is
# lifted above what it replaces, never the old one sent down (bench/README.md, "The current truth
# first": demoting with looser cues took LoCoMo's R@10 from .766 to .428).
CHANGE_CUES = re.compile(r"\b(moved|relocated|anymore|any more|no longer|switched|swapped|instead(?! of \w+ing\b)|"
                         r"changed(?! since)|change of plans?|quit|gave up|given up|stopped|dropped(?! off)|"
                         r"left(?= (?:my|our|the|his|her|their|(?-i:[A-Z])))|"
                         r"retired|traded in|split up|broke up|divorced|sold|cancell?ed|replaced|died|passed away|"
                         r"(?:raised|lowered)(?= (?:my|our|the|his|her|their)\b))\b", re.IGNORECASE)
# "left" with what was left ("left my job", "left Kestrel"), not "we left early"; "raised my rent",
# not "raised money"; "instead", not "instead of getting stuck". A cue said in the negative changes nothing: "not much has changed", "I haven't moved".
_NEGATIVE_CUE = re.compile(r"anymore|any more|no longer", re.IGNORECASE)  # "isn't my favourite anymore": a change
_NEGATED = re.compile(r"(?:\b(?:not|never|nothing|no)\b|n't)\W+(?:\w+\W+){0,2}$", re.IGNORECASE)
# Words that say a value is current, which many lines hold with no change at all ("now", "new",
# "lately"): a statement with one only counts when it is close to the older one in meaning too
# (SAME_THING_NOW).
NOW_CUES = re.compile(r"\b(now|new|lately|these days|nowadays|currently)\b", re.IGNORECASE)
# A change statement is about what an older one states when a content word of the older one is among
# the NEAR content words on either side of its cue ("I traded in the Panda", "Lena moved to Lisbon":
# in chat a shared word anywhere in a long line ties nothing); with a NOW_CUES word only, the two
# must also be this close in meaning (cosine of their vectors; MiniLM: "I go to bed around midnight" / "New habit: I go to bed at 10 pm" 0.68, "my coffee
# black" / "these days I take my coffee with oat milk" 0.52, unrelated lines of one person 0.1-0.3).
SAME_THING_NOW = 0.45
NEAR = 3
# ... and be a short statement: "now" in a long chat line says little about a change.
NOW_WORDS = 14
# Without a shared word, only a move said of the one who lived somewhere: "I live in Hamburg" /
# "We moved to Berlin" (I and we count as one household); "My sister Lena lives in Porto" / "I
# moved to Rotterdam" is someone else.
_LIVES = re.compile(r"\b([^\W\d_]+)\s+(?:live|lives|lived|living)\b", re.IGNORECASE)
_MOVED = re.compile(r"\b([^\W\d_]+)\s+(?:moved|relocated)\b", re.IGNORECASE)
_HOUSEHOLD = {"i": "i", "we": "i"}
# A NOW_CUES change of what someone else does is not the user's: "The wife of the user likes bicycles" /
# "The user bought a new bicycle". An older statement naming one of these is tied by a NOW_CUES line
# only when that line names one of them or a name of the older one too ("Lena is now in Lisbon").
_PEOPLE = re.compile(r"\b(wife|husband|partner|girlfriend|boyfriend|fianc[eé]e?|sister|brother|sibling|mother|mom|"
                     r"mum|father|dad|parents?|son|daughter|kids?|children|child|friend|boss|colleague|coworker|"
                     r"neighbou?r|cousin|aunt|uncle|grandma|grandpa|grandmother|grandfather|niece|nephew)s?\b",
                     re.IGNORECASE)
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_SENTENCE_END = re.compile(r"(?<!\b[A-Z])(?<!\b(?:Dr|Mr|Ms|St|Jr|Sr|vs))(?<!\bMrs)[.!?;](?=\s|$)|\n")
# Without its successor among the candidates, a superseded result's score is scaled by this.
ALONE_FACTOR = 0.5
# What a change statement is lifted by above the best of what it replaces: r + LIFT * (1 - r).
LIFT = 1e-3
# Words too common in memories to tie two of them to one topic.
_GENERIC = frozenset("user users like really also get got go going one would could much many time times around way "
                     "thing things lot bit kind kinda sort today yesterday".split())


def asks_about_the_past(text: str) -> bool:
    return PAST_CUES.search(text) is not None


def words(text: str) -> set[str]:
    """Content words, lower-cased, crudely stemmed (a plural or third-person s dropped)."""
    return {_stem(word) for word in ranking.query_terms(text) if word not in _GENERIC and len(word) >= 2}


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def supersede(pool: list, index, query, spare: list = ()) -> list:
    """Mark the superseded results of a pool whose scores are set, and rank each below its successor
    (docstring above). `index` gives what the files declare (Index.supersessions) and the
    successors' texts; an index without them (a snapshot's) marks only what the candidates say.
    `spare`: candidates the relevance floor left out (scored too); a change statement among them
    that supersedes a result comes back. Returns those brought back."""
    if not pool:
        return []
    declared = getattr(index, "supersessions", None)
    rows = declared() if declared is not None else []
    if query.as_of is not None:
        moment = query.as_of
        rows = [r for r in rows if _time(r["since"]) is not None and _time(r["since"]) <= moment]
    by_id = {r.id: r for r in pool}
    successor: dict[str, dict[str, Any]] = {}  # old id -> the row that supersedes it
    for row in rows:
        successor.setdefault(row["old_id"], row)
        if row["learned_from"]:
            successor.setdefault(row["learned_from"], row)
    texts = {r.id: {"text": r.text, "created_at": r.created_at, "conversation_id": r.conversation_id} for r in pool}

    def look_up(ids: set[str]) -> None:
        """The successors' words, where they are not candidates themselves: from the index's rows."""
        missing = set(ids) - set(texts)
        if missing and hasattr(index, "texts"):
            try:
                texts.update(index.texts(missing))
            except Exception:  # a snapshot's table, an index being rebuilt: the mark goes without the words
                pass

    marks: dict[str, dict[str, Any]] = {}
    for result in pool:
        row = successor.get(result.id)
        if row is not None and row["new_id"] != result.id:
            marks[result.id] = {"by": row["new_id"], "since": row["since"], "how": row["kind"]}
    _stated_old_values(pool, rows, marks, texts, look_up)
    back = _said_changes(pool, marks, list(spare))
    pool = pool + back
    by_id.update({r.id: r for r in back})
    texts.update({r.id: {"text": r.text, "created_at": r.created_at, "conversation_id": r.conversation_id} for r in back})
    if not marks:
        return back
    # The newest successor of a chain (A replaced by B, B by C: A is marked with C).
    for mark in marks.values():
        for _ in range(8):
            row = successor.get(mark["by"])
            if row is None or row["new_id"] == mark["by"]:
                break
            mark["by"], mark["since"] = row["new_id"], row["since"]
    look_up({m["by"] for m in marks.values()})
    # A successor that is gone itself (removed, rejected in review) supersedes nothing any more.
    marks = {key: mark for key, mark in marks.items() if mark["by"] in texts}
    if not marks:
        return back
    for result_id, mark in marks.items():
        found = texts.get(mark["by"])
        superseded = {"by": mark["by"], "how": mark["how"], "since": mark["since"], "text": found["text"] if found else None}
        superseded["note"] = note(superseded)
        by_id[result_id].superseded = superseded
    if asks_about_the_past(query.text):
        return back  # marked, in their order
    # A change said (a guess from words): the statement goes just above what it replaces, which keeps
    # its score (a wrong guess moves one line by one place).
    over: dict[str, float] = {}
    for result_id, mark in marks.items():
        if mark["how"] == "said" and mark["by"] in by_id:
            over[mark["by"]] = max(over.get(mark["by"], 0.0), by_id[result_id].scores.get("score", 0.0))
    for new_id, best in over.items():
        statement = by_id[new_id]
        score = statement.scores.get("score", 0.0)
        if best >= score:
            statement.scores.setdefault("before_lift", score)
            statement.scores["score"] = best + LIFT * (1.0 - best)
    # A change the files declare: the old one goes just below its successor, or to half its score.
    for _ in range(2):  # twice: a successor demoted itself first moves its predecessors with it
        for result_id, mark in marks.items():
            if mark["how"] == "said":
                continue
            result = by_id[result_id]
            score = result.scores.get("score", 0.0)
            top = by_id.get(mark["by"])
            if top is not None:
                ceiling = top.scores.get("score", 0.0) * (1 - 1e-3)
                lowered = min(score, ceiling)
            else:
                lowered = result.scores.setdefault("before_superseded", score) * ALONE_FACTOR
            if lowered != score:
                result.scores.setdefault("before_superseded", score)
                result.scores["score"] = lowered
    return back


def _stated_old_values(pool: list, rows: list[dict[str, Any]], marks: dict[str, dict[str, Any]],
                       texts: dict[str, dict[str, Any]], look_up) -> None:
    """Candidates from before a replacement that state the replaced value: they hold a word the old
    fact had and the new one has not, and share one more word with the old fact in their own words
    or their turn context (index_text); said over an hour before the change (not in its exchange), in
    the successor's conversation or `global`."""
    replaced = [r for r in rows if r["old_text"]]
    if not replaced:
        return
    from memvault.store.turn_context import CONTEXT_GAP

    own = {r.id: words(r.text) for r in pool}
    around = {r.id: own[r.id] | words(r.index_text or "") for r in pool}
    wanted = []
    for row in replaced:
        old = words(row["old_text"])
        if any(len(around[r.id] & old) >= 2 and own[r.id] & old for r in pool if r.id not in marks):
            wanted.append((row, old))
    if not wanted:
        return
    look_up({row["new_id"] for row, _ in wanted})
    for row, old in wanted:
        successor = texts.get(row["new_id"])
        stale = old - words(successor["text"]) if successor else set()
        since = _time(row["since"])
        if not stale or since is None:
            continue
        scope = (successor or {}).get("conversation_id")
        for r in pool:
            if r.id in marks or r.id == row["new_id"] or r.role == "episode":
                continue
            if scope and r.conversation_id not in (scope, DEFAULT_CONVERSATION):
                continue  # another conversation's line: not the value this change replaced
            if files.parse_time(r.created_at) >= since - CONTEXT_GAP:
                continue  # said in the exchange that made the change (its own turn names the old value too)
            if own[r.id] & stale and len(around[r.id] & old) >= 2:
                marks[r.id] = {"by": row["new_id"], "since": row["since"], "how": "replaced"}


def _said_changes(pool: list, marks: dict[str, dict[str, Any]], spare: list) -> list:
    """Changes said but never learned (issue 45): a later statement (a user turn, or a fact, note
    or decision) of another session, in the same conversation (or the older one in `global`; a turn
    only by its own speaker), not a question, that says a change (CHANGE_CUES, or NOW_CUES with more
    evidence: same_thing) about the thing an older candidate states, supersedes it (of several, the
    closest in meaning; a statement superseded in turn passes it on to its own successor). Marked
    "said": the statement is lifted above what it supersedes (supersede), which keeps its score. A
    statement among `spare` (below the relevance floor: "We moved to Berlin" for "where do I
    live?") that supersedes a candidate is returned, to come back."""
    from memvault.store.turn_context import CONTEXT_GAP

    everyone = pool + spare
    statements = [r for r in everyone if r.role in ("user", "memory", "note", "decision")
                  and not r.text.rstrip().endswith("?") and (CHANGE_CUES.search(r.text) or NOW_CUES.search(r.text))]
    if not statements:
        return []
    moments = {r.id: files.parse_time(r.created_at) for r in everyone}
    own = {r.id: words(r.text) for r in everyone}
    cosine = _cosines(everyone)
    # Words in a third of the lines tie nothing (an imported chat's "Audrey:" before each of her turns).
    counts: dict[str, int] = {}
    for found in own.values():
        for word in found:
            counts[word] = counts.get(word, 0) + 1
    common = frozenset(w for w, n in counts.items() if len(everyone) >= 6 and n * 3 >= len(everyone))
    said: dict[str, Any] = {}
    for older in everyone:
        if older.id in marks or older.role == "episode" or older.text.rstrip().endswith("?"):
            continue  # a question states no value that could have changed
        best, closest = None, -2.0
        for newer in statements:
            if newer.id == older.id or moments[newer.id] - moments[older.id] <= CONTEXT_GAP:
                continue
            if older.role in ("user", "assistant") and older.role != newer.role:
                continue  # a turn is superseded by its own speaker's later words only
            if older.conversation_id not in (newer.conversation_id, DEFAULT_CONVERSATION):
                continue
            near = cosine(older.id, newer.id)
            if not same_thing(older.text, newer.text, own[older.id], near, common):
                continue
            if near > closest or (near == closest and moments[newer.id] > moments[best.id]):
                best, closest = newer, near
        if best is not None:
            said[older.id] = best
    for older_id in said:  # A by B, B by C: A by C
        for _ in range(8):
            after = said.get(said[older_id].id)
            if after is None or after.id == older_id:
                break
            said[older_id] = after
    kept = {r.id for r in pool}
    said = {older: newer for older, newer in said.items() if older in kept}  # only the pool's are marked
    for older_id, newer in said.items():
        marks[older_id] = {"by": newer.id, "since": newer.created_at, "how": "said"}
    return sorted({newer.id: newer for newer in said.values() if newer.id not in kept}.values(), key=lambda r: r.id)


def same_thing(older: str, newer: str, older_words: set[str], cosine: float, common: frozenset[str] = frozenset()
               ) -> bool:
    """Whether `newer` says a change of what `older` states (_said_changes): a CHANGE_CUES word with a
    word of the older statement among the NEAR content words on either side of it ("I traded in the
    Panda", "Lena moved to Lisbon", "Sofia and I split up"; not a cue word itself), or a move of the
    one who lived somewhere (_LIVES, _MOVED); a NOW_CUES word the same way, and the two at least
    SAME_THING_NOW alike ("Lately I only listen to lo-fi" after "I mostly listen to jazz")."""
    cues = _cue_words(newer)
    older_words = older_words - cues - common
    changed = _near_cue(CHANGE_CUES, newer, older_words)
    if changed:
        return True
    moved = _moved(newer)
    if moved and moved & _lived(older):
        return True
    return (cosine >= SAME_THING_NOW and len(newer.split()) <= NOW_WORDS and _same_people(older, newer)
            and _near_cue(NOW_CUES, newer, older_words))


def _same_people(older: str, newer: str) -> bool:
    """Whether `newer` is about the people `older` names (_PEOPLE): it names one of them too, or one
    of older's names; an older statement naming none of them is the user's own."""
    people = {m.group(1).lower() for m in _PEOPLE.finditer(older)}
    if not people:
        return True
    return bool(people & {m.group(1).lower() for m in _PEOPLE.finditer(newer)}
                or _names(older) & _names(newer))


def _names(text: str) -> set[str]:
    """The capitalised words of a text that are not stop words ("Lena", not "The")."""
    return {w for w in _NAME.findall(text) if w.lower() not in ranking._STOP_WORDS}


# What one text holds, asked of it once however many pairs it is in (_said_changes weighs every
# candidate against every statement: 225 pairs a chat's search, ~10 ms read anew each time).
_TEXT_CACHE = 4096


@functools.lru_cache(maxsize=_TEXT_CACHE)
def _moved(newer: str) -> frozenset[str]:
    """Who moved in `newer` (_MOVED), when it says a change (CHANGE_CUES not negated)."""
    if not any(not _NEGATED.search(newer[:m.start()]) or _NEGATIVE_CUE.match(m.group())
               for m in CHANGE_CUES.finditer(newer)):
        return frozenset()
    return frozenset(_HOUSEHOLD.get(m.group(1).lower(), m.group(1).lower()) for m in _MOVED.finditer(newer))


@functools.lru_cache(maxsize=_TEXT_CACHE)
def _lived(older: str) -> frozenset[str]:
    """Who lived somewhere in `older` (_LIVES)."""
    return frozenset(_HOUSEHOLD.get(m.group(1).lower(), m.group(1).lower()) for m in _LIVES.finditer(older))


def _near_cue(cues: re.Pattern, text: str, wanted: set[str]) -> bool:
    """Whether one of `wanted` (content words, as words() gives them) is among the NEAR content words
    before or after a match of `cues` in `text`, within its sentence."""
    if not wanted:
        return False
    return any(not wanted.isdisjoint(near) for near in _cue_neighbours(cues, text))


@functools.lru_cache(maxsize=_TEXT_CACHE)
def _cue_neighbours(cues: re.Pattern, text: str) -> tuple[frozenset[str], ...]:
    """For each match of `cues` in `text` that is not negated, the NEAR content words before and
    after it within its sentence (_near_cue)."""
    found = []
    tokens = [(m.start(), _stem(m.group().lower())) for m in re.finditer(r"[^\W_]+", text)
              if m.group().lower() not in ranking._STOP_WORDS and len(m.group()) >= 2]
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    for match in cues.finditer(text):
        if _NEGATED.search(text[:match.start()]) and not _NEGATIVE_CUE.match(match.group()):
            continue
        start = max((e for e in ends if e <= match.start()), default=0)  # the cue's own sentence only:
        end = min((e for e in ends if e > match.end()), default=len(text))  # "...ice cream! The sprinkles changed"
        before = [word for at, word in tokens if start <= at < match.start()][-NEAR:]
        after = [word for at, word in tokens if match.end() <= at < end][:NEAR]
        found.append(frozenset(before + after))
    return tuple(found)


@functools.lru_cache(maxsize=_TEXT_CACHE)
def _cue_words(text: str) -> frozenset[str]:
    """The content words of the cues a text holds ("moved", "gave", "now"): they tie nothing."""
    found = set()
    for cues in (CHANGE_CUES, NOW_CUES):
        for match in cues.finditer(text):
            found |= words(match.group())
    return frozenset(found)


def _cosines(pool: list):
    """cosine(a_id, b_id) of two candidates' stored vectors (0 without them)."""
    import numpy as np

    vectors = {}
    for r in pool:
        v = np.asarray(r.vector, dtype=np.float64) if getattr(r, "vector", None) is not None else None
        if v is not None and v.size:
            norm = float(np.linalg.norm(v))
            vectors[r.id] = v / norm if norm else v

    def cosine(a: str, b: str) -> float:
        if a not in vectors or b not in vectors:
            return 0.0
        return float(vectors[a] @ vectors[b])
    return cosine


def _time(value):
    try:
        return files.parse_time(value)
    except (ValueError, TypeError):
        return None


def note(superseded: dict[str, Any]) -> str:
    """What a superseded result is shown with (search output, the injection block, MCP, serve):
    "earlier; since Sun 3 May 2026: <what replaced it>" (the day in words, as the block writes days)."""
    from memvault.store.relative_times import day_words

    since = _time(superseded.get("since"))
    day = day_words(since.astimezone(timezone.utc)) if since else "later"
    text = " ".join((superseded.get("text") or "").split())
    if len(text) > 160:
        text = text[:159] + "…"
    if not text:
        return f"earlier; replaced {day}"
    if superseded.get("how") == "proposal":
        return f"earlier; since {day}, waiting for review: {text}"
    return f"earlier; since {day}: {text}"


def marker(superseded: dict[str, Any] | None) -> str:
    """The note in parentheses, as a shown line carries it after its text."""
    return f"({superseded.get('note') or note(superseded)})" if superseded else ""
