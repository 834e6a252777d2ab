#!/bin/bash
# make bisect: build and boot the tree after every patch of the series.
#
# Checks out each commit of build/linux (pristine..HEAD) in the worktree
# build/linux-bisect, builds it incrementally into build/obj-bisect with
# the matrix config (options that do not exist yet at that commit are
# skipped), boots it on e1000 for the burst-only matrix step, and prints
# one line per patch.  Results: build/bisect/<n>.json and summary.txt.
#
# ONLY="3 4 69" (patch numbers) checks those patches alone, after a rebase
# that changed only them: the others then give the trees they gave before.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
main=$top/build/linux
tree=$top/build/linux-bisect
obj=$top/build/obj-bisect
out=$top/build/bisect

die() { echo "bisect: $*" >&2; exit 1; }

[ -e "$main/.git" ] || die "no build/linux (run 'make tree')"
if ! git -C "$tree" rev-parse -q --verify HEAD >/dev/null 2>&1; then
	rm -rf "$tree"
	git -C "$main" worktree prune
	git -C "$main" worktree add -q --detach "$tree" pristine
fi
mkdir -p "$out"
: >"$out/summary.txt"
commits=$(git -C "$main" rev-list --reverse pristine..HEAD)
total=$(echo "$commits" | wc -w)
n=0
bad=0
for c in $commits; do
	n=$((n + 1))
	if [ -n "${ONLY:-}" ] && ! [[ " $ONLY " == *" $n "* ]]; then
		continue
	fi
	subj=$(git -C "$main" log -1 --format=%s "$c")
	echo "bisect: [$n/$total] $subj"
	git -C "$tree" checkout -q -f --detach "$c"
	if ! SKIP_UNKNOWN=1 TREE=$tree OBJ=$obj "$top/scripts/kernel.sh" >"$out/$n.build.log" 2>&1; then
		echo "[$n/$total] BUILD FAILED  $subj (build/bisect/$n.build.log)" | tee -a "$out/summary.txt"
		bad=1
		continue
	fi
	# One warning is pristine 6.12 code, which no patch touches: the %ld for
	# a size_t in kernel/module/signing.c on i386 (printed by the builds
	# that recompile it).  Every other warning fails the patch.
	if grep 'warning:' "$out/$n.build.log" |
	   grep -qv "format ‘%ld’ expects argument of type ‘long int’, but argument 2 has type ‘size_t’"; then
		echo "[$n/$total] WARNINGS      $subj (build/bisect/$n.build.log)" | tee -a "$out/summary.txt"
		bad=1
	fi
	/usr/bin/python3 "$top/matrix/run.py" --nics e1000 --poll-modes driver \
		--steps burst --burst 500 --kernel "$obj/arch/x86/boot/bzImage" \
		--results "$out" --name "$n" >"$out/$n.boot.log" 2>&1 || true
	status=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cells"][0]["status"])' "$out/$n.json" 2>/dev/null || echo "no-result")
	printf '[%d/%d] %-13s %s\n' "$n" "$total" "boot $status" "$subj" | tee -a "$out/summary.txt"
	[ "$status" = pass ] || bad=1
done
if [ $bad = 0 ]; then
	echo "bisect: every patch${ONLY:+ of $ONLY} builds without warnings and boots"
else
	die "some patch failed (build/bisect/summary.txt)"
fi
