"""The files a study names (a query's .sql files, a script of one's own, analysis scripts) are relative to
the study file's folder, so a study runs from any working directory (snakemake --directory)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dbsweep.config import load, load_file, read
from dbsweep.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
QUERY = ROOT / "config" / "studies" / "query-timing.yaml"
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def study_copy(folder: Path) -> Path:
    """The query-timing study and its .sql files copied into folder (the study file in a subfolder)."""
    shutil.copytree(QUERY.parent / "query", folder / "query")
    path = folder / "query-timing.yaml"
    shutil.copy(QUERY, path)
    return path


def test_relative_files_are_relative_to_the_study_file(tmp_path, monkeypatch):
    path = study_copy(tmp_path / "mine")
    monkeypatch.chdir(tmp_path)  # not the study's folder
    options = load_file(path).workloads["revenue"]["options"]
    assert options["setup"] == str(tmp_path / "mine" / "query" / "setup.sql")
    assert options["query"] == str(tmp_path / "mine" / "query" / "revenue.sql")


def test_absolute_files_stay_as_they_are(tmp_path):
    config = read(QUERY)
    options = config["workloads"]["revenue"]["options"]
    options |= {"setup": str(QUERY.parent / "query" / "setup.sql"),
                "query": str(QUERY.parent / "query" / "revenue.sql")}
    study = load(config, tmp_path)  # a folder without the files: the absolute paths are found all the same
    assert study.workloads["revenue"]["options"]["setup"] == str(QUERY.parent / "query" / "setup.sql")
    config = read(QUERY)
    config["workloads"]["revenue"]["options"]["query"] = str(QUERY.parent / "query" / "revenue.sql")
    with pytest.raises(ConfigError, match=r"^workloads\.revenue\.options\.setup: 'query/setup.sql': no such file "
                                          rf"\(looked for {tmp_path}/query/setup.sql, relative to the study file\)$"):
        load(config, tmp_path)


@pytest.mark.parametrize("key, change", [
    ("analysis.scripts[0]", lambda c: c.setdefault("analysis", {}).update(scripts=["mine/per_cell.R"])),
    ("workloads.revenue.options.query", lambda c: c["workloads"]["revenue"]["options"].update(query="no.sql")),
])
def test_a_missing_relative_file_names_key_and_value(key, change):
    config = read(QUERY)
    change(config)
    with pytest.raises(ConfigError) as error:
        load(config, QUERY.parent)
    assert str(error.value).startswith(f"{key}: '") and "no such file" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.workflow
def test_dry_run_from_another_directory(tmp_path):
    """A real dry run of the shipped query-timing study, snakemake started in and working in a temp folder."""
    done = subprocess.run([str(SNAKEMAKE), "-n", "-s", str(ROOT / "workflow" / "Snakefile"), "--configfile",
                           str(QUERY), "--directory", str(tmp_path / "w")], cwd=tmp_path, capture_output=True,
                          text=True, env=os.environ | {"LC_ALL": "C.UTF-8"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "prepare" in done.stdout and "This was a dry-run" in done.stdout


@pytest.mark.workflow
def test_dry_run_refuses_a_missing_file_in_one_line(tmp_path):
    path = study_copy(tmp_path / "mine")
    (tmp_path / "mine" / "query" / "setup.sql").unlink()
    done = subprocess.run([str(SNAKEMAKE), "-n", "-s", str(ROOT / "workflow" / "Snakefile"), "--configfile",
                           str(path), "--directory", str(tmp_path / "w")], cwd=tmp_path, capture_output=True,
                          text=True, env=os.environ | {"LC_ALL": "C.UTF-8"})
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-2000:]
    errors = [line for line in out.splitlines() if "config error" in line]
    assert errors == [f"dbsweep: config error: workloads.revenue.options.setup: 'query/setup.sql': no such file "
                      f"(looked for {tmp_path}/mine/query/setup.sql, relative to the study file)"], out[-2000:]
    assert "Traceback" not in out and "Job stats" not in out, out[-2000:]
