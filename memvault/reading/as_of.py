"""What the vault held at a moment (issue 29, `--as-of`), from the files' own times: a memory
created later is absent; one deleted or replaced later is present, as it was then (its text; an
edit leaves no time in the file, so an edited memory shows its text of now). No git checkout."""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Iterator

from memvault.store import files


def tombstones_held_at(vault, moment: datetime) -> list[files.Memory]:
    """The tombstones of memories the vault held at `moment` (created by then, deleted after);
    unreadable files are passed over, as a search passes over them."""
    paths = (p for p in files.walk_entries(vault.root, include_deleted=True)
             if files.is_deleted_path(p.relative_to(vault.root)))
    return [m for m in vault.read_all(paths) if m.role not in ("summary", files.PENDING_ROLE)
            and files.held_at(m, moment)]


class HeldIndex:
    """The index as it stood at a moment, for the read path: the snapshot table, everything else
    (the embedder, episodes, notices) the real index's."""

    def __init__(self, index, table):
        self._index, self._table = index, table

    def table(self, create: bool = False):
        return self._table

    def rows(self, columns, roles=None, conversation=None):
        """The snapshot's rows (so an episode written after the moment heads no result)."""
        return type(self._index).rows(self, columns, roles, conversation)

    def __getattr__(self, name):
        return getattr(self._index, name)


@contextmanager
def index_at(vault, index, moment: datetime) -> Iterator[HeldIndex]:
    """An index of what the vault held at `moment`, in a temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="memvault-as-of-") as folder:
        yield HeldIndex(index, index.snapshot(moment, tombstones_held_at(vault, moment), Path(folder)))


def memory_at(memory, moment):
    """A memory as the vault held it at `moment` (None: as it is; a tombstone of one deleted later as it
    was then, without its deletion keys); NotFound, saying why, when it was not held then."""
    from memvault.errors import NotFound

    if moment is None:
        return memory
    if not files.held_at(memory, moment):
        when = files.format_time(moment)
        if memory.created_at > moment:
            raise NotFound(f"memory {memory.id} did not exist yet at {when} "
                           f"(created {files.format_time(memory.created_at)})")
        raise NotFound(f"memory {memory.id} was deleted before {when} "
                       f"(deleted_at {memory.extra.get('deleted_at') or 'not recorded'})")
    return files.as_held(memory, moment)
