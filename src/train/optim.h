/* The optimizer as YOLOv5's train.py drives it: three parameter groups (biases, decayed weights,
 * BN weights), SGD with Nesterov momentum, Adam or AdamW, gradient clipping at a global norm,
 * the warmup of learning rates, momentum and the accumulation count, and the per-epoch LR
 * schedule.  The arithmetic runs on the backend (YC_OP_SGD / YC_OP_ADAM / YC_OP_SUMSQ over each
 * group's contiguous range of the parameter arena); this file holds the state and the
 * formulas.  Reference: docs/YOLOV5.md sections 3.1 to 3.3. */
#ifndef YC_OPTIM_H
#define YC_OPTIM_H

#include <stdbool.h>

#include "model.h"

typedef enum yc_optim_kind {
    YC_OPTIM_SGD,
    YC_OPTIM_ADAM,
    YC_OPTIM_ADAMW,
} yc_optim_kind;

/* A contiguous range of trainable parameters of one group (frozen layers split groups). */
typedef struct yc_optim_range {
    yc_param_group group;
    /* first element and count, in the parameter arena */
    size_t offset, count;
} yc_optim_range;

typedef struct yc_optim {
    yc_optim_kind kind;
    /* the model whose parameters and gradients are updated (not owned) */
    yc_model *m;
    /* optimizer state on the backend: SGD momentum buffer or Adam first moment; Adam second
     * moment (NULL for SGD); both parameter-arena sized */
    yc_buffer *buf1, *buf2;
    /* per group: current learning rate, momentum (SGD momentum or Adam beta1), weight decay,
     * and the initial learning rate the schedule scales */
    double lr[YC_PG_COUNT], momentum[YC_PG_COUNT], wd[YC_PG_COUNT], initial_lr[YC_PG_COUNT];
    /* Adam's beta2 and eps */
    double beta2, eps;
    /* optimizer steps taken (Adam's t) */
    long steps;
    /* the trainable ranges */
    int nranges;
    yc_optim_range *ranges;
    /* the sum of squares of the gradients: one float on the backend, and its copy read back
     * (without waiting) by yc_optim_step */
    yc_buffer *norm_buf;
    float norm_host;
    /* that read is queued and yc_optim_step_done has not run: freeing waits for it */
    bool norm_pending;
    /* the norm of the last step's gradients, before clipping (set by yc_optim_step_done) */
    double last_grad_norm;
} yc_optim;

/* Parses "SGD", "Adam" or "AdamW" (YOLOv5's --optimizer choices). */
int yc_optim_kind_parse(const char *s, yc_optim_kind *out);
const char *yc_optim_kind_name(yc_optim_kind k);

/* smart_optimizer: lr for every group, momentum (beta1 for Adam), decay for group 1 only;
 * frozen[layer] (may be NULL) excludes a layer's parameters entirely.  Prints YOLOv5's line
 * "optimizer: SGD(lr=0.01) with parameter groups 57 weight(decay=0.0), 60 weight(decay=...),
 * 60 bias". */
int yc_optim_new(yc_optim **out, yc_model *m, yc_optim_kind kind, double lr, double momentum,
                 double weight_decay, const bool *frozen);
void yc_optim_free(yc_optim *o);

/* One optimizer step over the accumulated gradients, submitted to the backend without waiting
 * for it: the global gradient norm over the trainable parameters, the scale min(1, max_norm /
 * (norm + 1e-6)) (torch.nn.utils.clip_grad_norm_) and the update of every group, all on the
 * device, which updates nothing when the norm is not finite.  Once the backend has synchronized,
 * yc_optim_step_done says how it went. */
int yc_optim_step(yc_optim *o, double max_norm);

/* After the step's work has finished (the backend synchronized): sets last_grad_norm; fails,
 * saying so, when the norm was not finite (the step then left the weights as they were). */
int yc_optim_step_done(yc_optim *o);

/* Sets every group's momentum buffers to zero (a fresh optimizer). */
int yc_optim_reset_state(yc_optim *o);

/* The LR factor lf(epoch): linear (1 - e/E)(1 - lrf) + lrf, or one_cycle cosine with cos_lr. */
double yc_lr_factor(int epoch, int epochs, double lrf, bool cos_lr);

/* np.interp(x, [x0, x1], [y0, y1]) (clamped outside). */
double yc_np_interp(double x, double x0, double x1, double y0, double y1);

/* Python/numpy round: half to even. */
double yc_round_half_even(double x);

/* Warmup for global batch index ni <= nw: group 0's lr falls from warmup_bias_lr, the others
 * rise from 0, towards initial_lr * lf; SGD momentum rises from warmup_momentum to `momentum`.
 * Returns the accumulation count max(1, round(interp(ni, [0, nw], [1, target]))), target being
 * nbs / batch in YOLOv5 (or the count given with --accumulate). */
int yc_optim_warmup(yc_optim *o, long ni, long nw, double lf, double warmup_bias_lr,
                    double warmup_momentum, double momentum, double target);

/* After warmup / at each epoch: lr = initial_lr * lf for every group (the LambdaLR step). */
void yc_optim_set_lf(yc_optim *o, double lf);

#endif
