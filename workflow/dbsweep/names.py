"""Names that become parts of paths: one rule for every one of them.

A study, an axis, a filesystem, a workload, an option set, a version or a host
name ends up as a folder or file name under results/ or resources/ (an axis
name in every cell path, a filesystem name in resources/images/<name>/). Values
are percent-encoded (matrix.Cell.path); names are checked here instead, so that
none can climb out of those folders (`..`, `/`) or be read as an option (`-x`).
"""
from __future__ import annotations

import re

from dbsweep.errors import ConfigError

SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
MAX_LENGTH = 100


def check_name(where: str, name) -> str:
    """name, when it is safe as one path segment; else a ConfigError naming where and the name."""
    text = str(name)
    if isinstance(name, bool) or not SAFE.match(text) or ".." in text or len(text) > MAX_LENGTH:
        raise ConfigError(f"{where}: {text!r} is not a safe name (a letter or digit, then letters, digits, "
                          f"'.', '_', '+' or '-'; no '..'; at most {MAX_LENGTH} characters)")
    return text
