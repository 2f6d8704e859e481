#!/bin/sh
# SPDX-License-Identifier: MIT
# bench_threads.sh - memkit-bench's --threads option: W6 runs at the counts
# given and at no other (2 and 6 threads; the default list is 1, 2, 4);
# the claims about 1, 2 and 4 threads judge only the cells they are about
# (the 2-thread ones, 3 patterns); and a malformed list is refused with
# exit status 2 and a message.  A cheap run (one run per cell, memkit
# against glibc): it checks the option, not the figures.
# Usage: bench_threads.sh path/to/memkit-bench
set -u
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
if ! "$bench" --only W6 --threads 2,6 --runs 1 --alloc memkit --csv "$tmp" >"$tmp/out" 2>&1; then
    echo "FAIL: memkit-bench --threads 2,6 exited non-zero"
    tail -20 "$tmp/out"
    fail=1
fi
for cell in '"2 threads"' '"6 threads"'; do
    grep -q "$cell" "$tmp/w6.csv" 2>/dev/null || { echo "FAIL: no $cell cell in w6.csv"; fail=1; }
done
if grep -q '"1 thread"\|"4 threads"' "$tmp/w6.csv" 2>/dev/null; then
    echo "FAIL: w6.csv has a cell of the default list that --threads left out"
    fail=1
fi
# the throughput claim "with 1, 2 and 4 threads": 3 cells judged, not 6
claim=$(grep "^\"As malloc, memkit has at least 2x glibc's throughput with 1, 2 and 4" \
    "$tmp/targets.csv" 2>/dev/null)
judged=$(echo "$claim" | awk -F, '{print $(NF-3)}')
if [ "$judged" != 3 ]; then
    echo "FAIL: the W6 throughput claim judged '$judged' cells, not the 3 with 2 threads"
    fail=1
fi
for bad in "" 0 1,x 2,,4 1, 257 1,2,3,4,5,6,7,8,9; do
    "$bench" --threads "$bad" --only W6 >"$tmp/bad" 2>&1
    rc=$?
    if [ $rc -ne 2 ] || ! grep -q "threads wants" "$tmp/bad"; then
        echo "FAIL: --threads '$bad': exit $rc, $(head -1 "$tmp/bad")"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "PASS: --threads"
exit $fail
