"""Sizes as people write them ("256M", "2G") and back, in powers of 1024."""
from __future__ import annotations

import re

from dbsweep.errors import ConfigError, shown

FACTORS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_size(text) -> int:
    """Bytes in "256M", "2G", "512MiB", "1024" (K M G T are powers of 1024)."""
    if isinstance(text, bool):
        raise ConfigError(f"{text!r} is not a size like 256M or 2G")
    if isinstance(text, int):
        if text < 0:
            raise ConfigError(f"{text!r} is not a size like 256M or 2G")
        return text
    match = SIZE.match(str(text))
    if not match:
        raise ConfigError(f"{text!r} is not a size like 256M or 2G")
    return int(match[1]) * FACTORS[match[2].upper()]


def format_size(size: int, names: dict[str, str] | None = None) -> str:
    """size in the largest unit that divides it exactly, e.g. 268435456 -> "256M".

    names renames the units, e.g. {"": "B", "K": "kB", "M": "MB", "G": "GB",
    "T": "TB"} for PostgreSQL ("" is the unit of bytes, none by default).
    """
    names = names or {}
    for unit in ("T", "G", "M", "K"):
        if size and size % FACTORS[unit] == 0:
            return f"{size // FACTORS[unit]}{names.get(unit, unit)}"
    return f"{size}{names.get('', '')}"


# What a study may write as a size: what parse_size, truncate and tmpfs all take (no decimals).
STUDY_SIZE = re.compile(r"^[1-9][0-9]*[KMGT]$")
MAX_SIZE = 2**50  # 1P: the largest filesystem or memory size a study may ask for


def check_size(value, where: str) -> None:
    """A size as every user of it reads it (parse_size, truncate, tmpfs): a whole number and K, M, G or T,
    at most MAX_SIZE; else a ConfigError naming where and the value."""
    if not isinstance(value, str) or not STUDY_SIZE.match(value):
        decimal = isinstance(value, (str, float)) and re.fullmatch(r"[0-9]*\.[0-9]+[KMGT]?", str(value))
        raise ConfigError(f"{where}: {shown(value)} is not a size like 512M or 4G"
                          + (" (a whole number: 1536M, not 1.5G)" if decimal else ""))
    if parse_size(value) > MAX_SIZE:
        raise ConfigError(f"{where}: {shown(value)} is above the largest size dbsweep makes, 1024T")
