/* YOLOv5 v7.0 ComputeLoss on the host: target assignment (build_targets), CIoU box loss,
 * objectness and class BCE, and the gradient of the total loss with respect to every head output.
 * Reference: docs/YOLOV5.md section 2. */
#ifndef YC_LOSS_H
#define YC_LOSS_H

#include <stddef.h>

#define YC_MAX_LEVELS 8
#define YC_MAX_ANCHORS 16

typedef struct yc_loss_params {
    /* number of classes (the class loss is skipped when nc == 1) */
    int nc;
    /* mask coefficients per anchor after the classes (a Segment head's nm; 0 for Detect): they
     * make the outputs per anchor no = nc + 5 + nm; this loss gives them zero gradient (the mask
     * term is loss_seg.h's) */
    int nm;
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
 * value k (0..no-1, no = nc+5+nm: tx, ty, tw, th, obj, classes, mask coefficients) of anchor a at
 * cell (y, x) of image b is p[b*img_stride + (a*no + k)*ny*nx + y*nx + x]. */
typedef struct yc_loss_head {
    /* raw outputs (logits) */
    const float *p;
    /* d(total loss)/dp in the same layout; every element of the na*no*ny*nx values of each image
     * is written (zero where no gradient); padding between images (img_stride > na*no*ny*nx) is
     * not touched.
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
    /* the target row (0..nt-1) each assignment comes from */
    int *t;
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

/* A micro-batch's place in the batch it was cut from (gradient accumulation over micro-batches
 * that reproduces the whole batch): the whole batch's images and assignments per level.  YOLOv5's
 * box and class losses are means over the batch's assignments and its objectness loss a mean
 * over the batch's cells, times the batch size; a part divides its sums by the whole batch's
 * counts and multiplies by its size, so that the parts' losses and gradients add up to the whole
 * batch's. */
typedef struct yc_loss_part {
    /* images of the whole batch */
    int batch;
    /* assignments of the whole batch per level (yc_target_set.n) */
    int ntargets[YC_MAX_LEVELS];
} yc_loss_part;

/* Reusable state: assignment lists and scratch that grow as needed and are kept between calls,
 * so a training loop allocates only when a batch has more targets than any before. */
typedef struct yc_loss_ctx yc_loss_ctx;

yc_loss_ctx *yc_loss_new(const yc_loss_params *lp);
/* The parameters the context was made with. */
const yc_loss_params *yc_loss_params_of(const yc_loss_ctx *ctx);
void yc_loss_free(yc_loss_ctx *ctx);

/* build_targets for `nt` targets (rows of 6 floats: image index, class, x, y, w, h, normalised to
 * the batch image) over the levels' grids; fills sets[0..nl-1] (owned by ctx, valid until the next
 * call; sets may be NULL).  Only heads[l].ny/nx are used.  Computed in float32 like PyTorch, so
 * the cells, the ratio test and tbox match YOLOv5 bit for bit.  Rejects (YC_EFORMAT, message
 * naming the row) rows with a non-finite value, a class or image index that is not an integer in
 * [0, nc) or [0, batch), or a negative width or height. */
int yc_loss_build_targets(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                          const float *targets, int nt, const yc_target_set **sets);

/* The full loss for one batch: heads[0..nl-1], targets as above.  Writes the gradient of
 * result->total into heads[l].grad when those are not NULL.  Runs the same assignment as
 * yc_loss_build_targets (with the same checks).  Losses are accumulated in double; non-finite
 * logits are not rejected (they make the result non-finite, for the caller to detect). Several
 * assignments on one (b, a, gj, gi) (two targets in one cell, integer-valued centres, clamped
 * cells: docs/YOLOV5.md 2.2 item 4) all count in the box and class means and their gradients add
 * up; the cell's objectness target is the CIoU of the one that comes last in assignment order,
 * which is what PyTorch's index_put_ does on the CPU (the reference has such cells). */
int yc_loss_compute(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads, const float *targets,
                    int nt, yc_loss_result *result);

/* The same for a part of a larger batch (part->batch images with part->ntargets assignments per
 * level, from yc_loss_part_of): result->box, obj and cls are this part's shares of the whole
 * batch's values and result->total its share of the whole batch's total. */
int yc_loss_compute_part(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                         const float *targets, int nt, const yc_loss_part *part,
                         yc_loss_result *result);

/* Describes a whole batch (batch images, nt targets as above) for its micro-batches' losses:
 * runs its assignment over the levels' grids (only heads[l].ny/nx are used). */
int yc_loss_part_of(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads, const float *targets,
                    int nt, yc_loss_part *part);

/* CIoU of a predicted box and a target box, both (cx, cy, w, h), exactly as YOLOv5's
 * bbox_iou(xywh=True, CIoU=True, eps=1e-7) (docs/YOLOV5.md 2.4).  When dpbox is not NULL it
 * receives d CIoU / d pbox with PyTorch's autograd conventions: alpha held constant, ties of
 * min/max split the gradient in halves, clamp(0) passes the gradient at 0. */
double yc_loss_ciou(const double pbox[4], const double tbox[4], double dpbox[4]);

#endif
