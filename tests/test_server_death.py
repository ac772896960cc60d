"""What a failure says when the server dies in the measured window: the job's one line names the server
first (its program, pid, signal and when in the window), then the client's exit. A real PostgreSQL
postmaster SIGKILLed under a plain sysbench window: sysbench then dies of its own (signal 11 with
PostgreSQL's driver, as seen), which is the consequence, not the cause."""
import json
import re
import signal
import subprocess
import time

import psutil
import pytest

from test_database_workflow import db_study, servers_in, workdir  # noqa: F401 - the fixture

pytestmark = pytest.mark.workflow


def this_studys_client(proc: subprocess.Popen) -> psutil.Process | None:
    """The study's own sysbench of the measured window (another test worker may run one too)."""
    try:
        return next((p for p in psutil.Process(proc.pid).children(recursive=True)
                     if p.name() == "sysbench" and "--time=60" in " ".join(p.cmdline())), None)
    except psutil.Error:
        return None


def test_a_postmaster_killed_in_the_window_is_named_first_with_its_signal_and_time(study_factory,
                                                                                    workdir):  # noqa: F811
    config = db_study(engines=["postgresql"])
    config["workloads"]["oltp"]["options"]["time"] = 60
    study = study_factory(config)
    proc = subprocess.Popen(study.argv(), cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while this_studys_client(proc) is None:
        assert time.monotonic() < deadline, "the measured run never started"
        time.sleep(0.2)
    time.sleep(2)
    (postmaster,) = [p for p in servers_in(workdir) if p.parent() is None or p.parent().name() != "postgres"]
    postmaster.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=120) != 0
    assert servers_in(workdir) == []
    rep = next(study.path("results/runs").glob("engine~postgresql/*/*/*/*/rep~1"))
    (attempt,) = rep.glob("attempt~*")
    record = json.loads((attempt / "run.json").read_text())
    error = record["error"]
    # the window's other processes: a share of the host (the killed server was counted as foreign: 5434%)
    assert 0 <= record["disturbances"]["settings"]["foreign_cpu_pct"] <= 100
    first = error.splitlines()[0]
    found = re.match(rf"postgres \(pid {postmaster.pid}\) was killed by signal 9 \(SIGKILL\) at (\d+\.\d) s into "
                     r"the window, then sysbench (was killed by signal|exited with) ", first)
    assert found, error
    assert 1 < float(found[1]) < 30
    # the job's one line (the run log's last, and the terminal's) says the same, in the same order
    log = study.path("results/logs/run", rep.relative_to(study.path("results/runs")).as_posix() + ".log")
    line = log.read_text().splitlines()[-1]
    assert line.split(": ", 2)[2].startswith(first)
    assert "the server's last words: " in line
    assert not (rep / "rejected.json").exists()  # a failure, retried; not the cell's refusal
