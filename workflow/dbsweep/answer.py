"""The study's answer, as the summary page states it first: one line per compared pair, read from
results/tables/comparisons.csv (written by rule statistics, the one place ratios and verdicts are
computed), the run-to-run noise and the smallest difference the study could detect, and the
headline plots.

    filesystem (baseline ext4), iops
      xfs / ext4 at threads 4, workload fio-randread: 0.97 [0.93, 1.01], within noise
"""
from __future__ import annotations

import csv
import gzip
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

# The plot that shows an axis best, when the study made it; an axis not named here gets the first of
# FALLBACK_PLOTS the study made (ratio_heatmap draws only the first compared axis).
AXIS_PLOTS = {"threads": ["ci_vs_threads", "throughput_vs_threads"], "memory": ["tps_vs_memory"],
              "version": ["tps_vs_memory_by_version"]}
FALLBACK_PLOTS = ["throughput_vs_threads", "violin", "ci_vs_threads"]
# A study with no compared axis (one cell, workloads side by side, a query or insert-benchmark study): the
# first of these it made, beside its answer.
UNCOMPARED_PLOTS = ["timeseries_steady", "query_timing", "insert_benchmark", "violin"]


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


@dataclass
class Section:
    """An answer that is not a comparison with a baseline: a title and its lines (a study's cells, its
    workloads side by side, its queries)."""

    title: str
    lines: list[str]


# The unit of each metric of cell_stats.csv, and what its per-second value is.
METRIC_UNITS = {"tps": "transactions/s", "iops": "IOPS", "lat_ms": "ms", "lat_p95_ms": "ms"}
METRIC_NAMES = {"tps": "throughput", "iops": "throughput", "lat_ms": "latency (median of per-second means)",
                "lat_p95_ms": "latency (median of per-second p95s)"}
# The tool's own latency figures over the whole run (summary.csv.gz), as the answer names them.
TOOL_FIGURES = [("lat_p95_ms", "p95"), ("lat_p99_ms", "p99"), ("lat_max_ms", "max")]
ANSWER_CELLS = 12  # cells an answer lists one by one; the rest are in cell_stats.csv


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
# Counts the table holds as estimates with decimals (rates summed over a client's report intervals, a
# deficit of tps summed over seconds): said as whole transactions and errors, never "8.02 errors".
WHOLE = {"lost_tx", "errors", "reconnects", "unacked_tx"}


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
            shown = f"{round(_float(row[key])):,}" if key in WHOLE else count(row[key])
            figure = text.format(shown)
            if not_back and key in ("below95_s", "below50_s") and _float(row.get("after_s")) is not None:
                figure += f" of the {count(row['after_s'])} s after it"
            if not_back and key == "lost_tx":
                figure = f"transactions lost by the window's end {shown}"
            out.append(figure)
        elif why and why not in said:
            out.append(why)
            said.add(why)
        elif key == "recovered_s" and not_back:
            out.append("not back within 95% by the window's end")
    return out


def cells(cell_stats_csv: Path, summary_csv: Path, axes: list[str]) -> Section | None:
    """A study without a comparison answers with its cells' own figures: throughput and latency, each the
    median of the per-second values with its 95% CI, then the tool's own latency over the whole run
    (p95, p99: means over repetitions; max: the largest of any repetition). One line per cell, named by
    the axes that vary (all of them for a one-cell study)."""
    rows = read_csv(cell_stats_csv)
    if not rows:
        return None
    by_cell = _by_cell(rows, axes)
    tool = _tool_figures(summary_csv, axes)
    vary = _varying(list(by_cell), axes) or [a for a in axes if any(k[axes.index(a)] for k in by_cell)]
    lines = []
    for key, metrics in list(by_cell.items())[:ANSWER_CELLS]:
        figures = [_figure_text(m, metrics[m]) for m in _metric_order(metrics)]
        own = [f"{name} {number(v)} ms" for name, v in tool.get(key, [])]
        if own:
            figures.append("the tool's own latency over the whole run: " + ", ".join(own))
        lines.append(f"{_label(key, axes, vary)}: {'; '.join(figures)}")
    more = len(by_cell) - ANSWER_CELLS
    if more > 0:
        lines.append(f"… and {more} more cells in cell_stats.csv")
    return Section(f"{'Each cell' if len(by_cell) > 1 else 'The one cell'} (median per-second value [95% CI])",
                   lines)


def side_by_side(cell_stats_csv: Path, comparisons_csv: Path, axes: list[str], axis: str = "workload",
                 baseline: str | None = None) -> Section | None:
    """An axis that varies and is not compared with a baseline (workload: different workloads'
    figures may not share a unit) answers with each figure side by side and their ratio, units named,
    within each combination of the other axes. The ratio has no interval: the statistics rule tests no
    pair across this axis."""
    if any(r["axis"] == axis for r in read_csv(comparisons_csv)):
        return None
    by_cell = _by_cell(read_csv(cell_stats_csv), axes)
    if axis not in axes:
        return None
    j = axes.index(axis)
    values = list(dict.fromkeys(k[j] for k in by_cell if k[j]))
    if len(values) < 2:
        return None
    base = baseline if baseline in values else values[0]
    others = [a for a in _varying(list(by_cell), axes) if a != axis]
    lines = []
    for key, metrics in by_cell.items():
        if key[j] in ("", base):
            continue
        base_key = key[:j] + (base,) + key[j + 1:]
        if base_key not in by_cell:
            continue
        where = ", ".join(f"{a} {key[axes.index(a)]}" for a in others)
        parts = [_pair_text(kind, metrics, by_cell[base_key]) for kind in ("throughput", "latency")]
        parts = [p for p in parts if p]
        if parts:
            lines.append(f"{key[j]} / {base}{' at ' + where if where else ''}: {'; '.join(parts)}")
    if not lines:
        return None
    return Section(f"{axis} side by side with {base} (medians of per-second values; ratio, no interval: "
                   f"{axis} is not tested against a baseline)", lines[:ANSWER_CELLS * 2])


def queries(query_timing_csv: Path, axes: list[str]) -> Section | None:
    """A query-timing study answers with each configuration's median time per execution, and, against the
    baseline configuration, its ratio with the 95% CI and verdict (query_timing.csv, rule query_timing)."""
    rows = [r for r in read_csv(query_timing_csv) if r.get("name") == "ms"]
    if not rows:
        return None
    lines = []
    for row in rows:
        text = f"{row.get('configuration') or 'the query'}: {number(row['value'])} ms per execution"
        if _float(row.get("executions")) is not None:
            text += f" (median of {count(row['executions'])} executions)"
        lines.append(text + _against_baseline(row))
    return Section("Time per execution of the query (median; ratio to the baseline [95% CI], verdict)", lines)


def open_loop(openloop_csv: Path, axes: list[str]) -> Section | None:
    """An open-loop study (a rate of arrivals) answers first with what each cell did at its rate: the
    target (and the share of the calibrated capacity it is), the rate achieved and whether the client kept
    up, and the latency that includes the time in the client's queue (openloop.csv, rule openloop: one
    row per repetition; medians over them). Its throughput is the rate it was given, so a throughput
    ratio alone does not answer it."""
    rows = read_csv(openloop_csv)
    if not rows:
        return None
    by_cell: dict[tuple, list[dict]] = {}
    for row in rows:
        by_cell.setdefault(tuple(_axis_value(row.get(a)) for a in axes), []).append(row)
    vary = _varying(list(by_cell), axes)
    lines = []
    for key, reps in list(by_cell.items())[:ANSWER_CELLS]:
        def median(column: str, reps=reps) -> str:
            return _median_text(reps, column)

        target = f"target rate {count(median('rate'))} transactions/s"
        if median("rate_percent"):
            target += f" ({count(median('rate_percent'))}% of the calibrated {number(median('rate_calibrated_tps'))})"
        short = sum(r.get("status", "").startswith("short") for r in reps)
        kept = (f"short of its rate in {short} of {len(reps)} repetition{'s' if len(reps) != 1 else ''}"
                if short else "kept up")
        figures = [target, f"achieved {number(median('rate_achieved'))} ({count(median('achieved_pct'))}%), {kept}"]
        latency = [f"{name} {number(median(column))} ms" for column, name in (("lat_p99_ms", "p99"),
                                                                               ("lat_mean_ms", "mean"))
                   if median(column)]
        if latency:
            figures.append("latency from arrival (time in the queue included): " + ", ".join(latency))
        if median("queue_max"):
            figures.append(f"longest queue {count(median('queue_max'))}")
        lines.append(f"{_label(key, axes, vary)}: {'; '.join(figures)} (median of {len(reps)} "
                     f"repetition{'s' if len(reps) != 1 else ''})")
    return Section("At each cell's rate of arrivals (open loop; results/tables/openloop.csv)", lines)


def _median_text(rows: list[dict], column: str) -> str:
    """The median of a column's numbers over rows, as text ("" when none has one)."""
    values = [x for x in (_float(r.get(column)) for r in rows) if x is not None]
    return str(statistics.median(values)) if values else ""


# The insert benchmark's rates (insert_benchmark.csv, rule insert_benchmark) the answer states, per phase.
INSERT_RATES = {"inserts_s": "inserted rows/s", "queries_s": "queries/s"}


def insert_phases(insert_csv: Path, axes: list[str]) -> Section | None:
    """An insert-benchmark study answers, per phase and configuration, with its rates (medians over
    repetitions; a phase's rate that is 0, queries in the load phase, is left out), the target it fell
    short of, and its ratio to the baseline configuration with the 95% CI and verdict."""
    rows = [r for r in read_csv(insert_csv) if r.get("metric") in INSERT_RATES and _float(r.get("value"))]
    if not rows:
        return None
    lines = []
    for row in rows:
        text = (f"{row.get('phase', '?')} phase, {row.get('configuration') or 'the cell'}: "
                f"{number(row['value'])} {INSERT_RATES[row['metric']]}")
        if row.get("short_of_target") == "TRUE":
            text += f" (short of the target {number(row['target_inserts_s'])})"
        lines.append(text + _against_baseline(row))
    return Section("Each phase's rates (median over repetitions; ratio to the baseline [95% CI], verdict)",
                   lines[:ANSWER_CELLS * 2])


def _against_baseline(row: dict) -> str:
    """'; 2.00 [1.80, 2.20] of the baseline's, higher', ' (the baseline)', or '' without a baseline."""
    relative = _float(row.get("relative"))
    if relative is None:
        return ""
    if row.get("baseline") == "TRUE" or (relative == 1 and _float(row.get("ratio_low")) is None):
        return " (the baseline)"
    if _float(row.get("ratio_low")) is None and not row.get("verdict"):
        return f"; {number(row['relative'])} of the baseline's ({_why_no_verdict(row)})"
    ci = (f" [{number(row['ratio_low'])}, {number(row['ratio_high'])}]"
          if _float(row.get("ratio_low")) is not None else "")
    return f"; {number(row['relative'])}{ci} of the baseline's, {row.get('verdict') or 'no verdict'}"


def _why_no_verdict(row: dict) -> str:
    """Why a ratio to the baseline has neither interval nor verdict: the test needs two values or more on
    each side, and a configuration that ran once has one (insert_benchmark.csv's reps)."""
    if row.get("reps") == "1":
        return "one repetition: no interval or verdict"
    return "no interval or verdict: too few values to test"


def _by_cell(rows: list[dict], axes: list[str]) -> dict[tuple, dict[str, dict]]:
    """cell_stats rows as cell (its axis values) -> metric -> row, in the table's order."""
    out: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        key = tuple(_axis_value(row.get(a)) for a in axes)
        out.setdefault(key, {})[row["metric"]] = row
    return out


def _axis_value(text) -> str:
    return "" if text in (None, "NA") else str(text)


def _varying(keys: list[tuple], axes: list[str]) -> list[str]:
    return [a for i, a in enumerate(axes) if len({k[i] for k in keys}) > 1]


def _label(key: tuple, axes: list[str], vary: list[str]) -> str:
    return ", ".join(f"{a} {key[axes.index(a)]}" for a in vary if key[axes.index(a)]) or "the cell"


def _metric_order(metrics: dict) -> list[str]:
    return sorted(metrics, key=lambda m: (is_latency(m), m))


def _figure_text(metric: str, row: dict) -> str:
    unit = METRIC_UNITS.get(metric, metric)
    name = METRIC_NAMES.get(metric, metric)
    ci = (f" [{number(row['ci_low'])}, {number(row['ci_high'])}]"
          if _float(row.get("ci_low")) is not None else " (no interval)")
    return f"{name} {number(row['median'])} {unit}{ci}"


def _pair_text(kind: str, metrics: dict, base: dict) -> str:
    """'throughput 450 transactions/s / 12,300 IOPS = 0.0366 (units differ)' for the first metric of
    `kind` each cell has."""
    def first(m: dict) -> str | None:
        return next((k for k in _metric_order(m) if is_latency(k) == (kind == "latency")), None)

    a, b = first(metrics), first(base)
    if not a or not b:
        return ""
    x, y = _float(metrics[a]["median"]), _float(base[b]["median"])
    ratio = number(str(x / y)) if x is not None and y else "NA"
    same = a == b
    names = METRIC_NAMES[a] if same else kind
    text = (f"{names} {number(metrics[a]['median'])} {METRIC_UNITS.get(a, a)} / "
            f"{number(base[b]['median'])} {METRIC_UNITS.get(b, b)} = {ratio}")
    if not same:
        text += f" (different figures: {METRIC_NAMES.get(a, a)} / {METRIC_NAMES.get(b, b)})" if (
            METRIC_UNITS.get(a) == METRIC_UNITS.get(b)) else " (units differ)"
    return text


def _tool_figures(summary_csv: Path, axes: list[str]) -> dict[tuple, list[tuple[str, float]]]:
    """Per cell, the tool's own p95 and p99 (means over repetitions) and max (the largest) latency."""
    if not summary_csv.exists():
        return {}
    with gzip.open(summary_csv, "rt", newline="") if summary_csv.suffix == ".gz" else open(summary_csv) as f:
        rows = list(csv.DictReader(f))
    per_cell: dict[tuple, dict[str, list[float]]] = {}
    for row in rows:
        key = tuple(_axis_value(row.get(a)) for a in axes)
        for column, _ in TOOL_FIGURES:
            x = _float(row.get(column))
            if x is not None:
                per_cell.setdefault(key, {}).setdefault(column, []).append(x)
    out = {}
    for key, figures in per_cell.items():
        out[key] = [(name, max(figures[c]) if c == "lat_max_ms" else statistics.mean(figures[c]))
                    for c, name in TOOL_FIGURES if c in figures]
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
        cells = f"{n.cells_with_reps} cell{'s' if n.cells_with_reps != 1 else ''}"
        text = (f"Run-to-run noise: {n.run_to_run_pct:.1f}% (median over {cells} of the "
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
    FALLBACK_PLOTS), no plot twice; with no compared axis, the first of UNCOMPARED_PLOTS made."""
    if declared:
        return [p for p in declared if p in made], [p for p in declared if p not in made]
    if not compared_axes:
        return [p for p in UNCOMPARED_PLOTS if p in made][:1], []
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
