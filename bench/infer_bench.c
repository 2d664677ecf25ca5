/* yolocl's side of bench/ort_vs_yolocl.sh: one model's inference pass timed as `yolocl val` and
 * `yolocl detect` run it (an evaluation graph on the CPU backend, forward and the wait for it),
 * and the same model exported as ONNX for ONNX Runtime to time:
 *
 *   bench/infer_bench MODEL IMG BATCH ITERS OUT.onnx [profile] [unfused]
 *
 * MODEL is weights (.pt, .safetensors) or a model config (a bundled name such as yolov5s, with
 * YOLOv5's random initialisation, seed 0: the time does not depend on the values).  Writes
 * OUT.onnx (static IMG x IMG, batch BATCH, FP32, opset 12), runs 2 untimed passes, then ITERS
 * timed ones on pseudo-random pixels, and prints one line:
 *
 *   yolocl MODEL IMG BATCH min_ms median_ms
 *
 * The model is fused (yc_model_fuse) as val and detect fuse it, unless `unfused` is given (the
 * graph then runs each Conv's BatchNorm and SiLU as one op after it).  With `profile`, the timed
 * passes also time each op (waiting for each) and the milliseconds per
 * pass of each op kind follow on standard error.  Threads: OMP_NUM_THREADS (the CPU backend's
 * default otherwise). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "detect.h"
#include "device.h"
#include "graph.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "onnx.h"
#include "util.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static bool is_weights(const char *s)
{
    size_t n = strlen(s);
    return (n > 3 && !strcmp(s + n - 3, ".pt")) || (n > 12 && !strcmp(s + n - 12, ".safetensors"));
}

/* The model on be: loaded from weights, or built from a config and initialised. */
static int open_model(const char *spec, yc_backend *be, yc_infer_model *im)
{
    if (is_weights(spec))
        return yc_infer_model_load(im, spec, NULL, be);
    memset(im, 0, sizeof *im);
    char path[1024];
    yc_model_cfg *cfg = NULL;
    int st;
    if ((st = yc_model_cfg_find(spec, path, sizeof path)) ||
        (st = yc_model_cfg_load(&cfg, path, 0)) || (st = yc_model_new(&im->m, cfg)) ||
        (st = yc_model_alloc_weights(im->m, be)) || (st = yc_model_init_weights(im->m, 0)))
        return st;
    im->stride = 32;
    for (int l = 0; l < im->m->nl; l++)
        if ((int)im->m->stride[l] > im->stride)
            im->stride = (int)im->m->stride[l];
    return YC_OK;
}

/* Milliseconds per pass of each op kind of g over `iters` profiled passes, on stderr. */
static void print_profile(const yc_graph *g, int iters)
{
    double kind[YC_OP_COUNT] = {0}, total = 0;
    int count[YC_OP_COUNT] = {0};
    const double *sec = yc_graph_op_seconds(g);
    for (int i = 0; i < yc_graph_nops(g); i++) {
        kind[yc_graph_op(g, i)->kind] += sec[i];
        count[yc_graph_op(g, i)->kind]++;
        total += sec[i];
    }
    for (int k = 0; k < YC_OP_COUNT; k++)
        if (count[k])
            fprintf(stderr, "  %-16s %4d ops %8.2f ms %5.1f%%\n", yc_op_kind_name((yc_op_kind)k),
                    count[k], kind[k] * 1e3 / iters, 100 * kind[k] / total);
}

/* ITERS timed forward passes of the evaluation graph; *min and *median in milliseconds. */
static int time_forward(yc_model *m, int img, int batch, int iters, bool profile, double *min,
                        double *median)
{
    yc_graph *g = NULL;
    float *x = NULL;
    double *t = NULL;
    const yc_tensor *in;
    int st;
    if ((st = yc_graph_new(&g, m, batch, img, img, YC_GRAPH_EVAL)) || (st = yc_graph_alloc(g)))
        goto done;
    in = yc_graph_input(g);
    x = yc_malloc(yc_tensor_elems(in) * sizeof *x, "the input batch");
    t = yc_malloc((size_t)iters * sizeof *t, "the times");
    if (!x || !t) {
        st = YC_ENOMEM;
        goto done;
    }
    uint32_t s = 12345;
    for (size_t i = 0; i < yc_tensor_elems(in); i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f;
    }
    if ((st = yc_tensor_set_f32(m->be, in, x)))
        goto done;
    for (int i = -2; i < iters; i++) {
        if (i == 0 && profile && (st = yc_graph_set_profiling(g, true)))
            goto done;
        double t0 = yc_now();
        if ((st = yc_graph_forward(g)) || (st = m->be->iface->synchronize(m->be)))
            goto done;
        if (i >= 0)
            t[i] = (yc_now() - t0) * 1e3;
    }
    if (profile)
        print_profile(g, iters);
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    *min = t[0];
    *median = iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
done:
    free(x);
    free(t);
    yc_graph_free(g);
    return st;
}

int main(int argc, char **argv)
{
    bool profile = false, unfused = false;
    for (int i = 6; i < argc; i++) {
        if (!strcmp(argv[i], "profile"))
            profile = true;
        else if (!strcmp(argv[i], "unfused"))
            unfused = true;
        else
            argc = 0;
    }
    if (argc < 6) {
        fprintf(stderr, "usage: %s MODEL IMG BATCH ITERS OUT.onnx [profile] [unfused]\n",
                argv[0]);
        return 2;
    }
    int img = atoi(argv[2]), batch = atoi(argv[3]), iters = atoi(argv[4]);
    if (img < 32 || batch < 1 || iters < 1) {
        fprintf(stderr, "%s: bad IMG %s, BATCH %s or ITERS %s\n", argv[0], argv[2], argv[3],
                argv[4]);
        return 2;
    }
    yc_backend *be = NULL;
    yc_infer_model im = {0};
    double min = 0, median = 0;
    int st = yc_device_open("cpu", 0, false, &be);
    if (!st)
        st = open_model(argv[1], be, &im);
    if (!st) {
        yc_onnx_options o;
        yc_onnx_options_default(&o);
        o.h = o.w = img;
        o.batch = batch;
        o.names = (const char *const *)im.names;
        o.nnames = im.names ? im.m->nc : 0;
        o.version = PACKAGE_VERSION;
        st = yc_onnx_export(im.m, &o, argv[5], NULL);
    }
    if (!st && !unfused)
        st = yc_model_fuse(im.m);
    if (!st)
        st = time_forward(im.m, img, batch, iters, profile, &min, &median);
    if (st)
        fprintf(stderr, "%s: %s\n", argv[0], yc_last_error());
    else
        printf("yolocl %s %d %d %.2f %.2f\n", im.m->cfg->name, img, batch, min, median);
    yc_infer_model_free(&im);
    yc_backend_free(be);
    return st ? 1 : 0;
}
