/* IEEE 754 binary16 conversion on the host: round to nearest even, as F16C's VCVTPS2PH with
 * rounding mode 0.
 *
 * The scalar functions are portable C.  The array functions (_n) run on the fastest path the CPU
 * has (AVX-512F or F16C on x86-64, chosen once at run time; portable C otherwise); every path gives
 * the same bits for every input, NaN included (tests/test_ops.c checks all 65536 halves and a
 * sweep of floats), so results never depend on the machine. */
#ifndef YC_HALF_H
#define YC_HALF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* float -> half bits, round to nearest even; overflow gives +-inf; a NaN gives a quiet NaN with
 * the top 9 bits of its payload. */
uint16_t yc_float_to_half(float f);
/* half bits -> float (exact; a NaN comes back quiet, with its payload). */
float yc_half_to_float(uint16_t h);
/* Rounds every value to the nearest half-precision value, in place (PyTorch's
 * tensor.half().float()). */
void yc_round_to_half(float *v, size_t n);

/* dst[i] = yc_half_to_float(src[i]) for i < n, on the fastest path. */
void yc_half_to_float_n(const uint16_t *src, float *dst, size_t n);
/* dst[i] = yc_float_to_half(src[i]) for i < n, on the fastest path. */
void yc_float_to_half_n(const float *src, uint16_t *dst, size_t n);

/* The conversion paths (for tests and benchmarks). */
typedef enum yc_half_path {
    /* portable C, one value at a time */
    YC_HALF_PORTABLE = 0,
    /* x86 F16C: 8 values per instruction (VCVTPH2PS / VCVTPS2PH ymm) */
    YC_HALF_F16C = 1,
    /* x86 AVX-512F: 16 values per instruction (zmm) */
    YC_HALF_AVX512 = 2,
    YC_HALF_NPATHS
} yc_half_path;

/* Whether this CPU (and build) can run path p. */
bool yc_half_path_supported(yc_half_path p);
/* The path the _n functions use: the fastest supported one, or the one named by the environment
 * variable YOLOCL_HALF ("portable", "f16c", "avx512"; read once, ignored when not supported). */
yc_half_path yc_half_path_selected(void);
/* "portable", "f16c", "avx512" */
const char *yc_half_path_name(yc_half_path p);
/* The _n conversions on path p (which must be supported). */
void yc_half_to_float_path(yc_half_path p, const uint16_t *src, float *dst, size_t n);
void yc_float_to_half_path(yc_half_path p, const float *src, uint16_t *dst, size_t n);

#endif
