#!/bin/sh
# check_install.sh BUILD_DIR SOURCE_DIR - install memkit into a scratch
# prefix, then build the quickstart example against it twice: with
# pkg-config (memkit.pc) and with CMake's find_package(memkit).  Fails if
# either consumer does not build or does not run.
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
  echo "pkg-config consumer: ok"
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
CMK
cmake -S "$tmp/consumer" -B "$tmp/consumer/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer/b" >/dev/null
"$tmp/consumer/b/qs_shared" >/dev/null
"$tmp/consumer/b/qs_check" >/dev/null
echo "find_package consumer: ok"
