"""What a memory file says is superseded (issue 29, "the current truth first"; docs/design.md,
"The index"): derived from the files' own keys, never written into the user's files, and kept in
the index's record (state.py, table `superseded`) by the sync that reads the file.

- A tombstone with `replaced_by` (an update, a contradiction; not a sync's losing side): the old
  memory was superseded by the one named, since its `deleted_at`; so was the turn it was
  `learned_from`. Its text is kept, so that a search can tell which other turns and facts state
  the old value (reading/current.py).
- A live learned fact with `would_replace` (a proposal to retire the user's facts, issue 26): each
  fact named is superseded by it for ranking, since its `created_at`, while it stays live until
  `memvault review` keeps the proposal.

A pending fact (role pending, `learned_review = true`) supersedes nothing: no reader sees it.
"""

from __future__ import annotations

from dataclasses import dataclass

from memvault.store import files

REPLACED, PROPOSAL = "replaced", "proposal"


@dataclass(frozen=True)
class Supersession:
    """One memory superseded by another: `old_id` (and `learned_from`, the turn it came from) by `new_id`."""

    old_id: str
    new_id: str
    since: str  # ISO 8601: when the successor took over
    kind: str  # REPLACED or PROPOSAL
    old_text: str = ""  # a replaced memory's words (a proposal's target is live: its row has them)
    learned_from: str = ""

    def row(self, path: str) -> tuple:
        return (path, self.old_id, self.new_id, self.since, self.kind, self.old_text, self.learned_from)


COLUMNS = ("path", "old_id", "new_id", "since", "kind", "old_text", "learned_from")


def declared_by(memory: files.Memory) -> list[Supersession]:
    """The supersessions a memory file declares (none for most)."""
    extra = memory.extra
    if memory.is_deleted:
        successor = extra.get("replaced_by")
        if not successor or memory.role in ("summary", "episode") or extra.get("sync_conflict"):
            return []  # a sync's losing version is the same memory edited twice, not a change of what is true
        since = extra.get("deleted_at") or files.format_time(memory.created_at)
        return [Supersession(memory.id, str(successor), str(since), REPLACED, memory.text,
                             str(extra.get("learned_from") or ""))]
    targets = extra.get("would_replace")
    if memory.role != "memory" or not isinstance(targets, list):
        return []
    since = files.format_time(memory.created_at)
    return [Supersession(str(target), memory.id, since, PROPOSAL) for target in targets if target]
