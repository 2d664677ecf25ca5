/* The backward of a training graph (graph_internal.h): yc_graph_build_backward walks the forward
 * nodes in reverse and backward_node emits the backward ops of each, one case per forward op
 * kind (modules.c's builders point to theirs), deciding for every gradient write whether it
 * overwrites or accumulates (gradients of concatenated values are channel-range views of one
 * gradient; channels written by no op are filled with zeros first).  In recompute mode the SiLU
 * outputs that the forward may drop are re-derived just before their first backward reader
 * (yc_graph_remat_of). */
#include "graph_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

static const gref none = {REF_NONE, 0};

/* ---- backward ------------------------------------------------------------------------------ */

/* The gradient value of `id` (created on first use; views mirror the forward views). */
static int grad_of(yc_graph *g, int id, int *out)
{
    gvalue *v = g->v[id];
    if (v->grad >= 0) {
        *out = v->grad;
        return YC_OK;
    }
    int gid, status;
    if (v->parent >= 0) {
        int gp;
        if ((status = grad_of(g, v->parent, &gp)))
            return status;
        if ((status = yc_graph_new_view(g, &gid, gp, v->chan0, v->t.c, "")))
            return status;
        yc_graph_fmt_name(g->v[gid]->name, sizeof g->v[gid]->name, "d(%s)", g->v[id]->name);
    } else {
        if ((status = yc_graph_new_value(g, &gid, v->t.n, v->t.c, v->t.h, v->t.w, "d(%s)",
                                         v->name)))
            return status;
        g->v[gid]->written = yc_calloc((size_t)v->t.c, 1, "graph");
        if (!g->v[gid]->written)
            return YC_ENOMEM;
    }
    g->v[gid]->is_grad = true;
    g->v[id]->grad = gid;
    *out = gid;
    return YC_OK;
}

/* How many channels of gradient value `gid` backward has written: 0, some (-1) or all (1). */
static int written_state(const yc_graph *g, int gid)
{
    int c0, owner = yc_graph_owner_of(g, gid, &c0), c = g->v[gid]->t.c, count = 0;
    const uint8_t *w = g->v[owner]->written;
    for (int i = 0; i < c; i++)
        count += w[c0 + i];
    return count == 0 ? 0 : count == c ? 1 : -1;
}

/* Emits FILL(0) for every run of unwritten channels of `gid` and marks them written. */
static int fill_unwritten(yc_graph *g, int gid)
{
    int c0, owner = yc_graph_owner_of(g, gid, &c0), c = g->v[gid]->t.c, status;
    uint8_t *w = g->v[owner]->written;
    for (int i = 0; i < c;) {
        if (w[c0 + i]) {
            i++;
            continue;
        }
        int j = i;
        while (j < c && !w[c0 + j])
            j++;
        int view;
        if ((status = yc_graph_new_view(g, &view, owner, c0 + i, j - i, ".zero")))
            return status;
        gnode nd = yc_graph_node(YC_OP_FILL, g->v[gid]->name);
        nd.dst[0] = val(view);
        nd.op.p.fill.value = 0.0f;
        if ((status = yc_graph_push_node(g, &nd)))
            return status;
        memset(w + c0 + i, 1, (size_t)(j - i));
        i = j;
    }
    return YC_OK;
}

/* Prepares a write to gradient `gid`: returns via *acc whether the op must accumulate. */
static int begin_grad_write(yc_graph *g, int gid, int *acc)
{
    int st = written_state(g, gid), status;
    if (st == -1 && (status = fill_unwritten(g, gid)))
        return status;
    *acc = st != 0;
    int c0, owner = yc_graph_owner_of(g, gid, &c0);
    memset(g->v[owner]->written + c0, 1, (size_t)g->v[gid]->t.c);
    return YC_OK;
}

/* Emits `nd` whose dst[0] is the gradient of forward value `x` (if x needs one). */
static int emit_grad_op(yc_graph *g, gnode *nd, int x)
{
    int gx, status;
    if ((status = grad_of(g, x, &gx)) || (status = begin_grad_write(g, gx, &nd->op.accumulate)))
        return status;
    nd->dst[0] = val(gx);
    return yc_graph_push_node(g, nd);
}

static int backward_node(yc_graph *g, const gnode *f)
{
    int y = f->dst[0].idx, gy, status;
    if ((status = grad_of(g, y, &gy)))
        return status;
    int st = written_state(g, gy);
    if (st == 0)
        return YC_OK; /* nothing downstream reached the loss: zero gradient */
    if (st == -1 && (status = fill_unwritten(g, gy)))
        return status;
    gnode nd;
    int x = f->src[0].kind == REF_VALUE ? f->src[0].idx : -1;
    bool x_needs = x >= 0 && g->v[x]->needs_grad;
    switch (f->op.kind) {
    case YC_OP_CONV2D:
        nd = yc_graph_node(YC_OP_CONV2D_BWD_FILTER, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = f->src[0];
        nd.src[1] = val(gy);
        nd.dst[0] = prm_grad(f->src[1].idx);
        nd.dst[1] = f->src[2].kind == REF_PARAM ? prm_grad(f->src[2].idx) : none;
        if ((status = yc_graph_push_node(g, &nd)))
            return status;
        if (!x_needs)
            return YC_OK;
        nd = yc_graph_node(YC_OP_CONV2D_BWD_DATA, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        nd.src[1] = f->src[1];
        return emit_grad_op(g, &nd, x);
    case YC_OP_BN_TRAIN:
        nd = yc_graph_node(YC_OP_BN_BWD, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        nd.src[1] = f->src[0];
        nd.src[2] = f->src[1];
        nd.src[3] = f->dst[1];
        nd.dst[1] = prm_grad(f->src[1].idx);
        nd.dst[2] = prm_grad(f->src[2].idx);
        return emit_grad_op(g, &nd, x);
    case YC_OP_BN_SILU_TRAIN:
        nd = yc_graph_node(YC_OP_BN_SILU_BWD, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        nd.src[1] = f->src[0];
        nd.src[2] = f->src[1];
        nd.src[3] = f->src[2];
        nd.src[4] = f->dst[1];
        nd.dst[1] = prm_grad(f->src[1].idx);
        nd.dst[2] = prm_grad(f->src[2].idx);
        return emit_grad_op(g, &nd, x);
    case YC_OP_SILU:
        nd = yc_graph_node(YC_OP_SILU_BWD, f->name);
        nd.src[0] = val(gy);
        nd.src[1] = f->src[0];
        return emit_grad_op(g, &nd, x);
    case YC_OP_MAXPOOL:
        nd = yc_graph_node(YC_OP_MAXPOOL_BWD, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        nd.src[1] = f->src[0];
        return x_needs ? emit_grad_op(g, &nd, x) : YC_OK;
    case YC_OP_UPSAMPLE:
        nd = yc_graph_node(YC_OP_UPSAMPLE_BWD, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        return x_needs ? emit_grad_op(g, &nd, x) : YC_OK;
    case YC_OP_AVGPOOL:
        nd = yc_graph_node(YC_OP_AVGPOOL_BWD, f->name);
        nd.src[0] = val(gy);
        return x_needs ? emit_grad_op(g, &nd, x) : YC_OK;
    case YC_OP_DROPOUT:
        /* its own backward: the same op and parameters (so the same mask) on the gradient */
        nd = yc_graph_node(YC_OP_DROPOUT, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        return x_needs ? emit_grad_op(g, &nd, x) : YC_OK;
    case YC_OP_COPY:
        nd = yc_graph_node(YC_OP_COPY, f->name);
        nd.src[0] = val(gy);
        return x_needs ? emit_grad_op(g, &nd, x) : YC_OK;
    case YC_OP_ADD:
        for (int i = 0; i < 2; i++) {
            int xi = f->src[i].idx;
            if (!g->v[xi]->needs_grad)
                continue;
            nd = yc_graph_node(YC_OP_COPY, f->name);
            nd.src[0] = val(gy);
            if ((status = emit_grad_op(g, &nd, xi)))
                return status;
        }
        return YC_OK;
    default:
        return yc_error_status(YC_ERR, "internal: no backward for %s",
                               yc_op_kind_name(f->op.kind));
    }
}

/* Recompute mode: which SiLU outputs backward re-derives instead of keeping.  A fused BN+SiLU
 * output qualifies when it owns its storage and nothing else lives in it (not a concat part, no
 * views of it, not a head): then the forward can drop it after its last forward reader, and the
 * backward rebuilds it from the convolution output and batch statistics it keeps anyway for
 * YC_OP_BN_SILU_BWD, just before the first backward op that reads it.  The copy is bit-identical
 * (YC_OP_BN_SILU_APPLY), so the gradients are too. */
static void mark_recomputable(yc_graph *g)
{
    for (int i = 0; i < g->nv; i++) {
        gvalue *v = g->v[i];
        v->recomputable = v->parent < 0 && v->producer >= 0 &&
                          g->nodes[v->producer].op.kind == YC_OP_BN_SILU_TRAIN &&
                          g->nodes[v->producer].dst[0].idx == i;
    }
    for (int i = 0; i < g->nv; i++)
        if (g->v[i]->parent >= 0)
            g->v[yc_graph_owner_of(g, i, NULL)]->recomputable = false;
    for (int l = 0; l < yc_graph_nheads(g); l++)
        g->v[g->heads[l]]->recomputable = false;
    g->v[g->input]->recomputable = false;
}

/* The re-derived copy of recomputable value `id` (emitting YC_OP_BN_SILU_APPLY on first use). */
int yc_graph_remat_of(yc_graph *g, int id, int *out)
{
    gvalue *v = g->v[id];
    if (v->remat >= 0) {
        *out = v->remat;
        return YC_OK;
    }
    const gnode *f = &g->nodes[v->producer];
    int r, status;
    if ((status = yc_graph_new_value(g, &r, v->t.n, v->t.c, v->t.h, v->t.w, "%s.recomputed",
                                     v->name)))
        return status;
    g->v[r]->t.type = v->t.type;
    gnode nd = yc_graph_node(YC_OP_BN_SILU_APPLY, f->name);
    nd.op.p = f->op.p;
    nd.src[0] = f->src[0];
    nd.src[1] = f->src[1];
    nd.src[2] = f->src[2];
    nd.src[3] = f->dst[1];
    nd.dst[0] = val(r);
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    v = g->v[id]; /* yc_graph_new_value may have moved the table, not the value */
    v->remat = r;
    *out = r;
    return YC_OK;
}

int yc_graph_build_backward(yc_graph *g)
{
    int status;
    if (g->opt.recompute)
        mark_recomputable(g);
    /* The loss writes each head's gradient over the head itself (the Detect conv's backward
     * needs the gradient, never the head's values): one buffer per level instead of two at the
     * loss, where the training step peaks. */
    for (int l = 0; l < yc_graph_nheads(g); l++) {
        int h = g->heads[l], gh;
        gvalue *hv = g->v[h];
        if ((status = yc_graph_new_view(g, &gh, h, 0, hv->t.c, "")))
            return status;
        yc_graph_fmt_name(g->v[gh]->name, sizeof g->v[gh]->name, "d(%s)", hv->name);
        g->v[gh]->is_grad = true;
        hv->grad = gh;
        if (!(hv->written = yc_malloc((size_t)hv->t.c, "graph")))
            return YC_ENOMEM;
        memset(hv->written, 1, (size_t)hv->t.c);
        g->head_grads[l] = gh;
    }
    for (int i = g->nforward - 1; i >= 0; i--) {
        gnode f = g->nodes[i]; /* copy: yc_graph_push_node may move the array */
        if ((status = backward_node(g, &f)))
            return yc_error_context(status, "backward of %s", f.name);
    }
    return YC_OK;
}
