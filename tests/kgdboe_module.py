#!/usr/bin/env python3
"""kgdboe, netsysrq and the NIC driver as modules: the NIC's module
loaded and the address set by hand; kgdboe's insmod with bad and good
parameters, a gdb session; a netconsole target made through configfs;
rmmod of the NIC driver under both (kgdboe must release the device, so
that the rmmod returns) and insmod again (kgdboe and the netconsole
target resume, gdb attaches again, netconsole logs again); rmmod of kgdboe, and gdb refused
afterwards; netsysrq loaded with its configuration and key, a command
acknowledged, rmmod right after it, and no answer afterwards.

Runs inside a network namespace with tap0 (tests/run.py makes one).  The
initrd must hold kgdboe.ko, netsysrq.ko and the NIC driver's module
(<driver>.ko, matrix/nics) at its root.  Prints one PASS/FAIL line per
check and exits 1 when any failed.
"""

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time

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


def load_nic(g, driver):
    """insmod the NIC driver and give eth0 the address the kernel's ip=
    would have (the guest boots with ip=off: there is no eth0 yet)."""
    return g.run("insmod /%s.ko && ip addr add %s/24 dev eth0 && "
                 "ip link set eth0 up" % (driver, npng.GUEST_IP),
                 timeout=60, check=False)


def kgdboe_log(g, pattern):
    """The last line of the guest's kernel log from kgdboe that matches
    the extended regular expression `pattern`, or ""."""
    _, out = g.run("dmesg | grep -E 'kgdboe: %s' | tail -n 1" % pattern,
                   timeout=20, check=False)
    return out.strip()


def wait_for(fn, seconds, interval=0.5):
    """fn()'s first true value within `seconds`, or its last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def wait_kgdboe_log(g, pattern, seconds):
    return wait_for(lambda: kgdboe_log(g, pattern), seconds)


def gdb_attaches(vmlinux, rel):
    """A gdb session: stop, read the release string, detach."""
    out = gdb(vmlinux, "bt 1", "p init_uts_ns.name.release", "detach")
    ok = "kgdb_breakpoint" in out and '"%s"' % rel in out \
        and "detached" in out
    return ok, " | ".join(l for l in out.splitlines()
                          if l.startswith(("$1", "#0", "[Inferior")))


NC_TARGET = "/sys/kernel/config/netconsole/resume"


class NetconsoleListener:
    """The host's end of a configfs netconsole target on eth0."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((npng.HOST_IP, npng.NC_PORT))

    def got(self, marker, seconds):
        """Whether a datagram holding `marker` arrives within `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.sock.recv(2048)
            except socket.timeout:
                return False
            if marker.encode() in data:
                return True
        return False

    def close(self):
        self.sock.close()


def netconsole_target(g):
    """A dynamic netconsole target on eth0 (the boot option's target found
    no eth0: the driver was not loaded yet)."""
    attrs = [("dev_name", "eth0"), ("local_ip", npng.GUEST_IP),
             ("remote_ip", npng.HOST_IP), ("remote_mac", npng.HOST_MAC),
             ("local_port", npng.NC_SRC_PORT),
             ("remote_port", npng.NC_PORT), ("enabled", 1)]
    cmd = " && ".join(["mkdir %s" % NC_TARGET] +
                      ["echo %s > %s/%s" % (v, NC_TARGET, k)
                       for k, v in attrs])
    return g.run(cmd, timeout=30, check=False)


def netconsole_logs(g, nc, marker):
    g.run("echo %s > /dev/kmsg" % marker, timeout=20, check=False)
    return nc.got(marker, 5)


def carrier_up(g, seconds=20):
    return wait_for(lambda: g.run("cat /sys/class/net/eth0/carrier",
                                  timeout=20, check=False)[1].strip() == "1",
                    seconds)


def gdb_at_link_up(g, check, vmlinux, rel):
    """kgdboe resumes at NETDEV_UP, before e1000's watchdog brings the
    carrier up: gdb, right away, must not stop a machine that cannot
    answer (it attaches once its retransmission finds the link up)."""
    early, _ = gdb_attaches(vmlinux, rel)
    rc, out = g.run("echo alive", timeout=30, check=False)
    _, stats = g.run("cat /sys/kernel/debug/kgdboe/stats", timeout=20,
                     check=False)
    no_carrier = npng.parse_kv(stats).get("breaks_no_carrier")
    check("gdb_at_link_up", rc == 0 and "alive" in out,
          "gdb %s, breaks_no_carrier %s; %s" % (
              "attached" if early else "did not attach", no_carrier,
              out or "the guest gave no answer"))


def nic_module_under_kgdboe(g, check, driver, vmlinux, rel):
    """rmmod of the NIC driver while kgdboe and a netconsole target hold
    eth0: kgdboe must release it (else unregister_netdev() waits for
    netpoll's reference for ever: "waiting for eth0 to become free");
    insmod brings eth0 back, and both resume on it."""
    nc = NetconsoleListener()
    try:
        rc, out = netconsole_target(g)
        check("nc_target", rc == 0 and carrier_up(g) and
              netconsole_logs(g, nc, "npng-nc-before"),
              "rc %d %s: a configfs target on eth0 logs" % (rc, out))
        rc, out = g.run("rmmod " + driver, timeout=60, check=False)
        line = wait_kgdboe_log(g, "eth0 went away", 10)
        check("nic_rmmod", rc == 0 and "released it" in line,
              "rc %d %s %s" % (rc, out, line or "no 'went away' message"))
        rc, out = load_nic(g, driver)
        line = wait_kgdboe_log(g, "eth0 came back", 30)
        check("nic_insmod", rc == 0 and "resumed" in line,
              "rc %d %s %s" % (rc, out, line or "no 'came back' message"))
        gdb_at_link_up(g, check, vmlinux, rel)
        netconsole_resumed(g, check, nc)
    finally:
        nc.close()
    ok, detail = gdb_attaches(vmlinux, rel)
    check("gdb_resumed", ok, detail)


def netconsole_resumed(g, check, nc):
    """The netconsole target of nic_module_under_kgdboe() was stopped by
    the rmmod, and resumes by itself once eth0 is back."""
    _, log = g.run("dmesg | grep -E 'netconsole: network logging "
                   "(stopped|resumed) on interface eth0' | tail -n 2",
                   timeout=20, check=False)
    _, enabled = g.run("cat %s/enabled" % NC_TARGET, timeout=20,
                       check=False)
    logs = carrier_up(g) and netconsole_logs(g, nc, "npng-nc-after")
    check("nc_resumed", "unregistered" in log and "resumed" in log and
          enabled.strip() == "1" and logs,
          "%s; enabled %s; %s" % (" | ".join(log.strip().splitlines()),
                                  enabled.strip(),
                                  "logs again" if logs else "no message"))


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

    driver = npng.nic(a.nic).driver
    g = npng.Guest(a.nic, a.workdir, log,
                   os.path.join(a.obj, "arch", "x86", "boot", "bzImage"),
                   a.initrd, cpus=a.cpus, extra_append="ip=off")
    try:
        info = g.wait_ready(180)
        _, rel = g.run("uname -r", timeout=20)
        rel = rel.strip()
        check("boot", info["cpus"] == a.cpus,
              "%s, %d cpu(s)" % (rel, info["cpus"]))
        rc, out = load_nic(g, driver)
        check("nic_insmod_boot", rc == 0, out or "%s.ko loaded" % driver)
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
        ok, detail = gdb_attaches(vmlinux, rel)
        check("gdb", ok, detail)
        rc, out = g.run("echo alive", timeout=30, check=False)
        check("alive", rc == 0 and "alive" in out, out)
        nic_module_under_kgdboe(g, check, driver, vmlinux, rel)
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
