/* YOLOv5 v7.0 ComputeLoss on the host: target assignment (build_targets), CIoU box loss,
 * objectness and class BCE, and the gradient of the total loss with respect to every head output.
 * Reference: ../shared/YOLOV5.md section 2. */
#ifndef YC_LOSS_H
#define YC_LOSS_H

#include <stddef.h>

#define YC_MAX_LEVELS 8
#define YC_MAX_ANCHORS 16

typedef struct yc_loss_params {
    /* number of classes (the class loss is skipped when nc == 1) */
    int nc;
    /* anchors per level */
    int na;
    /* detection levels (3 for P5 models, 4 for P6) */
    int nl;
    /* anchors in grid units of their level: anchors[(l*na + a)*2 + {0: w, 1: h}] */
    float anchors[YC_MAX_LEVELS * YC_MAX_ANCHORS * 2];
    /* loss gains, already rescaled as train.py does (yc_loss_params_gains) */
    float box_gain, obj_gain, cls_gain;
    /* BCE positive weights (hyp cls_pw, obj_pw) */
    float cls_pw, obj_pw;
    /* anchor ratio threshold (hyp anchor_t, 4.0) */
    float anchor_t;
    /* label smoothing epsilon (--label-smoothing) */
    float label_smoothing;
    /* focal loss gamma (hyp fl_gamma; 0 = plain BCE), alpha fixed at 0.25 */
    float fl_gamma;
    /* objectness weight per level: [4.0, 1.0, 0.4] for nl = 3, else [4.0, 1.0, 0.25, 0.06, 0.02] */
    float balance[YC_MAX_LEVELS];
} yc_loss_params;

/* Sets box/obj/cls gains from the hyp values as train.py rescales them:
 * box = hyp_box*3/nl, cls = hyp_cls*nc/80*3/nl, obj = hyp_obj*(imgsz/640)^2*3/nl; and balance[]
 * from nl.  The other members are left as they are. */
void yc_loss_params_gains(yc_loss_params *lp, float hyp_box, float hyp_obj, float hyp_cls, int imgsz);

/* One level of raw Detect output, as the model produces it (before any permute):
 * value k (0..no-1, no = nc+5: tx, ty, tw, th, obj, classes) of anchor a at cell (y, x) of image b
 * is p[b*img_stride + (a*no + k)*ny*nx + y*nx + x]. */
typedef struct yc_loss_head {
    /* raw outputs (logits) */
    const float *p;
    /* d(total loss)/dp in the same layout; every element is written (zero where no gradient).
     * NULL computes the loss only (validation). */
    float *grad;
    /* grid size */
    int ny, nx;
    /* elements between images (>= na*no*ny*nx) */
    size_t img_stride;
} yc_loss_head;

/* Assignments of one level, in YOLOv5's order (centre cells for all (anchor, target) pairs,
 * then the left, up, right, down neighbours; anchor-major within each), duplicates kept. */
typedef struct yc_target_set {
    /* number of assignments */
    int n;
    /* image index, anchor index, grid row (clamped), grid column (clamped) */
    int *b, *a, *gj, *gi;
    /* class of each assignment */
    int *cls;
    /* box target (gx - gi, gy - gj, gw, gh) in grid units: n x 4 */
    float *tbox;
    /* anchor w, h in grid units: n x 2 */
    float *anch;
    /* allocated capacity (entries) */
    int cap;
} yc_target_set;

typedef struct yc_loss_result {
    /* (box + obj + cls) * batch: what is backpropagated */
    double total;
    /* the gained parts as YOLOv5 reports them (not multiplied by the batch size) */
    double box, obj, cls;
} yc_loss_result;

/* Reusable state: assignment lists and scratch that grow as needed and are kept between calls,
 * so a training loop allocates only when a batch has more targets than any before. */
typedef struct yc_loss_ctx yc_loss_ctx;

yc_loss_ctx *yc_loss_new(const yc_loss_params *lp);
void yc_loss_free(yc_loss_ctx *ctx);

/* build_targets for `nt` targets (rows of 6 floats: image index, class, x, y, w, h, normalised to
 * the batch image) over the levels' grids; fills sets[0..nl-1] (owned by ctx, valid until the next
 * call).  Rejects rows with a class outside [0, nc) or an image index outside [0, batch). */
int yc_loss_build_targets(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                          const float *targets, int nt, const yc_target_set **sets);

/* The full loss for one batch: heads[0..nl-1], targets as above.  Writes the gradient of
 * result->total into heads[l].grad when those are not NULL. */
int yc_loss_compute(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads, const float *targets,
                    int nt, yc_loss_result *result);

#endif
