"""Memory upkeep after the user said something (SPEC section 5): extract facts from the
user's words, reconcile them with the nearest facts already known, update the rolling
summary, evict past max_entries. Runs inside one Vault.change, so it is one commit.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from memvault import files
from memvault.files import Memory
from memvault.index import Index, nearest_rows, sql_str

# Per new fact, the nearest live facts that are similar enough to be worth one question each.
# MiniLM cosine: contradictions measured down to ~0.39 ("works at Google" / "started a new job
# at Microsoft"); below 0.35 pairs are unrelated, and a small model asked about them
# invents contradictions.
NEIGHBOURS_PER_FACT = 3
SIMILARITY_FLOOR = 0.35


def llm_config(settings):
    from memvault.llm import LLMConfig

    return LLMConfig(model=settings.llm_model, base_url=settings.llm_base_url, api_key=settings.llm_api_key,
                     timeout=settings.llm_timeout, temperature=settings.llm_temperature)


@dataclass
class Learned:
    facts: list[str] = field(default_factory=list)  # what extraction found
    added: list[Memory] = field(default_factory=list)
    replaced: list[tuple[Memory, Memory]] = field(default_factory=list)
    deleted: list[Memory] = field(default_factory=list)
    evicted: list[Memory] = field(default_factory=list)
    summary_updated: bool = False

    def to_json(self) -> list[dict]:
        rows = [{"event": "ADD", "id": m.id, "text": m.text} for m in self.added]
        rows += [{"event": "UPDATE", "id": new.id, "replaces": old.id, "old_text": old.text, "text": new.text}
                 for old, new in self.replaced]
        rows += [{"event": "DELETE", "id": m.id, "text": m.text} for m in self.deleted]
        return rows


def nearest_facts(index: Index, conversation: str, facts: list[str]
                  ) -> tuple[list[Memory], dict[str, list[str]]]:
    """The live facts of the conversation near the new facts, and for each new fact the ids of
    its up to NEIGHBOURS_PER_FACT neighbours with cosine >= SIMILARITY_FLOOR, nearest first."""
    if not facts or index.table() is None:
        return [], {}
    where = f"role = 'memory' AND conversation_id = {sql_str(conversation)}"
    vectors = index.embedder.embed(facts)
    neighbours: dict[str, list[str]] = {}
    rows_by_id: dict[str, dict] = {}
    for fact, vector in zip(facts, vectors):
        for row in nearest_rows(index, vector, where, NEIGHBOURS_PER_FACT):
            if 1.0 - float(row["_distance"]) >= SIMILARITY_FLOOR:  # cosine distance = 1 - cosine
                neighbours.setdefault(fact, []).append(row["id"])
                rows_by_id.setdefault(row["id"], row)
    memories = []
    for memory_id, row in rows_by_id.items():
        try:
            memory, _ = files.read_memory(index.root / row["path"], index.root)
        except Exception:  # changed under us since the sync; it is simply not a candidate
            continue
        if memory.id == memory_id and not memory.is_deleted:
            memories.append(memory)
    live = {m.id for m in memories}
    return memories, {fact: [i for i in ids if i in live] for fact, ids in neighbours.items()}


def learn(change, index: Index, cfg, user_text: str, conversation: str, now: datetime | None = None,
          summarize: bool = True, max_entries: int | None = None,
          warn: Callable[[str], None] | None = None, reconcile_mode: str = "pairs") -> Learned:
    """Extract, reconcile, apply, summarize, evict. LLM errors from extraction propagate
    (nothing was learned, the caller says so); reconciliation falls back to adding."""
    from memvault.extraction import extract_facts, reconcile

    warn = warn or (lambda message: sys.stderr.write(message + "\n"))
    learned = Learned()
    learned.facts = extract_facts(cfg, user_text)
    if learned.facts:
        known, neighbours = nearest_facts(index, conversation, learned.facts)
        by_id = {m.id: m for m in known}
        decisions = reconcile(cfg, learned.facts, [(m.id, m.text) for m in known], neighbours, reconcile_mode)
        apply_decisions(change, decisions, by_id, conversation, now, learned)
    if summarize and (learned.added or learned.replaced or learned.deleted):
        try:
            learned.summary_updated = update_rolling_summary(change, cfg, conversation, learned, now)
        except Exception as exc:  # a summary is a convenience; the facts are already stored
            warn(f"memvault: warning: summary not updated: {exc}")
    if max_entries is not None:
        learned.evicted = change.evict(conversation, max_entries, now=now)
    return learned


def apply_decisions(change, decisions, by_id: dict[str, Memory], conversation: str, now, learned: Learned) -> None:
    adds = [d for d in decisions if d.event == "ADD" and d.text]
    for decision in adds:
        memory = files.new_memory(decision.text, "memory", conversation, created_at=now or files.utcnow())
        learned.added.append(change.add(memory))
    for decision in decisions:
        old = by_id.get(decision.target or "")
        if old is None or old.is_deleted or decision.event != "UPDATE" or not decision.text:
            continue
        new = change.replace(old, decision.text, reason="update", now=now)
        learned.replaced.append((old, new))
    # A contradicted fact points at the fact that contradicted it: the one the decision
    # names, else the only fact added, else none.
    stored = {m.text: m for m in learned.added} | {new.text: new for _, new in learned.replaced}
    only = learned.added[0] if len(learned.added) == 1 else None
    for decision in decisions:
        old = by_id.get(decision.target or "")
        if old is None or old.is_deleted or decision.event != "DELETE":
            continue
        successor = stored.get(decision.by or "") or only
        change.soft_delete(old, "contradiction", replaced_by=successor.id if successor else None, now=now)
        if successor:
            change.replaced.append((old, successor))
        learned.deleted.append(old)


def summary_path(vault, conversation: str):
    return vault.entries / files.conversation_slug(conversation) / "summaries" / "summary.md"


def read_rolling_summary(vault, conversation: str) -> Memory | None:
    return files.read_optional(summary_path(vault, conversation), vault.root)


def write_summary(change, conversation: str, text: str, now=None, **extra) -> Memory:
    """Create or rewrite the rolling summary; its id stays stable across updates."""
    current = read_rolling_summary(change.vault, conversation)
    stamp = files.format_time(now or files.utcnow())
    if current is not None:
        current.text = text.strip()
        current.extra.update(summary_kind="rolling", updated_at=stamp, **extra)
        return change.rewrite(current)
    memory = files.new_memory(text, "summary", conversation, created_at=now or files.utcnow(),
                              extra={"summary_kind": "rolling", "updated_at": stamp, **extra})
    return change.add(memory)


def update_rolling_summary(change, cfg, conversation: str, learned: Learned, now=None) -> bool:
    from memvault import llm, prompts

    facts = [m.text for m in learned.added] + [new.text for _, new in learned.replaced]
    gone = [m.text for m in learned.deleted]
    lines = "\n".join(f"- {f}" for f in facts) + "".join(f"\n- (no longer true) {g}" for g in gone)
    previous = read_rolling_summary(change.vault, conversation)
    text = llm.chat(cfg, prompts.summary_messages("rolling", lines, previous=previous.text if previous else None))
    text = llm.strip_think(text).strip()
    if not text:
        return False
    write_summary(change, conversation, text, now=now, input_tokens=estimate_tokens(lines),
                  output_tokens=estimate_tokens(text))
    return True


def estimate_tokens(text: str) -> int:
    """About four characters a token (SPEC section 6)."""
    return (len(text) + 3) // 4
