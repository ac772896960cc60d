"""The study's summary page, readable without Snakemake: results/index.html and results/summary.md.

The page states the study's question and matrix, shows its tables and plots, its provenance (host,
CPU, kernel, tool and server versions, the commands of each cell), and lists every cell that did not
give a result and why: not applicable, failed (the error of its latest attempt), killed, not
collected, or not run.

It is written by rule summary when the study is complete, and by the workflow's onerror handler
when jobs failed: rule all cannot complete then, so no rule could write it. Failed cells are read
from results/runs itself (a repetition with no run.json, and its latest attempt~*/run.json), never
from Snakemake's state, so the page is right whichever run wrote it. The same pass writes the
reStructuredText that `snakemake --report` includes: the provenance line every caption ends with,
and the report's front page.
"""
from __future__ import annotations

import csv
import gzip
import html
import json
import os
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from . import answer, canary, definitions, delivered, disturbances, markdown

COMMAND_CELLS = 50  # cells whose commands the page lists; the rest are in their run.json


@dataclass
class Study:
    """What the page says about the study, from the config and the matrix."""

    name: str
    description: str
    matrix: dict[str, list[str]]  # axis -> its values over the cells, in axis order
    cells: int
    repetitions: int
    rep_dirs: list[Path]  # results/runs/<cell>/rep~N of every repetition of the matrix
    not_applicable: list[tuple[str, str]] = field(default_factory=list)
    headline: list[str] = field(default_factory=list)  # analysis.headline: plot names; empty: the default
    images: dict[str, str] = field(default_factory=dict)  # cell -> its prepared image (logs/prepare/<image>.log)
    rounds: str = ""  # with repeat_until: each round's smallest detectable difference (rounds.text)
    include_deviated: bool = False  # analysis.include_deviated: deviated repetitions stay in the comparisons
    baseline: dict[str, str] = field(default_factory=dict)  # axis -> its baseline value (the study's)


@dataclass
class Problem:
    """A repetition with no result: failed (its latest attempt failed), killed (the attempt has no
    manifest), not collected (measured; collect failed or did not run), or not run."""

    cell: str
    rep: int
    state: str
    reason: str
    attempt: Path | None = None
    log: Path | None = None  # the job's log, when it has one


def problems(rep_dirs: list[Path], images: dict[str, str] | None = None) -> list[Problem]:
    """Repetitions without a run.json, each with what its latest attempt left behind, or the failure of
    the prepare job of its image (images: cell -> image)."""
    out = []
    for rep_dir in rep_dirs:
        results, cell = str(rep_dir.parent).rsplit("/runs/", 1)
        rep = int(rep_dir.name.split("~", 1)[1])
        if (rep_dir / "run.json").exists():
            if not (rep_dir / "summary.json").exists():
                log = Path(results, "logs", "collect", cell, f"{rep_dir.name}.log")
                out.append(Problem(cell, rep, "not collected", _last_line(log) or
                                   "measured, but collecting its raw output failed or did not run",
                                   log=log if log.exists() else None))
            continue
        log = Path(results, "logs", "run", cell, f"{rep_dir.name}.log")
        log = log if log.exists() else None
        attempts = sorted(rep_dir.glob("attempt~*"), key=lambda p: (p.stat().st_mtime, p.name))
        if not attempts:
            prepare = Path(results, "logs", "prepare", f"{(images or {}).get(cell, '')}.log")
            failure = _last_line(prepare) if cell in (images or {}) else ""
            if failure.startswith("dbsweep: "):  # its dataset could not be prepared
                out.append(Problem(cell, rep, "failed", failure.removeprefix("dbsweep: "),
                                   log=prepare))
            elif log is not None and _last_line(log).startswith("dbsweep: "):  # failed before an attempt
                out.append(Problem(cell, rep, "failed", _last_line(log).removeprefix("dbsweep: "), log=log))
            else:
                out.append(Problem(cell, rep, "not run", "the workflow stopped before this repetition"))
            continue
        latest = attempts[-1]
        try:
            record = json.loads((latest / "run.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            out.append(Problem(cell, rep, "killed", "the attempt stopped before it wrote its manifest", latest, log))
            continue
        reason = record.get("error") or f"status {record.get('status')}"
        out.append(Problem(cell, rep, "failed", reason, latest, log))
    return out


def write(study: Study, results: Path, targets: list[Path], complete: bool, log: str | None = None,
          user: list[Path] = ()) -> dict[str, Path]:
    """Write index.html, summary.md and the report's .rst files under results/; return their paths.
    targets: the analysis outputs (tables as .md, plots as .png) shown when complete; log: Snakemake's
    log of a run that failed; user: the folders of the study's own analysis scripts (results/user/<stem>)."""
    tables_dir = results / "tables"
    provenance = _json(tables_dir / "provenance.json") if complete else None
    tables = [p for p in targets if p.suffix == ".md"] if complete else []
    skipped = _csv(tables_dir / "skipped_plots.csv") if complete else []
    # a skipped plot is listed with its reason, not shown as an image of that reason
    skipped_plots = {r["plot"] for r in skipped}
    plots = [p for p in targets if p.suffix == ".png" and p.stem not in skipped_plots] if complete else []
    axes = list(study.matrix)
    parsed = {p: markdown.parse(p.read_text()) for p in tables}
    # the longest first: the statistics' method before short repeated notes (the provenance footer)
    method = sorted(markdown.repeated_paragraphs(list(parsed.values())), key=len, reverse=True)
    compared = answer.comparisons(tables_dir / "comparisons.csv", axes) if complete else []
    shown, missing = answer.headline(study.headline, list(dict.fromkeys(c.axis for c in compared)),
                                     [p.stem for p in plots])
    page = {
        "study": study,
        "complete": complete,
        "log": log,
        "written": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "comparisons": compared,
        "recovery": answer.recovery(tables_dir / "recovery.csv", axes) if complete else [],
        # what the answer says before the comparisons: an open-loop study's cells at their rate
        "first": [s for s in [answer.open_loop(tables_dir / "openloop.csv", axes)] if s] if complete else [],
        "sections": shape_answers(tables_dir, study, compared) if complete else [],
        "noise": " ".join(filter(None, [
            answer.noise_text(answer.noise(tables_dir / "comparisons.csv", tables_dir / "cell_stats.csv"),
                              rounds=bool(study.rounds))
            if complete and (compared or (tables_dir / "cell_stats.csv").exists()) else "",
            study.rounds if complete else ""])),
        "user": user_outputs(list(user)) if complete else [],
        "headline": [next(p for p in plots if p.stem == name) for name in shown],
        "headline_missing": missing,
        "tables": [(p, markdown.tidy(blocks, axes, set(method))) for p, blocks in parsed.items()],
        "method": method,
        "csv": [p for p in targets if p.suffix == ".csv"] if complete else [],
        "plots": [p for p in plots if p.stem not in shown],
        "explore": results / "explore.html" if complete and (results / "explore.html").exists() else None,
        "provenance": provenance,
        "commands": _commands(study.rep_dirs) if complete else [],
        "problems": problems(study.rep_dirs, study.images),
        "skipped_plots": skipped,
        "canary": next((canary.line(p) for p in targets if p.name == "canary.csv"), "") if complete else "",
        "host": disturbances.line(study.rep_dirs) if complete else "",
        "delivered": delivered.report(tables_dir / "delivered.csv.gz", axes, study.include_deviated)
        if complete else None,
    }
    page["figures"] = page_figures(page, study)
    out = {"html": results / "index.html", "md": results / "summary.md",
           "caption": results / "report" / "provenance.rst", "front": results / "report" / "study.rst"}
    out["caption"].parent.mkdir(parents=True, exist_ok=True)
    _replace(out["html"], to_html(page, results))
    _replace(out["md"], to_markdown(page, results))
    _replace(out["caption"], caption_rst(study, provenance))
    _replace(out["front"], front_rst(page))
    return out


def cells_line(study: Study) -> str:
    return (f"{study.cells} cell{'s' if study.cells != 1 else ''} × {study.repetitions} "
            f"repetition{'s' if study.repetitions != 1 else ''}")


def matrix_line(study: Study) -> str:
    axes = "; ".join(f"{axis}: {', '.join(values)}" for axis, values in study.matrix.items())
    return f"{axes} ({cells_line(study)})"


def provenance_lines(provenance: dict | None) -> list[tuple[str, str]]:
    """(label, text) pairs: host, CPU, kernel, memory, the kernel's command line and settings (sysctl), then
    every tool and server version."""
    if not provenance:
        return []
    lines = [("host", provenance.get("host") or "?"), ("CPU", provenance.get("cpu") or "?"),
             ("kernel", provenance.get("kernel") or "?")]
    if provenance.get("memory_gb") is not None:
        lines.append(("memory", f"{provenance['memory_gb']} GB"))
    if provenance.get("kernel_cmdline"):
        lines.append(("kernel command line", provenance["kernel_cmdline"]))
    if provenance.get("sysctl"):
        lines.append(("sysctl", ", ".join(f"{name}={value}" for name, value in provenance["sysctl"].items())))
    servers = provenance.get("servers", {})  # family -> every version the study ran
    tools = provenance.get("tools", {}) | {family: "; ".join(versions) for family, versions in servers.items()}
    lines += [(name, str(version)) for name, version in sorted(tools.items())]
    return lines


# --- answers for every shape of study, and the study's own analysis -----------------------------

def shape_answers(tables_dir: Path, study: Study, compared: list) -> list[answer.Section]:
    """What the answer says besides the comparisons with a baseline: a workload axis side by side (never
    compared by the statistics rule), each cell's own figures when nothing was compared, a query
    study's time per execution and an insert-benchmark study's rates per phase."""
    axes = list(study.matrix)
    out = [answer.side_by_side(tables_dir / "cell_stats.csv", tables_dir / "comparisons.csv", axes,
                               baseline=study.baseline.get("workload"))]
    if not compared and out[0] is None:
        out.append(answer.cells(tables_dir / "cell_stats.csv", tables_dir / "summary.csv.gz", axes))
    out.append(answer.queries(tables_dir / "query_timing.csv", axes))
    out.append(answer.insert_phases(tables_dir / "insert_benchmark.csv", axes))
    return [section for section in out if section]


@dataclass
class UserOutput:
    """What one of the study's own analysis scripts wrote (its outputs.json): tables to show, plots,
    and other files to link."""

    name: str
    folder: Path
    tables: list[tuple[Path, list[markdown.Block]]]
    plots: list[Path]
    links: list[Path]


USER_PLOTS = (".png", ".svg", ".jpg")  # shown as images; a PDF is linked
USER_TABLE_ROWS = 50  # rows of a CSV the page shows; the file has them all


def user_outputs(folders: list[Path]) -> list[UserOutput]:
    """Each script's folder as its outputs.json lists it: .md tables parsed, .csv ones as a table (a CSV
    with a .md of the same name is shown once, as the .md), plots as images, the rest as links."""
    out = []
    for folder in folders:
        listed = _json(folder / "outputs.json") or {}
        files = [folder / name for kind in ("tables", "plots", "other") for name in listed.get(kind, [])]
        tables, plots, links = [], [], []
        for path in files:
            if path.suffix == ".md":
                tables.append((path, markdown.parse(path.read_text(errors="replace"))))
            elif path.suffix == ".csv" and not path.with_suffix(".md").exists():
                tables.append((path, _csv_table(path)))
            elif path.suffix in USER_PLOTS:
                plots.append(path)
            elif path.suffix != ".csv":
                links.append(path)
        out.append(UserOutput(folder.name, folder, tables, plots, links))
    return out


def _csv_table(path: Path) -> list[markdown.Block]:
    """A CSV as a table of its first USER_TABLE_ROWS rows, saying so when it has more."""
    with open(path, newline="", errors="replace") as f:
        rows = list(csv.reader(f))
    if not rows:
        return [markdown.Para(f"{path.name}: empty")]
    out: list[markdown.Block] = [markdown.Table(rows[0], ["left"] * len(rows[0]), rows[1:USER_TABLE_ROWS + 1])]
    if len(rows) - 1 > USER_TABLE_ROWS:
        out.append(markdown.Para(f"The first {USER_TABLE_ROWS} of {len(rows) - 1} rows; the file has them all."))
    return out


def _user_html(outputs: list[UserOutput], results: Path) -> str:
    e = html.escape
    if not outputs:
        return ""
    parts = ['<h2 id="user">Your own analysis</h2>']
    for o in outputs:
        parts.append(f'<section class="user" id="user-{e(o.name)}"><h3>{e(o.name)} <span class="links">'
                     f'<a href="{e(_rel(o.folder, results))}/">folder</a></span></h3>')
        if not (o.tables or o.plots or o.links):
            parts.append("<p>The script wrote nothing.</p>")
        for path, blocks in o.tables:
            parts.append(f'<h4>{e(path.name)} <span class="links"><a href="{e(_rel(path, results))}">file</a>'
                         f"</span></h4>{markdown.to_html(blocks, level=4)}")
        parts += [_figure_html(path, results) for path in o.plots]
        if o.links:
            parts.append("<p>Other files: " + ", ".join(f'<a href="{e(_rel(p, results))}">{e(p.name)}</a>'
                                                         for p in o.links) + "</p>")
        parts.append("</section>")
    return "\n".join(parts)


def _user_markdown(outputs: list[UserOutput], results: Path) -> list[str]:
    if not outputs:
        return []
    out = ["## Your own analysis", ""]
    for o in outputs:
        out += [f"### {md_escape(o.name)}", ""]
        for path, blocks in o.tables:
            out += [f"#### {md_escape(path.name)}", "", markdown.to_markdown(blocks, 4).strip(), ""]
        out += [f"![{md_escape(p.stem)}]({_md_link(_rel(p, results))})\n" for p in o.plots]
        out += [f"[{md_escape(p.name)}]({_md_link(_rel(p, results))})\n" for p in o.links]
    return out


# The names the answer's lines use for their figures, defined in the Method section with the tables',
# each with the words that show it is on the page.
ANSWER_FIGURES = {"ratio": " ratio", "run-to-run noise": "Run-to-run noise",
                  "throughput": "throughput ", "latency (median of per-second means)": "per-second means",
                  "latency (median of per-second p95s)": "per-second p95s",
                  "the tool's own latency over the whole run": "the tool's own latency",
                  "side by side ratio": "side by side", "ms per execution": "ms per execution",
                  "inserts_s": "inserted rows/s", "queries_s": " queries/s",
                  "rate": "target rate ", "rate_achieved": "achieved ", "queue_max": "longest queue",
                  "latency from arrival": "latency from arrival"}


def page_figures(page: dict, study: Study) -> list[tuple[str, str]]:
    """Each figure the page's tables and answer show, with its one-sentence definition (definitions.py):
    the columns of every table (axes and their values are not figures) and the answer's names."""
    said = " ".join([page.get("noise") or ""] + [f"{c.axis} {c.metric} ratio {' '.join(c.lines)}"
                                                  for c in page["comparisons"]]
                    + [f"{x.title} {' '.join(x.lines)}" for x in page["first"] + page["sections"]])
    headers = [name for name, words in ANSWER_FIGURES.items() if words in said]
    for _, blocks in page["tables"]:
        for block in blocks:
            if isinstance(block, markdown.Table):
                headers += block.header + [h for part in block.parts for h in part.header]
    not_figures = set(study.matrix) | {v for values in study.matrix.values() for v in values}
    return definitions.figures(headers, not_figures)[0]


def plot_definitions(page: dict) -> list[tuple[str, str]]:
    """What each plot the page shows draws, with its units (definitions.PLOTS); the user's own are theirs."""
    shown = [p.stem for p in page["headline"] + page["plots"]]
    return [(name, definitions.PLOTS[name]) for name in shown if name in definitions.PLOTS]


def _figures_html(figures: list[tuple[str, str]], plots: list[tuple[str, str]] = ()) -> str:
    def dl(items):
        return "".join(f"<dt>{html.escape(n)}</dt><dd>{html.escape(d)}.</dd>" for n, d in items)
    out = ""
    if figures:
        out += f'<h3 id="figures">Figures on this page</h3><dl class="figures">{dl(figures)}</dl>'
    if plots:
        out += f'<h3 id="plot-figures">What each plot draws</h3><dl class="figures">{dl(plots)}</dl>'
    return out


def _figures_markdown(figures: list[tuple[str, str]], plots: list[tuple[str, str]] = ()) -> list[str]:
    out = []
    for title, items in (("Figures on this page", figures), ("What each plot draws", plots)):
        if items:
            out += [f"### {title}", ""] + [f"- **{md_escape(n)}**: {md_escape(d)}." for n, d in items] + [""]
    return out


# --- HTML ---------------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 70em; padding: 0 1em; color: #222;
       overflow-wrap: anywhere; }
h1 { margin-bottom: 0.2em; } .question { font-size: 1.2em; margin-top: 0; }
.status { padding: 0.6em 1em; border-radius: 4px; }
.complete { background: #e6f4ea; } .incomplete { background: #fdecea; border: 1px solid #d93025; }
.answer ul { padding-left: 1.2em; } .answer li { margin: 0.15em 0; } .noise { color: #444; }
table { border-collapse: collapse; font-size: 0.9em; overflow-wrap: normal; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; } th { background: #f2f2f2; position: sticky; top: 0; }
.scroll { overflow: auto; max-width: 100%; max-height: 32em; margin: 0.5em 0 1.5em; }
.table td, .table th { white-space: nowrap; } .part { margin: 0.8em 0 0; font-style: italic; }
.links { font-size: 0.8em; font-weight: normal; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; } figure { margin: 1em 0 2em; }
@media (max-width: 700px) {  /* a plot's 11-point labels stay readable: the plot scrolls sideways */
  figure.plot { overflow-x: auto; } figure.plot img { max-width: none; } }
code, pre { background: #f6f6f6; } pre { padding: 0.5em; overflow-x: auto; white-space: pre-wrap; }
dt { font-weight: bold; } dd { margin: 0 0 0.3em 1.5em; }
.deviated { padding: 0.6em 1em; border-radius: 4px; background: #fff4e5; border: 1px solid #e37400; }
.verified { color: #444; }
"""


def to_html(page: dict, results: Path) -> str:
    study, e = page["study"], html.escape
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>dbsweep: {e(study.name)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{e(study.name)}</h1>",
        f'<p class="question">{e(study.description)}</p>' if study.description else "",
        _status_html(page),
        _delivered_html(page, results) if _deviated(page) else "",
        _answer_html(page, results),
        "" if _deviated(page) else _delivered_html(page, results),
        _query_plans_html(page, results),
        _statement_plans_html(page, results),
    ]
    if page["tables"]:
        parts.append('<h2 id="tables">Tables</h2>')
        for path, blocks in page["tables"]:
            csv_path = path.with_suffix(".csv")
            links = [f'<a href="{e(_rel(csv_path, results))}">CSV</a>'] if csv_path.exists() else []
            links += ['<a href="#method">method</a>'] if page["method"] else []
            body = markdown.to_html(blocks, level=3)
            if not any(isinstance(b, markdown.Table) for b in blocks):  # nothing to show for this study
                body = f"<details><summary>no rows for this study</summary>{body}</details>"
            parts.append(f'<section class="table" id="table-{e(path.stem)}"><h3>{e(path.stem)} '
                         f'<span class="links">{" · ".join(links)}</span></h3>{body}</section>')
    parts.append(_user_html(page["user"], results))
    if page["method"] or page["figures"] or plot_definitions(page):
        parts.append('<h2 id="method">Method</h2>' + "".join(f"<p>{markdown.inline_html(t)}</p>"
                                                             for t in page["method"]))
        parts.append(_figures_html(page["figures"], plot_definitions(page)))
    csv_only = [p for p in page["csv"] if not p.with_suffix(".md").exists()]
    if csv_only:
        parts.append("<p>Tables as CSV only: " + ", ".join(
            f'<a href="{e(_rel(p, results))}">{e(p.name)}</a>' for p in csv_only) + "</p>")
    if page["plots"]:
        parts.append('<h2 id="plots">Plots</h2>' if not page["headline"] else '<h2 id="plots">Other plots</h2>')
        parts += [_figure_html(path, results) for path in page["plots"]]
    parts += ["<h2>Matrix</h2>", _dl([(axis, ", ".join(values)) for axis, values in study.matrix.items()]
                                     + [("cells", cells_line(study))])]
    parts.append('<h2 id="not-run">Cells without results</h2>')
    parts.append(_problems_html(page, results))
    if page["provenance"]:
        parts += ['<h2 id="provenance">Provenance</h2>', _dl(provenance_lines(page["provenance"]))]
    if page["commands"]:
        parts.append("<h3>Commands (repetition 1 of each cell)</h3>")
        for cell, commands in page["commands"]:
            parts.append(f"<details><summary><code>{e(cell)}</code></summary><pre>"
                         + "\n".join(e(c) for c in commands) + "</pre></details>")
        parts.append(_more_commands(page, lambda s: f"<p>{e(s)}</p>"))
    parts.append(f"<p><small>Written {e(page['written'])} by dbsweep. Raw output, manifests and logs: "
                 f'<a href="runs/">runs/</a>, <a href="logs/">logs/</a>.</small></p></body></html>')
    return "\n".join(p for p in parts if p) + "\n"


ANSWER_LINES = 12  # pairs shown per comparison before the rest fold away
RECOVERY_TITLE = "Through each timed event (results/tables/recovery.csv)"


def _answer_html(page: dict, results: Path) -> str:
    e = html.escape
    if not (page["comparisons"] or page["recovery"] or page["sections"] or page["headline"] or page["explore"]
            or page["first"]):
        return ""
    out = ['<section class="answer" id="answer"><h2>Answer</h2>']
    if page["recovery"]:
        out.append(f"<h3>{RECOVERY_TITLE}</h3><ul>{''.join(f'<li>{e(line)}</li>' for line in page['recovery'])}</ul>")
    for section in page["first"]:
        out.append(f"<h3>{e(section.title)}</h3><ul>{''.join(f'<li>{e(line)}</li>' for line in section.lines)}</ul>")
    for c in page["comparisons"]:
        items = [f"<li>{e(line)}</li>" for line in c.lines]
        more = (f"<details><summary>{len(items) - ANSWER_LINES} more</summary><ul>{''.join(items[ANSWER_LINES:])}"
                "</ul></details>") if len(items) > ANSWER_LINES else ""
        out.append(f"<h3>{e(c.axis)} against {e(c.baseline)} ({e(c.metric)}, ratio [95% CI], verdict)</h3>"
                   f"<ul>{''.join(items[:ANSWER_LINES])}</ul>{more}")
    for section in page["sections"]:
        out.append(f"<h3>{e(section.title)}</h3><ul>{''.join(f'<li>{e(line)}</li>' for line in section.lines)}</ul>")
    if page["noise"]:
        out.append(f'<p class="noise">{e(page["noise"])} <a href="#method">Method</a>.</p>')
    if page["explore"]:
        out.append(f'<p><a href="{e(_rel(page["explore"], results))}">Explore the per-second series</a>: '
                   "throughput, latency, CPU, IO and server counters of chosen cells on one time axis.</p>")
    out += [_figure_html(path, results) for path in page["headline"]]
    if page["headline_missing"]:
        out.append(f"<p>Headline plots this study did not make: {e(', '.join(page['headline_missing']))}.</p>")
    out.append("</section>")
    return "\n".join(out)


def _deviated(page: dict) -> bool:
    return bool(page.get("delivered") and page["delivered"].deviations)


def _delivered_html(page: dict, results: Path) -> str:
    """Declared vs delivered (delivered.report): before the answer when a setting deviated, else after it.
    Before it, the sentence that says so is shown and the settings are one tap away (a details element), so
    that the answer still starts in the first screen of a phone."""
    report, e = page.get("delivered"), html.escape
    if report is None:
        return ""
    out = ['<section class="delivered" id="delivered"><h2>Declared vs delivered</h2>']
    out += [f'<p class="deviated">{e(line)}</p>' for line in report.lines]
    table = results / "tables" / "delivered.csv.gz"
    verified = (f'<p class="verified">{e(report.verified_line())} Every check: '
                f'<a href="{e(_rel(table, results))}">{e(table.name)}</a>.</p>')
    if report.deviations:
        items = [f"<li>{e(line)}</li>" for line in report.deviations]
        n = len(items)
        out.append(f"<details><summary>The {n} setting{'s' if n != 1 else ''} that ran otherwise, and what was "
                   f"verified</summary><ul>{''.join(items)}</ul>{verified}</details>")
    else:
        out.append(verified)
    out.append("</section>")
    return "\n".join(out)


def _delivered_md(page: dict) -> list[str]:
    report = page.get("delivered")
    if report is None:
        return []
    return (["## Declared vs delivered", ""] + [md_escape(line) for line in report.lines]
            + [f"- {md_escape(line)}" for line in report.deviations] + ["", md_escape(report.verified_line()), ""])


def statement_plans(results: Path, axes: list[str]) -> list[str]:
    """One line per statement a sysbench script ran whose plan was kept before each window (plans.csv.gz
    without a query-timing table): one plan in every cell, or each plan with the cells that ran it, so a
    reader sees whether a plan changed between cells."""
    if (results / "tables" / "query_timing.csv").exists():
        return []  # a query study's plans have their own section
    path = results / "tables" / "plans.csv.gz"
    if not path.exists():
        return []
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    by_statement: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        cells = by_statement.setdefault(row["query"], {}).setdefault(row["fingerprint"], [])
        cell = ", ".join(f"{a} {row[a]}" for a in axes if row.get(a) and len({r.get(a) for r in rows}) > 1)
        if cell not in cells:
            cells.append(cell)
    lines = []
    for statement, fingerprints in by_statement.items():
        n = len({c for cells in fingerprints.values() for c in cells})
        if len(fingerprints) == 1:
            (fp,) = fingerprints
            lines.append(f"{statement}: one plan ({fp}) in {'every one of the ' if n > 1 else 'the '}{n} "
                         f"cell{'s' if n != 1 else ''}")
        else:
            lines.append(f"{statement}: {len(fingerprints)} plans: " + "; ".join(
                f"{fp} in {', '.join(cells) or 'the cell'}" for fp, cells in fingerprints.items()))
    return lines


def _statement_plans_html(page: dict, results: Path) -> str:
    e = html.escape
    lines = statement_plans(results, list(page["study"].matrix)) if page["complete"] else []
    if not lines:
        return ""
    table = results / "tables" / "plans.csv.gz"
    return ('<section id="statement-plans"><h2>Statement plans</h2><p>The plan the server chose for each distinct '
            "statement of the sysbench script, asked for once per repetition before its window (its timing "
            "unchanged); a plan's fingerprint is a hash of its shape without costs, estimates and timings. "
            f'Every plan\'s file: <a href="{e(_rel(table, results))}">{e(table.name)}</a>.</p><ul>'
            + "".join(f"<li>{e(line)}</li>" for line in lines) + "</ul></section>")


def _query_plans_html(page: dict, results: Path) -> str:
    """The plan each query configuration ran, from results/tables/query_timing.csv: its fingerprint, whether it
    is the baseline's plan, its time against the baseline, and links to the server's JSON of every repetition
    (under runs/), and each plan's shape once. Nothing for a study without kept plans."""
    from . import plans

    e = html.escape
    rows = [r for r in (_csv(results / "tables" / "query_timing.csv") if page["complete"] else [])
            if r.get("name") == "ms" and r.get("plan_fingerprint")]
    if not rows:
        return ""
    same = sum(r["plan_vs_baseline"] == "same plan" for r in rows)
    compared = sum(r["plan_vs_baseline"] in ("same plan", "other plan", "plans vary") for r in rows)
    said = (f" {same} of {compared} compared configurations ran their baseline's plan"
            + (": what differs there is not the optimizer's choice." if same else ".")) if compared else ""
    out = ['<section id="query-plans"><h2>Query plans</h2>',
           "<p>The plan the server chose in each configuration, kept once per repetition after its timed "
           "executions. Its fingerprint is a hash of the plan's shape: node and access types, tables, indexes, "
           "join order and join algorithm, without costs, estimates, timings, rows and buffers."
           f"{e(said)}</p>",
           '<div class="scroll"><table><tr><th>configuration</th><th>plan</th><th>against the baseline</th>'
           "<th>time relative to the baseline</th><th>verdict</th><th>plan JSON</th></tr>"]
    for r in rows:
        links = " ".join(f'<a href="{e(_rel(results / f, results))}">rep {e(rep[1] if rep else "?")}</a>'
                         for f in r.get("plan_files", "").split() for rep in [re.search(r"/rep~(\d+)/", f)])
        relative = f"{float(r['relative']):.3g}" if r.get("relative") not in (None, "", "NA") else ""
        out.append(f"<tr><td>{e(r['configuration'])}</td><td><code>{e(r['plan_fingerprint'])}</code></td>"
                   f"<td>{e(r['plan_vs_baseline'])}</td><td>{e(relative)}</td><td>{e(r.get('verdict') or '')}</td>"
                   f"<td>{links}</td></tr>")
    out.append("</table></div>")
    shown = {}  # each plan's shape once, what its fingerprint is of, to read two plans side by side
    for r in rows:
        files = r.get("plan_files", "").split()
        if r["plan_fingerprint"] not in shown and len(r["plan_fingerprint"].split()) == 1 and files:
            try:
                shape = json.dumps(plans.shape(json.loads((results / files[0]).read_text())), indent=1)
            except (OSError, ValueError):
                continue
            shown[r["plan_fingerprint"]] = (r["configuration"], shape)
    out += [f"<details><summary>Plan <code>{e(fp)}</code>, as in {e(where)} (its shape: what the fingerprint is "
            f"of)</summary><pre>{e(shape)}</pre></details>" for fp, (where, shape) in shown.items()]
    out.append("</section>")
    return "\n".join(out)


def _figure_html(path: Path, results: Path) -> str:
    """The image links to itself at full size; on a phone it scrolls sideways at a readable width
    (STYLE: at its natural size)."""
    src, name = html.escape(_rel(path, results)), html.escape(path.stem)
    return (f'<figure class="plot"><a href="{src}"><img src="{src}" alt="{name}"></a>'
            f"<figcaption>{name} (tap or click for full size)</figcaption></figure>")


def _status_html(page: dict) -> str:
    if page["complete"]:
        notes = "".join(f'<p class="{key}">{html.escape(page[key])}</p>' for key in ("canary", "host") if page.get(key))
        return (f'<p class="status complete">Complete: every applicable cell has its results '
                f"({html.escape(cells_line(page['study']))}).</p>{notes}")
    return f'<p class="status incomplete"><strong>Incomplete.</strong> {html.escape(status_text(page))}</p>'


def status_text(page: dict) -> str:
    """Why an incomplete page is incomplete, in a sentence or two."""
    counts = {}
    for p in page["problems"]:
        counts[p.state] = counts.get(p.state, 0) + 1
    if counts:
        what = ", ".join(f"{n} {state}" for state, n in counts.items())
        why = f"repetitions without results: {what} (listed below)"
    else:
        why = "every repetition has its results, and the analysis failed (see logs/)"
    log = f" Snakemake's log names the failed jobs: {page['log']}." if page.get("log") else ""
    return (f"The run of {page['written']} stopped with jobs failed; {why}.{log} "
            "Tables and plots appear here when every cell has run and been analysed.")


def _problems_html(page: dict, results: Path) -> str:
    e = html.escape
    def links(p: Problem) -> str:
        found = [(p.attempt, p.attempt.name if p.attempt else ""), (p.log, "log")]
        return " · ".join(f'<a href="{e(_rel(path, results))}">{e(text)}</a>' for path, text in found if path)

    rows = [(p.cell, str(p.rep), p.state, p.reason, links(p)) for p in page["problems"]]
    rows += [(cell, "", "not applicable", why, "") for cell, why in page["study"].not_applicable]
    parts = []
    if rows:
        parts.append('<div class="scroll"><table><tr><th>cell</th><th>rep</th><th>state</th><th>reason</th>'
                     "<th>attempt, log</th></tr>"
                     + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row[:4]) + f"<td>{row[4]}</td></tr>"
                               for row in rows) + "</table></div>")
    else:
        parts.append("<p>None: every cell of the matrix has its results.</p>")
    if page["skipped_plots"]:
        columns = list(page["skipped_plots"][0])
        parts.append('<h3>Plots skipped</h3><div class="scroll"><table><tr>'
                     + "".join(f"<th>{e(c)}</th>" for c in columns) + "</tr>"
                     + "".join("<tr>" + "".join(f"<td>{e(r[c] or '')}</td>" for c in columns) + "</tr>"
                               for r in page["skipped_plots"]) + "</table></div>")
    return "\n".join(parts)


def _dl(items: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in items) + "</dl>"


def markdown_html(text: str, level: int = 0) -> str:
    """The Markdown the analysis writes (headings, pipe tables, paragraphs, _emphasis_, **strong**,
    `code`) as HTML, every character of it escaped; headings are pushed down `level` levels."""
    return markdown.to_html(markdown.parse(text), level)


# --- Markdown -----------------------------------------------------------------------------------

def to_markdown(page: dict, results: Path) -> str:
    study, m = page["study"], md_escape
    out = [f"# {m(study.name)}", ""]
    if study.description:
        out += [m(study.description), ""]
    out += [f"**Complete**: every applicable cell has its results ({cells_line(study)})." if page["complete"] else
            f"**Incomplete**: {md_escape(status_text(page))}", ""]
    for line in (page.get("canary"), page.get("host")):
        if line:
            out += [m(line), ""]
    if _deviated(page):
        out += _delivered_md(page)
    if page["comparisons"] or page["recovery"] or page["sections"] or page["headline"] or page["first"]:
        out += ["## Answer", ""]
        if page["recovery"]:
            out += [f"### {RECOVERY_TITLE}", ""] + [f"- {m(line)}" for line in page["recovery"]] + [""]
        for section in page["first"]:
            out += [f"### {m(section.title)}", ""] + [f"- {m(line)}" for line in section.lines] + [""]
        for c in page["comparisons"]:
            out += [f"### {m(c.axis)} against {m(c.baseline)} ({m(c.metric)}, ratio [95% CI], verdict)", ""]
            out += [f"- {m(line)}" for line in c.lines] + [""]
        for section in page["sections"]:
            out += [f"### {m(section.title)}", ""] + [f"- {m(line)}" for line in section.lines] + [""]
        if page["noise"]:
            out += [m(page["noise"]), ""]
        if page["explore"]:
            out += [f"[Explore the per-second series]({_md_link(_rel(page['explore'], results))})", ""]
        out += [f"![{m(p.stem)}]({_md_link(_rel(p, results))})\n" for p in page["headline"]]
    if not _deviated(page):
        out += _delivered_md(page)
    if page["tables"]:
        out += ["## Tables", ""]
        for path, blocks in page["tables"]:
            out += [f"### {m(path.stem)}", "", markdown.to_markdown(blocks, 3).strip(), ""]
    out += _user_markdown(page["user"], results)
    if page["method"] or page["figures"] or plot_definitions(page):
        out += ["## Method", ""] + [line for t in page["method"] for line in (t, "")]
        out += _figures_markdown(page["figures"], plot_definitions(page))
    csv_only = [p for p in page["csv"] if not p.with_suffix(".md").exists()]
    if csv_only:
        out += ["Tables as CSV only: " + ", ".join(f"[{m(p.name)}]({_md_link(_rel(p, results))})" for p in csv_only),
                ""]
    if page["plots"]:
        out += ["## Plots" if not page["headline"] else "## Other plots", ""]
        out += [f"![{m(p.stem)}]({_md_link(_rel(p, results))})\n" for p in page["plots"]]
    out += ["## Matrix", ""]
    out += [f"- **{m(axis)}**: {m(', '.join(values))}" for axis, values in study.matrix.items()]
    out += [f"- **cells**: {cells_line(study)}", ""]
    out += ["## Cells without results", ""]
    rows = [(p.cell, str(p.rep), p.state, p.reason) for p in page["problems"]]
    rows += [(cell, "", "not applicable", why) for cell, why in study.not_applicable]
    if rows:
        out += ["| cell | rep | state | reason |", "| :--- | ---: | :--- | :--- |"]
        out += [f"| `{cell}` | " + " | ".join(_md_cell(c) for c in rest) + " |" for cell, *rest in rows]
    else:
        out.append("None: every cell of the matrix has its results.")
    out.append("")
    if page["skipped_plots"]:
        columns = list(page["skipped_plots"][0])
        out += ["### Plots skipped", "", "| " + " | ".join(map(_md_cell, columns)) + " |",
                "| " + " | ".join(":---" for _ in columns) + " |"]
        out += ["| " + " | ".join(_md_cell(r[c] or "") for c in columns) + " |" for r in page["skipped_plots"]]
        out.append("")
    if page["provenance"]:
        out += ["## Provenance", ""] + [f"- **{m(k)}**: {m(v)}" for k, v in provenance_lines(page["provenance"])]
        out.append("")
    if page["commands"]:
        out += ["### Commands (repetition 1 of each cell)", ""]
        for cell, commands in page["commands"]:
            out += [f"`{cell}`", "", "```", *commands, "```", ""]
        out.append(_more_commands(page, lambda s: s + "\n"))
    out.append(f"_Written {page['written']} by dbsweep._")
    return "\n".join(out) + "\n"


def md_escape(text: str) -> str:
    """Text from a config or a result as literal Markdown: no inline markup, no raw HTML, and no
    block markup at its start (a heading, a list, a quote)."""
    text = re.sub(r"([\\`*_\[\]<>|~&])", r"\\\1", str(text).replace("\n", " "))
    text = re.sub(r"^(\d+)([.)])", r"\1\\\2", text)
    return "\\" + text if re.match(r"[#\-+=>.!:]", text) else text


def _md_cell(text: str) -> str:
    return md_escape(text)


def _md_link(target: str) -> str:
    return target.replace("(", "%28").replace(")", "%29")


# --- reStructuredText for snakemake --report ----------------------------------------------------

def rst_escape(text: str) -> str:
    """Text from a config or a result as literal reStructuredText: a backslash before every character
    that is not a letter, digit or space (so no markup, role or directive can form)."""
    return re.sub(r"([^\w\s]|_)", r"\\\1", str(text).replace("\n", " "))


def caption_rst(study: Study, provenance: dict | None) -> str:
    """The lines every report caption ends with: the matrix, the host and the versions."""
    lines = [f"Study **{rst_escape(study.name)}**, matrix {rst_escape(matrix_line(study))}."]
    facts = provenance_lines(provenance)
    if facts:
        lines.append("Measured on " + "; ".join(f"{rst_escape(k)} {rst_escape(v)}" for k, v in facts) + ".")
    return "\n\n".join(lines) + "\n"


def front_rst(page: dict) -> str:
    """The report's front page: the question, the matrix and provenance, and the cells without results."""
    study = page["study"]
    out = [rst_escape(study.description) if study.description else "", "", caption_rst(study, page["provenance"])]
    rows = [(p.cell, f"{p.state}: {p.reason}") for p in page["problems"]]
    rows += [(cell, f"not applicable: {why}") for cell, why in study.not_applicable]
    if rows:
        out += ["Cells without results:", ""] + [f"- {rst_escape(c)}: {rst_escape(w)}" for c, w in rows] + [""]
    out.append("A static summary of the same results, tables and plots: results/index.html.")
    return "\n".join(out) + "\n"


# --- helpers ------------------------------------------------------------------------------------

def _commands(rep_dirs: list[Path]) -> list[tuple[str, list[str]]]:
    out, seen = [], set()
    for rep_dir in rep_dirs:
        cell = str(rep_dir.parent).rsplit("/runs/", 1)[-1]
        if cell in seen or len(out) >= COMMAND_CELLS:
            continue
        record = _json(rep_dir / "run.json")
        if record:
            seen.add(cell)
            out.append((cell, [shlex.join(map(str, argv)) for argv in record.get("commands", [])]))
    return out


def _more_commands(page: dict, fmt) -> str:
    cells = page["study"].cells
    if cells <= COMMAND_CELLS:
        return ""
    return fmt(f"… and {cells - COMMAND_CELLS} more cells: their commands are in runs/<cell>/rep~N/run.json.")


def _rel(path: Path, results: Path) -> str:
    """A link from results/ to path, as a URL path (a cell folder may hold %, # or ?)."""
    return quote(os.path.relpath(path, results), safe="/~")


def _last_line(path: Path) -> str:
    """The last line of a log (a Python error's message), or ''."""
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except FileNotFoundError:
        return ""
    return lines[-1].strip() if lines else ""


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
