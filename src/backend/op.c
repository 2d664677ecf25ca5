/* Op names and shape checks (see backend.h).
 *
 * yc_op_check validates an op without touching memory: the slots its kind uses are set and the
 * others NULL, shapes agree with each other and with the op's parameters, parameters and their
 * gradients are dense FP32, and FP16 appears only in activation slots (see may_be_f16): gradients,
 * parameters, statistics and optimizer state are always FP32.  Buffers are not looked at (the
 * planner checks ops before it places tensors); backends check placement themselves before exec. */
#include "backend.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

/* The slots an op kind uses: names for messages, and which of them may be NULL. */
typedef struct op_sig {
    /* yc_op_kind_name() */
    const char *name;
    /* role of each slot as backend.h names it; NULL: the slot is unused */
    const char *src[YC_OP_MAX_SRC];
    const char *dst[YC_OP_MAX_DST];
    /* bit i set: src[i] / dst[i] may be NULL */
    unsigned src_optional, dst_optional;
    /* honours yc_op.accumulate */
    bool acc;
} op_sig;

static const op_sig op_sigs[YC_OP_COUNT] = {
    [YC_OP_CONV2D] = {"conv2d", {"x", "W", "b"}, {"y"}, 1u << 2, 0, false},
    [YC_OP_CONV2D_BWD_DATA] = {"conv2d_bwd_data", {"dy", "W"}, {"dx"}, 0, 0, true},
    [YC_OP_CONV2D_BWD_FILTER] = {"conv2d_bwd_filter", {"x", "dy"}, {"dW", "db"}, 0, 1u << 1, false},
    [YC_OP_BN_TRAIN] =
        {"bn_train", {"x", "gamma", "beta"}, {"y", "stats", "running_mean", "running_var"}, 0, 0, false},
    [YC_OP_BN_EVAL] = {"bn_eval", {"x", "gamma", "beta", "running_mean", "running_var"}, {"y"}, 0, 0, false},
    [YC_OP_BN_BWD] = {"bn_bwd", {"dy", "x", "gamma", "stats"}, {"dx", "dgamma", "dbeta"}, 0, 0, true},
    [YC_OP_BN_SILU_TRAIN] =
        {"bn_silu_train", {"x", "gamma", "beta"}, {"a", "stats", "running_mean", "running_var"}, 0, 0, false},
    [YC_OP_BN_SILU_APPLY] = {"bn_silu_apply", {"x", "gamma", "beta", "stats"}, {"a"}, 0, 0, false},
    [YC_OP_BN_SILU_BWD] =
        {"bn_silu_bwd", {"da", "x", "gamma", "beta", "stats"}, {"dx", "dgamma", "dbeta"}, 0, 0, true},
    [YC_OP_SILU] = {"silu", {"x"}, {"y"}, 0, 0, false},
    [YC_OP_SILU_BWD] = {"silu_bwd", {"dy", "x"}, {"dx"}, 0, 0, true},
    [YC_OP_ADD] = {"add", {"a", "b"}, {"y"}, 0, 0, false},
    [YC_OP_COPY] = {"copy", {"a"}, {"y"}, 0, 0, true},
    [YC_OP_FILL] = {"fill", {NULL}, {"y"}, 0, 0, false},
    [YC_OP_MAXPOOL] = {"maxpool", {"x"}, {"y"}, 0, 0, false},
    [YC_OP_MAXPOOL_BWD] = {"maxpool_bwd", {"dy", "x"}, {"dx"}, 0, 0, true},
    [YC_OP_UPSAMPLE] = {"upsample", {"x"}, {"y"}, 0, 0, false},
    [YC_OP_UPSAMPLE_BWD] = {"upsample_bwd", {"dy"}, {"dx"}, 0, 0, true},
    [YC_OP_AVGPOOL] = {"avgpool", {"x"}, {"y"}, 0, 0, false},
    [YC_OP_AVGPOOL_BWD] = {"avgpool_bwd", {"dy"}, {"dx"}, 0, 0, true},
    [YC_OP_DROPOUT] = {"dropout", {"x"}, {"y"}, 0, 0, true},
    [YC_OP_SGD] = {"sgd", {"grad", "sumsq"}, {"w", "buf"}, 1u << 1, 0, false},
    [YC_OP_ADAM] = {"adam", {"grad", "sumsq"}, {"w", "m", "v"}, 1u << 1, 0, false},
    [YC_OP_EMA] = {"ema", {"x"}, {"e"}, 0, 0, false},
    [YC_OP_SUMSQ] = {"sumsq", {"x"}, {"s"}, 0, 0, true},
};

void yc_dropout_params(yc_op *op, double p, uint32_t seed)
{
    double t = p * 4294967296.0;
    op->p.drop.threshold = t <= 0 ? 0 : t >= 4294967295.0 ? UINT32_MAX : (uint32_t)t;
    op->p.drop.seed = seed;
    op->p.drop.scale = (float)(1.0 / (1.0 - p));
}

const char *yc_op_kind_name(yc_op_kind kind)
{
    if ((int)kind < 0 || kind >= YC_OP_COUNT)
        return "unknown";
    return op_sigs[kind].name;
}

/* "(n,c,h,w)" */
static const char *shape_str(const yc_tensor *t, char *buf, size_t len)
{
    snprintf(buf, len, "(%d,%d,%d,%d)", t->n, t->c, t->h, t->w);
    return buf;
}

/* Context of one check: the op and the prefix of its messages ("conv2d 'model.0.conv'"). */
typedef struct checker {
    /* the op under check */
    const yc_op *op;
    /* "<kind>" or "<kind> '<name>'" */
    char who[192];
} checker;

static int fail(const checker *ck, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records "<op> '<name>': <message>" and returns YC_EFORMAT. */
static int fail(const checker *ck, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return yc_error_status(YC_EFORMAT, "%s: %s", ck->who, msg);
}

/* Shape of `t` is (n,c,h,w); `role` names it and `why` says where the expected shape comes from. */
static int expect_shape(const checker *ck, const char *role, const yc_tensor *t, int n, int c, int h, int w,
                        const char *why)
{
    if (t->n == n && t->c == c && t->h == h && t->w == w)
        return YC_OK;
    char a[64], b[64];
    yc_tensor want = {.n = n, .c = c, .h = h, .w = w};
    return fail(ck, "%s %s should be %s (%s)", role, shape_str(t, a, sizeof a), shape_str(&want, b, sizeof b),
                why);
}

static int expect_same(const checker *ck, const char *role, const yc_tensor *t, const char *ref_role,
                       const yc_tensor *ref)
{
    if (t->n == ref->n && t->c == ref->c && t->h == ref->h && t->w == ref->w)
        return YC_OK;
    char a[64], b[64];
    return fail(ck, "%s %s does not match %s %s", role, shape_str(t, a, sizeof a), ref_role,
                shape_str(ref, b, sizeof b));
}

/* A per-channel vector (1,c,1,1). */
static int expect_vec(const checker *ck, const char *role, const yc_tensor *t, int c, const char *ref_role)
{
    char why[96];
    snprintf(why, sizeof why, "one value per channel of %s", ref_role);
    return expect_shape(ck, role, t, 1, c, 1, 1, why);
}

/* Checks every tensor on its own: positive shape, one image addressable with int indices, known
 * dtype, nstride large enough; parameters (`param`) must be dense FP32, and only activation slots
 * (`f16`) may be FP16. */
static int check_tensor(const checker *ck, const char *role, const yc_tensor *t, bool param, bool f16)
{
    char s[64];
    if (t->n < 1 || t->c < 1 || t->h < 1 || t->w < 1)
        return fail(ck, "%s has an empty or negative shape %s", role, shape_str(t, s, sizeof s));
    if (yc_tensor_image_elems(t) > INT_MAX)
        return fail(ck, "%s %s: one image has more than 2^31-1 elements", role, shape_str(t, s, sizeof s));
    if (t->type != YC_F32 && t->type != YC_F16)
        return fail(ck, "%s has an unknown element type", role);
    if (t->n > 1 && t->nstride < yc_tensor_image_elems(t))
        return fail(ck, "%s %s has nstride %zu < c*h*w = %zu", role, shape_str(t, s, sizeof s), t->nstride,
                    yc_tensor_image_elems(t));
    if (param && t->type != YC_F32)
        return fail(ck, "%s is a parameter, statistic or gradient and must be FP32", role);
    if (!f16 && t->type == YC_F16)
        return fail(ck, "%s must be FP32 (FP16 is for activations, never gradients)", role);
    if (param && !yc_tensor_dense(t))
        return fail(ck, "%s is a parameter, statistic or gradient and must be dense", role);
    return YC_OK;
}

/* Output size of a window op along one axis; -1 when the window does not fit. */
static int window_out(int in, int k, int stride, int pad)
{
    long span = (long)in + 2L * pad - k;
    if (span < 0)
        return -1;
    return (int)(span / stride + 1);
}

/* x (N,C,H,W), W (K,C/g,R,S), y (N,K,P,Q), b (1,K,1,1) or NULL. */
static int check_conv(const checker *ck, const char *xr, const yc_tensor *x, const char *wr,
                      const yc_tensor *w, const char *yr, const yc_tensor *y, const char *br,
                      const yc_tensor *b)
{
    const yc_op *op = ck->op;
    int kh = op->p.conv.kh, kw = op->p.conv.kw, sh = op->p.conv.stride_h, sw = op->p.conv.stride_w;
    int ph = op->p.conv.pad_h, pw = op->p.conv.pad_w, g = op->p.conv.groups;
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0 || g < 1)
        return fail(ck, "invalid parameters: kernel %dx%d, stride %dx%d, padding %dx%d, groups %d", kh, kw,
                    sh, sw, ph, pw, g);
    if (w->h != kh || w->w != kw)
        return fail(ck, "%s is %dx%d but the op says kernel %dx%d", wr, w->h, w->w, kh, kw);
    if (x->c % g != 0 || w->n % g != 0 || w->c * g != x->c) {
        char a[64], c[64];
        return fail(ck, "%s %s and %s %s do not agree on input channels (groups %d)", wr,
                    shape_str(w, a, sizeof a), xr, shape_str(x, c, sizeof c), g);
    }
    int P = window_out(x->h, kh, sh, ph), Q = window_out(x->w, kw, sw, pw);
    if (P < 1 || Q < 1) {
        char a[64];
        return fail(ck, "kernel %dx%d with padding %dx%d does not fit %s %s", kh, kw, ph, pw, xr,
                    shape_str(x, a, sizeof a));
    }
    char why[160], a[64];
    snprintf(why, sizeof why, "%s %s, %s (%d,%d,%d,%d), stride %dx%d, padding %dx%d", xr,
             shape_str(x, a, sizeof a), wr, w->n, w->c, w->h, w->w, sh, sw, ph, pw);
    int rc = expect_shape(ck, yr, y, x->n, w->n, P, Q, why);
    if (rc == YC_OK && b)
        rc = expect_vec(ck, br, b, w->n, wr);
    return rc;
}

/* The tensors of an optimizer op (src[0] and every dst) hold the same number of elements; their
 * shapes may differ (they are flat ranges of arenas, usually (1,N,1,1)). */
static int check_flat(const checker *ck)
{
    const yc_op *op = ck->op;
    const op_sig *sig = &op_sigs[op->kind];
    size_t n = yc_tensor_elems(op->src[0]);
    for (int i = 0; i < YC_OP_MAX_DST; i++)
        if (op->dst[i] && yc_tensor_elems(op->dst[i]) != n) {
            char a[64], b[64];
            return fail(ck, "%s %s has %zu elements but %s %s has %zu", sig->dst[i],
                        shape_str(op->dst[i], a, sizeof a), yc_tensor_elems(op->dst[i]), sig->src[0],
                        shape_str(op->src[0], b, sizeof b), n);
        }
    return YC_OK;
}

/* The optional sum of squares of the optimizer ops: one dense FP32 value, and then a clipping
 * norm that is finite and > 0. */
static int check_sumsq(const checker *ck, float max_norm)
{
    const yc_tensor *s = ck->op->src[1];
    if (!s)
        return YC_OK;
    if (s->type != YC_F32 || !yc_tensor_dense(s) || yc_tensor_elems(s) != 1)
        return fail(ck, "sumsq must be one dense FP32 value");
    if (!(isfinite(max_norm) && max_norm > 0.0f))
        return fail(ck, "invalid max_norm %g with sumsq (must be finite and > 0)", (double)max_norm);
    return YC_OK;
}

/* A finite value >= 0 (false for NaN). */
static bool nonneg(float v)
{
    return isfinite(v) && v >= 0.0f;
}

/* A value in [0, 1) (false for NaN). */
static bool unit_open(float v)
{
    return v >= 0.0f && v < 1.0f;
}

static int check_kind(const checker *ck)
{
    const yc_op *op = ck->op;
    const yc_tensor *const *s = op->src;
    const yc_tensor *const *d = op->dst;
    int rc = YC_OK;
    switch (op->kind) {
    case YC_OP_CONV2D:
        return check_conv(ck, "x", s[0], "W", s[1], "y", d[0], "b", s[2]);
    case YC_OP_CONV2D_BWD_DATA:
        if (op->p.conv.silu || op->p.conv.frozen)
            return fail(ck, "silu and frozen weights are forward convolutions' only");
        return check_conv(ck, "dx", d[0], "W", s[1], "dy", s[0], NULL, NULL);
    case YC_OP_CONV2D_BWD_FILTER:
        if (op->p.conv.silu || op->p.conv.frozen)
            return fail(ck, "silu and frozen weights are forward convolutions' only");
        return check_conv(ck, "x", s[0], "dW", d[0], "dy", s[1], "db", d[1]);
    case YC_OP_BN_TRAIN:
    case YC_OP_BN_EVAL:
    case YC_OP_BN_BWD:
    case YC_OP_BN_SILU_TRAIN:
    case YC_OP_BN_SILU_BWD: {
        float eps = op->p.bn.eps, mom = op->p.bn.momentum;
        bool train = op->kind == YC_OP_BN_TRAIN || op->kind == YC_OP_BN_SILU_TRAIN;
        bool bwd = op->kind == YC_OP_BN_BWD || op->kind == YC_OP_BN_SILU_BWD;
        if (!(eps >= 0.0f) || (train && !(mom >= 0.0f && mom <= 1.0f)))
            return fail(ck, "invalid parameters: eps %g, momentum %g", (double)eps, (double)mom);
        const yc_tensor *x = bwd ? s[1] : s[0];
        const char *xr = "x";
        if (train) {
            if ((long)x->n * x->h * x->w < 2)
                return fail(ck, "training batch norm needs more than one value per channel");
            if ((rc = expect_vec(ck, "gamma", s[1], x->c, xr)) ||
                (rc = expect_vec(ck, "beta", s[2], x->c, xr)) ||
                (rc = expect_same(ck, op_sigs[op->kind].dst[0], d[0], xr, x)) ||
                (rc = expect_shape(ck, "stats", d[1], 2, x->c, 1, 1, "mean and 1/std per channel of x")) ||
                (rc = expect_vec(ck, "running_mean", d[2], x->c, xr)) ||
                (rc = expect_vec(ck, "running_var", d[3], x->c, xr)))
                return rc;
        } else if (op->kind == YC_OP_BN_EVAL) {
            if ((rc = expect_vec(ck, "gamma", s[1], x->c, xr)) ||
                (rc = expect_vec(ck, "beta", s[2], x->c, xr)) ||
                (rc = expect_vec(ck, "running_mean", s[3], x->c, xr)) ||
                (rc = expect_vec(ck, "running_var", s[4], x->c, xr)) ||
                (rc = expect_same(ck, "y", d[0], xr, x)))
                return rc;
        } else {
            /* src: dy (da), x, gamma, [beta,] stats */
            const yc_tensor *stats = op->kind == YC_OP_BN_SILU_BWD ? s[4] : s[3];
            if ((rc = expect_same(ck, op_sigs[op->kind].src[0], s[0], xr, x)) ||
                (rc = expect_vec(ck, "gamma", s[2], x->c, xr)) ||
                (op->kind == YC_OP_BN_SILU_BWD && (rc = expect_vec(ck, "beta", s[3], x->c, xr))) ||
                (rc = expect_shape(ck, "stats", stats, 2, x->c, 1, 1, "mean and 1/std per channel of x")) ||
                (rc = expect_same(ck, "dx", d[0], xr, x)) ||
                (rc = expect_vec(ck, "dgamma", d[1], x->c, xr)) ||
                (rc = expect_vec(ck, "dbeta", d[2], x->c, xr)))
                return rc;
        }
        return YC_OK;
    }
    case YC_OP_BN_SILU_APPLY: {
        /* eps and momentum are unused: the statistics come as saved */
        const yc_tensor *x = s[0];
        if ((rc = expect_vec(ck, "gamma", s[1], x->c, "x")) || (rc = expect_vec(ck, "beta", s[2], x->c, "x")) ||
            (rc = expect_shape(ck, "stats", s[3], 2, x->c, 1, 1, "mean and 1/std per channel of x")))
            return rc;
        return expect_same(ck, "a", d[0], "x", x);
    }
    case YC_OP_SILU:
    case YC_OP_COPY:
        return expect_same(ck, "y", d[0], op->kind == YC_OP_SILU ? "x" : "a", s[0]);
    case YC_OP_SILU_BWD:
        if ((rc = expect_same(ck, "dy", s[0], "x", s[1])))
            return rc;
        return expect_same(ck, "dx", d[0], "x", s[1]);
    case YC_OP_ADD:
        if ((rc = expect_same(ck, "b", s[1], "a", s[0])))
            return rc;
        return expect_same(ck, "y", d[0], "a", s[0]);
    case YC_OP_FILL:
        return YC_OK;
    case YC_OP_MAXPOOL:
    case YC_OP_MAXPOOL_BWD: {
        int k = op->p.pool.k, st = op->p.pool.stride, pad = op->p.pool.pad;
        const yc_tensor *x = op->kind == YC_OP_MAXPOOL ? s[0] : s[1];
        if (k < 1 || st < 1 || pad < 0 || pad > k / 2)
            return fail(ck,
                        "invalid parameters: kernel %d, stride %d, padding %d (padding must be at most "
                        "half the kernel)",
                        k, st, pad);
        int P = window_out(x->h, k, st, pad), Q = window_out(x->w, k, st, pad);
        char a[64];
        if (P < 1 || Q < 1)
            return fail(ck, "kernel %d with padding %d does not fit x %s", k, pad, shape_str(x, a, sizeof a));
        char why[128];
        snprintf(why, sizeof why, "x %s, kernel %d, stride %d, padding %d", shape_str(x, a, sizeof a), k, st,
                 pad);
        if (op->kind == YC_OP_MAXPOOL)
            return expect_shape(ck, "y", d[0], x->n, x->c, P, Q, why);
        if ((rc = expect_shape(ck, "dy", s[0], x->n, x->c, P, Q, why)))
            return rc;
        return expect_same(ck, "dx", d[0], "x", x);
    }
    case YC_OP_UPSAMPLE:
    case YC_OP_UPSAMPLE_BWD: {
        int f = op->p.up.factor;
        const yc_tensor *lo = op->kind == YC_OP_UPSAMPLE ? s[0] : d[0];
        const yc_tensor *hi = op->kind == YC_OP_UPSAMPLE ? d[0] : s[0];
        const char *lr = op->kind == YC_OP_UPSAMPLE ? "x" : "dx";
        const char *hr = op->kind == YC_OP_UPSAMPLE ? "y" : "dy";
        char a[64], why[128];
        if (f < 1 || (long)lo->h * f > 1L << 30 || (long)lo->w * f > 1L << 30)
            return fail(ck, "invalid factor %d", f);
        snprintf(why, sizeof why, "%s %s upsampled by %d", lr, shape_str(lo, a, sizeof a), f);
        return expect_shape(ck, hr, hi, lo->n, lo->c, lo->h * f, lo->w * f, why);
    }
    case YC_OP_AVGPOOL:
    case YC_OP_AVGPOOL_BWD: {
        bool fwd = op->kind == YC_OP_AVGPOOL;
        const yc_tensor *img = fwd ? s[0] : d[0];
        char a[64], why[128];
        snprintf(why, sizeof why, "%s %s averaged over its height and width", fwd ? "x" : "dx",
                 shape_str(img, a, sizeof a));
        return expect_shape(ck, fwd ? "y" : "dy", fwd ? d[0] : s[0], img->n, img->c, 1, 1, why);
    }
    case YC_OP_DROPOUT: {
        float sc = op->p.drop.scale;
        if (!isfinite(sc) || sc < 1.0f)
            return fail(ck, "invalid scale %g (1 / (1 - p): finite and >= 1)", (double)sc);
        if ((size_t)s[0]->n * yc_tensor_image_elems(s[0]) > UINT32_MAX)
            return fail(ck, "more than 2^32 elements (the mask's index is 32 bits)");
        char a[64], why[128];
        snprintf(why, sizeof why, "x %s", shape_str(s[0], a, sizeof a));
        return expect_shape(ck, "y", d[0], s[0]->n, s[0]->c, s[0]->h, s[0]->w, why);
    }
    case YC_OP_SGD: {
        float lr = op->p.sgd.lr, mom = op->p.sgd.momentum, wd = op->p.sgd.wd, sc = op->p.sgd.scale;
        int nest = op->p.sgd.nesterov;
        if (!nonneg(lr) || !unit_open(mom) || !nonneg(wd) || !isfinite(sc) || (nest != 0 && nest != 1))
            return fail(ck,
                        "invalid parameters: lr %g, momentum %g, weight decay %g, scale %g, nesterov %d "
                        "(lr and weight decay finite and >= 0, momentum in [0, 1), scale finite, nesterov "
                        "0 or 1)",
                        (double)lr, (double)mom, (double)wd, (double)sc, nest);
        int st = check_sumsq(ck, op->p.sgd.max_norm);
        return st ? st : check_flat(ck);
    }
    case YC_OP_ADAM: {
        float lr = op->p.adam.lr, b1 = op->p.adam.beta1, b2 = op->p.adam.beta2, eps = op->p.adam.eps;
        float wd = op->p.adam.wd, sc = op->p.adam.scale;
        int step = op->p.adam.step, dec = op->p.adam.decoupled;
        if (!nonneg(lr) || !unit_open(b1) || !unit_open(b2) || !(isfinite(eps) && eps > 0.0f) || !nonneg(wd) ||
            !isfinite(sc) || step < 1 || (dec != 0 && dec != 1))
            return fail(ck,
                        "invalid parameters: lr %g, betas (%g, %g), eps %g, weight decay %g, scale %g, step "
                        "%d, decoupled %d (lr and weight decay finite and >= 0, betas in [0, 1), eps finite "
                        "and > 0, scale finite, step >= 1, decoupled 0 or 1)",
                        (double)lr, (double)b1, (double)b2, (double)eps, (double)wd, (double)sc, step, dec);
        int st = check_sumsq(ck, op->p.adam.max_norm);
        return st ? st : check_flat(ck);
    }
    case YC_OP_EMA: {
        float decay = op->p.ema.decay;
        if (!(decay >= 0.0f && decay <= 1.0f))
            return fail(ck, "invalid decay %g (must be in [0, 1])", (double)decay);
        return check_flat(ck);
    }
    case YC_OP_SUMSQ:
        if (!yc_tensor_dense(s[0]))
            return fail(ck, "x must be dense (nstride %zu, c*h*w %zu)", s[0]->nstride,
                        yc_tensor_image_elems(s[0]));
        return expect_shape(ck, "s", d[0], 1, 1, 1, 1, "one value");
    case YC_OP_COUNT:
        break;
    }
    return fail(ck, "unknown op kind");
}

/* Which slots hold parameters, statistics or parameter gradients (dense FP32 only). */
static bool is_param_slot(yc_op_kind kind, bool dst, int i)
{
    switch (kind) {
    case YC_OP_CONV2D:
        return !dst && i >= 1;
    case YC_OP_CONV2D_BWD_DATA:
        return !dst && i == 1;
    case YC_OP_CONV2D_BWD_FILTER:
        return dst;
    case YC_OP_BN_TRAIN:
    case YC_OP_BN_SILU_TRAIN:
        return i >= 1;
    case YC_OP_BN_EVAL:
    case YC_OP_BN_SILU_APPLY:
        return !dst && i >= 1;
    case YC_OP_BN_BWD:
    case YC_OP_BN_SILU_BWD:
        return dst ? i >= 1 : i >= 2;
    case YC_OP_SGD:
    case YC_OP_ADAM:
    case YC_OP_EMA:
        return true;
    case YC_OP_SUMSQ:
        return dst;
    default:
        return false;
    }
}

/* Which slots may hold FP16 tensors: the activations (forward inputs and outputs, and the forward
 * inputs that backward ops read: conv x, BN x, SiLU x, max-pool x), and any tensor SUMSQ sums.
 * Gradients (dy, dx, da, dW, db, dgamma, dbeta), parameters, statistics and optimizer state are
 * FP32. */
static bool may_be_f16(yc_op_kind kind, bool dst, int i)
{
    switch (kind) {
    case YC_OP_CONV2D:
    case YC_OP_BN_TRAIN:
    case YC_OP_BN_EVAL:
    case YC_OP_BN_SILU_TRAIN:
    case YC_OP_BN_SILU_APPLY:
    case YC_OP_SILU:
    case YC_OP_COPY:
    case YC_OP_MAXPOOL:
    case YC_OP_UPSAMPLE:
    case YC_OP_AVGPOOL:
        return i == 0; /* x and y (a) */
    case YC_OP_CONV2D_BWD_FILTER:
    case YC_OP_SUMSQ:
        return !dst && i == 0; /* x */
    case YC_OP_BN_BWD:
    case YC_OP_BN_SILU_BWD:
    case YC_OP_SILU_BWD:
    case YC_OP_MAXPOOL_BWD:
        return !dst && i == 1; /* x, the forward input */
    case YC_OP_ADD:
        return true; /* a, b, y */
    case YC_OP_FILL:
        return dst && i == 0;
    default:
        return false;
    }
}

int yc_op_check(const yc_op *op)
{
    if (!op)
        return yc_error_status(YC_EFORMAT, "op is NULL");
    checker ck = {.op = op};
    const char *kname = yc_op_kind_name(op->kind);
    if (op->name)
        snprintf(ck.who, sizeof ck.who, "%s '%s'", kname, op->name);
    else
        snprintf(ck.who, sizeof ck.who, "%s", kname);
    if ((int)op->kind < 0 || op->kind >= YC_OP_COUNT)
        return fail(&ck, "unknown op kind %d", (int)op->kind);
    const op_sig *sig = &op_sigs[op->kind];
    if (op->accumulate != 0 && op->accumulate != 1)
        return fail(&ck, "accumulate is %d (must be 0 or 1)", op->accumulate);
    if (op->accumulate && !sig->acc)
        return fail(&ck, "accumulate is set but this op always overwrites its output");
    for (int i = 0; i < YC_OP_MAX_SRC; i++) {
        const char *role = sig->src[i];
        const yc_tensor *t = op->src[i];
        if (!role && t)
            return fail(&ck, "src[%d] is set but unused by this op", i);
        if (role && !t && !(sig->src_optional & (1u << i)))
            return fail(&ck, "src[%d] (%s) is missing", i, role);
        if (t) {
            int rc = check_tensor(&ck, role, t, is_param_slot(op->kind, false, i),
                                  may_be_f16(op->kind, false, i));
            if (rc)
                return rc;
        }
    }
    for (int i = 0; i < YC_OP_MAX_DST; i++) {
        const char *role = sig->dst[i];
        const yc_tensor *t = op->dst[i];
        if (!role && t)
            return fail(&ck, "dst[%d] is set but unused by this op", i);
        if (role && !t && !(sig->dst_optional & (1u << i)))
            return fail(&ck, "dst[%d] (%s) is missing", i, role);
        if (t) {
            int rc = check_tensor(&ck, role, t, is_param_slot(op->kind, true, i),
                                  may_be_f16(op->kind, true, i));
            if (rc)
                return rc;
        }
    }
    return check_kind(&ck);
}
