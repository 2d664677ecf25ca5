"""Reference masks of the tiny polygon dataset from YOLOv5 v7.0 itself (run with /usr/bin/python3
from this folder: `/usr/bin/python3 seg_ref.py /tmp/y5 > seg_ref.txt`).

Part 1, validation samples: LoadImagesAndLabelsAndMasks(augment=False, rect=True, img_size=128,
batch_size=2, stride=32, pad=0.5) on a copy of images/ and labels/ (YOLOv5 writes its cache
beside the labels), overlap with ratio 4 and no overlap with ratio 2: per image (d.png, whose
labels are boxes, is left out: YOLOv5 fails on it) the labels and the masks.
Part 2, polygons2masks_overlap on random polygons (some empty, some partly outside, ties of
area) at 40 x 56, ratios 1, 2, 4 and 8: the order and the combined map.
Part 3, utils/segment/augmentations.py random_perspective with its draws fixed: the draws, the
targets and segments in, and the targets out with the first 3 points of each segment out.
Part 4, utils/augmentations.py copy_paste with random.sample fixed on a pattern image: targets and
segments in, the targets out, the polygons added and the pixels changed.

Text format, one item per line: `case ...` headers, then numbers separated by spaces; masks as
rows of digits (values < 10)."""
import os
import random
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, sys.argv[1])
from utils.segment.dataloaders import LoadImagesAndLabelsAndMasks, polygons2masks_overlap  # noqa
from utils.segment import augmentations as segaug  # noqa

here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp()
for d in ('images', 'labels'):
    shutil.copytree(os.path.join(here, d), os.path.join(tmp, d))
    os.remove(os.path.join(tmp, d, 'd.txt' if d == 'labels' else 'd.png'))
hyp = {k: 0.0 for k in ('degrees', 'translate', 'scale', 'shear', 'perspective', 'mosaic', 'mixup',
                        'copy_paste', 'hsv_h', 'hsv_s', 'hsv_v', 'flipud', 'fliplr')}


def digits(m):
    return '\n'.join(''.join(str(int(v)) for v in row) for row in m)


for overlap, ratio in ((True, 4), (False, 2)):
    ds = LoadImagesAndLabelsAndMasks(os.path.join(tmp, 'images'), img_size=128, batch_size=2,
                                     augment=False, hyp=hyp, rect=True, stride=32, pad=0.5,
                                     downsample_ratio=ratio, overlap=overlap, prefix='')
    for i in range(len(ds)):
        img, labels, path, shapes, masks = ds[i]
        name = os.path.basename(path)
        print(f'case val {int(overlap)} {ratio} {name} {img.shape[1]} {img.shape[2]} '
              f'{len(labels)} {masks.shape[0]} {masks.shape[1]} {masks.shape[2]}')
        for r in labels.numpy():
            print(' '.join(f'{v:.9g}' for v in r[1:]))
        for m in masks.numpy():
            print(digits(m))
shutil.rmtree(tmp)

rng = np.random.default_rng(3)
for t in range(12):
    ratio = (1, 2, 4, 8)[t % 4]
    h, w = 40, 56
    segs = []
    for k in range(int(rng.integers(1, 7))):
        n = int(rng.integers(3, 9))
        c = rng.uniform(-5, [w + 5, h + 5])
        p = c + rng.uniform(-15, 15, size=(n, 2))
        if k == 2:
            p = p * 0 + [-3.0, -4.0]  # empty after the fill's clipping
        segs.append(p.astype(np.float32))
    if t == 5:
        segs.append(segs[0].copy())  # equal areas
    masks, idx = polygons2masks_overlap((h, w), segs, downsample_ratio=ratio)
    print(f'case overlap {ratio} {h} {w} {len(segs)}')
    for s in segs:
        print(len(s), ' '.join(f'{v:.9g}' for v in s.reshape(-1)))
    print(' '.join(str(int(i)) for i in idx))
    print(digits(masks))

# random_perspective: patch random.uniform to return the fixed draws
for t, (border, persp) in enumerate(((0, 0.0), (-32, 0.0), (0, 0.0004))):
    h, w = 96, 128
    draws = [rng.uniform(-persp, persp) if persp else 0.0, rng.uniform(-persp, persp) if persp else 0.0,
             rng.uniform(-20, 20), rng.uniform(0.5, 1.5), rng.uniform(-5, 5), rng.uniform(-5, 5),
             rng.uniform(0.4, 0.6), rng.uniform(0.4, 0.6)]
    it = iter(draws)
    orig = random.uniform
    random.uniform = lambda a, b: next(it)
    im = np.full((h, w, 3), 114, np.uint8)
    segs, targets = [], []
    for k in range(5):
        n = int(rng.integers(3, 12))
        p = (rng.uniform([10, 10], [w - 10, h - 10]) + rng.uniform(-30, 30, size=(n, 2))).astype(np.float32)
        segs.append(p)
        targets.append([k, p[:, 0].min(), p[:, 1].min(), p[:, 0].max(), p[:, 1].max()])
    targets = np.array(targets, np.float32)
    segs_in = [s.copy() for s in segs]
    _, tout, sout = segaug.random_perspective(im, targets.copy(), segs, degrees=20, translate=0.1,
                                              scale=0.5, shear=5, perspective=persp,
                                              border=(border, border))
    random.uniform = orig
    print(f'case persp {h} {w} {border} {int(persp != 0)} {len(segs_in)} {len(tout)}')
    print(' '.join(f'{v:.17g}' for v in draws))
    for tr, s in zip(targets, segs_in):
        print(' '.join(f'{v:.9g}' for v in tr), len(s), ' '.join(f'{v:.9g}' for v in s.reshape(-1)))
    for tr, s in zip(tout, sout):
        print(' '.join(f'{v:.9g}' for v in tr), ' '.join(f'{v:.17g}' for v in s[:3].reshape(-1)),
              ' '.join(f'{v:.17g}' for v in s[-1]))

# copy_paste with random.sample fixed: targets out, the polygons added, the pixels changed
from utils import augmentations as detaug  # noqa: E402
for t, chosen in enumerate(([2, 0, 3], [1, 3, 0, 2])):
    h, w = 64, 80
    yy, xx = np.mgrid[0:h, 0:w]
    im = np.stack([(xx * 7 + yy * 3) % 256, (xx * 5 + yy * 11) % 256, (xx + yy * 13) % 256],
                  2).astype(np.uint8)
    segs, targets = [], []
    for k in range(4):
        n = int(rng.integers(3, 9))
        c = rng.uniform([8, 8], [w * (0.5 if k % 2 else 1) - 8, h - 8])
        p = np.clip(c + rng.uniform(-12, 12, size=(n, 2)), 0, [w, h]).astype(np.float32)
        segs.append(p)
        targets.append([k, p[:, 0].min(), p[:, 1].min(), p[:, 0].max(), p[:, 1].max()])
    targets = np.array(targets, np.float32)
    print(f'case paste {h} {w} {len(segs)} {len(chosen)}', ' '.join(str(c) for c in chosen))
    for tr, s in zip(targets, segs):
        print(' '.join(f'{v:.9g}' for v in tr), len(s), ' '.join(f'{v:.9g}' for v in s.reshape(-1)))
    orig = random.sample
    random.sample = lambda population, k: list(chosen)
    im0 = im.copy()
    im2, tout, sout = detaug.copy_paste(im, targets, segs, p=len(chosen) / 4)
    random.sample = orig
    print(len(tout), len(sout))
    for tr in tout:
        print(' '.join(f'{v:.9g}' for v in tr))
    for s in sout[4:]:
        print(len(s), ' '.join(f'{v:.9g}' for v in s.reshape(-1)))
    changed = np.nonzero((im2 != im0).any(2).reshape(-1))[0]
    print(len(changed), ' '.join(str(int(i)) for i in changed))
