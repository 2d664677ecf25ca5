/* The optimizer (see optim.h). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

int yc_optim_kind_parse(const char *s, yc_optim_kind *out)
{
    if (strcasecmp(s, "SGD") == 0)
        *out = YC_OPTIM_SGD;
    else if (strcasecmp(s, "Adam") == 0)
        *out = YC_OPTIM_ADAM;
    else if (strcasecmp(s, "AdamW") == 0)
        *out = YC_OPTIM_ADAMW;
    else
        return yc_error_status(YC_EUSAGE, "unknown optimizer '%s' (SGD, Adam or AdamW)", s);
    return YC_OK;
}

const char *yc_optim_kind_name(yc_optim_kind k)
{
    return k == YC_OPTIM_SGD ? "SGD" : k == YC_OPTIM_ADAM ? "Adam" : "AdamW";
}

/* Trainable ranges: consecutive unfrozen parameters of one group merge into one range. */
static int build_ranges(yc_optim *o, const bool *frozen)
{
    yc_model *m = o->m;
    o->ranges = yc_calloc((size_t)m->nparams, sizeof *o->ranges, "optimizer");
    if (!o->ranges)
        return YC_ENOMEM;
    /* parameters sorted by offset: the arena order */
    int *order = yc_malloc((size_t)m->nparams * sizeof *order, "optimizer");
    if (!order)
        return YC_ENOMEM;
    for (int i = 0; i < m->nparams; i++)
        order[i] = i;
    for (int i = 1; i < m->nparams; i++) {
        int v = order[i], j = i - 1;
        while (j >= 0 && m->params[order[j]].offset > m->params[v].offset) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = v;
    }
    for (int k = 0; k < m->nparams; k++) {
        const yc_param *p = &m->params[order[k]];
        if (frozen && frozen[p->layer])
            continue;
        yc_optim_range *last = o->nranges ? &o->ranges[o->nranges - 1] : NULL;
        if (last && last->group == p->group && last->offset + last->count == p->offset) {
            last->count += p->numel;
        } else {
            yc_optim_range *r = &o->ranges[o->nranges++];
            r->group = p->group;
            r->offset = p->offset;
            r->count = p->numel;
        }
    }
    free(order);
    return YC_OK;
}

int yc_optim_new(yc_optim **out, yc_model *m, yc_optim_kind kind, double lr, double momentum,
                 double weight_decay, const bool *frozen)
{
    *out = NULL;
    yc_optim *o = yc_calloc(1, sizeof *o, "optimizer");
    if (!o)
        return YC_ENOMEM;
    o->kind = kind;
    o->m = m;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    for (int g = 0; g < YC_PG_COUNT; g++) {
        o->lr[g] = o->initial_lr[g] = lr;
        o->momentum[g] = momentum;
        o->wd[g] = g == YC_PG_WEIGHT ? weight_decay : 0.0;
    }
    size_t bytes = m->param_elems * sizeof(float);
    int status = build_ranges(o, frozen);
    if (!status && !(o->buf1 = yc_buffer_alloc(m->be, bytes)))
        status = yc_error_context(YC_ENOMEM, "optimizer state");
    if (!status && kind != YC_OPTIM_SGD && !(o->buf2 = yc_buffer_alloc(m->be, bytes)))
        status = yc_error_context(YC_ENOMEM, "optimizer state");
    if (!status && !(o->norm_buf = yc_buffer_alloc(m->be, sizeof(float))))
        status = yc_error_context(YC_ENOMEM, "optimizer state");
    if (!status)
        status = yc_optim_reset_state(o);
    if (status) {
        yc_optim_free(o);
        return status;
    }
    int count[YC_PG_COUNT] = {0};
    for (int i = 0; i < m->nparams; i++)
        if (!(frozen && frozen[m->params[i].layer]))
            count[m->params[i].group]++;
    yc_info("optimizer: %s(lr=%g) with parameter groups %d weight(decay=0.0), %d weight(decay=%g), "
            "%d bias\n", yc_optim_kind_name(kind), lr, count[YC_PG_BN_WEIGHT], count[YC_PG_WEIGHT],
            weight_decay, count[YC_PG_BIAS]);
    *out = o;
    return YC_OK;
}

void yc_optim_free(yc_optim *o)
{
    if (!o)
        return;
    /* the device may still be writing the norm into o (a failure after yc_optim_step) */
    if (o->norm_pending)
        o->m->be->iface->synchronize(o->m->be);
    yc_buffer_free(o->m->be, o->buf1);
    yc_buffer_free(o->m->be, o->buf2);
    yc_buffer_free(o->m->be, o->norm_buf);
    free(o->ranges);
    free(o);
}

int yc_optim_reset_state(yc_optim *o)
{
    yc_backend *be = o->m->be;
    size_t bytes = o->m->param_elems * sizeof(float);
    int status = be->iface->buffer_memset(be, o->buf1, 0, 0, bytes);
    if (!status && o->buf2)
        status = be->iface->buffer_memset(be, o->buf2, 0, 0, bytes);
    o->steps = 0;
    return status;
}

/* A flat (1, count, 1, 1) view of `count` floats at element `offset` of buf. */
static yc_tensor flat(yc_buffer *buf, size_t offset, size_t count)
{
    yc_tensor t = yc_tensor_make(1, (int)count, 1, 1, YC_F32, NULL);
    t.buf = buf;
    t.offset = offset * sizeof(float);
    return t;
}

int yc_optim_step(yc_optim *o, double max_norm)
{
    yc_model *m = o->m;
    yc_backend *be = m->be;
    yc_span none = {0};
    int status = be->iface->buffer_memset(be, o->norm_buf, 0, 0, sizeof(float));
    yc_tensor norm = flat(o->norm_buf, 0, 1);
    for (int r = 0; r < o->nranges && !status; r++) {
        yc_tensor g = flat(m->grad_buf, o->ranges[r].offset, o->ranges[r].count);
        yc_op op = {.kind = YC_OP_SUMSQ, .src = {&g}, .dst = {&norm}, .accumulate = 1,
                    .name = "grad norm"};
        status = yc_backend_exec(be, &op, none);
    }
    if (status)
        return yc_error_context(status, "gradient norm");
    o->steps++;
    for (int r = 0; r < o->nranges && !status; r++) {
        const yc_optim_range *rg = &o->ranges[r];
        int g = rg->group;
        yc_tensor w = flat(m->param_buf, rg->offset, rg->count);
        yc_tensor gr = flat(m->grad_buf, rg->offset, rg->count);
        yc_tensor b1 = flat(o->buf1, rg->offset, rg->count);
        /* the clipping coefficient is computed on the device from the sum of squares */
        yc_op op = {.src = {&gr, &norm}, .name = "optimizer"};
        if (o->kind == YC_OPTIM_SGD) {
            op.kind = YC_OP_SGD;
            op.dst[0] = &w;
            op.dst[1] = &b1;
            op.p.sgd.lr = (float)o->lr[g];
            op.p.sgd.momentum = (float)o->momentum[g];
            op.p.sgd.wd = (float)o->wd[g];
            op.p.sgd.scale = 1.0f;
            op.p.sgd.max_norm = (float)max_norm;
            op.p.sgd.nesterov = 1;
            status = yc_backend_exec(be, &op, none);
        } else {
            yc_tensor b2 = flat(o->buf2, rg->offset, rg->count);
            op.kind = YC_OP_ADAM;
            op.dst[0] = &w;
            op.dst[1] = &b1;
            op.dst[2] = &b2;
            op.p.adam.lr = (float)o->lr[g];
            op.p.adam.beta1 = (float)o->momentum[g];
            op.p.adam.beta2 = (float)o->beta2;
            op.p.adam.eps = (float)o->eps;
            op.p.adam.wd = (float)o->wd[g];
            op.p.adam.scale = 1.0f;
            op.p.adam.max_norm = (float)max_norm;
            op.p.adam.step = (int)o->steps;
            op.p.adam.decoupled = o->kind == YC_OPTIM_ADAMW;
            status = yc_backend_exec(be, &op, none);
        }
    }
    if (!status)
        status = be->iface->buffer_read_async(be, o->norm_buf, 0, &o->norm_host, sizeof o->norm_host);
    o->norm_pending = status == YC_OK;
    return status ? yc_error_context(status, "optimizer step") : YC_OK;
}

int yc_optim_step_done(yc_optim *o)
{
    o->norm_pending = false;
    o->last_grad_norm = sqrt((double)o->norm_host);
    if (!isfinite(o->last_grad_norm))
        return yc_error_status(YC_ERR, "the gradients are not finite (norm %g): the optimizer "
                               "step left the weights as they were", o->last_grad_norm);
    return YC_OK;
}

double yc_lr_factor(int epoch, int epochs, double lrf, bool cos_lr)
{
    if (cos_lr)
        return ((1.0 - cos(epoch * M_PI / epochs)) / 2.0) * (lrf - 1.0) + 1.0;
    return (1.0 - (double)epoch / epochs) * (1.0 - lrf) + lrf;
}

double yc_np_interp(double x, double x0, double x1, double y0, double y1)
{
    if (x <= x0)
        return y0;
    if (x >= x1)
        return y1;
    return y0 + (x - x0) * (y1 - y0) / (x1 - x0);
}

double yc_round_half_even(double x)
{
    double r = floor(x + 0.5);
    if (r - x == 0.5 && fmod(r, 2.0) != 0.0)
        r -= 1.0;
    return r;
}

int yc_optim_warmup(yc_optim *o, long ni, long nw, double lf, double warmup_bias_lr,
                    double warmup_momentum, double momentum, double target)
{
    double xi = (double)ni, x1 = (double)nw;
    double acc = yc_round_half_even(yc_np_interp(xi, 0, x1, 1.0, target));
    for (int g = 0; g < YC_PG_COUNT; g++) {
        double start = g == YC_PG_BIAS ? warmup_bias_lr : 0.0;
        o->lr[g] = yc_np_interp(xi, 0, x1, start, o->initial_lr[g] * lf);
        if (o->kind == YC_OPTIM_SGD)
            o->momentum[g] = yc_np_interp(xi, 0, x1, warmup_momentum, momentum);
    }
    return acc < 1 ? 1 : (int)acc;
}

void yc_optim_set_lf(yc_optim *o, double lf)
{
    for (int g = 0; g < YC_PG_COUNT; g++)
        o->lr[g] = o->initial_lr[g] * lf;
}
