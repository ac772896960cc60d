"""Real loop filesystems: made, mounted, and always released."""
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, leftovers
from dbsweep import storage
from dbsweep.config import load
from dbsweep.filesystems import FS_DEFAULTS
from dbsweep.errors import ConfigError


def spec(kind, **extra):
    return FS_DEFAULTS | {"type": kind, "size": "300M"} | extra


@pytest.mark.parametrize("kind", ["ext4", "xfs", "btrfs", "tmpfs"])
def test_filesystem_is_mounted_then_released_even_on_error(tmp_path, kind):
    with pytest.raises(RuntimeError, match="boom"):
        with storage.filesystem(spec(kind), tmp_path / "scratch", tmp_path / "active") as fs:
            assert storage.mount_facts(fs.path)["fstype"] == kind
            (fs.path / "f").write_bytes(b"x" * 4096)
            if kind != "tmpfs":
                assert fs.facts["loop_direct_io"] is True
                assert fs.devices[0].startswith("loop")
            raise RuntimeError("boom")
    assert leftovers(tmp_path) == []
    assert list((tmp_path / "active").iterdir()) == []


def test_mkfs_and_mount_options_come_from_the_spec(tmp_path):
    s = spec("ext4", mkfs_options=["-b", "1024", "-L", "dbsweeptest"], mount_options=["noatime", "nodiscard"])
    with storage.filesystem(s, tmp_path / "scratch", tmp_path / "active") as fs:
        assert "noatime" in fs.facts["mount_options"].split(",")
        label = subprocess.run(["blkid", "-o", "value", "-s", "LABEL", f"/dev/{fs.devices[0]}"],
                               capture_output=True, text=True).stdout.strip()
        assert label == "dbsweeptest"
        assert ["mkfs.ext4", "-F", "-b", "1024", "-L", "dbsweeptest", f"/dev/{fs.devices[0]}"] in fs.commands
        # how the kernel queues the loop device's IO, as its sysfs says
        queue = Path(f"/sys/block/{fs.devices[0]}/queue")
        assert fs.facts["queue"]["read_ahead_kb"] == int((queue / "read_ahead_kb").read_text())
        assert f"[{fs.facts['queue']['scheduler']}]" in (queue / "scheduler").read_text() or \
            fs.facts["queue"]["scheduler"] == (queue / "scheduler").read_text().strip()
        assert fs.facts["queue"]["nr_requests"] > 0


def allocated(path):
    return path.stat().st_blocks * 512


def test_image_restores_the_prepared_files_with_their_zero_blocks_allocated(tmp_path):
    image = tmp_path / "prepared.img"
    def zeros(root):
        argv = ["dd", "if=/dev/zero", f"of={root}/data", "bs=1M", "count=64", "oflag=direct", "status=none"]
        subprocess.run(argv, check=True)
        return [argv]

    storage.prepare_image(spec("xfs"), image, zeros, tmp_path / "active")
    assert allocated(image) < 300 << 20, "the image stays sparse where nothing was written"
    for _ in range(2):
        with storage.filesystem(spec("xfs"), tmp_path / "scratch", tmp_path / "active", image) as fs:
            assert (fs.path / "data").stat().st_size == 64 << 20
            # Zeros written by prepare are data on the device, not holes that reads would skip.
            assert allocated(tmp_path / "scratch" / "fs.img") >= allocated(image) > 64 << 20
            (fs.path / "data").unlink()  # a run's changes never reach the image
    assert leftovers(tmp_path) == []


def test_dir_filesystem_needs_no_root_and_is_removed(tmp_path):
    with storage.filesystem(spec("dir", path=str(tmp_path)), tmp_path / "scratch", tmp_path / "active") as fs:
        assert fs.path.parent == tmp_path and fs.path.is_dir()
        made = fs.path
    assert not made.exists()


def test_a_sigkilled_run_is_cleaned_by_the_next_one(tmp_path):
    child = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT / 'workflow')!r})
        from pathlib import Path
        from dbsweep import storage
        from dbsweep.filesystems import FS_DEFAULTS
        with storage.filesystem(FS_DEFAULTS | {{"type": "ext4", "size": "300M"}},
                                Path({str(tmp_path / 'scratch')!r}), Path({str(tmp_path / 'active')!r})):
            print("mounted", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "mounted"
    proc.kill()
    proc.wait()
    assert len(leftovers(tmp_path)) == 2, "SIGKILL leaves the mount and the loop device"
    released = storage.sweep_stale(tmp_path / "active")
    assert len(released) == 2 and leftovers(tmp_path) == []


def test_block_device_is_formatted_only_when_allowed_and_not_mounted(tmp_path):
    backing = tmp_path / "disk.img"
    storage.sparse_file(backing, "300M")
    dev = storage.sh(["losetup", "--find", "--show", str(backing)]).stdout.strip()
    try:
        config = {"study": "dev", "axes": {"filesystem": ["disk"], "workload": ["w"]},
                  "filesystems": {"disk": {"type": "xfs", "device": dev, "allow_format": True}},
                  "workloads": {"w": {"tool": "fio", "options": {"rw": "read", "size": "1M"}}}}
        fs_spec = load(config).filesystems["disk"]
        with storage.filesystem(fs_spec, tmp_path / "scratch", tmp_path / "active") as fs:
            assert storage.mount_facts(fs.path)["fstype"] == "xfs"
            with pytest.raises(ConfigError, match=f"filesystems.disk.device: '{dev}' is mounted; refusing"):
                load(config)
    finally:
        time.sleep(0.1)
        storage.detach(dev)
    assert leftovers(tmp_path) == []


def test_detach_never_takes_away_an_image_attached_to_the_same_device_after_it(tmp_path):
    """A busy loop device is only marked for autoclear by `losetup -d`; once its holder lets go, another
    process may attach its own image to that device before detach looks again. detach must leave it be
    (seen with two test workers: one's retry detached the other's image, its mount lost its superblock)."""
    ours, theirs = tmp_path / "ours.img", tmp_path / "theirs.img"
    storage.sparse_file(ours, "16M")
    storage.sparse_file(theirs, "16M")
    dev = storage.sh(["losetup", "--find", "--show", str(ours)]).stdout.strip()
    autoclear = Path(f"/sys/block/{Path(dev).name}/loop/autoclear")
    holder = os.open(dev, os.O_RDONLY)  # keeps the device busy: the first `losetup -d` only marks it
    detaching = threading.Thread(target=storage.detach, args=(dev,))
    try:
        detaching.start()
        deadline = time.monotonic() + 10
        while autoclear.read_text().strip() != "1":
            assert time.monotonic() < deadline, "losetup -d never marked the busy device"
            time.sleep(0.005)
        os.close(holder)
        holder = None  # the kernel lets ours go now; theirs takes the same device at once
        storage.sh(["losetup", dev, str(theirs)])
        detaching.join(timeout=30)
        assert not detaching.is_alive()
        backing = Path(f"/sys/block/{Path(dev).name}/loop/backing_file")
        assert backing.exists() and backing.read_text().strip() == str(theirs), "detach took away theirs"
    finally:
        if holder is not None:
            os.close(holder)
        detaching.join(timeout=30)
        storage.detach(dev)
    assert leftovers(tmp_path) == []


def private_copy_holding_only(dev: str) -> subprocess.Popen:
    """A process in a private copy of the host's mount namespace that keeps dev's mount and lets every other
    loop mount go: a bare copy would also hold the loop filesystems of runs measuring beside the test, and
    their repetitions could not detach their devices while it lives (a gallery run failed so)."""
    ours = storage.major_minor(dev)
    others = [
        line.split()[4].encode().decode("unicode_escape")
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if line.split()[2].startswith("7:") and line.split()[2] != ours
    ]
    script = 'for m; do umount -l "$m"; done; exec sleep 60'
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *others])


def test_a_loop_mount_copied_into_another_mount_namespace_is_named_where_it_stays(tmp_path):
    """A mount namespace made while a loop filesystem is mounted keeps a copy the host's unmount does not
    reach where the copy is private: the device then cannot be detached, and the error names that namespace's
    process (a CI run failed "held open by no process" so)."""
    image, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    theirs, their_mnt = tmp_path / "theirs.img", tmp_path / "theirs"
    storage.sparse_file(image, "16M")
    storage.sparse_file(theirs, "16M")
    dev = storage.sh(["losetup", "--find", "--show", str(image)]).stdout.strip()
    their_dev = storage.sh(["losetup", "--find", "--show", str(theirs)]).stdout.strip()
    copy = None
    try:
        for device, target in ((dev, mnt), (their_dev, their_mnt)):
            storage.sh(["mkfs.ext4", "-q", str(device)])
            target.mkdir()
            storage.sh(["mount", device, str(target)])
        copy = private_copy_holding_only(dev)
        deadline = time.monotonic() + 10
        while storage.mounted_in(dev) != [f"{copy.pid} sleep"]:
            assert time.monotonic() < deadline, "the copy never showed"
            time.sleep(0.05)
        storage.sh(["umount", str(their_mnt)])
        assert storage.mounted_in(their_dev) == [], "the test's copy holds a run's loop mount beside it"
        storage.sh(["umount", str(mnt)])
        assert storage.mounted_in(dev) == [f"{copy.pid} sleep"]
        with pytest.raises(RuntimeError, match=rf"mounted in the mount namespace of {copy.pid} sleep"):
            storage.detach(dev, tries=2)
    finally:
        if copy is not None:
            copy.kill()
            copy.wait()
        for device, target in ((dev, mnt), (their_dev, their_mnt)):
            subprocess.run(["umount", str(target)], capture_output=True)
            storage.detach(device)
    assert storage.mounted_in(dev) == []


def test_a_busy_mount_is_never_unmounted_lazily(tmp_path):
    """A lazy unmount hides a mount that is still used: its device stays attached and written to."""
    target = tmp_path / "mnt"
    with storage.mounted("tmpfs", target, "tmpfs", ["size=8M"], tmp_path / "active"):
        holder = subprocess.Popen(["sleep", "60"], cwd=target)
        try:
            with pytest.raises(RuntimeError, match=r"umount .*in use by"):
                storage.unmount(target, tries=2)
            assert storage.mount_facts(target), "still mounted, not detached from the tree"
        finally:
            holder.kill()
            holder.wait()
    assert not storage.mount_facts(target)
    assert list((tmp_path / "active").iterdir()) == []
