/* Tests of src/nn/loss.c, YOLOv5 v7.0 ComputeLoss (docs/YOLOV5.md section 2):
 * - build_targets on the worked example and the edge cases of docs/YOLOV5.md 2.2, entry by entry;
 * - CIoU and the loss gradient against central finite differences;
 * - duplicate assignments (last objectness target wins), input validation, buffer reuse;
 * - the tiny fixture's loss parts (tests/data/tiny).
 * test_loss_ref (built from this file with YC_TEST_SHARED) compares the PyTorch reference step
 * (../shared/ref/train_step_io.safetensors: assignments, loss parts, head gradients) and exits 77
 * without it. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loss.h"
#include "rng.h"
#include "safetensors.h"
#include "util.h"
#include "harness.h"
#include "yctest.h"

/* YOLOv5 P5 anchors in grid units (docs/YOLOV5.md 1.7). */
static const float p5_anchors[3][3][2] = {
    {{1.25f, 1.625f}, {2.0f, 3.75f}, {4.125f, 2.875f}},
    {{1.875f, 3.8125f}, {3.875f, 2.8125f}, {3.6875f, 7.4375f}},
    {{3.625f, 2.8125f}, {4.875f, 6.1875f}, {11.65625f, 10.1875f}},
};

/* Parameters of a P5 model with nc classes at imgsz, hyp.scratch-low gains, no smoothing/focal. */
static yc_loss_params p5_params(int nc, int imgsz)
{
    yc_loss_params lp;
    memset(&lp, 0, sizeof lp);
    lp.nc = nc;
    lp.na = 3;
    lp.nl = 3;
    memcpy(lp.anchors, p5_anchors, sizeof p5_anchors);
    lp.cls_pw = 1.0f;
    lp.obj_pw = 1.0f;
    lp.anchor_t = 4.0f;
    yc_loss_params_gains(&lp, 0.05f, 1.0f, 0.5f, imgsz);
    return lp;
}

#ifndef YC_TEST_SHARED

/* Grids of the three P5 levels at imgsz (strides 8, 16, 32), no data. */
static void p5_grids(yc_loss_head heads[3], int imgsz)
{
    memset(heads, 0, 3 * sizeof *heads);
    for (int l = 0; l < 3; l++)
        heads[l].ny = heads[l].nx = imgsz / (8 << l);
}

/* One expected assignment. */
typedef struct {
    int a, gi, gj;
    float tx, ty;
} want_entry;

/* Compares a level's assignments with want[] (all from image b, class c, size (gw, gh)). */
static void check_set(const yc_target_set *s, const want_entry *want, int n, int b, int c, float gw,
                      float gh, const float anchors[3][2], const char *what)
{
    ck_assert_msg(s->n == n, "%s: %d assignments, expected %d", what, s->n, n);
    for (int e = 0; e < n; e++) {
        const want_entry *w = &want[e];
        ck_assert_msg(s->b[e] == b && s->cls[e] == c && s->a[e] == w->a && s->gi[e] == w->gi &&
                          s->gj[e] == w->gj,
                      "%s entry %d: b %d a %d gj %d gi %d cls %d, expected b %d a %d gj %d gi %d "
                      "cls %d",
                      what, e, s->b[e], s->a[e], s->gj[e], s->gi[e], s->cls[e], b, w->a, w->gj,
                      w->gi, c);
        const float *t = s->tbox + e * 4;
        ck_assert_msg(fabsf(t[0] - w->tx) < 1e-5f && fabsf(t[1] - w->ty) < 1e-5f &&
                          fabsf(t[2] - gw) < 1e-5f && fabsf(t[3] - gh) < 1e-5f,
                      "%s entry %d: tbox (%g, %g, %g, %g), expected (%g, %g, %g, %g)", what, e,
                      (double)t[0], (double)t[1], (double)t[2], (double)t[3], (double)w->tx,
                      (double)w->ty, (double)gw, (double)gh);
        ck_assert_msg(s->anch[e * 2] == anchors[w->a][0] && s->anch[e * 2 + 1] == anchors[w->a][1],
                      "%s entry %d: anchor (%g, %g)", what, e, (double)s->anch[e * 2],
                      (double)s->anch[e * 2 + 1]);
    }
}

START_TEST(test_gains)
{
    yc_loss_params lp = p5_params(80, 320);
    ck_assert_float_eq_tol(lp.box_gain, 0.05f, 1e-9f);
    ck_assert_float_eq_tol(lp.cls_gain, 0.5f, 1e-9f);
    ck_assert_float_eq_tol(lp.obj_gain, 0.25f, 1e-9f);
    ck_assert(lp.balance[0] == 4.0f && lp.balance[1] == 1.0f && lp.balance[2] == 0.4f);

    lp = p5_params(3, 64);
    ck_assert_float_eq_tol(lp.cls_gain, 0.01875f, 1e-9f);
    ck_assert_float_eq_tol(lp.obj_gain, 0.01f, 1e-9f);

    lp.nl = 4;
    yc_loss_params_gains(&lp, 0.05f, 0.7f, 0.3f, 1280);
    ck_assert_float_eq_tol(lp.box_gain, 0.0375f, 1e-9f);
    ck_assert_float_eq_tol(lp.cls_gain, 0.3f * 3 / 80 * 0.75f, 1e-9f);
    ck_assert_float_eq_tol(lp.obj_gain, 0.7f * 4 * 0.75f, 1e-6f);
    ck_assert(lp.balance[0] == 4.0f && lp.balance[1] == 1.0f && lp.balance[2] == 0.25f &&
              lp.balance[3] == 0.06f);
}
END_TEST

/* docs/YOLOV5.md 2.2 item 5: yolov5s at 640, one target of class 1 at (0.26, 0.71), size
 * (0.03, 0.04). */
START_TEST(test_worked_example)
{
    yc_loss_params lp = p5_params(80, 640);
    yc_loss_ctx *ctx = yc_loss_new(&lp);
    ck_assert_ptr_nonnull(ctx);
    yc_loss_head heads[3];
    p5_grids(heads, 640);
    const float tg[6] = {0, 1, 0.26f, 0.71f, 0.03f, 0.04f};
    const yc_target_set *sets[3];
    ck_assert_int_eq(yc_loss_build_targets(ctx, 1, heads, tg, 1, sets), YC_OK);

    /* P3: all anchors; centre (20, 56), right (21, 56), lower (20, 57) */
    const want_entry p3[9] = {
        {0, 20, 56, 0.8f, 0.8f},  {1, 20, 56, 0.8f, 0.8f},  {2, 20, 56, 0.8f, 0.8f},
        {0, 21, 56, -0.2f, 0.8f}, {1, 21, 56, -0.2f, 0.8f}, {2, 21, 56, -0.2f, 0.8f},
        {0, 20, 57, 0.8f, -0.2f}, {1, 20, 57, 0.8f, -0.2f}, {2, 20, 57, 0.8f, -0.2f},
    };
    check_set(sets[0], p3, 9, 0, 1, 2.4f, 3.2f, p5_anchors[0], "P3");
    /* P4: anchors 0 and 1 (7.4375/1.6 = 4.65 fails); centre (10, 28), left (9, 28),
     * upper (10, 27) */
    const want_entry p4[6] = {
        {0, 10, 28, 0.4f, 0.4f}, {1, 10, 28, 0.4f, 0.4f}, {0, 9, 28, 1.4f, 0.4f},
        {1, 9, 28, 1.4f, 0.4f},  {0, 10, 27, 0.4f, 1.4f}, {1, 10, 27, 0.4f, 1.4f},
    };
    check_set(sets[1], p4, 6, 0, 1, 1.2f, 1.6f, p5_anchors[1], "P4");
    /* P5: every ratio >= 4.5 */
    ck_assert_int_eq(sets[2]->n, 0);
    yc_loss_free(ctx);
}
END_TEST

/* docs/YOLOV5.md 2.2 item 4: an exact-integer centre (0.5, 0.5) on P4 at 640 (gx = gy = 20.0) gives
 * the centre cell three times per passing anchor (centre, right and down all truncate to 20). */
START_TEST(test_integer_centre_duplicates)
{
    yc_loss_params lp = p5_params(80, 640);
    yc_loss_ctx *ctx = yc_loss_new(&lp);
    ck_assert_ptr_nonnull(ctx);
    yc_loss_head heads[3];
    p5_grids(heads, 640);
    const float tg[6] = {0, 7, 0.5f, 0.5f, 0.1f, 0.2f};
    const yc_target_set *sets[3];
    ck_assert_int_eq(yc_loss_build_targets(ctx, 1, heads, tg, 1, sets), YC_OK);
    /* gwh = (4, 8): all three P4 anchors pass; slots centre, left, up, right, down */
    want_entry p4[15];
    for (int slot = 0; slot < 5; slot++)
        for (int a = 0; a < 3; a++) {
            want_entry *w = &p4[slot * 3 + a];
            w->a = a;
            w->gi = slot == 1 ? 19 : 20;
            w->gj = slot == 2 ? 19 : 20;
            w->tx = slot == 1 ? 1.0f : 0.0f;
            w->ty = slot == 2 ? 1.0f : 0.0f;
        }
    check_set(sets[1], p4, 15, 0, 7, 4.0f, 8.0f, p5_anchors[1], "P4");
    for (int a = 0; a < 3; a++) {
        int centre = 0;
        for (int e = 0; e < sets[1]->n; e++)
            centre += sets[1]->a[e] == a && sets[1]->gi[e] == 20 && sets[1]->gj[e] == 20;
        ck_assert_int_eq(centre, 3);
    }
    yc_loss_free(ctx);
}
END_TEST

/* docs/YOLOV5.md 2.2 item 4: x = 1.0, y = 0.3 on P3 at 640 (gx = 80, gy = 24.0): the centre index
 * 80 is clamped to 79 with tbox x = 1.0; the left candidate truncates 79.5 to the same cell; 12
 * entries in 2 distinct cells. */
START_TEST(test_edge_clamp)
{
    yc_loss_params lp = p5_params(80, 640);
    yc_loss_ctx *ctx = yc_loss_new(&lp);
    ck_assert_ptr_nonnull(ctx);
    yc_loss_head heads[3];
    p5_grids(heads, 640);
    const float tg[6] = {0, 3, 1.0f, 0.3f, 0.03f, 0.04f};
    const yc_target_set *sets[3];
    ck_assert_int_eq(yc_loss_build_targets(ctx, 1, heads, tg, 1, sets), YC_OK);
    /* slots present: centre, left (79.5 -> 79), up (23.5 -> 23), down (24.5 -> 24); no right
     * (gxi = 0 is not > 1) */
    const int slot_gj[4] = {24, 24, 23, 24};
    const float slot_ty[4] = {0.0f, 0.0f, 1.0f, 0.0f};
    want_entry p3[12];
    for (int s = 0; s < 4; s++)
        for (int a = 0; a < 3; a++)
            p3[s * 3 + a] = (want_entry){a, 79, slot_gj[s], 1.0f, slot_ty[s]};
    check_set(sets[0], p3, 12, 0, 3, 2.4f, 3.2f, p5_anchors[0], "P3");
    yc_loss_free(ctx);
}
END_TEST

START_TEST(test_validation)
{
    yc_loss_params lp = p5_params(4, 320);
    yc_loss_ctx *ctx = yc_loss_new(&lp);
    ck_assert_ptr_nonnull(ctx);
    yc_loss_head heads[3];
    p5_grids(heads, 320);
    float tg[3][6] = {{0, 1, 0.5f, 0.5f, 0.1f, 0.1f},
                      {1, 3, 0.2f, 0.3f, 0.1f, 0.2f},
                      {0, 2, 0.4f, 0.4f, 0.2f, 0.1f}};
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_OK);

    tg[2][1] = 4;
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    ck_assert_msg(strstr(yc_last_error(), "row 2") && strstr(yc_last_error(), "class"), "%s",
                  yc_last_error());
    tg[2][1] = -1;
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    tg[2][1] = 1.5f;
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    tg[2][1] = 2;

    tg[1][0] = 2;
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    ck_assert_msg(strstr(yc_last_error(), "row 1") && strstr(yc_last_error(), "image"), "%s",
                  yc_last_error());
    tg[1][0] = 1;

    tg[0][3] = NAN;
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    ck_assert_msg(strstr(yc_last_error(), "row 0") && strstr(yc_last_error(), "not finite"), "%s",
                  yc_last_error());
    tg[0][3] = INFINITY;
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    tg[0][3] = 0.5f;
    tg[0][4] = -0.1f;
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    tg[0][4] = 0.1f;

    ck_assert_int_eq(yc_loss_build_targets(ctx, 0, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    heads[1].nx = 0;
    ck_assert_int_eq(yc_loss_build_targets(ctx, 2, heads, &tg[0][0], 3, NULL), YC_EFORMAT);
    heads[1].nx = 20;
    /* compute needs the data */
    yc_loss_result res;
    ck_assert_int_eq(yc_loss_compute(ctx, 2, heads, &tg[0][0], 3, &res), YC_EFORMAT);
    yc_loss_free(ctx);

    lp.nc = 0;
    ck_assert_ptr_null(yc_loss_new(&lp));
    lp.nc = 4;
    lp.anchors[5] = 0.0f;
    ck_assert_ptr_null(yc_loss_new(&lp));
    ck_assert_msg(strstr(yc_last_error(), "anchor"), "%s", yc_last_error());
}
END_TEST

/* An independent, plain forward CIoU (docs/YOLOV5.md 2.4) for the finite-difference checks.  alpha
 * is computed under no_grad in YOLOv5, so the analytic gradient treats it as a constant: when
 * alpha_in is not NULL that value is used instead; *alpha_out receives the alpha of this point. */
static double ref_ciou(const double p[4], const double t[4], const double *alpha_in,
                       double *alpha_out)
{
    const double eps = 1e-7;
    double px1 = p[0] - p[2] / 2, px2 = p[0] + p[2] / 2, py1 = p[1] - p[3] / 2,
           py2 = p[1] + p[3] / 2;
    double tx1 = t[0] - t[2] / 2, tx2 = t[0] + t[2] / 2, ty1 = t[1] - t[3] / 2,
           ty2 = t[1] + t[3] / 2;
    double iw = fmax(fmin(px2, tx2) - fmax(px1, tx1), 0),
           ih = fmax(fmin(py2, ty2) - fmax(py1, ty1), 0);
    double iou = iw * ih / (p[2] * p[3] + t[2] * t[3] - iw * ih + eps);
    double cw = fmax(px2, tx2) - fmin(px1, tx1), ch = fmax(py2, ty2) - fmin(py1, ty1);
    double rho2 = (pow(tx1 + tx2 - px1 - px2, 2) + pow(ty1 + ty2 - py1 - py2, 2)) / 4;
    double v = 4 / (M_PI * M_PI) * pow(atan(t[2] / t[3]) - atan(p[2] / p[3]), 2);
    double alpha = v / (v - iou + (1 + eps));
    if (alpha_out)
        *alpha_out = alpha;
    return iou - (rho2 / (cw * cw + ch * ch + eps) + v * (alpha_in ? *alpha_in : alpha));
}

/* CIoU values and the gradient against central differences (alpha frozen), including min/max ties
 * (the halved gradient equals the mean of the one-sided derivatives, which is what a central
 * difference measures) and boxes that do not overlap. */
START_TEST(test_ciou)
{
    /* identical boxes: iou = A/(A + eps), rho2 = v = 0 */
    const double b[4] = {0.3, 0.7, 2.0, 1.5};
    ck_assert_double_eq_tol(yc_loss_ciou(b, b, NULL), 3.0 / (3.0 + 1e-7), 1e-15);

    /* by hand: prediction [0,2]x[0,2], target [1,3]x[1,2] */
    const double p1[4] = {1.0, 1.0, 2.0, 2.0}, t1[4] = {2.0, 1.5, 2.0, 1.0};
    double iou = 1.0 / (4.0 + 2.0 - 1.0 + 1e-7);
    double c2 = 3.0 * 3.0 + 2.0 * 2.0 + 1e-7, rho2 = 1.0 + 0.25;
    double v = 4.0 / (M_PI * M_PI) * pow(atan(2.0) - atan(1.0), 2);
    double alpha = v / (v - iou + (1 + 1e-7));
    ck_assert_double_eq_tol(yc_loss_ciou(p1, t1, NULL), iou - (rho2 / c2 + v * alpha), 1e-14);

    const double cases[][2][4] = {
        {{0.4, 0.6, 1.3, 2.1}, {0.55, 0.35, 1.7, 1.9}},
        {{0.75, 0.5, 0.5, 1.0}, {0.5, 0.5, 1.0, 1.0}}, /* right edges tie, top/bottom tie */
        {{0.5, 0.5, 1.0, 1.0}, {0.5, 0.5, 1.0, 1.0}},  /* identical: every min/max ties */
        {{-0.3, 1.2, 0.4, 0.5}, {0.9, 0.1, 0.6, 0.8}}, /* no overlap */
        {{1.1, -0.2, 3.5, 0.7}, {0.2, 0.4, 0.3, 2.6}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const double *p = cases[i][0], *t = cases[i][1];
        double g[4], a0;
        double c = yc_loss_ciou(p, t, g);
        ck_assert_double_eq_tol(c, ref_ciou(p, t, NULL, &a0), 1e-14);
        for (int k = 0; k < 4; k++) {
            double pp[4], pm[4];
            memcpy(pp, p, sizeof pp);
            memcpy(pm, p, sizeof pm);
            const double h = 1e-6;
            pp[k] += h;
            pm[k] -= h;
            double fd = (ref_ciou(pp, t, &a0, NULL) - ref_ciou(pm, t, &a0, NULL)) / (2 * h);
            /* at a kink the central difference is off by O(h) */
            ck_assert_msg(fabs(fd - g[k]) < 2e-6 + 1e-6 * fabs(fd),
                          "case %zu d/dp[%d]: analytic %.12g, finite difference %.12g", i, k, g[k],
                          fd);
        }
    }

    /* boxes that touch (iw = 0 exactly): clamp(0) passes the gradient at 0, so d/dx and d/dw are
     * the one-sided derivatives towards overlap, not the mean a central difference gives */
    const double pt[4] = {0.5, 0.4, 1.0, 1.2}, tt[4] = {1.5, 0.6, 1.0, 0.8};
    double g[4], a0;
    yc_loss_ciou(pt, tt, g);
    ref_ciou(pt, tt, NULL, &a0);
    for (int k = 0; k < 4; k += 2) {
        double pp[4];
        memcpy(pp, pt, sizeof pp);
        pp[k] += 1e-6;
        double fwd = (ref_ciou(pp, tt, &a0, NULL) - ref_ciou(pt, tt, &a0, NULL)) / 1e-6;
        ck_assert_msg(fabs(fwd - g[k]) < 2e-6 + 1e-5 * fabs(fwd),
                      "touching boxes d/dp[%d]: analytic %.12g, forward difference %.12g", k, g[k],
                      fwd);
    }
}
END_TEST

/* The strict conditions of docs/YOLOV5.md 2.2 step 3 at their boundaries, on the 8 x 8 P3 grid of a
 * 64 image: a ratio of exactly 4 (w/anchor or anchor/h) fails; a centre at gx = 1.0 or gyi = 1.0
 * gets no neighbour towards that border; a centre half-way across its cell (gxy % 1 = 0.5) gets no
 * neighbour on either side of that axis. */
START_TEST(test_strict_boundaries)
{
    yc_loss_params lp = p5_params(2, 64);
    yc_loss_ctx *ctx = yc_loss_new(&lp);
    ck_assert_ptr_nonnull(ctx);
    yc_loss_head heads[3];
    p5_grids(heads, 64);
    const yc_target_set *sets[3];
    /* gxy = (1, 7), gwh = (5, 2): anchor 0 has w ratio 5/1.25 = 4.0 exactly and fails */
    const float tg[6] = {0, 1, 0.125f, 0.875f, 0.625f, 0.25f};
    ck_assert_int_eq(yc_loss_build_targets(ctx, 1, heads, tg, 1, sets), YC_OK);
    /* centre (1, 7); left: gx = 1 is not > 1; up: gj 6; right: gxi = 7, 1.5 -> 1 (the centre
     * again); down: gyi = 1 is not > 1 */
    const want_entry p3[6] = {
        {1, 1, 7, 0.0f, 0.0f}, {2, 1, 7, 0.0f, 0.0f}, {1, 1, 6, 0.0f, 1.0f},
        {2, 1, 6, 0.0f, 1.0f}, {1, 1, 7, 0.0f, 0.0f}, {2, 1, 7, 0.0f, 0.0f},
    };
    check_set(sets[0], p3, 6, 0, 1, 5.0f, 2.0f, p5_anchors[0], "P3");

    /* gxy = (2.5, 2.25), gwh = (2, 2), every anchor within the ratio: gx % 1 = 0.5 and gxi % 1 =
     * 0.5 are not < 0.5 (no left or right neighbour); gy % 1 = 0.25 gives the cell above, gyi % 1
     * = 0.75 none below */
    const float tgh[6] = {0, 1, 0.3125f, 0.28125f, 0.25f, 0.25f};
    ck_assert_int_eq(yc_loss_build_targets(ctx, 1, heads, tgh, 1, sets), YC_OK);
    const want_entry half[6] = {
        {0, 2, 2, 0.5f, 0.25f}, {1, 2, 2, 0.5f, 0.25f}, {2, 2, 2, 0.5f, 0.25f},
        {0, 2, 1, 0.5f, 1.25f}, {1, 2, 1, 0.5f, 1.25f}, {2, 2, 1, 0.5f, 1.25f},
    };
    check_set(sets[0], half, 6, 0, 1, 2.0f, 2.0f, p5_anchors[0], "P3, centre half-way");

    /* gwh = (2.5, 0.40625): anchor 0 has h ratio 0.25, 1/r = 4.0 exactly; the others are further */
    const float tg2[6] = {0, 0, 0.3f, 0.3f, 0.3125f, 0.05078125f};
    ck_assert_int_eq(yc_loss_build_targets(ctx, 1, heads, tg2, 1, sets), YC_OK);
    ck_assert_int_eq(sets[0]->n, 0);
    yc_loss_free(ctx);
}
END_TEST

/* ---- random problems for the gradient checks ---- */

/* sigmoid for the hand-computed expectations */
static double sigm(double x)
{
    return 1 / (1 + exp(-x));
}

typedef struct {
    yc_loss_params lp;
    int batch, nt;
    yc_loss_head heads[2];
    float *p[2], *g[2];
    size_t count[2];
    float targets[12 * 6];
} problem;

static void problem_init(problem *pr, int nc, float smoothing, float gamma, float cls_pw,
                         float obj_pw, uint64_t seed)
{
    memset(pr, 0, sizeof *pr);
    yc_loss_params *lp = &pr->lp;
    lp->nc = nc;
    lp->na = 3;
    lp->nl = 2;
    /* two levels with non-square grids (6 x 8 and 3 x 4) to catch x/y mix-ups */
    static const float anch[2][3][2] = {{{1.0f, 1.5f}, {2.0f, 1.25f}, {2.5f, 3.0f}},
                                        {{0.75f, 1.0f}, {1.5f, 1.25f}, {2.0f, 2.5f}}};
    memcpy(lp->anchors, anch, sizeof anch);
    lp->anchor_t = 4.0f;
    lp->cls_pw = cls_pw;
    lp->obj_pw = obj_pw;
    lp->label_smoothing = smoothing;
    lp->fl_gamma = gamma;
    lp->box_gain = 0.05f;
    lp->obj_gain = 0.7f;
    lp->cls_gain = 0.3f;
    lp->balance[0] = 4.0f;
    lp->balance[1] = 1.0f;
    pr->batch = 2;

    yc_rng rng;
    yc_rng_seed(&rng, seed, 1);
    const int no = nc + 5;
    for (int l = 0; l < 2; l++) {
        yc_loss_head *h = &pr->heads[l];
        h->ny = l == 0 ? 6 : 3;
        h->nx = l == 0 ? 8 : 4;
        /* a gap of 5 elements between images: must be left untouched */
        h->img_stride = (size_t)3 * no * h->ny * h->nx + 5;
        pr->count[l] = h->img_stride * (size_t)pr->batch;
        pr->p[l] = malloc(pr->count[l] * sizeof(float));
        pr->g[l] = malloc(pr->count[l] * sizeof(float));
        ck_assert(pr->p[l] && pr->g[l]);
        for (size_t i = 0; i < pr->count[l]; i++) {
            pr->p[l][i] = (float)(1.5 * yc_rng_normal(&rng));
            pr->g[l][i] = 12345.0f;
        }
        h->p = pr->p[l];
        h->grad = pr->g[l];
    }
    /* 9 random targets, one with an exact-integer centre (duplicates), one at the border */
    pr->nt = 11;
    for (int t = 0; t < 9; t++) {
        float *r = pr->targets + t * 6;
        r[0] = (float)yc_rng_below(&rng, 2);
        r[1] = (float)yc_rng_below(&rng, (uint32_t)nc);
        r[2] = (float)yc_rng_range(&rng, 0.02, 0.98);
        r[3] = (float)yc_rng_range(&rng, 0.02, 0.98);
        r[4] = (float)yc_rng_range(&rng, 0.05, 0.6);
        r[5] = (float)yc_rng_range(&rng, 0.05, 0.6);
    }
    const float extra[2][6] = {{0, 0, 0.5f, 0.5f, 0.25f, 0.3f}, {1, 0, 0.995f, 0.1f, 0.2f, 0.15f}};
    memcpy(pr->targets + 9 * 6, extra, sizeof extra);
}

static void problem_free(problem *pr)
{
    for (int l = 0; l < 2; l++) {
        free(pr->p[l]);
        free(pr->g[l]);
    }
}

/* Box part of the total computed independently from the assignments (ref_ciou, section 2.3):
 * bs * box_gain * sum over levels of mean(1 - CIoU).  alpha[] holds one alpha per assignment: it
 * is filled when fill_alpha is true, and used frozen otherwise. */
static double ref_box_total(problem *pr, const yc_target_set *const *sets, double *alpha,
                            bool fill_alpha)
{
    const int no = pr->lp.nc + 5;
    double total = 0;
    int j = 0;
    for (int l = 0; l < 2; l++) {
        const yc_target_set *s = sets[l];
        const yc_loss_head *h = &pr->heads[l];
        const size_t plane = (size_t)h->ny * h->nx;
        double sum = 0;
        for (int e = 0; e < s->n; e++, j++) {
            const float *pe = pr->p[l] + s->b[e] * h->img_stride + (size_t)s->a[e] * no * plane +
                              (size_t)s->gj[e] * h->nx + s->gi[e];
            double pb[4], tb[4];
            for (int k = 0; k < 2; k++)
                pb[k] = 2 * sigm(pe[k * plane]) - 0.5;
            for (int k = 2; k < 4; k++)
                pb[k] = pow(2 * sigm(pe[k * plane]), 2) * s->anch[e * 2 + k - 2];
            for (int k = 0; k < 4; k++)
                tb[k] = s->tbox[e * 4 + k];
            sum += 1 - (fill_alpha ? ref_ciou(pb, tb, NULL, &alpha[j])
                                   : ref_ciou(pb, tb, &alpha[j], NULL));
        }
        if (s->n)
            total += sum / s->n;
    }
    return pr->batch * (double)pr->lp.box_gain * total;
}

/* Checks that the gap after each image's values was not written. */
static void check_gaps(problem *pr)
{
    const int no = pr->lp.nc + 5;
    for (int l = 0; l < 2; l++) {
        const yc_loss_head *h = &pr->heads[l];
        for (int b = 0; b < pr->batch; b++)
            for (size_t i = (size_t)3 * no * h->ny * h->nx; i < h->img_stride; i++)
                ck_assert(pr->g[l][b * h->img_stride + i] == 12345.0f);
    }
}

/* Central differences against the analytic gradient in every logit.
 * Objectness and class logits: differences of the full total.  Box logits: the objectness target
 * is the detached CIoU and alpha is detached too, so the total's differences would include terms
 * the gradient (correctly) omits; they are checked with box_gain alone against ref_box_total with
 * alpha frozen, and the gains of the other parts set to 0. */
static void fd_check(problem *pr, const char *what)
{
    double gmax = 0, errmax = 0;
    int checked = 0;
    const int no = pr->lp.nc + 5;
    for (int part = 0; part < 2; part++) {
        const bool box = part == 1;
        yc_loss_params lp = pr->lp;
        if (box)
            lp.obj_gain = lp.cls_gain = 0.0f;
        yc_loss_ctx *ctx = yc_loss_new(&lp);
        ck_assert_ptr_nonnull(ctx);
        yc_loss_head heads[2];
        memcpy(heads, pr->heads, sizeof heads);
        yc_loss_result res;
        ck_assert_int_eq(yc_loss_compute(ctx, pr->batch, heads, pr->targets, pr->nt, &res), YC_OK);
        check_gaps(pr);
        const yc_target_set *sets[2];
        ck_assert_int_eq(yc_loss_build_targets(ctx, pr->batch, heads, pr->targets, pr->nt, sets),
                         YC_OK);
        double alpha[2 * 5 * 3 * 12];
        ck_assert_int_le(sets[0]->n + sets[1]->n, (int)(sizeof alpha / sizeof alpha[0]));
        double base = ref_box_total(pr, sets, alpha, true);
        ck_assert_double_eq_tol(base, pr->batch * res.box, 1e-12);
        heads[0].grad = heads[1].grad = NULL;

        for (int l = 0; l < 2; l++) {
            const yc_loss_head *h = &pr->heads[l];
            const size_t plane = (size_t)h->ny * h->nx;
            for (int b = 0; b < pr->batch; b++) {
                for (size_t i = 0; i < (size_t)3 * no * plane; i++) {
                    const int k = (int)(i / plane) % no;
                    const size_t idx = b * h->img_stride + i;
                    const double an = pr->g[l][idx];
                    if ((k < 4) != box) {
                        if (box)
                            ck_assert(an == 0.0);
                        continue;
                    }
                    const float x = pr->p[l][idx];
                    /* a small step keeps kinks (min/max switching sides, clamp) out of reach;
                     * the step is the exact difference of the two float inputs */
                    const float xp = (float)(x + 1e-5), xm = (float)(x - 1e-5);
                    double lpl, lmi;
                    pr->p[l][idx] = xp;
                    if (box) {
                        lpl = ref_box_total(pr, sets, alpha, false);
                    } else {
                        ck_assert_int_eq(
                            yc_loss_compute(ctx, pr->batch, heads, pr->targets, pr->nt, &res),
                            YC_OK);
                        lpl = res.total;
                    }
                    pr->p[l][idx] = xm;
                    if (box) {
                        lmi = ref_box_total(pr, sets, alpha, false);
                    } else {
                        ck_assert_int_eq(
                            yc_loss_compute(ctx, pr->batch, heads, pr->targets, pr->nt, &res),
                            YC_OK);
                        lmi = res.total;
                    }
                    pr->p[l][idx] = x;
                    const double fd = (lpl - lmi) / ((double)xp - (double)xm);
                    const double err = fabs(an - fd);
                    if (fabs(fd) > gmax)
                        gmax = fabs(fd);
                    if (err > errmax)
                        errmax = err;
                    ck_assert_msg(err <= 1e-4 * fabs(fd) + 1e-8,
                                  "%s: level %d image %d channel %zu (k %d) cell %zu: analytic "
                                  "%.9g finite difference %.9g",
                                  what, l, b, i / plane, k, i % plane, an, fd);
                    checked++;
                }
            }
        }
        yc_loss_free(ctx);
    }
    printf("%s: %d logits, max |grad| %.3g, max |analytic - fd| %.3g\n", what, checked, gmax,
           errmax);
}

/* The random problem must exercise both levels and duplicate cells. */
static void problem_assert_coverage(problem *pr)
{
    yc_loss_ctx *ctx = yc_loss_new(&pr->lp);
    ck_assert_ptr_nonnull(ctx);
    const yc_target_set *sets[2];
    ck_assert_int_eq(yc_loss_build_targets(ctx, pr->batch, pr->heads, pr->targets, pr->nt, sets),
                     YC_OK);
    int dups = 0;
    for (int l = 0; l < 2; l++) {
        const yc_target_set *s = sets[l];
        ck_assert_int_gt(s->n, 5);
        for (int i = 0; i < s->n; i++)
            for (int j = i + 1; j < s->n; j++)
                dups += s->b[i] == s->b[j] && s->a[i] == s->a[j] && s->gj[i] == s->gj[j] &&
                        s->gi[i] == s->gi[j];
    }
    ck_assert_int_gt(dups, 0);
    yc_loss_free(ctx);
}

START_TEST(test_grad_plain)
{
    problem pr;
    problem_init(&pr, 3, 0.0f, 0.0f, 1.0f, 1.0f, 11);
    problem_assert_coverage(&pr);
    fd_check(&pr, "nc=3 plain");
    problem_free(&pr);
}
END_TEST

START_TEST(test_grad_smooth_focal)
{
    problem pr;
    problem_init(&pr, 3, 0.1f, 1.5f, 1.3f, 0.8f, 12);
    problem_assert_coverage(&pr);
    fd_check(&pr, "nc=3 smoothing 0.1 focal 1.5 pw 1.3/0.8");
    problem_free(&pr);
}
END_TEST

START_TEST(test_grad_single_class)
{
    problem pr;
    problem_init(&pr, 1, 0.1f, 2.0f, 1.0f, 1.0f, 13);
    problem_assert_coverage(&pr);
    fd_check(&pr, "nc=1 smoothing 0.1 focal 2");
    /* no class loss for nc == 1: the class logit gets no gradient */
    for (int l = 0; l < 2; l++) {
        const size_t plane = (size_t)pr.heads[l].ny * pr.heads[l].nx;
        for (int b = 0; b < pr.batch; b++)
            for (int a = 0; a < 3; a++)
                for (size_t i = 0; i < plane; i++)
                    ck_assert(pr.g[l][b * pr.heads[l].img_stride + (a * 6 + 5) * plane + i] ==
                              0.0f);
    }
    problem_free(&pr);
}
END_TEST

/* PyTorch's formulas written naively (docs/YOLOV5.md 2.1): BCE with logits and pos_weight,
 * -(pw y log(sigmoid x) + (1 - y) log(1 - sigmoid x)), times alpha_t (1 - p_t)^gamma when gamma > 0
 * (FocalLoss, alpha = 0.25). */
static double naive_bce(double x, double y, double pw, double gamma)
{
    const double p = sigm(x);
    double l = -(pw * y * log(p) + (1 - y) * log(1 - p));
    if (gamma > 0) {
        const double pt = y * p + (1 - y) * (1 - p);
        l *= (y * 0.25 + (1 - y) * 0.75) * pow(1 - pt, gamma);
    }
    return l;
}

/* Gained loss parts {box, obj, cls} of a one-level, one-anchor, one-image problem, computed naively
 * from its assignments (section 2.3).  first_wins gives a duplicated cell the objectness target of
 * its first assignment instead of the last; tobj[plane] receives the targets used. */
static void naive_parts(const yc_loss_params *lp, const float *p, int nx, int plane,
                        const yc_target_set *s, bool first_wins, double out[3], double *tobj)
{
    const int nc = lp->nc;
    /* smooth_BCE targets, stored in a float32 tensor by PyTorch */
    const double eps = lp->label_smoothing;
    double lbox = 0, lcls = 0, lobj = 0;
    bool *seen = calloc((size_t)plane, sizeof *seen);
    ck_assert_ptr_nonnull(seen);
    for (int i = 0; i < plane; i++)
        tobj[i] = 0;
    for (int e = 0; e < s->n; e++) {
        const int cell = s->gj[e] * nx + s->gi[e];
        double pb[4], tb[4];
        for (int k = 0; k < 2; k++)
            pb[k] = 2 * sigm(p[k * plane + cell]) - 0.5;
        for (int k = 2; k < 4; k++)
            pb[k] = pow(2 * sigm(p[k * plane + cell]), 2) * s->anch[e * 2 + k - 2];
        for (int k = 0; k < 4; k++)
            tb[k] = s->tbox[e * 4 + k];
        const double c = ref_ciou(pb, tb, NULL, NULL);
        lbox += (1 - c) / s->n;
        if (!(first_wins && seen[cell]))
            tobj[cell] = c > 0 ? c : 0;
        seen[cell] = true;
        for (int k = 0; k < nc && nc > 1; k++)
            lcls += naive_bce(p[(5 + k) * plane + cell],
                              k == s->cls[e] ? (float)(1 - eps / 2) : (float)(eps / 2), lp->cls_pw,
                              lp->fl_gamma) /
                    (s->n * nc);
    }
    for (int i = 0; i < plane; i++)
        lobj += naive_bce(p[4 * plane + i], tobj[i], lp->obj_pw, lp->fl_gamma) / plane;
    out[0] = lp->box_gain * lbox;
    out[1] = lp->obj_gain * lp->balance[0] * lobj;
    out[2] = lp->cls_gain * lcls;
    free(seen);
}

/* A small problem against naive formulas, with and without label smoothing, pos_weight and focal
 * loss.  Two targets share their three cells: box and class means count every assignment; the
 * objectness target of a shared cell is the CIoU of the later assignment.  Then buffer reuse and
 * the no-target case (only objectness, tobj = 0). */
START_TEST(test_small_problem)
{
    /* 4 x 4 grid, nc = 3, no = 8; both centres at (1.7, 2.7) grid units: centre (1, 2), right
     * (2, 2) (gxi = 2.3), down (1, 3) (gyi = 1.3), for each target */
    const int ny = 4, nx = 4, no = 8, plane = 16;
    float p[8 * 16], g[8 * 16];
    for (int i = 0; i < no * plane; i++)
        p[i] = (float)(0.1 * ((i * 37) % 23) - 1.1);
    yc_loss_head h = {p, g, ny, nx, (size_t)no * plane};
    const float tg[2][6] = {{0, 0, 1.7f / 4, 2.7f / 4, 0.8f / 4, 1.2f / 4},
                            {0, 2, 1.7f / 4, 2.7f / 4, 2.0f / 4, 1.6f / 4}};
    const struct {
        float smoothing, cls_pw, obj_pw, gamma;
    } cfg[2] = {{0.0f, 1.0f, 1.0f, 0.0f}, {0.2f, 1.7f, 0.6f, 1.5f}};

    for (int c = 0; c < 2; c++) {
        yc_loss_params lp;
        memset(&lp, 0, sizeof lp);
        lp.nc = 3;
        lp.na = 1;
        lp.nl = 1;
        lp.anchors[0] = 1.0f;
        lp.anchors[1] = 1.0f;
        lp.anchor_t = 4.0f;
        lp.cls_pw = cfg[c].cls_pw;
        lp.obj_pw = cfg[c].obj_pw;
        lp.label_smoothing = cfg[c].smoothing;
        lp.fl_gamma = cfg[c].gamma;
        lp.box_gain = 0.05f;
        lp.obj_gain = 1.0f;
        lp.cls_gain = 0.5f;
        lp.balance[0] = 0.7f;
        yc_loss_ctx *ctx = yc_loss_new(&lp);
        ck_assert_ptr_nonnull(ctx);

        yc_loss_result res;
        const yc_target_set *sets[1];
        ck_assert_int_eq(yc_loss_compute(ctx, 1, &h, &tg[0][0], 2, &res), YC_OK);
        ck_assert_int_eq(yc_loss_build_targets(ctx, 1, &h, &tg[0][0], 2, sets), YC_OK);
        ck_assert_int_eq(sets[0]->n, 6);
        double want[3], first[3], tobj[16], tobj_first[16];
        naive_parts(&lp, p, nx, plane, sets[0], false, want, tobj);
        naive_parts(&lp, p, nx, plane, sets[0], true, first, tobj_first);
        ck_assert_msg(fabs(want[1] - first[1]) > 1e-4 * want[1], "must tell first from last");
        const double got[3] = {res.box, res.obj, res.cls};
        for (int k = 0; k < 3; k++)
            ck_assert_msg(fabs(got[k] - want[k]) <= 1e-12 * fabs(want[k]),
                          "config %d part %d: %.15g, naive %.15g", c, k, got[k], want[k]);
        ck_assert_double_eq_tol(res.total, res.box + res.obj + res.cls, 1e-15);
        if (c == 0) {
            /* objectness gradient: balance * (sigmoid(x) - tobj) / cells */
            for (int i = 0; i < plane; i++)
                ck_assert_double_eq_tol(
                    g[4 * plane + i],
                    (double)lp.balance[0] * (sigm(p[4 * plane + i]) - tobj[i]) / plane, 1e-8);

            /* buffers are reused: same storage after another call with fewer targets */
            const int *b_before = sets[0]->b;
            ck_assert_int_eq(yc_loss_compute(ctx, 1, &h, &tg[0][0], 1, &res), YC_OK);
            ck_assert_ptr_eq(sets[0]->b, b_before);

            /* no targets: only objectness with tobj = 0, no box or class gradient */
            ck_assert_int_eq(yc_loss_compute(ctx, 1, &h, NULL, 0, &res), YC_OK);
            ck_assert_int_eq(sets[0]->n, 0);
            double l0 = 0;
            for (int i = 0; i < plane; i++)
                l0 += naive_bce(p[4 * plane + i], 0, 1, 0) / plane;
            ck_assert_double_eq(res.box, 0);
            ck_assert_double_eq(res.cls, 0);
            ck_assert_double_eq_tol(res.obj, (double)lp.balance[0] * l0, 1e-12);
            ck_assert_double_eq_tol(res.total, res.obj, 1e-15);
            for (int i = 0; i < no * plane; i++)
                if (i / plane != 4)
                    ck_assert(g[i] == 0.0f);
        }
        yc_loss_free(ctx);
    }
}
END_TEST

#endif /* !YC_TEST_SHARED */

/* ---- reference comparisons ---- */

/* Reads tensor `name` (numel must equal count) as float32 into a new buffer. */
static float *read_tensor(yc_st_file *f, const char *name, size_t count)
{
    const yc_st_tensor *t = yc_st_find(f, name);
    ck_assert_msg(t != NULL, "tensor %s missing", name);
    ck_assert_msg(t->numel == count, "tensor %s has %zu elements, expected %zu", name, t->numel,
                  count);
    float *d = malloc(count * sizeof *d);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(yc_st_read_f32(f, t, d, count) == YC_OK, "%s", yc_last_error());
    return d;
}

/* [bs, na, ny, nx, no] (PyTorch's permuted head) -> [bs, na*no, ny, nx] (loss.h's layout). */
static float *unpermute(const float *src, int bs, int na, int ny, int nx, int no)
{
    float *d = malloc((size_t)bs * na * ny * nx * no * sizeof *d);
    ck_assert_ptr_nonnull(d);
    for (int b = 0; b < bs; b++)
        for (int a = 0; a < na; a++)
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++)
                    for (int k = 0; k < no; k++)
                        d[(((size_t)b * na * no + (size_t)a * no + k) * ny + y) * nx + x] =
                            src[((((size_t)b * na + a) * ny + y) * nx + x) * no + k];
    return d;
}

#ifdef YC_TEST_SHARED

static const char *const ref_files[] = {"ref/train_step_io.safetensors", NULL};

START_TEST(test_reference_train_step)
{
    char path[2048];
    yc_test_shared_path(ref_files[0], path, sizeof path);
    yc_st_file *f;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    const int bs = 2, na = 3, nc = 80, no = 85, nt = 17;
    yc_loss_params lp = p5_params(nc, 320);
    yc_loss_ctx *ctx = yc_loss_new(&lp);
    ck_assert_ptr_nonnull(ctx);

    float *targets = read_tensor(f, "targets", (size_t)nt * 6);
    static const char *hname[3] = {"head0_stride8", "head1_stride16", "head2_stride32"};
    static const char *gname[3] = {"grad_head0_stride8", "grad_head1_stride16",
                                   "grad_head2_stride32"};
    yc_loss_head heads[3];
    float *ref_grad[3];
    size_t count[3];
    for (int l = 0; l < 3; l++) {
        const int n = 320 / (8 << l);
        count[l] = (size_t)bs * na * n * n * no;
        float *perm = read_tensor(f, hname[l], count[l]);
        heads[l].p = unpermute(perm, bs, na, n, n, no);
        free(perm);
        perm = read_tensor(f, gname[l], count[l]);
        ref_grad[l] = unpermute(perm, bs, na, n, n, no);
        free(perm);
        heads[l].grad = malloc(count[l] * sizeof(float));
        ck_assert_ptr_nonnull(heads[l].grad);
        heads[l].ny = heads[l].nx = n;
        heads[l].img_stride = (size_t)na * no * n * n;
    }

    yc_loss_result res;
    ck_assert_msg(yc_loss_compute(ctx, bs, heads, targets, nt, &res) == YC_OK, "%s",
                  yc_last_error());

    /* assignments, exactly */
    const yc_target_set *sets[3];
    ck_assert_int_eq(yc_loss_build_targets(ctx, bs, heads, targets, nt, sets), YC_OK);
    for (int l = 0; l < 3; l++) {
        char name[64];
        const yc_target_set *s = sets[l];
        snprintf(name, sizeof name, "bt%d_tcls", l);
        const yc_st_tensor *t = yc_st_find(f, name);
        ck_assert_ptr_nonnull(t);
        const int n = (int)t->numel;
        ck_assert_msg(s->n == n, "level %d: %d assignments, reference %d", l, s->n, n);
        float *tcls = read_tensor(f, name, (size_t)n);
        snprintf(name, sizeof name, "bt%d_b_a_gj_gi", l);
        float *idx = read_tensor(f, name, (size_t)n * 4);
        snprintf(name, sizeof name, "bt%d_tbox", l);
        float *tbox = read_tensor(f, name, (size_t)n * 4);
        snprintf(name, sizeof name, "bt%d_anch", l);
        float *anch = read_tensor(f, name, (size_t)n * 2);
        double tbox_err = 0;
        for (int e = 0; e < n; e++) {
            ck_assert_msg(s->cls[e] == (int)tcls[e] && s->b[e] == (int)idx[e * 4] &&
                              s->a[e] == (int)idx[e * 4 + 1] && s->gj[e] == (int)idx[e * 4 + 2] &&
                              s->gi[e] == (int)idx[e * 4 + 3],
                          "level %d entry %d: (b %d a %d gj %d gi %d cls %d), reference (%g %g %g "
                          "%g cls %g)",
                          l, e, s->b[e], s->a[e], s->gj[e], s->gi[e], s->cls[e], (double)idx[e * 4],
                          (double)idx[e * 4 + 1], (double)idx[e * 4 + 2], (double)idx[e * 4 + 3],
                          (double)tcls[e]);
            for (int k = 0; k < 4; k++) {
                double d = fabs((double)s->tbox[e * 4 + k] - tbox[e * 4 + k]);
                if (d > tbox_err)
                    tbox_err = d;
                ck_assert_msg(d <= 1e-6, "level %d entry %d tbox[%d]: %.9g, reference %.9g", l, e,
                              k, (double)s->tbox[e * 4 + k], (double)tbox[e * 4 + k]);
            }
            for (int k = 0; k < 2; k++)
                ck_assert_msg(fabsf(s->anch[e * 2 + k] - anch[e * 2 + k]) <= 1e-6f,
                              "level %d entry %d anch[%d]: %g, reference %g", l, e, k,
                              (double)s->anch[e * 2 + k], (double)anch[e * 2 + k]);
        }
        int dups = 0;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                dups += s->b[i] == s->b[j] && s->a[i] == s->a[j] && s->gj[i] == s->gj[j] &&
                        s->gi[i] == s->gi[j];
        printf("reference level %d: %d assignments equal (%d duplicate pairs), max |tbox - ref| "
               "%.3g\n",
               l, n, dups, tbox_err);
        free(tcls);
        free(idx);
        free(tbox);
        free(anch);
    }

    /* loss parts */
    float *total = read_tensor(f, "loss_total", 1);
    float *items = read_tensor(f, "loss_items_box_obj_cls", 3);
    const double got[4] = {res.total, res.box, res.obj, res.cls};
    const double want[4] = {total[0], items[0], items[1], items[2]};
    static const char *part[4] = {"total", "box", "obj", "cls"};
    for (int i = 0; i < 4; i++) {
        printf("reference loss %s: %.9g, PyTorch %.9g, relative error %.3g\n", part[i], got[i],
               want[i], yc_test_rel_diff(got[i], want[i]));
        ck_assert_msg(yc_test_rel_diff(got[i], want[i]) < 1e-5, "loss %s: %.9g, reference %.9g", part[i],
                      got[i], want[i]);
    }

    /* head gradients: max|a - b| / max|b| per level */
    for (int l = 0; l < 3; l++) {
        double e = yc_test_rel_error(heads[l].grad, ref_grad[l], count[l]);
        printf("reference grad level %d: relative error %.3g\n", l, e);
        ck_assert_msg(e < 1e-4, "level %d gradient: max|a-b|/max|b| = %.3g", l, e);
    }

    /* in place: the gradient overwrites the logits (how the training step runs on the CPU):
     * the same loss and bit-identical gradients */
    yc_loss_head inplace[3];
    for (int l = 0; l < 3; l++) {
        inplace[l] = heads[l];
        float *buf = malloc(count[l] * sizeof(float));
        ck_assert_ptr_nonnull(buf);
        memcpy(buf, heads[l].p, count[l] * sizeof(float));
        inplace[l].p = buf;
        inplace[l].grad = buf;
    }
    yc_loss_result res2;
    ck_assert_int_eq(yc_loss_compute(ctx, bs, inplace, targets, nt, &res2), YC_OK);
    ck_assert(res2.total == res.total && res2.box == res.box && res2.obj == res.obj &&
              res2.cls == res.cls);
    for (int l = 0; l < 3; l++) {
        ck_assert_msg(memcmp(inplace[l].grad, heads[l].grad, count[l] * sizeof(float)) == 0,
                      "level %d: in-place gradients differ", l);
        free(inplace[l].grad);
        free((void *)heads[l].p);
        free(heads[l].grad);
        free(ref_grad[l]);
    }
    free(total);
    free(items);
    free(targets);
    yc_loss_free(ctx);
    yc_st_close(f);
}
END_TEST

#else

static char *env_path(const char *env, const char *fallback, const char *rel)
{
    const char *dir = getenv(env);
    char *base = yc_path_join(dir && *dir ? dir : fallback, rel);
    ck_assert_ptr_nonnull(base);
    return base;
}

/* tests/data/tiny: nc = 3 at 64 x 64, loss only (the fixture has no head gradients). */
START_TEST(test_tiny_fixture)
{
    char *epath =
        env_path("YOLOCL_TEST_DATA", YC_SRCDATADIR "/../tests/data", "tiny/expected.safetensors");
    char *bpath =
        env_path("YOLOCL_TEST_DATA", YC_SRCDATADIR "/../tests/data", "tiny/batch.safetensors");
    yc_st_file *fe, *fb;
    ck_assert_msg(yc_st_open(&fe, epath) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_st_open(&fb, bpath) == YC_OK, "%s", yc_last_error());
    const int bs = 2, na = 3, nc = 3, no = 8;
    const yc_st_tensor *tt = yc_st_find(fb, "targets");
    ck_assert_ptr_nonnull(tt);
    ck_assert(tt->ndim == 2 && tt->shape[1] == 6);
    const int nt = (int)tt->shape[0];
    float *targets = read_tensor(fb, "targets", (size_t)nt * 6);

    yc_loss_params lp = p5_params(nc, 64);
    yc_loss_ctx *ctx = yc_loss_new(&lp);
    ck_assert_ptr_nonnull(ctx);
    yc_loss_head heads[3];
    for (int l = 0; l < 3; l++) {
        char name[16];
        const int n = 64 / (8 << l);
        snprintf(name, sizeof name, "head%d", l);
        float *perm = read_tensor(fe, name, (size_t)bs * na * n * n * no);
        heads[l].p = unpermute(perm, bs, na, n, n, no);
        free(perm);
        heads[l].grad = NULL;
        heads[l].ny = heads[l].nx = n;
        heads[l].img_stride = (size_t)na * no * n * n;
    }
    yc_loss_result res;
    ck_assert_msg(yc_loss_compute(ctx, bs, heads, targets, nt, &res) == YC_OK, "%s",
                  yc_last_error());
    float *loss = read_tensor(fe, "loss", 4);
    const double got[4] = {res.total, res.box, res.obj, res.cls};
    static const char *part[4] = {"total", "box", "obj", "cls"};
    for (int i = 0; i < 4; i++) {
        printf("tiny loss %s: %.9g, PyTorch %.9g, relative error %.3g\n", part[i], got[i],
               (double)loss[i], yc_test_rel_diff(got[i], loss[i]));
        ck_assert_msg(yc_test_rel_diff(got[i], loss[i]) < 1e-5, "tiny loss %s: %.9g, reference %.9g",
                      part[i], got[i], (double)loss[i]);
    }
    for (int l = 0; l < 3; l++)
        free((void *)heads[l].p);
    free(loss);
    free(targets);
    yc_loss_free(ctx);
    yc_st_close(fe);
    yc_st_close(fb);
    free(epath);
    free(bpath);
}
END_TEST

#endif /* YC_TEST_SHARED */

static Suite *loss_suite(void)
{
    Suite *s = suite_create("loss");
#ifdef YC_TEST_SHARED
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reference_train_step);
    suite_add_tcase(s, tc);
#else
    TCase *tc = tcase_create("assign");
    tcase_add_test(tc, test_gains);
    tcase_add_test(tc, test_worked_example);
    tcase_add_test(tc, test_integer_centre_duplicates);
    tcase_add_test(tc, test_edge_clamp);
    tcase_add_test(tc, test_strict_boundaries);
    tcase_add_test(tc, test_validation);
    suite_add_tcase(s, tc);
    tc = tcase_create("loss");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ciou);
    tcase_add_test(tc, test_grad_plain);
    tcase_add_test(tc, test_grad_smooth_focal);
    tcase_add_test(tc, test_grad_single_class);
    tcase_add_test(tc, test_small_problem);
    suite_add_tcase(s, tc);
    tc = tcase_create("tiny");
    tcase_add_test(tc, test_tiny_fixture);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void)
{
#ifdef YC_TEST_SHARED
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED, "%s not found (PyTorch's reference step)",
                            missing);
#endif
    return yc_harness_run(loss_suite(), false);
}
