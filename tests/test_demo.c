/* Tests of the built-in demo dataset (layout, labels, boxes against the drawn pixels, determinism,
 * detection of a half-written directory; the segmentation task's outlines against the drawn pixels
 * and the classification task's crops) and of the drawing and plotting code (boxes, text,
 * labels, encoding, results.csv parsing and the plots). */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vips/vips.h>

#include "demo.h"
#include "draw.h"
#include "image.h"
#include "imagefolder.h"
#include "log.h"
#include "util.h"
#include "yamltree.h"
#include "harness.h"

/* Small options for the tests that write several datasets. */
static yc_demo_options small_options(uint64_t seed)
{
    yc_demo_options o;
    yc_demo_options_default(&o);
    o.seed = seed;
    o.n_train = 12;
    o.n_val = 4;
    return o;
}

/* Decodes an image with libvips into RGB bytes. */
static uint8_t *decode(const char *path, int *w, int *h)
{
    ck_assert_int_eq(yc_vips_init(), YC_OK);
    VipsImage *im = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    ck_assert_msg(im != NULL, "libvips cannot open %s: %s", path, vips_error_buffer());
    ck_assert_int_eq(vips_image_get_bands(im), 3);
    ck_assert_int_eq(vips_image_get_format(im), VIPS_FORMAT_UCHAR);
    size_t n = 0;
    uint8_t *px = vips_image_write_to_memory(im, &n);
    ck_assert_msg(px != NULL, "libvips cannot decode %s", path);
    *w = vips_image_get_width(im);
    *h = vips_image_get_height(im);
    ck_assert_uint_eq(n, (size_t)*w * *h * 3);
    g_object_unref(im);
    uint8_t *copy = malloc(n);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, px, n);
    g_free(px);
    return copy;
}

/* max - min over the channels of a pixel: high for the saturated shapes, low for the background. */
static int chroma(const uint8_t *rgb, int w, int x, int y)
{
    const uint8_t *p = rgb + 3 * ((size_t)y * w + x);
    int mx = p[0], mn = p[0];
    for (int c = 1; c < 3; c++) {
        mx = p[c] > mx ? p[c] : mx;
        mn = p[c] < mn ? p[c] : mn;
    }
    return mx - mn;
}

/* ------------------------------------------------------------------------------------------------
 * Demo dataset
 * ---------------------------------------------------------------------------------------------- */

START_TEST(demo_layout)
{
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/demo_default", yc_harness_tmpdir());
    double t0 = yc_now();
    ck_assert_msg(yc_demo_write(dir, NULL) == YC_OK, "%s", yc_last_error());
    double secs = yc_now() - t0;
    ck_assert_msg(secs < 15, "generation took %.1f s", secs);
    ck_assert(yc_demo_is_complete(dir, NULL));

    const char *sub[4] = {"images/train", "images/val", "labels/train", "labels/val"};
    const char *ext[4] = {".jpg", ".jpg", ".txt", ".txt"};
    const int want[4] = {320, 80, 320, 80};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sub[i]);
        ck_assert_int_eq(yc_harness_count_files(path, ext[i]), want[i]);
        ck_assert_int_eq(yc_harness_count_files(path, ".tmp"), 0);
    }

    yc_yaml_node *root = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, YC_DEMO_YAML);
    ck_assert_msg(yc_yaml_load_file(path, &root) == YC_OK, "%s", yc_last_error());
    ck_assert_str_eq(yc_yaml_get(root, "path")->value, ".");
    ck_assert_str_eq(yc_yaml_get(root, "train")->value, "images/train");
    ck_assert_str_eq(yc_yaml_get(root, "val")->value, "images/val");
    const yc_yaml_node *names = yc_yaml_get(root, "names");
    ck_assert_ptr_nonnull(names);
    ck_assert_int_eq(names->kind, YC_YAML_SEQ);
    ck_assert_int_eq(names->n, YC_DEMO_NC);
    for (int k = 0; k < YC_DEMO_NC; k++)
        ck_assert_str_eq(names->items[k]->value, yc_demo_names[k]);
    yc_yaml_free(root);

    /* every label file: 1-6 rows of "class cx cy w h" with 6 decimals, boxes inside the image;
     * every 8th image decoded: size a multiple of 32 in [256, 480] */
    int per_class[YC_DEMO_NC] = {0};
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < want[s]; i++) {
            snprintf(path, sizeof path, "%s/labels/%s/shapes_%05d.txt", dir, s ? "val" : "train",
                     i);
            char *text = yc_harness_read(path, NULL);
            int rows = 0;
            for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                int cls, used = 0;
                double v[4];
                char dec[4][16];
                ck_assert_int_eq(sscanf(line, "%d %lf %lf %lf %lf%n", &cls, &v[0], &v[1], &v[2],
                                        &v[3], &used),
                                 5);
                ck_assert_int_eq(line[used], '\0');
                ck_assert_int_eq(sscanf(line, "%*d %*[0-9].%15[0-9] %*[0-9].%15[0-9] %*[0-9].%15[0-9]"
                                              " %*[0-9].%15[0-9]",
                                        dec[0], dec[1], dec[2], dec[3]),
                                 4);
                for (int k = 0; k < 4; k++)
                    ck_assert_uint_eq(strlen(dec[k]), 6);
                ck_assert(cls >= 0 && cls < YC_DEMO_NC);
                per_class[cls]++;
                for (int k = 0; k < 4; k++)
                    ck_assert(v[k] >= 0 && v[k] <= 1);
                ck_assert(v[2] > 0.02 && v[3] > 0.02);
                ck_assert(v[0] - v[2] / 2 >= -1e-6 && v[0] + v[2] / 2 <= 1 + 1e-6);
                ck_assert(v[1] - v[3] / 2 >= -1e-6 && v[1] + v[3] / 2 <= 1 + 1e-6);
                rows++;
            }
            ck_assert_msg(rows >= 1 && rows <= 6, "%s: %d objects", path, rows);
            free(text);
            if (i % 8 == 0) {
                snprintf(path, sizeof path, "%s/images/%s/shapes_%05d.jpg", dir,
                         s ? "val" : "train", i);
                int w, h;
                free(decode(path, &w, &h));
                ck_assert(w >= 256 && w <= 480 && w % 32 == 0);
                ck_assert(h >= 256 && h <= 480 && h % 32 == 0);
            }
        }
    }
    for (int k = 0; k < YC_DEMO_NC; k++)
        ck_assert_msg(per_class[k] > 150, "class %d has only %d objects", k, per_class[k]);
}
END_TEST

/* Boxes are exact: on the rendered pixels every pixel outside all boxes is background (low
 * chroma), each box centre is object colour, and each unoccluded box side has object colour
 * within 3 pixels of it (so the box is not loose).  In the written JPEG, box centres are still
 * object colour. */
START_TEST(demo_boxes_enclose_shapes)
{
    yc_demo_options o = small_options(3);
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/demo_boxes", yc_harness_tmpdir());
    ck_assert_msg(yc_demo_write(dir, &o) == YC_OK, "%s", yc_last_error());
    int checked_sides = 0;
    for (int i = 0; i < 12; i++) {
        yc_demo_sample s;
        ck_assert_msg(yc_demo_render(&o, 0, i, &s) == YC_OK, "%s", yc_last_error());
        for (int y = 0; y < s.h; y++) {
            for (int x = 0; x < s.w; x++) {
                bool near_box = false;
                for (int k = 0; k < s.n && !near_box; k++)
                    near_box = x + 1 >= s.obj[k].x0 - 1 && x <= s.obj[k].x1 + 1 &&
                               y + 1 >= s.obj[k].y0 - 1 && y <= s.obj[k].y1 + 1;
                if (!near_box)
                    ck_assert_msg(chroma(s.rgb, s.w, x, y) < 90,
                                  "image %d: pixel (%d, %d) outside every box has chroma %d", i, x,
                                  y, chroma(s.rgb, s.w, x, y));
            }
        }
        for (int k = 0; k < s.n; k++) {
            const yc_demo_object *b = &s.obj[k];
            bool occluded = false;
            for (int j = k + 1; j < s.n; j++)
                occluded |= s.obj[j].x0 < b->x1 + 3 && s.obj[j].x1 > b->x0 - 3 &&
                            s.obj[j].y0 < b->y1 + 3 && s.obj[j].y1 > b->y0 - 3;
            if (occluded)
                continue;
            int cx = (int)((b->x0 + b->x1) / 2), cy = (int)((b->y0 + b->y1) / 2);
            ck_assert_msg(chroma(s.rgb, s.w, cx, cy) >= 90, "image %d object %d: centre chroma %d",
                          i, k, chroma(s.rgb, s.w, cx, cy));
            int xa = (int)floor(b->x0), xb = (int)ceil(b->x1) - 1;
            int ya = (int)floor(b->y0), yb = (int)ceil(b->y1) - 1;
            int best[4] = {0, 0, 0, 0};
            for (int y = ya; y <= yb; y++) {
                for (int x = xa; x <= xb; x++) {
                    int c = chroma(s.rgb, s.w, x, y);
                    if (x <= xa + 2 && c > best[0])
                        best[0] = c;
                    if (x >= xb - 2 && c > best[1])
                        best[1] = c;
                    if (y <= ya + 2 && c > best[2])
                        best[2] = c;
                    if (y >= yb - 2 && c > best[3])
                        best[3] = c;
                }
            }
            for (int side = 0; side < 4; side++) {
                ck_assert_msg(best[side] >= 90, "image %d object %d (%s): no shape near side %d",
                              i, k, yc_demo_names[b->cls], side);
                checked_sides++;
            }
        }
        snprintf(path, sizeof path, "%s/images/train/shapes_%05d.jpg", dir, i);
        int w, h;
        uint8_t *jpg = decode(path, &w, &h);
        ck_assert_int_eq(w, s.w);
        ck_assert_int_eq(h, s.h);
        snprintf(path, sizeof path, "%s/labels/train/shapes_%05d.txt", dir, i);
        char *text = yc_harness_read(path, NULL);
        int k = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), k++) {
            int cls;
            double cx, cy, bw, bh;
            ck_assert_int_eq(sscanf(line, "%d %lf %lf %lf %lf", &cls, &cx, &cy, &bw, &bh), 5);
            ck_assert_int_lt(k, s.n);
            ck_assert_int_eq(cls, s.obj[k].cls);
            ck_assert(fabs(cx * w - (s.obj[k].x0 + s.obj[k].x1) / 2) < 0.01);
            ck_assert(fabs(bw * w - (s.obj[k].x1 - s.obj[k].x0)) < 0.01);
            ck_assert(fabs(cy * h - (s.obj[k].y0 + s.obj[k].y1) / 2) < 0.01);
            ck_assert(fabs(bh * h - (s.obj[k].y1 - s.obj[k].y0)) < 0.01);
            bool top = true;
            for (int j = k + 1; j < s.n; j++)
                top &= !(s.obj[j].x0 <= cx * w && s.obj[j].x1 >= cx * w &&
                         s.obj[j].y0 <= cy * h && s.obj[j].y1 >= cy * h);
            if (top)
                ck_assert_msg(chroma(jpg, w, (int)(cx * w), (int)(cy * h)) >= 70,
                              "%s row %d: JPEG centre is not object colour", path, k + 1);
        }
        ck_assert_int_eq(k, s.n);
        free(text);
        free(jpg);
        yc_demo_sample_free(&s);
    }
    ck_assert_int_gt(checked_sides, 40);
}
END_TEST

/* Compares every file of two dataset directories byte for byte. */
static void assert_same_tree(const char *a, const char *b, int n_train, int n_val)
{
    char pa[1200], pb[1200];
    const char *files[] = {YC_DEMO_YAML, YC_DEMO_MARKER};
    for (int i = 0; i < 2; i++) {
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        size_t na, nb;
        char *da = yc_harness_read(pa, &na), *db = yc_harness_read(pb, &nb);
        ck_assert_uint_eq(na, nb);
        ck_assert(memcmp(da, db, na) == 0);
        free(da);
        free(db);
    }
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < (s ? n_val : n_train); i++) {
            for (int kind = 0; kind < 2; kind++) {
                const char *fmt = kind ? "%s/labels/%s/shapes_%05d.txt" : "%s/images/%s/shapes_%05d.jpg";
                snprintf(pa, sizeof pa, fmt, a, s ? "val" : "train", i);
                snprintf(pb, sizeof pb, fmt, b, s ? "val" : "train", i);
                size_t na, nb;
                char *da = yc_harness_read(pa, &na), *db = yc_harness_read(pb, &nb);
                ck_assert_msg(na == nb && memcmp(da, db, na) == 0, "%s and %s differ", pa, pb);
                free(da);
                free(db);
            }
        }
    }
}

START_TEST(demo_deterministic)
{
    yc_demo_options o = small_options(7);
    char a[1024], b[1024], c[1024], pa[1200], pc[1200];
    snprintf(a, sizeof a, "%s/demo_det_a", yc_harness_tmpdir());
    snprintf(b, sizeof b, "%s/demo_det_b", yc_harness_tmpdir());
    snprintf(c, sizeof c, "%s/demo_det_c", yc_harness_tmpdir());
    ck_assert_msg(yc_demo_write(a, &o) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_demo_write(b, &o) == YC_OK, "%s", yc_last_error());
    assert_same_tree(a, b, o.n_train, o.n_val);

    /* another seed gives other images */
    yc_demo_options o2 = small_options(8);
    ck_assert_msg(yc_demo_write(c, &o2) == YC_OK, "%s", yc_last_error());
    snprintf(pa, sizeof pa, "%s/images/train/shapes_00000.jpg", a);
    snprintf(pc, sizeof pc, "%s/images/train/shapes_00000.jpg", c);
    size_t na, nc;
    char *da = yc_harness_read(pa, &na), *dc = yc_harness_read(pc, &nc);
    ck_assert(na != nc || memcmp(da, dc, na) != 0);
    free(da);
    free(dc);

    /* rendering is independent of the order images are produced in */
    yc_demo_sample s1, s2;
    ck_assert_int_eq(yc_demo_render(&o, 1, 3, &s1), YC_OK);
    ck_assert_int_eq(yc_demo_render(&o, 0, 5, &s2), YC_OK);
    yc_demo_sample_free(&s2);
    ck_assert_int_eq(yc_demo_render(&o, 1, 3, &s2), YC_OK);
    ck_assert_int_eq(s1.w, s2.w);
    ck_assert_int_eq(s1.h, s2.h);
    ck_assert(memcmp(s1.rgb, s2.rgb, (size_t)s1.w * s1.h * 3) == 0);
    yc_demo_sample_free(&s1);
    yc_demo_sample_free(&s2);
}
END_TEST

START_TEST(demo_incomplete_detected)
{
    yc_demo_options o = small_options(11);
    char dir[1024], ref[1024], path[1200], user[1200], stale[1200];
    snprintf(dir, sizeof dir, "%s/demo_incomplete", yc_harness_tmpdir());
    snprintf(ref, sizeof ref, "%s/demo_incomplete_ref", yc_harness_tmpdir());
    ck_assert_msg(yc_demo_write(ref, &o) == YC_OK, "%s", yc_last_error());

    /* nothing there yet */
    ck_assert(!yc_demo_is_complete(dir, &o));
    ck_assert_msg(yc_demo_ensure_opts(dir, &o) == YC_OK, "%s", yc_last_error());
    ck_assert(yc_demo_is_complete(dir, &o));
    assert_same_tree(dir, ref, o.n_train, o.n_val);

    /* a complete directory is reused as it is */
    snprintf(path, sizeof path, "%s/labels/train/shapes_00002.txt", dir);
    ck_assert_int_eq(yc_write_file_atomic(path, "0 0.5 0.5 0.1 0.1\n", 18), YC_OK);
    ck_assert_int_eq(yc_demo_ensure_opts(dir, &o), YC_OK);
    size_t n;
    char *text = yc_harness_read(path, &n);
    ck_assert_str_eq(text, "0 0.5 0.5 0.1 0.1\n");
    free(text);

    /* a half-written one (marker missing, a torn image, a stale extra image) is rewritten; files
     * that are not the generator's are left alone */
    snprintf(path, sizeof path, "%s/%s", dir, YC_DEMO_MARKER);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert(!yc_demo_is_complete(dir, &o));
    snprintf(path, sizeof path, "%s/images/val/shapes_00001.jpg", dir);
    ck_assert_int_eq(truncate(path, 100), 0);
    snprintf(stale, sizeof stale, "%s/images/train/shapes_00099.jpg", dir);
    ck_assert_int_eq(yc_write_file_atomic(stale, "x", 1), YC_OK);
    snprintf(user, sizeof user, "%s/images/train/mine.jpg", dir);
    ck_assert_int_eq(yc_write_file_atomic(user, "y", 1), YC_OK);
    ck_assert_msg(yc_demo_ensure_opts(dir, &o) == YC_OK, "%s", yc_last_error());
    ck_assert(yc_demo_is_complete(dir, &o));
    assert_same_tree(dir, ref, o.n_train, o.n_val);
    ck_assert(!yc_file_exists(stale));
    ck_assert(yc_file_exists(user));

    /* other options do not match the marker */
    yc_demo_options other = o;
    other.n_train = 13;
    ck_assert(!yc_demo_is_complete(dir, &other));
    other = o;
    other.seed = 12;
    ck_assert(!yc_demo_is_complete(dir, &other));
    ck_assert(!yc_demo_is_complete(dir, NULL));
}
END_TEST

START_TEST(demo_options_and_dirs)
{
    yc_demo_options o = small_options(0);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/demo_bad", yc_harness_tmpdir());
    o.n_train = 0;
    ck_assert_int_eq(yc_demo_write(dir, &o), YC_EUSAGE);
    ck_assert(strstr(yc_last_error(), "train") != NULL);
    o = small_options(0);
    o.max_objects = YC_DEMO_MAX_OBJECTS + 1;
    ck_assert_int_eq(yc_demo_write(dir, &o), YC_EUSAGE);
    o = small_options(0);
    o.min_side = 500;
    o.max_side = 300;
    ck_assert_int_eq(yc_demo_write(dir, &o), YC_EUSAGE);
    ck_assert(!yc_file_exists(dir));

    setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
    setenv("HOME", "/home/someone", 1);
    char *d = yc_demo_default_dir();
    ck_assert_str_eq(d, "/xdg/cache/yolocl/demo");
    free(d);
    setenv("XDG_CACHE_HOME", "relative/cache", 1);
    d = yc_demo_default_dir();
    ck_assert_str_eq(d, "/home/someone/.cache/yolocl/demo");
    free(d);
    unsetenv("XDG_CACHE_HOME");
    d = yc_demo_default_dir();
    ck_assert_str_eq(d, "/home/someone/.cache/yolocl/demo");
    free(d);
    unsetenv("HOME");
    ck_assert_ptr_null(yc_demo_default_dir());
    ck_assert(strstr(yc_last_error(), "HOME") != NULL);

    /* the default cache directory is used when none is given */
    char cache[1024], yaml[1200];
    snprintf(cache, sizeof cache, "%s/xdg", yc_harness_tmpdir());
    setenv("XDG_CACHE_HOME", cache, 1);
    ck_assert_msg(yc_demo_ensure_opts(NULL, &(yc_demo_options){.seed = 1,
                                                               .n_train = 2,
                                                               .n_val = 1,
                                                               .min_side = 64,
                                                               .max_side = 96,
                                                               .max_objects = 2,
                                                               .quality = 80}) == YC_OK,
                  "%s", yc_last_error());
    snprintf(yaml, sizeof yaml, "%s/yolocl/demo/%s", cache, YC_DEMO_YAML);
    ck_assert(yc_file_exists(yaml));
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Drawing
 * ---------------------------------------------------------------------------------------------- */

static bool px_is(const yc_canvas *c, int x, int y, yc_rgb v)
{
    const uint8_t *p = c->px + 3 * ((size_t)y * c->w + x);
    return p[0] == v.r && p[1] == v.g && p[2] == v.b;
}

START_TEST(draw_box_border_only)
{
    const yc_rgb black = {0, 0, 0}, red = {255, 0, 0};
    yc_canvas c;
    ck_assert_int_eq(yc_canvas_init(&c, 50, 40, black), YC_OK);
    yc_draw_box(&c, 10, 8, 30, 25, 2, red);
    for (int y = 0; y < c.h; y++) {
        for (int x = 0; x < c.w; x++) {
            bool in_rect = x >= 10 && x <= 30 && y >= 8 && y <= 25;
            bool border = in_rect && (x < 12 || x > 28 || y < 10 || y > 23);
            ck_assert_msg(px_is(&c, x, y, border ? red : black), "pixel (%d, %d)", x, y);
        }
    }
    /* clipped at the canvas edges without writing outside */
    yc_draw_box(&c, -1, -1, 50, 40, 2, red);
    ck_assert(px_is(&c, 0, 0, red));
    ck_assert(px_is(&c, 1, 1, black));
    ck_assert(px_is(&c, 49, 39, red));
    yc_draw_fill_rect(&c, 45, 35, 200, 200, (yc_rgb){1, 2, 3});
    ck_assert(px_is(&c, 49, 39, (yc_rgb){1, 2, 3}));
    yc_canvas_free(&c);
    ck_assert_ptr_null(c.px);

    yc_rgb p;
    ck_assert_int_eq(yc_color_parse("#FF3838", &p), YC_OK);
    ck_assert(p.r == 0xFF && p.g == 0x38 && p.b == 0x38);
    ck_assert_int_eq(yc_color_parse("12345", &p), YC_EFORMAT);
    ck_assert_int_eq(yc_color_parse("12345G", &p), YC_EFORMAT);
    yc_rgb c0 = yc_color_class(0), c19 = yc_color_class(19), c20 = yc_color_class(20);
    ck_assert(c0.r == 0xFF && c0.g == 0x38 && c0.b == 0x38);
    ck_assert(c19.r == 0xFF && c19.g == 0x37 && c19.b == 0xC7);
    ck_assert(c20.r == c0.r && c20.g == c0.g && c20.b == c0.b);
}
END_TEST

START_TEST(draw_lines)
{
    const yc_rgb white = {255, 255, 255}, blue = {0, 0, 255};
    yc_canvas c;
    ck_assert_int_eq(yc_canvas_init(&c, 30, 20, white), YC_OK);
    yc_draw_line(&c, 2.5, 5.5, 20.5, 5.5, 1, blue);
    for (int y = 0; y < c.h; y++)
        for (int x = 0; x < c.w; x++)
            ck_assert_msg(px_is(&c, x, y, (y == 5 && x >= 2 && x <= 20) ? blue : white),
                          "pixel (%d, %d)", x, y);
    /* a dashed line leaves gaps, a solid one none */
    yc_canvas_free(&c);
    ck_assert_int_eq(yc_canvas_init(&c, 40, 10, white), YC_OK);
    double xs[2] = {0.5, 39.5}, ys[2] = {4.5, 4.5};
    yc_draw_polyline(&c, xs, ys, 2, 1, 4, blue);
    int on = 0;
    for (int x = 0; x < 40; x++)
        on += px_is(&c, x, 4, blue);
    ck_assert(on > 12 && on < 28);
    yc_draw_disc(&c, 20, 5, 3, blue);
    ck_assert(px_is(&c, 20, 5, blue));
    ck_assert(px_is(&c, 20, 8, white));
    yc_canvas_free(&c);
}
END_TEST

/* Bounding rectangle of the pixels that are not `bg`; false when there are none. */
static bool ink_bounds(const yc_canvas *c, yc_rgb bg, int *x0, int *y0, int *x1, int *y1, int *n)
{
    *x0 = *y0 = 1 << 30;
    *x1 = *y1 = -1;
    *n = 0;
    for (int y = 0; y < c->h; y++)
        for (int x = 0; x < c->w; x++)
            if (!px_is(c, x, y, bg)) {
                *x0 = x < *x0 ? x : *x0;
                *y0 = y < *y0 ? y : *y0;
                *x1 = x > *x1 ? x : *x1;
                *y1 = y > *y1 ? y : *y1;
                (*n)++;
            }
    return *n > 0;
}

START_TEST(draw_text_in_rect)
{
    const yc_rgb white = {255, 255, 255}, black = {0, 0, 0};
    yc_canvas c;
    ck_assert_int_eq(yc_canvas_init(&c, 120, 60, white), YC_OK);
    const char *s = "person 0.87";
    ck_assert_int_eq(yc_text_width(s, 1), 11 * 6 - 1);
    ck_assert_int_eq(yc_text_width(s, 2), 2 * (11 * 6 - 1));
    ck_assert_int_eq(yc_text_height(2), 14);
    ck_assert_int_eq(yc_text_width("", 3), 0);
    yc_draw_text(&c, 5, 6, s, 1, black);
    int x0, y0, x1, y1, n;
    ck_assert(ink_bounds(&c, white, &x0, &y0, &x1, &y1, &n));
    ck_assert_int_ge(x0, 5);
    ck_assert_int_ge(y0, 6);
    ck_assert_int_le(x1, 5 + yc_text_width(s, 1) - 1);
    ck_assert_int_le(y1, 6 + yc_text_height(1) - 1);
    ck_assert_int_gt(n, 60);
    /* the glyph span reaches both ends: 'p' starts at column 0, '7' ends at its last column */
    ck_assert_int_eq(x0, 5);
    ck_assert_int_ge(x1, 5 + yc_text_width(s, 1) - 3);

    /* scale 2 covers exactly four times the pixels */
    yc_canvas_free(&c);
    ck_assert_int_eq(yc_canvas_init(&c, 200, 60, white), YC_OK);
    yc_draw_text(&c, 3, 4, s, 2, black);
    int n2;
    ck_assert(ink_bounds(&c, white, &x0, &y0, &x1, &y1, &n2));
    ck_assert_int_eq(n2, 4 * n);
    ck_assert_int_le(x1, 3 + yc_text_width(s, 2) - 1);
    ck_assert_int_le(y1, 4 + yc_text_height(2) - 1);

    /* rotated text stays in its documented rectangle */
    yc_canvas_free(&c);
    ck_assert_int_eq(yc_canvas_init(&c, 40, 120, white), YC_OK);
    yc_draw_text_up(&c, 10, 100, s, 1, black);
    ck_assert(ink_bounds(&c, white, &x0, &y0, &x1, &y1, &n2));
    ck_assert_int_eq(n2, n);
    ck_assert_int_ge(x0, 10);
    ck_assert_int_le(x1, 10 + yc_text_height(1) - 1);
    ck_assert_int_ge(y0, 100 - yc_text_width(s, 1) + 1);
    ck_assert_int_le(y1, 100);

    /* a label: box outline plus a filled box above it holding white text */
    yc_canvas_free(&c);
    ck_assert_int_eq(yc_canvas_init(&c, 200, 100, black), YC_OK);
    yc_rgb col = yc_color_class(3);
    yc_draw_label(&c, 20, 40, 150, 90, "car 0.5", 2, 1, col);
    ck_assert(px_is(&c, 20, 40, col));
    ck_assert(px_is(&c, 150, 90, col));
    ck_assert(px_is(&c, 80, 60, black));
    ck_assert(px_is(&c, 20, 39, col));
    int whites = 0;
    for (int y = 0; y < 40; y++)
        for (int x = 20; x < 80; x++)
            whites += px_is(&c, x, y, white);
    ck_assert_int_gt(whites, 20);
    yc_canvas_free(&c);
}
END_TEST

START_TEST(draw_save_roundtrip)
{
    char png[1200], jpg[1200], bad[1200];
    snprintf(png, sizeof png, "%s/canvas.png", yc_harness_tmpdir());
    snprintf(jpg, sizeof jpg, "%s/canvas.jpg", yc_harness_tmpdir());
    snprintf(bad, sizeof bad, "%s/canvas.gif", yc_harness_tmpdir());
    yc_canvas c;
    ck_assert_int_eq(yc_canvas_init(&c, 64, 48, (yc_rgb){10, 20, 30}), YC_OK);
    yc_draw_fill_rect(&c, 8, 8, 40, 30, (yc_rgb){200, 100, 50});
    yc_draw_text(&c, 2, 36, "Ok", 1, (yc_rgb){255, 255, 255});
    ck_assert_msg(yc_canvas_save(&c, png) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_canvas_save(&c, jpg) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_canvas_save(&c, bad), YC_EUNSUPPORTED);
    int w, h;
    uint8_t *p = decode(png, &w, &h);
    ck_assert_int_eq(w, 64);
    ck_assert_int_eq(h, 48);
    ck_assert(memcmp(p, c.px, (size_t)w * h * 3) == 0);
    free(p);
    p = decode(jpg, &w, &h);
    ck_assert_int_eq(w, 64);
    ck_assert_int_eq(h, 48);
    ck_assert(abs(p[3 * (20 * 64 + 20)] - 200) < 12);
    free(p);
    yc_canvas_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Plots
 * ---------------------------------------------------------------------------------------------- */

static const char *const results_cols[14] = {
    "epoch",           "train/box_loss",       "train/obj_loss", "train/cls_loss",
    "metrics/precision", "metrics/recall",     "metrics/mAP_0.5", "metrics/mAP_0.5:0.95",
    "val/box_loss",    "val/obj_loss",         "val/cls_loss",   "x/lr0",
    "x/lr1",           "x/lr2",
};

/* Writes a results.csv in YOLOv5's format (%20s header, %20.5g values) with `rows` epochs. */
static void write_results(const char *path, int rows)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 14; i++)
        fprintf(f, "%s%20s", i ? "," : "", results_cols[i]);
    fputc('\n', f);
    for (int e = 0; e < rows; e++) {
        fprintf(f, "%20.5g", (double)e);
        for (int i = 1; i < 14; i++)
            fprintf(f, ",%20.5g", i * 0.01 + e * 0.001 * i);
        fputc('\n', f);
    }
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(results_csv_and_plot)
{
    char csv[1200], out[1200];
    snprintf(csv, sizeof csv, "%s/results.csv", yc_harness_tmpdir());
    snprintf(out, sizeof out, "%s/results.png", yc_harness_tmpdir());
    write_results(csv, 7);
    yc_results r;
    ck_assert_msg(yc_results_read(csv, &r) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(r.n_cols, 14);
    ck_assert_int_eq(r.n_rows, 7);
    for (int i = 0; i < 14; i++)
        ck_assert_str_eq(r.names[i], results_cols[i]);
    ck_assert_int_eq(yc_results_column(&r, "metrics/mAP_0.5:0.95"), 7);
    ck_assert_int_eq(yc_results_column(&r, "nope"), -1);
    ck_assert(fabs(r.values[6 * 14 + 0] - 6) < 1e-12);
    ck_assert(fabs(r.values[3 * 14 + 5] - (0.05 + 3 * 0.005)) < 1e-9);
    yc_results_free(&r);

    ck_assert_msg(yc_plot_results(csv, out) == YC_OK, "%s", yc_last_error());
    int w, h;
    uint8_t *p = decode(out, &w, &h);
    ck_assert_int_eq(w, YC_RESULTS_PLOT_W);
    ck_assert_int_eq(h, YC_RESULTS_PLOT_H);
    size_t dark = 0;
    for (size_t i = 0; i < (size_t)w * h; i++)
        dark += p[3 * i] < 128;
    ck_assert_uint_gt(dark, 5000);
    free(p);

    /* a single epoch still plots */
    write_results(csv, 1);
    ck_assert_msg(yc_plot_results(csv, out) == YC_OK, "%s", yc_last_error());
}
END_TEST

/* Writes `text` to <scratch directory>/name and returns yc_results_read's status, the message in
 * `msg`. */
static int read_bad(const char *name, const char *text, char *msg, size_t len)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", yc_harness_tmpdir(), name);
    ck_assert_int_eq(yc_write_file_atomic(path, text, strlen(text)), YC_OK);
    yc_results r;
    int st = yc_results_read(path, &r);
    snprintf(msg, len, "%s", yc_last_error());
    if (st == YC_OK)
        yc_results_free(&r);
    return st;
}

START_TEST(results_csv_errors)
{
    char msg[2048], path[1200], out[1200];
    const char *hdr = "epoch, train/box_loss, metrics/recall\n";
    char text[512];
    snprintf(text, sizeof text, "%s0, 0.1, 0.2\n1, 0.1, 0.3\n2, 0.1x, 0.4\n", hdr);
    ck_assert_int_eq(read_bad("bad1.csv", text, msg, sizeof msg), YC_EFORMAT);
    ck_assert_msg(strstr(msg, "bad1.csv:4:") && strstr(msg, "train/box_loss") && strstr(msg, "0.1x"),
                  "%s", msg);
    snprintf(text, sizeof text, "%s0, 0.1, 0.2\n1, 0.1\n", hdr);
    ck_assert_int_eq(read_bad("bad2.csv", text, msg, sizeof msg), YC_EFORMAT);
    ck_assert_msg(strstr(msg, "bad2.csv:3:") && strstr(msg, "2 fields"), "%s", msg);
    snprintf(text, sizeof text, "%s0, , 0.2\n", hdr);
    ck_assert_int_eq(read_bad("bad3.csv", text, msg, sizeof msg), YC_EFORMAT);
    ck_assert_msg(strstr(msg, "bad3.csv:2:"), "%s", msg);
    ck_assert_int_eq(read_bad("bad4.csv", "", msg, sizeof msg), YC_EFORMAT);
    ck_assert_msg(strstr(msg, "bad4.csv"), "%s", msg);
    /* blank lines and CRLF endings are accepted */
    snprintf(text, sizeof text, "epoch,a\r\n\r\n0,1\r\n1,2\r\n");
    ck_assert_int_eq(read_bad("crlf.csv", text, msg, sizeof msg), YC_OK);

    /* the plot needs YOLOv5's columns and at least one epoch, and names what is missing */
    snprintf(out, sizeof out, "%s/bad.png", yc_harness_tmpdir());
    snprintf(path, sizeof path, "%s/bad5.csv", yc_harness_tmpdir());
    snprintf(text, sizeof text, "%s0, 0.1, 0.2\n", hdr);
    ck_assert_int_eq(yc_write_file_atomic(path, text, strlen(text)), YC_OK);
    ck_assert_int_eq(yc_plot_results(path, out), YC_EFORMAT);
    ck_assert_msg(strstr(yc_last_error(), "train/obj_loss"), "%s", yc_last_error());
    snprintf(path, sizeof path, "%s/missing.csv", yc_harness_tmpdir());
    ck_assert_int_ne(yc_plot_results(path, out), YC_OK);
    ck_assert_msg(strstr(yc_last_error(), "missing.csv"), "%s", yc_last_error());
    ck_assert(!yc_file_exists(out));
}
END_TEST

START_TEST(plot_batch_labels_curves_confusion)
{
    char out[1200];
    /* three images in the three layouts, a 2x2 mosaic */
    enum { W = 64, H = 48 };
    static uint8_t hwc[W * H * 3], chw[W * H * 3];
    static float f32[W * H * 3];
    for (int i = 0; i < W * H * 3; i++) {
        hwc[i] = (uint8_t)(i % 251);
        chw[i] = 114;
        f32[i] = 0.5f;
    }
    yc_plot_image ims[3] = {
        {hwc, YC_PIX_U8_HWC, W, H, "a/images/one.jpg"},
        {chw, YC_PIX_U8_CHW, W, H, "two.jpg"},
        {f32, YC_PIX_F32_CHW, W, H, NULL},
    };
    yc_plot_box boxes[3] = {
        {0, 0, 0.5f, 0.5f, 0.5f, 0.5f, -1},
        {1, 2, 0.3f, 0.3f, 0.2f, 0.2f, 0.9f},
        {2, 1, 0.5f, 0.5f, 0.2f, 0.2f, 0.1f},
    };
    snprintf(out, sizeof out, "%s/train_batch0.jpg", yc_harness_tmpdir());
    ck_assert_msg(yc_plot_batch(out, ims, 3, boxes, 3, yc_demo_names, YC_DEMO_NC) == YC_OK, "%s",
                  yc_last_error());
    int w, h;
    uint8_t *p = decode(out, &w, &h);
    ck_assert_int_eq(w, 2 * W);
    ck_assert_int_eq(h, 2 * H);
    /* the empty fourth tile stays white; the grey CHW tile is 114 away from its border */
    ck_assert(p[3 * ((H + H / 2) * 2 * W + W + W / 2)] > 240);
    ck_assert(abs(p[3 * ((H / 2 + 10) * 2 * W + W + W / 2 + 20)] - 114) < 10);
    free(p);

    /* a large batch is scaled to at most 1920 pixels */
    static uint8_t big[640 * 640 * 3];
    yc_plot_image many[16];
    for (int i = 0; i < 16; i++)
        many[i] = (yc_plot_image){big, YC_PIX_U8_HWC, 640, 640, "x.jpg"};
    ck_assert_int_eq(yc_plot_batch(out, many, 16, NULL, 0, NULL, 0), YC_OK);
    p = decode(out, &w, &h);
    ck_assert_int_eq(w, 1920);
    ck_assert_int_eq(h, 1920);
    free(p);

    /* labels.jpg from the demo's labels */
    float labels[5 * 64];
    int n = 0;
    yc_demo_options o = small_options(5);
    for (int i = 0; i < 8; i++) {
        yc_demo_sample s;
        ck_assert_int_eq(yc_demo_render(&o, 0, i, &s), YC_OK);
        for (int k = 0; k < s.n; k++, n++) {
            float *l = labels + 5 * n;
            l[0] = (float)s.obj[k].cls;
            l[1] = (float)((s.obj[k].x0 + s.obj[k].x1) / 2 / s.w);
            l[2] = (float)((s.obj[k].y0 + s.obj[k].y1) / 2 / s.h);
            l[3] = (float)((s.obj[k].x1 - s.obj[k].x0) / s.w);
            l[4] = (float)((s.obj[k].y1 - s.obj[k].y0) / s.h);
        }
        yc_demo_sample_free(&s);
    }
    snprintf(out, sizeof out, "%s/labels.jpg", yc_harness_tmpdir());
    ck_assert_msg(yc_plot_labels(out, labels, n, yc_demo_names, YC_DEMO_NC) == YC_OK, "%s",
                  yc_last_error());
    p = decode(out, &w, &h);
    ck_assert_int_eq(w, YC_LABELS_PLOT_SIZE);
    ck_assert_int_eq(h, YC_LABELS_PLOT_SIZE);
    free(p);
    ck_assert_int_eq(yc_plot_labels(out, NULL, 0, NULL, 0), YC_OK);

    /* PR curves: 4 classes and the bold mean */
    enum { NP = 101 };
    float x[NP], y[4 * NP], mean[NP];
    for (int i = 0; i < NP; i++) {
        x[i] = i / (float)(NP - 1);
        mean[i] = 0;
        for (int s = 0; s < 4; s++) {
            y[s * NP + i] = 1 - powf(x[i], 2 + s);
            mean[i] += y[s * NP + i] / 4;
        }
    }
    const char *series[4] = {"circle 0.9", "square 0.8", "triangle 0.7", "star 0.6"};
    yc_curve_plot cp = {"Precision-Recall Curve", "Recall", "Precision", NP, x, 4, y, series,
                        mean, "all classes 0.750 mAP@0.5", 0, 1, 0, 1};
    snprintf(out, sizeof out, "%s/PR_curve.png", yc_harness_tmpdir());
    ck_assert_msg(yc_plot_curves(out, &cp) == YC_OK, "%s", yc_last_error());
    p = decode(out, &w, &h);
    ck_assert_int_eq(w, YC_CURVE_PLOT_W);
    ck_assert_int_eq(h, YC_CURVE_PLOT_H);
    size_t bold = 0;
    for (size_t i = 0; i < (size_t)w * h; i++)
        bold += p[3 * i] == 0 && p[3 * i + 1] == 0 && p[3 * i + 2] == 255;
    ck_assert_uint_gt(bold, 1000);
    free(p);
    cp.n_points = 0;
    ck_assert_int_eq(yc_plot_curves(out, &cp), YC_EFORMAT);

    /* confusion matrix, normalised and raw */
    float cm[25] = {50, 2, 0, 1, 3, 1, 40, 3, 0, 2, 0, 1, 45, 0, 4, 0, 0, 2, 38, 1, 5, 4, 6, 2, 0};
    snprintf(out, sizeof out, "%s/confusion_matrix.png", yc_harness_tmpdir());
    ck_assert_msg(yc_plot_confusion(out, cm, 4, yc_demo_names, true) == YC_OK, "%s",
                  yc_last_error());
    p = decode(out, &w, &h);
    ck_assert_int_gt(w, 300);
    ck_assert_int_gt(h, 300);
    free(p);
    ck_assert_int_eq(yc_plot_confusion(out, cm, 4, NULL, false), YC_OK);
    ck_assert_int_eq(yc_plot_confusion(out, cm, 0, NULL, false), YC_EFORMAT);
}
END_TEST

/* Point (x, y) inside the polygon (even-odd rule), written independently of the renderer. */
static bool poly_inside(const double *px, const double *py, int n, double x, double y)
{
    int crossings = 0;
    for (int i = 0; i < n; i++) {
        double ax = px[i], ay = py[i], bx = px[(i + 1) % n], by = py[(i + 1) % n];
        if ((ay <= y && by > y) || (by <= y && ay > y)) {
            double t = (y - ay) / (by - ay);
            if (x < ax + t * (bx - ax))
                crossings++;
        }
    }
    return crossings % 2 == 1;
}

/* Distance from (x, y) to the polygon's outline. */
static double poly_distance(const double *px, const double *py, int n, double x, double y)
{
    double best = INFINITY;
    for (int i = 0; i < n; i++) {
        double ax = px[i], ay = py[i], bx = px[(i + 1) % n], by = py[(i + 1) % n];
        double dx = bx - ax, dy = by - ay, l2 = dx * dx + dy * dy;
        double t = l2 > 0 ? ((x - ax) * dx + (y - ay) * dy) / l2 : 0;
        t = t < 0 ? 0 : t > 1 ? 1 : t;
        best = fmin(best, hypot(x - ax - t * dx, y - ay - t * dy));
    }
    return best;
}

/* The segmentation task: every label line is an object's exact outline.  The polygons read back
 * from the label files, rasterised at pixel centres, must agree with the pixels the renderer
 * painted (coverage >= 1/2, the ids map) everywhere but within 0.25 px of the outline (where the
 * renderer's 4x4 supersampling and the centre test may disagree: here within 0.15 px), and the
 * decoded image must show the object's saturated colour well inside it. */
START_TEST(demo_segment_outlines)
{
    yc_demo_options o = small_options(5);
    o.task = YC_DEMO_SEGMENT;
    o.n_train = 6;
    o.n_val = 2;
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/demo_seg", yc_harness_tmpdir());
    ck_assert_msg(yc_demo_write(dir, &o) == YC_OK, "%s", yc_last_error());
    ck_assert(yc_demo_is_complete(dir, &o));
    yc_demo_options det = o;
    det.task = YC_DEMO_DETECT;
    ck_assert(!yc_demo_is_complete(dir, &det));
    static const int want_vertices[YC_DEMO_NC] = {YC_DEMO_CIRCLE_VERTICES, 4, 3, 10};
    int objects = 0, per_class[YC_DEMO_NC] = {0};
    for (int i = 0; i < o.n_train; i++) {
        yc_demo_sample s;
        ck_assert_msg(yc_demo_render(&o, 0, i, &s) == YC_OK, "%s", yc_last_error());
        snprintf(path, sizeof path, "%s/images/train/shapes_%05d.jpg", dir, i);
        int jw, jh;
        uint8_t *jpg = decode(path, &jw, &jh);
        ck_assert_int_eq(jw, s.w);
        ck_assert_int_eq(jh, s.h);
        snprintf(path, sizeof path, "%s/labels/train/shapes_%05d.txt", dir, i);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "no label file %s", path);
        char line[8192];
        int k = 0;
        while (fgets(line, sizeof line, f)) {
            ck_assert_int_lt(k, s.n);
            const yc_demo_object *ob = &s.obj[k];
            double px[YC_DEMO_MAX_VERTICES], py[YC_DEMO_MAX_VERTICES];
            char *p = line, *end;
            long cls = strtol(p, &end, 10);
            ck_assert_int_eq(cls, ob->cls);
            int n = 0;
            for (p = end;; n++) {
                double x = strtod(p, &end);
                if (end == p)
                    break;
                double y = strtod(end, &p);
                ck_assert_int_lt(n, YC_DEMO_MAX_VERTICES);
                px[n] = x * s.w;
                py[n] = y * s.h;
            }
            ck_assert_int_eq(n, want_vertices[ob->cls]);
            ck_assert_int_eq(n, ob->nv);
            double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
            for (int v = 0; v < n; v++) {
                ck_assert(fabs(px[v] - ob->px[v]) < 1e-3 && fabs(py[v] - ob->py[v]) < 1e-3);
                x0 = fmin(x0, px[v]);
                x1 = fmax(x1, px[v]);
                y0 = fmin(y0, py[v]);
                y1 = fmax(y1, py[v]);
            }
            /* the box is the outline's extent; the outline lies inside the image */
            ck_assert(fabs(x0 - ob->x0) < 1e-3 && fabs(x1 - ob->x1) < 1e-3);
            ck_assert(fabs(y0 - ob->y0) < 1e-3 && fabs(y1 - ob->y1) < 1e-3);
            ck_assert(x0 >= 0 && y0 >= 0 && x1 <= s.w && y1 <= s.h);
            /* pixel by pixel against what was painted, over the box and 2 px around it */
            size_t inside = 0, deep = 0, deep_coloured = 0;
            for (int y = (int)y0 - 2; y <= (int)y1 + 2; y++)
                for (int x = (int)x0 - 2; x <= (int)x1 + 2; x++) {
                    if (x < 0 || y < 0 || x >= s.w || y >= s.h)
                        continue;
                    bool in = poly_inside(px, py, n, x + 0.5, y + 0.5);
                    bool painted = s.ids[(size_t)y * s.w + x] == k + 1;
                    double d = poly_distance(px, py, n, x + 0.5, y + 0.5);
                    ck_assert_msg(in == painted || d < 0.25,
                                  "image %d object %d (%s): pixel (%d, %d) %s the outline but %s "
                                  "painted, %.2f px from it", i, k, yc_demo_names[ob->cls], x, y,
                                  in ? "inside" : "outside", painted ? "" : "not", d);
                    inside += in;
                    if (in && d > 2) {
                        deep++;
                        deep_coloured += chroma(jpg, s.w, x, y) > 60;
                    }
                }
            ck_assert_uint_gt(inside, 0);
            ck_assert_msg(deep_coloured >= deep * 95 / 100, "image %d object %d: %zu of %zu "
                          "pixels inside show the shape's colour", i, k, deep_coloured, deep);
            per_class[ob->cls]++;
            k++;
        }
        fclose(f);
        ck_assert_int_eq(k, s.n);
        objects += k;
        /* no painted pixel lies outside every outline (shapes do not overlap) */
        for (int y = 0; y < s.h; y++)
            for (int x = 0; x < s.w; x++) {
                int id = s.ids[(size_t)y * s.w + x];
                if (id) {
                    const yc_demo_object *ob = &s.obj[id - 1];
                    ck_assert(poly_inside(ob->px, ob->py, ob->nv, x + 0.5, y + 0.5) ||
                              poly_distance(ob->px, ob->py, ob->nv, x + 0.5, y + 0.5) < 0.25);
                }
            }
        for (int a = 0; a < s.n; a++)
            for (int b = a + 1; b < s.n; b++) {
                const yc_demo_object *p = &s.obj[a], *q = &s.obj[b];
                ck_assert(p->x1 <= q->x0 || q->x1 <= p->x0 || p->y1 <= q->y0 || q->y1 <= p->y0 ||
                          !poly_inside(p->px, p->py, p->nv, q->px[0], q->py[0]));
            }
        free(jpg);
        yc_demo_sample_free(&s);
    }
    ck_assert_int_gt(objects, 6);
    for (int c = 0; c < YC_DEMO_NC; c++)
        ck_assert_msg(per_class[c] > 0, "no %s in the test's scenes", yc_demo_names[c]);
}
END_TEST

/* Counts the files in a folder. */
static int count_files(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "cannot list %s", path);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The classification task: one crop per object of every scene in its class folder, crop x crop
 * pixels with the shape's colour at the centre, readable as an ImageFolder dataset. */
START_TEST(demo_classify_crops)
{
    yc_demo_options o = small_options(2);
    o.task = YC_DEMO_CLASSIFY;
    o.n_train = 10;
    o.n_val = 6;
    o.crop = 40;
    char dir[1024], path[1400];
    snprintf(dir, sizeof dir, "%s/demo_cls", yc_harness_tmpdir());
    ck_assert_msg(yc_demo_write(dir, &o) == YC_OK, "%s", yc_last_error());
    ck_assert(yc_demo_is_complete(dir, &o));
    yc_demo_options other = o;
    other.crop = 48;
    ck_assert(!yc_demo_is_complete(dir, &other));
    snprintf(path, sizeof path, "%s/demo.yaml", dir);
    ck_assert(!yc_file_exists(path));
    for (int split = 0; split < 2; split++) {
        int want[YC_DEMO_NC] = {0};
        int scenes = split ? o.n_val : o.n_train;
        for (int i = 0; i < scenes; i++) {
            yc_demo_sample s;
            ck_assert_int_eq(yc_demo_render(&o, split, i, &s), YC_OK);
            for (int k = 0; k < s.n; k++) {
                want[s.obj[k].cls]++;
                snprintf(path, sizeof path, "%s/%s/%s/shapes_%05d_%d.png", dir,
                         split ? "val" : "train", yc_demo_names[s.obj[k].cls], i, k);
                int w, h;
                uint8_t *px = decode(path, &w, &h);
                ck_assert_int_eq(w, o.crop);
                ck_assert_int_eq(h, o.crop);
                ck_assert_msg(chroma(px, w, w / 2, h / 2) > 60, "%s: no shape at the centre", path);
                free(px);
            }
            yc_demo_sample_free(&s);
        }
        for (int c = 0; c < YC_DEMO_NC; c++) {
            snprintf(path, sizeof path, "%s/%s/%s", dir, split ? "val" : "train", yc_demo_names[c]);
            ck_assert_int_eq(count_files(path), want[c]);
            ck_assert_msg(want[c] > 0, "no %s crop in split %d", yc_demo_names[c], split);
        }
    }
    yc_imagefolder f;
    snprintf(path, sizeof path, "%s/train", dir);
    ck_assert_msg(yc_imagefolder_open(path, &f) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(f.nc, YC_DEMO_NC);
    yc_imagefolder_free(&f);
    /* written again, nothing is left over from the earlier run */
    o.n_train = 3;
    ck_assert_msg(yc_demo_write(dir, &o) == YC_OK, "%s", yc_last_error());
    int total = 0;
    for (int c = 0; c < YC_DEMO_NC; c++) {
        snprintf(path, sizeof path, "%s/train/%s", dir, yc_demo_names[c]);
        total += count_files(path);
    }
    int objects = 0;
    for (int i = 0; i < 3; i++) {
        yc_demo_sample s;
        ck_assert_int_eq(yc_demo_render(&o, 0, i, &s), YC_OK);
        objects += s.n;
        yc_demo_sample_free(&s);
    }
    ck_assert_int_eq(total, objects);
    yc_demo_task t;
    ck_assert_int_eq(yc_demo_task_parse("classify", &t), YC_OK);
    ck_assert_int_eq(t, YC_DEMO_CLASSIFY);
    ck_assert_int_eq(yc_demo_task_parse("segmentation", &t), YC_EUSAGE);
    o.crop = 8;
    ck_assert_int_eq(yc_demo_write(dir, &o), YC_EUSAGE);
}
END_TEST

static Suite *demo_suite(void)
{
    Suite *s = suite_create("demo");
    TCase *tc = tcase_create("demo");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, demo_layout);
    tcase_add_test(tc, demo_boxes_enclose_shapes);
    tcase_add_test(tc, demo_deterministic);
    tcase_add_test(tc, demo_incomplete_detected);
    tcase_add_test(tc, demo_options_and_dirs);
    tcase_add_test(tc, demo_segment_outlines);
    tcase_add_test(tc, demo_classify_crops);
    suite_add_tcase(s, tc);
    TCase *td = tcase_create("draw");
    tcase_set_timeout(td, 60);
    tcase_add_test(td, draw_box_border_only);
    tcase_add_test(td, draw_lines);
    tcase_add_test(td, draw_text_in_rect);
    tcase_add_test(td, draw_save_roundtrip);
    tcase_add_test(td, results_csv_and_plot);
    tcase_add_test(td, results_csv_errors);
    tcase_add_test(td, plot_batch_labels_curves_confusion);
    suite_add_tcase(s, td);
    return s;
}

int main(void)
{
    yc_verbosity = 0;
    return yc_harness_main(demo_suite(), "demo");
}
