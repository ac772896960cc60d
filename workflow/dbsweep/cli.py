"""`./dbsweep catalog …` and `./dbsweep compare …`: the results catalog from the command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dbsweep import catalog, compare, history
from dbsweep.catalog import CatalogError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dbsweep", description="The results catalog (docs/catalog.md).")
    sub = p.add_subparsers(dest="command", required=True)
    cat = sub.add_parser("catalog", help="add result trees to the catalog; history of its series")
    cat_sub = cat.add_subparsers(dest="action", required=True)
    add = cat_sub.add_parser("add", help="add result trees (results/, copies from other hosts, older dates)")
    add.add_argument("trees", nargs="+", type=Path)
    hist = cat_sub.add_parser("history", help="each cell over the runs, its change points, results/history.html")
    hist.add_argument("--study")
    hist.add_argument("--by", choices=["auto", "date", "build"], default="auto",
                      help="order of a series: the runs' start time, or the build axis (auto: build when given)")
    hist.add_argument("--out", type=Path, default=Path("results/history.html"))
    cmp = sub.add_parser("compare", help="two sets of runs side by side over their common cells")
    cmp.add_argument("a", help="a result tree added to the catalog, or key=value[,key=value] "
                               "(study, host, date, commit, source, build, or an axis)")
    cmp.add_argument("b")
    cmp.add_argument("--out", type=Path, default=Path("results/compare"))
    for each in (add, hist, cmp):
        each.add_argument("--catalog", type=Path, default=catalog.DEFAULT, help="default: %(default)s")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "catalog" and args.action == "add":
            added = catalog.add(args.catalog, args.trees)
            print(f"{args.catalog}: {added.runs} runs added, {added.skipped} already there")
        elif args.command == "catalog":
            with catalog.connect(args.catalog, read_only=True) as con:
                series = history.detect(history.load(con, args.study, args.by))
            if not series:
                raise CatalogError(f"{args.catalog}: no runs" + (f" of study {args.study}" if args.study else ""))
            history.write(series, args.catalog, args.out)
            for s, c in history.changes_largest_first(series):
                print(f"{100 * c.size:+.1f}%  {s.name}  from {history.label(s.points[c.index])}")
            print(f"{args.out}: {sum(len(s.changes) for s in series)} changes in {len(series)} series")
        else:
            a, b = compare.parse_side(args.a), compare.parse_side(args.b)
            with catalog.connect(args.catalog, read_only=True) as con:
                result = compare.compare(con, a, b)
            paths = compare.write(result, a, b, args.out)
            print(paths["md"].read_text(), end="")
            print(f"written: {', '.join(str(p) for p in paths.values())}")
    except CatalogError as e:
        print(f"dbsweep: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
