#!/usr/bin/env python3
"""kgdboe end to end: boot a guest and debug it with gdb over UDP.

Runs inside a network namespace that the caller created, with tap0 at
192.0.2.1/24 (as matrix/cell.py runs inside the namespace of
matrix/run.py).  Boots the guest with kgdboe, drives the host's gdb
non-interactively through its machine interface (--interpreter=mi2, no
terminal, no user) and prints one line per step, PASS or FAIL, with its
timing, then a summary; --out also writes them as JSON.  The exit status
is 0 only when every step passed.

Steps:
  boot          guest ready, kgdboe registered (serial log)
  sysfs_bad     malformed kgdboe strings, and one without the peer's MAC,
                are refused by the sysfs parameter
  sysfs_nodev   a device that does not exist is refused (ENODEV)
  sysfs_defaults  "@/,@HOST/MAC": port 6443, eth0 and eth0's address
  sysfs_set     the good string set again at run time, kgdboe registered
  foreign       a datagram from --foreign-ip (another address on tap0) gets
                no answer, no ICMP, and does not stop the kernel
  attach        target remote udp:GUEST:PORT (attach_ms)
  registers     info registers shows eip
  backtrace     bt shows frame #0
  release       print init_uts_ns.name.release == the guest's uname -r
  reads         --reads x print jiffies (read_ms_median, read_ms_p90)
  dump64k       dump binary memory of the first 64 KiB of .rodata
                (dump_kib_s), equal to vmlinux's byte for byte (read-only
                data: unlike text, nothing patches it at boot)
  dump64k_500   the next 64 KiB with 500-byte memory packets instead of gdb's
                default 64 (dump500_kib_s), equal to vmlinux's too
  breakpoint    break ksys_sync, continue, `sync` in the guest stops there
                (cont_to_bp_ms: from the guest command to the stop)
  step          next, then stepi; a timeout says what kgdb stepped over
  delete_cont   delete, continue, the guest's sync completes
  locked_stops  (--locked-stops) a breakpoint in each of LOCKED_STOPS, code
                that runs with a lock held that netpoll and the driver must
                never take in the stop (irq_desc, workqueue pool, timer and
                hrtimer bases, slab node list, page allocator zone): each
                is hit under the load and a churn of tmpfs directories
                outside the network path, and while stopped there gdb reads
                memory, deletes the breakpoint and continues
  finishes      (--finishes N) with a `sync` loop in the guest, N times:
                continue to ksys_sync, then `finish`, whose breakpoint at
                the return address is hit once: kgdb must not step over
                it (a finish that gives no stop in FINISH_S fails, with
                what kgdb stepped over meanwhile)
  interrupt     gdb's interrupt (0x03) stops the running kernel (intr_ms)
  detach        detach; the guest answers its control agent again
  foreign_after the foreign check again, after the session
  counters      netpoll's kgdboe statistics over the session: at least one
                datagram delivered per read, nothing dropped, and the ARP
                request the host sent while the guest was stopped (release
                flushes the host's neighbour entry first) answered
  duplicates    a raw client sends every gdb packet twice, and a stale ack:
                the stub answers each once, detaches, the guest lives
  unregister    an empty string unregisters kgdboe; kgdboe registers again
  takeover      kgdboc replaces kgdboe through its sysfs parameter (kgdboe's
                parameter then reads empty); once kgdboc is unregistered,
                kgdboe registers again (kgdboc has no deinit: kgdb lets
                nothing replace it)
  device_gone   kgdboe set up on a VLAN device (eth0.100), which is then
                deleted: the deletion returns (it hung while netpoll held
                the device), kgdboe says it released it; the VLAN added
                again: kgdboe says it resumed and is registered on it;
                deleted once more, and kgdboe set back on eth0
  vlan_session  a tagged "?" to kgdboe on eth0 gets nothing; then kgdboe
                on eth0.100, spoken to with 802.1Q-tagged frames (raw,
                from tap0; the host has no VLAN device): "?" breaks
                in and is answered, tagged, while the kernel runs; stopped,
                a tagged ARP request for the VLAN address from another host
                is answered, tagged, and "g" and "D" are answered; the guest
                runs afterwards.  Like gdb, the peer sends a request again
                every 2 s until it is acked, and says how often it did
  ipv6_session  kgdboe set to IPv6 addresses (GUEST_IP6 on eth0, gdb on
                tap0's HOST_IP6): gdb attaches with udp:[GUEST_IP6]:PORT,
                reads the registers, and, stopped, after the host's
                neighbour entry is flushed (netpoll must answer the
                solicitation), reads init_uts_ns.name.release; detaches;
                the guest runs; kgdboe back on IPv4
  stacked_refused  kgdboe on a bridge (br1) and on an active-backup bond
                (bond1) is refused, with netpoll's message naming the
                device (a client there would never receive)
  reattach      gdb attaches and detaches once more
  splat         no BUG/WARNING/Oops in the serial log

With --oops (the debug kernel: lkdtm) the session is another one: boot;
load; oops: lkdtm's EXCEPTION makes the kernel oops with no debugger
attached, and kgdb stops it (the guest no longer answers); attach: gdb
attaches to the stopped kernel; oops_frame: its backtrace is lkdtm's;
registers, release (ARP answered while stopped) and reads as above;
oops_splats: the oops is the only report in the serial log.  lockdep is
off from the oops on (oops_enter()), so this finds hangs and the other
checks' reports, not lock misuse.

With --load, iperf3 loads the NIC guest->host from before attach to the
end (step load), and step load_alive checks at the end that iperf3 still
moves data and that netconsole still logs (a line written to /dev/kmsg
arrives at the host).

--port sets the port gdb is pointed at: a wrong one must make attach (and
the steps after it) fail.
"""

import argparse
import json
import os
import queue
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
import npng  # noqa: E402
from npng import HarnessError  # noqa: E402

PORT = npng.KGDBOE_PORT

# --locked-stops: functions entered with a lock held, and an expression
# printed at the stop (or None).  A stop there leaves that lock held by the
# stopped CPU; whatever the stop path takes plainly, or allocates, hangs or
# is reported by lockdep.  The guest runs each many times a second under
# iperf3 load.
LOCKED_STOPS = (
    ("handle_irq_event", "the line's irq_desc lock", "desc->irq_data.irq"),
    ("kick_pool", "a workqueue pool's lock", None),
    ("enqueue_timer", "a timer base's lock", None),
    ("enqueue_hrtimer", "an hrtimer base's lock", None),
    ("add_partial", "a slab node's list_lock", None),
    ("__free_one_page", "a zone's lock (page allocator)", None),
)
LOCKED_READS = 20


def guest_loop(body, stop, loops, seconds, count_file=None):
    """A shell command that starts `body` in a bounded background loop in
    the guest: at most `loops` rounds and `seconds`, ended early by
    touching `stop`; with `count_file`, the rounds made are written there
    at the end."""
    tail = "; echo $i > %s" % count_file if count_file else ""
    return ("rm -f %(stop)s%(count)s; timeout %(secs)d sh -c 'i=0; "
            "while [ $i -lt %(loops)d ] && [ ! -e %(stop)s ]; do %(body)s; "
            "i=$((i+1)); done%(tail)s' >/dev/null 2>&1 &" % {
                "stop": stop, "count": " " + count_file if count_file else "",
                "secs": seconds, "loops": loops, "body": body, "tail": tail})


# A bounded churn in the guest while locked_stops waits, outside the
# network path.  kgdb steps over a hit on a CPU inside the device, or while
# another CPU stays there (kgdboe_out_of_reach()); under iperf3 load with 2
# CPUs on rtl8139 nearly every add_partial() came from there (154 hits in
# 30 s, all stepped over: fresh-clone CI of 2026-12-05).  These kernels
# are SLUB_TINY: no per-CPU slabs, and add_partial() is called only for a
# new slab with objects to spare or a free into a full one; a node keeps
# some empty slabs (min_partial), so a round must outgrow them.  Each round
# fills a tmpfs directory with LOCKED_CHURN_FILES empty files and removes
# it: their inodes and dentries take new slabs, fill them and empty them
# (64 files a round gave 4 hits in 30 s: too few).  Shell builtins only
# inside the round: a fork and exec per file (mkdir) was so slow here that
# a round of 300 took most of the 30 s.  The loop ends at
# LOCKED_CHURN_LOOPS, after LOCKED_CHURN_S, or when the step touches its
# stop file, and then writes how many rounds it made (metric
# locked_churn_loops).
LOCKED_CHURN_LOOPS = 20000
LOCKED_CHURN_FILES = 512
LOCKED_CHURN_S = 300
LOCKED_CHURN_STOP = "/tmp/locked-churn.stop"
LOCKED_CHURN_COUNT = "/tmp/locked-churn.count"
LOCKED_CHURN_DIR = "/tmp/locked-churn"
LOCKED_CHURN = guest_loop(
    "mkdir -p %(dir)s; j=0; while [ $j -lt %(files)d ]; do : > %(dir)s/$j; "
    "j=$((j+1)); done; rm -r %(dir)s" % {"dir": LOCKED_CHURN_DIR,
                                         "files": LOCKED_CHURN_FILES},
    LOCKED_CHURN_STOP, LOCKED_CHURN_LOOPS, LOCKED_CHURN_S,
    LOCKED_CHURN_COUNT)
# --finishes: a bounded `sync` loop in the guest, ended by the step;
# FINISH_S: how long a `finish` may take to stop
SYNC_LOOP_STOP = "/tmp/sync-loop.stop"
SYNC_LOOP = guest_loop("sync", SYNC_LOOP_STOP, 20000, 600)
FINISH_S = 15
# gdb sends its interrupt (0x03) once, in one datagram, and waits.  Under
# iperf3 load rtl8139's receive ring overflows now and then (QEMU counts
# the frames in rx_missed_errors: 5790 and 9415 in two 33 s waits on
# 2026-12-06, while the kernel ran on and netpoll received nothing), and
# the interrupt can be one of them.  A user presses Ctrl-C again: so does
# break_in(), once, after INTERRUPT_RESEND_S, and only when the counters
# show exactly that; it is counted (metric interrupts_resent) and printed.
INTERRUPT_RESEND_S = 5
KGDBOE_STATS = "/sys/kernel/debug/kgdboe/stats"
NP_STATS = "/sys/kernel/debug/netpoll/kgdboe-*/stats"
# eth0's receive errors, as kgdboe_counters() names them
GUEST_RX_ERRORS = (
    "for f in rx_dropped rx_missed_errors rx_fifo_errors rx_over_errors; "
    "do echo eth0_$f $(cat /sys/class/net/eth0/statistics/$f); done; ")
# read-only module parameters: kgdboe's parks, kgdb's step-overs
KGDB_COUNTERS = (("/sys/module/kgdboe/parameters",
                  ("parks", "park_timeouts")),
                 ("/sys/module/debug_core/parameters",
                  ("step_overs", "rearms_deferred", "rearms_failed")))
LKDTM_DIRECT = "/sys/kernel/debug/provoke-crash/DIRECT"


def grown(before, after, keys):
    """How much each of keys grew between two kgdboe_counters()."""
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


class StepFailed(Exception):
    pass


def gdb_packet(body):
    """One packet of gdb's remote protocol: $body#checksum."""
    return b"$%s#%02x" % (body, sum(body) % 256)


def gdb_bodies(data):
    """The bodies of the gdb packets in received bytes, in order."""
    return re.findall(rb"\$([^#]*)#", data)


class VlanPeer:
    """gdb's side of the protocol in 802.1Q-tagged frames on tap0, from
    npng.VLAN_HOST_IP, for kgdboe on the guest's VLAN device (send()
    and frames() serve other clients too)."""

    SPORT = 40100
    # gdb's own default: `show remotetimeout`
    RESEND_S = 2.0

    def __init__(self):
        self.sent_again = 0
        self.raw = npng.RawSender()
        self.sniffer = npng.TaggedSniffer()

    def frames(self, seconds):
        """The guest's tagged frames (VLAN_ID) for `seconds`."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            got = self.sniffer.recv()
            if got and got[0] == npng.VLAN_ID:
                yield got[1]

    def send(self, payload, dst_ip=npng.VLAN_GUEST_IP,
             dport=npng.KGDBOE_PORT):
        self.raw.send(npng.udp_frame(
            payload, src_ip=npng.VLAN_HOST_IP, sport=self.SPORT,
            dst_ip=dst_ip, dport=dport, vlan=npng.VLAN_ID))

    def send6(self, payload, dport, dst_ip=npng.VLAN_GUEST_IP6):
        self.raw.send(npng.udp6_frame(
            payload, src_ip=npng.VLAN_HOST_IP6, sport=self.SPORT,
            dst_ip=dst_ip, dport=dport, vlan=npng.VLAN_ID))

    def ask(self, body, answer=rb".*", seconds=5.0,
            dst_ip=npng.VLAN_GUEST_IP):
        """Send one packet, and again every RESEND_S until kgdboe acks
        it, as gdb does (a NIC under load drops frames); the body of the
        first answer that fully matches the regex `answer`, or b"" when
        none came in `seconds`.  Stray answers, such as a second one to a
        request that arrived twice, are acked and skipped; `sent_again`
        counts the resends."""
        end = time.monotonic() + seconds
        acked, sends, found = False, 0, None
        while found is None and time.monotonic() < end:
            if not acked:
                self.send(gdb_packet(body), dst_ip)
                sends += 1
            for payload in self.datagrams(min(self.RESEND_S,
                                              end - time.monotonic())):
                acked = acked or payload.startswith(b"+")
                found = self.answer_in(payload, answer, dst_ip)
                if found is not None:
                    break
        self.sent_again += max(sends - 1, 0)
        return found or b""

    def answer_in(self, payload, answer, dst_ip):
        """Ack each packet in a datagram, as gdb does; the body of the
        first that fully matches `answer`, or None."""
        found = None
        for body in gdb_bodies(payload):
            self.send(b"+", dst_ip)
            if found is None and re.fullmatch(answer, body, re.S):
                found = body
        return found

    def datagrams(self, seconds):
        """Payloads of the guest's tagged datagrams from kgdboe's port."""
        for frame in self.frames(seconds):
            udp = npng.parse_udp_frame(frame)
            if udp and udp[1] == npng.KGDBOE_PORT:
                yield udp[4]

    def arp_answered(self, seconds=3.0):
        self.raw.send(npng.arp_frame(1, npng.OTHER_MAC, npng.VLAN_OTHER_IP,
                                     npng.VLAN_GUEST_IP, vlan=npng.VLAN_ID))
        for frame in self.frames(seconds):
            arp = npng.parse_arp_frame(frame)
            if arp and arp[0] == 2 and arp[2] == npng.VLAN_GUEST_IP:
                return True
        return False

    def neighbour_answered(self, seconds=3.0):
        """A tagged solicitation for VLAN_GUEST_IP6 from another host of
        the VLAN: answered, tagged, to that host with the guest's MAC?"""
        self.raw.send(npng.ns_frame(npng.OTHER_MAC, npng.VLAN_OTHER_IP6,
                                    npng.VLAN_GUEST_IP6, vlan=npng.VLAN_ID))
        for frame in self.frames(seconds):
            na = npng.parse_na_frame(frame)
            if na and na[0] == npng.OTHER_MAC and \
                    na[1] == npng.VLAN_GUEST_IP6 and na[2] == npng.GUEST_MAC:
                return True
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.raw.close()
        self.sniffer.close()


def ksft_check(cond, msg):
    """Fail the step with msg unless cond holds."""
    if not cond:
        raise StepFailed(msg)


def mi_unquote(s):
    """A C string of gdb's MI output, without its quotes."""
    out = []
    i = 0
    esc = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            out.append(esc.get(s[i + 1], s[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def mi_value(result):
    """The value of -data-evaluate-expression's result record."""
    m = re.search(r'value="((?:[^"\\]|\\.)*)"', result or "")
    return mi_unquote(m.group(1)) if m else "?"


MI_RESULT = re.compile(r"^(\d*)\^(done|running|connected|error|exit)"
                       r"(?:,(.*))?$")


def parse_mi_line(line):
    """One line of gdb's MI output as a tuple: ("console", text) for a
    console stream record, ("result", token, class, rest) for a result
    record, ("async", line) for *stopped and the like, ("other", line)."""
    if line.startswith("~\"") and line.endswith("\""):
        return ("console", mi_unquote(line[2:-1]))
    m = MI_RESULT.match(line)
    if m:
        return ("result", m.group(1), m.group(2), m.group(3) or "")
    if line[:1] in "*=":
        return ("async", line)
    return ("other", line)


class Gdb:
    """gdb --interpreter=mi2 on pipes."""

    def __init__(self, vmlinux, log):
        self.log = log
        self.q = queue.Queue()
        self.tok = 100
        self.proc = subprocess.Popen(
            ["gdb", "-q", "-nx", "--interpreter=mi2", vmlinux],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True)
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            self.log.write(line + "\n")
            self.q.put(line)
        self.q.put(None)

    def _line(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise StepFailed("gdb: timeout")
        try:
            line = self.q.get(timeout=left)
        except queue.Empty:
            raise StepFailed("gdb: timeout")
        if line is None:
            raise StepFailed("gdb exited")
        return line

    def send(self, cmd):
        self.tok += 1
        self.log.write(">>> %d%s\n" % (self.tok, cmd))
        self.proc.stdin.write(("%d%s\n" % (self.tok, cmd)).encode())
        self.proc.stdin.flush()
        return str(self.tok)

    def cmd(self, cmd, timeout=30):
        """Run an MI or CLI command; returns (class, result, console)."""
        tok = self.send(cmd)
        deadline = time.monotonic() + timeout
        console = []
        while True:
            rec = parse_mi_line(self._line(deadline))
            if rec[0] == "console":
                console.append(rec[1])
            elif rec[0] == "result" and rec[1] == tok:
                if rec[2] == "error":
                    raise StepFailed("gdb: %s: %s" % (cmd, rec[3][:200]))
                return rec[2], rec[3], "".join(console)

    def cli(self, cmd, timeout=30):
        return self.cmd('-interpreter-exec console "%s"'
                        % cmd.replace('"', '\\"'), timeout)[2]

    def wait_stopped(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            line = self._line(deadline)
            if line.startswith("*stopped"):
                return line

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"-gdb-exit\n")
                self.proc.stdin.flush()
                self.proc.wait(3)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(3)


class Test:
    def __init__(self, a):
        self.a = a
        self.results = []
        self.metrics = {}
        self.guest = None
        self.cpus_recorded = False
        self.gdb = None
        self.iperf = None
        self.nc = None
        self.attached = False
        self.release = None
        self.counters_at_break = None
        self.config = npng.kgdboe_config()
        os.makedirs(a.workdir, exist_ok=True)
        # next to the serial log: <tag>.gdb-mi.log, kept after the run
        self.gdblog = open(re.sub(r"(\.log)?$", ".gdb-mi.log",
                                  a.serial_log, count=1), "w")

    def skip(self, name, why):
        self.results.append((name, None, why, 0.0))
        print("SKIP %-14s %s" % (name, why), flush=True)

    def step(self, name, fn, needs_attach=False, needs=None):
        """Run one step.  A step that cannot run because an earlier one
        failed (needs_attach: attach; needs: that step) is skipped, and
        the skip names the step that caused it."""
        if needs_attach and not self.attached:
            failed = [n for n, ok, _, _ in self.results if ok is False]
            self.skip(name, "skipped: gdb not attached (%s failed)" % (
                failed[-1] if failed else "attach"))
            return False
        if needs and not self.passed(needs):
            self.skip(name, "skipped: %s failed" % needs)
            return False
        t = time.monotonic()
        try:
            detail = fn() or ""
            ok = True
        except (StepFailed, HarnessError, OSError) as e:
            ok, detail = False, self.failure(e)
        dt = time.monotonic() - t
        self.results.append((name, ok, detail, dt))
        print("%s %-14s %6.2fs  %s" % ("PASS" if ok else "FAIL", name, dt,
                                       detail), flush=True)
        if not ok and "timeout" in detail:
            self.record_cpus(name)
        return ok

    @staticmethod
    def failure(e):
        """What failed a step: @e, and an earlier error that @e was
        raised over (by a cleanup in a `finally`), which would otherwise
        be lost, unless @e already says it."""
        first = e.__context__
        if first is None or e.__suppress_context__ or str(first) in str(e):
            return str(e)
        return "%s; raised over an earlier error: %s" % (e, first)

    def record_cpus(self, name):
        """After the first timeout: where the vCPUs are (QEMU monitor),
        printed and kept in <log>.cpus, to root-cause a hang."""
        if self.cpus_recorded or not self.guest:
            return
        self.cpus_recorded = True
        try:
            lines = npng.cpu_snapshot(self.guest, self.a.vmlinux)
        except OSError as e:
            lines = ["QEMU monitor: %s" % e]
        base = self.a.serial_log[:-4]
        with open(base + ".cpus", "w") as f:
            f.write("after %s timed out:\n%s\n" % (name, "\n".join(lines)))
        for line in lines:
            print("CPUS %s" % npng.one_line(line, 400), flush=True)

    def passed(self, name):
        return any(n == name and ok for n, ok, _, _ in self.results)

    # -- guest ------------------------------------------------------------

    def boot(self):
        self.guest = npng.Guest(
            self.a.nic, self.a.workdir, self.a.serial_log, self.a.kernel,
            self.a.initrd, cpus=self.a.cpus,
            extra_append=npng.kgdboe_arg() + " " + self.a.append)
        info = self.guest.wait_ready(self.a.boot_timeout)
        _, out = self.guest.run("uname -r", timeout=20)
        self.release = out.strip()
        log = open(self.a.serial_log, errors="replace").read()
        if "Registered I/O driver kgdboe" not in log:
            raise StepFailed("kgdboe did not register: %s" % " | ".join(
                l for l in log.splitlines() if "kgdboe" in l)[-300:])
        return "%s, %d cpu(s), driver %s" % (self.release, info["cpus"],
                                             info["driver"])

    def sysfs_write(self, value):
        return self.guest.run("echo '%s' > /sys/module/kgdboe/parameters/"
                              "kgdboe" % value, timeout=30, check=False)

    def sysfs_bad(self):
        for bad in ("garbage", "6443@192.0.2.2/eth0,@300.1.1.1/",
                    "6443@192.0.2.2/eth0,@::1/",
                    "6443@192.0.2.2/eth0,@%s/" % npng.HOST_IP):
            rc, out = self.sysfs_write(bad)
            if rc == 0:
                raise StepFailed("'%s' accepted" % bad)
        return "4 bad strings refused (the last has no MAC)"

    def sysfs_nodev(self):
        rc, out = self.sysfs_write("@192.0.2.2/eth9,@%s/" % npng.HOST_IP)
        if rc == 0:
            raise StepFailed("eth9 accepted")
        _, dm = self.guest.run("dmesg | grep kgdboe | tail -n 3",
                               timeout=20, check=False)
        if "eth9" not in dm:
            raise StepFailed("no message naming eth9: %s" % dm.strip())
        return npng.one_line(out, 80)

    def sysfs_defaults(self):
        rc, out = self.sysfs_write("@/,@%s/%s" % (npng.HOST_IP,
                                                  npng.HOST_MAC))
        if rc:
            raise StepFailed("defaults refused: %s" % out.strip())
        _, dm = self.guest.run("dmesg | grep 'kgdboe: gdb:' | tail -n 1",
                               timeout=20)
        want = "udp:%s:%d (eth0," % (npng.GUEST_IP, PORT)
        if want not in dm:
            raise StepFailed("expected %r: %s" % (want, dm.strip()))
        return "port 6443, eth0 and its address by default"

    def sysfs_set(self):
        rc, out = self.sysfs_write(self.config)
        if rc:
            raise StepFailed("good string refused: %s" % out.strip())
        _, cur = self.guest.run("cat /sys/module/kgdboe/parameters/kgdboe",
                                timeout=20)
        if cur.strip() != self.config:
            raise StepFailed("parameter reads %r" % cur.strip())
        return "registered again"

    def unregister(self):
        rc, out = self.sysfs_write("")
        if rc:
            raise StepFailed("empty string refused: %s" % out.strip())
        _, dm = self.guest.run("dmesg | tail -n 5", timeout=20)
        if "Unregistered I/O driver kgdboe" not in dm:
            raise StepFailed("no unregister message: %s" % npng.one_line(dm))
        # no longer served: the port is the stack's again (ICMP)
        self.sysfs_set()
        return "unregistered and registered again"

    # -- raw UDP ----------------------------------------------------------

    def foreign(self):
        if self.a.foreign_ip:
            subprocess.run(["ip", "addr", "add", self.a.foreign_ip + "/24",
                            "dev", npng.TAP], stderr=subprocess.DEVNULL)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((self.a.foreign_ip, 0))
            s.connect((npng.GUEST_IP, self.a.port))
            s.settimeout(1.0)
            s.send(b"+")
            s.send(b"$?#3f")
            s.send(b"\x03")
            try:
                d = s.recv(2048)
                raise StepFailed("answered: %r" % d[:40])
            except socket.timeout:
                pass
            except ConnectionRefusedError:
                raise StepFailed("ICMP port unreachable")
        finally:
            s.close()
        rc, out = self.guest.run("echo alive", timeout=10)
        return "no answer, kernel still runs"

    def duplicates(self):
        """Speak the protocol by hand: each packet sent twice."""
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((npng.GUEST_IP, self.a.port))
        s.settimeout(0.5)
        got = b""

        def collect(secs, ack=True):
            """Read for `secs`, acknowledging each answer at once, as
            gdb does (kgdboe sends an unacknowledged answer again)."""
            nonlocal got
            end = time.monotonic() + secs
            while time.monotonic() < end:
                try:
                    d = s.recv(4096)
                except socket.timeout:
                    continue
                got += d
                # kgdboe sends its "+" and the answer in one datagram
                if ack and b"$" in d:
                    s.send(b"+")

        try:
            s.send(gdb_packet(b"qSupported"))          # breaks in
            s.send(gdb_packet(b"qSupported"))
            collect(3)
            s.send(b"+")                        # stale extra ack
            for body in (b"?", b"g", b"m%x,4" % self.text_addr):
                got = b""
                s.send(gdb_packet(body))
                s.send(gdb_packet(body))
                collect(1.5)
                s.send(b"+")
                replies = gdb_bodies(got)
                # the copy must not run the command a second time
                if len(replies) != 1:
                    raise StepFailed("%s sent twice: %d replies %r" % (
                        body, len(replies), replies[:4]))
            got = b""
            s.send(gdb_packet(b"D"))
            collect(1.0)
            if b"$OK#9a" not in got:
                raise StepFailed("detach answered %r" % got[:60])
        except ConnectionRefusedError:
            raise StepFailed("ICMP port unreachable")
        finally:
            s.close()
        rc, out = self.guest.run("echo alive", timeout=20)
        return "one reply per doubled packet, detached, guest alive"

    # -- gdb --------------------------------------------------------------

    def attach(self):
        self.gdb = Gdb(self.a.vmlinux, self.gdblog)
        g = self.gdb
        g.cmd("-gdb-set confirm off")
        g.cmd("-gdb-set pagination off")
        g.cmd("-gdb-set mi-async on")
        g.cmd("-gdb-set architecture i386")
        g.cmd("-gdb-set remotetimeout %d" % self.a.remote_timeout)
        for setting in self.gdb_settings():
            g.cmd("-gdb-set " + setting)
        t = time.monotonic()
        g.cmd("-target-select remote " + self.remote_target(),
              timeout=self.a.remote_timeout * 4 + 30)
        ms = (time.monotonic() - t) * 1000
        self.metrics.setdefault("attach_ms", round(ms, 1))
        self.attached = True
        where = g.cli("frame")
        return "%.0f ms, %s" % (ms, npng.one_line(where, 70))

    def gdb_settings(self):
        """More -gdb-set settings, before the connection: the packets in
        the gdb log, to see what went wrong when something does."""
        return ["debug remote 1"]

    def remote_target(self):
        """What gdb's `target remote` is given (an IPv6 address in
        brackets)."""
        return "udp:" + npng.host_port(
            getattr(self, "target_ip", npng.GUEST_IP), self.a.port)

    def ipv6_up(self):
        """tap0 on HOST_IP6, the guest's eth0 on GUEST_IP6."""
        npng.host_ip6_up()
        self.guest.run(npng.GUEST_IP6_UP, timeout=20)

    VLAN_UP = ("ip link add link eth0 name %s type vlan id %d && "
               "ip addr add %s/24 dev %s && ip link set %s up" % (
                   npng.VLAN_DEV, npng.VLAN_ID, npng.VLAN_GUEST_IP,
                   npng.VLAN_DEV, npng.VLAN_DEV))

    CLIENT = "kgdboe"

    def client_messages(self, since):
        """The client's (CLIENT's) kernel messages after the first
        `since` of them."""
        _, dm = self.guest.run("dmesg | grep '%s: '" % self.CLIENT,
                               timeout=20, check=False)
        return dm.strip().splitlines()[since:]

    def wait_message(self, since, text, seconds=15):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            new = self.client_messages(since)
            if any(text in line for line in new):
                return new
            time.sleep(0.5)
        raise StepFailed("no %s message %r in %d s: %s" % (
            self.CLIENT, text, seconds, npng.one_line(" | ".join(new), 300)))

    VLAN_CONFIG = npng.netpoll_target(
        npng.KGDBOE_PORT, npng.KGDBOE_PORT, dev=npng.VLAN_DEV,
        local=npng.VLAN_GUEST_IP, remote=npng.VLAN_HOST_IP)

    def set_on_vlan(self):
        """kgdboe configured on the VLAN device (which must exist)."""
        rc, out = self.sysfs_write(self.VLAN_CONFIG)
        if rc:
            raise StepFailed("kgdboe on %s refused: %s" % (npng.VLAN_DEV,
                                                            out.strip()))

    def device_gone(self):
        g = self.guest
        g.run(self.VLAN_UP, timeout=30)
        vlan = npng.VLAN_DEV
        self.set_on_vlan()
        try:
            seen = len(self.client_messages(0))
            t0 = time.monotonic()
            # hangs (guest-timeout) while something holds the device
            g.run("ip link del " + vlan, timeout=40)
            del_s = time.monotonic() - t0
            self.wait_message(seen, vlan + " went away: released")
            seen = len(self.client_messages(0))
            g.run(self.VLAN_UP, timeout=30)
            self.wait_message(seen, vlan + " came back: resumed")
            _, cur = g.run("cat /sys/module/kgdboe/parameters/kgdboe",
                           timeout=20)
            if cur.strip() != self.VLAN_CONFIG:
                raise StepFailed("parameter reads %r after resuming"
                                 % cur.strip())
            g.run("ip link del " + vlan, timeout=40)
        finally:
            self.sysfs_set()
        return ("%s deleted in %.1f s and released, added again and "
                "resumed, deleted again; kgdboe back on eth0" % (vlan, del_s))

    def vlan_session(self):
        g = self.guest
        g.run(self.VLAN_UP, timeout=30)
        try:
            return self.vlan_session_on_vlan()
        finally:
            self.sysfs_set()
            g.run("ip link del " + npng.VLAN_DEV, timeout=40, check=False)

    def vlan_session_on_vlan(self):
        g = self.guest
        with VlanPeer() as peer:
            # kgdboe is on eth0: a tagged frame is not its
            if peer.ask(b"?", seconds=2.0, dst_ip=npng.GUEST_IP):
                raise StepFailed("kgdboe on eth0 answered a tagged frame")
        g.run("echo alive", timeout=20)
        self.set_on_vlan()
        with VlanPeer() as peer:
            stop = peer.ask(b"?", rb"[ST][0-9a-f]{2}.*")
            if not stop:
                raise StepFailed("no tagged stop reply to '?' while running")
            if not peer.arp_answered():
                raise StepFailed("stopped: no tagged ARP reply for %s"
                                 % npng.VLAN_GUEST_IP)
            regs = peer.ask(b"g", rb"[0-9a-fx]{64,}")
            if not regs:
                raise StepFailed("stopped: no registers for 'g'")
            if peer.ask(b"D", b"OK") != b"OK":
                raise StepFailed("'D' not answered OK")
            resent = peer.sent_again
        g.run("echo alive", timeout=20)
        return ("untagged client ignores tagged; on %s: '?' answered %r "
                "while running; stopped: ARP, 'g' (%d bytes), 'D'; guest "
                "alive; %d requests sent again" % (
                    npng.VLAN_DEV, stop[:12], len(regs), resent))

    IPV6_CONFIG = npng.netpoll_target(
        npng.KGDBOE_PORT, npng.KGDBOE_PORT, local=npng.GUEST_IP6,
        remote=npng.HOST_IP6)

    def ipv6_session(self):
        self.ipv6_up()
        rc, out = self.sysfs_write(self.IPV6_CONFIG)
        if rc:
            raise StepFailed("kgdboe on IPv6 refused: %s" % out.strip())
        self.target_ip = npng.GUEST_IP6
        try:
            return self.ipv6_session_attached()
        finally:
            del self.target_ip
            if self.attached:
                self.gdb.close()
                self.attached = False
            self.sysfs_set()

    def ipv6_session_attached(self):
        said = self.client_messages(0)[-2:]
        want = "target remote udp:[%s]:%d" % (npng.GUEST_IP6, self.a.port)
        if not any(want in line for line in said):
            raise StepFailed("kgdboe did not say %r: %s" % (
                want, npng.one_line(" | ".join(said), 200)))
        attached = self.attach()
        regs = self.registers()
        # stopped: the host must solicit the guest's address again
        npng.sh("ip", "-6", "neigh", "flush", "dev", npng.TAP)
        out = self.gdb.cli("print init_uts_ns.name.release")
        if self.release not in out:
            raise StepFailed("after a neighbour flush: %s" % out.strip())
        self.gdb.cmd("-target-detach")
        self.attached = False
        self.gdb.close()
        self.guest.run("echo alive", timeout=20)
        ndp = self.np_stats().get("ndp_replies", 0)
        if ndp < 1:
            raise StepFailed("ndp_replies %d: the stopped guest answered no "
                             "solicitation" % ndp)
        return ("%s: attached (%s), %s, release read after a neighbour "
                "flush (ndp_replies %d), detached, guest alive" % (
                    self.remote_target(), npng.one_line(attached, 40),
                    regs, ndp))

    # busybox's ip takes no bond options: the mode is set through sysfs
    # (bond0 exists already: built-in bonding creates it at boot)
    STACKED = ("br1", "bond1")
    STACKED_UP = ("ip link add br1 type bridge && ip link set br1 up && "
                  "ip link add bond1 type bond && echo active-backup > "
                  "/sys/class/net/bond1/bonding/mode && ip link set bond1 up")

    def stacked_refused(self):
        g = self.guest
        g.run(self.STACKED_UP, timeout=30)
        try:
            for dev in self.STACKED:
                rc, out = self.sysfs_write(npng.netpoll_target(
                    npng.KGDBOE_PORT, npng.KGDBOE_PORT, dev=dev,
                    local=npng.STACKED_GUEST_IP))
                if rc == 0:
                    raise StepFailed("kgdboe on %s accepted" % dev)
                said = self.client_messages(0)[-5:]
                if not any("%s: netpoll cannot receive on a bond" % dev in l
                           for l in said):
                    raise StepFailed("%s refused without netpoll's message: "
                                     "%s" % (dev, npng.one_line(
                                         " | ".join(said), 300)))
        finally:
            self.sysfs_set()
            g.run("ip link del br1; ip link del bond1", timeout=30,
                  check=False)
        return "br1 and bond1 refused: " + npng.one_line(out, 80)

    def reattach(self):
        """After all that, gdb attaches again and detaches."""
        self.attach()
        self.backtrace()
        self.gdb.cmd("-target-detach")
        self.attached = False
        self.gdb.close()
        self.guest.run("echo alive", timeout=20)
        return "attached and detached again"

    def registers(self):
        out = self.gdb.cli("info registers")
        if not re.search(r"^eip\s+0x", out, re.M):
            raise StepFailed("no eip: %s" % npng.one_line(out))
        return npng.one_line(re.search(r"^eip.*$", out, re.M).group(0), 60)

    def backtrace(self):
        out = self.gdb.cli("bt 8")
        if "#0" not in out:
            raise StepFailed(npng.one_line(out))
        return "%d frames, #0 %s" % (out.count("\n#") + 1, npng.one_line(
            out.splitlines()[0], 60))

    def release_step(self):
        # the host must ask the stopped guest for its MAC address again
        subprocess.run(["ip", "neigh", "flush", "dev", npng.TAP])
        out = self.gdb.cli("print init_uts_ns.name.release")
        if self.release not in out:
            raise StepFailed("%s (guest says %s)" % (out.strip(),
                                                      self.release))
        return out.strip()

    def reads(self):
        times = []
        for _ in range(self.a.reads):
            t = time.monotonic()
            self.gdb.cmd("-data-evaluate-expression jiffies")
            times.append((time.monotonic() - t) * 1000)
        times.sort()
        med = statistics.median(times)
        p90 = times[int(len(times) * 0.9) - 1]
        self.metrics["read_ms_median"] = round(med, 3)
        self.metrics["read_ms_p90"] = round(p90, 3)
        return "%d reads, median %.2f ms, p90 %.2f ms" % (len(times), med,
                                                           p90)

    def dump_rodata(self, offset, name):
        """64 KiB of .rodata at offset, dumped by gdb; the seconds it took.
        Fails unless every byte equals vmlinux's."""
        addr = self.rodata_addr + offset
        path = os.path.join(self.a.workdir, name)
        if os.path.exists(path):
            os.unlink(path)
        t = time.monotonic()
        self.gdb.cli("dump binary memory %s 0x%x 0x%x" % (
            path, addr, addr + 65536), timeout=300)
        dt = time.monotonic() - t
        size = os.path.getsize(path) if os.path.exists(path) else 0
        if size != 65536:
            raise StepFailed("dumped %d bytes" % size)
        with open(path, "rb") as f:
            data = f.read()
        ref = self.vmlinux_rodata(offset, 65536)
        diff = [i for i, (x, y) in enumerate(zip(ref, data)) if x != y]
        if diff:
            raise StepFailed("%d of 65536 bytes differ from vmlinux, the "
                             "first at 0x%x" % (len(diff), addr + diff[0]))
        return dt

    def dump64k(self):
        dt = self.dump_rodata(0, "dump64k.bin")
        self.metrics["dump_kib_s"] = round(64 / dt, 1)
        return "64 KiB of .rodata in %.2f s = %.1f KiB/s, equal to " \
            "vmlinux" % (dt, 64 / dt)

    def dump64k_big(self):
        """The same with gdb's memory packets fixed at 500 bytes (250
        bytes a read), below the size the stub announces: a second
        packet size through the same path."""
        self.gdb.cli("set remote memory-read-packet-size 500")
        self.gdb.cli("set remote memory-read-packet-size fixed")
        dt = self.dump_rodata(65536, "dump64k-500.bin")
        self.metrics["dump500_kib_s"] = round(64 / dt, 1)
        return "the next 64 KiB in %.2f s = %.1f KiB/s, equal to vmlinux" \
            % (dt, 64 / dt)

    def vmlinux_rodata(self, offset, n):
        """n bytes of vmlinux's .rodata from offset (it starts at
        __start_rodata)."""
        out = os.path.join(self.a.workdir, "rodata.bin")
        r = subprocess.run(["objcopy", "-O", "binary",
                            "--only-section=.rodata", self.a.vmlinux, out],
                           capture_output=True, text=True)
        if r.returncode:
            raise StepFailed("objcopy could not read vmlinux's .rodata: %s"
                             % npng.one_line(r.stderr))
        with open(out, "rb") as f:
            f.seek(offset)
            ref = f.read(n)
        if len(ref) != n:
            raise StepFailed("vmlinux's .rodata has no %d bytes at %d"
                             % (n, offset))
        return ref

    def breakpoint(self):
        g = self.gdb
        g.cmd("-break-insert ksys_sync")
        g.cmd("-exec-continue")
        # for step_step's report, should a stop never come
        self.counters_at_break = self.counters_if_running()
        t = time.monotonic()
        self.sync_tag = self.guest.start("sync")
        line = g.wait_stopped(30)
        ms = (time.monotonic() - t) * 1000
        if "breakpoint-hit" not in line or "ksys_sync" not in line:
            raise StepFailed(line[:200])
        self.metrics["cont_to_bp_ms"] = round(ms, 1)
        return "%.0f ms from `sync` to the stop" % ms

    def step_step(self):
        line = self.stepped("-exec-next")
        self.stepped("-exec-next-instruction")
        m = re.search(r'line="(\d+)"', line)
        return "next -> line %s, stepi ok" % (m.group(1) if m else "?")

    def stepped(self, command):
        """One of gdb's steps; over a call, gdb continues to a breakpoint
        at the return address, which kgdb may step over (a timeout says
        what kgdb stepped over since the breakpoint step's continue)."""
        self.gdb.cmd(command)
        try:
            line = self.gdb.wait_stopped(30)
        except StepFailed as e:
            if self.counters_at_break is None:
                raise
            raise StepFailed("%s: %s; %s" % (command, e, self.why_no_stop(
                self.counters_at_break)))
        if "end-stepping-range" not in line:
            raise StepFailed("%s: %s" % (command, line[:200]))
        return line

    def delete_cont(self):
        g = self.gdb
        g.cmd("-break-delete")
        g.cmd("-exec-continue")
        self.guest.finish(self.sync_tag, "sync", timeout=30)
        rc, out = self.guest.run("echo alive", timeout=20)
        return "sync completed, guest runs"

    def kgdboe_counters(self):
        """kgdboe's statistics, its park counters and kgdb's step-over
        counters, read through the guest's agent while the kernel runs:
        {name: value}."""
        _, out = self.guest.run("cat %s; " % KGDBOE_STATS +
                                "sed 's/^/np_/' %s; " % NP_STATS +
                                GUEST_RX_ERRORS + "; ".join(
            "for p in %s; do echo $p $(cat %s/$p); done" % (" ".join(names),
                                                            d)
            for d, names in KGDB_COUNTERS), timeout=20)
        counters = {k: int(v) for k, v in
                    re.findall(r"^(\w+) (\d+)$", out, re.M)}
        ksft_check("stepped_over" in counters and "parks" in counters,
                   "no kgdboe counters: %s" % npng.one_line(out))
        return counters

    @staticmethod
    def stepped_over(before, after):
        """What kgdb stepped over between two kgdboe_counters()."""
        d = grown(before, after, ("stepped_over", "stepped_over_others",
                                  "stepped_over_first", "park_timeouts",
                                  "rearms_deferred", "rearms_failed"))
        return ("%(stepped_over)d hits stepped over (%(stepped_over_others)d"
                " with another CPU inside the device, %(stepped_over_first)d "
                "of them first hits, %(rearms_deferred)d put back late, "
                "%(rearms_failed)d not), %(park_timeouts)d park timeouts"
                % d), d

    def why_no_stop(self, counters):
        """After a breakpoint gave gdb no stop: what kgdb stepped over
        meanwhile, if the kernel still runs (or that it does not)."""
        try:
            return "meanwhile " + self.stepped_over(
                counters, self.kgdboe_counters())[0]
        except HarnessError as e:
            return "the guest's agent does not answer either (stopped " \
                   "where gdb cannot be told?): %s" % e

    def break_in(self, counters):
        """gdb's interrupt, sent again once if the NIC lost it (see
        INTERRUPT_RESEND_S); @counters: kgdboe_counters() from before.
        Returns gdb's *stopped line."""
        g = self.gdb
        g.cmd("-exec-interrupt")
        try:
            return g.wait_stopped(INTERRUPT_RESEND_S)
        except StepFailed:
            pass
        now = self.counters_if_running()
        if now and self.interrupt_missed(counters, now):
            self.metrics["interrupts_resent"] = self.metrics.get(
                "interrupts_resent", 0) + 1
            print("# interrupt lost by the NIC (eth0 rx_missed_errors +%d, "
                  "nothing received by netpoll): sent again" % grown(
                      counters, now, ("eth0_rx_missed_errors",))[
                          "eth0_rx_missed_errors"], flush=True)
            g.cmd("-exec-interrupt")
            counters = now
        try:
            return g.wait_stopped(30)
        except StepFailed as e:
            raise StepFailed("%s; %s" % (e, self.why_no_interrupt(counters)))

    def counters_if_running(self):
        """kgdboe_counters(), or None if the agent does not answer (the
        kernel may have stopped meanwhile)."""
        try:
            return self.kgdboe_counters()
        except HarnessError:
            return None

    @staticmethod
    def interrupt_missed(before, after):
        """Frames lost by the NIC, and none received by kgdboe's netpoll,
        between two kgdboe_counters()?"""
        d = grown(before, after, ("eth0_rx_missed_errors", "np_received"))
        return d["eth0_rx_missed_errors"] > 0 and not d["np_received"]

    def why_no_interrupt(self, counters):
        """After gdb's interrupt gave no stop: what kgdboe received and
        did with break-ins since @counters (kgdboe_counters()), if the
        kernel still runs."""
        now = self.counters_if_running()
        if now is None:
            return "the guest's agent does not answer either"
        tap = subprocess.run(["ip", "-s", "-o", "link", "show", "dev",
                              npng.TAP], capture_output=True, text=True)
        return "the kernel runs; meanwhile: %s; host: neighbour %s, %s" % (
            " ".join("%s +%d" % kv for kv in grown(counters, now, (
                "eth0_rx_dropped", "eth0_rx_missed_errors",
                "eth0_rx_fifo_errors", "eth0_rx_over_errors", "np_received",
                "np_delivered", "np_foreign", "np_malformed", "rx_busy",
                "ring_full", "breaks", "breaks_held", "breaks_limited",
                "breaks_no_carrier")).items()),
            "/".join(str(x) for x in npng.neigh_state()),
            npng.one_line(tap.stdout.split("TX:")[-1], 120))

    def locked_stops(self):
        """Stop at each of LOCKED_STOPS in turn; the kernel runs after.
        Records, for each, the seconds from gdb's continue to the stop and
        the hits kgdb stepped over meanwhile (a timeout says how many)."""
        counts, done = [self.kgdboe_counters()], []
        self.guest.run(LOCKED_CHURN, timeout=20)
        try:
            for stop in LOCKED_STOPS:
                done.append(self.locked_stop(*stop, counts[-1]))
                counts.append(self.kgdboe_counters())
        finally:
            self.stop_churn()
        waits = self.metrics.setdefault("locked_wait_s", {})
        stepped = self.metrics.setdefault("locked_stepped_over", {})
        for (func, _, _), (text, wait), before, after in zip(
                LOCKED_STOPS, done, counts, counts[1:]):
            waits[func] = wait
            stepped[func] = self.stepped_over(before, after)[1]
        # hits inside the device, which kgdb stepped over (kgdboe.rst)
        self.metrics["stepped_over"] = counts[-1]["stepped_over"]
        return "; ".join(t for t, _ in done) + "; %s; churn %s rounds" % (
            self.stepped_over(counts[0], counts[-1])[0],
            self.metrics.get("locked_churn_loops"))

    def stop_churn(self):
        """Ask locked_stops' churn to end; the kernel may be stopped (a
        failed step), where the guest cannot answer: its timeout ends it."""
        try:
            _, out = self.guest.run("touch %s; sleep 1; cat %s" % (
                LOCKED_CHURN_STOP, LOCKED_CHURN_COUNT), timeout=10,
                check=False)
        except HarnessError:
            return
        m = re.match(r"\s*(\d+)", out)
        self.metrics["locked_churn_loops"] = int(m.group(1)) if m else None

    def locked_stop(self, func, lock, shown, counters):
        g = self.gdb
        try:
            self.break_in(counters)
        except StepFailed as e:
            raise StepFailed("interrupt before %s: %s" % (func, e))
        g.cmd("-break-insert " + func)
        g.cmd("-exec-continue")
        t = time.monotonic()
        try:
            line = g.wait_stopped(30)
        except StepFailed as e:
            raise StepFailed("%s (%s held): %s; %s" % (
                func, lock, e, self.why_no_stop(counters)))
        wait = round(time.monotonic() - t, 2)
        ksft_check("breakpoint-hit" in line, "%s: %s" % (func, line[:160]))
        g.cmd("-break-delete")
        t = time.monotonic()
        for _ in range(LOCKED_READS):
            g.cmd("-data-evaluate-expression jiffies")
        ms = (time.monotonic() - t) * 1000 / LOCKED_READS
        frame = g.cli("bt 1")
        ksft_check(func in frame, "%s: stopped in %s" % (
            func, npng.one_line(frame, 80)))
        value = ""
        if shown:
            value = " %s=%s" % (shown, mi_value(g.cmd(
                "-data-evaluate-expression " + shown)[1]))
        g.cmd("-exec-continue")
        return "%s%s stop after %.1f s, %.1f ms/read" % (
            func, value, wait, ms), wait

    def finishes(self):
        """--finishes times: continue to ksys_sync, then `finish`.  The
        kernel runs after."""
        self.guest.run(SYNC_LOOP, timeout=20)
        counters = self.kgdboe_counters()
        self.break_in(counters)
        try:
            self.finish_loop(counters)
        except StepFailed as e:
            # the kernel runs again: what did kgdb step over?
            raise StepFailed("%s; %s" % (e, self.why_no_stop(counters)))
        text, d = self.stepped_over(counters, self.kgdboe_counters())
        self.metrics["finishes_stepped_over"] = d
        return "%d finishes stopped; %s" % (self.a.finishes, text)

    def finish_loop(self, counters):
        """The finishes, stopped at ksys_sync; the kernel runs after, also
        after a failure."""
        g = self.gdb
        try:
            g.cmd("-break-insert ksys_sync")
            for i in range(self.a.finishes):
                self.finish_once(i, counters)
        finally:
            g.cmd("-break-delete")
            g.cmd("-exec-continue")
            self.guest.run("touch " + SYNC_LOOP_STOP, timeout=20,
                           check=False)

    def finish_once(self, i, counters):
        g = self.gdb
        g.cmd("-exec-continue")
        line = g.wait_stopped(30)
        ksft_check("breakpoint-hit" in line and "ksys_sync" in line,
                   "continue %d: %s" % (i, line[:160]))
        g.cmd("-exec-finish")
        try:
            line = g.wait_stopped(FINISH_S)
        except StepFailed as e:
            self.break_in(counters)
            raise StepFailed("finish %d: %s" % (i, e))
        ksft_check("function-finished" in line, "finish %d stopped "
                   "elsewhere (kgdb passed the breakpoint at the return "
                   "address): %s" % (i, line[:160]))

    def interrupt(self):
        counters = self.kgdboe_counters()
        t = time.monotonic()
        line = self.break_in(counters)
        ms = (time.monotonic() - t) * 1000
        if "signal-received" not in line:
            raise StepFailed(line[:200])
        self.metrics["intr_ms"] = round(ms, 1)
        # the kernel is stopped: its agent cannot answer now
        tag = self.guest.start("echo stopped-test")
        try:
            self.guest.finish(tag, "echo", timeout=2)
            raise StepFailed("guest answered while stopped")
        except HarnessError:
            pass
        self.pending_tag = tag
        m = re.search(r'signal-name="(\w+)"', line)
        return "%.0f ms, %s" % (ms, m.group(1) if m else "?")

    def detach(self):
        self.gdb.cmd("-target-detach")
        self.attached = False
        self.gdb.close()
        # the interrupt step's guest command, if it got that far
        if getattr(self, "pending_tag", None):
            self.guest.finish(self.pending_tag, "echo", timeout=30)
        rc, out = self.guest.run("echo alive", timeout=20)
        return "guest alive"

    def np_stats(self):
        _, out = self.guest.run("cat " + NP_STATS, timeout=20)
        return {k: int(v) for k, v in re.findall(r"^(\w+) (-?\d+)$", out,
                                                  re.M)}

    def counters(self):
        after = self.np_stats()
        before = self.stats_before
        # nmi_rx_*: skbs netpoll_nmi_rx_skb() gave drivers in kgdb's NMI
        # stop (all devices), and requests it could not serve
        d = {k: after.get(k, 0) - before.get(k, 0)
             for k in ("received", "delivered", "sent", "dropped",
                       "malformed", "foreign", "arp_replies",
                       "nmi_rx_served", "nmi_rx_missed")}
        self.metrics.update({"np_" + k: v for k, v in d.items()})
        if d["delivered"] < self.a.reads:
            raise StepFailed("only %d datagrams delivered for %d reads: %r"
                             % (d["delivered"], self.a.reads, d))
        if d["dropped"]:
            changed = {k: after[k] - before.get(k, 0) for k in after
                       if after[k] != before.get(k, 0)}
            raise StepFailed("netpoll dropped %d: %r" % (d["dropped"],
                                                        changed))
        if d["arp_replies"] < 1:
            raise StepFailed("no ARP reply while stopped: %r" % d)
        text = " ".join("%s=%d" % kv for kv in d.items())
        if self.a.cpus > 1:
            # every stop parks the other CPUs outside the device first
            c = self.kgdboe_counters()
            parks, timeouts = c["parks"], c["park_timeouts"]
            self.metrics.update({"parks": parks, "park_timeouts": timeouts})
            if parks < 1:
                raise StepFailed("the other CPUs were never parked: %s"
                                 % text)
            text += " parks=%d park_timeouts=%d" % (parks, timeouts)
        return text

    def takeover(self):
        _, cons = self.guest.run("ls /sys/module/kgdboc/parameters/kgdboc"
                                 " 2>/dev/null; true", timeout=20)
        if "kgdboc" not in cons:
            # a required step that cannot run does not pass
            raise StepFailed("no kgdboc in this kernel "
                             "(CONFIG_KGDB_SERIAL_CONSOLE): takeover not run")
        self.guest.run("echo ttyS0 > /sys/module/kgdboc/parameters/kgdboc",
                       timeout=20)
        _, cur = self.guest.run("cat /sys/module/kgdboe/parameters/kgdboe",
                                timeout=20)
        if cur.strip():
            raise StepFailed("kgdboe parameter still reads %r after kgdboc "
                             "took over" % cur.strip())
        # kgdboc has no deinit: it cannot be replaced, only unregistered
        self.guest.run("echo > /sys/module/kgdboc/parameters/kgdboc",
                       timeout=20)
        self.sysfs_set()
        _, dm = self.guest.run("dmesg | grep -E 'I/O driver' | tail -n 3",
                               timeout=20)
        for want in ("Replacing I/O driver kgdboe with kgdboc",
                     "Unregistered I/O driver kgdboc",
                     "Registered I/O driver kgdboe"):
            if want not in dm:
                raise StepFailed("no '%s': %s" % (want, npng.one_line(dm)))
        return "kgdboc took over, unregistered, kgdboe registered again"

    def start_load(self):
        self.iperf = npng.Iperf(True, 900)
        deadline = time.monotonic() + 15
        while (not self.iperf.intervals and self.iperf.proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.2)
        if self.iperf.proc.poll() is not None or not self.iperf.intervals:
            raise StepFailed("iperf3 did not start: %s" % self.iperf.error())
        self.nc = npng.NcReceiver(port=npng.NC_PORT)
        return "iperf3 guest->host %.0f Mbit/s" % self.iperf.intervals[-1][3]

    def load_alive(self):
        ip = self.iperf
        if ip.proc.poll() is not None:
            raise StepFailed("iperf3 ended: %s" % ip.error())
        t = time.monotonic()
        time.sleep(3)
        recent = [i for i in ip.intervals if i[0] > t]
        if not recent or not any(i[3] > 0 for i in recent):
            raise StepFailed("iperf3 moves no data after the session")
        self.guest.run("echo 'npng kgdbalive 1' > /dev/kmsg", timeout=20)
        recs = self.nc.wait_burst("kgdbalive", 1, quiet=5.0, limit=10.0)
        if not recs:
            raise StepFailed("netconsole message did not arrive")
        return "iperf3 %.0f Mbit/s, netconsole logs" % recent[-1][3]

    def splat(self):
        splat = npng.first_splat(self.a.serial_log)
        if splat:
            raise StepFailed(splat)
        return "clean"

    def run(self):
        self.find_kernel_addresses()
        if not self.step("boot", self.boot):
            return
        self.step("sysfs_bad", self.sysfs_bad)
        self.step("sysfs_nodev", self.sysfs_nodev)
        self.step("sysfs_defaults", self.sysfs_defaults)
        self.step("sysfs_set", self.sysfs_set)
        self.step("foreign", self.foreign)
        if self.a.load and not self.step("load", self.start_load):
            self.skip("attach", "skipped: load failed")
            return
        self.stats_before = self.np_stats()
        self.step("attach", self.attach)
        self.step("registers", self.registers, True)
        self.step("backtrace", self.backtrace, True)
        self.step("release", self.release_step, True)
        self.step("reads", self.reads, True)
        self.step("dump64k", self.dump64k, True)
        self.step("dump64k_500", self.dump64k_big, True)
        self.step("breakpoint", self.breakpoint, True)
        self.step("step", self.step_step, True, needs="breakpoint")
        self.step("delete_cont", self.delete_cont, True, needs="breakpoint")
        if self.a.locked_stops:
            self.step("locked_stops", self.locked_stops, True,
                      needs="delete_cont")
        if self.a.finishes:
            self.step("finishes", self.finishes, True, needs="delete_cont")
        self.step("interrupt", self.interrupt, True)
        self.step("detach", self.detach, True)
        self.step("counters", self.counters)
        # after the session: foreign datagrams still get nothing
        self.step("foreign_after", self.foreign)
        if "duplicates" in self.a.skip:
            self.skip("duplicates", "skipped: --skip duplicates")
        else:
            self.step("duplicates", self.duplicates, needs="foreign_after")
        for name, fn in (("unregister", self.unregister),
                         ("takeover", self.takeover),
                         ("device_gone", self.device_gone),
                         ("vlan_session", self.vlan_session),
                         ("ipv6_session", self.ipv6_session),
                         ("stacked_refused", self.stacked_refused),
                         ("reattach", self.reattach)):
            self.step(name, fn, needs="foreign_after")
        if self.a.load:
            self.step("load_alive", self.load_alive)
        self.step("splat", self.splat)

    def run_oops(self):
        if not self.step("boot", self.boot):
            return
        if not self.step("load", self.start_load):
            return
        self.step("oops", self.oops)
        self.step("attach", self.attach, needs="oops")
        self.step("oops_frame", self.oops_frame, True)
        self.step("registers", self.registers, True)
        self.step("release", self.release_step, True)
        self.step("reads", self.reads, True)
        self.step("oops_splats", self.oops_splats)

    def oops(self):
        # kgdb enters on an oops only when a panic does not reboot
        # (kgdb_handle_exception()); the guest boots with panic=-1
        self.guest.run("echo 0 > /proc/sys/kernel/panic", timeout=20)
        self.guest.start("echo EXCEPTION > " + LKDTM_DIRECT)
        deadline = time.monotonic() + 30
        while "Oops:" not in self.serial_text():
            ksft_check(time.monotonic() < deadline, "no Oops in 30 s")
            time.sleep(0.5)
        time.sleep(2)
        tag = self.guest.start("echo stopped-test")
        try:
            self.guest.finish(tag, "echo", timeout=3)
        except HarnessError:
            return "oopsed, the kernel is stopped"
        raise StepFailed("the guest still answers after its oops")

    def oops_frame(self):
        out = self.gdb.cli("bt 8")
        ksft_check("lkdtm_" in out, "not lkdtm's oops: %s" % npng.one_line(
            out, 160))
        return npng.one_line(out, 100)

    def oops_splats(self):
        """The oops (its BUG and Oops lines) is the one report."""
        reports = npng.find_splats(self.serial_text())
        oops = [r for r in reports if r["what"].startswith("Oops:")]
        others = [r for r in reports if not r["what"].startswith(
            ("Oops:", "BUG: kernel NULL pointer dereference"))]
        # lkdtm's debugfs write: direct_entry()
        ksft_check(oops and "direct_entry" in oops[0]["fingerprint"],
                   "no Oops in lkdtm: %r" % reports[:3])
        ksft_check(not others, "more reports: %s [%s]" % (
            others[0]["what"], others[0]["fingerprint"]) if others else "")
        return "%s [%s]" % (oops[0]["what"], oops[0]["fingerprint"])

    def serial_text(self):
        with open(self.a.serial_log, errors="replace") as f:
            return f.read()

    def find_kernel_addresses(self):
        """Where the steps read: kernel text and read-only data."""
        self.text_addr = self.symbol("_text")
        self.rodata_addr = self.symbol("__start_rodata")

    def symbol(self, name):
        out = subprocess.run(["nm", self.a.vmlinux], capture_output=True,
                             text=True).stdout
        m = re.search(r"^([0-9a-f]+) \w %s$" % re.escape(name), out, re.M)
        if not m:
            raise SystemExit("no %s in %s" % (name, self.a.vmlinux))
        return int(m.group(1), 16)

    def close(self):
        if self.iperf:
            self.iperf.kill()
        if self.nc:
            self.nc.close()
        if self.gdb:
            self.gdb.close()
        if self.guest:
            self.guest.stop()
        self.gdblog.close()


def guest_arguments(p):
    """The options of every kgdboe test script: the guest, its files, gdb's
    timeout, --out."""
    p.add_argument("--nic", default="e1000")
    p.add_argument("--cpus", type=int, default=1)
    for name in ("--kernel", "--vmlinux", "--initrd", "--workdir",
                 "--serial-log"):
        p.add_argument(name, required=True)
    p.add_argument("--remote-timeout", type=int, default=2)
    p.add_argument("--boot-timeout", type=int, default=180)
    p.add_argument("--append", default="")
    p.add_argument("--out", help="JSON results")


def run_test(t, a):
    """Run a Test's steps, clean up whatever happens; the exit status."""
    try:
        t.run_oops() if getattr(a, "oops", False) else t.run()
    except KeyboardInterrupt:
        t.results.append(("interrupted", False, "Ctrl-C", 0.0))
    finally:
        t.close()
    return report(t, a)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    guest_arguments(p)
    p.add_argument("--port", type=int, default=PORT,
                   help="port gdb targets (a wrong one must fail)")
    p.add_argument("--foreign-ip", default="192.0.2.3",
                   help="second host address on tap0 that is not served")
    p.add_argument("--reads", type=int, default=100)
    p.add_argument("--skip", default="",
                   help="comma-separated steps not to run (reported as "
                   "skipped, never as passed)")
    p.add_argument("--load", action="store_true",
                   help="iperf3 guest->host during the session")
    p.add_argument("--locked-stops", action="store_true",
                   help="step locked_stops: breakpoints where a lock is "
                   "held")
    p.add_argument("--finishes", type=int, default=0,
                   help="step finishes: that many `finish`es from ksys_sync")
    p.add_argument("--oops", action="store_true",
                   help="the oops session instead (needs lkdtm)")
    a = p.parse_args()
    return run_test(Test(a), a)


def report(t, a):
    """The summary line and --out's JSON; the exit status."""
    passed = sum(1 for r in t.results if r[1])
    skipped = sum(1 for r in t.results if r[1] is None)
    failed = len(t.results) - passed - skipped
    print("kgdboe %s cpus=%d: %d passed, %d failed, %d skipped; %s" % (
        a.nic, a.cpus, passed, failed, skipped, json.dumps(t.metrics)),
        flush=True)
    if a.out:
        npng.write_json(a.out, {
            "nic": a.nic, "cpus": a.cpus, "port": a.port,
            "steps": [{"step": n, "pass": ok, "detail": d,
                       "seconds": round(s, 3)} for n, ok, d, s in t.results],
            "metrics": t.metrics, "passed": passed, "failed": failed,
            "skipped": skipped})
    return 0 if failed == 0 and t.results else 1


if __name__ == "__main__":
    sys.exit(main())
