/* yolocl bench: the inference pass and the training step timed on a synthetic batch, as GFLOP/s
 * and as a fraction of the CPU's measured FP32 peak; --profile adds per-op tables. */
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "commands.h"
#include "device.h"
#include "fma_peak.h"
#include "json.h"
#include "log.h"
#include "modelcfg.h"
#include "options.h"
#include "util.h"
#include "waitpolicy.h"

/* The matrix run when --cfg, --img or --batch leave a dimension open. */
static const char *const matrix_cfgs[] = {"yolov5n", "yolov5s"};
static const int matrix_imgs[] = {320, 640};
static const int matrix_batches[] = {8, 16};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The FMA loop runs at least PEAK_RUNS times and for at least PEAK_SECONDS; the best run is the
 * peak (a run takes milliseconds, and on a shared machine some of them lose a core).  It is measured
 * before the first configuration and again after each one, and every row uses the best measurement
 * so far: on a virtual machine the host can take a vCPU away for seconds, and a peak measured then
 * (half the real one on 2 vCPUs) would double the rows' %peak. */
#define PEAK_RUNS 5
#define PEAK_SECONDS 0.25

/* The command line. */
typedef struct bench_cli {
    const char *cfg, *device;
    int img, batch, iters, warmup;
    bool half, profile, json;
} bench_cli;

#define T bench_cli
static const yc_option rows[] = {
    YC_OPT_STRING('c', "cfg", "MODEL", T, cfg, "model config (bundled name or yaml path)"),
    {.type = YC_OPT_T_INT, .name = "img", .aliases = {"imgsz"}, .metavar = "SIZE",
     .offset = offsetof(T, img), .lo = 32, .hi = 16384,
     .help = "image size, a multiple of the model's stride"},
    {.type = YC_OPT_T_INT, .short_name = 'b', .name = "batch", .aliases = {"batch-size"},
     .metavar = "N", .offset = offsetof(T, batch), .lo = 1, .hi = 4096,
     .help = "images per batch"},
    YC_OPTS_DEVICE(T, device),
    YC_OPT_BOOL(0, "half", T, half, "FP16 storage of activations"),
    YC_OPT_INT(0, "iters", "N", T, iters, 1, 1000000,
               "timed iterations (default 5); the median and minimum are shown"),
    YC_OPT_INT(0, "warmup", "N", T, warmup, 0, 1000000, "untimed iterations first (default 1)"),
    YC_OPT_BOOL(0, "profile", T, profile,
                "time each op: tables by op kind and the 10 slowest op names"),
    YC_OPT_BOOL(0, "json", T, json, "one JSON object per configuration, one per line"),
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "bench",
    .head = "Usage: yolocl bench [--cfg MODEL] [--img SIZE] [--batch N] [--device D] [--half]\n"
            "                    [--iters N] [--warmup N] [--profile] [--json]\n"
            "Time the inference pass and the training step (forward, loss, backward, optimizer)\n"
            "of YOLOv5 models on a synthetic batch; print milliseconds, images/s, GFLOP/s and the\n"
            "fraction of the CPU's measured FP32 peak.  Without --cfg, --img and --batch: yolov5n\n"
            "and yolov5s at 320 and 640 with batches of 8 and 16 (each option fixes one).\n"
            "\n",
    .rows = rows,
    .help_col = 20,
};

/* What the whole run shares. */
typedef struct bench_run {
    yc_backend *be;
    /* measured FP32 peak in GFLOP/s, the best so far (0: not measured, an OpenCL device), its loop's
     * ISA, and the value last printed in the text output */
    double peak;
    const char *isa;
    double peak_printed;
    bool json, half;
    int warmup, iters;
} bench_run;

static void json_str(const char *key, const char *value)
{
    char buf[1024];
    yc_json_escape(buf, sizeof buf, value, strlen(value));
    printf("\"%s\": %s", key, buf);
}

/* A JSON number, or null where there is none. */
static void json_num(const char *key, double value, bool have)
{
    if (have)
        printf(", \"%s\": %.6g", key, value);
    else
        printf(", \"%s\": null", key);
}

static void json_profile(const char *key, const yc_profile *p, int iters)
{
    printf(", \"%s\": {\"total_ms\": %.6g, \"kinds\": [", key, p->total * 1e3 / iters);
    for (int i = 0; i < p->nkinds; i++) {
        printf("%s{", i ? ", " : "");
        json_str("kind", p->kinds[i].name);
        printf(", \"ops\": %d, \"ms\": %.6g, \"percent\": %.4g}", p->kinds[i].ops,
               p->kinds[i].seconds * 1e3 / iters, 100.0 * p->kinds[i].seconds / p->total);
    }
    fputs("], \"top\": [", stdout);
    for (int i = 0; i < p->ntop; i++) {
        printf("%s{", i ? ", " : "");
        json_str("name", p->top[i].name);
        printf(", \"ops\": %d, \"ms\": %.6g, \"percent\": %.4g}", p->top[i].ops,
               p->top[i].seconds * 1e3 / iters, 100.0 * p->top[i].seconds / p->total);
    }
    fputs("]}", stdout);
}

static void print_json(const bench_run *run, const char *name, const yc_bench_config *c,
                       const yc_bench_result *r)
{
    const double fwd_gf = r->forward_gflop * c->batch / r->forward.median;
    const double train_gf = 3.0 * r->forward_gflop * c->batch / r->train.median;
    const bool peak = run->peak > 0;
    putchar('{');
    json_str("model", r->model);
    fputs(", ", stdout);
    json_str("cfg", name);
    printf(", \"img\": %d, \"batch\": %d, ", c->img, c->batch);
    json_str("device", run->be->info.name);
    printf(", \"half\": %s, \"warmup\": %d, \"iters\": %d, ", c->half ? "true" : "false",
           c->warmup, c->iters);
    json_str("omp_wait_policy", yc_wait_policy_name());
    json_num("forward_gflop_per_image", r->forward_gflop, true);
    json_num("forward_ms", r->forward.median * 1e3, true);
    json_num("forward_ms_min", r->forward.min * 1e3, true);
    json_num("forward_ms_per_image", r->forward.median * 1e3 / c->batch, true);
    json_num("fwd_bwd_ms", r->fwd_bwd.median * 1e3, true);
    json_num("fwd_bwd_ms_min", r->fwd_bwd.min * 1e3, true);
    json_num("optimizer_ms", r->optim.median * 1e3, true);
    json_num("train_ms", r->train.median * 1e3, true);
    json_num("train_ms_min", r->train.min * 1e3, true);
    json_num("train_ms_per_image", r->train.median * 1e3 / c->batch, true);
    json_num("train_images_per_s", c->batch / r->train.median, true);
    json_num("forward_gflops_per_s", fwd_gf, true);
    json_num("gflops_per_s", train_gf, true);
    json_num("peak_gflops_per_s", run->peak, peak);
    json_num("forward_peak_fraction", fwd_gf / run->peak, peak);
    json_num("train_peak_fraction", train_gf / run->peak, peak);
    json_num("loss", r->loss, true);
    json_num("launches_per_step", r->launches_per_step, true);
    json_num("host_waits_per_step", r->host_waits_per_step, true);
    json_num("transfer_bytes_per_step", r->transfer_bytes_per_step, true);
    if (c->profile) {
        json_profile("forward_profile", &r->forward_profile, c->iters);
        json_profile("train_profile", &r->train_profile, c->iters);
    }
    puts("}");
}

static void print_header(const bench_run *run)
{
    printf("%s, %s activations, OpenMP wait policy %s, %d warm-up + %d timed iteration%s; times: median "
           "(min)\n",
           run->be->info.name, run->half ? "FP16" : "FP32", yc_wait_policy_name(), run->warmup, run->iters,
           run->iters == 1 ? "" : "s");
    if (run->peak > 0)
        printf("FP32 peak: %.1f GFLOP/s (%s FMA loop on %d thread%s)\n", run->peak, run->isa,
               run->be->info.compute_units, run->be->info.compute_units == 1 ? "" : "s");
    else
        fputs("FP32 peak: not measured (the FMA loop measures CPUs, this is an OpenCL device)\n",
              stdout);
    printf("%-12s %5s %5s %15s %10s %17s %17s %11s %11s %5s %13s %5s\n", "model", "img", "batch",
           "fwd ms", "fwd ms/img", "fwd+bwd ms", "train ms", "train img/s", "fwd GFLOP/s", "%peak",
           "train GFLOP/s", "%peak");
}

/* "12.3 (11.9)" in a column of `width`. */
static void print_time(yc_bench_time t, int width)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.1f (%.1f)", t.median * 1e3, t.min * 1e3);
    printf(" %*s", width, buf);
}

static void print_percent(double gf, double peak)
{
    if (peak > 0)
        printf(" %4.1f%%", 100.0 * gf / peak);
    else
        printf(" %5s", "-");
}

/* A profile row; host rows (no ops) show "-" for the count. */
static void print_profile_row(const yc_profile_row *row, double total, int iters)
{
    char ops[16] = "-";
    if (row->ops)
        snprintf(ops, sizeof ops, "%d", row->ops);
    printf("    %-28s %5s %10.2f %5.1f%%\n", row->name, ops, row->seconds * 1e3 / iters,
           100.0 * row->seconds / total);
}

static void print_profile(const char *what, const yc_profile *p, int iters)
{
    printf("  %s: %.1f ms per iteration, ops timed one by one\n", what, p->total * 1e3 / iters);
    printf("    %-28s %5s %10s %6s\n", "op kind", "ops", "ms/iter", "share");
    for (int i = 0; i < p->nkinds; i++)
        print_profile_row(&p->kinds[i], p->total, iters);
    printf("    %-28s %5s %10s %6s\n", "top op names", "ops", "ms/iter", "share");
    for (int i = 0; i < p->ntop; i++)
        print_profile_row(&p->top[i], p->total, iters);
}

/* Raises run->peak to the FMA loop's best over PEAK_RUNS runs and PEAK_SECONDS (CPU devices). */
static void measure_peak(bench_run *run)
{
    if (run->be->info.kind != YC_DEVICE_CPU)
        return;
    const double start = yc_now();
    for (int i = 0; i < PEAK_RUNS || yc_now() - start < PEAK_SECONDS; i++) {
        double p = yc_fma_peak_gflops(run->be->info.compute_units, &run->isa);
        if (p > run->peak)
            run->peak = p;
    }
}

static void print_row(const bench_run *run, const yc_bench_config *c, const yc_bench_result *r)
{
    const double fwd_gf = r->forward_gflop * c->batch / r->forward.median;
    const double train_gf = 3.0 * r->forward_gflop * c->batch / r->train.median;
    printf("%-12s %5d %5d", r->model, c->img, c->batch);
    print_time(r->forward, 15);
    printf(" %10.2f", r->forward.median * 1e3 / c->batch);
    print_time(r->fwd_bwd, 17);
    print_time(r->train, 17);
    printf(" %11.2f %11.1f", c->batch / r->train.median, fwd_gf);
    print_percent(fwd_gf, run->peak);
    printf(" %13.1f", train_gf);
    print_percent(train_gf, run->peak);
    putchar('\n');
    if (c->profile) {
        print_profile("inference pass", &r->forward_profile, c->iters);
        print_profile("training step", &r->train_profile, c->iters);
        char bytes[32];
        printf("  per training step: %.0f kernel launches, %.1f host waits, %s between host and "
               "device\n", r->launches_per_step, r->host_waits_per_step,
               yc_format_size((size_t)r->transfer_bytes_per_step, bytes, sizeof bytes));
    }
    fflush(stdout);
}

/* One configuration of the model config `name`: runs it, measures the peak again and prints its row
 * (with a line when the peak rose by more than 5%) or JSON line. */
static int run_one(bench_run *run, const char *name, const yc_bench_config *c)
{
    yc_bench_result r;
    int st = yc_bench_run(c, run->be, &r);
    if (st)
        return yc_error_context(st, "%s at %d, batch %d", name, c->img, c->batch);
    const double printed = run->peak_printed;
    measure_peak(run);
    if (!run->json && run->peak > 1.05 * printed) {
        printf("FP32 peak measured again: %.1f GFLOP/s (was %.1f: a core was busy or taken by the host); "
               "the rows below use it\n",
               run->peak, printed);
        run->peak_printed = run->peak;
    }
    if (run->json)
        print_json(run, name, c, &r);
    else
        print_row(run, c, &r);
    return YC_OK;
}

int yc_cmd_bench(int argc, char **argv)
{
    bench_cli o = {.device = "auto", .iters = 5, .warmup = 1};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &o, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    const char *cfg_name = o.cfg, *device = o.device;
    int img = o.img, batch = o.batch, iters = o.iters, warmup = o.warmup;
    bool half = o.half, profile = o.profile, json = o.json;

    /* the configurations: each given option fixes its dimension of the matrix */
    const int ncfg = cfg_name ? 1 : COUNT(matrix_cfgs), nimg = img ? 1 : COUNT(matrix_imgs),
              nbatch = batch ? 1 : COUNT(matrix_batches);
    char paths[COUNT(matrix_cfgs)][1024];
    for (int i = 0; i < ncfg; i++)
        if ((st = yc_model_cfg_find(cfg_name ? cfg_name : matrix_cfgs[i], paths[i],
                                    sizeof paths[i])))
            return yc_report_failure(st);

    /* stdout carries only the JSON lines with --json */
    if (json && yc_verbosity < 2)
        yc_verbosity = 0;
    /* the CPU backend with no image loader beside it: OpenMP threads spin between parallel regions
     * unless the user chose a policy (waitpolicy.h; this re-executes yolocl once) */
    bool cpu = false;
    if (yc_wait_policy_adjustable() && yc_device_is_cpu(device, &cpu) == YC_OK && cpu)
        yc_wait_policy_spin();
    bench_run run = {.json = json, .half = half, .warmup = warmup, .iters = iters};
    if ((st = yc_device_open(device, 0, !json, &run.be)))
        return yc_report_failure(st);
    measure_peak(&run);
    run.peak_printed = run.peak;
    if (!json)
        print_header(&run);
    for (int i = 0; i < ncfg && !st; i++)
        for (int j = 0; j < nimg && !st; j++)
            for (int k = 0; k < nbatch && !st; k++) {
                yc_bench_config bc = {
                    .cfg_path = paths[i],
                    .batch = batch ? batch : matrix_batches[k],
                    .img = img ? img : matrix_imgs[j],
                    .half = half,
                    .warmup = warmup,
                    .iters = iters,
                    .profile = profile,
                };
                st = run_one(&run, cfg_name ? cfg_name : matrix_cfgs[i], &bc);
            }
    yc_backend_free(run.be);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
