"""What the full-text index reads for a memory (docs/design.md, "The index").

A chat turn is often meaningless alone ("Yes, it was amazing!"): what it is about was said in
the turns before it. So BM25 reads a turn together with up to CONTEXT_TURNS turns before it in
the same exchange (turns of its conversation with no silence longer than CONTEXT_GAP between
them) and its date in words ("8 May 2023", so "what did we talk about in May 2023" finds it).
The vector is of the turn alone, and a search shows and returns the turn alone. Facts, notes
and decisions are read as they are. Measured on LoCoMo (bench/README.md, "Retrieval quality, issue 15"):
the context in BM25 is worth R@10 +.10; in the embedding it costs recall (and embedding time).

Turns are ordered by their file names (`<ts>__<id>.md`, UTC creation time), so the neighbours
of a turn are found by listing its conversation's two turn folders, without reading them.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_left
from datetime import datetime, timedelta, timezone
from pathlib import PurePosixPath

from memvault.store import files
from memvault.store.files import Memory

CONTEXT_TURNS = 2
CONTEXT_GAP = timedelta(hours=1)  # a reply read and answered within the hour is the same exchange
TURN_ROLES = ("user", "assistant")
_STAMPED = re.compile(r"^(\d{8}T\d{12}Z)__")


def date_words(moment: datetime) -> str:
    """ "8 May 2023": how people write a date in a question, so BM25 can match it."""
    return f"{moment.day} {moment.strftime('%B %Y')}"


def _stamp_time(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc)


class TurnContexts:
    """The text BM25 indexes for memories of one sync. `pending` maps the vault-relative paths
    being indexed to their memories (their neighbours are then taken from it, not read again)."""

    def __init__(self, root, pending: dict[str, Memory] | None = None):
        self.root = root
        self.pending = pending or {}
        self._orders: dict[str, list[tuple[str, str]]] = {}  # conversation folder -> [(stamp, rel)]
        self.refreshed: list[str] = []  # unchanged turns indexed again because their context changed

    def index_text(self, rel: str, memory: Memory) -> str:
        if memory.role not in TURN_ROLES:
            return memory.text
        before = [m.text for m in self.before(rel, memory)]
        return "\n".join([memory.text, *before, date_words(memory.created_at)])

    def before(self, rel: str, memory: Memory) -> list[Memory]:
        """Up to CONTEXT_TURNS turns before this one in its exchange, nearest first."""
        found: list[Memory] = []
        order = self._order(rel)
        stamp = _stamp_of(rel)
        if stamp is None:
            return found
        position = bisect_left(order, (stamp, rel))
        later = memory.created_at
        for prior_stamp, prior_rel in reversed(order[max(0, position - CONTEXT_TURNS):position]):
            if later - _stamp_time(prior_stamp) > CONTEXT_GAP:
                break
            prior = self._memory(prior_rel)
            if prior is None:
                break
            found.append(prior)
            later = prior.created_at
        return found

    def after(self, rels) -> set[str]:
        """The turns whose indexed text includes one of these (added, changed or removed) turns:
        up to CONTEXT_TURNS turns after each, in the same conversation. They must be indexed again."""
        followers: set[str] = set()
        for rel in rels:
            stamp = _stamp_of(rel)
            if stamp is None or not _is_turn_path(rel):
                continue
            order = self._order(rel)
            position = bisect_left(order, (stamp, rel))
            if position < len(order) and order[position][1] == rel:
                position += 1
            followers.update(r for _, r in order[position:position + CONTEXT_TURNS])
        return followers - set(rels)

    # -- internals --------------------------------------------------------------------------
    def _order(self, rel: str) -> list[tuple[str, str]]:
        folder = PurePosixPath(rel).parts[:2]  # entries/<conversation>
        key = "/".join(folder)
        if key not in self._orders:
            order = []
            for role in TURN_ROLES:
                sub = PurePosixPath(*folder, files.ROLE_FOLDERS[role])
                try:
                    names = os.listdir(os.path.join(os.fspath(self.root), *sub.parts))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                for name in names:
                    match = _STAMPED.match(name)
                    if match and name.endswith(".md"):
                        order.append((match.group(1), f"{sub.as_posix()}/{name}"))
            order.sort()
            self._orders[key] = order
        return self._orders[key]

    def _memory(self, rel: str) -> Memory | None:
        memory = self.pending.get(rel)
        if memory is None:
            try:
                memory = files.read_memory(self.root / rel, self.root)[0]
            except Exception:  # unreadable: the sync reports it on its own account
                return None
        return memory


def _stamp_of(rel: str) -> str | None:
    match = _STAMPED.match(PurePosixPath(rel).name)
    return match.group(1) if match else None


def _is_turn_path(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return len(parts) >= 4 and "/".join(parts[2:4]) in {files.ROLE_FOLDERS[r] for r in TURN_ROLES}
