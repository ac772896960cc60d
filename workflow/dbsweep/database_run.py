"""A repetition of a cell that runs a server: start the cell's server (or its topology: nodes, network,
proxy), warm up, start again cold when asked, read what ran (the server's variables, the dataset's catalog,
each node's memory cap), and measure: one run of the tool, its phases, or a tool that drives the server
itself. The window and the tool's process are measure.py's; the servers, topology/cell.py's; the timed
events, events/schedule.py's; the engine's status texts and counters, database.py's.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

from dbsweep import accounting, database, engines, manifest, server_memory, storage, workloads
from dbsweep.events import schedule as event_schedule
from dbsweep.events.targets import Node
from dbsweep.measure import Rejected, measure, measure_phases, refused, run_tool, server_gone, tail, window
from dbsweep.progress import Follow
from dbsweep.recipe import Recipe
from dbsweep.runtime.resources import Stack
from dbsweep.topology import cell as topology_cell


class Window:
    """What a workload that drives the server itself gets: the running server (db), the cell's recipe,
    the raw folder, and restart(): stop the server, drop the OS caches, start it again (sets db)."""

    def __init__(self, db, recipe: Recipe, raw: Path):
        self.db, self.recipe, self.raw = db, recipe, raw
        self.restart = None


def measure_database(recipe: Recipe, fs, image: Path | None, raw: Path, scratch: Path, record: dict, log,
                      stack: Stack) -> None:
    """Start the cell's server (or its topology: nodes, network, proxy); warm up; with cold_start stop
    it, drop the OS caches and start it again; then measure with server counters sampled beside vmstat
    and iostat: one run of the tool, the tool's phases (several runs in one window), or a tool that
    drives the server itself (tool.measure, given a Window; no per-second counters, which would disturb
    its own). The tool reaches the server through its declared client (tool.client: argv and
    environment), on the topology's client host when there is one."""
    tool = workloads.get(recipe.tool)
    topology = None

    def server():
        nonlocal topology
        try:
            db, topology = topology_cell.serve(recipe, fs, image, scratch, raw, log, stack)
        except engines.ServerExited as e:  # it would not start with the cell's options
            raise Rejected(str(e)) from e
        if topology is not None:
            record["topology"] = topology.facts
        return db

    def client(db, argv):
        """tool.client, on the topology's client host; in a cell with timed events, through the tool's wait
        report (what a stalled second still shows)."""
        timed = recipe.events is not None and tool.wait_report is not None
        return _on_client(tool.client(db, argv), topology, raw, tool.wait_report if timed else None)

    db = server()
    if recipe.warmup_s:
        argv = tool.command(recipe.options, recipe.threads, raw, db.option_file, time_s=recipe.warmup_s)
        with client(db, argv) as (argv, env):
            record["commands"].append(argv)
            progress = Follow(raw / f"warmup.{tool.live_from}", tool.live, recipe.warmup_s, log, "warm-up")
            if run_tool(argv, scratch, raw / "warmup.stdout.txt", raw / "warmup.stderr.txt", progress, env) != 0:
                refused(f"warm-up: {tail(raw, 'warmup.stderr.txt', 'warmup.stdout.txt')}", db)
    if tool.before_window is not None:  # outside the window, before a cold start drops what it read
        tool.before_window(db, recipe.options, raw)
    if recipe.cold_start:
        stack.close("server")
        storage.drop_caches()
        record["caches_dropped"] = manifest.now()
        db = server()
    record["server"] = {"engine": db.engine, "version": db.family.version(db.local),
                        "binary": db.family.server_version(database.basedir(recipe)),
                        "origin": database.origin(recipe), "memory_limit": recipe.memory_limit}
    with open(raw / "variables.tsv", "w") as f:
        f.writelines("\t".join(row) + "\n" for row in db.family.variables(db.local))
    dataset_facts(db, raw, log)
    if tool.measure is not None:  # the workload drives the server itself, restarts included
        driven = Window(db, recipe, raw)

        def restart():
            stack.close("server")
            storage.drop_caches()
            record.setdefault("restarts", []).append(manifest.now())
            driven.db = server()
            return driven.db

        driven.restart = restart
        with (_readings_around(lambda: [("primary", driven.db)], None, recipe, record),
              database.engine_status_around(lambda: [("primary", driven.db)], raw, record, log),
              window(recipe, raw, fs.devices, record, log, servers=[db.handle.pid],
                     not_pinned="the workload is its client in dbsweep's own process")):
            tool.measure(driven)
            record["measure_end"] = time.time()
            record["exit_status"] = 0
        return
    nodes = topology_cell.nodes(recipe, db, topology, fs, raw, log)
    sampler = topology_cell.sampling(nodes, topology, raw)
    timed = event_schedule.timed(recipe.events, nodes, topology.network if topology is not None else None,
                                 topology_cell.latency(recipe), raw, log)
    servers = [node.db.handle.pid for node in nodes]
    account = _accounting(nodes)
    up = lambda: [(node.name, None if node.down else node.db) for node in nodes]  # noqa: E731
    with _readings_around(up, topology, recipe, record), database.engine_status_around(up, raw, record, log):
        if tool.phases is not None:
            measure_phases(recipe, tool, tool.phases(recipe.options, recipe.threads, db.option_file), db, fs, raw,
                            scratch, record, log, sampler, client, timed, servers, account,
                            between=lambda phase: database.engine_status(up(), raw, f"after-{phase}", record, log))
        else:
            argv = tool.command(recipe.options, recipe.threads, raw, db.option_file)
            with client(db, argv) as (argv, env):
                measure(recipe, argv, scratch, topology.devices if topology else fs.devices, raw, record, log,
                         sampler, db, env, timed, servers, account)
    if sampler.error:
        raise RuntimeError(f"server counters: {sampler.error}")
    if tool.after_run is not None:  # e.g. tpcc's consistency check, against the still-running server
        argv, name = tool.after_run(recipe.options, recipe.threads, db.option_file)
        with client(db, argv) as (argv, env):
            record["commands"].append(argv)
            errors = name.replace("stdout", "stderr")
            if run_tool(argv, scratch, raw / name, raw / errors, env=env) != 0:
                gone = server_gone(db)  # first: the client's "lost connection" is its consequence
                raise RuntimeError((f"{gone}\n" if gone else "") + f"{argv[-1]}: {tail(raw, errors, name)}")


def dataset_facts(db, raw: Path, log) -> None:
    """The benchmark database as its catalog reports it (the family's dataset_facts) into raw/dataset.tsv, for
    delivered.dataset; one that cannot be read is a warning (its checks are then "not read"), not a failure."""
    try:
        facts = db.family.dataset_facts(db.local)
    except Exception as error:  # noqa: BLE001 - a description of the run, not a measurement
        log.write(f"warning: the dataset's catalog was not read: {' '.join(str(error).split())}\n")
        return
    (raw / "dataset.tsv").write_text("".join(f"{key}\t{value}\n" for key, value in sorted(facts.items())))


@contextmanager
def _readings_around(nodes, topology, recipe: Recipe, record: dict):
    """What delivered.py checks that can only be read while the cell runs, right before the body (a measured
    window) and right after it, when it ended well: each node's memory cgroup limit (server_memory.caps), and
    the links' round trips at the end (topology/cell.py's rtt_at_end). nodes() as for
    database.engine_status_around."""
    server_memory.caps(nodes(), "start", record)
    yield
    server_memory.caps(nodes(), "end", record)
    topology_cell.rtt_at_end(topology, recipe, record)


@contextmanager
def _on_client(tool_client, topology, raw: Path, wait_report=None):
    """A tool's (argv, env): through its wait report when given (Workload.wait_report), on the
    topology's client host when there is a topology."""
    with tool_client as (argv, env):
        if wait_report is not None:
            argv, extra = wait_report(argv, time.time(), raw)
            env = (env if env is not None else dict(os.environ)) | extra
        yield (topology.client_argv(argv) if topology is not None else argv), env


def _accounting(nodes: list[Node]):
    """A reading of the servers' own CPU and IO totals (accounting.reading) over the nodes that are up:
    one taken down or started again between two readings changes the roots, which then give no delta."""
    def read() -> dict:
        return accounting.reading([node.db.handle.pid for node in nodes
                                   if node.db is not None and not node.down and node.db.handle.pid])
    return read
