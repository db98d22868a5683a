"""One conversation at a glance (`Memvault.conversation`, the page's conversation view; docs/design.md,
"The library API and its faces"): its memories counted by kind (browse.py), its rolling summary, marked
stale when it was set aside (summaries.py, section 8), its newest episodes (section 15) and how many of its
learned facts wait for review (section 17). Reads folder listings, one summary file, the episodes shown,
and the index's record of what waits for review; writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memvault.store import files
from memvault.store.files import Memory


@dataclass
class ConversationView:
    info: Any  # browse.ConversationInfo: live memories by kind, tombstones, newest activity
    summary: Memory | None = None  # the rolling summary's file, set aside or not
    stale: bool = False  # set aside: a fact it may state went away; the next learning writes it again
    episodes: list[Memory] = field(default_factory=list)  # newest first, at most as many as asked for
    review: int = 0  # learned facts of it waiting for review

    def to_json(self, root=None) -> dict[str, Any]:
        return {**self.info.to_json(), "summary": self.summary.text if self.summary else None,
                "summary_updated": (self.summary.extra.get("updated_at") or files.format_time(self.summary.created_at))
                if self.summary else None, "stale": self.stale,
                "episodes": [m.to_json(root) for m in self.episodes], "review": self.review}


def conversation(vault, conversation: str, episodes: int = 20) -> ConversationView:
    """`Memvault.conversation`: the view of one conversation (NotFound when the vault has none of it)."""
    from memvault.errors import UsageError
    from memvault.learning import summaries
    from memvault.reading import browse, listing

    files.check_conversation_id(conversation)
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 0:
        raise UsageError(f"episodes must be a whole number of at least 0, not {episodes!r}", params="episodes")
    vault.require_existing()
    info = browse.conversation_info(vault, conversation)
    summary = summaries.summary_file(vault, info.id)
    view = ConversationView(info, summary, bool(summary is not None and summary.extra.get(summaries.STALE)))
    view.episodes = list(listing.recent(vault, info.id, limit=episodes, roles=("episode",)))
    view.review = len(vault.index.unreviewed_rows(info.id))
    return view
