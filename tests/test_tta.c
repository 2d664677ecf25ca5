/* Tests of test-time augmentation (tta.h) against hand-computed cases: scale_img's sizes (gs
 * rounding of 0.83 and 0.67 on square and rectangular inputs), its bilinear sampling (a linear
 * ramp, where bilinear interpolation is exact, so every output is 10 * y_src + x_src at the
 * source coordinates PyTorch computes), the left-right flip, the 0.447 padding and the clamp at
 * the edges; _descale_pred; _clip_augmented's cuts for P5 and P6 models, which are whole Detect
 * levels; and yc_tta_predict on the tiny model against its plain forward (pass 1) and the pieces
 * (passes 2 and 3).  Also detect --visualize's pieces (visualize.h): the .npy header and data, the
 * incremented directories, and the feature maps of the tiny model from a graph that keeps every
 * layer's output (its heads bit-identical to a plain graph's, its early layers intact after the
 * whole forward where a plain graph has reused their storage). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "detect.h"
#include "graph.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "nms.h"
#include "tta.h"
#include "visualize.h"
#include "harness.h"
#include "yctest.h"

START_TEST(test_shapes)
{
    int rh, rw, ph, pw;
    /* 640 * 0.83 = 531.2 -> 531, padded to ceil(16.6) * 32 = 544 */
    yc_tta_shape(640, 640, 0.83, 32, &rh, &rw, &ph, &pw);
    ck_assert_int_eq(rh, 531);
    ck_assert_int_eq(rw, 531);
    ck_assert_int_eq(ph, 544);
    ck_assert_int_eq(pw, 544);
    /* 640 * 0.67 = 428.8 -> 428, ceil(13.4) * 32 = 448 */
    yc_tta_shape(640, 640, 0.67, 32, &rh, &rw, &ph, &pw);
    ck_assert_int_eq(rh, 428);
    ck_assert_int_eq(ph, 448);
    /* rectangular 384 x 640: 318.72 -> 318 (ceil(9.96) = 10: 320); 257.28 -> 257 (ceil(8.04) =
     * 9: 288) */
    yc_tta_shape(384, 640, 0.83, 32, &rh, &rw, &ph, &pw);
    ck_assert_int_eq(rh, 318);
    ck_assert_int_eq(ph, 320);
    ck_assert_int_eq(rw, 531);
    ck_assert_int_eq(pw, 544);
    yc_tta_shape(384, 640, 0.67, 32, &rh, &rw, &ph, &pw);
    ck_assert_int_eq(rh, 257);
    ck_assert_int_eq(ph, 288);
    ck_assert_int_eq(rw, 428);
    ck_assert_int_eq(pw, 448);
    /* gs 64 (P6): 640 * 0.67 / 64 = 6.7 -> 448 */
    yc_tta_shape(640, 640, 0.67, 64, &rh, &rw, &ph, &pw);
    ck_assert_int_eq(ph, 448);
    yc_tta_shape(640, 640, 0.83, 64, &rh, &rw, &ph, &pw);
    ck_assert_int_eq(ph, 576);
    /* scale 1: unchanged */
    yc_tta_shape(352, 640, 1.0, 32, &rh, &rw, &ph, &pw);
    ck_assert(rh == 352 && ph == 352 && rw == 640 && pw == 640);
    ck_assert(yc_tta_scales[0] == 1.0 && yc_tta_scales[1] == 0.83 && yc_tta_scales[2] == 0.67);
    ck_assert(!yc_tta_flip_lr[0] && yc_tta_flip_lr[1] && !yc_tta_flip_lr[2]);
}
END_TEST

/* A 4x4 ramp v = 10 * y + x scaled by 0.75 with gs 4: 3x3 resized, padded to 4x4.  PyTorch's
 * source coordinates: scale = 4/3 in float32, (i + 0.5) * scale - 0.5 = 1/6, 3/2, 17/6. */
START_TEST(test_scale_img_ramp)
{
    float src[16], dst[16];
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++)
            src[y * 4 + x] = (float)(10 * y + x);
    const double s[3] = {1.0 / 6, 1.5, 17.0 / 6};
    for (int flip = 0; flip < 2; flip++) {
        ck_assert_int_eq(yc_tta_scale_img(src, 1, 4, 4, 0.75, flip, 4, dst), YC_OK);
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 4; x++) {
                double want;
                if (y == 3 || x == 3)
                    want = 0.447; /* padding */
                else /* flipped: column c of the flipped ramp has value 3 - c */
                    want = 10 * s[y] + (flip ? 3 - s[x] : s[x]);
                ck_assert_msg(fabs(dst[y * 4 + x] - want) < 1e-5, "flip %d (%d, %d): %g, want %g",
                              flip, y, x, (double)dst[y * 4 + x], want);
            }
    }
    /* ratio 0.5 with gs 2: every output the mean of a 2x2 block (source 0.5 and 2.5) */
    ck_assert_int_eq(yc_tta_scale_img(src, 1, 4, 4, 0.5, false, 2, dst), YC_OK);
    ck_assert(fabsf(dst[0] - 5.5f) < 1e-5f && fabsf(dst[1] - 7.5f) < 1e-5f);
    ck_assert(fabsf(dst[2] - 25.5f) < 1e-5f && fabsf(dst[3] - 27.5f) < 1e-5f);
}
END_TEST

/* Upsampling a 2x2 image to 4x4 (ratio 2): source coordinates -0.25 (clamped to 0), 0.25, 0.75,
 * 1.25 (the upper neighbour clamped at the edge); channels are independent. */
START_TEST(test_scale_img_edges)
{
    const float src[8] = {0, 1, 2, 3, /* channel 1: */ 4, 4, 4, 4};
    float dst[32];
    ck_assert_int_eq(yc_tta_scale_img(src, 2, 2, 2, 2.0, false, 1, dst), YC_OK);
    const double c[4] = {0, 0.25, 0.75, 1};
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) {
            double want = 2 * c[y] + c[x];
            ck_assert_msg(fabs(dst[y * 4 + x] - want) < 1e-6, "(%d, %d): %g want %g", y, x,
                          (double)dst[y * 4 + x], want);
            ck_assert(dst[16 + y * 4 + x] == 4.0f);
        }
    /* scale 1 with the flip: the columns mirrored, nothing resampled */
    const float row[6] = {1, 2, 3, 4, 5, 6};
    float out[6];
    ck_assert_int_eq(yc_tta_scale_img(row, 1, 2, 3, 1.0, true, 1, out), YC_OK);
    ck_assert(out[0] == 3 && out[1] == 2 && out[2] == 1 && out[3] == 6 && out[4] == 5 &&
              out[5] == 4);
}
END_TEST

START_TEST(test_descale)
{
    /* two rows of 7 (cx, cy, w, h, obj, cls0, cls1) */
    float r[14] = {100, 50, 20, 10, 0.9f, 0.5f, 0.25f, 0, 0, 0, 0, 0.1f, 0.2f, 0.3f};
    yc_tta_descale(r, 2, 7, 0.83, true, 640);
    ck_assert(r[0] == 640.0f - 100.0f / 0.83f);
    ck_assert(fabsf(r[0] - 519.518072f) < 1e-3f);
    ck_assert(fabsf(r[1] - 60.240964f) < 1e-4f);
    ck_assert(fabsf(r[2] - 24.096386f) < 1e-4f && fabsf(r[3] - 12.048193f) < 1e-4f);
    ck_assert(r[4] == 0.9f && r[5] == 0.5f && r[6] == 0.25f); /* scores untouched */
    ck_assert(r[7] == 640.0f);                                 /* cx 0 mirrored */
    float q[4] = {67, 67, 6.7f, 0};
    yc_tta_descale(q, 1, 4, 0.67, false, 640);
    ck_assert(fabsf(q[0] - 100) < 1e-4f && fabsf(q[1] - 100) < 1e-4f && fabsf(q[2] - 10) < 1e-5f);
}
END_TEST

START_TEST(test_clip)
{
    size_t first, count;
    /* P5 at 640: 3 * (80^2 + 40^2 + 20^2) = 25200 rows; the P5 level (3 * 20^2) goes */
    yc_tta_clip(25200, 3, 0, &first, &count);
    ck_assert(first == 0 && count == 25200 - 1200);
    /* the 0.83 pass (544): everything */
    yc_tta_clip(3 * (68 * 68 + 34 * 34 + 17 * 17), 3, 1, &first, &count);
    ck_assert(first == 0 && count == 18207);
    /* the 0.67 pass (448): the P3 level (3 * 56^2 = 9408) goes */
    yc_tta_clip(3 * (56 * 56 + 28 * 28 + 14 * 14), 3, 2, &first, &count);
    ck_assert(first == 9408 && count == 12348 - 9408);
    /* rectangular 384 x 640 at scale 1: P5 is 3 * 12 * 20 = 720 */
    yc_tta_clip(3 * (48 * 80 + 24 * 40 + 12 * 20), 3, 0, &first, &count);
    ck_assert(first == 0 && count == 3 * (48 * 80 + 24 * 40));
    /* P6 at 640 (strides 8..64): g = 85; P6 is 3 * 10^2 = 300, P3 3 * 80^2 = 19200 */
    yc_tta_clip(3 * (6400 + 1600 + 400 + 100), 4, 0, &first, &count);
    ck_assert(first == 0 && count == 25500 - 300);
    yc_tta_clip(3 * (6400 + 1600 + 400 + 100), 4, 2, &first, &count);
    ck_assert(first == 19200 && count == 300 + 1200 + 4800);
}
END_TEST

/* The decoded rows of one plain eval forward of `input` (n x 3 x h x w) for image b. */
static float *plain_rows(yc_model *m, const float *input, int n, int h, int w, int b,
                         size_t *rows)
{
    yc_graph *g = NULL;
    ck_assert_int_eq(yc_graph_new(&g, m, n, h, w, YC_GRAPH_EVAL), YC_OK);
    ck_assert_int_eq(yc_graph_alloc(g), YC_OK);
    ck_assert_int_eq(yc_tensor_set_f32(m->be, yc_graph_input(g), input), YC_OK);
    ck_assert_int_eq(yc_graph_forward(g), YC_OK);
    ck_assert_int_eq(m->be->iface->synchronize(m->be), YC_OK);
    yc_detect_level lv[8];
    float *heads[8];
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(g, l);
        heads[l] = malloc(yc_tensor_elems(t) * sizeof(float));
        ck_assert_ptr_nonnull(heads[l]);
        ck_assert_int_eq(yc_tensor_get_f32(m->be, t, heads[l]), YC_OK);
        lv[l] = (yc_detect_level){.p = heads[l], .ny = t->h, .nx = t->w,
                                  .img_stride = yc_tensor_image_elems(t), .stride = m->stride[l]};
    }
    *rows = yc_detect_rows(lv, m->nl, m->na);
    float *out = malloc(*rows * (size_t)m->no * sizeof *out);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(yc_detect_decode(lv, m->nl, m->na, m->no, m->anchors, b, out), YC_OK);
    for (int l = 0; l < m->nl; l++)
        free(heads[l]);
    yc_graph_free(g);
    return out;
}

/* yc_tta_predict on the tiny model, two 64 x 96 images: pass 1 is the plain forward without its
 * last level; pass 2 the plain forward of the flipped, scaled image (scale_img by hand through
 * yc_tta_scale_img), descaled; pass 3 starts after the scaled image's P3 level. */
START_TEST(test_predict)
{
    yc_backend *be = NULL;
    yc_harness_cpu(&be, 1);
    yc_model *m = yc_harness_tiny_model(be, 0, 3);
    const int n = 2, h = 64, w = 96, no = m->no, gs = (int)m->stride[m->nl - 1];
    ck_assert_int_eq(gs, 32);
    float *input = malloc((size_t)n * 3 * h * w * sizeof *input);
    ck_assert_ptr_nonnull(input);
    for (size_t i = 0; i < (size_t)n * 3 * h * w; i++)
        input[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    yc_tta *t = NULL;
    ck_assert_int_eq(yc_tta_new(&t, m, false, NULL), YC_OK);
    const float *rows;
    size_t per;
    ck_assert_int_eq(yc_tta_predict(t, input, n, h, w, &rows, &per), YC_OK);
    /* scale 1: 3 * (8*12 + 4*6 + 2*3) = 378, less P5 (18); 0.83: 53 x 79 in 64 x 96: 378;
     * 0.67: 42 x 64 (64.32) in 64 x 96 (ceil(2.01) * 32): 378, less P3 (288) */
    ck_assert_uint_eq(per, 360 + 378 + 90);
    const int b = 1;
    const float *mine = rows + (size_t)b * per * no;

    size_t r0;
    float *p0 = plain_rows(m, input, n, h, w, b, &r0);
    ck_assert_uint_eq(r0, 378);
    ck_assert(memcmp(mine, p0, 360 * (size_t)no * sizeof(float)) == 0);
    free(p0);

    for (int p = 1; p < 3; p++) {
        int rh, rw, ph, pw;
        yc_tta_shape(h, w, yc_tta_scales[p], gs, &rh, &rw, &ph, &pw);
        float *scaled = malloc((size_t)n * 3 * ph * pw * sizeof *scaled);
        ck_assert_ptr_nonnull(scaled);
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(yc_tta_scale_img(input + (size_t)i * 3 * h * w, 3, h, w,
                                              yc_tta_scales[p], yc_tta_flip_lr[p], gs,
                                              scaled + (size_t)i * 3 * ph * pw), YC_OK);
        size_t rp;
        float *pp = plain_rows(m, scaled, n, ph, pw, b, &rp);
        ck_assert(ph == 64 && pw == 96 && rh == (p == 1 ? 53 : 42) && rw == (p == 1 ? 79 : 64));
        size_t first = p == 1 ? 0 : 288, cnt = p == 1 ? 378 : 90, at = p == 1 ? 360 : 738;
        ck_assert_uint_eq(rp, 378);
        yc_tta_descale(pp + first * no, cnt, no, yc_tta_scales[p], yc_tta_flip_lr[p], w);
        ck_assert(memcmp(mine + at * no, pp + first * no, cnt * (size_t)no * sizeof(float)) == 0);
        /* a flipped, descaled centre lies in the unscaled image's width */
        for (size_t r = 0; r < cnt; r++)
            ck_assert(mine[(at + r) * no] > -w && mine[(at + r) * no] < 2 * w);
        free(pp);
        free(scaled);
    }
    /* a shape that is not a multiple of the stride is refused */
    ck_assert_int_eq(yc_tta_predict(t, input, 1, 40, 64, &rows, &per), YC_EUSAGE);
    yc_tta_free(t);
    free(input);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

START_TEST(test_npy)
{
    yc_harness_tmpdir_make("npy");
    const float v[6] = {1, 2, 3, 4, 5, 6.5f};
    const int shape[2] = {2, 3}, one[1] = {6};
    ck_assert_int_eq(yc_write_npy(yc_harness_tmp("a.npy"), v, shape, 2), YC_OK);
    ck_assert_int_eq(yc_write_npy(yc_harness_tmp("b.npy"), v, one, 1), YC_OK);
    size_t len;
    char *a = yc_harness_read(yc_harness_tmp("a.npy"), &len);
    /* magic, version 1.0, header length 118 (10 + 118 = 128, a multiple of 64) */
    ck_assert_uint_eq(len, 128 + sizeof v);
    ck_assert(memcmp(a, "\x93NUMPY\x01\x00\x76\x00", 10) == 0);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    ck_assert(memcmp(a + 10, dict, strlen(dict)) == 0);
    ck_assert(a[10 + strlen(dict)] == ' ' && a[127] == '\n');
    ck_assert(memcmp(a + 128, v, sizeof v) == 0);
    free(a);
    char *b = yc_harness_read(yc_harness_tmp("b.npy"), &len);
    ck_assert_ptr_nonnull(strstr(b + 10, "'shape': (6,), }")); /* after the NUL of the version */
    free(b);
    char dir[1024];
    ck_assert_int_eq(yc_visualize_dir(yc_harness_tmpdir(), "img", dir, sizeof dir), YC_OK);
    ck_assert_ptr_nonnull(strstr(dir, "/img"));
    ck_assert_int_eq(yc_visualize_dir(yc_harness_tmpdir(), "img", dir, sizeof dir), YC_OK);
    ck_assert_ptr_nonnull(strstr(dir, "/img2"));
    yc_harness_tmpdir_remove();
}
END_TEST

/* The output of layer 0 of graph g read into a new array. */
static float *layer0(yc_model *m, yc_graph *g, size_t *n)
{
    const yc_tensor *t = yc_graph_layer_output(g, 0);
    *n = yc_tensor_elems(t);
    float *p = malloc(*n * sizeof *p);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(yc_tensor_get_f32(m->be, t, p), YC_OK);
    return p;
}

START_TEST(test_visualize)
{
    yc_backend *be = NULL;
    yc_harness_cpu(&be, 1);
    yc_model *m = yc_harness_tiny_model(be, 0, 5);
    const int h = 64, w = 96;
    float *input = malloc(3 * h * w * sizeof *input);
    ck_assert_ptr_nonnull(input);
    for (int i = 0; i < 3 * h * w; i++)
        input[i] = (float)((i * 7919) % 255) / 255.0f;
    yc_graph *gk = NULL, *gp = NULL;
    yc_graph_options keep = {.mode = YC_GRAPH_EVAL, .keep_layers = true};
    ck_assert_int_eq(yc_graph_new_opts(&gk, m, 1, h, w, &keep), YC_OK);
    ck_assert_int_eq(yc_graph_alloc(gk), YC_OK);
    ck_assert_int_eq(yc_graph_new(&gp, m, 1, h, w, YC_GRAPH_EVAL), YC_OK);
    ck_assert_int_eq(yc_graph_alloc(gp), YC_OK);
    yc_graph *gs[2] = {gk, gp};
    float *l0_early = NULL;
    size_t n0 = 0;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(yc_tensor_set_f32(be, yc_graph_input(gs[k]), input), YC_OK);
        ck_assert_int_eq(yc_graph_forward(gs[k]), YC_OK);
        ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    }
    /* the heads are the same with and without keep_layers */
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *a = yc_graph_head(gk, l), *b = yc_graph_head(gp, l);
        size_t n = yc_tensor_elems(a);
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        ck_assert(x && y);
        ck_assert_int_eq(yc_tensor_get_f32(be, a, x), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, b, y), YC_OK);
        ck_assert(memcmp(x, y, n * sizeof *x) == 0);
        free(x);
        free(y);
    }
    /* layer 0 kept: the same values after a second forward of gk (its input written again: the
     * input's storage is reused) -- and not what the plain graph holds there after its whole
     * forward, whose storage was reused */
    l0_early = layer0(m, gk, &n0);
    size_t n1;
    float *plain = layer0(m, gp, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert(memcmp(l0_early, plain, n0 * sizeof *plain) != 0);
    ck_assert_int_eq(yc_tensor_set_f32(be, yc_graph_input(gk), input), YC_OK);
    ck_assert_int_eq(yc_graph_forward(gk), YC_OK);
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    float *again = layer0(m, gk, &n1);
    ck_assert(memcmp(l0_early, again, n0 * sizeof *again) == 0);
    /* the files: a png and a npy per layer but Detect whose output is larger than 1x1, the npy
     * holding the layer's output */
    yc_harness_tmpdir_make("visualize");
    ck_assert_int_eq(yc_visualize_features(m, gk, yc_harness_tmpdir()), YC_OK);
    int want = 0;
    for (int i = 0; i < m->cfg->nlayers; i++) {
        if (m->cfg->layers[i].module == YC_MOD_DETECT)
            continue;
        const yc_tensor *t = yc_graph_layer_output(gk, i);
        want += t->h > 1 && t->w > 1;
    }
    ck_assert_int_gt(want, 3);
    ck_assert_int_eq(yc_harness_count_files(yc_harness_tmpdir(), ".png"), want);
    ck_assert_int_eq(yc_harness_count_files(yc_harness_tmpdir(), ".npy"), want);
    const char *type = strrchr(m->cfg->layers[0].type_name, '.');
    size_t len;
    char *npy = yc_harness_read(yc_harness_tmp("stage0_%s_features.npy", type ? type + 1 :
                                               m->cfg->layers[0].type_name), &len);
    ck_assert_uint_eq(len % 4, 0);
    ck_assert_uint_ge(len, n0 * 4 + 64);
    ck_assert(memcmp(npy + len - n0 * 4, l0_early, n0 * 4) == 0);
    free(npy);
    yc_harness_tmpdir_remove();
    free(l0_early);
    free(plain);
    free(again);
    free(input);
    yc_graph_free(gk);
    yc_graph_free(gp);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

static Suite *tta_suite(void)
{
    Suite *s = suite_create("tta");
    TCase *tc = tcase_create("geometry");
    tcase_add_test(tc, test_shapes);
    tcase_add_test(tc, test_scale_img_ramp);
    tcase_add_test(tc, test_scale_img_edges);
    tcase_add_test(tc, test_descale);
    tcase_add_test(tc, test_clip);
    suite_add_tcase(s, tc);
    tc = tcase_create("predict");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_predict);
    suite_add_tcase(s, tc);
    tc = tcase_create("visualize");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_npy);
    tcase_add_test(tc, test_visualize);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_run(tta_suite(), false);
}
