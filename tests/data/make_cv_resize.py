#!/usr/bin/python3
"""Makes cv_resize_ref.txt, test_seg_plots' check of yc_resize_u8_linear (mask_eval.h): uint8
images and what OpenCV's cv2.resize(src, (ow, oh)) (INTER_LINEAR, the default) makes of them, as
segment/val.py's scale_image resizes the masks it saves in the JSON.

    /usr/bin/python3 tests/data/make_cv_resize.py > tests/data/cv_resize_ref.txt

Cases: 0/1 masks (random at densities 0.5 and 0.2, and a disc) up- and downscaled at integer and
non-integer ratios, and grey images (0..255).  Each line: h w oh ow src-hex dst-hex, two hex
digits a pixel, row-major.
"""
import cv2
import numpy as np

rng = np.random.default_rng(11)
cases = []
for (h, w, oh, ow) in [(24, 32, 43, 57), (20, 20, 13, 17), (15, 20, 30, 40), (17, 23, 40, 31),
                       (9, 31, 26, 11)]:
    cases.append((rng.random((h, w)) < 0.5).astype(np.uint8))
    cases[-1] = (cases[-1], oh, ow)
yy, xx = np.mgrid[0:21, 0:27]
cases.append((((yy - 10) ** 2 + (xx - 13) ** 2 < 64).astype(np.uint8), 37, 48))
cases.append(((rng.random((18, 22)) < 0.2).astype(np.uint8), 33, 29))
cases.append((rng.integers(0, 256, (12, 14), dtype=np.uint8), 23, 31))
cases.append((rng.integers(0, 256, (16, 16), dtype=np.uint8), 9, 12))
for src, oh, ow in cases:
    dst = cv2.resize(src, (ow, oh))
    print(src.shape[0], src.shape[1], oh, ow, src.tobytes().hex(), dst.tobytes().hex())
