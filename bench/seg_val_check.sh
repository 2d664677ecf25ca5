#!/bin/sh
# yolocl's segmentation validation and prediction against YOLOv5 v7.0's on a real-size case:
#
#   bench/seg_val_check.sh [N [IMGSZ]]     (from the source tree, after make)
#
# bench/seg_val_ref.py makes the case in $OUT (default /tmp/yolocl-seg-check): the first N (32)
# coco128 images with their boxes as ellipse polygons, and a yolov5n-seg checkpoint holding
# yolov5n.pt's weights; it runs segment/val.py on it at IMGSZ (320), batch 8.  Then:
#   1. `yolocl val` with the same settings: its "all" line must equal segment/val.py's (the 8
#      metrics at 3 significant digits, images and instances), and its 8 metrics are printed beside
#      val.py's 17-digit ones (val.txt);
#   2. segment/predict.py and `yolocl detect` with --save-txt --save-conf on the same images: the
#      label files must hold the same lines (class and polygon points) but for the confidence,
#      last on each line, which may differ in its 6th digit (float round-off of the forward).
#   3. segment/val.py --save-json (bench/seg_json_ref.py: pycocotools' encoder stood in for by
#      tests/data/rle_ref.py, pycocotools not being installed) and `yolocl val --save-json`: the
#      entries paired in order must have the same image, class (or its COCO id), box and mask
#      size, and at most 1e-4 of the mask pixels may differ (bench/seg_json_compare.py; a pixel
#      whose logit is within round-off of 0 can come out either way).
# Needs Debian's python3-torch (/usr/bin/python3), a YOLOv5 v7.0 checkout ($YOLOV5, default
# /tmp/y5) and the shared reference material ($YOLOCL_SHARED_DIR, default ../shared).  Exit 0 when
# both agree, 1 otherwise, 77 when something it needs is missing.
set -eu
N=${1:-32}
IMGSZ=${2:-320}
Y5=${YOLOV5:-/tmp/y5}
SHARED=${YOLOCL_SHARED_DIR:-$(cd "$(dirname "$0")/.." && pwd)/../shared}
OUT=${OUT:-/tmp/yolocl-seg-check}
SRC=$(cd "$(dirname "$0")/.." && pwd)
YOLOCL=$SRC/yolocl
for need in "$Y5/segment/val.py" "$SHARED/data/coco128/images" "$SHARED/weights/yolov5n.pt" \
    /usr/bin/python3 "$YOLOCL"; do
    [ -e "$need" ] || { echo "seg_val_check: $need not found" >&2; exit 77; }
done
mkdir -p "$OUT"
export YOLOV5_CONFIG_DIR="$OUT/yolov5-config"
mkdir -p "$YOLOV5_CONFIG_DIR"

echo "== segment/val.py ($N images at $IMGSZ)"
(cd "$Y5" && /usr/bin/python3 "$SRC/bench/seg_val_ref.py" "$SHARED/data/coco128" "$OUT" "$N" \
    "$IMGSZ") >"$OUT/val_py.log" 2>&1 || { tail -20 "$OUT/val_py.log"; exit 1; }
# the table's lines come through tqdm's carriage returns: the last "all" line is the result
ref=$(tr '\r' '\n' <"$OUT/val_py.log" | grep -E '^ +all ' | tail -1)
echo "$ref"

echo "== yolocl val"
"$YOLOCL" val --weights "$OUT/yolov5n-seg.pt" --data "$OUT/seg.yaml" --img "$IMGSZ" --batch 8 \
    --project "$OUT/runs" --name yolocl-val --exist-ok >"$OUT/yolocl_val.log" 2>&1 ||
    { cat "$OUT/yolocl_val.log"; exit 1; }
got=$(grep -E '^ +all ' "$OUT/yolocl_val.log" | tail -1)
echo "$got"
echo "segment/val.py's metrics (box P R mAP50 mAP50-95, mask P R mAP50 mAP50-95):"
tr '\n' ' ' <"$OUT/val.txt"
echo
status=0
if [ "$ref" = "$got" ]; then echo "val: the same"; else echo "val: DIFFERENT"; status=1; fi

echo "== segment/predict.py and yolocl detect"
rm -rf "$OUT/runs/predict-py" "$OUT/runs/yolocl-detect"
(cd "$Y5" && /usr/bin/python3 segment/predict.py --weights "$OUT/yolov5n-seg.pt" \
    --source "$OUT/seg/images/train2017" --imgsz "$IMGSZ" --device cpu --save-txt --save-conf \
    --project "$OUT/runs" --name predict-py --exist-ok) >"$OUT/predict_py.log" 2>&1 ||
    { tail -20 "$OUT/predict_py.log"; exit 1; }
"$YOLOCL" detect --weights "$OUT/yolov5n-seg.pt" --source "$OUT/seg/images/train2017" \
    --img "$IMGSZ" --save-txt --save-conf --project "$OUT/runs" --name yolocl-detect \
    --exist-ok >"$OUT/yolocl_detect.log" 2>&1 || { cat "$OUT/yolocl_detect.log"; exit 1; }
files=0
differ=0
lines=0
for f in "$OUT/runs/predict-py/labels/"*.txt; do
    b=$(basename "$f")
    files=$((files + 1))
    lines=$((lines + $(wc -l <"$f")))
    mine="$OUT/runs/yolocl-detect/labels/$b"
    if [ ! -f "$mine" ] || [ "$(sed 's/ [^ ]*$//' "$f")" != "$(sed 's/ [^ ]*$//' "$mine")" ]; then
        differ=$((differ + 1))
        echo "differs: $b"
    fi
done
ours=$(ls "$OUT/runs/yolocl-detect/labels" 2>/dev/null | wc -l)
echo "detect: $files label files ($lines detections) from predict.py, $ours from yolocl; $differ differ in a class or a polygon point"
[ "$differ" -eq 0 ] && [ "$ours" -eq "$files" ] || status=1

echo "== segment/val.py --save-json and yolocl val --save-json"
(cd "$Y5" && /usr/bin/python3 "$SRC/bench/seg_json_ref.py" "$OUT" "$IMGSZ") >"$OUT/json_py.log" 2>&1 ||
    { tail -20 "$OUT/json_py.log"; exit 1; }
"$YOLOCL" val --weights "$OUT/yolov5n-seg.pt" --data "$OUT/seg.yaml" --img "$IMGSZ" --batch 8 \
    --save-json --project "$OUT/runs" --name yolocl-json --exist-ok >"$OUT/yolocl_json.log" 2>&1 ||
    { cat "$OUT/yolocl_json.log"; exit 1; }
/usr/bin/python3 "$SRC/bench/seg_json_compare.py" "$OUT/runs/json/yolov5n-seg_predictions.json" \
    "$OUT/runs/yolocl-json/yolov5n-seg_predictions.json" || status=1
exit $status
