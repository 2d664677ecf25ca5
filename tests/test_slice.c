/* Tests of sliced detection (issue 7): src/data/slice_image.c (windows read through libvips in the
 * three access modes, the thumbnail of the full pass, annotated images drawn strip by strip) and
 * src/eval/slice.c (window detections mapped and merged, one image sliced through a model).
 *
 * The fixtures are synthetic 1500 x 1100 images (a pixel pattern with a few solid rectangles)
 * written by libvips in PNG, JPEG, tiled TIFF and striped TIFF; every expected window is the
 * libvips crop (vips_crop) of the whole image loaded the ordinary way.  No real model is needed:
 * the model test runs the tiny YOLOv5 of tests/data (YOLOCL_TEST_DATA) and checks that the three
 * ways of reading give the same detections. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vips/vips.h>

#include "detect.h"
#include "device.h"
#include "image.h"
#include "log.h"
#include "slice.h"
#include "slice_image.h"
#include "tile.h"
#include "util.h"
#include "harness.h"

enum { IMG_W = 1500, IMG_H = 1100 };

/* The synthetic image: a pattern that differs at every pixel and a few solid rectangles. */
static void make_pixels(yc_image *im)
{
    static const yc_harness_rect rects[] = {
        {100, 80, 300, 260, 230, 40, 40},
        {600, 500, 760, 700, 30, 200, 60},
        {1200, 900, 1499, 1099, 20, 40, 220},
        {0, 1000, 90, 1099, 250, 250, 250},
    };
    yc_harness_pattern(im, IMG_H, IMG_W, 0);
    yc_harness_paint(im, rects, sizeof rects / sizeof rects[0]);
}

/* <scratch directory>/name, written from the synthetic pixels when it does not exist yet (tests run
 * in forked processes: each writes what it needs).  Suffixes: .png, .jpg, .tif (tiled, 128 x 128
 * tiles, uncompressed), _strip.tif (striped, deflate). */
static const char *fixture(const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", yc_harness_tmpdir(), name);
    if (yc_file_exists(path))
        return path;
    yc_image im = YC_IMAGE_INIT;
    make_pixels(&im);
    yc_harness_write_image(path, &im);
    yc_image_free(&im);
    return path;
}

/* The window of the file loaded whole by libvips (random access), cropped by vips_crop, after
 * the EXIF rotation when `autorot`. */
static void vips_window(const char *path, yc_tile_window w, bool autorot, yc_image *out)
{
    VipsImage *full = vips_image_new_from_file(path, NULL), *up = NULL, *crop = NULL;
    ck_assert_msg(full != NULL, "%s: %s", path, vips_error_buffer());
    if (autorot)
        ck_assert_int_eq(vips_autorot(full, &up, NULL), 0);
    ck_assert_int_eq(vips_crop(up ? up : full, &crop, w.x, w.y, w.w, w.h, NULL), 0);
    ck_assert_int_eq(crop->Bands, 3);
    ck_assert_int_eq(crop->BandFmt, VIPS_FORMAT_UCHAR);
    size_t len = 0;
    void *mem = vips_image_write_to_memory(crop, &len);
    ck_assert_ptr_nonnull(mem);
    ck_assert_uint_eq(len, (size_t)w.w * w.h * 3);
    ck_assert_int_eq(yc_image_reserve(out, w.h, w.w), YC_OK);
    memcpy(out->data, mem, len);
    g_free(mem);
    g_object_unref(crop);
    if (up)
        g_object_unref(up);
    g_object_unref(full);
}

/* Reads every window of the 320-pixel grid (overlap 0.2) of `path` opened with decode_max and
 * compares each with vips_crop of the whole image. */
static void check_windows(const char *path, int decode_max, yc_slice_access want)
{
    yc_slice_source *s = NULL;
    ck_assert_msg(yc_slice_source_open(&s, path, decode_max, 320) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_int_eq(yc_slice_source_access(s), want);
    ck_assert_int_eq(yc_slice_source_width(s), IMG_W);
    ck_assert_int_eq(yc_slice_source_height(s), IMG_H);
    ck_assert(want == YC_SLICE_DECODED ? yc_slice_source_image(s) != NULL
                                       : yc_slice_source_image(s) == NULL);
    yc_tile_window *win = NULL;
    size_t n = 0;
    ck_assert_int_eq(yc_tile_grid(IMG_W, IMG_H, 320, 0.2, &win, &n), YC_OK);
    /* x starts 0, 256, ..., 1024, 1180; y starts 0, 256, 512, 768, 780: 6 x 5 windows, the last
     * column and row moved back to end at the border */
    ck_assert_uint_eq(n, 30);
    ck_assert_int_eq(win[n - 1].x, IMG_W - 320);
    ck_assert_int_eq(win[n - 1].y, IMG_H - 320);
    yc_image got = YC_IMAGE_INIT, want_px = YC_IMAGE_INIT;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(yc_slice_source_read(s, win[i], &got) == YC_OK, "%s", yc_last_error());
        vips_window(path, win[i], false, &want_px);
        ck_assert_int_eq(got.w, win[i].w);
        ck_assert_int_eq(got.h, win[i].h);
        ck_assert_msg(!memcmp(got.data, want_px.data, (size_t)got.w * got.h * 3),
                      "%s: window %zu (%d, %d) differs from vips_crop", path, i, win[i].x,
                      win[i].y);
    }
    free(win);
    yc_image_free(&got);
    yc_image_free(&want_px);
    yc_slice_source_free(s);
}

/* ------------------------------------------------------------------------------------------------
 * Reading windows
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_windows_png)
{
    char p[700];
    fixture("pattern.png", p, sizeof p);
    check_windows(p, 0, YC_SLICE_SEQUENTIAL);
    check_windows(p, YC_SLICE_DECODE_MAX, YC_SLICE_DECODED);
}
END_TEST

START_TEST(test_windows_jpeg)
{
    char p[700];
    fixture("pattern.jpg", p, sizeof p);
    check_windows(p, 0, YC_SLICE_SEQUENTIAL);
    check_windows(p, YC_SLICE_DECODE_MAX, YC_SLICE_DECODED);
}
END_TEST

START_TEST(test_windows_tiff)
{
    char p[700];
    /* tiled: random regions (only the tiles under a window are read) */
    fixture("pattern.tif", p, sizeof p);
    check_windows(p, 0, YC_SLICE_RANDOM);
    /* striped: the top-to-bottom band */
    fixture("pattern_strip.tif", p, sizeof p);
    check_windows(p, 0, YC_SLICE_SEQUENTIAL);
}
END_TEST

/* Windows outside the image, taller than the band, or above the band of a sequential source. */
START_TEST(test_window_errors)
{
    char p[700];
    fixture("pattern.png", p, sizeof p);
    yc_slice_source *s = NULL;
    yc_image im = YC_IMAGE_INIT;
    ck_assert_int_eq(yc_slice_source_open(&s, p, 0, 320), YC_OK);
    ck_assert_int_eq(yc_slice_source_read(s, (yc_tile_window){1300, 0, 320, 320}, &im),
                     YC_EUSAGE);
    ck_assert_int_eq(yc_slice_source_read(s, (yc_tile_window){0, 0, 320, 400}, &im), YC_EUSAGE);
    ck_assert_int_eq(yc_slice_source_read(s, (yc_tile_window){0, 500, 320, 320}, &im), YC_OK);
    ck_assert_int_eq(yc_slice_source_read(s, (yc_tile_window){0, 499, 320, 320}, &im), YC_EUSAGE);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "top to bottom"));
    /* a window further down, skipping rows, is fine */
    ck_assert_int_eq(yc_slice_source_read(s, (yc_tile_window){1180, 780, 320, 320}, &im), YC_OK);
    yc_slice_source_free(s);
    ck_assert_int_eq(yc_slice_source_open(&s, p, 0, 0), YC_EUSAGE);
    snprintf(p, sizeof p, "%s/missing.png", yc_harness_tmpdir());
    ck_assert_int_eq(yc_slice_source_open(&s, p, 0, 320), YC_EIO);
    snprintf(p, sizeof p, "%s/junk.jpg", yc_harness_tmpdir());
    ck_assert_int_eq(yc_write_file_atomic(p, "not an image", 12), YC_OK);
    ck_assert_int_eq(yc_slice_source_open(&s, p, 0, 320), YC_EFORMAT);
    ck_assert_ptr_null(s);
    yc_image_free(&im);
}
END_TEST

/* A JPEG stored on its side (EXIF orientation 6): windows are of the upright image, whichever way
 * it is read, and equal the decoder's pixels. */
START_TEST(test_windows_exif)
{
    yc_image im = YC_IMAGE_INIT, dec = YC_IMAGE_INIT, got = YC_IMAGE_INIT, want = YC_IMAGE_INIT;
    make_pixels(&im);
    char p[700];
    snprintf(p, sizeof p, "%s/rotated.jpg", yc_harness_tmpdir());
    ck_assert_int_eq(yc_image_save(&im, p, 6), YC_OK);
    ck_assert_int_eq(yc_image_decode(p, &dec, NULL, NULL), YC_OK);
    ck_assert_int_eq(dec.w, IMG_H);
    ck_assert_int_eq(dec.h, IMG_W);
    yc_slice_source *s = NULL;
    ck_assert_int_eq(yc_slice_source_open(&s, p, 0, 320), YC_OK);
    ck_assert_int_eq(yc_slice_source_access(s), YC_SLICE_RANDOM);
    ck_assert_int_eq(yc_slice_source_width(s), IMG_H);
    ck_assert_int_eq(yc_slice_source_height(s), IMG_W);
    const yc_tile_window wins[] = {{0, 0, 320, 320}, {780, 1180, 320, 320}, {500, 700, 320, 320}};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(yc_slice_source_read(s, wins[i], &got), YC_OK);
        vips_window(p, wins[i], true, &want);
        ck_assert(!memcmp(got.data, want.data, (size_t)320 * 320 * 3));
        for (int y = 0; y < 320; y++)
            ck_assert(!memcmp(got.data + (size_t)y * 320 * 3,
                              dec.data + ((size_t)(wins[i].y + y) * dec.w + wins[i].x) * 3,
                              320 * 3));
    }
    yc_slice_source_free(s);
    yc_image_free(&im);
    yc_image_free(&dec);
    yc_image_free(&got);
    yc_image_free(&want);
}
END_TEST

/* The full pass's thumbnail fits the input size, keeps the aspect ratio, never enlarges. */
START_TEST(test_thumbnail)
{
    char p[700];
    fixture("pattern.jpg", p, sizeof p);
    yc_image t = YC_IMAGE_INIT;
    ck_assert_msg(yc_slice_read_thumbnail(p, 320, 320, &t) == YC_OK, "%s", yc_last_error());
    /* 1500 x 1100 into 320 x 320: 320 x round(1100 * 320 / 1500) = 320 x 235 (+-1) */
    ck_assert_int_eq(t.w, 320);
    ck_assert_msg(abs(t.h - 235) <= 1, "height %d", t.h);
    /* the red rectangle (100..300, 80..260) at the same place, scaled */
    const uint8_t *px = t.data + ((size_t)(170 * t.h / IMG_H) * t.w + 200 * t.w / IMG_W) * 3;
    ck_assert_msg(abs(px[0] - 230) < 12 && abs(px[1] - 40) < 12 && abs(px[2] - 40) < 12,
                  "%d %d %d", px[0], px[1], px[2]);
    ck_assert_int_eq(yc_slice_read_thumbnail(p, 4000, 4000, &t), YC_OK);
    ck_assert_int_eq(t.w, IMG_W);
    ck_assert_int_eq(t.h, IMG_H);
    ck_assert_int_eq(yc_slice_read_thumbnail(p, 0, 320, &t), YC_EUSAGE);
    yc_image_free(&t);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Mapping and merging hand-made window detections
 * ---------------------------------------------------------------------------------------------- */

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

static void check_det(const float *d, size_t r, float x1, float y1, float x2, float y2,
                      float conf, int cls)
{
    const float *p = d + r * YC_MERGE_DET_STRIDE;
    ck_assert_msg(p[0] == x1 && p[1] == y1 && p[2] == x2 && p[3] == y2 && p[4] == conf &&
                      p[5] == (float)cls,
                  "row %zu: (%g %g %g %g %g %g), expected (%g %g %g %g %g %d)", r, p[0], p[1],
                  p[2], p[3], p[4], p[5], x1, y1, x2, y2, conf, cls);
}

/* A 1000 x 600 image in 640-pixel windows with overlap 0.2: windows (0, 0) and (360, 0), both
 * 640 x 600.  A car (class 2) at x 500..700, y 100..200 is cut by the first window's right edge:
 * window 0 sees 500..640, window 1 sees 140..340 of its own pixels (500..700 of the image).  A
 * person (class 0) at 380..420 lies in both windows whole; a dog (class 16) only in window 1. */
static void sliced_input(yc_slice_dets *a)
{
    yc_tile_window *win = NULL;
    size_t n = 0;
    ck_assert_int_eq(yc_tile_grid(1000, 600, 640, 0.2, &win, &n), YC_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert(win[1].x == 360 && win[1].y == 0 && win[1].w == 640 && win[1].h == 600);
    float w0[2 * YC_MERGE_DET_STRIDE], w1[3 * YC_MERGE_DET_STRIDE];
    set_det(w0, 0, 500, 100, 640, 200, 0.6f, 2);
    set_det(w0, 1, 380, 300, 420, 400, 0.8f, 0);
    set_det(w1, 0, 140, 100, 340, 200, 0.9f, 2);
    set_det(w1, 1, 21, 302, 61, 398, 0.7f, 0);
    set_det(w1, 2, 540, 10, 600, 50, 0.3f, 16);
    yc_slice_dets_clear(a);
    ck_assert_int_eq(yc_slice_dets_add_window(a, w0, 2, win[0]), YC_OK);
    ck_assert_int_eq(yc_slice_dets_add_window(a, w1, 3, win[1]), YC_OK);
    ck_assert_uint_eq(a->n, 5);
    /* moved by the window origin */
    check_det(a->rows, 2, 500, 100, 700, 200, 0.9f, 2);
    check_det(a->rows, 3, 381, 302, 421, 398, 0.7f, 0);
    check_det(a->rows, 4, 900, 10, 960, 50, 0.3f, 16);
    free(win);
}

START_TEST(test_merge_nmm)
{
    yc_slice_dets a = YC_SLICE_DETS_INIT, out = YC_SLICE_DETS_INIT;
    sliced_input(&a);
    yc_merge_params p = yc_merge_params_nmm();
    ck_assert_int_eq(yc_slice_dets_merge(&a, &p, 1000, &out), YC_OK);
    /* the car's halves: intersection 140 x 100 = the smaller box, IoS 1 > 0.5: one box, the
     * enclosing 500..700, score 0.9; the persons (40 x 100 and 40 x 96): intersection 39 x 96 =
     * 3744 over the smaller 3840, 0.975: merged to 380..421 x 300..400, 0.8; the dog alone */
    ck_assert_uint_eq(out.n, 3);
    check_det(out.rows, 0, 500, 100, 700, 200, 0.9f, 2);
    check_det(out.rows, 1, 380, 300, 421, 400, 0.8f, 0);
    check_det(out.rows, 2, 900, 10, 960, 50, 0.3f, 16);
    /* max_det keeps the best */
    ck_assert_int_eq(yc_slice_dets_merge(&a, &p, 2, &out), YC_OK);
    ck_assert_uint_eq(out.n, 2);
    check_det(out.rows, 1, 380, 300, 421, 400, 0.8f, 0);
    ck_assert_int_eq(yc_slice_dets_merge(&a, &p, 0, &out), YC_EUSAGE);
    yc_slice_dets_free(&a);
    yc_slice_dets_free(&out);
}
END_TEST

START_TEST(test_merge_nms)
{
    yc_slice_dets a = YC_SLICE_DETS_INIT, out = YC_SLICE_DETS_INIT;
    sliced_input(&a);
    yc_merge_params p = yc_merge_params_nms();
    ck_assert_int_eq(yc_slice_dets_merge(&a, &p, 1000, &out), YC_OK);
    /* car: IoU 14000 / 20000 = 0.7 > 0.5, the better half (window 1's) stays as it is; persons:
     * IoU 3744 / (4000 + 3840 - 3744) = 0.914: the 0.8 one stays as it is */
    ck_assert_uint_eq(out.n, 3);
    check_det(out.rows, 0, 500, 100, 700, 200, 0.9f, 2);
    check_det(out.rows, 1, 380, 300, 420, 400, 0.8f, 0);
    check_det(out.rows, 2, 900, 10, 960, 50, 0.3f, 16);
    /* a threshold of 0.8 keeps the car's two halves apart (IoU 0.7) but not the persons */
    p.threshold = 0.8;
    ck_assert_int_eq(yc_slice_dets_merge(&a, &p, 1000, &out), YC_OK);
    ck_assert_uint_eq(out.n, 4);
    check_det(out.rows, 2, 500, 100, 640, 200, 0.6f, 2);
    yc_slice_dets_free(&a);
    yc_slice_dets_free(&out);
}
END_TEST

/* The full pass: boxes of a 320 x 200 copy of a 1000 x 625 image scaled by 3.125, rounded and
 * clipped. */
START_TEST(test_add_scaled)
{
    yc_slice_dets a = YC_SLICE_DETS_INIT;
    float d[2 * YC_MERGE_DET_STRIDE];
    set_det(d, 0, 10, 20.5f, 100.2f, 199, 0.5f, 3);
    set_det(d, 1, 300, 150, 320, 200, 0.4f, 1);
    ck_assert_int_eq(yc_slice_dets_add_scaled(&a, d, 2, 3.125, 3.125, 1000, 625), YC_OK);
    ck_assert_uint_eq(a.n, 2);
    /* 20.5 * 3.125 = 64.0625 -> 64; 100.2 * 3.125 = 313.125 -> 313; 199 * 3.125 = 621.875 ->
     * 622 */
    check_det(a.rows, 0, 31, 64, 313, 622, 0.5f, 3);
    /* 320 * 3.125 = 1000, 200 * 3.125 = 625: at the border */
    check_det(a.rows, 1, 938, 469, 1000, 625, 0.4f, 1);
    yc_slice_dets_free(&a);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Annotated output drawn strip by strip
 * ---------------------------------------------------------------------------------------------- */

/* Detections of the synthetic image: one at the top edge (its label goes inside the box), two
 * overlapping, one tall box crossing many strips, one at the bottom-right corner. */
static int test_dets(float *d)
{
    set_det(d, 0, 0, 0, 400, 300, 0.91f, 0);
    set_det(d, 1, 100, 80, 300, 260, 0.85f, 2);
    set_det(d, 2, 600, 5, 640, 1095, 0.6f, 5);
    set_det(d, 3, 200, 200, 500, 520, 0.42f, 17);
    set_det(d, 4, 1200, 900, 1500, 1100, 0.3f, 1);
    return 5;
}

typedef struct draw_state {
    const float *dets;
    int n;
    const yc_detect_style *style;
} draw_state;

static void draw_cb(yc_canvas *c, int ox, int oy, void *user)
{
    const draw_state *s = user;
    yc_detect_draw(c, ox, oy, s->dets, s->n, s->style);
}

START_TEST(test_annotate_strips)
{
    char p[700], out[800];
    fixture("pattern.png", p, sizeof p);
    float d[5 * YC_MERGE_DET_STRIDE];
    int n = test_dets(d);
    static const char *const names[] = {"person", "bicycle", "car"};
    yc_detect_style style = {.names = names, .nc = 3, .line_thickness = 3};
    draw_state ds = {d, n, &style};

    /* the reference: drawn on the whole decoded image */
    yc_image whole = YC_IMAGE_INIT, got = YC_IMAGE_INIT;
    ck_assert_int_eq(yc_image_decode(p, &whole, NULL, NULL), YC_OK);
    yc_canvas cv = yc_canvas_wrap(whole.data, whole.w, whole.h);
    yc_detect_draw(&cv, 0, 0, d, n, &style);

    /* lossless PNG through the strip-by-strip writer: the same pixels */
    snprintf(out, sizeof out, "%s/annotated.png", yc_harness_tmpdir());
    ck_assert_msg(yc_slice_write_annotated(p, draw_cb, &ds, out, YC_ANNOTATED_SUFFIX) == YC_OK,
                  "%s", yc_last_error());
    ck_assert_int_eq(yc_image_decode(out, &got, NULL, NULL), YC_OK);
    ck_assert_int_eq(got.w, IMG_W);
    ck_assert_int_eq(got.h, IMG_H);
    ck_assert(!memcmp(got.data, whole.data, (size_t)IMG_W * IMG_H * 3));

    /* the pyramidal TIFF: tiled, several levels, the full level close to the reference (JPEG) */
    snprintf(out, sizeof out, "%s/annotated.tif", yc_harness_tmpdir());
    ck_assert_msg(yc_slice_write_annotated(p, draw_cb, &ds, out, YC_ANNOTATED_PYRAMID) == YC_OK,
                  "%s", yc_last_error());
    VipsImage *t = vips_image_new_from_file(out, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->Xsize, IMG_W);
    ck_assert_int_eq(t->Ysize, IMG_H);
    /* 1500 x 1100 halved to one 256 x 256 tile: 1500, 750, 375, 187 wide: 4 levels */
    ck_assert_int_eq(vips_image_get_n_pages(t), 4);
    g_object_unref(t);
    ck_assert_int_eq(yc_image_decode(out, &got, NULL, NULL), YC_OK);
    ck_assert_int_eq(got.w, IMG_W);
    /* the same bytes as libvips writes from the reference drawn whole with the same settings:
     * the strips computed lazily hold exactly the reference pixels */
    char ref[800];
    snprintf(ref, sizeof ref, "%s/reference.tif", yc_harness_tmpdir());
    VipsImage *v = vips_image_new_from_memory(whole.data, (size_t)IMG_W * IMG_H * 3, IMG_W, IMG_H,
                                              3, VIPS_FORMAT_UCHAR);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(vips_tiffsave(v, ref, "tile", TRUE, "tile_width", 256, "tile_height", 256,
                                   "pyramid", TRUE, "compression",
                                   VIPS_FOREIGN_TIFF_COMPRESSION_JPEG, "Q", 85, "strip", TRUE,
                                   NULL),
                     0);
    g_object_unref(v);
    yc_image refpx = YC_IMAGE_INIT;
    ck_assert_int_eq(yc_image_decode(ref, &refpx, NULL, NULL), YC_OK);
    ck_assert(!memcmp(got.data, refpx.data, (size_t)IMG_W * IMG_H * 3));
    yc_image_free(&refpx);
    /* the top-left box's outline is there: its top row is class 0's colour */
    yc_rgb c0 = yc_color_class(0);
    const uint8_t *px = got.data + ((size_t)1 * IMG_W + 200) * 3;
    ck_assert_msg(abs(px[0] - c0.r) < 40 && abs(px[1] - c0.g) < 40 && abs(px[2] - c0.b) < 40,
                  "%d %d %d", px[0], px[1], px[2]);

    /* errors name the file */
    snprintf(out, sizeof out, "%s/no-such-dir/annotated.png", yc_harness_tmpdir());
    ck_assert_int_eq(yc_slice_write_annotated(p, draw_cb, &ds, out, YC_ANNOTATED_SUFFIX),
                     YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "annotated.png"));
    yc_image_free(&whole);
    yc_image_free(&got);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * One image through a model
 * ---------------------------------------------------------------------------------------------- */

/* The same image read whole, through the band (PNG) and through random regions (uncompressed
 * tiled TIFF) gives the same pixels, hence the same detections; the full pass adds one pass. */
START_TEST(test_detect_image_modes)
{
    yc_backend *be = NULL;
    yc_infer_model im;
    memset(&im, 0, sizeof im);
    yc_harness_tiny_infer(&be, &im);
    yc_detect_options o;
    yc_detect_options_default(&o);
    o.img_h = o.img_w = 320;
    o.conf_thres = 0.001f;
    o.fixed_shape = true;
    yc_detector *det = NULL;
    ck_assert_int_eq(yc_detector_new(&det, &im, &o), YC_OK);
    yc_slice_options so;
    yc_slice_options_default(&so);
    so.tile = 320;
    char png[700], tif[700];
    fixture("pattern.png", png, sizeof png);
    fixture("pattern.tif", tif, sizeof tif);
    const struct {
        const char *path;
        int decode_max;
    } cases[] = {{png, YC_SLICE_DECODE_MAX}, {png, 0}, {tif, 0}};
    yc_slice_dets raw = YC_SLICE_DETS_INIT, res[3] = {YC_SLICE_DETS_INIT, YC_SLICE_DETS_INIT,
                                                       YC_SLICE_DETS_INIT};
    for (int c = 0; c < 3; c++) {
        yc_slice_source *s = NULL;
        yc_slice_info info;
        ck_assert_int_eq(yc_slice_source_open(&s, cases[c].path, cases[c].decode_max, so.tile),
                         YC_OK);
        ck_assert_msg(yc_slice_detect_image(det, s, cases[c].path, &so, &raw, &res[c], &info) ==
                          YC_OK,
                      "%s", yc_last_error());
        ck_assert_int_eq(info.windows, 30);
        ck_assert(!info.full);
        ck_assert_int_eq(info.in_h, 320);
        ck_assert_int_eq(info.in_w, 320);
        ck_assert(info.raw >= res[c].n);
        ck_assert(res[c].n > 0);
        for (size_t i = 0; i < res[c].n; i++) {
            const float *r = res[c].rows + i * YC_MERGE_DET_STRIDE;
            ck_assert(r[0] >= 0 && r[2] <= IMG_W && r[1] >= 0 && r[3] <= IMG_H);
            ck_assert(r[0] <= r[2] && r[1] <= r[3]);
            ck_assert(i == 0 || r[4] <= r[4 - YC_MERGE_DET_STRIDE]);
        }
        yc_slice_source_free(s);
    }
    for (int c = 1; c < 3; c++) {
        ck_assert_uint_eq(res[c].n, res[0].n);
        ck_assert(!memcmp(res[c].rows, res[0].rows,
                          res[0].n * YC_MERGE_DET_STRIDE * sizeof(float)));
    }
    /* the full pass: one more pass, from the thumbnail for a source not held whole */
    so.full = true;
    for (int c = 0; c < 3; c += 2) {
        yc_slice_source *s = NULL;
        yc_slice_info info;
        ck_assert_int_eq(yc_slice_source_open(&s, cases[c].path, cases[c].decode_max, so.tile),
                         YC_OK);
        ck_assert_msg(yc_slice_detect_image(det, s, cases[c].path, &so, &raw, &res[1], &info) ==
                          YC_OK,
                      "%s", yc_last_error());
        ck_assert_int_eq(info.windows, 30);
        ck_assert(info.full);
        ck_assert_int_eq(info.in_h, 320);
        ck_assert_int_eq(info.in_w, 320);
        yc_slice_source_free(s);
    }
    for (int c = 0; c < 3; c++)
        yc_slice_dets_free(&res[c]);
    yc_slice_dets_free(&raw);
    yc_detector_free(det);
    yc_infer_model_free(&im);
    yc_backend_free(be);
}
END_TEST

static Suite *slice_suite(void)
{
    Suite *s = suite_create("slice");
    TCase *tc = tcase_create("read");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_windows_png);
    tcase_add_test(tc, test_windows_jpeg);
    tcase_add_test(tc, test_windows_tiff);
    tcase_add_test(tc, test_window_errors);
    tcase_add_test(tc, test_windows_exif);
    tcase_add_test(tc, test_thumbnail);
    suite_add_tcase(s, tc);
    tc = tcase_create("merge");
    tcase_add_test(tc, test_merge_nmm);
    tcase_add_test(tc, test_merge_nms);
    tcase_add_test(tc, test_add_scaled);
    suite_add_tcase(s, tc);
    tc = tcase_create("output");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_annotate_strips);
    suite_add_tcase(s, tc);
    tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_detect_image_modes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_main(slice_suite(), "slice");
}
