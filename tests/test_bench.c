/* Per-op profiling of a schedule (yc_graph_set_profiling), its summary by kind and by op name
 * (opprofile.h), and the benchmark of one configuration (bench.h), on the tiny test model with
 * the CPU backend.  No timing is asserted beyond being positive. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "graph.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "opprofile.h"
#include "harness.h"
#include "yctest.h"

static double total_seconds(const yc_graph *g)
{
    double s = 0.0;
    for (int i = 0; i < yc_graph_nops(g); i++)
        s += yc_graph_op_seconds(g)[i];
    return s;
}

START_TEST(graph_profiling_times_only_while_on)
{
    yc_backend *be = NULL;
    ck_assert_msg(yc_backend_cpu_new(&be, 2) == YC_OK, "%s", yc_last_error());
    yc_model *m = yc_harness_tiny_model(be, 0, 0);
    yc_graph *g = NULL;
    ck_assert_int_eq(yc_graph_new(&g, m, 2, 64, 64, YC_GRAPH_TRAIN), YC_OK);
    ck_assert_msg(yc_graph_alloc(g) == YC_OK, "%s", yc_last_error());
    const int n = yc_graph_nops(g);
    /* an input and head gradients (the loss's part) so that every op reads written values */
    size_t in_elems = yc_tensor_elems(yc_graph_input(g)), most = in_elems;
    for (int l = 0; l < m->nl; l++)
        if (yc_tensor_elems(yc_graph_head_grad(g, l)) > most)
            most = yc_tensor_elems(yc_graph_head_grad(g, l));
    float *fill = malloc(most * sizeof *fill);
    ck_assert_ptr_nonnull(fill);
    for (size_t i = 0; i < most; i++)
        fill[i] = (float)(i % 251) / 251.0f;
    ck_assert_int_eq(yc_tensor_set_f32(be, yc_graph_input(g), fill), YC_OK);

    /* off: nothing recorded, nothing allocated */
    ck_assert_int_eq(yc_graph_forward(g), YC_OK);
    ck_assert_ptr_null(yc_graph_op_seconds(g));
    yc_profile p;
    ck_assert_int_ne(yc_profile_of_graph(&p, g), YC_OK);

    /* on: every op of the runs gets a time, forward ops from forward, the rest from backward */
    ck_assert_int_eq(yc_graph_set_profiling(g, true), YC_OK);
    ck_assert_ptr_nonnull(yc_graph_op_seconds(g));
    ck_assert_int_eq(yc_graph_forward(g), YC_OK);
    double fwd = total_seconds(g);
    ck_assert(fwd > 0.0);
    for (int i = yc_graph_nforward(g); i < n; i++)
        ck_assert(yc_graph_op_seconds(g)[i] == 0.0);
    for (int l = 0; l < m->nl; l++)
        ck_assert_int_eq(yc_tensor_set_f32(be, yc_graph_head_grad(g, l), fill), YC_OK);
    ck_assert_int_eq(yc_graph_backward(g), YC_OK);
    double all = total_seconds(g);
    ck_assert(all > fwd);
    for (int i = 0; i < n; i++)
        ck_assert(yc_graph_op_seconds(g)[i] >= 0.0);

    /* off again: the totals stay as they were */
    ck_assert_int_eq(yc_graph_set_profiling(g, false), YC_OK);
    ck_assert_int_eq(yc_tensor_set_f32(be, yc_graph_input(g), fill), YC_OK);
    ck_assert_int_eq(yc_graph_forward(g), YC_OK);
    ck_assert(total_seconds(g) == all);

    /* the summary: kinds and names account for every op and every second */
    ck_assert_int_eq(yc_profile_of_graph(&p, g), YC_OK);
    double ksum = 0.0;
    int kops = 0;
    for (int i = 0; i < p.nkinds; i++) {
        ksum += p.kinds[i].seconds;
        kops += p.kinds[i].ops;
    }
    ck_assert_int_eq(kops, n);
    ck_assert(fabs(ksum - all) <= 1e-9 * (1.0 + all));
    ck_assert_int_eq(p.ntop, YC_PROFILE_TOP);
    for (int i = 1; i < p.ntop; i++)
        ck_assert(p.top[i].seconds <= p.top[i - 1].seconds);
    ck_assert_msg(strncmp(p.top[0].name, "model.", 6) == 0, "top name %s", p.top[0].name);
    /* a Conv module's name carries its convolution, BatchNorm and SiLU, forward and backward */
    ck_assert_int_ge(p.top[0].ops, 2);

    ck_assert_int_eq(yc_profile_add_host(&p, "loss", 0.5), YC_OK);
    ck_assert_int_eq(yc_profile_add_host(&p, "nothing", 0.0), YC_OK);
    int before = p.nkinds;
    yc_profile_finish(&p, all + 0.5);
    ck_assert_int_eq(p.nkinds, before);
    ck_assert(p.total == all + 0.5);
    ck_assert_str_eq(p.kinds[0].name, "loss");
    ck_assert_int_eq(p.kinds[0].ops, 0);
    for (int i = 1; i < p.nkinds; i++)
        ck_assert(p.kinds[i].seconds <= p.kinds[i - 1].seconds);

    yc_graph_reset_profile(g);
    ck_assert(total_seconds(g) == 0.0);

    free(fill);
    yc_graph_free(g);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

START_TEST(bench_one_configuration)
{
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_cpu_new(&be, 2), YC_OK);
    yc_bench_config c = {.cfg_path = yc_harness_tiny_cfg(), .batch = 2, .img = 64, .warmup = 1,
                         .iters = 3, .profile = true};
    yc_bench_result r;
    ck_assert_msg(yc_bench_run(&c, be, &r) == YC_OK, "%s", yc_last_error());
    ck_assert_str_eq(r.model, "YOLOv5n-tiny");
    /* 4,618,240 FLOPs at 64 x 64: yc_model_gflops, which test_model holds to YOLOv5's summaries */
    ck_assert_msg(fabs(r.forward_gflop - 0.00461824) < 1e-12, "%.12g GFLOP", r.forward_gflop);
    const yc_bench_time *t[] = {&r.forward, &r.fwd_bwd, &r.optim, &r.train};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        ck_assert(t[i]->min > 0.0 && t[i]->median >= t[i]->min);
    /* the same init (seed 0) and batch every run.  Measured over AVX-512, AVX2 and generic GEMM
     * kernels, Winograd off, 1 and 2 threads: the first step's loss 0.22386283-0.22386287, the
     * fourth's (after three optimizer steps) 0.2230929-0.2230961, 7.7e-4 lower */
    yc_bench_config first = c;
    first.warmup = 0;
    first.iters = 1;
    first.profile = false;
    yc_bench_result r1;
    ck_assert_msg(yc_bench_run(&first, be, &r1) == YC_OK, "%s", yc_last_error());
    printf("loss %.9g at the first step, %.9g after three optimizer steps\n", r1.loss, r.loss);
    ck_assert_msg(yc_test_rel_diff(r1.loss, 0.22386285) < 1e-5, "first loss %.9g", r1.loss);
    ck_assert_msg(yc_test_rel_diff(r.loss, 0.2230945) < 1e-4, "fourth loss %.9g", r.loss);
    /* the training profile covers the training step: ops, the host part, the optimizer */
    ck_assert(r.train_profile.total > 0.0 && r.forward_profile.total > 0.0);
    bool optimizer = false, host = false;
    for (int i = 0; i < r.train_profile.nkinds; i++) {
        optimizer |= strcmp(r.train_profile.kinds[i].name, "optimizer (SGD, EMA)") == 0;
        host |= strcmp(r.train_profile.kinds[i].name, "loss, transfers, other") == 0;
    }
    ck_assert(optimizer && host);

    /* sizes the strides cannot take are usage errors */
    c.img = 80;
    ck_assert_int_eq(yc_bench_run(&c, be, &r), YC_EUSAGE);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "not a multiple"));
    yc_backend_free(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("profile");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, graph_profiling_times_only_while_on);
    tcase_add_test(tc, bench_one_configuration);
    suite_add_tcase(s, tc);
    return yc_harness_run(s, false);
}
