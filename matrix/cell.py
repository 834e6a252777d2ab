#!/usr/bin/env python3
"""One matrix cell: boot a guest on one NIC model and measure it.

Runs inside the cell's network namespace (matrix/run.py starts it there with
`ip netns exec`; the tap device already exists).  Writes the cell's JSON to
--out, also when a step fails, and always stops its guest.

Steps (--steps full):
  boot         wait for the guest agent's ready marker
  nc_idle      netconsole burst of --burst messages, no load
  echo         --echo datagrams to the netpoll_echo client, kernel running
  trap_echo    the host flushes its neighbour entry, the guest traps for
               --trap-ms (debugfs netpoll_echo/trap: one CPU, interrupts
               off, polling) and --echo datagrams go to the echo client;
               the first one needs an ARP reply from the trapped guest
  iperf_tx     iperf3 guest->host alone
  nc_load_tx   the burst while iperf3 loads guest->host
  iperf_rx     iperf3 host->guest alone
  nc_load_rx   the burst while iperf3 loads host->guest
--steps burst stops after nc_idle (what the tests use), --steps echo
after trap_echo; --steps perf skips echo and trap_echo (perf/perf.py,
which also boots mainline, where there is no echo client).  --steps
sizes (perf/perf.py) runs only bursts of --size-burst records of each
size in PLAIN_SIZES, then switches netconsole to extended messages and
runs EXTENDED_SIZES; its guest has no serial console, so that the
records' cost is netconsole's alone (the other steps' guests print every
record on ttyS0 too, as a machine with a serial console does; splats are
then looked for in dmesg).  The benchmarks' bursts (perf, sizes) time every
write in the guest (kmsg-timed): *_write_us_pct are its percentiles.

The guest boots with netpoll.poll_mode=--poll-mode and the echo client
(netpoll_echo=6600@192.0.2.2/eth0,@192.0.2.1/<host MAC>).
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npng  # noqa: E402
from npng import HarnessError, log  # noqa: E402

ECHO_APPEND = npng.echo_arg()
# --steps sizes: record sizes in bytes, plain netconsole, then extended
# (extended 1000-byte records exceed netconsole's 1000-byte chunk with
# their header: they go out as two fragments)
PLAIN_SIZES = (64, 256, 512, 1000)
EXTENDED_SIZES = (64, 512, 1000)
NC_CONFIGFS = "/sys/kernel/config/netconsole/cmdline0"


def _r(v):
    return None if v is None else round(v, 1)


class Cell:
    def __init__(self, a):
        self.a = a
        self.m = {}
        self.notes = []
        self.wedged = None
        self.lost = []
        self.guest = None
        self.rx = None

    def say(self, msg):
        if self.a.verbose:
            log("    %s: %s" % (self.a.nic, msg))

    def restart_iperf_server(self):
        # Wait until the new server listens on 5201 (0x1451): a client
        # started before that is refused.
        self.guest.run("killall iperf3 2>/dev/null; sleep 0.3; "
                       "iperf3 -s -D >/dev/null 2>&1; i=0; "
                       "until grep -q ':1451 0*:0000 0A' /proc/net/tcp "
                       "/proc/net/tcp6 2>/dev/null; do i=$((i+1)); "
                       "[ $i -gt 100 ] && break; sleep 0.05; done",
                       timeout=30)

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

    def burst(self, tag, n=None, size=None):
        """One netconsole burst of n records (default --burst).  The
        benchmarks (--steps perf, sizes) write them with kmsg-timed, which
        also times each write; the tests with the nc-burst shell loop."""
        n = n or self.a.burst
        timed = self.a.steps in ("perf", "sizes")
        cmd = "%s %s %d" % ("kmsg-timed" if timed else "nc-burst", tag, n)
        if size:
            cmd += " %d" % size
        dgrams = self.rx.datagrams
        t0 = time.monotonic()
        rc, out = self.guest.run(cmd, timeout=self.a.burst_timeout)
        t1 = time.monotonic()
        recs = self.rx.wait_burst(tag, n)
        res = npng.burst_metrics(recs, n)
        m = re.search(r"burst \S+ (\d+) ([\d.]+) ([\d.]+)", out)
        res["guest_s"] = (round(float(m.group(3)) - float(m.group(2)), 2)
                          if m else None)
        res["datagrams_per_msg"] = round((self.rx.datagrams - dgrams) / n, 2)
        pct = re.search(r"^us ((?:[\d.]+ ?){101})$", out, re.M)
        res["us_pct"] = [float(v) for v in pct.group(1).split()] if pct \
            else None
        if timed and not pct:
            self.notes.append("%s: kmsg-timed printed no percentiles: %s"
                              % (tag, npng.one_line(out, 120)))
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
        self.m[prefix + "_datagrams_per_msg"] = res["datagrams_per_msg"]
        if res.get("us_pct"):
            pct = res["us_pct"]
            self.m[prefix + "_write_us_p50"] = pct[50]
            self.m[prefix + "_write_us_p99"] = pct[99]
            self.m[prefix + "_write_us_pct"] = pct

    def iperf_args(self, reverse):
        # NIC quirks are data in matrix/nics (ne2k_pci: -w 8K)
        opts = [] if reverse else npng.nic(self.a.nic).iperf_rx_opts
        if opts:
            self.m["iperf_host_to_guest_opts"] = " ".join(opts)
        return opts

    def iperf_alone(self, reverse, key):
        self.restart_iperf_server()
        ip = npng.Iperf(reverse, self.a.iperf_seconds,
                        extra=self.iperf_args(reverse))
        ok = ip.wait()
        what = "iperf3 %s" % ("guest->host" if reverse else "host->guest")
        with open("%s.iperf-%s.txt" % (self.a.serial_log,
                                       "tx" if reverse else "rx"), "w") as f:
            f.write("\n".join(ip.text) + "\n")
        if ok and ip.summary is not None:
            self.m[key] = round(ip.summary, 1)
            self.say("%s %.1f Mbit/s" % (what, ip.summary))
            return True
        self.m[key] = None
        self.notes.append("%s failed: %s" % (what, ip.error()))
        self.say(self.notes[-1])
        self.check_alive(what)
        return False

    def nc_stats(self):
        try:
            return npng.read_stats(self.guest, "netconsole-")
        except npng.HarnessError:
            return None

    def put_send_stats(self, prefix, before, after):
        """Send-path figures of netconsole's statistics between two
        readings: log2-bucket percentiles and the deltas of the counters."""
        if not before or not after:
            # mainline, which perf/perf.py boots too, has none
            if self.a.steps != "perf":
                self.notes.append("%s: no netpoll statistics in debugfs"
                                  % prefix)
            return
        hist = npng.hist_delta(after, before)
        self.m[prefix + "_send_p50_us"] = npng.hist_percentile_us(hist, 0.5)
        self.m[prefix + "_send_p99_us"] = npng.hist_percentile_us(hist, 0.99)
        if after.get("send_ns_max", 0) > before.get("send_ns_max", 0):
            smax = round(after["send_ns_max"] / 1000.0, 1)
        else:
            # The all-time maximum was set before this burst: the top
            # non-empty bucket bounds this burst's maximum.
            top = max([i for i, n in enumerate(hist) if n] or [-1])
            smax = round(2 ** (top + 1) / 1000.0, 1) if top >= 0 else None
        self.m[prefix + "_send_max_us"] = smax
        for k in ("sent", "dropped", "deferred", "tx_polled", "tx_polls"):
            if k in after:
                self.m["%s_%s" % (prefix, k)] = after[k] - before.get(k, 0)

    def why_no_trap_rx(self):
        """The core's setup report of how the echo client's device is
        polled: why trapped receive cannot work, or what it polls."""
        found = None
        try:
            with open(self.a.serial_log, errors="replace") as f:
                for line in f:
                    if "netpoll: netpoll_echo: eth0:" in line:
                        found = npng.one_line(line.split("] ", 1)[-1], 200)
        except OSError:
            pass
        return found

    def echo(self):
        a = self.a
        rc, _ = self.guest.run("test -e /sys/kernel/debug/netpoll_echo/trap",
                               timeout=30, check=False)
        if rc:
            self.notes.append("echo: the kernel has no netpoll_echo client "
                              "(CONFIG_NETPOLL_ECHO)")
            return False
        st = npng.read_stats(self.guest, "netpoll_echo-")
        if st:
            self.m["poll_how"] = st.get("poll_how")
        ec = npng.Echo()
        try:
            ec.rtts(20)                             # warm-up, ARP
            r, lost, sent = ec.rtts(a.echo)
            self.m["echo_rtt_p50_us"] = _r(npng.quantile(r, 0.5))
            self.m["echo_rtt_p99_us"] = _r(npng.quantile(r, 0.99))
            self.m["echo_lost"] = lost
            self.m["echo_lost_seqs"] = ec.lost_seqs[:20]
            self.m["echo_late"] = ec.late
            self.say("echo running: %d/%d, p50 %s us, p99 %s us" % (
                len(r), sent, self.m["echo_rtt_p50_us"],
                self.m["echo_rtt_p99_us"]))
            if lost:
                self.lost.append("echo lost %d/%d" % (lost, sent))
        finally:
            ec.close()
        return True

    def trap_echo(self):
        a = self.a
        before = npng.read_stats(self.guest, "netpoll_echo-") or {}
        npng.flush_neigh()
        flushed = npng.neigh_state()[1] is None
        ec = npng.Echo()
        cmd = "echo %d > /sys/kernel/debug/netpoll_echo/trap" % a.trap_ms
        t0 = time.monotonic()
        tag = self.guest.start(cmd)
        try:
            # Give the agent time to start the trap; echoes that arrive
            # before it would not count as trapped (checked below).
            time.sleep(1.0)
            r, lost, sent = ec.rtts(a.echo, timeout=0.3,
                                    until=t0 + a.trap_ms / 1000.0 - 0.5)
            t_sent = time.monotonic() - t0
        finally:
            ec.close()
        self.guest.finish(tag, cmd, timeout=a.trap_ms // 1000 + 60)
        rc, out = self.guest.run("cat /sys/kernel/debug/netpoll_echo/trap",
                                 timeout=30)
        trap = npng.parse_kv(out)
        after = npng.read_stats(self.guest, "netpoll_echo-") or {}
        state, lladdr = npng.neigh_state()
        unsent = a.echo - sent
        got = len(r)
        self.m["trap_echo_rtt_p50_us"] = _r(npng.quantile(r, 0.5))
        self.m["trap_echo_rtt_p99_us"] = _r(npng.quantile(r, 0.99))
        # lost: never answered (or not sent: the trap was over); late:
        # answered after the 300 ms this measurement waits for each one
        self.m["trap_echo_lost"] = lost + unsent
        self.m["trap_echo_lost_seqs"] = ec.lost_seqs[:20]
        self.m["trap_echo_late"] = ec.late
        self.m["trap_echo_count"] = a.echo
        self.m["trap_echo_sent"] = sent
        self.m["trap_polls"] = trap.get("polls")
        self.m["trap_delivered"] = trap.get("delivered")
        for k in ("sent", "queued", "dropped", "deferred", "tx_polled",
                  "malformed", "foreign"):
            if k in after:
                self.m["trap_echo_client_" + k] = (after[k] -
                                                   before.get(k, 0))
        arp = after.get("arp_replies", 0) - before.get("arp_replies", 0)
        self.m["trap_arp_replies"] = arp
        self.m["trap_arp_ok"] = bool(flushed and arp > 0 and got > 0 and
                                     lladdr == npng.GUEST_MAC)
        self.say("trap echo: %d/%d in time, %d late, in %.1fs, p50 %s us, p99 %s us, trap "
                 "delivered %s in %s polls, ARP replies %d (neighbour %s %s)"
                 % (got, a.echo, ec.late, t_sent,
                    self.m["trap_echo_rtt_p50_us"],
                    self.m["trap_echo_rtt_p99_us"], trap.get("delivered"),
                    trap.get("polls"), arp, state, lladdr))
        why = []
        if lost + unsent:
            why.append("trap_echo lost %d/%d%s" % (
                lost + unsent, a.echo,
                " (%d not sent: trap time over)" % unsent if unsent else ""))
        if got and (trap.get("delivered") or 0) < got + ec.late:
            why.append("only %s of %d echoes were answered while trapped"
                       % (trap.get("delivered"), got))
        if not self.m["trap_arp_ok"]:
            why.append("ARP not answered in trap (neighbour flushed: %s, "
                       "arp_replies +%d, entry %s %s)" % (
                           flushed, arp, state, lladdr))
        if why:
            reason = self.why_no_trap_rx()
            if reason:
                why.append("core: " + reason)
            self.lost.append("; ".join(why))

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
        before = self.nc_stats()
        res = self.burst(prefix.replace("nc_", ""))
        alive = ip.proc.poll() is None
        if reverse:
            self.put_send_stats(prefix, before, self.nc_stats())
        t0, t1 = res["host_window"]
        mbps = ip.mbps_between(t0, max(t1, res["last_rx"] or t1))
        ip.kill()
        self.put_burst(prefix, res)
        self.m[prefix + "_iperf_mbps"] = mbps
        if not alive or mbps is None:
            self.notes.append("%s load stopped during the burst" % what)
            self.check_alive(what)

    def extended_netconsole(self):
        """The boot target (cmdline0) switched to extended messages
        through configfs: the same on mainline and on the series."""
        rc, out = self.guest.run(
            "mkdir -p %s && cd %s && echo 0 > enabled && "
            "echo 1 > extended && "
            "echo 1 > enabled && cat extended enabled" % (NC_CONFIGFS,
                                                          NC_CONFIGFS),
            timeout=30, check=False)
        if out.split()[-2:] != ["1", "1"]:
            raise HarnessError("fail", "netconsole did not switch to "
                               "extended messages: %s" % npng.one_line(out))

    def sizes(self):
        """Netconsole bursts of --size-burst records per size, plain then
        extended."""
        n = self.a.size_burst
        for size in PLAIN_SIZES:
            self.put_burst("nc_plain%d" % size,
                           self.burst("p%d" % size, n, size))
        self.extended_netconsole()
        for size in EXTENDED_SIZES:
            self.put_burst("nc_ext%d" % size,
                           self.burst("e%d" % size, n, size))
        # no serial console: the kernel's log for the splat check
        rc, out = self.guest.run("dmesg", timeout=60, check=False)
        with open(self.a.serial_log + ".dmesg", "w") as f:
            f.write(out)

    def run(self):
        a = self.a
        t_boot = time.monotonic()
        self.guest = npng.Guest(a.nic, a.workdir, a.serial_log, a.kernel,
                                a.initrd, cpus=a.cpus,
                                extra_append=" ".join([
                                    ECHO_APPEND,
                                    "netpoll.poll_mode=%s" % a.poll_mode,
                                    a.append]),
                                nc_port=a.nc_port,
                                serial_console=a.steps != "sizes")
        info = self.guest.wait_ready(a.boot_timeout)
        self.m["boot_s"] = round(time.monotonic() - t_boot, 1)
        self.say("booted in %.1fs: %s, driver %s" % (
            self.m["boot_s"], info["release"], info["driver"]))
        self.rx = npng.NcReceiver(port=npng.NC_PORT,
                                  logpath=a.serial_log + ".netconsole")
        if a.steps == "sizes":
            self.sizes()
            return
        self.put_burst("nc_idle", self.burst("idle"))
        if a.steps == "burst":
            return
        if a.steps != "perf" and self.echo():
            self.trap_echo()
        if a.steps == "echo":
            return
        if self.iperf_alone(True, "iperf_tx_mbps"):
            self.loaded_burst(True, "nc_load_tx")
        if self.wedged:
            return
        if self.iperf_alone(False, "iperf_rx_mbps"):
            self.loaded_burst(False, "nc_load_rx")

    def result(self, status, detail):
        info = self.guest.info if self.guest else {}
        splat = npng.first_splat(self.a.serial_log)
        if not splat and os.path.exists(self.a.serial_log + ".dmesg"):
            splat = npng.first_splat(self.a.serial_log + ".dmesg")
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
    lost = list(cell.lost)
    for p in sorted(k[:-len("_missing")] for k in m
                    if k.startswith("nc_") and k.endswith("_missing")):
        if m.get(p + "_missing"):
            lost.append("%s lost %d/%d" % (p, m[p + "_missing"],
                                           m[p + "_sent"]))
        elif m.get(p + "_reordered"):
            lost.append("%s reordered %d" % (p, m[p + "_reordered"]))
    if lost or cell.notes:
        return ("loss" if lost else "fail"), "; ".join(lost + cell.notes)
    if cell.a.steps in ("full", "perf") and \
            m.get("nc_load_rx_sent") is None:
        return "fail", "not every step ran"
    if cell.a.steps == "sizes" and \
            m.get("nc_ext%d_sent" % EXTENDED_SIZES[-1]) is None:
        return "fail", "not every size ran"
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
    p.add_argument("--steps", choices=("full", "burst", "echo", "perf",
                                          "sizes"),
                   default="full")
    p.add_argument("--echo", type=int, default=1000,
                   help="datagrams per echo measurement")
    p.add_argument("--trap-ms", type=int, default=6000)
    p.add_argument("--burst", type=int, default=5000)
    p.add_argument("--size-burst", type=int, default=1000,
                   help="records per size with --steps sizes")
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
