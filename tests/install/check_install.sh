#!/bin/sh
# check_install.sh BUILD_DIR SOURCE_DIR - install memkit into a scratch
# prefix, then build the quickstart example against it twice: with
# pkg-config (memkit.pc) and with CMake's find_package(memkit); and a
# program that must get memkit's malloc by linking libmemkit-malloc (pkg-config
# memkit-malloc; memkit::malloc and memkit::malloc_static).  Fails if any
# consumer does not build or does not run.  Then the installed memkit-run
# runs a small program: it must find the installed libmemkit-malloc from its
# own place in the prefix (not the build tree) and pass the status through.
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

pc=$(find "$tmp/prefix" -name memkit.pc | head -n 1)
test -n "$pc" || { echo "no memkit.pc installed"; exit 1; }
if command -v pkg-config >/dev/null 2>&1; then
  flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs memkit)
  libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir memkit)
  cc "$src/examples/quickstart.c" $flags -Wl,-rpath,"$libdir" -o "$tmp/qs_pc"
  "$tmp/qs_pc" >/dev/null
  mflags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs memkit-malloc)
  cc "$src/tests/install/uses_malloc.c" $mflags -Wl,-rpath,"$libdir" -o "$tmp/um_pc"
  "$tmp/um_pc"
  echo "pkg-config consumers (memkit, memkit-malloc): ok"
else
  echo "pkg-config not installed: that half is skipped"
fi

mkdir "$tmp/consumer"
cat >"$tmp/consumer/CMakeLists.txt" <<CMK
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(memkit REQUIRED)
add_executable(qs_shared "$src/examples/quickstart.c")
target_link_libraries(qs_shared PRIVATE memkit::memkit)
add_executable(qs_check "$src/examples/quickstart.c")
target_link_libraries(qs_check PRIVATE memkit::memkit-check_static)
add_executable(um_shared "$src/tests/install/uses_malloc.c")
target_link_libraries(um_shared PRIVATE memkit::malloc)
add_executable(um_static "$src/tests/install/uses_malloc.c")
target_link_libraries(um_static PRIVATE memkit::malloc_static)
CMK
cmake -S "$tmp/consumer" -B "$tmp/consumer/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer/b" >/dev/null
"$tmp/consumer/b/qs_shared" >/dev/null
"$tmp/consumer/b/qs_check" >/dev/null
"$tmp/consumer/b/um_shared"
"$tmp/consumer/b/um_static"
echo "find_package consumers (memkit, memkit-check, malloc, malloc_static): ok"

# memkit-run, installed in bin/, preloads the libmemkit-malloc installed
# beside it (found from its own path, so a moved prefix works too).
run="$tmp/prefix/bin/memkit-run"
test -x "$run" || { echo "no bin/memkit-run installed"; exit 1; }
cc -D_GNU_SOURCE -fno-builtin "$src/tests/run/subject.c" -o "$tmp/subject"
mv "$tmp/prefix" "$tmp/moved"
run="$tmp/moved/bin/memkit-run"
status=0
(unset MEMKIT_RUN_LIB MEMKIT_STATS MEMKIT_STATS_FILE LD_PRELOAD
 MEMKIT_PURGE_DELAY_MS=0 "$run" --csv "$tmp/run.csv" -- "$tmp/subject" peak 16
) 2>"$tmp/run.err" || status=$?
moved=$(cd "$tmp/moved" && pwd -P)
if [ "$status" != 3 ] ||
   ! grep -q "^  allocator   memkit ($moved/.*libmemkit-malloc" "$tmp/run.err" ||
   ! grep -q "^memkit's view at exit (pid [0-9]*, the program)" "$tmp/run.err" ||
   ! grep -q "^time_s,rss_kib,private_dirty_kib,processes" "$tmp/run.csv"; then
  echo "installed memkit-run: exit status $status (expected 3), report:"
  cat "$tmp/run.err"
  exit 1
fi
echo "installed memkit-run (prefix moved after install): ok"
