/* Tests of src/data/tile.c and src/eval/slice_merge.c (issue 7): the window grid of tiled images (SAHI's
 * rule), the training jitter, labels clipped to a window, detections mapped back to the image,
 * and the NMS / NMM merging of sliced detections.  Every expected value is computed by hand in
 * the comment next to its check. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "slice_merge.h"
#include "tile.h"

/* ---- helpers ---- */

/* Runs yc_tile_grid and checks YC_OK and the count. */
static yc_tile_window *grid(int w, int h, int tile, double overlap, size_t n_want)
{
    yc_tile_window *win = NULL;
    size_t n = 0;
    ck_assert_msg(yc_tile_grid(w, h, tile, overlap, &win, &n) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(n == n_want, "%dx%d tile %d overlap %g: %zu windows, expected %zu", w, h, tile,
                  overlap, n, n_want);
    ck_assert_ptr_nonnull(win);
    return win;
}

static void check_win(const yc_tile_window *w, int x, int y, int ww, int wh)
{
    ck_assert_msg(w->x == x && w->y == y && w->w == ww && w->h == wh,
                  "window (%d %d %d %d), expected (%d %d %d %d)", w->x, w->y, w->w, w->h, x, y,
                  ww, wh);
}

/* A label from a pixel box (x1, y1, x2, y2) of an img_w x img_h image. */
static yc_box px_box(int cls, double x1, double y1, double x2, double y2, int img_w, int img_h)
{
    return (yc_box){.cls = cls,
                    .x = (float)((x1 + x2) / 2 / img_w),
                    .y = (float)((y1 + y2) / 2 / img_h),
                    .w = (float)((x2 - x1) / img_w),
                    .h = (float)((y2 - y1) / img_h)};
}

/* Checks a clipped box against a pixel box (x1, y1, x2, y2) of a win_w x win_h window. */
static void check_clip(const yc_box *b, int cls, double x1, double y1, double x2, double y2,
                       int win_w, int win_h)
{
    const double want[4] = {(x1 + x2) / 2 / win_w, (y1 + y2) / 2 / win_h, (x2 - x1) / win_w,
                            (y2 - y1) / win_h};
    const double got[4] = {b->x, b->y, b->w, b->h};
    ck_assert_int_eq(b->cls, cls);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs(got[i] - want[i]) < 1e-6, "value %d: %.9g, expected %.9g", i, got[i],
                      want[i]);
}

/* Sets detection row r: box, score, class. */
static void set_det(float *d, int r, float x1, float y1, float x2, float y2, float conf, int cls)
{
    float *p = d + (size_t)r * YC_MERGE_DET_STRIDE;
    p[0] = x1;
    p[1] = y1;
    p[2] = x2;
    p[3] = y2;
    p[4] = conf;
    p[5] = (float)cls;
}

static void check_det(const float *d, float x1, float y1, float x2, float y2, float conf, int cls)
{
    ck_assert_msg(d[0] == x1 && d[1] == y1 && d[2] == x2 && d[3] == y2 && d[4] == conf &&
                      d[5] == (float)cls,
                  "detection (%g %g %g %g %g %g), expected (%g %g %g %g %g %d)", (double)d[0],
                  (double)d[1], (double)d[2], (double)d[3], (double)d[4], (double)d[5],
                  (double)x1, (double)y1, (double)x2, (double)y2, (double)conf, cls);
}

static size_t merge(const float *dets, size_t n, yc_merge_params p, float *out)
{
    size_t k = (size_t)-1;
    ck_assert_msg(yc_slice_merge(dets, n, &p, out, &k) == YC_OK, "%s", yc_last_error());
    return k;
}

/* ---- the grid ---- */

START_TEST(test_grid_1000x600)
{
    /* tile 640, overlap 0.2: 128 overlap pixels, stride 512.  x: 0 (0 + 640 < 1000), then 512
     * would end at 1152 > 1000, so the last window moves back to 1000 - 640 = 360.  y: 600 <=
     * 640, one window at 0 of height 600.  Row-major: (0, 0), (360, 0). */
    int s = 0;
    ck_assert_int_eq(yc_tile_stride(640, 0.2, &s), YC_OK);
    ck_assert_int_eq(s, 512);
    yc_tile_window *w = grid(1000, 600, 640, 0.2, 2);
    check_win(&w[0], 0, 0, 640, 600);
    check_win(&w[1], 360, 0, 640, 600);
    free(w);
    /* transposed: one column, y starts 0 and 360 */
    w = grid(600, 1000, 640, 0.2, 2);
    check_win(&w[0], 0, 0, 600, 640);
    check_win(&w[1], 0, 360, 600, 640);
    free(w);
}
END_TEST

START_TEST(test_grid_exact_multiple)
{
    /* 1152 = 640 + 512 and 1664 = 640 + 2*512: x starts 0, 512 (the window at 512 ends exactly
     * at 1152, no shifted copy); y starts 0, 512, 1024.  Row-major order, y outer. */
    yc_tile_window *w = grid(1152, 1664, 640, 0.2, 6);
    const int xs[6] = {0, 512, 0, 512, 0, 512}, ys[6] = {0, 0, 512, 512, 1024, 1024};
    for (int i = 0; i < 6; i++)
        check_win(&w[i], xs[i], ys[i], 640, 640);
    free(w);
}
END_TEST

START_TEST(test_grid_small_and_one_pixel)
{
    /* smaller than a tile in both directions: one window, the whole image */
    yc_tile_window *w = grid(300, 200, 640, 0.2, 1);
    check_win(&w[0], 0, 0, 300, 200);
    free(w);
    /* exactly one tile */
    w = grid(640, 640, 640, 0.2, 1);
    check_win(&w[0], 0, 0, 640, 640);
    free(w);
    /* one pixel wider than a tile: 0 (0 + 640 < 641), then 641 - 640 = 1 */
    w = grid(641, 640, 640, 0.2, 2);
    check_win(&w[0], 0, 0, 640, 640);
    check_win(&w[1], 1, 0, 640, 640);
    free(w);
}
END_TEST

START_TEST(test_grid_overlap_zero)
{
    /* 1300 x 500, tile 500, overlap 0: stride 500.  x: 0 (500 < 1300), 500 (1000 < 1300), then
     * 1000 would end at 1500 > 1300: 1300 - 500 = 800.  y: 500 <= 500, one row. */
    int s = 0;
    ck_assert_int_eq(yc_tile_stride(500, 0.0, &s), YC_OK);
    ck_assert_int_eq(s, 500);
    yc_tile_window *w = grid(1300, 500, 500, 0.0, 3);
    check_win(&w[0], 0, 0, 500, 500);
    check_win(&w[1], 500, 0, 500, 500);
    check_win(&w[2], 800, 0, 500, 500);
    free(w);
}
END_TEST

START_TEST(test_grid_rounding_and_errors)
{
    int s = 0;
    /* 10 * 0.25 = 2.5 overlap pixels round to 3 (SAHI would truncate to 2): stride 7 */
    ck_assert_int_eq(yc_tile_stride(10, 0.25, &s), YC_OK);
    ck_assert_int_eq(s, 7);
    /* 10 * 0.24 = 2.4 -> 2: stride 8 */
    ck_assert_int_eq(yc_tile_stride(10, 0.24, &s), YC_OK);
    ck_assert_int_eq(s, 8);
    /* 640 * 0.9995 = 639.68 rounds to 640: the stride is kept at 1 */
    ck_assert_int_eq(yc_tile_stride(640, 0.9995, &s), YC_OK);
    ck_assert_int_eq(s, 1);
    /* bad overlap: the message names the value; the grid returns nothing */
    const double bad[3] = {1.0, -0.1, NAN};
    const char *names[3] = {"overlap 1:", "overlap -0.1:", "overlap nan:"};
    yc_tile_window sentinel = {1, 2, 3, 4};
    for (int i = 0; i < 3; i++) {
        yc_tile_window *w = &sentinel;
        size_t n = 7;
        ck_assert_int_eq(yc_tile_grid(1000, 600, 640, bad[i], &w, &n), YC_EUSAGE);
        ck_assert_msg(strstr(yc_last_error(), names[i]) != NULL, "message: %s", yc_last_error());
        ck_assert_ptr_null(w);
        ck_assert_uint_eq(n, 0);
    }
    yc_tile_window *w = NULL;
    size_t n = 0;
    ck_assert_int_eq(yc_tile_grid(1000, 600, 0, 0.2, &w, &n), YC_EUSAGE);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "tile size 0"));
    ck_assert_int_eq(yc_tile_grid(0, 600, 640, 0.2, &w, &n), YC_EUSAGE);
}
END_TEST

START_TEST(test_grid_properties)
{
    /* Many sizes around each tile size (up to 4 tiles wide, 3 high): every window lies inside the
     * image with size min(tile, extent); starts along an axis are strictly increasing with steps
     * <= stride (so neighbours overlap by at least the overlap and no window repeats); the first
     * is 0 and the last ends at the border. */
    const int tiles[4] = {1, 5, 64, 640};
    const double overlaps[4] = {0.0, 0.2, 0.5, 0.9};
    for (int ti = 0; ti < 4; ti++)
        for (int oi = 0; oi < 4; oi++) {
            const int tile = tiles[ti], step = tile / 16 > 1 ? tile / 16 : 1;
            for (int iw = 1; iw <= 4 * tile; iw += step) {
                const int ih = 1 + (iw * 7) % (3 * tile);
                int s = 0;
                ck_assert_int_eq(yc_tile_stride(tile, overlaps[oi], &s), YC_OK);
                yc_tile_window *w = NULL;
                size_t n = 0;
                ck_assert_int_eq(yc_tile_grid(iw, ih, tile, overlaps[oi], &w, &n), YC_OK);
                size_t nx = 1;
                while (nx < n && w[nx].y == w[0].y)
                    nx++;
                ck_assert_uint_eq(n % nx, 0);
                for (size_t i = 0; i < n; i++) {
                    const yc_tile_window *a = &w[i];
                    ck_assert(a->w == (iw < tile ? iw : tile) && a->h == (ih < tile ? ih : tile));
                    ck_assert(a->x >= 0 && a->y >= 0 && a->x + a->w <= iw && a->y + a->h <= ih);
                    ck_assert_int_eq(a->y, w[i / nx * nx].y);
                    ck_assert_int_eq(a->x, w[i % nx].x);
                    if (i % nx == 0)
                        ck_assert_int_eq(a->x, 0);
                    else
                        ck_assert(a->x > w[i - 1].x && a->x - w[i - 1].x <= s);
                    if (i % nx == nx - 1)
                        ck_assert_int_eq(a->x + a->w, iw);
                    if (i >= nx)
                        ck_assert(a->y > w[i - nx].y && a->y - w[i - nx].y <= s);
                }
                ck_assert_int_eq(w[0].y, 0);
                ck_assert_int_eq(w[n - 1].y + w[n - 1].h, ih);
                free(w);
            }
        }
}
END_TEST

/* ---- jitter ---- */

START_TEST(test_jitter)
{
    /* Window (360, 0, 640, 600) of 1000 x 600, stride 512: shifts up to 256 each way.
     * u = 0: -256 -> x 104.  u = 0.5: floor(0.5 * 513) - 256 = 0.  u just under 1: +256 -> 616,
     * clamped to 1000 - 640 = 360.  The window spans the height: y stays 0 for any v. */
    yc_tile_window w0 = {360, 0, 640, 600};
    check_win((yc_tile_window[]){yc_tile_jitter(w0, 1000, 600, 512, 0.0, 0.0)}, 104, 0, 640, 600);
    check_win((yc_tile_window[]){yc_tile_jitter(w0, 1000, 600, 512, 0.5, 0.99)}, 360, 0, 640,
              600);
    check_win((yc_tile_window[]){yc_tile_jitter(w0, 1000, 600, 512, 0.9999999, 0.3)}, 360, 0, 640,
              600);
    /* an inner window of 3000 x 3000 moves freely: (512, 512) -> (256, 768); out-of-range draws
     * are clamped into [0, 1) */
    yc_tile_window w1 = {512, 512, 640, 640};
    check_win((yc_tile_window[]){yc_tile_jitter(w1, 3000, 3000, 512, 0.0, 0.9999999)}, 256, 768,
              640, 640);
    check_win((yc_tile_window[]){yc_tile_jitter(w1, 3000, 3000, 512, -1.0, 5.0)}, 256, 768, 640,
              640);
    check_win((yc_tile_window[]){yc_tile_jitter(w1, 3000, 3000, 512, NAN, 0.5)}, 256, 512, 640,
              640);
    /* every window of a grid stays inside the image, keeps its size and moves <= stride / 2 */
    yc_tile_window *w = grid(2500, 1700, 640, 0.2, 5 * 4);
    for (size_t i = 0; i < 20; i++)
        for (int k = 0; k <= 100; k++) {
            double u = k / 100.0 * 0.999999, v = fmod(k * 0.37, 1.0);
            yc_tile_window j = yc_tile_jitter(w[i], 2500, 1700, 512, u, v);
            ck_assert(j.w == 640 && j.h == 640);
            ck_assert(j.x >= 0 && j.y >= 0 && j.x + j.w <= 2500 && j.y + j.h <= 1700);
            ck_assert(abs(j.x - w[i].x) <= 256 && abs(j.y - w[i].y) <= 256);
        }
    free(w);
}
END_TEST

/* ---- label clipping ---- */

START_TEST(test_clip_inside_and_crossing)
{
    /* Image 1024 x 512 (so that these labels are exact in float), window (384, 0, 640, 512),
     * min_area 0.1.
     * b0: pixels (500, 100)-(600, 200), inside: (116, 100)-(216, 200) of the window.
     * b1: (324, 100)-(424, 200) crosses the left edge at 384: 40 of 100 columns inside (0.4),
     *     kept as (384, 100)-(424, 200) = window (0, 100)-(40, 200): cx 20/640 = 0.03125,
     *     w 40/640 = 0.0625.
     * b2: (100, 100)-(300, 200) lies left of the window: dropped.
     * b3: (256, 300)-(384, 400) touches the edge (intersection 0): dropped even with min_area 0.
     * b4: width 0: dropped.
     * b5: NaN size: dropped. */
    const yc_tile_window win = {384, 0, 640, 512};
    yc_box in[6] = {px_box(3, 500, 100, 600, 200, 1024, 512),
                    px_box(1, 324, 100, 424, 200, 1024, 512),
                    px_box(2, 100, 100, 300, 200, 1024, 512),
                    px_box(4, 256, 300, 384, 400, 1024, 512),
                    px_box(5, 700, 300, 700, 400, 1024, 512),
                    {.cls = 6, .x = 0.5f, .y = 0.5f, .w = NAN, .h = NAN}};
    yc_box out[6];
    size_t n = 99;
    ck_assert_int_eq(yc_tile_clip_labels(in, 6, 1024, 512, win, 0.1, out, &n), YC_OK);
    ck_assert_uint_eq(n, 2);
    check_clip(&out[0], 3, 116, 100, 216, 200, 640, 512);
    check_clip(&out[1], 1, 0, 100, 40, 200, 640, 512);
    ck_assert_msg(fabs(out[1].x - 0.03125) < 1e-7 && fabs(out[1].w - 0.0625) < 1e-7, "%g %g",
                  (double)out[1].x, (double)out[1].w);
    ck_assert_int_eq(yc_tile_clip_labels(in, 6, 1024, 512, win, 0.0, out, &n), YC_OK);
    ck_assert_uint_eq(n, 2);
    /* min_area outside [0, 1] */
    ck_assert_int_eq(yc_tile_clip_labels(in, 6, 1024, 512, win, 1.5, out, &n), YC_EUSAGE);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "min_area 1.5"));
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_clip_threshold)
{
    /* Window (360, 0, 640, 600) of 1000 x 600, boxes 200 x 100 pixels crossing x = 360:
     * (180.2, 100)-(380.2, 200) has 20.2 of 200 columns inside, 0.101 >= 0.1: kept, clipped to
     * (360, 100)-(380.2, 200) = window (0, 100)-(20.2, 200);
     * (179.8, 100)-(379.8, 200) has 19.8 / 200 = 0.099 < 0.1: dropped. */
    const yc_tile_window win = {360, 0, 640, 600};
    yc_box in[2] = {px_box(0, 180.2, 100, 380.2, 200, 1000, 600),
                    px_box(0, 179.8, 100, 379.8, 200, 1000, 600)};
    yc_box out[2];
    size_t n = 0;
    ck_assert_int_eq(yc_tile_clip_labels(in, 2, 1000, 600, win, 0.1, out, &n), YC_OK);
    ck_assert_uint_eq(n, 1);
    /* float labels: 1e-5 pixels of slack on a 640-pixel window */
    ck_assert_msg(fabs(out[0].w * 640.0 - 20.2) < 1e-3, "width %g px", out[0].w * 640.0);
    ck_assert_msg(fabs(out[0].x * 640.0 - 10.1) < 1e-3, "centre %g px", out[0].x * 640.0);
    /* the second one alone, with the threshold just under its fraction: kept */
    ck_assert_int_eq(yc_tile_clip_labels(in + 1, 1, 1000, 600, win, 0.098, out, &n), YC_OK);
    ck_assert_uint_eq(n, 1);
}
END_TEST

START_TEST(test_clip_two_windows)
{
    /* 1000 x 600, tile 640, overlap 0.2: windows x 0..640 and 360..1000.  A box (300, 50)-(700,
     * 150) crosses both: 340 of 400 columns in each (0.85).  Window 0: (300, 50)-(640, 150),
     * cx 470/640, w 340/640.  Window 1: (360, 50)-(700, 150) = (0, 50)-(340, 150) of the window,
     * cx 170/640, w 340/640.  A box (800, 50)-(900, 150) is in window 1 only. */
    yc_tile_window *w = grid(1000, 600, 640, 0.2, 2);
    yc_box in[2] = {px_box(7, 300, 50, 700, 150, 1000, 600),
                    px_box(8, 800, 50, 900, 150, 1000, 600)};
    yc_box out[2];
    size_t n = 0;
    ck_assert_int_eq(yc_tile_clip_labels(in, 2, 1000, 600, w[0], 0.1, out, &n), YC_OK);
    ck_assert_uint_eq(n, 1);
    check_clip(&out[0], 7, 300, 50, 640, 150, 640, 600);
    ck_assert_int_eq(yc_tile_clip_labels(in, 2, 1000, 600, w[1], 0.1, out, &n), YC_OK);
    ck_assert_uint_eq(n, 2);
    check_clip(&out[0], 7, 0, 50, 340, 150, 640, 600);
    check_clip(&out[1], 8, 440, 50, 540, 150, 640, 600);
    free(w);
}
END_TEST

START_TEST(test_dets_to_image)
{
    /* rows (x1, y1, x2, y2, conf, cls) of window (360, 512): box + (360, 512, 360, 512), the
     * score and class untouched */
    float d[2 * 6] = {10, 20, 30, 40, 0.9f, 1, 0, 0, 640, 640, 0.5f, 2};
    yc_tile_dets_to_image(d, 2, 6, (yc_tile_window){360, 512, 640, 640});
    check_det(d, 370, 532, 390, 552, 0.9f, 1);
    check_det(d + 6, 360, 512, 1000, 1152, 0.5f, 2);
}
END_TEST

/* ---- merging ---- */

START_TEST(test_merge_nmm_adjacent_slices)
{
    /* An object cut by a slice border: slice 1 sees (100, 100)-(200, 200) with 0.7, slice 2
     * (120, 105)-(260, 195) with 0.9, both class 0.  Intersection 80 x 90 = 7200; areas 10000
     * and 12600: IoS = 7200 / 10000 = 0.72 > 0.5, IoU = 7200 / 15400 = 0.4675 < 0.5.
     * NMM (IoS 0.5): one box, the union (100, 100)-(260, 200), score 0.9.  NMS (IoU 0.5): both,
     * best first. */
    float d[2 * 6], out[2 * 6];
    set_det(d, 0, 100, 100, 200, 200, 0.7f, 0);
    set_det(d, 1, 120, 105, 260, 195, 0.9f, 0);
    ck_assert_uint_eq(merge(d, 2, yc_merge_params_nmm(), out), 1);
    check_det(out, 100, 100, 260, 200, 0.9f, 0);
    ck_assert_uint_eq(merge(d, 2, yc_merge_params_nms(), out), 2);
    check_det(out, 120, 105, 260, 195, 0.9f, 0);
    check_det(out + 6, 100, 100, 200, 200, 0.7f, 0);
}
END_TEST

START_TEST(test_merge_classes)
{
    /* the same two boxes with different classes: never merged nor suppressed, even with
     * threshold 0 (any overlap); the output is sorted by score */
    float d[2 * 6], out[2 * 6];
    set_det(d, 0, 100, 100, 200, 200, 0.7f, 1);
    set_det(d, 1, 120, 105, 260, 195, 0.9f, 0);
    yc_merge_params ps[2] = {yc_merge_params_nmm(), yc_merge_params_nms()};
    for (int i = 0; i < 2; i++) {
        ps[i].threshold = 0.0;
        ck_assert_uint_eq(merge(d, 2, ps[i], out), 2);
        check_det(out, 120, 105, 260, 195, 0.9f, 0);
        check_det(out + 6, 100, 100, 200, 200, 0.7f, 1);
    }
    /* class-agnostic: the 0.9 box of class 0 takes the other (IoS 80 x 90 / 10000 = 0.72 > 0.5):
     * NMM grows it to (100, 100)-(260, 200), NMS keeps it as it is */
    for (int i = 0; i < 2; i++) {
        ps[i] = i ? yc_merge_params_nms() : yc_merge_params_nmm();
        ps[i].metric = YC_MERGE_IOS;
        ps[i].agnostic = true;
        ck_assert_uint_eq(merge(d, 2, ps[i], out), 1);
        if (i)
            check_det(out, 120, 105, 260, 195, 0.9f, 0);
        else
            check_det(out, 100, 100, 260, 200, 0.9f, 0);
    }
}
END_TEST

START_TEST(test_merge_nms_keeps_best)
{
    /* (0, 0)-(100, 100) 0.6 and (10, 0)-(110, 100) 0.8, class 2: IoU = 9000 / 11000 = 0.818 >
     * 0.5, the 0.8 box is kept unchanged */
    float d[2 * 6], out[2 * 6];
    set_det(d, 0, 0, 0, 100, 100, 0.6f, 2);
    set_det(d, 1, 10, 0, 110, 100, 0.8f, 2);
    ck_assert_uint_eq(merge(d, 2, yc_merge_params_nms(), out), 1);
    check_det(out, 10, 0, 110, 100, 0.8f, 2);
}
END_TEST

START_TEST(test_merge_ios_vs_iou)
{
    /* A small box inside a large one: large (0, 0)-(100, 100) 0.9, small (40, 40)-(60, 60) 0.8.
     * IoU = 400 / 10000 = 0.04, IoS = 400 / 400 = 1. */
    float d[2 * 6], out[2 * 6];
    set_det(d, 0, 40, 40, 60, 60, 0.8f, 0);
    set_det(d, 1, 0, 0, 100, 100, 0.9f, 0);
    ck_assert_msg(fabs(yc_merge_overlap(d, d + 6, YC_MERGE_IOU) - 0.04) < 1e-12, "IoU %g",
                  yc_merge_overlap(d, d + 6, YC_MERGE_IOU));
    ck_assert_msg(yc_merge_overlap(d, d + 6, YC_MERGE_IOS) == 1.0, "IoS %g",
                  yc_merge_overlap(d, d + 6, YC_MERGE_IOS));
    /* NMS by IoU keeps both; NMM by IoS absorbs the small one (the union is the large box); NMS
     * by IoS drops it */
    ck_assert_uint_eq(merge(d, 2, yc_merge_params_nms(), out), 2);
    check_det(out, 0, 0, 100, 100, 0.9f, 0);
    check_det(out + 6, 40, 40, 60, 60, 0.8f, 0);
    ck_assert_uint_eq(merge(d, 2, yc_merge_params_nmm(), out), 1);
    check_det(out, 0, 0, 100, 100, 0.9f, 0);
    yc_merge_params p = yc_merge_params_nms();
    p.metric = YC_MERGE_IOS;
    ck_assert_uint_eq(merge(d, 2, p, out), 1);
    check_det(out, 0, 0, 100, 100, 0.9f, 0);
    /* NMM by IoU with the same threshold leaves both */
    p = yc_merge_params_nmm();
    p.metric = YC_MERGE_IOU;
    ck_assert_uint_eq(merge(d, 2, p, out), 2);
}
END_TEST

START_TEST(test_merge_threshold_and_chain)
{
    /* (0, 0)-(100, 100) 0.9 and (50, 0)-(150, 100) 0.8: IoS exactly 5000 / 10000 = 0.5.
     * Threshold 0.5: not > 0.5, both stay; 0.49: merged into (0, 0)-(150, 100). */
    float d[3 * 6], out[3 * 6];
    set_det(d, 0, 0, 0, 100, 100, 0.9f, 0);
    set_det(d, 1, 50, 0, 150, 100, 0.8f, 0);
    yc_merge_params p = yc_merge_params_nmm();
    ck_assert_uint_eq(merge(d, 2, p, out), 2);
    p.threshold = 0.49;
    ck_assert_uint_eq(merge(d, 2, p, out), 1);
    check_det(out, 0, 0, 150, 100, 0.9f, 0);
    /* Matching uses the kept box as it was: A (0, 0)-(100, 100) 0.9 absorbs B (30, 0)-(130, 100)
     * 0.8 (IoS 0.7); C (70, 0)-(170, 100) 0.7 has IoS 0.3 with A (0.6 with B, which is gone), so
     * C stays alone: [(0, 0)-(130, 100) 0.9, C]. */
    set_det(d, 0, 0, 0, 100, 100, 0.9f, 0);
    set_det(d, 1, 30, 0, 130, 100, 0.8f, 0);
    set_det(d, 2, 70, 0, 170, 100, 0.7f, 0);
    p.threshold = 0.5;
    ck_assert_uint_eq(merge(d, 3, p, out), 2);
    check_det(out, 0, 0, 130, 100, 0.9f, 0);
    check_det(out + 6, 70, 0, 170, 100, 0.7f, 0);
}
END_TEST

START_TEST(test_merge_ties_empty_errors)
{
    /* equal scores keep the input order: disjoint boxes come out as given, and of two boxes with
     * the same score overlapping with IoU 100 / 120 the first one, (0, 0)-(10, 10), is kept */
    float d[3 * 6], out[3 * 6];
    set_det(d, 0, 200, 0, 210, 10, 0.5f, 0);
    set_det(d, 1, 0, 0, 10, 10, 0.5f, 0);
    set_det(d, 2, 100, 0, 110, 10, 0.5f, 0);
    ck_assert_uint_eq(merge(d, 3, yc_merge_params_nms(), out), 3);
    check_det(out, 200, 0, 210, 10, 0.5f, 0);
    check_det(out + 6, 0, 0, 10, 10, 0.5f, 0);
    check_det(out + 12, 100, 0, 110, 10, 0.5f, 0);
    set_det(d, 0, 0, 0, 10, 10, 0.5f, 3);
    set_det(d, 1, 0, 0, 10, 12, 0.5f, 3);
    ck_assert_uint_eq(merge(d, 2, yc_merge_params_nms(), out), 1);
    check_det(out, 0, 0, 10, 10, 0.5f, 3);
    /* empty input */
    size_t n = 5;
    yc_merge_params p = yc_merge_params_nmm();
    ck_assert_int_eq(yc_slice_merge(NULL, 0, &p, NULL, &n), YC_OK);
    ck_assert_uint_eq(n, 0);
    /* a threshold outside [0, 1] */
    p.threshold = 1.5;
    ck_assert_int_eq(yc_slice_merge(d, 2, &p, out, &n), YC_EUSAGE);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "threshold 1.5"));
}
END_TEST

/* The greedy pass of slice_merge.h written out pair by pair (every kept box against every later
 * box), the reference for the grid-indexed yc_slice_merge. */
static size_t merge_brute(const float *d, size_t n, const yc_merge_params *p, float *out)
{
    size_t *order = malloc(n * sizeof *order);
    unsigned char *gone = calloc(n, 1);
    ck_assert(order && gone);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    /* insertion sort: score descending, ties in input order (NaN scores last) */
    for (size_t i = 1; i < n; i++) {
        size_t v = order[i], j = i;
        float sv = isnan(d[v * 6 + 4]) ? -INFINITY : d[v * 6 + 4];
        while (j > 0) {
            float su = isnan(d[order[j - 1] * 6 + 4]) ? -INFINITY : d[order[j - 1] * 6 + 4];
            if (!(su < sv))
                break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
    size_t k = 0;
    for (size_t a = 0; a < n; a++) {
        if (gone[a])
            continue;
        const float *da = d + order[a] * 6;
        float *o = out + k++ * 6;
        memcpy(o, da, 6 * sizeof *o);
        for (size_t b = a + 1; b < n; b++) {
            const float *db = d + order[b] * 6;
            if (gone[b] || (!p->agnostic && db[5] != da[5]) ||
                !(yc_merge_overlap(da, db, p->metric) > p->threshold))
                continue;
            gone[b] = 1;
            if (p->method == YC_MERGE_NMM) {
                o[0] = fminf(o[0], db[0]);
                o[1] = fminf(o[1], db[1]);
                o[2] = fmaxf(o[2], db[2]);
                o[3] = fmaxf(o[3], db[3]);
            }
        }
    }
    free(order);
    free(gone);
    return k;
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

START_TEST(test_merge_grid_equals_pairwise)
{
    /* Random detections as sliced detection makes them (clusters of overlapping boxes where
     * windows overlap, a few boxes spanning much of the image, boxes of zero area, repeated
     * scores, a NaN score and a box with an infinite corner) merged by yc_slice_merge, whose
     * grid only compares boxes sharing a cell, and by the pairwise pass: identical rows. */
    const size_t n = 3000;
    float *d = malloc(n * 6 * sizeof *d), *o1 = malloc(n * 6 * sizeof *o1),
          *o2 = malloc(n * 6 * sizeof *o2);
    ck_assert(d && o1 && o2);
    const yc_merge_params params[5] = {
        yc_merge_params_nmm(), yc_merge_params_nms(),
        {.method = YC_MERGE_NMM, .metric = YC_MERGE_IOU, .threshold = 0.0},
        {.method = YC_MERGE_NMS, .metric = YC_MERGE_IOS, .threshold = 0.3},
        {.method = YC_MERGE_NMM, .metric = YC_MERGE_IOS, .threshold = 0.5, .agnostic = true}};
    for (uint64_t seed = 1; seed <= 6; seed++) {
        uint64_t s = seed;
        /* seed 6: every box in a 200 x 200 corner (a dense image: most boxes share cells) */
        double extent = seed == 6 ? 200 : seed == 5 ? 1e5 : 4000;
        for (size_t i = 0; i < n; i++) {
            float *r = d + i * 6;
            double x = (double)(lcg(&s) % 100000) / 1e5 * extent;
            double y = (double)(lcg(&s) % 100000) / 1e5 * extent;
            double w = 4 + (double)(lcg(&s) % 60), h = 4 + (double)(lcg(&s) % 60);
            if (lcg(&s) % 100 == 0) { /* wide: up to the image */
                w = (double)(lcg(&s) % 100000) / 1e5 * extent;
                h = (double)(lcg(&s) % 100000) / 1e5 * extent;
            }
            if (lcg(&s) % 200 == 0)
                w = 0;
            r[0] = (float)x;
            r[1] = (float)y;
            r[2] = (float)(x + w);
            r[3] = (float)(y + h);
            r[4] = (float)(lcg(&s) % 50) / 50.0f; /* many equal scores */
            r[5] = (float)(lcg(&s) % 3);
            if (i > 0 && lcg(&s) % 3 == 0) { /* a neighbour window's copy, shifted a little */
                const float *q = d + (i - 1) * 6;
                float dx = (float)(lcg(&s) % 9) - 4.0f, dy = (float)(lcg(&s) % 9) - 4.0f;
                r[0] = q[0] + dx;
                r[1] = q[1] + dy;
                r[2] = q[2] + dx;
                r[3] = q[3] + dy;
                r[5] = q[5];
            }
        }
        d[7 * 6 + 4] = NAN;
        d[11 * 6 + 2] = INFINITY;
        for (int k = 0; k < 5; k++) {
            size_t n1 = 0, n2 = merge_brute(d, n, &params[k], o2);
            ck_assert_int_eq(yc_slice_merge(d, n, &params[k], o1, &n1), YC_OK);
            ck_assert_msg(n1 == n2, "seed %d params %d: %zu rows, pairwise %zu", (int)seed, k,
                          n1, n2);
            ck_assert_msg(memcmp(o1, o2, n1 * 6 * sizeof *o1) == 0,
                          "seed %d params %d: rows differ", (int)seed, k);
        }
    }
    ck_assert_uint_ge(yc_slice_merge_scratch_bytes(n), n * 16);
    free(d);
    free(o1);
    free(o2);
}
END_TEST

static Suite *tile_suite(void)
{
    Suite *s = suite_create("tile");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_grid_1000x600);
    tcase_add_test(tc, test_grid_exact_multiple);
    tcase_add_test(tc, test_grid_small_and_one_pixel);
    tcase_add_test(tc, test_grid_overlap_zero);
    tcase_add_test(tc, test_grid_rounding_and_errors);
    tcase_add_test(tc, test_grid_properties);
    tcase_add_test(tc, test_jitter);
    suite_add_tcase(s, tc);
    tc = tcase_create("labels");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_clip_inside_and_crossing);
    tcase_add_test(tc, test_clip_threshold);
    tcase_add_test(tc, test_clip_two_windows);
    tcase_add_test(tc, test_dets_to_image);
    suite_add_tcase(s, tc);
    tc = tcase_create("merge");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_merge_nmm_adjacent_slices);
    tcase_add_test(tc, test_merge_classes);
    tcase_add_test(tc, test_merge_nms_keeps_best);
    tcase_add_test(tc, test_merge_ios_vs_iou);
    tcase_add_test(tc, test_merge_threshold_and_chain);
    tcase_add_test(tc, test_merge_ties_empty_errors);
    tcase_add_test(tc, test_merge_grid_equals_pairwise);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tile_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
