#!/bin/bash
# mutant.sh: prove that the netpoll KUnit suite can fail.
#
# Builds the series (build/linux as it is) with netpoll_parse_udp4()'s IP
# header checksum check disabled into build/obj-mutant, boots it without a
# disk or network (the suite runs at boot, then the kernel panics for want
# of a root file system and QEMU exits) and leaves the serial log in
# build/obj-mutant/kunit.log.
#
# Incremental: build/obj-mutant starts as a copy of build/obj, and the
# mutated netpoll_rx.c is bind-mounted over build/linux/net/core/netpoll_rx.c
# in a private mount namespace of this script (unshare -m), so the compiler
# sees the same paths and only netpoll_rx.o and the link are redone.  The
# tree on disk is never changed.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
obj=$top/build/obj-mutant
file=net/core/netpoll_rx.c	# netpoll_parse_udp4()
mutated=$top/build/mutant/netpoll_rx.c

die() { echo "mutant: $*" >&2; exit 1; }

[ -e "$tree/.git" ] || die "no build/linux (run 'make tree')"
[ -f "$top/build/obj/vmlinux" ] || die "no build/obj/vmlinux (run 'make kernel')"

if [ "${1:-}" != --in-namespace ]; then
	mkdir -p "$(dirname "$mutated")"
	# The mutation: accept any IP header checksum.
	sed 's/\(if (\)\(ip_fast_csum(data, iph->ihl))\)/\1false \&\& \2/' \
		"$tree/$file" >"$mutated"
	n=$(diff "$tree/$file" "$mutated" | grep -c '^>.*false && ip_fast_csum' || true)
	[ "$n" = 1 ] || die "the mutation did not apply to $file (changed $n lines)"
	echo "mutant: $file: IP header checksum check disabled"
	exec unshare --mount --propagation private "$0" --in-namespace
fi

mount --bind "$mutated" "$tree/$file"
SEED_OBJ=$top/build/obj TREE=$tree OBJ=$obj "$top/scripts/kernel.sh"
umount "$tree/$file"

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
