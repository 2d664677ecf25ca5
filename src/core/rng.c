/* PCG32 random numbers (see rng.h). */
#include "rng.h"

#include <math.h>

void yc_rng_seed(yc_rng *r, uint64_t seed, uint64_t stream)
{
    r->state = 0;
    r->inc = (stream << 1u) | 1u;
    yc_rng_u32(r);
    r->state += seed;
    yc_rng_u32(r);
}

uint32_t yc_rng_u32(yc_rng *r)
{
    uint64_t old = r->state;
    r->state = old * 6364136223846793005ULL + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

double yc_rng_uniform(yc_rng *r)
{
    uint64_t hi = yc_rng_u32(r) >> 5; /* 27 bits */
    uint64_t lo = yc_rng_u32(r) >> 6; /* 26 bits */
    return (double)(hi * 67108864u + lo) * (1.0 / 9007199254740992.0);
}

double yc_rng_range(yc_rng *r, double a, double b)
{
    return a + (b - a) * yc_rng_uniform(r);
}

uint32_t yc_rng_below(yc_rng *r, uint32_t n)
{
    uint32_t threshold = (uint32_t)(-n) % n;
    for (;;) {
        uint32_t x = yc_rng_u32(r);
        if (x >= threshold)
            return x % n;
    }
}

double yc_rng_normal(yc_rng *r)
{
    double u1 = yc_rng_uniform(r), u2 = yc_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
