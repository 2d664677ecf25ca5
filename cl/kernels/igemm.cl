/* Convolutions as implicit GEMMs: one launch covers every image of the batch, and the column
 * matrix of im2col is never stored: its elements are gathered from the activation while a tile
 * is loaded into local memory (and scattered back by the backward-data GEMM's indexing).
 *
 *   forward          y[K, N*PQ]    = W[K, CRS] x col(x)[CRS, N*PQ]           (+ b[k])
 *   backward-data    dx[C, N*HW]   = W'[C, K*RS] x dcol(dy)[K*RS, N*HW]      (=, or += with acc)
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

/* dx = conv^T(dy, W), or dx += that with acc.  Grid: (ceil(N*H*W / TN), ceil(C / TM)). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
conv_bwd_data_igemm(TENSOR(dy), PARAM(w), TENSOR(dx), int acc_dx, int N, int C, int H, int W,
                    int K, int R, int S, int P, int Q, int sh, int sw, int ph, int pw)
{
    __local float As[TK][TM];
    __local float Bs[TK][TN];
    const int lid = get_local_id(0), tx = lid % 16, ty = lid / 16;
    const int col0 = get_group_id(0) * TN, row0 = get_group_id(1) * TM;
    const int RS = R * S, KRS = K * RS, HW = H * W, NHW = N * HW, PQ = P * Q;
    __global const float *wp = P(w);
    const int bcol = lid % TN, brow = lid / TN;
    const int col = col0 + bcol;
    const bool colok = col < NHW;
    const int n = colok ? col / HW : 0, hw = col - n * HW, h = hw / W, x0 = hw - h * W;
    const int hp = h + ph, wp0 = x0 + pw;
    const int ak = lid % TK, am = lid / TK;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++)
            acc[i][j] = 0.0f;
    /* the filters and taps (k, r, s) of this work item's A column and B entries, moved on by TK
     * each step */
    const int dk = TK / RS, dr = (TK / S) % R, ds = TK % S;
    int ak_k, ak_r, ak_s;
    DIGITS_OF(ak, R, S, ak_k, ak_r, ak_s);
    int bk[TK * TN / WG], br[TK * TN / WG], bs[TK * TN / WG];
    for (int i = 0; i < TK * TN / WG; i++)
        DIGITS_OF(brow + i * (WG / TN), R, S, bk[i], br[i], bs[i]);
    for (int k0 = 0; k0 < KRS; k0 += TK) {
        const bool akok = k0 + ak < KRS;
        for (int i = 0; i < TM * TK / WG; i++) {
            /* A[c, (k, r, s)] = W[k, c, r, s] */
            int m = am + i * (WG / TK), c = row0 + m;
            As[ak][m] = c < C && akok ? wp[((size_t)ak_k * C + c) * RS + ak_r * S + ak_s] : 0.0f;
        }
        DIGITS_ADVANCE(R, S, dk, dr, ds, ak_k, ak_r, ak_s);
        for (int i = 0; i < TK * TN / WG; i++) {
            int kr = brow + i * (WG / TN), kk = k0 + kr;
            int ty2 = hp - br[i], tx2 = wp0 - bs[i];
            float v = 0.0f;
            if (colok && kk < KRS && ty2 >= 0 && tx2 >= 0 && ty2 % sh == 0 && tx2 % sw == 0) {
                int p = ty2 / sh, q = tx2 / sw;
                if (p < P && q < Q)
                    v = LD(dy, n, (uint)((bk[i] * P + p) * Q + q));
            }
            Bs[kr][bcol] = v;
            DIGITS_ADVANCE(R, S, dk, dr, ds, bk[i], br[i], bs[i]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        TILE_MULTIPLY(As, Bs, acc)
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int j = 0; j < WN; j++) {
        int c2 = col0 + tx + 16 * j;
        if (c2 >= NHW)
            continue;
        int n2 = c2 / HW, hw2 = c2 - n2 * HW;
        for (int i = 0; i < WM; i++) {
            int c = row0 + ty + 16 * i;
            if (c >= C)
                continue;
            uint e = (uint)(c * HW + hw2);
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
