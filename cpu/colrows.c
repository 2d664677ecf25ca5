/* Row loops of im2col and col2im (cpu/conv.c) that the compiler leaves scalar: col2im adds each
 * column row back into an input row (every column for stride 1, every other one for stride 2), and
 * im2col of a stride-2 convolution reads every other input column into a column row.
 *
 *   yc_cpu_add_row:       d[j]   += s[j]     for j < n
 *   yc_cpu_gather2:       d[j]    = x[2j]    for j < n
 *   yc_cpu_scatter_add2:  d[2j]  += s[j]     for j < n   (d[2j+1] untouched)
 *
 * With AVX-512 (chosen at run time) 16 values at a time: for the stride-2 rows two loads and one
 * two-source permute, or two loads, two permutes, two masked adds and two stores; the last partial
 * vector is masked so that nothing past x[2n-2] (d[2n-2], d[n-1]) is read (written).  Results are
 * bit-identical to the scalar loops (each d element is one copy or one addition). */
#include "cpu_ops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static void add_row_c(float *restrict d, const float *restrict s, int n)
{
    for (int j = 0; j < n; j++)
        d[j] += s[j];
}

static void gather2_c(float *restrict d, const float *restrict x, int n)
{
    for (int j = 0; j < n; j++)
        d[j] = x[2 * j];
}

static void scatter_add2_c(float *restrict d, const float *restrict s, int n)
{
    for (int j = 0; j < n; j++)
        d[2 * j] += s[j];
}

#if defined(__x86_64__)

/* Lanes [0, n) of a 16-lane mask, n clamped to [0, 16]. */
static inline __mmask16 lanes(int n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

__attribute__((target("avx512f"))) static void add_row_avx512(float *restrict d, const float *restrict s, int n)
{
    for (int j = 0; j < n; j += 16) {
        const __mmask16 m = lanes(n - j);
        const __m512 sum = _mm512_add_ps(_mm512_maskz_loadu_ps(m, d + j), _mm512_maskz_loadu_ps(m, s + j));
        _mm512_mask_storeu_ps(d + j, m, sum);
    }
}

__attribute__((target("avx512f"))) static void gather2_avx512(float *restrict d, const float *restrict x, int n)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    int j = 0;
    for (; j + 17 <= n; j += 16) { /* reads x[2j, 2j+32) <= x[2n-2] */
        const __m512 a = _mm512_loadu_ps(x + 2 * j), b = _mm512_loadu_ps(x + 2 * j + 16);
        _mm512_storeu_ps(d + j, _mm512_permutex2var_ps(a, even, b));
    }
    for (; j < n; j += 16) {
        const int r = n - j < 16 ? n - j : 16, span = 2 * r - 1; /* x[2j, 2j + span) */
        const __m512 a = _mm512_maskz_loadu_ps(lanes(span), x + 2 * j);
        const __m512 b = _mm512_maskz_loadu_ps(lanes(span - 16), x + 2 * j + 16);
        _mm512_mask_storeu_ps(d + j, lanes(r), _mm512_permutex2var_ps(a, even, b));
    }
}

__attribute__((target("avx512f"))) static void scatter_add2_avx512(float *restrict d, const float *restrict s,
                                                                   int n)
{
    const __m512i lo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i hi = _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const __mmask16 evens = 0x5555;
    int j = 0;
    for (; j + 17 <= n; j += 16) { /* touches d[2j, 2j+32) <= d[2n-2] */
        const __m512 v = _mm512_loadu_ps(s + j);
        __m512 a = _mm512_loadu_ps(d + 2 * j), b = _mm512_loadu_ps(d + 2 * j + 16);
        a = _mm512_mask_add_ps(a, evens, a, _mm512_permutexvar_ps(lo, v));
        b = _mm512_mask_add_ps(b, evens, b, _mm512_permutexvar_ps(hi, v));
        _mm512_storeu_ps(d + 2 * j, a);
        _mm512_storeu_ps(d + 2 * j + 16, b);
    }
    for (; j < n; j += 16) {
        const int r = n - j < 16 ? n - j : 16, span = 2 * r - 1; /* d[2j, 2j + span) */
        const __mmask16 ma = lanes(span), mb = lanes(span - 16);
        const __m512 v = _mm512_maskz_loadu_ps(lanes(r), s + j);
        __m512 a = _mm512_maskz_loadu_ps(ma, d + 2 * j), b = _mm512_maskz_loadu_ps(mb, d + 2 * j + 16);
        a = _mm512_mask_add_ps(a, evens, a, _mm512_permutexvar_ps(lo, v));
        b = _mm512_mask_add_ps(b, evens, b, _mm512_permutexvar_ps(hi, v));
        _mm512_mask_storeu_ps(d + 2 * j, ma, a);
        _mm512_mask_storeu_ps(d + 2 * j + 16, mb, b);
    }
}

#endif

/* 1 when the CPU runs the AVX-512 versions, 0 when not, -1 before the first call. */
static int use_avx512 = -1;

static bool avx512(void)
{
    int u = __atomic_load_n(&use_avx512, __ATOMIC_RELAXED);
    if (u < 0) {
#if defined(__x86_64__)
        __builtin_cpu_init();
        u = __builtin_cpu_supports("avx512f") ? 1 : 0;
#else
        u = 0;
#endif
        __atomic_store_n(&use_avx512, u, __ATOMIC_RELAXED);
    }
    return u;
}

void yc_cpu_add_row(float *d, const float *s, int n)
{
#if defined(__x86_64__)
    if (avx512()) {
        add_row_avx512(d, s, n);
        return;
    }
#endif
    add_row_c(d, s, n);
}

void yc_cpu_gather2(float *d, const float *x, int n)
{
#if defined(__x86_64__)
    if (avx512()) {
        gather2_avx512(d, x, n);
        return;
    }
#endif
    gather2_c(d, x, n);
}

void yc_cpu_scatter_add2(float *d, const float *s, int n)
{
#if defined(__x86_64__)
    if (avx512()) {
        scatter_add2_avx512(d, s, n);
        return;
    }
#endif
    scatter_add2_c(d, s, n);
}
