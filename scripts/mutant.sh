#!/bin/bash
# mutant.sh: prove that the netpoll KUnit suite can fail.
#
# Builds the series (build/linux HEAD) with netpoll_parse_udp4()'s IP
# header checksum check disabled, in the worktree build/linux-mutant and
# build/obj-mutant, boots it without a disk or network (the suite runs at
# boot, then the kernel panics for want of a root file system and QEMU
# exits) and leaves the serial log in build/obj-mutant/kunit.log.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux-mutant
obj=$top/build/obj-mutant
file=net/core/netpoll.c

die() { echo "mutant: $*" >&2; exit 1; }

[ -e "$top/build/linux/.git" ] || die "no build/linux (run 'make tree')"
head=$(git -C "$top/build/linux" rev-parse HEAD)
if ! git -C "$tree" rev-parse -q --verify HEAD >/dev/null 2>&1; then
	rm -rf "$tree"
	git -C "$top/build/linux" worktree prune
	git -C "$top/build/linux" worktree add -q --detach "$tree" "$head"
fi
git -C "$tree" checkout -q -f --detach "$head"

# The mutation: accept any IP header checksum.
sed -i 's/\(if (\)\(ip_fast_csum(data, iph->ihl))\)/\1false \&\& \2/' "$tree/$file"
n=$(git -C "$tree" diff -U0 | grep -c '^+.*false && ip_fast_csum' || true)
[ "$n" = 1 ] || die "the mutation did not apply to $file (changed $n lines)"
echo "mutant: $file: IP header checksum check disabled"

TREE=$tree OBJ=$obj "$top/scripts/kernel.sh"

log=$obj/kunit.log
rm -f "$log"
echo "mutant: booting it (no disk, no network) for its KUnit results"
timeout 300 qemu-system-i386 -accel tcg -M pc -nodefaults -display none \
	-no-reboot -m 256 -nic none -kernel "$obj/arch/x86/boot/bzImage" \
	-append "console=ttyS0,115200 panic=-1" \
	-chardev "file,id=con,path=$log" -serial chardev:con -monitor none \
	</dev/null >/dev/null 2>&1 || true
grep -E '# netpoll: pass:|not ok [0-9]+ netpoll_' "$log" ||
	die "no netpoll KUnit results in ${log#"$top"/}"
