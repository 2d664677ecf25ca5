/* Helpers every program of the OpenCL backend starts with (cl_program.c prepends this file to
 * each of the other files of cl/kernels/).
 *
 * OpenCL C 1.2.  Contraction of a*b+c into an FMA is off, so every expression rounds as written
 * and as the CPU backend (ISO C, no contraction) rounds it; fma() is written out where the CPU
 * kernels call fmaf().  The host builds with -cl-fp32-correctly-rounded-divide-sqrt where the
 * device supports it, so that division and sqrt round like the CPU's.
 *
 * Activations are (buffer, byte offset, elements between images, half flag): TENSOR(t) declares
 * the four kernel arguments t_p, t_off, t_ns, t_h, and LD/ST read and write element i of image n
 * as float whatever the storage (FP16 through vload_half / vstore_half_rte, which need no
 * cl_khr_fp16).  Parameters, statistics and gradients are dense FP32 arrays: PARAM(p) declares a
 * buffer and a byte offset, and P(p) is the float pointer. */
#pragma OPENCL FP_CONTRACT OFF

#define TENSOR(t) __global uchar *t##_p, ulong t##_off, ulong t##_ns, int t##_h
#define PARAM(p) __global uchar *p##_p, ulong p##_off
#define P(p) ((__global float *)(p##_p + p##_off))

float ld_elem(__global const uchar *p, ulong off, ulong ns, int h, uint n, uint i)
{
    ulong e = (ulong)n * ns + i;
    if (h)
        return vload_half(e, (__global const half *)(p + off));
    return ((__global const float *)(p + off))[e];
}

void st_elem(__global uchar *p, ulong off, ulong ns, int h, uint n, uint i, float v)
{
    ulong e = (ulong)n * ns + i;
    if (h)
        vstore_half_rte(v, e, (__global half *)(p + off));
    else
        ((__global float *)(p + off))[e] = v;
}

#define LD(t, n, i) ld_elem(t##_p, t##_off, t##_ns, t##_h, (n), (i))
#define ST(t, n, i, v) st_elem(t##_p, t##_off, t##_ns, t##_h, (n), (i), (v))

/* ---- float-float sums: value = hi + lo, about 44 significant bits ----------------------------
 * Reductions that the CPU backend does in double run in float-float here (not every device has
 * cl_khr_fp64): TwoSum keeps the rounding error of each addition, products are split exactly
 * with fma. */

/* a + b with the rounding error of the sum carried in lo */
float2 ff_add(float2 a, float b)
{
    float s = a.x + b;
    float bb = s - a.x;
    float err = (a.x - (s - bb)) + (b - bb);
    return (float2)(s, a.y + err);
}

/* a + b for two float-float values */
float2 ff_add2(float2 a, float2 b)
{
    float2 r = ff_add(a, b.x);
    r.y = r.y + b.y;
    return r;
}

/* a + x*y with the product split exactly */
float2 ff_add_prod(float2 a, float x, float y)
{
    float p = x * y;
    float e = fma(x, y, -p);
    float2 r = ff_add(a, p);
    r.y = r.y + e;
    return r;
}

/* a * b for a float-float a and a float b */
float2 ff_mul(float2 a, float b)
{
    float p = a.x * b;
    return (float2)(p, fma(a.x, b, -p) + a.y * b);
}

/* hi + lo rounded to float */
float ff_value(float2 a)
{
    return a.x + a.y;
}

/* a / m for a count m (exact as a float-float even above 2^24), as a float-float: the float
 * quotient and one Newton correction from the exactly computed remainder */
float2 ff_div_count(float2 a, uint m)
{
    float mh = (float)m;
    float ml = (float)((long)m - (long)mh);
    float q = a.x / mh;
    float p = q * mh;
    float pe = fma(q, mh, -p);
    float r = (((a.x - p) - pe) + a.y) - q * ml;
    return (float2)(q, r / mh);
}

/* a - b exactly, as a float-float (TwoSum) */
float2 ff_sub_exact(float a, float b)
{
    float s = a - b;
    float bb = s - a;
    return (float2)(s, (a - (s - bb)) + (-b - bb));
}

/* Tree sum of the work-group's values v (one per work item) in local memory of get_local_size(0)
 * entries, a power of two; every work item gets the total.  The order is fixed by the local size:
 * results do not depend on scheduling. */
float2 ff_group_sum(float2 v, __local float2 *red)
{
    uint lid = get_local_id(0), L = get_local_size(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = L / 2; s > 0; s /= 2) {
        if (lid < s)
            red[lid] = ff_add2(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float2 r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* ---- exp and SiLU, operation for operation as the CPU backend (cpu/activation.c) ----------- */

/* exp(x): Cody-Waite reduction, Cephes' polynomial, 2^n applied in two halves (subnormal
 * results right where the device keeps subnormals).  The CPU's vectorised exp, scalar. */
float yc_exp(float x)
{
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    const float round_magic = 0x1.8p23f;
    float xc = x > 89.0f ? 89.0f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    float kf = xc * 1.44269504088896341f + round_magic;
    int n = (int)(as_uint(kf) - 0x4B400000u);
    float nf = kf - round_magic;
    float r = xc - nf * ln2_hi;
    r = r - nf * ln2_lo;
    float r2 = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    int n1 = n >> 1, n2 = n - n1;
    float s1 = as_float((uint)(n1 + 127) << 23), s2 = as_float((uint)(n2 + 127) << 23);
    return p * s1 * s2;
}

/* PyTorch's silu: x / (1 + exp(-x)) */
float yc_silu(float x)
{
    return x / (1.0f + yc_exp(-x));
}

/* PyTorch's silu backward: dy * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)) */
float yc_silu_grad(float dy, float x)
{
    float s = 1.0f / (1.0f + yc_exp(-x));
    return dy * s * (1.0f + x * (1.0f - s));
}
