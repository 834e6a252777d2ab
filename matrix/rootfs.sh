#!/bin/bash
# make rootfs: the guest initramfs (build/rootfs.cpio) from the i386 .debs
# that `make deps` downloaded, plus our scripts in matrix/guest/.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
debdir=$top/build/debs
stage=$top/build/rootfs
out=$top/build/rootfs.cpio

die() { echo "rootfs: $*" >&2; exit 1; }

rm -rf "$stage"
mkdir -p "$stage"
for p in busybox-static iperf3 libiperf0 libc6 libssl3 libsctp1 ethtool libmnl0; do
	deb=$(ls "$debdir/${p}_"*_i386.deb 2>/dev/null | head -n 1)
	[ -n "$deb" ] || die "$p i386 package missing in build/debs (run 'make deps')"
	dpkg-deb -x "$deb" "$stage"
done

# util-linux: chrt only (needs libc alone), for a real-time runaway task
deb=$(ls "$debdir/util-linux_"*_i386.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || die "util-linux i386 package missing in build/debs (run 'make deps')"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$stage" ./usr/bin/chrt

cd "$stage"
# Drop what the guest never uses.
rm -rf usr/share/doc usr/share/man usr/share/locale usr/share/lintian \
	usr/lib/i386-linux-gnu/gconv usr/share/i18n
mkdir -p bin sbin usr/bin usr/sbin proc sys dev tmp etc root \
	sys/kernel/debug sys/kernel/config
# Debian 12 is usrmerged: make /lib point where the loader lives.
[ -e lib ] || ln -s usr/lib lib
[ -x usr/bin/iperf3 ] || die "iperf3 binary missing after unpacking"
bb=bin/busybox
mv "$(find . -path '*/bin/busybox' -type f | head -n 1)" "$bb.tmp"
mv "$bb.tmp" "$bb"
for app in $("./$bb" --list 2>/dev/null || chroot . /bin/busybox --list 2>/dev/null || true); do
	[ -e "bin/$app" ] || [ -e "usr/bin/$app" ] || ln -s busybox "bin/$app"
done
# A host that cannot run i386 programs (no IA32 emulation) lists no
# applets: the guest's init then makes the links at boot (--install).
[ -e bin/sh ] || ln -s busybox bin/sh
install -m 0755 "$top/matrix/guest/init" init
install -m 0755 "$top/matrix/guest/npng-agent" bin/npng-agent
install -m 0755 "$top/matrix/guest/nc-burst" bin/nc-burst
# the only compiled guest program: gcc-multilib's i386 libc, linked static
gcc -m32 -static -O2 -Wall -Werror -o bin/kmsg-timed "$top/matrix/guest/kmsg-timed.c" ||
	die "cannot build the i386 kmsg-timed (gcc-multilib missing? run 'make deps')"
echo "root:x:0:0:root:/root:/bin/sh" >etc/passwd
echo "root:x:0:" >etc/group
rm -f dev/console
mknod -m 600 dev/console c 5 1
mknod -m 666 dev/null c 1 3

find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet >"$out.tmp"
mv "$out.tmp" "$out"
echo "rootfs: $(du -h "$out" | cut -f1) ${out#"$top"/}"
