#!/usr/bin/env python3
"""Run the NIC matrix: one network namespace, tap device and guest per NIC.

For each model in matrix/nics (or --nics), create the namespace
npng-<pid>-<n> with tap0 (192.0.2.1/24) inside, run matrix/cell.py there,
then remove every process left in the namespace and the namespace itself,
also on Ctrl-C or a cell that hangs.  Results go to
<results>/matrix.json and <results>/matrix.md.
"""

import argparse
import datetime
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npng  # noqa: E402
import report  # noqa: E402
from npng import log  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def qemu_version():
    try:
        out = npng.sh("qemu-system-i386", "--version")
        return out.split()[3]
    except Exception:
        return "?"


def run_cell(args, idx, nic, driver, mode, results, stamp):
    tag = "%s-%s%s" % (nic, mode,
                       "" if args.cpus == 1 else "-smp%d" % args.cpus)
    serial = os.path.join(results, "%s.log" % tag)
    out = os.path.join(results, ".%s.json" % tag)
    workdir = os.path.join(results, ".work-%s" % tag)
    os.makedirs(workdir, exist_ok=True)
    for f in (serial, out, serial + ".netconsole"):
        if os.path.exists(f):
            os.unlink(f)
    argv = [sys.executable, os.path.join(HERE, "cell.py"), "--nic", nic, "--driver", driver,
            "--out", out, "--serial-log", serial, "--workdir", workdir,
            "--kernel", args.kernel, "--initrd", args.initrd,
            "--steps", args.steps, "--burst", str(args.burst),
            "--iperf-seconds", str(args.iperf_seconds),
            "--cpus", str(args.cpus), "--poll-mode", mode,
            "--echo", str(args.echo),
            "--nc-port", str(args.nc_port), "--append", args.append]
    if getattr(args, "size_burst", None):
        argv += ["--size-burst", str(args.size_burst)]
    if args.verbose:
        argv.append("-v")
    try:
        rc = npng.run_in_netns("npng-%d-%d" % (os.getpid(), idx), argv,
                               None, args.cell_timeout)
        if rc < 0:
            log("    %s: cell exceeded %ds, killed" % (nic, args.cell_timeout))
    finally:
        try:
            os.rmdir(workdir)
        except OSError:
            pass
    try:
        with open(out) as f:
            cell = json.load(f)
        os.unlink(out)
    except (OSError, ValueError):
        cell = {"nic": nic, "driver": None, "expected_driver": driver,
                "poll_mode": mode, "cpus": args.cpus,
                "status": "fail",
                "detail": "cell produced no result (timeout after %ds?)"
                % args.cell_timeout,
                "metrics": {}, "serial_log": os.path.relpath(serial,
                                                             npng.TOP)}
    return cell


KGDB_METRICS = (("attach_ms", "kgdb_attach_ms"),
                ("read_ms_median", "kgdb_cmd_rtt_p50_ms"),
                ("dump_kib_s", "kgdb_read_kib_per_s"),
                ("cont_to_bp_ms", "kgdb_break_ms"))


def kgdboe_session(ns_name, tag, nic, cpus, kernel, initrd, results,
                   extra=(), timeout=900, script="kgdboe.py"):
    """tests/kgdboe.py (with iperf3 guest->host load) or another script
    of its options, such as tests/kgdboe_lossy.py (a path with a / is
    relative to the repository), on one NIC in a
    namespace of its own.  Its output goes to <results>/<tag>.out and
    <tag>.log; returns its JSON document plus "rc", or None when it
    wrote none."""
    out = os.path.join(results, ".%s.json" % tag)
    workdir = os.path.join(results, ".work-%s" % tag)
    if os.path.exists(out):
        os.unlink(out)
    argv = [sys.executable,
            os.path.join(npng.TOP, script if "/" in script
                         else os.path.join("tests", script)), "--nic", nic,
            "--cpus", str(cpus), "--kernel", kernel,
            "--vmlinux", os.path.normpath(os.path.join(
                os.path.dirname(kernel), "..", "..", "..", "vmlinux")),
            "--initrd", initrd, "--workdir", workdir,
            "--serial-log", os.path.join(results, tag + ".log"),
            "--out", out] + (["--load"] if script == "kgdboe.py" else []) \
        + list(extra)
    try:
        with open(os.path.join(results, tag + ".out"), "w") as f:
            rc = npng.run_in_netns(ns_name, argv, f, timeout)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    try:
        with open(out) as f:
            doc = json.load(f)
        os.unlink(out)
    except (OSError, ValueError):
        return None
    doc["rc"] = rc
    return doc


def run_kgdboe(args, idx, nic, mode, results):
    """The kgdboe session for a cell; returns the cell's kgdb metrics."""
    tag = "%s-%s%s-kgdboe" % (nic, mode,
                              "" if args.cpus == 1 else "-smp%d" % args.cpus)
    doc = kgdboe_session("npng-%d-k%d" % (os.getpid(), idx), tag, nic,
                         args.cpus, args.kernel, args.initrd, results,
                         ["--append", "netpoll.poll_mode=%s" % mode],
                         args.cell_timeout)
    if doc is None:
        return {"kgdboe": "no-result"}
    m = {}
    failed = [st["step"] for st in doc["steps"] if st["pass"] is not True]
    m["kgdboe"] = "pass" if not failed and doc["steps"] else (
        failed[0] if failed else "no-steps")
    for src, dst in KGDB_METRICS:
        m[dst] = doc["metrics"].get(src)
    m["kgdb_failed_steps"] = failed
    return m


def kgdboe_summary(metrics):
    """The cell's kgdboe results for its progress line: the status
    column covers netconsole and the echoes only."""
    if "kgdboe" not in metrics:
        return ""
    return " kgdboe %s auth %s netsysrq %s" % (
        metrics.get("kgdboe"), metrics.get("kgdboe_auth"),
        metrics.get("netsysrq"))


# the authenticated session per NIC (tests/kgdboe_lossy.py)
AUTH_LOSS = 0.05
AUTH_METRICS = (("flood_sent", "auth_forged_sent"),
                ("flood_arrived", "auth_forged_arrived"),
                ("flood_refused", "auth_forged_refused"))


def run_kgdboe_auth(args, idx, nic, mode, results):
    """Authenticated kgdboe sessions at 0% and AUTH_LOSS through the
    relay, and the attacks; returns the cell's auth metrics."""
    tag = "%s-%s-kgdboe-auth" % (nic, mode)
    doc = kgdboe_session("npng-%d-a%d" % (os.getpid(), idx), tag, nic, 1,
                         args.kernel, args.initrd, results,
                         ["--append", "netpoll.poll_mode=%s" % mode,
                          "--auth-losses", "0,%g" % AUTH_LOSS, "--attack"],
                         args.cell_timeout, script="kgdboe_lossy.py")
    if doc is None:
        return {"kgdboe_auth": "no-result"}
    failed = [st["step"] for st in doc["steps"] if st["pass"] is not True]
    lossy = "auth_%d" % round(AUTH_LOSS * 100)
    m = {"kgdboe_auth": "pass" if not failed and doc["steps"] else (
        failed[0] if failed else "no-steps"),
        "auth_failed_steps": failed,
        "auth_loss": AUTH_LOSS,
        "auth_session_s": doc["metrics"].get("auth_0", {}).get("session_s"),
        "auth_lossy_session_s": doc["metrics"].get(lossy, {})
        .get("session_s")}
    for src, dst in AUTH_METRICS:
        m[dst] = doc["metrics"].get(src)
    return m


# tests/netsysrq.py's metrics, as the cell's
SYSRQ_METRICS = (("sysrq_ack_ms", "sysrq_ack_ms"),
                 ("runaway_ack_ms", "sysrq_runaway_ack_ms"),
                 ("flood_reached", "sysrq_forged_reached"),
                 ("flood_bad_tag", "sysrq_forged_refused"),
                 ("flood_limited", "sysrq_forged_unread"))


def run_netsysrq(args, idx, nic, results):
    """tests/netsysrq.py on one CPU (it tries both poll modes itself);
    returns the cell's netsysrq metrics."""
    doc = kgdboe_session("npng-%d-s%d" % (os.getpid(), idx),
                         "%s-netsysrq" % nic, nic, 1, args.kernel,
                         args.initrd, results, [], args.cell_timeout,
                         script="netsysrq.py")
    if doc is None:
        return {"netsysrq": "no-result"}
    failed = [st["step"] for st in doc["steps"] if st["pass"] is not True]
    m = {"netsysrq": "pass" if not failed and doc["steps"] else (
        failed[0] if failed else "no-steps"), "sysrq_failed_steps": failed}
    for src, dst in SYSRQ_METRICS:
        m[dst] = doc["metrics"].get(src)
    return m


CLIENT_COLUMNS = ("kgdboe", "kgdboe_auth", "netsysrq")


def cell_verdict(nic, cell):
    """("pass" or "fail", reasons) for one matrix cell: its status and
    every client session it ran must pass, and a driver or generic cell
    must have been polled by the poller it asked for."""
    m = cell["metrics"]
    bad = ["%s %s" % (k, m[k]) for k in CLIENT_COLUMNS
           if k in m and m[k] != "pass"]
    if cell["poll_mode"] in ("driver", "generic") and \
            m.get("poll_how") != cell["poll_mode"]:
        bad.append("polled by %s, want %s" % (m.get("poll_how"),
                                              cell["poll_mode"]))
    if cell["status"] != "pass":
        bad.insert(0, "status %s: %s" % (cell["status"], cell.get("detail")))
    return ("fail" if bad else "pass"), bad


def verdicts(doc):
    """Log one line per cell that did not pass; the number that failed."""
    nics = {n.model: n for n in npng.read_nics()}
    failed = 0
    for c in doc["cells"]:
        v, why = cell_verdict(nics[c["nic"]], c)
        if v != "pass":
            log("matrix: %s %s %s: %s" % (c["nic"], c["poll_mode"],
                                          v.upper(), "; ".join(why)))
        failed += v == "fail"
    log("matrix: %d cell(s), %d failed" % (len(doc["cells"]), failed))
    return failed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nics", help="comma-separated models (default: all in "
                   "matrix/nics)")
    p.add_argument("--results", default=os.path.join(npng.BUILD, "results"))
    p.add_argument("--kernel", default=os.path.join(
        npng.BUILD, "obj", "arch", "x86", "boot", "bzImage"))
    p.add_argument("--initrd", default=os.path.join(npng.BUILD,
                                                    "rootfs.cpio"))
    p.add_argument("--steps", choices=("full", "burst", "echo"),
                   default="full",
                   help="full: every step; burst: boot and the idle "
                   "netconsole burst; echo: also the echo steps")
    p.add_argument("--echo", type=int, default=1000,
                   help="datagrams per echo measurement")
    p.add_argument("--burst", type=int, default=5000)
    p.add_argument("--iperf-seconds", type=int, default=5)
    p.add_argument("--cpus", type=int, default=1)
    p.add_argument("--poll-modes", default="driver,generic",
                   help="comma-separated netpoll.poll_mode values; every "
                   "NIC runs once per mode (driver, generic, auto)")
    p.add_argument("--kgdboe-modes", default="driver,generic",
                   help="poll modes in which a NIC also runs the kgdboe "
                   "session (tests/kgdboe.py) under load, the authenticated "
                   "one and netsysrq (tests/netsysrq.py), so that the two "
                   "pollers' read rates compare; empty: none (full steps "
                   "only)")
    p.add_argument("--nc-port", type=int, default=npng.NC_PORT)
    p.add_argument("--append", default="")
    p.add_argument("--cell-timeout", type=int, default=900)
    p.add_argument("--name", default="matrix",
                   help="base name of the .json/.md outputs")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()

    if os.geteuid() != 0:
        sys.exit("run.py: must run as root (network namespaces, tap)")
    for f in (args.kernel, args.initrd):
        if not os.path.exists(f):
            sys.exit("run.py: %s missing (make kernel rootfs)" % f)
    known = {n.model: n.driver for n in npng.read_nics()}
    nics = list(known.items())
    if args.nics:
        want = args.nics.split(",")
        bad = [n for n in want if n not in known]
        if bad:
            sys.exit("run.py: unknown NIC model(s) %s; known: %s" % (
                ", ".join(bad), ", ".join(known)))
        nics = [(n, known[n]) for n in want]

    modes = [m for m in args.poll_modes.split(",") if m]
    kmodes = ([] if args.steps != "full" else
              [m for m in args.kgdboe_modes.split(",") if m])
    bad = [m for m in modes if m not in ("auto", "driver", "generic")]
    if bad or not modes:
        sys.exit("run.py: bad --poll-modes %r: use auto, driver, generic"
                 % args.poll_modes)

    os.makedirs(args.results, exist_ok=True)
    try:
        with open(os.path.join(npng.BUILD, "kernel-version")) as f:
            kver = f.read().strip()
    except OSError:
        kver = "?"
    doc = {"kernel": kver, "series": npng.read_series(), "qemu": qemu_version(),
           "started": datetime.datetime.now(datetime.timezone.utc)
           .isoformat(timespec="seconds"),
           "kernel_image": os.path.relpath(args.kernel, npng.TOP),
           "burst": args.burst, "cells": []}
    jpath = os.path.join(args.results, args.name + ".json")
    mpath = os.path.join(args.results, args.name + ".md")
    t0 = time.monotonic()
    log("matrix: %d NIC model(s) x poll modes %s, kernel %s, qemu %s, "
        "burst %d, steps %s" % (len(nics), ",".join(modes), kver,
                                doc["qemu"], args.burst, args.steps))
    rc = 0
    try:
        runs = [(nic, driver, mode) for nic, driver in nics
                for mode in modes]
        for i, (nic, driver, mode) in enumerate(runs):
            tc = time.monotonic()
            log("[%d/%d] %-15s %-6s started   (elapsed %3ds)" % (
                i + 1, len(runs), nic, mode, tc - t0))
            cell = run_cell(args, i, nic, driver, mode, args.results,
                            doc["started"])
            if mode in kmodes and cell["status"] not in ("boot-timeout",):
                log("[%d/%d] %-15s %-6s kgdboe with gdb under iperf3 load"
                    % (i + 1, len(runs), nic, mode))
                km = run_kgdboe(args, i, nic, mode, args.results)
                cell["metrics"].update(km)
                log("[%d/%d] %-15s %-6s kgdboe %s" % (
                    i + 1, len(runs), nic, mode, km.get("kgdboe")))
                log("[%d/%d] %-15s %-6s kgdboe authenticated, %g%% loss, "
                    "attacks" % (i + 1, len(runs), nic, mode,
                                 AUTH_LOSS * 100))
                am = run_kgdboe_auth(args, i, nic, mode, args.results)
                cell["metrics"].update(am)
                log("[%d/%d] %-15s %-6s kgdboe authenticated %s" % (
                    i + 1, len(runs), nic, mode, am.get("kgdboe_auth")))
                sm = run_netsysrq(args, i, nic, args.results)
                cell["metrics"].update(sm)
                log("[%d/%d] %-15s %-6s netsysrq %s, ACK in %s ms" % (
                    i + 1, len(runs), nic, mode, sm.get("netsysrq"),
                    sm.get("sysrq_ack_ms")))
            doc["cells"].append(cell)
            npng.write_json(jpath, doc)
            m = cell["metrics"]
            log("[%d/%d] %-15s %-6s %-10s %3ds (elapsed %3ds) driver=%s "
                "idle %s/%s trap echo lost %s%s %s" % (
                    i + 1, len(runs), nic, mode, cell["status"],
                    time.monotonic() - tc, time.monotonic() - t0,
                    cell.get("driver"), m.get("nc_idle_received"),
                    m.get("nc_idle_sent"), m.get("trap_echo_lost", "-"),
                    kgdboe_summary(m),
                    ("- " + cell["detail"]) if cell.get("detail") else ""))
    except KeyboardInterrupt:
        log("matrix: interrupted; namespaces and guests removed, partial "
            "results kept")
        rc = 130
    doc["elapsed_s"] = round(time.monotonic() - t0)
    npng.write_json(jpath, doc)
    with open(mpath, "w") as f:
        f.write(report.markdown(doc))
    if rc == 0:
        print()
        print(report.markdown(doc))
    log("matrix: %s and %s written" % (os.path.relpath(jpath, npng.TOP),
                                       os.path.relpath(mpath, npng.TOP)))
    return rc or (1 if verdicts(doc) else 0)


if __name__ == "__main__":
    sys.exit(main())
