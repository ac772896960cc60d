"""Workload adapters against output captured from fio 3.33 and sysbench 1.0.20.

The fixtures under tests/fixtures/ are real runs (see capture.py there); the
expected numbers below are copied from those files as the tools wrote them.
"""
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dbsweep.errors import ConfigError
from dbsweep.workloads import fio
from dbsweep.workloads import sysbench_fileio as sb

FIXTURES = Path(__file__).parent / "fixtures"
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
needs_sysbench = pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench not installed")


def start(name):
    return float((FIXTURES / name / "start.txt").read_text())


def digests():
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in FIXTURES.rglob("*") if p.is_file()}


# --- fio: config ---------------------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("numjobs", 4), ("filename", "/dev/sda"), ("directory", "/tmp"), ("output-format", "terse"),
    ("output_format", "terse"), ("write_lat_log", "x"), ("log_avg_msec", 500), ("group_reporting", True),
    ("name", "job"), ("log_unix_epoch", 0),
])
def test_fio_check_refuses_keys_the_pipeline_sets(key, value):
    with pytest.raises(ConfigError) as err:
        fio.check({"size": "1G", key: value}, "workloads.rr.options")
    message = str(err.value)
    assert message.startswith(f"workloads.rr.options.{key}: {value!r}")
    assert "\n" not in message


def test_fio_check_requires_size():
    with pytest.raises(ConfigError, match=r"^workloads\.rr\.options\.size: missing"):
        fio.check({"rw": "randread"}, "workloads.rr.options")


def test_fio_check_refuses_empty_and_list_values():
    with pytest.raises(ConfigError, match=r"options\.time_based: None"):
        fio.check({"size": "1G", "time_based": None}, "workloads.rr.options")
    with pytest.raises(ConfigError, match=r"options\.bs: \['4k', '8k'\]"):
        fio.check({"size": "1G", "bs": ["4k", "8k"]}, "workloads.rr.options")


def test_fio_check_accepts_ordinary_options():
    fio.check({"size": "1G", "rw": "randread", "bs": "{bs}", "direct": True, "runtime": 30}, "w")


# The hostile-input audit's fio cases (/work/hostile/cases): a name holding `=` became `--filename=/dev/vda:=` on
# fio's command line (fio then opened the root disk); options that run a command or read and write a path of
# their own; a prefix of a refused name, which fio takes for the whole name.
@pytest.mark.parametrize("name, value, why", [
    ("exec_prerun", "touch /work/hostile/PWNED", "runs a command"),
    ("exec_postrun", "touch /work/hostile/PWNED", "runs a command"),
    ("trigger-file", "/tmp/go", "runs a command"),
    ("write_iolog", "/work/hostile/outside.iolog", "names a path outside the cell's folders"),
    ("read_iolog", "/work/hostile/replay.iolog", "names a path outside the cell's folders"),
    ("write_hist_log", "/tmp/hist", "names a path outside the cell's folders"),
    ("directory", "/work/hostile/outside", "names a path outside the cell's folders"),
    ("opendir", "/", "names a path outside the cell's folders"),
    ("filename_format", "/tmp/$jobname", "names a path outside the cell's folders"),
    ("filename", "/dev/vda", "is set by dbsweep"),
    ("cgroup", "../../escape", "moves fio out of the run's cgroup"),
    ("ioscheduler", "none", "changes the I/O scheduler of the host's device"),
    ("server", "0.0.0.0", "runs fio elsewhere"),
    ("ioengine", "exec", "runs a program or loads a library"),
    ("ioengine", "external:/tmp/evil.so", "runs a program or loads a library"),
    ("ioengine", "/tmp/evil.so", "runs a program or loads a library"),
    ("ioengine", "libc.so.6", "runs a program or loads a library"),
    ("mem", "mmap:/tmp/outside", "names a path outside the cell's folders"),
])
def test_fio_check_refuses_options_that_run_or_write_elsewhere(name, value, why):
    with pytest.raises(ConfigError) as err:
        fio.check({"size": "64M", "rw": "randread", name: value}, "workloads.w.options")
    assert str(err.value) == f"workloads.w.options.{name}: {value!r} {why}; remove it"


@pytest.mark.parametrize("name", ["filename=/dev/vda:", "directory=/work/hostile/outside", "runtime=5 --filename",
                                  "bs\n", "rw randread", "--size", "size'", "", 3])
def test_fio_check_refuses_names_that_are_not_option_names(name):
    with pytest.raises(ConfigError) as err:
        fio.check({"size": "64M", name: "x"}, "workloads.w.options")
    assert str(err.value) == (f"workloads.w.options: {name!r} (set to 'x') is not an option name of fio "
                              "(a letter, then letters, digits, _ and -)")


@needs_fio
@pytest.mark.parametrize("name", ["exec_pre", "write_iol", "opend", "serv", "filename_f"])
def test_fio_check_refuses_a_prefix_fio_would_take_for_a_whole_name(name, tmp_path):
    """fio's getopt_long_only takes `--exec_pre=CMD` for --exec_prerun (fio --parse-only accepts it); `--serv=x`
    is its --server, which even under --parse-only runs the job, so fio is not asked about that one here."""
    assert name == "serv" or _fio_parses(f"--{name}=x", tmp_path)
    with pytest.raises(ConfigError) as err:
        fio.check({"size": "64M", name: "x"}, "workloads.w.options")
    assert str(err.value).startswith(f"workloads.w.options.{name}: 'x' is not the whole name of a fio job option")


def _fio_parses(arg: str, folder: Path) -> bool:
    done = subprocess.run(["fio", "--parse-only", "--name=check", "--filename=fio.data", "--size=1M", arg],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=folder)
    return done.returncode == 0 and "unrecognized" not in done.stderr and "ambiguous" not in done.stderr


@needs_fio
def test_fio_check_takes_aliases_and_the_engines_own_options():
    fio.check({"size": "64M", "readwrite": "randread", "blocksize": "4k", "timeout": 5, "ioengine": "libaio",
               "userspace_reap": 1, "hugepage-size": "2M", "direct": 1}, "w")
    fio.check({"size": "64M", "rw": "randread", "ioengine": "io_uring", "fixedbufs": 1}, "w")
    with pytest.raises(ConfigError, match=r"^w\.fixedbufs: 1 is not the whole name of a fio job option"):
        fio.check({"size": "64M", "rw": "randread", "ioengine": "libaio", "fixedbufs": 1}, "w")


def test_fio_a_cell_checks_the_values_its_axes_give():
    options = {"size": "64M", "ioengine": "{engine}"}
    fio.check(options, "workloads.w.options")  # the axis's values are the cells'
    fio.check_cell(options | {"ioengine": "libaio"}, "workloads.w.options")
    with pytest.raises(ConfigError, match=r"^workloads\.w\.options\.ioengine: 'exec' runs a program"):
        fio.check_cell(options | {"ioengine": "exec"}, "workloads.w.options")


def test_fio_dataset_is_the_size_only():
    a = fio.dataset({"size": "1G", "rw": "randread", "bs": "4k"})
    b = fio.dataset({"size": "1G", "rw": "write", "direct": True})
    assert a == b == {"size": "1G"}
    assert fio.dataset({"size": "2G"}) != a


def test_fio_command():
    argv = fio.command({"rw": "randread", "size": "64M", "runtime": 3, "direct": True, "end_fsync": False},
                       4, Path("/r/raw"))
    assert argv[0] == "fio"
    for arg in ["--filename=fio.data", "--numjobs=4", "--group_reporting", "--output-format=json",
                "--output=/r/raw/fio.json", "--write_bw_log=/r/raw/fio", "--write_iops_log=/r/raw/fio",
                "--write_lat_log=/r/raw/fio", "--log_avg_msec=1000", "--log_unix_epoch=1", "--time_based=1"]:
        assert arg in argv
    # options pass through in order, YAML booleans as 1/0
    assert argv[-5:] == ["--rw=randread", "--size=64M", "--runtime=3", "--direct=1", "--end_fsync=0"]


def test_fio_command_time_based_only_with_runtime():
    assert not [a for a in fio.command({"size": "64M"}, 1, Path("/r")) if a.startswith("--time_based")]
    argv = fio.command({"size": "64M", "runtime": 3, "time_based": 0}, 1, Path("/r"))
    assert [a for a in argv if a.startswith("--time_based")] == ["--time_based=0"]


@needs_fio
def test_fio_prepare_writes_one_file_of_size(tmp_path):
    for argv in fio.prepare({"size": "1M", "rw": "randread"}):
        subprocess.run(argv, cwd=tmp_path, check=True, capture_output=True)
    assert [p.name for p in tmp_path.iterdir()] == ["fio.data"]
    assert (tmp_path / "fio.data").stat().st_size == 2**20


def test_fio_prepare_needs_only_the_dataset():
    options = {"size": "1G", "rw": "randread", "bs": "4k"}
    assert fio.prepare(fio.dataset(options)) == fio.prepare(options)


# --- fio: output ---------------------------------------------------------------

def test_fio_samples_randread_two_jobs():
    rows = fio.samples(FIXTURES / "fio_randread", start("fio_randread"))
    # job 1 logged 3 windows, job 2 only 2: second 3 would be short of job 2 and is dropped
    assert [r["second"] for r in rows] == [1, 2]
    assert set(rows[0]) == {"time", "second", "iops", "mibs", "lat_ms", "lat_pct_ms"}
    assert rows[0]["time"] == pytest.approx(1795313116.269)
    assert rows[1]["time"] == pytest.approx(1795313117.269)
    assert rows[0]["iops"] == 12856 + 18866
    assert rows[1]["iops"] == 13905 + 26084
    assert rows[0]["mibs"] == pytest.approx((205696 + 301856) / 1024)
    # lat log rows (ns) weighted by each job's iops
    assert rows[0]["lat_ms"] == pytest.approx((76012 * 12856 + 51802 * 18866) / (12856 + 18866) / 1e6)
    assert rows[1]["lat_ms"] == pytest.approx((70988 * 13905 + 37827 * 26084) / (13905 + 26084) / 1e6)
    assert all(r["lat_pct_ms"] is None for r in rows)


def test_fio_samples_sum_reads_and_writes():
    rows = fio.samples(FIXTURES / "fio_randrw", start("fio_randrw"))
    assert len(rows) == 3  # this time fio kept the last window of both jobs
    assert rows[0]["iops"] == 7710 + 7757 + 8814 + 8941
    assert rows[0]["mibs"] == pytest.approx((30841 + 31028 + 35256 + 35764) / 1024)
    # job 2's lat rows are stamped 1 ms before its iops rows
    lat = (62288 * 7710 + 64086 * 7757 + 57627 * 8814 + 51235 * 8941) / rows[0]["iops"] / 1e6
    assert rows[0]["lat_ms"] == pytest.approx(lat)
    # in second 3 job 1's lat rows are stamped 1 ms after its iops rows
    lat = (56670 * 8189 + 64880 * 8067 + 57853 * 8522 + 58235 * 8448) / (8189 + 8067 + 8522 + 8448) / 1e6
    assert rows[2]["lat_ms"] == pytest.approx(lat)


def test_fio_samples_stalled_seconds_are_zero_and_late_lat_rows_find_their_second():
    rows = fio.samples(FIXTURES / "fio_stall", start("fio_stall"))
    assert rows[0]["time"] == pytest.approx(1795313099.385)
    assert [r["iops"] for r in rows] == [400, 0, 400, 0, 400]
    assert [r["mibs"] for r in rows] == [1600 / 1024, 0, 1600 / 1024, 0, 1600 / 1024]
    # the lat rows of second 1 were written at the next I/O, 1 s after the window
    assert rows[0]["lat_ms"] == pytest.approx((57212 + 15806) / 2 / 1e6)
    assert rows[2]["lat_ms"] == pytest.approx((25516 + 26555) / 2 / 1e6)
    assert rows[4]["lat_ms"] == pytest.approx((24658 + 25118) / 2 / 1e6)
    assert rows[1]["lat_ms"] is None and rows[3]["lat_ms"] is None


def test_fio_samples_refuse_logs_from_before_the_start():
    with pytest.raises(ValueError, match="before the run start"):
        fio.samples(FIXTURES / "fio_randread", start("fio_randread") + 10)


def test_fio_samples_refuse_rows_off_the_grid(tmp_path):
    shutil.copytree(FIXTURES / "fio_randread", tmp_path / "raw")
    log = tmp_path / "raw" / "fio_iops.2.log"
    log.write_text(log.read_text().replace("1795313117274,", "1795313116774,"))
    with pytest.raises(ValueError, match="off the 1 s grid"):
        fio.samples(tmp_path / "raw", start("fio_randread"))


def test_fio_summary_randread():
    s = fio.summary(FIXTURES / "fio_randread")
    assert s == {
        "iops": 34121.58561, "read_iops": 34121.58561, "write_iops": 0.0,
        "mibs": pytest.approx(559048058 / 2**20), "fsyncs": None,
        "lat_mean_ms": pytest.approx(0.057467334873), "lat_p95_ms": pytest.approx(0.103936),
        "lat_p99_ms": pytest.approx(0.197632), "lat_max_ms": pytest.approx(22.884873),
    }


def test_fio_percentiles_are_the_reports_clat_percentiles():
    pct = fio.percentiles(FIXTURES / "fio_randread")
    report = json.loads((FIXTURES / "fio_randread" / "fio.json").read_text()[
        (FIXTURES / "fio_randread" / "fio.json").read_text().find("{"):])
    clat = report["jobs"][0]["mixed"]["clat_ns"]["percentile"]
    assert len(pct) == len(clat) and pct == sorted(pct)
    assert dict(pct)[95.0] == clat["95.000000"] / 1e6 == fio.summary(FIXTURES / "fio_randread")["lat_p95_ms"]
    assert pct[0][0] == 1.0 and pct[-1][0] == 99.99


def test_fio_summary_mixed_is_fios_own_combined_figure():
    s = fio.summary(FIXTURES / "fio_randrw")
    assert s["read_iops"] == 16083.972009 and s["write_iops"] == 16076.64112
    assert s["iops"] == 32160.613129
    assert s["mibs"] == pytest.approx(131729871 / 2**20)
    # fio's "mixed" mean is the I/O-weighted mean of its read and write means
    assert s["lat_mean_ms"] == pytest.approx((48268 * 60411.132883 + 48246 * 61357.252125) / 96514 / 1e6)
    assert s["lat_p95_ms"] == pytest.approx(0.097792)
    assert s["lat_max_ms"] == pytest.approx(32.461611)


def test_fio_terminated_run_is_an_error(tmp_path):
    raw = FIXTURES / "fio_terminated"
    # SIGTERM after 2.5 s of runtime=30: fio still writes a whole JSON report, after a note
    assert (raw / "fio.json").read_text().startswith("\nfio: terminating on signal 15\n{")
    with pytest.raises(ValueError, match="stopped by signal 15"):
        fio.summary(raw)
    # without the note, the short runtime gives it away
    text = (raw / "fio.json").read_text()
    (tmp_path / "fio.json").write_text(text[text.index("{"):])
    with pytest.raises(ValueError, match="ran 2207 ms of a time_based runtime of 30"):
        fio.summary(tmp_path)
    # the seconds it did log are real
    assert [r["iops"] for r in fio.samples(raw, start("fio_terminated"))] == [15138 + 13654, 16391 + 17795]


def test_fio_killed_run_is_an_error():
    raw = FIXTURES / "fio_killed"
    assert (raw / "fio.json").stat().st_size == 0  # fio opens it at start, writes it at the end
    with pytest.raises(ValueError, match="not a complete fio JSON report"):
        fio.summary(raw)
    with pytest.raises(ValueError, match="no rows"):
        fio.samples(raw, start("fio_killed"))


def test_fio_summary_missing_or_cut_json(tmp_path):
    with pytest.raises(ValueError, match="missing"):
        fio.summary(tmp_path)
    text = (FIXTURES / "fio_randread" / "fio.json").read_text()
    (tmp_path / "fio.json").write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match="not a complete"):
        fio.summary(tmp_path)


@needs_fio
def test_fio_version():
    assert fio.version().startswith("fio-3.")


# --- sysbench fileio: config ---------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("threads", 8), ("report-interval", 10), ("report_interval", 10), ("percentile", 99), ("verbosity", 0),
])
def test_sysbench_check_refuses_keys_the_pipeline_sets(key, value):
    with pytest.raises(ConfigError) as err:
        sb.check({"file-test-mode": "rndrd", key: value}, "workloads.sb.options")
    assert str(err.value).startswith(f"workloads.sb.options.{key}: {value!r}")


@pytest.mark.parametrize("key, value, why", [
    ("config-file", "/work/hostile/more-options.cfg", "reads options from a file no check sees"),
    ("config_file", "/tmp/x.cfg", "reads options from a file no check sees"),
    ("luajit-cmd", "v=/tmp/outside.txt", "runs a command"),
])
def test_sysbench_check_refuses_what_reads_or_runs_elsewhere(key, value, why):
    with pytest.raises(ConfigError) as err:
        sb.check({"file-test-mode": "rndrd", key: value}, "workloads.sb.options")
    assert str(err.value) == f"workloads.sb.options.{key}: {value!r} {why}; remove it"


def test_sysbench_check_requires_test_mode():
    with pytest.raises(ConfigError, match=r"^workloads\.sb\.options\.file-test-mode: missing"):
        sb.check({"file-num": 4}, "workloads.sb.options")
    sb.check({"file_test_mode": "rndrd"}, "w")  # sysbench takes underscores too


def test_sysbench_dataset_uses_sysbench_defaults():
    implicit = sb.dataset({"file-test-mode": "rndrd"})
    explicit = sb.dataset({"file-test-mode": "rndwr", "file-num": 128, "file-total-size": "2G",
                           "file-block-size": 4096, "file-extra-flags": "direct"})
    assert implicit == explicit == {"file-num": 128, "file-total-size": "2G"}
    assert sb.dataset({"file-test-mode": "rndrd", "file-num": 1}) != implicit


def test_sysbench_command():
    argv = sb.command({"file-test-mode": "rndrd", "file-fsync-all": True, "file-fsync-end": False, "time": 60},
                      4, Path("/r/raw"))
    assert argv == ["sysbench", "fileio", "--threads=4", "--report-interval=1", "--percentile=95",
                    "--file-test-mode=rndrd", "--file-fsync-all=on", "--file-fsync-end=off", "--time=60", "run"]


@needs_sysbench
def test_sysbench_prepare_writes_the_file_set(tmp_path):
    for argv in sb.prepare({"file-test-mode": "rndrd", "file-num": 2, "file-total-size": "2M"}):
        subprocess.run(argv, cwd=tmp_path, check=True, capture_output=True)
    files = sorted(tmp_path.iterdir())
    assert [p.name for p in files] == ["test_file.0", "test_file.1"]
    assert [p.stat().st_size for p in files] == [2**20, 2**20]


# --- sysbench fileio: output ---------------------------------------------------

def test_sysbench_samples_rndrd():
    t0 = start("sysbench_rndrd")
    rows = sb.samples(FIXTURES / "sysbench_rndrd", t0)
    # a 3 s run printed only [ 1s ] and [ 2s ]: sysbench's last interval line is not guaranteed
    assert [r["second"] for r in rows] == [1, 2]
    assert rows[0] == {"time": t0 + 1, "second": 1, "iops": pytest.approx(1101.21 * 2**20 / 16384),
                       "mibs": 1101.21, "lat_ms": None, "lat_pct_ms": 0.038, "lat_p99_ms": None}
    assert rows[1]["mibs"] == 1097.12 and rows[1]["lat_pct_ms"] == 0.037


def test_sysbench_samples_rndwr():
    t0 = start("sysbench_rndwr")
    rows = sb.samples(FIXTURES / "sysbench_rndwr", t0)
    assert [r["time"] for r in rows] == [t0 + 1, t0 + 2, t0 + 3]
    assert [r["mibs"] for r in rows] == [287.18, 306.44, 353.08]
    assert rows[2]["iops"] == pytest.approx(353.08 * 64)
    assert [r["lat_pct_ms"] for r in rows] == [0.063, 0.063, 0.043]


def test_sysbench_rndrw_4k_sums_reads_and_writes():
    t0 = start("sysbench_rndrw_4k")
    rows = sb.samples(FIXTURES / "sysbench_rndrw_4k", t0)
    # "[ 1s ] reads: 75.40 MiB/s writes: 50.27 MiB/s fsyncs: 320.71/s latency (ms,95%): 0.071", 4 KiB blocks
    assert rows[0]["mibs"] == pytest.approx(75.40 + 50.27)
    assert rows[0]["iops"] == pytest.approx((75.40 + 50.27) * 256)
    assert [r["lat_pct_ms"] for r in rows] == [0.071, 0.053, 0.053]
    s = sb.summary(FIXTURES / "sysbench_rndrw_4k")
    assert (s["read_iops"], s["write_iops"], s["fsyncs"]) == (20405.65, 13603.54, 340.75)
    assert s["iops"] == pytest.approx(20405.65 + 13603.54)
    assert s["mibs"] == pytest.approx(79.71 + 53.14)


def test_sysbench_summary_rndrd():
    assert sb.summary(FIXTURES / "sysbench_rndrd") == {
        "iops": 72236.84, "read_iops": 72236.84, "write_iops": 0.0, "mibs": 1128.70, "fsyncs": 0.0,
        "lat_mean_ms": 0.03, "lat_p95_ms": 0.04, "lat_p99_ms": None, "lat_max_ms": 6.35,
        "events": 216754, "time_s": 3.0002,
    }


def test_sysbench_summary_rndwr():
    s = sb.summary(FIXTURES / "sysbench_rndwr")
    assert (s["iops"], s["write_iops"], s["mibs"], s["fsyncs"]) == (20175.31, 20175.31, 315.24, 202.41)
    assert (s["lat_mean_ms"], s["lat_p95_ms"], s["lat_max_ms"]) == (0.10, 0.06, 10.22)


def test_sysbench_killed_run():
    raw = FIXTURES / "sysbench_killed"
    # the per-second lines up to the kill are real and parse ...
    assert [r["mibs"] for r in sb.samples(raw, start("sysbench_killed"))] == [332.00, 289.70]
    # ... but there is no final report to summarise
    with pytest.raises(ValueError, match="no final report"):
        sb.summary(raw)


def test_sysbench_summary_checks_the_block_size(tmp_path):
    text = (FIXTURES / "sysbench_rndrd" / "stdout.txt").read_text()
    (tmp_path / "stdout.txt").write_text(text.replace("Block size 16KiB", "Block size 4KiB"))
    with pytest.raises(ValueError, match="block size misread"):
        sb.summary(tmp_path)
    (tmp_path / "stdout.txt").write_text(text.replace("Block size 16KiB\n", ""))
    with pytest.raises(ValueError, match="no 'Block size' line"):
        sb.samples(tmp_path, 0.0)


@pytest.mark.parametrize("line, size", [
    # header lines sysbench 1.0.20 printed for --file-block-size=16384, 512, 4096, 1048576, 1536, 3000
    ("Block size 16KiB", 16384), ("Block size 512B", 512), ("Block size 4KiB", 4096),
    ("Block size 1MiB", 2**20), ("Block size 1.5KiB", 1536), ("Block size 2.9297KiB", 3000),
])
def test_sysbench_block_size(line, size):
    assert sb.block_size(f"x\n{line}\ny\n", Path("stdout.txt")) == size


def test_sysbench_block_size_refuses_inexact_values():
    with pytest.raises(ValueError, match="not an exact number of bytes"):
        sb.block_size("Block size 1.0005MiB\n", Path("stdout.txt"))


def test_sysbench_samples_idle_interval_has_no_latency(tmp_path):
    text = (FIXTURES / "sysbench_rndwr" / "stdout.txt").read_text()
    line = "[ 2s ] reads: 0.00 MiB/s writes: 306.44 MiB/s fsyncs: 196.05/s latency (ms,95%): 0.063"
    assert line in text
    idle = "[ 2s ] reads: 0.00 MiB/s writes: 0.00 MiB/s fsyncs: 0.00/s latency (ms,95%): 0.000"
    (tmp_path / "stdout.txt").write_text(text.replace(line, idle))
    rows = sb.samples(tmp_path, 0.0)
    assert rows[1]["iops"] == 0 and rows[1]["lat_pct_ms"] is None
    assert rows[0]["lat_pct_ms"] == 0.063


def test_sysbench_samples_refuse_other_lines_and_percentiles(tmp_path):
    text = (FIXTURES / "sysbench_rndwr" / "stdout.txt").read_text()
    (tmp_path / "stdout.txt").write_text(text.replace("(ms,95%)", "(ms,90%)"))
    with pytest.raises(ValueError, match="90th percentile"):
        sb.samples(tmp_path, 0.0)
    (tmp_path / "stdout.txt").write_text(text.replace("[ 3s ] reads:", "[ 3s ] reeds:"))
    with pytest.raises(ValueError, match="not a sysbench fileio interval line"):
        sb.samples(tmp_path, 0.0)


def test_sysbench_missing_stdout(tmp_path):
    with pytest.raises(ValueError, match="missing"):
        sb.summary(tmp_path)


@needs_sysbench
def test_sysbench_version():
    assert sb.version().startswith("sysbench 1.")


# --- both ----------------------------------------------------------------------

def test_parsing_leaves_raw_output_untouched():
    before = digests()
    for name in ("fio_randread", "fio_randrw", "fio_stall"):
        fio.samples(FIXTURES / name, start(name))
        fio.summary(FIXTURES / name)
    for name in ("sysbench_rndrd", "sysbench_rndwr", "sysbench_rndrw_4k"):
        sb.samples(FIXTURES / name, start(name))
        sb.summary(FIXTURES / name)
    assert digests() == before


@pytest.mark.parametrize("module", [fio, sb])
def test_module_contract(module):
    for name in ("TOOL", "check", "dataset", "prepare", "command", "samples", "summary", "live", "version"):
        assert hasattr(module, name)
    assert module.TOOL in ("fio", "sysbench-fileio")


@pytest.mark.workflow
def test_sysbench_fileio_open_loop():
    """--rate=2000 against one file: the 99th percentile (from arrival) per second and for the run;
    sysbench fileio prints no queue length. It kept up: 5957 events in 3.0043 s."""
    from dbsweep.collect import open_loop

    raw = FIXTURES / "sysbench_rndrd_rate"
    assert "--percentile=99" in json.loads((raw / "argv.json").read_text())
    rows = sb.samples(raw, 0.0)
    assert [(r["lat_pct_ms"], r["lat_p99_ms"]) for r in rows] == [(None, 2.913), (None, 0.348), (None, 0.395)]
    s = sb.summary(raw)
    assert (s["lat_p95_ms"], s["lat_p99_ms"], s["events"], s["time_s"]) == (None, 2.07, 5957, 3.0043)
    assert open_loop(2000, s, rows) == {"rate": 2000, "rate_achieved": pytest.approx(5957 / 3.0043),
                                        "queue_max": None, "queue_end": None, "rate_short": 0}
    assert open_loop(2500, s, rows)["rate_short"] == 1


# --- the declared contract ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "workflow"


# Each workload with the options it needs before its names are looked at.
NEEDS = {"fio": {"size": "64M"}, "sysbench-fileio": {"file-test-mode": "rndrd"},
         "sysbench": {"script": "oltp_read_write"}, "tpcc": {}, "insert": {}, "query": {}, "pgbench": {}}


@pytest.mark.parametrize("tool", list(NEEDS))
@pytest.mark.parametrize("name", ["threads=64 ", "time=5", "time\n", "rate 5", "x;y", "--time", "t'"])
def test_every_workload_refuses_a_name_that_is_not_an_option_name(tool, name):
    """A name goes onto the tool's command line as --NAME=VALUE: `=`, a space or a line break in it would make
    another option of it (sysbench reads --threads=64 =1 as 64 threads)."""
    from dbsweep import workloads
    with pytest.raises(ConfigError) as err:
        workloads.get(tool).check(NEEDS[tool] | {name: "1"}, "workloads.w.options")
    assert str(err.value).startswith(f"workloads.w.options: {name!r} (set to '1') is not an option name of ")
    assert "\n" not in str(err.value)


def test_a_refused_name_hides_a_password():
    from dbsweep import workloads
    with pytest.raises(ConfigError) as err:
        workloads.get("sysbench").check({"script": "oltp_read_write", "mysql-password=": "hunter2"}, "w")
    assert "hunter2" not in str(err.value) and "'***'" in str(err.value)


def test_schema_tool_enum_is_the_registry():
    import yaml

    from dbsweep import workloads
    schema = yaml.safe_load((WORKFLOW / "schemas" / "config.schema.yaml").read_text())
    enum = schema["properties"]["workloads"]["additionalProperties"]["properties"]["tool"]["enum"]
    assert enum == list(workloads.registry())


def test_every_workload_declares_what_the_pipeline_reads():
    import re

    from dbsweep import workloads
    rules = set(re.findall(r"^rule (\w+):", "".join(p.read_text() for p in (WORKFLOW / "rules").glob("*.smk")),
                           re.M))
    for tool, declared in workloads.registry().items():
        assert declared.tool == tool and declared.kind in (workloads.STORAGE, workloads.DATABASE)
        for name in ("check", "dataset", "prepare", "samples", "summary", "version", "duration", "client"):
            assert callable(getattr(declared, name)), (tool, name)
        # a workload runs one command, or phases, or measures by itself
        assert (declared.command is not None) + (declared.phases is not None) + (declared.measure is not None) == 1
        assert declared.analyses and set(declared.analyses) <= rules, tool
        assert (declared.percentiles is None) == (declared.percentile_source is None), tool
        assert not declared.database or declared.families is None or declared.families
        assert declared.database or not (declared.load or declared.after_run or declared.families), tool


# Comparisons with a tool's or a server family's / engine's name: `== "fio"`, `in ("mariadb", …)`.
TOOL_NAMES = ("fio", "sysbench", "sysbench-fileio", "tpcc", "insert", "query", "pgbench")
FAMILY_NAMES = ("mariadb", "postgresql", "mysql", "innodb", "myrocks")


def _name_tests(names: tuple[str, ...], files) -> list[str]:
    import re
    quoted = "|".join(re.escape(n) for n in names)
    pattern = re.compile(rf"""(==|!=|\bin)\s*[(\[{{]?\s*["']({quoted})["']|["']({quoted})["']\s*(==|!=|\bin\b)""")
    return [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in files
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


def test_no_tool_name_is_tested_outside_workloads():
    package = WORKFLOW / "dbsweep"
    files = [p for p in package.rglob("*.py") if "workloads" not in p.parts]
    files += [*(WORKFLOW / "rules").glob("*.smk"), *(WORKFLOW / "scripts").glob("*.py"), WORKFLOW / "Snakefile"]
    assert _name_tests(TOOL_NAMES, files) == []


def test_no_family_or_engine_name_is_tested_outside_engines():
    package = WORKFLOW / "dbsweep"
    files = [p for p in package.rglob("*.py") if "engines" not in p.parts]
    files += [*(WORKFLOW / "rules").glob("*.smk"), *(WORKFLOW / "scripts").glob("*.py"), WORKFLOW / "Snakefile"]
    assert _name_tests(FAMILY_NAMES, files) == []
