#!/usr/bin/env python3
"""kgdboe on a lossy network, with and without its key, and against an
attacker on the LAN.

Runs inside a network namespace that the caller created (as
tests/kgdboe.py does).  One guest boot; gdb reaches it through
matrix/relay.py, a seeded user-space relay that drops, duplicates and
reorders datagrams in both directions ("loss p": drop p, duplicate p/2,
reorder p/2, each way; plain mode is also run with drops only).  A full
session is: attach, bt, 64 KiB read and
compared with vmlinux, breakpoint, step, continue, detach.

Steps, in order (each printed PASS/FAIL/SKIP with its time):
  boot            guest ready, kgdboe registered in plain mode
  spoof_mac       plain mode: "$?" and 0x03 with the peer's IP from another
                  MAC get no answer and do not stop the kernel (counted
                  foreign)
  plain_<p>       a full plain-mode session (gdb's target remote udp:)
                  through the relay at loss p, for each --plain-losses
  key             a random key written to kgdboe's write-only key
                  parameter: authenticated mode, the key does not read back
  plain_refused   gdb's plain protocol no longer stops the machine
  auth_<p>        a full session through build/kgdboe-bridge and the relay
                  at loss p, for each --auth-losses
  attack_spoof    (--attack) the peer's IP and MAC, plain "$?" and 0x03:
                  no answer, no stop
  attack_write    the same with "$M" on init_uts_ns.name.release, then
                  "$c": uname -r is unchanged
  attack_replay   every DATA datagram the first authenticated session sent,
                  again: no answer, no stop, counted stale or duplicate
  attack_flood    10,000 forged datagrams from the peer's IP and MAC:
                  counted as refused, netconsole heartbeats go on
  auth_after      a full session at loss 0 still works
  auth_ipv6       (--auth-ipv6) kgdboe set to IPv6 addresses, key kept:
                  a full session through build/kgdboe-bridge and the
                  relay, which reaches [GUEST_IP6]:PORT from HOST_IP6, at
                  the last --auth-losses rate (drop p, duplicate and
                  reorder p/2), then kgdboe set back to IPv4
  splat           no BUG/WARNING/Oops in the serial log

With --lockdown, one step only:
  lockdown        booted with lockdown=integrity, kgdboe refuses its
                  configuration at boot and through sysfs (EPERM)

--out writes the steps and metrics as JSON (session_s per session, the
relay's and the bridge's counters, kgdboe's statistics).
"""

import argparse
import os
import re
import secrets
import socket
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
sys.path.insert(0, os.path.join(TOP, "tests"))
import npng  # noqa: E402
import kgdboe  # noqa: E402
from kgdboe import StepFailed, gdb_packet  # noqa: E402
from relay import LossyRelay  # noqa: E402

FLOOD = npng.FLOOD
AUTH_OVERHEAD = 24 + 32     # netpoll's authenticated header and tag
# netconsole heartbeats logged during the flood, and how many must reach
# the host: a named tolerance.  netconsole is UDP and resends nothing, and
# the heartbeats share the tap with 10,000 frames in about 2 s; the check
# is that the kernel keeps logging under the flood, not that plain
# netconsole delivers every line.
HEARTBEATS = 40
HEARTBEATS_MIN = 35


def loss_name(p):
    return "%d" % round(p * 100)


class LossyTest(kgdboe.Test):
    """The steps above; the session steps are tests/kgdboe.py's."""

    def __init__(self, a):
        super().__init__(a)
        self.key_file = os.path.join(a.workdir, "kgdboe.key")
        self.stats_file = os.path.join(a.workdir, "bridge.stats")
        self.relay = None
        self.first_capture = None
        self.mode = "plain"

    # -- the path gdb takes ---------------------------------------------

    def remote_target(self):
        host, port = self.relay.listen
        if self.mode == "plain":
            return "udp:%s:%d" % (host, port)
        return "| %s --key-file %s --stats-file %s %s:%d" % (
            npng.BRIDGE, self.key_file, self.stats_file, host, port)

    def session(self, faults, seed, ipv6=False):
        """One full session through a relay with `faults` (to the guest's
        IPv6 address with ipv6); its metrics."""
        t0 = time.monotonic()
        guest, host = (npng.GUEST_IP6, npng.HOST_IP6) if ipv6 else \
            (npng.GUEST_IP, npng.HOST_IP)
        with LossyRelay(("127.0.0.1", 0), (guest, npng.KGDBOE_PORT),
                        seed=seed, source=(host, 0),
                        **faults) as self.relay:
            try:
                self.full_session()
            finally:
                self.attached = False
                self.gdb.close()
        if self.mode == "auth" and self.first_capture is None:
            self.first_capture = list(self.relay.captured)
        m = {"session_s": round(time.monotonic() - t0, 2),
             "relay": self.relay.counters(),
             "dump_kib_s": self.metrics.get("dump_kib_s")}
        bridge = self.bridge_summary()
        if bridge:
            m["bridge"] = bridge
        return m

    def full_session(self):
        self.attach()
        self.backtrace()
        self.gdb.cli("set remote memory-read-packet-size 500")
        self.gdb.cli("set remote memory-read-packet-size fixed")
        self.dump64k()
        self.breakpoint()
        self.step_step()
        self.delete_cont()
        self.interrupt()
        self.detach()

    def bridge_summary(self):
        """The bridge's exit line (--stats-file: gdb stops reading its
        stderr when it closes the connection)."""
        for _ in range(30):
            if os.path.exists(self.stats_file):
                with open(self.stats_file) as f:
                    line = f.read().strip()
                os.unlink(self.stats_file)
                return line
            time.sleep(0.1)
        return None

    def session_step(self, name, faults, seed):
        def fn():
            m = self.session(faults, seed)
            self.metrics[name] = m
            r = m["relay"]
            return "%.1f s, 64 KiB at %s KiB/s; relay dropped %d+%d, " \
                "duplicated %d+%d, reordered %d+%d" % (
                    m["session_s"], m["dump_kib_s"],
                    r["to_target"]["dropped"], r["to_client"]["dropped"],
                    r["to_target"]["duplicated"],
                    r["to_client"]["duplicated"],
                    r["to_target"]["reordered"], r["to_client"]["reordered"])
        return fn

    # -- guest state -------------------------------------------------------

    def kgdboe_stats(self):
        _, out = self.guest.run("cat /sys/kernel/debug/kgdboe/stats",
                                timeout=20)
        return npng.parse_kv(out)

    def still_running(self, what):
        """The kernel was not stopped: its agent answers at once."""
        try:
            self.guest.run("echo alive", timeout=5)
        except npng.HarnessError:
            raise StepFailed("%s stopped the kernel" % what)

    def no_answer(self, sock, what, secs=1.5):
        sock.settimeout(secs)
        try:
            d = sock.recv(2048)
            raise StepFailed("%s was answered: %r" % (what, d[:40]))
        except socket.timeout:
            pass

    # -- steps -------------------------------------------------------------

    def spoof_mac(self):
        before = self.np_stats()
        raw = npng.RawSender()
        try:
            for body in (gdb_packet(b"?"), b"\x03"):
                raw.send(npng.udp_frame(body, src_mac=npng.OTHER_MAC))
        finally:
            raw.close()
        time.sleep(1.0)
        self.still_running("the peer's IP from another MAC")
        d = self.np_stats().get("foreign", 0) - before.get("foreign", 0)
        kgdboe.ksft_check(d == 2, "foreign +%d, want +2 (the two spoofed "
                          "datagrams)" % d)
        return "refused, counted foreign (+%d)" % d

    def set_key(self):
        key = secrets.token_hex(32)
        with open(self.key_file, "w") as f:
            f.write(key + "\n")
        rc, out = self.sysfs_key(key)
        if rc:
            raise StepFailed("key refused: %s" % out.strip())
        _, dm = self.guest.run("dmesg | grep 'kgdboe: gdb:' | tail -n 1",
                               timeout=20)
        if "authenticated" not in dm:
            raise StepFailed("not in authenticated mode: %s" % dm.strip())
        rc, out = self.guest.run("cat /sys/module/kgdboe/parameters/key",
                                 timeout=20, check=False)
        if key in out:
            raise StepFailed("the key reads back")
        for bad in ("abc", "00" * 8, "zz" * 20):
            rc, _ = self.sysfs_key(bad)
            if rc == 0:
                raise StepFailed("bad key %r accepted" % bad)
        self.mode = "auth"
        return "authenticated mode; not readable; 3 bad keys refused"

    def sysfs_key(self, value):
        return self.guest.run("echo %s > /sys/module/kgdboe/parameters/key"
                              % value, timeout=30, check=False)

    def plain_refused(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.connect((npng.GUEST_IP, npng.KGDBOE_PORT))
            s.send(gdb_packet(b"qSupported"))
            s.send(b"\x03")
            self.no_answer(s, "a plain packet")
        finally:
            s.close()
        self.still_running("a plain packet")
        return "no answer, no stop"

    def attack_spoof(self):
        before = self.kgdboe_stats()
        raw = npng.RawSender()
        try:
            for body in (gdb_packet(b"?"), b"\x03"):
                raw.send(npng.udp_frame(body))
        finally:
            raw.close()
        time.sleep(1.0)
        self.still_running("a spoofed plain packet")
        d = self.kgdboe_stats()["auth_refused"] - before["auth_refused"]
        kgdboe.ksft_check(d == 2, "auth_refused +%d, want +2" % d)
        return "no stop, refused +%d" % d

    def attack_write(self):
        addr = self.symbol_expr("&init_uts_ns.name.release")
        _, before = self.guest.run("uname -r", timeout=20)
        raw = npng.RawSender()
        try:
            raw.send(npng.udp_frame(gdb_packet(b"M%x,4:41414141" % addr)))
            raw.send(npng.udp_frame(gdb_packet(b"c")))
        finally:
            raw.close()
        time.sleep(1.0)
        self.still_running("a spoofed memory write")
        _, after = self.guest.run("uname -r", timeout=20)
        if after != before:
            raise StepFailed("uname -r changed: %r -> %r" % (before, after))
        return "release still %s" % after.strip()

    def attack_replay(self):
        data = [d for d in self.first_capture or []
                if len(d) > 5 and d[:4] == b"NPA1" and d[5] == 3]
        if not data:
            raise StepFailed("nothing captured from the first session")
        before = self.kgdboe_stats()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((npng.HOST_IP, 0))
            s.connect((npng.GUEST_IP, npng.KGDBOE_PORT))
            for d in data:
                s.send(d)
                time.sleep(0.001)
            self.no_answer(s, "a replayed datagram")
        finally:
            s.close()
        self.still_running("a replay")
        after = self.kgdboe_stats()
        d = sum(after[k] - before[k] for k in ("auth_stale", "auth_dups",
                                                "auth_refused"))
        # every one with a payload must be counted; an ack-only one that
        # repeats the newest ack changes nothing and may pass uncounted
        payload = sum(1 for x in data if len(x) > AUTH_OVERHEAD)
        kgdboe.ksft_check(d >= payload, "%d of %d replays counted, %d with "
                          "a payload" % (d, len(data), payload))
        return "%d DATA datagrams replayed (%d with a payload): no answer, " \
            "%d counted" % (len(data), payload, d)

    def attack_flood(self):
        before = self.kgdboe_stats()
        np_before = self.np_stats()
        nc = npng.NcReceiver(port=npng.NC_PORT)
        try:
            tag = self.guest.start(
                "for i in $(seq 1 %d); do echo \"npng hb $i\" > /dev/kmsg;"
                " sleep 0.25; done" % HEARTBEATS)
            raw = npng.RawSender()
            t0 = time.monotonic()
            try:
                for i in range(FLOOD):
                    raw.send(npng.udp_frame(b"NPA1\x01\x03\x00\x00" +
                                            secrets.token_bytes(48),
                                            sport=40000 + i % 1000))
                    if i % 10 == 9:
                        # ~5000/s: what an emulated NIC takes in
                        time.sleep(0.002)
            finally:
                raw.close()
            secs = time.monotonic() - t0
            self.guest.finish(tag, "heartbeats", timeout=60)
            recs = nc.wait_burst("hb", HEARTBEATS, quiet=3.0, limit=20.0)
        finally:
            nc.close()
        self.still_running("the flood")
        d = self.kgdboe_stats()["auth_refused"] - before["auth_refused"]
        arrived = self.np_stats()["received"] - np_before["received"]
        self.metrics.update(flood_sent=FLOOD, flood_arrived=arrived,
                            flood_refused=d, flood_heartbeats=len(recs))
        # what the NIC dropped never reached netpoll; all that did counts
        kgdboe.ksft_check(d == arrived, "refused +%d, but %d arrived"
                          % (d, arrived))
        kgdboe.ksft_check(arrived >= npng.FLOOD_MIN_ARRIVED,
                          "%d of %d reached the guest, want at least %d "
                          "(npng.FLOOD_MIN_ARRIVED: what an emulated NIC "
                          "may drop)" % (arrived, FLOOD,
                                         npng.FLOOD_MIN_ARRIVED))
        kgdboe.ksft_check(len(recs) >= HEARTBEATS_MIN,
                          "%d of %d heartbeats, want at least %d (plain "
                          "netconsole resends nothing)" % (
                              len(recs), HEARTBEATS, HEARTBEATS_MIN))
        return "%d forged in %.1f s: %d reached kgdboe, %d refused; %d of " \
            "%d heartbeats" % (FLOOD, secs, arrived, d, len(recs),
                               HEARTBEATS)

    def auth_ipv6(self):
        self.ipv6_up()
        rc, out = self.sysfs_write(self.IPV6_CONFIG)
        if rc:
            raise StepFailed("kgdboe on IPv6 refused: %s" % out.strip())
        mode = self.kgdboe_stats().get("mode")
        if mode != "authenticated":
            raise StepFailed("mode %s after the IPv6 configuration, want "
                             "authenticated (the key must stay)" % mode)
        p = self.a.auth_losses[-1]
        try:
            m = self.session(mixed(p), self.a.seed + 300, ipv6=True)
        finally:
            self.sysfs_set()
        self.metrics["auth_ipv6"] = m
        r = m["relay"]
        return "full authenticated session to %s through the relay at " \
            "%s%% loss in %s s (dropped %d+%d); kgdboe back on IPv4" % (
                npng.host_port(npng.GUEST_IP6, npng.KGDBOE_PORT),
                loss_name(p), m["session_s"], r["to_target"]["dropped"],
                r["to_client"]["dropped"])

    def symbol_expr(self, expr):
        out = subprocess.run(["gdb", "-batch", "-nx", "-ex", "p/x " + expr,
                              self.a.vmlinux], capture_output=True,
                             text=True, timeout=60).stdout
        m = re.search(r"= (0x[0-9a-f]+)", out)
        if not m:
            raise StepFailed("gdb cannot evaluate %s" % expr)
        return int(m.group(1), 16)

    def counters(self):
        st = self.kgdboe_stats()
        self.metrics["kgdboe_stats"] = st
        return " ".join("%s=%s" % kv for kv in st.items() if kv[1])

    def lockdown(self):
        """Booted with lockdown=integrity: kgdb writes kernel memory, so
        kgdboe refuses to be configured, at boot and through sysfs."""
        self.guest = npng.Guest(
            self.a.nic, self.a.workdir, self.a.serial_log, self.a.kernel,
            self.a.initrd, extra_append=npng.kgdboe_arg() +
            " lockdown=integrity")
        self.guest.wait_ready(self.a.boot_timeout)
        log = open(self.a.serial_log, errors="replace").read()
        kgdboe.ksft_check("Kernel is locked down from" in log,
                          "the kernel did not lock itself down")
        kgdboe.ksft_check("kgdboe: refused: the kernel is locked down" in log,
                          "no refusal at boot: " + " | ".join(
                              l for l in log.splitlines() if "kgdboe" in l))
        kgdboe.ksft_check("Registered I/O driver kgdboe" not in log,
                          "kgdboe registered on a locked-down kernel")
        rc, out = self.sysfs_write(self.config)
        kgdboe.ksft_check(rc != 0 and "not permitted" in out,
                          "sysfs write: rc %d %r" % (rc, out))
        return "refused at boot and through sysfs (%s)" % npng.one_line(
            out, 60)

    def run(self):
        self.find_kernel_addresses()
        if self.a.lockdown:
            self.step("lockdown", self.lockdown)
            return
        if not self.step("boot", self.boot):
            return
        self.step("spoof_mac", self.spoof_mac)
        for i, p in enumerate(self.a.plain_losses):
            name = "plain_%s" % loss_name(p)
            self.step(name, self.session_step(name, dict(drop=p),
                                              self.a.seed + i))
        for i, p in enumerate(self.a.plain_mixed):
            name = "plain_mixed_%s" % loss_name(p)
            self.step(name, self.session_step(name, mixed(p),
                                              self.a.seed + 50 + i))
        if not self.a.auth_losses:
            self.step("splat", self.splat)
            return
        if not self.step("key", self.set_key):
            return
        if self.a.load and not self.step("load", self.start_load):
            return
        self.step("plain_refused", self.plain_refused)
        for i, p in enumerate(self.a.auth_losses):
            self.step("auth_%s" % loss_name(p),
                      self.session_step("auth_%s" % loss_name(p), mixed(p),
                                        self.a.seed + 100 + i))
        if self.a.attack:
            self.step("attack_spoof", self.attack_spoof)
            self.step("attack_write", self.attack_write)
            self.step("attack_replay", self.attack_replay)
            self.step("attack_flood", self.attack_flood)
            self.step("auth_after", self.session_step("auth_after", {},
                                                      self.a.seed + 200))
        if self.a.auth_ipv6:
            self.step("auth_ipv6", self.auth_ipv6)
        self.step("counters", self.counters)
        self.step("splat", self.splat)


def mixed(p):
    """"loss p" for authenticated mode: drop p, duplicate and reorder
    p/2 each."""
    return dict(drop=p, dup=p / 2, reorder=p / 2)


def losses(text):
    return [float(x) for x in text.split(",") if x != ""]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    kgdboe.guest_arguments(p)
    p.add_argument("--plain-losses", type=losses, default=[],
                   help="comma-separated drop rates for plain sessions")
    p.add_argument("--plain-mixed", type=losses, default=[],
                   help="plain sessions with drop p, duplicate and reorder "
                   "p/2")
    p.add_argument("--auth-losses", type=losses, default=[0.0, 0.05, 0.10],
                   help="comma-separated loss rates for authenticated ones")
    p.add_argument("--attack", action="store_true")
    p.add_argument("--auth-ipv6", action="store_true",
                   help="an authenticated session over IPv6 at the end")
    p.add_argument("--lockdown", action="store_true",
                   help="only: boot locked down, kgdboe must refuse")
    p.add_argument("--load", action="store_true",
                   help="iperf3 guest->host during the authenticated "
                   "sessions")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    # what tests/kgdboe.py's Test reads and this test does not vary
    a.port, a.foreign_ip, a.reads, a.skip = npng.KGDBOE_PORT, None, 0, ""

    return kgdboe.run_test(LossyTest(a), a)


if __name__ == "__main__":
    sys.exit(main())
