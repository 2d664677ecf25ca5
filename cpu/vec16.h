/* Vectors of 16 floats for the CPU kernels that are written with vector types rather than left to
 * the auto-vectoriser (activation.c, batchnorm.c): GCC's generic vectors, lowered to whatever the
 * clone's target has (one zmm, two ymm, four xmm).  Every operation is lane by lane and IEEE
 * (no contraction into FMA under -std=c11), so a value's result depends neither on the clone nor
 * on its position in a vector; horizontal sums are written out in a fixed order.  The selects
 * below stay branch-free, which the auto-vectoriser does not manage when FP operations may trap
 * (the default -ftrapping-math).
 *
 * On CPUs with AVX-512 (when the GEMM runs its AVX-512 kernel: silu_avx512.c), the exp and SiLU
 * kernels of activation.c and batchnorm.c take their AVX-512 versions instead of the code below:
 * the same formulas with FMA and scalef, whose results differ from these in the last bits.  So a
 * value's exp and SiLU depend on the machine (and on YOLOCL_GEMM_KERNEL); what holds on every
 * machine is that within its path they do not depend on position, on the clone, on the fused or
 * unfused op, nor on FP16 or FP32 storage.
 *
 * Vector helpers are macros or always-inline functions that take pointers: no vector crosses a
 * call boundary, where vectors wider than the baseline ABI's registers would be passed in memory.
 *
 * The exp: glibc vectorises expf only under -ffast-math, which yolocl does not use (training must
 * see NaN and Inf), so it is our own: branch-free (selects only), Cephes' expf polynomial after a
 * Cody-Waite reduction, 2^n applied in two halves so that subnormal results come out right.
 * Faithfully rounded: within 0.99 ulp of the true value over every float input (checked
 * exhaustively once; tests/test_ops.c sweeps every 61st float).
 *
 * SiLU and its gradient are PyTorch's CPU kernels, operation for operation (see activation.c for
 * the special values):
 *   silu(x)        = x / (1 + exp(-x))
 *   silu_bwd(dy,x) = dy * s * (1 + x * (1 - s)),  s = 1 / (1 + exp(-x))
 * Every kernel that applies them (the SiLU ops, the fused batch norm + SiLU ops) goes through
 * silu_v and silu_bwd_v (silu_avx512.c's silu16 and silu_bwd16 on the AVX-512 path), which is
 * what makes the fused ops bit-identical to the unfused ones. */
#ifndef YC_VEC16_H
#define YC_VEC16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VL 16
typedef float vf __attribute__((vector_size(VL * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(VL * sizeof(float))));
typedef uint32_t vu __attribute__((vector_size(VL * sizeof(float))));

#define SPLAT(v) ((vf){0} + (v))
/* m ? a : b for a comparison mask m (all ones or zeros per lane) */
#define SELECT(m, a, b) ((vf)(((vi)(a) & (m)) | ((vi)(b) & ~(m))))

/* *v = exp(*v), lane by lane. */
static inline __attribute__((always_inline)) void exp_v(vf *v)
{
    /* ln 2 split so that n * ln2_hi is exact for |n| <= 2^15 (Cody-Waite) */
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    const float round_magic = 0x1.8p23f; /* adding it rounds to an integer kept in the low bits */
    vf x = *v;
    /* Clamp so that 2^n stays in range: above 89 the result is +inf anyway, below -104 it is +0.
     * NaN fails both comparisons and passes through. */
    vf xc = SELECT(x > SPLAT(89.0f), SPLAT(89.0f), x);
    xc = SELECT(xc < SPLAT(-104.0f), SPLAT(-104.0f), xc);
    vf kf = xc * 1.44269504088896341f + round_magic;
    vi n = (vi)((vu)kf - 0x4B400000u); /* round(x / ln 2) in [-150, 128] */
    vf nf = kf - round_magic;
    vf r = xc - nf * ln2_hi;
    r = r - nf * ln2_lo; /* |r| <= ln(2)/2 (slightly more after rounding) */
    vf r2 = r * r;
    /* Cephes expf polynomial: e^r = 1 + r + r^2 * p(r) */
    vf p = SPLAT(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    /* 2^n = 2^n1 * 2^n2 with both halves normal; the first product is exact, the second rounds
     * once (into the subnormal range where needed) or overflows to +inf.  A NaN x has made p NaN,
     * and NaN times anything (whatever bits n holds then) is NaN: no select needed. */
    vi n1 = n >> 1, n2 = n - n1;
    vf s1 = (vf)(((vu)n1 + 127u) << 23), s2 = (vf)(((vu)n2 + 127u) << 23);
    *v = p * s1 * s2;
}

/* *v = silu(*v) = *v / (1 + exp(-*v)). */
static inline __attribute__((always_inline)) void silu_v(vf *v)
{
    vf e = -*v;
    exp_v(&e);
    *v = *v / (1.0f + e);
}

/* *g = *g * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)): the gradient of SiLU at x times *g. */
static inline __attribute__((always_inline)) void silu_bwd_v(vf *g, const vf *x)
{
    vf s = -*x;
    exp_v(&s);
    s = 1.0f / (1.0f + s);
    *g = *g * s * (1.0f + *x * (1.0f - s));
}

/* Loads `len` (<= VL) floats into *v, zero padded. */
static inline __attribute__((always_inline)) void load_n(vf *v, const float *p, size_t len)
{
    if (len == VL) {
        memcpy(v, p, sizeof *v);
        return;
    }
    float t[VL] = {0};
    memcpy(t, p, len * sizeof(float));
    memcpy(v, t, sizeof *v);
}

/* Stores the first `len` (<= VL) lanes of *v. */
static inline __attribute__((always_inline)) void store_n(float *p, const vf *v, size_t len)
{
    memcpy(p, v, len * sizeof(float));
}

/* All ones in lanes [0, len), zeros above (a vi). */
#define LANES_BELOW(len)                                                                                     \
    ((vi){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} < (vi){0} + (int32_t)(len))

/* Applies the lane function `body` to [0, n): whole vectors, then the tail padded in a local
 * vector (so every element goes through the same code and results do not depend on position). */
#define FOR_VECTORS(n, i, tail_len, body)                                                                    \
    do {                                                                                                     \
        size_t i = 0;                                                                                        \
        size_t tail_len = VL;                                                                                \
        for (; i + VL <= (n); i += VL)                                                                       \
            body;                                                                                            \
        if (i < (n)) {                                                                                       \
            tail_len = (n)-i;                                                                                \
            body;                                                                                            \
        }                                                                                                    \
    } while (0)

/* Whole-vector load and store (no alignment needed). */
static inline __attribute__((always_inline)) void vload(vf *v, const float *p)
{
    memcpy(v, p, sizeof *v);
}

static inline __attribute__((always_inline)) void vstore(float *p, const vf *v)
{
    memcpy(p, v, sizeof *v);
}

/* Lane permutations of two vectors (GCC's __builtin_shuffle over their 32 lanes): the even and odd
 * lanes, and the interleave of their low and high halves. */
#define EVEN_LANES ((vi){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#define ODD_LANES ((vi){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31})
#define LOW_ZIP ((vi){0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23})
#define HIGH_ZIP ((vi){8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31})

/* The even and odd elements of the 32 floats at p: p[0], p[2], ... p[30] and p[1], p[3], ... p[31]. */
static inline __attribute__((always_inline)) void deinterleave(vf *even, vf *odd, const float *p)
{
    vf a, b;
    vload(&a, p);
    vload(&b, p + VL);
    *even = __builtin_shuffle(a, b, EVEN_LANES);
    *odd = __builtin_shuffle(a, b, ODD_LANES);
}

/* p[2i] = a[i], p[2i + 1] = b[i]: 32 floats. */
static inline __attribute__((always_inline)) void interleave(float *p, const vf *a, const vf *b)
{
    vf lo = __builtin_shuffle(*a, *b, LOW_ZIP), hi = __builtin_shuffle(*a, *b, HIGH_ZIP);
    vstore(p, &lo);
    vstore(p + VL, &hi);
}

#endif
