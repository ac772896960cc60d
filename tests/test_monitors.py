"""vmstat/iostat parsing on captured output (procps-ng 4.0.2, sysstat 12.6.1), and
the Monitors context manager running the real tools."""
import calendar
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from dbsweep import monitors
from dbsweep.monitors import Monitors

FIXTURES = Path(__file__).parent / "fixtures"
needs_tools = pytest.mark.skipif(not (shutil.which("vmstat") and shutil.which("iostat")),
                                 reason="vmstat/iostat not installed")


def utc(text, fmt="%Y-%m-%d %H:%M:%S"):
    return float(calendar.timegm(time.strptime(text, fmt)))


def block_device():
    names = sorted(p.name for p in Path("/sys/block").iterdir()) if Path("/sys/block").is_dir() else []
    return names[0] if names else None


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# --- vmstat ------------------------------------------------------------------

def test_vmstat_drops_the_since_boot_line():
    rows = monitors.vmstat(FIXTURES / "fio_randread" / "vmstat.txt")
    # 4 data lines captured; the first (02:05:14, averages since boot) is dropped
    assert [r["time"] for r in rows] == [utc("2026-11-22 02:05:15"), utc("2026-11-22 02:05:16"),
                                         utc("2026-11-22 02:05:17")]
    # " 8  3      0 21177908  19560 3160028    0    0 1118480     0 16691 111027 35 45  0  6 14 2026-11-22 02:05:15"
    assert rows[0] == {"time": utc("2026-11-22 02:05:15"), "r": 8, "b": 3, "free": 21177908, "buff": 19560,
                       "cache": 3160028, "si": 0, "so": 0, "bi": 1118480, "bo": 0, "in": 16691, "cs": 111027,
                       "us": 35, "sy": 45, "id": 0, "wa": 6, "st": 14}
    assert rows[2]["r"] == 10 and rows[2]["bi"] == 1364936 and rows[2]["st"] == 16


def test_vmstat_ignores_an_unfinished_last_line(tmp_path):
    text = (FIXTURES / "fio_stall" / "vmstat.txt").read_text()
    whole = monitors.vmstat(FIXTURES / "fio_stall" / "vmstat.txt")
    (tmp_path / "vmstat.txt").write_text(text[:-20])  # killed while printing the last line
    assert monitors.vmstat(tmp_path / "vmstat.txt") == whole[:-1]


def test_vmstat_refuses_local_time(tmp_path):
    text = (FIXTURES / "fio_randread" / "vmstat.txt").read_text()
    (tmp_path / "vmstat.txt").write_text(text.replace("                 UTC", "                 CET"))
    with pytest.raises(ValueError, match="CET, not UTC"):
        monitors.vmstat(tmp_path / "vmstat.txt")


# --- iostat ------------------------------------------------------------------

def test_iostat_drops_the_since_boot_report():
    rows = monitors.iostat(FIXTURES / "fio_randrw" / "iostat.json")
    assert [r["time"] for r in rows] == [utc(f"2026-11-22 02:04:{s}") for s in (55, 56, 57)]
    assert rows[0] == {"time": utc("2026-11-22 02:04:55"), "device": "loop0", "r_s": 11266.0, "w_s": 11476.0,
                       "f_s": 0.0, "rkb_s": 45064.0, "wkb_s": 45904.0, "r_await": 0.04, "w_await": 0.04,
                       "aqu_sz": 0.86, "util": 57.20}
    assert rows[1]["r_s"] == 15967.0 and rows[2]["w_s"] == 16240.0


def test_iostat_killed_keeps_complete_samples():
    path = FIXTURES / "iostat_killed.json"
    with pytest.raises(json.JSONDecodeError):
        json.loads(path.read_text())  # SIGKILL: the document was never closed
    rows = monitors.iostat(path)
    assert [r["time"] for r in rows] == [utc("2026-11-22 01:59:39"), utc("2026-11-22 01:59:40")]


def test_iostat_cut_mid_sample(tmp_path):
    text = (FIXTURES / "fio_randrw" / "iostat.json").read_text()
    cut = text.index('"r/s": 16458.00') + 5  # inside the last sample
    (tmp_path / "iostat.json").write_text(text[:cut])
    rows = monitors.iostat(tmp_path / "iostat.json")
    assert rows == monitors.iostat(FIXTURES / "fio_randrw" / "iostat.json")[:2]


def test_iostat_refuses_locale_timestamps(tmp_path):
    text = (FIXTURES / "fio_randrw" / "iostat.json").read_text()
    (tmp_path / "iostat.json").write_text(text.replace('"2026-11-22T02:04:56+0000"', '"11/22/26 02:04:56"'))
    with pytest.raises(ValueError, match="S_TIME_FORMAT=ISO"):
        monitors.iostat(tmp_path / "iostat.json")


def test_iostat_without_samples(tmp_path):
    (tmp_path / "iostat.json").write_text("")
    assert monitors.iostat(tmp_path / "iostat.json") == []


# --- Monitors ------------------------------------------------------------------

@needs_tools
def test_monitors_record_and_stop(tmp_path):
    device = block_device()
    if device is None:
        pytest.skip("no block device")
    with Monitors(tmp_path, [device]) as mon:
        pids = [p.pid for p in mon._procs]
        time.sleep(2.5)
    assert mon.commands == [["vmstat", "-n", "-t", "1"], ["iostat", "-x", "-t", "-o", "JSON", "-d", device, "1"]]
    assert all(gone(pid) for pid in pids)
    # what each tool cost, from the kernel's account (nanoseconds): some, and far below its 2.5 s of life
    assert set(mon.cpu_s) == {"vmstat", "iostat"} and all(0 < s < 0.5 for s in mon.cpu_s.values())
    # stopped with SIGINT, iostat closed its JSON document
    assert json.loads((tmp_path / "iostat.json").read_text())["sysstat"]["hosts"]
    assert monitors.iostat(tmp_path / "iostat.json")[0]["device"] == device
    rows = monitors.vmstat(tmp_path / "vmstat.txt")
    assert rows and abs(rows[-1]["time"] - time.time()) < 5  # UTC epoch, same clock as time.time()


@needs_tools
def test_monitors_stop_when_the_body_raises(tmp_path):
    with pytest.raises(RuntimeError), Monitors(tmp_path, []) as mon:
        pids = [p.pid for p in mon._procs]
        raise RuntimeError("benchmark failed")
    assert len(pids) == 1 and gone(pids[0])
    assert mon.commands == [["vmstat", "-n", "-t", "1"]]
    assert not (tmp_path / "iostat.json").exists()


def test_monitors_refuse_unknown_devices_before_starting(tmp_path):
    with pytest.raises(ValueError, match="no such block device"), Monitors(tmp_path, ["nosuchdev9"]):
        pass
    assert list(tmp_path.iterdir()) == []
