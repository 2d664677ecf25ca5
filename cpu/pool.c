/* Max pooling on the CPU (square window k, stride, padding; padding counts as -inf).
 *
 * The window scan is PyTorch's (aten/src/ATen/native/cpu/MaxPoolKernel.cpp): rows then columns
 * over the part of the window inside the image, starting from max = -inf and index = the first
 * position inside the image, and taking a value when `v > max || isnan(v)`.  So ties go to the
 * first maximum in row-major order, a NaN is the maximum (the last NaN of the window when there
 * are several), and a window of -inf values picks its first position.  The backward pass
 * recomputes that index from the saved input and adds dy there.  Threads split the (n, c) planes:
 * overlapping windows of one plane never race.
 *
 * FP16 x or y: each thread converts its input plane to FP32 into the workspace and builds its
 * output plane there before rounding it (workspace: per thread, H*W floats for an FP16 x and P*Q
 * floats for an FP16 y, each rounded up to 16). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_ops.h"

/* Below this many output elements an op runs on one thread. */
#define YC_POOL_SERIAL_MAX 4096

static size_t round16(size_t n)
{
    return (n + 15) / 16 * 16;
}

/* Floats of one thread's workspace: an FP32 copy of the input plane when x is FP16, and of the
 * output plane when y is FP16 (forward only). */
static void plane_floats(const yc_op *op, size_t *xf, size_t *yf)
{
    const yc_tensor *x = op->kind == YC_OP_MAXPOOL ? op->src[0] : op->src[1];
    *xf = x->type == YC_F16 ? round16((size_t)x->h * x->w) : 0;
    *yf = op->kind == YC_OP_MAXPOOL && op->dst[0]->type == YC_F16
              ? round16((size_t)op->dst[0]->h * op->dst[0]->w)
              : 0;
}

size_t yc_cpu_maxpool_workspace(const yc_op *op, int threads)
{
    size_t xf, yf;
    plane_floats(op, &xf, &yf);
    return (size_t)(threads > 0 ? threads : 1) * (xf + yf) * sizeof(float);
}

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

/* Plane (image i, channel c) of x as FP32: in place, or converted into buf. */
static const float *input_plane(const yc_hv *x, int i, int c, float *buf)
{
    size_t hw = (size_t)x->h * x->w;
    return yc_hv_read(x, (size_t)i * x->ns + (size_t)c * hw, buf, hw);
}

/* y (N,C,P,Q) = max over each window of x (N,C,H,W) */
void yc_cpu_maxpool_fwd(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    int k = a->op->p.pool.k, st = a->op->p.pool.stride, pad = a->op->p.pool.pad;
    int N = x->n, C = x->c, H = x->h, W = x->w, P = y->h, Q = y->w;
    size_t xf, yf;
    plane_floats(a->op, &xf, &yf);
    bool par = (size_t)N * C * P * Q > YC_POOL_SERIAL_MAX;
#pragma omp parallel num_threads(a->threads) if (par)
    {
        float *xbuf = xf + yf ? (float *)a->ws + (size_t)omp_get_thread_num() * (xf + yf) : NULL;
        float *ybuf = yf ? xbuf + xf : NULL;
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < C; c++) {
                const float *xp = input_plane(x, i, c, xbuf);
                size_t yoff = (size_t)i * y->ns + (size_t)c * P * Q;
                float *yp = y->p16 ? ybuf : y->p + yoff;
                for (int p = 0; p < P; p++) {
                    for (int q = 0; q < Q; q++) {
                        int h0, h1, w0, w1;
                        float m;
                        window(p, q, k, st, pad, H, W, &h0, &h1, &w0, &w1);
                        window_argmax(xp, W, h0, h1, w0, w1, &m);
                        yp[p * Q + q] = m;
                    }
                }
                if (y->p16)
                    yc_hv_store(y, yoff, ybuf, (size_t)P * Q);
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
    size_t xf, yf;
    plane_floats(a->op, &xf, &yf);
    bool par = (size_t)N * C * P * Q > YC_POOL_SERIAL_MAX;
#pragma omp parallel num_threads(a->threads) if (par)
    {
        float *xbuf = xf ? (float *)a->ws + (size_t)omp_get_thread_num() * xf : NULL;
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < C; c++) {
                const float *xp = input_plane(x, i, c, xbuf);
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
}
