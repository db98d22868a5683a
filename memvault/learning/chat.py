"""One chat exchange with memory (docs/design.md, "Chat"): retrieve, build the messages, stream
the reply, store both turns, then learn from the user's words.

The vault lock is held only while files are written and committed, never while the model
answers or thinks, so another command (a cron `add`, a search, a second chat) goes on meanwhile:

1. before the model is asked, the user's turn is written with `unanswered: true` (not yet
   committed), so a failed or killed reply never loses the user's words;
2. when the reply is complete, the assistant's turn is written, the user's turn loses the mark,
   and both are committed together (a failed reply commits the marked turn alone; a reply cut
   short by the reader keeps what arrived, marked `partial: true`);
3. `finish()` runs the memory upkeep (extract, reconcile, summarize, evict): model calls
   without the lock, then one more commit of what was learned.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterator

from memvault.store import files
from memvault.learning import learn, sessions
from memvault.errors import LLMError
from memvault.reading.retrieval import Result, injection_block

SYSTEM_PROMPT = (
    "You are a helpful assistant with a long-term memory of the user. "
    "Answer the user's message directly and concisely. Use the background memory below only where it is "
    "relevant; do not mention it otherwise."
)

_TURN_START = threading.Lock()  # a user's turn looked for and written as one step (start)


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
    # A proxy's pass-through (docs/design.md, "The library API and its faces": serve): iterating the turn gives the upstream's
    # objects in OpenAI's shape (the response, or its chunks: tool calls, usage, log-probabilities),
    # not text; llm_options are then every field the client sent. What is stored is the text alone.
    upstream_objects: bool = False
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
    # Nothing found and no summary: no block at all (a header alone tells the model nothing).
    block = injection_block(results, summary, today=now, summary_written=summary_written) \
        if results or (summary and summary.strip()) else None
    if history is not None:
        memory = [{"role": "system", "content": block}] if block else []
        return [*history, *memory, user_message or {"role": "user", "content": message}, *(after_user or [])]
    system = SYSTEM_PROMPT + ("\n\n" + block if block else "")
    if session.summary:
        system += "\n\nEarlier in this chat (summary):\n" + session.summary
    return [{"role": "system", "content": system}, *session.messages(), {"role": "user", "content": message}]


class ChatTurn:
    """An exchange under way. Iterate it for the reply's pieces (the turns are stored when the
    reply ends), then call `finish()` for the memory upkeep and the result.

    Made by `Memvault.chat`, which has retrieved the memories and stored the user's turn.
    """

    def __init__(self, vault, cfg, message: str, options: ChatOptions, session: sessions.Session,
                 messages: list[dict], result: ChatResult, folded_until: datetime | None,
                 warn: Callable[[str], None], refresh: Callable[[], object] | None = None):
        self.vault, self.cfg, self.message, self.options = vault, cfg, message, options
        self.session, self.messages, self.result = session, messages, result
        self._folded_until = folded_until
        self._warn = warn
        self._refresh = refresh or vault.index.catch_up
        self._started = files.utcnow()
        self.now = options.now or self._started
        self._pieces = self._reply()
        self.received: list[str] = []  # the reply's pieces so far
        # Called with the whole reply once the model has finished, before the turns are stored: a
        # server answers its client then, and stores while the response goes out.
        self.on_reply: Callable[[str], None] | None = None
        self._stored = False
        self._store_lock = threading.Lock()  # abandon() may store from another thread than the reader's
        self._finished = False

    def __iter__(self) -> Iterator[str]:
        return self._pieces

    def _reply(self) -> Iterator[str]:
        from memvault.store import llm

        pieces = self.received
        try:
            if self.options.upstream_objects:
                yield from self._upstream_objects()
            elif self.options.stream:
                for piece in llm.chat_stream(self.cfg, self.messages, **self.options.llm_options):
                    pieces.append(piece)
                    yield piece
            else:
                pieces.append(llm.chat(self.cfg, self.messages, **self.options.llm_options))
                yield pieces[0]
        except LLMError:
            self._store(None)
            raise
        except (GeneratorExit, KeyboardInterrupt):  # the reader left (a client hung up, Ctrl-C)
            self._store("".join(pieces).strip() or None, partial=True)
            raise
        reply = "".join(pieces).strip()
        if self.on_reply is not None:
            self.on_reply(reply)
        self._store(reply)

    def _upstream_objects(self) -> Iterator[dict]:
        """The upstream's response (or its chunks) as it is; the text of its content kept in
        `received`, which is what is stored (tool calls are the client's business, not memories)."""
        from memvault.store import llm

        if not self.options.stream:
            response = llm.completion(self.cfg, self.messages, **self.options.llm_options)
            choices = response.get("choices") or [{}]
            self.received.append(choices[0].get("message", {}).get("content") or "")
            yield response
            return
        for chunk in llm.completion_chunks(self.cfg, self.messages, **self.options.llm_options):
            choices = chunk.get("choices") or []
            if choices and choices[0].get("index", 0) == 0 and (choices[0].get("delta") or {}).get("content"):
                self.received.append(choices[0]["delta"]["content"])
            yield chunk

    def close(self) -> None:
        """Stop reading the reply: what arrived is kept, marked partial."""
        self._pieces.close()

    def abandon(self) -> bool:
        """Store what arrived so far, marked partial (or the user's turn alone, unanswered), from any
        thread, while the reader may still be waiting for the model: for a server that must stop
        now. A store under way in the reader's thread is waited for instead; the reader's own store,
        if it comes later, does nothing. Whether this call stored the turns."""
        return self._store("".join(self.received).strip() or None, partial=True)

    @property
    def stored(self) -> bool:
        """Whether the turns are stored (the reply complete, cut short or failed)."""
        return self._stored

    def _store(self, reply: str | None, partial: bool = False) -> bool:
        with self._store_lock:
            if self._stored:
                return False
            self._stored = True
            self._write(reply, partial)
            return True

    def _write(self, reply: str | None, partial: bool) -> None:
        result, conversation = self.result, self.options.conversation
        answered_at = self.now + (files.utcnow() - self._started)
        with self.vault.change("chat") as change:
            if self.options.history is None and (self.session.fresh_reason or self._folded_until is not None):
                sessions.save(change, self.session, self.now, folded_until=self._folded_until,
                              start=self.now if self.session.fresh_reason else None)
            user = result.user_turn
            if reply:
                user.extra.pop("unanswered", None)
                extra = {files.ORIGIN_KEY: "chat", **({"partial": True} if partial else {})}
                result.assistant_turn = change.add(files.new_memory(reply, "assistant", conversation,
                                                                    created_at=answered_at, extra=extra))
            change.rewrite(user)
            change.title = (f"{'partial reply' if partial else 'exchange'} ({conversation})" if reply
                            else f"unanswered message ({conversation})")
        result.reply, result.partial = reply or "", partial

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
        answered_at = result.assistant_turn.created_at
        per_message = settings.extraction_mode == "message"  # else learning waits for the episode to close
        if not self.options.learn:
            result.learned.skipped = "learning is off for this message"
        elif not per_message:
            result.learned.skipped = "learned from when its episode closes (extraction_mode predict-calibrate)"
        try:
            if self.options.learn and per_message:
                learner = learn.Learner(self.vault, self.cfg, "chat", warn=self._warn)
                result.learned = learner.message(self.message, self.options.conversation, now=answered_at,
                                                 turn=result.user_turn, mark=True)
            else:
                with self.vault.change("chat") as change:
                    change.evict(self.options.conversation, settings.max_entries, now=answered_at)
            if self.options.learn:  # episodes that closed before this exchange (docs/design.md, "Episodes")
                from memvault.learning import episodes

                result.episodes = episodes.close(self.vault, self.cfg, self.options.conversation, now=answered_at,
                                                 refresh=self._refresh, warn=self._warn, command="chat",
                                                 limit=episodes.EPISODES_PER_CHAT)
        except LLMError as exc:
            result.upkeep_error = str(exc)
            result.learned.error = f"learning failed: {exc}; the turn waits for `memvault learn`"
        return result


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
    files.new_memory(message, "user", options.conversation)  # refuse what could not be stored
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
    if options.history is not None:  # the client keeps the conversation: no session of ours
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
    if options.use_memory:
        # This message's own turn, stored by its first request (a tool round, a retry): not a memory of itself.
        own = same_message(vault, conversation, message, bool(options.after_user) or options.resent) \
            if options.history is not None else None
        top_k = options.top_k or settings.default_top_k
        # The session's turns go to the model word for word: the search leaves out the conversation's
        # turns from the session's first on (asking for top_k + their number instead, and dropping them
        # after, made a long session's every message slow: 430 turns, 1.3 s a search).
        since = min((t.created_at for t in session.turns), default=None)
        found = search(message, top_k, now, since, (own.id,) if own is not None else ())
        result.memories = [r for r in found if not r.meta.get("unanswered")][:top_k]
    summary = read_rolling_summary(vault, conversation)
    # A memory from before secrets were withheld, or a hand edit not taken in yet, goes to the model as a placeholder
    summary_text = secret_scan.for_prompt(vault, result.memories, summary.text if summary else None)
    messages = build_messages(message, result.memories, summary_text, session, options.history,
                              options.user_message, now=now, summary_written=written_at(summary),
                              after_user=options.after_user)
    # The user's words are on disk before the model is asked (indexed and committed with the reply,
    # which rewrites the file anyway: it loses its `unanswered` mark).
    # `extracted: false`: learning is owed to it until the commit of what it taught marks it true, so
    # a server stopped before its upkeep, a reply cut short or an LLM that was down loses nothing
    # (`memvault learn`, and every serve / mcp start, catch up).
    waiting = {files.EXTRACTED: False} if options.learn else {}
    # The check and the write as one: a retry that comes while its first copy is still on its way
    # here (a search under load) finds that copy's turn, or the first copy finds the retry's.
    with _TURN_START:
        result.user_turn = same_message(vault, conversation, message, bool(options.after_user) or options.resent) \
            if options.history is not None else None
        if result.user_turn is None:
            result.user_turn = files.new_memory(message, "user", conversation, created_at=now,
                                                extra={files.ORIGIN_KEY: "chat", "unanswered": True, **waiting})
            with vault.change("chat", commit=False, index=False) as change:
                change.add(result.user_turn)
    turn_options = dataclasses.replace(options, now=now)
    return ChatTurn(vault, cfg, message, turn_options, session, messages, result,
                    folded[-1].created_at if folded else None, warn, refresh)


def same_message(vault, conversation: str, message: str, again: bool) -> files.Memory | None:
    """The user's turn this message already is, for a client that sends its conversation itself
    (serve): the conversation's newest user turn, with the same text, still unanswered (a client's
    retry of a message whose reply failed or is still coming), or answered when this request is
    the same message again (again: its tool round, the client sending the tool results back, or a
    retry the client marks, whose first reply came after it gave up). One message, one turn."""
    from memvault.reading import listing

    newest = listing.newest(vault.entries, conversation, limit=1, roles=("user",), on_error=lambda exc: None)
    if not newest or newest[0].text.strip() != message.strip():
        return None
    turn = newest[0]
    return turn if again or turn.extra.get("unanswered") else None


def clear_session(vault, conversation: str, now: datetime | None = None) -> None:
    """Start a fresh session: later chats do not see the earlier turns (memories still apply)."""
    now = now or files.utcnow()
    with vault.change("chat") as change:
        session = sessions.load(vault, conversation, now, vault.settings.hard_decay_minutes)
        session.summary = ""
        sessions.save(change, session, now, start=now)
        change.title = f"new session ({conversation})"
