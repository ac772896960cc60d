# The study: config -> validated matrix -> paths, and the input/params functions of the rules.
import gc
import inspect
import math
import re
import shlex
import os
import sys
from pathlib import Path

from snakemake.common import overwrite_function_params
from snakemake.io import report as snakemake_report

sys.path.insert(0, workflow.basedir)
from dbsweep import canary, engines, estimate, lock, rounds, slurm, study_progress, summary, tool_answers, workloads
from dbsweep import versions
from dbsweep.topology import link_floor, placement
from dbsweep.topology import settings as topology_settings
from dbsweep.config import load
from dbsweep.errors import ConfigError


def study_folder():
    """The folder of the study file (the first --configfile, or the default config/config.yaml; later
    ones overlay it, as config/studies/quick/ does): the files a study names are relative to it,
    wherever snakemake runs (--directory). Snakemake makes the command line's config files absolute
    before it changes directory."""
    return Path(workflow.configfiles[0]).absolute().parent if workflow.configfiles else Path.cwd()


tool_answers.FILE = Path("resources/tool-answers.json")  # fio's answers, for the jobs and the next run
link_floor.FILE = Path("resources/link-floor.json")  # this host's least link delay, measured once
try:
    STUDY = load(config, study_folder())
except ConfigError as error:
    sys.exit(f"dbsweep: config error: {error}")
tool_answers.save()

# One snakemake at a time runs (or submits) into this results directory: results/.lock names the one
# that does. Snakemake's own lock (.snakemake/locks) refuses the second run; this says who holds it.
LOCK = Path("results/.lock")
if workflow.is_main_process and (_holder := lock.holder(LOCK)):
    print(f"dbsweep: {LOCK} is held by {_holder}", file=sys.stderr)


onstart:
    try:
        lock.take(LOCK)
        if "partition" in STUDY.cluster and not workflow.local_exec:
            slurm.check_partitions([STUDY.cluster["partition"]])
        if workflow.local_exec:
            placement.refuse_local(PLACEMENTS)
        else:  # Slurm's own words on a placement it cannot give, before any job
            slurm.check_placements(PLACEMENTS.values(), STUDY.cluster.get("partition"))
    except (lock.Held, RuntimeError, ConfigError) as error:
        sys.exit(f"dbsweep: {error}")
    start_progress()


CELLS = {cell.path: cell for cell in STUDY.cells}
placement.PARTITION = STUDY.cluster.get("partition")  # the hosts Slurm chooses, asked of the jobs' partition
try:  # cell path -> its topology's placement on hosts (topology/settings.py), for the cells placed
    PLACED = topology_settings.placed_cells(STUDY.cells, STUDY.recipe)
except ConfigError as error:
    sys.exit(f"dbsweep: config error: {error}")
# topology name -> its placement (topology/placement.py)
PLACEMENTS = {p.topology: p for p in PLACED.values()}
for _placement in PLACEMENTS.values() if workflow.is_main_process else []:
    print(f"dbsweep: placement: {_placement.describe()}", file=sys.stderr)
for _path, _why in STUDY.not_applicable:
    print(f"dbsweep: not applicable, not run: {_path}: {_why}", file=sys.stderr)
for _warning in STUDY.warnings if workflow.is_main_process else []:
    print(f"dbsweep: warning: {_warning}", file=sys.stderr)
RUNS = "results/runs"
# What collect makes of each repetition: the inputs of rule aggregate (and of a round's tables).
REPETITION_FILES = [
    "run.json",
    "summary.json",
    "samples.csv",
    "system.csv",
    "counters.csv",
    "percentiles.csv",
    "events.csv",
    "recovery.csv",
    "delivered.csv",
] + [f"{name}.csv" for name in workloads.tables()]
# The R analysis library: an input of every analysis rule, so editing it reruns only the analysis.
R_LIBRARY = sorted(str(path) for path in Path(workflow.basedir, "R").glob("*.R"))
IMAGES = {}
CALIBRATIONS = {}  # resources/calibration/<host>/<name>.json -> (the first cell using it, its recipe)
try:  # load() refuses what it can foresee; whatever planning still finds is one line too
    for _cell in STUDY.cells:
        _image = STUDY.image(_cell)
        if _image:
            IMAGES.setdefault(_image, _cell)
        _calibration = STUDY.calibration(_cell)
        if _calibration:
            CALIBRATIONS.setdefault(_calibration[0], (_cell, _calibration[1]))
except ConfigError as error:
    sys.exit(f"dbsweep: config error: {error}")
# The study and what was imported live as long as this process: out of the garbage collector's way, it does
# not scan them again at each full collection while Snakemake builds the DAG (BENCHMARKS.md, planning).
gc.freeze()


def print_estimate(dag):
    """How long the repetitions Snakemake is about to run will take (dbsweep/estimate.py), on stderr: the
    run jobs of the DAG, so a repetition whose params or code changed, or whose run was incomplete,
    counts as well as a missing one."""
    jobs = list(dag.needrun_jobs())
    runs = [job for job in jobs if job.rule.name == "run"]
    todo = [STUDY.recipe(CELLS[job.wildcards.cell]) for job in runs]
    RERUN.update(Path(job.output[0]).parent for job in runs if Path(job.output[0]).exists())
    again = len(RERUN)
    done = [run for rep_dir in rep_dirs(repetitions(known_only=True)) if (run := Path(rep_dir, "run.json")).exists()]
    images = sum(job.rule.name == "prepare" for job in jobs)
    print(estimate.describe(estimate.estimate(todo, done), images, again), file=sys.stderr)
    if STUDY.repeat_until and (more := STUDY.most_repetitions - repetitions(known_only=True)) > 0:
        print(
            f"dbsweep: repeat_until: up to {more} more round{'s' if more > 1 else ''} of {len(STUDY.cells)} "
            f"repetition{'s' if len(STUDY.cells) > 1 else ''} while the noise needs them",
            file=sys.stderr,
        )


def estimate_after_dag():
    """Print the estimate once Snakemake knows what it will run, in a dry run as in a real one (onstart
    runs only in a real one): right after it has built the DAG, where it logs the rule graph."""
    log_rulegraph = workflow.log_rulegraph

    def log_rulegraph_then_estimate():
        log_rulegraph()
        print_estimate(workflow.dag)

    workflow.log_rulegraph = log_rulegraph_then_estimate


if workflow.is_main_process:  # not again in each job of a cluster run
    estimate_after_dag()


PROGRESS = []  # the study's progress line (dbsweep/study_progress.py) while this snakemake runs
RERUN = set()  # the repetitions this snakemake measures again (their run.json is stale): print_estimate


def start_progress():
    """onstart: a line with the repetitions done, the time left and the one running, on stderr."""
    missing, recipes = [], []
    reps = repetitions(known_only=True)
    for cell in STUDY.cells:
        for rep in range(1, STUDY.most_repetitions + 1):  # the rounds repeat_until may add too
            rep_dir = Path(RUNS, cell.path, f"rep~{rep}")
            if rep_dir in RERUN or not (rep_dir / "run.json").exists():
                missing.append(rep_dir)
                recipes.append(STUDY.recipe(cell))
    done = [d / "run.json" for d in map(Path, rep_dirs(reps)) if (d / "run.json").exists()]
    expected = dict(zip(missing, estimate.per_repetition(recipes, estimate.estimate(recipes, done))))
    known = (lambda: list(map(Path, rep_dirs(repetitions(known_only=True))))) if STUDY.repeat_until else None
    PROGRESS.append(
        study_progress.StudyProgress(
            [Path(d) for d in rep_dirs(reps)], expected, sys.stderr, again=RERUN, rounds=known
        ).__enter__()
    )


def stop_progress():
    while PROGRESS:
        PROGRESS.pop().stop()


wildcard_constraints:
    cell=r"[^/~]+~.+",
    host=r"[^/]+",
    calibration=r"[^/]+",
    rep=r"\d+",
    round=r"\d+",
    family="|".join(engines.FAMILIES),


def per_job(func):
    """Mark a function Snakemake calls for every job (input, params, resources, priority): it
    inspects such a function's signature two or three times per job (inspect.signature, about
    10 us each); this gives it the signature once. bench/planning.py, BENCHMARKS.md (planning)."""
    overwrite_function_params(func, inspect.signature(func).parameters)
    return func


def rep_dirs(reps: int) -> list[str]:
    """The folders of repetitions 1..reps of every cell."""
    return [f"{RUNS}/{path}/rep~{rep}" for path in CELLS for rep in range(1, reps + 1)]


def repetitions(known_only: bool = False) -> int:
    """Repetitions per cell: the study's `repetitions`, or with repeat_until one more round for each
    round whose noise left the study short of its target (dbsweep/rounds.py), from checkpoint round_noise:
    called from an input function, Snakemake runs the checkpoint first. known_only: from the verdicts on
    disk, for the progress line, the estimate and a page written after an error."""

    def verdict(n):
        if known_only:
            return path if (path := rounds.verdict_path(n)).exists() else None
        return checkpoints.round_noise.get(round=n).output[0]

    return rounds.repetitions(STUDY.repetitions, STUDY.repeat_until, verdict)


def repetition_files(reps: int) -> list[str]:
    return [f"{rep_dir}/{name}" for rep_dir in rep_dirs(reps) for name in REPETITION_FILES]


def aggregate_input(wildcards):
    return repetition_files(repetitions())


def known_now(function):
    """An input function of every repetition's files where repeat_until adds rounds while the study runs;
    otherwise its list itself: Snakemake takes a function's 10,000 paths more slowly at planning than a
    plain list (bench/planning.py, 1,000 cells: 1.15x the bare Snakefile against 1.12x)."""
    return function if STUDY.repeat_until else function(None)


def round_input(wildcards):
    """What a round's tables are made of: each repetition's run.json, summary and samples."""
    return [
        f"{rep_dir}/{name}"
        for rep_dir in rep_dirs(int(wildcards.round))
        for name in ("run.json", "summary.json", "samples.csv")
    ]


def round_verdicts(wildcards):
    """The verdicts of every round the study ran with repeat_until (the last one's too), for its page."""
    if not STUDY.repeat_until:
        return []
    return [str(rounds.verdict_path(n)) for n in range(STUDY.repetitions, repetitions() + 1)]


@per_job
def recipe(wildcards):
    """The cell's recipe, a param of the run rule; a changed recipe (JSON) reruns its cells."""
    return STUDY.recipe(CELLS[wildcards.cell]).as_dict()


@per_job
def cell_values(wildcards):
    return CELLS[wildcards.cell].as_dict()


@per_job
def run_priority(wildcards):
    return STUDY.priority(int(wildcards.rep), CELLS[wildcards.cell])


@per_job
def canary_priority(wildcards):
    return STUDY.canary_priority(int(wildcards.rep))


def images_of(cell):
    """The prepared image (image) and the fetched server (server) a cell restores and starts, by name: a cell
    on tmpfs has no image but may have a fetched server, which is no image (never refetched mid-study)."""
    named = {"image": STUDY.image(cell), "server": STUDY.fetched(cell)}
    return {name: ancient(path) for name, path in named.items() if path}


@per_job
def image_of(wildcards):
    """What a run needs: images_of, and for `rate: N%` the host's calibration (not ancient: a calibration
    measured again reruns the cells that used it)."""
    cell = CELLS[wildcards.cell]
    calibration = STUDY.calibration(cell)
    return images_of(cell) | ({"calibration": calibration[0]} if calibration else {})


@per_job
def calibration_input(wildcards):
    return images_of(CALIBRATIONS[calibration_file(wildcards)][0])


@per_job
def calibration_recipe(wildcards):
    """The calibration's recipe as rule calibrate's param (a changed one is another file anyway)."""
    return CALIBRATIONS[calibration_file(wildcards)][1].as_dict()


def calibration_file(wildcards):
    return f"resources/calibration/{wildcards.host}/{wildcards.calibration}.json"


@per_job
def calibration_sbatch(wildcards):
    """Slurm options of a calibration: a node to itself, the host it calibrates."""
    return sbatch_options(wildcards.host if "host" in STUDY.axes else None)


@per_job
def server_of_image(wildcards):
    fetched = STUDY.fetched(IMAGES[f"resources/images/{wildcards.image}.img"])
    return [ancient(fetched)] if fetched else []


@per_job
def image_spec(wildcards):
    return STUDY.image_spec(IMAGES[f"resources/images/{wildcards.image}.img"])


@per_job
def run_minutes(wildcards, attempt):
    """Slurm's time limit of one repetition, in minutes: twice its warm-up and measured window (a fio
    run bounded by size only counts 10 minutes), plus 10 for restore, start and stop, times the
    repetitions a job packs (they run one after another); each retry doubles it, so a job cut off at
    its limit is retried with more time."""
    r = STUDY.recipe(CELLS[wildcards.cell])
    seconds = (r.duration_s or 600) + r.warmup_s
    pack = workflow.group_settings.group_components.get("repetition", 1)  # known once the DAG is built
    return attempt * pack * (10 + math.ceil(2 * seconds / 60))


@per_job
def attempt_number(wildcards, attempt):
    """Snakemake's attempt of this job (1, then 2… on --retries), for run.py to tell a retry."""
    return attempt


def sbatch_options(host: str | None, placed: placement.Placement | None = None) -> str:
    """sbatch options of a measuring job (the Slurm profile's `sbatch` resource): the node to itself
    with all its memory, the cell's own node when it names a host, or its topology's hosts when placed
    (one job over them all), the study's partition."""
    options = ["--exclusive", "--mem=0"]
    options += [f"--nodelist={shlex.quote(host)}"] if host else []
    options += [shlex.quote(option) for option in placed.sbatch()] if placed else []
    options += [f"--partition={shlex.quote(STUDY.cluster['partition'])}"] if "partition" in STUDY.cluster else []
    return " ".join(options)


@per_job
def cell_sbatch(wildcards):
    cell = CELLS[wildcards.cell]
    return sbatch_options(cell.get("host"), PLACED.get(wildcards.cell))


@per_job
def repetition_group(wildcards):
    """On a cluster, a cell's run and collect are one group, `repetition`; a Slurm job packs several groups
    (the profile's group-components), so cells of a `host` axis are packed per host. None where the jobs
    run here, a dry run included (Snakemake would list them as group jobs)."""
    if workflow.local_exec:
        return None
    placed = PLACED.get(wildcards.cell)
    if "host" not in STUDY.axes and placed is None:
        return "repetition"
    # packed per host, or per set of hosts for a placed topology (each job asks for exactly its hosts)
    name = f"repetition@{'+'.join(placed.nodelist) if placed else CELLS[wildcards.cell]['host']}"
    workflow.parent_groupids[name] = "repetition"  # group-components counts it as `repetition`
    return name


# A function where jobs differ, the value itself where they do not: Snakemake calls a function for
# every job (BENCHMARKS.md, planning).
RUN_PRIORITY = (
    run_priority
    if len({STUDY.priority(rep, cell) for rep in range(1, STUDY.most_repetitions + 1) for cell in STUDY.cells[:2]}) > 1
    else STUDY.priority(1, STUDY.cells[0])
)
SBATCH = cell_sbatch if "host" in STUDY.axes or PLACEMENTS else sbatch_options(None)  # no cell names a host
# The canary (noise_control.canary, dbsweep/canary.py): the study's first cell, run again between the
# repetitions into results/canary/<cell>/rep~j.
CANARY = STUDY.cells[0].path if STUDY.canary_every else None


def canary_runs(reps: int) -> list[str]:
    """The canary's runs among `reps` repetitions of every cell: one before them, one after every
    canary.every runs and one after the last."""
    if not CANARY:
        return []
    return [
        f"{canary.ROOT}/{CANARY}/rep~{j}/run.json"
        for j in range(1, canary.count(len(STUDY.cells) * reps, STUDY.canary_every) + 1)
    ]


def canary_input(wildcards):
    """Rule canary_table's: the canary's runs among every repetition the study makes (repeat_until's rounds
    too: with them every round ends with a canary, rounds.check)."""
    return canary_runs(repetitions())


def round_canaries(wildcards):
    """The canary's runs up to round k's end, which its check waits for: the canary after a round runs
    before the next round's runs, not after every round at the study's end."""
    return canary_runs(int(wildcards.round))


def canary_total(wildcards, input) -> int:
    """The study's runs the canaries of canary_table's input were placed among: with repeat_until's rounds,
    canary.every x (canaries - 1), every round ending with one; otherwise every cell's repetitions."""
    return min(len(STUDY.cells) * STUDY.most_repetitions, (len(input) - 1) * STUDY.canary_every)


def final_targets(wildcards):
    """The analysis, the summary page, and every repetition's files themselves: Snakemake does not
    remake a missing intermediate file while what was made from it is up to date (snakemake#1978),
    so a cell whose rerun failed (its run.json removed) would otherwise look complete on the next run."""
    return [*aggregate_input(wildcards), *analysis_targets(), *user_targets(), *canary_table(), *rules.summary.output]


def canary_table():
    return [rules.canary_table.output[0]] if CANARY else []


def analysis_targets():
    """The analysis rules the study's workloads declare (Workload.analyses), version tables with several
    versions, open-loop ones with cells at a fixed rate, topology ones with topology cells, recovery with timed events.
    """
    recipes = [STUDY.recipe(cell) for cell in STUDY.cells]
    used = {name for r in recipes for name in workloads.get(r.tool).analyses}
    names = [name for name in workloads.analyses() if name in used]  # in one order, whatever the study's
    if versions.compared(STUDY.cells):
        names.append("versions")
    if any(workloads.open_loop(r.tool, r.options) for r in recipes):
        names.append("openloop")
    if any(r.topology for r in recipes):
        names.append("topology")
    if any(r.events for r in recipes):
        names.append("recovery")
    return [path for name in names for path in getattr(rules, name).output]


def steady_state_of_study():
    """The steady-state windows of rule statistics, for the explore page, when the study has them."""
    steady_state = "results/tables/steady_state.csv"
    return [steady_state] if steady_state in analysis_targets() else []


# The study's own analysis scripts (analysis.scripts, checked by config.py) by stem: each writes into
# results/user/<stem>/ (rule user_script).
USER_SCRIPTS = {Path(script).stem: script for script in STUDY.analysis["scripts"]}
# The analysis settings the R rules read (the scripts are rule user_script's, not theirs).
ANALYSIS = {key: value for key, value in STUDY.analysis.items() if key != "scripts"}


def user_targets():
    return [f"results/user/{stem}" for stem in USER_SCRIPTS]


def user_script_input(wildcards):
    """What a user's script gets: the long tables, and the statistics rule's tables when the study has
    them (not for a study of insert or query cells only)."""
    tables = {
        name: path
        for name, path in rules.aggregate.output.items()
        if not name.endswith("parquet") and name != "not_applicable"
    }
    targets = set(analysis_targets())
    tables |= {
        name: path for name, path in rules.statistics.output.items() if path in targets and not path.endswith(".md")
    }
    return {"script": USER_SCRIPTS[wildcards.stem], **tables}


def summary_params(wildcards, input):
    """Rule summary's study, once the rounds of repeat_until (its input `rounds`) are known."""
    return summary_study(repetitions(), input.rounds)


def summary_study(reps: int, verdicts: list[str] = ()):
    """What the summary page states about the study: its question, matrix and repetitions (reps per cell;
    verdicts: the rounds' of repeat_until)."""
    matrix = {
        axis: list(dict.fromkeys(str(cell[axis]) for cell in STUDY.cells if axis in cell.as_dict()))
        for axis in STUDY.axes
    }
    images = {
        path: STUDY.image(cell).removeprefix("resources/images/").removesuffix(".img")
        for path, cell in CELLS.items()
        if STUDY.image(cell)
    }
    return summary.Study(
        STUDY.name,
        STUDY.description,
        matrix,
        len(STUDY.cells),
        reps,
        [Path(d) for d in rep_dirs(reps)],
        STUDY.not_applicable,
        STUDY.headline,
        images,
        rounds.text(list(map(Path, verdicts)), STUDY.repeat_until) if STUDY.repeat_until else "",
        STUDY.analysis["include_deviated"],
        {axis: str(value) for axis, value in STUDY.baseline.items()},
    )


def summary_after_error(log):
    """onerror: rule all could not complete, so rule summary never ran. Write the page from what
    results/runs holds (failed cells and their errors), dated 1970 so that the next run's rule summary
    always replaces it."""
    stop_progress()
    try:
        logs = [os.path.relpath(path) for path in (log if isinstance(log, list) else [log]) if path]
        written = summary.write(
            summary_study(repetitions(known_only=True)), Path("results"), [], complete=False, log=", ".join(logs)
        )
        for path in written.values():
            os.utime(path, (0, 0))
        print(f"dbsweep: incomplete study; cells without results are listed in {written['html']}", file=sys.stderr)
    except Exception as error:  # the workflow's own error is the one to report
        print(f"dbsweep: could not write the summary page: {error}", file=sys.stderr)


# Of the analysis rules (rules/analyse.smk).


def report(path, caption, category):
    """Snakemake's report(), with the study's name as the category (one per study) and Tables or
    Plots as its subcategory. Every caption ends by including results/report/provenance.rst
    (the summary's rule writes it, with the matrix, the host and the versions)."""
    return snakemake_report(path, caption=caption, category=STUDY.name, subcategory=category)


def sweep_skipped_plots(wildcards):
    """The skipped plots of the plots rule, when the study draws them (storage cells); the figures rule lists
    them in skipped_plots.csv with its own, so the page has one list."""
    path = rules.plots.output.skipped
    return [path] if path in analysis_targets() else []
