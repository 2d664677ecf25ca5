/* One training step on a batch: input upload, forward, YOLOv5 loss on the host, head gradients
 * download/upload, backward.  Parameter gradients are added to the model's gradient arena (zero
 * them with yc_model_zero_grad after each optimizer step).  `yolocl inspect` runs one; the
 * trainer runs them in a loop with the same objects, so nothing is allocated per step. */
#ifndef YC_STEP_H
#define YC_STEP_H

#include <stdint.h>

#include "graph.h"
#include "hyp.h"
#include "loss.h"
#include "model.h"

typedef struct yc_step {
    /* the model (not owned) and the training graph for this batch shape (owned) */
    yc_model *m;
    yc_graph *g;
    /* loss state (owned) */
    yc_loss_ctx *loss;
    /* host copies of the head outputs and their gradients, per level (owned); NULL when the
     * device shares host memory and the loss reads and writes the heads in place */
    float *head[YC_MAX_LEVELS], *grad[YC_MAX_LEVELS];
    /* batch shape */
    int batch, h, w;
    /* the whole batch the next runs are micro-batches of (their losses and gradients are shares
     * of its own, yc_loss_compute_part), or NULL: each run is a whole batch.  Set by the caller */
    const yc_loss_part *part;
} yc_step;

/* The loss parameters YOLOv5's train.py gives ComputeLoss for this model, hyperparameters,
 * image size (for the objectness gain) and label smoothing. */
void yc_step_loss_params(const yc_model *m, const yc_hyp *hyp, int imgsz, float label_smoothing,
                         yc_loss_params *lp);

/* Builds and allocates the training graph for batch x h x w on the model's backend (FP32,
 * nothing recomputed, an arena of its own). */
int yc_step_new(yc_step **out, yc_model *m, int batch, int h, int w, const yc_loss_params *lp);
/* The same with storage options (go->mode is forced to training) in a shared arena (NULL: one of
 * its own). */
int yc_step_new_in(yc_step **out, yc_model *m, int batch, int h, int w, const yc_loss_params *lp,
                   const yc_graph_options *go, yc_arena *arena);
void yc_step_free(yc_step *s);

/* Keeps host copies of the head outputs (s->head[l], (B, na*no, ny, nx)) after every run, for
 * callers that read them afterwards (inspect, tests): in-place heads are overwritten by
 * backward. */
int yc_step_keep_heads(yc_step *s);

/* Describes a whole batch of `batch` images at this step's size (targets as below) for runs of
 * its micro-batches through s->part. */
int yc_step_batch_part(yc_step *s, int batch, const float *targets, int nt, yc_loss_part *part);

/* The rows of `targets` (nt rows of 6: image, class, x, y, w, h) whose image is one of the n
 * images from `first` on, renumbered from `first`, into `out` (room for nt rows): the targets
 * of that micro-batch.  Returns their number. */
int yc_micro_targets(const float *targets, int nt, int first, int n, float *out);

/* images: batch x ch x h x w floats in [0, 1]; targets: nt rows (image, class, x, y, w, h). */
int yc_step_run(yc_step *s, const float *images, const float *targets, int nt,
                yc_loss_result *result);

/* The same from uint8 pixels (CHW RGB, divided by 255 as train.py does), written straight into
 * the graph's input where the device shares host memory (no float copy of the batch). */
int yc_step_run_u8(yc_step *s, const uint8_t *images, const float *targets, int nt,
                   yc_loss_result *result);

#endif
