"""Config validation: every error is one line naming the key and the value."""
import copy
from pathlib import Path

import pytest

from dbsweep.config import load, read
from dbsweep.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DEMO = read(ROOT / "config" / "config.yaml")


def with_change(path: str, value):
    config = copy.deepcopy(DEMO)
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return config


@pytest.mark.parametrize("path", sorted(p.name for p in (ROOT / "config" / "studies").glob("*.yaml")))
def test_shipped_studies_load(path):
    study = load(read(ROOT / "config" / "studies" / path))
    assert study.cells


def test_demo_study_expands_to_its_matrix():
    study = load(DEMO)
    assert study.axes == ["filesystem", "threads", "workload"]
    assert len(study.cells) == 8
    recipe = study.recipe(study.cells[0])
    assert recipe["threads"] == 1 and recipe["tool"] == "fio" and recipe["duration_s"] == 5


@pytest.mark.parametrize("path, value, message", [
    ("axes.filesystem", ["ext4", "zfs"], "axes.filesystem: 'zfs' is not defined"),
    ("axes.threads", [1, 0], r"axes.threads\[1\]: 0 is below the minimum of 1"),
    ("axes.threads", [-4], r"axes.threads\[0\]: -4 is below the minimum of 1"),
    ("axes.threads", [1, "4"], r"axes.threads\[1\]: '4' is not of type integer"),
    ("axes.threads", [4, 4], "axes.threads: 4 appears twice"),
    ("filesystems.ext4", {"type": "ext4", "size": "5GG"}, "filesystems.ext4.size: '5GG' is not a size"),
    ("filesystems.ext4", {"type": "zfs"}, "filesystems.ext4.type: 'zfs' is not one of"),
    ("exclude", [{"filesytem": "xfs"}], r"exclude\[0\]\.filesytem: unknown axis"),
    ("axes.workload", ["nope"], "axes.workload: 'nope' is not defined"),
    ("repetitions", 0, "repetitions: 0 is below the minimum of 1"),
    ("bogus", 1, "bogus: unknown key"),
    ("workloads.fio-randread.options.rw", "rand{mode}", r"options.rw: 'rand\{mode\}' names \{mode\}"),
    ("axes.filesystem", ["dir:relative/path"], "axes.filesystem: 'relative/path' is not an existing absolute"),
])
def test_bad_config_names_key_and_value(path, value, message):
    with pytest.raises(ConfigError, match=message) as error:
        load(with_change(path, value))
    assert "\n" not in str(error.value)


def test_block_device_needs_allow_format():
    config = with_change("filesystems.ssd", {"type": "xfs", "device": "/dev/loop0"})
    config["axes"]["filesystem"] = ["ssd"]
    with pytest.raises(ConfigError, match="filesystems.ssd.allow_format: False must be true to format /dev/loop0"):
        load(config)


def test_a_file_is_not_a_block_device():
    config = with_change("filesystems.ssd", {"type": "xfs", "device": "/etc/hostname", "allow_format": True})
    config["axes"]["filesystem"] = ["ssd"]
    with pytest.raises(ConfigError, match="filesystems.ssd.device: '/etc/hostname' is not a block device"):
        load(config)


def test_user_axis_fills_workload_options():
    config = with_change("axes.bs", ["4k", "16k"])
    config["workloads"]["fio-randread"]["options"]["bs"] = "{bs}"
    study = load(config)
    bs = {study.recipe(c)["options"]["bs"] for c in study.cells if c["workload"] == "fio-randread"}
    assert bs == {"4k", "16k"}
    assert study.cells[0].path.endswith("/bs~4k")


def test_image_is_shared_across_threads_and_changes_with_the_dataset():
    study = load(DEMO)
    by_fs = {}
    for cell in study.cells:
        by_fs.setdefault((cell["filesystem"], cell["workload"]), set()).add(study.image(cell))
    assert all(len(images) == 1 for images in by_fs.values())
    assert len({i for images in by_fs.values() for i in images}) == 4
    bigger = with_change("workloads.fio-randread.options.size", "512M")
    assert load(bigger).image(load(bigger).cells[0]) != study.image(study.cells[0])
    faster = with_change("workloads.fio-randread.options.runtime", 9)
    assert load(faster).image(load(faster).cells[0]) == study.image(study.cells[0])
