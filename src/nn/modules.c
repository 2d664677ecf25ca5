/* The YOLOv5 modules of a graph (graph_internal.h): each forward_* builder mirrors the forward()
 * of a module of YOLOv5's models/common.py (Conv, Bottleneck, Concat, C3, SPPF/SPP, Upsample,
 * Detect) and emits its ops over the parameters and BatchNorm state the model declared
 * (model.c, the modules' __init__), found by name ("model.2.m.0.cv1.conv.weight").
 * yc_graph_build_layer emits the module of one layer of the config.  The backward of each op is
 * emitted by autodiff.c's backward_node, one case per op kind (named at each builder). */
#include "graph_internal.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"

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

/* The Conv of a fused model (yc_model_fuse: the BatchNorm folded into the conv weights w and the
 * BN bias b): one CONV2D with the bias and the SiLU epilogue where the backend has it
 * (yc_device_info.conv_silu), else CONV2D with the bias then SILU; its weights frozen (the
 * backend may keep them transformed between runs).  Evaluation graphs only. */
static int forward_conv_fused(yc_graph *g, const char *prefix, int x, int w, int b, int c2, int k,
                              int s, int p, int P, int Q, int *out)
{
    bool epilogue = g->m->be && g->m->be->info.conv_silu;
    int y, a = -1, status;
    if ((status = yc_graph_new_value(g, &y, g->batch, c2, P, Q, "%s.conv", prefix)) ||
        (!epilogue && (status = yc_graph_new_value(g, &a, g->batch, c2, P, Q, "%s.act", prefix))))
        return status;
    yc_graph_activation(g, y);
    gnode nd = yc_graph_node(YC_OP_CONV2D, prefix);
    nd.src[0] = val(x);
    nd.src[1] = prm(w);
    nd.src[2] = prm(b);
    nd.dst[0] = val(y);
    nd.op.p.conv.kh = nd.op.p.conv.kw = k;
    nd.op.p.conv.stride_h = nd.op.p.conv.stride_w = s;
    nd.op.p.conv.pad_h = nd.op.p.conv.pad_w = p;
    nd.op.p.conv.groups = 1;
    nd.op.p.conv.silu = epilogue;
    /* an inference model's weights: kept transformed by the backend between runs */
    nd.op.p.conv.frozen = 1;
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    if (epilogue) {
        *out = y;
        return YC_OK;
    }
    yc_graph_activation(g, a);
    nd = yc_graph_node(YC_OP_SILU, prefix);
    nd.src[0] = val(y);
    nd.dst[0] = val(a);
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    *out = a;
    return YC_OK;
}

/* x (N,c1,H,W) -> conv k x k stride s pad p -> (N,c2,P,Q) -> BN -> SiLU -> *out.  Backward:
 * autodiff.c, backward_node's cases YC_OP_CONV2D and YC_OP_BN_SILU_TRAIN (evaluation graphs, with
 * YC_OP_BN_EVAL, have none). */
static int forward_conv_bn(yc_graph *g, const char *prefix, int x, int c2, int k, int s, int p,
                           float eps, float momentum, int *out)
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
    if (g->m->fused)
        return forward_conv_fused(g, prefix, x, w, beta, c2, k, s, p, P, Q, out);
    int y, a, status;
    if ((status = yc_graph_new_value(g, &y, g->batch, c2, P, Q, "%s.conv", prefix)) ||
        (status = yc_graph_new_value(g, &a, g->batch, c2, P, Q, "%s.act", prefix)))
        return status;
    yc_graph_activation(g, y);
    yc_graph_activation(g, a);
    g->v[y]->needs_grad = g->v[a]->needs_grad = true;

    gnode nd = yc_graph_node(YC_OP_CONV2D, prefix);
    nd.src[0] = val(x);
    nd.src[1] = prm(w);
    nd.dst[0] = val(y);
    nd.op.p.conv.kh = nd.op.p.conv.kw = k;
    nd.op.p.conv.stride_h = nd.op.p.conv.stride_w = s;
    nd.op.p.conv.pad_h = nd.op.p.conv.pad_w = p;
    nd.op.p.conv.groups = 1;
    if ((status = yc_graph_push_node(g, &nd)))
        return status;

    /* BatchNorm and SiLU are one op and the BN output is never stored: in training, backward
     * recomputes it (YC_OP_BN_SILU_BWD; see yc_graph_options.recompute); in evaluation, BN_EVAL
     * applies SiLU */
    const bool train = g->mode == YC_GRAPH_TRAIN;
    int stats = -1;
    if (train && (status = yc_graph_new_value(g, &stats, 2, c2, 1, 1, "%s.bn.stats", prefix)))
        return status;
    nd = yc_graph_node(train ? YC_OP_BN_SILU_TRAIN : YC_OP_BN_EVAL, prefix);
    nd.src[0] = val(y);
    nd.src[1] = prm(gamma);
    nd.src[2] = prm(beta);
    nd.dst[0] = val(a);
    nd.op.p.bn.eps = eps;
    nd.op.p.bn.momentum = momentum;
    if (train) {
        nd.dst[1] = val(stats);
        nd.dst[2] = state(rmean);
        nd.dst[3] = state(rvar);
    } else {
        nd.src[3] = state(rmean);
        nd.src[4] = state(rvar);
        nd.op.p.bn.silu = 1;
    }
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    *out = a;
    return YC_OK;
}

/* Conv with the BatchNorm settings YOLOv5's initialize_weights gives every BatchNorm2d of a model
 * it builds (eps 1e-3, momentum 0.03). */
static int forward_conv(yc_graph *g, const char *prefix, int x, int c2, int k, int s, int p,
                        int *out)
{
    return forward_conv_bn(g, prefix, x, c2, k, s, p, 1e-3f, 0.03f, out);
}

/* ---- Bottleneck(c1, c2, shortcut, e): cv1 1x1 -> cv2 3x3 [+ x] --------------------------- */

/* Backward: the two Convs', and backward_node's case YC_OP_ADD for the shortcut. */
static int forward_bottleneck(yc_graph *g, const char *prefix, int x, int c2, bool shortcut,
                              double e, int *out)
{
    char sub[YC_NAME_MAX];
    int c1 = g->v[x]->t.c, c_ = (int)(c2 * e), t, u, status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.cv1", prefix);
    if ((status = forward_conv(g, sub, x, c_, 1, 1, 0, &t)))
        return status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.cv2", prefix);
    if ((status = forward_conv(g, sub, t, c2, 3, 1, 1, &u)))
        return status;
    if (!(shortcut && c1 == c2)) {
        *out = u;
        return YC_OK;
    }
    int y;
    const yc_tensor *ut = &g->v[u]->t;
    if ((status = yc_graph_new_value(g, &y, g->batch, c2, ut->h, ut->w, "%s.add", prefix)))
        return status;
    yc_graph_activation(g, y);
    g->v[y]->needs_grad = true;
    gnode nd = yc_graph_node(YC_OP_ADD, prefix);
    nd.src[0] = val(x);
    nd.src[1] = val(u);
    nd.dst[0] = val(y);
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    *out = y;
    return YC_OK;
}

/* ---- Concat: the inputs become channel ranges of the output (copies only when an input is
 *      already a view, e.g. listed in two concats) --------------------------------------------- */

/* Backward: a view needs none (its gradient is a view of the output's); a copy is backward_node's
 * case YC_OP_COPY. */
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
    if ((status = yc_graph_new_value(g, &y, g->batch, c, t0->h, t0->w, "%s", name)))
        return status;
    yc_graph_activation(g, y);
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
            if ((status = yc_graph_new_view(g, &dst, y, chan, vi->t.c, "")))
                return status;
            g->v[dst]->needs_grad = vi->needs_grad;
            gnode nd = yc_graph_node(YC_OP_COPY, name);
            nd.src[0] = val(in[i]);
            nd.dst[0] = val(dst);
            if ((status = yc_graph_push_node(g, &nd)))
                return status;
        }
        chan += vi->t.c;
    }
    *out = y;
    return YC_OK;
}

/* ---- C3(c1, c2, n, shortcut, e): cv3(cat(m(cv1(x)), cv2(x))) ------------------------------ */

/* Backward: that of the Convs, Bottlenecks and Concat it is made of. */
static int forward_c3(yc_graph *g, const char *prefix, int x, const yc_layer_cfg *l, int *out)
{
    char sub[YC_NAME_MAX];
    int c_ = (int)(l->c2 * l->e), a, b, cat, status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.cv1", prefix);
    if ((status = forward_conv(g, sub, x, c_, 1, 1, 0, &a)))
        return status;
    for (int j = 0; j < l->n; j++) {
        yc_graph_fmt_name(sub, sizeof sub, "%s.m.%d", prefix, j);
        if ((status = forward_bottleneck(g, sub, a, c_, l->shortcut, 1.0, &a)))
            return status;
    }
    yc_graph_fmt_name(sub, sizeof sub, "%s.cv2", prefix);
    if ((status = forward_conv(g, sub, x, c_, 1, 1, 0, &b)))
        return status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.cat", prefix);
    int in[2] = {a, b};
    if ((status = forward_concat(g, sub, in, 2, &cat)))
        return status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.cv3", prefix);
    return forward_conv(g, sub, cat, l->c2, 1, 1, 0, out);
}

/* ---- SPPF: cv2(cat(x, m(x), m(m(x)), m(m(m(x))))) with x = cv1(input), m = maxpool k/1/k//2;
 *      SPP: cv2(cat(x, pool_k1(x), pool_k2(x), pool_k3(x))) ---------------------------------- */

/* Backward: autodiff.c, backward_node's case YC_OP_MAXPOOL. */
static int maxpool(yc_graph *g, const char *name, int x, int k, int *out)
{
    const yc_tensor *xt = &g->v[x]->t;
    int y, status;
    if ((status = yc_graph_new_value(g, &y, g->batch, xt->c, xt->h, xt->w, "%s", name)))
        return status;
    yc_graph_activation(g, y);
    g->v[y]->needs_grad = g->v[x]->needs_grad;
    gnode nd = yc_graph_node(YC_OP_MAXPOOL, name);
    nd.src[0] = val(x);
    nd.dst[0] = val(y);
    nd.op.p.pool.k = k;
    nd.op.p.pool.stride = 1;
    nd.op.p.pool.pad = k / 2;
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    *out = y;
    return YC_OK;
}

/* Backward: that of the Convs, max pools and Concat it is made of. */
static int forward_spp(yc_graph *g, const char *prefix, int x, const yc_layer_cfg *l, int *out)
{
    char sub[YC_NAME_MAX];
    int c_ = l->c1 / 2, in[5], nin = 0, status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.cv1", prefix);
    if ((status = forward_conv(g, sub, x, c_, 1, 1, 0, &in[nin++])))
        return status;
    int branches = l->module == YC_MOD_SPPF ? 3 : l->npool;
    for (int i = 0; i < branches; i++) {
        bool chained = l->module == YC_MOD_SPPF;
        yc_graph_fmt_name(sub, sizeof sub, "%s.m%d", prefix, i);
        if ((status = maxpool(g, sub, chained ? in[nin - 1] : in[0],
                              chained ? l->pool[0] : l->pool[i], &in[nin])))
            return status;
        nin++;
    }
    int cat;
    yc_graph_fmt_name(sub, sizeof sub, "%s.cat", prefix);
    if ((status = forward_concat(g, sub, in, nin, &cat)))
        return status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.cv2", prefix);
    return forward_conv(g, sub, cat, l->c2, 1, 1, 0, out);
}

/* ---- nn.Upsample(None, f, 'nearest') ------------------------------------------------------- */

/* Backward: autodiff.c, backward_node's case YC_OP_UPSAMPLE. */
static int forward_upsample(yc_graph *g, const char *name, int x, int f, int *out)
{
    const yc_tensor *xt = &g->v[x]->t;
    int y, status;
    if ((status = yc_graph_new_value(g, &y, g->batch, xt->c, xt->h * f, xt->w * f, "%s", name)))
        return status;
    yc_graph_activation(g, y);
    g->v[y]->needs_grad = g->v[x]->needs_grad;
    gnode nd = yc_graph_node(YC_OP_UPSAMPLE, name);
    nd.src[0] = val(x);
    nd.dst[0] = val(y);
    nd.op.p.up.factor = f;
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    *out = y;
    return YC_OK;
}

/* ---- a 1x1 convolution with bias: Detect's per-level convs, Classify's Linear ----------------- */

/* x (N,C,H,W) -> y (N,c2,H,W) = conv1x1(x, W) + b, an FP32 value (a head).  A fused model's weights
 * are frozen (it is an inference model).  Backward: backward_node's case YC_OP_CONV2D (with bias). */
static int conv1x1_bias(yc_graph *g, const char *name, int x, int w, int b, int c2, int *out)
{
    const yc_tensor *xt = &g->v[x]->t;
    int y, status;
    if ((status = yc_graph_new_value(g, &y, g->batch, c2, xt->h, xt->w, "%s", name)))
        return status;
    g->v[y]->needs_grad = true;
    gnode nd = yc_graph_node(YC_OP_CONV2D, name);
    nd.src[0] = val(x);
    nd.src[1] = prm(w);
    nd.src[2] = prm(b);
    nd.dst[0] = val(y);
    nd.op.p.conv.kh = nd.op.p.conv.kw = 1;
    nd.op.p.conv.stride_h = nd.op.p.conv.stride_w = 1;
    nd.op.p.conv.groups = 1;
    nd.op.p.conv.frozen = g->m->fused;
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    *out = y;
    return YC_OK;
}

/* ---- Detect: per level a 1x1 Conv2d(ch_l, na*no) with bias; (N, na*no, ny, nx) outputs ------ */

/* Segment's Proto(c1, npr, nm) on its first input x (N,c1,H,W): cv1 Conv 3x3 -> (N,npr,H,W),
 * nn.Upsample(2, nearest) -> (N,npr,2H,2W), cv2 Conv 3x3, cv3 Conv 1x1 -> (N,nm,2H,2W), the
 * graph's head nl.  Backward: the Convs' and backward_node's case YC_OP_UPSAMPLE; the loss writes
 * the gradient of the output (yc_graph_build_backward). */
static int forward_proto(yc_graph *g, const char *prefix, int x, const yc_layer_cfg *l)
{
    char sub[YC_NAME_MAX];
    int a, up, b, out, status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.proto.cv1", prefix);
    if ((status = forward_conv(g, sub, x, l->npr, 3, 1, 1, &a)))
        return status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.proto.upsample", prefix);
    if ((status = forward_upsample(g, sub, a, 2, &up)))
        return status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.proto.cv2", prefix);
    if ((status = forward_conv(g, sub, up, l->npr, 3, 1, 1, &b)))
        return status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.proto.cv3", prefix);
    if ((status = forward_conv(g, sub, b, l->nm, 1, 1, 0, &out)))
        return status;
    /* FP32 even with FP16 storage, as the Detect levels' outputs: the loss reads it and writes
     * its gradient over it, and gradients are FP32 */
    g->v[out]->t.type = YC_F32;
    g->heads[l->nfrom] = out;
    return YC_OK;
}

/* Backward: autodiff.c, backward_node's case YC_OP_CONV2D (with the bias gradient); the loss
 * writes the heads' gradients (yc_graph_build_backward).  Segment (l->nm > 0) runs Proto first,
 * as Segment.forward does. */
static int forward_detect(yc_graph *g, const char *prefix, const yc_layer_cfg *l)
{
    yc_model *m = g->m;
    int status;
    if (l->nm > 0 && (status = forward_proto(g, prefix, g->layer_out[l->from[0]], l)))
        return status;
    for (int i = 0; i < l->nfrom; i++) {
        int w = find_param(g, "%s.m.%d.weight", prefix, i);
        int b = find_param(g, "%s.m.%d.bias", prefix, i);
        char name[YC_NAME_MAX];
        yc_graph_fmt_name(name, sizeof name, "%s.m.%d", prefix, i);
        if (w < 0 || b < 0)
            return YC_ERR;
        int y;
        if ((status = conv1x1_bias(g, name, g->layer_out[l->from[i]], w, b, m->na * m->no, &y)))
            return status;
        g->heads[i] = y;
    }
    return YC_OK;
}

/* ---- Classify(c1, c2): Conv c1 -> 1280 1x1, AdaptiveAvgPool2d(1), Dropout, Linear 1280 -> c2 --- */

/* x (N,c1,H,W) -> Conv (N,1280,H,W) -> pool (N,1280,1,1) -> Linear as a 1x1 convolution with bias
 * -> the logits (N,c2,1,1), the graph's one head.  Classify's BatchNorm keeps nn.BatchNorm2d's
 * defaults (eps 1e-5, momentum 0.1): YOLOv5 makes it after initialize_weights has set the others.
 * Dropout (g->opt.dropout > 0 in a training graph) is YC_OP_DROPOUT on the pooled values, its
 * seed set per step by yc_graph_set_dropout_seed; otherwise the identity (evaluation, and
 * YOLOv5's default p = 0).  Backward: the Conv's, and backward_node's cases YC_OP_AVGPOOL,
 * YC_OP_DROPOUT and YC_OP_CONV2D (with bias). */
static int forward_classify(yc_graph *g, const char *prefix, int x, const yc_layer_cfg *l)
{
    char sub[YC_NAME_MAX];
    int a, pooled, logits, status;
    yc_graph_fmt_name(sub, sizeof sub, "%s.conv", prefix);
    if ((status = forward_conv_bn(g, sub, x, YC_CLASSIFY_HIDDEN, 1, 1, 0, 1e-5f, 0.1f, &a)))
        return status;
    if ((status = yc_graph_new_value(g, &pooled, g->batch, YC_CLASSIFY_HIDDEN, 1, 1, "%s.pool",
                                     prefix)))
        return status;
    yc_graph_activation(g, pooled);
    g->v[pooled]->needs_grad = true;
    gnode nd = yc_graph_node(YC_OP_AVGPOOL, prefix);
    yc_graph_fmt_name(nd.name, sizeof nd.name, "%s.pool", prefix);
    nd.src[0] = val(a);
    nd.dst[0] = val(pooled);
    if ((status = yc_graph_push_node(g, &nd)))
        return status;
    if (g->mode == YC_GRAPH_TRAIN && g->opt.dropout > 0) {
        if (!(g->opt.dropout < 1))
            return yc_error_status(YC_EUSAGE, "dropout %g: must be in [0, 1)", g->opt.dropout);
        if (g->act != YC_F32)
            return yc_error_status(YC_EUNSUPPORTED, "Classify's dropout with FP16 activations is "
                                   "not implemented: train without --half");
        int dropped;
        if ((status = yc_graph_new_value(g, &dropped, g->batch, YC_CLASSIFY_HIDDEN, 1, 1,
                                         "%s.drop", prefix)))
            return status;
        g->v[dropped]->needs_grad = true;
        nd = yc_graph_node(YC_OP_DROPOUT, prefix);
        yc_graph_fmt_name(nd.name, sizeof nd.name, "%s.drop", prefix);
        yc_dropout_params(&nd.op, g->opt.dropout, 0);
        nd.src[0] = val(pooled);
        nd.dst[0] = val(dropped);
        if ((status = yc_graph_push_node(g, &nd)))
            return status;
        pooled = dropped;
    }

    int w = find_param(g, "%s.linear.weight", prefix);
    int b = find_param(g, "%s.linear.bias", prefix);
    if (w < 0 || b < 0)
        return YC_ERR;
    yc_graph_fmt_name(sub, sizeof sub, "%s.linear", prefix);
    if ((status = conv1x1_bias(g, sub, pooled, w, b, l->c2, &logits)))
        return status;
    g->heads[0] = logits;
    return YC_OK;
}

/* ---- the network ---------------------------------------------------------------------------- */

int yc_graph_build_layer(yc_graph *g, int i)
{
    const yc_layer_cfg *l = &g->m->cfg->layers[i];
    char prefix[YC_NAME_MAX];
    int x = l->from[0] < 0 ? g->input : g->layer_out[l->from[0]];
    int status = YC_OK, out = x;
    yc_graph_fmt_name(prefix, sizeof prefix, "model.%d", i);
    switch (l->module) {
    case YC_MOD_CONV:
    case YC_MOD_BOTTLENECK:
    case YC_MOD_SPP:
    case YC_MOD_SPPF:
        /* repeated modules are an nn.Sequential: model.i.0, model.i.1, ... */
        for (int r = 0; r < l->repeats && !status; r++) {
            char sub[YC_NAME_MAX];
            if (l->repeats > 1)
                yc_graph_fmt_name(sub, sizeof sub, "%s.%d", prefix, r);
            else
                yc_graph_fmt_name(sub, sizeof sub, "%s", prefix);
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
    case YC_MOD_CLASSIFY:
        status = forward_classify(g, prefix, x, l);
        out = g->heads[0];
        break;
    }
    if (status)
        return yc_error_context(status, "layer %d (%s)", i, l->type_name);
    g->layer_out[i] = out;
    return YC_OK;
}
