"""What a workload declares, and what the rest of the pipeline reads: each module under
workloads/ ends with one `WORKLOAD = Workload(...)`; the registry (workloads/__init__.py)
collects them. Nothing outside workloads/ tests a tool's name: it reads these fields.

Required of every workload: its tool name, kind, the functions check, dataset, prepare, command,
samples, summary and version, and the measured window's length (duration); command and live unless it
runs phases or measures by itself. The rest is optional and None / empty when a workload does not have it.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterator

STORAGE = "storage"  # runs on a filesystem alone
DATABASE = "database"  # runs against a database server the pipeline starts


@dataclass(frozen=True)
class Run:
    """What collect knows of a repetition beyond its raw output, for a workload's own tables."""
    system: list[dict]  # collect's system rows (vmstat, iostat), numbered like the samples
    cpus: int  # the host's CPUs


@dataclass(frozen=True)
class Table:
    """A per-repetition table of a workload's own (beside samples, system, counters): collect writes
    it as <name>.csv in every repetition folder (only its header for other workloads), aggregate
    as results/tables/<name>.csv.gz. rows(raw, run) gets the raw folder and a Run."""
    columns: tuple[str, ...]
    rows: Callable[[Path, object], list[dict]]


@contextmanager
def sysbench_client(db, argv: list[str]) -> Iterator[tuple[list[str], dict | None]]:
    """A sysbench command against the cell's server: its connection comes from db.option_file (already
    in argv), plus the options the engine needs (e.g. MyRocks tables); the caller's environment."""
    yield db.sysbench(argv), None


PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def percent_of(value) -> float | None:
    """The percentage of a `rate: 80%` string, or None for any other value."""
    match = PERCENT.match(value) if isinstance(value, str) else None
    return float(match[1]) if match else None


def no_files(options: dict) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Workload:
    tool: str  # the value of `tool:` in a study
    kind: str  # STORAGE or DATABASE
    check: Callable  # (options, where) -> None; raises ConfigError naming key and value
    dataset: Callable  # (options, **settings) -> what prepare writes (the image's key)
    prepare: Callable  # (dataset) storage, (dataset, config_file[, threads]) database -> argv lists
    samples: Callable  # (raw, start) -> per-second rows
    summary: Callable  # (raw) -> the tool's final figures
    version: Callable  # () -> the tool's version line
    duration: Callable[[dict], int | None]  # options -> the measured window in seconds (None: until done)
    # (options, threads, raw) storage, (options, threads, raw, config_file, time_s=None) database; None for
    # a workload that runs phases or measures by itself
    command: Callable | None = None
    live: Callable | None = None  # (line, state) -> (second, value, unit) or None: the run log's progress line
    dataset_options: tuple[str, ...] = ()  # the options that shape the dataset (the rest shape only the run)
    settings: tuple[str, ...] = ()  # workload keys besides tool, options, warmup that it accepts
    analyses: tuple[str, ...] = ()  # the analysis rules its cells feed (rule names of rules/analyse.smk)
    per_second: bool = True  # one per-second series per repetition (statistics and figures read it)
    takes_rate: bool = False  # `rate` is a fixed arrival rate (an open loop), checked as one
    rate_figure: str = "tps"  # the summary figure in the rate's unit, which a calibration measures (`rate: 80%`)
    warmup: bool = True  # takes `warmup:` seconds before the window (database workloads)
    summary_keys: tuple[str, ...] = ()  # figures beyond the common ones: columns of the summary table
    detail_keys: tuple[str, ...] = ()  # figures kept in summary.json only
    sample_columns: tuple[str, ...] = ()  # per-second columns beyond the common ones
    tables: dict[str, Table] = field(default_factory=dict)
    dataset_bytes: Callable | None = None  # (dataset) -> bytes it takes on its filesystem, when known in advance
    # (dataset) -> how many tables prepare makes, read back by the delivered checks (None: its `tables`, where
    # one table is one `tables`)
    dataset_tables: Callable | None = None
    percentiles: Callable | None = None  # (raw) -> [(percentile, ms)] over the run
    percentile_source: str | None = None  # where those come from, said in the table
    families: tuple[str, ...] | None = None  # server families it runs on (None: every one)
    not_applicable: Callable | None = None  # (options, engine) -> why it cannot run there, or None
    load: Callable | None = None  # (db, dataset, log): loads the dataset through the engine's client
    phases: Callable | None = None  # (options, threads, config_file) -> [(name, argv)]: runs in one window
    measure: Callable | None = None  # (database_run.Window): drives the server itself (no per-second counters)
    after_run: Callable | None = None  # (options, threads, config_file) -> (argv, raw file of its stdout)
    # (db, options, raw): once against the running server, after any warm-up and before the measured window (a
    # sysbench script's statements' plans), so that it changes no timing
    before_window: Callable | None = None
    # (db, argv) -> a context of (argv, env): a command made to reach the running server, and the environment it
    # runs with (None: the caller's); what it needs (a password file) exists only within
    client: Callable = sysbench_client
    # (argv, origin, raw folder) -> (argv, env): the run command made to report, beside its own lines, each
    # second's longest transaction and every long one (samples' lat_max_ms, wait_ms); used in cells with
    # timed events
    wait_report: Callable | None = None
    live_from: str = "stdout.txt"  # the raw file its per-second lines go to
    # (options) -> the options whose values are files the user points at (an .sql file, a script): a relative
    # one is relative to the study file's folder; config.load makes them absolute before check() sees them
    files: Callable[[dict], tuple[str, ...]] = no_files
    # (options, where) -> None: a cell's options once its axes' values are substituted, for what check() leaves
    # to the cell (a value naming an axis, {axis}); raises ConfigError naming key and value
    check_cell: Callable | None = None
    # the option duration reads (config.load refuses a value it cannot read or of less than 1 s, naming it);
    # None for a workload whose window no option sets
    duration_key: str | None = "time"

    def __post_init__(self):
        if self.kind not in (STORAGE, DATABASE):
            raise ValueError(f"{self.tool}: kind {self.kind!r} is neither {STORAGE} nor {DATABASE}")

    @property
    def database(self) -> bool:
        return self.kind == DATABASE

    def rate(self, options: dict) -> int | None:
        """The fixed arrival rate of an open-loop run, or None for a closed loop. A percentage (`rate: 80%`)
        is no rate yet: the run rule makes it one against the host's calibration (calibration.py)."""
        if not self.takes_rate or options.get("rate") is None:
            return None
        if self.rate_percent(options) is not None:
            raise ValueError(f"rate {options['rate']!r} is relative to a calibration; resolve it first "
                             "(calibration.resolve)")
        return int(str(options["rate"]))

    def rate_percent(self, options: dict) -> float | None:
        """The arrival rate as a percentage of the host's calibrated capacity (`rate: 80%`), or None."""
        if not self.takes_rate:
            return None
        return percent_of(options.get("rate"))
