"""Proxies in front of a topology's nodes (placeholder until the adapters land)."""
from __future__ import annotations

from dbsweep.errors import ConfigError

KINDS = ("haproxy", "proxysql")


def check_settings(kind: str, settings: dict, where: str = "proxies") -> None:
    if kind not in KINDS:
        raise ConfigError(f"{where}.type: {kind!r} is not one of {', '.join(KINDS)}")


def CUMULATIVE(name: str) -> bool:  # noqa: N802 - the families' name for it
    return False
