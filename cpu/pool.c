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
 * Separable: a plane is scanned in two passes, each with the rule above, k + k comparisons per
 * output instead of k * k.  Pass 1 reduces every input row over each output column's window
 * columns (the row's maximum and its column; the first column of the window when nothing is taken);
 * pass 2 reduces those row results over each output row's window rows.  This picks PyTorch's
 * element: without NaN, pass 1 keeps each row's first maximum and pass 2 the first row holding the
 * window's maximum, so the first maximum in row-major order; with NaN, pass 1 keeps each row's last
 * NaN and pass 2 the last row with a NaN, so the window's last NaN; a window of -inf keeps pass 2's
 * starting index, the window's first position.  The comparisons are written as selects, without
 * branches, as the SPPF planes of YOLOv5 give unpredictable outcomes.
 *
 * Workspace, per thread: the pass-1 results of one plane (H*Q floats and H*Q column indices), an
 * FP32 copy of the input plane when x is FP16 (H*W floats) and of the output plane when y is FP16
 * (P*Q floats, forward only), each rounded up to 16 floats. */
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

/* Floats of one thread's workspace: pass-1 values and indices, then the FP32 copies of an FP16
 * input plane and (forward) an FP16 output plane. */
typedef struct pool_ws {
    size_t rowmax, xf, yf;
} pool_ws;

static pool_ws ws_floats(const yc_op *op)
{
    const yc_tensor *x = op->kind == YC_OP_MAXPOOL ? op->src[0] : op->src[1];
    const yc_tensor *y = op->kind == YC_OP_MAXPOOL ? op->dst[0] : op->src[0];
    pool_ws w;
    w.rowmax = 2 * round16((size_t)x->h * y->w);
    w.xf = x->type == YC_F16 ? round16((size_t)x->h * x->w) : 0;
    w.yf = op->kind == YC_OP_MAXPOOL && y->type == YC_F16 ? round16((size_t)y->h * y->w) : 0;
    return w;
}

size_t yc_cpu_maxpool_workspace(const yc_op *op, int threads)
{
    pool_ws w = ws_floats(op);
    return (size_t)(threads > 0 ? threads : 1) * (w.rowmax + w.xf + w.yf) * sizeof(float);
}

/* Window of output index o along one axis clipped to [0, n): [*lo, *hi). */
static void span(int o, int k, int stride, int pad, int n, int *lo, int *hi)
{
    int s = o * stride - pad;
    *lo = s < 0 ? 0 : s;
    *hi = s + k < n ? s + k : n;
}

/* Pass 1 over plane x (H x W): for each row ih and output column q, rm[ih*Q + q] = the maximum of
 * the row over the window columns of q and ri[...] its column, by the scan rule. */
static void pass_rows(const float *x, int H, int W, int Q, int k, int st, int pad, float *rm, int *ri)
{
    for (int q = 0; q < Q; q++) {
        int w0, w1;
        span(q, k, st, pad, W, &w0, &w1);
        for (int ih = 0; ih < H; ih++) {
            const float *row = x + (size_t)ih * W;
            float m = -INFINITY;
            int idx = w0;
            for (int iw = w0; iw < w1; iw++) {
                float v = row[iw];
                bool take = v > m || isnan(v);
                m = take ? v : m;
                idx = take ? iw : idx;
            }
            rm[(size_t)ih * Q + q] = m;
            ri[(size_t)ih * Q + q] = idx;
        }
    }
}

/* Pass 2: output (p, q) reduces the pass-1 results of its window rows; its value in *m and its
 * index (row * W + column) in plane x returned. */
static int pass_cols(const float *rm, const int *ri, int W, int Q, int p, int q, int k, int st, int pad, int H,
                     int w0, float *maxval)
{
    int h0, h1;
    span(p, k, st, pad, H, &h0, &h1);
    float m = -INFINITY;
    int idx = h0 * W + w0;
    for (int ih = h0; ih < h1; ih++) {
        float v = rm[(size_t)ih * Q + q];
        bool take = v > m || isnan(v);
        m = take ? v : m;
        idx = take ? ih * W + ri[(size_t)ih * Q + q] : idx;
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
    pool_ws ws = ws_floats(a->op);
    bool par = (size_t)N * C * P * Q > YC_POOL_SERIAL_MAX;
#pragma omp parallel num_threads(a->threads) if (par)
    {
        float *rm = (float *)a->ws + (size_t)omp_get_thread_num() * (ws.rowmax + ws.xf + ws.yf);
        int *ri = (int *)(rm + ws.rowmax / 2);
        float *xbuf = ws.xf ? rm + ws.rowmax : NULL;
        float *ybuf = ws.yf ? rm + ws.rowmax + ws.xf : NULL;
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < C; c++) {
                const float *xp = input_plane(x, i, c, xbuf);
                size_t yoff = (size_t)i * y->ns + (size_t)c * P * Q;
                float *yp = y->p16 ? ybuf : y->p + yoff;
                pass_rows(xp, H, W, Q, k, st, pad, rm, ri);
                for (int q = 0; q < Q; q++) {
                    int w0, w1;
                    span(q, k, st, pad, W, &w0, &w1);
                    for (int p = 0; p < P; p++)
                        pass_cols(rm, ri, W, Q, p, q, k, st, pad, H, w0, &yp[p * Q + q]);
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
    pool_ws ws = ws_floats(a->op);
    bool par = (size_t)N * C * P * Q > YC_POOL_SERIAL_MAX;
#pragma omp parallel num_threads(a->threads) if (par)
    {
        float *rm = (float *)a->ws + (size_t)omp_get_thread_num() * (ws.rowmax + ws.xf);
        int *ri = (int *)(rm + ws.rowmax / 2);
        float *xbuf = ws.xf ? rm + ws.rowmax : NULL;
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < C; c++) {
                const float *xp = input_plane(x, i, c, xbuf);
                const float *gp = dy->p + (size_t)i * dy->ns + (size_t)c * P * Q;
                float *dp = dx->p + (size_t)i * dx->ns + (size_t)c * H * W;
                if (!acc)
                    memset(dp, 0, (size_t)H * W * sizeof *dp);
                pass_rows(xp, H, W, Q, k, st, pad, rm, ri);
                for (int p = 0; p < P; p++) {
                    for (int q = 0; q < Q; q++) {
                        int w0, w1;
                        float m;
                        span(q, k, st, pad, W, &w0, &w1);
                        dp[pass_cols(rm, ri, W, Q, p, q, k, st, pad, H, w0, &m)] += gp[p * Q + q];
                    }
                }
            }
        }
    }
}
