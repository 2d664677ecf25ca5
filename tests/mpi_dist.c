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
 *  - the small collectives: sum, max, broadcast, barrier.
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

/* Pseudo-random pixels in [0, 1) for n images, from `seed`. */
static void fill_images(float *images, size_t n, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n * 3 * S * S; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (float)(x >> 40) / (float)(1ull << 24);
    }
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
