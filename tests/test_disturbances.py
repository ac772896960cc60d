"""What may disturb a measurement (dbsweep/disturbances.py): the host looked at before a window, its steal
over the window, and the summary page's count of the repetitions measured with each warning."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from dbsweep import disturbances, summary

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def virtio_tree(root: Path, listing: str) -> Path:
    """A sysfs virtio devices folder from a captured listing: `<device> <id> <features>` per line."""
    for line in listing.splitlines():
        name, kind, features = line.split()
        (root / name).mkdir(parents=True)
        (root / name / "device").write_text(kind + "\n")
        (root / name / "features").write_text(features + "\n")
    return root


def test_free_page_reporting_is_the_balloons_feature_bit_5(tmp_path):
    # captured on this project's VM (Firecracker): a balloon (0x0005) with bits 1, 2 and 5 set
    captured = (FIXTURES / "virtio" / "firecracker-balloon.txt").read_text()
    assert disturbances.free_page_reporting(virtio_tree(tmp_path / "on", captured))
    no_reporting = captured.replace("0x0005 011001", "0x0005 011000")  # stats and deflate-on-OOM only
    assert not disturbances.free_page_reporting(virtio_tree(tmp_path / "off", no_reporting))
    no_balloon = "\n".join(line for line in captured.splitlines() if " 0x0005 " not in line)
    assert not disturbances.free_page_reporting(virtio_tree(tmp_path / "none", no_balloon))
    assert not disturbances.free_page_reporting(tmp_path / "no such folder")  # not a virtio guest


def test_the_reporting_order_is_the_kernels_setting_as_it_is_now(tmp_path):
    order = tmp_path / "page_reporting_order"
    order.write_text("9\n")  # what this VM's start-up writes, whatever its command line says (11)
    assert disturbances.reporting_order(order) == 9
    assert disturbances.reporting_order(tmp_path / "none") is None  # a kernel without free page reporting
    real = disturbances.REPORTING_ORDER
    assert disturbances.reporting_order() == (int(real.read_text()) if real.exists() else None)


def test_virtual_machine_is_the_cpus_hypervisor_flag(tmp_path):
    real = Path("/proc/cpuinfo").read_text()
    flagged = tmp_path / "vm"
    flagged.write_text(real if " hypervisor" in real else real.replace("flags\t\t:", "flags\t\t: hypervisor"))
    bare = tmp_path / "bare"
    bare.write_text(real.replace(" hypervisor", ""))
    assert disturbances.virtual_machine(flagged) and not disturbances.virtual_machine(bare)
    assert disturbances.virtual_machine() == (" hypervisor" in real)


def reading(ticks: list[int], procs: dict | None = None, at: float = 1_000.0) -> dict:
    return {"time": at, "ticks": ticks, "procs": procs or {}}


def test_steal_over_a_window_is_recorded_and_warned_above_one_percent():
    start = disturbances.cpu_ticks()
    assert len(start) == 8 and all(t >= 0 for t in start)
    later = disturbances.cpu_ticks()
    assert all(b >= a for a, b in zip(start, later, strict=True))
    # user nice system idle iowait irq softirq steal: 200 ticks in the window, 3 of them stolen
    end = [a + d for a, d in zip(start, [120, 0, 40, 30, 5, 0, 2, 3], strict=True)]
    found = {"settings": {}, "warnings": {}}
    (warning,) = disturbances.after_window(found, reading(start), reading(end))
    assert found["settings"]["steal_pct"] == 1.5 and found["warnings"] == {"steal": warning}
    assert warning.startswith("the hypervisor took 1.5% of the CPUs' time in the window (steal)")
    calm = {"settings": {}, "warnings": {}}
    quiet = [a + d for a, d in zip(start, [120, 0, 40, 38, 0, 0, 1, 1], strict=True)]
    assert disturbances.after_window(calm, reading(start), reading(quiet)) == []
    assert calm == {"settings": {"steal_pct": 0.5, "foreign_cpu_pct": 0.0, "foreign_cpu_s": {}}, "warnings": {}}


def busy(name: str, spin_s: float = 3) -> subprocess.Popen:
    """A process named `name` (its comm, as /proc and ps show it) that spins for spin_s, then sleeps (long
    enough to spin through a test's window on a loaded host, whose reading of every process is slow)."""
    code = ("import ctypes, time\n"
            f"ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"  # PR_SET_NAME
            f"end = time.time() + {spin_s}\n"
            "while time.time() < end: pass\n"
            "time.sleep(60)")
    return subprocess.Popen([sys.executable, "-c", code])


def spun(*procs: subprocess.Popen, name: str | None = None, cpu_s: float = 0.3, timeout: float = 30) -> None:
    """Wait until each process has used cpu_s of CPU (and, with name, is named so): a loaded host (a
    load of 12 on these 2 CPUs, beside other test sessions) gives a spinning process a small share."""
    deadline = time.monotonic() + timeout
    for proc in procs:
        p = psutil.Process(proc.pid)
        while sum(p.cpu_times()[:2]) < cpu_s or (name and p.name() != name):
            assert time.monotonic() < deadline, f"pid {proc.pid} did not spin"
            time.sleep(0.05)


def test_the_cpu_other_processes_use_in_a_window_is_measured_per_name_and_warned_above_five_percent():
    mine, theirs = busy("busy-mine", spin_s=60), busy("busy-theirs", spin_s=60)
    try:
        start = disturbances.cpu_use(own=lambda: {os.getpid(), mine.pid})
        late = busy("busy-late", spin_s=60)  # started inside the window: all it used counts
        spun(late, name="busy-late")
        end = disturbances.cpu_use(own=lambda: {os.getpid(), mine.pid})
    finally:
        for proc in (mine, theirs, late):
            proc.kill()
            proc.wait()
    names = {name for _, name, _ in end["procs"].values()}
    assert 2 not in end["procs"] and not {n for n in names if n.startswith(("kworker/", "ksoftirqd/"))}, names
    found = {"settings": {}, "warnings": {}}
    said = disturbances.after_window(found, start, end)
    used = found["settings"]["foreign_cpu_s"]  # the five that used most: on a shared host, maybe not these
    every = disturbances.foreign_cpu(start, end)
    # three spinning processes on the host's CPUs: each got a share of a CPU (less beside other load)
    assert every["busy-theirs"] > 0.1 and every["busy-late"] > 0.1 and "busy-mine" not in every, every
    assert found["settings"]["foreign_cpu_pct"] > 5 and found["warnings"]["cpu"] in said
    assert found["warnings"]["cpu"].startswith(f"other processes used {found['settings']['foreign_cpu_pct']:.1f}% "
                                               "of the CPUs' time in the window (")
    # it names the three that used most (here, or another test's processes on a shared host), most first
    top = list(used.items())[:3]
    assert [seconds for _, seconds in top] == sorted(used.values(), reverse=True)[:3]
    named = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in top)
    assert found["warnings"]["cpu"].endswith(f"({named}): something else runs")


def test_look_names_a_benchmark_tool_this_repetition_did_not_start(tmp_path):
    # --thread: fio's job is a thread of the one process this test kills and reaps. A forked job process
    # outlived the SIGKILL of its parent, orphaned (still there 48 minutes later, past its runtime).
    fio = subprocess.Popen(["fio", "--thread", "--name=beside", "--ioengine=null", "--rw=read", "--size=1M",
                            "--rate_iops=1", "--time_based", "--runtime=30"], cwd=tmp_path, stdout=subprocess.DEVNULL)
    try:
        found = disturbances.look(own=set)
        for _ in range(50):  # until fio is past its exec
            if "fio" in found["settings"]["foreign_processes"]:
                break
            found = disturbances.look(own=set)
        # the same fio as the repetition's own (own() read after the scan: a server's backend forked
        # meanwhile is the repetition's, not a stranger)
        mine = disturbances.look(own=lambda: {fio.pid})
        # another session's fio on this shared host is foreign too: then only ours can be left out
        others = [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "fio" and p.pid != fio.pid]
        job_started = time.monotonic() + 30
        while psutil.Process(fio.pid).num_threads() == 1 and time.monotonic() < job_started:
            time.sleep(0.05)
        children = psutil.Process(fio.pid).children(recursive=True)
    finally:
        fio.kill()
        fio.wait()
    assert not children, "fio's job runs in a process of its own, which the kill above leaves behind"
    assert "fio" in found["settings"]["foreign_processes"] and "fio" in found["warnings"]["servers"]
    # (the other pytest worker's servers may be running: only fio is this test's)
    if not others:
        assert "fio" not in mine["settings"]["foreign_processes"] and "fio" not in mine["warnings"].get("servers", "")
    assert set(found["settings"]) >= {"thp", "governor", "load_1m", "swap_used_mb", "virtual_machine",
                                      "free_page_reporting", "page_reporting_order"}
    assert json.loads(json.dumps(found)) == found  # as run.json keeps it


def test_a_snakemake_jobs_python_is_named_after_its_script(tmp_path):
    """Snakemake runs a rule's script as `python3 .snakemake/scripts/tmp<random>.<script>.py`: beside a
    window, that is the study's own job (another repetition's collect), and the warning says so."""
    script = tmp_path / ".snakemake" / "scripts" / "tmpq1w2e3r4.collect.py"
    script.parent.mkdir(parents=True)
    script.write_text("import time\nend = time.time() + 60\nwhile time.time() < end: pass\n")
    start = disturbances.cpu_use(own=lambda: {os.getpid()})
    job = subprocess.Popen([sys.executable, str(script)])
    plain = busy("busy-plain", spin_s=60)
    try:
        spun(job)
        spun(plain, name="busy-plain")
        end = disturbances.cpu_use(own=lambda: {os.getpid()})
    finally:
        for proc in (job, plain):
            proc.kill()
            proc.wait()
    assert end["procs"][job.pid][1] == "snakemake job collect.py" and end["procs"][plain.pid][1] == "busy-plain"
    assert disturbances.foreign_cpu(start, end)["snakemake job collect.py"] > 0.1


def rep(results: Path, cell: str, warnings, **settings) -> Path:
    rep_dir = results / "runs" / cell / "rep~1"
    rep_dir.mkdir(parents=True)
    if warnings is not None:
        (rep_dir / "run.json").write_text(json.dumps({"disturbances": {"settings": settings, "warnings": warnings}}))
    return rep_dir


def test_the_summary_page_counts_the_repetitions_measured_with_each_warning(tmp_path):
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    reps = [rep(results, "threads~1", {"cpu": "other processes used 12.0%", "steal": "the hypervisor took 4%"},
                foreign_cpu_pct=12.04, steal_pct=4.0),
            rep(results, "threads~2", {}, foreign_cpu_pct=0.5, steal_pct=0.1),
            rep(results, "threads~4", {"cpu": "other processes used 6.1%"}, foreign_cpu_pct=6.1, steal_pct=0.2),
            rep(results, "threads~8", ["load average 9 on 2 CPUs: something else runs"]),  # an older run.json
            rep(results, "threads~16", None)]  # not run: not counted
    line = ("Host warnings: 3 of 4 repetition(s) measured with one or more (other processes using the CPUs: 2; "
            "other: 1; hypervisor steal above 1%: 1).")
    assert disturbances.line(reps).startswith(line)
    study = summary.Study("s", "", {"threads": ["1", "2", "4", "8", "16"]}, 5, 1, reps)
    written = summary.write(study, results, [], complete=True)
    assert line in written["html"].read_text() and summary.md_escape(line) in written["md"].read_text()
    most = (" In any one window, other processes used at most 12.0% of the CPUs' time, the hypervisor at most 4.0% "
            "(steal).")
    assert disturbances.line(reps).endswith(most) and summary.md_escape(most) in written["md"].read_text()
    calm = disturbances.line(reps[1:2])
    assert calm.startswith("Host warnings: none in 1 repetition(s)") and calm.endswith("at most 0.5% of the CPUs' "
                                                                                      "time, the hypervisor at most "
                                                                                      "0.1% (steal).")
    assert disturbances.line(reps[3:4]).endswith("(disturbances).")  # an older run.json: no figures to give
    # vCPUs that halt at once when idle: said, as a fact of the host, not counted as a warning
    halting = [rep(results, "threads~32", {}, foreign_cpu_pct=0.4, steal_pct=0.1, halt_poll_ns=0),
               rep(results, "threads~64", {}, foreign_cpu_pct=0.3, steal_pct=0.0, halt_poll_ns=200000)]
    said = disturbances.line(halting)
    assert said.startswith("Host warnings: none in 2 repetition(s)")
    assert said.endswith(" 1 of 2 ran on idle vCPUs that halt at once (the haltpoll driver's guest_halt_poll_ns 0): "
                         "each wake-up goes through the hypervisor, which a single client pays on every round trip "
                         "(noise_control.halt_poll_ns sets it).")
    assert "halt" not in disturbances.line(halting[1:])
    assert disturbances.line(reps[4:]) == ""


# Oracles of the other processes' CPU share: a share of the host's capacity, CPU seconds / (window x CPUs).
WINDOW_TICKS = round(15 / disturbances.TICK_S)  # one CPU's ticks in a 15 s window


def window(busy_share: float, cpus: int = 2) -> tuple[list[int], list[int]]:
    """/proc/stat's cpu line at a 15 s window's edges on a host of `cpus` CPUs busy busy_share of the time."""
    total = WINDOW_TICKS * cpus
    used = round(total * busy_share)
    return [0] * 8, [used, 0, 0, total - used, 0, 0, 0, 0]


def test_cpu_summed_over_several_cpus_is_a_share_of_the_host_s_capacity():
    start_ticks, end_ticks = window(0.9)
    procs_start = {10: (500.0, "stress-ng-cpu", 100.0), 11: (500.0, "stress-ng-cpu", 50.0), 12: (400.0, "make", 3.0)}
    procs_end = {10: (500.0, "stress-ng-cpu", 110.0), 11: (500.0, "stress-ng-cpu", 60.0), 12: (400.0, "make", 9.0)}
    found = {"settings": {}, "warnings": {}}
    disturbances.after_window(found, reading(start_ticks, procs_start), reading(end_ticks, procs_end, at=1_015.0))
    # 10 + 10 + 6 = 26 CPU seconds of 2 CPUs x 15 s = 30: 86.7%, and stress-ng's 20 s named first
    assert found["settings"]["foreign_cpu_pct"] == 86.67
    assert found["settings"]["foreign_cpu_s"] == {"stress-ng-cpu": 20.0, "make": 6.0}
    assert found["warnings"]["cpu"].startswith("other processes used 86.7% of the CPUs' time in the window "
                                               "(stress-ng-cpu 20.0 s, make 6.0 s)")


def test_counts_larger_than_the_window_never_make_a_share_above_the_host_s_busy_time():
    start_ticks, end_ticks = window(0.5)
    found = {"settings": {}, "warnings": {}}
    disturbances.after_window(found, reading(start_ticks, {1: (1.0, "process_api", 0.0)}),
                              reading(end_ticks, {1: (1.0, "process_api", 62.7)}, at=1_015.0))
    assert found["settings"]["foreign_cpu_pct"] == 50.0  # the host was busy half its time: no more


def test_a_process_that_starts_in_the_window_counts_all_it_used_and_one_that_ends_nothing():
    start_ticks, end_ticks = window(0.5)
    start = reading(start_ticks, {20: (900.0, "ended", 40.0)})
    end = reading(end_ticks, {21: (1_005.0, "started", 4.0), 22: (100.0, "pid-not-seen-at-start", 70.0)},
                  at=1_015.0)
    assert disturbances.foreign_cpu(start, end) == {"started": 4.0}


def test_the_repetition_s_own_process_that_dies_in_the_window_is_never_foreign():
    """The server killed in the window: a zombie at the end, which its cgroup no longer lists; started
    within a second of the window's start (create_time is to the clock tick), so it looks new."""
    start_ticks, end_ticks = window(0.5)
    start = reading(start_ticks) | {"own": {30: 999.5}}
    end = reading(end_ticks, {30: (999.5, "postgres", 386.0)}, at=1_015.0)  # old code: all 386 s, foreign
    assert disturbances.foreign_cpu(start, end) == {}
    reused = reading(end_ticks, {30: (1_010.0, "fio", 2.0)}, at=1_015.0)  # its pid, taken by a newcomer
    assert disturbances.foreign_cpu(start, reused) == {"fio": 2.0}


def test_a_real_server_killed_in_the_window_and_a_reaped_child_add_nothing(tmp_path):
    """Real processes: the repetition's own process SIGKILLed and left a zombie, and a foreign parent that
    reaps, inside the window, a child that spun before it: neither's CPU is the window's."""
    own = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    reaper = subprocess.Popen([sys.executable, "-c", "import ctypes, subprocess, sys, time\n"
                               "ctypes.CDLL(None).prctl(15, b'reaper-test', 0, 0, 0)\n"  # its own name
                               "child = subprocess.Popen([sys.executable, '-c', 'import time\\n"
                               "end = time.time() + 1.5\\nwhile time.time() < end: pass'])\n"
                               "child.wait(); time.sleep(60)"])
    try:
        time.sleep(1.0)  # both have spun a while before the window
        start = disturbances.cpu_use(own=lambda: {os.getpid(), own.pid})
        own.kill()  # a zombie until waited for: no cgroup lists it
        time.sleep(1.5)  # the child ends and is reaped in the window
        end = disturbances.cpu_use(own=lambda: {os.getpid()})
        assert psutil.Process(own.pid).status() == psutil.STATUS_ZOMBIE
    finally:
        for proc in (own, reaper):
            proc.kill()
            proc.wait()
    used = disturbances.foreign_cpu(start, end)
    assert own.pid not in end["procs"] and own.pid not in end["own"]
    assert end["procs"][reaper.pid][1] == "reaper-test"
    assert used.get("reaper-test", 0) < 0.3, used  # old code: the child's ~1.5 s


def test_a_real_stress_ng_is_named_by_its_command():
    start = disturbances.cpu_use(own=lambda: {os.getpid()})
    stress = subprocess.Popen(["stress-ng", "--cpu", "1", "--timeout", "2", "--quiet"])
    try:
        time.sleep(1.5)
        end = disturbances.cpu_use(own=lambda: {os.getpid()})
    finally:
        stress.wait(10)
    found = {"settings": {}, "warnings": {}}
    disturbances.after_window(found, start, end)
    assert 0 < found["settings"]["foreign_cpu_pct"] <= 100
    assert any(name.startswith("stress-ng") for name in found["settings"]["foreign_cpu_s"]), found


def test_the_summary_line_leaves_out_an_impossible_share_recorded_by_an_older_run(tmp_path):
    reps = [rep(tmp_path, "threads~1", {"cpu": "other processes used 357.9%"}, foreign_cpu_pct=357.9, steal_pct=0.2),
            rep(tmp_path, "threads~2", {}, foreign_cpu_pct=3.2, steal_pct=0.1)]
    said = disturbances.line(reps)
    assert "357.9" not in said and "at most 3.2% of the CPUs' time" in said
    assert said.endswith("1 repetition(s) recorded other processes' CPU above 100% of the host's, which cannot be "
                         "(a run.json of before 2026-11-28 counted reaped children's CPU): left out.")


def test_a_process_started_after_a_reading_is_new_on_the_readings_clock():
    """foreign_cpu counts all the CPU of a process created after the start reading; psutil's create_time
    counts from the kernel's boot time, which on this VM ran 1.0 s behind time.time() (a reading on
    time.time() took such a process for one that was there before, and its CPU went uncounted)."""
    start = disturbances.cpu_use(own=lambda: {os.getpid()})
    late = busy("busy-new", spin_s=60)
    try:
        spun(late, name="busy-new")
        created = psutil.Process(late.pid).create_time()
        end = disturbances.cpu_use(own=lambda: {os.getpid()})
    finally:
        late.kill()
        late.wait()
    assert start["time"] - 2 * disturbances.TICK_S <= created <= end["time"] + disturbances.TICK_S
    assert disturbances.foreign_cpu(start, end)["busy-new"] >= 0.3
