#!/usr/bin/env python3
"""netpoll's IPv6 receive, with the netpoll_echo client on IPv6.

Runs inside a network namespace that the caller created (as
tests/netpoll_core.py does).  The guest boots with
netpoll_echo=6600@GUEST_IP6/eth0,@HOST_IP6/<host MAC> (netconsole's
syntax); tap0 gets HOST_IP6/64, the guest's eth0 GUEST_IP6/64 (no
duplicate address detection on either side).

Steps, in order (each printed PASS/FAIL/SKIP with its time):
  boot        guest ready, the echo client registered on IPv6 (setup no
              longer refuses a receiving client over IPv6)
  echo        50 echoes over IPv6 answered while the kernel runs, each
              delivered by netpoll (the client's "delivered" +50)
  ndp         the host's neighbour entry for the guest flushed, then one
              trap of 3 s during which the host sends 20 echoes: the host
              must solicit the guest's address first, netpoll answers
              (ndp_replies +1 or more) and every echo is answered
  ndp_others  while trapped, raw solicitations from another host of the
              subnet (OTHER_MAC, OTHER_IP6): the one for the guest's
              address is answered to OTHER_MAC with the guest's MAC, the
              one for an address the guest does not have is not
  fragments   a 3000-byte datagram to the echo port (the host fragments
              it) while the kernel runs, then another while trapped: no
              answer, no ICMPv6 (the host's connected socket would get
              ECONNREFUSED), the client's "fragments" +1 each; the same
              to a port nobody has is answered with ICMPv6 (the detection
              works)
  malformed   raw IPv6 datagrams to the echo port with a bad UDP
              checksum, a zero one, and a payload length longer than the
              frame: none answered, "malformed" +3; then 50 echoes
  jumbo       as tests/netpoll_core.py's, over IPv6: MTU 9000 on the
              guest's eth0 and on tap0, echoes of 64 to 8952 bytes (the
              largest UDP payload of one 9000-byte IPv6 packet) answered
              byte for byte running, those of 4000 and 8952 trapped
  splat       no BUG/WARNING/Oops in the serial log

--out writes the steps and the metrics as JSON.
"""

import os
import struct
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
sys.path.insert(0, os.path.join(TOP, "tests"))
import npng  # noqa: E402
import kgdboe  # noqa: E402
import netpoll_core  # noqa: E402

NOT_OURS_IP6 = "fd00:2::99"     # an address the guest does not have
TRAP_MS = 3000


class Ipv6EchoTest(netpoll_core.TrapQueueTest):
    IPV6 = True

    def boot(self):
        self.guest = npng.Guest(
            self.a.nic, self.a.workdir, self.a.serial_log, self.a.kernel,
            self.a.initrd, cpus=self.a.cpus,
            extra_append=" ".join([npng.echo_arg(ipv6=True),
                                   self.a.append]))
        info = self.guest.wait_ready(self.a.boot_timeout)
        self.ipv6_up()
        self.peer = netpoll_core.EchoPeer(ipv6=True)
        self.stats()
        return "%d cpu(s), driver %s, echo client on %s" % (
            info["cpus"], info["driver"], npng.GUEST_IP6)

    def echo(self):
        before = self.stats()
        answered = self.echoes_answered()
        d = self.delta(before, self.stats(), "delivered", "malformed")
        self.metrics["echo"] = d
        kgdboe.ksft_check(d["delivered"] >= 50, "delivered +%d for 50 "
                          "echoes: the answers did not come from netpoll"
                          % d["delivered"])
        return "%d echoes answered, delivered +%d" % (answered,
                                                       d["delivered"])

    def ndp(self):
        npng.sh("ip", "-6", "neigh", "flush", "dev", npng.TAP)
        before = self.stats()
        first = self.peer.seq + 1
        tag = self.trap(TRAP_MS)
        self.peer.send(20, gap_s=0.05)
        self.guest.finish(tag, "trap", timeout=60)
        self.peer.settle()
        d = self.delta(before, self.stats(), "ndp_replies", "delivered")
        self.metrics["ndp"] = d
        missing = [s for s in range(first, first + 20)
                   if s not in self.peer.answers]
        kgdboe.ksft_check(not missing, "%d of 20 echoes sent while trapped "
                          "unanswered (ndp_replies +%d): %s" % (
                              len(missing), d["ndp_replies"], missing[:10]))
        kgdboe.ksft_check(d["ndp_replies"] >= 1, "ndp_replies +%d while "
                          "trapped, want at least 1" % d["ndp_replies"])
        return "neighbour flushed, trapped: %d solicitation(s) answered, "\
            "20 echoes answered" % d["ndp_replies"]

    def advertisements_to(self, sniffer, mac, until):
        """(dst MAC, target, link-layer address) of every advertisement
        to mac that the sniffer sees before monotonic time until."""
        def to_mac(frame):
            na = npng.parse_na_frame(frame)
            return na if na and na[0] == mac else None
        return self.sniffed(sniffer, until, to_mac)

    def ndp_others(self):
        sniffer = self.ethertype_sniffer(npng.ETH_P_IPV6)
        raw = npng.RawSender()
        try:
            tag = self.trap(2000)
            for target in (npng.GUEST_IP6, NOT_OURS_IP6):
                raw.send(npng.ns_frame(npng.OTHER_MAC, npng.OTHER_IP6,
                                       target))
            got = self.advertisements_to(sniffer, npng.OTHER_MAC,
                                         time.monotonic() + 1.0)
            self.guest.finish(tag, "trap", timeout=60)
        finally:
            sniffer.close()
            raw.close()
        self.metrics["ndp_others"] = got
        want = (npng.OTHER_MAC, npng.GUEST_IP6, npng.GUEST_MAC)
        kgdboe.ksft_check(got == [want], "advertisements to %s while "
                          "trapped: %s, want %s" % (npng.OTHER_MAC, got,
                                                    [want]))
        return "for %s: answered with %s; for %s: none" % (
            npng.GUEST_IP6, npng.GUEST_MAC, NOT_OURS_IP6)

    def malformed(self):
        before = self.stats()
        good = npng.udp6_frame(b"npng-bad 1", sport=npng.ECHO_HOST_PORT)
        bad_csum = bytearray(good)
        bad_csum[-1] ^= 1                           # payload changed
        zero_csum = bytearray(good)
        zero_csum[14 + 40 + 6:14 + 40 + 8] = b"\0\0"
        long_plen = bytearray(good)
        plen = struct.unpack_from("!H", good, 14 + 4)[0]
        struct.pack_into("!H", long_plen, 14 + 4, plen + 100)
        raw = npng.RawSender()
        try:
            for frame in (bad_csum, zero_csum, long_plen):
                raw.send(bytes(frame))
        finally:
            raw.close()
        time.sleep(1.0)
        d = self.delta(before, self.stats(), "malformed", "delivered")
        self.metrics["malformed"] = d
        kgdboe.ksft_check((d["malformed"], d["delivered"]) == (3, 0),
                          "malformed +%(malformed)d, delivered "
                          "+%(delivered)d for 3 bad datagrams, want +3 "
                          "and +0" % d)
        after = self.echoes_answered()
        return "bad checksum, zero checksum, long payload length: " \
            "malformed +3, none delivered; %d echoes after" % after

    STEPS = ("echo", "ndp", "ndp_others", "fragments", "malformed",
             "jumbo", "splat")


if __name__ == "__main__":
    sys.exit(netpoll_core.main(Ipv6EchoTest, trap_options=False))
