"""Summaries of a conversation: the rolling summary (its file, its updates) and `summarize`.

The rolling summary is one file per conversation, entries/<c>/summaries/summary.md (role
summary, summary_kind rolling), whose id stays the same across updates. It is updated after
new facts are learned, or by `summarize`, which can also rebuild it from every entry with a
depth chosen by size (docs/design.md, "The write path": Summaries): under 100 tokens none; under 500 one
sentence; under 3,000 a paragraph; under 15,000 chunk summaries (L1) plus a meta-summary;
above that chunks (L1), groups of ~5 chunk summaries (L2), and a final summary over the groups.

Every function that asks the model writes nothing: it returns a plan, and `write` stores the
plan inside a Vault.change, so the vault lock is never held while a model thinks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from memvault.store import files
from memvault.store.files import Memory
from memvault.learning.prompts import estimate_tokens

CHUNK_TOKENS = 1500
GROUP_SIZE = 5
CONTENT_ROLES = ("memory", "note", "decision", "user", "assistant")
# What a rolling update reads: the knowledge, not the chat that produced it.
KNOWLEDGE_ROLES = ("memory", "note", "decision")


# -- the rolling summary's file ------------------------------------------------------------

def summary_path(vault, conversation: str) -> Path:
    return vault.entries / files.conversation_slug(conversation) / "summaries" / "summary.md"


def read_rolling_summary(vault, conversation: str) -> Memory | None:
    """The rolling summary in use: None when there is none, or when it is set aside (`stale`)."""
    summary = summary_file(vault, conversation)
    return None if summary is None or summary.extra.get(STALE) else summary


def written_at(summary: Memory | None):
    """When a rolling summary was last written (its updated_at, else its created_at); None without one."""
    if summary is None:
        return None
    return summary.extra.get("updated_at") or summary.created_at


def summary_file(vault, conversation: str) -> Memory | None:
    """The rolling summary's file as it is, set aside or not."""
    return files.read_optional(summary_path(vault, conversation), vault.root)


def write_rolling_summary(change, conversation: str, text: str, now: datetime | None = None, **extra) -> Memory:
    """Create or rewrite the rolling summary; its id stays stable across updates."""
    current = summary_file(change.vault, conversation)
    stamp = files.format_time(now or files.utcnow())
    if current is not None:
        current.text = text.strip()
        for key in (STALE, STALE_SINCE):
            current.extra.pop(key, None)
        current.extra.update(summary_kind="rolling", updated_at=stamp, **extra)
        return change.rewrite(current)
    memory = files.new_memory(text, "summary", conversation, created_at=now or files.utcnow(),
                              extra={"summary_kind": "rolling", "updated_at": stamp, **extra})
    return change.add(memory)


# -- the summary follows the facts (docs/design.md, "The write path") ----------------------------
# The rolling summary is folded by a model, so it cannot be edited to drop one fact. When a fact it
# may state leaves (removed, rejected in review, undone, replaced without a fold that says so), the
# summary is set aside in the same commit: marked `stale`, kept in its file and in git, no longer
# injected nor shown; the next fold (the next learning, or `summarize`) writes it again from the
# live facts. No model is needed for that, so `rm` and `undo` work with the LLM down.

STALE = "stale"
STALE_SINCE = "stale_since"


def may_state(summary: Memory, memory: Memory) -> bool:
    """Whether the summary may state the memory: it is knowledge and the summary was written since
    the memory was made (a summary older than a fact cannot hold it)."""
    if memory.role not in KNOWLEDGE_ROLES:
        return False
    stamp = summary.extra.get("updated_at") or summary.created_at
    try:
        written = files.parse_time(stamp)
    except ValueError:
        return True
    return written >= memory.created_at


def states_any(text: str, memories: list[Memory]) -> bool:
    """Whether a sentence of `text` still says all that one of the memories says (same words, same
    polarity): a fold told a fact is gone that kept it anyway."""
    import re

    from memvault.learning.extraction import _carries

    sentences = [part for part in re.split(r"(?<=[.!?;])\s+|\n+", text or "") if part.strip()]
    return any(_carries(sentence, memory.text) for memory in memories for sentence in sentences)


def set_aside(change, conversation: str, gone: list[Memory], now: datetime | None = None,
              force: bool = False) -> Memory | None:
    """Mark the conversation's rolling summary stale in `change` when it may state one of the
    memories that are gone (force: it does). Returns the summary set aside, or None."""
    current = read_rolling_summary(change.vault, conversation)
    if current is None or not gone or not (force or any(may_state(current, m) for m in gone)):
        return None
    current.extra[STALE] = True
    current.extra[STALE_SINCE] = files.format_time(now or files.utcnow())
    return change.rewrite(current)


# A summary set aside is written again by the next learning from at most this many tokens of live
# facts; a conversation with more waits for `summarize --rebuild` (depth by size).
REFOLD_TOKENS = CHUNK_TOKENS


def knowledge(vault, conversation: str, exclude: set = frozenset()) -> list[str] | None:
    """The texts of the conversation's live facts, notes and decisions, oldest first (none of the
    ids in `exclude`); None when they are over REFOLD_TOKENS."""
    texts = [" ".join(m.text.split()) for m in _entries(vault, conversation, KNOWLEDGE_ROLES) if m.id not in exclude]
    return texts if estimate_tokens("\n".join(texts)) <= REFOLD_TOKENS else None


def fold_in(cfg, previous: str | None, facts: list[str], gone: list[str] = ()) -> tuple[str, int]:
    """The rolling summary with new facts merged in and facts no longer true dropped (one LLM
    call). Returns (text, input tokens); an empty text means the model gave nothing usable."""
    from memvault.store import llm
    from memvault.learning import prompts

    lines = "\n".join(f"- {f}" for f in facts) + "".join(f"\n- (no longer true) {g}" for g in gone)
    text = llm.strip_think(llm.chat(cfg, prompts.summary_messages("rolling", lines, previous=previous))).strip()
    return text, estimate_tokens(lines)


# -- summarize ---------------------------------------------------------------------------------

@dataclass
class SummaryOutcome:
    """What `summarize` found or made. kind: none, one_sentence, paragraph, chunked, tree (a rebuild),
    rolling (an update), unchanged (nothing new since the last update)."""

    kind: str
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    levels: dict[str, int] = field(default_factory=dict)  # "L1": 12, "L2": 3
    conversation: str = files.DEFAULT_CONVERSATION
    style: str | None = None
    # The L1/L2 summaries of a rebuild, to be stored: (kind, level, part number, text, input tokens).
    parts: list[tuple[str, int, int, str, int]] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        return {"conversation_id": self.conversation, "kind": self.kind, "text": self.text,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "levels": self.levels}


def depth_for(tokens: int) -> str:
    if tokens < 100:
        return "none"
    if tokens < 500:
        return "one_sentence"
    if tokens < 3000:
        return "paragraph"
    if tokens < 15000:
        return "chunked"
    return "tree"


def _entries(vault, conversation: str, roles=CONTENT_ROLES) -> list[Memory]:
    entries = list(vault.iter_memories(conversation, roles=roles))
    entries.sort(key=lambda m: (m.created_at, m.id))
    return entries


def chunk_lines(lines: list[str], budget: int = CHUNK_TOKENS) -> list[str]:
    """Consecutive lines packed into chunks of about `budget` tokens; an entry is never split
    unless it alone is over budget."""
    chunks, current, size = [], [], 0
    for line in lines:
        cost = estimate_tokens(line)
        if current and size + cost > budget:
            chunks.append("\n".join(current))
            current, size = [], 0
        if cost > budget:
            step = budget * 4
            chunks.extend(line[i:i + step] for i in range(0, len(line), step))
            continue
        current.append(line)
        size += cost
    if current:
        chunks.append("\n".join(current))
    return chunks


def plan_rebuild(vault, cfg, conversation: str, style: str = "conversation") -> SummaryOutcome:
    """A new summary from every live entry, depth chosen by size (LLM calls; writes nothing)."""
    from memvault.store import llm
    from memvault.learning import prompts

    lines = [f"[{m.role}] {' '.join(m.text.split())}" for m in _entries(vault, conversation)]
    text = "\n".join(lines)
    tokens = estimate_tokens(text)
    kind = depth_for(tokens)
    outcome = SummaryOutcome(kind=kind, input_tokens=tokens, conversation=conversation, style=style)
    if kind == "none":
        return outcome

    def ask(prompt_kind: str, body: str) -> str:
        return llm.strip_think(llm.chat(cfg, prompts.summary_messages(prompt_kind, body, style=style))).strip()

    if kind in ("one_sentence", "paragraph"):
        outcome.text = ask(kind, text)
    else:
        top = []
        for number, chunk in enumerate(chunk_lines(lines), 1):
            top.append(ask("chunk", chunk))
            outcome.parts.append(("chunk", 1, number, top[-1], estimate_tokens(chunk)))
        outcome.levels["L1"] = len(top)
        if kind == "tree":
            groups = []
            for number, start in enumerate(range(0, len(top), GROUP_SIZE), 1):
                body = "\n\n".join(top[start:start + GROUP_SIZE])
                groups.append(ask("meta", body))
                outcome.parts.append(("group", 2, number, groups[-1], estimate_tokens(body)))
            outcome.levels["L2"] = len(groups)
            top = groups
        outcome.text = ask("meta", "\n\n".join(top))
    outcome.output_tokens = estimate_tokens(outcome.text)
    return outcome


def plan_update(vault, cfg, conversation: str) -> SummaryOutcome:
    """Fold facts, notes and decisions newer than the rolling summary into it (all of them when
    there is none): one LLM call, or none when nothing is new. Writes nothing."""
    current = read_rolling_summary(vault, conversation)
    since = None
    if current is not None:
        stamp = current.extra.get("updated_at") or current.created_at
        since = files.parse_time(stamp) if stamp else None
    fresh = [m for m in _entries(vault, conversation, KNOWLEDGE_ROLES) if since is None or m.created_at > since]
    if not fresh:
        return SummaryOutcome(kind="unchanged", text=current.text if current else "", conversation=conversation)
    text, tokens = fold_in(cfg, current.text if current else None, [" ".join(m.text.split()) for m in fresh])
    return SummaryOutcome(kind="rolling", text=text, input_tokens=tokens, output_tokens=estimate_tokens(text),
                          conversation=conversation)


def write(change, outcome: SummaryOutcome, now: datetime | None = None) -> None:
    """Store a planned summary: a rebuild retires the old L1/L2 files (soft-deleted, recoverable)
    and stores its own; then the rolling summary is rewritten."""
    if not outcome.text or outcome.kind in ("none", "unchanged"):
        return
    now = now or files.utcnow()
    conversation = outcome.conversation
    if outcome.kind != "rolling":
        for memory in change.vault.iter_memories(conversation, roles=("summary",)):
            if memory.extra.get("summary_kind") in ("chunk", "group"):
                change.soft_delete(memory, "update", now=now)
        for kind, level, number, text, tokens in outcome.parts:
            if text:
                change.add(files.new_memory(text, "summary", conversation, created_at=now, extra={
                    "summary_kind": kind, "summary_level": level, "part": number,
                    "input_tokens": tokens, "output_tokens": estimate_tokens(text)}))
        write_rolling_summary(change, conversation, outcome.text, now=now, summary_depth=outcome.kind,
                              summary_level=1 + len(outcome.levels), input_tokens=outcome.input_tokens,
                              output_tokens=outcome.output_tokens, style=outcome.style)
    else:
        write_rolling_summary(change, conversation, outcome.text, now=now, input_tokens=outcome.input_tokens,
                              output_tokens=outcome.output_tokens)


def summarize(vault, cfg, conversation: str, rebuild: bool, style: str, now: datetime | None) -> SummaryOutcome:
    """`Memvault.summarize`: the new rolling summary planned without the lock (what is new since it was
    written, or every entry again: rebuild), written in one commit when it changed."""
    outcome = plan_rebuild(vault, cfg, conversation, style) if rebuild else plan_update(vault, cfg, conversation)
    if outcome.text and outcome.kind not in ("none", "unchanged"):
        with vault.change("summarize") as change:
            write(change, outcome, now=now)
            change.title = f"{outcome.kind} summary ({conversation})"
    return outcome
