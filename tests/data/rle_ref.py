#!/usr/bin/python3
"""Makes rle_ref.txt, the fixture of test_seg_plots' COCO RLE check: masks and the strings
pycocotools.mask.encode gives them, from a transcription of pycocotools' documented algorithm
(maskApi.c rleEncode and rleToString), as /usr/bin/python3 here has no pycocotools.

rleEncode: the mask flattened in Fortran (column-major) order, the lengths of alternating runs
of 0s and 1s starting with 0s.  rleToString: each count (from the fourth on, minus the count two
places before) written 5 bits at a time, low bits first, a character c | 0x20 while more follow,
the end decided by the sign bit 0x10, plus 48.  Python's >> on a negative int floors, as the C
code's arithmetic shift.

Each line: h w hex(row-major bits packed 4 per digit, most significant first, padded) string.
Run: /usr/bin/python3 tests/data/rle_ref.py > tests/data/rle_ref.txt
Imported, its encode() stands in for pycocotools.mask.encode (bench/seg_json_ref.py).
"""
import numpy as np


def rle_counts(mask):
    flat = np.asarray(mask, dtype=np.uint8).flatten(order="F")
    counts, prev, run = [], 0, 0
    for v in flat:
        v = 1 if v else 0
        if v != prev:
            counts.append(run)
            run, prev = 0, v
        run += 1
    counts.append(run)
    return counts


def rle_string(counts):
    out = []
    for i, x in enumerate(counts):
        if i > 2:
            x -= counts[i - 2]
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = (x != -1) if (c & 0x10) else (x != 0)
            if more:
                c |= 0x20
            out.append(chr(c + 48))
    return "".join(out)


def to_hex(mask):
    bits = "".join("1" if v else "0" for v in np.asarray(mask).reshape(-1))
    bits += "0" * (-len(bits) % 4)
    return "".join("%x" % int(bits[i:i + 4], 2) for i in range(0, len(bits), 4))


def masks():
    rng = np.random.default_rng(7)
    yield np.zeros((3, 3), np.uint8)
    yield np.ones((2, 2), np.uint8)
    # a disc, a box touching the first pixel, and the two side by side: runs longer than 31,
    # falling differences (negative deltas)
    h, w = 37, 53
    yy, xx = np.mgrid[0:h, 0:w]
    disc = ((yy - 18) ** 2 + (xx - 30) ** 2 < 12 ** 2).astype(np.uint8)
    yield disc
    box = np.zeros((h, w), np.uint8)
    box[0:20, 0:9] = 1
    yield box
    yield disc | box
    # a thin diagonal, scattered pixels, a tall mask with runs over 1024
    yield (np.abs(yy - xx) < 2).astype(np.uint8)
    yield (rng.random((29, 31)) < 0.3).astype(np.uint8)
    tall = np.zeros((1200, 3), np.uint8)
    tall[5:1150, 1] = 1
    tall[:, 2] = 1
    yield tall


def encode(masks_hwn):
    """pycocotools.mask.encode's result for an h x w x n uint8 array: a list of
    {"size": [h, w], "counts": bytes} (bench/seg_json_ref.py stands it in for pycocotools)."""
    h, w, n = masks_hwn.shape
    return [{"size": [h, w], "counts": rle_string(rle_counts(masks_hwn[:, :, i])).encode()}
            for i in range(n)]


if __name__ == "__main__":
    for m in masks():
        print(m.shape[0], m.shape[1], to_hex(m), rle_string(rle_counts(m)))
