/* Max pooling (square window, stride, padding counted as -inf) and nearest upsampling, forward
 * and backward.  Work items: dimension 0 over the elements of one output image (rounded up to the
 * work-group size), dimension 1 over the images.  The backward kernels gather (each input element
 * sums what reaches it, in the order the CPU backend adds it): no atomics, no races; max-pool's
 * first finds each window's maximum once (maxpool_argmax), so that the gather reads indices
 * instead of scanning every window around every element. */

/* PyTorch's window scan (MaxPoolKernel.cpp): rows then columns of the part of the window inside
 * the plane, starting from -inf at the first position inside, taking v when v > max or v is NaN;
 * so ties go to the first maximum and a NaN wins.  Returns the index (row * W + column) in the
 * plane and the maximum in *m. */
int window_argmax(TENSOR(x), uint n, uint plane, int H, int W, int hs, int ws, int k, float *m)
{
    int h0 = max(hs, 0), w0 = max(ws, 0), h1 = min(hs + k, H), w1 = min(ws + k, W);
    float best = -INFINITY;
    int idx = h0 * W + w0;
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            float v = LD(x, n, plane + (uint)(ih * W + iw));
            if (v > best || isnan(v)) {
                best = v;
                idx = ih * W + iw;
            }
        }
    *m = best;
    return idx;
}

/* y (N,C,P,Q) = max over each window of x (N,C,H,W) */
__kernel void maxpool_fwd(TENSOR(x), TENSOR(y), int C, int H, int W, int P, int Q, int k, int stride,
                          int pad)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= (uint)(C * P * Q))
        return;
    int c = (int)i / (P * Q), pq = (int)i % (P * Q), p = pq / Q, q = pq % Q;
    float m;
    window_argmax(x_p, x_off, x_ns, x_h, n, (uint)(c * H * W), H, W, p * stride - pad, q * stride - pad, k,
                  &m);
    ST(y, n, i, m);
}

/* Max-pool backward, first of two launches: the argmax of every window of x (its index in the
 * plane, as window_argmax scans it) into arg (N,C,P,Q, packed). */
__kernel void maxpool_argmax(TENSOR(x), PARAM(arg), int C, int H, int W, int P, int Q, int k,
                             int stride, int pad)
{
    __global int *am = (__global int *)(arg_p + arg_off);
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= (uint)(C * P * Q))
        return;
    int c = (int)i / (P * Q), pq = (int)i % (P * Q), p = pq / Q, q = pq % Q;
    float m;
    am[(size_t)n * (size_t)(C * P * Q) + i] =
        window_argmax(x_p, x_off, x_ns, x_h, n, (uint)(c * H * W), H, W, p * stride - pad,
                      q * stride - pad, k, &m);
}

/* dx (=|+=) the dy of every window whose maximum (arg, from maxpool_argmax) is this element,
 * windows in row-major order */
__kernel void maxpool_bwd(TENSOR(dy), PARAM(arg), TENSOR(dx), int C, int H, int W,
                          int P, int Q, int k, int stride, int pad, int acc)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= (uint)(C * H * W))
        return;
    int c = (int)i / (H * W), hw = (int)i % (H * W), h = hw / W, w = hw % W;
    /* windows p with p*stride - pad <= h < p*stride - pad + k, likewise q */
    int lo_h = h + pad - k + 1, lo_w = w + pad - k + 1;
    int p0 = lo_h <= 0 ? 0 : (lo_h + stride - 1) / stride, p1 = min((h + pad) / stride, P - 1);
    int q0 = lo_w <= 0 ? 0 : (lo_w + stride - 1) / stride, q1 = min((w + pad) / stride, Q - 1);
    float s = acc ? LD(dx, n, i) : 0.0f;
    uint oplane = (uint)(c * P * Q);
    __global const int *an = (__global const int *)(arg_p + arg_off) + (size_t)n * (size_t)(C * P * Q);
    for (int p = p0; p <= p1; p++)
        for (int q = q0; q <= q1; q++)
            if (an[oplane + (uint)(p * Q + q)] == hw)
                s += LD(dy, n, oplane + (uint)(p * Q + q));
    ST(dx, n, i, s);
}

/* y (N,C,H*f,W*f): y[h][w] = x[h/f][w/f] */
__kernel void upsample_fwd(TENSOR(x), TENSOR(y), int C, int H, int W, int f)
{
    uint i = get_global_id(0), n = get_global_id(1);
    int Ho = H * f, Wo = W * f;
    if (i >= (uint)(C * Ho * Wo))
        return;
    int c = (int)i / (Ho * Wo), r = (int)i % (Ho * Wo), h = r / Wo, w = r % Wo;
    ST(y, n, i, LD(x, n, (uint)((c * H + h / f) * W + w / f)));
}

/* dx (=|+=) the sum of dy over each f x f block, rows then columns */
__kernel void upsample_bwd(TENSOR(dy), TENSOR(dx), int C, int H, int W, int f, int acc)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= (uint)(C * H * W))
        return;
    int c = (int)i / (H * W), hw = (int)i % (H * W), h = hw / W, w = hw % W;
    int Wo = W * f;
    float s = 0.0f;
    for (int r = 0; r < f; r++)
        for (int b = 0; b < f; b++)
            s += LD(dy, n, (uint)((c * H * f + h * f + r) * Wo + w * f + b));
    ST(dx, n, i, acc ? LD(dx, n, i) + s : s);
}

/* Global average pooling: y (N,C,1,1) = the row-major sum of each (H,W) plane over H*W, one
 * work-item per channel */
__kernel void avgpool_fwd(TENSOR(x), TENSOR(y), int C, int HW)
{
    uint c = get_global_id(0), n = get_global_id(1);
    if (c >= (uint)C)
        return;
    float s = 0.0f;
    for (int k = 0; k < HW; k++)
        s += LD(x, n, c * (uint)HW + (uint)k);
    ST(y, n, c, s / (float)HW);
}

/* dx (=|+=) dy / (H*W) at every pixel of its plane */
__kernel void avgpool_bwd(TENSOR(dy), TENSOR(dx), int C, int HW, int acc)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= (uint)(C * HW))
        return;
    float g = LD(dy, n, i / (uint)HW) / (float)HW;
    ST(dx, n, i, acc ? LD(dx, n, i) + g : g);
}
