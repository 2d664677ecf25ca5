/* Training checkpoints: one safetensors file per checkpoint, written atomically (temporary file
 * and rename), readable by numpy/PyTorch.
 *
 *   tensors under YOLOv5's state-dict names   the EMA weights (what val, detect and fine-tuning
 *                                             load), FP32, anchors and BN counters included
 *   resume.model.<name>                       the raw model's state dict
 *   resume.optim.<buffer>.<name>              optimizer state per parameter (momentum_buffer;
 *                                             exp_avg, exp_avg_sq for Adam/AdamW)
 *   resume.grad.<name>                        inside an accumulation cycle (Ctrl-C between
 *                                             optimizer steps): the gradients accumulated since
 *                                             the last optimizer step
 *   __metadata__                              format "yolocl-1", model_yaml, model_name, nc,
 *                                             names (JSON), stride (JSON), epoch, best_fitness,
 *                                             updates, optimizer, optimizer_steps, opt (JSON of
 *                                             the run's options), hyp (JSON), cwd (the run's
 *                                             working directory), date; inside an interrupted
 *                                             epoch also epoch_loss (the running means of box,
 *                                             obj and cls, JSON; of a segmentation model box,
 *                                             seg, obj and cls) and epoch_batches
 *
 * A final checkpoint (YOLOv5's strip_optimizer) keeps only the EMA weights and the model
 * metadata, with epoch -1. */
#ifndef YC_CHECKPOINT_H
#define YC_CHECKPOINT_H

#include "model.h"
#include "optim.h"

typedef struct yc_ckpt_meta {
    /* last completed epoch (-1 in a final checkpoint; also -1, with next_batch > 0, after an
     * interruption inside the first epoch) */
    int epoch;
    /* the batch of epoch + 1 to continue from: 0, or where an interrupted epoch stopped (the
     * batch after its last optimizer step) */
    int next_batch;
    /* best fitness so far */
    double best_fitness;
    /* EMA updates done */
    long updates;
    /* global batch index of the last optimizer step (-1: none) */
    long last_opt_step;
    /* optimizer steps done and the optimizer's name */
    long optim_steps;
    char optimizer[16];
    /* JSON texts (owned; may be NULL): class names array, run options object, hyp object */
    char *names_json;
    char *opt_json;
    char *hyp_json;
    /* the working directory the run was started in, which relative paths of its options are
     * relative to (owned; may be NULL) */
    char *cwd;
    /* an interrupted epoch's training losses up to next_batch: the running means of box, obj and
     * cls (epoch_nloss 3), or of a segmentation model's box, seg, obj and cls (epoch_nloss 4),
     * over its first epoch_batches batches (0: none) */
    double epoch_loss[4];
    int epoch_nloss;
    int epoch_batches;
    /* the model's gradients are saved with it (resume.grad.*): batches after the last optimizer
     * step have added to them */
    bool grads;
} yc_ckpt_meta;

void yc_ckpt_meta_free(yc_ckpt_meta *meta);

/* Writes a checkpoint (atomically: a failed write leaves the file at `path` as it was).
 * `model` and `optim` may be NULL (a final checkpoint).  Fails without writing when a parameter
 * or BN statistic of `ema` or `model` is not finite (NaN, Inf). */
int yc_checkpoint_save(const char *path, const yc_model *ema, const yc_model *model,
                       const yc_optim *optim, const yc_ckpt_meta *meta);

/* Reads the metadata of a checkpoint written by yc_checkpoint_save. */
int yc_checkpoint_read_meta(const char *path, yc_ckpt_meta *meta);

/* The model config a checkpoint carries (its model_yaml), with nc_override > 0 replacing its nc;
 * reads the file's header only. */
int yc_checkpoint_model_cfg(const char *path, int nc_override, yc_model_cfg **cfg);

/* Restores the training state for --resume: the raw model, the EMA, the optimizer buffers (all
 * allocated for the same config) and, where the checkpoint has them (meta.grads), the model's
 * accumulated gradients.  Fails, naming the tensor, when something is missing. */
int yc_checkpoint_load_train_state(const char *path, yc_model *model, yc_model *ema,
                                   yc_optim *optim);

/* Loads a checkpoint's EMA weights (the tensors under YOLOv5 names) into an allocated model. */
int yc_checkpoint_load_weights(const char *path, yc_model *m);

#endif
