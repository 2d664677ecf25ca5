"""Makes the tiny polygon dataset of tests/test_seg_data.c (run with /usr/bin/python3 from this
folder; cv2 and numpy).  Four small PNG images with filled shapes, their YOLOv5 segment labels
(class x1 y1 x2 y2 ... normalised), one box-only label file, one malformed polygon label."""
import os

import cv2
import numpy as np

rng = np.random.default_rng(7)
os.makedirs('images', exist_ok=True)
os.makedirs('labels', exist_ok=True)


def shape(kind, cx, cy, r, n):
    a = np.linspace(0, 2 * np.pi, n, endpoint=False) + rng.uniform(0, 1)
    if kind == 'star':
        rr = np.where(np.arange(n) % 2 == 0, r, r / 2)
    else:
        rr = np.full(n, r)
    return np.stack([cx + rr * np.cos(a), cy + rr * np.sin(a)], 1)


images = {  # name: (w, h, [(class, kind, cx, cy, r, points)])
    'a': (64, 48, [(0, 'poly', 20, 20, 14, 6), (1, 'star', 44, 28, 16, 10)]),
    'b': (48, 64, [(2, 'poly', 24, 20, 12, 5), (0, 'poly', 22, 44, 15, 8), (1, 'star', 30, 30, 8, 8)]),
    'c': (80, 60, [(1, 'poly', 40, 30, 25, 12)]),
}
for name, (w, h, objs) in images.items():
    img = np.full((h, w, 3), 40, np.uint8)
    rows = []
    for cls, kind, cx, cy, r, n in objs:
        p = shape(kind, cx, cy, r, n)
        p[:, 0] = p[:, 0].clip(0, w)
        p[:, 1] = p[:, 1].clip(0, h)
        cv2.fillPoly(img, [p.astype(np.int32)], (60 + 60 * cls, 200 - 50 * cls, 90))
        rows.append(f'{cls} ' + ' '.join(f'{x / w:.5f} {y / h:.5f}' for x, y in p))
    cv2.imwrite(f'images/{name}.png', img)
    open(f'labels/{name}.txt', 'w').write('\n'.join(rows) + '\n')
# a box label file in a polygon dataset (taller than b.png, so that the rect batches are those
# of YOLOv5 without it: seg_ref.py leaves it out)
img = np.full((80, 40, 3), 90, np.uint8)
cv2.rectangle(img, (10, 16), (30, 60), (200, 100, 50), -1)
cv2.imwrite('images/d.png', img)
open('labels/d.txt', 'w').write('0 0.50000 0.47500 0.50000 0.55000\n')
# a malformed polygon (odd number of coordinates): reported, the image skipped
cv2.imwrite('images/e.png', img)
open('labels/e.txt', 'w').write('0 0.1 0.1 0.5 0.1 0.5 0.5 0.3\n')
