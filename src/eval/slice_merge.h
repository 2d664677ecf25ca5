/* Merging the detections of overlapping slices of one image (issue 7, sliced detection), after
 * each slice's detections were mapped to whole-image pixels (yc_tile_dets_to_image).  Two methods
 * after SAHI's postprocessing (sahi/postprocess/combine.py):
 *   - NMS: greedy class-aware non-maximum suppression, the lower-scored box of a matching pair is
 *     dropped;
 *   - NMM: SAHI's greedy non-maximum merging, the lower-scored boxes matching a kept box are
 *     merged into it (enclosing box, best score), so an object cut in two by a slice border comes
 *     out whole.
 *
 * Detections are rows of YC_MERGE_DET_STRIDE floats (x1, y1, x2, y2, conf, cls) as yc_nms writes
 * them, boxes in pixels with x1 <= x2 and y1 <= y2, cls an integral class id.  Boxes of different
 * classes are never compared unless the merge is class-agnostic.  Overlaps are computed in double
 * from the float inputs; output rows are input values (merged corners are minima and maxima of
 * input corners). */
#ifndef YC_SLICE_MERGE_H
#define YC_SLICE_MERGE_H

#include <stdbool.h>
#include <stddef.h>

/* floats per detection row: x1, y1, x2, y2, conf, cls */
#define YC_MERGE_DET_STRIDE 6

/* How matching boxes are combined. */
typedef enum yc_merge_method {
    /* suppression: a kept box removes the boxes it matches */
    YC_MERGE_NMS,
    /* merging: a kept box absorbs the boxes it matches and grows to enclose them */
    YC_MERGE_NMM,
} yc_merge_method;

/* The overlap measure of two boxes a and b with intersection area I (0 when they are disjoint). */
typedef enum yc_merge_metric {
    /* intersection over union: I / (area(a) + area(b) - I) */
    YC_MERGE_IOU,
    /* intersection over smaller: I / min(area(a), area(b)); 1 for a box inside another */
    YC_MERGE_IOS,
} yc_merge_metric;

/* Settings of yc_slice_merge. */
typedef struct yc_merge_params {
    /* suppression or merging */
    yc_merge_method method;
    /* overlap measure */
    yc_merge_metric metric;
    /* boxes match when metric > threshold (strictly; SAHI merges at equality too), in [0, 1];
     * a zero denominator (a box of zero area) gives metric 0, so such a box never matches */
    double threshold;
    /* compare boxes of different classes too (class-agnostic, as with --single-cls); the kept
     * box's class is the output's */
    bool agnostic;
} yc_merge_params;

/* SAHI's default postprocessing: NMM, IoS, threshold 0.5. */
yc_merge_params yc_merge_params_nmm(void);
/* Class-aware NMS by IoU with threshold 0.5. */
yc_merge_params yc_merge_params_nms(void);
/* Class-aware NMS by IoS with threshold 0.5: a box mostly inside a better one (the part of an
 * object a slice saw cut by its border) or mostly covering one is dropped, and no box grows.  The
 * default of whole-image validation (val_full.h), where NMM at val.py's confidence threshold of
 * 0.001 lets the best box of an object absorb low-scored boxes around it and grow past it. */
yc_merge_params yc_merge_params_nms_ios(void);

/* Sets p's method and metric from a --slice-merge name: "nmm" (NMM, IoS), "nms" (NMS, IoU) and,
 * when with_ios, "nms-ios" (NMS, IoS); false (p unchanged) for any other name. */
bool yc_merge_params_parse(const char *name, bool with_ios, yc_merge_params *p);

/* Merges n detections of one image.
 * The detections are ordered by score (conf) descending, equal scores in input order.  Then,
 * greedily in that order, each detection not yet removed is kept, and every later detection of
 * the same class (of any class when agnostic) not yet removed whose metric with the kept
 * detection's original box is > threshold is removed (NMS) or absorbed (NMM).  With NMM the
 * output box is the enclosing box of the kept box and all boxes it absorbed (min of x1, y1, max
 * of x2, y2); its score and class are those of the kept detection, the highest of the group.
 * SAHI instead re-tests each absorbed box against the box grown so far; matching against the
 * original box keeps the result independent of the absorption order.
 * out: room for n rows, not overlapping in; it gets the kept rows in score-descending order, ties
 * in input order; *n_out their number.
 * The pairs are found through a uniform grid over the boxes (about one cell per box, no smaller
 * than the mean box), so a kept box is compared only with the boxes that share a cell with it
 * and with the few boxes spanning many cells: the result is the greedy pass above, in about
 * O(n log n) time for boxes spread over an image, O(n^2) at worst (every box covering every
 * other); memory at most yc_slice_merge_scratch_bytes(n) besides in and out.
 * YC_EUSAGE for an unknown method or metric, a threshold outside [0, 1] (naming it) or more than
 * 2^29 - 1 detections, YC_ENOMEM, or YC_OK (n == 0 gives *n_out = 0). */
int yc_slice_merge(const float *dets, size_t n, const yc_merge_params *p, float *out,
                   size_t *n_out);

/* The most memory yc_slice_merge allocates for n detections (its order, flags and grid). */
size_t yc_slice_merge_scratch_bytes(size_t n);

/* The overlap of two boxes (x1, y1, x2, y2) by `metric`, in double; 0 when the denominator is 0
 * (or negative, for malformed boxes). */
double yc_merge_overlap(const float a[4], const float b[4], yc_merge_metric metric);

#endif
