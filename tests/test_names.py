"""No name from a study escapes results/ or resources/: every name that becomes part of a path is refused
before any job unless it is one safe path segment (dbsweep/names.py)."""
import copy
import uuid
from pathlib import Path

import pytest

from conftest import tiny_study
from dbsweep.config import load
from dbsweep.errors import ConfigError
from dbsweep.names import check_name

BAD = "../../../../tmp/x"


def _axis(c, name):
    c["axes"][name] = [1]


def _filesystem(c, name):
    c["filesystems"][name] = {"type": "ext4", "size": "256M"}
    c["axes"]["filesystem"] = [name]


def _workload(c, name):
    c["workloads"][name] = c["workloads"].pop("fio-rr")
    c["axes"]["workload"] = [name]


def _option_set_axis(c, name):
    c["server_options"] = {name: {"a": {"mariadb": {}}}}


def _option_set_value(c, name):
    c["server_options"] = {"log": {name: {"mariadb": {}}}}


def _study(c, name):
    c["study"] = name


def _version_name(c, name):
    c["axes"]["version"] = [{"name": name, "basedir": "/tmp"}]


def _host(c, name):
    c["axes"]["host"] = [name]


# key where the name goes -> how to put it there
PLACES = {"study": _study, "axes": _axis, "filesystems": _filesystem, "workloads": _workload,
          "server_options": _option_set_axis, "server_options.log": _option_set_value,
          "axes.version[0].name": _version_name, "axes.host[0]": _host}


def bad_config(place: str, name: str) -> dict:
    config = copy.deepcopy(tiny_study())
    PLACES[place](config, name)
    return config


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", [BAD, "..", "a/b", "-x", "a b", "a/../../b"])
def test_a_name_that_is_not_one_path_segment_is_refused(place, name):
    with pytest.raises(ConfigError) as error:
        load(bad_config(place, name))
    message = str(error.value)
    assert message.startswith(f"{place}: {name!r}"), message
    assert repr(name) in message and "\n" not in message


@pytest.mark.parametrize("name", ["ext4-big", "oltp_rw", "v10.11", "a.b", "16+x", "1"])
def test_safe_names_pass(name):
    assert check_name("axes", name) == name


@pytest.mark.workflow
@pytest.mark.parametrize("place", ["axes", "filesystems", "workloads"])
def test_a_run_with_a_climbing_name_writes_nothing_anywhere(study_factory, place):
    """The reproduced escapes: an axis name wrote /tmp/tmp/x~1/rep~1/run.json and a filesystem name an image
    outside resources/, as root. A real run (not a dry run) must stop at load and write nothing."""
    target = Path("/tmp") / f"dbsweep-escape-{uuid.uuid4().hex[:8]}"
    name = "../" * 12 + str(target).lstrip("/")
    study = study_factory(bad_config(place, name))
    done = study.run(check=False)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "config error" in line]
    assert len(lines) == 1 and f"{place}: {name!r}" in lines[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert not target.exists() and not Path("/tmp/tmp").joinpath(target.name).exists()
    assert not study.path("results", "runs").exists() and not study.path("resources").exists()
