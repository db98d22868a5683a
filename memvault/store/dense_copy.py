"""The index table's rows held in memory by a long-lived process (serve, mcp, the agent), for the
read path's dense retrievers (docs/design.md section 5, "A long-lived process's copy").

A LanceDB query costs 5-6 ms before it reads a row, and a dense one with a conversation's filter
11-14 ms at 10,000 rows; a chat's search asks up to five. Here a dense retriever is one product of
the question's vector with the rows' unit vectors (10,000 x 384: ~2 ms) and a mask of the filter
(row_filter.RowFilter.mask, the same fields as the SQL LanceDB reads). BM25 stays with LanceDB.

The copy follows the table's versions: at a new version it asks LanceDB for the row ids (`_rowid`,
one scan of one column: ~7 ms), marks the rows whose id is gone and reads only the new ones (a store's
two turns) into a small second part, rebuilt at each version; past RECENT_ROWS the two are made one.
A compaction by this process (the appends merged, the big fragments left) gives the rows it rewrote new
ids and changes nothing else: the copy takes the new ids by the rows' ids (after_compaction). Anything
else it cannot account for is read whole (~0.25 s of CPU at 10,000 rows). Above COPY_ROWS rows no copy
is held.

The order is the one LanceDB's path gives (retrieval._dense_rows sorts its rows the same way):
cosine distance computed in float64 and rounded to float32, ties by id."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from dataclasses import dataclass
from typing import Any

COPY_ROWS = 50_000
KEPT_FILTERS = 64  # filters whose rows a snapshot keeps (Snapshot.kept)
# What a retriever's rows carry (retrieval._result) and what a filter reads (row_filter.RowFilter.mask).
COPY_COLUMNS = ["id", "path", "role", "conversation_id", "created_at", "created_us", "tags", "text", "meta",
                "index_text", "told", "told_from_us", "told_to_us", "vector"]
FETCH_CHUNK = 500  # row ids per `_rowid IN (...)` query
RECENT_ROWS = 2_000  # rows of the second part before the parts are made one


@dataclass
class Part:
    """Rows of the copy, as read: the Arrow rows, their vectors and the columns a filter reads."""

    rows: Any  # pyarrow Table of COPY_COLUMNS present in the table, one chunk
    rowids: Any  # int64: each row's _rowid at the snapshot's version
    vectors: Any  # float32 (n, dim) as stored
    unit: Any  # float32 (n, dim) of length 1: the first, approximate pass
    columns: dict[str, Any]  # what RowFilter.mask reads

    @staticmethod
    def of(rows, rowids) -> "Part":
        import numpy as np

        rows = rows.combine_chunks()  # one chunk: take() of a few rows out of many chunks cost 10 ms
        n = rows.num_rows
        column = rows.column("vector").combine_chunks()
        vectors = np.asarray(column.flatten(), dtype=np.float32).reshape(n, column.type.list_size)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)

        def strings(name: str):
            array = np.empty(n, dtype=object)
            if name in rows.column_names:
                array[:] = rows.column(name).to_pylist()
            return array

        def told(name: str):  # NaN where the row names no time (NULL): it compares false, as NULL does
            values = rows.column(name).to_pylist() if name in rows.column_names else [None] * n
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

        columns = {name: strings(name) for name in ("id", "role", "conversation_id", "tags", "text")}
        columns["created_us"] = np.asarray(rows.column("created_us").to_pylist(), dtype=np.int64)
        columns["told_from_us"] = told("told_from_us")
        columns["told_to_us"] = told("told_to_us")
        return Part(rows, np.asarray(rowids, dtype=np.int64), vectors,
                    vectors / np.where(norms == 0, 1.0, norms), columns)

    def __len__(self) -> int:
        return len(self.rowids)


@dataclass
class Snapshot:
    """The copy at one table version: a base part, rows of it since gone masked out (live), and the
    rows read since in a small recent part."""

    version: int
    base: Part
    live: Any  # bool per base row
    recent: Part | None = None

    def __post_init__(self):
        import numpy as np

        parts = self.parts()
        self.columns = {name: np.concatenate([p.columns[name] for p in parts]) for name in self.base.columns}
        self.rowids = np.concatenate([p.rowids for p in parts])
        self.alive = np.concatenate([self.live] + ([np.ones(len(self.recent), dtype=bool)] if self.recent else []))
        self._by_filter: dict = {}  # RowFilter -> the places of the live rows it keeps (kept())
        self._by_id: dict | None = None  # id -> place of its live row (rows_by_id), made on first use

    @staticmethod
    def whole(version: int, part: Part) -> "Snapshot":
        """A snapshot of one part, every row live."""
        import numpy as np

        return Snapshot(version, part, np.ones(len(part), dtype=bool))

    def parts(self) -> list[Part]:
        return [self.base] + ([self.recent] if self.recent is not None else [])

    def _at(self, places) -> list[tuple[Part, int]]:
        split = len(self.base)
        return [(self.base, int(i)) if i < split else (self.recent, int(i) - split) for i in places]

    def _rows(self, places) -> list[dict]:
        """The rows at these places (of the parts one after the other), in that order."""
        import numpy as np

        from memvault.store.vectors import row_dicts

        found: list[dict] = [{} for _ in places]
        split = len(self.base)
        places = np.asarray(places, dtype=np.int64)
        for part, chosen, offset in ((self.base, places < split, 0), (self.recent, places >= split, split)):
            if part is None or not chosen.any():
                continue
            for at, row in zip(np.flatnonzero(chosen), row_dicts(part.rows.take(places[chosen] - offset))):
                found[at] = row
        return found

    def nearest(self, vector, row_filter, depth: int, cosines=None) -> list[dict]:
        """The `depth` rows the filter keeps nearest to `vector`, as LanceDB's rows (dicts, `_distance`),
        nearest first, ties by id. A first pass in float32 (cosines(), or `cosines` when the caller has
        them) keeps the best 4 x depth + 1, as LanceDB's path fetches, and every row within NEAR of the
        last of them; those are ordered by unit_cosines, as LanceDB's rows are (retrieval._by_cosine)."""
        import numpy as np

        from memvault.store.vectors import unit_cosines, unit_rows

        if depth <= 0:
            return []
        kept = self.kept(row_filter)
        if not len(kept):
            return []
        approx = (self.cosines(vector) if cosines is None else cosines)[kept]
        fetch = 4 * depth + 1
        if fetch < len(kept):
            bound = approx[np.argpartition(-approx, fetch - 1)[fetch - 1]]
            kept = kept[approx >= bound - NEAR]
        vectors = np.stack([part.vectors[i] for part, i in self._at(kept)])
        exact = unit_cosines(unit_rows(vectors), vector)
        best = np.lexsort((self.columns["id"][kept].astype(str), -exact))[:depth]
        found = self._rows(kept[best])
        for row, cosine in zip(found, exact[best]):
            row["_distance"] = 1.0 - float(cosine)
            row["_cosine"] = float(cosine)
        return found

    def rows_where(self, row_filter) -> list[dict]:
        """Every row the filter keeps (as LanceDB's rows, in the copy's order)."""
        return self._rows(self.kept(row_filter))

    def count(self) -> int:
        """Its live rows: the table's row count at its version."""
        return int(self.alive.sum())

    def kept(self, row_filter):
        """The places of the live rows the filter keeps, in order. A search asks the same few filters again
        and again (its scopes' roles and conversations): each is masked once per snapshot (the mask's
        np.isin over object arrays: ~0.3 ms each, several a search)."""
        import numpy as np

        found = self._by_filter.get(row_filter)
        if found is None:
            found = np.flatnonzero(row_filter.mask(self.columns) & self.alive)
            if len(self._by_filter) >= KEPT_FILTERS:
                self._by_filter.clear()  # a chat's filters name its session's start: new ones come with each message
            self._by_filter[row_filter] = found
        return found

    def vectors_where(self, row_filter) -> dict:
        """{id: its vector as stored} of the live rows the filter keeps (a conversation's turns, which the
        episodes' topic cuts compare), without making the rows dicts."""
        return {part.columns["id"][at]: part.vectors[at] for part, at in self._at(self.kept(row_filter))}

    def rows_by_id(self, ids) -> list[dict] | None:
        """The live rows of these ids, in that order, as LanceDB's rows; None when one is not in the copy (or
        two live rows share an id, which a table in step never has: the caller asks LanceDB)."""
        import numpy as np

        by_id = self._by_id
        if by_id is None:
            places = np.flatnonzero(self.alive)
            by_id = dict(zip(self.columns["id"][places].tolist(), places.tolist()))
            if len(by_id) != len(places):
                by_id = {}
            self._by_id = by_id
        try:
            places = [by_id[i] for i in ids]
        except KeyError:
            return None
        return self._rows(places) if places else []

    def cosines(self, vector):
        """Every row's cosine with `vector` in float32: the first pass of nearest()."""
        import numpy as np

        query = np.asarray(vector, dtype=np.float32)
        norm = np.linalg.norm(query)
        query = query / norm if norm else query
        # einsum's own loop, not BLAS: OpenBLAS ran this on both cores, its threads spinning against the
        # server's others (2.3 ms of CPU against 0.8 ms at 10,872 rows).
        return np.concatenate([np.einsum("ij,j->i", part.unit, query) for part in self.parts()])


# Rows whose float32 cosine is this close to the first pass's last are ordered exactly too: float32's
# error on a cosine of 384 terms is ~1e-6.
NEAR = 1e-4


class DenseCopy:
    """The copy of one index's table, brought in step with the table handle's version on use."""

    def __init__(self, max_rows: int = COPY_ROWS):
        self.max_rows = max_rows
        self._snapshot: Snapshot | None = None
        self._table = None  # the table handle the snapshot is of
        self._lock = threading.Lock()
        self._placeholders = itertools.count(-1, -1)  # row ids of rows taken in by writing(): never LanceDB's
        self.reads = 0  # whole reads of the table (tests, bench: a store must not cause one)
        self.looks = 0  # reads of the table at a new version, whole or of its new rows (a write of this process: none)

    def at(self, table) -> Snapshot | None:
        """The copy at the table's version (read now where it moved), or None: more rows than max_rows."""
        version = table.version  # before reading: a version that moves meanwhile is read again next time
        held = self._snapshot
        if held is not None and held.version == version and table is self._table:
            return held
        with self._lock:
            held = self._snapshot if table is self._table else None  # another table (reopened): read whole
            if held is not None and held.version == version:
                return held
            self._snapshot, self._table = self._read(table, version, held), table
            return self._snapshot

    def current(self, table) -> Snapshot | None:
        """at(), or None when the copy could not be read (cleared: read whole the next time; the
        caller goes by LanceDB meanwhile, which says what is wrong if something is). What this process
        compacts is brought in step by it first: what after_compaction renumbers."""
        try:
            return self.at(table)
        except Exception:  # noqa: BLE001
            self.clear()
            return None

    def after_compaction(self, table, held: Snapshot | None) -> None:
        """A compaction of this process (Index._compact) rewrote some fragments' rows, not what they hold:
        each row of those has a new row id, the others (the big fragments it left) keep theirs. The copy
        takes every live row's id at the new version by the rows' ids instead of reading the table again
        (~0.25 s of CPU at 10,000 rows, once every 16 writes of a server). Its parts are kept as they are,
        rows gone before masked as they were, with row ids below zero that no listing has (making the
        parts one cost up to ~0.1 s of CPU at 11,000 rows, under the vault's lock, for the same rows).
        Left to the next at() when anything else changed."""
        import numpy as np

        try:
            with self._lock:
                if held is None or self._snapshot is not held or table is not self._table:
                    return
                version = table.version
                listing = _listing(table)
                place = dict(zip(listing.column("id").to_pylist(), listing.column("_rowid").to_pylist()))
                ids = held.columns["id"][held.alive]
                if len(place) != len(ids) or any(i not in place for i in ids):
                    return
                placeholders = self._placeholders

                def renumbered(part: Part, live) -> Part:  # a new Part: the held one is read by searches under way
                    rowids = np.fromiter((place[i] if alive else next(placeholders)
                                          for i, alive in zip(part.columns["id"], live)), dtype=np.int64, count=len(part))
                    return dataclasses.replace(part, rowids=rowids)

                recent = held.recent
                self._snapshot = Snapshot(version, renumbered(held.base, held.live), held.live,
                                          renumbered(recent, itertools.repeat(True)) if recent is not None else None)
        except Exception:  # noqa: BLE001 (read whole at the next search)
            self._snapshot = None

    def clear(self) -> None:
        with self._lock:
            self._snapshot = None

    @contextlib.contextmanager
    def writing(self, table):
        """Around one write of this process to the table (Index._apply's add or merge_insert by path):
        yields took(rows, replaced_paths), to call with what the write put in once it is done. The copy
        then takes those rows as its next version without reading them back (a store's next searches
        find it current: under 20 clients they waited 60-80 ms a search for the copy's read), when it
        held the version just before the write and the write made exactly one version. Searches that
        see the new version meanwhile wait for the lock here, not for a read. Anything else (another
        process's write in between, no copy held): left to the next at(), which reads."""
        with self._lock:
            held = self._snapshot if table is self._table else None
            before = table.version if held is not None else None
            taken: list = []
            yield lambda rows, replaced=frozenset(): taken.append((rows, replaced))
            if held is None or held.version != before or len(taken) != 1:  # held + rows is that version's copy
                return
            try:
                if table.version != before + 1:
                    return
                self._snapshot = _with_rows(held, table.version, *taken[0], self._placeholders)
            except Exception:  # noqa: BLE001 (read at the next at())
                self._snapshot = None

    def _read(self, table, version: int, held: Snapshot | None) -> Snapshot | None:
        import numpy as np

        self.looks += 1
        listing = _listing(table)
        if listing.num_rows > self.max_rows:
            return None
        present = set(table.schema.names)  # one look: each is a call into LanceDB (~1.5 ms)
        names = [c for c in COPY_COLUMNS if c in present]
        rowids = listing.column("_rowid").to_numpy()
        new = rowids[~np.isin(rowids, held.rowids, assume_unique=True)] if held is not None else rowids
        if held is None or len(new) > RECENT_ROWS:  # first, or rewritten by another process
            found = table.search().select(names).with_row_id(True).limit(None).to_arrow()
            self.reads += 1
            return Snapshot.whole(version, Part.of(found.select(names), found.column("_rowid").to_numpy()))
        live = held.live & np.isin(held.base.rowids, rowids, assume_unique=True)
        kept = np.isin(held.recent.rowids, rowids, assume_unique=True) if held.recent is not None else None
        rows, ids = [], []
        for start in range(0, len(new), FETCH_CHUNK):
            chunk = ", ".join(str(int(r)) for r in new[start:start + FETCH_CHUNK])
            found = table.search().where(f"_rowid IN ({chunk})").select(names).with_row_id(True).limit(None).to_arrow()
            rows.append(found.select(names))
            ids.append(found.column("_rowid").to_numpy())
        return _next(held, version, live, kept, rows, ids)


def _with_rows(held: Snapshot, version: int, rows, replaced, placeholders) -> Snapshot:
    """`held` with `rows` (Arrow, the table's schema) added at `version` and the earlier rows of the paths
    in `replaced` gone. The new rows get row ids below zero, which no listing of LanceDB's has: the next
    read (another process wrote) finds them gone and reads them again with their own ids, and a
    compaction gives them theirs by id (after_compaction). Their place in the copy does not change an
    answer: the order of rows with the same score is by id."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = rows.select(held.base.rows.column_names).cast(held.base.rows.schema)
    live, kept = held.live, None
    if replaced:
        gone = pa.array(sorted(replaced), pa.string())
        live = live & ~pc.is_in(held.base.rows.column("path"), gone).to_numpy(zero_copy_only=False)
        if held.recent is not None:
            kept = ~pc.is_in(held.recent.rows.column("path"), gone).to_numpy(zero_copy_only=False)
    return _next(held, version, live, kept, [rows],
                 [np.fromiter(placeholders, dtype=np.int64, count=rows.num_rows)])


def _next(held: Snapshot, version: int, live, kept, rows: list, ids: list) -> Snapshot:
    """`held` at `version`: its base's rows where `live`, its recent part's where `kept` (None: all), and
    `rows` (Arrow tables, read or written since) with their row ids `ids` in a new recent part; the two
    parts made one past RECENT_ROWS (_read and _with_rows)."""
    import numpy as np
    import pyarrow as pa

    if held.recent is not None:
        rows = [held.recent.rows.filter(pa.array(kept)) if kept is not None else held.recent.rows, *rows]
        ids = [held.recent.rowids[kept] if kept is not None else held.recent.rowids, *ids]
    recent = Part.of(pa.concat_tables(rows), np.concatenate(ids)) if rows else None
    if recent is not None and len(recent) > RECENT_ROWS or (~live).sum() > RECENT_ROWS:
        base = _kept(held.base, live)
        return Snapshot.whole(version, _joined([base, recent]) if recent is not None else base)
    return Snapshot(version, held.base, live, recent if recent is not None and len(recent) else None)


def _listing(table):
    """Every row's id and _rowid at the table handle's version: one scan of one column (~7 ms)."""
    return table.search().select(["id"]).with_row_id(True).limit(None).to_arrow()


def _kept(part: Part, live) -> Part:
    """The part's rows where `live`."""
    import pyarrow as pa

    return Part.of(part.rows.filter(pa.array(live)), part.rowids[live])


def _joined(parts: list[Part]) -> Part:
    import numpy as np
    import pyarrow as pa

    return Part.of(pa.concat_tables([p.rows for p in parts]), np.concatenate([p.rowids for p in parts]))
