"""Timed events in the measured window: named schedules the `events` axis chooses, like an option set.

    events:
      replica-blip:   [{at: 10, for: 1, action: cut, target: link primary-replica1}]
      node-loss:      [{at: 20, action: kill, target: node2}]
      checkpoint:     [{at: 10, action: sql, statement: CHECKPOINT}]
    axes:
      events: [none, replica-blip]

`at` is seconds from the start of the measured window; `for` (where the action has an undo: cut → heal,
pause → resume, delay / loss → removed, cpu_hog → stopped, io_throttle → lifted) ends it that much later. A
schedule whose event ends outside the window, names a node or link the cell's topology lacks, or gives an action
something it does not take, is refused when the study loads.

actions.py: what each action does, with which mechanism; schedule.py: runs a cell's schedule on the
run's clock and records each event's planned and actual time and outcome (raw/events.jsonl).
"""
from __future__ import annotations

from dbsweep.concern import Concern, Draft
from dbsweep.errors import ConfigError, shown
from dbsweep.events.actions import ACTIONS
from dbsweep.matrix import Cell
from dbsweep.topology import placement, settings as topology

AXIS = "events"
NONE = "none"
KEYS = {"at", "for", "action", "target"}


def check(config: dict, axes: dict) -> None:
    """The schedules and the axis values, each event's keys and values (load time, before any cell)."""
    schedules = config.get("events", {})
    if NONE in schedules:
        raise ConfigError(f"events.{NONE}: {shown(schedules[NONE])}: none means no events; choose another name")
    for name, schedule in schedules.items():
        for i, event in enumerate(schedule):
            _check_event(event, f"events.{name}[{i}]")
    for value in axes.get(AXIS, []):
        check_value(config, value, f"axes.{AXIS}")


def check_value(config: dict, value, where: str) -> None:
    """A value of the events axis (or of an include rule's) is none or a schedule of events:."""
    if str(value) != NONE and str(value) not in config.get("events", {}):
        raise ConfigError(f"{where}: {value!r} is not defined (define it under events: or use none)")


def _check_event(event: dict, where: str) -> None:
    action = ACTIONS.get(event["action"])
    if action is None:
        raise ConfigError(f"{where}.action: {event['action']!r} is not one of {', '.join(ACTIONS)}")
    allowed = KEYS | set(action.takes)
    for key in event:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: {event[key]!r}: action {event['action']} does not take it")
    for key in action.needs:
        if key not in event:
            raise ConfigError(f"{where}.{key}: missing (action {event['action']} needs it)")
    if "for" in event and action.undo is None:
        raise ConfigError(f"{where}.for: {event['for']!r}: action {event['action']} has no end; "
                          f"schedule its opposite as an event of its own")
    if action.target == "link" and not str(event.get("target", "")).startswith("link "):
        raise ConfigError(f"{where}.target: {event.get('target')!r}: action {event['action']} needs "
                          f"'link <node>-<node>'")
    if action.target == "host" and "target" in event:
        raise ConfigError(f"{where}.target: {event['target']!r}: action {event['action']} acts on the host")
    action.check(event, where)


def of_cell(config: dict, cell: dict) -> list[dict] | None:
    """The cell's schedule (events sorted by time), or None without the events axis."""
    if AXIS not in cell:
        return None
    name = str(cell[AXIS])
    if name == NONE:
        return []
    return sorted((dict(e) for e in config["events"][name]), key=lambda e: e["at"])


def check_cell(events: list[dict] | None, window_s: int | None, nodes: list[str] | None, where: str,
               placed: str | None = None) -> None:
    """Refuse a schedule a cell cannot keep: an event that ends after the measured window, a node or link
    the cell's topology lacks (nodes None: a cell without topology, whose one server is `primary`), an
    action a node's job step does not do on its host (placed: the name of the cell's topology when it is
    placed on hosts)."""
    names = nodes or ["primary"]
    for i, event in enumerate(events or []):
        at = f"{where}[{i}]"
        if placed is not None and ACTIONS[event["action"]].placed is None:
            ways = {}
            for name, action in ACTIONS.items():
                if action.placed is not None:
                    ways.setdefault(action.placed, []).append(name)
            there = " and ".join(f"{', '.join(names)} ({how})" for how, names in ways.items())
            raise ConfigError(f"{at}.action: {event['action']!r}: topology {placed} is placed on hosts, where only "
                              f"{there} run; exclude the combination")
        end = event["at"] + event.get("for", 0)
        if window_s is not None and end > window_s:
            raise ConfigError(f"{at}: {shown(event)} ends at {end:g} s, after the {window_s} s measured window")
        target = event.get("target")
        action = ACTIONS[event["action"]]
        if action.target == "link":
            if nodes is None:
                raise ConfigError(f"{at}.target: {target!r}: links join a topology's nodes; add the topology axis")
            ends = str(target).removeprefix("link ").split("-", 1)
            for name in ends:
                if name not in names + ["client"] or len(ends) != 2:
                    raise ConfigError(f"{at}.target: {target!r}: no link to {name!r} "
                                      f"(nodes {', '.join(names)}, and client)")
        elif action.target in ("node", "server") and target is not None and target not in names:
            raise ConfigError(f"{at}.target: {target!r}: no such node ({', '.join(names)})")


def not_applicable(events: list[dict] | None, window_s: int | None, in_process: bool,
                   fs_type: str | None = None) -> str | None:
    """Why a cell cannot run a schedule at all (its workload measures by itself, or has no fixed
    window; an IO limit on a filesystem without a device), or None."""
    if not events:
        return None
    if in_process:
        return "its workload measures by itself; events run beside a tool's measured window"
    if window_s is None:
        return "its workload has no fixed measured window to schedule events in"
    if fs_type == "tmpfs" and any(e["action"] == "io_throttle" for e in events):
        return "io_throttle limits a block device, and tmpfs has none"
    return None


def _not_applicable(draft: Draft, cell: Cell) -> str | None:
    """Why the cell cannot run its timed events (not_applicable), or None."""
    values = cell.as_dict()
    workload = draft.workload(cell)
    if workload is None or "engine" not in values:
        return None
    fs_type = draft.filesystems.get(str(values["filesystem"]), {}).get("type")
    return not_applicable(of_cell(draft.config, values), workload.duration(draft.options(cell)),
                          workload.measure is not None, fs_type)


def _check_cells(draft: Draft, cells: list[Cell]) -> None:
    """A schedule a cell cannot keep (an event after its window, a node its topology lacks) is refused."""
    for cell in cells:
        values = cell.as_dict()
        schedule = of_cell(draft.config, values)
        workload = draft.workload(cell)
        if not schedule or not workload.database:
            continue
        part = topology.recipe(draft.config, values)
        nodes = part["topology"]["nodes"] if part else None
        placed = placement.of(part["topology"]) if part else None
        check_cell(schedule, workload.duration(draft.options(cell)), nodes, f"events.{values[AXIS]}",
                   placed.topology if placed else None)


CONCERN = Concern(name="events", keys=(AXIS,), sections=(AXIS,), axes=(AXIS,),
                  check=lambda draft: check(draft.config, draft.axes),
                  values={AXIS: lambda draft, value, where: check_value(draft.config, value, where)},
                  not_applicable=_not_applicable, check_cells=_check_cells,
                  recipe=lambda study, values, database: {"events": of_cell(study.topologies, values)}
                  if database else {})
