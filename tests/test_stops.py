"""Expected stops print one line, not a Python traceback: a tool refusing the cell's option, and Ctrl-C
(SIGINT to snakemake's process group, as a terminal sends it) in the middle of a measured window. The rule
log keeps the details."""
import os
import signal
import subprocess
import time

import pytest

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
