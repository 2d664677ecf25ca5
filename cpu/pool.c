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
 * Stride 1 (YOLOv5's SPPF: k 5, padding 2) on CPUs with AVX-512: the output columns are the lanes
 * of vectors of 16, each lane running the scalar code's sequence of compares and selects, so the
 * results are the same bits (other CPUs and strides take the scalar path).  Pass 1 reads each input
 * row from a copy padded with -inf (column q's window is then columns q .. q+k-1 of the copy for
 * every q; a -inf is never taken, as m starts at -inf, so the padding changes nothing); pass 2
 * clips the window rows as before.  The forward pass keeps no indices; the backward pass keeps them
 * in vectors too and adds dy at them in the same (p, q) order.
 *
 * Workspace, per thread: the pass-1 results of one plane (H rows of Qv = Q rounded up to 16: values
 * and column indices), the padded input row (W + 2*pad + 16 floats), the indices of the output
 * (backward: P x Qv ints), an FP32 copy of the input plane when x is FP16 (H*W floats) and of the
 * output plane when y is FP16 (P*Q floats, forward only), each rounded up to 16 floats. */
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_ops.h"

/* Below this many output elements an op runs on one thread. */
#define YC_POOL_SERIAL_MAX 4096

/* Lanes of the stride-1 vector path. */
enum { VL = 16 };

static size_t round16(size_t n)
{
    return (n + 15) / 16 * 16;
}

/* Floats of one thread's workspace: pass-1 values and indices (rowmax floats each), the padded row,
 * the output's indices (backward), then the FP32 copies of an FP16 input plane and (forward) an FP16
 * output plane. */
typedef struct pool_ws {
    size_t rowmax, row, idx, xf, yf;
} pool_ws;

static pool_ws ws_floats(const yc_op *op)
{
    const yc_tensor *x = op->kind == YC_OP_MAXPOOL ? op->src[0] : op->src[1];
    const yc_tensor *y = op->kind == YC_OP_MAXPOOL ? op->dst[0] : op->src[0];
    pool_ws w;
    w.rowmax = (size_t)x->h * round16((size_t)y->w);
    w.row = round16((size_t)x->w + 2 * (size_t)op->p.pool.pad + VL);
    w.idx = op->kind == YC_OP_MAXPOOL_BWD ? (size_t)y->h * round16((size_t)y->w) : 0;
    w.xf = x->type == YC_F16 ? round16((size_t)x->h * x->w) : 0;
    w.yf = op->kind == YC_OP_MAXPOOL && y->type == YC_F16 ? round16((size_t)y->h * y->w) : 0;
    return w;
}

static size_t ws_total(pool_ws w)
{
    return 2 * w.rowmax + w.row + w.idx + w.xf + w.yf;
}

size_t yc_cpu_maxpool_workspace(const yc_op *op, int threads)
{
    return (size_t)(threads > 0 ? threads : 1) * ws_total(ws_floats(op)) * sizeof(float);
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

/* ---- stride 1 with AVX-512: output columns as vector lanes */

#if defined(__x86_64__)
/* *m, *idx = the scan rule's step for value v at index at, lane by lane: take v where v > m or v is
 * NaN (idx is NULL in the forward pass). */
__attribute__((target("avx512f"), always_inline)) static inline void take16(__m512 *m, __m512i *idx, __m512 v,
                                                                             __m512i at)
{
    __mmask16 take = _mm512_cmp_ps_mask(v, *m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    *m = _mm512_mask_mov_ps(*m, take, v);
    if (idx)
        *idx = _mm512_mask_mov_epi32(*idx, take, at);
}

/* One plane (H x W) with stride 1: y (P x Q) its maxima (forward: y not NULL) or yi (P x Qv) the
 * plane index of each maximum (backward: yi not NULL), through the workspace rm and ri (H x Qv
 * pass-1 values and columns) and prow (W + 2*pad + VL floats). */
__attribute__((target("avx512f"), always_inline)) static inline void
plane_s1(const float *x, int H, int W, int P, int Q, int k, int pad, float *rm, int *ri, float *prow, float *y, int *yi)
{
    const bool want_idx = yi != NULL;
    const int Qv = (int)round16((size_t)Q);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i zero = _mm512_setzero_si512();
    for (int t = 0; t < W + 2 * pad + VL; t++)
        prow[t] = -INFINITY;
    for (int ih = 0; ih < H; ih++) {
        memcpy(prow + pad, x + (size_t)ih * W, (size_t)W * sizeof(float));
        for (int q = 0; q < Qv; q += VL) {
            __m512 m = _mm512_set1_ps(-INFINITY);
            /* the first column of each lane's window inside the row */
            __m512i col = _mm512_add_epi32(_mm512_set1_epi32(q - pad), lane);
            __m512i idx = _mm512_max_epi32(col, zero);
            for (int j = 0; j < k; j++)
                take16(&m, want_idx ? &idx : NULL, _mm512_loadu_ps(prow + q + j),
                       _mm512_add_epi32(col, _mm512_set1_epi32(j)));
            _mm512_storeu_ps(rm + (size_t)ih * Qv + q, m);
            if (want_idx)
                _mm512_storeu_si512(ri + (size_t)ih * Qv + q, idx);
        }
    }
    for (int p = 0; p < P; p++) {
        int h0, h1;
        span(p, k, 1, pad, H, &h0, &h1);
        for (int q = 0; q < Qv; q += VL) {
            __m512 m = _mm512_set1_ps(-INFINITY);
            __m512i w0 = _mm512_max_epi32(_mm512_add_epi32(_mm512_set1_epi32(q - pad), lane), zero);
            __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(h0 * W), w0);
            for (int ih = h0; ih < h1; ih++) {
                __m512i at = zero;
                if (want_idx)
                    at = _mm512_add_epi32(_mm512_set1_epi32(ih * W),
                                          _mm512_loadu_si512(ri + (size_t)ih * Qv + q));
                take16(&m, want_idx ? &idx : NULL, _mm512_loadu_ps(rm + (size_t)ih * Qv + q), at);
            }
            if (want_idx)
                _mm512_storeu_si512(yi + (size_t)p * Qv + q, idx);
            else
                _mm512_mask_storeu_ps(y + (size_t)p * Q + q, Q - q >= VL ? (__mmask16)0xffff
                                                                         : (__mmask16)((1u << (Q - q)) - 1), m);
        }
    }
}

__attribute__((target("avx512f"))) static void plane_s1_fwd(const float *x, int H, int W, int P, int Q, int k,
                                                            int pad, float *rm, float *prow, float *y)
{
    plane_s1(x, H, W, P, Q, k, pad, rm, NULL, prow, y, NULL);
}

__attribute__((target("avx512f"))) static void plane_s1_idx(const float *x, int H, int W, int P, int Q, int k,
                                                            int pad, float *rm, int *ri, float *prow, int *yi)
{
    plane_s1(x, H, W, P, Q, k, pad, rm, ri, prow, NULL, yi);
}
#endif

/* Whether the stride-1 vector path runs (stride 1 on a CPU with AVX-512). */
static bool use_s1(int stride)
{
#if defined(__x86_64__)
    return stride == 1 && __builtin_cpu_supports("avx512f");
#else
    (void)stride;
    return false;
#endif
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
    const bool s1 = use_s1(st);
#pragma omp parallel num_threads(a->threads) if (par)
    {
        float *rm = (float *)a->ws + (size_t)omp_get_thread_num() * ws_total(ws);
        int *ri = (int *)(rm + ws.rowmax);
        float *prow = rm + 2 * ws.rowmax;
        float *xbuf = ws.xf ? prow + ws.row + ws.idx : NULL;
        float *ybuf = ws.yf ? prow + ws.row + ws.idx + ws.xf : NULL;
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < C; c++) {
                const float *xp = input_plane(x, i, c, xbuf);
                size_t yoff = (size_t)i * y->ns + (size_t)c * P * Q;
                float *yp = y->p16 ? ybuf : y->p + yoff;
                if (s1) {
#if defined(__x86_64__)
                    plane_s1_fwd(xp, H, W, P, Q, k, pad, rm, prow, yp);
#endif
                } else {
                    pass_rows(xp, H, W, Q, k, st, pad, rm, ri);
                    for (int q = 0; q < Q; q++) {
                        int w0, w1;
                        span(q, k, st, pad, W, &w0, &w1);
                        for (int p = 0; p < P; p++)
                            pass_cols(rm, ri, W, Q, p, q, k, st, pad, H, w0, &yp[p * Q + q]);
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
    pool_ws ws = ws_floats(a->op);
    bool par = (size_t)N * C * P * Q > YC_POOL_SERIAL_MAX;
    const bool s1 = use_s1(st);
#pragma omp parallel num_threads(a->threads) if (par)
    {
        float *rm = (float *)a->ws + (size_t)omp_get_thread_num() * ws_total(ws);
        int *ri = (int *)(rm + ws.rowmax);
        float *prow = rm + 2 * ws.rowmax;
        int *yi = (int *)(prow + ws.row);
        float *xbuf = ws.xf ? prow + ws.row + ws.idx : NULL;
        const size_t Qv = round16((size_t)Q);
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < C; c++) {
                const float *xp = input_plane(x, i, c, xbuf);
                const float *gp = dy->p + (size_t)i * dy->ns + (size_t)c * P * Q;
                float *dp = dx->p + (size_t)i * dx->ns + (size_t)c * H * W;
                if (!acc)
                    memset(dp, 0, (size_t)H * W * sizeof *dp);
                if (s1) {
#if defined(__x86_64__)
                    plane_s1_idx(xp, H, W, P, Q, k, pad, rm, ri, prow, yi);
#endif
                    for (int p = 0; p < P; p++)
                        for (int q = 0; q < Q; q++)
                            dp[yi[p * Qv + q]] += gp[p * Q + q];
                    continue;
                }
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
