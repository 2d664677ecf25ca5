/* yc_sgemm throughput against the machine's FP32 FMA peak and, where it is installed, OpenBLAS.
 *
 * Build and run from the source root (not part of make):
 *   gcc -std=c11 -O2 -fopenmp -Wall -Wextra -Icpu -Isrc bench/bench_gemm.c cpu/gemm.c src/backend/fma_peak.c \
 *       -o /tmp/bench_gemm -lm -ldl
 *   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=SkylakeX /tmp/bench_gemm [rounds]
 *
 * OpenBLAS is not a dependency: the program looks for libopenblas.so.0 at run time (dlopen; Debian:
 * libopenblas0) and, when found, times its cblas_sgemm on the same operands with the same number of
 * threads in the next column, with the kernel family it chose (openblas_get_corename).  Two things
 * make that column say little of OpenBLAS, and the program warns of them: OpenMP threads spinning
 * beside OpenBLAS's own (OMP_WAIT_POLICY=ACTIVE: run it with PASSIVE), and an OpenBLAS older than
 * the CPU (Debian 12's 0.3.21 takes an Emerald Rapids for a Prescott, SSE3, about 40 GFLOP/s on
 * 2 cores: OPENBLAS_CORETYPE=SkylakeX gives its AVX-512 kernels).
 *
 * The peak is src/backend/fma_peak.c's tight loop of independent FMA chains (the widest vector ISA
 * present) run on every OpenMP thread, as `yolocl bench` measures it.  Shared machines are noisy,
 * so the whole list (peak included) is measured in several rounds (5 by default) and each entry
 * reports its best round; a round times a GEMM for at least 40 ms and 2 calls after a warm-up
 * call.  On Linux each round first waits (up to 60 s) for the machine to be idle (under 6% of CPU
 * time busy over 0.15 s, from /proc/stat), as another process on one of the cores halves a
 * 2-thread GEMM.  The layer shapes are the convolutions of YOLOv5s at 640x640, one image per
 * GEMM: forward C[Cout x HW] = W[Cout x Cin*k*k] * col[Cin*k*k x HW]; backward-data
 * dcol[Cin*k*k x HW] = W^T * dY[Cout x HW]; backward-filter dW[Cout x Cin*k*k] = dY * col^T. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include "fma_peak.h"
#include "gemm.h"

#include <dlfcn.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Busy and total CPU time so far from /proc/stat; false where there is none. */
static bool cpu_times(long long *busy, long long *total)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return false;
    long long v[8];
    const int n = fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4],
                         &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8)
        return false;
    *total = 0;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4];
    return true;
}

/* Wait until the machine is idle; false if it did not get there within 60 s. */
static bool wait_idle(void)
{
    const double start = omp_get_wtime();
    while (omp_get_wtime() - start < 60.0) {
        long long b0, t0, b1, t1;
        if (!cpu_times(&b0, &t0))
            return true;
        const struct timespec pause = {0, 150000000};
        nanosleep(&pause, NULL);
        if (!cpu_times(&b1, &t1))
            return true;
        if (t1 > t0 && (double)(b1 - b0) / (double)(t1 - t0) < 0.06)
            return true;
    }
    return false;
}

static float *alloc_fill(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

struct entry {
    const char *name, *pass;
    bool ta, tb;
    int M, N, K;
    /* best GFLOP/s of yc_sgemm and of OpenBLAS (0: not measured) */
    double best, blas;
};

/* OpenBLAS's cblas_sgemm (row-major 101, no-transpose 111, transpose 112), NULL when absent. */
typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                               int lda, const float *B, int ldb, float beta, float *C, int ldc);
static cblas_sgemm_fn blas_sgemm;
/* the kernel family OpenBLAS chose for this CPU (openblas_get_corename), or "?" */
static const char *blas_core = "?";

static void load_openblas(int threads)
{
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    blas_sgemm = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
    if (set_threads)
        set_threads(threads);
    if (corename && corename())
        blas_core = corename();
}

/* Why the OpenBLAS column may say little of OpenBLAS, printed under the header. */
static void warn_openblas(void)
{
    const char *policy = getenv("OMP_WAIT_POLICY");
    if (getenv("GOMP_SPINCOUNT") || (policy && (policy[0] == 'a' || policy[0] == 'A')))
        printf("warning: OpenMP threads spin (OMP_WAIT_POLICY or GOMP_SPINCOUNT) while OpenBLAS's own threads "
               "run, which slows OpenBLAS; compare with OMP_WAIT_POLICY=PASSIVE\n");
#if defined(__x86_64__)
    /* Debian's OpenBLAS 0.3.21 falls back to its SSE3 kernels ("Prescott") on CPUs newer than it knows,
     * such as Sapphire and Emerald Rapids */
    if (__builtin_cpu_supports("avx512f") && (!strcmp(blas_core, "Prescott") || !strcmp(blas_core, "Core2") ||
                                             !strcmp(blas_core, "Nehalem") || !strcmp(blas_core, "Katmai")))
        printf("warning: OpenBLAS does not know this AVX-512 CPU and uses its %s kernels; "
               "OPENBLAS_CORETYPE=SkylakeX selects its AVX-512 ones\n",
               blas_core);
#endif
}

/* C = op(A) op(B) by yolocl (blas false) or OpenBLAS. */
static void sgemm(bool blas, const struct entry *e, const float *A, int lda, const float *B, int ldb, float *C)
{
    if (blas)
        blas_sgemm(101, e->ta ? 112 : 111, e->tb ? 112 : 111, e->M, e->N, e->K, 1.0f, A, lda, B, ldb, 0.0f, C,
                   e->N);
    else
        yc_sgemm(e->ta, e->tb, e->M, e->N, e->K, 1.0f, A, lda, B, ldb, 0.0f, C, e->N);
}

/* One round for one entry: GFLOP/s of C = op(A) op(B) with tight (lda = width) operands, by
 * yc_sgemm and (when loaded) OpenBLAS. */
static void time_entry(struct entry *e)
{
    const int M = e->M, N = e->N, K = e->K;
    float *A = alloc_fill((size_t)M * K, 1), *B = alloc_fill((size_t)K * N, 2),
          *C = alloc_fill((size_t)M * N, 3);
    const int lda = e->ta ? M : K, ldb = e->tb ? K : N;
    for (int blas = 0; blas <= (blas_sgemm != NULL); blas++) {
        double *best = blas ? &e->blas : &e->best;
        sgemm(blas, e, A, lda, B, ldb, C);
        double total = 0.0;
        for (int reps = 0; total < 0.04 || reps < 2; reps++) {
            double t0 = omp_get_wtime();
            sgemm(blas, e, A, lda, B, ldb, C);
            double dt = omp_get_wtime() - t0;
            total += dt;
            double gf = 2.0 * M * N * K / dt * 1e-9;
            if (gf > *best)
                *best = gf;
        }
    }
    free(A);
    free(B);
    free(C);
}

struct layer {
    const char *name;
    int cout, cin, k, hw;
};

static const struct layer layers[] = {
    {"b0 conv 6x6 s2 3->32 @320", 32, 3, 6, 320 * 320},
    {"b1 conv 3x3 s2 32->64 @160", 64, 32, 3, 160 * 160},
    {"b2 C3 1x1 64->32 @160", 32, 64, 1, 160 * 160},
    {"b2 C3 3x3 32->32 @160", 32, 32, 3, 160 * 160},
    {"b3 conv 3x3 s2 64->128 @80", 128, 64, 3, 80 * 80},
    {"b4 C3 3x3 64->64 @80", 64, 64, 3, 80 * 80},
    {"b5 conv 3x3 s2 128->256 @40", 256, 128, 3, 40 * 40},
    {"b6 C3 1x1 256->128 @40", 128, 256, 1, 40 * 40},
    {"b7 conv 3x3 s2 256->512 @20", 512, 256, 3, 20 * 20},
    {"b9 SPPF 1x1 1024->512 @20", 512, 1024, 1, 20 * 20},
    {"h24 detect 1x1 128->255 @80", 255, 128, 1, 80 * 80},
};

static const int squares[] = {128, 256, 512, 1024, 2048};

enum { NSQUARE = sizeof squares / sizeof squares[0], NLAYER = sizeof layers / sizeof layers[0] };

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 5;
    const int threads = omp_get_max_threads();
    load_openblas(threads);
    static char names[NSQUARE][32];
    static struct entry entries[NSQUARE * 4 + NLAYER * 3];
    int n = 0;
    for (int i = 0; i < NSQUARE; i++) {
        snprintf(names[i], sizeof names[i], "square %d", squares[i]);
        for (int t = 0; t < 4; t++)
            entries[n++] =
                (struct entry){names[i], "", t & 2, t & 1, squares[i], squares[i], squares[i], 0.0, 0.0};
    }
    for (int i = 0; i < NLAYER; i++) {
        const struct layer *l = &layers[i];
        const int ckk = l->cin * l->k * l->k;
        entries[n++] = (struct entry){l->name, "fwd", false, false, l->cout, l->hw, ckk, 0.0, 0.0};
        entries[n++] = (struct entry){l->name, "bwd-d", true, false, ckk, l->hw, l->cout, 0.0, 0.0};
        entries[n++] = (struct entry){l->name, "bwd-f", false, true, l->cout, ckk, l->hw, 0.0, 0.0};
    }
    const char *isa = "";
    double peak1 = 0.0, peak = 0.0;
    int busy_rounds = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            if (i % 8 == 0) {
                busy_rounds += !wait_idle();
                double p1 = yc_fma_peak_gflops(1, &isa), p = yc_fma_peak_gflops(threads, &isa);
                peak1 = p1 > peak1 ? p1 : peak1;
                peak = p > peak ? p : peak;
            }
            time_entry(&entries[i]);
        }
        fprintf(stderr, "round %d/%d done\n", r + 1, rounds);
    }
    printf("FP32 FMA peak (%s): %.1f GFLOP/s on 1 thread, %.1f on %d threads (best of %d rounds)\n", isa,
           peak1, peak, threads, rounds);
    if (busy_rounds)
        printf("warning: the machine was busy for %d of the measurement groups\n", busy_rounds);
    printf("yc_sgemm kernel: %s; %% is of the %d-thread peak; OpenBLAS: %s %s\n", yc_sgemm_kernel_name(), threads,
           blas_sgemm ? "libopenblas.so.0, same threads, core" : "not found (libopenblas0 not installed)",
           blas_sgemm ? blas_core : "");
    if (blas_sgemm)
        warn_openblas();
    putchar('\n');
    printf("%-30s %-6s %-2s %5s %6s %6s %8s %5s %8s %5s\n", "shape", "pass", "op", "M", "N", "K", "GFLOP/s", "peak",
           "OpenBLAS", "peak");
    for (int i = 0; i < n; i++) {
        const struct entry *e = &entries[i];
        printf("%-30s %-6s %c%c %5d %6d %6d %8.1f %4.0f%%", e->name, e->pass, e->ta ? 'T' : 'N', e->tb ? 'T' : 'N',
               e->M, e->N, e->K, e->best, 100.0 * e->best / peak);
        if (blas_sgemm)
            printf(" %8.1f %4.0f%%", e->blas, 100.0 * e->blas / peak);
        printf("\n");
    }
    return 0;
}
