"""A topology placed on several hosts (issue 34), on the namespace Slurm cluster (tests/slurm/cluster.sh):
each node a host of its own (network, UTS and mount namespaces), Slurm's commands on ctl."""
import copy
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, Study, slurm_turn
from test_multihost_placement import STUDY

pytestmark = pytest.mark.workflow
CLUSTER = ROOT / "tests/slurm/cluster.sh"
SLURM_PROFILE = ("--workflow-profile", str(ROOT / "workflow/profiles/slurm"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three Slurm nodes c1..c3, for this module's tests; removed after them."""
    folder = tmp_path_factory.mktemp("cluster") / "cluster"
    env = os.environ | {"CLUSTER_DIR": str(folder)}
    with slurm_turn():
        try:
            up = subprocess.run([CLUSTER, "up", "3"], capture_output=True, text=True, timeout=120, env=env)
            assert up.returncode == 0, f"cluster.sh up 3 failed: {up.stderr[-3000:]}"
            yield env
        finally:
            down = subprocess.run([CLUSTER, "down"], capture_output=True, text=True, timeout=120, env=env)
            assert down.returncode == 0, down.stderr


def on_ctl(env: dict, argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """argv on the cluster's login node (ctl), where Slurm's commands reach its controller."""
    return subprocess.run([CLUSTER, "exec", "ctl", *argv], capture_output=True, text=True, timeout=timeout,
                          env=env | {"LC_ALL": "C.UTF-8"})


def placed(hosts: dict) -> dict:
    config = copy.deepcopy(STUDY)
    config["topologies"]["semisync"]["hosts"] = hosts
    return config


def test_a_placement_slurm_cannot_give_is_refused_in_slurms_words_before_any_job(cluster, tmp_path):
    study = Study(tmp_path / "unknown", placed({"client": "c1", "primary": "c2", "replica1": "c9"}))
    dry = on_ctl(cluster, study.argv("-n", *SLURM_PROFILE))
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert ("dbsweep: placement: topology semisync: client on c1, primary on c2, replica1 on c9 "
            "(one Slurm job: --nodes=3 --nodelist=c1,c2,c9)") in dry.stderr
    done = on_ctl(cluster, study.argv(*SLURM_PROFILE))
    assert done.returncode != 0
    refusal = [line for line in done.stderr.splitlines() if line.startswith("dbsweep: topologies.")]
    assert refusal == ["dbsweep: topologies.semisync.hosts: {'client': 'c1', 'primary': 'c2', 'replica1': 'c9'}: "
                       "Slurm cannot place it: allocation failure: Invalid node name specified"]
    assert "Traceback" not in done.stderr
    assert not Path(study.path("results/logs/slurm")).exists()  # no job was submitted
    assert on_ctl(cluster, ["squeue", "-h"]).stdout.strip() == ""
