/* Data-parallel training on MPI (src/train/dist.c), run by tests/test_mpi.sh as
 * `mpirun -np 2 tests/mpi_dist` (a plain program, not Check: MPI ranks must not fork).
 *
 *  - the gradients: each rank runs one training step of the tiny YOLOv5 on its half of a batch of
 *    4 images and the ranks sum their gradients (yc_dist_allreduce_grads, what yc_train does
 *    before each optimizer step); the sum must equal, within float reduction-order tolerance, the
 *    gradient one process accumulates over the same two half-batches run one after the other
 *    (and must differ from the rank's own half's);
 *  - the buckets: the same sum in buckets of 64 KiB started while backward runs (yc_dist_overlap_arm
 *    and the graph's grads_ready hook; on an OpenCL device each bucket read into its pinned host
 *    buffer, summed once the read lands and written back) must be the same bits as the sum after
 *    backward in one piece (YOLOCL_DIST_OVERLAP=0), on the CPU backend and, where a device opens,
 *    on OpenCL, with every bucket started (read) from the hook, the same bytes copied and no host
 *    wait added but the waits for a read (test_buckets);
 *  - the weights: ranks initialised from different seeds hold rank 0's parameters, statistics
 *    and anchors after yc_dist_bcast_model, and yc_dist_check_weights passes, then fails on
 *    every rank, naming the epoch and the rank, once one parameter of one rank changes;
 *  - the optimizer steps: 2 ranks x batch 4 (global batch 8) for 3 optimizer steps (the gradients
 *    summed, each rank stepping its own SGD) end with the weights one process reaches with the
 *    same 8 images of each step run as 2 accumulated micro-batches of 4, within float
 *    reduction-order tolerance (YOLOv5's DDP result: see run_epochs in src/train/train.c);
 *  - resume: given a dataset (argv[1], the demo data) and a directory (argv[2]), yc_train on the 2
 *    ranks straight, then the same run interrupted by a SIGINT raised on rank 1 alone inside an
 *    accumulation cycle and resumed on 2 ranks: the interrupted checkpoint says 2 ranks and holds
 *    the pending gradients, and the resumed run ends with the straight run's weights within
 *    reduction-order tolerance (the pending gradients are saved summed over the ranks);
 *  - a classifier's gradients (classify/train.py's DDP, classify_train.h): each rank runs one
 *    step of yolov5n-cls on its half of a batch of 4 with the logits' gradient scaled by 1/2
 *    (yc_classify_step's grad_scale) and the ranks sum them: DDP's average of the two halves'
 *    gradients, which must equal half of what one process accumulates over the same two
 *    half-batches unscaled;
 *  - the small collectives: sum, max, broadcast, barrier; the local rank and the number of ranks
 *    of this machine (all ranks, or YOLOCL_TEST_RANKS_PER_HOST when the ranks run on several
 *    hosts: bench/mpi_hosts.sh).
 *
 * Exits 0 when every check passes, 1 otherwise, 77 when not run on exactly 2 ranks of an MPI
 * build. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "dist.h"
#include "graph.h"
#include "harness.h"
#include "hyp.h"
#include "log.h"
#include "checkpoint.h"
#include "classify_step.h"
#include "model.h"
#include "modelcfg.h"
#include "optim.h"
#include "step.h"
#include "train.h"
#include "train_opts.h"
#include "weights.h"

#define S 64
#define B 4

static int failures;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", yc_dist_rank(), __FILE__, __LINE__);         \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            failures++;                                                                           \
        }                                                                                         \
    } while (0)

/* Fails the program (every rank) with the last error. */
static void need(int st, const char *what)
{
    if (st) {
        char msg[1400];
        snprintf(msg, sizeof msg, "%s: %s", what, yc_last_error());
        yc_dist_abort(1, msg);
    }
}

static yc_model *tiny_model(yc_backend *be, int seed)
{
    const char *data = getenv("YOLOCL_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny/yolov5n-tiny.yaml", data ? data : "tests/data");
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    need(yc_model_cfg_open(path, NULL, 4, &cfg, NULL, 0), "the tiny model's config");
    need(yc_model_new(&m, cfg), "the tiny model");
    need(yc_model_alloc(m, be), "the tiny model's memory");
    need(yc_model_init_weights(m, (uint64_t)seed), "the tiny model's weights");
    return m;
}

static float *read_arena(yc_model *m, yc_buffer *buf, size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p)
        yc_dist_abort(1, "out of memory for a copy of the model's arena");
    need(m->be->iface->buffer_read(m->be, buf, 0, p, n * sizeof *p), "reading the arena");
    return p;
}

/* Gradient of one step on `n` images from `first` (targets renumbered), added to the model's. */
static void half_step(yc_step *s, const float *images, const float *targets, int nt, int first,
                      int n)
{
    float mt[6 * 24];
    int k = yc_micro_targets(targets, nt, first, n, mt);
    yc_loss_result r;
    need(yc_step_run(s, images + (size_t)first * 3 * S * S, mt, k, &r), "a training step");
    CHECK(isfinite(r.total) && r.total > 0, "the loss of images %d..%d is %g", first,
          first + n - 1, r.total);
}

/* Pseudo-random pixels in [0, 1) for n images, from `seed`. */
static void fill_images(float *images, size_t n, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n * 3 * S * S; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (float)(x >> 40) / (float)(1ull << 24);
    }
}

/* Largest |a[i] - b[i]| and largest |b[i]| over n values. */
static void max_diff(const float *a, const float *b, size_t n, double *diff, double *scale)
{
    *diff = 0.0;
    *scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        *diff = fmax(*diff, fabs((double)a[i] - b[i]));
        *scale = fmax(*scale, fabs((double)b[i]));
    }
}

/* What one training pass of a graph leaves: the heads of its images, in level order, the loss
 * 0.5 * sum of the squared heads (a loss that is a sum over images, unlike YOLOv5's, whose means
 * over a batch's targets differ between one batch of 4 and two of 2), the running statistics
 * after the forward and the parameter gradients its backward added (from zero). */
typedef struct pass {
    float *heads, *state, *grads;
    /* elements of each level's head (0 past the last) and of all */
    size_t level[YC_CFG_MAX_LEVELS], nheads;
    double loss;
} pass;

/* One training forward and backward of the tiny model on `n` images from images[first], with
 * SyncBatchNorm when `sync`; the heads' gradients are the heads (d loss / d head). */
static pass train_pass(yc_model *m, const float *images, int first, int n, bool sync)
{
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN};
    if (sync)
        go.bn_sync = yc_dist_bn_sync;
    yc_graph *g = NULL;
    need(yc_graph_new_opts(&g, m, n, S, S, &go), "a training graph");
    need(yc_graph_alloc(g), "a training graph's memory");
    need(yc_tensor_set_f32(m->be, yc_graph_input(g), images + (size_t)first * 3 * S * S),
         "the input batch");
    need(yc_model_zero_grad(m), "zeroing the gradients");
    need(yc_graph_forward(g), "the forward pass");
    pass p = {.loss = 0.0};
    for (int l = 0; l < m->nl; l++)
        p.nheads += p.level[l] = yc_tensor_elems(yc_graph_head(g, l));
    if (!(p.heads = malloc(p.nheads * sizeof *p.heads)))
        yc_dist_abort(1, "out of memory for the heads");
    size_t at = 0;
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *h = yc_graph_head(g, l);
        need(yc_tensor_get_f32(m->be, h, p.heads + at), "reading a head");
        size_t k = yc_tensor_elems(h);
        for (size_t i = 0; i < k; i++)
            p.loss += 0.5 * (double)p.heads[at + i] * p.heads[at + i];
        need(yc_tensor_set_f32(m->be, yc_graph_head_grad(g, l), p.heads + at), "a head gradient");
        at += k;
    }
    p.state = read_arena(m, m->state_buf, m->state_elems);
    need(yc_graph_backward(g), "the backward pass");
    p.grads = read_arena(m, m->grad_buf, m->param_elems);
    yc_graph_free(g);
    return p;
}

static void pass_free(pass *p)
{
    free(p->heads);
    free(p->state);
    free(p->grads);
}

/* --sync-bn: SyncBatchNorm on 2 ranks x 2 images against BatchNorm in one process on the same
 * 4 images: the heads (every BatchNorm's output feeds them), the running statistics, the loss
 * and the gradients summed over the ranks equal the one process's within float tolerance; and
 * without SyncBatchNorm they do not (each rank normalises its own 2 images). */
static void test_sync_bn(yc_backend *be)
{
    int rank = yc_dist_rank();
    float *images = malloc((size_t)B * 3 * S * S * sizeof *images);
    if (!images)
        yc_dist_abort(1, "out of memory for the test images");
    fill_images(images, B, 99);
    yc_model *m = tiny_model(be, 13);
    pass ref = train_pass(m, images, 0, B, false);
    yc_model_free(m);
    for (int sync = 1; sync >= 0; sync--) {
        m = tiny_model(be, 13);
        pass p = train_pass(m, images, rank * (B / 2), B / 2, sync);
        size_t nstate = m->state_elems, np = m->param_elems;
        yc_model_free(m);
        /* the heads: level by level, the rank's images are its half of the reference's */
        double hd = 0.0, hs = 0.0, d, sc;
        size_t at = 0, ref_at = 0;
        for (int l = 0; l < YC_CFG_MAX_LEVELS && p.level[l]; l++) {
            max_diff(p.heads + at, ref.heads + ref_at + (size_t)rank * p.level[l], p.level[l], &d,
                     &sc);
            hd = fmax(hd, d);
            hs = fmax(hs, sc);
            at += p.level[l];
            ref_at += 2 * p.level[l];
        }
        double sd, ss, gd, gs;
        max_diff(p.state, ref.state, nstate, &sd, &ss);
        float loss = (float)p.loss;
        need(yc_dist_allreduce_sum_f32(&loss, 1), "the sum of the losses");
        need(yc_dist_allreduce_sum_f32(p.grads, np), "the sum of the gradients");
        max_diff(p.grads, ref.grads, np, &gd, &gs);
        double ld = fabs((double)loss - ref.loss);
        const char *name = sync ? "SyncBatchNorm on 2 ranks x 2" : "BatchNorm on 2 ranks x 2";
        printf("rank %d: %s vs BatchNorm on 1 x 4: heads max |diff| %.3g (largest %.3g), running "
               "statistics %.3g (%.3g), loss %.7g vs %.7g, summed gradients %.3g (%.3g)\n", rank,
               name, hd, hs, sd, ss, (double)loss, ref.loss, gd, gs);
        CHECK(hs > 0 && gs > 0 && isfinite(hs + gs), "all-zero or non-finite heads or gradients");
        if (sync) {
            CHECK(hd <= 1e-4 * hs, "%s: the heads differ by %g (largest %g)", name, hd, hs);
            CHECK(sd <= 1e-5 * ss, "%s: the running statistics differ by %g (largest %g)", name,
                  sd, ss);
            CHECK(ld <= 1e-5 * ref.loss, "%s: loss %.9g, one process %.9g", name, (double)loss,
                  ref.loss);
            CHECK(gd <= 1e-4 * gs, "%s: the summed gradients differ by %g (largest %g)", name, gd,
                  gs);
        } else {
            CHECK(hd > 1e-2 * hs && sd > 1e-3 * ss && gd > 1e-2 * gs,
                  "%s: heads %g, statistics %g and gradients %g from one process's: the test "
                  "cannot tell SyncBatchNorm from none", name, hd, sd, gd);
        }
        pass_free(&p);
    }
    pass_free(&ref);
    free(images);
}

static void test_gradients(yc_backend *be)
{
    int rank = yc_dist_rank();
    yc_model *m = tiny_model(be, 7);
    size_t img = 3 * S * S, np = m->param_elems;
    float *images = malloc(B * img * sizeof *images);
    if (!images)
        yc_dist_abort(1, "out of memory for the test images");
    uint64_t x = 12345;
    for (size_t i = 0; i < B * img; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (float)(x >> 40) / (float)(1ull << 24);
    }
    float targets[6 * 24];
    const int nt = yc_harness_targets(B, targets);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_step_loss_params(m, &hyp, S, 0.0f, &lp);
    yc_step *s = NULL;
    need(yc_step_new(&s, m, B / 2, S, S, &lp), "the training graph");

    /* one process: both halves accumulated */
    need(yc_model_zero_grad(m), "zeroing the gradients");
    half_step(s, images, targets, nt, 0, B / 2);
    half_step(s, images, targets, nt, B / 2, B / 2);
    float *ref = read_arena(m, m->grad_buf, np);

    /* two ranks: each its half, then the sum over the ranks */
    need(yc_model_zero_grad(m), "zeroing the gradients");
    half_step(s, images, targets, nt, rank * (B / 2), B / 2);
    float *own = read_arena(m, m->grad_buf, np);
    need(yc_dist_allreduce_grads(m), "yc_dist_allreduce_grads");
    float *sum = read_arena(m, m->grad_buf, np);

    double scale = 0, err = 0, from_own = 0;
    size_t worst = 0;
    for (size_t i = 0; i < np; i++) {
        scale = fmax(scale, fabs(ref[i]));
        double d = fabs((double)sum[i] - ref[i]);
        if (d > err) {
            err = d;
            worst = i;
        }
        from_own = fmax(from_own, fabs((double)own[i] - ref[i]));
    }
    CHECK(scale > 0 && isfinite(scale), "the reference gradient is all zero or not finite");
    CHECK(err <= 1e-5 * scale, "summed gradient differs from the accumulated one by %g at %zu "
          "(%g vs %g; largest gradient %g)", err, worst, sum[worst], ref[worst], scale);
    CHECK(from_own > 1e-3 * scale, "one half's gradient already equals the whole (%g): the "
          "test cannot tell a sum from no reduction", from_own);
    printf("rank %d: gradients of %zu parameters: summed over 2 ranks vs accumulated in one "
           "process: max |diff| %.3g (largest gradient %.3g)\n", rank, np, err, scale);
    free(ref);
    free(own);
    free(sum);
    free(images);
    yc_step_free(s);
    yc_model_free(m);
}

/* What a backend did between two points (yc_backend_counters). */
static yc_backend_counters counters_since(const yc_backend *be, yc_backend_counters from)
{
    yc_backend_counters c = be->counters;
    c.launches -= from.launches;
    c.host_waits -= from.host_waits;
    c.bytes_to_device -= from.bytes_to_device;
    c.bytes_from_device -= from.bytes_from_device;
    return c;
}

/* The gradient sum in buckets of 64 KiB started while backward runs (yc_dist_overlap_arm, the
 * graph's grads_ready hook; on a device each bucket read into its pinned host buffer as soon as
 * it is final, summed when the read lands, written back) against the sum after backward in one
 * piece (YOLOCL_DIST_OVERLAP=0): the same bits, every bucket started by the hook (on a device:
 * read), the same bytes copied, and on a device no wait for the whole queue: the host waits of
 * the step differ from the one-piece sum's by its synchronize, blocking read and blocking write
 * against the bucketed sum's waits for a read.  The step is submitted without waiting, as
 * yc_train does, so that on a device the sums can start while the device still runs backward. */
static void test_buckets(yc_backend *be)
{
    int rank = yc_dist_rank();
    yc_model *m = tiny_model(be, 7);
    size_t img = 3 * S * S, np = m->param_elems;
    float *images = malloc(B * img * sizeof *images);
    float *own = malloc(np * sizeof *own), *after = malloc(np * sizeof *after);
    float *during = malloc(np * sizeof *during);
    if (!images || !own || !after || !during)
        yc_dist_abort(1, "out of memory for the test images");
    fill_images(images, B, 12345);
    float targets[6 * 24];
    const int nt = yc_harness_targets(B, targets);
    float mt[6 * 24];
    int k = yc_micro_targets(targets, nt, rank * (B / 2), B / 2, mt);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_step_loss_params(m, &hyp, S, 0.0f, &lp);
    setenv(YC_DIST_BUCKET_ENV, "0.0625", 1);
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .grads_ready = yc_dist_grads_ready};
    yc_step *s = NULL;
    need(yc_step_new_in(&s, m, B / 2, S, S, &lp, &go, NULL), "the hooked training graph");
    const float *x = images + (size_t)rank * (B / 2) * img;
    yc_loss_result r;
    /* after backward, in one piece; the rank's own gradient first (one more synchronize) */
    setenv(YC_DIST_OVERLAP_ENV, "0", 1);
    need(yc_model_zero_grad(m), "zeroing the gradients");
    need(yc_dist_overlap_arm(m, true), "yc_dist_overlap_arm");
    CHECK(!yc_dist_overlap_armed(), YC_DIST_OVERLAP_ENV "=0 armed the buckets");
    need(yc_step_run(s, x, mt, k, &r), "a training step");
    need(be->iface->buffer_read(be, m->grad_buf, 0, own, np * sizeof *own), "the own gradient");
    need(yc_model_zero_grad(m), "zeroing the gradients");
    need(be->iface->synchronize(be), "the zeroing");
    yc_backend_counters c0 = be->counters;
    need(yc_dist_overlap_arm(m, true), "yc_dist_overlap_arm");
    need(yc_step_submit(s, x, mt, k), "a training step");
    need(yc_dist_allreduce_grads(m), "yc_dist_allreduce_grads after backward");
    need(be->iface->synchronize(be), "the step");
    yc_backend_counters one = counters_since(be, c0);
    yc_step_result(s, &r);
    need(be->iface->buffer_read(be, m->grad_buf, 0, after, np * sizeof *after), "the sum");
    unsetenv(YC_DIST_OVERLAP_ENV);
    /* in buckets during backward, twice: the first armed backward makes the pinned buffers */
    yc_backend_counters bucketed = {0};
    yc_dist_overlap_counts n0, n1;
    for (int pass = 0; pass < 2; pass++) {
        need(yc_model_zero_grad(m), "zeroing the gradients");
        need(be->iface->synchronize(be), "the zeroing");
        c0 = be->counters;
        yc_dist_overlap_counts_get(&n0);
        need(yc_dist_overlap_arm(m, true), "yc_dist_overlap_arm");
        CHECK(yc_dist_overlap_armed(), "the buckets were not armed");
        need(yc_step_submit(s, x, mt, k), "a training step");
        need(yc_dist_allreduce_grads(m), "yc_dist_allreduce_grads after an overlapped backward");
        need(be->iface->synchronize(be), "the step");
        bucketed = counters_since(be, c0);
        yc_dist_overlap_counts_get(&n1);
        yc_step_result(s, &r);
        need(be->iface->buffer_read(be, m->grad_buf, 0, during, np * sizeof *during),
             "the bucketed sum");
    }
    unsetenv(YC_DIST_BUCKET_ENV);
    size_t differ = 0, summed = 0;
    for (size_t i = 0; i < np; i++) {
        differ += memcmp(&during[i], &after[i], sizeof(float)) != 0;
        summed += after[i] != own[i];
    }
    long early = n1.early - n0.early, late = n1.late - n0.late;
    long reads = n1.reads_early - n0.reads_early, reads_late = n1.reads_late - n0.reads_late;
    long waits = n1.read_waits - n0.read_waits;
    bool device = !be->iface->buffer_host_ptr;
    CHECK(summed > np / 2, "only %zu of %zu gradients changed by the sum over the ranks: the test "
          "cannot tell a sum from none", summed, np);
    CHECK(differ == 0, "%s: %zu of %zu gradients summed in buckets during backward differ from "
          "the sum after it", be->info.name, differ, np);
    CHECK(n1.steps - n0.steps == 1, "%ld bucketed steps counted, 1 run", n1.steps - n0.steps);
    if (!device) {
        CHECK(early >= 4 && late == 0 && reads == 0, "%ld buckets started during backward, %ld "
              "after it, %ld reads: expected every bucket (at least 4 of 64 KiB in %zu bytes) "
              "during, no reads", early, late, reads, np * sizeof(float));
    } else {
        CHECK(reads >= 4 && reads_late == 0 && early + late == reads, "%ld bucket reads started "
              "by the hook, %ld after backward, %ld sums: expected every bucket (at least 4 of 64 "
              "KiB in %zu bytes) read from the hook and summed", reads, reads_late, early + late,
              np * sizeof(float));
        CHECK(bucketed.bytes_from_device == one.bytes_from_device &&
              bucketed.bytes_to_device == one.bytes_to_device, "bytes copied per step: %llu from "
              "and %llu to the device in buckets, %llu and %llu in one piece",
              (unsigned long long)bucketed.bytes_from_device,
              (unsigned long long)bucketed.bytes_to_device,
              (unsigned long long)one.bytes_from_device, (unsigned long long)one.bytes_to_device);
        CHECK((long)one.host_waits - (long)bucketed.host_waits == 3 - waits, "host waits per step: "
              "%llu in buckets (%ld of them for a read), %llu in one piece: expected 3 fewer "
              "than the one piece's but the waits for a read",
              (unsigned long long)bucketed.host_waits, waits,
              (unsigned long long)one.host_waits);
    }
    printf("rank %d: %s: the same sum in buckets of 64 KiB: %zu of %zu values differ; %ld buckets' "
           "sums started before backward ended, %ld after; %ld read from the hook, %ld later; "
           "per step %llu host waits (%ld for a read) and %llu + %llu bytes from + to the device, "
           "against %llu and %llu + %llu summed in one piece after backward\n", rank,
           be->info.name, differ, np, early, late, reads, reads_late,
           (unsigned long long)bucketed.host_waits, waits,
           (unsigned long long)bucketed.bytes_from_device,
           (unsigned long long)bucketed.bytes_to_device, (unsigned long long)one.host_waits,
           (unsigned long long)one.bytes_from_device, (unsigned long long)one.bytes_to_device);
    yc_dist_overlap_release();
    yc_step_free(s);
    yc_model_free(m);
    free(images);
    free(own);
    free(after);
    free(during);
}

/* A classifier's step on each rank's half of 4 images (see the head comment). */
static void test_cls_gradients(yc_backend *be)
{
    enum { CB = 4, CI = 32, NC = 3 };
    int rank = yc_dist_rank();
    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    need(yc_model_cfg_find("yolov5n-cls", path, sizeof path), "finding yolov5n-cls");
    need(yc_model_cfg_open(path, NULL, NC, &cfg, NULL, 0), "the classifier's config");
    need(yc_model_new(&m, cfg), "the classifier");
    need(yc_model_alloc(m, be), "the classifier's memory");
    need(yc_model_init_weights(m, 3), "the classifier's weights");
    size_t img = 3 * CI * CI, np = m->param_elems;
    float *images = malloc(CB * img * sizeof *images);
    if (!images)
        yc_dist_abort(1, "out of memory for the test images");
    uint64_t x = 999;
    for (size_t i = 0; i < CB * img; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (float)(x >> 40) / (float)(1ull << 24) * 4 - 2;
    }
    const int labels[CB] = {2, 0, 1, 1};
    yc_classify_step *s = NULL;
    need(yc_classify_step_new(&s, m, CB / 2, CI, 0.1, NULL), "the classifier's training graph");
    double loss = 0;
    /* one process: both halves accumulated unscaled, then halved (exact in float) */
    need(yc_model_zero_grad(m), "zeroing the gradients");
    need(yc_classify_step_run(s, images, labels, &loss), "a classifier step");
    need(yc_classify_step_run(s, images + (CB / 2) * img, labels + CB / 2, &loss),
         "a classifier step");
    float *ref = read_arena(m, m->grad_buf, np);
    for (size_t i = 0; i < np; i++)
        ref[i] *= 0.5f;
    /* two ranks: each its half with its gradient scaled by 1/2, summed */
    s->grad_scale = 0.5f;
    need(yc_model_zero_grad(m), "zeroing the gradients");
    need(yc_classify_step_run(s, images + (size_t)rank * (CB / 2) * img, labels + rank * (CB / 2),
                              &loss), "a classifier step");
    CHECK(isfinite(loss) && loss > 0, "the classifier's loss is %g", loss);
    float *own = read_arena(m, m->grad_buf, np);
    need(yc_dist_allreduce_grads(m), "yc_dist_allreduce_grads");
    float *sum = read_arena(m, m->grad_buf, np);
    double scale = 0, err = 0, from_own = 0;
    for (size_t i = 0; i < np; i++) {
        scale = fmax(scale, fabs(ref[i]));
        err = fmax(err, fabs((double)sum[i] - ref[i]));
        from_own = fmax(from_own, fabs((double)own[i] - ref[i]));
    }
    CHECK(scale > 0 && isfinite(scale), "the classifier's reference gradient is zero or not "
          "finite");
    CHECK(err <= 1e-5 * scale, "the classifier's averaged gradient differs from the accumulated "
          "one by %g (largest %g)", err, scale);
    CHECK(from_own > 1e-3 * scale, "one half's classifier gradient already equals the whole");
    printf("rank %d: classifier gradients of %zu parameters: averaged over 2 ranks vs accumulated "
           "in one process: max |diff| %.3g (largest gradient %.3g)\n", rank, np, err, scale);
    free(ref);
    free(own);
    free(sum);
    free(images);
    yc_classify_step_free(s);
    yc_model_free(m);
}

/* 2 ranks x batch 4 against 1 process accumulating 2 micro-batches of 4, for STEPS optimizer
 * steps of SGD with YOLOv5's hyperparameters and gradient clipping. */
#define STEPS 3
#define RB 4
static void test_steps(yc_backend *be)
{
    int rank = yc_dist_rank(), n = yc_dist_size();
    const int global = RB * n;
    /* the same initial weights for both (same seed) */
    yc_model *ref = tiny_model(be, 11), *dm = tiny_model(be, 11);
    size_t np = ref->param_elems;
    float *w0 = read_arena(ref, ref->param_buf, np);
    float *images = malloc((size_t)global * 3 * S * S * sizeof *images);
    if (!images)
        yc_dist_abort(1, "out of memory for the test images");
    float targets[6 * 3 * RB * 2];
    const int nt = yc_harness_targets(global, targets);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_step_loss_params(ref, &hyp, S, 0.0f, &lp);
    yc_step *sref = NULL, *sdm = NULL;
    need(yc_step_new(&sref, ref, RB, S, S, &lp), "the reference's training graph");
    need(yc_step_new(&sdm, dm, RB, S, S, &lp), "the rank's training graph");
    /* weight decay as train.c scales it for the global batch and accumulate 1 */
    double wd = hyp.weight_decay * global / 64.0;
    yc_optim *oref = NULL, *odm = NULL;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    need(yc_optim_new(&oref, ref, YC_OPTIM_SGD, hyp.lr0, hyp.momentum, wd, NULL),
         "the reference's optimizer");
    need(yc_optim_new(&odm, dm, YC_OPTIM_SGD, hyp.lr0, hyp.momentum, wd, NULL),
         "the rank's optimizer");
    yc_verbosity = verbosity;
    for (int k = 0; k < STEPS; k++) {
        fill_images(images, (size_t)global, 1000 + (uint64_t)k);
        /* one process: the global batch as micro-batches of RB, accumulated */
        need(yc_model_zero_grad(ref), "zeroing the reference's gradients");
        for (int first = 0; first < global; first += RB)
            half_step(sref, images, targets, nt, first, RB);
        need(yc_optim_step(oref, 10.0), "the reference's optimizer step");
        /* this rank: its RB images, the gradients summed over the ranks, its own step */
        need(yc_model_zero_grad(dm), "zeroing the rank's gradients");
        half_step(sdm, images, targets, nt, rank * RB, RB);
        need(yc_dist_allreduce_grads(dm), "yc_dist_allreduce_grads");
        need(yc_optim_step(odm, 10.0), "the rank's optimizer step");
        need(be->iface->synchronize(be), "the steps");
        need(yc_optim_step_done(oref), "the reference's step");
        need(yc_optim_step_done(odm), "the rank's step");
    }
    float *wr = read_arena(ref, ref->param_buf, np), *wd_ = read_arena(dm, dm->param_buf, np);
    /* the change the steps made, and how far the ranks' is from the one process's */
    double moved = 0, err = 0;
    size_t worst = 0;
    for (size_t i = 0; i < np; i++) {
        moved = fmax(moved, fabs((double)wr[i] - w0[i]));
        double d = fabs((double)wd_[i] - wr[i]);
        if (d > err) {
            err = d;
            worst = i;
        }
    }
    CHECK(moved > 0 && isfinite(moved), "%d optimizer steps did not change the weights",
          STEPS);
    CHECK(err <= 1e-4 * moved, "after %d steps the ranks' weights differ from one process's by "
          "%g at %zu (%.9g vs %.9g; largest change %g)", STEPS, err, worst, wd_[worst],
          wr[worst], moved);
    CHECK(yc_dist_check_weights(dm, STEPS) == YC_OK, "the ranks' weights: %s", yc_last_error());
    printf("rank %d: %d optimizer steps, %d ranks x batch %d vs 1 process accumulating %d x %d: "
           "max |diff| %.3g (largest change %.3g)\n", rank, STEPS, n, RB, n, RB, err, moved);
    free(w0);
    free(wr);
    free(wd_);
    free(images);
    yc_optim_free(oref);
    yc_optim_free(odm);
    yc_step_free(sref);
    yc_step_free(sdm);
    yc_model_free(ref);
    yc_model_free(dm);
}

/* Where the progress callback raises SIGINT, on one rank only, as a signal reaching one rank. */
typedef struct interrupt_at {
    int rank, epoch, batch;
} interrupt_at;

static void interrupt_cb(void *ctx, int epoch, int batch, double loss)
{
    (void)loss;
    const interrupt_at *at = ctx;
    if (yc_dist_rank() == at->rank && epoch == at->epoch && batch == at->batch)
        raise(SIGINT);
}

/* yc_train of the tiny model on `data` (4 epochs of 2 batches per rank at global batch 4) into
 * project/name, interrupted at `at` when not NULL; `resume` continues a run instead.  Returns
 * whether the run was interrupted. */
static bool tiny_train(const char *data, const char *project, const char *name,
                       const interrupt_at *at, const char *resume)
{
    const char *dir = getenv("YOLOCL_TEST_DATA");
    char cfg[1024], weights[1024];
    snprintf(cfg, sizeof cfg, "%s/tiny/yolov5n-tiny.yaml", dir ? dir : "tests/data");
    snprintf(weights, sizeof weights, "%s/tiny/weights.safetensors", dir ? dir : "tests/data");
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    if (!resume) {
        o.data = data;
        o.cfg = cfg;
        o.weights = weights;
        o.epochs = 4;
        o.batch = 4;
        o.imgsz = 64;
        o.noplots = true;
        o.noautoanchor = true;
        o.exist_ok = true;
        o.project = project;
        o.name = name;
        o.seed = 3;
    }
    o.device = "cpu";
    o.threads = 1;
    o.workers = 1;
    o.resume = resume;
    o.progress = at ? interrupt_cb : NULL;
    o.progress_ctx = (void *)at;
    bool interrupted = false;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    int st = yc_train(&o, &interrupted);
    yc_verbosity = verbosity;
    char what[256];
    snprintf(what, sizeof what, "training %s%s", name, resume ? " (resumed)" : "");
    need(st, what);
    return interrupted;
}

/* The EMA weights a run ended with (its final last.safetensors), on `be`. */
static float *final_weights(yc_backend *be, const char *project, const char *name, size_t *np)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s/weights/last.safetensors", project, name);
    yc_model *m = tiny_model(be, 1);
    need(yc_checkpoint_load_weights(path, m), path);
    *np = m->param_elems;
    float *w = read_arena(m, m->param_buf, *np);
    yc_model_free(m);
    return w;
}

static void test_resume(yc_backend *be, const char *data, const char *project)
{
    tiny_train(data, project, "straight", NULL, NULL);
    /* 6 images, 3 per rank, 2 batches an epoch: warmup's accumulate is 2 from global batch 4 on,
     * so the optimizer steps after batches 3 and 5 and batch 4 (epoch 2, batch 0) leaves
     * gradients pending */
    interrupt_at at = {1, 2, 0};
    CHECK(tiny_train(data, project, "interrupted", &at, NULL), "the run was not interrupted");
    char last[2100], dir[2048];
    snprintf(dir, sizeof dir, "%s/interrupted", project);
    snprintf(last, sizeof last, "%s/weights/last.safetensors", dir);
    yc_ckpt_meta meta;
    need(yc_checkpoint_read_meta(last, &meta), last);
    int world = 0;
    need(yc_train_saved_world(meta.opt_json, &world), "the checkpoint's world_size");
    CHECK(meta.epoch == 1 && meta.next_batch == 1 && meta.grads && world == 2,
          "interrupted checkpoint: epoch %d, next batch %d, gradients %d, %d ranks; expected 1, "
          "1, 1, 2", meta.epoch, meta.next_batch, meta.grads, world);
    yc_ckpt_meta_free(&meta);
    /* all ranks have read the checkpoint before any resumes (and rewrites it) */
    need(yc_dist_barrier(), "the barrier before resuming");
    CHECK(!tiny_train(data, project, "interrupted", NULL, dir), "the resumed run was interrupted");
    size_t na = 0, nb = 0;
    float *wa = final_weights(be, project, "straight", &na);
    float *wb = final_weights(be, project, "interrupted", &nb);
    double scale = 0, err = 0;
    for (size_t i = 0; i < na && na == nb; i++) {
        scale = fmax(scale, fabs(wa[i]));
        err = fmax(err, fabs((double)wa[i] - wb[i]));
    }
    CHECK(na == nb && scale > 0, "final weights: %zu and %zu parameters", na, nb);
    CHECK(err <= 1e-5 * scale, "the resumed run's final weights differ from the straight run's "
          "by %g (largest weight %g)", err, scale);
    printf("rank %d: 2 ranks interrupted inside an accumulation cycle and resumed on 2 ranks: "
           "final weights within %.3g of the straight run's (largest weight %.3g)\n",
           yc_dist_rank(), err, scale);
    free(wa);
    free(wb);
}

static void test_bcast_model(yc_backend *be)
{
    int rank = yc_dist_rank(), n = yc_dist_size();
    yc_model *m = tiny_model(be, 100 + rank);
    m->anchors[0] = (float)(1 + rank);
    need(yc_dist_bcast_model(m), "yc_dist_bcast_model");
    CHECK(m->anchors[0] == 1.0f, "anchor 0 is %g after the broadcast, rank 0's is 1",
          m->anchors[0]);
    size_t np = m->param_elems;
    float *p = read_arena(m, m->param_buf, np), *q = malloc(np * sizeof *q);
    if (!q)
        yc_dist_abort(1, "out of memory for a copy of the parameters");
    memcpy(q, p, np * sizeof *q);
    /* identical on every rank <=> the sum over the ranks is n times this rank's */
    need(yc_dist_allreduce_sum_f32(q, np), "yc_dist_allreduce_sum_f32");
    size_t differ = 0;
    for (size_t i = 0; i < np; i++)
        differ += q[i] != (float)n * p[i];
    CHECK(differ == 0, "%zu of %zu parameters differ between the ranks after the broadcast",
          differ, np);
    CHECK(yc_dist_check_weights(m, 4) == YC_OK, "identical weights: %s", yc_last_error());
    /* one parameter of the last rank changed: every rank fails, naming the epoch and the rank */
    if (rank == n - 1) {
        p[np / 2] += 1.0f;
        need(m->be->iface->buffer_write(m->be, m->param_buf, 0, p, np * sizeof *p),
             "writing the parameters");
    }
    char expect[128];
    snprintf(expect, sizeof expect, "after epoch 4 the weights of 1 rank differ from rank 0's "
             "(rank %d first", n - 1);
    CHECK(yc_dist_check_weights(m, 4) == YC_ERR && strstr(yc_last_error(), expect),
          "one rank's changed weight: '%s'", yc_last_error());
    free(p);
    free(q);
    yc_model_free(m);
}

static void test_collectives(void)
{
    int rank = yc_dist_rank(), n = yc_dist_size();
    float v[3] = {1.0f, (float)rank, 0.5f};
    need(yc_dist_allreduce_sum_f32(v, 3), "yc_dist_allreduce_sum_f32");
    CHECK(v[0] == (float)n && v[1] == (float)(n * (n - 1) / 2) && v[2] == 0.5f * (float)n,
          "sum: %g %g %g", v[0], v[1], v[2]);
    int flag = rank == n - 1 ? 3 : 0;
    need(yc_dist_allreduce_max_int(&flag), "yc_dist_allreduce_max_int");
    CHECK(flag == 3, "max: %d", flag);
    char text[32];
    snprintf(text, sizeof text, "from rank %d", rank);
    need(yc_dist_bcast(text, sizeof text, 0), "yc_dist_bcast");
    CHECK(strcmp(text, "from rank 0") == 0, "broadcast: '%s'", text);
    need(yc_dist_barrier(), "yc_dist_barrier");
    /* the ranks of one machine (MPI_Comm_split_type SHARED): all of them under a plain mpirun,
     * YOLOCL_TEST_RANKS_PER_HOST of them when bench/mpi_hosts.sh spreads the ranks over hosts
     * (placed by slot: ranks 0 to k - 1 on the first host, and so on) */
    const char *per_env = getenv("YOLOCL_TEST_RANKS_PER_HOST");
    int per = per_env && atoi(per_env) > 0 ? atoi(per_env) : n;
    CHECK(yc_dist_local_rank() == rank % per && yc_dist_local_size() == per,
          "%d rank%s per machine: local rank %d of %d, rank %d of %d", per, per == 1 ? "" : "s",
          yc_dist_local_rank(), yc_dist_local_size(), rank, n);
}

int main(int argc, char **argv)
{
    if (yc_dist_init(&argc, &argv)) {
        fprintf(stderr, "%s\n", yc_last_error());
        return 1;
    }
    if (yc_dist_size() != 2) {
        printf("SKIP: run on 2 MPI ranks (mpirun -np 2), not %d%s\n", yc_dist_size(),
               yc_dist_built() ? "" : " (built without MPI)");
        yc_dist_finalize();
        return 77;
    }
    yc_backend *be = NULL;
    need(yc_device_open("cpu", 1, false, &be), "the CPU backend");
    test_collectives();
    test_bcast_model(be);
    test_gradients(be);
    test_buckets(be);
    test_sync_bn(be);
    /* SyncBatchNorm on the OpenCL backend too (its sums read back between the BN kernels), where
     * this build has OpenCL and a device opens on both ranks */
    yc_backend *cl = NULL;
    int have_cl = yc_device_open("opencl:0", 0, false, &cl) == YC_OK, none = !have_cl;
    need(yc_dist_allreduce_max_int(&none), "agreeing on an OpenCL device");
    if (have_cl && !none) {
        printf("rank %d: SyncBatchNorm on %s\n", yc_dist_rank(), cl->info.name);
        test_sync_bn(cl);
        test_buckets(cl);
    }
    yc_backend_free(cl);
    test_cls_gradients(be);
    test_steps(be);
    if (argc > 2)
        test_resume(be, argv[1], argv[2]);
    yc_backend_free(be);
    /* every rank's verdict */
    int failed = failures > 0;
    need(yc_dist_allreduce_max_int(&failed), "collecting the verdicts");
    if (yc_dist_rank() == 0)
        printf("%s\n", failed ? "FAIL" : "PASS: 2 ranks");
    yc_dist_finalize();
    return failed ? 1 : 0;
}
