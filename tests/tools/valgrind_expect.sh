#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/valgrind_expect.sh - run a program under Valgrind's Memcheck and
# judge Memcheck's verdict (used by tests/CMakeLists.txt).
#
#   valgrind_expect.sh VALGRIND STATUS REGEX "OPTIONS" PROGRAM ARGS...
#
# Runs `VALGRIND --error-exitcode=99 OPTIONS PROGRAM ARGS...`; the test
# passes when the exit status is STATUS (99: Memcheck found errors; 0: it
# found none) and, unless REGEX is "-", the report matches the extended
# regular expression REGEX.  When STATUS is 0 the report must not mention
# an invalid access either.  The whole report is printed on failure.
set -u
vg=$1 want=$2 regex=$3 opts=$4
shift 4
log=$(mktemp "${TMPDIR:-/tmp}/memkit-vg.XXXXXX") || exit 2
# shellcheck disable=SC2086  # OPTIONS is a list of words
"$vg" --error-exitcode=99 $opts "$@" >"$log" 2>&1
got=$?
fail=""
if [ "$got" != "$want" ]; then
  fail="exit status $got, expected $want"
elif [ "$regex" != "-" ] && ! grep -Eq "$regex" "$log"; then
  fail="the report does not match /$regex/"
elif [ "$want" = 0 ] && grep -Eq "Invalid (read|write)" "$log"; then
  fail="an invalid access was reported"
fi
if [ -n "$fail" ]; then
  echo "FAILED: $fail"
  echo "---- $vg --error-exitcode=99 $opts $* ----"
  cat "$log"
  rm -f "$log"
  exit 1
fi
pat="ERROR SUMMARY|definitely lost|possibly lost"
[ "$regex" != "-" ] && pat="$regex|$pat"
grep -E "$pat" "$log" | head -n 8
rm -f "$log"
echo "ok: $vg $opts $* -> status $got"
exit 0
