"""What a topology's link with added latency gives and costs: for each round trip asked (0, 0.5, 2 ms),
the measured round trip (ping, median), how many request/response round trips 16 TCP connections get
through it per second, what the ideal would be at the measured round trip, and, where the kernel has no
netem and a user-space delayer holds the packets (topology/delayer.py), the delayer's CPU as a share of
one core. Two namespaces, one veth link, a Python echo server in one and the clients in the other.

    .venv/bin/python bench/link_delay.py [--latencies 0 0.5 2] [--seconds 4] [--connections 16]
    .venv/bin/python bench/link_delay.py --smoke      # 0 and 1 ms, 1 s: checks it still runs
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep.topology import link_floor  # noqa: E402
from dbsweep.topology.network import LinkSpec, netem_available, network  # noqa: E402

PORT = 7070
SERVER = f"""
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", {PORT})); s.listen(256)
def serve(c):
    while (d := c.recv(100)):
        c.sendall(d)
while True:
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""
CLIENT = """
import socket, sys, threading, time
host, port, n, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
counts = [0] * n
def run(i):
    c = socket.create_connection((host, port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.sendall(b"x" * 100); got = 0
        while got < 100:
            got += len(c.recv(100 - got))
        counts[i] += 1
threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
[t.start() for t in threads]; [t.join() for t in threads]
print(sum(counts) / seconds)
"""


def delayer_cpu(net) -> float:
    """CPU seconds the delayers used so far."""
    total = 0.0
    for proc in getattr(net, "_delayers", {}).values():
        try:
            p = psutil.Process(proc.pid)
            for q in [p, *p.children(recursive=True)]:
                total += sum(q.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", type=float, nargs="+", default=[0, 0.5, 2])
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved pairs of the rtt with and without the "
                                                                   "floor taken off")
    parser.add_argument("--smoke", action="store_true", help="0 and 1 ms, 1 s: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.latencies, args.seconds, args.rounds = [0, 1], 1, 1
    floor = link_floor.floor()
    rows = []
    for latency in args.latencies:
        with network(["a", "b"], [LinkSpec("a", "b", latency)], io.StringIO()) as net:
            server = subprocess.Popen([*net.enter("b"), sys.executable, "-c", SERVER])
            try:
                time.sleep(0.5)
                rtt = net.measure_rtt(20)["a-b"]
                cpu = delayer_cpu(net)
                started = time.monotonic()
                out = subprocess.run([*net.enter("a"), sys.executable, "-c", CLIENT, net.addresses["b"], str(PORT),
                                      str(args.connections), str(args.seconds)], capture_output=True, text=True,
                                     check=True).stdout
                share = (delayer_cpu(net) - cpu) / (time.monotonic() - started)
            finally:
                server.kill()
                server.wait()
        rate = float(out)
        ideal = args.connections / (rtt / 1000) if latency > 0 else None
        held = delivered_rtts(latency, floor.floor_ms, args.rounds) if latency > 0 else None
        rows.append([f"{latency:g}", f"{rtt:.3f}", f"{rate:,.0f}", "" if ideal is None else f"{ideal:,.0f}",
                     f"{100 * share:.0f}%" if latency > 0 and not netem_available() else "-",
                     "" if held is None else f"{held[0]:.3f} / {held[1]:.3f}"])
    method = "tc netem" if netem_available() else "the NFQUEUE user-space delayer (no sch_netem in this kernel)"
    print(f"{args.connections} TCP connections, 100-byte request/response, {args.seconds:g} s per latency; "
          f"latency by {method}; its floor {floor.floor_ms:g} ms ({floor.how}); load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print(table(["added round trip ms", "measured rtt ms", "round trips/s", "ideal at that rtt",
                 "delayer CPU (one core)", f"rtt ms, whole delay held / floor taken off (median of {args.rounds})"],
                rows))


def delivered_rtts(latency: float, floor_ms: float, rounds: int) -> tuple[float, float]:
    """The link's median round trip when the delayer holds the whole declared delay, and when it holds the
    delay less its own trip (what a topology cell does: topology.cell), in interleaved pairs."""
    got = {0.0: [], floor_ms: []}
    for _ in range(rounds):
        for taken in (0.0, floor_ms):
            with network(["a", "b"], [LinkSpec("a", "b", latency)], io.StringIO(), floor_ms=taken) as net:
                got[taken].append(net.measure_rtt(20)["a-b"])
    return statistics.median(got[0.0]), statistics.median(got[floor_ms])


if __name__ == "__main__":
    main()
