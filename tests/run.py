#!/usr/bin/env python3
"""netpoll-ng test suite: the kernel and guest tests (make test).

Run by `make test` after the kernel and the rootfs are built; the fast,
kernel-free checks are tests/check.py (make check).  Prints KTAP (TAP
version 13, one line per test, the kgdboe steps and the KUnit cases as
nested subtests), then "# Totals:" and a last line "N passed, N failed".
A test that fails runs once more; both results are printed and kept in
build/test-results/results.json ("result" first run, "retry" second,
"seconds" each test's time).  A test that passes only on its retry is
flaky, and counts as failed unless tests/known-flaky lists it with its
open problem.

Two lanes (FAST_LANE below is the one place that says which test is in
which): `--lane fast` (make test: every feature once, within 20 minutes
on a fresh clone) and `--lane full` (make test-full: every test).
Select tests with a substring: tests/run.py boot_e1000 negative.
Each run starts from an empty build/test-results: no test reads what an
earlier run left there.
"""

import argparse
import json
import os
import shutil
import re
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
import ktap  # noqa: E402
import npng  # noqa: E402
from ktap import ksft_eq, ksft_ge, ksft_in, ksft_true, subtest  # noqa: E402

RESULTS = os.path.join(TOP, "build", "test-results")
OBJ = os.path.join(TOP, "build", "obj")
ROOTFS = os.path.join(TOP, "build", "rootfs.cpio")
REQUIRED = [n for n in npng.read_nics() if n.required]
EXTRA = [n for n in npng.read_nics() if not n.required]
BURST = int(os.environ.get("TEST_BURST", "2000"))

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def named(name, fn):
    fn.__name__ = name
    return test(fn)


def run_matrix(name, nics, *extra, steps="burst", modes="driver",
               failed=0):
    """Run matrix/run.py on `nics` with the given steps and poll modes,
    which must exit 0, or 1 with `failed` failed cells; returns the cells
    of its JSON (<name>.json; <name>-retry.json on a retry, serial logs
    under <name>-retry/, so a first failure's files are kept)."""
    name += ktap.attempt_suffix()
    results = RESULTS if ktap.ATTEMPT[0] == 1 else \
        os.path.join(RESULTS, "retry")
    os.makedirs(results, exist_ok=True)
    argv = [npng.PYTHON, os.path.join(TOP, "matrix", "run.py"),
            "--nics", ",".join(nics), "--steps", steps,
            "--poll-modes", modes,
            "--burst", str(BURST), "--results", results, "--name", name,
            "--cell-timeout", "400"] + list(extra)
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    with open(os.path.join(results, name + ".out"), "w") as f:
        f.write(r.stdout)
    ksft_eq(r.returncode, 1 if failed else 0,
            "run.py: " + npng.one_line(r.stdout[-400:]))
    if failed:
        ksft_in("matrix: %d cell(s), %d failed" % (len(nics), failed),
                r.stdout)
    with open(os.path.join(results, name + ".json")) as f:
        return json.load(f)["cells"]


# ---------------------------------------------------------------- series

@test
def series_patches_are_clean():
    """Every patch in series: project identity, Signed-off-by, and
    checkpatch --strict clean (scripts/checkpatch.sh)."""
    patches = npng.read_series()
    for p in patches:
        text = open(os.path.join(TOP, p), errors="replace").read()
        ksft_true("\nFrom: netpoll-ng <netpoll-ng@example.org>\n" in text,
                  "%s: author is not the project identity" % p)
        ksft_true("Signed-off-by: netpoll-ng <netpoll-ng@example.org>"
                  in text, "%s: no Signed-off-by" % p)
    r = subprocess.run([os.path.join(TOP, "scripts", "checkpatch.sh")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    ksft_eq(r.returncode, 0, npng.one_line(r.stdout, 600))
    ktap.ksft_pr("%d patch(es) checked" % len(patches))


# ---------------------------------------------------------------- guests

def boot_cell_problems(nic, c):
    """Everything wrong with one cell of a boot test (empty: pass)."""
    m = c["metrics"]
    want = {"status": ("pass", c["detail"]),
            "driver": (nic.driver, ""),
            "nc_idle_sent": (BURST, ""), "nc_idle_received": (BURST, ""),
            "nc_idle_missing": (0, ""), "nc_idle_reordered": (0, ""),
            "nc_idle_duplicates": (0, ""), "echo_lost": (0, ""),
            "echo_late": (0, "answered after 300 ms"),
            "trap_echo_lost": (0, ""),
            "trap_echo_late": (0, "answered after 300 ms"),
            "trap_arp_ok": (True, ""),
            "poll_how": (c["poll_mode"], "the poller the cell asked for")}
    got = dict(m, status=c["status"], driver=c.get("driver"))
    bad = ["%s %r, want %r%s" % (k, got.get(k), v, " (%s)" % why
                                 if why else "")
           for k, (v, why) in want.items() if got.get(k) != v]
    if (m.get("trap_echo_count") or 0) < 1000:
        bad.append("trap_echo_count %s < 1000" % m.get("trap_echo_count"))
    return bad


def print_boot_cell(nic, c):
    m = c["metrics"]
    ktap.ksft_pr("%s %s: driver %s, boot %ss, burst %s/%s, echo lost %s "
                 "(p50 %s us), trapped lost %s/%s (p50 %s us), ARP in trap "
                 "%s, polled by %s" % (
                     nic.model, c["poll_mode"], c.get("driver"),
                     m.get("boot_s"), m.get("nc_idle_received"),
                     m.get("nc_idle_sent"), m.get("echo_lost"),
                     m.get("echo_rtt_p50_us"), m.get("trap_echo_lost"),
                     m.get("trap_echo_count"),
                     m.get("trap_echo_rtt_p50_us"), m.get("trap_arp_ok"),
                     m.get("poll_how")))


def boot_test(nic):
    def fn():
        cells = run_matrix("boot-" + nic.model, [nic.model], steps="echo",
                           modes="driver,generic")
        ksft_eq(len(cells), 2, "cells (driver, generic)")
        problems = []
        for c in cells:
            bad = boot_cell_problems(nic, c)
            subtest("%s_%s" % (nic.model, c["poll_mode"]),
                    "fail" if bad else "pass", "; ".join(bad))
            print_boot_cell(nic, c)
            problems += ["%s: %s" % (c["poll_mode"], b) for b in bad]
        ksft_eq(problems, [])
    return fn


for _nic in REQUIRED:
    named("boot_burst_echo_" + _nic.model, boot_test(_nic))


def kunit_subtests(log):
    """The KUnit cases of a serial log as subtests; returns the failed
    netpoll, netsysrq and irq_polled ones and the number of those
    cases."""
    cases = [c for c in npng.kunit_cases(log)
             if c[0] in ("netpoll", "netsysrq", "irq_polled")]
    for suite, case, status in cases:
        subtest(case, {"PASS": "pass", "SKIP": "skip"}.get(status, "fail"),
                status)
    return [c for _, c, st in cases if st != "PASS"], len(cases)


@test
def kunit_netpoll():
    """The matrix kernel runs the netpoll, netsysrq and irq_polled KUnit
    suites at boot: read them from the e1000 boot test's serial log with
    the tree's kunit.py."""
    logs = [p for p in (os.path.join(RESULTS, "retry", "e1000-driver.log"),
                        os.path.join(RESULTS, "e1000-driver.log"))
            if os.path.exists(p)]
    log = max(logs, key=os.path.getmtime) if logs else None
    ksft_true(log, "no serial log %s (boot_burst_echo_e1000 "
              "must run first)" % log)
    failed, total = kunit_subtests(log)
    ksft_eq(failed, [], "KUnit cases that did not pass")
    ksft_ge(total, 34, "netpoll (21), netsysrq (6) and irq_polled (7) "
            "KUnit cases")


@test
def kunit_fails_on_broken_checksum_check():
    """A kernel whose IP header checksum check is disabled must fail the
    suite (scripts/mutant.sh builds it incrementally from build/obj; it
    boots without disk or network and panics after the suite)."""
    r = subprocess.run([os.path.join(TOP, "scripts", "mutant.sh")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    with open(os.path.join(RESULTS, "mutant.out"), "w") as f:
        f.write(r.stdout)
    ksft_eq(r.returncode, 0, "mutant.sh: " + npng.one_line(r.stdout[-300:]))
    log = os.path.join(RESULTS, "mutant.log")
    kernel = os.path.join(TOP, "build", "obj-mutant", "arch", "x86", "boot",
                          "bzImage")
    argv = npng.qemu_argv(None, kernel, None, "console=ttyS0,115200 "
                          "panic=-1", log)
    npng.write_cmd_file(log, argv)
    subprocess.run(["timeout", "300"] + argv, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    failed, total = kunit_subtests(log)
    ktap.ksft_pr("mutant kernel: %d of %d netpoll cases failed: %s"
                 % (len(failed), total, " ".join(failed)))
    ksft_true("netpoll_parse_bad_checksums" in failed,
              "netpoll_parse_bad_checksums did not fail on the mutant")


@test
def negative_lost_messages_fail_the_cell():
    """The guest's netconsole targets a port nobody listens on: every
    message is lost, and the harness must say so (status loss, and
    matrix/run.py exits 1 with the cell counted as failed)."""
    cells = run_matrix("negative", ["e1000"], "--nc-port", "6667", failed=1)
    ksft_eq(len(cells), 1, "cells")
    ksft_eq(cells[0]["status"], "loss", "loss went unnoticed: %s"
            % cells[0]["detail"])
    ksft_eq(cells[0]["metrics"].get("nc_idle_missing"), BURST, "missing")


def run_kgdboe(name, nic, *extra, cpus=1, steps_are_subtests=True, obj=OBJ):
    """tests/kgdboe.py in a namespace of its own, with iperf3 load (the
    matrix's runner), on the kernel built in `obj`; returns its JSON
    document (its steps as subtests)."""
    import run as mrun  # matrix/run.py
    name += ktap.attempt_suffix()
    doc = mrun.kgdboe_session(
        "npng-%d-%s" % (os.getpid(), name), name, nic, cpus,
        os.path.join(obj, "arch", "x86", "boot", "bzImage"), ROOTFS,
        RESULTS, extra, 900)
    ksft_true(doc is not None, "kgdboe.py wrote no result, see %s.out"
              % name)
    for st in doc["steps"] if steps_are_subtests else ():
        res = {True: "pass", False: "fail", None: "skip"}[st["pass"]]
        subtest(st["step"], res, npng.one_line(st["detail"], 160))
    return doc


# With 2 CPUs, step finishes: gdb's breakpoints at a return address are
# hit once, and kgdb must not step over them while the other CPU is
# inside the device (core/7-kgdb/0002, clients/8-kgdboe/0004).  Without
# kgdb's first-hit rule 12 of 1100 such finishes on e1000 under load
# (lockdep kernel) were lost.
FINISHES = "--finishes=50"


def finishes(cpus):
    """kgdboe.py's option for step finishes, with 2 CPUs or more."""
    return (FINISHES,) if cpus > 1 else ()


def kgdboe_test(nic, cpus=1, obj=OBJ, tag="kgdboe", extra=()):
    def fn():
        if obj != OBJ:
            build_debug_kernel(obj)
        doc = run_kgdboe("%s-%s-%d" % (tag, nic, cpus), nic, *extra,
                         *finishes(cpus), cpus=cpus, obj=obj)
        m = doc["metrics"]
        ktap.ksft_pr("kgdboe %s, %d cpu(s): attach %s ms, p jiffies median "
                     "%s ms, 64 KiB at %s KiB/s, break %s ms%s" % (
                         nic, cpus, m.get("attach_ms"),
                         m.get("read_ms_median"), m.get("dump_kib_s"),
                         m.get("cont_to_bp_ms"),
                         ", %s parks, %s park timeouts" % (
                             m.get("parks"), m.get("park_timeouts"))
                         if cpus > 1 else ""))
        failed = [st["step"] for st in doc["steps"] if st["pass"] is not True]
        ksft_eq(failed, [], "steps that failed or were skipped")
        ksft_eq(doc["rc"], 0, "kgdboe.py exit status")
        ksft_ge(doc["passed"], 20, "steps passed")
    return fn


for _nic in REQUIRED:
    named("kgdboe_gdb_session_%s_1cpu" % _nic.model, kgdboe_test(_nic.model))
# 2 CPUs: kgdb stops the other CPU too; kgdboe must park it outside the
# device first (the counters step checks that it did)
named("kgdboe_gdb_session_e1000_2cpu", kgdboe_test("e1000", cpus=2))
# issue 12's second model for VLAN, IPv6 and a device that goes away
named("kgdboe_gdb_session_virtio_net_pci_1cpu",
      kgdboe_test("virtio-net-pci"))

DEBUG_OBJ = os.path.join(TOP, "build", "obj-debug")
# debug kernels built by this run: the tree does not change during it
DEBUG_BUILT = set()


def build_debug_kernel(obj):
    """build/obj-debug: the series with matrix/kernel-debug.config
    (lockdep, atomic-sleep, spinlock, IRQ-flag and object checks), as
    `make kernel DEBUG=1` builds it; incremental after the first run.
    Once per run: kbuild's up-to-date check alone took some 30 s of
    each lockdep test."""
    if obj not in DEBUG_BUILT:
        run_kernel_build("debug", DEBUG="1", OBJ=obj)
        DEBUG_BUILT.add(obj)


def run_kernel_build(what, **env):
    """scripts/kernel.sh with these environment variables; its output goes
    to <what>-build.out, and it must succeed."""
    r = subprocess.run([os.path.join(TOP, "scripts", "kernel.sh")],
                       env=dict(os.environ, **env), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(RESULTS, what + "-build.out"), "w") as f:
        f.write(r.stdout)
    ksft_eq(r.returncode, 0, "%s kernel build: %s" % (
        what, npng.one_line(r.stdout[-300:])))


def lockdep_kgdboe_test(nic, mode, cpus=2):
    """A kgdboe session with `cpus` CPUs under iperf3 load on the lockdep
    kernel, in a poll mode (generic: netpoll runs the device's interrupt
    handlers and claims its NAPI contexts; driver:
    the driver's hook runs its interrupt handler through
    irq_run_handler_polled()).  kgdb's stop is an NMI: netpoll and the
    driver must take no lock but by trylock and allocate nothing there,
    also where the stopped CPU holds a lock (step locked_stops: stops in
    irq, workqueue, timer, slab and page allocator code).
    Every step must pass, its `splat` step included (no report at all),
    and the driver must have received into netpoll's NMI skbs
    (core/6-nmi/0002; the drivers: core/6-nmi/0004-0013)."""
    def fn():
        build_debug_kernel(DEBUG_OBJ)
        tag = "kgdboe-lockdep-%s-%s-%d" % (nic, mode, cpus)
        doc = run_kgdboe(tag, nic, "--locked-stops", "--append",
                         "netpoll.poll_mode=" + mode, *finishes(cpus),
                         cpus=cpus, obj=DEBUG_OBJ)
        m = doc["metrics"]
        ktap.ksft_pr("locked stops, %s %s %d cpu(s): seconds to each stop "
                     "%s, hits stepped over %s, park timeouts %s, churn "
                     "rounds %s, interrupts sent again %s" % (
                         nic, mode, cpus, m.get("locked_wait_s"),
                         m.get("stepped_over"), m.get("park_timeouts"),
                         m.get("locked_churn_loops"),
                         m.get("interrupts_resent", 0)))
        failed = [st["step"] for st in doc["steps"] if st["pass"] is not True]
        ksft_eq(failed, [], "steps that failed or were skipped")
        ksft_ge(doc["metrics"].get("np_nmi_rx_served", 0), 1,
                "frames %s received into netpoll's NMI skbs" % nic)
    return fn


# Every required NIC (their drivers take no lock but by trylock and
# allocate nothing in the stop: core/6-nmi/0004-0007), with 2 CPUs in
# each poll mode and with 1 CPU in driver mode.
for _nic in REQUIRED:
    for _mode in ("generic", "driver"):
        named("kgdboe_lockdep_kernel_%s_2cpu_%s" % (_nic.model, _mode),
              lockdep_kgdboe_test(_nic.model, _mode))
    named("kgdboe_lockdep_kernel_%s_1cpu_driver" % _nic.model,
          lockdep_kgdboe_test(_nic.model, "driver", cpus=1))

# The extra NICs (core/6-nmi/0008-0013 for e100, tulip, e1000e, vmxnet3 and
# virtio_net): one session each, 2 CPUs, driver mode, so that make test
# checks the stop path of every model the matrix boots.
for _nic in EXTRA:
    named("kgdboe_lockdep_kernel_%s_2cpu_driver"
          % _nic.model.replace("-", "_"),
          lockdep_kgdboe_test(_nic.model, "driver"))
# and the generic poller on the model whose MSI-X vectors it runs
named("kgdboe_lockdep_kernel_e1000e_2cpu_generic",
      lockdep_kgdboe_test("e1000e", "generic"))


@test
def kgdboe_lockdep_kernel_e1000_2cpu_oops():
    """An oops (lkdtm) with kgdboe registered, no gdb attached and the NIC
    under iperf3 load: kgdb stops the kernel, gdb attaches to it, reads
    lkdtm's backtrace and memory, and the oops is the only report."""
    build_debug_kernel(DEBUG_OBJ)
    doc = run_kgdboe("kgdboe-oops-e1000", "e1000", "--oops", cpus=2,
                     obj=DEBUG_OBJ)
    failed = [st["step"] for st in doc["steps"] if st["pass"] is not True]
    ksft_eq(failed, [], "steps that failed or were skipped")


def run_script(name, nic, script, *extra, timeout=900):
    """tests/<script> (tests/kgdboe.py's options, one CPU) in a namespace
    of its own, the matrix's runner; its JSON document, its steps as
    subtests, and a failure for any step that did not pass."""
    import run as mrun  # matrix/run.py
    name += ktap.attempt_suffix()
    doc = mrun.kgdboe_session(
        "npng-%d-%s" % (os.getpid(), name), name, nic, 1,
        os.path.join(OBJ, "arch", "x86", "boot", "bzImage"), ROOTFS,
        RESULTS, extra, timeout, script=script)
    ksft_true(doc is not None, "%s wrote no result, see %s.out"
              % (script, name))
    for st in doc["steps"]:
        res = {True: "pass", False: "fail", None: "skip"}[st["pass"]]
        subtest(st["step"], res, npng.one_line(st["detail"], 160))
    failed = [st["step"] for st in doc["steps"] if st["pass"] is not True]
    ksft_eq(failed, [], "steps that failed or were skipped")
    ksft_eq(doc["rc"], 0, "%s exit status" % script)
    return doc


def run_lossy(name, nic, *extra):
    """tests/kgdboe_lossy.py: see run_script()."""
    return run_script(name, nic, "kgdboe_lossy.py", *extra)


@test
def kgdboe_plain_session_at_2pct_loss():
    """Plain mode (gdb's own target remote udp:) survives 2% of the
    datagrams dropped each way by the relay; spoofing the peer's IP from
    another MAC is refused."""
    doc = run_lossy("kgdboe-plain-loss", "e1000", "--plain-losses", "0.02",
                    "--auth-losses", "")
    m = doc["metrics"]["plain_2"]
    ktap.ksft_pr("plain mode, 2%% dropped each way: full session in %s s, "
                 "64 KiB at %s KiB/s" % (m["session_s"], m["dump_kib_s"]))


@test
def kgdboe_refused_under_lockdown():
    """A kernel booted with lockdown=integrity: kgdboe (which lets gdb
    write kernel memory) refuses to be configured."""
    run_lossy("kgdboe-lockdown", "e1000", "--lockdown")


def auth_test(nic, attack):
    def fn():
        extra = ["--auth-losses", "0,0.05,0.10"]
        doc = run_lossy("kgdboe-auth-" + nic, nic,
                        *(extra + (["--attack", "--auth-ipv6"] if attack
                                   else [])))
        m = doc["metrics"]
        base = m["auth_0"]["session_s"]
        ktap.ksft_pr("authenticated, %s: full session %s s at 0%%, %s s at "
                     "5%% (x%.1f), %s s at 10%% (x%.1f)%s" % (
                         nic, base, m["auth_5"]["session_s"],
                         m["auth_5"]["session_s"] / base,
                         m["auth_10"]["session_s"],
                         m["auth_10"]["session_s"] / base,
                         "; flood: %s of %s forged refused; over IPv6 at "
                         "10%%: %s s" % (
                             m.get("flood_refused"), m.get("flood_sent"),
                             m["auth_ipv6"]["session_s"])
                         if attack else ""))
    return fn


for _nic in REQUIRED:
    named("kgdboe_authenticated_lossy_%s" % _nic.model,
          auth_test(_nic.model, attack=_nic.model == "e1000"))


def netsysrq_test(nic):
    def fn():
        doc = run_script("netsysrq-" + nic, nic, "netsysrq.py",
                         timeout=600)
        m = doc["metrics"]
        ktap.ksft_pr("netsysrq %s: ACK in %s ms (median, idle), %s ms under "
                     "a real-time runaway; flood: %s of %s forged reached "
                     "netsysrq, %s tags computed, %s dropped unread" % (
                         nic, m.get("sysrq_ack_ms"), m.get("runaway_ack_ms"),
                         m.get("flood_reached"), m.get("flood_sent"),
                         m.get("flood_bad_tag"), m.get("flood_limited")))
    return fn


for _nic in REQUIRED:
    named("netsysrq_%s" % _nic.model, netsysrq_test(_nic.model))


def netpoll_core_test(nic, mode, without=""):
    def fn():
        doc = run_script("netpoll_core-%s-%s" % (nic, mode), nic,
                         "netpoll_core.py", "--append",
                         "netpoll.poll_mode=%s" % mode, "--without",
                         without, timeout=600)
        m = doc["metrics"]
        t, b = m["torture"], m["bounded"]
        ktap.ksft_pr("netpoll_core %s %s: 100 traps under iperf3 --bidir: %s "
                     "answers queued and received, queue empty; txq_max 2: "
                     "%s queued, %s dropped and counted; fragments: %s; "
                     "ARP flood: %s answered, %s limited; self-test: %s" % (
                         nic, mode, t["queued"], b["queued"],
                         b["dropped"],
                         m.get("fragments", {}).get("came_back"),
                         m.get("arp", {}).get("flood"),
                         m.get("arp", {}).get("dev_arp_limited"),
                         m.get("selftest")))
    return fn


for _mode in ("driver", "generic"):
    named("netpoll_core_e1000_" + _mode, netpoll_core_test("e1000", _mode))
# e1000e's self-test frees its MSI-X vectors, tests a legacy interrupt
# and allocates the vectors again: the generic poller must find them
named("netpoll_core_e1000e_generic",
      netpoll_core_test("e1000e", "generic", without="fragments,arp,jumbo,"
                        "vlan,vlan_gone,vlan_ipv6"))
# virtio_net has no ethtool self-test
named("netpoll_core_virtio_net_pci_driver",
      netpoll_core_test("virtio-net-pci", "driver", without="selftest"))


def netpoll_ipv6_test(nic):
    def fn():
        doc = run_script("netpoll_ipv6-%s" % nic, nic, "netpoll_ipv6.py",
                         timeout=600)
        m = doc["metrics"]
        ktap.ksft_pr("netpoll_ipv6 %s: echo delivered +%s; trapped after a "
                     "neighbour flush: %s solicitation(s) answered; "
                     "fragments: %s; malformed +%s" % (
                         nic, m["echo"]["delivered"],
                         m["ndp"]["ndp_replies"],
                         m["fragments"]["came_back"],
                         m["malformed"]["malformed"]))
    return fn


for _nic in ("e1000", "virtio-net-pci"):
    named("netpoll_ipv6_" + _nic.replace("-", "_"), netpoll_ipv6_test(_nic))


MODULE_NIC = "e1000"


def build_module_kernel():
    """build/obj-module: kgdboe, netsysrq and the NIC drivers as modules
    (matrix/kgdboe-module.config), built incrementally from build/obj; the
    object folder and the modules the test loads: the two clients and
    MODULE_NIC's driver."""
    obj = os.path.join(TOP, "build", "obj-module")
    run_kernel_build("module", OBJ=obj, SEED_OBJ=OBJ,
                     EXTRA_CONFIG=os.path.join(TOP, "matrix",
                                               "kgdboe-module.config"))
    kos = [os.path.join(obj, "drivers", "net", name + ".ko")
           for name in ("kgdboe", "netsysrq")]
    driver = npng.nic(MODULE_NIC).driver
    found = subprocess.run(["find", os.path.join(obj, "drivers", "net"),
                            "-name", driver + ".ko"],
                           capture_output=True, text=True).stdout.split()
    ksft_eq(len(found), 1, "%s.ko in %s" % (driver, obj))
    kos += found
    for ko in kos:
        ksft_true(os.path.exists(ko), "no %s" % ko)
    return obj, kos


def initrd_with(work, paths):
    """The guest's rootfs plus files at its root (two cpio archives
    concatenated)."""
    stage = tempfile.mkdtemp(dir=work)
    ktap.defer(subprocess.run, ["rm", "-rf", stage])
    subprocess.run(["cp"] + list(paths) + [stage], check=True)
    names = "".join(os.path.basename(p) + "\n" for p in paths)
    extra = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"],
                           input=names.encode(),
                           cwd=stage, stdout=subprocess.PIPE,
                           check=True).stdout
    initrd = os.path.join(work, "initrd.cpio")
    with open(ROOTFS, "rb") as f, open(initrd, "wb") as o:
        o.write(f.read() + extra)
    return initrd


@test
def clients_as_modules_2cpu():
    """kgdboe, netsysrq and the NIC drivers built as modules
    (build/obj-module; modpost checks the core's exports): the guest loads
    e1000.ko; kgdboe's insmod refuses a bad string and a missing device,
    loads with a good one, gdb attaches with 2 CPUs and detaches; rmmod
    e1000 returns (kgdboe releases eth0), insmod e1000 and kgdboe resumes,
    gdb attaches again; rmmod kgdboe unregisters it and gdb gets no answer
    afterwards; netsysrq loads with its key, answers a command, unloads
    right after it and answers nothing afterwards
    (tests/kgdboe_module.py)."""
    obj, kos = build_module_kernel()
    work = os.path.join(RESULTS, "kgdboe-module")
    os.makedirs(work, exist_ok=True)
    initrd = initrd_with(work, kos)
    outpath = os.path.join(work, "kgdboe_module.out")
    with open(outpath, "w") as f:
        rc = npng.run_in_netns(
            "npng-%d-module" % os.getpid(),
            [npng.PYTHON, os.path.join(TOP, "tests", "kgdboe_module.py"),
             "--obj", obj, "--initrd", initrd, "--workdir", work,
             "--nic", MODULE_NIC, "--cpus", "2"], f, 600)
    text = open(outpath).read()
    for line in text.splitlines():
        m = re.match(r"(PASS|FAIL) (\S+)\s*(.*)", line)
        if m:
            subtest(m.group(2), m.group(1) == "PASS" and "pass" or "fail",
                    m.group(3))
    failed = [l.split()[1] for l in text.splitlines()
              if l.startswith("FAIL ")]
    ksft_eq(failed, [], "module checks that failed")
    ksft_eq(rc, 0, "kgdboe_module.py exit status: " +
            npng.one_line(text[-200:]))


@test
def kgdboe_wrong_port_fails():
    """gdb pointed at a port kgdboe does not serve must not attach, and
    the session script must say so."""
    doc = run_kgdboe("kgdboe-wrongport", "e1000", "--port",
                     str(npng.KGDBOE_PORT + 1), steps_are_subtests=False)
    steps = {st["step"]: st["pass"] for st in doc["steps"]}
    ksft_eq(steps.get("boot"), True, "guest booted")
    ksft_eq(steps.get("attach"), False, "attach on a wrong port")
    ksft_true(doc["rc"] != 0 and doc["failed"] > 0,
              "kgdboe.py reported failure")


@test
def no_namespace_or_qemu_left():
    ns = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE,
                        text=True).stdout
    ksft_eq([l for l in ns.splitlines() if l.startswith("npng-")], [],
            "namespaces left")
    ps = subprocess.run(["pgrep", "-af", "qemu-system-i386"],
                        stdout=subprocess.PIPE, text=True).stdout
    ksft_eq([l for l in ps.splitlines() if os.path.join(TOP, "build") in l],
            [], "qemu left")


# The fast lane, make test: each required NIC's boot, burst and echo;
# KUnit and its mutant; kgdboe with 1 and 2 CPUs; plain mode at loss;
# authenticated mode with the attacks; netsysrq; IPv6, VLAN, fragments,
# jumbo frames; a device that goes away (the virtio-net session); the
# clients as modules.  Every other test runs in make test-full only
# (every lockdep-kernel session, every NIC for each client).
FAST_LANE = (
    "series_patches_are_clean",
    "boot_burst_echo_e1000",
    "boot_burst_echo_rtl8139",
    "boot_burst_echo_pcnet",
    "boot_burst_echo_ne2k_pci",
    "kunit_netpoll",
    "kunit_fails_on_broken_checksum_check",
    "kgdboe_gdb_session_e1000_1cpu",
    "kgdboe_gdb_session_e1000_2cpu",
    "kgdboe_gdb_session_virtio_net_pci_1cpu",
    "kgdboe_plain_session_at_2pct_loss",
    "kgdboe_authenticated_lossy_e1000",
    "netsysrq_e1000",
    "netpoll_core_e1000_driver",
    "netpoll_ipv6_e1000",
    "clients_as_modules_2cpu",
    "no_namespace_or_qemu_left",
)
LANES = ("fast", "full")
KNOWN_FLAKY = os.path.join(TOP, "tests", "known-flaky")


def lane_tests(lane):
    """The tests of a lane, in the suite's order."""
    if lane == "fast":
        return [t for t in TESTS if t.__name__ in FAST_LANE]
    return list(TESTS)


def parse_known_flaky(text):
    """tests/known-flaky: "<test name> <open problem>" per line, # comments.
    A name without its problem is refused (ValueError)."""
    known = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, why = line.partition(" ")
        if not why.strip():
            raise ValueError("tests/known-flaky:%d: %s: no open problem "
                             "given" % (n, name))
        known[name] = why.strip()
    return known


def read_known_flaky(path=KNOWN_FLAKY):
    try:
        with open(path) as f:
            return parse_known_flaky(f.read())
    except FileNotFoundError:
        return {}


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="netpoll-ng kernel and guest tests (KTAP)")
    ap.add_argument("--lane", choices=LANES, default="full",
                    help="fast: make test; full: make test-full (default)")
    ap.add_argument("select", nargs="*",
                    help="run only the tests whose name contains one of "
                         "these")
    return ap.parse_args(argv)


def main():
    args = parse_args(sys.argv[1:])
    sel = args.select
    todo = [t for t in lane_tests(args.lane)
            if not sel or any(s in t.__name__ for s in sel)]
    if sel and not todo:
        print("no test of lane %s matches %s; tests: %s" % (
            args.lane, " ".join(sel),
            ", ".join(t.__name__ for t in lane_tests(args.lane))),
            file=sys.stderr)
        return 2
    known = read_known_flaky()
    shutil.rmtree(RESULTS, ignore_errors=True)
    os.makedirs(RESULTS)
    t0 = time.monotonic()
    totals = ktap.run(todo, os.path.join(RESULTS, "results.json"),
                      known_flaky=known)
    print("# lane %s: %d tests took %.0f s; %d flaky (%d of them known)"
          % (args.lane, len(todo), time.monotonic() - t0, totals["flaky"],
             totals["known_flaky"]))
    print("%d passed, %d failed" % (totals["pass"], totals["fail"]))
    return 1 if totals["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
