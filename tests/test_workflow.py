"""The real workflow on real loop filesystems, fio and sysbench, a few seconds per cell."""
import copy
import csv
import gzip
import itertools
import json
import re
import signal
import subprocess
import time

import pytest

from conftest import cells_of, leftovers, tiny_study
from page_check import check_page

pytestmark = pytest.mark.workflow  # every test here runs snakemake or a server

CELLS = {"filesystem~ext4/threads~1/workload~fio-rr", "filesystem~ext4/threads~1/workload~sb-rr"}


def rows(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def test_full_run_then_nothing_then_only_new_cells_changed_options_and_edited_r(study_factory):
    """One tiny study through the edits a user makes between runs: a full run, a run with nothing to do, a new
    axis value, an edited R script, a changed workload option. (One study for both: the changed options'
    test measured the same two cells again before its edits.)"""
    study = study_factory(tiny_study())
    first = copy.deepcopy(study.config)
    assert cells_of(study.run().stderr, "run") == CELLS

    # Outputs exist and their values are sane.
    summary = {r["workload"]: r for r in rows(study.path("results/tables/summary.csv.gz"))}
    assert set(summary) == {"fio-rr", "sb-rr"}
    for r in summary.values():
        assert float(r["iops"]) > 100
        assert 0 < float(r["lat_mean_ms"]) < 100
        assert int(r["seconds"]) >= 2
    samples = rows(study.path("results/tables/samples.csv.gz"))
    assert {r["workload"] for r in samples} == {"fio-rr", "sb-rr"}
    assert all(float(r["iops"]) > 0 for r in samples)
    system = rows(study.path("results/tables/system.csv.gz"))
    assert any(r["device"].startswith("loop") and float(r["r_s"]) > 0 for r in system)
    for name in ("cells.csv", "cells.md", "saturation.csv", "saturation.md"):
        assert study.path("results/tables", name).stat().st_size > 0
    for name in ("throughput_vs_threads", "latency_vs_threads", "jitter", "boxplot"):
        assert study.path("results/plots", f"{name}.png").read_bytes()[:4] == b"\x89PNG"

    # Parquet holds the same rows as the gzipped CSV, axes as text.
    import pyarrow.parquet as pq
    table = pq.read_table(study.path("results/tables/samples.parquet"))
    assert table.num_rows == len(samples)
    assert str(table.schema.field("workload").type) == "string" and str(table.schema.field("rep").type) == "int64"
    assert sorted(table.column("iops").to_pylist()) == sorted(float(r["iops"]) for r in samples)

    # Statistics of every cell, the plots the data supports, and why the others are skipped.
    windows = rows(study.path("results/tables/steady_state.csv"))
    assert len(windows) == 2 and all(int(w["window_s"]) >= 2 for w in windows)
    stats = {(r["workload"], r["metric"]): r for r in rows(study.path("results/tables/cell_stats.csv"))}
    assert set(stats) >= {("fio-rr", "iops"), ("sb-rr", "iops")}
    for r in stats.values():
        assert float(r["ci_low"]) <= float(r["median"]) <= float(r["ci_high"])
    for name in ("timeseries_steady", "violin", "ci_vs_threads", "ratio_heatmap", "latency_percentiles"):
        assert study.path("results/plots", f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    skipped = {r["plot"]: r["reason"] for r in rows(study.path("results/tables/skipped_plots.csv"))}
    assert "threads axis" in skipped["ci_vs_threads"] and "ratio_heatmap" in skipped
    assert "latency_percentiles" not in skipped, "fio gives its completion-latency percentiles"

    # The manifest records what ran, where and on what, with checksums of the raw files.
    rep = study.path("results/runs/filesystem~ext4/threads~1/workload~fio-rr/rep~1")
    manifest = json.loads((rep / "run.json").read_text())
    assert manifest["status"] == "ok" and manifest["exit_status"] == 0
    assert manifest["filesystem"]["fstype"] == "ext4" and manifest["filesystem"]["loop_direct_io"] is True
    assert manifest["tools"]["fio"].startswith("fio-")
    assert any(argv[0] == "fio" and "--numjobs=1" in argv for argv in manifest["commands"])
    raw = rep / manifest["attempt"] / "raw"
    assert {"fio.json", "vmstat.txt", "iostat.json"} <= set(manifest["checksums"])
    assert all((raw / name).exists() for name in manifest["checksums"])

    # A second run right after does nothing.
    assert study.job_counts() == {}

    # A new thread value: only its cells run, and the earlier results stay untouched.
    before = (rep / "run.json").stat().st_mtime_ns
    config = copy.deepcopy(study.config)
    config["axes"]["threads"] = [1, 2]
    study.write(config)
    assert cells_of(study.run().stderr, "run") == {c.replace("threads~1", "threads~2") for c in CELLS}
    assert (rep / "run.json").stat().st_mtime_ns == before
    assert len(rows(study.path("results/tables/summary.csv.gz"))) == 4
    skipped = {r["plot"] for r in rows(study.path("results/tables/skipped_plots.csv"))}
    assert "ci_vs_threads" not in skipped
    assert {r["axis"] for r in rows(study.path("results/tables/comparisons.csv"))} == {"threads"}

    # An edited R script reruns only the analysis that uses it, nothing measured (the analysis is up to date).
    plots = study.path("workflow/R/storage_plots.R")
    plots.write_text(plots.read_text() + "\n# edited\n")
    counts = study.job_counts()
    assert counts["plots"] == 1 and counts["summary"] == 1
    assert not {"run", "collect", "aggregate", "prepare"} & set(counts), counts

    # A changed option of one workload reruns only that workload's cell, and keeps its earlier attempt.
    config = copy.deepcopy(first)
    config["workloads"]["fio-rr"]["options"]["bs"] = "4k"
    study.write(config)
    assert cells_of(study.run("--until", "collect").stderr, "run") == {"filesystem~ext4/threads~1/workload~fio-rr"}
    assert len(list(rep.glob("attempt~*"))) == 2, "the earlier attempt's raw output is kept"


def test_killed_run_leaves_nothing_and_reruns_cleanly(study_factory, tmp_path):
    config = tiny_study()
    config["axes"]["workload"] = ["fio-rr"]
    config["workloads"]["fio-rr"]["options"]["runtime"] = 30
    study = study_factory(config)
    proc = subprocess.Popen(study.argv(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    rep = study.path("results/runs/filesystem~ext4/threads~1/workload~fio-rr/rep~1")

    def measuring() -> bool:  # the measured fio: not prepare's, nor the config check's `fio --parse-only`
        return any("fio" in line and "runtime=30" in line and "--parse-only" not in line
                   for line in leftovers(tmp_path)) and any(rep.glob("attempt~*"))

    while not measuring():
        assert time.monotonic() < deadline, "fio never started"
        time.sleep(0.2)
    time.sleep(1)
    # What Ctrl-C does: SIGINT to the whole foreground process group.
    proc.send_signal(signal.SIGINT)
    subprocess.run(["pkill", "-INT", "-g", str(proc.pid)])
    assert proc.wait(timeout=60) != 0
    assert leftovers(tmp_path) == []
    assert not (rep / "run.json").exists()
    (attempt,) = rep.glob("attempt~*")
    assert json.loads((attempt / "run.json").read_text())["status"] == "failed"

    config["workloads"]["fio-rr"]["options"]["runtime"] = 2
    study.write(config)
    study.run("--until", "collect")
    assert json.loads((rep / "run.json").read_text())["status"] == "ok"


def test_bad_config_fails_before_any_job(study_factory):
    study = study_factory(tiny_study(axes={"filesystem": ["ext4"], "threads": [0], "workload": ["fio-rr"]}))
    done = study.run(check=False)
    assert done.returncode != 0
    assert "dbsweep: config error: axes.threads[0]: 0 is below the minimum of 1" in done.stderr
    assert not study.path("results").exists() and not study.path("resources").exists()


def test_tmpfs_and_dir_filesystems_and_the_report(study_factory, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    config = tiny_study()
    # one axis (filesystem), a storage write workload: random writes
    config["axes"] = {"filesystem": ["tmpfs", f"dir:{scratch}"], "threads": [2], "workload": ["sb-wr"]}
    config["workloads"] = {"sb-wr": config["workloads"]["sb-rr"]}
    config["workloads"]["sb-wr"]["options"]["file-test-mode"] = "rndwr"
    del config["workloads"]["sb-wr"]["options"]["file-extra-flags"]  # tmpfs has no O_DIRECT
    study = study_factory(config)
    study.run()
    facts = {}
    for run_json in study.path("results/runs").glob("*/*/*/rep~1/run.json"):
        manifest = json.loads(run_json.read_text())
        facts[manifest["cell"]["filesystem"]] = manifest["filesystem"]
    assert facts["tmpfs"]["fstype"] == "tmpfs"
    assert facts[f"dir:{scratch}"]["type"] == "dir" and facts[f"dir:{scratch}"]["path"] == str(scratch)
    assert list(scratch.iterdir()) == [], "the run's folder under dir: is removed"
    assert len(rows(study.path("results/tables/summary.csv.gz"))) == 2
    # its page in Chromium: the one axis against its first value, with numbers; the saturation table of a
    # write workload has iostat's writes/s
    check_page(study.path("results/index.html"), r"^Answer filesystem against tmpfs \(iops, ratio \[95% CI\], "
               r"verdict\) dir:\S+ / tmpfs: [\d.]+ \[[\d.]+, [\d.]+\], (higher|lower|within noise)",
               "one axis; a storage write workload")
    saturation = study.path("results/index.html").read_text().split("<h3>saturation ")[1].split("<h3>")[0]
    assert ">w_s</th>" in saturation

    study.run("--report", "results/report.html")
    report = study.path("results/report.html").read_text()
    assert "throughput_vs_threads.png" in report and "saturation.csv" in report


def test_an_option_the_tool_rejects_fails_only_its_cell_with_the_tools_message(study_factory):
    config = tiny_study()
    config["axes"]["filesystem"] = ["tmpfs"]
    # fio --parse-only (at load) accepts a CPU this host lacks; fio itself refuses it when the cell runs
    config["workloads"]["fio-rr"]["options"] |= {"direct": 0, "cpus_allowed": 1023}
    del config["workloads"]["sb-rr"]["options"]["file-extra-flags"]
    study = study_factory(config)
    done = study.run("--retries", "1", check=False)  # the profile keeps going: the other cell runs
    assert done.returncode != 0
    assert "fio exited with 1" in done.stderr and "CPU 1023 too large" in done.stderr
    assert study.path("results/runs/filesystem~tmpfs/threads~1/workload~sb-rr/rep~1/summary.json").exists()
    rep = study.path("results/runs/filesystem~tmpfs/threads~1/workload~fio-rr/rep~1")
    assert not (rep / "run.json").exists()
    # The retry saw the refusal and measured nothing: one attempt folder, and the retry's reason.
    (attempt,) = rep.glob("attempt~*")
    assert json.loads((attempt / "run.json").read_text())["rejected"] is True
    assert json.loads((rep / "rejected.json").read_text())["attempt"] == attempt.name
    assert f"not retried: {attempt.name} was refused: fio exited with 1" in done.stderr


def test_repetitions_interleave_never_overlap_show_progress_and_a_dry_run_estimates_the_time(study_factory):
    """Two cells of two repetitions each, run with four cores: one measuring job at a time, in rounds. (One
    study for both: the overlap test ran four repetitions of its own.)"""
    config = {
        "study": "order", "repetitions": 2,
        "axes": {"filesystem": ["tmpfs"], "threads": [1], "workload": ["fio-rr", "sb-rr"]},
        "workloads": {
            # fio's first status line can take 2 s to come
            "fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "4k", "size": "16M", "runtime": 3}},
            "sb-rr": {"tool": "sysbench-fileio", "options": {"file-test-mode": "rndrd", "file-num": 1,
                                                             "file-total-size": "16M", "time": 2}},
        },
    }
    study = study_factory(config)
    # Nothing measured yet: 4 repetitions of 2 s each, and the documented default overhead.
    err = study.run("-n").stderr
    assert "dbsweep: 4 repetitions to run, about 16 s: 10 s measured windows and warm-ups + 6 s overhead " \
           "(per repetition storage 1.6 s; defaults)" in err, err
    study.run("-c4", "--until", "collect")

    # No two measuring jobs overlapped, though four cores would take them.
    windows = sorted((json.loads(p.read_text())["started"], json.loads(p.read_text())["ended"])
                     for p in study.path("results/runs").rglob("rep~*/run.json"))
    assert len(windows) == 4
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert end <= start, f"two measuring jobs overlapped: one ended {end}, the next started {start}"
    # The profile's `measure` token is what keeps them apart; collect and analysis jobs do not take it.
    dry = study.run("-c4", "-n", "--forcerun", "run").stdout
    collect = dry.split("rule collect:", 1)[1].split("\n\n", 1)[0]
    assert "resources:" in collect and "measure=1" not in collect

    # Repetition 1 of every cell started before repetition 2 of any.
    started = {}
    for path in study.path("results/runs").glob("*/*/*/rep~*/run.json"):
        record = json.loads(path.read_text())
        started[(record["cell"]["workload"], record["rep"])] = record["started"]
    assert len(started) == 4
    assert max(t for (_, rep), t in started.items() if rep == 1) < min(t for (_, rep), t in started.items() if rep == 2)

    # Each run's log has the live line, read from the tool's per-second output.
    for workload in ("fio-rr", "sb-rr"):
        log = study.path(f"results/logs/run/filesystem~tmpfs/threads~1/workload~{workload}/rep~1.log").read_text()
        lines = [line for line in log.splitlines() if line.startswith("progress: run ")]
        assert lines, log[-2000:]
        match = re.fullmatch(r"progress: run (\d+)/[23] s, ([\d,]+) IOPS", lines[-1])
        assert match and int(match[1]) >= 1 and int(match[2].replace(",", "")) > 100, lines

    # A new thread value: the estimate counts only its 4 repetitions, with the overhead the runs measured.
    config["axes"]["threads"] = [1, 2]
    study.write(config)
    err = study.run("-n").stderr
    match = re.search(r"dbsweep: 4 repetitions to run, about .*\(per repetition storage ([\d.]+) s; "
                      r"measured from 4 earlier runs\)", err)
    assert match and 1.0 < float(match[1]) < 10, err
