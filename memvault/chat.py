"""One chat turn with memory (SPEC sections 4.6 and 6): retrieve, build the messages,
stream the reply, persist both turns, then run the memory upkeep after the reply.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from memvault import files, learn, sessions
from memvault.index import Index
from memvault.retrieval import CANDIDATE_ROLES, Query, Result, injection_block, load_reranker, search

SYSTEM_PROMPT = (
    "You are a helpful assistant with a long-term memory of the user. "
    "Answer the user's message directly and concisely. Use the background memory below only where it is "
    "relevant; do not mention it otherwise."
)


@dataclass
class ChatOptions:
    conversation: str = files.DEFAULT_CONVERSATION
    learn: bool = True
    use_memory: bool = True
    stream: bool = True
    now: datetime | None = None
    top_k: int | None = None


@dataclass
class ChatResult:
    reply: str = ""
    memories: list[Result] = field(default_factory=list)
    learned: learn.Learned | None = None
    user_turn: files.Memory | None = None
    folded: int = 0
    session_note: str | None = None
    upkeep_error: str | None = None


def build_messages(message: str, results: list[Result], summary: str | None, session: sessions.Session) -> list[dict]:
    system = SYSTEM_PROMPT + "\n\n" + injection_block(results, summary)
    if session.summary:
        system += "\n\nEarlier in this chat (summary):\n" + session.summary
    return [{"role": "system", "content": system}, *session.messages(), {"role": "user", "content": message}]


def chat_turn(vault, message: str, options: ChatOptions, write: Callable[[str], None],
              warn: Callable[[str], None] | None = None) -> ChatResult:
    """Run one turn. LLMError from the reply propagates after the user turn was stored."""
    from memvault import llm, prompts

    warn = warn or (lambda m: sys.stderr.write(m + "\n"))
    settings = vault.settings
    cfg = learn.llm_config(settings)
    started = files.utcnow()
    now = options.now or started
    conversation = options.conversation
    result = ChatResult()
    index = Index(vault, notice=warn)
    reranker = None
    if options.use_memory:
        reranker = load_reranker(settings, warn=lambda m: warn(f"memvault: {m}"))

    with vault.change("chat") as change:
        index.sync()
        session = sessions.load(vault, conversation, now, settings.hard_decay_minutes)
        if session.fresh_reason and session.record is not None and session.record.text != "(empty)":
            session.summary = ""
            sessions.save(change, session, now, start=now)
        result.session_note = session.fresh_reason

        def summarize(transcript: str, previous: str | None) -> str:
            return llm.strip_think(llm.chat(cfg, prompts.summary_messages("session", transcript, previous=previous)))

        folded = sessions.fold(session, now, settings.soft_decay_minutes, settings.max_session_tokens, summarize)
        if folded:
            sessions.save(change, session, now, folded_until=folded[-1].created_at)
            result.folded = len(folded)

        if options.use_memory:
            in_session = {t.id for t in session.turns}
            top_k = options.top_k or settings.default_top_k
            query = Query(text=message, top_k=top_k + len(in_session), conversation=conversation,
                          roles=CANDIDATE_ROLES, now=now, recency_weight=settings.recency_weight,
                          mmr_lambda=settings.mmr_lambda, threshold=settings.score_threshold)
            found = search(index, query, reranker).results
            result.memories = [r for r in found if r.id not in in_session][:top_k]
        summary = learn.read_rolling_summary(vault, conversation)
        messages = build_messages(message, result.memories, summary.text if summary else None, session)

        # The user's words are kept even if the model never answers.
        result.user_turn = change.add(files.new_memory(message, "user", conversation, created_at=now))
        pieces: list[str] = []
        if options.stream:
            for piece in llm.chat_stream(cfg, messages):
                pieces.append(piece)
                write(piece)
        else:
            pieces.append(llm.chat(cfg, messages))
            write(pieces[0])
        result.reply = "".join(pieces).strip()
        answered_at = now + (files.utcnow() - started)
        if result.reply:
            change.add(files.new_memory(result.reply, "assistant", conversation, created_at=answered_at))

        # Upkeep runs after the reply is out; its failures never cost the reply.
        try:
            if options.learn:
                result.learned = learn.learn(change, index, cfg, message, conversation, now=answered_at,
                                             summarize=settings.enable_summarization,
                                             max_entries=settings.max_entries, warn=warn,
                                             reconcile_mode=settings.reconcile_mode)
            else:
                change.evict(conversation, settings.max_entries, now=answered_at)
        except llm.LLMError as exc:
            result.upkeep_error = str(exc)
    return result


def clear_session(vault, conversation: str, now: datetime | None = None) -> None:
    """Start a fresh session: later chats do not see the earlier turns (memories still apply)."""
    now = now or files.utcnow()
    with vault.change("chat") as change:
        session = sessions.load(vault, conversation, now, vault.settings.hard_decay_minutes)
        session.summary = ""
        sessions.save(change, session, now, start=now)
        change.title = f"new session ({conversation})"
