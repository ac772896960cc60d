"""The multi-node test Slurm (tests/slurm/cluster.sh): each node a host of its own to Slurm and to the
network, on this one machine; and `down` leaves nothing of it, even after a killed `up`."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, slurm_turn

pytestmark = pytest.mark.workflow
CLUSTER = ROOT / "tests/slurm/cluster.sh"
HOSTS = ("ctl", "c1", "c2", "c3")


def cluster(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([CLUSTER, *args], capture_output=True, text=True, timeout=timeout,
                          env=os.environ | {"CLUSTER_DIR": str(folder)})


def on(folder: Path, host: str, *argv: str) -> str:
    """What argv prints, run on host (Slurm's commands on ctl, the login node)."""
    done = cluster(folder, "exec", host, *argv, timeout=60)
    assert done.returncode == 0, f"{argv} on {host}: {done.stderr[-2000:]}"
    return done.stdout


def cluster_namespaces() -> set[str]:
    return {name for name in os.listdir("/run/netns") if name.startswith("dbsw-")} \
        if os.path.isdir("/run/netns") else set()


def identity(path: str) -> str:
    """A namespace as /proc/PID/ns/* names it."""
    return f"net:[{os.stat(path).st_ino}]"


def host_links() -> list[str]:
    """The host namespace's own interfaces (the cluster adds none)."""
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return sorted(line.split(":")[1].strip() for line in out.splitlines())


def host_mounts(folder: Path) -> list[str]:
    """Mount points in the host's namespace where the cluster's nodes have theirs."""
    points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [p for p in points if p.startswith(str(folder)) or p in ("/etc/slurm", "/etc/hosts")]


def processes_in(spaces: set[str]) -> list[str]:
    """Live (not zombie) processes in any of these network namespaces."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.readlink(f"/proc/{proc.pid}/ns/net") in spaces:
                found.append(" ".join(proc.info["cmdline"] or []))
        except OSError:
            pass
    return found


def left_behind(folder: Path, spaces: set[str], links: list[str]) -> list[str]:
    """What a cluster left after down: namespaces, processes in them, links on the host, its folder.
    The bridge and the veths lived only in the namespaces, so they went with them."""
    for _ in range(20):  # a killed daemon's parent (init here) reaps it a moment later
        left = [f"netns {n}" for n in cluster_namespaces()] + processes_in(spaces)
        left += [f"link {n}" for n in set(host_links()) - set(links)] + ([str(folder)] if folder.exists() else [])
        if not left:
            break
        time.sleep(0.1)
    return left


def test_three_namespaces_are_three_slurm_nodes_and_down_leaves_nothing(tmp_path):
    folder = tmp_path / "cluster"
    links, mounts = host_links(), host_mounts(folder)
    with slurm_turn():
        step, spaces = None, {}
        try:
            started = time.monotonic()
            up = cluster(folder, "up", "3")
            assert up.returncode == 0, f"cluster.sh up 3 failed: {up.stderr[-3000:]}"
            took = time.monotonic() - started
            spaces = {host: identity(f"/run/netns/dbsw-{host}") for host in HOSTS}
            assert cluster_namespaces() == {f"dbsw-{host}" for host in HOSTS}
            assert host_links() == links  # the bridge and the veths are in the cluster's namespaces only
            assert host_mounts(folder) == mounts  # the nodes' binds are in their own mount namespaces only
            assert on(folder, "c2", "cat", str(folder / "host/slurmd.pid")).strip() \
                == (folder / "hosts/c2/slurmd.pid").read_text().strip()  # c2's run folder is its own

            assert sorted(on(folder, "ctl", "srun", "-N3", "hostname").split()) == ["c1", "c2", "c3"]
            assert on(folder, "ctl", "srun", "-w", "c2", "hostname", "-I").split() == ["198.19.34.2"]
            # a host Slurm chooses for a placed part is asked of the study's partition: one it has, one it has not
            asked = ("from dbsweep.topology.placement import chosen, in_job_order; "
                     "print(chosen(None, ('c1',), 'bench'), chosen(None, ('c1',), 'nosuch'), "
                     "in_job_order(('c3', 'c2'), 'bench'))")
            assert on(folder, "ctl", "env", f"PYTHONPATH={ROOT / 'workflow'}", sys.executable, "-c", asked).split() \
                == ["c2", "None", "('c2',", "'c3')"]
            assert on(folder, "c2", "hostname").split() == ["c2"]
            # c1 reaches c3 by name across the bridge (c3's slurmd port).
            on(folder, "ctl", "srun", "-w", "c1", "bash", "-c", "exec 3<>/dev/tcp/c3/6818")

            # A step's process, seen from the host, is in c2's network and UTS namespaces, under a slurmstepd.
            step = subprocess.Popen([CLUSTER, "exec", "ctl", "srun", "-w", "c2", "sh", "-c", "echo $$; exec sleep 60"],
                                    stdout=subprocess.PIPE, text=True, env=os.environ | {"CLUSTER_DIR": str(folder)})
            pid = int(step.stdout.readline())
            assert os.readlink(f"/proc/{pid}/ns/net") == spaces["c2"] != os.readlink("/proc/self/ns/net")
            holder = int((folder / "hosts/c2/holder.pid").read_text())
            assert os.readlink(f"/proc/{pid}/ns/uts") == os.readlink(f"/proc/{holder}/ns/uts")
            assert "slurmstepd" in [p.name() for p in psutil.Process(pid).parents()]
            for host in HOSTS[1:]:  # each node's own slurmd, in its own namespace
                assert f"slurmd -N {host}" in processes_in({spaces[host]})
        finally:  # also when up failed: what it started goes
            # down finds the running cluster's folder by itself, whatever CLUSTER_DIR it is given
            down = cluster(tmp_path / "elsewhere", "down")
            if step is not None:
                try:
                    step.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    step.kill()  # down did not end it: fail, but leave no srun behind
                    raise
        assert down.returncode == 0, down.stderr
        # down ended the running step too, and every daemon, namespace and file of the cluster.
        assert left_behind(folder, set(spaces.values()), links) == []
    assert took < 30, f"cluster.sh up 3 took {took:.1f} s"


def test_down_cleans_up_after_a_killed_up(tmp_path):
    folder = tmp_path / "cluster"
    links = host_links()
    with slurm_turn():
        up = subprocess.Popen([CLUSTER, "up", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=os.environ | {"CLUSTER_DIR": str(folder)})
        deadline = time.monotonic() + 30
        while not (folder / "hosts/c3/holder.pid").exists() and up.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        up.send_signal(signal.SIGKILL)  # mid-way: namespaces made, the bridge or daemons not all there yet
        up.wait()
        spaces = {identity(f"/run/netns/{name}") for name in cluster_namespaces()}
        assert spaces and processes_in(spaces)  # it had started something
        down = cluster(folder, "down")
        assert down.returncode == 0, down.stderr
        assert left_behind(folder, spaces, links) == []
        again = cluster(folder, "down")  # idempotent: nothing to do is no error
        assert again.returncode == 0, again.stderr
