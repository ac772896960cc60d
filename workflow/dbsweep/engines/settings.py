"""What a server's settings are as a study declares them and as the server reports them (delivered.py compares
the two). The shared part; each family's own words are in <family>_settings.py, found by settings(engine)."""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType

from dbsweep.engines import ENGINES
from dbsweep.units import parse_size

MS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class Reading:
    """One variable as the server reported it: value normalised for comparing (sizes in bytes, times in ms),
    shown as the server wrote it."""

    value: str
    shown: str
    bare: str = ""  # the setting as a plain number of its own unit (PostgreSQL's 8kB pages), where it has one


def family(engine: str) -> ModuleType:
    """The settings module of engine's family."""
    return importlib.import_module(f"{__package__}.{ENGINES[engine]}_settings")


def size_bytes(text) -> str | None:
    """"256M", "1G", "512kB", "16MB" as bytes (powers of 1024), or None for anything that is not a size with a
    unit."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMGT])I?B?\s*", str(text), re.IGNORECASE)
    if not match:
        return None
    return str(parse_size(match[1] + match[2].upper()))


def time_ms(text) -> str | None:
    """"200ms", "15min", "5s" as milliseconds, or None for anything that is not a time with a unit."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)\s*", str(text))
    if not match:
        return None
    return f"{float(match[1]) * MS[match[2]]:g}"


def flag(value) -> str | None:
    """ON or OFF for a boolean written any way a config takes it; None for anything else."""
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    text = str(value).strip().lower()
    if text in ("on", "true", "yes"):
        return "ON"
    if text in ("off", "false", "no"):
        return "OFF"
    return None
