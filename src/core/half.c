/* IEEE 754 binary16 conversion (see half.h). */
#include "half.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define YC_HALF_X86 1
#endif

uint16_t yc_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xffu) /* inf or NaN (keep a quiet NaN) */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        /* subnormal half (or zero): shift the full mantissa, round to nearest even */
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - e;
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
        half++; /* may carry into the exponent, up to inf: correct */
    return (uint16_t)half;
}

float yc_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1fu) {
        /* inf, or a NaN made quiet (VCVTPH2PS does the same) */
        x = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0);
    } else if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else {
        x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* ---------------------------------------------------------------------------------------------
 * Array conversions, one function per path.  The vector paths convert whole vectors, then the
 * tail through a zero-padded local vector, so every value goes through the same instruction.
 * ------------------------------------------------------------------------------------------- */

/* The portable array paths work on 8 lanes of GCC vector types (lowered to SSE2, NEON or
 * scalars), branch-free: every case is computed and the right one selected per lane. */
#define PL 4
typedef uint32_t pv_u __attribute__((vector_size(PL * 4)));
typedef float pv_f __attribute__((vector_size(PL * 4)));
typedef uint16_t pv_h __attribute__((vector_size(PL * 2)));

/* m ? a : b per lane, m a comparison result (all ones or zero) */
#define PSEL(m, a, b) (((pv_u)(m) & (a)) | (~(pv_u)(m) & (b)))

/* Half bits (in the low 16 bits of each lane) to float bits.  Normal values re-bias the exponent;
 * subnormals are made normal by adding 2^-14's exponent and subtracting 2^-14 (exact); inf and NaN
 * get the all-ones exponent, NaN the quiet bit. */
static inline __attribute__((always_inline)) void h2f_lanes(pv_u *v)
{
    pv_u h = *v;
    const pv_u shifted_exp = (pv_u){0} + (0x7c00u << 13);
    pv_u o = (h & 0x7fffu) << 13; /* exponent and mantissa in place */
    pv_u exp = o & shifted_exp;
    o += (127u - 15u) << 23;
    pv_u special = o + ((128u - 16u) << 23);
    special |= PSEL((h & 0x3ffu) != 0, (pv_u){0} + 0x400000u, (pv_u){0});
    pv_f sub = (pv_f)(o + (1u << 23)) - 0x1p-14f;
    o = PSEL(exp == shifted_exp, special, PSEL(exp == 0, (pv_u)sub, o));
    *v = o | ((h & 0x8000u) << 16);
}

/* Float bits to half bits (low 16 bits of each lane), round to nearest even.  Half subnormals come
 * from adding 0.5 in float arithmetic (the FPU rounds to nearest even at the half's last bit); normal
 * values add 0xfff plus the mantissa's parity before truncating. */
static inline __attribute__((always_inline)) void f2h_lanes(pv_u *v)
{
    pv_u f = *v;
    pv_u sign = f & 0x80000000u;
    pv_u a = f ^ sign;
    pv_u nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    pv_u big = PSEL(a > 0x7f800000u, nan, (pv_u){0} + 0x7c00u);
    pv_u sub = (pv_u)((pv_f)a + 0.5f) - 0x3f000000u;
    pv_u norm = (a + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    pv_u o = PSEL(a >= (143u << 23), big, PSEL(a < (113u << 23), sub, norm));
    *v = o | (sign >> 16);
}

static void h2f_portable(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    pv_h h;
    pv_u o;
    for (; i + PL <= n; i += PL) {
        memcpy(&h, src + i, sizeof h);
        o = __builtin_convertvector(h, pv_u);
        h2f_lanes(&o);
        memcpy(dst + i, &o, sizeof o);
    }
    if (i < n) {
        h = (pv_h){0};
        memcpy(&h, src + i, (n - i) * sizeof *src);
        o = __builtin_convertvector(h, pv_u);
        h2f_lanes(&o);
        memcpy(dst + i, &o, (n - i) * sizeof *dst);
    }
}

static void f2h_portable(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    pv_u f;
    pv_h h;
    for (; i + PL <= n; i += PL) {
        memcpy(&f, src + i, sizeof f);
        f2h_lanes(&f);
        h = __builtin_convertvector(f, pv_h);
        memcpy(dst + i, &h, sizeof h);
    }
    if (i < n) {
        f = (pv_u){0};
        memcpy(&f, src + i, (n - i) * sizeof *src);
        f2h_lanes(&f);
        h = __builtin_convertvector(f, pv_h);
        memcpy(dst + i, &h, (n - i) * sizeof *dst);
    }
}

#ifdef YC_HALF_X86
__attribute__((target("avx,f16c"))) static void h2f_f16c(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    if (i < n) {
        uint16_t h[8] = {0};
        float f[8];
        memcpy(h, src + i, (n - i) * sizeof *h);
        _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
        memcpy(dst + i, f, (n - i) * sizeof *f);
    }
}

__attribute__((target("avx,f16c"))) static void f2h_f16c(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0));
    if (i < n) {
        float f[8] = {0};
        uint16_t h[8];
        memcpy(f, src + i, (n - i) * sizeof *f);
        _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(_mm256_loadu_ps(f), 0));
        memcpy(dst + i, h, (n - i) * sizeof *h);
    }
}

__attribute__((target("avx512f"))) static void h2f_avx512(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    if (i < n) {
        uint16_t h[16] = {0};
        float f[16];
        memcpy(h, src + i, (n - i) * sizeof *h);
        _mm512_storeu_ps(f, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h)));
        memcpy(dst + i, f, (n - i) * sizeof *f);
    }
}

__attribute__((target("avx512f"))) static void f2h_avx512(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), 0));
    if (i < n) {
        float f[16] = {0};
        uint16_t h[16];
        memcpy(f, src + i, (n - i) * sizeof *f);
        _mm256_storeu_si256((__m256i *)h, _mm512_cvtps_ph(_mm512_loadu_ps(f), 0));
        memcpy(dst + i, h, (n - i) * sizeof *h);
    }
}
#endif

#ifdef YC_HALF_X86
/* F16C from CPUID leaf 1 (clang before 15 has no "f16c" for __builtin_cpu_supports). */
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

bool yc_half_path_supported(yc_half_path p)
{
    switch (p) {
    case YC_HALF_PORTABLE:
        return true;
#ifdef YC_HALF_X86
    case YC_HALF_F16C:
        return __builtin_cpu_supports("avx") && cpu_has_f16c();
    case YC_HALF_AVX512:
        return __builtin_cpu_supports("avx512f");
#endif
    default:
        return false;
    }
}

const char *yc_half_path_name(yc_half_path p)
{
    static const char *const names[YC_HALF_NPATHS] = {"portable", "f16c", "avx512"};
    return (int)p >= 0 && p < YC_HALF_NPATHS ? names[p] : "unknown";
}

/* Preference order of the paths when YOLOCL_HALF does not choose one. */
static const yc_half_path preference[] = {YC_HALF_AVX512, YC_HALF_F16C, YC_HALF_PORTABLE};

yc_half_path yc_half_path_selected(void)
{
    static atomic_int selected = -1;
    int s = atomic_load_explicit(&selected, memory_order_relaxed);
    if (s >= 0)
        return (yc_half_path)s;
    const char *env = getenv("YOLOCL_HALF");
    for (int p = 0; env && p < YC_HALF_NPATHS; p++)
        if (strcmp(env, yc_half_path_name((yc_half_path)p)) == 0 && yc_half_path_supported((yc_half_path)p))
            s = p;
    for (size_t i = 0; s < 0 && i < sizeof preference / sizeof preference[0]; i++)
        if (yc_half_path_supported(preference[i]))
            s = (int)preference[i];
    atomic_store_explicit(&selected, s, memory_order_relaxed);
    return (yc_half_path)s;
}

void yc_half_to_float_path(yc_half_path p, const uint16_t *src, float *dst, size_t n)
{
    switch (p) {
#ifdef YC_HALF_X86
    case YC_HALF_F16C:
        h2f_f16c(src, dst, n);
        return;
    case YC_HALF_AVX512:
        h2f_avx512(src, dst, n);
        return;
#endif
    default:
        h2f_portable(src, dst, n);
        return;
    }
}

void yc_float_to_half_path(yc_half_path p, const float *src, uint16_t *dst, size_t n)
{
    switch (p) {
#ifdef YC_HALF_X86
    case YC_HALF_F16C:
        f2h_f16c(src, dst, n);
        return;
    case YC_HALF_AVX512:
        f2h_avx512(src, dst, n);
        return;
#endif
    default:
        f2h_portable(src, dst, n);
        return;
    }
}

void yc_half_to_float_n(const uint16_t *src, float *dst, size_t n)
{
    yc_half_to_float_path(yc_half_path_selected(), src, dst, n);
}

void yc_float_to_half_n(const float *src, uint16_t *dst, size_t n)
{
    yc_float_to_half_path(yc_half_path_selected(), src, dst, n);
}

void yc_round_to_half(float *v, size_t n)
{
    uint16_t h[256];
    for (size_t i = 0; i < n; i += 256) {
        size_t len = n - i < 256 ? n - i : 256;
        yc_float_to_half_n(v + i, h, len);
        yc_half_to_float_n(h, v + i, len);
    }
}
