"""The repetition's runtime: its cgroup owns every process, its guardian releases a dead job's
repetition, the host's measuring lock keeps measurements apart, its resources leave in reverse."""
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from conftest import ROOT, leftovers
from dbsweep import measure, stops, storage
from dbsweep.runtime import blkio, cgroup, lock, owned
from dbsweep.runtime.resources import Stack

@pytest.fixture(autouse=True)
def own_lock(request, tmp_path, monkeypatch):
    """Tests in this process take a measuring lock of their own, not the host's (a study measuring on
    this host would hold them up); the workflow test of the guardian uses the host's, as a job does."""
    if "workflow" not in request.keywords:
        monkeypatch.setattr(lock, "PATH", tmp_path / "measure.lock")


FIO = ["fio", "--name=t", "--size=4M", "--rw=randread", "--numjobs=2", "--time_based", "--runtime=60"]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def test_leaving_kills_every_process_the_repetition_started_even_those_that_left_its_session(tmp_path):
    with owned("test", tmp_path / "active", io.StringIO()) as rep:
        assert f":/{cgroup.BASE}/{rep.name}" in Path("/proc/self/cgroup").read_text()
        fio = subprocess.Popen(FIO + [f"--filename={tmp_path}/f"], stdout=subprocess.DEVNULL, start_new_session=True)
        jobs = wait_for(lambda: len(pids := [p.pid for p in psutil.Process(fio.pid).children()]) >= 2
                        and all(os.getsid(job) != os.getsid(fio.pid) for job in pids) and pids,
                        what="fio's jobs, each in a session of its own (setsid a moment after the fork)")
        assert {fio.pid, *jobs} <= set(rep.pids())
        sleeper = subprocess.Popen(["setsid", "-f", "sleep", "300"])  # double-forked: no parent of ours
        sleeper.wait()
        wait_for(lambda: len(rep.pids()) >= 5, what="the detached sleep")
        everything = [pid for pid in rep.pids() if pid != os.getpid()]
    assert not rep.path.exists()
    assert f":/{cgroup.BASE}/" not in Path("/proc/self/cgroup").read_text(), "this process left the cgroup"
    assert len(everything) == 4 and [pid for pid in everything if alive(pid)] == []
    assert leftovers(tmp_path) == []


def test_v2_cgroup_kill_empties_the_subtree():
    """cgroup v2's code path, on the unified hierarchy (this host mounts one beside v1)."""
    point = next((Path(p) for root, p, fstype, _ in cgroup.mounts() if fstype == "cgroup2" and root == "/"), None)
    if point is None or not os.access(point, os.W_OK):
        pytest.skip("no writable cgroup v2 hierarchy")
    h = cgroup.Hierarchy(2, point, "")
    sleeper = subprocess.Popen(["sleep", "300"])
    rep = cgroup.create(h, sleeper.pid)
    try:
        cgroup.move(sleeper.pid, rep.entry)
        child = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"])
        cgroup.move(child.pid, rep.entry)
        assert {sleeper.pid, child.pid} <= set(rep.pids())
        killed = rep.kill()
        assert sleeper.pid in killed and rep.pids() == []
        assert sleeper.wait(5) == -signal.SIGKILL
    finally:
        rep.kill()
        rep.remove()
    assert not rep.path.exists()


def test_sweep_kills_a_dead_owners_cgroup_and_leaves_a_live_ones():
    h = cgroup.hierarchy()
    dead = subprocess.Popen(["true"])
    dead_rep = cgroup.create(h, dead.pid)  # named after it while it ran
    dead.wait()
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)
    cgroup.move(orphan.pid, dead_rep.path if h.version == 1 else dead_rep.entry)
    live = subprocess.Popen(["sleep", "300"])
    live_rep = cgroup.create(h, live.pid)
    cgroup.move(live.pid, live_rep.entry)
    try:
        released = cgroup.sweep(h)
        assert any(dead_rep.name in line for line in released)
        assert orphan.wait(10) == -signal.SIGKILL and not dead_rep.path.exists()
        assert live.poll() is None and live_rep.path.exists(), "a live owner's repetition is not a leftover"
    finally:
        live_rep.kill()
        live_rep.remove()


def _timed_read(cgroup_path: Path, data: Path, blocks: int) -> float:
    """Seconds a direct-IO reader of `blocks` 4k blocks of data takes, put into the cgroup before it reads."""
    reader = subprocess.Popen(["sh", "-c", 'read go; exec dd if="$0" of=/dev/null iflag=direct bs=4k count="$1"',
                               str(data), str(blocks)], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    cgroup.move(reader.pid, cgroup_path)
    started = time.monotonic()
    reader.communicate(b"go\n", timeout=60)
    assert reader.returncode == 0
    return time.monotonic() - started


def test_an_io_limit_holds_a_server_to_its_rate_on_its_device_until_lifted(tmp_path):
    spec = {"type": "ext4", "size": "64M", "mkfs_options": [], "mount_options": []}
    active = tmp_path / "active"
    active.mkdir()
    with storage.filesystem(spec, tmp_path / "fs", active) as fs:
        data = fs.path / "data"
        subprocess.run(["dd", "if=/dev/urandom", f"of={data}", "bs=1M", "count=4", "conv=fsync"], check=True,
                       capture_output=True)
        dev = blkio.device(data)
        rdev = os.stat(f"/dev/{fs.devices[0]}").st_rdev
        assert dev == f"{os.major(rdev)}:{os.minor(rdev)}"
        throttles = blkio.Throttles()
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            assert throttles.limit("node1", [sleeper.pid], dev, {"read_iops": 40}) == 1
            group = throttles.owner.path / "node1"
            assert (group / "blkio.throttle.read_iops_device").read_text().split() == [dev, "40"]
            slow = _timed_read(group, data, 80)  # 80 IOs at 40 per second
            throttles.lift("node1")
            fast = _timed_read(group, data, 80)
            assert slow > 1.2 and fast < slow / 3, (slow, fast)
            throttles.close()  # every process back home, the cgroups gone
            assert cgroup.own_cgroups(sleeper.pid)["blkio"] == cgroup.own_cgroups()["blkio"]
            assert not group.exists() and throttles.owner is None
        finally:
            throttles.close()
            sleeper.kill()
            sleeper.wait()
    with pytest.raises(RuntimeError, match="tmpfs.*not a block device"):
        blkio.device(Path("/dev/shm"))


def test_measuring_lock_waits_and_names_its_holder(tmp_path):
    path = tmp_path / "measure.lock"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import io, sys, time
        sys.path.insert(0, {str(ROOT / 'workflow')!r})
        from pathlib import Path
        from dbsweep.runtime import lock
        with lock.measuring("run results/runs/cell~a/rep~1", io.StringIO(), Path({str(path)!r})):
            print("held", flush=True)
            time.sleep(2)
        """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    assert f"pid {holder.pid}" in lock.holder(path) and "cell~a/rep~1" in lock.holder(path)
    log = io.StringIO()
    started = time.monotonic()
    with lock.measuring("second", log, path):
        waited = time.monotonic() - started
        assert "second" in lock.holder(path)
    holder.wait()
    assert waited > 1
    first = log.getvalue().splitlines()[0]
    assert first.startswith(f"dbsweep: waiting for the host's measuring lock {path}, held by pid {holder.pid}")
    assert "cell~a/rep~1" in first
    assert lock.holder(path) is None


JOB = """
import sys, subprocess, time
sys.path.insert(0, {workflow!r})
from pathlib import Path
from dbsweep import storage
from dbsweep.runtime import owned
active, scratch = Path({active!r}), Path({scratch!r})
spec = {{"type": "ext4", "size": "64M", "mkfs_options": [], "mount_options": []}}
with open({log!r}, "w") as log, owned("test job", active, log) as rep, storage.scratch_files(scratch, active), \\
        storage.filesystem(spec, scratch, active) as fs:
    (scratch / "secret").write_text("password")
    subprocess.Popen({fio!r} + [f"--filename={{fs.path}}/f"], stdout=subprocess.DEVNULL, start_new_session=True)
    subprocess.Popen(["vmstat", "1"], stdout=subprocess.DEVNULL)
    print(rep.path, flush=True)
    time.sleep(300)
"""


@pytest.mark.workflow
def test_sigkill_of_the_job_its_guardian_kills_unmounts_detaches_and_removes_then_lets_go_of_the_lock(tmp_path):
    active, scratch, log = tmp_path / "active", tmp_path / "scratch", tmp_path / "job.log"
    job = subprocess.Popen([sys.executable, "-c", JOB.format(workflow=str(ROOT / "workflow"), active=str(active),
                                                             scratch=str(scratch), log=str(log), fio=FIO)],
                           stdout=subprocess.PIPE, text=True)
    path = Path(job.stdout.readline().strip())
    rep = cgroup.Cgroup(cgroup.hierarchy(), path)
    wait_for(lambda: len(rep.pids()) >= 5, what="fio's jobs and vmstat")
    inside = rep.pids()
    assert leftovers(tmp_path), "mounted and attached"
    job.send_signal(signal.SIGKILL)
    job.wait()
    wait_for(lambda: lock.holder() is None or f"pid {job.pid} " not in lock.holder(), what="the lock's release")
    assert [pid for pid in inside if alive(pid)] == []
    assert not path.exists()
    assert leftovers(tmp_path) == [] and not scratch.exists()
    assert list(active.iterdir()) == []
    assert "guardian: job pid" in log.read_text()


@contextmanager
def resource(name, events, fail=False):
    events.append(f"enter {name}")
    try:
        yield name
    finally:
        events.append(f"leave {name}")
        if fail:
            raise RuntimeError(f"{name} would not stop")


def test_stack_leaves_in_reverse_keeps_releasing_after_a_failure_and_refuses_a_wrong_order():
    events = []
    with pytest.raises(KeyError) as raised, Stack() as stack:
        stack.enter("filesystem", "ext4", resource("fs", events))
        stack.enter("server", "a", resource("a", events, fail=True))
        stack.enter("server", "b", resource("b", events))
        stack.enter("monitor", "vmstat", resource("vmstat", events))
        assert stack.of("server") == ["a", "b"]
        with pytest.raises(RuntimeError, match="cannot be entered after monitor"):
            stack.enter("filesystem", "late", resource("late", events))
        raise KeyError("body")
    assert events == ["enter fs", "enter a", "enter b", "enter vmstat",
                      "leave vmstat", "leave b", "leave a", "leave fs"]
    assert "a would not stop" in " ".join(raised.value.__notes__)


def test_a_tool_error_is_a_refusal_only_while_its_server_still_runs(tmp_path):
    (tmp_path / "error.log").write_text("[Note] ready\n[ERROR] mysqld got signal 9\n")
    server = subprocess.Popen(["sleep", "300"])
    db = SimpleNamespace(handle=SimpleNamespace(pid=server.pid, rundir=tmp_path))
    with pytest.raises(measure.Rejected):
        measure.refused("sysbench exited with 1: FATAL: connection lost", db)
    server.kill()
    server.wait()
    with pytest.raises(RuntimeError, match=r"died while serving; its last words: .*got signal 9") as failed:
        measure.refused("sysbench exited with 1: FATAL: connection lost", db)
    assert not isinstance(failed.value, measure.Rejected)


def test_the_cause_of_a_failure_is_its_error_lines_not_a_help_text():
    help_text = "\n".join(f"  --option-{i}   what it does" for i in range(40))
    error = RuntimeError(f"mariadb-install-db failed (exit 1):\n[ERROR] InnoDB: Error number 28 means "
                         f"'No space left on device'\n{help_text}")
    assert stops.cause(error) == ("mariadb-install-db failed (exit 1): | [ERROR] InnoDB: Error number 28 means "
                                "'No space left on device'")
    assert stops.cause(RuntimeError("short")) == "short"


def test_a_failed_job_says_why_in_its_log_and_on_stderr(tmp_path):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'workflow')!r})
        from dbsweep.stops import one_line
        with open({str(tmp_path / 'rule.log')!r}, "w") as log, one_line("run c~1/rep~1", log):
            raise RuntimeError("sysbench exited with 1: FATAL: error 1040: Too many connections")
        """)], capture_output=True, text=True)
    line = "dbsweep: run c~1/rep~1: sysbench exited with 1: FATAL: error 1040: Too many connections"
    assert done.returncode == 1 and done.stderr.strip() == line and "Traceback" not in done.stderr
    assert (tmp_path / "rule.log").read_text().strip().splitlines()[-1] == line


def test_workers_of_a_killed_tool_parent_die_with_it_not_at_the_end_of_their_runtime(tmp_path):
    """fio's workers call setsid(): once fio itself is SIGKILLed, neither its session nor its parentage
    finds them; the tool's own sub-cgroup does."""
    result = {}
    with owned("test", tmp_path / "active", io.StringIO()):
        import threading

        def tool():
            result["status"] = measure.run_tool(FIO + [f"--filename={tmp_path}/f"], tmp_path, tmp_path / "out",
                                            tmp_path / "err")
        thread = threading.Thread(target=tool)
        thread.start()
        fio = wait_for(lambda: next((p for p in psutil.Process().children() if p.name() == "fio"
                                     and len(p.children()) >= 2), None), what="fio and its jobs")
        workers = [p.pid for p in fio.children()]
        started = time.monotonic()
        fio.kill()
        thread.join(30)
        assert result["status"] == -signal.SIGKILL and time.monotonic() - started < 10
        assert [pid for pid in workers if alive(pid)] == []


def test_a_monitor_that_died_mid_window_fails_the_window(tmp_path):
    from dbsweep.monitors import Monitors
    with pytest.raises(RuntimeError, match=r"monitor died during the measured window: vmstat \(exit -9\)"):
        with Monitors(tmp_path, []) as mon:
            mon._procs[0].kill()
            mon._procs[0].wait()
