/* A small, fast, reproducible random generator (PCG32, O'Neill 2014), seeded per purpose so that
 * weight init and data sampling are reproducible across runs and threads. */
#ifndef YC_RNG_H
#define YC_RNG_H

#include <stdint.h>

typedef struct yc_rng {
    /* generator state */
    uint64_t state;
    /* stream selector (always odd) */
    uint64_t inc;
} yc_rng;

/* Seeds from a 64-bit seed and a stream id (different streams are independent sequences). */
void yc_rng_seed(yc_rng *r, uint64_t seed, uint64_t stream);
/* Uniform 32-bit integer. */
uint32_t yc_rng_u32(yc_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double yc_rng_uniform(yc_rng *r);
/* Uniform double in [a, b). */
double yc_rng_range(yc_rng *r, double a, double b);
/* Uniform integer in [0, n) without modulo bias (n >= 1). */
uint32_t yc_rng_below(yc_rng *r, uint32_t n);
/* Standard normal (Box-Muller). */
double yc_rng_normal(yc_rng *r);

#endif
