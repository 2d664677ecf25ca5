/* Tests of src/eval/nms.c and src/eval/metrics.c: YOLOv5 v7.0 Detect decoding, non_max_suppression, val.py
 * matching, ap_per_class / compute_ap / smooth, the confusion matrix, the statistics and the
 * results table (docs/YOLOV5.md 1.7, 6.1-6.3).
 *
 * Hand-computed cases are explained where they are checked.  Values marked "YOLOv5 gives" were
 * also obtained by running the v7.0 Python code (numpy 1.24, torch 1.13, torchvision 0.14) on the
 * same input.  test_metrics_ref (this file built with YC_TEST_SHARED) compares decoding and NMS
 * with the PyTorch dumps of ../shared/ref/pretrained_eval_nms.safetensors and exits 77 without
 * them. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "nms.h"
#include "safetensors.h"
#include "util.h"
#include "harness.h"
#include "yctest.h"

#ifndef YC_TEST_SHARED

/* ---- helpers ---- */

/* Sets prediction row r of a table with `no` columns: box (cx, cy, w, h), obj, class scores. */
static void set_row(float *pred, int no, int r, float cx, float cy, float w, float h, float obj,
                    const float *cls)
{
    float *p = pred + (size_t)r * no;
    p[0] = cx;
    p[1] = cy;
    p[2] = w;
    p[3] = h;
    p[4] = obj;
    for (int c = 0; c < no - 5; c++)
        p[5 + c] = cls[c];
}

static int run_nms(const float *pred, size_t n, int no, const yc_nms_params *p, float *out)
{
    yc_nms_scratch *s = yc_nms_scratch_new();
    ck_assert_ptr_nonnull(s);
    int nd = -1;
    ck_assert_msg(yc_nms(pred, n, no, p, s, out, &nd) == YC_OK, "%s", yc_last_error());
    yc_nms_scratch_free(s);
    return nd;
}

static void check_det(const float *d, float x1, float y1, float x2, float y2, float conf, int cls)
{
    ck_assert_msg(d[0] == x1 && d[1] == y1 && d[2] == x2 && d[3] == y2 && d[4] == conf &&
                      d[5] == (float)cls,
                  "detection (%g %g %g %g %g %g), expected (%g %g %g %g %g %d)", (double)d[0],
                  (double)d[1], (double)d[2], (double)d[3], (double)d[4], (double)d[5],
                  (double)x1, (double)y1, (double)x2, (double)y2, (double)conf, cls);
}

/* ---- decoding ---- */

START_TEST(test_decode_small)
{
    /* One level, one anchor (1.25, 1.625) grid units, stride 8, grid 1x2, nc = 1 (no = 6), two
     * images with 2 padding floats between them.  Image 0 is all zero logits: sigmoid 0.5 gives
     * xy = (2*0.5 + x - 0.5) * 8 = 4 + 8x, wh = (2*0.5)^2 * (1.25*8, 1.625*8) = (10, 13),
     * obj = cls = 0.5.  Image 1: tx = ln 3 at x = 1 (sigmoid 0.75, cx = (1.5 + 0.5) * 8 = 16),
     * tw = 0 elsewhere. */
    const int no = 6, ny = 1, nx = 2;
    const size_t stride = (size_t)no * ny * nx + 2;
    float p[2 * 14];
    memset(p, 0, sizeof p);
    p[stride + 0 * 2 + 1] = logf(3.0f);
    const float anchors[2] = {1.25f, 1.625f};
    yc_detect_level lv = {.p = p, .ny = ny, .nx = nx, .img_stride = stride, .stride = 8.0f};
    ck_assert_uint_eq(yc_detect_rows(&lv, 1, 1), 2);
    float out[2 * 6];
    ck_assert_int_eq(yc_detect_decode(&lv, 1, 1, no, anchors, 0, out), YC_OK);
    const float want0[12] = {4, 4, 10, 13, 0.5f, 0.5f, 12, 4, 10, 13, 0.5f, 0.5f};
    for (int i = 0; i < 12; i++)
        ck_assert_msg(fabsf(out[i] - want0[i]) < 1e-6f, "image 0 value %d: %g, expected %g", i,
                      (double)out[i], (double)want0[i]);
    ck_assert_int_eq(yc_detect_decode(&lv, 1, 1, no, anchors, 1, out), YC_OK);
    ck_assert_msg(fabsf(out[0] - 4.0f) < 1e-6f && fabsf(out[6] - 16.0f) < 1e-5f, "image 1: %g %g",
                  (double)out[0], (double)out[6]);
    /* invalid sizes */
    ck_assert_int_eq(yc_detect_decode(&lv, 1, 1, 5, anchors, 0, out), YC_EFORMAT);
    lv.img_stride = 5;
    ck_assert_int_eq(yc_detect_decode(&lv, 1, 1, no, anchors, 0, out), YC_EFORMAT);
}
END_TEST

/* ---- NMS, hand-computed cases ---- */

START_TEST(test_nms_class_aware_and_agnostic)
{
    /* nc = 2.  r0: box (0,0)-(10,10), obj 0.9, classes (0.9, 0.1): best class 0, score 0.81.
     * r1: (1,0)-(11,10), obj 0.8, classes (0.1, 0.9): best class 1, score 0.72; its IoU with r0
     * is 90/110 = 0.818.  r2: (100,100)-(110,110), obj 0.5, classes (0.6, 0): 0.3.
     * detect.py settings (conf 0.25, IoU 0.45, best class): class-aware keeps all three in score
     * order; agnostic drops r1 (0.818 > 0.45). */
    const int no = 7;
    float pred[3 * 7];
    set_row(pred, no, 0, 5, 5, 10, 10, 0.9f, (const float[]){0.9f, 0.1f});
    set_row(pred, no, 1, 6, 5, 10, 10, 0.8f, (const float[]){0.1f, 0.9f});
    set_row(pred, no, 2, 105, 105, 10, 10, 0.5f, (const float[]){0.6f, 0.0f});
    float out[1000 * 6];
    yc_nms_params p = yc_nms_params_detect();
    ck_assert_int_eq(run_nms(pred, 3, no, &p, out), 3);
    check_det(out, 0, 0, 10, 10, 0.9f * 0.9f, 0);
    check_det(out + 6, 1, 0, 11, 10, 0.9f * 0.8f, 1);
    check_det(out + 12, 100, 100, 110, 110, 0.6f * 0.5f, 0);
    p.agnostic = true;
    ck_assert_int_eq(run_nms(pred, 3, no, &p, out), 2);
    check_det(out, 0, 0, 10, 10, 0.9f * 0.9f, 0);
    check_det(out + 6, 100, 100, 110, 110, 0.6f * 0.5f, 0);
}
END_TEST

START_TEST(test_nms_multi_label)
{
    /* One box, obj 1, classes (0.5, 0.4, 0.001): multi-label (conf 0.001) emits class 0 (0.5) and
     * class 1 (0.4); class 2 (0.001) is not > 0.001.  The same box twice with different classes
     * is not suppressed (class offset).  Best class only: class 0 alone.  Equal class scores:
     * torch.max returns the first, class 0. */
    const int no = 8;
    float pred[8];
    set_row(pred, no, 0, 50, 50, 20, 20, 1.0f, (const float[]){0.5f, 0.4f, 0.001f});
    float out[300 * 6];
    yc_nms_params p = yc_nms_params_val();
    ck_assert_int_eq(run_nms(pred, 1, no, &p, out), 2);
    check_det(out, 40, 40, 60, 60, 0.5f, 0);
    check_det(out + 6, 40, 40, 60, 60, 0.4f, 1);
    p.multi_label = false;
    ck_assert_int_eq(run_nms(pred, 1, no, &p, out), 1);
    check_det(out, 40, 40, 60, 60, 0.5f, 0);
    set_row(pred, no, 0, 50, 50, 20, 20, 1.0f, (const float[]){0.4f, 0.4f, 0.1f});
    ck_assert_int_eq(run_nms(pred, 1, no, &p, out), 1);
    check_det(out, 40, 40, 60, 60, 0.4f, 0);
    /* nc == 1: multi_label is ignored (YOLOv5: multi_label &= nc > 1) and gives one row */
    float one[6];
    set_row(one, 6, 0, 50, 50, 20, 20, 0.9f, (const float[]){0.5f});
    p = yc_nms_params_val();
    ck_assert_int_eq(run_nms(one, 1, 6, &p, out), 1);
}
END_TEST

START_TEST(test_nms_thresholds)
{
    /* IoU edge: A = (0,0)-(10,10), B = (0,0)-(10,5): inter 50, union 100 + 50 - 50 = 100, IoU
     * exactly 0.5.  With iou_thres 0.5 nothing is suppressed (strict >), with 0.49 B goes. */
    const int no = 6;
    float pred[2 * 6];
    set_row(pred, no, 0, 5, 5, 10, 10, 0.9f, (const float[]){1.0f});
    set_row(pred, no, 1, 5, 2.5f, 10, 5, 0.8f, (const float[]){1.0f});
    float out[1000 * 6];
    yc_nms_params p = yc_nms_params_detect();
    p.iou_thres = 0.5;
    ck_assert_int_eq(run_nms(pred, 2, no, &p, out), 2);
    p.iou_thres = 0.49;
    ck_assert_int_eq(run_nms(pred, 2, no, &p, out), 1);
    /* torchvision compares its float IoU with the double threshold: an IoU of 0.6f
     * (0.60000002384) is above the threshold 0.6; B = (0,0)-(10,6) has IoU 60/100 = 0.6f */
    set_row(pred, no, 1, 5, 3, 10, 6, 0.8f, (const float[]){1.0f});
    p.iou_thres = 0.6;
    ck_assert_int_eq(run_nms(pred, 2, no, &p, out), 1);
    /* conf edges: obj == conf_thres and score == conf_thres are both out (strict >) */
    set_row(pred, no, 0, 5, 5, 10, 10, 0.25f, (const float[]){1.0f});
    set_row(pred, no, 1, 50, 50, 10, 10, 1.0f, (const float[]){0.25f});
    p = yc_nms_params_detect();
    ck_assert_int_eq(run_nms(pred, 2, no, &p, out), 0);
    /* empty input */
    ck_assert_int_eq(run_nms(pred, 0, no, &p, out), 0);
    /* invalid settings */
    yc_nms_scratch *s = yc_nms_scratch_new();
    int nd;
    p.max_det = 0;
    ck_assert_int_eq(yc_nms(pred, 2, no, &p, s, out, &nd), YC_EFORMAT);
    p = yc_nms_params_detect();
    p.iou_thres = 1.5;
    ck_assert_int_eq(yc_nms(pred, 2, no, &p, s, out, &nd), YC_EFORMAT);
    ck_assert_int_eq(yc_nms(pred, 2, 5, &p, s, out, &nd), YC_EFORMAT);
    yc_nms_scratch_free(s);
}
END_TEST

START_TEST(test_nms_filter_max_det_max_nms)
{
    /* Five far-apart boxes of classes 0..4 with scores 0.9, 0.8, ..., 0.5. */
    const int no = 10;
    float pred[5 * 10];
    for (int r = 0; r < 5; r++) {
        float cls[5] = {0};
        cls[r] = 1.0f;
        set_row(pred, no, r, 20.0f + 100.0f * (float)r, 20, 10, 10, 0.9f - 0.1f * (float)r, cls);
    }
    float out[1000 * 6];
    yc_nms_params p = yc_nms_params_detect();
    const int keep[2] = {3, 1};
    p.classes = keep;
    p.n_classes = 2;
    ck_assert_int_eq(run_nms(pred, 5, no, &p, out), 2);
    ck_assert(out[5] == 1.0f && out[11] == 3.0f);
    p = yc_nms_params_detect();
    p.max_det = 2;
    ck_assert_int_eq(run_nms(pred, 5, no, &p, out), 2);
    ck_assert(out[5] == 0.0f && out[11] == 1.0f);
    /* max_nms = 3: only the three best candidates go into NMS */
    p = yc_nms_params_detect();
    p.max_nms = 3;
    ck_assert_int_eq(run_nms(pred, 5, no, &p, out), 3);
    ck_assert(out[17] == 2.0f);
}
END_TEST

START_TEST(test_nms_tie_order)
{
    /* 40 far-apart boxes of one class with equal scores: the output order is the order
     * torch.argsort(descending=True) gives 40 equal values in PyTorch 1.13 on CPU (libstdc++'s
     * introsort), which is not the input order:
     * [30, 21..29, 20, 31..39, 10, 1..9, 0, 11..19].  Up to 16 equal values keep their order. */
    static const int want[40] = {30, 21, 22, 23, 24, 25, 26, 27, 28, 29, 20, 31, 32, 33,
                                 34, 35, 36, 37, 38, 39, 10, 1,  2,  3,  4,  5,  6,  7,
                                 8,  9,  0,  11, 12, 13, 14, 15, 16, 17, 18, 19};
    const int no = 6;
    float pred[40 * 6];
    for (int r = 0; r < 40; r++)
        set_row(pred, no, r, 10.0f + 20.0f * (float)r, 10, 10, 10, 0.5f, (const float[]){1.0f});
    float out[1000 * 6];
    yc_nms_params p = yc_nms_params_detect();
    ck_assert_int_eq(run_nms(pred, 40, no, &p, out), 40);
    for (int k = 0; k < 40; k++) {
        const int r = (int)lroundf((out[k * 6] - 5.0f) / 20.0f);
        ck_assert_msg(r == want[k], "position %d: row %d, PyTorch has row %d", k, r, want[k]);
    }
    ck_assert_int_eq(run_nms(pred, 16, no, &p, out), 16);
    for (int k = 0; k < 16; k++)
        ck_assert_int_eq((int)lroundf((out[k * 6] - 5.0f) / 20.0f), k);
}
END_TEST

/* Reference NMS written the plain way (torchvision's loop over every pair, no early exit) for
 * inputs with distinct scores. */
typedef struct naive_cand {
    float score;
    int row, cls;
} naive_cand;

static int naive_cmp(const void *a, const void *b)
{
    float sa = ((const naive_cand *)a)->score, sb = ((const naive_cand *)b)->score;
    return sa > sb ? -1 : (sa < sb ? 1 : 0);
}

static int naive_nms(const float *pred, int n, int no, const yc_nms_params *p, float *out)
{
    const int nc = no - 5;
    naive_cand *c = malloc((size_t)n * nc * sizeof *c);
    ck_assert_ptr_nonnull(c);
    int m = 0;
    for (int r = 0; r < n; r++) {
        const float *row = pred + (size_t)r * no;
        if (!(row[4] > p->conf_thres))
            continue;
        for (int k = 0; k < nc; k++)
            if (row[5 + k] * row[4] > p->conf_thres)
                c[m++] = (naive_cand){row[5 + k] * row[4], r, k};
    }
    qsort(c, (size_t)m, sizeof *c, naive_cmp);
    if (m > p->max_nms)
        m = p->max_nms;
    float *b = malloc((size_t)(m ? m : 1) * 5 * sizeof *b);
    char *sup = calloc((size_t)(m ? m : 1), 1);
    ck_assert(b && sup);
    for (int i = 0; i < m; i++) {
        const float *row = pred + (size_t)c[i].row * no;
        const float off = p->agnostic ? 0.0f : (float)c[i].cls * 7680.0f;
        b[i * 5 + 0] = row[0] - row[2] / 2.0f + off;
        b[i * 5 + 1] = row[1] - row[3] / 2.0f + off;
        b[i * 5 + 2] = row[0] + row[2] / 2.0f + off;
        b[i * 5 + 3] = row[1] + row[3] / 2.0f + off;
        b[i * 5 + 4] = (b[i * 5 + 2] - b[i * 5 + 0]) * (b[i * 5 + 3] - b[i * 5 + 1]);
    }
    int kept = 0;
    for (int i = 0; i < m; i++) {
        if (sup[i])
            continue;
        if (kept < p->max_det) {
            const float *row = pred + (size_t)c[i].row * no;
            float *o = out + (size_t)kept * 6;
            o[0] = row[0] - row[2] / 2.0f;
            o[1] = row[1] - row[3] / 2.0f;
            o[2] = row[0] + row[2] / 2.0f;
            o[3] = row[1] + row[3] / 2.0f;
            o[4] = c[i].score;
            o[5] = (float)c[i].cls;
        }
        kept++;
        for (int j = i + 1; j < m; j++) {
            if (sup[j])
                continue;
            const float *bi = b + i * 5, *bj = b + j * 5;
            float w = fminf(bi[2], bj[2]) - fmaxf(bi[0], bj[0]);
            float h = fminf(bi[3], bj[3]) - fmaxf(bi[1], bj[1]);
            w = w > 0.0f ? w : 0.0f;
            h = h > 0.0f ? h : 0.0f;
            const float inter = w * h;
            if ((double)(inter / (bi[4] + bj[4] - inter)) > p->iou_thres)
                sup[j] = 1;
        }
    }
    free(b);
    free(sup);
    free(c);
    return kept < p->max_det ? kept : p->max_det;
}

START_TEST(test_nms_random_vs_naive)
{
    /* Random boxes with distinct scores, compared with the plain O(n^2) loop; some runs use
     * boxes wider than 7680 px (the class lists cannot be used then) and agnostic NMS. */
    unsigned seed = 12345;
    yc_nms_scratch *s = yc_nms_scratch_new();
    ck_assert_ptr_nonnull(s);
    float *out = malloc(300 * 6 * sizeof *out), *ref = malloc(300 * 6 * sizeof *ref);
    ck_assert(out && ref);
    for (int it = 0; it < 60; it++) {
        const int n = 50 + it * 20, nc = 1 + it % 4, no = nc + 5;
        const bool wide = it % 5 == 4;
        float *pred = malloc((size_t)n * no * sizeof *pred);
        int *perm = malloc((size_t)n * nc * sizeof *perm);
        ck_assert(pred && perm);
        /* distinct scores: obj 1 (or 0.01, filtered out) times a permutation of k/(n*nc + 1) */
        for (int k = 0; k < n * nc; k++)
            perm[k] = k;
        for (int k = n * nc - 1; k > 0; k--) {
            seed = seed * 1103515245u + 12345u;
            const int j = (int)((seed >> 8) % (unsigned)(k + 1)), t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        for (int r = 0; r < n; r++) {
            float *row = pred + (size_t)r * no;
            for (int k = 0; k < 4; k++) {
                seed = seed * 1103515245u + 12345u;
                row[k] = (float)((seed >> 8) & 0xffffff) / 16777216.0f;
            }
            row[0] *= 640.0f;
            row[1] *= 640.0f;
            row[2] = 2.0f + row[2] * (wide && r % 7 == 0 ? 20000.0f : 200.0f);
            row[3] = 2.0f + row[3] * 200.0f;
            row[4] = r % 11 == 5 ? 0.01f : 1.0f;
            for (int k = 0; k < nc; k++)
                row[5 + k] = (float)(perm[r * nc + k] + 1) / (float)(n * nc + 1);
        }
        free(perm);
        yc_nms_params p = yc_nms_params_val();
        p.conf_thres = 0.05f;
        p.iou_thres = 0.3 + 0.1 * (it % 4);
        p.agnostic = it % 3 == 2;
        p.max_det = it % 2 ? 300 : 25;
        int nd = -1;
        ck_assert_int_eq(yc_nms(pred, (size_t)n, no, &p, s, out, &nd), YC_OK);
        const int nr = naive_nms(pred, n, no, &p, ref);
        ck_assert_msg(nd == nr, "run %d: %d detections, plain loop %d", it, nd, nr);
        ck_assert_msg(memcmp(out, ref, (size_t)nd * 6 * sizeof *out) == 0,
                      "run %d: detections differ from the plain loop", it);
        free(pred);
    }
    free(out);
    free(ref);
    yc_nms_scratch_free(s);
}
END_TEST

START_TEST(test_boxes)
{
    /* xywh <-> xyxy */
    float b[2 * 5] = {50, 40, 20, 10, 7, 1.5f, 2.5f, 3, 5, 8};
    yc_xywh2xyxy(b, 2, 5);
    ck_assert(b[0] == 40 && b[1] == 35 && b[2] == 60 && b[3] == 45 && b[4] == 7);
    ck_assert(b[5] == 0 && b[6] == 0 && b[7] == 3 && b[8] == 5);
    yc_xyxy2xywh(b, 2, 5);
    ck_assert(b[0] == 50 && b[1] == 40 && b[2] == 20 && b[3] == 10);
    /* A 640x480 image letterboxed to 640x640: gain 1, pad (0, 80).  A 381x500 image to 320x320:
     * gain 0.64, pad ((320 - 243.84)/2, 0) = (38.08, 0). */
    double g, pw, ph;
    yc_letterbox_gain_pad(640, 640, 480, 640, &g, &pw, &ph);
    ck_assert(g == 1.0 && pw == 0.0 && ph == 80.0);
    yc_letterbox_gain_pad(320, 320, 500, 381, &g, &pw, &ph);
    ck_assert(fabs(g - 0.64) < 1e-15 && fabs(pw - 38.08) < 1e-12 && ph == 0.0);
    /* scale back and clip: (10, 90)-(100, 200) -> (10, 10)-(100, 120); (-5, 70)-(700, 600) is
     * clipped to the 640x480 image */
    float s[8] = {10, 90, 100, 200, -5, 70, 700, 600};
    yc_scale_boxes(s, 2, 4, 1.0, 0.0, 80.0, 480, 640);
    ck_assert(s[0] == 10 && s[1] == 10 && s[2] == 100 && s[3] == 120);
    ck_assert(s[4] == 0 && s[5] == 0 && s[6] == 640 && s[7] == 480);
    /* round trip through a letterbox of gain 0.5 and pad (16, 8): x' = x*0.5 + 16 */
    float r[4] = {100.0f * 0.5f + 16.0f, 60.0f * 0.5f + 8.0f, 300.0f * 0.5f + 16.0f,
                  200.0f * 0.5f + 8.0f};
    yc_scale_boxes(r, 1, 4, 0.5, 16.0, 8.0, 400, 600);
    ck_assert(r[0] == 100 && r[1] == 60 && r[2] == 300 && r[3] == 200);
}
END_TEST

#else /* YC_TEST_SHARED */

/* YOLOv5 P5 anchors in grid units (docs/YOLOV5.md 1.7). */
static const float p5_anchors[3][3][2] = {
    {{1.25f, 1.625f}, {2.0f, 3.75f}, {4.125f, 2.875f}},
    {{1.875f, 3.8125f}, {3.875f, 2.8125f}, {3.6875f, 7.4375f}},
    {{3.625f, 2.8125f}, {4.875f, 6.1875f}, {11.65625f, 10.1875f}},
};

/* ---- reference comparisons ---- */

static const char *const ref_files[] = {"ref/pretrained_eval_nms.safetensors", NULL};

static float *read_tensor(yc_st_file *f, const char *name, size_t *count)
{
    const yc_st_tensor *t = yc_st_find(f, name);
    ck_assert_msg(t != NULL, "tensor %s missing", name);
    float *d = malloc((t->numel ? t->numel : 1) * sizeof *d);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(yc_st_read_f32(f, t, d, t->numel) == YC_OK, "%s", yc_last_error());
    *count = t->numel;
    return d;
}

/* Largest relative difference of the box and confidence of two detections, or +inf when their
 * classes differ.  Box coordinates are compared relative to the box's largest coordinate (at
 * least 1 px): x1 = cx - w/2 near 0 inherits the rounding of cx and w. */
static double det_err(const float *g, const float *r)
{
    for (int k = 0; k < 6; k++)
        if (!isfinite(g[k]) || !isfinite(r[k]))
            return INFINITY;
    if (g[5] != r[5])
        return INFINITY;
    double scale = 1.0;
    for (int k = 0; k < 4; k++)
        scale = fmax(scale, fabs((double)r[k]));
    double err = fabs((double)g[4] - (double)r[4]) / fmax(fabs((double)r[4]), 1e-30);
    for (int k = 0; k < 4; k++)
        err = fmax(err, fabs((double)g[k] - (double)r[k]) / scale);
    return err;
}

/* Compares detections with a reference [n, 6]: same count; each row must equal (within
 * relative 1e-5, same class) the reference row at its position or, counted as an order
 * difference, at another position.  Returns the largest relative error. */
static double compare_dets(const float *got, int nd, const float *ref, size_t nref,
                           const char *what, int *order_diffs)
{
    ck_assert_msg((size_t)nd == nref, "%s: %d detections, PyTorch %zu", what, nd, nref);
    double worst = 0.0;
    *order_diffs = 0;
    for (int i = 0; i < nd; i++) {
        const float *g = got + (size_t)i * 6;
        double err = det_err(g, ref + (size_t)i * 6);
        if (!(err <= 1e-5)) {
            (*order_diffs)++;
            for (int j = 0; j < nd && !(err <= 1e-5); j++)
                err = det_err(g, ref + (size_t)j * 6);
            ck_assert_msg(err <= 1e-5,
                          "%s: row %d (%g %g %g %g %g %g) is not in PyTorch's result", what, i,
                          (double)g[0], (double)g[1], (double)g[2], (double)g[3], (double)g[4],
                          (double)g[5]);
        }
        worst = fmax(worst, err);
    }
    return worst;
}

START_TEST(test_reference_nms)
{
    char path[2048];
    yc_test_shared_path(ref_files[0], path, sizeof path);
    yc_st_file *f;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    yc_nms_scratch *s = yc_nms_scratch_new();
    ck_assert_ptr_nonnull(s);
    float *out = malloc(1000 * 6 * sizeof *out);
    ck_assert_ptr_nonnull(out);
    static const int sizes[2] = {320, 640};
    for (int si = 0; si < 2; si++) {
        const int sz = sizes[si];
        const size_t rows = 3 * ((size_t)(sz / 8) * (sz / 8) + (size_t)(sz / 16) * (sz / 16) +
                                 (size_t)(sz / 32) * (sz / 32));
        char name[64];
        snprintf(name, sizeof name, "eval%d_decoded", sz);
        size_t count;
        float *dec = read_tensor(f, name, &count);
        ck_assert_uint_eq(count, 2 * rows * 85);
        for (int b = 0; b < 2; b++) {
            for (int mode = 0; mode < 2; mode++) {
                yc_nms_params p = mode == 0 ? yc_nms_params_val() : yc_nms_params_detect();
                int nd = -1;
                const double t0 = yc_now();
                ck_assert_int_eq(yc_nms(dec + (size_t)b * rows * 85, rows, 85, &p, s, out, &nd),
                                 YC_OK);
                const double ms = (yc_now() - t0) * 1e3;
                snprintf(name, sizeof name, "eval%d_det_%s_img%d", sz, mode == 0 ? "val" : "detect",
                         b);
                size_t nref;
                float *ref = read_tensor(f, name, &nref);
                nref /= 6;
                int order = 0;
                const double err = compare_dets(out, nd, ref, nref, name, &order);
                printf("%s: %d detections (PyTorch %zu), max relative error %.3g, %d order "
                       "differences, %.1f ms\n",
                       name, nd, nref, err, order, ms);
                ck_assert_msg(err <= 1e-5, "%s: relative error %g", name, err);
                free(ref);
            }
        }
        free(dec);
    }
    free(out);
    yc_nms_scratch_free(s);
    yc_st_close(f);
}
END_TEST

START_TEST(test_reference_decode)
{
    char path[2048];
    yc_test_shared_path(ref_files[0], path, sizeof path);
    yc_st_file *f;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_st_find(f, "eval320_raw_head0") != NULL, "%s has no raw heads", path);
    yc_nms_scratch *s = yc_nms_scratch_new();
    float *det = malloc(1000 * 6 * sizeof *det);
    ck_assert(s && det);
    static const int sizes[2] = {320, 640};
    for (int si = 0; si < 2; si++) {
        const int sz = sizes[si], na = 3, no = 85, bs = 2;
        yc_detect_level lv[3];
        float *nchw[3];
        for (int l = 0; l < 3; l++) {
            const int n = sz / (8 << l);
            char name[64];
            snprintf(name, sizeof name, "eval%d_raw_head%d", sz, l);
            size_t count;
            float *perm = read_tensor(f, name, &count);
            ck_assert_uint_eq(count, (size_t)bs * na * n * n * no);
            /* (B, na, ny, nx, no) -> (B, na*no, ny, nx) */
            nchw[l] = malloc(count * sizeof *nchw[l]);
            ck_assert_ptr_nonnull(nchw[l]);
            for (int b = 0; b < bs; b++)
                for (int a = 0; a < na; a++)
                    for (int y = 0; y < n; y++)
                        for (int x = 0; x < n; x++)
                            for (int k = 0; k < no; k++)
                                nchw[l][(((size_t)b * na * no + (size_t)a * no + k) * n + y) * n +
                                        x] = perm[((((size_t)b * na + a) * n + y) * n + x) * no + k];
            free(perm);
            lv[l] = (yc_detect_level){.p = nchw[l],
                                      .ny = n,
                                      .nx = n,
                                      .img_stride = (size_t)na * no * n * n,
                                      .stride = (float)(8 << l)};
        }
        const size_t rows = yc_detect_rows(lv, 3, na);
        char name[64];
        snprintf(name, sizeof name, "eval%d_decoded", sz);
        size_t count;
        float *ref = read_tensor(f, name, &count);
        ck_assert_uint_eq(count, bs * rows * no);
        float *dec = malloc(rows * no * sizeof *dec);
        ck_assert_ptr_nonnull(dec);
        double max_abs = 0.0, max_rel = 0.0;
        for (int b = 0; b < bs; b++) {
            ck_assert_int_eq(yc_detect_decode(lv, 3, na, no, &p5_anchors[0][0][0], b, dec), YC_OK);
            const float *r = ref + (size_t)b * rows * no;
            /* every value within 1e-5 relative (+1e-7 absolute for values near 0) */
            size_t bad = 0, first_bad = 0;
            for (size_t i = 0; i < rows * no; i++) {
                const double d = fabs((double)dec[i] - (double)r[i]);
                max_abs = fmax(max_abs, d);
                if (fabs((double)r[i]) > 1e-6)
                    max_rel = fmax(max_rel, d / fabs((double)r[i]));
                if (!(d <= 1e-5 * fabs((double)r[i]) + 1e-7) && bad++ == 0)
                    first_bad = i;
            }
            ck_assert_msg(bad == 0, "eval%d image %d: %zu values off, first row %zu col %zu: %.9g, "
                          "PyTorch %.9g", sz, b, bad, first_bad / no, first_bad % no,
                          (double)dec[first_bad], (double)r[first_bad]);
            /* decode -> NMS end to end (val settings) */
            yc_nms_params p = yc_nms_params_val();
            int nd = -1;
            ck_assert_int_eq(yc_nms(dec, rows, no, &p, s, det, &nd), YC_OK);
            snprintf(name, sizeof name, "eval%d_det_val_img%d", sz, b);
            size_t nref;
            float *dref = read_tensor(f, name, &nref);
            int order = 0;
            const double err = compare_dets(det, nd, dref, nref / 6, name, &order);
            printf("eval%d image %d: own decoding -> NMS: %d detections, max relative error "
                   "%.3g, %d order differences\n",
                   sz, b, nd, err, order);
            free(dref);
        }
        printf("eval%d decoding: max |diff| %.3g, max relative %.3g (of values > 1e-6)\n", sz,
               max_abs, max_rel);
        free(dec);
        free(ref);
        for (int l = 0; l < 3; l++)
            free(nchw[l]);
    }
    free(det);
    yc_nms_scratch_free(s);
    yc_st_close(f);
}
END_TEST

#endif /* YC_TEST_SHARED */

#ifndef YC_TEST_SHARED

/* ---- matching ---- */

START_TEST(test_iouv_and_iou)
{
    /* torch.linspace(0.5, 0.95, 10) gives float32(0.5 + 0.05 i) for every i */
    float iouv[YC_NIOU];
    yc_iouv(iouv);
    static const float want[YC_NIOU] = {0.5f, 0.55f, 0.6f, 0.65f, 0.7f,
                                        0.75f, 0.8f, 0.85f, 0.9f, 0.95f};
    for (int i = 0; i < YC_NIOU; i++)
        ck_assert_msg(iouv[i] == want[i], "iouv[%d] = %.9g", i, (double)iouv[i]);
    /* (0,0)-(100,100) and (0,0)-(100,60): 6000 / (10000 + 6000 - 6000 + 1e-7) = 0.6f */
    const float a[4] = {0, 0, 100, 100}, b[4] = {0, 0, 100, 60}, c[4] = {200, 0, 300, 100};
    ck_assert(yc_box_iou(a, b) == 0.6f);
    ck_assert(yc_box_iou(a, c) == 0.0f);
    ck_assert(yc_box_iou(a, a) == 1.0f);
}
END_TEST

/* label row (cls, x1, y1, x2, y2) */
static void set_label(float *l, int i, int cls, float x1, float y1, float x2, float y2)
{
    float *r = l + (size_t)i * 5;
    r[0] = (float)cls;
    r[1] = x1;
    r[2] = y1;
    r[3] = x2;
    r[4] = y2;
}

/* detection row (x1, y1, x2, y2, conf, cls) */
static void set_det(float *d, int i, float x1, float y1, float x2, float y2, float conf, int cls)
{
    float *r = d + (size_t)i * 6;
    r[0] = x1;
    r[1] = y1;
    r[2] = x2;
    r[3] = y2;
    r[4] = conf;
    r[5] = (float)cls;
}

/* mask of the thresholds t with iouv[t] <= iou (bits 0..k-1 for the first k) */
static uint16_t bits_upto(int k)
{
    return (uint16_t)((1u << k) - 1u);
}

START_TEST(test_match_cases)
{
    float l[4 * 5], d[4 * 6];
    uint16_t correct[4];
    /* One detection, two labels of its class: L0 = (0,0)-(100,100) with IoU 0.7 (det
     * (0,0)-(100,70)), L1 = (0,0)-(100,70) with IoU 1.  The detection takes its best label L1 at
     * every threshold: correct at all 10; L0 stays unmatched. */
    set_label(l, 0, 0, 0, 0, 100, 100);
    set_label(l, 1, 0, 0, 0, 100, 70);
    set_det(d, 0, 0, 0, 100, 70, 0.9f, 0);
    ck_assert_int_eq(yc_match_predictions(d, 1, l, 2, correct), YC_OK);
    ck_assert_uint_eq(correct[0], bits_upto(10));

    /* Two detections, one label (0,0)-(100,100): D0 (conf 0.9) has IoU 0.6, D1 (conf 0.8) IoU
     * 0.9.  Each detection's best label is L; the label then goes to the first detection in
     * detection (confidence) order: D0 at thresholds <= 0.6 (bits 0-2).  Above 0.6 D0 is no
     * candidate, so D1 gets the label at 0.65..0.9 (bits 3-8).  At 0.95 nobody. */
    set_label(l, 0, 0, 0, 0, 100, 100);
    set_det(d, 0, 0, 0, 100, 60, 0.9f, 0);
    set_det(d, 1, 0, 0, 100, 90, 0.8f, 0);
    ck_assert_int_eq(yc_match_predictions(d, 2, l, 1, correct), YC_OK);
    ck_assert_uint_eq(correct[0], bits_upto(3));
    ck_assert_uint_eq(correct[1], bits_upto(9) & (uint16_t)~bits_upto(3));

    /* Class mismatch: a perfect box of another class is never correct. */
    set_det(d, 0, 0, 0, 100, 100, 0.9f, 1);
    ck_assert_int_eq(yc_match_predictions(d, 1, l, 1, correct), YC_OK);
    ck_assert_uint_eq(correct[0], 0);

    /* Threshold edges (IoU >= t): IoU exactly 0.5 (det (0,0)-(100,50)) is correct at 0.5 only;
     * exactly 0.95f ((0,0)-(100,95)) at all ten; 0.5 - a little at none. */
    set_det(d, 0, 0, 0, 100, 50, 0.9f, 0);
    ck_assert_int_eq(yc_match_predictions(d, 1, l, 1, correct), YC_OK);
    ck_assert_uint_eq(correct[0], 1);
    set_det(d, 0, 0, 0, 100, 95, 0.9f, 0);
    ck_assert_int_eq(yc_match_predictions(d, 1, l, 1, correct), YC_OK);
    ck_assert_uint_eq(correct[0], bits_upto(10));
    set_det(d, 0, 0, 0, 100, 49.99f, 0.9f, 0);
    ck_assert_int_eq(yc_match_predictions(d, 1, l, 1, correct), YC_OK);
    ck_assert_uint_eq(correct[0], 0);

    /* Ties: two identical labels and two identical detections (all IoUs 1).  Pairs in torch.where
     * order: (L0,D0) (L0,D1) (L1,D0) (L1,D1); numpy's argsort of 4 equal IoUs keeps that order
     * and [::-1] reverses it, so each detection's first pair is with L1; the label step keeps
     * (L1, D0).  D1 is not correct although L0 is free: YOLOv5's result. */
    set_label(l, 1, 0, 0, 0, 100, 100);
    set_det(d, 0, 0, 0, 100, 100, 0.9f, 0);
    set_det(d, 1, 0, 0, 100, 100, 0.8f, 0);
    ck_assert_int_eq(yc_match_predictions(d, 2, l, 2, correct), YC_OK);
    ck_assert_uint_eq(correct[0], bits_upto(10));
    ck_assert_uint_eq(correct[1], 0);

    /* no labels / no detections */
    ck_assert_int_eq(yc_match_predictions(d, 2, l, 0, correct), YC_OK);
    ck_assert(correct[0] == 0 && correct[1] == 0);
    ck_assert_int_eq(yc_match_predictions(d, 0, l, 2, correct), YC_OK);
}
END_TEST

/* ---- ap_per_class ---- */

static const double tol = 1e-12;

START_TEST(test_compute_ap)
{
    /* recall [1], precision [1]: mrec [0, 1, 1], mpre [1, 1, 0] (already an envelope).
     * np.interp at x = 0, 0.01, ..., 1: 1 for x < 1; at x = 1 the last index with mrec <= 1 is
     * the end sentinel, precision 0.  Trapezoids: 99 * 0.01 * 1 + 0.01 * (1 + 0)/2 = 0.995. */
    const double rec[1] = {1.0}, pre[1] = {1.0};
    double mrec[3], mpre[3];
    const double ap = yc_compute_ap(rec, pre, 1, mrec, mpre);
    ck_assert_msg(fabs(ap - 0.995) < tol, "AP %.17g", ap);
    ck_assert(mrec[0] == 0 && mrec[1] == 1 && mrec[2] == 1);
    ck_assert(mpre[0] == 1 && mpre[1] == 1 && mpre[2] == 0);
    /* envelope: precision [0.5, 1] at recall [0.5, 1] -> mpre [1, 1, 1, 0] -> AP 0.995 again */
    const double rec2[2] = {0.5, 1.0}, pre2[2] = {0.5, 1.0};
    double mrec2[4], mpre2[4];
    ck_assert(fabs(yc_compute_ap(rec2, pre2, 2, mrec2, mpre2) - 0.995) < tol);
    ck_assert(mpre2[1] == 1.0);
}
END_TEST

START_TEST(test_ap_perfect)
{
    /* One class, 2 labels, 2 predictions (conf 0.9, 0.8) correct at every threshold:
     * recall [0.5, 1], precision [1, 1] -> AP 0.995 at every threshold (see test_compute_ap).
     * F1 is 1 for px <= 0.8 (right fill R = 1, P = 1), so the smoothed maximum is the plateau's
     * first index 0: P = R = 1, tp = round(1 * 2) = 2, fp = round(2/1 - 2) = 0. */
    const uint16_t tp[2] = {0x3ff, 0x3ff};
    const float conf[2] = {0.9f, 0.8f};
    const int32_t pc[2] = {0, 0}, tc[2] = {0, 0};
    yc_ap_result r;
    ck_assert_int_eq(yc_ap_per_class(tp, conf, pc, 2, tc, 2, 1, &r), YC_OK);
    ck_assert_int_eq(r.n, 1);
    for (int j = 0; j < YC_NIOU; j++)
        ck_assert_msg(fabs(r.ap[j] - 0.995) < tol, "AP[%d] = %.17g", j, r.ap[j]);
    ck_assert_int_eq(r.f1_index, 0);
    ck_assert(r.p[0] == 1.0 && r.r[0] == 1.0 && r.tp[0] == 2.0 && r.fp[0] == 0.0);
    ck_assert(fabs(r.map50 - 0.995) < tol && fabs(r.map - 0.995) < tol);
    ck_assert(r.has_pr[0] && r.pr_curve[0] == 1.0 && r.pr_curve[YC_NPX - 1] == 0.0);
    ck_assert(r.px[0] == 0.0 && r.px[YC_NPX - 1] == 1.0);
    yc_ap_result_free(&r);
}
END_TEST

START_TEST(test_ap_four_predictions)
{
    /* One class, 3 labels; predictions by confidence: TP 0.9, FP 0.8, TP 0.7, FP 0.6, correct at
     * IoU 0.5 only.  recall [1/3, 1/3, 2/3, 2/3], precision [1, 1/2, 2/3, 1/2].
     * mrec = [0, 1/3, 1/3, 2/3, 2/3, 1], envelope mpre = [1, 1, 2/3, 2/3, 1/2, 0].
     * np.interp on x = k/100: 1 for k <= 33; 2/3 for 34 <= k <= 66; 1.5 (1 - x) for k >= 67
     * (between (2/3, 1/2) and (1, 0)), except x = 1: 0.
     * Trapezoids (0.01 wide): 33 * 1 + (1 + 2/3)/2 + 32 * 2/3 + (2/3 + 0.495)/2
     * + 1.5 * sum_{k=67}^{99} (1 - (2k+1)/200) = 33 + 5/6 + 64/3 + 0.58083333 + 8.1675 = 63.915,
     * so AP@0.5 = 0.63915; AP at the other thresholds 0; AP@0.5:0.95 = 0.063915.
     * At the chosen index (YOLOv5 gives 676, px = 0.6767) R = 2/3 (constant between conf 0.7
     * and 0.6) and P is interpolated between 2/3 and 1/2: 0.62779...; tp = round(2/3 * 3) = 2,
     * fp = round(2/0.6278 - 2) = 1. */
    const uint16_t tp[4] = {1, 0, 1, 0};
    const float conf[4] = {0.9f, 0.8f, 0.7f, 0.6f};
    const int32_t pc[4] = {0, 0, 0, 0}, tc[3] = {0, 0, 0};
    yc_ap_result r;
    ck_assert_int_eq(yc_ap_per_class(tp, conf, pc, 4, tc, 3, 1, &r), YC_OK);
    ck_assert_msg(fabs(r.ap[0] - 0.63915) < tol, "AP@0.5 %.17g", r.ap[0]);
    for (int j = 1; j < YC_NIOU; j++)
        ck_assert(r.ap[j] == 0.0);
    ck_assert(fabs(r.ap5095[0] - 0.063915) < tol);
    ck_assert_int_eq(r.f1_index, 676);
    ck_assert(fabs(r.r[0] - 2.0 / 3.0) < tol);
    ck_assert_msg(fabs(r.p[0] - 0.62779447) < 1e-7, "P %.10g", r.p[0]);
    ck_assert(r.tp[0] == 2.0 && r.fp[0] == 1.0);
    yc_ap_result_free(&r);

    /* the same predictions in another input order give the same result (sorted by -conf) */
    const uint16_t tp2[4] = {0, 1, 1, 0};
    const float conf2[4] = {0.6f, 0.7f, 0.9f, 0.8f};
    ck_assert_int_eq(yc_ap_per_class(tp2, conf2, pc, 4, tc, 3, 1, &r), YC_OK);
    ck_assert(fabs(r.ap[0] - 0.63915) < tol && r.f1_index == 676);
    yc_ap_result_free(&r);
}
END_TEST

START_TEST(test_ap_classes)
{
    /* Labels: class 0 once, class 1 twice.  Predictions: class 0 TP (0.9); class 2 (no labels)
     * at 0.8 and 0.7: ignored.  ap_class = [0, 1]: class 0 AP 0.995, P = R = 1; class 1 has no
     * predictions: AP, P, R 0.  mAP@0.5 = (0.995 + 0)/2 = 0.4975, mP = 0.5, mR = 0.5. */
    const uint16_t tp[3] = {0x3ff, 0, 0};
    const float conf[3] = {0.9f, 0.8f, 0.7f};
    const int32_t pc[3] = {0, 2, 2}, tc[3] = {0, 1, 1};
    yc_ap_result r;
    ck_assert_int_eq(yc_ap_per_class(tp, conf, pc, 3, tc, 3, 3, &r), YC_OK);
    ck_assert_int_eq(r.n, 2);
    ck_assert(r.cls[0] == 0 && r.cls[1] == 1 && r.nt[0] == 1 && r.nt[1] == 2);
    ck_assert(fabs(r.ap[0] - 0.995) < tol && r.ap[YC_NIOU] == 0.0);
    ck_assert(r.p[0] == 1.0 && r.r[0] == 1.0 && r.p[1] == 0.0 && r.r[1] == 0.0);
    ck_assert(r.has_pr[0] && !r.has_pr[1]);
    ck_assert(fabs(r.map50 - 0.4975) < tol && r.mp == 0.5 && r.mr == 0.5);
    yc_ap_result_free(&r);

    /* no labels at all: no classes, zero means */
    ck_assert_int_eq(yc_ap_per_class(tp, conf, pc, 3, tc, 0, 3, &r), YC_OK);
    ck_assert(r.n == 0 && r.map == 0.0 && r.mp == 0.0);
    yc_ap_result_free(&r);

    /* classes outside [0, nc) */
    const int32_t bad[1] = {3};
    ck_assert_int_eq(yc_ap_per_class(tp, conf, pc, 3, bad, 1, 3, &r), YC_EFORMAT);
}
END_TEST

START_TEST(test_ap_f1_smoothing)
{
    /* One label; TP at conf 0.5, FP at 0.499.  On px = k/999:
     *  k >= 500 (px > 0.5): R = 0 (left fill) -> F1 0;
     *  k = 499 (px 0.4995): R = 1, P interpolated 1 -> 0.5 halfway: 0.7495, F1 0.857;
     *  k <= 498: R = 1, P = 1/2 (right fill) -> F1 2/3.
     * The raw maximum is k = 499, but the 101-point box filter gives window k = 449
     * (100 * 2/3 + 0.857)/101 = 0.6685 > 2/3 (windows further left) > window 450
     * (99 * 2/3 + 0.857 + 0)/101 = 0.6619, so YOLOv5 picks k = 449: P 1/2, R 1, F1 2/3,
     * tp = 1, fp = round(1/0.5 - 1) = 1. */
    const uint16_t tp[2] = {0x3ff, 0};
    const float conf[2] = {0.5f, 0.499f};
    const int32_t pc[2] = {0, 0}, tc[1] = {0};
    yc_ap_result r;
    ck_assert_int_eq(yc_ap_per_class(tp, conf, pc, 2, tc, 1, 1, &r), YC_OK);
    ck_assert(fabs(r.f1_curve[499] - 0.857) < 1e-3 && r.f1_curve[500] == 0.0);
    ck_assert_int_eq(r.f1_index, 449);
    ck_assert(r.p[0] == 0.5 && r.r[0] == 1.0 && fabs(r.f1[0] - 2.0 / 3.0) < tol);
    ck_assert(r.tp[0] == 1.0 && r.fp[0] == 1.0);
    yc_ap_result_free(&r);
}
END_TEST

START_TEST(test_smooth)
{
    /* f = 0.1 on 1000 points: round(200)//2 + 1 = 101 points.  A unit spike at 500 becomes
     * 1/101 on 450..550.  Ones on 0..9: out[0] sees 50 padded copies of y[0] = 1 and y[0..50]
     * (10 ones): 60/101.  f = 0.05: 51 points. */
    double y[1000], out[1001];
    memset(y, 0, sizeof y);
    y[500] = 1.0;
    ck_assert_int_eq(yc_smooth(y, 1000, 0.1, out), 1000);
    ck_assert(fabs(out[450] - 1.0 / 101) < tol && fabs(out[550] - 1.0 / 101) < tol);
    ck_assert(out[449] == 0.0 && out[551] == 0.0);
    memset(y, 0, sizeof y);
    for (int i = 0; i < 10; i++)
        y[i] = 1.0;
    ck_assert_int_eq(yc_smooth(y, 1000, 0.1, out), 1000);
    ck_assert(fabs(out[0] - 60.0 / 101) < tol && fabs(out[1] - 59.0 / 101) < tol);
    memset(y, 0, sizeof y);
    y[500] = 1.0;
    ck_assert_int_eq(yc_smooth(y, 1000, 0.05, out), 1000);
    ck_assert(fabs(out[475] - 1.0 / 51) < tol && out[474] == 0.0);
}
END_TEST

/* ---- confusion matrix ---- */

static double cm_at(const yc_confusion *cm, int pred, int truth)
{
    return cm->m[(size_t)pred * (cm->nc + 1) + truth];
}

START_TEST(test_confusion)
{
    /* nc = 3, background = 3.  Labels: L0 class 0 at A, L1 class 1 at B, L2 class 2 at C.
     * Detections: D0 class 0 on A (0.9): correct -> [0][0];  D1 class 2 on B (0.8):
     * misclassified -> [2][1];  D2 class 1 on empty space (0.7) -> background FP [1][3];
     * D3 class 0 near A (0.6, IoU 0.81 < D0's 1): loses A -> background FP [0][3];
     * D4 class 0 on C (0.2): below conf 0.25, ignored;  L2 has no detection -> background FN
     * [3][2]. */
    yc_confusion cm;
    ck_assert_int_eq(yc_confusion_init(&cm, 3), YC_OK);
    float l[3 * 5], d[5 * 6];
    set_label(l, 0, 0, 0, 0, 100, 100);
    set_label(l, 1, 1, 200, 0, 300, 100);
    set_label(l, 2, 2, 400, 0, 500, 100);
    set_det(d, 0, 0, 0, 100, 100, 0.9f, 0);
    set_det(d, 1, 200, 0, 300, 100, 0.8f, 2);
    set_det(d, 2, 0, 300, 100, 400, 0.7f, 1);
    set_det(d, 3, 0, 0, 90, 90, 0.6f, 0);
    set_det(d, 4, 400, 0, 500, 100, 0.2f, 0);
    ck_assert_int_eq(yc_confusion_process(&cm, d, 5, l, 3), YC_OK);
    double total = 0.0;
    for (int i = 0; i < 16; i++)
        total += cm.m[i];
    ck_assert(total == 5.0);
    ck_assert(cm_at(&cm, 0, 0) == 1 && cm_at(&cm, 2, 1) == 1 && cm_at(&cm, 1, 3) == 1 &&
              cm_at(&cm, 0, 3) == 1 && cm_at(&cm, 3, 2) == 1);
    double tp[3], fp[3];
    yc_confusion_tp_fp(&cm, tp, fp);
    ck_assert(tp[0] == 1 && fp[0] == 1 && tp[1] == 0 && fp[1] == 1 && tp[2] == 0 && fp[2] == 1);

    /* No pair at all: labels count as background FNs, detections are not counted (YOLOv5). */
    memset(cm.m, 0, 16 * sizeof *cm.m);
    ck_assert_int_eq(yc_confusion_process(&cm, d + 2 * 6, 1, l, 1), YC_OK);
    ck_assert(cm_at(&cm, 3, 0) == 1 && cm_at(&cm, 1, 3) == 0);
    /* detections None (no predictions) */
    ck_assert_int_eq(yc_confusion_process(&cm, NULL, 0, l, 3), YC_OK);
    ck_assert(cm_at(&cm, 3, 0) == 2 && cm_at(&cm, 3, 1) == 1 && cm_at(&cm, 3, 2) == 1);
    /* a label of an unknown class */
    set_label(l, 0, 7, 0, 0, 1, 1);
    ck_assert_int_eq(yc_confusion_process(&cm, d, 1, l, 1), YC_EFORMAT);
    yc_confusion_free(&cm);
}
END_TEST

/* ---- statistics, metrics, table ---- */

START_TEST(test_val_metrics)
{
    /* Three images, nc = 2:
     *  image 0: labels class 0 at A, class 1 at B; detections: A class 0 (0.9), B class 1 (0.8);
     *  image 1: no detections, one label class 1 (counts as a miss);
     *  image 2: one detection class 0 (0.7) and no labels (a false positive).
     * Class 0: TP 0.9, FP 0.7, 1 label: recall [1, 1], precision [1, 1/2]: AP 0.995.
     * Class 1: TP 0.8, 2 labels: recall [1/2], precision [1]: mrec [0, 1/2, 1], mpre
     * [1, 1, 0]: 1 up to x = 0.5, then linear to 0 at x = 1: trapezoids 50*0.01 + 0.01 *
     * sum_{k=50}^{99} (2 - (2k+1)/100)/2 = 0.5 + 0.25 = 0.75. */
    yc_val_stats s;
    ck_assert_int_eq(yc_val_stats_init(&s, 2), YC_OK);
    yc_confusion cm;
    ck_assert_int_eq(yc_confusion_init(&cm, 2), YC_OK);
    float l[2 * 5], d[2 * 6];
    set_label(l, 0, 0, 0, 0, 100, 100);
    set_label(l, 1, 1, 200, 0, 300, 100);
    set_det(d, 0, 0, 0, 100, 100, 0.9f, 0);
    set_det(d, 1, 200, 0, 300, 100, 0.8f, 1);
    ck_assert_int_eq(yc_val_stats_add(&s, d, 2, l, 2, &cm), YC_OK);
    set_label(l, 0, 1, 0, 0, 50, 50);
    ck_assert_int_eq(yc_val_stats_add(&s, NULL, 0, l, 1, &cm), YC_OK);
    set_det(d, 0, 0, 0, 10, 10, 0.7f, 0);
    ck_assert_int_eq(yc_val_stats_add(&s, d, 1, NULL, 0, &cm), YC_OK);
    ck_assert(s.seen == 3 && s.n_pred == 3 && s.n_label == 3);
    ck_assert(s.correct[0] == 0x3ff && s.correct[1] == 0x3ff && s.correct[2] == 0);
    /* confusion: two correct, one background FN (image 1); image 2 has no labels: not counted */
    ck_assert(cm_at(&cm, 0, 0) == 1 && cm_at(&cm, 1, 1) == 1 && cm_at(&cm, 2, 1) == 1 &&
              cm_at(&cm, 0, 2) == 0);
    /* an invalid class leaves the statistics unchanged */
    set_det(d, 0, 0, 0, 10, 10, 0.7f, 5);
    ck_assert_int_eq(yc_val_stats_add(&s, d, 1, NULL, 0, NULL), YC_EFORMAT);
    ck_assert(s.seen == 3 && s.n_pred == 3);

    yc_val_metrics m;
    ck_assert_int_eq(yc_val_metrics_compute(&s, &m), YC_OK);
    ck_assert(m.nt[0] == 1 && m.nt[1] == 2 && m.ap.n == 2);
    ck_assert_msg(fabs(m.ap.ap50[0] - 0.995) < tol && fabs(m.ap.ap50[1] - 0.75) < tol,
                  "AP50 %.17g %.17g", m.ap.ap50[0], m.ap.ap50[1]);
    ck_assert(fabs(m.map50 - 0.8725) < tol && fabs(m.map - 0.8725) < tol);
    ck_assert(fabs(m.maps[0] - 0.995) < tol && fabs(m.maps[1] - 0.75) < tol);
    ck_assert(fabs(m.fitness - (0.1 * m.map50 + 0.9 * m.map)) < tol);

    /* the table, as val.py prints it */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    static const char *const names[2] = {"person", "bicycle"};
    yc_val_print_header(f);
    yc_val_print_results(f, &m, names, true);
    fclose(f);
    char want[1024];
    snprintf(want, sizeof want,
             "%22s%11s%11s%11s%11s%11s%11s\n"
             "%22s%11d%11d%11.3g%11.3g%11.3g%11.3g\n"
             "%22s%11d%11d%11.3g%11.3g%11.3g%11.3g\n"
             "%22s%11d%11d%11.3g%11.3g%11.3g%11.3g\n",
             "Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95", "all", 3, 3, m.mp, m.mr,
             m.map50, m.map, "person", 3, 1, m.ap.p[0], m.ap.r[0], 0.995, 0.995, "bicycle", 3, 2,
             m.ap.p[1], m.ap.r[1], 0.75, 0.75);
    ck_assert_str_eq(buf, want);
    ck_assert_ptr_nonnull(strstr(buf, "                   all          3          3"));
    free(buf);
    yc_val_metrics_free(&m);

    /* no correct prediction anywhere: val.py skips ap_per_class, everything 0 */
    yc_val_stats_reset(&s);
    set_label(l, 0, 0, 0, 0, 100, 100);
    set_det(d, 0, 500, 500, 600, 600, 0.9f, 0);
    ck_assert_int_eq(yc_val_stats_add(&s, d, 1, l, 1, NULL), YC_OK);
    ck_assert_int_eq(yc_val_metrics_compute(&s, &m), YC_OK);
    ck_assert(m.ap.n == 0 && m.mp == 0.0 && m.map50 == 0.0 && m.maps[0] == 0.0 && m.nt[0] == 1);
    yc_val_metrics_free(&m);
    yc_confusion_free(&cm);
    yc_val_stats_free(&s);
}
END_TEST

#endif /* !YC_TEST_SHARED */

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
#ifdef YC_TEST_SHARED
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reference_nms);
    tcase_add_test(tc, test_reference_decode);
    suite_add_tcase(s, tc);
#else
    TCase *tc = tcase_create("nms");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_decode_small);
    tcase_add_test(tc, test_nms_class_aware_and_agnostic);
    tcase_add_test(tc, test_nms_multi_label);
    tcase_add_test(tc, test_nms_thresholds);
    tcase_add_test(tc, test_nms_filter_max_det_max_nms);
    tcase_add_test(tc, test_nms_tie_order);
    tcase_add_test(tc, test_nms_random_vs_naive);
    tcase_add_test(tc, test_boxes);
    suite_add_tcase(s, tc);
    tc = tcase_create("metrics");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_iouv_and_iou);
    tcase_add_test(tc, test_match_cases);
    tcase_add_test(tc, test_compute_ap);
    tcase_add_test(tc, test_ap_perfect);
    tcase_add_test(tc, test_ap_four_predictions);
    tcase_add_test(tc, test_ap_classes);
    tcase_add_test(tc, test_ap_f1_smoothing);
    tcase_add_test(tc, test_smooth);
    tcase_add_test(tc, test_confusion);
    tcase_add_test(tc, test_val_metrics);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void)
{
#ifdef YC_TEST_SHARED
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED,
                            "%s not found (PyTorch's decoding and NMS of the released YOLOv5n)",
                            missing);
#endif
    return yc_harness_run(metrics_suite(), false);
}
