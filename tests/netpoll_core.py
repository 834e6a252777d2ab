#!/usr/bin/env python3
"""The polling core's trap, transmit queue and fragments, under load.

Runs inside a network namespace that the caller created (as
tests/kgdboe.py does), on a guest with the netpoll_echo client.  Traps
are netpoll_echo's (debugfs trap: one CPU, interrupts off, the device
polled, netpoll_set_trap() on the echo client's device).

Steps, in order (each printed PASS/FAIL/SKIP with its time):
  boot       guest ready, the echo client registered, its queue empty
  torture    --traps traps of --trap-ms each, back to back, while iperf3
             loads the NIC both ways (--bidir) and the host sends echo
             datagrams every 2 ms, whose answers are queued while the
             kernel runs and while it is trapped.  Afterwards the
             device's queue is empty (dev_txq_len 0), nothing was
             dropped, every answer the client queued reached the host,
             and 50 echoes are answered
  bounded    netpoll.txq_max=2, then one trap of 2 s while the host
             sends 300 datagrams at once: the queue never holds more
             than 2 answers per poll, the rest are dropped and counted
             (dev_txq_dropped, the client's dropped), the host gets
             exactly the answers that were queued; txq_max back to 256
             and 50 echoes are answered
  fragments  a 3000-byte datagram to the echo port (the host fragments
             it) while the kernel runs, then another while trapped: no
             answer, no ICMP (the host's connected socket would get
             ECONNREFUSED), the client's "fragments" counter +1 each;
             the same to a port nobody has is answered with ICMP (the
             detection works); 50 echoes are answered afterwards
  arp        while trapped, ARP requests from a host of the subnet that
             is not the echo client's peer: one for the guest's address
             is answered, one for another address is not, and of a flood
             of 200 at most netpoll.arp_rate a second are answered, the
             rest counted (dev_arp_limited); every request accounted for
  jumbo      MTU 9000 on the guest's e1000 and on tap0 (e1000 then
             receives through napi_gro_frags()): echoes of 64 to 8972
             bytes (the largest UDP payload of one 9000-byte packet) are
             answered byte for byte while the kernel runs, and those of
             4000 and 8972 while it is trapped
  selftest   ethtool's offline self-test (ethtool -t eth0 offline): e1000
             closes the device, frees its interrupt and requests it with
             a test handler, runs its tests and reopens, while the echo
             client stays registered and the host keeps sending echoes;
             its interrupt test passes (QEMU's e1000 fails the register
             and loopback tests in both poll modes, its e1000e the
             interrupt test too), and echoes are answered afterwards,
             running (50) and trapped (20); in generic mode the poller
             found the device's interrupt lines again and ran them
  vlan       eth0.100 added: tagged datagrams to the echo port of eth0's
             address are not the untagged client's (no answer, nothing
             delivered); the client moved to eth0.100 at run time (debugfs
             netpoll_echo/config): 20 tagged echoes answered tagged while
             the kernel runs, 20 while it is trapped
  vlan_gone  eth0.100 deleted under the client: the deletion returns, the
             client says it released the device and waits for it (its
             config file says so); a bad configuration is refused with
             EINVAL and changes nothing; eth0.100 added again: the client
             resumes by itself and answers 20 tagged echoes; moved back
             to eth0 at run time, 50 echoes answered
  vlan_ipv6  eth0.100 with VLAN_GUEST_IP6, the client moved there over
             IPv6: 20 tagged IPv6 echoes answered tagged while the kernel
             runs and 20 while trapped, and while trapped a tagged
             neighbour solicitation from another host of the VLAN for the
             guest's address is answered, tagged, with the guest's MAC;
             back on eth0 over IPv4 afterwards
  splat      no BUG/WARNING/Oops in the serial log

--out writes the steps and the metrics as JSON.
"""

import argparse
import os
import re
import select
import socket
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
sys.path.insert(0, os.path.join(TOP, "tests"))
import npng  # noqa: E402
import kgdboe  # noqa: E402
from kgdboe import StepFailed  # noqa: E402

TRAP = "/sys/kernel/debug/netpoll_echo/trap"
ECHO_CONFIG = "/sys/kernel/debug/netpoll_echo/config"


# Models whose interrupt self-test QEMU fails in every poll mode, with the
# code it fails with: e1000e's forced interrupt never reaches its test
# handler (4), measured with netpoll.poll_mode=driver as well.  The test
# still frees the MSI-X vectors and requests them again, which is what the
# selftest step is for.
QEMU_FAILS_INTERRUPT_TEST = ("e1000e",)


def selftest_results(text):
    """ethtool -t's per-test results: {"Interrupt test (offline)": 0...}"""
    found = re.finditer(r"^\s*(\w[\w ]*\([\w/]+\))\s+(\d+)\s*$", text,
                        re.M)
    return {" ".join(m.group(1).split()): int(m.group(2)) for m in found}
TXQ_MAX = "/sys/module/netpoll/parameters/txq_max"
TXQ_MAX_DEFAULT = 256
FRAGMENTED_SIZE = 3000      # above the tap's MTU of 1500
IP_MTU_DISCOVER, IP_PMTUDISC_DONT = 10, 0   # linux/in.h
CLOSED_PORT = npng.ECHO_PORT + 1        # no client, no socket
OTHER_HOST_IP = "192.0.2.77"            # on the subnet, not the peer
NOT_OURS_IP = "192.0.2.99"              # an address the guest does not have
ARP_RATE = 20                           # netpoll.arp_rate's default
ARP_FLOOD = 200
JUMBO_MTU = 9000


def jumbo_sizes(ipv6):
    """Echo sizes for the jumbo step: the largest UDP payloads of one
    1500-byte and one JUMBO_MTU packet among them."""
    headers = 48 if ipv6 else 28
    return (64, 1500 - headers, 4000, JUMBO_MTU - headers)


class EchoPeer:
    """Datagrams to the echo client from HOST_IP:ECHO_HOST_PORT (with
    ipv6, from HOST_IP6 to GUEST_IP6), and a thread that counts the
    answers (by sequence number)."""

    def __init__(self, ipv6=False):
        family = socket.AF_INET6 if ipv6 else socket.AF_INET
        self.guest_ip = npng.GUEST_IP6 if ipv6 else npng.GUEST_IP
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((npng.HOST_IP6 if ipv6 else npng.HOST_IP,
                        npng.ECHO_HOST_PORT))
        self.seq = 0
        self.answers = set()
        self.stop_evt = threading.Event()
        self.thread = threading.Thread(target=self._recv, daemon=True)
        self.thread.start()

    def _recv(self):
        while not self.stop_evt.is_set():
            r, _, _ = select.select([self.sock], [], [], 0.1)
            if r:
                data = self.sock.recv(2048)
                if data.startswith(b"npng-tq "):
                    self.answers.add(int(data.split()[1]))

    def send(self, count, gap_s=0.0, until=None):
        """Up to count datagrams, gap_s apart, not past monotonic until;
        returns how many were sent."""
        sent = 0
        for _ in range(count):
            if until is not None and time.monotonic() >= until:
                break
            self.seq += 1
            self.sock.sendto(b"npng-tq %d" % self.seq,
                             (self.guest_ip, npng.ECHO_PORT))
            sent += 1
            if gap_s:
                time.sleep(gap_s)
        return sent

    def settle(self, quiet=1.0, limit=10.0):
        """Wait until no answer came for quiet seconds."""
        t0, last, n = time.monotonic(), time.monotonic(), len(self.answers)
        while time.monotonic() - t0 < limit:
            time.sleep(0.1)
            if len(self.answers) != n:
                n, last = len(self.answers), time.monotonic()
            elif time.monotonic() - last >= quiet:
                break
        return len(self.answers)

    def close(self):
        self.stop_evt.set()
        self.thread.join(1)
        self.sock.close()


class TrapQueueTest(kgdboe.Test):
    def stats(self):
        st = npng.read_stats(self.guest, "netpoll_echo-")
        if not st or "dev_txq_len" not in st:
            raise StepFailed("no echo client statistics with dev_txq_len: "
                             "%s" % st)
        return st

    def delta(self, before, after, *keys):
        return {k: after[k] - before[k] for k in keys}

    def boot(self):
        self.guest = npng.Guest(
            self.a.nic, self.a.workdir, self.a.serial_log, self.a.kernel,
            self.a.initrd, cpus=self.a.cpus,
            extra_append=" ".join([npng.echo_arg(), self.a.append]))
        info = self.guest.wait_ready(self.a.boot_timeout)
        self.peer = EchoPeer()
        st = self.stats()
        if st["dev_txq_len"]:
            raise StepFailed("queue not empty after boot: %s"
                             % st["dev_txq_len"])
        return "%d cpu(s), driver %s, %s" % (info["cpus"], info["driver"],
                                             st.get("poll_how"))

    def echoes_answered(self, n=50):
        got = len(self.peer.answers)
        first = self.peer.seq + 1
        self.peer.send(n, gap_s=0.005)
        self.peer.settle()
        missing = [s for s in range(first, first + n)
                   if s not in self.peer.answers]
        if missing:
            raise StepFailed("%d of %d echoes unanswered after: %s" % (
                len(missing), n, missing[:10]))
        return len(self.peer.answers) - got

    def torture(self):
        a = self.a
        # the guest's init started the iperf3 server
        before = self.stats()
        answered0 = len(self.peer.answers)
        seconds = int(a.traps * (a.trap_ms + 30) / 1000) + 4
        ip = npng.Iperf(False, seconds, extra=["--bidir"])
        time.sleep(1.5)
        cmd = ("i=0; while [ $i -lt %d ]; do echo %d > %s || exit 1; "
               "i=$((i+1)); done" % (a.traps, a.trap_ms, TRAP))
        tag = self.guest.start(cmd)
        sent = self.peer.send(20 * seconds * 25, gap_s=0.002,
                              until=time.monotonic() + seconds - 2)
        self.guest.finish(tag, "the traps", timeout=seconds + 60)
        load_ok = ip.wait(seconds + 30)
        ip.kill()
        self.peer.settle()
        after = self.stats()
        d = self.delta(before, after, "queued", "dropped", "delivered",
                       "dev_txq_dropped", "dev_napi_claims",
                       "dev_irq_handler_runs")
        answered = len(self.peer.answers) - answered0
        self.metrics["torture"] = dict(d, sent=sent, answered=answered,
                                       iperf_ok=load_ok,
                                       txq_len=after["dev_txq_len"])
        kgdboe.ksft_check(after["dev_txq_len"] == 0,
                          "dev_txq_len %s after the traps, want 0"
                          % after["dev_txq_len"])
        kgdboe.ksft_check(d["dropped"] == 0 and d["dev_txq_dropped"] == 0,
                          "dropped %(dropped)d, dev_txq_dropped "
                          "%(dev_txq_dropped)d, want 0" % d)
        kgdboe.ksft_check(answered == d["queued"],
                          "the host got %d answers, the client queued %d"
                          % (answered, d["queued"]))
        kgdboe.ksft_check(d["queued"] > 0 and load_ok,
                          "no answers queued (%d), or iperf3 failed: %s"
                          % (d["queued"], npng.one_line(ip.error(), 200)))
        # the generic poller ran the device's interrupt handlers
        generic = after.get("poll_how") == "generic"
        kgdboe.ksft_check(not generic or d["dev_irq_handler_runs"] > 0,
                          "poll_how generic, but dev_irq_handler_runs "
                          "%d, want > 0" % d["dev_irq_handler_runs"])
        after_echo = self.echoes_answered()
        return ("%d traps of %d ms under iperf3 --bidir (ran to its end): "
                "%d datagrams sent, %d delivered, %d queued, all %d "
                "answered, queue empty; %d echoes after; %d NAPI claims, %d "
                "handler runs" % (
                    a.traps, a.trap_ms, sent, d["delivered"],
                    d["queued"], answered, after_echo,
                    d["dev_napi_claims"], d["dev_irq_handler_runs"]))

    def bounded(self):
        self.guest.run("echo 2 > " + TXQ_MAX, timeout=20)
        try:
            before = self.stats()
            answered0 = len(self.peer.answers)
            cmd = "echo 2000 > " + TRAP
            tag = self.guest.start(cmd)
            time.sleep(0.7)
            sent = self.peer.send(300)
            self.guest.finish(tag, cmd, timeout=60)
            self.peer.settle()
            after = self.stats()
        finally:
            self.guest.run("echo %d > %s" % (TXQ_MAX_DEFAULT, TXQ_MAX),
                           timeout=20)
        d = self.delta(before, after, "queued", "dropped", "delivered",
                       "dev_txq_dropped", "dev_napi_claims",
                       "dev_irq_handler_runs")
        answered = len(self.peer.answers) - answered0
        self.metrics["bounded"] = dict(d, sent=sent, answered=answered)
        kgdboe.ksft_check(d["dev_txq_dropped"] > 0,
                          "nothing dropped with txq_max 2: %s" % d)
        kgdboe.ksft_check(d["dropped"] == d["dev_txq_dropped"],
                          "client dropped %(dropped)d, device "
                          "dev_txq_dropped %(dev_txq_dropped)d" % d)
        kgdboe.ksft_check(d["queued"] + d["dropped"] == d["delivered"],
                          "queued %(queued)d + dropped %(dropped)d != "
                          "delivered %(delivered)d" % d)
        kgdboe.ksft_check(answered == d["queued"],
                          "the host got %d answers, the client queued %d"
                          % (answered, d["queued"]))
        kgdboe.ksft_check(after["dev_txq_len"] == 0, "dev_txq_len %s"
                          % after["dev_txq_len"])
        after_echo = self.echoes_answered()
        return ("txq_max 2: %d sent in a 2 s trap, %d delivered, %d queued "
                "and answered, %d dropped and counted; %d echoes after" % (
                    sent, d["delivered"], d["queued"], d["dropped"],
                    after_echo))

    IPV6 = False    # the echo client on GUEST_IP6 (tests/netpoll_ipv6.py)

    def trap(self, ms):
        """Start one trap of ms (the client's debugfs file); the agent's
        tag, once the trap has surely begun."""
        tag = self.guest.start("echo %d > %s" % (ms, TRAP))
        time.sleep(0.7)
        return tag

    def connected_socket(self, port):
        """A UDP socket from the host to the guest's port, whose large
        datagrams the host fragments."""
        if self.IPV6:
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            s.bind((npng.HOST_IP6, 0))
            s.connect((npng.GUEST_IP6, port))
            return s
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT)
        s.bind((npng.HOST_IP, 0))
        s.connect((npng.GUEST_IP, port))
        return s

    def one_fragmented(self, trapped, port=npng.ECHO_PORT):
        """One fragmented datagram from a connected socket; what came
        back: "nothing", "an answer" or "ICMP (ECONNREFUSED)"."""
        s = self.connected_socket(port)
        try:
            tag = self.trap(2000) if trapped else None
            s.send(b"npng-frag " + b"x" * FRAGMENTED_SIZE)
            if tag:
                self.guest.finish(tag, "trap", timeout=60)
            time.sleep(1.0)
            s.setblocking(False)
            try:
                s.recv(65536)
                return "an answer"
            except ConnectionRefusedError:
                return "ICMP (ECONNREFUSED)"
            except BlockingIOError:
                return "nothing"
        finally:
            s.close()

    def fragments(self):
        before = self.stats()
        if "fragments" not in before:
            raise StepFailed("no fragments statistic")
        got = {w: self.one_fragmented(w) for w in (False, True)}
        after = self.stats()
        # the control: a port no client has is answered with ICMP, which
        # this detection sees
        closed = self.one_fragmented(False, CLOSED_PORT)
        kgdboe.ksft_check(closed == "ICMP (ECONNREFUSED)",
                          "port %d (no client): %s came back, want ICMP"
                          % (CLOSED_PORT, closed))
        d = self.delta(before, after, "fragments", "delivered",
                       "dev_trap_dropped")
        self.metrics["fragments"] = dict(d, came_back=list(got.values()))
        for trapped, what in got.items():
            kgdboe.ksft_check(what == "nothing", "%s: %s came back" % (
                "trapped" if trapped else "running", what))
        kgdboe.ksft_check(d["fragments"] == 2 and d["delivered"] == 0,
                          "fragments +%(fragments)d, delivered "
                          "+%(delivered)d, want +2 and +0" % d)
        after_echo = self.echoes_answered()
        return ("%d-byte datagrams, running and trapped: nothing came "
                "back, fragments +2 (trapped: %d later fragment(s) dropped "
                "with the frames for nobody); ICMP from a port nobody has; "
                "%d echoes after" % (
                    FRAGMENTED_SIZE, d["dev_trap_dropped"], after_echo))

    @staticmethod
    def sniffed(sniffer, until, parse):
        """parse() of every frame the sniffer sees before monotonic time
        until, where it is not None."""
        got = []
        while time.monotonic() < until:
            r, _, _ = select.select([sniffer], [], [],
                                    max(0, until - time.monotonic()))
            if not r:
                break
            parsed = parse(sniffer.recv(2048))
            if parsed is not None:
                got.append(parsed)
        return got

    @staticmethod
    def ethertype_sniffer(ethertype):
        """An AF_PACKET socket on tap0 for one ethertype."""
        sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                socket.htons(ethertype))
        sniffer.bind((npng.TAP, 0))
        return sniffer

    def arp_replies_to(self, sniffer, mac, until):
        """The guest's ARP replies to mac that the sniffer sees before
        monotonic time until: a list of their (op, ...) tuples."""
        def reply_to_mac(frame):
            a = npng.parse_arp_frame(frame)
            if a and a[0] == 2 and a[1] == npng.GUEST_MAC and a[3] == mac:
                return a
            return None
        return self.sniffed(sniffer, until, reply_to_mac)

    def arp(self):
        sniffer = self.ethertype_sniffer(npng.ETH_P_ARP)
        raw = npng.RawSender()
        before = self.stats()
        try:
            tag = self.guest.start("echo 3000 > " + TRAP)
            time.sleep(0.7)
            raw.send(npng.arp_frame(1, npng.OTHER_MAC, OTHER_HOST_IP,
                                    NOT_OURS_IP))
            raw.send(npng.arp_frame(1, npng.OTHER_MAC, OTHER_HOST_IP,
                                    npng.GUEST_IP))
            first = self.arp_replies_to(sniffer, npng.OTHER_MAC,
                                        time.monotonic() + 0.5)
            for _ in range(ARP_FLOOD):
                raw.send(npng.arp_frame(1, npng.OTHER_MAC, OTHER_HOST_IP,
                                        npng.GUEST_IP))
            flood = self.arp_replies_to(sniffer, npng.OTHER_MAC,
                                        time.monotonic() + 1.0)
            self.guest.finish(tag, "trap", timeout=60)
        finally:
            raw.close()
            sniffer.close()
        after = self.stats()
        d = self.delta(before, after, "arp_replies", "dev_arp_limited")
        self.metrics["arp"] = dict(d, first=len(first), flood=len(flood))
        kgdboe.ksft_check(len(first) == 1 and first[0][2] == npng.GUEST_IP,
                          "replies to the first two requests (one for our "
                          "address, one not): %s" % first)
        kgdboe.ksft_check(0 < len(flood) <= 2 * ARP_RATE,
                          "%d replies to a flood of %d, want 1 to %d" % (
                              len(flood), ARP_FLOOD, 2 * ARP_RATE))
        kgdboe.ksft_check(d["arp_replies"] == 1 + len(flood) and
                          d["arp_replies"] + d["dev_arp_limited"] ==
                          1 + ARP_FLOOD,
                          "arp_replies +%d, dev_arp_limited +%d; the host "
                          "saw %d replies of %d requests for our address" % (
                              d["arp_replies"], d["dev_arp_limited"],
                              1 + len(flood), 1 + ARP_FLOOD))
        return ("trapped: %s (not the peer) answered for %s, not for %s; "
                "a flood of %d: %d answered, %d counted as limited" % (
                    OTHER_HOST_IP, npng.GUEST_IP, NOT_OURS_IP, ARP_FLOOD,
                    len(flood), d["dev_arp_limited"]))

    def echo_exact(self, sock, size, timeout=1.0, tag=b""):
        """One echo of size bytes; True when the same bytes came back."""
        payload = (b"npng-jumbo %s %d " % (tag, size)).ljust(size, b"j")
        sock.send(payload)
        deadline = time.monotonic() + timeout
        # answers to earlier echoes (sent while the link came back up)
        # may still arrive: skip them
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if sock.recv(65536) == payload:
                    return True
            except (socket.timeout, ConnectionRefusedError):
                return False
        return False

    def connected_echo_socket(self):
        """A UDP socket from the host connected to the echo client's
        address (GUEST_IP6 with IPV6)."""
        family = socket.AF_INET6 if self.IPV6 else socket.AF_INET
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.bind((npng.HOST_IP6 if self.IPV6 else npng.HOST_IP, 0))
        s.connect((npng.GUEST_IP6 if self.IPV6 else npng.GUEST_IP,
                   npng.ECHO_PORT))
        return s

    def jumbo(self):
        before = self.stats()
        npng.sh("ip", "link", "set", npng.TAP, "mtu", str(JUMBO_MTU))
        self.guest.run("ip link set eth0 mtu %d" % JUMBO_MTU, timeout=20)
        sizes = jumbo_sizes(self.IPV6)
        s = self.connected_echo_socket()
        try:
            # e1000 resets for the new MTU: wait for its link
            deadline = time.monotonic() + 15
            while not self.echo_exact(s, 64) and \
                    time.monotonic() < deadline:
                pass
            running = {n: self.echo_exact(s, n, tag=b"r") for n in sizes}
            tag = self.guest.start("echo 3000 > " + TRAP)
            time.sleep(0.7)
            trapped = {n: self.echo_exact(s, n, tag=b"t")
                       for n in sizes[2:]}
            self.guest.finish(tag, "trap", timeout=60)
        finally:
            s.close()
            self.guest.run("ip link set eth0 mtu 1500", timeout=20)
            npng.sh("ip", "link", "set", npng.TAP, "mtu", "1500")
        after = self.stats()
        d = self.delta(before, after, "received", "delivered", "queued",
                       "too_big", "dropped", "malformed", "fragments")
        self.metrics["jumbo"] = {"running": running, "trapped": trapped,
                                 "client": d}
        bad = ["%d B %s" % (n, w) for w, d in (("running", running),
                                               ("trapped", trapped))
               for n, ok in d.items() if not ok]
        kgdboe.ksft_check(not bad, "not echoed at MTU %d: %s (echo client: "
                          "%s)" % (JUMBO_MTU, ", ".join(bad), d))
        return "MTU %d: %s bytes echoed running, %s trapped" % (
            JUMBO_MTU, "/".join(map(str, running)),
            "/".join(map(str, trapped)))

    def echo_link_up(self, sock, seconds=20):
        """Wait for the device to echo again (after a reset)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.echo_exact(sock, 64):
                return True
        return False

    def selftest(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((npng.HOST_IP, 0))
            s.connect((npng.GUEST_IP, npng.ECHO_PORT))
            tag = self.guest.start("ethtool -t eth0 offline")
            # echoes while the device is torn down and set up again
            during = sum(self.echo_exact(s, 64, timeout=0.05, tag=b"s")
                         for _ in range(40))
            rc, out = self.guest.finish(tag, "ethtool -t", timeout=120,
                                        check=False)
            results = selftest_results(out)
            # the interrupt test frees the IRQ and requests a test handler
            want = 4 if self.a.nic in QEMU_FAILS_INTERRUPT_TEST else 0
            kgdboe.ksft_check(results.get("Interrupt test (offline)") == want,
                              "ethtool -t eth0 offline: interrupt test, want "
                              "%d: rc %d: %s" % (want, rc,
                                                 npng.one_line(out, 300)))
            kgdboe.ksft_check(self.echo_link_up(s),
                              "no echo within 20 s of the self-test")
            before = self.stats()
            tag = self.guest.start("echo 3000 > " + TRAP)
            time.sleep(0.7)
            trapped = sum(self.echo_exact(s, 64, tag=b"t%d" % i)
                          for i in range(20))
            self.guest.finish(tag, "trap", timeout=60)
            after = self.stats()
        finally:
            s.close()
        kgdboe.ksft_check(trapped == 20, "%d of 20 trapped echoes answered "
                          "after the self-test" % trapped)
        runs = self.delta(before, after, "dev_irq_handler_runs")
        # the generic poller found the interrupt lines requested again
        if after.get("poll_how") == "generic":
            kgdboe.ksft_check(after["dev_irq_lines"] > 0 and
                              runs["dev_irq_handler_runs"] > 0,
                              "after the self-test: dev_irq_lines %s, "
                              "dev_irq_handler_runs +%d in the trap, "
                              "want both > 0" % (
                                  after["dev_irq_lines"],
                                  runs["dev_irq_handler_runs"]))
        after_echo = self.echoes_answered()
        self.metrics["selftest"] = {"during": during, "trapped": trapped,
                                    "results": results,
                                    "irq_lines": after.get("dev_irq_lines"),
                                    **runs}
        return ("offline self-test ran (%s); %d of 40 echoes answered "
                "during it; afterwards %d running, 20 of 20 trapped" % (
                    ", ".join("%s %d" % kv for kv in results.items()),
                    during, after_echo))

    CLIENT = "netpoll_echo"

    def echo_config(self, value):
        """Write the echo client's configuration: (rc, output)."""
        return self.guest.run("echo '%s' > %s" % (value, ECHO_CONFIG),
                              timeout=30, check=False)

    @staticmethod
    def tagged_echoes(peer, n, dst_ip=npng.VLAN_GUEST_IP, seconds=3.0,
                      ipv6=False):
        """n tagged datagrams to the echo port of dst_ip (IPv6: of
        VLAN_GUEST_IP6): how many different ones came back tagged within
        seconds."""
        for i in range(n):
            if ipv6:
                peer.send6(b"npng-vlan %d" % i, dport=npng.ECHO_PORT)
            else:
                peer.send(b"npng-vlan %d" % i, dst_ip=dst_ip,
                          dport=npng.ECHO_PORT)
            time.sleep(0.005)
        parse = npng.parse_udp6_frame if ipv6 else npng.parse_udp_frame
        got = set()
        for frame in peer.frames(seconds):
            udp = parse(frame)
            if udp and udp[1] == npng.ECHO_PORT and \
                    udp[4].startswith(b"npng-vlan "):
                got.add(udp[4])
            if len(got) == n:
                break
        return len(got)

    def vlan(self):
        self.guest.run(self.VLAN_UP, timeout=30)
        with kgdboe.VlanPeer() as peer:
            before = self.stats()["delivered"]
            wrong = self.tagged_echoes(peer, 5, dst_ip=npng.GUEST_IP,
                                       seconds=2.0)
            taken = self.stats()["delivered"] - before
            kgdboe.ksft_check(wrong == 0 and taken == 0,
                              "the client on eth0 took tagged datagrams: "
                              "%d answered, %d delivered" % (wrong, taken))
            rc, out = self.echo_config(npng.echo_config(vlan=True))
            kgdboe.ksft_check(rc == 0, "moving to %s: %s" % (
                npng.VLAN_DEV, npng.one_line(out, 200)))
            running = self.tagged_echoes(peer, 20)
            tag = self.trap(3000)
            trapped = self.tagged_echoes(peer, 20, seconds=2.0)
            self.guest.finish(tag, "trap", timeout=60)
        kgdboe.ksft_check(running == 20 and trapped == 20,
                          "on %s: %d of 20 echoes answered running, %d of "
                          "20 trapped" % (npng.VLAN_DEV, running, trapped))
        return ("tagged to eth0's address: not taken; on %s: 20 of 20 "
                "answered running, 20 of 20 trapped" % npng.VLAN_DEV)

    def config_reads(self):
        _, out = self.guest.run("cat " + ECHO_CONFIG, timeout=20)
        return out.strip()

    def back_on_eth0(self):
        """The client on eth0 over IPv4 again, the VLAN device gone."""
        self.echo_config(npng.echo_config())
        self.guest.run("ip link del " + npng.VLAN_DEV, timeout=40,
                       check=False)

    def vlan_gone(self):
        try:
            return self.vlan_gone_and_back()
        finally:
            self.back_on_eth0()

    def vlan_gone_and_back(self):
        g, vlan = self.guest, npng.VLAN_DEV
        seen = len(self.client_messages(0))
        t0 = time.monotonic()
        g.run("ip link del " + vlan, timeout=40)    # hangs if still held
        del_s = time.monotonic() - t0
        self.wait_message(seen, vlan + " went away: released")
        waiting = self.config_reads()
        kgdboe.ksft_check("waiting for " + vlan in waiting,
                          "config reads %r" % waiting)
        rc, out = self.echo_config("nonsense")
        now = self.config_reads()
        kgdboe.ksft_check(now == waiting, "a bad configuration (rc %d) "
                          "changed %r to %r" % (rc, waiting, now))
        kgdboe.ksft_check(rc and "Invalid argument" in out,
                          "a bad configuration: rc %d: %s" % (rc, out))
        seen = len(self.client_messages(0))
        g.run(self.VLAN_UP, timeout=30)
        self.wait_message(seen, "echoing UDP port %d on %s" % (
            npng.ECHO_PORT, vlan))
        with kgdboe.VlanPeer() as peer:
            back = self.tagged_echoes(peer, 20)
        kgdboe.ksft_check(back == 20, "resumed on %s: %d of 20 echoes "
                          "answered" % (vlan, back))
        rc, out = self.echo_config(npng.echo_config())
        kgdboe.ksft_check(rc == 0, "moving back to eth0: %s" % out)
        after = self.echoes_answered()
        return ("deleted in %.1f s, released and waiting; bad input "
                "refused (EINVAL), unchanged; added again: resumed, 20 of "
                "20 answered; back on eth0, %d echoes" % (del_s, after))

    VLAN_IP6_UP = ("ip link del %s 2>/dev/null; " % npng.VLAN_DEV +
                   kgdboe.Test.VLAN_UP + " && " +
                   npng.ip6_up(npng.VLAN_DEV, npng.VLAN_GUEST_IP6))

    def vlan_ipv6(self):
        self.guest.run(self.VLAN_IP6_UP, timeout=30)
        try:
            return self.vlan_ipv6_echoes()
        finally:
            self.back_on_eth0()

    def vlan_ipv6_echoes(self):
        with kgdboe.VlanPeer() as peer:
            rc, out = self.echo_config(npng.echo_config(ipv6=True,
                                                        vlan=True))
            kgdboe.ksft_check(rc == 0, "moving to %s over IPv6: %s" % (
                npng.VLAN_DEV, npng.one_line(out, 200)))
            running = self.tagged_echoes(peer, 20, ipv6=True)
            tag = self.trap(4000)
            trapped = self.tagged_echoes(peer, 20, seconds=1.5, ipv6=True)
            neighbour = peer.neighbour_answered(seconds=1.0)
            self.guest.finish(tag, "trap", timeout=60)
        kgdboe.ksft_check(running == 20 and trapped == 20 and neighbour,
                          "on %s over IPv6: %d of 20 echoes answered "
                          "running, %d of 20 trapped; a neighbour "
                          "solicitation while trapped %s" % (
                              npng.VLAN_DEV, running, trapped,
                              "answered" if neighbour else "not answered"))
        return ("on %s over IPv6: 20 of 20 answered running, 20 of 20 "
                "trapped, a solicitation from another host answered "
                "trapped" % npng.VLAN_DEV)

    # after boot, each a method of that name
    STEPS = ("torture", "bounded", "fragments", "arp", "jumbo", "selftest",
             "vlan", "vlan_gone", "vlan_ipv6", "splat")
    NEEDS = {"vlan_gone": "vlan"}

    def run(self):
        if not self.step("boot", self.boot):
            return
        for name in self.STEPS:
            self.step(name, getattr(self, name),
                      needs=self.NEEDS.get(name))

    def close(self):
        if getattr(self, "peer", None):
            self.peer.close()
        super().close()


def main(test_class=TrapQueueTest, trap_options=True):
    p = argparse.ArgumentParser(description=sys.modules[
        test_class.__module__].__doc__.split("\n")[0])
    kgdboe.guest_arguments(p)
    if trap_options:
        p.add_argument("--traps", type=int, default=100)
        p.add_argument("--trap-ms", type=int, default=30)
    p.add_argument("--without", default="",
                   help="comma-separated steps left out of the plan "
                   "(what the NIC has not: selftest needs ethtool's "
                   "offline self-test)")
    a = p.parse_args()
    # what tests/kgdboe.py's Test reads and this script does not vary
    a.port, a.foreign_ip, a.skip, a.load = npng.KGDBOE_PORT, None, "", False
    test = test_class(a)
    left_out = set(filter(None, a.without.split(",")))
    unknown = left_out - set(test.STEPS)
    if unknown:
        p.error("--without: no step %s" % ", ".join(sorted(unknown)))
    test.STEPS = tuple(s for s in test.STEPS if s not in left_out)
    return kgdboe.run_test(test, a)


if __name__ == "__main__":
    sys.exit(main())
