/* Batch normalisation on the CPU: training forward, evaluation forward, backward.
 *
 * Statistics are per channel over (N, H, W), M = N*H*W values, accumulated in double (two passes:
 * mean, then the sum of squared deviations).  Normalising uses the biased variance, the running
 * estimate the unbiased one (PyTorch).  Per-element arithmetic is in double too: (x - mean) * scale
 * + beta loses nothing when the mean is large against the spread (PyTorch's x * scale + shift
 * does, by |mean|/std ulps).  Threads split channels: one parallel region per op. */
#include <math.h>

#include "cpu_ops.h"

/* Below this many elements an op runs on one thread. */
#define YC_BN_SERIAL_MAX 16384

/* Sum of the channel-c plane of every image, in double. */
static double channel_sum(const yc_hv *x, int c, size_t hw)
{
    double s = 0.0;
    for (int i = 0; i < x->n; i++) {
        const float *p = x->p + (size_t)i * x->ns + (size_t)c * hw;
#pragma omp simd reduction(+ : s)
        for (size_t j = 0; j < hw; j++)
            s += p[j];
    }
    return s;
}

/* Sum of (x - mean)^2 over the channel-c planes, in double. */
static double channel_sqdev(const yc_hv *x, int c, size_t hw, double mean)
{
    double s = 0.0;
    for (int i = 0; i < x->n; i++) {
        const float *p = x->p + (size_t)i * x->ns + (size_t)c * hw;
#pragma omp simd reduction(+ : s)
        for (size_t j = 0; j < hw; j++) {
            double d = (double)p[j] - mean;
            s += d * d;
        }
    }
    return s;
}

/* y = (x - mean) * scale + beta over the channel-c planes, in double: no cancellation when the
 * mean is large against the spread. */
static void channel_normalise(const yc_hv *x, const yc_hv *y, int c, size_t hw, double mean, double scale,
                              double beta)
{
    for (int i = 0; i < x->n; i++) {
        const float *p = x->p + (size_t)i * x->ns + (size_t)c * hw;
        float *q = y->p + (size_t)i * y->ns + (size_t)c * hw;
#pragma omp simd
        for (size_t j = 0; j < hw; j++)
            q[j] = (float)(((double)p[j] - mean) * scale + beta);
    }
}

/* Training: x (N,C,H,W), gamma, beta (1,C,1,1) -> y (N,C,H,W), stats (2,C,1,1) = [mean; invstd],
 * running_mean and running_var (1,C,1,1) updated with momentum m:
 *   running = (1 - m) * running + m * batch   (batch variance unbiased: * M / (M - 1)) */
void yc_cpu_bn_train(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    const float *gamma = a->src[1].p, *beta = a->src[2].p;
    float *stats = a->dst[1].p, *rmean = a->dst[2].p, *rvar = a->dst[3].p;
    int C = x->c;
    size_t hw = (size_t)x->h * x->w;
    double M = (double)x->n * (double)hw;
    double eps = a->op->p.bn.eps, mom = a->op->p.bn.momentum;
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        double mean = channel_sum(x, c, hw) / M;
        double var = channel_sqdev(x, c, hw, mean) / M;
        double invstd = 1.0 / sqrt(var + eps);
        channel_normalise(x, y, c, hw, mean, (double)gamma[c] * invstd, beta[c]);
        stats[c] = (float)mean;
        stats[C + c] = (float)invstd;
        rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mean);
        rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * var * M / (M - 1.0));
    }
}

/* Evaluation: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta. */
void yc_cpu_bn_eval(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    const float *gamma = a->src[1].p, *beta = a->src[2].p, *rmean = a->src[3].p, *rvar = a->src[4].p;
    int N = x->n, C = x->c;
    size_t hw = (size_t)x->h * x->w;
    double eps = a->op->p.bn.eps;
    bool par = (double)N * C * hw > YC_BN_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            double scale = (double)gamma[c] / sqrt((double)rvar[c] + eps), mean = rmean[c], b = beta[c];
            const float *p = x->p + (size_t)i * x->ns + (size_t)c * hw;
            float *q = y->p + (size_t)i * y->ns + (size_t)c * hw;
#pragma omp simd
            for (size_t j = 0; j < hw; j++)
                q[j] = (float)(((double)p[j] - mean) * scale + b);
        }
    }
}

/* Backward (training mode), with xhat = (x - mean) * invstd and sums over (N, H, W):
 *   dbeta  += sum dy
 *   dgamma += sum dy * xhat
 *   dx (=|+=) gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
 * src: dy, x, gamma, stats [mean; invstd];  dst: dx [acc], dgamma, dbeta. */
void yc_cpu_bn_bwd(const yc_cpu_args *a)
{
    const yc_hv *dy = &a->src[0], *x = &a->src[1], *dx = &a->dst[0];
    const float *gamma = a->src[2].p, *stats = a->src[3].p;
    float *dgamma = a->dst[1].p, *dbeta = a->dst[2].p;
    int N = x->n, C = x->c, acc = a->op->accumulate;
    size_t hw = (size_t)x->h * x->w;
    double M = (double)N * (double)hw;
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        double mean = stats[c], invstd = stats[C + c];
        double sdy = 0.0, sdyx = 0.0; /* sum dy, sum dy * (x - mean) */
        for (int i = 0; i < N; i++) {
            const float *g = dy->p + (size_t)i * dy->ns + (size_t)c * hw;
            const float *p = x->p + (size_t)i * x->ns + (size_t)c * hw;
#pragma omp simd reduction(+ : sdy, sdyx)
            for (size_t j = 0; j < hw; j++) {
                sdy += g[j];
                sdyx += (double)g[j] * ((double)p[j] - mean);
            }
        }
        dbeta[c] = (float)((double)dbeta[c] + sdy);
        dgamma[c] = (float)((double)dgamma[c] + sdyx * invstd);
        /* dx = k * (dy - mdy - (x - mean) * coef), in double */
        double k = (double)gamma[c] * invstd, mdy = sdy / M, coef = sdyx * invstd * invstd / M;
        for (int i = 0; i < N; i++) {
            const float *g = dy->p + (size_t)i * dy->ns + (size_t)c * hw;
            const float *p = x->p + (size_t)i * x->ns + (size_t)c * hw;
            float *d = dx->p + (size_t)i * dx->ns + (size_t)c * hw;
            if (acc) {
#pragma omp simd
                for (size_t j = 0; j < hw; j++)
                    d[j] = (float)((double)d[j] + k * ((double)g[j] - mdy - ((double)p[j] - mean) * coef));
            } else {
#pragma omp simd
                for (size_t j = 0; j < hw; j++)
                    d[j] = (float)(k * ((double)g[j] - mdy - ((double)p[j] - mean) * coef));
            }
        }
    }
}
