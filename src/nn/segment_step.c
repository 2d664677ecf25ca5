/* One training step of a segmentation model (segment_step.h). */
#include "segment_step.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "step.h"

void yc_seg_step_loss_params(const yc_model *m, const yc_hyp *hyp, int imgsz,
                             float label_smoothing, yc_loss_params *lp)
{
    yc_step_loss_params(m, hyp, imgsz, label_smoothing, lp);
    lp->nm = m->nm;
}

int yc_seg_step_new(yc_seg_step **out, yc_model *m, int batch, int h, int w,
                    const yc_loss_params *lp, const yc_graph_options *go)
{
    return yc_seg_step_new_in(out, m, batch, h, w, lp, go, NULL);
}

int yc_seg_step_new_in(yc_seg_step **out, yc_model *m, int batch, int h, int w,
                       const yc_loss_params *lp, const yc_graph_options *go, yc_arena *arena)
{
    *out = NULL;
    if (m->cfg->task != YC_TASK_SEGMENT)
        return yc_error_status(YC_EFORMAT, "%s is not a segmentation model (its last layer is "
                               "not Segment)", m->cfg->name);
    if (lp->nm != m->nm || lp->nl != m->nl || lp->nc != m->nc || lp->na != m->na)
        return yc_error_status(YC_EFORMAT, "the loss parameters (nl %d, na %d, nc %d, nm %d) are "
                               "not %s's", lp->nl, lp->na, lp->nc, lp->nm, m->cfg->name);
    yc_seg_step *s = yc_calloc(1, sizeof *s, "segmentation step");
    if (!s)
        return YC_ENOMEM;
    s->m = m;
    s->batch = batch;
    s->h = h;
    s->w = w;
    int status = yc_step_train_graph(&s->g, m, batch, h, w, go, arena);
    if (!status && !(s->loss = yc_seg_loss_new(lp)))
        status = YC_ENOMEM;
    for (int l = 0; l <= m->nl && !status; l++) {
        size_t n = yc_tensor_elems(yc_graph_head(s->g, l));
        float *v = yc_malloc(n * sizeof *v, "segmentation head outputs");
        float *d = yc_malloc(n * sizeof *d, "segmentation head gradients");
        if (l < m->nl) {
            s->head[l] = v;
            s->grad[l] = d;
        } else {
            s->proto = v;
            s->proto_grad = d;
        }
        if (!v || !d)
            status = YC_ENOMEM;
    }
    if (status) {
        yc_seg_step_free(s);
        return status;
    }
    s->proto_h = yc_graph_head(s->g, m->nl)->h;
    s->proto_w = yc_graph_head(s->g, m->nl)->w;
    *out = s;
    return YC_OK;
}

void yc_seg_step_free(yc_seg_step *s)
{
    if (!s)
        return;
    for (int l = 0; l < YC_MAX_LEVELS; l++) {
        free(s->head[l]);
        free(s->grad[l]);
    }
    free(s->proto);
    free(s->proto_grad);
    yc_seg_loss_free(s->loss);
    yc_graph_free(s->g);
    free(s);
}

int yc_seg_step_batch_part(yc_seg_step *s, int batch, const float *targets, int nt,
                           yc_loss_part *part)
{
    yc_loss_head heads[YC_MAX_LEVELS];
    memset(heads, 0, sizeof heads);
    for (int l = 0; l < s->m->nl; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l);
        heads[l].ny = t->h;
        heads[l].nx = t->w;
    }
    return yc_loss_part_of(yc_seg_loss_det(s->loss), batch, heads, targets, nt, part);
}

void yc_seg_micro_masks(const yc_seg_masks *all, const float *targets, int nt, int first, int n,
                        float *buf, yc_seg_masks *out)
{
    *out = *all;
    const size_t hw = (size_t)all->h * (size_t)all->w;
    if (!all->m)
        return;
    if (!all->per_target) {
        out->m = all->m + (size_t)first * hw;
        return;
    }
    /* the rows yc_micro_targets keeps, in its order */
    size_t k = 0;
    for (int i = 0; i < nt; i++) {
        const float im = targets[(size_t)i * 6];
        if (im >= (float)first && im < (float)(first + n))
            memcpy(buf + k++ * hw, all->m + (size_t)i * hw, hw * sizeof *buf);
    }
    out->m = buf;
}

/* Forward, loss, backward with the input in place. */
static int run_loaded(yc_seg_step *s, const float *targets, int nt, const yc_seg_masks *masks,
                      yc_seg_loss_result *result);

int yc_seg_step_run(yc_seg_step *s, const float *images, const float *targets, int nt,
                    const yc_seg_masks *masks, yc_seg_loss_result *result)
{
    int st = yc_tensor_set_f32(s->m->be, yc_graph_input(s->g), images);
    return st ? st : run_loaded(s, targets, nt, masks, result);
}

int yc_seg_step_run_u8(yc_seg_step *s, const uint8_t *images, const float *targets, int nt,
                       const yc_seg_masks *masks, yc_seg_loss_result *result)
{
    int st = yc_tensor_set_u8_scaled(s->m->be, yc_graph_input(s->g), images);
    return st ? st : run_loaded(s, targets, nt, masks, result);
}

static int run_loaded(yc_seg_step *s, const float *targets, int nt, const yc_seg_masks *masks,
                      yc_seg_loss_result *result)
{
    yc_model *m = s->m;
    yc_backend *be = m->be;
    int st;
    if ((st = yc_graph_forward(s->g)))
        return st;
    yc_loss_head heads[YC_MAX_LEVELS];
    memset(heads, 0, sizeof heads);
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l);
        if ((st = yc_tensor_get_f32(be, t, s->head[l])))
            return st;
        heads[l].p = s->head[l];
        heads[l].grad = s->grad[l];
        heads[l].ny = t->h;
        heads[l].nx = t->w;
        heads[l].img_stride = (size_t)t->c * (size_t)t->h * (size_t)t->w;
    }
    if ((st = yc_tensor_get_f32(be, yc_graph_head(s->g, m->nl), s->proto)))
        return st;
    yc_seg_proto proto = {.p = s->proto, .grad = s->proto_grad, .h = s->proto_h, .w = s->proto_w};
    if ((st = yc_seg_loss_compute_part(s->loss, s->batch, heads, &proto, targets, nt, masks,
                                       s->part, result)))
        return st;
    /* the gradients overwrite the outputs on the device (yc_graph_head_grad) */
    for (int l = 0; l <= m->nl; l++)
        if ((st = yc_tensor_set_f32(be, yc_graph_head_grad(s->g, l),
                                    l < m->nl ? s->grad[l] : s->proto_grad)))
            return st;
    if ((st = yc_graph_backward(s->g)) || (st = be->iface->synchronize(be)))
        return st;
    return YC_OK;
}
