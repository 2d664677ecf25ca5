/* Elementwise ops: SiLU and its gradient, add, copy (or accumulate), fill, dropout, and the uint8
 * input.
 * Work items: dimension 0 runs over the `chw` elements of an image (rounded up to the work-group
 * size: items past the end do nothing), dimension 1 over the images.  Each item reads and writes
 * one index only, so every kernel here may run in place (an output identical to an input). */

/* y = silu(x) */
__kernel void silu_fwd(TENSOR(x), TENSOR(y), uint chw)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= chw)
        return;
    ST(y, n, i, yc_silu(LD(x, n, i)));
}

/* dx (=|+=) dy * silu'(x) */
__kernel void silu_bwd(TENSOR(dy), TENSOR(x), TENSOR(dx), uint chw, int acc)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= chw)
        return;
    float g = yc_silu_grad(LD(dy, n, i), LD(x, n, i));
    if (acc)
        g = LD(dx, n, i) + g;
    ST(dx, n, i, g);
}

/* y = a + b */
__kernel void add(TENSOR(a), TENSOR(b), TENSOR(y), uint chw)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= chw)
        return;
    ST(y, n, i, LD(a, n, i) + LD(b, n, i));
}

/* backend.h's yc_dropout_hash, the same bits */
uint yc_dropout_hash(uint seed, uint index)
{
    uint h = index;
    for (int round = 0; round < 2; round++) {
        h ^= h >> 16;
        h *= 0x7feb352dU;
        h ^= h >> 15;
        h *= 0x846ca68bU;
        h ^= h >> 16;
        h ^= round ? 0U : seed * 0x9e3779b9U;
    }
    return h;
}

/* y (=|+=) x * scale where the hash of (seed, the element's row-major index) >= threshold, else
 * 0 (FP32 tensors) */
__kernel void dropout(TENSOR(x), TENSOR(y), uint chw, uint threshold, uint seed, float scale,
                      int acc)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= chw)
        return;
    float v = yc_dropout_hash(seed, n * chw + i) >= threshold ? LD(x, n, i) * scale : 0.0f;
    if (acc)
        v = LD(y, n, i) + v;
    ST(y, n, i, v);
}

/* y (=|+=) a */
__kernel void copy(TENSOR(a), TENSOR(y), uint chw, int acc)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= chw)
        return;
    float v = LD(a, n, i);
    if (acc)
        v = LD(y, n, i) + v;
    ST(y, n, i, v);
}

/* y = value */
__kernel void fill(TENSOR(y), uint chw, float value)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= chw)
        return;
    ST(y, n, i, value);
}

/* y = u8 / 255: a batch of uint8 images (chw bytes each, packed) into an activation, the input
 * normalisation of train.py (the host divides the same way, rounding correctly) */
__kernel void u8_scaled(__global const uchar *u8, TENSOR(y), uint chw)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= chw)
        return;
    ST(y, n, i, (float)u8[(size_t)n * chw + i] / 255.0f);
}
