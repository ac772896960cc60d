"""A repetition's guardian: a small process outside its cgroup that releases it if its job dies.

Started by the job before it enters its repetition's cgroup, it waits on a pipe
whose only writer is the job. When the job leaves its repetition it writes
"done" and the guardian exits. When the pipe closes without it (the job was
killed: SIGKILL, an OOM kill, a dying batch step), the guardian kills everything
in the repetition's cgroup, then unmounts, detaches and removes what the job
recorded in results/.active, and only then lets go of the host's measuring lock,
which it inherited: no later measurement starts beside what is left.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from dbsweep.runtime.cgroup import Cgroup, Hierarchy

DONE = b"done"


@dataclass
class Guardian:
    proc: subprocess.Popen
    pipe: int  # write end

    def done(self) -> None:
        """The job released its repetition itself: the guardian exits without doing anything."""
        try:
            os.write(self.pipe, DONE)
        finally:
            os.close(self.pipe)
        self.proc.wait()

    def abandon(self) -> None:
        """The job could not release its repetition: the guardian does, as if the job had died."""
        os.close(self.pipe)
        self.proc.wait()


def start(cgroup: Cgroup, active: Path, lock_fd: int, log) -> Guardian:
    """Start the guardian of cgroup (call it before entering the cgroup, so it stays outside)."""
    read, write = os.pipe()
    h = cgroup.hierarchy
    argv = [sys.executable, "-c", "import sys; from dbsweep.runtime.guardian import main; sys.exit(main(sys.argv[1:]))",
            str(read), str(lock_fd), str(os.getpid()),
            str(h.version), str(h.mount), h.controller, str(cgroup.path), str(Path(active).resolve())]
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    try:
        out = log.fileno()
    except (AttributeError, OSError, ValueError):
        out = subprocess.DEVNULL
    try:
        proc = subprocess.Popen(argv, pass_fds=(read, lock_fd), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                env=env, start_new_session=True, cwd="/")
    finally:
        os.close(read)
    return Guardian(proc, write)


def main(args: list[str]) -> int:
    read, lock_fd, owner, version, mount, controller, path, active = args
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the job's Ctrl-C is the job's to handle
        signal.signal(sig, signal.SIG_IGN)
    said = b""
    while chunk := os.read(int(read), 64):
        said += chunk
    if said == DONE:
        return 0
    from dbsweep import storage  # only now: the common case needs none of it

    cgroup = Cgroup(Hierarchy(int(version), Path(mount), controller), Path(path))
    print(f"guardian: job pid {owner} left its repetition without releasing it; releasing it", flush=True)
    killed = cgroup.kill() if cgroup.path.exists() else []
    if cgroup.path.exists():
        cgroup.remove()
    released = storage.release(Path(active), int(owner))
    print(f"guardian: killed {len(killed)} processes {sorted(killed)}; released {released}", flush=True)
    os.close(int(lock_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
