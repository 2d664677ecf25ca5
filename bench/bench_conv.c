/* The CPU backend's convolutions on the layers of YOLOv5s at 640x640, against the FP32 FMA peak.
 *
 *   make bench/bench_conv && OMP_NUM_THREADS=2 bench/bench_conv [--batch N] [--rounds R] [--layer I]
 *
 * Every distinct convolution of YOLOv5s (stride, kernel, channels, output size at 640 input) is
 * run as the three ops of a training step: forward y = conv(x, W) (+ b for the Detect convs),
 * backward-data dx = conv^T(dy, W) and backward-filter dW += dy (*) x, with the same kernels,
 * workspace sizes and thread count as `yolocl train` (cpu/conv.c through yc_cpu_args).  Each op is
 * timed for at least 50 ms after a warm-up call, best of R rounds (3 by default), against the best
 * peak measured before each layer (src/backend/fma_peak.c's FMA loop on all threads).  The table gives each
 * op's milliseconds per batch, GFLOP/s (2*K*CRS*PQ*N flops) and share of the peak; the totals
 * weigh each layer by how often it occurs in the model (the `x` column), which is the convolution
 * time of one training step of yolocl bench --cfg yolov5s --img 640 --batch N. */
#include "bench_fill.h"
#include "cpu_ops.h"
#include "gemm.h"
#include "fma_peak.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One convolution layer of YOLOv5s at 640: input channels and size, filters, kernel, stride,
 * padding, bias (Detect), and how many layers of the model have this shape. */
typedef struct layer {
    const char *name;
    int C, H, K, k, s, pad, bias, count;
} layer;

static const layer layers[] = {
    {"0 conv 6x6/2", 3, 640, 32, 6, 2, 2, 0, 1},
    {"1 conv 3x3/2", 32, 320, 64, 3, 2, 1, 0, 1},
    {"2 C3 1x1 64>32", 64, 160, 32, 1, 1, 0, 0, 2},
    {"2 C3 1x1 32>32", 32, 160, 32, 1, 1, 0, 0, 1},
    {"2 C3 3x3 32", 32, 160, 32, 3, 1, 1, 0, 1},
    {"2 C3 1x1 64>64", 64, 160, 64, 1, 1, 0, 0, 1},
    {"3 conv 3x3/2", 64, 160, 128, 3, 2, 1, 0, 1},
    {"4,17 1x1 128>64", 128, 80, 64, 1, 1, 0, 0, 4},
    {"4,17 1x1 64>64", 64, 80, 64, 1, 1, 0, 0, 3},
    {"4,17 3x3 64", 64, 80, 64, 3, 1, 1, 0, 3},
    {"4,17 1x1 128>128", 128, 80, 128, 1, 1, 0, 0, 2},
    {"5 conv 3x3/2", 128, 80, 256, 3, 2, 1, 0, 1},
    {"18 conv 3x3/2", 128, 80, 128, 3, 2, 1, 0, 1},
    {"6,13,20 1x1 256>128", 256, 40, 128, 1, 1, 0, 0, 6},
    {"6,13,20 1x1 128>128", 128, 40, 128, 1, 1, 0, 0, 5},
    {"6,13,20 3x3 128", 128, 40, 128, 3, 1, 1, 0, 5},
    {"6,13,20 1x1 256>256", 256, 40, 256, 1, 1, 0, 0, 3},
    {"14 1x1 256>128", 256, 40, 128, 1, 1, 0, 0, 1},
    {"7 conv 3x3/2", 256, 40, 512, 3, 2, 1, 0, 1},
    {"21 conv 3x3/2", 256, 40, 256, 3, 2, 1, 0, 1},
    {"8,9,23 1x1 512>256", 512, 20, 256, 1, 1, 0, 0, 6},
    {"8,23 1x1 256>256", 256, 20, 256, 1, 1, 0, 0, 2},
    {"8,23 3x3 256", 256, 20, 256, 3, 1, 1, 0, 2},
    {"8,23 1x1 512>512", 512, 20, 512, 1, 1, 0, 0, 2},
    {"9 SPPF 1x1 1024>512", 1024, 20, 512, 1, 1, 0, 0, 1},
    {"24 detect 128>255", 128, 80, 255, 1, 1, 0, 1, 1},
    {"24 detect 256>255", 256, 40, 255, 1, 1, 0, 1, 1},
    {"24 detect 512>255", 512, 20, 255, 1, 1, 0, 1, 1},
};

enum { NLAYER = sizeof layers / sizeof layers[0], NPASS = 3 };

static const char *const pass_names[NPASS] = {"fwd", "bwd-d", "bwd-f"};

static yc_hv hv_of(float *p, const yc_tensor *t)
{
    return (yc_hv){.p = p, .type = YC_F32, .n = t->n, .c = t->c, .h = t->h, .w = t->w, .ns = t->nstride};
}

/* Seconds per call of one op (best over calls totalling >= 50 ms after a warm-up); < 0 when out
 * of memory. */
static double time_op(const layer *l, int N, int pass, int threads)
{
    const int P = (l->H + 2 * l->pad - l->k) / l->s + 1;
    yc_tensor x = yc_tensor_make(N, l->C, l->H, l->H, YC_F32, "x");
    yc_tensor w = yc_tensor_make(l->K, l->C, l->k, l->k, YC_F32, "W");
    yc_tensor b = yc_tensor_make(1, l->K, 1, 1, YC_F32, "b");
    yc_tensor y = yc_tensor_make(N, l->K, P, P, YC_F32, "y");
    float *xp = bench_alloc_fill(yc_tensor_elems(&x), 1), *wp = bench_alloc_fill(yc_tensor_elems(&w), 2),
          *bp = bench_alloc_fill(yc_tensor_elems(&b), 3), *yp = bench_alloc_fill(yc_tensor_elems(&y), 4);
    yc_op op = {.kind = pass == 0 ? YC_OP_CONV2D : pass == 1 ? YC_OP_CONV2D_BWD_DATA : YC_OP_CONV2D_BWD_FILTER};
    op.p.conv.kh = op.p.conv.kw = l->k;
    op.p.conv.stride_h = op.p.conv.stride_w = l->s;
    op.p.conv.pad_h = op.p.conv.pad_w = l->pad;
    op.p.conv.groups = 1;
    yc_cpu_args a = {.op = &op, .threads = threads};
    void (*fn)(const yc_cpu_args *) = NULL;
    switch (pass) {
    case 0: /* y = conv(x, W) + b */
        op.src[0] = &x, op.src[1] = &w, op.src[2] = l->bias ? &b : NULL, op.dst[0] = &y;
        a.src[0] = hv_of(xp, &x), a.src[1] = hv_of(wp, &w), a.dst[0] = hv_of(yp, &y);
        if (l->bias)
            a.src[2] = hv_of(bp, &b);
        fn = yc_cpu_conv2d_fwd;
        break;
    case 1: /* dx = conv^T(dy, W) */
        op.src[0] = &y, op.src[1] = &w, op.dst[0] = &x;
        a.src[0] = hv_of(yp, &y), a.src[1] = hv_of(wp, &w), a.dst[0] = hv_of(xp, &x);
        fn = yc_cpu_conv2d_bwd_data;
        break;
    default: /* dW += dy (*) x;  db += sum dy */
        op.src[0] = &x, op.src[1] = &y, op.dst[0] = &w, op.dst[1] = l->bias ? &b : NULL;
        a.src[0] = hv_of(xp, &x), a.src[1] = hv_of(yp, &y), a.dst[0] = hv_of(wp, &w);
        if (l->bias)
            a.dst[1] = hv_of(bp, &b);
        fn = yc_cpu_conv2d_bwd_filter;
        break;
    }
    size_t ws = yc_cpu_conv2d_workspace(&op, threads);
    a.ws = ws ? aligned_alloc(64, (ws + 63) / 64 * 64) : NULL;
    a.ws_size = ws;
    double best = -1.0;
    if (xp && wp && bp && yp && (!ws || a.ws)) {
        fn(&a);
        double total = 0.0;
        for (int reps = 0; total < 0.05 || reps < 2; reps++) {
            double t0 = omp_get_wtime();
            fn(&a);
            double dt = omp_get_wtime() - t0;
            total += dt;
            if (best < 0.0 || dt < best)
                best = dt;
        }
    }
    free(a.ws);
    free(xp);
    free(wp);
    free(bp);
    free(yp);
    return best;
}

static double flops_of(const layer *l, int N)
{
    const int P = (l->H + 2 * l->pad - l->k) / l->s + 1;
    return 2.0 * l->K * (double)l->C * l->k * l->k * (double)P * P * N;
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
    static double best[NLAYER][NPASS];
    double peak = 0.0;
    const char *isa = "";
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < NLAYER; i++) {
            if (only >= 0 && i != only)
                continue;
            double pk = yc_fma_peak_gflops(threads, &isa);
            peak = pk > peak ? pk : peak;
            for (int p = 0; p < NPASS; p++) {
                double t = time_op(&layers[i], N, p, threads);
                if (t < 0.0) {
                    fprintf(stderr, "out of memory for layer %s\n", layers[i].name);
                    return 1;
                }
                if (r == 0 || t < best[i][p])
                    best[i][p] = t;
            }
        }
        fprintf(stderr, "round %d/%d done\n", r + 1, rounds);
    }
    printf("FP32 FMA peak (%s): %.1f GFLOP/s on %d threads (best of %d rounds); batch %d, kernel %s\n", isa, peak,
           threads, rounds, N, yc_sgemm_kernel_name());
    printf("%-22s %2s %5s %4s %5s %5s |", "layer", "x", "C>K", "k/s", "HxW", "PxQ");
    for (int p = 0; p < NPASS; p++)
        printf(" %6s ms GF/s %%pk |", pass_names[p]);
    printf("\n");
    double tot[NPASS] = {0}, fl = 0.0;
    for (int i = 0; i < NLAYER; i++) {
        const layer *l = &layers[i];
        if (only >= 0 && i != only)
            continue;
        const int P = (l->H + 2 * l->pad - l->k) / l->s + 1;
        char ck[16], ks[8];
        snprintf(ck, sizeof ck, "%d>%d", l->C, l->K);
        snprintf(ks, sizeof ks, "%d/%d", l->k, l->s);
        printf("%-22s %2d %9s %4s %5d %5d |", l->name, l->count, ck, ks, l->H, P);
        for (int p = 0; p < NPASS; p++) {
            printf(" %9.2f %4.0f %3.0f |", best[i][p] * 1e3, flops_of(l, N) / best[i][p] * 1e-9,
                   100.0 * flops_of(l, N) / best[i][p] * 1e-9 / peak);
            /* the first layer's input needs no gradient: no backward-data in training */
            tot[p] += (p == 1 && i == 0 ? 0 : l->count) * best[i][p];
        }
        printf("\n");
        fl += l->count * flops_of(l, N);
    }
    const double fl_data = fl - (only <= 0 ? flops_of(&layers[0], N) : 0.0);
    printf("total per training step (layers x count): ");
    for (int p = 0; p < NPASS; p++)
        printf("%s %.1f ms (%.0f%% of peak)  ", pass_names[p], tot[p] * 1e3,
               100.0 * (p == 1 ? fl_data : fl) / tot[p] * 1e-9 / peak);
    const double all = tot[0] + tot[1] + tot[2], fl_all = 2.0 * fl + fl_data;
    printf("\nall three: %.1f ms, %.1f GFLOP/s, %.1f%% of peak\n", all * 1e3, fl_all / all * 1e-9,
           100.0 * fl_all / all * 1e-9 / peak);
    return 0;
}
