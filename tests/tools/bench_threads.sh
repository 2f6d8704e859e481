#!/bin/sh
# bench_threads.sh - memkit-bench's --threads option: W6 runs at the counts
# given and at no other (3 threads: not in the default list of 1, 2, 4),
# and a malformed list is refused with exit status 2 and a message.  A
# cheap run (one run per cell, memkit against glibc): it checks the option,
# not the figures.
# Usage: bench_threads.sh path/to/memkit-bench
set -u
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
if ! "$bench" --only W6 --threads 3 --runs 1 --alloc memkit --csv "$tmp" >"$tmp/out" 2>&1; then
    echo "FAIL: memkit-bench --threads 3 exited non-zero"
    tail -20 "$tmp/out"
    fail=1
fi
grep -q '"3 threads"' "$tmp/w6.csv" 2>/dev/null || { echo "FAIL: no 3-thread cell in w6.csv"; fail=1; }
if grep -q '"1 thread"\|"2 threads"\|"4 threads"' "$tmp/w6.csv" 2>/dev/null; then
    echo "FAIL: w6.csv has a cell of the default list"
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
