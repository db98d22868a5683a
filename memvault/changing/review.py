"""`memvault review`: look over what memvault learned, keep it or reject it (docs/design.md, "Review").

What is listed: every learned fact the user has not looked over yet, newest first, in one of three
states (`ReviewItem.status`):
- `pending`: waiting, with the setting learned_review = true: stored under pending/, never searched
  nor injected, replacing nothing until it is kept;
- `proposal`: live, and it would retire facts the user added (`would_replace`); those stay live
  until it is kept, since a small model's "no longer true" must never silently undo the user's words;
- `learned`: live, any learned fact it made untrue already retired (learned replacing learned).

Keep: a pending fact becomes a live fact (same id, moved to facts/), a proposal retires what it
names; the fact is marked `reviewed` (kept, or edited with new text) and is not listed again.
Reject: the fact is soft-deleted with reason `rejected`, and what it retired comes back. Each call is
one commit; the rolling summary follows (summaries.set_aside).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from memvault.store import files
from memvault.errors import MemvaultError, UsageError
from memvault.store.files import Memory
from memvault.learning.learn import RETIRED, SAID_KEY, WOULD_REPLACE


@dataclass
class ReviewItem:
    """One learned fact to look over."""

    memory: Memory
    status: str  # pending, proposal, learned
    said: str | None = None  # the words it was learned from (the chat turn, or the text given)
    source_id: str | None = None  # the chat turn it was learned from
    would_replace: list[Memory] = field(default_factory=list)  # the user's facts it would retire once kept
    replaced: list[Memory] = field(default_factory=list)  # what it retired already (reject brings it back)

    def to_json(self, root=None) -> dict[str, Any]:
        return {"id": self.memory.id, "status": self.status, "kind": self.memory.kind,
                "conversation_id": self.memory.conversation_id,
                "created_at": files.format_time(self.memory.created_at), "text": self.memory.text,
                "said": self.said, "learned_from": self.source_id,
                "would_replace": [{"id": m.id, "text": m.text} for m in self.would_replace],
                "replaced": [{"id": m.id, "text": m.text} for m in self.replaced],
                "path": self.memory.path.relative_to(root).as_posix() if root and self.memory.path else None}


@dataclass
class ReviewOutcome:
    """What keep or reject did: the vault.Events of its commit (summaries left out)."""

    action: str  # keep, reject
    events: list = field(default_factory=list)
    commit: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "commit": self.commit, "changes": [e.to_json() for e in self.events]}


def status_of(memory: Memory) -> str:
    if memory.role == files.PENDING_ROLE:
        return "pending"
    return "proposal" if memory.extra.get(WOULD_REPLACE) else "learned"


def waiting(vault, conversation: str | None = None, limit: int | None = None) -> list[ReviewItem]:
    """The learned facts not reviewed yet, newest first (found through the index, read from their
    files), each with the words it came from and what it would replace or replaced: looked up by id
    with one status of git for the whole list (Index.one_status), not one per lookup."""
    items: list[ReviewItem] = []
    with vault.index.one_status():
        for row in vault.index.unreviewed_rows(conversation):
            memory = files.still_live(vault.root, vault.root / row["path"], row["id"])
            if memory is None or not files.is_learned(memory) or memory.extra.get(files.REVIEWED):
                continue
            items.append(describe(vault, memory))
            if limit is not None and len(items) >= limit:
                break
    return items


def describe(vault, memory: Memory) -> ReviewItem:
    item = ReviewItem(memory, status_of(memory))
    source = memory.extra.get("learned_from")
    if source:
        item.source_id = str(source)
        turn = _find(vault, item.source_id)
        item.said = turn.text if turn is not None else None
    elif memory.extra.get(SAID_KEY):
        item.said = str(memory.extra[SAID_KEY])
    elif memory.extra.get("episode_id"):
        episode = _find(vault, str(memory.extra["episode_id"]))
        if episode is not None:
            item.said = f"episode \"{episode.extra.get('title') or ''}\": {episode.text}"
    item.would_replace = [m for m in (_find(vault, i) for i in _ids(memory.extra.get(WOULD_REPLACE)))
                          if m is not None and not m.is_deleted]
    item.replaced = [m for m in (_find(vault, i) for i in _ids(memory.extra.get(RETIRED)) +
                                 _ids(memory.extra.get("replaces"))) if m is not None]
    return item


def keep(vault, ids: list[str], text: str | None = None, now: datetime | None = None) -> ReviewOutcome:
    """Keep learned facts (one commit): a pending one goes live, a proposal retires the facts it
    names (those still live), each is marked reviewed. text: keep one fact with these words instead."""
    from memvault.learning import summaries
    from memvault.learning.extraction import _carries

    now = now or files.utcnow()
    targets = _resolve(vault, ids)
    if text is not None:
        text = text.strip()
        if len(targets) != 1:
            raise UsageError("new text goes with one fact at a time")
        if not text:
            raise UsageError("the new text is empty (reject the fact instead)")
        files.check_text(text)
    _refuse_secrets(vault, targets, text)
    outcome = ReviewOutcome("keep")
    with vault.change("review") as change:
        change.title = f"kept {len(targets)} learned fact{'s' if len(targets) != 1 else ''}"
        retired: dict[str, list[Memory]] = {}
        for memory in targets:
            current = _still_as_listed(vault, memory)
            edited = text is not None and text != current.text
            if edited:
                current.text = text
            current.extra[files.REVIEWED] = "edited" if edited else "kept"
            current.extra["reviewed_at"] = files.format_time(now)
            names = _ids(current.extra.pop(WOULD_REPLACE, None))
            if names:
                current.extra[RETIRED] = list(dict.fromkeys(_ids(current.extra.get(RETIRED)) + names))
            if current.role == files.PENDING_ROLE:
                change.move(current, "memory")
            else:
                change.rewrite(current)
            for old_id in names:
                old = _find(vault, old_id)
                if old is None or old.is_deleted:
                    continue  # gone meanwhile (removed by the user): nothing to retire
                reason = "update" if _carries(current.text, old.text) else "contradiction"
                change.soft_delete(old, reason, replaced_by=current, now=now)
                retired.setdefault(current.conversation_id, []).append(old)
        for conversation, gone in retired.items():
            summaries.set_aside(change, conversation, gone, now=now)
    outcome.events = _shown(change.events)
    outcome.commit = change.commit_sha
    return outcome


def _refuse_secrets(vault, targets: list[Memory], text: str | None) -> None:
    """A learned fact is never kept holding a secret or a placeholder of one (docs/design.md, "Secrets"):
    learning drops such facts, but a vault from before, or a pending file edited by hand, may hold one.
    Checked before anything is written."""
    from memvault.store import secret_scan

    if not secret_scan.enabled(vault):
        return
    if text is not None:
        if secret_scan.holds_secret(text):
            raise UsageError("the new text holds a secret (or a [secret: ...] placeholder); a learned fact never "
                             "keeps one: give other words, or reject the fact")
        return
    for memory in targets:
        if secret_scan.holds_secret(memory.text):
            raise UsageError(f"{memory.id} ({vault.relative(memory.path)}) holds a secret; a learned fact never "
                             f"keeps one: reject it, or keep it with other words; nothing was written")


def _still_as_listed(vault, memory: Memory) -> Memory:
    """The fact as it is on disk, refused if it changed since it was resolved (keep and reject)."""
    current = files.still_live(vault.root, memory.path, memory.id, memory.text)
    if current is None:
        raise MemvaultError(f"{vault.relative(memory.path)} changed meanwhile; nothing was written")
    return current


def reject(vault, ids: list[str], reason: str | None = None, now: datetime | None = None) -> ReviewOutcome:
    """Reject learned facts (one commit): each is soft-deleted with reason `rejected` (reason: the
    user's words, as `deleted_note`), and the facts it retired come back live."""
    from memvault.learning import summaries
    from memvault.changing.manage import check_note

    now = now or files.utcnow()
    note = check_note(reason)
    targets = _resolve(vault, ids, reviewed_too=True)
    outcome = ReviewOutcome("reject")
    with vault.change("review") as change:
        change.title = f"rejected {len(targets)} learned fact{'s' if len(targets) != 1 else ''}"
        gone: dict[str, list[Memory]] = {}
        for memory in targets:
            current = _still_as_listed(vault, memory)
            change.soft_delete(current, "rejected", now=now, note=note)
            gone.setdefault(current.conversation_id, []).append(current)
            for tombstone in _retired_by(vault, current):
                _bring_back(vault, change, tombstone, now)
        for conversation, memories in gone.items():
            summaries.set_aside(change, conversation, memories, now=now)
    outcome.events = _shown(change.events)
    outcome.commit = change.commit_sha
    return outcome


# -- internals --------------------------------------------------------------------------------------

def _resolve(vault, ids: list[str], reviewed_too: bool = False) -> list[Memory]:
    """The live learned facts these ids name, each once; one id that is not one changes nothing."""
    from memvault.changing.manage import find_live

    if not ids:
        raise UsageError("give at least one ID")
    vault.require_existing()
    found: dict[str, Memory] = {}
    for id_or_prefix in ids:
        memory = find_live(vault, id_or_prefix)
        if not files.is_learned(memory):
            raise UsageError(f"memory {memory.id} is not a learned fact ({memory.kind}"
                             f"{', added by you' if memory.role == 'memory' else ''}); review keeps or rejects "
                             "what memvault learned (`memvault rm` removes any memory)")
        if memory.extra.get(files.REVIEWED) and not reviewed_too:
            raise UsageError(f"memory {memory.id} was reviewed already ({memory.extra[files.REVIEWED]})")
        found.setdefault(memory.id, memory)
    return list(found.values())


def _retired_by(vault, memory: Memory) -> list[Memory]:
    """The tombstones of the facts `memory` retired: those it names, and any of its conversation
    whose `replaced_by` is it (facts learned before it named them)."""
    named = set(_ids(memory.extra.get(RETIRED)) + _ids(memory.extra.get("replaces")))
    folder = vault.entries / files.conversation_slug(memory.conversation_id) / files.DELETED / \
        files.ROLE_FOLDERS["memory"]
    paths = sorted(p for p in folder.glob("*.md") if files.is_memory_file(p)) if folder.is_dir() else []
    found = {}
    for path in paths:  # the fact tombstones of its conversation only
        tombstone = files.read_optional(path, vault.root)
        if tombstone is not None and (tombstone.id in named or tombstone.extra.get("replaced_by") == memory.id):
            found.setdefault(tombstone.id, tombstone)
    return list(found.values())


def _bring_back(vault, change, tombstone: Memory, now: datetime) -> None:
    """A tombstone live again where it was (as `memvault restore` does), unless that place is taken."""
    rel = PurePosixPath(vault.relative(tombstone.path))
    live = vault.root.joinpath(*rel.parts[:2], *rel.parts[3:])
    if live.exists():
        vault.say(f"memvault: {vault.relative(live)} exists; {tombstone.id} stays deleted")
        return
    reason = tombstone.extra.get("deleted_reason")
    for key in ("deleted_at", "deleted_reason", "replaced_by"):
        tombstone.extra.pop(key, None)
    tombstone.extra["restored_at"] = files.format_time(now)
    change.move_back(tombstone, live, reason)


def _find(vault, memory_id: str) -> Memory | None:
    from memvault.errors import NotFound

    try:
        return vault.find(memory_id)
    except (NotFound, UsageError):
        return None


def _ids(value: Any) -> list[str]:
    if not value:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _shown(events: list) -> list:
    return [e for e in events if e.memory.role != "summary"]


def decide(vault, keep_ids=(), reject_ids=(), text: str | None = None, reason: str | None = None,
           now: datetime | None = None) -> ReviewOutcome:
    """Keep or reject, by the rules every face gives: the ids of learned facts to keep or to reject (one
    of the two), `text` only with keep, `reason` only with reject (UsageErrors naming the parameters)."""
    keep_ids, reject_ids = list(keep_ids or ()), list(reject_ids or ())
    if bool(keep_ids) == bool(reject_ids):
        raise UsageError("give the ids of learned facts to keep or to reject (one of the two)",
                         params=("keep", "reject"))
    if text is not None and not keep_ids:
        raise UsageError("text goes with keep", params=("text", "keep"))
    if reason is not None and not reject_ids:
        raise UsageError("reason goes with reject", params=("reason", "reject"))
    if keep_ids:
        return keep(vault, keep_ids, text=text, now=now)
    return reject(vault, reject_ids, reason=reason, now=now)
