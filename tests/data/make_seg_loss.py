#!/usr/bin/env python3
"""The segmentation loss fixtures of test_segment: YOLOv5 v7.0's utils/segment/loss.py on random
inputs.  Run from a YOLOv5 v7.0 source folder with Debian's python3-torch:

    /usr/bin/python3 tests/data/make_seg_loss.py OUT.safetensors               (loss.safetensors)
    /usr/bin/python3 tests/data/make_seg_loss.py --no-overlap OUT.safetensors  (loss_nooverlap)

Inputs: 2 images, nc 3, nm 4, na 3, grids 8x8, 4x4, 2x2 (a 64x64 image), prototypes 16x16, target
rows not sorted by image (build_targets numbers them by position: image 0's first, then image 1's),
masks at 24x24 (so the loss resizes them by nearest neighbour, by 2/3):
  - ComputeLoss(overlap=True): masks in the overlap format (2,24,24), a box-shaped region per
    target;
  - --no-overlap, ComputeLoss(overlap=False) as segment/train.py --no-overlap trains: one 0/1 mask
    per target row (5,24,24), ellipses of which two of image 0's overlap (which the overlap format
    cannot hold).
Stored: `p0..p2` (2,3,ny,nx,12) raw outputs, `proto` (2,4,16,16), `targets` (5,6), `masks`,
`loss` [total, box, seg, obj, cls], `grad_p0..2` and `grad_proto` (d total / d input); the hyps
(and overlap False) in the metadata."""
import sys, os, json, struct
import numpy as np, torch
sys.path.insert(0, os.getcwd())
from utils.segment.loss import ComputeLoss


def write_st(path, tensors, meta):
    hdr, off, blobs = {}, 0, []
    for k, t in tensors.items():
        a = t.detach().contiguous().numpy().astype(np.float32)
        b = a.tobytes(); hdr[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    hdr["__metadata__"] = {k: str(v) for k, v in meta.items()}
    h = json.dumps(hdr, separators=(",", ":")).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(b) for b in blobs]


class Head(torch.nn.Module):  # what ComputeLoss reads of a Segment head
    def __init__(self):
        super().__init__()
        self.stride = torch.tensor([8.0, 16.0, 32.0])
        px = torch.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]])
        self.anchors = px.float().view(3, 3, 2) / self.stride.view(-1, 1, 1)
        self.na, self.nc, self.nl, self.nm = 3, 3, 3, 4
        self.w = torch.nn.Parameter(torch.zeros(1))


class Model(torch.nn.Module):
    def __init__(self, hyp):
        super().__init__()
        self.model = torch.nn.ModuleList([Head()])
        self.hyp = hyp


overlap = "--no-overlap" not in sys.argv[1:]
out = [a for a in sys.argv[1:] if a != "--no-overlap"][0]
if overlap:
    torch.manual_seed(11)
nl, img = 3, 64
hyp = {"box": 0.05, "obj": 1.0, "cls": 0.5, "cls_pw": 1.0, "obj_pw": 1.0, "anchor_t": 4.0, "fl_gamma": 0.0,
       "label_smoothing": 0.0}
hyp["box"] *= 3 / nl; hyp["cls"] *= 3 / 80 * 3 / nl; hyp["obj"] *= (img / 640) ** 2 * 3 / nl
# image, class, x, y, w, h: image 1's rows first (without overlap, image 0's second and fourth
# rows' masks overlap)
targets = torch.tensor([[1, 1, 0.40, 0.50, 0.50, 0.70], [0, 0, 0.50, 0.45, 0.60, 0.50],
                        [1, 0, 0.72, 0.26, 0.22, 0.30], [0, 2, 0.30, 0.62, 0.25, 0.30],
                        [0, 1, 0.70, 0.30, 0.20, 0.15]])
if not overlap:
    torch.manual_seed(12)
p = [(torch.rand(2, 3, g, g, 12) * 3 - 1.5).requires_grad_() for g in (8, 4, 2)]
proto = (torch.rand(2, 4, 16, 16) * 2 - 1).requires_grad_()
ys, xs = torch.meshgrid(torch.arange(24) + 0.5, torch.arange(24) + 0.5, indexing="ij")
if overlap:
    masks = torch.zeros(2, 24, 24)
    for b in (0, 1):  # build_targets' numbering: image 0's rows get 1, 2, ... by position, then image 1's
        k = 0
        for t in targets:
            if int(t[0]) == b:
                k += 1
                _, _, x, y, w, h = t.tolist()
                inside = ((xs / 24 - x).abs() < w * 0.4) & ((ys / 24 - y).abs() < h * 0.4)
                masks[b][inside] = k
else:
    masks = torch.zeros(len(targets), 24, 24)
    for i, t in enumerate(targets):
        _, _, x, y, w, h = t.tolist()  # an ellipse inside the box, reaching past 0.4 of its size
        masks[i][((xs / 24 - x) / (w * 0.55)) ** 2 + ((ys / 24 - y) / (h * 0.55)) ** 2 < 1] = 1
loss, items = ComputeLoss(Model(hyp), overlap=overlap)((p, proto), targets, masks)
loss.backward()
t = {f"p{i}": x for i, x in enumerate(p)}
t.update({"proto": proto, "targets": targets, "masks": masks, "loss": torch.cat((loss.detach().view(1), items))})
t.update({f"grad_p{i}": x.grad for i, x in enumerate(p)})
t["grad_proto"] = proto.grad
meta = {"torch": torch.__version__, **hyp} if overlap else {"torch": torch.__version__, "overlap": False, **hyp}
write_st(out, t, meta)
print("loss" if overlap else "loss (overlap=False)", loss.item(), items.tolist())
