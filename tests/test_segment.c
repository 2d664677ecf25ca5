/* YOLOv5 v7.0's segmentation model (SegmentationModel: Segment = Detect with nm mask coefficients
 * per anchor, and Proto on the P3 input) and utils/segment/loss.py's loss (overlap=True).
 *
 * Built twice.  test_segment runs what the build and tests/data give:
 *  - the configs: yolov5n-seg ... yolov5x-seg have PyTorch's parameter counts, Segment's and
 *    Proto's parameters have YOLOv5's names and shapes, bad Segment rows are errors that say why,
 *    and the detection-only paths refuse a segmentation model by name;
 *  - the loss's gradient (mask coefficients, prototypes, objectness and class logits) against
 *    central differences on a random problem, and masks of another size resized by nearest
 *    neighbour; the loss and its gradients against PyTorch's on random inputs
 *    (tests/data/seg/loss.safetensors: masks resized by 2/3, target rows not sorted by image;
 *    loss_nooverlap.safetensors: one mask per target row, ComputeLoss(overlap=False)), and both
 *    as two micro-batches (yc_seg_loss_compute_part) adding up to the whole batch's;
 *  - tests/data/seg/tiny (PyTorch's step of a 0.0625-wide yolov5n-seg, 64x64, batch 2) on the
 *    CPU backend: heads, Proto, the five loss numbers and every gradient;
 *  - that step on the OpenCL backend against PyTorch's and the CPU backend's.
 * test_segment_ref (YC_TEST_SHARED) runs ../shared/ref/seg/yolov5n-seg-160, PyTorch's step of
 * yolov5n-seg (nc 80, 160x160, batch 2), on the CPU and OpenCL backends; it exits 77 without
 * ../shared. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "golden.h"
#include "hyp.h"
#include "log.h"
#include "loss_seg.h"
#include "model.h"
#include "rng.h"
#include "safetensors.h"
#include "segment_step.h"
#include "step.h"
#include "weights.h"
#include "harness.h"
#include "yctest.h"

/* OpenCL devices, counted before the suite runs (yc_harness_opencl_devices) */
static int cl_devices;

/* A model from config `cfg` (a bundled name or a path) with nc classes (0: the config's), on be
 * when be is not NULL (weights initialised with seed 1 unless loaded later). */
static yc_model *seg_model(yc_backend *be, const char *cfg, int nc)
{
    char path[1024];
    yc_model_cfg *c = NULL;
    ck_assert_msg(yc_model_cfg_find(cfg, path, sizeof path) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_cfg_load(&c, path, nc) == YC_OK, "%s", yc_last_error());
    yc_model *m = NULL;
    ck_assert_msg(yc_model_new(&m, c) == YC_OK, "%s", yc_last_error());
    if (be) {
        ck_assert_msg(yc_model_alloc(m, be) == YC_OK, "%s", yc_last_error());
        ck_assert_msg(yc_model_init_weights(m, 1) == YC_OK, "%s", yc_last_error());
    }
    return m;
}

/* One reference case: the files of a directory made by ../shared/ref/seg_cls_dump.py. */
typedef struct seg_case {
    char cfg[1200], weights[1200], batch[1200], expected[1200], grads[1200];
    /* classes and image size */
    int nc, img;
} seg_case;

/* The result of one step: the model (its gradients in its arena), the step (its heads, Proto and
 * their gradients on the host) and the loss. */
typedef struct seg_run {
    yc_backend *be;
    yc_model *m;
    yc_seg_step *s;
    yc_seg_loss_result res;
} seg_run;

static float *read_tensor(const char *path, const char *name, size_t *n)
{
    yc_st_file *f = NULL;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    float *v = yc_golden_read(f, name, n);
    ck_assert_msg(v != NULL, "%s has no %s", path, name);
    yc_st_close(f);
    return v;
}

/* Loads the case's weights and batch on `device` and runs one step. */
static void seg_run_case(seg_run *r, const seg_case *c, const char *device)
{
    memset(r, 0, sizeof *r);
    ck_assert_msg(yc_device_open(device, 0, false, &r->be) == YC_OK, "%s", yc_last_error());
    r->m = seg_model(r->be, c->cfg, c->nc);
    ck_assert_int_eq(r->m->cfg->task, YC_TASK_SEGMENT);
    ck_assert_msg(yc_model_load(r->m, c->weights) == YC_OK, "%s", yc_last_error());
    size_t ni = 0, nt6 = 0, nmask = 0;
    float *images = read_tensor(c->batch, "images", &ni);
    float *targets = read_tensor(c->batch, "targets", &nt6);
    float *masks = read_tensor(c->batch, "masks", &nmask);
    const int batch = (int)(ni / (3 * (size_t)c->img * (size_t)c->img));
    ck_assert(batch >= 1 && ni == (size_t)batch * 3 * c->img * c->img && nt6 % 6 == 0);
    const int mh = c->img / 4;
    ck_assert_uint_eq(nmask, (size_t)batch * mh * mh);

    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_seg_step_loss_params(r->m, &hyp, c->img, 0.0f, &lp);
    ck_assert_int_eq(lp.nm, 32);
    ck_assert_msg(yc_seg_step_new(&r->s, r->m, batch, c->img, c->img, &lp, NULL) == YC_OK, "%s",
                  yc_last_error());
    yc_seg_masks mk = {.m = masks, .h = mh, .w = mh};
    ck_assert_msg(yc_seg_step_run(r->s, images, targets, (int)(nt6 / 6), &mk, &r->res) == YC_OK,
                  "%s", yc_last_error());
    free(images), free(targets), free(masks);
}

static void seg_run_free(seg_run *r)
{
    yc_seg_step_free(r->s);
    yc_model_free(r->m);
    yc_backend_free(r->be);
}

/* Level l's outputs as PyTorch's (B, na, ny, nx, no) (malloc'd). */
static float *permuted_head(const seg_run *r, int l)
{
    const yc_tensor *t = yc_graph_head(r->s->g, l);
    const int na = r->m->na, no = r->m->no, ny = t->h, nx = t->w;
    float *out = malloc(yc_tensor_elems(t) * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (int b = 0; b < t->n; b++)
        for (int a = 0; a < na; a++)
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++)
                    for (int k = 0; k < no; k++)
                        out[((((size_t)b * na + a) * ny + y) * nx + x) * no + k] =
                            r->s->head[l][(((size_t)b * na * no + (size_t)a * no + k) * ny + y) * nx + x];
    return out;
}

/* The step against the case's PyTorch dumps: heads and Proto within 1e-4 (relative to each
 * tensor's largest value), the five loss numbers within 1e-4 each, every gradient within
 * grad_tol (relative to each tensor's largest). */
static void seg_check_case(const seg_run *r, const seg_case *c, const char *what, double grad_tol)
{
    double worst = 0;
    for (int l = 0; l <= r->m->nl; l++) {
        char name[16] = "proto";
        if (l < r->m->nl)
            snprintf(name, sizeof name, "head%d", l);
        size_t n = 0;
        float *ref = read_tensor(c->expected, name, &n);
        ck_assert_uint_eq(n, yc_tensor_elems(yc_graph_head(r->s->g, l)));
        float *ours = l < r->m->nl ? permuted_head(r, l) : r->s->proto;
        double e = yc_test_rel_error(ours, ref, n);
        ck_assert_msg(e < 1e-4, "%s: %s relative error %g", what, name, e);
        worst = e > worst ? e : worst;
        if (ours != r->s->proto)
            free(ours);
        free(ref);
    }
    size_t nl = 0;
    float *loss = read_tensor(c->expected, "loss", &nl);
    ck_assert_uint_eq(nl, 5);
    const double ours[5] = {r->res.total, r->res.box, r->res.seg, r->res.obj, r->res.cls};
    const char *names[5] = {"total", "box", "seg", "obj", "cls"};
    double wl = 0;
    for (int i = 0; i < 5; i++) {
        double e = yc_test_rel_diff(ours[i], loss[i]);
        ck_assert_msg(e < 1e-4, "%s: loss %s %.8g, PyTorch %.8g (relative error %g)", what,
                      names[i], ours[i], (double)loss[i], e);
        wl = e > wl ? e : wl;
    }
    printf("%s: loss %.7f [box %.7f seg %.7f obj %.7f cls %.7f], PyTorch %.7f [%.7f %.7f %.7f "
           "%.7f]; loss numbers within %.2e, heads and proto within %.2e\n",
           what, ours[0], ours[1], ours[2], ours[3], ours[4], (double)loss[0], (double)loss[1],
           (double)loss[2], (double)loss[3], (double)loss[4], wl, worst);
    free(loss);
    yc_golden gd = {.be = r->be, .m = r->m};
    free(yc_golden_check_grads(&gd, c->grads, grad_tol));
}

#ifndef YC_TEST_SHARED

/* The whole gradient arena on the host (malloc'd). */
static float *grads_of(yc_model *m)
{
    float *g = malloc(m->param_elems * sizeof *g);
    ck_assert_ptr_nonnull(g);
    ck_assert(m->be->iface->buffer_read(m->be, m->grad_buf, 0, g, m->param_elems * sizeof *g) == YC_OK);
    return g;
}

/* Gradients of the tiny case against PyTorch, per tensor relative to its largest value, about
 * twice the worst measured: 1.9e-3 on the CPU backend and 2.5e-3 on PoCL's OpenCL device, both on
 * model.2.m.0.cv2.bn.weight (4 channels whose gradient, a sum of products with the normalised
 * activations, is 0.04 at most against 0.1 to 1.5 for the tensors around it; the two backends
 * differ by 6e-4 on it themselves); 5e-4 on the other backbone tensors and 1.5e-4 on the Segment
 * head's (the head outputs' gradients, summed in its biases' gradients, agree to 3e-5).
 * yolov5n-seg at 160 (test_segment_ref) holds every gradient to 1e-3. */
#define TINY_TOL_GRAD 5e-3

/* tests/data/seg/tiny ($YOLOCL_TEST_DATA/seg/tiny): yolov5n-seg-tiny.yaml, nc 3, 64x64 */
static void tiny_case(seg_case *c)
{
    const char *d = getenv("YOLOCL_TEST_DATA");
    if (!d || !d[0])
        d = "tests/data";
    snprintf(c->cfg, sizeof c->cfg, "%s/seg/tiny/yolov5n-seg-tiny.yaml", d);
    snprintf(c->weights, sizeof c->weights, "%s/seg/tiny/weights.safetensors", d);
    snprintf(c->batch, sizeof c->batch, "%s/seg/tiny/batch.safetensors", d);
    snprintf(c->expected, sizeof c->expected, "%s/seg/tiny/expected.safetensors", d);
    snprintf(c->grads, sizeof c->grads, "%s/seg/tiny/grads.safetensors", d);
    c->nc = 3;
    c->img = 64;
}

START_TEST(configs)
{
    /* PyTorch's counts at nc 80 (SEG_CLS.md for yolov5n-seg; YOLOv5's README rounds the others
     * to 7.6M, 22.0M, 47.9M and 88.8M) */
    static const struct {
        const char *name;
        size_t params;
    } sizes[] = {{"yolov5n-seg", 1991549}, {"yolov5s-seg", 7621277}, {"yolov5m-seg", 21990397},
                 {"yolov5l-seg", 47924957}, {"yolov5x-seg", 88819517}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        yc_model *m = seg_model(NULL, sizes[i].name, 0);
        ck_assert_int_eq(m->cfg->task, YC_TASK_SEGMENT);
        ck_assert_msg(yc_model_count_params(m) == sizes[i].params, "%s: %zu parameters",
                      sizes[i].name, yc_model_count_params(m));
        yc_model_free(m);
    }
    yc_model *m = seg_model(NULL, "yolov5n-seg", 0);
    ck_assert_int_eq(m->nm, 32);
    ck_assert_int_eq(m->npr, 64); /* 256 * 0.25 */
    ck_assert_int_eq(m->no, 80 + 5 + 32);
    ck_assert_str_eq(m->cfg->name, "YOLOv5n-seg");
    static const struct {
        const char *name;
        int shape[4];
    } want[] = {{"model.24.m.0.weight", {351, 64, 1, 1}},
                {"model.24.m.2.bias", {351, 1, 1, 1}},
                {"model.24.proto.cv1.conv.weight", {64, 64, 3, 3}},
                {"model.24.proto.cv2.conv.weight", {64, 64, 3, 3}},
                {"model.24.proto.cv2.bn.bias", {64, 1, 1, 1}},
                {"model.24.proto.cv3.conv.weight", {32, 64, 1, 1}}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int p = yc_model_find_param(m, want[i].name);
        ck_assert_msg(p >= 0, "no %s", want[i].name);
        ck_assert_mem_eq(m->params[p].shape, want[i].shape, sizeof want[i].shape);
    }
    ck_assert_int_ge(yc_model_find_state(m, "model.24.proto.cv3.bn.running_var"), 0);
    /* the state dict ends with Proto's cv3, after the level convs (Segment's __init__ order) */
    ck_assert_str_eq(m->params[m->nparams - 1].name, "model.24.proto.cv3.bn.bias");
    ck_assert_int_gt(yc_model_find_param(m, "model.24.proto.cv1.conv.weight"),
                     yc_model_find_param(m, "model.24.m.2.bias"));
    ck_assert_msg(strstr(m->cfg->layers[24].args_text, "32, 64, [64, 128, 256]]"), "%s",
                  m->cfg->layers[24].args_text);
    /* cut at 10 (ClassificationModel(model=...)): the classifier yolov5n cut at 10 gives */
    char path[1024];
    yc_model_cfg *cut = NULL, *ref = NULL;
    ck_assert(yc_model_cfg_find("yolov5n-seg", path, sizeof path) == YC_OK);
    ck_assert(yc_model_cfg_load(&cut, path, 0) == YC_OK);
    ck_assert_msg(yc_model_cfg_to_classifier(cut, 10, 10) == YC_OK, "%s", yc_last_error());
    ck_assert(yc_model_cfg_find("yolov5n", path, sizeof path) == YC_OK);
    ck_assert(yc_model_cfg_load(&ref, path, 0) == YC_OK);
    ck_assert(yc_model_cfg_to_classifier(ref, 10, 10) == YC_OK);
    yc_model *mc = NULL, *mr = NULL;
    ck_assert(yc_model_new(&mc, cut) == YC_OK && yc_model_new(&mr, ref) == YC_OK);
    ck_assert_int_eq(mc->cfg->task, YC_TASK_CLASSIFY);
    ck_assert_int_eq(mc->nm, 0);
    ck_assert_uint_eq(yc_model_count_params(mc), yc_model_count_params(mr));
    ck_assert_int_eq(mc->nparams, mr->nparams);
    yc_model_free(mc);
    yc_model_free(mr);

    /* the commands that work on detection models only refuse it by name */
    ck_assert_int_eq(yc_model_require_detection(m, "yolocl val"), YC_EUSAGE);
    ck_assert_msg(strstr(yc_last_error(), "YOLOv5n-seg is a segmentation model") &&
                  strstr(yc_last_error(), "yolocl val"), "%s", yc_last_error());
    yc_model_free(m);

    /* the detection step refuses it, the segmentation step refuses a detection model */
    yc_backend *cpu = NULL;
    yc_harness_cpu(&cpu, 0);
    yc_model *seg = seg_model(cpu, "yolov5n-seg", 3), *det = seg_model(cpu, "yolov5n", 3);
    /* YOLOv5's init: Detect's bias priors on the objectness and class outputs of each anchor
     * (no = 3 + 5 + 32), PyTorch's default U(-1/sqrt(fan_in), ..) on the others, the mask
     * coefficients' included; Proto's BatchNorm weights 1 and biases 0 */
    for (int l = 0; l < 3; l++) {
        char name[64];
        snprintf(name, sizeof name, "model.24.m.%d.bias", l);
        const yc_param *bp = &seg->params[yc_model_find_param(seg, name)];
        float bias[3 * 40];
        ck_assert_uint_eq(bp->numel, 3 * 40);
        ck_assert(yc_tensor_get_f32(cpu, &bp->t, bias) == YC_OK);
        const double s = 8 << l, bound = 1.0 / sqrt((double)bp[-1].shape[1]);
        const double obj = log(8.0 / ((640.0 / s) * (640.0 / s))), cls = log(0.6 / (3 - 0.99999));
        for (int a = 0; a < 3; a++)
            for (int k = 0; k < 40; k++) {
                const double prior = k == 4 ? obj : (k >= 5 && k < 8 ? cls : 0.0);
                ck_assert_msg(fabs(bias[a * 40 + k] - prior) <= bound, "%s[%d]: %g, prior %g",
                              name, a * 40 + k, (double)bias[a * 40 + k], prior);
            }
    }
    float v[32];
    const yc_param *bnw = &seg->params[yc_model_find_param(seg, "model.24.proto.cv3.bn.weight")];
    ck_assert(yc_tensor_get_f32(cpu, &bnw->t, v) == YC_OK);
    ck_assert(v[0] == 1.0f && v[31] == 1.0f);
    ck_assert(yc_tensor_get_f32(cpu, &bnw[1].t, v) == YC_OK); /* cv3.bn.bias */
    ck_assert(v[0] == 0.0f && v[31] == 0.0f);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_seg_step_loss_params(det, &hyp, 64, 0.0f, &lp);
    yc_seg_step *ss = NULL;
    ck_assert_int_eq(yc_seg_step_new(&ss, det, 1, 64, 64, &lp, NULL), YC_EFORMAT);
    ck_assert_msg(strstr(yc_last_error(), "not a segmentation model"), "%s", yc_last_error());
    yc_step *ds = NULL;
    yc_step_loss_params(seg, &hyp, 64, 0.0f, &lp);
    ck_assert_int_eq(yc_step_new(&ds, seg, 1, 64, 64, &lp), YC_EFORMAT);
    ck_assert_msg(strstr(yc_last_error(), "not a detection model"), "%s", yc_last_error());
    yc_model_free(seg);
    yc_model_free(det);
    yc_backend_free(cpu);

    /* Segment rows that are wrong */
    static const char *const bad[][2] = {
        {"nc: 4\ndepth_multiple: 1\nwidth_multiple: 1\nanchors: [[10,13, 16,30]]\n"
         "backbone: [[-1, 1, Conv, [8, 3, 2]]]\nhead: [[[0], 1, Segment, [nc, anchors]]]\n",
         "Segment arguments must be [nc, anchors, masks, protos]"},
        {"nc: 4\ndepth_multiple: 1\nwidth_multiple: 1\nanchors: [[10,13, 16,30]]\n"
         "backbone: [[-1, 1, Conv, [8, 3, 2]]]\nhead: [[[0], 1, Segment, [nc, anchors, 0, 8]]]\n",
         "must be in 1..1024"},
        {"nc: 4\ndepth_multiple: 1\nwidth_multiple: 1\nanchors: [[10,13, 16,30]]\n"
         "backbone: [[-1, 1, Conv, [8, 3, 2]]]\nhead: [[[0], 1, Segment, [nc, anchors, 4, 8]], "
         "[-1, 1, Conv, [8, 1, 1]]]\n",
         "Segment must be the last layer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        yc_model_cfg *c = NULL;
        ck_assert_int_eq(yc_model_cfg_parse(&c, bad[i][0], strlen(bad[i][0]), "bad.yaml", 0), YC_EFORMAT);
        ck_assert_msg(strstr(yc_last_error(), bad[i][1]), "%s", yc_last_error());
    }
}
END_TEST

/* A random problem: 2 images, nc 3, nm 4, grids 8x8, 4x4, 2x2 (a 64x64 input), prototypes 16x16,
 * five targets with rectangular masks in the overlap format (smaller over larger). */
enum { FB = 2, FNC = 3, FNM = 4, FNA = 3, FNO = FNC + 5 + FNM, FPH = 16, FNT = 5 };
typedef struct fd_problem {
    yc_loss_params lp;
    float *p[3], *g[3];
    int ny[3];
    float proto[FB * FNM * FPH * FPH], pgrad[FB * FNM * FPH * FPH];
    float targets[FNT * 6], masks[FB * FPH * FPH];
} fd_problem;

static void fd_setup(fd_problem *q)
{
    memset(q, 0, sizeof *q);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    q->lp.nc = FNC;
    q->lp.na = FNA;
    q->lp.nl = 3;
    q->lp.nm = FNM;
    static const float anchors[18] = {1.25f, 1.625f, 2.0f, 3.75f, 4.125f, 2.875f,
                                      1.875f, 3.8125f, 3.875f, 2.8125f, 3.6875f, 7.4375f,
                                      3.625f, 2.8125f, 4.875f, 6.1875f, 11.65625f, 10.1875f};
    memcpy(q->lp.anchors, anchors, sizeof anchors);
    q->lp.cls_pw = q->lp.obj_pw = 1.0f;
    q->lp.anchor_t = 4.0f;
    yc_loss_params_gains(&q->lp, (float)hyp.box, (float)hyp.obj, (float)hyp.cls, 64);
    yc_rng r;
    yc_rng_seed(&r, 5, 1);
    for (int l = 0; l < 3; l++) {
        q->ny[l] = 8 >> l;
        size_t n = (size_t)FB * FNA * FNO * q->ny[l] * q->ny[l];
        q->p[l] = malloc(n * sizeof(float));
        q->g[l] = malloc(n * sizeof(float));
        ck_assert(q->p[l] && q->g[l]);
        for (size_t i = 0; i < n; i++)
            q->p[l][i] = (float)yc_rng_range(&r, -1.5, 1.5);
    }
    for (size_t i = 0; i < sizeof q->proto / sizeof q->proto[0]; i++)
        q->proto[i] = (float)yc_rng_range(&r, -1, 1);
    /* image, class, x, y, w, h; per image by area, largest first */
    static const float t[FNT * 6] = {0, 0, 0.50f, 0.45f, 0.60f, 0.50f,
                                     0, 2, 0.30f, 0.62f, 0.25f, 0.30f,
                                     0, 1, 0.70f, 0.30f, 0.20f, 0.15f,
                                     1, 1, 0.40f, 0.50f, 0.50f, 0.70f,
                                     1, 0, 0.72f, 0.26f, 0.22f, 0.30f};
    memcpy(q->targets, t, sizeof t);
    for (int k = 0; k < FNT; k++) {
        const float *row = t + k * 6;
        int b = (int)row[0], idx = 1;
        for (int j = 0; j < k; j++)
            idx += (int)t[j * 6] == b;
        for (int y = 0; y < FPH; y++)
            for (int x = 0; x < FPH; x++) {
                float fx = (x + 0.5f) / FPH, fy = (y + 0.5f) / FPH;
                /* a rectangle a little inside the box, so the crop also holds background */
                if (fabsf(fx - row[2]) < row[4] * 0.4f && fabsf(fy - row[3]) < row[5] * 0.4f)
                    q->masks[(b * FPH + y) * FPH + x] = (float)idx;
            }
    }
}

static void fd_free(fd_problem *q)
{
    for (int l = 0; l < 3; l++)
        free(q->p[l]), free(q->g[l]);
}

/* The total loss (and the gradients when grad is true) of the problem. */
static double fd_loss(fd_problem *q, yc_seg_loss_ctx *ctx, bool grad, yc_seg_loss_result *res)
{
    yc_loss_head h[3];
    for (int l = 0; l < 3; l++)
        h[l] = (yc_loss_head){.p = q->p[l], .grad = grad ? q->g[l] : NULL, .ny = q->ny[l],
                              .nx = q->ny[l], .img_stride = (size_t)FNA * FNO * q->ny[l] * q->ny[l]};
    yc_seg_proto pr = {.p = q->proto, .grad = grad ? q->pgrad : NULL, .h = FPH, .w = FPH};
    yc_seg_masks mk = {.m = q->masks, .h = FPH, .w = FPH};
    yc_seg_loss_result r;
    ck_assert_msg(yc_seg_loss_compute(ctx, FB, h, &pr, q->targets, FNT, &mk, &r) == YC_OK, "%s",
                  yc_last_error());
    if (res)
        *res = r;
    return r.total;
}

/* Central difference of the total loss at *v, over the float32 values actually taken. */
static double fd_at(fd_problem *q, yc_seg_loss_ctx *ctx, float *v)
{
    const float keep = *v, hi = keep + 1e-3f, lo = keep - 1e-3f;
    *v = hi;
    double up = fd_loss(q, ctx, false, NULL);
    *v = lo;
    double down = fd_loss(q, ctx, false, NULL);
    *v = keep;
    return (up - down) / ((double)hi - (double)lo);
}

START_TEST(loss_gradient_matches_differences)
{
    fd_problem *q = malloc(sizeof *q);
    ck_assert_ptr_nonnull(q);
    fd_setup(q);
    yc_seg_loss_ctx *ctx = yc_seg_loss_new(&q->lp);
    ck_assert_msg(ctx != NULL, "%s", yc_last_error());
    yc_seg_loss_result res;
    fd_loss(q, ctx, true, &res);
    ck_assert(res.seg > 0 && res.box > 0 && res.obj > 0 && res.cls > 0);
    ck_assert_double_eq_tol(res.total, FB * (res.box + res.seg + res.obj + res.cls), 1e-12);

    /* every mask coefficient of every level (zero where nothing is assigned) and, on a coarser
     * grid, the objectness and class logits; not the box values: YOLOv5's CIoU holds its alpha
     * (a function of the IoU and the aspect ratios) constant, computed under no_grad, so their
     * gradient is autograd's, not the difference quotient's (test_loss checks them) */
    double gmax = 0, emax = 0, cmax = 0;
    int checked = 0;
    for (int l = 0; l < 3; l++) {
        const size_t plane = (size_t)q->ny[l] * q->ny[l];
        const size_t n = (size_t)FB * FNA * FNO * plane;
        for (size_t i = 0; i < n; i++) {
            const size_t k = i / plane % FNO;
            if ((k < 5 + FNC && i % 7 != 0) || k < 4)
                continue;
            double fd = fd_at(q, ctx, &q->p[l][i]);
            double e = fabs(fd - (double)q->g[l][i]);
            emax = e > emax ? e : emax;
            gmax = fabs(fd) > gmax ? fabs(fd) : gmax;
            ck_assert_msg(e < 1e-8 + 1e-4 * fabs(fd), "level %d value %zu (output %zu): gradient "
                          "%g, differences %g", l, i, k, (double)q->g[l][i], fd);
            if (k >= 5 + FNC)
                cmax = fabs(fd) > cmax ? fabs(fd) : cmax;
            checked++;
        }
    }
    ck_assert(cmax > 1e-4); /* the mask coefficients take part */
    /* every prototype value */
    double pmax = 0;
    for (size_t i = 0; i < sizeof q->proto / sizeof q->proto[0]; i++) {
        double fd = fd_at(q, ctx, &q->proto[i]);
        double e = fabs(fd - (double)q->pgrad[i]);
        emax = e > emax ? e : emax;
        pmax = fabs(fd) > pmax ? fabs(fd) : pmax;
        ck_assert_msg(e < 1e-8 + 1e-4 * fabs(fd), "prototype value %zu: gradient %g, differences "
                      "%g", i, (double)q->pgrad[i], fd);
        checked++;
    }
    ck_assert(pmax > 1e-3); /* the prototypes take part */
    printf("segmentation loss: %d gradient values against central differences, worst error %.2e "
           "(largest gradient %.3g, mask coefficients %.3g, prototypes %.3g)\n", checked, emax,
           gmax, cmax, pmax);

    /* masks at twice the prototypes' size: resized by nearest neighbour (every second pixel
     * from the first), the same loss as the small ones */
    float *big = malloc((size_t)FB * 4 * FPH * FPH * sizeof *big);
    ck_assert_ptr_nonnull(big);
    for (int b = 0; b < FB; b++)
        for (int y = 0; y < 2 * FPH; y++)
            for (int x = 0; x < 2 * FPH; x++)
                big[((size_t)b * 2 * FPH + y) * 2 * FPH + x] =
                    y % 2 || x % 2 ? 9.0f : q->masks[(b * FPH + y / 2) * FPH + x / 2];
    yc_loss_head h[3];
    for (int l = 0; l < 3; l++)
        h[l] = (yc_loss_head){.p = q->p[l], .ny = q->ny[l], .nx = q->ny[l],
                              .img_stride = (size_t)FNA * FNO * q->ny[l] * q->ny[l]};
    yc_seg_proto pr = {.p = q->proto, .h = FPH, .w = FPH};
    yc_seg_masks mk = {.m = big, .h = 2 * FPH, .w = 2 * FPH};
    yc_seg_loss_result r2;
    ck_assert(yc_seg_loss_compute(ctx, FB, h, &pr, q->targets, FNT, &mk, &r2) == YC_OK);
    ck_assert_double_eq_tol(r2.seg, res.seg, 1e-12);
    /* targets without masks */
    ck_assert_int_eq(yc_seg_loss_compute(ctx, FB, h, &pr, q->targets, FNT, NULL, &r2), YC_EFORMAT);
    free(big);
    yc_seg_loss_free(ctx);
    fd_free(q);
    free(q);
}
END_TEST

/* One fixture of utils/segment/loss.py's loss on random inputs (2 images, nc 3, nm 4, 16x16
 * prototypes, masks at 24x24 resized to them, target rows not sorted by image): overlap maps
 * (loss.safetensors, made by tests/data/make_seg_loss.py) or one mask per target row
 * (loss_nooverlap.safetensors, its --no-overlap: ComputeLoss(overlap=False)).  The five
 * loss numbers within 1e-5, the gradients of every head value and prototype within 1e-5 of each
 * tensor's largest.  Then the batch again as two micro-batches of one image (the whole batch's
 * part, yc_seg_micro_masks): their losses add up to the whole batch's and their gradients are
 * the whole batch's, within 1e-5. */
static void check_loss_fixture(const char *file, bool per_target)
{
    const char *d = getenv("YOLOCL_TEST_DATA");
    char path[1100];
    snprintf(path, sizeof path, "%s/seg/%s", d && d[0] ? d : "tests/data", file);
    enum { B = 2, NA = 3, NC = 3, NM = 4, NO = NC + 5 + NM, PH = 16, MH = 24 };
    yc_loss_params lp = {.nc = NC, .na = NA, .nl = 3, .nm = NM, .cls_pw = 1, .obj_pw = 1,
                         .anchor_t = 4};
    static const float px[18] = {10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198,
                                 373, 326};
    for (int i = 0; i < 18; i++)
        lp.anchors[i] = px[i] / (float)(8 << (i / 6));
    yc_loss_params_gains(&lp, 0.05f, 1.0f, 0.5f, 64);
    float *p[3], *g[3], *ref_g[3];
    yc_loss_head h[3];
    for (int l = 0; l < 3; l++) {
        char name[16];
        const int n = 8 >> l;
        const size_t plane = (size_t)n * n, count = (size_t)B * NA * NO * plane;
        size_t got = 0;
        snprintf(name, sizeof name, "p%d", l);
        float *torch_p = read_tensor(path, name, &got);
        ck_assert_uint_eq(got, count);
        snprintf(name, sizeof name, "grad_p%d", l);
        float *torch_g = read_tensor(path, name, &got);
        p[l] = malloc(count * sizeof(float));
        g[l] = malloc(count * sizeof(float));
        ref_g[l] = malloc(count * sizeof(float));
        ck_assert(p[l] && g[l] && ref_g[l]);
        /* PyTorch's (B, na, ny, nx, no) to the model's (B, na*no, ny, nx) */
        for (size_t b = 0; b < B; b++)
            for (size_t a = 0; a < NA; a++)
                for (size_t c = 0; c < plane; c++)
                    for (size_t k = 0; k < NO; k++) {
                        size_t from = ((b * NA + a) * plane + c) * NO + k;
                        size_t to = ((b * NA + a) * NO + k) * plane + c;
                        p[l][to] = torch_p[from];
                        ref_g[l][to] = torch_g[from];
                    }
        free(torch_p);
        free(torch_g);
        h[l] = (yc_loss_head){.p = p[l], .grad = g[l], .ny = n, .nx = n,
                              .img_stride = (size_t)NA * NO * plane};
    }
    size_t np = 0, nt6 = 0, nmask = 0, nl = 0, ngp = 0;
    float *proto = read_tensor(path, "proto", &np), *targets = read_tensor(path, "targets", &nt6);
    float *masks = read_tensor(path, "masks", &nmask), *loss = read_tensor(path, "loss", &nl);
    float *ref_gp = read_tensor(path, "grad_proto", &ngp);
    const int nt = (int)(nt6 / 6);
    ck_assert(np == (size_t)B * NM * PH * PH && ngp == np && nl == 5);
    ck_assert(nmask == (size_t)(per_target ? nt : B) * MH * MH);
    ck_assert(targets[0] == 1.0f); /* image 1's row first */
    float *gp = malloc(np * sizeof *gp);
    ck_assert_ptr_nonnull(gp);
    yc_seg_loss_ctx *ctx = yc_seg_loss_new(&lp);
    ck_assert_msg(ctx != NULL, "%s", yc_last_error());
    yc_seg_proto pr = {.p = proto, .grad = gp, .h = PH, .w = PH};
    yc_seg_masks mk = {.m = masks, .h = MH, .w = MH, .per_target = per_target};
    yc_seg_loss_result r;
    ck_assert_msg(yc_seg_loss_compute(ctx, B, h, &pr, targets, nt, &mk, &r) == YC_OK, "%s",
                  yc_last_error());
    const double ours[5] = {r.total, r.box, r.seg, r.obj, r.cls};
    double worst = 0;
    for (int i = 0; i < 5; i++) {
        double e = yc_test_rel_diff(ours[i], loss[i]);
        ck_assert_msg(e < 1e-5, "%s: loss %d: %.8g, PyTorch %.8g", file, i, ours[i],
                      (double)loss[i]);
        worst = e > worst ? e : worst;
    }
    double eg = yc_test_rel_error(gp, ref_gp, np);
    ck_assert_msg(eg < 1e-5, "%s: prototype gradients: relative error %g", file, eg);
    for (int l = 0; l < 3; l++) {
        double e = yc_test_rel_error(g[l], ref_g[l], (size_t)B * NA * NO * (size_t)(64 >> (2 * l)));
        ck_assert_msg(e < 1e-5, "%s: level %d gradients: relative error %g", file, l, e);
        eg = e > eg ? e : eg;
    }
    printf("segmentation loss (%s) against PyTorch's: %.7f (PyTorch %.7f), loss numbers within "
           "%.2e, gradients within %.2e\n", per_target ? "overlap=False" : "overlap=True", r.total,
           (double)loss[0], worst, eg);

    /* two micro-batches of one image each, against the whole batch with its rows sorted by
     * image as the loader gives them (overlap indices are numbered by row position over the
     * batch, so unsorted rows would number them differently in the parts) */
    float *st = malloc(nt6 * sizeof *st), *smasks = malloc(nmask * sizeof *smasks);
    ck_assert(st && smasks);
    const size_t mhw = (size_t)MH * MH;
    int k = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < nt; i++)
            if ((int)targets[i * 6] == b) {
                memcpy(st + (size_t)k * 6, targets + (size_t)i * 6, 6 * sizeof *st);
                if (per_target)
                    memcpy(smasks + (size_t)k * mhw, masks + (size_t)i * mhw, mhw * sizeof *st);
                k++;
            }
    if (!per_target)
        memcpy(smasks, masks, nmask * sizeof *smasks);
    mk.m = smasks;
    yc_seg_loss_result whole;
    ck_assert_msg(yc_seg_loss_compute(ctx, B, h, &pr, st, nt, &mk, &whole) == YC_OK, "%s",
                  yc_last_error());
    float *wg[3], *wgp = malloc(np * sizeof *wgp);
    ck_assert_ptr_nonnull(wgp);
    memcpy(wgp, gp, np * sizeof *wgp);
    for (int l = 0; l < 3; l++) {
        size_t n = (size_t)B * NA * NO * (size_t)(64 >> (2 * l));
        wg[l] = malloc(n * sizeof(float));
        ck_assert_ptr_nonnull(wg[l]);
        memcpy(wg[l], g[l], n * sizeof(float));
    }
    yc_loss_part part;
    ck_assert_msg(yc_loss_part_of(yc_seg_loss_det(ctx), B, h, st, nt, &part) == YC_OK, "%s",
                  yc_last_error());
    float *mt = malloc(nt6 * sizeof *mt), *mbuf = malloc(nmask * sizeof *mbuf);
    ck_assert(mt && mbuf);
    yc_seg_loss_result sum = {0};
    for (int b = 0; b < B; b++) {
        int n = yc_micro_targets(st, nt, b, 1, mt);
        yc_seg_masks mm;
        yc_seg_micro_masks(&mk, st, nt, b, 1, mbuf, &mm);
        yc_loss_head hb[3];
        for (int l = 0; l < 3; l++) {
            hb[l] = h[l];
            hb[l].p = p[l] + (size_t)b * h[l].img_stride;
            hb[l].grad = g[l] + (size_t)b * h[l].img_stride;
        }
        yc_seg_proto pb = {.p = proto + (size_t)b * NM * PH * PH,
                           .grad = gp + (size_t)b * NM * PH * PH, .h = PH, .w = PH};
        yc_seg_loss_result rb;
        ck_assert_msg(yc_seg_loss_compute_part(ctx, 1, hb, &pb, mt, n, &mm, &part, &rb) == YC_OK,
                      "%s", yc_last_error());
        sum.total += rb.total, sum.box += rb.box, sum.seg += rb.seg, sum.obj += rb.obj;
        sum.cls += rb.cls;
    }
    const double parts[5] = {sum.total, sum.box, sum.seg, sum.obj, sum.cls};
    const double wl[5] = {whole.total, whole.box, whole.seg, whole.obj, whole.cls};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(yc_test_rel_diff(parts[i], wl[i]) < 1e-5, "%s: micro-batches' loss %d: "
                      "%.8g, the whole batch's %.8g", file, i, parts[i], wl[i]);
    ck_assert_msg(yc_test_rel_error(gp, wgp, np) < 1e-5, "%s: micro-batches' prototype "
                  "gradients", file);
    for (int l = 0; l < 3; l++) {
        ck_assert_msg(yc_test_rel_error(g[l], wg[l], (size_t)B * NA * NO *
                                        (size_t)(64 >> (2 * l))) < 1e-5,
                      "%s: micro-batches' level %d gradients", file, l);
        free(wg[l]);
    }
    free(wgp), free(st), free(smasks);
    free(mt), free(mbuf);
    yc_seg_loss_free(ctx);
    for (int l = 0; l < 3; l++)
        free(p[l]), free(g[l]), free(ref_g[l]);
    free(proto), free(targets), free(masks), free(loss), free(ref_gp), free(gp);
}

START_TEST(loss_matches_pytorch)
{
    check_loss_fixture("loss.safetensors", false);
}
END_TEST

/* --no-overlap: one mask per target row, overlapping within an image */
START_TEST(loss_no_overlap_matches_pytorch)
{
    check_loss_fixture("loss_nooverlap.safetensors", true);
}
END_TEST

/* A Segment head's state dict gives its class count (its outputs less 5 and Proto's nm). */
START_TEST(weights_give_classes)
{
    seg_case c;
    tiny_case(&c);
    yc_weights *w = NULL;
    ck_assert_msg(yc_weights_read(c.weights, &w) == YC_OK, "%s", yc_last_error());
    int nc = 0;
    ck_assert_msg(yc_weights_infer_nc(w, &nc) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(nc, 3);
    yc_weights_free(w);
}
END_TEST

START_TEST(tiny_matches_pytorch)
{
    seg_case c;
    tiny_case(&c);
    seg_run r;
    seg_run_case(&r, &c, "cpu");
    seg_check_case(&r, &c, "yolov5n-seg-tiny (64x64, batch 2) on the CPU", TINY_TOL_GRAD);
    seg_run_free(&r);
}
END_TEST

START_TEST(opencl_matches_cpu)
{
    if (cl_devices == 0) {
        yc_test_part_skipped(YC_TEST_NEEDS_OPENCL, "no OpenCL device: the segmentation step ran on "
                             "the CPU only");
        return;
    }
    seg_case c;
    tiny_case(&c);
    seg_run a, b;
    seg_run_case(&a, &c, "cpu");
    seg_run_case(&b, &c, "opencl:0");
    seg_check_case(&b, &c, "yolov5n-seg-tiny (64x64, batch 2) on OpenCL", TINY_TOL_GRAD);
    ck_assert_msg(yc_test_rel_diff(b.res.total, a.res.total) < 1e-5, "loss %g on OpenCL, %g on "
                  "the CPU", b.res.total, a.res.total);
    ck_assert_msg(yc_test_rel_diff(b.res.seg, a.res.seg) < 1e-5, "mask loss %g on OpenCL, %g on "
                  "the CPU", b.res.seg, a.res.seg);
    for (int l = 0; l <= a.m->nl; l++) {
        size_t n = yc_tensor_elems(yc_graph_head(a.s->g, l));
        const float *x = l < a.m->nl ? a.s->head[l] : a.s->proto;
        const float *y = l < b.m->nl ? b.s->head[l] : b.s->proto;
        double e = yc_test_rel_error(y, x, n);
        ck_assert_msg(e < 1e-4, "head %d: OpenCL against the CPU %g", l, e);
    }
    float *g0 = grads_of(a.m), *g1 = grads_of(b.m);
    double worst = 0;
    for (int i = 0; i < a.m->nparams; i++) {
        const yc_param *p = &a.m->params[i];
        double e = yc_test_rel_error(g1 + p->offset, g0 + p->offset, p->numel);
        ck_assert_msg(e < 1e-3, "gradient of %s: OpenCL against the CPU %g", p->name, e);
        worst = e > worst ? e : worst;
    }
    printf("segmentation step: loss %.7f on the CPU, %.7f on OpenCL; gradients within %.2e\n",
           a.res.total, b.res.total, worst);
    free(g0), free(g1);
    seg_run_free(&a);
    seg_run_free(&b);
}
END_TEST

/* The worst per-tensor relative error of gradient arena a against ref (and which tensor). */
static double worst_grad(const yc_model *m, const float *a, const float *ref, const char **which)
{
    double worst = 0;
    *which = "";
    for (int i = 0; i < m->nparams; i++) {
        const yc_param *p = &m->params[i];
        double e = yc_test_rel_error(a + p->offset, ref + p->offset, p->numel);
        ck_assert_msg(isfinite(e), "gradient of %s is not finite", p->name);
        if (e > worst) {
            worst = e;
            *which = p->name;
        }
    }
    return worst;
}

/* One step of variant `v` (below) into *res; the gradients it adds to zeroed ones, returned. */
enum { V_FP32, V_HALF, V_RECOMPUTE, V_NO_OVERLAP, V_FP32_TWICE, V_MICRO, V_N };
static const char *const variant_name[V_N] = {
    "FP32", "FP16 storage", "recompute", "one mask per target", "FP32 (an image twice)",
    "micro-batches 1 + 1"};

typedef struct seg_batch {
    float *images, *targets, *masks;
    int batch, nt, size;
    bool per_target;
} seg_batch;

static float *seg_variant_step(yc_model *m, const yc_loss_params *lp, int v, const seg_batch *sb,
                               yc_seg_loss_result *res)
{
    ck_assert_int_eq(yc_model_zero_grad(m), YC_OK);
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .half = v == V_HALF,
                           .recompute = v == V_RECOMPUTE};
    const int S = sb->size, mh = S / 4, micro = v == V_MICRO ? 1 : sb->batch;
    yc_seg_step *s = NULL;
    ck_assert_msg(yc_seg_step_new(&s, m, micro, S, S, lp, &go) == YC_OK, "%s: %s",
                  variant_name[v], yc_last_error());
    yc_seg_masks mk = {.m = sb->masks, .h = mh, .w = mh, .per_target = sb->per_target};
    if (v != V_MICRO) {
        ck_assert_msg(yc_seg_step_run(s, sb->images, sb->targets, sb->nt, &mk, res) == YC_OK,
                      "%s: %s", variant_name[v], yc_last_error());
    } else {
        yc_loss_part part;
        ck_assert_int_eq(yc_seg_step_batch_part(s, sb->batch, sb->targets, sb->nt, &part), YC_OK);
        float *mt = malloc((size_t)sb->nt * 6 * sizeof *mt + 1);
        ck_assert_ptr_nonnull(mt);
        memset(res, 0, sizeof *res);
        for (int first = 0; first < sb->batch; first++) {
            int k = yc_micro_targets(sb->targets, sb->nt, first, 1, mt);
            yc_seg_masks mm;
            yc_seg_micro_masks(&mk, sb->targets, sb->nt, first, 1, NULL, &mm);
            yc_seg_loss_result r;
            s->part = &part;
            ck_assert_msg(yc_seg_step_run(s, sb->images + (size_t)first * 3 * S * S, mt, k, &mm,
                                          &r) == YC_OK, "%s", yc_last_error());
            res->total += r.total, res->box += r.box, res->seg += r.seg, res->obj += r.obj;
            res->cls += r.cls;
        }
        free(mt);
    }
    yc_seg_step_free(s);
    return grads_of(m);
}

/* The training variants of one step on `device` against the same step in FP32 (what the
 * trainer's memory fit and --no-overlap choose): on the tiny case's batch (2 images)
 *   - FP16 storage of the activations (where the device can store half),
 *   - SiLU outputs recomputed in backward,
 *   - one mask per target (no overlap: the targets of each index map's instances, which do not
 *     overlap, so the same loss),
 * and, on the case's first image twice with its targets and map twice (so that BatchNorm's batch
 * statistics are those of each part), two micro-batches of one image (s->part) against the
 * batch of two.  Recomputation, per-target masks and micro-batches are the same arithmetic up to
 * float rounding: loss within 1e-5, gradients within 1.5e-3 (test_train's micro-batch bound).
 * FP16 storage rounds every stored activation to 11 bits: judged as test_golden judges
 * detection's FP16 step against PyTorch's FP32 one (loss within YC_GOLDEN_HALF_TOL_LOSS, each
 * gradient tensor's direction and norm within YC_GOLDEN_HALF_ANGLE and YC_GOLDEN_HALF_RATIO). */
static void seg_variants(const char *device)
{
    seg_case c;
    tiny_case(&c);
    yc_backend *be = NULL;
    ck_assert_msg(yc_device_open(device, 0, false, &be) == YC_OK, "%s", yc_last_error());
    yc_model *m = seg_model(be, c.cfg, c.nc);
    ck_assert_msg(yc_model_load(m, c.weights) == YC_OK, "%s", yc_last_error());
    size_t ni = 0, nt6 = 0, nmask = 0;
    seg_batch b0 = {.size = c.img};
    b0.images = read_tensor(c.batch, "images", &ni);
    b0.targets = read_tensor(c.batch, "targets", &nt6);
    b0.masks = read_tensor(c.batch, "masks", &nmask);
    const int S = c.img, mh = S / 4;
    const size_t img = 3 * (size_t)S * S, mhw = (size_t)mh * mh;
    b0.batch = (int)(ni / img);
    b0.nt = (int)(nt6 / 6);
    ck_assert(b0.batch == 2 && nmask == 2 * mhw);
    /* per-target masks: row t is its image's instance 1 + (its rank among that image's rows),
     * the loss's numbering for rows sorted by image */
    seg_batch bp = b0;
    bp.per_target = true;
    bp.masks = malloc((size_t)b0.nt * mhw * sizeof *bp.masks);
    ck_assert_ptr_nonnull(bp.masks);
    for (int t = 0; t < b0.nt; t++) {
        int im = (int)b0.targets[t * 6], k = 1;
        ck_assert(t == 0 || b0.targets[(t - 1) * 6] <= b0.targets[t * 6]);
        for (int j = 0; j < t; j++)
            k += (int)b0.targets[j * 6] == im;
        for (size_t i = 0; i < mhw; i++)
            bp.masks[(size_t)t * mhw + i] = b0.masks[(size_t)im * mhw + i] == (float)k;
    }
    /* image 0 twice, its rows twice */
    seg_batch b2 = b0;
    b2.images = malloc(2 * img * sizeof *b2.images);
    b2.masks = malloc(2 * mhw * sizeof *b2.masks);
    b2.targets = malloc(nt6 * 2 * sizeof *b2.targets);
    ck_assert(b2.images && b2.masks && b2.targets);
    memcpy(b2.images, b0.images, img * sizeof *b2.images);
    memcpy(b2.images + img, b0.images, img * sizeof *b2.images);
    memcpy(b2.masks, b0.masks, mhw * sizeof *b2.masks);
    memcpy(b2.masks + mhw, b0.masks, mhw * sizeof *b2.masks);
    int n0 = 0;
    for (int i = 0; i < b0.nt; i++)
        if (b0.targets[i * 6] == 0.0f)
            memcpy(b2.targets + 6 * n0++, b0.targets + 6 * i, 6 * sizeof *b2.targets);
    ck_assert(n0 > 0);
    for (int i = 0; i < n0; i++) {
        memcpy(b2.targets + 6 * (n0 + i), b2.targets + 6 * i, 6 * sizeof *b2.targets);
        b2.targets[6 * (n0 + i)] = 1.0f;
    }
    b2.nt = 2 * n0;

    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_seg_step_loss_params(m, &hyp, S, 0.0f, &lp);
    float *g[V_N] = {0};
    yc_seg_loss_result res[V_N];
    for (int v = 0; v < V_N; v++) {
        if (v == V_HALF && !be->info.fp16_storage)
            continue;
        const seg_batch *sb = v >= V_FP32_TWICE ? &b2 : v == V_NO_OVERLAP ? &bp : &b0;
        g[v] = seg_variant_step(m, &lp, v, sb, &res[v]);
        if (v == V_FP32 || v == V_FP32_TWICE)
            continue;
        const int ref = v >= V_FP32_TWICE ? V_FP32_TWICE : V_FP32;
        const double tol_loss = v == V_HALF ? YC_GOLDEN_HALF_TOL_LOSS : 1e-5;
        const double x[5] = {res[v].total, res[v].box, res[v].seg, res[v].obj, res[v].cls};
        const double y[5] = {res[ref].total, res[ref].box, res[ref].seg, res[ref].obj,
                             res[ref].cls};
        for (int i = 0; i < 5; i++)
            ck_assert_msg(yc_test_rel_diff(x[i], y[i]) < tol_loss, "%s on %s: loss %d %.8g, "
                          "FP32 %.8g", variant_name[v], device, i, x[i], y[i]);
        if (v == V_HALF) {
            /* tensors of 64 or more values each, and the whole gradient: the 4-value BatchNorm
             * parameters of the 0.0625-wide model are the ill-conditioned ones (see
             * TINY_TOL_GRAD; measured: model.2.m.0.cv2.bn.weight cosine 0.92, norm ratio 1.34; the whole
             * gradient 1 - cosine 4.4e-3, norm ratio 1.0075) */
            double angle = 0, ratio = 0;
            for (int i = 0; i < m->nparams; i++) {
                const yc_param *p = &m->params[i];
                if (p->numel < 64)
                    continue;
                yc_test_similarity sim = yc_test_similar(g[v] + p->offset, g[ref] + p->offset,
                                                         p->numel);
                double a1 = 1 - sim.cosine, r1 = fabs(sim.norm_ratio - 1);
                ck_assert_msg(a1 < YC_GOLDEN_HALF_ANGLE && r1 < YC_GOLDEN_HALF_RATIO, "FP16 "
                              "storage on %s: gradient of %s: cosine %.6f, norm ratio %.4f",
                              device, p->name, sim.cosine, sim.norm_ratio);
                angle = a1 > angle ? a1 : angle;
                ratio = r1 > ratio ? r1 : ratio;
            }
            yc_test_similarity all = yc_test_similar(g[v], g[ref], m->param_elems);
            ck_assert_msg(1 - all.cosine < 1e-2 && fabs(all.norm_ratio - 1) < 2e-2, "FP16 storage "
                          "on %s: the whole gradient's cosine %.6f, norm ratio %.4f", device,
                          all.cosine, all.norm_ratio);
            printf("segmentation step on %s, FP16 storage: loss %.7f (FP32 %.7f), gradients' "
                   "worst 1 - cosine %.2e, |norm ratio - 1| %.2e (tensors of 64 values or more), "
                   "whole gradient 1 - cosine %.2e\n", device, res[v].total, res[ref].total,
                   angle, ratio, 1 - all.cosine);
            continue;
        }
        const char *which;
        double e = worst_grad(m, g[v], g[ref], &which);
        printf("segmentation step on %s, %s: loss %.7f (FP32 %.7f), gradients within %.2e (%s)\n",
               device, variant_name[v], res[v].total, res[ref].total, e, which);
        ck_assert_msg(e < 1.5e-3, "%s on %s: gradient of %s off by %.3g", variant_name[v], device,
                      which, e);
    }
    for (int v = 0; v < V_N; v++)
        free(g[v]);
    free(b0.images), free(b0.targets), free(b0.masks), free(bp.masks);
    free(b2.images), free(b2.targets), free(b2.masks);
    yc_model_free(m);
    yc_backend_free(be);
}

START_TEST(step_variants_match_fp32)
{
    seg_variants("cpu");
    if (cl_devices > 0)
        seg_variants("opencl:0");
    else
        yc_test_part_skipped(YC_TEST_NEEDS_OPENCL, "no OpenCL device: the variants ran on the CPU "
                             "only");
}
END_TEST

#else /* YC_TEST_SHARED */

static const char *const ref_files[] = {
    "ref/seg/yolov5n-seg-160/weights.safetensors", "ref/seg/yolov5n-seg-160/batch.safetensors",
    "ref/seg/yolov5n-seg-160/expected.safetensors", "ref/seg/yolov5n-seg-160/grads.safetensors",
    NULL};

static void ref_case(seg_case *c)
{
    snprintf(c->cfg, sizeof c->cfg, "yolov5n-seg");
    yc_test_shared_path(ref_files[0], c->weights, sizeof c->weights);
    yc_test_shared_path(ref_files[1], c->batch, sizeof c->batch);
    yc_test_shared_path(ref_files[2], c->expected, sizeof c->expected);
    yc_test_shared_path(ref_files[3], c->grads, sizeof c->grads);
    c->nc = 80;
    c->img = 160;
}

START_TEST(yolov5n_seg_matches_pytorch)
{
    seg_case c;
    ref_case(&c);
    seg_run r;
    seg_run_case(&r, &c, "cpu");
    seg_check_case(&r, &c, "yolov5n-seg (nc 80, 160x160, batch 2) on the CPU", 1e-3);
    seg_run_free(&r);
    if (cl_devices > 0) {
        seg_run_case(&r, &c, "opencl:0");
        seg_check_case(&r, &c, "yolov5n-seg (nc 80, 160x160, batch 2) on OpenCL", 1e-3);
        seg_run_free(&r);
    } else {
        yc_test_part_skipped(YC_TEST_NEEDS_OPENCL, "no OpenCL device: the step ran on the CPU only");
    }
}
END_TEST

#endif

int main(void)
{
#ifdef YC_TEST_SHARED
    /* before anything is allocated: a sanitizer build counts what a skip leaves as a leak */
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED,
                            "%s not found (the PyTorch reference dumps live in ../shared)",
                            missing);
#endif
    cl_devices = yc_harness_opencl_devices();
    Suite *s = suite_create("segment");
    TCase *tc = tcase_create("segment");
    tcase_set_timeout(tc, 600);
#ifdef YC_TEST_SHARED
    tcase_add_test(tc, yolov5n_seg_matches_pytorch);
#else
    tcase_add_test(tc, configs);
    tcase_add_test(tc, loss_gradient_matches_differences);
    tcase_add_test(tc, loss_matches_pytorch);
    tcase_add_test(tc, loss_no_overlap_matches_pytorch);
    tcase_add_test(tc, weights_give_classes);
    tcase_add_test(tc, tiny_matches_pytorch);
    tcase_add_test(tc, opencl_matches_cpu);
    tcase_add_test(tc, step_variants_match_fp32);
#endif
    suite_add_tcase(s, tc);
    return yc_harness_main(s, "segment");
}
