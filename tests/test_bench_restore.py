"""bench/restore.py in its smoke mode: a tiny InnoDB image made (reload), copied with cp and restored by
storage.filesystem, both timed, and the server started on the restored datadir."""
import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.workflow


def test_restore_smoke_compares_restore_with_the_copy_and_the_reload():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "restore.py"), "--smoke"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [re.split(r"\s*\|\s*", line) for line in done.stdout.splitlines() if line.startswith("| smoke:")]
    copy, reload = rows
    assert float(copy[2]) > 0  # allocated MiB of the image
    assert float(copy[5].strip("*")) > 0  # restore / (copy + sync)
    reload_s, restore_s = float(reload[2]), float(reload[3])
    assert reload_s > restore_s > 0 and reload[5].strip("*").endswith("x")
