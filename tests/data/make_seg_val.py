#!/usr/bin/python3
"""tests/data/seg/val_ref.txt: what YOLOv5 v7.0's segment/val.py reports for the tiny segmentation
model of tests/data/seg/tiny on the polygon images a, b and c of tests/data/segdata, for
test_val_seg.  Run from a YOLOv5 v7.0 source folder with Debian's python3-torch:
    cd /tmp/y5 && /usr/bin/python3 WORKTREE/tests/data/make_seg_val.py WORKTREE/tests/data OUT

The model: SegmentationModel(seg/tiny/yolov5n-seg-tiny.yaml, nc 3) with seg/tiny/weights.safetensors
(its random initialisation; no training), saved as a YOLOv5 checkpoint (float32) in a temporary folder with
the dataset (images a, b, c and their labels, names c0 c1 c2).  run(batch_size 2, imgsz 64,
conf 0.001, iou 0.6, device cpu, half False, plots False): standalone segment/val.py, so
overlap=False and mask_downsample_ratio=1.  OUT gets the 8 metrics (box P R mAP50 mAP50-95, mask
P R mAP50 mAP50-95) with 17 significant digits, one per line, a ninth line with the number of
detections kept, and the tenth and eleventh with the number of detections correct at IoU 0.5 for
boxes and for masks (the statistics val.py computes its metrics from).  Then the same model and
images validated as segment/train.py validates each epoch: run(model=..., dataloader=...) with
the overlap masks at ratio 4 (create_dataloader(..., rect=True, pad=0.5, mask_downsample_ratio=4,
overlap_mask=True), batch 2, imgsz 64) and ComputeLoss(model, overlap=True) with hyp.scratch-low
scaled as segment/train.py scales it (box * 3/nl, cls * nc/80 * 3/nl, obj * (64/640)^2 * 3/nl,
label smoothing 0): lines 12 to 19 its 8 metrics, 20 to 23 its losses box, seg, obj, cls."""
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np
import torch

data, out = sys.argv[1], sys.argv[2]
cfg_dir = os.environ.setdefault("YOLOV5_CONFIG_DIR", tempfile.mkdtemp(prefix="yolov5-cfg-"))
if not os.path.exists(os.path.join(cfg_dir, "Arial.ttf")):  # no network: check_dataset's font
    import matplotlib

    shutil.copy(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf"),
                os.path.join(cfg_dir, "Arial.ttf"))
sys.path.insert(0, os.getcwd())
from models.yolo import SegmentationModel  # noqa: E402
import segment.val as sv  # noqa: E402


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        base = 8 + n
        buf = open(path, "rb").read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        dt = {"F32": np.float32, "I64": np.int64, "F16": np.float16}[v["dtype"]]
        out[k] = torch.from_numpy(np.frombuffer(buf[base + a:base + b], dtype=dt).reshape(v["shape"]).copy())
    return out


tmp = tempfile.mkdtemp(prefix="segval-")
for sub in ("images", "labels"):
    os.makedirs(os.path.join(tmp, sub))
for name in "abc":
    shutil.copy(os.path.join(data, "segdata", "images", name + ".png"), os.path.join(tmp, "images"))
    shutil.copy(os.path.join(data, "segdata", "labels", name + ".txt"), os.path.join(tmp, "labels"))
with open(os.path.join(tmp, "data.yaml"), "w") as f:
    f.write(f"path: {tmp}\ntrain: images\nval: images\nnames: [c0, c1, c2]\n")

m = SegmentationModel(os.path.join(data, "seg", "tiny", "yolov5n-seg-tiny.yaml"), ch=3, nc=3)
sd = read_st(os.path.join(data, "seg", "tiny", "weights.safetensors"))
msd = m.state_dict()
for k in msd:
    msd[k].copy_(sd[k].to(msd[k].dtype))
m.names, m.nc = ["c0", "c1", "c2"], 3
# saved in float32 (attempt_load converts to float anyway), so that both runs and yolocl see the
# weights of the safetensors file unrounded
torch.save({"epoch": -1, "model": m, "ema": None, "updates": None, "optimizer": None},
           os.path.join(tmp, "tiny-seg.pt"))

# count the statistics val.py computes its metrics from
seen = {}
orig = sv.ap_per_class_box_and_mask


def spy(tp_m, tp_b, conf, pred_cls, target_cls, **kw):
    seen["ap"] = True
    return orig(tp_m, tp_b, conf, pred_cls, target_cls, **kw)


sv.ap_per_class_box_and_mask = spy
orig_pb = sv.process_batch


def spy_pb(detections, labels, iouv, pred_masks=None, gt_masks=None, overlap=False, masks=False):
    c = orig_pb(detections, labels, iouv, pred_masks, gt_masks, overlap, masks)
    key = "mask" if masks else "box"
    seen[key] = seen.get(key, 0) + int(c[:, 0].sum())
    if not masks:
        seen["n"] = seen.get("n", 0) + len(detections)
    return c


sv.process_batch = spy_pb
res = sv.run(data=os.path.join(tmp, "data.yaml"), weights=os.path.join(tmp, "tiny-seg.pt"),
             batch_size=2, imgsz=64, device="cpu", half=False, plots=False,
             project=os.path.join(tmp, "runs"), name="val", exist_ok=True)
with open(out, "w") as f:
    for v in res[0][:8]:
        f.write("%.17g\n" % v)
    f.write("%d\n%d\n%d\n" % (seen.get("n", -1), seen.get("box", -1), seen.get("mask", -1)))
print([round(float(v), 5) for v in res[0][:8]], seen)

# segment/train.py's validation: overlap masks at ratio 4, the loss
import yaml  # noqa: E402
from utils.segment.dataloaders import create_dataloader  # noqa: E402
from utils.segment.loss import ComputeLoss  # noqa: E402

hyp = yaml.safe_load(open("data/hyps/hyp.scratch-low.yaml"))
nl = 3
hyp["box"] *= 3 / nl
hyp["cls"] *= 3 / 80 * 3 / nl
hyp["obj"] *= (64 / 640) ** 2 * 3 / nl
hyp["label_smoothing"] = 0.0
m.hyp = hyp
loader = create_dataloader(os.path.join(tmp, "images"), 64, 2, 32, hyp=hyp, rect=True, pad=0.5,
                           workers=0, mask_downsample_ratio=4, overlap_mask=True,
                           prefix="val: ")[0]
res2 = sv.run(data={"nc": 3, "names": ["c0", "c1", "c2"], "val": os.path.join(tmp, "images")},
              batch_size=2, imgsz=64, half=False, model=m.eval(), dataloader=loader,
              save_dir=__import__("pathlib").Path(tmp), plots=False,
              compute_loss=ComputeLoss(m, overlap=True), overlap=True, mask_downsample_ratio=4)
with open(out, "a") as f:
    for v in res2[0][:12]:
        f.write("%.17g\n" % v)
print([round(float(v), 6) for v in res2[0][:12]])
shutil.rmtree(tmp)
