/* The training step (or the inference pass) of a model as a fixed schedule of backend ops.
 *
 * yc_graph_new walks the model config and emits the forward ops of every module (modules.c's
 * module builders), then, for training, the backward ops in reverse order (autodiff.c).  Concat
 * is free: the inputs of a concat are channel-range views of its output, and so are their
 * gradients.  Every activation and gradient gets a lifetime (first and last position in the
 * schedule); the planner (plan.h) places them in one arena (arena.c).  The loss sits between
 * forward and backward (step.c: on the device through the backend's yolo_loss where it has one,
 * else on the host): it reads the head outputs and writes their gradients (yc_graph_head /
 * head_grad).
 *
 *   positions 0 .. nforward-1     forward ops
 *   position  nforward            the loss
 *   positions nforward+1 ..       backward ops */
#ifndef YC_GRAPH_H
#define YC_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "model.h"
#include "plan.h"

typedef enum yc_graph_mode {
    YC_GRAPH_TRAIN, /* BN with batch statistics, forward + backward */
    YC_GRAPH_EVAL,  /* BN with running statistics, forward only */
} yc_graph_mode;

typedef struct yc_graph yc_graph;

/* How a schedule stores its tensors (the memory planner's choices, see plan.h). */
typedef struct yc_graph_options {
    /* training or inference */
    yc_graph_mode mode;
    /* FP16 storage of the input batch and every forward activation but the heads (the backend
     * must support it); gradients stay FP32 */
    bool half;
    /* recompute in backward instead of storing SiLU outputs that own their storage
     * (YC_OP_BN_SILU_APPLY before their first backward reader); gradients are bit-identical
     * either way.  BatchNorm outputs are never stored in training, with or without it: the fused
     * BN+SiLU ops recompute them in backward, which costs less time than storing them. */
    bool recompute;
    /* every layer's output kept to the end of the forward, so that it can be read afterwards
     * (detect --visualize, yc_graph_layer_output); otherwise its storage is reused after its
     * last reader */
    bool keep_layers;
    /* Classify's dropout probability in [0, 1) (nn.Dropout(p); training graphs only: evaluation
     * is the identity); 0: no dropout op */
    double dropout;
} yc_graph_options;

/* Builds the schedule for a batch of `batch` images of h x w (multiples of the largest stride)
 * on the model's backend; nothing is allocated on the device yet.  FP32, nothing recomputed. */
int yc_graph_new(yc_graph **out, yc_model *m, int batch, int h, int w, yc_graph_mode mode);
/* The same with explicit storage options. */
int yc_graph_new_opts(yc_graph **out, yc_model *m, int batch, int h, int w,
                      const yc_graph_options *opt);
void yc_graph_free(yc_graph *g);

/* Sets the seed of every YC_OP_DROPOUT of the graph (the forward op and its backward, which must
 * draw the same mask): a training step sets a new one before its forward. */
void yc_graph_set_dropout_seed(yc_graph *g, uint32_t seed);

/* Device memory for activations: chunks (each at most the device's largest allocation) and the
 * op workspace, shared by the graphs placed in it (they never run at the same time: a training
 * step, the last smaller batch, validation batches).  It only grows; replacing a buffer bumps
 * `generation`, and graphs placed earlier re-bind their tensors before they run. */
typedef struct yc_arena {
    /* the backend the buffers live on */
    yc_backend *be;
    /* activation chunks and their sizes */
    int nchunks;
    yc_buffer *chunk[YC_PLAN_MAX_CHUNKS];
    size_t chunk_size[YC_PLAN_MAX_CHUNKS];
    /* op workspace */
    yc_buffer *ws;
    size_t ws_size;
    /* incremented whenever a buffer is replaced */
    unsigned generation;
} yc_arena;

/* An empty arena on `be`. */
void yc_arena_init(yc_arena *a, yc_backend *be);
/* Grows the arena to hold a plan's chunks and a workspace of ws bytes. */
int yc_arena_reserve(yc_arena *a, const yc_plan *plan, size_t ws);
/* Frees every buffer (the graphs placed in it must not run afterwards). */
void yc_arena_release(yc_arena *a);
/* Total bytes held. */
size_t yc_arena_bytes(const yc_arena *a);

/* Checks every op against the model's backend and sums the workspace the ops need (no
 * allocation). */
int yc_graph_prepare(yc_graph *g);

/* Places the graph's tensors in a shared arena (growing it if needed). */
int yc_graph_alloc_in(yc_graph *g, yc_arena *a);
/* Places the graph in an arena of its own, freed with the graph. */
int yc_graph_alloc(yc_graph *g);

/* The memory plan (valid after yc_graph_new; offsets after yc_graph_alloc). */
const yc_plan *yc_graph_plan(const yc_graph *g);
/* Bytes of the largest op workspace. */
size_t yc_graph_workspace_bytes(const yc_graph *g);

/* The input batch tensor (batch, ch, h, w), to be written before yc_graph_forward. */
const yc_tensor *yc_graph_input(const yc_graph *g);
/* Head output of level l: (batch, na*no, ny, nx), channel a*no + k; a classifier's one head
 * (level 0) is its logits (batch, nc, 1, 1); a segmentation model's head nl is its Proto output
 * (batch, nm, H, W) at twice the first level's size. */
const yc_tensor *yc_graph_head(const yc_graph *g, int level);
/* The output of layer i of the model config (not the Detect layer): (batch, c, h, w).  Read
 * after yc_graph_forward only in a graph made with keep_layers. */
const yc_tensor *yc_graph_layer_output(const yc_graph *g, int layer);
/* Its gradient (training graphs), written by the loss before yc_graph_backward.  It shares the
 * head's storage: writing it overwrites the head. */
const yc_tensor *yc_graph_head_grad(const yc_graph *g, int level);

/* Runs the forward ops (and counts a batch in every BN's num_batches_tracked in training),
 * submitted to the backend without waiting for them: reads of the results wait. */
int yc_graph_forward(yc_graph *g);
/* Runs the backward ops, likewise: parameter gradients are added to the model's gradient arena. */
int yc_graph_backward(yc_graph *g);

/* Number of ops in the schedule, and op i (for profiles and tests). */
int yc_graph_nops(const yc_graph *g);
const yc_op *yc_graph_op(const yc_graph *g, int i);
/* Number of forward ops (the loss position). */
int yc_graph_nforward(const yc_graph *g);

/* Per-op timing (yolocl bench --profile).  While it is on, every run waits for each op to finish
 * (the backend's synchronize: clFinish on OpenCL, so the device's queue is serialised) and adds
 * the op's wall time to its total; off, the default, costs one test per op.  Switching it on the
 * first time allocates the totals (YC_ENOMEM). */
int yc_graph_set_profiling(yc_graph *g, bool on);
/* Seconds spent in op i (yc_graph_op order) summed over the profiled runs, yc_graph_nops
 * entries; NULL while profiling has never been on. */
const double *yc_graph_op_seconds(const yc_graph *g);
/* Sets the totals back to zero (warm-up runs). */
void yc_graph_reset_profile(yc_graph *g);

/* GFLOPs of one forward pass at imgsz x imgsz as YOLOv5's model summary prints them (thop
 * counting: conv MACs without bias, BatchNorm 4 per element, nearest upsample 1 per output
 * element, all times 2), computed at the largest stride (at least 32) and scaled.  -1 when the
 * graph cannot be built at that size (a layer deeper than the Detect levels does not divide it). */
double yc_model_gflops(yc_model *m, int imgsz);

#endif
