#!/usr/bin/env python3
"""The debuggers on the same guest, in one run: kgdboe in plain and in
authenticated mode, kgdboc on QEMU's 16550 at 115200 baud, and QEMU's own
gdbstub (the ceiling: no guest code runs while it reads).

Runs inside a network namespace that the caller created (perf/perf.py, or
npng.run_in_netns).  One boot of the series kernel; for each transport in
turn, gdb attaches, reads jiffies --reads times, reads kernel text in
READ_SIZES pieces (READ_REPEATS of each, at fresh addresses), dumps 64 KiB
of .rodata (equal to vmlinux's byte for byte), continues to a breakpoint on
ksys_sync (the guest runs `sync`), removes it and detaches.
kgdboe-auth writes a random key to kgdboe's key parameter and gdb goes
through build/kgdboe-bridge; kgdboc takes over from kgdboe through its
sysfs parameter and is entered with SysRq g.

Per transport, the metrics are attach_ms, read_ms_median, read_ms_p90,
read_kib_s (read size in bytes -> KiB/s, median of the repeats),
dump_kib_s and cont_to_bp_ms; --out writes them as JSON, with the steps.
--no-packet-size keeps gdb from asking for the stub's features
(qSupported): the reads then cost what they cost against a stub that
announces no packet size.
"""

import argparse
import os
import secrets
import statistics
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
sys.path.insert(0, os.path.join(TOP, "tests"))
import npng  # noqa: E402
import kgdboe  # noqa: E402

KGDBOC_PORT = 5602      # QEMU's ttyS2, on the namespace's loopback
GDBSTUB_PORT = 5603     # QEMU's gdbstub
TRANSPORTS = ("kgdboe", "kgdboe-auth", "kgdboc", "gdbstub")
READ_SIZES = (64, 256, 1024, 4096, 16384)
READ_REPEATS = 3
SLOW_READ_S = 2.0   # a transport this slow per read skips larger sizes


class DebuggerBench(kgdboe.Test):
    def __init__(self, a):
        super().__init__(a)
        self.transport = None
        self.per_transport = {}
        self.key_file = os.path.join(a.workdir, "kgdboe.key")

    def boot(self):
        self.guest = npng.Guest(
            self.a.nic, self.a.workdir, self.a.serial_log, self.a.kernel,
            self.a.initrd, cpus=self.a.cpus,
            extra_append=npng.kgdboe_arg() + " " + self.a.append,
            extra_qemu=["-serial", "tcp:127.0.0.1:%d,server=on,wait=off"
                        % KGDBOC_PORT,
                        "-gdb", "tcp:127.0.0.1:%d" % GDBSTUB_PORT])
        info = self.guest.wait_ready(self.a.boot_timeout)
        return "%d cpu(s), driver %s" % (info["cpus"], info["driver"])

    def gdb_settings(self):
        """gdb's packet log costs gdb time per byte, which would be
        measured with the transport: only with --debug-remote."""
        unasked = ["remote supported-packets-packet off"] \
            if self.a.no_packet_size else []
        logged = super().gdb_settings() if self.a.debug_remote else []
        return logged + unasked

    def remote_target(self):
        guest = "%s:%d" % (npng.GUEST_IP, npng.KGDBOE_PORT)
        return {"kgdboe": "udp:" + guest,
                "kgdboe-auth": "| %s --key-file %s %s" % (
                    npng.BRIDGE, self.key_file, guest),
                "kgdboc": "tcp:127.0.0.1:%d" % KGDBOC_PORT,
                "gdbstub": "tcp:127.0.0.1:%d" % GDBSTUB_PORT}[self.transport]

    def enter(self):
        """What stops the kernel for this transport, before gdb attaches:
        kgdboe breaks in on gdb's first packet, QEMU stops the machine,
        kgdboc needs SysRq g (the agent waits in it until gdb detaches)."""
        self.pending_tag = None
        if self.transport == "kgdboe-auth":
            return self.set_key()
        if self.transport != "kgdboc":
            return "nothing to do"
        self.guest.run("echo ttyS2,115200 > "
                       "/sys/module/kgdboc/parameters/kgdboc", timeout=20)
        self.pending_tag = self.guest.start("echo g > /proc/sysrq-trigger")
        time.sleep(1)
        return "kgdboc on ttyS2 at 115200, SysRq g"

    def set_key(self):
        """kgdboe in authenticated mode: a random key, in a file for the
        bridge and in kgdboe's write-only parameter."""
        key = secrets.token_hex(32)
        with open(self.key_file, "w") as f:
            f.write(key + "\n")
        self.guest.run("echo %s > /sys/module/kgdboe/parameters/key" % key,
                       timeout=20)
        rc, dm = self.guest.run("dmesg | grep kgdboe | tail -n 3",
                                timeout=20, check=False)
        if "authenticated" not in dm:
            raise kgdboe.StepFailed("not in authenticated mode: %s"
                                    % npng.one_line(dm))
        return "authenticated mode, gdb through %s" % \
            os.path.relpath(npng.BRIDGE, npng.TOP)

    def read_sizes(self):
        """Kernel text read READ_REPEATS times per size, each time at an
        address gdb has not read (no cache can answer).  Once one size's
        median read takes SLOW_READ_S, the larger sizes are left out
        (kgdboc: 16 KiB would take 3 x 12 s at a flat rate)."""
        addr = self.text_addr + 2 * 65536
        rates, out = {}, []
        for size in READ_SIZES:
            times = []
            for _ in range(READ_REPEATS):
                t = time.monotonic()
                self.gdb.cmd("-data-read-memory-bytes 0x%x %d" % (addr, size),
                             timeout=120)
                times.append(time.monotonic() - t)
                addr += size
            rates[str(size)] = round(size / 1024 / statistics.median(times),
                                     1)
            out.append("%d B %.1f KiB/s" % (size, rates[str(size)]))
            if statistics.median(times) > SLOW_READ_S:
                out.append("larger sizes left out (%.1f s per read)"
                           % statistics.median(times))
                break
        self.metrics["read_kib_s"] = rates
        return ", ".join(out)

    def leave(self):
        g = self.gdb
        g.cmd("-break-delete")
        g.cmd("-target-detach")
        self.attached = False
        g.close()
        # in the order the agent ran them: SysRq g ended at the continue
        if self.pending_tag:
            self.guest.finish(self.pending_tag, "sysrq g", timeout=60)
        self.guest.finish(self.sync_tag, "sync", timeout=60)
        self.guest.run("echo alive", timeout=20)
        return "detached, guest runs"

    def one_transport(self, name):
        self.transport = name
        self.metrics = {}
        self.step(name + "_enter", self.enter)
        if self.step(name + "_attach", self.attach, needs=name + "_enter"):
            self.step(name + "_reads", self.reads, True)
            self.step(name + "_read_sizes", self.read_sizes, True)
            self.step(name + "_dump64k", self.dump64k, True)
            self.step(name + "_breakpoint", self.breakpoint, True)
            self.step(name + "_leave", self.leave, True,
                      needs=name + "_breakpoint")
        self.per_transport[name] = self.metrics

    def run(self):
        self.find_kernel_addresses()
        if not self.step("boot", self.boot):
            return
        for name in self.a.transports.split(","):
            self.one_transport(name)
            if not self.passed(name + "_leave"):
                break
        self.metrics = self.per_transport
        self.step("splat", self.splat)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    kgdboe.guest_arguments(p)
    p.add_argument("--reads", type=int, default=100)
    p.add_argument("--transports", default=",".join(TRANSPORTS))
    p.add_argument("--debug-remote", action="store_true",
                   help="log gdb's packets (slows gdb down per byte)")
    p.add_argument("--no-packet-size", action="store_true",
                   help="gdb does not send qSupported, so it learns no "
                   "packet size")
    a = p.parse_args()
    # what tests/kgdboe.py's Test reads and this script does not vary
    a.port, a.foreign_ip, a.skip, a.load = npng.KGDBOE_PORT, None, "", False
    return kgdboe.run_test(DebuggerBench(a), a)


if __name__ == "__main__":
    sys.exit(main())
