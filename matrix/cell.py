#!/usr/bin/env python3
"""One matrix cell: boot a guest on one NIC model and measure it.

Runs inside the cell's network namespace (matrix/run.py starts it there with
`ip netns exec`; the tap device already exists).  Writes the cell's JSON to
--out, also when a step fails, and always stops its guest.

Steps (--steps full):
  boot         wait for the guest agent's ready marker
  nc_idle      netconsole burst of --burst messages, no load
  iperf_tx     iperf3 guest->host alone
  nc_load_tx   the burst while iperf3 loads guest->host
  iperf_rx     iperf3 host->guest alone
  nc_load_rx   the burst while iperf3 loads host->guest
--steps burst stops after nc_idle (what the tests use).
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npng  # noqa: E402
from npng import HarnessError, log  # noqa: E402

SPLAT = re.compile(r"(BUG: .*|WARNING: .*|Oops: .*|Kernel panic.*|"
                   r"sleeping function called from invalid context.*|"
                   r"possible circular locking.*|"
                   r"inconsistent lock state.*|"
                   r"possible recursive locking.*|"
                   r"INFO: .*(?:lock|hung|stall).*)")


def first_splat(path):
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = SPLAT.search(line)
                if m:
                    return npng.one_line(m.group(1))
    except OSError:
        pass
    return None


class Cell:
    def __init__(self, a):
        self.a = a
        self.m = {}
        self.notes = []
        self.wedged = None
        self.guest = None
        self.rx = None

    def say(self, msg):
        if self.a.verbose:
            log("    %s: %s" % (self.a.nic, msg))

    def restart_iperf_server(self):
        self.guest.run("killall iperf3 2>/dev/null; sleep 0.3; "
                       "iperf3 -s -D >/dev/null 2>&1", timeout=30)

    def check_alive(self, what):
        """After a failed transfer: can the host still reach the guest?"""
        if npng.ping(count=5, timeout=1):
            return True
        # The serial control channel still answers when the guest's NIC
        # stopped receiving: that is the rx-wedged state, not a dead guest.
        try:
            rc, out = self.guest.run("cat /sys/class/net/eth0/statistics/"
                                     "rx_packets", timeout=20, check=False)
            rx1 = out.strip()
            time.sleep(1)
            npng.ping(count=3, timeout=1)
            rc, out = self.guest.run("cat /sys/class/net/eth0/statistics/"
                                     "rx_packets", timeout=20, check=False)
            rx2 = out.strip()
            self.wedged = ("%s: guest stopped receiving (ping fails, "
                           "rx_packets %s -> %s while pinged; serial "
                           "control still answers)" % (what, rx1, rx2))
        except HarnessError:
            raise HarnessError("fail", "%s: guest dead (no ping, no serial "
                               "answer)" % what)
        return False

    def burst(self, tag):
        n = self.a.burst
        t0 = time.monotonic()
        rc, out = self.guest.run("nc-burst %s %d" % (tag, n),
                                 timeout=self.a.burst_timeout)
        t1 = time.monotonic()
        recs = self.rx.wait_burst(tag, n)
        res = npng.burst_metrics(recs, n)
        m = re.search(r"burst \S+ (\d+) ([\d.]+) ([\d.]+)", out)
        res["guest_s"] = (round(float(m.group(3)) - float(m.group(2)), 2)
                          if m else None)
        res["host_window"] = (t0, t1)
        self.say("%s: %d/%d received, %d missing, %d reordered, %s msg/s"
                 % (tag, res["received"], n, res["missing"],
                    res["reordered"], res["msgs_per_s"]))
        return res

    def put_burst(self, prefix, res):
        self.m[prefix + "_sent"] = res["sent"]
        self.m[prefix + "_received"] = res["received"]
        self.m[prefix + "_missing"] = res["missing"]
        self.m[prefix + "_reordered"] = res["reordered"]
        self.m[prefix + "_duplicates"] = res["duplicates"]
        self.m[prefix + "_msgs_per_s"] = res["msgs_per_s"]
        self.m[prefix + "_guest_s"] = res["guest_s"]

    def iperf_args(self, reverse):
        # QEMU 7.2's ne2000 drops frames when its receive ring is full
        # without raising the overflow interrupt, and receive dies for
        # good (README, NIC notes).  A TCP window of 8 KiB cannot fill
        # its ring, so host->guest load on ne2k_pci uses one.
        if self.a.nic == "ne2k_pci" and not reverse:
            self.m["iperf_host_to_guest_opts"] = "-w 8K"
            return ["-w", "8K"]
        return []

    def iperf_alone(self, reverse, key):
        self.restart_iperf_server()
        ip = npng.Iperf(reverse, self.a.iperf_seconds,
                        extra=self.iperf_args(reverse))
        ok = ip.wait()
        what = "iperf3 %s" % ("guest->host" if reverse else "host->guest")
        if ok and ip.summary is not None:
            self.m[key] = round(ip.summary, 1)
            self.say("%s %.1f Mbit/s" % (what, ip.summary))
            return True
        self.m[key] = None
        self.notes.append("%s failed: %s" % (what, ip.error()))
        self.say(self.notes[-1])
        self.check_alive(what)
        return False

    def loaded_burst(self, reverse, prefix):
        self.restart_iperf_server()
        ip = npng.Iperf(reverse, self.a.load_max_seconds,
                        extra=self.iperf_args(reverse))
        time.sleep(2.5)
        what = "iperf3 %s" % ("guest->host" if reverse else "host->guest")
        if ip.proc.poll() is not None or not ip.intervals:
            ip.kill()
            self.notes.append("%s load did not start: %s" % (what,
                                                            ip.error()))
            self.check_alive(what)
            return
        res = self.burst(prefix.replace("nc_", ""))
        alive = ip.proc.poll() is None
        t0, t1 = res["host_window"]
        mbps = ip.mbps_between(t0, max(t1, res["last_rx"] or t1))
        ip.kill()
        self.put_burst(prefix, res)
        self.m[prefix + "_iperf_mbps"] = mbps
        if not alive or mbps is None:
            self.notes.append("%s load stopped during the burst" % what)
            self.check_alive(what)

    def run(self):
        a = self.a
        t_boot = time.monotonic()
        self.guest = npng.Guest(a.nic, a.workdir, a.serial_log, a.kernel,
                                a.initrd, cpus=a.cpus,
                                extra_append=a.append, nc_port=a.nc_port)
        info = self.guest.wait_ready(a.boot_timeout)
        self.m["boot_s"] = round(time.monotonic() - t_boot, 1)
        self.say("booted in %.1fs: %s, driver %s" % (
            self.m["boot_s"], info["release"], info["driver"]))
        self.rx = npng.NcReceiver(port=npng.NC_PORT,
                                  logpath=a.serial_log + ".netconsole")
        self.put_burst("nc_idle", self.burst("idle"))
        if a.steps == "burst":
            return
        if self.iperf_alone(True, "iperf_tx_mbps"):
            self.loaded_burst(True, "nc_load_tx")
        if self.wedged:
            return
        if self.iperf_alone(False, "iperf_rx_mbps"):
            self.loaded_burst(False, "nc_load_rx")

    def result(self, status, detail):
        info = self.guest.info if self.guest else {}
        splat = first_splat(self.a.serial_log)
        if splat and status in ("pass", "loss"):
            status, detail = "splat", splat
        return {
            "nic": self.a.nic,
            "driver": info.get("driver"),
            "expected_driver": self.a.driver,
            "poll_mode": self.a.poll_mode,
            "cpus": info.get("cpus") or self.a.cpus,
            "status": status,
            "detail": detail,
            "guest_release": info.get("release"),
            "metrics": self.m,
            "serial_log": os.path.relpath(self.a.serial_log, npng.TOP),
        }

    def close(self):
        if self.rx:
            self.rx.close()
        if self.guest:
            self.guest.stop()


def classify(cell):
    m = cell.m
    if cell.wedged:
        return "rx-wedged", cell.wedged
    lost = []
    for p in ("nc_idle", "nc_load_tx", "nc_load_rx"):
        if m.get(p + "_missing"):
            lost.append("%s lost %d/%d" % (p, m[p + "_missing"],
                                           m[p + "_sent"]))
        elif m.get(p + "_reordered"):
            lost.append("%s reordered %d" % (p, m[p + "_reordered"]))
    if lost or cell.notes:
        return ("loss" if lost else "fail"), "; ".join(lost + cell.notes)
    if cell.a.steps == "full" and m.get("nc_load_rx_sent") is None:
        return "fail", "not every step ran"
    return "pass", ""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nic", required=True)
    p.add_argument("--driver", default="")
    p.add_argument("--out", required=True)
    p.add_argument("--serial-log", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--kernel", required=True)
    p.add_argument("--initrd", required=True)
    p.add_argument("--steps", choices=("full", "burst"), default="full")
    p.add_argument("--burst", type=int, default=5000)
    p.add_argument("--burst-timeout", type=int, default=300)
    p.add_argument("--boot-timeout", type=int, default=180)
    p.add_argument("--iperf-seconds", type=int, default=5)
    p.add_argument("--load-max-seconds", type=int, default=120)
    p.add_argument("--cpus", type=int, default=1)
    p.add_argument("--poll-mode", default="driver")
    p.add_argument("--nc-port", type=int, default=npng.NC_PORT,
                   help="port the guest's netconsole targets (tests use a "
                        "wrong one to prove that loss is detected)")
    p.add_argument("--append", default="")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args()

    cell = Cell(a)
    try:
        cell.run()
        status, detail = classify(cell)
    except HarnessError as e:
        status, detail = e.status, e.detail
    except KeyboardInterrupt:
        status, detail = "interrupted", "interrupted by the user"
    except Exception as e:  # report, never lose the cell
        status, detail = "fail", "harness error: %r" % e
    finally:
        cell.close()
    npng.write_json(a.out, cell.result(status, detail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
