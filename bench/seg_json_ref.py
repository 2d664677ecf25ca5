#!/usr/bin/python3
"""segment/val.py --save-json on the case of bench/seg_val_ref.py, for bench/seg_val_check.sh:

    cd YOLOV5_DIR && /usr/bin/python3 WORKTREE/bench/seg_json_ref.py OUT_DIR [IMGSZ]

OUT_DIR holds seg.yaml and yolov5n-seg.pt (bench/seg_val_ref.py).  pycocotools is not installed
here, so pycocotools.mask.encode is stood in for by tests/data/rle_ref.py's transcription of
maskApi.c (rleEncode in Fortran order, rleToString), which test_seg_plots checks coco_rle.c
against; the COCO evaluation after the JSON is written then fails to import, as segment/val.py
allows.  Writes OUT_DIR/runs/json/yolov5n-seg_predictions.json.
"""
import os
import sys
import types

out = sys.argv[1]
imgsz = int(sys.argv[2]) if len(sys.argv) > 2 else 320
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
import rle_ref  # noqa: E402

pkg = types.ModuleType("pycocotools")
pkg.__path__ = []
mask = types.ModuleType("pycocotools.mask")
mask.encode = rle_ref.encode
pkg.mask = mask
sys.modules["pycocotools"] = pkg
sys.modules["pycocotools.mask"] = mask
sys.path.insert(0, os.getcwd())

import segment.val as sv  # noqa: E402

sv.run(data=os.path.join(out, "seg.yaml"), weights=os.path.join(out, "yolov5n-seg.pt"),
       batch_size=8, imgsz=imgsz, device="cpu", half=False, plots=False, save_json=True,
       project=os.path.join(out, "runs"), name="json", exist_ok=True)
