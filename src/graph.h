/* The training step (or the inference pass) of a model as a fixed schedule of backend ops.
 *
 * yc_graph_new walks the model config and emits the forward ops of every module (graph.c's
 * module builders), then, for training, the backward ops in reverse order.  Concat is free: the
 * inputs of a concat are channel-range views of its output, and so are their gradients.  Every
 * activation and gradient gets a lifetime (first and last position in the schedule); the planner
 * (plan.h) places them in one arena.  The loss sits between forward and backward and runs on the
 * host: it reads the head outputs and writes their gradients (yc_graph_head / head_grad).
 *
 *   positions 0 .. nforward-1     forward ops
 *   position  nforward            the loss (host)
 *   positions nforward+1 ..       backward ops */
#ifndef YC_GRAPH_H
#define YC_GRAPH_H

#include <stddef.h>

#include "backend.h"
#include "model.h"
#include "plan.h"

typedef enum yc_graph_mode {
    YC_GRAPH_TRAIN, /* BN with batch statistics, forward + backward */
    YC_GRAPH_EVAL,  /* BN with running statistics, forward only */
} yc_graph_mode;

typedef struct yc_graph yc_graph;

/* Builds the schedule for a batch of `batch` images of h x w (multiples of the largest stride)
 * on the model's backend; nothing is allocated on the device yet. */
int yc_graph_new(yc_graph **out, yc_model *m, int batch, int h, int w, yc_graph_mode mode);
void yc_graph_free(yc_graph *g);

/* Plans the arena and allocates it (and the op workspace) on the model's backend. */
int yc_graph_alloc(yc_graph *g);

/* The memory plan (valid after yc_graph_new; offsets after yc_graph_alloc). */
const yc_plan *yc_graph_plan(const yc_graph *g);
/* Bytes of the largest op workspace. */
size_t yc_graph_workspace_bytes(const yc_graph *g);

/* The input batch tensor (batch, ch, h, w), to be written before yc_graph_forward. */
const yc_tensor *yc_graph_input(const yc_graph *g);
/* Head output of level l: (batch, na*no, ny, nx), channel a*no + k. */
const yc_tensor *yc_graph_head(const yc_graph *g, int level);
/* Its gradient (training graphs), written by the loss before yc_graph_backward. */
const yc_tensor *yc_graph_head_grad(const yc_graph *g, int level);

/* Runs the forward ops (and counts a batch in every BN's num_batches_tracked in training). */
int yc_graph_forward(yc_graph *g);
/* Runs the backward ops: parameter gradients are added to the model's gradient arena. */
int yc_graph_backward(yc_graph *g);

/* Number of ops in the schedule, and op i (for profiles and tests). */
int yc_graph_nops(const yc_graph *g);
const yc_op *yc_graph_op(const yc_graph *g, int i);
/* Number of forward ops (the loss position). */
int yc_graph_nforward(const yc_graph *g);

#endif
