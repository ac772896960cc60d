"""The per-second samples rule statistics reads, as plain binary columns R loads without parsing.

Reading samples.csv.gz in R was most of the statistics rule's time (10 million samples: gzip alone about
10 s of CPU, then parsing 1.5 GB of text). R here has no Parquet reader, so this step reads the aggregate
step's samples.parquet in pieces (one row group at a time: 100 million samples fit in memory) and writes
into one folder:

- cells.csv: one row per cell, `.cell` (1, 2, ... in order of first appearance) and the axes (empty: none);
- one file per column, the values of every sample in the parquet's order, little-endian: `.cell.i32`,
  `rep.i32`, `second.i32` (32-bit integers), `tps.f64`, `iops.f64`, `lat_ms.f64`, `lat_pct_ms.f64`
  (64-bit floats, NaN where the table has none; tps only where the table has it);
- cell_runs.i32: the runs of equal `.cell` in row order, as pairs (cell id, rows), 32-bit little-endian: R
  reads a cell's rows from them without scanning the ids of every sample (10 million: 1.5 s of rle());
- fingerprints.txt: one line per cell (in `.cell` order), 16 hex digits: a hash of the cell's rows (every
  column above but `.cell`), whatever their order in the table. Rule statistics keeps each cell's figures in a
  cache keyed by it (workflow/R/statistics_cache.R): a cell rerun with other data gets another fingerprint,
  so its figures are computed again, never read back stale;
- series.json: {"rows": n, "columns": {name: "i32" | "f64"}, "empty": [name, ...]}, written last: a float
  column with no value in the whole table (the parquet's statistics say so: iops and lat_ms of sysbench cells,
  tps and lat_pct_ms of fio's) is listed in "empty" and has no file (R reads it as NA): 10 million samples,
  160 MB less to write and read.

workflow/R/statistics_tables.R (read_series_columns) reads it back.
"""
from __future__ import annotations

import json
from pathlib import Path

INTEGERS = ("rep", "second")
REQUIRED = ("rep", "second", "iops", "lat_ms", "lat_pct_ms")
OPTIONAL = ("tps",)


def write_series(parquet: Path, axes: list[str], out: Path, batch_rows: int = 1 << 20) -> int:
    """Write `parquet`'s per-second samples into the folder `out` as described above; the number of rows.
    A missing column stops with the file and the column named."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    source = pq.ParquetFile(parquet, read_dictionary=axes)  # axes as codes: no text decoded per sample
    names = source.schema_arrow.names
    missing = [c for c in (*axes, *REQUIRED) if c not in names]
    if missing:
        raise ValueError(f"{parquet}: missing column(s) {', '.join(missing)}")
    values = [*REQUIRED, *(c for c in OPTIONAL if c in names)]
    empty = [c for c in values if c not in INTEGERS and without_values(source, names.index(c))]
    out.mkdir(parents=True, exist_ok=True)
    codes: list[dict] = [{} for _ in axes]  # per axis: value -> code, over the whole file
    ids: dict[tuple, int] = {}  # a cell's codes -> its id
    first_rows: list[tuple] = []
    files = {name: (out / f"{name}.{'i32' if name in INTEGERS else 'f64'}").open("wb") for name in values
             if name not in empty}
    files[".cell"] = (out / ".cell.i32").open("wb")
    rows = 0
    fingerprints = np.zeros(1, dtype=np.uint64)  # at [id]: the sum of the cell's row hashes
    runs: list = []  # per batch: (cell ids, lengths) of its runs
    try:
        read = [*axes, *(c for c in values if c not in empty)]
        for batch in source.iter_batches(batch_size=batch_rows, columns=read):
            indices = [axis_indices(batch.column(a)) for a in axes]
            starts, lengths = index_runs([i for _, i in indices], batch.num_rows)
            row_codes = [codes_at(dictionary, i[starts], known)
                         for (dictionary, i), known in zip(indices, codes, strict=True)]
            keys, inverse = np.unique(cell_keys(row_codes, len(starts)), return_inverse=True)
            firsts = np.unique(inverse, return_index=True)[1]
            lookup = np.empty(len(keys), dtype="<i4")
            for position in np.argsort(firsts, kind="stable"):  # new cells numbered in order of appearance
                cell = tuple(int(c[firsts[position]]) for c in row_codes)
                if cell not in ids:
                    ids[cell] = len(ids) + 1
                    first_rows.append(cell)
                lookup[position] = ids[cell]
            run_ids = lookup[inverse.reshape(-1)]
            cell_ids = np.repeat(run_ids, lengths)
            cell_ids.tofile(files[".cell"])
            runs.append(id_runs(run_ids, lengths))
            columns = []
            for name in values:
                if name in empty:  # every row NaN: hashed as such, not written
                    columns.append(np.broadcast_to(np.float64(np.nan), (batch.num_rows,)))
                    continue
                column = batch.column(name).to_numpy(zero_copy_only=False)
                column = np.asarray(column, dtype="<i4" if name in INTEGERS else "<f8")
                column.tofile(files[name])
                columns.append(column)
            if len(fingerprints) <= len(ids):
                fingerprints = np.concatenate([fingerprints, np.zeros(len(ids) + 1 - len(fingerprints), np.uint64)])
            np.add.at(fingerprints, cell_ids, row_hashes(columns))  # wraps modulo 2^64
            rows += batch.num_rows
    finally:
        for f in files.values():
            f.close()
    by_code = [{code: value for value, code in known.items()} for known in codes]
    first_rows = [{a: by_code[i][cell[i]] for i, a in enumerate(axes)} for cell in first_rows]
    cells = pa.table({".cell": pa.array(range(1, len(ids) + 1), pa.int32()),
                      **{a: pa.array([r[a] for r in first_rows]).cast(pa.string()) for a in axes}})
    pacsv.write_csv(cells, out / "cells.csv")
    if runs:  # a run cut where one batch ends and the next begins is joined again
        joined = id_runs(np.concatenate([r[0] for r in runs]), np.concatenate([r[1] for r in runs]))
        np.stack(joined, axis=1).astype("<i4").tofile(out / "cell_runs.i32")
    else:
        (out / "cell_runs.i32").write_bytes(b"")
    (out / "fingerprints.txt").write_text("".join(f"{int(f):016x}\n" for f in fingerprints[1:len(ids) + 1]))
    kinds = {name: "i32" if name in INTEGERS else "f64" for name in values}
    manifest = {"rows": rows, "columns": {".cell": "i32", **kinds}, "empty": empty}
    (out / "series.json").write_text(json.dumps(manifest) + "\n")
    return rows


def without_values(source, column: int) -> bool:
    """True when the parquet file's column `column` is null in every row of every row group, by the
    statistics of its column chunks (a file without them, or without rows: False)."""
    meta = source.metadata
    if not meta.num_row_groups:
        return False
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        stats = group.column(column).statistics
        if stats is None or stats.null_count is None or stats.null_count != group.num_rows:
            return False
    return True


def id_runs(ids, lengths):
    """(values, lengths) of the runs of equal values of ids, each run's length the sum of its rows' `lengths`."""
    import numpy as np

    if not len(ids):
        return ids, lengths
    starts = np.concatenate([[0], np.flatnonzero(ids[1:] != ids[:-1]) + 1])
    return ids[starts], np.add.reduceat(lengths, starts)


HASH_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                    0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def row_hashes(columns: list):
    """A 64-bit hash of each row of `columns` (numpy arrays of equal length: each value's bits times an odd
    constant of its column, summed, then splitmix64's finaliser). A cell's fingerprint is the sum of its rows'
    hashes: any change of a value, a row added or dropped changes it, and the rows' order does not."""
    import numpy as np

    if len(columns) > len(HASH_MULTIPLIERS):
        raise ValueError(f"row_hashes: {len(columns)} columns, constants for {len(HASH_MULTIPLIERS)}")
    with np.errstate(over="ignore"):
        h = np.zeros(len(columns[0]) if columns else 0, dtype=np.uint64)
        term = np.empty_like(h)
        for column, k in zip(columns, HASH_MULTIPLIERS, strict=False):
            bits = column.view(np.uint32 if column.dtype.itemsize == 4 else np.uint64)
            np.multiply(bits, np.uint64(k), out=term, dtype=np.uint64)  # no copy of the column, no temporary
            h += term
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def axis_indices(column):
    """(dictionary, indices) of one axis' column: each row's index into the list of its distinct values
    (numpy int64; -1 for an empty value). A column read without a dictionary is encoded first."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    indices = column.indices if column.null_count == 0 else pc.fill_null(column.indices, -1)
    return column.dictionary, indices.to_numpy(zero_copy_only=False).astype(np.int64)


def index_runs(indices: list, rows: int):
    """(starts, lengths) of the runs of rows whose axis indices are all equal: a cell's rows are mostly one
    run (aggregate writes each repetition's rows together), so the cells are told apart per run, not per row
    (10 million samples: 0.9 s of sorting every row's key)."""
    import numpy as np

    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    change = np.zeros(rows, dtype=bool)
    change[0] = True
    for i in indices:
        change[1:] |= i[1:] != i[:-1]
    starts = np.flatnonzero(change)
    return starts, np.diff(np.append(starts, rows))


def codes_at(dictionary, indices, known: dict):
    """The codes of the values at `indices` (axis_indices(): -1 an empty value) in `known` (value -> code,
    over the whole file, extended with new values; an empty value is None): the text of each distinct value
    is read once."""
    import numpy as np

    to_code = [known.setdefault(v, len(known)) for v in dictionary.to_pylist()]
    if (indices < 0).any():
        to_code.append(known.setdefault(None, len(known)))  # index -1: the last
    return np.array(to_code or [0], dtype=np.int64)[indices]


def cell_keys(row_codes: list, rows: int):
    """One integer per row that differs exactly where the rows' axis codes differ: their mixed-radix
    number (the codes' ranges in this batch as radices), or, past 63 bits, their rank among the distinct rows."""
    import numpy as np

    if not row_codes:
        return np.zeros(rows, dtype=np.int64)
    radices = [int(c.max(initial=0)) + 1 for c in row_codes]
    if float(np.prod([float(r) for r in radices])) < 2.0 ** 62:
        return np.ravel_multi_index(row_codes, radices)
    return np.unique(np.stack(row_codes, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
