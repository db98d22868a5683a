"""Chat sessions (docs/design.md, "Chat"), derived from the turn files and their timestamps.

What cannot be derived from the turns (where a --clear started a fresh session, and
the summary of turns folded away) lives in one committed file per conversation,
entries/<c>/summaries/session.md (role summary, summary_kind session), so it is
as durable and versioned as everything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable

from memvault.store import files
from memvault.store.files import Memory
from memvault.learning.prompts import estimate_tokens

KEEP_VERBATIM = 4  # turns that stay word for word when older ones are folded (two exchanges)
MIN_VERBATIM = 2


def session_path(vault, conversation: str) -> Path:
    return vault.entries / files.conversation_slug(conversation) / "summaries" / "session.md"


@dataclass
class Session:
    conversation: str
    turns: list[Memory] = field(default_factory=list)  # verbatim turns of this session, oldest first
    summary: str = ""  # folded older turns of this session
    started_at: datetime | None = None
    last_turn_at: datetime | None = None
    record: Memory | None = None  # the session.md memory, if any
    fresh_reason: str | None = None  # why a new session started (hard decay, --clear)
    unanswered: list[Memory] = field(default_factory=list)  # user turns of this session left without a reply

    def tokens(self) -> int:
        return estimate_tokens(self.summary) + sum(estimate_tokens(t.text) for t in self.turns)

    def idle(self, now: datetime) -> timedelta | None:
        return None if self.last_turn_at is None else now - self.last_turn_at

    def messages(self) -> list[dict]:
        return [{"role": t.role, "content": t.text} for t in self.turns]


def _turns(vault, conversation: str, start: datetime | None = None, silence: timedelta | None = None
           ) -> list[Memory]:
    """The conversation's turns, oldest first; from `start` on, if given. With `silence`, only the
    newest back to the first silence longer than that between two answered turns, and the turn
    before it (the caller sees the break): turn files are named by their time, so the older turns of
    a long conversation are not read (reading them all cost each message ~150 ms at 530 turns)."""
    from memvault.reading import listing

    turns: list[Memory] = []
    newer: datetime | None = None
    for turn in listing.newest_first(vault.entries, conversation, roles=("user", "assistant"), since=start):
        turns.append(turn)
        if is_unanswered(turn):
            continue
        if silence is not None and newer is not None and newer - turn.created_at > silence:
            break
        newer = turn.created_at
    turns.sort(key=lambda m: (m.created_at, 0 if m.role == "user" else 1, m.id))
    return turns


def is_unanswered(turn: Memory) -> bool:
    """A user turn whose reply never came (the LLM failed, or the chat was killed): kept on disk,
    left out of the session and of every later prompt."""
    return bool(turn.extra.get("unanswered"))


def _record(vault, conversation: str) -> Memory | None:
    return files.read_optional(session_path(vault, conversation), vault.root)


def load(vault, conversation: str, now: datetime, hard_decay_minutes: float) -> Session:
    """The current session: turns since its start, minus those already folded."""
    record = _record(vault, conversation)
    session = Session(conversation, record=record)
    start = _time(record, "session_start")
    folded_until = _time(record, "folded_until")
    turns = _turns(vault, conversation, start, timedelta(minutes=hard_decay_minutes))
    session.unanswered = [t for t in turns if is_unanswered(t)]
    turns = [t for t in turns if not is_unanswered(t)]
    hard = timedelta(minutes=hard_decay_minutes)
    # A silence longer than hard decay between turns (or until now) ends a session.
    boundary = 0
    for i in range(1, len(turns)):
        if turns[i].created_at - turns[i - 1].created_at > hard:
            boundary = i
    turns = turns[boundary:]
    if boundary:
        folded_until = None if folded_until and folded_until < turns[0].created_at else folded_until
    if turns and now - turns[-1].created_at > hard:
        session.fresh_reason = f"over {hard_decay_minutes:g} minutes of silence"
        session.last_turn_at = turns[-1].created_at
        turns = []
    if turns or session.fresh_reason:
        since = turns[0].created_at if turns else now
        session.unanswered = [t for t in session.unanswered if t.created_at >= since]
    session.started_at = turns[0].created_at if turns else (start if start and not session.fresh_reason else None)
    if turns:
        session.last_turn_at = turns[-1].created_at
    session.turns = [t for t in turns if folded_until is None or t.created_at > folded_until]
    same_session = record is not None and not session.fresh_reason and not boundary and (
        folded_until is not None or start is not None)
    session.summary = record.text if same_session and record and record.text != "(empty)" else ""
    return session


def fold(session: Session, now: datetime, soft_decay_minutes: float, max_tokens: int,
         summarize: Callable[[str, str | None], str]) -> list[Memory]:
    """Fold older turns into the session summary when the session went quiet past soft decay,
    or when it is over the token ceiling. Returns the turns folded (oldest first)."""
    idle = session.idle(now)
    keep = len(session.turns)
    if idle is not None and idle > timedelta(minutes=soft_decay_minutes):
        keep = min(keep, KEEP_VERBATIM)
    while keep > MIN_VERBATIM and _tokens_if_kept(session, keep) > max_tokens:
        keep -= 1
    folded = session.turns[: len(session.turns) - keep]
    if not folded:
        return []
    transcript = "\n".join(f"{t.role}: {t.text}" for t in folded)
    session.summary = summarize(transcript, session.summary or None).strip()
    session.turns = session.turns[len(folded):]
    return folded


def _tokens_if_kept(session: Session, keep: int) -> int:
    kept = session.turns[len(session.turns) - keep:] if keep else []
    # The summary of what is folded will be short; count the current one plus what is kept.
    return estimate_tokens(session.summary) + sum(estimate_tokens(t.text) for t in kept)


def save(change, session: Session, now: datetime, folded_until: datetime | None = None,
         start: datetime | None = None) -> Memory:
    """Write session.md: where the session starts and what was folded away."""
    record = session.record
    extra = dict(record.extra) if record else {}
    extra["summary_kind"] = "session"
    if start is not None:
        extra["session_start"] = files.format_time(start)
        extra.pop("folded_until", None)
    if folded_until is not None:
        extra["folded_until"] = files.format_time(folded_until)
    extra["updated_at"] = files.format_time(now)
    text = session.summary or "(empty)"
    if record is not None and record.path is not None and record.path.exists():
        record.text = text
        record.extra = extra
        session.record = change.rewrite(record)
    else:
        session.record = change.add(files.new_memory(text, "summary", session.conversation, created_at=now,
                                                     extra=extra))
    return session.record


def _time(record: Memory | None, key: str) -> datetime | None:
    if record is None or not record.extra.get(key):
        return None
    try:
        return files.parse_time(record.extra[key])
    except ValueError:
        return None


def ended_at(episode: Memory) -> datetime:
    return _time(episode, "ended_at") or episode.created_at


def open_turns(vault, conversation: str) -> list[Memory]:
    """The turns after the newest episode's end: the open episode (with whatever closes later). Found
    by file name (names sort by time: listing.newest), so a chat reads only the turns since then."""
    from memvault.reading import listing

    newest = listing.newest(vault.entries, conversation, limit=1, roles=("episode",))
    last = ended_at(newest[0]) if newest else None
    turns = listing.newest(vault.entries, conversation, limit=10 ** 9, roles=("user", "assistant"), since=last)
    turns = [t for t in turns if (last is None or t.created_at > last) and not is_unanswered(t)]
    turns.sort(key=lambda m: (m.created_at, 0 if m.role == "user" else 1, m.id))
    return turns


@dataclass
class SessionView:
    """A conversation's chat session as `chat --context` shows it (what the next chat sends)."""

    conversation: str
    turns: list[Memory]
    tokens: int
    max_tokens: int
    idle_seconds: int | None
    fresh_reason: str | None
    session_summary: str
    summary: str | None
    unanswered: list[Memory] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "conversation_id": self.conversation,
            "turns": [{"id": t.id, "role": t.role, "created_at": t.created_at.isoformat(), "text": t.text}
                      for t in self.turns],
            "unanswered": [{"id": t.id, "created_at": t.created_at.isoformat(), "text": t.text}
                           for t in self.unanswered],
            "tokens": self.tokens, "max_session_tokens": self.max_tokens, "idle_seconds": self.idle_seconds,
            "fresh_session": self.fresh_reason, "session_summary": self.session_summary, "summary": self.summary,
        }


def view(vault, conversation: str, now: datetime) -> SessionView:
    """`Memvault.session`: the session as loaded for a chat now, with the conversation's rolling summary."""
    from memvault.learning.summaries import read_rolling_summary

    settings = vault.settings
    session = load(vault, conversation, now, settings.hard_decay_minutes)
    idle = session.idle(now)
    summary = read_rolling_summary(vault, conversation)
    return SessionView(conversation, session.turns, session.tokens(), settings.max_session_tokens,
                       None if idle is None else max(0, round(idle.total_seconds())), session.fresh_reason,
                       session.summary, summary.text if summary else None, session.unanswered)
