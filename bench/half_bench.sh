#!/bin/sh
# What FP16 storage saves and costs: the same training run (same seed, so the same batches) with
# --no-half and with --half, side by side.
#
#   bench/half_bench.sh [YOLOCL]
#
# Trains MODEL (default yolov5n) from scratch on the built-in demo dataset at IMG (160) with
# BATCH (8) for EPOCHS (8: 40 steps an epoch, 320 steps) on DEVICE (cpu), validating only after
# the last epoch, and prints per storage: the planned activation arena (`yolocl plan --json`),
# the planned peak of the run (its "memory:" line), the measured peak RSS (/usr/bin/time -v),
# wall time and seconds per step, and the mean training losses of the last epoch (results.csv);
# then the FP16 - FP32 differences of the losses and of the final mAP@0.5:0.95.  Needs GNU time
# (Debian package time).
set -u
yolocl=${1:-./yolocl}
model=${MODEL:-yolov5n}
img=${IMG:-160}
batch=${BATCH:-8}
epochs=${EPOCHS:-8}
device=${DEVICE:-cpu}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-half-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

[ -x /usr/bin/time ] || { echo "half_bench: /usr/bin/time (GNU time) is needed" >&2; exit 1; }
"$yolocl" demo-data "$tmp/demo" >/dev/null || exit 1
ntrain=$(find "$tmp/demo/images/train" -type f | wc -l)
steps=$(( (ntrain + batch - 1) / batch * epochs ))
echo "$model at $img, batch $batch, $epochs epochs ($steps steps) on the demo data, device $device"
printf '%-8s %12s %12s %12s %8s %8s %9s %9s %9s %8s\n' storage arena_MiB planned_MiB \
    measured_MiB wall_s s/step box obj cls mAP50-95
for half in no-half half; do
    json=$("$yolocl" -q plan --cfg "$model" --img "$img" --batch "$batch" --nc 4 \
        --device "$device" --"$half" --json 2>/dev/null)
    arena=$(printf '%s' "$json" | sed -n 's/.*"activation_bytes": *\([0-9]*\).*/\1/p')
    /usr/bin/time -v "$yolocl" train --data "$tmp/demo/demo.yaml" --cfg "$model" --img "$img" \
        --batch "$batch" --epochs "$epochs" --device "$device" --"$half" --noval --noplots \
        --noautoanchor --seed 0 --project "$tmp" --name "$half" --exist-ok >"$tmp/$half.log" 2>&1 ||
        { echo "train --$half failed:" >&2; tail -5 "$tmp/$half.log" >&2; exit 1; }
    planned=$(sed -n 's/^memory: .* planned peak, \([0-9]*\) bytes.*/\1/p' "$tmp/$half.log")
    kb=$(sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$tmp/$half.log")
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): \(.*\)/\1/p' "$tmp/$half.log" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    last=$(tail -1 "$tmp/$half/results.csv" | tr -d ' ')
    echo "$half $last" >>"$tmp/last"
    printf '%s' "$last" | awk -F, -v h="$half" -v a="${arena:-0}" -v p="${planned:-0}" \
        -v k="$kb" -v w="$wall" -v n="$steps" \
        '{ printf "%-8s %12.1f %12.1f %12.1f %8.1f %8.3f %9.5f %9.5f %9.5f %8.4f\n", h,
           a / 1048576, p / 1048576, k / 1024, w, w / n, $2, $3, $4, $8 }'
done
awk '{ split($2, f, ","); for (i = 2; i <= 8; i++) v[NR, i] = f[i] }
     END { printf "%-8s %12s %12s %12s %8s %8s %+9.5f %+9.5f %+9.5f %+8.4f\n", "FP16-FP32",
           "", "", "", "", "", v[2, 2] - v[1, 2], v[2, 3] - v[1, 3], v[2, 4] - v[1, 4],
           v[2, 8] - v[1, 8] }' "$tmp/last"
