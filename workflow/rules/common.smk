# The study: config -> validated matrix -> paths, and the input/params functions of the rules.
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)
from dbsweep import engines, estimate, lock, slurm, summary, workloads
from dbsweep.config import load
from dbsweep.errors import ConfigError

try:
    STUDY = load(config)
except ConfigError as error:
    sys.exit(f"dbsweep: config error: {error}")

# One snakemake at a time runs (or submits) into this results directory: results/.lock names the one
# that does. Snakemake's own lock (.snakemake/locks) refuses the second run; this says who holds it.
LOCK = Path("results/.lock")
if workflow.is_main_process and (_holder := lock.holder(LOCK)):
    print(f"dbsweep: {LOCK} is held by {_holder}", file=sys.stderr)


onstart:
    try:
        lock.take(LOCK)
        if workflow.executor_plugin.name.endswith("slurm"):
            slurm.check_partitions(
                job.resources["slurm_partition"]
                for job in workflow.dag.needrun_jobs()
                if not job.is_local and job.resources.get("slurm_partition")
            )
    except (lock.Held, RuntimeError) as error:
        sys.exit(f"dbsweep: {error}")


CELLS = {cell.path: cell for cell in STUDY.cells}
for _path, _why in STUDY.not_applicable:
    print(f"dbsweep: not applicable, not run: {_path}: {_why}", file=sys.stderr)
REPS = range(1, STUDY.repetitions + 1)
RUNS = "results/runs"
SCRIPTS = f"{workflow.basedir}/scripts"  # R scripts are inputs: editing one reruns the analysis
IMAGES = {}
for _cell in STUDY.cells:
    _image = STUDY.image(_cell)
    if _image:
        IMAGES.setdefault(_image, _cell)


def print_estimate():
    """How long the missing repetitions will take (dbsweep/estimate.py), on stderr."""
    missing, done = [], []
    for cell in STUDY.cells:
        runs = [Path(RUNS, cell.path, f"rep~{rep}", "run.json") for rep in REPS]
        done += [run for run in runs if run.exists()]
        missing += [STUDY.recipe(cell)] * sum(not run.exists() for run in runs)
    images = sum(not Path(image).exists() for image in IMAGES)
    print(estimate.describe(estimate.estimate(missing, done), images), file=sys.stderr)


if workflow.is_main_process:  # not again in each job of a cluster run
    print_estimate()


wildcard_constraints:
    cell=r"[^/~]+~.+",
    rep=r"\d+",
    family="|".join(engines.FAMILIES),


def rep_dirs():
    return [f"{RUNS}/{path}/rep~{rep}" for path in CELLS for rep in REPS]


def recipe(wildcards):
    return STUDY.recipe(CELLS[wildcards.cell])


def cell_values(wildcards):
    return CELLS[wildcards.cell].as_dict()


def run_priority(wildcards):
    return STUDY.priority(int(wildcards.rep))


def image_of(wildcards):
    """The prepared image (image) and the fetched server (server) a run restores and starts, by name: a cell
    on tmpfs has no image but may have a fetched server, which is no image (never refetched mid-study)."""
    cell = CELLS[wildcards.cell]
    named = {"image": STUDY.image(cell), "server": STUDY.fetched(cell)}
    return {name: ancient(path) for name, path in named.items() if path}


def server_of_image(wildcards):
    fetched = STUDY.fetched(IMAGES[f"resources/images/{wildcards.image}.img"])
    return [ancient(fetched)] if fetched else []


def image_spec(wildcards):
    return STUDY.image_spec(IMAGES[f"resources/images/{wildcards.image}.img"])


def run_minutes(wildcards, attempt):
    """Slurm's time limit of one repetition, in minutes: twice its warm-up and measured window (a fio
    run bounded by size only counts 10 minutes), plus 10 for restore, start and stop; each retry
    doubles it, so a job cut off at its limit is retried with more time."""
    r = recipe(wildcards)
    seconds = (r["duration_s"] or 600) + r.get("warmup_s", 0)
    return attempt * (10 + math.ceil(2 * seconds / 60))


def attempt_number(wildcards, attempt):
    """Snakemake's attempt of this job (1, then 2… on --retries), for run.py to tell a retry."""
    return attempt


def node_to_itself(wildcards):
    """Slurm options of a measuring job: a node to itself, the cell's own node when it names a host."""
    host = CELLS[wildcards.cell].get("host") if hasattr(wildcards, "cell") else None
    return "--exclusive" + (f" --nodelist={host}" if host else "")


# The study's partition for measuring jobs; without one, the profile's or the cluster's default.
PARTITION = {"slurm_partition": STUDY.cluster["partition"]} if "partition" in STUDY.cluster else {}


def final_targets():
    """The analysis, the summary page, and every repetition's files themselves: Snakemake does not
    remake a missing intermediate file while what was made from it is up to date (snakemake#1978),
    so a cell whose rerun failed (its run.json removed) would otherwise look complete on the next run."""
    return [*rules.aggregate.input, *analysis_targets(), *rules.summary.output]


def analysis_targets():
    """The analysis rules the study's workloads declare (Workload.analyses), version tables with several
    versions, open-loop ones with cells at a fixed rate."""
    recipes = [STUDY.recipe(cell) for cell in STUDY.cells]
    used = {name for r in recipes for name in workloads.get(r["tool"]).analyses}
    names = [name for name in workloads.analyses() if name in used]  # in one order, whatever the study's
    if len({cell.get("version") for cell in STUDY.cells} - {None}) > 1:
        names.append("versions")
    if any(workloads.rate(r["tool"], r["options"]) for r in recipes):
        names.append("openloop")
    return [path for name in names for path in getattr(rules, name).output]


def summary_study():
    """What the summary page states about the study: its question, matrix and repetitions."""
    matrix = {axis: list(dict.fromkeys(str(cell[axis]) for cell in STUDY.cells if axis in cell.as_dict()))
              for axis in STUDY.axes}
    return summary.Study(STUDY.name, STUDY.description, matrix, len(STUDY.cells), STUDY.repetitions,
                         [Path(d) for d in rep_dirs()], STUDY.not_applicable)


def summary_after_error(log):
    """onerror: rule all could not complete, so rule summary never ran. Write the page from what
    results/runs holds (failed cells and their errors), dated 1970 so that the next run's rule summary
    always replaces it."""
    try:
        logs = [os.path.relpath(path) for path in (log if isinstance(log, list) else [log]) if path]
        written = summary.write(summary_study(), Path("results"), [], complete=False, log=", ".join(logs))
        for path in written.values():
            os.utime(path, (0, 0))
        print(f"dbsweep: incomplete study; cells without results are listed in {written['html']}", file=sys.stderr)
    except Exception as error:  # the workflow's own error is the one to report
        print(f"dbsweep: could not write the summary page: {error}", file=sys.stderr)
