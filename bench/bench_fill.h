/* Operands for the benchmark programs of bench/. */
#ifndef YC_BENCH_FILL_H
#define YC_BENCH_FILL_H

#include <stdlib.h>

/* n floats in [-0.5, 0.5) from a linear congruential generator seeded with `seed`, 64-byte aligned
 * (release with free()); NULL when out of memory. */
static inline float *bench_alloc_fill(size_t n, unsigned seed)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

#endif
