#!/bin/sh
# ONNX export checked in ONNX Runtime (tests/onnx_cases.sh's cases, tests/onnx_ort.js): every
# file yolocl exports gives output0 equal to yolocl's own inference of the same images in ONNX
# Runtime's Node binding.  Needs node and the npm package onnxruntime-node (its CPU binaries come
# in the package: `mkdir -p DIR && cd DIR && npm install --ignore-scripts onnxruntime-node`), found
# in $YOLOCL_ORT_DIR/node_modules or on Node's own search path (NODE_PATH); skipped (77) without
# them.  .ci/run installs no Node: there this test's skip is allowed.
set -u
if ! command -v node >/dev/null 2>&1; then
    echo "SKIP: no node (ONNX Runtime's Node binding needs it)"
    exit 77
fi
mod=onnxruntime-node
[ -n "${YOLOCL_ORT_DIR:-}" ] && mod=$YOLOCL_ORT_DIR/node_modules/onnxruntime-node
if ! node -e "require('$mod')" >/dev/null 2>&1; then
    echo "SKIP: onnxruntime-node not found (npm install --ignore-scripts onnxruntime-node in a" \
        "directory DIR, then YOLOCL_ORT_DIR=DIR)"
    exit 77
fi
here=$(dirname "$0")
# shellcheck source=tests/onnx_cases.sh
. "$here/onnx_cases.sh"

check_case() { # NAME MODEL REFDIR NC STRIDE TOL_SCORE TOL_BOX TOL_BOX_REL [nocv]
    # ONNX Runtime warns on stderr about nothing yolocl controls (thread affinity): kept apart
    node "$here/onnx_ort.js" "$2" "$3" "$6" "$7" "$8" 2>"$tmp/ort.err" || {
        cat "$tmp/ort.err"
        return 1
    }
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-onnx-ort.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
run_cases "$tmp" || exit 1
exit $failed
