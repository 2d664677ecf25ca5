/* The op schedule of a model (see graph.h): its values and nodes, yc_graph_new, the accessors,
 * the forward and backward runs with their per-op profile, and GFLOPs.
 *
 * yc_graph_new builds the forward from the config, layer by layer (modules.c: the forward_*
 * builders mirror the forward() of YOLOv5's models/common.py modules over the parameters the
 * model declared), then in training the backward (autodiff.c), then resolves the ops' tensors
 * and places every activation in the memory plan (arena.c).  The types and helpers these files
 * share are in graph_internal.h. */
#include "graph_internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* ---- values and nodes --------------------------------------------------------------------- */

int yc_graph_new_value(yc_graph *g, int *id, int n, int c, int h, int w, const char *fmt, ...)
{
    if (c < 1 || h < 1 || w < 1)
        return yc_error_status(YC_EFORMAT, "a tensor would have the empty shape (%d, %d, %d, %d)",
                               n, c, h, w);
    if (g->nv == g->cap_v) {
        int cap = g->cap_v ? g->cap_v * 2 : 256;
        gvalue **nv = yc_realloc(g->v, (size_t)cap * sizeof *nv, "graph");
        if (!nv)
            return YC_ENOMEM;
        g->v = nv;
        g->cap_v = cap;
    }
    gvalue *v = yc_calloc(1, sizeof *v, "graph value");
    if (!v)
        return YC_ENOMEM;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->name, sizeof v->name, fmt, ap);
    va_end(ap);
    v->t = yc_tensor_make(n, c, h, w, YC_F32, v->name);
    v->parent = -1;
    v->grad = -1;
    v->producer = -1;
    v->remat = -1;
    v->first = -1;
    v->last = -1;
    g->v[g->nv] = v;
    *id = g->nv++;
    return YC_OK;
}

/* Marks value `id` as a forward activation (stored in the graph's activation type). */
void yc_graph_activation(yc_graph *g, int id)
{
    g->v[id]->t.type = g->act;
}

/* A view of channels [chan0, chan0 + c) of value `parent`. */
int yc_graph_new_view(yc_graph *g, int *id, int parent, int chan0, int c, const char *suffix)
{
    const gvalue *p = g->v[parent];
    int status = yc_graph_new_value(g, id, p->t.n, c, p->t.h, p->t.w, "%s[%d:%d]%s", p->name,
                                    chan0, chan0 + c, suffix);
    if (status)
        return status;
    g->v[*id]->parent = parent;
    g->v[*id]->chan0 = chan0;
    g->v[*id]->t.type = p->t.type;
    g->v[*id]->needs_grad = p->needs_grad;
    g->v[*id]->is_grad = p->is_grad;
    return YC_OK;
}

/* The value owning the storage of `id`, and the channel offset of `id` inside it. */
int yc_graph_owner_of(const yc_graph *g, int id, int *chan0)
{
    int c = 0;
    while (g->v[id]->parent >= 0) {
        c += g->v[id]->chan0;
        id = g->v[id]->parent;
    }
    if (chan0)
        *chan0 = c;
    return id;
}

/* snprintf for names, truncating silently at `len` (names are far shorter in practice). */
void yc_graph_fmt_name(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

/* Appends a node.  In the forward it records the producer of its outputs; in the backward it
 * first swaps every recomputable source for its re-derived copy. */
int yc_graph_push_node(yc_graph *g, const gnode *nd_in)
{
    gnode tmp = *nd_in;
    const gnode *nd = &tmp;
    if (g->nforward > 0) {
        for (int s = 0; s < YC_OP_MAX_SRC; s++) {
            int status;
            if (tmp.src[s].kind == REF_VALUE && g->v[tmp.src[s].idx]->recomputable &&
                (status = yc_graph_remat_of(g, tmp.src[s].idx, &tmp.src[s].idx)))
                return status;
        }
    } else {
        for (int d = 0; d < YC_OP_MAX_DST; d++)
            if (nd->dst[d].kind == REF_VALUE && g->v[nd->dst[d].idx]->producer < 0)
                g->v[nd->dst[d].idx]->producer = g->nn;
    }
    if (g->nn == g->cap_n) {
        int cap = g->cap_n ? g->cap_n * 2 : 512;
        gnode *nn = yc_realloc(g->nodes, (size_t)cap * sizeof *nn, "graph");
        if (!nn)
            return YC_ENOMEM;
        g->nodes = nn;
        g->cap_n = cap;
    }
    g->nodes[g->nn++] = *nd;
    return YC_OK;
}

gnode yc_graph_node(yc_op_kind kind, const char *name)
{
    gnode nd;
    memset(&nd, 0, sizeof nd);
    nd.op.kind = kind;
    yc_graph_fmt_name(nd.name, sizeof nd.name, "%s", name);
    return nd;
}
int yc_graph_new(yc_graph **out, yc_model *m, int batch, int h, int w, yc_graph_mode mode)
{
    yc_graph_options opt = {.mode = mode};
    return yc_graph_new_opts(out, m, batch, h, w, &opt);
}

int yc_graph_new_opts(yc_graph **out, yc_model *m, int batch, int h, int w,
                      const yc_graph_options *opt)
{
    yc_graph_mode mode = opt->mode;
    *out = NULL;
    if (mode == YC_GRAPH_TRAIN && m->fused)
        return yc_error_status(YC_ERR, "internal: a training graph of a fused model (its "
                               "BatchNorms are folded into the convolutions)");
    if (batch < 1 || h < 1 || w < 1)
        return yc_error_status(YC_EUSAGE, "batch %d and image size %dx%d must be positive", batch,
                               h, w);
    yc_graph *g = yc_calloc(1, sizeof *g, "graph");
    if (!g)
        return YC_ENOMEM;
    g->m = m;
    g->mode = mode;
    g->opt = *opt;
    g->act = opt->half ? YC_F16 : YC_F32;
    g->batch = batch;
    g->h = h;
    g->w = w;
    int status = YC_OK;
    g->layer_out = yc_malloc((size_t)m->cfg->nlayers * sizeof *g->layer_out, "graph");
    if (!g->layer_out) {
        status = YC_ENOMEM;
        goto fail;
    }
    if ((status = yc_graph_new_value(g, &g->input, batch, m->cfg->ch, h, w, "images")))
        goto fail;
    yc_graph_activation(g, g->input);
    for (int i = 0; i < m->cfg->nlayers; i++)
        if ((status = yc_graph_build_layer(g, i)))
            goto fail;
    g->nforward = g->nn;
    if (mode == YC_GRAPH_TRAIN && (status = yc_graph_build_backward(g)))
        goto fail;
    yc_graph_resolve_ops(g);
    if ((status = yc_graph_build_plan(g)))
        goto fail;
    *out = g;
    return YC_OK;
fail:
    yc_graph_free(g);
    return status;
}

void yc_graph_free(yc_graph *g)
{
    if (!g)
        return;
    if (g->owns_arena)
        yc_arena_release(&g->own);
    for (int i = 0; i < g->nv; i++) {
        free(g->v[i]->written);
        free(g->v[i]);
    }
    free(g->v);
    free(g->nodes);
    free(g->layer_out);
    free(g->block_of);
    free(g->plan.blocks);
    free(g->op_seconds);
    free(g);
}

const yc_tensor *yc_graph_input(const yc_graph *g)
{
    yc_graph_refresh(g);
    return &g->v[g->input]->t;
}

const yc_tensor *yc_graph_head(const yc_graph *g, int level)
{
    yc_graph_refresh(g);
    return &g->v[g->heads[level]]->t;
}

const yc_tensor *yc_graph_layer_output(const yc_graph *g, int layer)
{
    yc_graph_refresh(g);
    return &g->v[g->layer_out[layer]]->t;
}

const yc_tensor *yc_graph_head_grad(const yc_graph *g, int level)
{
    yc_graph_refresh(g);
    return g->mode == YC_GRAPH_TRAIN ? &g->v[g->head_grads[level]]->t : NULL;
}
/* Submits ops [from, to) (the backend may run them asynchronously: reading a result waits for
 * them).  Profiling waits for each op to finish so that its time is its own. */
static int run(yc_graph *g, int from, int to)
{
    yc_backend *be = g->m->be;
    yc_graph_refresh(g);
    yc_span ws = {g->arena->ws, 0, g->ws_bytes};
    const bool prof = g->profiling;
    int status;
    if (prof && (status = be->iface->synchronize(be)))
        return status;
    for (int i = from; i < to; i++) {
        double t0 = prof ? yc_now() : 0.0;
        status = yc_backend_exec(be, &g->nodes[i].op, ws);
        if (!status && prof && !(status = be->iface->synchronize(be)))
            g->op_seconds[i] += yc_now() - t0;
        if (status)
            return yc_error_context(status, "%s (%s)", yc_op_kind_name(g->nodes[i].op.kind),
                                    g->nodes[i].name);
    }
    return YC_OK;
}

int yc_graph_forward(yc_graph *g)
{
    if (!g->arena)
        return yc_error_status(YC_ERR, "internal: graph not allocated");
    int status = run(g, 0, g->nforward);
    if (status == YC_OK && g->mode == YC_GRAPH_TRAIN)
        for (int i = 0; i < g->m->nbn; i++)
            g->m->num_batches[i]++;
    return status;
}

void yc_graph_set_dropout_seed(yc_graph *g, uint32_t seed)
{
    for (int i = 0; i < g->nn; i++)
        if (g->nodes[i].op.kind == YC_OP_DROPOUT)
            g->nodes[i].op.p.drop.seed = seed;
}

int yc_graph_backward(yc_graph *g)
{
    if (g->mode != YC_GRAPH_TRAIN)
        return yc_error_status(YC_ERR, "internal: backward on an evaluation graph");
    return run(g, g->nforward, g->nn);
}

int yc_graph_nops(const yc_graph *g)
{
    return g->nn;
}

const yc_op *yc_graph_op(const yc_graph *g, int i)
{
    return &g->nodes[i].op;
}

int yc_graph_nforward(const yc_graph *g)
{
    return g->nforward;
}

int yc_graph_set_profiling(yc_graph *g, bool on)
{
    if (on && !g->op_seconds &&
        !(g->op_seconds = yc_calloc((size_t)(g->nn ? g->nn : 1), sizeof *g->op_seconds,
                                    "op profile")))
        return YC_ENOMEM;
    g->profiling = on;
    return YC_OK;
}

const double *yc_graph_op_seconds(const yc_graph *g)
{
    return g->op_seconds;
}

void yc_graph_reset_profile(yc_graph *g)
{
    if (g->op_seconds)
        memset(g->op_seconds, 0, (size_t)g->nn * sizeof *g->op_seconds);
}

/* ---- statistics ------------------------------------------------------------------------------ */

double yc_model_gflops(yc_model *m, int imgsz)
{
    float smax = 32;
    for (int l = 0; l < m->nl; l++)
        if (m->stride[l] > smax)
            smax = m->stride[l];
    int probe = (int)smax;
    yc_graph *g = NULL;
    if (yc_graph_new(&g, m, 1, probe, probe, YC_GRAPH_EVAL))
        return -1;
    double macs = 0;
    for (int i = 0; i < yc_graph_nops(g); i++) {
        const yc_op *op = yc_graph_op(g, i);
        const yc_tensor *x = op->src[0], *y = op->dst[0];
        if (op->kind == YC_OP_CONV2D)
            macs += (double)yc_tensor_elems(y) * x->c * op->p.conv.kh * op->p.conv.kw;
        else if (op->kind == YC_OP_BN_EVAL)
            macs += 4.0 * (double)yc_tensor_elems(x);
        else if (op->kind == YC_OP_UPSAMPLE)
            macs += (double)yc_tensor_elems(y);
    }
    yc_graph_free(g);
    double scale = ((double)imgsz / probe) * ((double)imgsz / probe);
    return 2.0 * macs * scale / 1e9;
}
