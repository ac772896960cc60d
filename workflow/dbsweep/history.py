"""History: each cell's value over the runs of a catalog, its change points, and the page that lists them.

A series is one cell of one study on one host (a `build` axis is not part of the cell: it is what the series
runs over); its points are the runs (repetitions), each the median of its steady-state window, ordered by
the run's start time, or by build (natural order: 10.11.2 before 10.11.10) then start time when the runs
have one. Change points: dbsweep.changepoints.
"""
from __future__ import annotations

import html
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from dbsweep.changepoints import METHOD, Change, change_points


@dataclass
class Point:
    run_id: int
    started: str
    build: str | None
    source: str
    value: float


@dataclass
class Series:
    study: str
    cell: str
    host: str
    metric: str
    points: list[Point]
    changes: list[Change] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.study}: {self.cell} on {self.host}"


def natural(text: str | None) -> tuple:
    """A sort key that orders the numbers inside text by value."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text or "") if p)


def load(con, study: str | None = None, by: str = "auto", cell: str | None = None) -> list[Series]:
    """Every series of the catalog (of one study, one cell when given) with its points in order."""
    rows = con.execute(
        "SELECT r.study, r.series, r.host, r.metric, r.run_id, CAST(r.started AS VARCHAR), r.build, s.path, r.median "
        "FROM runs r JOIN sources s USING (source_id) WHERE r.median IS NOT NULL AND (? IS NULL OR r.study = ?) "
        "AND (? IS NULL OR r.series = ?) ORDER BY r.study, r.series, r.host, r.started, r.run_id",
        [study, study, cell, cell]).fetchall()
    out: dict[tuple, Series] = {}
    for st, cell, host, metric, run_id, started, build, source, value in rows:
        series = out.setdefault((st, cell, host), Series(st, cell, host, metric, []))
        series.points.append(Point(run_id, started, build, source, value))
    for series in out.values():
        if by == "build" or (by == "auto" and any(p.build for p in series.points)):
            series.points.sort(key=lambda p: (natural(p.build), p.started or "", p.run_id))
    return list(out.values())


def detect(series: list[Series]) -> list[Series]:
    for s in series:
        s.changes = change_points([p.value for p in s.points])
    return series


def changes_largest_first(series: list[Series]) -> list[tuple[Series, Change]]:
    return sorted(((s, c) for s in series for c in s.changes), key=lambda sc: -abs(sc[1].size))


def label(p: Point) -> str:
    return f"{p.build} ({p.started[:16]})" if p.build else (p.started or "")[:16]


def svg(series: Series, change: Change | None = None, width: int = 640, height: int = 220) -> str:
    """The series as an inline SVG: points, the mean of each segment between change points, and the change
    drawn as a dashed line at its first run."""
    values = [p.value for p in series.points]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.05 or 1
    lo, hi = lo - pad, hi + pad
    left, right, top, bottom = 70, 10, 10, 40
    n = len(values)

    def x(i: float) -> float:
        return left + (width - left - right) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return top + (height - top - bottom) * (hi - v) / (hi - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(series.name)}">',
             f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" '
             'fill="white" stroke="#bbb"/>']
    for v in (lo + pad, hi - pad):
        parts.append(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{v:.4g}</text>')
    parts.append(f'<text x="12" y="{(top + height - bottom) / 2:.0f}" font-size="11" '
                 f'transform="rotate(-90 12 {(top + height - bottom) / 2:.0f})" text-anchor="middle">'
                 f'{html.escape(series.metric or "")}</text>')
    for i, anchor in ((0, "start"), (n - 1, "end")):
        parts.append(f'<text x="{x(i):.1f}" y="{height - bottom + 16}" font-size="11" text-anchor="{anchor}">'
                     f'{html.escape(label(series.points[i]))}</text>')
    bounds = [0] + [c.index for c in series.changes] + [n]
    for a, b in itertools.pairwise(bounds):
        mean = sum(values[a:b]) / (b - a)
        parts.append(f'<line x1="{x(a):.1f}" x2="{x(b - 1):.1f}" y1="{y(mean):.1f}" y2="{y(mean):.1f}" '
                     'stroke="#E69F00" stroke-width="2"/>')
    if change is not None:
        cx = x(change.index - 0.5)
        parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{height - bottom}" stroke="#D55E00" '
                     'stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{cx:.1f}" y="{height - bottom + 30}" font-size="11" text-anchor="middle" '
                     f'fill="#D55E00">{html.escape(label(series.points[change.index]))}</text>')
    points = "".join(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2"/>' for i, v in enumerate(values))
    parts.append(f'<g fill="#0072B2">{points}</g></svg>')
    return "".join(parts)


def page(series: list[Series], catalog: Path) -> str:
    """results/history.html: the changes, largest first, each with its plot; self-contained."""
    changes = changes_largest_first(series)
    e = html.escape
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>dbsweep history</title><style>"
           "body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
           "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
           ".up{color:#0072B2}.down{color:#D55E00}</style></head><body>",
           f"<h1>History: {len(changes)} change{'s' * (len(changes) != 1)} in {len(series)} series</h1>",
           f"<p>Catalog {e(str(catalog))}. A series is a cell of a study on one host; each point a run's median "
           f"(steady-state window) of its throughput. Change points: {e(METHOD)}. Size: mean after / mean "
           "before - 1, over the segments on either side.</p>"]
    if changes:
        out.append("<table><tr><th>#</th><th>series</th><th>size</th><th>before → after</th>"
                   "<th>first run</th><th>p</th></tr>")
        for i, (s, c) in enumerate(changes, 1):
            first = s.points[c.index]
            out.append(f"<tr><td><a href='#c{i}'>{i}</a></td><td>{e(s.name)}</td>"
                       f"<td class='{'up' if c.size > 0 else 'down'}'>{100 * c.size:+.1f}%</td>"
                       f"<td>{c.before:.4g} → {c.after:.4g}</td><td>{e(label(first))}</td><td>{c.p:.3g}</td></tr>")
        out.append("</table>")
    for i, (s, c) in enumerate(changes, 1):
        first = s.points[c.index]
        out.append(f"<h2 id='c{i}'>{i}. {e(s.name)}: {100 * c.size:+.1f}% {e(s.metric or '')}</h2>"
                   f"<p>First run after the change: {e(label(first))}, run {first.run_id} from {e(first.source)}; "
                   f"{c.before:.4g} → {c.after:.4g}, p = {c.p:.3g}.</p>{svg(s, c)}")
    quiet = [s for s in series if not s.changes]
    if quiet:
        out.append(f"<h2>Without a change ({len(quiet)})</h2><ul>"
                   + "".join(f"<li>{e(s.name)}: {len(s.points)} runs</li>" for s in quiet) + "</ul>")
    out.append("</body></html>\n")
    return "\n".join(out)


def write(series: list[Series], catalog: Path, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page(series, catalog))
    tmp.replace(out)
