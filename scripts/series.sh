#!/bin/bash
# Print the patch files that `series` names, one per line, in order: the
# one parser of `series` for the shell scripts (matrix/npng.py's
# read_series() is the Python one, with the same rule: blank lines and
# lines starting with # are skipped).
top=$(cd "$(dirname "$0")/.." && pwd)
grep -v '^[[:space:]]*\(#\|$\)' "$top/series" || true
