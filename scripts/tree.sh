#!/bin/bash
# make tree: extract Debian's linux-source-6.12 into build/linux as a git
# repository (pristine source = first commit, tagged "pristine") and apply
# every patch named in `series` with git am.
#
# Re-running it resets build/linux to pristine and re-applies the series, but
# refuses when that would throw away work: uncommitted changes, or commits
# made since the last `make tree`/`make export` (set FORCE=1 to discard them).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
tarball=${LINUX_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
ident_name="netpoll-ng"
ident_mail="netpoll-ng@example.org"

die() { echo "tree: $*" >&2; exit 1; }

[ -f "$tarball" ] || die "$tarball not found (run 'make deps')"

g() { git -C "$tree" "$@"; }

series_hash() { "$top/scripts/series-hash.sh"; }

if [ -d "$tree/.git" ] && g rev-parse -q --verify pristine >/dev/null &&
   [ "$(cat "$tree/.git/npng-series-hash" 2>/dev/null)" = "$(series_hash)" ]; then
	applied=$(cat "$tree/.git/npng-applied" 2>/dev/null || true)
	if [ "$(g rev-parse HEAD)" = "$applied" ] &&
	   [ -z "$(g status --porcelain --untracked-files=no)" ]; then
		make -s -C "$tree" kernelversion >"$top/build/kernel-version"
		echo "tree: build/linux is up to date with series ($(cat "$top/build/kernel-version"))"
		exit 0
	fi
	if [ "${1:-}" = --if-needed ]; then
		echo "tree: build/linux has local work not in series (unexported commits or changes); building it as it is"
		make -s -C "$tree" kernelversion >"$top/build/kernel-version"
		exit 0
	fi
fi

if [ -d "$tree/.git" ] && g rev-parse -q --verify pristine >/dev/null; then
	if [ -d "$tree/.git/rebase-apply" ]; then
		g am --abort || true
	fi
	if [ "${FORCE:-0}" != 1 ]; then
		if [ -n "$(g status --porcelain --untracked-files=no)" ]; then
			die "build/linux has uncommitted changes; commit and 'make export' them, or FORCE=1 make tree to discard"
		fi
		applied=$(cat "$tree/.git/npng-applied" 2>/dev/null || true)
		if [ -n "$applied" ] && [ "$(g rev-parse HEAD)" != "$applied" ]; then
			die "build/linux has commits that were not exported; 'make export' first, or FORCE=1 make tree to discard"
		fi
	fi
	echo "tree: resetting build/linux to pristine"
	g checkout -q -f -B work pristine
else
	rm -rf "$tree" "$tree.tmp"
	mkdir -p "$tree.tmp"
	echo "tree: extracting $(basename "$tarball")"
	tar -C "$tree.tmp" -xf "$tarball"
	src=$(find "$tree.tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	[ -f "$src/Makefile" ] || die "no kernel Makefile in $tarball"
	mv "$src" "$tree"
	rm -rf "$tree.tmp"
	echo "tree: creating git repository with the pristine source"
	# Debian's packaging appends "/*" to .gitignore (its repository holds
	# only debian/), which would hide every new file from git: drop that
	# block so the pristine commit has the upstream .gitignore.
	sed -i '/^# Debian packaging: ignore everything at the top level/,/^!\/debian\/$/d' "$tree/.gitignore"
	sed -i '${/^#$/d}' "$tree/.gitignore"
	git -C "$tree" init -q -b work
	g config user.name "$ident_name"
	g config user.email "$ident_mail"
	g config core.autocrlf false
	g config gc.auto 0
	g add -A -f .
	ver=$(make -s -C "$tree" kernelversion)
	g commit -q -m "Linux $ver (Debian linux-source-6.12, pristine)"
	g tag pristine
fi

ver=$(make -s -C "$tree" kernelversion)
echo "$ver" >"$top/build/kernel-version"
echo "tree: kernel $ver"

n=0
while read -r p; do
	[ -f "$top/$p" ] || die "series names $p, which does not exist"
	if ! g am -q --keep-cr "$top/$p"; then
		g am --abort || true
		die "patch $p does not apply to $ver"
	fi
	n=$((n + 1))
done < <("$top/scripts/series.sh")

g rev-parse HEAD >"$tree/.git/npng-applied"
series_hash >"$tree/.git/npng-series-hash"
echo "tree: $n patch(es) applied on top of pristine $ver"
