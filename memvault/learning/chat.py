"""One chat exchange with memory (docs/design.md, "Chat"): retrieve, build the messages, stream
the reply, store both turns, then learn from the user's words.

The vault lock is held only while files are written and committed, never while the model
answers or thinks, so another command (a cron `add`, a search, a second chat) goes on meanwhile:

1. before the model is asked, the user's turn is written with `unanswered: true` (not yet
   committed, and without the lock: `Vault.write_aside`), so a failed or killed reply never loses
   the user's words;
2. when the reply is complete, the assistant's turn is written, the user's turn loses the mark,
   and both are committed together, with the stores of other conversations waiting at that moment
   (`Vault.grouped`: one commit for them all); a failed reply commits the marked turn alone; a reply
   cut short keeps what the reader got, marked `partial: true`;
3. `finish()` runs the memory upkeep (extract, reconcile, summarize, evict): model calls
   without the lock, then one more commit of what was learned, if anything was.

A proxy (serve) hands the client's request on as it came (`ChatOptions.forward`, store/upstream.py)
and says what its client got (`ChatTurn.delivery`): one message keeps one user turn and one reply,
the one the client got (docs/design.md, "The library API and its faces": serve, one reply per message,
the truth about delivery).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator

from memvault.store import files
from memvault.store.upstream import Delivery  # noqa: F401 (what a face fills in: ChatTurn.delivery)
from memvault.learning import learn, sessions
from memvault.errors import LLMError
from memvault.reading.retrieval import Result, injection_block

SYSTEM_PROMPT = (
    "You are a helpful assistant with a long-term memory of the user. "
    "Answer the user's message directly and concisely. Use the background memory below only where it is "
    "relevant; do not mention it otherwise."
)

# Seconds a reply's store waits for the face to say what its client got (a response being sent; a
# slow client reading a long stream): then what was handed on so far is what the client got.
SETTLE_WAIT = 60.0
# Front matter of a turn: the reply was not received by the client (a timeout, a hang-up before it
# came, a stop); the tool calls of a reply; a text cut to what a memory holds.
DELIVERED, TOOL_CALLS, TRUNCATED, ORIGINAL_BYTES = "delivered", "tool_calls", "truncated", "original_bytes"


@dataclass
class ChatOptions:
    conversation: str = files.DEFAULT_CONVERSATION
    learn: bool = True
    use_memory: bool = True
    stream: bool = True
    now: datetime | None = None
    top_k: int | None = None
    model: str | None = None  # a litellm model string instead of llm_model
    # The conversation so far as the client keeps it (an OpenAI client through `serve`): sent as
    # it is, instead of memvault's own session; None: memvault's session (docs/design.md, "Chat").
    history: list[dict] | None = None
    # The client's own last message (OpenAI shape: its content may hold images besides the text),
    # sent as it is in place of a plain {"role": "user", "content": message}.
    user_message: dict | None = None
    llm_options: dict = field(default_factory=dict)  # sampling options passed to the model (max_tokens...)
    # A proxy's request (store/upstream.Forward): the client's request as it sent it, handed to the
    # upstream with the memory block added and nothing else changed, not through litellm; iterating the
    # turn gives the upstream's answer (upstream.Answer) or its stream's events (upstream.Event) as they
    # came. What is stored is the reply's text and tool calls.
    forward: Any = None
    # The messages after the user's message in a client's tool round (the assistant's tool calls,
    # the `tool` results), sent after it as they are; the user's turn is the one stored already.
    after_user: list[dict] | None = None
    # The client says this request is its retry of the same message (openai-python's
    # x-stainless-retry-count): its turn is the message's, answered since (too late for the client) or not.
    resent: bool = False


@dataclass
class ChatResult:
    """The record of one exchange."""

    conversation: str
    reply: str = ""
    memories: list[Result] = field(default_factory=list)  # what was injected
    learned: learn.Learned = field(default_factory=learn.Learned)  # a result also when learning failed: `error`
    user_turn: files.Memory | None = None
    assistant_turn: files.Memory | None = None
    folded: int = 0  # older turns folded into the session summary before this one
    session_note: str | None = None  # why a fresh session started, if one did
    upkeep_error: str | None = None  # the memory upkeep failed (the reply is kept)
    partial: bool = False  # the reader stopped before the reply was complete
    delivered: bool = True  # False: the client did not get the reply (a proxy's, stored `delivered: false`)
    episodes: list = field(default_factory=list)  # episodes.Closed: episodes this exchange closed

    def to_json(self) -> dict:
        return {"conversation_id": self.conversation, "reply": self.reply,
                "memories": [r.to_json() for r in self.memories],
                "learned": self.learned.to_json(),
                "user_turn": self.user_turn.id if self.user_turn else None,
                "assistant_turn": self.assistant_turn.id if self.assistant_turn else None,
                "folded_turns": self.folded, "upkeep_error": self.upkeep_error,
                "episodes": [c.to_json() for c in self.episodes]}


def build_messages(message: str, results: list[Result], summary: str | None, session: sessions.Session,
                   history: list[dict] | None = None, user_message: dict | None = None, *,
                   now: datetime | None = None, summary_written: datetime | str | None = None,
                   after_user: list[dict] | None = None) -> list[dict]:
    """What the model gets: memvault's system prompt with the memory block (dated; today is `now`),
    the session, the message. With a client's own history, that history as it is, the memory block
    in a system message right before the message (the client's own message object when given),
    then after_user (a tool round's calls and results: they must follow the message unbroken)."""
    block = memory_block(results, summary, now, summary_written)
    if history is not None:
        memory = [{"role": "system", "content": block}] if block else []
        return [*history, *memory, user_message or {"role": "user", "content": message}, *(after_user or [])]
    system = SYSTEM_PROMPT + ("\n\n" + block if block else "")
    if session.summary:
        system += "\n\nEarlier in this chat (summary):\n" + session.summary
    return [{"role": "system", "content": system}, *session.messages(), {"role": "user", "content": message}]


def memory_block(results: list[Result], summary: str | None, now: datetime | None,
                 summary_written: datetime | str | None) -> str | None:
    """The memory block (retrieval.injection_block), or None when nothing was found and there is no
    summary: a header alone tells the model nothing."""
    if not results and not (summary and summary.strip()):
        return None
    return injection_block(results, summary, today=now, summary_written=summary_written)


@dataclass
class Outcome:
    """What a turn's store writes: the reply as stored (None: none, the message stays unanswered), its
    tool calls, whether it was cut short (partial) and whether the client got it."""

    text: str | None = None
    tool_calls: list[dict] = field(default_factory=list)
    partial: bool = False
    delivered: bool = True

    @property
    def kind(self) -> str:
        """"reply", "partial", "undelivered" or "unanswered": what the stop of a server counts."""
        if not self.text:
            return "unanswered"
        return "partial" if self.partial else "reply" if self.delivered else "undelivered"


class _Message:
    """A user turn's requests under way in this process (a message sent again by its client before its
    reply came: a retry, a tool round), and whether its file is committed yet."""

    __slots__ = ("attempts", "uncommitted", "shared")

    def __init__(self, uncommitted: bool):
        self.attempts, self.uncommitted = 0, uncommitted
        self.shared = False  # a second request of the message came while the first was under way


_MESSAGES: dict[str, _Message] = {}  # by user turn id
_MESSAGES_LOCK = threading.Lock()
_TURN_LOCKS: dict[tuple, threading.Lock] = {}  # per (vault, conversation): a message's turn found or written


def _turn_lock(vault, conversation: str) -> threading.Lock:
    with _MESSAGES_LOCK:
        return _TURN_LOCKS.setdefault((str(vault.root), conversation), threading.Lock())


def _attempt(turn_id: str, created: bool) -> None:
    with _MESSAGES_LOCK:
        state = _MESSAGES.setdefault(turn_id, _Message(uncommitted=created))
        state.attempts += 1
        state.shared = state.shared or state.attempts > 1


def _attempt_done(turn_id: str) -> None:
    with _MESSAGES_LOCK:
        state = _MESSAGES.get(turn_id)
        if state is not None:
            state.attempts -= 1
            if state.attempts <= 0:
                del _MESSAGES[turn_id]


def _in_flight(turn_id: str) -> bool:
    with _MESSAGES_LOCK:
        state = _MESSAGES.get(turn_id)
        return state is not None and state.attempts > 0


def _uncommitted(turn_id: str) -> bool:
    with _MESSAGES_LOCK:
        state = _MESSAGES.get(turn_id)
        return state is not None and state.uncommitted


def _committed(turn_id: str) -> None:
    with _MESSAGES_LOCK:
        state = _MESSAGES.get(turn_id)
        if state is not None:
            state.uncommitted = False


def fitted(text: str) -> tuple[str, dict]:
    """A text as a turn stores it: all of it, or, over what a memory holds (files.MAX_MEMORY_BYTES), the
    first part that fits, with front matter saying so (`truncated`, `original_bytes`): a proxy forwards
    a message of any size the upstream takes, and keeps what fits."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= files.MAX_MEMORY_BYTES:
        return text, {}
    kept = encoded[:files.MAX_MEMORY_BYTES].decode("utf-8", "ignore").strip()
    return kept, {TRUNCATED: True, ORIGINAL_BYTES: len(encoded)}


def calls_text(calls: list[dict]) -> str:
    """The words a reply that is only tool calls is stored as (the calls themselves are in its front
    matter): what search and later prompts show of it."""
    return "\n".join(f"(called {c['name']}({c['arguments']}))" for c in calls)


class ChatTurn:
    """An exchange under way. Iterate it for the reply's pieces (the turns are stored when the
    reply ends), then call `finish()` for the memory upkeep and the result.

    Made by `Memvault.chat`, which has retrieved the memories and stored the user's turn.
    """

    def __init__(self, vault, cfg, message: str, options: ChatOptions, session: sessions.Session,
                 messages: list[dict] | dict, result: ChatResult, folded_until: datetime | None,
                 warn: Callable[[str], None], refresh: Callable[[], object] | None = None, reused: bool = False):
        self.vault, self.cfg, self.message, self.options = vault, cfg, message, options
        self.session, self.messages, self.result = session, messages, result  # messages: a proxy's whole request
        self._folded_until = folded_until
        self._warn = warn
        self._refresh = refresh or vault.index.catch_up
        self._reused = reused  # the message's turn was stored by an earlier request (a retry, a tool round)
        self._started = files.utcnow()
        self.now = options.now or self._started
        self._pieces = self._reply()
        self.received: list[str] = []  # the reply's text pieces so far
        self._whole: Any = None  # upstream.Reply: a proxy's reply once it has ended
        self._reading: Any = None  # upstream.Reading: a proxy's stream as read so far (its end seen or not)
        self.upstream_headers: dict = {}  # a proxy's: the upstream's response headers a client reads
        self._ended = False  # the model's reply came to its end
        # Called with the whole reply once the model has finished, before the turns are stored: a
        # server answers its client then, and stores while the response goes out.
        self.on_reply: Callable[[str], None] | None = None
        # What the client got (a proxy's face says so: Delivery); None: the reader of this turn got
        # what it read.
        self.delivery: Delivery | None = None
        # Called once the exchange's turns are written and indexed (searchable), before their commit.
        self.on_indexed: Callable[[], None] | None = None
        self._stored = False
        self._store_lock = threading.Lock()  # abandon() may store from another thread than the reader's
        self._finished = False

    def __iter__(self) -> Iterator[Any]:
        return self._pieces

    def _reply(self) -> Iterator[Any]:
        from memvault.store import llm

        pieces = self.received
        try:
            if self.options.forward is not None:
                yield from self._forwarded()
            elif self.options.stream:
                for piece in llm.chat_stream(self.cfg, self.messages, **self.options.llm_options):
                    pieces.append(piece)
                    yield piece
            else:
                pieces.append(llm.chat(self.cfg, self.messages, **self.options.llm_options))
                yield pieces[0]
        except LLMError:
            self._store(Outcome())
            raise
        except (GeneratorExit, KeyboardInterrupt):  # the reader left (a client hung up, Ctrl-C)
            self._store(self._outcome())
            raise
        self._ended = True
        if self.on_reply is not None:
            self.on_reply(self._reply_text())
        if self.delivery is not None:
            self.delivery.wait(SETTLE_WAIT)  # what the client got, said by the face that hands it on
        self._store(self._outcome())

    def _forwarded(self) -> Iterator[Any]:
        """The upstream's answer to the client's request (the memory block added), or its stream's
        events, as they came (store/upstream.py); the reply's text kept in `received`."""
        from memvault.store import upstream

        forward = self.options.forward
        dialect = forward.dialect.upstream(self.vault.settings)  # as it came, or translated by litellm
        cfg = dialect.config(self.cfg, self.vault.settings)  # its protocol's upstream
        if not forward.stream:
            answer = upstream.post(cfg, dialect, self.messages, forward.headers, forward.query)
            self.upstream_headers = answer.headers
            self._whole = dialect.reply_of(answer.data)
            self.received.append(self._whole.text)
            yield answer
            return
        reading = self._reading = dialect.reading()
        for event in upstream.stream(cfg, dialect, self.messages, reading, forward.headers,
                                     forward.query):
            self.upstream_headers = reading.headers
            if event.text:
                self.received.append(event.text)
            yield event
        self._whole = reading.reply()

    def _reply_text(self) -> str:
        from memvault.store.llm import strip_think

        return strip_think("".join(self.received))

    def _outcome(self) -> Outcome:
        """What to store, from what the model said and what the client got of it."""
        from memvault.store.llm import strip_think

        calls = list(self._whole.tool_calls) if self._ended and self._whole is not None else []
        whole = self._reply_text() if self._ended else None
        delivery = self.delivery
        if delivery is None:  # the caller read it: what it read
            if self._ended:
                return Outcome(whole or calls_text(calls) or None, calls)
            return Outcome(self._reply_text() or None, [], partial=True)
        sent = strip_think(delivery.text)
        if self._ended and (delivery.complete or (sent and sent == whole)):
            return Outcome(whole or calls_text(calls) or None, calls)
        if sent:  # cut short: exactly the text the client was sent
            return Outcome(sent, [], partial=True)
        if self._ended:  # the client got none of it
            return Outcome(whole or calls_text(calls) or None, calls, delivered=False)
        return Outcome()

    def close(self) -> None:
        """Stop reading the reply: what arrived (or what the client was sent) is kept, marked partial.
        Once the upstream's stream has said its end (`[DONE]`, `message_stop`) the reply is whole, and a
        client that leaves then got all of it: the stream is read to its close instead, and stored whole."""
        if self._reading is not None and self._reading.ended:
            for _ in self._pieces:  # what follows the end carries no reply (comments, the connection's close)
                pass
            return
        self._pieces.close()

    def abandon(self) -> str | None:
        """Store the reply as far as the client got it (partial), or the user's turn alone, unanswered,
        from any thread, while the reader may still be waiting for the model: for a server that must
        stop now. A store under way in the reader's thread is waited for instead; the reader's own
        store, if it comes later, does nothing. What this call stored (Outcome.kind), None if nothing."""
        return self._store(self._outcome())

    @property
    def stored(self) -> bool:
        """Whether the turns are stored (the reply complete, cut short or failed)."""
        return self._stored

    def _store(self, outcome: Outcome) -> str | None:
        with self._store_lock:
            if self._stored:
                return None
            self._stored = True
            try:
                wrote = self.vault.grouped("chat", lambda change: self._write(change, outcome))
            finally:
                _attempt_done(self.result.user_turn.id)
            result = self.result
            result.reply, result.partial, result.delivered = outcome.text or "", outcome.partial, outcome.delivered
            return outcome.kind if wrote else None

    def _write(self, change, outcome: Outcome) -> bool:
        """The exchange's files in `change` (a group's: Vault.grouped); whether it wrote any. One message,
        one reply: an earlier request's reply to this message is replaced by this one when the client got
        this one, and kept otherwise."""
        result, conversation, root = self.result, self.options.conversation, self.vault.root
        wrote = False
        if self.on_indexed is not None:
            change.after_index.append(self.on_indexed)
        if self.options.history is None and self.options.forward is None and \
                (self.session.fresh_reason or self._folded_until is not None):
            sessions.save(change, self.session, self.now, folded_until=self._folded_until,
                          start=self.now if self.session.fresh_reason else None)
            wrote = True
        turn = result.user_turn
        user = files.still_live(root, turn.path, turn.id) or turn
        fresh = _uncommitted(turn.id)  # its file not in git yet: this change adds it
        earlier = self._reply_so_far(user)
        if outcome.text:
            if earlier is None:
                text, cut = fitted(outcome.text)
                extra = {files.ORIGIN_KEY: "chat", **_reply_marks(outcome), **cut}
                answered_at = self.now + (files.utcnow() - self._started)
                result.assistant_turn = change.add(files.new_memory(text, "assistant", conversation,
                                                                    created_at=answered_at, extra=extra))
                wrote = True
            elif outcome.delivered:
                calls = outcome.tool_calls
                if self.options.forward is not None and self.options.forward.tool_round:
                    calls = list(earlier.extra.get(TOOL_CALLS) or []) + calls  # the calls made on the way
                earlier.text, cut = fitted(outcome.text)
                for key in (DELIVERED, TOOL_CALLS, "partial", TRUNCATED, ORIGINAL_BYTES):
                    earlier.extra.pop(key, None)
                earlier.extra.update({**_reply_marks(Outcome(outcome.text, calls, outcome.partial)), **cut})
                result.assistant_turn = change.rewrite(earlier)
                wrote = True
            else:  # the client got an earlier reply (or neither): that one stays the message's reply
                result.assistant_turn = earlier
            if wrote:
                change.title = ("exchange" if outcome.kind == "reply" else "partial reply" if outcome.partial
                                else "reply not delivered") + f" ({conversation})"
        answered = bool(outcome.text) or earlier is not None
        if answered and user.extra.get("unanswered"):
            user.extra.pop("unanswered")
            change.add(user, user.path) if fresh else change.rewrite(user, bookkeeping=True)
            wrote = True
        elif fresh:
            change.add(user, user.path)  # the message alone, unanswered
            change.title = change.title or f"unanswered message ({conversation})"
            wrote = True
        result.user_turn = user
        _committed(turn.id)
        return wrote

    def _reply_so_far(self, user: files.Memory) -> files.Memory | None:
        """The reply an earlier request of this message stored (a retry's, a tool round's first), if any:
        the conversation's newest assistant turn, when it is newer than the message's turn."""
        if not self._reused and not _shared(user.id):
            return None
        return reply_after(self.vault, self.options.conversation, user)

    def finish(self) -> ChatResult:
        """Read the rest of the reply, then learn from the user's words (unless learn is off):
        model calls without the lock, then one commit. A failure of the upkeep is recorded in
        `upkeep_error` and never costs the reply."""
        for _ in self._pieces:
            pass
        if self._finished:
            return self.result
        self._finished = True
        settings, result = self.vault.settings, self.result
        if not result.reply or result.partial:
            result.learned.skipped = "the reply was cut short" if result.partial else "no reply"
            return result
        answered_at = result.assistant_turn.created_at if result.assistant_turn is not None else self.now
        per_message = settings.extraction_mode == "message"  # else learning waits for the episode to close
        if not self.options.learn:
            result.learned.skipped = "learning is off for this message"
        elif not per_message:
            result.learned.skipped = "learned from when its episode closes (extraction_mode predict-calibrate)"
        try:
            learned_something = False
            if self.options.learn and per_message:
                # A turn that teaches nothing is marked in the index's record, not in a commit of its own.
                learner = learn.Learner(self.vault, self.cfg, "chat", warn=self._warn, quietly=True)
                result.learned = learner.message(self.message, self.options.conversation, now=answered_at,
                                                 turn=result.user_turn, mark=True, commit_empty=False)
                learned_something = learner.committed  # its change evicted too
            if not learned_something and _may_be_over(self.vault, self.options.conversation, settings.max_entries):
                with self.vault.change("chat") as change:  # a commit only when something was evicted
                    change.evict(self.options.conversation, settings.max_entries, now=answered_at)
                result.learned.events += change.events  # each eviction shown, as learning's events are
            if self.options.learn:  # episodes that closed before this exchange (docs/design.md, "Episodes")
                from memvault.learning import episodes

                result.episodes = episodes.close(self.vault, self.cfg, self.options.conversation, now=answered_at,
                                                 refresh=self._refresh, warn=self._warn, command="chat",
                                                 limit=episodes.EPISODES_PER_CHAT)
        except LLMError as exc:
            result.upkeep_error = str(exc)
            result.learned.error = f"learning failed: {exc}; the turn waits for `memvault learn`"
        return result


def _may_be_over(vault, conversation: str, max_entries: int) -> bool:
    """Whether the conversation may hold more than max_entries memories memvault wrote (eviction may
    have work): its turn and fact files counted by name, none read (what Change.evict reads them all for)."""
    base = vault.entries / files.conversation_slug(conversation)
    count = 0
    for folder in ("turns/user", "turns/assistant", "facts"):
        try:
            count += sum(1 for entry in os.scandir(base / folder) if entry.name.endswith(".md"))
        except OSError:
            continue
    return count > max_entries


def _reply_marks(outcome: Outcome) -> dict:
    """A stored reply's front matter of its own: cut short, not received, the tools it called."""
    marks: dict = {}
    if outcome.partial:
        marks["partial"] = True
    if not outcome.delivered:
        marks[DELIVERED] = False
    if outcome.tool_calls:
        marks[TOOL_CALLS] = [{"name": c["name"], "arguments": c["arguments"]} for c in outcome.tool_calls]
    return marks


def _shared(turn_id: str) -> bool:
    """Whether another request of the same message came while this one was under way (a retry): it may
    have stored the message's reply already."""
    with _MESSAGES_LOCK:
        state = _MESSAGES.get(turn_id)
        return state is not None and state.shared


def reply_after(vault, conversation: str, user: files.Memory) -> files.Memory | None:
    """The reply stored to a user turn: the conversation's newest assistant turn, if it is newer than the
    turn (one message, one reply: a later message's turn would be the newest user turn)."""
    from memvault.reading import listing

    newest = listing.newest(vault.entries, conversation, limit=1, roles=("assistant",), on_error=lambda exc: None)
    return newest[0] if newest and newest[0].created_at >= user.created_at else None


def begin(vault, message: str, options: ChatOptions,
          search: Callable[[str, int, datetime, datetime | None, tuple[str, ...]], list[Result]],
          warn: Callable[[str], None], refresh: Callable[[], object] | None = None) -> ChatTurn:
    """`Memvault.chat`: the message and the options checked before any model runs (an empty message,
    one that could not be stored, a bad conversation id or model), the LLM of the settings (or the
    model asked for), then `start`."""
    from memvault.errors import NothingGiven
    from memvault.store.config import coerce
    from memvault.store.llm import LLMConfig

    files.check_conversation_id(options.conversation)
    message = (message or "").strip()
    if not message:
        raise NothingGiven("nothing to send: the message is empty", params="message")
    files.check_text(message, "message")  # refuse what could not be stored before any model runs (a text
    # over a memory's size is stored as far as it fits: fitted)
    cfg = LLMConfig.from_settings(vault.settings)
    if options.model is not None:
        cfg = LLMConfig(**{**cfg.__dict__, "model": coerce("llm_model", options.model, "option model", param="model")})
    return start(vault, cfg, message, options, search, warn=warn, refresh=refresh)


def start(vault, cfg, message: str, options: ChatOptions,
          search: Callable[[str, int, datetime, datetime | None, tuple[str, ...]], list[Result]],
          warn: Callable[[str], None], refresh: Callable[[], object] | None = None) -> ChatTurn:
    """Prepare an exchange: the session (folding old turns: a model call), the memories, the
    messages, and the user's turn on disk. Nothing here holds the lock for long."""
    from memvault.store import llm, secret_scan
    from memvault.learning import prompts
    from memvault.learning.summaries import read_rolling_summary, written_at

    settings = vault.settings
    conversation = options.conversation
    now = options.now or files.utcnow()
    result = ChatResult(conversation)
    folded: list[files.Memory] = []
    client_keeps = options.history is not None or options.forward is not None  # the client keeps the conversation
    again = bool(options.after_user) or options.resent or bool(options.forward and options.forward.tool_round)
    if client_keeps:  # no session of ours
        session = sessions.Session(conversation)
    else:
        session = sessions.load(vault, conversation, now, settings.hard_decay_minutes)
        result.session_note = session.fresh_reason
        if session.fresh_reason and (session.record is None or session.record.text == "(empty)"):
            session.fresh_reason = None  # nothing to reset
        if session.fresh_reason:
            session.summary = ""

        def summarize(transcript: str, previous: str | None) -> str:
            return llm.strip_think(llm.chat(cfg, prompts.summary_messages("session", transcript, previous=previous)))

        folded = sessions.fold(session, now, settings.soft_decay_minutes, settings.max_session_tokens, summarize)
        result.folded = len(folded)
    stored_text, cut = fitted(message)
    if options.use_memory:
        # This message's own turn, stored by its first request (a tool round, a retry): not a memory of itself.
        own = same_message(vault, conversation, stored_text, again) if client_keeps else None
        # ... nor the reply stored to it so far (a tool round's calls: the client sends them itself).
        earlier = reply_after(vault, conversation, own) if own is not None else None
        skip = tuple(m.id for m in (own, earlier) if m is not None)
        top_k = options.top_k or settings.default_top_k
        # The session's turns go to the model word for word: the search leaves out the conversation's
        # turns from the session's first on (asking for top_k + their number instead, and dropping them
        # after, made a long session's every message slow: 430 turns, 1.3 s a search).
        since = min((t.created_at for t in session.turns), default=None)
        found = search(message, top_k, now, since, skip)
        # A message without its reply, a reply its client never got: not what the conversation said.
        result.memories = [r for r in found if not r.meta.get("unanswered") and r.meta.get(DELIVERED) is not False
                           ][:top_k]
    summary = read_rolling_summary(vault, conversation)
    # A memory from before secrets were withheld, or a hand edit not taken in yet, goes to the model as a placeholder
    summary_text = secret_scan.for_prompt(vault, result.memories, summary.text if summary else None)
    if options.forward is not None:
        forward = options.forward
        block = memory_block(result.memories, summary_text, now, written_at(summary))
        messages: list[dict] | dict = forward.dialect.with_block(forward.body, forward.at, block) if block \
            else forward.body
    else:
        messages = build_messages(message, result.memories, summary_text, session, options.history,
                                  options.user_message, now=now, summary_written=written_at(summary),
                                  after_user=options.after_user)
    # The user's words are on disk before the model is asked (indexed and committed with the reply,
    # which rewrites the file anyway: it loses its `unanswered` mark).
    # `extracted: false`: learning is owed to it until the commit of what it taught marks it true, so
    # a server stopped before its upkeep, a reply cut short or an LLM that was down loses nothing
    # (`memvault learn`, and every serve / mcp start, catch up).
    waiting = {files.EXTRACTED: False} if options.learn else {}
    # The check and the write as one, per conversation: a retry that comes while its first copy is
    # still on its way here (a search under load) finds that copy's turn, or the first copy finds the
    # retry's. Other conversations do not wait for it.
    with _turn_lock(vault, conversation):
        result.user_turn = same_message(vault, conversation, stored_text, again) if client_keeps else None
        reused = result.user_turn is not None
        if not reused:
            result.user_turn = files.new_memory(stored_text, "user", conversation, created_at=now,
                                                extra={files.ORIGIN_KEY: "chat", "unanswered": True, **waiting, **cut})
            vault.write_aside("chat", result.user_turn)
        _attempt(result.user_turn.id, created=not reused)
    turn_options = dataclasses.replace(options, now=now)
    return ChatTurn(vault, cfg, message, turn_options, session, messages, result,
                    folded[-1].created_at if folded else None, warn, refresh, reused=reused)


def same_message(vault, conversation: str, message: str, again: bool) -> files.Memory | None:
    """The user's turn this message already is, for a client that sends its conversation itself
    (serve): the conversation's newest user turn, with the same text, while its reply is not one the
    client got: still unanswered, a request of it under way in this process, or answered with a reply
    the client never received (`delivered: false`): the client's retry. Or answered, when this request
    is the same message again (again: its tool round, the client sending the tool results back, or a
    retry the client marks, whose first reply came after it gave up). One message, one turn."""
    from memvault.reading import listing

    newest = listing.newest(vault.entries, conversation, limit=1, roles=("user",), on_error=lambda exc: None)
    if not newest or newest[0].text.strip() != message.strip():
        return None
    turn = newest[0]
    if again or turn.extra.get("unanswered") or _in_flight(turn.id):
        return turn
    reply = reply_after(vault, conversation, turn)
    return turn if reply is not None and reply.extra.get(DELIVERED) is False else None


def clear_session(vault, conversation: str, now: datetime | None = None) -> None:
    """Start a fresh session: later chats do not see the earlier turns (memories still apply)."""
    now = now or files.utcnow()
    with vault.change("chat") as change:
        session = sessions.load(vault, conversation, now, vault.settings.hard_decay_minutes)
        session.summary = ""
        sessions.save(change, session, now, start=now)
        change.title = f"new session ({conversation})"
