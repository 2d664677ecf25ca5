#!/bin/sh
# yolocl's inference pass against ONNX Runtime's on the CPU, side by side in one run: for each
# model, size and batch, bench/infer_bench exports the model as ONNX and times yolocl's forward
# pass (the evaluation graph `yolocl val` and `yolocl detect` run), then bench/ort_bench.js times
# ONNX Runtime (Node binding, all graph optimisations) on that file, with the same thread count.
# Prints a table of milliseconds per image, minimum (median) over the timed runs.
#
#   bench/ort_vs_yolocl.sh [ITERS]        (from the build directory, after make bench/infer_bench)
#
# Environment: THREADS (default 2), MODELS (default "yolov5n yolov5s": bundled configs, randomly
# initialised, or weights files), IMGS ("320 640"), BATCHES ("1 8"), YOLOCL_ORT_DIR (where
# `npm install --ignore-scripts onnxruntime-node` ran), SPIN (default 1).  With SPIN=1 idle
# threads spin between parallel regions in both runtimes (OMP_WAIT_POLICY=ACTIVE, as `yolocl
# bench` runs; ONNX Runtime's default), so that each op starts without waking a sleeping thread.
# SPIN=0 puts them to sleep in both (OMP_WAIT_POLICY=PASSIVE, ONNX Runtime's allow_spinning 0),
# for a machine that other processes load: there a spinning thread that loses its core stalls
# every barrier until it is scheduled again.  The two runtimes alternate configuration by
# configuration, so that load from other processes falls on both alike.
set -eu
iters=${1:-10}
threads=${THREADS:-2}
here=$(dirname "$0")
prog=./bench/infer_bench
[ -x "$prog" ] || { echo "build it first: make bench/infer_bench" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-ort.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
spin=${SPIN:-1}
policy=PASSIVE
[ "$spin" = 1 ] && policy=ACTIVE
export OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=$policy
echo "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $threads threads," \
    "$iters timed runs, idle threads $([ "$spin" = 1 ] && echo spin || echo sleep)," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %5s %5s %24s %24s %7s\n' model img batch "yolocl ms/img" "ONNX Runtime ms/img" \
    "ratio"
for model in ${MODELS:-yolov5n yolov5s}; do
    for img in ${IMGS:-320 640}; do
        for batch in ${BATCHES:-1 8}; do
            f=$tmp/m.onnx
            set -- $("$prog" "$model" "$img" "$batch" "$iters" "$f")
            name=$2 ymin=$5 ymed=$6
            set -- $(node "$here/ort_bench.js" "$f" "$iters" "$threads" "$spin" 2>"$tmp/ort.err") ||
                { cat "$tmp/ort.err" >&2; exit 1; }
            ver=$2 omin=$3 omed=$4
            awk -v m="$name" -v i="$img" -v b="$batch" -v ym="$ymin" -v yd="$ymed" \
                -v om="$omin" -v od="$omed" 'BEGIN {
                printf "%-8s %5d %5d %13.2f (%8.2f) %13.2f (%8.2f) %7.2f\n", m, i, b, ym / b,
                    yd / b, om / b, od / b, ym / om }'
        done
    done
done
echo "ONNX Runtime $ver (Node); ratio: yolocl's minimum over ONNX Runtime's (below 1: yolocl faster)"
