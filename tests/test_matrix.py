"""Matrix expansion and cell paths."""
import pytest

from dbsweep.errors import ConfigError
from dbsweep.matrix import expand, parse_path


def paths(cells):
    return [c.path for c in cells]


def test_product_in_builtin_axis_order_then_user_axes():
    cells = expand({"workload": ["a"], "mode": ["x", "y"], "threads": [1, 4]}, [], [])
    assert paths(cells) == [
        "threads~1/workload~a/mode~x", "threads~1/workload~a/mode~y",
        "threads~4/workload~a/mode~x", "threads~4/workload~a/mode~y",
    ]


def test_exclude_drops_matching_cells_and_accepts_lists():
    cells = expand({"filesystem": ["ext4", "xfs"], "threads": [1, 4, 16]},
                   [{"filesystem": "xfs", "threads": [4, 16]}], [])
    assert paths(cells) == ["filesystem~ext4/threads~1", "filesystem~ext4/threads~4",
                            "filesystem~ext4/threads~16", "filesystem~xfs/threads~1"]


def test_include_adds_single_cells_and_expands_missing_axes():
    axes = {"filesystem": ["ext4", "xfs"], "threads": [1]}
    cells = expand(axes, [], [{"filesystem": "btrfs", "threads": 256}, {"threads": 8}])
    assert paths(cells)[2:] == ["filesystem~btrfs/threads~256", "filesystem~ext4/threads~8",
                                "filesystem~xfs/threads~8"]


def test_include_wins_over_exclude_and_never_duplicates():
    axes = {"filesystem": ["ext4", "xfs"]}
    cells = expand(axes, [{"filesystem": "xfs"}], [{"filesystem": "xfs"}, {"filesystem": "ext4"}])
    assert paths(cells) == ["filesystem~ext4", "filesystem~xfs"]


def test_path_round_trips_values_with_slashes():
    (cell,) = expand({"filesystem": ["dir:/mnt/scratch space"]}, [], [])
    assert "/" not in cell.path.partition("~")[2]
    assert parse_path(cell.path) == {"filesystem": "dir:/mnt/scratch space"}


@pytest.mark.parametrize("axes, exclude, include, message", [
    ({"threads": [1, 4, 1]}, [], [], "axes.threads: 1 appears twice"),
    ({"threads": [1]}, [{"thread": 1}], [], "exclude[0].thread: unknown axis"),
    ({"threads": [1]}, [], [{"threads": 1}, {"bogus": 2}], "include[1].bogus: unknown axis"),
])
def test_bad_rules_name_key_and_value(axes, exclude, include, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        expand(axes, exclude, include)
