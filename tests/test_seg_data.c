/* Segmentation data (augment_seg.h, masks.h, polygon labels in dataset.h, masks in loader.h),
 * against YOLOv5 v7.0 itself through tests/data/segdata/seg_ref.txt (seg_ref.py beside it):
 * cv2.fillPoly + cv2.resize as polygons2masks_overlap uses them (order and map), the segment
 * random_perspective's labels and polygons for fixed draws, copy_paste for fixed choices, and the validation samples (labels
 * and masks, overlap and not) of a tiny polygon dataset (tests/data/segdata, made by
 * make_seg_fixture.py).  Also: the per-file segment decision and malformed polygons, the scan
 * cache keeping polygons, training batches whose masks lie inside their targets' boxes, and the
 * loader's refusals. */
#include "augment_seg.h"
#include "dataset.h"
#include "loader.h"
#include "log.h"
#include "masks.h"
#include "util.h"
#include "harness.h"
#include "yctest.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------
 * The reference file
 * ---------------------------------------------------------------------------------------------- */

/* The whole of seg_ref.txt, and a cursor over its whitespace-separated tokens. */
typedef struct ref_reader {
    char *text;
    char *p;
} ref_reader;

static void ref_open(ref_reader *r)
{
    size_t len;
    const char *path = yc_harness_test_data("segdata/seg_ref.txt");
    ck_assert_msg(yc_read_file(path, &r->text, &len) == YC_OK, "%s", yc_last_error());
    r->p = r->text;
}

/* The next token (NULL at the end); the text is cut after it. */
static char *ref_tok(ref_reader *r)
{
    while (*r->p == ' ' || *r->p == '\n')
        r->p++;
    if (!*r->p)
        return NULL;
    char *t = r->p;
    while (*r->p && *r->p != ' ' && *r->p != '\n')
        r->p++;
    if (*r->p)
        *r->p++ = '\0';
    return t;
}

static double ref_num(ref_reader *r)
{
    char *t = ref_tok(r);
    ck_assert_ptr_nonnull(t);
    return strtod(t, NULL);
}

/* Moves to the next "case <kind>" header; false at the end. */
static bool ref_case(ref_reader *r, const char *kind)
{
    char *t;
    while ((t = ref_tok(r)))
        if (strcmp(t, "case") == 0 && strcmp(ref_tok(r), kind) == 0)
            return true;
    return false;
}

/* Reads a mask of h rows of w digits and compares it with got (floats). */
static void ref_mask(ref_reader *r, int h, int w, const float *got, const char *what)
{
    int bad = 0;
    for (int y = 0; y < h; y++) {
        char *row = ref_tok(r);
        ck_assert_msg(row && (int)strlen(row) == w, "%s: row %d", what, y);
        for (int x = 0; x < w; x++)
            bad += got[(size_t)y * w + x] != (float)(row[x] - '0');
    }
    ck_assert_msg(bad == 0, "%s: %d pixels differ from YOLOv5's", what, bad);
}

/* ------------------------------------------------------------------------------------------------
 * polygons2masks_overlap and the rasteriser
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_overlap_ref)
{
    ref_reader r;
    ref_open(&r);
    yc_mask_scratch ms = YC_MASK_SCRATCH_INIT;
    int cases = 0;
    while (ref_case(&r, "overlap")) {
        int ratio = (int)ref_num(&r), h = (int)ref_num(&r), w = (int)ref_num(&r);
        int np = (int)ref_num(&r);
        double *xy = malloc(2 * 64 * (size_t)np * sizeof *xy);
        size_t *first = malloc((size_t)np * sizeof *first);
        uint32_t *count = malloc((size_t)np * sizeof *count);
        int *order = malloc((size_t)np * sizeof *order);
        float *map = malloc((size_t)(h / ratio) * (w / ratio) * sizeof *map);
        ck_assert(xy && first && count && order && map);
        size_t at = 0;
        for (int k = 0; k < np; k++) {
            count[k] = (uint32_t)ref_num(&r);
            first[k] = at;
            for (uint32_t i = 0; i < 2 * count[k]; i++)
                xy[2 * at + i] = ref_num(&r);
            at += count[k];
        }
        ck_assert_int_eq(yc_polygons2masks_overlap(&ms, h, w, ratio, xy, first, count, np, map,
                                                   order),
                         YC_OK);
        for (int k = 0; k < np; k++)
            ck_assert_int_eq(order[k], (int)ref_num(&r));
        char what[64];
        snprintf(what, sizeof what, "overlap case %d (ratio %d)", cases, ratio);
        ref_mask(&r, h / ratio, w / ratio, map, what);
        free(xy);
        free(first);
        free(count);
        free(order);
        free(map);
        cases++;
    }
    ck_assert_int_eq(cases, 12);
    yc_mask_scratch_free(&ms);
    free(r.text);
}
END_TEST

/* The fill of simple shapes as cv2.fillPoly draws them (outline included), and the downsample
 * rule, checked by hand. */
START_TEST(test_fill_basics)
{
    yc_mask_scratch ms = YC_MASK_SCRATCH_INIT;
    uint8_t img[8 * 8];
    /* a 3x3 square from (2,2) to (4,4): the pixels 2..4 both ways */
    const int32_t sq[8] = {2, 2, 4, 2, 4, 4, 2, 4};
    memset(img, 0, sizeof img);
    ck_assert_int_eq(yc_fill_poly(&ms, img, 8, 8, sq, 4, 1), YC_OK);
    int n = 0;
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++) {
            bool in = x >= 2 && x <= 4 && y >= 2 && y <= 4;
            ck_assert_int_eq(img[y * 8 + x], in);
            n += img[y * 8 + x];
        }
    ck_assert_int_eq(n, 9);
    /* one point outside: nothing; one inside: that pixel */
    const int32_t out[2] = {-3, -4}, in[2] = {5, 6};
    memset(img, 0, sizeof img);
    ck_assert_int_eq(yc_fill_poly(&ms, img, 8, 8, out, 1, 1), YC_OK);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(img[i], 0);
    ck_assert_int_eq(yc_fill_poly(&ms, img, 8, 8, in, 1, 1), YC_OK);
    ck_assert_int_eq(img[6 * 8 + 5], 1);
    /* ratio 4: 2 of the 4 centre pixels set gives 1, one gives 0 */
    uint8_t src[8 * 8] = {0}, dst[4];
    src[1 * 8 + 1] = src[2 * 8 + 2] = 1; /* block (0,0): 2 of 4 */
    src[1 * 8 + 5] = 1;                  /* block (0,1): 1 of 4 */
    src[0 * 8 + 4] = src[3 * 8 + 7] = 1; /* block (0,1) corners: not sampled */
    src[6 * 8 + 1] = src[6 * 8 + 2] = src[5 * 8 + 1] = 1;
    yc_mask_downsample(src, 8, 8, 4, dst);
    ck_assert_int_eq(dst[0], 1);
    ck_assert_int_eq(dst[1], 0);
    ck_assert_int_eq(dst[2], 1);
    ck_assert_int_eq(dst[3], 0);
    uint8_t m[4];
    double bad[4] = {0, 0, 1, 1};
    ck_assert_int_eq(yc_polygon2mask(&ms, 6, 8, 4, bad, 2, m), YC_EUSAGE);
    yc_error_clear();
    /* a NaN and points far away (a perspective warp's): clamped, filled in bounded time */
    double far[8] = {NAN, 3, 1e12, -1e15, 7, 7, -1e9, 6e9};
    uint8_t big[8 * 8];
    double t0 = yc_now();
    ck_assert_int_eq(yc_polygon2mask(&ms, 8, 8, 1, far, 4, big), YC_OK);
    ck_assert_double_lt(yc_now() - t0, 2.0);
    yc_mask_scratch_free(&ms);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * random_perspective with segments
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_perspective_ref)
{
    ref_reader r;
    ref_open(&r);
    int cases = 0;
    while (ref_case(&r, "persp")) {
        int h = (int)ref_num(&r), w = (int)ref_num(&r), border = (int)ref_num(&r);
        bool persp = ref_num(&r) != 0;
        int n = (int)ref_num(&r), nout = (int)ref_num(&r);
        yc_persp_draw d;
        d.px = ref_num(&r);
        d.py = ref_num(&r);
        d.angle = ref_num(&r);
        d.scale = ref_num(&r);
        d.shx = ref_num(&r);
        d.shy = ref_num(&r);
        d.tx = ref_num(&r);
        d.ty = ref_num(&r);
        yc_labels labels = YC_LABELS_INIT;
        yc_segs segs = YC_SEGS_INIT, tmp = YC_SEGS_INIT;
        for (int k = 0; k < n; k++) {
            float v[5];
            for (int j = 0; j < 5; j++)
                v[j] = (float)ref_num(&r);
            ck_assert_int_eq(yc_labels_push(&labels, v[0], v[1], v[2], v[3], v[4]), YC_OK);
            uint32_t np = (uint32_t)ref_num(&r);
            float pts[64];
            ck_assert_uint_le(np, 32);
            for (uint32_t i = 0; i < 2 * np; i++)
                pts[i] = (float)ref_num(&r);
            ck_assert_int_eq(yc_segs_push_f32(&segs, pts, np), YC_OK);
        }
        int oh = h + 2 * border, ow = w + 2 * border;
        double M[9];
        yc_persp_matrix(&d, h, w, oh, ow, M);
        ck_assert_int_eq(yc_seg_warp_labels(&labels, &segs, &tmp, M, persp, d.scale, oh, ow),
                         YC_OK);
        ck_assert_int_eq(labels.n, nout);
        ck_assert_int_eq(segs.n, nout);
        for (int k = 0; k < nout; k++) {
            for (int j = 0; j < 5; j++) {
                double want = ref_num(&r), got = labels.v[5 * k + j];
                ck_assert_msg(fabs(got - want) <= 1e-4 * fmax(1, fabs(want)),
                              "case %d label %d value %d: %.9g, YOLOv5 %.9g", cases, k, j, got,
                              want);
            }
            ck_assert_uint_eq(segs.count[k], 1000);
            const double *p = segs.xy + 2 * segs.first[k];
            double want[8];
            for (int j = 0; j < 8; j++)
                want[j] = ref_num(&r);
            const double got[8] = {p[0], p[1], p[2], p[3], p[4], p[5], p[1998], p[1999]};
            for (int j = 0; j < 8; j++)
                ck_assert_msg(fabs(got[j] - want[j]) <= 1e-9 * fmax(1, fabs(want[j])),
                              "case %d polygon %d value %d: %.17g, YOLOv5 %.17g", cases, k, j,
                              got[j], want[j]);
        }
        yc_labels_free(&labels);
        yc_segs_free(&segs);
        yc_segs_free(&tmp);
        cases++;
    }
    ck_assert_int_eq(cases, 3);
    free(r.text);
}
END_TEST

/* copy_paste with its choices fixed: targets, the polygons added and the pixels changed. */
START_TEST(test_copy_paste_ref)
{
    ref_reader r;
    ref_open(&r);
    yc_mask_scratch ms = YC_MASK_SCRATCH_INIT;
    int cases = 0;
    while (ref_case(&r, "paste")) {
        int h = (int)ref_num(&r), w = (int)ref_num(&r), n = (int)ref_num(&r);
        int k = (int)ref_num(&r);
        int chosen[8];
        ck_assert_int_le(k, 8);
        for (int i = 0; i < k; i++)
            chosen[i] = (int)ref_num(&r);
        yc_labels labels = YC_LABELS_INIT;
        yc_segs segs = YC_SEGS_INIT;
        for (int j = 0; j < n; j++) {
            float v[5], pts[32];
            for (int q = 0; q < 5; q++)
                v[q] = (float)ref_num(&r);
            ck_assert_int_eq(yc_labels_push(&labels, v[0], v[1], v[2], v[3], v[4]), YC_OK);
            uint32_t np = (uint32_t)ref_num(&r);
            ck_assert_uint_le(np, 16);
            for (uint32_t q = 0; q < 2 * np; q++)
                pts[q] = (float)ref_num(&r);
            ck_assert_int_eq(yc_segs_push_f32(&segs, pts, np), YC_OK);
        }
        yc_image im = YC_IMAGE_INIT, orig = YC_IMAGE_INIT;
        ck_assert_int_eq(yc_image_reserve(&im, h, w), YC_OK);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                uint8_t *p = im.data + ((size_t)y * w + x) * 3;
                p[0] = (uint8_t)((x * 7 + y * 3) % 256);
                p[1] = (uint8_t)((x * 5 + y * 11) % 256);
                p[2] = (uint8_t)((x + y * 13) % 256);
            }
        ck_assert_int_eq(yc_image_copy(&orig, &im), YC_OK);
        ck_assert_int_eq(yc_seg_copy_paste_at(&im, &labels, &segs, chosen, k, &ms), YC_OK);
        ck_assert_int_eq(labels.n, (int)ref_num(&r));
        ck_assert_int_eq(segs.n, (int)ref_num(&r));
        for (int j = 0; j < labels.n; j++)
            for (int q = 0; q < 5; q++)
                ck_assert_float_eq(labels.v[5 * j + q], (float)ref_num(&r));
        for (int j = n; j < segs.n; j++) {
            ck_assert_uint_eq(segs.count[j], (uint32_t)ref_num(&r));
            for (uint32_t q = 0; q < 2 * segs.count[j]; q++)
                ck_assert_float_eq((float)segs.xy[2 * segs.first[j] + q], (float)ref_num(&r));
        }
        int nchanged = (int)ref_num(&r), seen = 0;
        for (int i = 0; i < h * w; i++) {
            if (memcmp(im.data + 3 * (size_t)i, orig.data + 3 * (size_t)i, 3) == 0)
                continue;
            ck_assert_int_lt(seen, nchanged);
            ck_assert_int_eq(i, (int)ref_num(&r));
            seen++;
        }
        ck_assert_int_eq(seen, nchanged);
        ck_assert_int_gt(nchanged, 50);
        yc_image_free(&im);
        yc_image_free(&orig);
        yc_labels_free(&labels);
        yc_segs_free(&segs);
        cases++;
    }
    ck_assert_int_eq(cases, 2);
    yc_mask_scratch_free(&ms);
    free(r.text);
}
END_TEST

/* resample_segments and segment2box on hand-checked values. */
START_TEST(test_resample_box)
{
    yc_segs s = YC_SEGS_INIT, o = YC_SEGS_INIT;
    const double tri[6] = {0, 0, 3, 0, 3, 3};
    ck_assert_int_eq(yc_segs_push(&s, tri, 3), YC_OK);
    ck_assert_int_eq(yc_segs_resample(&s, &o, 7), YC_OK);
    /* closed: 4 points over index 0..3 at 7 samples: steps of 0.5 */
    const double want[14] = {0, 0, 1.5, 0, 3, 0, 3, 1.5, 3, 3, 1.5, 1.5, 0, 0};
    ck_assert_int_eq(o.n, 1);
    ck_assert_uint_eq(o.count[0], 7);
    for (int i = 0; i < 14; i++)
        ck_assert_double_eq_tol(o.xy[i], want[i], 1e-15);
    double box[4];
    const double pts[8] = {-5, 1, 2, 3, 4, 9, 7, 2};
    yc_segment2box(pts, 4, 8, 8, box);
    ck_assert(box[0] == 2 && box[1] == 2 && box[2] == 7 && box[3] == 3);
    const double zero_x[4] = {0, 1, 0, 5};
    yc_segment2box(zero_x, 2, 6, 8, box);
    ck_assert(box[0] == 0 && box[1] == 0 && box[2] == 0 && box[3] == 0);
    yc_segs_free(&s);
    yc_segs_free(&o);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Labels
 * ---------------------------------------------------------------------------------------------- */

START_TEST(test_parse_polygons)
{
    yc_box *b;
    uint32_t *cnt;
    float *pts;
    size_t n, removed, npts;
    char why[256];
    /* a segment file: the box row becomes a 2-point polygon, as in YOLOv5 */
    const char *t1 = "1 0.1 0.2 0.5 0.2 0.5 0.6 0.1 0.6\n0 0.5 0.5 0.2 0.2\n";
    ck_assert_int_eq(yc_labels_parse_polygons(t1, strlen(t1), &b, &n, &removed, &cnt, &pts, &npts,
                                              why, sizeof why),
                     YC_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(npts, 6);
    ck_assert_uint_eq(cnt[0], 4);
    ck_assert_uint_eq(cnt[1], 2);
    ck_assert_float_eq_tol(b[0].x, 0.3f, 1e-7);
    ck_assert_float_eq_tol(b[0].h, 0.4f, 1e-7);
    ck_assert_float_eq_tol(b[1].x, 0.35f, 1e-7);
    ck_assert_float_eq_tol(b[1].w, 0.3f, 1e-7);
    ck_assert(pts[8] == 0.5f && pts[11] == 0.2f);
    free(b);
    free(cnt);
    free(pts);
    /* a box file keeps no polygons */
    const char *t2 = "0 0.5 0.5 0.2 0.2\n";
    ck_assert_int_eq(yc_labels_parse_polygons(t2, strlen(t2), &b, &n, &removed, &cnt, &pts, &npts,
                                              why, sizeof why),
                     YC_OK);
    ck_assert(n == 1 && cnt == NULL && pts == NULL && npts == 0);
    free(b);
    /* duplicates: the polygon of the first kept, the others' points dropped */
    const char *t3 = "0 0.1 0.1 0.3 0.1 0.3 0.3\n0 0.1 0.1 0.3 0.1 0.3 0.3 0.2 0.2\n"
                     "1 0.5 0.5 0.6 0.5 0.6 0.6\n";
    ck_assert_int_eq(yc_labels_parse_polygons(t3, strlen(t3), &b, &n, &removed, &cnt, &pts, &npts,
                                              why, sizeof why),
                     YC_OK);
    ck_assert(n == 2 && removed == 1 && npts == 6 && cnt[0] == 3 && cnt[1] == 3);
    ck_assert(pts[6] == 0.5f && pts[11] == 0.6f && b[1].cls == 1);
    free(b);
    free(cnt);
    free(pts);
    /* malformed polygons */
    struct {
        const char *text, *why;
    } bad[] = {
        {"0 0.1 0.1 0.3 0.1 0.3 0.3 0.2\n", "polygon with an odd number of coordinates (7) (line 1)"},
        {"0 0.1 0.1 0.3 0.1 0.3 0.3\n\n2\n", "polygon without points (line 3)"},
        {"0 0.1 0.1 0.3 0.1 0.3 1.7\n", "non-normalized or out of bounds coordinate 1.6 (line 1)"},
        {"0 0.1 0.1 0.3 0.1 0.3 nan\n", "non-finite label value nan (line 1)"},
        {"0 0.1 0.1 0.3 0.1 0.3 x\n", "invalid label value 'x' (line 1)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(yc_labels_parse_polygons(bad[i].text, strlen(bad[i].text), &b, &n,
                                                  &removed, &cnt, &pts, &npts, why, sizeof why),
                         YC_EFORMAT);
        ck_assert_str_eq(why, bad[i].why);
        ck_assert(b == NULL && cnt == NULL && pts == NULL && n == 0);
    }
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * The tiny polygon dataset
 * ---------------------------------------------------------------------------------------------- */

static const char *const fixture_files[] = {"a", "b", "c", "d", "e"};

/* Copies tests/data/segdata/{images,labels} into the scratch directory (the scan writes its
 * cache beside the labels) and returns the images directory. */
static const char *copy_fixture(void)
{
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s", yc_harness_tmp("segdata/images"));
    ck_assert_int_eq(yc_mkdirs(dir), YC_OK);
    ck_assert_int_eq(yc_mkdirs(yc_harness_tmp("segdata/labels")), YC_OK);
    for (size_t i = 0; i < sizeof fixture_files / sizeof *fixture_files; i++) {
        for (int k = 0; k < 2; k++) {
            char rel[256];
            snprintf(rel, sizeof rel, "segdata/%s/%s.%s", k ? "labels" : "images",
                     fixture_files[i], k ? "txt" : "png");
            char *data;
            size_t len;
            ck_assert_msg(yc_read_file(yc_harness_test_data("%s", rel), &data, &len) == YC_OK, "%s",
                          yc_last_error());
            ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("%s", rel), data, len), YC_OK);
            free(data);
        }
    }
    return dir;
}

static void load_fixture(yc_dataset *ds, bool quiet)
{
    const char *dir = copy_fixture();
    yc_dataset_options o = {.nc = 3, .quiet = quiet, .threads = 2};
    ck_assert_msg(yc_dataset_load(&dir, 1, &o, ds) == YC_OK, "%s", yc_last_error());
}

START_TEST(test_dataset_polygons)
{
    yc_dataset ds, again;
    load_fixture(&ds, true);
    ck_assert(ds.has_polygons);
    ck_assert_uint_eq(ds.n, 4);
    ck_assert_uint_eq(ds.n_corrupt, 1);
    ck_assert_str_eq(ds.notes[0].text, "polygon with an odd number of coordinates (7) (line 1)");
    ck_assert_uint_eq(ds.n_boxes, 2 + 3 + 1 + 1);
    /* a.png: 6 and 10 points; d.png (boxes): the corners */
    const yc_polygon *pa = yc_dataset_polygons(&ds, 0);
    ck_assert(pa[0].n == 6 && pa[1].n == 10);
    const yc_polygon *pd = yc_dataset_polygons(&ds, 3);
    const yc_box *bd = yc_dataset_boxes(&ds, 3);
    ck_assert_uint_eq(pd[0].n, 4);
    const float *c = ds.points + 2 * pd[0].first;
    ck_assert_float_eq_tol(c[0], bd[0].x - bd[0].w / 2, 1e-7);
    ck_assert_float_eq_tol(c[5], bd[0].y + bd[0].h / 2, 1e-7);
    /* every box is its polygon's extent (segments2boxes) */
    for (size_t i = 0; i < 3; i++) {
        const yc_polygon *pg = yc_dataset_polygons(&ds, i);
        const yc_box *b = yc_dataset_boxes(&ds, i);
        for (uint32_t k = 0; k < ds.samples[i].n_boxes; k++) {
            float x1 = 1, x2 = 0;
            for (uint32_t q = 0; q < pg[k].n; q++) {
                float x = ds.points[2 * (pg[k].first + q)];
                x1 = x < x1 ? x : x1;
                x2 = x > x2 ? x : x2;
            }
            ck_assert_float_eq_tol(b[k].w, x2 - x1, 1e-7);
        }
    }
    /* the cache gives the same polygons */
    const char *dir = yc_harness_tmp("segdata/images");
    yc_dataset_options o = {.nc = 3, .quiet = true, .threads = 2};
    ck_assert_int_eq(yc_dataset_load(&dir, 1, &o, &again), YC_OK);
    ck_assert_uint_eq(again.n_verified, 0);
    ck_assert(again.has_polygons);
    ck_assert_uint_eq(again.n_points, ds.n_points);
    ck_assert_mem_eq(again.points, ds.points, 2 * ds.n_points * sizeof *ds.points);
    ck_assert_mem_eq(again.polygons, ds.polygons, ds.n_boxes * sizeof *ds.polygons);
    yc_dataset_free(&again);
    yc_dataset_free(&ds);
}
END_TEST

/* The name of a batch image's file ("a.png"). */
static const char *base_name(const yc_dataset *ds, int sample)
{
    const char *p = strrchr(ds->samples[sample].image, '/');
    return p ? p + 1 : ds->samples[sample].image;
}

START_TEST(test_val_batches_ref)
{
    yc_dataset ds;
    load_fixture(&ds, true);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    for (int pass = 0; pass < 2; pass++) {
        bool overlap = pass == 0;
        int ratio = overlap ? 4 : 2;
        yc_loader_options o = {.ds = &ds, .train = false, .hyp = &hyp, .imgsz = 128, .batch = 2,
                               .rect = true, .pad = 0.5, .stride = 32, .workers = 1, .seed = 1,
                               .masks = true, .mask_ratio = ratio, .no_overlap = !overlap};
        yc_loader *l;
        ck_assert_msg(yc_loader_new(&l, &o) == YC_OK, "%s", yc_last_error());
        ck_assert_int_eq(yc_loader_start(l, 0, NULL, 0), YC_OK);
        const yc_batch *b;
        int checked = 0;
        while (yc_loader_next(l, &b) == YC_OK && b) {
            ck_assert_ptr_nonnull(b->masks);
            ck_assert_int_eq(b->mask_h, b->h / ratio);
            ck_assert_int_eq(b->mask_w, b->w / ratio);
            ck_assert_int_eq(b->mask_n, overlap ? b->n : b->nt);
            size_t m = (size_t)b->mask_h * b->mask_w;
            int t0 = 0;
            for (int i = 0; i < b->n; i++) {
                int nt = 0;
                while (t0 + nt < b->nt && b->targets[6 * (t0 + nt)] == (float)i)
                    nt++;
                const char *name = base_name(&ds, b->sample[i]);
                if (strcmp(name, "d.png") == 0) {
                    t0 += nt;
                    continue;
                }
                ref_reader r;
                ref_open(&r);
                bool found = false;
                while (!found && ref_case(&r, "val")) {
                    int ov = (int)ref_num(&r), ra = (int)ref_num(&r);
                    found = ov == overlap && ra == ratio && strcmp(ref_tok(&r), name) == 0;
                }
                ck_assert_msg(found, "%s not in seg_ref.txt", name);
                ck_assert_int_eq((int)ref_num(&r), b->h);
                ck_assert_int_eq((int)ref_num(&r), b->w);
                ck_assert_int_eq((int)ref_num(&r), nt);
                int mn = (int)ref_num(&r);
                ck_assert_int_eq(mn, overlap ? 1 : nt);
                ck_assert_int_eq((int)ref_num(&r), b->mask_h);
                ck_assert_int_eq((int)ref_num(&r), b->mask_w);
                for (int k = 0; k < nt; k++)
                    for (int j = 0; j < 5; j++) {
                        double want = ref_num(&r), got = b->targets[6 * (t0 + k) + 1 + j];
                        ck_assert_msg(fabs(got - want) <= 1e-6, "%s target %d value %d: %.9g, "
                                      "YOLOv5 %.9g", name, k, j, got, want);
                    }
                for (int k = 0; k < mn; k++) {
                    char what[64];
                    snprintf(what, sizeof what, "%s mask %d (overlap %d)", name, k, overlap);
                    ref_mask(&r, b->mask_h, b->mask_w,
                             b->masks + (overlap ? (size_t)i : (size_t)(t0 + k)) * m, what);
                }
                free(r.text);
                t0 += nt;
                checked++;
            }
        }
        ck_assert_int_eq(checked, 3);
        yc_loader_free(l);
    }
    yc_dataset_free(&ds);
}
END_TEST

/* Every set mask pixel of target k lies within its box: the pixel's centre in image pixels
 * within the box grown by the ratio (the downsampling samples the pixels around the centre). */
static void check_masks_in_boxes(const yc_batch *b, int ratio, bool overlap, int *set_pixels)
{
    size_t m = (size_t)b->mask_h * b->mask_w;
    int t0 = 0;
    for (int i = 0; i < b->n; i++) {
        int nt = 0;
        while (t0 + nt < b->nt && b->targets[6 * (t0 + nt)] == (float)i)
            nt++;
        for (int k = 0; k < nt; k++) {
            const float *t = b->targets + 6 * (t0 + k);
            double x1 = (t[2] - t[4] / 2) * b->w - ratio, x2 = (t[2] + t[4] / 2) * b->w + ratio;
            double y1 = (t[3] - t[5] / 2) * b->h - ratio, y2 = (t[3] + t[5] / 2) * b->h + ratio;
            const float *mk = b->masks + (overlap ? (size_t)i : (size_t)(t0 + k)) * m;
            float want = overlap ? (float)(k + 1) : 1.0f;
            for (int y = 0; y < b->mask_h; y++)
                for (int x = 0; x < b->mask_w; x++) {
                    if (mk[(size_t)y * b->mask_w + x] != want)
                        continue;
                    double cx = (x + 0.5) * ratio, cy = (y + 0.5) * ratio;
                    ck_assert_msg(cx >= x1 && cx <= x2 && cy >= y1 && cy <= y2,
                                  "batch %d image %d target %d: mask pixel (%d, %d) outside its "
                                  "box", b->index, i, k, x, y);
                    (*set_pixels)++;
                }
        }
        if (overlap) {
            const float *mk = b->masks + (size_t)i * m;
            for (size_t p = 0; p < m; p++)
                ck_assert_msg(mk[p] >= 0 && mk[p] <= (float)nt && mk[p] == floorf(mk[p]),
                              "image %d: mask value %g with %d targets", i, mk[p], nt);
        }
        t0 += nt;
    }
}

/* Whether image pixel p (CHW planes of `plane` pixels) is coloured: the fixture's shapes are, its
 * backgrounds and the padding are grey. */
static bool coloured(const uint8_t *img, size_t plane, size_t p)
{
    int r = img[p], g = img[plane + p], bl = img[2 * plane + p];
    int hi = r > g ? (r > bl ? r : bl) : (g > bl ? g : bl);
    int lo = r < g ? (r < bl ? r : bl) : (g < bl ? g : bl);
    return hi - lo > 20;
}

/* Counts the set mask pixels with a coloured image pixel among the 2 x 2 the downsampling reads
 * (ratio even). */
static void count_on_shapes(const yc_batch *b, int ratio, bool overlap, int *on, int *all)
{
    size_t m = (size_t)b->mask_h * b->mask_w, plane = (size_t)b->h * b->w;
    int t0 = 0;
    for (int i = 0; i < b->n; i++) {
        int nt = 0;
        while (t0 + nt < b->nt && b->targets[6 * (t0 + nt)] == (float)i)
            nt++;
        const uint8_t *img = b->images + (size_t)i * 3 * plane;
        for (int k = 0; k < (overlap ? 1 : nt); k++) {
            const float *mk = b->masks + (overlap ? (size_t)i : (size_t)(t0 + k)) * m;
            for (int y = 0; y < b->mask_h; y++)
                for (int x = 0; x < b->mask_w; x++) {
                    if (mk[(size_t)y * b->mask_w + x] == 0)
                        continue;
                    size_t p = (size_t)(y * ratio + ratio / 2 - 1) * b->w + x * ratio + ratio / 2 - 1;
                    *on += coloured(img, plane, p) || coloured(img, plane, p + 1) ||
                           coloured(img, plane, p + b->w) || coloured(img, plane, p + b->w + 1);
                    (*all)++;
                }
        }
        t0 += nt;
    }
}

START_TEST(test_train_batches)
{
    yc_dataset ds;
    load_fixture(&ds, true);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    hyp.degrees = 10;
    hyp.flipud = 0.5;
    for (int pass = 0; pass < 5; pass++) {
        bool overlap = pass != 1;
        hyp.copy_paste = pass == 2 ? 0.5 : 0.0;
        /* passes 3 and 4: no colour change, no blending: the masks must cover the shapes'
         * pixels; pass 4 without mosaic, in rectangular batches (--rect) */
        hyp.mixup = pass >= 3 ? 0.0 : 0.5;
        hyp.hsv_h = hyp.hsv_s = hyp.hsv_v = pass >= 3 ? 0.0 : 0.5;
        hyp.mosaic = pass == 4 ? 0.0 : 1.0;
        int ratio = pass == 1 ? 2 : 4;
        yc_loader_options o = {.ds = &ds, .train = true, .hyp = &hyp,
                               .imgsz = pass == 4 ? 128 : 64, .batch = 2,
                               .stride = 32, .workers = 2, .seed = 7, .masks = true,
                               .mask_ratio = ratio, .no_overlap = !overlap, .rect = pass == 4};
        yc_loader *l;
        ck_assert_msg(yc_loader_new(&l, &o) == YC_OK, "%s", yc_last_error());
        int set = 0, targets = 0, on = 0, all = 0, non_square = 0;
        for (int epoch = 0; epoch < 6; epoch++) {
            ck_assert_int_eq(yc_loader_start(l, epoch, NULL, 0), YC_OK);
            const yc_batch *b;
            while (yc_loader_next(l, &b) == YC_OK && b) {
                ck_assert_int_eq(b->n, 2);
                ck_assert_int_eq(b->mask_h, b->h / ratio);
                ck_assert_int_eq(b->mask_w, b->w / ratio);
                non_square += b->h != b->w;
                ck_assert_int_eq(b->mask_n, overlap ? b->n : b->nt);
                check_masks_in_boxes(b, ratio, overlap, &set);
                count_on_shapes(b, ratio, overlap, &on, &all);
                targets += b->nt;
            }
        }
        ck_assert_int_gt(targets, 10);
        ck_assert_int_gt(set, 10 * targets);
        ck_assert(pass == 4 ? non_square > 0 : non_square == 0);
        if (pass >= 3)
            ck_assert_msg(on >= 0.99 * all, "%d of %d mask pixels on the shapes", on, all);
        yc_loader_free(l);
    }
    yc_dataset_free(&ds);
}
END_TEST

START_TEST(test_loader_refusals)
{
    yc_dataset ds;
    load_fixture(&ds, true);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loader *l;
    yc_loader_options o = {.ds = &ds, .train = true, .hyp = &hyp, .imgsz = 64, .batch = 4,
                           .stride = 32, .workers = 1, .masks = true, .quad = true};
    ck_assert_int_eq(yc_loader_new(&l, &o), YC_EUSAGE);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "--quad"));
    o.quad = false;
    o.mask_ratio = 3;
    ck_assert_int_eq(yc_loader_new(&l, &o), YC_EUSAGE);
    yc_dataset_free(&ds);
    /* a dataset of boxes only */
    yc_dataset boxes;
    ck_assert_int_eq(yc_mkdirs(yc_harness_tmp("boxes/images")), YC_OK);
    ck_assert_int_eq(yc_mkdirs(yc_harness_tmp("boxes/labels")), YC_OK);
    char *png;
    size_t len;
    ck_assert_int_eq(yc_read_file(yc_harness_test_data("segdata/images/d.png"), &png, &len),
                     YC_OK);
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("boxes/images/d.png"), png, len), YC_OK);
    free(png);
    const char *lab = "0 0.5 0.5 0.2 0.2\n";
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("boxes/labels/d.txt"), lab, strlen(lab)),
                     YC_OK);
    const char *dir = yc_harness_tmp("boxes/images");
    yc_dataset_options dopt = {.nc = 1, .quiet = true, .threads = 2};
    ck_assert_int_eq(yc_dataset_load(&dir, 1, &dopt, &boxes), YC_OK);
    ck_assert(!boxes.has_polygons && boxes.polygons == NULL);
    o.ds = &boxes;
    o.mask_ratio = 0;
    ck_assert_int_eq(yc_loader_new(&l, &o), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "no polygon labels"));
    /* detection batches of it carry no masks */
    o.masks = false;
    ck_assert_int_eq(yc_loader_new(&l, &o), YC_OK);
    ck_assert_int_eq(yc_loader_start(l, 0, NULL, 0), YC_OK);
    const yc_batch *b;
    ck_assert_int_eq(yc_loader_next(l, &b), YC_OK);
    ck_assert(b && b->masks == NULL && b->mask_n == 0);
    yc_loader_free(l);
    yc_dataset_free(&boxes);
    yc_error_clear();
}
END_TEST

static Suite *seg_data_suite(void)
{
    Suite *s = suite_create("seg_data");
    TCase *tc = tcase_create("seg_data");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fill_basics);
    tcase_add_test(tc, test_overlap_ref);
    tcase_add_test(tc, test_resample_box);
    tcase_add_test(tc, test_perspective_ref);
    tcase_add_test(tc, test_copy_paste_ref);
    tcase_add_test(tc, test_parse_polygons);
    tcase_add_test(tc, test_dataset_polygons);
    tcase_add_test(tc, test_val_batches_ref);
    tcase_add_test(tc, test_train_batches);
    tcase_add_test(tc, test_loader_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_main(seg_data_suite(), "seg_data");
}
