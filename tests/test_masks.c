/* Instance masks and the pieces of segmentation validation (mask_eval.h, val_seg.h, nms.h's nm)
 * against YOLOv5 v7.0's own functions: tests/data/seg/masks.safetensors, made by
 * tests/data/make_seg_masks.py (process_mask with and without upsampling, process_mask_upsample,
 * F.interpolate, mask IoU with overlap and per-label ground truth, process_batch(masks=True),
 * non_max_suppression(nm=4) single- and multi-label, masks2segments' cv2.findContours), plus
 * hand-made cases: crop_mask's edges,
 * Segment decoding leaving the coefficients raw, segment/train.py's fitness, the results table. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "detect.h"
#include "hyp.h"
#include "loader.h"
#include "log.h"
#include "mask_eval.h"
#include "metrics.h"
#include "nms.h"
#include "safetensors.h"
#include "segment_step.h"
#include "val.h"
#include "val_seg.h"
#include "harness.h"
#include "yctest.h"

static yc_st_file *fixture;

/* Tensor `name` of the fixture as floats (malloc'd); its element count in *n. */
static float *get(const char *name, size_t *n)
{
    const yc_st_tensor *t = yc_st_find(fixture, name);
    ck_assert_msg(t != NULL, "fixture tensor %s missing", name);
    size_t count = 1;
    for (int i = 0; i < t->ndim; i++)
        count *= (size_t)t->shape[i];
    float *p = malloc(count * sizeof *p);
    ck_assert_ptr_nonnull(p);
    ck_assert_msg(yc_st_read_f32(fixture, t, p, count) == YC_OK, "%s", yc_last_error());
    if (n)
        *n = count;
    return p;
}

static const yc_st_tensor *shape_of(const char *name)
{
    const yc_st_tensor *t = yc_st_find(fixture, name);
    ck_assert_msg(t != NULL, "fixture tensor %s missing", name);
    return t;
}

enum { IH = 32, IW = 40, NM = 6, MH = 8, MW = 10, ND = 6, NL = 4 };

/* F.interpolate(bilinear, align_corners=False) of 5x7 planes to 8x10. */
START_TEST(interpolation_matches_pytorch)
{
    float *in = get("interp_in", NULL), *ref = get("interp", NULL);
    float out[2 * MH * MW];
    yc_interp_bilinear(in, 2, 5, 7, out, MH, MW);
    for (int i = 0; i < 2 * MH * MW; i++)
        ck_assert_msg(fabsf(out[i] - ref[i]) <= 1e-6f, "value %d: %.9g, PyTorch %.9g", i,
                      (double)out[i], (double)ref[i]);
    free(in);
    free(ref);
}
END_TEST

/* The masks of mode against the fixture's `name` (n detections of h x w); returns the number of
 * pixels that differ. */
static int mask_mismatches(yc_mask_mode mode, const char *name, int n)
{
    float *proto = get("proto", NULL), *coef = get("coef", NULL), *dets = get("dets", NULL);
    float *ref = get(name, NULL);
    int h, w;
    yc_mask_size(mode, MH, MW, IH, IW, &h, &w);
    const yc_st_tensor *t = shape_of(name);
    ck_assert_int_eq(t->shape[1], h);
    ck_assert_int_eq(t->shape[2], w);
    uint8_t *out = malloc((size_t)n * h * w);
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(yc_process_mask(proto, NM, MH, MW, coef, NM, dets, 6, n, IH, IW, mode, out) ==
                      YC_OK,
                  "%s", yc_last_error());
    int bad = 0, ones = 0;
    for (int i = 0; i < n * h * w; i++) {
        bad += out[i] != (ref[i] > 0.5f);
        ones += out[i];
    }
    /* the masks are not trivially empty or full */
    ck_assert_int_gt(ones, n * 4);
    ck_assert_int_lt(ones, n * h * w / 2);
    free(proto);
    free(coef);
    free(dets);
    free(ref);
    free(out);
    return bad;
}

/* process_mask, process_mask(upsample=True) and process_mask_upsample, pixel for pixel (the
 * logits of this case are far from 0; round-off could flip a pixel only at a logit within an ulp
 * of it). */
START_TEST(process_mask_matches_pytorch)
{
    ck_assert_int_eq(mask_mismatches(YC_MASK_PROTO, "pm_proto", ND), 0);
    ck_assert_int_eq(mask_mismatches(YC_MASK_UPSAMPLE, "pm_up", 3), 0);
    ck_assert_int_eq(mask_mismatches(YC_MASK_UPSAMPLE_CROP, "pm_upcrop", 3), 0);
}
END_TEST

/* crop_mask keeps x1 <= x < x2, y1 <= y < y2 (pixel indices against float coordinates). */
START_TEST(crop_mask_edges)
{
    float m[4 * 5];
    for (int i = 0; i < 20; i++)
        m[i] = 1.0f;
    const float box[4] = {1.5f, 1.0f, 3.0f, 2.5f};
    yc_crop_mask(m, 1, 4, 5, box, 4);
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 5; x++) {
            float want = (x == 2 && (y == 1 || y == 2)) ? 1.0f : 0.0f;
            ck_assert_msg(m[y * 5 + x] == want, "(%d, %d): %g", y, x, (double)m[y * 5 + x]);
        }
}
END_TEST

/* mask_iou and process_batch(masks=True) with the ground truth in the overlap format (16x20,
 * resized to 8x10) and one mask per label (32x40). */
START_TEST(mask_iou_matches_pytorch)
{
    float *dets = get("dets", NULL), *labels = get("labels", NULL);
    float *gto = get("gt_overlap", NULL), *pm = get("pm_proto", NULL);
    float *ref_o = get("iou_overlap", NULL), *ref_s = get("iou_single", NULL);
    float *cor_o = get("correct_overlap", NULL), *cor_s = get("correct_single", NULL);
    uint8_t pred[ND * MH * MW];
    for (int i = 0; i < ND * MH * MW; i++)
        pred[i] = pm[i] > 0.5f;
    /* per-label masks at the input size: the overlap map's pixels repeated 2x2, as the script */
    float *gts = malloc((size_t)NL * IH * IW * sizeof *gts);
    ck_assert_ptr_nonnull(gts);
    for (int l = 0; l < NL; l++)
        for (int y = 0; y < IH; y++)
            for (int x = 0; x < IW; x++)
                gts[((size_t)l * IH + y) * IW + x] =
                    gto[(y / 2) * (IW / 2) + x / 2] == (float)(l + 1) ? 1.0f : 0.0f;
    float iou[NL * ND];
    uint16_t correct[ND];
    int matched = 0;
    for (int pass = 0; pass < 2; pass++) {
        const bool overlap = pass == 0;
        const float *ref = overlap ? ref_o : ref_s, *cor = overlap ? cor_o : cor_s;
        ck_assert_msg(yc_mask_iou(overlap ? gto : gts, overlap, NL, overlap ? IH / 2 : IH,
                                  overlap ? IW / 2 : IW, pred, ND, MH, MW, iou) == YC_OK,
                      "%s", yc_last_error());
        for (int i = 0; i < NL * ND; i++)
            ck_assert_msg(iou[i] == ref[i], "overlap %d: IoU %d: %.9g, PyTorch %.9g", overlap,
                          i, (double)iou[i], (double)ref[i]);
        ck_assert_msg(yc_match_iou(iou, dets, ND, labels, NL, correct) == YC_OK, "%s",
                      yc_last_error());
        for (int d = 0; d < ND; d++)
            for (int t = 0; t < YC_NIOU; t++) {
                const bool want = cor[d * YC_NIOU + t] > 0.5f;
                ck_assert_msg(((correct[d] >> t) & 1) == want,
                              "overlap %d: detection %d threshold %d", overlap, d, t);
                matched += want;
            }
    }
    /* the case exercises the matching: some detections are correct, not all */
    ck_assert_int_gt(matched, 0);
    ck_assert_int_lt(matched, 2 * ND * YC_NIOU);
    free(dets);
    free(labels);
    free(gto);
    free(pm);
    free(ref_o);
    free(ref_s);
    free(cor_o);
    free(cor_s);
    free(gts);
}
END_TEST

/* non_max_suppression(nm=4): the detections bit for bit, and the coefficients (each detection's
 * source row's, times its objectness as YOLOv5 v7.0 scales them) equal to YOLOv5's columns
 * 6..9. */
static void check_nms(const char *name, float conf, double iou, bool multi, int max_det)
{
    size_t npred;
    float *pred = get("pred", &npred), *ref = get(name, NULL);
    const int no = 12, nmask = 4;
    const int nref = (int)shape_of(name)->shape[0];
    yc_nms_params p = yc_nms_params_detect();
    p.conf_thres = conf;
    p.iou_thres = iou;
    p.multi_label = multi;
    p.max_det = max_det;
    p.nm = nmask;
    yc_nms_scratch *s = yc_nms_scratch_new();
    ck_assert_ptr_nonnull(s);
    float *out = malloc((size_t)max_det * 6 * sizeof *out);
    uint32_t *src = malloc((size_t)max_det * sizeof *src);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(src);
    int n = 0;
    ck_assert_msg(yc_nms_src(pred, npred / no, no, &p, s, out, &n, src) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_int_eq(n, nref);
    ck_assert_int_gt(n, 3);
    for (int k = 0; k < n; k++) {
        for (int j = 0; j < 6; j++)
            ck_assert_msg(out[k * 6 + j] == ref[k * 10 + j], "%s: detection %d value %d: %.9g, "
                          "YOLOv5 %.9g", name, k, j, (double)out[k * 6 + j],
                          (double)ref[k * 10 + j]);
    }
    /* YOLOv5's coefficients are the row's times its objectness */
    float *coef = malloc((size_t)n * nmask * sizeof *coef);
    ck_assert_ptr_nonnull(coef);
    yc_nms_coefficients(pred, no, nmask, src, n, coef);
    for (int k = 0; k < n; k++)
        for (int j = 0; j < nmask; j++)
            ck_assert_msg(coef[k * nmask + j] == ref[k * 10 + 6 + j],
                          "%s: detection %d coefficient %d: %.9g, YOLOv5 %.9g", name, k, j,
                          (double)coef[k * nmask + j], (double)ref[k * 10 + 6 + j]);
    free(coef);
    /* without src, the same detections */
    float *out2 = malloc((size_t)max_det * 6 * sizeof *out2);
    ck_assert_ptr_nonnull(out2);
    int n2 = 0;
    ck_assert_int_eq(yc_nms(pred, npred / no, no, &p, s, out2, &n2), YC_OK);
    ck_assert_int_eq(n2, n);
    ck_assert(memcmp(out, out2, (size_t)n * 6 * sizeof *out) == 0);
    /* nm leaving fewer than one class is refused */
    p.nm = no - 5;
    ck_assert_int_eq(yc_nms_src(pred, npred / no, no, &p, s, out, &n, src), YC_EFORMAT);
    free(out2);
    free(out);
    free(src);
    yc_nms_scratch_free(s);
    free(pred);
    free(ref);
}

START_TEST(nms_keeps_coefficients)
{
    check_nms("nms", 0.25f, 0.45, false, 1000);
    check_nms("nms_multi", 0.001f, 0.6, true, 100);
}
END_TEST

/* masks2segments(strategy='largest'): cv2.findContours(RETR_EXTERNAL, CHAIN_APPROX_SIMPLE)'s
 * points of the longest contour, for masks with several components, holes, components inside
 * holes, a single pixel and a line. */
START_TEST(contours_match_cv2)
{
    size_t nmask, npts;
    float *masks = get("contour_masks", NULL), *cn = get("contour_n", &nmask);
    float *pts = get("contour_pts", &npts);
    const int h = 16, w = 18;
    uint8_t m[16 * 18];
    size_t at = 0;
    for (size_t k = 0; k < nmask; k++) {
        for (int i = 0; i < h * w; i++)
            m[i] = masks[k * h * w + i] > 0.5f;
        float *xy = NULL;
        int n = -1;
        ck_assert_msg(yc_mask_largest_contour(m, h, w, &xy, &n) == YC_OK, "%s", yc_last_error());
        ck_assert_msg(n == (int)cn[k], "mask %zu: %d points, cv2 %d", k, n, (int)cn[k]);
        for (int i = 0; i < 2 * n; i++)
            ck_assert_msg(xy[i] == pts[at * 2 + i], "mask %zu value %d: %g, cv2 %g", k, i,
                          (double)xy[i], (double)pts[at * 2 + i]);
        at += (size_t)n;
        free(xy);
    }
    ck_assert_uint_eq(at * 2, npts);
    /* an empty mask has no contour */
    memset(m, 0, sizeof m);
    float *xy = NULL;
    int n = -1;
    ck_assert_int_eq(yc_mask_largest_contour(m, h, w, &xy, &n), YC_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(xy);
    free(masks);
    free(cn);
    free(pts);
}
END_TEST

/* Segment's decoding: sigmoid on box, objectness and classes, the last nm values raw. */
START_TEST(decode_leaves_coefficients_raw)
{
    enum { NA = 1, NO = 9, K = 3 };
    float p[NO * 2 * 2];
    for (int i = 0; i < NO * 4; i++)
        p[i] = (float)(i % 7) * 0.7f - 2.0f;
    const yc_detect_level lv = {.p = p, .ny = 2, .nx = 2, .img_stride = NO * 4, .stride = 8};
    const float anchors[2] = {1.25f, 1.625f};
    float a[4 * NO], b[4 * NO];
    ck_assert_int_eq(yc_detect_decode(&lv, 1, NA, NO, anchors, 0, a), YC_OK);
    ck_assert_int_eq(yc_detect_decode_nm(&lv, 1, NA, NO, K, anchors, 0, b), YC_OK);
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < NO; k++) {
            float want = k < NO - K ? a[r * NO + k] : p[k * 4 + r];
            ck_assert_msg(b[r * NO + k] == want, "row %d value %d", r, k);
        }
    ck_assert_int_eq(yc_detect_decode_nm(&lv, 1, NA, NO, NO - 5, anchors, 0, b), YC_EFORMAT);
}
END_TEST

/* utils/segment/metrics.py fitness: 0.1 * mAP50 + 0.9 * mAP50-95 of the boxes and of the masks,
 * summed pairwise as numpy. */
START_TEST(seg_fitness)
{
    yc_val_result r;
    memset(&r, 0, sizeof r);
    r.metrics = (yc_val_metrics){.mp = 0.5, .mr = 0.25, .map50 = 0.6, .map = 0.4, .fitness = 7};
    r.mask_metrics = (yc_val_metrics){.mp = 0.3, .mr = 0.2, .map50 = 0.5, .map = 0.3};
    ck_assert(yc_val_seg_fitness(&r) == 7.0);
    r.seg = true;
    const double want = ((0.0 + 0.0) + (0.6 * 0.1 + 0.4 * 0.9)) + ((0.0 + 0.0) + (0.5 * 0.1 + 0.3 * 0.9));
    ck_assert(yc_val_seg_fitness(&r) == want);
    ck_assert(fabs(want - 0.74) < 1e-12);
}
END_TEST

/* The results table: segment/val.py's header and '%22s%11i%11i' + '%11.3g' * 8. */
START_TEST(seg_table)
{
    int64_t nt[2] = {3, 4};
    yc_val_metrics box = {.nc = 2, .seen = 5, .nt = nt, .mp = 0.5, .mr = 0.25, .map50 = 0.6,
                          .map = 0.4};
    yc_val_metrics mask = {.nc = 2, .seen = 5, .nt = nt, .mp = 0.3, .mr = 0.2, .map50 = 0.123456,
                           .map = 0.0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    yc_val_seg_print_header(f);
    yc_val_seg_print_results(f, &box, &mask, NULL, true);
    fclose(f);
    const char *want =
        "                 Class     Images  Instances      Box(P          R      mAP50  "
        "mAP50-95)     Mask(P          R      mAP50  mAP50-95)\n"
        "                   all          5          7        0.5       0.25        0.6        "
        "0.4        0.3        0.2      0.123          0\n";
    ck_assert_str_eq(buf, want);
    free(buf);
}
END_TEST

/* yc_validate on a segmentation model end to end against segment/val.py run alone
 * (tests/data/seg/val_ref.txt, made by tests/data/make_seg_val.py): the tiny segmentation model
 * of tests/data/seg/tiny (random weights) on the polygon images a, b, c of tests/data/segdata at
 * 64, batch 2, one mask per label at the image size (overlap off, ratio 1).  YOLOv5 keeps 374
 * detections, 4 of them boxes matched at IoU 0.5 but no mask: it skips ap_per_class (its gate is
 * the mask column) and reports eight zeros, box metrics included.  Then as segment/train.py
 * validates (overlap masks at ratio 4, loss parameters): the four validation losses within 1e-5
 * (relative) of YOLOv5's. */
START_TEST(val_tiny_matches_yolov5)
{
    char *ref = yc_harness_read(yc_harness_test_data("seg/val_ref.txt"), NULL);
    double want[23];
    const char *q = ref;
    for (int i = 0; i < 23; i++) {
        char *end;
        want[i] = strtod(q, &end);
        ck_assert_msg(end != q, "val_ref.txt: value %d", i);
        q = end;
    }
    free(ref);
    yc_dataset ds;
    yc_harness_seg_dataset(&ds);
    ck_assert(ds.has_polygons);
    yc_backend *be;
    yc_harness_cpu(&be, 2);
    yc_infer_model im;
    char cfg[1200], w[1200];
    snprintf(cfg, sizeof cfg, "%s", yc_harness_test_data("seg/tiny/yolov5n-seg-tiny.yaml"));
    snprintf(w, sizeof w, "%s", yc_harness_test_data("seg/tiny/weights.safetensors"));
    ck_assert_msg(yc_infer_model_load(&im, w, cfg, be) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(im.m->nm, 32);
    yc_loader_options lo = {.ds = &ds, .train = false, .imgsz = 64, .batch = 2, .rect = true,
                            .pad = 0.5, .stride = im.stride, .workers = 1, .masks = true,
                            .mask_ratio = 1, .no_overlap = true};
    yc_loader *l;
    ck_assert_msg(yc_loader_new(&l, &lo) == YC_OK, "%s", yc_last_error());
    yc_val_options vo;
    yc_val_options_default(&vo);
    vo.print = false;
    vo.imgsz = 64;
    vo.batch = 2;
    vo.mask_overlap = false;
    yc_val_result res;
    ck_assert_msg(yc_validate(im.m, l, &ds, NULL, &vo, NULL, &res) == YC_OK, "%s",
                  yc_last_error());
    ck_assert(res.seg);
    ck_assert_int_eq(res.metrics.seen, 3);
    ck_assert_int_eq(res.mask_metrics.seen, 3);
    ck_assert_uint_eq(res.n_det, (size_t)want[8]);
    const double got[8] = {res.metrics.mp,      res.metrics.mr,      res.metrics.map50,
                           res.metrics.map,     res.mask_metrics.mp, res.mask_metrics.mr,
                           res.mask_metrics.map50, res.mask_metrics.map};
    for (int i = 0; i < 8; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-6, "metric %d: %.9g, YOLOv5 %.9g", i, got[i],
                      want[i]);
    yc_val_result_free(&res);
    yc_loader_free(l);

    /* as segment/train.py validates: overlap masks at ratio 4, the validation loss (box, seg,
     * obj, cls) of ComputeLoss(overlap=True) with hyp.scratch-low scaled for 64 pixels */
    lo.mask_ratio = 4;
    lo.no_overlap = false;
    ck_assert_msg(yc_loader_new(&l, &lo) == YC_OK, "%s", yc_last_error());
    vo.mask_overlap = true;
    vo.training = true;
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_seg_step_loss_params(im.m, &hyp, 64, 0.0f, &lp);
    ck_assert_msg(yc_validate(im.m, l, &ds, NULL, &vo, &lp, &res) == YC_OK, "%s",
                  yc_last_error());
    const double got2[12] = {res.metrics.mp,        res.metrics.mr,        res.metrics.map50,
                             res.metrics.map,       res.mask_metrics.mp,   res.mask_metrics.mr,
                             res.mask_metrics.map50, res.mask_metrics.map, res.loss[0],
                             res.loss_seg,          res.loss[1],           res.loss[2]};
    for (int i = 0; i < 12; i++)
        ck_assert_msg(fabs(got2[i] - want[11 + i]) <= 1e-5 * fmax(1.0, fabs(want[11 + i])),
                      "training-mode value %d: %.9g, YOLOv5 %.9g", i, got2[i], want[11 + i]);
    ck_assert(got2[9] > 0.01);
    /* the loss needs the model's nm in its parameters */
    yc_val_result_free(&res);
    lp.nm = 0;
    ck_assert_int_eq(yc_validate(im.m, l, &ds, NULL, &vo, &lp, &res), YC_EUSAGE);
    yc_loader_free(l);

    /* a loader without masks is refused by name */
    lo.masks = false;
    ck_assert_int_eq(yc_loader_new(&l, &lo), YC_OK);
    ck_assert_int_eq(yc_validate(im.m, l, &ds, NULL, &vo, NULL, &res), YC_EUSAGE);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "masks"));
    yc_loader_free(l);
    yc_infer_model_free(&im);
    yc_backend_free(be);
    yc_dataset_free(&ds);
}
END_TEST

int main(void)
{
    const char *d = getenv("YOLOCL_TEST_DATA");
    char path[1100];
    snprintf(path, sizeof path, "%s/seg/masks.safetensors", d && d[0] ? d : "tests/data");
    if (yc_st_open(&fixture, path) != YC_OK) {
        fprintf(stderr, "test_masks: %s: %s\n", path, yc_last_error());
        return 1;
    }
    Suite *s = suite_create("masks");
    TCase *tc = tcase_create("masks");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, interpolation_matches_pytorch);
    tcase_add_test(tc, process_mask_matches_pytorch);
    tcase_add_test(tc, crop_mask_edges);
    tcase_add_test(tc, mask_iou_matches_pytorch);
    tcase_add_test(tc, nms_keeps_coefficients);
    tcase_add_test(tc, contours_match_cv2);
    tcase_add_test(tc, decode_leaves_coefficients_raw);
    tcase_add_test(tc, seg_fitness);
    tcase_add_test(tc, seg_table);
    tcase_add_test(tc, val_tiny_matches_yolov5);
    suite_add_tcase(s, tc);
    int st = yc_harness_main(s, "masks");
    yc_st_close(fixture);
    return st;
}
