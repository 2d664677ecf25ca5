/* Validation of a segmentation model (see val_seg.h). */
#include "val_seg.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coco_rle.h"
#include "graph.h"
#include "log.h"
#include "loss_seg.h"
#include "mask_eval.h"
#include "nms.h"
#include "plots.h"
#include "util.h"

/* Detections per image in the val_batch*_pred.jpg mosaics (output_to_target(preds, max_det=15)) */
#define PLOT_DETS 15
/* Images of a batch in the mosaics (plot_images_and_masks' max_subplots) */
#define PLOT_IMAGES 16

/* Everything yc_validate_seg allocates. */
typedef struct seg_state {
    yc_model *m;
    yc_graph *g;
    /* the batch shape (n, h, w) g is built for */
    int gshape[3];
    /* the heads and Proto's output of the batch, read back */
    float *heads[YC_MAX_LEVELS];
    size_t heads_cap[YC_MAX_LEVELS];
    float *proto;
    size_t proto_cap;
    int ph, pw;
    /* one image's decoded rows */
    float *rows;
    size_t rows_cap;
    yc_nms_scratch *nms;
    /* one image's detections (max_det rows of 6), their source rows, the scaled copy, labels */
    float *dets, *predn, *labels;
    uint32_t *src;
    int labels_cap;
    /* one image's predicted masks, ground truth masks (without overlap), IoUs and correct bits */
    uint8_t *pmasks;
    size_t pmasks_cap;
    float *gt, *iou;
    size_t gt_cap, iou_cap;
    uint16_t *correct;
    /* the first batches' detections for val_batch*_pred.jpg: PLOT_DETS a image, and counts */
    float *pdets;
    int *pndet;
    int pimages;
    /* their masks (PLOT_DETS planes an image of the first PLOT_IMAGES, pm_h x pm_w bytes) */
    uint8_t *pm;
    size_t pm_cap;
    int pm_h, pm_w;
    /* save_json: one mask at the original size and the detections' RLEs */
    uint8_t *orig8;
    size_t orig_cap;
    char **segs;
    yc_seg_loss_ctx *loss;
    yc_val_sink *sink;
    yc_val_stats mstats;
    bool have_mstats;
} seg_state;

static void seg_state_free(seg_state *s)
{
    yc_graph_free(s->g);
    for (int l = 0; l < YC_MAX_LEVELS; l++)
        free(s->heads[l]);
    free(s->proto);
    free(s->rows);
    yc_nms_scratch_free(s->nms);
    free(s->dets);
    free(s->predn);
    free(s->labels);
    free(s->src);
    free(s->pmasks);
    free(s->gt);
    free(s->iou);
    free(s->correct);
    free(s->pdets);
    free(s->pndet);
    free(s->pm);
    free(s->orig8);
    free(s->segs);
    yc_seg_loss_free(s->loss);
    yc_val_sink_free(s->sink);
    if (s->have_mstats)
        yc_val_stats_free(&s->mstats);
}

static int grow(void **p, size_t *cap, size_t n, size_t elem, const char *what)
{
    if (n <= *cap)
        return YC_OK;
    void *q = yc_realloc(*p, n * elem, what);
    if (!q)
        return YC_ENOMEM;
    *p = q;
    *cap = n;
    return YC_OK;
}

/* The eval graph for n x h x w (kept while the shape repeats). */
static int ensure_graph(seg_state *s, const yc_val_options *opt, int n, int h, int w)
{
    return yc_val_graph_for(&s->g, s->gshape, s->m, n, h, w, opt->half, opt->arena);
}

/* Forward of one batch and the heads and Proto read back into dense host arrays. */
static int forward(seg_state *s, const yc_val_options *opt, const yc_batch *b, double *t_pre,
                   double *t_inf)
{
    yc_model *m = s->m;
    double t0 = yc_now();
    int st = ensure_graph(s, opt, b->n, b->h, b->w);
    if (!st)
        st = yc_tensor_set_u8_scaled(m->be, yc_graph_input(s->g), b->images);
    double t1 = yc_now();
    if (!st)
        st = yc_graph_forward(s->g);
    if (!st)
        st = m->be->iface->synchronize(m->be);
    for (int l = 0; !st && l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l);
        st = grow((void **)&s->heads[l], &s->heads_cap[l], yc_tensor_elems(t), sizeof(float),
                  "head outputs");
        if (!st)
            st = yc_tensor_get_f32(m->be, t, s->heads[l]);
    }
    if (!st) {
        const yc_tensor *t = yc_graph_head(s->g, m->nl);
        if (t->c != m->nm)
            return yc_error_status(YC_EFORMAT, "the Proto output has %d channels, not %d", t->c,
                                   m->nm);
        s->ph = t->h;
        s->pw = t->w;
        st = grow((void **)&s->proto, &s->proto_cap, yc_tensor_elems(t), sizeof(float),
                  "Proto output");
        if (!st)
            st = yc_tensor_get_f32(m->be, t, s->proto);
    }
    *t_pre += t1 - t0;
    *t_inf += yc_now() - t1;
    return st;
}

/* The detections of image i: decoded rows, NMS keeping each detection's source row. */
static int detect_image(seg_state *s, int i, const yc_nms_params *np, int *nd)
{
    yc_model *m = s->m;
    yc_detect_level lv[YC_MAX_LEVELS];
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l);
        lv[l] = (yc_detect_level){.p = s->heads[l], .ny = t->h, .nx = t->w,
                                  .img_stride = yc_tensor_image_elems(t),
                                  .stride = m->stride[l]};
    }
    size_t rows = yc_detect_rows(lv, m->nl, m->na);
    int st = grow((void **)&s->rows, &s->rows_cap, rows * (size_t)m->no, sizeof(float),
                  "decoded rows");
    if (!st)
        st = yc_detect_decode_nm(lv, m->nl, m->na, m->no, m->nm, m->anchors, i, s->rows);
    if (!st)
        st = yc_nms_src(s->rows, rows, m->no, np, s->nms, s->dets, nd, s->src);
    return st;
}

/* The validation loss of the batch (box, seg, obj, cls added to loss[0..3]); its masks are
 * overlap maps, or one per target without overlap (loss_seg.h). */
static int batch_loss(seg_state *s, const yc_batch *b, bool overlap, double loss[4])
{
    yc_model *m = s->m;
    yc_loss_head lh[YC_MAX_LEVELS];
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l);
        lh[l] = (yc_loss_head){.p = s->heads[l], .grad = NULL, .ny = t->h, .nx = t->w,
                               .img_stride = yc_tensor_image_elems(t)};
    }
    yc_seg_proto pr = {.p = s->proto, .grad = NULL, .h = s->ph, .w = s->pw};
    yc_seg_masks mk = {.m = b->masks, .h = b->mask_h, .w = b->mask_w, .per_target = !overlap};
    yc_seg_loss_result lr;
    int st = yc_seg_loss_compute(s->loss, b->n, lh, &pr, b->targets, b->nt, &mk, &lr);
    if (st)
        return yc_error_context(st, "validation loss");
    loss[0] += lr.box;
    loss[1] += lr.seg;
    loss[2] += lr.obj;
    loss[3] += lr.cls;
    return YC_OK;
}

/* The ground truth masks of image i's nl labels as yc_mask_iou takes them: the image's index map
 * (overlap), else its targets' masks gathered in target order. */
static int image_gt(seg_state *s, const yc_batch *b, int i, bool overlap, int nl,
                    const float **gt)
{
    const size_t plane = (size_t)b->mask_h * b->mask_w;
    if (overlap) {
        if (i >= b->mask_n)
            return yc_error_status(YC_EFORMAT, "batch %d: %d overlap masks for %d images",
                                   b->index, b->mask_n, b->n);
        *gt = b->masks + (size_t)i * plane;
        return YC_OK;
    }
    int st = grow((void **)&s->gt, &s->gt_cap, (size_t)(nl > 0 ? nl : 1) * plane,
                  sizeof(float), "ground truth masks");
    if (st)
        return st;
    int k = 0;
    for (int t = 0; t < b->nt && k < nl; t++) {
        if ((int)b->targets[(size_t)t * 6] != i)
            continue;
        if (t >= b->mask_n)
            return yc_error_status(YC_EFORMAT, "batch %d: %d masks for %d targets", b->index,
                                   b->mask_n, b->nt);
        memcpy(s->gt + (size_t)k * plane, b->masks + (size_t)t * plane, plane * sizeof(float));
        k++;
    }
    *gt = s->gt;
    return YC_OK;
}

/* save_one_json's masks: each of the nd predicted masks (process_mask_upsample's, mh x mw at the
 * input size) brought to the original image by scale_image (the letterbox cropped off, resized
 * by cv2.resize INTER_LINEAR of the uint8 mask: yc_scale_mask_u8) and COCO-RLE encoded into
 * s->segs[0..nd-1] (freed by the caller). */
static int json_masks(seg_state *s, const yc_val_info *info, int nd, int mh, int mw)
{
    const size_t plane0 = (size_t)info->h0 * (size_t)info->w0;
    int st = grow((void **)&s->orig8, &s->orig_cap, plane0 ? plane0 : 1, 1,
                  "masks at the original size");
    for (int d = 0; d < nd && !st; d++) {
        st = yc_scale_mask_u8(s->pmasks + (size_t)d * mh * mw, mh, mw, info->lb.pad_w,
                              info->lb.pad_h, info->h0, info->w0, s->orig8);
        if (!st && !(s->segs[d] = yc_rle_json(s->orig8, info->h0, info->w0)))
            st = yc_error_context(YC_ENOMEM, "the RLE of a predicted mask");
    }
    return st;
}

/* Statistics of image i: box matching through the sink, mask matching into s->mstats. */
static int image_stats(seg_state *s, const yc_batch *b, const yc_dataset *ds,
                       const yc_val_options *opt, int i, int nd, yc_mask_mode mode)
{
    yc_model *m = s->m;
    const yc_val_info *info = &b->info[i];
    int nl = yc_val_targets_to_original(b->targets, b->nt, i, b->h, b->w, info,
                                        opt->single_cls, s->labels);
    if (opt->single_cls)
        for (int d = 0; d < nd; d++)
            s->dets[(size_t)d * 6 + 5] = 0;
    memcpy(s->predn, s->dets, (size_t)nd * 6 * sizeof(float));
    yc_val_scale_to_original(s->predn, (size_t)nd, 6, info);
    const char *image = ds->samples[b->sample[i]].image;
    int st;
    if (nd == 0) {
        if ((st = yc_val_sink_add(s->sink, image, info->w0, info->h0, s->predn, nd, s->labels,
                                  nl)))
            return st;
        return yc_val_stats_add(&s->mstats, NULL, 0, s->labels, nl, NULL);
    }
    /* pred_masks = process(proto, pred[:, 6:], pred[:, :4], shape=im[si].shape[1:]) */
    int mh, mw;
    yc_mask_size(mode, s->ph, s->pw, b->h, b->w, &mh, &mw);
    const size_t plane = (size_t)mh * mw;
    if ((st = grow((void **)&s->pmasks, &s->pmasks_cap, (size_t)nd * plane, 1, "masks")))
        return st;
    /* the coefficients of the detections as NMS returns them (scaled by the objectness) */
    float *coef = s->predn + (size_t)nd * 6;
    yc_nms_coefficients(s->rows, m->no, m->nm, s->src, nd, coef);
    const float *proto = s->proto + (size_t)i * m->nm * s->ph * s->pw;
    if ((st = yc_process_mask(proto, m->nm, s->ph, s->pw, coef, (size_t)m->nm, s->dets, 6, nd,
                              b->h, b->w, mode, s->pmasks)))
        return st;
    if (opt->save_json)
        st = json_masks(s, info, nd, mh, mw);
    if (!st)
        st = yc_val_sink_add_seg(s->sink, image, info->w0, info->h0, s->predn, nd, s->labels, nl,
                                 opt->save_json ? (const char *const *)s->segs : NULL);
    if (opt->save_json)
        for (int d = 0; d < nd; d++) {
            free(s->segs[d]);
            s->segs[d] = NULL;
        }
    if (st)
        return st;
    memset(s->correct, 0, (size_t)nd * sizeof *s->correct);
    if (nl > 0) {
        const float *gt = NULL;
        if ((st = image_gt(s, b, i, opt->mask_overlap, nl, &gt)) ||
            (st = grow((void **)&s->iou, &s->iou_cap, (size_t)nl * nd, sizeof(float),
                       "mask IoUs")) ||
            (st = yc_mask_iou(gt, opt->mask_overlap, nl, b->mask_h, b->mask_w, s->pmasks, nd, mh,
                              mw, s->iou)) ||
            (st = yc_match_iou(s->iou, s->predn, nd, s->labels, nl, s->correct)))
            return st;
    }
    return yc_val_stats_add_correct(&s->mstats, s->predn, nd, s->labels, nl, NULL, s->correct);
}

/* val_batch{k}_labels.jpg and val_batch{k}_pred.jpg of batch k = b->index as segment/val.py's
 * plot_images_and_masks draws them: the targets with their ground truth masks
 * (yc_plot_batch_seg_labels), and the first PLOT_DETS detections of each image with their masks
 * at process_mask's size (s->pdets, s->pm). */
static int plot_batch(seg_state *s, const yc_val_options *opt, const yc_batch *b,
                      const yc_dataset *ds, const char *const *names, int nc)
{
    const int n = b->n < PLOT_IMAGES ? b->n : PLOT_IMAGES;
    if (n < 1)
        return YC_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s/val_batch%d_labels.jpg", opt->save_dir, b->index);
    int st = yc_plot_batch_seg_labels(path, b, ds, opt->mask_overlap, opt->single_cls, names, nc);
    if (st)
        return st;
    yc_plot_image im[PLOT_IMAGES];
    const size_t img = 3 * (size_t)b->h * (size_t)b->w;
    for (int i = 0; i < n; i++)
        im[i] = (yc_plot_image){.px = b->images + (size_t)i * img, .layout = YC_PIX_U8_CHW,
                                .w = b->w, .h = b->h, .path = ds->samples[b->sample[i]].image};
    const size_t nbox = (size_t)n * PLOT_DETS;
    yc_plot_box *boxes = yc_malloc(nbox * sizeof *boxes, "batch plot");
    yc_plot_mask *masks = yc_malloc(nbox * sizeof *masks, "batch plot");
    if (!boxes || !masks) {
        free(boxes);
        free(masks);
        return YC_ENOMEM;
    }
    int nb = 0;
    const size_t pplane = (size_t)s->pm_h * s->pm_w;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s->pndet[i]; j++) {
            const float *d = s->pdets + ((size_t)i * PLOT_DETS + j) * 6;
            boxes[nb] = (yc_plot_box){.image = i, .cls = (int)d[5],
                                      .cx = (d[0] + d[2]) / 2 / (float)b->w,
                                      .cy = (d[1] + d[3]) / 2 / (float)b->h,
                                      .w = (d[2] - d[0]) / (float)b->w,
                                      .h = (d[3] - d[1]) / (float)b->h, .conf = d[4]};
            masks[nb] = (yc_plot_mask){.m = s->pm + ((size_t)i * PLOT_DETS + j) * pplane,
                                       .w = s->pm_w, .h = s->pm_h};
            nb++;
        }
    snprintf(path, sizeof path, "%s/val_batch%d_pred.jpg", opt->save_dir, b->index);
    st = yc_plot_batch_masks(path, im, n, boxes, nb, masks, names, nc);
    free(boxes);
    free(masks);
    return st;
}

static int validate(seg_state *s, yc_loader *loader, const yc_dataset *ds,
                    const char *const *names, const yc_val_options *opt,
                    const yc_loss_params *lp, yc_val_result *res)
{
    yc_model *m = s->m;
    const int nc = opt->single_cls ? 1 : ds->nc;
    int st;
    if ((st = yc_val_check(m, ds, opt)))
        return st;
    if (opt->augment || opt->save_hybrid)
        return yc_error_status(YC_EUSAGE, "segmentation models are validated without "
                               "--augment and --save-hybrid");
    if (lp && lp->nm != m->nm)
        return yc_error_status(YC_EUSAGE, "the validation loss of a segmentation model needs "
                               "its loss parameters with nm = %d (yc_seg_step_loss_params)",
                               m->nm);
    if ((st = yc_val_sink_new(&s->sink, nc, opt)) || (st = yc_val_stats_init(&s->mstats, nc)))
        return st;
    s->have_mstats = true;
    if (lp && !(s->loss = yc_seg_loss_new(lp)))
        return yc_error_context(YC_ERR, "validation loss");
    if (!(s->nms = yc_nms_scratch_new()))
        return yc_error_status(YC_ENOMEM, "out of memory: NMS scratch");
    /* predn holds the scaled boxes, then the kept detections' coefficients */
    const size_t md = (size_t)opt->max_det;
    s->dets = yc_malloc(md * 6 * sizeof *s->dets, "detections");
    s->predn = yc_malloc(md * (6 + (size_t)m->nm) * sizeof *s->predn, "detections");
    s->src = yc_malloc(md * sizeof *s->src, "detections");
    s->correct = yc_malloc(md * sizeof *s->correct, "detections");
    if (!s->dets || !s->predn || !s->src || !s->correct)
        return YC_ENOMEM;
    if (opt->save_json && !(s->segs = yc_calloc(md, sizeof *s->segs, "mask RLEs")))
        return YC_ENOMEM;

    yc_nms_params np = yc_nms_params_val();
    np.conf_thres = opt->conf_thres;
    np.iou_thres = opt->iou_thres;
    np.max_det = opt->max_det;
    np.agnostic = opt->single_cls;
    np.nm = m->nm;
    const yc_mask_mode mode = opt->save_json ? YC_MASK_UPSAMPLE_CROP : YC_MASK_PROTO;

    double t_pre = 0, t_inf = 0, t_nms = 0, loss[4] = {0, 0, 0, 0};
    int nbatches = 0;
    if ((st = yc_loader_start(loader, 0, NULL, 0)))
        return st;
    for (;;) {
        const yc_batch *b = NULL;
        if ((st = yc_loader_next(loader, &b)))
            return st;
        if (!b)
            break;
        nbatches++;
        if (b->n == 0)
            continue;
        if (!b->masks || b->mask_h < 1 || b->mask_w < 1)
            return yc_error_status(YC_EUSAGE, "validating a segmentation model needs the "
                                   "ground truth masks in its batches (a segmentation dataset, "
                                   "polygon labels, loaded with masks)");
        if ((st = forward(s, opt, b, &t_pre, &t_inf)))
            return st;
        if (s->loss && (st = batch_loss(s, b, opt->mask_overlap, loss)))
            return st;
        if (b->nt > s->labels_cap) {
            float *l = yc_realloc(s->labels, (size_t)b->nt * 5 * sizeof *l, "labels");
            if (!l)
                return YC_ENOMEM;
            s->labels = l;
            s->labels_cap = b->nt;
        }
        const bool plot = opt->plots && opt->save_dir && b->index < 3;
        if (plot && b->n > s->pimages) {
            float *d = yc_realloc(s->pdets, (size_t)b->n * PLOT_DETS * 6 * sizeof *d, "plots");
            if (!d)
                return YC_ENOMEM;
            s->pdets = d;
            int *c = yc_realloc(s->pndet, (size_t)b->n * sizeof *c, "plots");
            if (!c)
                return YC_ENOMEM;
            s->pndet = c;
            s->pimages = b->n;
        }
        if (plot) {
            /* the predicted masks of the images plotted, at process_mask's size */
            yc_mask_size(mode, s->ph, s->pw, b->h, b->w, &s->pm_h, &s->pm_w);
            if ((st = grow((void **)&s->pm, &s->pm_cap,
                           (size_t)PLOT_IMAGES * PLOT_DETS * s->pm_h * s->pm_w, 1, "plots")))
                return st;
        }
        for (int i = 0; i < b->n; i++) {
            int nd = 0;
            double t0 = yc_now();
            if ((st = detect_image(s, i, &np, &nd)))
                return st;
            t_nms += yc_now() - t0;
            if ((st = image_stats(s, b, ds, opt, i, nd, mode)))
                return st;
            if (plot) {
                s->pndet[i] = nd < PLOT_DETS ? nd : PLOT_DETS;
                memcpy(s->pdets + (size_t)i * PLOT_DETS * 6, s->dets,
                       (size_t)s->pndet[i] * 6 * sizeof(float));
                if (i < PLOT_IMAGES && s->pndet[i] > 0)
                    memcpy(s->pm + (size_t)i * PLOT_DETS * s->pm_h * s->pm_w, s->pmasks,
                           (size_t)s->pndet[i] * s->pm_h * s->pm_w);
            }
        }
        if (plot && (st = plot_batch(s, opt, b, ds, names, nc)))
            return st;
    }

    /* box and mask metrics, both computed only when some mask is correct (stats[0].any()) */
    const yc_val_stats *bstats = yc_val_sink_stats(s->sink);
    res->seg = true;
    if ((st = yc_val_metrics_compute_gated(bstats, &s->mstats, &res->metrics)) ||
        (st = yc_val_metrics_compute_gated(&s->mstats, &s->mstats, &res->mask_metrics)))
        return st;
    res->n_det = yc_val_sink_detections(s->sink);
    res->nbatches = nbatches;
    res->loss[0] = nbatches ? loss[0] / nbatches : 0;
    res->loss_seg = nbatches ? loss[1] / nbatches : 0;
    res->loss[1] = nbatches ? loss[2] / nbatches : 0;
    res->loss[2] = nbatches ? loss[3] / nbatches : 0;
    long seen = res->metrics.seen;
    res->t_pre = seen ? t_pre / (double)seen * 1e3 : 0;
    res->t_inf = seen ? t_inf / (double)seen * 1e3 : 0;
    res->t_nms = seen ? t_nms / (double)seen * 1e3 : 0;
    if (opt->print) {
        const yc_val_metrics *vm = &res->metrics;
        yc_val_seg_print_header(stdout);
        bool per_class = (opt->verbose || (vm->nc < 50 && !opt->training)) && vm->nc > 1;
        yc_val_seg_print_results(stdout, vm, &res->mask_metrics, names, per_class);
        int64_t total = 0;
        for (int c = 0; c < vm->nc; c++)
            total += vm->nt[c];
        if (total == 0)
            yc_warn("no labels found in the validation set, can not compute metrics without "
                    "labels");
        if (!opt->training)
            printf("Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape "
                   "(%d, 3, %d, %d)\n",
                   res->t_pre, res->t_inf, res->t_nms, opt->batch, opt->imgsz, opt->imgsz);
        fflush(stdout);
    }
    return yc_val_sink_save(s->sink, names, res);
}

int yc_validate_seg(yc_model *m, yc_loader *loader, const yc_dataset *ds,
                    const char *const *names, const yc_val_options *opt,
                    const yc_loss_params *lp, yc_val_result *res)
{
    memset(res, 0, sizeof *res);
    if (!m || !m->be || !loader || !ds || !opt || m->nm < 1)
        return yc_error_status(YC_EUSAGE, "segmentation validation: missing model, loader or "
                               "dataset, or a model without a Segment head");
    seg_state s;
    memset(&s, 0, sizeof s);
    s.m = m;
    int st = validate(&s, loader, ds, names, opt, lp, res);
    seg_state_free(&s);
    if (st)
        yc_val_result_free(res);
    return st;
}

void yc_val_seg_print_header(FILE *f)
{
    fprintf(f, "%22s%11s%11s%11s%11s%11s%11s%11s%11s%11s%11s\n", "Class", "Images", "Instances",
            "Box(P", "R", "mAP50", "mAP50-95)", "Mask(P", "R", "mAP50", "mAP50-95)");
}

void yc_val_seg_print_results(FILE *f, const yc_val_metrics *box, const yc_val_metrics *mask,
                              const char *const *names, bool per_class)
{
    int64_t total = 0;
    for (int c = 0; c < box->nc; c++)
        total += box->nt[c];
    fprintf(f, "%22s%11ld%11" PRId64 "%11.3g%11.3g%11.3g%11.3g%11.3g%11.3g%11.3g%11.3g\n", "all",
            box->seen, total, box->mp, box->mr, box->map50, box->map, mask->mp, mask->mr,
            mask->map50, mask->map);
    if (!per_class)
        return;
    /* boxes and masks have the same classes (ap_class_index) */
    for (int ci = 0; ci < box->ap.n && ci < mask->ap.n; ci++) {
        const int c = box->ap.cls[ci];
        char num[16];
        snprintf(num, sizeof num, "%d", c);
        const char *name = names && names[c] ? names[c] : num;
        fprintf(f, "%22s%11ld%11" PRId64 "%11.3g%11.3g%11.3g%11.3g%11.3g%11.3g%11.3g%11.3g\n",
                name, box->seen, box->nt[c], box->ap.p[ci], box->ap.r[ci], box->ap.ap50[ci],
                box->ap.ap5095[ci], mask->ap.p[ci], mask->ap.r[ci], mask->ap.ap50[ci],
                mask->ap.ap5095[ci]);
    }
}
