/* Convolutions as implicit GEMMs: one launch covers every image of the batch, and the column
 * matrix of im2col is never stored: its elements are gathered from the activation while a tile
 * is loaded into local memory (and scattered back by the backward-data GEMM's indexing).
 *
 *   forward          y[K, N*PQ]    = W[K, CRS] x col(x)[CRS, N*PQ]           (+ b[k])
 *   backward-data    dx[C, N*HW]   = W'[C, K*RS] x dcol(dy)[K*RS, N*HW]      (=, or += with acc;
 *                                   per phase of the stride, below)
 *   backward-filter  dW[K, CRS]   += dy[K, N*PQ] x col(x)'[N*PQ, CRS]        (split over N*PQ)
 *
 * x (N,C,H,W), W (K,C,R,S), y (N,K,P,Q); rows index output channels (forward, backward-filter)
 * or input channels (backward-data), columns output pixels of all images, input pixels of all
 * images, or filter taps (c, r, s).  dcol(dy)[(k, r, s), (n, h, w)] is dy[n, k, p, q] with
 * p = (h + ph - r) / sh and q = (w + pw - s) / sw where those divide exactly and lie inside the
 * output, else 0.
 *
 * A work-group of 256 work items computes a TM x TN tile of the result, TK reduction steps at a
 * time through local memory; work item (ty, tx) = (lid / 16, lid % 16) holds the WM x WN
 * outputs at rows ty + 16 i and columns tx + 16 j, so that 16 neighbouring work items read and
 * write 16 neighbouring columns.  Products are accumulated with fma() in increasing reduction
 * order: the result does not depend on whether the compiler contracts a*b+c.
 *
 * The backward-filter GEMM reduces over N*P*Q, which is long for few outputs: the reduction is
 * split in `splits` chunks (grid dimension 2), each writing its partial dW to the workspace, and
 * conv_bwd_filter_reduce adds the chunks in order to dW: deterministic, no atomics.  With one
 * split the GEMM adds into dW itself. */

#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 64
#endif
#ifndef TK
#define TK 16
#endif
#define WM (TM / 16)
#define WN (TN / 16)
#define WG 256

/* The TK x TM and TK x TN tiles in local memory, reduction index first. */
#define TILE_MULTIPLY(As, Bs, acc)                                                                 \
    for (int kk = 0; kk < TK; kk++) {                                                              \
        float a_[WM], b_[WN];                                                                      \
        for (int i = 0; i < WM; i++)                                                               \
            a_[i] = As[kk][ty + 16 * i];                                                           \
        for (int j = 0; j < WN; j++)                                                               \
            b_[j] = Bs[kk][tx + 16 * j];                                                           \
        for (int i = 0; i < WM; i++)                                                               \
            for (int j = 0; j < WN; j++)                                                           \
                acc[i][j] = fma(a_[i], b_[j], acc[i][j]);                                          \
    }

/* Reduction indices are mixed-radix numbers (c, r, s) over (C, R, S) (forward, backward-filter's
 * taps) or (k, r, s) over (K, R, S) (backward-data): decoded by division once, then moved on by TK
 * each step digit by digit (TK in the same radix: ds < S, dr < R, one carry at most each), which
 * keeps divisions out of the loop. */
#define DIGITS_OF(kk, R, S, hi, r, s)                                                              \
    do {                                                                                           \
        (hi) = (kk) / ((R) * (S));                                                                 \
        int rs_ = (kk) - (hi) * (R) * (S);                                                         \
        (r) = rs_ / (S);                                                                           \
        (s) = rs_ - (r) * (S);                                                                     \
    } while (0)
#define DIGITS_ADVANCE(R, S, dhi, dr, ds, hi, r, s)                                               \
    do {                                                                                           \
        (s) += (ds);                                                                               \
        if ((s) >= (S)) {                                                                          \
            (s) -= (S);                                                                            \
            (r)++;                                                                                 \
        }                                                                                          \
        (r) += (dr);                                                                               \
        if ((r) >= (R)) {                                                                          \
            (r) -= (R);                                                                            \
            (hi)++;                                                                                \
        }                                                                                          \
        (hi) += (dhi);                                                                             \
    } while (0)

/* y = conv(x, W) (+ b).  Grid: (ceil(N*P*Q / TN) work-groups, ceil(K / TM)). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
conv_fwd_igemm(TENSOR(x), PARAM(w), PARAM(b), int has_bias, TENSOR(y), int N, int C, int H, int W,
               int K, int R, int S, int P, int Q, int sh, int sw, int ph, int pw)
{
    __local float As[TK][TM];
    __local float Bs[TK][TN];
    const int lid = get_local_id(0), tx = lid % 16, ty = lid / 16;
    const int col0 = get_group_id(0) * TN, row0 = get_group_id(1) * TM;
    const int RS = R * S, CRS = C * RS, PQ = P * Q, NPQ = N * PQ;
    __global const float *wp = P(w);
    /* this work item's column of the B tile (the same for every reduction step) */
    const int bcol = lid % TN, brow = lid / TN;
    const int col = col0 + bcol;
    const bool colok = col < NPQ;
    const int n = colok ? col / PQ : 0, pq = col - n * PQ, p = pq / Q, q = pq - p * Q;
    const int ih0 = p * sh - ph, iw0 = q * sw - pw;
    /* and its entries of the A tile */
    const int ak = lid % TK, am = lid / TK;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++)
            acc[i][j] = 0.0f;
    /* the taps (c, r, s) of this work item's B entries, moved on by TK each step */
    const int dc = TK / RS, dr = (TK / S) % R, ds = TK % S;
    int bc[TK * TN / WG], br[TK * TN / WG], bs[TK * TN / WG];
    for (int i = 0; i < TK * TN / WG; i++)
        DIGITS_OF(brow + i * (WG / TN), R, S, bc[i], br[i], bs[i]);
    for (int k0 = 0; k0 < CRS; k0 += TK) {
        for (int i = 0; i < TM * TK / WG; i++) {
            int m = am + i * (WG / TK), row = row0 + m, kk = k0 + ak;
            As[ak][m] = row < K && kk < CRS ? wp[(size_t)row * CRS + kk] : 0.0f;
        }
        for (int i = 0; i < TK * TN / WG; i++) {
            int kr = brow + i * (WG / TN), kk = k0 + kr;
            int ih = ih0 + br[i], iw = iw0 + bs[i];
            float v = 0.0f;
            if (colok && kk < CRS && ih >= 0 && ih < H && iw >= 0 && iw < W)
                v = LD(x, n, (uint)((bc[i] * H + ih) * W + iw));
            Bs[kr][bcol] = v;
            DIGITS_ADVANCE(R, S, dc, dr, ds, bc[i], br[i], bs[i]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        TILE_MULTIPLY(As, Bs, acc)
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global const float *bp = P(b);
    for (int j = 0; j < WN; j++) {
        int c2 = col0 + tx + 16 * j;
        if (c2 >= NPQ)
            continue;
        int n2 = c2 / PQ, pq2 = c2 - n2 * PQ;
        for (int i = 0; i < WM; i++) {
            int row = row0 + ty + 16 * i;
            if (row < K)
                ST(y, n2, (uint)(row * PQ + pq2), has_bias ? acc[i][j] + bp[row] : acc[i][j]);
        }
    }
}

/* dx = conv^T(dy, W), or dx += that with acc.  The input pixels are split by phase (h mod sh,
 * w mod sw), one phase per grid row of dimension 2: the taps that reach a pixel of phase (a, b)
 * are r = ra + sh i and s = sb + sw j, ra = (a + ph) mod sh and sb = (b + pw) mod sw, and for
 * them p = (h + ph - r) / sh = hh + oa - i exactly (h = a + sh hh, oa = (a + ph - ra) / sh;
 * likewise q), so each phase is a GEMM over (k, i, j) in which no tap misses: without the split,
 * 3/4 of the taps of a 3x3 stride-2 convolution would multiply zeros.  A phase no tap reaches
 * (a 1x1 convolution with stride 2) writes zeros.
 * Grid: (ceil(N * ceil(H / sh) * ceil(W / sw) / TN), ceil(C / TM), sh * sw). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
conv_bwd_data_igemm(TENSOR(dy), PARAM(w), TENSOR(dx), int acc_dx, int N, int C, int H, int W,
                    int K, int R, int S, int P, int Q, int sh, int sw, int ph, int pw)
{
    __local float As[TK][TM];
    __local float Bs[TK][TN];
    const int lid = get_local_id(0), tx = lid % 16, ty = lid / 16;
    const int col0 = get_group_id(0) * TN, row0 = get_group_id(1) * TM;
    /* the phase (pa, pb), its taps (ra + sh i, sb + sw j) for i < nr, j < ns, its pixels */
    const int z = get_group_id(2), pa = z / sw, pb = z - pa * sw;
    const int ra = (pa + ph) % sh, sb = (pb + pw) % sw;
    const int nr = ra < R ? (R - ra + sh - 1) / sh : 0, ns = sb < S ? (S - sb + sw - 1) / sw : 0;
    const int oa = (pa + ph - ra) / sh, ob = (pb + pw - sb) / sw;
    const int Hp = pa < H ? (H - pa + sh - 1) / sh : 0, Wp = pb < W ? (W - pb + sw - 1) / sw : 0;
    const int HWp = Hp * Wp, NHWp = N * HWp, HW = H * W, RS = R * S;
    /* the whole work-group leaves together, before any barrier */
    if (col0 >= NHWp)
        return;
    const int IJ = nr * ns, KIJ = K * IJ;
    __global const float *wp = P(w);
    const int bcol = lid % TN, brow = lid / TN;
    const int col = col0 + bcol;
    const bool colok = col < NHWp;
    const int n = colok ? col / HWp : 0, hw = col - n * HWp, hh = hw / Wp, ww = hw - hh * Wp;
    const int p0 = hh + oa, q0 = ww + ob;
    const int ak = lid % TK, am = lid / TK;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++)
            acc[i][j] = 0.0f;
    /* the filters and taps (k, i, j) of this work item's A column and B entries, moved on by TK
     * each step */
    const int dk = IJ ? TK / IJ : 0, di = IJ ? (TK / ns) % nr : 0, dj = IJ ? TK % ns : 0;
    int ak_k = 0, ak_i = 0, ak_j = 0;
    int bk[TK * TN / WG], bi[TK * TN / WG], bj[TK * TN / WG];
    if (IJ) {
        DIGITS_OF(ak, nr, ns, ak_k, ak_i, ak_j);
        for (int i = 0; i < TK * TN / WG; i++)
            DIGITS_OF(brow + i * (WG / TN), nr, ns, bk[i], bi[i], bj[i]);
    }
    for (int k0 = 0; k0 < KIJ; k0 += TK) {
        const bool akok = k0 + ak < KIJ;
        for (int i = 0; i < TM * TK / WG; i++) {
            /* A[c, (k, i, j)] = W[k, c, ra + sh i, sb + sw j] */
            int m = am + i * (WG / TK), c = row0 + m;
            As[ak][m] = c < C && akok
                            ? wp[((size_t)ak_k * C + c) * RS + (ra + sh * ak_i) * S + sb + sw * ak_j]
                            : 0.0f;
        }
        DIGITS_ADVANCE(nr, ns, dk, di, dj, ak_k, ak_i, ak_j);
        for (int i = 0; i < TK * TN / WG; i++) {
            int kr = brow + i * (WG / TN), kk = k0 + kr;
            int p = p0 - bi[i], q = q0 - bj[i];
            float v = 0.0f;
            if (colok && kk < KIJ && p >= 0 && p < P && q >= 0 && q < Q)
                v = LD(dy, n, (uint)((bk[i] * P + p) * Q + q));
            Bs[kr][bcol] = v;
            DIGITS_ADVANCE(nr, ns, dk, di, dj, bk[i], bi[i], bj[i]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        TILE_MULTIPLY(As, Bs, acc)
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int j = 0; j < WN; j++) {
        int c2 = col0 + tx + 16 * j;
        if (c2 >= NHWp)
            continue;
        int n2 = c2 / HWp, hw2 = c2 - n2 * HWp, hh2 = hw2 / Wp, ww2 = hw2 - hh2 * Wp;
        int pix = (pa + sh * hh2) * W + pb + sw * ww2;
        for (int i = 0; i < WM; i++) {
            int c = row0 + ty + 16 * i;
            if (c >= C)
                continue;
            uint e = (uint)(c * HW + pix);
            float v = acc[i][j];
            if (acc_dx)
                v = LD(dx, n2, e) + v;
            ST(dx, n2, e, v);
        }
    }
}

/* dW += dy x col(x)' over reduction chunk z of `chunk` columns (grid dimension 2): into dW itself
 * when splits is 1, else into part[z][K][CRS].  Grid: (ceil(CRS / TN), ceil(K / TM), splits). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
conv_bwd_filter_igemm(TENSOR(x), TENSOR(dy), PARAM(dw), PARAM(part), int splits, int chunk, int N,
                      int C, int H, int W, int K, int R, int S, int P, int Q, int sh, int sw, int ph,
                      int pw)
{
    __local float As[TK][TM];
    __local float Bs[TK][TN];
    const int lid = get_local_id(0), tx = lid % 16, ty = lid / 16;
    const int col0 = get_group_id(0) * TN, row0 = get_group_id(1) * TM, z = get_group_id(2);
    const int RS = R * S, CRS = C * RS, PQ = P * Q, NPQ = N * PQ;
    const int r0 = z * chunk, r1 = min(r0 + chunk, NPQ);
    /* reduction index fastest among neighbouring work items: neighbouring pixels */
    const int lk = lid % TK, lrow = lid / TK;
    /* the taps (c, r, s) of this work item's B columns, the same every step (c -1: past CRS) */
    int fc[TK * TN / WG], fr[TK * TN / WG], fs[TK * TN / WG];
    for (int i = 0; i < TK * TN / WG; i++) {
        int crs = col0 + lrow + i * (WG / TK);
        DIGITS_OF(crs, R, S, fc[i], fr[i], fs[i]);
        if (crs >= CRS)
            fc[i] = -1;
    }
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++)
            acc[i][j] = 0.0f;
    /* this work item's pixel (n, p, q) of the reduction, moved on by TK each step */
    const int dn = TK / PQ, dp = (TK / Q) % P, dq = TK % Q;
    int n, p, q;
    DIGITS_OF(r0 + lk, P, Q, n, p, q);
    for (int k0 = r0; k0 < r1; k0 += TK) {
        const bool kok = k0 + lk < r1;
        const int pq = p * Q + q;
        for (int i = 0; i < TM * TK / WG; i++) {
            /* A[k, (n, p, q)] = dy[n, k, p, q] */
            int m = lrow + i * (WG / TK), k = row0 + m;
            As[lk][m] = kok && k < K ? LD(dy, n, (uint)(k * PQ + pq)) : 0.0f;
        }
        for (int i = 0; i < TK * TN / WG; i++) {
            /* B[(n, p, q), (c, r, s)] = x[n, c, p sh - ph + r, q sw - pw + s] */
            int cc = lrow + i * (WG / TK);
            int ih = p * sh - ph + fr[i], iw = q * sw - pw + fs[i];
            float v = 0.0f;
            if (kok && fc[i] >= 0 && ih >= 0 && ih < H && iw >= 0 && iw < W)
                v = LD(x, n, (uint)((fc[i] * H + ih) * W + iw));
            Bs[lk][cc] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        TILE_MULTIPLY(As, Bs, acc)
        barrier(CLK_LOCAL_MEM_FENCE);
        DIGITS_ADVANCE(P, Q, dn, dp, dq, n, p, q);
    }
    __global float *out = splits == 1 ? P(dw) : P(part) + (size_t)z * K * CRS;
    for (int i = 0; i < WM; i++) {
        int k = row0 + ty + 16 * i;
        if (k >= K)
            continue;
        for (int j = 0; j < WN; j++) {
            int crs = col0 + tx + 16 * j;
            if (crs >= CRS)
                continue;
            size_t e = (size_t)k * CRS + crs;
            out[e] = splits == 1 ? out[e] + acc[i][j] : acc[i][j];
        }
    }
}

/* dW[e] += part[0][e] + part[1][e] + ... in that order, for e < count. */
__kernel void conv_bwd_filter_reduce(PARAM(part), PARAM(dw), int splits, uint count)
{
    uint e = get_global_id(0);
    if (e >= count)
        return;
    __global const float *pp = P(part);
    float s = pp[e];
    for (int z = 1; z < splits; z++)
        s += pp[(size_t)z * count + e];
    P(dw)[e] += s;
}
