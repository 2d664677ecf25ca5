/* The op schedule of a model (see graph.h).
 *
 * The forward_* builders mirror the forward() of YOLOv5's models/common.py modules: they emit ops
 * over the parameters the model declared (model.c, the modules' __init__), found by name.
 * backward() then walks the forward ops in reverse and emits their backward ops, deciding for
 * every gradient write whether it overwrites or accumulates. */
#include "graph.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

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
     * instead of keeping it (see remat_of), and its re-derived copy once made (-1: not yet) */
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
    /* the op, its tensor pointers resolved from src/dst by resolve_ops() */
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
    int heads[YC_CFG_MAX_LEVELS];
    int head_grads[YC_CFG_MAX_LEVELS];
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
};

static int new_value(yc_graph *g, int *id, int n, int c, int h, int w, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static int new_value(yc_graph *g, int *id, int n, int c, int h, int w, const char *fmt, ...)
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
static void activation(yc_graph *g, int id)
{
    g->v[id]->t.type = g->act;
}

/* A view of channels [chan0, chan0 + c) of value `parent`. */
static int new_view(yc_graph *g, int *id, int parent, int chan0, int c, const char *suffix)
{
    const gvalue *p = g->v[parent];
    int status = new_value(g, id, p->t.n, c, p->t.h, p->t.w, "%s[%d:%d]%s", p->name, chan0,
                           chan0 + c, suffix);
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
static int owner_of(const yc_graph *g, int id, int *chan0)
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
static void fmt_name(char *dst, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fmt_name(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

static gref val(int id)
{
    return (gref){REF_VALUE, id};
}

static gref prm(int idx)
{
    return (gref){REF_PARAM, idx};
}

static gref prm_grad(int idx)
{
    return (gref){REF_PARAM_GRAD, idx};
}

static gref state(int idx)
{
    return (gref){REF_STATE, idx};
}

static const gref none = {REF_NONE, 0};

static int remat_of(yc_graph *g, int id, int *out);

/* Appends a node.  In the forward it records the producer of its outputs; in the backward it
 * first swaps every recomputable source for its re-derived copy. */
static int push_node(yc_graph *g, const gnode *nd_in)
{
    gnode tmp = *nd_in;
    const gnode *nd = &tmp;
    if (g->nforward > 0) {
        for (int s = 0; s < YC_OP_MAX_SRC; s++) {
            int status;
            if (tmp.src[s].kind == REF_VALUE && g->v[tmp.src[s].idx]->recomputable &&
                (status = remat_of(g, tmp.src[s].idx, &tmp.src[s].idx)))
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

static gnode node(yc_op_kind kind, const char *name)
{
    gnode nd;
    memset(&nd, 0, sizeof nd);
    nd.op.kind = kind;
    fmt_name(nd.name, sizeof nd.name, "%s", name);
    return nd;
}

/* ---- parameters ----------------------------------------------------------------------------- */

static int find_param(const yc_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int find_param(const yc_graph *g, const char *fmt, ...)
{
    char name[YC_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int i = yc_model_find_param(g->m, name);
    return i >= 0 ? i : yc_error_status(YC_ERR, "internal: parameter %s was not declared", name);
}

static int find_state(const yc_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int find_state(const yc_graph *g, const char *fmt, ...)
{
    char name[YC_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int i = yc_model_find_state(g->m, name);
    return i >= 0 ? i : yc_error_status(YC_ERR, "internal: state %s was not declared", name);
}

/* ---- Conv: Conv2d(c1, c2, k, s, p, bias=False) + BatchNorm2d(c2) + SiLU ------------------- */

/* x (N,c1,H,W) -> conv k x k stride s pad p -> (N,c2,P,Q) -> BN -> SiLU -> *out */
static int forward_conv(yc_graph *g, const char *prefix, int x, int c2, int k, int s, int p,
                        int *out)
{
    const yc_tensor *xt = &g->v[x]->t;
    int P = (xt->h + 2 * p - k) / s + 1, Q = (xt->w + 2 * p - k) / s + 1;
    int w = find_param(g, "%s.conv.weight", prefix);
    int gamma = find_param(g, "%s.bn.weight", prefix);
    int beta = find_param(g, "%s.bn.bias", prefix);
    int rmean = find_state(g, "%s.bn.running_mean", prefix);
    int rvar = find_state(g, "%s.bn.running_var", prefix);
    if (w < 0 || gamma < 0 || beta < 0 || rmean < 0 || rvar < 0)
        return YC_ERR;
    if (xt->h + 2 * p < k || xt->w + 2 * p < k)
        return yc_error_status(YC_EFORMAT, "%s: input %dx%d is smaller than the %dx%d kernel",
                               prefix, xt->h, xt->w, k, k);
    int y, a, status;
    if ((status = new_value(g, &y, g->batch, c2, P, Q, "%s.conv", prefix)) ||
        (status = new_value(g, &a, g->batch, c2, P, Q, "%s.act", prefix)))
        return status;
    activation(g, y);
    activation(g, a);
    g->v[y]->needs_grad = g->v[a]->needs_grad = true;

    gnode nd = node(YC_OP_CONV2D, prefix);
    nd.src[0] = val(x);
    nd.src[1] = prm(w);
    nd.dst[0] = val(y);
    nd.op.p.conv.kh = nd.op.p.conv.kw = k;
    nd.op.p.conv.stride_h = nd.op.p.conv.stride_w = s;
    nd.op.p.conv.pad_h = nd.op.p.conv.pad_w = p;
    nd.op.p.conv.groups = 1;
    if ((status = push_node(g, &nd)))
        return status;

    /* BatchNorm and SiLU are one op and the BN output is never stored: in training, backward
     * recomputes it (YC_OP_BN_SILU_BWD; see yc_graph_options.recompute); in evaluation, BN_EVAL
     * applies SiLU */
    const bool train = g->mode == YC_GRAPH_TRAIN;
    int stats = -1;
    if (train && (status = new_value(g, &stats, 2, c2, 1, 1, "%s.bn.stats", prefix)))
        return status;
    nd = node(train ? YC_OP_BN_SILU_TRAIN : YC_OP_BN_EVAL, prefix);
    nd.src[0] = val(y);
    nd.src[1] = prm(gamma);
    nd.src[2] = prm(beta);
    nd.dst[0] = val(a);
    nd.op.p.bn.eps = 1e-3f; /* YOLOv5's BatchNorm2d settings */
    nd.op.p.bn.momentum = 0.03f;
    if (train) {
        nd.dst[1] = val(stats);
        nd.dst[2] = state(rmean);
        nd.dst[3] = state(rvar);
    } else {
        nd.src[3] = state(rmean);
        nd.src[4] = state(rvar);
        nd.op.p.bn.silu = 1;
    }
    if ((status = push_node(g, &nd)))
        return status;
    *out = a;
    return YC_OK;
}

/* ---- Bottleneck(c1, c2, shortcut, e): cv1 1x1 -> cv2 3x3 [+ x] --------------------------- */

static int forward_bottleneck(yc_graph *g, const char *prefix, int x, int c2, bool shortcut,
                              double e, int *out)
{
    char sub[YC_NAME_MAX];
    int c1 = g->v[x]->t.c, c_ = (int)(c2 * e), t, u, status;
    fmt_name(sub, sizeof sub, "%s.cv1", prefix);
    if ((status = forward_conv(g, sub, x, c_, 1, 1, 0, &t)))
        return status;
    fmt_name(sub, sizeof sub, "%s.cv2", prefix);
    if ((status = forward_conv(g, sub, t, c2, 3, 1, 1, &u)))
        return status;
    if (!(shortcut && c1 == c2)) {
        *out = u;
        return YC_OK;
    }
    int y;
    const yc_tensor *ut = &g->v[u]->t;
    if ((status = new_value(g, &y, g->batch, c2, ut->h, ut->w, "%s.add", prefix)))
        return status;
    activation(g, y);
    g->v[y]->needs_grad = true;
    gnode nd = node(YC_OP_ADD, prefix);
    nd.src[0] = val(x);
    nd.src[1] = val(u);
    nd.dst[0] = val(y);
    if ((status = push_node(g, &nd)))
        return status;
    *out = y;
    return YC_OK;
}

/* ---- Concat: the inputs become channel ranges of the output (copies only when an input is
 *      already a view, e.g. listed in two concats) --------------------------------------------- */

static int forward_concat(yc_graph *g, const char *name, const int *in, int nin, int *out)
{
    const yc_tensor *t0 = &g->v[in[0]]->t;
    int c = 0, status;
    for (int i = 0; i < nin; i++) {
        const yc_tensor *ti = &g->v[in[i]]->t;
        if (ti->h != t0->h || ti->w != t0->w)
            return yc_error_status(YC_EFORMAT, "%s: cannot concatenate %dx%d with %dx%d (the image "
                                   "size must be a multiple of the largest stride)", name, t0->h,
                                   t0->w, ti->h, ti->w);
        c += ti->c;
    }
    int y;
    if ((status = new_value(g, &y, g->batch, c, t0->h, t0->w, "%s", name)))
        return status;
    activation(g, y);
    int chan = 0;
    for (int i = 0; i < nin; i++) {
        gvalue *vi = g->v[in[i]];
        g->v[y]->needs_grad |= vi->needs_grad;
        bool can_view = in[i] != g->input && vi->parent < 0 && in[i] != y;
        for (int j = 0; j < i; j++)
            if (in[j] == in[i])
                can_view = false;
        if (can_view) {
            vi->parent = y;
            vi->chan0 = chan;
        } else {
            int dst;
            if ((status = new_view(g, &dst, y, chan, vi->t.c, "")))
                return status;
            g->v[dst]->needs_grad = vi->needs_grad;
            gnode nd = node(YC_OP_COPY, name);
            nd.src[0] = val(in[i]);
            nd.dst[0] = val(dst);
            if ((status = push_node(g, &nd)))
                return status;
        }
        chan += vi->t.c;
    }
    *out = y;
    return YC_OK;
}

/* ---- C3(c1, c2, n, shortcut, e): cv3(cat(m(cv1(x)), cv2(x))) ------------------------------ */

static int forward_c3(yc_graph *g, const char *prefix, int x, const yc_layer_cfg *l, int *out)
{
    char sub[YC_NAME_MAX];
    int c_ = (int)(l->c2 * l->e), a, b, cat, status;
    fmt_name(sub, sizeof sub, "%s.cv1", prefix);
    if ((status = forward_conv(g, sub, x, c_, 1, 1, 0, &a)))
        return status;
    for (int j = 0; j < l->n; j++) {
        fmt_name(sub, sizeof sub, "%s.m.%d", prefix, j);
        if ((status = forward_bottleneck(g, sub, a, c_, l->shortcut, 1.0, &a)))
            return status;
    }
    fmt_name(sub, sizeof sub, "%s.cv2", prefix);
    if ((status = forward_conv(g, sub, x, c_, 1, 1, 0, &b)))
        return status;
    fmt_name(sub, sizeof sub, "%s.cat", prefix);
    int in[2] = {a, b};
    if ((status = forward_concat(g, sub, in, 2, &cat)))
        return status;
    fmt_name(sub, sizeof sub, "%s.cv3", prefix);
    return forward_conv(g, sub, cat, l->c2, 1, 1, 0, out);
}

/* ---- SPPF: cv2(cat(x, m(x), m(m(x)), m(m(m(x))))) with x = cv1(input), m = maxpool k/1/k//2;
 *      SPP: cv2(cat(x, pool_k1(x), pool_k2(x), pool_k3(x))) ---------------------------------- */

static int maxpool(yc_graph *g, const char *name, int x, int k, int *out)
{
    const yc_tensor *xt = &g->v[x]->t;
    int y, status;
    if ((status = new_value(g, &y, g->batch, xt->c, xt->h, xt->w, "%s", name)))
        return status;
    activation(g, y);
    g->v[y]->needs_grad = g->v[x]->needs_grad;
    gnode nd = node(YC_OP_MAXPOOL, name);
    nd.src[0] = val(x);
    nd.dst[0] = val(y);
    nd.op.p.pool.k = k;
    nd.op.p.pool.stride = 1;
    nd.op.p.pool.pad = k / 2;
    if ((status = push_node(g, &nd)))
        return status;
    *out = y;
    return YC_OK;
}

static int forward_spp(yc_graph *g, const char *prefix, int x, const yc_layer_cfg *l, int *out)
{
    char sub[YC_NAME_MAX];
    int c_ = l->c1 / 2, in[5], nin = 0, status;
    fmt_name(sub, sizeof sub, "%s.cv1", prefix);
    if ((status = forward_conv(g, sub, x, c_, 1, 1, 0, &in[nin++])))
        return status;
    int branches = l->module == YC_MOD_SPPF ? 3 : l->npool;
    for (int i = 0; i < branches; i++) {
        bool chained = l->module == YC_MOD_SPPF;
        fmt_name(sub, sizeof sub, "%s.m%d", prefix, i);
        if ((status = maxpool(g, sub, chained ? in[nin - 1] : in[0],
                              chained ? l->pool[0] : l->pool[i], &in[nin])))
            return status;
        nin++;
    }
    int cat;
    fmt_name(sub, sizeof sub, "%s.cat", prefix);
    if ((status = forward_concat(g, sub, in, nin, &cat)))
        return status;
    fmt_name(sub, sizeof sub, "%s.cv2", prefix);
    return forward_conv(g, sub, cat, l->c2, 1, 1, 0, out);
}

/* ---- nn.Upsample(None, f, 'nearest') ------------------------------------------------------- */

static int forward_upsample(yc_graph *g, const char *name, int x, int f, int *out)
{
    const yc_tensor *xt = &g->v[x]->t;
    int y, status;
    if ((status = new_value(g, &y, g->batch, xt->c, xt->h * f, xt->w * f, "%s", name)))
        return status;
    activation(g, y);
    g->v[y]->needs_grad = g->v[x]->needs_grad;
    gnode nd = node(YC_OP_UPSAMPLE, name);
    nd.src[0] = val(x);
    nd.dst[0] = val(y);
    nd.op.p.up.factor = f;
    if ((status = push_node(g, &nd)))
        return status;
    *out = y;
    return YC_OK;
}

/* ---- Detect: per level a 1x1 Conv2d(ch_l, na*no) with bias; (N, na*no, ny, nx) outputs ------ */

static int forward_detect(yc_graph *g, const char *prefix, const yc_layer_cfg *l)
{
    yc_model *m = g->m;
    int status;
    for (int i = 0; i < l->nfrom; i++) {
        int x = g->layer_out[l->from[i]], y;
        const yc_tensor *xt = &g->v[x]->t;
        int w = find_param(g, "%s.m.%d.weight", prefix, i);
        int b = find_param(g, "%s.m.%d.bias", prefix, i);
        if (w < 0 || b < 0)
            return YC_ERR;
        if ((status = new_value(g, &y, g->batch, m->na * m->no, xt->h, xt->w, "%s.m.%d", prefix,
                                i)))
            return status;
        g->v[y]->needs_grad = true;
        gnode nd = node(YC_OP_CONV2D, prefix);
        fmt_name(nd.name, sizeof nd.name, "%s.m.%d", prefix, i);
        nd.src[0] = val(x);
        nd.src[1] = prm(w);
        nd.src[2] = prm(b);
        nd.dst[0] = val(y);
        nd.op.p.conv.kh = nd.op.p.conv.kw = 1;
        nd.op.p.conv.stride_h = nd.op.p.conv.stride_w = 1;
        nd.op.p.conv.groups = 1;
        if ((status = push_node(g, &nd)))
            return status;
        g->heads[i] = y;
    }
    return YC_OK;
}

/* ---- the network ---------------------------------------------------------------------------- */

static int build_layer(yc_graph *g, int i)
{
    const yc_layer_cfg *l = &g->m->cfg->layers[i];
    char prefix[YC_NAME_MAX];
    int x = l->from[0] < 0 ? g->input : g->layer_out[l->from[0]];
    int status = YC_OK, out = x;
    fmt_name(prefix, sizeof prefix, "model.%d", i);
    switch (l->module) {
    case YC_MOD_CONV:
    case YC_MOD_BOTTLENECK:
    case YC_MOD_SPP:
    case YC_MOD_SPPF:
        /* repeated modules are an nn.Sequential: model.i.0, model.i.1, ... */
        for (int r = 0; r < l->repeats && !status; r++) {
            char sub[YC_NAME_MAX];
            if (l->repeats > 1)
                fmt_name(sub, sizeof sub, "%s.%d", prefix, r);
            else
                fmt_name(sub, sizeof sub, "%s", prefix);
            int c1 = r == 0 ? l->c1 : l->c2;
            if (l->module == YC_MOD_CONV) {
                status = forward_conv(g, sub, out, l->c2, l->k, l->s, l->p, &out);
            } else if (l->module == YC_MOD_BOTTLENECK) {
                status = forward_bottleneck(g, sub, out, l->c2, l->shortcut, l->e, &out);
            } else {
                yc_layer_cfg lr = *l;
                lr.c1 = c1;
                status = forward_spp(g, sub, out, &lr, &out);
            }
        }
        break;
    case YC_MOD_C3:
        status = forward_c3(g, prefix, x, l, &out);
        break;
    case YC_MOD_UPSAMPLE:
        status = forward_upsample(g, prefix, x, l->factor, &out);
        break;
    case YC_MOD_CONCAT: {
        int in[YC_MAX_FROM];
        for (int j = 0; j < l->nfrom; j++)
            in[j] = l->from[j] < 0 ? g->input : g->layer_out[l->from[j]];
        status = forward_concat(g, prefix, in, l->nfrom, &out);
        break;
    }
    case YC_MOD_DETECT:
        status = forward_detect(g, prefix, l);
        break;
    }
    if (status)
        return yc_error_context(status, "layer %d (%s)", i, l->type_name);
    g->layer_out[i] = out;
    return YC_OK;
}

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
        if ((status = new_view(g, &gid, gp, v->chan0, v->t.c, "")))
            return status;
        fmt_name(g->v[gid]->name, sizeof g->v[gid]->name, "d(%s)", g->v[id]->name);
    } else {
        if ((status = new_value(g, &gid, v->t.n, v->t.c, v->t.h, v->t.w, "d(%s)", v->name)))
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
    int c0, owner = owner_of(g, gid, &c0), c = g->v[gid]->t.c, count = 0;
    const uint8_t *w = g->v[owner]->written;
    for (int i = 0; i < c; i++)
        count += w[c0 + i];
    return count == 0 ? 0 : count == c ? 1 : -1;
}

/* Emits FILL(0) for every run of unwritten channels of `gid` and marks them written. */
static int fill_unwritten(yc_graph *g, int gid)
{
    int c0, owner = owner_of(g, gid, &c0), c = g->v[gid]->t.c, status;
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
        if ((status = new_view(g, &view, owner, c0 + i, j - i, ".zero")))
            return status;
        gnode nd = node(YC_OP_FILL, g->v[gid]->name);
        nd.dst[0] = val(view);
        nd.op.p.fill.value = 0.0f;
        if ((status = push_node(g, &nd)))
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
    int c0, owner = owner_of(g, gid, &c0);
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
    return push_node(g, nd);
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
        nd = node(YC_OP_CONV2D_BWD_FILTER, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = f->src[0];
        nd.src[1] = val(gy);
        nd.dst[0] = prm_grad(f->src[1].idx);
        nd.dst[1] = f->src[2].kind == REF_PARAM ? prm_grad(f->src[2].idx) : none;
        if ((status = push_node(g, &nd)))
            return status;
        if (!x_needs)
            return YC_OK;
        nd = node(YC_OP_CONV2D_BWD_DATA, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        nd.src[1] = f->src[1];
        return emit_grad_op(g, &nd, x);
    case YC_OP_BN_TRAIN:
        nd = node(YC_OP_BN_BWD, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        nd.src[1] = f->src[0];
        nd.src[2] = f->src[1];
        nd.src[3] = f->dst[1];
        nd.dst[1] = prm_grad(f->src[1].idx);
        nd.dst[2] = prm_grad(f->src[2].idx);
        return emit_grad_op(g, &nd, x);
    case YC_OP_BN_SILU_TRAIN:
        nd = node(YC_OP_BN_SILU_BWD, f->name);
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
        nd = node(YC_OP_SILU_BWD, f->name);
        nd.src[0] = val(gy);
        nd.src[1] = f->src[0];
        return emit_grad_op(g, &nd, x);
    case YC_OP_MAXPOOL:
        nd = node(YC_OP_MAXPOOL_BWD, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        nd.src[1] = f->src[0];
        return x_needs ? emit_grad_op(g, &nd, x) : YC_OK;
    case YC_OP_UPSAMPLE:
        nd = node(YC_OP_UPSAMPLE_BWD, f->name);
        nd.op.p = f->op.p;
        nd.src[0] = val(gy);
        return x_needs ? emit_grad_op(g, &nd, x) : YC_OK;
    case YC_OP_COPY:
        nd = node(YC_OP_COPY, f->name);
        nd.src[0] = val(gy);
        return x_needs ? emit_grad_op(g, &nd, x) : YC_OK;
    case YC_OP_ADD:
        for (int i = 0; i < 2; i++) {
            int xi = f->src[i].idx;
            if (!g->v[xi]->needs_grad)
                continue;
            nd = node(YC_OP_COPY, f->name);
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
            g->v[owner_of(g, i, NULL)]->recomputable = false;
    for (int l = 0; l < g->m->nl; l++)
        g->v[g->heads[l]]->recomputable = false;
    g->v[g->input]->recomputable = false;
}

/* The re-derived copy of recomputable value `id` (emitting YC_OP_BN_SILU_APPLY on first use). */
static int remat_of(yc_graph *g, int id, int *out)
{
    gvalue *v = g->v[id];
    if (v->remat >= 0) {
        *out = v->remat;
        return YC_OK;
    }
    const gnode *f = &g->nodes[v->producer];
    int r, status;
    if ((status = new_value(g, &r, v->t.n, v->t.c, v->t.h, v->t.w, "%s.recomputed", v->name)))
        return status;
    g->v[r]->t.type = v->t.type;
    gnode nd = node(YC_OP_BN_SILU_APPLY, f->name);
    nd.op.p = f->op.p;
    nd.src[0] = f->src[0];
    nd.src[1] = f->src[1];
    nd.src[2] = f->src[2];
    nd.src[3] = f->dst[1];
    nd.dst[0] = val(r);
    if ((status = push_node(g, &nd)))
        return status;
    v = g->v[id]; /* new_value may have moved the table, not the value */
    v->remat = r;
    *out = r;
    return YC_OK;
}

static int build_backward(yc_graph *g)
{
    int status;
    if (g->opt.recompute)
        mark_recomputable(g);
    /* The loss writes each head's gradient over the head itself (the Detect conv's backward
     * needs the gradient, never the head's values): one buffer per level instead of two at the
     * loss, where the training step peaks. */
    for (int l = 0; l < g->m->nl; l++) {
        int h = g->heads[l], gh;
        gvalue *hv = g->v[h];
        if ((status = new_view(g, &gh, h, 0, hv->t.c, "")))
            return status;
        fmt_name(g->v[gh]->name, sizeof g->v[gh]->name, "d(%s)", hv->name);
        g->v[gh]->is_grad = true;
        hv->grad = gh;
        if (!(hv->written = yc_malloc((size_t)hv->t.c, "graph")))
            return YC_ENOMEM;
        memset(hv->written, 1, (size_t)hv->t.c);
        g->head_grads[l] = gh;
    }
    for (int i = g->nforward - 1; i >= 0; i--) {
        gnode f = g->nodes[i]; /* copy: push_node may move the array */
        if ((status = backward_node(g, &f)))
            return yc_error_context(status, "backward of %s", f.name);
    }
    return YC_OK;
}

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

static void resolve_ops(yc_graph *g)
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
    gvalue *o = g->v[owner_of(g, id, NULL)];
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

static int build_plan(yc_graph *g)
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
    for (int l = 0; l < g->m->nl; l++) {
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
    if ((status = new_value(g, &g->input, batch, m->cfg->ch, h, w, "images")))
        goto fail;
    activation(g, g->input);
    for (int i = 0; i < m->cfg->nlayers; i++)
        if ((status = build_layer(g, i)))
            goto fail;
    g->nforward = g->nn;
    if (mode == YC_GRAPH_TRAIN && (status = build_backward(g)))
        goto fail;
    resolve_ops(g);
    if ((status = build_plan(g)))
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
        int c0, owner = owner_of(g, i, &c0);
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
static void refresh(const yc_graph *g)
{
    if (g->arena && g->arena->generation != g->bound_generation)
        bind((yc_graph *)g);
}

const yc_tensor *yc_graph_input(const yc_graph *g)
{
    refresh(g);
    return &g->v[g->input]->t;
}

const yc_tensor *yc_graph_head(const yc_graph *g, int level)
{
    refresh(g);
    return &g->v[g->heads[level]]->t;
}

const yc_tensor *yc_graph_head_grad(const yc_graph *g, int level)
{
    refresh(g);
    return g->mode == YC_GRAPH_TRAIN ? &g->v[g->head_grads[level]]->t : NULL;
}

/* Submits ops [from, to) (the backend may run them asynchronously: reading a result waits for
 * them).  Profiling waits for each op to finish so that its time is its own. */
static int run(yc_graph *g, int from, int to)
{
    yc_backend *be = g->m->be;
    refresh(g);
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
