#!/bin/sh
# The accuracy of tiled training on generated huge images: mAP per tile and per whole image.
#
#   bench/tile_map_bench.sh [YOLOCL]
#
# Generates with the libvips command line (`vips`) two images as bench/tile_bench.sh draws them
# (textured noise over a diagonal wave, class 0 rectangles and class 1 discs of 20 to 60 pixels in
# random colours), written as tiled BigTIFF (256 x 256 JPEG-compressed tiles):
#   - a TRAIN_SIZE x TRAIN_SIZE training image (default 16000),
#   - a VAL_SIZE x VAL_SIZE validation image (default 6000) drawn with another seed.
# Objects never overlap: the image is cut into cells of 100 pixels and each cell holds one object
# at a random place with probability DENSITY (default 0.15, about 1.5 objects per 320 x 320
# window), so every label is a visible object.  Drawing costs one `vips` call per object (about
# 60 ms each), which is why the training image is smaller than tile_bench.sh's 30000.
#
# Then, under /usr/bin/time -v (wall time and peak RSS):
#   - `yolocl train --tile TILE --img TILE` (default 320) of MODEL (default yolov5n) from WEIGHTS
#     (default ../shared/weights/yolov5n.pt beside the source tree when it exists, else from
#     scratch) on the CPU, EPOCHS (default 10) epochs of TILES tiles (default 1500) drawn at
#     random, batch BATCH (16), WORKERS (2) loader threads; it validates per tile every epoch;
#   - `yolocl val --tile TILE` of its best weights: mAP per tile (each window with its clipped
#     labels);
#   - `yolocl val --tile TILE --val-full` of the same weights: mAP per whole image (windows
#     detected, merged into image coordinates and matched against the image's labels).
# and prints the mAPs, the times and the peak RSS.  Run it under `nice -n 19` on a shared machine.
# Measured (docs/PERFORMANCE.md, "Large images"): 6 of the 10 epochs ran in 44 minutes on a
# shared 2-core machine (interrupted there); per tile mAP@0.5 0.969, per whole image 0.927.
# RUN_WEIGHTS=path skips training and validates those weights.  KEEP=1 keeps the generated files
# (in WORKDIR, default a new directory under $TMPDIR); an existing WORKDIR/data.yaml is reused.
# Needs GNU time (Debian package time) and the vips command (libvips-tools).
set -u
yolocl=${1:-./yolocl}
train_size=${TRAIN_SIZE:-16000}
val_size=${VAL_SIZE:-6000}
density=${DENSITY:-0.15}
tile=${TILE:-320}
tiles=${TILES:-1500}
epochs=${EPOCHS:-10}
batch=${BATCH:-16}
workers=${WORKERS:-2}
model=${MODEL:-yolov5n}
seed=${SEED:-1}
src=$(cd "$(dirname "$0")/.." && pwd)
weights=${WEIGHTS-${YOLOCL_SHARED_DIR:-$src/../shared}/weights/yolov5n.pt}
[ -n "$weights" ] && [ ! -f "$weights" ] && weights=

[ -x /usr/bin/time ] || { echo "tile_map_bench: /usr/bin/time (GNU time) is needed" >&2; exit 1; }
command -v vips >/dev/null 2>&1 || { echo "tile_map_bench: the vips command is needed" >&2; exit 1; }
dir=${WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/yolocl-tile-map.XXXXXX")} || exit 1
mkdir -p "$dir" || exit 1
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

fail() {
    echo "tile_map_bench: $*" >&2
    exit 1
}

# gen SIZE SEED NAME: $dir/images/NAME/NAME.tif and $dir/labels/NAME/NAME.txt
gen() {
    s=$1
    v=$dir/$3.v
    vips gaussnoise "$dir/noise.v" "$s" "$s" --mean 110 --sigma 30 || fail "gaussnoise"
    vips sines "$dir/sines.v" "$s" "$s" --hfreq $((s / 300)) --vfreq $((s / 400)) ||
        fail "sines"
    vips linear "$dir/sines.v" "$dir/wave.v" 35 0 || fail "linear"
    vips add "$dir/noise.v" "$dir/wave.v" "$dir/sum.v" || fail "add"
    vips cast "$dir/sum.v" "$dir/gray.v" uchar || fail "cast"
    rm -f "$dir/noise.v" "$dir/sines.v" "$dir/wave.v" "$dir/sum.v"
    vips bandjoin "$dir/gray.v $dir/gray.v $dir/gray.v" "$dir/big.v" || fail "bandjoin"
    vips copy "$dir/big.v" "$v" --interpretation srgb || fail "copy"
    rm -f "$dir/gray.v" "$dir/big.v"
    # one line per object: class x y w h r g b
    awk -v s="$s" -v seed="$2" -v p="$density" 'BEGIN {
        srand(seed)
        for (cy = 0; cy + 100 <= s; cy += 100)
            for (cx = 0; cx + 100 <= s; cx += 100) {
                if (rand() >= p)
                    continue
                c = int(rand() * 2); w = 20 + int(rand() * 41); h = c ? w : 20 + int(rand() * 41)
                x = cx + int(rand() * (100 - w)); y = cy + int(rand() * (100 - h))
                printf "%d %d %d %d %d %d %d %d\n", c, x, y, w, h, 40 + int(rand() * 216),
                       40 + int(rand() * 216), 40 + int(rand() * 216)
            }
    }' >"$dir/$3.objects"
    while read -r c x y w h r g b; do
        if [ "$c" -eq 0 ]; then
            vips draw_rect "$v" "$r $g $b" "$x" "$y" "$w" "$h" --fill || fail "draw_rect"
        else
            rad=$((w / 2))
            vips draw_circle "$v" "$r $g $b" $((x + rad)) $((y + rad)) "$rad" --fill ||
                fail "draw_circle"
        fi
    done <"$dir/$3.objects"
    mkdir -p "$dir/images/$3" "$dir/labels/$3"
    awk -v s="$s" '{ printf "%d %.6f %.6f %.6f %.6f\n", $1, ($2 + $4 / 2) / s,
                     ($3 + $5 / 2) / s, $4 / s, $5 / s }' "$dir/$3.objects" \
        >"$dir/labels/$3/$3.txt"
    vips tiffsave "$v" "$dir/images/$3/$3.tif" --tile --tile-width 256 --tile-height 256 \
        --bigtiff --compression jpeg --Q 90 || fail "tiffsave"
    rm -f "$v"
    echo "$3: ${s}x${s}, $(wc -l <"$dir/$3.objects") objects"
}

if [ ! -f "$dir/data.yaml" ]; then
    echo "generating a ${train_size}x${train_size} training and a ${val_size}x${val_size}" \
        "validation image in $dir"
    t0=$(date +%s)
    gen "$train_size" "$seed" train
    gen "$val_size" $((seed + 1000)) val
    printf 'path: %s\ntrain: images/train\nval: images/val\nnames: [rectangle, disc]\n' \
        "$dir" >"$dir/data.yaml"
    echo "generated in $(($(date +%s) - t0)) s: $(du -sh "$dir" | cut -f1)"
fi

wall() {
    sed -n 's/.*Elapsed (wall clock) time[^:]*: *//p' "$1" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }'
}
rss_mib() {
    sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1" |
        awk '{ printf "%.0f", $1 / 1024 }'
}
# the "all" line of a validation table: P R mAP50 mAP50-95
all_line() {
    sed 's/\r/\n/g' "$1" | awk '$1 == "all" { l = $4 " " $5 " " $6 " " $7 } END { print l }'
}

run_weights=${RUN_WEIGHTS:-}
if [ -z "$run_weights" ]; then
    set -- --cfg "$model" --weights "$weights"
    echo "train: $yolocl train --data $dir/data.yaml $* --tile $tile --img $tile" \
        "--epochs $epochs --tiles-per-epoch $tiles --batch $batch --workers $workers" \
        "--device cpu --patience 0"
    /usr/bin/time -v "$yolocl" train --data "$dir/data.yaml" "$@" --tile "$tile" --img "$tile" \
        --epochs "$epochs" --tiles-per-epoch "$tiles" --batch "$batch" --workers "$workers" \
        --device cpu --patience 0 --project "$dir/runs" --name train --exist-ok \
        >"$dir/train.log" 2>&1 || { tail -5 "$dir/train.log" >&2; fail "train failed"; }
    run_weights=$dir/runs/train/weights/best.safetensors
    [ -f "$run_weights" ] || fail "no $run_weights"
    printf 'train: %s s, peak RSS %s MiB; per-tile validation of the last epoch (P R mAP50 ' \
        "$(wall "$dir/train.log")" "$(rss_mib "$dir/train.log")"
    printf 'mAP50-95): %s\n' "$(all_line "$dir/train.log")"
fi

printf '\n%-9s %9s %9s %9s %9s %9s %9s\n' val P R mAP50 mAP50-95 wall_s peak_MiB
for how in tile full; do
    set -- --tile "$tile"
    [ "$how" = full ] && set -- "$@" --val-full
    /usr/bin/time -v "$yolocl" val --data "$dir/data.yaml" --weights "$run_weights" \
        --img "$tile" "$@" --device cpu --project "$dir/runs" --name "val-$how" --exist-ok \
        >"$dir/val-$how.log" 2>&1 || { tail -5 "$dir/val-$how.log" >&2; fail "val $how failed"; }
    metrics=$(all_line "$dir/val-$how.log")
    p=$(echo "$metrics" | cut -d' ' -f1)
    r=$(echo "$metrics" | cut -d' ' -f2)
    m50=$(echo "$metrics" | cut -d' ' -f3)
    m=$(echo "$metrics" | cut -d' ' -f4)
    printf '%-9s %9s %9s %9s %9s %9s %9s\n' "$how" "$p" "$r" "$m50" "$m" \
        "$(wall "$dir/val-$how.log")" "$(rss_mib "$dir/val-$how.log")"
done
