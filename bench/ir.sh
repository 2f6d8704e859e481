#!/bin/sh
# SPDX-License-Identifier: MIT
# ir.sh - instructions per iteration of the fast-path loops, counted by
# callgrind (valgrind --tool=callgrind), with MEMKIT_VALGRIND=0 so that
# memkit runs its release paths under Valgrind: the figures the fast-path
# budgets are stated in (docs/DESIGN.md).  Each figure is the difference of
# two runs (N and 2N iterations) divided by N: set-up and exit cancel out.
#
#   bench/ir.sh [BUILD_DIR]     (default ./build; needs make first)
#
# Lines: malloc24 on glibc, on the drop-in (MEMKIT_SECURE off and 1, and
# with the heap profile on at its default rate), on libmemkit-malloc-prof
# (the drop-in for profiling: its countdown inline; profile off and on), ctx24 (mk_alloc/mk_free on
# a GENERAL context; and profiled), pool24 (mk_pool_alloc,
# three stores, mk_pool_free), pool24-inline (MK_POOL_DECLARE's inline
# functions) and pool24-ts (the same on a MK_POOL_THREADSAFE pool).  The
# loop's own work (three stores, a volatile store, the
# counter) is a handful of instructions of each figure.
set -eu
build=${1:-build}
ir=$build/bench/memkit-bench-ir
lib=$build/libmemkit-malloc.so
plib=$build/libmemkit-malloc-prof.so
command -v valgrind >/dev/null 2>&1 || { echo "ir.sh: valgrind is missing" >&2; exit 1; }
[ -x "$ir" ] || { echo "ir.sh: $ir is missing (run make)" >&2; exit 1; }
n=200000
# the profiled runs write their dumps here, not into the caller's directory
pdir=$(mktemp -d)
trap 'rm -rf "$pdir"' EXIT

count() { # env... -- kernel: the total instructions of one run
  out=$(mktemp)
  env MEMKIT_VALGRIND=0 MEMKIT_PROFILE_PREFIX="$pdir/p.%p" "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$ir" "$kernel" "$iters" 2>"$out" >/dev/null
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out"
  rm -f "$out"
}

per_iter() { # label kernel env...
  label=$1 kernel=$2
  shift 2
  iters=$n
  a=$(count "$@")
  iters=$((2 * n))
  b=$(count "$@")
  awk -v l="$label" -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%-34s %6.1f instructions per iteration\n", l, (b - a) / n }'
}

per_iter "malloc24 on glibc" malloc24
per_iter "malloc24 on the drop-in" malloc24 LD_PRELOAD=$lib
per_iter "malloc24 on the drop-in, SECURE=1" malloc24 LD_PRELOAD=$lib MEMKIT_SECURE=1
per_iter "malloc24 on the drop-in, PROFILE=1" malloc24 LD_PRELOAD=$lib MEMKIT_PROFILE=1
per_iter "malloc24 on -prof, PROFILE off" malloc24 LD_PRELOAD=$plib
per_iter "malloc24 on -prof, PROFILE=1" malloc24 LD_PRELOAD=$plib MEMKIT_PROFILE=1
per_iter "ctx24 (mk_alloc/mk_free)" ctx24
per_iter "ctx24, PROFILE=1" ctx24 MEMKIT_PROFILE=1
per_iter "pool24 (mk_pool_alloc/free)" pool24
per_iter "pool24-inline (MK_POOL_DECLARE)" pool24-inline
per_iter "pool24-ts (MK_POOL_THREADSAFE)" pool24-ts
