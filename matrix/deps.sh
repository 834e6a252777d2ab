#!/bin/bash
# Install everything the build, the matrix and the tests need (Debian 12).
# Idempotent: quiet and quick when everything is already there.
# Guest (i386) packages are downloaded and unpacked, never installed.
# deps.sh --check installs only what `make check` needs.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
debdir=$top/build/debs

# gcc and man-db: make check builds the host tools and checks their man pages
check_pkgs="python3 pyflakes3 shellcheck git gcc libc6-dev man-db"
# gcc-multilib: the i386 libc that the guest's kmsg-timed links with
host_pkgs="$check_pkgs linux-source-6.12 qemu-system-x86 gdb iperf3 socat bc bison flex
	libelf-dev libssl-dev cpio xz-utils make gcc git iproute2 kmod python3
	perl rsync iputils-ping procps python3-matplotlib gcc-multilib"
# util-linux: only its chrt goes into the rootfs (a real-time runaway task)
guest_pkgs="busybox-static:i386 iperf3:i386 libiperf0:i386 libc6:i386
	libssl3:i386 libsctp1:i386 util-linux:i386 ethtool:i386 libmnl0:i386"

export DEBIAN_FRONTEND=noninteractive

want_pkgs=$host_pkgs
[ "${1:-}" != --check ] || want_pkgs=$check_pkgs
missing=""
for p in $want_pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q "install ok installed" || missing="$missing $p"
done

# A mirror in the middle of a sync serves an index of the wrong size and
# apt-get update fails ("Mirror sync in progress?"): try again a few
# times, then go on with what apt has.  A package that cannot be found
# still stops the install or download below with apt's own error.
updated=0
apt_update() {
	local try
	[ "$updated" = 0 ] || return 0
	updated=1
	for try in 1 2 3; do
		echo "deps: apt-get update (try $try of 3)"
		apt-get update -qq && return 0
		[ "$try" = 3 ] || sleep 20
	done
	echo "deps: apt-get update failed 3 times; going on with the indexes apt has" >&2
}

if [ -n "$missing" ]; then
	apt_update
	echo "deps: installing$missing"
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

[ "${1:-}" != --check ] || exit 0

if ! dpkg --print-foreign-architectures | grep -qx i386; then
	echo "deps: dpkg --add-architecture i386"
	dpkg --add-architecture i386
	updated=0
fi

mkdir -p "$debdir"
need=""
for p in $guest_pkgs; do
	name=${p%%:*}
	ls "$debdir/${name}_"*_i386.deb >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
	apt_update
	echo "deps: downloading guest packages$need"
	# shellcheck disable=SC2086
	(cd "$debdir" && apt-get download -qq -o APT::Sandbox::User=root $need)
fi

tarball=$(ls /usr/src/linux-source-6.12.tar.xz 2>/dev/null || true)
if [ -z "$tarball" ]; then
	echo "deps: /usr/src/linux-source-6.12.tar.xz missing after install" >&2
	exit 1
fi
