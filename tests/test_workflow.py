"""The real workflow on real loop filesystems, fio and sysbench, a few seconds per cell."""
import copy
import csv
import gzip
import json
import signal
import subprocess
import time

from conftest import leftovers, tiny_study

CELLS = {"filesystem~ext4/threads~1/workload~fio-rr", "filesystem~ext4/threads~1/workload~sb-rr"}


def rows(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def test_full_run_then_nothing_then_only_new_cells(study_factory):
    study = study_factory(tiny_study())
    assert study.planned("run") == CELLS
    study.run()

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
    assert study.planned("run") == {c.replace("threads~1", "threads~2") for c in CELLS}
    study.run()
    assert (rep / "run.json").stat().st_mtime_ns == before
    assert len(rows(study.path("results/tables/summary.csv.gz"))) == 4


def test_changed_options_rerun_only_that_workload_and_edited_r_only_analysis(study_factory):
    study = study_factory(tiny_study())
    study.run()
    config = copy.deepcopy(study.config)
    config["workloads"]["fio-rr"]["options"]["bs"] = "4k"
    study.write(config)
    assert study.planned("run") == {"filesystem~ext4/threads~1/workload~fio-rr"}
    study.run()
    fio_rep = study.path("results/runs/filesystem~ext4/threads~1/workload~fio-rr/rep~1")
    assert len(list(fio_rep.glob("attempt~*"))) == 2, "the earlier attempt's raw output is kept"

    plots = study.path("workflow/scripts/plots.R")
    plots.write_text(plots.read_text() + "\n# edited\n")
    assert study.job_counts() == {"plots": 1, "all": 1}


def test_killed_run_leaves_nothing_and_reruns_cleanly(study_factory, tmp_path):
    config = tiny_study()
    config["axes"]["workload"] = ["fio-rr"]
    config["workloads"]["fio-rr"]["options"]["runtime"] = 30
    study = study_factory(config)
    proc = subprocess.Popen(study.argv(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while not any("fio" in line for line in leftovers(tmp_path)):
        assert time.monotonic() < deadline, "fio never started"
        time.sleep(0.2)
    time.sleep(1)
    # What Ctrl-C does: SIGINT to the whole foreground process group.
    proc.send_signal(signal.SIGINT)
    subprocess.run(["pkill", "-INT", "-g", str(proc.pid)])
    assert proc.wait(timeout=60) != 0
    assert leftovers(tmp_path) == []
    rep = study.path("results/runs/filesystem~ext4/threads~1/workload~fio-rr/rep~1")
    assert not (rep / "run.json").exists()
    (attempt,) = rep.glob("attempt~*")
    assert json.loads((attempt / "run.json").read_text())["status"] == "failed"

    config["workloads"]["fio-rr"]["options"]["runtime"] = 2
    study.write(config)
    study.run()
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
    config["axes"] = {"filesystem": ["tmpfs", f"dir:{scratch}"], "threads": [2], "workload": ["sb-rr"]}
    del config["workloads"]["sb-rr"]["options"]["file-extra-flags"]  # tmpfs has no O_DIRECT
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

    study.run("--report", "results/report.html")
    report = study.path("results/report.html").read_text()
    assert "throughput_vs_threads.png" in report and "saturation.csv" in report


def test_an_option_the_tool_rejects_fails_only_its_cell_with_the_tools_message(study_factory):
    config = tiny_study()
    config["axes"]["filesystem"] = ["tmpfs"]
    config["workloads"]["fio-rr"]["options"] |= {"direct": 0, "bogus_option": 1}
    del config["workloads"]["sb-rr"]["options"]["file-extra-flags"]
    study = study_factory(config)
    done = study.run("--keep-going", "--retries", "1", check=False)
    assert done.returncode != 0
    assert "fio exited with 1" in done.stderr and "bogus_option" in done.stderr
    assert study.path("results/runs/filesystem~tmpfs/threads~1/workload~sb-rr/rep~1/summary.json").exists()
    rep = study.path("results/runs/filesystem~tmpfs/threads~1/workload~fio-rr/rep~1")
    assert not (rep / "run.json").exists()
    # The retry saw the refusal and measured nothing: one attempt folder, and the retry's reason.
    (attempt,) = rep.glob("attempt~*")
    assert json.loads((attempt / "run.json").read_text())["rejected"] is True
    assert json.loads((rep / "rejected.json").read_text())["attempt"] == attempt.name
    assert f"not retried: {attempt.name} was refused: fio exited with 1" in done.stderr


def test_measuring_jobs_never_overlap_locally_even_with_four_cores(study_factory):
    config = tiny_study()
    config["axes"] = {"filesystem": ["tmpfs"], "threads": [1, 2], "workload": ["fio-rr", "sb-rr"]}
    config["workloads"]["fio-rr"]["options"] |= {"direct": 0, "runtime": 2}
    del config["workloads"]["sb-rr"]["options"]["file-extra-flags"]
    config["workloads"]["sb-rr"]["options"]["time"] = 2
    study = study_factory(config)
    study.run("-c4")
    windows = sorted((json.loads(p.read_text())["started"], json.loads(p.read_text())["ended"])
                     for p in study.path("results/runs").rglob("rep~1/run.json"))
    assert len(windows) == 4
    for (_, end), (start, _) in zip(windows, windows[1:]):
        assert end <= start, f"two measuring jobs overlapped: one ended {end}, the next started {start}"
    # The profile's `measure` token is what keeps them apart; collect and analysis jobs do not take it.
    dry = study.run("-c4", "-n", "--forcerun", "run").stdout
    collect = dry.split("rule collect:", 1)[1].split("\n\n", 1)[0]
    assert "resources:" in collect and "measure=1" not in collect
