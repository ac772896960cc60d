"""The server's own CPU and IO from the kernel's accounting of its process tree, read at two moments: real
processes doing real work between the readings."""
import subprocess
import sys
import textwrap

import pytest

from dbsweep import accounting
from dbsweep.collect import server_per_txn

# A stand-in for a server: waits for a line on stdin, then does what it is told, and answers "done".
# "spin": ~0.3 s of CPU in itself; "child": the same in a child it waits for (reaped, as PostgreSQL's
# postmaster reaps an ended backend); "write": 8 MiB written and fsynced to a file, then its pages
# dropped; "read": that file read back (from the device, not the page cache).
SERVER = textwrap.dedent("""
    import os, sys, time
    path = sys.argv[1]
    def spin(seconds=0.3):
        t = time.process_time()
        while time.process_time() - t < seconds:
            pass
    for line in sys.stdin:
        what = line.strip()
        if what == "spin":
            spin()
        elif what == "child":
            pid = os.fork()
            if pid == 0:
                spin()
                os._exit(0)
            os.waitpid(pid, 0)
        elif what == "write":
            with open(path, "wb") as f:
                f.write(os.urandom(8 << 20))
                f.flush()
                os.fsync(f.fileno())
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        elif what == "read":
            with open(path, "rb") as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                while f.read(1 << 20):
                    pass
        print("done", flush=True)
""")


@pytest.fixture
def server(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(tmp_path / "data")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)

    def do(what: str) -> None:
        proc.stdin.write(what + "\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"

    proc.do = do
    yield proc
    proc.stdin.close()
    proc.wait(timeout=10)


def used(proc, what: str) -> dict:
    start = accounting.reading([proc.pid])
    proc.do(what)
    return accounting.delta(start, accounting.reading([proc.pid]))


def test_cpu_between_two_readings_is_the_work_done_between_them(server):
    idle = used(server, "nothing")
    assert idle["cpu_s"] < 0.05
    busy = used(server, "spin")
    assert 0.25 <= busy["cpu_s"] < 0.6
    assert busy["seconds"] >= 0.25


def test_a_reaped_child_still_counts(server):
    """A backend that ended between the readings: its CPU is its parent's cutime + cstime now."""
    got = used(server, "child")
    assert 0.25 <= got["cpu_s"] < 0.6


def test_bytes_written_and_read_from_the_device(server, tmp_path):
    if subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True, text=True).stdout.strip() \
            == "tmpfs":
        pytest.skip("tmpfs: no block-layer IO to count")
    written = used(server, "write")
    assert written["write_bytes"] >= 8 << 20
    read = used(server, "read")
    assert read["read_bytes"] >= 4 << 20  # dropped pages come back from the device
    assert read["write_bytes"] < 1 << 20


def test_no_delta_across_a_restart(server, tmp_path):
    """Another server between the readings (its totals start from zero): no delta rather than a wrong one."""
    start = accounting.reading([server.pid])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert accounting.delta(start, accounting.reading([other.pid])) is None
    finally:
        other.kill()
        other.wait()
    assert accounting.delta(None, start) is None
    assert accounting.delta(accounting.reading([]), accounting.reading([])) is None  # no server at all


def test_per_op_from_a_delta():
    used = {"cpu_s": 2.0, "read_bytes": 1024 * 300, "write_bytes": 1024 * 600, "seconds": 1.5}
    assert accounting.per_op(used, 1000, "op") == {
        "server_cpu_us_per_op": pytest.approx(2000.0), "server_kb_read_per_op": pytest.approx(0.3),
        "server_kb_written_per_op": pytest.approx(0.6)}
    assert set(accounting.per_op(None, 1000, "op").values()) == {None}
    assert set(accounting.per_op(used, 0, "op").values()) == {None}


def test_cpu_and_kb_per_transaction_from_the_window_readings(server):
    """collect: run.json's server_accounting (window start and end) over the transactions of the samples; the
    sampler's per-second CPU only where there is no pair of readings."""
    start = accounting.reading([server.pid])
    server.do("write")
    server.do("spin")
    readings = {"start": start, "end": accounting.reading([server.pid])}
    samples = [{"second": s, "tps": 100} for s in (1, 2, 3, 4)]
    sampled = [{"second": s, "name": "server_cpu_s", "value": 0.5} for s in (1, 2, 3, 4)]
    got = server_per_txn(readings, sampled, samples)
    written = readings["end"]["write_bytes"] - start["write_bytes"]
    assert got["server_kb_written_per_txn"] == pytest.approx(written / 1024 / 400)
    assert got["server_kb_written_per_txn"] >= 8 * 1024 / 400
    cpu = readings["end"]["cpu_s"] - start["cpu_s"]
    assert got["server_cpu_us_per_txn"] == pytest.approx(cpu * 1e6 / 400), "the edges' CPU, not the sampler's"
    # no pair of readings (a run from before them, a server restarted in the window): the sampler's CPU
    assert server_per_txn(None, sampled, samples) == {
        "server_cpu_us_per_txn": pytest.approx(2.0 * 1e6 / 400), "server_kb_read_per_txn": None,
        "server_kb_written_per_txn": None}


# A stand-in for PostgreSQL's postmaster: for a few seconds, one backend after another, each spinning a
# few ms, ending and reaped at once.
CHURN = textwrap.dedent("""
    import os, time
    end = time.time() + float(os.environ["SECONDS_"])
    while time.time() < end:
        pid = os.fork()
        if pid == 0:
            t = time.process_time()
            while time.process_time() - t < 0.02:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
""")


def test_a_reading_never_loses_a_child_reaped_while_it_reads():
    """Backends ending at a phase's end are reaped while the reading runs: each one is counted either as
    itself or in its parent's totals, never in neither (a phase of PostgreSQL's index builds read 0 CPU)."""
    proc = subprocess.Popen([sys.executable, "-c", CHURN], env={"SECONDS_": "3"})
    try:
        last, drops = accounting.reading([proc.pid]), []
        while proc.poll() is None:
            now = accounting.reading([proc.pid])
            if now["roots"] == last["roots"] and now["cpu_s"] < last["cpu_s"] - 1e-9:
                drops.append((last["cpu_s"], now["cpu_s"]))
            last = now
    finally:
        proc.kill()
        proc.wait()
    assert drops == []
