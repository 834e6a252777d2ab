#!/bin/bash
# make checkpatch: scripts/checkpatch.pl --strict on every patch in series.
# Exit status is the number of patches with errors, warnings or checks
# that scripts/checkpatch-waivers does not list (waived ones are printed).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
[ -x "$tree/scripts/checkpatch.pl" ] || { echo "checkpatch: no build/linux (make tree)" >&2; exit 1; }

bad=0
n=0
while read -r p; do
	n=$((n + 1))
	out=$(cd "$tree" && \
	      ./scripts/checkpatch.pl --strict --terse --showfile "$top/$p" 2>&1)
	found=$(echo "$out" | grep -E '(ERROR|WARNING|CHECK):' || true)
	waived=
	while IFS='|' read -r glob re why; do
		glob=$(echo "$glob" | xargs)
		re=$(echo "$re" | sed 's/^ *//; s/ *$//')
		case "$glob" in ''|'#'*) continue ;; esac
		# shellcheck disable=SC2053
		[[ "$p" == $glob ]] || continue
		w=$(echo "$found" | grep -E -- "$re" || true)
		[ -z "$w" ] || waived+="$w (waived:$why)"$'\n'
		found=$(echo "$found" | grep -vE -- "$re" || true)
	done <"$top/scripts/checkpatch-waivers"
	if [ -n "$found" ]; then
		echo "checkpatch: $p:"
		echo "$found" | sed 's/^/    /'
		bad=$((bad + 1))
	else
		echo "checkpatch: $p: clean${waived:+ (with waived findings)}"
	fi
	[ -z "$waived" ] || printf '%s' "$waived" | sed 's/^/    waived: /'
done < <("$top/scripts/series.sh")
echo "checkpatch: $n patch(es), $bad with findings"
exit $bad
