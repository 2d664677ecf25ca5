/* The test harness, its part in the data layer: synthetic images, their files (libvips) and the
 * demo dataset (tests/harness.h). */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vips/vips.h>

#include "log.h"

/* ---------------------------------------------------------------------------------------------
 * Images.
 * ------------------------------------------------------------------------------------------- */

void yc_harness_pattern(yc_image *im, int h, int w, int which)
{
    ck_assert_int_eq(yc_image_reserve(im, h, w), YC_OK);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im->data + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 3 + y + which * 50);
            p[1] = (uint8_t)(x ^ y);
            p[2] = (uint8_t)((x * y) >> 4);
        }
}

void yc_harness_paint(yc_image *im, const yc_harness_rect *rects, size_t n)
{
    for (size_t r = 0; r < n; r++)
        for (int y = rects[r].y1; y <= rects[r].y2; y++)
            for (int x = rects[r].x1; x <= rects[r].x2; x++) {
                uint8_t *p = im->data + ((size_t)y * im->w + x) * 3;
                p[0] = (uint8_t)rects[r].r;
                p[1] = (uint8_t)rects[r].g;
                p[2] = (uint8_t)rects[r].b;
            }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t l = strlen(s), ls = strlen(suffix);
    return l > ls && !strcmp(s + l - ls, suffix);
}

void yc_harness_write_image(const char *path, const yc_image *im)
{
    yc_harness_make_parent(path);
    if (!ends_with(path, ".tif")) {
        ck_assert_msg(yc_image_save(im, path, 0) == YC_OK, "%s", yc_last_error());
        return;
    }
    ck_assert_int_eq(yc_vips_init(), YC_OK);
    VipsImage *v = vips_image_new_from_memory(im->data, (size_t)im->w * im->h * 3, im->w, im->h, 3,
                                              VIPS_FORMAT_UCHAR);
    ck_assert_ptr_nonnull(v);
    int r = ends_with(path, "_strip.tif")
                ? vips_tiffsave(v, path, "compression", VIPS_FOREIGN_TIFF_COMPRESSION_DEFLATE, NULL)
                : vips_tiffsave(v, path, "tile", TRUE, "tile_width", 128, "tile_height", 128, NULL);
    ck_assert_msg(r == 0, "writing %s: %s", path, vips_error_buffer());
    g_object_unref(v);
}

/* ---------------------------------------------------------------------------------------------
 * Datasets.
 * ------------------------------------------------------------------------------------------- */

int yc_harness_demo(const char *dir, const yc_demo_options *opt, char *yaml, size_t len)
{
    yc_demo_options small;
    if (!opt) {
        yc_demo_options_default(&small);
        small.n_train = 16;
        small.n_val = 8;
        small.min_side = 64;
        small.max_side = 96;
        opt = &small;
    }
    int st = yc_demo_write(dir, opt);
    if (st == YC_OK)
        snprintf(yaml, len, "%s/%s", dir, YC_DEMO_YAML);
    return st;
}

void yc_harness_seg_dataset(yc_dataset *ds)
{
    for (int i = 0; i < 3; i++) {
        const char *name = (const char[][2]){"a", "b", "c"}[i];
        size_t len;
        char *img = yc_harness_read(yc_harness_test_data("segdata/images/%s.png", name), &len);
        yc_harness_write(yc_harness_tmp("segval/images/%s.png", name), img, len);
        free(img);
        char *lbl = yc_harness_read(yc_harness_test_data("segdata/labels/%s.txt", name), &len);
        yc_harness_write(yc_harness_tmp("segval/labels/%s.txt", name), lbl, len);
        free(lbl);
    }
    const char *dir = yc_harness_tmp("segval/images");
    yc_dataset_options dopt = {.nc = 3, .quiet = true, .threads = 2};
    ck_assert_msg(yc_dataset_load(&dir, 1, &dopt, ds) == YC_OK, "%s", yc_last_error());
}
