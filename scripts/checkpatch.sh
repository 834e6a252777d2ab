#!/bin/bash
# make checkpatch: scripts/checkpatch.pl --strict on every patch in series.
# Exit status is the number of patches with errors, warnings or checks.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
[ -x "$tree/scripts/checkpatch.pl" ] || { echo "checkpatch: no build/linux (make tree)" >&2; exit 1; }

bad=0
n=0
while read -r p; do
	case "$p" in ''|'#'*) continue ;; esac
	n=$((n + 1))
	out=$(cd "$tree" && \
	      ./scripts/checkpatch.pl --strict --terse --showfile "$top/$p" 2>&1)
	if echo "$out" | grep -qE '(ERROR|WARNING|CHECK):'; then
		echo "checkpatch: $p:"
		echo "$out" | grep -E '(ERROR|WARNING|CHECK):' | sed 's/^/    /'
		bad=$((bad + 1))
	else
		echo "checkpatch: $p: clean"
	fi
done <"$top/series"
echo "checkpatch: $n patch(es), $bad with findings"
exit $bad
