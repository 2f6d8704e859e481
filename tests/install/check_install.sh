#!/bin/sh
# SPDX-License-Identifier: MIT
# check_install.sh BUILD_DIR SOURCE_DIR - install memkit into a scratch
# prefix with `cmake --install`, then build and run, as a user would:
#   - the README's example (the first ```c block of README.md, extracted,
#     so that the README cannot drift from what builds) and every program
#     in examples/, in C, and tests/api/header.cc (every macro and inline
#     function of memkit.h) in C++;
#   - each with pkg-config (memkit.pc: a clean include path, and the
#     -Wl,-rpath the README tells pkg-config users to add; memkit-check.pc
#     for the checking build, which mk_checking() must confirm) and with
#     CMake's find_package(memkit) (CMAKE_PREFIX_PATH, as the README says),
#     against the shared, static and checking libraries;
#   - a program that must get memkit's malloc by linking libmemkit-malloc
#     (pkg-config memkit-malloc; memkit::memkit-malloc and _static, and the
#     old names memkit::malloc and memkit::malloc_static); and one that
#     calls only strdup (tests/install/strdup_only.c), linked the same ways
#     under -Wl,--as-needed (Debian's default, forced here on every
#     system), which must still get it;
#   - the manual pages memkit(3), memkit-malloc(3), memkit-run(1), and the
#     documentation under share/doc/memkit (README, LICENSE, CHANGELOG,
#     docs/);
#   - the installed memkit-run, with the prefix moved.
# Fails if any consumer does not build, does not run, or prints the wrong
# thing.
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
prefix=$(cd "$tmp/prefix" && pwd)
cxx=${CXX:-c++}
have_cxx=0
command -v "$cxx" >/dev/null 2>&1 && have_cxx=1

# The README's example, as a file.
awk '/^```c$/ {on = 1; next} on && /^```$/ {exit} on {print}' "$src/README.md" >"$tmp/readme.c"
test -s "$tmp/readme.c" || { echo "no \`\`\`c block in README.md"; exit 1; }
examples="$tmp/readme.c"
for f in "$src"/examples/*.c; do examples="$examples $f"; done

# run NAME EXE: run it; the README's example must print the context tree.
run() {
  out=$("$2" 2>&1) || { echo "FAIL $1: exit status $?:"; echo "$out"; exit 1; }
  case $1 in
    *readme*) echo "$out" | grep -q '^top' || { echo "FAIL $1: no context tree printed:"; echo "$out"; exit 1; } ;;
  esac
}

pc=$(find "$prefix" -name memkit.pc | head -n 1)
test -n "$pc" || { echo "no memkit.pc installed"; exit 1; }
if command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG_PATH=$(dirname "$pc")
  cflags=$(echo $(pkg-config --cflags memkit)) # (trailing blanks dropped)
  case "$cflags" in
    *..*) echo "FAIL memkit.pc: include path not clean: $cflags"; exit 1 ;;
  esac
  [ "$cflags" = "-I$prefix/include" ] ||
    { echo "FAIL memkit.pc: --cflags '$cflags', expected -I$prefix/include"; exit 1; }
  libdir=$(pkg-config --variable=libdir memkit)
  # Without an rpath the program does not find libmemkit.so.0 in a
  # non-system prefix: the README says so; make sure that is still true
  # (else the README's advice is stale) and that the advice works.
  cc "$src/examples/quickstart.c" $(pkg-config --cflags --libs memkit) -o "$tmp/no_rpath"
  if (unset LD_LIBRARY_PATH; "$tmp/no_rpath") >/dev/null 2>&1; then
    echo "FAIL: a pkg-config build without rpath ran: update the README's install section"; exit 1
  fi
  LD_LIBRARY_PATH=$libdir "$tmp/no_rpath" >/dev/null
  for f in $examples; do
    n=$(basename "$f" .c)
    cc -std=c11 -Wall -Wextra -Werror "$f" $(pkg-config --cflags --libs memkit) \
      -Wl,-rpath,"$libdir" -o "$tmp/pc_$n"
    run "pc_$n" "$tmp/pc_$n"
    [ "$n" = big_buffers ] && continue # it judges the release library's RSS
    cc -std=c11 "$f" $(pkg-config --cflags --libs memkit-check) \
      -Wl,-rpath,"$libdir" -o "$tmp/pc_check_$n"
    run "pc_check_$n" "$tmp/pc_check_$n"
  done
  # memkit-check.pc links the checking build
  printf '#include <memkit.h>\nint main(void) { return mk_checking() ? 0 : 1; }\n' \
    >"$tmp/is_check.c"
  cc "$tmp/is_check.c" $(pkg-config --cflags --libs memkit-check) \
    -Wl,-rpath,"$libdir" -o "$tmp/pc_is_check"
  "$tmp/pc_is_check" ||
    { echo "FAIL memkit-check.pc: the program is not linked with the checking build"; exit 1; }
  if [ $have_cxx = 1 ]; then
    "$cxx" -std=c++17 -Wall -Wextra -Werror "$src/tests/api/header.cc" \
      $(pkg-config --cflags --libs memkit) -Wl,-rpath,"$libdir" -o "$tmp/pc_cxx"
    run pc_cxx "$tmp/pc_cxx"
  fi
  cc "$src/tests/install/uses_malloc.c" $(pkg-config --cflags --libs memkit-malloc) \
    -Wl,-rpath,"$libdir" -o "$tmp/um_pc"
  "$tmp/um_pc"
  cc "$src/tests/install/strdup_only.c" -Wl,--as-needed $(pkg-config --libs memkit-malloc) \
    -Wl,-rpath,"$libdir" -o "$tmp/so_pc"
  "$tmp/so_pc" >/dev/null
  echo "pkg-config consumers (README example, examples/, C++ header, memkit-check, memkit-malloc, strdup only): ok"
  unset PKG_CONFIG_PATH
else
  echo "pkg-config not installed: that half is skipped"
fi

mkdir "$tmp/consumer"
{
  echo 'cmake_minimum_required(VERSION 3.20)'
  if [ $have_cxx = 1 ]; then echo 'project(consumer C CXX)'; else echo 'project(consumer C)'; fi
  echo 'find_package(memkit 0.2 REQUIRED)'
  for f in $examples; do
    n=$(basename "$f" .c)
    echo "add_executable(${n}_shared \"$f\")"
    echo "target_link_libraries(${n}_shared PRIVATE memkit::memkit)"
    echo "add_executable(${n}_static \"$f\")"
    echo "target_link_libraries(${n}_static PRIVATE memkit::memkit_static)"
    echo "add_executable(${n}_check \"$f\")"
    echo "target_link_libraries(${n}_check PRIVATE memkit::memkit-check_static)"
  done
  if [ $have_cxx = 1 ]; then
    echo "add_executable(cxx_header \"$src/tests/api/header.cc\")"
    echo 'target_link_libraries(cxx_header PRIVATE memkit::memkit)'
  fi
  for t in memkit-malloc memkit-malloc_static malloc malloc_static; do
    echo "add_executable(um_$t \"$src/tests/install/uses_malloc.c\")"
    echo "target_link_libraries(um_$t PRIVATE memkit::$t)"
    echo "add_executable(so_$t \"$src/tests/install/strdup_only.c\")"
    echo "target_link_options(so_$t PRIVATE -Wl,--as-needed)"
    echo "target_link_libraries(so_$t PRIVATE memkit::$t)"
  done
} >"$tmp/consumer/CMakeLists.txt"
cmake -S "$tmp/consumer" -B "$tmp/consumer/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/consumer/b" -j2 >/dev/null
for f in $examples; do
  n=$(basename "$f" .c)
  for v in shared static check; do
    [ "$n.$v" = big_buffers.check ] && continue # (built, not run: as above)
    run "cmake_${n}_$v" "$tmp/consumer/b/${n}_$v"
  done
done
[ $have_cxx = 1 ] && run cmake_cxx "$tmp/consumer/b/cxx_header"
for t in memkit-malloc memkit-malloc_static malloc malloc_static; do
  "$tmp/consumer/b/um_$t"
  "$tmp/consumer/b/so_$t" >/dev/null
done
echo "find_package consumers (README example, examples/, C++ header; memkit, _static, memkit-check_static, memkit-malloc and its old names, strdup only): ok"

# memkit-run, installed in bin/, preloads the libmemkit-malloc installed
# beside it (found from its own path, so a moved prefix works too).
run="$tmp/prefix/bin/memkit-run"
test -x "$run" || { echo "no bin/memkit-run installed"; exit 1; }
# the manual pages, installed where man finds them, each naming its subject
for page in man1/memkit-run.1 man3/memkit.3 man3/memkit-malloc.3; do
    f=$(find "$tmp/prefix" -path "*/man/$page" | head -n 1)
    test -n "$f" || { echo "no $page installed"; exit 1; }
    grep -q '^\.TH MEMKIT' "$f" || { echo "$page has no .TH line"; exit 1; }
done
grep -q 'MEMKIT_PURGE_DELAY_MS' "$(find "$tmp/prefix" -name memkit-malloc.3)" ||
    { echo "memkit-malloc(3) does not list the environment"; exit 1; }
grep -q 'mk_ctx_new' "$(find "$tmp/prefix" -name memkit.3)" ||
    { echo "memkit(3) does not list the API"; exit 1; }
# the documentation, as in the sources (the README's links to docs/ hold)
for doc in README.md LICENSE CHANGELOG.md docs/DESIGN.md docs/OPTIONS.md; do
    test -f "$tmp/prefix/share/doc/memkit/$doc" ||
        { echo "no share/doc/memkit/$doc installed"; exit 1; }
done
cc -D_GNU_SOURCE -fno-builtin "$src/tests/run/subject.c" -o "$tmp/subject" -ldl
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
