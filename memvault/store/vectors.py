"""Vectors as the read path compares them: rows of length 1, their cosines with a question's vector
(the same number whatever the batch, so LanceDB's path and a long-lived process's copy order rows
alike: dense_copy.py), and Arrow rows as dicts with their vectors as numpy rows."""

from __future__ import annotations


def unit_cosines(unit, vector):
    """Cosines of rows of length 1 (float64) with a vector, rounded to float32: the product in
    float64 differs by the matrix's shape only far below float32's precision, so two paths (the
    copy's first pass, LanceDB's rows) give the same numbers and the same order (dense_copy.py)."""
    import numpy as np

    query = np.asarray(vector, dtype=np.float64)
    norm = np.linalg.norm(query)
    query = query / norm if norm else query
    return np.einsum("ij,j->i", unit, query).astype(np.float32)  # not BLAS: one loop per row, no threads


def unit_rows(vectors):
    """Rows of a float matrix scaled to length 1, in float64 (a zero row stays zero)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def row_dicts(rows) -> list[dict]:
    """Arrow rows as dicts, as LanceDB's to_list() gives them, except that a vector column comes as float32
    numpy rows (views of one array) instead of lists of Python floats: the same values, and that conversion
    was a third of a search's LanceDB time (4 queries of 61 rows of 384 floats)."""
    if "vector" not in rows.column_names or not rows.num_rows:
        return rows.to_pylist()
    column = rows.column("vector").combine_chunks()
    if column.null_count or not hasattr(column.type, "list_size"):
        return rows.to_pylist()
    import numpy as np

    vectors = np.asarray(column.flatten(), dtype=np.float32).reshape(len(column), column.type.list_size)
    found = rows.drop_columns(["vector"]).to_pylist()
    for row, vector in zip(found, vectors):
        row["vector"] = vector
    return found
