/* Images and augmentation: letterbox geometry, box transforms of random_perspective, mosaic
 * placement, HSV, flips, mixup, reproducibility, decoding of odd and broken files, threads, and
 * timings of one sample.  test_augment_ref (this file built with YC_TEST_SHARED) loads two coco128
 * images as YOLOv5's validation loader does (cv2.imread, load_image, letterbox) against the
 * reference dumps in ../shared and exits 77 without them. */
#include "augment.h"
#include "image.h"
#include "log.h"
#include "safetensors.h"
#include "util.h"
#include "harness.h"
#include "yctest.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vips/vips.h>

#ifdef YC_TEST_SHARED
static const char *const ref_files[] = {
    "ref/train_step_io.safetensors", "ref/pretrained_eval_nms.safetensors",
    "data/coco128/images/train2017/000000000009.jpg",
    "data/coco128/images/train2017/000000000049.jpg", NULL};
#else

static yc_hyp default_hyp(void)
{
    yc_hyp h;
    yc_hyp_defaults(&h);
    return h;
}

/* An image whose pixel (y, x) is (x * 7 + y * 3, x * 5 + y * 11, x + y * 13) mod 256. */
static void pattern_image(yc_image *im, int h, int w)
{
    ck_assert_int_eq(yc_image_reserve(im, h, w), YC_OK);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im->data + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 7 + y * 3);
            p[1] = (uint8_t)(x * 5 + y * 11);
            p[2] = (uint8_t)(x + y * 13);
        }
}

static void solid_image(yc_image *im, int h, int w, uint8_t r, uint8_t g, uint8_t b)
{
    ck_assert_int_eq(yc_image_reserve(im, h, w), YC_OK);
    for (size_t i = 0; i < (size_t)h * w; i++) {
        im->data[3 * i] = r;
        im->data[3 * i + 1] = g;
        im->data[3 * i + 2] = b;
    }
}

static const uint8_t *px(const yc_image *im, int y, int x)
{
    return im->data + ((size_t)y * im->w + x) * 3;
}

/* ------------------------------------------------------------------------------------------------
 * Letterbox and load_image geometry
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_letterbox_geometry)
{
    yc_letterbox_info g;
    /* 640x480 (w x h) -> 320 without scaleup still shrinks: 320x240 with 40 + 40 rows */
    yc_letterbox_geometry(480, 640, 320, 320, false, false, false, 32, &g);
    ck_assert_double_eq(g.ratio_w, 0.5);
    ck_assert_int_eq(g.unpad_w, 320);
    ck_assert_int_eq(g.unpad_h, 240);
    ck_assert_int_eq(g.top, 40);
    /* the README's cases are letterboxes of load_image results */
    yc_letterbox_geometry(240, 320, 320, 320, false, false, false, 32, &g);
    ck_assert_int_eq(g.top, 40);
    ck_assert_int_eq(g.bottom, 40);
    ck_assert_int_eq(g.left, 0);
    ck_assert_int_eq(g.right, 0);
    ck_assert_double_eq(g.pad_h, 40.0);
    ck_assert_int_eq(g.out_h, 320);
    ck_assert_int_eq(g.out_w, 320);
    yc_letterbox_geometry(320, 243, 320, 320, false, false, false, 32, &g);
    ck_assert_int_eq(g.left, 38);
    ck_assert_int_eq(g.right, 39);
    ck_assert_double_eq(g.pad_w, 38.5);
    ck_assert_int_eq(g.out_w, 320);
    yc_letterbox_geometry(480, 640, 640, 640, false, false, false, 32, &g);
    ck_assert_int_eq(g.top, 80);
    ck_assert_int_eq(g.bottom, 80);
    yc_letterbox_geometry(640, 487, 640, 640, false, false, false, 32, &g);
    ck_assert_int_eq(g.left, 76);
    ck_assert_int_eq(g.right, 77);
    ck_assert_double_eq(g.pad_w, 76.5);
    /* the original 381x500 letterboxed straight to 320 with scaleup: round(243.84) = 244 */
    yc_letterbox_geometry(500, 381, 320, 320, false, false, true, 32, &g);
    ck_assert_double_eq(g.ratio_w, 0.64);
    ck_assert_int_eq(g.unpad_w, 244);
    ck_assert_int_eq(g.left, 38);
    ck_assert_int_eq(g.right, 38);
    /* docs/YOLOV5.md 5.5: a 640x480 image in a 512x672 (h x w) val batch: no scaling, 16 a side */
    yc_letterbox_geometry(480, 640, 512, 672, false, false, false, 32, &g);
    ck_assert_double_eq(g.ratio_h, 1.0);
    ck_assert_int_eq(g.top, 16);
    ck_assert_int_eq(g.bottom, 16);
    ck_assert_int_eq(g.left, 16);
    ck_assert_int_eq(g.right, 16);
    /* auto: minimum stride multiple (detect.py) */
    yc_letterbox_geometry(480, 640, 640, 640, true, false, true, 32, &g);
    ck_assert_int_eq(g.out_h, 480);
    ck_assert_int_eq(g.out_w, 640);
    yc_letterbox_geometry(500, 381, 640, 640, true, false, true, 32, &g);
    ck_assert_int_eq(g.unpad_w, 488);
    ck_assert_int_eq(g.left, 12);
    ck_assert_int_eq(g.right, 12);
    ck_assert_int_eq(g.out_w, 512);
    ck_assert_int_eq(g.out_h, 640);
    /* scaleFill: stretched, separate ratios, no padding */
    yc_letterbox_geometry(480, 640, 320, 320, false, true, true, 32, &g);
    ck_assert_double_eq(g.ratio_w, 0.5);
    ck_assert_double_eq_tol(g.ratio_h, 320.0 / 480, 1e-15);
    ck_assert_int_eq(g.top + g.bottom + g.left + g.right, 0);
    ck_assert_int_eq(g.out_h, 320);
    /* Python's round(2.5) = 2 (half to even); dw = 3 -> 1.5 -> left 1, right 2 */
    yc_letterbox_geometry(10, 5, 5, 5, false, false, true, 32, &g);
    ck_assert_int_eq(g.unpad_w, 2);
    ck_assert_int_eq(g.unpad_h, 5);
    ck_assert_int_eq(g.left, 1);
    ck_assert_int_eq(g.right, 2);
    /* odd total padding goes to the bottom */
    yc_letterbox_geometry(301, 320, 320, 320, false, false, false, 32, &g);
    ck_assert_int_eq(g.top, 9);
    ck_assert_int_eq(g.bottom, 10);
}
END_TEST

START_TEST(test_load_resize_sizes)
{
    yc_image full = YC_IMAGE_INIT, out = YC_IMAGE_INIT;
    yc_load_info li;
    struct {
        int h0, w0, sz, h, w;
    } cases[] = {
        {480, 640, 320, 240, 320}, {500, 381, 320, 320, 243}, {480, 640, 640, 480, 640},
        {500, 381, 640, 640, 487}, {100, 3000, 64, 2, 64},    {5000, 1, 64, 64, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pattern_image(&full, cases[i].h0, cases[i].w0);
        ck_assert_int_eq(yc_load_resize(&full, cases[i].sz, false, &out, &li), YC_OK);
        ck_assert_int_eq(li.h0, cases[i].h0);
        ck_assert_int_eq(li.w0, cases[i].w0);
        ck_assert_int_eq(li.h, cases[i].h);
        ck_assert_int_eq(li.w, cases[i].w);
        ck_assert_int_eq(out.h, cases[i].h);
        ck_assert_int_eq(out.w, cases[i].w);
    }
    /* r == 1: unchanged copy */
    pattern_image(&full, 480, 640);
    ck_assert_int_eq(yc_load_resize(&full, 640, true, &out, &li), YC_OK);
    ck_assert_mem_eq(out.data, full.data, 480 * 640 * 3);
    yc_image_free(&full);
    yc_image_free(&out);
}
END_TEST

START_TEST(test_resize_properties)
{
    yc_image a = YC_IMAGE_INIT, b = YC_IMAGE_INIT;
    /* constant images stay constant under every method and scale */
    solid_image(&a, 37, 53, 200, 17, 114);
    int sizes[][2] = {{10, 20}, {74, 106}, {18, 26}, {37, 53}, {111, 40}, {1, 1}};
    for (int m = 0; m < 2; m++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            ck_assert_int_eq(yc_image_resize(&a, &b, sizes[i][0], sizes[i][1],
                                             m ? YC_INTERP_AREA : YC_INTERP_LINEAR),
                             YC_OK);
            for (size_t k = 0; k < (size_t)b.h * b.w; k++) {
                ck_assert_int_eq(b.data[3 * k], 200);
                ck_assert_int_eq(b.data[3 * k + 1], 17);
                ck_assert_int_eq(b.data[3 * k + 2], 114);
            }
        }
    /* exact 2x down: (a + b + c + d + 2) >> 2 for LINEAR and AREA alike */
    pattern_image(&a, 8, 8);
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(yc_image_resize(&a, &b, 4, 4, m ? YC_INTERP_AREA : YC_INTERP_LINEAR),
                         YC_OK);
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 4; x++)
                for (int c = 0; c < 3; c++) {
                    int s = px(&a, 2 * y, 2 * x)[c] + px(&a, 2 * y, 2 * x + 1)[c] +
                            px(&a, 2 * y + 1, 2 * x)[c] + px(&a, 2 * y + 1, 2 * x + 1)[c];
                    ck_assert_int_eq(px(&b, y, x)[c], (s + 2) >> 2);
                }
    }
    /* 3x AREA: the mean rounded half to even */
    pattern_image(&a, 9, 9);
    ck_assert_int_eq(yc_image_resize(&a, &b, 3, 3, YC_INTERP_AREA), YC_OK);
    for (int c = 0; c < 3; c++) {
        int s = 0;
        for (int y = 3; y < 6; y++)
            for (int x = 3; x < 6; x++)
                s += px(&a, y, x)[c];
        ck_assert_int_eq(px(&b, 1, 1)[c], (int)lrintf((float)s * (1.f / 9)));
    }
    /* LINEAR 2x up of a 1-D ramp: source x = (dx + 0.5) / 2 - 0.5, weights 1/4, 3/4 */
    ck_assert_int_eq(yc_image_reserve(&a, 1, 2), YC_OK);
    memset(a.data, 0, 6);
    a.data[3] = 100;
    ck_assert_int_eq(yc_image_resize(&a, &b, 1, 4, YC_INTERP_LINEAR), YC_OK);
    ck_assert_int_eq(px(&b, 0, 0)[0], 0);
    ck_assert_int_eq(px(&b, 0, 1)[0], 25);
    ck_assert_int_eq(px(&b, 0, 2)[0], 75);
    ck_assert_int_eq(px(&b, 0, 3)[0], 100);
    yc_image_free(&a);
    yc_image_free(&b);
}
END_TEST

#endif /* !YC_TEST_SHARED */

/* ------------------------------------------------------------------------------------------------
 * The reference dumps: cv2.imread + load_image + letterbox of two coco128 images
 * ---------------------------------------------------------------------------------------------- */

typedef struct file_loader {
    /* image paths by index */
    const char *paths[8];
    /* label txt paths by index (NULL: none) */
    const char *labels[8];
    /* load_image size */
    int imgsz;
} file_loader;

static int read_label_file(const char *path, yc_labels *l)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return YC_OK;
    float c, x, y, w, h;
    while (fscanf(f, "%f %f %f %f %f", &c, &x, &y, &w, &h) == 5)
        yc_labels_push(l, c, x, y, w, h);
    fclose(f);
    return YC_OK;
}

static int file_load(void *ctx, int index, bool augment, yc_image *img, yc_image *tmp,
                     yc_load_info *info, yc_labels *labels)
{
    file_loader *fl = ctx;
    int st = yc_load_image(fl->paths[index], fl->imgsz, augment, tmp, img, info);
    if (st)
        return st;
    labels->n = 0;
    if (fl->labels[index])
        read_label_file(fl->labels[index], labels);
    return YC_OK;
}

#ifdef YC_TEST_SHARED

START_TEST(test_reference_letterbox)
{
    const char *sh = yc_test_shared_dir();
    char p[2][1100], l[2][1100], f320[1100], f640[1100];
    const char *names[2] = {"000000000009", "000000000049"};
    for (int i = 0; i < 2; i++) {
        snprintf(p[i], sizeof p[i], "%s/data/coco128/images/train2017/%s.jpg", sh, names[i]);
        snprintf(l[i], sizeof l[i], "%s/data/coco128/labels/train2017/%s.txt", sh, names[i]);
    }
    snprintf(f320, sizeof f320, "%s/ref/train_step_io.safetensors", sh);
    snprintf(f640, sizeof f640, "%s/ref/pretrained_eval_nms.safetensors", sh);
    const int expect_pad[2][2][4] = {{{40, 40, 0, 0}, {0, 0, 38, 39}},
                                     {{80, 80, 0, 0}, {0, 0, 76, 77}}};
    for (int si = 0; si < 2; si++) {
        int sz = si ? 640 : 320;
        yc_st_file *f;
        ck_assert_msg(yc_st_open(&f, si ? f640 : f320) == YC_OK, "%s", yc_last_error());
        size_t n = 2 * 3 * (size_t)sz * sz;
        uint8_t *ref = malloc(n);
        float *tg = NULL;
        int ntg = 0;
        if (!si) {
            const yc_st_tensor *t = yc_st_find(f, "input_uint8");
            ck_assert_ptr_nonnull(t);
            ck_assert_int_eq(yc_st_read_raw(f, t, ref), YC_OK);
            const yc_st_tensor *tt = yc_st_find(f, "targets");
            ck_assert_ptr_nonnull(tt);
            ntg = (int)tt->shape[0];
            tg = malloc(sizeof(float) * tt->numel);
            ck_assert_int_eq(yc_st_read_f32(f, tt, tg, tt->numel), YC_OK);
        } else {
            const yc_st_tensor *t = yc_st_find(f, "eval640_input");
            ck_assert_ptr_nonnull(t);
            float *x = malloc(n * sizeof(float));
            ck_assert_int_eq(yc_st_read_f32(f, t, x, n), YC_OK);
            for (size_t i = 0; i < n; i++)
                ref[i] = (uint8_t)lrintf(x[i] * 255.f);
            free(x);
        }
        yc_st_close(f);
        file_loader fl = {{p[0], p[1]}, {l[0], l[1]}, sz};
        yc_aug_scratch s = YC_AUG_SCRATCH_INIT;
        uint8_t *chw = malloc(3 * (size_t)sz * sz);
        yc_labels out = YC_LABELS_INIT;
        int row = 0;
        for (int b = 0; b < 2; b++) {
            yc_val_info vi;
            ck_assert_msg(yc_val_sample(&s, b, sz, sz, file_load, &fl, chw, &out, &vi) == YC_OK,
                          "%s", yc_last_error());
            ck_assert_int_eq(vi.lb.top, expect_pad[si][b][0]);
            ck_assert_int_eq(vi.lb.bottom, expect_pad[si][b][1]);
            ck_assert_int_eq(vi.lb.left, expect_pad[si][b][2]);
            ck_assert_int_eq(vi.lb.right, expect_pad[si][b][3]);
            const uint8_t *r = ref + (size_t)b * 3 * sz * sz;
            /* geometry: the border is 114 in both, the content edge rows/columns are not all 114
             * in the reference */
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < sz; y++)
                    for (int x = 0; x < sz; x++) {
                        bool border = y < vi.lb.top || y >= sz - vi.lb.bottom ||
                                      x < vi.lb.left || x >= sz - vi.lb.right;
                        size_t k = ((size_t)c * sz + y) * sz + x;
                        if (border) {
                            ck_assert_int_eq(r[k], 114);
                            ck_assert_int_eq(chw[k], 114);
                        }
                    }
            int edge_rows[2] = {vi.lb.top, sz - vi.lb.bottom - 1};
            for (int e = 0; e < 2; e++) {
                bool all114 = true;
                for (int x = vi.lb.left; x < sz - vi.lb.right; x++)
                    all114 &= r[(size_t)edge_rows[e] * sz + x] == 114;
                ck_assert(!all114);
            }
            double sum = 0;
            int mx = 0;
            long ndiff = 0;
            for (size_t i = 0; i < 3 * (size_t)sz * sz; i++) {
                int d = abs((int)chw[i] - (int)r[i]);
                sum += d;
                mx = d > mx ? d : mx;
                ndiff += d != 0;
            }
            double mean = sum / (3.0 * sz * sz);
            printf("reference %s at %d: loaded %dx%d -> %dx%d, pad t%d b%d l%d r%d; |diff| mean "
                   "%.5f max %d, %ld of %d values differ\n",
                   names[b], sz, vi.w0, vi.h0, vi.w, vi.h, vi.lb.top, vi.lb.bottom, vi.lb.left,
                   vi.lb.right, mean, mx, ndiff, 3 * sz * sz);
            /* measured: every value equal (libvips and cv2 on Debian's libjpeg-turbo); one level
             * allowed for another JPEG decoder's rounding */
            ck_assert_msg(mx <= 1, "%s at %d: |diff| max %d, mean %.5f", names[b], sz, mx, mean);
            /* labels against the dumped targets (320 only) */
            if (tg) {
                for (int k = 0; k < out.n; k++, row++) {
                    ck_assert_int_lt(row, ntg);
                    ck_assert_float_eq(tg[6 * row], (float)b);
                    for (int j = 0; j < 5; j++)
                        ck_assert_float_eq_tol(out.v[5 * k + j], tg[6 * row + 1 + j], 2e-6);
                }
            }
        }
        if (tg)
            ck_assert_int_eq(row, ntg);
        free(tg);
        free(chw);
        free(ref);
        yc_labels_free(&out);
        yc_aug_scratch_free(&s);
    }
}
END_TEST

#else /* YC_TEST_SHARED */

/* ------------------------------------------------------------------------------------------------
 * random_perspective
 * ---------------------------------------------------------------------------------------------- */

static yc_persp_draw still(void)
{
    yc_persp_draw d = {0, 0, 0, 1, 0, 0, 0.5, 0.5};
    return d;
}

static void box_of(yc_labels *l, float x1, float y1, float x2, float y2)
{
    l->n = 0;
    yc_labels_push(l, 3, x1, y1, x2, y2);
}

static void assert_box(const yc_labels *l, int i, double x1, double y1, double x2, double y2)
{
    const float *r = l->v + 5 * i;
    ck_assert_double_eq_tol(r[1], x1, 1e-4);
    ck_assert_double_eq_tol(r[2], y1, 1e-4);
    ck_assert_double_eq_tol(r[3], x2, 1e-4);
    ck_assert_double_eq_tol(r[4], y2, 1e-4);
}

START_TEST(test_perspective_boxes)
{
    double M[9];
    yc_labels l = YC_LABELS_INIT;
    yc_persp_draw d;

    /* identity */
    d = still();
    yc_persp_matrix(&d, 100, 200, 100, 200, M);
    for (int i = 0; i < 9; i++)
        ck_assert_double_eq(M[i], i % 4 == 0 ? 1 : 0);

    /* pure translation: x' = x - 100 + 0.6 * 200 = x + 20, y' = y - 50 + 0.4 * 100 = y - 10 */
    d = still();
    d.tx = 0.6;
    d.ty = 0.4;
    yc_persp_matrix(&d, 100, 200, 100, 200, M);
    box_of(&l, 10, 20, 50, 60);
    yc_warp_boxes(&l, M, false, d.scale, 100, 200);
    ck_assert_int_eq(l.n, 1);
    ck_assert_float_eq(l.v[0], 3);
    assert_box(&l, 0, 30, 10, 70, 50);
    /* clipped at the left and top edges: x' = x - 30, y' = y - 10 */
    box_of(&l, 10, 0, 50, 20);
    d.tx = 0.35;
    yc_persp_matrix(&d, 100, 200, 100, 200, M);
    yc_warp_boxes(&l, M, false, d.scale, 100, 200);
    ck_assert_int_eq(l.n, 1);
    assert_box(&l, 0, 0, 0, 20, 10);

    /* scale 2 about the centre of a 100x100 image */
    d = still();
    d.scale = 2;
    yc_persp_matrix(&d, 100, 100, 100, 100, M);
    box_of(&l, 40, 40, 60, 60);
    yc_warp_boxes(&l, M, false, d.scale, 100, 100);
    ck_assert_int_eq(l.n, 1);
    assert_box(&l, 0, 30, 30, 70, 70);

    /* 90 degrees (counter-clockwise on screen): x' = y, y' = 100 - x */
    d = still();
    d.angle = 90;
    yc_persp_matrix(&d, 100, 100, 100, 100, M);
    box_of(&l, 10, 20, 30, 60);
    yc_warp_boxes(&l, M, false, d.scale, 100, 100);
    ck_assert_int_eq(l.n, 1);
    assert_box(&l, 0, 20, 70, 60, 90);

    /* shear 45 degrees in x: x' = x + (y - 50), corners give x in [30, 70] */
    d = still();
    d.shx = 45;
    yc_persp_matrix(&d, 100, 100, 100, 100, M);
    box_of(&l, 40, 40, 60, 60);
    yc_warp_boxes(&l, M, false, d.scale, 100, 100);
    ck_assert_int_eq(l.n, 1);
    assert_box(&l, 0, 30, 40, 70, 60);

    /* mosaic-style border: 2s canvas to s output, centre (s, s) -> (s/2, s/2) with translate 0.5 */
    d = still();
    yc_persp_matrix(&d, 128, 128, 64, 64, M);
    box_of(&l, 40, 50, 80, 70);
    yc_warp_boxes(&l, M, false, 1, 64, 64);
    assert_box(&l, 0, 8, 18, 48, 38);

    /* perspective: z' = px x + py y + 1 divides */
    d = still();
    d.px = 0.001;
    yc_persp_matrix(&d, 100, 100, 100, 100, M);
    box_of(&l, 50, 50, 60, 60);
    yc_warp_boxes(&l, M, true, d.scale, 100, 100);
    /* centred coordinates (0..10): z = 1 + 0.001 x', x = x'/z + 50 */
    assert_box(&l, 0, 50, 50, 50 + 10 / 1.01, 50 + 10 / 1.0);

    /* boxes warped out of the image or squeezed are dropped, the others keep their order */
    d = still();
    d.tx = 0.9;
    yc_persp_matrix(&d, 100, 100, 100, 100, M);
    l.n = 0;
    yc_labels_push(&l, 1, 10, 10, 20, 20);
    yc_labels_push(&l, 2, 70, 10, 90, 20);
    yc_labels_push(&l, 3, 5, 40, 15, 50);
    yc_warp_boxes(&l, M, false, 1, 100, 100);
    ck_assert_int_eq(l.n, 2);
    ck_assert_float_eq(l.v[0], 1);
    ck_assert_float_eq(l.v[5], 3);
    assert_box(&l, 0, 50, 10, 60, 20);
    yc_labels_free(&l);
}
END_TEST

START_TEST(test_box_candidates)
{
    ck_assert(yc_box_candidate(10, 10, 10, 10, 0.1));
    /* w, h must exceed 2 pixels */
    ck_assert(!yc_box_candidate(10, 10, 2, 10, 0.1));
    ck_assert(yc_box_candidate(10, 10, 2.001, 10, 0.1));
    ck_assert(!yc_box_candidate(10, 10, 10, 2, 0.1));
    /* area ratio must exceed 0.1 of the scaled original */
    ck_assert(!yc_box_candidate(100, 100, 25, 40, 0.1));
    ck_assert(yc_box_candidate(100, 100, 25, 40.01, 0.1));
    ck_assert(!yc_box_candidate(100, 100, 10, 99, 0.1));
    /* aspect ratio below 100 either way */
    ck_assert(!yc_box_candidate(3, 300, 3, 300, 0.1));
    ck_assert(yc_box_candidate(3, 297, 3, 297, 0.1));
    ck_assert(!yc_box_candidate(300, 3, 300, 3, 0.1));
    /* degenerate original (zero area): eps keeps the ratio finite and large */
    ck_assert(yc_box_candidate(0, 0, 5, 5, 0.1));
}
END_TEST

START_TEST(test_warp_pixels)
{
    yc_image a = YC_IMAGE_INIT, b = YC_IMAGE_INIT;
    double M[9];
    yc_persp_draw d = still();
    pattern_image(&a, 100, 100);
    /* integer translation (+20, -10): exact copy, 114 where nothing maps */
    d.tx = 0.7;
    d.ty = 0.4;
    yc_persp_matrix(&d, 100, 100, 100, 100, M);
    ck_assert_int_eq(yc_warp(&a, &b, 100, 100, M, false), YC_OK);
    for (int y = 0; y < 100; y++)
        for (int x = 0; x < 100; x++) {
            int sx = x - 20, sy = y + 10;
            for (int c = 0; c < 3; c++) {
                int want = (sx >= 0 && sx < 100 && sy < 100) ? px(&a, sy, sx)[c] : 114;
                ck_assert_int_eq(px(&b, y, x)[c], want);
            }
        }
    /* the same through warpPerspective's code path */
    ck_assert_int_eq(yc_warp(&a, &b, 100, 100, M, true), YC_OK);
    ck_assert_int_eq(px(&b, 50, 50)[1], px(&a, 60, 30)[1]);
    ck_assert_int_eq(px(&b, 95, 50)[0], 114);
    /* 90 degrees: output (x', y') = input (100 - y', x'); row 0 maps to column 100: border */
    d = still();
    d.angle = 90;
    yc_persp_matrix(&d, 100, 100, 100, 100, M);
    ck_assert_int_eq(yc_warp(&a, &b, 100, 100, M, false), YC_OK);
    for (int y = 1; y < 100; y++)
        for (int x = 0; x < 100; x++)
            for (int c = 0; c < 3; c++)
                ck_assert_int_eq(px(&b, y, x)[c], px(&a, x, 100 - y)[c]);
    for (int x = 0; x < 100; x++)
        ck_assert_int_eq(px(&b, 0, x)[0], 114);
    /* half-pixel shift: the average of two neighbours (weights 16/32 each) */
    d = still();
    d.tx = 0.5 + 0.5 / 100;
    yc_persp_matrix(&d, 100, 100, 100, 100, M);
    ck_assert_int_eq(yc_warp(&a, &b, 100, 100, M, false), YC_OK);
    for (int c = 0; c < 3; c++) {
        int l = px(&a, 40, 29)[c], r = px(&a, 40, 30)[c];
        ck_assert_int_eq(px(&b, 40, 30)[c], (l * 16384 + r * 16384 + 16384) >> 15);
    }
    /* a white image stays white inside (no overflow), output in [0, 255] by construction */
    solid_image(&a, 64, 64, 255, 255, 255);
    d = still();
    d.angle = 33;
    d.scale = 0.77;
    d.shx = 7;
    yc_persp_matrix(&d, 64, 64, 64, 64, M);
    ck_assert_int_eq(yc_warp(&a, &b, 64, 64, M, false), YC_OK);
    ck_assert_int_eq(px(&b, 32, 32)[0], 255);
    yc_image_free(&a);
    yc_image_free(&b);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Mosaic
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_mosaic_place)
{
    const int s = 64;
    yc_image canvas = YC_IMAGE_INIT, t[4] = {YC_IMAGE_INIT, YC_IMAGE_INIT, YC_IMAGE_INIT,
                                             YC_IMAGE_INIT};
    yc_labels tl = YC_LABELS_INIT, out = YC_LABELS_INIT;
    const int sizes[4][2] = {{30, 40}, {64, 64}, {50, 20}, {80, 100}}; /* h, w */
    ck_assert_int_eq(yc_image_reserve(&canvas, 2 * s, 2 * s), YC_OK);
    yc_image_fill(&canvas, 114);
    for (int i = 0; i < 4; i++) {
        solid_image(&t[i], sizes[i][0], sizes[i][1], (uint8_t)(10 + i), (uint8_t)(20 + i),
                    (uint8_t)(30 + i));
        tl.n = 0;
        yc_labels_push(&tl, (float)i, 0.5f, 0.5f, 1.f, 1.f);
        if (i == 3)
            yc_labels_push(&tl, 9, 0.9f, 0.9f, 0.1f, 0.1f);
        ck_assert_int_eq(yc_mosaic_place(&canvas, s, 50, 70, i, &t[i], &tl, &out), YC_OK);
    }
    ck_assert_int_eq(out.n, 5);
    assert_box(&out, 0, 10, 40, 50, 70);
    assert_box(&out, 1, 50, 6, 114, 70);
    assert_box(&out, 2, 30, 70, 50, 120);
    assert_box(&out, 3, 50, 70, 128, 128);
    assert_box(&out, 4, 128, 128, 128, 128);
    /* pixels: each tile's region, 114 elsewhere */
    ck_assert_int_eq(px(&canvas, 40, 10)[0], 10);
    ck_assert_int_eq(px(&canvas, 69, 49)[0], 10);
    ck_assert_int_eq(px(&canvas, 39, 10)[0], 114);
    ck_assert_int_eq(px(&canvas, 40, 9)[0], 114);
    ck_assert_int_eq(px(&canvas, 6, 50)[0], 11);
    ck_assert_int_eq(px(&canvas, 5, 50)[0], 114);
    ck_assert_int_eq(px(&canvas, 119, 30)[0], 12);
    ck_assert_int_eq(px(&canvas, 120, 30)[0], 114);
    ck_assert_int_eq(px(&canvas, 127, 127)[0], 13);
    ck_assert_int_eq(px(&canvas, 0, 0)[0], 114);

    /* a tile cropped on the left and top: xc = 30, yc = 20, 40x30 tile -> b = (10, 10, 40, 30) */
    yc_image_fill(&canvas, 114);
    out.n = 0;
    pattern_image(&t[0], 30, 40);
    tl.n = 0;
    yc_labels_push(&tl, 0, 0.5f, 0.5f, 1.f, 1.f);
    ck_assert_int_eq(yc_mosaic_place(&canvas, s, 30, 20, 0, &t[0], &tl, &out), YC_OK);
    assert_box(&out, 0, 0, 0, 30, 20);
    ck_assert_mem_eq(px(&canvas, 0, 0), px(&t[0], 10, 10), 3);
    ck_assert_mem_eq(px(&canvas, 19, 29), px(&t[0], 29, 39), 3);
    for (int i = 0; i < 4; i++)
        yc_image_free(&t[i]);
    yc_image_free(&canvas);
    yc_labels_free(&tl);
    yc_labels_free(&out);
}
END_TEST

/* Synthetic dataset: image i is sizes[i] (h, w) of colour (40 i + 20, 250 - 30 i, 50 i + 5) with
 * one label (class i) covering its central half. */
typedef struct synth {
    /* sizes (h, w) */
    int sizes[8][2];
    /* images */
    int n;
    /* loads counted (to check the loader is called as expected) */
    int loads;
} synth;

static int synth_load(void *ctx, int index, bool augment, yc_image *img, yc_image *tmp,
                      yc_load_info *info, yc_labels *labels)
{
    synth *sy = ctx;
    (void)augment;
    (void)tmp;
    if (index < 0 || index >= sy->n)
        return yc_error("synthetic index %d out of range", index);
    sy->loads++;
    int h = sy->sizes[index][0], w = sy->sizes[index][1];
    int st = yc_image_reserve(img, h, w);
    if (st)
        return st;
    for (size_t k = 0; k < (size_t)h * w; k++) {
        img->data[3 * k] = (uint8_t)(40 * index + 20);
        img->data[3 * k + 1] = (uint8_t)(250 - 30 * index);
        img->data[3 * k + 2] = (uint8_t)(50 * index + 5);
    }
    labels->n = 0;
    yc_labels_push(labels, (float)index, 0.5f, 0.5f, 0.5f, 0.5f);
    info->h0 = info->h = h;
    info->w0 = info->w = w;
    return YC_OK;
}

START_TEST(test_load_mosaic_replay)
{
    const int s = 64;
    synth sy = {{{64, 48}, {40, 64}, {64, 64}, {30, 50}, {64, 20}}, 5, 0};
    yc_hyp hyp = default_hyp();
    hyp.degrees = hyp.translate = hyp.scale = hyp.shear = hyp.perspective = 0;
    yc_sample_params p = {&hyp, s, sy.n, NULL, 0, 0, 0};
    yc_aug_scratch sc = YC_AUG_SCRATCH_INIT;
    yc_image out = YC_IMAGE_INIT, canvas = YC_IMAGE_INIT, tile = YC_IMAGE_INIT, tmp = YC_IMAGE_INIT;
    yc_labels labels = YC_LABELS_INIT, expect = YC_LABELS_INIT, tl = YC_LABELS_INIT;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        yc_rng r1, r2;
        yc_rng_seed(&r1, seed, 7);
        yc_rng_seed(&r2, seed, 7);
        sy.loads = 0;
        ck_assert_msg(yc_load_mosaic(&sc, &p, 2, synth_load, &sy, &r1, &out, &labels) == YC_OK,
                      "%s", yc_last_error());
        ck_assert_int_eq(sy.loads, 4);
        ck_assert_int_eq(out.h, s);
        ck_assert_int_eq(out.w, s);
        /* replay the draws: yc, xc, 3 choices, Fisher-Yates from the end */
        int yc = (int)yc_rng_range(&r2, s / 2, 3 * s / 2);
        int xc = (int)yc_rng_range(&r2, s / 2, 3 * s / 2);
        ck_assert(yc >= 32 && yc < 96 && xc >= 32 && xc < 96);
        int idx[4] = {2, 0, 0, 0};
        for (int k = 1; k < 4; k++)
            idx[k] = (int)yc_rng_below(&r2, (uint32_t)sy.n);
        for (int k = 3; k >= 1; k--) {
            int j = (int)yc_rng_below(&r2, (uint32_t)(k + 1)), t = idx[k];
            idx[k] = idx[j];
            idx[j] = t;
        }
        ck_assert_int_eq(yc_image_reserve(&canvas, 2 * s, 2 * s), YC_OK);
        yc_image_fill(&canvas, 114);
        expect.n = 0;
        for (int k = 0; k < 4; k++) {
            yc_load_info li;
            synth_load(&sy, idx[k], true, &tile, &tmp, &li, &tl);
            ck_assert_int_eq(yc_mosaic_place(&canvas, s, xc, yc, k, &tile, &tl, &expect), YC_OK);
        }
        /* with no scale/rotation/translation jitter the output is the centre crop:
         * out(x, y) = canvas(x + s/2, y + s/2), boxes shifted by -s/2, clipped, filtered */
        for (int y = 0; y < s; y++)
            ck_assert_mem_eq(px(&out, y, 0), px(&canvas, y + s / 2, s / 2), (size_t)s * 3);
        int k = 0;
        for (int i = 0; i < expect.n; i++) {
            float *e = expect.v + 5 * i;
            double x1 = fmin(fmax(e[1] - 32.0, 0), s), x2 = fmin(fmax(e[3] - 32.0, 0), s);
            double y1 = fmin(fmax(e[2] - 32.0, 0), s), y2 = fmin(fmax(e[4] - 32.0, 0), s);
            double w1 = e[3] - e[1], h1 = e[4] - e[2], w2 = x2 - x1, h2 = y2 - y1;
            bool keep = w2 > 2 && h2 > 2 && w2 * h2 / (w1 * h1 + 1e-16) > 0.1 &&
                        fmax(w2 / (h2 + 1e-16), h2 / (w2 + 1e-16)) < 100;
            if (!keep)
                continue;
            ck_assert_int_lt(k, labels.n);
            ck_assert_float_eq(labels.v[5 * k], e[0]);
            assert_box(&labels, k, x1, y1, x2, y2);
            /* the box centre shows its image's colour */
            int cls = (int)e[0];
            const uint8_t *c = px(&out, (int)((y1 + y2) / 2), (int)((x1 + x2) / 2));
            ck_assert_int_eq(c[0], 40 * cls + 20);
            k++;
        }
        ck_assert_int_eq(k, labels.n);
    }
    yc_image_free(&out);
    yc_image_free(&canvas);
    yc_image_free(&tile);
    yc_image_free(&tmp);
    yc_labels_free(&labels);
    yc_labels_free(&expect);
    yc_labels_free(&tl);
    yc_aug_scratch_free(&sc);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * HSV, flips, mixup
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_hsv)
{
    /* OpenCV 8-bit RGB -> HSV, computed by hand with its tables:
     * sdiv[v] = round(1044480 / v), hdiv[d] = round(737280 / (6 d)); e.g. green:
     * h = (b - r + 2 diff) = 510, (510 * 482 + 2048) >> 12 = 60 */
    struct {
        uint8_t rgb[3], hsv[3];
    } c[] = {
        {{255, 0, 0}, {0, 255, 255}},     {{0, 255, 0}, {60, 255, 255}},
        {{0, 0, 255}, {120, 255, 255}},   {{128, 128, 128}, {0, 0, 128}},
        {{255, 128, 0}, {15, 255, 255}},  {{10, 20, 30}, {105, 170, 30}},
        {{255, 0, 10}, {179, 255, 255}},  {{0, 0, 0}, {0, 0, 0}},
        {{255, 255, 255}, {0, 0, 255}},   {{200, 100, 50}, {10, 191, 200}},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint8_t hsv[3];
        yc_rgb_to_hsv8(c[i].rgb, hsv);
        ck_assert_msg(hsv[0] == c[i].hsv[0] && hsv[1] == c[i].hsv[1] && hsv[2] == c[i].hsv[2],
                      "rgb %d,%d,%d -> hsv %d,%d,%d, expected %d,%d,%d", c[i].rgb[0],
                      c[i].rgb[1], c[i].rgb[2], hsv[0], hsv[1], hsv[2], c[i].hsv[0],
                      c[i].hsv[1], c[i].hsv[2]);
    }
    /* HSV -> RGB: primaries exact; round trips within the error of 2-degree hue steps and
     * OpenCV's truncation */
    uint8_t rgb[3];
    const uint8_t red[3] = {0, 255, 255}, green[3] = {60, 255, 255}, blue[3] = {120, 255, 255};
    yc_hsv8_to_rgb(red, rgb);
    ck_assert(rgb[0] == 255 && rgb[1] == 0 && rgb[2] == 0);
    yc_hsv8_to_rgb(green, rgb);
    ck_assert(rgb[0] == 0 && rgb[1] == 255 && rgb[2] == 0);
    yc_hsv8_to_rgb(blue, rgb);
    ck_assert(rgb[0] == 0 && rgb[1] == 0 && rgb[2] == 255);
    const uint8_t black[3] = {77, 200, 0};
    yc_hsv8_to_rgb(black, rgb);
    ck_assert(rgb[0] == 0 && rgb[1] == 0 && rgb[2] == 0);
    for (int r = 0; r < 256; r += 15)
        for (int g = 0; g < 256; g += 17)
            for (int b = 0; b < 256; b += 13) {
                uint8_t in[3] = {(uint8_t)r, (uint8_t)g, (uint8_t)b}, hsv[3], back[3];
                yc_rgb_to_hsv8(in, hsv);
                ck_assert_int_le(hsv[0], 180);
                yc_hsv8_to_rgb(hsv, back);
                for (int k = 0; k < 3; k++)
                    ck_assert_int_le(abs(back[k] - in[k]), 6);
            }
    /* the tables: hue = (x g) mod 180, sat/val = clip(x g, 0, 255), truncated */
    uint8_t lut[3][256];
    const double g1[3] = {1.5, 0.5, 2.0};
    yc_hsv_luts(g1, lut);
    ck_assert_int_eq(lut[0][100], 150);
    ck_assert_int_eq(lut[0][150], 45);
    ck_assert_int_eq(lut[0][179], 88);
    ck_assert_int_eq(lut[1][255], 127);
    ck_assert_int_eq(lut[1][3], 1);
    ck_assert_int_eq(lut[2][100], 200);
    ck_assert_int_eq(lut[2][200], 255);
    const double g2[3] = {0.985, 1.7, 0.6};
    yc_hsv_luts(g2, lut);
    ck_assert_int_eq(lut[0][179], 176);
    ck_assert_int_eq(lut[0][1], 0);
    ck_assert_int_eq(lut[1][100], 170);
    ck_assert_int_eq(lut[1][151], 255);
    ck_assert_int_eq(lut[2][255], 153);
    ck_assert_int_eq(lut[2][1], 0);
    /* unit gains change no hue, saturation or value; the image changes only by OpenCV's
     * HSV -> RGB truncation */
    yc_image im = YC_IMAGE_INIT, orig = YC_IMAGE_INIT;
    pattern_image(&im, 16, 16);
    yc_image_copy(&orig, &im);
    const double one[3] = {1, 1, 1};
    yc_hsv_apply(&im, one);
    for (size_t i = 0; i < 16 * 16 * 3; i++)
        ck_assert_int_le(abs(im.data[i] - orig.data[i]), 6);
    /* zero gains: nothing drawn, nothing changed */
    yc_rng rng, rng0;
    yc_rng_seed(&rng, 5, 0);
    rng0 = rng;
    yc_image_copy(&im, &orig);
    yc_augment_hsv(&im, 0, 0, 0, &rng);
    ck_assert_mem_eq(im.data, orig.data, 16 * 16 * 3);
    ck_assert(rng.state == rng0.state);
    yc_image_free(&im);
    yc_image_free(&orig);
}
END_TEST

START_TEST(test_flips)
{
    yc_image im = YC_IMAGE_INIT, orig = YC_IMAGE_INIT;
    yc_labels l = YC_LABELS_INIT;
    pattern_image(&im, 7, 9);
    yc_image_copy(&orig, &im);
    yc_labels_push(&l, 1, 0.25f, 0.125f, 0.1f, 0.2f);
    yc_flip_lr(&im, &l);
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 9; x++)
            ck_assert_mem_eq(px(&im, y, x), px(&orig, y, 8 - x), 3);
    ck_assert_float_eq(l.v[1], 0.75f);
    ck_assert_float_eq(l.v[2], 0.125f);
    ck_assert_float_eq(l.v[3], 0.1f);
    yc_flip_ud(&im, &l);
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 9; x++)
            ck_assert_mem_eq(px(&im, y, x), px(&orig, 6 - y, 8 - x), 3);
    ck_assert_float_eq(l.v[2], 0.875f);
    ck_assert_float_eq(l.v[4], 0.2f);
    yc_flip_ud(&im, NULL);
    yc_flip_lr(&im, NULL);
    ck_assert_mem_eq(im.data, orig.data, 7 * 9 * 3);
    yc_image_free(&im);
    yc_image_free(&orig);
    yc_labels_free(&l);
}
END_TEST

START_TEST(test_mixup)
{
    yc_image a = YC_IMAGE_INIT, b = YC_IMAGE_INIT;
    yc_labels la = YC_LABELS_INIT, lb = YC_LABELS_INIT;
    solid_image(&a, 4, 4, 200, 0, 255);
    solid_image(&b, 4, 4, 100, 255, 255);
    yc_labels_push(&la, 1, 1, 2, 3, 4);
    yc_labels_push(&lb, 2, 5, 6, 7, 8);
    yc_labels_push(&lb, 3, 9, 10, 11, 12);
    ck_assert_int_eq(yc_mixup(&a, &la, &b, &lb, 0.3), YC_OK);
    /* 200 * 0.3 + 100 * 0.7 = 130 (truncated), 255 * 0.7 = 178.5 -> 178 */
    ck_assert_int_eq(a.data[0], 130);
    ck_assert_int_eq(a.data[1], 178);
    ck_assert_int_ge(a.data[2], 254);
    ck_assert_int_eq(la.n, 3);
    ck_assert_float_eq(la.v[0], 1);
    ck_assert_float_eq(la.v[5], 2);
    ck_assert_float_eq(la.v[10], 3);
    ck_assert_float_eq(la.v[14], 12);
    /* size mismatch is an error */
    solid_image(&b, 4, 5, 0, 0, 0);
    ck_assert_int_ne(yc_mixup(&a, &la, &b, &lb, 0.5), YC_OK);
    /* Beta(32, 32): mean 1/2, variance 1/(4 * 65) */
    yc_rng rng;
    yc_rng_seed(&rng, 11, 3);
    double s = 0, s2 = 0;
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        double r = yc_rng_beta(&rng, 32, 32);
        ck_assert(r > 0 && r < 1);
        s += r;
        s2 += r * r;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    ck_assert_double_eq_tol(mean, 0.5, 0.003);
    ck_assert_double_eq_tol(var, 1.0 / 260, 0.0003);
    /* Gamma(k): mean k, also for k < 1 */
    double g = 0;
    for (int i = 0; i < n; i++)
        g += yc_rng_gamma(&rng, 0.5);
    ck_assert_double_eq_tol(g / n, 0.5, 0.02);
    yc_image_free(&a);
    yc_image_free(&b);
    yc_labels_free(&la);
    yc_labels_free(&lb);
}
END_TEST

START_TEST(test_label_conversions)
{
    yc_labels l = YC_LABELS_INIT;
    yc_labels_push(&l, 4, 0.5f, 0.25f, 0.5f, 0.5f);
    yc_labels_xywhn_to_xyxy(&l, 200, 100, 10, -5);
    assert_box(&l, 0, 60, -5, 160, 45);
    yc_labels_xyxy_to_xywhn(&l, 200, 100, true, 1e-3);
    /* y1 clipped to 0: centre (0 + 45) / 2 / 100 */
    ck_assert_float_eq_tol(l.v[1], 0.55f, 1e-6);
    ck_assert_float_eq_tol(l.v[2], 0.225f, 1e-6);
    ck_assert_float_eq_tol(l.v[3], 0.5f, 1e-6);
    ck_assert_float_eq_tol(l.v[4], 0.45f, 1e-6);
    l.n = 0;
    yc_labels_push(&l, 0, 0, 0, 200, 100);
    yc_labels_xyxy_to_xywhn(&l, 200, 100, true, 1e-3);
    ck_assert_float_eq_tol(l.v[3], (float)(199.999 / 200), 1e-6);
    ck_assert_float_lt(l.v[1] + l.v[3] / 2, 1.0f);
    yc_labels_free(&l);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Whole samples
 * ---------------------------------------------------------------------------------------------- */

static void run_sample(const yc_hyp *hyp, uint64_t seed, int rect_h, int rect_w, uint8_t *chw,
                       yc_labels *out, int *oh, int *ow)
{
    synth sy = {{{64, 48}, {40, 64}, {64, 64}, {30, 50}, {64, 20}, {17, 64}}, 6, 0};
    yc_sample_params p = {hyp, 64, sy.n, NULL, 0, rect_h, rect_w};
    yc_aug_scratch sc = YC_AUG_SCRATCH_INIT;
    yc_rng rng;
    yc_rng_seed(&rng, seed, 42);
    ck_assert_msg(yc_train_sample(&sc, &p, 3, synth_load, &sy, &rng, chw, oh, ow, out) == YC_OK,
                  "%s", yc_last_error());
    yc_aug_scratch_free(&sc);
}

START_TEST(test_reproducible)
{
    yc_hyp hyp = default_hyp();
    hyp.mixup = 0.5;
    hyp.degrees = 10;
    hyp.shear = 3;
    uint8_t a[3 * 64 * 64], b[3 * 64 * 64];
    yc_labels la = YC_LABELS_INIT, lb = YC_LABELS_INIT;
    int oh, ow, differing = 0;
    for (uint64_t seed = 0; seed < 12; seed++) {
        run_sample(&hyp, seed, 0, 0, a, &la, &oh, &ow);
        ck_assert_int_eq(oh, 64);
        ck_assert_int_eq(ow, 64);
        run_sample(&hyp, seed, 0, 0, b, &lb, &oh, &ow);
        ck_assert_mem_eq(a, b, sizeof a);
        ck_assert_int_eq(la.n, lb.n);
        if (la.n)
            ck_assert_mem_eq(la.v, lb.v, sizeof(float) * 5 * la.n);
        for (int i = 0; i < la.n; i++) {
            ck_assert(la.v[5 * i] >= 0 && la.v[5 * i] < 6);
            for (int j = 1; j < 5; j++)
                ck_assert(la.v[5 * i + j] >= 0 && la.v[5 * i + j] <= 1);
        }
        run_sample(&hyp, seed + 1000, 0, 0, b, &lb, &oh, &ow);
        differing += memcmp(a, b, sizeof a) != 0;
    }
    ck_assert_int_eq(differing, 12);
    /* letterbox path (mosaic off) and rect training shapes */
    hyp.mosaic = 0;
    run_sample(&hyp, 3, 0, 0, a, &la, &oh, &ow);
    ck_assert_int_eq(oh, 64);
    ck_assert_int_eq(ow, 64);
    run_sample(&hyp, 3, 48, 64, a, &la, &oh, &ow);
    ck_assert_int_eq(oh, 48);
    ck_assert_int_eq(ow, 64);
    yc_labels_free(&la);
    yc_labels_free(&lb);
}
END_TEST

START_TEST(test_nonmosaic_labels)
{
    /* no jitter: the letterboxed label stays where the letterbox puts it */
    yc_hyp hyp = default_hyp();
    hyp.mosaic = 0;
    hyp.degrees = hyp.translate = hyp.scale = hyp.shear = hyp.perspective = 0;
    hyp.hsv_h = hyp.hsv_s = hyp.hsv_v = 0;
    hyp.fliplr = hyp.flipud = 0;
    uint8_t chw[3 * 64 * 64];
    yc_labels l = YC_LABELS_INIT;
    int oh, ow;
    /* image 3 is 30x50 (h x w): scaled up by 64/50 to 38x64 (round(38.4)), 13 rows on top */
    run_sample(&hyp, 1, 0, 0, chw, &l, &oh, &ow);
    ck_assert_int_eq(l.n, 1);
    ck_assert_float_eq(l.v[0], 3);
    ck_assert_float_eq_tol(l.v[1], 0.5f, 1e-6);
    ck_assert_float_eq_tol(l.v[2], 0.5f, 1e-2);
    ck_assert_float_eq_tol(l.v[3], 0.5f, 1e-6);
    ck_assert_float_eq_tol(l.v[4], 0.5f * 38.4f / 64, 1e-6);
    ck_assert_int_eq(chw[0], 114);
    ck_assert_int_eq(chw[32 * 64 + 32], 40 * 3 + 20);
    yc_labels_free(&l);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Decoding
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_decode_formats)
{
    yc_image im = YC_IMAGE_INIT, back = YC_IMAGE_INIT;
    yc_decode_info di;
    pattern_image(&im, 23, 31);
    /* PNG round trip is lossless */
    ck_assert_int_eq(yc_image_save(&im, yc_harness_tmp("p.png"), 0), YC_OK);
    ck_assert_int_eq(yc_image_decode(yc_harness_tmp("p.png"), &back, NULL, &di), YC_OK);
    ck_assert_int_eq(back.h, 23);
    ck_assert_int_eq(back.w, 31);
    ck_assert_mem_eq(back.data, im.data, 23 * 31 * 3);
    ck_assert(!di.damaged);
    ck_assert_int_eq(di.orientation, 1);

    /* gray, gray+alpha, RGBA and 16-bit files made with libvips */
    VipsImage *rgb = vips_image_new_from_memory(im.data, 23 * 31 * 3, 31, 23, 3, VIPS_FORMAT_UCHAR);
    VipsImage *gray, *alpha, *ga, *rgba, *u16, *u16b;
    ck_assert_ptr_nonnull(rgb);
    ck_assert_int_eq(vips_extract_band(rgb, &gray, 1, NULL), 0);
    ck_assert_int_eq(vips_black(&alpha, 31, 23, NULL), 0);
    VipsImage *ga_in[2] = {gray, alpha}, *rgba_in[2] = {rgb, alpha};
    ck_assert_int_eq(vips_bandjoin(ga_in, &ga, 2, NULL), 0);
    ck_assert_int_eq(vips_bandjoin(rgba_in, &rgba, 2, NULL), 0);
    ck_assert_int_eq(vips_cast_ushort(rgb, &u16, NULL), 0);
    ck_assert_int_eq(vips_linear1(u16, &u16b, 256, 77, "uchar", FALSE, NULL), 0);
    VipsImage *u16c, *u16d;
    ck_assert_int_eq(vips_cast_ushort(u16b, &u16d, NULL), 0);
    ck_assert_int_eq(vips_copy(u16d, &u16c, "interpretation", VIPS_INTERPRETATION_RGB16, NULL), 0);
    ck_assert_int_eq(vips_image_write_to_file(gray, yc_harness_tmp("g.png"), NULL), 0);
    ck_assert_int_eq(vips_image_write_to_file(ga, yc_harness_tmp("ga.png"), NULL), 0);
    ck_assert_int_eq(vips_image_write_to_file(rgba, yc_harness_tmp("rgba.png"), NULL), 0);
    ck_assert_int_eq(
        vips_image_write_to_file(u16c, yc_harness_tmp("u16.png"), "bitdepth", 16, NULL), 0);
    VipsImage *objs[] = {rgb, gray, alpha, ga, rgba, u16, u16b, u16c, u16d};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
        g_object_unref(objs[i]);

    const char *grays[2] = {"g.png", "ga.png"};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(yc_image_decode(yc_harness_tmp("%s", grays[k]), &back, NULL, NULL), YC_OK);
        for (size_t i = 0; i < 23 * 31; i++) {
            ck_assert_int_eq(back.data[3 * i], im.data[3 * i + 1]);
            ck_assert_int_eq(back.data[3 * i + 2], im.data[3 * i + 1]);
        }
    }
    ck_assert_int_eq(yc_image_decode(yc_harness_tmp("rgba.png"), &back, NULL, NULL), YC_OK);
    ck_assert_mem_eq(back.data, im.data, 23 * 31 * 3);
    /* 16-bit: value * 256 + 77 keeps the high byte */
    ck_assert_int_eq(yc_image_decode(yc_harness_tmp("u16.png"), &back, NULL, NULL), YC_OK);
    ck_assert_mem_eq(back.data, im.data, 23 * 31 * 3);
    yc_image_free(&im);
    yc_image_free(&back);
}
END_TEST

START_TEST(test_exif_orientation)
{
    /* four flat quadrants survive JPEG; orientation 6 (rotate 90 clockwise) moves the
     * bottom-left quadrant to the top-left and swaps width and height */
    yc_image im = YC_IMAGE_INIT, back = YC_IMAGE_INIT;
    const int h = 48, w = 64;
    const uint8_t q[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 0}};
    ck_assert_int_eq(yc_image_reserve(&im, h, w), YC_OK);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            memcpy(im.data + ((size_t)y * w + x) * 3, q[(y >= h / 2) * 2 + (x >= w / 2)], 3);
    for (int o = 1; o <= 8; o++) {
        char name[32];
        snprintf(name, sizeof name, "o%d.jpg[Q=98]", o);
        ck_assert_int_eq(yc_image_save(&im, yc_harness_tmp("%s", name), o), YC_OK);
        snprintf(name, sizeof name, "o%d.jpg", o);
        yc_decode_info di;
        ck_assert_int_eq(yc_image_decode(yc_harness_tmp("%s", name), &back, NULL, &di), YC_OK);
        ck_assert_int_eq(di.orientation, o);
        ck_assert_int_eq(back.h, o >= 5 ? w : h);
        ck_assert_int_eq(back.w, o >= 5 ? h : w);
        /* compare with libvips' own autorot of the same file */
        VipsImage *v = vips_image_new_from_file(yc_harness_tmp("%s", name), NULL), *r;
        ck_assert_ptr_nonnull(v);
        ck_assert_int_eq(vips_autorot(v, &r, NULL), 0);
        size_t sz;
        uint8_t *mem = vips_image_write_to_memory(r, &sz);
        ck_assert_uint_eq(sz, (size_t)back.h * back.w * 3);
        ck_assert_mem_eq(mem, back.data, sz);
        g_free(mem);
        g_object_unref(r);
        g_object_unref(v);
    }
    /* orientation 6 by hand: display top-left = stored bottom-left (blue) */
    ck_assert_int_eq(yc_image_decode(yc_harness_tmp("o6.jpg"), &back, NULL, NULL), YC_OK);
    const uint8_t *tl = px(&back, 4, 4), *tr = px(&back, 4, back.w - 5);
    ck_assert(tl[2] > 200 && tl[0] < 50);
    ck_assert(tr[0] > 200 && tr[1] < 50 && tr[2] < 50);
    yc_image_free(&im);
    yc_image_free(&back);
}
END_TEST

START_TEST(test_corrupt_files)
{
    yc_image im = YC_IMAGE_INIT, out = YC_IMAGE_INIT;
    yc_decode_info di;
    int st;
    /* missing */
    st = yc_image_decode(yc_harness_tmp("missing.jpg"), &im, NULL, NULL);
    ck_assert_int_eq(st, YC_EIO);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "missing.jpg"));
    /* not an image */
    yc_harness_write(yc_harness_tmp("garbage.jpg"), "this is not a JPEG file\n", 24);
    st = yc_image_decode(yc_harness_tmp("garbage.jpg"), &im, NULL, NULL);
    ck_assert_int_eq(st, YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "garbage.jpg"));
    /* empty */
    yc_harness_write(yc_harness_tmp("empty.png"), "", 0);
    st = yc_image_decode(yc_harness_tmp("empty.png"), &im, NULL, NULL);
    ck_assert_int_ne(st, YC_OK);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "empty.png"));
    /* a JPEG cut after its header, and one cut halfway: the first fails with the file named,
     * the second decodes as far as possible with a warning */
    yc_image pat = YC_IMAGE_INIT;
    pattern_image(&pat, 120, 160);
    ck_assert_int_eq(yc_image_save(&pat, yc_harness_tmp("whole.jpg"), 0), YC_OK);
    char *data;
    size_t n;
    ck_assert_int_eq(yc_read_file(yc_harness_tmp("whole.jpg"), &data, &n), YC_OK);
    yc_harness_write(yc_harness_tmp("cut_header.jpg"), data, 200);
    yc_harness_write(yc_harness_tmp("cut_half.jpg"), data, n / 2);
    st = yc_image_decode(yc_harness_tmp("cut_header.jpg"), &im, NULL, NULL);
    ck_assert_int_ne(st, YC_OK);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "cut_header.jpg"));
    int verb = yc_verbosity;
    yc_verbosity = 0;
    st = yc_image_decode(yc_harness_tmp("cut_half.jpg"), &im, NULL, &di);
    yc_verbosity = verb;
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert(di.damaged);
    ck_assert_int_eq(im.h, 120);
    ck_assert_int_eq(im.w, 160);
    ck_assert_int_eq(yc_image_decode(yc_harness_tmp("whole.jpg"), &out, NULL, &di), YC_OK);
    ck_assert(!di.damaged);
    ck_assert_mem_eq(im.data, out.data, 160 * 3 * 8);
    /* a truncated PNG */
    yc_image_save(&pat, yc_harness_tmp("whole.png"), 0);
    free(data);
    ck_assert_int_eq(yc_read_file(yc_harness_tmp("whole.png"), &data, &n), YC_OK);
    yc_harness_write(yc_harness_tmp("cut.png"), data, n / 2);
    yc_verbosity = 0;
    st = yc_image_decode(yc_harness_tmp("cut.png"), &im, NULL, &di);
    yc_verbosity = verb;
    ck_assert(st == YC_OK ? di.damaged : strstr(yc_last_error(), "cut.png") != NULL);
    /* through load_image and a loader: the sample fails with the message, nothing crashes */
    char *gpath = strdup(yc_harness_tmp("garbage.jpg"));
    file_loader fl = {{gpath}, {NULL}, 64};
    yc_aug_scratch sc = YC_AUG_SCRATCH_INIT;
    uint8_t chw[3 * 64 * 64];
    yc_labels l = YC_LABELS_INIT;
    st = yc_val_sample(&sc, 0, 64, 64, file_load, &fl, chw, &l, NULL);
    ck_assert_int_eq(st, YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "garbage.jpg"));
    free(gpath);
    free(data);
    yc_aug_scratch_free(&sc);
    yc_labels_free(&l);
    yc_image_free(&pat);
    yc_image_free(&im);
    yc_image_free(&out);
}
END_TEST

/* Several threads decode and resize the same files at once; all must agree. */
typedef struct thread_job {
    /* files to load */
    const char *paths[3];
    /* checksum of everything loaded */
    unsigned long sum;
    /* status */
    int st;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    yc_image tmp = YC_IMAGE_INIT, out = YC_IMAGE_INIT;
    j->sum = 0;
    j->st = YC_OK;
    for (int rep = 0; rep < 4 && !j->st; rep++)
        for (int i = 0; i < 3 && !j->st; i++) {
            yc_load_info li;
            j->st = yc_load_image(j->paths[i], 96, rep & 1, &tmp, &out, &li);
            for (size_t k = 0; !j->st && k < (size_t)out.h * out.w * 3; k++)
                j->sum = j->sum * 31 + out.data[k];
        }
    yc_image_free(&tmp);
    yc_image_free(&out);
    return NULL;
}

START_TEST(test_threads)
{
    yc_image im = YC_IMAGE_INIT;
    pattern_image(&im, 200, 150);
    ck_assert_int_eq(yc_image_save(&im, yc_harness_tmp("t1.jpg"), 6), YC_OK);
    ck_assert_int_eq(yc_image_save(&im, yc_harness_tmp("t2.png"), 0), YC_OK);
    ck_assert_int_eq(yc_image_save(&im, yc_harness_tmp("t3.webp"), 0), YC_OK);
    char *paths[3] = {strdup(yc_harness_tmp("t1.jpg")), strdup(yc_harness_tmp("t2.png")),
                      strdup(yc_harness_tmp("t3.webp"))};
    thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        for (int k = 0; k < 3; k++)
            jobs[i].paths[k] = paths[k];
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(jobs[i].st, YC_OK);
        ck_assert_uint_eq(jobs[i].sum, jobs[0].sum);
    }
    for (int k = 0; k < 3; k++)
        free(paths[k]);
    yc_image_free(&im);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Multi-scale
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_multiscale)
{
    yc_rng rng;
    yc_rng_seed(&rng, 9, 9);
    bool seen_small = false, seen_big = false;
    for (int i = 0; i < 500; i++) {
        int nh, nw;
        yc_multiscale_shape(&rng, 640, 32, 640, 640, &nh, &nw);
        ck_assert_int_eq(nh % 32, 0);
        ck_assert_int_eq(nh, nw);
        ck_assert(nh >= 320 && nh <= 960);
        seen_small |= nh == 320;
        seen_big |= nh == 960;
        yc_multiscale_shape(&rng, 640, 32, 480, 640, &nh, &nw);
        ck_assert_int_eq(nh % 32, 0);
        ck_assert_int_eq(nw % 32, 0);
        ck_assert(nh <= nw);
    }
    ck_assert(seen_small && seen_big);
    /* F.interpolate([[0, 1], [2, 3]], size=4, bilinear, align_corners=False) */
    const float src[4] = {0, 1, 2, 3};
    float dst[16];
    yc_resize_bilinear_f32(src, 1, 2, 2, dst, 4, 4);
    const float want[16] = {0, 0.25f, 0.75f, 1, 0.5f, 0.75f, 1.25f, 1.5f,
                            1.5f, 1.75f, 2.25f, 2.5f, 2, 2.25f, 2.75f, 3};
    for (int i = 0; i < 16; i++)
        ck_assert_float_eq_tol(dst[i], want[i], 1e-6);
    /* downscale 4 -> 2 picks the midpoints; two planes are independent */
    float s2[32], d2[8];
    for (int i = 0; i < 32; i++)
        s2[i] = (float)i;
    yc_resize_bilinear_f32(s2, 2, 4, 4, d2, 2, 2);
    ck_assert_float_eq_tol(d2[0], 2.5f, 1e-6);
    ck_assert_float_eq_tol(d2[3], 12.5f, 1e-6);
    ck_assert_float_eq_tol(d2[4], 18.5f, 1e-6);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Timings (printed, not asserted)
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_speed)
{
    char paths[8][1100];
    file_loader fl = {{0}, {0}, 640};
    yc_image im = YC_IMAGE_INIT;
    pattern_image(&im, 480, 640);
    for (int i = 0; i < 8; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/speed%d.jpg", yc_harness_tmpdir(), i);
        yc_image_save(&im, paths[i], 0);
        fl.paths[i] = paths[i];
    }
    yc_image_free(&im);
    yc_hyp hyp = default_hyp();
    yc_sample_params p = {&hyp, 640, 8, NULL, 0, 0, 0};
    yc_aug_scratch sc = YC_AUG_SCRATCH_INIT;
    uint8_t *chw = malloc(3 * 640 * 640);
    yc_labels l = YC_LABELS_INIT;
    yc_rng rng;
    const int reps = 10;
    yc_rng_seed(&rng, 1, 1);
    ck_assert_int_eq(yc_train_sample(&sc, &p, 0, file_load, &fl, &rng, chw, NULL, NULL, &l),
                     YC_OK);
    double t0 = yc_now();
    for (int i = 0; i < reps; i++) {
        yc_rng_seed(&rng, 100 + i, 1);
        ck_assert_int_eq(
            yc_train_sample(&sc, &p, i % 8, file_load, &fl, &rng, chw, NULL, NULL, &l), YC_OK);
    }
    double t_mosaic = (yc_now() - t0) / reps * 1e3;
    t0 = yc_now();
    for (int i = 0; i < reps; i++)
        ck_assert_int_eq(yc_val_sample(&sc, i % 8, 640, 640, file_load, &fl, chw, &l, NULL),
                         YC_OK);
    double t_val = (yc_now() - t0) / reps * 1e3;
    /* the parts of a mosaic sample on already decoded tiles */
    yc_image tiles[4] = {YC_IMAGE_INIT, YC_IMAGE_INIT, YC_IMAGE_INIT, YC_IMAGE_INIT};
    yc_image canvas = YC_IMAGE_INIT, out = YC_IMAGE_INIT;
    yc_labels tl = YC_LABELS_INIT;
    t0 = yc_now();
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(yc_load_image(fl.paths[i], 640, true, NULL, &tiles[i], NULL), YC_OK);
    double t_load4 = (yc_now() - t0) * 1e3;
    t0 = yc_now();
    for (int r = 0; r < reps; r++) {
        yc_image_reserve(&canvas, 1280, 1280);
        yc_image_fill(&canvas, 114);
        l.n = 0;
        for (int i = 0; i < 4; i++)
            yc_mosaic_place(&canvas, 640, 600, 700, i, &tiles[i], &tl, &l);
    }
    double t_place = (yc_now() - t0) / reps * 1e3;
    t0 = yc_now();
    for (int r = 0; r < reps; r++)
        yc_random_perspective(&canvas, &out, &l, &hyp, -320, -320, &rng);
    double t_warp = (yc_now() - t0) / reps * 1e3;
    t0 = yc_now();
    for (int r = 0; r < reps; r++)
        yc_augment_hsv(&out, hyp.hsv_h, hyp.hsv_s, hyp.hsv_v, &rng);
    double t_hsv = (yc_now() - t0) / reps * 1e3;
    printf("speed (synthetic 640x480 JPEGs): 640 mosaic train sample %.1f ms (decode+resize of 4 "
           "tiles %.1f ms, placement %.1f ms, warp %.1f ms, hsv %.1f ms); 640 val sample %.1f ms\n",
           t_mosaic, t_load4, t_place, t_warp, t_hsv, t_val);
    for (int i = 0; i < 4; i++)
        yc_image_free(&tiles[i]);
    yc_image_free(&canvas);
    yc_image_free(&out);
    yc_labels_free(&tl);
    yc_labels_free(&l);
    free(chw);
    yc_aug_scratch_free(&sc);
}
END_TEST

#endif /* YC_TEST_SHARED */

static Suite *augment_suite(void)
{
    Suite *s = suite_create("augment");
#ifdef YC_TEST_SHARED
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_reference_letterbox);
    suite_add_tcase(s, tc);
#else
    TCase *tc = tcase_create("geometry");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_letterbox_geometry);
    tcase_add_test(tc, test_load_resize_sizes);
    tcase_add_test(tc, test_resize_properties);
    tcase_add_test(tc, test_perspective_boxes);
    tcase_add_test(tc, test_box_candidates);
    tcase_add_test(tc, test_warp_pixels);
    tcase_add_test(tc, test_mosaic_place);
    tcase_add_test(tc, test_load_mosaic_replay);
    tcase_add_test(tc, test_label_conversions);
    suite_add_tcase(s, tc);
    tc = tcase_create("pixels");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_hsv);
    tcase_add_test(tc, test_flips);
    tcase_add_test(tc, test_mixup);
    tcase_add_test(tc, test_reproducible);
    tcase_add_test(tc, test_nonmosaic_labels);
    tcase_add_test(tc, test_multiscale);
    suite_add_tcase(s, tc);
    tc = tcase_create("decode");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_decode_formats);
    tcase_add_test(tc, test_exif_orientation);
    tcase_add_test(tc, test_corrupt_files);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_speed);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void)
{
#ifdef YC_TEST_SHARED
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED, "%s not found (coco128 and PyTorch's inputs)",
                            missing);
#endif
    return yc_harness_main(augment_suite(), "augment");
}
