/* One small case of every kernel of the OpenCL backend, for bench/oclgrind.sh: tiny shapes, views
 * with gaps between images, FP16 activations, accumulation; then the backend's two paths that are
 * not ops: YOLOv5's loss on the device (its head gradients against the host loss's, and its sums
 * without a gradient), the uint8 input upload and validation's decode with the confidence
 * filter.  Each tensor has a buffer of its own, exactly as large as its
 * elements need, so that a checker such as oclgrind sees any access past the end.  FP32 cases
 * are compared with the CPU backend (normalised error); FP16 cases run on OpenCL only.
 *
 *   bench/cl_smoke [N]      runs on OpenCL device N (default 0); exit status 1 on any failure */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cl_backend.h"
#include "half.h"
#include "log.h"
#include "loss.h"
#include "nms.h"

/* A tensor description of a case: shape, a view (gap between images), FP16 storage. */
typedef struct tdesc {
    int n, c, h, w;
    bool view, half;
    /* parameters and statistics: positive values */
    bool positive;
} tdesc;

/* One case: the op (kind, parameters) and its tensors. */
typedef struct scase {
    const char *label;
    yc_op op;
    tdesc src[YC_OP_MAX_SRC], dst[YC_OP_MAX_DST];
} scase;

static unsigned rng_state = 2463534242u;

static float next_value(bool positive)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    float u = (float)(rng_state >> 8) / 16777216.0f;
    return positive ? 0.5f + u : 2.0f * u - 1.0f;
}

/* Places `d` in a buffer of its own on `be`, filled from `vals` (FP16 values as half bits). */
static yc_tensor place(yc_backend *be, const tdesc *d, const float *vals, int *ok)
{
    yc_tensor t = yc_tensor_make(d->n, d->c, d->h, d->w, d->half ? YC_F16 : YC_F32, "t");
    size_t img = yc_tensor_image_elems(&t), es = yc_dtype_size(t.type);
    if (d->view)
        t.nstride = img + 7;
    size_t span = (size_t)(t.n - 1) * t.nstride + img;
    t.offset = 4 * es;
    t.buf = yc_buffer_alloc(be, t.offset + span * es);
    if (!t.buf) {
        fprintf(stderr, "allocation: %s\n", yc_last_error());
        *ok = 0;
        return t;
    }
    unsigned char *host = calloc(t.offset + span * es, 1);
    for (size_t i = 0; i < yc_tensor_elems(&t); i++) {
        size_t at = t.offset + (i / img * t.nstride + i % img) * es;
        if (d->half) {
            uint16_t h = yc_float_to_half(vals[i]);
            memcpy(host + at, &h, 2);
        } else {
            memcpy(host + at, &vals[i], 4);
        }
    }
    if (be->iface->buffer_write(be, t.buf, 0, host, t.offset + span * es)) {
        fprintf(stderr, "write: %s\n", yc_last_error());
        *ok = 0;
    }
    free(host);
    return t;
}

/* Runs case `k` on `be`; the FP32 dst tensors' values into out[i] (dense). */
static int run_case(yc_backend *be, const scase *k, float *const vals_src[], float *const vals_dst[],
                    float *out[])
{
    yc_op op = k->op;
    yc_tensor ts[YC_OP_MAX_SRC], td[YC_OP_MAX_DST];
    int ok = 1;
    for (int i = 0; i < YC_OP_MAX_SRC; i++)
        if (k->src[i].n) {
            ts[i] = place(be, &k->src[i], vals_src[i], &ok);
            op.src[i] = &ts[i];
        }
    for (int i = 0; i < YC_OP_MAX_DST; i++)
        if (k->dst[i].n) {
            td[i] = place(be, &k->dst[i], vals_dst[i], &ok);
            op.dst[i] = &td[i];
        }
    size_t need = ok ? be->iface->workspace(be, &op) : 0;
    yc_buffer *ws = need ? yc_buffer_alloc(be, need) : NULL;
    if (ok && (!be->iface->supports(be, &op) || yc_backend_exec(be, &op, (yc_span){ws, 0, need}) ||
               be->iface->synchronize(be))) {
        fprintf(stderr, "%s on %s: %s\n", k->label, be->iface->name, yc_last_error());
        ok = 0;
    }
    for (int i = 0; i < YC_OP_MAX_DST; i++)
        if (k->dst[i].n && ok && !k->dst[i].half && yc_tensor_get_f32(be, &td[i], out[i])) {
            fprintf(stderr, "%s: reading: %s\n", k->label, yc_last_error());
            ok = 0;
        }
    for (int i = 0; i < YC_OP_MAX_SRC; i++)
        if (k->src[i].n)
            yc_buffer_free(be, ts[i].buf);
    for (int i = 0; i < YC_OP_MAX_DST; i++)
        if (k->dst[i].n)
            yc_buffer_free(be, td[i].buf);
    yc_buffer_free(be, ws);
    return ok;
}

static size_t elems(const tdesc *d)
{
    return (size_t)d->n * d->c * d->h * d->w;
}

#define T(n, c, h, w) ((tdesc){n, c, h, w, false, false, false})
#define TV(n, c, h, w) ((tdesc){n, c, h, w, true, false, false})
#define TH(n, c, h, w) ((tdesc){n, c, h, w, true, true, false})
#define TP(n, c, h, w) ((tdesc){n, c, h, w, false, false, true})

static yc_op conv_op(yc_op_kind kind, int k, int s, int p, int acc)
{
    yc_op op = {.kind = kind, .accumulate = acc, .name = "smoke"};
    op.p.conv.kh = op.p.conv.kw = k, op.p.conv.stride_h = op.p.conv.stride_w = s;
    op.p.conv.pad_h = op.p.conv.pad_w = p, op.p.conv.groups = 1;
    return op;
}

static yc_op simple_op(yc_op_kind kind, int acc)
{
    return (yc_op){.kind = kind, .accumulate = acc, .name = "smoke"};
}

/* YOLOv5's loss on the device (yolo_loss) for 3 levels of 4x4, 2x2 and 1x1 cells, 3 anchors and 3
 * classes, batch 2, five targets: the head gradients it writes against the host loss's.  Returns
 * 1 on failure. */
static int smoke_loss(yc_backend *be)
{
    const int nl = 3, na = 3, nc = 3, no = nc + 5, B = 2, grids[3] = {4, 2, 1};
    yc_loss_params lp = {.nc = nc, .na = na, .nl = nl, .cls_pw = 1.0f, .obj_pw = 1.0f,
                         .anchor_t = 4.0f};
    static const float anchors[3][6] = {{1.25f, 1.6f, 2.0f, 3.75f, 4.1f, 2.9f},
                                        {1.9f, 3.8f, 3.9f, 2.8f, 3.7f, 7.7f},
                                        {3.6f, 2.8f, 4.9f, 6.2f, 11.6f, 10.2f}};
    memcpy(lp.anchors, anchors, sizeof anchors);
    yc_loss_params_gains(&lp, 0.05f, 1.0f, 0.5f, 64);
    const float targets[5 * 6] = {0, 0, 0.3f, 0.4f, 0.2f, 0.3f, 0, 2, 0.6f, 0.55f, 0.5f, 0.4f,
                                  1, 1, 0.25f, 0.75f, 0.1f, 0.1f, 1, 1, 0.25f, 0.75f, 0.12f, 0.1f,
                                  1, 0, 0.8f, 0.2f, 0.6f, 0.7f};
    yc_loss_ctx *ctx = yc_loss_new(&lp);
    yc_tensor heads[3], grads[3];
    float *hp[3] = {0}, *hg[3] = {0}, *dg[3] = {0};
    yc_loss_head lh[3];
    int bad = !ctx;
    for (int l = 0; l < nl && !bad; l++) {
        int g = grids[l];
        size_t n = (size_t)B * na * no * g * g;
        heads[l] = yc_tensor_make(B, na * no, g, g, YC_F32, "head");
        grads[l] = heads[l];
        heads[l].buf = yc_buffer_alloc(be, n * sizeof(float));
        grads[l].buf = yc_buffer_alloc(be, n * sizeof(float));
        hp[l] = malloc(n * sizeof(float));
        hg[l] = malloc(n * sizeof(float));
        dg[l] = malloc(n * sizeof(float));
        bad |= !heads[l].buf || !grads[l].buf || !hp[l] || !hg[l] || !dg[l];
        for (size_t i = 0; !bad && i < n; i++)
            hp[l][i] = next_value(false);
        bad |= bad || yc_tensor_set_f32(be, &heads[l], hp[l]);
        lh[l] = (yc_loss_head){.p = hp[l], .grad = hg[l], .ny = g, .nx = g,
                               .img_stride = (size_t)na * no * g * g};
    }
    yc_loss_result want;
    const yc_target_set *sets[YC_MAX_LEVELS];
    bad = bad || yc_loss_compute(ctx, B, lh, targets, 5, &want) ||
          yc_loss_build_targets(ctx, B, lh, targets, 5, sets);
    float sums[3 * 6];
    yc_yolo_loss y = {.batch = B, .nl = nl, .na = na, .nc = nc, .cls_pw = 1.0f, .obj_pw = 1.0f,
                      .cp = 1.0f, .cn = 0.0f, .sums = sums};
    for (int l = 0; l < nl && !bad; l++) {
        const yc_target_set *t = sets[l];
        yc_yolo_loss_level *v = &y.level[l];
        v->head = &heads[l], v->grad = &grads[l], v->n = t->n;
        v->b = t->b, v->a = t->a, v->gj = t->gj, v->gi = t->gi, v->cls = t->cls;
        v->tbox = t->tbox, v->anch = t->anch;
        v->gbox = t->n ? -(float)B * lp.box_gain / (float)t->n : 0.0f;
        v->gcls = t->n ? (float)B * lp.cls_gain / ((float)t->n * nc) : 0.0f;
        v->gobj = (float)B * lp.obj_gain * lp.balance[l] / (float)(B * na * grids[l] * grids[l]);
    }
    bad = bad || !be->iface->yolo_loss || be->iface->yolo_loss(be, &y) || be->iface->synchronize(be);
    double worst = 0.0;
    for (int l = 0; l < nl && !bad; l++) {
        size_t n = (size_t)B * na * no * grids[l] * grids[l];
        bad |= yc_tensor_get_f32(be, &grads[l], dg[l]);
        double num = 0.0, den = 1e-30;
        for (size_t i = 0; !bad && i < n; i++) {
            num = fmax(num, fabs((double)dg[l][i] - hg[l][i]));
            den = fmax(den, fabs((double)hg[l][i]));
        }
        worst = fmax(worst, num / den);
    }
    bad |= !(worst < 1e-4);
    printf("  %-26s %s  (head gradients against the host loss: %.2g)\n", "yolo loss",
           bad ? "FAILED" : "ok", worst);
    /* again without a gradient (validation): the same sums */
    float sums2[3 * 6];
    y.sums = sums2;
    for (int l = 0; l < nl; l++)
        y.level[l].grad = NULL;
    int bad2 = bad || be->iface->yolo_loss(be, &y) || be->iface->synchronize(be) ||
               memcmp(sums, sums2, sizeof sums) != 0;
    printf("  %-26s %s\n", "yolo loss, no gradient", bad2 ? "FAILED" : "ok");
    bad |= bad2;
    for (int l = 0; l < nl; l++) {
        if (heads[l].buf)
            yc_buffer_free(be, heads[l].buf);
        if (grads[l].buf)
            yc_buffer_free(be, grads[l].buf);
        free(hp[l]), free(hg[l]), free(dg[l]);
    }
    yc_loss_free(ctx);
    return bad;
}

/* Detect's decode with the confidence filter (detect_filter) on three levels of two images at
 * a threshold that keeps about a third of the rows, against the host's yc_detect_decode: every
 * row above it kept once, within 1e-5.  Returns 1 on failure. */
static int smoke_detect(yc_backend *be)
{
    enum { NL = 3, NA = 3, NO = 8, B = 2 };
    const int grids[NL] = {4, 2, 1};
    static const float anchors[NL * NA * 2] = {1.25f, 1.6f, 2.0f, 3.75f, 4.1f, 2.9f,
                                               1.9f, 3.8f, 3.9f, 2.8f, 3.7f, 7.7f,
                                               3.6f, 2.8f, 4.9f, 6.2f, 11.6f, 10.2f};
    yc_tensor heads[NL];
    float *hp[NL] = {0};
    yc_detect_level lv[NL];
    yc_detect_filter f = {.batch = B, .nl = NL, .na = NA, .no = NO, .anchors = anchors,
                          .conf_thres = 0.6f};
    int bad = !be->iface->detect_filter;
    for (int l = 0; l < NL && !bad; l++) {
        int g = grids[l];
        size_t n = (size_t)B * NA * NO * g * g;
        heads[l] = yc_tensor_make(B, NA * NO, g, g, YC_F32, "head");
        heads[l].buf = yc_buffer_alloc(be, n * sizeof(float));
        hp[l] = malloc(n * sizeof(float));
        bad |= !heads[l].buf || !hp[l];
        for (size_t i = 0; !bad && i < n; i++)
            hp[l][i] = next_value(false);
        bad = bad || yc_tensor_set_f32(be, &heads[l], hp[l]);
        lv[l] = (yc_detect_level){.p = hp[l], .ny = g, .nx = g, .img_stride = (size_t)NA * NO * g * g,
                                  .stride = (float)(8 << l)};
        f.head[l] = &heads[l];
        f.stride[l] = lv[l].stride;
    }
    enum { ROWS = NA * (16 + 4 + 1) };
    float host[B * ROWS * NO], rows[B * ROWS * NO];
    uint32_t ids[B * ROWS];
    char seen[B * ROWS] = {0};
    f.rows = rows, f.ids = ids, f.cap = B * ROWS;
    size_t kept = 0, want = 0;
    for (int b = 0; b < B && !bad; b++)
        bad = yc_detect_decode(lv, NL, NA, NO, anchors, b, host + (size_t)b * ROWS * NO);
    bad = bad || be->iface->detect_filter(be, &f, &kept) || kept > f.cap;
    double worst = 0;
    for (size_t i = 0; i < kept && !bad; i++) {
        bad |= ids[i] >= B * ROWS || seen[ids[i]] || !(host[ids[i] * NO + 4] > f.conf_thres);
        seen[ids[i] < B * ROWS ? ids[i] : 0] = 1;
        for (int k = 0; k < NO && !bad; k++)
            worst = fmax(worst, fabs((double)rows[i * NO + k] - host[ids[i] * NO + k]) /
                                    fmax(fabs((double)host[ids[i] * NO + k]), 1e-3));
    }
    for (int r = 0; r < B * ROWS; r++)
        want += host[r * NO + 4] > f.conf_thres;
    bad |= kept != want || !(worst < 1e-5);
    printf("  %-26s %s  (%zu of %d rows kept, against the host decode: %.2g)\n", "detect filter",
           bad ? "FAILED" : "ok", kept, B * ROWS, worst);
    for (int l = 0; l < NL; l++) {
        if (heads[l].buf)
            yc_buffer_free(be, heads[l].buf);
        free(hp[l]);
    }
    return bad;
}

/* The uint8 input upload (write_u8_scaled) into an FP32 view and an FP16 tensor against the
 * host's x / 255.  Returns 1 on failure. */
static int smoke_upload(yc_backend *be)
{
    enum { N = 2, C = 3, H = 5, W = 4 };
    uint8_t px[N * C * H * W];
    for (int i = 0; i < N * C * H * W; i++)
        px[i] = (uint8_t)(i * 37 + 11);
    int bad = !be->iface->write_u8_scaled;
    for (int half = 0; half < 2 && !bad; half++) {
        tdesc d = {N, C, H, W, !half, half == 1, false};
        float zeros[N * C * H * W] = {0}, got[N * C * H * W];
        int ok = 1;
        yc_tensor t = place(be, &d, zeros, &ok);
        bad = !ok || be->iface->write_u8_scaled(be, &t, px) || yc_tensor_get_f32(be, &t, got);
        for (int i = 0; i < N * C * H * W && !bad; i++) {
            float want = (float)px[i] / 255.0f;
            if (half)
                want = yc_half_to_float(yc_float_to_half(want));
            bad |= got[i] != want;
        }
        if (t.buf)
            yc_buffer_free(be, t.buf);
    }
    printf("  %-26s %s\n", "uint8 upload", bad ? "FAILED" : "ok");
    return bad;
}

int main(int argc, char **argv)
{
    int device = argc > 1 ? atoi(argv[1]) : 0;
    yc_op bn = simple_op(YC_OP_BN_TRAIN, 0), bnb = simple_op(YC_OP_BN_BWD, 1), bne = simple_op(YC_OP_BN_EVAL, 0);
    bn.p.bn.eps = bnb.p.bn.eps = bne.p.bn.eps = 1e-3f;
    bn.p.bn.momentum = 0.03f;
    yc_op bns = bn, bnsb = simple_op(YC_OP_BN_SILU_BWD, 0);
    bns.kind = YC_OP_BN_SILU_TRAIN;
    bnsb.p.bn.eps = 1e-3f;
    yc_op mp5 = simple_op(YC_OP_MAXPOOL, 0), mp5b = simple_op(YC_OP_MAXPOOL_BWD, 1);
    mp5.p.pool.k = mp5b.p.pool.k = 5, mp5.p.pool.stride = mp5b.p.pool.stride = 1;
    mp5.p.pool.pad = mp5b.p.pool.pad = 2;
    yc_op mp2 = simple_op(YC_OP_MAXPOOL, 0);
    mp2.p.pool.k = 2, mp2.p.pool.stride = 2;
    yc_op up = simple_op(YC_OP_UPSAMPLE, 0), upb = simple_op(YC_OP_UPSAMPLE_BWD, 1);
    up.p.up.factor = upb.p.up.factor = 2;
    yc_op fill = simple_op(YC_OP_FILL, 0);
    fill.p.fill.value = 0.25f;
    yc_op drop = simple_op(YC_OP_DROPOUT, 1);
    yc_dropout_params(&drop, 0.5, 7);
    yc_op sgd = simple_op(YC_OP_SGD, 0), adam = simple_op(YC_OP_ADAM, 0), ema = simple_op(YC_OP_EMA, 0);
    sgd.p.sgd.lr = 0.01f, sgd.p.sgd.momentum = 0.937f, sgd.p.sgd.wd = 5e-4f, sgd.p.sgd.scale = 1.0f;
    sgd.p.sgd.nesterov = 1;
    adam.p.adam.lr = 1e-3f, adam.p.adam.beta1 = 0.9f, adam.p.adam.beta2 = 0.999f, adam.p.adam.eps = 1e-8f;
    adam.p.adam.wd = 5e-4f, adam.p.adam.scale = 1.0f, adam.p.adam.step = 3;
    ema.p.ema.decay = 0.9f;
    yc_op sq = simple_op(YC_OP_SUMSQ, 1);
    yc_op sgdc = sgd;
    sgdc.p.sgd.max_norm = 0.5f;

    const scase cases[] = {
        {"conv 3x3 s2 p1 bias view", conv_op(YC_OP_CONV2D, 3, 2, 1, 0), {TV(2, 3, 7, 6), T(4, 3, 3, 3), T(1, 4, 1, 1)},
         {TV(2, 4, 4, 3)}},
        {"conv 1x1 direct", conv_op(YC_OP_CONV2D, 1, 1, 0, 0), {T(2, 3, 5, 4), T(4, 3, 1, 1)}, {T(2, 4, 5, 4)}},
        {"conv fp16", conv_op(YC_OP_CONV2D, 3, 1, 1, 0), {TH(2, 3, 5, 4), T(4, 3, 3, 3), T(1, 4, 1, 1)},
         {TH(2, 4, 5, 4)}},
        {"conv bwd-data 3x3 acc", conv_op(YC_OP_CONV2D_BWD_DATA, 3, 2, 1, 1), {TV(2, 4, 4, 3), T(4, 3, 3, 3)},
         {TV(2, 3, 7, 6)}},
        {"conv bwd-data 1x1 direct", conv_op(YC_OP_CONV2D_BWD_DATA, 1, 1, 0, 0), {T(2, 4, 5, 4), T(4, 3, 1, 1)},
         {T(2, 3, 5, 4)}},
        {"conv bwd-data 1x1 s2", conv_op(YC_OP_CONV2D_BWD_DATA, 1, 2, 0, 0), {T(2, 4, 4, 3), T(4, 3, 1, 1)},
         {T(2, 3, 7, 6)}},
        {"conv bwd-filter 3x3 db", conv_op(YC_OP_CONV2D_BWD_FILTER, 3, 2, 1, 0), {TV(2, 3, 7, 6), TV(2, 4, 4, 3)},
         {T(4, 3, 3, 3), T(1, 4, 1, 1)}},
        {"conv bwd-filter split", conv_op(YC_OP_CONV2D_BWD_FILTER, 3, 1, 1, 0), {T(2, 3, 16, 16), T(2, 4, 16, 16)},
         {T(4, 3, 3, 3)}},
        {"conv bwd-filter fp16 x", conv_op(YC_OP_CONV2D_BWD_FILTER, 1, 1, 0, 0), {TH(2, 3, 5, 4), T(2, 4, 5, 4)},
         {T(4, 3, 1, 1)}},
        {"bn train view", bn, {TV(2, 3, 5, 4), TP(1, 3, 1, 1), T(1, 3, 1, 1)},
         {TV(2, 3, 5, 4), T(2, 3, 1, 1), T(1, 3, 1, 1), TP(1, 3, 1, 1)}},
        {"bn train fp16", bn, {TH(2, 3, 5, 4), TP(1, 3, 1, 1), T(1, 3, 1, 1)},
         {TH(2, 3, 5, 4), T(2, 3, 1, 1), T(1, 3, 1, 1), TP(1, 3, 1, 1)}},
        {"bn eval", bne, {TV(2, 3, 5, 4), TP(1, 3, 1, 1), T(1, 3, 1, 1), T(1, 3, 1, 1), TP(1, 3, 1, 1)},
         {TV(2, 3, 5, 4)}},
        {"bn bwd acc", bnb, {TV(2, 3, 5, 4), TV(2, 3, 5, 4), TP(1, 3, 1, 1), TP(2, 3, 1, 1)},
         {TV(2, 3, 5, 4), T(1, 3, 1, 1), T(1, 3, 1, 1)}},
        {"bn+silu train", bns, {TV(2, 3, 5, 4), TP(1, 3, 1, 1), T(1, 3, 1, 1)},
         {TV(2, 3, 5, 4), T(2, 3, 1, 1), T(1, 3, 1, 1), TP(1, 3, 1, 1)}},
        {"bn+silu bwd", bnsb, {TV(2, 3, 5, 4), TV(2, 3, 5, 4), TP(1, 3, 1, 1), T(1, 3, 1, 1), TP(2, 3, 1, 1)},
         {TV(2, 3, 5, 4), T(1, 3, 1, 1), T(1, 3, 1, 1)}},
        {"silu fp16", simple_op(YC_OP_SILU, 0), {TH(2, 3, 5, 4)}, {TH(2, 3, 5, 4)}},
        {"silu", simple_op(YC_OP_SILU, 0), {TV(2, 3, 5, 4)}, {T(2, 3, 5, 4)}},
        {"silu bwd acc", simple_op(YC_OP_SILU_BWD, 1), {TV(2, 3, 5, 4), TV(2, 3, 5, 4)}, {TV(2, 3, 5, 4)}},
        {"add", simple_op(YC_OP_ADD, 0), {TV(2, 3, 5, 4), T(2, 3, 5, 4)}, {TV(2, 3, 5, 4)}},
        {"copy acc", simple_op(YC_OP_COPY, 1), {TV(2, 3, 5, 4)}, {T(2, 3, 5, 4)}},
        {"copy fp16 to fp32", simple_op(YC_OP_COPY, 0), {TH(2, 3, 5, 4)}, {T(2, 3, 5, 4)}},
        {"fill", fill, {{0}}, {TV(2, 3, 5, 4)}},
        {"maxpool k5 s1 p2", mp5, {TV(2, 3, 6, 5)}, {TV(2, 3, 6, 5)}},
        {"maxpool k2 s2", mp2, {T(2, 3, 6, 5)}, {T(2, 3, 3, 2)}},
        {"maxpool bwd acc", mp5b, {TV(2, 3, 6, 5), TV(2, 3, 6, 5)}, {TV(2, 3, 6, 5)}},
        {"upsample", up, {TV(2, 3, 4, 3)}, {TV(2, 3, 8, 6)}},
        {"upsample bwd acc", upb, {TV(2, 3, 8, 6)}, {TV(2, 3, 4, 3)}},
        {"dropout acc view", drop, {TV(2, 3, 4, 3)}, {TV(2, 3, 4, 3)}},
        {"sgd", sgd, {T(1, 37, 1, 1)}, {T(1, 37, 1, 1), T(1, 37, 1, 1)}},
        {"sgd clipped on the device", sgdc, {T(1, 37, 1, 1), TP(1, 1, 1, 1)},
         {T(1, 37, 1, 1), T(1, 37, 1, 1)}},
        {"adam", adam, {T(1, 37, 1, 1)}, {T(1, 37, 1, 1), T(1, 37, 1, 1), TP(1, 37, 1, 1)}},
        {"ema", ema, {T(1, 37, 1, 1)}, {T(1, 37, 1, 1)}},
        {"sumsq", sq, {T(3, 5, 7, 1)}, {T(1, 1, 1, 1)}},
        {"sumsq fp16", sq, {(tdesc){3, 5, 7, 1, false, true, false}}, {T(1, 1, 1, 1)}},
    };
    yc_backend *cl = NULL, *cpu = NULL;
    if (yc_backend_opencl_new(&cl, device) || yc_backend_cpu_new(&cpu, 1)) {
        fprintf(stderr, "cl_smoke: %s\n", yc_last_error());
        return 1;
    }
    printf("cl_smoke on %s\n", cl->info.name);
    int failures = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const scase *c = &cases[k];
        float *vs[YC_OP_MAX_SRC] = {0}, *vd[YC_OP_MAX_DST] = {0}, *o_cl[YC_OP_MAX_DST] = {0},
              *o_cpu[YC_OP_MAX_DST] = {0};
        bool half = false;
        for (int i = 0; i < YC_OP_MAX_SRC; i++)
            if (c->src[i].n) {
                vs[i] = malloc(elems(&c->src[i]) * sizeof(float));
                for (size_t j = 0; j < elems(&c->src[i]); j++)
                    vs[i][j] = next_value(c->src[i].positive);
                half |= c->src[i].half;
            }
        for (int i = 0; i < YC_OP_MAX_DST; i++)
            if (c->dst[i].n) {
                size_t n = elems(&c->dst[i]);
                vd[i] = malloc(n * sizeof(float));
                o_cl[i] = malloc(n * sizeof(float));
                o_cpu[i] = malloc(n * sizeof(float));
                for (size_t j = 0; j < n; j++)
                    vd[i][j] = next_value(c->dst[i].positive);
                half |= c->dst[i].half;
            }
        int ok = run_case(cl, c, vs, vd, o_cl);
        double worst = 0.0;
        if (ok && !half && run_case(cpu, c, vs, vd, o_cpu)) {
            for (int i = 0; i < YC_OP_MAX_DST; i++)
                if (c->dst[i].n) {
                    double num = 0.0, den = 1e-30;
                    for (size_t j = 0; j < elems(&c->dst[i]); j++) {
                        num = fmax(num, fabs((double)o_cl[i][j] - o_cpu[i][j]));
                        den = fmax(den, fabs((double)o_cpu[i][j]));
                    }
                    worst = fmax(worst, num / den);
                }
            if (!(worst < 1e-4))
                ok = 0;
        }
        printf("  %-26s %s", c->label, ok ? "ok" : "FAILED");
        if (ok && !half)
            printf("  (against the CPU backend: %.2g)", worst);
        printf("\n");
        failures += !ok;
        for (int i = 0; i < YC_OP_MAX_SRC; i++)
            free(vs[i]);
        for (int i = 0; i < YC_OP_MAX_DST; i++)
            free(vd[i]), free(o_cl[i]), free(o_cpu[i]);
    }
    int extra = smoke_loss(cl) + smoke_upload(cl) + smoke_detect(cl);
    yc_backend_free(cpu);
    yc_backend_free(cl);
    printf("cl_smoke: %d of %zu cases failed\n", failures + extra, sizeof cases / sizeof cases[0] + 3);
    return failures + extra ? 1 : 0;
}
