/* The private side of graph.h, shared by the files that build and run a graph: the values
 * (activations, their gradients and channel-range views of them) and nodes (an op over values
 * and model tensors) of struct yc_graph, and the helpers that create them.
 *
 *   graph.c     the graph itself: values and nodes, yc_graph_new, accessors, runs, GFLOPs
 *   modules.c   the YOLOv5 modules' forward builders (Conv, C3, SPPF, Detect...)
 *   autodiff.c  the backward: gradient values and the backward op of each forward op
 *   arena.c     lifetimes, placement in the arena, the arenas themselves
 *
 * Nothing outside src/nn/graph.c, modules.c, autodiff.c and arena.c includes it. */
#ifndef YC_GRAPH_INTERNAL_H
#define YC_GRAPH_INTERNAL_H

#include "graph.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- values and nodes --------------------------------------------------------------------- */

typedef struct gvalue {
    /* shape (and placement once allocated) */
    yc_tensor t;
    /* the value this one is a channel range of (-1: it owns its storage) */
    int parent;
    /* first channel inside the parent */
    int chan0;
    /* its gradient value (-1: none yet) */
    int grad;
    /* depends on a parameter, so backward must reach it */
    bool needs_grad;
    /* is a gradient (its owner tracks which channels backward has written) */
    bool is_grad;
    /* the forward node that produced it (-1: none, or not yet known) */
    int producer;
    /* recompute mode: backward re-derives this SiLU output from the stored convolution output
     * instead of keeping it (see yc_graph_remat_of), and its re-derived copy once made (-1: not
     * yet) */
    bool recomputable;
    int remat;
    /* owners: lifetime in schedule positions, and channels of the gradient written so far */
    int first, last;
    uint8_t *written;
    char name[96];
} gvalue;

/* An operand of a node: a graph value, or a model tensor resolved once the model is final. */
typedef enum ref_kind { REF_NONE, REF_VALUE, REF_PARAM, REF_PARAM_GRAD, REF_STATE } ref_kind;

typedef struct gref {
    ref_kind kind;
    int idx;
} gref;

typedef struct gnode {
    /* the op, its tensor pointers resolved from src/dst by yc_graph_resolve_ops() */
    yc_op op;
    gref src[YC_OP_MAX_SRC];
    gref dst[YC_OP_MAX_DST];
    char name[96];
} gnode;

struct yc_graph {
    yc_model *m;
    yc_graph_mode mode;
    yc_graph_options opt;
    /* element type of forward activations (FP16 with opt.half) */
    yc_dtype act;
    int batch, h, w;
    gvalue **v;
    int nv, cap_v;
    gnode *nodes;
    int nn, cap_n;
    int nforward;
    /* value ids: network input, every layer's output, heads and their gradients */
    int input;
    int *layer_out;
    int heads[YC_CFG_MAX_LEVELS + 1];
    int head_grads[YC_CFG_MAX_LEVELS + 1];
    /* memory */
    yc_plan plan;
    int *block_of; /* value id -> plan block (owners) */
    /* workspace the ops need (yc_graph_prepare), the arena the tensors are placed in, the
     * arena's generation when they were bound, and an arena owned by the graph */
    size_t ws_bytes;
    bool prepared;
    yc_arena *arena;
    unsigned bound_generation;
    yc_arena own;
    bool owns_arena;
    /* per-op timing: on or off, and seconds per op summed over the profiled runs (nn entries,
     * allocated when profiling is first switched on) */
    bool profiling;
    double *op_seconds;
    /* with opt.grads_ready: the parameters whose gradients are final after backward node i
     * (nforward <= i < nn): ready[ready_at[k] .. ready_at[k + 1]) with k = i - nforward + 1, and
     * those no node writes (k = 0); NULL without */
    int *ready, *ready_at;
};

/* The graph's outputs: a Detect's levels, a classifier's logits (N,nc,1,1), or a Segment's levels
 * and its Proto's output (N,nm,H,W) last. */
static inline int yc_graph_nheads(const yc_graph *g)
{
    if (g->m->cfg->task == YC_TASK_CLASSIFY)
        return 1;
    return g->m->cfg->task == YC_TASK_SEGMENT ? g->m->nl + 1 : g->m->nl;
}

static inline gref val(int id)
{
    return (gref){REF_VALUE, id};
}

static inline gref prm(int idx)
{
    return (gref){REF_PARAM, idx};
}

static inline gref prm_grad(int idx)
{
    return (gref){REF_PARAM_GRAD, idx};
}

static inline gref state(int idx)
{
    return (gref){REF_STATE, idx};
}

/* graph.c: values and nodes */
int yc_graph_new_value(yc_graph *g, int *id, int n, int c, int h, int w, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
void yc_graph_activation(yc_graph *g, int id);
int yc_graph_new_view(yc_graph *g, int *id, int parent, int chan0, int c, const char *suffix);
int yc_graph_owner_of(const yc_graph *g, int id, int *chan0);
void yc_graph_fmt_name(char *dst, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int yc_graph_push_node(yc_graph *g, const gnode *nd_in);
gnode yc_graph_node(yc_op_kind kind, const char *name);

/* modules.c: the ops of layer i of the config (its output in g->layer_out[i]) */
int yc_graph_build_layer(yc_graph *g, int i);

/* autodiff.c: the backward ops after the forward ones; the re-derived copy of a recomputable
 * value (yc_graph_push_node swaps it in for backward ops' sources) */
int yc_graph_build_backward(yc_graph *g);
int yc_graph_remat_of(yc_graph *g, int id, int *out);

/* arena.c: resolves the nodes' operands to tensors; computes lifetimes and places the owners
 * in the plan; re-binds the tensors when the arena grew since they were bound */
void yc_graph_resolve_ops(yc_graph *g);
int yc_graph_build_plan(yc_graph *g);
void yc_graph_refresh(const yc_graph *g);

#endif
