"""bench/monitor_cost.py in its smoke mode: a real InnoDB cell through run.repetition, the CPU each
monitor used read from the kernel, and the server's side of a counter sample."""
import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.workflow


def test_monitor_cost_smoke_reports_every_monitor_and_a_share_of_the_host():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "monitor_cost.py"), "--smoke"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {cells[2]: cells for cells in (re.split(r"\s*\|\s*", line) for line in done.stdout.splitlines())
            if len(cells) > 3 and cells[1] == "innodb"}
    assert set(rows) == {"vmstat", "iostat", "sampler", "follower", "server (counter queries)", "**all**"}
    for name in ("vmstat", "iostat", "sampler", "follower"):  # each measured, none free, none absurd
        assert 0 < float(rows[name][3]) < 1, rows[name]
    total = float(rows["**all**"][6].strip("*%"))
    assert 0 < total < 5
