"""Expected stops of a rule's script end with one line on the terminal, not a Python traceback.

A refused option, a server that would not start, a failed mkfs or mount, a tool that
failed, Ctrl-C: the job prints `dbsweep: <what>: <the error's first line>` and exits 1,
so Snakemake marks it failed; the whole error and its traceback go to the rule's log.
Anything else is a bug in dbsweep and keeps its traceback.
"""
from __future__ import annotations

import subprocess
import sys
import traceback
from contextlib import contextmanager

from dbsweep.errors import ConfigError

EXPECTED = (RuntimeError, ConfigError, OSError, subprocess.CalledProcessError)


@contextmanager
def one_line(what: str, log, expected: tuple = ()):
    """Run the body; on an expected error (EXPECTED, plus the caller's own kinds, e.g. an Interrupted that
    is a BaseException) write its traceback to log and exit 1 with one line on stderr."""
    try:
        yield
    except (*EXPECTED, *expected) as error:
        try:
            log.write("".join(traceback.format_exception(error)))
            log.flush()
        except (OSError, ValueError):  # a closed or full log: the line below still says why
            pass
        lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
        said = lines[0] if len(lines) == 1 else f"{lines[0]} … {lines[-1]}"  # e.g. "it said:" … the server's line
        print(f"dbsweep: {what}: {said}", file=sys.stderr, flush=True)
        sys.exit(1)
