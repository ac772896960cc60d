"""Dry-run (`snakemake -n`) time of the real workflow vs a bare Snakefile with the same jobs.

For each size (cells), a study in a temp dir: filesystem [tmpfs], threads 1..10,
a user axis with cells/10 values, one fio workload, repetitions 1, so no prepare
images.

The bare Snakefile is derived from the real workflow itself, so it cannot drift
from it: a dry run of the same study with 2 user values (20 cells) is parsed, and
each planned rule becomes a bare rule with the same outputs, log, inputs,
resources and priority as plain patterns over a list of cell paths and
repetitions (`{cell}`, `rep~{rep}`), and a placeholder script. What the bare one
lacks is exactly dbsweep's own code: loading and checking the study, the time
estimate, input/params/resources functions, the analysis targets. The script
stops if the two plan different jobs.

The real workflow is a copy of workflow/ taken at start (--live: workflow/
itself). Both are run with the same flags (`--workflow-profile none -n -c1`, cwd = their
temp dir), interleaved real, bare, real, bare ... (--together: both sides of a
pair at the same time). The dry run the bare Snakefile is derived from fills the
bytecode cache of both first (Snakemake's and the workflow's). Wall and CPU time (user + system of the snakemake
process) are both taken. Goal: real / bare <= 1.1.

The workflow freezes the garbage collector's objects once the study is loaded (gc.freeze in common.smk),
which also spares Snakemake's own objects from the collector's later passes. --bare-freeze gives the bare
Snakefile the same freeze at its start, so the ratio is dbsweep's own code alone.

    .venv/bin/python bench/planning.py [--sizes 1000 10000] [--repeats 5] [--large-repeats 3] [--profile]
    .venv/bin/python bench/planning.py --smoke      # 20 cells, one pair and the profile: checks it still runs

--profile: for the smallest size, run the real workflow and the bare Snakefile
once more under cProfile and print where the time goes: the workflow's own parts
(config loading, the time estimate, the not-applicable listing and IMAGES table at
module level, the per-job functions, the analysis targets), the Python function
calls of each side (a count, so the noise of a shared machine does not move it),
and the CPU time of importing the workflow's package beside Snakemake's own imports.
Also done by itself when the ratio is above the goal.
"""
from __future__ import annotations

import argparse
import io
import pstats
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (PYTHON, SNAKEMAKE, env, job_counts, median, run, run_cpu, snakemake_argv,  # noqa: E402
                    snapshot, table, tempdir, write_yaml)

GOAL = 1.1
THREADS = list(range(1, 11))
FLAGS = ["--workflow-profile", "none", "-n", "-c1"]
DERIVE_USERS = 2  # the dry run the bare Snakefile is derived from: 20 cells


def users(cells: int) -> list[str]:
    if cells % len(THREADS):
        raise SystemExit(f"--sizes: {cells} is not a multiple of {len(THREADS)}")
    return [f"u{i:05d}" for i in range(cells // len(THREADS))]


def study(cells: int) -> dict:
    return {
        "study": f"plan{cells}",
        "repetitions": 1,
        "axes": {"filesystem": ["tmpfs"], "threads": THREADS, "user": users(cells), "workload": ["fio-rr"]},
        "workloads": {"fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "16k", "size": "1M",
                                                            "runtime": 2}}},
    }


def cell_paths(cells: int) -> list[str]:
    """The study's cell paths, in the order of dbsweep's own matrix (threads, workload, then the user axis)."""
    return [f"filesystem~tmpfs/threads~{t}/workload~fio-rr/user~{u}" for t in THREADS for u in users(cells)]


def planned_jobs(dry_run: str) -> list[dict]:
    """The jobs a dry run prints: rule, and per key (input, output, log, wildcards, priority, resources)
    its text."""
    jobs = []
    for line in dry_run.splitlines():
        if re.match(r"^(local)?rule \w+:$", line):
            jobs.append({"rule": line.split()[1].rstrip(":")})
        elif jobs and (m := re.match(r"^    (\w+): (.*)$", line)):
            jobs[-1][m.group(1)] = m.group(2)
    return jobs


def _pattern(path: str, cells: list[str]) -> str:
    """A planned file as a pattern: its cell path as {cell}, its repetition as rep~{rep}."""
    for cell in cells:  # longest first: no cell path is a prefix of a later one
        if cell + "/" in path or path.endswith(cell):
            path = path.replace(cell, "{cell}")
            return re.sub(r"/rep~\d+", "/rep~{rep}", path)
    return path


def _files(text: str | None, cells: list[str]) -> list[str]:
    return list(dict.fromkeys(_pattern(f, cells) for f in text.split(", "))) if text else []


def _value(text: str):
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def bare_snakefile(dry_run: str, cells: list[str]) -> tuple[str, list[str]]:
    """A Snakefile with the jobs of the dry run of the workflow on `cells`, and the scripts it names.
    Its cells and repetitions come from cells.txt and REPS, so the same file plans any size."""
    jobs = planned_jobs(dry_run)
    cells = sorted(cells, key=len, reverse=True)
    reps = sorted({int(m) for job in jobs for m in re.findall(r"rep=(\d+)", job.get("wildcards", ""))})
    lines = ["# Bare Snakefile derived from a dry run of dbsweep (bench/planning.py): the same jobs, no dbsweep code.",
             'CELLS = open("cells.txt").read().split()', f"REPS = {reps!r}", "", "",
             "wildcard_constraints:", '    cell=r"[^/~]+~.+",', r'    rep=r"\d+",', "", ""]
    seen, scripts = set(), []
    for job in jobs:
        rule = job["rule"]
        if rule in seen:
            continue
        seen.add(rule)
        lines.append(f"rule {rule}:")
        per_cell = "cell=" in job.get("wildcards", "")
        for key in ("input", "output", "log"):
            files = _files(job.get(key), cells)
            if not files:
                continue
            lines.append(f"    {key}:")
            for f in files:
                lines.append(f"        expand({f!r}, cell=CELLS, rep=REPS)," if "{cell}" in f and not per_cell
                             else f"        {f!r},")
        resources = [kv.split("=", 1) for kv in job.get("resources", "").split(", ") if "=" in kv]
        resources = [(k, v) for k, v in resources if k not in ("tmpdir", "_cores", "_nodes")]
        if resources:
            lines.append("    resources:")
            lines += [f"        {k}={_value(v)!r}," for k, v in resources]
        if "priority" in job:
            lines.append(f"    priority: {int(job['priority'])}")
        if rule != "all":
            scripts.append(f"scripts/{rule}.py")
            lines.append("    script:")
            lines.append(f'        "scripts/{rule}.py"')
        lines += ["", ""]
    if "all" in seen:  # the first rule is the default target
        start = lines.index("rule all:")
        end = lines.index("", start)
        block = lines[start:end + 2]
        del lines[start:end + 2]
        first = next(i for i, line in enumerate(lines) if line.startswith("rule "))
        lines[first:first] = block
    return "\n".join(lines).rstrip() + "\n", scripts


def write_bare(bare: Path, snakefile_text: str, scripts: list[str], cells: list[str]) -> None:
    for script in scripts:
        (bare / script).parent.mkdir(parents=True, exist_ok=True)
        (bare / script).write_text("# placeholder; a dry run does not execute it\n")
    (bare / "Snakefile").write_text(snakefile_text)
    (bare / "cells.txt").write_text("\n".join(cells) + "\n")


def derive(tmp: Path, snakefile: Path, environ: dict, study_dict: dict, cells: list[str]) -> tuple[str, list[str]]:
    """The bare Snakefile and its scripts, from a dry run of the real workflow on a small study whose
    cell paths are `cells`."""
    work = tmp / "derive"
    work.mkdir()
    write_yaml(work / "study.yaml", study_dict)
    log = tmp / "derive.txt"
    run(snakemake_argv(work, *FLAGS, snakefile=snakefile), work, environ, log)
    return bare_snakefile(log.read_text(), cells)


def setup(tmp: Path, cells: int, snakefile: Path, bare_text: str, scripts: list[str]) -> tuple[list, Path, list, Path]:
    real = tmp / f"real-{cells}"
    real.mkdir()
    write_yaml(real / "study.yaml", study(cells))
    bare = tmp / f"bare-{cells}"
    bare.mkdir()
    write_bare(bare, bare_text, scripts, cell_paths(cells))
    return (snakemake_argv(real, *FLAGS, snakefile=snakefile), real,
            [SNAKEMAKE, "-s", bare / "Snakefile", "-d", bare, *FLAGS], bare)


# The workflow's own parts at planning: (label, function names in workflow/ whose cumulative time it is).
PARTS = [
    ("config loading (dbsweep.config.load)", ["load"]),
    ("the time estimate (print_estimate)", ["print_estimate"]),
    ("per-job functions of the rules", ["recipe", "cell_values", "image_of", "run_minutes", "attempt_number",
                                        "node_to_itself", "run_priority", "server_of_image", "image_spec"]),
    ("analysis targets (final_targets, summary rule)", ["final_targets", "analysis_targets"]),
    ("summary_study (summary rule's params)", ["summary_study"]),
    ("common.smk module level in all (imports, CELLS, not-applicable listing, IMAGES, estimate, …)",
     ["<module>:common.smk"]),
    ("analyse.smk module level (its rules, with Snakemake's rule set-up)", ["<module>:analyse.smk"]),
]
IMPORTS = ("import snakemake.api, snakemake.workflow, snakemake.dag, snakemake.cli, psutil, yaml; import time; "
           "t = time.process_time(); {what}; print(time.process_time() - t)")


def parts(prof: Path, workflow: Path) -> list[list]:
    """Cumulative seconds (under cProfile) and calls of each of PARTS, from the profile of a real dry run."""
    stats = pstats.Stats(str(prof)).stats
    rows = []
    for label, names in PARTS:
        seconds = calls = 0
        for (filename, _, function), (_, ncalls, _, cumtime, _) in stats.items():
            if not filename.startswith(str(workflow)):
                continue
            for name in names:
                want, _, file = name.partition(":")
                if function == want and (not file or filename.endswith(file)):
                    seconds += cumtime
                    calls += ncalls
        rows.append([label, calls, seconds])
    return rows


def calls(prof: Path) -> int:
    return sum(entry[1] for entry in pstats.Stats(str(prof)).stats.values())


def import_cpu(workflow: Path, environ: dict) -> float:
    """CPU seconds of importing what common.smk imports from the workflow's package, after Snakemake's own
    imports (whatever both use is counted once, on Snakemake's side)."""
    what = (f"import sys; sys.path.insert(0, {str(workflow)!r}); "
            "from dbsweep import estimate, lock, slurm, summary, workloads; from dbsweep.config import load")
    done = subprocess.run([str(PYTHON), "-c", IMPORTS.format(what=what)], capture_output=True, text=True,
                          env=environ, check=True)
    return float(done.stdout.split()[-1])


def profile(real_argv: list, cwd: Path, bare_argv: list, bare_cwd: Path, environ: dict, out: Path, workflow: Path,
            top: int = 25) -> str:
    """cProfile of one dry run of the real workflow and of the bare Snakefile: the workflow's own parts, the
    Python function calls of each, the import of the workflow's package; then the top costs by cumulative time,
    dbsweep's own functions separately."""
    prof = out.with_suffix(".prof")
    run([PYTHON, "-m", "cProfile", "-o", prof, *real_argv], cwd, environ, out)
    bare_prof = out.with_name(out.stem + "-bare.prof")
    run([PYTHON, "-m", "cProfile", "-o", bare_prof, *bare_argv], bare_cwd, environ,
        out.with_name(out.stem + "-bare.txt"))
    imports = median([import_cpu(workflow, environ) for _ in range(5)])
    real_calls, bare_calls = calls(prof), calls(bare_prof)
    text = [table(["part of the workflow's own code", "calls", "cumulative s under cProfile"], parts(prof, workflow)),
            f"\nPython function calls: real {real_calls:,}, bare {bare_calls:,}, "
            f"real/bare {real_calls / bare_calls:.3f}; "
            f"profiled time: real {pstats.Stats(str(prof)).total_tt:.1f} s, "
            f"bare {pstats.Stats(str(bare_prof)).total_tt:.1f} s",
            f"CPU time of importing the workflow's package after Snakemake's imports (median of 5): {imports:.3f} s\n"]
    for title, restrictions in (("cumulative, all", ()), ("cumulative, workflow/ code (Snakefile, rules, dbsweep)",
                                                            (str(workflow),))):
        buf = io.StringIO()
        stats = pstats.Stats(str(prof), stream=buf)
        stats.sort_stats("cumulative").print_stats(*restrictions, top)
        text.append(f"--- {title} ---\n" + buf.getvalue().split("ncalls", 1)[-1])
    buf = io.StringIO()
    pstats.Stats(str(prof), stream=buf).sort_stats("tottime").print_stats(top)
    text.append("--- own time (tottime), all ---\n" + buf.getvalue().split("ncalls", 1)[-1])
    return "\n".join(text)


def together(runs: list[tuple[list, Path, Path]], environ: dict) -> list[tuple[float, float]]:
    """Start every (argv, cwd, log) at once; (wall s, CPU s of it and its children) of each. On a loaded
    machine the two sides of a pair then share the same load, where interleaved they may not."""
    import os
    import time
    procs = []
    for argv, cwd, log in runs:
        with open(log, "w") as out:
            procs.append((subprocess.Popen([str(a) for a in argv], cwd=cwd, env=environ, stdout=out,
                                           stderr=subprocess.STDOUT), time.perf_counter()))
    results = {}
    while len(results) < len(procs):
        pid, status, usage = os.wait4(-1, 0)
        for i, (proc, start) in enumerate(procs):
            if proc.pid == pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                if proc.returncode:
                    raise RuntimeError(f"{runs[i][0]} exited with {proc.returncode}; see {runs[i][2]}")
                results[i] = (time.perf_counter() - start, usage.ru_utime + usage.ru_stime)
    return [results[i] for i in range(len(procs))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--repeats", type=int, default=5, help="interleaved pairs for sizes up to 1000 cells")
    ap.add_argument("--large-repeats", type=int, default=3, help="interleaved pairs for larger sizes")
    ap.add_argument("--profile", action="store_true", help="profile the real workflow even if within the goal")
    ap.add_argument("--smoke", action="store_true", help="20 cells, one pair, no warm-up: does it still run")
    ap.add_argument("--together", action="store_true",
                    help="run the two sides of each pair at the same time, not one after the other (a loaded machine)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--live", action="store_true", help="run workflow/ itself, not a copy taken at start")
    ap.add_argument("--bare-freeze", action="store_true",
                    help="the bare Snakefile calls gc.freeze() first, as the workflow does once the study is loaded: "
                         "what dbsweep's own code costs, without the freeze's gain to Snakemake's own work")
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.repeats, args.large_repeats, args.profile = [20], 1, 1, True

    tmp = tempdir("planning", args.keep)
    environ = env(tmp)
    snakefile = snapshot(tmp, args.live) / "Snakefile"
    print(f"temp dir: {tmp}; workflow: {snakefile.parent}")
    small = DERIVE_USERS * len(THREADS)
    bare_text, scripts = derive(tmp, snakefile, environ, study(small), cell_paths(small))
    if args.bare_freeze:
        bare_text = "import gc\n\ngc.freeze()\n" + bare_text
    rows, over, setups = [], [], {}
    for cells in args.sizes:
        real_argv, real, bare_argv, bare = setups[cells] = setup(tmp, cells, snakefile, bare_text, scripts)
        repeats = args.repeats if cells <= 1000 else args.large_repeats
        wall = {"real": [], "bare": []}
        cpu = {"real": [], "bare": []}
        counts = {}
        for i in range(repeats):
            sides = (("real", real_argv, real), ("bare", bare_argv, bare))
            logs = {name: tmp / f"{name}-{cells}-{i}.txt" for name, _, _ in sides}
            if args.together:
                measured = together([(argv, cwd, logs[name]) for name, argv, cwd in sides], environ)
            else:
                measured = [run_cpu(argv, cwd, environ, logs[name]) for name, argv, cwd in sides]
            for (name, _, _), (elapsed, used) in zip(sides, measured, strict=False):
                wall[name].append(elapsed)
                cpu[name].append(used)
                counts.setdefault(name, job_counts(logs[name].read_text()))
                print(f"  {cells} cells, repeat {i + 1}: {name} {elapsed:.2f} s wall, {used:.2f} s CPU", flush=True)
            if counts["real"] != counts["bare"]:  # both must plan the same jobs
                raise SystemExit(f"{cells} cells: job counts differ: real {counts['real']} bare {counts['bare']}")
        ratios = [r / b for r, b in zip(wall["real"], wall["bare"], strict=False)]
        cpu_ratios = [r / b for r, b in zip(cpu["real"], cpu["bare"], strict=False)]
        ratio = median(ratios)
        rows.append([cells, sum(counts["real"].values()), repeats, median(wall["real"]), median(wall["bare"]), ratio,
                     f"{min(ratios):.2f}-{max(ratios):.2f}", median(cpu["real"]), median(cpu["bare"]),
                     median(cpu_ratios), f"{min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}",
                     "yes" if ratio <= GOAL else "NO"])
        if ratio > GOAL:
            over.append(cells)
    print()
    print(table(["cells", "jobs", "pairs", "real s (median)", "bare s (median)", "real/bare (median)", "pair range",
                 "real CPU s", "bare CPU s", "CPU real/bare", "CPU pair range", f"<= {GOAL}"], rows))
    if args.profile and not over:
        over.append(min(args.sizes))
    if over:
        cells = min(over)
        real_argv, real, bare_argv, bare = setups[cells]
        print(f"\nprofile of the dry runs, {cells} cells (cProfile):\n")
        print(profile(real_argv, real, bare_argv, bare, environ, tmp / f"profile-{cells}.txt", snakefile.parent))


if __name__ == "__main__":
    main()
