"""Two sets of runs of a catalog side by side: per common cell the ratio, its CI and a verdict.

The method is the study's own comparison (workflow/R/statistics.R, ratio_to_baseline), written once more here
for the catalog, and tested against the R function on the same data (tests/test_catalog.py): a cell's value is
the median of its per-repetition medians (each over the repetition's steady-state window); the ratio A / B is
of the geometric means of those medians (the quantity the t interval is about) when the sides have run-to-run
noise, else of the medians. Its
95% CI is a t interval on the log scale, ratio x exp(+-t(df) x s x sqrt(1/n_A + 1/n_B)), where s is the
run-to-run noise (sd of the log per-repetition medians around their cell's mean) pooled over every cell of
both sides with 2 repetitions or more, df the pooled degrees of freedom, n the repetitions. When no cell has
2 repetitions, the CI is the percentile bootstrap of the ratio of the two cells' medians of 10-second block
medians (within-run noise only; R's random numbers differ, so this CI matches R's only to bootstrap error).
Within noise when the CI contains 1; else higher or lower.
"""
from __future__ import annotations

import csv
import math
import statistics
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from dbsweep.catalog import CatalogError

LEVEL = 0.95
DRAWS = 1000
BLOCK_S = 10
MIN_BLOCKS = 5
SEED = 20261123
VERDICT_NOISE = "within noise"


@dataclass
class Ratio:
    cell: str
    metric: str
    reps_a: int
    reps_b: int
    median_a: float
    median_b: float
    ratio: float
    low: float
    high: float
    verdict: str
    test: str


def pooled_noise(groups: list[list[float]]) -> tuple[float, int]:
    """(s, df): sd of the log values around their group's mean, pooled over groups of 2 or more positive
    values; (nan, 0) without such groups. As statistics.R's pooled_noise."""
    ss, df = 0.0, 0
    for values in groups:
        if len(values) > 1 and all(v > 0 for v in values):
            logs = [math.log(v) for v in values]
            mean = sum(logs) / len(logs)
            ss += sum((x - mean) ** 2 for x in logs)
            df += len(values) - 1
    return (math.sqrt(ss / df), df) if df else (math.nan, 0)


def geometric_mean(values: list[float]) -> float:
    """As statistics.R's geometric_mean: nan unless every value is positive."""
    if not values or any(not v > 0 for v in values):
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


def t_quantile(p: float, df: int) -> float:
    """The p quantile of Student's t with df degrees of freedom (bisection on the regularised incomplete beta
    function; no SciPy needed)."""
    def cdf(t: float) -> float:
        x = df / (df + t * t)
        tail = 0.5 * _betainc(df / 2, 0.5, x)
        return 1 - tail if t > 0 else tail
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) by its continued fraction (Numerical Recipes' form)."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1 - _betainc(b, a, 1 - x)
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > 1e-300 else 1e-300)
    f = d
    for i in range(2, 300):
        m = i // 2
        num = (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)) if i % 2 == 0
               else -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)))
        d = 1 + num * d
        d = 1 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1 + num / c
        if abs(c) < 1e-300:
            c = 1e-300
        f *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return front * f / a


def verdict(low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return ""
    return VERDICT_NOISE if low <= 1 <= high else ("higher" if low > 1 else "lower")


def ratios(a: dict[str, list[float]], b: dict[str, list[float]], metric: dict[str, str] | None = None,
           seconds: dict[tuple[str, str], list[float]] | None = None, level: float = LEVEL) -> list[Ratio]:
    """A against B for every cell in both: a and b map a cell to its per-repetition medians; seconds maps
    (side, cell) to the per-second values of a one-repetition cell's window (for the bootstrap CI)."""
    common = [c for c in a if c in b]
    s, df = pooled_noise([a[c] for c in common] + [b[c] for c in common])
    out = []
    for cell in common:
        ma, mb = statistics.median(a[cell]), statistics.median(b[cell])
        ratio = ma / mb if mb > 0 else math.nan
        if df:
            ga, gb = geometric_mean(a[cell]), geometric_mean(b[cell])
            ratio = ga / gb if gb > 0 else math.nan
            half = t_quantile((1 + level) / 2, df) * s * math.sqrt(1 / len(a[cell]) + 1 / len(b[cell]))
            low, high = ratio * math.exp(-half), ratio * math.exp(half)
            test = f"t on log medians, run-to-run noise {100 * s:.3g}% pooled over both sides (df {df})"
        else:
            low, high = _bootstrap_ratio((seconds or {}).get(("a", cell), []),
                                         (seconds or {}).get(("b", cell), []), level)
            test = "bootstrap of block medians (one repetition: within-run noise only)"
        out.append(Ratio(cell, (metric or {}).get(cell, ""), len(a[cell]), len(b[cell]), ma, mb, ratio, low,
                         high, verdict(low, high), test))
    return out


def block_medians(values: list[float]) -> list[float]:
    """Medians of consecutive blocks of about BLOCK_S seconds (at least MIN_BLOCKS), as statistics.R's cell_values."""
    n = len(values)
    if not n:
        return []
    k = min(n, max(MIN_BLOCKS, n // BLOCK_S))
    blocks: dict[int, list[float]] = {}
    for i, v in enumerate(values, start=1):
        blocks.setdefault(math.ceil(i * k / n), []).append(v)
    return [statistics.median(blocks[j]) for j in sorted(blocks)]


def _bootstrap_ratio(a: list[float], b: list[float], level: float) -> tuple[float, float]:
    ba, bb = block_medians(a), block_medians(b)
    if not ba or not bb:
        return math.nan, math.nan
    rng = np.random.default_rng(SEED)
    da = np.median(rng.choice(ba, (DRAWS, len(ba))), axis=1)
    db = np.median(rng.choice(bb, (DRAWS, len(bb))), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = da / db
    r = r[np.isfinite(r)]
    if not len(r):
        return math.nan, math.nan
    return float(np.quantile(r, (1 - level) / 2)), float(np.quantile(r, (1 + level) / 2))


# ---------------------------------------------------------------------------
# Selecting the two sides in a catalog

RUN_KEYS = {"study": "r.study = ?", "host": "r.host = ?", "date": "CAST(r.started AS DATE) = CAST(? AS DATE)",
            "commit": "starts_with(r.dbsweep_commit, ?)", "source": "s.path = ?", "build": "r.build = ?"}


@dataclass
class Side:
    name: str
    where: str
    params: list
    axes: set[str]      # axes the selector names: not part of the cell's key


def parse_side(text: str) -> Side:
    """A side: a result tree added to the catalog (its path), or key=value[,key=value...] with keys study, host,
    date (YYYY-MM-DD of the run's start), commit (dbsweep's, a prefix), source (a tree's path), build, or any
    axis of the study (e.g. engine=myrocks)."""
    if "=" not in text:
        path = Path(text)
        if not path.is_dir():
            raise CatalogError(f"{text}: neither a result tree nor key=value")
        return Side(text, "s.path = ?", [str(path.resolve())], set())
    where, params, axes = [], [], set()
    for part in text.split(","):
        key, _, value = part.partition("=")
        key = key.strip()
        if not key or not value:
            raise CatalogError(f"{text}: {part!r} is not key=value")
        if key in RUN_KEYS:
            where.append(RUN_KEYS[key])
            params.append(str(Path(value).resolve()) if key == "source" else value)
            if key in ("host", "build"):
                axes.add(key)
        else:
            where.append("EXISTS (SELECT 1 FROM run_axes x WHERE x.run_id = r.run_id AND x.axis = ? AND x.value = ?)")
            params += [key, value]
            axes.add(key)
    return Side(text, " AND ".join(where), params, axes)


def cell_key(study: str, series: str, dropped: set[str]) -> str:
    parts = [p for p in series.split("/") if p.split("~", 1)[0] not in dropped]
    return f"{study}: " + "/".join(parts)


def side_values(con, side: Side, dropped: set[str]) -> tuple[dict, dict, dict]:
    """Per cell: the per-repetition medians, the metric, and the run ids."""
    rows = con.execute("SELECT r.run_id, r.study, r.series, r.median, r.metric FROM runs r "
                       f"JOIN sources s USING (source_id) WHERE {side.where} AND r.median IS NOT NULL "
                       "ORDER BY r.run_id", side.params).fetchall()
    if not rows:
        raise CatalogError(f"{side.name}: no run in the catalog matches")
    values, metric, ids = {}, {}, {}
    for run_id, study, series, median, m in rows:
        key = cell_key(study, series, dropped)
        values.setdefault(key, []).append(median)
        metric[key] = m
        ids.setdefault(key, []).append(run_id)
    return values, metric, ids


def window_seconds(con, run_id: int) -> list[float]:
    """The per-second values of a run's metric inside its window, in time order."""
    return [r[0] for r in con.execute(
        "SELECT CASE WHEN r.metric = 'tps' THEN s.tps ELSE s.iops END FROM samples s JOIN runs r USING (run_id) "
        "WHERE run_id = ? AND (r.window_start IS NULL OR s.second BETWEEN r.window_start AND r.window_end) "
        "ORDER BY s.second", [run_id]).fetchall() if r[0] is not None]


@dataclass
class Comparison:
    rows: list[Ratio]
    only_a: list[str]
    only_b: list[str]


def compare(con, a: Side, b: Side) -> Comparison:
    dropped = a.axes | b.axes | {"build"}
    va, ma, ia = side_values(con, a, dropped)
    vb, mb, ib = side_values(con, b, dropped)
    seconds = {}
    for side, values, ids in (("a", va, ia), ("b", vb, ib)):
        for cell in values:
            if len(ids[cell]) == 1:
                seconds[(side, cell)] = window_seconds(con, ids[cell][0])
    rows = ratios(va, vb, ma | mb, seconds)
    return Comparison(rows, sorted(set(va) - set(vb)), sorted(set(vb) - set(va)))


def write(result: Comparison, a: Side, b: Side, out: Path) -> dict[str, Path]:
    """compare.csv, compare.md and compare.png (R, ggplot2) in out."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / f"compare.{k}" for k in ("csv", "md", "png")}
    fields = list(Ratio.__dataclass_fields__)
    with open(paths["csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fields)
        writer.writeheader()
        writer.writerows(asdict(r) for r in result.rows)
    paths["md"].write_text(markdown(result, a, b))
    if result.rows:
        script = Path(__file__).resolve().parents[1] / "scripts" / "compare_plot.R"
        done = subprocess.run(["Rscript", str(script), str(paths["csv"]), str(paths["png"]), a.name, b.name],
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{script}: {done.stderr.strip()}")
    else:
        paths.pop("png")
    return paths


def _fmt(x: float) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.4g}"


def markdown(result: Comparison, a: Side, b: Side) -> str:
    lines = [f"# {a.name} vs {b.name}", "",
             "Ratio = A / B of each common cell's median (of its repetitions' steady-state medians); "
             "95% CI and verdict by the study's comparison method (workflow/R/statistics.R). "
             + (f"Test: {result.rows[0].test}." if result.rows else ""), "",
             "| cell | metric | reps A | reps B | median A | median B | ratio | 95% CI | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result.rows:
        lines.append(f"| {r.cell} | {r.metric} | {r.reps_a} | {r.reps_b} | {_fmt(r.median_a)} | {_fmt(r.median_b)} "
                     f"| {_fmt(r.ratio)} | {_fmt(r.low)}-{_fmt(r.high)} | {r.verdict} |")
    for name, cells in ((f"Only in A ({a.name})", result.only_a), (f"Only in B ({b.name})", result.only_b)):
        if cells:
            lines += ["", f"{name}:", ""] + [f"- {c}" for c in cells]
    return "\n".join(lines) + "\n"
