"""What every value of a study must be, whatever its key: checked over the config as a tree, before the
schema, so that no later check, message or job meets what it cannot handle.

- every mapping key is a string (a bare `1:` is YAML's integer: it cannot be a name, and a mix of
  integer and string keys cannot even be sorted for a message);
- no string holds a NUL character (no argv and no path can carry one), and none but a description or
  an SQL statement holds a line break (a server option would become two lines of its option file);
- every number is finite (YAML reads .nan and .inf, which pass every minimum and maximum);
- the tree is at most MAX_DEPTH deep and MAX_VALUES values big, counted as it is walked, so a YAML alias
  repeated into a million values (an "alias bomb") is refused before anything expands or prints it.
"""
from __future__ import annotations

import math

from dbsweep.errors import ConfigError, shown

MAX_DEPTH = 16  # the deepest key of the schema is 6 levels down (server_options.<axis>.<value>.<family>.<option>)
MAX_VALUES = 100_000  # values (mappings, lists and scalars) in the whole study; a large one has a few thousand


def key_path(parts: tuple) -> str:
    """events.ev[0].argv, as the schema's messages name keys; a key holding a space, a line break or another
    unprintable character quoted (the message stays one line)."""
    text = ""
    for part in parts:
        if isinstance(part, str) and not (part.isprintable() and not any(c.isspace() for c in part)):
            part = repr(part)
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "(top level)"


def multiline(parts: tuple) -> bool:
    """Where a line break belongs: the study's description, an event's SQL statement."""
    return parts == ("description",) or (len(parts) == 4 and parts[0] == "events" and parts[3] == "statement")


def check(config: dict) -> None:
    """Refuse, naming the key and the value, the first value of the config that breaks a rule above."""
    stack = [(config, ())]  # depth first, in the order the file writes them
    seen = 1
    while stack:
        node, parts = stack.pop()
        seen += len(node) if isinstance(node, (dict, list)) else 0  # each value counted as its parent is met
        if seen > MAX_VALUES:
            raise ConfigError(f"{key_path(parts)}: {shown(node)}: the study holds more than {MAX_VALUES:,} values "
                              "by this key (a YAML alias repeated into a huge list?); a study needs a few thousand")
        if len(parts) > MAX_DEPTH:
            raise ConfigError(f"{key_path(parts)}: {shown(node)} is nested {len(parts)} levels deep; a study's "
                              f"keys are at most {MAX_DEPTH}")
        if isinstance(node, dict):
            for key in node:
                if not isinstance(key, str):
                    kind = "a boolean" if isinstance(key, bool) else "a number" if isinstance(
                        key, (int, float)) else f"a {type(key).__name__}"
                    raise ConfigError(f"{key_path(parts + (str(key),))}: the key {shown(key)} is {kind}, not a "
                                      f"name (quote it: \"{key}\")")
                _text(key, parts + (key,), f"the key {shown(key)}")
            stack.extend((value, parts + (key,)) for key, value in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((value, parts + (i,)) for i, value in reversed(list(enumerate(node))))
        elif isinstance(node, str):
            _text(node, parts, shown(node))
        elif isinstance(node, float) and not math.isfinite(node):
            raise ConfigError(f"{key_path(parts)}: {node!r} is not a finite number")


def _text(text: str, parts: tuple, what: str) -> None:
    if "\0" in text:
        raise ConfigError(f"{key_path(parts)}: {what} holds a NUL character, which no argument or path can carry")
    if ("\n" in text or "\r" in text) and not multiline(parts):
        raise ConfigError(f"{key_path(parts)}: {what} holds a line break; only description and an event's "
                          "statement may")
