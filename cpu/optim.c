/* Optimizer ops of the CPU backend: SGD, Adam/AdamW and EMA steps over flat ranges of the
 * parameter arena, and the sum of squares behind gradient-norm clipping.
 *
 * SGD, Adam/AdamW and EMA reproduce PyTorch 1.13's single-tensor code (torch/optim/sgd.py,
 * adam.py, adamw.py with foreach=False, and YOLOv5's ModelEMA.update) operation by operation, with
 * the same roundings in the same order:
 *   - a coefficient that torch computes in Python (double), e.g. 1 - beta1, lr / (1 - beta1^t),
 *     sqrt(1 - beta2^t), 1 - lr*wd, 1 - decay, is computed here in double from the op's parameters
 *     and rounded to float once, as torch does when it hands the scalar to a float tensor op;
 *   - every float tensor op of torch is one float operation (one rounding) here.  Two of them are
 *     fused multiply-adds in torch: a.add(b, alpha=s) is a + s*b rounded once (the vectorised CPU
 *     kernel calls vec::fmadd and CUDA contracts it), and a.addcmul(b, c, value=s) is
 *     fma(s*b, c, a); both are fmaf() here.  a.addcdiv(b, c, value=s) is a + (s*b)/c with three
 *     roundings, and the rest (mul_, add_ with alpha 1, sqrt, div) round once each.
 *   - the file is compiled as ISO C (-std=c11), so nothing else is contracted into an FMA, and
 *     every target clone (cpu_ops.h) computes the same bits.
 * Checked against torch 1.13.1 (CPU, AVX2 kernels): identical bits for SGD with and without
 * Nesterov, Adam, AdamW and the EMA over a few thousand elements, and for the sequences in
 * tests/test_ops.c.
 * torch receives its hyperparameters as Python floats and these ops as floats: the results are
 * identical when the two hold the same values.  SGD only ever uses its parameters rounded to
 * float, so it matches torch for any hyperparameters; Adam's bias corrections and the EMA's
 * 1 - decay are computed from the float values and differ in the last bits from a torch run whose
 * parameters are not float32-representable (0.937 rather than 0.937f).
 *
 * SUMSQ adds the squares in double: eight interleaved partial sums per thread (fixed lanes, so the
 * result is the same for every vector width), then the threads' sums in thread order.  It also
 * takes an FP16 tensor (converted in chunks; the same sum as for FP32 tensors of equal values).
 *
 * Threads: one parallel region per op, the elements split into one contiguous range per thread,
 * no barrier but the region's end.  The loops are `omp simd` (no loop-carried dependences, each
 * element read and written at one index only). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_ops.h"

/* Below this many elements one thread does the whole op (a parallel region costs microseconds). */
#define YC_OPT_SERIAL_MAX 16384

/* Adam runs its elements in chunks of this many: sqrt(v) goes through a buffer of the chunk
 * because a loop calling sqrtf is not vectorised under -fmath-errno (GCC's default); the loops
 * around it are. */
#define YC_ADAM_CHUNK 256

/* Elements of a resolved dense tensor. */
static size_t hv_elems(const yc_hv *t)
{
    return (size_t)t->n * yc_hv_image(t);
}

/* The range [*b, *e) of the calling thread when n elements are split evenly over the team. */
static void thread_range(size_t n, size_t *b, size_t *e)
{
    size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    *b = n / nt * t + (n % nt) * t / nt;
    *e = n / nt * (t + 1) + (n % nt) * (t + 1) / nt;
}

/* ---------------------------------------------------------------------------------------------
 * SGD (torch/optim/sgd.py, _single_tensor_sgd, dampening 0), per element:
 *   grad.mul_(clip_coef)                    g = grad * scale
 *   d_p = d_p.add(param, alpha=wd)          g = fma(wd, w, g)              (skipped when wd == 0)
 *   buf.mul_(momentum).add_(d_p)            buf = buf * momentum + g
 *   d_p = d_p.add(buf, alpha=momentum)      g = fma(momentum, buf, g)      (nesterov)
 *   d_p = buf                                                              (otherwise)
 *   param.add_(d_p, alpha=-lr)              w = fma(-lr, g, w)
 * torch's first step sets buf = g instead of buf*momentum + g: the same values for a buffer that
 * starts at zero, as the trainer's does.  With momentum 0 torch keeps no buffer and steps with g,
 * which is what the formulas above give too (buf receives g).
 * ------------------------------------------------------------------------------------------- */
typedef struct sgd_coef {
    float scale, wd, momentum, neg_lr;
    int use_wd, nesterov;
} sgd_coef;

YC_CPU_CLONES
static void sgd_span(float *w, float *buf, const float *grad, size_t n, const sgd_coef *k)
{
    const float scale = k->scale, wd = k->wd, mom = k->momentum, nlr = k->neg_lr;
    const int use_wd = k->use_wd;
    if (k->nesterov) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float g = grad[i] * scale;
            if (use_wd)
                g = fmaf(wd, w[i], g);
            float b = buf[i] * mom + g;
            buf[i] = b;
            w[i] = fmaf(nlr, fmaf(mom, b, g), w[i]);
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float g = grad[i] * scale;
            if (use_wd)
                g = fmaf(wd, w[i], g);
            float b = buf[i] * mom + g;
            buf[i] = b;
            w[i] = fmaf(nlr, b, w[i]);
        }
    }
}

/* The optimizer's gradient scale: the op's, or the clipping coefficient of its sum of squares
 * (*skip when that is not finite: the step leaves everything as it is). */
static float grad_scale(const yc_cpu_args *a, float scale, float max_norm, bool *skip)
{
    *skip = false;
    if (!a->src[1].p)
        return scale;
    float s = *(const float *)a->src[1].p;
    *skip = !isfinite(s);
    return yc_clip_scale(s, max_norm);
}

void yc_cpu_sgd(const yc_cpu_args *a)
{
    const yc_op *op = a->op;
    bool skip;
    float scale = grad_scale(a, op->p.sgd.scale, op->p.sgd.max_norm, &skip);
    if (skip)
        return;
    const sgd_coef k = {
        .scale = scale,
        .wd = op->p.sgd.wd,
        .momentum = op->p.sgd.momentum,
        .neg_lr = -op->p.sgd.lr,
        .use_wd = op->p.sgd.wd != 0.0f,
        .nesterov = op->p.sgd.nesterov,
    };
    float *w = a->dst[0].p, *buf = a->dst[1].p;
    const float *g = a->src[0].p;
    size_t n = hv_elems(&a->dst[0]);
#pragma omp parallel num_threads(a->threads) if (n > YC_OPT_SERIAL_MAX)
    {
        size_t b, e;
        thread_range(n, &b, &e);
        if (b < e)
            sgd_span(w + b, buf + b, g + b, e - b, &k);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Adam and AdamW (torch/optim/adam.py and adamw.py, _single_tensor_adam(w), amsgrad off), per
 * element, with t = step:
 *   grad.mul_(clip_coef)                         g = grad * scale
 *   param.mul_(1 - lr*wd)                        w = w * (1 - lr*wd)       (AdamW)
 *   grad = grad.add(param, alpha=wd)             g = fma(wd, w, g)         (Adam, skipped when wd == 0)
 *   exp_avg.mul_(b1).add_(grad, alpha=1-b1)      m = fma(1 - b1, g, m * b1)
 *   exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1-b2)
 *                                                v = fma((1 - b2) * g, g, v * b2)
 *   denom = (exp_avg_sq.sqrt() / sqrt(1 - b2^t)).add_(eps)
 *                                                den = sqrtf(v) / sqrt(1 - b2^t) + eps
 *   param.addcdiv_(exp_avg, denom, value=-lr/(1 - b1^t))
 *                                                w = w + (-lr/(1 - b1^t) * m) / den
 * ------------------------------------------------------------------------------------------- */
typedef struct adam_coef {
    float scale, wd, w_mul, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
    int use_wd, decoupled;
} adam_coef;

YC_CPU_CLONES
static void adam_span(float *w, float *m, float *v, const float *grad, size_t n, const adam_coef *k)
{
    const float scale = k->scale, wd = k->wd, w_mul = k->w_mul, b1 = k->beta1, omb1 = k->one_minus_beta1;
    const float b2 = k->beta2, omb2 = k->one_minus_beta2, bc2s = k->bc2_sqrt, eps = k->eps;
    const float nss = k->neg_step_size;
    const int use_wd = k->use_wd && !k->decoupled, decoupled = k->decoupled;
    float root[YC_ADAM_CHUNK];
    for (size_t c = 0; c < n; c += YC_ADAM_CHUNK) {
        size_t len = n - c < YC_ADAM_CHUNK ? n - c : YC_ADAM_CHUNK;
        float *wc = w + c, *mc = m + c, *vc = v + c;
        const float *gc = grad + c;
#pragma omp simd
        for (size_t i = 0; i < len; i++) {
            float g = gc[i] * scale, wi = wc[i];
            if (decoupled)
                wi = wi * w_mul;
            if (use_wd)
                g = fmaf(wd, wi, g);
            float mi = fmaf(omb1, g, mc[i] * b1);
            float vi = fmaf(omb2 * g, g, vc[i] * b2);
            wc[i] = wi;
            mc[i] = mi;
            vc[i] = vi;
        }
        for (size_t i = 0; i < len; i++)
            root[i] = sqrtf(vc[i]);
#pragma omp simd
        for (size_t i = 0; i < len; i++)
            wc[i] = wc[i] + nss * mc[i] / (root[i] / bc2s + eps);
    }
}

void yc_cpu_adam(const yc_cpu_args *a)
{
    const yc_op *op = a->op;
    bool skip;
    float scale = grad_scale(a, op->p.adam.scale, op->p.adam.max_norm, &skip);
    if (skip)
        return;
    double lr = op->p.adam.lr, b1 = op->p.adam.beta1, b2 = op->p.adam.beta2, wd = op->p.adam.wd;
    double t = op->p.adam.step;
    /* Python: bias_correction1 = 1 - beta1 ** step; step_size = lr / bias_correction1;
     * bias_correction2_sqrt = math.sqrt(1 - beta2 ** step) */
    double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    const adam_coef k = {
        .scale = scale,
        .wd = op->p.adam.wd,
        .w_mul = (float)(1.0 - lr * wd),
        .beta1 = op->p.adam.beta1,
        .one_minus_beta1 = (float)(1.0 - b1),
        .beta2 = op->p.adam.beta2,
        .one_minus_beta2 = (float)(1.0 - b2),
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = op->p.adam.eps,
        .neg_step_size = (float)-(lr / bc1),
        .use_wd = op->p.adam.wd != 0.0f,
        .decoupled = op->p.adam.decoupled,
    };
    float *w = a->dst[0].p, *m = a->dst[1].p, *v = a->dst[2].p;
    const float *g = a->src[0].p;
    size_t n = hv_elems(&a->dst[0]);
#pragma omp parallel num_threads(a->threads) if (n > YC_OPT_SERIAL_MAX)
    {
        size_t b, e;
        thread_range(n, &b, &e);
        if (b < e)
            adam_span(w + b, m + b, v + b, g + b, e - b, &k);
    }
}

/* ---------------------------------------------------------------------------------------------
 * EMA (YOLOv5 utils/torch_utils.py, ModelEMA.update), per element:
 *   v *= d                                  e = e * d
 *   v += (1 - d) * msd[k].detach()          e = e + (1 - d) * x       (two roundings: a temporary)
 * ------------------------------------------------------------------------------------------- */
YC_CPU_CLONES
static void ema_span(float *e, const float *x, size_t n, float d, float one_minus_d)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        e[i] = e[i] * d + one_minus_d * x[i];
}

void yc_cpu_ema(const yc_cpu_args *a)
{
    float d = a->op->p.ema.decay, omd = (float)(1.0 - (double)d);
    float *e = a->dst[0].p;
    const float *x = a->src[0].p;
    size_t n = hv_elems(&a->dst[0]);
#pragma omp parallel num_threads(a->threads) if (n > YC_OPT_SERIAL_MAX)
    {
        size_t b, end;
        thread_range(n, &b, &end);
        if (b < end)
            ema_span(e + b, x + b, end - b, d, omd);
    }
}

/* ---------------------------------------------------------------------------------------------
 * SUMSQ: s (=|+=) sum of x^2, in double.
 * ------------------------------------------------------------------------------------------- */
#define YC_SUMSQ_LANES 8

/* acc[j] += x[i]^2 for i in [0, n) with i % 8 == j (squares are exact in double). */
YC_CPU_CLONES
static void sumsq_lanes(double *acc, const float *x, size_t n)
{
    double s[YC_SUMSQ_LANES];
    memcpy(s, acc, sizeof s);
    size_t i = 0;
    for (; n - i >= YC_SUMSQ_LANES; i += YC_SUMSQ_LANES) {
#pragma omp simd
        for (int j = 0; j < YC_SUMSQ_LANES; j++)
            s[j] += (double)x[i + j] * (double)x[i + j];
    }
    for (int j = 0; i + (size_t)j < n; j++)
        s[j] += (double)x[i + j] * (double)x[i + j];
    memcpy(acc, s, sizeof s);
}

/* Sum of x^2 over elements [b, e) of t: partial sums by element index (relative to b) modulo 8,
 * combined pairwise; FP16 values go through FP32 chunks (a multiple of 8: the same partial sums). */
static double sumsq_range(const yc_hv *t, size_t b, size_t e)
{
    double acc[YC_SUMSQ_LANES] = {0};
    float buf[YC_CPU_CHUNK];
    size_t step = t->p16 ? YC_CPU_CHUNK : e - b;
    for (size_t k = b; k < e; k += step) {
        size_t m = e - k < step ? e - k : step;
        sumsq_lanes(acc, yc_hv_read(t, k, buf, m), m);
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void yc_cpu_sumsq(const yc_cpu_args *a)
{
    size_t n = hv_elems(&a->src[0]);
    int threads = a->threads > 0 ? a->threads : 1, used = 1;
    /* one slot per thread, added in thread order after the region */
    double part[threads];
#pragma omp parallel num_threads(threads) if (n > YC_OPT_SERIAL_MAX)
    {
        size_t b, e;
        thread_range(n, &b, &e);
        int t = omp_get_thread_num();
        part[t] = sumsq_range(&a->src[0], b, e);
        if (t == 0)
            used = omp_get_num_threads();
    }
    double s = 0.0;
    for (int t = 0; t < used; t++)
        s += part[t];
    float *dst = a->dst[0].p;
    dst[0] = (float)(a->op->accumulate ? (double)dst[0] + s : s);
}
