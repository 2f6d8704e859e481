#!/bin/sh
# SPDX-License-Identifier: MIT
# static_data.sh LIB - the drop-in's static data (.data, .bss and the
# rest of its writable sections) is at most 64 KiB: a program pays for it
# with every load, under RLIMIT_DATA, in every collection of a garbage
# collector that scans it as roots, and in mlockall.  Its thread-local
# data (.tdata, .tbss) is printed beside it.  Needs size(1) (binutils).
set -eu
lib=$1
command -v size >/dev/null 2>&1 || { echo "size(1) not installed: skipped"; exit 77; }
size -A "$lib" | awk '
  $1 == ".data" || $1 == ".bss" || $1 == ".data.rel.ro" || $1 == ".got" ||
  $1 == ".got.plt" || $1 == ".init_array" || $1 == ".fini_array" { data += $2 }
  $1 == ".tdata" || $1 == ".tbss" { tls += $2 }
  END {
    printf "static data %d bytes (%.1f KiB), thread-local %d bytes\n", data, data / 1024, tls
    if (data > 65536) { print "FAIL: more than 64 KiB"; exit 1 }
    print "PASS"
  }'
