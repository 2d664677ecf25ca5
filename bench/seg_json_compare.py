#!/usr/bin/python3
"""Compares two segment/val.py-style JSON files (YOLOv5's, yolocl's), for bench/seg_val_check.sh:

    /usr/bin/python3 bench/seg_json_compare.py YOLOV5_JSON YOLOCL_JSON

Entries are paired in order (both list the detections image by image, best first); each pair
must have the same image_id and segmentation size, boxes within 0.01 pixel, and the same
category_id, or yolocl's the COCO 91-class id of YOLOv5's (yolocl maps to COCO's ids when the
names are COCO's 80, YOLOv5 only when the val path ends in coco/val2017.txt).  The
RLE strings are decoded (rleFrString's inverse of rleToString, column-major runs) and compared
pixel by pixel: prints how many strings are identical and how many pixels differ in all (a pixel
whose mask logit is within float round-off of 0 may come out either way).  Exit 1 when an entry
does not pair up or more than 1e-4 of the mask pixels differ.
"""
import json
import sys

import numpy as np


def decode(seg):
    h, w = seg["size"]
    s = seg["counts"]
    counts, p = [], 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    flat = np.zeros(h * w, np.uint8)
    pos, v = 0, 0
    for c in counts:
        flat[pos:pos + c] = v
        pos += c
        v ^= 1
    assert pos == h * w, (pos, h, w)
    return flat.reshape((w, h)).T


# utils/general.py coco80_to_coco91_class()
COCO91 = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27,
          28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52,
          53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78,
          79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90]

a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
print(f"{len(a)} detections from segment/val.py, {len(b)} from yolocl")
bad = 0 if len(a) == len(b) else 1
same = pixels = differ = 0
for i, (x, y) in enumerate(zip(a, b)):
    cat_ok = y["category_id"] in (x["category_id"],
                                  COCO91[x["category_id"]] if x["category_id"] < 80 else -1)
    if (x["image_id"] != y["image_id"] or not cat_ok or
            x["segmentation"]["size"] != y["segmentation"]["size"] or
            max(abs(p - q) for p, q in zip(x["bbox"], y["bbox"])) > 0.01):
        print("entry", i, "differs:", x, y)
        bad += 1
        if bad > 5:
            break
        continue
    same += x["segmentation"]["counts"] == y["segmentation"]["counts"]
    ma, mb = decode(x["segmentation"]), decode(y["segmentation"])
    pixels += ma.size
    differ += int((ma != mb).sum())
print(f"RLE strings identical: {same} of {min(len(a), len(b))}; mask pixels differing: {differ} "
      f"of {pixels}")
sys.exit(1 if bad or differ > 1e-4 * max(pixels, 1) else 0)
