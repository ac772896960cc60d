"""A rule's script that fails ends with one line, on the terminal and at the end of its log.

A refused option, a server that would not start or died, a failed mkfs or mount, a full
disk, Ctrl-C: the job prints `dbsweep: <what>: <cause>` and exits 1, so Snakemake marks
it failed and the user sees why without a Python traceback. The traceback goes to the
rule's log, above that same line (the summary page reads the log's last line). The cause
is the error's lines that say why (cause()), not a help text a program printed after them.
"""
from __future__ import annotations

import re
import sys
import traceback
from contextlib import contextmanager

CAUSE = re.compile(r"No space left|ENOSPC|Errno|\[ERROR\]|\bERROR\b|FATAL|PANIC|"
                   r"[Ee]rror|[Ff]ailed|[Kk]illed|died|refused")
CAUSE_LINES = 6


def cause(error: BaseException) -> str:
    """The lines of an error that say why: those naming an error (a full disk, a server's [ERROR] or
    FATAL line), not a help text a program printed after it; the whole message when it is short."""
    lines = [line.strip() for line in (str(error) or type(error).__name__).splitlines() if line.strip()]
    if len(lines) <= CAUSE_LINES:
        return " | ".join(lines)
    said = [line for line in lines[1:] if CAUSE.search(line)]
    return " | ".join([lines[0]] + (said or lines[1:])[-CAUSE_LINES:])


@contextmanager
def one_line(what: str, log):
    """Run the body; on any failure (SystemExit aside) write its traceback and then the one line to log,
    print the line on stderr and exit 1."""
    try:
        yield
    except BaseException as error:  # noqa: BLE001 - every failure says why
        if isinstance(error, SystemExit):
            raise
        line = f"dbsweep: {what}: {cause(error)}"
        try:
            log.write("".join(traceback.format_exception(error)) + line + "\n")
            log.flush()
        except (OSError, ValueError):  # a closed or full log: stderr still says why
            pass
        print(line, file=sys.stderr, flush=True)
        raise SystemExit(1) from None
