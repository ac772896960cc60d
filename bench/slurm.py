"""Scheduling overhead per cell: a 50-cell study of 2 s fio runs (the shortest collect accepts) through the local
Slurm vs locally.

The same study (tmpfs, fio randread 2 s, 50 cells from a user axis) runs twice in
fresh temp dirs, from the same copy of workflow/: once with the default profile
(`-c2`, measuring jobs one at a time by the `measure` token), once with
workflow/profiles/slurm as shipped against the single-node Slurm of tests/slurm/up.sh
(Slurm jobs of up to 8 repetitions each, one Snakemake per job running their runs and
collects; --exclusive, so one job at a time on the one node). Both include collect,
aggregate and the analysis. The order alternates per repeat (local first, then Slurm
first) so neither always runs on a warmer machine.

Overhead per cell = (Slurm wall - local wall) / cells, and Slurm wall / local wall.

Where a Slurm job's time goes (parts, medians over the jobs of the last Slurm run), from
slurmctld's log (submit, allocate, complete; ms), each job's log (results/logs/slurm/<id>.log:
the job's Snakemake's banner and job lines, 1 s resolution) and run.json (each run step's
start and end): queue (allocated after the previous job completed), the job's Snakemake
start-up (allocated -> banner), its DAG (-> first rule), the rules, job end (-> completed),
and per repetition what the job adds beyond its run steps.

    .venv/bin/python bench/slurm.py [--cells 50] [--repeats 1]
    .venv/bin/python bench/slurm.py --smoke     # 2 cells, up to collect: checks it still runs
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, env, leftovers, median, run, snakemake_argv, snapshot, table, tempdir, write_yaml  # noqa: E402



def study(cells: int) -> dict:
    return {
        "study": "slurm-overhead",
        "axes": {"filesystem": ["tmpfs"], "threads": [1], "workload": ["fio-rr"], "n": list(range(1, cells + 1))},
        "filesystems": {"tmpfs": {"type": "tmpfs", "size": "64M"}},
        "workloads": {"fio-rr": {"tool": "fio", "options": {
            "rw": "randread", "bs": "4k", "size": "4M", "ioengine": "psync", "direct": 0, "runtime": 2}}},
    }


def once(tmp: Path, workflow: Path, name: str, cells: int, extra: list, environ: dict) -> float:
    work = tmp / name
    work.mkdir()
    write_yaml(work / "study.yaml", study(cells))
    seconds, _ = run(snakemake_argv(work, *extra, snakefile=workflow / "Snakefile"), work, environ, log=work / "log")
    runs = list((work / "results/runs").rglob("rep~1/summary.json"))
    assert len(runs) == cells, f"{name}: {len(runs)} of {cells} cells done"
    assert leftovers(work) == [], leftovers(work)
    return seconds


# a job is started by the main scheduler ("sched: Allocate") or, when that has passed it by, by backfill
CTLD = re.compile(r"^\[(\S+)\] (?:_slurm_rpc_submit_batch_job:|sched: Allocate|sched/backfill: _start_job: Started|"
                  r"_job_complete:) JobId=(\d+)(.*)$")
BANNER = re.compile(r"^  Date: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)$")
STAMP = re.compile(r"^\s*\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")
EVENT = re.compile(r"^\s*(?:(local)?rule (\w+):|Finished jobid: \d+ \(Rule: (\w+)\))")


def slurm_times(log: Path) -> dict[int, dict[str, float]]:
    """Slurm job id -> submit, allocate, complete (epoch seconds) from slurmctld's log."""
    jobs: dict[int, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        m = CTLD.match(line)
        if not m:
            continue
        t = datetime.fromisoformat(m[1]).timestamp()
        kind = "submit" if "submit" in line else "allocate" if "Allocate" in line or "Started" in line else "complete"
        if kind == "complete" and "done" not in m[3]:
            continue
        jobs.setdefault(int(m[2]), {})[kind] = t
    return jobs


def job_events(log: Path) -> list[tuple[float, str, str]]:
    """(time, event, rule) of a Slurm job's log: 'start' of its Snakemake, 'rule' when it starts a
    rule's job, 'done' when one finishes."""
    events, stamp = [], None
    for line in log.read_text().splitlines():
        if m := BANNER.match(line):
            events.append((datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").timestamp(), "start", ""))
        elif m := STAMP.match(line):
            stamp = datetime.strptime(m[1], "%a %b %d %H:%M:%S %Y").timestamp()
        elif (m := EVENT.match(line)) and stamp is not None:
            events.append((stamp, "rule" if m[2] else "done", m[2] or m[3]))
    return events


def parts(work: Path, cluster: Path) -> dict[str, list[float]]:
    """Seconds of each part of every Slurm job (a pack of repetitions: their runs and collects) of a
    Slurm run, and per repetition what the job adds to its rules."""
    slurm = slurm_times(cluster / "log" / "slurmctld.log")
    out: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        out.setdefault(name, []).append(value)

    previous_complete = None
    for job_id in sorted(slurm):
        times = slurm[job_id]
        log = work / "results" / "logs" / "slurm" / f"{job_id}.log"
        if not log.exists() or "complete" not in times:
            continue
        events = job_events(log)
        cells = re.findall(r"wildcards: cell=(\S+), rep=(\d+)", log.read_text())
        reps = sorted(set(cells))
        steps = 0.0
        for cell, rep in reps:
            record = json.loads((work / "results" / "runs" / cell / f"rep~{rep}" / "run.json").read_text())
            ended, started = datetime.fromisoformat(record["ended"]), datetime.fromisoformat(record["started"])
            steps += (ended - started).total_seconds()
        ready = max(times["submit"], previous_complete or 0)
        starts = [t for t, kind, _ in events if kind == "start"]
        rules = [t for t, kind, _ in events if kind == "rule"]
        done = [t for t, kind, _ in events if kind == "done"]
        whole = times["complete"] - times["allocate"]
        add("repetitions in the job", len(reps))
        add("queue: allocated after submission / the previous job", times["allocate"] - ready)
        add("the job's Snakemake: start-up (allocated -> banner)", starts[0] - times["allocate"])
        add("the job's Snakemake: DAG (-> first rule)", rules[0] - starts[0])
        add("rules (first rule -> last finished)", done[-1] - rules[0])
        add("of which run steps (run.json started -> ended, summed)", steps)
        add("job end (last finished -> completed)", times["complete"] - done[-1])
        add("whole job (allocated -> completed)", whole)
        add("per repetition: whole job / repetitions", whole / len(reps))
        add("per repetition: job beyond its run steps", (whole - steps) / len(reps))
        previous_complete = times["complete"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="2 cells: does it still run")
    args = ap.parse_args()
    until = []
    if args.smoke:  # and up to the collect jobs: the analysis runs where snakemake runs, the same both ways
        args.cells, args.repeats, until = 2, 1, ["--until", "collect"]
    tmp = tempdir("slurm", args.keep)
    workflow = snapshot(tmp)
    environ = env(tmp)
    cluster = tmp / "cluster"
    subprocess.run([ROOT / "tests/slurm/up.sh", cluster], check=True, stdout=subprocess.DEVNULL)
    try:
        local, slurm = [], []
        for i in range(args.repeats):
            order = ["local", "slurm"] if i % 2 == 0 else ["slurm", "local"]
            for name in order:
                if name == "local":
                    local.append(once(tmp, workflow, f"local-{i}", args.cells, ["-c2", *until], environ))
                else:
                    profile = ["--workflow-profile", workflow / "profiles/slurm", *until]  # as shipped
                    slurm.append(once(tmp, workflow, f"slurm-{i}", args.cells, profile, environ))
                    split = parts(tmp / f"slurm-{i}", cluster)
                print(f"repeat {i + 1}: {name} {(local if name == 'local' else slurm)[-1]:.1f} s", flush=True)
    finally:
        subprocess.run([ROOT / "tests/slurm/down.sh", cluster], check=True)
    lw, sw = median(local), median(slurm)
    print(f"\n{args.cells} cells, fio 2 s each, medians of {args.repeats}:\n")
    print(table(["execution", "wall s", "per cell s", "vs local"],
                [["local (-c2)", lw, lw / args.cells, 1.0],
                 ["Slurm (one node)", sw, sw / args.cells, sw / lw],
                 ["Slurm overhead", sw - lw, (sw - lw) / args.cells, ""]]))
    print("\nwhere a Slurm job's time goes (last Slurm run, medians over its jobs; log times "
          "of 1 s resolution, so parts are +-1 s):\n")
    print(table(["part", "median s", "min s", "max s"],
                [[name, median(v), min(v), max(v)] for name, v in split.items()]))


if __name__ == "__main__":
    main()
