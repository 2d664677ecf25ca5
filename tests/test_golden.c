/* The training step against PyTorch YOLOv5 v7.0 on the CPU backend (llm.c's test_gpt2.c is the
 * model; tests/golden.c holds the comparisons, shared with test_cl.c's OpenCL step).
 *
 * Built twice.  test_golden runs what tests/data holds, so every clone checks it:
 *  - the tiny fixture's step: head outputs and the four loss numbers (relative error below 1e-4),
 *    every parameter gradient (below 1e-3 per tensor), the BatchNorm running statistics after the
 *    step (momentum 0.03, unbiased variance), and one optimizer iteration after it (warmup,
 *    clipping, Nesterov SGD with weight decay, the EMA);
 *  - the same step with FP16 storage, with and without recomputation: the two are bit-identical,
 *    and every gradient tensor keeps its direction and size against PyTorch's FP32 gradients;
 *  - a whole-network finite-difference check of a P6 model (four heads, nc = 1, batch 3) that no
 *    dump covers, along random directions of conv, BatchNorm and bias parameters.
 * test_golden_ref (YC_TEST_SHARED) runs ../shared/ref's YOLOv5n at 320 (80 classes, two coco128
 * images) and exits 77 without it. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "golden.h"
#include "hyp.h"
#include "log.h"
#include "model.h"
#include "rng.h"
#include "safetensors.h"
#include "step.h"
#include "util.h"
#include "harness.h"
#include "yctest.h"

#define TOL_OUT 1e-4
#define TOL_GRAD 1e-3
/* finite differences along random directions: |FD - analytic| / |gradient of the tensor|,
 * measured 3.6e-3 at most (a BatchNorm bias of layer 6, direction 2; float32 forward passes) */
#define YC_FD_TOL 1e-2

#ifndef YC_TEST_SHARED

START_TEST(tiny_step_matches_pytorch)
{
    yc_tiny_files tiny;
    yc_tiny_files_get(&tiny);
    yc_golden gd;
    printf("tiny (yolov5n, width 0.0625, nc 3, 64x64, batch 2):\n");
    yc_golden_step(&gd, "cpu", tiny.cfg, 0, tiny.weights, tiny.batch, "images", NULL);
    yc_golden_check_tiny_outputs(&gd, &tiny, TOL_OUT, TOL_OUT);
    free(yc_golden_check_grads(&gd, tiny.grads, TOL_GRAD));
    yc_golden_check_update(&gd, &tiny, YC_GOLDEN_TOL_UPDATE, TOL_OUT);
    yc_golden_free(&gd);
}
END_TEST

/* A whole device buffer read to the host (malloc'd). */
static void *read_buffer(yc_backend *be, yc_buffer *b, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(be->iface->buffer_read(be, b, 0, h, bytes), YC_OK);
    return h;
}

/* Recomputing SiLU outputs in backward instead of storing them changes where the values live,
 * not the numbers: heads, loss, every gradient and the BatchNorm running statistics are
 * bit-identical to the stored run, in FP32 and with FP16 storage (the recomputed SiLU reads the
 * same FP16-rounded BatchNorm output the stored run rounds).  The activation arena is smaller
 * either way.  With FP16 storage, both runs are also judged against PyTorch's FP32 step, per
 * gradient tensor. */
START_TEST(recompute_gives_identical_bits)
{
    yc_tiny_files tiny;
    yc_tiny_files_get(&tiny);
    for (int half = 0; half < 2; half++) {
        yc_golden gd[2];
        float *grads[2], *stats[2];
        size_t arena[2];
        for (int r = 0; r < 2; r++) {
            yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .half = half, .recompute = r};
            printf("%s, %s:\n", half ? "FP16 storage" : "FP32", r ? "recomputed" : "stored");
            yc_golden_step(&gd[r], "cpu", tiny.cfg, 0, tiny.weights, tiny.batch, "images", &go);
            const yc_model *m = gd[r].m;
            grads[r] = yc_golden_grads(&gd[r]);
            stats[r] = read_buffer(gd[r].be, m->state_buf, m->state_elems * sizeof(float));
            arena[r] = yc_graph_plan(gd[r].step->g)->arena_bytes;
            int napply = 0;
            for (int i = 0; i < yc_graph_nops(gd[r].step->g); i++)
                napply += yc_graph_op(gd[r].step->g, i)->kind == YC_OP_BN_SILU_APPLY;
            if (r)
                ck_assert_msg(napply > 0, "recompute mode re-derives no SiLU output");
            else
                ck_assert_int_eq(napply, 0);
            if (half) {
                yc_golden_check_tiny_outputs(&gd[r], &tiny, YC_GOLDEN_HALF_TOL_OUT,
                                             YC_GOLDEN_HALF_TOL_LOSS);
                yc_golden_check_grads_similar(&gd[r], tiny.grads, YC_GOLDEN_HALF_ANGLE,
                                              YC_GOLDEN_HALF_RATIO);
            }
        }
        const yc_model *m = gd[0].m;
        printf("  %s: activation arena %zu bytes stored, %zu recomputed\n",
               half ? "FP16" : "FP32", arena[0], arena[1]);
        ck_assert_uint_lt(arena[1], arena[0]);
        ck_assert_msg(memcmp(grads[0], grads[1], m->param_elems * sizeof(float)) == 0,
                      "%s gradients differ with recomputation", half ? "FP16" : "FP32");
        ck_assert_msg(memcmp(stats[0], stats[1], m->state_elems * sizeof(float)) == 0,
                      "%s BatchNorm statistics differ with recomputation", half ? "FP16" : "FP32");
        ck_assert_msg(memcmp(&gd[0].res, &gd[1].res, sizeof gd[0].res) == 0, "loss differs");
        for (int l = 0; l < m->nl; l++) {
            size_t n = yc_tensor_elems(yc_graph_head(gd[0].step->g, l));
            ck_assert_msg(memcmp(gd[0].step->head[l], gd[1].step->head[l], n * sizeof(float)) == 0,
                          "head %d differs", l);
        }
        for (int r = 0; r < 2; r++) {
            free(grads[r]);
            free(stats[r]);
            yc_golden_free(&gd[r]);
        }
    }
}
END_TEST

/* S(w) = sum over levels of <head_l(w), G_l> in double, G the head gradients of the step: its
 * gradient with respect to the parameters is exactly what backward computes from G. */
static double surrogate(yc_golden *gd, float *const G[])
{
    ck_assert_int_eq(yc_tensor_set_f32(gd->be, yc_graph_input(gd->step->g), gd->images), YC_OK);
    ck_assert_msg(yc_graph_forward(gd->step->g) == YC_OK, "%s", yc_last_error());
    double s = 0;
    for (int l = 0; l < gd->m->nl; l++) {
        const yc_tensor *t = yc_graph_head(gd->step->g, l);
        size_t n = yc_tensor_elems(t);
        float *h = malloc(n * sizeof *h);
        ck_assert_int_eq(yc_tensor_get_f32(gd->be, t, h), YC_OK);
        for (size_t i = 0; i < n; i++)
            s += (double)h[i] * G[l][i];
        free(h);
    }
    return s;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A narrow YOLOv5n6 (four levels), one class, batch 3, 128x128, random weights and targets:
 * backward through the whole network must match central differences.  The loss itself is not
 * differentiated numerically (YOLOv5 detaches the IoU it uses as objectness target, so the
 * gradient it defines is not the derivative of the loss value; test_loss checks dL/dhead); here
 * the head gradients G of a real step are held fixed and S(w) = <heads(w), G> is differentiated.
 * Exercises what the dumps do not: P6, nc = 1 (no class loss), label smoothing, an odd batch.
 *
 * Checked: every fourth Conv module (its conv weight, BatchNorm weight and bias) and every
 * Detect conv's weight and bias, each along three directions: the tensor's own gradient (the
 * largest derivative, for a wrong scale) and two random unit directions (for gradients that are
 * wrong in some elements only, which no derivative along the gradient itself can see). */
START_TEST(p6_gradients_match_finite_differences)
{
    char src[1024], path[] = "/tmp/yolocl-p6-XXXXXX";
    ck_assert_int_eq(yc_data_path("models/yolov5n6.yaml", src, sizeof src), YC_OK);
    char *text = NULL;
    size_t len;
    ck_assert_int_eq(yc_read_file(src, &text, &len), YC_OK);
    char *wm = strstr(text, "width_multiple: 0.25");
    ck_assert_ptr_nonnull(wm);
    memcpy(wm, "width_multiple: 0.10", 20);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq((int)write(fd, text, len), (int)len);
    close(fd);
    free(text);

    yc_golden gd;
    memset(&gd, 0, sizeof gd);
    yc_model_cfg *cfg = NULL;
    ck_assert_msg(yc_model_cfg_load(&cfg, path, 1) == YC_OK, "%s", yc_last_error());
    unlink(path);
    ck_assert_msg(yc_model_new(&gd.m, cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(gd.m->nl, 4);
    ck_assert_int_eq(yc_device_open("cpu", 0, false, &gd.be), YC_OK);
    ck_assert_int_eq(yc_model_alloc(gd.m, gd.be), YC_OK);
    ck_assert_int_eq(yc_model_init_weights(gd.m, 7), YC_OK);
    const int B = 3, S = 128;
    yc_rng rng;
    yc_rng_seed(&rng, 11, 0);
    gd.images = malloc((size_t)B * 3 * S * S * sizeof *gd.images);
    gd.nt = 12;
    gd.targets = malloc((size_t)gd.nt * 6 * sizeof *gd.targets);
    for (size_t i = 0; i < (size_t)B * 3 * S * S; i++)
        gd.images[i] = (float)yc_rng_uniform(&rng);
    for (int t = 0; t < gd.nt; t++) {
        float *r = gd.targets + t * 6;
        r[0] = (float)(t % B);
        r[1] = 0;
        r[2] = (float)yc_rng_range(&rng, 0.1, 0.9);
        r[3] = (float)yc_rng_range(&rng, 0.1, 0.9);
        r[4] = (float)yc_rng_range(&rng, 0.05, 0.6);
        r[5] = (float)yc_rng_range(&rng, 0.05, 0.6);
    }
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_step_loss_params(gd.m, &hyp, S, 0.1f, &lp);
    ck_assert_int_eq(yc_step_new(&gd.step, gd.m, B, S, S, &lp), YC_OK);
    ck_assert_int_eq(yc_step_keep_heads(gd.step), YC_OK);
    yc_model *m = gd.m;
    float *w = malloc(m->param_elems * sizeof *w), *g = malloc(m->param_elems * sizeof *g);
    ck_assert(w && g);
    ck_assert_int_eq(yc_model_zero_grad(m), YC_OK);
    ck_assert_int_eq(yc_step_run(gd.step, gd.images, gd.targets, gd.nt, &gd.res), YC_OK);
    ck_assert_int_eq(m->be->iface->buffer_read(m->be, m->grad_buf, 0, g,
                                               m->param_elems * sizeof *g), YC_OK);
    ck_assert_int_eq(m->be->iface->buffer_read(m->be, m->param_buf, 0, w,
                                               m->param_elems * sizeof *w), YC_OK);
    float *G[YC_MAX_LEVELS];
    for (int l = 0; l < m->nl; l++) {
        size_t n = yc_tensor_elems(yc_graph_head(gd.step->g, l));
        G[l] = malloc(n * sizeof *G[l]);
        memcpy(G[l], gd.step->grad[l], n * sizeof *G[l]);
    }
    yc_rng dir_rng;
    yc_rng_seed(&dir_rng, 5, 0);
    int checked[3] = {0}, conv_seen = 0; /* conv weights, BatchNorm, Detect */
    bool module = false;
    for (int i = 0; i < m->nparams; i++) {
        yc_param *p = &m->params[i];
        bool detect = p->layer == m->detect_layer, bn = strstr(p->name, ".bn.") != NULL;
        if (ends_with(p->name, ".conv.weight"))
            module = conv_seen++ % 4 == 0;
        if (!detect && !module)
            continue;
        double norm = 0;
        for (size_t j = 0; j < p->numel; j++)
            norm += (double)g[p->offset + j] * g[p->offset + j];
        norm = sqrt(norm);
        ck_assert_msg(isfinite(norm) && norm > 0, "%s: gradient norm %g", p->name, norm);
        /* S is linear in the Detect convs' parameters: a large step is exact.  BN makes S
         * invariant to the scale of a conv's weights (strong curvature): small steps there. */
        const double eps = detect ? 1e-2 : bn ? 1e-3 : 1e-4;
        float *orig = malloc(p->numel * sizeof *orig);
        double *u = malloc(p->numel * sizeof *u);
        ck_assert(orig && u);
        memcpy(orig, w + p->offset, p->numel * sizeof *orig);
        for (int d = 0; d < 3; d++) {
            double un = 0, an = 0;
            for (size_t j = 0; j < p->numel; j++) {
                u[j] = d == 0 ? g[p->offset + j] : yc_rng_normal(&dir_rng);
                un += u[j] * u[j];
            }
            un = sqrt(un);
            for (size_t j = 0; j < p->numel; j++) {
                u[j] /= un;
                an += u[j] * g[p->offset + j];
            }
            double l[2];
            for (int s = 0; s < 2; s++) {
                for (size_t j = 0; j < p->numel; j++)
                    w[p->offset + j] = (float)(orig[j] + (s ? -eps : eps) * u[j]);
                ck_assert_int_eq(yc_tensor_set_f32(m->be, &p->t, w + p->offset), YC_OK);
                l[s] = surrogate(&gd, G);
            }
            double fdv = (l[0] - l[1]) / (2 * eps);
            /* the error against the scale of the tensor's gradient: a random direction's
             * derivative can be small next to the forward's float32 noise */
            double e = fabs(fdv - an) / norm;
            printf("  %-34s %s: analytic %11.4e, finite difference %11.4e (error %.1e of |g| "
                   "%.3g)\n",
                   p->name, d ? "random  " : "gradient", an, fdv, e, norm);
            ck_assert_msg(e < YC_FD_TOL, "%s, direction %d: analytic %.6g, finite difference "
                          "%.6g (|g| %.4g)", p->name, d, an, fdv, norm);
        }
        memcpy(w + p->offset, orig, p->numel * sizeof *orig);
        ck_assert_int_eq(yc_tensor_set_f32(m->be, &p->t, orig), YC_OK);
        free(orig);
        free(u);
        checked[detect ? 2 : bn ? 1 : 0]++;
    }
    printf("  checked %d conv weights, %d BatchNorm weights and biases, %d Detect tensors\n",
           checked[0], checked[1], checked[2]);
    ck_assert_int_ge(checked[0], 12);
    ck_assert_int_eq(checked[1], 2 * checked[0]);
    ck_assert_int_eq(checked[2], 2 * m->nl);
    for (int l = 0; l < m->nl; l++)
        free(G[l]);
    free(w);
    free(g);
    yc_golden_free(&gd);
}
END_TEST

#else /* YC_TEST_SHARED */

static const char *const ref_files[] = {
    "ref/yolov5n_init_state_dict.safetensors", "ref/train_step_io.safetensors",
    "ref/yolov5n_init_grads.safetensors", "ref/yolov5n_bn_running_after_train_forward.safetensors",
    NULL};

START_TEST(yolov5n_320_matches_pytorch)
{
    char weights[1200], io[1200], grads[1200], bn[1200], cfg[1024];
    yc_test_shared_path(ref_files[0], weights, sizeof weights);
    yc_test_shared_path(ref_files[1], io, sizeof io);
    yc_test_shared_path(ref_files[2], grads, sizeof grads);
    yc_test_shared_path(ref_files[3], bn, sizeof bn);
    ck_assert_int_eq(yc_data_path("models/yolov5n.yaml", cfg, sizeof cfg), YC_OK);
    yc_golden gd;
    printf("yolov5n (80 classes, 320x320, batch 2, two coco128 images):\n");
    yc_golden_step(&gd, "cpu", cfg, 0, weights, io, "input", NULL);
    static const char *const heads[] = {"head0_stride8", "head1_stride16", "head2_stride32"};
    yc_golden_check_heads(&gd, io, heads, TOL_OUT);
    yc_st_file *f = NULL;
    ck_assert_msg(yc_st_open(&f, io) == YC_OK, "%s", yc_last_error());
    float *total = yc_golden_read(f, "loss_total", NULL),
          *items = yc_golden_read(f, "loss_items_box_obj_cls", NULL);
    ck_assert(total && items);
    float loss[4] = {total[0], items[0], items[1], items[2]};
    yc_golden_check_loss(&gd, loss, TOL_OUT);
    free(total);
    free(items);
    yc_st_close(f);
    free(yc_golden_check_grads(&gd, grads, TOL_GRAD));
    /* BN running statistics after the train-mode forward (momentum 0.03, unbiased variance) */
    yc_golden_check_bn_stats(&gd, bn, TOL_OUT);
    yc_golden_free(&gd);
}
END_TEST

#endif

int main(void)
{
#ifdef YC_TEST_SHARED
    /* before anything is allocated: a sanitizer build counts what a skip leaves as a leak */
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED,
                            "%s not found (the PyTorch reference dumps live in ../shared)",
                            missing);
#endif
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("step");
    tcase_set_timeout(tc, 600);
#ifdef YC_TEST_SHARED
    tcase_add_test(tc, yolov5n_320_matches_pytorch);
#else
    tcase_add_test(tc, tiny_step_matches_pytorch);
    tcase_add_test(tc, recompute_gives_identical_bits);
    tcase_add_test(tc, p6_gradients_match_finite_differences);
#endif
    suite_add_tcase(s, tc);
    return yc_harness_run(s, false);
}
