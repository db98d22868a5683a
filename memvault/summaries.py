"""`memvault summarize`: the rolling summary, updated or rebuilt with depth chosen by size.

Rebuild depth (SPEC section 5), by the estimated tokens of all live entries:
under 100 none; under 500 one sentence; under 3,000 a paragraph; under 15,000 chunk
summaries (L1) plus a meta-summary; above that chunks (L1), groups of ~5 chunk
summaries (L2), and a final summary over the groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from memvault import files, learn
from memvault.files import Memory

CHUNK_TOKENS = 1500
GROUP_SIZE = 5
CONTENT_ROLES = ("memory", "note", "decision", "user", "assistant")


@dataclass
class SummaryOutcome:
    kind: str  # none, one_sentence, paragraph, chunked, tree, rolling, unchanged
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    levels: dict[str, int] = field(default_factory=dict)  # "L1": 12, "L2": 3

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "levels": self.levels}


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


def _entries(vault, conversation: str) -> list[Memory]:
    entries = list(vault.iter_memories(conversation, roles=CONTENT_ROLES))
    entries.sort(key=lambda m: (m.created_at, m.id))
    return entries


def chunk_lines(lines: list[str], budget: int = CHUNK_TOKENS) -> list[str]:
    """Consecutive lines packed into chunks of about `budget` tokens; an entry is never split
    unless it alone is over budget."""
    chunks, current, size = [], [], 0
    for line in lines:
        cost = learn.estimate_tokens(line)
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


def rebuild(change, cfg, conversation: str, style: str = "conversation", now: datetime | None = None) -> SummaryOutcome:
    from memvault import llm, prompts

    vault = change.vault
    now = now or files.utcnow()
    lines = [f"[{m.role}] {' '.join(m.text.split())}" for m in _entries(vault, conversation)]
    text = "\n".join(lines)
    tokens = learn.estimate_tokens(text)
    kind = depth_for(tokens)
    outcome = SummaryOutcome(kind=kind, input_tokens=tokens)
    if kind == "none":
        return outcome

    def ask(prompt_kind: str, body: str) -> str:
        return llm.strip_think(llm.chat(cfg, prompts.summary_messages(prompt_kind, body, style=style))).strip()

    _retire_levels(change, conversation, now)
    if kind in ("one_sentence", "paragraph"):
        outcome.text = ask(kind, text)
    else:
        chunk_summaries = []
        for number, chunk in enumerate(chunk_lines(lines), 1):
            summary = ask("chunk", chunk)
            chunk_summaries.append(summary)
            _store_level(change, conversation, "chunk", 1, summary, chunk, now, number)
        outcome.levels["L1"] = len(chunk_summaries)
        top = chunk_summaries
        if kind == "tree":
            groups = []
            for number, start in enumerate(range(0, len(top), GROUP_SIZE), 1):
                body = "\n\n".join(top[start:start + GROUP_SIZE])
                summary = ask("meta", body)
                groups.append(summary)
                _store_level(change, conversation, "group", 2, summary, body, now, number)
            outcome.levels["L2"] = len(groups)
            top = groups
        outcome.text = ask("meta", "\n\n".join(top))
    if not outcome.text:
        return outcome
    outcome.output_tokens = learn.estimate_tokens(outcome.text)
    learn.write_summary(change, conversation, outcome.text, now=now, summary_depth=kind,
                        summary_level=1 + len(outcome.levels), input_tokens=tokens,
                        output_tokens=outcome.output_tokens, style=style)
    return outcome


def _store_level(change, conversation, kind, level, summary, source, now, number) -> None:
    if not summary:
        return
    memory = files.new_memory(summary, "summary", conversation, created_at=now,
                              extra={"summary_kind": kind, "summary_level": level, "part": number,
                                     "input_tokens": learn.estimate_tokens(source),
                                     "output_tokens": learn.estimate_tokens(summary)})
    change.add(memory)


def _retire_levels(change, conversation: str, now) -> None:
    """Old L1/L2 summaries are replaced by the rebuild: soft-deleted, recoverable from deleted/."""
    for memory in change.vault.iter_memories(conversation, roles=("summary",)):
        if memory.extra.get("summary_kind") in ("chunk", "group"):
            change.soft_delete(memory, "update", now=now)


def update(change, cfg, conversation: str, now: datetime | None = None) -> SummaryOutcome:
    """Fold entries newer than the rolling summary into it (all of them when there is none)."""
    from memvault import llm, prompts

    vault = change.vault
    current = learn.read_rolling_summary(vault, conversation)
    since = None
    if current is not None:
        stamp = current.extra.get("updated_at") or current.created_at
        since = files.parse_time(stamp) if stamp else None
    fresh = [m for m in _entries(vault, conversation) if m.role in ("memory", "note", "decision")
             and (since is None or m.created_at > since)]
    if not fresh:
        return SummaryOutcome(kind="unchanged", text=current.text if current else "")
    lines = "\n".join(f"- {' '.join(m.text.split())}" for m in fresh)
    text = llm.strip_think(llm.chat(cfg, prompts.summary_messages(
        "rolling", lines, previous=current.text if current else None))).strip()
    outcome = SummaryOutcome(kind="rolling", text=text, input_tokens=learn.estimate_tokens(lines),
                             output_tokens=learn.estimate_tokens(text))
    if text:
        learn.write_summary(change, conversation, text, now=now, input_tokens=outcome.input_tokens,
                            output_tokens=outcome.output_tokens)
    return outcome
