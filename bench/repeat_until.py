"""Repetitions as the noise needs them (`repeat_until`): what a round's check costs, what the rounds give
on this host, and what stopping on a quiet round does to the comparisons' false alarms.

1. Real: a tmpfs study, fio randread 16k psync, --cells cells (threads 1..N), --seconds windows,
   `repetitions: 2`, `repeat_until: {detectable_pct: --target, max_repetitions: --most}`, run once with the
   real workflow. Reported: each round's smallest detectable difference (results/rounds/round~k.csv), the
   rounds run, the study's wall time, and the cost of a round's check: the gap between the last run of a
   round and the first of the next (its last collect, rules round_tables and round_noise, Snakemake
   re-planning) less the median gap between two runs within a round (run.json: started, ended).
2. Simulated: --trials studies of --sim-cells identical cells whose repetitions' medians vary lognormally
   (sd --noise each), judged by the statistics library's own pooled_noise(), ratio_half_width() and
   ratio_to_baseline() (workflow/R/statistics.R). Each study once with repeat_until (from 2 rounds, target
   --target, at most --most) and with fixed repetitions; reported: the share of comparisons whose 95% CI
   excludes 1 (false alarms: identical cells called different; nominal 5%), the mean repetitions, and
   how often the target was met; and, at --most repetitions, the false alarms of a ratio of medians tested
   with the same interval (the method before d393cf4).

    .venv/bin/python bench/repeat_until.py [--cells 4] [--seconds 3] [--target 10] [--most 8] [--trials 2000]
    .venv/bin/python bench/repeat_until.py --smoke     # 2 cells of 2 s, at most 3 rounds, no analysis after
                                                       # them; 10 trials
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import statistics
import subprocess
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import env, leftovers, run, snakemake_argv, snapshot, table, tempdir, use_pipeline_code, write_yaml  # noqa: E402

SIMULATION = r"""
args <- commandArgs(trailingOnly = TRUE)
source(file.path(args[[1]], "R", "library.R"), chdir = TRUE)
trials <- as.integer(args[[2]]); cells <- as.integer(args[[3]]); most <- as.integer(args[[4]])
target <- as.numeric(args[[5]]); noises <- as.numeric(strsplit(args[[6]], ",")[[1]])
set.seed(20261127)
# the share of a study's comparisons (every cell against the first) whose CI excludes 1, at n repetitions;
# of_medians: the ratio of the cells' medians tested the same way (the method before d393cf4)
alarms <- function(x, n, of_medians = FALSE) {
  values <- lapply(seq_len(cells), function(i) x[i, seq_len(n)])
  medians <- vapply(values, stats::median, 0)
  dt <- data.table(cell = sprintf("c%02d", seq_len(cells)), median = medians,
                   rep_gmean = if (of_medians) medians else vapply(values, geometric_mean, 0), reps = n)
  setattr(dt, "noise", pooled_noise(values))
  mean(ratio_to_baseline(dt, "cell", "cell", "c01")$verdict != VERDICT_NOISE)
}
for (noise in noises) {
  out <- replicate(trials, {
    x <- matrix(exp(rnorm(cells * most, 0, noise)), nrow = cells)
    n <- 2L
    repeat {  # dbsweep/rounds.py: another round while the detectable difference is above the target
      s <- pooled_noise(lapply(seq_len(cells), function(i) x[i, seq_len(n)]))
      detectable <- 100 * (exp(ratio_half_width(s, n, n)) - 1)
      if (detectable <= target || n >= most) break
      n <- n + 1L
    }
    c(n = n, met = detectable <= target, adaptive = alarms(x, n), first = alarms(x, 2L),
      most = alarms(x, most), most_medians = alarms(x, most, TRUE))
  })
  # a fixed study of the same size as this study's rounds: fresh repetitions, no stopping rule
  fixed_same <- mean(vapply(out["n", ], function(n) {
    alarms(matrix(exp(rnorm(cells * most, 0, noise)), nrow = cells), n)
  }, 0))
  cat(sprintf("%s,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", noise, mean(out["n", ]), mean(out["met", ]),
              mean(out["adaptive", ]), fixed_same, mean(out["first", ]), mean(out["most", ]),
              mean(out["most_medians", ])))
}
"""


def study(cells: int, seconds: int, target: float, most: int) -> dict:
    return {"study": "repeat-until", "repetitions": 2,
            "repeat_until": {"detectable_pct": target, "max_repetitions": most},
            "axes": {"filesystem": ["tmpfs"], "threads": list(range(1, cells + 1)), "workload": ["fio-rr"]},
            "filesystems": {"tmpfs": {"type": "tmpfs", "size": "256M"}},
            "workloads": {"fio-rr": {"tool": "fio", "options": {
                "rw": "randread", "bs": "16k", "size": "64M", "ioengine": "psync", "runtime": seconds}}}}


def when(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def round_gaps(work: Path, first: int = 2) -> tuple[list[float], list[float]]:
    """Seconds between one run's end and the next run's start: after a round that was checked (round `first`
    on), and otherwise (within a round, or after one before the first check)."""
    runs = sorted((when(r["started"]), when(r["ended"]), r["rep"]) for r in
                  (json.loads(p.read_text()) for p in (work / "results" / "runs").glob("*/*/*/rep~*/run.json")))
    boundary, within = [], []
    for (_, end, rep), (start, _, next_rep) in itertools.pairwise(runs):
        (boundary if next_rep != rep and rep >= first else within).append(start - end)
    return boundary, within


def rounds_table(work: Path) -> list[list]:
    rows = []
    for path in sorted((work / "results" / "rounds").glob("round~*.csv"), key=lambda p: int(p.stem.split("~")[1])):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                rows.append([int(path.stem.split("~")[1]), row["metric"], float(row["noise_pct"]), int(row["df"]),
                             float(row["detectable_pct"])])
    return rows


def simulate(workflow: Path, trials: int, cells: int, most: int, target: float, noises: list[float]) -> list[list]:
    done = subprocess.run(["Rscript", "-e", SIMULATION, str(workflow), str(trials), str(cells), str(most), str(target),
                           ",".join(map(str, noises))], capture_output=True, text=True, check=True)
    rows = []
    for line in done.stdout.split():
        noise, n, met, *shares = map(float, line.split(","))
        rows.append([f"{100 * noise:g}%", n, f"{100 * met:.0f}%", *(f"{100 * share:.1f}%" for share in shares)])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--target", type=float, default=10.0)
    ap.add_argument("--most", type=int, default=8)
    ap.add_argument("--trials", type=int, default=2000, help="simulated studies per noise; 0: the real part only")
    ap.add_argument("--sim-cells", type=int, default=8)
    ap.add_argument("--noise", default="0.03,0.05,0.1", help="the simulated run-to-run noise(s), comma-separated")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--smoke", action="store_true",
                    help="2 cells of 2 s, at most 3 rounds, no analysis after them; 10 trials")
    args = ap.parse_args()
    if args.smoke:
        args.cells, args.seconds, args.most, args.trials, args.target = 2, 2, 3, 10, 0.01
    tmp = tempdir("repeat-until", args.keep)
    workflow = snapshot(tmp)
    use_pipeline_code(workflow)
    environ = env(tmp)
    print(f"temp dir: {tmp}", flush=True)

    work = tmp / "study"
    work.mkdir()
    write_yaml(work / "study.yaml", study(args.cells, args.seconds, args.target, args.most))
    # --smoke: up to the tables every round feeds (the rounds and the runs are what it reads); the analysis
    # after them is tests/test_rounds.py's
    targets = ["results/tables/summary.csv.gz"] if args.smoke else []
    wall, _ = run(snakemake_argv(work, "-c2", *targets, snakefile=workflow / "Snakefile"), work, environ,
                  log=work / "log")
    assert leftovers(work) == [], leftovers(work)
    rows = rounds_table(work)
    boundary, within = round_gaps(work)
    print(f"\nreal: {args.cells} tmpfs fio cells, {args.seconds} s windows, repetitions 2, target ±{args.target:g}%, "
          f"at most {args.most}; wall {wall:.1f} s\n")
    print(table(["round", "metric", "pooled noise %", "df", "smallest detectable difference %"], rows))
    if boundary and within:
        cost = statistics.median(boundary) - statistics.median(within)
        print(f"\ngap between runs at a round's boundary: median {statistics.median(boundary):.2f} s "
              f"({', '.join(f'{g:.2f}' for g in boundary)}); elsewhere: median {statistics.median(within):.2f} s "
              f"over {len(within)}; a round's check costs about {cost:.2f} s")

    if not args.trials:
        return
    noises = [float(x) for x in args.noise.split(",")]
    print(f"\nsimulated: {args.trials} studies of {args.sim_cells} identical cells per noise, from 2 repetitions, "
          f"target ±{args.target:g}%, at most {args.most}; false alarms: comparisons whose 95% CI excludes 1\n")
    print(table(["noise (sd per repetition)", "mean repetitions", "target met", "false alarms, repeat_until",
                 "false alarms, fixed at the same repetitions", "fixed at 2", f"fixed at {args.most}",
                 f"fixed at {args.most}, ratio of medians"],
                simulate(workflow, args.trials, args.sim_cells, args.most, args.target, noises)))


if __name__ == "__main__":
    main()
