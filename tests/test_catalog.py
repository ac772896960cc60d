"""The results catalog: adding real result trees, refusing bad ones, compare (against statistics.R), history and its
change points, and the scale benchmark's smoke mode.

tests/fixtures/catalog/{a,b} are what the catalog reads of two real runs of the default study on this machine
(`./dbsweep run -c2`; b: repetitions 2 and fio bs 4k): tables/*.csv.gz, steady_state.csv, provenance.json and
each repetition's run.json (the raw output left out).
"""
import csv
import gzip
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

from conftest import ROOT
from dbsweep import catalog, cli, compare, history
from dbsweep.catalog import CatalogError
from dbsweep.changepoints import change_points

FIXTURES = ROOT / "tests" / "fixtures" / "catalog"
A, B = FIXTURES / "a", FIXTURES / "b"


def run_jsons(tree: Path) -> list[Path]:
    return [p for p in tree.glob("runs/**/rep~*/run.json") if "attempt~" not in str(p)]


def csv_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def counts(path: Path) -> dict:
    with duckdb.connect(str(path), read_only=True) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("sources", "runs", "run_axes", "run_versions", "summary", "samples", "system", "counters",
                          "percentiles")}


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "catalog.duckdb"


def test_add_keeps_every_run_and_row_of_a_real_tree(db):
    added = catalog.add(db, [A])
    assert added.runs == len(run_jsons(A)) == 14
    n = counts(db)
    for kind in ("summary", "samples", "system", "counters", "percentiles"):
        assert n[kind] == len(csv_rows(A / "tables" / f"{kind}.csv.gz")), kind
    with duckdb.connect(str(db), read_only=True) as con:
        runs = con.execute("SELECT cell, rep, attempt, host, tool, server, metric, median, window_start, window_end "
                           "FROM runs ORDER BY cell").fetchall()
        oltp = con.execute("SELECT name, version FROM run_versions JOIN runs USING (run_id) WHERE cell = "
                           "'engine~postgresql/memory~16M/filesystem~xfs/threads~4/workload~oltp-rw'").fetchall()
        axes = dict(con.execute("SELECT axis, value FROM run_axes JOIN runs USING (run_id) "
                                "WHERE cell = 'filesystem~xfs/threads~4/workload~fio-randread'").fetchall())
    record = json.loads((A / "runs/filesystem~xfs/threads~4/workload~fio-randread/rep~1/run.json").read_text())
    fio = next(r for r in runs if r[0] == "filesystem~xfs/threads~4/workload~fio-randread")
    assert fio[1:6] == (1, record["attempt"], record["host"]["hostname"], "fio", None)
    assert axes == {"engine": None, "memory": None, "filesystem": "xfs", "threads": "4", "workload": "fio-randread"}
    assert ("sysbench", "sysbench 1.0.20") in oltp and any(n == "postgresql" and v.startswith("PostgreSQL")
                                                           for n, v in oltp)
    # each run's median is that of its metric's per-second values inside the window steady_state.csv gives
    samples = [r for r in csv_rows(A / "tables" / "samples.csv.gz")
               if (r["filesystem"], r["threads"], r["workload"]) == ("xfs", "4", "fio-randread")]
    inside = sorted(float(r["iops"]) for r in samples if fio[8] <= int(r["second"]) <= fio[9])
    assert fio[6] == "iops" and fio[7] == pytest.approx(np.median(inside))
    assert all(r[6] == "tps" for r in runs if "oltp" in r[0])


def test_adding_the_same_tree_twice_adds_nothing(db, tmp_path):
    catalog.add(db, [A])
    before = counts(db)
    copy = tmp_path / "copy"
    shutil.copytree(A, copy)   # the same runs from another place (a copy from another host)
    again = catalog.add(db, [A, copy])
    assert (again.runs, again.skipped) == (0, 28)
    assert counts(db) == before


def test_two_trees_add_up_and_record_dbsweeps_commit(db):
    catalog.add(db, [A, B])
    assert counts(db)["runs"] == len(run_jsons(A)) + len(run_jsons(B))
    assert counts(db)["sources"] == 2
    with duckdb.connect(str(db), read_only=True) as con:
        commits = con.execute("SELECT DISTINCT dbsweep_commit FROM runs JOIN sources USING (source_id) "
                              "WHERE path = ?", [str(B.resolve())]).fetchall()
    expected = {json.loads(p.read_text())["dbsweep"]["commit"] for p in run_jsons(B)}
    assert {c[0] for c in commits} == expected and None not in expected


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(db: Path, trees: list[Path]) -> str:
    """Adding trees fails with one line; the catalog is unchanged. Returns the line."""
    before = counts(db)
    with pytest.raises(CatalogError) as e:
        catalog.add(db, trees)
    assert "\n" not in str(e.value)
    assert counts(db) == before
    return str(e.value)


def test_a_folder_that_is_not_a_result_tree_is_refused_naming_the_file(db, tmp_path):
    catalog.add(db, [A])
    (tmp_path / "notes").mkdir()
    message = refused(db, [B, tmp_path / "notes"])   # B is not half-added either
    assert message.startswith(f"{tmp_path / 'notes' / 'tables' / 'provenance.json'}: missing")


def test_a_truncated_table_is_refused_naming_it_and_nothing_is_added(db, tmp_path):
    catalog.add(db, [A])
    cut = tmp_path / "cut"
    shutil.copytree(B, cut)
    table = cut / "tables" / "samples.csv.gz"
    table.write_bytes(table.read_bytes()[: table.stat().st_size // 2])   # a copy that stopped halfway
    assert refused(db, [cut]).startswith(f"{table}: truncated")


def test_a_run_claiming_an_identity_with_other_data_is_refused(db, tmp_path):
    catalog.add(db, [A])
    forged = tmp_path / "forged"
    shutil.copytree(A, forged)
    path = forged / "runs/filesystem~ext4/threads~1/workload~fio-randread/rep~1/run.json"
    record = json.loads(path.read_text())
    record["checksums"]["fio.json"] = "0" * 64      # same study, cell, rep, attempt, host; other raw output
    path.write_text(json.dumps(record))
    message = refused(db, [forged])
    assert message.startswith(f"{path}: run demo filesystem~ext4/threads~1/workload~fio-randread rep 1")
    assert "other data" in message


def test_a_failed_first_add_leaves_no_catalog(db, tmp_path):
    with pytest.raises(CatalogError):
        catalog.add(db, [tmp_path])
    assert not db.exists()


def test_the_command_line_says_one_line_on_bad_input(db, tmp_path, capsys):
    assert cli.main(["catalog", "add", str(tmp_path), "--catalog", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dbsweep: ") and "Traceback" not in err


def r_ratios(groups: dict[str, tuple[list[float], list[float]]]) -> dict[str, tuple]:
    """statistics.R's ratio_to_baseline on the same per-repetition medians: side A against baseline side B, the
    noise pooled over every cell of both sides."""
    lines = []
    for cell, (a, b) in groups.items():
        for side, values in (("A", a), ("B", b)):
            lines.append(f'list(cell = "{cell}", side = "{side}", v = c({", ".join(map(repr, values))}))')
    script = f"""
        options(dbsweep.plots = FALSE)  # draws nothing: R starts without ggplot2
        source("workflow/R/library.R", chdir = TRUE)
        groups <- list({", ".join(lines)})
        cells <- rbindlist(lapply(groups, function(g) data.table(cell = g$cell, side = g$side,
                                                                  median = median(g$v), rep_gmean = geometric_mean(g$v),
                                                                  reps = length(g$v))))
        setattr(cells, "noise", pooled_noise(lapply(groups, `[[`, "v")))
        r <- ratio_to_baseline(cells, c("cell", "side"), "side", "B")
        fwrite(r[, .(cell, ratio, ratio_low, ratio_high, verdict)], "")
    """
    done = subprocess.run(["Rscript", "-e", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return {r["cell"]: (float(r["ratio"]), float(r["ratio_low"]), float(r["ratio_high"]), r["verdict"])
            for r in csv.DictReader(done.stdout.splitlines())}


def test_compare_gives_the_ratio_and_ci_of_stats_r_on_the_same_data(db):
    catalog.add(db, [A, B])
    with catalog.connect(db, read_only=True) as con:
        a, _, _ = compare.side_values(con, compare.parse_side(str(B)), {"build"})
        b, _, _ = compare.side_values(con, compare.parse_side(str(A)), {"build"})
    assert any(len(v) == 2 for v in a.values())      # B has 2 repetitions: the pooled t interval
    python = {r.cell: r for r in compare.ratios(a, b)}
    r = r_ratios({cell.split(": ")[1]: (a[cell], b[cell]) for cell in python})
    assert len(r) == len(python) == 14
    for cell, mine in python.items():
        ratio, low, high, verdict = r[cell.split(": ")[1]]
        assert (mine.ratio, mine.low, mine.high) == pytest.approx((ratio, low, high), rel=1e-9)
        assert mine.verdict == verdict


def test_t_quantile_matches_r():
    done = subprocess.run(["Rscript", "-e", "cat(format(qt(0.975, c(1, 2, 5, 14, 100)), digits = 17), sep='\\n')"],
                          capture_output=True, text=True, check=True)
    expected = [float(x) for x in done.stdout.split()]
    assert [compare.t_quantile(0.975, df) for df in (1, 2, 5, 14, 100)] == pytest.approx(expected, rel=1e-9)


def test_compare_command_writes_table_and_plot_and_lists_cells_of_one_side(db, tmp_path, capsys):
    catalog.add(db, [A, B])
    out = tmp_path / "cmp"
    assert cli.main(["compare", f"source={A}", "filesystem=ext4", "--catalog", str(db), "--out", str(out)]) == 0
    md = (out / "compare.md").read_text()
    rows = list(csv.DictReader((out / "compare.csv").read_text().splitlines()))
    # A's xfs-only database cells are not on side B (ext4 cells of both trees)
    assert {r["cell"] for r in rows} == {f"demo: threads~{t}/workload~{w}" for t in (1, 4)
                                         for w in ("fio-randread", "fileio-rndrd")}
    assert all(r["verdict"] in ("higher", "lower", "within noise") for r in rows)
    assert "Only in A" in md and "engine~myrocks/memory~16M/threads~4/workload~oltp-rw" in md
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["compare", "host=elsewhere", str(A), "--catalog", str(db), "--out", str(out)]) == 2
    assert capsys.readouterr().err == "dbsweep: host=elsewhere: no run in the catalog matches\n"


# ---------------------------------------------------------------------------
# change points (synthetic series: the detector's own unit tests)

def test_a_shift_of_5_percent_on_2_percent_noise_is_found_where_it_is():
    rng = np.random.default_rng(7)
    z = rng.normal(1000, 20, 300)
    z[120:] *= 1.05
    z[220:] *= 0.9
    found = change_points(z)
    assert [c.index for c in found] == pytest.approx([120, 220], abs=2)
    assert found[0].size == pytest.approx(0.05, abs=0.01) and found[1].size == pytest.approx(-0.1, abs=0.01)


def test_series_without_change_rarely_get_one():
    rng = np.random.default_rng(11)
    alarms = sum(len(change_points(rng.normal(1, 0.02, 200), seed=i)) for i in range(100))
    assert alarms <= 4     # the level is 1% per series: about 1 in 100 expected


def test_short_or_flat_series_have_no_change():
    assert change_points([]) == [] and change_points([5.0]) == [] and change_points([3.0] * 20) == []


# ---------------------------------------------------------------------------
# history

def test_history_page_lists_changes_largest_first_each_with_its_own_plot(tmp_path):
    rng = np.random.default_rng(3)

    def series(cell, factor):
        values = rng.normal(100, 2, 40)
        values[25:] *= factor
        points = [history.Point(i, f"2026-11-{1 + i % 28:02d} 00:00:00", None, "/x", v) for i, v in enumerate(values)]
        return history.Series("demo", cell, "vm", "tps", points)

    out = tmp_path / "history.html"
    history.write(history.detect([series("small", 1.06), series("big", 0.7), series("none", 1.0)]),
                  tmp_path / "catalog.duckdb", out)
    page = out.read_text()
    assert page.index("demo: big on vm") < page.index("demo: small on vm")
    assert page.count("<svg") == 2 and "-30." in page and "+6." in page
    assert "Without a change (1)" in page and "demo: none on vm" in page
    assert "<script" not in page and "src=" not in page and "href='http" not in page   # self-contained


def test_history_command_over_real_trees(db, tmp_path, capsys):
    catalog.add(db, [A, B])
    out = tmp_path / "history.html"
    assert cli.main(["catalog", "history", "--catalog", str(db), "--out", str(out)]) == 0
    page = out.read_text()
    with duckdb.connect(str(db), read_only=True) as con:
        series = con.execute("SELECT count(DISTINCT (study, series, host)) FROM runs").fetchone()[0]
    assert f"in {series} series" in page and series == 14
    order = history.load(duckdb.connect(str(db), read_only=True), "demo")[0].points
    assert [p.started for p in order] == sorted(p.started for p in order)


def test_history_orders_by_build_in_natural_order():
    assert sorted(["10.11.10", "10.11.2", "9.6"], key=history.natural) == ["9.6", "10.11.2", "10.11.10"]


# ---------------------------------------------------------------------------

def test_scale_benchmark_smoke():
    done = subprocess.run([sys.executable, "bench/catalog.py", "--smoke"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| injected shifts (5-20%, 2% noise) found" in done.stdout and "2 of 2" in done.stdout


@pytest.mark.workflow
def test_nightly_builds_through_the_real_workflow(study_factory, workdir, tmp_path_factory):
    """README's nightly example, small: a tree per night with the night's `build`, added, compared, history."""
    from conftest import tiny_study
    trees = tmp_path_factory.mktemp("nights")
    study = None
    for night in ("n1", "n2"):
        config = tiny_study(axes={"filesystem": ["tmpfs"], "threads": [1], "workload": ["fio-rr", "sb-rr"],
                                  "build": [night]})
        if study is None:
            study = study_factory(config)
        else:
            study.write(config)
        study.run("--until", "aggregate")  # what catalog add reads: provenance, the summary, run.json
        shutil.move(study.path("results"), trees / night)
    db = trees / "catalog.duckdb"
    assert cli.main(["catalog", "add", str(trees / "n1"), str(trees / "n2"), "--catalog", str(db)]) == 0
    out = trees / "cmp"
    assert cli.main(["compare", "build=n2", "build=n1", "--catalog", str(db), "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "compare.csv").read_text().splitlines()))
    assert sorted(r["cell"] for r in rows) == ["tiny: filesystem~tmpfs/threads~1/workload~fio-rr",
                                               "tiny: filesystem~tmpfs/threads~1/workload~sb-rr"]
    with catalog.connect(db, read_only=True) as con:
        series = history.load(con, "tiny")
    assert [[p.build for p in s.points] for s in series] == [["n1", "n2"], ["n1", "n2"]]


def test_run_json_names_the_dbsweep_commit_that_ran_it(tmp_path):
    from dbsweep import manifest
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert manifest.dbsweep_version()["commit"] == head
    copy = tmp_path / "workflow"          # a copied workflow (as the tests and benchmarks run it): no git
    shutil.copytree(ROOT / "workflow" / "dbsweep", copy / "dbsweep")
    done = subprocess.run([sys.executable, "-c", "from dbsweep import manifest; print(manifest.dbsweep_version())"],
                          cwd=copy, capture_output=True, text=True,
                          env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"})
    assert done.stdout.strip() == "{'commit': None, 'dirty': None}", done.stderr


def test_a_run_not_yet_in_the_tables_waits_for_a_later_add(db, tmp_path):
    tree = tmp_path / "growing"
    shutil.copytree(A, tree)
    cell = tree / "runs/filesystem~ext4/threads~1/workload~fio-randread"
    record = json.loads((cell / "rep~1/run.json").read_text())
    (cell / "rep~2").mkdir()
    (cell / "rep~2/run.json").write_text(json.dumps(record | {"rep": 2, "attempt": "attempt~20261123T180000-vm-1"}))
    assert catalog.add(db, [tree]).runs == 14      # rep~2 ran after the tables were made: not added yet
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs WHERE rep = 2").fetchone()[0] == 0


def test_compare_with_one_repetition_follows_stats_r_block_bootstrap(db, tmp_path):
    """One repetition everywhere: the CI is the bootstrap of block medians. R and Python draw different random
    numbers, so the ratio matches exactly and the CI to bootstrap error."""
    catalog.add(db, [A])
    a, b = compare.parse_side("filesystem=xfs"), compare.parse_side("filesystem=ext4")
    with catalog.connect(db, read_only=True) as con:
        python = {r.cell.split(": ")[1]: r for r in compare.compare(con, a, b).rows}
        rows = []
        for side, selector in (("A", a), ("B", b)):
            for cell, ids in compare.side_values(con, selector, a.axes | {"build"})[2].items():
                rows += [(cell.split(": ")[1], side, i + 1, v)
                         for i, v in enumerate(compare.window_seconds(con, ids[0]))]
    samples = tmp_path / "samples.csv"
    with open(samples, "w", newline="") as f:
        csv.writer(f).writerows([("cell", "side", "second", "value")] + rows)
    script = f"""
        options(dbsweep.plots = FALSE)  # draws nothing: R starts without ggplot2
        source("workflow/R/library.R", chdir = TRUE)
        win <- fread("{samples}")[, rep := 1L]
        cells <- cell_stats(win, c("cell", "side"))
        r <- ratio_to_baseline(cells, c("cell", "side"), "side", "B")
        fwrite(r[, .(cell, ratio, ratio_low, ratio_high, test)], "")
    """
    done = subprocess.run(["Rscript", "-e", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    r = {row["cell"]: row for row in csv.DictReader(done.stdout.splitlines())}
    assert set(r) == set(python) and len(r) == 4
    for cell, mine in python.items():
        assert r[cell]["test"].startswith("bootstrap of block medians") and mine.test.startswith("bootstrap of block")
        assert mine.ratio == pytest.approx(float(r[cell]["ratio"]), rel=1e-9)
        assert (mine.low, mine.high) == pytest.approx((float(r[cell]["ratio_low"]), float(r[cell]["ratio_high"])),
                                                      rel=0.15)
