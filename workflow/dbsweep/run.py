"""Run one repetition of one cell: filesystem, monitors, the tool, the manifest.

Each attempt writes into its own `attempt~<time>/` folder, which is never
reused. The repetition's `run.json` appears, by rename, only when the attempt
completed, so a failed or killed run never looks complete, and the raw output of
every earlier attempt stays where it was.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

from dbsweep import manifest, storage, workloads
from dbsweep.monitors import Monitors


class Interrupted(BaseException):
    """A signal asked this run to stop; raised so every `with` block releases what it holds."""


@contextmanager
def signals_raise():
    """Turn SIGTERM, SIGINT and SIGHUP into Interrupted; a second signal does not cut the clean-up short."""
    def handler(signum, _frame):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(f"stopped by {signal.Signals(signum).name}")

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def run_tool(argv: list[str], cwd: Path, stdout: Path, stderr: Path) -> int:
    """Run argv in a session of its own; if we are interrupted, it and all its descendants are stopped."""
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, start_new_session=True)
        try:
            return proc.wait()
        finally:
            stop_tree(proc)


def stop_tree(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM proc and every descendant, SIGKILL what is left after `grace` seconds, and wait until all
    are gone. Descendants are found by parentage, not process group: fio's job processes call setsid()."""
    try:
        tree = [psutil.Process(proc.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    for p in tree:
        _signal(p, signal.SIGTERM)
    _, alive = psutil.wait_procs(tree, timeout=grace)
    for p in alive:
        _signal(p, signal.SIGKILL)
    # A process in uninterruptible IO dies only when its IO completes, and holds the mount until then.
    _, alive = psutil.wait_procs(alive, timeout=60)
    proc.wait()
    if alive:
        raise RuntimeError(f"{proc.args[0]}: processes {[p.pid for p in alive]} would not die")


def _signal(p: psutil.Process, sig: int) -> None:
    try:
        p.send_signal(sig)
    except psutil.NoSuchProcess:
        pass


def repetition(cell: dict, rep: int, recipe: dict, out: Path, image: Path | None, active: Path, log) -> dict:
    """Measure one repetition; write out (the repetition's run.json) only on success."""
    released = storage.sweep_stale(active)
    if released:
        log.write(f"released what a dead run left behind: {released}\n")
    tool = workloads.module(recipe["tool"])
    attempt = out.parent.resolve() / f"attempt~{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
    raw = attempt / "raw"
    raw.mkdir(parents=True)
    record = {
        "cell": cell, "rep": rep, "recipe": recipe, "attempt": attempt.name,
        "host": manifest.host(), "tools": {recipe["tool"]: tool.version()},
        "started": manifest.now(), "status": "failed", "commands": [],
    }
    try:
        with signals_raise(), storage.filesystem(recipe["filesystem"], attempt / "scratch", active, image) as fs:
            record["filesystem"] = fs.facts
            record["commands"] += fs.commands
            if image is None:
                for argv in tool.prepare(recipe["options"]):
                    record["commands"].append(argv)
                    _step(argv, fs.path, raw, "prepare")
            argv = tool.command(recipe["options"], recipe["threads"], raw)
            record["commands"].append(argv)
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            with Monitors(raw, fs.devices) as mon:
                record["monitors"] = mon.commands
                record["measure_start"] = time.time()
                record["exit_status"] = run_tool(argv, fs.path, raw / "stdout.txt", raw / "stderr.txt")
                record["measure_end"] = time.time()
            if record["exit_status"] != 0:
                raise RuntimeError(f"{argv[0]} exited with {record['exit_status']}: {_tail(raw, 'stderr.txt', 'stdout.txt')}")
            tool.summary(raw)  # refuses output without the tool's final report
        record["status"] = "ok"
    except BaseException as e:
        record["error"] = str(e) or type(e).__name__
        raise
    finally:
        record["ended"] = manifest.now()
        record["checksums"] = manifest.checksums(raw)
        manifest.write_json(attempt / "run.json", record)
        shutil.rmtree(attempt / "scratch", ignore_errors=True)
    manifest.write_json(out, record)
    return record


def _step(argv: list[str], cwd: Path, raw: Path, name: str) -> None:
    rc = run_tool(argv, cwd, raw / f"{name}.stdout.txt", raw / f"{name}.stderr.txt")
    if rc != 0:
        raise RuntimeError(f"{name}: {argv[0]} exited with {rc}: {_tail(raw, f'{name}.stderr.txt', f'{name}.stdout.txt')}")


def _tail(raw: Path, *names: str, lines: int = 3) -> str:
    """The last lines of the first of names that has any (sysbench prints its errors on stdout)."""
    for name in names:
        path = raw / name
        text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        if text:
            return " | ".join(text[-lines:])
    return "(no output)"
