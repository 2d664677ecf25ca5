/* One training step of a classifier (classify_step.h). */
#include "classify_step.h"

#include <math.h>
#include <stdlib.h>

#include "log.h"
#include "xent.h"

int yc_classify_step_new(yc_classify_step **out, yc_model *m, int batch, int img,
                         double label_smoothing, const yc_graph_options *go)
{
    *out = NULL;
    if (m->cfg->task != YC_TASK_CLASSIFY)
        return yc_error_status(YC_EFORMAT, "%s is not a classifier (its last layer is not "
                               "Classify)", m->cfg->name);
    yc_classify_step *s = yc_calloc(1, sizeof *s, "classifier step");
    if (!s)
        return YC_ENOMEM;
    s->m = m;
    s->batch = batch;
    s->img = img;
    s->nc = m->nc;
    s->label_smoothing = label_smoothing;
    s->grad_scale = 1.0f;
    yc_graph_options opt = go ? *go : (yc_graph_options){.mode = YC_GRAPH_TRAIN};
    opt.mode = YC_GRAPH_TRAIN;
    int status = yc_graph_new_opts(&s->g, m, batch, img, img, &opt);
    if (!status)
        status = yc_graph_alloc(s->g);
    if (!status) {
        s->logits = yc_malloc((size_t)batch * s->nc * sizeof *s->logits, "logits");
        s->grad = yc_malloc((size_t)batch * s->nc * sizeof *s->grad, "logit gradients");
        if (!s->logits || !s->grad)
            status = YC_ENOMEM;
    }
    if (status) {
        yc_classify_step_free(s);
        return status;
    }
    *out = s;
    return YC_OK;
}

void yc_classify_step_free(yc_classify_step *s)
{
    if (!s)
        return;
    yc_graph_free(s->g);
    free(s->logits);
    free(s->grad);
    free(s);
}

int yc_classify_step_run(yc_classify_step *s, const float *images, const int *labels,
                         double *loss)
{
    yc_backend *be = s->m->be;
    int st;
    if ((st = yc_tensor_set_f32(be, yc_graph_input(s->g), images)) ||
        (st = yc_graph_forward(s->g)) ||
        (st = yc_tensor_get_f32(be, yc_graph_head(s->g, 0), s->logits)))
        return st;
    double l = yc_xent_loss(s->logits, labels, s->batch, s->nc, s->label_smoothing, s->grad);
    if (isnan(l))
        return yc_error_status(YC_EFORMAT, "a label of the batch is outside 0..%d", s->nc - 1);
    if (s->grad_scale != 1.0f)
        for (size_t i = 0; i < (size_t)s->batch * s->nc; i++)
            s->grad[i] *= s->grad_scale;
    if ((st = yc_tensor_set_f32(be, yc_graph_head_grad(s->g, 0), s->grad)) ||
        (st = yc_graph_backward(s->g)) || (st = be->iface->synchronize(be)))
        return st;
    *loss = l;
    return YC_OK;
}
