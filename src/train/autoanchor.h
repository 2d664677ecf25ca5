/* AutoAnchor: YOLOv5 v7.0's check of the model's anchors against the training labels and, when
 * they fit poorly, new anchors from k-means on the label sizes refined by a mutation genetic
 * algorithm (utils/autoanchor.py: check_anchors, kmean_anchors, check_anchor_order; docs/YOLOV5.md
 * 3.5).  Pure arithmetic on host arrays, in double, deterministic for a seed.
 *
 * Label sizes.  Every image is scaled so that its long side is imgsz: shape = imgsz * (w, h) /
 * max(w, h) with the EXIF-corrected size, and a label's size in pixels is its normalised (w, h)
 * times that shape.  check_anchors also multiplies each image's labels by one scale drawn from
 * U(0.9, 1.1) per image (backgrounds draw theirs too, as YOLOv5 draws one per image).
 *
 * Metric.  For a label (w, h) and an anchor (aw, ah): r = (w/aw, h/ah), x = min over w and h of
 * min(r, 1/r), a value in (0, 1] that is 1 for a perfect fit; best = max of x over the anchors.
 * With t = 1/thr (thr = hyp anchor_t, 4.0): an anchor is "above threshold" for a label when
 * x > t (strictly), the best possible recall (BPR) is the fraction of labels with best > t, aat the
 * mean number of anchors above threshold per label, and the fitness the mean of best * [best > t].
 *
 * Differences from YOLOv5, all deliberate:
 *   - the random numbers are PCG32 streams derived from the seed (numpy's and Python's generators
 *     are not reproduced), so the scale draws, k-means starts and mutations differ in value, not in
 *     distribution;
 *   - the arithmetic is double throughout (YOLOv5 mixes float32 tensors and float64 arrays);
 *   - k-means follows scipy.cluster.vq.kmeans (see yc_kmeans) with a cap of 1000 Lloyd steps
 *     per restart (scipy has none; Lloyd's iteration always stops well before);
 *   - a dataset without any label leaves the anchors alone with a note (YOLOv5 runs k-means on
 *     nothing, fails over to random anchors and keeps the old ones because NaN > NaN is false);
 *   - the messages have no emoji, and the genetic algorithm reports its final fitness on one line
 *     where YOLOv5 draws a progress bar;
 *   - an error is returned to the caller (YOLOv5's @TryExcept logs it and trains on). */
#ifndef YC_AUTOANCHOR_H
#define YC_AUTOANCHOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "model.h"
#include "rng.h"

/* check_anchors recomputes the anchors when the BPR is at most this (YOLOv5: `if bpr > 0.98`). */
#define YC_AUTOANCHOR_BPR_MIN 0.98
/* Generations of the genetic algorithm that check_anchors runs. */
#define YC_AUTOANCHOR_GENERATIONS 1000

/* The label sizes in pixels at imgsz (see the top of this file), image by image, as a heap array
 * of 2 * n doubles (w, h, w, h, ...); with `scale_rng` every image's labels are multiplied by a
 * draw of U(0.9, 1.1) from it (check_anchors), without it they are not (kmean_anchors).  *wh is
 * NULL and *n is 0 for a dataset without labels.  Fails only when out of memory or imgsz < 1. */
int yc_anchor_label_wh(const yc_dataset *ds, int imgsz, yc_rng *scale_rng, double **wh, size_t *n);

/* check_anchors' metric of `na` anchors (pixels, 2 * na values) over n label sizes: the best
 * possible recall and the mean number of anchors above threshold per label.  Both are NaN for
 * n = 0 (a mean over nothing). */
void yc_anchor_metric(const double *wh, size_t n, const double *anchors, int na, double thr,
                      double *bpr, double *aat);

/* kmean_anchors' fitness of `na` anchors over n label sizes: the mean of best * [best > 1/thr]
 * (0 for n = 0, where YOLOv5's NaN likewise never beats anything). */
double yc_anchor_fitness(const double *wh, size_t n, const double *anchors, int na, double thr);

/* Sorts `na` anchors (2 * na values) by area w * h, smallest first; equal areas keep their order. */
void yc_anchor_sort_by_area(double *anchors, int na);

/* scipy.cluster.vq.kmeans(obs, k, iter, thresh) on n two-dimensional observations (2 * n
 * values): `iter` restarts, each from k distinct observations picked at random (scipy's
 * _kpoints), then Lloyd steps (assign every observation to its nearest code, Euclidean, the first
 * on ties; move every code to the mean of its observations; drop codes left without any) until
 * the mean distance to the nearest code changes by no more than `thresh` from one step to the
 * next.  The restart with the lowest distortion (the mean distance of its last assignment, the
 * first restart on ties) wins: its codes go to `book` (room for 2 * k values), their number to
 * *k_out (fewer than k when codes emptied) and the distortion to *distortion.  Needs 1 <= k <= n
 * and iter >= 1; observations must be finite. */
int yc_kmeans(const double *obs, size_t n, int k, int iter, double thresh, yc_rng *rng,
              double *book, int *k_out, double *distortion);

/* kmean_anchors(dataset, n, img_size, thr, gen, verbose): n anchors in pixels for the dataset's
 * labels at img_size, sorted by area, written to `anchors` (2 * n values).
 *   1. wh0 = the label sizes without random scale; a note counts labels with a side < 3 px; wh =
 *      the labels with a side >= 2 px.
 *   2. "Running kmeans for n anchors on N points..."; k-means (yc_kmeans, 30 restarts, thresh
 *      1e-5) on wh / s, s = the population standard deviation of wh's columns, times s.  When
 *      there are fewer than n points, a column of wh is constant (whitening divides by zero) or
 *      k-means ends with fewer than n codes: "WARNING switching strategies from kmeans to random
 *      init" and the anchors are n * 2 sorted U(0, 1) draws, reshaped to n rows, times img_size.
 *   3. The genetic algorithm, `gen` generations from the area-sorted start: a mutation factor
 *      v = 1 + [U < 0.9] * U' * N(0, 1) * 0.1 per value (U and N per value, U' one per draw),
 *      clipped to [0.3, 3.0] and redrawn until some value differs from 1; the candidate
 *      max(k * v, 2.0) replaces k when its fitness over wh is higher.
 *   4. The result, sorted by area, is reported over wh0: "thr=0.25: B best possible recall, A
 *      anchors past thr" and "n=9, img_size=640, metric_all=X/Y-mean/best, past_thr=Z-mean: w,h,
 *      ..." (sizes rounded half to even, as Python's round of a numpy float).
 * `verbose` also reports every improvement of the genetic algorithm.  Random numbers come from
 * PCG32 streams of `seed`.  Fails when the dataset has no label or n, img_size, thr or gen is out
 * of range. */
int yc_kmean_anchors(const yc_dataset *ds, int n, int img_size, double thr, int gen, uint64_t seed,
                     bool verbose, double *anchors);

/* What yc_check_anchors_report found. */
typedef struct yc_anchor_check {
    /* number of labels measured */
    size_t n_labels;
    /* best possible recall and anchors above threshold per label of the model's anchors */
    double bpr, aat;
    /* BPR of the evolved anchors (NaN when the anchors fit and none were computed) */
    double new_bpr;
    /* the model's anchors were replaced */
    bool changed;
} yc_anchor_check;

/* check_anchors(dataset, model, thr, imgsz): measures the model's anchors (grid units times the
 * level strides) on the randomly scaled label sizes and prints
 *   "AutoAnchor: A anchors/target, B Best Possible Recall (BPR). Current anchors are a good fit to
 *   dataset"
 * when B > 0.98.  Otherwise it prints "... Anchors are a poor fit to dataset, attempting to
 * improve...", runs yc_kmean_anchors(n = nl * na, imgsz, thr, 1000 generations) and adopts the
 * result only when its BPR on the same scaled sizes is higher: the area-sorted anchors fill the
 * levels in order (na per level), the levels are reversed when their mean anchor area runs
 * against the strides (check_anchor_order, "Reversing anchor order"), and model->anchors receives
 * them divided by the strides; then "AutoAnchor: Done (optional: update model *.yaml to use these
 * anchors in the future)", else "AutoAnchor: Done (original anchors better than new anchors,
 * proceeding with original anchors)" and the model is untouched.  thr is hyp anchor_t (> 0),
 * imgsz the training size; the scale draws, k-means and the genetic algorithm use PCG32 streams
 * of `seed` reserved for AutoAnchor.  A dataset without labels is noted and left alone.  `out` may
 * be NULL. */
int yc_check_anchors_report(const yc_dataset *ds, yc_model *m, double thr, int imgsz,
                            uint64_t seed, yc_anchor_check *out);

/* yc_check_anchors_report, telling only whether the anchors changed (`changed` may be NULL). */
int yc_check_anchors(const yc_dataset *ds, yc_model *m, double thr, int imgsz, uint64_t seed,
                     bool *changed);

#endif
