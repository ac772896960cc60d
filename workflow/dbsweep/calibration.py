"""An open-loop rate relative to the host's capacity: `rate: 80%` is 80% of the closed-loop throughput a
calibration run measured on this host, so that the same study puts the same load on every host.

A calibration is the cell's workload, server, options, filesystem and dataset, closed loop (no rate), at
as many client threads as the host has CPUs, for CALIBRATION_S seconds after the cell's warm-up, without
timed events. Cells that differ only in their threads, rate or events share one: it is measured once per
host (rule calibrate, resources/calibration/<host>/<tool>-<digest>.json, its raw run beside it) and each
cell's run rule turns the percentage into arrivals per second from it. The run records both (run.json
`calibration`; summary rate_percent, rate_calibrated_tps, rate). To measure it again, remove the file: the
cells that used it run again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import socket
from pathlib import Path

from dbsweep import manifest, workloads
from dbsweep.recipe import Recipe

CALIBRATION_S = 10  # the measured window of a calibration run
FOLDER = "resources/calibration"


def needed(recipe: Recipe) -> bool:
    """The cell's rate is a percentage of a calibration."""
    return workloads.rate_percent(recipe.tool, recipe.options) is not None


def of(recipe: Recipe, cpus: int | None = None) -> Recipe:
    """The calibration run of a cell whose rate is a percentage (the module's docstring). The window is
    the `time` option: every workload that takes a rate (Workload.takes_rate) names its window so."""
    options = {k: v for k, v in recipe.options.items() if k != "rate"} | {"time": CALIBRATION_S}
    return dataclasses.replace(recipe, options=options, threads=cpus or os.cpu_count() or 1, events=None,
                               duration_s=workloads.get(recipe.tool).duration(options))


def host() -> str:
    """This host's name, as a path part."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"


def path(calibration: Recipe, on_host: str | None = None) -> str:
    """Where a calibration's result is: one per host and calibration recipe."""
    digest = hashlib.sha256(json.dumps(calibration.as_dict(), sort_keys=True, default=str).encode()).hexdigest()
    return f"{FOLDER}/{on_host or host()}/{calibration.tool}-{digest[:12]}.json"


def measure(calibration: Recipe, out: Path, image: Path | None, active: Path, log, retry: int = 1) -> dict:
    """Run the calibration (a repetition in out's folder, raw output kept) and write out: its throughput."""
    from dbsweep.run import repetition  # the runtime: not needed to plan

    run_json = out.with_suffix("") / "run.json"
    record = repetition({"calibration": out.stem}, 1, calibration, run_json, image, active, log, retry)
    raw = run_json.parent / record["attempt"] / "raw"
    figure = workloads.get(calibration.tool).rate_figure
    tps = workloads.get(calibration.tool).summary(raw).get(figure)
    if not tps:
        raise RuntimeError(f"calibration {out}: the closed-loop run completed nothing ({figure} {tps!r})")
    result = {"tps": tps, "figure": figure, "threads": calibration.threads, "seconds": calibration.duration_s,
              "host": record["host"]["node"] or record["host"]["hostname"], "measured": record["ended"],
              "run": str(run_json), "recipe": calibration.as_dict()}
    manifest.write_json(out, result)
    return result


def resolve(recipe: Recipe, calibration_file: Path) -> tuple[Recipe, dict]:
    """The cell's recipe with its percentage made arrivals per second (at least 1) from the calibration,
    and what the run records of it."""
    percent = workloads.rate_percent(recipe.tool, recipe.options)
    measured = json.loads(Path(calibration_file).read_text())
    rate = max(1, round(percent / 100 * measured["tps"]))
    record = {"rate_percent": percent, "rate": rate, "tps": measured["tps"], "threads": measured["threads"],
              "measured": measured["measured"], "file": str(calibration_file)}
    return dataclasses.replace(recipe, options=recipe.options | {"rate": rate}), record
