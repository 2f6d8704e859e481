#!/bin/sh
# SPDX-License-Identifier: MIT
# profile_named.sh - the heap profile names a real program's own allocation
# functions: memkit-run --profile runs PROGRAM (on memkit's drop-in for
# profiling) and the innermost frame of the top stack at the peak must
# match PATTERN (grep -E), a named function of the program, not an
# address.  Debian's binaries have no frame pointers: this is what says the
# unwinder got their stacks right.  Exit 77 (skip) when PROGRAM is missing.
#
# usage: profile_named.sh MEMKIT_RUN PATTERN -- PROGRAM [ARG...]
[ $# -ge 4 ] && [ "$3" = "--" ] || {
    echo "usage: profile_named.sh MEMKIT_RUN PATTERN -- PROGRAM [ARG...]" >&2
    exit 3
}
run=$1 pattern=$2
shift 3
command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 is not installed"; exit 77; }
dir=$(mktemp -d) || exit 3
trap 'rm -rf "$dir"' EXIT
"$run" --profile --out "$dir/prof" -- "$@" >/dev/null 2>"$dir/report" || {
    echo "FAIL: memkit-run --profile $* failed"; cat "$dir/report"; exit 1; }
top=$(sed -n '/top stacks at the peak/{n;p;q}' "$dir/report")
echo "top stack at the peak: $top"
echo "$top" | grep -Eq "$pattern" || {
    echo "FAIL: the top stack's innermost frame does not match $pattern"
    sed -n '/heap profile/,$p' "$dir/report"
    exit 1
}
echo "ok"
