/* yolocl train: YOLOv5's train.py in C.  Reference: docs/YOLOV5.md sections 3 to 5 and 7.
 *
 * One call runs a whole training: run directory, dataset scan, model (from a config, weights or
 * a checkpoint), AutoAnchor, the optimizer with warmup and schedule, the EMA, the epoch loop with
 * gradient accumulation and clipping, per-epoch validation of the EMA, results.csv, checkpoints
 * (last, best, periodic), early stopping, Ctrl-C handling and resume. */
#ifndef YC_TRAIN_H
#define YC_TRAIN_H

#include <stdbool.h>

#include "optim.h"

#define YC_MAX_FREEZE 64

/* Called after every training batch (epoch, batch index in the epoch, the batch's loss). */
typedef void (*yc_train_progress_fn)(void *ctx, int epoch, int batch, double loss);

typedef struct yc_train_opts {
    /* dataset yaml; NULL or "" trains on the built-in demo dataset */
    const char *data;
    /* model config (bundled name or path); NULL or "" takes it from the weights */
    const char *cfg;
    /* initial weights (.safetensors or .pt); NULL or "" trains from scratch */
    const char *weights;
    /* hyperparameters (bundled name or path) */
    const char *hyp;
    /* --resume: NULL = a new run; "" = the most recent run under project; else a run directory or
     * a checkpoint */
    const char *resume;
    int epochs;
    /* images per batch (-1: YOLOv5's AutoBatch) */
    int batch;
    /* training image size (rounded up to a multiple of the largest stride) */
    int imgsz;
    /* gradient accumulation count (0: round(64 / batch), as YOLOv5) */
    int accumulate;
    bool rect, nosave, noval, noautoanchor, noplots, cos_lr, single_cls, multi_scale;
    bool image_weights, exist_ok;
    /* --quad: YOLOv5's quad collate (quad.h), gradients times 4 */
    bool quad;
    yc_optim_kind optimizer;
    /* loader threads */
    int workers;
    const char *project, *name, *device;
    float label_smoothing;
    /* epochs without improvement before stopping (0: never) */
    int patience;
    /* --freeze: one value N freezes layers 0..N-1; several freeze the listed layers */
    int freeze[YC_MAX_FREEZE];
    int nfreeze;
    /* save a checkpoint every N epochs (<= 0: off) */
    int save_period;
    int seed;
    /* compute threads (<= 0: physical cores) */
    int threads;
    /* memory limit in bytes (0: 90% of the device's free memory) and the FP16 storage policy
     * (--half, --no-half, or only when needed to fit) */
    size_t mem;
    int half; /* yc_half_policy */
    /* --recompute: recompute in backward even when storing would fit */
    bool recompute;
    /* --sync-bn: SyncBatchNorm under several ranks (yc_graph_options.bn_sync); one process
     * warns and trains as without it */
    bool sync_bn;
    /* tiled training (tileset.h): window side (--tile; -1 = the dataset yaml's `tile:`, 0 = whole
     * images), overlap (--tile-overlap) and minimum kept box area (--tile-min-area), negative =
     * the yaml's value (default 0.2 and 0.1); set to the values used once the run starts */
    int tile;
    double tile_overlap, tile_min_area;
    /* tiles per epoch, a random subset drawn per epoch from the seed (0: all tiles) */
    int tiles_per_epoch;
    /* with tiles: validate per whole image (val_full.h: the images detected by slices of the
     * tile grid, merged as detect --slice) instead of per tile; no validation losses then */
    bool val_full;
    /* --cache: whole images kept decoded and resized, in memory or on disk (yc_cache_kind,
     * imgcache.h; ignored with tiles); as given now when resuming */
    int cache;
    /* --max-pixels: the most pixels one image read may decode (image_read.h; 0: 2^30); as given
     * now when resuming */
    size_t max_pixels;
    /* segmentation models (segment/train.py): the masks' downsampling from the image size
     * (--mask-ratio, default 4) and one mask per target instead of one index map per image
     * (--no-overlap); ignored by detection models */
    int mask_ratio;
    bool no_overlap;
    /* classifiers (classify_train.h): --cutoff, the layer count a detection config is cut to
     * (ClassificationModel's cutoff; 0: YOLOv5's 10), and --dropout, Classify's dropout
     * probability in [0, 1) (default 0, YOLOv5's) */
    int cutoff;
    float dropout;
    /* optional progress callback and its context */
    yc_train_progress_fn progress;
    void *progress_ctx;
} yc_train_opts;

/* YOLOv5's defaults (train.py's argparse) with the demo dataset and yolov5n when nothing is
 * given. */
void yc_train_opts_defaults(yc_train_opts *o);

/* Strings of options restored from a checkpoint (heap; the restored options point into them). */
typedef struct yc_train_opt_strings {
    char *data, *cfg, *hyp, *project, *name;
} yc_train_opt_strings;

/* Restores the options of an interrupted run from a checkpoint's `opt` metadata (the JSON that
 * opt.yaml is written from): epochs, batch, image size, accumulate, the flags, optimizer, freeze,
 * tiling and the data, cfg, hyp, project and name strings (kept in *keep).  Every value must have
 * its type and lie in the range the command line accepts; otherwise YC_EFORMAT names the key, *o
 * may be partly set and *keep is empty. */
int yc_train_opts_from_json(const char *text, yc_train_opts *o, yc_train_opt_strings *keep);
void yc_train_opt_strings_free(yc_train_opt_strings *s);

/* Runs the training.  Returns YC_OK, or a status with the message; an interrupted run (SIGINT,
 * SIGTERM) returns YC_OK after saving a resumable checkpoint and sets *interrupted. */
int yc_train(const yc_train_opts *o, bool *interrupted);

/* The checkpoint --resume SPEC continues into out[len]: SPEC itself when it is a file, else
 * SPEC/weights/last.safetensors; an empty SPEC: the most recently written
 * PROJECT/<run>/weights/last.safetensors (YOLOv5's get_latest_run).  YC_EIO when there is none.
 * (Classifier training, classify_train.h, resumes through it too.) */
int yc_train_find_resume(const char *spec, const char *project, char *out, size_t len);

/* The class names as a JSON array (checkpoints' `names`): a heap string, NULL when out of
 * memory. */
char *yc_train_names_json(char *const *names, int nc);

#endif
