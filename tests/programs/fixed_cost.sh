#!/bin/sh
# SPDX-License-Identifier: MIT
# fixed_cost.sh - the fixed cost of the drop-in for one program that
# allocates almost nothing: first compare.sh (same output, and proof from
# the dynamic loader that the preload takes), then rss_cost (median paired difference of peak
# RSS on memkit at most LIMIT_KIB above the system allocator's).
#
# usage: fixed_cost.sh COMPARE_SH RSS_COST LIB LIMIT_KIB RUNS COMMAND [ARG...]
[ $# -ge 6 ] || {
    echo "usage: fixed_cost.sh COMPARE_SH RSS_COST LIB LIMIT_KIB RUNS COMMAND [ARG...]" >&2
    exit 3
}
compare=$1 runner=$2 lib=$3 limit=$4 runs=$5
shift 5
sh "$compare" "$lib" -- "$@" || exit $?
echo
exec "$runner" "$lib" "$limit" "$runs" "$@"
