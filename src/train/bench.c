/* Throughput of the inference pass and the training step (see bench.h). */
#include "bench.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ema.h"
#include "graph.h"
#include "hyp.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "step.h"
#include "util.h"

/* train.py's nominal batch size (weight decay scaling) and clip_grad_norm_ max_norm, as
 * src/train/train.c uses them */
#define BENCH_NBS 64
#define BENCH_MAX_GRAD_NORM 10.0

/* The synthetic batch: pixels (CHW RGB), uploaded as val and train upload theirs, and targets
 * (image, class, x, y, w, h). */
typedef struct bench_batch {
    uint8_t *pixels;
    float *targets;
    int nt;
} bench_batch;

static void batch_free(bench_batch *b)
{
    free(b->pixels);
    free(b->targets);
}

static int batch_make(bench_batch *b, int n, int ch, int img, int nc)
{
    memset(b, 0, sizeof *b);
    const size_t elems = (size_t)n * ch * img * img;
    b->nt = n * YC_BENCH_TARGETS_PER_IMAGE;
    b->pixels = yc_malloc(elems, "benchmark pixels");
    b->targets = yc_malloc((size_t)b->nt * 6 * sizeof *b->targets, "benchmark targets");
    if (!b->pixels || !b->targets) {
        batch_free(b);
        return YC_ENOMEM;
    }
    yc_rng rng;
    yc_rng_seed(&rng, 0, 0xBE4C);
    for (size_t i = 0; i < elems; i++)
        b->pixels[i] = (uint8_t)(yc_rng_u32(&rng) >> 24);
    for (int t = 0; t < b->nt; t++) {
        float *row = b->targets + (size_t)t * 6;
        row[0] = (float)(t / YC_BENCH_TARGETS_PER_IMAGE);
        row[1] = (float)yc_rng_below(&rng, (uint32_t)nc);
        row[2] = (float)yc_rng_range(&rng, 0.25, 0.75);
        row[3] = (float)yc_rng_range(&rng, 0.25, 0.75);
        row[4] = (float)yc_rng_range(&rng, 0.05, 0.4);
        row[5] = (float)yc_rng_range(&rng, 0.05, 0.4);
    }
    return YC_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and minimum of n > 0 times (sorts them). */
static yc_bench_time summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    yc_bench_time s = {.min = t[0], .median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])};
    return s;
}

static double sum(const double *t, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += t[i];
    return s;
}

/* Seconds in the graph's ops over the profiled runs. */
static double op_total(const yc_graph *g)
{
    return sum(yc_graph_op_seconds(g), yc_graph_nops(g));
}

/* The inference pass: input upload and evaluation-mode forward per iteration. */
static int bench_forward(const yc_bench_config *c, yc_model *m, const bench_batch *b,
                         yc_bench_result *r, double *t)
{
    yc_graph *g = NULL;
    yc_graph_options go = {.mode = YC_GRAPH_EVAL, .half = c->half};
    int st = yc_graph_new_opts(&g, m, c->batch, c->img, c->img, &go);
    if (!st)
        st = yc_graph_alloc(g);
    for (int it = 0; it < c->warmup + c->iters && !st; it++) {
        if (it == c->warmup && c->profile && (st = yc_graph_set_profiling(g, true)))
            break;
        double t0 = yc_now();
        if ((st = yc_tensor_set_u8_scaled(m->be, yc_graph_input(g), b->pixels)) ||
            (st = yc_graph_forward(g)) || (st = m->be->iface->synchronize(m->be)))
            break;
        if (it >= c->warmup)
            t[it - c->warmup] = yc_now() - t0;
    }
    if (!st && c->profile) {
        double total = sum(t, c->iters);
        if (!(st = yc_profile_of_graph(&r->forward_profile, g)) &&
            !(st = yc_profile_add_host(&r->forward_profile, "input upload, other",
                                       total - op_total(g))))
            yc_profile_finish(&r->forward_profile, total);
    }
    if (!st)
        r->forward = summarize(t, c->iters);
    yc_graph_free(g);
    return st ? yc_error_context(st, "inference pass") : YC_OK;
}

/* The training step as yolocl train runs a batch, with an optimizer step after every batch. */
static int bench_train(const yc_bench_config *c, yc_model *m, const bench_batch *b,
                       yc_bench_result *r, double *t)
{
    double *t_fb = t, *t_opt = t + c->iters, *t_all = t + 2 * c->iters;
    yc_hyp hyp;
    yc_loss_params lp;
    yc_step *s = NULL;
    yc_optim *opt = NULL;
    yc_ema *ema = NULL;
    int st = yc_hyp_load(&hyp, "hyp.scratch-low");
    if (!st) {
        yc_step_loss_params(m, &hyp, c->img, 0.0f, &lp);
        yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .half = c->half};
        st = yc_step_new_in(&s, m, c->batch, c->img, c->img, &lp, &go, NULL);
    }
    if (!st) {
        int accumulate = (int)fmax(yc_round_half_even((double)BENCH_NBS / c->batch), 1);
        double wd = hyp.weight_decay * c->batch * accumulate / BENCH_NBS;
        /* yc_optim_new prints train.py's optimizer line, noise in a benchmark table */
        int verbosity = yc_verbosity;
        if (yc_verbosity < 2)
            yc_verbosity = 0;
        st = yc_optim_new(&opt, m, YC_OPTIM_SGD, hyp.lr0, hyp.momentum, wd, NULL);
        yc_verbosity = verbosity;
    }
    if (!st)
        st = yc_ema_new(&ema, m, 0);
    yc_loss_result res = {0};
    yc_backend_counters start = {0};
    for (int it = 0; it < c->warmup + c->iters && !st; it++) {
        if (it == c->warmup && c->profile && (st = yc_graph_set_profiling(s->g, true)))
            break;
        if (it == c->warmup)
            start = m->be->counters;
        /* two waits per step, to time the step and the optimizer apart */
        double t0 = yc_now();
        if ((st = yc_step_run_u8(s, b->pixels, b->targets, b->nt, &res)))
            break;
        double t1 = yc_now();
        if (!isfinite(res.total)) {
            st = yc_error_status(YC_ERR, "the loss is %g at iteration %d", res.total, it + 1);
            break;
        }
        if ((st = yc_optim_step(opt, BENCH_MAX_GRAD_NORM)) || (st = yc_model_zero_grad(m)) ||
            (st = yc_ema_update(ema, m)) || (st = m->be->iface->synchronize(m->be)) ||
            (st = yc_optim_step_done(opt)))
            break;
        double t2 = yc_now();
        if (it >= c->warmup) {
            t_fb[it - c->warmup] = t1 - t0;
            t_opt[it - c->warmup] = t2 - t1;
            t_all[it - c->warmup] = t2 - t0;
        }
    }
    if (!st && c->profile) {
        yc_profile *p = &r->train_profile;
        double fb = sum(t_fb, c->iters), optim = sum(t_opt, c->iters);
        if (!(st = yc_profile_of_graph(p, s->g)) &&
            !(st = yc_profile_add_host(p, "loss, transfers, other", fb - op_total(s->g))) &&
            !(st = yc_profile_add_host(p, "optimizer (SGD, EMA)", optim)))
            yc_profile_finish(p, sum(t_all, c->iters));
    }
    if (!st) {
        const yc_backend_counters *end = &m->be->counters;
        r->launches_per_step = (double)(end->launches - start.launches) / c->iters;
        r->host_waits_per_step = (double)(end->host_waits - start.host_waits) / c->iters;
        r->transfer_bytes_per_step = (double)(end->bytes_to_device - start.bytes_to_device +
                                              end->bytes_from_device - start.bytes_from_device) /
                                     c->iters;
        r->loss = res.total;
        r->fwd_bwd = summarize(t_fb, c->iters);
        r->optim = summarize(t_opt, c->iters);
        r->train = summarize(t_all, c->iters);
    }
    yc_ema_free(ema);
    yc_optim_free(opt);
    yc_step_free(s);
    return st ? yc_error_context(st, "training step") : YC_OK;
}

int yc_bench_run(const yc_bench_config *c, yc_backend *be, yc_bench_result *r)
{
    memset(r, 0, sizeof *r);
    if (c->batch < 1 || c->iters < 1 || c->warmup < 0)
        return yc_error_status(YC_EUSAGE, "benchmark: batch and iterations must be positive");
    if (c->half && !be->info.fp16_storage)
        return yc_error_status(YC_EUSAGE, "--half: %s cannot store FP16", be->info.name);
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    bench_batch b = {0};
    double *t = NULL;
    int st = yc_model_cfg_load(&cfg, c->cfg_path, 0);
    if (!st)
        st = yc_model_new(&m, cfg); /* owns cfg from here on, failing or not */
    if (!st)
        st = yc_model_require_detection(m, "yolocl bench");
    if (st)
        goto done;
    snprintf(r->model, sizeof r->model, "%s", m->cfg->name);
    int gs = 32;
    for (int l = 0; l < m->nl; l++)
        if ((int)m->stride[l] > gs)
            gs = (int)m->stride[l];
    if (c->img < gs || c->img % gs) {
        st = yc_error_status(YC_EUSAGE, "image size %d is not a multiple of %s's stride %d",
                             c->img, r->model, gs);
        goto done;
    }
    if ((r->forward_gflop = yc_model_gflops(m, c->img)) < 0) {
        st = yc_error_context(YC_ERR, "GFLOPs of %s", r->model);
        goto done;
    }
    if ((st = yc_model_alloc(m, be)) || (st = yc_model_init_weights(m, 0)) ||
        (st = batch_make(&b, c->batch, m->cfg->ch, c->img, m->nc)))
        goto done;
    if (!(t = yc_calloc((size_t)c->iters * 3, sizeof *t, "benchmark times"))) {
        st = YC_ENOMEM;
        goto done;
    }
    if (!(st = bench_forward(c, m, &b, r, t)))
        st = bench_train(c, m, &b, r, t);
done:
    free(t);
    batch_free(&b);
    yc_model_free(m);
    return st;
}
