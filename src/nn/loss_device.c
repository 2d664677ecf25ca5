/* YOLOv5's loss on the device (see loss_device.h). */
#include "loss_device.h"

#include <string.h>

#include "log.h"

int yc_device_loss_submit(yc_device_loss *d, yc_loss_ctx *loss, yc_backend *be, int batch,
                          const yc_tensor *const *heads, const yc_tensor *const *grads,
                          const float *targets, int nt, const yc_loss_part *part)
{
    const yc_loss_params *lp = yc_loss_params_of(loss);
    if (!be->iface->yolo_loss)
        return yc_error_status(YC_EUNSUPPORTED, "the %s backend has no loss of its own",
                               be->iface->name);
    if (lp->nm != 0)
        return yc_error_status(YC_EUNSUPPORTED, "the device loss has no mask coefficients (a "
                               "segmentation model's loss runs on the host, loss_seg.h)");
    yc_loss_head lh[YC_MAX_LEVELS];
    memset(lh, 0, sizeof lh);
    for (int l = 0; l < lp->nl; l++) {
        lh[l].ny = heads[l]->h;
        lh[l].nx = heads[l]->w;
    }
    const yc_target_set *sets[YC_MAX_LEVELS];
    int status = yc_loss_build_targets(loss, batch, lh, targets, nt, sets);
    if (status)
        return status;
    yc_yolo_loss y = {.batch = batch, .nl = lp->nl, .na = lp->na, .nc = lp->nc,
                      .cls_pw = lp->cls_pw, .obj_pw = lp->obj_pw, .fl_gamma = lp->fl_gamma,
                      .sums = d->sums};
    /* smooth_BCE(eps) targets, stored as float32 as the host loss does */
    y.cp = (float)(1.0 - 0.5 * (double)lp->label_smoothing);
    y.cn = (float)(0.5 * (double)lp->label_smoothing);
    const double bs = part ? (double)part->batch : (double)batch;
    d->mean_batch = bs;
    for (int l = 0; l < lp->nl; l++) {
        const yc_target_set *t = sets[l];
        double n = part ? (double)part->ntargets[l] : (double)t->n;
        if (part && t->n > part->ntargets[l])
            return yc_error_status(YC_EFORMAT, "loss: level %d of a part has %d assignments, more "
                                   "than the %d of its whole batch", l, t->n, part->ntargets[l]);
        double cells = bs * (double)lp->na * lh[l].ny * lh[l].nx;
        d->mean_entries[l] = n;
        d->mean_cells[l] = cells;
        yc_yolo_loss_level *v = &y.level[l];
        v->head = heads[l];
        v->grad = grads ? grads[l] : NULL;
        v->n = t->n;
        v->b = t->b, v->a = t->a, v->gj = t->gj, v->gi = t->gi, v->cls = t->cls;
        v->tbox = t->tbox, v->anch = t->anch;
        v->gbox = n > 0 ? (float)(-bs * (double)lp->box_gain / n) : 0.0f;
        v->gcls = n > 0 ? (float)(bs * (double)lp->cls_gain / (n * (double)lp->nc)) : 0.0f;
        v->gobj = (float)(bs * (double)lp->obj_gain * (double)lp->balance[l] / cells);
    }
    return be->iface->yolo_loss(be, &y);
}

void yc_device_loss_result(const yc_device_loss *d, const yc_loss_params *lp,
                           yc_loss_result *result)
{
    double lbox = 0, lobj = 0, lcls = 0;
    for (int l = 0; l < lp->nl; l++) {
        const float *v = d->sums + 6 * l;
        double sbox = (double)v[0] + v[1], sobj = (double)v[2] + v[3], scls = (double)v[4] + v[5];
        if (d->mean_entries[l] > 0) {
            lbox += sbox / d->mean_entries[l];
            if (lp->nc > 1)
                lcls += scls / (d->mean_entries[l] * lp->nc);
        }
        lobj += (double)lp->balance[l] * sobj / d->mean_cells[l];
    }
    result->box = (double)lp->box_gain * lbox;
    result->obj = (double)lp->obj_gain * lobj;
    result->cls = (double)lp->cls_gain * lcls;
    result->total = d->mean_batch * (result->box + result->obj + result->cls);
}
