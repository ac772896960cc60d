"""Scheduling overhead per cell: a 50-cell study of 2 s fio runs (the shortest collect accepts) through the local Slurm vs locally.

The same study (tmpfs, fio randread 2 s, 50 cells from a user axis) runs twice in
fresh temp dirs, from the same copy of workflow/: once with the default profile
(`-c2`, measuring jobs one at a time by the `measure` token), once with
workflow/profiles/slurm against the single-node Slurm of tests/slurm/up.sh (each
repetition one exclusive group job, so also one at a time on the one node).
Both include collect, aggregate and the analysis. The Slurm run uses the test
settings a one-node cluster without accounting needs: status from squeue, first
status check after 1 s. The order alternates per repeat (local first, then Slurm
first) so neither always runs on a warmer machine.

Overhead per cell = (Slurm wall - local wall) / cells, and Slurm wall / local wall.

Where a Slurm cell's time goes (parts, medians over the cells of the last Slurm run), from
slurmctld's log (submit, allocate, complete; ms), each group job's log (the Snakemake
started in the job and the one srun starts per rule in it: their start banners and job
lines, 1 s resolution) and run.json (the run step's start and end):
queue (allocated after the previous job completed), job Snakemake start-up (allocated ->
its banner), its DAG (-> first job step), per rule: srun + step Snakemake start-up
(-> step banner), step DAG (-> step's job line), the rule itself (-> step finished),
back in the job (-> job Snakemake notes the step finished), and job end (-> completed).

    .venv/bin/python bench/slurm.py [--cells 50] [--repeats 1]
    .venv/bin/python bench/slurm.py --smoke     # 2 cells: checks it still runs
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

SLURM_ARGS = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
              "--slurm-no-account", "--slurm-keep-successful-logs"]  # the job logs give the parts


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


CTLD = re.compile(r"^\[(\S+)\] (?:_slurm_rpc_submit_batch_job:|sched: Allocate|_job_complete:) JobId=(\d+)(.*)$")
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
        kind = "submit" if "submit" in line else "allocate" if "Allocate" in line else "complete"
        if kind == "complete" and "done" not in m[3]:
            continue
        jobs.setdefault(int(m[2]), {})[kind] = t
    return jobs


def job_events(log: Path) -> list[tuple[float, str, str]]:
    """(time, event, rule) of a group job's log: 'start' of a Snakemake (the job's own first, then one
    per job step), 'rule' when one submits or runs a rule's job, 'done' when one finishes it."""
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
    """Seconds of each part of every group job (one repetition: run + collect) of a Slurm run."""
    slurm = slurm_times(cluster / "log" / "slurmctld.log")
    out: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        out.setdefault(name, []).append(value)

    previous_complete = None
    for job_id in sorted(slurm):
        times = slurm[job_id]
        logs = list((work / ".snakemake" / "slurm_logs").rglob(f"{job_id}.log"))
        if not logs or "complete" not in times:
            continue
        events = job_events(logs[0])
        text = logs[0].read_text()
        cell = re.search(r"wildcards: cell=(\S+), rep=(\d+)", text)
        record = json.loads((work / "results" / "runs" / cell[1] / f"rep~{cell[2]}" / "run.json").read_text())
        ready = max(times["submit"], previous_complete or 0)
        add("queue: allocated after submission / the previous job", times["allocate"] - ready)
        starts = [t for t, kind, _ in events if kind == "start"]
        add("job's Snakemake start-up (allocated -> banner)", starts[0] - times["allocate"])
        outer_rules = [(t, rule) for t, kind, rule in events if kind == "rule"][0::2]
        add("job's Snakemake DAG (-> first job step)", outer_rules[0][0] - starts[0])
        for i, (t_submit, rule) in enumerate(outer_rules):
            step_start = starts[1 + i]
            step_rule = next(t for t, kind, r in events if kind == "rule" and r == rule and t >= step_start)
            step_done, job_done = [t for t, kind, r in events if kind == "done" and r == rule][:2]
            add(f"{rule}: srun + step Snakemake start-up", step_start - t_submit)
            add(f"{rule}: step Snakemake DAG", step_rule - step_start)
            add(f"{rule}: the rule's job", step_done - step_rule)
            add(f"{rule}: back in the job's Snakemake", job_done - step_done)
            last_done = job_done
        add("run: of which the run step itself (run.json started -> ended)",
            (datetime.fromisoformat(record["ended"]) - datetime.fromisoformat(record["started"])).total_seconds())
        add("job end (-> completed)", times["complete"] - last_done)
        add("whole job (allocated -> completed)", times["complete"] - times["allocate"])
        previous_complete = times["complete"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="2 cells: does it still run")
    args = ap.parse_args()
    if args.smoke:
        args.cells, args.repeats = 2, 1
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
                    local.append(once(tmp, workflow, f"local-{i}", args.cells, ["-c2"], environ))
                else:
                    profile = ["--workflow-profile", workflow / "profiles/slurm", *SLURM_ARGS]
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
    print(f"\nwhere a Slurm cell's time goes (last Slurm run, medians over its {args.cells} cells; log times "
          "of 1 s resolution, so parts are +-1 s):\n")
    print(table(["part", "median s", "min s", "max s"],
                [[name, median(v), min(v), max(v)] for name, v in split.items()]))


if __name__ == "__main__":
    main()
