/* How much of the CPU a benchmark gets at this moment: the FMA peak and a GEMM, timed in turns.
 *
 *   make bench/bench_host && OMP_NUM_THREADS=2 bench/bench_host [--rounds R] [--size N]
 *
 * On a shared machine (a cloud VM, a laptop running other work), the same yolocl binary's training
 * step moves by tens of percent from one run to the next.  The FMA peak that `yolocl bench` reports
 * against (src/backend/fma_peak.c: the best of five 10 ms runs of a loop of independent FMAs, registers only)
 * moves much less than code that loads from its caches: another guest on the same physical core or
 * caches slows loads and cache-resident data, not the FMA units.  This program tells whether now is
 * a good time to benchmark: R rounds (30 by default, about 4 s), each measuring the FMA peak as
 * `yolocl bench` does, then timing yc_sgemm on N x N x N (512 by default: 3 MiB of operands, about
 * a convolution block's GEMM; the CPU backend's packing and micro-kernels) for at least 50 ms.  It
 * prints, over the rounds, the 10th percentile, median and 90th percentile of the peak, of the
 * GEMM's GFLOP/s and of their ratio.  On the 2-core AVX-512 VM this was written on, the ratio's
 * median was 0.58-0.64 in hours when `yolocl bench` put the YOLOv5s step at 45-47% of the peak, and
 * under 0.35 with another build running beside it; a lone GEMM's micro-kernel ran at 0.73 to 0.94 of
 * the FMA loop's rate from one minute to the next.  A low or widely spread ratio is the machine:
 * benchmark later. */
#include "bench_fill.h"
#include "fma_peak.h"
#include "gemm.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Prints the 10th percentile, median and 90th percentile of v[0, n) (sorted in place). */
static void print_spread(const char *what, double *v, int n, const char *unit)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    printf("%-28s p10 %7.3f   median %7.3f   p90 %7.3f %s\n", what, v[n / 10], v[n / 2], v[n - 1 - n / 10],
           unit);
}

int main(int argc, char **argv)
{
    int rounds = 30, n = 512;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--size") == 0)
            n = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_host [--rounds R] [--size N]\n");
            return 2;
        }
    }
    if (rounds < 1 || n < 1) {
        fprintf(stderr, "bench_host: rounds and size must be positive\n");
        return 2;
    }
    size_t nn = (size_t)n * (size_t)n;
    float *a = bench_alloc_fill(nn, 1), *b = bench_alloc_fill(nn, 2), *c = bench_alloc_fill(nn, 3);
    double *peak = malloc((size_t)rounds * sizeof *peak), *gemm = malloc((size_t)rounds * sizeof *gemm);
    double *ratio = malloc((size_t)rounds * sizeof *ratio);
    if (!a || !b || !c || !peak || !gemm || !ratio) {
        fprintf(stderr, "bench_host: out of memory for %d x %d matrices\n", n, n);
        return 1;
    }
    int threads = omp_get_max_threads();
    const char *isa = "";
    double flops = 2.0 * n * (double)n * n;
    yc_sgemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* packing buffers, threads */
    for (int r = 0; r < rounds; r++) {
        peak[r] = yc_fma_peak_gflops(threads, &isa);
        double t0 = omp_get_wtime(), t = 0.0;
        int calls = 0;
        do {
            yc_sgemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            calls++;
            t = omp_get_wtime() - t0;
        } while (t < 0.05 || calls < 2);
        gemm[r] = flops * calls / t * 1e-9;
        ratio[r] = gemm[r] / peak[r];
    }
    printf("%d rounds, %d threads, FMA loop %s, GEMM %d x %d x %d (kernel %s)\n", rounds, threads, isa, n, n, n,
           yc_sgemm_kernel_name());
    print_spread("FMA peak", peak, rounds, "GFLOP/s");
    print_spread("GEMM", gemm, rounds, "GFLOP/s");
    print_spread("GEMM / peak", ratio, rounds, "");
    free(a), free(b), free(c), free(peak), free(gemm), free(ratio);
    return 0;
}
