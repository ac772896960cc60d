"""The study's answer, as the summary page states it first: one line per compared pair, read from
results/tables/comparisons.csv (written by rule statistics, the one place ratios and verdicts are
computed), the run-to-run noise and the smallest difference the study could detect, and the
headline plots.

    filesystem (baseline ext4), iops
      xfs / ext4 at threads 4, workload fio-randread: 0.97 [0.93, 1.01], within noise
"""
from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

# The plot that shows an axis best, when the study made it; an axis not named here gets the first of
# FALLBACK_PLOTS the study made (ratio_heatmap draws only the first compared axis).
AXIS_PLOTS = {"threads": ["ci_vs_threads", "throughput_vs_threads"], "memory": ["tps_vs_memory"],
              "version": ["tps_vs_memory_by_version"]}
FALLBACK_PLOTS = ["throughput_vs_threads", "violin", "ci_vs_threads"]


@dataclass
class Comparison:
    """The pairs of one compared axis on one metric."""

    axis: str
    baseline: str
    metric: str
    lines: list[str]


@dataclass
class Noise:
    run_to_run_pct: float | None  # median over cells with 2 repetitions or more of sd / median of their medians
    detectable_pct: float | None  # median half-width of the ratios' CIs: a smaller difference is within noise
    cells_with_reps: int


def is_latency(metric: str) -> bool:
    return metric.startswith("lat")


def comparisons(path: Path, axes: list[str]) -> list[Comparison]:
    """Throughput comparisons (latency ratios stay in the table), one line per pair; the context names
    only the other axes that vary among the axis' pairs."""
    rows = [r for r in read_csv(path) if not is_latency(r["metric"])]
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["axis"], row["baseline"], row["metric"]), []).append(row)
    out = []
    for (axis, baseline, metric), pairs in groups.items():
        context = [a for a in axes if a != axis and a in pairs[0] and len({p[a] for p in pairs}) > 1]
        out.append(Comparison(axis, baseline, metric, [pair_line(p, axis, context) for p in pairs]))
    return out


def pair_line(row: dict, axis: str, context: list[str]) -> str:
    where = ", ".join(f"{a} {row[a]}" for a in context)
    ci = f"{number(row['ratio'])} [{number(row['ratio_low'])}, {number(row['ratio_high'])}]"
    verdict = row.get("verdict") or "no verdict"
    if row.get("includes_deviated") in ("TRUE", "True", "1"):  # analysis.include_deviated kept it (delivered.py)
        verdict += " (includes a repetition that ran otherwise than declared: see Declared vs delivered)"
    return f"{row['axis_value']} / {row['baseline']}{' at ' + where if where else ''}: {ci}, {verdict}"


# What each recovery figure (results/tables/recovery.csv, medians over repetitions) says, in reading order,
# and the column that says in words why it is empty (events/recovery.py): a figure the window did not show
# (a replica not caught up by its end) is that sentence, never a number.
RECOVERY_PARTS = [("before_tps", "{} tps before", "before_why"), ("below95_s", "under 95% for {} s", None),
                  ("below50_s", "under 50% for {} s", None),
                  ("recovered_s", "back within 95% after {} s", "recovered_why"),
                  ("lost_tx", "transactions lost {}", None),
                  ("worst_lat_pct_ms", "worst second's percentile {} ms", "worst_lat_why"),
                  ("worst_lat_max_ms", "longest transaction {} ms", None), ("errors", "client errors {}", None),
                  ("reconnects", "reconnects {}", None), ("lag_peak_s", "replica lag peak {} s", "lag_peak_why"),
                  ("catch_up_s", "replicas caught up after {} s", "catch_up_why"),
                  ("sync_off_s", "semi-sync off {} s", None),
                  ("unacked_tx", "commits no replica acknowledged {}", None)]


def recovery(path: Path, axes: list[str]) -> list[str]:
    """One line per timed event and cell of an events study, from the recovery table (rule recovery): what
    the event was, then how the cell's throughput and latency went through it. A figure the window did not
    show says what was seen instead (its *_why); the seconds under 95% and the transactions lost of a cell
    that was not back by the window's end are counted to that end, and say so. The context names the axes
    that vary among the events."""
    rows = read_csv(path)
    context = [a for a in axes if rows and a in rows[0] and a != "events" and len({r[a] for r in rows}) > 1]
    lines = []
    for row in rows:
        where = ", ".join(f"{a} {row[a]}" for a in context)
        event = " ".join(part for part in (row["action"], row.get("target")) if part) + f" at {count(row['at_s'])} s"
        if _float(row.get("for_s")) is not None:
            event += f" for {count(row['for_s'])} s"
        reps = row.get("reps") or "1"
        lines.append(f"{row.get('events', '')}{' at ' + where if where else ''}: {event}: "
                     f"{'; '.join(recovery_figures(row))} (median of {reps} repetition{'s' if reps != '1' else ''})")
    return lines


def recovery_figures(row: dict) -> list[str]:
    """The recovery line's figures of one table row (RECOVERY_PARTS), each a number or the words of its why."""
    not_back = _float(row.get("recovered_s")) is None and _float(row.get("before_tps"))
    out, said = [], set()
    for key, text, why_key in RECOVERY_PARTS:
        why = (row.get(why_key) or "").strip() if why_key else ""
        if _float(row.get(key)) is not None:
            figure = text.format(count(row[key]))
            if not_back and key in ("below95_s", "below50_s") and _float(row.get("after_s")) is not None:
                figure += f" of the {count(row['after_s'])} s after it"
            if not_back and key == "lost_tx":
                figure = f"transactions lost by the window's end {count(row[key])}"
            out.append(figure)
        elif why and why not in said:
            out.append(why)
            said.add(why)
        elif key == "recovered_s" and not_back:
            out.append("not back within 95% by the window's end")
    return out


def noise(comparisons_csv: Path, cell_stats_csv: Path) -> Noise:
    spreads = []
    for row in read_csv(cell_stats_csv):
        if is_latency(row.get("metric", "")):
            continue
        sd, median = _float(row.get("rep_sd")), _float(row.get("median"))
        if sd is not None and median and _float(row.get("reps", "0")) >= 2:
            spreads.append(100 * sd / median)
    halves = []
    for row in read_csv(comparisons_csv):
        low, high = _float(row.get("ratio_low")), _float(row.get("ratio_high"))
        if not is_latency(row["metric"]) and low and high and low > 0:
            halves.append(100 * (math.exp(math.log(high / low) / 2) - 1))
    return Noise(statistics.median(spreads) if spreads else None,
                 statistics.median(halves) if halves else None, len(spreads))


def repetitions_needed(noise_pct: float, difference_pct: float) -> int:
    """Repetitions per cell for a ratio's 95% CI (a t interval on the log scale, as the statistics rule's,
    its degrees of freedom taken as many) to be as narrow as ±difference_pct at a run-to-run noise of
    noise_pct: n = 2 (1.96 s / ln(1 + d))^2, at least 2."""
    s, d = noise_pct / 100, math.log(1 + difference_pct / 100)
    return max(2, math.ceil(2 * (1.96 * s / d) ** 2))


def noise_text(n: Noise, rounds: bool = False) -> str:
    """rounds: the study has repeat_until (its own line says how its rounds went); otherwise the text names
    the key that runs repetitions until a difference can be told."""
    if n.run_to_run_pct is not None:
        text = (f"Run-to-run noise: {n.run_to_run_pct:.1f}% (median over {n.cells_with_reps} cells of the "
                "sd of their repetitions' medians, relative to the median). To tell a difference of 5% from "
                f"noise would take about {repetitions_needed(n.run_to_run_pct, 5)} repetitions per cell, "
                f"10% about {repetitions_needed(n.run_to_run_pct, 10)}"
                + ("." if rounds else " (a study's repeat_until runs rounds of every cell until then)."))
    else:
        text = ("Each cell ran once: run-to-run noise was not measured, and the intervals come from the "
                "variation within a run only, which understates it.")
    if n.detectable_pct is not None:
        text += (f" The smallest difference this study could tell from noise: about ±{n.detectable_pct:.0f}% "
                 "(the median half-width of the ratios' confidence intervals).")
    return text


def headline(declared: list[str], compared_axes: list[str], made: list[str]) -> tuple[list[str], list[str]]:
    """The headline plots (names among `made`) and the declared ones the study did not make. Without
    a declaration: one per compared axis (AXIS_PLOTS, else ratio_heatmap for the first axis, else
    FALLBACK_PLOTS), no plot twice."""
    if declared:
        return [p for p in declared if p in made], [p for p in declared if p not in made]
    chosen: list[str] = []
    for i, axis in enumerate(compared_axes):
        candidates = AXIS_PLOTS.get(axis) or ((["ratio_heatmap"] if i == 0 else []) + FALLBACK_PLOTS)
        pick = next((p for p in candidates if p in made and p not in chosen), None)
        if pick:
            chosen.append(pick)
    return chosen, []


def number(text: str) -> str:
    """Three significant digits, as the analysis' tables write them (1,234 above a thousand)."""
    x = _float(text)
    if x is None:
        return "NA"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    digits = 2 - math.floor(math.log10(abs(x))) if x else 2
    return f"{x:.{max(digits, 0)}f}"


def count(text: str) -> str:
    """A whole number as one (seconds, transactions, errors), anything else as number() writes it."""
    x = _float(text)
    return f"{x:,.0f}" if x is not None and x == round(x) else number(text)


def read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _float(text) -> float | None:
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x
