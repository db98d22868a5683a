"""The index table's rows held in memory by a long-lived process (serve, mcp, the agent), for the
read path's dense retrievers (docs/design.md section 5, "A long-lived process's copy").

A LanceDB query costs 5-6 ms before it reads a row, and a dense one with a conversation's filter
11-14 ms at 10,000 rows; a chat's search asks up to five. Here a dense retriever is one product of
the question's vector with the rows' unit vectors (10,000 x 384: ~2 ms) and a mask of the filter
(row_filter.RowFilter.mask, the same fields as the SQL LanceDB reads). BM25 stays with LanceDB.

The copy follows the table's versions: at a new version it asks LanceDB for the row ids (`_rowid`,
one scan of one column: ~7 ms), keeps the rows it has whose row id is still there and reads only the
new ones (a store's two turns). A compaction gives every row a new id, and the copy is read whole
again (~0.1 s at 10,000 rows, every 16 writes or so). Above COPY_ROWS rows no copy is held (memory:
about 4.5 KB a row, vectors in float64 and the columns a result carries).

The order is the one LanceDB's path gives (retrieval._dense_rows sorts its rows the same way):
cosine distance computed in float64 and rounded to float32, ties by id."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

COPY_ROWS = 50_000
# What a retriever's rows carry (retrieval._result) and what a filter reads (row_filter.RowFilter.mask).
COPY_COLUMNS = ["id", "path", "role", "conversation_id", "created_at", "created_us", "tags", "text", "meta",
                "index_text", "told", "told_from_us", "told_to_us", "vector"]
FETCH_CHUNK = 500  # row ids per `_rowid IN (...)` query


@dataclass
class Snapshot:
    """The copy at one table version."""

    version: int
    rows: Any  # pyarrow Table: COPY_COLUMNS present in the table, and _rowid
    rowids: Any  # int64 array
    vectors: Any  # float32 (n, dim): the rows' vectors as stored
    unit: Any  # float32 (n, dim): the same of length 1, for the first, approximate pass
    columns: dict[str, Any]  # what RowFilter.mask reads
    id_rank: Any  # each row's place among the ids in sorted order: ties by id

    def nearest(self, vector, row_filter, depth: int, cosines=None) -> list[dict]:
        """The `depth` rows the filter keeps nearest to `vector`, as LanceDB's rows (dicts, `_distance`),
        nearest first, ties by id. A first pass in float32 (cosines(), or `cosines` when the caller has
        them) keeps the best 4 x depth + 1, as LanceDB's path fetches, and every row within NEAR of the
        last of them; those are ordered by unit_cosines, as LanceDB's rows are (retrieval._by_cosine)."""
        import numpy as np

        from memvault.store.index import row_dicts, unit_cosines, unit_rows

        if depth <= 0 or not len(self.rowids):
            return []
        kept = np.flatnonzero(row_filter.mask(self.columns))
        if not len(kept):
            return []
        approx = (self.cosines(vector) if cosines is None else cosines)[kept]
        fetch = 4 * depth + 1
        if fetch < len(kept):
            bound = approx[np.argpartition(-approx, fetch - 1)[fetch - 1]]
            kept = kept[approx >= bound - NEAR]
        exact = unit_cosines(unit_rows(self.vectors[kept]), vector)
        best = np.lexsort((self.id_rank[kept], -exact))[:depth]
        found = row_dicts(self.rows.take(kept[best]))
        for row, cosine in zip(found, exact[best]):
            row["_distance"] = 1.0 - float(cosine)
            row["_cosine"] = float(cosine)
        return found

    def rows_where(self, row_filter) -> list[dict]:
        """Every row the filter keeps (as LanceDB's rows, in the copy's order)."""
        import numpy as np

        from memvault.store.index import row_dicts

        return row_dicts(self.rows.take(np.flatnonzero(row_filter.mask(self.columns))))

    def cosines(self, vector):
        """Every row's cosine with `vector` in float32: the first pass of nearest()."""
        import numpy as np

        query = np.asarray(vector, dtype=np.float32)
        norm = np.linalg.norm(query)
        return self.unit @ (query / norm if norm else query)


# Rows whose float32 cosine is this close to the first pass's last are ordered exactly too: float32's
# error on a cosine of 384 terms is ~1e-6.
NEAR = 1e-4


class DenseCopy:
    """The copy of one index's table, brought in step with the table handle's version on use."""

    def __init__(self, max_rows: int = COPY_ROWS):
        self.max_rows = max_rows
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()
        self.reads = 0  # whole reads of the table (tests, bench: a store must not cause one)

    def at(self, table) -> Snapshot | None:
        """The copy at the table's version (read now where it moved), or None: more rows than max_rows."""
        version = table.version  # before reading: a version that moves meanwhile is read again next time
        held = self._snapshot
        if held is not None and held.version == version:
            return held
        with self._lock:
            held = self._snapshot
            if held is not None and held.version == version:
                return held
            self._snapshot = self._read(table, version, held)
            return self._snapshot

    def clear(self) -> None:
        with self._lock:
            self._snapshot = None

    def _read(self, table, version: int, held: Snapshot | None) -> Snapshot | None:
        import numpy as np
        import pyarrow as pa

        listing = table.search().select(["id"]).with_row_id(True).limit(None).to_arrow()
        if listing.num_rows > self.max_rows:
            return None
        names = [c for c in COPY_COLUMNS if c in table.schema.names] + ["_rowid"]
        rowids = listing.column("_rowid").to_numpy()
        new = np.setdiff1d(rowids, held.rowids) if held is not None else rowids
        if held is None or len(new) > max(FETCH_CHUNK, len(rowids) // 2):  # first, or after a compaction
            rows = table.search().select(names[:-1]).with_row_id(True).limit(None).to_arrow().select(names)
            self.reads += 1
        else:
            parts = [held.rows.filter(pa.array(np.isin(held.rowids, rowids)))]
            for start in range(0, len(new), FETCH_CHUNK):
                ids = ", ".join(str(int(r)) for r in new[start:start + FETCH_CHUNK])
                parts.append(table.search().where(f"_rowid IN ({ids})").select(names[:-1]).with_row_id(True)
                             .limit(None).to_arrow().select(names))
            rows = pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]
        return _snapshot(version, rows)


def _snapshot(version: int, rows) -> Snapshot:
    import numpy as np

    rows = rows.combine_chunks()  # one chunk: take() of a few rows out of many chunks cost 10 ms
    n = rows.num_rows
    vectors = rows.column("vector").combine_chunks()
    if n:
        flat = np.asarray(vectors.flatten(), dtype=np.float32).reshape(n, vectors.type.list_size)
    else:
        flat = np.zeros((0, 1), dtype=np.float32)
    from memvault.store.index import unit_rows

    unit = unit_rows(flat).astype(np.float32)

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
    id_rank = np.empty(n, dtype=np.int64)
    id_rank[np.argsort(columns["id"].astype(str), kind="stable")] = np.arange(n)
    return Snapshot(version, rows, rows.column("_rowid").to_numpy(), flat, unit, columns, id_rank)
