/* One training step (see step.h). */
#include "step.h"

#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "log.h"

void yc_step_loss_params(const yc_model *m, const yc_hyp *hyp, int imgsz, float label_smoothing,
                         yc_loss_params *lp)
{
    memset(lp, 0, sizeof *lp);
    lp->nc = m->nc;
    lp->na = m->na;
    lp->nl = m->nl;
    memcpy(lp->anchors, m->anchors, (size_t)m->nl * m->na * 2 * sizeof(float));
    lp->cls_pw = (float)hyp->cls_pw;
    lp->obj_pw = (float)hyp->obj_pw;
    lp->anchor_t = (float)hyp->anchor_t;
    lp->fl_gamma = (float)hyp->fl_gamma;
    lp->label_smoothing = label_smoothing;
    yc_loss_params_gains(lp, (float)hyp->box, (float)hyp->obj, (float)hyp->cls, imgsz);
}

int yc_step_new(yc_step **out, yc_model *m, int batch, int h, int w, const yc_loss_params *lp)
{
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN};
    return yc_step_new_in(out, m, batch, h, w, lp, &go, NULL);
}

int yc_step_train_graph(yc_graph **g, yc_model *m, int batch, int h, int w,
                        const yc_graph_options *go, yc_arena *arena)
{
    yc_graph_options opt = {.mode = YC_GRAPH_TRAIN};
    if (go)
        opt = *go;
    opt.mode = YC_GRAPH_TRAIN;
    int status = yc_graph_new_opts(g, m, batch, h, w, &opt);
    if (!status)
        status = arena ? yc_graph_alloc_in(*g, arena) : yc_graph_alloc(*g);
    return status;
}

int yc_step_new_in(yc_step **out, yc_model *m, int batch, int h, int w, const yc_loss_params *lp,
                   const yc_graph_options *go, yc_arena *arena)
{
    *out = NULL;
    if (m->cfg->task != YC_TASK_DETECT)
        return yc_error_status(YC_EFORMAT, "%s is not a detection model: its training step is "
                               "not this one (classify_step.h, segment_step.h)", m->cfg->name);
    yc_step *s = yc_calloc(1, sizeof *s, "training step");
    if (!s)
        return YC_ENOMEM;
    s->m = m;
    s->batch = batch;
    s->h = h;
    s->w = w;
    int status = yc_step_train_graph(&s->g, m, batch, h, w, go, arena);
    if (!status && !(s->loss = yc_loss_new(lp)))
        status = YC_ENOMEM;
    /* host copies of the heads only where the loss runs on the host and the device does not
     * share host memory */
    bool shared = m->be->iface->buffer_host_ptr && !status &&
                  m->be->iface->buffer_host_ptr(m->be, yc_graph_head(s->g, 0)->buf);
    for (int l = 0; l < m->nl && !status && !shared && !m->be->iface->yolo_loss; l++) {
        size_t n = yc_tensor_elems(yc_graph_head(s->g, l));
        s->head[l] = yc_malloc(n * sizeof(float), "head outputs");
        s->grad[l] = yc_malloc(n * sizeof(float), "head gradients");
        if (!s->head[l] || !s->grad[l])
            status = YC_ENOMEM;
    }
    if (status) {
        yc_step_free(s);
        return status;
    }
    *out = s;
    return YC_OK;
}

int yc_step_keep_heads(yc_step *s)
{
    s->keep_heads = true;
    for (int l = 0; l < s->m->nl; l++) {
        if (s->head[l])
            continue;
        size_t n = yc_tensor_elems(yc_graph_head(s->g, l));
        s->head[l] = yc_malloc(n * sizeof(float), "head outputs");
        s->grad[l] = yc_malloc(n * sizeof(float), "head gradients");
        if (!s->head[l] || !s->grad[l])
            return YC_ENOMEM;
    }
    return YC_OK;
}

void yc_step_free(yc_step *s)
{
    if (!s)
        return;
    /* the device may still be writing the loss sums into s (a failure after a submit) */
    if (s->pending)
        s->m->be->iface->synchronize(s->m->be);
    for (int l = 0; l < YC_MAX_LEVELS; l++) {
        free(s->head[l]);
        free(s->grad[l]);
    }
    yc_loss_free(s->loss);
    yc_graph_free(s->g);
    free(s);
}

int yc_step_batch_part(yc_step *s, int batch, const float *targets, int nt, yc_loss_part *part)
{
    yc_loss_head heads[YC_MAX_LEVELS];
    memset(heads, 0, sizeof heads);
    for (int l = 0; l < s->m->nl; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l);
        heads[l].ny = t->h;
        heads[l].nx = t->w;
    }
    return yc_loss_part_of(s->loss, batch, heads, targets, nt, part);
}

int yc_micro_targets(const float *targets, int nt, int first, int n, float *out)
{
    int k = 0;
    for (int i = 0; i < nt; i++) {
        const float *row = targets + (size_t)i * 6;
        if (row[0] >= (float)first && row[0] < (float)(first + n)) {
            memcpy(out + (size_t)k * 6, row, 6 * sizeof *row);
            out[(size_t)k * 6] -= (float)first;
            k++;
        }
    }
    return k;
}

/* Forward, loss, backward with the input already in place. */
static int run_loaded(yc_step *s, const float *targets, int nt);

int yc_step_submit(yc_step *s, const float *images, const float *targets, int nt)
{
    int status = yc_tensor_set_f32(s->m->be, yc_graph_input(s->g), images);
    return status ? status : run_loaded(s, targets, nt);
}

int yc_step_submit_u8(yc_step *s, const uint8_t *images, const float *targets, int nt)
{
    int status = yc_tensor_set_u8_scaled(s->m->be, yc_graph_input(s->g), images);
    return status ? status : run_loaded(s, targets, nt);
}

void yc_step_result(yc_step *s, yc_loss_result *result)
{
    if (s->pending) {
        yc_device_loss_result(&s->dl, yc_loss_params_of(s->loss), &s->result);
        s->pending = false;
    }
    *result = s->result;
}

int yc_step_run(yc_step *s, const float *images, const float *targets, int nt,
                yc_loss_result *result)
{
    int status = yc_step_submit(s, images, targets, nt);
    if (!status)
        status = s->m->be->iface->synchronize(s->m->be);
    if (!status)
        yc_step_result(s, result);
    return status;
}

int yc_step_run_u8(yc_step *s, const uint8_t *images, const float *targets, int nt,
                   yc_loss_result *result)
{
    int status = yc_step_submit_u8(s, images, targets, nt);
    if (!status)
        status = s->m->be->iface->synchronize(s->m->be);
    if (!status)
        yc_step_result(s, result);
    return status;
}

/* The loss where the heads are: the assignments made here, the rest by the backend. */
static int device_loss(yc_step *s, const float *targets, int nt)
{
    const yc_tensor *heads[YC_MAX_LEVELS], *grads[YC_MAX_LEVELS];
    for (int l = 0; l < s->m->nl; l++) {
        heads[l] = yc_graph_head(s->g, l);
        grads[l] = yc_graph_head_grad(s->g, l);
    }
    int status = yc_device_loss_submit(&s->dl, s->loss, s->m->be, s->batch, heads, grads, targets,
                                       nt, s->part);
    if (!status)
        s->pending = true;
    return status;
}

static int run_loaded(yc_step *s, const float *targets, int nt)
{
    yc_model *m = s->m;
    s->pending = false;
    int status = yc_graph_forward(s->g);
    if (status)
        return status;
    if (m->be->iface->yolo_loss) {
        for (int l = 0; l < m->nl && s->keep_heads; l++)
            if ((status = yc_tensor_get_f32(m->be, yc_graph_head(s->g, l), s->head[l])))
                return status;
        if ((status = device_loss(s, targets, nt)))
            return status;
        return yc_graph_backward(s->g);
    }
    yc_loss_head heads[YC_MAX_LEVELS];
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l), *gt = yc_graph_head_grad(s->g, l);
        if (s->head[l]) {
            if ((status = yc_tensor_get_f32(m->be, t, s->head[l])))
                return status;
            heads[l].p = s->head[l];
            heads[l].grad = s->grad[l];
        } else {
            /* FP32 dense heads in host-visible memory: the loss works in place */
            heads[l].p = (const float *)((const char *)m->be->iface->buffer_host_ptr(m->be, t->buf) +
                                         t->offset);
            heads[l].grad = (float *)((char *)m->be->iface->buffer_host_ptr(m->be, gt->buf) +
                                      gt->offset);
        }
        heads[l].ny = t->h;
        heads[l].nx = t->w;
        heads[l].img_stride = yc_tensor_image_elems(t);
    }
    if ((status = yc_loss_compute_part(s->loss, s->batch, heads, targets, nt, s->part, &s->result)))
        return status;
    for (int l = 0; l < m->nl && s->grad[l]; l++)
        if ((status = yc_tensor_set_f32(m->be, yc_graph_head_grad(s->g, l), s->grad[l])))
            return status;
    return yc_graph_backward(s->g);
}
