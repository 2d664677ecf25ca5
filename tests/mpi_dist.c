/* Data-parallel training on MPI (src/train/dist.c), run by tests/test_mpi.sh as
 * `mpirun -np 2 tests/mpi_dist` (a plain program, not Check: MPI ranks must not fork).
 *
 *  - the gradients: each rank runs one training step of the tiny YOLOv5 on its half of a batch of
 *    4 images and the ranks sum their gradients (yc_dist_allreduce_grads, what yc_train does
 *    before each optimizer step); the sum must equal, within float reduction-order tolerance, the
 *    gradient one process accumulates over the same two half-batches run one after the other
 *    (and must differ from the rank's own half's);
 *  - the weights: ranks initialised from different seeds hold rank 0's parameters, statistics
 *    and anchors after yc_dist_bcast_model, and yc_dist_check_weights passes, then fails on
 *    every rank, naming the epoch and the rank, once one parameter of one rank changes;
 *  - the small collectives: sum, max, broadcast, barrier.
 *
 * Exits 0 when every check passes, 1 otherwise, 77 when not run on exactly 2 ranks of an MPI
 * build. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "dist.h"
#include "harness.h"
#include "hyp.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "step.h"
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
    CHECK(yc_dist_local_rank() == rank && yc_dist_local_size() == n,
          "one machine: local rank %d of %d, rank %d of %d", yc_dist_local_rank(),
          yc_dist_local_size(), rank, n);
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
    yc_backend_free(be);
    /* every rank's verdict */
    int failed = failures > 0;
    need(yc_dist_allreduce_max_int(&failed), "collecting the verdicts");
    if (yc_dist_rank() == 0)
        printf("%s\n", failed ? "FAIL" : "PASS: 2 ranks");
    yc_dist_finalize();
    return failed ? 1 : 0;
}
