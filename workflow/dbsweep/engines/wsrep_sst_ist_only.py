#!/usr/bin/python3
"""A Galera state transfer method that copies nothing: it lets a member that is behind catch up by IST
(the donor replays the writesets it missed from its gcache) and refuses a full state transfer (SST).

mariadbd runs it as wsrep_sst_<method> (copied by engines.mariadb into the server's run folder, which
is first on the server's PATH), in two roles:

  joiner  --role joiner --address HOST:PORT --parent PID ...: listens on HOST:PORT, prints "ready
          HOST:PORT" (the server sends it to the donor), waits for the donor's word, and prints the
          state the donor gave ("UUID:SEQNO DOMAIN"), or fails when the donor refused.
  donor   --role donor --address HOST:PORT --gtid UUID:SEQNO --gtid-domain-id N [--bypass] ...: with
          --bypass (the joiner gets an IST) tells the joiner the state and prints "done STATE"; without
          it (a full copy would be needed) tells the joiner it refuses, and fails.
"""
import os
import socket
import sys
import time

ACCEPT_WAIT_S = 1.0


def options(argv: list[str]) -> tuple[dict[str, str], set[str]]:
    values, flags, i = {}, set(), 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--mysqld-args":  # the server's own arguments follow
            break
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            values[arg], i = argv[i + 1], i + 2
        else:
            flags.add(arg)
            i += 1
    return values, flags


def host_port(address: str) -> tuple[str, int]:
    address = address.split("/", 1)[0]
    host, port = address.rsplit(":", 1)
    return host.strip("[]"), int(port)


def say(line: str) -> None:
    print(line, flush=True)


def complain(line: str) -> None:
    print(f"WSREP_SST: [ERROR] dbsweep_ist_only: {line}", file=sys.stderr, flush=True)


def parent_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def joiner(values: dict[str, str]) -> int:
    host, port = host_port(values["--address"])
    parent = int(values.get("--parent", "0"))
    with socket.create_server((host, port)) as server:
        server.settimeout(ACCEPT_WAIT_S)
        say(f"ready {host}:{port}/dbsweep_ist_only")
        while True:
            try:
                conn, _ = server.accept()
                break
            except TimeoutError:
                if parent and not parent_alive(parent):
                    complain(f"the server (pid {parent}) ended before the donor answered")
                    return 32
        with conn:
            conn.settimeout(60)
            words = conn.makefile().read().splitlines()
    if not words or words[0] == "refused":
        complain("the donor would need a full state transfer (SST), which dbsweep refuses: this member's "
                 "data is not the cluster's, or the writes it missed are no longer in the donor's gcache "
                 "(raise gcache.size)")
        return 32
    say(words[0])
    return 0


def donor(values: dict[str, str], flags: set[str]) -> int:
    state = f"{values.get('--gtid', '')} {values.get('--gtid-domain-id', '')}".strip()
    bypass = "--bypass" in flags
    host, port = host_port(values["--address"])
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                complain(f"cannot reach the joiner at {host}:{port}")
                return 1
            time.sleep(0.2)
    with conn:
        conn.sendall((f"{state}\n" if bypass else "refused\n").encode())
    if not bypass:
        complain("a full state transfer (SST) was asked for; dbsweep refuses to copy a datadir")
        return 1
    say("continue")
    say(f"done {state}")
    return 0


def main() -> int:
    values, flags = options(sys.argv[1:])
    role = values.get("--role")
    if role == "joiner":
        return joiner(values)
    if role == "donor":
        return donor(values, flags)
    complain(f"unknown role {role!r}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
