#!/bin/bash
# Print a hash of `series` and of every patch it names: make tree and
# make export record it to tell whether build/linux matches the series.
top=$(cd "$(dirname "$0")/.." && pwd)
{
	cat "$top/series"
	"$top/scripts/series.sh" | while read -r p; do
		cat "$top/$p" 2>/dev/null || echo "missing $p"
	done
} | sha256sum | cut -d' ' -f1
