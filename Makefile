# Top-level build for the CDC pipeline. Sources are discovered by directory:
#   common/**.c          -> build/libcdc.a (linked by everything)
#   <proc>/*.c           -> build/lib<proc>.a + build/cdc-<proc> (main.c holds main())
#   tools/<name>/*.c     -> build/<name>
#   tests/unit/<module>/test_*.c -> build/tests/unit/<module>/test_*   (cmocka)
#   tests/integration/<module>/test_*.c -> build/tests/integration/<module>/test_*  (need the
#                        harness); <module>: common, iceberg, capture, coordinator, worker, pipeline
# `make asan` rebuilds everything with ASan+UBSan into build-asan/ and runs the tests.
# FAULT_INJECTION=1 (the default) compiles in the test-only fault injection (the
# coordinator's --fault, the worker's CDC_WORKER_FAULT); the image's release build uses
# FAULT_INJECTION=0 (docker/build-steps.sh build), whose binaries refuse them (status 2).
# `make tsan` rebuilds everything with ThreadSanitizer into build-tsan/ and runs the unit
# tests and the integration tests that run worker and coordinator processes (TSAN_TESTS).

BUILD   ?= build
CC      ?= gcc
SAN     ?=
OPT     ?= -O2
NPROC   := $(shell nproc 2>/dev/null || echo 2)
# The version the programs report (--version, Parquet created_by, the events' source.version):
# `make VERSION=<v>` stamps another one (the image build passes its CDC_VERSION build arg,
# having no .git).
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
FAULT_INJECTION ?= 1

CFLAGS_WARN := -Wall -Wextra -Werror -Wno-missing-field-initializers -Wno-format-truncation
# FUZZER=1 (`make fuzz`): clang with libFuzzer, which knows no -Wformat-truncation.
ifeq ($(FUZZER),1)
CFLAGS_WARN := $(filter-out -Wno-format-truncation,$(CFLAGS_WARN))
endif
CFLAGS  := -std=gnu11 $(OPT) -g $(CFLAGS_WARN) -D_GNU_SOURCE -DCDC_VERSION='"$(VERSION)"' \
           -DCDC_FAULTS=$(FAULT_INJECTION) -I. -I$(BUILD)/gen -I/usr/include/postgresql -MMD -MP \
           $(EXTRA_CFLAGS)
# A build directory holds objects of one FAULT_INJECTION setting: switching it rebuilds
# every object.
FAULTS_STAMP := $(BUILD)/faults-$(FAULT_INJECTION).stamp
# RocksDB is linked statically (Debian's librocksdb-dev ships librocksdb.a), with the
# libraries it needs: in the shared library every access to its thread-local perf and I/O
# counters calls __tls_get_addr (several per key written or read); linked into the
# executable, those accesses become direct: about 15% less worker CPU in the backlog drain
# (docs/worker.md, "RocksDB linked statically"). ROCKSDB_LIBS=-lrocksdb links it dynamically.
ROCKSDB_LIBS ?= -Wl,-Bstatic -lrocksdb -Wl,-Bdynamic -lgflags -lbz2 -llz4 -lstdc++
LDLIBS  := -lrdkafka -lpq -lnng -lprotobuf-c -lcurl -lcrypto $(ROCKSDB_LIBS) -ljansson -lzstd \
           -lsnappy -lavro -lz -lpthread -lm
# The fuzz targets' objects carry libFuzzer's coverage instrumentation and the sanitizers;
# only the targets are built in this mode (fuzz-bins), linked with libFuzzer's main.
ifeq ($(FUZZER),1)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
FUZZ_MAIN := -fsanitize=fuzzer
endif
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# ThreadSanitizer cannot be combined with ASan: a separate mode and build directory.
# tests/tsan/c11threads.c routes librdkafka's C11 threads through TSan's pthread hooks.
ifeq ($(SAN),thread)
CFLAGS    += -fsanitize=thread -fno-omit-frame-pointer
TSAN_SHIM := $(BUILD)/obj/tests/tsan/c11threads.o
LDFLAGS   += -fsanitize=thread $(TSAN_SHIM)
endif

PROTO_SRC := $(wildcard proto/*.proto)
PROTO_C   := $(patsubst proto/%.proto,$(BUILD)/gen/proto/%.pb-c.c,$(PROTO_SRC))
PROTO_H   := $(PROTO_C:.c=.h)

COMMON_SRC := $(shell find common -name '*.c' 2>/dev/null | sort)
COMMON_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(COMMON_SRC)) \
              $(patsubst %.c,%.o,$(subst $(BUILD)/gen/,$(BUILD)/obj/gen/,$(PROTO_C))) \
              $(BUILD)/obj/gen/config_env.o
LIBCDC     := $(BUILD)/libcdc.a

PROCS      := capture coordinator worker
proc_src    = $(filter-out $(1)/main.c,$(wildcard $(1)/*.c))
proc_lib    = $(BUILD)/lib$(1).a
PROC_LIBS  := $(foreach p,$(PROCS),$(if $(call proc_src,$(p)),$(call proc_lib,$(p))))
PROC_BINS  := $(foreach p,$(PROCS),$(if $(wildcard $(p)/main.c),$(BUILD)/cdc-$(p)))

TOOL_DIRS  := $(patsubst %/,%,$(sort $(dir $(wildcard tools/*/*.c))))
TOOL_BINS  := $(foreach d,$(TOOL_DIRS),$(BUILD)/$(notdir $(d)))

HARNESS_SRC := $(wildcard tests/harness/*.c)
HARNESS_LIB := $(if $(HARNESS_SRC),$(BUILD)/libharness.a)

UNIT_SRC   := $(shell find tests/unit -name 'test_*.c' 2>/dev/null | sort)
UNIT_BINS  := $(patsubst tests/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
INTEG_SRC  := $(shell find tests/integration -name 'test_*.c' 2>/dev/null | sort)
INTEG_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(INTEG_SRC))
# Fuzz targets (docs/development.md, "Fuzzing"): tests/fuzz/<target>.c -> build/tests/fuzz/<target>,
# linked with the replay driver (tests/fuzz/driver.c), or with libFuzzer under FUZZER=1.
FUZZ_SRC   := $(filter-out tests/fuzz/driver.c,$(wildcard tests/fuzz/*.c))
FUZZ_BINS  := $(patsubst tests/%.c,$(BUILD)/tests/%,$(FUZZ_SRC))
FUZZ_MAIN  ?= $(BUILD)/obj/tests/fuzz/driver.o
FUZZ_LIBS  := $(PROC_LIBS) $(LIBCDC)
# The disk-fault shim (tests/faults/diskfault.c), an LD_PRELOAD object of the disk-fault
# tests (docs/operations.md, "Disk faults"); built without the sanitizers, which it sits beside.
FAULT_SHIM := $(BUILD)/tests/faults/libdiskfault.so
BENCH_SRC  := $(wildcard benchmarks/*/*.c benchmarks/*.c)
BENCH_BINS := $(patsubst %.c,$(BUILD)/%,$(BENCH_SRC))

ALL_LIBS   := $(PROC_LIBS) $(HARNESS_LIB) $(LIBCDC)

.PHONY: circles soak fuzz fuzz-build fuzz-bins fuzz-replay chaos-tables all bins tests test test-unit test-integration run lint fmt asan tsan clean-build docs \
        setup bench chaos start stop clean run-chaos compose-test
.DEFAULT_GOAL := all
# Keep every intermediate (generated sources, the objects of tests and benchmarks).
.SECONDARY:

all: bins tests
bins: $(PROC_BINS) $(TOOL_BINS)
tests: $(UNIT_BINS) $(INTEG_BINS) $(BENCH_BINS) $(FUZZ_BINS) $(FAULT_SHIM)
fuzz-bins: $(FUZZ_BINS)

$(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen $<

# The CDC_ variables of every cdc program, from the generated reference (which
# tests/integration/pipeline/config_docs.sh keeps equal to the option tables): a program warns of
# a CDC_ variable that is none of them (common/config.c).
$(BUILD)/gen/config_env.c: docs/configuration.md
	@mkdir -p $(BUILD)/gen
	@{ echo '/* Generated from docs/configuration.md by the Makefile. */'; \
	   echo '#include <stddef.h>'; \
	   echo 'const char *const cdc_config_known_env[] = {'; \
	   grep -o '`CDC_[A-Z0-9_]*`' $< | tr -d '`' | sort -u | sed 's/.*/    "&",/'; \
	   echo '    NULL};'; } > $@

# The objects that embed the version are rebuilt when it changes: $(BUILD)/gen/version holds
# the one they were built with, rewritten only when VERSION differs.
VERSION_STAMP := $(BUILD)/gen/version
VERSION_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(shell grep -rl --include='*.c' CDC_VERSION \
                   common capture coordinator worker tools benchmarks 2>/dev/null))
$(VERSION_STAMP): FORCE
	@mkdir -p $(dir $@)
	@[ "$$(cat $@ 2>/dev/null)" = '$(VERSION)' ] || echo '$(VERSION)' > $@
$(VERSION_OBJ): $(VERSION_STAMP)
.PHONY: FORCE
FORCE:

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

$(FAULTS_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/faults-*.stamp
	@touch $@

# Every object may include the generated protocol header.
$(BUILD)/obj/%.o: %.c $(PROTO_H) $(FAULTS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBCDC): $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

define PROC_RULES
$(call proc_lib,$(1)): $(patsubst %.c,$(BUILD)/obj/%.o,$(call proc_src,$(1)))
	@rm -f $$@
	ar rcs $$@ $$^
$(BUILD)/cdc-$(1): $(BUILD)/obj/$(1)/main.o $(if $(call proc_src,$(1)),$(call proc_lib,$(1))) $(LIBCDC)
	$(CC) $(LDFLAGS) -o $$@ $$^ $(LDLIBS)
endef
$(foreach p,$(PROCS),$(eval $(call PROC_RULES,$(p))))

define TOOL_RULES
$(BUILD)/$(notdir $(1)): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(1)/*.c)) $(LIBCDC)
	$(CC) $(LDFLAGS) -o $$@ $$^ $(LDLIBS)
endef
$(foreach d,$(TOOL_DIRS),$(eval $(call TOOL_RULES,$(d))))
# tools/loadgen/schema.c embeds schema.sql with .incbin (common/embed.h), which gcc's -MMD
# cannot see.
$(BUILD)/obj/tools/loadgen/schema.o: tools/loadgen/schema.sql
# The coordinator's dashboard page (coordinator/ui/dashboard.html), embedded the same way.
$(BUILD)/obj/coordinator/dashboard.o: coordinator/ui/dashboard.html

$(HARNESS_LIB): $(patsubst %.c,$(BUILD)/obj/%.o,$(HARNESS_SRC))
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS) -lcmocka

$(BUILD)/tests/fuzz/%: $(BUILD)/obj/tests/fuzz/%.o $(filter %.o,$(FUZZ_MAIN)) $(FUZZ_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(FUZZ_MAIN) $(FUZZ_LIBS) $(LDLIBS)

$(FAULT_SHIM): tests/faults/diskfault.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(CFLAGS_WARN) -D_GNU_SOURCE -shared -fPIC -o $@ $< -ldl -lpthread

$(BUILD)/benchmarks/%: $(BUILD)/obj/benchmarks/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)

ifneq ($(TSAN_SHIM),)
$(PROC_BINS) $(TOOL_BINS) $(UNIT_BINS) $(INTEG_BINS) $(BENCH_BINS) $(FUZZ_BINS): | $(TSAN_SHIM)
endif

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- setup, tests, run ------------------------------------------------------------
setup:
	@tools/setup.sh

# make test also replays the fuzz corpora through the gcc ASan/UBSan drivers (build-asan) and
# runs every libFuzzer target for FUZZ_TEST_SECONDS (build-fuzz).
FUZZ_TEST_SECONDS ?= 15
# Targets make test does not fuzz (their corpora are still replayed) while a known finding is
# open (docs/development.md "Fuzzing"): none today.
FUZZ_TEST_SKIP ?=
test: setup
	@tools/lint-extra.sh
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 OPT=-O1 -j$(NPROC) fuzz-bins
	@$(MAKE) --no-print-directory fuzz-build
	@$(BUILD)/launch sh -c 'rc=0; tests/run.sh unit $(BUILD) || rc=1; tests/run.sh integration $(BUILD) || rc=1; \
	    tests/run.sh fuzz-replay build-asan || rc=1; \
	    FUZZ_SECONDS=$(FUZZ_TEST_SECONDS) FUZZ_SKIP="$(FUZZ_TEST_SKIP)" tests/run.sh fuzz build-fuzz || rc=1; exit $$rc'

test-unit: all
	@tests/run.sh unit $(BUILD)

test-integration: all
	@tests/run.sh integration $(BUILD)

run: setup
	@$(MAKE) --no-print-directory -j$(NPROC) bins
	@tools/run.sh

asan: setup
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 OPT=-O1 -j$(NPROC) all
	@export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	    LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0; \
	    rc=0; tests/run.sh unit build-asan || rc=1; tests/run.sh integration build-asan || rc=1; \
	    tests/run.sh fuzz-replay build-asan || rc=1; exit $$rc

# Fuzzing (docs/development.md, "Fuzzing"): `make fuzz` builds the targets with clang and
# libFuzzer into build-fuzz/ and runs each for FUZZ_SECONDS, one after another, from its
# corpus (tests/fuzz/corpus/<target>/); new inputs go to build-fuzz/corpus/<target>/, crashes
# to build-fuzz/crashes/<target>/. `make fuzz-replay` replays the corpora through the gcc
# ASan/UBSan drivers (build-asan/).
FUZZ_SECONDS ?= 60
fuzz-build:
	@command -v clang >/dev/null 2>&1 || { echo "make fuzz: clang is not installed (tools/setup.sh installs clang and libclang-rt-14-dev)" >&2; exit 1; }
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang FUZZER=1 OPT=-O1 -j$(NPROC) fuzz-bins

fuzz: setup fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run.sh fuzz build-fuzz

fuzz-replay: setup
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 OPT=-O1 -j$(NPROC) fuzz-bins
	@tests/run.sh fuzz-replay build-asan

# Integration tests that run worker and coordinator processes (the threaded code).
TSAN_TESTS ?= test_worker test_runtime test_coordinator_commits test_coordinator_security \
              test_truncate
tsan: setup
	@$(MAKE) --no-print-directory BUILD=build-tsan SAN=thread OPT=-O1 -j$(NPROC) all
	@export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp"; \
	    rc=0; tests/run.sh unit build-tsan || rc=1; \
	    TESTS="$(TSAN_TESTS)" tests/run.sh integration build-tsan || rc=1; exit $$rc

C_FILES = $(shell git ls-files --cached --others --exclude-standard '*.c' '*.h' 2>/dev/null)
fmt:
	clang-format -i $(C_FILES)

lint:
	@clang-format --dry-run -Werror $(C_FILES)
	@cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	    --inline-suppr --suppress=missingIncludeSystem -I. -I$(BUILD)/gen \
	    -D__GNUC__ -DPROTOBUF_C_VERSION_NUMBER=1004001 \
	    -DPROTOBUF_C_MIN_COMPILER_VERSION=1000000 --std=c11 $(filter %.c,$(C_FILES))
	@tools/lint-extra.sh
	@echo "lint: ok"

# the call circles between the files of each folder (docs/development.md, "Call circles")
circles:
	@node tools/circles.mjs

docs: bins
	@tools/gen-config-docs.sh $(BUILD) > docs/configuration.md

clean-build:
	rm -rf $(BUILD) build-asan build-tsan build-release build-fuzz

# ---- benchmarks, chaos, compose (scripts own the details) ----------------------------
bench: setup
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@benchmarks/run.sh all

bench-%: setup
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@benchmarks/run.sh $*

chaos: setup
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@chaos/run.sh

# A long run of every fault class under load (chaos/run.sh with SOAK=1): DURATION seconds
# (1800 for the committed report, benchmarks/results/soak/soak.md).
soak: setup
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@SOAK=1 DURATION=$${DURATION:-1800} chaos/run.sh

# Thousands of tables under faults (benchmarks/tables/run.sh with TABLES_CHAOS=1): 500
# tables and 50 more added under load, kills of a worker, the leader and the capture, then
# the verifier over every table. make test runs its short form (many_tables.sh, 88 tables).
chaos-tables: setup
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@TABLES=$${TABLES:-500} TABLES_CHAOS=1 benchmarks/tables/run.sh

start stop clean run-chaos:
	@docker/compose.sh $@

# The images built and the compose stack (3 workers) run under load and faults with podman,
# verified after each scenario (docker/compose-test.sh; --short is the form make test runs).
compose-test: setup
	@$(MAKE) --no-print-directory -j$(NPROC) bins
	@docker/compose-test.sh
