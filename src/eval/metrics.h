/* YOLOv5 v7.0 validation metrics on the host: val.py's process_batch matching over IoU
 * 0.5:0.95, the per-dataset statistics, utils/metrics.py's ap_per_class / compute_ap / smooth /
 * ConfusionMatrix / fitness, and val.py's results table.  Reference: docs/YOLOV5.md 6.2, 6.3.
 *
 * Numerics follow the reference: box IoUs and thresholds in float32 (torch), everything from
 * ap_per_class on in float64 (numpy) with numpy's operation order, including its pairwise
 * summation in sum/mean and np.interp's exact rules.
 *
 * Ties.  YOLOv5 orders by np.argsort (numpy's default 'quicksort', an unstable introsort) in
 * process_batch (IoU), ConfusionMatrix.process_batch (IoU) and ap_per_class (-conf).  This file
 * runs a port of numpy 1.24's argsort quicksort (median of three, partitions of 16 or fewer
 * elements by insertion sort, heapsort past depth 2*floor(log2 n)), so equal keys are ordered
 * exactly as that numpy orders them; for arrays of at most 16 elements this is the stable order.
 * np.unique(return_index=True) sorts stably, so "first occurrence" is the first row in the
 * current order: exact.  Other numpy versions may order ties differently (numpy >= 2 can use
 * x86-simd-sort for argsort). */
#ifndef YC_METRICS_H
#define YC_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* IoU thresholds 0.5, 0.55, ..., 0.95 */
#define YC_NIOU 10
/* points of the confidence grid px = linspace(0, 1, 1000) */
#define YC_NPX 1000

/* iouv = torch.linspace(0.5, 0.95, 10) in float32, as PyTorch's CPU kernel computes it:
 * step = (0.95f - 0.5f) / 9; 0.5f + step*i for i < 5, 0.95f - step*(9 - i) otherwise. */
void yc_iouv(float iouv[YC_NIOU]);

/* utils/metrics.py box_iou for one pair, float32: inter / (area1 + area2 - inter + 1e-7). */
float yc_box_iou(const float a[4], const float b[4]);

/* val.py process_batch for one image.
 * dets: nd rows (x1, y1, x2, y2, conf, cls); labels: nl rows (cls, x1, y1, x2, y2), both in the
 * same coordinates (val.py uses original-image pixels).  For each threshold t of yc_iouv:
 * candidate pairs have IoU >= t and equal classes; they are sorted by IoU descending (numpy
 * argsort reversed, see the note on ties above), each detection keeps its first pair, then each
 * label keeps the first of the remaining pairs in detection-index order (confidence order).
 * correct[d] gets bit t set when detection d is matched at threshold t.  YC_EFORMAT (negative
 * counts, missing arrays), YC_ENOMEM or YC_OK. */
int yc_match_predictions(const float *dets, int nd, const float *labels, int nl,
                         uint16_t *correct);

/* yc_match_predictions over a given IoU matrix iou[l * nd + d] (label l, detection d) instead of
 * the box IoUs: segment/val.py's process_batch(masks=True) with the mask IoUs (mask_eval.h); iou NULL
 * is yc_match_predictions.  The boxes of dets and labels are not read, only their classes. */
int yc_match_iou(const float *iou, const float *dets, int nd, const float *labels, int nl,
                 uint16_t *correct);

/* ---------------------------------------------------------------------------------------------
 * Confusion matrix (utils/metrics.py ConfusionMatrix)
 * ------------------------------------------------------------------------------------------- */

typedef struct yc_confusion {
    /* number of classes; the matrix is (nc+1) x (nc+1), index nc = background */
    int nc;
    /* detections need conf > conf (0.25) */
    float conf;
    /* a (label, detection) pair needs IoU > iou_thres (0.45) */
    float iou_thres;
    /* m[pred * (nc+1) + true]: counts; m[nc][c] = label of class c missed (background FN),
     * m[c][nc] = detection of class c matching no label (background FP) */
    double *m;
} yc_confusion;

/* Zeroed (nc+1)^2 matrix with conf 0.25 and IoU 0.45.  YC_EFORMAT (nc < 1) or YC_ENOMEM. */
int yc_confusion_init(yc_confusion *cm, int nc);
void yc_confusion_free(yc_confusion *cm);

/* ConfusionMatrix.process_batch for one image (dets / labels as in yc_match_predictions; nd = 0
 * is also the `detections is None` case).  Detections with conf > cm->conf are kept; pairs with
 * IoU > iou_thres of any classes are sorted by IoU descending, reduced to one per detection, sorted
 * again, reduced to one per label.  A label with a pair counts at (class of its detection, its
 * class), one without at (background, its class); when at least one pair exists, every kept
 * detection without a pair counts at (its class, background).  As in YOLOv5, when no pair
 * exists at all the detections are not counted as background FPs.  YC_EFORMAT for a class
 * outside [0, nc). */
int yc_confusion_process(yc_confusion *cm, const float *dets, int nd, const float *labels,
                         int nl);

/* ConfusionMatrix.tp_fp: tp[c] = m[c][c], fp[c] = sum over the row - tp, c < nc. */
void yc_confusion_tp_fp(const yc_confusion *cm, double *tp, double *fp);

/* ---------------------------------------------------------------------------------------------
 * Statistics of a dataset (val.py's `stats`)
 * ------------------------------------------------------------------------------------------- */

typedef struct yc_val_stats {
    /* number of classes of the dataset (classes must lie in [0, nc)) */
    int nc;
    /* images seen (val.py's `seen`) */
    long seen;
    /* per prediction, in the order added: bit t = correct at iouv[t]; confidence; class */
    uint16_t *correct;
    float *conf;
    int32_t *pred_cls;
    size_t n_pred, pred_cap;
    /* per label: class */
    int32_t *label_cls;
    size_t n_label, label_cap;
} yc_val_stats;

int yc_val_stats_init(yc_val_stats *s, int nc);
void yc_val_stats_free(yc_val_stats *s);
/* Forgets everything added (keeps the memory). */
void yc_val_stats_reset(yc_val_stats *s);

/* One image, as val.py's loop body: seen += 1; with no detections, its labels are recorded (and
 * counted as background FNs by cm); otherwise the detections are matched (all incorrect when the
 * image has no labels), cm (if not NULL) processes the image when it has labels, and
 * (correct, conf, cls) of every detection and the class of every label are recorded.
 * dets: nd rows (x1, y1, x2, y2, conf, cls) sorted by conf as NMS returns them, scaled to the
 * original image (val.py's predn; with --single-cls the caller sets cls to 0); labels: nl rows
 * (cls, x1, y1, x2, y2) in the same coordinates.  Add images in dataloader order: ties of conf
 * between images are ordered by position.  YC_EFORMAT for a class outside [0, nc), YC_ENOMEM. */
int yc_val_stats_add(yc_val_stats *s, const float *dets, int nd, const float *labels, int nl,
                     yc_confusion *cm);

/* yc_val_stats_add with the correct bits of the nd detections given (correct, nd values) instead
 * of matched from the boxes: segment/val.py's mask statistics (their bits from yc_match_iou over
 * the mask IoUs).  correct NULL is yc_val_stats_add. */
int yc_val_stats_add_correct(yc_val_stats *s, const float *dets, int nd, const float *labels,
                             int nl, yc_confusion *cm, const uint16_t *correct);

/* ---------------------------------------------------------------------------------------------
 * ap_per_class and the dataset metrics
 * ------------------------------------------------------------------------------------------- */

/* Results of ap_per_class, for the n classes that have labels (ap_class), ascending. */
typedef struct yc_ap_result {
    /* classes that have labels */
    int n;
    /* [n]: class id; number of labels */
    int *cls;
    int64_t *nt;
    /* [n]: precision, recall, F1 at the chosen confidence px[f1_index] */
    double *p, *r, *f1;
    /* [n]: round(r * nt) and round(tp / (p + 1e-16) - tp), as YOLOv5 returns them */
    double *tp, *fp;
    /* [n][YC_NIOU]: AP per IoU threshold (101-point trapezoid) */
    double *ap;
    /* [n]: AP@0.5 (ap[:, 0]) and AP@0.5:0.95 (mean over thresholds) */
    double *ap50, *ap5095;
    /* means over the n classes: P, R, mAP@0.5, mAP@0.5:0.95 (zero when n == 0) */
    double mp, mr, map50, map;
    /* index into px of the maximum of smooth(mean over classes of F1, 0.1) */
    int f1_index;
    /* curves for plots, YC_NPX points each: px = linspace(0, 1, 1000) (confidence, or recall for
     * the PR curve); p_curve, r_curve, f1_curve [n][YC_NPX] over confidence; pr_curve
     * [n][YC_NPX]: precision envelope at recall px for IoU 0.5 (YOLOv5's `py`).  YOLOv5 has a PR
     * curve only for classes with predictions: has_pr[i] says whether class i has one (its
     * pr_curve row is zero otherwise). */
    double *px;
    double *p_curve, *r_curve, *f1_curve, *pr_curve;
    bool *has_pr;
} yc_ap_result;

/* ap_per_class(tp, conf, pred_cls, target_cls) of utils/metrics.py:
 *  - predictions sorted by -conf (numpy argsort, see the note on ties);
 *  - only classes present in target_cls; a class with labels but no predictions has AP, P, R 0;
 *    predictions of classes without labels are ignored;
 *  - per class: tpc/fpc cumulative sums, recall = tpc / (n_labels + 1e-16),
 *    precision = tpc / (tpc + fpc); P and R curves = np.interp over -conf at -px (left fills 1 and
 *    0); compute_ap per IoU column; F1 = 2PR / (P + R + 1e-16);
 *  - one index for all classes: argmax of smooth(mean over classes of F1, 0.1) (box filter of
 *    101 points, edge padded; the window sums add left to right, where numpy calls BLAS ddot:
 *    identical with Debian's numpy 1.24 in the checks made, and at most a round-off difference
 *    that could matter only for a near-tie of two maxima);
 *  - tp = round(R * nt), fp = round(tp / (P + 1e-16) - tp); means with numpy's pairwise sums.
 * tp: n_pred masks (bit t = correct at iouv[t]); conf, pred_cls: n_pred values; target_cls:
 * n_label classes; all classes in [0, nc).  With no labels at all, res->n = 0 and every mean is
 * 0.  res is overwritten (free it with yc_ap_result_free).  YC_EFORMAT / YC_ENOMEM. */
int yc_ap_per_class(const uint16_t *tp, const float *conf, const int32_t *pred_cls,
                    size_t n_pred, const int32_t *target_cls, size_t n_label, int nc,
                    yc_ap_result *res);
void yc_ap_result_free(yc_ap_result *res);

/* compute_ap(recall, precision): mrec = [0, recall, 1], mpre = [1, precision, 0], precision
 * envelope (running maximum from the right), AP = np.trapz(np.interp(x, mrec, mpre), x) with
 * x = linspace(0, 1, 101).  A perfect detector gets 0.995: the envelope is 0 at recall 1, so the
 * last of the 100 trapezoids is half.  mrec and mpre (n + 2 values each, caller's memory) receive
 * the padded recall and the envelope. */
double yc_compute_ap(const double *recall, const double *precision, size_t n, double *mrec,
                     double *mpre);

/* utils/metrics.py smooth(y, f): box filter of round(n*f*2)//2 + 1 points over y padded with its
 * end values; out (n values) may not alias y.  YC_ENOMEM or YC_OK. */
int yc_smooth(const double *y, int n, double f, double *out);

/* utils/metrics.py fitness: 0.0*P + 0.0*R + 0.1*mAP@0.5 + 0.9*mAP@0.5:0.95 (in that order). */
double yc_fitness(double mp, double mr, double map50, double map);

/* What val.py reports at the end of a validation. */
typedef struct yc_val_metrics {
    /* number of classes; images seen */
    int nc;
    long seen;
    /* [nc]: labels per class (np.bincount of the label classes) */
    int64_t *nt;
    /* ap_per_class's results; left empty (n = 0) when no prediction is correct at any threshold,
     * as val.py skips ap_per_class unless stats[0].any() */
    yc_ap_result ap;
    /* mean P, R, mAP@0.5, mAP@0.5:0.95 (0 when ap_per_class was skipped) and their fitness */
    double mp, mr, map50, map, fitness;
    /* [nc]: mAP@0.5:0.95 per class, the overall map for classes without labels (val.py's maps,
     * used for image weights) */
    double *maps;
} yc_val_metrics;

/* The end of val.py run() from its statistics.  out is overwritten (free with
 * yc_val_metrics_free). */
int yc_val_metrics_compute(const yc_val_stats *s, yc_val_metrics *out);

/* yc_val_metrics_compute with ap_per_class run only when some prediction of `gate` is correct
 * (segment/val.py tests stats[0], the mask statistics, before computing both the box and the mask
 * metrics); gate == s is yc_val_metrics_compute. */
int yc_val_metrics_compute_gated(const yc_val_stats *s, const yc_val_stats *gate,
                                 yc_val_metrics *out);
void yc_val_metrics_free(yc_val_metrics *m);

/* val.py's header line, ('%22s' + '%11s' * 6) of Class Images Instances P R mAP50 mAP50-95. */
void yc_val_print_header(FILE *f);
/* val.py's result lines ('%22s%11i%11i%11.3g%11.3g%11.3g%11.3g'): "all" with images seen and
 * the total number of labels, then, when per_class, one line per class with labels (val.py
 * prints them when (verbose or (nc < 50 and not training)) and nc > 1).  names: nc class names,
 * or NULL (class numbers are printed). */
void yc_val_print_results(FILE *f, const yc_val_metrics *m, const char *const *names,
                          bool per_class);

#endif
