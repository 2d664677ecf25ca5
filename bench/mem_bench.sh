#!/bin/sh
# Planned peak memory against the measured peak RSS of `yolocl train` on the CPU backend.
#
#   bench/mem_bench.sh [YOLOCL] [DATA.yaml]
#
# For yolov5n and yolov5s at 320 and 640 with batch 8, 16 and 32 (override with MODELS, SIZES,
# BATCHES), it trains one epoch with /usr/bin/time -v and prints the peak that `yolocl train`
# planned before allocating anything (its "memory: ... planned peak, N bytes" line) beside the
# measured peak RSS, with their ratio, and the choices the plan made.  EXTRA adds options to both
# (e.g. EXTRA="--half" or EXTRA="--mem 2G").  Needs GNU time (Debian package time).
set -u
yolocl=${1:-./yolocl}
data=${2:-../shared/data/coco128.yaml}
models=${MODELS:-"yolov5n yolov5s"}
sizes=${SIZES:-"320 640"}
batches=${BATCHES:-"8 16 32"}
extra=${EXTRA:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-mem-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

[ -x /usr/bin/time ] || { echo "mem_bench: /usr/bin/time (GNU time) is needed" >&2; exit 1; }
printf '%-8s %5s %6s %12s %12s %7s %s\n' model img batch planned_MiB measured_MiB ratio choice
for model in $models; do
    for img in $sizes; do
        for batch in $batches; do
            # shellcheck disable=SC2086
            /usr/bin/time -v "$yolocl" train --data "$data" --cfg "$model" --img "$img" \
                --batch "$batch" --epochs 1 --noplots --nosave --noautoanchor --exist-ok \
                --project "$tmp" --name run $extra >"$tmp/log" 2>&1 ||
                { echo "train failed: $model $img $batch" >&2; tail -3 "$tmp/log" >&2; continue; }
            planned=$(sed -n 's/^memory: .* planned peak, \([0-9]*\) bytes.*/\1/p' "$tmp/log")
            choice=$(sed -n 's/^memory: .* bytes (\(.*\))$/\1/p' "$tmp/log" | cut -c1-70)
            kb=$(sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$tmp/log")
            awk -v m="$model" -v i="$img" -v b="$batch" -v p="$planned" -v k="$kb" \
                -v c="$choice" \
                'BEGIN { printf "%-8s %5d %6d %12.0f %12.0f %7.3f %s\n", m, i, b, p / 1048576,
                         k / 1024, (k * 1024) / p, c }'
        done
    done
done
