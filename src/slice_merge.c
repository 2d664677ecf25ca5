/* Greedy NMS and NMM of sliced detections (slice_merge.h). */
#include "slice_merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

yc_merge_params yc_merge_params_nmm(void)
{
    return (yc_merge_params){.method = YC_MERGE_NMM, .metric = YC_MERGE_IOS, .threshold = 0.5};
}

yc_merge_params yc_merge_params_nms(void)
{
    return (yc_merge_params){.method = YC_MERGE_NMS, .metric = YC_MERGE_IOU, .threshold = 0.5};
}

static double box_area(const float *b)
{
    double w = (double)b[2] - b[0], h = (double)b[3] - b[1];
    return w > 0.0 && h > 0.0 ? w * h : 0.0;
}

double yc_merge_overlap(const float a[4], const float b[4], yc_merge_metric metric)
{
    double iw = fmin(a[2], b[2]) - fmax(a[0], b[0]);
    double ih = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    double inter = iw > 0.0 && ih > 0.0 ? iw * ih : 0.0;
    double aa = box_area(a), ab = box_area(b);
    double den = metric == YC_MERGE_IOU ? aa + ab - inter : fmin(aa, ab);
    return den > 0.0 ? inter / den : 0.0;
}

/* A row's place in the processing order. */
typedef struct order_key {
    /* score of the row */
    float score;
    /* row index in the input */
    size_t index;
} order_key;

/* qsort order: score descending, then input index ascending (a stable order). */
static int cmp_key(const void *pa, const void *pb)
{
    const order_key *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

int yc_slice_merge(const float *dets, size_t n, const yc_merge_params *p, float *out,
                   size_t *n_out)
{
    *n_out = 0;
    if (p->method != YC_MERGE_NMS && p->method != YC_MERGE_NMM)
        return yc_error_status(YC_EUSAGE, "slice merge: unknown method %d", (int)p->method);
    if (p->metric != YC_MERGE_IOU && p->metric != YC_MERGE_IOS)
        return yc_error_status(YC_EUSAGE, "slice merge: unknown metric %d", (int)p->metric);
    if (!(p->threshold >= 0.0 && p->threshold <= 1.0))
        return yc_error_status(YC_EUSAGE, "slice merge: threshold %g must be in [0, 1]",
                               p->threshold);
    if (n == 0)
        return YC_OK;
    order_key *key = yc_calloc(n, sizeof *key, "slice merge order");
    unsigned char *gone = yc_calloc(n, 1, "slice merge flags");
    if (!key || !gone) {
        free(key);
        free(gone);
        return YC_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        key[i] = (order_key){.score = dets[i * YC_MERGE_DET_STRIDE + 4], .index = i};
    /* NaN scores would break the comparison's ordering: they sort last, as -infinity */
    for (size_t i = 0; i < n; i++)
        if (isnan(key[i].score))
            key[i].score = -INFINITY;
    qsort(key, n, sizeof *key, cmp_key);
    size_t k = 0;
    for (size_t a = 0; a < n; a++) {
        if (gone[a])
            continue;
        const float *da = dets + key[a].index * YC_MERGE_DET_STRIDE;
        float *o = out + k++ * YC_MERGE_DET_STRIDE;
        memcpy(o, da, sizeof(float) * YC_MERGE_DET_STRIDE);
        for (size_t b = a + 1; b < n; b++) {
            if (gone[b])
                continue;
            const float *db = dets + key[b].index * YC_MERGE_DET_STRIDE;
            if (db[5] != da[5] || !(yc_merge_overlap(da, db, p->metric) > p->threshold))
                continue;
            gone[b] = 1;
            if (p->method == YC_MERGE_NMM) {
                o[0] = fminf(o[0], db[0]);
                o[1] = fminf(o[1], db[1]);
                o[2] = fmaxf(o[2], db[2]);
                o[3] = fmaxf(o[3], db[3]);
            }
        }
    }
    free(key);
    free(gone);
    *n_out = k;
    return YC_OK;
}
