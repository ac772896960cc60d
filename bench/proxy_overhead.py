"""What haproxy in front of a server costs on loopback: sysbench oltp_point_select straight to one MariaDB
(InnoDB) server and through haproxy (TCP mode, the topology's adapter) to the same server, interleaved
(direct, proxy, proxy, direct, ...), medians. Also haproxy's own CPU time per transaction.

The figure is the cost of the extra hop on one host (two more loopback crossings per query, haproxy's CPU
taken from the same 2 cores as server and client), not a network proxy's.

    .venv/bin/python bench/proxy_overhead.py [--pairs 3] [--seconds 10] [--threads 2] [--table-size 10000]
    .venv/bin/python bench/proxy_overhead.py --smoke     # 1 pair, 2 s, 1,000 rows: checks it still runs
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep.engines import Conn, family, write_private  # noqa: E402
from dbsweep.topology.proxies import Backend, proxy  # noqa: E402

ENGINE = "innodb"
TPS = re.compile(r"transactions:\s+\d+\s+\(([\d.]+) per sec\.\)")
AVG = re.compile(r"avg:\s+([\d.]+)")
P95 = re.compile(r"95th percentile:\s+([\d.]+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sysbench(options: Path, command: str, args: argparse.Namespace) -> str:
    argv = ["sysbench", f"--config-file={options}", "oltp_point_select", "--tables=1",
            f"--table-size={args.table_size}", f"--threads={args.threads}", f"--time={args.seconds}",
            "--report-interval=0", "--db-ps-mode=auto", command]
    return subprocess.run(argv, capture_output=True, text=True, check=True, cwd="/").stdout


def options_file(tmp: Path, name: str, conn: Conn) -> Path:
    path = tmp / f"{name}.sysbench"
    write_private(path, "\n".join(family(ENGINE).sysbench_options(conn, ENGINE)) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--table-size", type=int, default=10000)
    parser.add_argument("--smoke", action="store_true", help="1 pair, 2 s windows, 1,000 rows: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.pairs, args.seconds, args.table_size = 1, 2, 1000
    tmp = tempdir("proxy")
    tmp.chmod(0o755)  # the server runs as mysql, haproxy as haproxy
    mariadb = family(ENGINE)
    password = secrets.token_urlsafe(16)
    rows, results = [], {"direct": [], "proxy": []}
    with open(tmp / "bench.log", "w") as log:
        mariadb.initialize(tmp / "data", log)
        config = mariadb.config_text(ENGINE, "256M", {}, tmp / "data", tmp / "run", free_port())
        with mariadb.server(ENGINE, tmp / "data", tmp / "run", config, log) as server:
            mariadb.create_user(server, "sbuser", password, "sbtest")
            direct = Conn(host="127.0.0.1", port=server.port, socket=server.socket, user="sbuser", password=password,
                          database="sbtest")
            sysbench(options_file(tmp, "direct", direct), "prepare", args)
            with proxy("haproxy", {"balance": "first"}, ("127.0.0.1", free_port()),
                       [Backend("primary", "127.0.0.1", server.port)], tmp / "proxy", log) as handle:
                through = dataclasses.replace(direct, port=handle.port)
                files = {"direct": options_file(tmp, "direct", direct), "proxy": options_file(tmp, "proxy", through)}
                haproxy = psutil.Process(handle.pid)
                order = [route for i in range(args.pairs)
                         for route in (("direct", "proxy") if i % 2 == 0 else ("proxy", "direct"))]
                for n, route in enumerate(order, 1):
                    cpu = sum(haproxy.cpu_times()[:2])
                    out = sysbench(files[route], "run", args)
                    cpu = sum(haproxy.cpu_times()[:2]) - cpu
                    tps = float(TPS.search(out)[1])
                    cpu_us = cpu / (tps * args.seconds) * 1e6 if route == "proxy" else None
                    results[route].append((tps, float(AVG.search(out)[1]), float(P95.search(out)[1]), cpu_us))
                    rows.append([n, route, f"{tps:.0f}", f"{results[route][-1][1]:.3f}",
                                 f"{results[route][-1][2]:.3f}", "" if cpu_us is None else f"{cpu_us:.1f}"])
                sessions = handle.stats()["frontend.sessions_total"]
    if sessions < args.pairs * args.threads:
        raise RuntimeError(f"haproxy counted {sessions:.0f} sessions: the proxy runs did not go through it")

    def med(route, i):
        return median([r[i] for r in results[route]])

    print(f"sysbench oltp_point_select, {args.threads} threads, {args.seconds} s per run, 1 table x "
          f"{args.table_size} rows, {args.pairs} interleaved pairs; haproxy {handle.facts['version'].split()[2]}\n")
    print(table(["run", "route", "tps", "avg ms", "p95 ms", "haproxy CPU us/txn"], rows))
    print()
    ratios = [p[0] / d[0] for p, d in zip(results["proxy"], results["direct"], strict=False)]  # run i of each: one pair
    cpu = median([r[3] for r in results["proxy"]])
    print(table(["route", "median tps", "median avg ms", "median p95 ms", "proxy / direct tps, per pair (median)",
                 "haproxy CPU us/txn"],
                [["direct", f"{med('direct', 0):.0f}", f"{med('direct', 1):.3f}", f"{med('direct', 2):.3f}", "", ""],
                 ["proxy", f"{med('proxy', 0):.0f}", f"{med('proxy', 1):.3f}", f"{med('proxy', 2):.3f}",
                  f"{' '.join(f'{r:.2f}' for r in ratios)} ({median(ratios):.2f})", f"{cpu:.1f}"]]))

if __name__ == "__main__":
    main()
