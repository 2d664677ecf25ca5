/* One training step on a batch: input upload, forward, YOLOv5 loss, backward.  Parameter
 * gradients are added to the model's gradient arena (zero them with yc_model_zero_grad after each
 * optimizer step).  The loss runs on the device where the backend has one (yolo_loss: only the
 * assignments go there and only its sums come back, without waiting), else on the host, on the
 * heads in place (the CPU backend) or on copies.  `yolocl inspect` runs one; the trainer runs
 * them in a loop with the same objects, so nothing is allocated per step. */
#ifndef YC_STEP_H
#define YC_STEP_H

#include <stdint.h>

#include "graph.h"
#include "hyp.h"
#include "loss.h"
#include "loss_device.h"
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
    /* yc_step_keep_heads was called: head[] receives the outputs after every run */
    bool keep_heads;
    /* batch shape */
    int batch, h, w;
    /* the whole batch the next runs are micro-batches of (their losses and gradients are shares
     * of its own, yc_loss_compute_part), or NULL: each run is a whole batch.  Set by the caller */
    const yc_loss_part *part;
    /* the loss of the last submitted step: known (computed on the host), or pending in the
     * device's sums (read back by the next synchronize) */
    yc_loss_result result;
    bool pending;
    yc_device_loss dl;
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

/* The training graph of a step (this one's, segment_step.h's): built in *g for batch x h x w
 * with the storage options go (NULL: FP32, nothing recomputed; go->mode is forced to training)
 * and allocated in arena (NULL: one of its own).  On failure *g may hold the graph built so far,
 * which the caller frees with its step. */
int yc_step_train_graph(yc_graph **g, yc_model *m, int batch, int h, int w,
                        const yc_graph_options *go, yc_arena *arena);

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

/* Submits a step without waiting for the device: images are batch x ch x h x w floats in
 * [0, 1]; targets nt rows (image, class, x, y, w, h).  yc_step_result gives its loss once the
 * backend has synchronized. */
int yc_step_submit(yc_step *s, const float *images, const float *targets, int nt);

/* The same from uint8 pixels (CHW RGB, divided by 255 as train.py does), written straight into
 * the graph's input where the device shares host memory (no float copy of the batch). */
int yc_step_submit_u8(yc_step *s, const uint8_t *images, const float *targets, int nt);

/* The loss of the last submitted step; call it after the backend's synchronize (a loss computed
 * on the host is known at once). */
void yc_step_result(yc_step *s, yc_loss_result *result);

/* Submit, synchronize and the result, in one call. */
int yc_step_run(yc_step *s, const float *images, const float *targets, int nt,
                yc_loss_result *result);
int yc_step_run_u8(yc_step *s, const uint8_t *images, const float *targets, int nt,
                   yc_loss_result *result);

#endif
