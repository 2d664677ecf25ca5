# The ONNX files of tests/test_onnx.sh and tests/test_onnx_ort.sh (sourced by both): each case is
# a `yolocl export --include onnx` and one or more runs of tests/onnx_ref, yolocl's own output0 on
# real images, which the including script hands to its runtime through its function
#
#   check_case NAME MODEL.onnx REFDIR NC STRIDE TOL_SCORE TOL_BOX TOL_BOX_REL [nocv]
#
# (boxes may differ by TOL_BOX + TOL_BOX_REL * |yolocl's value| pixels; nocv: OpenCV DNN 4.6 cannot
# read the file: dynamic shapes, float16 initializers).  The images are coco128's and the model
# the released yolov5n.pt when ../shared has them (YOLOCL_SHARED_DIR), else the demo dataset's and
# tests/data's tiny YOLOv5n (its own yaml, 3 classes).  Every model is also a case with its own
# number of classes and config: tests/data's tiny model (yolov5n-tiny.yaml, nc 3), and a P6 model
# (yolov5n6.yaml, four levels, stride 64) trained for one epoch on the demo dataset (nc 4); a
# segmentation model (tests/data's seg/tiny, 3 classes) and, with ../shared, a classifier
# (ref/cls's yolov5n-cls, 10 classes).
# Sets `failed` to 1 when a case fails.

yolocl=${YOLOCL:-./yolocl}
ref=./tests/onnx_ref
data=${YOLOCL_TEST_DATA:-tests/data}
shared=${YOLOCL_SHARED_DIR:-../shared}
failed=0

run_cases() {
    tmp=$1
    "$yolocl" demo-data "$tmp/demo" --train 2 --val 2 >"$tmp/log" 2>&1 || {
        cat "$tmp/log"
        echo "FAIL: yolocl demo-data"
        return 1
    }
    coco=$shared/data/coco128/images/train2017
    if [ -f "$shared/weights/yolov5n.pt" ] && [ -d "$coco" ]; then
        main=$shared/weights/yolov5n.pt main_nc=80
        set -- "$coco/000000000009.jpg" "$coco/000000000025.jpg" "$coco/000000000030.jpg"
        echo "images: coco128; model: the released yolov5n.pt"
    else
        main=$data/tiny/yolov5n-tiny.pt main_nc=3
        set -- "$tmp"/demo/images/val/*.jpg "$tmp"/demo/images/train/*.jpg
        echo "images: the demo dataset; model: tests/data's tiny YOLOv5n ($shared has no" \
            "yolov5n.pt and coco128)"
    fi
    images="$*"

    # P6 weights: yolov5n6.yaml on the demo dataset, one epoch
    "$yolocl" train --data "$tmp/demo/demo.yaml" --cfg yolov5n6.yaml --device cpu --img 128 \
        --epochs 1 --batch 2 --noautoanchor --noplots --noval --project "$tmp/runs" \
        --name p6 >"$tmp/log" 2>&1 || {
        cat "$tmp/log"
        echo "FAIL: training the P6 model"
        return 1
    }
    p6=$tmp/runs/p6/weights/last.safetensors

    # NAME WEIGHTS NC STRIDE TOL_SCORE TOL_BOX TOL_BOX_REL NOCV "EXPORT OPTIONS" "H W BATCH" ...
    one_case() {
        name=$1 weights=$2 nc=$3 stride=$4 ts=$5 tb=$6 tr=$7 nocv=$8 opts=$9
        shift 9
        # shellcheck disable=SC2086
        "$yolocl" export --weights "$weights" --include onnx --out "$tmp/$name.onnx" $opts \
            >"$tmp/log" 2>&1 || {
            cat "$tmp/log"
            echo "FAIL: $name: yolocl export --include onnx $opts"
            failed=1
            return
        }
        for shape in "$@"; do
            r=$tmp/$name-$(echo "$shape" | tr ' ' x)
            mkdir -p "$r"
            # shellcheck disable=SC2086
            "$ref" ${case_cfg:+--cfg "$case_cfg"} "$weights" $shape "$r" $images >"$tmp/log" 2>&1 || {
                cat "$tmp/log"
                echo "FAIL: $name: tests/onnx_ref $shape"
                failed=1
                return
            }
            echo "== $name ($opts) at $shape (H W batch)"
            check_case "$name" "$tmp/$name.onnx" "$r" "$nc" "$stride" "$ts" "$tb" "$tr" $nocv || failed=1
        done
    }
    # float32: 1e-3 on scores, 0.05 px on boxes
    one_case n640 "$main" $main_nc 32 1e-3 0.05 0 "" "" "640 640 1"
    one_case n320 "$main" $main_nc 32 1e-3 0.05 0 "" "--img 320" "320 320 1"
    one_case n_rect_b2 "$main" $main_nc 32 1e-3 0.05 0 "" "--img 256 416 --batch 2" "256 416 2"
    one_case n_opset17 "$main" $main_nc 32 1e-3 0.05 0 "" "--img 320 --opset 17" "320 320 1"
    one_case tiny "$data/tiny/yolov5n-tiny.pt" 3 32 1e-3 0.05 0 "" "--img 320" "320 320 1"
    one_case p6 "$p6" 4 64 1e-3 0.05 0 "" "--img 384" "384 384 1"
    # dynamic: two sizes and two batch sizes from one file (OpenCV 4.6 reads no dynamic shapes)
    one_case n_dynamic "$main" $main_nc 32 1e-3 0.05 0 nocv "--dynamic" "320 448 2" "640 640 1" \
        "416 256 3"
    one_case p6_dynamic "$p6" 4 64 1e-3 0.05 0 nocv "--dynamic" "256 384 2" "448 448 1"
    # float16 weights, input, output: every layer's output rounded to 11 significant bits, the
    # scores within 0.02 and the boxes within 3% + 1 px (their wh are squares of exp-like terms);
    # OpenCV 4.6 reads no float16 initializers
    one_case n_half "$main" $main_nc 32 0.02 1 0.03 nocv "--half" "640 640 1"
    # segmentation: tests/data's seg/tiny (output0 with 32 mask coefficients, output1 Proto's);
    # a classifier: ../shared's ref/cls yolov5n-cls (nc 10), when it is there
    case_cfg=$data/seg/tiny/yolov5n-seg-tiny.yaml
    one_case seg_tiny "$data/seg/tiny/weights.safetensors" 3 32 1e-3 0.05 0 "" \
        "--cfg $case_cfg --img 128 --batch 2" "128 128 2"
    one_case seg_dynamic "$data/seg/tiny/weights.safetensors" 3 32 1e-3 0.05 0 nocv \
        "--cfg $case_cfg --dynamic" "96 160 2"
    case_cfg=yolov5n-cls
    cls=$shared/ref/cls/yolov5n-cls-64/weights.safetensors
    if [ -f "$cls" ]; then
        one_case cls "$cls" 10 32 1e-3 0.05 0 "" "--cfg yolov5n-cls --img 224 --batch 2" "224 224 2"
    fi
    case_cfg=
}
