"""KTAP output and checks for the netpoll-ng harness.

Modelled on the kernel's tools/testing/selftests/net/lib/py/ksft.py (its
habits, not its code): checks that print both values and the line that
made them, defer() for cleanups, skip and xfail exceptions, and KTAP
results with nested subtests.  One addition, after netdev's CI (NIPA): a
test that fails is run once more, and both results stay visible, in the
KTAP output and in the JSON ("result" is the first run's, "retry" the
second's).  A test that passes only on its retry is flaky: it counts as
failed unless it is listed as a known flake (tests/known-flaky) with the
open problem it belongs to, and it is printed as flaky either way.

Python 3 standard library only.
"""

import inspect
import json
import os
import sys
import time
import traceback


class KsftFailEx(Exception):
    """A check failed; str() is the reason."""


class KsftSkipEx(Exception):
    """The test cannot run here; str() says why.  Never a pass."""


class KsftXfailEx(Exception):
    """A known failure, reported as XFAIL with its reason."""


def ksft_pr(*objs):
    print("#", *objs, flush=True)


def _where():
    """file:line of the test code that called a check."""
    for fr in inspect.stack()[2:]:
        if os.path.basename(fr.filename) != "ktap.py":
            ctx = (fr.code_context or ["?"])[0].strip()
            return "%s:%d: %s" % (os.path.basename(fr.filename), fr.lineno,
                                  ctx)
    return "?"


def _fail(what, comment):
    raise KsftFailEx("%s%s [%s]" % (what, " (%s)" % comment if comment
                                    else "", _where()))


def ksft_eq(a, b, comment=""):
    if a != b:
        _fail("%r != %r" % (a, b), comment)


def ksft_ge(a, b, comment=""):
    if a is None or a < b:
        _fail("%r < %r" % (a, b), comment)


def ksft_in(a, b, comment=""):
    if a not in b:
        _fail("%r not in %r" % (a, b), comment)


def ksft_true(a, comment=""):
    if not a:
        _fail("%r is not true" % (a,), comment)


# ---------------------------------------------------------------- defer

_DEFER = []


def defer(fn, *args, **kwargs):
    """Register a cleanup; run in reverse order when the test ends,
    whether it passed or not."""
    _DEFER.append((fn, args, kwargs))


def flush_defer():
    errors = []
    while _DEFER:
        fn, args, kwargs = _DEFER.pop()
        try:
            fn(*args, **kwargs)
        except Exception as e:  # a cleanup must not hide the others
            errors.append("%s: %s" % (getattr(fn, "__name__", fn), e))
    return errors


# ---------------------------------------------------------------- subtests

_SUBTESTS = []
ATTEMPT = [1]       # 1, or 2 while a failed case runs once more


def attempt_suffix():
    """"" on a first run, "-retry" on the retry: tests name their output
    files with it, so that the first failure's files are kept."""
    return "" if ATTEMPT[0] == 1 else "-retry"


def subtest(name, result, detail=""):
    """Record a nested result of the running test: result is "pass",
    "fail", "skip" or "xfail"; detail is printed after it."""
    _SUBTESTS.append({"name": name, "result": result, "detail": detail})


def ktap_line(ok, n, name, directive="", indent=""):
    line = "%s%sok %d %s" % (indent, "" if ok else "not ", n, name)
    if directive:
        line += " # " + directive
    return line


def _directive(res):
    if res["result"] in ("skip", "xfail"):
        return "%s %s" % (res["result"].upper(), res.get("detail") or "")
    return ""


def print_subtests(subs, indent="    "):
    if not subs:
        return
    print("%sKTAP version 1" % indent)
    print("%s1..%d" % (indent, len(subs)))
    for i, s in enumerate(subs, 1):
        if s["result"] == "fail" and s.get("detail"):
            print("%s# %s: %s" % (indent, s["name"], s["detail"]))
        print(ktap_line(s["result"] != "fail", i, s["name"], _directive(s),
                        indent))
    sys.stdout.flush()


# ---------------------------------------------------------------- running

def _attempt(case):
    """Run one case once; returns its result record (a case may itself
    run a plan: the caller's subtests are kept aside meanwhile)."""
    outer = list(_SUBTESTS)
    del _SUBTESTS[:]
    t0 = time.monotonic()
    res = {"result": "pass", "detail": ""}
    try:
        case()
    except KsftSkipEx as e:
        res = {"result": "skip", "detail": str(e)}
    except KsftXfailEx as e:
        res = {"result": "xfail", "detail": str(e)}
    except KsftFailEx as e:
        res = {"result": "fail", "detail": str(e)}
    except Exception:
        res = {"result": "fail", "detail": traceback.format_exc().strip()}
    for err in flush_defer():
        res = {"result": "fail", "detail": "cleanup failed: " + err}
    res["seconds"] = round(time.monotonic() - t0, 1)
    res["subtests"] = list(_SUBTESTS)
    _SUBTESTS[:] = outer
    return res


def _print_result(n, name, rec):
    print_subtests(rec["subtests"])
    final = rec["final"]
    if rec["result"] == "fail":
        for line in rec["detail"].splitlines():
            ksft_pr("%s: %s" % (name, line))
    ksft_pr("time: %.0f s" % rec["seconds"])
    note = ""
    if final == "flaky":
        note = "FLAKY first run failed, retry passed; %s" % (
            "known: " + rec["known_flaky"] if rec.get("known_flaky")
            else "not a known flake (tests/known-flaky): counted as failed")
    elif "retry" in rec:
        note = "first run failed, retry failed too"
    directive = _directive({"result": final,
                            "detail": rec.get("retry_detail",
                                              rec["detail"])})
    ok = final not in ("fail", "flaky") or bool(rec.get("known_flaky"))
    print(ktap_line(ok, n, name, directive or note))
    sys.stdout.flush()


def run(cases, json_path=None, retries=1, known_flaky=None):
    """Run cases (callables; their __name__ is the test name) as a KTAP
    test plan.  A failed case runs once more (retries=1); one that passes
    then is flaky, and counts as failed unless known_flaky (a dict: test
    name -> its open problem) lists it.  Returns the totals dict ("pass"
    and "fail" as the closing line counts them); writes every record,
    with its seconds, to json_path."""
    known_flaky = known_flaky or {}
    print("TAP version 13")
    print("1..%d" % len(cases), flush=True)
    totals = {"pass": 0, "fail": 0, "xfail": 0, "xpass": 0, "skip": 0,
              "error": 0, "flaky": 0, "known_flaky": 0}
    records = []
    for n, case in enumerate(cases, 1):
        name = case.__name__
        ksft_pr("%s: started" % name)
        rec = _attempt(case)
        rec["final"] = rec["result"]
        if rec["result"] == "fail" and retries:
            _print_first_failure(n, name, rec)
            ATTEMPT[0] = 2
            try:
                again = _attempt(case)
            finally:
                ATTEMPT[0] = 1
            rec["retry"] = again["result"]
            rec["retry_detail"] = again["detail"]
            rec["retry_subtests"] = again["subtests"]
            rec["seconds"] += again["seconds"]
            rec["subtests"] = again["subtests"]
            rec["final"] = "flaky" if again["result"] == "pass" \
                else again["result"]
        if rec["final"] == "flaky" and name in known_flaky:
            rec["known_flaky"] = known_flaky[name]
        rec["test"] = name
        records.append(rec)
        _print_result(n, name, rec)
        _count(totals, rec)
        if json_path:
            _write_json(json_path, records, totals)
    print("# Totals: pass:%(pass)d fail:%(fail)d xfail:%(xfail)d "
          "xpass:%(xpass)d skip:%(skip)d error:%(error)d flaky:%(flaky)d"
          % _ktap_totals(totals))
    flaky = [r for r in records if r["final"] == "flaky"]
    if flaky:
        print("# flaky: %d (%s)" % (len(flaky), ", ".join(
            "%s: %s" % (r["test"], "known, " + r["known_flaky"]
                        if r.get("known_flaky") else "not known, failed")
            for r in flaky)))
    return totals


def _count(totals, rec):
    """A known flake counts as passed on the closing line, an unknown one
    as failed; both count as flaky."""
    final = rec["final"]
    if final == "flaky":
        totals["flaky"] += 1
        known = bool(rec.get("known_flaky"))
        totals["known_flaky"] += known
        totals["pass" if known else "fail"] += 1
    else:
        totals[final] += 1


def _ktap_totals(totals):
    """The # Totals: line counts a flaky test as flaky only."""
    unknown = totals["flaky"] - totals["known_flaky"]
    return dict(totals, **{"pass": totals["pass"] - totals["known_flaky"],
                           "fail": totals["fail"] - unknown})


def _print_first_failure(n, name, rec):
    ksft_pr("%s: first run FAILED, running it once more; its subtests:"
            % name)
    print_subtests(rec["subtests"], indent="#     ")
    for line in rec["detail"].splitlines():
        ksft_pr("%s: first run: %s" % (name, line))


def _write_json(path, records, totals):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"totals": totals, "results": records}, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
