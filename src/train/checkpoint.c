/* Training checkpoints (see checkpoint.h). */
#include "checkpoint.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "log.h"
#include "safetensors.h"
#include "util.h"

void yc_ckpt_meta_free(yc_ckpt_meta *meta)
{
    free(meta->names_json);
    free(meta->opt_json);
    free(meta->hyp_json);
    free(meta->cwd);
    memset(meta, 0, sizeof *meta);
}

/* A host view of a model's parameter and state arenas: the buffers themselves where the device
 * shares host memory (nothing copied, nothing allocated), else copies. */
typedef struct host_model {
    float *params, *state;
    bool owned;
} host_model;

/* Host address of a whole buffer, or NULL when the device does not share host memory. */
static float *host_ptr(yc_backend *be, yc_buffer *buf)
{
    return be->iface->buffer_host_ptr && buf ? be->iface->buffer_host_ptr(be, buf) : NULL;
}

static int read_model(const yc_model *m, host_model *h)
{
    yc_backend *be = m->be;
    h->params = host_ptr(be, m->param_buf);
    h->state = host_ptr(be, m->state_buf);
    if (h->params && (h->state || !m->state_elems))
        return YC_OK;
    h->owned = true;
    h->params = yc_malloc(m->param_elems * sizeof(float), "checkpoint");
    h->state = yc_malloc((m->state_elems + 1) * sizeof(float), "checkpoint");
    if (!h->params || !h->state)
        return YC_ENOMEM;
    int st = be->iface->buffer_read(be, m->param_buf, 0, h->params, m->param_elems * sizeof(float));
    if (!st && m->state_elems)
        st = be->iface->buffer_read(be, m->state_buf, 0, h->state,
                                    m->state_elems * sizeof(float));
    return st;
}

static void free_host(host_model *h)
{
    if (h->owned) {
        free(h->params);
        free(h->state);
    }
    memset(h, 0, sizeof *h);
}

/* A checkpoint never holds weights that are not finite: it would replace the last good one
 * with a model that cannot be trained further or used.  Checks the parameters and the BN
 * statistics of a host view. */
static int check_finite(const yc_model *m, const host_model *h, const char *which)
{
    for (int i = 0; i < m->nparams; i++) {
        const yc_param *p = &m->params[i];
        const float *v = h->params + p->offset;
        for (size_t k = 0; k < p->numel; k++)
            if (!isfinite(v[k]))
                return yc_error_status(YC_ERR, "the %s tensor %s holds %g: weights that are not "
                                       "finite are not saved", which, p->name, v[k]);
    }
    for (int i = 0; i < m->nstate; i++) {
        const yc_state *s = &m->state[i];
        if (s->kind == YC_STATE_NUM_BATCHES)
            continue;
        const float *v = h->state + s->offset;
        for (int k = 0; k < s->numel; k++)
            if (!isfinite(v[k]))
                return yc_error_status(YC_ERR, "the %s tensor %s holds %g: weights that are not "
                                       "finite are not saved", which, s->name, v[k]);
    }
    return YC_OK;
}

/* Names live until the write: one pool sized exactly for them. */
typedef struct name_pool {
    char *buf;
    size_t used, cap;
} name_pool;

static const char *pool_name(name_pool *p, const char *prefix, const char *name)
{
    size_t n = strlen(prefix) + strlen(name) + 1;
    if (p->used + n > p->cap)
        return NULL;
    char *slot = p->buf + p->used;
    snprintf(slot, n, "%s%s", prefix, name);
    p->used += n;
    return slot;
}

/* Bytes of every name a checkpoint of these models holds (prefixes included): the EMA's state
 * dict and `copies` more (the raw model, optimizer buffers, gradients). */
static size_t names_bytes(const yc_model *m, int copies)
{
    size_t one = 0;
    for (int i = 0; i < m->nparams; i++)
        one += strlen(m->params[i].name) + 1;
    for (int i = 0; i < m->nstate; i++)
        one += strlen(m->state[i].name) + 1;
    one += strlen(m->anchors_name) + 1;
    size_t prefixes = (size_t)(m->nparams + m->nstate + 1) * 64;
    return (size_t)(1 + copies) * (one + prefixes);
}

/* Adds a model's state dict (YOLOv5 order) under `prefix`. */
static int add_state_dict(yc_st_writer *w, name_pool *np, const char *prefix, const yc_model *m,
                          const host_model *h)
{
    int st = YC_OK;
    for (int i = 0; i < m->ndict && !st; i++) {
        int64_t shape[4];
        const char *name;
        if (!m->dict[i].is_state) {
            const yc_param *p = &m->params[m->dict[i].idx];
            for (int d = 0; d < p->ndim; d++)
                shape[d] = p->shape[d];
            if (!(name = pool_name(np, prefix, p->name)))
                return YC_ENOMEM;
            st = yc_st_writer_add(w, name, YC_ST_F32, p->ndim, shape, h->params + p->offset);
            continue;
        }
        const yc_state *s = &m->state[m->dict[i].idx];
        if (!(name = pool_name(np, prefix, s->name)))
            return YC_ENOMEM;
        if (s->kind == YC_STATE_NUM_BATCHES) {
            st = yc_st_writer_add(w, name, YC_ST_I64, 0, NULL, &m->num_batches[s->offset]);
        } else {
            shape[0] = s->numel;
            st = yc_st_writer_add(w, name, YC_ST_F32, 1, shape, h->state + s->offset);
        }
    }
    /* a classifier has no Detect layer and so no anchors */
    if (st || m->nl == 0)
        return st;
    int64_t ashape[3] = {m->nl, m->na, 2};
    const char *name = pool_name(np, prefix, m->anchors_name);
    if (!name)
        return YC_ENOMEM;
    return yc_st_writer_add(w, name, YC_ST_F32, 3, ashape, m->anchors);
}

/* Adds one value per parameter element (optimizer buffers, gradients: `v` laid out as the
 * parameter arena) under `prefix` + the parameter's name. */
static int add_per_param(yc_st_writer *w, name_pool *np, const char *prefix, const yc_model *m,
                         const float *v)
{
    int st = YC_OK;
    for (int i = 0; i < m->nparams && !st; i++) {
        const yc_param *p = &m->params[i];
        int64_t shape[4];
        for (int d = 0; d < p->ndim; d++)
            shape[d] = p->shape[d];
        const char *name = pool_name(np, prefix, p->name);
        if (!name)
            return YC_ENOMEM;
        st = yc_st_writer_add(w, name, YC_ST_F32, p->ndim, shape, v + p->offset);
    }
    return st;
}

static int add_optim(yc_st_writer *w, name_pool *np, const yc_optim *o, const float *b1,
                     const float *b2)
{
    int st = add_per_param(w, np, o->kind == YC_OPTIM_SGD ? "resume.optim.momentum_buffer."
                                                          : "resume.optim.exp_avg.",
                           o->m, b1);
    if (!st && b2)
        st = add_per_param(w, np, "resume.optim.exp_avg_sq.", o->m, b2);
    return st;
}

static char *stride_json(const yc_model *m)
{
    char buf[256] = "[";
    for (int l = 0; l < m->nl; l++) {
        size_t u = strlen(buf);
        snprintf(buf + u, sizeof buf - u, "%s%g", l ? ", " : "", m->stride[l]);
    }
    strcat(buf, "]");
    return yc_strdup(buf, "checkpoint");
}

int yc_checkpoint_save(const char *path, const yc_model *ema, const yc_model *model,
                       const yc_optim *optim, const yc_ckpt_meta *meta)
{
    host_model he = {0}, hm = {0};
    float *b1 = NULL, *b2 = NULL;
    name_pool np = {0};
    char *stride = NULL;
    yc_st_writer *w = yc_st_writer_new();
    bool grads = model && meta->grads && model->grad_buf;
    np.cap = names_bytes(ema, (model ? 1 : 0) + (optim ? (optim->buf2 ? 2 : 1) : 0) + grads);
    np.buf = yc_malloc(np.cap, "checkpoint");
    int st = w && np.buf ? YC_OK : YC_ENOMEM;
    if (!st)
        st = read_model(ema, &he);
    if (!st)
        st = check_finite(ema, &he, "EMA");
    if (!st)
        st = add_state_dict(w, &np, "", ema, &he);
    if (!st && model) {
        st = read_model(model, &hm);
        if (!st)
            st = check_finite(model, &hm, "model");
        if (!st)
            st = add_state_dict(w, &np, "resume.model.", model, &hm);
    }
    bool own_b = false;
    if (!st && optim) {
        yc_backend *be = optim->m->be;
        size_t bytes = optim->m->param_elems * sizeof(float);
        b1 = host_ptr(be, optim->buf1);
        b2 = optim->buf2 ? host_ptr(be, optim->buf2) : NULL;
        if (!b1 || (optim->buf2 && !b2)) {
            own_b = true;
            b1 = yc_malloc(bytes, "checkpoint");
            b2 = optim->buf2 ? yc_malloc(bytes, "checkpoint") : NULL;
            if (!b1 || (optim->buf2 && !b2))
                st = YC_ENOMEM;
            if (!st)
                st = be->iface->buffer_read(be, optim->buf1, 0, b1, bytes);
            if (!st && b2)
                st = be->iface->buffer_read(be, optim->buf2, 0, b2, bytes);
        }
        if (!st)
            st = add_optim(w, &np, optim, b1, b2);
    }
    float *g = NULL;
    bool own_g = false;
    if (!st && grads) {
        /* the gradients of the batches since the last optimizer step */
        yc_backend *be = model->be;
        if (!(g = host_ptr(be, model->grad_buf))) {
            own_g = true;
            if (!(g = yc_malloc(model->param_elems * sizeof *g + 1, "checkpoint")))
                st = YC_ENOMEM;
            else
                st = be->iface->buffer_read(be, model->grad_buf, 0, g,
                                            model->param_elems * sizeof *g);
        }
        if (!st)
            st = add_per_param(w, &np, "resume.grad.", model, g);
    }
    char num[64], date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", localtime(&now));
    if (!st && !(stride = stride_json(ema)))
        st = YC_ENOMEM;
    const char *model_name = yc_path_basename(ema->cfg->path);
#define META(k, v)                                                                                 \
    do {                                                                                           \
        const char *value_ = (v);                                                                  \
        if (!st && value_)                                                                         \
            st = yc_st_writer_meta(w, k, value_);                                                  \
    } while (0)
    META("format", "yolocl-1");
    META("model_yaml", ema->cfg->text);
    META("model_name", model_name);
    snprintf(num, sizeof num, "%d", ema->nc);
    META("nc", num);
    META("names", meta->names_json);
    META("stride", stride);
    snprintf(num, sizeof num, "%d", meta->epoch);
    META("epoch", num);
    snprintf(num, sizeof num, "%d", meta->next_batch);
    META("next_batch", num);
    snprintf(num, sizeof num, "%.17g", meta->best_fitness);
    META("best_fitness", num);
    snprintf(num, sizeof num, "%ld", meta->updates);
    META("updates", num);
    snprintf(num, sizeof num, "%ld", meta->last_opt_step);
    META("last_opt_step", num);
    if (optim) {
        META("optimizer", yc_optim_kind_name(optim->kind));
        snprintf(num, sizeof num, "%ld", optim->steps);
        META("optimizer_steps", num);
    }
    META("opt", meta->opt_json);
    META("hyp", meta->hyp_json);
    META("cwd", meta->cwd);
    if (meta->epoch_batches > 0) {
        char losses[160];
        if (meta->epoch_nloss == 4)
            snprintf(losses, sizeof losses, "[%.17g, %.17g, %.17g, %.17g]", meta->epoch_loss[0],
                     meta->epoch_loss[1], meta->epoch_loss[2], meta->epoch_loss[3]);
        else
            snprintf(losses, sizeof losses, "[%.17g, %.17g, %.17g]", meta->epoch_loss[0],
                     meta->epoch_loss[1], meta->epoch_loss[2]);
        META("epoch_loss", losses);
        snprintf(num, sizeof num, "%d", meta->epoch_batches);
        META("epoch_batches", num);
    }
    if (grads)
        META("grads", "1");
    META("date", date);
#undef META
    if (!st)
        st = yc_st_writer_write(w, path);
    yc_st_writer_free(w);
    free_host(&he);
    free_host(&hm);
    if (own_g)
        free(g);
    if (own_b) {
        free(b1);
        free(b2);
    }
    free(np.buf);
    free(stride);
    return st ? yc_error_context(st, "saving checkpoint %s", path) : YC_OK;
}

static char *meta_dup(const yc_st_file *f, const char *key)
{
    const char *v = yc_st_meta(f, key);
    return v ? yc_strdup(v, "checkpoint") : NULL;
}

/* Integer metadata `key` in [lo, hi] (the whole value, in decimal); `def` when absent. */
static int meta_long(const yc_st_file *f, const char *path, const char *key, long lo, long hi,
                     long def, long *out)
{
    const char *v = yc_st_meta(f, key);
    *out = def;
    if (!v)
        return YC_OK;
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno == ERANGE || x < lo || x > hi)
        return yc_error_status(YC_EFORMAT, "%s: checkpoint metadata '%s' is '%.40s', not an "
                               "integer from %ld to %ld", path, key, v, lo, hi);
    *out = x;
    return YC_OK;
}

int yc_checkpoint_model_cfg(const char *path, int nc_override, yc_model_cfg **cfg)
{
    *cfg = NULL;
    yc_st_file *f = NULL;
    int st = yc_st_open(&f, path);
    if (st)
        return st;
    const char *text = yc_st_meta(f, "model_yaml"), *name = yc_st_meta(f, "model_name");
    if (!text)
        st = yc_error_status(YC_EFORMAT, "%s holds no model config (no model_yaml metadata)", path);
    else if ((st = yc_model_cfg_parse(cfg, text, strlen(text), name ? name : path, nc_override)))
        st = yc_error_context(st, "%s: embedded model config", path);
    yc_st_close(f);
    return st;
}

int yc_checkpoint_read_meta(const char *path, yc_ckpt_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    yc_st_file *f = NULL;
    int st = yc_st_open(&f, path);
    if (st)
        return st;
    const char *format = yc_st_meta(f, "format");
    if (!format || strcmp(format, "yolocl-1") != 0) {
        yc_st_close(f);
        return yc_error_status(YC_EFORMAT, "%s is not a yolocl checkpoint (no format yolocl-1)",
                               path);
    }
    long epoch, next_batch, epoch_batches;
    if ((st = meta_long(f, path, "epoch", -1, INT_MAX - 1, -1, &epoch)) ||
        (st = meta_long(f, path, "next_batch", 0, INT_MAX, 0, &next_batch)) ||
        (st = meta_long(f, path, "epoch_batches", 0, INT_MAX, 0, &epoch_batches)) ||
        (st = meta_long(f, path, "updates", 0, LONG_MAX, 0, &meta->updates)) ||
        (st = meta_long(f, path, "last_opt_step", -1, LONG_MAX, -1, &meta->last_opt_step)) ||
        (st = meta_long(f, path, "optimizer_steps", 0, LONG_MAX, 0, &meta->optim_steps))) {
        yc_st_close(f);
        return st;
    }
    meta->epoch = (int)epoch;
    meta->next_batch = (int)next_batch;
    meta->epoch_batches = (int)epoch_batches;
    const char *v = yc_st_meta(f, "epoch_loss");
    /* three numbers (detection) or four (segmentation), nothing after the bracket */
    int used = 0;
    double *el = meta->epoch_loss;
    if (v && sscanf(v, " [%lf , %lf , %lf , %lf ]%n", &el[0], &el[1], &el[2], &el[3], &used) == 4 &&
        used > 0 && !v[used])
        meta->epoch_nloss = 4;
    else if (v && (used = 0, sscanf(v, " [%lf , %lf , %lf ]%n", &el[0], &el[1], &el[2],
                                    &used)) == 3 && used > 0 && !v[used])
        meta->epoch_nloss = 3;
    if (epoch_batches > 0 &&
        (!meta->epoch_nloss || !isfinite(el[0] + el[1] + el[2] +
                                         (meta->epoch_nloss == 4 ? el[3] : 0.0)))) {
        st = yc_error_status(YC_EFORMAT, "%s: checkpoint metadata 'epoch_loss' is '%.60s', not "
                             "three finite numbers [box, obj, cls] (four for a segmentation "
                             "model: [box, seg, obj, cls])", path, v ? v : "(missing)");
        yc_st_close(f);
        return st;
    }
    v = yc_st_meta(f, "best_fitness");
    char *end = NULL;
    meta->best_fitness = v ? strtod(v, &end) : 0.0;
    if (v && (end == v || *end)) {
        st = yc_error_status(YC_EFORMAT, "%s: checkpoint metadata 'best_fitness' is '%.40s', "
                             "not a number", path, v);
        yc_st_close(f); /* v points into f */
        return st;
    }
    snprintf(meta->optimizer, sizeof meta->optimizer, "%s",
             (v = yc_st_meta(f, "optimizer")) ? v : "");
    meta->names_json = meta_dup(f, "names");
    meta->opt_json = meta_dup(f, "opt");
    meta->hyp_json = meta_dup(f, "hyp");
    meta->cwd = meta_dup(f, "cwd");
    v = yc_st_meta(f, "grads");
    meta->grads = v && strcmp(v, "1") == 0;
    bool oom = (yc_st_meta(f, "names") && !meta->names_json) ||
               (yc_st_meta(f, "opt") && !meta->opt_json) ||
               (yc_st_meta(f, "hyp") && !meta->hyp_json) || (yc_st_meta(f, "cwd") && !meta->cwd);
    yc_st_close(f);
    if (oom) {
        yc_ckpt_meta_free(meta);
        return YC_ENOMEM;
    }
    return YC_OK;
}

/* Reads tensor `prefix name` into dst (numel floats), checking its size. */
static int read_named(yc_st_file *f, const char *path, const char *prefix, const char *name,
                      float *dst, size_t numel)
{
    char full[YC_NAME_MAX + 64];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const yc_st_tensor *t = yc_st_find(f, full);
    if (!t)
        return yc_error_status(YC_EFORMAT, "%s has no tensor %s (not a resumable checkpoint of "
                               "this model?)", path, full);
    return yc_st_read_f32(f, t, dst, numel);
}

/* Loads a model's state dict stored under `prefix`. */
static int load_state_dict(yc_st_file *f, const char *path, const char *prefix, yc_model *m)
{
    host_model h = {0};
    h.params = host_ptr(m->be, m->param_buf);
    h.state = host_ptr(m->be, m->state_buf);
    if (!h.params || (!h.state && m->state_elems)) {
        h.owned = true;
        h.params = yc_malloc(m->param_elems * sizeof(float), "checkpoint");
        h.state = yc_malloc((m->state_elems + 1) * sizeof(float), "checkpoint");
    }
    int st = h.params && h.state ? YC_OK : YC_ENOMEM;
    for (int i = 0; i < m->nparams && !st; i++)
        st = read_named(f, path, prefix, m->params[i].name, h.params + m->params[i].offset,
                        m->params[i].numel);
    for (int i = 0; i < m->nstate && !st; i++) {
        const yc_state *s = &m->state[i];
        if (s->kind == YC_STATE_NUM_BATCHES) {
            float v;
            st = read_named(f, path, prefix, s->name, &v, 1);
            m->num_batches[s->offset] = (int64_t)v;
        } else {
            st = read_named(f, path, prefix, s->name, h.state + s->offset, (size_t)s->numel);
        }
    }
    if (!st && m->nl > 0)
        st = read_named(f, path, prefix, m->anchors_name, m->anchors, (size_t)m->nl * m->na * 2);
    yc_backend *be = m->be;
    if (!st && h.owned)
        st = be->iface->buffer_write(be, m->param_buf, 0, h.params, m->param_elems * sizeof(float));
    if (!st && h.owned && m->state_elems)
        st = be->iface->buffer_write(be, m->state_buf, 0, h.state, m->state_elems * sizeof(float));
    free_host(&h);
    return st;
}

/* Reads one tensor per parameter, `prefix` + its name, into `buf` (laid out as the parameter
 * arena). */
static int load_per_param(yc_st_file *f, const char *path, const char *prefix, yc_model *m,
                          yc_buffer *buf)
{
    float *b = yc_calloc(m->param_elems + 1, sizeof *b, "checkpoint");
    if (!b)
        return YC_ENOMEM;
    int st = YC_OK;
    for (int i = 0; i < m->nparams && !st; i++)
        st = read_named(f, path, prefix, m->params[i].name, b + m->params[i].offset,
                        m->params[i].numel);
    if (!st)
        st = m->be->iface->buffer_write(m->be, buf, 0, b, m->param_elems * sizeof *b);
    free(b);
    return st;
}

static int load_optim(yc_st_file *f, const char *path, yc_optim *o)
{
    int st = load_per_param(f, path, o->kind == YC_OPTIM_SGD ? "resume.optim.momentum_buffer."
                                                             : "resume.optim.exp_avg.",
                            o->m, o->buf1);
    if (!st && o->buf2)
        st = load_per_param(f, path, "resume.optim.exp_avg_sq.", o->m, o->buf2);
    return st;
}

int yc_checkpoint_load_train_state(const char *path, yc_model *model, yc_model *ema,
                                   yc_optim *optim)
{
    yc_ckpt_meta meta;
    int st = yc_checkpoint_read_meta(path, &meta);
    if (st)
        return st;
    if (optim && strcmp(meta.optimizer, yc_optim_kind_name(optim->kind)) != 0)
        st = yc_error_status(YC_EFORMAT, "%s was trained with optimizer '%s', not %s", path,
                             meta.optimizer, yc_optim_kind_name(optim->kind));
    long steps = meta.optim_steps;
    bool grads = meta.grads;
    yc_ckpt_meta_free(&meta);
    if (st)
        return st;
    yc_st_file *f = NULL;
    if ((st = yc_st_open(&f, path)))
        return st;
    st = load_state_dict(f, path, "resume.model.", model);
    if (!st && grads)
        st = load_per_param(f, path, "resume.grad.", model, model->grad_buf);
    if (!st)
        st = load_state_dict(f, path, "", ema);
    if (!st && optim) {
        st = load_optim(f, path, optim);
        optim->steps = steps;
    }
    yc_st_close(f);
    return st ? yc_error_context(st, "resuming from %s", path) : YC_OK;
}

int yc_checkpoint_load_weights(const char *path, yc_model *m)
{
    yc_st_file *f = NULL;
    int st = yc_st_open(&f, path);
    if (st)
        return st;
    st = load_state_dict(f, path, "", m);
    yc_st_close(f);
    return st;
}
