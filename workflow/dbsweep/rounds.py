"""Repetitions until the study can tell a difference from noise (the study's `repeat_until`).

A round is repetition k of every cell. After the study's `repetitions` rounds, the checkpoint round_noise
(workflow/R/statistics_tables.R, round_noise()) writes results/rounds/round~k.csv: per throughput metric
the run-to-run noise pooled over the study and the smallest difference a comparison of two cells with k
repetitions tells from noise, the half-width of the statistics rule's CIs. The study runs another round
while that difference is above `detectable_pct` for any metric, up to `max_repetitions`.

Stopping when the noise looks small enough makes the last round's noise a little optimistic (a round
that happened to agree ends the study): in simulated studies of identical cells at 5% noise, 6.7% of
comparisons came out different instead of 5.4% for fixed repetitions of the same number
(bench/repeat_until.py, BENCHMARKS.md). The statistics rule computes its CIs from every repetition run,
as for any study, and the summary page states each round's figure.
"""
from __future__ import annotations

import csv
from pathlib import Path

from dbsweep import matrix, noise
from dbsweep.concern import Concern, Draft
from dbsweep.errors import ConfigError

ROOT = Path("results/rounds")


def verdict_path(round_: int) -> Path:
    return ROOT / f"round~{round_}.csv"


def detectable(path: Path) -> float | None:
    """The largest smallest-detectable difference (%) over the round's throughput metrics; None when no
    metric has one (no per-second throughput, or no cell with 2 repetitions)."""
    with open(path, newline="") as f:
        values = [float(row["detectable_pct"]) for row in csv.DictReader(f) if row["detectable_pct"] not in ("", "NA")]
    return max(values) if values else None


def another(path: Path, target_pct: float) -> bool:
    """Whether the round ending in path leaves the study short of its target (None: nothing to judge by,
    so no more rounds)."""
    found = detectable(path)
    return found is not None and found > target_pct


def repetitions(first: int, spec: dict | None, verdict) -> int:
    """Repetitions per cell: `first`, then one more for each round whose verdict (verdict(k): the path of
    round k's, or None when it is not there yet) leaves the study short of spec's detectable_pct, up to its
    max_repetitions."""
    n = first
    while spec and n < spec["max_repetitions"]:
        path = verdict(n)
        if path is None or not another(Path(path), spec["detectable_pct"]):
            break
        n += 1
    return n


def text(paths: list[Path], spec: dict) -> str:
    """The summary page's line: each round's figure and whether the target was met."""
    figures = [(int(Path(p).stem.split("~")[1]), detectable(Path(p))) for p in paths if Path(p).exists()]
    target, most = spec["detectable_pct"], spec["max_repetitions"]
    head = (f"Repetitions until a difference of {target:g}% could be told from noise "
            f"(at most {most} per cell)")
    if not figures:
        return head + ": no round judged yet."
    shown = ", ".join(f"±{_pct(d)} after {k}" if d is not None else f"not measurable after {k}"
                      for k, d in figures)
    last = figures[-1][1]
    if last is None:
        outcome = "no per-second throughput to judge by, so no more rounds"
    elif last <= target:
        outcome = ("met (stopping once a round meets it calls identical cells different a little more often "
                   "than 5%: 6.7% at 5% noise in simulation; fixed repetitions keep about 5%)")
    else:
        outcome = f"not met: stopped at {most} repetitions"
    return f"{head}: {shown}; {outcome}."


def _pct(value: float) -> str:
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


KEY = "repeat_until"


def spec(config: dict) -> dict | None:
    """repeat_until as the study gives it (its values checked by the schema and check), or None."""
    given = config.get(KEY)
    return None if given is None else dict(given)


def most(repetitions: int, given: dict | None) -> int:
    """Repetitions per cell at most: `repetitions`, or with repeat_until (given) its max_repetitions."""
    return given["max_repetitions"] if given else repetitions


def check(draft: Draft, cells: list) -> None:
    """repeat_until against the keys it goes with: the noise it reads needs 2 repetitions per cell or more to
    start from, and a canary ends every round (its places must not move when a round is added): the rounds
    interleaved, and canary.every dividing the study's cells. Then the runs the study may make, at most
    matrix.MAX_RUNS."""
    config, given = draft.config, spec(draft.config)
    repetitions = config.get("repetitions", 1)
    if given is not None:
        if repetitions < 2:
            raise ConfigError(f"repetitions: {repetitions}; repeat_until needs 2 or more to measure the noise from")
        if given["max_repetitions"] < repetitions:
            raise ConfigError(f"repeat_until.max_repetitions: {given['max_repetitions']} is fewer than repetitions "
                              f"({repetitions})")
        every = noise.canary_every(config)
        if every is not None and not config.get("interleave", True):
            raise ConfigError("interleave: false; repeat_until with noise_control.canary needs the rounds "
                              "interleaved (a canary ends every round)")
        if every is not None and len(cells) % every:
            raise ConfigError(f"noise_control.canary.every: {every}; with repeat_until it must divide the study's "
                              f"{len(cells)} cells, so that a canary ends every round")
        repetitions = given["max_repetitions"]
    if len(cells) * repetitions > matrix.MAX_RUNS:
        key = "repeat_until.max_repetitions" if given else "repetitions"
        raise ConfigError(f"{key}: {repetitions} x {len(cells):,} cells is {len(cells) * repetitions:,} "
                          f"runs; a study has at most {matrix.MAX_RUNS:,}")


CONCERN = Concern(name="repeat_until", check_cells=check, study=lambda draft, cells: {KEY: spec(draft.config)})
