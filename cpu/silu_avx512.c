/* The exp, SiLU and fused batch norm + SiLU kernels written with AVX-512 intrinsics, which
 * activation.c and batchnorm.c call instead of their generic-vector code (vec16.h) when
 * yc_cpu_silu_avx512() says so.  Why a second version: the generic vectors cannot use FMA (no
 * contraction under -std=c11, and a contracted clone would differ from the others) nor AVX-512's
 * scalef and roundscale, so their exp takes more than twice the vector operations of this one,
 * and the fused ops are bound by it (docs/PERFORMANCE.md, "Kernel choices").
 *
 * Same formulas as vec16.h (PyTorch's kernels, special values as activation.c lists them):
 *   exp: clamp to [-104, 89], n = round(x * log2e) (roundscale), r = x - n ln2 in two FMAs
 *        (Cody-Waite: the same split of ln 2), Cephes' polynomial as FMAs, then scalef(p, n) =
 *        p * 2^n rounded once, subnormal results and overflow to +inf included.  Within 0.90 ulp
 *        of the true value over every float (checked exhaustively once; tests/test_ops.c sweeps
 *        every 61st float), but not bit for bit the generic exp: the FMAs round differently.
 *   the divisions stay vdivps, as in PyTorch: the 14-bit vrcp14ps estimate with a Newton step
 *        (FMAs, and a clamp for 1 + e = +inf) was slower (the divider works beside the FMA
 *        ports) and cost a rounding more.
 *   silu_bwd(dy, x) = dy * s * (1 + x * (1 - s)) with the bracket one FMA.
 * Every kernel below that applies SiLU or its gradient goes through silu16 or silu_bwd16, so the
 * fused ops stay bit-identical to the unfused ones on this path, and the batch-norm parts (z, the
 * backward's sums) are the generic code's operations without FMA (batchnorm.c's unfused
 * BN_TRAIN and BN_BWD produce them with the generic code, this path included).  Tails go through
 * the same code with masked loads (zero padded, as load_n pads) and masked stores, so a value's
 * result does not depend on its position.
 *
 * The path is taken when the GEMM's micro-kernel is the AVX-512 one (gemm.h's
 * yc_sgemm_kernel_name(), which checks the CPU and honours YOLOCL_GEMM_KERNEL): one switch, read
 * once, selects the AVX-512 code of both, and the tests cover the generic path on AVX-512
 * machines by setting it. */
#include "cpu_ops.h"
#include "gemm.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

bool yc_cpu_silu_avx512(void)
{
#if defined(__x86_64__)
    static int use = -1; /* -1 until the first call */
    int u = __atomic_load_n(&use, __ATOMIC_RELAXED);
    if (u < 0) {
        u = strcmp(yc_sgemm_kernel_name(), "avx512") == 0;
        __atomic_store_n(&use, u, __ATOMIC_RELAXED);
    }
    return u;
#else
    return false;
#endif
}

#if defined(__x86_64__)

#define AVX512 __attribute__((target("avx512f")))
#define AVX512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

/* Lanes [0, n) of a 16-lane mask, n >= 1 (all for n >= 16). */
AVX512_INLINE __mmask16 lanes(size_t n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

AVX512_INLINE __m512 neg16(__m512 x)
{
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
}

/* exp(x), lane by lane. */
AVX512_INLINE __m512 exp16(__m512 x)
{
    /* vmaxps and vminps return their second operand when either is NaN: x goes second, so that
     * NaN passes (and makes every later step NaN; the exp sweep checks exp(NaN)).  89 and -104 as
     * in vec16.h: above 89 the result is +inf (scalef overflows), below -104 it is +0. */
    __m512 xc = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* n * ln2_hi is exact and so is xc minus it; the FMA makes n * ln2_lo exact too */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    /* 1 + r + r^2 p as 1 + r (1 + r p): two FMAs, each rounding a value near 1 (the inner one's
     * error then scaled by |r| < 0.35).  Rounding r + r^2 p before adding 1 instead cost up to a
     * quarter ulp of results below 1, which took the worst case over 1 ulp. */
    const __m512 one = _mm512_set1_ps(1.0f);
    p = _mm512_fmadd_ps(r, _mm512_fmadd_ps(r, p, one), one);
    return _mm512_scalef_ps(p, n);
}

/* 1 + exp(-x), lane by lane: the denominator of SiLU and of the sigmoid. */
AVX512_INLINE __m512 denom16(__m512 x)
{
    return _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(neg16(x)));
}

AVX512_INLINE __m512 silu16(__m512 x)
{
    return _mm512_div_ps(x, denom16(x));
}

/* g * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)): the gradient of SiLU at x times g. */
AVX512_INLINE __m512 silu_bwd16(__m512 g, __m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 s = _mm512_div_ps(one, denom16(x));
    return _mm512_mul_ps(_mm512_mul_ps(g, s), _mm512_fmadd_ps(x, _mm512_sub_ps(one, s), one));
}

/* (x - mean) * scale + beta without FMA, as batchnorm.c's normalise computes it.  GCC defines these
 * intrinsics as plain vector operators, so this relies on -std=c11 not contracting them, as
 * vec16.h does (tests/test_ops.c's fused_bn_silu fails if they are contracted). */
AVX512_INLINE __m512 bn16(__m512 x, __m512 mean, __m512 scale, __m512 beta)
{
    return _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(x, mean), scale), beta);
}

AVX512 void yc_cpu_exp_avx512(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

AVX512 void yc_cpu_silu_span_avx512(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m, silu16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

AVX512 void yc_cpu_silu_bwd_span_avx512(float *dx, const float *dy, const float *x, size_t n, int acc)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 g = silu_bwd16(_mm512_maskz_loadu_ps(m, dy + i), _mm512_maskz_loadu_ps(m, x + i));
        if (acc)
            g = _mm512_add_ps(_mm512_maskz_loadu_ps(m, dx + i), g);
        _mm512_mask_storeu_ps(dx + i, m, g);
    }
}

AVX512 void yc_cpu_bn_silu_avx512(float *a, const float *x, size_t n, float mean, float scale, float beta)
{
    const __m512 vm = _mm512_set1_ps(mean), vs = _mm512_set1_ps(scale), vb = _mm512_set1_ps(beta);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 z = bn16(_mm512_maskz_loadu_ps(m, x + i), vm, vs, vb);
        _mm512_mask_storeu_ps(a + i, m, silu16(z));
    }
}

AVX512 void yc_cpu_silu_bwd_of_bn_avx512(float *dz, const float *da, const float *x, size_t n, float mean,
                                         float scale, float beta)
{
    const __m512 vm = _mm512_set1_ps(mean), vs = _mm512_set1_ps(scale), vb = _mm512_set1_ps(beta);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 z = bn16(_mm512_maskz_loadu_ps(m, x + i), vm, vs, vb);
        _mm512_mask_storeu_ps(dz + i, m, silu_bwd16(_mm512_maskz_loadu_ps(m, da + i), z));
    }
}

/* One vector of yc_cpu_bn_silu_bwd_block_avx512: dz at j (len lanes) stored, *a += dz and
 * *b += dz * (x - mean), lanes past len adding +0 as batchnorm.c's SELECT makes them. */
AVX512_INLINE void bwd_step(__m512 *a, __m512 *b, float *dz, const float *da, const float *x, size_t j,
                            size_t len, __m512 vm, __m512 vs, __m512 vb)
{
    __mmask16 m = lanes(len);
    __m512 w = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vm);
    __m512 z = _mm512_add_ps(_mm512_mul_ps(w, vs), vb);
    __m512 v = silu_bwd16(_mm512_maskz_loadu_ps(m, da + j), z);
    _mm512_mask_storeu_ps(dz + j, m, v);
    w = _mm512_mul_ps(w, v);
    if (len < 16) {
        v = _mm512_maskz_mov_ps(m, v);
        w = _mm512_maskz_mov_ps(m, w);
    }
    *a = _mm512_add_ps(*a, v);
    *b = _mm512_add_ps(*b, w);
}

AVX512 void yc_cpu_bn_silu_bwd_block_avx512(double *sg, double *sgx, float *dz, const float *da, const float *x,
                                            size_t m, float mean, float scale, float beta)
{
    const __m512 vm = _mm512_set1_ps(mean), vs = _mm512_set1_ps(scale), vb = _mm512_set1_ps(beta);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    /* vector v of the block goes to accumulator v % 4, as batchnorm.c's FOR_BLOCK has it */
    size_t j = 0;
    for (; j + 64 <= m; j += 64) {
        bwd_step(&a0, &b0, dz, da, x, j, 16, vm, vs, vb);
        bwd_step(&a1, &b1, dz, da, x, j + 16, 16, vm, vs, vb);
        bwd_step(&a2, &b2, dz, da, x, j + 32, 16, vm, vs, vb);
        bwd_step(&a3, &b3, dz, da, x, j + 48, 16, vm, vs, vb);
    }
    if (j < m) {
        bwd_step(&a0, &b0, dz, da, x, j, m - j < 16 ? m - j : 16, vm, vs, vb);
        j += 16;
    }
    if (j < m) {
        bwd_step(&a1, &b1, dz, da, x, j, m - j < 16 ? m - j : 16, vm, vs, vb);
        j += 16;
    }
    if (j < m) {
        bwd_step(&a2, &b2, dz, da, x, j, m - j < 16 ? m - j : 16, vm, vs, vb);
        j += 16;
    }
    if (j < m)
        bwd_step(&a3, &b3, dz, da, x, j, m - j, vm, vs, vb);
    __m512 at = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    __m512 bt = _mm512_add_ps(_mm512_add_ps(b0, b1), _mm512_add_ps(b2, b3));
    float fa[16], fb[16];
    _mm512_storeu_ps(fa, at);
    _mm512_storeu_ps(fb, bt);
    for (int l = 0; l < 16; l++) {
        sg[l] += fa[l];
        sgx[l] += fb[l];
    }
}

#endif
