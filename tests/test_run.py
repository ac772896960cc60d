"""Stopping a measured tool: nothing of it survives, whatever sessions its children made."""
import os
import subprocess
import time

import psutil

from conftest import leftovers
from dbsweep.measure import stop_tree


def test_stop_tree_reaches_fio_jobs_that_left_the_session(tmp_path):
    argv = ["fio", "--name=t", f"--filename={tmp_path}/f", "--size=8M", "--rw=randread", "--numjobs=3",
            "--time_based", "--runtime=60"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 20
    # a job calls setsid() a moment after fio forks it
    while len(jobs := psutil.Process(proc.pid).children()) < 3 or \
            any(os.getsid(job.pid) == os.getsid(proc.pid) for job in jobs):
        assert time.monotonic() < deadline, \
            "fio's jobs run in sessions of their own, so killing the process group would miss them"
        time.sleep(0.1)
    stop_tree(proc, grace=0)
    assert proc.returncode is not None
    assert not any(job.is_running() and job.status() != psutil.STATUS_ZOMBIE for job in jobs)
    assert leftovers(tmp_path) == []


def test_a_repetition_enters_what_each_concern_gives_in_the_stacks_order_of_kinds(monkeypatch):
    """run.enter_resources: the concerns' resources (Concern.resources) entered by kind, not by the concerns'
    order (the filesystems concern comes first, the host's settings must be entered before its filesystem), left
    in reverse; it returns the filesystem."""
    from contextlib import contextmanager

    from dbsweep import run
    from dbsweep.concern import Concern, Repetition
    from dbsweep.runtime.resources import Stack

    events = []

    @contextmanager
    def held(name):
        events.append(f"enter {name}")
        yield name
        events.append(f"leave {name}")

    parts = (Concern(name="fs", resources=lambda rep: [("filesystem", "ext4", held("fs"))]),
             Concern(name="none"),
             Concern(name="noise", resources=lambda rep: [("host", "settings", held("host"))]))
    monkeypatch.setattr(run, "CONCERNS", parts)
    with Stack() as stack:
        assert run.enter_resources(stack, Repetition(None, None, None, None, {}, None)) == "fs"
        assert [h.kind for h in stack.held] == ["host", "filesystem"]
    assert events == ["enter host", "enter fs", "leave fs", "leave host"]
