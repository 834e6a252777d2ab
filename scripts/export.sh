#!/bin/bash
# make export: write the commits on top of "pristine" in build/linux back
# as patches, in order, into the files that `series` names.
#
# Commit i (1-based) is written to the i-th file in series, keeping its
# name.  Commits beyond the series get a new file NNNN-<subject>.patch in
# $NEWDIR (default: the folder of the last series entry, or core/).  When
# there are fewer commits than series entries, the extra files are removed.
# Every commit must carry the project identity and its Signed-off-by.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
ident="netpoll-ng <netpoll-ng@example.org>"

die() { echo "export: $*" >&2; exit 1; }
g() { git -C "$tree" "$@"; }

[ -d "$tree/.git" ] || die "no build/linux (run 'make tree')"
[ -z "$(g status --porcelain --untracked-files=no)" ] ||
	die "build/linux has uncommitted changes: commit them first"
[ -d "$tree/.git/rebase-apply" ] && die "a git am is in progress in build/linux"

mapfile -t old < <("$top/scripts/series.sh")
mapfile -t commits < <(g rev-list --reverse pristine..HEAD)

for c in "${commits[@]}"; do
	subj=$(g log -1 --format=%s "$c")
	[ "$(g log -1 --format='%an <%ae>' "$c")" = "$ident" ] ||
		die "commit '$subj': author is not $ident"
	g log -1 --format=%B "$c" | grep -qxF "Signed-off-by: $ident" ||
		die "commit '$subj': no 'Signed-off-by: $ident'"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ${#commits[@]} -gt 0 ]; then
	g format-patch -q -N --zero-commit --no-signature -o "$tmp" pristine..HEAD
fi
mapfile -t made < <(ls "$tmp" | sort)

newdir=${NEWDIR:-}
if [ -z "$newdir" ]; then
	if [ ${#old[@]} -gt 0 ]; then
		newdir=$(dirname "${old[-1]}")
	else
		newdir=core
	fi
fi

: >"$tmp/series.new"
i=0
changed=0
for f in "${made[@]}"; do
	[ "$f" != series.new ] || continue
	if [ $i -lt ${#old[@]} ]; then
		dest=${old[$i]}
	else
		dest=$newdir/$f
	fi
	mkdir -p "$top/$(dirname "$dest")"
	if ! cmp -s "$tmp/$f" "$top/$dest"; then
		cp "$tmp/$f" "$top/$dest"
		echo "export: wrote $dest"
		changed=$((changed + 1))
	fi
	echo "$dest" >>"$tmp/series.new"
	i=$((i + 1))
done
while [ $i -lt ${#old[@]} ]; do
	echo "export: removed ${old[$i]} (no commit for it any more)"
	rm -f "$top/${old[$i]}"
	i=$((i + 1))
	changed=$((changed + 1))
done
# Keep comments of the old series at the top.
{ grep '^#' "$top/series" || true; cat "$tmp/series.new"; } >"$tmp/series.full"
cmp -s "$tmp/series.full" "$top/series" || cp "$tmp/series.full" "$top/series"

g rev-parse HEAD >"$tree/.git/npng-applied"
"$top/scripts/series-hash.sh" >"$tree/.git/npng-series-hash"
echo "export: ${#commits[@]} commit(s) in series, $changed file(s) changed"
