#!/usr/bin/env python3
"""A lossy UDP relay: netem in user space (the host kernel has none).

gdb (or tools/kgdboe-bridge) talks to the relay's listening address; the
relay forwards each datagram to the target from one socket of its own,
and the target's answers back to whoever spoke last.  In each direction
a seeded random generator drops, duplicates, delays and reorders
datagrams, so a run can be repeated exactly:

  drop      the datagram is not forwarded
  dup       it is forwarded twice
  reorder   it is held back and sent after the next one (or after
            delay_ms * 4 when no next one comes)
  delay_ms  every datagram waits this long (plus up to as much again)

Run inside a network namespace that our scripts created (the relay binds
the addresses it is given, nothing else).  Each side is IPv4 or IPv6 as
its address is (an IPv6 target is reached from an IPv6 socket).  As a
command, it runs for --seconds at most and prints its counters as JSON
at the end:

  matrix/relay.py --listen 127.0.0.1:7443 --target 192.0.2.2:6443 \\
      --drop 0.05 --seed 1 --seconds 600
"""

import argparse
import heapq
import json
import random
import select
import socket
import threading
import time


class Direction:
    """The faults of one direction, and what they did."""

    def __init__(self, name, rng, drop=0.0, dup=0.0, reorder=0.0,
                 delay_ms=0.0):
        self.name = name
        self.rng = rng
        self.drop, self.dup, self.reorder = drop, dup, reorder
        self.delay = delay_ms / 1000.0
        self.held = None
        self.counts = {"in": 0, "out": 0, "dropped": 0, "duplicated": 0,
                       "reordered": 0}

    def plan(self, data, now):
        """The (time, data) sends that one arriving datagram causes."""
        self.counts["in"] += 1
        if self.rng.random() < self.drop:
            self.counts["dropped"] += 1
            return self.release(now)
        at = now + self.delay * (1 + self.rng.random())
        sends = [(at, data)]
        if self.rng.random() < self.dup:
            self.counts["duplicated"] += 1
            sends.append((at + 0.001, data))
        if self.held is None and self.rng.random() < self.reorder:
            self.counts["reordered"] += 1
            self.held = (now + max(self.delay * 4, 0.05), sends)
            return []
        return sends + self.release(sends[-1][0])

    def release(self, after):
        """A held datagram goes after the one that overtook it."""
        if self.held is None:
            return []
        _, sends = self.held
        self.held = None
        return [(after + 0.0005 * (i + 1), d) for i, (_, d) in
                enumerate(sends)]

    def due_held(self, now):
        if self.held is not None and self.held[0] <= now:
            return self.release(now)
        return []


class LossyRelay:
    """The relay as a thread; use it as a context manager."""

    def __init__(self, listen, target, seed=1, source=None, **faults):
        self.target = target
        # one generator a direction: a direction's faults depend only on
        # the seed and its own datagrams, not on how the two interleave
        self.to_target = Direction("to_target", random.Random(2 * seed),
                                   **faults)
        self.to_client = Direction("to_client", random.Random(2 * seed + 1),
                                   **faults)
        self.front = socket.socket(family(listen), socket.SOCK_DGRAM)
        self.front.bind(listen)
        self.back = socket.socket(family(target), socket.SOCK_DGRAM)
        any_ip = "::" if family(target) == socket.AF_INET6 else "0.0.0.0"
        self.back.bind(source or (any_ip, 0))
        self.listen = self.front.getsockname()
        self.client = None
        self.queue = []          # (time, n, socket, address, data)
        self.n = 0
        self.captured = []       # datagrams to the target, as received
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.stop_flag.set()
        self.thread.join(5)
        self.front.close()
        self.back.close()

    def counters(self):
        return {"to_target": dict(self.to_target.counts),
                "to_client": dict(self.to_client.counts)}

    def _schedule(self, sends, sock, addr, direction):
        for at, data in sends:
            self.n += 1
            heapq.heappush(self.queue, (at, self.n, sock, addr, data,
                                        direction))

    def _receive(self, sock, now):
        data, addr = sock.recvfrom(65536)
        if sock is self.front:
            self.client = addr
            if len(self.captured) < 10000:
                self.captured.append(data)
            self._schedule(self.to_target.plan(data, now), self.back,
                           self.target, self.to_target)
        elif self.client:
            self._schedule(self.to_client.plan(data, now), self.front,
                           self.client, self.to_client)

    def _send_due(self, now):
        for d, sock, addr in ((self.to_target, self.back, self.target),
                              (self.to_client, self.front, self.client)):
            if addr:
                self._schedule(d.due_held(now), sock, addr, d)
        while self.queue and self.queue[0][0] <= now:
            _, _, sock, addr, data, direction = heapq.heappop(self.queue)
            try:
                sock.sendto(data, addr)
                direction.counts["out"] += 1
            except OSError:
                pass

    def _run(self):
        while not self.stop_flag.is_set():
            now = time.monotonic()
            wait = 0.01
            if self.queue:
                wait = max(0.0, min(wait, self.queue[0][0] - now))
            r, _, _ = select.select([self.front, self.back], [], [], wait)
            now = time.monotonic()
            for sock in r:
                self._receive(sock, now)
            self._send_due(now)


def family(addr):
    """The socket family of an (ip, port) address."""
    return socket.AF_INET6 if ":" in addr[0] else socket.AF_INET


def address(text):
    """ip:port, an IPv6 address in brackets or not."""
    host, port = text.rsplit(":", 1)
    return (host.strip("[]"), int(port))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--listen", type=address, required=True)
    p.add_argument("--target", type=address, required=True)
    p.add_argument("--source", type=address, help="bind the target side")
    p.add_argument("--drop", type=float, default=0.0)
    p.add_argument("--dup", type=float, default=0.0)
    p.add_argument("--reorder", type=float, default=0.0)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seconds", type=float, default=600.0,
                   help="run at most this long")
    a = p.parse_args()
    with LossyRelay(a.listen, a.target, a.seed, a.source, drop=a.drop,
                    dup=a.dup, reorder=a.reorder,
                    delay_ms=a.delay_ms) as relay:
        try:
            time.sleep(a.seconds)
        except KeyboardInterrupt:
            pass
    print(json.dumps(relay.counters()))


if __name__ == "__main__":
    main()
