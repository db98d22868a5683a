"""Memory upkeep after the user said something (docs/design.md, "The write path"): extract facts
from the user's words, reconcile them with the nearest facts already known, update the rolling
summary, evict past max_entries.

In two steps, so that the vault lock is never held while a model thinks: `plan` asks the LLM
(extraction, the reconciliation questions, the new rolling summary) and writes nothing;
`apply` stores the plan inside one Vault.change (one commit), and skips any decision about a
memory that changed or went away in the meantime. The new fact is stored either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from memvault import files
from memvault.files import Memory
from memvault.index import Index
from memvault.vault import ADD, DELETE, EVICT, REPLACE, UPDATE, WITHHELD, Event

# Per new fact, the nearest live facts that are similar enough to be worth one question each.
# MiniLM cosine: contradictions measured down to ~0.39 ("works at Google" / "started a new job
# at Microsoft"); below 0.35 pairs are unrelated, and a small model asked about them
# invents contradictions.
NEIGHBOURS_PER_FACT = 3
SIMILARITY_FLOOR = 0.35


@dataclass
class LearningPlan:
    """What the model decided about one message, before anything is written."""

    conversation: str
    facts: list[str] = field(default_factory=list)  # what extraction found
    decisions: list = field(default_factory=list)  # extraction.Decision, about `known` memories
    known: dict[str, Memory] = field(default_factory=dict)  # the memories asked about, as read then
    summary: str | None = None  # the new rolling summary, when there is one
    summary_tokens: tuple[int, int] = (0, 0)  # its input and output tokens
    learned_from: str | None = None  # the id of the chat turn the facts come from
    episode_id: str | None = None  # the episode the facts come from (docs/design.md, "Episodes")
    prediction: list[str] = field(default_factory=list)  # predict-calibrate: what the known facts predicted
    withheld: list[str] = field(default_factory=list)  # facts not learned: they held a secret (as placeholders)


@dataclass
class Learned:
    """What one message taught the vault: the facts extraction found, and every change made."""

    facts: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    summary_updated: bool = False

    def of(self, *actions: str) -> list[Event]:
        return [e for e in self.events if e.action in actions and e.memory.role != "summary"]

    @property
    def added(self) -> list[Memory]:
        return [e.memory for e in self.of(ADD)]

    @property
    def replaced(self) -> list[tuple[Memory, Memory]]:
        """(old, new) for every memory that a new fact updated or made untrue."""
        return [(e.other, e.memory) for e in self.of(UPDATE)] + [(e.memory, e.other) for e in self.of(REPLACE)]

    @property
    def evicted(self) -> list[Memory]:
        return [e.memory for e in self.of(EVICT)]

    def to_json(self) -> list[dict]:
        """One row per change (ADD, UPDATE, REPLACE, DELETE, EVICT, and WITHHELD: a fact not learned
        because it held a secret), as `--json` prints them."""
        return [e.to_json() for e in self.of(ADD, UPDATE, REPLACE, DELETE, EVICT, WITHHELD)]


def nearest_facts(index: Index, conversation: str, facts: list[str]
                  ) -> tuple[list[Memory], dict[str, list[str]]]:
    """The live facts of the conversation near the new facts, and for each new fact the ids of
    its up to NEIGHBOURS_PER_FACT neighbours with cosine >= SIMILARITY_FLOOR, nearest first."""
    if not facts or index.table() is None:
        return [], {}
    vectors = index.embedder.embed(facts)
    neighbours: dict[str, list[str]] = {}
    rows_by_id: dict[str, dict] = {}
    for fact, vector in zip(facts, vectors):
        for row in index.nearest(vector, NEIGHBOURS_PER_FACT, roles=("memory",), conversation=conversation):
            if 1.0 - float(row["_distance"]) >= SIMILARITY_FLOOR:  # cosine distance = 1 - cosine
                neighbours.setdefault(fact, []).append(row["id"])
                rows_by_id.setdefault(row["id"], row)
    memories = []
    for memory_id, row in rows_by_id.items():
        memory = files.still_live(index.root, index.root / row["path"], memory_id)
        if memory is not None:
            memories.append(memory)
    live = {m.id for m in memories}
    return memories, {fact: [i for i in ids if i in live] for fact, ids in neighbours.items()}


def plan(vault, cfg, user_text: str, conversation: str, summarize: bool = True,
         warn: Callable[[str], None] | None = None, reconcile_mode: str = "pairs",
         learned_from: str | None = None) -> LearningPlan:
    """Extract and reconcile (LLM calls, no lock, nothing written). An LLMError from extraction
    propagates (nothing was learned; the caller says so); reconciliation falls back to adding."""
    from memvault import secret_scan
    from memvault.extraction import extract_facts, reconcile

    user_text = secret_scan.stored_text(vault, user_text)  # the model is shown placeholders, never a key
    result = LearningPlan(conversation, learned_from=learned_from)
    result.facts, result.withheld = secret_scan.split_facts(vault, extract_facts(cfg, user_text))
    if not result.facts:
        return result
    known, neighbours = nearest_facts(vault.index, conversation, result.facts)
    result.known = {m.id: m for m in known}
    result.decisions = reconcile(cfg, result.facts, [(m.id, m.text) for m in known], neighbours, reconcile_mode)
    if summarize:
        _plan_summary(vault, cfg, result, warn)
    return result


def _plan_summary(vault, cfg, result: LearningPlan, warn) -> None:
    from memvault import summaries
    from memvault.prompts import estimate_tokens

    facts = [d.text for d in result.decisions if d.event in ("ADD", "UPDATE") and d.text]
    gone = [result.known[d.target].text for d in result.decisions
            if d.event == "DELETE" and d.target in result.known]
    if not facts and not gone:
        return
    previous = summaries.read_rolling_summary(vault, result.conversation)
    try:
        text, tokens = summaries.fold_in(cfg, previous.text if previous else None, facts, gone)
    except Exception as exc:  # a summary is a convenience; the facts are stored regardless
        if warn:
            warn(f"memvault: warning: summary not updated: {exc}")
        return
    if text:
        result.summary, result.summary_tokens = text, (tokens, estimate_tokens(text))


def apply(change, plan: LearningPlan, now: datetime | None = None, max_entries: int | None = None) -> Learned:
    """Store a plan in `change` (the caller holds the lock): new facts, replacements of the memories
    that are still as they were when the model saw them, the summary, eviction."""
    from memvault import summaries

    from memvault import secret_scan

    first = len(change.events)
    learned = Learned(facts=list(plan.facts))
    now = now or files.utcnow()
    origin = {files.ORIGIN_KEY: "learned"}
    if plan.learned_from:
        origin["learned_from"] = plan.learned_from
    if plan.episode_id:
        origin["episode_id"] = plan.episode_id
    known = {i: files.still_live(change.root, m.path, i, m.text) for i, m in plan.known.items()}
    added: dict[str, Memory] = {}
    for decision in plan.decisions:
        if decision.event == "ADD" and decision.text and decision.text not in added:
            added[decision.text] = change.add(files.new_memory(decision.text, "memory", plan.conversation,
                                                               created_at=now, extra=dict(origin)))
    for decision in plan.decisions:
        if decision.event != "UPDATE" or not decision.text:
            continue
        old = known.get(decision.target or "")
        if old is None:  # changed meanwhile: the refined fact is stored as a fact of its own
            if decision.text not in added:
                added[decision.text] = change.add(files.new_memory(decision.text, "memory", plan.conversation,
                                                                   created_at=now, extra=dict(origin)))
            continue
        # The refined fact keeps the origin of the one it refines: a fact the user added stays theirs.
        refreshed = {"learned_from": plan.learned_from} if plan.learned_from and files.is_evictable(old) else None
        new = change.replace(old, decision.text, reason="update", now=now, extra=refreshed)
        known[old.id] = None
        added[decision.text] = new
    # A contradicted fact points at the fact that contradicted it: the one the decision names,
    # else the only fact added, else none.
    only = next(iter(added.values())) if len(added) == 1 else None
    for decision in plan.decisions:
        old = known.get(decision.target or "")
        if old is None or decision.event != "DELETE":
            continue
        successor = added.get(decision.by or "") or only
        change.soft_delete(old, "contradiction", replaced_by=successor, now=now)
        known[old.id] = None
    if plan.summary and len(change.events) > first:
        summaries.write_rolling_summary(change, plan.conversation, plan.summary, now=now,
                                        input_tokens=plan.summary_tokens[0], output_tokens=plan.summary_tokens[1])
        learned.summary_updated = True
    if max_entries is not None:
        change.evict(plan.conversation, max_entries, now=now)
    change.events += [secret_scan.not_learned(text, plan.conversation) for text in plan.withheld]
    learned.events = change.events[first:]
    return learned


# -- predict-calibrate (extraction_mode = "predict-calibrate", docs/design.md "Episodes") ---------
# A path of its own beside `plan`: the facts come from a whole closed episode instead of one
# message; reconciliation, summary and `apply` are the same.

# Known facts shown to the prediction: the nearest to each of the episode's user messages.
PREDICTION_FACTS = 8


def related_facts(index: Index, conversation: str, texts: list[str], limit: int = PREDICTION_FACTS) -> list[Memory]:
    """The live facts of the conversation closest to any of `texts` (cosine >= SIMILARITY_FLOOR),
    closest first, at most `limit`."""
    if not texts or index.table() is None:
        return []
    best: dict[str, tuple[float, dict]] = {}
    for vector in index.embedder.embed(texts):
        for row in index.nearest(vector, limit, roles=("memory",), conversation=conversation):
            cosine = 1.0 - float(row["_distance"])
            if cosine >= SIMILARITY_FLOOR and cosine > best.get(row["id"], (-1.0, row))[0]:
                best[row["id"]] = (cosine, row)
    found = []
    for memory_id, (_, row) in sorted(best.items(), key=lambda item: -item[1][0]):
        memory = files.still_live(index.root, index.root / row["path"], memory_id)
        if memory is not None:
            found.append(memory)
    return found[:limit]


def plan_episode(vault, cfg, user_turns: list[Memory], conversation: str, episode_id: str,
                 summarize: bool = True, warn: Callable[[str], None] | None = None,
                 reconcile_mode: str = "pairs") -> LearningPlan | None:
    """Predict-calibrate for one closed episode (LLM calls, no lock, nothing written): the live facts
    related to the user's messages, the model's prediction from those alone, then the facts the
    messages state and the prediction missed or got wrong, reconciled like any new facts.

    None when either prompt gets no valid answer or the model fails: the caller learns from each
    message instead (`plan`), so no turn goes unread."""
    from memvault.errors import LLMError
    from memvault.extraction import calibrate, predict, reconcile

    texts = [t.text for t in user_turns]
    result = LearningPlan(conversation, episode_id=episode_id)
    try:
        known = related_facts(vault.index, conversation, texts)
        prediction = predict(cfg, [m.text for m in known])
        facts = calibrate(cfg, prediction, texts) if prediction is not None else None
    except LLMError as exc:
        if warn:
            warn(f"memvault: warning: predict-calibrate failed ({exc})")
        return None
    if facts is None:
        return None
    from memvault import secret_scan

    facts, result.withheld = secret_scan.split_facts(vault, facts)
    result.prediction, result.facts = prediction, facts
    if not facts:
        return result
    known, neighbours = nearest_facts(vault.index, conversation, facts)
    result.known = {m.id: m for m in known}
    result.decisions = reconcile(cfg, facts, [(m.id, m.text) for m in known], neighbours, reconcile_mode)
    if summarize:
        _plan_summary(vault, cfg, result, warn)
    return result
