#!/usr/bin/env python3
"""Record a literal gdb -batch session against a kgdboe guest.

Boots the matrix kernel on one NIC with kgdboe on the command line, loads
the NIC guest->host with iperf3 (unless --no-load), runs gdb in batch mode
with a fixed list of commands, makes the guest hit the breakpoint (`sync`
from userland) and interrupts gdb with SIGINT, the way a user presses
Ctrl-C.  Every gdb output line is written with the seconds since gdb
started; "[host]" lines are this script's actions.

Run as root; it makes its own network namespace (tests/transcript.py
--out docs/kgdboe-session.txt, or `make transcript`).  Exits non-zero
when gdb fails, the breakpoint is not hit or the guest does not survive.
"""

import argparse
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
import npng  # noqa: E402
from relay import LossyRelay  # noqa: E402

GDB_CMDS = ["set architecture i386",
            "target remote udp:%s:%d" % (npng.GUEST_IP, npng.KGDBOE_PORT),
            "info registers eip esp",
            "bt",
            "p init_uts_ns.name.release",
            "p 'kgdboe.c'::parks",
            "break ksys_sync", "continue", "bt 3", "next", "step",
            "info registers eip", "delete", "continue", "bt 3", "detach"]


def gdb_commands(a, key_file, relay):
    """GDB_CMDS; with --key, through the bridge (and the relay)."""
    if not a.key:
        return GDB_CMDS
    host, port = relay.listen if relay else (npng.GUEST_IP,
                                             npng.KGDBOE_PORT)
    target = "target remote | %s --key-file %s %s:%d" % (
        os.path.relpath(npng.BRIDGE, TOP), key_file, host, port)
    return [target if c.startswith("target remote") else c
            for c in GDB_CMDS]


def set_key(guest, workdir):
    """A random key, in the guest's write-only parameter and a file."""
    key = secrets.token_hex(32)
    path = os.path.join(workdir, "kgdboe.key")
    with open(path, "w") as f:
        f.write(key + "\n")
    guest.run("echo %s > /sys/module/kgdboe/parameters/key" % key,
              timeout=30)
    return os.path.relpath(path, TOP)


def outer(a):
    """Make a namespace, run ourselves inside it, delete it."""
    return npng.run_in_netns(
        "npng-%d-transcript" % os.getpid(),
        [sys.executable, os.path.abspath(__file__), "--inside"]
        + sys.argv[1:])


def inside(a):
    os.makedirs(a.workdir, exist_ok=True)
    out = open(a.out, "w")

    def say(line):
        print(line, flush=True)
        out.write(line + "\n")
        out.flush()

    kernel = os.path.join(a.obj, "arch", "x86", "boot", "bzImage")
    vmlinux = os.path.join(a.obj, "vmlinux")
    guest = npng.Guest(a.nic, a.workdir, os.path.join(a.workdir, "serial.log"),
                       kernel, a.initrd, cpus=a.cpus,
                       extra_append=npng.kgdboe_arg())
    iperf = None
    relay = None
    hit = False
    try:
        info = guest.wait_ready(180)
        _, rel = guest.run("uname -r", timeout=20)
        key_file = set_key(guest, a.workdir) if a.key else None
        if a.key and a.loss:
            relay = LossyRelay(("127.0.0.1", 0), (npng.GUEST_IP,
                                                  npng.KGDBOE_PORT),
                               seed=1, source=(npng.HOST_IP, 0),
                               drop=a.loss, dup=a.loss / 2,
                               reorder=a.loss / 2).__enter__()
        cmds = gdb_commands(a, key_file, relay)
        say("# gdb -batch session against %s (kernel %s), QEMU %s, %d CPU(s),"
            " %s" % (os.path.relpath(kernel, TOP), rel.strip(), a.nic,
                     info["cpus"], "iperf3 loading the NIC guest->host"
                     if a.load else "no load"))
        say("# recorded %s by tests/transcript.py (times: seconds since gdb"
            " started; [host] lines are the script's actions)"
            % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        if a.key:
            say("# authenticated mode: a random 32-byte key written to "
                "/sys/module/kgdboe/parameters/key and to %s" % key_file)
        if relay:
            say("# through matrix/relay.py: %.0f%% dropped, %.1f%% "
                "duplicated, %.1f%% reordered, each way" % (
                    a.loss * 100, a.loss * 50, a.loss * 50))
        say("# gdb -q -nx -batch %s %s" % (
            " ".join("-ex '%s'" % c for c in cmds),
            os.path.relpath(vmlinux, TOP)))
        say("")
        if a.load:
            iperf = npng.Iperf(True, 600)
            deadline = time.monotonic() + 15
            while not iperf.intervals and time.monotonic() < deadline:
                time.sleep(0.2)
            if not iperf.intervals:
                say("[host] iperf3 did not start: %s" % iperf.error())
                return 1
            say("[host] iperf3 guest->host: %.0f Mbit/s"
                % iperf.intervals[-1][3])
        argv = ["gdb", "-q", "-nx", "-batch"]
        for c in cmds:
            argv += ["-ex", c]
        argv.append(vmlinux)
        gdb = subprocess.Popen(argv, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               cwd=TOP)
        t0 = time.monotonic()
        hit_at = []
        sync = []

        def trigger():
            # the guest runs again once gdb continues; sync hits the
            # breakpoint, and the second continue is interrupted
            time.sleep(a.settle)
            say("[host] guest: sync")
            sync.append(guest.start("sync"))
            time.sleep(a.settle)
            say("[host] SIGINT to gdb")
            gdb.send_signal(signal.SIGINT)

        threading.Thread(target=trigger, daemon=True).start()
        for line in gdb.stdout:
            if "hit Breakpoint 1" in line:
                hit_at.append(time.monotonic())
            say("%7.2f %s" % (time.monotonic() - t0, line.rstrip()))
        gdb.wait()
        hit = bool(hit_at)
        say("[host] gdb exited with %d" % gdb.returncode)
        alive = True
        try:
            if sync:
                guest.finish(sync[0], "sync", timeout=30)
            rc, up = guest.run("uptime", timeout=30, check=False)
        except npng.HarnessError as e:
            alive, up = False, e.detail
        say("[host] guest %s: %s" % ("alive" if alive else "NOT alive",
                                     up.strip()))
        if a.key and alive:
            _, st = guest.run("cat /sys/kernel/debug/kgdboe/stats",
                              timeout=20, check=False)
            say("[host] kgdboe: " + " ".join(
                l.replace(" ", "=") for l in st.splitlines()
                if not l.endswith(" 0")))
        if not hit:
            say("[host] the breakpoint was not hit")
        if iperf:
            t = time.monotonic()
            time.sleep(3)
            moving = [i for i in iperf.intervals if i[0] > t and i[3] > 0]
            say("[host] iperf3 %s" % ("%.0f Mbit/s" % moving[-1][3]
                                      if moving else "moves no data"))
            alive = alive and bool(moving)
        return 0 if gdb.returncode == 0 and hit and alive else 1
    finally:
        if relay:
            relay.stop()
        if iperf:
            iperf.kill()
        guest.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nic", default="e1000")
    p.add_argument("--cpus", type=int, default=2)
    p.add_argument("--no-load", dest="load", action="store_false")
    p.add_argument("--obj", default=os.path.join(TOP, "build", "obj"))
    p.add_argument("--initrd", default=os.path.join(TOP, "build",
                                                    "rootfs.cpio"))
    p.add_argument("--workdir", default=os.path.join(TOP, "build",
                                                     "transcript"))
    p.add_argument("--settle", type=float, default=8.0,
                   help="seconds between gdb's start, sync and SIGINT")
    p.add_argument("--out", default=os.path.join(TOP, "build", "transcript",
                                                 "kgdboe-session.txt"))
    p.add_argument("--key", action="store_true",
                   help="authenticated mode, gdb through build/kgdboe-bridge")
    p.add_argument("--loss", type=float, default=0.0,
                   help="with --key: through matrix/relay.py at this loss")
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("tests/transcript.py: run as root (network namespace, tap)")
    sys.exit(inside(a) if a.inside else outer(a))


if __name__ == "__main__":
    main()
