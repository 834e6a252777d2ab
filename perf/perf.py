#!/usr/bin/env python3
"""make perf: the series against mainline in one interleaved run, and
three debuggers on one guest.

The run is a chain of small stages:

  samples    for each NIC, --reps pairs of boots of the two kernels in
             ABBA order (mainline first in even pairs, the series first in
             odd ones), each a matrix cell (matrix/cell.py --steps perf):
             iperf3 alone each way, a netconsole burst idle and during
             each load.  Mainline has netconsole only; the series has
             netconsole, kgdboe and the echo client registered and idle.
  sizes      on --sizes-nic (e1000), --size-reps ABBA pairs of the two
             kernels, each with 1 and with 2 guest CPUs (matrix/cell.py
             --steps sizes): netconsole bursts of 64 to 1000-byte records,
             plain and extended (extended 1000 B records fragment)
  debuggers  perf/debuggers.py on e1000 (series kernel): kgdboe plain and
             authenticated, kgdboc on the 16550 at 115200, QEMU's gdbstub,
             with one guest CPU; then kgdboe alone with two
  summary    per NIC and figure: each kernel's median and min-max, the
             ratio series/mainline, and a verdict only where the ranges do
             not overlap; the goals of the benchmark
  report     perf.json (raw samples included), perf.md, and the plots

Timings on this machine vary by about +-20% from run to run: compare
figures of one run only.
"""

import argparse
import datetime
import glob
import json
import os
import re
import statistics
import sys
import time
import types

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
sys.path.insert(0, os.path.join(TOP, "perf"))
import npng  # noqa: E402
import cell as mcell  # noqa: E402  (matrix/cell.py)
import run as mrun  # noqa: E402  (matrix/run.py)
import plots  # noqa: E402
from npng import log  # noqa: E402

KERNELS = {
    "mainline": {"kernel": os.path.join(npng.BUILD, "obj-base", "arch", "x86",
                                        "boot", "bzImage"),
                 "append": ""},
    "series": {"kernel": os.path.join(npng.BUILD, "obj", "arch", "x86",
                                      "boot", "bzImage"),
               "append": npng.kgdboe_arg()},
}
DEFAULT_NICS = "e1000,rtl8139,pcnet,ne2k_pci,virtio-net-pci"

# (metric of a cell, what it is, True when higher is better)
FIGURES = (
    ("iperf_tx_mbps", "iperf3 guest->host alone, Mbit/s", True),
    ("iperf_rx_mbps", "iperf3 host->guest alone, Mbit/s", True),
    ("nc_idle_msgs_per_s", "netconsole messages/s, idle", True),
    ("nc_idle_us_per_msg", "guest time per netconsole message, idle, us",
     False),
    ("nc_idle_write_us_p50", "one netconsole message's write, idle, p50 "
     "us", False),
    ("nc_idle_write_us_p99", "one netconsole message's write, idle, p99 "
     "us", False),
    ("nc_load_tx_iperf_mbps", "iperf3 guest->host during a netconsole "
     "burst, Mbit/s", True),
    ("nc_load_tx_msgs_per_s", "netconsole messages/s during guest->host "
     "load", True),
    ("nc_load_tx_missing", "netconsole messages lost during guest->host "
     "load", False),
    ("nc_load_tx_send_p50_us", "netconsole send time p50 during "
     "guest->host load, us (the series' own histogram; mainline has none)",
     False),
    ("nc_load_rx_iperf_mbps", "iperf3 host->guest during a netconsole "
     "burst, Mbit/s", True),
    ("nc_load_rx_msgs_per_s", "netconsole messages/s during host->guest "
     "load", True),
    ("nc_load_rx_missing", "netconsole messages lost during host->guest "
     "load", False),
)


# ------------------------------------------------------------- samples

def abba(reps):
    """The kernel order of each repetition: AB, BA, AB, ..."""
    pair = ("mainline", "series")
    return [pair if r % 2 == 0 else pair[::-1] for r in range(reps)]


def cell_args(a, kernel, steps="perf", cpus=1):
    return types.SimpleNamespace(
        kernel=KERNELS[kernel]["kernel"], initrd=a.initrd, steps=steps,
        burst=a.burst, size_burst=a.size_burst,
        iperf_seconds=a.iperf_seconds, cpus=cpus, echo=0,
        nc_port=npng.NC_PORT, append=KERNELS[kernel]["append"],
        verbose=False, cell_timeout=a.cell_timeout)


def one_cell(a, idx, nic, kernel, rep, steps="perf", cpus=1):
    """A matrix cell in a results directory of its own; the cell."""
    results = os.path.join(a.results, steps if steps != "perf" else
                           "samples", "%s-%s-%dcpu-%d" % (nic, kernel,
                                                          cpus, rep))
    os.makedirs(results, exist_ok=True)
    return mrun.run_cell(cell_args(a, kernel, steps, cpus), idx, nic,
                         npng.nic(nic).driver, "driver", results, "")


def one_sample(a, idx, nic, kernel, rep):
    cell = one_cell(a, idx, nic, kernel, rep)
    m = dict(cell["metrics"])
    if m.get("nc_idle_guest_s") and a.burst:
        m["nc_idle_us_per_msg"] = round(m["nc_idle_guest_s"] * 1e6 /
                                        a.burst, 1)
    return {"nic": nic, "kernel": kernel, "rep": rep,
            "status": cell["status"], "detail": cell.get("detail"),
            "metrics": m}


def run_samples(a):
    plan = [(nic, kernel, rep) for nic in a.nics
            for rep, order in enumerate(abba(a.reps)) for kernel in order]
    samples, t0 = [], time.monotonic()
    for i, (nic, kernel, rep) in enumerate(plan):
        s = one_sample(a, i, nic, kernel, rep)
        samples.append(s)
        m = s["metrics"]
        log("[%d/%d] %-15s %-8s rep %d: %s, iperf3 %s/%s Mbit/s, netconsole "
            "%s msg/s (elapsed %ds)" % (
                i + 1, len(plan), nic, kernel, rep, s["status"],
                m.get("iperf_tx_mbps"), m.get("iperf_rx_mbps"),
                m.get("nc_idle_msgs_per_s"), time.monotonic() - t0))
    return samples


def run_sizes(a):
    """Netconsole against record size, 1 and 2 guest CPUs, both kernels."""
    plan = [(kernel, cpus, rep)
            for rep, order in enumerate(abba(a.size_reps))
            for kernel in order for cpus in (1, 2)]
    samples, t0 = [], time.monotonic()
    for i, (kernel, cpus, rep) in enumerate(plan):
        cell = one_cell(a, 1000 + i, a.sizes_nic, kernel, rep, "sizes",
                        cpus)
        m = cell["metrics"]
        samples.append({"nic": a.sizes_nic, "kernel": kernel, "cpus": cpus,
                        "rep": rep, "status": cell["status"],
                        "detail": cell.get("detail"), "metrics": m})
        log("[sizes %d/%d] %s %-8s %d cpu(s) rep %d: %s, msg/s %s "
            "(elapsed %ds)" % (
                i + 1, len(plan), a.sizes_nic, kernel, cpus, rep,
                cell["status"], " ".join(
                    "%s:%s" % (p, m.get("nc_%s_msgs_per_s" % p))
                    for p in size_prefixes()), time.monotonic() - t0))
    return samples


def size_prefixes():
    """The metric prefixes of a sizes cell, in its order: plain64 ..."""
    return ["plain%d" % n for n in mcell.PLAIN_SIZES] + \
        ["ext%d" % n for n in mcell.EXTENDED_SIZES]


# ----------------------------------------------------------- debuggers

def run_debuggers(a, cpus=1, transports=None):
    """perf/debuggers.py in a namespace of its own; its JSON document."""
    extra = ["--reads", str(a.reads)]
    if transports:
        extra += ["--transports", transports]
    doc = mrun.kgdboe_session(
        "npng-%d-dbg%d" % (os.getpid(), cpus), "debuggers-%dcpu" % cpus,
        "e1000", cpus, KERNELS["series"]["kernel"], a.initrd, a.results,
        extra, 900, script="perf/debuggers.py")
    if doc is None:
        return {"error": "perf/debuggers.py wrote no result"}
    log("debuggers, %d cpu(s): %s" % (cpus, ", ".join(
        "%s %s" % (st["step"], "pass" if st["pass"] else "FAIL")
        for st in doc["steps"] if st["pass"] is not True) or
        "all steps pass"))
    return doc


# ------------------------------------------------------------- summary

def spread(values):
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    return {"median": round(statistics.median(vals), 2), "min": vals[0],
            "max": vals[-1], "n": len(vals), "samples": vals}


MIN_REPS_FOR_VERDICT = 3


def verdict(ms, ss):
    """A ratio only where the two ranges do not overlap, with at least
    MIN_REPS_FOR_VERDICT samples each (one sample is a range of one
    point: any two would 'not overlap')."""
    if not ms or not ss or not ms["median"]:
        return None, "no data"
    ratio = round(ss["median"] / ms["median"], 3)
    if min(ms["n"], ss["n"]) < MIN_REPS_FOR_VERDICT:
        return ratio, "too few repetitions for a verdict"
    if ss["min"] > ms["max"] or ss["max"] < ms["min"]:
        return ratio, "series/mainline %.2f" % ratio
    return ratio, "no measurable difference at this noise"


def summarize(samples, nics):
    out = {}
    for nic in nics:
        rows = {}
        for key, _, _ in FIGURES:
            per = {k: spread(s["metrics"].get(key) for s in samples
                             if s["nic"] == nic and s["kernel"] == k)
                   for k in KERNELS}
            ratio, word = verdict(per["mainline"], per["series"])
            rows[key] = dict(per, ratio=ratio, verdict=word)
        out[nic] = rows
    return out


def summarize_sizes(samples):
    """Per record size: per kernel and CPU count, the spread of the
    delivered rate, of the write time's median and of datagrams per
    record, and the records lost."""
    out = {}
    for p in size_prefixes():
        row = {}
        for k in KERNELS:
            for cpus in (1, 2):
                mine = [s["metrics"] for s in samples
                        if s["kernel"] == k and s["cpus"] == cpus]
                row["%s-%dcpu" % (k, cpus)] = {
                    f: spread(m.get("nc_%s_%s" % (p, f)) for m in mine)
                    for f in ("msgs_per_s", "write_us_p50",
                              "datagrams_per_msg")}
                row["%s-%dcpu" % (k, cpus)]["missing"] = sum(
                    m.get("nc_%s_missing" % p) or 0 for m in mine)
        out[p] = row
    return out


def debugger_figures(doc):
    m = doc.get("metrics") or {}
    return {t: m[t] for t in ("kgdboe", "kgdboe-auth", "kgdboc", "gdbstub")
            if m.get(t)}


def idle_cost_goal(cost):
    """cost: (nic, figure, ratio, verdict) of the iperf3 comparisons."""
    ratios = [c[2] for c in cost if c[2] is not None]
    # only where a verdict was given: ranges apart, enough samples
    below = [c for c in cost if c[2] is not None and c[2] < 0.98 and
             c[3].startswith("series/mainline")]
    if below:
        return "not met: " + ", ".join("%s %s %.2f" % c[:3] for c in below)
    if not ratios:
        return "no data"
    if any(c[3].startswith("too few") for c in cost):
        return "not shown: too few repetitions for a verdict (REPS >= %d)" \
            % MIN_REPS_FOR_VERDICT
    if min(ratios) >= 0.98:
        return "met: every ratio of medians >= 0.98 (%d comparisons)" % \
            len(ratios)
    return ("not shown: no difference is measurable at this noise, but the "
            "ratios of medians range %.2f-%.2f and the ranges overlap: this "
            "run cannot resolve 2%%" % (min(ratios), max(ratios)))


# kgdboe's 64 KiB read goals: (what, transport, at least KiB/s)
DUMP_GOALS = (("kgdboe reads 64 KiB at 2.5 MiB/s or more, idle, plain mode",
               "kgdboe", 2560),
              ("kgdboe reads 64 KiB at 1.5 MiB/s or more, idle, "
               "authenticated mode", "kgdboe-auth", 1536))
# a round trip or a 2-CPU rate within this factor of its reference
WITHIN = 1.5
NOT_MEASURED = (
    "kgdboe reads 64 KiB at 1 MiB/s or more after a stop under iperf3 in "
    "both directions and an 8,000 datagram/s flood, both modes",
    "kgdboe reads 64 KiB in 5 s or less, authenticated mode, 10% dropped "
    "and 5% duplicated and reordered each way")


def debugger_goals(dbg, dbg2):
    """kgdboe's read-rate and round-trip goals, from the debugger runs."""
    out = []
    for what, transport, least in DUMP_GOALS:
        v = dbg.get(transport, {}).get("dump_kib_s")
        out.append((what, "not measured" if v is None else "%s: %.0f KiB/s"
                    % ("met" if v >= least else "not met", v)))
    oe, gs = dbg.get("kgdboe", {}), dbg.get("gdbstub", {})
    if oe.get("read_ms_median") and gs.get("read_ms_median"):
        x = oe["read_ms_median"] / gs["read_ms_median"]
        out.append(("kgdboe's p jiffies round trip within %gx the "
                    "gdbstub's" % WITHIN, "%s: %.2f ms, %.2fx" % (
                        "met" if x <= WITHIN else "not met",
                        oe["read_ms_median"], x)))
    one = oe.get("dump_kib_s")
    two = dbg2.get("kgdboe", {}).get("dump_kib_s")
    if one and two:
        out.append(("kgdboe's 64 KiB read with 2 CPUs within %gx the 1-CPU "
                    "rate" % WITHIN, "%s: %.0f against %.0f KiB/s" % (
                        "met" if two * WITHIN >= one else "not met", two,
                        one)))
    return out + [(what, "not measured: make perf has no such stage yet")
                  for what in NOT_MEASURED]


def goals(summary, dbg, dbg2=None):
    """Whether each goal of the benchmark is met on this machine."""
    out = []
    cost = [(nic, key, r["ratio"], r["verdict"])
            for nic, rows in summary.items()
            for key, r in rows.items() if key in ("iperf_tx_mbps",
                                                  "iperf_rx_mbps")]
    out.append(("idle cost of the clients 2% or less (ratio >= 0.98)",
                idle_cost_goal(cost)))
    oe, oc = dbg.get("kgdboe", {}), dbg.get("kgdboc", {})
    if oe.get("dump_kib_s") and oc.get("dump_kib_s"):
        x = oe["dump_kib_s"] / oc["dump_kib_s"]
        out.append(("kgdboe reads 64 KiB 100x faster than kgdboc or more",
                    "%s: %.0fx" % ("met" if x >= 100 else "not met", x)))
    if oe.get("read_ms_median") and oc.get("read_ms_median"):
        x = oc["read_ms_median"] / oe["read_ms_median"]
        out.append(("kgdboe's command round trip 1/20 of kgdboc's or less",
                    "%s: 1/%.0f" % ("met" if x >= 20 else "not met", x)))
    return out + debugger_goals(dbg, dbg2 or {})


# -------------------------------------------------------------- report

def fmt_spread(s):
    if not s:
        return "-"
    return "%g [%g-%g]" % (s["median"], s["min"], s["max"])


def markdown(doc, matrix):
    out = ["# make perf: %s, %d repetitions (ABBA), kernel %s" % (
        doc["started"], doc["reps"], doc["kernel_version"]), "",
        "Median [min-max] over the repetitions; a ratio verdict only where "
        "the ranges do not overlap.", ""]
    for nic, rows in doc["summary"].items():
        out += ["## %s" % nic, "", "| figure | mainline | series | ratio | "
                "verdict |", "|---|---|---|---|---|"]
        for key, what, _ in FIGURES:
            r = rows[key]
            out.append("| %s | %s | %s | %s | %s |" % (
                what, fmt_spread(r["mainline"]), fmt_spread(r["series"]),
                r["ratio"] if r["ratio"] is not None else "-", r["verdict"]))
        out.append("")
    out += sizes_markdown(doc)
    out += debugger_markdown(doc["debuggers"], doc.get("debuggers_2cpu"))
    out += which_nic(doc, matrix)
    out += ["## Goals", ""] + ["- %s: %s" % g for g in doc["goals"]]
    out += ["", "Run took %d s." % doc["elapsed_s"]]
    return "\n".join(out) + "\n"


def sizes_markdown(doc):
    rows = doc.get("sizes_summary")
    if not rows:
        return []
    cols = ["%s-%dcpu" % (k, c) for c in (1, 2) for k in KERNELS]
    out = ["## Netconsole against record size (%s, idle)" % doc.get(
        "sizes_nic"), "", "%d records per size and boot, %d ABBA pairs; "
        "plain records, then the same boot switched to extended messages "
        "(configfs).  Median [min-max] over the boots." % (
            doc.get("size_burst", 0), doc.get("size_reps", 0)), ""]
    for field, what in (("msgs_per_s", "records/s delivered"),
                        ("write_us_p50", "median write time per record, "
                         "us"),
                        ("datagrams_per_msg", "datagrams per record")):
        out += ["| %s | %s |" % (what, " | ".join(
            c.replace("-1cpu", ", 1 CPU").replace("-2cpu", ", 2 CPUs")
            for c in cols)),
            "|---|" + "---|" * len(cols)]
        for p, row in rows.items():
            kind, size = re.match(r"([a-z]+)(\d+)", p).groups()
            out.append("| %s B %s | %s |" % (
                size, "extended" if kind == "ext" else "plain", " | ".join(fmt_spread(row[c][field])
                                         for c in cols)))
        out.append("")
    lost = {c: sum(r[c]["missing"] for r in rows.values()) for c in cols}
    out += ["Records lost: %s." % ", ".join("%s %d" % kv
                                            for kv in lost.items()), ""]
    return out


def debugger_markdown(dbg, dbg2=None):
    rows = [(t, m) for t, m in dbg.items()] + \
        [("%s, 2 CPUs" % t, m) for t, m in (dbg2 or {}).items()]
    out = ["## Debuggers (e1000, series kernel, one boot per CPU count)", "",
           "| transport | attach ms | p jiffies median ms | 64 KiB read "
           "KiB/s | continue to breakpoint ms |", "|---|---|---|---|---|"]
    for t, m in rows:
        out.append("| %s | %s | %s | %s | %s |" % (
            t, m.get("attach_ms", "-"), m.get("read_ms_median", "-"),
            m.get("dump_kib_s", "-"), m.get("cont_to_bp_ms", "-")))
    sizes = sorted({int(n) for _, m in rows for n in m.get("read_kib_s", {})})
    if sizes:
        out += ["", "Read rate, KiB/s, against the size of one read "
                "(median of 3 reads at fresh addresses):", "",
                "| transport | %s |" % " | ".join("%d B" % n for n in sizes),
                "|---|" + "---|" * len(sizes)]
        for t, m in rows:
            r = m.get("read_kib_s", {})
            out.append("| %s | %s |" % (t, " | ".join(
                str(r.get(str(n), "-")) for n in sizes)))
    return out + [""]


def latest_matrix():
    """The newest matrix JSON: this machine's build/results, else the
    newest named run under docs/results; (path, document) or (None,
    None)."""
    named = sorted(glob.glob(os.path.join(npng.TOP, "docs", "results",
                                          "matrix-*", "matrix.json")))
    for path in [os.path.join(npng.BUILD, "results", "matrix.json")] + \
            named[::-1]:
        if os.path.exists(path):
            with open(path) as f:
                return os.path.relpath(path, npng.TOP), json.load(f)
    return None, None


def nic_verdict(modes, kgdboe):
    if modes.get("driver") != "pass":
        return "avoid: the matrix cell fails (%s)" % modes.get("driver")
    if kgdboe not in (None, "pass"):
        return "logging only: kgdboe %s" % kgdboe
    if modes.get("generic") not in (None, "pass"):
        return "good, with the driver's poll hook (generic mode: %s)" % \
            modes.get("generic")
    return "good: every mode and client passes"


def which_nic(doc, matrix):
    """Per NIC: the perf run's series throughput and netconsole rate, the
    matrix's kgdboe round trip, netsysrq acknowledgment and generic mode."""
    out = ["## Which NIC?", "", "Throughput and netconsole rate: this "
           "run's series medians; for a NIC outside this run the matrix's "
           "figures, marked (matrix): its netconsole bursts are a shell "
           "loop, slower than this run's kmsg-timed.  kgdboe, netsysrq and "
           "the poll modes: the matrix (%s)." % doc.get("matrix_source"), "",
           "| NIC | iperf3 tx/rx Mbit/s | netconsole msg/s | kgdboe p "
           "jiffies ms | netsysrq ACK ms | generic mode | verdict |",
           "|---|---|---|---|---|---|---|"]
    cells = (matrix or {}).get("cells", [])
    for nic in sorted({c["nic"] for c in cells} | set(doc["summary"])):
        modes = {c["poll_mode"]: c["status"] for c in cells
                 if c["nic"] == nic}
        drv = next((c["metrics"] for c in cells if c["nic"] == nic and
                    c["poll_mode"] == "driver"), {})
        rows = doc["summary"].get(nic, {})

        def series(key, src=drv):
            r = rows.get(key, {}).get("series")
            if r:
                return r["median"]
            return "%s (matrix)" % src[key] if key in src else "-"
        out.append("| %s | %s / %s | %s | %s | %s | %s | %s |" % (
            nic, series("iperf_tx_mbps"), series("iperf_rx_mbps"),
            series("nc_idle_msgs_per_s"), drv.get("kgdb_cmd_rtt_p50_ms", "-"),
            drv.get("sysrq_ack_ms", "-"), modes.get("generic", "-"),
            nic_verdict(modes, drv.get("kgdboe"))))
    return out + [""]


# ---------------------------------------------------------------- main

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nics", default=DEFAULT_NICS)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--burst", type=int, default=2000)
    p.add_argument("--iperf-seconds", type=int, default=5)
    p.add_argument("--reads", type=int, default=100)
    p.add_argument("--sizes-nic", default="e1000")
    p.add_argument("--size-reps", type=int, default=2,
                   help="ABBA pairs of the size stage (0: none)")
    p.add_argument("--size-burst", type=int, default=1000)
    p.add_argument("--no-debuggers", action="store_true")
    p.add_argument("--debuggers-only", action="store_true",
                   help="only the debugger stages, on the series kernel "
                   "(no mainline kernel needed)")
    p.add_argument("--report-only", action="store_true",
                   help="no guest: the summary, perf.md and the plots again "
                   "from --results' perf.json")
    p.add_argument("--cell-timeout", type=int, default=600)
    p.add_argument("--initrd", default=os.path.join(npng.BUILD,
                                                    "rootfs.cpio"))
    p.add_argument("--results", default=os.path.join(npng.BUILD, "results",
                                                     "perf"))
    a = p.parse_args()
    a.nics = [n for n in a.nics.split(",") if n]
    known = [n.model for n in npng.read_nics()]
    bad = [n for n in a.nics if n not in known]
    if bad or (a.reps < 1 and not a.debuggers_only):
        sys.exit("perf.py: unknown NIC(s) %s (known: %s), or --reps < 1"
                 % (", ".join(bad), ", ".join(known)))
    if a.debuggers_only and a.no_debuggers:
        sys.exit("perf.py: --debuggers-only and --no-debuggers exclude "
                 "each other")
    if a.debuggers_only:
        a.nics, a.reps, a.size_reps = [], 0, 0
    for name, k in KERNELS.items():
        if a.debuggers_only and name != "series":
            continue
        if not os.path.exists(k["kernel"]):
            sys.exit("perf.py: %s missing (make perf builds it)"
                     % k["kernel"])
    return a


def write_report(doc, results):
    """The summary and goals from the samples; perf.json, perf.md, plots."""
    doc["summary"] = summarize(doc["samples"], doc["nics"])
    doc["sizes_summary"] = summarize_sizes(doc.get("size_samples", []))
    doc["goals"] = goals(doc["summary"], doc["debuggers"],
                         doc.get("debuggers_2cpu", {}))
    doc["matrix_source"], matrix = latest_matrix()
    npng.write_json(os.path.join(results, "perf.json"), doc)
    with open(os.path.join(results, "perf.md"), "w") as f:
        f.write(markdown(doc, matrix))
    made = plots.write_all(doc, results)
    log("perf: %s written; plots: %s" % (
        os.path.relpath(os.path.join(results, "perf.md"), npng.TOP),
        ", ".join(made) or "none (no python3-matplotlib?)"))


def failures(doc):
    """What went wrong in a perf run: samples that did not pass and
    debugger steps that failed.  Any of them makes perf.py exit 1."""
    bad = ["%s %s rep %d%s: %s %s" % (
        s["nic"], s["kernel"], s["rep"],
        " %d cpu(s)" % s["cpus"] if "cpus" in s else "", s["status"],
        s.get("detail") or "")
        for s in doc.get("samples", []) + doc.get("size_samples", [])
        if s["status"] != "pass"]
    for key in ("debugger_run", "debugger_run_2cpu"):
        run = doc.get(key) or {}
        if "error" in run:
            bad.append("%s: %s" % (key, run["error"]))
        bad += ["%s: step %s failed" % (key, st["step"])
                for st in run.get("steps", []) if st["pass"] is not True]
    return bad


def main():
    a = parse_args()
    os.makedirs(a.results, exist_ok=True)
    if a.report_only:
        with open(os.path.join(a.results, "perf.json")) as f:
            write_report(json.load(f), a.results)
        return 0
    t0 = time.monotonic()
    doc = {"started": datetime.datetime.now(datetime.timezone.utc)
           .isoformat(timespec="seconds"), "reps": a.reps, "nics": a.nics,
           "kernel_version": open(os.path.join(npng.BUILD, "kernel-version"))
           .read().strip(), "burst": a.burst,
           "iperf_seconds": a.iperf_seconds, "sizes_nic": a.sizes_nic,
           "size_reps": a.size_reps, "size_burst": a.size_burst}
    log("perf: %d NIC(s) x %d ABBA repetitions x 2 kernels = %d boots, "
        "then %d boots of record sizes%s" % (
            len(a.nics), a.reps, 2 * a.reps * len(a.nics),
            4 * a.size_reps, "" if a.no_debuggers else ", then the debuggers"))
    doc["samples"] = run_samples(a)
    doc["size_samples"] = run_sizes(a)
    dbg = {} if a.no_debuggers else run_debuggers(a)
    dbg2 = {} if a.no_debuggers else run_debuggers(a, 2,
                                                   "kgdboe,kgdboe-auth")
    doc["debugger_run"], doc["debugger_run_2cpu"] = dbg, dbg2
    doc["debuggers"] = debugger_figures(dbg) if dbg else {}
    doc["debuggers_2cpu"] = debugger_figures(dbg2) if dbg2 else {}
    doc["elapsed_s"] = round(time.monotonic() - t0)
    doc["failures"] = failures(doc)
    write_report(doc, a.results)
    for f in doc["failures"]:
        log("perf: FAIL %s" % f)
    log("perf: %d sample(s), %d failure(s)" % (
        len(doc["samples"]) + len(doc["size_samples"]),
        len(doc["failures"])))
    return 1 if doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
