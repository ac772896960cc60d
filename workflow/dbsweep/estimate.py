"""How long the repetitions Snakemake will run (missing, changed or incomplete) will take, printed
when the workflow starts (`snakemake -n` included): each one's configured window (and warm-up) plus a per-repetition
overhead.

The overhead is measured where earlier runs left their run.json: the run step's wall time
(started .. ended) less its measured window and warm-up, i.e. restore, mount, server start and
stop, monitors, teardown; plus JOB_START_S for what run.json cannot see (Snakemake starting the
job). Storage and database repetitions are measured apart (their median). Without earlier runs,
DEFAULT_STEP_S, from BENCHMARKS.md: a tmpfs fio cell costs 1.6 s beyond fio end to end, of which
about 0.6 s inside the run step; a database repetition adds restore + start of about 1.5 s.
"""
from __future__ import annotations

import json
import statistics
from datetime import datetime
from pathlib import Path

from dbsweep.recipe import Recipe

JOB_START_S = 1.0
DEFAULT_STEP_S = {"storage": 0.6, "database": 2.1}
MAX_READ = 200  # earlier run.json files read at most, so planning stays fast on large studies


def step_overhead(record: dict, recipe: Recipe) -> float | None:
    """Seconds of one completed run step beyond its measured window and warm-up."""
    try:
        wall = (datetime.fromisoformat(record["ended"]) - datetime.fromisoformat(record["started"])).total_seconds()
        window = record["measure_end"] - record["measure_start"]
    except (KeyError, TypeError, ValueError):
        return None
    return max(0.0, wall - window - recipe.warmup_s)


def measured(run_jsons: list[Path]) -> dict[str, list[float]]:
    """Step overheads of earlier runs by kind, from at most MAX_READ of their run.json files."""
    out = {"storage": [], "database": []}
    for path in run_jsons[:MAX_READ]:
        try:
            record = json.loads(path.read_text())
            recipe = Recipe.from_dict(record["recipe"])
        except (OSError, ValueError, KeyError, TypeError):  # unreadable, or another version's run.json
            continue
        overhead = step_overhead(record, recipe)
        if overhead is not None and record.get("status") == "ok":
            out[recipe.kind].append(overhead)
    return out


def estimate(missing: list[Recipe], done: list[Path]) -> dict:
    """missing: the recipes of the repetitions to run; done: run.json files of earlier runs."""
    samples = measured(done)
    per_rep = {k: JOB_START_S + (statistics.median(v) if v else DEFAULT_STEP_S[k])
               for k, v in samples.items() if any(r.kind == k for r in missing)}
    window = sum((r.duration_s or 0) + r.warmup_s for r in missing)
    overhead = sum(per_rep[r.kind] for r in missing)
    return {"repetitions": len(missing), "window_s": window, "overhead_s": overhead,
            "total_s": window + overhead, "per_rep_s": per_rep,
            "measured_from": sum(len(samples[k]) for k in per_rep),
            "no_duration": sum(1 for r in missing if r.duration_s is None)}


def per_repetition(missing: list[Recipe], e: dict) -> list[float]:
    """Seconds expected for each missing repetition (in the order of `missing`), from estimate()'s e."""
    return [(r.duration_s or 0) + r.warmup_s + e["per_rep_s"][r.kind] for r in missing]


def describe(e: dict, images: int = 0, again: int = 0) -> str:
    """One line for the terminal. again: how many of the repetitions already have a run.json that
    Snakemake will replace (their recipe or code changed, or their run was incomplete)."""
    if not e["repetitions"]:
        return "dbsweep: no repetition missing"
    kinds = ", ".join(f"{k} {v:.1f} s" for k, v in e["per_rep_s"].items())
    source = f"measured from {e['measured_from']} earlier runs" if e["measured_from"] else "defaults"
    reps = e["repetitions"]
    text = (f"dbsweep: {reps} repetition{'s' if reps > 1 else ''} to run, about {duration(e['total_s'])}: "
            f"{e['window_s']:.0f} s measured windows and warm-ups + {e['overhead_s']:.0f} s overhead "
            f"(per repetition {kinds}; {source})")
    if again:
        text += f"; {again} of them again (changed or incomplete)"
    if e["no_duration"]:
        text += f"; {e['no_duration']} without a configured duration not counted"
    if images:
        text += f"; plus {images} image{'s' if images > 1 else ''} to prepare"
    return text


def duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours} h {m:02d} min" if hours else f"{m} min {s:02d} s" if m else f"{s} s"
