/* The plots and files of a segmentation run (YOLOv5 v7.0 segment/val.py, segment/train.py):
 *  - COCO RLE (coco_rle.h) against hand-worked values and against tests/data/rle_ref.txt, made by
 *    tests/data/rle_ref.py, a transcription of pycocotools' rleEncode/rleToString (pycocotools
 *    itself is not installed here);
 *  - plot_images_and_masks (yc_plot_batch_masks, yc_plot_batch_seg_labels): the blended pixels
 *    of a mask, masks of predictions at or below 0.25 left out, overlap index maps split by
 *    target, read back from PNG;
 *  - plot_results_with_masks (yc_plot_results_seg): the image size, the red best-epoch marker, a
 *    detection results.csv refused;
 *  - the Box and Mask curves of ap_per_class_box_and_mask through yc_val_sink_save;
 *  - yc_validate on the tiny segmentation model with plots and save_json: the val_batch mosaics
 *    and the JSON's RLE "segmentation" of every detection at the original image size. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vips/vips.h>

#include "coco_rle.h"
#include "draw.h"
#include "harness.h"
#include "image.h"
#include "loader.h"
#include "mask_eval.h"
#include "masks.h"
#include "log.h"
#include "plots.h"
#include "segment_step.h"
#include "util.h"
#include "val.h"

/* A PNG or JPEG decoded to RGB HWC (malloc'd). */
static uint8_t *decode(const char *path, int *w, int *h)
{
    ck_assert_int_eq(yc_vips_init(), YC_OK);
    VipsImage *im = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    ck_assert_msg(im != NULL, "libvips cannot open %s: %s", path, vips_error_buffer());
    ck_assert_int_eq(vips_image_get_bands(im), 3);
    size_t n = 0;
    uint8_t *px = vips_image_write_to_memory(im, &n);
    ck_assert_ptr_nonnull(px);
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

static void expect_px(const uint8_t *rgb, int w, int x, int y, yc_rgb want)
{
    const uint8_t *p = rgb + 3 * ((size_t)y * w + x);
    ck_assert_msg(p[0] == want.r && p[1] == want.g && p[2] == want.b,
                  "pixel (%d, %d): %d %d %d, want %d %d %d", x, y, p[0], p[1], p[2], want.r,
                  want.g, want.b);
}

/* plot_images_and_masks' blend of grey 128 with a class colour */
static yc_rgb blended(int grey, int cls)
{
    yc_rgb c = yc_color_class(cls);
    return (yc_rgb){(uint8_t)(grey * 0.4 + c.r * 0.6), (uint8_t)(grey * 0.4 + c.g * 0.6),
                    (uint8_t)(grey * 0.4 + c.b * 0.6)};
}

static char *rle_string(const uint8_t *mask, int h, int w)
{
    uint32_t *counts = malloc(((size_t)h * w + 1) * sizeof *counts);
    ck_assert_ptr_nonnull(counts);
    size_t n = yc_rle_encode(mask, h, w, counts);
    char *s = malloc(yc_rle_string_cap(n));
    ck_assert_ptr_nonnull(s);
    yc_rle_to_string(counts, n, s);
    free(counts);
    return s;
}

/* Counts and strings worked by hand from maskApi.c. */
START_TEST(rle_hand_values)
{
    uint8_t m[44] = {0};
    uint32_t counts[45];
    /* empty 3 x 3: one run of 9 zeros, "9" ('0' + 9) */
    ck_assert_uint_eq(yc_rle_encode(m, 3, 3, counts), 1);
    ck_assert_uint_eq(counts[0], 9);
    char *s = rle_string(m, 3, 3);
    ck_assert_str_eq(s, "9");
    free(s);
    /* full 2 x 2: 0 zeros then 4 ones, "04" */
    memset(m, 1, 4);
    s = rle_string(m, 2, 2);
    ck_assert_str_eq(s, "04");
    free(s);
    /* column-major: the 2 x 2 mask [[1, 0], [1, 1]] reads 1 1 0 1: runs 0, 2, 1, 1; the fourth
     * count is written as 1 - 2 = -1: 0x1f, sign bit set and x >> 5 == -1, so one character
     * 'O' (48 + 31) */
    const uint8_t l[4] = {1, 0, 1, 1};
    ck_assert_uint_eq(yc_rle_encode(l, 2, 2, counts), 4);
    ck_assert_uint_eq(counts[0], 0);
    ck_assert_uint_eq(counts[1], 2);
    ck_assert_uint_eq(counts[2], 1);
    ck_assert_uint_eq(counts[3], 1);
    s = rle_string(l, 2, 2);
    ck_assert_str_eq(s, "021O");
    free(s);
    /* 44 zeros: 44 = 12 + 32, first character 12 | 0x20 = 44, '0' + 44 = '\\', then '1'; the JSON
     * escapes the backslash as json.dump does */
    memset(m, 0, sizeof m);
    char *j = yc_rle_json(m, 4, 11);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(j, "{\"size\": [4, 11], \"counts\": \"\\\\1\"}");
    free(j);
}
END_TEST

/* tests/data/rle_ref.txt: h w hex-mask string per line. */
START_TEST(rle_matches_reference)
{
    char *text = yc_harness_read(yc_harness_test_data("rle_ref.txt"), NULL);
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int h, w, off;
        ck_assert_int_eq(sscanf(line, "%d %d %n", &h, &w, &off), 2);
        char *hex = line + off, *sp = strchr(hex, ' ');
        ck_assert_ptr_nonnull(sp);
        *sp = 0;
        const char *want = sp + 1;
        uint8_t *m = malloc((size_t)h * w);
        ck_assert_ptr_nonnull(m);
        for (size_t k = 0; k < (size_t)h * w; k++) {
            char dig[2] = {hex[k / 4], 0};
            int v = (int)strtol(dig, NULL, 16);
            m[k] = (uint8_t)((v >> (3 - k % 4)) & 1);
        }
        char *got = rle_string(m, h, w);
        ck_assert_msg(strcmp(got, want) == 0, "line %d (%d x %d): %s, reference %s", lines + 1,
                      h, w, got, want);
        free(got);
        free(m);
        lines++;
    }
    ck_assert_int_eq(lines, 8);
    free(text);
}
END_TEST

static uint8_t *from_hex(const char *hex, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(b);
    for (size_t k = 0; k < n; k++) {
        unsigned v;
        ck_assert_int_eq(sscanf(hex + 2 * k, "%2x", &v), 1);
        b[k] = (uint8_t)v;
    }
    return b;
}

/* yc_resize_u8_linear against cv2.resize (tests/data/cv_resize_ref.txt, made by
 * tests/data/make_cv_resize.py): every byte the same; and yc_scale_mask_u8's letterbox crop. */
START_TEST(resize_matches_cv2)
{
    char *text = yc_harness_read(yc_harness_test_data("cv_resize_ref.txt"), NULL);
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int h, w, oh, ow, off;
        ck_assert_int_eq(sscanf(line, "%d %d %d %d %n", &h, &w, &oh, &ow, &off), 4);
        const char *hex = line + off;
        uint8_t *src = from_hex(hex, (size_t)h * w);
        uint8_t *want = from_hex(hex + 2 * (size_t)h * w + 1, (size_t)oh * ow);
        uint8_t *got = malloc((size_t)oh * ow);
        ck_assert_ptr_nonnull(got);
        ck_assert_int_eq(yc_resize_u8_linear(src, h, w, (size_t)w, got, oh, ow), YC_OK);
        int bad = 0;
        for (size_t k = 0; k < (size_t)oh * ow; k++)
            bad += got[k] != want[k];
        ck_assert_msg(bad == 0, "case %d (%dx%d -> %dx%d): %d of %d bytes differ from cv2",
                      lines + 1, h, w, oh, ow, bad, oh * ow);
        /* the same image inside a letterbox of 3 rows and 2.5 columns a side */
        const int h1 = h + 6, w1 = w + 5;
        uint8_t *box = calloc((size_t)h1 * w1, 1), *got2 = malloc((size_t)oh * ow);
        ck_assert(box && got2);
        for (int y = 0; y < h; y++)
            memcpy(box + (size_t)(y + 3) * w1 + 2, src + (size_t)y * w, (size_t)w);
        ck_assert_int_eq(yc_scale_mask_u8(box, h1, w1, 2.5, 3.0, oh, ow, got2), YC_OK);
        ck_assert_int_eq(memcmp(got2, want, (size_t)oh * ow), 0);
        free(box);
        free(got2);
        free(src);
        free(want);
        free(got);
        lines++;
    }
    ck_assert_int_eq(lines, 9);
    free(text);
    uint8_t one = 1, out;
    ck_assert_int_eq(yc_resize_u8_linear(&one, 1, 1, 1, &out, 0, 1), YC_EFORMAT);
}
END_TEST

/* One 64 x 64 grey image, a ground truth box with a mask over the left half (at 1/4 size, as the
 * loader's), a prediction at 0.2 with a mask over the right half (not drawn, as its box). */
START_TEST(mask_blend_pixels)
{
    uint8_t *px = malloc(64 * 64 * 3);
    ck_assert_ptr_nonnull(px);
    memset(px, 128, 64 * 64 * 3);
    yc_plot_image im = {.px = px, .layout = YC_PIX_U8_HWC, .w = 64, .h = 64, .path = NULL};
    uint8_t left[16 * 16], right[64 * 64];
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++)
            left[y * 16 + x] = x < 8;
    for (int y = 0; y < 64; y++)
        for (int x = 0; x < 64; x++)
            right[y * 64 + x] = x >= 32;
    yc_plot_box boxes[2] = {
        {.image = 0, .cls = 3, .cx = 0.5f, .cy = 0.75f, .w = 0.5f, .h = 0.3f, .conf = -1},
        {.image = 0, .cls = 5, .cx = 0.5f, .cy = 0.5f, .w = 0.2f, .h = 0.2f, .conf = 0.2f}};
    yc_plot_mask masks[2] = {{.m = left, .w = 16, .h = 16}, {.m = right, .w = 64, .h = 64}};
    const char *out = yc_harness_tmp("blend.png");
    ck_assert_msg(yc_plot_batch_masks(out, &im, 1, boxes, 2, masks, NULL, 0) == YC_OK, "%s",
                  yc_last_error());
    int w, h;
    uint8_t *rgb = decode(out, &w, &h);
    ck_assert_int_eq(w, 64);
    ck_assert_int_eq(h, 64);
    /* inside the left mask, away from the box and the tile border: blended with class 3 */
    expect_px(rgb, w, 10, 10, blended(128, 3));
    expect_px(rgb, w, 31, 30, blended(128, 3));
    /* outside: untouched (the 0.2 prediction's mask is not drawn) */
    expect_px(rgb, w, 32, 10, (yc_rgb){128, 128, 128});
    expect_px(rgb, w, 50, 30, (yc_rgb){128, 128, 128});
    free(rgb);
    /* the same prediction at 0.3 is drawn, with its mask */
    boxes[1].conf = 0.3f;
    ck_assert_int_eq(yc_plot_batch_masks(out, &im, 1, boxes, 2, masks, NULL, 0), YC_OK);
    rgb = decode(out, &w, &h);
    expect_px(rgb, w, 50, 10, blended(128, 5));
    expect_px(rgb, w, 10, 10, blended(128, 3));
    free(rgb);
    free(px);
}
END_TEST

/* A batch of two images with overlap index maps: image 0 has two targets (map values 1 and 2),
 * image 1 one; without overlap the same masks given one per target. */
START_TEST(seg_labels_overlap_split)
{
    enum { S = 32, M = 8 };
    uint8_t *images = malloc(2 * 3 * S * S);
    ck_assert_ptr_nonnull(images);
    memset(images, 128, 2 * 3 * S * S);
    float targets[3 * 6] = {0, 1, 0.25f, 0.25f, 0.1f, 0.1f,  /* image 0, class 1 */
                            0, 2, 0.75f, 0.75f, 0.1f, 0.1f,  /* image 0, class 2 */
                            1, 4, 0.5f, 0.5f, 0.1f, 0.1f};   /* image 1, class 4 */
    float maps[2 * M * M] = {0}, own[3 * M * M] = {0};
    for (int y = 0; y < M; y++)
        for (int x = 0; x < M; x++) {
            if (y < 4 && x < 4)
                maps[y * M + x] = 1, own[y * M + x] = 1;
            if (y >= 4 && x < 4)
                maps[y * M + x] = 2, own[M * M + y * M + x] = 1;
            if (x >= 4)
                maps[M * M + y * M + x] = 1, own[2 * M * M + y * M + x] = 1;
        }
    int sample[2] = {0, 1};
    yc_batch b = {.index = 0, .n = 2, .h = S, .w = S, .images = images, .targets = targets,
                  .nt = 3, .sample = sample, .masks = maps, .mask_n = 2, .mask_h = M,
                  .mask_w = M};
    for (int overlap = 1; overlap >= 0; overlap--) {
        if (!overlap) {
            b.masks = own;
            b.mask_n = 3;
        }
        const char *out = yc_harness_tmp("labels%d.png", overlap);
        ck_assert_msg(yc_plot_batch_seg_labels(out, &b, NULL, overlap, false, NULL, 0) == YC_OK,
                      "%s", yc_last_error());
        int w, h;
        uint8_t *rgb = decode(out, &w, &h);
        /* two tiles side by side (ceil(sqrt(2)) = 2 columns and rows) */
        ck_assert_int_eq(w, 2 * S);
        ck_assert_int_eq(h, 2 * S);
        expect_px(rgb, w, 3, 12, blended(128, 1));
        expect_px(rgb, w, 12, 3, blended(128, 1));
        expect_px(rgb, w, 3, 20, blended(128, 2));
        expect_px(rgb, w, 14, 27, blended(128, 2));
        expect_px(rgb, w, 20, 3, (yc_rgb){128, 128, 128});
        /* image 1 (second tile): its right half is its only target's mask */
        expect_px(rgb, w, S + 28, 4, blended(128, 4));
        expect_px(rgb, w, S + 4, 4, (yc_rgb){128, 128, 128});
        free(rgb);
    }
    free(images);
}
END_TEST

START_TEST(results_seg_plot)
{
    char csv[1200];
    snprintf(csv, sizeof csv, "%s", yc_harness_tmp("segrun/results.csv"));
    yc_harness_write_text(
        csv,
        "               epoch,      train/box_loss,      train/seg_loss,      train/obj_loss,"
        "      train/cls_loss,   metrics/precision(B),      metrics/recall(B),"
        "     metrics/mAP_0.5(B), metrics/mAP_0.5:0.95(B),   metrics/precision(M),"
        "      metrics/recall(M),     metrics/mAP_0.5(M), metrics/mAP_0.5:0.95(M),"
        "        val/box_loss,        val/seg_loss,        val/obj_loss,        val/cls_loss,"
        "               x/lr0,               x/lr1,               x/lr2\n"
        "0, 0.1, 0.2, 0.05, 0.03, 0.1, 0.2, 0.1, 0.05, 0.1, 0.2, 0.1, 0.04, 0.09, 0.1, 0.04, "
        "0.02, 0.07, 0.003, 0.003\n"
        "1, 0.09, 0.18, 0.05, 0.02, 0.3, 0.4, 0.3, 0.15, 0.3, 0.4, 0.3, 0.14, 0.08, 0.09, 0.04, "
        "0.02, 0.04, 0.006, 0.006\n"
        "2, 0.08, 0.17, 0.04, 0.02, 0.2, 0.3, 0.2, 0.1, 0.2, 0.3, 0.2, 0.09, 0.08, 0.09, 0.04, "
        "0.02, 0.01, 0.009, 0.009\n");
    const char *png = yc_harness_tmp("segrun/results.png");
    ck_assert_msg(yc_plot_results_seg(csv, png) == YC_OK, "%s", yc_last_error());
    int w, h;
    uint8_t *rgb = decode(png, &w, &h);
    ck_assert_int_eq(w, YC_RESULTS_PLOT_SEG_W);
    ck_assert_int_eq(h, YC_RESULTS_PLOT_SEG_H);
    /* the red best markers: one a panel and one in the legend */
    size_t red = 0;
    for (size_t k = 0; k < (size_t)w * h; k++)
        red += rgb[3 * k] == 255 && rgb[3 * k + 1] == 0 && rgb[3 * k + 2] == 0;
    ck_assert_msg(red > 17 * 100, "%zu red pixels", red);
    free(rgb);
    /* a detection results.csv has no seg columns */
    const char *det = yc_harness_tmp("detrun/results.csv");
    yc_harness_write_text(det, "epoch,train/box_loss,train/obj_loss\n0,0.1,0.05\n");
    ck_assert_int_eq(yc_plot_results_seg(det, yc_harness_tmp("detrun/results.png")),
                     YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "train/seg_loss"));
}
END_TEST

/* ap_per_class_box_and_mask's eight curves: a sink fed detections equal to the labels, its
 * statistics taken as both the box and the mask ones. */
START_TEST(box_and_mask_curves)
{
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", yc_harness_tmp("curves"));
    yc_val_options vo;
    yc_val_options_default(&vo);
    vo.print = false;
    vo.plots = true;
    vo.save_dir = dir;
    yc_val_sink *s;
    ck_assert_int_eq(yc_val_sink_new(&s, 2, &vo), YC_OK);
    const float dets[2 * 6] = {10, 10, 50, 50, 0.9f, 0, 60, 60, 90, 90, 0.8f, 1};
    const float labels[2 * 5] = {0, 10, 10, 50, 50, 1, 60, 60, 90, 90};
    ck_assert_int_eq(yc_val_sink_add(s, "x/1.jpg", 100, 100, dets, 2, labels, 2), YC_OK);
    yc_val_result res;
    memset(&res, 0, sizeof res);
    ck_assert_int_eq(yc_val_metrics_compute(yc_val_sink_stats(s), &res.metrics), YC_OK);
    ck_assert_int_eq(yc_val_metrics_compute(yc_val_sink_stats(s), &res.mask_metrics), YC_OK);
    res.seg = true;
    ck_assert_msg(yc_val_sink_save(s, NULL, &res) == YC_OK, "%s", yc_last_error());
    static const char *const names[9] = {
        "BoxPR_curve.png",  "BoxF1_curve.png",  "BoxP_curve.png",  "BoxR_curve.png",
        "MaskPR_curve.png", "MaskF1_curve.png", "MaskP_curve.png", "MaskR_curve.png",
        "confusion_matrix.png"};
    for (int k = 0; k < 9; k++) {
        int w, h;
        uint8_t *rgb = decode(yc_harness_tmp("curves/%s", names[k]), &w, &h);
        if (k < 8) {
            ck_assert_int_eq(w, YC_CURVE_PLOT_W);
            ck_assert_int_eq(h, YC_CURVE_PLOT_H);
        }
        free(rgb);
    }
    ck_assert_int_eq(yc_harness_count_files(dir, ".png"), 9);
    yc_val_result_free(&res);
    yc_val_sink_free(s);
}
END_TEST

/* segment/val.py with plots and --save-json on the tiny segmentation model (random weights) and
 * the three polygon images of tests/data/segdata at 64, batch 2: the mosaics of both batches, the
 * confusion matrix, no curves (no mask is correct: ap_per_class_box_and_mask is skipped, as
 * YOLOv5 skips it), and one "segmentation" a detection, the RLE of a mask of the original size
 * whose runs add up to its pixels. */
START_TEST(val_plots_and_json)
{
    yc_dataset ds;
    yc_harness_seg_dataset(&ds);
    yc_backend *be;
    yc_harness_cpu(&be, 2);
    yc_infer_model im;
    char cfg[1200], w[1200];
    snprintf(cfg, sizeof cfg, "%s", yc_harness_test_data("seg/tiny/yolov5n-seg-tiny.yaml"));
    snprintf(w, sizeof w, "%s", yc_harness_test_data("seg/tiny/weights.safetensors"));
    ck_assert_msg(yc_infer_model_load(&im, w, cfg, be) == YC_OK, "%s", yc_last_error());
    yc_loader_options lo = {.ds = &ds, .train = false, .imgsz = 64, .batch = 2, .rect = true,
                            .pad = 0.5, .stride = im.stride, .workers = 1, .masks = true,
                            .mask_ratio = 4};
    yc_loader *l;
    ck_assert_msg(yc_loader_new(&l, &lo) == YC_OK, "%s", yc_last_error());
    yc_val_options vo;
    yc_val_options_default(&vo);
    vo.print = false;
    vo.imgsz = 64;
    vo.batch = 2;
    vo.mask_overlap = true;
    vo.plots = true;
    vo.save_json = true;
    char out[1200];
    snprintf(out, sizeof out, "%s", yc_harness_tmp("segval/run"));
    vo.save_dir = out;
    const char *names[3] = {"a", "b", "c"};
    yc_val_result res;
    ck_assert_msg(yc_validate(im.m, l, &ds, names, &vo, NULL, &res) == YC_OK, "%s",
                  yc_last_error());
    ck_assert(res.n_det > 0);
    static const char *const files[5] = {"val_batch0_labels.jpg", "val_batch0_pred.jpg",
                                         "val_batch1_labels.jpg", "val_batch1_pred.jpg",
                                         "confusion_matrix.png"};
    for (int k = 0; k < 5; k++) {
        int pw, ph;
        uint8_t *rgb = decode(yc_harness_tmp("segval/run/%s", files[k]), &pw, &ph);
        /* a mosaic of 2 x 2 tiles, the batch's shape each (rect batches): labels and
         * predictions of a batch the same size */
        static int lw, lh;
        ck_assert(pw > 0 && ph > 0 && pw % 2 == 0 && ph % 2 == 0);
        if (k == 1 || k == 3) {
            ck_assert_int_eq(pw, lw);
            ck_assert_int_eq(ph, lh);
        }
        lw = pw;
        lh = ph;
        free(rgb);
    }
    ck_assert_int_eq(yc_harness_count_files(out, "_curve.png"), 0);
    char *json = yc_harness_read(yc_harness_tmp("segval/run/predictions.json"), NULL);
    size_t entries = 0;
    for (const char *p = json; (p = strstr(p, "\"score\": ")); p++) {
        const char *seg = strstr(p, "\"segmentation\": {\"size\": [");
        ck_assert_ptr_nonnull(seg);
        int sh, sw;
        ck_assert_int_eq(sscanf(seg, "\"segmentation\": {\"size\": [%d, %d]", &sh, &sw), 2);
        /* an image's original size (a: 48 x 64, b: 64 x 48, c: 60 x 80) */
        ck_assert_msg((sh == 48 && sw == 64) || (sh == 64 && sw == 48) || (sh == 60 && sw == 80),
                      "segmentation size %d x %d", sh, sw);
        /* the counts decode (the inverse of rleToString) to runs covering h * w pixels */
        const char *c = strstr(seg, "\"counts\": \"") + 11;
        long long total = 0, cnt[4096];
        int m = 0;
        while (*c != '"') {
            long long x = 0;
            int k = 0, more = 1;
            while (more) {
                int ch = (c[0] == '\\' ? (c++, c[0]) : c[0]) - 48;
                c++;
                x |= (long long)(ch & 0x1f) << (5 * k);
                more = ch & 0x20;
                k++;
                if (!more && (ch & 0x10))
                    x -= 1LL << (5 * k);
            }
            if (m > 2)
                x += cnt[m - 2];
            ck_assert_int_lt(m, 4096);
            cnt[m++] = x;
            total += x;
        }
        ck_assert_int_eq(total, (long long)sh * sw);
        entries++;
    }
    ck_assert_uint_eq(entries, res.n_det);
    free(json);
    yc_val_result_free(&res);
    yc_loader_free(l);
    yc_infer_model_free(&im);
    yc_backend_free(be);
    yc_dataset_free(&ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("seg_plots");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rle_hand_values);
    tcase_add_test(tc, rle_matches_reference);
    tcase_add_test(tc, resize_matches_cv2);
    tcase_add_test(tc, mask_blend_pixels);
    tcase_add_test(tc, seg_labels_overlap_split);
    tcase_add_test(tc, results_seg_plot);
    tcase_add_test(tc, box_and_mask_curves);
    tcase_add_test(tc, val_plots_and_json);
    suite_add_tcase(s, tc);
    return yc_harness_main(s, "test_seg_plots");
}
