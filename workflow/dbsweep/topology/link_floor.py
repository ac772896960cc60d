"""The smallest round trip a topology link can add on this host, so that a study declaring less is refused
at load instead of measuring a link three times slower than it says (issue 32: 0.1 ms declared, 0.28-0.32 ms
delivered).

Where the kernel has sch_netem, netem adds the delay and there is no floor to check. Where it has not, the
user-space delayer (topology/delayer.py) holds each packet for at least its own trip through user space, about
0.1 ms each way on a quiet host, more on a loaded one (BENCHMARKS.md, link_delay). That floor is measured
once per host: two namespaces joined by one veth link, PINGS pings without a delay and PINGS with the smallest
one (SMALLEST_MS), the floor the difference of their smallest: what the delayer adds to every packet, without
the waits a loaded host adds on top (medians measured during a test suite's run gave 0.62 ms, where a quiet
host gives about 0.2, and refused the shipped studies' 0.5 ms links). It takes about 2 s and root (namespaces), so the
answer is kept: in this process, and on disk where the workflow names a file (FILE, resources/), keyed by the
host's name, its kernel and the delayer's code, so another host, kernel or delayer is measured again. Where
it cannot be measured (not root, no `ip netns`), the documented constant DELAYER_FLOOR_MS stands in.

A study whose declared delays are all 0 or at least MEASURE_BELOW_MS never measures: no floor seen here
comes near it.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from dbsweep import manifest

FILE: Path | None = None  # set by the workflow (rules/common.smk): resources/link-floor.json
DELAYER = Path(__file__).with_name("delayer.py")
DELAYER_FLOOR_MS = 0.2  # round trip: about 0.1 ms each way on a quiet host (BENCHMARKS.md, link_delay)
MEASURE_BELOW_MS = 1.0
SMALLEST_MS = 0.002  # a round trip the delayer is asked for: 1 µs each way, so every packet goes through it
PINGS = 40
_KNOWN: dict[str, Floor] = {}


@dataclass(frozen=True)
class Floor:
    """The smallest added round trip (ms) a link's delay mechanism delivers here, and how it was found."""

    mechanism: str  # "netem" or "delayer"
    floor_ms: float
    how: str  # e.g. "measured on host1 at 2026-11-28T01:50:00Z: 0.061 ms plain, 0.262 ms through the delayer"


def floor() -> Floor:
    """This host's floor: known in this process, stored in FILE, or measured now (and stored)."""
    key = _key()
    if key not in _KNOWN:
        stored = _stored().get(key)
        _KNOWN[key] = Floor(**stored) if stored else _measure()
        if not stored and _KNOWN[key].how.startswith("measured"):
            _save(key, _KNOWN[key])
    return _KNOWN[key]


def _key() -> str:
    code = hashlib.sha256(DELAYER.read_bytes()).hexdigest()[:16]
    return json.dumps([socket.gethostname(), os.uname().release, code])


def _measure() -> Floor:
    """netem: no floor; else the delayer's, measured (or the constant where it cannot be)."""
    from dbsweep.topology.network import LinkSpec, netem_available, network  # namespaces: only when measuring
    try:
        if netem_available():
            return Floor("netem", 0.0, "tc netem adds the delay (no user-space trip)")
        with network(["a", "b"], [LinkSpec("a", "b", 0.0)], io.StringIO()) as net:
            plain = _smallest(net, "a-b")
            net.set_latency("a", "b", SMALLEST_MS)
            delayed = _smallest(net, "a-b")
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as error:
        said = str(error).splitlines()[0] if str(error) else type(error).__name__
        return Floor("delayer", DELAYER_FLOOR_MS, f"the constant of BENCHMARKS.md (could not measure here: {said})")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return Floor("delayer", round(max(0.0, delayed - plain), 3),
                 f"measured on {socket.gethostname()} at {stamp}: {plain:.3f} ms plain, {delayed:.3f} ms through "
                 f"the delayer (smallest of {PINGS} pings each)")


def _smallest(net, link: str) -> float:
    rtt = net.measure_rtt(PINGS, pick=min)[link]
    if rtt != rtt:  # nan: no answer
        raise RuntimeError(f"no ping answered over the probe link {link}")
    return rtt


def _stored() -> dict:
    return manifest.stored_json(FILE)


def _save(key: str, found: Floor) -> None:
    """Add this host's floor to FILE (where it cannot be written, the floor stays in this process)."""
    manifest.merge_json(FILE, {key: asdict(found)})
