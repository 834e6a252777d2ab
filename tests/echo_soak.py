#!/usr/bin/env python3
"""Echo soak: many round trips to the guest's netpoll_echo client on one
NIC, with every frame on the tap recorded, to find where a lost datagram
went (the pcnet investigation, docs/pcnet.md).

Makes its own namespace (npng.NetNS), boots the guest, sends --count
echoes one at a time (each after the previous answer or --timeout), and
for each lost one says whether the request left the host's tap and
whether a reply came back on it.  Guest counters (/proc/net/dev, the echo
client's statistics, /proc/interrupts) are printed before and after.
--trace passes QEMU trace event patterns (-trace) to the guest's QEMU;
their output goes to <workdir>/qemu-trace.log.
"""

import argparse
import os
import socket
import struct
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
import npng  # noqa: E402


class TapSniffer:
    """Every UDP frame on the tap between the echo ports, by direction:
    "req" host->guest, "rep" guest->host, keyed by payload."""

    def __init__(self):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                               socket.htons(0x0003))
        self.s.bind((npng.TAP, 0))
        self.s.settimeout(0.2)
        self.seen = {}
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            try:
                frame = self.s.recv(65536)
            except socket.timeout:
                continue
            if len(frame) < 42 or frame[12:14] != b"\x08\x00":
                continue
            ihl = (frame[14] & 15) * 4
            if frame[23] != 17:
                continue
            sport, dport = struct.unpack("!HH", frame[14 + ihl:18 + ihl])
            payload = frame[22 + ihl:]
            kind = {(npng.ECHO_HOST_PORT, npng.ECHO_PORT): "req",
                    (npng.ECHO_PORT, npng.ECHO_HOST_PORT): "rep"}.get(
                        (sport, dport))
            if kind:
                self.seen.setdefault((kind, payload), []).append(
                    time.monotonic())


def guest_counters(g):
    _, dev = g.run("grep eth0 /proc/net/dev", timeout=30, check=False)
    _, st = g.run("cat /sys/kernel/debug/netpoll/netpoll_echo-*/stats",
                  timeout=30, check=False)
    with open(os.path.join(os.path.dirname(g.serial_log), "stats.txt"),
              "w") as f:
        f.write(st)
    _, irq = g.run("grep -i eth0 /proc/interrupts", timeout=30,
                   check=False)
    # experiment kernels may export counters as driver module parameters
    _, exp = g.run("cd /sys/module/pcnet32/parameters 2>/dev/null && "
                   "grep . npng_* 2>/dev/null", timeout=30, check=False)
    return dev.strip(), npng.parse_kv(st), irq.strip(), exp.split()


def window_rtts(ec, n, window, timeout, until=None):
    """n echoes in groups of `window` sent back to back (more frames in
    flight while the guest reads its ring); returns ([], lost, sent)."""
    import select
    lost = sent = 0
    ec.lost_seqs = []
    while sent < n and (until is None or time.monotonic() < until):
        want = set()
        for _ in range(min(window, n - sent)):
            ec.n += 1
            want.add(b"npng-echo %d" % ec.n)
            ec.sock.sendto(b"npng-echo %d" % ec.n,
                           (npng.GUEST_IP, npng.ECHO_PORT))
            sent += 1
        deadline = time.monotonic() + timeout
        while want and time.monotonic() < deadline:
            r, _, _ = select.select([ec.sock], [], [],
                                    max(0, deadline - time.monotonic()))
            if r:
                want.discard(ec.sock.recv(2048))
        lost += len(want)
        ec.lost_seqs += sorted(int(w.split()[1]) for w in want)
    return [], lost, sent


def trapped_rtts(g, ec, n, a):
    """n echoes while the guest is trapped (netpoll_echo's debugfs trap:
    interrupts off, polling) for a.trap_ms."""
    cmd = "echo %d > /sys/kernel/debug/netpoll_echo/trap" % a.trap_ms
    t0 = time.monotonic()
    tag = g.start(cmd)
    time.sleep(1.0)
    until = t0 + a.trap_ms / 1000.0 - 0.5
    if a.window > 1:
        res = window_rtts(ec, n, a.window, 0.3, until)
    else:
        res = ec.rtts(n, timeout=0.3, until=until)
    g.finish(tag, cmd, timeout=a.trap_ms // 1000 + 60)
    return res


def inside(a):
    os.makedirs(a.workdir, exist_ok=True)
    extra = []
    if a.trace:
        extra = ["-trace", "enable=%s,file=%s" % (
            a.trace, os.path.join(a.workdir, "qemu-trace.log"))]
    g = npng.Guest(a.nic, a.workdir, os.path.join(a.workdir, "serial.log"),
                   a.kernel, a.initrd, extra_qemu=extra,
                   extra_append="%s netpoll.poll_mode=%s %s" % (
                       npng.echo_arg(), a.poll_mode, a.append))
    sn = TapSniffer()
    ec = npng.Echo()
    try:
        g.wait_ready(180)
        print("before:", guest_counters(g), flush=True)
        t0 = time.monotonic()
        total_lost = total_sent = 0
        for i in range(0, a.count, 1000):
            n = min(1000, a.count - i)
            if a.trap_ms:
                r, lost, sent = trapped_rtts(g, ec, n, a)
            elif a.window > 1:
                r, lost, sent = window_rtts(ec, n, a.window, a.timeout)
            else:
                r, lost, sent = ec.rtts(n, timeout=a.timeout)
            total_lost += lost
            total_sent += sent
            for seq in ec.lost_seqs:
                p = b"npng-echo %d" % seq
                print("LOST seq %d: request on tap %s, reply on tap %s, "
                      "late replies so far %d" % (
                          seq, len(sn.seen.get(("req", p), [])),
                          len(sn.seen.get(("rep", p), [])), getattr(ec, "late", 0)),
                      flush=True)
            print("%d/%d sent, %d lost so far, %.0fs" % (
                total_sent, a.count, total_lost, time.monotonic() - t0),
                flush=True)
        time.sleep(1)
        print("after:", guest_counters(g), flush=True)
    finally:
        sn.stop = True
        ec.close()
        g.stop()
    print("echo soak %s %s%s: %d lost of %d" % (
        a.nic, a.poll_mode, " trapped" if a.trap_ms else "", total_lost,
        total_sent))
    return 1 if total_lost else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nic", default="pcnet")
    p.add_argument("--poll-mode", default="driver")
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--trap-ms", type=int, default=0,
                   help="echo while trapped, in traps of this length")
    p.add_argument("--window", type=int, default=1,
                   help="echoes sent back to back before waiting")
    p.add_argument("--trace", default="", help="QEMU -trace pattern")
    p.add_argument("--append", default="")
    p.add_argument("--kernel", default=os.path.join(
        npng.BUILD, "obj", "arch", "x86", "boot", "bzImage"))
    p.add_argument("--initrd", default=os.path.join(npng.BUILD,
                                                    "rootfs.cpio"))
    p.add_argument("--workdir", default=os.path.join(npng.BUILD, "soak"))
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.inside:
        return inside(a)
    return npng.run_in_netns("npng-%d-soak" % os.getpid(),
                             [npng.PYTHON, os.path.abspath(__file__),
                              "--inside"] + sys.argv[1:], None,
                             a.count * (a.timeout + 0.1) + 300)


if __name__ == "__main__":
    sys.exit(main())
