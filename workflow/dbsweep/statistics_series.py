"""The per-second samples rule statistics reads, as plain binary columns R loads without parsing.

Reading samples.csv.gz in R was most of the statistics rule's time (10 million samples: gzip alone about
10 s of CPU, then parsing 1.5 GB of text). R here has no Parquet reader, so this step reads the aggregate
step's samples.parquet in pieces (one row group at a time: 100 million samples fit in memory) and writes
into one folder:

- cells.csv: one row per cell, `.cell` (1, 2, ... in order of first appearance) and the axes (empty: none);
- one file per column, the values of every sample in the parquet's order, little-endian: `.cell.i32`,
  `rep.i32`, `second.i32` (32-bit integers), `tps.f64`, `iops.f64`, `lat_ms.f64`, `lat_pct_ms.f64`
  (64-bit floats, NaN where the table has none; tps only where the table has it);
- series.json: {"rows": n, "columns": {name: "i32" | "f64"}}, written last.

workflow/R/statistics_tables.R (read_series_columns) reads it back.
"""
from __future__ import annotations

import json
from pathlib import Path

INTEGERS = ("rep", "second")
REQUIRED = ("rep", "second", "iops", "lat_ms", "lat_pct_ms")
OPTIONAL = ("tps",)
SEPARATOR = "\x1f"  # between the axes of a cell's key (unit separator: never in a validated axis value)
NONE = "\x00"  # an empty axis (a storage cell's database axes) in a cell's key


def write_series(parquet: Path, axes: list[str], out: Path, batch_rows: int = 1 << 20) -> int:
    """Write `parquet`'s per-second samples into the folder `out` as described above; the number of rows.
    A missing column stops with the file and the column named."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    source = pq.ParquetFile(parquet)
    names = source.schema_arrow.names
    missing = [c for c in (*axes, *REQUIRED) if c not in names]
    if missing:
        raise ValueError(f"{parquet}: missing column(s) {', '.join(missing)}")
    values = [*REQUIRED, *(c for c in OPTIONAL if c in names)]
    out.mkdir(parents=True, exist_ok=True)
    ids: dict[str, int] = {}
    first_rows: list[dict] = []
    files = {name: (out / f"{name}.{'i32' if name in INTEGERS else 'f64'}").open("wb") for name in values}
    files[".cell"] = (out / ".cell.i32").open("wb")
    rows = 0
    try:
        for batch in source.iter_batches(batch_size=batch_rows, columns=[*axes, *values]):
            text = [pc.cast(batch.column(a), pa.string()) for a in axes]
            key = pc.binary_join_element_wise(*text, SEPARATOR, null_handling="replace", null_replacement=NONE)
            seen = pc.unique(key)  # in order of first appearance
            at = pc.index_in(key, value_set=seen).to_numpy()  # each row's position in seen
            first = np.unique(at, return_index=True)[1]
            for position, k in enumerate(seen.to_pylist()):
                if k not in ids:
                    ids[k] = len(ids) + 1
                    first_rows.append({a: batch.column(a)[int(first[position])].as_py() for a in axes})
            lookup = np.array([ids[k] for k in seen.to_pylist()], dtype="<i4")
            lookup[at].tofile(files[".cell"])
            for name in values:
                column = batch.column(name).to_numpy(zero_copy_only=False)
                dtype = "<i4" if name in INTEGERS else "<f8"
                np.asarray(column, dtype=dtype).tofile(files[name])
            rows += batch.num_rows
    finally:
        for f in files.values():
            f.close()
    cells = pa.table({".cell": pa.array(range(1, len(ids) + 1), pa.int32()),
                      **{a: pa.array([r[a] for r in first_rows]).cast(pa.string()) for a in axes}})
    pacsv.write_csv(cells, out / "cells.csv")
    kinds = {name: "i32" if name in INTEGERS else "f64" for name in values}
    (out / "series.json").write_text(json.dumps({"rows": rows, "columns": {".cell": "i32", **kinds}}) + "\n")
    return rows
