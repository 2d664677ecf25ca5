/* Tests of whole-image validation of tiled datasets (issue 7, src/eval/val_full.c, `--val-full`).
 *
 *   - perfect window detections: the labels of a hand-made image cut by the tile grid, each
 *     window "detecting" exactly the parts of the boxes it sees (the labels clipped to it, as a
 *     perfect detector would), mapped to the image and merged as sliced detection does, then
 *     matched against the image's labels: NMM puts the cut boxes back together (P = R = 1, AP
 *     0.995 at every IoU threshold, compute_ap's perfect score), NMS leaves the parts as false
 *     positives;
 *   - yc_validate_full through the tiny model of tests/data: an image larger than the tile whose
 *     labels are the model's own best merged detections (the same sliced detection, so the
 *     validation must find each label exactly: mAP 0.995 at every threshold), read whole and
 *     streamed (JPEG through a band), non-square so that a swapped axis would show; an image
 *     that changed size since the scan fails naming it.
 * Expected values are worked out in the comments. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataset.h"
#include "detect.h"
#include "device.h"
#include "image.h"
#include "log.h"
#include "metrics.h"
#include "slice.h"
#include "tile.h"
#include "util.h"
#include "val.h"
#include "val_full.h"
#include "harness.h"

/* ------------------------------------------------------------------------------------------------
 * Perfect window detections through the merge
 * ---------------------------------------------------------------------------------------------- */

/* A 400 x 240 image, tiles of 160 with overlap 0.2 (stride 160 - 32 = 128): x starts 0, 128 and
 * 400 - 160 = 240 (256 + 160 reaches past 400), y starts 0 and 240 - 160 = 80: 6 windows.
 * Labels (class, x1, y1, x2, y2) in pixels:
 *   A 0 (100, 20)-(150, 60):  inside window x 0..160, its part 128..150 (22 of 50 columns, 44%)
 *                             in window x 128..288 (kept by min area 0.1)
 *   B 1 (200, 150)-(260, 200): inside x 128..288; 240..260 (33%) in x 240..400; y 150..200 in
 *                             both rows (y 0..160 holds 150..160, 20%; y 80..240 all of it)
 *   C 0 (300, 100)-(380, 220): inside x 240..400, y 80..240; 100..160 of it (50%) in row y 0..160
 *   D 1 (20, 200)-(60, 236):  inside window (0, 80), nowhere else */
enum { PW = 400, PH = 240, PTILE = 160 };
static const float plabels[4][5] = {
    {0, 100, 20, 150, 60}, {1, 200, 150, 260, 200}, {0, 300, 100, 380, 220}, {1, 20, 200, 60, 236}};

/* The windows' perfect detections, mapped to the image and merged with p into out: each window
 * detects the part of each label it keeps (yc_tile_clip_labels, min area 0.1) with confidence
 * 0.5 + 0.4 x the fraction of the box it sees (a whole box 0.9, as a detector is surer of whole
 * objects).  *n_parts gets the raw count (the instances per-tile validation would count). */
static void perfect_merged(const yc_merge_params *p, yc_slice_dets *out, size_t *n_parts)
{
    yc_box boxes[4], clipped;
    for (int i = 0; i < 4; i++) {
        const float *l = plabels[i];
        boxes[i] = (yc_box){.cls = (int32_t)l[0], .x = (l[1] + l[3]) / 2 / PW,
                            .y = (l[2] + l[4]) / 2 / PH, .w = (l[3] - l[1]) / PW,
                            .h = (l[4] - l[2]) / PH};
    }
    yc_tile_window *win = NULL;
    size_t nw = 0;
    ck_assert_int_eq(yc_tile_grid(PW, PH, PTILE, 0.2, &win, &nw), YC_OK);
    ck_assert_uint_eq(nw, 6);
    yc_slice_dets raw = YC_SLICE_DETS_INIT;
    for (size_t w = 0; w < nw; w++)
        for (int i = 0; i < 4; i++) {
            size_t nk = 0;
            ck_assert_int_eq(yc_tile_clip_labels(&boxes[i], 1, PW, PH, win[w], 0.1, &clipped, &nk),
                             YC_OK);
            if (nk == 0)
                continue;
            const yc_box *b = &clipped;
            double seen = (double)(b->w * (float)win[w].w) * (double)(b->h * (float)win[w].h) /
                          (((double)plabels[i][3] - plabels[i][1]) *
                           ((double)plabels[i][4] - plabels[i][2]));
            float r[6] = {(b->x - b->w / 2) * (float)win[w].w, (b->y - b->h / 2) * (float)win[w].h,
                          (b->x + b->w / 2) * (float)win[w].w, (b->y + b->h / 2) * (float)win[w].h,
                          (float)(0.5 + 0.4 * seen), (float)b->cls};
            ck_assert_int_eq(yc_slice_dets_add_window(&raw, r, 1, win[w]), YC_OK);
        }
    *n_parts = raw.n;
    ck_assert_int_eq(yc_slice_dets_merge(&raw, p, INT_MAX, out), YC_OK);
    yc_slice_dets_free(&raw);
    free(win);
}

/* The sink's metrics of one image with these detections and the 4 labels. */
static void score(const yc_slice_dets *d, yc_val_result *res)
{
    yc_val_options o;
    yc_val_options_default(&o);
    o.print = false;
    yc_val_sink *s = NULL;
    ck_assert_int_eq(yc_val_sink_new(&s, 2, &o), YC_OK);
    ck_assert_int_eq(yc_val_sink_add(s, "perfect.png", PW, PH, d->rows, (int)d->n,
                                     &plabels[0][0], 4),
                     YC_OK);
    memset(res, 0, sizeof *res);
    ck_assert_int_eq(yc_val_sink_metrics(s, NULL, res), YC_OK);
    ck_assert_int_eq(yc_val_sink_save(s, NULL, res), YC_OK);
    yc_val_sink_free(s);
}

START_TEST(test_perfect_windows_nmm)
{
    /* parts seen: A twice (windows (0, 0) whole, (128, 0) 44%), B three times ((128, 80) whole,
     * (128, 0) 20%, (240, 80) 33%; in (240, 0) only 20 x 10 of 60 x 50, 6.7%: dropped), C twice
     * ((240, 80) whole, (240, 0) 50%), D once: 8 */
    yc_slice_dets out = YC_SLICE_DETS_INIT;
    size_t parts = 0;
    yc_merge_params p = yc_merge_params_nmm();
    perfect_merged(&p, &out, &parts);
    ck_assert_uint_eq(parts, 8);
    /* the whole boxes (0.9) come first and every part lies inside its whole box (IoS 1): merged
     * back into the 4 labels exactly */
    ck_assert_uint_eq(out.n, 4);
    yc_val_result res;
    score(&out, &res);
    ck_assert_int_eq(res.metrics.seen, 1);
    ck_assert_int_eq(res.metrics.nt[0] + res.metrics.nt[1], 4);
    ck_assert_double_eq_tol(res.metrics.mp, 1.0, 1e-9);
    ck_assert_double_eq_tol(res.metrics.mr, 1.0, 1e-9);
    ck_assert_double_eq_tol(res.metrics.map50, 0.995, 1e-9);
    ck_assert_double_eq_tol(res.metrics.map, 0.995, 1e-9);
    yc_val_result_free(&res);
    yc_slice_dets_free(&out);
}
END_TEST

START_TEST(test_perfect_windows_nms)
{
    /* NMS by IoU 0.5 keeps the parts whose IoU with the whole box is at most 0.5, here all of
     * them: A's part 22 x 40 of 50 x 40 (IoU 0.44), B's 60 x 10 and 20 x 50 of 60 x 50 (0.2,
     * 0.33), C's 80 x 60 of 80 x 120 (0.5, not above): 8 detections for 4 labels.  The 4 parts
     * are false positives, but below every whole box (0.58 to 0.7 against 0.9): recall reaches 1
     * before them and AP stays 0.995 (P, read from curves interpolated between confidences,
     * drops below 1). */
    yc_slice_dets out = YC_SLICE_DETS_INIT;
    size_t parts = 0;
    yc_merge_params p = yc_merge_params_nms();
    perfect_merged(&p, &out, &parts);
    ck_assert_uint_eq(out.n, 8);
    yc_val_result res;
    score(&out, &res);
    ck_assert_uint_eq(res.n_det, 8);
    ck_assert_double_eq_tol(res.metrics.mr, 1.0, 1e-9);
    ck_assert_double_lt(res.metrics.mp, 1.0);
    ck_assert_double_eq_tol(res.metrics.map50, 0.995, 1e-9);
    yc_val_result_free(&res);
    yc_slice_dets_free(&out);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * yc_validate_full through a model
 * ---------------------------------------------------------------------------------------------- */

enum { MW = 520, MH = 360, MTILE = 160 };

/* <scratch directory>/NAME/images/val/a.jpg: a MW x MH pattern with solid rectangles, and an
 * empty labels/val folder; returns the image path in img. */
static void write_image(const char *name, char *img, size_t len)
{
    static const yc_harness_rect rects[] = {{40, 30, 90, 70, 230, 40, 40},
                                            {150, 200, 210, 250, 30, 200, 60},
                                            {300, 120, 380, 180, 20, 40, 220},
                                            {450, 290, 500, 340, 250, 250, 250}};
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s/labels/val", yc_harness_tmpdir(), name);
    ck_assert_int_eq(yc_mkdirs(dir), YC_OK);
    yc_image im = YC_IMAGE_INIT;
    yc_harness_pattern(&im, MH, MW, 0);
    yc_harness_paint(&im, rects, sizeof rects / sizeof rects[0]);
    snprintf(img, len, "%s/%s/images/val/a.jpg", yc_harness_tmpdir(), name);
    yc_harness_write_image(img, &im);
    yc_image_free(&im);
}

/* The detector yc_validate_full makes from these options. */
static yc_detector *val_detector(const yc_infer_model *im, const yc_val_options *o)
{
    yc_detect_options d;
    yc_detect_options_default(&d);
    d.img_h = d.img_w = o->imgsz;
    d.conf_thres = o->conf_thres;
    d.iou_thres = o->iou_thres;
    d.max_det = o->max_det;
    d.fixed_shape = true;
    d.val_mode = true;
    yc_detector *det = NULL;
    ck_assert_int_eq(yc_detector_new(&det, im, &d), YC_OK);
    return det;
}

static void load(const char *name, yc_dataset *ds)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s/images/val", yc_harness_tmpdir(), name);
    const char *entries[1] = {dir};
    yc_dataset_options o = {.nc = 3, .no_cache = true, .quiet = true};
    ck_assert_msg(yc_dataset_load(entries, 1, &o, ds) == YC_OK, "%s", yc_last_error());
}

START_TEST(test_validate_full_own_detections)
{
    yc_backend *be = NULL;
    yc_infer_model im;
    memset(&im, 0, sizeof im);
    yc_harness_tiny_infer(&be, &im);
    char img[800];
    write_image("own", img, sizeof img);
    yc_val_options vo;
    yc_val_options_default(&vo);
    vo.print = false;
    vo.imgsz = MTILE;
    yc_slice_options so;
    yc_slice_options_default(&so);
    so.tile = MTILE;
    so.max_det = INT_MAX;

    /* the labels: the best merged detections of the same sliced detection, cut where the
     * confidence strictly drops so that no other detection ties with a label's */
    yc_detector *det = val_detector(&im, &vo);
    yc_slice_source *src = NULL;
    yc_slice_dets raw = YC_SLICE_DETS_INIT, merged = YC_SLICE_DETS_INIT;
    yc_slice_info info;
    ck_assert_int_eq(yc_slice_source_open(&src, img, so.decode_max, so.tile), YC_OK);
    ck_assert_msg(yc_slice_detect_image(det, src, img, &so, &raw, &merged, &info) == YC_OK, "%s",
                  yc_last_error());
    yc_slice_source_free(src);
    /* x starts 0, 128, 256, 360; y starts 0, 128, 200 */
    ck_assert_int_eq(info.windows, 12);
    size_t k = 6;
    while (k < merged.n && merged.rows[(k - 1) * 6 + 4] == merged.rows[k * 6 + 4])
        k++;
    ck_assert_msg(k < merged.n, "%zu detections", merged.n);
    char lab[800];
    snprintf(lab, sizeof lab, "%s/own/labels/val/a.txt", yc_harness_tmpdir());
    FILE *f = fopen(lab, "w");
    ck_assert_ptr_nonnull(f);
    int per_class[3] = {0, 0, 0};
    for (size_t i = 0; i < k; i++) {
        const float *r = merged.rows + i * 6;
        fprintf(f, "%d %.9f %.9f %.9f %.9f\n", (int)r[5], (r[0] + r[2]) / 2 / MW,
                (r[1] + r[3]) / 2 / MH, (r[2] - r[0]) / MW, (r[3] - r[1]) / MH);
        per_class[(int)r[5]]++;
    }
    ck_assert_int_eq(fclose(f), 0);
    yc_detector_free(det);

    /* validated whole (decoded) and streamed (the JPEG read through a band of tile rows) */
    yc_dataset ds;
    load("own", &ds);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_uint_eq(ds.n_boxes, k);
    const int decode_max[2] = {YC_SLICE_DECODE_MAX, 0};
    for (int c = 0; c < 2; c++) {
        so.decode_max = decode_max[c];
        so.max_det = 7; /* ignored: every merged detection is kept */
        yc_val_result res;
        ck_assert_msg(yc_validate_full(im.m, im.stride, &ds, NULL, &vo, &so, &res) == YC_OK,
                      "%s", yc_last_error());
        ck_assert_int_eq(res.metrics.seen, 1);
        ck_assert_int_eq(res.nbatches, 12);
        ck_assert_uint_eq(res.n_det, merged.n);
        for (int cl = 0; cl < 3; cl++)
            ck_assert_int_eq(res.metrics.nt[cl], per_class[cl]);
        ck_assert_double_eq_tol(res.metrics.mr, 1.0, 1e-9);
        ck_assert_double_eq_tol(res.metrics.map50, 0.995, 1e-9);
        ck_assert_double_eq_tol(res.metrics.map, 0.995, 1e-9);
        ck_assert_double_eq(res.loss[0], 0);
        yc_val_result_free(&res);
    }

    /* with --single-cls every label and detection is class 0: still each label found */
    vo.single_cls = true;
    yc_val_result res;
    ck_assert_int_eq(yc_validate_full(im.m, im.stride, &ds, NULL, &vo, &so, &res), YC_OK);
    ck_assert_int_eq(res.metrics.nc, 1);
    ck_assert_int_eq(res.metrics.nt[0], (int64_t)k);
    ck_assert_double_eq_tol(res.metrics.mr, 1.0, 1e-9);
    yc_val_result_free(&res);
    vo.single_cls = false;

    /* the image replaced by a smaller one after the scan */
    yc_image small = YC_IMAGE_INIT;
    ck_assert_int_eq(yc_image_reserve(&small, 100, 120), YC_OK);
    memset(small.data, 128, (size_t)100 * 120 * 3);
    ck_assert_int_eq(yc_image_save(&small, img, 0), YC_OK);
    yc_image_free(&small);
    ck_assert_int_eq(yc_validate_full(im.m, im.stride, &ds, NULL, &vo, &so, &res), YC_EFORMAT);
    ck_assert_ptr_nonnull(
        strstr(yc_last_error(), "a.jpg is 120x100, the label scan found 520x360"));
    /* no window size */
    so.tile = 0;
    ck_assert_int_eq(yc_validate_full(im.m, im.stride, &ds, NULL, &vo, &so, &res), YC_EUSAGE);

    yc_dataset_free(&ds);
    yc_slice_dets_free(&raw);
    yc_slice_dets_free(&merged);
    yc_infer_model_free(&im);
    yc_backend_free(be);
}
END_TEST

START_TEST(test_host_bytes)
{
    /* a model is needed for the head sizes: the tiny one's config without weights */
    yc_backend *be = NULL;
    yc_infer_model im;
    memset(&im, 0, sizeof im);
    yc_harness_tiny_infer(&be, &im);
    /* 30000 x 30000 at tile 640, overlap 0.2 (stride 512): 59 x 59 windows, 300 detections each:
     * their rows before and after merging alone take 2 x 1044300 x 24 bytes */
    size_t big = yc_val_full_host_bytes(im.m, 640, 640, 0.2, 300, 30000, 30000, 4096, true);
    ck_assert_uint_ge(big, (size_t)2 * 59 * 59 * 300 * 24);
    ck_assert_uint_lt(big, (size_t)1 << 30);
    /* a smaller image needs less; staging copies add to it; bad sizes give 0 */
    size_t small = yc_val_full_host_bytes(im.m, 640, 640, 0.2, 300, 6000, 6000, 4096, true);
    ck_assert_uint_lt(small, big);
    ck_assert_uint_gt(yc_val_full_host_bytes(im.m, 640, 640, 0.2, 300, 6000, 6000, 4096, false),
                      small);
    ck_assert_uint_eq(yc_val_full_host_bytes(im.m, 640, 0, 0.2, 300, 6000, 6000, 4096, true), 0);
    yc_infer_model_free(&im);
    yc_backend_free(be);
}
END_TEST

static Suite *valfull_suite(void)
{
    Suite *s = suite_create("valfull");
    TCase *tc = tcase_create("merge");
    tcase_add_test(tc, test_perfect_windows_nmm);
    tcase_add_test(tc, test_perfect_windows_nms);
    suite_add_tcase(s, tc);
    tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_validate_full_own_detections);
    tcase_add_test(tc, test_host_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_main(valfull_suite(), "valfull");
}
