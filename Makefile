# SPDX-License-Identifier: MIT
# memkit - the commands people type.  The build itself is CMake (>= 3.20);
# this file only wraps it.  See README.md.
#
#   make              build libraries, tests, benchmarks, examples (./build)
#   make test         build, then run every test (ctest): 168 tests, 1 min
#                     47 s and 2 min 10 s in two runs on a 2-core machine
#                     shared with other work (load average 1.2 to 4.8),
#                     the build done; a build from clean adds about 1 min
#   make test-quick   build, then the api/, unit/, wrong/, run/ and tools/
#                     tests only (ctest -L quick, 80 tests): the common
#                     loop, 20 s and 27 s on the same machine (load 4.5
#                     to 5.3)
#   make bench        build, then run the quick benchmark suite (about 5-7 min on 2 cores);
#                     it opens with a verdict and writes bench/results/bench-chart.svg
#   make bench-chart  the same, then copy the chart to docs/bench-chart.svg (the README's)
#   make bench-full   the whole benchmark grid (long)
#   make asan-test    the tests under AddressSanitizer + UBSan (./build-asan)
#   make tsan-test    the tests under ThreadSanitizer (./build-tsan)
#   make valgrind-test  the plain tests under Valgrind memcheck
#   make install [PREFIX=/usr/local]   headers, libraries, memkit.pc, CMake package
#   make fuzz [FUZZ_SECONDS=60]   build the libFuzzer targets (clang, ./build-fuzz)
#                 and run each for FUZZ_SECONDS on its seed corpus
#   make soak [SOAK_SECONDS=600]  8 threads of context and malloc work, RSS
#                 sampled (on demand: not part of `make test`)
#   make clean

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory
CMAKE ?= cmake
PREFIX ?=
CTEST_FLAGS ?= --output-on-failure -j$(JOBS)

.PHONY: all build test test-quick bench bench-chart bench-full asan-test tsan-test valgrind-test \
        install clean tools-check fuzz fuzz-build soak

all: build

tools-check:
	@missing=""; \
	for t in $(CMAKE) cc make; do \
	  command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "memkit: missing tools:$$missing"; \
	  echo "memkit: on Debian/Ubuntu: sudo apt-get install build-essential cmake"; \
	  exit 1; \
	fi

# Build output goes to stderr, so that `make bench > table.txt` holds the table.
build: tools-check
	@$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMKIT_TESTS=ON -DMEMKIT_BENCH=ON -DMEMKIT_EXAMPLES=ON >&2
	@$(CMAKE) --build build -j$(JOBS) >&2

test: build
	cd build && ctest $(CTEST_FLAGS)

test-quick: build
	cd build && ctest $(CTEST_FLAGS) -L quick

bench: build
	./build/bench/memkit-bench --quick

# The README's chart: a whole quick run (its verdict and tables on stdout
# as for `make bench`), then its chart copied where the README shows it.
bench-chart: bench
	cp bench/results/bench-chart.svg docs/bench-chart.svg
	@echo "docs/bench-chart.svg updated from this run" >&2

bench-full: build
	./build/bench/memkit-bench --full

asan-test: tools-check
	@$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DMEMKIT_SANITIZE=address,undefined -DMEMKIT_TESTS=ON -DMEMKIT_EXAMPLES=ON -DMEMKIT_BENCH=OFF >/dev/null
	@$(CMAKE) --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest $(CTEST_FLAGS) -LE no-sanitizer

tsan-test: tools-check
	@$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DMEMKIT_SANITIZE=thread -DMEMKIT_TESTS=ON -DMEMKIT_EXAMPLES=ON -DMEMKIT_BENCH=OFF >/dev/null
	@$(CMAKE) --build build-tsan -j$(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest $(CTEST_FLAGS) -LE no-sanitizer

valgrind-test: build
	@command -v valgrind >/dev/null 2>&1 || { echo "memkit: valgrind is missing: sudo apt-get install valgrind"; exit 1; }
	cd build && ctest $(CTEST_FLAGS) -L valgrind -T memcheck

install: build
	$(CMAKE) --install build $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf build build-asan build-tsan

# ---- fuzzing and the soak test ----------------------------------------------
# make fuzz: fuzz/CMakeLists.txt is a project of its own (clang, libFuzzer;
# fuzz/README.md).  Each target runs FUZZ_SECONDS on a working copy of its
# seed corpus (new inputs go to build-fuzz/corpus/<target>, never into the
# repository); a crash leaves build-fuzz/<target>-crash-<sha1> and fails.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_TARGETS ?= ctx_fuzz ctx_fuzz_asan malloc_fuzz
FUZZ_FLAGS ?=

fuzz-build: tools-check
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || { echo "memkit: make fuzz needs clang: sudo apt-get install clang"; exit 1; }
	@$(CMAKE) -S fuzz -B build-fuzz -DCMAKE_C_COMPILER=$(FUZZ_CC) >/dev/null
	@$(CMAKE) --build build-fuzz -j$(JOBS)

fuzz: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	  seeds=fuzz/corpus/$$t; [ -d $$seeds ] || seeds=fuzz/corpus/$${t%_asan}; \
	  mkdir -p build-fuzz/corpus/$$t; \
	  echo "== $$t: $(FUZZ_SECONDS) s on $$seeds =="; \
	  ./build-fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/$$t- $(FUZZ_FLAGS) \
	    build-fuzz/corpus/$$t $$seeds; \
	done

# make soak: the soak test (tests/stress/soak.c): SOAK_SECONDS of work, RSS
# sampled every second.  Registered for ctest's configuration `soak` only,
# so a plain ctest (make test) does not see it; -V: the samples and the
# summary are printed whether it passes or not.
SOAK_SECONDS ?= 600
soak: build
	cd build && MEMKIT_SOAK_SECONDS=$(SOAK_SECONDS) ctest -C soak -L soak -V
