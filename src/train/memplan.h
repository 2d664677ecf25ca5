/* The memory of a whole run, computed before anything is allocated (planned, never discovered:
 * docs/ARCHITECTURE.md "Memory planner"): the activation plans of the training and validation
 * graphs (plan.h), the parameters, gradients, optimizer state, EMA, BatchNorm statistics, the op
 * workspace, and the host side of the data path (loader rings, per-thread decode and augmentation
 * buffers, staging copies where the device does not share host memory).  `yolocl plan` prints it,
 * `yolocl train` uses it to fit a run into a memory limit: FP16 storage first, then recomputation,
 * then micro-batches: each batch the loader builds is run through the training graph in parts that
 * fit, their gradients added up, so that every optimizer step sees the images and the loss of the
 * requested batch. */
#ifndef YC_MEMPLAN_H
#define YC_MEMPLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"
#include "optim.h"
#include "plan.h"

/* What a run is, as far as memory goes. */
typedef struct yc_run_shape {
    /* the model (parameters registered; its backend `be` set for workspace queries, allocated or
     * not) */
    yc_model *m;
    /* training (graph with backward, optimizer, EMA, training loader) or inference only */
    bool train;
    /* micro-batch of the training step, and the validation batch (0: no validation) */
    int batch, val_batch;
    /* images of a batch the training loader builds (the requested batch, cut into micro-batches
     * of `batch`); 0: the same as batch */
    int loader_batch;
    /* square training image size; validation batches are at most (imgsz + stride)^2 */
    int imgsz;
    /* storage choices */
    bool half, recompute;
    yc_optim_kind optimizer;
    /* loader threads, and the largest image of the dataset (the tile readers' buffers) */
    int workers;
    int max_image_w, max_image_h;
    /* whole images (no tiles): the bytes one loader thread's read takes beyond its output for
     * the dataset's costliest image (image_read.h: bounded by the output size for images read
     * reduced, the whole decode up to 4096 x 4096), and that image's path and size for the fit's
     * error (NULL when unknown) */
    size_t read_bytes;
    const char *read_image;
    int read_image_w, read_image_h;
    /* --cache ram: the training and validation images kept decoded and resized (imgcache.h) */
    size_t cache_bytes;
    /* tiled training (tileset.h): the window side, 0 for whole images.  Then images are never
     * decoded whole above YC_SLICE_DECODE_MAX: each loader thread holds one reader (a decoded
     * image up to that size, or a band of `tile` rows of the widest image) and the windows of
     * the batch it builds, in place of a whole decoded image */
    int tile;
    /* validation by whole images (val_full.h) in place of the validation loader: its host bytes
     * as yc_val_full_host_bytes gives them (> 0); the validation graph is then one window,
     * batch 1 at imgsz x imgsz.  0: validation by batches (val_batch) */
    size_t val_full_bytes;
    /* memory the process holds already (libraries, the dataset index): counted in the peak */
    size_t baseline;
    /* segmentation models (m->nm > 0): the masks' downsampling from the image size (--mask-ratio;
     * 0 counts as 4, segment/train.py's default) and the masks a batch holds per image (1: the
     * overlap format's one index map; without overlap one per target, so the most targets an
     * image of the batch may have; 0 counts as 1).  Counted: the Proto output and its gradient
     * (in the graphs), the host copies of the heads and Proto the segmentation step makes and
     * their gradients, the masks in the loaders' batches, and the loss's scratch */
    int mask_ratio, masks_per_image;
} yc_run_shape;

#define YC_MEM_MAX_ITEMS 40

typedef struct yc_mem_item {
    /* what it is ("parameters", "activation arena", "training loader ring") */
    const char *what;
    /* bytes */
    size_t bytes;
    /* on the compute device (else host memory); the same thing for the CPU backend */
    bool device;
} yc_mem_item;

typedef struct yc_mem_report {
    /* the items, device ones first */
    int nitems;
    yc_mem_item items[YC_MEM_MAX_ITEMS];
    /* sums: device memory, host memory, and the whole process peak (device + host when the device
     * is the host, else host only) */
    size_t device_bytes, host_bytes, peak_bytes;
    /* the peak with the activation arena replaced by the plan's lower bound (the largest sum of
     * live activations): no placement can do better */
    size_t lower_bound_bytes;
    /* the activation plan of the training step (chunks, blocks; owned) and of the largest
     * validation batch */
    yc_plan train_plan, val_plan;
    /* the largest op workspace */
    size_t workspace_bytes;
    /* the device shares host memory (the CPU backend) */
    bool host_device;
    /* the training graph the plan came from (owned; block names point into it), or NULL */
    struct yc_graph *train_graph;
} yc_mem_report;

/* Plans a run; fills *r (free with yc_mem_report_free). */
int yc_memplan(const yc_run_shape *rs, yc_mem_report *r);
void yc_mem_report_free(yc_mem_report *r);

/* The blocks of a plan, largest first: indices of the n largest into out (n <= nblocks). */
int yc_plan_largest(const yc_plan *p, int *out, int n);

/* What yc_memfit chose and why. */
typedef struct yc_mem_fit {
    /* the choice: storage, the images per training step (micro_batch) and the batches per
     * optimizer step (YOLOv5's accumulate for the requested batch, or for the AutoBatch one) */
    bool half, recompute;
    int micro_batch, accumulate;
    /* how a batch is run: `micro_batches` steps, all of micro_batch images but the last, which
     * has last_micro (1 and micro_batch when the batch fits whole) */
    int micro_batches, last_micro;
    /* the plan of the choice */
    size_t peak_bytes;
    /* one sentence for the log: "fits: batch 16, FP32" or "batch 64 needs 7.1 GiB, the limit
     * is 2 GiB: FP16 storage, recomputation, micro-batch 8 with accumulate 8 (3.2 GiB -> 1.9
     * GiB)" */
    char reason[512];
} yc_mem_fit;

/* How half may be chosen: never (--no-half), always (--half), or when needed to fit. */
typedef enum yc_half_policy {
    YC_HALF_OFF,
    YC_HALF_ON,
    YC_HALF_AUTO,
} yc_half_policy;

/* The policy a run uses when the user asked for neither --half nor --no-half: FP16 storage on
 * OpenCL devices that can store it (it halves the memory traffic of saved activations on a GPU),
 * on the CPU backend only when needed to fit (there the conversions cost time). */
yc_half_policy yc_half_default(yc_half_policy requested, const struct yc_backend *be);

/* Fits a run into `limit` bytes: the requested batch as it is; else FP16 storage (when the
 * policy and the device allow); else recomputation too (always, when base->recompute is set);
 * else the largest micro-batch that fits, the batch run as ceil(batch / micro) of them (the last
 * one smaller when they do not divide it), with YOLOv5's accumulate for the requested batch,
 * max(round(nominal / batch), 1), so that an optimizer step sees batch x accumulate images as in
 * YOLOv5.  batch -1 asks for the largest batch that fits (AutoBatch, computed), at most
 * `max_batch`.
 * Fails before anything is allocated when not even a micro-batch of 1 fits, naming what would
 * help: the --cache ram images when the run would fit without them, the costliest image's read
 * (with --tile, fewer --workers) when it would fit without that, else the largest tensor. */
int yc_memfit(const yc_run_shape *base, size_t limit, yc_half_policy half, int nominal,
              int max_batch, yc_mem_fit *fit);

#endif
