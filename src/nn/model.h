/* A YOLOv5 model: its resolved config, its parameters (YOLOv5 state-dict names, optimizer groups),
 * its non-trained state (BatchNorm running statistics, batch counters, anchors) and their storage
 * on a backend.  yc_model_new declares the parameters as YOLOv5's modules' __init__ does (names
 * and order of its state dict); the network's ops live in graph.c, whose forward builders
 * (modules.c) find the parameters here by name every time a graph is built for a batch shape. */
#ifndef YC_MODEL_H
#define YC_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "modelcfg.h"

/* Optimizer parameter groups, numbered as YOLOv5's smart_optimizer orders them. */
typedef enum yc_param_group {
    YC_PG_BIAS = 0,      /* every bias (BN beta, Detect conv bias): no weight decay */
    YC_PG_WEIGHT = 1,    /* conv weights: weight decay */
    YC_PG_BN_WEIGHT = 2, /* BN gamma: no weight decay */
    YC_PG_COUNT = 3,
} yc_param_group;

#define YC_NAME_MAX 96

typedef struct yc_param {
    /* YOLOv5 state-dict name ("model.2.m.0.cv1.conv.weight") */
    char name[YC_NAME_MAX];
    /* dimensions as PyTorch stores them (1 for vectors, 4 for conv weights) */
    int ndim;
    int shape[4];
    /* number of elements */
    size_t numel;
    /* element offset in the parameter (and gradient) arena; parameters of one optimizer group
     * are contiguous */
    size_t offset;
    /* optimizer group */
    yc_param_group group;
    /* model layer it belongs to ("model.<layer>.") */
    int layer;
    /* the parameter and its gradient as tensors (valid after yc_model_alloc) */
    yc_tensor t, grad;
} yc_param;

/* Non-trained state saved in the state dict. */
typedef enum yc_state_kind {
    YC_STATE_RUNNING_MEAN, /* BatchNorm running mean (float, on the backend) */
    YC_STATE_RUNNING_VAR,  /* BatchNorm running variance (float, on the backend) */
    YC_STATE_NUM_BATCHES,  /* BatchNorm num_batches_tracked (int64, on the host) */
} yc_state_kind;

typedef struct yc_state {
    /* state-dict name ("model.0.bn.running_mean") */
    char name[YC_NAME_MAX];
    yc_state_kind kind;
    /* channels (running stats) or 1 (counter) */
    int numel;
    /* element offset in the float state arena (running stats); index into num_batches (counter) */
    size_t offset;
    /* the running statistic as a tensor (valid after yc_model_alloc; unused for counters) */
    yc_tensor t;
} yc_state;

typedef struct yc_model {
    /* resolved config (owned) */
    yc_model_cfg *cfg;
    /* parameters in registration order (= YOLOv5's state-dict order) */
    int nparams;
    yc_param *params;
    /* total parameter elements */
    size_t param_elems;
    /* the arena holds the groups one after the other: group g is elements
     * [group_offset[g], group_offset[g] + group_elems[g]) */
    size_t group_offset[YC_PG_COUNT], group_elems[YC_PG_COUNT];
    /* running statistics and counters in registration order */
    int nstate;
    yc_state *state;
    size_t state_elems;
    /* BatchNorm num_batches_tracked values */
    int nbn;
    int64_t *num_batches;
    /* Detect: levels, anchors per level, classes, outputs per anchor (nc + 5; Segment's
     * nc + 5 + nm) */
    int nl, na, nc, no;
    /* Segment: mask coefficients per anchor and Proto's width (both 0 for Detect and Classify) */
    int nm, npr;
    /* stride of each level in input pixels (8, 16, 32[, 64]) */
    float stride[YC_CFG_MAX_LEVELS];
    /* anchors in grid units of their level (YOLOv5's Detect.anchors buffer), [(l*na + a)*2 + wh] */
    float anchors[YC_CFG_MAX_LEVELS * YC_CFG_MAX_ANCHORS * 2];
    /* the state dict in YOLOv5's order: dict[i] is parameter `idx` or state entry `idx` */
    int ndict;
    struct yc_dict_entry {
        bool is_state;
        int idx;
    } *dict;
    /* the Detect layer index and its state-dict name for the anchors ("model.24.anchors") */
    int detect_layer;
    char anchors_name[YC_NAME_MAX];

    /* every Conv's BatchNorm folded into its weights (yc_model_fuse): the conv weights hold
     * w * gamma / sqrt(var + eps) and the BN biases beta - gamma * mean / sqrt(var + eps); the BN
     * weights and statistics are stale.  Evaluation graphs only. */
    bool fused;

    /* storage on a backend (NULL until yc_model_alloc) */
    yc_backend *be;
    yc_buffer *param_buf, *grad_buf, *state_buf;

} yc_model;

/* Builds a model from a resolved config (takes ownership of cfg): registers the parameters,
 * computes the strides (input size / output size per level, as YOLOv5's 256x256 probe does),
 * orders the anchors like check_anchor_order and divides them by the strides. */
int yc_model_new(yc_model **out, yc_model_cfg *cfg);
void yc_model_free(yc_model *m);

/* A second model with the same config, parameters registry, anchors and batch counters, not
 * allocated (the EMA and evaluation copies). */
int yc_model_clone(const yc_model *src, yc_model **out);

/* Copies parameters, running statistics, counters and anchors from src (same config, both
 * allocated on the same backend). */
int yc_model_copy_weights(yc_model *dst, const yc_model *src);

/* Allocates parameters, gradients (zeroed) and state on a backend. */
int yc_model_alloc(yc_model *m, yc_backend *be);

/* Allocates parameters and state only, for a model that never takes a backward pass (the EMA,
 * val, detect): grad_buf stays NULL and the parameters' grad tensors empty. */
int yc_model_alloc_weights(yc_model *m, yc_backend *be);

/* YOLOv5's initialisation (docs/YOLOV5.md 1.8): conv weights and Detect biases U(-1/sqrt(fan_in),
 * ..), Detect bias priors for objectness and classes, BN gamma 1, beta 0, running mean 0, var 1. */
int yc_model_init_weights(yc_model *m, uint64_t seed);

/* Loads every parameter and state entry by name from a safetensors file.  Missing names or
 * shape mismatches are errors naming the tensor.  The anchors are taken from the file when it
 * has them. */
int yc_model_load(yc_model *m, const char *path);

/* The eps of the BatchNorm of the Conv `prefix` ("model.<layer>...."), as nn/modules.c builds
 * it: 1e-5 in a Classify head (forward_classify, PyTorch's default), else YOLOv5's 1e-3
 * (forward_conv).  yc_model_fuse and the ONNX export fold with it. */
float yc_model_bn_eps(const yc_model *m, const char *prefix);

/* Folds one BatchNorm into the convolution before it, in place, as fuse_conv_and_bn does in
 * float32: each of the c2 output channels' `per` filter weights in w (c2 * per, channel-major)
 * scaled by gamma / sqrt(eps + var), and beta (c2) replaced by beta - gamma * mean /
 * sqrt(var + eps), the fused conv's bias.  gamma, mean and var hold c2 values each. */
void yc_model_fold_bn(float *w, float *beta, const float *gamma, const float *mean,
                      const float *var, size_t c2, size_t per, float eps);

/* Folds each Conv's BatchNorm into the convolution as YOLOv5's fuse() does before inference
 * (fuse_conv_and_bn, in float32: each output channel's filter scaled by
 * gamma / sqrt(var + eps), the bias beta - gamma * mean / sqrt(var + eps) stored in the BN bias),
 * in place: the model then builds evaluation graphs only (Conv with a bias and the SiLU
 * epilogue where the backend has it: YC_OP_CONV2D's p.conv.silu), as `yolocl val` and
 * `yolocl detect` run it; its convolutions' weights are frozen (p.conv.frozen), so their
 * transformed copies are kept by the backend between runs, until the weights are written again.
 * A model that is fused already is left as it is; after a failure (a
 * read-back error) the model is partly fused and must not be used. */
int yc_model_fuse(yc_model *m);

/* YC_OK for a detection model; for a classifier or a segmentation model (cfg->task
 * YC_TASK_CLASSIFY, YC_TASK_SEGMENT) an error naming `what` (the command or job), which works on
 * detection models only. */
int yc_model_require_detection(const yc_model *m, const char *what);

/* Sets all gradients to zero. */
int yc_model_zero_grad(yc_model *m);

/* The index of parameter or state entry `name`, or -1 (modules.c's forward builders). */
int yc_model_find_param(const yc_model *m, const char *name);
int yc_model_find_state(const yc_model *m, const char *name);

/* Counts, as YOLOv5's model summary prints them: parameters, and layers (= modules, with the
 * shared SiLU counted once). */
size_t yc_model_count_params(const yc_model *m);
int yc_model_count_modules(const yc_model *m);
/* Parameters of layer i. */
size_t yc_model_layer_params(const yc_model *m, int layer);

#endif
