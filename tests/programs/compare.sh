#!/bin/sh
# SPDX-License-Identifier: MIT
# compare.sh - run one real program twice, on the system allocator and on
# libmemkit-malloc (LD_PRELOAD), and require the same stdout, the same stderr
# (unless --no-stderr) and the same exit status (--status, default 0).
#
# A comparison that passes because the preload silently failed must be
# impossible (ld.so only warns, then runs on glibc, when a preload cannot be
# loaded).  So both runs go with LD_DEBUG=bindings, the dynamic loader's log
# of every symbol binding, written per process to files (LD_DEBUG_OUTPUT),
# never to the program's stdout or stderr.  The memkit run passes only if
# every process bound `malloc' and `free' (and each --symbol) to the library
# and to nothing else (the C library's own references included); the
# system run only if every process bound them, none to the library.  Both
# runs carry the same environment otherwise.
#
# usage: compare.sh [options] LIB [--] COMMAND [ARG...]
#   --need PROG         skip (exit 77) unless PROG is installed
#   --need-perl-module M  skip (exit 77) unless perl can load module M
#   --need-cmd CMD      skip (exit 77) unless the shell command CMD succeeds
#   --no-stderr         stderr is not deterministic: do not compare it
#   --status N          the exit status both runs must have (default 0)
#   --symbol SYM        also require SYM (say _Znwm, operator new) bound to
#                       LIB in every process of the memkit run
# exit: 0 same, 1 different (or a run failed), 2 preload not proven,
#       3 usage, 77 skipped.  The work directory (./compare.XXXXXX, in the
# current directory) is kept when the verdict is not 0.

me=compare.sh
no_stderr=0
want_status=0
symbols="malloc free"
while [ $# -gt 0 ]; do
    case $1 in
    --need)
        if ! command -v "$2" >/dev/null 2>&1; then
            echo "SKIP: $2 is not installed (command -v $2 finds nothing)"
            exit 77
        fi
        shift 2 ;;
    --need-perl-module)
        if ! command -v perl >/dev/null 2>&1; then
            echo "SKIP: perl is not installed"
            exit 77
        fi
        if ! perl -M"$2" -e 1 >/dev/null 2>&1; then
            echo "SKIP: perl module $2 is not installed"
            exit 77
        fi
        shift 2 ;;
    --need-cmd)
        if ! sh -c "$2" >/dev/null 2>&1; then
            echo "SKIP: this needs what \`$2' checks for, and it failed"
            exit 77
        fi
        shift 2 ;;
    --no-stderr) no_stderr=1; shift ;;
    --status) want_status=$2; shift 2 ;;
    --symbol) symbols="$symbols $2"; shift 2 ;;
    -*) echo "$me: unknown option $1" >&2; exit 3 ;;
    *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: $me [options] LIB [--] COMMAND [ARG...]" >&2; exit 3; }
lib=$1
shift
[ "$1" = "--" ] && shift
[ -f "$lib" ] || echo "$me: warning: $lib is not a file" >&2

work=$(mktemp -d "./compare.XXXXXX") || exit 3
work=$(cd "$work" && pwd)
mkdir "$work/ld-system" "$work/ld-memkit"

# run_one NAME PRELOAD COMMAND...: one run; its stdout, stderr, status and
# time in $work/NAME.*, its binding log in $work/ld-NAME/
run_one() {
    name=$1 preload=$2
    shift 2
    t0=$(date +%s.%N)
    (
        if [ -n "$preload" ]; then
            LD_PRELOAD=$preload
            export LD_PRELOAD
        else
            unset LD_PRELOAD
        fi
        LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld-$name/log"
        export LD_DEBUG LD_DEBUG_OUTPUT
        exec "$@"
    ) >"$work/$name.out" 2>"$work/$name.err" </dev/null
    status=$?
    t1=$(date +%s.%N)
    echo "$status" >"$work/$name.status"
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' >"$work/$name.time"
}

describe_status() {
    if [ "$1" -gt 128 ]; then
        sig=$(($1 - 128))
        echo "$1 (killed by signal $sig$(kill -l "$sig" 2>/dev/null | sed 's/^/, SIG/'))"
    else
        echo "$1"
    fi
}

echo "command: $*"
run_one system "" "$@"
run_one memkit "$lib" "$@"
s_sys=$(cat "$work/system.status")
s_mk=$(cat "$work/memkit.status")
echo "system allocator: exit $(describe_status "$s_sys"), $(cat "$work/system.time") s;" \
     "memkit: exit $(describe_status "$s_mk"), $(cat "$work/memkit.time") s"

verdict=0
fail() {
    echo "FAIL: $*"
    [ "$verdict" -eq 0 ] && verdict=1
}

# ---- did the preload take?  ld.so's binding log, process by process ------
# A line reads: "  PID:  binding file /lib/.../libc.so.6 [0] to LIB [0]:
# normal symbol `malloc' [GLIBC_2.2.5]".
pairs() { # LOGFILE SYMBOL: "FROM -> TO" for each binding of SYMBOL
    sed -n "s/.*binding file \\(.*\\) \\[[0-9]*\\] to \\(.*\\) \\[[0-9]*\\]: normal symbol \`$2'.*/\\1 -> \\2/p" "$1" |
        sort -u
}
# The objects SYMBOL was bound to in LOGFILE, one a line.  A non-PIE
# program that takes the address of free (cc1 does) defines free itself, as
# a PLT entry whose own binding goes to the real definition: such an object
# is reported as what its own reference was bound to.
bound_to() { # LOGFILE SYMBOL
    p=$(pairs "$1" "$2")
    [ -n "$p" ] || return 0
    echo "$p" | sed 's/.* -> //' | sort -u | while IFS= read -r t; do
        if [ "$t" != "$lib" ] && echo "$p" | grep -qxF -- "$t -> $lib"; then
            echo "$lib"
        else
            echo "$t"
        fi
    done | sort -u
}
preload_ok=1
# check_run NAME: every process of run NAME bound each of $symbols, to $lib
# alone (memkit) or never to it (system)
check_run() {
    run=$1
    set -- "$work/ld-$run"/log.*
    if [ ! -f "$1" ]; then
        echo "PRELOAD NOT PROVEN: the dynamic loader wrote no binding log" \
             "(LD_DEBUG unsupported, or a static program?)"
        preload_ok=0
        return
    fi
    for f in "$@"; do
        pid=${f##*.}
        for sym in $symbols; do
            targets=$(bound_to "$f" "$sym")
            if [ -z "$targets" ]; then
                echo "PRELOAD NOT PROVEN: process $pid of the $run run bound no \`$sym'"
                preload_ok=0
            elif [ "$run" = memkit ] && [ "$targets" != "$lib" ]; then
                echo "PRELOAD NOT PROVEN: process $pid bound \`$sym' to:" $targets
                preload_ok=0
            elif [ "$run" = system ] && echo "$targets" | grep -qxF -- "$lib"; then
                echo "CONTROL RUN NOT ON THE SYSTEM ALLOCATOR: process $pid bound \`$sym' to $lib"
                preload_ok=0
            fi
        done
    done
}
check_run memkit
check_run system
[ "$preload_ok" -eq 1 ] &&
    echo "preload: each process bound" $symbols "to $lib" \
         "($(ls "$work"/ld-memkit | wc -l) on memkit, $(ls "$work"/ld-system | wc -l) on the system allocator)"

# ---- the same behaviour? ----------------------------------------------------
if [ "$s_sys" != "$want_status" ]; then
    fail "the system allocator's run exited $(describe_status "$s_sys"), expected $want_status" \
         "(the test itself is wrong?)"
fi
if [ "$s_mk" != "$s_sys" ]; then
    fail "exit status differs: system $(describe_status "$s_sys"), memkit $(describe_status "$s_mk")"
fi
if ! cmp -s "$work/system.out" "$work/memkit.out"; then
    fail "stdout differs ($(wc -c <"$work/system.out") vs $(wc -c <"$work/memkit.out") bytes); first differences:"
    diff "$work/system.out" "$work/memkit.out" | head -20
fi
if [ "$no_stderr" -eq 0 ] && ! cmp -s "$work/system.err" "$work/memkit.err"; then
    fail "stderr differs; first differences:"
    diff "$work/system.err" "$work/memkit.err" | head -20
elif [ "$no_stderr" -eq 1 ] && [ -s "$work/memkit.err" ]; then
    echo "memkit run's stderr (not compared), first lines:"
    head -5 "$work/memkit.err"
fi
echo "stdout ($(wc -c <"$work/system.out") bytes), first lines:"
head -3 "$work/system.out"

if [ "$preload_ok" -eq 0 ]; then
    verdict=2
fi
case $verdict in
0) echo "PASS: same output and exit status on memkit and on the system allocator"
   rm -rf "$work" ;;
1) echo "VERDICT: DIFFERENT on memkit (outputs kept in $work)" ;;
2) echo "VERDICT: PRELOAD NOT PROVEN, the comparison means nothing (logs kept in $work)" ;;
esac
exit $verdict
