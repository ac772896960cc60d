"""A workload option's placeholders: `{axis}` stands for the cell's value of the axis, and nothing else may
stand in braces. Shared by the study's load (config.py) and the concerns that read a cell's options."""
from __future__ import annotations

import functools
import re

from dbsweep.errors import ConfigError, shown

PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def placeholders(value) -> list[str]:
    return list(_fields(value)) if isinstance(value, str) else []


@functools.cache
def _fields(text: str) -> tuple[str, ...]:
    """The {names} in an option's text; parsed once per text (it is asked per cell and option)."""
    return tuple(PLACEHOLDER.findall(text))


def check(value, order: list[str], where: str) -> None:
    """An option's braces are placeholders {axis} of the study's axes, and nothing else: no format spec
    ({threads:>4}), conversion ({mode!r}), attribute or index, no empty {} and no lone brace. Each is
    replaced by the cell's value as it is written (its str), never through str.format."""
    if not isinstance(value, str):
        return
    for name in _fields(value):
        if not name:
            raise ConfigError(f"{where}: {shown(value)}: {{}} names no axis; write {{axis}} with an axis's name")
        if name not in order:
            bare = re.split(r"[^A-Za-z0-9_.+-]|\.", name, maxsplit=1)[0]
            if bare in order:
                raise ConfigError(f"{where}: {shown(value)}: {{{name}}} is not a placeholder; write {{{bare}}} "
                                  "(an axis's name in braces, no format spec, conversion or attribute)")
            raise ConfigError(f"{where}: {shown(value)} names {{{name}}}, which is not an axis")
    if "{" in PLACEHOLDER.sub("", value) or "}" in PLACEHOLDER.sub("", value):
        raise ConfigError(f"{where}: {shown(value)} has a brace outside a placeholder {{axis}}")


def substitute(value, cell: dict):
    """value with each {axis} replaced by the cell's value of it (as written: its str)."""
    if not placeholders(value):
        return value
    return PLACEHOLDER.sub(lambda match: str(cell[match[1]]), value)
