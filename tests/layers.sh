#!/bin/sh
# The layering of src/ (docs/ARCHITECTURE.md "Layers"): a file includes headers of its own layer
# and the layers below it only.  Layers from the bottom: src/core, src/backend (with cpu/ and
# cl/), src/nn, src/data, src/eval, src/train, src/cli.  A header this script cannot find in
# those folders (config.h, the generated cl_kernels.h, system headers) is not checked.
# Prints each include that reaches up and exits 1 when there is one.
top=${srcdir:-.}
[ -d "$top/src/core" ] || top=$(dirname "$0")/..
layers="core backend nn data eval train export cli"

rank() { # rank of a folder (src/NAME, cpu or cl); empty when it is not a layer
    case $1 in cpu | cl) set -- backend ;; esac
    r=0
    for l in $layers; do
        [ "$l" = "$1" ] && { echo $r; return; }
        r=$((r + 1))
    done
}

# header name -> its folder's layer
map=$(for f in "$top"/src/*/*.h "$top"/cpu/*.h "$top"/cl/*.h; do
    d=${f%/*}
    echo "${f##*/} ${d##*/}"
done)

bad=0
for f in "$top"/src/*/*.[ch] "$top"/cpu/*.[ch] "$top"/cl/*.[ch]; do
    d=${f%/*}
    own=$(rank "${d##*/}")
    [ -n "$own" ] || { echo "layers.sh: ${f#"$top"/} is in no layer" >&2; bad=1; continue; }
    for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
        layer=$(echo "$map" | awk -v h="$h" '$1 == h { print $2; exit }')
        [ -n "$layer" ] || continue
        r=$(rank "$layer")
        if [ "$r" -gt "$own" ]; then
            echo "layers.sh: ${f#"$top"/} (${d##*/}) includes $h of the higher layer $layer" >&2
            bad=1
        fi
    done
done
[ $bad = 0 ] && echo "layers.sh: every include stays within its layer or goes down"
exit $bad
