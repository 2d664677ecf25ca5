/* ModelEMA (see ema.h). */
#include "ema.h"

#include <math.h>
#include <stdlib.h>

#include "log.h"

int yc_ema_new(yc_ema **out, yc_model *m, long updates)
{
    *out = NULL;
    yc_ema *e = yc_calloc(1, sizeof *e, "EMA");
    if (!e)
        return YC_ENOMEM;
    e->updates = updates;
    int status = yc_model_clone(m, &e->ema);
    if (!status)
        status = yc_model_alloc_weights(e->ema, m->be);
    if (!status)
        status = yc_model_copy_weights(e->ema, m);
    if (status) {
        yc_ema_free(e);
        return yc_error_context(status, "EMA of the model");
    }
    *out = e;
    return YC_OK;
}

void yc_ema_free(yc_ema *e)
{
    if (!e)
        return;
    yc_model_free(e->ema);
    free(e);
}

double yc_ema_decay(long updates)
{
    return 0.9999 * (1.0 - exp(-(double)updates / 2000.0));
}

static int average(yc_backend *be, yc_buffer *ema, yc_buffer *model, size_t n, float d)
{
    if (n == 0)
        return YC_OK;
    yc_tensor e = yc_tensor_make(1, (int)n, 1, 1, YC_F32, "ema");
    yc_tensor x = e;
    e.buf = ema;
    x.buf = model;
    yc_op op = {.kind = YC_OP_EMA, .src = {&x}, .dst = {&e}, .name = "ema"};
    op.p.ema.decay = d;
    yc_span none = {0};
    return yc_backend_exec(be, &op, none);
}

int yc_ema_update(yc_ema *e, const yc_model *m)
{
    e->updates++;
    float d = (float)yc_ema_decay(e->updates);
    yc_backend *be = m->be;
    int status = average(be, e->ema->param_buf, m->param_buf, m->param_elems, d);
    if (!status)
        status = average(be, e->ema->state_buf, m->state_buf, m->state_elems, d);
    /* the anchors buffer is a float entry of the state dict too (it only moves when AutoAnchor
     * replaced the model's anchors after the EMA was made, as in YOLOv5) */
    for (int i = 0; i < m->nl * m->na * 2; i++)
        e->ema->anchors[i] = d * e->ema->anchors[i] + (1.0f - d) * m->anchors[i];
    return status ? yc_error_context(status, "EMA update") : YC_OK;
}
