"""Expected stops print one line, not a Python traceback: a tool refusing the cell's option, and Ctrl-C
(SIGINT to snakemake's process group, as a terminal sends it) in the middle of a measured window. The rule
log keeps the details."""
import contextlib
import os
import signal
import subprocess
import time

import pytest

from conftest import ROOT, leftovers

pytestmark = pytest.mark.workflow

CELL = "filesystem~tmpfs/threads~1/workload~w"


def study(runtime: int, **options) -> dict:
    return {"study": "stops", "axes": {"filesystem": ["tmpfs"], "threads": [1], "workload": ["w"]},
            "workloads": {"w": {"tool": "fio", "options": {"rw": "randread", "size": "16M", "runtime": runtime}
                                | options}}}


def test_a_refused_option_is_one_line(study_factory):
    s = study_factory(study(1, cpus_allowed=999))  # fio's parse-only check at load passes it; its run refuses it
    done = s.run(check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Traceback" not in out, out[-3000:]
    lines = [line for line in out.splitlines() if line.startswith(f"dbsweep: run {CELL}/rep~1: ")]
    assert len(lines) == 1 and "fio: CPU 999 too large" in lines[0], out[-3000:]
    log = s.path("results", "logs", "run", CELL, "rep~1.log").read_text()
    assert "Traceback" in log and "Rejected" in log  # the details stay in the rule log


def test_ctrl_c_during_the_window_is_one_line(study_factory):
    s = study_factory(study(30))
    proc = subprocess.Popen(s.argv(), cwd=s.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=os.environ | {"LC_ALL": "C.UTF-8"})
    log = s.path("results", "logs", "run", CELL, "rep~1.log")
    deadline = time.monotonic() + 120
    while not (log.exists() and "progress: run" in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "the run never started measuring"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in out, out[-3000:]
    assert f"dbsweep: run {CELL}/rep~1: stopped by SIGINT" in out, out[-3000:]


def dbsweep_run(s, *args: str) -> subprocess.CompletedProcess:
    """`./dbsweep run` (the entry script, its checks before snakemake included) on the study."""
    return subprocess.run([str(ROOT / "dbsweep"), "run", *s.argv(*args)[1:]], capture_output=True, text=True,
                          env=os.environ | {"LC_ALL": "C.UTF-8"})


def test_after_snakemake_is_sigkilled_dbsweep_run_says_how_to_unlock(study_factory):
    """Snakemake SIGKILLed in a window leaves its lock (.snakemake/locks), which stops the next run on
    "Directory cannot be locked". ./dbsweep run says so in one line, with what to check and the command
    that removes it; a snakemake still running is named instead."""
    s = study_factory(study(30))
    proc = subprocess.Popen(s.argv(), cwd=s.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=os.environ | {"LC_ALL": "C.UTF-8"})
    try:
        log = s.path("results", "logs", "run", CELL, "rep~1.log")
        deadline = time.monotonic() + 120
        while not (log.exists() and "progress: run" in log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "the run never started measuring"
            time.sleep(0.2)
        running = dbsweep_run(s)
        assert running.returncode == 1
        assert f"dbsweep: a snakemake runs in {s.root} (pid {proc.pid}) and holds its lock" in running.stderr
        proc.kill()  # snakemake only: its job goes on, and is stopped below
        proc.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # the job (and snakemake, when an assertion stopped the test)
        proc.wait(120)
    deadline = time.monotonic() + 60
    while leftovers(s.root):
        assert time.monotonic() < deadline, leftovers(s.root)
        time.sleep(0.2)
    assert "Directory cannot be locked" in s.run(check=False).stderr  # what snakemake itself says
    stale = dbsweep_run(s)
    assert stale.returncode == 1 and "Traceback" not in stale.stderr
    (line,) = [ln for ln in stale.stderr.splitlines() if ln.startswith("dbsweep: ")]
    assert line.startswith(f"dbsweep: Snakemake's lock ({s.root}/.snakemake/locks) was left by a snakemake that no "
                           f"longer runs (killed, or a power loss): no snakemake holds {s.root}/results/.lock and "
                           f"none runs in {s.root} on this host. If none runs there from another host either, "
                           "remove the lock with `./dbsweep run ")
    assert line.endswith(" --unlock`, then run again")
    assert dbsweep_run(s, "--unlock").returncode == 0
    s.write(study(3))  # the same cell, measured this time (its run.json: what the lock stopped, not the analysis)
    done = dbsweep_run(s, f"results/runs/{CELL}/rep~1/run.json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert s.path("results", "runs", CELL, "rep~1", "run.json").exists()
