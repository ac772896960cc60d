"""Config validation: every error is one line naming the key and the value."""
import copy
from pathlib import Path

import pytest

from dbsweep.config import load, load_file, read
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
    study = load_file(ROOT / "config" / "studies" / path)
    assert study.cells


@pytest.mark.parametrize("quick", sorted(p.name for p in (ROOT / "config" / "studies" / "quick").glob("*.yaml")))
def test_quick_variants_shorten_every_study_of_their_workload(quick):
    """A quick overlay (the second --configfile, merged by Snakemake's own update_config) must name a workload
    the studies declare, or it would add a workload without a tool; each study of it keeps its matrix and
    gets the quick window and warm-up."""
    from snakemake.utils import update_config
    overlay = read(ROOT / "config" / "studies" / "quick" / quick)
    (name, shortened), = overlay["workloads"].items()
    studies = [p for p in sorted((ROOT / "config" / "studies").glob("*.yaml")) if name in read(p)["workloads"]]
    assert studies, f"no shipped study has a workload {name!r}"
    for path in studies:
        config = read(path)
        full = load(config, path.parent)
        update_config(config, copy.deepcopy(overlay))
        study = load(config, path.parent)
        assert study.cells == full.cells
        cells = [c for c in study.cells if c["workload"] == name]
        assert {(study.recipe(c).duration_s, study.recipe(c).warmup_s) for c in cells} == {
            (shortened["options"]["time"], shortened["warmup"])}
        assert all(study.recipe(c).dataset == full.recipe(c).dataset for c in cells), "the same images"


def test_demo_study_expands_to_its_matrix():
    study = load(DEMO)
    assert study.axes == ["engine", "memory", "filesystem", "threads", "workload"]
    storage = [c for c in study.cells if "engine" not in c.as_dict()]
    databases = [c for c in study.cells if "engine" in c.as_dict()]
    assert len(storage) == 8, "engine and memory do not multiply storage cells"
    assert len(databases) == 6 and {c["threads"] for c in databases} == {4}
    recipe = study.recipe(storage[0])
    assert recipe.threads == 1 and recipe.tool == "fio" and recipe.duration_s == 5
    assert storage[0].path == "filesystem~ext4/threads~1/workload~fio-randread"
    db = study.recipe(databases[0])
    assert (db.engine, db.memory, db.warmup_s) == ("innodb", "16M", 2)
    assert databases[0].path == "engine~innodb/memory~16M/filesystem~xfs/threads~4/workload~oltp-rw"


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
    ("cluster.partition", "bench; rm", r"cluster.partition: 'bench; rm' does not match"),
    ("cluster.nodes", ["n1"], "cluster.nodes: unknown key"),
    ("axes.host", ["db1", "-x"], r"axes.host\[1\]: '-x' does not match"),
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
    bs = {study.recipe(c).options["bs"] for c in study.cells if c["workload"] == "fio-randread"}
    assert bs == {"4k", "16k"}
    assert study.cells[0].path.endswith("/bs~4k")


def test_axis_values_keep_the_declared_order_for_tables_and_plots():
    config = with_change("axes.bs", ["64k", "4k", "16k"])  # not sorted: as the user wrote them
    config["workloads"]["fio-randread"]["options"]["bs"] = "{bs}"
    values = load(config).axis_values
    assert values["bs"] == ["64k", "4k", "16k"]
    assert values["threads"] == [str(t) for t in config["axes"]["threads"]]


def test_image_is_shared_across_threads_and_changes_with_the_dataset():
    study = load(DEMO)
    by_fs = {}
    for cell in study.cells:
        by_fs.setdefault((cell["filesystem"], cell["workload"], cell.get("engine")), set()).add(study.image(cell))
    assert all(len(images) == 1 for images in by_fs.values()), "threads and memory share an image"
    assert len({i for images in by_fs.values() for i in images}) == 4 + 3
    bigger = with_change("workloads.fio-randread.options.size", "512M")
    assert load(bigger).image(load(bigger).cells[0]) != study.image(study.cells[0])
    faster = with_change("workloads.fio-randread.options.runtime", 9)
    assert load(faster).image(load(faster).cells[0]) == study.image(study.cells[0])


@pytest.mark.parametrize("path, value, message", [
    ("axes.engine", ["innodb", "oracle"], r"axes.engine\[1\]: 'oracle' is not one of innodb, myrocks, postgresql"),
    ("axes.memory", ["5GG"], "axes.memory: '5GG' is not a size"),
    ("axes.binlog", ["sync7"], "axes.binlog: 'sync7' is not an option set"),
    ("axes.durability", ["tuned"], r"server_options.durability.tuned: nothing for mariadb \(cell engine~innodb/"),
    ("server.cgroup_overhead", "lots", "server.cgroup_overhead: 'lots' is not a size"),
    ("baseline.engine", "mysql",
     r"baseline.engine: 'mysql' is not a value of the axis engine \(innodb, myrocks, postgresql\)"),
    ("analysis.stall_share", 1.5, "analysis.stall_share: 1.5 "),
    ("analysis.trim_s", -3, "analysis.trim_s: -3 is below the minimum of 0"),
    ("analysis.plots", ["pie"], r"analysis.plots\[0\]: 'pie' is not one of timeseries_steady"),
    ("analysis.headline", ["violin", "pie"], r"analysis.headline\[1\]: 'pie' is not one of timeseries_steady, "),
    ("analysis.statistics", ["mode"], r"analysis.statistics\[0\]: 'mode' is not one of median, mean, sd, p5"),
    ("analysis.statistics", [], r"analysis.statistics: \[\] "),
    ("analysis.scripts", ["config/README.md"],
     r"analysis.scripts\[0\]: '/.*/config/README.md' is neither an R \(.R\) nor "),
    ("analysis.scripts", ["nosuch/mine.R"],
     r"analysis.scripts\[0\]: 'nosuch/mine.R': no such file "
     r"\(looked for /.*/nosuch/mine.R, relative to the study file\)$"),
    ("analysis.scripts", ["config/scripts/per_thread.R", "workflow/R/../../config/scripts/per_thread.R"],
     r"analysis.scripts\[1\]: .* has the same name as '/.*/config/scripts/per_thread.R'"),
])
def test_bad_database_config_names_key_and_value(path, value, message):
    with pytest.raises(ConfigError, match=message):
        load(with_change(path, value))


def test_baseline_off_means_the_word_and_analysis_has_defaults():
    config = with_change("axes.binlog", ["sync1", "off"])
    config["axes"]["engine"] = ["innodb"]
    config["baseline"] = {"binlog": False}  # YAML's bare off
    study = load(config)
    assert study.baseline == {"binlog": "off"}
    assert study.analysis["stall_share"] == 0.5 and study.analysis["steady_state"] is True
    assert "ratio_heatmap" in study.analysis["plots"]
    config["analysis"] = {"trim_s": 30, "plots": ["violin"]}
    config["analysis"]["headline"] = ["tps_vs_memory", "violin"]
    # headline shapes only the summary page: not in the analysis rules' params (changing it reruns nothing)
    assert load(config).headline == ["tps_vs_memory", "violin"] and "headline" not in load(config).analysis
    assert load(config).analysis == {"trim_s": 30, "steady_state": True, "stall_share": 0.5, "plots": ["violin"],
                                     "statistics": ["median", "mean", "sd", "p95", "max"], "include_deviated": False,
                                     "scripts": []}
    config["analysis"] = {"statistics": ["mean", "sd", "p95", "max"], "scripts": ["config/scripts/per_thread.R"]}
    assert load(config).analysis["statistics"] == ["mean", "sd", "p95", "max"]
    assert load(config).analysis["scripts"] == [str(ROOT / "config/scripts/per_thread.R")]  # relative to the folder


def test_a_database_workload_needs_an_engine():
    config = with_change("axes.workload", ["oltp-rw"])
    del config["axes"]["engine"]
    with pytest.raises(ConfigError, match="axes.engine: missing, and workload 'oltp-rw' needs a database server"):
        load(config)


def test_option_sets_build_the_server_options():
    config = with_change("axes.binlog", ["sync1", "off"])
    config["axes"]["engine"] = ["innodb"]
    config["server_options"] = {"binlog": {"sync1": {"mariadb": {"sync_binlog": 7}}}}
    config["server"] = {"options": {"mariadb": {"innodb_flush_method": "O_DIRECT"}}, "cgroup_overhead": "256M"}
    study = load(config)
    db = [study.recipe(c) for c in study.cells if "engine" in c.as_dict()]
    sync1 = next(r for r in db if r.server_options.get("sync_binlog") == 7)
    assert sync1.server_options["innodb_flush_method"] == "O_DIRECT"
    assert sync1.memory_limit == (16 + 256) << 20 or sync1.memory_limit == (256 + 256) << 20
    assert {study.image(c) for c in study.cells if "engine" in c.as_dict()} == \
        {study.image(next(c for c in study.cells if "engine" in c.as_dict()))}, "option sets do not re-prepare"


def test_bare_yaml_off_on_an_option_set_axis_means_the_word():
    import yaml
    config = yaml.safe_load("""
study: t
axes: {engine: [innodb], binlog: [off, sync1], wal: [on], workload: [w]}
server_options: {wal: {on: {mariadb: {}}}}
workloads: {w: {tool: sysbench, options: {script: oltp_read_write}}}
""")
    study = load(config)
    assert [c.path.rsplit("/", 2)[-2] for c in study.cells] == ["binlog~off", "binlog~sync1"]
    assert all(c["wal"] == "on" for c in study.cells)


def test_unknown_version_names_the_available_ones():
    config = with_change("axes.version", ["debian", "9.6"])
    with pytest.raises(ConfigError, match=r"axes.version: '9.6' is not a version dbsweep knows; available: "
                                          r"mariadb debian, 10.11, .*; postgresql debian, 15, .*16"):
        load(config)


def test_a_basedir_without_a_server_binary_is_refused(tmp_path):
    (tmp_path / "bin").mkdir()
    config = with_change("axes.version", [{"name": "mine", "basedir": str(tmp_path)}])
    with pytest.raises(ConfigError, match=rf"axes.version\[0\].basedir: '{tmp_path}'.*no server binary"):
        load(config)


def test_a_basedir_of_a_family_no_engine_runs_is_refused(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "postgres").write_text("")
    (tmp_path / "bin" / "postgres").chmod(0o755)
    config = with_change("axes.version", [{"name": "pg-own", "basedir": str(tmp_path)}])
    config["axes"]["engine"] = ["innodb"]
    with pytest.raises(ConfigError,
                       match="axes.version: 'pg-own' is a postgresql build, and no engine of the study runs it"):
        load(config)


def test_myrocks_on_a_registry_build_is_not_applicable_and_reported():
    config = with_change("axes.version", ["debian", "10.11.5"])
    config["axes"]["engine"] = ["innodb", "myrocks"]
    study = load(config)
    versions = {(c.get("engine"), c.get("version")) for c in study.cells if c.get("engine")}
    assert versions == {("innodb", "debian"), ("innodb", "10.11.5"), ("myrocks", "debian")}
    assert all("MyRocks ships only with Debian" in why for path, why in study.not_applicable)
    assert {path.split("/")[0:2] == ["engine~myrocks", "version~10.11.5"] for path, _ in study.not_applicable} == {True}


def test_two_names_of_one_build_are_refused():
    with pytest.raises(ConfigError, match="axes.version: 'debian' and '15' are the same postgresql build; keep one"):
        load(with_change("axes.version", ["debian", "15"]))


@pytest.mark.parametrize("workload, value", [("oltp-rw", 0), ("oltp-rw", -5), ("oltp-rw", 2.5), ("oltp-rw", "fast"),
                                             ("oltp-rw", True), ("fileio-rndrd", 0), ("fileio-rndrd", "-1")])
def test_a_rate_must_be_a_positive_whole_number(workload, value):
    # sysbench reads --rate=0 as "no limit": it would silently measure a closed loop
    with pytest.raises(ConfigError) as err:
        load(with_change(f"workloads.{workload}.options.rate", value))
    assert str(err.value) == (f"workloads.{workload}.options.rate: {value!r} is not a positive whole number "
                              "of arrivals per second (or a percentage of the calibrated capacity, e.g. 80%)")


def test_a_rate_from_an_axis_is_checked_per_cell():
    config = with_change("workloads.oltp-rw.options.rate", "{arrivals}")
    config["axes"]["arrivals"] = [500, 0]
    with pytest.raises(ConfigError, match=r"^workloads.oltp-rw.options.rate: '0' is not a positive whole number"):
        load(config)
    config["axes"]["arrivals"] = [500, 2000]
    study = load(config)
    assert {r.options["rate"] for r in map(study.recipe, study.cells) if r.tool == "sysbench"} == {"500", "2000"}


def test_fio_rate_is_fios_own_bandwidth_limit():
    assert load(with_change("workloads.fio-randread.options.rate", "10m")).cells


def test_interleaved_repetitions_by_default():
    study = load(with_change("repetitions", 3))
    assert study.interleave is True
    # preparing (as repetition 0) first, then repetition 1 of every cell, then 2, then 3
    assert [study.priority(rep) for rep in (0, 1, 2, 3)] == [4, 3, 2, 1]
    off = load(with_change("interleave", False))
    assert off.interleave is False and {off.priority(rep) for rep in (0, 1, 2)} == {0}
    with pytest.raises(ConfigError, match="^interleave: 'no' is not of type boolean$"):
        load(with_change("interleave", "no"))


def test_repeat_until_orders_every_round_it_may_add():
    study = load(with_change("repetitions", 2) | {"repeat_until": {"detectable_pct": 5, "max_repetitions": 4}})
    assert study.repeat_until == {"detectable_pct": 5, "max_repetitions": 4}
    assert study.repetitions == 2 and study.most_repetitions == 4
    # repetition 3 and 4, which rounds may add, still come after every cell's repetition 2
    assert [study.priority(rep) for rep in (0, 1, 2, 3, 4)] == [5, 4, 3, 2, 1]


def test_a_host_axis_comes_first_and_makes_cells_per_node():
    config = with_change("axes.host", ["db1", "db2"])
    config["cluster"] = {"partition": "bench"}
    study = load(config)
    assert study.axes[0] == "host" and study.cluster == {"partition": "bench"}
    assert {c["host"] for c in study.cells} == {"db1", "db2"}
    assert all(c.path.startswith(f"host~{c['host']}/") for c in study.cells)


def test_read_refuses_a_key_given_twice(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("study: a\naxes: {workload: [w]}\nstudy: b\n")
    with pytest.raises(ConfigError, match=rf"^{path}:3: duplicate key 'study' \(first at line 1\)"):
        read(path)


def test_a_message_names_a_huge_value_in_a_few_words():
    """A message shows a value through a bounded repr (errors.shown): a list of 50,000 words is named, not
    printed (a YAML alias bomb took 99 s and a MemoryError to print one)."""
    config = with_change("axes.events", ["none", "e"])
    config["events"] = {"e": [{"at": 1, "action": "command", "argv": [["x"] * 50_000]}]}
    with pytest.raises(ConfigError) as error:
        load(config)
    assert str(error.value).startswith("events.e[0].argv: [['x', 'x', 'x', 'x', 'x', 'x', ...]] is not a list of")
    assert len(str(error.value)) < 200


def test_an_option_set_keyed_by_a_bare_number_is_the_axis_value():
    """server_options.<axis>.<value> with YAML's integer keys (1:) chooses the cells whose value is 1 (audit case
    110, a TypeError before)."""
    import yaml
    config = yaml.safe_load("""
study: t
axes: {engine: [innodb], bufs: [1, 2], workload: [w]}
server_options: {bufs: {1: {mariadb: {innodb_io_capacity: 100}}, 2: {mariadb: {innodb_io_capacity: 200}}}}
workloads: {w: {tool: sysbench, options: {script: oltp_read_write}}}
""")
    study = load(config)
    assert {c["bufs"]: study.recipe(c).server_options["innodb_io_capacity"] for c in study.cells} == {1: 100, 2: 200}
    config = yaml.safe_load("""
study: t
axes: {engine: [innodb], bufs: [1], workload: [w]}
server_options: {bufs: {1: {mariadb: {}}, "1": {mariadb: {}}}}
workloads: {w: {tool: sysbench, options: {script: oltp_read_write}}}
""")
    with pytest.raises(ConfigError, match=r"^server_options.bufs.1: '1' names the value '1' again$"):
        load(config)


def test_line_breaks_only_in_a_description_and_an_sql_statement():
    config = with_change("description", "Random reads\non two filesystems.\n")
    config["axes"]["events"] = ["none", "ddl"]
    config["events"] = {"ddl": [{"at": 1, "action": "sql", "statement": "ALTER TABLE sbtest1\n  FORCE"}]}
    assert load(config).cells
    config["workloads"]["oltp-rw"]["options"]["script"] = "oltp_read_write\nx"
    with pytest.raises(ConfigError, match=r"^workloads.oltp-rw.options.script: 'oltp_read_write\\nx' holds a line"):
        load(config)


def test_a_placeholder_is_replaced_by_the_value_as_written():
    config = with_change("workloads.fio-randread.options.bs", "{threads}k")
    config["workloads"]["fio-randread"]["options"]["runtime"] = "{window}"
    config["axes"]["window"] = [3, "4s"]
    study = load(config)
    fio = [study.recipe(c) for c in study.cells if c["workload"] == "fio-randread"]
    assert {(r.options["bs"], r.options["runtime"], r.duration_s) for r in fio} == {
        (f"{t}k", str(w), int(str(w).rstrip("s"))) for t in (1, 4) for w in (3, "4s")}


def test_fio_without_runtime_runs_until_its_size_is_done():
    config = with_change("workloads.fio-randread.options", {"rw": "randread", "bs": "16k", "size": "64M"})
    study = load(config)
    assert {study.recipe(c).duration_s for c in study.cells if c["workload"] == "fio-randread"} == {None}


def test_a_bare_off_in_include_and_exclude_means_the_word_on_an_option_set_axis():
    config = with_change("axes.binlog", ["sync1"])
    config["axes"]["engine"] = ["innodb"]
    config["include"] = [{"binlog": False, "workload": "oltp-rw", "threads": 4, "filesystem": "xfs"}]
    study = load(config)
    assert {c["binlog"] for c in study.cells if c.get("engine")} == {"sync1", "off"}
    assert {study.recipe(c).server_options.get("skip-log-bin") for c in study.cells if c.get("binlog") == "off"} == {
        True}
    config["exclude"].append({"binlog": [False]})
    config["include"] = []
    config["axes"]["binlog"] = ["sync1", "off"]
    assert {c["binlog"] for c in load(config).cells if c.get("engine")} == {"sync1"}


def test_reserved_axis_names_hold_every_column_read_R_refuses():
    """workflow/R/read.R stops an analysis whose axis is named like a column of its tables; load refuses those
    names first (matrix.RESERVED_AXES), so the two lists must agree."""
    import re
    from dbsweep.matrix import RESERVED_AXES
    text = (ROOT / "workflow" / "R" / "read.R").read_text()
    refused = re.search(r"intersect\(axes, c\(([^)]*)\)\)", text)[1].replace(" ", "").split(",")
    columns = set()
    for name in refused:
        columns |= set(re.findall(r'"([^"]+)"', re.search(rf"^{name} <- c\(([^)]*)\)", text, re.M)[1]))
    assert len(columns) > 30 and columns <= RESERVED_AXES, sorted(columns - RESERVED_AXES)


def test_the_cell_cap_allows_a_study_of_10000_cells():
    """bench/planning.py plans 10,000 cells (BENCHMARKS.md): the caps leave room for it and more."""
    config = {"study": "plan", "axes": {"threads": list(range(1, 11)), "user": [f"u{i:05d}" for i in range(1000)],
                                        "workload": ["w"]},
              "workloads": {"w": {"tool": "fio", "options": {"rw": "randread", "bs": "4k", "size": "64M",
                                                             "runtime": 5}}}}
    assert len(load(config).cells) == 10_000
    config["repetitions"] = 10
    assert load(config).repetitions == 10
    config["repetitions"] = 11
    with pytest.raises(ConfigError, match=r"^repetitions: 11 x 10,000 cells is 110,000 runs; a study has at most"):
        load(config)
