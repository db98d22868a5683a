"""`memvault reconcile`: find clusters of near-duplicate or conflicting facts and apply the
reconciliation protocol to each, the newest fact of a cluster playing the new fact.

`plan` asks the model (no lock, nothing written) and fails loudly when it cannot (an endpoint
down, answers that stay invalid): a plan of fallbacks would pass for a decision. `apply`
writes a plan inside a Vault.change, skipping memories that changed since they were read."""

from __future__ import annotations

from dataclasses import dataclass, field

from memvault.store import files
from memvault.store.files import Memory
from memvault.store.index import Index

SIMILARITY = 0.78  # cosine above which two facts are about the same thing (MiniLM)
MAX_CLUSTER = 8


@dataclass
class Step:
    memory: Memory
    decision: str  # KEEP, DELETE, UPDATE
    replacement: str | None = None  # new text (UPDATE) or the id it is replaced by (DELETE)
    replaced_by: Memory | None = None

    def to_json(self) -> dict:
        return {"id": self.memory.id, "text": self.memory.text, "decision": self.decision,
                "replacement": self.replacement,
                "replaced_by": self.replaced_by.id if self.replaced_by else None}


@dataclass
class ClusterPlan:
    conversation: str
    newest: Memory
    steps: list[Step] = field(default_factory=list)


def clusters(index: Index, conversation: str) -> list[list[Memory]]:
    """Groups of live facts whose embeddings are closer than SIMILARITY, oldest first."""
    import numpy as np

    rows = index.rows(["id", "path", "vector"], roles=("memory",), conversation=conversation)
    if len(rows) < 2:
        return []
    vectors = np.asarray([r["vector"] for r in rows], dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similar = (vectors @ vectors.T) >= SIMILARITY
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(np.triu(similar, 1))):
        parent[root(int(i))] = root(int(j))
    groups: dict[int, list[int]] = {}
    for i in range(len(rows)):
        groups.setdefault(root(i), []).append(i)
    result = []
    for members in groups.values():
        if len(members) < 2:
            continue
        memories = []
        for i in members:
            try:
                memory, _ = files.read_memory(index.root / rows[i]["path"], index.root)
            except Exception:
                continue
            memories.append(memory)
        memories.sort(key=lambda m: (m.created_at, m.id))
        if len(memories) >= 2:
            result.append(memories[-MAX_CLUSTER:])
    return sorted(result, key=lambda c: c[-1].created_at)


def plan(index: Index, cfg, conversation: str, mode: str = "pairs") -> list[ClusterPlan]:
    from memvault.learning.extraction import reconcile

    plans = []
    for cluster in clusters(index, conversation):
        newest, older = cluster[-1], cluster[:-1]
        cluster_plan = ClusterPlan(conversation, newest)
        answer = reconcile(cfg, [newest.text], [(m.id, m.text) for m in older], mode=mode, strict=True)
        decisions = {d.target: d for d in answer if d.target}
        for memory in older:
            decision = decisions.get(memory.id)
            if decision is None or decision.event == "NONE" and not _same(memory.text, newest.text):
                cluster_plan.steps.append(Step(memory, "KEEP"))
            elif decision.event == "UPDATE" and decision.text and not _same(decision.text, newest.text):
                cluster_plan.steps.append(Step(memory, "UPDATE", decision.text))
            else:  # DELETE, an exact duplicate, or an update that says what the newest fact says
                cluster_plan.steps.append(Step(memory, "DELETE", newest.id, replaced_by=newest))
        plans.append(cluster_plan)
    return plans


def _same(a: str, b: str) -> bool:
    from memvault.learning.extraction import _norm

    return _norm(a) == _norm(b)


def apply(change, plans: list[ClusterPlan]) -> int:
    """Write the plans; a step whose memory (or whose replacement) changed meanwhile is skipped."""
    changed = 0
    for cluster_plan in plans:
        for step in cluster_plan.steps:
            if step.decision == "KEEP":
                continue
            memory = files.still_live(change.root, step.memory.path, step.memory.id, step.memory.text)
            if memory is None:
                continue
            if step.decision == "UPDATE":
                change.replace(memory, step.replacement, reason="update")
                changed += 1
            elif step.decision == "DELETE":
                successor = files.still_live(change.root, step.replaced_by.path, step.replaced_by.id)
                if successor is not None:
                    change.soft_delete(memory, "update", replaced_by=successor)
                    changed += 1
    return changed


@dataclass
class ReconcileOutcome:
    """The clusters `reconcile` found, what it decided for each, and what it changed."""

    plans: list  # ClusterPlan
    dry_run: bool
    events: list = field(default_factory=list)  # vault.Event, empty for a dry run

    @property
    def steps(self) -> list:
        return [step for plan in self.plans for step in plan.steps]

    def to_json(self) -> list[dict]:
        return [{"conversation_id": p.conversation, "newest": {"id": p.newest.id, "text": p.newest.text},
                 "steps": [s.to_json() for s in p.steps]} for p in self.plans]


def reconcile(vault, index: Index, cfg, conversation: str, all_conversations: bool, mode: str,
              dry_run: bool) -> ReconcileOutcome:
    """`Memvault.reconcile`: the model asked about the clusters of the conversation (or of every one that
    has facts) without the lock, the plan applied in one commit (memories that changed meanwhile
    skipped); nothing written for a dry run or a plan that keeps everything."""
    conversations = [conversation]
    if all_conversations:
        conversations = sorted({m.conversation_id for m in vault.iter_memories(roles=("memory",))})
    plans = [p for c in conversations for p in plan(index, cfg, c, mode)]
    outcome = ReconcileOutcome(plans, dry_run)
    if not dry_run and any(step.decision != "KEEP" for step in outcome.steps):
        with vault.change("reconcile") as change:
            apply(change, plans)
        outcome.events = change.events
    return outcome
