#!/bin/sh
# SPDX-License-Identifier: MIT
# api/header.sh CC CXX INCLUDE_DIR LIBRARY SOURCE_DIR - memkit.h compiles
# cleanly as C and as C++ and behaves as documented where the compiler sees
# it.  CXX may be "-" (no C++ compiler: that half is skipped, and said).
#  - api/header.cc (every macro and inline function of the header) built
#    as C++11, C++17 and C++20 under -Wall -Wextra -Wpedantic
#    -Wold-style-cast -Werror, linked with LIBRARY (libmemkit), and run;
#  - C11 under -Wall -Wextra -Wpedantic -Werror: MK_POOL_DECLARE, and a
#    deliberate (void)mk_strdup / (void)mk_alloc / (void)mk_pool_alloc,
#    which must compile quietly (-Wunused-result is an error here);
#  - ignoring mk_realloc's result must not compile under
#    -Werror=unused-result (the chunk may have moved: always a bug);
#  - a file that uses MK_POOL_DECLARE and calls one of its functions
#    compiles under -Wall -Wextra -Werror with CC and with clang where it
#    is installed (clang warns about every unused static inline function
#    a file defines, unless it is marked unused).
set -eu
cc=$1 cxx=$2 inc=$3 lib=$4 src=$5
libdir=$(dirname "$lib")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

if [ "$cxx" != "-" ]; then
  for std in c++11 c++17 c++20; do
    "$cxx" -std=$std -Wall -Wextra -Wpedantic -Wold-style-cast -Werror \
      -I"$inc" "$src/tests/api/header.cc" -L"$libdir" -lmemkit \
      -Wl,-rpath,"$libdir" -o "$tmp/header_$std" ||
      fail "memkit.h does not compile cleanly as $std"
    "$tmp/header_$std" || fail "header.cc built as $std failed"
    echo "C++ ($std): ok"
  done
else
  echo "no C++ compiler: the C++ half is skipped"
fi

cat >"$tmp/discard.c" <<'C'
#include <memkit.h>
typedef struct { double x, y, z; } vec3;
MK_POOL_DECLARE(vec3, vec3)
int main(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "c", MK_GENERAL, NULL);
    (void)mk_strdup(c, "kept by the context until its reset");
    (void)mk_alloc(c, 10);
    mk_pool *p = mk_pool_new("p", 16, 0, 0);
    (void)mk_pool_alloc(p);
    vec3_pool *vp = vec3_pool_new("vec3", 0);
    vec3 *v = vec3_alloc(vp);
    vec3_free(vp, v);
    vec3_pool_delete(vp);
    mk_silence_errors(1); /* (the pool's leak report) */
    mk_pool_delete(p);
    mk_ctx_delete(c);
    return 0;
}
C
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -Werror=unused-result \
  -I"$inc" "$tmp/discard.c" -L"$libdir" -lmemkit -Wl,-rpath,"$libdir" \
  -o "$tmp/discard" 2>"$tmp/discard.err" || {
  cat "$tmp/discard.err"; fail "a deliberate (void) discard or MK_POOL_DECLARE warns in C11"; }
"$tmp/discard" || fail "discard.c failed"
echo "C11, (void) discards and MK_POOL_DECLARE: ok"

cat >"$tmp/one_used.c" <<'C'
#include <memkit.h>
typedef struct { int a, b; } pair;
MK_POOL_DECLARE(pair, pair)
int main(void)
{
    pair_pool *pp = pair_pool_new("pairs", 0);
    return pp == NULL;
}
C
for c in "$cc" clang; do
  command -v "$c" >/dev/null 2>&1 || { echo "$c: not installed, skipped"; continue; }
  "$c" -std=c11 -Wall -Wextra -Werror -I"$inc" -c "$tmp/one_used.c" \
    -o "$tmp/one_used.o" 2>"$tmp/one_used.err" || {
    cat "$tmp/one_used.err"; fail "$c warns about MK_POOL_DECLARE's unused functions"; }
done
echo "MK_POOL_DECLARE with one function used, -Wall -Werror: ok"

cat >"$tmp/ignored.c" <<'C'
#include <memkit.h>
void grow(char *p);
void grow(char *p) { mk_realloc(p, 100); }
C
if "$cc" -std=c11 -Werror=unused-result -I"$inc" -c "$tmp/ignored.c" \
     -o "$tmp/ignored.o" 2>"$tmp/ignored.err"; then
  fail "ignoring mk_realloc's result compiles without a warning"
fi
grep -q "unused-result" "$tmp/ignored.err" ||
  { cat "$tmp/ignored.err"; fail "ignored.c failed for another reason"; }
echo "ignoring mk_realloc's result: refused under -Werror=unused-result: ok"
