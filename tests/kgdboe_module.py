#!/usr/bin/env python3
"""kgdboe and netsysrq as modules: kgdboe's insmod with bad and good
parameters, a gdb session, rmmod, and gdb refused afterwards; netsysrq
loaded with its configuration and key, a command acknowledged, rmmod right
after it, and no answer afterwards.

Runs inside a network namespace with tap0 (tests/run.py makes one).  The
initrd must hold kgdboe.ko and netsysrq.ko at its root.  Prints one
PASS/FAIL line per check and exits 1 when any failed.
"""

import argparse
import os
import secrets
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
import npng  # noqa: E402

GOOD = npng.kgdboe_config()


def gdb(vmlinux, *cmds):
    argv = ["gdb", "-q", "-nx", "-batch", "-ex", "set architecture i386",
            "-ex", "set remotetimeout 2",
            "-ex", "target remote udp:%s:%d" % (npng.GUEST_IP, npng.KGDBOE_PORT)]
    for c in cmds:
        argv += ["-ex", c]
    argv.append(vmlinux)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "gdb timed out"
    return p.stdout + p.stderr


def netsysrq_tool(keyfile, keys, timeout_s):
    p = subprocess.run([npng.NETSYSRQ, "--key-file", keyfile, "--timeout-s",
                        str(timeout_s), "%s:%d" % (npng.GUEST_IP,
                                                   npng.NETSYSRQ_PORT), keys],
                       capture_output=True, text=True, timeout=timeout_s + 30)
    return p.returncode, (p.stdout + p.stderr).strip()


def netsysrq_module(g, check, workdir):
    """Its exit must wait for the work a command left (the BH work that
    sends the ACK and runs the keys): rmmod comes right after one."""
    key = secrets.token_hex(16)
    keyfile = os.path.join(workdir, "netsysrq.key")
    with open(keyfile, "w") as f:
        f.write(key + "\n")
    rc, out = g.run("insmod /netsysrq.ko %s key=%s" % (
        npng.netsysrq_arg(), key), timeout=30, check=False)
    check("netsysrq_insmod", rc == 0, out or "loaded")
    rc, out = netsysrq_tool(keyfile, "h", 10)
    check("netsysrq_ack", rc == 0 and "acked_ms" in out, npng.one_line(out))
    rc, out = g.run("rmmod netsysrq", timeout=30, check=False)
    check("netsysrq_rmmod", rc == 0, out or "unloaded")
    rc, out = netsysrq_tool(keyfile, "h", 2)
    check("netsysrq_gone", rc == 3, npng.one_line(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--obj", required=True)
    p.add_argument("--initrd", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--nic", default="e1000")
    p.add_argument("--cpus", type=int, default=2)
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    vmlinux = os.path.join(a.obj, "vmlinux")
    log = os.path.join(a.workdir, "serial.log")
    results = []

    def check(name, ok, detail):
        results.append(ok)
        print("%s %-14s %s" % ("PASS" if ok else "FAIL", name,
                               npng.one_line(detail, 150)), flush=True)

    g = npng.Guest(a.nic, a.workdir, log,
                   os.path.join(a.obj, "arch", "x86", "boot", "bzImage"),
                   a.initrd, cpus=a.cpus)
    try:
        info = g.wait_ready(180)
        _, rel = g.run("uname -r", timeout=20)
        rel = rel.strip()
        check("boot", info["cpus"] == a.cpus,
              "%s, %d cpu(s)" % (rel, info["cpus"]))
        rc, out = g.run("insmod /kgdboe.ko kgdboe=garbage", timeout=30,
                        check=False)
        check("bad_string", rc != 0 and "Invalid argument" in out, out)
        rc, out = g.run("insmod /kgdboe.ko kgdboe=@%s/eth7,@%s/%s"
                        % (npng.GUEST_IP, npng.HOST_IP, npng.HOST_MAC),
                        timeout=30,
                        check=False)
        check("missing_dev", rc != 0 and "No such device" in out, out)
        rc, out = g.run("insmod /kgdboe.ko kgdboe=@%s/eth0,@%s/"
                        % (npng.GUEST_IP, npng.HOST_IP), timeout=30,
                        check=False)
        # answers are never broadcast: the peer's MAC is required
        check("missing_mac", rc != 0 and "address required" in out, out)
        rc, out = g.run("insmod /kgdboe.ko kgdboe=" + GOOD, timeout=30,
                        check=False)
        _, dm = g.run("dmesg | grep 'I/O driver kgdboe' | tail -n 1",
                      timeout=20, check=False)
        check("insmod", rc == 0 and "Registered I/O driver kgdboe" in dm,
              "rc %d %s %s" % (rc, out, dm))
        out = gdb(vmlinux, "bt 1", "p init_uts_ns.name.release", "detach")
        check("gdb", "kgdb_breakpoint" in out and '"%s"' % rel in out
              and "detached" in out,
              " | ".join(l for l in out.splitlines()
                         if l.startswith(("$1", "#0", "[Inferior"))))
        rc, out = g.run("echo alive", timeout=30, check=False)
        check("alive", rc == 0 and "alive" in out, out)
        rc, out = g.run("rmmod kgdboe", timeout=30, check=False)
        _, dm = g.run("dmesg | grep 'I/O driver kgdboe' | tail -n 1",
                      timeout=20, check=False)
        check("rmmod", rc == 0 and "Unregistered I/O driver kgdboe" in dm,
              "rc %d %s %s" % (rc, out, dm))
        # not connected, gdb would still print the release string from
        # vmlinux itself: a stop in kgdb_breakpoint is the sign of a stub
        out = gdb(vmlinux, "bt 1")
        check("gdb_refused", "kgdb_breakpoint" not in out,
              out.strip().splitlines()[-1] if out.strip() else "no output")
        rc, out = g.run("echo alive", timeout=30, check=False)
        check("alive_after", rc == 0, out)
        netsysrq_module(g, check, a.workdir)
    except npng.HarnessError as e:
        check("guest", False, e.detail)
    finally:
        g.stop()
    splat = npng.first_splat(log)
    check("splat", not splat, splat or "clean")
    print("%d passed, %d failed" % (results.count(True),
                                    results.count(False)), flush=True)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
