"""The index's record of the files it has read: `.memvault/state.db` (SQLite).

Per file under entries/ (tombstones included, which have no index row): its id, size, mtime,
ctime, sha256 and git blob id as last read; plus the model the index was built with, the notices
already given, and the git commit the record is synced to with the paths where it differs
from that commit (docs/design.md, "The index"). One SQLite file instead of the JSON file it
replaced, so that a command reads and writes only the entries it needs: at 100,000 files the
JSON was 25 MB, parsed by every search and rewritten by every add.

Writes happen in one transaction (`write`), which the index commits after its table, so a
sync killed at any point leaves the old record, which the next sync finishes from.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable

VERSION = 3
# A record of version 2 is carried over to 3 in place: the table `superseded` is made, and the next
# sync fills it from the tombstones and proposals (no rebuild: nothing is embedded again).
_CARRIED = ("2",)
# Paths are looked up this many at a time (SQLite's limit on host parameters is 32,766).
_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, id TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL, oid TEXT NOT NULL, live INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_id ON files (id);
CREATE TABLE IF NOT EXISTS dirty (path TEXT PRIMARY KEY, oid TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS superseded (
    path TEXT NOT NULL, old_id TEXT NOT NULL, new_id TEXT NOT NULL, since TEXT NOT NULL, kind TEXT NOT NULL,
    old_text TEXT NOT NULL, learned_from TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS superseded_path ON superseded (path);
CREATE TABLE IF NOT EXISTS unscanned (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS learned (id TEXT PRIMARY KEY) WITHOUT ROWID;
"""
# unscanned: the files a sync that does not look for secrets (a search's) read as they are and indexed, with
# the hash it read: edited by hand, not taken in (scanned, committed) yet. A record made before the table
# existed gets it at its next write (no version change: an older memvault ignores it).
_UNSCANNED_TABLE = "CREATE TABLE IF NOT EXISTS unscanned (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL) WITHOUT ROWID"
# `learned`: the user turns learned from that taught nothing (learn.mark_quietly): marked here instead of
# in a commit of their own. A record without the table (written before it) has none: it is made by the
# next write, and read as empty until then.
# What the files declare superseded (store/supersession.py): one row per (declaring file, old memory).
BACKFILL = "backfill_superseded"
_COLUMNS = ("id", "size", "mtime_ns", "ctime_ns", "sha256", "oid", "live")


class Unreadable(Exception):
    """The record is damaged or of an unknown format: the index is rebuilt."""


class State:
    """Open per use: a connection lives as long as this object (one command, or a server's Index)."""

    def __init__(self, path: Path):
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None  # (device, inode) of the file the connection opened

    def _replaced(self) -> bool:
        """Whether another process put a new record in place of the one this connection opened (a
        `reindex --full` removes and rebuilds it): the old file is unlinked, its connection reads a record
        no one writes and cannot write ("attempt to write a readonly database"). A missing file (a rebuild
        under way) is not a replacement yet: the rebuild holds the vault's lock, the writers wait for it."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) != self._file

    # -- connection --------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.path.exists()

    def _conn(self, create: bool = False) -> sqlite3.Connection:
        if self._db is not None and self._replaced():
            self.close()
        if self._db is None:
            if not create and not self.path.exists():
                raise FileNotFoundError(self.path)
            try:
                # Autocommit; `write` opens its own transaction. A second process writing waits.
                db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
                if create:
                    db.executescript(_SCHEMA)
                    if db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() is None:
                        db.execute("INSERT INTO meta VALUES ('version', ?)", (str(VERSION),))
                version = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
                if version is not None and version[0] in _CARRIED:
                    version = _carry_over(db)
            except sqlite3.DatabaseError as exc:
                raise Unreadable(f"index state {self.path} is unreadable ({exc})") from None
            if version is None or version[0] != str(VERSION):
                db.close()
                raise Unreadable(f"index state {self.path} has an unknown format")
            self._db = db
            stat = os.stat(self.path)
            self._file = (stat.st_dev, stat.st_ino)
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def remove(self) -> None:
        """Gone, before a rebuild: a rebuild killed half-way must not leave a record that vouches
        for rows the new table does not have yet."""
        self.close()
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)

    def _query(self, sql: str, args: Iterable = ()) -> list[tuple]:
        try:
            return self._conn().execute(sql, tuple(args)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise Unreadable(f"index state {self.path} is unreadable ({exc})") from None

    # -- reading -----------------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        """{"model", "notices", "commit", "folders"} (None where unknown). Unreadable when damaged;
        FileNotFoundError when there is none."""
        meta = dict(self._query("SELECT key, value FROM meta"))
        try:
            return {"model": json.loads(meta["model"]) if "model" in meta else None,
                    "notices": json.loads(meta.get("notices", "{}")),
                    "commit": meta.get("commit") or None,
                    "backfill": meta.get(BACKFILL) == "1",
                    "folders": json.loads(meta.get("folders", "{}"))}
        except ValueError as exc:
            raise Unreadable(f"index state {self.path} is unreadable ({exc})") from None

    def count(self, live: bool = True) -> int:
        return self._query("SELECT count(*) FROM files" + (" WHERE live = 1" if live else ""))[0][0]

    def entries(self, paths: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """{path: {"id", "size", "mtime_ns", "ctime_ns", "sha256", "oid", "live"}} of these paths (all when None)."""
        if paths is None:
            rows = self._query("SELECT path, " + ", ".join(_COLUMNS) + " FROM files")
        else:
            wanted = sorted(set(paths))
            if len(wanted) > 5000:  # one pass over the table is cheaper than this many lookups
                every = self.entries()
                return {p: every[p] for p in wanted if p in every}
            rows = []
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start:start + _CHUNK]
                rows += self._query("SELECT path, " + ", ".join(_COLUMNS) + " FROM files WHERE path IN ("
                                    + ", ".join("?" * len(chunk)) + ")", chunk)
        return {row[0]: dict(zip(_COLUMNS, row[1:])) for row in rows}

    def live_hashes(self) -> dict[str, str]:
        """{path: sha256} of the live files: what the index's rows should be."""
        return dict(self._query("SELECT path, sha256 FROM files WHERE live = 1"))

    def live_hashes_sorted(self) -> list[tuple[str, str]]:
        """(path, sha256) of the live files, by path (bytewise, as pyarrow sorts)."""
        return self._query("SELECT path, sha256 FROM files WHERE live = 1 ORDER BY path")

    def owners(self, ids: Iterable[str]) -> dict[str, str]:
        """{id: path} of the live files that hold these ids."""
        wanted = sorted(set(ids))
        found: dict[str, str] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start:start + _CHUNK]
            for memory_id, path in self._query("SELECT id, path FROM files WHERE live = 1 AND id IN ("
                                               + ", ".join("?" * len(chunk)) + ")", chunk):
                found.setdefault(memory_id, path)
        return found

    def with_id_prefix(self, prefix: str) -> list[tuple[str, str]]:
        """(path, id) of every file, live or not, whose id starts with `prefix` (any case)."""
        escaped = prefix.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return self._query("SELECT path, id FROM files WHERE lower(id) LIKE ? ESCAPE '\\'", (escaped + "%",))

    def supersessions(self) -> list[dict[str, str]]:
        """Every supersession the files declare (store/supersession.py), as dicts of its COLUMNS."""
        from memvault.store.supersession import COLUMNS

        # In one order (the oldest declaration first), not the table's, which the history of syncs sets:
        # the first row naming a memory is its successor (reading/current.py).
        return [dict(zip(COLUMNS, row)) for row in self._query("SELECT " + ", ".join(COLUMNS) + " FROM superseded "
                                                               "ORDER BY since, path, old_id, new_id")]

    def unscanned(self) -> dict[str, str]:
        """{path: sha256} of the files a search read as they are, not taken in yet (none in a record made
        before the table existed)."""
        try:
            return dict(self._conn().execute("SELECT path, sha256 FROM unscanned").fetchall())
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise Unreadable(f"index state {self.path} is unreadable ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise Unreadable(f"index state {self.path} is unreadable ({exc})") from None

    def learned(self, ids: Iterable[str]) -> set[str]:
        """The ones of these user turn ids recorded as learned from (`mark_learned`)."""
        wanted, found = sorted(set(ids)), set()
        try:
            db = self._conn()
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start:start + _CHUNK]
                found.update(row[0] for row in db.execute(
                    "SELECT id FROM learned WHERE id IN (" + ", ".join("?" * len(chunk)) + ")", chunk))
        except (sqlite3.OperationalError, FileNotFoundError):  # no table yet, or no record: none recorded
            return set()
        except sqlite3.DatabaseError as exc:
            raise Unreadable(f"index state {self.path} is unreadable ({exc})") from None
        return found

    def mark_learned(self, ids: Iterable[str]) -> None:
        """Record these user turns as learned from, in a transaction of its own (on a connection of its
        own: the caller holds no lock, and a sync may be writing the record meanwhile)."""
        rows = [(i,) for i in sorted(set(ids))]
        if not rows or not self.path.exists():
            return
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("CREATE TABLE IF NOT EXISTS learned (id TEXT PRIMARY KEY) WITHOUT ROWID")
            db.executemany("INSERT OR IGNORE INTO learned VALUES (?)", rows)
        except sqlite3.DatabaseError as exc:
            raise Unreadable(f"index state {self.path} is unreadable ({exc})") from None
        finally:
            db.close()

    def dirty(self) -> dict[str, str]:
        """{path: blob id at the synced commit ("" where it had none)} for the paths where the record
        may differ from that commit."""
        return dict(self._query("SELECT path, oid FROM dirty"))

    # -- writing -----------------------------------------------------------------------------
    def write(self, put: dict[str, dict[str, Any]] | None = None, drop: Iterable[str] = (),
              meta: dict[str, Any] | None = None, dirty: dict[str, str] | None = None,
              dirty_add: dict[str, str] | None = None, fresh: bool = False,
              superseded: dict[str, list[tuple]] | None = None, unscanned: dict[str, str] | None = None,
              scanned: Iterable[str] = ()) -> None:
        """One transaction: entries put and dropped, meta keys set (JSON for model and notices),
        the dirty paths replaced (dirty) or added to where not there yet (dirty_add), the
        supersessions of the files read replaced (superseded: path -> Supersession.row()s; a dropped
        path's go), the files read as they are by a search recorded (unscanned: path -> sha256) or
        taken off that list (scanned; a dropped path goes too). fresh: start from an empty record (a
        rebuild)."""
        db = self._conn(create=True)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute(_UNSCANNED_TABLE)  # a connection opened for reading first did not make it
            if fresh:
                db.execute("DELETE FROM files")
                db.execute("DELETE FROM dirty")
                db.execute("DELETE FROM superseded")
                db.execute("DELETE FROM unscanned")
                db.execute("DELETE FROM meta WHERE key != 'version'")
            drop = list(drop)
            gone = sorted(set(drop) | set(scanned))
            for start in range(0, len(gone), _CHUNK):
                chunk = gone[start:start + _CHUNK]
                db.execute("DELETE FROM unscanned WHERE path IN (" + ", ".join("?" * len(chunk)) + ")", chunk)
            if unscanned:
                db.executemany("INSERT OR REPLACE INTO unscanned VALUES (?, ?)", sorted(unscanned.items()))
            for start in range(0, len(drop), _CHUNK):
                chunk = drop[start:start + _CHUNK]
                db.execute("DELETE FROM files WHERE path IN (" + ", ".join("?" * len(chunk)) + ")", chunk)
                db.execute("DELETE FROM superseded WHERE path IN (" + ", ".join("?" * len(chunk)) + ")", chunk)
            if superseded:
                db.executemany("DELETE FROM superseded WHERE path = ?", ((path,) for path in superseded))
                db.executemany("INSERT INTO superseded VALUES (?, ?, ?, ?, ?, ?, ?)",
                               (row for rows in superseded.values() for row in rows))
            if put:
                db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                               ((path, *(e[c] for c in _COLUMNS)) for path, e in put.items()))
            for key, value in (meta or {}).items():
                if value is None:
                    db.execute("DELETE FROM meta WHERE key = ?", (key,))
                else:
                    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
                    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, text))
            if dirty is not None:
                db.execute("DELETE FROM dirty")
                db.executemany("INSERT INTO dirty VALUES (?, ?)", sorted(dirty.items()))
            if dirty_add:
                db.executemany("INSERT OR IGNORE INTO dirty VALUES (?, ?)", sorted(dirty_add.items()))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


def _carry_over(db: sqlite3.Connection) -> tuple[str]:
    """A record of the version before made this version's, in one transaction: the new table, and
    the mark that asks the next sync to fill it (index.py, `_Sync.backfill`)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, '1')", (BACKFILL,))
        db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return (str(VERSION),)


@contextmanager
def owner_lookup(path: Path):
    """owner_of(id): the vault-relative path of the live file the record at `path` gives that id (None:
    none, or no readable record); one connection for the lookups of a block."""
    state = State(path)

    def owner_of(memory_id: str) -> str | None:
        if not path.exists():
            return None
        try:
            return state.owners([memory_id]).get(memory_id)
        except Unreadable:
            return None

    try:
        yield owner_of
    finally:
        state.close()


def import_json(path: Path, legacy: Path, notice) -> None:
    """Carry a state.json of an earlier memvault over into state.db at `path` (no rebuild: at
    100,000 files that would be an hour of embedding), then remove it. The new file is made aside
    and renamed into place, so no other process ever sees half of it; two processes doing this at
    once make the same file. Unusable JSON is said and dropped: the index is then rebuilt, as it
    was for a damaged state.json. OSError when the sidecar cannot be written."""
    try:
        data = json.loads(legacy.read_text(encoding="utf-8"))
        if not (isinstance(data, dict) and data.get("version") == 1 and isinstance(data.get("files"), dict)):
            raise ValueError("an unknown format")
        # No ctime and no blob id: the next sync hashes each file's bytes once more (no parsing).
        put = {rel: {"id": e["id"], "size": int(e["size"]), "mtime_ns": int(e["mtime_ns"]), "ctime_ns": 0,
                     "sha256": e["sha256"], "oid": "", "live": 1} for rel, e in data["files"].items()}
    except FileNotFoundError:
        return  # carried over by another process meanwhile
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        notice(f"memvault: index state {legacy} is unreadable ({exc}); rebuilding the index")
        put = None
    if put is not None:
        aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        made = State(aside)
        try:
            made.remove()
            made.write(put=put, meta={"model": data.get("model"), "notices": data.get("notices") or {}})
            made.close()
            os.replace(aside, path)
        finally:
            made.remove()
    legacy.unlink(missing_ok=True)
