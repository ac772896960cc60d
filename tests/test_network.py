"""topology.network on real namespaces, veths, iptables rules and the NFQUEUE delayer."""
import io
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dbsweep import storage
from dbsweep.topology.network import LinkSpec, check, enter_argv, network

ROOT = Path(__file__).resolve().parents[1]


def namespaces() -> set[str]:
    return {line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                       text=True, check=True).stdout.splitlines()}


def inodes(names) -> set[str]:
    """The namespaces' identities as /proc/PID/ns/net shows them (to find their processes once deleted)."""
    return {f"net:[{os.stat(f'/run/netns/{name}').st_ino}]" for name in names}


def delayers(spaces: set[str]) -> list[int]:
    """Delayer processes running in any of the namespaces (inodes())."""
    found = []
    for proc in psutil.process_iter(["cmdline", "pid"]):
        try:
            if "dbsweep.topology.delayer" in (proc.info["cmdline"] or []) \
                    and os.readlink(f"/proc/{proc.info['pid']}/ns/net") in spaces:
                found.append(proc.info["pid"])
        except OSError:
            pass
    return found


def ping(net, a, b, count=1) -> subprocess.CompletedProcess:
    return subprocess.run([*net.enter(a), "ping", "-n", "-U", "-c", str(count), "-i", "0.01", "-W", "0.5",
                           net.addresses[b]],
                          capture_output=True, text=True)


def test_linked_hosts_reach_each_other_and_only_them():
    log = io.StringIO()
    with network(["client", "primary", "replica1"],
                 [LinkSpec("client", "primary"), LinkSpec("primary", "replica1")], log) as net:
        assert len(set(net.addresses.values())) == 3 and len(set(net.namespaces.values())) == 3
        assert ping(net, "client", "primary").returncode == 0
        assert ping(net, "replica1", "primary").returncode == 0
        assert ping(net, "client", "replica1").returncode != 0  # no link between them, no route
        assert set(net.facts["rtt_ms"]) == {"client-primary", "primary-replica1"}
    assert "ip netns add" in log.getvalue() and "ip netns delete" in log.getvalue()


def test_nothing_of_it_in_the_host_namespace():
    before = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    with network(["a", "b"], [LinkSpec("a", "b", latency_ms=1.0)], io.StringIO()) as net:
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        routes = subprocess.run(["ip", "route", "show", "table", "all"], capture_output=True, text=True).stdout
        assert links == before and "198.18." not in routes
        for address in net.addresses.values():
            assert subprocess.run(["ping", "-n", "-c", "1", "-W", "1", address], capture_output=True).returncode != 0
        assert ping(net, "a", "b").returncode == 0  # while the hosts do reach each other


def test_latency_adds_its_round_trip_time():
    with network(["client", "near", "far"], [LinkSpec("client", "near"), LinkSpec("client", "far", latency_ms=4.0)],
                 io.StringIO()) as net:
        rtt = net.measure_rtt(count=20)
        assert rtt["client-near"] < 0.5
        assert 3.5 <= rtt["client-far"] - rtt["client-near"] <= 6.5, rtt  # band: the machine is shared and loaded
        net.set_latency("client", "far", 0.0)
        assert net.measure_rtt(count=10)["client-far"] < 0.5
        net.set_latency("client", "near", 10.0, jitter_ms=2.0)
        assert 9.0 <= net.measure_rtt(count=10)["client-near"] <= 14.0
        times = [float(t) for t in re.findall(r"time=([0-9.]+)", ping(net, "client", "near", count=20).stdout)]
        assert len(times) == 20 and max(times) - min(times) > 1.0  # ±1 ms each way: a spread of up to 4 ms
        assert net.facts["links"][0] == {"a": "client", "b": "near", "latency_ms": 10.0, "jitter_ms": 2.0,
                                         "loss_percent": 0.0, "cut": False}


def test_loss_drops_that_share_each_way():
    with network(["a", "b"], [LinkSpec("a", "b")], io.StringIO()) as net:
        net.set_loss("a", "b", 50)
        got = ping(net, "a", "b", count=50).stdout.count("time=")
        assert 3 <= got <= 25, got  # 12.5 of 50 expected (sd 3): each of the two ways keeps half
        net.set_loss("a", "b", 0)
        assert ping(net, "a", "b", count=20).stdout.count("time=") == 20


ECHO_SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 7000)); s.listen()
print("listening", flush=True)
while True:
    c, _ = s.accept()
    while data := c.recv(100):
        c.sendall(data)
"""

# Reads commands on stdin: "connect" opens a new connection (1 s timeout), "echo T" sends a byte on the
# first connection and waits T s for it to come back; prints ok or the error's name.
CLIENT = """
import socket, sys
first = None
for line in sys.stdin:
    cmd, *arg = line.split()
    try:
        if cmd == "connect":
            c = socket.create_connection((sys.argv[1], 7000), timeout=1)
            first = first or c
        else:
            first.settimeout(float(arg[0])); first.sendall(b"x"); assert first.recv(1) == b"x"
        print("ok", flush=True)
    except Exception as e:
        print(type(e).__name__, flush=True)
"""


@pytest.mark.workflow  # about 5 s: TCP's retransmission timer backs off during the cut
def test_cut_stalls_tcp_silently_and_heal_lets_it_go_on():
    with network(["client", "primary"], [LinkSpec("client", "primary")], io.StringIO()) as net:
        server = subprocess.Popen([*net.enter("primary", "nobody"), sys.executable, "-c", ECHO_SERVER],
                                  stdout=subprocess.PIPE, text=True)
        client = subprocess.Popen([*net.enter("client"), sys.executable, "-c", CLIENT, net.addresses["primary"]],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def say(cmd):
            client.stdin.write(cmd + "\n")
            client.stdin.flush()
            return client.stdout.readline().strip()
        try:
            assert server.stdout.readline().strip() == "listening"
            assert say("connect") == "ok" and say("echo 1") == "ok"
            net.cut("client", "primary")
            assert say("connect") == "TimeoutError"  # silence, not a refusal or a local error
            assert say("echo 0.5") == "TimeoutError"
            assert math.isnan(net.measure_rtt(count=1)["client-primary"])
            net.heal("client", "primary")
            assert say("echo 5") == "ok"  # the connection opened before the cut goes on
            assert say("connect") == "ok"
        finally:
            client.kill()
            server.kill()
            client.wait()
            server.wait()


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_everything_removed_on_exit_and_on_error(tmp_path, error):
    active = tmp_path / "active"
    with network(["a", "b", "c"], [LinkSpec("a", "b", 2.0), LinkSpec("b", "c", 1.0), LinkSpec("a", "c")],
                 io.StringIO(), active) as net:
        names = set(net.namespaces.values())
        spaces = inodes(names)
        assert names <= namespaces() and len(delayers(spaces)) == 3 and len(list(active.glob("*.json"))) == 1
    assert not names & namespaces() and not delayers(spaces) and not list(active.glob("*.json"))
    with pytest.raises(error), network(["a", "b"], [LinkSpec("a", "b", 2.0)], io.StringIO(), active) as net:
        names = set(net.namespaces.values())
        spaces = inodes(names)
        assert len(delayers(spaces)) == 2
        raise error("boom")
    assert not names & namespaces() and not delayers(spaces) and not list(active.glob("*.json"))


OWNER = """
import sys
from pathlib import Path
from dbsweep.topology.network import LinkSpec, network
with network(["a", "b"], [LinkSpec("a", "b", 2.0)], sys.stderr, Path(sys.argv[1])) as net:
    print(" ".join(net.namespaces.values()), flush=True)
    sys.stdin.read()
"""


@pytest.mark.parametrize("how", ["sweep_stale", "release"])
def test_namespaces_of_a_killed_owner_are_released(tmp_path, how):
    active = tmp_path / "active"
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(active)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True,
                             env=os.environ | {"PYTHONPATH": str(ROOT / "workflow")})
    names = set(owner.stdout.readline().split())
    assert len(names) == 2 and names <= namespaces()
    spaces = inodes(names)
    assert len(delayers(spaces)) == 2
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert names <= namespaces()  # a kill leaves them ...
    released = storage.sweep_stale(active) if how == "sweep_stale" else storage.release(active, owner.pid)
    assert sorted(released) == sorted(f"netns {name}" for name in names)  # ... for the sweep to delete
    assert not names & namespaces() and not list(active.glob("*.json"))
    for _ in range(50):  # the delayer ends when its stdin closes with its owner
        if not delayers(spaces):
            break
        time.sleep(0.1)
    assert not delayers(spaces)


def test_enter_as_nobody_runs_as_nobody_inside_the_namespace():
    with network(["a", "b"], [LinkSpec("a", "b")], io.StringIO()) as net:
        out = subprocess.run([*net.enter("b", user="nobody"), "sh", "-c", "id -un; readlink /proc/self/ns/net"],
                             capture_output=True, text=True, check=True).stdout.split()
        inode = os.stat(f"/run/netns/{net.namespaces['b']}").st_ino
        assert out == ["nobody", f"net:[{inode}]"]
    assert enter_argv(None, "nobody") == []  # no namespace: this one, and the caller drops privileges itself


@pytest.mark.parametrize("hosts, links, message", [
    (["a", "a"], [], "a name appears twice"),
    (["a", "b/c"], [], "'b/c' is not a name"),
    (["a", "b"], [LinkSpec("a", "z")], "link a-z: joins no two distinct hosts"),
    (["a", "b"], [LinkSpec("a", "a")], "link a-a: joins no two distinct hosts"),
    (["a", "b"], [LinkSpec("a", "b"), LinkSpec("b", "a")], "link b-a: given twice"),
    (["a", "b"], [LinkSpec("a", "b", latency_ms=-1)], "latency_ms -1 and jitter_ms 0.0 must be >= 0"),
])
def test_bad_hosts_and_links_are_refused_before_anything_is_made(hosts, links, message):
    before = namespaces()
    with pytest.raises(ValueError, match=message), network(hosts, links, io.StringIO()):
        pass
    assert not {ns for ns in namespaces() - before if ns.startswith(f"dbs{os.getpid()}")}  # others' may come and go
    with pytest.raises(ValueError):
        check(hosts, links)


def test_unknown_link_and_bad_conditions_are_refused():
    with network(["a", "b", "c"], [LinkSpec("a", "b")], io.StringIO()) as net:
        with pytest.raises(KeyError, match="no link between a and c"):
            net.cut("a", "c")
        with pytest.raises(ValueError, match="loss percent 101"):
            net.set_loss("b", "a", 101)
        with pytest.raises(ValueError, match="latency_ms -2"):
            net.set_latency("b", "a", -2)


def test_long_host_names_get_short_interface_names():
    with network(["client", "replica-in-another-zone"], [LinkSpec("client", "replica-in-another-zone")],
                 io.StringIO()) as net:
        links = subprocess.run(["ip", "-n", net.namespaces["client"], "-o", "link"], capture_output=True,
                               text=True, check=True).stdout
        assert " peer1@" in links and net.ifname("replica-in-another-zone", "client") == "to-client"
        assert ping(net, "client", "replica-in-another-zone").returncode == 0


def test_a_dead_delayer_is_reported_not_taken_for_a_cut():
    with network(["a", "b"], [LinkSpec("a", "b", 1.0)], io.StringIO()) as net:
        net._delayers["b"].kill()
        net._delayers["b"].wait()
        with pytest.raises(RuntimeError, match="the delayer of b .* exited with -9"):
            net.measure_rtt()
