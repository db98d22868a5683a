"""What the vault held at a moment (issue 29, `--as-of`), from the files' own times: a memory
created later is absent; one deleted or replaced later is present, as it was then. No git checkout.

Two things the files do not say, git does (issue 44):
- what an import brought in after the moment (`Imported`): its created_at is when it was said or
  written elsewhere, and the vault held it only from the commit that added its file;
- a memory edited after the moment (its `updated_at`) is shown as its file read then, found in git's
  history of the file (`version_then`), and says that it was edited since; where the history does not
  have it, it is today's text, said as such. A hand edit leaves no time in the file: not seen.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Iterator

from memvault.store import files


def version_then(vault, memory: files.Memory, moment: datetime) -> files.Memory:
    """The memory (as files.as_held gives it) as it read at `moment` when an edit after it changed it:
    the newest version of its file in git's history (the file, or its live counterpart for a
    tombstone) whose own time (updated_at, else created_at) is not after the moment, marked
    `edited_since`; today's memory, marked with `edited_text_of` "now", when no version is found (no
    git, a history rewritten). One `git log` and one `git cat-file --batch` of that file's versions."""
    edited = _time(memory.extra.get("updated_at"))
    if edited is None or edited <= moment or memory.path is None:
        return memory
    then = _from_history(vault, memory, moment)
    view = then if then is not None else memory
    view.as_of = moment
    view.deleted_since = memory.deleted_since
    view.edited_since = files.format_time(edited)
    view.edited_text_of = "then" if then is not None else "now"
    return view


def _from_history(vault, memory: files.Memory, moment: datetime) -> files.Memory | None:
    from memvault.reading.history import counterparts
    from memvault.store import gitrepo

    root = vault.root
    paths = counterparts(vault.relative(memory.path))
    try:
        commits = gitrepo.git_output(root, "log", "--format=%H", "--full-history", "--", *paths).split()
        blobs = gitrepo.read_blob_bytes(root, [f"{c}:{p}" for c in commits for p in paths])
    except Exception:  # no repository, git missing or failing: today's text, said as such
        return None
    for commit in commits:  # newest first
        for rel in paths:
            raw = blobs.get(f"{commit}:{rel}")
            if raw is None:
                continue
            try:
                old, _ = files.parse_memory(raw.decode("utf-8"), root / rel, root=root)
            except Exception:  # a version that does not parse (a broken hand edit committed): not the one
                continue
            if old.id != memory.id or files.is_deleted_path(PurePosixPath(rel)):
                continue
            changed = _time(old.extra.get("updated_at")) or old.created_at
            if changed <= moment:
                old.path = memory.path
                return old
    return None


def _time(value) -> datetime | None:
    try:
        return files.parse_time(value) if value else None
    except (ValueError, TypeError):
        return None


class Imported:
    """What imports brought into the vault after a moment: the files commits after it added (git log
    --since, so only the history since the moment is read), asked once, when first needed."""

    def __init__(self, vault, moment: datetime):
        self.vault, self.moment = vault, moment
        self._added: dict[str, str] | None = None

    def added(self) -> dict[str, str]:
        """{vault-relative path: when its commit added it (ISO 8601)} for the commits after the moment."""
        if self._added is None:
            from memvault.store import gitrepo

            self._added = {}
            try:
                log = gitrepo.git_output(self.vault.root, "log", f"--since={self.moment.isoformat()}", "--no-renames",
                                         "--diff-filter=A", "--name-only", "--format=%x1e%cI", "--", files.ENTRIES)
            except Exception:  # no repository, git missing or failing: the files' times alone
                return self._added
            for block in log.split("\x1e")[1:]:
                when, *paths = block.strip("\n").split("\n")
                if files.parse_time(when) <= self.moment:
                    continue  # --since counts its own second (git keeps whole seconds)
                for path in paths:
                    if path:
                        self._added.setdefault(path, when)  # newest first: the last time it came
        return self._added

    def after(self, memory: files.Memory) -> str | None:
        """When an import brought this memory in, if that was after the moment (its live file's path:
        a tombstone made later is not its arrival); None otherwise."""
        if memory.extra.get(files.ORIGIN_KEY) != "import" or memory.path is None:
            return None
        from memvault.reading.history import counterparts

        rel = self.vault.relative(memory.path)
        live = counterparts(rel)[1] if files.is_deleted_path(PurePosixPath(rel)) else rel
        return self.added().get(live)

    def paths(self) -> set[str]:
        """The paths whose rows a search of the moment leaves out: imported files added after it."""
        return {path for path in self.added() if not files.is_deleted_path(PurePosixPath(path))
                and self._imported(path)}

    def _imported(self, rel: str) -> bool:
        try:
            memory, _ = files.read_memory(self.vault.root / rel, self.vault.root)
        except Exception:
            return False
        return memory.extra.get(files.ORIGIN_KEY) == "import"


def tombstones_held_at(vault, moment: datetime, imported: Imported | None = None) -> list[files.Memory]:
    """The tombstones of memories the vault held at `moment` (created by then, deleted after, not
    imported after it); unreadable files are passed over, as a search passes over them."""
    paths = (p for p in files.walk_entries(vault.root, include_deleted=True)
             if files.is_deleted_path(p.relative_to(vault.root)))
    return [m for m in vault.read_all(paths) if m.role not in ("summary", files.PENDING_ROLE)
            and files.held_at(m, moment) and (imported is None or imported.after(m) is None)]


class HeldIndex:
    """The index as it stood at a moment, for the read path: the snapshot table, everything else
    (the embedder, episodes, notices) the real index's."""

    dense_copy = None  # the real index's copy follows the real table, not this one (dense_copy.py)

    def __init__(self, index, table):
        self._index, self._table = index, table

    def table(self, create: bool = False):
        return self._table

    def fts_damage(self, thorough: bool = False):
        """The snapshot's BM25 index was made just now, from the rows."""
        return None

    def rows(self, columns, roles=None, conversation=None):
        """The snapshot's rows (so an episode written after the moment heads no result)."""
        return type(self._index).rows(self, columns, roles, conversation)

    def __getattr__(self, name):
        return getattr(self._index, name)


@contextmanager
def index_at(vault, index, moment: datetime) -> Iterator[HeldIndex]:
    """An index of what the vault held at `moment`, in a temporary folder removed afterwards."""
    imported = Imported(vault, moment)
    with tempfile.TemporaryDirectory(prefix="memvault-as-of-") as folder:
        yield HeldIndex(index, index.snapshot(moment, tombstones_held_at(vault, moment, imported), Path(folder),
                                              left_out=imported.paths()))


def memory_at(vault, memory, moment):
    """A memory as the vault held it at `moment` (None: as it is; a tombstone of one deleted later as it
    was then, without its deletion keys; one edited after it as its text of then, `version_then`);
    NotFound, saying why, when it was not held then (not created yet, deleted, or imported after it)."""
    from memvault.errors import NotFound

    if moment is None:
        return memory
    when = files.format_time(moment)
    if not files.held_at(memory, moment):
        if memory.created_at > moment:
            raise NotFound(f"memory {memory.id} did not exist yet at {when} "
                           f"(created {files.format_time(memory.created_at)})")
        raise NotFound(f"memory {memory.id} was deleted before {when} "
                       f"(deleted_at {memory.extra.get('deleted_at') or 'not recorded'})")
    imported = Imported(vault, moment).after(memory)
    if imported is not None:
        raise NotFound(f"memory {memory.id} was not in the vault yet at {when} (imported "
                       f"{imported}; said {files.format_time(memory.created_at)})")
    return version_then(vault, files.as_held(memory, moment), moment)
