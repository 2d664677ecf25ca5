/* yolocl's own outputs for the ONNX comparisons of tests/test_onnx.sh (a plain program, not a
 * test of its own):
 *
 *   tests/onnx_ref [--cfg MODEL] WEIGHTS H W BATCH OUTDIR IMAGE...
 *
 * loads WEIGHTS (any task, on the CPU backend; MODEL for weights without a config), letterboxes the images to exactly H x W (YOLOv5's
 * letterbox with auto=False: the shape an exported file takes), image b of the batch being
 * IMAGE[b % n], runs the evaluation forward pass with the model fused (yc_model_fuse) as val and
 * detect run it, and writes OUTDIR/input.npy, the batch as the ONNX input `images`
 * (BATCH, 3, H, W) float32 in [0, 1], and what the exported file should give for it:
 *   detection      output0.npy (BATCH, anchors, 5 + nc): the heads decoded as Detect in export
 *                  mode (nms.h's yc_detect_decode);
 *   segmentation   output0.npy (BATCH, anchors, 5 + nc + nm): the same with the nm mask
 *                  coefficients raw (Detect's Segment branch leaves them), and output1.npy
 *                  (BATCH, nm, H/4, W/4), Proto's output;
 *   classification output0.npy (BATCH, nc), the logits;
 * all float32, for numpy (Python) and a small .npy reader (Node).  Exit status 0, or 1 with a
 * message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "detect.h"
#include "device.h"
#include "graph.h"
#include "image.h"
#include "log.h"
#include "nms.h"

/* Writes a float32 array as a .npy file (format version 1.0, C order). */
static int write_npy(const char *path, const int *shape, int nd, const float *v)
{
    char dims[128] = "", header[256];
    size_t n = 1;
    for (int i = 0; i < nd; i++) {
        size_t len = strlen(dims);
        snprintf(dims + len, sizeof dims - len, "%d,%s", shape[i], i + 1 < nd ? " " : "");
        n *= (size_t)shape[i];
    }
    int hl = snprintf(header, sizeof header,
                      "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
    /* the magic (6), version (2) and length (2) then the header, padded with spaces to a
     * multiple of 64 bytes and ended by a newline */
    int total = (10 + hl + 1 + 63) / 64 * 64;
    while (10 + hl + 1 < total)
        header[hl++] = ' ';
    header[hl++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f)
        return yc_error_status(YC_EIO, "cannot create %s", path);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff),
                             (unsigned char)(hl >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)hl, f) == (size_t)hl &&
              fwrite(v, sizeof *v, n, f) == n;
    if (fclose(f) != 0 || !ok)
        return yc_error_status(YC_EIO, "cannot write %s", path);
    return YC_OK;
}

/* The letterboxed images of the batch as CHW floats / 255 in input (batch * 3 * h * w). */
static int load_batch(char **images, int nimages, int batch, int h, int w, int stride,
                      float *input)
{
    yc_image img = YC_IMAGE_INIT, tmp = YC_IMAGE_INIT, lb = YC_IMAGE_INIT;
    int st = YC_OK;
    size_t plane = (size_t)h * (size_t)w;
    for (int b = 0; b < batch && !st; b++) {
        const char *path = images[b % nimages];
        if ((st = yc_image_decode(path, &img, &tmp, NULL)) ||
            (st = yc_letterbox(&img, &lb, h, w, false, false, true, stride, NULL))) {
            st = yc_error_context(st, "reading %s", path);
            break;
        }
        float *dst = input + (size_t)b * 3 * plane;
        for (size_t i = 0; i < plane; i++)
            for (int c = 0; c < 3; c++)
                dst[(size_t)c * plane + i] = (float)lb.data[3 * i + (size_t)c] / 255.0f;
    }
    yc_image_free(&img);
    yc_image_free(&tmp);
    yc_image_free(&lb);
    return st;
}

/* What onnx_ref writes besides the input: output0 (n0 dims in d0) and, for a segmentation model,
 * output1 (4 dims in d1). */
typedef struct outputs {
    float *out0, *out1;
    int d0[3], n0, d1[4];
} outputs;

/* Forward and decoding of the batch in input into o (see the head of the file). */
static int run(yc_model *m, int batch, int h, int w, const float *input, outputs *o)
{
    yc_graph *g = NULL;
    float *heads[YC_CFG_MAX_LEVELS] = {NULL};
    int st;
    if ((st = yc_graph_new(&g, m, batch, h, w, YC_GRAPH_EVAL)) || (st = yc_graph_alloc(g)) ||
        (st = yc_tensor_set_f32(m->be, yc_graph_input(g), input)) ||
        (st = yc_graph_forward(g)) || (st = m->be->iface->synchronize(m->be)))
        goto done;
    if (m->cfg->task == YC_TASK_CLASSIFY) {
        /* the graph's one head: the logits (N, nc, 1, 1) */
        o->n0 = 2;
        o->d0[0] = batch;
        o->d0[1] = m->nc;
        if (!(o->out0 = yc_malloc((size_t)batch * (size_t)m->nc * sizeof(float), "logits")))
            st = YC_ENOMEM;
        else
            st = yc_tensor_get_f32(m->be, yc_graph_head(g, 0), o->out0);
        goto done;
    }
    yc_detect_level lv[YC_CFG_MAX_LEVELS];
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(g, l);
        if (!(heads[l] = yc_malloc(yc_tensor_elems(t) * sizeof(float), "head outputs"))) {
            st = YC_ENOMEM;
            goto done;
        }
        if ((st = yc_tensor_get_f32(m->be, t, heads[l])))
            goto done;
        lv[l] = (yc_detect_level){.p = heads[l], .ny = t->h, .nx = t->w,
                                  .img_stride = yc_tensor_image_elems(t), .stride = m->stride[l]};
    }
    size_t rows = yc_detect_rows(lv, m->nl, m->na);
    size_t per = rows * (size_t)m->no;
    o->n0 = 3;
    o->d0[0] = batch;
    o->d0[1] = (int)rows;
    o->d0[2] = m->no;
    if (!(o->out0 = yc_malloc((size_t)batch * per * sizeof(float), "output0"))) {
        st = YC_ENOMEM;
        goto done;
    }
    for (int b = 0; b < batch && !st; b++)
        st = yc_detect_decode(lv, m->nl, m->na, m->no, m->anchors, b, o->out0 + (size_t)b * per);
    int nm = m->no - 5 - m->nc;
    if (st || nm <= 0)
        goto done;
    /* Segment: the mask coefficients raw, rows in decode order (level, anchor, y, x) */
    for (int b = 0; b < batch; b++) {
        float *row = o->out0 + (size_t)b * per;
        for (int l = 0; l < m->nl; l++) {
            size_t plane = (size_t)lv[l].ny * (size_t)lv[l].nx;
            const float *hb = heads[l] + (size_t)b * lv[l].img_stride;
            for (int a = 0; a < m->na; a++)
                for (size_t yx = 0; yx < plane; yx++, row += m->no)
                    for (int k = 5 + m->nc; k < m->no; k++)
                        row[k] = hb[((size_t)a * (size_t)m->no + (size_t)k) * plane + yx];
        }
    }
    const yc_tensor *pt = yc_graph_head(g, m->nl);
    o->d1[0] = batch;
    o->d1[1] = pt->c;
    o->d1[2] = pt->h;
    o->d1[3] = pt->w;
    if (!(o->out1 = yc_malloc(yc_tensor_elems(pt) * sizeof(float), "output1")))
        st = YC_ENOMEM;
    else
        st = yc_tensor_get_f32(m->be, pt, o->out1);
done:
    for (int l = 0; l < YC_CFG_MAX_LEVELS; l++)
        free(heads[l]);
    yc_graph_free(g);
    return st;
}

int main(int argc, char **argv)
{
    const char *cfg = NULL;
    if (argc > 2 && !strcmp(argv[1], "--cfg")) {
        cfg = argv[2];
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
    }
    if (argc < 7) {
        fprintf(stderr, "usage: %s [--cfg MODEL] WEIGHTS H W BATCH OUTDIR IMAGE...\n", argv[0]);
        return 2;
    }
    int h = atoi(argv[2]), w = atoi(argv[3]), batch = atoi(argv[4]);
    if (h < 32 || w < 32 || batch < 1) {
        fprintf(stderr, "%s: bad size %sx%s or batch %s\n", argv[0], argv[2], argv[3], argv[4]);
        return 2;
    }
    yc_backend *be = NULL;
    yc_infer_model im = {0};
    float *input = NULL;
    outputs o = {0};
    int st = yc_device_open("cpu", 0, false, &be);
    if (!st)
        st = yc_infer_model_load_any(&im, argv[1], cfg, be);
    size_t in_elems = (size_t)batch * 3 * (size_t)h * (size_t)w;
    if (!st && !(input = yc_malloc(in_elems * sizeof *input, "the input batch")))
        st = YC_ENOMEM;
    if (!st)
        st = yc_model_fuse(im.m);
    if (!st)
        st = load_batch(argv + 6, argc - 6, batch, h, w, im.stride, input);
    if (!st)
        st = run(im.m, batch, h, w, input, &o);
    char path[4096];
    if (!st) {
        int shape[4] = {batch, 3, h, w};
        snprintf(path, sizeof path, "%s/input.npy", argv[5]);
        st = write_npy(path, shape, 4, input);
    }
    if (!st) {
        snprintf(path, sizeof path, "%s/output0.npy", argv[5]);
        st = write_npy(path, o.d0, o.n0, o.out0);
    }
    if (!st && o.out1) {
        snprintf(path, sizeof path, "%s/output1.npy", argv[5]);
        st = write_npy(path, o.d1, 4, o.out1);
    }
    if (st)
        fprintf(stderr, "%s: %s\n", argv[0], yc_last_error());
    free(input);
    free(o.out0);
    free(o.out1);
    yc_infer_model_free(&im);
    yc_backend_free(be);
    return st ? 1 : 0;
}
