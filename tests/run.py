#!/usr/bin/env python3
"""netpoll-ng test suite (host side, Python standard library).

Run by `make test` after the kernel and the rootfs are built.  Each test
prints one line "ok"/"FAIL"; the last line is "N passed, N failed".
Select tests with a substring: tests/run.py boot_e1000 negative.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
import npng  # noqa: E402
import report  # noqa: E402

RESULTS = os.path.join(TOP, "build", "test-results")
REQUIRED = ["e1000", "rtl8139", "pcnet", "ne2k_pci"]
EXPECTED_DRIVER = {"e1000": "e1000", "rtl8139": "8139cp",
                   "pcnet": "pcnet32", "ne2k_pci": "ne2k-pci"}
BURST = int(os.environ.get("TEST_BURST", "2000"))

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class Failed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failed(msg)


def run_matrix(name, nics, *extra, steps="burst", modes="driver"):
    """Run matrix/run.py on `nics` with the given steps and poll modes;
    returns the cells of its JSON."""
    argv = [sys.executable, os.path.join(TOP, "matrix", "run.py"),
            "--nics", ",".join(nics), "--steps", steps,
            "--poll-modes", modes,
            "--burst", str(BURST), "--results", RESULTS, "--name", name,
            "--cell-timeout", "400"] + list(extra)
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    with open(os.path.join(RESULTS, name + ".out"), "w") as f:
        f.write(r.stdout)
    check(r.returncode == 0, "run.py exited %d: %s" % (
        r.returncode, npng.one_line(r.stdout[-400:])))
    with open(os.path.join(RESULTS, name + ".json")) as f:
        return json.load(f)["cells"]


# ---------------------------------------------------------------- units

@test
def analyze_complete():
    a = npng.analyze(list(range(1, 101)), 100)
    check(a["received"] == 100 and a["missing"] == 0 and
          a["reordered"] == 0 and a["duplicates"] == 0, repr(a))


@test
def analyze_detects_loss_reorder_duplicates():
    seqs = [1, 2, 4, 3, 3, 6, 99, 0]      # 5 lost, 3 late, one dup
    a = npng.analyze(seqs, 6)
    check(a["received"] == 5, repr(a))
    check(a["missing"] == 1 and a["first_missing"] == 5, repr(a))
    check(a["reordered"] == 1 and a["duplicates"] == 1, repr(a))
    check(a["out_of_range"] == 2, repr(a))
    check(npng.analyze([], 10)["missing"] == 10, "empty burst not all lost")


@test
def burst_regex_matches_netconsole_line():
    line = b"[   12.345678] npng idle 4242\n"
    m = npng.BURST_RE.search(line)
    check(m and m.group(1) == b"idle" and m.group(2) == b"4242", repr(m))


@test
def iperf_line_parser():
    line = ("[  5]   1.00-2.00   sec  60.2 MBytes   505 Mbits/sec    0"
            "    212 KBytes")
    m = npng.IPERF_LINE.search(line)
    check(m and float(m.group(3)) == 505.0 and m.group(4) == "M", repr(m))


@test
def stats_parser_and_histogram_quantiles():
    st = npng.parse_kv("name netconsole\nsent 12\npoll_how irq\n"
                       "local 192.0.2.2:6665\n"
                       "send_ns_hist 0 0 0 0 0 0 0 0 0 0 4 5 1\n")
    check(st["sent"] == 12 and st["poll_how"] == "irq" and
          st["local"] == "192.0.2.2:6665", repr(st))
    before = {"send_ns_hist": [0] * 10 + [2, 1, 0]}
    h = npng.hist_delta(st, before)
    check(h == [0] * 10 + [2, 4, 1], repr(h))
    # 7 sends: 2 in [1024, 2048) ns, 4 in [2048, 4096), 1 in [4096, 8192)
    check(npng.hist_percentile_us(h, 0.5) == 4.096, repr(h))
    check(npng.hist_percentile_us(h, 0.99) == 8.192, repr(h))
    check(npng.hist_percentile_us([0] * 32, 0.5) is None, "empty")
    check(npng.quantile([1, 2, 3, 4], 0.5) == 2 and
          npng.quantile([5], 0.99) == 5 and npng.quantile([], 0.5) is None,
          "quantile")


@test
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
    check("| e1000 | e1000 | driver | pass |" in md, md)
    check("10/10 @ 5/s" in md, md)
    check("| pcnet | - | driver | boot-timeout |" in md and "a/b" in md, md)


# ---------------------------------------------------------------- series

@test
def series_patches_are_clean():
    """Every patch in series: project identity, Signed-off-by, and
    checkpatch --strict clean (scripts/checkpatch.sh)."""
    with open(os.path.join(TOP, "series")) as f:
        patches = [l.strip() for l in f
                   if l.strip() and not l.startswith("#")]
    for p in patches:
        text = open(os.path.join(TOP, p), errors="replace").read()
        check("\nFrom: netpoll-ng <netpoll-ng@example.org>\n" in text,
              "%s: author is not the project identity" % p)
        check("Signed-off-by: netpoll-ng <netpoll-ng@example.org>" in text,
              "%s: no Signed-off-by" % p)
    r = subprocess.run([os.path.join(TOP, "scripts", "checkpatch.sh")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    check(r.returncode == 0, npng.one_line(r.stdout, 600))
    print("    %d patch(es) checked" % len(patches))


@test
def kernel_config_has_fragment():
    cfg = open(os.path.join(TOP, "build", "obj", ".config")).read()
    for line in open(os.path.join(TOP, "matrix", "kernel.config")):
        line = line.strip()
        if line.startswith("CONFIG_") and not line.endswith("=n"):
            check(re.search("^%s$" % re.escape(line), cfg, re.M),
                  "%s not in build/obj/.config" % line)


# ---------------------------------------------------------------- guests

def make_boot_test(nic):
    def fn():
        cells = run_matrix("boot-" + nic, [nic], steps="echo",
                           modes="driver,irq")
        check(len(cells) == 2, "%d cells, expected 2" % len(cells))
        for c in cells:
            check_boot_cell(nic, c)
    fn.__name__ = "boot_burst_echo_" + nic
    return fn


def check_boot_cell(nic, c):
    """One cell of a boot test: every figure it must show."""
    m = c["metrics"]
    print("    %s %s: trap echo lost %s/%s, p50 %s us (running %s us), "
          "ARP in trap %s, polled by %s" % (
              nic, c["poll_mode"], m.get("trap_echo_lost"),
              m.get("trap_echo_count"), m.get("trap_echo_rtt_p50_us"),
              m.get("echo_rtt_p50_us"), m.get("trap_arp_ok"),
              m.get("poll_how")))
    print("    %s: driver %s, booted in %ss, %s/%s received, %s "
          "reordered, %s msg/s" % (
              nic, c.get("driver"), m.get("boot_s"),
              m.get("nc_idle_received"), m.get("nc_idle_sent"),
              m.get("nc_idle_reordered"), m.get("nc_idle_msgs_per_s")))
    check(c["status"] == "pass", "status %s: %s" % (c["status"],
                                                   c["detail"]))
    check(c.get("driver") == EXPECTED_DRIVER[nic],
          "driver %s, expected %s" % (c.get("driver"),
                                      EXPECTED_DRIVER[nic]))
    check(m.get("nc_idle_sent") == BURST, "sent %s" %
          m.get("nc_idle_sent"))
    check(m.get("nc_idle_received") == BURST and
          m.get("nc_idle_missing") == 0,
          "lost %s messages" % m.get("nc_idle_missing"))
    check(m.get("nc_idle_reordered") == 0 and
          m.get("nc_idle_duplicates") == 0, "out of order")
    check(m.get("echo_lost") == 0, "running echo lost %s" %
          m.get("echo_lost"))
    check(m.get("trap_echo_lost") == 0 and
          m.get("trap_echo_count", 0) >= 1000,
          "%s: trap echo lost %s of %s" % (
              c["poll_mode"], m.get("trap_echo_lost"),
              m.get("trap_echo_count")))
    check(m.get("trap_arp_ok") is True, "%s: ARP not answered in trap"
          % c["poll_mode"])


for _nic in REQUIRED:
    test(make_boot_test(_nic))


@test
def kunit_netpoll():
    """The matrix kernel runs the netpoll KUnit suite at boot; read its
    KTAP summary from the e1000 boot test's serial log."""
    log = os.path.join(RESULTS, "e1000-driver.log")
    check(os.path.exists(log), "no serial log %s (boot_burst_echo_e1000 must "
          "run first)" % log)
    text = open(log, errors="replace").read()
    m = re.search(r"# netpoll: pass:(\d+) fail:(\d+) skip:(\d+) "
                  r"total:(\d+)", text)
    check(m, "no netpoll KUnit summary in %s" % log)
    p, f, sk, tot = map(int, m.groups())
    fails = re.findall(r"not ok \d+ (netpoll_\w+)", text)
    print("    kunit netpoll: %d of %d test cases passed, %d failed %s"
          % (p, tot, f, fails))
    check(f == 0 and p == tot and tot >= 10, "KUnit: %d failed: %s"
          % (f, fails))


@test
def kunit_fails_on_broken_checksum_check():
    """A kernel whose IP header checksum check is disabled must fail the
    suite (scripts/mutant.sh builds and boots it)."""
    r = subprocess.run([os.path.join(TOP, "scripts", "mutant.sh")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    with open(os.path.join(RESULTS, "mutant.out"), "w") as f:
        f.write(r.stdout)
    check(r.returncode == 0, "mutant.sh exited %d: %s" % (
        r.returncode, npng.one_line(r.stdout[-300:])))
    m = re.search(r"# netpoll: pass:(\d+) fail:(\d+)", r.stdout)
    check(m, "no KUnit summary from the mutant")
    fails = re.findall(r"not ok \d+ (netpoll_\w+)", r.stdout)
    print("    mutant kernel: pass:%s fail:%s, failed: %s" % (
        m.group(1), m.group(2), " ".join(fails)))
    check(int(m.group(2)) > 0, "the suite passed with the checksum check "
          "disabled")
    check("netpoll_parse_bad_checksums" in fails,
          "netpoll_parse_bad_checksums did not fail")


@test
def negative_lost_messages_fail_the_cell():
    """The guest's netconsole targets a port nobody listens on: every
    message is lost, and the harness must say so (status loss)."""
    cells = run_matrix("negative", ["e1000"], "--nc-port", "6667")
    check(len(cells) == 1, "%d cells" % len(cells))
    c = cells[0]
    m = c["metrics"]
    check(c["status"] == "loss", "status %s (%s): loss went unnoticed" % (
        c["status"], c["detail"]))
    check(m.get("nc_idle_missing") == BURST, "missing %s" %
          m.get("nc_idle_missing"))


def run_kgdboe(name, nic, *extra, cpus=1):
    """tests/kgdboe.py in a namespace of its own, with iperf3 load (the
    matrix's runner); returns its JSON document."""
    import run as mrun
    obj = os.path.join(TOP, "build", "obj")
    doc = mrun.kgdboe_session(
        "npng-%d-%s" % (os.getpid(), name), name, nic, cpus,
        os.path.join(obj, "arch", "x86", "boot", "bzImage"),
        os.path.join(TOP, "build", "rootfs.cpio"), RESULTS, extra, 600)
    check(doc is not None, "kgdboe.py wrote no result, see %s.out" % name)
    return doc


def make_kgdboe_test(nic, cpus=1):
    def fn():
        name = "kgdboe-%s-%d" % (nic, cpus)
        doc = run_kgdboe(name, nic, cpus=cpus)
        failed = ["%s (%s)" % (st["step"], npng.one_line(st["detail"], 80))
                  for st in doc["steps"] if st["pass"] is False]
        m = doc["metrics"]
        print("    kgdboe %s, %d cpu(s): %d steps passed, attach %s ms, "
              "p jiffies median %s ms, 64 KiB at %s KiB/s, break %s ms"
              % (nic, cpus, doc["passed"], m.get("attach_ms"),
                 m.get("read_ms_median"), m.get("dump_kib_s"),
                 m.get("cont_to_bp_ms")))
        if cpus > 1:
            print("    other CPUs parked outside the device before %s stops,"
                  " %s park timeouts" % (m.get("parks"),
                                         m.get("park_timeouts")))
        check(not failed and doc["rc"] == 0 and doc["passed"] >= 20,
              "failed: %s" % "; ".join(failed))
    fn.__name__ = "kgdboe_gdb_session_%s_%dcpu" % (nic, cpus)
    return fn


for _nic in REQUIRED:
    test(make_kgdboe_test(_nic))
# 2 CPUs: kgdb stops the other CPU too; kgdboe must park it outside the
# device first (the counters step checks that it did)
test(make_kgdboe_test("e1000", cpus=2))


@test
def kgdboe_as_module_2cpu():
    """kgdboe built as a module (a second kernel, build/obj-module): insmod
    refuses a bad string and a missing device, loads with a good one, gdb
    attaches with 2 CPUs and detaches, rmmod unregisters it and gdb gets
    no answer afterwards (tests/kgdboe_module.py)."""
    import run as mrun
    obj = os.path.join(TOP, "build", "obj-module")
    env = dict(os.environ, OBJ=obj, EXTRA_CONFIG=os.path.join(
        TOP, "matrix", "kgdboe-module.config"))
    r = subprocess.run([os.path.join(TOP, "scripts", "kernel.sh")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    check(r.returncode == 0, "module kernel build failed: %s"
          % npng.one_line(r.stdout[-300:]))
    ko = os.path.join(obj, "drivers", "net", "kgdboe.ko")
    check(os.path.exists(ko), "no %s" % ko)
    work = os.path.join(RESULTS, "kgdboe-module")
    os.makedirs(work, exist_ok=True)
    # the guest's initrd plus /kgdboe.ko (concatenated cpio archives)
    stage = tempfile.mkdtemp(dir=work)
    subprocess.run(["cp", ko, stage], check=True)
    mod = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"],
                         input=b"kgdboe.ko\n", cwd=stage,
                         stdout=subprocess.PIPE, check=True).stdout
    subprocess.run(["rm", "-rf", stage], check=True)
    initrd = os.path.join(work, "initrd.cpio")
    with open(os.path.join(TOP, "build", "rootfs.cpio"), "rb") as f, \
            open(initrd, "wb") as o:
        o.write(f.read() + mod)
    outpath = os.path.join(work, "kgdboe_module.out")
    with open(outpath, "w") as f:
        rc = mrun.run_in_netns(
            "npng-%d-module" % os.getpid(),
            [sys.executable, os.path.join(TOP, "tests", "kgdboe_module.py"),
             "--obj", obj, "--initrd", initrd, "--workdir", work,
             "--cpus", "2"], f, 600)
    with open(outpath) as f:
        text = f.read()
    failed = [l for l in text.splitlines() if l.startswith("FAIL")]
    last = text.strip().splitlines()[-1:] or ["no output"]
    print("    kgdboe module, 2 cpus: %s" % last[0])
    check(rc == 0 and not failed and "0 failed" in last[0],
          "; ".join(failed) or npng.one_line(text[-300:]))


@test
def kgdboe_wrong_port_fails():
    """gdb pointed at a port kgdboe does not serve must not attach, and
    the session script must say so."""
    doc = run_kgdboe("kgdboe-wrongport", "e1000", "--port", "6444")
    steps = {st["step"]: st["pass"] for st in doc["steps"]}
    check(steps.get("boot") is True, "guest did not boot: %r" % steps)
    check(steps.get("attach") is False, "attach on a wrong port passed")
    check(doc["rc"] != 0 and doc["failed"] > 0, "script reported success")


@test
def no_namespace_or_qemu_left():
    ns = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE,
                        text=True).stdout
    ours = [l for l in ns.splitlines() if l.startswith("npng-")]
    check(not ours, "namespaces left: %s" % ours)
    ps = subprocess.run(["pgrep", "-af", "qemu-system-i386"],
                        stdout=subprocess.PIPE, text=True).stdout
    ours = [l for l in ps.splitlines() if RESULTS in l or
            os.path.join(TOP, "build") in l]
    check(not ours, "qemu left: %s" % ours)


def main():
    sel = sys.argv[1:]
    os.makedirs(RESULTS, exist_ok=True)
    passed = failed = 0
    t0 = time.monotonic()
    todo = [t for t in TESTS if not sel or any(s in t.__name__ for s in sel)]
    if sel and not todo:
        names = [t.__name__ for t in TESTS]
        print("usage: tests/run.py [name-substring...]\n"
              "no test matches %s; tests: %s" % (" ".join(sel),
                                                 ", ".join(names)),
              file=sys.stderr)
        return 2
    for i, t in enumerate(todo):
        ts = time.monotonic()
        try:
            t()
            passed += 1
            print("ok %d - %s (%.1fs)" % (i + 1, t.__name__,
                                          time.monotonic() - ts), flush=True)
        except Failed as e:
            failed += 1
            print("FAIL %d - %s: %s" % (i + 1, t.__name__, e), flush=True)
        except Exception:
            failed += 1
            print("FAIL %d - %s: error\n%s" % (
                i + 1, t.__name__, traceback.format_exc()), flush=True)
    print("tests took %.0fs" % (time.monotonic() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
