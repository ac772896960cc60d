"""Signals that stop a job (SIGTERM, SIGINT, SIGHUP) become an exception, so every `with` releases."""
from __future__ import annotations

import signal
from contextlib import contextmanager

STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(BaseException):
    """A signal asked this run to stop; raised so every `with` block releases what it holds."""


@contextmanager
def signals_raise():
    """Turn SIGTERM, SIGINT and SIGHUP into Interrupted; a second signal does not cut the clean-up short."""
    def handler(signum, _frame):
        for sig in STOPPING:
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(f"stopped by {signal.Signals(signum).name}")

    old = {sig: signal.signal(sig, handler) for sig in STOPPING}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
