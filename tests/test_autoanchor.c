/* Tests of AutoAnchor (src/train/autoanchor.c): the metric, fitness and label sizes against values
 * worked out by hand, scipy-style k-means on hand-made clusters, check_anchors keeping anchors
 * that fit and replacing anchors that do not (grid units, area order, level order against the
 * strides), determinism, too few labels.  test_autoanchor_ref (this file built with
 * YC_TEST_SHARED) checks COCO128 from ../shared with yolov5s's anchors (YOLOv5 v7.0 prints "4.27
 * anchors/target, 0.994 Best Possible Recall (BPR)" there) and exits 77 without it. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "autoanchor.h"
#include "dataset.h"
#include "log.h"
#include "model.h"
#include "rng.h"
#include "harness.h"
#include "yctest.h"

/* YOLOv5's P5 anchors in pixels (docs/YOLOV5.md 1.7). */
static const double P5_PX[18] = {10, 13, 16, 30, 33, 23, 30, 61, 62, 45,
                                 59, 119, 116, 90, 156, 198, 373, 326};

/* ------------------------------------------------------------------------------------------------
 * Helpers: hand-made datasets and models, stdout capture
 * ---------------------------------------------------------------------------------------------- */

#ifndef YC_TEST_SHARED
/* A dataset built in memory: images of the given sizes, boxes given in pixels of the image
 * scaled to long side 640 (so that the label sizes at imgsz 640 are exactly these). */
typedef struct hand_ds {
    yc_dataset ds;
    size_t cap_s, cap_b;
} hand_ds;

static void hd_init(hand_ds *h)
{
    memset(h, 0, sizeof *h);
    h->cap_s = 64;
    h->cap_b = 4096;
    h->ds.samples = calloc(h->cap_s, sizeof *h->ds.samples);
    h->ds.boxes = calloc(h->cap_b, sizeof *h->ds.boxes);
    ck_assert(h->ds.samples && h->ds.boxes);
    h->ds.nc = 1;
}

/* Adds an image of w x h pixels with nb boxes of (pw[i], ph[i]) pixels at imgsz 640. */
static void hd_image(hand_ds *h, int w, int hh, size_t nb, const double *pw, const double *ph)
{
    ck_assert(h->ds.n < h->cap_s && h->ds.n_boxes + nb <= h->cap_b);
    yc_sample *s = &h->ds.samples[h->ds.n++];
    s->image = "hand.jpg";
    s->label = "hand.txt";
    s->w = w;
    s->h = hh;
    s->first_box = h->ds.n_boxes;
    s->n_boxes = (uint32_t)nb;
    double mx = w > hh ? w : hh, sw = 640.0 * w / mx, sh = 640.0 * hh / mx;
    for (size_t i = 0; i < nb; i++) {
        yc_box *b = &h->ds.boxes[h->ds.n_boxes++];
        b->cls = 0;
        b->x = 0.5f;
        b->y = 0.5f;
        b->w = (float)(pw[i] / sw);
        b->h = (float)(ph[i] / sh);
    }
}

static void hd_free(hand_ds *h)
{
    free(h->ds.samples);
    free(h->ds.boxes);
}

#endif

/* A model with only what AutoAnchor reads: 3 levels of 3 anchors, strides, anchors in grid
 * units (from pixels). */
static void hand_model(yc_model *m, const double *px, const float *strides)
{
    memset(m, 0, sizeof *m);
    m->nl = 3;
    m->na = 3;
    for (int l = 0; l < 3; l++) {
        m->stride[l] = strides[l];
        for (int i = 0; i < 6; i++)
            m->anchors[l * 6 + i] = (float)px[l * 6 + i] / strides[l];
    }
}

static const float STRIDES[3] = {8, 16, 32};

/* What was printed to stdout since yc_harness_capture_start(c, 1), printed again (heap text). */
static char *capture_end(yc_harness_capture *c)
{
    char *s = yc_harness_capture_end(c);
    fputs(s, stdout);
    return s;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#ifndef YC_TEST_SHARED

/* The model's anchors in pixels. */
static void model_px(const yc_model *m, double *px)
{
    for (int l = 0; l < m->nl; l++)
        for (int i = 0; i < m->na * 2; i++)
            px[l * m->na * 2 + i] = (double)m->anchors[l * m->na * 2 + i] * m->stride[l];
}

/* ------------------------------------------------------------------------------------------------
 * Metric, fitness, label sizes, sorting
 * ---------------------------------------------------------------------------------------------- */

START_TEST(metric_by_hand)
{
    /* (64,64): x = .156 .25 .359 .469 .703 .538 .552 .323 .172 -> 6 above 0.25 (64/16 = 4 exactly
     *          gives x = 0.25, not above), best 45/64 = 0.703125;
     * (5,200): best 30/5 -> 5/30 = .167, none above, not recalled;
     * (300,300): .3 .52 .804 above -> 3, best 300/373.
     * bpr = 2/3, aat = 9/3 = 3, fitness = (0.703125 + 300/373) / 3. */
    const double wh[6] = {64, 64, 5, 200, 300, 300};
    double bpr, aat;
    yc_anchor_metric(wh, 3, P5_PX, 9, 4.0, &bpr, &aat);
    ck_assert_double_eq_tol(bpr, 2.0 / 3.0, 1e-15);
    ck_assert_double_eq_tol(aat, 3.0, 1e-15);
    ck_assert_double_eq_tol(yc_anchor_fitness(wh, 3, P5_PX, 9, 4.0),
                            (0.703125 + 300.0 / 373.0) / 3.0, 1e-15);
    /* a looser threshold (thr 8, t = 0.125) recalls (5,200) too, through (16,30) (x = .15) and
     * (30,61) (x = .167): bpr 1 */
    yc_anchor_metric(wh, 3, P5_PX, 9, 8.0, &bpr, &aat);
    ck_assert_double_eq_tol(bpr, 1.0, 1e-15);
    /* one anchor equal to the label: x = 1 */
    const double one[2] = {64, 64};
    ck_assert_double_eq_tol(yc_anchor_fitness(wh, 1, one, 1, 4.0), 1.0, 1e-15);
    /* nothing measured */
    yc_anchor_metric(wh, 0, P5_PX, 9, 4.0, &bpr, &aat);
    ck_assert(isnan(bpr) && isnan(aat));
    ck_assert_double_eq(yc_anchor_fitness(wh, 0, P5_PX, 9, 4.0), 0.0);
}
END_TEST

START_TEST(sort_by_area)
{
    double k[8] = {10, 10, 2, 3, 5, 1, 4, 4};
    yc_anchor_sort_by_area(k, 4);
    const double want[8] = {5, 1, 2, 3, 4, 4, 10, 10};
    for (int i = 0; i < 8; i++)
        ck_assert_double_eq(k[i], want[i]);
}
END_TEST

START_TEST(label_sizes)
{
    hand_ds h;
    hd_init(&h);
    const double w1[2] = {20, 45}, h1[2] = {20, 40};
    hd_image(&h, 1280, 960, 2, w1, h1); /* shape 640 x 480 */
    hd_image(&h, 500, 500, 0, NULL, NULL); /* a background still draws a scale */
    const double w2[1] = {300}, h2[1] = {200};
    hd_image(&h, 960, 1280, 1, w2, h2); /* shape 480 x 640 */
    double *wh;
    size_t n;
    ck_assert_int_eq(yc_anchor_label_wh(&h.ds, 640, NULL, &wh, &n), YC_OK);
    ck_assert_uint_eq(n, 3);
    const double want[6] = {20, 20, 45, 40, 300, 200};
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(wh[i], want[i], 1e-4);
    free(wh);
    /* at imgsz 320 everything halves */
    ck_assert_int_eq(yc_anchor_label_wh(&h.ds, 320, NULL, &wh, &n), YC_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(wh[i], want[i] / 2, 1e-4);
    free(wh);
    /* with a scale: one U(0.9, 1.1) draw per image, in image order */
    yc_rng r, ref;
    yc_rng_seed(&r, 7, 3);
    yc_rng_seed(&ref, 7, 3);
    ck_assert_int_eq(yc_anchor_label_wh(&h.ds, 640, &r, &wh, &n), YC_OK);
    double s0 = yc_rng_range(&ref, 0.9, 1.1);
    yc_rng_range(&ref, 0.9, 1.1);
    double s2 = yc_rng_range(&ref, 0.9, 1.1);
    const double sc[3] = {s0, s0, s2};
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(wh[i], want[i] * sc[i / 2], 1e-4);
    free(wh);
    ck_assert_int_ne(yc_anchor_label_wh(&h.ds, 0, NULL, &wh, &n), YC_OK);
    hd_free(&h);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * k-means
 * ---------------------------------------------------------------------------------------------- */

START_TEST(kmeans_clusters)
{
    /* three pairs: means (0,1), (10,1), (1,10), every point 1 from its mean -> distortion 1 */
    const double obs[12] = {0, 0, 0, 2, 10, 0, 10, 2, 0, 10, 2, 10};
    double book[6], dist;
    int kc;
    yc_rng r;
    yc_rng_seed(&r, 1, 1);
    ck_assert_int_eq(yc_kmeans(obs, 6, 3, 30, 1e-5, &r, book, &kc, &dist), YC_OK);
    ck_assert_int_eq(kc, 3);
    ck_assert_double_eq_tol(dist, 1.0, 1e-12);
    const double want[6] = {0, 1, 10, 1, 1, 10};
    for (int w = 0; w < 3; w++) {
        int found = 0;
        for (int j = 0; j < 3; j++)
            found += fabs(book[2 * j] - want[2 * w]) < 1e-12 &&
                     fabs(book[2 * j + 1] - want[2 * w + 1]) < 1e-12;
        ck_assert_int_eq(found, 1);
    }
    /* identical points: every code but the first loses its members and is dropped */
    const double same[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(yc_kmeans(same, 5, 3, 4, 1e-5, &r, book, &kc, &dist), YC_OK);
    ck_assert_int_eq(kc, 1);
    ck_assert_double_eq(dist, 0.0);
    ck_assert_double_eq(book[0], 1.0);
    /* k = n: every point its own code, distortion 0 */
    double big[14];
    ck_assert_int_eq(yc_kmeans(obs, 6, 6, 1, 1e-5, &r, big, &kc, &dist), YC_OK);
    ck_assert_int_eq(kc, 6);
    ck_assert_double_eq(dist, 0.0);
    /* errors */
    ck_assert_int_ne(yc_kmeans(obs, 6, 7, 1, 1e-5, &r, big, &kc, &dist), YC_OK);
    ck_assert_int_ne(yc_kmeans(obs, 6, 0, 1, 1e-5, &r, big, &kc, &dist), YC_OK);
    ck_assert_int_ne(yc_kmeans(obs, 6, 2, 0, 1e-5, &r, big, &kc, &dist), YC_OK);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * check_anchors
 * ---------------------------------------------------------------------------------------------- */

/* Labels whose counts of anchors above 0.25 do not depend on the U(0.9, 1.1) scale:
 * (20,20) 5, (45,40) 6, (300,300) 3, (200,250) 4, all recalled; (5,200) 0, not recalled. */
static void fitting_dataset(hand_ds *h, bool with_elongated)
{
    hd_init(h);
    const double w1[2] = {20, 45}, h1[2] = {20, 40};
    hd_image(h, 1280, 960, 2, w1, h1);
    hd_image(h, 300, 200, 0, NULL, NULL);
    const double w2[2] = {300, 200}, h2[2] = {300, 250};
    hd_image(h, 960, 1280, 2, w2, h2);
    if (with_elongated) {
        const double w3[1] = {5}, h3[1] = {200};
        hd_image(h, 640, 640, 1, w3, h3);
    }
}

START_TEST(good_fit_kept)
{
    hand_ds h;
    fitting_dataset(&h, false);
    yc_model m;
    hand_model(&m, P5_PX, STRIDES);
    float before[18];
    memcpy(before, m.anchors, sizeof before);
    yc_anchor_check rep;
    yc_harness_capture c;
    yc_harness_capture_start(&c, 1);
    int st = yc_check_anchors_report(&h.ds, &m, 4.0, 640, 0, &rep);
    char *out = capture_end(&c);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_uint_eq(rep.n_labels, 4);
    ck_assert_double_eq_tol(rep.bpr, 1.0, 1e-15);
    ck_assert_double_eq_tol(rep.aat, (5 + 6 + 3 + 4) / 4.0, 1e-15);
    ck_assert(!rep.changed);
    ck_assert(isnan(rep.new_bpr));
    ck_assert_mem_eq(before, m.anchors, sizeof before);
    ck_assert_ptr_nonnull(strstr(out, "\nAutoAnchor: 4.50 anchors/target, 1.000 Best Possible "
                                      "Recall (BPR). Current anchors are a good fit to dataset\n"));
    ck_assert_ptr_null(strstr(out, "kmeans"));
    free(out);
    bool changed = true;
    ck_assert_int_eq(yc_check_anchors(&h.ds, &m, 4.0, 640, 99, &changed), YC_OK);
    ck_assert(!changed);
    hd_free(&h);
}
END_TEST

START_TEST(poor_fit_reported)
{
    /* one label of five not recalled: bpr 0.8, aat 18/5 -> k-means and evolution run; the new
     * anchors recall (5,200) too, so they are adopted */
    hand_ds h;
    fitting_dataset(&h, true);
    yc_model m;
    hand_model(&m, P5_PX, STRIDES);
    yc_anchor_check rep;
    yc_harness_capture c;
    yc_harness_capture_start(&c, 1);
    int st = yc_check_anchors_report(&h.ds, &m, 4.0, 640, 0, &rep);
    char *out = capture_end(&c);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_double_eq_tol(rep.bpr, 0.8, 1e-15);
    ck_assert_double_eq_tol(rep.aat, 3.6, 1e-15);
    ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: 3.60 anchors/target, 0.800 Best Possible "
                                      "Recall (BPR). Anchors are a poor fit to dataset, "
                                      "attempting to improve...\n"));
    /* 5 points for 9 anchors: YOLOv5's assert fails and it starts from random anchors */
    ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: Running kmeans for 9 anchors on 5 points...\n"));
    ck_assert_ptr_nonnull(strstr(out, "switching strategies from kmeans to random init"));
    ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: thr=0.25: "));
    ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: n=9, img_size=640, metric_all="));
    if (rep.changed) {
        ck_assert(rep.new_bpr > rep.bpr);
        ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: Done (optional: update model *.yaml"));
    } else {
        ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: Done (original anchors better"));
    }
    free(out);
    hd_free(&h);
}
END_TEST

/* 40 images, 5 boxes each, of 4-6 x 180-220 px: nothing like the P5 anchors. */
static void elongated_dataset(hand_ds *h)
{
    hd_init(h);
    yc_rng r;
    yc_rng_seed(&r, 1234, 0);
    for (int i = 0; i < 40; i++) {
        double pw[5], ph[5];
        for (int j = 0; j < 5; j++) {
            pw[j] = yc_rng_range(&r, 4.0, 6.0);
            ph[j] = yc_rng_range(&r, 180.0, 220.0);
        }
        hd_image(h, 640, 480, 5, pw, ph);
    }
}

/* The levels' anchors in pixels are sorted by area across the levels, and each level's anchors
 * in grid units times its stride give them back. */
static void check_area_order(const yc_model *m)
{
    double px[18];
    model_px(m, px);
    for (int j = 0; j < 18; j++)
        ck_assert(isfinite(px[j]) && px[j] >= 2.0 - 1e-4);
    for (int j = 1; j < 9; j++)
        ck_assert_msg(px[2 * j] * px[2 * j + 1] >= px[2 * j - 2] * px[2 * j - 1],
                      "anchor %d smaller than anchor %d", j, j - 1);
}

START_TEST(elongated_replaced)
{
    hand_ds h;
    elongated_dataset(&h);
    yc_model m;
    hand_model(&m, P5_PX, STRIDES);
    yc_anchor_check rep;
    yc_harness_capture c;
    yc_harness_capture_start(&c, 1);
    double t0 = now_s();
    int st = yc_check_anchors_report(&h.ds, &m, 4.0, 640, 5, &rep);
    double dt = now_s() - t0;
    char *out = capture_end(&c);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_double_eq(rep.bpr, 0.0);
    ck_assert(rep.changed);
    ck_assert(rep.new_bpr > 0.99);
    ck_assert_ptr_nonnull(strstr(out, "Running kmeans for 9 anchors on 200 points...\n"));
    ck_assert_ptr_null(strstr(out, "switching strategies"));
    ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: Done (optional: update model *.yaml to use "
                                      "these anchors in the future)\n"));
    ck_assert_ptr_null(strstr(out, "Reversing"));
    free(out);
    check_area_order(&m);
    /* grid units: level l holds the pixel anchors divided by stride l; every anchor fits the
     * labels (narrow and tall) */
    double px[18];
    model_px(&m, px);
    for (int j = 0; j < 9; j++) {
        ck_assert_double_eq_tol((double)m.anchors[2 * j] * STRIDES[j / 3], px[2 * j], 1e-9);
        ck_assert(px[2 * j] < 20.0 && px[2 * j + 1] > 50.0);
    }
    /* the model's new anchors measure as check_anchors said */
    double *wh;
    size_t n;
    ck_assert_int_eq(yc_anchor_label_wh(&h.ds, 640, NULL, &wh, &n), YC_OK);
    double bpr, aat;
    yc_anchor_metric(wh, n, px, 9, 4.0, &bpr, &aat);
    ck_assert(bpr > 0.99 && aat > 1.0);
    free(wh);
    printf("elongated: new BPR %.4f, %.2f anchors/label, %.2f s\n", rep.new_bpr, aat, dt);

    /* a second check on the new anchors keeps them */
    bool changed = true;
    yc_harness_capture_start(&c, 1);
    ck_assert_int_eq(yc_check_anchors(&h.ds, &m, 4.0, 640, 6, &changed), YC_OK);
    free(capture_end(&c));
    ck_assert(!changed);
    hd_free(&h);
}
END_TEST

START_TEST(levels_follow_strides)
{
    /* strides listed largest first: check_anchor_order puts the largest anchors on level 0 */
    hand_ds h;
    elongated_dataset(&h);
    const float rev[3] = {32, 16, 8};
    double px0[18];
    for (int l = 0; l < 3; l++)
        memcpy(px0 + l * 6, P5_PX + (2 - l) * 6, 6 * sizeof *px0);
    yc_model m;
    hand_model(&m, px0, rev);
    yc_harness_capture c;
    yc_harness_capture_start(&c, 1);
    bool changed = false;
    int st = yc_check_anchors(&h.ds, &m, 4.0, 640, 5, &changed);
    char *out = capture_end(&c);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert(changed);
    ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: Reversing anchor order\n"));
    free(out);
    double px[18];
    model_px(&m, px);
    double area[3] = {0, 0, 0};
    for (int j = 0; j < 9; j++)
        area[j / 3] += px[2 * j] * px[2 * j + 1];
    ck_assert(area[0] >= area[1] && area[1] >= area[2]);
    /* within a level, the area order of kmean_anchors is kept */
    for (int l = 0; l < 3; l++)
        for (int a = 1; a < 3; a++)
            ck_assert(px[(l * 3 + a) * 2] * px[(l * 3 + a) * 2 + 1] >=
                      px[(l * 3 + a - 1) * 2] * px[(l * 3 + a - 1) * 2 + 1]);
    hd_free(&h);
}
END_TEST

START_TEST(deterministic)
{
    hand_ds h;
    elongated_dataset(&h);
    double a[18], b[18], c2[18];
    int saved = yc_verbosity;
    yc_verbosity = 0;
    ck_assert_int_eq(yc_kmean_anchors(&h.ds, 9, 640, 4.0, 300, 42, false, a), YC_OK);
    ck_assert_int_eq(yc_kmean_anchors(&h.ds, 9, 640, 4.0, 300, 42, false, b), YC_OK);
    ck_assert_int_eq(yc_kmean_anchors(&h.ds, 9, 640, 4.0, 300, 43, false, c2), YC_OK);
    ck_assert_mem_eq(a, b, sizeof a);
    ck_assert(memcmp(a, c2, sizeof a) != 0);
    yc_model m1, m2;
    hand_model(&m1, P5_PX, STRIDES);
    hand_model(&m2, P5_PX, STRIDES);
    yc_anchor_check r1, r2;
    ck_assert_int_eq(yc_check_anchors_report(&h.ds, &m1, 4.0, 640, 9, &r1), YC_OK);
    ck_assert_int_eq(yc_check_anchors_report(&h.ds, &m2, 4.0, 640, 9, &r2), YC_OK);
    yc_verbosity = saved;
    ck_assert_mem_eq(m1.anchors, m2.anchors, sizeof m1.anchors);
    ck_assert_double_eq(r1.new_bpr, r2.new_bpr);
    hd_free(&h);
}
END_TEST

START_TEST(few_and_degenerate_labels)
{
    /* fewer labels than anchors: random start, the evolution still runs, the result is sorted */
    hand_ds h;
    hd_init(&h);
    const double pw[4] = {5, 6, 7, 8}, ph[4] = {150, 170, 190, 210};
    hd_image(&h, 640, 640, 4, pw, ph);
    double k[18];
    yc_harness_capture c;
    yc_harness_capture_start(&c, 1);
    int st = yc_kmean_anchors(&h.ds, 9, 640, 4.0, 100, 3, true, k);
    char *out = capture_end(&c);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: Running kmeans for 9 anchors on 4 points...\n"
                                      "AutoAnchor: WARNING switching strategies from kmeans to "
                                      "random init\n"));
    free(out);
    for (int j = 0; j < 18; j++)
        ck_assert(isfinite(k[j]) && k[j] >= 0.0 && k[j] <= 640.0 * 3.0);
    for (int j = 1; j < 9; j++)
        ck_assert(k[2 * j] * k[2 * j + 1] >= k[2 * j - 2] * k[2 * j - 1]);
    yc_model m;
    hand_model(&m, P5_PX, STRIDES);
    bool changed;
    yc_harness_capture_start(&c, 1);
    st = yc_check_anchors(&h.ds, &m, 4.0, 640, 3, &changed);
    free(capture_end(&c));
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    if (changed)
        check_area_order(&m);
    hd_free(&h);

    /* identical labels: a zero deviation cannot whiten (YOLOv5's kmeans raises on the infinities
     * and it falls back to random anchors); tiny labels are counted and the < 2 px ones dropped */
    hd_init(&h);
    const double sw[6] = {50, 50, 50, 50, 1, 2.5}, sh[6] = {50, 50, 50, 50, 1, 2.5};
    for (int i = 0; i < 3; i++)
        hd_image(&h, 640, 640, 6, sw, sh);
    yc_harness_capture_start(&c, 1);
    st = yc_kmean_anchors(&h.ds, 3, 640, 4.0, 10, 3, false, k);
    out = capture_end(&c);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_ptr_nonnull(strstr(out, "AutoAnchor: WARNING Extremely small objects found: 6 of 18 "
                                      "labels are <3 pixels in size\n"));
    ck_assert_ptr_nonnull(strstr(out, "Running kmeans for 3 anchors on 15 points...\n"));
    free(out);

    /* no labels at all */
    hd_free(&h);
    hd_init(&h);
    hd_image(&h, 640, 640, 0, NULL, NULL);
    hand_model(&m, P5_PX, STRIDES);
    yc_anchor_check rep;
    yc_harness_capture_start(&c, 1);
    st = yc_check_anchors_report(&h.ds, &m, 4.0, 640, 3, &rep);
    out = capture_end(&c);
    ck_assert_int_eq(st, YC_OK);
    ck_assert(!rep.changed);
    ck_assert_uint_eq(rep.n_labels, 0);
    ck_assert_ptr_nonnull(strstr(out, "no labels"));
    free(out);
    ck_assert_int_ne(yc_kmean_anchors(&h.ds, 9, 640, 4.0, 10, 3, false, k), YC_OK);

    /* bad arguments */
    ck_assert_int_ne(yc_check_anchors(&h.ds, &m, 0.0, 640, 3, &changed), YC_OK);
    ck_assert_int_ne(yc_check_anchors(&h.ds, &m, 4.0, 0, 3, &changed), YC_OK);
    ck_assert_int_ne(yc_kmean_anchors(&h.ds, 0, 640, 4.0, 10, 3, false, k), YC_OK);
    hd_free(&h);
}
END_TEST

#else /* YC_TEST_SHARED */

static const char *const ref_files[] = {"data/coco128.yaml", NULL};

/* ------------------------------------------------------------------------------------------------
 * COCO128 from ../shared
 * ---------------------------------------------------------------------------------------------- */

START_TEST(coco128)
{
    char path[2048];
    yc_test_shared_path(ref_files[0], path, sizeof path);
    yc_data_yaml y;
    ck_assert_msg(yc_data_yaml_load(path, &y) == YC_OK, "%s", yc_last_error());
    yc_dataset_options o = {.nc = y.nc, .no_cache = true, .quiet = true};
    yc_dataset ds;
    ck_assert_msg(yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &o, &ds) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_uint_eq(ds.n_boxes, 929);

    /* yolov5s at 640: YOLOv5 prints 4.27 anchors/target, 0.994 BPR and keeps the anchors */
    for (uint64_t seed = 0; seed < 3; seed++) {
        yc_model m;
        hand_model(&m, P5_PX, STRIDES);
        yc_anchor_check rep;
        yc_harness_capture c;
        yc_harness_capture_start(&c, 1);
        int st = yc_check_anchors_report(&ds, &m, 4.0, 640, seed, &rep);
        char *out = capture_end(&c);
        ck_assert_msg(st == YC_OK, "%s", yc_last_error());
        ck_assert_msg(fabs(rep.bpr - 0.994) < 0.01, "BPR %.4f", rep.bpr);
        ck_assert_msg(fabs(rep.aat - 4.27) < 0.1, "aat %.3f", rep.aat);
        ck_assert(!rep.changed);
        ck_assert_ptr_nonnull(strstr(out, "Current anchors are a good fit to dataset"));
        free(out);
        printf("coco128 seed %d: %.4f BPR, %.3f anchors/target\n", (int)seed, rep.bpr, rep.aat);
    }

    /* kmean_anchors on coco128 (928 labels of 2 px or more, 1000 generations).
     * YOLOv5 v7.0's own kmean_anchors (scipy k-means, numpy mutations) reaches a BPR of 0.982 to
     * 0.993 and a fitness of 0.660 to 0.687 there over seeds 0-5 (the default anchors: 0.9946 and
     * 0.684): the k-means start scores lower than the hand-made anchors and the genetic algorithm
     * recovers most of it. */
    double k[18];
    double t0 = now_s();
    ck_assert_int_eq(yc_kmean_anchors(&ds, 9, 640, 4.0, 1000, 0, false, k), YC_OK);
    double dt = now_s() - t0;
    double *wh;
    size_t n;
    ck_assert_int_eq(yc_anchor_label_wh(&ds, 640, NULL, &wh, &n), YC_OK);
    double bpr, aat;
    yc_anchor_metric(wh, n, k, 9, 4.0, &bpr, &aat);
    double fit = yc_anchor_fitness(wh, n, k, 9, 4.0);
    printf("coco128 kmean_anchors: %.4f BPR, %.2f anchors/label, fitness %.4f, %.3f s\n", bpr, aat,
           fit, dt);
    ck_assert_msg(bpr > 0.975, "BPR %.4f", bpr);
    ck_assert_msg(fit > 0.63, "fitness %.4f", fit);
    free(wh);
    yc_dataset_free(&ds);
    yc_data_yaml_free(&y);
}
END_TEST

#endif /* YC_TEST_SHARED */

static Suite *autoanchor_suite(void)
{
    Suite *s = suite_create("autoanchor");
#ifdef YC_TEST_SHARED
    TCase *tc = tcase_create("coco128");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, coco128);
    suite_add_tcase(s, tc);
#else
    TCase *tc = tcase_create("metric");
    tcase_add_test(tc, metric_by_hand);
    tcase_add_test(tc, sort_by_area);
    tcase_add_test(tc, label_sizes);
    tcase_add_test(tc, kmeans_clusters);
    suite_add_tcase(s, tc);
    tc = tcase_create("check");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, good_fit_kept);
    tcase_add_test(tc, poor_fit_reported);
    tcase_add_test(tc, elongated_replaced);
    tcase_add_test(tc, levels_follow_strides);
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, few_and_degenerate_labels);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void)
{
#ifdef YC_TEST_SHARED
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED, "%s not found (coco128)", missing);
#endif
    return yc_harness_run(autoanchor_suite(), false);
}
