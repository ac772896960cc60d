"""The Markdown the analysis writes (results/tables/*.md), read into blocks, tidied for a reader and
written back as HTML or Markdown.

Tidying, for the summary page:
- a table whose rows leave different axes empty (storage cells have no engine or memory) is split
  into one table per set of axes its rows have, titled by its workloads;
- a column that is NA (or empty) in every row of a table is left out;
- a paragraph that several tables repeat word for word (the statistics' method, the provenance
  footer) is taken out of them, to be written once (the page's Method section).
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

NA = {"", "NA"}


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Para:
    text: str


@dataclass
class Table:
    header: list[str]
    align: list[str]  # left, right or center per column
    rows: list[list[str]]
    title: str = ""  # set when tidy() split a table: which part of it this is
    parts: list[Table] = field(default_factory=list)


Block = Heading | Para | Table


def parse(text: str) -> list[Block]:
    """Headings, pipe tables and paragraphs, in order."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i].strip()
        if not line:
            i += 1
        elif line.startswith("#"):
            n = len(line) - len(line.lstrip("#"))
            out.append(Heading(n, line[n:].strip()))
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i].strip())
                i += 1
            out.append(_table(block))
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(("#", "|")):
                para.append(lines[i].strip())
                i += 1
            out.append(Para(" ".join(para)))
    return out


def repeated_paragraphs(documents: list[list[Block]]) -> list[str]:
    """Paragraphs that appear in two documents or more, in order of first appearance."""
    seen: dict[str, int] = {}
    for blocks in documents:
        for text in dict.fromkeys(b.text for b in blocks if isinstance(b, Para)):
            seen[text] = seen.get(text, 0) + 1
    return [text for text, n in seen.items() if n > 1]


def tidy(blocks: list[Block], axes: list[str], drop: set[str] = frozenset()) -> list[Block]:
    """Without the paragraphs in `drop`; every table split by the axes its rows have, its all-NA
    columns left out (see the module's docstring)."""
    out = []
    for block in blocks:
        if isinstance(block, Para) and block.text in drop:
            continue
        if isinstance(block, Table):
            parts = [without_na_columns(part) for part in split_by_axes(block, axes)]
            block = parts[0] if len(parts) == 1 else Table(block.header, block.align, [], parts=parts)
        out.append(block)
    return out


def split_by_axes(table: Table, axes: list[str]) -> list[Table]:
    """One table per set of axis columns that are not NA in a row (in order of first row)."""
    columns = [j for j, name in enumerate(table.header) if name in axes]
    groups: dict[tuple, list[list[str]]] = {}
    for row in table.rows:
        key = tuple(j for j in columns if _at(row, j) not in NA)
        groups.setdefault(key, []).append(row)
    if len(groups) < 2:
        return [table]
    parts = []
    for key, rows in groups.items():
        part = Table(table.header, table.align, rows)
        part.title = _part_title(part, [table.header[j] for j in key])
        parts.append(part)
    return parts


def without_na_columns(table: Table) -> Table:
    if not table.rows:
        return table
    keep = [j for j in range(len(table.header)) if any(_at(row, j) not in NA for row in table.rows)]
    if len(keep) == len(table.header):
        return table
    return Table([table.header[j] for j in keep], [table.align[j] for j in keep if j < len(table.align)],
                 [[_at(row, j) for j in keep] for row in table.rows], table.title)


def _part_title(table: Table, present: list[str]) -> str:
    if "workload" in table.header:
        j = table.header.index("workload")
        return "workloads " + ", ".join(dict.fromkeys(_at(row, j) for row in table.rows))
    return "cells with " + ", ".join(present) if present else "cells without axis values"


def _at(row: list[str], j: int) -> str:
    return row[j] if j < len(row) else ""


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def _table(block: list[str]) -> Table:
    header, body, align = _cells(block[0]), block[1:], []
    if body and re.fullmatch(r"[\s|:\-]+", body[0]):
        for spec in _cells(body[0]):
            align.append("right" if spec.endswith(":") and not spec.startswith(":")
                         else "center" if spec.startswith(":") and spec.endswith(":") and len(spec) > 2
                         else "left")
        body = body[1:]
    return Table(header, align, [_cells(r) for r in body])


# --- HTML ---------------------------------------------------------------------------------------

def to_html(blocks: list[Block], level: int = 0) -> str:
    """Every character escaped; headings pushed down `level` levels; each table in a scrolling box."""
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            tag = f"h{min(block.level + level, 6)}"
            out.append(f"<{tag}>{inline_html(block.text)}</{tag}>")
        elif isinstance(block, Para):
            out.append(f"<p>{inline_html(block.text)}</p>")
        elif block.parts:
            out += [f'<p class="part">{html.escape(part.title)}</p>{table_html(part)}' for part in block.parts]
        else:
            out.append(table_html(block))
    return "\n".join(out)


def table_html(table: Table) -> str:
    def cell(tag: str, j: int, text: str) -> str:
        style = f' style="text-align:{table.align[j]}"' if j < len(table.align) else ""
        return f"<{tag}{style}>{inline_html(text)}</{tag}>"

    rows = ["<tr>" + "".join(cell("th", j, c) for j, c in enumerate(table.header)) + "</tr>"]
    rows += ["<tr>" + "".join(cell("td", j, c) for j, c in enumerate(r)) + "</tr>" for r in table.rows]
    return '<div class="scroll"><table>' + "".join(rows) + "</table></div>"


def inline_html(text: str) -> str:
    text = html.escape(text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"(?<![\w\\])_(\S(?:.*?\S)?)_(?!\w)", r"<em>\1</em>", text)


# --- Markdown -----------------------------------------------------------------------------------

def to_markdown(blocks: list[Block], level: int = 0) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * min(block.level + level, 6) + " " + block.text)
        elif isinstance(block, Para):
            out.append(block.text)
        elif block.parts:
            for part in block.parts:
                out += [f"_{part.title}_", "", table_markdown(part)]
                out.append("")
            out.pop()
        else:
            out.append(table_markdown(block))
        out.append("")
    return "\n".join(out).strip() + "\n"


def table_markdown(table: Table) -> str:
    spec = {"left": ":---", "right": "---:", "center": ":---:"}
    lines = ["| " + " | ".join(_md(c) for c in table.header) + " |",
             "| " + " | ".join(spec[a] for a in table.align) + " |" if table.align else
             "| " + " | ".join(":---" for _ in table.header) + " |"]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|")
