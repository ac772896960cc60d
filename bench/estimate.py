"""How close the start-up time estimate comes to the real time of the missing repetitions.

A tmpfs study (one fio randread workload, size 16M, runtime 3 s, user axis `u`), run by the
real workflow (`snakemake -c2`, default profile) in rounds: round 1 with --cells cells, each
later round adds --cells new cells (new values of `u`). Before each round a dry run prints
the estimate (round 1: the documented defaults; later rounds: the overhead measured from the
earlier rounds' run.json). Each round runs up to its run jobs (`--until run`). The real time is
from starting `snakemake` until the last run step of the round ended (run.json `ended`): the part
the estimate is about (the analysis jobs after it are not run).

    .venv/bin/python bench/estimate.py [--cells 10] [--rounds 3]
    .venv/bin/python bench/estimate.py --smoke     # 2 rounds of 1 cell: checks it still runs
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import env, leftovers, run, snakemake_argv, snapshot, table, tempdir, write_yaml  # noqa: E402

RUNTIME = 3
ESTIMATE = re.compile(r"dbsweep: (\d+) repetitions? to run, about .*?: (\d+) s measured windows and warm-ups "
                      r"\+ (\d+) s overhead \(per repetition storage ([\d.]+) s; ([^)]*)\)")


def study(users: int) -> dict:
    return {"study": "estimate", "axes": {"filesystem": ["tmpfs"], "threads": [1], "workload": ["fio-rr"],
                                          "u": [f"u{i:04d}" for i in range(users)]},
            "workloads": {"fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "4k", "size": "16M",
                                                                "runtime": RUNTIME}}}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=10, help="new cells per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--smoke", action="store_true",
                    help="2 rounds of 1 new cell (the second from measured overhead): does it still run")
    args = ap.parse_args()
    if args.smoke:
        args.cells, args.rounds = 1, 2
    tmp = tempdir("estimate", args.keep)
    environ = env(tmp)
    workflow = snapshot(tmp)
    sf = workflow / "Snakefile"
    flags = ["-c2", "--workflow-profile", workflow / "profiles" / "default"]
    work = tmp / "study"
    work.mkdir()
    rows = []
    for n in range(1, args.rounds + 1):
        write_yaml(work / "study.yaml", study(n * args.cells))
        run(snakemake_argv(work, "-n", *flags, snakefile=sf), work, environ, tmp / f"plan-{n}.txt")
        match = ESTIMATE.search((tmp / f"plan-{n}.txt").read_text())
        if not match:
            raise SystemExit(f"no estimate in {tmp / f'plan-{n}.txt'}")
        reps, window, overhead, per_rep, source = match.groups()
        before = {p for p in (work / "results" / "runs").rglob("rep~1/run.json")} if n > 1 else set()
        t0 = time.time()
        # up to the run jobs: the estimate is about them, and the analysis after them is not timed
        run(snakemake_argv(work, *flags, "--until", "run", snakefile=sf), work, environ, tmp / f"run-{n}.txt")
        new = [json.loads(p.read_text()) for p in (work / "results" / "runs").rglob("rep~1/run.json")
               if p not in before]
        real = max(datetime.fromisoformat(r["ended"]).timestamp() for r in new) - t0
        estimated = int(window) + int(overhead)
        rows.append([n, int(reps), source, float(per_rep), estimated, real, estimated / real])
        print(rows[-1], flush=True)
    assert not leftovers(tmp), leftovers(tmp)
    print(table(["round", "repetitions", "overhead from", "per repetition (s)", "estimated (s)", "real (s)",
                 "estimated / real"], rows))


if __name__ == "__main__":
    main()
