/* classify/val.py and classify/predict.py (classify_eval.h). */
#include "classify_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "classify_aug.h"
#include "graph.h"
#include "log.h"
#include "util.h"
#include "xent.h"

/* An evaluation graph of m for `batch` images, rebuilt when the batch changes. */
typedef struct eval_graph {
    yc_graph *g;
    int batch;
} eval_graph;

static int eval_graph_for(eval_graph *e, yc_model *m, int batch, int imgsz)
{
    if (e->g && e->batch == batch)
        return YC_OK;
    yc_graph_free(e->g);
    e->g = NULL;
    int st = yc_graph_new(&e->g, m, batch, imgsz, imgsz, YC_GRAPH_EVAL);
    if (!st)
        st = yc_graph_alloc(e->g);
    e->batch = st ? 0 : batch;
    return st;
}

/* images (batch x 3 x imgsz x imgsz) -> logits (batch x nc) */
static int run_batch(eval_graph *e, yc_model *m, const float *images, float *logits)
{
    int st = yc_tensor_set_f32(m->be, yc_graph_input(e->g), images);
    if (!st)
        st = yc_graph_forward(e->g);
    if (!st)
        st = yc_tensor_get_f32(m->be, yc_graph_head(e->g, 0), logits);
    return st;
}

int yc_classify_evaluate(yc_model *m, const yc_imagefolder *ds, int imgsz, int batch,
                         double label_smoothing, bool per_class, yc_cls_metrics *out)
{
    memset(out, 0, sizeof *out);
    int nc = m->nc;
    if (ds->nc != nc)
        return yc_error_status(YC_EFORMAT, "the dataset has %d classes, the model %d", ds->nc, nc);
    size_t plane = (size_t)3 * imgsz * imgsz;
    float *images = yc_malloc((size_t)batch * plane * sizeof *images, "validation batch");
    float *logits = yc_malloc((size_t)batch * nc * sizeof *logits, "logits");
    int *labels = yc_malloc((size_t)batch * sizeof *labels, "labels");
    int st = images && logits && labels ? YC_OK : YC_ENOMEM;
    if (!st && per_class) {
        out->class_n = yc_calloc((size_t)nc, sizeof *out->class_n, "per-class counts");
        out->class_top1 = yc_calloc((size_t)nc, sizeof *out->class_top1, "per-class counts");
        out->class_top5 = yc_calloc((size_t)nc, sizeof *out->class_top5, "per-class counts");
        if (!out->class_n || !out->class_top1 || !out->class_top5)
            st = YC_ENOMEM;
    }
    eval_graph e = {0};
    yc_cls_reader rd = {0};
    size_t c1 = 0, c5 = 0;
    int batches = 0;
    double lsum = 0;
    for (size_t first = 0; first < ds->n && !st; first += (size_t)batch) {
        int b = (int)(ds->n - first < (size_t)batch ? ds->n - first : (size_t)batch);
        if ((st = eval_graph_for(&e, m, b, imgsz)))
            break;
        for (int i = 0; i < b && !st; i++) {
            st = yc_cls_read(&rd, ds->paths[first + i], imgsz, NULL, NULL, images + (size_t)i * plane);
            labels[i] = ds->labels[first + i];
        }
        if (st || (st = run_batch(&e, m, images, logits)))
            break;
        lsum += yc_xent_loss(logits, labels, b, nc, label_smoothing, NULL);
        batches++;
        for (int i = 0; i < b; i++) {
            int h1 = yc_xent_topk_correct(logits + (size_t)i * nc, labels + i, 1, nc, 1);
            int h5 = yc_xent_topk_correct(logits + (size_t)i * nc, labels + i, 1, nc, 5);
            c1 += (size_t)h1, c5 += (size_t)h5;
            if (per_class) {
                out->class_n[labels[i]]++;
                out->class_top1[labels[i]] += (size_t)h1;
                out->class_top5[labels[i]] += (size_t)h5;
            }
        }
    }
    yc_cls_reader_free(&rd);
    yc_graph_free(e.g);
    free(images);
    free(logits);
    free(labels);
    if (st) {
        yc_cls_metrics_free(out);
        return yc_error_context(st, "validating %s", m->cfg->name);
    }
    out->n = ds->n;
    out->top1 = ds->n ? (double)c1 / (double)ds->n : 0.0;
    out->top5 = ds->n ? (double)c5 / (double)ds->n : 0.0;
    out->loss = batches ? lsum / batches : 0.0;
    return YC_OK;
}

void yc_cls_metrics_free(yc_cls_metrics *r)
{
    free(r->class_n);
    free(r->class_top1);
    free(r->class_top5);
    r->class_n = r->class_top1 = r->class_top5 = NULL;
}

void yc_cls_metrics_print(const yc_cls_metrics *r, const yc_imagefolder *ds, FILE *out)
{
    fprintf(out, "%24s%12s%12s%12s\n", "Class", "Images", "top1_acc", "top5_acc");
    fprintf(out, "%24s%12zu%12.3g%12.3g\n", "all", r->n, r->top1, r->top5);
    for (int c = 0; r->class_n && c < ds->nc; c++) {
        double n = (double)(r->class_n[c] ? r->class_n[c] : 1);
        fprintf(out, "%24s%12zu%12.3g%12.3g\n", ds->classes[c], r->class_n[c],
                (double)r->class_top1[c] / n, (double)r->class_top5[c] / n);
    }
}

int yc_classify_predict(yc_model *m, char *const *paths, size_t n, int imgsz,
                        const char *const *names, FILE *out, size_t *done)
{
    int nc = m->nc, st = YC_OK;
    *done = 0;
    float *image = yc_malloc((size_t)3 * imgsz * imgsz * sizeof *image, "image");
    float *logits = yc_malloc((size_t)nc * sizeof *logits, "logits");
    int *order = yc_malloc((size_t)nc * sizeof *order, "classes");
    if (!image || !logits || !order)
        st = YC_ENOMEM;
    eval_graph e = {0};
    yc_cls_reader rd = {0};
    if (!st)
        st = eval_graph_for(&e, m, 1, imgsz);
    for (size_t i = 0; i < n && !st; i++) {
        if (yc_cls_read(&rd, paths[i], imgsz, NULL, NULL, image)) {
            yc_warn("%s: skipped (%s)\n", paths[i], yc_last_error());
            yc_error_clear();
            continue;
        }
        double t0 = yc_now();
        if ((st = run_batch(&e, m, image, logits)))
            break;
        double ms = (yc_now() - t0) * 1e3;
        /* softmax, then the five most probable classes (ties: the lower index first) */
        double mx = logits[0], sum = 0;
        for (int c = 1; c < nc; c++)
            mx = fmax(mx, logits[c]);
        for (int c = 0; c < nc; c++)
            sum += exp(logits[c] - mx);
        for (int c = 0; c < nc; c++)
            order[c] = c;
        int k = nc < 5 ? nc : 5;
        for (int a = 0; a < k; a++)
            for (int b = a + 1; b < nc; b++)
                if (logits[order[b]] > logits[order[a]]) {
                    int t = order[a];
                    order[a] = order[b], order[b] = t;
                }
        fprintf(out, "image %zu/%zu %s: %dx%d ", i + 1, n, paths[i], imgsz, imgsz);
        for (int a = 0; a < k; a++) {
            int c = order[a];
            double p = exp(logits[c] - mx) / sum;
            if (names)
                fprintf(out, "%s %.2f, ", names[c], p);
            else
                fprintf(out, "%d %.2f, ", c, p);
        }
        fprintf(out, "%.1fms\n", ms);
        (*done)++;
    }
    yc_cls_reader_free(&rd);
    yc_graph_free(e.g);
    free(image);
    free(logits);
    free(order);
    return st;
}

int yc_classify_top1(yc_model *m, const float *images, int n, int imgsz, int *pred)
{
    if (n < 1)
        return yc_error_status(YC_ERR, "no images to classify");
    int nc = m->nc;
    float *logits = yc_malloc((size_t)n * nc * sizeof *logits, "classifier logits");
    if (!logits)
        return YC_ENOMEM;
    eval_graph e = {0};
    int st = eval_graph_for(&e, m, n, imgsz);
    if (!st)
        st = run_batch(&e, m, images, logits);
    for (int i = 0; i < n && !st; i++) {
        const float *l = logits + (size_t)i * nc;
        int best = 0;
        for (int k = 1; k < nc; k++)
            if (l[k] > l[best])
                best = k;
        pred[i] = best;
    }
    yc_graph_free(e.g);
    free(logits);
    return st;
}
