/* YOLOv5 v7.0 ComputeLoss (utils/loss.py) on the host, forward and analytic backward.
 *
 * Everything here follows docs/YOLOV5.md section 2; the section numbers below refer to it.
 *
 * Precision: build_targets is computed in float32 exactly as PyTorch does it (the cell indices
 * and the ratio test depend on float32 rounding, so this file must not be built with
 * floating-point contraction; GCC's -std=c11 implies -ffp-contract=off).  The losses and their
 * gradients are computed and accumulated in double; each gradient value is stored as float32.
 *
 * Measured against the PyTorch reference step (tests/test_loss.c): assignments bit-identical,
 * loss parts within 1.3e-7 relative, head gradients within 3e-7 of max|grad|. */
#include "loss.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* focal loss alpha (YOLOv5's FocalLoss default, fixed) */
#define YC_FOCAL_ALPHA 0.25
/* eps of bbox_iou (section 2.4) */
#define YC_CIOU_EPS 1e-7
#define YC_PI 3.14159265358979323846

struct yc_loss_ctx {
    yc_loss_params lp;
    /* per level assignments (owned, growing) */
    yc_target_set sets[YC_MAX_LEVELS];
    /* build_targets scratch: the (anchor, target) pairs that pass the ratio test, as a*nt + t,
     * and for each the candidate slots it uses (bit s = slot s of section 2.2 step 3) */
    int *pair;
    unsigned char *slots;
    size_t pair_cap;
    /* objectness targets of one level, bs*na*ny*nx, kept all zero between uses */
    double *tobj;
    size_t tobj_cap;
    /* gradients of the assigned entries of one level, n x (4 + nc): computed before any
     * gradient is written, so that the gradient may overwrite the logits (in place) */
    double *egrad;
    size_t egrad_cap;
};

void yc_loss_params_gains(yc_loss_params *lp, float hyp_box, float hyp_obj, float hyp_cls,
                          int imgsz)
{
    /* train.py (section 2.5): hyp['box'] *= 3/nl; hyp['cls'] *= nc/80*3/nl;
     * hyp['obj'] *= (imgsz/640)^2*3/nl, computed in Python doubles. */
    double layers = 3.0 / (double)lp->nl;
    double s = (double)imgsz / 640.0;
    lp->box_gain = (float)((double)hyp_box * layers);
    lp->cls_gain = (float)((double)hyp_cls * (double)lp->nc / 80.0 * layers);
    lp->obj_gain = (float)((double)hyp_obj * s * s * layers);

    /* ComputeLoss.balance = {3: [4.0, 1.0, 0.4]}.get(nl, [4.0, 1.0, 0.25, 0.06, 0.02])
     * (section 2.1). YOLOv5 has no weights beyond five levels (it would fail with an IndexError);
     * levels past the fifth get the last weight, 0.02. */
    static const float b3[3] = {4.0f, 1.0f, 0.4f};
    static const float bn[5] = {4.0f, 1.0f, 0.25f, 0.06f, 0.02f};
    for (int l = 0; l < YC_MAX_LEVELS; l++) {
        if (lp->nl == 3)
            lp->balance[l] = l < 3 ? b3[l] : 0.0f;
        else
            lp->balance[l] = l < lp->nl ? bn[l < 5 ? l : 4] : 0.0f;
    }
}

static int check_params(const yc_loss_params *lp)
{
    if (lp->nc < 1)
        return yc_error_status(YC_EFORMAT, "loss: nc = %d, must be at least 1", lp->nc);
    if (lp->na < 1 || lp->na > YC_MAX_ANCHORS)
        return yc_error_status(YC_EFORMAT, "loss: na = %d, must be in [1, %d]", lp->na,
                               YC_MAX_ANCHORS);
    if (lp->nm < 0 || lp->nm > 1 << 20)
        return yc_error_status(YC_EFORMAT, "loss: nm = %d, must be in [0, %d]", lp->nm, 1 << 20);
    if (lp->nl < 1 || lp->nl > YC_MAX_LEVELS)
        return yc_error_status(YC_EFORMAT, "loss: nl = %d, must be in [1, %d]", lp->nl,
                               YC_MAX_LEVELS);
    for (int i = 0; i < lp->nl * lp->na * 2; i++) {
        float v = lp->anchors[i];
        if (!isfinite(v) || v <= 0.0f)
            return yc_error_status(
                YC_EFORMAT, "loss: anchor %d of level %d has %s %g (must be finite and > 0)",
                i / 2 % lp->na, i / 2 / lp->na, i % 2 ? "height" : "width", (double)v);
    }
    if (!isfinite(lp->anchor_t) || lp->anchor_t <= 0.0f)
        return yc_error_status(YC_EFORMAT, "loss: anchor_t = %g, must be > 0",
                               (double)lp->anchor_t);
    if (!isfinite(lp->cls_pw) || lp->cls_pw < 0.0f || !isfinite(lp->obj_pw) || lp->obj_pw < 0.0f)
        return yc_error_status(YC_EFORMAT, "loss: cls_pw = %g, obj_pw = %g, must be >= 0",
                               (double)lp->cls_pw, (double)lp->obj_pw);
    if (!isfinite(lp->label_smoothing) || lp->label_smoothing < 0.0f || lp->label_smoothing > 1.0f)
        return yc_error_status(YC_EFORMAT, "loss: label_smoothing = %g, must be in [0, 1]",
                               (double)lp->label_smoothing);
    if (!isfinite(lp->fl_gamma) || lp->fl_gamma < 0.0f)
        return yc_error_status(YC_EFORMAT, "loss: fl_gamma = %g, must be >= 0",
                               (double)lp->fl_gamma);
    if (!isfinite(lp->box_gain) || !isfinite(lp->obj_gain) || !isfinite(lp->cls_gain))
        return yc_error_status(YC_EFORMAT, "loss: the box/obj/cls gains must be finite");
    for (int l = 0; l < lp->nl; l++)
        if (!isfinite(lp->balance[l]))
            return yc_error_status(YC_EFORMAT, "loss: balance[%d] is not finite", l);
    return YC_OK;
}

yc_loss_ctx *yc_loss_new(const yc_loss_params *lp)
{
    if (check_params(lp) != YC_OK)
        return NULL;
    yc_loss_ctx *ctx = yc_calloc(1, sizeof *ctx, "loss context");
    if (!ctx)
        return NULL;
    ctx->lp = *lp;
    return ctx;
}

const yc_loss_params *yc_loss_params_of(const yc_loss_ctx *ctx)
{
    return &ctx->lp;
}

static void set_free(yc_target_set *s)
{
    free(s->b);
    free(s->a);
    free(s->gj);
    free(s->gi);
    free(s->cls);
    free(s->t);
    free(s->tbox);
    free(s->anch);
    memset(s, 0, sizeof *s);
}

void yc_loss_free(yc_loss_ctx *ctx)
{
    if (!ctx)
        return;
    for (int l = 0; l < YC_MAX_LEVELS; l++)
        set_free(&ctx->sets[l]);
    free(ctx->pair);
    free(ctx->slots);
    free(ctx->tobj);
    free(ctx->egrad);
    free(ctx);
}

/* Grows one realloc'd array; on failure the old block stays valid and in place. */
static int grow(void **p, size_t n, size_t elem, const char *what)
{
    void *q = yc_realloc(*p, n * elem, what);
    if (!q)
        return YC_ENOMEM;
    *p = q;
    return YC_OK;
}

/* Makes room for n assignments.  cap only rises once every array has the new size. */
static int set_reserve(yc_target_set *s, int n)
{
    if (n <= s->cap)
        return YC_OK;
    size_t cap = (size_t)n;
    if (cap < 2 * (size_t)s->cap)
        cap = 2 * (size_t)s->cap;
    if (cap < 64)
        cap = 64;
    if (cap > INT32_MAX)
        cap = (size_t)n;
    if (grow((void **)&s->b, cap, sizeof(int), "loss assignments") ||
        grow((void **)&s->a, cap, sizeof(int), "loss assignments") ||
        grow((void **)&s->gj, cap, sizeof(int), "loss assignments") ||
        grow((void **)&s->gi, cap, sizeof(int), "loss assignments") ||
        grow((void **)&s->cls, cap, sizeof(int), "loss assignments") ||
        grow((void **)&s->t, cap, sizeof(int), "loss assignments") ||
        grow((void **)&s->tbox, cap * 4, sizeof(float), "loss assignments") ||
        grow((void **)&s->anch, cap * 2, sizeof(float), "loss assignments"))
        return YC_ENOMEM;
    s->cap = (int)cap;
    return YC_OK;
}

static int check_targets(int batch, int nc, const float *targets, int nt)
{
    if (nt < 0)
        return yc_error_status(YC_EFORMAT, "loss: negative target count %d", nt);
    if (nt > 0 && !targets)
        return yc_error_status(YC_EFORMAT, "loss: %d targets but no target array", nt);
    for (int t = 0; t < nt; t++) {
        const float *r = targets + (size_t)t * 6;
        for (int k = 0; k < 6; k++)
            if (!isfinite(r[k]))
                return yc_error_status(YC_EFORMAT,
                                       "loss: target row %d (image %g, class %g, x %g, y %g, "
                                       "w %g, h %g): value %d is not finite",
                                       t, (double)r[0], (double)r[1], (double)r[2], (double)r[3],
                                       (double)r[4], (double)r[5], k);
        if (r[0] < 0.0f || r[0] >= (float)batch || r[0] != floorf(r[0]))
            return yc_error_status(YC_EFORMAT,
                                   "loss: target row %d: image index %g is not an integer in "
                                   "[0, %d)",
                                   t, (double)r[0], batch);
        if (r[1] < 0.0f || r[1] >= (float)nc || r[1] != floorf(r[1]))
            return yc_error_status(YC_EFORMAT,
                                   "loss: target row %d: class %g is not an integer in [0, %d)", t,
                                   (double)r[1], nc);
        if (r[4] < 0.0f || r[5] < 0.0f)
            return yc_error_status(YC_EFORMAT, "loss: target row %d: negative size w %g, h %g", t,
                                   (double)r[4], (double)r[5]);
    }
    return YC_OK;
}

static int check_heads(const yc_loss_params *lp, const yc_loss_head *heads, bool need_data)
{
    if (!heads)
        return yc_error_status(YC_EFORMAT, "loss: no head outputs");
    size_t no = (size_t)lp->nc + 5 + (size_t)lp->nm;
    for (int l = 0; l < lp->nl; l++) {
        const yc_loss_head *h = &heads[l];
        if (h->ny < 1 || h->nx < 1)
            return yc_error_status(YC_EFORMAT, "loss: level %d has a %d x %d grid", l, h->ny,
                                   h->nx);
        if (!need_data)
            continue;
        if (!h->p)
            return yc_error_status(YC_EFORMAT, "loss: level %d has no output data", l);
        size_t need = (size_t)lp->na * no * (size_t)h->ny * (size_t)h->nx;
        if (h->img_stride < need)
            return yc_error_status(YC_EFORMAT,
                                   "loss: level %d image stride %zu is smaller than na*no*ny*nx = "
                                   "%zu",
                                   l, h->img_stride, need);
    }
    return YC_OK;
}

/* Number of set bits of a slot mask (at most 5). */
static inline int count_slots(unsigned bits)
{
    int n = 0;
    for (; bits; bits &= bits - 1)
        n++;
    return n;
}

/* Float32 remainder by 1 as torch.remainder(x, 1) computes it: x - floor(x), in [0, 1). */
static inline float frac1(float x)
{
    return x - floorf(x);
}

/* trunc(v) (Tensor.long()) then clamp to [0, n-1] (clamp_), without converting an out-of-range
 * float to int. */
static inline int trunc_clamp(float v, int n)
{
    float t = truncf(v);
    if (t < 0.0f)
        return 0;
    if (t > (float)(n - 1))
        return n - 1;
    return (int)t;
}

/* build_targets (section 2.2) without the input checks. */
static int build_targets(yc_loss_ctx *ctx, const yc_loss_head *heads, const float *targets, int nt)
{
    const yc_loss_params *lp = &ctx->lp;
    const int na = lp->na;
    size_t npairs = (size_t)na * (size_t)nt;
    if ((size_t)nt > (size_t)INT32_MAX / 5 / (size_t)na)
        return yc_error_status(YC_EFORMAT, "loss: too many targets (%d)", nt);
    if (npairs > ctx->pair_cap) {
        if (grow((void **)&ctx->pair, npairs, sizeof(int), "loss target pairs") ||
            grow((void **)&ctx->slots, npairs, 1, "loss target pairs"))
            return YC_ENOMEM;
        ctx->pair_cap = npairs;
    }
    /* cell offsets of the five slots, g = 0.5: centre, left (j), up (k), right (l), down (m) */
    static const float off[5][2] = {
        {0.0f, 0.0f}, {0.5f, 0.0f}, {0.0f, 0.5f}, {-0.5f, 0.0f}, {0.0f, -0.5f}};
    const float g = 0.5f;

    for (int l = 0; l < lp->nl; l++) {
        yc_target_set *s = &ctx->sets[l];
        const int ny = heads[l].ny, nx = heads[l].nx;
        const float fnx = (float)nx, fny = (float)ny;
        s->n = 0;

        /* Targets replicated per anchor, anchor-major (step 1); t = targets * gain in float32;
         * the ratio test keeps a pair iff max(r, 1/r) over w and h < anchor_t, strictly
         * (step 3). */
        int np = 0, total = 0;
        for (int a = 0; a < na; a++) {
            const float aw = lp->anchors[(l * na + a) * 2 + 0];
            const float ah = lp->anchors[(l * na + a) * 2 + 1];
            for (int t = 0; t < nt; t++) {
                const float *r = targets + (size_t)t * 6;
                float rw = r[4] * fnx / aw, rh = r[5] * fny / ah;
                float iw = 1.0f / rw, ih = 1.0f / rh;
                float m = fmaxf(fmaxf(rw, iw), fmaxf(rh, ih));
                if (!(m < lp->anchor_t))
                    continue;
                /* neighbour conditions on gxy and gxi = (nx, ny) - gxy: frac < 0.5 and > 1 */
                float gx = r[2] * fnx, gy = r[3] * fny;
                float gxi = fnx - gx, gyi = fny - gy;
                unsigned char bits = 1;
                if (frac1(gx) < g && gx > 1.0f)
                    bits |= 2;
                if (frac1(gy) < g && gy > 1.0f)
                    bits |= 4;
                if (frac1(gxi) < g && gxi > 1.0f)
                    bits |= 8;
                if (frac1(gyi) < g && gyi > 1.0f)
                    bits |= 16;
                ctx->pair[np] = a * nt + t;
                ctx->slots[np] = bits;
                np++;
                total += count_slots(bits);
            }
        }
        int st = set_reserve(s, total);
        if (st != YC_OK)
            return st;

        /* t.repeat((5, 1, 1))[j]: slot-major, then the surviving pairs in order.  The cell is
         * trunc(gxy - offset), clamped in place, and tbox = (gxy - clamped cell, gwh). */
        int n = 0;
        for (int slot = 0; slot < 5; slot++) {
            for (int i = 0; i < np; i++) {
                if (!(ctx->slots[i] & (1u << slot)))
                    continue;
                const int a = ctx->pair[i] / nt, t = ctx->pair[i] % nt;
                const float *r = targets + (size_t)t * 6;
                float gx = r[2] * fnx, gy = r[3] * fny;
                int gi = trunc_clamp(gx - off[slot][0], nx);
                int gj = trunc_clamp(gy - off[slot][1], ny);
                s->b[n] = (int)r[0];
                s->cls[n] = (int)r[1];
                s->t[n] = t;
                s->a[n] = a;
                s->gj[n] = gj;
                s->gi[n] = gi;
                s->tbox[n * 4 + 0] = gx - (float)gi;
                s->tbox[n * 4 + 1] = gy - (float)gj;
                s->tbox[n * 4 + 2] = r[4] * fnx;
                s->tbox[n * 4 + 3] = r[5] * fny;
                s->anch[n * 2 + 0] = lp->anchors[(l * na + a) * 2 + 0];
                s->anch[n * 2 + 1] = lp->anchors[(l * na + a) * 2 + 1];
                n++;
            }
        }
        s->n = n;
    }
    return YC_OK;
}

int yc_loss_build_targets(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                          const float *targets, int nt, const yc_target_set **sets)
{
    const yc_loss_params *lp = &ctx->lp;
    if (batch < 1)
        return yc_error_status(YC_EFORMAT, "loss: batch size %d", batch);
    int st = check_heads(lp, heads, false);
    if (st == YC_OK)
        st = check_targets(batch, lp->nc, targets, nt);
    if (st == YC_OK)
        st = build_targets(ctx, heads, targets, nt);
    if (st != YC_OK)
        return st;
    if (sets)
        for (int l = 0; l < lp->nl; l++)
            sets[l] = &ctx->sets[l];
    return YC_OK;
}

/* d min(a, b)/da and d max(a, b)/da as PyTorch's minimum/maximum backward: 1 when a is the
 * chosen side, 0 when b is, and 1/2 to each on a tie. */
static inline double dmin_a(double a, double b)
{
    return a < b ? 1.0 : (a == b ? 0.5 : 0.0);
}

static inline double dmax_a(double a, double b)
{
    return a > b ? 1.0 : (a == b ? 0.5 : 0.0);
}

double yc_loss_ciou(const double pbox[4], const double tbox[4], double dpbox[4])
{
    /* Section 2.4, box 1 = prediction (x1, y1, w1, h1), box 2 = target; bbox_iou(xywh=True). */
    const double x1 = pbox[0], y1 = pbox[1], w1 = pbox[2], h1 = pbox[3];
    const double x2 = tbox[0], y2 = tbox[1], w2 = tbox[2], h2 = tbox[3];
    const double eps = YC_CIOU_EPS;
    const double w1_ = w1 / 2, h1_ = h1 / 2, w2_ = w2 / 2, h2_ = h2 / 2;
    const double b1x1 = x1 - w1_, b1x2 = x1 + w1_, b1y1 = y1 - h1_, b1y2 = y1 + h1_;
    const double b2x1 = x2 - w2_, b2x2 = x2 + w2_, b2y1 = y2 - h2_, b2y2 = y2 + h2_;

    /* inter = (min(x2) - max(x1)).clamp(0) * (min(y2) - max(y1)).clamp(0) */
    const double iwr = fmin(b1x2, b2x2) - fmax(b1x1, b2x1);
    const double ihr = fmin(b1y2, b2y2) - fmax(b1y1, b2y1);
    const double iw = iwr > 0.0 ? iwr : 0.0, ih = ihr > 0.0 ? ihr : 0.0;
    const double inter = iw * ih;
    const double uni = w1 * h1 + w2 * h2 - inter + eps;
    const double iou = inter / uni;
    /* smallest enclosing box */
    const double cw = fmax(b1x2, b2x2) - fmin(b1x1, b2x1);
    const double ch = fmax(b1y2, b2y2) - fmin(b1y1, b2y1);
    const double c2 = cw * cw + ch * ch + eps;
    const double dx = b2x1 + b2x2 - b1x1 - b1x2, dy = b2y1 + b2y2 - b1y1 - b1y2;
    const double rho2 = (dx * dx + dy * dy) / 4;
    /* aspect term, no eps in the ratios; alpha is computed under no_grad */
    const double k = 4.0 / (YC_PI * YC_PI);
    const double da = atan(w2 / h2) - atan(w1 / h1);
    const double v = k * da * da;
    const double alpha = v / (v - iou + (1 + eps));
    const double ciou = iou - (rho2 / c2 + v * alpha);
    if (!dpbox)
        return ciou;

    /* Backward of ciou with respect to (x1, y1, w1, h1). */
    const double g_iou = 1.0, g_rho2 = -1.0 / c2, g_c2 = rho2 / (c2 * c2), g_v = -alpha;
    double g_inter = g_iou / uni;
    const double g_uni = -g_iou * inter / (uni * uni);
    double g_w1 = g_uni * h1, g_h1 = g_uni * w1;
    g_inter -= g_uni;
    /* clamp(0) passes the gradient where its input is >= 0 */
    const double g_iwr = iwr >= 0.0 ? g_inter * ih : 0.0;
    const double g_ihr = ihr >= 0.0 ? g_inter * iw : 0.0;
    double g_b1x1 = 0, g_b1x2 = 0, g_b1y1 = 0, g_b1y2 = 0;
    g_b1x2 += g_iwr * dmin_a(b1x2, b2x2);
    g_b1x1 -= g_iwr * dmax_a(b1x1, b2x1);
    g_b1y2 += g_ihr * dmin_a(b1y2, b2y2);
    g_b1y1 -= g_ihr * dmax_a(b1y1, b2y1);
    const double g_cw = g_c2 * 2 * cw, g_ch = g_c2 * 2 * ch;
    g_b1x2 += g_cw * dmax_a(b1x2, b2x2);
    g_b1x1 -= g_cw * dmin_a(b1x1, b2x1);
    g_b1y2 += g_ch * dmax_a(b1y2, b2y2);
    g_b1y1 -= g_ch * dmin_a(b1y1, b2y1);
    /* rho2: d/d b1x1 = d/d b1x2 = -dx/2 */
    g_b1x1 -= g_rho2 * dx / 2;
    g_b1x2 -= g_rho2 * dx / 2;
    g_b1y1 -= g_rho2 * dy / 2;
    g_b1y2 -= g_rho2 * dy / 2;
    /* v = k (atan(w2/h2) - atan(w1/h1))^2; d atan(w/h)/dw = h/(w^2+h^2), /dh = -w/(w^2+h^2) */
    const double g_da = g_v * 2 * k * da;
    const double r2 = w1 * w1 + h1 * h1;
    g_w1 -= g_da * h1 / r2;
    g_h1 += g_da * w1 / r2;
    /* corners: b1x1 = x1 - w1/2, b1x2 = x1 + w1/2 */
    dpbox[0] = g_b1x1 + g_b1x2;
    dpbox[1] = g_b1y1 + g_b1y2;
    dpbox[2] = g_w1 + (g_b1x2 - g_b1x1) / 2;
    dpbox[3] = g_h1 + (g_b1y2 - g_b1y1) / 2;
    return ciou;
}

/* Numerically stable sigmoid(x) and 1 - sigmoid(x) = sigmoid(-x). */
static inline void sigmoid2(double x, double *s, double *sn)
{
    if (x >= 0) {
        double e = exp(-x);
        *s = 1.0 / (1.0 + e);
        *sn = e / (1.0 + e);
    } else {
        double e = exp(x);
        *s = e / (1.0 + e);
        *sn = 1.0 / (1.0 + e);
    }
}

/* The per-element loss and its derivative of the BCE used by ComputeLoss (section 2.1):
 * binary_cross_entropy_with_logits with pos_weight pw,
 *   l = (1 - y) x + (1 + (pw - 1) y) softplus(-x),   softplus(-x) = log1p(exp(-|x|)) + max(-x, 0)
 *   dl/dx = (1 - y) - (1 + (pw - 1) y) sigmoid(-x)   (= (1 + (pw-1)y) sigmoid(x) - pw y),
 * optionally wrapped in FocalLoss(gamma, alpha = 0.25):
 *   L = l * alpha_t * q^gamma,  q = 1 - p_t = y sigmoid(-x) + (1 - y) sigmoid(x),
 *   alpha_t = y alpha + (1 - y)(1 - alpha),  dq/dx = (1 - 2y) sigmoid(x) sigmoid(-x);
 * the modulating factor is not detached in YOLOv5, so its derivative is included. */
static inline double bce_elem(double x, double y, double pw, double gamma, double *dx)
{
    /* one exp(-|x|) serves the sigmoid pair and softplus */
    const double e = exp(-fabs(x));
    const double s = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    const double sn = x >= 0 ? e / (1.0 + e) : 1.0 / (1.0 + e);
    const double spn = log1p(e) + (x < 0 ? -x : 0.0);
    const double lw = (pw - 1.0) * y + 1.0;
    double l = (1.0 - y) * x + lw * spn;
    double d = (1.0 - y) - lw * sn;
    if (gamma > 0) {
        const double q = y * sn + (1.0 - y) * s;
        const double at = y * YC_FOCAL_ALPHA + (1.0 - y) * (1.0 - YC_FOCAL_ALPHA);
        const double mf = pow(q, gamma);
        /* q = 0 only when the sigmoid saturates; the derivative of q^gamma is then taken as 0 */
        const double dmf = q > 0 ? gamma * pow(q, gamma - 1.0) * (1.0 - 2.0 * y) * s * sn : 0.0;
        d = at * (d * mf + l * dmf);
        l = l * at * mf;
    }
    *dx = d;
    return l;
}

int yc_loss_part_of(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads, const float *targets,
                    int nt, yc_loss_part *part)
{
    const yc_target_set *sets[YC_MAX_LEVELS];
    memset(part, 0, sizeof *part);
    int st = yc_loss_build_targets(ctx, batch, heads, targets, nt, sets);
    if (st)
        return st;
    part->batch = batch;
    for (int l = 0; l < ctx->lp.nl; l++)
        part->ntargets[l] = sets[l]->n;
    return YC_OK;
}

int yc_loss_compute(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads, const float *targets,
                    int nt, yc_loss_result *result)
{
    return yc_loss_compute_part(ctx, batch, heads, targets, nt, NULL, result);
}

int yc_loss_compute_part(yc_loss_ctx *ctx, int batch, const yc_loss_head *heads,
                         const float *targets, int nt, const yc_loss_part *part,
                         yc_loss_result *result)
{
    const yc_loss_params *lp = &ctx->lp;
    if (batch < 1)
        return yc_error_status(YC_EFORMAT, "loss: batch size %d", batch);
    if (part && part->batch < batch)
        return yc_error_status(YC_EFORMAT, "loss: a part of %d images of a batch of %d", batch,
                               part->batch);
    int st = check_heads(lp, heads, true);
    if (st == YC_OK)
        st = check_targets(batch, lp->nc, targets, nt);
    if (st == YC_OK)
        st = build_targets(ctx, heads, targets, nt);
    if (st != YC_OK)
        return st;
    for (int l = 0; part && l < lp->nl; l++)
        if (ctx->sets[l].n > part->ntargets[l])
            return yc_error_status(YC_EFORMAT, "loss: level %d of a part has %d assignments, more "
                                   "than the %d of its whole batch", l, ctx->sets[l].n,
                                   part->ntargets[l]);

    const int na = lp->na, nc = lp->nc;
    const size_t no = (size_t)nc + 5 + (size_t)lp->nm;
    /* the batch the means are over (the whole batch for a part) */
    const double bs = part ? (double)part->batch : (double)batch;
    const double cls_pw = lp->cls_pw, obj_pw = lp->obj_pw, gamma = lp->fl_gamma;
    /* smooth_BCE(eps): positive 1 - 0.5 eps, negative 0.5 eps, stored as float32 targets */
    const double cp = (double)(float)(1.0 - 0.5 * (double)lp->label_smoothing);
    const double cn = (double)(float)(0.5 * (double)lp->label_smoothing);

    size_t cells_max = 0;
    for (int l = 0; l < lp->nl; l++) {
        size_t c = (size_t)batch * (size_t)na * (size_t)heads[l].ny * (size_t)heads[l].nx;
        if (c > cells_max)
            cells_max = c;
    }
    if (cells_max > ctx->tobj_cap) {
        double *p = yc_calloc(cells_max, sizeof *p, "loss objectness targets");
        if (!p)
            return YC_ENOMEM;
        free(ctx->tobj);
        ctx->tobj = p;
        ctx->tobj_cap = cells_max;
    }

    double lbox = 0, lobj = 0, lcls = 0;
    for (int l = 0; l < lp->nl; l++) {
        const yc_loss_head *h = &heads[l];
        const yc_target_set *s = &ctx->sets[l];
        const int ny = h->ny, nx = h->nx, n = s->n;
        /* the assignments the box and class means are over */
        const double nmean = part ? (double)part->ntargets[l] : (double)n;
        const size_t plane = (size_t)ny * (size_t)nx;
        float *grad = h->grad;
        double *tobj = ctx->tobj;
        /* gradient values per entry: 4 box values, then nc class values when nc > 1 */
        const size_t ew = 4 + (nc > 1 ? (size_t)nc : 0);
        if (grad && (size_t)n * ew > ctx->egrad_cap) {
            double *e = yc_realloc(ctx->egrad, (size_t)n * ew * sizeof *e, "loss gradients");
            if (!e)
                return YC_ENOMEM;
            ctx->egrad = e;
            ctx->egrad_cap = (size_t)n * ew;
        }

        if (n > 0) {
            /* Section 2.3: lbox += mean(1 - CIoU), lcls += mean over n*nc of the class BCE.
             * The total is bs*(box_gain*lbox + ...), so d total / d CIoU_e = -bs*box_gain/n and
             * d total / d class logit = bs*cls_gain/(n*nc) * dl/dx.  Every logit is read here,
             * before any gradient is written. */
            const double gbox = -bs * (double)lp->box_gain / nmean;
            const double gcls = bs * (double)lp->cls_gain / (nmean * (double)nc);
            double sbox = 0, scls = 0;
            for (int e = 0; e < n; e++) {
                const size_t cell = (size_t)s->gj[e] * (size_t)nx + (size_t)s->gi[e];
                const size_t off =
                    (size_t)s->b[e] * h->img_stride + (size_t)s->a[e] * no * plane + cell;
                const float *pe = h->p + off;
                const double aw = s->anch[e * 2 + 0], ah = s->anch[e * 2 + 1];
                /* pxy = 2 sigmoid - 0.5, pwh = (2 sigmoid)^2 * anchor (section 2.3) */
                double sg[4], sgn[4];
                for (int k = 0; k < 4; k++)
                    sigmoid2((double)pe[(size_t)k * plane], &sg[k], &sgn[k]);
                const double pbox[4] = {2 * sg[0] - 0.5, 2 * sg[1] - 0.5, 4 * sg[2] * sg[2] * aw,
                                        4 * sg[3] * sg[3] * ah};
                const double tb[4] = {s->tbox[e * 4 + 0], s->tbox[e * 4 + 1], s->tbox[e * 4 + 2],
                                      s->tbox[e * 4 + 3]};
                double dpb[4];
                const double ciou = yc_loss_ciou(pbox, tb, grad ? dpb : NULL);
                sbox += 1.0 - ciou;
                /* tobj[b, a, gj, gi] = CIoU.detach().clamp(0) (gr = 1).  Duplicate cells: entries
                 * are written in assignment order, so the last one wins, as PyTorch's index_put_
                 * does on the CPU (the reference); on CUDA the winner is unspecified. */
                tobj[((size_t)s->b[e] * (size_t)na + (size_t)s->a[e]) * plane + cell] =
                    ciou > 0 ? ciou : 0.0;
                double *eg = grad ? ctx->egrad + (size_t)e * ew : NULL;
                if (eg) {
                    /* chain through the decoding: dpxy/dt = 2 s (1 - s),
                     * dpwh/dt = 8 s^2 (1 - s) anchor */
                    const double dt[4] = {2 * sg[0] * sgn[0], 2 * sg[1] * sgn[1],
                                          8 * sg[2] * sg[2] * sgn[2] * aw,
                                          8 * sg[3] * sg[3] * sgn[3] * ah};
                    for (int k = 0; k < 4; k++)
                        eg[k] = gbox * dpb[k] * dt[k];
                }
                if (nc > 1) {
                    for (int c = 0; c < nc; c++) {
                        const size_t ci = (size_t)(5 + c) * plane;
                        double d;
                        scls +=
                            bce_elem((double)pe[ci], c == s->cls[e] ? cp : cn, cls_pw, gamma, &d);
                        if (eg)
                            eg[4 + c] = gcls * d;
                    }
                }
            }
            lbox += sbox / nmean;
            if (nc > 1)
                lcls += scls / (nmean * (double)nc);
        }

        /* every box, class (and mask coefficient) gradient starts at zero (the objectness
         * channel is written whole below, each value after its logit is read) */
        for (int b = 0; grad && b < batch; b++)
            for (int a = 0; a < na; a++)
                for (size_t k = 0; k < no; k++)
                    if (k != 4)
                        memset(grad + (size_t)b * h->img_stride + ((size_t)a * no + k) * plane, 0,
                               plane * sizeof *grad);

        /* Objectness: balance_l * mean over all bs*na*ny*nx cells of BCE(obj logit, tobj). */
        const double ncell = bs * (double)na * (double)plane;
        const double gobj = bs * (double)lp->obj_gain * (double)lp->balance[l] / ncell;
        double sobj = 0;
        for (int b = 0; b < batch; b++) {
            for (int a = 0; a < na; a++) {
                const size_t base = (size_t)b * h->img_stride + ((size_t)a * no + 4) * plane;
                const float *po = h->p + base;
                const double *to = tobj + ((size_t)b * (size_t)na + (size_t)a) * plane;
                float *go = grad ? grad + base : NULL;
                for (size_t i = 0; i < plane; i++) {
                    double d;
                    sobj += bce_elem((double)po[i], to[i], obj_pw, gamma, &d);
                    if (go)
                        go[i] = (float)(gobj * d);
                }
            }
        }
        lobj += (double)lp->balance[l] * sobj / ncell;
        /* the assigned entries' gradients: += so duplicates accumulate, as the backward of
         * advanced indexing does */
        for (int e = 0; grad && e < n; e++) {
            const size_t off = (size_t)s->b[e] * h->img_stride + (size_t)s->a[e] * no * plane +
                               (size_t)s->gj[e] * (size_t)nx + (size_t)s->gi[e];
            const double *eg = ctx->egrad + (size_t)e * ew;
            for (int k = 0; k < 4; k++)
                grad[off + (size_t)k * plane] += (float)eg[k];
            for (int c = 0; nc > 1 && c < nc; c++)
                grad[off + (size_t)(5 + c) * plane] += (float)eg[4 + c];
        }
        /* back to all zeros for the next level / call */
        for (int e = 0; e < n; e++)
            tobj[((size_t)s->b[e] * (size_t)na + (size_t)s->a[e]) * plane +
                 (size_t)s->gj[e] * (size_t)nx + (size_t)s->gi[e]] = 0.0;
    }

    /* Section 2.5: gains, then total = bs * (box + obj + cls). */
    if (result) {
        result->box = (double)lp->box_gain * lbox;
        result->obj = (double)lp->obj_gain * lobj;
        result->cls = (double)lp->cls_gain * lcls;
        result->total = bs * (result->box + result->obj + result->cls);
    }
    return YC_OK;
}
