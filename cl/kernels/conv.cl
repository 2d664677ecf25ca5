/* The convolution kernels around CLBlast's GEMM (cl_conv.c): im2col, col2im, bias add with
 * conversion to the output's storage, and the bias gradient.
 *
 * col is one image's column matrix, CRS rows by PQ columns, row (c*R + r)*S + s, column p*Q + q,
 * dense FP32 in the workspace at a byte offset. */

/* col[(c,r,s), (p,q)] = x[n][c][p*sh - ph + r][q*sw - pw + s], 0 outside the image.
 * Dimension 0 over P*Q, dimension 1 over C*R*S. */
__kernel void im2col(TENSOR(x), uint n, PARAM(col), int C, int H, int W, int R, int S, int P, int Q, int sh,
                     int sw, int ph, int pw)
{
    uint pq = get_global_id(0), crs = get_global_id(1);
    if (pq >= (uint)(P * Q) || crs >= (uint)(C * R * S))
        return;
    int s = (int)crs % S, r = ((int)crs / S) % R, c = (int)crs / (R * S);
    int p = (int)pq / Q, q = (int)pq % Q;
    int h = p * sh - ph + r, w = q * sw - pw + s;
    float v = 0.0f;
    if (h >= 0 && h < H && w >= 0 && w < W)
        v = LD(x, n, (uint)((c * H + h) * W + w));
    P(col)[(ulong)crs * (uint)(P * Q) + pq] = v;
}

/* dx[n][c][h][w] (=|+=) the sum of the col entries that im2col took from (c, h, w), over r then s.
 * Dimension 0 over C*H*W. */
__kernel void col2im(PARAM(col), TENSOR(dx), uint n, int C, int H, int W, int R, int S, int P, int Q, int sh,
                     int sw, int ph, int pw, int acc)
{
    uint i = get_global_id(0);
    if (i >= (uint)(C * H * W))
        return;
    int c = (int)i / (H * W), hw = (int)i % (H * W), h = hw / W, w = hw % W;
    uint PQ = (uint)(P * Q);
    float sum = 0.0f;
    for (int r = 0; r < R; r++) {
        int hp = h + ph - r;
        if (hp < 0 || hp % sh != 0 || hp / sh >= P)
            continue;
        int p = hp / sh;
        for (int s = 0; s < S; s++) {
            int wq = w + pw - s;
            if (wq < 0 || wq % sw != 0 || wq / sw >= Q)
                continue;
            int q = wq / sw;
            sum += P(col)[(ulong)((c * R + r) * S + s) * PQ + (uint)(p * Q + q)];
        }
    }
    ST(dx, n, i, acc ? LD(dx, n, i) + sum : sum);
}

/* y[n0 + m][k*PQ + j] = src[m*src_ns + k*PQ + j] (+ b[k]) for images m of dimension 1; dimension 0
 * over K*PQ.  src is FP32 (the GEMM's result); it is y itself (in place) when y is FP32. */
__kernel void bias_store(PARAM(src), ulong src_ns, TENSOR(y), uint n0, PARAM(b), int has_b, uint K, uint PQ)
{
    uint i = get_global_id(0), m = get_global_id(1);
    if (i >= K * PQ)
        return;
    float v = P(src)[(ulong)m * src_ns + i];
    if (has_b)
        v = v + P(b)[i / PQ];
    ST(y, n0 + m, i, v);
}

/* db[k] += sum over images and positions of dy[n][k][:], float-float; one work-group per k */
__kernel void bias_grad(TENSOR(dy), PARAM(db), uint N, uint PQ, __local float2 *red)
{
    uint k = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    float2 s = (float2)(0.0f, 0.0f);
    for (uint n = 0; n < N; n++)
        for (uint j = lid; j < PQ; j += L)
            s = ff_add(s, LD(dy, n, k * PQ + j));
    s = ff_group_sum(s, red);
    if (lid == 0)
        P(db)[k] = ff_value(ff_add(s, P(db)[k]));
}
