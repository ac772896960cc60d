"""Datasets follow the settings that shape them (issue 32): a cell's value of a dataset-shaping server option
(a character set, a page size, data checksums …) is part of its image key, the server that loads the image
runs with it, and the tables read back from the server's catalog carry it.

The unit tests plan studies (config.load); the workflow tests run the real pipeline on tiny datasets and read
the tables back from each cell's image with the family's dataset_facts.
"""
import copy
import io
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import leftovers
from dbsweep import database, engines, storage
from dbsweep.config import load
from dbsweep.engines import mariadb, postgresql
from dbsweep.errors import ConfigError
from dbsweep.recipe import Recipe

ENGINE = {"mariadb": "innodb", "postgresql": "postgresql"}
# Two values of each dataset-shaping setting, as a study would write them.
TWO_VALUES = {
    "mariadb": {
        "character_set_server": ("latin1", "utf8mb4"),
        "collation_server": ("utf8mb4_general_ci", "utf8mb4_bin"),
        "innodb_page_size": ("8k", "16k"),
        "default_storage_engine": ("InnoDB", "Aria"),
        "lower_case_table_names": (0, 1),
        "innodb_default_row_format": ("dynamic", "compact"),
    },
    "postgresql": {
        "data_checksums": ("on", "off"),
        "wal_segment_size": ("16MB", "64MB"),
        "server_encoding": ("UTF8", "LATIN1"),
        "lc_collate": ("C", "POSIX"),
        "lc_ctype": ("C", "POSIX"),
    },
}


def study(family: str, axis: str, sets: dict, **changes) -> dict:
    """A one-engine sysbench study whose axis `axis` chooses between option sets (value -> options)."""
    config = {
        "study": "dataset",
        "axes": {"engine": [ENGINE[family]], "filesystem": ["ext4"], "threads": [1], "workload": ["oltp"],
                 axis: list(sets)},
        "filesystems": {"ext4": {"type": "ext4", "size": "1G"}},
        "workloads": {"oltp": {"tool": "sysbench", "options": {"script": "oltp_point_select", "tables": 1,
                                                               "table_size": 200, "time": 2}}},
        "server_options": {axis: {value: {family: options} for value, options in sets.items()}},
    }
    return config | changes


def images(config: dict) -> list[str]:
    s = load(copy.deepcopy(config))
    return [s.image(cell) for cell in s.cells]


@pytest.mark.parametrize("family, name", [(f, n) for f, names in TWO_VALUES.items() for n in names])
def test_two_values_of_a_dataset_setting_make_two_images(family, name):
    assert name in engines.family(ENGINE[family]).DATASET_SETTINGS
    first, second = TWO_VALUES[family][name]
    made = images(study(family, "shape", {"a": {name: first}, "b": {name: second}}))
    assert len(made) == 2 and made[0] != made[1]


def test_either_spelling_of_a_mariadb_setting_shapes_the_dataset():
    made = images(study("mariadb", "charset", {"latin1": {"character-set-server": "latin1",
                                                          "collation-server": "latin1_swedish_ci"},
                                               "utf8mb4": {"loose_character_set_server": "utf8mb4"}}))
    assert len(set(made)) == 2


@pytest.mark.parametrize("family, sets", [
    ("mariadb", {"RR": {"transaction-isolation": "REPEATABLE-READ"},
                 "RC": {"transaction-isolation": "READ-COMMITTED"}}),
    ("mariadb", {"small": {"innodb_buffer_pool_size": "64M"}, "big": {"innodb_buffer_pool_size": "128M"}}),
    ("postgresql", {"a": {"random_page_cost": 4}, "b": {"random_page_cost": 1.1}}),
])
def test_an_option_that_does_not_shape_the_dataset_shares_one_image(family, sets):
    made = images(study(family, "knob", sets))
    assert len(made) == 2 and made[0] == made[1]


def test_a_study_without_dataset_settings_keeps_its_image_key():
    """Images prepared before this change are not made again when no option set shapes the dataset: the
    spec holds the study-wide options only, as before."""
    config = study("mariadb", "isolation", {"RR": {}, "RC": {}})
    del config["server_options"]
    config["server"] = {"options": {"mariadb": {"innodb_io_capacity": 500}}}
    s = load(config)
    spec = s.image_spec(s.cells[0])
    assert spec["server_options"] == {"innodb_io_capacity": 500}


def test_the_server_that_loads_an_image_runs_with_the_cells_values(tmp_path):
    """Prepare's recipe (Recipe.preparing of the image spec) writes the cell's character set into the loading
    server's my.cnf, and not an option that does not shape the dataset."""
    config = study("mariadb", "charset", {"latin1": {"character_set_server": "latin1",
                                                     "collation_server": "latin1_swedish_ci",
                                                     "innodb_io_capacity": 500}, "utf8mb4": {}})
    s = load(config)
    latin1 = next(cell for cell in s.cells if cell["charset"] == "latin1")
    spec = s.image_spec(latin1)
    loading = Recipe.preparing(spec)
    text = mariadb.config_text("innodb", None, loading.server_options, tmp_path / "data", tmp_path / "run", 1)
    assert "character_set_server=latin1" in text.splitlines()
    assert "collation_server=latin1_swedish_ci" in text.splitlines()
    assert "character-set-server=utf8mb4" not in text.splitlines()
    assert "innodb_io_capacity=500" not in text.splitlines()


def test_postgresql_initdb_settings_go_to_initdb_not_to_postgresql_conf(tmp_path):
    options = {"data_checksums": True, "wal_segment_size": "64MB", "server_encoding": "LATIN1", "lc_collate": "C",
               "random_page_cost": 1.1}
    assert postgresql.initdb_args(options) == ["--data-checksums", "--wal-segsize=64", "--encoding=LATIN1",
                                               "--lc-collate=C"]
    text = postgresql.config_text("postgresql", None, options, tmp_path / "data", tmp_path / "run", 1)
    assert "random_page_cost = 1.1" in text.splitlines()
    assert not any(line.startswith(tuple(postgresql.INITDB)) for line in text.splitlines())


@pytest.mark.parametrize("family, name, value, message", [
    ("mariadb", "innodb_page_size", "12k", "is not an InnoDB page size"),
    ("mariadb", "innodb-page-size", "8k --init-file=/tmp/x.sql", "is not an InnoDB page size"),
    ("mariadb", "lower_case_table_names", 3, "is not 0, 1 or 2"),
    ("postgresql", "data_checksums", "maybe", "is not on or off"),
    ("postgresql", "wal_segment_size", "48MB", "is not a power of two from 1MB to 1GB"),
    ("postgresql", "wal_segment_size", "2GB", "is not a power of two from 1MB to 1GB"),
    ("postgresql", "lc_collate", "en_US.UTF-8 --auth=trust", "is not a locale or encoding name"),
])
def test_a_bad_value_of_a_dataset_setting_is_refused_at_load(family, name, value, message):
    with pytest.raises(ConfigError) as err:
        load(study(family, "shape", {"a": {name: value}, "b": {}}))
    assert str(err.value).startswith(f"server_options.shape.a.{family}.{name}: {value!r} {message}")
    assert "\n" not in str(err.value)


# --- the real pipeline --------------------------------------------------------------------------------

@pytest.fixture
def workdir():
    """A folder the servers, which run as mysql and postgres, can reach (pytest's are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="dbsweep-test-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    if not leftovers(folder):
        shutil.rmtree(folder, ignore_errors=True)


def measure(run, config: dict) -> None:
    """Each cell's repetition measured (the run rule's run.json), without the analysis and the page after."""
    s = load(copy.deepcopy(config))
    run.run(*(f"results/runs/{cell.path}/rep~1/run.json" for cell in s.cells))


def facts_of_images(run, config: dict) -> dict[str, dict[str, str]]:
    """Each cell's dataset_facts, read from its prepared image by a server started on it."""
    s = load(copy.deepcopy(config))
    out = {}
    for cell in s.cells:
        r = s.recipe(cell)
        with storage.filesystem(r.filesystem, run.path("peek"), run.path("results/.active"),
                                run.path(s.image(cell))) as fs, \
                database.running(r, fs.path, io.StringIO()) as db:
            out[cell.path] = db.family.dataset_facts(db.local)
    return out


@pytest.mark.workflow
def test_a_charset_axis_loads_each_cells_tables_in_its_own_charset(study_factory, workdir):
    """Two cells, latin1 and utf8mb4 on a charset axis: two images in the plan (-n), each loaded by a server
    with its character set, so each cell's table reads back in its own collation (information_schema). The
    latin1 cell's datadir is also made with 8k pages and lower_case_table_names=1 (given to the bootstrap)."""
    config = study("mariadb", "charset", {"latin1": {"character-set-server": "latin1",
                                                     "collation-server": "latin1_swedish_ci",
                                                     "innodb_page_size": "8k", "lower_case_table_names": 1},
                                          "utf8mb4": {"character-set-server": "utf8mb4",
                                                      "collation-server": "utf8mb4_general_ci"}})
    run = study_factory(config)
    assert run.job_counts()["prepare"] == 2
    measure(run, config)
    facts = facts_of_images(run, config)
    by_charset = {path.split("charset~")[1].split("/")[0]: f for path, f in facts.items()}
    assert by_charset["latin1"]["schema.charset"] == "latin1"
    assert by_charset["latin1"]["table.sbtest1.collation"] == "latin1_swedish_ci"
    assert by_charset["utf8mb4"]["schema.charset"] == "utf8mb4"
    assert by_charset["utf8mb4"]["table.sbtest1.collation"] == "utf8mb4_general_ci"
    assert (by_charset["latin1"]["innodb_page_size"], by_charset["utf8mb4"]["innodb_page_size"]) == ("8192", "16384")
    assert (by_charset["latin1"]["lower_case_table_names"], by_charset["utf8mb4"]["lower_case_table_names"]) == \
        ("1", "0")
    for f in by_charset.values():
        assert f["table.sbtest1.engine"] == "InnoDB"
        assert int(f["table.sbtest1.indexes"]) == 2  # the primary key and k_1
        assert 100 <= int(f["table.sbtest1.rows"]) <= 400  # InnoDB's estimate of 200


@pytest.mark.workflow
def test_postgresql_initdb_settings_make_their_own_images(study_factory, workdir):
    """data_checksums on and off, with a 32MB WAL segment and LATIN1 for one: two images, each cluster made by
    initdb with its cell's settings, read back from the catalog."""
    config = study("postgresql", "checksums", {"on": {"data_checksums": "on", "wal_segment_size": "32MB",
                                                      "server_encoding": "LATIN1"},
                                               "off": {"data_checksums": "off", "lc_collate": "C.utf8"}})
    run = study_factory(config)
    assert run.job_counts()["prepare"] == 2
    measure(run, config)
    facts = facts_of_images(run, config)
    by_value = {path.split("checksums~")[1].split("/")[0]: f for path, f in facts.items()}
    assert (by_value["on"]["data_checksums"], by_value["off"]["data_checksums"]) == ("on", "off")
    assert (by_value["on"]["wal_segment_size"], by_value["off"]["wal_segment_size"]) == ("32MB", "16MB")
    assert (by_value["on"]["database.encoding"], by_value["off"]["database.encoding"]) == ("LATIN1", "UTF8")
    assert (by_value["on"]["database.collate"], by_value["off"]["database.collate"]) == ("C", "C.utf8")
    for f in by_value.values():
        assert f["database.ctype"] == "C"
        assert f["table.sbtest1.indexes"] == "2" and 100 <= int(f["table.sbtest1.rows"]) <= 400
