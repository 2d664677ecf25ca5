#!/bin/sh
# Tiled training and sliced detection on one huge image: tiles per second and peak RSS.
#
#   bench/tile_bench.sh [YOLOCL]
#
# Generates with the libvips command line (`vips`) a SIZE x SIZE image (default 30000) of textured
# noise with OBJECTS (default 300) coloured rectangles and discs of 20 to 60 pixels, their labels
# in YOLO format, and writes it as a tiled BigTIFF (256 x 256 JPEG-compressed tiles) and as a
# JPEG.  For each format (FORMATS, default "tif jpg") it then runs, under /usr/bin/time -v:
#   - `yolocl train --tile TILE` (default 640) on the CPU for TILES tiles (default 64: one epoch
#     of --tiles-per-epoch TILES, batch BATCH 8, WORKERS 2 loader threads) of MODEL (default
#     yolov5n from scratch; tests/data/tiny/yolov5n-tiny.yaml measures the data path with almost
#     no compute), validating on a 1280 x 1280 crop of the image;
#   - `yolocl detect --slice TILE` of the whole image with the weights just trained;
# and prints for each: the tiles (windows), the wall time, tiles per second and the peak RSS.
# When bench/tile_loader_bench is built beside YOLOCL, it first measures the data path alone
# (the training loader without a model) on the same tiles.
# Targets (issue 7): under 1.5 GiB for training and 1 GiB for detection, whatever the format.
# MEM (e.g. 1.5G) passes --mem to train: the planner then fits the run under that limit (FP16
# storage first), which is how a user keeps a run under a memory target.
# KEEP=1 keeps the generated files (in WORKDIR, default a new directory under $TMPDIR).
# Needs GNU time (Debian package time) and the vips command (libvips-tools); about 5 GiB of disk
# at 30000 (the raw image, the TIFF and the JPEG).
set -u
yolocl=${1:-./yolocl}
size=${SIZE:-30000}
objects=${OBJECTS:-300}
tile=${TILE:-640}
tiles=${TILES:-64}
batch=${BATCH:-8}
workers=${WORKERS:-2}
model=${MODEL:-yolov5n}
formats=${FORMATS:-"tif jpg"}
seed=${SEED:-1}
mem=${MEM:-}

[ -x /usr/bin/time ] || { echo "tile_bench: /usr/bin/time (GNU time) is needed" >&2; exit 1; }
command -v vips >/dev/null 2>&1 || { echo "tile_bench: the vips command is needed" >&2; exit 1; }
[ "$size" -ge 1280 ] || { echo "tile_bench: SIZE must be at least 1280" >&2; exit 1; }
dir=${WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/yolocl-tile-bench.XXXXXX")} || exit 1
mkdir -p "$dir" || exit 1
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

fail() {
    echo "tile_bench: $*" >&2
    exit 1
}

# ---- the image ----------------------------------------------------------------------------------
echo "generating a ${size}x${size} image with $objects objects in $dir"
t0=$(date +%s)
vips gaussnoise "$dir/noise.v" "$size" "$size" --mean 110 --sigma 30 || fail "gaussnoise"
# a diagonal wave of about 240 pixels under the noise
vips sines "$dir/sines.v" "$size" "$size" --hfreq $((size / 300)) --vfreq $((size / 400)) ||
    fail "sines"
vips linear "$dir/sines.v" "$dir/wave.v" 35 0 || fail "linear"
vips add "$dir/noise.v" "$dir/wave.v" "$dir/sum.v" || fail "add"
vips cast "$dir/sum.v" "$dir/gray.v" uchar || fail "cast"
rm -f "$dir/noise.v" "$dir/sines.v" "$dir/wave.v" "$dir/sum.v"
vips bandjoin "$dir/gray.v $dir/gray.v $dir/gray.v" "$dir/big.v" || fail "bandjoin"
vips copy "$dir/big.v" "$dir/rgb.v" --interpretation srgb || fail "copy"
rm -f "$dir/gray.v" "$dir/big.v"

# objects: class 0 rectangles, class 1 discs; one line per object: class x y w h r g b
awk -v n="$objects" -v s="$size" -v seed="$seed" 'BEGIN {
    srand(seed)
    for (i = 0; i < n; i++) {
        c = int(rand() * 2); w = 20 + int(rand() * 41); h = c ? w : 20 + int(rand() * 41)
        x = int(rand() * (s - w)); y = int(rand() * (s - h))
        printf "%d %d %d %d %d %d %d %d\n", c, x, y, w, h, 40 + int(rand() * 216),
               40 + int(rand() * 216), 40 + int(rand() * 216)
    }
}' >"$dir/objects.txt"
while read -r c x y w h r g b; do
    if [ "$c" -eq 0 ]; then
        vips draw_rect "$dir/rgb.v" "$r $g $b" "$x" "$y" "$w" "$h" --fill || fail "draw_rect"
    else
        rad=$((w / 2))
        vips draw_circle "$dir/rgb.v" "$r $g $b" $((x + rad)) $((y + rad)) "$rad" --fill ||
            fail "draw_circle"
    fi
done <"$dir/objects.txt"

for fmt in $formats; do
    mkdir -p "$dir/$fmt/images/train" "$dir/$fmt/labels/train" "$dir/$fmt/images/val" \
        "$dir/$fmt/labels/val"
    awk -v s="$size" '{ printf "%d %.6f %.6f %.6f %.6f\n", $1, ($2 + $4 / 2) / s,
                        ($3 + $5 / 2) / s, $4 / s, $5 / s }' "$dir/objects.txt" \
        >"$dir/$fmt/labels/train/big.txt"
    awk '$2 + $4 <= 1280 && $3 + $5 <= 1280 { printf "%d %.6f %.6f %.6f %.6f\n", $1,
         ($2 + $4 / 2) / 1280, ($3 + $5 / 2) / 1280, $4 / 1280, $5 / 1280 }' \
        "$dir/objects.txt" >"$dir/$fmt/labels/val/crop.txt"
    vips crop "$dir/rgb.v" "$dir/$fmt/images/val/crop.png" 0 0 1280 1280 || fail "crop"
    case $fmt in
    tif)
        vips tiffsave "$dir/rgb.v" "$dir/$fmt/images/train/big.tif" --tile --tile-width 256 \
            --tile-height 256 --bigtiff --compression jpeg --Q 90 || fail "tiffsave"
        ;;
    jpg)
        vips jpegsave "$dir/rgb.v" "$dir/$fmt/images/train/big.jpg" --Q 90 || fail "jpegsave"
        ;;
    png)
        vips pngsave "$dir/rgb.v" "$dir/$fmt/images/train/big.png" --compression 1 ||
            fail "pngsave"
        ;;
    *) fail "unknown format $fmt (tif, jpg or png)" ;;
    esac
    printf 'path: %s\ntrain: images/train\nval: images/val\nnames: [rectangle, disc]\n' \
        "$dir/$fmt" >"$dir/$fmt.yaml"
done
rm -f "$dir/rgb.v"
echo "generated in $(($(date +%s) - t0)) s: $(du -sh "$dir" | cut -f1)"

# ---- runs ---------------------------------------------------------------------------------------
# wall time in seconds from GNU time's "Elapsed (wall clock) time (h:mm:ss or m:ss): ..."
wall() {
    sed -n 's/.*Elapsed (wall clock) time[^:]*: *//p' "$1" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }'
}
rss_mib() {
    sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1" |
        awk '{ printf "%.0f", $1 / 1024 }'
}

# the data path alone, when bench/tile_loader_bench was built (make bench/tile_loader_bench)
loader_bench=$(dirname "$yolocl")/bench/tile_loader_bench
if [ -x "$loader_bench" ]; then
    for fmt in $formats; do
        printf '%s: ' "$fmt"
        "$loader_bench" "$dir/$fmt.yaml" "$tile" $((tiles / batch)) "$batch" "$workers" |
            tail -1
    done
fi

printf '\n%-6s %-7s %8s %9s %9s %9s  %s\n' format run tiles wall_s tiles/s peak_MiB note
for fmt in $formats; do
    run=$dir/runs/$fmt
    case $model in
    *.yaml) set -- --cfg "$model" ;;
    *) set -- --cfg "$model" --weights "" ;;
    esac
    [ -n "$mem" ] && set -- "$@" --mem "$mem"
    /usr/bin/time -v "$yolocl" train --data "$dir/$fmt.yaml" "$@" --tile "$tile" \
        --img "$tile" --epochs 1 --tiles-per-epoch "$tiles" --batch "$batch" \
        --workers "$workers" --device cpu --noplots --noautoanchor --patience 0 \
        --project "$dir/runs" --name "$fmt" --exist-ok >"$dir/train-$fmt.log" 2>&1 ||
        { tail -5 "$dir/train-$fmt.log" >&2; fail "train on $fmt failed"; }
    rate=$(sed 's/\r/\n/g' "$dir/train-$fmt.log" |
        sed -n 's/.*, \([0-9.]*\) img\/s, elapsed.*/\1/p' | tail -1)
    w=$(wall "$dir/train-$fmt.log")
    printf '%-6s %-7s %8d %9s %9s %9s  %s\n' "$fmt" train "$tiles" "$w" "$rate" \
        "$(rss_mib "$dir/train-$fmt.log")" "tiles/s of the epoch loop (loader + model)"
    weights=$run/weights/last.safetensors
    [ -f "$weights" ] || fail "no $weights"
    img=$(ls "$dir/$fmt/images/train/"big.*)
    /usr/bin/time -v "$yolocl" detect --weights "$weights" --source "$img" --slice "$tile" \
        --img "$tile" --device cpu --nosave --project "$dir/detect" --name "$fmt" \
        --exist-ok >"$dir/detect-$fmt.log" 2>&1 ||
        { tail -5 "$dir/detect-$fmt.log" >&2; fail "detect on $fmt failed"; }
    n=$(sed -n 's/.* in \([0-9]*\) slices.*/\1/p' "$dir/detect-$fmt.log" | tail -1)
    w=$(wall "$dir/detect-$fmt.log")
    printf '%-6s %-7s %8d %9s %9s %9s  %s\n' "$fmt" detect "$n" "$w" \
        "$(awk -v n="$n" -v w="$w" 'BEGIN { printf "%.2f", (w > 0 ? n / w : 0) }')" \
        "$(rss_mib "$dir/detect-$fmt.log")" "windows per wall second, start-up included"
done
