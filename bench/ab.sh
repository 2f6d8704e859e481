#!/bin/sh
# SPDX-License-Identifier: MIT
# ab.sh - two builds of libmemkit-malloc side by side on W2M and W1M (and,
# with AB_SECURE=1, each build in MEMKIT_SECURE=1 too): the figure a change
# to the drop-in's fast paths is judged by ("at most 3% against the commit
# before").  Runs alternate A B, B A, A B... within each cell, so that noise
# on a shared machine falls on both; every figure is the median of RUNS.
#
#   bench/ab.sh OLD/libmemkit-malloc.so NEW/libmemkit-malloc.so [RUNS] [CELLS]
#
# CELLS: w2m (the four W2M cells), w1m (W1M's quick grid, 8 B..1 KiB x
# 1 KiB..64 MiB), or both (the default).  Output: one line per cell, the
# median ns per operation of A and of B and the median of the runs' B/A
# ratios (each pair run back to back; < 1: B faster), then the geometric
# mean of those per workload.  Needs build/bench/memkit-bench-malloc (make).
set -eu
a=$1
b=$2
runs=${3:-5}
cells=${4:-both}
here=$(cd "$(dirname "$0")/.." && pwd)
prog=${MEMKIT_BENCH_MALLOC_PROG:-$here/build/bench/memkit-bench-malloc}
[ -x "$prog" ] || { echo "ab.sh: $prog is missing (run make)" >&2; exit 1; }

# one figure: ns per operation of one run of workload "$@" under library $lib
one() {
  lib=$1
  shift
  LD_PRELOAD=$lib $AB_ENV "$prog" "$@" | sed -n 's/^ns=\([0-9]*\) ops=\([0-9]*\).*/\1 \2/p' |
    awk '{ printf "%.3f\n", $1 / $2 }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

cell() {
  name=$1
  shift
  : > /tmp/ab.$$.a
  : > /tmp/ab.$$.b
  i=0
  while [ $i -lt "$runs" ]; do
    if [ $((i % 2)) -eq 0 ]; then # ABBA: neither build always goes first
      one "$a" "$@" >> /tmp/ab.$$.a
      one "$b" "$@" >> /tmp/ab.$$.b
    else
      one "$b" "$@" >> /tmp/ab.$$.b
      one "$a" "$@" >> /tmp/ab.$$.a
    fi
    i=$((i + 1))
  done
  ma=$(median < /tmp/ab.$$.a)
  mb=$(median < /tmp/ab.$$.b)
  # the ratio of each pair (run back to back: drift on a shared machine
  # falls on both), and their median
  mr=$(paste /tmp/ab.$$.a /tmp/ab.$$.b | awk '{ print $2 / $1 }' | median)
  awk -v n="$name" -v a="$ma" -v b="$mb" -v r="$mr" 'BEGIN { printf "%-26s %9.2f %9.2f %7.3f\n", n, a, b, r }'
}

AB_ENV=${AB_ENV:-env}
printf '%-26s %9s %9s %7s\n' cell "A ns/op" "B ns/op" "B/A"
run_w2m() {
  for c in "24 0" "48 0" "24 1000" "48 1000"; do
    set -- $c
    cell "W2M ${1}B ring ${2}" w2m size=$1 ring=$2 ops=10000000
  done
}
run_w1m() {
  for live in 1024 16384 262144 4194304 67108864; do
    for size in 8 16 32 64 128 256 512 1024; do
      cell "W1M ${size}B x ${live}" w1m size=$size live=$live ops=2000000
    done
  done
}
{
  case $cells in
  w2m) run_w2m ;;
  w1m) run_w1m ;;
  *) run_w2m; run_w1m ;;
  esac
} | tee /tmp/ab.$$.out
awk '/^W/ { w = $1; r[w] += log($NF); n[w]++ }
     END { for (w in r) printf "geometric mean B/A %s: %.3f (%d cells)\n", w, exp(r[w] / n[w]), n[w] }' /tmp/ab.$$.out
rm -f /tmp/ab.$$.a /tmp/ab.$$.b /tmp/ab.$$.out
