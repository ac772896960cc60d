"""A cell's schedule on the run's clock: each event (and the undo its `for` asks) at its planned second
of the measured window, one after another in a thread of its own; each recorded as it happens in
raw/events.jsonl: event index, action, target, planned and actual time (epoch seconds and seconds
into the window), outcome, error. An action that fails is recorded and fails the repetition once
the window is over (what was measured stays in its attempt folder).

    with Schedule(events, targets, start=record["measure_start"], out=raw / "events.jsonl", log=log):
        run the tool
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from dbsweep.events.actions import ACTIONS
from dbsweep.events.targets import Targets

BACKGROUND = ("sql", "command", "drop_caches", "cpu_unhog")  # run beside the schedule; their end is recorded at the end


def timeline(events: list[dict]) -> list[tuple[float, int, str, dict]]:
    """(second, event index, action, event) for each event and each undo, in time order."""
    steps = []
    for i, event in enumerate(events):
        steps.append((float(event["at"]), i, event["action"], event))
        if "for" in event:
            steps.append((float(event["at"] + event["for"]), i, ACTIONS[event["action"]].undo, event))
    return sorted(steps, key=lambda s: (s[0], s[1]))


class Schedule:
    """Runs the timeline from `start` (epoch seconds; the measured window's start) while the body runs.
    Leaving it runs every undo not yet done (a window that ended early) and releases what events
    started (targets.close())."""

    def __init__(self, events: list[dict], targets: Targets, start: float, out: Path, log):
        self.steps = timeline(events)
        self.targets, self.start, self.out, self.log = targets, start, out, log
        self.records: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._done = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Schedule:
        self.out.write_text("")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:  # what the window ended before: undos only (an event not started stays not done)
            done = {(r["index"], r["action"]) for r in self.records}
            for second, index, action, event in self.steps[self._done:]:
                if action != event["action"] and (index, event["action"]) in done:
                    self._do(second, index, action, event, late=True)
        self.targets.close()
        for record in self.records:
            if record["action"] in BACKGROUND and record["index"] in self.targets.outcomes:
                record["outcome"] += f"; {self.targets.outcomes[record['index']]}"
                if "failed" in self.targets.outcomes[record["index"]]:
                    record["error"] = self.targets.outcomes[record["index"]]
        self._write()

    @property
    def errors(self) -> list[str]:
        return [f"{r['action']} {r.get('target') or ''} at {r['planned_s']:g} s: {r['error']}".replace("  ", " ")
                for r in self.records if r.get("error")]

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._done >= len(self.steps):
                    return
                second, index, action, event = self.steps[self._done]
            if self._stop.wait(max(0.0, self.start + second - time.time())):
                return
            with self._lock:
                self._do(second, index, action, event)
                self._done += 1

    def _do(self, second: float, index: int, action: str, event: dict, late: bool = False) -> None:
        actual = time.time()
        record = {"index": index, "action": action, "target": event.get("target"), "planned_s": second,
                  "planned": round(self.start + second, 3), "actual": round(actual, 3),
                  "actual_s": round(actual - self.start, 3), "outcome": "", "error": None}
        try:
            method = getattr(self.targets, action)
            outcome = method(event, index) if action in BACKGROUND else method(event)
            record["outcome"] = outcome + (" (after the window ended)" if late else "")
        except Exception as e:  # noqa: BLE001 - recorded, and raised after the window
            record["error"] = f"{type(e).__name__}: {e}"
        record["done"] = round(time.time(), 3)
        self.records.append(record)
        self.log.write(f"event {action} {event.get('target') or ''} at {record['actual_s']:.3f} s "
                       f"(planned {second:g} s): {record['outcome'] or record['error']}\n")
        self.log.flush()
        self._write()

    def _write(self) -> None:
        self.out.write_text("".join(json.dumps(r) + "\n" for r in self.records))


def timed(events: list[dict] | None, nodes: list, network, latency, raw: Path, log):
    """A cell's timed events as a function of the window's start, giving the Schedule entered around the
    window, or None without any. nodes: the cell's servers (targets.Node), network: its topology's (None
    without one), latency(a, b): a link's declared round trip and jitter."""
    if not events:
        return None

    def at(start: float) -> Schedule:
        return Schedule(events, Targets(nodes, network, latency, raw, log), start, raw / "events.jsonl", log)
    return at
