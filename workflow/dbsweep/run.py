"""Run one repetition of one cell: filesystem, monitors, the tool, the manifest.

Each attempt writes into its own `attempt~<time>-<host>-<pid>/` folder, which is
never reused, not even by result folders of several hosts copied together. The
repetition's `run.json` appears, by rename, only when the attempt completed, so a
failed or killed run never looks complete, and the raw output of every earlier
attempt stays where it was.

A cell whose own configuration is refused (the server exits before it accepts
connections, the tool exits with an error while its server still runs) leaves
`rejected.json` beside its attempts: a retry of the same job (Snakemake's
--retries, meant for lost nodes and time limits) reads it and stops before
measuring the same refusal again. A server that died while serving (killed, the
OOM killer) is a failure, not a refusal: it is retried.

The repetition runs inside runtime.owned: the host's measuring lock, a cgroup
holding every process it starts, a guardian that releases it if this process
dies; its resources are a runtime.resources.Stack, left in reverse. Each concern
gives its own (Concern.resources: the host's settings, the filesystem), entered
in the stack's order of kinds; a cell that runs a server then starts it and
measures through database_run.py, any other through measure.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

from dbsweep import database, database_run, manifest, storage, workloads
from dbsweep.concern import Repetition
from dbsweep.concerns import CONCERNS
from dbsweep.measure import REJECTED, Rejected, measure
from dbsweep.recipe import Recipe
from dbsweep.runtime import owned
from dbsweep.runtime.resources import KINDS, Stack
from dbsweep.runtime.signals import signals_raise


def repetition(cell: dict, rep: int, recipe: Recipe, out: Path, image: Path | None, active: Path, log,
               retry: int = 1, calibration: dict | None = None) -> dict:
    """Measure one repetition; write out (the repetition's run.json) only on success. `retry` is
    Snakemake's attempt number of the job: above 1, a refusal recorded by an earlier attempt of the
    same recipe is not measured again. `calibration`: how a percentage rate became the recipe's rate
    (calibration.resolve), recorded in run.json."""
    rejected = out.parent / REJECTED
    digest = hashlib.sha256(json.dumps(recipe.as_dict(), sort_keys=True, default=str).encode()).hexdigest()[:16]
    if retry > 1 and rejected.exists():
        earlier = json.loads(rejected.read_text())
        if earlier.get("recipe") == digest:
            raise Rejected(f"not retried: {earlier['attempt']} was refused: {earlier['error']}")
    host = manifest.host()
    if cell.get("host") not in (None, host["hostname"], host["node"]):
        raise RuntimeError(f"cell is for host {cell['host']}; this is {host['node'] or host['hostname']}")
    with signals_raise(), owned(f"run {out.parent}", active, log):
        return _attempt(cell, rep, recipe, out, image, active, log, host, rejected, digest, calibration)


def _attempt(cell: dict, rep: int, recipe: Recipe, out: Path, image: Path | None, active: Path, log, host: dict,
             rejected: Path, digest: str, calibration: dict | None = None) -> dict:
    """One attempt, inside the repetition's cgroup and measuring lock: its resources entered in order
    (filesystem, server, monitors, the tool) and left in reverse."""
    tool = workloads.get(recipe.tool)
    name = re.sub(r"[^A-Za-z0-9.-]", "_", host["node"] or host["hostname"])
    attempt = out.parent.resolve() / f"attempt~{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{name}-{os.getpid()}"
    raw = attempt / "raw"
    raw.mkdir(parents=True)
    scratch = attempt / "scratch"  # the image copy (holding the password) and the mount point
    record = {
        "cell": cell, "rep": rep, "recipe": recipe.as_dict(), "attempt": attempt.name,
        "host": host, "tools": {recipe.tool: tool.version()}, "dbsweep": manifest.dbsweep_version(),
        "started": manifest.now(), "status": "failed", "commands": [],
    } | ({"calibration": calibration} if calibration else {})
    try:
        with storage.scratch_files(scratch, active), Stack(log) as stack:
            fs = enter_resources(stack, Repetition(recipe, scratch, image, active, record, log))
            if image is None:
                record["commands"] += fill(recipe, fs.path, scratch, log)
            if tool.database:
                database_run.measure_database(recipe, fs, image, raw, scratch, record, log, stack)
            else:
                argv = tool.command(recipe.options, recipe.threads, raw)
                measure(recipe, argv, fs.path, fs.devices, raw, record, log)
            tool.summary(raw)  # refuses output without the tool's final report
        record["status"] = "ok"
    except BaseException as e:
        record["error"] = str(e) or type(e).__name__
        if isinstance(e, Rejected):
            record["rejected"] = True
            manifest.write_json(rejected, {"attempt": attempt.name, "recipe": digest, "error": record["error"]})
        raise
    finally:
        record["ended"] = manifest.now()
        record["checksums"] = manifest.checksums(raw)
        manifest.write_json(attempt / "run.json", record)
    manifest.write_json(out, record)
    rejected.unlink(missing_ok=True)
    return record


def enter_resources(stack: Stack, repetition: Repetition):
    """Enter what every concern adds to the repetition (their resources), in the stack's order of
    kinds (the host's settings before the filesystem), and in the concerns' order within a kind; returns the
    filesystem the cell runs on."""
    given = [resource for part in CONCERNS for resource in part.resources(repetition)]
    for kind, name, resource in sorted(given, key=lambda r: KINDS.index(r[0])):
        stack.enter(kind, name, resource)
    return stack.of("filesystem")[0]


def fill(recipe: Recipe, root: Path, scratch: Path, log) -> list[list[str]]:
    """Put a dataset on a fresh filesystem at root: the tool's files, or a server datadir with the
    data loaded (a cell's recipe, or an image's: Recipe.preparing)."""
    if recipe.database:
        return database.load(recipe, root, log)
    commands = workloads.get(recipe.tool).prepare(recipe.dataset)
    for argv in commands:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        subprocess.run(argv, cwd=root, stdout=log, stderr=subprocess.STDOUT, check=True)
    return commands


