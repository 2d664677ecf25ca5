/* A YOLOv5 model's parameters and state (see model.h). */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rng.h"
#include "safetensors.h"
#include "util.h"

/* ---- registration ------------------------------------------------------------------------ */

static int dict_push(yc_model *m, bool is_state, int idx)
{
    struct yc_dict_entry *d = yc_realloc(m->dict, (size_t)(m->ndict + 1) * sizeof *d, "model");
    if (!d)
        return YC_ENOMEM;
    m->dict = d;
    m->dict[m->ndict].is_state = is_state;
    m->dict[m->ndict].idx = idx;
    m->ndict++;
    return YC_OK;
}

/* Registers parameter `name` (next in the state dict); returns its index. */
static int add_param(yc_model *m, const char *name, int ndim, const int *shape,
                     yc_param_group group, int layer)
{
    yc_param *np = yc_realloc(m->params, (size_t)(m->nparams + 1) * sizeof *np, "model");
    if (!np)
        return YC_ENOMEM;
    m->params = np;
    yc_param *p = &m->params[m->nparams];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < 4; i++) {
        p->shape[i] = i < ndim ? shape[i] : 1;
        p->numel *= (size_t)p->shape[i];
    }
    p->offset = m->param_elems;
    p->group = group;
    p->layer = layer;
    m->param_elems += p->numel;
    int status = dict_push(m, false, m->nparams);
    if (status)
        return status;
    return m->nparams++;
}

/* Registers state entry `name` (next in the state dict); returns its index. */
static int add_state(yc_model *m, const char *name, yc_state_kind kind, int numel)
{
    yc_state *ns = yc_realloc(m->state, (size_t)(m->nstate + 1) * sizeof *ns, "model");
    if (!ns)
        return YC_ENOMEM;
    m->state = ns;
    yc_state *s = &m->state[m->nstate];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->kind = kind;
    s->numel = numel;
    if (kind == YC_STATE_NUM_BATCHES) {
        s->offset = (size_t)m->nbn++;
    } else {
        s->offset = m->state_elems;
        m->state_elems += (size_t)numel;
    }
    int status = dict_push(m, true, m->nstate);
    if (status)
        return status;
    return m->nstate++;
}

int yc_model_find_param(const yc_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return i;
    return -1;
}

int yc_model_find_state(const yc_model *m, const char *name)
{
    for (int i = 0; i < m->nstate; i++)
        if (strcmp(m->state[i].name, name) == 0)
            return i;
    return -1;
}

float yc_model_bn_eps(const yc_model *m, const char *prefix)
{
    int layer = -1;
    if (sscanf(prefix, "model.%d.", &layer) == 1 && layer >= 0 && layer < m->cfg->nlayers &&
        m->cfg->layers[layer].module == YC_MOD_CLASSIFY)
        return 1e-5f;
    return 1e-3f;
}

void yc_model_fold_bn(float *w, float *beta, const float *gamma, const float *mean,
                      const float *var, size_t c2, size_t per, float eps)
{
    for (size_t o = 0; o < c2; o++) {
        float scale = gamma[o] / sqrtf(eps + var[o]);
        for (size_t j = 0; j < per; j++)
            w[o * per + j] *= scale;
        beta[o] = beta[o] - gamma[o] * mean[o] / sqrtf(var[o] + eps);
    }
}

/* Folds the BatchNorm named prefix + ".bn" into the conv prefix + ".conv" (yc_model_fuse); buf
 * holds the largest parameter. */
static int fuse_one(yc_model *m, const char *prefix, float *buf)
{
    char name[YC_NAME_MAX + 16];
    const char *suffix[5] = {".conv.weight", ".bn.weight", ".bn.bias", ".bn.running_mean",
                             ".bn.running_var"};
    const yc_tensor *t[5];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, suffix[i]);
        int j = i < 3 ? yc_model_find_param(m, name) : yc_model_find_state(m, name);
        if (j < 0)
            return yc_error_status(YC_ERR, "internal: fusing %s: no %s", prefix, name);
        t[i] = i < 3 ? &m->params[j].t : &m->state[j].t;
    }
    size_t nw = yc_tensor_elems(t[0]), c2 = yc_tensor_elems(t[1]);
    if (c2 == 0 || nw % c2)
        return yc_error_status(YC_ERR, "internal: fusing %s: %zu weights for %zu channels", prefix,
                               nw, c2);
    float *w = buf, *v = buf + nw;
    int st;
    for (int i = 0; i < 5; i++)
        if ((st = yc_tensor_get_f32(m->be, t[i], i ? v + (size_t)(i - 1) * c2 : w)))
            return st;
    float *gamma = v, *beta = v + c2, *mean = v + 2 * c2, *var = v + 3 * c2;
    yc_model_fold_bn(w, beta, gamma, mean, var, c2, nw / c2, yc_model_bn_eps(m, prefix));
    if ((st = yc_tensor_set_f32(m->be, t[0], w)) || (st = yc_tensor_set_f32(m->be, t[2], beta)))
        return st;
    return YC_OK;
}

int yc_model_fuse(yc_model *m)
{
    if (m->fused)
        return YC_OK;
    if (!m->be)
        return yc_error_status(YC_ERR, "internal: fusing a model that is not allocated");
    size_t most = 0;
    for (int i = 0; i < m->nparams; i++)
        most = m->params[i].numel > most ? m->params[i].numel : most;
    /* the weights of one conv and its four BN vectors (each at most the largest parameter) */
    float *buf = yc_malloc(5 * most * sizeof *buf, "the weights of a Conv being fused");
    if (!buf)
        return YC_ENOMEM;
    int st = YC_OK;
    const char *tail = ".conv.weight";
    size_t tl = strlen(tail);
    for (int i = 0; i < m->nparams && !st; i++) {
        const char *name = m->params[i].name;
        size_t n = strlen(name);
        if (n <= tl || strcmp(name + n - tl, tail))
            continue;
        char prefix[YC_NAME_MAX];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(n - tl), name);
        st = fuse_one(m, prefix, buf);
    }
    free(buf);
    if (!st)
        m->fused = true;
    return st;
}

/* ---- declaration: the __init__ of YOLOv5's modules (models/common.py, models/yolo.py) -------
 * Each module registers its parameters and BatchNorm state under YOLOv5's state-dict names, in
 * its order, before any graph is built; modules.c's forward builders find them by name. */

/* "%s.suffix" names, truncated silently at YC_NAME_MAX (names are far shorter in practice). */
static void sub_name(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sub_name(char *dst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, YC_NAME_MAX, fmt, ap);
    va_end(ap);
}

/* Conv: Conv2d(c1, c2, k, bias=False) + BatchNorm2d(c2) */
static int declare_conv(yc_model *m, int layer, const char *prefix, int c1, int c2, int k)
{
    char name[YC_NAME_MAX];
    const int wshape[4] = {c2, c1, k, k}, vshape[4] = {c2, 1, 1, 1};
    int st;
    sub_name(name, "%s.conv.weight", prefix);
    if ((st = add_param(m, name, 4, wshape, YC_PG_WEIGHT, layer)) < 0)
        return st;
    sub_name(name, "%s.bn.weight", prefix);
    if ((st = add_param(m, name, 1, vshape, YC_PG_BN_WEIGHT, layer)) < 0)
        return st;
    sub_name(name, "%s.bn.bias", prefix);
    if ((st = add_param(m, name, 1, vshape, YC_PG_BIAS, layer)) < 0)
        return st;
    sub_name(name, "%s.bn.running_mean", prefix);
    if ((st = add_state(m, name, YC_STATE_RUNNING_MEAN, c2)) < 0)
        return st;
    sub_name(name, "%s.bn.running_var", prefix);
    if ((st = add_state(m, name, YC_STATE_RUNNING_VAR, c2)) < 0)
        return st;
    sub_name(name, "%s.bn.num_batches_tracked", prefix);
    if ((st = add_state(m, name, YC_STATE_NUM_BATCHES, 1)) < 0)
        return st;
    return YC_OK;
}

/* Bottleneck(c1, c2, e): cv1 1x1 to c2*e channels, cv2 3x3 */
static int declare_bottleneck(yc_model *m, int layer, const char *prefix, int c1, int c2, double e)
{
    char sub[YC_NAME_MAX];
    int c_ = (int)(c2 * e), st;
    sub_name(sub, "%s.cv1", prefix);
    if ((st = declare_conv(m, layer, sub, c1, c_, 1)))
        return st;
    sub_name(sub, "%s.cv2", prefix);
    return declare_conv(m, layer, sub, c_, c2, 3);
}

/* C3(c1, c2, n, e): cv1, cv2 1x1 to c2*e, cv3 1x1 from 2*c2*e, m = n Bottlenecks(e=1.0) */
static int declare_c3(yc_model *m, int layer, const char *prefix, const yc_layer_cfg *l)
{
    char sub[YC_NAME_MAX];
    int c_ = (int)(l->c2 * l->e), st;
    sub_name(sub, "%s.cv1", prefix);
    if ((st = declare_conv(m, layer, sub, l->c1, c_, 1)))
        return st;
    sub_name(sub, "%s.cv2", prefix);
    if ((st = declare_conv(m, layer, sub, l->c1, c_, 1)))
        return st;
    sub_name(sub, "%s.cv3", prefix);
    if ((st = declare_conv(m, layer, sub, 2 * c_, l->c2, 1)))
        return st;
    for (int j = 0; j < l->n; j++) {
        sub_name(sub, "%s.m.%d", prefix, j);
        if ((st = declare_bottleneck(m, layer, sub, c_, c_, 1.0)))
            return st;
    }
    return YC_OK;
}

/* SPPF and SPP: cv1 1x1 to c1/2, cv2 1x1 from the concatenation of the branches */
static int declare_spp(yc_model *m, int layer, const char *prefix, const yc_layer_cfg *l, int c1)
{
    char sub[YC_NAME_MAX];
    int c_ = c1 / 2, st;
    sub_name(sub, "%s.cv1", prefix);
    if ((st = declare_conv(m, layer, sub, c1, c_, 1)))
        return st;
    sub_name(sub, "%s.cv2", prefix);
    int branches = l->module == YC_MOD_SPPF ? 4 : l->npool + 1;
    return declare_conv(m, layer, sub, c_ * branches, l->c2, 1);
}

/* Detect: per level a 1x1 Conv2d(ch_l, na*no) with bias; the anchors buffer's name.  Segment
 * (l->nm > 0): the same convs with no = nc + 5 + nm, then proto = Proto(ch_0, npr, nm): cv1 Conv
 * 3x3 to npr, nn.Upsample(2), cv2 Conv 3x3, cv3 Conv 1x1 to nm (its state dict follows the convs',
 * as Segment's __init__ registers it after m). */
static int declare_detect(yc_model *m, int layer, const char *prefix, const yc_layer_cfg *l)
{
    char name[YC_NAME_MAX];
    int st;
    sub_name(m->anchors_name, "%s.anchors", prefix);
    m->detect_layer = layer;
    for (int i = 0; i < l->nfrom; i++) {
        const int cin = m->cfg->layers[l->from[i]].c2;
        const int wshape[4] = {m->na * m->no, cin, 1, 1}, bshape[4] = {m->na * m->no, 1, 1, 1};
        sub_name(name, "%s.m.%d.weight", prefix, i);
        if ((st = add_param(m, name, 4, wshape, YC_PG_WEIGHT, layer)) < 0)
            return st;
        sub_name(name, "%s.m.%d.bias", prefix, i);
        if ((st = add_param(m, name, 1, bshape, YC_PG_BIAS, layer)) < 0)
            return st;
    }
    if (l->nm == 0)
        return YC_OK;
    const int c1 = m->cfg->layers[l->from[0]].c2;
    sub_name(name, "%s.proto.cv1", prefix);
    if ((st = declare_conv(m, layer, name, c1, l->npr, 3)))
        return st;
    sub_name(name, "%s.proto.cv2", prefix);
    if ((st = declare_conv(m, layer, name, l->npr, l->npr, 3)))
        return st;
    sub_name(name, "%s.proto.cv3", prefix);
    return declare_conv(m, layer, name, l->npr, l->nm, 1);
}

/* Classify: conv (Conv c1 -> 1280, 1x1), linear (Linear 1280 -> nc: weight (nc, 1280), bias) */
static int declare_classify(yc_model *m, int layer, const char *prefix, const yc_layer_cfg *l)
{
    char name[YC_NAME_MAX];
    int st;
    sub_name(name, "%s.conv", prefix);
    if ((st = declare_conv(m, layer, name, l->c1, YC_CLASSIFY_HIDDEN, 1)))
        return st;
    const int wshape[4] = {l->c2, YC_CLASSIFY_HIDDEN, 1, 1}, bshape[4] = {l->c2, 1, 1, 1};
    sub_name(name, "%s.linear.weight", prefix);
    if ((st = add_param(m, name, 2, wshape, YC_PG_WEIGHT, layer)) < 0)
        return st;
    sub_name(name, "%s.linear.bias", prefix);
    if ((st = add_param(m, name, 1, bshape, YC_PG_BIAS, layer)) < 0)
        return st;
    return YC_OK;
}

/* Every layer's modules, named as YOLOv5's state dict: model.i, and model.i.r for the repeats
 * of a module that is an nn.Sequential. */
static int declare_layers(yc_model *m)
{
    for (int i = 0; i < m->cfg->nlayers; i++) {
        const yc_layer_cfg *l = &m->cfg->layers[i];
        char prefix[YC_NAME_MAX], sub[YC_NAME_MAX];
        sub_name(prefix, "model.%d", i);
        int st = YC_OK;
        switch (l->module) {
        case YC_MOD_CONV:
        case YC_MOD_BOTTLENECK:
        case YC_MOD_SPP:
        case YC_MOD_SPPF:
            for (int r = 0; r < l->repeats && !st; r++) {
                if (l->repeats > 1)
                    sub_name(sub, "%s.%d", prefix, r);
                else
                    sub_name(sub, "%s", prefix);
                const int c1 = r == 0 ? l->c1 : l->c2;
                if (l->module == YC_MOD_CONV)
                    st = declare_conv(m, i, sub, c1, l->c2, l->k);
                else if (l->module == YC_MOD_BOTTLENECK)
                    st = declare_bottleneck(m, i, sub, c1, l->c2, l->e);
                else
                    st = declare_spp(m, i, sub, l, c1);
            }
            break;
        case YC_MOD_C3:
            st = declare_c3(m, i, prefix, l);
            break;
        case YC_MOD_DETECT:
            st = declare_detect(m, i, prefix, l);
            break;
        case YC_MOD_CLASSIFY:
            st = declare_classify(m, i, prefix, l);
            break;
        case YC_MOD_UPSAMPLE:
        case YC_MOD_CONCAT:
            break;
        }
        if (st)
            return yc_error_context(st, "layer %d (%s)", i, l->type_name);
    }
    return YC_OK;
}

/* The strides of the Detect levels: the input size over each level's output size at YOLOv5's
 * 256 x 256 probe (Conv: (h + 2p - k) / s + 1; Upsample: times its factor; Concat: its first
 * input's size; the other modules keep the size). */
static int detect_strides(yc_model *m)
{
    const yc_model_cfg *cfg = m->cfg;
    int *h = yc_malloc((size_t)cfg->nlayers * sizeof *h, "model");
    if (!h)
        return YC_ENOMEM;
    int st = YC_OK;
    for (int i = 0; i < cfg->nlayers && !st; i++) {
        const yc_layer_cfg *l = &cfg->layers[i];
        int x = l->from[0] < 0 ? 256 : h[l->from[0]];
        if (l->module == YC_MOD_CONV)
            for (int r = 0; r < l->repeats && x > 0; r++)
                x = x + 2 * l->p < l->k ? 0 : (x + 2 * l->p - l->k) / l->s + 1;
        else if (l->module == YC_MOD_UPSAMPLE)
            x *= l->factor;
        else if (l->module == YC_MOD_CONCAT)
            for (int j = 1; j < l->nfrom && !st; j++) {
                int y = l->from[j] < 0 ? 256 : h[l->from[j]];
                if (y != x)
                    st = yc_error_status(YC_EFORMAT, "%s: layer %d (Concat) joins a %dx%d and a "
                                         "%dx%d output at a 256x256 input", cfg->path, i, x, x,
                                         y, y);
            }
        if (!st && x < 1)
            st = yc_error_status(YC_EFORMAT, "%s: layer %d (%s) leaves nothing of a 256x256 input",
                                 cfg->path, i, l->type_name);
        h[i] = x;
        if (l->module == YC_MOD_DETECT)
            for (int j = 0; j < l->nfrom && j < m->nl; j++)
                m->stride[j] = 256.0f / (float)h[l->from[j]];
    }
    free(h);
    return st;
}

/* ---- construction ------------------------------------------------------------------------ */

/* 4-D weights as they are, Linear's (out, in) as a 1x1 convolution's (out, in, 1, 1), vectors as
 * (1, C, 1, 1) */
static yc_tensor param_tensor(const yc_param *p, yc_buffer *buf)
{
    yc_tensor t = p->ndim >= 2 ? yc_tensor_make(p->shape[0], p->shape[1], p->shape[2], p->shape[3],
                                                YC_F32, p->name)
                               : yc_tensor_make(1, (int)p->numel, 1, 1, YC_F32, p->name);
    t.buf = buf;
    t.offset = p->offset * sizeof(float);
    return t;
}


int yc_model_new(yc_model **out, yc_model_cfg *cfg)
{
    *out = NULL;
    yc_model *m = yc_calloc(1, sizeof *m, "model");
    if (!m) {
        yc_model_cfg_free(cfg);
        return YC_ENOMEM;
    }
    m->cfg = cfg;
    m->nl = cfg->nl;
    m->na = cfg->na;
    m->nc = cfg->nc;
    if (cfg->task == YC_TASK_SEGMENT) {
        const yc_layer_cfg *seg = &cfg->layers[cfg->nlayers - 1];
        m->nm = seg->nm;
        m->npr = seg->npr;
    }
    m->no = cfg->nc + 5 + m->nm;
    m->detect_layer = -1; /* set by declare_detect */
    if (m->nl > YC_CFG_MAX_LEVELS || m->na > YC_CFG_MAX_ANCHORS) {
        int st = yc_error_status(YC_EFORMAT, "%s: too many levels or anchors", cfg->path);
        yc_model_free(m); /* frees cfg: the message is written first */
        return st;
    }

    int status = declare_layers(m);
    if (status)
        yc_error_context(status, "%s", cfg->path);
    else
        status = detect_strides(m);
    if (status) {
        yc_model_free(m); /* frees cfg: the message is written first */
        return status;
    }
    /* Lay the arena out group by group (biases, decayed weights, BN weights), each group a
     * contiguous range, so optimizer steps are one op per group. */
    size_t off = 0;
    for (int grp = 0; grp < YC_PG_COUNT; grp++) {
        m->group_offset[grp] = off;
        for (int i = 0; i < m->nparams; i++)
            if (m->params[i].group == (yc_param_group)grp) {
                m->params[i].offset = off;
                off += m->params[i].numel;
            }
        m->group_elems[grp] = off - m->group_offset[grp];
    }
    /* tensor shapes are known now (schedules can be checked and planned); their buffers come
     * with yc_model_alloc */
    for (int i = 0; i < m->nparams; i++) {
        m->params[i].t = param_tensor(&m->params[i], NULL);
        m->params[i].grad = param_tensor(&m->params[i], NULL);
    }
    for (int i = 0; i < m->nstate; i++) {
        yc_state *st = &m->state[i];
        if (st->kind != YC_STATE_NUM_BATCHES) {
            st->t = yc_tensor_make(1, st->numel, 1, 1, YC_F32, st->name);
            st->t.offset = st->offset * sizeof(float);
        }
    }
    m->num_batches = yc_calloc((size_t)(m->nbn ? m->nbn : 1), sizeof *m->num_batches, "model");
    if (!m->num_batches) {
        yc_model_free(m);
        return YC_ENOMEM;
    }

    /* check_anchor_order: flip the levels when the anchor areas run against the strides */
    int nl = m->nl, na = m->na;
    if (nl == 0) {
        *out = m; /* a classifier: no anchors */
        return YC_OK;
    }
    memcpy(m->anchors, cfg->anchors, (size_t)nl * na * 2 * sizeof(float));
    double a0 = 0, a1 = 0;
    for (int a = 0; a < na; a++) {
        a0 += m->anchors[a * 2] * m->anchors[a * 2 + 1];
        a1 += m->anchors[((nl - 1) * na + a) * 2] * m->anchors[((nl - 1) * na + a) * 2 + 1];
    }
    double da = (a1 - a0) / na, ds = m->stride[nl - 1] - m->stride[0];
    if (da != 0 && ((da > 0) != (ds > 0))) {
        yc_info("Reversing anchor order\n");
        for (int l = 0; l < nl / 2; l++)
            for (int i = 0; i < na * 2; i++) {
                float t = m->anchors[l * na * 2 + i];
                m->anchors[l * na * 2 + i] = m->anchors[(nl - 1 - l) * na * 2 + i];
                m->anchors[(nl - 1 - l) * na * 2 + i] = t;
            }
    }
    for (int l = 0; l < nl; l++)
        for (int i = 0; i < na * 2; i++)
            m->anchors[l * na * 2 + i] /= m->stride[l];
    *out = m;
    return YC_OK;
}

int yc_model_clone(const yc_model *src, yc_model **out)
{
    *out = NULL;
    yc_model_cfg *cfg = yc_malloc(sizeof *cfg, "model config");
    if (!cfg)
        return YC_ENOMEM;
    *cfg = *src->cfg;
    cfg->text = NULL;
    if (src->cfg->text && !(cfg->text = yc_strdup(src->cfg->text, "model config"))) {
        free(cfg);
        return YC_ENOMEM;
    }
    int status = yc_model_new(out, cfg);
    if (status)
        return status;
    memcpy((*out)->anchors, src->anchors, sizeof src->anchors);
    memcpy((*out)->num_batches, src->num_batches, (size_t)src->nbn * sizeof *src->num_batches);
    return YC_OK;
}

int yc_model_copy_weights(yc_model *dst, const yc_model *src)
{
    yc_backend *be = src->be;
    if (dst->be != be || dst->param_elems != src->param_elems || dst->state_elems != src->state_elems)
        return yc_error_status(YC_ERR, "internal: copying weights between different models");
    float *tmp = yc_malloc((src->param_elems > src->state_elems ? src->param_elems
                                                                 : src->state_elems) * sizeof *tmp +
                               sizeof *tmp,
                           "weights copy");
    if (!tmp)
        return YC_ENOMEM;
    int status = be->iface->buffer_read(be, src->param_buf, 0, tmp,
                                        src->param_elems * sizeof *tmp);
    if (!status)
        status = be->iface->buffer_write(be, dst->param_buf, 0, tmp,
                                         src->param_elems * sizeof *tmp);
    if (!status && src->state_elems)
        status = be->iface->buffer_read(be, src->state_buf, 0, tmp,
                                        src->state_elems * sizeof *tmp);
    if (!status && src->state_elems)
        status = be->iface->buffer_write(be, dst->state_buf, 0, tmp,
                                         src->state_elems * sizeof *tmp);
    free(tmp);
    memcpy(dst->anchors, src->anchors, sizeof src->anchors);
    memcpy(dst->num_batches, src->num_batches, (size_t)src->nbn * sizeof *src->num_batches);
    dst->fused = src->fused;
    return status;
}

void yc_model_free(yc_model *m)
{
    if (!m)
        return;
    if (m->be) {
        yc_buffer_free(m->be, m->param_buf);
        yc_buffer_free(m->be, m->grad_buf);
        yc_buffer_free(m->be, m->state_buf);
    }
    free(m->params);
    free(m->state);
    free(m->dict);
    free(m->num_batches);
    yc_model_cfg_free(m->cfg);
    free(m);
}

static int model_alloc(yc_model *m, yc_backend *be, bool grads)
{
    m->be = be;
    size_t pbytes = m->param_elems * sizeof(float), sbytes = m->state_elems * sizeof(float);
    m->param_buf = yc_buffer_alloc(be, pbytes);
    if (m->param_buf && grads)
        m->grad_buf = yc_buffer_alloc(be, pbytes);
    if (m->param_buf && (!grads || m->grad_buf))
        m->state_buf = yc_buffer_alloc(be, sbytes ? sbytes : sizeof(float));
    if (!m->state_buf)
        return yc_error_context(YC_ENOMEM, "model parameters (%zu bytes)", pbytes);
    for (int i = 0; i < m->nparams; i++) {
        yc_param *p = &m->params[i];
        p->t = param_tensor(p, m->param_buf);
        if (grads)
            p->grad = param_tensor(p, m->grad_buf);
    }
    for (int i = 0; i < m->nstate; i++) {
        yc_state *s = &m->state[i];
        if (s->kind == YC_STATE_NUM_BATCHES)
            continue;
        s->t = yc_tensor_make(1, s->numel, 1, 1, YC_F32, s->name);
        s->t.buf = m->state_buf;
        s->t.offset = s->offset * sizeof(float);
    }
    return grads ? yc_model_zero_grad(m) : YC_OK;
}

int yc_model_alloc(yc_model *m, yc_backend *be)
{
    return model_alloc(m, be, true);
}

int yc_model_alloc_weights(yc_model *m, yc_backend *be)
{
    return model_alloc(m, be, false);
}

int yc_model_zero_grad(yc_model *m)
{
    if (!m->grad_buf)
        return yc_error_status(YC_ERR, "zeroing gradients: the model was allocated without "
                               "gradients");
    int status = m->be->iface->buffer_memset(m->be, m->grad_buf, 0, 0,
                                             m->param_elems * sizeof(float));
    return status ? yc_error_context(status, "zeroing gradients") : YC_OK;
}

int yc_model_require_detection(const yc_model *m, const char *what)
{
    return yc_model_cfg_require_detection(m->cfg, what);
}

/* ---- initialisation ---------------------------------------------------------------------- */

/* Level of a Detect parameter "model.<d>.m.<l>.weight|bias", or -1. */
static int detect_level(const yc_model *m, const yc_param *p)
{
    if (p->layer != m->detect_layer)
        return -1;
    const char *s = strstr(p->name, ".m.");
    return s ? atoi(s + 3) : -1;
}

/* Whether p is Classify's Linear bias (initialised like its weight, as nn.Linear does). */
static bool linear_bias(const yc_model *m, const yc_param *p)
{
    return m->cfg->layers[p->layer].module == YC_MOD_CLASSIFY && p->group == YC_PG_BIAS &&
           strstr(p->name, ".linear.") != NULL;
}

int yc_model_init_weights(yc_model *m, uint64_t seed)
{
    float *host = yc_malloc(m->param_elems * sizeof *host, "initial weights");
    float *st = yc_malloc((m->state_elems ? m->state_elems : 1) * sizeof *st, "initial state");
    if (!host || !st) {
        free(host);
        free(st);
        return YC_ENOMEM;
    }
    for (int i = 0; i < m->nparams; i++) {
        const yc_param *p = &m->params[i];
        float *w = host + p->offset;
        yc_rng rng;
        yc_rng_seed(&rng, seed, (uint64_t)i + 1);
        if (p->group == YC_PG_BN_WEIGHT) {
            for (size_t j = 0; j < p->numel; j++)
                w[j] = 1.0f;
        } else if (p->group == YC_PG_BIAS && detect_level(m, p) < 0 && !linear_bias(m, p)) {
            memset(w, 0, p->numel * sizeof *w);
        } else {
            /* kaiming_uniform(a=sqrt(5)) and PyTorch's default bias: U(-1/sqrt(fan_in), ..) */
            const yc_param *wp = p->group == YC_PG_BIAS ? p - 1 : p;
            double fan_in = (double)wp->shape[1] * wp->shape[2] * wp->shape[3];
            double bound = 1.0 / sqrt(fan_in);
            for (size_t j = 0; j < p->numel; j++)
                w[j] = (float)yc_rng_range(&rng, -bound, bound);
        }
        int l = detect_level(m, p);
        if (p->group == YC_PG_BIAS && l >= 0) {
            /* _initialize_biases: 8 objects per 640 image, classes 0.6 / (nc - 0.99999) */
            double s = m->stride[l];
            for (int a = 0; a < m->na; a++) {
                w[a * m->no + 4] += (float)log(8.0 / ((640.0 / s) * (640.0 / s)));
                for (int c = 0; c < m->nc; c++)
                    w[a * m->no + 5 + c] += (float)log(0.6 / (m->nc - 0.99999));
            }
        }
    }
    for (int i = 0; i < m->nstate; i++) {
        const yc_state *s = &m->state[i];
        if (s->kind == YC_STATE_NUM_BATCHES)
            m->num_batches[s->offset] = 0;
        else
            for (int j = 0; j < s->numel; j++)
                st[s->offset + (size_t)j] = s->kind == YC_STATE_RUNNING_VAR ? 1.0f : 0.0f;
    }
    int status = m->be->iface->buffer_write(m->be, m->param_buf, 0, host,
                                            m->param_elems * sizeof *host);
    if (!status && m->state_elems)
        status = m->be->iface->buffer_write(m->be, m->state_buf, 0, st,
                                            m->state_elems * sizeof *st);
    free(host);
    free(st);
    return status;
}

/* ---- loading ------------------------------------------------------------------------------- */

static int check_shape(const yc_st_tensor *t, int ndim, const int *shape, const char *path)
{
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == shape[i];
    if (ok)
        return YC_OK;
    char have[128] = "", want[128] = "";
    for (int i = 0; i < t->ndim && i < YC_ST_MAX_DIMS; i++) {
        size_t u = strlen(have);
        snprintf(have + u, sizeof have - u, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    }
    for (int i = 0; i < ndim; i++) {
        size_t u = strlen(want);
        snprintf(want + u, sizeof want - u, "%s%d", i ? ", " : "", shape[i]);
    }
    return yc_error_status(YC_EFORMAT, "%s: %s has shape [%s], the model needs [%s]", path,
                           t->name, have, want);
}

int yc_model_load(yc_model *m, const char *path)
{
    yc_st_file *f = NULL;
    int status = yc_st_open(&f, path);
    if (status)
        return status;
    float *buf = NULL;
    size_t cap = 0;
    for (int i = 0; i < m->nparams + m->nstate && !status; i++) {
        bool is_state = i >= m->nparams;
        const char *name = is_state ? m->state[i - m->nparams].name : m->params[i].name;
        const yc_st_tensor *t = yc_st_find(f, name);
        if (is_state && m->state[i - m->nparams].kind == YC_STATE_NUM_BATCHES) {
            if (t) {
                float v;
                if ((status = check_shape(t, 0, NULL, path)) ||
                    (status = yc_st_read_f32(f, t, &v, 1)))
                    break;
                m->num_batches[m->state[i - m->nparams].offset] = (int64_t)v;
            }
            continue;
        }
        if (!t) {
            status = yc_error_status(YC_EFORMAT, "%s has no tensor %s (is it a weights file for "
                                     "this model and class count?)", path, name);
            break;
        }
        size_t numel;
        const yc_tensor *dst;
        if (is_state) {
            const yc_state *s = &m->state[i - m->nparams];
            status = check_shape(t, 1, &s->numel, path);
            numel = (size_t)s->numel;
            dst = &s->t;
        } else {
            const yc_param *p = &m->params[i];
            status = check_shape(t, p->ndim, p->shape, path);
            numel = p->numel;
            dst = &p->t;
        }
        if (status)
            break;
        if (numel > cap) {
            float *nb = yc_realloc(buf, numel * sizeof *buf, "weights");
            if (!nb) {
                status = YC_ENOMEM;
                break;
            }
            buf = nb;
            cap = numel;
        }
        if ((status = yc_st_read_f32(f, t, buf, numel)))
            break;
        status = yc_tensor_set_f32(m->be, dst, buf);
    }
    const yc_st_tensor *an = status ? NULL : yc_st_find(f, m->anchors_name);
    if (an) {
        int shape[3] = {m->nl, m->na, 2};
        if (!(status = check_shape(an, 3, shape, path)))
            status = yc_st_read_f32(f, an, m->anchors, (size_t)m->nl * m->na * 2);
    }
    free(buf);
    yc_st_close(f);
    return status;
}

/* ---- counts ------------------------------------------------------------------------------- */

size_t yc_model_count_params(const yc_model *m)
{
    return m->param_elems;
}

size_t yc_model_layer_params(const yc_model *m, int layer)
{
    size_t n = 0;
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].layer == layer)
            n += m->params[i].numel;
    return n;
}


/* Modules of one instance of a layer's module, as torch's model.modules() counts them (the SiLU
 * every Conv shares is counted once, by the caller). */
static int modules_of(const yc_layer_cfg *l, int nl)
{
    const int conv = 3; /* Conv, Conv2d, BatchNorm2d */
    const int bottleneck = 1 + 2 * conv;
    switch (l->module) {
    case YC_MOD_CONV:
        return conv;
    case YC_MOD_BOTTLENECK:
        return bottleneck;
    case YC_MOD_C3:
        return 1 + 3 * conv + 1 + l->n * bottleneck;
    case YC_MOD_SPPF:
        return 1 + 2 * conv + 1;
    case YC_MOD_SPP:
        return 1 + 2 * conv + 1 + l->npool;
    case YC_MOD_UPSAMPLE:
    case YC_MOD_CONCAT:
        return 1;
    case YC_MOD_DETECT:
        /* Detect, its ModuleList, the convs; Segment's Proto, its three Convs and Upsample */
        return 1 + 1 + nl + (l->nm ? 1 + 3 * conv + 1 : 0);
    case YC_MOD_CLASSIFY:
        return 1 + conv + 3; /* Classify, its Conv, pool, dropout, Linear */
    }
    return 0;
}

int yc_model_count_modules(const yc_model *m)
{
    int n = 2; /* Model, and its nn.Sequential */
    bool has_conv = false;
    for (int i = 0; i < m->cfg->nlayers; i++) {
        const yc_layer_cfg *l = &m->cfg->layers[i];
        int one = modules_of(l, m->nl);
        n += l->repeats > 1 ? 1 + l->repeats * one : one;
        has_conv |= l->module != YC_MOD_UPSAMPLE && l->module != YC_MOD_CONCAT &&
                    l->module != YC_MOD_DETECT;
    }
    return n + (has_conv ? 1 : 0);
}
