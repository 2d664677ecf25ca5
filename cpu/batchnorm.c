/* Batch normalisation on the CPU: training forward, evaluation forward, backward, and the fused
 * batch norm + SiLU pair that recomputes the BN output in backward instead of storing it.
 *
 * Statistics are per channel over (N, H, W), M = N*H*W values, accumulated in double (two passes:
 * mean, then the sum of squared deviations).  Normalising uses the biased variance, the running
 * estimate the unbiased one (PyTorch).  Per-element arithmetic is in double too: (x - mean) * scale
 * + beta, one rounding to FP32.  The forward pass normalises with the statistics it saves, rounded
 * to FP32 ([mean; invstd], what the backward pass reads), so that the BN output can be recomputed
 * from x and the saved statistics bit for bit; the rounding of the mean costs up to
 * |mean|/std * 2^-24 of the normalised value (PyTorch's x * scale + shift in float loses a few
 * times that).
 *
 * Reductions: every sum over a channel is kept in YC_BN_LANES partial sums, element j of each
 * image plane going to partial j % YC_BN_LANES in order, and the partials are added in a fixed
 * tree at the end.  The result is a function of the values alone: it does not depend on the
 * vector width (the clones of YC_CPU_CLONES), nor on the pieces a plane is processed in (FP16
 * chunks, the fused ops' chunks; all multiples of the lane count), which is what makes the fused
 * ops bit-identical to the unfused sequence and FP16 inputs identical to FP32 ones of equal value.
 *
 * Fused ops: YC_OP_BN_SILU_TRAIN computes z as YC_OP_BN_TRAIN computes y and applies the SiLU
 * kernel (activation.c) to it chunk by chunk; YC_OP_BN_SILU_APPLY is the per-element half of it
 * alone (z from x and the saved statistics, then SiLU: both elementwise, so its bits are those of
 * BN_SILU_TRAIN's `a` however the work is split); YC_OP_BN_SILU_BWD recomputes z, applies the SiLU
 * backward kernel to get dz (what YC_OP_SILU_BWD would store) and runs the batch-norm backward on
 * it: the sums in a first pass over the channel, dx in a second.  The first pass keeps up to
 * YC_BN_CACHE values of the channel's dz in the thread's part of the workspace, and the second
 * pass recomputes only the rest (the exp and division of SiLU's gradient cost about as much as the
 * batch-norm backward itself); nothing of the size of x is ever stored.
 *
 * Threads split channels (evaluation and BN_SILU_APPLY: (image, channel) planes): one parallel
 * region per op, no barrier but its end. */
#include <math.h>
#include <omp.h>

#include "cpu_ops.h"

/* Below this many elements an op runs on one thread. */
#define YC_BN_SERIAL_MAX 16384

/* Partial sums per channel reduction (YC_CPU_CHUNK is a multiple). */
#define YC_BN_LANES 8

/* Values of dz that YC_OP_BN_SILU_BWD keeps per thread (4 MiB, a convolution's column block). */
#define YC_BN_CACHE ((size_t)1 << 20)

size_t yc_cpu_bn_silu_bwd_workspace(const yc_op *op, int threads)
{
    const yc_tensor *x = op->src[1];
    size_t m = (size_t)x->n * (size_t)x->h * (size_t)x->w;
    m = m < YC_BN_CACHE ? (m + 15) / 16 * 16 : YC_BN_CACHE;
    return (size_t)(threads > 0 ? threads : 1) * m * sizeof(float);
}

/* acc[l] += x[j] for every j < n with j % YC_BN_LANES == l. */
YC_CPU_CLONES
static void lanes_sum(double *acc, const float *x, size_t n)
{
    double s[YC_BN_LANES];
    memcpy(s, acc, sizeof s);
    size_t j = 0;
    for (; n - j >= YC_BN_LANES; j += YC_BN_LANES) {
#pragma omp simd
        for (int l = 0; l < YC_BN_LANES; l++)
            s[l] += x[j + l];
    }
    for (int l = 0; j + (size_t)l < n; l++)
        s[l] += x[j + l];
    memcpy(acc, s, sizeof s);
}

/* acc[l] += (x[j] - mean)^2, lanes as in lanes_sum. */
YC_CPU_CLONES
static void lanes_sqdev(double *acc, const float *x, size_t n, double mean)
{
    double s[YC_BN_LANES];
    memcpy(s, acc, sizeof s);
    size_t j = 0;
    for (; n - j >= YC_BN_LANES; j += YC_BN_LANES) {
#pragma omp simd
        for (int l = 0; l < YC_BN_LANES; l++) {
            double d = (double)x[j + l] - mean;
            s[l] += d * d;
        }
    }
    for (int l = 0; j + (size_t)l < n; l++) {
        double d = (double)x[j + l] - mean;
        s[l] += d * d;
    }
    memcpy(acc, s, sizeof s);
}

/* sg[l] += g[j];  sgx[l] += g[j] * (x[j] - mean), lanes as in lanes_sum. */
YC_CPU_CLONES
static void lanes_bwd(double *sg, double *sgx, const float *g, const float *x, size_t n, double mean)
{
    double s[YC_BN_LANES], t[YC_BN_LANES];
    memcpy(s, sg, sizeof s);
    memcpy(t, sgx, sizeof t);
    size_t j = 0;
    for (; n - j >= YC_BN_LANES; j += YC_BN_LANES) {
#pragma omp simd
        for (int l = 0; l < YC_BN_LANES; l++) {
            s[l] += g[j + l];
            t[l] += (double)g[j + l] * ((double)x[j + l] - mean);
        }
    }
    for (int l = 0; j + (size_t)l < n; l++) {
        s[l] += g[j + l];
        t[l] += (double)g[j + l] * ((double)x[j + l] - mean);
    }
    memcpy(sg, s, sizeof s);
    memcpy(sgx, t, sizeof t);
}

/* The sum of the partials, in a fixed tree. */
static double lanes_total(const double *acc)
{
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* z = (x - mean) * scale + beta, in double, rounded once to FP32. */
YC_CPU_CLONES
static void normalise(float *z, const float *x, size_t n, double mean, double scale, double beta)
{
#pragma omp simd
    for (size_t j = 0; j < n; j++)
        z[j] = (float)(((double)x[j] - mean) * scale + beta);
}

/* dx (acc ? += : =) k * (g - mdy - (x - mean) * coef), in double, rounded once to FP32. */
YC_CPU_CLONES
static void bwd_dx(float *dx, const float *g, const float *x, size_t n, double k, double mdy, double mean,
                   double coef, int acc)
{
    if (acc) {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            dx[j] = (float)((double)dx[j] + k * ((double)g[j] - mdy - ((double)x[j] - mean) * coef));
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            dx[j] = (float)(k * ((double)g[j] - mdy - ((double)x[j] - mean) * coef));
    }
}

/* Offset of plane (image i, channel c) of t. */
static size_t plane(const yc_hv *t, int i, int c, size_t hw)
{
    return (size_t)i * t->ns + (size_t)c * hw;
}

/* Elements a kernel takes from plane of t at a time: whole planes of FP32 tensors, chunks of FP16
 * ones. */
static size_t step_of(const yc_hv *t, size_t hw)
{
    return t->p16 ? YC_CPU_CHUNK : hw;
}

/* ---------------------------------------------------------------------------------------------
 * Training forward: statistics of one channel, shared by BN_TRAIN and BN_SILU_TRAIN.
 * ------------------------------------------------------------------------------------------- */

/* What the training forward pass uses of one channel's statistics. */
typedef struct chan {
    /* the saved statistics as FP32, widened: what normalising uses */
    double mean, invstd;
    /* gamma * invstd and beta */
    double scale, beta;
} chan;

/* Batch statistics of channel c of x (stored as stats = [mean; invstd] and into the running
 * estimates with momentum m: running = (1 - m) * running + m * batch, variance unbiased) and the
 * normalising constants. */
static chan channel_train(const yc_cpu_args *a, int c)
{
    const yc_hv *x = &a->src[0];
    const float *gamma = a->src[1].p, *beta = a->src[2].p;
    float *stats = a->dst[1].p, *rmean = a->dst[2].p, *rvar = a->dst[3].p;
    int C = x->c;
    size_t hw = (size_t)x->h * x->w, step = step_of(x, hw);
    double M = (double)x->n * (double)hw;
    double eps = a->op->p.bn.eps, mom = a->op->p.bn.momentum;
    float buf[YC_CPU_CHUNK];
    double acc[YC_BN_LANES] = {0};
    for (int i = 0; i < x->n; i++)
        for (size_t k = 0; k < hw; k += step) {
            size_t m = hw - k < step ? hw - k : step;
            lanes_sum(acc, yc_hv_read(x, plane(x, i, c, hw) + k, buf, m), m);
        }
    double mean = lanes_total(acc) / M;
    double dev[YC_BN_LANES] = {0};
    for (int i = 0; i < x->n; i++)
        for (size_t k = 0; k < hw; k += step) {
            size_t m = hw - k < step ? hw - k : step;
            lanes_sqdev(dev, yc_hv_read(x, plane(x, i, c, hw) + k, buf, m), m, mean);
        }
    double var = lanes_total(dev) / M;
    double invstd = 1.0 / sqrt(var + eps);
    stats[c] = (float)mean;
    stats[C + c] = (float)invstd;
    rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mean);
    rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * var * M / (M - 1.0));
    chan ch = {.mean = stats[c], .invstd = stats[C + c]};
    ch.scale = (double)gamma[c] * ch.invstd;
    ch.beta = beta[c];
    return ch;
}

/* Training: x (N,C,H,W), gamma, beta (1,C,1,1) -> y (N,C,H,W), stats (2,C,1,1), running_mean and
 * running_var (1,C,1,1) updated. */
void yc_cpu_bn_train(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    int C = x->c;
    size_t hw = (size_t)x->h * x->w;
    size_t step = x->p16 || y->p16 ? YC_CPU_CHUNK : hw;
    double M = (double)x->n * (double)hw;
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        chan ch = channel_train(a, c);
        float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
        for (int i = 0; i < x->n; i++)
            for (size_t k = 0; k < hw; k += step) {
                size_t m = hw - k < step ? hw - k : step;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                float *z = y->p16 ? zb : y->p + plane(y, i, c, hw) + k;
                normalise(z, xp, m, ch.mean, ch.scale, ch.beta);
                if (y->p16)
                    yc_hv_store(y, plane(y, i, c, hw) + k, zb, m);
            }
    }
}

/* Training, fused with SiLU: a = silu(z), z as yc_cpu_bn_train computes y (never stored). */
void yc_cpu_bn_silu_train(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    int C = x->c;
    size_t hw = (size_t)x->h * x->w;
    double M = (double)x->n * (double)hw;
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        chan ch = channel_train(a, c);
        float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
        for (int i = 0; i < x->n; i++)
            for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                normalise(zb, xp, m, ch.mean, ch.scale, ch.beta);
                if (y->p16) {
                    yc_cpu_silu_span(zb, zb, m);
                    yc_hv_store(y, plane(y, i, c, hw) + k, zb, m);
                } else {
                    yc_cpu_silu_span(y->p + plane(y, i, c, hw) + k, zb, m);
                }
            }
    }
}

/* The output of the fused training forward from x and the statistics it saved:
 * src: x, gamma, beta, stats [mean; invstd];  dst: a.  Every (image, channel) plane is a work item;
 * z and a per chunk exactly as yc_cpu_bn_silu_train computes them. */
void yc_cpu_bn_silu_apply(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    const float *gamma = a->src[1].p, *beta = a->src[2].p, *stats = a->src[3].p;
    int N = x->n, C = x->c;
    size_t hw = (size_t)x->h * x->w;
    bool par = (double)N * C * hw > YC_BN_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            double mean = stats[c], scale = (double)gamma[c] * (double)stats[C + c];
            float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
            for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                normalise(zb, xp, m, mean, scale, beta[c]);
                if (y->p16) {
                    yc_cpu_silu_span(zb, zb, m);
                    yc_hv_store(y, plane(y, i, c, hw) + k, zb, m);
                } else {
                    yc_cpu_silu_span(y->p + plane(y, i, c, hw) + k, zb, m);
                }
            }
        }
    }
}

/* Evaluation: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta. */
void yc_cpu_bn_eval(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    const float *gamma = a->src[1].p, *beta = a->src[2].p, *rmean = a->src[3].p, *rvar = a->src[4].p;
    int N = x->n, C = x->c;
    size_t hw = (size_t)x->h * x->w;
    size_t step = x->p16 || y->p16 ? YC_CPU_CHUNK : hw;
    double eps = a->op->p.bn.eps;
    bool par = (double)N * C * hw > YC_BN_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            double scale = (double)gamma[c] / sqrt((double)rvar[c] + eps);
            float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
            for (size_t k = 0; k < hw; k += step) {
                size_t m = hw - k < step ? hw - k : step;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                float *z = y->p16 ? zb : y->p + plane(y, i, c, hw) + k;
                normalise(z, xp, m, rmean[c], scale, beta[c]);
                if (y->p16)
                    yc_hv_store(y, plane(y, i, c, hw) + k, zb, m);
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Backward (training mode), with xhat = (x - mean) * invstd and sums over (N, H, W):
 *   dbeta  += sum dy
 *   dgamma += sum dy * xhat
 *   dx (=|+=) gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
 * ------------------------------------------------------------------------------------------- */

/* The constants of dx for one channel, once its sums are known; adds to dgamma and dbeta. */
typedef struct bwd_chan {
    double mean, k, mdy, coef;
} bwd_chan;

static bwd_chan bwd_finish(const yc_cpu_args *a, int c, double mean, double invstd, const double *sg,
                           const double *sgx, double M)
{
    const float *gamma = a->src[2].p;
    float *dgamma = a->dst[1].p, *dbeta = a->dst[2].p;
    double sdy = lanes_total(sg), sdyx = lanes_total(sgx);
    dbeta[c] = (float)((double)dbeta[c] + sdy);
    dgamma[c] = (float)((double)dgamma[c] + sdyx * invstd);
    bwd_chan b = {.mean = mean, .k = (double)gamma[c] * invstd, .mdy = sdy / M};
    b.coef = sdyx * invstd * invstd / M;
    return b;
}

/* src: dy, x, gamma, stats [mean; invstd];  dst: dx [acc], dgamma, dbeta. */
void yc_cpu_bn_bwd(const yc_cpu_args *a)
{
    const yc_hv *dy = &a->src[0], *x = &a->src[1], *dx = &a->dst[0];
    const float *stats = a->src[3].p;
    int N = x->n, C = x->c, acc = a->op->accumulate;
    size_t hw = (size_t)x->h * x->w, step = step_of(x, hw);
    double M = (double)N * (double)hw;
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        double mean = stats[c], invstd = stats[C + c];
        double sg[YC_BN_LANES] = {0}, sgx[YC_BN_LANES] = {0};
        float xb[YC_CPU_CHUNK];
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < hw; k += step) {
                size_t m = hw - k < step ? hw - k : step;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                lanes_bwd(sg, sgx, dy->p + plane(dy, i, c, hw) + k, xp, m, mean);
            }
        bwd_chan b = bwd_finish(a, c, mean, invstd, sg, sgx, M);
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < hw; k += step) {
                size_t m = hw - k < step ? hw - k : step;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                bwd_dx(dx->p + plane(dx, i, c, hw) + k, dy->p + plane(dy, i, c, hw) + k, xp, m, b.k, b.mdy,
                       b.mean, b.coef, acc);
            }
    }
}

/* Backward of the fused op.  src: da, x, gamma, beta, stats;  dst: dx [acc], dgamma, dbeta.
 * dz = silu_bwd(da, z) goes to the thread's cache (the first `cap` values of the channel) in the
 * first pass; the second pass reads it from there or computes it again. */
void yc_cpu_bn_silu_bwd(const yc_cpu_args *a)
{
    const yc_hv *da = &a->src[0], *x = &a->src[1], *dx = &a->dst[0];
    const float *gamma = a->src[2].p, *beta = a->src[3].p, *stats = a->src[4].p;
    int N = x->n, C = x->c, acc = a->op->accumulate;
    size_t hw = (size_t)x->h * x->w;
    double M = (double)N * (double)hw;
    size_t cap = yc_cpu_bn_silu_bwd_workspace(a->op, 1) / sizeof(float);
#pragma omp parallel num_threads(a->threads) if (M * C > YC_BN_SERIAL_MAX)
    {
        float *cache = (float *)a->ws + (size_t)omp_get_thread_num() * cap;
#pragma omp for schedule(static)
        for (int c = 0; c < C; c++) {
            double mean = stats[c], invstd = stats[C + c], scale = (double)gamma[c] * invstd;
            double sg[YC_BN_LANES] = {0}, sgx[YC_BN_LANES] = {0};
            float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
            size_t pos = 0; /* values of the channel seen so far */
            for (int i = 0; i < N; i++)
                for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                    size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                    const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                    float *dz = pos + m <= cap ? cache + pos : zb;
                    normalise(dz, xp, m, mean, scale, beta[c]);
                    yc_cpu_silu_bwd_span(dz, da->p + plane(da, i, c, hw) + k, dz, m, 0);
                    lanes_bwd(sg, sgx, dz, xp, m, mean);
                    pos += m;
                }
            bwd_chan b = bwd_finish(a, c, mean, invstd, sg, sgx, M);
            pos = 0;
            for (int i = 0; i < N; i++)
                for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                    size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                    const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                    const float *dz = cache + pos;
                    if (pos + m > cap) {
                        normalise(zb, xp, m, mean, scale, beta[c]);
                        yc_cpu_silu_bwd_span(zb, da->p + plane(da, i, c, hw) + k, zb, m, 0);
                        dz = zb;
                    }
                    bwd_dx(dx->p + plane(dx, i, c, hw) + k, dz, xp, m, b.k, b.mdy, b.mean, b.coef, acc);
                    pos += m;
                }
        }
    }
}
