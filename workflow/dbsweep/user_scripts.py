"""A study's own analysis scripts (analysis.scripts): run one with the long tables, list what it wrote.

Contract (config/README.md, "Your own analysis"): the script runs as `Rscript SCRIPT INPUTS OUT` or
`python SCRIPT INPUTS OUT`, in the working directory of the study. INPUTS is a JSON file: the study's
name, axes and baseline, `tables` (name -> path of each long table and statistics table) and `columns`
(name -> the columns that table has). OUT is the script's own folder, results/user/<stem>/: it writes its
tables (.csv, .md) and plots (.png, .svg, .pdf) there. Its stdout and stderr go to the rule's log. Then
OUT/outputs.json lists what it wrote, for the summary page and the report.
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

TABLE_SUFFIXES = (".csv", ".md", ".tsv", ".txt", ".html")
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg")
INPUTS = "inputs.json"
OUTPUTS = "outputs.json"


def command(script: Path, inputs: Path, out: Path) -> list[str]:
    """The argument list that runs the script: Rscript for .R, this Python for .py."""
    runner = {".R": ["Rscript", "--vanilla"], ".py": [sys.executable]}[script.suffix]
    return [*runner, str(script), str(inputs), str(out)]


def columns(path: Path) -> list[str]:
    """The header of a CSV table (gzipped or not); [] for an empty file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        header = f.readline().strip()
    return header.split(",") if header else []


def run(script: Path, tables: dict[str, Path], out: Path, study: dict, log: Path) -> dict:
    """Runs the script into `out` (made empty first, so nothing stale is listed) and writes
    out/outputs.json. Raises RuntimeError naming the script and its log when it fails."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if old.is_file():
            old.unlink()
    inputs = out / INPUTS
    inputs.write_text(json.dumps({
        **study,
        "tables": {name: str(path) for name, path in tables.items()},
        "columns": {name: columns(path) for name, path in tables.items() if path.suffix in (".csv", ".gz")},
    }, indent=2))
    with open(log, "w") as f:
        done = subprocess.run(command(script, inputs, out), stdout=f, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"analysis script {script} exited with {done.returncode}: {tail[0]} (log: {log})")
    return write_outputs(out)


def write_outputs(out: Path) -> dict:
    """OUT/outputs.json: {"tables": [...], "plots": [...], "other": [...]}, names relative to OUT."""
    listed = {"tables": [], "plots": [], "other": []}
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.name not in (INPUTS, OUTPUTS)):
        kind = "plots" if path.suffix in PLOT_SUFFIXES else "tables" if path.suffix in TABLE_SUFFIXES else "other"
        listed[kind].append(str(path.relative_to(out)))
    (out / OUTPUTS).write_text(json.dumps(listed, indent=2) + "\n")
    return listed
