#!/bin/sh
# SPDX-License-Identifier: MIT
# override/valgrind_dropin.sh - the drop-in under Valgrind's Memcheck with
# its own malloc in use (--soname-synonyms=somalloc=nouserintercepts: the
# preloaded library's malloc is not replaced by Memcheck's):
#  - the program runs and Memcheck reports no error;
#  - Memcheck's leak check looks at memkit's chunks: memkit describes them
#    as a mempool, which Memcheck searches only while some malloc block is
#    live, so memkit keeps one, made from an OS page and described as a
#    malloc'ed block.  It used to be a malloc(1) from inside memkit's own
#    set-up, which the drop-in served itself: Memcheck saw no malloc block
#    and said "All heap blocks were freed -- no leaks are possible".
#
#   valgrind_dropin.sh VALGRIND LIBMEMKIT_MALLOC PROGRAM
set -u
vg=$1 lib=$2 prog=$3
log=$(mktemp "${TMPDIR:-/tmp}/memkit-vg.XXXXXX") || exit 2
LD_PRELOAD=$lib "$vg" --error-exitcode=99 --soname-synonyms=somalloc=nouserintercepts \
  --leak-check=full "$prog" >"$log" 2>&1
got=$?
fail=""
if [ "$got" != 0 ]; then
  fail="exit status $got"
elif ! grep -q "^done" "$log"; then
  fail="the program did not finish"
elif grep -q "no leaks are possible" "$log"; then
  fail="Memcheck skipped its leak check (it saw no malloc block)"
elif ! grep -q "in use at exit: [1-9]" "$log"; then
  fail="Memcheck saw no block in use at exit"
fi
if [ -n "$fail" ]; then
  echo "FAILED: $fail"
  cat "$log"
  rm -f "$log"
  exit 1
fi
grep -E "in use at exit|ERROR SUMMARY" "$log"
rm -f "$log"
exit 0
