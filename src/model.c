/* A YOLOv5 model's parameters and state (see model.h). */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
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

/* After registration: the dict entry at *cursor must be `name`; returns its index. */
static int expect_entry(yc_model *m, bool is_state, const char *name, int *cursor)
{
    if (*cursor >= m->ndict || m->dict[*cursor].is_state != is_state)
        return yc_error_status(YC_ERR, "internal: %s declared out of order", name);
    int idx = m->dict[*cursor].idx;
    const char *have = is_state ? m->state[idx].name : m->params[idx].name;
    if (strcmp(have, name) != 0)
        return yc_error_status(YC_ERR, "internal: expected %s, declared %s", have, name);
    (*cursor)++;
    return idx;
}

int yc_model_param(yc_model *m, const char *name, int ndim, const int *shape, yc_param_group group,
                   int layer, int *cursor)
{
    if (!m->registering)
        return expect_entry(m, false, name, cursor);
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
    (*cursor)++;
    return m->nparams++;
}

int yc_model_state(yc_model *m, const char *name, yc_state_kind kind, int numel, int *cursor)
{
    if (!m->registering)
        return expect_entry(m, true, name, cursor);
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
    (*cursor)++;
    return m->nstate++;
}

/* ---- construction ------------------------------------------------------------------------ */

static yc_tensor param_tensor(const yc_param *p, yc_buffer *buf)
{
    yc_tensor t = p->ndim == 4 ? yc_tensor_make(p->shape[0], p->shape[1], p->shape[2], p->shape[3],
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
    m->no = cfg->nc + 5;
    if (m->nl > YC_CFG_MAX_LEVELS || m->na > YC_CFG_MAX_ANCHORS) {
        int st = yc_error_status(YC_EFORMAT, "%s: too many levels or anchors", cfg->path);
        yc_model_free(m); /* frees cfg: the message is written first */
        return st;
    }

    /* Register parameters by building the graph once at 256x256 (YOLOv5's stride probe size);
     * the head sizes give the strides. */
    m->registering = true;
    yc_graph *g = NULL;
    int status = yc_graph_new(&g, m, 1, 256, 256, YC_GRAPH_EVAL);
    m->registering = false;
    if (status) {
        yc_error_context(status, "%s", cfg->path);
        yc_model_free(m);
        return status;
    }
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *h = yc_graph_head(g, l);
        m->stride[l] = 256.0f / (float)h->h;
    }
    yc_graph_free(g);
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

/* ---- initialisation ---------------------------------------------------------------------- */

/* Level of a Detect parameter "model.<d>.m.<l>.weight|bias", or -1. */
static int detect_level(const yc_model *m, const yc_param *p)
{
    if (p->layer != m->detect_layer)
        return -1;
    const char *s = strstr(p->name, ".m.");
    return s ? atoi(s + 3) : -1;
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
        } else if (p->group == YC_PG_BIAS && detect_level(m, p) < 0) {
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
        return 1 + 1 + nl;
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
