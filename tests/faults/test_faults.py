"""The fault suite: kill a process of a running study at a chosen point, then check that nothing of
the repetition outlived it and that a rerun measures exactly what is missing.

Kill points: SIGINT, SIGTERM, SIGKILL of snakemake; SIGKILL of the job process (during the measured
window and during prepare), of the server, of the tool's parent (fio, whose workers run in sessions of
their own), of a monitor. Afterwards, for the repetition that was measuring:
- 0 processes in its cgroup (found through the job's /proc/PID/cgroup: other processes run here too),
- 0 mounts and 0 loop devices of the run,
- no copy of the benchmark password outside the prepared image (scratch copies removed),
- no partial repetition taken as complete (no run.json unless its job measured to the end),
- a rerun plans only the missing repetitions and completes them.
Each trial's figures go to $DBSWEEP_FAULTS_LOG (JSON lines) when set; RELIABILITY.md has the command.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from conftest import Study, leftovers
from dbsweep.runtime import cgroup, lock

pytestmark = pytest.mark.workflow

WINDOW_S = 4


def db_config(window: int = WINDOW_S, threads=(1,)) -> dict:
    return {
        "study": "faults",
        "axes": {"engine": ["innodb"], "memory": ["32M"], "filesystem": ["ext4"], "threads": list(threads),
                 "workload": ["oltp"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "300M"}},
        "workloads": {"oltp": {"tool": "sysbench", "options": {"script": "oltp_read_only", "tables": 1,
                                                                "table_size": 500, "time": window}}},
    }


def fio_config() -> dict:
    return {
        "study": "faults-fio",
        "axes": {"filesystem": ["ext4"], "threads": [1, 2], "workload": ["fio-rr"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "128M"}},
        "workloads": {"fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "4k", "size": "8M",
                                                            "ioengine": "psync", "runtime": WINDOW_S}}},
    }


def new_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="dbsweep-faults-", dir="/var/tmp"))
    root.chmod(0o755)  # servers run as mysql
    return root


@pytest.fixture(scope="module")
def prepared():
    """Each study's resources/ prepared once, hard-linked into every trial (a run only reads its image)."""
    made = {}

    def get(name: str, config: dict) -> Path:
        if name not in made:
            root = new_root()
            study = Study(root, config)
            study.run("--until", "prepare")
            made[name] = root
        return made[name] / "resources"

    yield get
    for root in made.values():
        shutil.rmtree(root, ignore_errors=True)


def holder_in(root: Path) -> dict | None:
    """The measuring lock's holder when it is a job of the study at root: {pid, what}."""
    text = lock.holder() or ""
    if f" in {root}: " not in text:
        return None
    return {"pid": int(text.split()[1]), "what": text.split(f" in {root}: ", 1)[1].rsplit(" since ", 1)[0]}


def wait_for(predicate, timeout=120.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def measuring_window(root: Path, tool: str):
    """(job pid, cell folder) once the job holding the lock runs its measured tool: with the monitors
    running, since the job also runs the tool before its window (`sysbench --version`, for run.json)."""
    held = holder_in(root)
    if not held or not held["what"].startswith("run "):
        return None
    running = _descendants(held["pid"])
    if tool not in running or "vmstat" not in running:
        return None
    return held["pid"], root / held["what"].removeprefix("run ")


def _descendants(pid: int) -> list[str]:
    try:
        return [p.name() for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def job_cgroup(pid: int) -> Path:
    h = cgroup.hierarchy()
    return h.home(pid)


def server_pid(job: int) -> int:
    return next(p.pid for p in psutil.Process(job).children(recursive=True) if p.name() == "mariadbd")


def child_named(job: int, name: str) -> int:
    return next(p.pid for p in psutil.Process(job).children() if p.name() == name)


def password(root: Path) -> bytes:
    """The generated password, read from inside the prepared image (mounted read-only for a moment)."""
    image = next(root.glob("resources/images/**/*.img"))
    mnt = Path(tempfile.mkdtemp(prefix="peek-", dir=root))
    subprocess.run(["mount", "-o", "ro,loop,noload", str(image), str(mnt)], check=True)
    try:
        return json.loads((mnt / "credentials.json").read_text())["password"].encode()
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
        mnt.rmdir()


def secrets_outside(root: Path, secret: bytes) -> list[str]:
    """Files below root, other than the prepared images, that hold the secret; and any scratch image."""
    found = []
    for path in root.rglob("*"):
        if (path.is_file() and "resources/images" not in path.as_posix()
                and (path.suffix == ".img" or secret in path.read_bytes())):
            found.append(str(path))
    return found


def _rundirs_holding(secret: bytes) -> list[str]:
    """Server run folders (under /tmp: a socket path is short) still holding the secret."""
    found = []
    for folder in Path(tempfile.gettempdir()).glob("dbsweep-*"):
        try:  # other sessions' folders come and go meanwhile
            for path in folder.iterdir():
                if path.is_file() and secret in path.read_bytes():
                    found.append(str(path))
        except OSError:
            pass
    return found


def completed(root: Path) -> dict[str, str]:
    """rep folder -> the attempt its run.json names.

    os.walk, not glob: a repetition removes its scratch folder while this walks the tree, and
    glob's scandir of a vanished folder raises where os.walk skips it."""
    found = {}
    for folder, dirs, files in os.walk(root / "results" / "runs"):
        here = Path(folder)
        if here.name.startswith("rep~") and "run.json" in files:
            dirs.clear()
            found[str(here.relative_to(root))] = json.loads((here / "run.json").read_text())["attempt"]
    return found


def trial(prepared, name: str, config: dict, tool: str, kill, during: str = "window") -> dict:
    """One kill trial; returns its figures."""
    root = new_root()
    study = Study(root, config)
    if during == "window":
        shutil.copytree(prepared(name, config), root / "resources", copy_function=os.link)
    with open(root / "snakemake.out", "w") as out:
        snakemake = subprocess.Popen(study.argv(), cwd=root, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
    figures = {"trial": f"{kill.__name__} during {during}", "study": name}
    try:
        if during == "window":
            if len(_cells(study)) > 1:  # the second repetition's window: one is complete, not to measure again
                wait_for(lambda: completed(root), what="a first complete repetition")
            job, rep = wait_for(lambda: measuring_window(root, tool), what="the measured window")
            time.sleep(1)
        else:
            held = wait_for(lambda: (h := holder_in(root)) and h["what"].startswith("prepare")
                            and "mariadbd" in _descendants(h["pid"]) and h, what="prepare's server")
            job, rep = held["pid"], None
        where = job_cgroup(job)
        before = completed(root)
        inside = cgroup.Cgroup(cgroup.hierarchy(), where).pids()
        rerun = kill(snakemake=snakemake, job=job, study=study)
        if rerun is None:
            snakemake.wait(timeout=180)
        else:
            said, _ = rerun.communicate(timeout=300)
            logs = "".join(p.read_text(errors="replace") for p in root.glob("results/logs/run/**/*.log"))
            figures["second run waited"] = "waiting for the host's measuring lock" in said + logs
            snakemake.wait(timeout=60)
        # a killed job's guardian releases what it left (cgroup, mounts, scratch) and only then the lock;
        # snakemake may have exited before it is through
        wait_for(lambda: not ((h := holder_in(root)) and h["pid"] == job), timeout=60,
                 what="the killed job's measuring lock released")
        time.sleep(0.5)
        figures["orphans"] = sorted(pid for pid in inside if psutil.pid_exists(pid)
                                    and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
        figures["cgroup left"] = where.exists() and cgroup.Cgroup(cgroup.hierarchy(), where).pids()
        figures["leftovers"] = leftovers(root)
        secret = password(root) if name == "db" and during == "window" else None
        figures["secrets"] = (secrets_outside(root, secret) + _rundirs_holding(secret) if secret else []) + \
            [str(p) for p in root.glob("results/runs/**/scratch")] + \
            [str(p) for p in root.glob("resources/images/**/.*")]
        after = completed(root)
        figures["taken as complete"] = sorted(set(after) - set(before) - {str(rep.relative_to(root)) if rep else ""})
        figures["killed repetition completed anyway"] = rep is not None and str(rep.relative_to(root)) in after
        if figures["killed repetition completed anyway"]:  # its job measured to the end: check that it did
            record = json.loads((rep / "run.json").read_text())
            assert record["status"] == "ok" and record["measure_end"] - record["measure_start"] >= WINDOW_S - 0.5
        assert not figures["orphans"] and not figures["cgroup left"] and not figures["leftovers"], figures
        assert not figures["secrets"] and not figures["taken as complete"], figures
        # The rerun measures exactly what is missing, and completes. (A repetition whose job completed
        # while its snakemake was being stopped is one Snakemake marks incomplete: it may run again.)
        targets = [f"results/runs/{cell}/rep~1/run.json" for cell in _cells(study)]
        done = study.run(*targets, check=False)
        if done.returncode != 0 and "LockException" in done.stdout + done.stderr:
            study.run("--unlock")
            done = study.run(*targets, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        ran = _runs_in(done.stdout + done.stderr)
        missing = {cell for cell in _cells(study) if f"results/runs/{cell}/rep~1" not in after}
        figures["rerun measured"] = sorted(ran)
        victim = {str(rep.relative_to(root / "results/runs")).removesuffix("/rep~1")} if rep else set()
        assert missing <= ran <= missing | victim, figures
        again = completed(root)
        assert all(again[k] == v for k, v in after.items() if k not in {f"results/runs/{c}/rep~1" for c in ran}), \
            "a complete repetition was measured again"
        assert len(again) == len(_cells(study)), again
        assert leftovers(root) == []
        return figures
    finally:
        if snakemake.poll() is None:
            snakemake.kill()
        _record(figures)
        if not leftovers(root):
            shutil.rmtree(root, ignore_errors=True)


def _cells(study: Study) -> list[str]:
    threads = study.config["axes"]["threads"]
    base = "engine~innodb/memory~32M/filesystem~ext4" if "engine" in study.config["axes"] else "filesystem~ext4"
    work = study.config["axes"]["workload"][0]
    return [f"{base}/threads~{t}/workload~{work}" for t in threads]


def _runs_in(output: str) -> set[str]:
    """Cells of the run jobs a snakemake output shows."""
    cells, rule = set(), None
    for line in output.splitlines():
        s = line.strip()
        if s.startswith(("rule ", "localrule ")):
            rule = s.split()[1].rstrip(":")
        elif rule == "run" and s.startswith("wildcards: cell="):
            cells.add(s.split("=", 1)[1].split(", rep=")[0])
    return cells


def _record(figures: dict) -> None:
    out = os.environ.get("DBSWEEP_FAULTS_LOG")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(figures, default=str) + "\n")


# --- kill points: each returns a second snakemake started meanwhile, or None -------------------

def snakemake_sigint(snakemake, **_):
    snakemake.send_signal(signal.SIGINT)


def snakemake_sigterm(snakemake, **_):
    snakemake.send_signal(signal.SIGTERM)


def snakemake_sigkill(snakemake, job, study, **_):
    """Its job goes on alone; a second run right after must wait for it, not measure beside it."""
    snakemake.send_signal(signal.SIGKILL)
    snakemake.wait()
    targets = [f"results/runs/{cell}/rep~1/run.json" for cell in _cells(study)]
    second = subprocess.Popen(study.argv(*targets, "--nolock"), cwd=study.root, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)  # its snakemake lock stays after SIGKILL
    servers = wait_for(lambda: _servers(study.root) if second.poll() is not None or _waiting(study.root, job) else None,
                       timeout=120, what="the second run's job waiting for the lock")
    assert len(servers) <= 1, "two servers of the study at once"
    return second


def _waiting(root: Path, orphan: int) -> bool:
    logs = [p for p in root.glob("results/logs/run/**/*.log")]
    return any("waiting for the host's measuring lock" in p.read_text(errors="replace") and f"pid {orphan} " in
               p.read_text(errors="replace") for p in logs)


def _servers(root: Path) -> list[int] | None:
    found = [p.pid for p in psutil.process_iter(["name", "cwd"])
             if p.info["name"] == "mariadbd" and (p.info["cwd"] or "").startswith(str(root))]
    return found or [0]


def job_sigkill(job, **_):
    os.kill(job, signal.SIGKILL)


def server_sigkill(job, **_):
    os.kill(server_pid(job), signal.SIGKILL)


def tool_parent_sigkill(job, **_):
    os.kill(child_named(job, "fio"), signal.SIGKILL)


def monitor_sigkill(job, **_):
    os.kill(child_named(job, "vmstat"), signal.SIGKILL)


@pytest.mark.parametrize("kill", [snakemake_sigint, snakemake_sigterm, monitor_sigkill])
def test_kill_during_the_measured_window_of_a_database_cell(prepared, kill):
    trial(prepared, "db", db_config(), "sysbench", kill)


@pytest.mark.parametrize("kill", [job_sigkill, server_sigkill])
def test_kill_during_the_second_cells_window_reruns_only_that_cell(prepared, kill):
    trial(prepared, "db", db_config(threads=(1, 2)), "sysbench", kill)


def test_after_sigkill_of_snakemake_its_orphaned_job_keeps_the_lock_and_a_new_run_waits(prepared):
    figures = trial(prepared, "db", db_config(window=20), "sysbench", snakemake_sigkill)
    assert figures["second run waited"]


@pytest.mark.parametrize("kill", [tool_parent_sigkill, job_sigkill])
def test_kill_during_the_measured_window_of_fio(prepared, kill):
    trial(prepared, "fio", fio_config(), "fio", kill)


def test_job_sigkill_during_prepare(prepared):
    trial(prepared, "db", db_config(), "sysbench", job_sigkill, during="prepare")


def test_a_full_disk_during_prepare_says_why_on_stderr_in_the_log_and_on_the_summary_page():
    """48 MB cannot hold InnoDB's 96 MB redo log: mariadb-install-db fails with error 28 (ENOSPC) and
    then prints its help text; the line shown is the error, not the help."""
    root = new_root()
    config = db_config()
    config["filesystems"]["ext4"]["size"] = "48M"
    study = Study(root, config)
    done = study.run(check=False)
    assert done.returncode != 0
    (line,) = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("dbsweep: prepare ")]
    assert "mariadb-install-db failed" in line and "error 28" in line
    (log,) = root.glob("results/logs/prepare/**/*.log")
    assert log.read_text().strip().splitlines()[-1] == line
    page = (root / "results/index.html").read_text()
    assert "<td>failed</td><td>prepare resources/images/" in page and ": mariadb-install-db failed" in page
    assert f'href="{log.relative_to(root / "results")}"' in page
    assert leftovers(root) == []
    shutil.rmtree(root, ignore_errors=True)


def topology_config() -> dict:
    config = db_config(window=8)
    config["study"] = "faults-topology"
    config["axes"]["topology"] = ["semisync"]
    config["topologies"] = {"semisync": {"replicas": 1, "replication": "semisync"}}
    config["network"] = {"node_latency_ms": 1}
    config["filesystems"]["ext4"]["size"] = "400M"
    return config


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def net_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def test_sigkill_of_a_topology_job_leaves_no_node_namespace_or_link(prepared):
    """The job of a primary, a replica and their client, each in a namespace of its own joined by links
    with a user-space delay, is SIGKILLed in its window: its guardian kills both servers, the client and
    the delayers, and deletes the namespaces (and with them the veths and rules); the rerun completes."""
    root = new_root()
    study = Study(root, topology_config())
    shutil.copytree(prepared("topology", topology_config()), root / "resources", copy_function=os.link)
    before = _netns()
    with open(root / "snakemake.out", "w") as out:
        snakemake = subprocess.Popen(study.argv(), cwd=root, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
    try:
        job, rep = wait_for(lambda: measuring_window(root, "sysbench"), what="the measured window")
        time.sleep(1)
        ours = {ns for ns in _netns() - before if re.match(rf"dbs{job}[0-9a-f]{{4}}-", ns)}
        assert len(ours) == 3, ours  # client, primary, replica1
        spaces = {f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]" for ns in ours}  # to know its delayers once deleted
        # Both servers under the job; seen once with only one of them a second into the window, under the
        # full suite's load (cause not found), so they get a few seconds of the 8 s window to show.
        servers = wait_for(lambda: (pids if len(pids := [p.pid for p in psutil.Process(job).children(recursive=True)
                                                          if p.name() == "mariadbd"]) == 2 else None),
                           timeout=4, what="both servers under the job")
        os.kill(job, signal.SIGKILL)
        snakemake.wait(timeout=180)
        wait_for(lambda: not (_netns() & ours), timeout=30, what="the namespaces deleted")
        assert not [pid for pid in servers if psutil.pid_exists(pid)
                    and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        assert not [p for p in psutil.process_iter(["cmdline"])
                    if "dbsweep.topology.delayer" in " ".join(p.info["cmdline"] or []) and net_of(p.pid) in spaces]
        assert leftovers(root) == [] and not (rep / "run.json").exists()
        done = study.run("--until", "collect", check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        rerun = json.loads((rep / "run.json").read_text())["topology"]["network"]["namespaces"].values()
        assert not set(rerun) & _netns()  # the rerun's own deleted too (other runs on this host may hold theirs)
    finally:
        if snakemake.poll() is None:
            snakemake.kill()
        if not leftovers(root):
            shutil.rmtree(root, ignore_errors=True)
