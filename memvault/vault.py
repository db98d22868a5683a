"""The vault: a folder of memory files that is also a git repository.

`Vault.change(command)` is the one way to write: it takes the inter-process
lock, lets the command add, replace and soft-delete memories, then updates the
index for exactly those files and makes one git commit naming them.
"""

from __future__ import annotations

import errno
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable, Iterator

from memvault import files
from memvault.config import Settings, load_settings
from memvault.errors import MemoryFileError, MemvaultError, NotFound, UsageError
from memvault.files import Memory
from memvault.lock import vault_lock

SIDECAR = ".memvault"


class Vault:
    def __init__(self, root: Path, settings: Settings | None = None, auto_index: bool = True):
        self.root = Path(os.path.abspath(Path(root).expanduser()))
        self._settings = settings
        # Where a write that waits for the lock says so (the CLI silences it with -q).
        self.notice: Callable[[str], None] | None = lambda message: sys.stderr.write(message + "\n")
        # Index what a change wrote in the same invocation (costs a model load);
        # off only for callers that sync the index themselves.
        self.auto_index = auto_index

    @classmethod
    def open(cls, root: Path, overrides: dict | None = None) -> "Vault":
        root = Path(os.path.abspath(Path(root).expanduser()))
        if root.exists() and not root.is_dir():
            raise UsageError(f"vault path {root} exists and is not a folder")
        return cls(root, load_settings(root if root.is_dir() else None, overrides=overrides))

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.root if self.root.is_dir() else None)
        return self._settings

    # -- layout --------------------------------------------------------------
    @property
    def sidecar(self) -> Path:
        return self.root / SIDECAR

    @property
    def lock_path(self) -> Path:
        return self.sidecar / "lock"

    @property
    def entries(self) -> Path:
        return self.root / files.ENTRIES

    def exists(self) -> bool:
        return self.entries.is_dir() or (self.root / ".git").is_dir()

    def require_existing(self) -> "Vault":
        """For commands that read: a clear line instead of creating an empty vault."""
        if not self.exists():
            raise MemvaultError(f"no vault at {self.root} (it is created by the first `memvault add`)")
        return self

    def relative(self, path: Path) -> str:
        return Path(path).relative_to(self.root).as_posix()

    # -- creation ------------------------------------------------------------
    def create(self) -> None:
        """Make the folder, git init it, write .gitignore, initial commit. Idempotent."""
        self._make_folders()
        with vault_lock(self.lock_path, timeout=self.settings.lock_timeout, holder="init", on_wait=self.notice):
            self._init_repository()

    def _make_folders(self) -> None:
        # Safe to race: every mkdir tolerates an existing folder.
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"vault path {self.root} exists and is not a folder")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.sidecar.mkdir(exist_ok=True)
            self.entries.mkdir(exist_ok=True)
            probe = self.sidecar / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise MemvaultError(f"vault {self.root} is not writable: {exc.strerror or exc}") from None

    def _init_repository(self) -> None:
        # Under the lock: two first writers must not both run git init.
        if self.settings.enable_git_versioning:
            from memvault import gitrepo

            gitrepo.init_repo(self.root)
        elif not (self.root / ".gitignore").exists():
            from memvault.gitrepo import GITIGNORE

            files.atomic_write(self.root / ".gitignore", GITIGNORE)

    # -- writing -------------------------------------------------------------
    @contextmanager
    def change(self, command: str, lock_timeout: float | None = None) -> Iterator["Change"]:
        """Lock, create if needed, collect writes, then index + commit (also when the command fails,
        so that what was already written, such as a chat's user turn, is kept and recorded).

        Waits up to `lock_timeout` (default: the lock_timeout setting) for another writer.
        """
        self._make_folders()
        timeout = self.settings.lock_timeout if lock_timeout is None else lock_timeout
        with vault_lock(self.lock_path, timeout=timeout, holder=command, on_wait=self.notice):
            self._init_repository()
            change = Change(self, command)
            try:
                yield change
            finally:
                if change.touched:
                    if self.auto_index and (change.written_paths or change.removed_paths):
                        from memvault.index import index_change

                        index_change(self, change)
                    if self.settings.enable_git_versioning:
                        from memvault import gitrepo

                        change.commit_sha = gitrepo.commit_all(self.root, change.commit_record())

    # -- reading -------------------------------------------------------------
    def iter_memories(
        self,
        conversation: str | None = None,
        roles: Iterable[str] | None = None,
        include_deleted: bool = False,
        on_error: Callable[[MemoryFileError], None] | None = None,
    ) -> Iterator[Memory]:
        """Every readable memory, optionally of one conversation and some roles.

        Files that cannot be read are passed to on_error (or skipped) so one bad file
        never hides the rest.
        """
        role_set = set(roles) if roles else None
        base = self.root
        if conversation is not None:
            base_dir = self.entries / files.conversation_slug(conversation)
            paths = files.walk_entries_under(base_dir, include_deleted) if base_dir.is_dir() else iter(())
        else:
            paths = files.walk_entries(base, include_deleted)
        for path in paths:
            try:
                memory, _adopted = files.read_memory(path, self.root)
            except MemoryFileError as exc:
                if on_error:
                    on_error(exc)
                continue
            if role_set and memory.role not in role_set:
                continue
            yield memory

    def find(self, id_or_prefix: str, include_deleted: bool = True) -> Memory:
        """A memory by id or unique id prefix (like git), live ones preferred over tombstones."""
        needle = id_or_prefix.strip().lower()
        if len(needle) < 4:
            raise UsageError(f"id prefix {id_or_prefix!r} is too short (at least 4 characters)")
        matches = [m for m in self.iter_memories(include_deleted=include_deleted) if m.id.lower().startswith(needle)]
        live = [m for m in matches if not m.is_deleted]
        pool = live or matches
        ids = {m.id for m in pool}
        if not pool:
            raise NotFound(f"no memory with id {id_or_prefix!r} in {self.root}")
        if len(ids) > 1:
            shown = ", ".join(sorted(i[:12] for i in ids)[:5])
            raise UsageError(f"id prefix {id_or_prefix!r} is ambiguous: {shown}")
        return pool[0]


@dataclass
class Change:
    """What one command did to the vault; becomes one commit."""

    vault: Vault
    command: str
    added: list[Memory] = field(default_factory=list)
    deleted: list[Memory] = field(default_factory=list)
    replaced: list[tuple[Memory, Memory]] = field(default_factory=list)
    edited: list[Memory] = field(default_factory=list)
    written_paths: set[Path] = field(default_factory=set)
    removed_paths: set[Path] = field(default_factory=set)
    commit_sha: str | None = None
    title: str | None = None  # a commit subject of the command's own, instead of the generated one
    external: bool = False  # files changed outside memvault (hand edits) are part of this change

    @property
    def touched(self) -> bool:
        return bool(self.written_paths or self.removed_paths or self.external)

    @property
    def root(self) -> Path:
        return self.vault.root

    def _write(self, memory: Memory, path: Path | None = None) -> Path:
        try:
            written = files.write_memory(self.root, memory, path)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
                raise MemvaultError(f"vault {self.root} is not writable: {exc.strerror}") from None
            raise MemvaultError(f"cannot write {path or memory.id}: {exc.strerror or exc}") from None
        self.written_paths.add(written)
        return written

    def add(self, memory: Memory) -> Memory:
        self._write(memory)
        self.added.append(memory)
        return memory

    def rewrite(self, memory: Memory) -> Memory:
        """Rewrite a live memory in place (summaries, `edit`); unknown keys are kept."""
        self._write(memory, memory.path)
        self.edited.append(memory)
        return memory

    def soft_delete(self, memory: Memory, reason: str, replaced_by: str | None = None,
                    now: datetime | None = None) -> Memory:
        """Move the file under deleted/ with deleted_at and deleted_reason: never unlink."""
        if reason not in files.DELETE_REASONS:
            raise UsageError(f"unknown delete reason {reason!r}")
        if memory.path is None or memory.is_deleted:
            raise UsageError(f"memory {memory.id} is not a live file")
        old_path = memory.path
        memory.extra["deleted_at"] = files.format_time(now or files.utcnow())
        memory.extra["deleted_reason"] = reason
        if replaced_by:
            memory.extra["replaced_by"] = replaced_by
        target = files.deleted_path_for(self.root, old_path)
        self._write(memory, target)
        old_path.unlink(missing_ok=True)
        self.removed_paths.add(old_path)
        self.written_paths.discard(old_path)
        if not replaced_by:
            self.deleted.append(memory)
        return memory

    def replace(self, old: Memory, new_text: str, reason: str = "update", now: datetime | None = None) -> Memory:
        """UPDATE: a new file with a fresh id; the old one becomes a tombstone with replaced_by."""
        carried = {k: v for k, v in old.extra.items() if k not in ("updated_at",)}
        new = files.new_memory(new_text, old.role, old.conversation_id, created_at=now or files.utcnow(), extra=carried)
        new.extra["updated_at"] = files.format_time(now or files.utcnow())
        new.extra["replaces"] = old.id
        self._write(new)
        self.soft_delete(old, reason, replaced_by=new.id, now=now)
        self.replaced.append((old, new))
        return new

    def evict(self, conversation: str, max_entries: int, now: datetime | None = None) -> list[Memory]:
        """Past max_entries facts+turns, soft-delete the oldest with reason 'evicted'."""
        pool = list(self.vault.iter_memories(conversation, roles=("memory", "user", "assistant")))
        excess = len(pool) - max_entries
        if excess <= 0:
            return []
        pool.sort(key=lambda m: (m.created_at, m.id))
        evicted = [self.soft_delete(m, "evicted", now=now) for m in pool[:excess]]
        return evicted

    def commit_record(self):
        from memvault.gitrepo import CommitRecord

        return CommitRecord(
            subject=self.subject(),
            added=[m.id for m in self.added],
            deleted=[m.id for m in self.deleted],
            replaced=[(old.id, new.id) for old, new in self.replaced],
            edited=[m.id for m in self.edited],
        )

    def subject(self) -> str:
        if self.title:
            return f"memvault {self.command}: {self.title}"
        conversations = sorted({m.conversation_id for m in self.added + self.deleted + self.edited}
                               | {new.conversation_id for _, new in self.replaced})
        scope = f" ({', '.join(conversations[:3])}{', …' if len(conversations) > 3 else ''})" if conversations else ""
        only_added = self.added and not (self.deleted or self.replaced or self.edited)
        if only_added:
            n = len(self.added)
            return f"memvault {self.command}: {n} memor{'y' if n == 1 else 'ies'}{scope}"
        parts = [f"{len(items)} {word}" for items, word in (
            (self.added, "added"), (self.replaced, "replaced"), (self.deleted, "deleted"), (self.edited, "edited"),
        ) if items]
        return f"memvault {self.command}: {', '.join(parts) or 'changes'}{scope}"
