/* YOLOv5's segmentation samples: polygons through the augmentations, and their masks (see
 * augment_seg.h). */
#include "augment_seg.h"

#include "log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Points each polygon is resampled to in random_perspective (resample_segments' n). */
#define RESAMPLE_POINTS 1000

/* ------------------------------------------------------------------------------------------------
 * Polygons
 * ---------------------------------------------------------------------------------------------- */

static int segs_reserve(yc_segs *s, int n, size_t npts)
{
    if (n > s->cap) {
        int cap = s->cap ? s->cap : 16;
        while (cap < n)
            cap *= 2;
        size_t *f = yc_realloc(s->first, (size_t)cap * sizeof *f, "polygons");
        if (!f)
            return YC_ENOMEM;
        s->first = f;
        uint32_t *c = yc_realloc(s->count, (size_t)cap * sizeof *c, "polygons");
        if (!c)
            return YC_ENOMEM;
        s->count = c;
        s->cap = cap;
    }
    if (npts > s->cap_pts) {
        size_t cap = s->cap_pts ? s->cap_pts : 1024;
        while (cap < npts)
            cap *= 2;
        double *xy = yc_realloc(s->xy, 2 * cap * sizeof *xy, "polygon points");
        if (!xy)
            return YC_ENOMEM;
        s->xy = xy;
        s->cap_pts = cap;
    }
    return YC_OK;
}

int yc_segs_push(yc_segs *s, const double *xy, uint32_t n)
{
    int st = segs_reserve(s, s->n + 1, s->npts + n);
    if (st)
        return st;
    s->first[s->n] = s->npts;
    s->count[s->n++] = n;
    memcpy(s->xy + 2 * s->npts, xy, 2 * (size_t)n * sizeof *xy);
    s->npts += n;
    return YC_OK;
}

int yc_segs_push_f32(yc_segs *s, const float *xy, uint32_t n)
{
    int st = segs_reserve(s, s->n + 1, s->npts + n);
    if (st)
        return st;
    s->first[s->n] = s->npts;
    s->count[s->n++] = n;
    for (size_t i = 0; i < 2 * (size_t)n; i++)
        s->xy[2 * s->npts + i] = xy[i];
    s->npts += n;
    return YC_OK;
}

int yc_segs_append(yc_segs *dst, const yc_segs *src)
{
    int st = segs_reserve(dst, dst->n + src->n, dst->npts + src->npts);
    for (int k = 0; !st && k < src->n; k++)
        st = yc_segs_push(dst, src->xy + 2 * src->first[k], src->count[k]);
    return st;
}

int yc_segs_copy(yc_segs *dst, const yc_segs *src)
{
    dst->n = 0;
    dst->npts = 0;
    return yc_segs_append(dst, src);
}

void yc_segs_keep(yc_segs *s, const bool *keep)
{
    int k2 = 0;
    size_t at = 0;
    for (int k = 0; k < s->n; k++) {
        if (!keep[k])
            continue;
        memmove(s->xy + 2 * at, s->xy + 2 * s->first[k], 2 * (size_t)s->count[k] * sizeof *s->xy);
        s->count[k2] = s->count[k];
        s->first[k2++] = at;
        at += s->count[k];
    }
    s->n = k2;
    s->npts = at;
}

void yc_segs_free(yc_segs *s)
{
    free(s->first);
    free(s->count);
    free(s->xy);
    memset(s, 0, sizeof *s);
}

void yc_segs_xyn2xy(yc_segs *s, int from, double w, double h, double padw, double padh)
{
    const float fw = (float)w, fh = (float)h, pw = (float)padw, ph = (float)padh;
    for (int k = from; k < s->n; k++) {
        double *p = s->xy + 2 * s->first[k];
        for (uint32_t i = 0; i < s->count[k]; i++) {
            p[2 * i] = (double)(fw * (float)p[2 * i] + pw);
            p[2 * i + 1] = (double)(fh * (float)p[2 * i + 1] + ph);
        }
    }
}

int yc_segs_resample(const yc_segs *src, yc_segs *dst, int n)
{
    dst->n = 0;
    dst->npts = 0;
    int st = segs_reserve(dst, src->n, (size_t)src->n * (size_t)n);
    if (st)
        return st;
    for (int k = 0; k < src->n; k++) {
        const double *p = src->xy + 2 * src->first[k];
        size_t len = (size_t)src->count[k] + 1; /* closed: the first point again */
        double *o = dst->xy + 2 * dst->npts;
        /* np.linspace(0, len - 1, n): i * step, the last exactly len - 1 */
        double step = (double)(len - 1) / (double)(n - 1);
        for (int i = 0; i < n; i++) {
            double x = i == n - 1 ? (double)(len - 1) : (double)i * step;
            for (int c = 0; c < 2; c++) {
                double v;
                if (x >= (double)(len - 1)) {
                    v = p[c]; /* fp[-1]: the closing point */
                } else {
                    size_t j = (size_t)x;
                    double f0 = p[2 * j + c];
                    double f1 = j + 1 == len - 1 ? p[c] : p[2 * (j + 1) + c];
                    v = x == (double)j ? f0 : (f1 - f0) * (x - (double)j) + f0;
                }
                o[2 * i + c] = v;
            }
        }
        dst->first[dst->n] = dst->npts;
        dst->count[dst->n++] = (uint32_t)n;
        dst->npts += (size_t)n;
    }
    return YC_OK;
}

void yc_segment2box(const double *xy, size_t n, double width, double height, double box[4])
{
    bool any_nonzero_x = false, any = false;
    double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    for (size_t i = 0; i < n; i++) {
        double x = xy[2 * i], y = xy[2 * i + 1];
        if (!(x >= 0 && y >= 0 && x <= width && y <= height))
            continue;
        if (!any) {
            x1 = x2 = x;
            y1 = y2 = y;
            any = true;
        }
        x1 = x < x1 ? x : x1;
        x2 = x > x2 ? x : x2;
        y1 = y < y1 ? y : y1;
        y2 = y > y2 ? y : y2;
        any_nonzero_x = any_nonzero_x || x != 0;
    }
    if (!any_nonzero_x) {
        box[0] = box[1] = box[2] = box[3] = 0;
        return;
    }
    box[0] = x1;
    box[1] = y1;
    box[2] = x2;
    box[3] = y2;
}

/* box_candidates(box1 = old box * s (float32), box2 = new box (float64), area_thr) with
 * YOLOv5's precisions: w1, h1 and w1 * h1 + eps in float32. */
static bool seg_candidate(const float *old, float s, const double *nb, double area_thr)
{
    const double eps = 1e-16;
    float w1 = old[2] * s - old[0] * s, h1 = old[3] * s - old[1] * s;
    float a1 = w1 * h1 + (float)eps;
    double w2 = nb[2] - nb[0], h2 = nb[3] - nb[1];
    double ar = fmax(w2 / (h2 + eps), h2 / (w2 + eps));
    return w2 > 2 && h2 > 2 && w2 * h2 / (double)a1 > area_thr && ar < 100;
}

int yc_seg_warp_labels(yc_labels *labels, yc_segs *segs, yc_segs *tmp, const double M[9],
                       bool perspective, double scale, int out_h, int out_w)
{
    int n = labels->n;
    if (n == 0)
        return YC_OK;
    if (segs->n != n)
        return yc_error_status(YC_ERR, "internal: %d labels with %d polygons", n, segs->n);
    int st = yc_segs_resample(segs, tmp, RESAMPLE_POINTS);
    if (st)
        return st;
    bool *keep = yc_malloc((size_t)n * sizeof *keep, "labels");
    if (!keep)
        return YC_ENOMEM;
    const float fs = (float)scale;
    int kept = 0;
    for (int k = 0; k < n; k++) {
        double *p = tmp->xy + 2 * tmp->first[k];
        for (uint32_t i = 0; i < tmp->count[k]; i++) {
            double x = p[2 * i], y = p[2 * i + 1];
            double nx = x * M[0] + y * M[1] + M[2];
            double ny = x * M[3] + y * M[4] + M[5];
            if (perspective) {
                double z = x * M[6] + y * M[7] + M[8];
                nx /= z;
                ny /= z;
            }
            p[2 * i] = nx;
            p[2 * i + 1] = ny;
        }
        double nb[4];
        yc_segment2box(p, tmp->count[k], out_w, out_h, nb);
        const float *r = labels->v + 5 * (size_t)k;
        keep[k] = seg_candidate(r + 1, fs, nb, 0.01);
        if (!keep[k])
            continue;
        float *o = labels->v + 5 * (size_t)kept++;
        o[0] = r[0];
        for (int j = 0; j < 4; j++)
            o[1 + j] = (float)nb[j];
    }
    labels->n = kept;
    yc_segs_keep(tmp, keep);
    free(keep);
    return yc_segs_copy(segs, tmp);
}

int yc_seg_random_perspective(const yc_image *src, yc_image *dst, yc_labels *labels,
                              yc_segs *segs, yc_segs *tmp, const yc_hyp *hyp, int border_y,
                              int border_x, yc_rng *rng)
{
    int out_h = src->h + 2 * border_y, out_w = src->w + 2 * border_x;
    double M[9], scale;
    int st = yc_persp_image(src, dst, hyp, border_y, border_x, rng, M, &scale);
    if (st)
        return st;
    return yc_seg_warp_labels(labels, segs, tmp, M, hyp->perspective != 0, scale, out_h, out_w);
}

/* bbox_ioa(box, boxes[k]) < 0.30 for every k (eps 1e-7, float32 as YOLOv5's arrays). */
static bool ioa_below(const float box[4], const yc_labels *l)
{
    for (int k = 0; k < l->n; k++) {
        const float *b = l->v + 5 * (size_t)k + 1;
        float iw = fminf(box[2], b[2]) - fmaxf(box[0], b[0]);
        float ih = fminf(box[3], b[3]) - fmaxf(box[1], b[1]);
        float inter = (iw > 0 ? iw : 0) * (ih > 0 ? ih : 0);
        float area = (b[2] - b[0]) * (b[3] - b[1]) + 1e-7f;
        if (!(inter / area < 0.30f))
            return false;
    }
    return true;
}

int yc_seg_copy_paste(yc_image *im, yc_labels *labels, yc_segs *segs, double p, yc_rng *rng,
                      yc_mask_scratch *ms)
{
    int n = segs->n;
    if (p == 0 || n == 0)
        return YC_OK;
    int k = (int)lrint(p * n);
    if (k > n)
        k = n;
    int *pool = yc_malloc((size_t)n * sizeof *pool, "copy_paste");
    if (!pool)
        return YC_ENOMEM;
    for (int i = 0; i < n; i++)
        pool[i] = i;
    /* random.sample's pool selection: the chosen ones end up at pool[n - k ..], last first */
    for (int i = 0; i < k; i++) {
        int r = (int)yc_rng_below(rng, (uint32_t)(n - i));
        int t = pool[r];
        pool[r] = pool[n - i - 1];
        pool[n - i - 1] = t;
    }
    int *chosen = yc_malloc((size_t)(k ? k : 1) * sizeof *chosen, "copy_paste");
    int st = chosen ? YC_OK : YC_ENOMEM;
    for (int i = 0; i < k && !st; i++)
        chosen[i] = pool[n - 1 - i];
    if (!st)
        st = yc_seg_copy_paste_at(im, labels, segs, chosen, k, ms);
    free(pool);
    free(chosen);
    return st;
}

int yc_seg_copy_paste_at(yc_image *im, yc_labels *labels, yc_segs *segs, const int *chosen,
                         int k, yc_mask_scratch *ms)
{
    if (segs->n == 0 || k == 0)
        return YC_OK;
    const int h = im->h, w = im->w;
    uint8_t *mask = yc_calloc((size_t)h * (size_t)w, 1, "copy_paste mask");
    int32_t *ip = NULL;
    int st = mask ? YC_OK : YC_ENOMEM;
    for (int i = 0; i < k && !st; i++) {
        int j = chosen[i];
        if (j < 0 || j >= segs->n || j >= labels->n) {
            st = yc_error_status(YC_EUSAGE, "copy_paste: polygon %d of %d", j, segs->n);
            break;
        }
        float l[5];
        memcpy(l, labels->v + 5 * (size_t)j, sizeof l);
        const float fw = (float)w;
        float box[4] = {fw - l[3], l[2], fw - l[1], l[4]};
        if (!ioa_below(box, labels))
            continue;
        if ((st = yc_labels_push(labels, l[0], box[0], box[1], box[2], box[3])))
            break;
        uint32_t np = segs->count[j];
        double *mirror = yc_malloc(2 * (size_t)np * sizeof *mirror, "copy_paste");
        int32_t *nip = mirror ? yc_realloc(ip, 2 * (size_t)np * sizeof *ip, "copy_paste") : NULL;
        if (!mirror || !nip) {
            free(mirror);
            st = YC_ENOMEM;
            break;
        }
        ip = nip;
        const double *src = segs->xy + 2 * segs->first[j];
        for (uint32_t q = 0; q < np; q++) {
            mirror[2 * q] = (double)(fw - (float)src[2 * q]);
            mirror[2 * q + 1] = src[2 * q + 1];
            ip[2 * q] = (int32_t)src[2 * q];
            ip[2 * q + 1] = (int32_t)src[2 * q + 1];
        }
        st = yc_segs_push(segs, mirror, np);
        free(mirror);
        /* drawContours(im_new, [segments[j]], FILLED): the fill of the original polygon */
        if (!st)
            st = yc_fill_poly(ms, mask, h, w, ip, np, 1);
    }
    if (!st) {
        /* im[i] = flip(im)[i] where i = flip(im_new) */
        uint8_t *orig = yc_malloc((size_t)h * (size_t)w * 3, "copy_paste");
        if (!orig) {
            st = YC_ENOMEM;
        } else {
            memcpy(orig, im->data, (size_t)h * (size_t)w * 3);
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    if (mask[(size_t)y * w + (w - 1 - x)])
                        memcpy(im->data + ((size_t)y * w + x) * 3,
                               orig + ((size_t)y * w + (w - 1 - x)) * 3, 3);
            free(orig);
        }
    }
    free(mask);
    free(ip);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Samples
 * ---------------------------------------------------------------------------------------------- */

void yc_seg_scratch_free(yc_seg_scratch *s)
{
    yc_aug_scratch_free(&s->a);
    yc_segs_free(&s->tile_segs);
    yc_segs_free(&s->segs);
    yc_segs_free(&s->mix_segs);
    yc_segs_free(&s->tmp);
    yc_mask_scratch_free(&s->ms);
    free(s->masks);
    free(s->order);
    yc_labels_free(&s->sorted);
    memset(s, 0, sizeof *s);
}

static int call_loader(yc_seg_scratch *s, yc_seg_sample_loader load, void *ctx, int index,
                       bool augment, yc_load_info *info)
{
    s->a.tile_labels.n = 0;
    s->tile_segs.n = 0;
    s->tile_segs.npts = 0;
    int st = load(ctx, index, augment, &s->a.tile, &s->a.decode, info, &s->a.tile_labels,
                  &s->tile_segs);
    if (st)
        return yc_error_context(st, "sample %d", index);
    if (s->a.tile.h < 1 || s->a.tile.w < 1 || !s->a.tile.data)
        return yc_error_status(YC_ERR, "sample %d: the loader returned no image", index);
    if (s->tile_segs.n != s->a.tile_labels.n)
        return yc_error_status(YC_ERR, "sample %d: %d labels with %d polygons", index,
                               s->a.tile_labels.n, s->tile_segs.n);
    return YC_OK;
}

int yc_seg_make_masks(yc_seg_scratch *s, const yc_mask_params *mp, int h, int w,
                      yc_labels *labels, const yc_segs *segs)
{
    int r = mp->ratio;
    if (r < 1 || h % r || w % r)
        return yc_error_status(YC_EUSAGE, "mask ratio %d does not divide the image size %dx%d",
                               r, w, h);
    if (segs->n != labels->n)
        return yc_error_status(YC_ERR, "internal: %d labels with %d polygons", labels->n,
                               segs->n);
    int nl = labels->n;
    s->mask_h = h / r;
    s->mask_w = w / r;
    s->mask_n = mp->overlap ? 1 : nl;
    size_t m = (size_t)s->mask_h * (size_t)s->mask_w;
    size_t need = m * (size_t)(s->mask_n > 0 ? s->mask_n : 1);
    if (need > s->cap_masks) {
        float *p = yc_realloc(s->masks, need * sizeof *p, "masks");
        if (!p)
            return YC_ENOMEM;
        s->masks = p;
        s->cap_masks = need;
    }
    if (nl == 0) {
        memset(s->masks, 0, need * sizeof *s->masks);
        return YC_OK;
    }
    if (!mp->overlap)
        return yc_polygons2masks(&s->ms, h, w, r, segs->xy, segs->first, segs->count, nl,
                                 s->masks);
    if (nl > s->cap_order) {
        int *o = yc_realloc(s->order, (size_t)nl * sizeof *o, "mask order");
        if (!o)
            return YC_ENOMEM;
        s->order = o;
        s->cap_order = nl;
    }
    int st = yc_polygons2masks_overlap(&s->ms, h, w, r, segs->xy, segs->first, segs->count, nl,
                                       s->masks, s->order);
    if (st)
        return st;
    /* labels = labels[sorted_idx] */
    s->sorted.n = 0;
    for (int k = 0; k < nl && !st; k++) {
        const float *v = labels->v + 5 * (size_t)s->order[k];
        st = yc_labels_push(&s->sorted, v[0], v[1], v[2], v[3], v[4]);
    }
    return st ? st : yc_labels_copy(labels, &s->sorted);
}

int yc_seg_load_mosaic(yc_seg_scratch *s, const yc_sample_params *p, int index,
                       yc_seg_sample_loader load, void *ctx, yc_rng *rng, yc_image *dst,
                       yc_labels *labels, yc_segs *segs)
{
    const int sz = p->imgsz;
    yc_aug_scratch *a = &s->a;
    /* [index] + random.choices(self.indices, k=3), not shuffled */
    int border, xc, yc, idx[4];
    int st = yc_mosaic_begin(&a->canvas, p, index, rng, &border, &xc, &yc, idx);
    if (st)
        return st;
    labels->n = 0;
    segs->n = 0;
    segs->npts = 0;
    for (int k = 0; k < 4; k++) {
        yc_load_info li;
        st = call_loader(s, load, ctx, idx[k], true, &li);
        int first = labels->n;
        if (!st)
            st = yc_mosaic_place(&a->canvas, sz, xc, yc, k, &a->tile, &a->tile_labels, labels);
        if (!st)
            st = yc_segs_append(segs, &s->tile_segs);
        if (st)
            return st;
        if (labels->n == first)
            continue;
        /* the tile's offset (padw, padh) = (x1a - x1b, y1a - y1b) as in yc_mosaic_place */
        const int w = a->tile.w, h = a->tile.h;
        int x1a, y1a, x1b, y1b;
        switch (k) {
        case 0:
            x1a = xc - w > 0 ? xc - w : 0, y1a = yc - h > 0 ? yc - h : 0;
            x1b = w - (xc - x1a), y1b = h - (yc - y1a);
            break;
        case 1:
            x1a = xc, y1a = yc - h > 0 ? yc - h : 0;
            x1b = 0, y1b = h - (yc - y1a);
            break;
        case 2:
            x1a = xc - w > 0 ? xc - w : 0, y1a = yc;
            x1b = w - (xc - x1a), y1b = 0;
            break;
        default:
            x1a = xc, y1a = yc;
            x1b = 0, y1b = 0;
            break;
        }
        yc_segs_xyn2xy(segs, segs->n - s->tile_segs.n, w, h, x1a - x1b, y1a - y1b);
    }
    /* np.clip(segment, 0, 2s) (the labels were clipped by yc_mosaic_place) */
    for (size_t i = 0; i < 2 * segs->npts; i++)
        segs->xy[i] = segs->xy[i] < 0 ? 0 : segs->xy[i] > 2 * sz ? 2 * sz : segs->xy[i];
    if ((st = yc_seg_copy_paste(&a->canvas, labels, segs, p->hyp->copy_paste, rng, &s->ms)))
        return st;
    return yc_seg_random_perspective(&a->canvas, dst, labels, segs, &s->tmp, p->hyp, border,
                                     border, rng);
}

int yc_seg_train_sample(yc_seg_scratch *s, const yc_sample_params *p, const yc_mask_params *mp,
                        int index, yc_seg_sample_loader load, void *ctx, yc_rng *rng,
                        uint8_t *chw, int *out_h, int *out_w, yc_labels *out)
{
    const yc_hyp *hyp = p->hyp;
    yc_aug_scratch *a = &s->a;
    bool rect = p->rect_h > 0 && p->rect_w > 0;
    bool mosaic = !rect && yc_rng_uniform(rng) < hyp->mosaic;
    int st;
    yc_image *img = &a->img;
    if (mosaic) {
        st = yc_seg_load_mosaic(s, p, index, load, ctx, rng, img, &a->labels, &s->segs);
        if (st)
            return st;
        if (yc_rng_uniform(rng) < hyp->mixup) {
            int j = (int)yc_rng_below(rng, (uint32_t)p->n);
            st = yc_seg_load_mosaic(s, p, j, load, ctx, rng, &a->mix, &a->mix_labels,
                                    &s->mix_segs);
            if (st)
                return st;
            double r = yc_rng_beta(rng, 32.0, 32.0);
            st = yc_mixup(img, &a->labels, &a->mix, &a->mix_labels, r);
            if (!st)
                st = yc_segs_append(&s->segs, &s->mix_segs);
            if (st)
                return st;
        }
    } else {
        yc_load_info li;
        yc_letterbox_info lb;
        int sh = rect ? p->rect_h : p->imgsz, sw = rect ? p->rect_w : p->imgsz;
        st = call_loader(s, load, ctx, index, true, &li);
        if (st)
            return st;
        st = yc_letterbox(&a->tile, &a->canvas, sh, sw, false, false, true, 32, &lb);
        if (st)
            return yc_error_context(st, "sample %d", index);
        st = yc_labels_copy(&a->labels, &a->tile_labels);
        if (!st)
            st = yc_segs_copy(&s->segs, &s->tile_segs);
        if (st)
            return st;
        double fw = lb.ratio_w * a->tile.w, fh = lb.ratio_h * a->tile.h;
        yc_segs_xyn2xy(&s->segs, 0, fw, fh, lb.pad_w, lb.pad_h);
        yc_labels_xywhn_to_xyxy(&a->labels, fw, fh, lb.pad_w, lb.pad_h);
        st = yc_seg_random_perspective(&a->canvas, img, &a->labels, &s->segs, &s->tmp, hyp, 0, 0,
                                       rng);
        if (st)
            return st;
    }
    yc_labels_xyxy_to_xywhn(&a->labels, img->w, img->h, true, 1e-3);
    if ((st = yc_seg_make_masks(s, mp, img->h, img->w, &a->labels, &s->segs)))
        return st;
    yc_augment_hsv(img, hyp->hsv_h, hyp->hsv_s, hyp->hsv_v, rng);
    /* the masks are flipped only when there are labels (YOLOv5's `if nl`); a zero map is the
     * same either way */
    size_t m = (size_t)s->mask_h * (size_t)s->mask_w;
    if (yc_rng_uniform(rng) < hyp->flipud) {
        yc_flip_ud(img, &a->labels);
        for (int k = 0; k < s->mask_n; k++) {
            float *mk = s->masks + (size_t)k * m;
            for (int y = 0; y < s->mask_h / 2; y++) {
                float *r0 = mk + (size_t)y * s->mask_w;
                float *r1 = mk + (size_t)(s->mask_h - 1 - y) * s->mask_w;
                for (int x = 0; x < s->mask_w; x++) {
                    float t = r0[x];
                    r0[x] = r1[x];
                    r1[x] = t;
                }
            }
        }
    }
    if (yc_rng_uniform(rng) < hyp->fliplr) {
        yc_flip_lr(img, &a->labels);
        for (int k = 0; k < s->mask_n; k++) {
            for (int y = 0; y < s->mask_h; y++) {
                float *r = s->masks + (size_t)k * m + (size_t)y * s->mask_w;
                for (int x = 0; x < s->mask_w / 2; x++) {
                    float t = r[x];
                    r[x] = r[s->mask_w - 1 - x];
                    r[s->mask_w - 1 - x] = t;
                }
            }
        }
    }
    yc_image_to_chw(img, chw);
    if (out_h)
        *out_h = img->h;
    if (out_w)
        *out_w = img->w;
    return yc_labels_copy(out, &a->labels);
}

int yc_seg_val_sample(yc_seg_scratch *s, const yc_mask_params *mp, int index, int shape_h,
                      int shape_w, yc_seg_sample_loader load, void *ctx, uint8_t *chw,
                      yc_labels *out, yc_val_info *info)
{
    yc_aug_scratch *a = &s->a;
    yc_load_info li;
    yc_letterbox_info lb;
    int st = call_loader(s, load, ctx, index, false, &li);
    if (st)
        return st;
    st = yc_letterbox(&a->tile, &a->canvas, shape_h, shape_w, false, false, false, 32, &lb);
    if (st)
        return yc_error_context(st, "sample %d", index);
    st = yc_labels_copy(out, &a->tile_labels);
    if (!st)
        st = yc_segs_copy(&s->segs, &s->tile_segs);
    if (st)
        return st;
    double fw = lb.ratio_w * a->tile.w, fh = lb.ratio_h * a->tile.h;
    yc_segs_xyn2xy(&s->segs, 0, fw, fh, lb.pad_w, lb.pad_h);
    yc_labels_xywhn_to_xyxy(out, fw, fh, lb.pad_w, lb.pad_h);
    yc_labels_xyxy_to_xywhn(out, a->canvas.w, a->canvas.h, true, 1e-3);
    if ((st = yc_seg_make_masks(s, mp, a->canvas.h, a->canvas.w, out, &s->segs)))
        return st;
    yc_image_to_chw(&a->canvas, chw);
    if (info) {
        info->h0 = li.h0;
        info->w0 = li.w0;
        info->h = li.h;
        info->w = li.w;
        info->lb = lb;
        info->ratio_h = (double)li.h / li.h0;
        info->ratio_w = (double)li.w / li.w0;
    }
    return YC_OK;
}
