# SPDX-License-Identifier: MIT
# sluice: egress-brokering network and credential proxy.
#
#   make            build bin/sluiced, bin/sluice, bin/sluice-probe,
#                   bin/sluice-cni and bin/sluice-oci-hook; nothing else
#   make deps       install the missing Debian packages (root); the targets
#                   below that run something call it first
#   make check      unit tests, integration tests (test world) and a short fuzz run
#   make demo       the main job on a self-contained test world
#   make asan       build and run the tests under ASan + UBSan
#   make tsan       build with ThreadSanitizer, run the threaded parts
#   make fuzz       run every fuzz target longer (FUZZ_SECONDS per target)
#   make bench      sluice, squid and the direct path side by side on the test
#                   world, one table (tests/bench/run.sh, about 10 minutes);
#                   BENCH_ALL=1 runs the DNS, lifecycle, exec and interception
#                   benches first (another half hour), whose results the table quotes
#   make tidy       clang-tidy (.clang-tidy) and cppcheck
#   make format-check  list the C files that differ from .clang-format
#                   (clang-format-19) and fail; `make format` rewrites them
#   make install    PREFIX=/usr/local DESTDIR=: binaries, systemd units, the
#                   sample configuration, man pages, bash completion (no apt,
#                   no deps: build and test packages are no runtime need)
#   make uninstall  removes exactly what install put
#   WERROR=1        warnings are errors (.ci/run sets it; a user's compiler,
#                   newer than CI's, may warn where CI's does not)
#
# Anything that needs pkg-config runs in a sub-make, after `deps` has
# installed what is missing.

PREFIX ?= /usr/local
prefix ?= $(PREFIX)
bindir ?= $(prefix)/bin
libexecdir ?= $(prefix)/lib/sluice
mandir ?= $(prefix)/share/man
unitdir ?= $(prefix)/lib/systemd/system
sysusersdir ?= $(prefix)/lib/sysusers.d
bashcompdir ?= $(prefix)/share/bash-completion/completions
# sluiced reads /etc/sluice/sluiced.yaml whatever the prefix: the sample goes beside it.
sysconfdir ?= /etc
DESTDIR ?=

CC ?= cc
FUZZ_CC ?= clang
BUILD ?= build
BIN ?= bin
FUZZ_SECONDS ?= 60
FUZZ_SHORT_SECONDS ?= 8
SAN ?=
WERROR ?= 0

# One version for every program: VERSION, and the commit when built from
# a git checkout ("0.1.0+gabc1234", ".dirty" with uncommitted changes); a
# tarball without .git gets VERSION alone. A packager may set SLUICE_VERSION.
ifeq ($(origin SLUICE_VERSION),undefined)
SLUICE_VERSION := $(shell v=$$(cat VERSION 2>/dev/null || echo unknown); \
	if [ -e .git ] && r=$$(git rev-parse --short HEAD 2>/dev/null); then \
		git diff --quiet HEAD 2>/dev/null || r=$$r.dirty; v=$$v+g$$r; fi; echo $$v)
endif

PKGS := libssl libcrypto yaml-0.1 libcares libmnl libnftables
LLHTTP_DIR ?= /usr/share/llhttp
LLHTTP_INC ?= /usr/share/include/llhttp

ifeq ($(V),1)
Q :=
else
Q := @
endif

WERROR_FLAGS := $(if $(filter 1,$(WERROR)),-Werror)

# The targets that build and then run something (check, demo, asan, tsan,
# bench) compile JOBS files at once (default: one per CPU), unless make was
# given a -j of its own (then its jobserver decides). Expanded in recipes,
# where MAKEFLAGS holds the -j. Anything but a number is refused here, not
# left to make's own parsing of -jfoo.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
ifeq ($(shell echo '$(JOBS)' | grep -Ex '[1-9][0-9]{0,2}'),)
$(error JOBS must be a number from 1 to 999, not `$(JOBS)')
endif
JOBS_FLAG = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))

# Project flags first, the user's CFLAGS/LDFLAGS after.
PROJ_CFLAGS = -std=gnu11 -O2 -g -Wall -Wextra $(WERROR_FLAGS) -Wshadow -Wformat=2 \
	-Wno-missing-field-initializers \
	-D_GNU_SOURCE -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE \
	-I. -I$(LLHTTP_INC) $(shell pkg-config --cflags $(PKGS)) $(SAN)
PROJ_LDFLAGS = -pie -Wl,-z,relro,-z,now $(SAN)
LIBS = $(shell pkg-config --libs $(PKGS)) -lpthread
# Each program links only what it uses (pkg-config names), so that its
# dynamic loader maps and relocates nothing more. libnl is used by none;
# libnftables is loaded by the one `sluice create` that installs the
# table (netns/nft.c), so no program links it.
SLUICED_LIBS = $(shell pkg-config --libs libssl libcrypto yaml-0.1 libcares libmnl) -lpthread
SLUICE_LIBS = $(shell pkg-config --libs yaml-0.1 libmnl)
# sluice-cni: what sluice links, and jansson for the CNI JSON.
CNI_LIBS = $(shell pkg-config --libs yaml-0.1 libmnl jansson)
CNI_OBJ := $(BUILD)/obj/cli/cni_conf.o $(BUILD)/obj/cli/cni_pod.o
# sluice-oci-hook (cli/oci_hook.c): the CLI's libraries and jansson, its
# JSON parser (the OCI state, its configuration); only it and sluice-cni
# need jansson.
OCI_HOOK_LIBS = $(SLUICE_LIBS) $(shell pkg-config --libs jansson)

ALL_CFLAGS = $(PROJ_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(PROJ_LDFLAGS) $(LDFLAGS)

MAINS := broker/main.c cli/main.c probe/main.c
# sluice's files in cli/ go into libsluice.a like the rest; those of
# sluice-cni and sluice-oci-hook beside them do not: they need jansson,
# which no other program links.
CLI_PROGS_SRC := cli/cni.c cli/cni_conf.c cli/cni_pod.c cli/oci_hook.c
LIB_SRC := $(filter-out $(MAINS) $(CLI_PROGS_SRC),$(sort $(wildcard common/*.c policy/*.c dnsfilter/*.c broker/*.c broker/proxy/*.c broker/creds/*.c broker/tls/*.c broker/keys/*.c netns/*.c cli/*.c probe/*.c)))
# The probe links nothing but libc, so that bin/sluice-probe can be static.
PROBE_SRC := $(filter-out probe/main.c,$(sort $(wildcard probe/*.c)))
# ... and the pieces of common/ it uses, the JSON string writer and the
# error type, which need nothing but libc either.
PROBE_OBJ := $(PROBE_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/common/json.o $(BUILD)/obj/common/err.o
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LLHTTP_SRC := $(wildcard $(LLHTTP_DIR)/*.c)
LLHTTP_OBJ := $(patsubst $(LLHTTP_DIR)/%.c,$(BUILD)/llhttp/%.o,$(LLHTTP_SRC))
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/fuzzobj/%.o) $(patsubst $(LLHTTP_DIR)/%.c,$(BUILD)/fuzzobj/llhttp/%.o,$(LLHTTP_SRC))

.PHONY: all deps build check check-unit check-integration check-fuzz demo asan \
	tsan check-tsan fuzz fuzz-build bench tidy format-check format install clean \
	need-libs FORCE
.DEFAULT_GOAL := all

# `make` only builds: it never runs apt-get behind the user's back. What is
# missing is named, with the command that installs it.
all: build

deps:
	$(Q)scripts/deps.sh build

build: $(BIN)/sluiced $(BIN)/sluice $(BIN)/sluice-probe $(BIN)/sluice-cni $(BIN)/sluice-oci-hook

# Without this a missing -dev package shows up as pkg-config noise followed
# by a missing-header error deep in some file. Every object waits for it,
# through $(BUILD)/cflags.
need-libs:
	$(Q)if ! pkg-config --exists $(PKGS) jansson || [ ! -d $(LLHTTP_DIR) ]; then \
		pkg-config --print-errors --exists $(PKGS) jansson 2>&1 | grep -v '^$$' >&2; \
		[ -d $(LLHTTP_DIR) ] || echo "llhttp sources not found in $(LLHTTP_DIR)" >&2; \
		echo "missing build dependencies: run \`make deps\` as root (Debian 12)," \
			"or install them and set PKG_CONFIG_PATH/LLHTTP_DIR" >&2; \
		exit 1; \
	fi

# Objects are rebuilt when the flags change (WERROR=1 after a plain `make`
# must not reuse objects compiled without -Werror).
$(BUILD)/cflags: FORCE | need-libs
	@mkdir -p $(dir $@)
	@echo '$(ALL_CFLAGS)' | cmp -s - $@ || echo '$(ALL_CFLAGS)' >$@

FORCE:

# Only version.o sees the version, so that a new commit recompiles one file.
$(BUILD)/version: FORCE
	@mkdir -p $(dir $@)
	@echo '$(SLUICE_VERSION)' | cmp -s - $@ || echo '$(SLUICE_VERSION)' >$@

$(BUILD)/obj/common/version.o: common/version.c $(BUILD)/version $(BUILD)/cflags
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -DSLUICE_VERSION='"$(SLUICE_VERSION)"' -MMD -MP -c -o $@ $<

$(BUILD)/obj/%.o: %.c $(BUILD)/cflags
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

# llhttp is Debian's node-llhttp, compiled from /usr/share/llhttp as it ships.
$(BUILD)/llhttp/%.o: $(LLHTTP_DIR)/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) -O2 -g -fPIE -fstack-protector-strong -I$(LLHTTP_INC) $(SAN) $(CFLAGS) -c -o $@ $<

$(BUILD)/libsluice.a: $(LIB_OBJ) $(LLHTTP_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BIN)/sluiced: $(BUILD)/obj/broker/main.o $(BUILD)/libsluice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(SLUICED_LIBS)

$(BIN)/sluice: $(BUILD)/obj/cli/main.o $(BUILD)/libsluice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(SLUICE_LIBS)

# The CNI objects come before libsluice.a: their jansson calls must not be
# resolved from it (cli/cni_conf.c says why).
$(BIN)/sluice-cni: $(BUILD)/obj/cli/cni.o $(CNI_OBJ) $(BUILD)/libsluice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CNI_LIBS)
$(BIN)/sluice-oci-hook: $(BUILD)/obj/cli/oci_hook.o $(BUILD)/libsluice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(OCI_HOOK_LIBS)

# Static (static-pie): no shared library, no NSS; it can be copied into
# any container, microVM or jail.
$(BIN)/sluice-probe: $(BUILD)/obj/probe/main.o $(PROBE_OBJ) $(BUILD)/obj/common/version.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(if $(SAN),-pie,-static-pie) -Wl,-z,relro,-z,now $(SAN) $(LDFLAGS) -o $@ $^

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libsluice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) -lcmocka

# test_cni tests cli/cni_conf.c and cni_pod.c, which are not in libsluice.a.
$(BUILD)/tests/test_cni: $(BUILD)/obj/tests/unit/test_cni.o $(CNI_OBJ) $(BUILD)/libsluice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(shell pkg-config --libs jansson) -lcmocka

# --- tests -----------------------------------------------------------------

check: deps
	$(Q)$(MAKE) --no-print-directory format-check
	$(Q)$(MAKE) --no-print-directory $(JOBS_FLAG) build
	$(Q)$(MAKE) --no-print-directory $(JOBS_FLAG) check-unit
	$(Q)$(MAKE) --no-print-directory $(JOBS_FLAG) check-fuzz
	$(Q)$(MAKE) --no-print-directory check-integration

check-unit: $(UNIT_BIN)
	$(Q)scripts/run-unit.sh -j $(JOBS) $(UNIT_BIN)

# Two scripts at a time (each has its own namespaces; those that use
# something of the whole machine run alone: run.sh). TEST_JOBS=1 runs them
# one by one, with their output as it comes.
TEST_JOBS ?= 2
check-integration: build
	$(Q)SLUICE_TEST_JOBS=$(TEST_JOBS) SLUICE_BIN=$(abspath $(BIN)) tests/integration/run.sh

check-fuzz: fuzz-build
	$(Q)scripts/run-fuzz.sh -j $(JOBS) $(FUZZ_SHORT_SECONDS) $(FUZZ_BIN)

demo: deps
	$(Q)$(MAKE) --no-print-directory $(JOBS_FLAG) build
	$(Q)SLUICE_BIN=$(abspath $(BIN)) tests/demo.sh

# One sub-make per step: goals named together on one command line run at
# once under -j (the unit tests beside the integration tests).
ASAN_VARS = BUILD=build/asan BIN=build/asan/bin \
	SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
asan: deps
	$(Q)$(MAKE) --no-print-directory $(JOBS_FLAG) $(ASAN_VARS) build
	$(Q)$(MAKE) --no-print-directory $(JOBS_FLAG) $(ASAN_VARS) check-unit
	$(Q)$(MAKE) --no-print-directory $(ASAN_VARS) check-integration

# ThreadSanitizer on what runs threads: the unit tests that start any (the
# resolver's fake servers, the token fetchers, loops, caches: every test
# naming pthread_create or tokens_start), then reloads under load
# (test_tsan_reload.sh: 50 SIGHUPs while a sandbox sends a few hundred
# requests; it fails on any "WARNING: ThreadSanitizer" in sluiced's stderr).
# A report fails a unit test through TSan's exit code (66).
# TSan stops with "unexpected memory mapping" when the kernel randomises
# mmap more than it can map its shadow around (vm.mmap_rnd_bits 32 with
# GCC 12's libtsan); the tsan sluiced is tried first, and only if it cannot
# start does everything run under `setarch -R` (no ASLR, inherited by every
# process the tests start).
TSAN_UNIT_BIN = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,\
	$(shell grep -l 'pthread_create\|tokens_start' $(UNIT_SRC)))
TSAN_OPTIONS ?= halt_on_error=0 second_deadlock_stack=1 history_size=4

tsan: deps
	$(Q)$(MAKE) --no-print-directory $(JOBS_FLAG) BUILD=build/tsan BIN=build/tsan/bin \
		SAN="-fsanitize=thread -fno-omit-frame-pointer" check-tsan

check-tsan: build $(TSAN_UNIT_BIN)
	$(Q)wrap=; \
	if ! $(BIN)/sluiced --help >/dev/null 2>&1; then \
		echo "tsan: sluiced cannot start as it is; running without ASLR (setarch -R)"; \
		wrap="setarch $$(uname -m) -R"; \
	fi; \
	export TSAN_OPTIONS="$(TSAN_OPTIONS)"; \
	$$wrap scripts/run-unit.sh $(TSAN_UNIT_BIN) && \
	SLUICE_TSAN=1 SLUICE_BIN=$(abspath $(BIN)) $$wrap tests/integration/run.sh test_tsan_reload.sh

# --- fuzzing (libFuzzer, clang) --------------------------------------------

FUZZ_CFLAGS = -std=gnu11 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined -I. -I$(LLHTTP_INC) $(shell pkg-config --cflags $(PKGS))

$(BUILD)/fuzzobj/llhttp/%.o: $(LLHTTP_DIR)/%.c
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -w -c -o $@ $<

$(BUILD)/fuzzobj/%.o: %.c $(BUILD)/cflags
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra $(WERROR_FLAGS) -Wno-missing-field-initializers -MMD -MP -c -o $@ $<

# An archive, so that a target links only the objects it needs.
$(BUILD)/fuzzlib.a: $(FUZZ_LIB_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/%: $(BUILD)/fuzzobj/tests/fuzz/%.o $(BUILD)/fuzzlib.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LIBS)

fuzz-build: deps
	$(Q)$(MAKE) --no-print-directory $(FUZZ_BIN)

fuzz: fuzz-build
	$(Q)scripts/run-fuzz.sh -j $(JOBS) $(FUZZ_SECONDS) $(FUZZ_BIN)

# --- benchmarks, lint, install ----------------------------------------------

# A CPU-only bench of the reflection guard (broker/reflect.c).
$(BUILD)/bench/reflect: tests/bench/reflect.c $(BUILD)/libsluice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

bench:
	$(Q)scripts/deps.sh bench
	$(Q)$(MAKE) --no-print-directory $(BUILD)/bench/reflect
	$(Q)$(BUILD)/bench/reflect
	$(Q)$(MAKE) --no-print-directory $(JOBS_FLAG) build
	$(Q)if [ -n "$(BENCH_ALL)" ]; then \
		for b in dns lifecycle exec intercept; do \
			SLUICE_BIN=$(abspath $(BIN)) bash tests/bench/$$b.sh || exit 1; \
		done; \
	fi
	$(Q)SLUICE_BIN=$(abspath $(BIN)) bash tests/bench/run.sh

# clang-tidy with the checks in .clang-tidy (any finding fails), then
# cppcheck. TIDY_SRC= checks some files only: clang-tidy's analyzer takes
# about 10 s of CPU per file; `make -j2 -k tidy` runs two at a time and
# lists every file's findings.
# One clang-tidy per file: clang-tidy 14 given several files reports
# valist.Uninitialized on every vsnprintf after the first file's.
TIDY_SRC ?= $(LIB_SRC) $(MAINS)
TIDY_RUNS := $(addprefix tidy/,$(TIDY_SRC))
.PHONY: $(TIDY_RUNS)
tidy: $(TIDY_RUNS)
	$(Q)cppcheck --quiet --error-exitcode=1 --enable=warning,portability \
		--inline-suppr -I. $(TIDY_SRC)

$(TIDY_RUNS): tidy/%:
	@$(if $(Q),echo "  TIDY    $*")
	$(Q)clang-tidy --quiet $* -- $(PROJ_CFLAGS)

# Every C file of the project; llhttp's are Debian's and not ours to format.
FORMAT_SRC ?= $(sort $(wildcard cli/*.[ch] common/*.[ch] policy/*.[ch] dnsfilter/*.[ch] broker/*.[ch] \
	broker/*/*.[ch] netns/*.[ch] probe/*.[ch] tests/unit/*.[ch] tests/fuzz/*.[ch] \
	tests/bench/*.[ch] tests/world/*.[ch]))
# One version, because another formats some lines differently: 19 is
# Debian 12's newest in main (deps installs it); 14, Debian's default, segfaults
# on this tree with AlignArrayOfStructures (.clang-format says why not 16).
CLANG_FORMAT ?= clang-format-19

# Lists the files that differ from .clang-format and fails; changes nothing.
# `check` runs it first: the whole tree was reformatted in one commit
# (`make format`), so a file that differs is a change not formatted.
format-check:
	$(Q)scripts/format-check.sh $(CLANG_FORMAT) $(FORMAT_SRC)

format:
	$(Q)command -v $(CLANG_FORMAT) >/dev/null || \
		{ echo "format: $(CLANG_FORMAT) is not installed: run \`make deps\` as root" >&2; exit 2; }
	$(Q)$(CLANG_FORMAT) --style=file -i $(FORMAT_SRC)

# What `make install` puts where; `make uninstall` removes these and no more.
MANPAGES := docs/man/sluice.1 docs/man/sluiced.8 docs/man/sluice-policy.5
UNITS := sluice-netns.service sluiced.service
INSTALLED = $(addprefix $(bindir)/,sluiced sluice sluice-probe sluice-cni sluice-oci-hook) \
	$(libexecdir)/sluice-uplink \
	$(addprefix $(unitdir)/,$(UNITS)) $(sysconfdir)/sluice/sluiced.yaml.sample \
	$(sysusersdir)/sluice.conf \
	$(foreach m,$(MANPAGES),$(mandir)/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
	$(bashcompdir)/sluice
SUBST = sed -e 's|@bindir@|$(bindir)|g' -e 's|@libexecdir@|$(libexecdir)|g' \
	-e 's|@sysconfdir@|$(sysconfdir)|g'

.PHONY: install-files uninstall

install: build
	$(Q)$(MAKE) --no-print-directory install-files

# install without building: what $(BIN) holds (a test installs the
# binaries it was given).
install-files:
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(libexecdir) $(DESTDIR)$(unitdir) \
		$(DESTDIR)$(sysconfdir)/sluice $(DESTDIR)$(bashcompdir) $(DESTDIR)$(sysusersdir) \
		$(addprefix $(DESTDIR)$(mandir)/man,1 5 8)
	install -m 0755 $(BIN)/sluiced $(BIN)/sluice $(BIN)/sluice-probe $(BIN)/sluice-cni \
		$(BIN)/sluice-oci-hook $(DESTDIR)$(bindir)/
	install -m 0755 deploy/sluice-uplink $(DESTDIR)$(libexecdir)/sluice-uplink
	$(foreach u,$(UNITS),$(SUBST) deploy/systemd/$(u).in >$(DESTDIR)$(unitdir)/$(u) && \
		chmod 0644 $(DESTDIR)$(unitdir)/$(u) &&) true
	install -m 0644 deploy/sluiced.yaml.sample $(DESTDIR)$(sysconfdir)/sluice/sluiced.yaml.sample
	$(foreach m,$(MANPAGES),install -m 0644 $(m) \
		$(DESTDIR)$(mandir)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)) &&) true
	install -m 0644 deploy/bash-completion/sluice $(DESTDIR)$(bashcompdir)/sluice
	install -m 0644 deploy/systemd/sluice.sysusers $(DESTDIR)$(sysusersdir)/sluice.conf
	@# The broker's user (sluiced.yaml `user`), on this machine only.
	if [ -z "$(DESTDIR)" ] && command -v systemd-sysusers >/dev/null; then \
		systemd-sysusers $(sysusersdir)/sluice.conf; fi

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	@# Only when empty: a sluiced.yaml of the user's own stays, and so does its folder.
	rmdir $(DESTDIR)$(libexecdir) 2>/dev/null || true
	rmdir $(DESTDIR)$(sysconfdir)/sluice 2>/dev/null || true

clean:
	rm -rf build bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
