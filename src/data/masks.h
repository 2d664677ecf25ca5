/* Polygon masks as YOLOv5 v7.0's segmentation loader makes them (utils/segment/dataloaders.py
 * polygon2mask, polygons2masks, polygons2masks_overlap), pixel for pixel:
 *   - a polygon's points are truncated to int32 (numpy's astype: toward zero; NaN or out of
 *     range gives INT32_MIN as on x86), then clamped to +-2^22 pixels: the fill walks every row
 *     from the top vertex down, so a point far outside (a perspective warp near its horizon)
 *     would cost seconds; such a polygon's pixels may then differ from cv2's,
 *   - filled with OpenCV's cv2.fillPoly (8-connected outline, shift 0): the outline drawn with
 *     Bresenham lines clipped to the image, the interior by a scanline fill over the polygon's
 *     non-horizontal edges in 16.16 fixed point (OpenCV 4.6's drawing.cpp CollectPolyEdges and
 *     FillEdgeCollection),
 *   - at the image size, then resized by cv2.resize INTER_LINEAR to (h / ratio, w / ratio): for a
 *     0/1 image and an integer ratio that is, per output pixel, the source pixel at ratio * i +
 *     (ratio - 1) / 2 for an odd ratio, and for an even one 1 when at least 2 of the 2x2 source
 *     pixels from ratio * i + ratio / 2 - 1 are set (bilinear weights 1/2, rounded half up).
 *
 * Polygons are given as (x, y) pairs in pixels of the image, doubles (YOLOv5 holds them as
 * float32 or float64 arrays: both are exact in a double).  Nothing here allocates but the
 * scratch, which grows to the largest image seen and is reused. */
#ifndef YC_MASKS_H
#define YC_MASKS_H

#include <stddef.h>
#include <stdint.h>

/* Scratch for the rasteriser: a full-size image and the edge list.  Zero-initialise
 * (YC_MASK_SCRATCH_INIT), free with yc_mask_scratch_free. */
typedef struct yc_mask_scratch {
    /* full-size uint8 image (cap_px bytes) */
    uint8_t *full;
    size_t cap_px;
    /* the polygon's int points (2 x cap_pts int32) */
    int32_t *ipts;
    size_t cap_pts;
    /* the fill's edges (opaque, cap_edges of them) */
    void *edges;
    size_t cap_edges;
    /* per polygon mask areas and argsort order (cap_polys entries each) */
    double *keys;
    ptrdiff_t *order;
    size_t cap_polys;
    /* the per polygon downsampled masks of polygons2masks_overlap (cap_small bytes) */
    uint8_t *small;
    size_t cap_small;
} yc_mask_scratch;

#define YC_MASK_SCRATCH_INIT {NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0, NULL, 0}

void yc_mask_scratch_free(yc_mask_scratch *s);

/* cv2.fillPoly(img, [pts], color) for one polygon of n integer points (x, y pairs) on an h x w
 * uint8 image, LINE_8, shift 0.  Returns YC_OK or YC_ENOMEM. */
int yc_fill_poly(yc_mask_scratch *s, uint8_t *img, int h, int w, const int32_t *pts, size_t n,
                 uint8_t color);

/* cv2.resize(src, (w / ratio, h / ratio)) with INTER_LINEAR of an h x w uint8 image whose values
 * are 0 or 1; ratio >= 1 divides h and w (ratio 1 copies). */
void yc_mask_downsample(const uint8_t *src, int h, int w, int ratio, uint8_t *dst);

/* cv2.resize(src, (ow, oh)) with INTER_LINEAR of a uint8 h x w image (rows `stride` bytes
 * apart) into oh x ow bytes, bit for bit as OpenCV 4's fixed-point path computes it: weights
 * rounded to 1/2048, the columns clamped at the edges with a zero fraction, the rows clipped
 * with their weights kept, and the vertical sum truncated as its SIMD code does
 * (((r0 >> 4) * b0 >> 16) + ((r1 >> 4) * b1 >> 16) + 2) >> 2.  (A 0/1 mask resized this way is
 * not the float bilinear value thresholded at 0.5: about 5% of the pixels of a noisy mask at a
 * non-integer ratio differ.)  Checked against cv2 4.6 on random masks, up- and downscaled, by
 * tests/data/make_cv_resize.py.  YC_EFORMAT for empty sizes, YC_ENOMEM. */
int yc_resize_u8_linear(const uint8_t *src, int h, int w, size_t stride, uint8_t *dst, int oh,
                        int ow);

/* polygon2mask(img_size=(h, w), [polygon], color=1, downsample_ratio=ratio): the (h / ratio) x
 * (w / ratio) 0/1 mask of a polygon of n points (xy: 2n doubles, pixels) into dst.  ratio >= 1
 * must divide h and w (YC_EUSAGE otherwise). */
int yc_polygon2mask(yc_mask_scratch *s, int h, int w, int ratio, const double *xy, size_t n,
                    uint8_t *dst);

/* polygons2masks_overlap: the np polygons (polygon k: counts[k] points from xy + 2 * firsts[k])
 * rasterised each as yc_polygon2mask, ordered by np.argsort(-areas) on their unsigned pixel
 * counts (so empty masks, whose negated area is 0, come first, then the largest area first; ties
 * in numpy's introsort order) into order[np], and combined into one (h / ratio) x (w / ratio)
 * map: pixel = the 1-based rank of the last polygon in that order that covers it, 0 for none
 * (computed in uint8 with YOLOv5's wrap-around when np <= 255, else in int32), as floats into
 * dst.  order may be NULL. */
int yc_polygons2masks_overlap(yc_mask_scratch *s, int h, int w, int ratio, const double *xy,
                              const size_t *firsts, const uint32_t *counts, int np, float *dst,
                              int *order);

/* polygons2masks(color=1): one 0/1 mask per polygon, np masks of (h / ratio) x (w / ratio) floats
 * into dst. */
int yc_polygons2masks(yc_mask_scratch *s, int h, int w, int ratio, const double *xy,
                      const size_t *firsts, const uint32_t *counts, int np, float *dst);

#endif
