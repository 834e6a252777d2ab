#!/bin/bash
# make kernel [BASELINE=1] [DEBUG=1]: build the i386 matrix kernel.
#
#   default     build/linux (series applied)      -> build/obj
#   BASELINE=1  build/linux-base (pristine only)  -> build/obj-base
#   DEBUG=1     build/linux plus matrix/kernel-debug.config (lockdep,
#               atomic-sleep and spinlock debugging) -> build/obj-debug
#
# For development in another git worktree: TREE=dir OBJ=dir build that tree
# into that folder; SEED_OBJ=dir first copies that built object folder into
# OBJ (mtimes kept), so that only what differs is rebuilt: kbuild tracks
# each config option and each source file separately (the mutant and the
# module kernels start from build/obj); EXTRA_CONFIG=file merges one more fragment (its
# options override the matrix fragment's);
# SKIP_UNKNOWN=1 skips fragment options the tree does not have (bisect).
#
# The config is tinyconfig plus matrix/kernel.config, merged with the
# kernel's merge_config.sh.  .config is only replaced when its content
# changes, so a second run with nothing changed rebuilds nothing.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
tree=${TREE:-$top/build/linux}
obj=${OBJ:-$top/build/obj}
frags=("$top/matrix/kernel.config")
if [ "${DEBUG:-0}" = 1 ]; then
	frags+=("$top/matrix/kernel-debug.config")
	[ -n "${OBJ:-}" ] || obj=$top/build/obj-debug
fi
[ -z "${EXTRA_CONFIG:-}" ] || frags+=("$(realpath "$EXTRA_CONFIG")")
jobs=${JOBS:-$(nproc)}

die() { echo "kernel: $*" >&2; exit 1; }

[ -e "$tree/.git" ] || die "no build/linux (run 'make tree')"

# One kernel build at a time on this machine (2 cores): wait for another.
exec 9>"$top/build/.kbuild.lock"
if ! flock -n 9; then
	echo "kernel: another kernel build is running, waiting for it"
	flock 9
fi

if [ "${BASELINE:-0}" = 1 ]; then
	base=$top/build/linux-base
	if [ ! -d "$base" ]; then
		echo "kernel: adding worktree build/linux-base at tag pristine"
		git -C "$tree" worktree prune
		git -C "$tree" worktree add -q --detach "$base" pristine
	fi
	git -C "$base" checkout -q --detach pristine
	tree=$base
	obj=$top/build/obj-base
fi
if [ -n "${SEED_OBJ:-}" ]; then
	[ -f "$SEED_OBJ/vmlinux" ] || die "SEED_OBJ=$SEED_OBJ holds no built kernel"
	echo "kernel: seeding ${obj#"$top"/} from ${SEED_OBJ#"$top"/} (incremental build)"
	mkdir -p "$obj"
	rsync -a --delete --exclude build.log "$SEED_OBJ/" "$obj/"
fi
mkdir -p "$obj"

kmake() { make -s -C "$tree" O="$obj" ARCH=i386 "$@"; }

# Generate the wanted config in a scratch folder.
cfg=$obj/.npng-config
rm -rf "$cfg"
mkdir -p "$cfg"
make -s -C "$tree" O="$cfg" ARCH=i386 tinyconfig >/dev/null
(cd "$cfg" && ARCH=i386 "$tree/scripts/kconfig/merge_config.sh" -m -O "$cfg" \
	"$cfg/.config" "${frags[@]}" >"$cfg/merge.log" 2>&1) ||
	{ cat "$cfg/merge.log"; die "merge_config.sh failed"; }
make -s -C "$tree" O="$cfg" ARCH=i386 olddefconfig >/dev/null

# Every option the fragment asks for must really be set.
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*)
		opt=${line%%=*}
		want=${line#*=}
		if [ "$want" = n ]; then
			grep -qx "# $opt is not set" "$cfg/.config" || ! grep -q "^$opt=" "$cfg/.config" ||
				{ echo "kernel: $opt: wanted n, got $(grep "^$opt=" "$cfg/.config")" >&2; bad=1; }
		elif { [ "${BASELINE:-0}" = 1 ] || [ "${SKIP_UNKNOWN:-0}" = 1 ]; } &&
		     ! grep -qE "^$opt=|^# $opt is not set" "$cfg/.config"; then
			echo "kernel: $opt does not exist in the pristine tree, skipped"
		elif ! grep -qx "$opt=$want" "$cfg/.config"; then
			got=$(grep -E "^$opt=|^# $opt is not set" "$cfg/.config" || echo "absent")
			echo "kernel: $opt: wanted $want, got: $got" >&2
			bad=1
		fi
		;;
	esac
done < <(awk -F= '/^CONFIG_/ { last[$1] = $0 } END { for (o in last) print last[o] }' "${frags[@]}")
[ $bad = 0 ] || die "config fragment not satisfied (see above); a dependency is missing"

if ! cmp -s "$cfg/.config" "$obj/.config"; then
	echo "kernel: config changed, installing new .config"
	cp "$cfg/.config" "$obj/.config"
fi
rm -rf "$cfg"

echo "kernel: building bzImage in ${obj#"$top"/} with -j$jobs ($(make -s -C "$tree" kernelversion))"
start=$(date +%s)
targets=(bzImage)
# a fragment that enables modules (EXTRA_CONFIG with CONFIG_KGDBOE=m) gets them built
grep -qx 'CONFIG_MODULES=y' "$obj/.config" && targets+=(modules)
make -C "$tree" O="$obj" ARCH=i386 -j"$jobs" "${targets[@]}" >"$obj/build.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' INT TERM
while kill -0 $pid 2>/dev/null; do
	sleep 5
	t=$(( $(date +%s) - start ))
	if [ $((t % 30)) -lt 5 ] && [ $t -ge 30 ]; then
		echo "kernel: ... ${t}s, $(grep -c '^  CC' "$obj/build.log" || true) files compiled"
	fi
done
rc=0
wait $pid || rc=$?
grep -E 'warning:|error:' "$obj/build.log" || true
[ $rc = 0 ] || { tail -n 20 "$obj/build.log"; die "build failed (exit $rc), see ${obj#"$top"/}/build.log"; }
echo "kernel: done in $(( $(date +%s) - start ))s: ${obj#"$top"/}/arch/x86/boot/bzImage"
