"""An nbdkit Python plugin (nbdkit-plugin-python) that serves an image file with each read and write held
for a set time, in fractions of a millisecond: what a device class's latency needs (storage.delayed).

nbdkit 1.32's delay filter holds an IO for whole milliseconds only (`0.5ms` is taken and delays nothing),
and it adds its hold to the IO's own time. This plugin holds each IO until a deadline counted from when
nbdkit handed it over: the pread or pwrite is done first, then the thread sleeps what remains, so the
IO's own time is inside the hold, not on top of it. The holds come from a settings file (JSON: read_s,
write_s, seconds) that storage.delayed writes; it is read again when it changes, so the holds can be set
after the path's own time is measured through the running stack (calibration). What the plugin applies
is written back beside it (`<settings>.applied`), the record's delivered value.

nbdkit loads this file with the system's python3 (not the venv): standard library only. Run as
`nbdkit --foreground python delay_server.py file=IMAGE settings=JSON`.
"""
import builtins
import json
import os
import threading
import time

API_VERSION = 2
_state = {"fd": -1, "settings": "", "stamp": None, "holds": {"read_s": 0.0, "write_s": 0.0}}
_lock = threading.Lock()


def config(key, value):
    """file= the image served; settings= the JSON file of the holds (seconds)."""
    if key == "file":
        _state["file"] = value
    elif key == "settings":
        _state["settings"] = value
    else:
        raise RuntimeError(f"unknown parameter {key}")


def config_complete():
    if "file" not in _state or not _state["settings"]:
        raise RuntimeError("file= and settings= are required")
    _state["fd"] = os.open(_state["file"], os.O_RDWR)
    _holds()


def thread_model():
    """Parallel: each of nbdfuse's connections' requests sleeps on its own thread (the GIL is released in
    sleep, pread and pwrite)."""
    import nbdkit  # only inside nbdkit

    return nbdkit.THREAD_MODEL_PARALLEL


def _holds() -> dict:
    """The holds in force: the settings file's, read again when its modification time changes; each new
    set is written back to `<settings>.applied` (atomically), for the record."""
    try:
        stamp = os.stat(_state["settings"]).st_mtime_ns
    except OSError:
        return _state["holds"]
    if stamp != _state["stamp"]:
        with _lock:
            if stamp != _state["stamp"]:
                with builtins.open(_state["settings"]) as f:
                    given = json.load(f)
                holds = {key: max(0.0, float(given.get(key, 0.0))) for key in ("read_s", "write_s")}
                applied = _state["settings"] + ".applied"
                with builtins.open(applied + ".tmp", "w") as f:
                    json.dump(holds, f)
                os.replace(applied + ".tmp", applied)
                _state["holds"], _state["stamp"] = holds, stamp
    return _state["holds"]


def _hold_until(deadline: float) -> None:
    """Sleep what remains until deadline. (Waking early by the recent wake-ups' lateness was tried: their
    median was about 0 here, their mean pulled up by rare long waits, which made most IOs end early.)"""
    left = deadline - time.monotonic()
    if left > 0:
        time.sleep(left)


def open(readonly):  # noqa: A001 - the plugin's callback name
    return 1


def get_size(h):
    return os.fstat(_state["fd"]).st_size


def can_multi_conn(h):
    """Every connection sees the one file, and a flush is an fdatasync of it: nbdfuse may use them all."""
    return True


def can_flush(h):
    return True


def pread(h, buf, offset, flags):
    deadline = time.monotonic() + _holds()["read_s"]
    view, done = memoryview(buf), 0
    while done < len(view):
        got = os.preadv(_state["fd"], [view[done:]], offset + done)
        if got == 0:
            raise OSError(f"read past the end at {offset + done}")
        done += got
    _hold_until(deadline)


def pwrite(h, buf, offset, flags):
    deadline = time.monotonic() + _holds()["write_s"]
    view, done = memoryview(buf), 0
    while done < len(view):
        done += os.pwrite(_state["fd"], view[done:], offset + done)
    if flags & 1:  # nbdkit.FLAG_FUA: written through before it completes
        os.fdatasync(_state["fd"])
    _hold_until(deadline)


def flush(h, flags):
    os.fdatasync(_state["fd"])
