"""The suite's own order of work (conftest): every test file that takes the one test Slurm runs in the
Slurm group, on one worker, so that no worker sits waiting for the other's turn (test_multihost.py, outside
the group, held it for its whole module while test_slurm.py and test_slurm_cluster.py waited 100 s each)."""
import re

from conftest import ROOT, SLURM_USERS


def test_every_file_that_takes_the_test_slurm_is_in_the_slurm_group():
    takers = {path.name for path in (ROOT / "tests").glob("test_*.py")
              if re.search(r"with slurm_turn\(\):", path.read_text())}
    assert "test_slurm.py" in takers  # the pattern still finds the users
    assert takers - SLURM_USERS == set()
