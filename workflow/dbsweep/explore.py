"""results/explore.html: the per-second series of chosen cells, stacked on one time axis.

The reader picks cells (repetitions) and server counters; the page draws, one panel above the other
and zooming together, the tool's throughput and latency, vmstat's CPU, iostat's device IOPS and the
chosen counters (only the panels the study has data for, the x axis under the last; no counters picker
in a study without counters), with each repetition's steady-state window shaded and its stalls marked (both from
results/tables/steady_state.csv, written by rule statistics, when the study has it).

Self-contained and offline: plotly.js (from the plotly package on PyPI) is embedded once; the data are
compact JSON (values to 4 significant digits, seconds implicit), gzipped and base64-encoded, unpacked
by the browser's DecompressionStream. Counters are per-second deltas (or gauges) of many names; the
page keeps all that vary when they fit COUNTER_VALUES values, else the names that vary most (relative
to their mean), so a study of 500 cells x 300 s stays a file of a few MB.
"""
from __future__ import annotations

import base64
import gzip
import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

COUNTER_VALUES = 1_500_000  # counter values embedded at most (all names x seconds x repetitions)
THROUGHPUT = ["tps", "iops"]  # the first a repetition has: tps for sysbench OLTP, IOPS for the others
LATENCY = ["lat_ms", "lat_pct_ms"]  # fio's per-second mean, else sysbench's per-interval percentile
CPU = ["us", "sy", "wa"]
DEVICE = ["r_s", "w_s"]


def build(tables: Path, axes: list[str], steady_state: Path | None = None,
          counter_values: int = COUNTER_VALUES) -> dict:
    """The page's data from the long tables (parquet) of results/tables."""
    keys = axes + ["rep"]
    samples = _read(tables / "samples.parquet", keys + ["second"] + THROUGHPUT + LATENCY)
    system = _read(tables / "system.parquet", keys + ["second"] + CPU + DEVICE)
    windows = pd.read_csv(steady_state, dtype={a: str for a in axes}) if steady_state and steady_state.exists() \
        else pd.DataFrame(columns=keys)
    for frame in (samples, system, windows):
        for axis in axes:
            if axis in frame:
                frame[axis] = frame[axis].astype("string").fillna("")
    reps = samples[keys].drop_duplicates().reset_index(drop=True)  # in the order of the matrix
    varying = [a for a in axes if reps[a].nunique() > 1] or axes[:1]
    index = {tuple(row): i for i, row in enumerate(reps[keys].itertuples(index=False))}
    series = [{} for _ in index]

    for key, part in samples.groupby(keys, sort=False):
        s = series[index[_key(key)]]
        part = part.sort_values("second")
        s["thr_name"] = next((m for m in THROUGHPUT if part[m].notna().any()), THROUGHPUT[-1])
        s["lat_name"] = next((m for m in LATENCY if part[m].notna().any()), LATENCY[-1])
        s["t0"], s["thr"] = _dense(part, s["thr_name"])
        s["lat"] = _dense(part, s["lat_name"])[1]
    by_second = system.groupby(keys + ["second"], sort=False)
    # a second without a device (tmpfs: no iostat) stays missing, not 0 IO/s
    system = by_second[CPU].first().join(by_second[DEVICE].sum(min_count=1)).reset_index()
    for key, part in system.groupby(keys, sort=False):
        if _key(key) not in index:
            continue
        s = series[index[_key(key)]]
        part = part.sort_values("second")
        s["st0"], _ = _dense(part, CPU[0])
        for column in CPU + DEVICE:
            s[column] = _dense(part, column)[1]
    for row in windows.to_dict("records"):
        i = index.get(tuple(str(row[k]) for k in axes) + (int(row["rep"]),))
        if i is not None:
            series[i]["win"] = [_num(row["window_start"]), _num(row["window_end"])]
            series[i]["stall"] = _num(row["stall_threshold"])

    names_by_variation = _counter_names(tables / "counters.parquet", counter_values)
    names = sorted(names_by_variation)
    if names:
        counters = _read(tables / "counters.parquet", keys + ["second", "name", "value"],
                         filters=[("name", "in", names)])
        for axis in axes:
            counters[axis] = counters[axis].astype("string").fillna("")
        counters = counters.groupby(keys + ["name", "second"], sort=False, as_index=False)["value"].last()
        for key, part in counters.groupby(keys, sort=False):
            i = index.get(_key(key))
            if i is None:
                continue
            wide = part.pivot(index="second", columns="name", values="value").sort_index()
            wide = wide.reindex(range(int(wide.index.min()), int(wide.index.max()) + 1))
            series[i]["ct0"] = int(wide.index.min())
            series[i]["ctr"] = {n: _compact(wide[n].to_numpy(dtype=float, na_value=np.nan)) for n in wide.columns}
    cells = [[str(row[a]) for a in varying] + [int(row["rep"])] for _, row in reps.iterrows()]
    return {"axes": varying, "top": names_by_variation[:2], "cells": cells, "series": series, "counters": names}


def write(data: dict, out: Path, title: str) -> None:
    import plotly.offline  # the page's only use of plotly: its JavaScript, embedded once

    packed = base64.b64encode(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), 6)).decode()
    page = (TEMPLATE.replace("{{title}}", html.escape(title))
            .replace("{{plotly}}", plotly.offline.get_plotlyjs())
            .replace("{{data}}", packed))
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page)
    tmp.replace(out)


def _counter_names(path: Path, budget: int) -> list[str]:
    """Names that vary; the most variable (sd / mean) first, as many as the budget of values holds."""
    if not path.exists():
        return []
    table = pq.read_table(path, columns=["name", "value"])
    if table.num_rows == 0:
        return []
    stats = table.to_pandas().groupby("name")["value"].agg(["mean", "std", "count"])
    stats = stats[stats["std"] > 0]
    stats["cv"] = stats["std"] / stats["mean"].abs().clip(lower=1e-9)
    stats = stats.sort_values(["cv", "count"], ascending=False)
    per_name = stats["count"].max() if len(stats) else 1
    return stats.index[:max(1, budget // max(per_name, 1))].tolist() if len(stats) else []


def _read(path: Path, columns: list[str], filters=None) -> pd.DataFrame:
    present = set(pq.read_schema(path).names)
    frame = pq.read_table(path, columns=[c for c in columns if c in present], filters=filters).to_pandas()
    for column in columns:
        if column not in frame:
            frame[column] = pd.NA
    return frame


def _dense(part: pd.DataFrame, column: str) -> tuple[int, list]:
    """(first second, one value per second up to the last, None where a second is missing)."""
    seconds = part["second"].to_numpy(dtype=np.int64)
    start = int(seconds.min())
    values = np.full(int(seconds.max()) - start + 1, np.nan)
    values[seconds - start] = pd.to_numeric(part[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return start, _compact(values)


def _compact(values: np.ndarray) -> list:
    """Numbers to 4 significant digits in their shortest form (integers as integers), NaN as None;
    vectorised: a study's counters are millions of values. An integer divided by a power of ten is the
    double nearest to the decimal, so JSON writes it short."""
    x = np.asarray(values, dtype=float)
    finite = np.isfinite(x)
    magnitude = np.floor(np.log10(np.abs(np.where(finite & (x != 0), x, 1.0))))
    decimals = np.clip(3 - magnitude, 0, 15)
    rounded = np.where(decimals > 0, np.round(x * 10.0 ** decimals) / 10.0 ** decimals,
                       np.round(x / 10.0 ** (magnitude - 3)) * 10.0 ** (magnitude - 3))
    out = rounded.astype(object)
    whole = finite & (rounded == np.round(rounded)) & (np.abs(rounded) < 1e15)
    out[whole] = rounded[whole].astype(np.int64)
    out[~finite] = None
    return out.tolist()


def _num(value):
    """A number in the fewest characters that keep 4 significant digits; None for a missing one."""
    if value is None or value is pd.NA:
        return None
    x = float(value)
    if math.isnan(x):
        return None
    x = float(f"{x:.4g}")
    return int(x) if x.is_integer() and abs(x) < 1e15 else x


def _key(key) -> tuple:
    return tuple(int(k) if i == len(key) - 1 else str(k) for i, k in enumerate(key))


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dbsweep: {{title}}, per second</title>
<style>
body { font-family: system-ui, sans-serif; margin: 0.5em 1em; color: #222; }
h1 { font-size: 1.3em; margin: 0.2em 0; } #controls { display: flex; flex-wrap: wrap; gap: 1em; }
#controls label { display: block; font-size: 0.85em; color: #444; } select { min-width: 16em; max-width: 100%; }
#cells { min-width: 24em; } #plot { width: 100%; height: 1100px; } .note { font-size: 0.85em; color: #444; }
</style></head><body>
<h1>{{title}}: per-second series <small><a href="index.html">summary</a></small></h1>
<div id="controls">
 <div><label for="filter">cells (repetitions): filter, then pick (Ctrl/Shift for several)</label>
  <input id="filter" placeholder="e.g. xfs 4" size="30"><br><select id="cells" multiple size="8"></select></div>
 <div id="counter-picker"><label for="counters">server counters (per second)</label>
  <select id="counters" multiple size="9"></select></div>
</div>
<p class="note">Shaded: each repetition's steady-state window; &#x2715;: stalls (seconds of the window below the
stall threshold). Drag to zoom: every panel follows; double-click to reset.</p>
<div id="plot"></div>
<script>{{plotly}}</script>
<script>performance.mark("plotly-ready")</script>
<script id="data" type="application/octet-stream">{{data}}</script>
<script>
"use strict";
const COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];
const DASH = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];
async function unpack() {
  // the browser decodes the base64 itself (a data: URL), without a JavaScript call per byte
  const packed = await fetch("data:application/octet-stream;base64," + document.getElementById("data").textContent);
  return await new Response(packed.body.pipeThrough(new DecompressionStream("gzip"))).json();
}
const seq = (t0, n) => Array.from({length: n}, (_, i) => t0 + i);
function label(data, i) {
  const c = data.cells[i];
  return data.axes.map((a, j) => c[j] === "" ? "" : a + "=" + c[j]).filter(x => x).join(", ")
    + " rep " + c[c.length - 1];
}
function draw(data) {
  const cells = [...document.getElementById("cells").selectedOptions].map(o => +o.value);
  const counters = [...document.getElementById("counters").selectedOptions].map(o => o.value);
  const traces = [], shapes = [];
  cells.forEach((i, k) => {
    const s = data.series[i], colour = COLOURS[k % COLOURS.length], name = label(data, i);
    const common = {type: "scatter", mode: "lines", legendgroup: name, line: {color: colour, width: 1.5}};
    if (s.thr) {
      const t = seq(s.t0, s.thr.length);
      traces.push({...common, x: t, y: s.thr, name: name, yaxis: "thr", hovertemplate: s.thr_name + " %{y}"});
      traces.push({...common, x: t, y: s.lat, showlegend: false, yaxis: "lat", hovertemplate: s.lat_name + " %{y}"});
      if (s.win && s.stall != null) {
        const stalls = t.map((x, j) => [x, s.thr[j]])
          .filter(([x, y]) => y != null && y < s.stall && x >= s.win[0] && x <= s.win[1]);
        traces.push({type: "scatter", mode: "markers", x: stalls.map(p => p[0]), y: stalls.map(p => p[1]), yaxis: "thr",
                     legendgroup: name, showlegend: false, marker: {symbol: "x", size: 9, color: colour},
                     hovertemplate: "stall %{y}"});
      }
    }
    if (s.win) shapes.push({type: "rect", xref: "x", yref: "paper", x0: s.win[0], x1: s.win[1], y0: 0, y1: 1,
                            fillcolor: colour, opacity: 0.08, line: {width: 0}, layer: "below"});
    if (s.us) {
      const t = seq(s.st0, s.us.length);
      ["us", "sy", "wa"].forEach((m, d) => traces.push({...common, x: t, y: s[m], showlegend: false, yaxis: "cpu",
        line: {color: colour, width: 1.2, dash: DASH[d]}, hovertemplate: m + " %{y}%"}));
      ["r_s", "w_s"].forEach((m, d) => traces.push({...common, x: t, y: s[m], showlegend: false, yaxis: "dev",
        line: {color: colour, width: 1.2, dash: DASH[d]}, hovertemplate: m + " %{y}"}));
    }
    // the first cell with counters names them in the legend (its line style); other cells share the styles
    const named = cells.find(j => data.series[j].ctr) === i;
    if (s.ctr) counters.forEach((m, d) => s.ctr[m] && traces.push({...common, x: seq(s.ct0, s.ctr[m].length),
      y: s.ctr[m], name: m, legendgroup: named ? "counter " + m : name, showlegend: named, yaxis: "ctr",
      line: {color: colour, width: 1.2, dash: DASH[d % DASH.length]}, hovertemplate: m + " %{y}"}));
  });
  const thr = [...new Set(cells.map(i => data.series[i].thr_name))].join(", ");
  const lat = [...new Set(cells.map(i => data.series[i].lat_name))].join(", ");
  // only the panels this study has data for (a storage study on tmpfs: no device IO, no counters), stacked
  // top down and sharing the x axis, which is drawn under the last of them
  const has = key => traces.some(t => t.yaxis === key && t.y.some(v => v != null));
  const panels = [["thr", thr || "throughput"], ["lat", "latency, ms (" + (lat || "-") + ")"],
                  ["cpu", "CPU % (us, sy dashed, wa dotted)"], ["dev", "device IO/s (read, write dashed)"],
                  ["ctr", counters.length ? "server counters/s" : "server counters/s: pick some above"]]
    .filter(([key]) => key === "thr" || has(key) || (key === "ctr" && data.counters.length));
  const ids = {}, height = 1 / panels.length, gap = Math.min(0.03, height * 0.15);
  const layout = {
    margin: {t: 10, r: 10, b: 40, l: 70}, showlegend: true, legend: {orientation: "h", y: -0.05}, shapes: shapes,
    hovermode: "x unified",
  };
  panels.forEach(([key, title], k) => {
    const id = k ? "y" + (k + 1) : "y", top = 1 - k * height;
    ids[key] = id;
    layout["yaxis" + (k ? k + 1 : "")] = {title: {text: title, font: {size: 12}}, domain: [top - height + gap, top],
                                          anchor: "x", rangemode: "tozero"};
  });
  layout.xaxis = {title: {text: "second of the run"}, anchor: ids[panels[panels.length - 1][0]]};
  traces.forEach(t => { t.yaxis = ids[t.yaxis]; });
  layout.height = Math.max(400, 220 * panels.length);
  document.getElementById("plot").style.height = layout.height + "px";
  return Plotly.react("plot", traces, layout, {responsive: true, displaylogo: false});
}
unpack().then(data => {
  const cells = document.getElementById("cells"), counters = document.getElementById("counters");
  // first picks: two repetitions, one with counters when the study has some
  const first = [0, data.series.findIndex(s => s.ctr)].filter(i => i >= 0);
  if (first.length < 2 || first[0] === first[1]) first[1] = Math.min(1, data.cells.length - 1);
  data.cells.forEach((_, i) => cells.add(new Option(label(data, i), i, false, first.includes(i))));
  data.counters.forEach(name => counters.add(new Option(name, name, false, data.top.includes(name))));
  if (!data.counters.length) document.getElementById("counter-picker").hidden = true;  // nothing to pick
  document.getElementById("filter").addEventListener("input", e => {
    const words = e.target.value.toLowerCase().split(/\\s+/).filter(w => w);
    for (const o of cells.options) o.hidden = !words.every(w => o.text.toLowerCase().includes(w));
  });
  cells.addEventListener("change", () => draw(data));
  counters.addEventListener("change", () => draw(data));
  return draw(data);
}).then(() => { window.exploreDrawn = performance.now(); });
</script>
</body></html>
"""
