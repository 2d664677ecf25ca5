/* YOLOv5 v7.0's segmentation loss (utils/segment/loss.py, ComputeLoss(overlap=True or False)) on the
 * host,
 * forward and analytic backward: the detection terms of loss.h over a Segment head's outputs
 * (no = nc + 5 + nm per anchor; the class slice is 5..5+nc), plus the mask term:
 *
 *   for every assignment e of level l (image b, anchor a, cell (gj, gi), target row t):
 *     mask logits  z_e = coefficients_e (nm) @ proto[b] (nm x H*W)          -> H*W logits
 *     target       y_e = 1 where masks[b] == the target's 1-based index within its image, else 0
 *                  (overlap masks); without overlap the target row's own mask, as it is
 *     term_e       = sum over the pixels inside the target's box (in proto pixels) of
 *                    BCEWithLogits(z_e, y_e), / (H*W) / (box w * h, normalised)
 *   lseg = box_gain / bs * sum over levels and images of the mean of term_e over that image's
 *          assignments of that level,
 *
 * total = bs * (box + obj + cls + seg), reported as YOLOv5 logs it: [box, seg, obj, cls]. */
#ifndef YC_LOSS_SEG_H
#define YC_LOSS_SEG_H

#include <stdbool.h>

#include "loss.h"

/* The Proto output of a batch: image b's prototype k at pixel (y, x) is
 * p[(b*nm + k)*h*w + y*w + x] (nm from the loss parameters). */
typedef struct yc_seg_proto {
    const float *p;
    /* d(total loss)/dp in the same layout, every element written; NULL computes the loss only.
     * It may be p itself (each image's gradient is written after that image's prototypes have
     * been read for the last time). */
    float *grad;
    int h, w;
} yc_seg_proto;

/* The instance masks of a batch.  In YOLOv5's overlap format (the default, per_target false): one
 * map per image, masks[(b*h + y)*w + x] = k (k >= 1) marks the k-th target of image b (in the
 * order of the target rows of that image), 0 the background.  Without overlap (segment/train.py
 * --no-overlap, per_target true): one mask per target row, masks[(t*h + y)*w + x] the target
 * value of row t's mask at (y, x) (0 or 1; used as BCE's target as it is).  Masks of another
 * size than the prototypes are resized to theirs by nearest neighbour, as
 * F.interpolate(mode="nearest") does. */
typedef struct yc_seg_masks {
    const float *m;
    int h, w;
    bool per_target;
} yc_seg_masks;

typedef struct yc_seg_loss_result {
    /* bs * (box + seg + obj + cls): what is backpropagated */
    double total;
    /* the gained parts as YOLOv5 logs them (not multiplied by the batch size) */
    double box, seg, obj, cls;
} yc_seg_loss_result;

typedef struct yc_seg_loss_ctx yc_seg_loss_ctx;

/* A loss context for a segmentation model's parameters (lp->nm > 0; yc_step_loss_params with
 * nm set); NULL with the error set when they are invalid or memory runs out. */
yc_seg_loss_ctx *yc_seg_loss_new(const yc_loss_params *lp);
void yc_seg_loss_free(yc_seg_loss_ctx *ctx);

/* The loss of one batch: heads[0..nl-1] as loss.h describes them (no = nc + 5 + nm), the Proto
 * output, nt target rows (image, class, x, y, w, h normalised, as loss.h) and their masks.  Writes
 * the gradient of result->total into heads[l].grad (which may alias heads[l].p) and proto->grad
 * when those are not NULL.  The targets are checked as yc_loss_compute does; a level with
 * assignments needs masks.  Losses are accumulated in double. */
int yc_seg_loss_compute(yc_seg_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                        const yc_seg_proto *proto, const float *targets, int nt,
                        const yc_seg_masks *masks, yc_seg_loss_result *result);

/* The same for a micro-batch of a whole batch described by `part` (yc_loss_part_of run on the
 * whole batch's targets through yc_seg_loss_det): the detection terms as yc_loss_compute_part
 * gives them, the mask term as above (its part of the whole batch's total is the micro-batch's
 * own: lseg is a sum over images times box_gain / bs, and the total multiplies by bs), and the
 * result the micro-batch's share of the whole batch's: result->seg scaled by batch /
 * part->batch.  The gradients add up over the micro-batches to the whole batch's. */
int yc_seg_loss_compute_part(yc_seg_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                             const yc_seg_proto *proto, const float *targets, int nt,
                             const yc_seg_masks *masks, const yc_loss_part *part,
                             yc_seg_loss_result *result);

/* The detection loss context inside (for yc_loss_part_of). */
yc_loss_ctx *yc_seg_loss_det(yc_seg_loss_ctx *ctx);

#endif
