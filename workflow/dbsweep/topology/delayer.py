"""Delay packets of a network namespace in user space, through netfilter queues (NFQUEUE).

This host's kernel has no sch_netem (CONFIG_NET_SCH_NETEM is not set; no modules), so a link's
latency is added here: an iptables rule in the receiving namespace hands each packet that arrives
over a link to a queue (one queue per link end), the kernel holds it, and this process accepts it
once its delay, counted from the packet's arrival (the kernel's receive timestamp), is over, never
before; it wakes early by its own average lateness and waits out the rest. Only metadata crosses into user space
(copy mode META, GSO packets kept whole), and packets leave a queue in the order they came (a jittered delay never
overtakes the one before it, as on a real link), so a whole batch is accepted by one verdict.
A delay shorter than the trip through user space (about 0.2 ms each way on a loaded 2-core host)
comes out as that trip.

Run inside the namespace (`ip netns exec NS python -m dbsweep.topology.delayer`). Control lines on
stdin: `QUEUE DELAY_MS JITTER_MS` binds queue QUEUE (when new) with that one-way delay, uniform within
±JITTER_MS, and answers `ok QUEUE` once bound; EOF (the owner is gone, even by SIGKILL) ends it.
"""
from __future__ import annotations

import os
import random
import select
import signal
import socket
import struct
import sys
import time
from collections import deque

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_FLAGS, NFQA_CFG_MASK = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_GSO = 4
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_TIMESTAMP = 1, 2, 4
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
SOL_NETLINK, NETLINK_NO_ENOBUFS = 270, 5
SO_TIMESTAMP = 29  # Linux's value; Python's socket module lacks the name
MAXLEN = 65536  # packets a queue may hold (the kernel's default, 1024, is a few ms of a busy link)


def _attr(kind: int, payload: bytes) -> bytes:
    size = 4 + len(payload)
    return struct.pack("=HH", size, kind) + payload + b"\0" * (-size % 4)


def _message(kind: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack(">H", queue) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, seq, 0) + body


def _messages(data: bytes):
    """(type, res_id, attributes) of each netlink message in data."""
    pos = 0
    while pos + 16 <= len(data):
        size, kind = struct.unpack_from("=IH", data, pos)
        if size < 16:
            return
        if kind == NLMSG_ERROR:
            yield kind, struct.unpack_from("=i", data, pos + 16)[0], {}
        else:
            res_id = struct.unpack_from(">H", data, pos + 18)[0]
            attrs, at = {}, pos + 20
            while at + 4 <= pos + size:
                length, akind = struct.unpack_from("=HH", data, at)
                if length < 4:
                    break
                attrs[akind & 0x3FFF] = data[at + 4:at + length]
                at += (length + 3) & ~3
            yield kind & 0xFF, res_id, attrs
        pos += (size + 3) & ~3


class Delayer:
    def __init__(self):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)  # an overrun loses a message, not the loop
        self.sock.bind((0, 0))
        # Any socket asking for receive timestamps makes the kernel stamp every packet as it arrives; the
        # queue passes the stamp on, so a delay counts from the arrival, not from when this process got it.
        self.stamps = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.stamps.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
        self.delay: dict[int, tuple[float, float]] = {}  # queue -> (delay s, jitter s)
        self.held: dict[int, deque] = {}  # queue -> deque of (due, packet id)
        self.seq = 0
        self.late = 0.0  # how late a wake-up comes, on average (s): the delayer wakes that much earlier

    def bind(self, queue: int) -> None:
        self._ask(queue, _attr(NFQA_CFG_CMD, struct.pack(">BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_INET)))
        self._ask(queue, _attr(NFQA_CFG_PARAMS, struct.pack(">IB", 0xFFFF, NFQNL_COPY_META))
                  + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", MAXLEN))
                  + _attr(NFQA_CFG_FLAGS, struct.pack(">I", NFQA_CFG_F_GSO))
                  + _attr(NFQA_CFG_MASK, struct.pack(">I", NFQA_CFG_F_GSO)))
        self.held.setdefault(queue, deque())

    def _ask(self, queue: int, attrs: bytes) -> None:
        """Send a config request and wait for its acknowledgement (packets arriving meanwhile are kept)."""
        self.seq += 1
        self.sock.send(_message(NFQNL_MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK, self.seq))
        while True:
            for kind, value, attrs in _messages(self.sock.recv(1 << 16)):
                if kind == NLMSG_ERROR:
                    if value:
                        raise OSError(-value, f"nfqueue config of queue {queue}: {os.strerror(-value)}")
                    return
                self._hold(kind, value, attrs)

    def _hold(self, kind: int, queue: int, attrs: dict) -> None:
        if kind != NFQNL_MSG_PACKET or NFQA_PACKET_HDR not in attrs or queue not in self.held:
            return
        packet_id = struct.unpack_from(">I", attrs[NFQA_PACKET_HDR])[0]
        delay, jitter = self.delay.get(queue, (0.0, 0.0))
        arrived = now = time.monotonic()
        if NFQA_TIMESTAMP in attrs:
            sec, usec = struct.unpack_from(">QQ", attrs[NFQA_TIMESTAMP])
            arrived = min(now, now - (time.time() - (sec + usec / 1e6)))
        due = arrived + max(0.0, delay + (random.uniform(-jitter, jitter) if jitter else 0.0))
        held = self.held[queue]
        if held and held[-1][0] > due:
            due = held[-1][0]  # never overtake the packet before it
        held.append((due, packet_id))

    def _release_due(self) -> float | None:
        """Accept every packet whose time has come; return the seconds until the next one is due."""
        now, wait = time.monotonic(), None
        for queue, held in self.held.items():
            last = None
            while held and held[0][0] <= now:  # never before its time: a delay is at least what was asked
                due, last = held.popleft()
                self.late += 0.05 * (min(now - due, 0.002) - self.late)
            if last is not None:  # one verdict accepts every packet of the queue up to this id
                self.sock.send(_message(NFQNL_MSG_VERDICT_BATCH, queue,
                                        _attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, last))))
            if held:
                wait = min(wait if wait is not None else 1.0, max(0.0, held[0][0] - now - self.late))
        return wait

    def control(self, line: str) -> None:
        queue, delay_ms, jitter_ms = line.split()
        queue = int(queue)
        self.delay[queue] = (float(delay_ms) / 1000, float(jitter_ms) / 1000)
        if queue not in self.held:
            self.bind(queue)
        sys.stdout.write(f"ok {queue}\n")
        sys.stdout.flush()

    def run(self) -> None:
        stdin = sys.stdin.fileno()
        pending = b""
        self.sock.setblocking(False)
        while True:
            ready, _, _ = select.select([self.sock, stdin], [], [], self._release_due())
            if self.sock in ready:
                self._drain()
            if stdin in ready:
                chunk = os.read(stdin, 4096)
                if not chunk:
                    return
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    self.sock.setblocking(True)
                    self.control(line.decode())
                    self.sock.setblocking(False)

    def _drain(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 18)
            except BlockingIOError:
                return
            for kind, queue, attrs in _messages(data):
                self._hold(kind, queue, attrs)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the owner's to handle; it then closes stdin
    Delayer().run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
