/* The CPU backend's fused batch norm + SiLU ops on the layers of YOLOv5s at 640x640, against the
 * memory bandwidth of a plain copy.
 *
 *   make bench/bench_bn && OMP_NUM_THREADS=2 bench/bench_bn [--batch N] [--rounds R] [--layer I]
 *
 * Every distinct batch-norm shape of YOLOv5s (channels, output size at 640 input; every Conv of the
 * model is conv + BN + SiLU) is run as the two ops of a training step: YC_OP_BN_SILU_TRAIN
 * (statistics, a = silu(bn(x))) and YC_OP_BN_SILU_BWD (dx, dgamma, dbeta from da and x), with the
 * same kernels, workspace sizes and thread count as `yolocl train` (cpu/batchnorm.c through
 * yc_cpu_args).  Each op is timed for at least 50 ms after a warm-up call, best of R rounds (3 by
 * default).  GB/s counts the traffic the op cannot avoid, reading its inputs and writing its
 * output once (train: x, a, 8 bytes per element; bwd: da, x, dx, 12 bytes per element), and is
 * compared with the best of a parallel memcpy of the layer's tensor measured before each layer
 * (read + write, 8 bytes per element).  The totals weigh each shape by how often it occurs in the
 * model (the `x` column): the bn_silu_train and bn_silu_bwd rows of
 * yolocl bench --cfg yolov5s --img 640 --batch N --profile. */
#include "cpu_ops.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One batch-norm shape of YOLOv5s at 640: channels, output size, and how many layers have it. */
typedef struct layer {
    const char *name;
    int C, H, count;
} layer;

static const layer layers[] = {
    {"0", 32, 320, 1},
    {"1, 2.cv3", 64, 160, 2},
    {"2 C3", 32, 160, 4},
    {"3, 4/17.cv3", 128, 80, 3},
    {"4,17 C3", 64, 80, 10},
    {"5, C3.cv3", 256, 40, 4},
    {"6,13,20 C3, 14, 18", 128, 40, 18},
    {"7, C3.cv3, SPPF.cv2", 512, 20, 4},
    {"8,23 C3, 9.cv1, 10, 21", 256, 20, 11},
};

enum { NLAYER = sizeof layers / sizeof layers[0], NPASS = 2 };

static const char *const pass_names[NPASS] = {"train", "bwd"};

static float *alloc_fill(size_t n, unsigned seed, float lo, float span)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = lo + span * ((float)(seed >> 8) / 16777216.0f);
    }
    return p;
}

static yc_hv hv_of(float *p, const yc_tensor *t)
{
    return (yc_hv){.p = p, .type = YC_F32, .n = t->n, .c = t->c, .h = t->h, .w = t->w, .ns = t->nstride};
}

/* Best seconds per call of fn (calls totalling >= 50 ms after a warm-up). */
static double time_fn(void (*fn)(const yc_cpu_args *), const yc_cpu_args *a)
{
    fn(a);
    double best = -1.0, total = 0.0;
    for (int reps = 0; total < 0.05 || reps < 2; reps++) {
        double t0 = omp_get_wtime();
        fn(a);
        double dt = omp_get_wtime() - t0;
        total += dt;
        if (best < 0.0 || dt < best)
            best = dt;
    }
    return best;
}

/* Seconds per call of the train (pass 0) and bwd (pass 1) ops of a layer; false when out of
 * memory. */
static bool time_layer(const layer *l, int N, int threads, double out[NPASS])
{
    yc_tensor x = yc_tensor_make(N, l->C, l->H, l->H, YC_F32, "x");
    yc_tensor y = yc_tensor_make(N, l->C, l->H, l->H, YC_F32, "a");
    yc_tensor d = yc_tensor_make(N, l->C, l->H, l->H, YC_F32, "da");
    yc_tensor dx = yc_tensor_make(N, l->C, l->H, l->H, YC_F32, "dx");
    yc_tensor g = yc_tensor_make(1, l->C, 1, 1, YC_F32, "gamma");
    yc_tensor b = yc_tensor_make(1, l->C, 1, 1, YC_F32, "beta");
    yc_tensor st = yc_tensor_make(2, l->C, 1, 1, YC_F32, "stats");
    yc_tensor rm = yc_tensor_make(1, l->C, 1, 1, YC_F32, "running_mean");
    yc_tensor rv = yc_tensor_make(1, l->C, 1, 1, YC_F32, "running_var");
    yc_tensor dg = yc_tensor_make(1, l->C, 1, 1, YC_F32, "dgamma");
    yc_tensor db = yc_tensor_make(1, l->C, 1, 1, YC_F32, "dbeta");
    size_t n = yc_tensor_elems(&x);
    /* conv outputs with a nonzero mean; gradients small */
    float *xp = alloc_fill(n, 1, -1.0f, 3.0f), *yp = alloc_fill(n, 2, 0.0f, 1.0f),
          *dp = alloc_fill(n, 3, -1e-3f, 2e-3f), *dxp = alloc_fill(n, 4, 0.0f, 1.0f);
    float *gp = alloc_fill((size_t)l->C, 5, 0.5f, 1.0f), *bp = alloc_fill((size_t)l->C, 6, -0.5f, 1.0f),
          *stp = alloc_fill(2 * (size_t)l->C, 7, 0.0f, 1.0f), *rmp = alloc_fill((size_t)l->C, 8, 0.0f, 1.0f),
          *rvp = alloc_fill((size_t)l->C, 9, 0.5f, 1.0f), *dgp = alloc_fill((size_t)l->C, 10, 0.0f, 1.0f),
          *dbp = alloc_fill((size_t)l->C, 11, 0.0f, 1.0f);
    bool ok = xp && yp && dp && dxp && gp && bp && stp && rmp && rvp && dgp && dbp;

    yc_op tr = {.kind = YC_OP_BN_SILU_TRAIN, .src = {&x, &g, &b}, .dst = {&y, &st, &rm, &rv}};
    tr.p.bn.eps = 1e-3f, tr.p.bn.momentum = 0.03f;
    yc_cpu_args ta = {.op = &tr, .threads = threads};
    ta.src[0] = hv_of(xp, &x), ta.src[1] = hv_of(gp, &g), ta.src[2] = hv_of(bp, &b);
    ta.dst[0] = hv_of(yp, &y), ta.dst[1] = hv_of(stp, &st), ta.dst[2] = hv_of(rmp, &rm),
    ta.dst[3] = hv_of(rvp, &rv);

    yc_op bw = {.kind = YC_OP_BN_SILU_BWD, .src = {&d, &x, &g, &b, &st}, .dst = {&dx, &dg, &db}};
    bw.p.bn.eps = 1e-3f, bw.p.bn.momentum = 0.03f;
    yc_cpu_args ba = {.op = &bw, .threads = threads};
    ba.src[0] = hv_of(dp, &d), ba.src[1] = hv_of(xp, &x), ba.src[2] = hv_of(gp, &g), ba.src[3] = hv_of(bp, &b),
    ba.src[4] = hv_of(stp, &st);
    ba.dst[0] = hv_of(dxp, &dx), ba.dst[1] = hv_of(dgp, &dg), ba.dst[2] = hv_of(dbp, &db);
    size_t ws = yc_cpu_bn_silu_bwd_workspace(&bw, threads);
    ba.ws = aligned_alloc(64, (ws + 63) / 64 * 64);
    ba.ws_size = ws;
    ok = ok && ba.ws;

    if (ok) {
        out[0] = time_fn(yc_cpu_bn_silu_train, &ta); /* also sets the statistics bwd reads */
        out[1] = time_fn(yc_cpu_bn_silu_bwd, &ba);
    }
    free(ba.ws);
    free(xp), free(yp), free(dp), free(dxp), free(gp), free(bp), free(stp), free(rmp), free(rvp), free(dgp),
        free(dbp);
    return ok;
}

/* GB/s (read + write) of a parallel copy of n floats, best of a few runs; < 0 when out of memory. */
static double copy_gbs(size_t n, int threads)
{
    float *s = alloc_fill(n, 12, 0.0f, 1.0f), *d = alloc_fill(n, 13, 0.0f, 1.0f);
    double best = -1.0;
    if (s && d) {
        for (int r = 0; r < 6; r++) {
            double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
            {
                int t = omp_get_thread_num(), T = omp_get_num_threads();
                size_t lo = n * (size_t)t / (size_t)T, hi = n * (size_t)(t + 1) / (size_t)T;
                memcpy(d + lo, s + lo, (hi - lo) * sizeof(float));
            }
            double dt = omp_get_wtime() - t0;
            if (r > 0 && (best < 0.0 || dt < best))
                best = dt;
        }
    }
    free(s), free(d);
    return best < 0.0 ? best : 2.0 * (double)n * sizeof(float) / best * 1e-9;
}

int main(int argc, char **argv)
{
    int N = 8, rounds = 3, only = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layer") && i + 1 < argc)
            only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--batch N] [--rounds R] [--layer I]\n", argv[0]);
            return 2;
        }
    }
    if (N < 1 || rounds < 1) {
        fprintf(stderr, "--batch and --rounds must be positive\n");
        return 2;
    }
    const int threads = omp_get_max_threads();
    static double best[NLAYER][NPASS], copy[NLAYER];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < NLAYER; i++) {
            if (only >= 0 && i != only)
                continue;
            const layer *l = &layers[i];
            double t[NPASS], bw = copy_gbs((size_t)N * l->C * l->H * l->H, threads);
            if (bw < 0.0 || !time_layer(l, N, threads, t)) {
                fprintf(stderr, "out of memory for layer %s\n", l->name);
                return 1;
            }
            copy[i] = bw > copy[i] ? bw : copy[i];
            for (int p = 0; p < NPASS; p++)
                if (r == 0 || t[p] < best[i][p])
                    best[i][p] = t[p];
        }
        fprintf(stderr, "round %d/%d done\n", r + 1, rounds);
    }
    static const double bytes[NPASS] = {8.0, 12.0}; /* per element: x + a;  da + x + dx */
    printf("batch %d, %d threads, best of %d rounds; GB/s: unavoidable traffic (train: x, a; bwd: da, x, dx) "
           "per second, copy: memcpy of the tensor (read + write)\n",
           N, threads, rounds);
    printf("%-24s %2s %4s %4s | %7s |", "layer", "x", "C", "HxW", "copy");
    for (int p = 0; p < NPASS; p++)
        printf(" %5s ms  GB/s %%cp |", pass_names[p]);
    printf("\n");
    double tot[NPASS] = {0};
    for (int i = 0; i < NLAYER; i++) {
        const layer *l = &layers[i];
        if (only >= 0 && i != only)
            continue;
        double elems = (double)N * l->C * l->H * l->H;
        printf("%-24s %2d %4d %4d | %7.1f |", l->name, l->count, l->C, l->H, copy[i]);
        for (int p = 0; p < NPASS; p++) {
            double gbs = bytes[p] * elems / best[i][p] * 1e-9;
            printf(" %8.2f %5.1f %3.0f |", best[i][p] * 1e3, gbs, 100.0 * gbs / copy[i]);
            tot[p] += l->count * best[i][p];
        }
        printf("\n");
    }
    printf("total per training step (layers x count): ");
    for (int p = 0; p < NPASS; p++)
        printf("bn_silu_%s %.1f ms  ", pass_names[p], tot[p] * 1e3);
    printf("both: %.1f ms\n", (tot[0] + tot[1]) * 1e3);
    return 0;
}
