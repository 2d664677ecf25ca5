/* Validation (see val.h). */
#include "val.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "graph.h"
#include "json.h"
#include "log.h"
#include "loss_device.h"
#include "nms.h"
#include "plots.h"
#include "tta.h"
#include "util.h"
#include "val_seg.h"

void yc_val_options_default(yc_val_options *o)
{
    memset(o, 0, sizeof *o);
    o->conf_thres = 0.001f;
    o->iou_thres = 0.6;
    o->max_det = 300;
    o->print = true;
    o->imgsz = 640;
    o->batch = 32;
    o->mask_overlap = true;
}

void yc_val_result_free(yc_val_result *r)
{
    if (!r)
        return;
    yc_val_metrics_free(&r->metrics);
    yc_val_metrics_free(&r->mask_metrics);
    memset(r, 0, sizeof *r);
}

double yc_val_seg_fitness(const yc_val_result *r)
{
    if (!r->seg)
        return r->metrics.fitness;
    const yc_val_metrics *b = &r->metrics, *k = &r->mask_metrics;
    /* (x[:, :8] * w).sum(1): the products, then numpy's pairwise sum of 8 values */
    const double a[8] = {b->mp * 0.0,  b->mr * 0.0,  b->map50 * 0.1, b->map * 0.9,
                         k->mp * 0.0,  k->mr * 0.0,  k->map50 * 0.1, k->map * 0.9};
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* ------------------------------------------------------------------------------------------------
 * Small pieces
 * ---------------------------------------------------------------------------------------------- */

void yc_val_scale_to_original(float *boxes, size_t n, size_t stride, const yc_val_info *info)
{
    yc_scale_boxes(boxes, n, stride, info->ratio_h, info->lb.pad_w, info->lb.pad_h, info->h0,
                   info->w0);
}

int yc_val_targets_to_original(const float *targets, int nt, int image, int batch_h, int batch_w,
                               const yc_val_info *info, bool single_cls, float *out)
{
    const float W = (float)batch_w, H = (float)batch_h;
    int n = 0;
    for (int k = 0; k < nt; k++) {
        const float *t = targets + (size_t)k * 6;
        if ((int)t[0] != image)
            continue;
        float *o = out + (size_t)n * 5;
        o[0] = single_cls ? 0.0f : t[1];
        o[1] = t[2] * W;
        o[2] = t[3] * H;
        o[3] = t[4] * W;
        o[4] = t[5] * H;
        n++;
    }
    yc_xywh2xyxy(out + 1, (size_t)n, 5);
    yc_val_scale_to_original(out + 1, (size_t)n, 5, info);
    return n;
}

void yc_format_txt_line(char *buf, size_t len, const float *xyxy, float conf, int cls, int w0,
                        int h0, bool save_conf)
{
    float b[4] = {xyxy[0], xyxy[1], xyxy[2], xyxy[3]};
    yc_xyxy2xywh(b, 1, 4);
    const float gw = (float)w0, gh = (float)h0;
    b[0] /= gw;
    b[1] /= gh;
    b[2] /= gw;
    b[3] /= gh;
    if (save_conf)
        snprintf(buf, len, "%g %g %g %g %g %g\n", (double)cls, (double)b[0], (double)b[1],
                 (double)b[2], (double)b[3], (double)conf);
    else
        snprintf(buf, len, "%g %g %g %g %g\n", (double)cls, (double)b[0], (double)b[1],
                 (double)b[2], (double)b[3]);
}

void yc_py_float_repr(double v, char *buf, size_t len)
{
    if (isnan(v)) {
        snprintf(buf, len, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, len, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (v == 0) {
        snprintf(buf, len, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    /* shortest "%.*e" that reads back exactly */
    char e[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p, v);
        if (strtod(e, NULL) == v)
            break;
    }
    /* split into sign, digits and decimal exponent */
    const char *s = e;
    bool neg = *s == '-';
    if (neg)
        s++;
    char digits[24];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && nd < (int)sizeof digits - 1)
            digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int exp10 = *s == 'e' ? atoi(s + 1) : 0;
    int decpt = exp10 + 1; /* value = 0.digits * 10^decpt */
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -decpt; i++)
                out[o++] = '0';
            for (int i = 0; i < nd; i++)
                out[o++] = digits[i];
        } else {
            for (int i = 0; i < decpt; i++)
                out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > decpt)
                for (int i = decpt; i < nd; i++)
                    out[o++] = digits[i];
            else
                out[o++] = '0';
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(buf, len, "%s", out);
}

/* repr(round(v, ndigits)) */
static void py_round_repr(double v, int ndigits, char *buf, size_t len)
{
    char t[64];
    snprintf(t, sizeof t, "%.*f", ndigits, v);
    yc_py_float_repr(strtod(t, NULL), buf, len);
}

int yc_coco80_to_91(int i)
{
    static const int map[80] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 13, 14, 15, 16, 17,
                                18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32, 33, 34, 35, 36,
                                37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53,
                                54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73,
                                74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90};
    return i >= 0 && i < 80 ? map[i] : i + 1;
}

void yc_path_stem(const char *path, char *buf, size_t len)
{
    const char *b = yc_path_basename(path);
    const char *dot = strrchr(b, '.');
    size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    snprintf(buf, len, "%.*s", (int)n, b);
}

/* ------------------------------------------------------------------------------------------------
 * A growing text buffer (the JSON)
 * ---------------------------------------------------------------------------------------------- */

typedef struct text_buf {
    char *p;
    size_t n, cap;
} text_buf;

static int text_add(text_buf *t, const char *s, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1 << 16;
        while (cap < t->n + n + 1)
            cap *= 2;
        char *p = yc_realloc(t->p, cap, "predictions JSON");
        if (!p)
            return YC_ENOMEM;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
    return YC_OK;
}

static int text_str(text_buf *t, const char *s)
{
    return text_add(t, s, strlen(s));
}

/* One image's detections (original pixels) as pred_to_json entries; segs, when given, holds each
 * detection's "segmentation" JSON object (segment/val.py's save_one_json). */
static int json_add_image(text_buf *t, const char *image_path, const float *dets, int nd,
                          bool coco91, const char *const *segs)
{
    char stem[512], *id = NULL;
    yc_path_stem(image_path, stem, sizeof stem);
    bool numeric = stem[0] != 0;
    for (const char *c = stem; *c; c++)
        numeric = numeric && *c >= '0' && *c <= '9';
    if (numeric) {
        /* int(stem): drop leading zeros */
        const char *c = stem;
        while (c[0] == '0' && c[1])
            c++;
        id = yc_strdup(c, "predictions JSON");
    } else {
        id = yc_json_quote(stem, strlen(stem));
    }
    if (!id)
        return YC_ENOMEM;
    int st = YC_OK;
    for (int i = 0; i < nd && !st; i++) {
        const float *d = dets + (size_t)i * 6;
        float b[4] = {d[0], d[1], d[2], d[3]};
        yc_xyxy2xywh(b, 1, 4);
        b[0] -= b[2] / 2;
        b[1] -= b[3] / 2;
        char x[4][48], score[48], line[512];
        for (int k = 0; k < 4; k++)
            py_round_repr((double)b[k], 3, x[k], sizeof x[k]);
        py_round_repr((double)d[4], 5, score, sizeof score);
        int cls = (int)d[5];
        snprintf(line, sizeof line,
                 "%s{\"image_id\": %s, \"category_id\": %d, \"bbox\": [%s, %s, %s, %s], "
                 "\"score\": %s",
                 t->n > 1 ? ", " : "", id, coco91 ? yc_coco80_to_91(cls) : cls, x[0], x[1], x[2],
                 x[3], score);
        st = text_str(t, line);
        if (!st && segs && segs[i] &&
            ((st = text_str(t, ", \"segmentation\": ")) || (st = text_str(t, segs[i]))))
            break;
        if (!st)
            st = text_str(t, "}");
    }
    free(id);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * The validation loop
 * ---------------------------------------------------------------------------------------------- */

/* Per-thread decode and NMS state. */
typedef struct worker_buf {
    float *rows;
    size_t rows_cap;
    yc_nms_scratch *nms;
    /* seconds spent decoding and in NMS by this thread during the current batch */
    double t_dec, t_nms;
    int status;
    char err[256];
} worker_buf;

/* Everything yc_validate allocates. */
typedef struct val_state {
    yc_model *m;
    /* the arena evaluation graphs go in (NULL: each graph has its own) */
    yc_arena *arena;
    yc_graph *g;
    /* the batch shape (n, h, w) g is built for */
    int gshape[3];
    /* the batch as floats for test-time augmentation, which scales it on the host */
    float *input;
    size_t input_cap;
    /* host copies of the heads (when the backend has no host pointer) */
    float *heads[YC_MAX_LEVELS];
    size_t heads_cap[YC_MAX_LEVELS];
    /* per image of the batch: detections (max_det * 6) and their count */
    float *dets;
    int *ndet;
    int dets_images;
    /* per-image scaled copies and labels */
    float *predn, *labels;
    int labels_cap;
    int nworkers;
    worker_buf *workers;
    yc_loss_ctx *loss;
    /* the device loss's sums, read into dl without waiting; loss_pending until a wait */
    yc_device_loss dl;
    bool loss_pending;
    /* the rows the device kept (detect_filter): room for cand_cap rows and ids, and the
     * (id, slot) sort keys */
    float *cand_rows;
    uint32_t *cand_ids;
    uint64_t *cand_keys;
    size_t cand_cap;
    /* per image of the batch: its first key in cand_keys (n + 1 entries) */
    size_t *cand_first;
    int cand_images;
    yc_val_sink *sink;
    /* FP16 storage of the evaluation graphs; test-time augmentation's graphs (augment) */
    bool half;
    yc_tta *tta;
    /* save_hybrid: the current batch's targets (rows of 6 normalised to hyb_h x hyb_w) */
    bool hybrid;
    const float *hyb_targets;
    int hyb_nt, hyb_h, hyb_w;
} val_state;

/* save_hybrid: the rows non_max_suppression appends for image i's labels (labels=lb), after the
 * nrows rows already in *rows (grown to hold them): (cx, cy, w, h) in batch pixels (the targets
 * times (w, h, w, h) in float32), objectness 1, class one-hot.  Returns the new row count. */
static int add_hybrid_rows(const val_state *s, int i, float **rows, size_t *cap, size_t nrows,
                           size_t *out)
{
    const int no = s->m->no;
    *out = nrows;
    if (!s->hybrid)
        return YC_OK;
    size_t nl = 0;
    for (int t = 0; t < s->hyb_nt; t++)
        nl += (int)s->hyb_targets[(size_t)t * 6] == i;
    size_t need = (nrows + nl) * (size_t)no;
    if (need > *cap) {
        float *q = yc_realloc(*rows, need * sizeof *q, "hybrid label rows");
        if (!q)
            return YC_ENOMEM;
        *rows = q;
        *cap = need;
    }
    for (int t = 0; t < s->hyb_nt; t++) {
        const float *g = s->hyb_targets + (size_t)t * 6;
        if ((int)g[0] != i)
            continue;
        float *r = *rows + *out * (size_t)no;
        memset(r, 0, (size_t)no * sizeof *r);
        r[0] = g[2] * (float)s->hyb_w;
        r[1] = g[3] * (float)s->hyb_h;
        r[2] = g[4] * (float)s->hyb_w;
        r[3] = g[5] * (float)s->hyb_h;
        r[4] = 1.0f;
        int c = (int)g[1];
        if (c >= 0 && c < no - 5)
            r[5 + c] = 1.0f;
        (*out)++;
    }
    return YC_OK;
}

static void state_free(val_state *s)
{
    /* the device may still be writing the loss sums into s (a failure after their submit) */
    if (s->loss_pending)
        s->m->be->iface->synchronize(s->m->be);
    yc_graph_free(s->g);
    for (int l = 0; l < YC_MAX_LEVELS; l++)
        free(s->heads[l]);
    free(s->dets);
    free(s->input);
    free(s->ndet);
    free(s->predn);
    free(s->labels);
    for (int i = 0; s->workers && i < s->nworkers; i++) {
        free(s->workers[i].rows);
        yc_nms_scratch_free(s->workers[i].nms);
    }
    free(s->workers);
    yc_loss_free(s->loss);
    free(s->cand_rows);
    free(s->cand_ids);
    free(s->cand_keys);
    free(s->cand_first);
    yc_val_sink_free(s->sink);
    yc_tta_free(s->tta);
}

int yc_val_check(const yc_model *m, const yc_dataset *ds, const yc_val_options *opt)
{
    if (!opt->single_cls && m->nc > ds->nc)
        return yc_error_status(YC_EUSAGE, "the model predicts %d classes but the dataset has %d "
                               "(use weights trained on this dataset, or --single-cls)", m->nc,
                               ds->nc);
    if (opt->max_det < 1)
        return yc_error_status(YC_EUSAGE, "max_det must be at least 1");
    return YC_OK;
}

int yc_val_graph_for(yc_graph **g, int shape[3], yc_model *m, int n, int h, int w, bool half,
                     struct yc_arena *arena)
{
    if (*g && shape[0] == n && shape[1] == h && shape[2] == w)
        return YC_OK;
    yc_graph_free(*g);
    *g = NULL;
    yc_graph_options go = {.mode = YC_GRAPH_EVAL, .half = half};
    int st = yc_graph_new_opts(g, m, n, h, w, &go);
    if (!st)
        st = arena ? yc_graph_alloc_in(*g, arena) : yc_graph_alloc(*g);
    if (st) {
        yc_graph_free(*g);
        *g = NULL;
        return yc_error_context(st, "building the %dx%dx%d evaluation graph", n, h, w);
    }
    shape[0] = n;
    shape[1] = h;
    shape[2] = w;
    return YC_OK;
}

/* Makes the eval graph for n x h x w (reusing the current one when the shape is the same). */
static int ensure_graph(val_state *s, int n, int h, int w)
{
    return yc_val_graph_for(&s->g, s->gshape, s->m, n, h, w, s->half, s->arena);
}

/* Host address of a placed tensor's first element when the backend shares host memory and the
 * tensor is float32, else NULL. */
static float *host_f32(yc_backend *be, const yc_tensor *t)
{
    if (!be->iface->buffer_host_ptr || t->type != YC_F32 || !t->buf)
        return NULL;
    char *base = be->iface->buffer_host_ptr(be, t->buf);
    return base ? (float *)(void *)(base + t->offset) : NULL;
}

static int grow_floats(float **p, size_t *cap, size_t n, const char *what)
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

/* uint8 -> float / 255 into the graph input (on the device where the backend converts uint8). */
static int preprocess(val_state *s, const uint8_t *src)
{
    return yc_tensor_set_u8_scaled(s->m->be, yc_graph_input(s->g), src);
}

/* The heads as decode/loss levels: straight from host memory when possible, else read back. */
static int read_heads(val_state *s, yc_detect_level *lv, yc_loss_head *lh)
{
    yc_model *m = s->m;
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l);
        const float *p = host_f32(m->be, t);
        size_t img_stride = t->nstride;
        if (!p) {
            size_t n = yc_tensor_elems(t);
            int st = grow_floats(&s->heads[l], &s->heads_cap[l], n, "head outputs");
            if (st || (st = yc_tensor_get_f32(m->be, t, s->heads[l])))
                return st;
            p = s->heads[l];
            img_stride = yc_tensor_image_elems(t);
        }
        lv[l] = (yc_detect_level){.p = p, .ny = t->h, .nx = t->w, .img_stride = img_stride,
                                  .stride = m->stride[l]};
        lh[l] = (yc_loss_head){.p = p, .grad = NULL, .ny = t->h, .nx = t->w,
                               .img_stride = img_stride};
    }
    return YC_OK;
}

/* Pre-process and submit the forward of one batch.  Adds the times to *t_pre, *t_inf. */
static int forward(val_state *s, const uint8_t *images, int n, int h, int w, double *t_pre,
                   double *t_inf)
{
    double t0 = yc_now();
    int st = ensure_graph(s, n, h, w);
    if (!st)
        st = preprocess(s, images);
    double t1 = yc_now();
    if (!st)
        st = yc_graph_forward(s->g);
    *t_pre += t1 - t0;
    *t_inf += yc_now() - t1;
    return st;
}

static int ensure_images(val_state *s, int n, int max_det)
{
    if (n <= s->dets_images)
        return YC_OK;
    float *d = yc_realloc(s->dets, (size_t)n * (size_t)max_det * 6 * sizeof *d, "detections");
    if (!d)
        return YC_ENOMEM;
    s->dets = d;
    int *nd = yc_realloc(s->ndet, (size_t)n * sizeof *nd, "detections");
    if (!nd)
        return YC_ENOMEM;
    s->ndet = nd;
    s->dets_images = n;
    return YC_OK;
}

/* Writes the candidate rows of image i into wk->rows (growing it) and their number into *nr. */
typedef int (*image_rows_fn)(val_state *s, const void *ctx, int i, worker_buf *wk, size_t *nr);

/* NMS for each of the n images of the batch, images spread over threads: make_rows gives an
 * image's candidate rows (timed as decoding), save-hybrid labels are added, and the detections go
 * to s->dets and s->ndet.  Each worker's decode and NMS seconds are in its t_dec and t_nms. */
static int nms_images(val_state *s, int n, const yc_nms_params *np, image_rows_fn make_rows,
                      const void *ctx)
{
    const int no = s->m->no;
    for (int i = 0; i < s->nworkers; i++) {
        s->workers[i].t_dec = s->workers[i].t_nms = 0;
        s->workers[i].status = YC_OK;
        s->workers[i].err[0] = 0;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->nworkers)
    for (int i = 0; i < n; i++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        worker_buf *wk = &s->workers[tid];
        if (wk->status)
            continue;
        size_t nr = 0;
        double a = yc_now();
        int st = make_rows(s, ctx, i, wk, &nr);
        double b = yc_now();
        if (!st)
            st = add_hybrid_rows(s, i, &wk->rows, &wk->rows_cap, nr, &nr);
        if (!st)
            st = yc_nms(wk->rows, nr, no, np, wk->nms, s->dets + (size_t)i * np->max_det * 6,
                        &s->ndet[i]);
        wk->t_dec += b - a;
        wk->t_nms += yc_now() - b;
        if (st) {
            wk->status = st;
            snprintf(wk->err, sizeof wk->err, "%s", yc_last_error());
        }
    }
    for (int i = 0; i < s->nworkers; i++)
        if (s->workers[i].status)
            return yc_error_status(s->workers[i].status, "%s", s->workers[i].err);
    return YC_OK;
}

/* image_rows_fn of the heads: image i's rows decoded (ctx: the levels). */
static int decoded_rows(val_state *s, const void *ctx, int i, worker_buf *wk, size_t *nr)
{
    const yc_detect_level *lv = ctx;
    yc_model *m = s->m;
    size_t rows = yc_detect_rows(lv, m->nl, m->na);
    int st = grow_floats(&wk->rows, &wk->rows_cap, rows * (size_t)m->no, "decoded rows");
    if (!st)
        st = yc_detect_decode(lv, m->nl, m->na, m->no, m->anchors, i, wk->rows);
    *nr = rows;
    return st;
}

/* Decode + NMS for every image of the batch, images spread over threads.  Adds the wall time,
 * split between decoding and NMS in proportion to the threads' time in each, to *t_dec, *t_nms. */
static int decode_nms(val_state *s, const yc_detect_level *lv, int n, const yc_nms_params *np,
                      double *t_dec, double *t_nms)
{
    double t0 = yc_now();
    int st = nms_images(s, n, np, decoded_rows, lv);
    if (st)
        return st;
    double wall = yc_now() - t0, dec = 0, nms = 0;
    for (int i = 0; i < s->nworkers; i++) {
        dec += s->workers[i].t_dec;
        nms += s->workers[i].t_nms;
    }
    double f = dec + nms > 0 ? dec / (dec + nms) : 0.5;
    *t_dec += wall * f;
    *t_nms += wall * (1 - f);
    return YC_OK;
}

/* Whether the batch's heads stay on the device: they are not in host memory, and the backend
 * decodes and filters them there (and computes the loss, when one is wanted). */
static bool heads_on_device(val_state *s)
{
    yc_backend *be = s->m->be;
    return be->iface->detect_filter && (!s->loss || be->iface->yolo_loss) &&
           !host_f32(be, yc_graph_head(s->g, 0));
}

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

/* The rows that pass the confidence filter, decoded on the device and read back: the keys
 * (id, slot) sorted, so each image's rows come in yc_detect_decode's order whatever order the
 * device wrote them in, and cand_first[i] the first key of image i.  *fits is false when more rows
 * passed than there is room for (nothing is read then). */
static int device_candidates(val_state *s, int n, float conf_thres, bool *fits)
{
    yc_model *m = s->m;
    size_t per_image = 0;
    yc_detect_filter f = {.batch = n, .nl = m->nl, .na = m->na, .no = m->no,
                          .anchors = m->anchors, .conf_thres = conf_thres};
    for (int l = 0; l < m->nl; l++) {
        f.head[l] = yc_graph_head(s->g, l);
        f.stride[l] = m->stride[l];
        per_image += (size_t)m->na * (size_t)f.head[l]->h * (size_t)f.head[l]->w;
    }
    size_t cap = yc_val_candidate_cap(per_image, n);
    if (cap > s->cand_cap) {
        float *r = yc_realloc(s->cand_rows, cap * (size_t)m->no * sizeof *r, "candidate rows");
        if (!r)
            return YC_ENOMEM;
        s->cand_rows = r;
        uint32_t *id = yc_realloc(s->cand_ids, cap * sizeof *id, "candidate ids");
        if (!id)
            return YC_ENOMEM;
        s->cand_ids = id;
        uint64_t *k = yc_realloc(s->cand_keys, cap * sizeof *k, "candidate order");
        if (!k)
            return YC_ENOMEM;
        s->cand_keys = k;
        s->cand_cap = cap;
    }
    if (n + 1 > s->cand_images) {
        size_t *first = yc_realloc(s->cand_first, (size_t)(n + 1) * sizeof *first, "candidates");
        if (!first)
            return YC_ENOMEM;
        s->cand_first = first;
        s->cand_images = n + 1;
    }
    f.cap = cap;
    f.rows = s->cand_rows;
    f.ids = s->cand_ids;
    size_t kept = 0;
    int st = m->be->iface->detect_filter(m->be, &f, &kept);
    if (st)
        return yc_error_context(st, "decoding the heads on the device");
    *fits = kept <= cap;
    if (!*fits)
        return YC_OK;
    for (size_t i = 0; i < kept; i++)
        s->cand_keys[i] = (uint64_t)s->cand_ids[i] << 32 | (uint64_t)i;
    qsort(s->cand_keys, kept, sizeof *s->cand_keys, cmp_u64);
    size_t k = 0;
    for (int i = 0; i <= n; i++) {
        while (k < kept && (s->cand_keys[k] >> 32) / per_image < (uint64_t)i)
            k++;
        s->cand_first[i] = k;
    }
    return YC_OK;
}

/* image_rows_fn of the rows device_candidates kept: image i's, copied in order. */
static int candidate_rows(val_state *s, const void *ctx, int i, worker_buf *wk, size_t *nr)
{
    (void)ctx;
    const int no = s->m->no;
    size_t first = s->cand_first[i], rows = s->cand_first[i + 1] - first;
    int st = grow_floats(&wk->rows, &wk->rows_cap, (rows > 0 ? rows : 1) * (size_t)no,
                         "candidate rows");
    for (size_t r = 0; !st && r < rows; r++) {
        size_t slot = (size_t)(s->cand_keys[first + r] & 0xffffffffu);
        memcpy(wk->rows + r * (size_t)no, s->cand_rows + slot * (size_t)no,
               (size_t)no * sizeof(float));
    }
    *nr = rows;
    return st;
}

/* The detections of the batch whose forward was just submitted (s->dets, s->ndet) and, with a
 * loss context, its loss added to loss[0..2] (box, obj, cls).  Where the heads can stay on the
 * device, only the loss sums and the rows above the confidence threshold come back; else (or when
 * those rows do not fit their room) the heads are read (or used in place) and decoded here.
 * Adds the times to *t_inf (the wait for the device, reading, decoding) and *t_nms. */
static int detect(val_state *s, int n, const yc_nms_params *np, const float *targets, int nt,
                  double loss[3], double *t_inf, double *t_nms)
{
    yc_model *m = s->m;
    int st = ensure_images(s, n, np->max_det);
    if (st)
        return st;
    bool device = heads_on_device(s), loss_done = false;
    if (device) {
        double t0 = yc_now();
        if (s->loss) {
            const yc_tensor *heads[YC_MAX_LEVELS];
            for (int l = 0; l < m->nl; l++)
                heads[l] = yc_graph_head(s->g, l);
            if ((st = yc_device_loss_submit(&s->dl, s->loss, m->be, n, heads, NULL, targets, nt,
                                            NULL)))
                return yc_error_context(st, "validation loss");
            s->loss_pending = true;
        }
        bool fits = false;
        if ((st = device_candidates(s, n, np->conf_thres, &fits)))
            return st;
        s->loss_pending = false;
        /* detect_filter has waited for the device: the loss sums are in */
        if (s->loss) {
            yc_loss_result lr;
            yc_device_loss_result(&s->dl, yc_loss_params_of(s->loss), &lr);
            loss[0] += lr.box;
            loss[1] += lr.obj;
            loss[2] += lr.cls;
            loss_done = true;
        }
        double t1 = yc_now();
        *t_inf += t1 - t0;
        if (fits) {
            st = nms_images(s, n, np, candidate_rows, NULL);
            *t_nms += yc_now() - t1;
            return st;
        }
    }
    double t0 = yc_now();
    yc_detect_level lv[YC_MAX_LEVELS];
    yc_loss_head lh[YC_MAX_LEVELS];
    if ((st = m->be->iface->synchronize(m->be)) || (st = read_heads(s, lv, lh)))
        return st;
    *t_inf += yc_now() - t0;
    if (s->loss && !loss_done) {
        yc_loss_result lr;
        if ((st = yc_loss_compute(s->loss, n, lh, targets, nt, &lr)))
            return yc_error_context(st, "validation loss");
        loss[0] += lr.box;
        loss[1] += lr.obj;
        loss[2] += lr.cls;
    }
    return decode_nms(s, lv, n, np, t_inf, t_nms);
}

/* The merged rows of the three augmented passes, per_image rows per image. */
typedef struct augmented_rows {
    const float *rows;
    size_t per_image;
} augmented_rows;

/* image_rows_fn of augmented rows: image i's, copied. */
static int copied_rows(val_state *s, const void *ctx, int i, worker_buf *wk, size_t *nr)
{
    const augmented_rows *ar = ctx;
    size_t n = ar->per_image * (size_t)s->m->no;
    int st = grow_floats(&wk->rows, &wk->rows_cap, n > 0 ? n : 1, "augmented rows");
    if (!st)
        memcpy(wk->rows, ar->rows + (size_t)i * n, n * sizeof *wk->rows);
    *nr = ar->per_image;
    return st;
}

/* The detections of a batch by test-time augmentation (tta.h): uint8 -> float / 255 on the host
 * (pre-process), the three passes (inference), then NMS per image over the merged rows, images
 * spread over threads. */
static int detect_augmented(val_state *s, const uint8_t *images, int n, int h, int w,
                            const yc_nms_params *np, double *t_pre, double *t_inf, double *t_nms)
{
    int st = ensure_images(s, n, np->max_det);
    if (!st && !s->tta)
        st = yc_tta_new(&s->tta, s->m, s->half, s->arena);
    size_t count = (size_t)n * 3 * (size_t)h * (size_t)w;
    if (st || (st = grow_floats(&s->input, &s->input_cap, count, "input batch")))
        return st;
    double t0 = yc_now();
    const long long cnt = (long long)count;
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < cnt; i++)
        s->input[i] = (float)images[i] / 255.0f;
    double t1 = yc_now();
    const float *rows;
    size_t per_image;
    if ((st = yc_tta_predict(s->tta, s->input, n, h, w, &rows, &per_image)))
        return st;
    double t2 = yc_now();
    const augmented_rows ar = {rows, per_image};
    if ((st = nms_images(s, n, np, copied_rows, &ar)))
        return st;
    *t_pre += t1 - t0;
    *t_inf += t2 - t1;
    *t_nms += yc_now() - t2;
    return YC_OK;
}

/* One decode/NMS state per OpenMP thread. */
static int init_workers(val_state *s)
{
    s->nworkers = 1;
#ifdef _OPENMP
    s->nworkers = omp_get_max_threads();
    if (s->nworkers < 1)
        s->nworkers = 1;
#endif
    if (!(s->workers = yc_calloc((size_t)s->nworkers, sizeof *s->workers, "validation")))
        return YC_ENOMEM;
    for (int i = 0; i < s->nworkers; i++)
        if (!(s->workers[i].nms = yc_nms_scratch_new()))
            return yc_error_status(YC_ENOMEM, "out of memory: NMS scratch");
    return YC_OK;
}

int yc_val_plot_batch(const yc_val_options *opt, const yc_batch *b, const yc_dataset *ds,
                      const float *dets, const int *ndet, int max_det, int max_plot,
                      const char *const *names, int nc, int k)
{
    int n = b->n < 16 ? b->n : 16;
    if (n < 1)
        return YC_OK;
    yc_plot_image im[16];
    size_t plane = 3 * (size_t)b->h * (size_t)b->w;
    for (int i = 0; i < n; i++)
        im[i] = (yc_plot_image){.px = b->images + (size_t)i * plane, .layout = YC_PIX_U8_CHW,
                                .w = b->w, .h = b->h, .path = ds->samples[b->sample[i]].image};
    size_t nbox = (size_t)b->nt;
    for (int i = 0; i < n; i++)
        nbox += (size_t)(max_plot > 0 && ndet[i] > max_plot ? max_plot : ndet[i]);
    yc_plot_box *boxes = yc_malloc((nbox ? nbox : 1) * sizeof *boxes, "batch plot");
    if (!boxes)
        return YC_ENOMEM;
    int nb = 0;
    for (int t = 0; t < b->nt; t++) {
        const float *r = b->targets + (size_t)t * 6;
        if ((int)r[0] >= n)
            continue;
        boxes[nb++] = (yc_plot_box){.image = (int)r[0], .cls = opt->single_cls ? 0 : (int)r[1],
                                    .cx = r[2], .cy = r[3], .w = r[4], .h = r[5], .conf = -1};
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/val_batch%d_labels.jpg", opt->save_dir, k);
    int st = yc_plot_batch(path, im, n, boxes, nb, names, nc);
    nb = 0;
    for (int i = 0; i < n && !st; i++)
        for (int j = 0; j < ndet[i] && (max_plot <= 0 || j < max_plot); j++) {
            const float *d = dets + ((size_t)i * max_det + j) * 6;
            boxes[nb++] = (yc_plot_box){.image = i, .cls = (int)d[5],
                                        .cx = (d[0] + d[2]) / 2 / (float)b->w,
                                        .cy = (d[1] + d[3]) / 2 / (float)b->h,
                                        .w = (d[2] - d[0]) / (float)b->w,
                                        .h = (d[3] - d[1]) / (float)b->h, .conf = d[4]};
        }
    snprintf(path, sizeof path, "%s/val_batch%d_pred.jpg", opt->save_dir, k);
    if (!st)
        st = yc_plot_batch(path, im, n, boxes, nb, names, nc);
    free(boxes);
    return st;
}

/* Appends one image's detections to labels/<stem>.txt. */
static int save_txt(const yc_val_options *opt, const char *image, const float *dets, int nd,
                    int w0, int h0)
{
    char stem[512], path[4096], line[256];
    yc_path_stem(image, stem, sizeof stem);
    snprintf(path, sizeof path, "%s/labels/%s.txt", opt->save_dir, stem);
    FILE *f = fopen(path, "a");
    if (!f)
        return yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
    for (int i = 0; i < nd; i++) {
        const float *d = dets + (size_t)i * 6;
        yc_format_txt_line(line, sizeof line, d, d[4], (int)d[5], w0, h0, opt->save_conf);
        fputs(line, f);
    }
    if (ferror(f) | (fclose(f) != 0))
        return yc_error_status(YC_EIO, "cannot write %s", path);
    return YC_OK;
}

/* PR, F1, P and R curves as utils/metrics.py plots them, their file names starting with prefix
 * (ap_per_class's prefix: "" for detection, "Box" and "Mask" for segmentation). */
static int plot_curves(const yc_val_options *opt, const yc_ap_result *ap, const char *const *names,
                       const char *prefix)
{
    int n = ap->n, st = YC_OK;
    float *x = yc_malloc(YC_NPX * sizeof *x, "curves");
    float *y = yc_malloc(((size_t)n + 1) * YC_NPX * sizeof *y, "curves");
    float *mean = yc_malloc(YC_NPX * sizeof *mean, "curves");
    double *md = yc_malloc(2 * YC_NPX * sizeof *md, "curves");
    char *label_text = yc_calloc((size_t)n + 1, 96, "curves");
    const char **labels = yc_calloc((size_t)n + 1, sizeof *labels, "curves");
    if (!x || !y || !mean || !md || !label_text || !labels) {
        st = YC_ENOMEM;
        goto done;
    }
    for (int i = 0; i < YC_NPX; i++)
        x[i] = (float)ap->px[i];
    char path[4096], mean_label[128];

    /* PR curve: classes that have predictions */
    int ns = 0;
    double map50 = 0;
    for (int c = 0; c < n; c++)
        map50 += ap->ap50[c];
    map50 = n ? map50 / n : 0;
    for (int i = 0; i < YC_NPX; i++)
        md[i] = 0;
    for (int c = 0; c < n; c++) {
        if (!ap->has_pr[c])
            continue;
        char num[16];
        snprintf(num, sizeof num, "%d", ap->cls[c]);
        snprintf(label_text + (size_t)ns * 96, 96, "%s %.3f",
                 names && names[ap->cls[c]] ? names[ap->cls[c]] : num, ap->ap[(size_t)c * YC_NIOU]);
        labels[ns] = label_text + (size_t)ns * 96;
        for (int i = 0; i < YC_NPX; i++) {
            double v = ap->pr_curve[(size_t)c * YC_NPX + i];
            y[(size_t)ns * YC_NPX + i] = (float)v;
            md[i] += v;
        }
        ns++;
    }
    for (int i = 0; i < YC_NPX; i++)
        mean[i] = (float)(ns ? md[i] / ns : 0);
    snprintf(mean_label, sizeof mean_label, "all classes %.3f mAP@0.5", map50);
    snprintf(path, sizeof path, "%s/%sPR_curve.png", opt->save_dir, prefix);
    yc_curve_plot pr = {.title = "Precision-Recall Curve", .xlabel = "Recall",
                        .ylabel = "Precision", .n_points = YC_NPX, .x = x, .n_series = ns,
                        .y = y, .series_labels = labels, .mean = mean, .mean_label = mean_label,
                        .xmin = 0, .xmax = 1, .ymin = 0, .ymax = 1};
    if ((st = yc_plot_curves(path, &pr)))
        goto done;

    /* F1, P and R against confidence */
    static const char *const file[3] = {"F1_curve.png", "P_curve.png", "R_curve.png"};
    static const char *const ylabel[3] = {"F1", "Precision", "Recall"};
    static const char *const title[3] = {"F1-Confidence Curve", "Precision-Confidence Curve",
                                         "Recall-Confidence Curve"};
    const double *curves[3] = {ap->f1_curve, ap->p_curve, ap->r_curve};
    for (int k = 0; k < 3 && !st; k++) {
        for (int i = 0; i < YC_NPX; i++)
            md[i] = 0;
        for (int c = 0; c < n; c++) {
            char num[16];
            snprintf(num, sizeof num, "%d", ap->cls[c]);
            snprintf(label_text + (size_t)c * 96, 96, "%s",
                     names && names[ap->cls[c]] ? names[ap->cls[c]] : num);
            labels[c] = label_text + (size_t)c * 96;
            for (int i = 0; i < YC_NPX; i++) {
                double v = curves[k][(size_t)c * YC_NPX + i];
                y[(size_t)c * YC_NPX + i] = (float)v;
                md[i] += v;
            }
        }
        for (int i = 0; i < YC_NPX; i++)
            md[i] = n ? md[i] / n : 0;
        if ((st = yc_smooth(md, YC_NPX, 0.05, md + YC_NPX)) < 0)
            break;
        st = YC_OK;
        int best = 0;
        for (int i = 0; i < YC_NPX; i++) {
            mean[i] = (float)md[YC_NPX + i];
            if (md[YC_NPX + i] > md[YC_NPX + best])
                best = i;
        }
        snprintf(mean_label, sizeof mean_label, "all classes %.2f at %.3f", md[YC_NPX + best],
                 ap->px[best]);
        snprintf(path, sizeof path, "%s/%s%s", opt->save_dir, prefix, file[k]);
        yc_curve_plot cp = {.title = title[k], .xlabel = "Confidence", .ylabel = ylabel[k],
                            .n_points = YC_NPX, .x = x, .n_series = n, .y = y,
                            .series_labels = labels, .mean = mean, .mean_label = mean_label,
                            .xmin = 0, .xmax = 1, .ymin = 0, .ymax = 1};
        st = yc_plot_curves(path, &cp);
    }
done:
    free(x);
    free(y);
    free(mean);
    free(md);
    free(label_text);
    free(labels);
    return st;
}

static int plot_confusion(const yc_val_options *opt, const yc_confusion *cm,
                          const char *const *names)
{
    size_t n = (size_t)(cm->nc + 1) * (size_t)(cm->nc + 1);
    float *m = yc_malloc(n * sizeof *m, "confusion matrix");
    if (!m)
        return YC_ENOMEM;
    for (size_t i = 0; i < n; i++)
        m[i] = (float)cm->m[i];
    char path[4096];
    snprintf(path, sizeof path, "%s/confusion_matrix.png", opt->save_dir);
    int st = yc_plot_confusion(path, m, cm->nc, names, true);
    free(m);
    return st;
}

int yc_count_label_files(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/labels", dir);
    return yc_count_files(path, ".txt");
}

/* ------------------------------------------------------------------------------------------------
 * The statistics side: one image at a time
 * ---------------------------------------------------------------------------------------------- */

struct yc_val_sink {
    /* the options (copied; their strings are the caller's) */
    yc_val_options opt;
    yc_val_stats stats;
    yc_confusion cm;
    bool have_cm;
    text_buf json;
    size_t n_det;
};

void yc_val_sink_free(yc_val_sink *s)
{
    if (!s)
        return;
    yc_val_stats_free(&s->stats);
    if (s->have_cm)
        yc_confusion_free(&s->cm);
    free(s->json.p);
    free(s);
}

int yc_val_sink_new(yc_val_sink **out, int nc, const yc_val_options *opt)
{
    *out = NULL;
    int st;
    if (opt->save_dir && (opt->plots || opt->save_txt || opt->save_json)) {
        if ((st = yc_mkdirs(opt->save_dir)))
            return st;
        if (opt->save_txt) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/labels", opt->save_dir);
            if ((st = yc_mkdirs(dir)))
                return st;
        }
    }
    yc_val_sink *s = yc_calloc(1, sizeof *s, "validation statistics");
    if (!s)
        return YC_ENOMEM;
    s->opt = *opt;
    if ((st = yc_val_stats_init(&s->stats, nc)))
        goto fail;
    if (opt->plots && opt->save_dir) {
        if ((st = yc_confusion_init(&s->cm, nc)))
            goto fail;
        s->have_cm = true;
    }
    if (opt->save_json && (st = text_str(&s->json, "[")))
        goto fail;
    *out = s;
    return YC_OK;
fail:
    yc_val_sink_free(s);
    return st;
}

int yc_val_sink_add(yc_val_sink *s, const char *image, int w0, int h0, const float *dets, int nd,
                    const float *labels, int nl)
{
    return yc_val_sink_add_seg(s, image, w0, h0, dets, nd, labels, nl, NULL);
}

int yc_val_sink_add_seg(yc_val_sink *s, const char *image, int w0, int h0, const float *dets,
                        int nd, const float *labels, int nl, const char *const *segs)
{
    const yc_val_options *opt = &s->opt;
    int st = yc_val_stats_add(&s->stats, dets, nd, labels, nl, s->have_cm ? &s->cm : NULL);
    if (st)
        return st;
    s->n_det += (size_t)nd;
    if (nd == 0)
        return YC_OK;
    if (opt->save_txt && opt->save_dir && (st = save_txt(opt, image, dets, nd, w0, h0)))
        return st;
    if (opt->save_json && (st = json_add_image(&s->json, image, dets, nd, opt->coco91, segs)))
        return st;
    return YC_OK;
}

const yc_val_stats *yc_val_sink_stats(const yc_val_sink *s)
{
    return &s->stats;
}

size_t yc_val_sink_detections(const yc_val_sink *s)
{
    return s->n_det;
}

int yc_val_sink_metrics(yc_val_sink *s, const char *const *names, yc_val_result *res)
{
    const yc_val_options *opt = &s->opt;
    int st = yc_val_metrics_compute(&s->stats, &res->metrics);
    if (st)
        return st;
    res->n_det = s->n_det;
    const yc_val_metrics *vm = &res->metrics;
    if (opt->print) {
        yc_val_print_header(stdout);
        bool per_class = (opt->verbose || (vm->nc < 50 && !opt->training)) && vm->nc > 1;
        yc_val_print_results(stdout, vm, names, per_class);
        int64_t total = 0;
        for (int c = 0; c < vm->nc; c++)
            total += vm->nt[c];
        if (total == 0)
            yc_warn("no labels found in the validation set, can not compute metrics without "
                    "labels");
        fflush(stdout);
    }
    return YC_OK;
}

int yc_val_sink_save(yc_val_sink *s, const char *const *names, yc_val_result *res)
{
    const yc_val_options *opt = &s->opt;
    const yc_val_metrics *vm = &res->metrics;
    int st;
    if (opt->plots && opt->save_dir) {
        if ((st = plot_confusion(opt, &s->cm, names)))
            return st;
        /* val.py plots the curves only when ap_per_class ran (some prediction was correct);
         * segment/val.py's ap_per_class_box_and_mask plots both kinds, named Box* and Mask* */
        if (vm->ap.n > 0 && (st = plot_curves(opt, &vm->ap, names, res->seg ? "Box" : "")))
            return st;
        if (res->seg && res->mask_metrics.ap.n > 0 &&
            (st = plot_curves(opt, &res->mask_metrics.ap, names, "Mask")))
            return st;
    }
    if (opt->save_json && opt->save_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", opt->save_dir,
                 opt->json_name ? opt->json_name : "predictions.json");
        if ((st = text_str(&s->json, "]")) ||
            (st = yc_write_file_atomic(path, s->json.p, s->json.n)))
            return st;
        if (opt->print)
            printf("Saving %s...\n", path);
    }
    if (opt->save_txt && opt->save_dir)
        res->n_label_files = yc_count_label_files(opt->save_dir);
    return YC_OK;
}

static int validate(val_state *s, yc_loader *loader, const yc_dataset *ds,
                    const char *const *names, const yc_val_options *opt, const yc_loss_params *lp,
                    yc_val_result *res)
{
    yc_model *m = s->m;
    const int nc = opt->single_cls ? 1 : ds->nc;
    int st;
    if ((st = yc_val_check(m, ds, opt)))
        return st;
    if ((st = yc_val_sink_new(&s->sink, nc, opt)))
        return st;
    if (lp && !(s->loss = yc_loss_new(lp)))
        return YC_ENOMEM;
    if ((st = init_workers(s)))
        return st;

    yc_nms_params np = yc_nms_params_val();
    np.conf_thres = opt->conf_thres;
    np.iou_thres = opt->iou_thres;
    np.max_det = opt->max_det;
    np.agnostic = opt->single_cls;

    double t_pre = 0, t_inf = 0, t_nms = 0, loss[3] = {0, 0, 0};
    int nbatches = 0;
    if ((st = yc_loader_start(loader, 0, NULL, 0)))
        return st;
    for (;;) {
        const yc_batch *b = NULL;
        if ((st = yc_loader_next(loader, &b)))
            return st;
        if (!b)
            break;
        int k = nbatches++;
        if (b->n == 0)
            continue;

        s->hybrid = opt->save_hybrid;
        s->hyb_targets = b->targets;
        s->hyb_nt = b->nt;
        s->hyb_h = b->h;
        s->hyb_w = b->w;
        if (opt->augment && !s->loss)
            st = detect_augmented(s, b->images, b->n, b->h, b->w, &np, &t_pre, &t_inf, &t_nms);
        else if (!(st = forward(s, b->images, b->n, b->h, b->w, &t_pre, &t_inf)))
            st = detect(s, b->n, &np, b->targets, b->nt, loss, &t_inf, &t_nms);
        if (st)
            return st;
        if (opt->single_cls)
            for (int i = 0; i < b->n; i++)
                for (int j = 0; j < s->ndet[i]; j++)
                    s->dets[((size_t)i * np.max_det + j) * 6 + 5] = 0;

        /* statistics per image, in loader order */
        if (b->nt > s->labels_cap) {
            float *l = yc_realloc(s->labels, (size_t)b->nt * 5 * sizeof *l, "labels");
            if (!l)
                return YC_ENOMEM;
            s->labels = l;
            s->labels_cap = b->nt;
        }
        if (!s->predn && !(s->predn = yc_malloc((size_t)np.max_det * 6 * sizeof *s->predn,
                                                 "detections")))
            return YC_ENOMEM;
        for (int i = 0; i < b->n; i++) {
            const yc_val_info *info = &b->info[i];
            int nl = yc_val_targets_to_original(b->targets, b->nt, i, b->h, b->w, info,
                                                opt->single_cls, s->labels);
            int nd = s->ndet[i];
            memcpy(s->predn, s->dets + (size_t)i * np.max_det * 6, (size_t)nd * 6 * sizeof(float));
            yc_val_scale_to_original(s->predn, (size_t)nd, 6, info);
            const char *image = ds->samples[b->sample[i]].image;
            if ((st = yc_val_sink_add(s->sink, image, info->w0, info->h0, s->predn, nd, s->labels,
                                      nl)))
                return st;
        }
        if (opt->plots && opt->save_dir && k < 3 &&
            (st = yc_val_plot_batch(opt, b, ds, s->dets, s->ndet, np.max_det, 0, names, nc, k)))
            return st;
    }

    if ((st = yc_val_sink_metrics(s->sink, names, res)))
        return st;
    res->nbatches = nbatches;
    for (int i = 0; i < 3; i++)
        res->loss[i] = nbatches ? loss[i] / nbatches : 0;
    long seen = res->metrics.seen;
    res->t_pre = seen ? t_pre / (double)seen * 1e3 : 0;
    res->t_inf = seen ? t_inf / (double)seen * 1e3 : 0;
    res->t_nms = seen ? t_nms / (double)seen * 1e3 : 0;
    if (opt->print && !opt->training) {
        printf("Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape "
               "(%d, 3, %d, %d)\n",
               res->t_pre, res->t_inf, res->t_nms, opt->batch, opt->imgsz, opt->imgsz);
        fflush(stdout);
    }
    return yc_val_sink_save(s->sink, names, res);
}

int yc_val_detect_batch(yc_model *m, const uint8_t *images, int n, int h, int w,
                        const yc_nms_params *np, float *dets, int *ndet)
{
    if (!m || !m->be || !images || !np || !dets || !ndet || n < 1 || np->max_det < 1)
        return yc_error_status(YC_EUSAGE, "yc_val_detect_batch: invalid arguments");
    if (m->nm > 0)
        return yc_error_status(YC_EUSAGE, "yc_val_detect_batch: a segmentation model's "
                               "detections need their masks (yc_validate runs val_seg.h)");
    val_state s;
    memset(&s, 0, sizeof s);
    s.m = m;
    double t_pre = 0, t_inf = 0, t_nms = 0, loss[3];
    int st = init_workers(&s);
    if (!st)
        st = forward(&s, images, n, h, w, &t_pre, &t_inf);
    if (!st)
        st = detect(&s, n, np, NULL, 0, loss, &t_inf, &t_nms);
    for (int i = 0; !st && i < n; i++) {
        size_t off = (size_t)i * (size_t)np->max_det * 6;
        memcpy(dets + off, s.dets + off, (size_t)s.ndet[i] * 6 * sizeof *dets);
        ndet[i] = s.ndet[i];
    }
    state_free(&s);
    return st;
}

int yc_validate(yc_model *m, yc_loader *loader, const yc_dataset *ds, const char *const *names,
                const yc_val_options *opt, const yc_loss_params *lp, yc_val_result *res)
{
    memset(res, 0, sizeof *res);
    if (!m || !m->be || !loader || !ds || !opt)
        return yc_error_status(YC_EUSAGE, "validation: missing model, loader or dataset");
    if (m->nm > 0)
        return yc_validate_seg(m, loader, ds, names, opt, lp, res);
    val_state s;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.arena = opt->arena;
    s.half = opt->half;
    int st = validate(&s, loader, ds, names, opt, lp, res);
    state_free(&s);
    if (st)
        yc_val_result_free(res);
    return st;
}
