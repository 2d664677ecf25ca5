#!/bin/sh
# ONNX export checked in Python (tests/onnx_cases.sh's cases, tests/onnx_check.py): every file
# yolocl exports passes onnx.checker (full check, with shape inference) and carries YOLOv5's
# names, types and metadata; OpenCV DNN (cv2.dnn.readNetFromONNX) gives output0 equal to yolocl's
# own inference of the same images.  Needs a Python 3 with numpy, onnx and cv2 (Debian:
# python3-onnx python3-opencv): $YOLOCL_PYTHON, else /usr/bin/python3, else python3 in PATH;
# skipped (77) without one.
set -u
python=
for p in ${YOLOCL_PYTHON:-} /usr/bin/python3 python3; do
    if "$p" -c 'import numpy, onnx, cv2' >/dev/null 2>&1; then
        python=$p
        break
    fi
done
if [ -z "$python" ]; then
    echo "SKIP: no Python 3 that imports numpy, onnx and cv2 (Debian: python3-onnx" \
        "python3-opencv; or set YOLOCL_PYTHON)"
    exit 77
fi
here=$(dirname "$0")
# shellcheck source=tests/onnx_cases.sh
. "$here/onnx_cases.sh"

check_case() { # NAME MODEL REFDIR NC STRIDE TOL_SCORE TOL_BOX TOL_BOX_REL [nocv]
    "$python" "$here/onnx_check.py" "$2" "$3" "$4" "$5" "$6" "$7" "$8" ${9:+--no-cv}
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-onnx.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "Python: $python"
run_cases "$tmp" || exit 1
exit $failed
