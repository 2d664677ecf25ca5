/* Max pooling on the CPU (square window k, stride, padding; padding counts as -inf).
 *
 * The window scan is PyTorch's (aten/src/ATen/native/cpu/MaxPoolKernel.cpp): rows then columns
 * over the part of the window inside the image, starting from max = -inf and index = the first
 * position inside the image, and taking a value when `v > max || isnan(v)`.  So ties go to the
 * first maximum in row-major order, a NaN is the maximum (the last NaN of the window when there
 * are several), and a window of -inf values picks its first position.  The backward pass
 * recomputes that index from the saved input and adds dy there.  Threads split the (n, c) planes:
 * overlapping windows of one plane never race. */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"

/* Below this many output elements an op runs on one thread. */
#define YC_POOL_SERIAL_MAX 4096

/* Window of output (p, q) clipped to the image: rows [*h0, *h1), columns [*w0, *w1). */
static void window(int p, int q, int k, int stride, int pad, int H, int W, int *h0, int *h1, int *w0, int *w1)
{
    int hs = p * stride - pad, ws = q * stride - pad;
    *h0 = hs < 0 ? 0 : hs;
    *w0 = ws < 0 ? 0 : ws;
    *h1 = hs + k < H ? hs + k : H;
    *w1 = ws + k < W ? ws + k : W;
}

/* Index (row * W + column) in plane x of the maximum of a clipped window, and its value. */
static int window_argmax(const float *x, int W, int h0, int h1, int w0, int w1, float *maxval)
{
    float m = -INFINITY;
    int idx = h0 * W + w0;
    for (int ih = h0; ih < h1; ih++) {
        const float *row = x + (size_t)ih * W;
        for (int iw = w0; iw < w1; iw++) {
            float v = row[iw];
            if (v > m || isnan(v)) {
                m = v;
                idx = ih * W + iw;
            }
        }
    }
    *maxval = m;
    return idx;
}

/* y (N,C,P,Q) = max over each window of x (N,C,H,W) */
void yc_cpu_maxpool_fwd(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    int k = a->op->p.pool.k, st = a->op->p.pool.stride, pad = a->op->p.pool.pad;
    int N = x->n, C = x->c, H = x->h, W = x->w, P = y->h, Q = y->w;
    bool par = (size_t)N * C * P * Q > YC_POOL_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            const float *xp = x->p + (size_t)i * x->ns + (size_t)c * H * W;
            float *yp = y->p + (size_t)i * y->ns + (size_t)c * P * Q;
            for (int p = 0; p < P; p++) {
                for (int q = 0; q < Q; q++) {
                    int h0, h1, w0, w1;
                    float m;
                    window(p, q, k, st, pad, H, W, &h0, &h1, &w0, &w1);
                    window_argmax(xp, W, h0, h1, w0, w1, &m);
                    yp[p * Q + q] = m;
                }
            }
        }
    }
}

/* dx (N,C,H,W) (=|+=) dy (N,C,P,Q) routed to each window's maximum of x (N,C,H,W) */
void yc_cpu_maxpool_bwd(const yc_cpu_args *a)
{
    const yc_hv *dy = &a->src[0], *x = &a->src[1], *dx = &a->dst[0];
    int k = a->op->p.pool.k, st = a->op->p.pool.stride, pad = a->op->p.pool.pad;
    int N = x->n, C = x->c, H = x->h, W = x->w, P = dy->h, Q = dy->w, acc = a->op->accumulate;
    bool par = (size_t)N * C * P * Q > YC_POOL_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            const float *xp = x->p + (size_t)i * x->ns + (size_t)c * H * W;
            const float *gp = dy->p + (size_t)i * dy->ns + (size_t)c * P * Q;
            float *dp = dx->p + (size_t)i * dx->ns + (size_t)c * H * W;
            if (!acc)
                memset(dp, 0, (size_t)H * W * sizeof *dp);
            for (int p = 0; p < P; p++) {
                for (int q = 0; q < Q; q++) {
                    int h0, h1, w0, w1;
                    float m;
                    window(p, q, k, st, pad, H, W, &h0, &h1, &w0, &w1);
                    dp[window_argmax(xp, W, h0, h1, w0, w1, &m)] += gp[p * Q + q];
                }
            }
        }
    }
}
