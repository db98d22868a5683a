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

from memvault.store import files
from memvault.store.files import Memory
from memvault.store.index import Index
from memvault.store.vault import ADD, DELETE, EVICT, REPLACE, UPDATE, WITHHELD, Event

# A learned fact waiting for review (setting learned_review): stored, never searched nor injected.
PENDING_ROLE = files.PENDING_ROLE
# On a learned fact: the ids of the facts the user added that it would retire, once kept in review.
WOULD_REPLACE = "would_replace"
# On a learned fact: the learned facts it retired at once (their tombstones say replaced_by).
RETIRED = "retired"
# On a fact learned from words that are not a stored turn (add --extract): those words, for review.
SAID_KEY = "learned_from_text"
MAX_SAID = 500

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
    said: str | None = None  # the words the facts come from, when they are no stored turn (add --extract)
    episode_id: str | None = None  # the episode the facts come from (docs/design.md, "Episodes")
    prediction: list[str] = field(default_factory=list)  # predict-calibrate: what the known facts predicted
    withheld: list[str] = field(default_factory=list)  # facts not learned: they held a secret (as placeholders)


@dataclass
class Learned:
    """What one message taught the vault: the facts extraction found, and every change made. A result
    also when nothing was learned: `error` says why learning failed (the LLM was down; the turn waits for
    `memvault learn`), `skipped` why it was not tried (learning off, a reply cut short, per episode)."""

    facts: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    summary_updated: bool = False
    error: str | None = None
    skipped: str | None = None

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

    def merge(self, other: "Learned | None") -> "Learned":
        """Add what another message or episode taught to this sum; returns self."""
        if other is not None:
            self.facts += other.facts
            self.events += other.events
            self.summary_updated |= other.summary_updated
            self.error = self.error or other.error
        return self


def reconcile_scopes(conversation: str) -> list[str]:
    """Where a new fact's neighbours are looked for: its conversation and `global` (issue 29, "one
    truth across scopes": "I live in Madrid now" said in a trip's chat is about the global "I live
    in Lisbon"). A fact of another conversation is that conversation's own and is left alone."""
    return list(dict.fromkeys([conversation, files.DEFAULT_CONVERSATION]))


def nearest_facts(index: Index, conversation: str, facts: list[str]
                  ) -> tuple[list[Memory], dict[str, list[str]]]:
    """The live facts of the conversation and of `global` near the new facts (reconcile_scopes),
    and for each new fact the ids of its up to NEIGHBOURS_PER_FACT neighbours with cosine >=
    SIMILARITY_FLOOR, nearest first."""
    import json

    from memvault.learning.extraction import first_person

    if not facts or index.table() is None:
        return [], {}
    # Facts the user wrote are mostly in the first person ("I live in Lisbon"), far from a learned
    # fact's third person in MiniLM's space: those are also looked for with the fact's first-person form.
    vectors = index.embedder.embed([*facts, *map(first_person, facts)])
    neighbours: dict[str, list[str]] = {}
    rows_by_id: dict[str, dict] = {}
    for fact, vector, own_words in zip(facts, vectors[:len(facts)], vectors[len(facts):]):
        found: dict[str, float] = {}
        for query, users_only, scope in ((q, users_only, scope) for q, users_only in ((vector, False), (own_words, True))
                                         for scope in reconcile_scopes(conversation)):
            for row in index.nearest(query, NEIGHBOURS_PER_FACT, roles=("memory",), conversation=scope):
                cosine = 1.0 - float(row["_distance"])  # cosine distance = 1 - cosine
                if users_only and json.loads(row.get("meta") or "{}").get(files.ORIGIN_KEY) == "learned":
                    continue
                if cosine >= SIMILARITY_FLOOR and cosine > found.get(row["id"], -1.0):
                    found[row["id"]] = cosine
                    rows_by_id.setdefault(row["id"], row)
        nearest = sorted(found, key=lambda i: -found[i])[:NEIGHBOURS_PER_FACT]
        if nearest:
            neighbours[fact] = nearest
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
    from memvault.store import secret_scan
    from memvault.learning.extraction import extract_facts, reconcile

    user_text = secret_scan.stored_text(vault, user_text)  # the model is shown placeholders, never a key
    result = LearningPlan(conversation, learned_from=learned_from, said=None if learned_from else user_text)
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
    from memvault.learning import summaries
    from memvault.learning.prompts import estimate_tokens

    if vault.settings.learned_review:
        return  # nothing learned is live, nothing retired, until review keeps it
    facts = [d.text for d in result.decisions if d.event in ("ADD", "UPDATE") and d.text]
    # Only a learned fact is retired at once; a fact the user added stays (see `apply`).
    gone = [result.known[d.target].text for d in result.decisions
            if d.event == "DELETE" and d.target in result.known and _retired_at_once(result.known[d.target])]
    if not facts and not gone:
        return
    previous = summaries.read_rolling_summary(vault, result.conversation)
    if previous is None and summaries.summary_file(vault, result.conversation) is not None:
        # Set aside (a fact it stated went away): written again from every live fact, within a budget.
        retiring = {d.target for d in result.decisions if d.event in ("DELETE", "UPDATE")
                    and d.target in result.known and _retired_at_once(result.known[d.target])}
        known = summaries.knowledge(vault, result.conversation, exclude=retiring)
        if known is None:
            if warn:
                warn("memvault: the rolling summary stays set aside (too many facts to fold in one call); "
                     "`memvault summarize --rebuild` writes it again")
            return
        facts = [*known, *[f for f in facts if f not in known]]
    try:
        text, tokens = summaries.fold_in(cfg, previous.text if previous else None, facts, gone)
    except Exception as exc:  # a summary is a convenience; the facts are stored regardless
        if warn:
            warn(f"memvault: warning: summary not updated: {exc}")
        return
    if text:
        result.summary, result.summary_tokens = text, (tokens, estimate_tokens(text))


def _retired_at_once(old: Memory) -> bool:
    """Whether learning retires this fact at once (learned, not kept by the user) rather than proposing it."""
    return files.is_learned(old) and not old.extra.get(files.REVIEWED)


def apply(change, plan: LearningPlan, now: datetime | None = None, max_entries: int | None = None,
          review: bool = False) -> Learned:
    """Store a plan in `change` (the caller holds the lock): new facts, replacements of the memories
    that are still as they were when the model saw them, the summary, eviction.

    What a learned fact may retire (docs/design.md, "The write path"): another learned fact, at once,
    as before; a fact the user added, never by itself: the new fact is stored, live, with
    `would_replace` naming it, and the user's fact stays live until `memvault review` keeps the
    proposal. review (setting learned_review): every new fact waits, as a `pending` memory (stored,
    listed by `review`, never searched nor injected), replacing nothing until it is kept."""
    from memvault.learning import summaries

    first = len(change.events)
    learned = Learned(facts=list(plan.facts))
    now = now or files.utcnow()
    origin = {files.ORIGIN_KEY: "learned"}
    if plan.learned_from:
        origin["learned_from"] = plan.learned_from
    elif plan.said:
        origin[SAID_KEY] = plan.said[:MAX_SAID]
    if plan.episode_id:
        origin["episode_id"] = plan.episode_id
    known = {i: files.still_live(change.root, m.path, i, m.text) for i, m in plan.known.items()}

    def held(old: Memory) -> bool:
        """Whether retiring `old` waits for the user: a fact they added or kept in review, or any fact
        when everything learned waits for review."""
        return review or not _retired_at_once(old)

    # Decide everything first: a new fact's front matter must say what it would replace when written.
    new_texts: dict[str, list[str]] = {}  # new fact -> ids it would replace once kept
    updates: dict[str, Memory] = {}  # new fact -> the learned fact it refines (replaced at once)
    for decision in plan.decisions:
        if decision.event == "ADD" and decision.text:
            new_texts.setdefault(decision.text, [])
        elif decision.event == "UPDATE" and decision.text:
            old = known.get(decision.target or "")
            new_texts.setdefault(decision.text, [])
            if old is None:  # changed meanwhile: the refined fact is stored as a fact of its own
                continue
            if held(old):
                new_texts[decision.text].append(old.id)
            elif decision.text not in updates:
                updates[decision.text] = old
            known[old.id] = None
    # A contradicted fact points at the fact that contradicted it: the one the decision names,
    # else the only new fact, else none.
    only = next(iter(new_texts)) if len(new_texts) == 1 else None
    contradicted: list[tuple[Memory, str | None]] = []
    for decision in plan.decisions:
        old = known.get(decision.target or "")
        if old is None or decision.event != "DELETE":
            continue
        successor = decision.by if decision.by in new_texts else only
        if held(old):
            if successor is not None:  # no named successor: nothing to propose, the fact stays
                new_texts[successor].append(old.id)
        else:
            contradicted.append((old, successor))
        known[old.id] = None

    retires: dict[str, list[str]] = {}  # new fact -> the learned facts it retires now (`review` reject brings them back)
    for old, successor in contradicted:
        if successor is not None:
            retires.setdefault(successor, []).append(old.id)
    stored: dict[str, Memory] = {}
    waiting = _pending_texts(change, plan.conversation) if review else set()
    for text, would_replace in new_texts.items():
        extra = dict(origin)
        if would_replace:
            extra[WOULD_REPLACE] = list(dict.fromkeys(would_replace))
        if retires.get(text):
            extra[RETIRED] = retires[text]
        if review:
            if text not in waiting:  # the same statement again: it waits once
                stored[text] = change.add(files.new_memory(text, PENDING_ROLE, plan.conversation,
                                                           created_at=now, extra=extra))
        elif text in updates:
            old = updates[text]
            # The refined fact keeps the front matter of the learned fact it refines.
            refreshed = {k: v for k, v in extra.items() if k != files.ORIGIN_KEY}
            stored[text] = change.replace(old, text, reason="update", now=now, extra=refreshed)
        else:
            stored[text] = change.add(files.new_memory(text, "memory", plan.conversation, created_at=now,
                                                       extra=extra))
    untrue: list[Memory] = []  # what a refinement retires stays said by the refined fact; these do not
    for old, successor in contradicted:
        change.soft_delete(old, "contradiction", replaced_by=stored.get(successor or ""), now=now)
        untrue.append(old)
    if len(change.events) > first:
        if plan.summary and not review:
            summary = summaries.write_rolling_summary(change, plan.conversation, plan.summary, now=now,
                                                      input_tokens=plan.summary_tokens[0],
                                                      output_tokens=plan.summary_tokens[1])
            learned.summary_updated = True
            if summaries.states_any(summary.text, untrue):  # told they are gone, the fold kept one
                summaries.set_aside(change, plan.conversation, untrue, now=now, force=True)
        elif untrue:
            summaries.set_aside(change, plan.conversation, untrue, now=now)
        for other in sorted({m.conversation_id for m in untrue} - {plan.conversation}):
            # A global fact retired from a conversation's chat: the global summary may state it.
            summaries.set_aside(change, other, [m for m in untrue if m.conversation_id == other], now=now)
    if max_entries is not None:
        change.evict(plan.conversation, max_entries, now=now)
    change.events += withheld_events(plan)
    learned.events = change.events[first:]
    return learned


def withheld_events(plan: LearningPlan) -> list[Event]:
    """The facts of a plan not learned because they held a secret, as WITHHELD events: no id, never
    written, the text with placeholders (the changes every learning command shows)."""
    return [Event(WITHHELD, Memory("", "memory", plan.conversation, files.utcnow(), text),
                  reason="holds a secret: not learned") for text in plan.withheld]


def _pending_texts(change, conversation: str) -> set[str]:
    """The texts of the facts already waiting for review in the conversation."""
    return {m.text for m in change.vault.iter_memories(conversation, roles=(PENDING_ROLE,))}


# -- predict-calibrate (extraction_mode = "predict-calibrate", docs/design.md "Episodes") ---------
# A path of its own beside `plan`: the facts come from a whole closed episode instead of one
# message; reconciliation, summary and `apply` are the same.

# Known facts shown to the prediction: the nearest to each of the episode's user messages.
PREDICTION_FACTS = 8


def related_facts(index: Index, conversation: str, texts: list[str], limit: int = PREDICTION_FACTS) -> list[Memory]:
    """The live facts of the conversation and of `global` (reconcile_scopes) closest to any of
    `texts` (cosine >= SIMILARITY_FLOOR), closest first, at most `limit`."""
    if not texts or index.table() is None:
        return []
    best: dict[str, tuple[float, dict]] = {}
    for vector in index.embedder.embed(texts):
        for row in (r for scope in reconcile_scopes(conversation)
                    for r in index.nearest(vector, limit, roles=("memory",), conversation=scope)):
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
    from memvault.store import secret_scan
    from memvault.errors import LLMError
    from memvault.learning.extraction import calibrate, predict, reconcile

    # Stored turns already hold placeholders; the words of add --extract do not yet
    texts = [secret_scan.stored_text(vault, t.text) for t in user_turns]
    result = LearningPlan(conversation, episode_id=episode_id, said=None if episode_id else "\n".join(texts))
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


# -- the one learning path ---------------------------------------------------------------------
# Every command that learns (chat, add --extract, add --jsonl --extract, episodes, import --extract)
# goes through a Learner: the index brought in step (facts learned from the previous message are
# candidates for this one), the model asked without the lock, the plan stored in one commit, and
# what was learned summed up in `learned`.

EXTRACTED = files.EXTRACTED
# Turns that taught nothing are marked this many to a commit (a kill re-asks at most these).
MARK_BATCH = 20


class Learner:
    """One command's learning: `message` per user message, `episode` per closed episode
    (predict-calibrate), `learned` the sum of every change made.

    vault: the store (vault.Vault); cfg: the LLM; command: the command named in the commits;
    refresh: brings the index in step before each plan (None: the caller's index is current);
    summarize: fold what is learned into the rolling summary (default: enable_summarization)."""

    def __init__(self, vault, cfg, command: str, *, warn: Callable[[str], None] | None = None,
                 refresh: Callable[[], object] | None = None, summarize: bool | None = None):
        self.vault, self.cfg, self.command = vault, cfg, command
        self.warn, self.refresh = warn, refresh
        settings = vault.settings
        self.summarize = settings.enable_summarization if summarize is None else summarize
        self.learned = Learned()
        self._quiet: list[Memory] = []  # turns learned from that taught nothing, to be marked

    def plan(self, text: str, conversation: str, *, turn: Memory | None = None,
             episode_id: str | None = None) -> LearningPlan:
        """The plan for one message (LLM calls, nothing written)."""
        if self.refresh is not None:
            self.refresh()
        result = plan(self.vault, self.cfg, text, conversation, summarize=self.summarize, warn=self.warn,
                      reconcile_mode=self.vault.settings.reconcile_mode, learned_from=turn.id if turn else None)
        result.episode_id = episode_id
        return result

    def plan_episode(self, user_turns: list[Memory], conversation: str, episode_id: str | None
                     ) -> LearningPlan | None:
        """The predict-calibrate plan for one episode (None: no valid answer; learn per message)."""
        if self.refresh is not None:
            self.refresh()
        return plan_episode(self.vault, self.cfg, user_turns, conversation, episode_id, summarize=self.summarize,
                            warn=self.warn, reconcile_mode=self.vault.settings.reconcile_mode)

    def store(self, change, plan: LearningPlan, now: datetime | None) -> Learned:
        """Write a plan inside the caller's change (the lock held), and add it to `learned`."""
        settings = self.vault.settings
        learned = apply(change, plan, now=now, max_entries=settings.max_entries, review=settings.learned_review)
        self.learned.merge(learned)
        return learned

    def message(self, text: str, conversation: str, *, now: datetime | None, turn: Memory | None = None,
                episode_id: str | None = None, commit_empty: bool = True, mark: bool = False,
                title: str | None = None) -> Learned:
        """Learn from one message in one commit. An LLMError propagates: nothing was written.

        turn: the user turn the message is (its id becomes `learned_from`); mark: record on it
        `extracted: true` in the same commit (a turn that taught nothing is marked with the next
        MARK_BATCH such turns, or by `flush`). commit_empty: make the change even when there is
        nothing to learn (eviction runs in it), else only when the plan changes something."""
        if mark and turn is not None and turn.path is not None:
            current = files.still_live(self.vault.root, turn.path, turn.id)
            if current is not None and current.extra.get(EXTRACTED) is True:
                return Learned()  # learned from meanwhile (a catch-up beside a chat): not twice
        plan = self.plan(text, conversation, turn=turn, episode_id=episode_id)
        if not plan.decisions and not commit_empty:
            if mark and turn is not None:
                self._quiet.append(turn)
                if len(self._quiet) >= MARK_BATCH:
                    self.flush()
            # Nothing written, but a fact dropped for holding a secret is still shown in the sum
            quiet = Learned(facts=list(plan.facts), events=withheld_events(plan))
            self.learned.events += quiet.events
            return quiet
        with self.vault.change(self.command) as change:
            if title:
                change.title = title
            learned = self.store(change, plan, now)
            if mark and turn is not None:
                mark_extracted(change, [turn])
        return learned

    def mark(self, change, turns: list[Memory]) -> None:
        """Record in `change` that these user turns have been learned from (an episode's)."""
        mark_extracted(change, turns)

    def flush(self, change=None) -> None:
        """Mark the turns that taught nothing: in `change`, else in a commit of their own."""
        turns, self._quiet = self._quiet, []
        if not turns:
            return
        if change is not None:
            mark_extracted(change, turns)
            return
        with self.vault.change(self.command) as change:
            change.title = f"{len(turns)} turn{'s' if len(turns) != 1 else ''} learned from, no new facts"
            mark_extracted(change, turns)


def owed_learning(memory: Memory, turns: list[Memory]) -> Memory:
    """A user turn stored to be learned from (add --jsonl --extract): `extracted: false` until it has
    been (else as it is). Each chat turn is kept in `turns` for the learning that follows the add."""
    if memory.role == "user" and EXTRACTED not in memory.extra:
        memory.extra[EXTRACTED] = False
    if memory.role in ("user", "assistant"):
        turns.append(memory)
    return memory


def mark_extracted(change, turns: list[Memory]) -> None:
    """Record on each user turn, still as it was, that it has been learned from."""
    for turn in turns:
        current = files.still_live(change.root, turn.path, turn.id, turn.text)
        if current is not None and current.extra.get(EXTRACTED) is not True:
            current.extra[EXTRACTED] = True
            change.rewrite(current)


# -- catching up (`memvault learn`, and every `serve` / `mcp` start) -----------------------------------
# A chat's user turn is written with `extracted: false` and marked true in the commit of what it
# taught. A turn still false was never learned from: the server stopped before its upkeep ran, the
# reply was cut short, the LLM was down. These are found through the index and learned from here.


@dataclass
class CatchUp:
    """What a catch-up found (`turns`, oldest first) and did."""

    turns: list[Memory] = field(default_factory=list)
    done: int = 0  # turns learned from
    no_answer: int = 0  # turns the model gave no valid answer for (still waiting)
    error: str | None = None  # why it stopped (an LLM that is down); the rest still waits
    learned: Learned = field(default_factory=Learned)
    dry_run: bool = False

    @property
    def complete(self) -> bool:
        return self.error is None and not self.no_answer

    def to_json(self) -> dict:
        return {"dry_run": self.dry_run, "waiting": len(self.turns), "done": self.done,
                "no_valid_answer": self.no_answer, "error": self.error,
                "turns": [{"id": t.id, "conversation_id": t.conversation_id,
                           "created_at": files.format_time(t.created_at), "text": t.text} for t in self.turns],
                "changes": self.learned.to_json()}


def unlearned_turns(vault, conversation: str | None = None, since: datetime | None = None,
                    before: datetime | None = None) -> list[Memory]:
    """The user turns still owed learning, oldest first: of one conversation (None: all), created
    at or after `since` and before `before`; in extraction_mode predict-calibrate, not those of an
    open episode (its close learns from them)."""
    turns = []
    for row in vault.index.unlearned_turn_rows(conversation):
        turn = files.still_live(vault.root, vault.root / row["path"], row["id"])
        if turn is None or turn.extra.get(EXTRACTED) is not False:
            continue
        if (since is None or turn.created_at >= since) and (before is None or turn.created_at < before):
            turns.append(turn)
    if vault.settings.extraction_mode == "predict-calibrate" and turns:
        from memvault.learning.sessions import open_turns

        waiting_for_close = {t.id for c in {t.conversation_id for t in turns} for t in open_turns(vault, c)}
        turns = [t for t in turns if t.id not in waiting_for_close]
    return turns


@dataclass
class TurnsLearned:
    """What `learn_from_turns` did: turns learned from, turns the model gave no valid answer for
    (they wait), and the LLMError that stopped it (the rest waits), if one did."""

    done: int = 0
    no_answer: int = 0
    stopped: Exception | None = None


def learn_from_turns(learner: Learner, turns: list[Memory], progress: Callable[[int, int], None] | None = None,
                     title: str = "", strict: bool = False) -> TurnsLearned:
    """The one loop that learns from stored user turns (a catch-up, an import's --extract, a batch's
    add --jsonl --extract): each turn, oldest first as given, in a commit of its own when it taught
    something (marked learned from in it); those that taught nothing marked MARK_BATCH to a commit.
    A turn the model gives no valid answer for stays waiting (a warning); an LLM that is down stops
    it (`stopped`; the rest stays waiting). strict: either raises instead. title: after "facts from a
    turn of <conversation>" in each commit's title."""
    from memvault.errors import LLMError, LLMNoValidAnswer

    outcome = TurnsLearned()
    try:
        for number, turn in enumerate(turns, 1):
            try:
                learner.message(turn.text, turn.conversation_id, now=turn.created_at, turn=turn, mark=True,
                                commit_empty=False, title=f"facts from a turn of {turn.conversation_id}{title}")
            except LLMNoValidAnswer as exc:
                if strict:
                    raise
                outcome.no_answer += 1
                if learner.warn:
                    learner.warn(f"memvault: warning: turn {turn.id[:8]} of {turn.conversation_id} not learned "
                                 f"from: {exc}")
                continue
            except LLMError as exc:
                if strict:
                    raise
                outcome.stopped = exc
                break
            outcome.done += 1
            if progress is not None:
                progress(number, len(turns))
    finally:
        learner.flush()  # the turns that taught nothing are marked too
    return outcome


def catch_up(learner: Learner, turns: list[Memory], progress: Callable[[int, int], None] | None = None) -> CatchUp:
    """Learn from each turn still owed learning (learn_from_turns); what stopped it, said for `memvault learn`."""
    outcome = CatchUp(turns=list(turns), learned=learner.learned)
    done = learn_from_turns(learner, turns, progress, title=" (caught up)")
    outcome.done, outcome.no_answer = done.done, done.no_answer
    if done.stopped is not None:
        outcome.error = f"{done.stopped}; learned from {outcome.done} of {len(turns)} turns, the rest waits"
    elif outcome.no_answer:
        outcome.error = (f"the model gave no valid answer for {outcome.no_answer} of {len(turns)} turns; "
                         "they wait for the next `memvault learn`")
    return outcome


def learn_from_batch(learner: Learner, turns: list[Memory], close: Callable[[str, datetime], list]):
    """Learning from a batch of stored turns (`add --jsonl --extract`): per user message in extraction_mode
    message (as `add --extract`; an LLM failure raises), then every conversation's turns not in an episode
    yet cut into episodes, the last one closed (`close(conversation, its newest turn's time)`: with
    boundary `import`, learned from per episode in predict-calibrate). Returns (Learned, [episodes.Closed])."""
    if learner.vault.settings.extraction_mode == "message":
        users = sorted((t for t in turns if t.role == "user"), key=lambda t: (t.created_at, t.id))
        learn_from_turns(learner, users, strict=True)
    learned, closed = learner.learned, []
    for conversation in dict.fromkeys(t.conversation_id for t in turns):
        latest = max(t.created_at for t in turns if t.conversation_id == conversation)
        for episode in close(conversation, latest):
            closed.append(episode)
            learned.merge(episode.learned)
    return learned, closed


def learn_from_texts(learner: Learner, texts: list[str], conversation: str, now: datetime | None) -> Learned:
    """`add --extract`: the user's words, no stored turn. In extraction_mode predict-calibrate the texts
    given together are one episode (no episode file: no turns to point at), in one commit; a model that
    gives no valid answer there, or extraction_mode message: one commit per text."""
    if learner.vault.settings.extraction_mode == "predict-calibrate":
        said = [files.new_memory(piece, "user", conversation, created_at=now) for piece in texts]
        plan = learner.plan_episode(said, conversation, None)
        if plan is not None:
            with learner.vault.change(learner.command) as change:
                return learner.store(change, plan, now)
    for piece in texts:
        learner.message(piece, conversation, now=now)
    return learner.learned
