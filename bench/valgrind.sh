#!/usr/bin/env bash
# valgrind memcheck over a short training and a validation: exits non-zero on any invalid access,
# use of uninitialised memory, or definitely/indirectly lost block.
#
#   bench/valgrind.sh [YOLOCL]          (default ./yolocl; a normal build, not a sanitizer one)
#
# The run: `yolocl demo-data` (8 training and 4 validation images), one epoch of the tiny test
# model (tests/data/tiny/yolov5n-tiny.yaml) at 64 pixels, batch 4, on the CPU backend with 2 OpenMP
# threads and one loader thread, then `yolocl val` of its last checkpoint.  OpenCL is kept out
# (OCL_ICD_VENDORS points nowhere): PoCL's LLVM is not yolocl's code, and its JIT is slow under
# valgrind.  OMP_WAIT_POLICY is set so that yolocl does not re-execute itself (valgrind would then
# follow the first process only).  "still reachable" blocks (libvips, GLib and libgomp keep
# caches until exit) and "possibly lost" ones (GLib's type system) are not errors.  About a minute.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
yolocl=$(realpath "${1:-./yolocl}")
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed" >&2; exit 2; }
[ -x "$yolocl" ] || { echo "valgrind.sh: no yolocl binary at $yolocl" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OCL_ICD_VENDORS=$work/no-vendors OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
vg=(valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
    --error-exitcode=99 --num-callers=30)

"$yolocl" -q demo-data "$work/data" --train 8 --val 4
status=0
"${vg[@]}" "$yolocl" train --data "$work/data/demo.yaml" --cfg "$here/../tests/data/tiny/yolov5n-tiny.yaml" \
    --img 64 --batch 4 --epochs 1 --workers 1 --device cpu --project "$work/runs" --name train \
    >"$work/train.log" 2>&1 || status=$?
grep -E 'ERROR SUMMARY|definitely lost|indirectly lost' "$work/train.log" | sed 's/^==[0-9]*==/train:/'
if [ "$status" -ne 0 ]; then
    cat "$work/train.log"
    echo "valgrind.sh: training under memcheck exited with $status" >&2
    exit 1
fi
"${vg[@]}" "$yolocl" val --data "$work/data/demo.yaml" --weights "$work/runs/train/weights/last.safetensors" \
    --img 64 --batch 4 --device cpu --project "$work/runs" --name val >"$work/val.log" 2>&1 || status=$?
grep -E 'ERROR SUMMARY|definitely lost|indirectly lost' "$work/val.log" | sed 's/^==[0-9]*==/val:/'
if [ "$status" -ne 0 ]; then
    cat "$work/val.log"
    echo "valgrind.sh: validation under memcheck exited with $status" >&2
    exit 1
fi
echo "valgrind.sh: training and validation clean"
