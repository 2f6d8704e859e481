#!/bin/sh
# SPDX-License-Identifier: MIT
# link_order.sh CC BUILD_DIR SOURCE_DIR - a program that uses the memkit
# API and malloc (link_order.c), built as a user would with both libraries
# in each order, and with the checking library beside the drop-in.  Each
# build must either run on one engine (it prints "one engine", status 0)
# or stop at load with memkit's message (status 127, "two copies of
# memkit" and what to link instead): never abort far from the cause, never
# run on two engines.  The order that binds both APIs to libmemkit-malloc
# (-lmemkit-malloc first) must work; -lmemkit -lmemkit-malloc must be
# refused (a quiet success there would mean two engines went unnoticed).
set -u
cc=$1
build=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# try NAME EXPECT LIBS...: EXPECT is works, refused
try() {
  name=$1 expect=$2
  shift 2
  if ! "$cc" -I"$src/include" "$src/tests/override/link_order.c" -o "$tmp/$name" \
       -L"$build" "$@" -Wl,-rpath,"$build"; then
    echo "FAIL $name: does not build with $*"
    fail=1
    return
  fi
  status=0
  "$tmp/$name" >"$tmp/$name.out" 2>"$tmp/$name.err" || status=$?
  if [ "$status" = 0 ] && grep -qx "one engine" "$tmp/$name.out"; then
    got=works
  elif [ "$status" = 127 ] && grep -q "^memkit: two copies of memkit in one process" "$tmp/$name.err" &&
       grep -q "link libmemkit-malloc alone" "$tmp/$name.err"; then
    got=refused
  else
    got="broken (status $status)"
  fi
  if [ "$got" != "$expect" ]; then
    echo "FAIL $name ($*): expected it $expect, it $got; stdout, stderr:"
    cat "$tmp/$name.out" "$tmp/$name.err"
    fail=1
  else
    echo "ok   $name ($*): $got"
  fi
}

try malloc_first works -lmemkit-malloc -lmemkit
try memkit_first refused -lmemkit -lmemkit-malloc
try check_first refused -lmemkit-check -lmemkit-malloc
try malloc_alone works -lmemkit-malloc
# -Wl,--no-as-needed: the refused pair refused whether or not the
# toolchain drops unneeded libraries by default.
try memkit_first_no_as_needed refused -Wl,--no-as-needed -lmemkit -lmemkit-malloc

# LD_PRELOAD puts libmemkit-malloc first in the search order, so a program
# linked with libmemkit alone runs on the preloaded engine: one engine.
"$cc" -I"$src/include" "$src/tests/override/link_order.c" -o "$tmp/preload" \
  -L"$build" -lmemkit -Wl,-rpath,"$build"
status=0
LD_PRELOAD="$build/libmemkit-malloc.so" "$tmp/preload" >"$tmp/preload.out" 2>&1 || status=$?
if [ "$status" = 0 ] && grep -qx "one engine" "$tmp/preload.out"; then
  echo "ok   preload (-lmemkit, LD_PRELOAD=libmemkit-malloc.so): works"
else
  echo "FAIL preload (-lmemkit, LD_PRELOAD=libmemkit-malloc.so): status $status:"
  cat "$tmp/preload.out"
  fail=1
fi
exit $fail
