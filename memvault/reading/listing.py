"""The newest live memories, found by file name (docs/design.md, "The vault on disk").

memvault names a memory `<ts>__<id>.md` with `<ts>` its creation time in UTC, so names sort by
time: the newest memories are found by listing folders and sorting names, and only the files
returned are read. A file without such a name (dropped in by hand) is read to learn its time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable, Iterator

from memvault.store import files
from memvault.errors import MemoryFileError, UsageError
from memvault.store.files import Memory

_STAMPED = re.compile(r"^(\d{8}T\d{12}Z)__")
# Folder (under entries/<conversation>/) -> the role memvault writes there; summaries are not listed.
_FOLDER_ROLES = {tuple(folder.split("/")): role for role, folder in files.ROLE_FOLDERS.items() if role != "summary"}
LISTED_ROLES = tuple(_FOLDER_ROLES.values())
_CURSOR = re.compile(r"^(\d{8}T\d{12}Z)\|(.+)$", re.DOTALL)


class Page(list):
    """A page of memories (a list of files.Memory, in listing order) and `next_cursor`: the cursor
    of the page after it, or None when this page is the last; `marks`, what a line of it shows beside
    each memory (read when first asked for)."""

    def __init__(self, memories=(), next_cursor: str | None = None, marks_of: Callable | None = None):
        super().__init__(memories)
        self.next_cursor = next_cursor
        self._marks_of, self._marks = marks_of, None

    @property
    def marks(self) -> dict[str, list[str]]:
        """{id: marks} for the memories of the page that carry any (MARKS, in that order)."""
        if self._marks is None:
            self._marks = self._marks_of(list(self)) if self._marks_of is not None else {}
        return self._marks


# What a listed memory may be marked with: `earlier` (something newer took its place: it was replaced, or
# a proposal waiting for review would retire it: store/supersession.py), `review` (a learned fact not looked
# over yet: `memvault review` lists it), `secret` (it holds a withheld secret's placeholder, section 18),
# `deleted` (a tombstone).
MARKS = ("earlier", "review", "secret", "deleted")


def marks(vault, memories: list[Memory]) -> dict[str, list[str]]:
    """The MARKS of these memories: the supersessions from the index's record (state.db), the rest from
    the memories themselves."""
    from memvault.store.secret_scan import PLACEHOLDER

    superseded = {row["old_id"] for row in vault.index.supersessions()} if memories else set()
    found: dict[str, list[str]] = {}
    for memory in memories:
        held = [
            memory.id in superseded or bool(memory.is_deleted and memory.extra.get("replaced_by")),
            files.is_learned(memory) and not memory.extra.get(files.REVIEWED) and not memory.is_deleted,
            bool(PLACEHOLDER.search(memory.text)) or any(
                isinstance(v, str) and PLACEHOLDER.search(v) for v in memory.extra.values()),
            memory.is_deleted,
        ]
        if any(held):
            found[memory.id] = [mark for mark, on in zip(MARKS, held) if on]
    return found


def cursor_after(memory: Memory) -> str:
    """The cursor of the page after the one `memory` ends: its creation time and id, and a check
    (a cursor cut short or mistyped is refused, not read as another place), opaque."""
    where = f"{files.file_stamp(memory.created_at)}|{memory.id}"
    return base64.urlsafe_b64encode(f"{where}|{_check(where)}".encode()).decode().rstrip("=")


def _check(where: str) -> str:
    return hashlib.sha256(f"memvault listing {where}".encode()).hexdigest()[:8]


def _read_cursor(cursor: str) -> tuple[str, str]:
    """(creation stamp, id) of the memory that ended the page before; UsageError for anything else."""
    try:
        where, _, check = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().rpartition("|")
        stamp, memory_id = _CURSOR.match(where).groups()
        if check != _check(where):
            raise ValueError(check)
    except (binascii.Error, UnicodeDecodeError, ValueError, AttributeError, TypeError):
        raise UsageError(f"cursor {cursor!r} is not one a listing gave: pass the next_cursor of the page "
                         "before as it is", params="cursor") from None
    return stamp, memory_id


def newest(entries: Path, conversation: str | None = None, *, limit: int = 10,
           roles: Iterable[str] | None = None, on_error: Callable[[MemoryFileError], None] | None = None,
           tags: Iterable[str] = (), since: datetime | None = None, until: datetime | None = None,
           deleted: bool = False, owner_of: Callable[[str], str | None] | None = None,
           as_of: datetime | None = None, cursor: str | None = None,
           imported_later: Callable[[Memory], str | None] | None = None) -> Page:
    """At most `limit` live memories, newest first: of one conversation (None: all), of these
    roles (None: every role but summary), with all these tags, created within since..until; or,
    with deleted, the tombstones instead (newest creation first). Unreadable files go to on_error
    and are passed over, and so is a file claiming an id that owner_of(id) (the index's record)
    gives another file that is there: the index leaves such a copy out too. The time in a name
    prunes before any file is read; tags are read. With as_of, the memories the vault held then
    (files.held_at): live ones created by then and tombstones deleted after it, as they were, less
    those imported_later gives a time (as_of.Imported.after: an import brought them in after it).

    The order is creation time, then id, both descending, so it is total: memories created at the
    same moment page exactly. A Page: the memories, and `next_cursor` (None on the last page),
    which, passed back as `cursor` with the same filters, gives the page after this one."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"limit must be a whole number of at least 1, not {limit!r}")
    # One more than asked for: there is a page after this one.
    found = list(itertools.islice(newest_first(entries, conversation, roles=roles, on_error=on_error, tags=tags,
                                               since=since, until=until, deleted=deleted, owner_of=owner_of,
                                               as_of=as_of, cursor=cursor, imported_later=imported_later), limit + 1))
    found.sort(key=lambda m: (m.created_at, m.id), reverse=True)  # a hand-edited created_at wins over the name
    return Page(found[:limit], cursor_after(found[limit - 1]) if len(found) > limit else None)


def newest_first(entries: Path, conversation: str | None = None, *, roles: Iterable[str] | None = None,
                 on_error: Callable[[MemoryFileError], None] | None = None, tags: Iterable[str] = (),
                 since: datetime | None = None, until: datetime | None = None, deleted: bool = False,
                 owner_of: Callable[[str], str | None] | None = None, as_of: datetime | None = None,
                 cursor: str | None = None, imported_later: Callable[[Memory], str | None] | None = None
                 ) -> Iterator[Memory]:
    """What `newest` finds, one at a time, newest name first: a file is read only when the one
    before it was taken (a chat's session stops at its first long silence)."""
    after = _read_cursor(cursor) if cursor is not None else None
    wanted = set(roles or LISTED_ROLES) - {"summary"}
    if conversation is not None:
        folders = [entries / files.conversation_slug(conversation)]
    else:
        try:
            folders = [entries / name for name in os.listdir(entries) if not name.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return
    wanted_tags = set(tags)
    low = files.file_stamp(since) if since else None
    if as_of is not None:
        until = min(until, as_of) if until else as_of
    high = files.file_stamp(until) if until else None
    if after is not None:
        high = min(high, after[0]) if high else after[0]  # a later name is on an earlier page

    def keep(memory: Memory) -> bool:
        return (memory.role in wanted and wanted_tags <= set(memory.tags)
                and (since is None or memory.created_at >= since) and (until is None or memory.created_at <= until)
                and (as_of is None or files.held_at(memory, as_of))
                and (imported_later is None or imported_later(memory) is None)
                and (after is None or (files.file_stamp(memory.created_at), memory.id) < after))

    # (time, id, folder, name): the listing's order, ids from the names. Folder and name stay strings until
    # the file is read: a Path for each of 10,000 names was most of a page's time (bench/page.py).
    stamped: list[tuple[str, str, str, str]] = []
    read: dict[tuple[str, str], Memory] = {}  # files read already (no time in their name)
    # As of a moment: the live files and the tombstones (deleted after it is held then).
    looks = (False, True) if as_of is not None else (deleted,)
    for folder, look in ((folder, look) for folder in folders for look in looks):
        for here, name, folder_role in _candidates(folder, look, wanted):
            if folder_role is not None and folder_role not in wanted:
                continue
            match = _STAMPED.match(name)
            if match:
                if (low is None or match.group(1) >= low) and (high is None or match.group(1) <= high):
                    stamped.append((match.group(1), name[match.end():-3], here, name))
                continue
            memory = _read(Path(here, name), entries.parent, on_error)
            if memory is not None and memory.role in wanted:
                read[(here, name)] = memory
                stamped.append((files.file_stamp(memory.created_at), memory.id, here, name))
    stamped.sort(reverse=True)
    for _stamp, _id, here, name in stamped:
        path = Path(here, name)
        memory = read.get((here, name)) or _read(path, entries.parent, on_error)
        if memory is None or not keep(memory):
            continue
        owner = owner_of(memory.id) if owner_of is not None and not memory.is_deleted else None
        if owner is not None and (entries.parent / owner) != path and (entries.parent / owner).is_file():
            from memvault.store.index import id_taken

            if on_error is not None:
                on_error(MemoryFileError(path, id_taken(memory.id, owner)))
            continue
        yield files.as_held(memory, as_of) if as_of is not None else memory


def _candidates(conversation_dir: Path, deleted: bool = False,
                wanted: set[str] | None = None) -> Iterable[tuple[str, str, str | None]]:
    """Memory files of one conversation folder outside deleted/ and summaries/ (with deleted: those
    under deleted/, summaries still left out), as (folder, name), with the role their folder stands for
    (None for a folder below one of those); none outside the kind folders. wanted: the roles asked for; a
    role folder of another role is not walked (the caller passes its files over unread anyway: a coding
    agent's turns in a conversation of thousands of facts are looked for in turns/ alone)."""
    if deleted:
        conversation_dir = conversation_dir / files.DELETED
    if os.path.islink(conversation_dir) or not conversation_dir.is_dir():
        return
    for folder, dirs, names in os.walk(conversation_dir, followlinks=False):
        here = Path(folder)
        rel = here.relative_to(conversation_dir).parts
        if not rel:
            dirs[:] = [d for d in dirs if d not in (files.DELETED, "summaries")]
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if wanted is not None:
            dirs[:] = [d for d in dirs if _FOLDER_ROLES.get(rel + (d,), next(iter(wanted), None)) in wanted]
        role = _FOLDER_ROLES.get(rel)
        if not files.in_kind_folder((files.ENTRIES, "c", *rel, "x.md")):
            continue  # not a memory until `reindex` moves it into place (files.in_kind_folder)
        for name in names:
            if files.is_memory_name(name):
                yield folder, name, role


def _read(path: Path, root: Path, on_error) -> Memory | None:
    try:
        return files.read_memory_seen(path, root)[0]
    except MemoryFileError as exc:
        if on_error is not None:
            on_error(exc)
        return None


def recent(vault, conversation: str | None = None, *, limit: int, roles, tags=(), since: datetime | None = None,
           until: datetime | None = None, deleted: bool = False, as_of: datetime | None = None,
           cursor: str | None = None) -> Page:
    """`Memvault.recent`: `newest` over the vault's entries, each file's owner read from the index's record
    (state.db, not the index: a copy claiming another file's id is left out), a file that cannot be read
    said and skipped."""
    from memvault.store.state import owner_lookup

    later = None
    if as_of is not None:  # what an import brought in after the moment was not held then
        from memvault.reading.as_of import Imported

        later = Imported(vault, as_of).after
    with owner_lookup(vault.sidecar / "state.db") as owner_of:
        page = newest(vault.entries, conversation, limit=limit, roles=roles,
                      on_error=lambda exc: vault.say(f"memvault: skipped {exc}"), tags=tuple(tags or ()),
                      since=since, until=until, deleted=deleted, owner_of=owner_of, as_of=as_of, cursor=cursor,
                      imported_later=later)
    page._marks_of = lambda memories: marks(vault, memories)
    return page
