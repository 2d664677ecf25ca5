/* YOLOv5 v7.0's segmentation loss on the host (see loss_seg.h; docs/YOLOV5.md 2.6).
 *
 * The detection terms are loss.c's (yc_loss_compute with lp.nm set: it zeroes the gradient of the
 * mask coefficients); this file adds the mask term of utils/segment/loss.py with overlap=True or
 * False, single_mask_loss and crop_mask of utils/segment/general.py:
 *
 *   build_targets also gives each assignment its target's 1-based index within its image (tidx:
 *   the rows of image 0, then image 1, ... numbered 1, 2, ...) and the target's normalised box
 *   xywhn = (gxy, gwh) / gain, both in float32 as PyTorch computes them;
 *   mxyxy = xywh2xyxy(xywhn * (W, H, W, H)); marea = w_n * h_n;
 *   per image b with assignments J at level l:
 *     pred  = coefficients[J] (|J| x nm) @ proto[b] (nm x H*W)
 *     gt    = (masks[b] == tidx[J])       overlap: tidx = 1-based index within the image
 *     gt    = masks[tidx[J]]              no overlap: tidx = the target row (0-based)
 *     term  = mean over H*W of crop(BCEWithLogits(pred, gt), mxyxy[J]) / marea[J]   (|J| values)
 *     lseg += mean(term)
 *   lseg *= box_gain / bs.
 *
 * Pixels outside the crop add nothing to the loss nor to the gradient, so only the box's pixels
 * are computed.  With d = sigmoid(pred) - gt and the weight w_e = box_gain / (|J| * H*W * marea_e)
 * (d total / d per-pixel loss, total = bs * (... + lseg)):
 *   d total / d coefficient_e[k]  = sum over the crop of w_e d(p) proto[b, k, p]
 *   d total / d proto[b, k, p]   += w_e d(p) coefficient_e[k]   over the assignments e of image b.
 * The float32 box arithmetic must not be contracted into FMAs (-std=c11 implies
 * -ffp-contract=off); the sums are in double. */
#include "loss_seg.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct yc_seg_loss_ctx {
    /* the detection terms and the assignments */
    yc_loss_ctx *det;
    yc_loss_params lp;
    /* per target row: its 1-based index within its image (nt) */
    int *tidx;
    size_t tidx_cap;
    /* assignments per (level, image): count[l * batch + b] */
    int *count;
    size_t count_cap;
    /* d total / d mask coefficients of every assignment, levels one after the other: nm each */
    double *dcoef;
    size_t dcoef_cap;
    /* the masks resized to the prototypes' size (when they differ) */
    float *mask;
    size_t mask_cap;
    /* one image's prototype gradient (nm x H*W), and per crop row: logits, their gradient, and the
     * assignment's coefficients (nm) */
    double *pg, *z, *dz, *coef;
    size_t pg_cap, z_cap, dz_cap, coef_cap;
};

yc_seg_loss_ctx *yc_seg_loss_new(const yc_loss_params *lp)
{
    if (lp->nm < 1) {
        yc_error_status(YC_EFORMAT, "segmentation loss: nm = %d, must be at least 1", lp->nm);
        return NULL;
    }
    yc_seg_loss_ctx *ctx = yc_calloc(1, sizeof *ctx, "segmentation loss");
    if (!ctx)
        return NULL;
    ctx->lp = *lp;
    if (!(ctx->det = yc_loss_new(lp))) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

void yc_seg_loss_free(yc_seg_loss_ctx *ctx)
{
    if (!ctx)
        return;
    yc_loss_free(ctx->det);
    free(ctx->tidx);
    free(ctx->count);
    free(ctx->dcoef);
    free(ctx->mask);
    free(ctx->pg);
    free(ctx->z);
    free(ctx->dz);
    free(ctx->coef);
    free(ctx);
}

/* Makes *p hold n elements of size elem (contents not kept). */
static int reserve(void **p, size_t *cap, size_t n, size_t elem, const char *what)
{
    if (n <= *cap)
        return YC_OK;
    void *q = yc_malloc(n * elem, what);
    if (!q)
        return YC_ENOMEM;
    free(*p);
    *p = q;
    *cap = n;
    return YC_OK;
}

/* PyTorch's nearest source index (upsample_nearest2d's nearest_idx without scale factors). */
static int nearest_src(int out_index, int in_size, int out_size)
{
    if (in_size == out_size)
        return out_index;
    if (out_size == 2 * in_size)
        return out_index >> 1;
    const float scale = (float)in_size / (float)out_size;
    int s = (int)floorf((float)out_index * scale);
    return s < in_size - 1 ? s : in_size - 1;
}

/* The pixel indices i in [0, n) with lo <= i < hi, as crop_mask compares float32 aranges: the
 * range [*a, *b) (empty when *a == *b). */
static void crop_range(float lo, float hi, int n, int *a, int *b)
{
    int i = 0;
    while (i < n && !((float)i >= lo))
        i++;
    int j = i;
    while (j < n && (float)j < hi)
        j++;
    *a = i;
    *b = j;
}

/* BCEWithLogits(z, y) = max(z, 0) - z y + log(1 + exp(-|z|)); *d = sigmoid(z) - y. */
static inline double bce_logits(double z, double y, double *d)
{
    const double e = exp(-fabs(z));
    *d = (z >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e)) - y;
    return (z > 0 ? z : 0.0) - z * y + log1p(e);
}

/* One assignment's mask term: the sum over its crop [x0, x1) x [y0, y1) of the BCE of the
 * logits coef @ proto (proto: the image's nm x h*w prototypes) against mask == tid (mask: the
 * image's h*w map), or against the mask's values as they are when tid < 0 (a target's own mask,
 * no overlap).  With wgt > 0 the gradient wgt * d is added to dcoef (nm) and pg (nm x h*w). */
static double mask_term(yc_seg_loss_ctx *ctx, const float *proto, const float *mask, int w,
                        size_t hw, int nm, float tid, int x0, int x1, int y0, int y1, double wgt,
                        double *dcoef, double *pg)
{
    const double *coef = ctx->coef;
    double *z = ctx->z, *dz = ctx->dz, sum = 0;
    const int cw = x1 - x0;
    for (int y = y0; y < y1; y++) {
        const size_t row = (size_t)y * (size_t)w + (size_t)x0;
        for (int i = 0; i < cw; i++)
            z[i] = 0;
        /* logits of the row: (1 x nm) @ (nm x cw) */
        for (int k = 0; k < nm; k++) {
            const float *pk = proto + (size_t)k * hw + row;
            const double ck = coef[k];
            for (int i = 0; i < cw; i++)
                z[i] += ck * (double)pk[i];
        }
        const float *mr = mask + row;
        if (tid < 0)
            for (int i = 0; i < cw; i++)
                sum += bce_logits(z[i], (double)mr[i], &dz[i]);
        else
            for (int i = 0; i < cw; i++)
                sum += bce_logits(z[i], mr[i] == tid ? 1.0 : 0.0, &dz[i]);
        if (!(wgt > 0))
            continue;
        for (int i = 0; i < cw; i++)
            dz[i] *= wgt;
        for (int k = 0; k < nm; k++) {
            const float *pk = proto + (size_t)k * hw + row;
            double *gk = pg + (size_t)k * hw + row, acc = 0;
            const double ck = coef[k];
            for (int i = 0; i < cw; i++) {
                acc += dz[i] * (double)pk[i];
                gk[i] += dz[i] * ck;
            }
            dcoef[k] += acc;
        }
    }
    return sum;
}

yc_loss_ctx *yc_seg_loss_det(yc_seg_loss_ctx *ctx)
{
    return ctx->det;
}

int yc_seg_loss_compute(yc_seg_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                        const yc_seg_proto *proto, const float *targets, int nt,
                        const yc_seg_masks *masks, yc_seg_loss_result *result)
{
    return yc_seg_loss_compute_part(ctx, batch, heads, proto, targets, nt, masks, NULL, result);
}

int yc_seg_loss_compute_part(yc_seg_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                             const yc_seg_proto *proto, const float *targets, int nt,
                             const yc_seg_masks *masks, const yc_loss_part *part,
                             yc_seg_loss_result *result)
{
    const yc_loss_params *lp = &ctx->lp;
    const int nl = lp->nl, nc = lp->nc, nm = lp->nm;
    const size_t no = (size_t)nc + 5 + (size_t)nm;
    if (!proto || !proto->p || proto->h < 1 || proto->w < 1)
        return yc_error_status(YC_EFORMAT, "segmentation loss: no prototypes");
    /* assignments of every level (checks the targets and the grids) */
    const yc_target_set *sets[YC_MAX_LEVELS];
    int st = yc_loss_build_targets(ctx->det, batch, heads, targets, nt, sets);
    if (st)
        return st;
    for (int l = 0; l < nl; l++) {
        if (!heads[l].p)
            return yc_error_status(YC_EFORMAT, "loss: level %d has no output data", l);
        const size_t need = (size_t)lp->na * no * (size_t)heads[l].ny * (size_t)heads[l].nx;
        if (heads[l].img_stride < need)
            return yc_error_status(YC_EFORMAT, "loss: level %d image stride %zu is smaller than "
                                   "na*no*ny*nx = %zu", l, heads[l].img_stride, need);
    }
    const int H = proto->h, W = proto->w;
    const size_t hw = (size_t)H * (size_t)W;
    size_t total = 0;
    for (int l = 0; l < nl; l++)
        total += (size_t)sets[l]->n;
    if (total > 0 && (!masks || !masks->m || masks->h < 1 || masks->w < 1))
        return yc_error_status(YC_EFORMAT, "segmentation loss: targets without masks");
    const bool per_target = masks && masks->per_target;
    /* the maps: one per image (overlap) or one per target row */
    const int nmaps = per_target ? nt : batch;

    if ((st = reserve((void **)&ctx->tidx, &ctx->tidx_cap, (size_t)nt + 1, sizeof(int),
                      "segmentation loss")) ||
        (st = reserve((void **)&ctx->count, &ctx->count_cap, (size_t)nl * (size_t)batch,
                      sizeof(int), "segmentation loss")) ||
        (st = reserve((void **)&ctx->dcoef, &ctx->dcoef_cap, total * (size_t)nm + 1,
                      sizeof(double), "segmentation loss")) ||
        (st = reserve((void **)&ctx->z, &ctx->z_cap, (size_t)W, sizeof(double),
                      "segmentation loss")) ||
        (st = reserve((void **)&ctx->dz, &ctx->dz_cap, (size_t)W, sizeof(double),
                      "segmentation loss")) ||
        (st = reserve((void **)&ctx->coef, &ctx->coef_cap, (size_t)nm, sizeof(double),
                      "segmentation loss")))
        return st;
    /* gradients wanted: the prototypes' are accumulated image by image in pg */
    bool want_grad = proto->grad != NULL;
    for (int l = 0; l < nl; l++)
        want_grad |= heads[l].grad != NULL;
    if (want_grad && (st = reserve((void **)&ctx->pg, &ctx->pg_cap, (size_t)nm * hw,
                                   sizeof(double), "segmentation loss")))
        return st;

    /* tidx: build_targets' ti, torch.arange(num_i) + 1 per image concatenated over the images,
     * read by row position (the same as each row's rank within its image when the rows are
     * sorted by image, as the data loader's are); without overlap each row's own mask (the
     * target value -1 tells mask_term to take the mask's values) */
    int pos = 0;
    for (int b = 0; b < batch && !per_target; b++) {
        int num = 0;
        for (int t = 0; t < nt; t++)
            num += (int)targets[(size_t)t * 6] == b;
        for (int k = 0; k < num; k++)
            ctx->tidx[pos++] = k + 1;
    }

    /* masks at the prototypes' size (F.interpolate(masks[None], (H, W), mode="nearest")) */
    const float *mk = masks ? masks->m : NULL;
    if (mk && (masks->h != H || masks->w != W)) {
        if ((st = reserve((void **)&ctx->mask, &ctx->mask_cap, (size_t)nmaps * hw + 1,
                          sizeof(float), "segmentation masks")))
            return st;
        for (int b = 0; b < nmaps; b++)
            for (int y = 0; y < H; y++) {
                const float *src = mk + ((size_t)b * (size_t)masks->h +
                                         (size_t)nearest_src(y, masks->h, H)) * (size_t)masks->w;
                float *dst = ctx->mask + ((size_t)b * (size_t)H + (size_t)y) * (size_t)W;
                for (int x = 0; x < W; x++)
                    dst[x] = src[nearest_src(x, masks->w, W)];
            }
        mk = ctx->mask;
    }

    memset(ctx->count, 0, (size_t)nl * (size_t)batch * sizeof *ctx->count);
    for (int l = 0; l < nl; l++)
        for (int e = 0; e < sets[l]->n; e++)
            ctx->count[(size_t)l * (size_t)batch + (size_t)sets[l]->b[e]]++;
    memset(ctx->dcoef, 0, total * (size_t)nm * sizeof *ctx->dcoef);

    /* image by image, so that an image's prototype gradient is complete (and written) before the
     * next image's is started */
    const double gain = (double)lp->box_gain;
    double lseg = 0;
    for (int b = 0; b < batch; b++) {
        const float *pb = proto->p + (size_t)b * (size_t)nm * hw;
        const float *mb = mk && !per_target ? mk + (size_t)b * hw : NULL;
        if (want_grad)
            memset(ctx->pg, 0, (size_t)nm * hw * sizeof *ctx->pg);
        size_t first = 0; /* the level's first assignment in dcoef */
        for (int l = 0; l < nl; first += (size_t)sets[l]->n, l++) {
            const yc_target_set *s = sets[l];
            const int cnt = ctx->count[(size_t)l * (size_t)batch + (size_t)b];
            if (cnt == 0)
                continue;
            const yc_loss_head *h = &heads[l];
            const size_t plane = (size_t)h->ny * (size_t)h->nx;
            const float fnx = (float)h->nx, fny = (float)h->ny;
            double sum = 0;
            for (int e = 0; e < s->n; e++) {
                if (s->b[e] != b)
                    continue;
                const float *r = targets + (size_t)s->t[e] * 6;
                /* xywhn = (targets * gain)[2:6] / gain[2:6] in float32, then at proto scale */
                const float xn = r[2] * fnx / fnx, yn = r[3] * fny / fny;
                const float wn = r[4] * fnx / fnx, hn = r[5] * fny / fny;
                const float xs = xn * (float)W, ys = yn * (float)H;
                const float ws = wn * (float)W, hs = hn * (float)H;
                const float area = wn * hn;
                int x0, x1, y0, y1;
                crop_range(xs - ws / 2, xs + ws / 2, W, &x0, &x1);
                crop_range(ys - hs / 2, ys + hs / 2, H, &y0, &y1);
                const float *pe = h->p + (size_t)b * h->img_stride + (size_t)s->a[e] * no * plane +
                                  (size_t)s->gj[e] * (size_t)h->nx + (size_t)s->gi[e];
                for (int k = 0; k < nm; k++)
                    ctx->coef[k] = (double)pe[(size_t)(5 + nc + k) * plane];
                /* the term's weight in the total: box_gain / (|J| * H*W * marea) */
                const double scale = 1.0 / ((double)cnt * (double)hw * (double)area);
                const double wgt = want_grad ? gain * scale : 0.0;
                const float *me = per_target ? mk + (size_t)s->t[e] * hw : mb;
                const float tid = per_target ? -1.0f : (float)ctx->tidx[s->t[e]];
                if (x1 > x0 && y1 > y0)
                    sum += scale * mask_term(ctx, pb, me, W, hw, nm, tid, x0, x1, y0, y1, wgt,
                                             ctx->dcoef + (first + (size_t)e) * (size_t)nm,
                                             ctx->pg);
            }
            lseg += sum;
        }
        if (proto->grad) {
            float *gb = proto->grad + (size_t)b * (size_t)nm * hw;
            for (size_t i = 0; i < (size_t)nm * hw; i++)
                gb[i] = (float)ctx->pg[i];
        }
    }

    /* the detection terms: they read every head value before writing its gradient, and zero the
     * coefficients' gradients, to which the mask term's are added after */
    yc_loss_result dr;
    if ((st = yc_loss_compute_part(ctx->det, batch, heads, targets, nt, part, &dr)))
        return st;
    size_t first = 0;
    for (int l = 0; l < nl; first += (size_t)sets[l]->n, l++) {
        const yc_loss_head *h = &heads[l];
        if (!h->grad)
            continue;
        const yc_target_set *s = sets[l];
        const size_t plane = (size_t)h->ny * (size_t)h->nx;
        for (int e = 0; e < s->n; e++) {
            float *ge = h->grad + (size_t)s->b[e] * h->img_stride + (size_t)s->a[e] * no * plane +
                        (size_t)s->gj[e] * (size_t)h->nx + (size_t)s->gi[e];
            const double *dc = ctx->dcoef + (first + (size_t)e) * (size_t)nm;
            /* += : an (image, anchor, cell) assigned twice gets both gradients */
            for (int k = 0; k < nm; k++)
                ge[(size_t)(5 + nc + k) * plane] += (float)dc[k];
        }
    }
    if (result) {
        const double bs = (double)batch;
        result->box = dr.box;
        result->obj = dr.obj;
        result->cls = dr.cls;
        /* a part's share: gain / whole batch * its own sum; the total's mask part is gain times
         * the sum either way */
        const double whole = part ? (double)part->batch : bs;
        result->seg = gain / whole * lseg;
        result->total = dr.total + gain * lseg;
    }
    return YC_OK;
}
