#!/usr/bin/env python3
"""make check: the fast lane, no kernel build and no QEMU (well under a
minute).  The harness's parsers run on fixtures cut from real logs in
tests/data/ (see tests/data/README), then pyflakes3 and shellcheck run on
every Python and shell file.  KTAP output like tests/run.py; the last
line is "N passed, N failed".
"""

import glob
import importlib.util
import io
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import redirect_stdout

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
sys.path.insert(0, os.path.join(TOP, "tests"))
import ktap  # noqa: E402
import npng  # noqa: E402
import report  # noqa: E402
import relay  # noqa: E402
from relay import LossyRelay  # noqa: E402
from ktap import KsftSkipEx, ksft_eq, ksft_in, ksft_true  # noqa: E402

DATA = os.path.join(TOP, "tests", "data")
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def data(name):
    with open(os.path.join(DATA, name), errors="replace") as f:
        return f.read()


# ------------------------------------------------------------ netconsole

@check
def analyze_complete_burst():
    a = npng.analyze(list(range(1, 101)), 100)
    ksft_eq((a["received"], a["missing"], a["reordered"], a["duplicates"]),
            (100, 0, 0, 0))


@check
def analyze_loss_reorder_duplicates():
    a = npng.analyze([1, 2, 4, 3, 3, 6, 99, 0], 6)
    ksft_eq(a["received"], 5)
    ksft_eq((a["missing"], a["first_missing"]), (1, 5))
    ksft_eq((a["reordered"], a["duplicates"], a["out_of_range"]), (1, 1, 2))
    ksft_eq(npng.analyze([], 10)["missing"], 10, "empty burst")


@check
def burst_records_in_netconsole_fixture():
    """tests/data/serial-boot.log: a real boot log that ends 60 lines into
    a netconsole burst (each message is printed on the console too)."""
    seqs = [int(m.group(2)) for m in
            npng.BURST_RE.finditer(data("serial-boot.log").encode())]
    a = npng.analyze(seqs, len(seqs))
    ksft_eq((a["missing"], a["duplicates"], a["reordered"]), (0, 0, 0))
    ksft_true(len(seqs) >= 20, "records found: %d" % len(seqs))


# ------------------------------------------------------------ iperf3

@check
def iperf_fixture_intervals_and_summary():
    """tests/data/iperf3-reverse.txt: a real `iperf3 -R -i 1 -f m` run
    from the matrix (guest->host)."""
    recs = [r for r in map(npng.parse_iperf_line,
                           data("iperf3-reverse.txt").splitlines()) if r]
    kinds = [r[0] for r in recs]
    ksft_eq(kinds.count("sender"), 1)
    ksft_eq(kinds.count("receiver"), 1)
    ksft_true(kinds.count("interval") >= 3, "intervals: %r" % kinds)
    rx = [r for r in recs if r[0] == "receiver"][0]
    ksft_true(rx[3] > 10, "receiver Mbit/s %r" % (rx,))
    ksft_eq(npng.parse_iperf_line("iperf Done."), None)


@check
def iperf_units():
    line = ("[  5]   1.00-2.00   sec  60.2 MBytes   505 Kbits/sec    0"
            "    212 KBytes")
    ksft_eq(npng.parse_iperf_line(line), ("interval", 1.0, 2.0, 0.505))


# ------------------------------------------------------------ statistics

@check
def stats_parser_and_histogram_quantiles():
    st = npng.parse_kv("name netconsole\nsent 12\npoll_how generic\n"
                       "local 192.0.2.2:6665\n"
                       "send_ns_hist 0 0 0 0 0 0 0 0 0 0 4 5 1\n")
    ksft_eq((st["sent"], st["poll_how"], st["local"]),
            (12, "generic", "192.0.2.2:6665"))
    h = npng.hist_delta(st, {"send_ns_hist": [0] * 10 + [2, 1, 0]})
    ksft_eq(h, [0] * 10 + [2, 4, 1])
    ksft_eq(npng.hist_percentile_us(h, 0.5), 4.096)
    ksft_eq(npng.hist_percentile_us(h, 0.99), 8.192)
    ksft_eq(npng.hist_percentile_us([0] * 32, 0.5), None)
    ksft_eq([npng.quantile([1, 2, 3, 4], 0.5), npng.quantile([5], 0.99),
             npng.quantile([], 0.5)], [2, 5, None])


@check
def stats_fixture_from_debugfs():
    """tests/data/netpoll-stats.txt: the echo client's statistics after
    500 echoes (tests/echo_soak.py)."""
    st = npng.parse_kv(data("netpoll-stats.txt"))
    ksft_eq((st["received"], st["delivered"], st["malformed"]),
            (500, 500, 0))
    ksft_eq(st["local"], "192.0.2.2:6600")
    ksft_eq(len(st["send_ns_hist"]), 32)
    ksft_eq(npng.hist_percentile_us(st["send_ns_hist"], 0.5), None,
            "the echo client queues its replies: no send times")


# ------------------------------------------------------------ splats

@check
def splat_lockdep_fixture():
    """tests/data/serial-lockdep.log: the lockdep report at kgdboe's
    first stop on the lockdep kernel; found, and fingerprinted by the
    first frames of its call trace that are not lockdep's own."""
    splats = npng.find_splats(data("serial-lockdep.log"))
    ksft_eq([s["what"] for s in splats], ["WARNING: inconsistent lock state"])
    ksft_eq(splats[0]["fingerprint"], "refill_skbs/netpoll_build_udp/"
            "netpoll_send_udp/kgdboe_flush/gdb_serial_stub")


@check
def nmi_reports_fail_the_splat_step():
    """The lockdep test fails on any report (its kgdboe `splat` step,
    npng.first_splat()): the reports that core/6-nmi/0002 and 0001 remove are
    found, named by their first frames."""
    for name, frame in (("serial-nmi-known.log", "napi_alloc_skb"),
                        ("serial-nmi-slab.log", "free_to_partial_list")):
        splats = npng.find_splats(data(name))
        ksft_true(splats, "%s: no report found" % name)
        ksft_true(any(frame in s["what"] + s["fingerprint"] for s in splats),
                  "%s: %s not named: %r" % (name, frame, splats))
        ksft_true(npng.first_splat(os.path.join(DATA, name)),
                  "%s: first_splat() found nothing" % name)


@check
def interrupt_sent_again_only_when_the_nic_lost_it():
    """tests/kgdboe.py sends gdb's interrupt again only when eth0 missed
    frames and netpoll received nothing (counters as in the rtl8139
    session of 2026-12-06)."""
    import kgdboe
    before = {"eth0_rx_missed_errors": 100, "np_received": 50}
    missed = kgdboe.Test.interrupt_missed
    ksft_true(missed(before, {"eth0_rx_missed_errors": 5890,
                              "np_received": 50}), "lost by the NIC")
    ksft_eq(missed(before, {"eth0_rx_missed_errors": 5890,
                            "np_received": 51}), False,
            "received by netpoll: not the NIC's loss")
    ksft_eq(missed(before, dict(before)), False, "nothing missed")


class ScriptedVlanPeer:
    """tests/kgdboe.py's VlanPeer.ask() on a scripted wire: each call of
    datagrams() gives the next list of kgdboe's datagrams (then none)."""

    def __init__(self, script):
        import kgdboe
        self.peer = object.__new__(kgdboe.VlanPeer)
        self.peer.sent_again, self.sent = 0, []
        self.peer.send = lambda payload, dst_ip=None: self.sent.append(
            payload)
        self.peer.datagrams = self.datagrams
        self.script = list(script)

    def datagrams(self, seconds):
        if self.script:
            yield from self.script.pop(0)
        else:
            time.sleep(seconds)


@check
def vlan_peer_sends_again_until_acked_and_skips_stray_answers():
    """VlanPeer.ask() resends a request that got no ack, acks every
    answer, and returns only one that matches (a second answer to the
    previous request is skipped)."""
    wire = ScriptedVlanPeer([[], [b"+", b"$S05#b8", b"$00ff00ff#00"]])
    got = wire.peer.ask(b"g", rb"[0-9a-f]{8}", seconds=5.0)
    ksft_eq(got, b"00ff00ff")
    ksft_eq(wire.sent, [b"$g#67", b"$g#67", b"+", b"+"])
    ksft_eq(wire.peer.sent_again, 1)
    wire = ScriptedVlanPeer([[b"+", b"$S05#b8"]])
    ksft_eq(wire.peer.ask(b"D", b"OK", seconds=0.2), b"",
            "a stray answer is no answer")
    ksft_eq(wire.sent, [b"$D#44", b"+"], "acked: not sent again")


@check
def splat_clean_boot_fixture():
    """A real clean boot log (tests/data/serial-boot.log) has no report."""
    ksft_eq(npng.find_splats(data("serial-boot.log")), [])


@check
def splat_panic_fixture():
    """The mutant's boot log ends in a panic (no root file system)."""
    splats = npng.find_splats(data("kunit-mutant-panic.log"))
    ksft_true(splats and "Kernel panic" in splats[-1]["what"],
              "reports: %r" % splats)


# ------------------------------------------------------------ KUnit

@check
def kunit_parse_fixture_ending_in_panic():
    """tests/data/kunit-mutant-panic.log (the mutant kernel's boot: KTAP,
    then a panic) through the tree's kunit.py: the broken checksum case
    fails, the others pass."""
    if not os.path.exists(npng.KUNIT_PY):
        raise KsftSkipEx("build/linux not extracted (make tree): the "
                         "tree's kunit.py parses KUnit output")
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, "k.log")
        shutil.copy(os.path.join(DATA, "kunit-mutant-panic.log"), path)
        cases = npng.kunit_cases(path)
    finally:
        shutil.rmtree(tmp)
    failed = [c for _, c, st in cases if st != "PASS"]
    ksft_eq(failed, ["netpoll_parse_bad_checksums"])
    ksft_true(len(cases) >= 10, "cases: %d" % len(cases))


# ------------------------------------------------------------ gdb MI

@check
def gdb_mi_fixture():
    """tests/data/gdb-mi.log: the MI side of a real kgdboe session."""
    import kgdboe
    recs = [kgdboe.parse_mi_line(l) for l in
            data("gdb-mi.log").splitlines() if not l.startswith(">>>")]
    results = [r for r in recs if r[0] == "result"]
    ksft_true(len(results) > 50, "result records: %d" % len(results))
    ksft_in("connected", [r[2] for r in results], "target remote")
    ksft_true(any(r[0] == "async" and r[1].startswith("*stopped")
                  for r in recs), "no *stopped record")
    values = [r[3] for r in results if r[3].startswith("value=")]
    ksft_true(len(values) >= 100, "values read: %d" % len(values))
    ksft_true(all(re.match(r'value="\d+"$', v) for v in values[:100]),
              "jiffies values: %r" % values[:3])
    console = "".join(r[1] for r in recs if r[0] == "console")
    ksft_true(re.search(r'\$\d+ = "6\.12', console), "release not printed")
    ksft_eq(kgdboe.mi_unquote(r'a\"b\\n\n'), 'a"b\\n\n')


# ------------------------------------------------------------ report, KTAP

@check
def report_renders_every_cell():
    doc = {"kernel": "6.12.1", "series": [], "qemu": "7.2", "started": "x",
           "burst": 10, "cells": [
               {"nic": "e1000", "driver": "e1000", "poll_mode": "driver",
                "cpus": 1, "status": "pass", "detail": "",
                "metrics": {"nc_idle_sent": 10, "nc_idle_received": 10,
                            "nc_idle_msgs_per_s": 5.0}},
               {"nic": "pcnet", "driver": None, "poll_mode": "driver",
                "cpus": 1, "status": "boot-timeout", "detail": "a|b",
                "metrics": {}}]}
    md = report.markdown(doc)
    ksft_in("| e1000 | e1000 | driver | pass |", md)
    ksft_in("10/10 @ 5/s", md)
    ksft_in("| pcnet | - | driver | boot-timeout |", md)
    ksft_in("a/b", md)


@check
def nics_file_and_builders():
    nics = npng.read_nics()
    ksft_eq([n.model for n in nics if n.required],
            ["e1000", "rtl8139", "pcnet", "ne2k_pci"])
    ksft_eq(npng.nic("ne2k_pci").iperf_rx_opts, ["-w", "8K"])
    ksft_eq(npng.kgdboe_arg(),
            "kgdboe=6443@192.0.2.2/eth0,@192.0.2.1/02:00:c0:00:02:01")
    for bad in ("e1000 e1000 maybe\n", "e1000 e1000 required - extra\n"):
        try:
            npng.parse_nics(bad)
        except ValueError:
            continue
        ksft_true(False, "a bad matrix/nics line was accepted: %r" % bad)


def load_script(name, *path):
    """A script of this repository as a module of the given name (both
    matrix/run.py and tests/run.py would be "run")."""
    spec = importlib.util.spec_from_file_location(name,
                                                  os.path.join(TOP, *path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_matrix_run():
    return load_script("matrix_run", "matrix", "run.py")


# The named matrix run that the checks below read: every model, both pollers
NAMED_MATRIX = os.path.join(TOP, "docs", "results", "matrix-2026-12-08",
                            "matrix.json")


@check
def matrix_fails_a_bad_cell():
    """matrix/run.py's exit status: the named run of the nine models in
    both poll modes has no failed cell; each bad cell below must fail
    it."""
    mrun = load_matrix_run()
    with open(NAMED_MATRIX) as f:
        doc = json.load(f)
    with redirect_stdout(io.StringIO()):
        ksft_eq(mrun.verdicts(doc), 0, "failed cells in the named run")
    cell = {c["nic"] + "/" + c["poll_mode"]: c for c in doc["cells"]}
    rtl, e1000 = cell["rtl8139/generic"], cell["e1000/driver"]
    bad = {
        "a lost netconsole line": dict(rtl, status="loss",
                                       detail="nc_idle lost 1/5000"),
        "a generic cell polled by the driver's hook": dict(rtl, metrics=dict(
            rtl["metrics"], poll_how="driver")),
        "a failed kgdboe session": dict(e1000, metrics=dict(
            e1000["metrics"], kgdboe="attach")),
        "a cell with no result": dict(e1000, status="fail",
                                      detail="cell produced no result"),
    }
    nics = {n.model: n for n in npng.read_nics()}
    for why, c in bad.items():
        ksft_eq(mrun.cell_verdict(nics[c["nic"]], c)[0], "fail", why)


@check
def perf_fails_on_a_bad_sample_or_debugger_step():
    """perf/perf.py's exit status: the committed run has no failure; a
    sample that did not pass, or a failed debugger step, is one."""
    sys.path.insert(0, os.path.join(TOP, "perf"))
    import perf  # noqa: E402
    with open(os.path.join(TOP, "docs", "perf", "perf.json")) as f:
        doc = json.load(f)
    ksft_eq(perf.failures(doc), [], "failures in docs/perf")
    s = dict(doc["samples"][0], status="loss", detail="nc_idle lost 1/2000")
    ksft_eq(len(perf.failures(dict(doc, samples=[s]))), 1, "a lossy sample")
    dbg = {"steps": [{"step": "attach", "pass": True},
                     {"step": "dump64k", "pass": False}]}
    ksft_eq(perf.failures(dict(doc, debugger_run=dbg)),
            ["debugger_run: step dump64k failed"])


@check
def docs_are_what_make_docs_writes():
    """README's NIC table and each named run's Markdown are what
    scripts/docs.py writes, and the newest matrix run is of the series
    that `series` lists; a README table edited by hand fails."""
    r = subprocess.run([sys.executable, os.path.join(TOP, "scripts",
                                                     "docs.py"), "--check"],
                       capture_output=True, text=True)
    ksft_eq(r.returncode, 0, r.stderr.strip())
    sys.path.insert(0, os.path.join(TOP, "scripts"))
    import docs  # noqa: E402
    text = open(os.path.join(TOP, "README.md")).read()
    table = text.split(docs.BEGIN, 1)[1].split(docs.END, 1)[0]
    edited = text.replace(table, table.replace("| good", "| fine", 1), 1)
    ksft_true(edited != text and docs.readme_with_table(edited, table)
              != edited, "a hand-edited table goes unnoticed")


@check
def readme_is_short_and_links_every_page():
    """README.md has at most 300 lines and links every page of docs/;
    every link in it names a file that exists."""
    text = open(os.path.join(TOP, "README.md")).read()
    ksft_true(len(text.splitlines()) <= 300, "README.md has %d lines"
              % len(text.splitlines()))
    pages = sorted(os.path.relpath(p, TOP) for p in
                   glob.glob(os.path.join(TOP, "docs", "*.md")))
    ksft_eq([p for p in pages if "(%s" % p not in text], [],
            "docs pages the README does not link")
    links = re.findall(r"\]\(([^)#]+)", text)
    ksft_eq([t for t in links if not t.startswith("http") and
             not os.path.exists(os.path.join(TOP, t))], [],
            "README links to missing files")


def load_tests_run():
    return load_script("tests_run", "tests", "run.py")


@check
def boot_cell_fails_on_a_late_echo():
    """A boot cell of the named matrix run passes the boot test's checks
    (rtl8139 driver); one late answer, running or trapped, fails it: late
    answers were the symptom of the 8139cp bug its hook fix cures."""
    tests_run = load_tests_run()
    with open(NAMED_MATRIX) as f:
        cells = json.load(f)["cells"]
    c = next(c for c in cells if c["nic"] == "rtl8139" and
             c["poll_mode"] == "driver")
    c = dict(c, status="pass", metrics=dict(
        c["metrics"], nc_idle_sent=tests_run.BURST,
        nc_idle_received=tests_run.BURST))
    rtl = npng.nic("rtl8139")
    ksft_eq(tests_run.boot_cell_problems(rtl, c), [])
    for key in ("echo_late", "trap_echo_late"):
        bad = dict(c, metrics=dict(c["metrics"], **{key: 1}))
        ksft_eq(len(tests_run.boot_cell_problems(rtl, bad)), 1, key)


@check
def every_test_has_one_lane():
    """tests/run.py: the fast lane names only tests that exist, and covers
    the features the fast lane promises (README, Tests)."""
    tests_run = load_tests_run()
    names = [t.__name__ for t in tests_run.TESTS]
    ksft_eq(sorted(set(tests_run.FAST_LANE) - set(names)), [],
            "fast-lane names that are no test")
    ksft_eq(len(names), len(set(names)), "test names are unique")
    fast = tests_run.lane_tests("fast")
    ksft_eq([t.__name__ for t in fast], [n for n in names
                                         if n in tests_run.FAST_LANE])
    ksft_eq(len(tests_run.lane_tests("full")), len(names),
            "the full lane runs every test")


def run_flaky_plan(known):
    """ktap.run() on a case that fails once and then passes, and a
    skipped one; its output and totals."""
    runs = []

    def flaky():
        runs.append(1)
        ktap.subtest("step", "pass" if len(runs) > 1 else "fail", "x")
        ksft_eq(len(runs), 2)

    def skipped():
        raise KsftSkipEx("no reason")

    out = io.StringIO()
    with redirect_stdout(out):
        totals = ktap.run([flaky, skipped], known_flaky=known)
    return out.getvalue(), totals


@check
def ktap_flaky_is_a_failure():
    """A case that fails once, then passes: both results are visible, it
    is flaky, and it counts as failed on the closing line."""
    text, totals = run_flaky_plan({})
    ksft_in("# flaky: first run FAILED", text)
    ksft_in("not ok 1 flaky # FLAKY first run failed, retry passed; not a "
            "known flake", text)
    ksft_in("ok 2 skipped # SKIP no reason", text)
    ksft_in("# time: ", text)
    ksft_eq((totals["pass"], totals["fail"], totals["skip"],
             totals["flaky"]), (0, 1, 1, 1))
    ksft_in("# Totals: pass:0 fail:0 xfail:0 xpass:0 skip:1 error:0 "
            "flaky:1", text)
    ksft_in("# flaky: 1 (flaky: not known, failed)", text)


@check
def ktap_known_flaky_passes_and_is_printed():
    """The same case listed as a known flake: it counts as passed on the
    closing line, and is still printed as flaky with its problem."""
    text, totals = run_flaky_plan({"flaky": "the deaf agent"})
    ksft_in("ok 1 flaky # FLAKY first run failed, retry passed; known: "
            "the deaf agent", text)
    ksft_eq((totals["pass"], totals["fail"], totals["flaky"]), (1, 0, 1))
    ksft_in("# flaky: 1 (flaky: known, the deaf agent)", text)


@check
def known_flaky_list_parses():
    """tests/known-flaky: each entry names a test and its open problem."""
    tests_run = load_tests_run()
    known = tests_run.read_known_flaky()
    names = {t.__name__ for t in tests_run.TESTS}
    ksft_eq(sorted(set(known) - names), [], "known flakes that are no test")
    ksft_eq([n for n, why in known.items() if not why], [],
            "known flakes without their problem")
    try:
        tests_run.parse_known_flaky("kgdboe_gdb_session_e1000_2cpu\n")
    except ValueError:
        return
    ksft_true(False, "a known flake without its problem was accepted")


# ------------------------------------------------------------ series

MAX_GROUP = 15      # maintainer-netdev.rst: "don't post large series (> 15)"
MAX_SERIES = 60     # the whole series, all groups


def load_export():
    spec = importlib.util.spec_from_file_location(
        "export", os.path.join(TOP, "scripts", "export.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@check
def series_is_in_groups():
    """series: every patch in a group; each group at most 15 patches, all
    in its folder, with a cover.txt and a generated cover letter; at most
    60 patches in all."""
    export = load_export()
    with open(os.path.join(TOP, "series")) as f:
        _, groups = export.parse_series(f.read())
    ksft_true(groups, "series has no '# group:' line")
    total = 0
    for g in groups:
        n = len(g["entries"])
        total += n
        ksft_true(0 < n <= MAX_GROUP, "group %s has %d patches (1 to %d)"
                  % (g["folder"], n, MAX_GROUP))
        ksft_eq([e for e in g["entries"]
                 if os.path.dirname(e) != g["folder"]], [],
                "patches of group %s outside its folder" % g["folder"])
        for f in ("cover.txt", "0000-cover-letter.patch"):
            ksft_true(os.path.exists(os.path.join(TOP, g["folder"], f)),
                      "group %s has no %s" % (g["folder"], f))
    ksft_true(total <= MAX_SERIES, "%d patches, more than %d"
              % (total, MAX_SERIES))
    ktap.ksft_pr("%d patches in %d groups" % (total, len(groups)))


@check
def series_parser_refuses_a_patch_outside_groups():
    """A patch line before any '# group:' line is refused, with its line."""
    export = load_export()
    try:
        export.parse_series("core/0001-x.patch\n# group: core/a (net) A\n")
    except export.ExportError as e:
        ksft_in("series:1:", str(e))
        return
    ksft_true(False, "a patch outside any group was accepted")


@check
def export_assigns_new_commits_to_the_group_before():
    """A commit with a new subject joins the group of the commit before it;
    one whose group comes before the current one is refused."""
    export = load_export()
    groups = [{"folder": "a", "entries": ["a/0001-x.patch"]},
              {"folder": "b", "entries": ["b/0001-y.patch"]}]
    ksft_eq(export.assign_groups(["x", "new", "y", "newer"], groups),
            [0, 0, 1, 1])
    try:
        export.assign_groups(["y", "x"], groups)
    except export.ExportError:
        return
    ksft_true(False, "a commit of an earlier group after a later one")


@check
def series_churn_counts_rework():
    """scripts/series-churn.py: a line that a later patch removes after an
    earlier one added it is counted; mainline lines and trivial lines are
    not."""
    spec = importlib.util.spec_from_file_location(
        "churn", os.path.join(TOP, "scripts", "series-churn.py"))
    churn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(churn)
    d = tempfile.mkdtemp()
    first = ("diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1 +1,3 @@\n"
             "-mainline();\n+int added;\n+}\n+kept();\n")
    second = ("diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1,3 +1 @@\n"
              "-int added;\n-}\n-mainline();\n")
    paths = []
    for i, text in enumerate((first, second)):
        paths.append(os.path.join(d, "%d.patch" % i))
        with open(paths[-1], "w") as f:
            f.write(text)
    ksft_eq([n for _, n in churn.churn(paths)], [0, 1])


# ------------------------------------------------------------ linters

# ------------------------------------------------------------ kgdboe

def build_host_tool(name):
    """tools/<name>/*.c and tools/common/*.c, as the Makefile builds them,
    into a temporary folder; the binary's path."""
    out = os.path.join(tempfile.mkdtemp(), name)
    common = os.path.join(TOP, "tools", "common")
    src = sorted(glob.glob(os.path.join(TOP, "tools", name, "*.c")) +
                 glob.glob(os.path.join(common, "*.c")))
    r = subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror",
                        "-I" + common, "-o", out] + src,
                       stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    ksft_eq(r.returncode, 0, "cc: " + r.stdout.strip()[:300])
    return out


# Each host tool: --help and --version to stdout with status 0, and a bad
# argument refused with status 2 and a message that names it.
TOOL_CASES = {
    "kgdboe-bridge": [
        (["--help"], 0, ["Usage: kgdboe-bridge", "default 100",
                         "Exit status:"]),
        (["--version"], 0, ["kgdboe-bridge 1.0"]),
        (["--key-file", "/dev/null", "--rto-ms", "abc", "127.0.0.1:6443"], 2,
         ["bad value 'abc' for --rto-ms", "Try 'kgdboe-bridge --help'."]),
        (["--frobnicate"], 2, ["unknown option '--frobnicate'"]),
    ],
    "netsysrq": [
        (["--help"], 0, ["Usage: netsysrq", "default 200", "Exit status:"]),
        (["--version"], 0, ["netsysrq 1.0"]),
        (["--key-file", "/dev/null", "--timeout-s", "0", "127.0.0.1:6667",
          "h"], 2, ["bad value '0' for --timeout-s"]),
        (["--frobnicate"], 2, ["Try 'netsysrq --help'."]),
    ],
}


@check
def host_tools_help_version_and_bad_arguments():
    """Every host tool's --help, --version and a bad argument, and its man
    page without a warning from man --warnings."""
    for tool, cases in TOOL_CASES.items():
        binary = build_host_tool(tool)
        for argv, status, want in cases:
            r = subprocess.run([binary] + argv, capture_output=True,
                               text=True, timeout=10)
            out = r.stdout if status == 0 else r.stderr
            ksft_eq(r.returncode, status, "%s %s" % (tool, " ".join(argv)))
            for w in want:
                ksft_in(w, out, "%s %s" % (tool, " ".join(argv)))
        page = os.path.join(TOP, "man", tool + ".1")
        r = subprocess.run(["man", "--warnings", "-l", page],
                           capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80"))
        ksft_eq((r.returncode, r.stderr.strip()), (0, ""), page)


def self_test_oks(binary):
    """The names of the cases a tool's --self-test passed (KTAP)."""
    r = subprocess.run([binary, "--self-test"], stdout=subprocess.PIPE,
                       text=True)
    ksft_eq(r.returncode, 0, r.stdout.strip())
    ksft_eq(re.findall(r"^not ok .*$", r.stdout, re.M), [])
    return re.findall(r"^ok \d+ (\S+)$", r.stdout, re.M)


@check
def bridge_hmac_rfc4231():
    """The host tools' own SHA-256/HMAC (tools/common), through
    kgdboe-bridge --self-test, against RFC 4231."""
    oks = self_test_oks(build_host_tool("kgdboe-bridge"))
    ksft_eq(oks, ["rfc4231_1", "rfc4231_2", "rfc4231_6", "rfc4231_7"])


def bridge_first_datagram(bridge, key_file, target, family):
    """What kgdboe-bridge sends first to target (a socket of family
    listening on the loopback), and its exit status if it ended."""
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
    s.settimeout(5)
    p = subprocess.Popen([bridge, "--key-file", key_file, "--connect-s", "2",
                          target % s.getsockname()[1]],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        return s.recv(2048), p.poll()
    except socket.timeout:
        return None, p.wait(10)
    finally:
        p.kill()
        p.wait()
        s.close()


@check
def bridge_targets_ipv4_and_ipv6():
    """kgdboe-bridge connects to HOST:PORT and to [IPV6]:PORT (its first
    datagram arrives on the loopback), and refuses an IPv6 address
    without brackets with a message."""
    bridge = build_host_tool("kgdboe-bridge")
    key_file = os.path.join(os.path.dirname(bridge), "key")
    with open(key_file, "w") as f:
        f.write("00" * 32 + "\n")
    for target, family in (("127.0.0.1:%d", socket.AF_INET),
                           ("[::1]:%d", socket.AF_INET6)):
        first, rc = bridge_first_datagram(bridge, key_file, target, family)
        ksft_true(first, "%s: no datagram (bridge exit %s)" % (target, rc))
    r = subprocess.run([bridge, "--key-file", key_file, "::1:6443"],
                       stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, timeout=10)
    ksft_true(r.returncode != 0, "::1:6443 accepted")
    ksft_true("[IPV6]:PORT" in r.stderr, "message: %r" % r.stderr)


@check
def netsysrq_vectors():
    """tools/netsysrq --self-test: its datagrams against the vectors the
    kernel's KUnit suite (drivers/net/netsysrq_kunit.c) checks too."""
    oks = self_test_oks(build_host_tool("netsysrq"))
    for name in ("netsysrq_key_id", "netsysrq_command_vector",
                 "netsysrq_ack_vector", "netsysrq_ack_bit_flip_refused"):
        ksft_true(name in oks, "%s not passed: %s" % (name, oks))


def relay_run(seed, echo_ip="127.0.0.1", **faults):
    """300 datagrams through matrix/relay.py to a loopback echo (on
    echo_ip, which may be IPv6)."""
    echo = socket.socket(relay.family((echo_ip, 0)), socket.SOCK_DGRAM)
    echo.bind((echo_ip, 0))
    echo.settimeout(0.5)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def serve():
        try:
            while True:
                d, a = echo.recvfrom(100)
                echo.sendto(d, a)
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    with LossyRelay(("127.0.0.1", 0), echo.getsockname()[:2], seed=seed,
                    **faults) as r:
        for i in range(300):
            client.sendto(b"%d" % i, r.listen)
            time.sleep(0.001)
        time.sleep(0.3)
    echo.close()
    client.close()
    return r.counters()


@check
def relay_faults_are_seeded():
    """The relay drops, duplicates and reorders as told, the same way
    for the same seed."""
    clean = relay_run(1)
    ksft_eq(clean["to_target"]["in"], 300)
    ksft_eq(clean["to_target"]["out"], 300)
    a = relay_run(7, drop=0.1, dup=0.05, reorder=0.05)
    b = relay_run(7, drop=0.1, dup=0.05, reorder=0.05)
    ksft_eq(a["to_target"], b["to_target"], "same seed, same faults")
    t = a["to_target"]
    ksft_true(15 <= t["dropped"] <= 50, "dropped %d of 300" % t["dropped"])
    ksft_true(t["duplicated"] > 0 and t["reordered"] > 0, repr(t))
    ksft_eq(t["out"], t["in"] - t["dropped"] + t["duplicated"])


@check
def relay_reaches_an_ipv6_target():
    """An IPv6 target (auth_ipv6 in tests/kgdboe_lossy.py) is reached
    from an IPv6 socket, the client side staying IPv4; --target takes an
    address in brackets."""
    r = relay_run(1, echo_ip="::1")
    ksft_eq(r["to_target"]["out"], 300, "to the IPv6 echo")
    ksft_eq(r["to_client"]["out"], 300, "answers back to the client")
    ksft_eq(relay.address("[fd00:2::2]:6443"), ("fd00:2::2", 6443))
    ksft_eq(relay.address("192.0.2.2:6443"), ("192.0.2.2", 6443))


# ------------------------------------------------------------ perf

@check
def perf_order_and_verdicts():
    """make perf interleaves ABBA, and gives a ratio only where the two
    kernels' ranges do not overlap (perf/perf.py)."""
    sys.path.insert(0, os.path.join(TOP, "perf"))
    import perf
    ksft_eq(perf.abba(4), [("mainline", "series"), ("series", "mainline"),
                           ("mainline", "series"), ("series", "mainline")])
    base = perf.spread([100, 120, 110])
    ksft_eq(base["median"], 110)
    ksft_eq(perf.verdict(base, perf.spread([95, 105, 115]))[1],
            "no measurable difference at this noise")
    ratio, word = perf.verdict(base, perf.spread([60, 70, 65]))
    ksft_eq((ratio, word), (0.591, "series/mainline 0.59"))
    ksft_eq(perf.verdict(perf.spread([100]), perf.spread([60]))[1],
            "too few repetitions for a verdict")
    samples = [{"nic": "e1000", "kernel": k, "metrics": {"iperf_tx_mbps": v}}
               for k, vals in (("mainline", [100, 101, 102]),
                               ("series", [90, 91, 92]))
               for v in vals]
    summary = perf.summarize(samples, ["e1000"])
    goal = perf.goals(summary, {})[0]
    ksft_true(goal[1].startswith("not met: e1000 iperf_tx_mbps 0.90"),
              goal)


@check
def raw_udp_frame_checksums():
    """npng.udp_frame(): what the attacker steps put on the wire."""
    f = npng.udp_frame(b"$?#3f", src_mac=npng.OTHER_MAC)
    ksft_eq(f[6:12].hex(":"), npng.OTHER_MAC)
    ksft_eq(npng.inet_checksum(f[14:34]), 0, "IP header checksum")
    ip = f[14:34]
    udp = f[34:]
    pseudo = ip[12:20] + bytes([0, 17]) + len(udp).to_bytes(2, "big")
    ksft_eq(npng.inet_checksum(pseudo + udp), 0, "UDP checksum")
    ksft_eq(udp[8:], b"$?#3f")
    ksft_eq(npng.parse_udp_frame(f), (npng.HOST_IP, 40000, npng.GUEST_IP,
                                      npng.KGDBOE_PORT, b"$?#3f"))
    tagged = npng.udp_frame(b"$?#3f", vlan=npng.VLAN_ID)
    ksft_eq(tagged[12:16].hex(), "81000064", "802.1Q tag, VLAN 100")
    ksft_eq(tagged[:12] + tagged[16:], npng.udp_frame(b"$?#3f"),
            "the same frame without its tag")
    arp = npng.arp_frame(1, npng.OTHER_MAC, npng.VLAN_OTHER_IP,
                         npng.VLAN_GUEST_IP, vlan=npng.VLAN_ID)
    ksft_eq(npng.parse_arp_frame(arp[:12] + arp[16:])[4], npng.VLAN_GUEST_IP)


def ipv6_upper_checksum(frame):
    """The ICMPv6/UDP checksum of an IPv6 frame, over its pseudo-header:
    0 when right."""
    plen = int.from_bytes(frame[18:20], "big")
    pseudo = frame[22:54] + plen.to_bytes(4, "big") + bytes([0, 0, 0,
                                                             frame[20]])
    return npng.inet_checksum(pseudo + frame[54:54 + plen])


@check
def raw_ipv6_frames():
    """npng.udp6_frame(), ns_frame() and parse_na_frame(): what
    tests/netpoll_ipv6.py puts on the wire and reads from it."""
    f = npng.udp6_frame(b"npng-bad 1")
    ksft_eq(f[12:14].hex(), "86dd")
    ksft_eq(ipv6_upper_checksum(f), 0, "UDP checksum")
    ns = npng.ns_frame(npng.OTHER_MAC, npng.OTHER_IP6, npng.GUEST_IP6)
    ksft_eq(ns[:6].hex(":"), "33:33:ff:00:00:02", "solicited-node MAC")
    ksft_eq(ns[21], 255, "hop limit")
    ksft_eq(ipv6_upper_checksum(ns), 0, "ICMPv6 checksum")
    # an advertisement is a solicitation with another type and option
    na = bytearray(npng.ns_frame(npng.GUEST_MAC, npng.GUEST_IP6,
                                 npng.GUEST_IP6))
    na[0:6] = bytes.fromhex(npng.OTHER_MAC.replace(":", ""))
    na[54], na[78] = npng.ICMPV6_NA, 2
    ksft_eq(npng.parse_na_frame(bytes(na)),
            (npng.OTHER_MAC, npng.GUEST_IP6, npng.GUEST_MAC))
    ksft_eq(npng.parse_na_frame(ns), None, "a solicitation is not one")
    ksft_eq(npng.host_port(npng.GUEST_IP6, 6443), "[fd00:2::2]:6443")
    ksft_eq(npng.host_port(npng.GUEST_IP, 6443), "192.0.2.2:6443")


def tracked(pattern):
    out = subprocess.run(["git", "-C", TOP, "ls-files", "-co",
                          "--exclude-standard"], stdout=subprocess.PIPE,
                         text=True).stdout.split()
    return [os.path.join(TOP, f) for f in out if re.search(pattern, f)
            and os.path.exists(os.path.join(TOP, f))]


def shell_scripts():
    out = []
    for f in tracked(r"^(scripts|matrix|\.ci|perf|tools)/"):
        with open(f, "rb") as fh:
            first = fh.readline()
        if f.endswith(".sh") or re.match(rb"#!.*\b(ba)?sh\b", first):
            out.append(f)
    return out


def run_linter(argv, files):
    r = subprocess.run(argv + files, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    ksft_eq(r.returncode, 0, "%s: %s" % (argv[0], r.stdout.strip()))
    ktap.ksft_pr("%s: %d file(s) clean" % (argv[0], len(files)))


@check
def pyflakes():
    run_linter(["pyflakes3"], tracked(r"\.py$"))


@check
def shellcheck():
    run_linter(["shellcheck", "-x", "-S", "warning"], shell_scripts())


def main():
    sel = sys.argv[1:]
    todo = [c for c in CHECKS if not sel or any(s in c.__name__
                                                for s in sel)]
    totals = ktap.run(todo, retries=0)
    print("%d passed, %d failed" % (totals["pass"], totals["fail"]))
    return 1 if totals["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
