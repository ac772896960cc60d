"""Headless Chromium (Debian's) driven over the DevTools protocol on a pipe: no WebSocket client, no
package beyond the standard library.

`--remote-debugging-pipe` makes Chromium read protocol messages (JSON, each ended by a NUL byte) on
its fd 3 and write its answers and events on fd 4. Used by the summary page's tests (a page laid out at
a phone's width: headless Chromium's window is at least 500 px wide, so the width is emulated) and by
bench/explore.py (time to first paint).
"""
from __future__ import annotations

import base64
import json
import fcntl
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path
import contextlib


class Chromium:
    """One headless Chromium; open(url, width, height) loads a page in a tab of that viewport."""

    def __init__(self, timeout: float = 120):
        self.timeout = timeout
        to_chrome, from_chrome = _high_pipe(), _high_pipe()  # (read, write), both at fd 10 or above
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-")

        def pipes_at_3_and_4():  # in the child: dup2 makes them inheritable; nothing else is
            os.dup2(to_chrome[0], 3)
            os.dup2(from_chrome[1], 4)

        # --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start.
        self._process = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--allow-file-access-from-files", f"--user-data-dir={self._profile.name}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=pipes_at_3_and_4)
        os.close(to_chrome[0])
        os.close(from_chrome[1])
        self._to_chrome_w, self._from_chrome_r = to_chrome[1], from_chrome[0]
        self._buffer, self._id, self.session = b"", 0, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.call("Browser.close", session=False)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_chrome_w)
        os.close(self._from_chrome_r)
        self._profile.cleanup()
        return False

    def open(self, url: str, width: int, height: int) -> float:
        """Load url in a new tab with a viewport of width x height; return the seconds until its load event."""
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500})
        self.call("Page.enable")
        start = time.monotonic()
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        return time.monotonic() - start

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        params = {"format": "png", "captureBeyondViewport": full_page}
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", params)["data"]))

    # --- the protocol ---------------------------------------------------------------------------

    def call(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome_w, json.dumps(message).encode() + b"\0")
        answer = self._next(lambda m: m.get("id") == self._id)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def wait_event(self, method: str) -> dict:
        return self._next(lambda m: m.get("method") == method and m.get("sessionId") == self.session)

    def _next(self, wanted) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if wanted(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome_r], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_chrome_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium exited")
            self._buffer += chunk


def _high_pipe() -> tuple[int, int]:
    """A pipe whose ends are not fds 3 and 4 (which the child's dup2 onto 3 and 4 would clobber),
    closed on exec."""
    ends = os.pipe()
    high = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in ends)
    for fd in ends:
        os.close(fd)
    return high
