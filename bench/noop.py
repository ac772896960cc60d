"""Time of a no-op rerun (`snakemake`, nothing to do) on a completed 1,000-cell matrix.

1. Small real run: a 10-cell tmpfs study (threads 1..10, user axis [u00000], one
   fio randread workload, size 1M, runtime 3 s) run by the real workflow up to
   its collect jobs (`snakemake -c2 --until collect`, default workflow profile),
   for the per-cell cost.
2. Completed 1,000-cell tree: the same study with 100 user values. Every cell's
   rep~1 folder (run.json, attempt~*/ with the raw output, and the collect
   outputs: samples.csv, system.csv, summary.json, ...) and its run/collect logs are copies of the small
   run's real cell with the same thread count, with the `cell` field of both
   run.json files rewritten to the new cell (the recipe is identical: it
   depends on threads only). Collect outputs are written after run.json, so
   their mtimes are in order. Then the real workflow runs once for real: it
   makes aggregate (over all 1,000 repetitions), tables and plots; if it plans
   any run or collect job, the benchmark stops (the tree would not be complete).
   Last, `snakemake --touch --forcerun run` over every job, so that Snakemake
   holds metadata (params, input, code) for every output, as after real runs
   (without it the no-op is faster: Snakemake has less to read and compare).
3. The bare Snakefile of bench/planning.py (same jobs, no dbsweep code; derived
   from a dry run of the small study before it runs) gets a copy of the completed
   tree, recorded the same way with `--touch`.
4. Timed, interleaved: real no-op, bare no-op, real -n, repeated. Every no-op
   must print "Nothing to be done". Flags for both: -c2 and the workflow's
   default profile (which the real workflow reads by itself). The real
   workflow is a copy of workflow/ taken at start (--live: workflow/ itself).

    .venv/bin/python bench/noop.py [--cells 1000] [--repeats 5]
    .venv/bin/python bench/noop.py --smoke     # threads 1..2, 4 cells, 2 s windows, one repeat: checks it still runs
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (PYTHON, SNAKEMAKE, env, leftovers, median, run, snakemake_argv, snapshot,  # noqa: E402
                    table, tempdir, write_yaml)
from planning import derive, write_bare  # noqa: E402

THREADS = list(range(1, 11))  # --smoke: 1..2
NOTHING = "Nothing to be done"
RUNTIME = 3  # --smoke: 2


# `snakemake --touch` as a Python one-liner with the touch executor's sleep of 0.1 s per job cut to 0.01 s:
# recording 2,004 jobs otherwise takes over 3 minutes per tree. Only the set-up uses it.
TOUCH = [PYTHON, "-c", "import sys; import snakemake.executors.touch as t; t.Executor.SLEEPING_TIME = 0.01; "
         "from snakemake.cli import main; sys.argv[0] = 'snakemake'; sys.exit(main())"]


def touch_all(argv: list) -> list:
    """argv (a snakemake command line) as a --touch run of every job, which records each job's metadata."""
    return [*TOUCH, *argv[1:], "--touch", "--forcerun", "run", "--resources", "measure=1000", "-c", "1000"]


def users(n: int) -> list[str]:
    return [f"u{i:05d}" for i in range(n)]


def study(n_users: int, threads: list[int], runtime: int = RUNTIME) -> dict:
    return {
        "study": "noop",
        "repetitions": 1,
        "axes": {"filesystem": ["tmpfs"], "threads": threads, "user": users(n_users), "workload": ["fio-rr"]},
        "filesystems": {"tmpfs": {"type": "tmpfs", "size": "64M"}},
        "workloads": {"fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "4k", "size": "1M",
                                                            "runtime": runtime}}},
    }


def cell_path(threads: int, user: str) -> str:
    return f"filesystem~tmpfs/threads~{threads}/workload~fio-rr/user~{user}"


def rewrite_cell(path: Path, user: str) -> None:
    record = json.loads(path.read_text())
    record["cell"]["user"] = user
    path.write_text(json.dumps(record, indent=2) + "\n")


def cell_paths(n_users: int, threads: list[int]) -> list[str]:
    return [cell_path(t, u) for t in threads for u in users(n_users)]


def build_tree(small: Path, big: Path, n_users: int, thread_counts: list[int]) -> None:
    """Copy each small-run cell into the n_users cells of the big study with the same thread count."""
    for threads in thread_counts:
        src_cell = cell_path(threads, "u00000")
        src = small / "results" / "runs" / src_cell / "rep~1"
        attempts = [p.name for p in src.glob("attempt~*")]
        for user in users(n_users):
            dst_cell = cell_path(threads, user)
            dst = big / "results" / "runs" / dst_cell / "rep~1"
            dst.mkdir(parents=True)
            for name in attempts:
                shutil.copytree(src / name, dst / name)
                if (dst / name / "run.json").exists():
                    rewrite_cell(dst / name / "run.json", user)
            shutil.copy2(src / "run.json", dst / "run.json")
            rewrite_cell(dst / "run.json", user)
            for kind in ("run", "collect"):
                log = small / "results" / "logs" / kind / src_cell / "rep~1.log"
                if log.exists():
                    target = big / "results" / "logs" / kind / dst_cell / "rep~1.log"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(log, target)
    time.sleep(0.05)
    for threads in thread_counts:  # collect outputs after every run.json: newer than their input
        src = small / "results" / "runs" / cell_path(threads, "u00000") / "rep~1"
        collect_outputs = [p.name for p in src.iterdir() if p.is_file() and p.name != "run.json"]
        for user in users(n_users):
            dst = big / "results" / "runs" / cell_path(threads, user) / "rep~1"
            for name in collect_outputs:
                shutil.copyfile(src / name, dst / name)


def planned_rules(output: str) -> set[str]:
    rules = set()
    for line in output.splitlines():
        s = line.strip()
        if s.startswith(("rule ", "localrule ")):
            rules.add(s.split()[1].rstrip(":"))
    return rules


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=1000, help="cells of the completed matrix (multiple of 10)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--live", action="store_true", help="run workflow/ itself, not a copy taken at start")
    ap.add_argument("--smoke", action="store_true",
                    help="threads 1..2, 4 cells, 2 s windows, one repeat: does it still run")
    args = ap.parse_args()
    threads, runtime = THREADS, RUNTIME
    if args.smoke:
        threads, runtime, args.cells, args.repeats = [1, 2], 2, 4, 1
    if args.cells % len(threads):
        raise SystemExit(f"--cells: {args.cells} is not a multiple of {len(threads)}")
    tmp = tempdir("noop", args.keep)
    environ = env(tmp)
    workflow = snapshot(tmp, args.live)
    print(f"temp dir: {tmp}; workflow: {workflow}")
    sf = workflow / "Snakefile"
    flags = ["-c2", "--workflow-profile", workflow / "profiles" / "default"]

    # 1. small real run
    small = tmp / "small"
    small.mkdir()
    write_yaml(small / "study.yaml", study(1, threads, runtime))
    bare_text, bare_scripts = derive(tmp, sf, environ, study(1, threads, runtime), cell_paths(1, threads))
    # up to its collect jobs: the big tree copies cells, its own analysis is made once, in step 2
    wall, _ = run(snakemake_argv(small, *flags, "--until", "collect", snakefile=sf), small, environ,
                  tmp / "small-run.txt")
    runs = [json.loads(p.read_text()) for p in (small / "results" / "runs").rglob("rep~1/run.json")]
    in_job = [r["measure_end"] - r["measure_start"] for r in runs]
    print(f"small real run: {len(runs)} cells run and collected in {wall:.1f} s "
          f"({wall / len(runs):.1f} s per cell; measured window {runtime} s, fio ran {median(in_job):.1f} s)")
    assert not leftovers(tmp), leftovers(tmp)

    # 2. completed big tree, finished by the real workflow
    n_users = args.cells // len(threads)
    big = tmp / "big"
    big.mkdir()
    write_yaml(big / "study.yaml", study(n_users, threads, runtime))
    t0 = time.perf_counter()
    build_tree(small, big, n_users, threads)
    copy_s = time.perf_counter() - t0
    run(snakemake_argv(big, "-n", *flags, snakefile=sf), big, environ, tmp / "big-plan.txt")
    planned = planned_rules((tmp / "big-plan.txt").read_text())
    if planned & {"run", "collect", "prepare"}:
        raise SystemExit(f"the copied tree is not complete for snakemake: it plans {sorted(planned)} "
                         f"(see {tmp / 'big-plan.txt'})")
    finish, _ = run(snakemake_argv(big, *flags, snakefile=sf), big, environ, tmp / "big-finish.txt")
    touch, _ = run(touch_all(snakemake_argv(big, *flags, snakefile=sf)), big, environ, tmp / "big-touch.txt")
    print(f"big tree: {args.cells} cells copied in {copy_s:.1f} s; snakemake then ran {sorted(planned)} "
          f"in {finish:.1f} s; --touch of every job (records metadata) {touch:.1f} s")

    # 3. bare Snakefile on a copy of the completed tree
    bare = tmp / "bare"
    bare.mkdir()
    write_bare(bare, bare_text, bare_scripts, cell_paths(n_users, threads))
    shutil.copytree(big / "results", bare / "results", symlinks=True)
    bare_argv = [SNAKEMAKE, "-s", bare / "Snakefile", "-d", bare, *flags]
    run(touch_all(bare_argv), bare, environ, tmp / "bare-touch.txt")
    records = {name: sum(1 for _ in (d / ".snakemake" / "metadata").iterdir()) for name, d in (("real", big),
                                                                                             ("bare", bare))}
    print(f"metadata records: {records}")

    # 4. interleaved no-ops
    variants = [("real no-op", snakemake_argv(big, *flags, snakefile=sf), big),
                ("bare no-op", bare_argv, bare),
                ("real -n", snakemake_argv(big, "-n", *flags, snakefile=sf), big)]
    times = {name: [] for name, _, _ in variants}
    for i in range(args.repeats):
        for name, argv, cwd in variants:
            log = tmp / f"{name.replace(' ', '_')}-{i}.txt"
            elapsed, _ = run(argv, cwd, environ, log)
            text = log.read_text()
            if NOTHING not in text:
                raise SystemExit(f"{name}: snakemake had something to do (see {log})")
            times[name].append(elapsed)
            print(f"  repeat {i + 1}: {name} {elapsed:.2f} s", flush=True)
    ratios = [r / b for r, b in zip(times["real no-op"], times["bare no-op"], strict=False)]
    print()
    print(table(["what", "median s", "runs"], [[n, median(t), " ".join(f"{x:.2f}" for x in t)]
                                               for n, t in times.items()]
                + [["real / bare no-op (median of pairs)", median(ratios), " ".join(f"{x:.2f}" for x in ratios)]]))
    print(f"\nper-cell cost of the small real run: {wall / len(runs):.1f} s "
          f"(so {args.cells} real cells would take ~{wall / len(runs) * args.cells / 60:.0f} min)")
    assert not leftovers(tmp), leftovers(tmp)


if __name__ == "__main__":
    os.umask(0o022)
    main()
