"""The current truth first (issue 29; docs/design.md, "The read path", step 4b).

A search result is *superseded* when something newer took its place:

- `replaced`: the memory, or the turn it was learned from, was replaced (a tombstone's
  `replaced_by`); or it is a turn or fact from before the replacement that states the old value
  (it holds a word of the old fact that the new one dropped, and shares another with the old fact
  in its own words or the turns before it: "[assistant] Porto" after "where does Lena live?");
- `proposal`: it is a fact of the user's that a learned fact proposes to retire (`would_replace`,
  issue 26): it stays live until review, but the newer statement ranks first;
- `said`: nothing was learned, but a later statement in the candidates says it changed (a word of
  CHANGE_CUES: "moved", "no longer", "switched", "instead"...) and shares a word with it.

What files declare is kept in the index's record (store/supersession.py); the rest is read off the
candidates. A superseded result is marked (`Result.superseded`: the successor's id, text and since
when) and ranked right below its successor (or its score halved when the successor is not among
the candidates), unless the question asks about the past (PAST_CUES): "where did Lena live
before?" still finds Porto first. Nothing is removed: plain history stays findable.
"""

from __future__ import annotations

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
# A statement that something changed: it supersedes an older candidate it shares a word with.
# Words that say so and little else: "now" and "new" are in too many chat lines (LoCoMo R@10 fell
# from .766 to .428 with them and no other guard; bench/README.md, "The current truth first").
CHANGE_CUES = re.compile(r"\b(moved|anymore|any more|no longer|switched|swapped|instead|changed|change of plans?|"
                         r"quit|gave up|given up|traded in|split up|broke up|divorced|sold|cancell?ed|replaced)\b",
                         re.IGNORECASE)
# Without its successor among the candidates, a superseded result's score is scaled by this.
ALONE_FACTOR = 0.5
# A change said in turns counts only when the statement answers the query at least this well
# relative to what it would supersede: "bought a new bicycle" does not retire "the wife likes
# bicycles" for "what is my wife's name?".
SAID_RELEVANCE = 0.8
# Words too common in memories to tie two of them to one topic.
_GENERIC = frozenset("user users like really also get got go going one would could much many".split())


def asks_about_the_past(text: str) -> bool:
    return PAST_CUES.search(text) is not None


def words(text: str) -> set[str]:
    """Content words, lower-cased, crudely stemmed (a plural or third-person s dropped)."""
    found = set()
    for word in ranking.query_terms(text):
        if word in _GENERIC or len(word) < 2:
            continue
        found.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return found


def supersede(pool: list, index, query) -> None:
    """Mark the superseded results of a pool whose scores are set, and rank each below its successor
    (docstring above). `index` gives what the files declare (Index.supersessions) and the
    successors' texts; an index without them (a snapshot's) marks only what the candidates say."""
    if not pool:
        return
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
    texts = {r.id: {"text": r.text, "created_at": r.created_at} for r in pool}

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
    _said_changes(pool, marks)
    if not marks:
        return
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
        return
    past = asks_about_the_past(query.text)
    for _ in range(2):  # twice: a successor demoted itself first moves its predecessors with it
        for result_id, mark in marks.items():
            result = by_id[result_id]
            found = texts.get(mark["by"])
            result.superseded = {"by": mark["by"], "how": mark["how"], "since": mark["since"],
                                 "text": found["text"] if found else None}
            result.superseded["note"] = note(result.superseded)
            if past:
                continue
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


def _stated_old_values(pool: list, rows: list[dict[str, Any]], marks: dict[str, dict[str, Any]],
                       texts: dict[str, dict[str, Any]], look_up) -> None:
    """Candidates from before a replacement that state the replaced value: they hold a word the old
    fact had and the new one has not, and share one more word with the old fact in their own words
    or their turn context (index_text); said over an hour before the change (not in its exchange)."""
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
        for r in pool:
            if r.id in marks or r.id == row["new_id"] or r.role == "episode":
                continue
            if files.parse_time(r.created_at) >= since - CONTEXT_GAP:
                continue  # said in the exchange that made the change (its own turn names the old value too)
            if own[r.id] & stale and len(around[r.id] & old) >= 2:
                marks[r.id] = {"by": row["new_id"], "since": row["since"], "how": "replaced"}


def _said_changes(pool: list, marks: dict[str, dict[str, Any]]) -> None:
    """Changes said but never learned: a later user turn or fact with a CHANGE_CUES word, of another
    session, in the same conversation (or the older one in `global`), sharing a word with an older
    candidate that holds a word it does not, and scoring at least SAID_RELEVANCE times its score,
    supersedes it (the newest such statement)."""
    from memvault.store.turn_context import CONTEXT_GAP

    statements = [r for r in pool if r.role in ("user", "memory", "note", "decision") and CHANGE_CUES.search(r.text)]
    if not statements:
        return
    moments = {r.id: files.parse_time(r.created_at) for r in pool}
    own = {r.id: words(r.text) for r in pool}
    for older in pool:
        if older.id in marks or older.role == "episode" or older.text.rstrip().endswith("?"):
            continue  # a question states no value that could have changed
        best = None
        for newer in statements:
            if newer.id == older.id or moments[newer.id] - moments[older.id] <= CONTEXT_GAP:
                continue
            if older.role in ("user", "assistant") and older.role != newer.role:
                continue  # a turn is superseded by its own speaker's later words only
            if older.conversation_id not in (newer.conversation_id, DEFAULT_CONVERSATION):
                continue
            shared = own[older.id] & own[newer.id]
            if not shared or not (own[older.id] - own[newer.id]):
                continue
            if newer.scores.get("score", 0.0) < SAID_RELEVANCE * older.scores.get("score", 0.0):
                continue
            if best is None or moments[newer.id] > moments[best.id]:
                best = newer
        if best is not None:
            marks[older.id] = {"by": best.id, "since": best.created_at, "how": "said"}


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
