#!/bin/sh
# SPDX-License-Identifier: MIT
# api/exports.sh - the shared libraries export the public API and nothing
# else: every defined dynamic symbol starts with mk_ (the linker's own
# _init/_fini/_edata/_end/__bss_start are ignored), and every function
# declared MK_API in include/memkit.h is exported.
# Usage: sh exports.sh libmemkit.so [libmemkit-check.so ...]
set -u
here=$(cd "$(dirname "$0")" && pwd)
header="$here/../../include/memkit.h"
command -v nm >/dev/null 2>&1 || { echo "exports.sh: nm not found"; exit 1; }
[ $# -ge 1 ] || { echo "usage: $0 lib.so..."; exit 1; }

# public functions: the identifier before the first "(" of each MK_API
# declaration (a declaration may span lines; the name is on the first)
api=$(sed -n 's/^MK_API[^(]*[ *]\(mk_[a-z_0-9]*\)(.*/\1/p' "$header" | sort -u)
[ -n "$api" ] || { echo "exports.sh: no MK_API function found in $header"; exit 1; }

status=0
for lib in "$@"; do
    if [ ! -f "$lib" ]; then
        echo "FAIL: $lib does not exist"
        status=1
        continue
    fi
    syms=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)
    if [ -z "$syms" ]; then
        echo "FAIL: $lib exports no symbol"
        status=1
        continue
    fi
    bad=$(printf '%s\n' "$syms" | grep -v '^mk_' |
          grep -v -x -e _init -e _fini -e _edata -e _end -e __bss_start || true)
    if [ -n "$bad" ]; then
        echo "FAIL: $lib exports symbols outside the mk_ namespace:"
        printf '  %s\n' $bad
        status=1
    fi
    for f in $api; do
        if ! printf '%s\n' "$syms" | grep -q -x "$f"; then
            echo "FAIL: $lib does not export $f (declared in memkit.h)"
            status=1
        fi
    done
    n=$(printf '%s\n' "$syms" | grep -c '^mk_')
    echo "$lib: $n mk_ symbols exported"
done
[ $status -eq 0 ] && echo "OK: only mk_ symbols exported; all $(printf '%s\n' $api | wc -l) public functions present"
exit $status
