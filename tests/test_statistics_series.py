"""Rule statistics at scale keeps its tables and verdicts: the binary columns of statistics_series give the
same outputs as samples.csv.gz, and both match main's outputs from before (tests/fixtures/statistics_before,
written by main's code on the same fixed synthetic study, generate.R there). With its cache of per-cell
figures (workflow/R/statistics_cache.R), a study that gained a cell or whose cell changed gets the same bytes
as a full recompute.

What may differ from before, and by how much: the bootstrap now draws each cell's resampled middle ranks
from their exact distribution with uniforms seeded from the cell's identity (it drew them from a pool of
10,000 resamples shared by every cell of the same size), so a one-repetition cell's CI bounds move within
the percentile bootstrap's own sampling noise at 1,000 draws (on this study at most 0.9% of the median, and
the ratio bounds at most 0.007). A comparison's verdict stays, but where its CI ends within 0.005 of 1 before
and after (3 of 248 here): there either verdict is the method's noise. With repetitions (t interval) and
everything else (medians, windows, stalls, ratios, tests) nothing moves.
"""
import csv
import gzip
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "statistics_before"
AXES = ["engine", "memory", "filesystem", "threads", "workload"]
STUDIES = {"one_rep": (60, 200, 1), "three_reps": (30, 150, 3), "edges": None}  # cells, seconds, repetitions
OUTPUTS = ROOT / "tests" / "fixtures" / "statistics_outputs"  # edges: generate_edges.R there
TABLES = ("steady_state", "cell_stats", "comparisons")
BOUNDS = {"ci_low", "ci_high", "ratio_low", "ratio_high"}

# Rule statistics from each input in turn, in one R process (loading the library once).
RUN_RULE = r"""
args <- commandArgs(TRUE)
source(file.path(args[1], "library.R"), chdir = TRUE)
dir <- args[2]
for (input in strsplit(args[3], ",")[[1]]) {
  # the series in chunks of cells, two processes at a time; the samples whole
  options(dbsweep.chunk_rows = if (input == "series") 1000L, dbsweep.cores = if (input == "series") 2L)
  out_dir <- file.path(dir, input)
  dir.create(out_dir)
  out <- as.list(setNames(file.path(out_dir, c("steady_state.csv", "cell_stats.csv", "cell_stats.md",
                                               "comparisons.csv", "comparisons.md")),
                          c("steady_state", "cell_stats_csv", "cell_stats_md", "comparisons_csv", "comparisons_md")))
  tables <- list(summary = file.path(dir, "summary.csv.gz"))
  tables[[input]] <- file.path(dir, if (input == "series") "series" else "samples.csv.gz")
  invisible(rule_statistics(tables, out, list(axes = strsplit(args[4], ",")[[1]], baseline = list(),
                                              analysis = list()), log = NULL))
}
"""


def rows(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module", params=sorted(STUDIES))
def study(request, tmp_path_factory):
    """The fixed study's tables, samples.parquet as aggregate writes it, the series folder, and rule
    statistics' outputs from both inputs (folders series/ and samples/)."""
    sys.path.insert(0, str(ROOT / "workflow"))
    from dbsweep.aggregate import to_parquet
    from dbsweep.statistics_series import write_series

    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    cells, seconds, reps = STUDIES[name] or (0, 0, 0)
    if STUDIES[name]:
        subprocess.run(["Rscript", str(FIXTURES / "generate.R"), str(cells), str(seconds), str(reps), str(tmp)],
                       check=True)
    else:
        subprocess.run(["Rscript", str(OUTPUTS / "generate_edges.R"), str(tmp)], check=True)
    to_parquet(tmp / "samples.csv.gz", tmp / "samples.parquet", AXES)
    write_series(tmp / "samples.parquet", AXES, tmp / "series", batch_rows=5_000)  # several pieces
    (tmp / "run_rule.R").write_text(RUN_RULE)
    subprocess.run(["Rscript", str(tmp / "run_rule.R"), str(ROOT / "workflow" / "R"), str(tmp), "series,samples",
                    ",".join(AXES)], check=True, capture_output=True)
    return name, tmp


def test_the_binary_columns_give_the_same_tables_as_the_gzipped_csv(study):
    _, tmp = study
    for table in (*TABLES, "cell_stats_md", "comparisons_md"):
        name = table.replace("_md", ".md") if table.endswith("_md") else f"{table}.csv"
        assert (tmp / "series" / name).read_bytes() == (tmp / "samples" / name).read_bytes(), name


def test_tables_and_verdicts_are_those_of_before(study):
    name, tmp = study
    if not (FIXTURES / name).is_dir():
        pytest.skip(f"no outputs of before the binary columns for study {name}")
    for table in TABLES:
        before, after = rows(FIXTURES / name / f"{table}.csv"), rows(tmp / "series" / f"{table}.csv")
        assert len(after) == len(before), table
        assert list(after[0]) == list(before[0]), table
        for old, new in zip(before, after, strict=True):
            for column in old:
                if column in BOUNDS or column == "verdict":
                    continue
                assert new[column] == old[column] or float(new[column]) == pytest.approx(float(old[column]),
                                                                                         rel=1e-12), (table, column)
            if table == "cell_stats":
                for bound in ("ci_low", "ci_high"):
                    assert float(new[bound]) == pytest.approx(float(old[bound]), rel=0.02), (old, new)
            if table == "comparisons":
                for bound in ("ratio_low", "ratio_high"):
                    assert float(new[bound]) == pytest.approx(float(old[bound]), abs=0.02), (old, new)
                if new["verdict"] != old["verdict"]:
                    edge = [abs(float(r[b]) - 1) for r in (old, new) for b in ("ratio_low", "ratio_high")]
                    assert min(edge[:2]) < 0.005 and min(edge[2:]) < 0.005, (old, new)
    changed = sum(o["verdict"] != n["verdict"] for o, n in zip(rows(FIXTURES / name / "comparisons.csv"),
                                                               rows(tmp / "series" / "comparisons.csv"), strict=True))
    assert changed <= 0.02 * len(rows(FIXTURES / name / "comparisons.csv"))
    if name == "three_reps":  # the t interval: nothing random, nothing moves
        assert changed == 0
        assert rows(tmp / "series" / "comparisons.csv") == rows(FIXTURES / name / "comparisons.csv")


def test_tables_are_byte_for_byte_those_of_the_code_before_the_cuts_of_issue_37(study):
    """tests/fixtures/statistics_outputs: the five outputs of rule statistics on the same fixed studies (and
    on one of edge shapes: shuffled rows, missing seconds, NA values, a constant series, one never steady,
    one too short to judge, one cell with fewer repetitions; its outputs read from samples.csv.gz), written
    by the code of 2026-11-28, before the faster steady state, cell statistics and markdown. Making the rule
    faster changes no byte: same windows, statistics, seeded bootstrap CIs, ratios and verdicts."""
    name, tmp = study
    for table in ("steady_state.csv", "cell_stats.csv", "cell_stats.md", "comparisons.csv", "comparisons.md"):
        expected = (OUTPUTS / name / table).read_text()
        assert (tmp / "series" / table).read_text() == expected, table


def test_a_missing_column_stops_naming_the_file_and_column(tmp_path):
    sys.path.insert(0, str(ROOT / "workflow"))
    import pyarrow as pa
    import pyarrow.parquet as pq
    from dbsweep.statistics_series import write_series

    pq.write_table(pa.table({"threads": [1], "rep": [1], "second": [1], "iops": [1.0], "lat_ms": [None]}),
                   tmp_path / "samples.parquet")
    with pytest.raises(ValueError, match=r"samples.parquet: missing column\(s\) lat_pct_ms"):
        write_series(tmp_path / "samples.parquet", ["threads"], tmp_path / "series")


# Rule statistics on each folder of args[3] ("folder:trim_s", comma-separated) twice: with the cache args[4]
# (out cached/, log cached.log) and without a cache (out full/).
RUN_CACHED = r"""
args <- commandArgs(TRUE)
source(file.path(args[1], "library.R"), chdir = TRUE)
options(dbsweep.chunk_rows = 1000L, dbsweep.cores = 2L)
for (stage in strsplit(args[2], ",")[[1]]) {
  dir <- sub(":.*", "", stage)
  trim <- as.numeric(sub(".*:", "", stage))
  for (mode in c("cached", "full")) {
    out_dir <- file.path(dir, mode)
    dir.create(out_dir)
    out <- as.list(setNames(file.path(out_dir, c("steady_state.csv", "cell_stats.csv", "cell_stats.md",
                                                 "comparisons.csv", "comparisons.md")),
                            c("steady_state", "cell_stats_csv", "cell_stats_md", "comparisons_csv", "comparisons_md")))
    tables <- list(summary = file.path(dir, "summary.csv.gz"), series = file.path(dir, "series"))
    params <- list(axes = strsplit(args[4], ",")[[1]], baseline = list(), analysis = list(trim_s = trim),
                   cache = if (mode == "cached") args[3])
    invisible(rule_statistics(tables, out, params, log = file.path(dir, paste0(mode, ".log"))))
  }
}
"""
ADDED = ("innodb", "128M", "xfs", "4", "oltp")  # a cell in the middle of the order, and a baseline of engine
CHANGED = ("myrocks", "64M", "xfs", "1", "oltp")  # the baseline of memory for its engine and threads


def gz_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def write_gz(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", newline="") as f:
        csv.writer(f).writerows([header, *rows])


def stage_folder(folder: Path, summary: tuple, samples: tuple) -> None:
    """One study's tables, samples.parquet and series folder, as aggregate and statistics_series write them."""
    from dbsweep.aggregate import to_parquet
    from dbsweep.statistics_series import write_series

    write_gz(folder / "summary.csv.gz", *summary)
    write_gz(folder / "samples.csv.gz", *samples)
    to_parquet(folder / "samples.csv.gz", folder / "samples.parquet", AXES)
    write_series(folder / "samples.parquet", AXES, folder / "series", batch_rows=5_000)


def cache_line(folder: Path) -> str:
    return next(line for line in (folder / "cached.log").read_text().splitlines() if line.startswith("cache:"))


@pytest.mark.workflow  # ten runs of the statistics rule: 22-25 s each case, too slow for the fast tier
@pytest.mark.parametrize("name", ["one_rep", "three_reps"])
def test_the_cache_gives_the_bytes_of_a_full_recompute_when_a_cell_is_added_or_changed(name, tmp_path):
    """A study without one cell, then with it (added in the middle: every later cell's id moves, and it is the
    baseline of another), then with one cell's throughput 1% higher in one repetition (same summary, new
    data), then that cell's summary row changed (its transactions: computed again, not read back), then with
    another trim (settings), then without the added cell again: each run with the cache
    gives byte for byte the tables of a run without it, reading back every cell but the added or changed
    one. With repetitions the noise pooled over the study moves with the changed cell, so every t interval moves too."""
    sys.path.insert(0, str(ROOT / "workflow"))
    cells, seconds, reps = STUDIES[name]
    gen = tmp_path / "generated"
    gen.mkdir()
    subprocess.run(["Rscript", str(FIXTURES / "generate.R"), str(cells), str(seconds), str(reps), str(gen)],
                   check=True)
    summary = gz_rows(gen / "summary.csv.gz")
    samples = gz_rows(gen / "samples.csv.gz")
    tps = samples[0].index("tps")

    def without(table, cell):
        return table[0], [r for r in table[1] if tuple(r[:5]) != cell]

    def recounted(table):  # one more transaction in the changed cell's first repetition
        at = table[0].index("transactions")
        rows = [[*r[:at], repr(float(r[at]) + 1), *r[at + 1:]] if tuple(r[:5]) == CHANGED and r[5] == "1" else r
                for r in table[1]]
        return table[0], rows

    def changed(table):
        rows = [[*r[:tps], repr(float(r[tps]) * 1.01), *r[tps + 1:]] if tuple(r[:5]) == CHANGED and r[5] == "1"
                else r for r in table[1]]
        return table[0], rows

    stages = {"before": (without(summary, ADDED), without(samples, ADDED), 0),
              "added": (summary, samples, 0), "changed": (summary, changed(samples), 0),
              "summary": (recounted(summary), changed(samples), 0),
              "trimmed": (summary, changed(samples), 5),
              "removed": (without(summary, ADDED), without(changed(samples), ADDED), 5)}
    for stage, (summary_rows, sample_rows, _) in stages.items():
        stage_folder(tmp_path / stage, summary_rows, sample_rows)
    (tmp_path / "run_cached.R").write_text(RUN_CACHED)
    spec = ",".join(f"{tmp_path / stage}:{trim}" for stage, (_, _, trim) in stages.items())
    subprocess.run(["Rscript", str(tmp_path / "run_cached.R"), str(ROOT / "workflow" / "R"), spec,
                   str(tmp_path / "cache"), ",".join(AXES)], check=True, capture_output=True)
    for stage in stages:
        for table in ("steady_state.csv", "cell_stats.csv", "cell_stats.md", "comparisons.csv", "comparisons.md"):
            assert (tmp_path / stage / "cached" / table).read_bytes() == \
                (tmp_path / stage / "full" / table).read_bytes(), (stage, table)
    assert f"0 cells read back, {cells - 1} computed" in cache_line(tmp_path / "before")
    assert f"{cells - 1} cells read back, 1 computed" in cache_line(tmp_path / "added")
    assert f"{cells - 1} cells read back, 1 computed" in cache_line(tmp_path / "changed")
    assert f"{cells - 1} cells read back, 1 computed" in cache_line(tmp_path / "summary")
    assert f"0 cells read back, {cells} computed" in cache_line(tmp_path / "trimmed")
    assert f"{cells - 1} cells read back, 0 computed" in cache_line(tmp_path / "removed")
    moved = [a != b for a, b in zip(rows(tmp_path / "added" / "full" / "cell_stats.csv"),
                                    rows(tmp_path / "changed" / "full" / "cell_stats.csv"), strict=True)]
    assert sum(moved) >= 1  # the change shows in the tables: a stale figure would differ from the full run


def test_cells_are_numbered_in_order_of_first_appearance_whatever_the_batches_and_empty_values(tmp_path):
    """Cells interleaved (a cell's rows in several runs), an empty axis value, and batches that cut runs: each
    row gets its cell's id (1, 2, ... in order of first appearance), the runs of ids are joined across
    batches, and cells.csv names each id's values (empty: empty)."""
    sys.path.insert(0, str(ROOT / "workflow"))
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from dbsweep.statistics_series import write_series

    engine = ["a", "a", "b", "a", None, None, "b", "b", "a"]
    threads = [1, 1, 1, 1, 2, 2, 1, 2, 1]
    ids = [1, 1, 2, 1, 3, 3, 2, 4, 1]
    n = len(engine)
    pq.write_table(pa.table({"engine": engine, "threads": threads, "rep": [1] * n, "second": list(range(n)),
                             "iops": [1.0] * n, "lat_ms": [None] * n, "lat_pct_ms": [2.0] * n}),
                   tmp_path / "samples.parquet", row_group_size=4)
    for batch_rows in (1, 2, 3, 100):
        out = tmp_path / f"series-{batch_rows}"
        assert write_series(tmp_path / "samples.parquet", ["engine", "threads"], out, batch_rows=batch_rows).rows == n
        assert np.fromfile(out / ".cell.i32", "<i4").tolist() == ids
        assert np.fromfile(out / "cell_runs.i32", "<i4").tolist() == [1, 2, 2, 1, 1, 1, 3, 2, 2, 1, 4, 1, 1, 1]
        assert (out / "cells.csv").read_text().splitlines() == [
            '".cell","engine","threads"', '1,"a","1"', '2,"b","1"', '3,,"2"', '4,"b","2"']


def test_a_column_without_any_value_has_no_file_and_the_fingerprints_of_nan_values(tmp_path):
    """iops and lat_ms of a sysbench study are null in every row: series.json lists them as empty, no file
    is written (R reads NA), and each cell's fingerprint is that of the same rows with NaN written out."""
    sys.path.insert(0, str(ROOT / "workflow"))
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from dbsweep.statistics_series import write_series

    n = 6
    table = {"threads": [1, 1, 2, 2, 4, 4], "rep": [1] * n, "second": [1, 2] * 3, "iops": pa.nulls(n, pa.float64()),
             "lat_ms": [None, None, None, None, None, 3.0], "lat_pct_ms": [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]}
    pq.write_table(pa.table(table), tmp_path / "null.parquet", row_group_size=4)
    pq.write_table(pa.table(table | {"iops": [float("nan")] * n}), tmp_path / "nan.parquet", row_group_size=4)
    write_series(tmp_path / "null.parquet", ["threads"], tmp_path / "null")
    write_series(tmp_path / "nan.parquet", ["threads"], tmp_path / "nan")
    assert json.loads((tmp_path / "null" / "series.json").read_text())["empty"] == ["iops"]  # lat_ms has a value
    assert not (tmp_path / "null" / "iops.f64").exists() and (tmp_path / "nan" / "iops.f64").exists()
    assert json.loads((tmp_path / "nan" / "series.json").read_text())["empty"] == []
    fingerprints = (tmp_path / "null" / "fingerprints.txt").read_text()
    assert fingerprints == (tmp_path / "nan" / "fingerprints.txt").read_text() and len(fingerprints.split()) == 3


def series_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_series_cache_copies_unchanged_row_groups_and_gives_the_bytes_of_a_full_run(tmp_path):
    """Row groups of 40 rows (two cells of 20 each, a cell cut across groups): the study, then a cell added
    in the middle (every later group moves), a value changed in one group (same size), the same file again,
    another row grouping, and a cache with a truncated column file. With the cache, each run writes the bytes
    of a run without it, and decodes only the groups whose bytes it has not seen: a group changed in place is
    never read back stale."""
    sys.path.insert(0, str(ROOT / "workflow"))
    import pyarrow as pa
    import pyarrow.parquet as pq
    from dbsweep.statistics_series import write_series

    def study(cells: list[tuple], changed: float = 0.0, group: int = 40) -> Path:
        rows = [(e, t, r, s) for e, t in cells for r in (1, 2) for s in range(1, 11)]
        table = pa.table({"engine": [r[0] for r in rows], "threads": [r[1] for r in rows],
                          "rep": [r[2] for r in rows], "second": [r[3] for r in rows],
                          "tps": [100.0 * r[1] + r[3] + (changed if i == 45 else 0) for i, r in enumerate(rows)],
                          "iops": pa.nulls(len(rows), pa.float64()), "lat_ms": pa.nulls(len(rows), pa.float64()),
                          "lat_pct_ms": [1.0 / r[3] for r in rows]})
        path = tmp_path / f"study-{len(cells)}-{changed}-{group}.parquet"
        pq.write_table(table, path, row_group_size=group)
        return path

    cells = [(e, t) for e in ("a", "b") for t in (1, 2, 4, 8)]
    stages = [("study", study(cells), 0),  # 4 groups
              ("added", study([*cells[:3], ("a", 3), *cells[3:]]), 1),  # 5 groups: the first the same, then moved
              ("changed", study([*cells[:3], ("a", 3), *cells[3:]], changed=0.5), 4),  # row 45: group 2 of 5
              ("again", study([*cells[:3], ("a", 3), *cells[3:]], changed=0.5), 5),
              ("regrouped", study(cells, group=30), 0)]
    for name, parquet, read_back in stages:
        cached = write_series(parquet, ["engine", "threads"], tmp_path / name / "cached", batch_rows=7,
                              cache=tmp_path / "cache")
        write_series(parquet, ["engine", "threads"], tmp_path / name / "full")
        assert series_bytes(tmp_path / name / "cached") == series_bytes(tmp_path / name / "full"), name
        assert (cached.groups, cached.read_back) == (pq.ParquetFile(parquet).metadata.num_row_groups, read_back), name
    (tmp_path / "cache" / "last" / "tps.f64").write_bytes(b"")  # a cache written half: not used
    again = write_series(stages[-1][1], ["engine", "threads"], tmp_path / "half", cache=tmp_path / "cache")
    assert again.read_back == 0 and series_bytes(tmp_path / "half") == series_bytes(tmp_path / "regrouped" / "full")
