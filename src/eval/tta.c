/* Test-time augmentation: YOLOv5 v7.0 _forward_augment (see tta.h). */
#include "tta.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loss.h"
#include "nms.h"
#include "util.h"

/* models/yolo.py: s = [1, 0.83, 0.67], f = [None, 3, None] (3: flip dimension 3, left-right) */
const double yc_tta_scales[YC_TTA_PASSES] = {1.0, 0.83, 0.67};
const bool yc_tta_flip_lr[YC_TTA_PASSES] = {false, true, false};

/* scale_img's pad value (the ImageNet mean) */
#define TTA_PAD 0.447f

void yc_tta_shape(int h, int w, double ratio, int gs, int *rh, int *rw, int *ph, int *pw)
{
    if (ratio == 1.0) {
        *rh = *ph = h;
        *rw = *pw = w;
        return;
    }
    /* s = (int(h * ratio), int(w * ratio)); h, w = (math.ceil(x * ratio / gs) * gs ...) */
    *rh = (int)((double)h * ratio);
    *rw = (int)((double)w * ratio);
    *ph = (int)ceil((double)h * ratio / gs) * gs;
    *pw = (int)ceil((double)w * ratio / gs) * gs;
}

/* PyTorch's linear interpolation indices and weights along one axis (compute_indices_weights_
 * linear with align_corners=False and no scale factor): for output i, the lower source index,
 * whether the upper one is index + 1 (else the same, at the edge) and the upper weight. */
static void axis_weights(int in, int out, int *idx, int *step, float *lam)
{
    const float scale = (float)in / (float)out;
    for (int i = 0; i < out; i++) {
        float src = (float)((double)scale * ((double)i + 0.5) - 0.5);
        if (src < 0)
            src = 0;
        int k = (int)floorf(src);
        if (k > in - 1)
            k = in - 1;
        float l = src - (float)k;
        l = l < 0 ? 0 : l > 1 ? 1 : l;
        idx[i] = k;
        step[i] = k < in - 1 ? 1 : 0;
        lam[i] = l;
    }
}

int yc_tta_scale_img(const float *src, int c, int h, int w, double ratio, bool flip_lr, int gs,
                     float *dst)
{
    int rh, rw, ph, pw;
    yc_tta_shape(h, w, ratio, gs, &rh, &rw, &ph, &pw);
    const size_t iplane = (size_t)h * (size_t)w, oplane = (size_t)ph * (size_t)pw;
    if (ratio == 1.0) {
        /* scale_img returns the image as it is (flipped when asked) */
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    dst[ch * oplane + (size_t)y * pw + x] =
                        src[ch * iplane + (size_t)y * w + (flip_lr ? w - 1 - x : x)];
        return YC_OK;
    }
    if (rh < 1 || rw < 1)
        return yc_error_status(YC_EUSAGE, "scale_img: %dx%d scaled by %g is empty", h, w, ratio);
    /* index tables: lower index, step to the upper one, upper weight, per output row and column */
    int *yi = yc_malloc(2 * ((size_t)rh + (size_t)rw) * sizeof *yi, "scale_img indices");
    float *yl = yc_malloc(((size_t)rh + (size_t)rw) * sizeof *yl, "scale_img weights");
    if (!yi || !yl) {
        free(yi);
        free(yl);
        return YC_ENOMEM;
    }
    int *ys = yi + rh, *xi = ys + rh, *xs = xi + rw;
    float *xl = yl + rh;
    axis_weights(h, rh, yi, ys, yl);
    axis_weights(w, rw, xi, xs, xl);
    for (int ch = 0; ch < c; ch++) {
        const float *p = src + ch * iplane;
        float *q = dst + ch * oplane;
        for (int y = 0; y < ph; y++) {
            float *row = q + (size_t)y * pw;
            if (y >= rh) {
                for (int x = 0; x < pw; x++)
                    row[x] = TTA_PAD;
                continue;
            }
            const float *r0 = p + (size_t)yi[y] * w, *r1 = r0 + (size_t)ys[y] * w;
            const float h1 = yl[y], h0 = 1.0f - h1;
            for (int x = 0; x < rw; x++) {
                /* columns of the flipped image: column k of flip(x) is column w-1-k of x */
                int a = xi[x], b = xi[x] + xs[x];
                if (flip_lr) {
                    a = w - 1 - a;
                    b = w - 1 - b;
                }
                const float w1 = xl[x], w0 = 1.0f - w1;
                /* Interpolate<2>: the height weights outside, the width weights inside */
                float t0 = r0[a] * w0 + r0[b] * w1;
                float t1 = r1[a] * w0 + r1[b] * w1;
                row[x] = t0 * h0 + t1 * h1;
            }
            for (int x = rw; x < pw; x++)
                row[x] = TTA_PAD;
        }
    }
    free(yi);
    free(yl);
    return YC_OK;
}

void yc_tta_descale(float *rows, size_t n, int no, double ratio, bool flip_lr, int img_w)
{
    /* p[..., :4] /= scale (a float32 tensor divided by a Python float: in float32) */
    const float s = (float)ratio;
    for (size_t i = 0; i < n; i++) {
        float *r = rows + i * (size_t)no;
        for (int k = 0; k < 4; k++)
            r[k] /= s;
        if (flip_lr)
            r[0] = (float)img_w - r[0];
    }
}

void yc_tta_clip(size_t rows, int nl, int pass, size_t *first, size_t *count)
{
    /* g = sum(4 ** x for x in range(nl)); e = 1 */
    size_t g = 0, p4 = 1;
    for (int x = 0; x < nl; x++, p4 *= 4)
        g += p4;
    *first = 0;
    *count = rows;
    if (pass == 0) {
        /* i = (y[0].shape[1] // g) * sum(4 ** x for x in range(e)); y[0] = y[0][:, :-i] */
        size_t i = rows / g;
        *count = rows - i;
    } else if (pass == YC_TTA_PASSES - 1) {
        /* i = (y[-1].shape[1] // g) * sum(4 ** (nl - 1 - x) for x in range(e)); y[-1][:, i:] */
        size_t i = rows / g * (p4 / 4);
        *first = i;
        *count = rows - i;
    }
}

struct yc_tta {
    yc_model *m;
    bool half;
    yc_arena own, *arena;
    yc_graph *g[YC_TTA_PASSES];
    int gn[YC_TTA_PASSES], gh[YC_TTA_PASSES], gw[YC_TTA_PASSES];
    /* scaled input batch, heads read back, one image's decoded rows, the output rows */
    float *input, *heads[YC_MAX_LEVELS], *img_rows, *out;
    size_t input_cap, heads_cap[YC_MAX_LEVELS], img_rows_cap, out_cap;
};

int yc_tta_new(yc_tta **out, yc_model *m, bool half, yc_arena *arena)
{
    *out = NULL;
    yc_tta *t = yc_calloc(1, sizeof *t, "test-time augmentation state");
    if (!t)
        return YC_ENOMEM;
    t->m = m;
    t->half = half;
    yc_arena_init(&t->own, m->be);
    t->arena = arena ? arena : &t->own;
    *out = t;
    return YC_OK;
}

void yc_tta_free(yc_tta *t)
{
    if (!t)
        return;
    for (int p = 0; p < YC_TTA_PASSES; p++)
        yc_graph_free(t->g[p]);
    yc_arena_release(&t->own);
    free(t->input);
    for (int l = 0; l < YC_MAX_LEVELS; l++)
        free(t->heads[l]);
    free(t->img_rows);
    free(t->out);
    free(t);
}

static int grow(float **p, size_t *cap, size_t n, const char *what)
{
    if (n <= *cap)
        return YC_OK;
    float *q = yc_realloc(*p, n * sizeof *q, what);
    if (!q)
        return YC_ENOMEM;
    *p = q;
    *cap = n;
    return YC_OK;
}

static const float *host_f32(yc_backend *be, const yc_tensor *t)
{
    if (!be->iface->buffer_host_ptr || t->type != YC_F32 || !t->buf)
        return NULL;
    const char *base = be->iface->buffer_host_ptr(be, t->buf);
    return base ? (const float *)(const void *)(base + t->offset) : NULL;
}

/* The graph of pass p for n x h x w (kept while the shape repeats). */
static int pass_graph(yc_tta *t, int p, int n, int h, int w)
{
    if (t->g[p] && t->gn[p] == n && t->gh[p] == h && t->gw[p] == w)
        return YC_OK;
    yc_graph_free(t->g[p]);
    t->g[p] = NULL;
    yc_graph_options go = {.mode = YC_GRAPH_EVAL, .half = t->half};
    int st = yc_graph_new_opts(&t->g[p], t->m, n, h, w, &go);
    if (!st)
        st = yc_graph_alloc_in(t->g[p], t->arena);
    if (st) {
        yc_graph_free(t->g[p]);
        t->g[p] = NULL;
        return yc_error_context(st, "building the %dx%dx%d graph of augmented inference "
                                "(scale %g)", n, h, w, yc_tta_scales[p]);
    }
    t->gn[p] = n;
    t->gh[p] = h;
    t->gw[p] = w;
    return YC_OK;
}

int yc_tta_predict(yc_tta *t, const float *input, int n, int h, int w, const float **rows,
                   size_t *rows_per_image)
{
    yc_model *m = t->m;
    /* gs = int(self.stride.max()) */
    const int gs = (int)m->stride[m->nl - 1];
    const int no = m->no;
    *rows = NULL;
    *rows_per_image = 0;
    if (n < 1 || h % gs || w % gs)
        return yc_error_status(YC_EUSAGE, "augmented inference: the input %dx%d is not a "
                               "multiple of the stride %d", h, w, gs);
    /* the kept rows of each pass: the row counts follow from the padded shapes */
    size_t first[YC_TTA_PASSES], count[YC_TTA_PASSES], total = 0;
    int ph[YC_TTA_PASSES], pw[YC_TTA_PASSES];
    for (int p = 0; p < YC_TTA_PASSES; p++) {
        int rh, rw;
        yc_tta_shape(h, w, yc_tta_scales[p], gs, &rh, &rw, &ph[p], &pw[p]);
        if (rh < 1 || rw < 1 || rh > 16384 || rw > 16384)
            return yc_error_status(YC_EUSAGE, "augmented inference: %dx%d scaled by %g is "
                                   "outside 1..16384 pixels", h, w, yc_tta_scales[p]);
        size_t r = 0;
        for (int l = 0; l < m->nl; l++)
            r += (size_t)m->na * (size_t)(ph[p] / (int)m->stride[l]) *
                 (size_t)(pw[p] / (int)m->stride[l]);
        yc_tta_clip(r, m->nl, p, &first[p], &count[p]);
        total += count[p];
    }
    int st = grow(&t->out, &t->out_cap, (size_t)n * total * (size_t)no, "augmented rows");
    if (st)
        return st;
    const size_t plane = (size_t)h * (size_t)w;
    size_t at = 0; /* the first row of this pass in each image's block */
    for (int p = 0; p < YC_TTA_PASSES; p++) {
        /* (n, 3, h, w) -> scale_img(flip(x)) (n, 3, ph, pw) */
        const size_t oimg = 3 * (size_t)ph[p] * (size_t)pw[p];
        if ((st = grow(&t->input, &t->input_cap, (size_t)n * oimg, "augmented input")) ||
            (st = pass_graph(t, p, n, ph[p], pw[p])))
            return st;
        for (int i = 0; i < n && !st; i++)
            st = yc_tta_scale_img(input + (size_t)i * 3 * plane, 3, h, w, yc_tta_scales[p],
                                  yc_tta_flip_lr[p], gs, t->input + (size_t)i * oimg);
        if (st || (st = yc_tensor_set_f32(m->be, yc_graph_input(t->g[p]), t->input)) ||
            (st = yc_graph_forward(t->g[p])) || (st = m->be->iface->synchronize(m->be)))
            return yc_error_context(st, "augmented inference (scale %g)", yc_tta_scales[p]);
        /* the heads (read back when not in host memory) -> decoded rows of each image */
        yc_detect_level lv[YC_MAX_LEVELS];
        for (int l = 0; l < m->nl; l++) {
            const yc_tensor *hd = yc_graph_head(t->g[p], l);
            const float *q = host_f32(m->be, hd);
            size_t img_stride = hd->nstride;
            if (!q) {
                if ((st = grow(&t->heads[l], &t->heads_cap[l], yc_tensor_elems(hd),
                               "augmented head outputs")) ||
                    (st = yc_tensor_get_f32(m->be, hd, t->heads[l])))
                    return st;
                q = t->heads[l];
                img_stride = yc_tensor_image_elems(hd);
            }
            lv[l] = (yc_detect_level){.p = q, .ny = hd->h, .nx = hd->w, .img_stride = img_stride,
                                      .stride = m->stride[l]};
        }
        size_t r = yc_detect_rows(lv, m->nl, m->na);
        if ((st = grow(&t->img_rows, &t->img_rows_cap, r * (size_t)no, "augmented rows")))
            return st;
        for (int i = 0; i < n; i++) {
            if ((st = yc_detect_decode(lv, m->nl, m->na, no, m->anchors, i, t->img_rows)))
                return st;
            float *kept = t->img_rows + first[p] * (size_t)no;
            yc_tta_descale(kept, count[p], no, yc_tta_scales[p], yc_tta_flip_lr[p], w);
            memcpy(t->out + ((size_t)i * total + at) * (size_t)no, kept,
                   count[p] * (size_t)no * sizeof(float));
        }
        at += count[p];
    }
    *rows = t->out;
    *rows_per_image = total;
    return YC_OK;
}
