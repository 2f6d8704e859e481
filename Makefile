# memkit - the commands people type.  The build itself is CMake (>= 3.20);
# this file only wraps it.  See README.md.
#
#   make              build libraries, tests, benchmarks, examples (./build)
#   make test         build, then run every test (ctest)
#   make bench        build, then run the quick benchmark suite (about 5-7 min on 2 cores)
#   make bench-full   the whole benchmark grid (long)
#   make asan-test    the tests under AddressSanitizer + UBSan (./build-asan)
#   make tsan-test    the tests under ThreadSanitizer (./build-tsan)
#   make valgrind-test  the plain tests under Valgrind memcheck
#   make install [PREFIX=/usr/local]   headers, libraries, memkit.pc, CMake package
#   make clean

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory
CMAKE ?= cmake
PREFIX ?=
CTEST_FLAGS ?= --output-on-failure -j$(JOBS)

.PHONY: all build test bench bench-full asan-test tsan-test valgrind-test \
        install clean tools-check

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

bench: build
	./build/bench/memkit-bench --quick

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
