# ringside build. Everything generated goes under $(BUILD); the source tree is
# never written to (except by `make format`).
#
#   make            build/ringside and one static library per component and
#                   per agent folder
#   make test       build and run every test; exits non-zero on any failure
#   make test-long  the same, with the slowest scenarios at their full size
#   make check-layers  the include layers of tools/layers.txt (part of test)
#   make check-links  the same layers between the libraries, symbol by symbol
#                   (part of test)
#   make check-docs  the docs' links, subcommands, thread and mutex counts
#                   against the tree and the code (part of test)
#   make check-sizes  no production function over 80 lines, no class over 400,
#                   no file over 550 (tools/sizes.txt; part of test)
#   make flake-check  the real-kernel tests 10 times beside a load
#   make asan       the same tests under AddressSanitizer + UBSan, in build/asan
#   make deps       install the Debian packages the build needs (idempotent)
#   make install    the binary, the systemd unit, the default config (kept
#                   if present) and /var/lib/ringside, under $(DESTDIR)$(PREFIX)
#   make uninstall  removes what install put there, and nothing else
#   make test-kernels  ringside inside Debian's 5.10 to 6.12 kernels in QEMU
#   make ARCH=arm64 [deps | test-kernels | install]  the same for arm64,
#                   cross-built on x86-64 and run in arm64 kernels
#   make bench | bench-peers | soak | fuzz | demo | clean | format

# The architecture built for: this machine's, or arm64 on an x86-64 machine
# (`make ARCH=arm64`, docs/development.md). A cross build goes into
# build/arm64, with Debian's aarch64-linux-gnu toolchain and a sysroot of
# Debian's arm64 -dev packages that `make deps ARCH=arm64` unpacks into
# CROSS_DIR (tools/cross_sysroot.sh), beside the BTF of an arm64 kernel for
# the BPF programs' vmlinux.h. What runs what it builds (test, bench, demo)
# refuses a cross build: `make test-kernels ARCH=arm64` runs it in arm64
# kernels under QEMU. Only an ARCH on make's command line counts: kernel
# developers often have one in their environment.
HOST_ARCH := $(shell uname -m | sed 's/x86_64/x86/; s/aarch64/arm64/')
ifneq ($(origin ARCH),command line)
  override ARCH := $(HOST_ARCH)
endif
override ARCH := $(or $(patsubst x86_64,x86,$(patsubst amd64,x86,$(patsubst aarch64,arm64,$(ARCH)))),$(HOST_ARCH))
CROSS :=
ifneq ($(ARCH),$(HOST_ARCH))
  ifneq ($(HOST_ARCH)/$(ARCH),x86/arm64)
    $(error ARCH=$(ARCH): this Makefile cross-builds for arm64 on x86-64 only)
  endif
  CROSS := aarch64-linux-gnu-
  CROSS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ringside/cross/$(ARCH)
  SYSROOT := $(CROSS_DIR)/sysroot
  BUILD ?= build/$(ARCH)
  CXX := $(CROSS)g++ --sysroot=$(SYSROOT)
  AR := $(CROSS)ar
  PKG_CONFIG := env -u PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR=$(SYSROOT) \
    PKG_CONFIG_LIBDIR=$(SYSROOT)/usr/lib/aarch64-linux-gnu/pkgconfig:$(SYSROOT)/usr/share/pkgconfig \
    pkg-config
  VMLINUX_BTF := $(CROSS_DIR)/vmlinux.btf
endif
# What runs what it builds refuses a cross build, before it builds anything.
HOST_ONLY_GOALS := test test-long flake-check asan bench bench-peers soak storm fuzz demo
ifneq ($(CROSS),)
  ifneq ($(filter $(HOST_ONLY_GOALS),$(MAKECMDGOALS)),)
    $(error make $(firstword $(filter $(HOST_ONLY_GOALS),$(MAKECMDGOALS))) runs what it builds, \
      which an $(ARCH) build cannot on this $(HOST_ARCH) machine: make test-kernels ARCH=$(ARCH) \
      runs it in $(ARCH) kernels)
  endif
endif

BUILD ?= build
PREFIX ?= /usr/local
DESTDIR ?=
# Set by `make asan`; a comma-separated -fsanitize= list.
SANITIZE ?=

CXX ?= g++
AR ?= ar
PROTOC ?= protoc
PKG_CONFIG ?= pkg-config

.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SUFFIXES:

# --- Dependencies -------------------------------------------------------------

# Debian packages (bookworm) that building, testing and running ringside need.
DEB_PACKAGES := \
  g++ make clang llvm clang-format pkg-config \
  libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev libssl-dev libmicrohttpd-dev \
  libprotobuf-dev protobuf-compiler \
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev \
  nlohmann-json3-dev libsystemd-dev libclang-rt-14-dev \
  rt-tests systemd linux-perf time ccache gdb python3 universal-ctags \
  qemu-system-x86 busybox-static cpio jq rclone curl python3-dask python3-distributed

# A cross build's: the toolchain and QEMU on this machine, and the target's
# -dev packages (with busybox for the kernel matrix's initramfs) in the
# sysroot, as tools/cross_sysroot.sh resolves them, with the BTF of the
# first kernel of its kernel matrix (tests/kernels/kernels-arm64.txt).
ifneq ($(CROSS),)
  DEB_PACKAGES += g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-system-arm
endif
SYSROOT_PACKAGES := libprotobuf-dev libabsl-dev libbpf-dev libelf-dev zlib1g-dev libzstd-dev \
  libssl-dev libmicrohttpd-dev libsystemd-dev nlohmann-json3-dev libgtest-dev libgmock-dev \
  libbenchmark-dev busybox-static
CROSS_BTF_KERNEL = $(shell awk '!/^[[:space:]]*(\#|$$)/ { print $$3 "=" $$4; exit }' \
  tests/kernels/kernels-$(ARCH).txt)

# tests/deploy/ checks the Kubernetes manifests against the API's schemas
# (kubernetes-models: every kind's OpenAPI schema compiled to a validator,
# and its TypeScript types, which catch misspelt field names). npm installs
# them into TOOLS_DIR, which stays under build/ whatever BUILD is, so that
# `make asan` (BUILD=build/asan) finds them too. `make deps NPM_TOOLS=`
# installs the build's packages only (deploy/container/Dockerfile).
TOOLS_DIR ?= build/tools
NPM_TOOLS ?= kubernetes-models@5.1.0 yaml@2.9.1 typescript@5.9.3
# The metrics tests run Prometheus' own programs (promtool, node_exporter)
# from Debian's packages, unpacked into TOOLS_DIR/debs rather than
# installed: installing them would start their services on the machine.
DEB_TOOLS ?= prometheus prometheus-node-exporter

PKGS := protobuf nlohmann_json libbpf libsystemd \
  absl_status absl_statusor absl_strings absl_str_format \
  absl_time absl_synchronization absl_flat_hash_map zlib libzstd libcrypto libmicrohttpd libelf

# Evaluated lazily so that `make deps` works before pkg-config exists.
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS))
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS))
TEST_LIBS = $(shell $(PKG_CONFIG) --libs gmock gtest)

# --- Flags --------------------------------------------------------------------

# Every compile goes through ccache when it is installed (`make deps` installs
# it; CCACHE= turns it off). Its cache is the user's (~/.cache/ccache), and
# keyed on paths relative to the source tree with the working directory left
# out (debug info names it), so that a clone in another folder, such as CI's
# fresh clone, finds the objects an earlier build of the same sources made.
# The only absolute paths a compile sees are in tests/testing/paths.cc.
ifeq ($(origin CCACHE),undefined)
  CCACHE := $(shell command -v ccache 2>/dev/null)
endif
export CCACHE_BASEDIR := $(abspath .)
export CCACHE_NOHASHDIR := 1
# Debug info names the sources relative to the tree, so that an object the
# cache serves to another clone points at that clone's files.
DEBUG_PREFIX_MAP := -fdebug-prefix-map=$(CURDIR)=.

WARNINGS := -Wall -Wextra -Werror
CPPFLAGS += -I. -isystem $(BUILD)/gen -MMD -MP
# Sanitized builds (`make asan`) compile at -O1 with line tables only (-g1):
# the sanitizers' reports keep file:line, and the build takes half the time
# (agent_service.cc: 28 s at -O2 -g, 13 s), which CI's time limit needs.
ifeq ($(SANITIZE),)
  CXXFLAGS ?= -O2 -g
else
  CXXFLAGS ?= -O1 -g1
endif
CXXFLAGS += -std=c++20 $(WARNINGS) $(DEBUG_PREFIX_MAP)
LDFLAGS ?=
ifneq ($(SANITIZE),)
  SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
  CXXFLAGS += $(SAN_FLAGS)
  LDFLAGS += $(SAN_FLAGS)
endif

# --- Sources ------------------------------------------------------------------

PROTO_SRCS := $(shell find protos -name '*.proto' | sort)
PROTO_CCS := $(PROTO_SRCS:protos/%.proto=$(BUILD)/gen/%.pb.cc)
PROTO_HDRS := $(PROTO_SRCS:protos/%.proto=$(BUILD)/gen/%.pb.h)
PROTO_OBJS := $(PROTO_CCS:%.cc=%.o)
# Generated sources are kept (not deleted as intermediates) so that rebuilds
# after an edit do not regenerate them.
.SECONDARY: $(PROTO_CCS) $(PROTO_HDRS)

# BPF needs this machine's BTF to build (vmlinux.h). Without it, bpf/ is
# built with event_source_unavailable.cc instead of the programs and what
# includes their skeletons (event_source.cc, loaded_groups.cc,
# process_memory.cc): loading
# them reports that this build has no BPF, and `ringside record` falls back
# to ftrace. Everything else builds and runs as usual.
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
HAVE_BTF := $(if $(wildcard $(VMLINUX_BTF)),yes,)
ifneq ($(CROSS),)
  ifeq ($(HAVE_BTF)$(filter deps clean test-kernels,$(MAKECMDGOALS)),)
    $(error ARCH=$(ARCH): no sysroot and kernel BTF in $(CROSS_DIR) yet: make deps ARCH=$(ARCH))
  endif
endif
ifeq ($(HAVE_BTF),)
  NO_BPF_SRCS := bpf/event_source.cc bpf/loaded_groups.cc bpf/process_memory.cc
  $(warning bpf/: this kernel has no BTF ($(VMLINUX_BTF) is missing): the CO-RE BPF programs cannot be built here (needs CONFIG_DEBUG_INFO_BTF=y). Building without them; ringside record will use ftrace only.)
else
  NO_BPF_SRCS := bpf/event_source_unavailable.cc
endif

# The sources of a component: its top level and its subfolders (buffer/internal/),
# minus the binary's main.cc.
component_srcs = $(filter-out agent/cli/main.cc $(NO_BPF_SRCS),$(wildcard $(1)/*.cc $(1)/*/*.cc))
component_objs = $(patsubst %.cc,$(BUILD)/obj/%.o,$(call component_srcs,$(1)))
component_lib = $(BUILD)/lib/libringside_$(subst /,_,$(1)).a

# agent/ is one library per folder (agent/cli, agent/daemon, ...), on the
# levels tools/layers.txt gives them: a folder may use folders of later
# levels only. The link lists them in that order, so a library that calls up
# a level fails to link, and `make check-links` names each call that crosses
# a layer (tools/check_links.py reads the same table).
AGENT_FOLDERS := $(shell awk '/^level [0-9]+:/ { sub(/\#.*/, ""); sub(/:/, ""); \
  for (i = 3; i <= NF; i++) print $$2, $$i }' tools/layers.txt | sort -n -s | cut -d' ' -f2)
AGENT_LIBS := $(AGENT_FOLDERS:%=agent/%)
ifneq ($(wildcard agent/*.cc),)
  $(error agent/ has sources outside any folder ($(wildcard agent/*.cc)): put them in a folder of tools/layers.txt's levels)
endif
ifneq ($(filter-out $(AGENT_FOLDERS),$(patsubst agent/%/,%,$(wildcard agent/*/))),)
  $(error agent/$(firstword $(filter-out $(AGENT_FOLDERS),$(patsubst agent/%/,%,$(wildcard agent/*/)))) is on no level of tools/layers.txt: add it there)
endif

# Every library but protos' (generated) and their link order: dependents
# before their dependencies; agent/'s folders by level; base/ last, as every
# other library may use it.
SOURCE_LIBS := $(AGENT_LIBS) buffer ftrace bpf base
LIBS := $(foreach c,$(SOURCE_LIBS),$(call component_lib,$(c))) $(BUILD)/lib/libringside_protos.a
LINK_LIBS := $(foreach c,$(filter-out base,$(SOURCE_LIBS)),$(call component_lib,$(c))) \
  $(BUILD)/lib/libringside_protos.a $(call component_lib,base)

BIN := $(BUILD)/ringside

# BPF: vmlinux.h from this machine's BTF, programs compiled with clang, and
# libbpf skeletons that bpf/*_source.cc include.
BPF_PROGS := $(wildcard bpf/*.bpf.c)
BPF_SKELS := $(BPF_PROGS:bpf/%.bpf.c=$(BUILD)/bpf/%.skel.h)
.SECONDARY: $(BPF_PROGS:bpf/%.bpf.c=$(BUILD)/bpf/%.bpf.o)
BPF_CLANG ?= clang
BPF_ARCH := $(ARCH)

# One test binary per top-level folder, with the tests of its subfolders.
TEST_DIRS := $(sort $(foreach t,$(wildcard tests/*/*_test.cc tests/*/*/*_test.cc),\
  $(word 2,$(subst /, ,$(t)))))
TEST_BINS := $(TEST_DIRS:%=$(BUILD)/tests/%_test)
# A folder's tests, its own helpers, and the helpers every test binary shares.
# The whole-binary tests (tests/e2e/, and tests/deploy/'s start of the
# DaemonSet) drive the agent with tests/agent/testing's helpers too.
test_objs = $(patsubst %.cc,$(BUILD)/obj/%.o,$(wildcard tests/$(1)/*_test.cc \
  tests/$(1)/*/*_test.cc tests/$(1)/testing/*.cc tests/testing/*.cc \
  $(if $(filter e2e deploy,$(1)),tests/agent/testing/*.cc)))

BENCH_SRCS := $(wildcard tests/bench/*_benchmark.cc)
ifeq ($(HAVE_BTF),)
  BENCH_SRCS := $(filter-out tests/bench/bpf_benchmark.cc,$(BENCH_SRCS))
endif
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.cc=$(BUILD)/bench/%)

ALL_OBJS := $(foreach c,$(SOURCE_LIBS),$(call component_objs,$(c))) \
  $(BUILD)/obj/agent/cli/main.o $(PROTO_OBJS) $(foreach d,$(TEST_DIRS),$(call test_objs,$(d))) \
  $(BENCH_SRCS:%.cc=$(BUILD)/obj/%.o) $(BUILD)/obj/tests/tools/storm.o

# --- Rules --------------------------------------------------------------------

.PHONY: all test run-tests check-layers check-links check-docs check-sizes check-tools check-fleet-query test-long flake-check test-kernels run-test-kernels asan run-asan-tests bench bench-run bench-peers soak storm fuzz fuzz-run fuzz-corpus demo run-demo deps install \
  uninstall clean format

all: $(BIN) $(LIBS)

$(BUILD)/gen/%.pb.cc $(BUILD)/gen/%.pb.h: protos/%.proto $(PROTO_SRCS)
	@mkdir -p $(BUILD)/gen
	$(PROTOC) -Iprotos --cpp_out=$(BUILD)/gen $<

# Generated code is compiled without -Werror: its warnings are protoc's to fix.
$(BUILD)/gen/%.pb.o: $(BUILD)/gen/%.pb.cc
	$(CCACHE) $(CXX) $(CPPFLAGS) $(filter-out -Werror,$(CXXFLAGS)) $(PKG_CFLAGS) -c $< -o $@

# Every object may include any generated header, so they all exist first,
# and a changed .proto rebuilds them all: -MMD leaves headers found through
# -isystem (build/gen) out of the .d files, so those cannot say which
# objects use which messages. Mixing objects built against two versions of
# a message links and reads garbage.
$(BUILD)/obj/%.o: %.cc $(PROTO_HDRS)
	@mkdir -p $(@D)
	$(CCACHE) $(CXX) $(CPPFLAGS) $(CXXFLAGS) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/bpf/vmlinux.h:
	@mkdir -p $(@D)
	@if [ ! -r $(VMLINUX_BTF) ]; then \
	  echo "bpf/: this kernel has no BTF ($(VMLINUX_BTF) is missing): the CO-RE BPF" \
	    "programs cannot be built here (needs CONFIG_DEBUG_INFO_BTF=y)." >&2; exit 1; fi
	bpftool btf dump file $(VMLINUX_BTF) format c > $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(BUILD)/bpf/vmlinux.h $(wildcard bpf/*_events.h bpf/*.bpf.h) \
  bpf/task_state.h
	$(BPF_CLANG) -g -O2 $(DEBUG_PREFIX_MAP) -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -I$(BUILD)/bpf -I. -c $< -o $@

# The groups' files as one object (it #includes them).
$(BUILD)/bpf/all.bpf.o: bpf/sched.bpf.c bpf/process.bpf.c bpf/incidents.bpf.c

$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	bpftool gen skeleton $< name rs_$* > $@

# Benchmark-only BPF programs (tests/bench/*.bpf.c).
BENCH_BPF_SKELS := $(patsubst tests/bench/%.bpf.c,$(BUILD)/bench/bpf/%.skel.h,$(wildcard tests/bench/*.bpf.c))
$(BUILD)/bench/bpf/%.bpf.o: tests/bench/%.bpf.c $(BUILD)/bpf/vmlinux.h $(wildcard bpf/*_events.h bpf/*.bpf.h)
	@mkdir -p $(@D)
	$(BPF_CLANG) -g -O2 $(DEBUG_PREFIX_MAP) -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -I$(BUILD)/bpf -I. -c $< -o $@

$(BUILD)/bench/bpf/%.skel.h: $(BUILD)/bench/bpf/%.bpf.o
	bpftool gen skeleton $< name rs_$* > $@
$(BENCH_SRCS:%.cc=$(BUILD)/obj/%.o): CPPFLAGS += -I$(BUILD)/bench/bpf -I$(BUILD)/bpf
$(BENCH_SRCS:%.cc=$(BUILD)/obj/%.o): | $(BENCH_BPF_SKELS)

# The C++ side of bpf/ includes the skeletons.
$(call component_objs,bpf): CPPFLAGS += -I$(BUILD)/bpf
ifneq ($(HAVE_BTF),)
$(call component_objs,bpf): | $(BPF_SKELS)
endif

# Tests that run the CLI find it here, and tools beside the source tree
# (../shared/bin) from there: tests/testing/paths.cc alone is compiled with
# these absolute paths, so that a compiler cache serves every other object to
# a clone in another folder.
$(BUILD)/obj/tests/testing/paths.o: CPPFLAGS += -DRINGSIDE_BUILD_DIR='"$(abspath $(BUILD))"' \
  -DRINGSIDE_SOURCE_DIR='"$(abspath .)"' -DRINGSIDE_TOOLS_DIR='"$(abspath $(TOOLS_DIR))"'

$(BUILD)/lib/libringside_protos.a: $(PROTO_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

define component_rules
$(call component_lib,$(1)): $(call component_objs,$(1))
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^
endef
$(foreach c,$(SOURCE_LIBS),$(eval $(call component_rules,$(c))))

$(BIN): $(BUILD)/obj/agent/cli/main.o $(LINK_LIBS)
	$(CXX) $(LDFLAGS) $^ $(PKG_LIBS) -o $@

# The storm generator (tests/tools/storm.cc): load for the accounting tests
# (e2e_test runs it) and `make storm`.
STORM := $(BUILD)/storm
$(STORM): $(BUILD)/obj/tests/tools/storm.o
	$(CXX) $(LDFLAGS) $^ -o $@

define test_rules
$(BUILD)/tests/$(1)_test: $(call test_objs,$(1)) $(LINK_LIBS)
	@mkdir -p $$(@D)
	$$(CXX) $$(LDFLAGS) $$^ $$(TEST_LIBS) $$(PKG_LIBS) -o $$@
endef
$(foreach d,$(TEST_DIRS),$(eval $(call test_rules,$(d))))
# The stacks test's workload (tests/tools/stack_workload.c): C with frame
# pointers and its symbols, as a program profiled by frame pointers is built.
STACK_WORKLOAD := $(BUILD)/stack_workload
$(STACK_WORKLOAD): tests/tools/stack_workload.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -Wall -Wextra -Werror \
	  -pthread $< -o $@

# The same stripped of its symbol tables (.symtab, debug info; strip keeps
# .dynsym, which holds none of its functions, and the build id note): the
# stacks test's binary that nothing can name while it runs.
STACK_WORKLOAD_STRIPPED := $(BUILD)/stack_workload_stripped
$(STACK_WORKLOAD_STRIPPED): $(STACK_WORKLOAD)
	strip --strip-all -o $@ $<

$(BUILD)/tests/e2e_test: | $(STORM) $(STACK_WORKLOAD) $(STACK_WORKLOAD_STRIPPED)

# `make test` is one of the two commands a newcomer runs on a fresh machine, so
# it installs missing packages first (a quick no-op when they are present).
test: deps
	@$(MAKE) --no-print-directory run-tests

# The benchmarks are built too, not run: a change that breaks one (a test
# helper they link, say) shows here, not at the next `make bench`.
run-tests: check-layers check-links check-docs check-sizes check-tools check-fleet-query $(BIN) \
  $(TEST_BINS) \
  $(BENCH_BINS)
	@tools/run_tests.sh $(TEST_BINS)

# The build's own tools that no check above runs: tools/image_btf.py (a cross
# build's kernel BTF), on made-up images; bench-peers' verdicts
# (tests/bench/peers_verdicts.sh), on made-up figures. Under a second.
check-tools:
	@out=$$(python3 tests/tools/image_btf_test.py 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "image_btf_test: $$(echo "$$out" | grep '^Ran ')"
	@out=$$(python3 tests/tools/peers_verdicts_test.py 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "peers_verdicts_test: $$(echo "$$out" | grep '^Ran ')"

# tools/fleet_query.py (one query over a fleet's files) on 50 files that 10
# agents record here under 10 machine names. Needs root, the binary,
# trace_processor_shell and Debian's Dask, which /usr/bin/python3 sees (a
# python3 first on PATH may be another). 15-30 s.
check-fleet-query: $(BIN)
	@out=$$(RINGSIDE=$(BIN) /usr/bin/python3 tests/tools/fleet_query_test.py 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "fleet_query_test: $$(echo "$$out" | grep '^Ran '), $$(echo "$$out" | tail -1)"

# The include layers of tools/layers.txt (issue 53): a production file that
# includes across a layer it may not, or closes an include cycle, fails the
# build's tests here, first of all; so does a listed exception
# that no longer occurs, and an "Inside agent/" list in the architecture
# page that is not the table's. Then the checker's own tests. Under a second.
check-layers:
	@python3 tools/check_layers.py --table tools/layers.txt --doc docs/design/architecture.md \
	  --folder-table docs/development.md
	@out=$$(python3 tests/tools/check_layers_test.py 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "check_layers_test: $$(echo "$$out" | grep '^Ran ')"

# The same layers at link time: every symbol a library uses from another
# must come from one the table lets it use (tools/check_links.py, with nm).
# It sees what no include shows: a function declared in a lower layer and
# defined above it. Then the checker's own tests. A few seconds.
check-links: $(BUILD)/obj/agent/cli/main.o $(LIBS)
	@python3 tools/check_links.py --table tools/layers.txt \
	  $(foreach c,$(SOURCE_LIBS),--lib $(c)=$(call component_lib,$(c))) \
	  --lib protos=$(BUILD)/lib/libringside_protos.a --lib agent/cli=$(BUILD)/obj/agent/cli/main.o
	@out=$$(python3 tests/tools/check_links_test.py 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "check_links_test: $$(echo "$$out" | grep '^Ran ')"

# The lengths of production functions, classes and files (issue 53): a
# function over tools/sizes.txt's limit (80 lines), a class whose member
# functions add up to more than its limit (400) or a .cc or .h file over its
# limit (550) fails, unless that file allows it; so does an allowance that is
# no longer needed. Measured with Universal Ctags and by counting lines. Then
# the checker's own tests. A few seconds.
check-sizes:
	@python3 tools/check_sizes.py
	@out=$$(python3 tests/tools/check_sizes_test.py 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "check_sizes_test: $$(echo "$$out" | grep '^Ran ')"

# The facts the docs repeat from the tree and the code (issue 53): every
# relative link of a *.md resolves inside the repository; the subcommand lists
# (--help, architecture.md, development.md) are main.cc's kCommands; the
# threads and mutexes of docs/design/threading.md are those the production
# code declares, counted right, and no other page repeats the counts. Then
# the checker's own tests. About a second.
check-docs:
	@python3 tools/check_docs.py
	@out=$$(python3 tests/tools/check_docs_test.py 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "check_docs_test: $$(echo "$$out" | grep '^Ran ')"

# `make test` with the slowest end-to-end scenarios at their full size (the
# kill loops' 20 kills, the durable buffer's 2 MiB ring and 5,000 processes);
# tests/testing/test_size.h.
test-long: deps
	@RINGSIDE_LONG_TESTS=1 $(MAKE) --no-print-directory run-tests

# The kernel matrix (issue 32): ringside's smoke inside each kernel of
# tests/kernels/kernels.txt, booted in QEMU (a recording, the agent's
# snapshots on request, after a crash and after an OOM kill, blocked stacks);
# a table, and a failure when a kernel does other than that file expects. The
# first run downloads the pinned kernels (about 300 MB) into
# ~/.cache/ringside/kernels, which every clone shares. KERNELS="6.1 6.12" runs
# some of them. Needs root. CI runs it after `make test`; about 3.5 minutes
# under TCG on a 2-core machine (40-60 s per kernel).
#
# ARCH=arm64: the arm64 matrix (tests/kernels/kernels-arm64.txt) around the
# cross-built ringside, in qemu-system-aarch64 under TCG; the files it
# brings out are judged by this machine's own build (HOST_BUILD).
# KT_TESTS="base buffer ftrace bpf": instead, those test binaries, built for
# ARCH, run inside each kernel (docs/development.md#other-architectures).
test-kernels: deps
	@$(MAKE) --no-print-directory run-test-kernels

HOST_BUILD ?= build
run-test-kernels: $(BIN) $(foreach t,$(KT_TESTS),$(BUILD)/tests/$(t)_test)
	@$(if $(CROSS),$(MAKE) --no-print-directory ARCH=$(HOST_ARCH) BUILD=$(HOST_BUILD) $(HOST_BUILD)/ringside)
	@BUILD=$(BUILD) KT_ARCH=$(ARCH) KT_TESTS="$(KT_TESTS)" $(if $(CROSS),KT_SYSROOT=$(SYSROOT) \
	  KT_HOST_RINGSIDE=$(HOST_BUILD)/ringside) bash tests/kernels/run.sh $(KERNELS)

# The test binaries that hold real-kernel tests (BPF, tracefs, the CLI and
# the agent end to end), for `make flake-check`.
KERNEL_TEST_BINS := $(filter %/agent_test %/bpf_test %/e2e_test %/ftrace_test,$(TEST_BINS))

# Every real-kernel test FLAKE_RUNS times (10) in a row beside a load that
# keeps both CPUs busy (hackbench), and a table of each test that ever
# failed. FLAKE_FILTER= takes a GoogleTest filter. Not part of `make test`.
flake-check: deps
	@$(MAKE) --no-print-directory $(BIN) $(KERNEL_TEST_BINS)
	@bash tools/flake_check.sh $(KERNEL_TEST_BINS)

# Every test binary but tests/deploy/'s (it checks the repository's
# manifests, unit and install rules, and runs no ringside code of its own)
# and tests/docs/' (the documentation's shell examples: what a reader types,
# not untrusted bytes or racing threads, which the other tests cover).
ASAN_TEST_BINS = $(filter-out %/deploy_test %/docs_test,$(TEST_BINS))
asan: deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan SANITIZE=address,undefined run-asan-tests

run-asan-tests: $(BIN) $(ASAN_TEST_BINS)
	@tools/run_tests.sh $(ASAN_TEST_BINS)

$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(BUILD)/obj/tests/testing/workloads.o \
  $(BUILD)/obj/tests/testing/paths.o $(BUILD)/obj/tests/testing/chunk_builder.o $(LINK_LIBS)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ $(shell $(PKG_CONFIG) --libs benchmark) $(PKG_LIBS) -o $@

# Benchmarks run on an optimised build; each prints its ratios to the memcpy
# baselines measured in the same run.
bench: deps
	@$(MAKE) --no-print-directory bench-run

bench-run: $(BENCH_BINS) $(BIN)
	@for b in $(BENCH_BINS); do $$b || exit 1; done

# ringside record beside perf record and a raw ftrace reader, on the same
# workload and events: time, CPU, RSS, bytes and events kept, as ratios to
# the no-tracer runs of the same run (REPS= repetitions, 5). Needs root.
# Not part of `make test`.
bench-peers: $(BIN)
	RINGSIDE=$(BIN) bash tests/bench/peers.sh

# The agent's 10-minute soak under a sched storm: RSS and CPU over time
# (DURATION=seconds to shorten it). Not part of `make test`.
soak: $(BIN)
	RINGSIDE=$(BIN) bash tests/bench/agent_soak.sh

# The load figures: ringside record beside build/storm for STORM_SECONDS (30),
# exact accounting against the kernel's counters, ringside's CPU and RSS.
# Not part of `make test`; needs root.
storm: $(BIN) $(STORM) $(BUILD)/tests/e2e_test
	BUILD=$(BUILD) bash tests/bench/storm_accounting.sh

# --- Fuzzing (clang libFuzzer) -------------------------------------------------

FUZZ_SECONDS ?= 60
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_CXX ?= clang++
FUZZ_CXXFLAGS := -std=c++20 -O1 -g $(WARNINGS) $(DEBUG_PREFIX_MAP) -I. -isystem $(BUILD)/gen \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
BUFFER_SRCS := $(call component_srcs,buffer)

# A fuzzer's objects, compiled one by one through the compiler cache (with
# -fsanitize=fuzzer they only get its coverage; libFuzzer's main comes in at
# the link), under $(FUZZ_DIR)/obj.
fuzz_objs = $(patsubst %.cc,$(FUZZ_DIR)/obj/%.o,$(1))
$(FUZZ_DIR)/obj/%.o: %.cc $(PROTO_HDRS)
	@mkdir -p $(@D)
	$(CCACHE) $(FUZZ_CXX) $(FUZZ_CXXFLAGS) -MMD -MP $(PKG_CFLAGS) -c $< -o $@

FUZZ_OBJS_trace_buffer := $(call fuzz_objs,tests/fuzz/trace_buffer_fuzzer.cc $(BUFFER_SRCS) \
  tests/buffer/testing/buffer_harness.cc)
FUZZ_LIBS_trace_buffer := absl_strings absl_node_hash_map absl_hash absl_raw_hash_set
FUZZ_OBJS_page_parser := $(call fuzz_objs,tests/fuzz/page_parser_fuzzer.cc ftrace/page_parser.cc)
# `ringside inspect` on any bytes: the reader, the summarizer, both renderings.
FUZZ_OBJS_trace_file := $(call fuzz_objs,tests/fuzz/trace_file_fuzzer.cc \
  agent/tracefile/trace_inspector.cc agent/tracefile/trace_inspector_format.cc \
  agent/tracefile/stack_summary.cc agent/tracefile/stack_summary_format.cc \
  agent/tracefile/trace_file_reader.cc base/json_text.cc agent/tracefile/file_digest.cc \
  agent/tracefile/trace_archive.cc agent/tracefile/untrusted_text.cc \
  agent/tracefile/packet_compression.cc buffer/wire_format.cc base/status.cc $(PROTO_CCS))
FUZZ_LIBS_trace_file := protobuf absl_statusor absl_str_format absl_hash absl_raw_hash_set zlib \
  libzstd libcrypto
# The control socket's framing and request decoder, on a peer's bytes.
FUZZ_OBJS_control_request := $(call fuzz_objs,tests/fuzz/control_request_fuzzer.cc \
  agent/control/control_frame.cc $(BUILD)/gen/ringside/control/control.pb.cc)
FUZZ_LIBS_control_request := protobuf absl_statusor absl_strings
# A config file's text, through the loader, the agent's defaults (libbpf: the
# possible CPUs the staging budget is split over) and checks,
# and the reload plan.
FUZZ_OBJS_config_text := $(call fuzz_objs,tests/fuzz/config_text_fuzzer.cc \
  agent/config/config_loader.cc agent/config/config_limits.cc agent/config/config_validation.cc \
  agent/config/config_validation_sources.cc agent/config/config_validation_triggers.cc \
  agent/config/defaults.cc \
  agent/config/config_reload.cc base/listen_address.cc \
  $(BUILD)/gen/ringside/config/trace_config.pb.cc \
  $(BUILD)/gen/ringside/trace/sys_stats_counters.pb.cc)
FUZZ_LIBS_config_text := protobuf absl_statusor absl_strings absl_str_format libbpf
# The scan of a kernel's BTF for its tracepoints, on any bytes.
FUZZ_OBJS_kernel_tracepoints := $(call fuzz_objs,tests/fuzz/kernel_tracepoints_fuzzer.cc \
  bpf/kernel_tracepoints.cc bpf/btf_file.cc bpf/load_errors.cc base/file_io.cc)
FUZZ_LIBS_kernel_tracepoints := absl_statusor absl_strings absl_str_format absl_hash \
  absl_raw_hash_set libbpf
# /proc/PID/maps and /proc/kallsyms text, through their parsers.
FUZZ_OBJS_symbols_text := $(call fuzz_objs,tests/fuzz/symbols_text_fuzzer.cc \
  agent/symbols/process_maps.cc agent/symbols/kernel_symbols.cc base/small_file.cc \
  base/file_io.cc base/status.cc)
FUZZ_LIBS_symbols_text := absl_statusor absl_strings absl_str_format absl_hash absl_raw_hash_set
# A mapped binary's bytes, through libelf and ElfFile.
FUZZ_OBJS_elf_file := $(call fuzz_objs,tests/fuzz/elf_file_fuzzer.cc agent/symbols/elf_file.cc)
FUZZ_LIBS_elf_file := absl_statusor absl_strings libelf
FUZZ_MAX_LEN_trace_file := 65536
FUZZ_MAX_LEN_elf_file := 65536
FUZZ_ARGS_config_text := -dict=tests/fuzz/config_text.dict

FUZZERS := trace_buffer page_parser trace_file control_request config_text kernel_tracepoints \
  symbols_text elf_file
FUZZ_BINS := $(FUZZERS:%=$(FUZZ_DIR)/%_fuzzer)
FUZZ_ALL_OBJS := $(foreach f,$(FUZZERS),$(FUZZ_OBJS_$(f)))

define fuzzer_rules
$(FUZZ_DIR)/$(1)_fuzzer: $(FUZZ_OBJS_$(1))
	$$(FUZZ_CXX) $$(FUZZ_CXXFLAGS) $$^ $$(if $$(FUZZ_LIBS_$(1)),$$(shell $$(PKG_CONFIG) --libs $$(FUZZ_LIBS_$(1)))) -o $$@
endef
$(foreach f,$(FUZZERS),$(eval $(call fuzzer_rules,$(f))))

$(FUZZ_DIR)/trace_buffer_corpus_generator: tests/fuzz/trace_buffer_corpus_generator.cc
	@mkdir -p $(@D)
	$(CXX) -std=c++20 -O2 $(WARNINGS) $< -o $@

$(FUZZ_DIR)/compressed_corpus_generator: tests/fuzz/compressed_corpus_generator.cc \
    agent/tracefile/packet_compression.cc buffer/wire_format.cc $(BUILD)/gen/ringside/config/trace_config.pb.cc \
    $(BUILD)/gen/ringside/trace/sys_stats_counters.pb.cc
	@mkdir -p $(@D)
	$(CXX) -std=c++20 -O2 $(WARNINGS) -I. -isystem $(BUILD)/gen $(PKG_CFLAGS) $^ $(PKG_LIBS) -o $@

# Runs every fuzzer for FUZZ_SECONDS on the committed seed corpus (new inputs
# go to build/, never into the source tree), as many at once as make -j
# allows. Each one's output goes to $(FUZZ_DIR)/NAME.log: its final stats
# are printed, or the whole log if it found a crash.
fuzz: deps
	@$(MAKE) --no-print-directory fuzz-run

fuzz-run: $(FUZZERS:%=fuzz-run-%)

fuzz-run-%: $(FUZZ_DIR)/%_fuzzer
	@mkdir -p $(FUZZ_DIR)/corpus/$*
	@echo "fuzz $*: $(FUZZ_SECONDS) s"
	@if $< -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -max_len=$(or $(FUZZ_MAX_LEN_$*),8192) $(FUZZ_ARGS_$*) \
	    $(FUZZ_DIR)/corpus/$* tests/fuzz/corpus/$* > $(FUZZ_DIR)/$*.log 2>&1; then \
	  grep -E '^(Done [0-9]+ runs|stat::number_of_executed_units|stat::new_units_added)' \
	    $(FUZZ_DIR)/$*.log | sed 's/^/fuzz $*: /'; \
	else \
	  cat $(FUZZ_DIR)/$*.log; echo "fuzz $*: FAILED (its log: $(FUZZ_DIR)/$*.log)"; exit 1; \
	fi

# Regenerates the committed seed corpus.
fuzz-corpus: $(FUZZ_DIR)/trace_buffer_corpus_generator $(FUZZ_DIR)/compressed_corpus_generator
	rm -rf tests/fuzz/corpus/trace_buffer && mkdir -p tests/fuzz/corpus/trace_buffer
	$< tests/fuzz/corpus/trace_buffer 64
	mkdir -p tests/fuzz/corpus/trace_file
	$(PROTOC) --encode=ringside.trace.Trace -I protos protos/ringside/trace/trace.proto \
	  < tests/fuzz/trace_file_seed.txtpb > tests/fuzz/corpus/trace_file/every_packet_kind
	gzip -9 -n -c tests/fuzz/corpus/trace_file/every_packet_kind \
	  > tests/fuzz/corpus/trace_file/every_packet_kind_gzip
	$(FUZZ_DIR)/compressed_corpus_generator tests/fuzz/corpus/trace_file/every_packet_kind \
	  tests/fuzz/corpus/trace_file/every_packet_kind_zstd \
	  tests/fuzz/corpus/trace_file/every_packet_kind_deflate

# `make demo`: 10 s of this machine with the embedded default config.
demo: deps
	@$(MAKE) --no-print-directory run-demo

run-demo: $(BIN)
	$(BIN) record -o $(BUILD)/demo.pftrace --duration 10s
	$(BIN) inspect $(BUILD)/demo.pftrace
	@echo
	@echo "Open $(BUILD)/demo.pftrace in https://ui.perfetto.dev (Open trace file)," \
	  "or query it with trace_processor_shell."

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' \
	    || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing; \
	fi
	@if [ -n "$(NPM_TOOLS)" ] && ! command -v npm >/dev/null; then \
	  echo "make deps: installing nodejs npm"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq nodejs npm; \
	fi
	@if [ -n "$(NPM_TOOLS)" ] && [ "$$(cat $(TOOLS_DIR)/installed 2>/dev/null)" != "$(NPM_TOOLS)" ]; then \
	  echo "make deps: installing $(NPM_TOOLS) into $(TOOLS_DIR)"; \
	  rm -rf $(TOOLS_DIR) && mkdir -p $(TOOLS_DIR) && \
	  npm install --prefix $(TOOLS_DIR) --no-save --no-package-lock --no-audit --no-fund \
	    --loglevel=error $(NPM_TOOLS) && \
	  echo "$(NPM_TOOLS)" > $(TOOLS_DIR)/installed; \
	fi
	@if [ -n "$(DEB_TOOLS)" ] && [ "$$(cat $(TOOLS_DIR)/debs/unpacked 2>/dev/null)" != "$(DEB_TOOLS)" ]; then \
	  echo "make deps: unpacking $(DEB_TOOLS) into $(TOOLS_DIR)/debs"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  rm -rf $(TOOLS_DIR)/debs && mkdir -p $(TOOLS_DIR)/debs/packages && \
	  ( cd $(TOOLS_DIR)/debs/packages && \
	    { apt-get download -qq $(DEB_TOOLS) 2>/dev/null || \
	      { $$sudo apt-get update -qq && apt-get download -qq $(DEB_TOOLS); }; } ) && \
	  for deb in $(TOOLS_DIR)/debs/packages/*.deb; do \
	    dpkg-deb -x "$$deb" $(TOOLS_DIR)/debs/root || exit 1; \
	  done && \
	  rm -rf $(TOOLS_DIR)/debs/packages && echo "$(DEB_TOOLS)" > $(TOOLS_DIR)/debs/unpacked; \
	fi
	$(if $(CROSS),@bash tools/cross_sysroot.sh $(ARCH) $(CROSS_DIR) $(CROSS_BTF_KERNEL) \
	  $(SYSROOT_PACKAGES))

# --- Install ------------------------------------------------------------------

# The unit goes where systemd looks for units of this prefix
# (/usr/local/lib/systemd/system, or /usr/lib/systemd/system with
# PREFIX=/usr); the config and the state directory are the system's, whatever
# the prefix, as the unit names them.
BINDIR := $(PREFIX)/bin
UNITDIR := $(PREFIX)/lib/systemd/system
# ringside-ship (deploy/shipping/), run by its timer unit once enabled.
SHIPDIR := $(PREFIX)/lib/ringside
CONFIG_DIR := /etc/ringside
STATE_DIR := /var/lib/ringside
SHIPPED_CONFIG := deploy/configs/agent.pbtxt

# An edited config is never overwritten (nor removed by uninstall). The state
# directory holds the snapshots: uninstall removes it only when empty.
install: $(BIN)
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/ringside
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g' deploy/systemd/ringside.service > $(DESTDIR)$(UNITDIR)/ringside.service.tmp
	chmod 0644 $(DESTDIR)$(UNITDIR)/ringside.service.tmp
	mv -f $(DESTDIR)$(UNITDIR)/ringside.service.tmp $(DESTDIR)$(UNITDIR)/ringside.service
	install -D -m 0755 deploy/shipping/ringside-ship $(DESTDIR)$(SHIPDIR)/ringside-ship
	sed 's|@SHIPDIR@|$(SHIPDIR)|g' deploy/shipping/ringside-ship.service > $(DESTDIR)$(UNITDIR)/ringside-ship.service.tmp
	chmod 0644 $(DESTDIR)$(UNITDIR)/ringside-ship.service.tmp
	mv -f $(DESTDIR)$(UNITDIR)/ringside-ship.service.tmp $(DESTDIR)$(UNITDIR)/ringside-ship.service
	install -m 0644 deploy/shipping/ringside-ship.timer $(DESTDIR)$(UNITDIR)/ringside-ship.timer
	@if [ -e $(DESTDIR)$(CONFIG_DIR)/agent.pbtxt ]; then \
	  echo "make install: keeping $(DESTDIR)$(CONFIG_DIR)/agent.pbtxt as it is" \
	    "(the shipped default is $(SHIPPED_CONFIG))"; \
	else \
	  echo "install -D -m 0644 $(SHIPPED_CONFIG) $(DESTDIR)$(CONFIG_DIR)/agent.pbtxt"; \
	  install -D -m 0644 $(SHIPPED_CONFIG) $(DESTDIR)$(CONFIG_DIR)/agent.pbtxt; \
	fi
	install -d -m 0750 $(DESTDIR)$(STATE_DIR)
	@echo "make install: done; then: systemctl daemon-reload && systemctl enable --now ringside" \
	  "(and, to ship its files, docs/shipping.md)"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ringside $(DESTDIR)$(UNITDIR)/ringside.service
	rm -f $(DESTDIR)$(SHIPDIR)/ringside-ship $(DESTDIR)$(UNITDIR)/ringside-ship.service \
	  $(DESTDIR)$(UNITDIR)/ringside-ship.timer
	@if [ -d $(DESTDIR)$(SHIPDIR) ] && rmdir $(DESTDIR)$(SHIPDIR) 2>/dev/null; then \
	  echo "rmdir $(DESTDIR)$(SHIPDIR)"; fi
	@cfg=$(DESTDIR)$(CONFIG_DIR)/agent.pbtxt; \
	if [ -e $$cfg ]; then \
	  if cmp -s $$cfg $(SHIPPED_CONFIG); then echo "rm -f $$cfg"; rm -f $$cfg; \
	  else echo "make uninstall: keeping $$cfg: it differs from the shipped default"; fi; \
	fi
	@for d in $(DESTDIR)$(CONFIG_DIR) $(DESTDIR)$(STATE_DIR)/snapshots $(DESTDIR)$(STATE_DIR); do \
	  [ -d $$d ] || continue; \
	  if rmdir $$d 2>/dev/null; then echo "rmdir $$d"; \
	  else echo "make uninstall: keeping $$d: it is not empty"; fi; \
	done

clean:
	rm -rf $(BUILD)

format:
	find base buffer ftrace bpf agent tests -name '*.cc' -o -name '*.h' -o -name '*.c' \
	  | xargs -r clang-format -i

-include $(ALL_OBJS:.o=.d) $(FUZZ_ALL_OBJS:.o=.d)
