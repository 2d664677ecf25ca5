#!/usr/bin/python3
"""Reference numbers for `yolocl val` on a segmentation model: YOLOv5 v7.0's own segment/val.py on
a small polygon dataset and a yolov5n-seg checkpoint, both made here.

    cd YOLOV5_DIR && /usr/bin/python3 WORKTREE/bench/seg_val_ref.py COCO128_DIR OUT_DIR [N] [IMGSZ]

Run with Debian's python3-torch (PyTorch 1.13, numpy 1.24, OpenCV 4.6) from a YOLOv5 v7.0 source
folder.  It writes into OUT_DIR:
  - seg/images/train2017 and seg/labels/train2017: the first N (32) images of coco128 with their
    labels as polygons, each box's inscribed ellipse as 24 points (normalised, YOLOv5's segment
    label format), and seg.yaml (train and val both that folder, coco128's 80 names);
  - yolov5n-seg.pt: SegmentationModel(models/segment/yolov5n-seg.yaml, nc 80) with yolov5n.pt's
    weights copied into every tensor of the same name and shape (backbone, neck) and into the
    box, objectness and class rows of each Segment output conv (the mask coefficient rows and
    Proto keep torch.manual_seed(0)'s initialisation), so that the boxes are those of the
    released yolov5n and the masks are neither empty nor right; saved as YOLOv5 saves a
    checkpoint (the model in half precision, names in the model);
  - val.txt: segment/val.py's run(data, weights, batch_size 8, imgsz IMGSZ (320), device cpu,
    half False, plots False): the 8 metrics (box P R mAP50 mAP50-95, mask P R mAP50 mAP50-95) with
    17 significant digits, one per line, then its printed table on stderr.
segment/val.py run alone validates with overlap=False and mask_downsample_ratio=1: one mask per
label at the input size, resized to the predicted masks' size (a quarter) and thresholded.
"""
import math
import os
import shutil
import sys

import tempfile

import torch

# YOLOv5's check_dataset() downloads its font; with no network, matplotlib's DejaVuSans stands in
# (as bench/yolov5_epoch.py does; the font is used for plots only)
cfg_dir = os.environ.setdefault("YOLOV5_CONFIG_DIR", tempfile.mkdtemp(prefix="yolov5-cfg-"))
if not os.path.exists(os.path.join(cfg_dir, "Arial.ttf")):
    import matplotlib

    shutil.copy(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf"),
                os.path.join(cfg_dir, "Arial.ttf"))
sys.path.insert(0, os.getcwd())
from models.yolo import SegmentationModel  # noqa: E402

coco, out = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 32
imgsz = int(sys.argv[4]) if len(sys.argv) > 4 else 320
os.makedirs(out, exist_ok=True)

# the polygon dataset
img_dir = os.path.join(out, "seg", "images", "train2017")
lbl_dir = os.path.join(out, "seg", "labels", "train2017")
for d in (img_dir, lbl_dir):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
images = sorted(os.listdir(os.path.join(coco, "images", "train2017")))[:n]
for name in images:
    shutil.copy(os.path.join(coco, "images", "train2017", name), img_dir)
    stem = os.path.splitext(name)[0]
    src = os.path.join(coco, "labels", "train2017", stem + ".txt")
    lines = []
    if os.path.exists(src):
        for row in open(src).read().split("\n"):
            v = row.split()
            if len(v) != 5:
                continue
            c, x, y, w, h = int(v[0]), *map(float, v[1:])
            pts = []
            for k in range(24):
                t = 2 * math.pi * k / 24
                pts += [min(max(x + w / 2 * math.cos(t), 0), 1), min(max(y + h / 2 * math.sin(t), 0), 1)]
            lines.append(" ".join([str(c)] + ["%.6f" % p for p in pts]))
    with open(os.path.join(lbl_dir, stem + ".txt"), "w") as f:
        f.write("\n".join(lines) + ("\n" if lines else ""))
import yaml  # noqa: E402

names = yaml.safe_load(open(os.path.join(coco, "..", "coco128.yaml")))["names"]
with open(os.path.join(out, "seg.yaml"), "w") as f:
    yaml.safe_dump({"path": os.path.join(out, "seg"), "train": "images/train2017",
                    "val": "images/train2017", "names": names}, f, sort_keys=False)

# the checkpoint
torch.manual_seed(0)
m = SegmentationModel("models/segment/yolov5n-seg.yaml", ch=3, nc=80)
det = torch.load(os.path.join(coco, "..", "..", "weights", "yolov5n.pt"), map_location="cpu")["model"].float()
dsd, msd = det.state_dict(), m.state_dict()
copied = 0
for k, v in msd.items():
    if k in dsd and dsd[k].shape == v.shape:
        v.copy_(dsd[k])
        copied += 1
    elif k in dsd and ".m." in k and k.startswith("model.24."):
        # Segment output conv: (3 * 117, ...) from Detect's (3 * 85, ...)
        for a in range(3):
            v[a * 117:a * 117 + 85] = dsd[k][a * 85:(a + 1) * 85]
        copied += 1
m.load_state_dict(msd)
m.names = names
m.nc = 80  # as train.py sets it
ckpt = {"epoch": -1, "best_fitness": None, "model": m.half(), "ema": None, "updates": None,
        "optimizer": None, "opt": None, "git": None, "date": None}
torch.save(ckpt, os.path.join(out, "yolov5n-seg.pt"))
print(f"{copied} of {len(msd)} tensors from yolov5n.pt", file=sys.stderr)

# segment/val.py
import segment.val as sv  # noqa: E402

res = sv.run(data=os.path.join(out, "seg.yaml"), weights=os.path.join(out, "yolov5n-seg.pt"),
             batch_size=8, imgsz=imgsz, device="cpu", half=False, plots=False,
             project=os.path.join(out, "runs"), name="val", exist_ok=True)
with open(os.path.join(out, "val.txt"), "w") as f:
    for v in res[0][:8]:
        f.write("%.17g\n" % v)
print("metrics", [round(float(v), 6) for v in res[0][:8]], file=sys.stderr)
