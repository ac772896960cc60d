"""The memory axis when the study loads: a server's memory is a size of at least MIN_MEMORY, and not above
this host's RAM (which would measure swapping or an OOM kill, not the engine) unless the study allows it."""
from __future__ import annotations

import os

from dbsweep import units
from dbsweep.concern import Concern, Draft
from dbsweep.errors import ConfigError, shown
from dbsweep.matrix import Cell

AXIS = "memory"
MIN_MEMORY = 8 * 2**20  # a server's memory: MariaDB raises an InnoDB buffer pool below 2M to 2M


def caps(nodes: list[tuple[str, object]], moment: str, record: dict) -> None:
    """Each running node's memory cgroup limit as the kernel holds it, into run.json's memory_cap (node ->
    {moment: bytes}), for delivered.py's check of the memory axis; nodes are (name, Database or None: down)."""
    for name, db in nodes:
        cap = getattr(db, "memory_cgroup", None) if db is not None else None
        if cap is not None:
            record.setdefault("memory_cap", {}).setdefault(name, {})[moment] = int(cap.limit_file.read_text())


def host_memory() -> int:
    """Bytes of RAM of this host."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _value(draft: Draft, value, where: str) -> None:
    """A server's memory: a size, and not below MIN_MEMORY."""
    units.check_size(value, where)
    if units.parse_size(value) < MIN_MEMORY:
        raise ConfigError(f"{where}: {shown(value)} is below the minimum of {units.format_size(MIN_MEMORY)} (MariaDB "
                          "raises an InnoDB buffer pool below 2M to 2M: the cell would not run the memory it names)")


def check_host(draft: Draft, cells: list[Cell]) -> list[str]:
    """A server memory above the host's RAM measures swapping (or an OOM kill), not the engine: refused,
    or with allow_oversize_memory a warning."""
    allow = draft.config.get("allow_oversize_memory", False)
    ram = host_memory()
    seen, warnings = set(), []
    for cell in cells:
        memory = cell.get(AXIS)
        if memory is None or str(memory) in seen:
            continue
        seen.add(str(memory))
        if units.parse_size(memory) > ram:
            message = f"axes.memory: {memory!r} is above this host's RAM ({ram / 2**30:.1f}G)"
            if not allow:
                raise ConfigError(message + "; set allow_oversize_memory: true to run it anyway")
            warnings.append(message)
    return warnings


CONCERN = Concern(name="server memory", axes=(AXIS,), values={AXIS: _value}, warnings=check_host)
