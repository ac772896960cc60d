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

    .venv/bin/python bench/slurm.py [--cells 50] [--repeats 1]
    .venv/bin/python bench/slurm.py --smoke     # 2 cells: checks it still runs
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, env, leftovers, median, run, snakemake_argv, snapshot, table, tempdir, write_yaml  # noqa: E402

SLURM_ARGS = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
              "--slurm-no-account"]


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
                print(f"repeat {i + 1}: {name} {(local if name == 'local' else slurm)[-1]:.1f} s", flush=True)
    finally:
        subprocess.run([ROOT / "tests/slurm/down.sh", cluster], check=True)
    lw, sw = median(local), median(slurm)
    print(f"\n{args.cells} cells, fio 2 s each, medians of {args.repeats}:\n")
    print(table(["execution", "wall s", "per cell s", "vs local"],
                [["local (-c2)", lw, lw / args.cells, 1.0],
                 ["Slurm (one node)", sw, sw / args.cells, sw / lw],
                 ["Slurm overhead", sw - lw, (sw - lw) / args.cells, ""]]))


if __name__ == "__main__":
    main()
