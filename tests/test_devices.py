"""Device classes: declared at load, a cap on the cell's loop device for the whole repetition, read back,
and always removed (also after a kill). The bad values are rows of test_bad_configs.py."""
import copy
import csv
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, leftovers, tiny_study
from dbsweep import delivered, devices, storage
from dbsweep.config import load
from dbsweep.filesystems import FS_DEFAULTS
from dbsweep.errors import ConfigError
from dbsweep.runtime import blkio, cgroup

BLKIO = Path("/sys/fs/cgroup/blkio")
GP3 = {"read_iops": 3000, "write_iops": 3000, "read_bps": "125M", "write_bps": "125M"}
# /proc/self/mountinfo of a host with only cgroup v2 (a Debian 12 default install, captured)
V2_ONLY = ("25 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
           "26 25 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
           "rw,nsdelegate,memory_recursiveprot\n")


def study(**changes) -> dict:
    config = tiny_study(device_classes={"gp3": dict(GP3), "slow": {"read_iops": 500}})
    config.update(changes)
    return config


def root_rules(dev: str) -> dict:
    return blkio.rules(BLKIO, storage.major_minor(dev))


# --- at load -------------------------------------------------------------------------------------------

def test_the_axis_picks_a_class_into_the_recipe_and_the_image_is_shared():
    config = study()
    config["axes"]["device_class"] = ["none", "gp3"]
    s = load(config)
    by_class = {cell["device_class"]: cell for cell in s.cells if cell["workload"] == "fio-rr"}
    capped, plain = s.recipe(by_class["gp3"]).filesystem, s.recipe(by_class["none"]).filesystem
    assert capped["device_class"] == {"name": "gp3", "read_iops": 3000, "write_iops": 3000,
                                      "read_bps": 125 << 20, "write_bps": 125 << 20}
    assert "device_class" not in plain and plain == load(tiny_study()).recipe(load(tiny_study()).cells[0]).filesystem
    # a cap shapes the run, not the prepared files: both cells restore one image
    assert s.image(by_class["gp3"]) == s.image(by_class["none"]) is not None


def test_a_filesystem_names_its_class():
    config = study()
    config["filesystems"]["ext4"]["device_class"] = "slow"
    s = load(config)
    assert {s.recipe(cell).filesystem["device_class"]["name"] for cell in s.cells} == {"slow"}
    assert s.recipe(s.cells[0]).filesystem["device_class"] == {"name": "slow", "read_iops": 500}


def test_a_host_that_cannot_throttle_is_refused_with_the_reason(tmp_path):
    assert devices.undeliverable(cgroup.mounts()) is None  # this host: cgroup v1 with blkio throttling
    assert "only cgroup v2" in devices.undeliverable(cgroup.mounts(V2_ONLY))
    assert "io.max" in devices.undeliverable(cgroup.mounts(V2_ONLY))
    no_throttle = f"40 26 0:40 / {tmp_path} rw,nosuid shared:20 - cgroup cgroup rw,blkio\n"
    assert "CONFIG_BLK_DEV_THROTTLING" in devices.undeliverable(cgroup.mounts(no_throttle))
    assert "no cgroup v1 blkio" in devices.undeliverable(cgroup.mounts(V2_ONLY.splitlines()[0]))


def test_a_class_on_a_real_device_or_a_dir_is_refused():
    for fs in ({"type": "dir", "path": "/tmp"}, {"type": "xfs", "device": "/dev/vdz", "allow_format": True}):
        config = study(filesystems={"disk": fs | {"device_class": "gp3"}})
        config["axes"]["filesystem"] = ["disk"]
        with pytest.raises(ConfigError, match="filesystems.disk.device_class: 'gp3': (a dir|/dev/vdz is a real)"):
            load(config)


@pytest.mark.parametrize("value, why", [(0, "is not a whole number of milliseconds"),
                                        (10_001, "is not a whole number of milliseconds"),
                                        (0.5, "is not of type integer"), ("1ms", "is not of type integer"),
                                        (True, "is not of type integer")])
def test_a_bad_latency_is_refused_in_one_line(value, why):
    config = study(device_classes={"gp3": {"write_latency_ms": value}})
    config["axes"]["device_class"] = ["gp3"]
    with pytest.raises(ConfigError, match=f"^device_classes.gp3.write_latency_ms: {value!r} {why}[^\n]*$"):
        load(config)


def test_a_latency_only_class_is_a_class_and_the_old_latency_key_names_the_new_ones():
    config = study(device_classes={"gp3": {"read_latency_ms": 1, "write_latency_ms": 2}})
    config["axes"]["device_class"] = ["gp3"]
    assert load(config).recipe(load(config).cells[0]).filesystem["device_class"] == \
        {"name": "gp3", "read_latency_ms": 1, "write_latency_ms": 2}
    config["device_classes"]["gp3"]["latency"] = "1ms"
    with pytest.raises(ConfigError, match="gp3.latency: '1ms': give the time per IO as read_latency_ms"):
        load(config)


def test_a_latency_without_its_tools_is_refused_at_load(tmp_path, monkeypatch):
    """nbdkit and nbdfuse are looked up on PATH: a host with nbdkit only is refused, naming the package."""
    (tmp_path / "nbdkit").symlink_to("/usr/bin/nbdkit")
    config = study(device_classes={"gp3": {"write_iops": 3000, "write_latency_ms": 1}, "plain": {"write_iops": 9}})
    config["axes"]["device_class"] = ["gp3"]
    load(copy.deepcopy(config))  # this host has them
    assert "/dev/nofuse does not exist" in devices.cannot_delay(Path("/dev/nofuse"))
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/sbin:/sbin")
    with pytest.raises(ConfigError, match=r"^axes.device_class: 'gp3': this host cannot deliver the class: a latency "
                                          r"needs nbdfuse, not installed \(apt-get install libnbd-bin"):
        load(copy.deepcopy(config))
    config["axes"]["device_class"] = ["none", "plain"]  # a class without a latency needs neither
    assert devices.check(config, config["axes"])["plain"] == {"write_iops": 9}


# --- the class's utilisation: an oracle ------------------------------------------------------------------

IDLE = {"r_s": 0.0, "w_s": 0.0, "f_s": 0.0, "rkb_s": 0.0, "wkb_s": 0.0}


def test_utilisation_is_the_largest_share_of_a_cap_with_iostats_ios_counted_as_the_throttle_charged():
    caps = {"read_iops": 150, "write_iops": 150, "read_bps": 160 << 20, "write_bps": 160 << 20}
    one = {"read": 1.0, "write": 1.0}
    assert devices.utilisation(IDLE, caps, one) == 0
    assert devices.utilisation(IDLE | {"r_s": 75.0}, caps, one) == 50
    # 90 writes and 60 flushes a second, each of them an IO to the throttle (ext4's empty flushes): the cap
    assert devices.utilisation(IDLE | {"w_s": 90.0, "f_s": 60.0}, caps, one) == 100
    # the same second where each flush rode on a write (xfs's log writes): 90 IOs to the throttle, 60%
    assert devices.utilisation(IDLE | {"w_s": 90.0, "f_s": 60.0}, caps, {"read": 1.0, "write": 0.6}) == 60
    # 80 MiB/s of large writes at 40 IOs a second: the bandwidth binds
    assert devices.utilisation(IDLE | {"w_s": 40.0, "wkb_s": 80 * 1024.0}, caps, one) == 50
    assert devices.utilisation(IDLE | {"rkb_s": 160 * 1024.0, "r_s": 15.0}, {"read_bps": 160 << 20}, one) == 100
    # a cap left out does not count: reads on a class that caps only writes
    assert devices.utilisation(IDLE | {"r_s": 9000.0, "w_s": 30.0}, {"write_iops": 300}, one) == 10
    assert devices.utilisation(IDLE | {"r_s": 9000.0}, {}, one) is None
    # without the throttle's counts the IOPS caps cannot be read from iostat: only the bandwidth's share
    assert devices.utilisation(IDLE | {"w_s": 150.0, "wkb_s": 40 * 1024.0}, caps) == 25
    assert devices.utilisation(IDLE | {"w_s": 150.0}, {"write_iops": 150}) is None


def test_what_an_iostat_io_counts_as_is_the_throttles_count_over_the_devices_in_the_window():
    """Measured on this host (a 1 GiB loop, write_iops 500, fio randwrite 4k with an fsync after each write,
    5 s): on xfs the throttle counted 2,502 writes where the device completed 2,502 writes and 1,109 flushes;
    on ext4 2,511 where it completed 1,495 writes and 1,083 flushes."""
    def counts(throttled, completed):
        return {"start": {"time": 100.2, "read": 7, "write": 40, "device_read": 9, "device_write": 30},
                "end": {"time": 105.2, "read": 7, "write": 40 + throttled, "device_read": 9,
                        "device_write": 30 + completed}}

    xfs = devices.charged_per_io(counts(2502, 2502 + 1109))
    assert xfs == {"read": 1.0, "write": pytest.approx(2502 / 3611)}  # no read: 1
    assert devices.charged_per_io(counts(2511, 1495 + 1083))["write"] == pytest.approx(2511 / 2578)
    # a second of the xfs run: the old reading (w/s + f/s as the throttle's writes) put it at 144% of its cap
    second = IDLE | {"w_s": 2502 / 5, "f_s": 1109 / 5}
    assert devices.utilisation(second, {"write_iops": 500}, {"read": 1.0, "write": 1.0}) == 144.44
    assert devices.utilisation(second, {"write_iops": 500}, xfs) == 100.08
    assert devices.charged_per_io(None) is None
    assert devices.charged_per_io({"start": counts(1, 1)["start"]}) is None  # a window that never ended


def test_the_devices_completed_ios_are_read_as_iostat_reads_them(tmp_path):
    """/proc/diskstats of this host's kernel (6.18: 20 fields, captured) and of one before 4.18 (14, no
    discards or flushes)."""
    (tmp_path / "diskstats").write_text(
        "   7       0 loop0 12551995 46379 300977583 2403146 13155040 1441213 440095482 9066473 0 3297700 "
        "12603720 1320 0 1319390418 207 5188141 1133893\n"
        "   7       1 loop1 301 0 2408 36 12 3 96 4 0 40 40\n")
    assert devices.diskstats("7:0", tmp_path / "diskstats") == {"read": 12551995, "write": 13155040 + 5188141}
    assert devices.diskstats("7:1", tmp_path / "diskstats") == {"read": 301, "write": 12}
    with pytest.raises(RuntimeError, match="device 7:2 is not in"):
        devices.diskstats("7:2", tmp_path / "diskstats")


def test_the_mean_utilisation_counts_only_the_measured_seconds_that_have_one():
    rows = [{"second": 0, "class_util_pct": 100.0}, {"second": 1, "class_util_pct": 40.0},
            {"second": 2}, {"second": 3, "class_util_pct": 60.0}, {"second": 4, "class_util_pct": 100.0}]
    assert devices.mean_utilisation(rows, 3) == 50  # second 0 is before the window, 2 has no sample, 4 after
    assert devices.mean_utilisation(rows[:1] + rows[2:3], 3) is None  # never sampled: no figure, not 0
    assert devices.mean_utilisation([], 10) is None


def test_an_io_throttle_event_stays_within_the_device_class():
    """v1 throttles each cgroup on its own: a node the event moved below the root leaves the class's rule,
    so its cgroup gets the event's limits, never above the class's, and the class's where the event sets none."""
    blkio.classes["7:99"] = {"read_iops": 500, "write_bps": 1 << 20}
    try:
        assert blkio.within_class("7:99", {"read_iops": 2000, "read_bps": 5 << 20}) == \
            {"read_bps": 5 << 20, "write_bps": 1 << 20, "read_iops": 500}
        assert blkio.within_class("7:99", {"read_iops": 100}) == {"write_bps": 1 << 20, "read_iops": 100}
        assert blkio.within_class("7:98", {"read_iops": 100}) == {"read_iops": 100}  # a device without a class
    finally:
        del blkio.classes["7:99"]


# --- on a loop device ----------------------------------------------------------------------------------

def spec(**caps):
    return FS_DEFAULTS | {"type": "ext4", "size": "300M", "device_class": {"name": "c"} | caps}


def test_the_cap_is_set_read_back_and_removed_even_on_error(tmp_path):
    caps = {"read_iops": 500, "write_bps": 8 << 20}
    with pytest.raises(RuntimeError, match="boom"):
        with storage.filesystem(spec(**caps), tmp_path / "scratch", tmp_path / "active") as fs:
            dev = f"/dev/{fs.devices[0]}"
            record = fs.facts["device_class"]
            assert record["declared"] == caps and record["delivered"] == caps == root_rules(dev)
            assert record["device"] == storage.major_minor(dev) and record["blkio_cgroup"] == "/"
            assert blkio.classes[record["device"]] == caps
            raise RuntimeError("boom")
    assert record["delivered_at_end"] == caps, "read back before removal, a failed run too"
    assert root_rules(dev) == {} and record["device"] not in blkio.classes
    assert leftovers(tmp_path) == [] and list((tmp_path / "active").iterdir()) == []


def test_an_io_throttle_event_on_a_class_is_held_to_it_and_lifted_back_to_it(tmp_path):
    with storage.filesystem(spec(read_iops=300), tmp_path / "scratch", tmp_path / "active") as fs:
        dev = fs.facts["device_class"]["device"]
        throttles = blkio.Throttles()
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            throttles.limit("node1", [sleeper.pid], dev, {"read_iops": 1000, "write_iops": 50})
            group = throttles.owner.path / "node1"
            assert blkio.rules(group, dev) == {"read_iops": 300, "write_iops": 50}
            throttles.lift("node1")  # the node stays in its cgroup until close: at the class's rates
            assert blkio.rules(group, dev) == {"read_iops": 300}
        finally:
            throttles.close()
            sleeper.kill()
            sleeper.wait()
    assert leftovers(tmp_path) == []


def test_a_sigkilled_runs_cap_is_removed_by_the_next_one(tmp_path):
    child = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT / 'workflow')!r})
        from pathlib import Path
        from dbsweep import storage
        from dbsweep.filesystems import FS_DEFAULTS
        spec = FS_DEFAULTS | {{"type": "ext4", "size": "300M", "device_class": {{"name": "c", "read_iops": 77}}}}
        with storage.filesystem(spec, Path({str(tmp_path / 'scratch')!r}), Path({str(tmp_path / 'active')!r})) as fs:
            print(fs.devices[0], flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    dev = "/dev/" + proc.stdout.readline().strip()
    proc.kill()
    proc.wait()
    assert root_rules(dev) == {"read_iops": 77}, "SIGKILL leaves the rule"
    released = storage.sweep_stale(tmp_path / "active")
    assert released[0] == f"blkio throttle on {dev} ({storage.major_minor(dev)})" and len(released) == 3
    assert root_rules(dev) == {} and leftovers(tmp_path) == []


def test_a_loop_device_starts_without_a_rule_left_on_it(tmp_path):
    """A rule outlives its loop device's detach; one a killed run left (and no sweep removed) must not cap
    the next image attached there."""
    image = tmp_path / "a.img"
    storage.sparse_file(image, "16M")
    with storage.loop_device(image, tmp_path / "active") as dev:
        number = storage.major_minor(dev)
        blkio.set_rules(BLKIO, number, {"write_iops": 33})
    try:
        assert blkio.rules(BLKIO, number) == {"write_iops": 33}, "detach leaves the rule on the device"
        with storage.loop_device(image, tmp_path / "active") as again:
            assert again != dev or blkio.rules(BLKIO, number) == {}
    finally:
        blkio.set_rules(BLKIO, number, {})


def nbd_processes(folder: Path) -> list[str]:
    """nbdkit and nbdfuse processes (not zombies) whose command line names folder."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "status"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if proc.info["name"] in ("nbdkit", "nbdfuse") and proc.info["status"] != psutil.STATUS_ZOMBIE \
                and str(folder) in cmd:
            found.append(cmd)
    return found


def delivers(declared_ms: float, measured_ms: float) -> bool:
    """A latency delivered: fio's median within 5% of the declared and 0.25 ms more for the host's load
    changing between the calibration and the measure (the fast tier's parallel tests: R and snakemake beside
    it moved fio's median by up to 0.2 ms), and above it up to 10% and 0.5 ms: the suite's own load on 2 cores
    (CI, other test workers) delays the wake-ups of a 3 s fio run beside it. The 5% on a quiet host is
    BENCHMARKS.md's (bench/device_latency.py); that the hold is calibrated (the path's own time off) and
    sub-ms is checked apart (holds; the delay server's fraction of a ms)."""
    return declared_ms * 0.95 - 0.25 <= measured_ms <= declared_ms * 1.1 + 0.5


def awaits(declared_ms: float, await_ms: float) -> bool:
    """The loop device's mean time per IO (await_ms) on a latency class: a mean, so the slow IOs of a loaded
    host are in it (the suite's own load put 4.56 ms at 3 declared: up to half and 1 ms above); without fio's
    and ext4's parts of the path it may be a little under the declared (5% and 0.1 ms, as delivers)."""
    return declared_ms * 0.95 - 0.1 <= await_ms <= declared_ms * 1.5 + 1


def fio_latency_ms(path: Path, rw: str) -> float:
    """fio's median completion latency (ms) of 4k direct IOs one at a time for 3 s on a file under path (written
    first: a read of a part fio only allocated never reaches the device)."""
    subprocess.run(["fio", "--name=fill", f"--filename={path}/lat", "--size=16M", "--rw=write", "--bs=1M",
                    "--direct=1", "--output=/dev/null"], check=True)
    done = subprocess.run(["fio", "--name=lat", f"--filename={path}/lat", "--size=16M", f"--rw={rw}", "--bs=4k",
                           "--direct=1", "--ioengine=psync", "--runtime=3", "--time_based", "--output-format=json"],
                          capture_output=True, text=True, check=True)
    job = json.loads(done.stdout)["jobs"][0]["read" if "read" in rw else "write"]
    return job["clat_ns"]["percentile"]["50.000000"] / 1e6


def test_a_latency_is_added_to_each_io_read_back_and_removed(tmp_path):
    """The class's latency, as fio sees it one IO at a time: the declared ms, plus the path's own (delivers).
    A blkio cap is set on top."""
    latency = {"read_latency_ms": 1, "write_latency_ms": 3}
    with storage.filesystem(spec(write_iops=100, **latency), tmp_path / "scratch", tmp_path / "active") as fs:
        record = fs.facts["device_class"]
        assert record["latency"]["declared"] == record["latency"]["delivered"] == latency
        assert record["declared"] == record["delivered"] == {"write_iops": 100}
        assert len(nbd_processes(tmp_path)) == 2 and str(tmp_path / "scratch" / "nbd") in leftovers(tmp_path)
        write, read = fio_latency_ms(fs.path, "randwrite"), fio_latency_ms(fs.path, "randread")
    assert delivers(3, write) and delivers(1, read), (write, read)
    assert record["latency"]["delivered_at_end"] == latency
    holds, path = record["latency"]["hold_ms"], record["latency"]["path_ms"]
    # the path's own time comes off each hold (under load, all of a 1 ms read)
    assert 0 <= holds["read_latency_ms"] < 1 and 2 <= holds["write_latency_ms"] < 3
    assert [len(times) for times in path.values()] == [storage.CALIBRATION_ROUNDS] * 2, path
    assert awaits(3, record["latency"]["await_ms"]["write"]) and awaits(1, record["latency"]["await_ms"]["read"])
    assert leftovers(tmp_path) == [] and nbd_processes(tmp_path) == [] and list((tmp_path / "active").iterdir()) == []


def test_the_delay_server_holds_a_fraction_of_a_ms_set_while_it_runs(tmp_path):
    """nbdkit's delay filter held whole ms only (0.5ms delayed nothing) and on top of the IO's own time; the
    delay server holds what it is set to while it runs, read back as applied, counted from the IO's arrival."""
    image = tmp_path / "fs.img"
    storage.sparse_file(image, "64M")
    active = tmp_path / "active"
    with storage.delayed(image, {"read_latency_ms": 1}, tmp_path / "scratch", active) as delay, \
            storage.loop_device(delay.file, active) as dev:
        pairs = []
        for _ in range(3):  # interleaved: a burst of the host's load moves both of a pair
            assert delay.hold({"read_latency_ms": 0}) == {"read_latency_ms": 0}
            plain = storage.probe(dev, 0.5)
            assert delay.hold({"read_latency_ms": 0.5}) == {"read_latency_ms": 0.5}
            pairs.append((plain, storage.probe(dev, 0.5)))
        assert delay.hold({"read_latency_ms": 4.25}) == {"read_latency_ms": 4.25} == \
            {"read_latency_ms": storage.applied_holds(delay.settings)["read_latency_ms"]}
        more = storage.probe(dev, 4.25)
    # Held: never under the hold, and half a ms adds what the path's own time does not cover (the path is
    # 0.1-0.4 ms on a quiet host, 0.5 under the suite's load; the filter added nothing). The upper bounds
    # leave a loaded host's scheduling room.
    plain, half = (statistics.median(side) for side in zip(*pairs, strict=True))
    # (4.25 ms held took 6.10 in the fast tier on a clean clone: above, a quarter and 1 ms, as the workflow's fio)
    assert 0.5 <= half < 2 and half - plain > 0.25 and 4.25 <= more <= 4.25 * 1.25 + 1, (pairs, more)
    assert leftovers(tmp_path) == [] and nbd_processes(tmp_path) == [] and list(active.iterdir()) == []


def test_a_killed_repetition_leaves_no_nbdkit_fuse_mount_or_loop_device(tmp_path):
    """As the guardian does: the repetition's cgroup killed (nbdfuse and nbdkit with it), then what it recorded
    released; the loop device over the dead FUSE file detaches, then the FUSE mount goes."""
    child = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT / 'workflow')!r})
        from pathlib import Path
        from dbsweep import storage
        from dbsweep.filesystems import FS_DEFAULTS
        spec = FS_DEFAULTS | {{"type": "ext4", "size": "300M",
                               "device_class": {{"name": "c", "write_latency_ms": 1, "read_iops": 77}}}}
        with storage.filesystem(spec, Path({str(tmp_path / 'scratch')!r}), Path({str(tmp_path / 'active')!r})) as fs:
            (fs.path / "data").write_bytes(b"x" * 65536)
            print(fs.devices[0], flush=True)
            time.sleep(60)
    """)
    group = cgroup.create(cgroup.hierarchy(), os.getpid())
    try:
        proc = subprocess.Popen([*group.enter_argv(), sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
        dev = "/dev/" + proc.stdout.readline().strip()
        assert len(nbd_processes(tmp_path)) == 2 and len(leftovers(tmp_path)) == 3  # 2 mounts, the loop
        group.kill()
        proc.wait()
        assert nbd_processes(tmp_path) == [] and len(leftovers(tmp_path)) == 3, "the kill leaves the mounts"
        released = storage.sweep_stale(tmp_path / "active")
    finally:
        group.kill()
        group.remove()
    assert released[0] == f"blkio throttle on {dev} ({storage.major_minor(dev)})"
    fuse = [i for i, what in enumerate(released) if what.startswith("nbdfuse ")]
    assert fuse and released.index(dev) < fuse[0]  # the FUSE file once the loop device is off it
    assert leftovers(tmp_path) == [] and root_rules(dev) == {}


# --- a run ---------------------------------------------------------------------------------------------

def fio(rw: str, bs: str, **more) -> dict:
    return {"tool": "fio", "options": {"rw": rw, "bs": bs, "size": "64M", "direct": 1, "ioengine": "libaio",
                                       "iodepth": 16, "runtime": 3} | more}


@pytest.mark.workflow
def test_a_fio_cell_on_a_class_delivers_its_cap_and_leaves_no_rule(study_factory):
    """Reads at an IOPS cap, large writes at a bandwidth cap, and on xfs small writes each followed by an
    fsync at an IOPS cap: each cell's fio rate is the cap, and the class's utilisation says so where
    iostat's %util cannot, also where iostat's flushes are not the throttle's IOs (xfs's log writes carry
    theirs: counted as w/s + f/s, 130-145% of the cap)."""
    caps = {"read_iops": 500, "write_iops": 200, "write_bps": 8 << 20}
    config = {
        "study": "devices",
        "axes": {"filesystem": ["ext4", "xfs"], "workload": ["randread", "write", "fsync"],
                 "device_class": ["capped"]},
        "exclude": [{"filesystem": "xfs", "workload": "randread"}, {"filesystem": "xfs", "workload": "write"},
                    {"filesystem": "ext4", "workload": "fsync"}],
        "filesystems": {"ext4": {"type": "ext4", "size": "256M"}, "xfs": {"type": "xfs", "size": "320M"}},
        "device_classes": {"capped": {"read_iops": 500, "write_iops": 200, "write_bps": "8M"}},
        "workloads": {"randread": fio("randread", "4k", runtime=4), "write": fio("write", "1M", iodepth=4, runtime=4),
                      "fsync": fio("randwrite", "4k", iodepth=1, fsync=1, runtime=4)},
    }
    s = study_factory(copy.deepcopy(config))
    s.run("--until", "collect")
    got = {}
    # what each cell's fio did, as a share of the cap that binds it (%): the utilisation's oracle. xfs: each
    # write's fsync writes the log, a write that carries the flush: two IOs to the throttle, not three
    cells = (("ext4", "randread", "read", "iops", 100 / 500), ("ext4", "write", "write", "bw_bytes", 100 / (8 << 20)),
             ("xfs", "fsync", "write", "iops", 2 * 100 / 200))
    for fs, wl, direction, figure, share in cells:
        rep = s.path(f"results/runs/filesystem~{fs}/threads~1/workload~{wl}/device_class~capped/rep~1")
        run = json.loads((rep / "run.json").read_text())
        record = run["filesystem"]["device_class"]
        assert record["declared"] == record["delivered"] == record["delivered_at_end"] == caps
        got[wl] = json.loads((rep / run["attempt"] / "raw" / "fio.json").read_text())["jobs"][0][direction][figure]
        device = record["device"]
        assert set(run["throttle_ios"]) == {device}
        # fio's rate in the window's full seconds, passed by no more than iostat's own timing (a loaded host
        # may read a second's counts late); the mean over the window's seconds, edges partly idle, at most 100
        with open(rep / "system.csv") as f:
            seconds = [row for row in csv.DictReader(f) if row["class_util_pct"]]
        assert seconds and all(row["device"] == record["block"] for row in seconds)
        shares = sorted(float(row["class_util_pct"]) for row in seconds)
        used = got[wl] * share
        assert shares[len(shares) // 2] == pytest.approx(used, abs=8) and shares[-1] < used + 20, (wl, used, shares)
        assert 0 < json.loads((rep / "summary.json").read_text())["class_util_pct"] <= 102
    # at depth 16 the cap; at depth 1, with an fsync after each write, the cap or less as the host's load
    # lets it (docs/devices.md), never more
    assert got["randread"] == pytest.approx(500, rel=0.05)
    assert got["write"] == pytest.approx(8 << 20, rel=0.05)
    assert 50 < got["fsync"] <= 200 / 2 * 1.05
    assert blkio.rules(BLKIO, device) == {}


def test_the_delivered_check_reads_the_latency_back():
    declared = {"name": "gp3", "write_latency_ms": 1}
    facts = {"declared": {}, "delivered": {}, "delivered_at_end": {},
             "latency": {"declared": {"write_latency_ms": 1}, "delivered": {"write_latency_ms": 1},
                         "delivered_at_end": {}}}
    got = {(c.kind, c.key): c.verdict for c in delivered.device_class(declared, facts)}
    assert got == {("device latency", "gp3 write_latency_ms (set)"): delivered.EQUAL,
                   ("device latency", "gp3 write_latency_ms (end)"): delivered.DEVIATED,  # nbdkit gone by the end
                   ("device latency (measured)", "gp3 write ms per IO (repetition)"): delivered.NOT_READ}


def test_the_delivered_check_measures_the_latency_each_io_took():
    """What the loop device's IOs took against the declared: at or above (the queue) is delivered, under
    it is a delay that held less than declared (a dead delay server: the path's own 0.1-0.4 ms)."""
    declared = {"name": "gp3", "read_latency_ms": 1, "write_latency_ms": 3}

    def verdicts(await_ms):
        facts = {"declared": {}, "delivered": {}, "delivered_at_end": {},
                 "latency": {"declared": {"read_latency_ms": 1, "write_latency_ms": 3}, "await_ms": await_ms}}
        return {c.key: (c.delivered, c.verdict) for c in delivered.device_class(declared, facts)
                if c.kind == "device latency (measured)"}

    assert verdicts({"read": 0.9, "write": 4.56}) == {"gp3 read ms per IO (repetition)": ("0.9", delivered.WITHIN),
                                                      "gp3 write ms per IO (repetition)": ("4.56", delivered.WITHIN)}
    assert verdicts({"read": 0.84, "write": 0.3}) == {
        "gp3 read ms per IO (repetition)": ("0.84", delivered.DEVIATED),
        "gp3 write ms per IO (repetition)": ("0.3", delivered.DEVIATED)}
    assert verdicts({"read": None, "write": 2.75})["gp3 read ms per IO (repetition)"] == ("", delivered.NOT_READ)
    assert verdicts({"read": None, "write": 2.75})["gp3 write ms per IO (repetition)"] == ("2.75", delivered.WITHIN)


@pytest.mark.workflow
def test_a_fio_cell_on_a_latency_class_delivers_its_latency(study_factory):
    """One IO at a time, fio's median write is the class's 2 ms plus the path's own (docs/devices.md)."""
    config = {
        "study": "latency",
        "axes": {"filesystem": ["ext4"], "workload": ["randwrite"], "device_class": ["slow"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "256M"}},
        "device_classes": {"slow": {"read_latency_ms": 2, "write_latency_ms": 2}},
        "workloads": {"randwrite": fio("randwrite", "4k", iodepth=1, ioengine="psync", size="16M")},
    }
    s = study_factory(copy.deepcopy(config))
    s.run("--until", "collect")
    rep = s.path("results/runs/filesystem~ext4/threads~1/workload~randwrite/device_class~slow/rep~1")
    run = json.loads((rep / "run.json").read_text())
    latency = run["filesystem"]["device_class"]["latency"]
    assert latency["declared"] == latency["delivered"] == latency["delivered_at_end"] == \
        {"read_latency_ms": 2, "write_latency_ms": 2}
    write = json.loads((rep / run["attempt"] / "raw" / "fio.json").read_text())["jobs"][0]["write"]
    median = write["clat_ns"]["percentile"]["50.000000"] / 1e6
    # A 10 s fio run inside the workflow, beside the suite's other worker: its median was 2.87 ms in CI (the
    # path's own time grows after the hold was calibrated on it). Held to the declared from below as delivers
    # is; above, a quarter and 1 ms: still under the 4 ms of a latency held twice. The quiet accuracy is the
    # one above (test_a_latency_is_added_to_each_io_read_back_and_removed) and BENCHMARKS.md's.
    assert 2 * 0.95 - 0.25 <= median <= 2 * 1.25 + 1, median
    assert awaits(2, latency["await_ms"]["write"])  # the loop device's own: the journal's writes too
    with open(rep / "delivered.csv") as f:
        measured = {row["key"]: row for row in csv.DictReader(f) if row["kind"] == "device latency (measured)"}
    # ext4's own reads (its metadata) reach the device too: each direction held to its declared 2 ms
    assert {key: row["verdict"] for key, row in measured.items()} == {
        "slow read ms per IO (repetition)": delivered.WITHIN,
        "slow write ms per IO (repetition)": delivered.WITHIN}, measured
    for direction in ("read", "write"):
        got = float(measured[f"slow {direction} ms per IO (repetition)"]["delivered"])
        assert got == pytest.approx(latency["await_ms"][direction], rel=1e-3)
    assert leftovers(s.root) == [] and nbd_processes(s.root) == []
