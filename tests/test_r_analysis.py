"""The R analysis functions' own tests (testthat), run as part of the one test command."""
import subprocess

from conftest import ROOT


def test_testthat_suite_passes():
    done = subprocess.run(
        ["Rscript", "-e", 'testthat::test_dir("tests/testthat", stop_on_failure = TRUE, reporter = "summary")'],
        cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "FAIL" not in done.stdout.split("══ DONE")[-1] or "[ FAIL 0" in done.stdout
