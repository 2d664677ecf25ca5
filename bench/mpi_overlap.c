/* Gradients summed while backward runs, against after it: `mpirun -np N bench/mpi_overlap
 * [--device D] [CFG [IMG [BATCH [ITERS]]]]` (defaults cpu, yolov5n, 320, 8 images per rank, 20)
 * runs ITERS training steps of CFG (from scratch, 80 classes, pseudo-random images and boxes) per
 * mode on device D (cpu: OMP_NUM_THREADS threads; opencl or opencl:K: the K-th OpenCL device,
 * "opencl" the local rank's), alternating the two modes step by step so that the load of the
 * machine falls on both alike: "after", the whole gradient arena summed by one allreduce once
 * backward has finished (YOLOCL_DIST_OVERLAP=0; on OpenCL: a wait for the device, a blocking read
 * and a blocking write back), and "during", its buckets (YOLOCL_DIST_BUCKET_MB, default 2 MiB)
 * summed while backward runs (yc_dist_overlap_arm, the graph's grads_ready hook; on OpenCL each
 * bucket read into its pinned host buffer as soon as it is final and summed once the read lands).
 * Each step is submitted without waiting (forward, loss, backward), then summed
 * (yc_dist_allreduce_grads), then waited for, as yc_train does.  The ranks are lined up by a
 * barrier before each step, so that a step's time is its own and the sum waits little for a
 * slower rank.  Rank 0 prints per mode the median step time (submission to the device's end),
 * the median time yc_dist_allreduce_grads takes after the step's submission, the allreduce time
 * hidden between the modes (the difference of those), and per step the backend's host waits
 * (clFinish, blocking reads and writes, clWaitForEvents), the bytes copied from and to the device
 * (the input batch and the loss's buffers included, the same in both modes) and what the buckets
 * did (yc_dist_overlap_counts: sums started before and after the backward ended, reads started
 * from the hook and later, waits for a read).  The two modes' gradients are compared after the
 * run (they must be the same bits). */
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
    const char *spec = "cpu";
    if (argc > 2 && strcmp(argv[1], "--device") == 0) {
        spec = argv[2];
        argc -= 2;
        argv += 2;
    }
    const char *cfgname = argc > 1 ? argv[1] : "yolov5n";
    int img = argc > 2 ? atoi(argv[2]) : 320, batch = argc > 3 ? atoi(argv[3]) : 8;
    int iters = argc > 4 ? atoi(argv[4]) : 20;
    if (img < 32 || img % 32 || batch < 1 || iters < 1) {
        fprintf(stderr, "usage: mpirun -np N bench/mpi_overlap [--device D] [CFG [IMG [BATCH "
                "[ITERS]]]]\n");
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
    char device[64];
    need(yc_dist_rank_device(spec, false, yc_dist_local_rank(), yc_dist_local_size(), device,
                             sizeof device), "the device");
    need(yc_device_open(device, 0, false, &be), device);
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
    /* per mode over the measured steps: the backend's counters and the buckets' */
    yc_backend_counters used[2] = {{0}};
    yc_dist_overlap_counts counted[2] = {{0}};
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
            yc_backend_counters c0 = be->counters;
            yc_dist_overlap_counts n0, n1;
            yc_dist_overlap_counts_get(&n0);
            double t0 = now();
            need(yc_model_zero_grad(m), "zeroing the gradients");
            need(yc_dist_overlap_arm(m, true), "arming the buckets");
            need(yc_step_submit(s, images, targets, nt), "a training step");
            double t1 = now();
            need(yc_dist_allreduce_grads(m), "the gradient sum");
            need(be->iface->synchronize(be), "the step");
            double t2 = now();
            yc_step_result(s, &r);
            yc_dist_overlap_counts_get(&n1);
            if (it >= 0) {
                step[k][it] = t2 - t0;
                exposed[k][it] = t2 - t1;
                yc_backend_counters *u = &used[k];
                u->host_waits += be->counters.host_waits - c0.host_waits;
                u->bytes_from_device += be->counters.bytes_from_device - c0.bytes_from_device;
                u->bytes_to_device += be->counters.bytes_to_device - c0.bytes_to_device;
                yc_dist_overlap_counts *c = &counted[k];
                c->early += n1.early - n0.early;
                c->late += n1.late - n0.late;
                c->reads_early += n1.reads_early - n0.reads_early;
                c->reads_late += n1.reads_late - n0.reads_late;
                c->read_waits += n1.read_waits - n0.read_waits;
            }
            if (it == iters - 1)
                need(m->be->iface->buffer_read(m->be, m->grad_buf, 0, grads[k], np * sizeof(float)),
                     "reading the gradients");
        }
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
        printf("sum during backward: step %.1f ms (median), %.2f ms of sum after backward\n",
               st[1], ex[1]);
        for (int k = 0; k < 2; k++) {
            const yc_backend_counters *u = &used[k];
            const yc_dist_overlap_counts *c = &counted[k];
            double it = (double)iters;
            printf("%s, per step: %.2f host waits, %.0f bytes from and %.0f to the device; "
                   "buckets: %.2f sums started before backward ended, %.2f after, %.2f reads "
                   "started from the hook, %.2f later, %.2f waits for a read\n",
                   k ? "during" : "after ", (double)u->host_waits / it,
                   (double)u->bytes_from_device / it, (double)u->bytes_to_device / it,
                   (double)c->early / it, (double)c->late / it, (double)c->reads_early / it,
                   (double)c->reads_late / it, (double)c->read_waits / it);
        }
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
    yc_dist_overlap_release();
    yc_step_free(s);
    yc_model_free(m); /* and cfg, which it owns */
    yc_backend_free(be);
    yc_dist_finalize();
    return differ;
}
