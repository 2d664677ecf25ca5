/* IEEE 754 binary16 conversion on the host (portable; round to nearest even). */
#ifndef YC_HALF_H
#define YC_HALF_H

#include <stddef.h>
#include <stdint.h>

/* float -> half bits, round to nearest even; overflow gives +-inf, NaN stays NaN. */
uint16_t yc_float_to_half(float f);
/* half bits -> float (exact). */
float yc_half_to_float(uint16_t h);
/* Rounds every value to the nearest half-precision value, in place (PyTorch's
 * tensor.half().float()). */
void yc_round_to_half(float *v, size_t n);

#endif
