"""The concerns, in the order their parts run at each step of the study's load (concern.py), and in which
they give a repetition's resources within one kind; the study's own parts (a workload's not-applicable rule,
the server options a cell chooses) at their places among them. config.py composes them at load, run.py at
run time: both below no other module of the package that needs them.
"""
from __future__ import annotations

from dbsweep import devices, events, filesystems, noise, option_sets, rounds, server_memory, versions
from dbsweep.topology import settings as topology
from dbsweep.workloads import study as workload_study

CONCERNS = (
    filesystems.CONCERN,
    devices.CONCERN,
    rounds.CONCERN,
    versions.CONCERN,
    workload_study.CONCERN,
    option_sets.CONCERN,
    topology.CONCERN,
    events.CONCERN,
    server_memory.CONCERN,
    noise.CONCERN,
)
