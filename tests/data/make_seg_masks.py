#!/usr/bin/python3
"""tests/data/seg/masks.safetensors: YOLOv5 v7.0's mask functions on a small random case, for
test_masks.  Run from a YOLOv5 v7.0 source folder with Debian's python3-torch:
    cd /tmp/y5 && /usr/bin/python3 WORKTREE/tests/data/make_seg_masks.py OUT.safetensors

Case: an input of 32x40 pixels (ih x iw), nm 6 prototypes of 8x10 (4 of them near the labels'
ellipses, so that masks match), 6 detections (boxes near the labels' and 2 random, classes 0..2)
and 4 labels whose masks are ellipses.  Stored:
  proto (6,8,10), coef (6,6), dets (6,6) x1 y1 x2 y2 conf cls in input pixels,
  pm_proto (6,8,10)     process_mask(proto, coef, boxes, (32, 40))               (0/1)
  pm_up (3,32,40)        process_mask(..., upsample=True) of the first 3 detections (0/1)
  pm_upcrop (3,32,40)    process_mask_upsample(proto, coef, boxes, (32, 40)), the same 3
  interp (2,8,10)       F.interpolate(interp_in[None], (8, 10), bilinear)[0] of interp_in (2,5,7)
  gt_overlap (1,16,20)   the labels' masks in the overlap format (value l+1), at half the input
  (gt_masks             the labels' masks one per label at the input size: gt_overlap's
                         pixels repeated 2x2, made again by the test)
  labels (4,5)           cls x1 y1 x2 y2 (input pixels)
  iou_overlap (4,6)      mask_iou of the overlap masks (resized to 8x10, > 0.5) and pm_proto
  iou_single (4,6)       the same from gt_masks
  correct_overlap (6,10) process_batch(dets, labels, iouv, pm_proto, gt_overlap, overlap=True,
                         masks=True), 0/1
  correct_single (6,10)  process_batch(..., gt_masks, overlap=False, masks=True)
  pred (1,100,12)        random rows cx cy w h obj cls0..2 coef0..3 (nc 3, nm 4)
  nms (k,10)             non_max_suppression(pred, 0.25, 0.45, nm=4)[0]: x1 y1 x2 y2 conf cls
                         coef0..3
  contour_masks (12,16,18)  0/1 masks: thresholded smoothed noise (several components, holes,
                         components inside holes), a single pixel, a line, a ring with
                         components in its hole
  contour_n (12)         the point count of masks2segments(strategy='largest') of each
  contour_pts (sum n,2)  their points, concatenated
  nms_multi (k,10)       the same with conf 0.001, iou 0.6, multi_label=True, max_det 100
"""
import sys, os, json, struct
import numpy as np, torch
import torch.nn.functional as F
sys.path.insert(0, os.getcwd())
from utils.segment.general import process_mask, process_mask_upsample, mask_iou
from utils.general import non_max_suppression
from segment.val import process_batch


def write_st(path, tensors):
    hdr, off, blobs = {}, 0, []
    for k, t in tensors.items():
        a = t.detach().contiguous().float().numpy().astype(np.float32)
        b = a.tobytes(); hdr[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    h = json.dumps(hdr, separators=(",", ":")).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(b) for b in blobs]


torch.manual_seed(3)
ih, iw, nm, mh, mw = 32, 40, 6, 8, 10
proto = torch.randn(nm, mh, mw) * 2
coef = torch.randn(6, nm)


def rand_boxes(n):
    xy = torch.rand(n, 2) * torch.tensor([iw * 0.7, ih * 0.7])
    wh = torch.rand(n, 2) * torch.tensor([iw * 0.5, ih * 0.5]) + 6
    b = torch.cat((xy, xy + wh), 1)
    b[:, 0::2] = b[:, 0::2].clamp(0, iw)
    b[:, 1::2] = b[:, 1::2].clamp(0, ih)
    return b


lbox = rand_boxes(4)
lcls = torch.tensor([0., 1., 0., 2.])
# detections near the labels (so that some masks match), then two random ones
dbox = torch.cat((lbox + torch.randn(4, 4) * 2, rand_boxes(2)), 0)
dbox[:, 0::2] = dbox[:, 0::2].clamp(0, iw)
dbox[:, 1::2] = dbox[:, 1::2].clamp(0, ih)
conf = torch.sort(torch.rand(6), descending=True)[0]
dcls = torch.tensor([0., 1., 0., 2., 1., 0.])
dets = torch.cat((dbox, conf[:, None], dcls[:, None]), 1)

# coefficients that make each detection's mask its label's ellipse roughly: fit by least squares
yy, xx = torch.meshgrid(torch.arange(mh).float() + 0.5, torch.arange(mw).float() + 0.5, indexing="ij")


def ellipse(b, h, w, scale):
    yy, xx = torch.meshgrid(torch.arange(h).float() + 0.5, torch.arange(w).float() + 0.5, indexing="ij")
    cx, cy = (b[0] + b[2]) / 2 * scale, (b[1] + b[3]) / 2 * scale
    rx, ry = (b[2] - b[0]) / 2 * scale, (b[3] - b[1]) / 2 * scale
    return (((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1).float()


# prototypes 0..3 are the labels' ellipses (+-3), 4..5 noise; detection k < 4 mostly picks
# prototype k, so its mask is near label k's
for k in range(4):
    proto[k] = ellipse(lbox[k], mh, mw, mw / iw) * 6 - 3 + torch.randn(mh, mw) * 0.5
    coef[k] = torch.randn(nm) * 0.2
    coef[k, k] = 2.0

pm_proto = process_mask(proto, coef, dets[:, :4], (ih, iw))
pm_up = process_mask(proto, coef, dets[:, :4], (ih, iw), upsample=True)[:3]
pm_upcrop = process_mask_upsample(proto, coef, dets[:, :4], (ih, iw))[:3]

interp_in = torch.rand(2, 5, 7)
interp = F.interpolate(interp_in[None], (mh, mw), mode="bilinear", align_corners=False)[0]

gt_overlap = torch.zeros(1, ih // 2, iw // 2)
gt_masks = torch.zeros(4, ih, iw)
for l in range(4):
    gt_overlap[0][ellipse(lbox[l], ih // 2, iw // 2, 0.5) > 0] = l + 1
for l in range(4):
    gt_masks[l] = (gt_overlap[0] == l + 1).float().repeat_interleave(2, 0).repeat_interleave(2, 1)
labels = torch.cat((lcls[:, None], lbox), 1)


def ious(gt, overlap):
    if overlap:
        nl = 4
        index = torch.arange(nl).view(nl, 1, 1) + 1
        gt = torch.where(gt.repeat(nl, 1, 1) == index, 1.0, 0.0)
    gt = F.interpolate(gt[None], (mh, mw), mode="bilinear", align_corners=False)[0].gt_(0.5)
    return mask_iou(gt.view(gt.shape[0], -1), pm_proto.view(pm_proto.shape[0], -1))


iouv = torch.linspace(0.5, 0.95, 10)
correct_overlap = process_batch(dets, labels, iouv, pm_proto, gt_overlap, overlap=True, masks=True)
correct_single = process_batch(dets, labels, iouv, pm_proto, gt_masks, overlap=False, masks=True)

pred = torch.rand(1, 100, 12)
pred[..., :2] *= 64
pred[..., 2:4] = pred[..., 2:4] * 20 + 2
pred[..., 4] = pred[..., 4] ** 0.5
pred[..., 8:] = torch.randn(1, 100, 4)
nms = non_max_suppression(pred.clone(), 0.25, 0.45, nm=4)[0]
nms_multi = non_max_suppression(pred.clone(), 0.001, 0.6, multi_label=True, max_det=100, nm=4)[0]

from utils.segment.general import masks2segments
g = torch.Generator().manual_seed(5)
cm = []
for k in range(9):
    noise = torch.rand(1, 1, 8, 9, generator=g)
    up = F.interpolate(noise, (16, 18), mode="bilinear", align_corners=False)[0, 0]
    cm.append((up > 0.45 + 0.02 * k).float())
one = torch.zeros(16, 18); one[5, 7] = 1
line = torch.zeros(16, 18); line[3, 2:12] = 1; line[4:9, 11] = 1
ring = torch.zeros(16, 18); ring[2:14, 2:16] = 1; ring[4:12, 4:14] = 0; ring[6:10, 6:9] = 1; ring[7, 11] = 1
cm += [one, line, ring]
contour_masks = torch.stack(cm)
segs = masks2segments(contour_masks)
contour_n = torch.tensor([len(x) for x in segs]).float()
contour_pts = torch.from_numpy(np.concatenate([x.reshape(-1, 2) for x in segs if len(x)]))

write_st(sys.argv[1], {
    "contour_masks": contour_masks, "contour_n": contour_n, "contour_pts": contour_pts,
    "proto": proto, "coef": coef, "dets": dets, "pm_proto": pm_proto, "pm_up": pm_up,
    "pm_upcrop": pm_upcrop, "interp_in": interp_in, "interp": interp, "gt_overlap": gt_overlap,
    "labels": labels, "iou_overlap": ious(gt_overlap, True),
    "iou_single": ious(gt_masks, False), "correct_overlap": correct_overlap.float(),
    "correct_single": correct_single.float(), "pred": pred, "nms": nms, "nms_multi": nms_multi})
print("matches per threshold", correct_overlap.sum(0).tolist(), correct_single.sum(0).tolist())
