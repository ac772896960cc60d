"""A study's own analysis scripts (analysis.scripts): the contract, and the real workflow running them."""
import json
import shutil

import pytest
from conftest import ROOT, tiny_study
from page_check import check_page

from dbsweep import user_scripts

PYTHON_SCRIPT = '''
import json, sys, pathlib
import pandas as pd
inputs = json.loads(pathlib.Path(sys.argv[1]).read_text())
out = pathlib.Path(sys.argv[2])
samples = pd.read_csv(inputs["tables"]["samples"])
assert set(inputs["columns"]["samples"]) >= {"rep", "second", "iops"} | set(inputs["axes"])
table = samples.groupby(inputs["axes"])["iops"].agg(["min", "max"]).reset_index()
table.to_csv(out / "iops_range.csv", index=False)
print("iops_range:", len(table), "cells")
'''


def test_outputs_are_listed_by_kind(tmp_path):
    for name in ("a.csv", "a.md", "b.png", "sub/c.svg", "notes.json", "inputs.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    listed = user_scripts.write_outputs(tmp_path)
    assert listed == {"tables": ["a.csv", "a.md"], "plots": ["b.png", "sub/c.svg"], "other": ["notes.json"]}
    assert json.loads((tmp_path / "outputs.json").read_text()) == listed


def test_a_failing_script_names_itself_and_its_log(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import sys\nprint('reading tables')\nsys.exit('no column tps')\n")
    table = tmp_path / "summary.csv"
    table.write_text("filesystem,rep,iops\next4,1,100\n")
    with pytest.raises(RuntimeError, match=r"broken.py exited with 1: no column tps \(log: .*broken.log\)"):
        user_scripts.run(script, {"summary": table}, tmp_path / "out", {"study": "s", "axes": ["filesystem"]},
                         tmp_path / "broken.log")
    inputs = json.loads((tmp_path / "out" / "inputs.json").read_text())
    assert inputs["columns"] == {"summary": ["filesystem", "rep", "iops"]} and inputs["axes"] == ["filesystem"]


@pytest.mark.workflow
def test_the_workflow_runs_the_studys_own_scripts(study_factory):
    config = tiny_study()
    # only a user axis: fio's block size, the one axis that varies
    config["axes"] = {"filesystem": ["ext4"], "threads": [1], "workload": ["fio-rr"], "bs": ["4k", "16k"]}
    config["workloads"] = {"fio-rr": config["workloads"]["fio-rr"]}
    config["workloads"]["fio-rr"]["options"]["bs"] = "{bs}"
    study = study_factory(config)
    shutil.copy(ROOT / "config" / "scripts" / "per_thread.R", study.path("per_thread.R"))
    study.path("iops_range.py").write_text(PYTHON_SCRIPT)
    config["analysis"] = {"scripts": ["per_thread.R", str(study.path("iops_range.py"))]}
    study.write(config)
    study.run()

    r_out = study.path("results/user/per_thread")
    assert json.loads((r_out / "outputs.json").read_text()) == {
        "tables": ["per_thread.csv"], "plots": ["per_thread.png"], "other": []}
    assert (r_out / "per_thread.png").read_bytes()[:4] == b"\x89PNG"
    lines = (r_out / "per_thread.csv").read_text().splitlines()
    assert lines[0] == "filesystem,threads,workload,bs,metric,median,per_thread" and len(lines) == 3
    py_out = study.path("results/user/iops_range")
    assert json.loads((py_out / "outputs.json").read_text())["tables"] == ["iops_range.csv"]
    assert "iops_range: 2 cells" in study.path("results/logs/user/iops_range.log").read_text()
    # the page shows what each script wrote, as its outputs.json lists it (config/README.md says so)
    page = study.path("results/index.html").read_text()
    assert '<h2 id="user">Your own analysis</h2>' in page and 'id="user-per_thread"' in page
    assert '<a href="user/per_thread/per_thread.png"><img src="user/per_thread/per_thread.png"' in page
    assert "<th" in page.split('id="user-iops_range"')[1].split("</section>")[0], "its CSV as a table"
    # only a user axis: its page in Chromium answers with that axis against its first value
    check_page(study.path("results/index.html"), r"^Answer bs against 4k \(iops, ratio \[95% CI\], verdict\) "
               r"16k / 4k: [\d.]+ \[[\d.]+, [\d.]+\], (higher|lower|within noise)", "only a user axis")

    # editing a script reruns only that script (and the page)
    study.path("iops_range.py").write_text(PYTHON_SCRIPT + "\n# edited\n")
    counts = study.job_counts()
    assert counts.get("user_script") == 1 and not {"run", "collect", "aggregate", "statistics"} & set(counts)
