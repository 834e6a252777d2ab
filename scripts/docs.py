#!/usr/bin/env python3
"""make docs: the Markdown of every named run under docs/results/, and the
README's "which NIC?" table from the newest matrix run.

  scripts/docs.py            write them
  scripts/docs.py --check    write nothing; exit 1 if a file differs from
                             what it would write, or if the newest matrix
                             run is of another series than `series` lists
  scripts/docs.py --save build/results/matrix.json
                             keep a run as docs/results/<kind>-<date>/
                             (adds its name and the repository commit)

A named run is a folder docs/results/<kind>-<YYYY-MM-DD>[-<n>]/ holding
<kind>.json (with "name", "commit" and a date) and the generated
<kind>.md.
"""

import argparse
import json
import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "matrix"))
import npng  # noqa: E402
import report  # noqa: E402

RESULTS = os.path.join(TOP, "docs", "results")
README = os.path.join(TOP, "README.md")
BEGIN = "<!-- nic-table: written by make docs from the newest matrix run -->"
END = "<!-- nic-table end -->"


def runs(kind=None):
    """(name, json path) of the named runs, oldest first."""
    out = []
    for name in sorted(os.listdir(RESULTS)):
        k = name.split("-", 1)[0]
        path = os.path.join(RESULTS, name, k + ".json")
        if os.path.isfile(path) and kind in (None, k):
            out.append((name, path))
    return out


def load(path):
    with open(path) as f:
        return json.load(f)


def generic_markdown(doc):
    """A run that is not a matrix: its fields, then each list as a table."""
    out = ["# %s" % doc.get("name"), ""]
    for k, v in doc.items():
        if not isinstance(v, (list, dict)):
            out.append("- **%s**: %s" % (k, v))
        elif isinstance(v, dict):
            out.append("- **%s**: %s" % (k, ", ".join(
                "%s %s" % (a, b) for a, b in v.items())))
    for k, v in doc.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            cols = list(v[0])
            out += ["", "## %s" % k, "", "| %s |" % " | ".join(cols),
                    "|" + "---|" * len(cols)]
            out += ["| %s |" % " | ".join(str(r.get(c, "-")) for c in cols)
                    for r in v]
    return "\n".join(out) + "\n"


def run_markdown(name, path):
    doc = load(path)
    if name.startswith("matrix-"):
        return "# %s\n\n%s" % (name, report.markdown(doc))
    return generic_markdown(doc)


def readme_with_table(text, table):
    if BEGIN not in text or END not in text:
        raise SystemExit("docs: README.md has no %s ... %s block"
                         % (BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + table + END + tail


def wanted():
    """{path: text} of every generated file."""
    files = {}
    for name, path in runs():
        files[path[:-len(".json")] + ".md"] = run_markdown(name, path)
    matrix = runs("matrix")
    if not matrix:
        raise SystemExit("docs: no named matrix run under docs/results")
    name, path = matrix[-1]
    with open(README) as f:
        files[README] = readme_with_table(f.read(), report.nic_table(
            load(path), os.path.relpath(path, TOP)))
    return files


def stale_series():
    """Why the newest matrix run does not describe `series`, or None."""
    name, path = runs("matrix")[-1]
    ran = load(path).get("series", [])
    now = npng.read_series()
    if ran == now:
        return None
    return ("%s ran %d patches, series lists %d (%d differ): run make "
            "matrix and keep it with scripts/docs.py --save" % (
                name, len(ran), len(now), len(set(ran) ^ set(now))))


def save(src):
    doc = load(src)
    kind = os.path.basename(src).split(".")[0].split("-")[0]
    date = str(doc.get("started") or doc.get("date"))[:10]
    name, n = "%s-%s" % (kind, date), 1
    while os.path.exists(os.path.join(RESULTS, name)):
        n += 1
        name = "%s-%s-%d" % (kind, date, n)
    commit = subprocess.run(["git", "-C", TOP, "rev-parse", "--short",
                             "HEAD"], capture_output=True, text=True)
    doc = dict({"name": name, "commit": commit.stdout.strip()}, **doc)
    os.makedirs(os.path.join(RESULTS, name))
    npng.write_json(os.path.join(RESULTS, name, kind + ".json"), doc)
    print("docs: kept %s as docs/results/%s" % (src, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare only; exit 1 on a difference")
    ap.add_argument("--save", metavar="JSON",
                    help="keep this run's JSON as a named run first")
    a = ap.parse_args()
    if a.save:
        save(a.save)
    bad = []
    for path, text in wanted().items():
        old = open(path).read() if os.path.exists(path) else None
        if old == text:
            continue
        if a.check:
            bad.append("%s differs from what make docs writes"
                       % os.path.relpath(path, TOP))
        else:
            with open(path, "w") as f:
                f.write(text)
            print("docs: wrote %s" % os.path.relpath(path, TOP))
    if a.check:
        why = stale_series()
        if why:
            bad.append(why)
        for b in bad:
            print("docs: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
