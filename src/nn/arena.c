/* Where a graph's values live (graph_internal.h): the operands of the nodes resolved to tensors;
 * the lifetime of every value that owns storage, in schedule positions, handed to the memory
 * planner (plan.c) as blocks; the arenas (chunks of backend memory and the op workspace) that
 * graphs are placed in, grown on demand; and the binding of every tensor to its chunk and offset
 * (again after the arena grew). */
#include "graph_internal.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* ---- lifetimes, placement ---------------------------------------------------------------- */

static const yc_tensor *ref_tensor(const yc_graph *g, gref r)
{
    switch (r.kind) {
    case REF_VALUE:
        return &g->v[r.idx]->t;
    case REF_PARAM:
        return &g->m->params[r.idx].t;
    case REF_PARAM_GRAD:
        return &g->m->params[r.idx].grad;
    case REF_STATE:
        return &g->m->state[r.idx].t;
    default:
        return NULL;
    }
}

void yc_graph_resolve_ops(yc_graph *g)
{
    for (int i = 0; i < g->nn; i++) {
        gnode *nd = &g->nodes[i];
        for (int s = 0; s < YC_OP_MAX_SRC; s++)
            nd->op.src[s] = ref_tensor(g, nd->src[s]);
        for (int d = 0; d < YC_OP_MAX_DST; d++)
            nd->op.dst[d] = ref_tensor(g, nd->dst[d]);
        nd->op.name = nd->name;
    }
}

static void touch(yc_graph *g, int id, int pos)
{
    gvalue *o = g->v[yc_graph_owner_of(g, id, NULL)];
    if (o->first < 0 || pos < o->first)
        o->first = pos;
    if (pos > o->last)
        o->last = pos;
}

/* Schedule position of node i (the loss occupies position nforward). */
static int position(const yc_graph *g, int i)
{
    return i < g->nforward ? i : i + 1;
}

int yc_graph_build_plan(yc_graph *g)
{
    touch(g, g->input, 0);
    for (int i = 0; i < g->nn; i++) {
        const gnode *nd = &g->nodes[i];
        for (int s = 0; s < YC_OP_MAX_SRC; s++)
            if (nd->src[s].kind == REF_VALUE)
                touch(g, nd->src[s].idx, position(g, i));
        for (int d = 0; d < YC_OP_MAX_DST; d++)
            if (nd->dst[d].kind == REF_VALUE)
                touch(g, nd->dst[d].idx, position(g, i));
    }
    /* keep_layers: every layer's output (Detect's are the heads) lives to the end of the
     * forward */
    for (int i = 0; g->opt.keep_layers && i < g->m->cfg->nlayers; i++)
        if (g->m->cfg->layers[i].module != YC_MOD_DETECT)
            touch(g, g->layer_out[i], g->nforward);
    for (int l = 0; l < yc_graph_nheads(g); l++) {
        touch(g, g->heads[l], g->nforward);
        if (g->mode == YC_GRAPH_TRAIN)
            touch(g, g->head_grads[l], g->nforward);
    }
    g->block_of = yc_malloc((size_t)g->nv * sizeof *g->block_of, "graph");
    g->plan.blocks = yc_calloc((size_t)g->nv, sizeof *g->plan.blocks, "memory plan");
    if (!g->block_of || !g->plan.blocks)
        return YC_ENOMEM;
    g->plan.alignment = g->m->be ? yc_align_up(g->m->be->info.alignment, 64) : 64;
    g->plan.max_chunk = g->m->be ? g->m->be->info.max_alloc : 0;
    for (int i = 0; i < g->nv; i++) {
        gvalue *v = g->v[i];
        g->block_of[i] = -1;
        if (v->parent >= 0 || v->first < 0)
            continue;
        yc_plan_block *b = &g->plan.blocks[g->plan.nblocks];
        b->size = yc_tensor_elems(&v->t) * yc_dtype_size(v->t.type);
        b->first = v->first;
        b->last = v->last;
        b->name = v->name;
        g->block_of[i] = g->plan.nblocks++;
    }
    return yc_plan_place(&g->plan);
}

/* ---- arenas ---------------------------------------------------------------------------------- */

void yc_arena_init(yc_arena *a, yc_backend *be)
{
    memset(a, 0, sizeof *a);
    a->be = be;
}

void yc_arena_release(yc_arena *a)
{
    for (int c = 0; c < a->nchunks; c++)
        yc_buffer_free(a->be, a->chunk[c]);
    yc_buffer_free(a->be, a->ws);
    yc_backend *be = a->be;
    unsigned gen = a->generation + 1;
    memset(a, 0, sizeof *a);
    a->be = be;
    a->generation = gen;
}

size_t yc_arena_bytes(const yc_arena *a)
{
    size_t n = a->ws_size;
    for (int c = 0; c < a->nchunks; c++)
        n += a->chunk_size[c];
    return n;
}

/* Replaces buffer *b by one of `size` bytes when it is smaller. */
static int grow(yc_arena *a, yc_buffer **b, size_t *have, size_t size, const char *what)
{
    if (size <= *have)
        return YC_OK;
    yc_buffer_free(a->be, *b);
    *b = NULL;
    *have = 0;
    a->generation++;
    if (!(*b = yc_buffer_alloc(a->be, size)))
        return yc_error_context(YC_ENOMEM, "%s (%zu bytes)", what, size);
    *have = size;
    return YC_OK;
}

int yc_arena_reserve(yc_arena *a, const yc_plan *plan, size_t ws)
{
    int st = YC_OK;
    for (int c = 0; c < plan->nchunks && !st; c++) {
        if (c == a->nchunks)
            a->nchunks++;
        st = grow(a, &a->chunk[c], &a->chunk_size[c], plan->chunk_bytes[c], "activation arena");
    }
    if (!st && ws)
        st = grow(a, &a->ws, &a->ws_size, ws, "op workspace");
    return st;
}

/* ---- placement ------------------------------------------------------------------------------- */

int yc_graph_prepare(yc_graph *g)
{
    yc_backend *be = g->m->be;
    if (!be)
        return yc_error_status(YC_ERR, "internal: the model has no backend");
    if (g->prepared)
        return YC_OK;
    size_t ws = 0;
    for (int i = 0; i < g->nn; i++) {
        const yc_op *op = &g->nodes[i].op;
        int status = yc_op_check(op);
        if (status)
            return yc_error_context(status, "op %s", g->nodes[i].name);
        if (!be->iface->supports(be, op))
            return yc_error_status(YC_EUNSUPPORTED, "the %s backend cannot run %s (%s)",
                                   be->iface->name, yc_op_kind_name(op->kind), g->nodes[i].name);
        size_t need = be->iface->workspace(be, op);
        if (need > ws)
            ws = need;
    }
    g->ws_bytes = ws;
    g->prepared = true;
    return YC_OK;
}

/* Points every tensor at its chunk of the arena. */
static void bind(yc_graph *g)
{
    for (int i = 0; i < g->nv; i++) {
        gvalue *v = g->v[i];
        int c0, owner = yc_graph_owner_of(g, i, &c0);
        int blk = g->block_of[owner];
        if (blk < 0)
            continue;
        const gvalue *o = g->v[owner];
        const yc_plan_block *b = &g->plan.blocks[blk];
        size_t plane = (size_t)o->t.h * (size_t)o->t.w;
        v->t.buf = g->arena->chunk[b->chunk];
        v->t.offset = b->offset + (size_t)c0 * plane * yc_dtype_size(v->t.type);
        v->t.nstride = yc_tensor_image_elems(&o->t);
    }
    g->bound_generation = g->arena->generation;
}

int yc_graph_alloc_in(yc_graph *g, yc_arena *a)
{
    int st = yc_graph_prepare(g);
    if (!st)
        st = yc_arena_reserve(a, &g->plan, g->ws_bytes);
    if (st)
        return st;
    g->arena = a;
    bind(g);
    return YC_OK;
}

int yc_graph_alloc(yc_graph *g)
{
    yc_arena_init(&g->own, g->m->be);
    g->owns_arena = true;
    return yc_graph_alloc_in(g, &g->own);
}

const yc_plan *yc_graph_plan(const yc_graph *g)
{
    return &g->plan;
}

size_t yc_graph_workspace_bytes(const yc_graph *g)
{
    return g->ws_bytes;
}

/* Tensors handed out must point at the arena's current buffers: re-binding after the arena grew
 * only refreshes the placement cache, so the accessors below stay logically const. */
void yc_graph_refresh(const yc_graph *g)
{
    if (g->arena && g->arena->generation != g->bound_generation)
        bind((yc_graph *)g);
}
