/* Throughput of a model on a backend, measured with the code training and validation run: the
 * inference pass (an evaluation-mode graph) and the training step as yolocl train runs it
 * (yc_step_run_u8: input upload, train-mode forward, YOLOv5 loss, backward; then the optimizer
 * step: SGD with gradient clipping, zeroing the gradients, the EMA update).  The model starts from
 * YOLOv5's random initialisation (seed 0); the batch is deterministic pseudo-random pixels with
 * a few synthetic boxes per image.  Used by yolocl bench. */
#ifndef YC_BENCH_H
#define YC_BENCH_H

#include <stdbool.h>

#include "backend.h"
#include "opprofile.h"

/* Targets generated per image. */
#define YC_BENCH_TARGETS_PER_IMAGE 3

typedef struct yc_bench_config {
    /* model config path (yc_model_cfg_find) */
    const char *cfg_path;
    /* images per batch, and their size (square, a multiple of the model's largest stride) */
    int batch, img;
    /* FP16 storage of activations (the backend must store half) */
    bool half;
    /* untimed iterations first (at least 0), then timed iterations (at least 1) */
    int warmup, iters;
    /* time every op during the timed iterations (yc_graph_set_profiling; serialises OpenCL) */
    bool profile;
} yc_bench_config;

/* One quantity over the timed iterations, seconds. */
typedef struct yc_bench_time {
    /* median (the mean of the middle two for an even count) and minimum */
    double median, min;
} yc_bench_time;

typedef struct yc_bench_result {
    /* the model's display name ("YOLOv5n", from the config) */
    char model[128];
    /* one image's forward pass at img x img, GFLOP (2 x multiply-adds, as yolocl info counts) */
    double forward_gflop;
    /* inference: input upload, evaluation-mode forward, per batch */
    yc_bench_time forward;
    /* training: input upload, train-mode forward, loss, backward, per batch */
    yc_bench_time fwd_bwd;
    /* training: the optimizer step (clip, SGD, zero gradients, EMA), per batch */
    yc_bench_time optim;
    /* training: the whole step (fwd_bwd + optim of the same iteration), per batch */
    yc_bench_time train;
    /* the loss of the last training iteration (a finite number shows the step ran) */
    double loss;
    /* per timed training step (the step, the optimizer, the EMA and the wait for the device at
     * the end of it): the backend's kernel launches, host waits and bytes between host and
     * device (yc_backend_counters) */
    double launches_per_step, host_waits_per_step, transfer_bytes_per_step;
    /* with config.profile: the inference pass's ops; the training step's ops plus host rows
     * "loss, transfers" (the step time not spent in ops) and "optimizer" */
    yc_profile forward_profile, train_profile;
} yc_bench_result;

/* Runs one configuration on `be`.  YC_EUSAGE for a size that is not a multiple of the model's
 * stride or --half on a backend without FP16 storage; other failures as the steps report them. */
int yc_bench_run(const yc_bench_config *c, yc_backend *be, yc_bench_result *r);

#endif
