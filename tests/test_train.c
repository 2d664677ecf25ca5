/* The trainer: YOLOv5's schedule, warmup, accumulation and EMA formulas (docs/YOLOV5.md 3.1-3.3),
 * optimizer groups, checkpoints, reproducible data, micro-batches that add up to their batch,
 * resume equivalence (at epoch boundaries and after Ctrl-C inside an epoch, for runs started from
 * an Ultralytics .pt alone, a config and weights, scratch, and tiles) and a short training whose
 * loss falls, on a small generated demo dataset. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dataset.h"
#include "demo.h"
#include "device.h"
#include "ema.h"
#include "hyp.h"
#include "loader.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "safetensors.h"
#include "step.h"
#include "train.h"
#include "train_opts.h"
#include "util.h"
#include "harness.h"

/* the scratch directory, made with the demo dataset by make_demo */
static const char *tmpdir;
static char demo_yaml[512];

/* A small demo dataset (16 training and 8 validation images of 64-96 px), made once. */
static void make_demo(void)
{
    if (demo_yaml[0])
        return;
    ck_assert_ptr_nonnull(tmpdir = yc_harness_tmpdir_make("train"));
    const char *dir = yc_harness_tmp("demo");
    ck_assert_msg(yc_harness_demo(dir, NULL, demo_yaml, sizeof demo_yaml) == YC_OK, "%s",
                  yc_last_error());
}

/* The tiny YOLOv5 with 4 classes, seed 1, on the CPU backend opened into *be. */
static yc_model *tiny_model(yc_backend **be)
{
    yc_harness_cpu(be, 0);
    return yc_harness_tiny_model(*be, 4, 1);
}

/* ---- formulas ----------------------------------------------------------------------------- */

START_TEST(schedule_and_warmup_follow_yolov5)
{
    /* lf: linear (1 - e/E)(1 - lrf) + lrf; one_cycle ((1 - cos(e pi / E)) / 2)(lrf - 1) + 1 */
    ck_assert(fabs(yc_lr_factor(0, 100, 0.01, false) - 1.0) < 1e-12);
    ck_assert(fabs(yc_lr_factor(50, 100, 0.01, false) - 0.505) < 1e-12);
    ck_assert(fabs(yc_lr_factor(99, 100, 0.01, false) - 0.0199) < 1e-12);
    ck_assert(fabs(yc_lr_factor(50, 100, 0.1, true) - 0.55) < 1e-12);
    ck_assert(fabs(yc_lr_factor(0, 100, 0.1, true) - 1.0) < 1e-12);
    /* round half to even, as Python and numpy */
    ck_assert(yc_round_half_even(2.5) == 2.0 && yc_round_half_even(3.5) == 4.0);
    ck_assert(yc_round_half_even(-0.5) == 0.0 && yc_round_half_even(2.6) == 3.0);
    ck_assert(yc_np_interp(-1, 0, 100, 1, 4) == 1 && yc_np_interp(150, 0, 100, 1, 4) == 4);

    yc_backend *be = NULL;
    yc_model *m = tiny_model(&be);
    yc_optim *o = NULL;
    ck_assert_int_eq(yc_optim_new(&o, m, YC_OPTIM_SGD, 0.01, 0.937, 5e-4, NULL), YC_OK);
    /* decay only on group 1 (conv weights); every group starts at lr0 */
    ck_assert(o->wd[YC_PG_WEIGHT] == 5e-4 && o->wd[YC_PG_BIAS] == 0 && o->wd[YC_PG_BN_WEIGHT] == 0);
    double lf = 0.9;
    /* ni = 0: bias lr 0.1 (warmup_bias_lr), others 0, momentum 0.8, accumulate 1 */
    int acc = yc_optim_warmup(o, 0, 100, lf, 0.1, 0.8, 0.937, 64.0 / 16);
    ck_assert_int_eq(acc, 1);
    ck_assert(fabs(o->lr[YC_PG_BIAS] - 0.1) < 1e-15 && o->lr[YC_PG_WEIGHT] == 0);
    ck_assert(fabs(o->momentum[YC_PG_WEIGHT] - 0.8) < 1e-15);
    /* ni = 50 of 100: halfway; accumulate round(2.5) = 2 */
    acc = yc_optim_warmup(o, 50, 100, lf, 0.1, 0.8, 0.937, 64.0 / 16);
    ck_assert_int_eq(acc, 2);
    ck_assert(fabs(o->lr[YC_PG_BIAS] - (0.1 + 0.5 * (0.009 - 0.1))) < 1e-15);
    ck_assert(fabs(o->lr[YC_PG_WEIGHT] - 0.0045) < 1e-15);
    ck_assert(fabs(o->momentum[YC_PG_BN_WEIGHT] - 0.8685) < 1e-12);
    /* ni = nw: the targets; accumulate 64 / 16 = 4 */
    acc = yc_optim_warmup(o, 100, 100, lf, 0.1, 0.8, 0.937, 64.0 / 16);
    ck_assert_int_eq(acc, 4);
    for (int g = 0; g < YC_PG_COUNT; g++) {
        ck_assert(fabs(o->lr[g] - 0.009) < 1e-15);
        ck_assert(fabs(o->momentum[g] - 0.937) < 1e-15);
    }
    /* accumulate for other batch sizes: 24 -> 3, 128 -> 1 (max with 1), 1 -> 64 */
    ck_assert_int_eq(yc_optim_warmup(o, 100, 100, lf, 0.1, 0.8, 0.937, 64.0 / 24), 3);
    ck_assert_int_eq(yc_optim_warmup(o, 100, 100, lf, 0.1, 0.8, 0.937, 64.0 / 128), 1);
    ck_assert_int_eq(yc_optim_warmup(o, 100, 100, lf, 0.1, 0.8, 0.937, 64.0 / 1), 64);
    yc_optim_set_lf(o, 0.5);
    ck_assert(fabs(o->lr[YC_PG_BIAS] - 0.005) < 1e-15);
    yc_optim_free(o);

    /* EMA decay 0.9999 (1 - exp(-u / 2000)): d(1) = 5.0e-4, d(2000) = 0.632, d(10000) = 0.9932 */
    ck_assert(fabs(yc_ema_decay(1) - 4.998250e-4) < 1e-9);
    ck_assert(fabs(yc_ema_decay(2000) - 0.632057) < 1e-6);
    ck_assert(fabs(yc_ema_decay(10000) - 0.993163) < 1e-6);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

/* Frozen layers leave the optimizer's ranges; a step changes only trainable parameters, and a
 * step with clipping scales the gradient to norm 10. */
START_TEST(optimizer_groups_freeze_and_clip)
{
    yc_backend *be = NULL;
    yc_model *m = tiny_model(&be);
    bool *frozen = calloc((size_t)m->cfg->nlayers, sizeof *frozen);
    frozen[0] = frozen[1] = true;
    yc_optim *o = NULL;
    ck_assert_int_eq(yc_optim_new(&o, m, YC_OPTIM_SGD, 0.01, 0.9, 5e-4, frozen), YC_OK);
    size_t trainable = 0, frozen_elems = 0;
    for (int r = 0; r < o->nranges; r++)
        trainable += o->ranges[r].count;
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].layer < 2)
            frozen_elems += m->params[i].numel;
    ck_assert_uint_eq(trainable + frozen_elems, m->param_elems);

    float *w0 = malloc(m->param_elems * sizeof *w0), *w1 = malloc(m->param_elems * sizeof *w1);
    float *g = malloc(m->param_elems * sizeof *g);
    ck_assert_int_eq(be->iface->buffer_read(be, m->param_buf, 0, w0, m->param_elems * 4), YC_OK);
    /* gradient of all ones: norm sqrt(trainable) over the trainable part */
    for (size_t i = 0; i < m->param_elems; i++)
        g[i] = 1.0f;
    ck_assert_int_eq(be->iface->buffer_write(be, m->grad_buf, 0, g, m->param_elems * 4), YC_OK);
    ck_assert_int_eq(yc_optim_step(o, 10.0), YC_OK);
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    ck_assert_int_eq(yc_optim_step_done(o), YC_OK);
    ck_assert(fabs(o->last_grad_norm - sqrt((double)trainable)) < 1e-3 * sqrt((double)trainable));
    ck_assert_int_eq(be->iface->buffer_read(be, m->param_buf, 0, w1, m->param_elems * 4), YC_OK);
    double scale = 10.0 / (sqrt((double)trainable) + 1e-6);
    for (int i = 0; i < m->nparams; i++) {
        const yc_param *p = &m->params[i];
        for (size_t j = 0; j < p->numel; j++) {
            size_t k = p->offset + j;
            if (p->layer < 2) {
                ck_assert_msg(w1[k] == w0[k], "frozen %s changed", p->name);
                continue;
            }
            /* first Nesterov step: g' = s + wd w; buf = g'; w -= lr (g' + 0.9 g') */
            double gg = scale + (p->group == YC_PG_WEIGHT ? 5e-4 * w0[k] : 0.0);
            double want = w0[k] - 0.01 * (gg + 0.9 * gg);
            ck_assert_msg(fabs(w1[k] - want) < 1e-6, "%s[%zu]: %g, want %g", p->name, j,
                          (double)w1[k], want);
        }
    }
    /* a non-finite gradient: the step leaves the weights as they were, and says so */
    g[m->param_elems - 1] = NAN; /* the last BN weight: trainable */
    ck_assert_int_eq(be->iface->buffer_write(be, m->grad_buf, 0, g, m->param_elems * 4), YC_OK);
    ck_assert_int_eq(yc_optim_step(o, 10.0), YC_OK);
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    ck_assert_int_ne(yc_optim_step_done(o), YC_OK);
    ck_assert(strstr(yc_last_error(), "not finite"));
    ck_assert_int_eq(be->iface->buffer_read(be, m->param_buf, 0, w0, m->param_elems * 4), YC_OK);
    ck_assert_msg(memcmp(w0, w1, m->param_elems * 4) == 0, "a non-finite step changed weights");
    free(w0);
    free(w1);
    free(g);
    free(frozen);
    yc_optim_free(o);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

/* A checkpoint restores model, EMA and optimizer state exactly. */
START_TEST(checkpoint_round_trip)
{
    make_demo();
    yc_backend *be = NULL;
    yc_model *m = tiny_model(&be);
    yc_optim *o = NULL;
    yc_ema *e = NULL;
    ck_assert_int_eq(yc_optim_new(&o, m, YC_OPTIM_ADAM, 0.001, 0.9, 1e-4, NULL), YC_OK);
    float *g = malloc(m->param_elems * sizeof *g);
    for (size_t i = 0; i < m->param_elems; i++)
        g[i] = (float)sin((double)i);
    ck_assert_int_eq(be->iface->buffer_write(be, m->grad_buf, 0, g, m->param_elems * 4), YC_OK);
    ck_assert_int_eq(yc_ema_new(&e, m, 0), YC_OK);
    ck_assert_int_eq(yc_optim_step(o, 10.0), YC_OK);
    ck_assert_int_eq(yc_ema_update(e, m), YC_OK);
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    ck_assert_int_eq(yc_optim_step_done(o), YC_OK);
    m->num_batches[3] = 42;
    char path[512];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", tmpdir);
    yc_ckpt_meta meta = {.epoch = 3, .next_batch = 2, .best_fitness = 0.25, .updates = 1,
                         .last_opt_step = 77, .names_json = "[\"a\", \"b\", \"c\", \"d\"]",
                         .opt_json = "{\"epochs\": 5}", .hyp_json = "{\"lr0\": 0.01}"};
    ck_assert_msg(yc_checkpoint_save(path, e->ema, m, o, &meta) == YC_OK, "%s", yc_last_error());

    yc_backend *be2 = NULL;
    yc_model *m2 = tiny_model(&be2);
    yc_optim *o2 = NULL;
    yc_ema *e2 = NULL;
    ck_assert_int_eq(yc_optim_new(&o2, m2, YC_OPTIM_ADAM, 0.001, 0.9, 1e-4, NULL), YC_OK);
    ck_assert_int_eq(yc_ema_new(&e2, m2, 1), YC_OK);
    ck_assert_msg(yc_checkpoint_load_train_state(path, m2, e2->ema, o2) == YC_OK, "%s",
                  yc_last_error());
    yc_ckpt_meta back;
    ck_assert_int_eq(yc_checkpoint_read_meta(path, &back), YC_OK);
    ck_assert_int_eq(back.epoch, 3);
    ck_assert_int_eq(back.next_batch, 2);
    ck_assert(back.best_fitness == 0.25);
    ck_assert_int_eq((int)back.last_opt_step, 77);
    ck_assert_int_eq((int)back.optim_steps, 1);
    ck_assert_str_eq(back.opt_json, "{\"epochs\": 5}");
    yc_ckpt_meta_free(&back);
    ck_assert_int_eq((int)o2->steps, 1);
    ck_assert_int_eq((int)m2->num_batches[3], 42);
    size_t bytes = m->param_elems * 4;
    float *a = malloc(bytes), *b = malloc(bytes);
    yc_buffer *pairs[4][2] = {{m->param_buf, m2->param_buf},
                              {e->ema->param_buf, e2->ema->param_buf},
                              {o->buf1, o2->buf1},
                              {o->buf2, o2->buf2}};
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(be->iface->buffer_read(be, pairs[k][0], 0, a, bytes), YC_OK);
        ck_assert_int_eq(be2->iface->buffer_read(be2, pairs[k][1], 0, b, bytes), YC_OK);
        ck_assert_msg(memcmp(a, b, bytes) == 0, "buffer %d differs after the round trip", k);
    }
    /* the file is a valid safetensors whose YOLOv5-named tensors are the EMA weights */
    yc_st_file *f = NULL;
    ck_assert_int_eq(yc_st_open(&f, path), YC_OK);
    ck_assert_ptr_nonnull(yc_st_find(f, "model.0.conv.weight"));
    ck_assert_ptr_nonnull(yc_st_find(f, "resume.model.model.0.conv.weight"));
    ck_assert_ptr_nonnull(yc_st_find(f, "resume.optim.exp_avg_sq.model.0.conv.weight"));
    ck_assert_str_eq(yc_st_meta(f, "format"), "yolocl-1");
    yc_st_close(f);
    free(a);
    free(b);
    free(g);
    yc_optim_free(o);
    yc_optim_free(o2);
    yc_ema_free(e);
    yc_ema_free(e2);
    yc_model_free(m);
    yc_model_free(m2);
    yc_backend_free(be);
    yc_backend_free(be2);
}
END_TEST

/* Same seed: identical batches whatever the thread count; another seed: different ones. */
START_TEST(loader_is_reproducible)
{
    make_demo();
    yc_data_yaml y;
    yc_dataset ds;
    ck_assert_int_eq(yc_data_yaml_load(demo_yaml, &y), YC_OK);
    yc_dataset_options dopt = {.nc = y.nc, .quiet = true, .no_cache = true};
    ck_assert_int_eq(yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &dopt, &ds), YC_OK);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    hyp.mixup = 0.5;
    uint8_t *first = NULL;
    size_t bytes = 0;
    float firsttargets[6 * 64];
    int nt0 = 0;
    const int workers[3] = {1, 3, 2};
    const uint64_t seeds[3] = {5, 5, 6};
    for (int run = 0; run < 3; run++) {
        yc_loader *l = NULL;
        yc_loader_options lo = {.ds = &ds, .train = true, .hyp = &hyp, .imgsz = 64, .batch = 4,
                                .stride = 32, .workers = workers[run], .seed = seeds[run]};
        ck_assert_int_eq(yc_loader_new(&l, &lo), YC_OK);
        ck_assert_int_eq(yc_loader_start(l, 3, NULL, 0), YC_OK);
        const yc_batch *b = NULL;
        ck_assert_int_eq(yc_loader_next(l, &b), YC_OK);
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(b->n, 4);
        size_t n = (size_t)b->n * 3 * 64 * 64;
        if (run == 0) {
            bytes = n;
            first = malloc(n);
            memcpy(first, b->images, n);
            nt0 = b->nt < 64 ? b->nt : 64;
            memcpy(firsttargets, b->targets, (size_t)nt0 * 6 * sizeof(float));
        } else if (run == 1) {
            ck_assert_int_eq(b->nt < 64 ? b->nt : 64, nt0);
            ck_assert_msg(memcmp(first, b->images, bytes) == 0, "same seed, different pixels");
            ck_assert(memcmp(firsttargets, b->targets, (size_t)nt0 * 6 * sizeof(float)) == 0);
        } else {
            ck_assert_msg(memcmp(first, b->images, bytes) != 0, "another seed, same pixels");
        }
        /* the whole epoch arrives in order and then ends */
        int count = 1;
        while (yc_loader_next(l, &b) == YC_OK && b)
            ck_assert_int_eq(b->index, count++);
        ck_assert_int_eq(count, yc_loader_nbatches(l));
        yc_loader_free(l);
    }
    free(first);
    yc_dataset_free(&ds);
    yc_data_yaml_free(&y);
}
END_TEST

/* Training across ranks (loader.h: rank, world): each rank's shard is DistributedSampler's over
 * the same shuffled epoch order as one process's, padded with the order's first samples; rank 0
 * augments as one process does; rect batches are refused. */
START_TEST(loader_shards_follow_distributed_sampler)
{
    make_demo();
    yc_data_yaml y;
    yc_dataset ds;
    ck_assert_int_eq(yc_data_yaml_load(demo_yaml, &y), YC_OK);
    yc_dataset_options dopt = {.nc = y.nc, .quiet = true, .no_cache = true};
    ck_assert_int_eq(yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &dopt, &ds), YC_OK);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    /* a rank count that does not divide the images, so that the shards are padded */
    int n = (int)ds.n, world = 2;
    while (world < n && n % world == 0)
        world++;
    ck_assert_msg(world < n && n % world != 0, "%d images: no padded split for this test", n);
    int per = (n + world - 1) / world;
    int *order = malloc((size_t)n * sizeof *order);
    uint8_t *pixels[2] = {NULL, NULL};
    size_t img = 3 * 64 * 64;
    ck_assert_ptr_nonnull(order);
    /* rank -1: one process */
    for (int rank = -1; rank < world; rank++) {
        yc_loader *l = NULL;
        yc_loader_options lo = {.ds = &ds, .train = true, .hyp = &hyp, .imgsz = 64, .batch = 1,
                                .stride = 32, .workers = 2, .seed = 9,
                                .rank = rank < 0 ? 0 : rank, .world = rank < 0 ? 1 : world};
        ck_assert_int_eq(yc_loader_new(&l, &lo), YC_OK);
        ck_assert_int_eq(yc_loader_nbatches(l), rank < 0 ? n : per);
        ck_assert_int_eq(yc_loader_start(l, 2, NULL, 0), YC_OK);
        const yc_batch *b = NULL;
        for (int i = 0; yc_loader_next(l, &b) == YC_OK && b; i++) {
            ck_assert_int_eq(b->n, 1);
            if (rank < 0) {
                order[i] = b->sample[0];
                if (i == 0) {
                    pixels[0] = malloc(img);
                    memcpy(pixels[0], b->images, img);
                }
                continue;
            }
            int expect = order[(rank + i * world) % n];
            ck_assert_msg(b->sample[0] == expect, "rank %d of %d, position %d: sample %d, "
                          "DistributedSampler's is %d", rank, world, i, b->sample[0], expect);
            if (i == 0 && rank == 0) {
                pixels[1] = malloc(img);
                memcpy(pixels[1], b->images, img);
            }
        }
        yc_loader_free(l);
    }
    /* rank 0's first sample is one process's first, augmented alike */
    ck_assert_msg(memcmp(pixels[0], pixels[1], img) == 0, "rank 0 augments differently");
    yc_loader *l = NULL;
    yc_loader_options lo = {.ds = &ds, .train = true, .hyp = &hyp, .imgsz = 64, .batch = 1,
                            .stride = 32, .workers = 1, .seed = 9, .rect = true, .rank = 1,
                            .world = 2};
    ck_assert_int_eq(yc_loader_new(&l, &lo), YC_EUSAGE);
    ck_assert_ptr_null(l);
    for (int i = 0; i < 2; i++)
        free(pixels[i]);
    free(order);
    yc_dataset_free(&ds);
    yc_data_yaml_free(&y);
}
END_TEST

/* ---- whole runs ------------------------------------------------------------------------------ */

/* A training of yolov5n on the demo data; tile > 0 trains on tiles (tiles_per_epoch of them). */
static void run_training_tiled(const char *name, int epochs, const char *resume, int tile,
                               int tiles_per_epoch)
{
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    o.data = demo_yaml;
    o.cfg = "yolov5n";
    o.epochs = epochs;
    o.batch = 4;
    o.imgsz = 64;
    o.workers = 2;
    o.noplots = true;
    o.exist_ok = true;
    o.project = tmpdir;
    o.name = name;
    o.seed = 1;
    o.save_period = 1;
    o.resume = resume;
    o.tile = tile;
    o.tiles_per_epoch = tiles_per_epoch;
    bool interrupted = false;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    int st = yc_train(&o, &interrupted);
    yc_verbosity = verbosity;
    ck_assert_msg(st == YC_OK, "training %s: %s", name, yc_last_error());
    ck_assert(!interrupted);
}

static float *read_all(const char *path, size_t *total)
{
    yc_st_file *f = NULL;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    size_t n = 0;
    for (int i = 0; i < yc_st_count(f); i++)
        n += yc_st_get(f, i)->numel;
    float *v = malloc((n + 1) * sizeof *v);
    size_t off = 0;
    for (int i = 0; i < yc_st_count(f); i++) {
        const yc_st_tensor *t = yc_st_get(f, i);
        ck_assert_int_eq(yc_st_read_f32(f, t, v + off, t->numel), YC_OK);
        off += t->numel;
    }
    yc_st_close(f);
    *total = n;
    return v;
}

/* Train loss of every epoch from a results.csv. */
static int read_train_losses(const char *csv, double *loss, int max)
{
    FILE *f = fopen(csv, "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    int n = 0;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    while (n < max && fgets(line, sizeof line, f)) {
        double e, box, obj, cls;
        ck_assert_int_eq(sscanf(line, "%lf ,%lf ,%lf ,%lf", &e, &box, &obj, &cls), 4);
        ck_assert_int_eq((int)e, n);
        loss[n++] = box + obj + cls;
    }
    fclose(f);
    return n;
}

/* `epochs` epochs straight == the same run resumed from its epoch-1 checkpoint: bit-identical
 * final weights and results.csv (tile, tiles_per_epoch as run_training_tiled; the resumed run
 * takes them from the checkpoint, so it is given none). */
static void check_resume(const char *name, int epochs, int tile, int tiles_per_epoch)
{
    make_demo();
    char sname[64], rname[64];
    snprintf(sname, sizeof sname, "%s_straight", name);
    snprintf(rname, sizeof rname, "%s_resumed", name);
    run_training_tiled(sname, epochs, NULL, tile, tiles_per_epoch);
    char a[600], b[600], cmd[4096];
    snprintf(a, sizeof a, "%s/%s", tmpdir, sname);
    snprintf(b, sizeof b, "%s/%s", tmpdir, rname);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && rm -f '%s/weights/last.safetensors' "
             "'%s/weights/best.safetensors' '%s'/weights/epoch[2-9].safetensors", a, b, b, b, b);
    ck_assert_int_eq(system(cmd), 0);
    char ckpt[700];
    snprintf(ckpt, sizeof ckpt, "%s/weights/epoch1.safetensors", b);
    run_training_tiled(rname, epochs, ckpt, -1, 0);

    char fa[700], fb[700];
    snprintf(fa, sizeof fa, "%s/weights/last.safetensors", a);
    snprintf(fb, sizeof fb, "%s/weights/last.safetensors", b);
    size_t na, nb;
    float *wa = read_all(fa, &na), *wb = read_all(fb, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_msg(memcmp(wa, wb, na * sizeof *wa) == 0, "resumed weights differ from the straight "
                  "run's");
    free(wa);
    free(wb);
    double la[8], lb[8];
    snprintf(fa, sizeof fa, "%s/results.csv", a);
    snprintf(fb, sizeof fb, "%s/results.csv", b);
    int ea = read_train_losses(fa, la, 8), eb = read_train_losses(fb, lb, 8);
    ck_assert_int_eq(ea, epochs);
    ck_assert_int_eq(eb, epochs);
    for (int i = 0; i < epochs; i++)
        ck_assert_msg(la[i] == lb[i], "epoch %d: loss %g straight, %g resumed", i, la[i], lb[i]);
}

/* 4 epochs straight == the same run resumed from its epoch-1 checkpoint. */
START_TEST(resume_equals_straight_run)
{
    check_resume("whole", 4, 0, 0);
}
END_TEST

/* The same with tiles (issue 7): 48-pixel windows of the 64-96 pixel demo images, 16 of them per
 * epoch; the resumed run restores the tile options from the checkpoint. */
START_TEST(tiled_resume_equals_straight_run)
{
    check_resume("tiled", 3, 48, 16);
}
END_TEST

/* ---- resume after an interruption inside an epoch ------------------------------------------- */

/* Where the progress callback raises SIGINT, as Ctrl-C would. */
typedef struct interrupt_at {
    int epoch, batch;
} interrupt_at;

static void interrupt_cb(void *ctx, int epoch, int batch, double loss)
{
    (void)loss;
    const interrupt_at *at = ctx;
    if (epoch == at->epoch && batch == at->batch)
        raise(SIGINT);
}

/* A 3-epoch training of the tiny model on the demo data at 64, batch 4: cfg and weights as
 * given (NULL: none), tiles of `tile` (16 per epoch) when tile > 0; interrupted at `at` when it
 * is not NULL; `resume` continues a run (the other options then come from its checkpoint). */
static bool tiny_run(const char *name, const char *cfg, const char *weights, int tile,
                     const interrupt_at *at, const char *resume)
{
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    if (!resume) {
        o.data = demo_yaml;
        o.cfg = cfg;
        o.weights = weights;
        o.epochs = 3;
        o.batch = 4;
        o.imgsz = 64;
        o.noplots = true;
        o.exist_ok = true;
        o.project = tmpdir;
        o.name = name;
        o.seed = 2;
        o.tile = tile;
        o.tiles_per_epoch = tile > 0 ? 16 : 0;
    }
    o.workers = 2;
    o.resume = resume;
    o.progress = at ? interrupt_cb : NULL;
    o.progress_ctx = (void *)at;
    bool interrupted = false;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    int st = yc_train(&o, &interrupted);
    yc_verbosity = verbosity;
    ck_assert_msg(st == YC_OK, "training %s: %s", name, yc_last_error());
    return interrupted;
}

/* The run straight, and the same run interrupted at epoch 1, batch `batch` then resumed with
 * --resume alone (its weights file deleted first): the same final weights, bit for bit, and the
 * same results.csv, byte for byte (the interrupted epoch's training losses included).  With 4
 * batches an epoch, warmup's accumulate of 2 steps the optimizer after batches 1 and 3 of epoch
 * 1: interrupted at batch 2 the checkpoint holds batch 2's gradients, at batch 3 none (and no
 * batch of the epoch is left). */
static void check_resume_inside(const char *name, const char *cfg, const char *weights, int tile,
                                int batch)
{
    make_demo();
    char sname[64], iname[64], wcopy[700] = "", cmd[2048];
    snprintf(sname, sizeof sname, "%s_straight", name);
    snprintf(iname, sizeof iname, "%s_interrupted", name);
    tiny_run(sname, cfg, weights, tile, NULL, NULL);
    if (weights) {
        /* a copy that is gone when the run resumes */
        snprintf(wcopy, sizeof wcopy, "%s/%s_%s", tmpdir, name, yc_path_basename(weights));
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", weights, wcopy);
        ck_assert_int_eq(system(cmd), 0);
    }
    interrupt_at at = {1, batch};
    ck_assert_msg(tiny_run(iname, cfg, weights ? wcopy : NULL, tile, &at, NULL),
                  "%s: the run was not interrupted", name);
    char dir[700], last[800];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, iname);
    snprintf(last, sizeof last, "%s/weights/last.safetensors", dir);
    yc_ckpt_meta meta;
    ck_assert_int_eq(yc_checkpoint_read_meta(last, &meta), YC_OK);
    ck_assert_int_eq(meta.epoch, 0);
    ck_assert_msg(meta.next_batch == batch + 1 && meta.epoch_batches == batch + 1,
                  "%s: continues at batch %d with %d batches' losses, not %d", name,
                  meta.next_batch, meta.epoch_batches, batch + 1);
    ck_assert_msg(meta.grads == (batch == 2), "%s: gradients saved: %d", name, meta.grads);
    yc_ckpt_meta_free(&meta);
    if (wcopy[0])
        ck_assert_int_eq(unlink(wcopy), 0);
    ck_assert(!tiny_run(iname, NULL, NULL, 0, NULL, dir));

    char fa[800], fb[800];
    snprintf(fa, sizeof fa, "%s/%s/weights/last.safetensors", tmpdir, sname);
    size_t na, nb;
    float *wa = read_all(fa, &na), *wb = read_all(last, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_msg(memcmp(wa, wb, na * sizeof *wa) == 0, "%s: resumed weights differ from the "
                  "straight run's", name);
    free(wa);
    free(wb);
    snprintf(fa, sizeof fa, "%s/%s/results.csv", tmpdir, sname);
    snprintf(fb, sizeof fb, "%s/results.csv", dir);
    size_t la, lb;
    char *ca = yc_harness_read(fa, &la), *cb = yc_harness_read(fb, &lb);
    ck_assert_msg(la == lb && memcmp(ca, cb, la) == 0, "%s: results.csv differs:\n%s\nresumed:\n%s",
                  name, ca, cb);
    free(ca);
    free(cb);
}

static const char *tiny_file(const char *file, char *buf, size_t len)
{
    snprintf(buf, len, "%s", yc_harness_test_data("tiny/%s", file));
    return buf;
}

/* (a) fine-tuned from an Ultralytics .pt given alone (--weights, no --cfg) */
START_TEST(resume_inside_epoch_from_pt)
{
    char pt[1024];
    check_resume_inside("pt", NULL, tiny_file("yolov5n-tiny.pt", pt, sizeof pt), 0, 2);
}
END_TEST

/* (b) a config and weights */
START_TEST(resume_inside_epoch_cfg_and_weights)
{
    char cfg[1024], w[1024];
    check_resume_inside("cfgw", tiny_file("yolov5n-tiny.yaml", cfg, sizeof cfg),
                        tiny_file("weights.safetensors", w, sizeof w), 0, 2);
}
END_TEST

/* (c) from scratch, interrupted after the epoch's last optimizer step; (d) on tiles */
START_TEST(resume_inside_epoch_scratch_and_tiles)
{
    char cfg[1024];
    tiny_file("yolov5n-tiny.yaml", cfg, sizeof cfg);
    check_resume_inside("scratch", cfg, NULL, 0, 3);
    check_resume_inside("tiles", cfg, NULL, 48, 2);
}
END_TEST

/* ---- micro-batches ------------------------------------------------------------------------- */

/* A batch run whole and the same batch run as micro-batches of 4 and 2 through
 * yc_step_batch_part and yc_micro_targets, as the trainer runs a batch the memory fit cuts: the
 * same loss and the same gradient for every parameter.  All six images are the same picture, so
 * BatchNorm's batch statistics are the same over any of them (the one thing micro-batches
 * change); their targets differ, so each micro-batch must get its own, renumbered. */
START_TEST(micro_batches_add_up_to_the_batch)
{
    yc_backend *be = NULL;
    yc_model *m = tiny_model(&be);
    enum { B = 6, S = 64 };
    size_t img = 3 * S * S;
    float *images = malloc(B * img * sizeof *images);
    ck_assert_ptr_nonnull(images);
    uint64_t x = 12345;
    for (size_t i = 0; i < img; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (float)(x >> 40) / (float)(1ull << 24);
    }
    for (int b = 1; b < B; b++)
        memcpy(images + b * img, images, img * sizeof *images);
    float targets[6 * 24];
    const int nt = yc_harness_targets(B, targets);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_step_loss_params(m, &hyp, S, 0.0f, &lp);
    float *grads[2];
    yc_loss_result whole, parts = {0};
    for (int run = 0; run < 2; run++) {
        ck_assert_int_eq(yc_model_zero_grad(m), YC_OK);
        if (run == 0) {
            yc_step *s = NULL;
            ck_assert_int_eq(yc_step_new(&s, m, B, S, S, &lp), YC_OK);
            ck_assert_msg(yc_step_run(s, images, targets, nt, &whole) == YC_OK, "%s",
                          yc_last_error());
            yc_step_free(s);
        } else {
            yc_step *s4 = NULL, *s2 = NULL;
            ck_assert_int_eq(yc_step_new(&s4, m, 4, S, S, &lp), YC_OK);
            ck_assert_int_eq(yc_step_new(&s2, m, 2, S, S, &lp), YC_OK);
            yc_loss_part part;
            ck_assert_int_eq(yc_step_batch_part(s4, B, targets, nt, &part), YC_OK);
            ck_assert_int_eq(part.batch, B);
            float mt[6 * 24];
            int counted = 0;
            for (int first = 0; first < B; first += 4) {
                yc_step *s = first == 0 ? s4 : s2;
                int n = first == 0 ? 4 : 2;
                int k = yc_micro_targets(targets, nt, first, n, mt);
                for (int i = 0; i < k; i++)
                    ck_assert(mt[6 * i] >= 0 && mt[6 * i] < (float)n);
                counted += k;
                yc_loss_result r;
                s->part = &part;
                ck_assert_msg(yc_step_run(s, images + first * img, mt, k, &r) == YC_OK, "%s",
                              yc_last_error());
                parts.total += r.total;
                parts.box += r.box;
                parts.obj += r.obj;
                parts.cls += r.cls;
            }
            ck_assert_int_eq(counted, nt);
            yc_step_free(s4);
            yc_step_free(s2);
        }
        grads[run] = malloc(m->param_elems * sizeof(float));
        ck_assert_ptr_nonnull(grads[run]);
        ck_assert_int_eq(be->iface->buffer_read(be, m->grad_buf, 0, grads[run],
                                                m->param_elems * sizeof(float)),
                         YC_OK);
    }
    const double lw[4] = {whole.total, whole.box, whole.obj, whole.cls};
    const double lm[4] = {parts.total, parts.box, parts.obj, parts.cls};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(isfinite(lm[i]) && fabs(lm[i] - lw[i]) <= 1e-5 * fabs(lw[i]),
                      "loss %d: %.9g in micro-batches, %.9g whole", i, lm[i], lw[i]);
    double worst = 0;
    const char *worst_name = "";
    for (int p = 0; p < m->nparams; p++) {
        const yc_param *pa = &m->params[p];
        double num = 0, den = 0;
        for (size_t i = 0; i < pa->numel; i++) {
            double a = grads[1][pa->offset + i], b = grads[0][pa->offset + i];
            num = fmax(num, fabs(a - b));
            den = fmax(den, fabs(b));
        }
        double e = den > 0 ? num / den : num;
        ck_assert_msg(isfinite(e), "gradient of %s is not finite", pa->name);
        if (e > worst) {
            worst = e;
            worst_name = pa->name;
        }
    }
    printf("micro-batches 4 + 2 against a batch of 6: loss %.9g and %.9g, worst gradient "
           "relative error %.2e (%s)\n", parts.total, whole.total, worst, worst_name);
    /* float rounding, grown through ~20 BatchNorm backward passes towards the input: measured
     * 6.2e-4 (model.2.cv3.bn.bias); micro-batches of 3 + 3 differ from 4 + 2 as much (2.2e-4),
     * though both are exact in exact arithmetic.  A wrong share of the loss is off by tens of
     * percent. */
    ck_assert_msg(worst < 1.5e-3, "gradients of micro-batches differ from the batch's: %.3g (%s)",
                  worst, worst_name);
    free(grads[0]);
    free(grads[1]);
    free(images);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

/* Four images without augmentation, 150 optimizer steps (past the 100-step warmup): the
 * training loss falls to what it falls to when the training is right. */
START_TEST(loss_falls_when_fitting_a_batch)
{
    make_demo();
    char dir[600], hyp[700], yaml[700];
    snprintf(dir, sizeof dir, "%s/four", tmpdir);
    yc_demo_options opt;
    yc_demo_options_default(&opt);
    opt.n_train = 4;
    opt.n_val = 4;
    opt.min_side = 64;
    opt.max_side = 64;
    opt.seed = 9;
    ck_assert_int_eq(yc_demo_write(dir, &opt), YC_OK);
    snprintf(yaml, sizeof yaml, "%s/%s", dir, YC_DEMO_YAML);
    snprintf(hyp, sizeof hyp, "%s/hyp.noaug.yaml", tmpdir);
    const char *text = "hsv_h: 0\nhsv_s: 0\nhsv_v: 0\ntranslate: 0\nscale: 0\nfliplr: 0\n"
                       "mosaic: 0\n";
    ck_assert_int_eq(yc_write_file_atomic(hyp, text, strlen(text)), YC_OK);
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    o.data = yaml;
    o.cfg = "yolov5n";
    o.hyp = hyp;
    o.epochs = 150;
    o.batch = 4;
    o.accumulate = 1; /* one optimizer step per batch (default: 64 / 4 = 16 batches per step) */
    o.imgsz = 64;
    o.workers = 1;
    o.noplots = true;
    o.noval = true;
    o.nosave = true;
    o.noautoanchor = true;
    o.exist_ok = true;
    o.project = tmpdir;
    o.name = "fit";
    bool interrupted = false;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    int st = yc_train(&o, &interrupted);
    yc_verbosity = verbosity;
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    char csv[800];
    snprintf(csv, sizeof csv, "%s/fit/results.csv", tmpdir);
    double loss[160];
    int n = read_train_losses(csv, loss, 160);
    ck_assert_int_eq(n, 150);
    double first = 0, last = 0;
    for (int i = 0; i < 10; i++) {
        first += loss[i] / 10;
        last += loss[n - 10 + i] / 10;
    }
    printf("fitting four images: train loss %.4f (epochs 0-9) -> %.4f (epochs 140-149)\n", first,
           last);
    /* measured 0.372-0.398 of the start (AVX-512, AVX2 and generic GEMM kernels, Winograd off,
     * 1 and 2 threads): within 0.05 of 0.39 leaves room for other CPUs' rounding, and none for a
     * run that learns at a different rate */
    double ratio = last / first;
    ck_assert_msg(fabs(ratio - 0.39) < 0.05, "the training loss went from %g to %g (%.3f of it)",
                  first, last, ratio);
}
END_TEST

/* ---- saved options ------------------------------------------------------------------------ */

#define FIELD_AT(obj, f, type) ((type *)((char *)(obj) + (f)->offset))

/* Every field train_opts.c marks as restored comes back from the JSON that checkpoints and
 * opt.yaml are written from, with a value other than its default; the others keep the values the
 * resumed command line gives. */
START_TEST(saved_options_round_trip)
{
    yc_train_saved a, b;
    memset(&a, 0, sizeof a);
    yc_train_opts_defaults(&a.o);
    char strs[64][32];
    int nrestored = 0;
    for (const yc_field *f = yc_train_fields; f->type != YC_FIELD_END; f++) {
        int i = (int)(f - yc_train_fields);
        double mid = (f->lo + f->hi) / 2;
        switch (f->type) {
        case YC_FIELD_BOOL:
            *FIELD_AT(&a, f, bool) = true;
            break;
        case YC_FIELD_INT:
            /* the top of the range: valid wherever the range is (tile 16384, batch 65536) */
            *FIELD_AT(&a, f, int) = f->hi > 0 ? (int)f->hi : 7;
            break;
        case YC_FIELD_FLOAT:
            *FIELD_AT(&a, f, float) = (float)(mid + 0.25);
            break;
        case YC_FIELD_DOUBLE:
            *FIELD_AT(&a, f, double) = mid + 0.25;
            break;
        case YC_FIELD_SIZE:
            *FIELD_AT(&a, f, size_t) = 12345;
            break;
        case YC_FIELD_STR:
            snprintf(strs[i], sizeof strs[i], "saved-%s", f->key);
            *FIELD_AT(&a, f, const char *) = strs[i];
            break;
        case YC_FIELD_ENUM:
            *FIELD_AT(&a, f, int) = 2; /* AdamW; --cache disk */
            ck_assert_ptr_nonnull(f->enum_name(2));
            break;
        case YC_FIELD_INTS: {
            int *v = FIELD_AT(&a, f, int);
            int *n = (int *)((char *)&a + f->count_offset);
            *n = 3;
            for (int k = 0; k < *n; k++)
                v[k] = (int)f->hi - k;
            break;
        }
        case YC_FIELD_END:
            break;
        }
        nrestored += (f->flags & YC_FIELD_RESTORE) != 0;
    }
    ck_assert_int_ge(nrestored, 20);
    char *json = yc_train_opts_json(&a.o, a.micro_batch);
    ck_assert_ptr_nonnull(json);

    /* the run resumed with only the command line's defaults, but for where it runs */
    memset(&b, 0, sizeof b);
    yc_train_opts_defaults(&b.o);
    b.o.device = "resumed-device";
    b.o.workers = 3;
    yc_train_saved now = b;
    yc_train_opt_strings keep;
    int st = yc_train_opts_from_json(json, &b.o, &keep);
    ck_assert_msg(st == YC_OK, "%s\n%s", yc_last_error(), json);
    for (const yc_field *f = yc_train_fields; f->type != YC_FIELD_END; f++) {
        const yc_train_saved *want = (f->flags & YC_FIELD_RESTORE) ? &a : &now;
        if (f == yc_field_find(yc_train_fields, "micro_batch"))
            continue; /* not an option */
        switch (f->type) {
        case YC_FIELD_BOOL:
            ck_assert_msg(*FIELD_AT(&b, f, bool) == *FIELD_AT(want, f, bool), "%s", f->key);
            break;
        case YC_FIELD_INT:
        case YC_FIELD_ENUM:
            ck_assert_msg(*FIELD_AT(&b, f, int) == *FIELD_AT(want, f, int), "%s: %d, expected %d",
                          f->key, *FIELD_AT(&b, f, int), *FIELD_AT(want, f, int));
            break;
        case YC_FIELD_FLOAT:
            ck_assert_msg(*FIELD_AT(&b, f, float) == *FIELD_AT(want, f, float), "%s", f->key);
            break;
        case YC_FIELD_DOUBLE:
            ck_assert_msg(*FIELD_AT(&b, f, double) == *FIELD_AT(want, f, double), "%s", f->key);
            break;
        case YC_FIELD_SIZE:
            ck_assert_msg(*FIELD_AT(&b, f, size_t) == *FIELD_AT(want, f, size_t), "%s", f->key);
            break;
        case YC_FIELD_STR: {
            const char *x = *FIELD_AT(&b, f, const char *), *y = *FIELD_AT(want, f, const char *);
            ck_assert_msg((!x && !y) || (x && y && !strcmp(x, y)), "%s: %s, expected %s", f->key,
                          x ? x : "NULL", y ? y : "NULL");
            break;
        }
        case YC_FIELD_INTS: {
            int nb = *(int *)((char *)&b + f->count_offset);
            int nw = *(int *)((char *)want + f->count_offset);
            ck_assert_msg(nb == nw && !memcmp(FIELD_AT(&b, f, int), FIELD_AT(want, f, int),
                                              (size_t)nb * sizeof(int)), "%s", f->key);
            break;
        }
        case YC_FIELD_END:
            break;
        }
        /* a restored value is not what the command line gave: the test sees it come back */
        if ((f->flags & YC_FIELD_RESTORE) && f->type != YC_FIELD_STR && f->type != YC_FIELD_INTS)
            ck_assert_msg(memcmp((char *)&a + f->offset, (char *)&now + f->offset,
                                 f->type == YC_FIELD_BOOL     ? sizeof(bool)
                                 : f->type == YC_FIELD_DOUBLE ? sizeof(double)
                                 : f->type == YC_FIELD_SIZE   ? sizeof(size_t)
                                                              : sizeof(int)) != 0,
                          "%s: the test's value is the default", f->key);
    }
    yc_train_opt_strings_free(&keep);
    free(json);

    /* a restored number out of its range names its key */
    ck_assert_int_eq(yc_train_opts_from_json("{\"epochs\": 0}", &b.o, &keep), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "'epochs'"));
    yc_error_clear();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("formulas");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, schedule_and_warmup_follow_yolov5);
    tcase_add_test(tc, optimizer_groups_freeze_and_clip);
    tcase_add_test(tc, checkpoint_round_trip);
    tcase_add_test(tc, saved_options_round_trip);
    tcase_add_test(tc, loader_is_reproducible);
    tcase_add_test(tc, loader_shards_follow_distributed_sampler);
    tcase_add_test(tc, micro_batches_add_up_to_the_batch);
    suite_add_tcase(s, tc);
    tc = tcase_create("runs");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, resume_equals_straight_run);
    tcase_add_test(tc, tiled_resume_equals_straight_run);
    tcase_add_test(tc, resume_inside_epoch_from_pt);
    tcase_add_test(tc, resume_inside_epoch_cfg_and_weights);
    tcase_add_test(tc, resume_inside_epoch_scratch_and_tiles);
    tcase_add_test(tc, loss_falls_when_fitting_a_batch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    yc_harness_tmpdir_remove();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
