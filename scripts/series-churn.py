#!/usr/bin/env python3
"""Count the lines of the series that a later patch removes after an
earlier patch of the series added them (rework that a fold should have
put into the patch that added the line).

Reads the patches that `series` names (or the files given), in order.  A
line is the pair (file, text); lines that are blank or punctuation only
("}", "{", "*/") are not counted, because they match across unrelated
code.  Prints one line per patch that removes such lines, then the total:
"churn: N line(s) added by one patch and removed by a later one".
Exit status 0; --max N makes it 1 when the total is above N.
"""

import argparse
import collections
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIVIAL = re.compile(r"^[\s{}()\[\];,*/]*$")


def read_series(path):
    with open(path) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def diff_lines(text):
    """(sign, file, line) for each added or removed line of a patch."""
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            cur = line.split(" b/", 1)[-1]
        elif line.startswith(("+++ ", "--- ")):
            continue
        elif cur and line[:1] in "+-" and not TRIVIAL.match(line[1:]):
            out.append((line[0], cur, line[1:].rstrip()))
    return out


def churn(patches):
    """[(patch, lines it removes that an earlier patch added)], in order."""
    live = collections.Counter()
    per_patch = []
    for p in patches:
        with open(p, errors="replace") as f:
            lines = diff_lines(f.read())
        removed = 0
        for sign, path, text in lines:
            if sign == "-" and live[(path, text)] > 0:
                live[(path, text)] -= 1
                removed += 1
        for sign, path, text in lines:
            if sign == "+":
                live[(path, text)] += 1
        per_patch.append((p, removed))
    return per_patch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("patches", nargs="*",
                    help="patch files in order (default: those of series)")
    ap.add_argument("--series", default=os.path.join(TOP, "series"))
    ap.add_argument("--max", type=int, help="exit 1 above this total")
    args = ap.parse_args()
    patches = args.patches or [os.path.join(TOP, p)
                               for p in read_series(args.series)]
    missing = [p for p in patches if not os.path.exists(p)]
    if missing:
        print("series-churn: no such patch: %s" % " ".join(missing),
              file=sys.stderr)
        return 2
    per_patch = churn(patches)
    total = 0
    for p, n in per_patch:
        if n:
            print("%5d %s" % (n, os.path.relpath(p, TOP)))
        total += n
    print("churn: %d line(s) added by one patch and removed by a later one"
          % total)
    return 1 if args.max is not None and total > args.max else 0


if __name__ == "__main__":
    sys.exit(main())
