#!/bin/sh
# SPDX-License-Identifier: MIT
# selftest.sh - compare.sh must be able to fail: each case runs it on a
# command made to differ (or a preload made to fail) and checks its verdict
# (exit status and message).  Otherwise a "same output" from the programs
# tests could mean nothing.
#
# usage: selftest.sh COMPARE_SH MALLOC_LIB PLAIN_LIB
#   PLAIN_LIB: a library that loads but does not define malloc (libmemkit)
# (absolute paths: the cases run in a directory of their own, removed after)
[ $# -eq 3 ] || { echo "usage: selftest.sh COMPARE_SH MALLOC_LIB PLAIN_LIB" >&2; exit 2; }
compare=$1 lib=$2 plain=$3
failures=0
dir=$(mktemp -d "./selftest.XXXXXX") || exit 2
cd "$dir" || exit 2
log=./compare.log

# case WANT_STATUS WANT_TEXT DESCRIPTION -- compare.sh arguments...
case_() {
    want=$1 text=$2 what=$3
    shift 4
    sh "$compare" "$@" >"$log" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: compare.sh exited $got, expected $want; its output:"
        sed 's/^/    /' "$log"
        failures=$((failures + 1))
    elif [ -n "$text" ] && ! grep -q -- "$text" "$log"; then
        echo "FAIL: $what: no \"$text\" in compare.sh's output:"
        sed 's/^/    /' "$log"
        failures=$((failures + 1))
    else
        echo "ok: $what (exit $got)"
    fi
}

case_ 0 "PASS:" "same output passes" -- \
    "$lib" -- sh -c 'echo out; echo err >&2; exit 0'
case_ 2 "PRELOAD NOT PROVEN" "a library that does not exist" -- \
    /nonexistent/libmemkit-malloc.so -- sh -c 'echo out'
case_ 2 "PRELOAD NOT PROVEN" "a library that loads without malloc" -- \
    "$plain" -- sh -c 'echo out'
case_ 2 "PRELOAD NOT PROVEN" "a symbol the library does not define" -- \
    --symbol strlen "$lib" -- sh -c 'echo out'
case_ 1 "stdout differs" "different stdout" -- \
    "$lib" -- sh -c 'echo "$LD_PRELOAD"'
case_ 1 "stderr differs" "different stderr" -- \
    "$lib" -- sh -c 'echo "$LD_PRELOAD" >&2'
case_ 0 "PASS:" "different stderr, not compared" -- \
    --no-stderr "$lib" -- sh -c 'echo "$LD_PRELOAD" >&2'
case_ 1 "exit status differs" "different exit status" -- \
    "$lib" -- sh -c 'test -z "$LD_PRELOAD"'
case_ 1 "killed by signal 11" "a crash on memkit only" -- \
    "$lib" -- sh -c 'test -z "$LD_PRELOAD" || kill -SEGV $$'
case_ 1 "expected 0" "the same failure both ways" -- \
    "$lib" -- sh -c 'exit 3'
case_ 0 "PASS:" "the same failure, expected" -- \
    --status 3 "$lib" -- sh -c 'exit 3'
case_ 77 "SKIP: memkit-no-such-program is not installed" "a missing program" -- \
    --need memkit-no-such-program "$lib" -- memkit-no-such-program

cd .. && rm -rf "$dir"
if [ "$failures" -ne 0 ]; then
    echo "FAIL: $failures case(s) of compare.sh's own checks"
    exit 1
fi
echo "PASS: compare.sh fails when it should"
