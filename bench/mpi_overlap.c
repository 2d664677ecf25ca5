/* Gradients summed while backward runs, against after it: `mpirun -np N bench/mpi_overlap [CFG
 * [IMG [BATCH [ITERS]]]]` (defaults yolov5n, 320, 8 images per rank, 20) runs ITERS training
 * steps of CFG (from scratch, 80 classes, pseudo-random images and boxes) per mode on the CPU
 * backend (OMP_NUM_THREADS threads), alternating the two modes step by step so that the load of
 * the machine falls on both alike: "after", the whole gradient arena summed by one allreduce once
 * backward has finished (YOLOCL_DIST_OVERLAP=0), and "during", its buckets
 * (YOLOCL_DIST_BUCKET_MB, default 2 MiB) summed while backward runs (yc_dist_overlap_arm, the
 * graph's grads_ready hook).  The ranks are lined up by a barrier before each step, so that a
 * step's time is its own and the sum waits little for a slower rank.  Rank 0 prints per mode the
 * median step time (forward, loss, backward and the sum), the median time the sum adds after
 * backward (yc_dist_allreduce_grads: the whole sum "after", the buckets still in flight "during")
 * and, between the modes, the allreduce time hidden (the difference of those).  The two modes'
 * gradients are compared after the run (they must be the same bits). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "dist.h"
#include "hyp.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "step.h"
#include "weights.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Ends every rank with the last error. */
static void need(int st, const char *what)
{
    if (st) {
        char msg[1400];
        snprintf(msg, sizeof msg, "mpi_overlap: %s: %s", what, yc_last_error());
        yc_dist_abort(1, msg);
    }
}

int main(int argc, char **argv)
{
    if (yc_dist_init(&argc, &argv)) {
        fprintf(stderr, "mpi_overlap: %s\n", yc_last_error());
        return 1;
    }
    const char *cfgname = argc > 1 ? argv[1] : "yolov5n";
    int img = argc > 2 ? atoi(argv[2]) : 320, batch = argc > 3 ? atoi(argv[3]) : 8;
    int iters = argc > 4 ? atoi(argv[4]) : 20;
    if (img < 32 || img % 32 || batch < 1 || iters < 1) {
        fprintf(stderr, "usage: mpirun -np N bench/mpi_overlap [CFG [IMG [BATCH [ITERS]]]]\n");
        yc_dist_finalize();
        return 2;
    }
    if (yc_dist_size() < 2) {
        fprintf(stderr, "mpi_overlap: run it under mpirun with at least 2 ranks\n");
        yc_dist_finalize();
        return 2;
    }
    int rank = yc_dist_rank();
    yc_backend *be = NULL;
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    need(yc_device_open("cpu", 0, false, &be), "the CPU backend");
    need(yc_model_cfg_open(cfgname, NULL, 80, &cfg, NULL, 0), "the model config");
    need(yc_model_new(&m, cfg), "the model");
    need(yc_model_alloc(m, be), "the model's memory");
    need(yc_model_init_weights(m, 1), "the model's weights");
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_step_loss_params(m, &hyp, img, 0.0f, &lp);
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .grads_ready = yc_dist_grads_ready};
    yc_step *s = NULL;
    need(yc_step_new_in(&s, m, batch, img, img, &lp, &go, NULL), "the training graph");
    size_t n = (size_t)batch * 3 * (size_t)img * (size_t)img, np = m->param_elems;
    float *images = malloc(n * sizeof *images), *targets = malloc((size_t)batch * 3 * 6 * sizeof *targets);
    float *grads[2] = {malloc(np * sizeof(float)), malloc(np * sizeof(float))};
    double *step[2], *exposed[2];
    for (int k = 0; k < 2; k++) {
        step[k] = malloc((size_t)iters * sizeof(double));
        exposed[k] = malloc((size_t)iters * sizeof(double));
        if (!step[k] || !exposed[k])
            yc_dist_abort(1, "mpi_overlap: out of memory");
    }
    if (!images || !targets || !grads[0] || !grads[1])
        yc_dist_abort(1, "mpi_overlap: out of memory");
    uint64_t x = 12345u + (uint64_t)rank;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (float)(x >> 40) / (float)(1ull << 24);
    }
    int nt = 0;
    for (int b = 0; b < batch; b++)
        for (int k = 0; k < 3; k++) {
            float *r = targets + 6 * nt++;
            r[0] = (float)b;
            r[1] = (float)((b * 7 + k * 13 + rank) % 80);
            r[2] = 0.2f + 0.25f * (float)k;
            r[3] = 0.3f + 0.05f * (float)(b % 8);
            r[4] = 0.1f + 0.1f * (float)k;
            r[5] = 0.15f + 0.03f * (float)(b % 5);
        }
    /* one warm-up step per mode, then ITERS of each, alternating */
    for (int it = -1; it < iters; it++)
        for (int k = 0; k < 2; k++) {
            setenv(YC_DIST_OVERLAP_ENV, k ? "1" : "0", 1);
            yc_loss_result r;
            need(yc_dist_barrier(), "the barrier");
            double t0 = now();
            need(yc_model_zero_grad(m), "zeroing the gradients");
            need(yc_dist_overlap_arm(m, true), "arming the buckets");
            need(yc_step_run(s, images, targets, nt, &r), "a training step");
            double t1 = now();
            need(yc_dist_allreduce_grads(m), "the gradient sum");
            double t2 = now();
            if (it >= 0) {
                step[k][it] = t2 - t0;
                exposed[k][it] = t2 - t1;
            }
            if (it == iters - 1)
                need(m->be->iface->buffer_read(m->be, m->grad_buf, 0, grads[k], np * sizeof(float)),
                     "reading the gradients");
        }
    long early, late;
    yc_dist_overlap_stats(&early, &late);
    if (rank == 0) {
        double st[2], ex[2];
        for (int k = 0; k < 2; k++) {
            st[k] = 1e3 * median(step[k], iters);
            ex[k] = 1e3 * median(exposed[k], iters);
        }
        printf("%s at %d, %d images per rank, %d ranks on %s each, %zu gradients (%.2f MB), "
               "%d steps per mode\n", cfgname, img, batch, yc_dist_size(), be->info.name, np,
               4e-6 * (double)np, iters);
        printf("sum after backward:  step %.1f ms (median), the sum %.2f ms of it\n", st[0], ex[0]);
        printf("sum during backward: step %.1f ms (median), %.2f ms of sum after backward; %ld "
               "buckets started during backward, %ld after\n", st[1], ex[1], early, late);
        printf("allreduce time hidden: %.2f ms per step (%.0f%% of the sum), step %.1f%% shorter\n",
               ex[0] - ex[1], ex[0] > 0 ? 100.0 * (ex[0] - ex[1]) / ex[0] : 0.0,
               st[0] > 0 ? 100.0 * (st[0] - st[1]) / st[0] : 0.0);
        if (memcmp(grads[0], grads[1], np * sizeof(float)) != 0)
            printf("the two modes' gradients differ\n");
    }
    int differ = memcmp(grads[0], grads[1], np * sizeof(float)) != 0;
    for (int k = 0; k < 2; k++) {
        free(step[k]);
        free(exposed[k]);
        free(grads[k]);
    }
    free(images);
    free(targets);
    yc_step_free(s);
    yc_model_free(m); /* and cfg, which it owns */
    yc_backend_free(be);
    yc_dist_finalize();
    return differ;
}
