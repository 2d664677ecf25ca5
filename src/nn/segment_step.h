/* One training step of a segmentation model (a model whose last layer is Segment): input upload,
 * forward, utils/segment/loss.py's loss (loss_seg.h) on the host over the head outputs and the
 * Proto output it reads back, their gradients written back, backward.  Parameter gradients are
 * added to the model's gradient arena, as yc_step does. */
#ifndef YC_SEGMENT_STEP_H
#define YC_SEGMENT_STEP_H

#include <stdint.h>

#include "graph.h"
#include "hyp.h"
#include "loss_seg.h"
#include "model.h"

typedef struct yc_seg_step {
    /* the model (not owned) and the training graph for this batch shape (owned) */
    yc_model *m;
    yc_graph *g;
    /* loss state (owned) */
    yc_seg_loss_ctx *loss;
    /* batch shape */
    int batch, h, w;
    /* the last step's outputs read back (owned): head[l] (batch, na*no, ny, nx) per level and
     * proto (batch, nm, proto_h, proto_w); and their gradients, written back */
    float *head[YC_MAX_LEVELS], *grad[YC_MAX_LEVELS], *proto, *proto_grad;
    int proto_h, proto_w;
    /* the whole batch the next runs are micro-batches of (their losses and gradients are shares
     * of its own, yc_seg_loss_compute_part), or NULL: each run is a whole batch.  Set by the
     * caller, as yc_step.part */
    const yc_loss_part *part;
} yc_seg_step;

/* The loss parameters segment/train.py gives ComputeLoss for this model (yc_step_loss_params's,
 * with the model's nm). */
void yc_seg_step_loss_params(const yc_model *m, const yc_hyp *hyp, int imgsz,
                             float label_smoothing, yc_loss_params *lp);

/* Builds and allocates the training graph of a segmentation model for batch x h x w (go: storage
 * options, NULL for FP32 with nothing recomputed; go->mode is forced to training) in an arena of
 * its own. */
int yc_seg_step_new(yc_seg_step **out, yc_model *m, int batch, int h, int w,
                    const yc_loss_params *lp, const yc_graph_options *go);
/* The same in a shared arena (NULL: one of its own), as yc_step_new_in: the trainer's steps of
 * every batch shape and validation share one. */
int yc_seg_step_new_in(yc_seg_step **out, yc_model *m, int batch, int h, int w,
                       const yc_loss_params *lp, const yc_graph_options *go, yc_arena *arena);
void yc_seg_step_free(yc_seg_step *s);

/* Runs a step on `images` (batch x 3 x h x w floats in [0, 1]) with nt target rows (image, class,
 * x, y, w, h normalised) and their masks (loss_seg.h's overlap format).  Waits for the device. */
int yc_seg_step_run(yc_seg_step *s, const float *images, const float *targets, int nt,
                    const yc_seg_masks *masks, yc_seg_loss_result *result);
/* The same from uint8 pixels (CHW RGB, divided by 255 as segment/train.py does). */
int yc_seg_step_run_u8(yc_seg_step *s, const uint8_t *images, const float *targets, int nt,
                       const yc_seg_masks *masks, yc_seg_loss_result *result);

/* Describes a whole batch of `batch` images at this step's size (targets as above) for runs of
 * its micro-batches through s->part (yc_step_batch_part's counterpart). */
int yc_seg_step_batch_part(yc_seg_step *s, int batch, const float *targets, int nt,
                           yc_loss_part *part);

/* The masks of the micro-batch of the n images from `first` on of a batch whose masks are `all`
 * (nt target rows `targets`, as yc_micro_targets selects them): overlap maps are image first's
 * on (a view into all->m, nothing copied), per-target masks those of the selected rows in their
 * order, copied into `buf` (room for nt masks).  *out describes them. */
void yc_seg_micro_masks(const yc_seg_masks *all, const float *targets, int nt, int first, int n,
                        float *buf, yc_seg_masks *out);

#endif
