#!/bin/sh
# SPDX-License-Identifier: MIT
# preload_maps.sh - the preload takes: a program started with
# LD_PRELOAD=<libmemkit-malloc> has the library mapped (it reads its own
# /proc/self/maps), and the same program without it does not (so the check
# can fail).  compare.sh proves more (malloc bound to it, from ld.so's
# log); this is the plain evidence from the kernel.
#
# usage: preload_maps.sh MALLOC_LIB
[ $# -eq 1 ] || { echo "usage: preload_maps.sh MALLOC_LIB" >&2; exit 2; }
lib=$1
name=$(basename "$lib")
name=${name%%.so*} # libmemkit-malloc
if [ ! -r /proc/self/maps ]; then
    echo "FAIL: /proc/self/maps is not readable (no /proc?)"
    exit 1
fi
with=$(LD_PRELOAD=$lib grep -c -- "/$name\.so" /proc/self/maps)
without=$(env -u LD_PRELOAD grep -c -- "/$name\.so" /proc/self/maps)
echo "mappings of $name in grep's own /proc/self/maps:" \
     "with LD_PRELOAD $with, without $without"
if [ "$with" -lt 1 ]; then
    echo "FAIL: LD_PRELOAD=$lib did not map the library"
    exit 1
fi
if [ "$without" -ne 0 ]; then
    echo "FAIL: the library is mapped even without LD_PRELOAD (in the environment already?)"
    exit 1
fi
# the library's code, not only its file: an executable mapping
if ! LD_PRELOAD=$lib grep -- "/$name\.so" /proc/self/maps | grep -q ' r-xp '; then
    echo "FAIL: no executable mapping of $name"
    exit 1
fi
echo "PASS: $name is mapped under LD_PRELOAD"
