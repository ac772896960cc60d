"""The live progress line: each tool's per-second output read as it is written (real captured output)."""
import io
import os
import logging
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from dbsweep import study_progress
from dbsweep.runtime import lock
from dbsweep.progress import Follow
from dbsweep.workloads import fio, sysbench_fileio, sysbench_oltp

FIXTURES = Path(__file__).parent / "fixtures"


def readings(module, name):
    state = {}
    lines = re.split(r"[\r\n]", (FIXTURES / name / "stdout.txt").read_text())
    return [r for r in (module.live(line, state) for line in lines) if r is not None]


def test_each_tool_reads_its_own_per_second_lines():
    assert readings(sysbench_oltp, "oltp_read_write_overload") == [(1, 390.46, "tps"), (2, 510.37, "tps"),
                                                                    (3, 472.01, "tps")]
    # sysbench fileio prints MiB/s; the header's block size (16KiB) makes them IOPS
    assert readings(sysbench_fileio, "sysbench_rndrd") == [(1, 1101.21 * 64, "IOPS"), (2, 1097.12 * 64, "IOPS")]
    # fio's status line ends in \r and gives no elapsed second; 67.9k is 67,900
    assert readings(fio, "fio_status_randrw") == [(None, 67900.0, "IOPS"), (None, 63200.0, "IOPS")]
    assert fio.live("Jobs: 1 (f=1): [m(1)][50.0%][r=38.5MiB/s,w=16.4MiB/s][r=9861,w=4212 IOPS][eta 00m:01s]",
                    {}) == (None, 14073.0, "IOPS")
    assert sysbench_oltp.live("SQL statistics:", {}) is None


def test_follow_writes_a_line_per_second_while_the_file_grows(tmp_path):
    """The fixture's stdout written out as sysbench wrote it, a line at a time, while Follow reads."""
    text = (FIXTURES / "oltp_read_write_overload" / "stdout.txt").read_text().splitlines(keepends=True)
    out = tmp_path / "stdout.txt"
    log = io.StringIO()

    def tool():  # the next second's line once Follow has shown this one (a busy host's late poll reads two)
        shown = 0
        with open(out, "w") as f:
            for line in text:
                f.write(line)
                f.flush()
                if sysbench_oltp.live(line, {}) is not None:  # a second's figures, not its queue line
                    shown += 1
                    deadline = time.monotonic() + 10
                    while follow.lines_written < shown and time.monotonic() < deadline:
                        time.sleep(0.01)

    writer = threading.Thread(target=tool)
    with Follow(out, sysbench_oltp.live, 3, log, every=0.1) as follow:
        writer.start()
        writer.join()
        time.sleep(0.3)
    lines = log.getvalue().splitlines()
    assert lines[-1] == "progress: run 3/3 s, 472 tps"
    assert "progress: run 1/3 s, 390 tps" in lines and follow.lines_written == len(lines) <= 3
    assert 0 < follow.cpu_s < 1  # the following thread's own CPU time, for bench/monitor_cost.py


def test_follow_without_output_writes_nothing(tmp_path):
    log = io.StringIO()
    with Follow(tmp_path / "never.txt", fio.live, None, log, every=0.05):
        time.sleep(0.2)
    assert log.getvalue() == ""


# --- the study's progress line (dbsweep/study_progress.py) -----------------------------------------

class Terminal(io.StringIO):
    def isatty(self):
        return True


def study_tree(tmp_path, reps=3):
    runs = [tmp_path / "results" / "runs" / "filesystem~xfs" / "threads~4" / f"rep~{n}" for n in range(1, reps + 1)]
    for rep_dir in runs:
        rep_dir.mkdir(parents=True)
    return runs


def finish(rep_dir):
    (rep_dir / "run.json").write_text("{}")


def start_log(rep_dir, text):
    log = study_progress.run_log(rep_dir)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(text)


def test_study_progress_in_a_log_is_a_plain_line_when_a_repetition_starts_or_ends(tmp_path):
    runs = study_tree(tmp_path)
    finish(runs[0])  # done by an earlier run
    out = io.StringIO()
    progress = study_progress.StudyProgress(runs, {runs[1]: 10.0, runs[2]: 10.0}, out)
    progress.tick()
    start_log(runs[1], "restoring\nprogress: run 3/8 s, 4,512 IOPS\n")
    progress.tick()
    progress.tick()  # nothing changed: no line
    finish(runs[1])
    progress.tick()
    progress.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in out.getvalue()
    assert re.fullmatch(r"dbsweep: 1/3 repetitions done, \d+ s elapsed, about 20 s left", lines[0])
    assert lines[1].endswith("about 20 s left; running filesystem~xfs/threads~4 rep~2: run 3/8 s, 4,512 IOPS")
    assert lines[2].startswith("dbsweep: 2/3 repetitions done") and "running" not in lines[2]
    assert lines[3].startswith("dbsweep: 2/3 repetitions done") and "about" in lines[3]


def test_a_repetition_measured_again_is_not_done_until_its_new_run_json(tmp_path):
    """A changed recipe reruns a cell whose run.json is there from before: the line must not count it
    done (it did: 17/20 done one second into a rerun of all 20)."""
    runs = study_tree(tmp_path)
    for run in runs:
        finish(run)
        os.utime(run / "run.json", (time.time() - 600,) * 2)  # an earlier run's
    progress = study_progress.StudyProgress(runs, dict.fromkeys(runs[1:], 10.0), io.StringIO(), again=set(runs[1:]))
    assert progress.status().done == 1
    finish(runs[1])  # this run writes it anew
    assert progress.status().done == 2


def test_time_left_follows_the_pace_of_this_run(tmp_path):
    runs = study_tree(tmp_path)
    progress = study_progress.StudyProgress(runs, dict.fromkeys(runs, 10.0), io.StringIO())
    assert progress.left(0) == 30 and progress.left(12) == 18, "counts down"
    assert progress.left(45) == 0
    finish(runs[0])
    progress.start = time.time() - 20  # seen done 20 s into the run
    progress.status()
    assert round(progress.left(20.0)) == 40  # the first took 20 s against 10 estimated: twice as long
    assert round(progress.left(25.0)) == 35
    assert study_progress.line(study_progress.Status(1, 3, 20, 40, None, None)) == \
        "dbsweep: 1/3 repetitions done, 20 s elapsed, about 40 s left"


def test_study_progress_on_a_terminal_redraws_in_place_and_gives_way_to_snakemake(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # wider than the line: a line wider than the terminal is cut
    runs = study_tree(tmp_path, reps=2)
    term = Terminal()
    handler = logging.StreamHandler(term)
    logger = logging.getLogger(study_progress.SNAKEMAKE_LOGGER)
    logger.addHandler(handler)
    try:
        with study_progress.StudyProgress(runs, dict.fromkeys(runs, 5.0), term, every=0.05):
            time.sleep(0.2)
            start_log(runs[0], "progress: run 1/5 s, 100 tps\n")
            time.sleep(0.2)
            logger.warning("localrule collect:")
            time.sleep(0.2)
            finish(runs[0])
            time.sleep(0.2)
    finally:
        logger.removeHandler(handler)
    text = term.getvalue()
    assert "\r\x1b[Kdbsweep: 0/2 repetitions done" in text
    assert re.search(r"\r\x1b\[Kdbsweep: 0/2 repetitions done, \d s elapsed, about 10 s left; running "
                     r"filesystem~xfs/threads~4 rep~1: run 1/5 s, 100 tps", text)
    # Snakemake's message starts on a cleared line, and the progress line comes back after it
    before, after = text.split("localrule collect:\n")
    assert before.endswith("\r\x1b[K") and "\r\x1b[Kdbsweep: 1/2 repetitions done" in after
    assert re.search(r"\r\x1b\[Kdbsweep: 1/2 repetitions done, \d s elapsed, about \d s left\n$", text)
    assert text.count("\n") == 2, "only Snakemake's line and the last line end in a newline"


def test_a_repetition_waiting_for_the_measuring_lock_is_said_to_wait_and_for_whom(tmp_path):
    """A real holder of the host's measuring lock (another process, runtime/lock.py) and a job waiting for
    it, writing its run log as the run job does: the line says it waits, and for whom, not "running"."""
    runs = study_tree(tmp_path, reps=2)
    lock_path = tmp_path / "measure.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
         "from dbsweep.runtime.lock import measuring\n"
         "with measuring('run other/rep~1', sys.stdout, Path(sys.argv[1])):\n    print('held', flush=True)\n"
         "    time.sleep(60)\n", str(lock_path)],
        stdout=subprocess.PIPE, text=True,
        env=os.environ | {"PYTHONPATH": str(Path(study_progress.__file__).parents[1])})
    assert holder.stdout.readline() == "held\n"
    start_log(runs[0], "restoring\n")
    taken, release = threading.Event(), threading.Event()

    def job():
        with open(study_progress.run_log(runs[0]), "a") as log, lock.measuring("run", log, lock_path):
            log.write("progress: run 1/5 s, 100 tps\n")
            log.flush()
            taken.set()
            release.wait(30)

    waiter = threading.Thread(target=job)
    waiter.start()
    try:
        progress = study_progress.StudyProgress(runs, dict.fromkeys(runs, 5.0), io.StringIO())
        deadline = time.monotonic() + 10
        while progress.status().waiting is None:
            assert time.monotonic() < deadline, study_progress.run_log(runs[0]).read_text()
            time.sleep(0.05)
        text = study_progress.line(progress.status())
        assert re.search(rf"; filesystem~xfs/threads~4 rep~1 waiting for the host's measuring lock \(held by pid "
                         rf"{holder.pid} on \S+ in \S+: run other/rep~1 since [^)]+\)$", text), text
        assert "running" not in text
        holder.kill()
        holder.wait()
        assert taken.wait(10)
        text = study_progress.line(progress.status())
        assert text.endswith("; running filesystem~xfs/threads~4 rep~1: run 1/5 s, 100 tps"), text
    finally:
        release.set()
        waiter.join()
        if holder.poll() is None:
            holder.kill()
            holder.wait()
