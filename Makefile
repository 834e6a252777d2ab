# netpoll-ng: the one entry point.  See README.md.
#
#   make matrix   all set-up, then the NIC matrix (build/results/matrix.md)
#   make test     all set-up, then the fast lane of the test suite (every
#                 feature once; within 20 minutes on a fresh clone)
#   make test-full  all set-up, then every test (every lockdep-kernel
#                 session, every NIC for each client): run it before an
#                 issue that touches the kernel is resolved
#   make check    the fast lane: parsers on fixtures, pyflakes3, shellcheck
#                 (no kernel, no QEMU, under a minute)
#   make perf     the series against mainline (ABBA, REPS=5 boots each), netconsole
#                 against record size (1 and 2 CPUs), and
#                 kgdboe (plain, authenticated)/kgdboc/gdbstub, with plots (build/results/perf/)
#   make bridge   the host tools: build/kgdboe-bridge, gdb's pipe to kgdboe's
#                 authenticated mode (tools/kgdboe-bridge), and build/netsysrq,
#                 authenticated SysRq over UDP (tools/netsysrq; also
#                 `make netsysrq`); `make install PREFIX=...` installs
#                 them with their man pages (man/)
#   make docs     the Markdown of the named runs (docs/results/) and the
#                 README's NIC table from the newest matrix run
#
# Variables: JOBS (build parallelism), BASELINE=1 (kernel: unpatched tree),
# DEBUG=1 (kernel, matrix: the lockdep/atomic-sleep kernel in build/obj-debug),
# POLL_MODES=driver,generic (matrix: the poll modes to run each NIC in),
# KGDBOE_MODES=driver,generic (matrix: the modes that also run a kgdboe session),
# NICS=e1000,pcnet (matrix, perf: a subset), REPS=N (perf: repetitions), BURST=N, IPERF_SECONDS=N, CPUS=N,
# FORCE=1 (tree: discard
# unexported work in build/linux).

SHELL := /bin/bash
PYTHON := /usr/bin/python3
JOBS ?= $(shell nproc)
export JOBS BASELINE DEBUG FORCE

ifeq ($(DEBUG),1)
KIMAGE := build/obj-debug/arch/x86/boot/bzImage
else
KIMAGE := build/obj/arch/x86/boot/bzImage
endif
ROOTFS := build/rootfs.cpio
GUEST_FILES := $(wildcard matrix/guest/*)

MATRIX_ARGS :=
ifneq ($(NICS),)
MATRIX_ARGS += --nics $(NICS)
endif
ifneq ($(BURST),)
MATRIX_ARGS += --burst $(BURST)
endif
ifneq ($(IPERF_SECONDS),)
MATRIX_ARGS += --iperf-seconds $(IPERF_SECONDS)
endif
ifneq ($(CPUS),)
MATRIX_ARGS += --cpus $(CPUS)
endif
ifneq ($(POLL_MODES),)
MATRIX_ARGS += --poll-modes $(POLL_MODES)
endif
ifneq ($(KGDBOE_MODES),)
MATRIX_ARGS += --kgdboe-modes $(KGDBOE_MODES)
endif
PERF_ARGS :=
ifneq ($(NICS),)
PERF_ARGS += --nics $(NICS)
endif
ifneq ($(REPS),)
PERF_ARGS += --reps $(REPS)
endif

ifeq ($(DEBUG),1)
MATRIX_ARGS += --kernel $(KIMAGE) --name matrix-debug
endif

.PHONY: prepare-tree all deps check-deps check tree export kernel rootfs bridge netsysrq install docs matrix perf test test-full transcript transcript-auth checkpatch bisect clean distclean help

all: help

help:
	@sed -n '1,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@./matrix/deps.sh

check-deps:
	@./matrix/deps.sh --check

check: check-deps
	@$(PYTHON) tests/check.py

# Extract and patch the tree (a no-op when it already matches `series`).
tree: deps
	@./scripts/tree.sh

# Internal: like tree, but builds unexported local work as it is.
prepare-tree: deps
	@./scripts/tree.sh --if-needed

export:
	@./scripts/export.sh

kernel: prepare-tree
	@./scripts/kernel.sh

rootfs: $(ROOTFS)

# The host tools: build/T from tools/T/ and tools/common/ (NPA1, HMAC).
TOOLS := kgdboe-bridge netsysrq
TOOLS_COMMON := $(wildcard tools/common/*.[ch])

bridge: $(TOOLS:%=build/%)

netsysrq: build/netsysrq

define host_tool
build/$(1): $(wildcard tools/$(1)/*.[ch]) $(TOOLS_COMMON) | deps
	@mkdir -p build
	cc -O2 -Wall -Wextra -Werror -Itools/common -o $$@ $$(filter %.c,$$^)
endef
$(foreach t,$(TOOLS),$(eval $(call host_tool,$(t))))

# make install PREFIX=/usr/local (DESTDIR too): the host tools and their
# man pages.
PREFIX ?= /usr/local
install: bridge
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(TOOLS:%=build/%) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(TOOLS:%=man/%.1) $(DESTDIR)$(PREFIX)/share/man/man1/

# The Markdown of the named runs in docs/results/ and README's NIC table.
docs:
	@$(PYTHON) scripts/docs.py

$(ROOTFS): matrix/rootfs.sh $(GUEST_FILES) | deps
	@./matrix/rootfs.sh

matrix: kernel rootfs bridge
	@$(PYTHON) matrix/run.py $(MATRIX_ARGS)

# The baseline (mainline, build/obj-base) is built after the series kernel,
# never at the same time.
perf: kernel rootfs bridge
	@BASELINE=1 ./scripts/kernel.sh
	@$(PYTHON) perf/perf.py $(PERF_ARGS)

checkpatch: prepare-tree
	@./scripts/checkpatch.sh

# Build and boot the tree after every patch (slow: one build per patch).
bisect: prepare-tree rootfs
	@./scripts/bisect.sh

test: kernel rootfs bridge
	@$(PYTHON) tests/run.py --lane fast

test-full: kernel rootfs bridge
	@$(PYTHON) tests/run.py --lane full

# A literal gdb -batch session over kgdboe (2 CPUs, iperf3 load), written
# to docs/kgdboe-session.txt, which the README quotes.
transcript: kernel rootfs
	@$(PYTHON) tests/transcript.py --out docs/kgdboe-session.txt

# The same in authenticated mode, through build/kgdboe-bridge and a relay
# that drops 5% each way (duplicates and reorders 2.5%).
transcript-auth: kernel rootfs bridge
	@$(PYTHON) tests/transcript.py --key --loss 0.05 --out docs/kgdboe-auth-session.txt

clean:
	rm -rf build/obj build/obj-base build/obj-debug build/obj-mutant build/obj-module build/obj-bisect \
		build/bisect build/results build/transcript build/mutant build/soak \
		build/test-results build/rootfs build/rootfs.cpio build/kgdboe-bridge build/netsysrq

# Removes build/ entirely, including build/linux: refuses when it holds
# commits that `make export` has not written back.
distclean:
	@if [ -d build/linux/.git ] && [ "$(FORCE)" != 1 ] && \
	  [ "$$(git -C build/linux rev-parse HEAD)" != "$$(cat build/linux/.git/npng-applied 2>/dev/null)" ]; then \
		echo "distclean: build/linux has unexported commits; make export, or FORCE=1" >&2; exit 1; fi
	rm -rf build
