#!/bin/sh
# SPDX-License-Identifier: MIT
# layers.sh - fail when a file of src/ includes a header of a layer above
# its own: code calls its own layer or a lower one (docs/DESIGN.md,
# "Layers"), and an upward need goes through the hook table its layer's
# header declares, bound in src/bind.c.  Run by the build (a failure stops
# `make`) and by ctest.  Trade-off: it reads #include lines, not calls; a
# call needs its declaration, so an upward call cannot hide from it unless
# someone declares a function by hand, which review catches.
#
# Usage: layers.sh SRC_DIR
set -eu
src=${1:?usage: layers.sh SRC_DIR}
cd "$src"

# The layers, lowest first: a path prefix per layer.  top (bind.c and the
# umbrella internal.h, for tests) may include anything.
rank() {
    case $1 in
    base/*) echo 0 ;;
    os/*) echo 1 ;;
    page/*) echo 2 ;;
    ctx/*) echo 3 ;;
    check/* | prof/*) echo 4 ;; # (two layers side by side: neither uses the other)
    heap/*) echo 5 ;;
    pool/*) echo 6 ;;
    stats.h | stats.c) echo 7 ;;
    override/*) echo 8 ;;
    bind.c | internal.h) echo 9 ;; # (internal.h: included by no file of src/)
    *) echo "layers.sh: $1 is in no layer (add it to the list)" >&2; echo 99 ;;
    esac
}

bad=0
files=$(find . -name '*.[ch]' | sed 's|^\./||' | sort)
for f in $files; do
    r=$(rank "$f")
    [ "$r" = 99 ] && bad=1 && continue
    dir=$(dirname "$f")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case $inc in memkit.h) continue ;; esac
        case $inc in */internal.h | internal.h)
            echo "layers.sh: $f includes internal.h, the tests' umbrella" >&2
            bad=1
            continue ;;
        esac
        # resolve the path the compiler would: next to the file, else src/
        if [ -f "$dir/$inc" ]; then
            t=$(realpath -m --relative-to=. "$dir/$inc")
        else
            t=$(realpath -m --relative-to=. "$inc")
        fi
        tr=$(rank "$t")
        if [ "$tr" -gt "$r" ]; then
            echo "layers.sh: $f includes $t, a header of a higher layer" >&2
            bad=1
        fi
    done
done
if [ "$bad" != 0 ]; then
    echo "layers.sh: an upward need goes through its layer's *_up table (src/bind.c)" >&2
    exit 1
fi
echo "layers.sh: $(echo "$files" | wc -l) files, every include points down"
