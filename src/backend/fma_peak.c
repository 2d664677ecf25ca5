/* The measured FP32 FMA peak (see fma_peak.h). */
#include "fma_peak.h"

#include <math.h>
#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Independent accumulator chains: enough to cover the FMA latency times the FMA units. */
enum { CHAINS = 12 };

/* Timed runs of the loop; the best counts. */
enum { PEAK_RUNS = 5 };

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float fma_loop_avx512(long iters)
{
    __m512 acc[CHAINS];
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
    for (int i = 0; i < CHAINS; i++)
        acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], m, c);
    float s = 0.0f;
    for (int i = 0; i < CHAINS; i++)
        s += _mm512_reduce_add_ps(acc[i]);
    return s;
}

__attribute__((target("avx2,fma"))) static float fma_loop_avx2(long iters)
{
    __m256 acc[CHAINS];
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
    for (int i = 0; i < CHAINS; i++)
        acc[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++)
            acc[i] = _mm256_fmadd_ps(acc[i], m, c);
    float s = 0.0f, lane[8];
    for (int i = 0; i < CHAINS; i++) {
        _mm256_storeu_ps(lane, acc[i]);
        for (int j = 0; j < 8; j++)
            s += lane[j];
    }
    return s;
}
#endif

static float fma_loop_scalar(long iters)
{
    float acc[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        acc[i] = (float)i;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < CHAINS; i++)
            acc[i] = fmaf(acc[i], 0.999999f, 1e-6f);
    float s = 0.0f;
    for (int i = 0; i < CHAINS; i++)
        s += acc[i];
    return s;
}

/* Keeps the loops' results alive. */
static volatile float peak_sink;

double yc_fma_peak_gflops(int threads, const char **isa)
{
    int width = 1;
    float (*loop)(long) = fma_loop_scalar;
    const char *name = "scalar";
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) {
        loop = fma_loop_avx512, width = 16, name = "avx512";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        loop = fma_loop_avx2, width = 8, name = "avx2";
    }
#endif
    if (isa)
        *isa = name;
    if (threads < 1)
        threads = 1;
    /* Each timing covers one parallel region, so a thread that wakes up late (a passive OpenMP wait
     * policy puts idle threads to sleep) or a core taken by another process lowers it: one
     * untimed region first, then the best of PEAK_RUNS regions of about 10 ms each. */
    const long iters = 4000000;
    double best = 0.0;
    float s = 0.0f;
    for (int run = 0; run <= PEAK_RUNS; run++) {
        const long n = run == 0 ? iters / 8 : iters;
        double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : s)
        s += loop(n);
        double dt = omp_get_wtime() - t0;
        double gf = 2.0 * width * CHAINS * (double)n * threads / dt * 1e-9;
        if (run > 0 && gf > best)
            best = gf;
    }
    peak_sink += s;
    return best;
}
