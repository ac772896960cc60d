"""fio: one job (numjobs copies) on one shared file, fio.data, in the data directory.

Raw output kept in rawdir: fio.json (the final report) and the per-second logs
fio_{bw,iops,lat,clat,slat}.<job>.log, one set per numjobs copy.
"""
from __future__ import annotations

import bisect
import functools
import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path

from dbsweep import tool_answers, units
from dbsweep.errors import ConfigError
from dbsweep.workloads import CHANGES_OUTPUT, NAMES_PATH, RUNS_COMMAND, SET_BY_DBSWEEP, refuse
from dbsweep.workloads.contract import STORAGE, Workload

TOOL = "fio"
DATAFILE = "fio.data"
LOG_PREFIX = "fio"
NS_PER_MS = 1e6

# Options a study may not set (compared as _key(name)), and why. dbsweep sets the job's name, its one file,
# its copies and its reports; the rest would change the files this module parses, run a command, read or
# write a path of its own choosing (an I/O log replays onto every file it names), or reach beyond the cell:
# another fio (server, client), the host's I/O scheduler, a cgroup outside the run's. fio's command-line
# options are here too, though fio's own list (_job_options) already keeps them out where fio is installed.
RESERVED = {
    **dict.fromkeys(("name", "filename", "nrfiles", "numjobs", "group_reporting", "output", "output_format",
                     "unified_rw_reporting", "write_bw_log", "write_iops_log", "write_lat_log", "log_avg_msec",
                     "log_unix_epoch", "eta", "eta_newline", "eta_interval"), SET_BY_DBSWEEP),
    **dict.fromkeys(("log_max_value", "per_job_logs", "log_compression", "log_store_compressed",
                     "log_alternate_epoch", "log_alternate_epoch_clock_id", "status_interval", "minimal",
                     "terse_version", "append_terse", "debug", "idle_prof", "parse_only", "merge_blktrace_only",
                     "showcmd", "cmdhelp", "enghelp", "help", "version", "crctest", "cpuclock_test"), CHANGES_OUTPUT),
    **dict.fromkeys(("directory", "filename_format", "opendir", "write_iolog", "read_iolog", "replay_redirect",
                     "merge_blktrace_file", "write_hist_log", "aux_path", "daemonize", "inflate_log",
                     "bandwidth_log"), NAMES_PATH),
    **dict.fromkeys(("exec_prerun", "exec_postrun", "trigger", "trigger_file", "trigger_timeout",
                     "trigger_remote"), RUNS_COMMAND),
    **dict.fromkeys(("server", "client", "remote_config"), "runs fio elsewhere"),
    **dict.fromkeys(("cgroup", "cgroup_nodelete", "cgroup_weight"), "moves fio out of the run's cgroup"),
    "ioscheduler": "changes the I/O scheduler of the host's device",
    "profile": "runs a profile's own jobs on the files it names",
}
# Options whose values may name a path or a program: (pattern of the refused values, why).
VALUES = {
    # exec runs a program; external:/a/lib.so, or any name that is not an engine's, is a library fio loads
    "ioengine": (re.compile(r"exec|external.*|.*[^a-z0-9_].*", re.I), "runs a program or loads a library"),
    "mem": (re.compile(r".*:.*"), NAMES_PATH),  # mmap:/a/file, mmaphuge:/hugepages/file
}
REQUIRED = ("size",)


def _key(name) -> str:
    # fio spells command-line options with dashes (output-format) and job
    # options with underscores (write_bw_log); catch both spellings.
    return str(name).replace("-", "_")


def _value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def check(options: dict, where: str) -> None:
    refuse(options, where, RESERVED, _key, "fio")
    check_values(options, where)
    for name in REQUIRED:
        if name not in options:
            raise ConfigError(f"{where}.{name}: missing (fio needs the size of {DATAFILE}, e.g. 1G)")
    whole_names(options, where)
    parse_only(options, where)


def check_values(options: dict, where: str) -> None:
    """Values that would run a program or name a path (VALUES); a value naming an axis ({axis}) is
    checked in each cell, once substituted (config.py)."""
    for name, value in options.items():
        refused = VALUES.get(_key(name))
        if refused and "{" not in str(value) and refused[0].fullmatch(str(value).strip()):
            raise ConfigError(f"{where}.{name}: {value!r} {refused[1]}; remove it")


def whole_names(options: dict, where: str) -> None:
    """fio takes an option from any prefix of its name that no other option shares (getopt_long_only):
    `exec_pre` runs exec_prerun, past the names RESERVED lists. So every name must be a whole name of one of
    fio's job options (or an alias: `fio --cmdhelp=NAME`), or an option of the job's I/O engine (`fio
    --enghelp=ENGINE`). Where fio is not installed, the job's host checks it when it loads the study."""
    known = _job_options()
    if known is None:
        return
    engine = str(options.get("ioengine", "psync"))
    for name, value in options.items():
        if name in known or _alias(name):
            continue
        if "{" in engine:
            continue  # perhaps an option of the engine an axis names: checked in each cell
        if name in _engine_options(engine):
            continue
        raise ConfigError(f"{where}.{name}: {value!r} is not the whole name of a fio job option (see `fio "
                          f"--cmdhelp=all`, `fio --enghelp={engine}`)")


@functools.cache
def _job_options() -> frozenset[str] | None:
    """The names of fio's job options (`fio --cmdhelp=all`), or None without fio."""
    said = _fio("--cmdhelp=all")
    names = re.findall(r"^\s*([a-z0-9_-]+)\s*:", said or "", re.M)
    return frozenset(names) if names else None


@functools.cache
def _alias(name: str) -> bool:
    """Whether fio knows name as a whole option name or an alias (`fio --cmdhelp=NAME` describes it)."""
    said = _fio(f"--cmdhelp={name}")
    return bool(said) and "No such command" not in said  # else fio shows the closest name's help


@functools.cache
def _engine_options(engine: str) -> frozenset[str]:
    """The options of an I/O engine (`fio --enghelp=ENGINE`; none for an engine without any, or unknown)."""
    said = _fio(f"--enghelp={engine}") or ""
    return frozenset(re.findall(r"^([a-z0-9_-]+)\s+:", said, re.M))


def _fio(arg: str) -> str | None:
    """What `fio ARG` prints, or None without fio."""
    said = tool_answers.answer(["fio", arg])
    return (said[1] + said[2]).strip() if said else None


def check_cell(options: dict, where: str) -> None:
    """A cell's options, its axes' values substituted: what check() left to it."""
    check_values(options, where)
    whole_names(options, where)


def parse_only(options: dict, where: str) -> None:
    """fio's own check of the options (`fio --parse-only`, a tenth of a second), so that an unknown option
    or a bad value stops the study when it loads rather than in its job. Values naming an axis ({axis})
    are left to the job."""
    given = {name: value for name, value in options.items() if "{" not in str(value)}
    first = _refusal(tuple(f"--{name}={_value(value)}" for name, value in given.items()))
    if first is None:
        return
    named = re.search(r"failed parsing (\S+?)=|unrecognized option '--([^=']+)", first)
    name = next((n for n in (named.groups() if named else ()) if n and n in given), None)
    name = name or next((n for n, value in given.items() if f" {_value(value)} " in f" {first} "), None)
    if name is None:
        raise ConfigError(f"{where}: {given!r} refused by fio: {first}")
    raise ConfigError(f"{where}.{name}: {given[name]!r} refused by fio: {first}")


def dataset(options: dict) -> dict:
    return {"size": options["size"]}


def dataset_bytes(dataset: dict) -> int | None:
    """Bytes the dataset takes on its filesystem (fio.data), or None when fio works it out (e.g. size=50%)."""
    try:
        return units.parse_size(dataset["size"])
    except ConfigError:
        return None


def _refusal(args: tuple[str, ...]) -> str | None:
    """fio's first line when it refuses args (--parse-only), else None (also without fio here, e.g. on a login
    node: the job runs it)."""
    said = tool_answers.answer(["fio", "--parse-only", "--name=check", f"--filename={DATAFILE}", *args])
    if said is None or said[0] == 0:
        return None
    lines = [line.strip() for line in (said[2] + said[1]).splitlines() if line.strip()]
    return lines[0] if lines else f"exit {said[0]}"


def prepare(options: dict) -> list[list[str]]:
    """Write fio.data in full, so the measured run never lays out or extends it."""
    return [["fio", "--name=prepare", f"--filename={DATAFILE}", f"--size={_value(options['size'])}",
             "--rw=write", "--bs=1M", "--end_fsync=1", "--output-format=json"]]


def command(options: dict, threads: int, rawdir: Path) -> list[str]:
    rawdir = Path(rawdir)
    logs = rawdir / LOG_PREFIX
    argv = [
        "fio", "--name=dbsweep", f"--filename={DATAFILE}",
        f"--numjobs={threads}", "--group_reporting",
        # "both" adds a "mixed" section (reads and writes together) to fio.json,
        # so the summary of a mixed workload is fio's own figure, not ours.
        "--unified_rw_reporting=both",
        "--output-format=json", f"--output={rawdir / 'fio.json'}",
        f"--write_bw_log={logs}", f"--write_iops_log={logs}", f"--write_lat_log={logs}",
        "--log_avg_msec=1000", "--log_unix_epoch=1",
        # a status line on stdout every second, for the run log's progress line (live())
        "--eta=always", "--eta-interval=1", "--eta-newline=1",
    ]
    if "runtime" in options and "time_based" not in options:
        argv.append("--time_based=1")  # with a value, fio lists it under "job options" in fio.json
    argv += [f"--{name}={_value(value)}" for name, value in options.items()]
    return argv


# fio's status line: "Jobs: 1 (f=1): [r(1)][66.7%][r=51.2MiB/s][r=13.1k IOPS][eta 00m:02s]";
# with reads and writes "[r=9.8k,w=4212 IOPS]".
STATUS_IOPS = re.compile(r"\[([^\[\]]*) IOPS\]")
STATUS_NUMBER = re.compile(r"[rwt]=(\d+(?:\.\d+)?)([kMG]?)")
STATUS_UNITS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}


def live(line: str, state: dict) -> tuple[None, float, str] | None:
    """(None, IOPS, "IOPS") of a status line (fio gives no elapsed second there), for the progress line."""
    match = STATUS_IOPS.search(line)
    if not match:
        return None
    return None, sum(float(n) * STATUS_UNITS[u] for n, u in STATUS_NUMBER.findall(match[1])), "IOPS"


def _read_log(path: Path) -> list[tuple[int, int, int]]:
    """(epoch ms, value, direction) rows of one fio log.

    Columns are: time, value, direction (0 read, 1 write, 2 trim), block size
    (0 in averaged logs), [offset if log_offset], priority; only the first three
    are used.
    """
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            rows.append((int(fields[0]), int(fields[1]), int(fields[2])))
        except (IndexError, ValueError):
            raise ValueError(f"{path}:{number}: not a fio log line: {line!r}") from None
    return rows


def _logs(rawdir: Path, kind: str) -> dict[str, list[tuple[int, int, int]]]:
    """Rows of each numjobs copy's log of one kind, keyed by the job number."""
    return {p.name.split(".")[-2]: _read_log(p) for p in sorted(rawdir.glob(f"{LOG_PREFIX}_{kind}.*.log"))}


def samples(rawdir: Path, start: float) -> list[dict]:
    """Per-second rows summed over all numjobs copies and both directions.

    fio's averaged logs (log_avg_msec=1000) hold, per job and direction, a row
    at the end of each 1 s window: the IOPS log the rate of completed I/Os, the
    bw log KiB/s. Seconds are counted from the earliest row (the end of the
    first window), which assumes some I/O completed in the first second; with
    ramp_time, the logs start after the ramp. What fio 3.33 does, and how it
    is handled here:
    - No bw/iops row for a window without I/O: a second inside the run with no
      row is a stall, iops and mibs 0.
    - The bw/iops row of the last window is often lost (the job ends at the
      window's end, before the sampler runs), for some numjobs copies and not
      others: trailing seconds without a row from every copy are dropped, so a
      run of N seconds yields N or N-1 rows. A lost second is not guessed.
    - The lat log row (mean total latency, ns) is written at the first I/O
      after its window ended, so after a stall it comes late: each lat row
      belongs to the latest bw/iops row at or before it (see _match_lat).
    - Rows off the 1 s grid (fio's sampler late by > 250 ms) make the seconds
      ambiguous: ValueError rather than a wrong split.
    """
    rawdir = Path(rawdir)
    iops, bw, lat = _logs(rawdir, "iops"), _logs(rawdir, "bw"), _logs(rawdir, "lat")
    stamps = [t for rows in iops.values() for t, _, _ in rows]
    if not stamps:
        raise ValueError(f"{rawdir}: no rows in {LOG_PREFIX}_iops.*.log (fio killed, or ran under 2 s)")
    first = min(stamps)
    if first / 1000 < start:
        raise ValueError(f"{rawdir}: fio log time {first / 1000:.3f} is before the run start {start:.3f}")

    # second -> (job, direction) -> {"iops", "kib", "lat"}
    cells = defaultdict(lambda: defaultdict(dict))
    for kind, logs in (("iops", iops), ("kib", bw)):
        for job, rows in logs.items():
            for t, value, direction in rows:
                offset = (t - first) / 1000
                if abs(offset - round(offset)) > 0.25:
                    raise ValueError(f"{rawdir}: fio_{kind}.{job}.log row at {t} is off the 1 s grid")
                cell = cells[round(offset) + 1][(job, direction)]
                if kind in cell:
                    raise ValueError(f"{rawdir}: fio_{kind}.{job}.log has two rows in second {round(offset) + 1}")
                cell[kind] = value
    for (job, direction), rows in _match_lat(iops, lat).items():
        for t, value in rows:
            cells[round((t - first) / 1000) + 1][(job, direction)]["lat"] = value

    last = max(cells)
    while last > 0 and {job for job, _ in cells[last]} != set(iops):
        last -= 1  # a copy's final row is missing, the sum would be short
    if not last:
        raise ValueError(f"{rawdir}: no second has an iops row from every numjobs copy ({len(iops)})")
    out = []
    for second in range(1, last + 1):
        parts = [c for c in cells[second].values() if c.get("iops")]
        weight = sum(c["iops"] for c in parts)
        # mean latency weighted by each job/direction's I/Os in the second;
        # unknown if any of them has no lat row
        known = parts and all("lat" in c for c in parts)
        out.append({
            "time": first / 1000 + (second - 1),
            "second": second,
            "iops": float(weight),
            "mibs": sum(c.get("kib", 0) for c in cells[second].values()) / 1024,
            "lat_ms": sum(c["lat"] * c["iops"] for c in parts) / weight / NS_PER_MS if known else None,
            "lat_pct_ms": None,  # the averaged logs carry no percentiles
        })
    return out


LAT_SLACK_MS = 100  # a lat row may be stamped a few ms before its iops row


def _match_lat(iops: dict, lat: dict) -> dict:
    """For each (job, direction): [(iops row time, mean latency)].

    A lat row goes to the latest iops row of the same job and direction stamped
    at most LAT_SLACK_MS after it, if no earlier lat row took that iops row; lat
    rows left over (the final partial window, whose iops row fio lost) are
    dropped.
    """
    out = defaultdict(list)
    for job, lat_rows in lat.items():
        for direction in {d for _, _, d in lat_rows}:
            times = sorted(t for t, _, d in iops.get(job, []) if d == direction)
            taken = set()
            for t, value, d in sorted(lat_rows):
                if d != direction:
                    continue
                i = bisect.bisect_right(times, t + LAT_SLACK_MS) - 1
                if i >= 0 and times[i] not in taken:
                    taken.add(times[i])
                    out[(job, direction)].append((times[i], value))
    return out


def summary(rawdir: Path) -> dict:
    """fio's own final figures from fio.json (group_reporting: one job entry).

    Latencies: mean and max from lat_ns (submission + completion), p95/p99 from
    clat_ns.percentile (completion only), because fio computes percentiles for
    clat by default and not for lat. fio.json is in nanoseconds.
    """
    path = Path(rawdir) / "fio.json"
    if not path.exists():
        raise ValueError(f"{path}: missing (fio was killed or did not start)")
    text = path.read_text()
    # fio prints notes before the JSON; on SIGTERM/SIGINT it says so there, then
    # writes a complete-looking report of the shortened run
    head = text[:text.find("{")] if "{" in text else text
    signalled = re.search(r"terminating on signal (\d+)", head)
    if signalled:
        raise ValueError(f"{path}: fio was stopped by signal {signalled[1]}; the report covers a cut-short run")
    try:
        report = json.loads(text[len(head):])
    except ValueError:
        raise ValueError(f"{path}: not a complete fio JSON report (run killed?)") from None
    jobs = report.get("jobs", [])
    if len(jobs) != 1:
        raise ValueError(f"{path}: {len(jobs)} job entries, expected 1 (group_reporting)")
    job = jobs[0]
    if job.get("error"):
        raise ValueError(f"{path}: fio reported error {job['error']} for job {job.get('jobname')!r}")
    if "mixed" not in job:
        raise ValueError(f"{path}: no 'mixed' section (run without --unified_rw_reporting=both)")
    mixed = job["mixed"]
    if not mixed["total_ios"]:
        raise ValueError(f"{path}: fio completed no I/O")
    options = job.get("job options", {})
    wanted = _msec(options.get("runtime")) if options.get("time_based", "0") != "0" else None
    if wanted is not None and mixed["runtime"] < wanted - RUNTIME_SLACK_MS:
        raise ValueError(f"{path}: fio ran {mixed['runtime']} ms of a time_based runtime of {options['runtime']}")
    pct = mixed["clat_ns"].get("percentile", {})

    def ms(ns):
        return None if ns is None else ns / NS_PER_MS

    return {
        "iops": mixed["iops"],
        "read_iops": job["read"]["iops"],
        "write_iops": job["write"]["iops"],
        "mibs": mixed["bw_bytes"] / 2**20,
        "fsyncs": None,
        "lat_mean_ms": ms(mixed["lat_ns"]["mean"]),
        "lat_p95_ms": ms(pct.get("95.000000")),
        "lat_p99_ms": ms(pct.get("99.000000")),
        "lat_max_ms": ms(mixed["lat_ns"]["max"]),
    }


def percentiles(rawdir: Path) -> list[tuple[float, float]]:
    """(percentile, completion latency ms) from fio.json's clat_ns.percentile of the whole run (all
    directions together); call after summary(), which refuses a report that is cut or signalled."""
    text = (Path(rawdir) / "fio.json").read_text()
    report = json.loads(text[text.find("{"):])
    pct = report["jobs"][0]["mixed"]["clat_ns"].get("percentile", {})
    return sorted((float(p), ns / NS_PER_MS) for p, ns in pct.items())


RUNTIME_SLACK_MS = 250
UNIT_MS = {"us": 1e-3, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _msec(value) -> float | None:
    """fio's time value ("30", "30s", "2m", "500ms"; plain numbers are seconds) in ms; None if unknown."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)?", str(value or "").strip().lower())
    return None if not match else float(match[1]) * UNIT_MS[match[2] or "s"]


def version() -> str:
    out = subprocess.run(["fio", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


WORKLOAD = Workload(
    tool=TOOL, kind=STORAGE, check=check, dataset=dataset, prepare=prepare, command=command, samples=samples,
    summary=summary, live=live, version=version, warmup=False,
    duration=lambda options: None if options.get("runtime") is None else int(str(options["runtime"]).rstrip("s")),
    duration_key="runtime",  # without it fio runs until `size` is done
    dataset_options=("size",), analyses=("statistics", "figures", "tables", "plots"),
    percentiles=percentiles, percentile_source="fio clat percentiles", dataset_bytes=dataset_bytes,
    check_cell=check_cell)
