#!/usr/bin/env python3
"""Turn a matrix JSON file into the Markdown table (stdout)."""

import json
import sys


def fmt(v, nd=0):
    if v is None:
        return "-"
    if isinstance(v, float):
        return ("%%.%df" % nd) % v
    return str(v)


def burst(m, p):
    if m.get(p + "_sent") is None:
        return "-"
    s = "%s/%s" % (m.get(p + "_received"), m.get(p + "_sent"))
    if m.get(p + "_reordered"):
        s += " (%d reord.)" % m[p + "_reordered"]
    return s + " @ %s/s" % fmt(m.get(p + "_msgs_per_s"))


def lost(m):
    if m.get("trap_echo_lost") is None:
        return "-"
    s = "%s/%s" % (m["trap_echo_lost"], m.get("trap_echo_count", "?"))
    if m.get("trap_echo_late"):
        s += " (%d late)" % m["trap_echo_late"]
    return s


def markdown(doc):
    out = []
    out.append("Kernel %s, %d patch(es), QEMU %s (TCG), started %s, "
               "burst of %s netconsole messages." % (
                   doc.get("kernel"), len(doc.get("series", [])),
                   doc.get("qemu"), doc.get("started"), doc.get("burst")))
    out.append("")
    out.append("| NIC | driver | mode | status | iperf3 tx / rx Mbit/s "
               "| netconsole idle: recv/sent @ rate "
               "| + iperf3 guest→host: recv/sent @ rate (iperf Mbit/s) "
               "| + iperf3 host→guest: recv/sent @ rate (iperf Mbit/s) "
               "| detail |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for c in doc.get("cells", []):
        m = c.get("metrics", {})
        out.append("| %s | %s | %s%s | %s | %s / %s | %s | %s (%s) | "
                   "%s (%s) | %s |" % (
                       c["nic"], c.get("driver") or "-", c["poll_mode"],
                       "" if c.get("cpus", 1) == 1
                       else ", %d cpus" % c["cpus"],
                       c["status"],
                       fmt(m.get("iperf_tx_mbps")),
                       fmt(m.get("iperf_rx_mbps")),
                       burst(m, "nc_idle"),
                       burst(m, "nc_load_tx"),
                       fmt(m.get("nc_load_tx_iperf_mbps")),
                       burst(m, "nc_load_rx"),
                       fmt(m.get("nc_load_rx_iperf_mbps")),
                       (c.get("detail") or "").replace("|", "/")))
    if any("echo_rtt_p50_us" in c.get("metrics", {}) or
           "nc_load_tx_send_p50_us" in c.get("metrics", {})
           for c in doc.get("cells", [])):
        out.append("")
        out.append("Polling core: echo round trips measured by the host "
                   "(p50/p99 us; trapped = the guest held with interrupts "
                   "off, polling), ARP answered while trapped after the "
                   "host flushed its neighbour entry, and netconsole's "
                   "send path during the burst under guest→host load "
                   "(log2-bucket bounds, us).")
        out.append("")
        out.append("| NIC | mode | polled by | echo running p50/p99 "
                   "| echo trapped p50/p99 | trapped lost | ARP in trap "
                   "| nc send p50/p99/max | sends that polled "
                   "| dropped / deferred |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for c in doc.get("cells", []):
            m = c.get("metrics", {})
            out.append("| %s | %s | %s | %s / %s | %s / %s | %s | %s "
                       "| %s / %s / %s | %s | %s / %s |" % (
                           c["nic"], c["poll_mode"],
                           m.get("poll_how") or "-",
                           fmt(m.get("echo_rtt_p50_us")),
                           fmt(m.get("echo_rtt_p99_us")),
                           fmt(m.get("trap_echo_rtt_p50_us")),
                           fmt(m.get("trap_echo_rtt_p99_us")),
                           lost(m),
                           {True: "yes", False: "no"}.get(
                               m.get("trap_arp_ok"), "-"),
                           fmt(m.get("nc_load_tx_send_p50_us"), 1),
                           fmt(m.get("nc_load_tx_send_p99_us"), 1),
                           fmt(m.get("nc_load_tx_send_max_us"), 1),
                           fmt(m.get("nc_load_tx_tx_polled")),
                           fmt(m.get("nc_load_tx_dropped")),
                           fmt(m.get("nc_load_tx_deferred"))))
    kcells = [c for c in doc.get("cells", []) if "kgdboe" in c.get("metrics",
                                                                   {})]
    if kcells:
        out.append("")
        out.append("kgdboe: a gdb session (tests/kgdboe.py) while iperf3 "
                   "loads the NIC guest→host: attach, one `print jiffies` "
                   "round trip (median of 100), reading 64 KiB of kernel "
                   "memory, continue → breakpoint hit → gdb stopped.")
        out.append("")
        out.append("| NIC | mode | kgdboe | attach ms | command p50 ms "
                   "| read KiB/s | break ms | failed steps |")
        out.append("|---|---|---|---|---|---|---|---|")
        for c in kcells:
            m = c["metrics"]
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c["nic"], c["poll_mode"], m.get("kgdboe"),
                fmt(m.get("kgdb_attach_ms")),
                fmt(m.get("kgdb_cmd_rtt_p50_ms"), 2),
                fmt(m.get("kgdb_read_kib_per_s")),
                fmt(m.get("kgdb_break_ms")),
                ", ".join(m.get("kgdb_failed_steps") or []) or "-"))
    acells = [c for c in doc.get("cells", [])
              if "kgdboe_auth" in c.get("metrics", {})]
    if acells:
        out.append("")
        out.append("kgdboe authenticated (tests/kgdboe_lossy.py): a full "
                   "session through tools/kgdboe-bridge and matrix/relay.py "
                   "(attach, bt, 64 KiB read, breakpoint, step, continue, "
                   "interrupt, detach), without loss and at the loss shown "
                   "(dropped each way, half as many duplicated and "
                   "reordered); then spoofed, replayed and forged datagrams "
                   "from the namespace.")
        out.append("")
        out.append("| NIC | mode | result | session s | loss | session s "
                   "at loss | forged: sent / reached kgdboe / refused | "
                   "failed steps |")
        out.append("|---|---|---|---|---|---|---|---|")
        for c in acells:
            m = c["metrics"]
            out.append("| %s | %s | %s | %s | %s | %s | %s / %s / %s | %s |"
                       % (c["nic"], c["poll_mode"], m.get("kgdboe_auth"),
                          fmt(m.get("auth_session_s"), 1),
                          "%g%%" % (m.get("auth_loss", 0) * 100),
                          fmt(m.get("auth_lossy_session_s"), 1),
                          fmt(m.get("auth_forged_sent")),
                          fmt(m.get("auth_forged_arrived")),
                          fmt(m.get("auth_forged_refused")),
                          ", ".join(m.get("auth_failed_steps") or [])
                          or "-"))
    out += netsysrq_table(doc)
    if "elapsed_s" in doc:
        out.append("")
        out.append("Matrix run took %d s." % doc["elapsed_s"])
    return "\n".join(out) + "\n"


def netsysrq_table(doc):
    """The netsysrq rows (tests/netsysrq.py), as markdown lines."""
    cells = [c for c in doc.get("cells", [])
             if "netsysrq" in c.get("metrics", {})]
    if not cells:
        return []
    out = ["", "netsysrq (tests/netsysrq.py, one CPU): SysRq commands from "
           "tools/netsysrq; sysrq_ack_ms is the median time from sending a "
           "command to its acknowledgment (h, t, su), runaway the same "
           "while a SCHED_FIFO loop holds the CPU; forged: datagrams with "
           "random tags, reaching netsysrq / hashed and refused / dropped "
           "unread past fail_limit.", "",
           "| NIC | result | sysrq_ack_ms | runaway ms | forged: reached / "
           "refused / unread | failed steps |",
           "|---|---|---|---|---|---|"]
    for c in cells:
        m = c["metrics"]
        out.append("| %s | %s | %s | %s | %s / %s / %s | %s |" % (
            c["nic"], m.get("netsysrq"), fmt(m.get("sysrq_ack_ms"), 2),
            fmt(m.get("sysrq_runaway_ack_ms"), 2),
            fmt(m.get("sysrq_forged_reached")),
            fmt(m.get("sysrq_forged_refused")),
            fmt(m.get("sysrq_forged_unread")),
            ", ".join(m.get("sysrq_failed_steps") or []) or "-"))
    return out


def nic_verdict(nic, cells):
    """One NIC's verdict from its cells of one matrix run (matrix/run.py's
    cell_verdict() for each) and its facts in matrix/nics."""
    import run  # matrix/run.py: imported late, it imports this module
    verdicts = {c["poll_mode"]: run.cell_verdict(nic, c) for c in cells}
    bad = ["%s mode: %s" % (mode, "; ".join(why))
           for mode, (v, why) in verdicts.items() if v == "fail"]
    if bad:
        return "avoid: " + "; ".join(bad)
    notes = []
    if nic.iperf_rx_opts:
        notes.append("loaded with iperf3 %s only (matrix/nics)"
                     % " ".join(nic.iperf_rx_opts))
    return "good" + (": " + "; ".join(notes) if notes else
                     ": both pollers and every client pass")


def pair(a, b):
    """Two figures, the driver-mode cell's and the generic one's."""
    return "%s / %s" % (fmt(a), fmt(b))


def nic_table(doc, source):
    """The README's "which NIC?" table from one matrix run; source is the
    run's path, which the table names.  Each figure is the driver-mode
    cell's, then the generic-mode cell's."""
    import npng
    out = ["From [%s](%s) (%d patches, kernel %s, QEMU %s, %s): each "
           "figure is driver poller / generic poller; kgdboe reads under "
           "iperf3 load."
           % (doc.get("name", source), source, len(doc.get("series", [])),
              doc.get("kernel"), doc.get("qemu"),
              str(doc.get("started", ""))[:10]), "",
           "| NIC | driver | tests | generic poller | netconsole msg/s | "
           "trapped echo p50 us | kgdboe KiB/s | verdict |",
           "|---|---|---|---|---|---|---|---|"]
    for nic in npng.read_nics():
        cells = [c for c in doc.get("cells", []) if c["nic"] == nic.model]
        if not cells:
            continue
        drv, gen = ({}, {})
        for c in cells:
            if c["poll_mode"] == "driver":
                drv = c["metrics"]
            elif c["poll_mode"] == "generic":
                gen = dict(c["metrics"], status=c["status"])
        served = gen.get("status") == "pass" and \
            gen.get("poll_how") == "generic"
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            nic.model, nic.driver, "make test" if nic.required else
            "matrix", ("serves it" if served else
                       "no: %s" % (gen.get("status") or "not run")),
            pair(drv.get("nc_idle_msgs_per_s"),
                 gen.get("nc_idle_msgs_per_s")),
            pair(drv.get("trap_echo_rtt_p50_us"),
                 gen.get("trap_echo_rtt_p50_us")),
            pair(drv.get("kgdb_read_kib_per_s"),
                 gen.get("kgdb_read_kib_per_s")),
            nic_verdict(nic, cells)))
    return "\n".join(out) + "\n"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/results/matrix.json"
    with open(path) as f:
        sys.stdout.write(markdown(json.load(f)))


if __name__ == "__main__":
    main()
