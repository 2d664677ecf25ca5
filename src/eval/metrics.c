/* YOLOv5 v7.0 validation metrics (val.py process_batch, utils/metrics.py) on the host.
 * docs/YOLOV5.md 6.2 and 6.3; the notes in metrics.h say how ties and round-off follow
 * numpy.  Float32 parts must be built without floating-point contraction (GCC's -std=c11 implies
 * -ffp-contract=off). */
#include "metrics.h"
#include "npsort.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* eps of ap_per_class and of box_iou */
#define AP_EPS 1e-16
#define BOX_EPS 1e-7f
/* points of compute_ap's interpolation */
#define AP_NX 101
/* numpy: pairwise summation block; reduction buffer size */
#define NP_PW_BLOCKSIZE 128
#define NP_BUFSIZE 8192

/* ---------------------------------------------------------------------------------------------
 * numpy pieces: pairwise sums, linspace, interp, maximum (argsort is in npsort.c)
 * ------------------------------------------------------------------------------------------- */

/* numpy DOUBLE_pairwise_sum. */
static double pairwise_sum(const double *a, size_t n, size_t stride)
{
    if (n < 8) {
        double res = 0.0;
        for (size_t i = 0; i < n; i++)
            res += a[i * stride];
        return res;
    }
    if (n <= NP_PW_BLOCKSIZE) {
        double r[8];
        for (int j = 0; j < 8; j++)
            r[j] = a[(size_t)j * stride];
        size_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[(i + (size_t)j) * stride];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i * stride];
        return res;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2, stride) + pairwise_sum(a + n2 * stride, n - n2, stride);
}

/* np.sum of a 1-D float64 array: 0 + pairwise sums of buffer-sized blocks. */
static double np_sum(const double *a, size_t n, size_t stride)
{
    double acc = 0.0;
    for (size_t i = 0; i < n; i += NP_BUFSIZE) {
        size_t len = n - i < NP_BUFSIZE ? n - i : NP_BUFSIZE;
        acc += pairwise_sum(a + i * stride, len, stride);
    }
    return acc;
}

static double np_mean(const double *a, size_t n, size_t stride)
{
    return np_sum(a, n, stride) / (double)n;
}

/* np.linspace(0, 1, num)[k]: k * (1/(num-1)) + 0, the last one exactly 1. */
static double np_linspace01(int k, int num)
{
    if (k == num - 1)
        return 1.0;
    const double step = 1.0 / (double)(num - 1);
    return (double)k * step + 0.0;
}

/* numpy's binary_search_with_guess (compiled_base.c): for ascending arr, the last index j with
 * arr[j] <= key (-1 below, len above the range); `guess` (the previous answer) steers the search,
 * which matters only when arr is not sorted. */
#define NP_LIKELY_IN_CACHE_SIZE 8
static ptrdiff_t np_search(double key, const double *arr, ptrdiff_t len, ptrdiff_t guess)
{
    ptrdiff_t imin = 0, imax = len;
    if (key > arr[len - 1])
        return len;
    if (key < arr[0])
        return -1;
    if (len <= 4) {
        ptrdiff_t i;
        for (i = 1; i < len && key >= arr[i]; ++i)
            ;
        return i - 1;
    }
    if (guess > len - 3)
        guess = len - 3;
    if (guess < 1)
        guess = 1;
    if (key < arr[guess]) {
        if (key < arr[guess - 1]) {
            imax = guess - 1;
            if (guess > NP_LIKELY_IN_CACHE_SIZE && key >= arr[guess - NP_LIKELY_IN_CACHE_SIZE])
                imin = guess - NP_LIKELY_IN_CACHE_SIZE;
        } else {
            return guess - 1;
        }
    } else {
        if (key < arr[guess + 1])
            return guess;
        if (key < arr[guess + 2])
            return guess + 1;
        imin = guess + 2;
        if (guess < len - NP_LIKELY_IN_CACHE_SIZE - 1 &&
            key < arr[guess + NP_LIKELY_IN_CACHE_SIZE])
            imax = guess + NP_LIKELY_IN_CACHE_SIZE;
    }
    while (imin < imax) {
        const ptrdiff_t imid = imin + ((imax - imin) >> 1);
        if (key >= arr[imid])
            imin = imid + 1;
        else
            imax = imid;
    }
    return imin - 1;
}

/* np.interp(x, xp, fp, left, right) for nx points into out (numpy's arr_interp; n >= 1). */
static void np_interp(const double *x, size_t nx, const double *xp, const double *fp, size_t n,
                      double left, double right, double *out)
{
    if (n == 1) {
        for (size_t i = 0; i < nx; i++)
            out[i] = x[i] < xp[0] ? left : (x[i] > xp[0] ? right : fp[0]);
        return;
    }
    const ptrdiff_t len = (ptrdiff_t)n;
    ptrdiff_t j = 0;
    for (size_t i = 0; i < nx; i++) {
        const double xv = x[i];
        if (isnan(xv)) {
            out[i] = xv;
            continue;
        }
        j = np_search(xv, xp, len, j);
        if (j == -1) {
            out[i] = left;
        } else if (j == len) {
            out[i] = right;
        } else if (j == len - 1 || xp[j] == xv) {
            out[i] = fp[j];
        } else {
            const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
            double r = slope * (xv - xp[j]) + fp[j];
            if (isnan(r)) {
                r = slope * (xv - xp[j + 1]) + fp[j + 1];
                if (isnan(r) && fp[j] == fp[j + 1])
                    r = fp[j];
            }
            out[i] = r;
        }
    }
}

/* np.maximum(a, b) */
static inline double np_maximum(double a, double b)
{
    return (a >= b || isnan(a)) ? a : b;
}

/* ---------------------------------------------------------------------------------------------
 * IoU and matching
 * ------------------------------------------------------------------------------------------- */

void yc_iouv(float iouv[YC_NIOU])
{
    const float start = 0.5f, end = 0.95f;
    const float step = (end - start) / (float)(YC_NIOU - 1);
    const int halfway = YC_NIOU / 2;
    for (int i = 0; i < YC_NIOU; i++)
        iouv[i] = i < halfway ? start + step * (float)i : end - step * (float)(YC_NIOU - i - 1);
}

float yc_box_iou(const float a[4], const float b[4])
{
    /* inter = (min(a2, b2) - max(a1, b1)).clamp(0).prod(2) */
    float w = (a[2] < b[2] ? a[2] : b[2]) - (a[0] > b[0] ? a[0] : b[0]);
    float h = (a[3] < b[3] ? a[3] : b[3]) - (a[1] > b[1] ? a[1] : b[1]);
    w = w < 0.0f ? 0.0f : w;
    h = h < 0.0f ? 0.0f : h;
    const float inter = w * h;
    const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
    const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
    return inter / (area_a + area_b - inter + BOX_EPS);
}

/* Scratch of one image's matching: pairs (label, detection, IoU) and helpers. */
typedef struct match_buf {
    /* IoU matrix [nl][nd] */
    float *iou;
    /* pairs: label, detection, IoU; sort permutation */
    int32_t *pl, *pd;
    float *pv;
    ptrdiff_t *perm;
    /* per detection / label: chosen pair (-1: none) */
    int32_t *dbest, *lbest;
    /* pairs surviving the per-detection step, and their IoUs */
    int32_t *surv;
    float *sv;
} match_buf;

static void match_buf_free(match_buf *b)
{
    free(b->iou);
    free(b->pl);
    free(b->pd);
    free(b->pv);
    free(b->perm);
    free(b->dbest);
    free(b->lbest);
    free(b->surv);
    free(b->sv);
}

static int match_buf_alloc(match_buf *b, int nl, int nd)
{
    memset(b, 0, sizeof *b);
    const size_t np = (size_t)nl * (size_t)nd;
    b->iou = yc_malloc(np * sizeof *b->iou, "matching");
    b->pl = yc_malloc(np * sizeof *b->pl, "matching");
    b->pd = yc_malloc(np * sizeof *b->pd, "matching");
    b->pv = yc_malloc(np * sizeof *b->pv, "matching");
    b->perm = yc_malloc(np * sizeof *b->perm, "matching");
    b->dbest = yc_malloc((size_t)nd * sizeof *b->dbest, "matching");
    b->lbest = yc_malloc((size_t)nl * sizeof *b->lbest, "matching");
    b->surv = yc_malloc((size_t)nd * sizeof *b->surv, "matching");
    b->sv = yc_malloc((size_t)nd * sizeof *b->sv, "matching");
    if (!b->iou || !b->pl || !b->pd || !b->pv || !b->perm || !b->dbest || !b->lbest ||
        !b->surv || !b->sv) {
        match_buf_free(b);
        return YC_ENOMEM;
    }
    return YC_OK;
}

/* box_iou(labels[:, 1:], detections[:, :4]) */
static void iou_matrix(match_buf *b, const float *dets, int nd, const float *labels, int nl)
{
    for (int l = 0; l < nl; l++)
        for (int d = 0; d < nd; d++)
            b->iou[(size_t)l * nd + d] = yc_box_iou(labels + (size_t)l * 5 + 1,
                                                    dets + (size_t)d * 6);
}

/* matches[argsort(iou)[::-1]] then np.unique(detection column, return_index=True): for each
 * detection its first pair in descending-IoU order; the survivors, in detection order, go to
 * b->surv (pair numbers) and b->sv (IoUs).  Returns their number. */
static int unique_per_detection(match_buf *b, size_t m, int nd)
{
    yc_np_argsort_f32(b->pv, b->perm, (ptrdiff_t)m);
    for (int d = 0; d < nd; d++)
        b->dbest[d] = -1;
    for (size_t k = m; k-- > 0;) {
        const int32_t q = (int32_t)b->perm[k];
        if (b->dbest[b->pd[q]] < 0)
            b->dbest[b->pd[q]] = q;
    }
    int ns = 0;
    for (int d = 0; d < nd; d++)
        if (b->dbest[d] >= 0) {
            b->surv[ns] = b->dbest[d];
            b->sv[ns] = b->pv[b->dbest[d]];
            ns++;
        }
    return ns;
}

/* The matching of process_batch over the IoU matrix in b->iou ([nl][nd]). */
static void match_iou(match_buf *b, const float *dets, int nd, const float *labels, int nl,
                      uint16_t *correct)
{
    float iouv[YC_NIOU];
    yc_iouv(iouv);
    for (int t = 0; t < YC_NIOU; t++) {
        const uint16_t bit = (uint16_t)(1u << t);
        /* torch.where((iou >= iouv[t]) & correct_class): row-major (label, detection) */
        size_t m = 0;
        for (int l = 0; l < nl; l++) {
            const float lc = labels[(size_t)l * 5];
            for (int d = 0; d < nd; d++) {
                const float v = b->iou[(size_t)l * nd + d];
                if (v >= iouv[t] && lc == dets[(size_t)d * 6 + 5]) {
                    b->pl[m] = l;
                    b->pd[m] = d;
                    b->pv[m] = v;
                    m++;
                }
            }
        }
        if (m == 0)
            continue;
        if (m == 1) {
            correct[b->pd[0]] |= bit;
            continue;
        }
        const int ns = unique_per_detection(b, m, nd);
        /* np.unique(label column, return_index=True) over the detection-ordered survivors */
        for (int l = 0; l < nl; l++)
            b->lbest[l] = -1;
        for (int k = 0; k < ns; k++) {
            const int32_t q = b->surv[k];
            if (b->lbest[b->pl[q]] < 0) {
                b->lbest[b->pl[q]] = q;
                correct[b->pd[q]] |= bit;
            }
        }
    }
}

int yc_match_predictions(const float *dets, int nd, const float *labels, int nl,
                         uint16_t *correct)
{
    return yc_match_iou(NULL, dets, nd, labels, nl, correct);
}

int yc_match_iou(const float *iou, const float *dets, int nd, const float *labels, int nl,
                 uint16_t *correct)
{
    if (nd < 0 || nl < 0 || (nd && (!dets || !correct)) || (nl && !labels))
        return yc_error_status(YC_EFORMAT, "process_batch: %d detections, %d labels", nd, nl);
    for (int d = 0; d < nd; d++)
        correct[d] = 0;
    if (nd == 0 || nl == 0)
        return YC_OK;
    match_buf b;
    if (match_buf_alloc(&b, nl, nd) != YC_OK)
        return yc_error_context(YC_ENOMEM, "process_batch");
    if (iou)
        memcpy(b.iou, iou, (size_t)nl * (size_t)nd * sizeof *b.iou);
    else
        iou_matrix(&b, dets, nd, labels, nl);
    match_iou(&b, dets, nd, labels, nl, correct);
    match_buf_free(&b);
    return YC_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Confusion matrix
 * ------------------------------------------------------------------------------------------- */

int yc_confusion_init(yc_confusion *cm, int nc)
{
    memset(cm, 0, sizeof *cm);
    if (nc < 1)
        return yc_error_status(YC_EFORMAT, "confusion matrix: nc = %d", nc);
    cm->m = yc_calloc((size_t)(nc + 1) * (size_t)(nc + 1), sizeof *cm->m, "confusion matrix");
    if (!cm->m)
        return YC_ENOMEM;
    cm->nc = nc;
    cm->conf = 0.25f;
    cm->iou_thres = 0.45f;
    return YC_OK;
}

void yc_confusion_free(yc_confusion *cm)
{
    if (!cm)
        return;
    free(cm->m);
    memset(cm, 0, sizeof *cm);
}

/* A class value as an index: finite, integral, in [0, nc). */
static int class_index(float v, int nc, int *out)
{
    if (!(v >= 0.0f) || !(v < (float)nc) || v != floorf(v))
        return yc_error_status(YC_EFORMAT, "class %g is not one of the %d classes", (double)v, nc);
    *out = (int)v;
    return YC_OK;
}

int yc_confusion_process(yc_confusion *cm, const float *dets, int nd, const float *labels,
                         int nl)
{
    const int nc = cm->nc, w = nc + 1;
    if (nd < 0 || nl < 0 || (nd && !dets) || (nl && !labels))
        return yc_error_status(YC_EFORMAT, "confusion matrix: %d detections, %d labels", nd, nl);
    for (int l = 0; l < nl; l++) {
        int c;
        if (class_index(labels[(size_t)l * 5], nc, &c) != YC_OK)
            return yc_error_context(YC_EFORMAT, "confusion matrix: label %d", l);
    }
    /* detections = detections[detections[:, 4] > conf] */
    int nk = 0;
    int *keep = nd ? yc_malloc((size_t)nd * sizeof *keep, "confusion matrix") : NULL;
    if (nd && !keep)
        return YC_ENOMEM;
    for (int d = 0; d < nd; d++) {
        if (!(dets[(size_t)d * 6 + 4] > cm->conf))
            continue;
        int c;
        if (class_index(dets[(size_t)d * 6 + 5], nc, &c) != YC_OK) {
            free(keep);
            return yc_error_context(YC_EFORMAT, "confusion matrix: detection %d", d);
        }
        keep[nk++] = d;
    }
    float *kd = NULL;
    match_buf b;
    memset(&b, 0, sizeof b);
    if (nk && nl) {
        kd = yc_malloc((size_t)nk * 6 * sizeof *kd, "confusion matrix");
        if (!kd || match_buf_alloc(&b, nl, nk) != YC_OK) {
            free(kd);
            free(keep);
            return yc_error_context(YC_ENOMEM, "confusion matrix");
        }
        for (int k = 0; k < nk; k++)
            memcpy(kd + (size_t)k * 6, dets + (size_t)keep[k] * 6, 6 * sizeof *kd);
        iou_matrix(&b, kd, nk, labels, nl);
    }
    /* x = torch.where(iou > iou_thres), row-major (label, detection) */
    size_t m = 0;
    for (int l = 0; l < nl && kd; l++)
        for (int k = 0; k < nk; k++) {
            const float v = b.iou[(size_t)l * nk + k];
            if (v > cm->iou_thres) {
                b.pl[m] = l;
                b.pd[m] = k;
                b.pv[m] = v;
                m++;
            }
        }
    /* lbest[l]: the pair kept for label l; dbest[k] then marks detections with a kept pair */
    if (m > 1) {
        const int ns = unique_per_detection(&b, m, nk);
        /* sort the survivors by IoU again (descending), then np.unique(label column) */
        yc_np_argsort_f32(b.sv, b.perm, ns);
        for (int l = 0; l < nl; l++)
            b.lbest[l] = -1;
        for (int k = ns; k-- > 0;) {
            const int32_t q = b.surv[b.perm[k]];
            if (b.lbest[b.pl[q]] < 0)
                b.lbest[b.pl[q]] = q;
        }
    } else if (m == 1) {
        for (int l = 0; l < nl; l++)
            b.lbest[l] = -1;
        b.lbest[b.pl[0]] = 0;
    }
    for (int l = 0; l < nl; l++) {
        const int gc = (int)labels[(size_t)l * 5];
        if (m > 0 && b.lbest[l] >= 0) {
            const int dc = (int)kd[(size_t)b.pd[b.lbest[l]] * 6 + 5];
            cm->m[(size_t)dc * w + gc] += 1.0;
        } else {
            cm->m[(size_t)nc * w + gc] += 1.0;
        }
    }
    if (m > 0) {
        for (int k = 0; k < nk; k++)
            b.dbest[k] = -1;
        for (int l = 0; l < nl; l++)
            if (b.lbest[l] >= 0)
                b.dbest[b.pd[b.lbest[l]]] = 1;
        for (int k = 0; k < nk; k++)
            if (b.dbest[k] < 0) {
                const int dc = (int)kd[(size_t)k * 6 + 5];
                cm->m[(size_t)dc * w + nc] += 1.0;
            }
    }
    match_buf_free(&b);
    free(kd);
    free(keep);
    return YC_OK;
}

void yc_confusion_tp_fp(const yc_confusion *cm, double *tp, double *fp)
{
    const int w = cm->nc + 1;
    for (int c = 0; c < cm->nc; c++) {
        const double *row = cm->m + (size_t)c * w;
        tp[c] = row[c];
        fp[c] = pairwise_sum(row, (size_t)w, 1) - tp[c];
    }
}

/* ---------------------------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------------------------- */

int yc_val_stats_init(yc_val_stats *s, int nc)
{
    memset(s, 0, sizeof *s);
    if (nc < 1)
        return yc_error_status(YC_EFORMAT, "validation statistics: nc = %d", nc);
    s->nc = nc;
    return YC_OK;
}

void yc_val_stats_free(yc_val_stats *s)
{
    if (!s)
        return;
    free(s->correct);
    free(s->conf);
    free(s->pred_cls);
    free(s->label_cls);
    memset(s, 0, sizeof *s);
}

void yc_val_stats_reset(yc_val_stats *s)
{
    s->seen = 0;
    s->n_pred = 0;
    s->n_label = 0;
}

static int grow_preds(yc_val_stats *s, size_t need)
{
    if (need <= s->pred_cap)
        return YC_OK;
    size_t cap = s->pred_cap ? s->pred_cap : 4096;
    while (cap < need)
        cap *= 2;
    uint16_t *c = yc_realloc(s->correct, cap * sizeof *c, "validation statistics");
    if (!c)
        return YC_ENOMEM;
    s->correct = c;
    float *f = yc_realloc(s->conf, cap * sizeof *f, "validation statistics");
    if (!f)
        return YC_ENOMEM;
    s->conf = f;
    int32_t *k = yc_realloc(s->pred_cls, cap * sizeof *k, "validation statistics");
    if (!k)
        return YC_ENOMEM;
    s->pred_cls = k;
    s->pred_cap = cap;
    return YC_OK;
}

static int grow_labels(yc_val_stats *s, size_t need)
{
    if (need <= s->label_cap)
        return YC_OK;
    size_t cap = s->label_cap ? s->label_cap : 1024;
    while (cap < need)
        cap *= 2;
    int32_t *k = yc_realloc(s->label_cls, cap * sizeof *k, "validation statistics");
    if (!k)
        return YC_ENOMEM;
    s->label_cls = k;
    s->label_cap = cap;
    return YC_OK;
}

int yc_val_stats_add(yc_val_stats *s, const float *dets, int nd, const float *labels, int nl,
                     yc_confusion *cm)
{
    return yc_val_stats_add_correct(s, dets, nd, labels, nl, cm, NULL);
}

int yc_val_stats_add_correct(yc_val_stats *s, const float *dets, int nd, const float *labels,
                             int nl, yc_confusion *cm, const uint16_t *given)
{
    if (nd < 0 || nl < 0 || (nd && !dets) || (nl && !labels))
        return yc_error_status(YC_EFORMAT, "validation statistics: %d detections, %d labels", nd,
                               nl);
    int c;
    for (int d = 0; d < nd; d++)
        if (class_index(dets[(size_t)d * 6 + 5], s->nc, &c) != YC_OK)
            return yc_error_context(YC_EFORMAT, "validation statistics: detection %d", d);
    for (int l = 0; l < nl; l++)
        if (class_index(labels[(size_t)l * 5], s->nc, &c) != YC_OK)
            return yc_error_context(YC_EFORMAT, "validation statistics: label %d", l);
    if (grow_preds(s, s->n_pred + (size_t)nd) != YC_OK ||
        grow_labels(s, s->n_label + (size_t)nl) != YC_OK)
        return yc_error_context(YC_ENOMEM, "validation statistics");
    if (nd == 0) {
        if (nl && cm && yc_confusion_process(cm, NULL, 0, labels, nl) != YC_OK)
            return yc_error_context(YC_ERR, "validation statistics");
    } else {
        uint16_t *correct = s->correct + s->n_pred;
        if (given)
            memcpy(correct, given, (size_t)nd * sizeof *correct);
        else if (yc_match_predictions(dets, nd, labels, nl, correct) != YC_OK)
            return YC_ENOMEM;
        if (nl && cm && yc_confusion_process(cm, dets, nd, labels, nl) != YC_OK)
            return yc_error_context(YC_ERR, "validation statistics");
        for (int d = 0; d < nd; d++) {
            s->conf[s->n_pred + (size_t)d] = dets[(size_t)d * 6 + 4];
            s->pred_cls[s->n_pred + (size_t)d] = (int32_t)dets[(size_t)d * 6 + 5];
        }
        s->n_pred += (size_t)nd;
    }
    for (int l = 0; l < nl; l++)
        s->label_cls[s->n_label + (size_t)l] = (int32_t)labels[(size_t)l * 5];
    s->n_label += (size_t)nl;
    s->seen++;
    return YC_OK;
}

/* ---------------------------------------------------------------------------------------------
 * ap_per_class
 * ------------------------------------------------------------------------------------------- */

double yc_compute_ap(const double *recall, const double *precision, size_t n, double *mrec,
                     double *mpre)
{
    mrec[0] = 0.0;
    mpre[0] = 1.0;
    for (size_t k = 0; k < n; k++) {
        mrec[k + 1] = recall[k];
        mpre[k + 1] = precision[k];
    }
    mrec[n + 1] = 1.0;
    mpre[n + 1] = 0.0;
    /* np.flip(np.maximum.accumulate(np.flip(mpre))) */
    for (size_t k = n + 1; k-- > 0;)
        mpre[k] = np_maximum(mpre[k + 1], mpre[k]);
    /* np.trapz(np.interp(x, mrec, mpre), x), x = linspace(0, 1, 101) */
    double x[AP_NX], y[AP_NX], t[AP_NX - 1];
    for (int k = 0; k < AP_NX; k++)
        x[k] = np_linspace01(k, AP_NX);
    np_interp(x, AP_NX, mrec, mpre, n + 2, mpre[0], mpre[n + 1], y);
    for (int k = 0; k < AP_NX - 1; k++)
        t[k] = (x[k + 1] - x[k]) * (y[k + 1] + y[k]) / 2.0;
    return np_sum(t, AP_NX - 1, 1);
}

int yc_smooth(const double *y, int n, double f, double *out)
{
    if (n < 1 || !(f >= 0.0))
        return yc_error_status(YC_EFORMAT, "smooth: %d values, fraction %g", n, f);
    /* nf = round(len(y) * f * 2) // 2 + 1 (Python round: half to even) */
    const long nf = (long)nearbyint((double)n * f * 2.0) / 2 + 1;
    const long half = nf / 2;
    const double kern = 1.0 / (double)nf;
    /* np.convolve(yp, ones(nf) / nf, 'valid') with yp = y padded by half values at each end */
    const long nout = (long)n + 2 * half - nf + 1;
    for (long k = 0; k < nout; k++) {
        double acc = 0.0;
        for (long t = 0; t < nf; t++) {
            const long i = k + t - half;
            const double v = i < 0 ? y[0] : (i >= n ? y[n - 1] : y[i]);
            acc += v * kern;
        }
        out[k] = acc;
    }
    return (int)nout;
}

double yc_fitness(double mp, double mr, double map50, double map)
{
    double res = 0.0;
    res += mp * 0.0;
    res += mr * 0.0;
    res += map50 * 0.1;
    res += map * 0.9;
    return 0.0 + res;
}

void yc_ap_result_free(yc_ap_result *r)
{
    if (!r)
        return;
    free(r->cls);
    free(r->nt);
    free(r->p);
    free(r->r);
    free(r->f1);
    free(r->tp);
    free(r->fp);
    free(r->ap);
    free(r->ap50);
    free(r->ap5095);
    free(r->px);
    free(r->p_curve);
    free(r->r_curve);
    free(r->f1_curve);
    free(r->pr_curve);
    free(r->has_pr);
    memset(r, 0, sizeof *r);
}

static int ap_result_alloc(yc_ap_result *r, int n)
{
    const size_t k = n > 0 ? (size_t)n : 1;
    r->n = n;
    r->cls = yc_calloc(k, sizeof *r->cls, "ap_per_class");
    r->nt = yc_calloc(k, sizeof *r->nt, "ap_per_class");
    r->p = yc_calloc(k, sizeof *r->p, "ap_per_class");
    r->r = yc_calloc(k, sizeof *r->r, "ap_per_class");
    r->f1 = yc_calloc(k, sizeof *r->f1, "ap_per_class");
    r->tp = yc_calloc(k, sizeof *r->tp, "ap_per_class");
    r->fp = yc_calloc(k, sizeof *r->fp, "ap_per_class");
    r->ap = yc_calloc(k * YC_NIOU, sizeof *r->ap, "ap_per_class");
    r->ap50 = yc_calloc(k, sizeof *r->ap50, "ap_per_class");
    r->ap5095 = yc_calloc(k, sizeof *r->ap5095, "ap_per_class");
    r->px = yc_calloc(YC_NPX, sizeof *r->px, "ap_per_class");
    r->p_curve = yc_calloc(k * YC_NPX, sizeof *r->p_curve, "ap_per_class");
    r->r_curve = yc_calloc(k * YC_NPX, sizeof *r->r_curve, "ap_per_class");
    r->f1_curve = yc_calloc(k * YC_NPX, sizeof *r->f1_curve, "ap_per_class");
    r->pr_curve = yc_calloc(k * YC_NPX, sizeof *r->pr_curve, "ap_per_class");
    r->has_pr = yc_calloc(k, sizeof *r->has_pr, "ap_per_class");
    if (!r->cls || !r->nt || !r->p || !r->r || !r->f1 || !r->tp || !r->fp || !r->ap ||
        !r->ap50 || !r->ap5095 || !r->px || !r->p_curve || !r->r_curve || !r->f1_curve ||
        !r->pr_curve || !r->has_pr) {
        yc_ap_result_free(r);
        return YC_ENOMEM;
    }
    return YC_OK;
}

/* Working memory of ap_per_class. */
typedef struct ap_work {
    /* -conf (float32) and the argsort permutation */
    float *neg;
    ptrdiff_t *order;
    /* class -> index among the present classes (-1: no labels) */
    int *ci_of;
    /* predictions of present classes grouped by class, each group in sorted order: start of each
     * group, then masks and -conf as float64 */
    size_t *start;
    uint16_t *gtp;
    double *gxp;
    /* per class curves: recall, precision (n_p), mrec, mpre (n_p + 2) */
    double *recall, *precision, *mrec, *mpre;
    /* -px */
    double negpx[YC_NPX];
} ap_work;

static void ap_work_free(ap_work *w)
{
    free(w->neg);
    free(w->order);
    free(w->ci_of);
    free(w->start);
    free(w->gtp);
    free(w->gxp);
    free(w->recall);
    free(w->precision);
    free(w->mrec);
    free(w->mpre);
}

/* One class: AP per threshold, P/R curves over confidence and the PR curve. */
static void ap_one_class(yc_ap_result *res, int ci, const uint16_t *tp, const double *xp,
                         size_t n_p, ap_work *w)
{
    const double n_l = (double)res->nt[ci];
    for (int j = 0; j < YC_NIOU; j++) {
        int64_t tpc = 0;
        for (size_t k = 0; k < n_p; k++) {
            tpc += (tp[k] >> j) & 1;
            w->recall[k] = (double)tpc / (n_l + AP_EPS);
            w->precision[k] = (double)tpc / (double)(k + 1);
        }
        if (j == 0) {
            np_interp(w->negpx, YC_NPX, xp, w->recall, n_p, 0.0, w->recall[n_p - 1],
                      res->r_curve + (size_t)ci * YC_NPX);
            np_interp(w->negpx, YC_NPX, xp, w->precision, n_p, 1.0, w->precision[n_p - 1],
                      res->p_curve + (size_t)ci * YC_NPX);
        }
        res->ap[(size_t)ci * YC_NIOU + j] =
            yc_compute_ap(w->recall, w->precision, n_p, w->mrec, w->mpre);
        if (j == 0) {
            np_interp(res->px, YC_NPX, w->mrec, w->mpre, n_p + 2, w->mpre[0], w->mpre[n_p + 1],
                      res->pr_curve + (size_t)ci * YC_NPX);
            res->has_pr[ci] = true;
        }
    }
}

int yc_ap_per_class(const uint16_t *tp, const float *conf, const int32_t *pred_cls,
                    size_t n_pred, const int32_t *target_cls, size_t n_label, int nc,
                    yc_ap_result *res)
{
    memset(res, 0, sizeof *res);
    if (nc < 1 || (n_pred && (!tp || !conf || !pred_cls)) || (n_label && !target_cls))
        return yc_error_status(YC_EFORMAT, "ap_per_class: invalid arguments (nc = %d)", nc);
    if (n_pred > (size_t)PTRDIFF_MAX / sizeof(ptrdiff_t))
        return yc_error_status(YC_EFORMAT, "ap_per_class: %zu predictions", n_pred);
    for (size_t k = 0; k < n_label; k++)
        if (target_cls[k] < 0 || target_cls[k] >= nc)
            return yc_error_status(YC_EFORMAT, "ap_per_class: label class %d outside [0, %d)",
                                   (int)target_cls[k], nc);
    for (size_t k = 0; k < n_pred; k++)
        if (pred_cls[k] < 0 || pred_cls[k] >= nc)
            return yc_error_status(YC_EFORMAT,
                                   "ap_per_class: prediction class %d outside [0, %d)",
                                   (int)pred_cls[k], nc);
    ap_work w;
    memset(&w, 0, sizeof w);
    int status = YC_ENOMEM;
    w.ci_of = yc_malloc((size_t)nc * sizeof *w.ci_of, "ap_per_class");
    int64_t *count = yc_calloc((size_t)nc, sizeof *count, "ap_per_class");
    if (!w.ci_of || !count)
        goto out;
    /* np.unique(target_cls, return_counts=True) */
    for (size_t k = 0; k < n_label; k++)
        count[target_cls[k]]++;
    int n = 0;
    for (int c = 0; c < nc; c++)
        w.ci_of[c] = count[c] ? n++ : -1;
    if (ap_result_alloc(res, n) != YC_OK)
        goto out;
    for (int c = 0; c < nc; c++)
        if (w.ci_of[c] >= 0) {
            res->cls[w.ci_of[c]] = c;
            res->nt[w.ci_of[c]] = count[c];
        }
    for (int q = 0; q < YC_NPX; q++) {
        res->px[q] = np_linspace01(q, YC_NPX);
        w.negpx[q] = -res->px[q];
    }
    if (n == 0) {
        status = YC_OK;
        goto out;
    }

    /* i = np.argsort(-conf) */
    const size_t np_alloc = n_pred ? n_pred : 1;
    w.neg = yc_malloc(np_alloc * sizeof *w.neg, "ap_per_class");
    w.order = yc_malloc(np_alloc * sizeof *w.order, "ap_per_class");
    w.start = yc_calloc((size_t)n + 1, sizeof *w.start, "ap_per_class");
    w.gtp = yc_malloc(np_alloc * sizeof *w.gtp, "ap_per_class");
    w.gxp = yc_malloc(np_alloc * sizeof *w.gxp, "ap_per_class");
    if (!w.neg || !w.order || !w.start || !w.gtp || !w.gxp)
        goto out;
    for (size_t k = 0; k < n_pred; k++)
        w.neg[k] = -conf[k];
    yc_np_argsort_f32(w.neg, w.order, (ptrdiff_t)n_pred);

    /* group the sorted predictions of present classes by class (tp[i], -conf[i] per class) */
    for (size_t k = 0; k < n_pred; k++) {
        const int ci = w.ci_of[pred_cls[k]];
        if (ci >= 0)
            w.start[ci + 1]++;
    }
    size_t max_np = 0;
    for (int ci = 0; ci < n; ci++) {
        const size_t cnt = w.start[ci + 1];
        max_np = cnt > max_np ? cnt : max_np;
        w.start[ci + 1] = w.start[ci] + cnt;
    }
    {
        size_t *fill = yc_malloc(((size_t)n + 1) * sizeof *fill, "ap_per_class");
        if (!fill)
            goto out;
        memcpy(fill, w.start, ((size_t)n + 1) * sizeof *fill);
        for (size_t k = 0; k < n_pred; k++) {
            const size_t i = (size_t)w.order[k];
            const int ci = w.ci_of[pred_cls[i]];
            if (ci < 0)
                continue;
            w.gtp[fill[ci]] = tp[i];
            w.gxp[fill[ci]] = (double)w.neg[i];
            fill[ci]++;
        }
        free(fill);
    }
    w.recall = yc_malloc((max_np + 2) * sizeof *w.recall, "ap_per_class");
    w.precision = yc_malloc((max_np + 2) * sizeof *w.precision, "ap_per_class");
    w.mrec = yc_malloc((max_np + 2) * sizeof *w.mrec, "ap_per_class");
    w.mpre = yc_malloc((max_np + 2) * sizeof *w.mpre, "ap_per_class");
    if (!w.recall || !w.precision || !w.mrec || !w.mpre)
        goto out;

    for (int ci = 0; ci < n; ci++) {
        const size_t n_p = w.start[ci + 1] - w.start[ci];
        if (n_p == 0)
            continue;
        ap_one_class(res, ci, w.gtp + w.start[ci], w.gxp + w.start[ci], n_p, &w);
    }

    /* F1 = 2 * p * r / (p + r + eps); i = smooth(f1.mean(0), 0.1).argmax() */
    double mean_f1[YC_NPX], smoothed[YC_NPX + 1];
    for (int q = 0; q < YC_NPX; q++)
        mean_f1[q] = 0.0;
    for (int ci = 0; ci < n; ci++) {
        const double *pc = res->p_curve + (size_t)ci * YC_NPX;
        const double *rc = res->r_curve + (size_t)ci * YC_NPX;
        double *fc = res->f1_curve + (size_t)ci * YC_NPX;
        for (int q = 0; q < YC_NPX; q++) {
            fc[q] = 2.0 * pc[q] * rc[q] / (pc[q] + rc[q] + AP_EPS);
            mean_f1[q] += fc[q];
        }
    }
    for (int q = 0; q < YC_NPX; q++)
        mean_f1[q] /= (double)n;
    const int ns = yc_smooth(mean_f1, YC_NPX, 0.1, smoothed);
    int best = 0;
    for (int q = 1; q < ns && !isnan(smoothed[best]); q++)
        if (smoothed[q] > smoothed[best] || isnan(smoothed[q]))
            best = q;
    res->f1_index = best;
    for (int ci = 0; ci < n; ci++) {
        res->p[ci] = res->p_curve[(size_t)ci * YC_NPX + best];
        res->r[ci] = res->r_curve[(size_t)ci * YC_NPX + best];
        res->f1[ci] = res->f1_curve[(size_t)ci * YC_NPX + best];
        res->tp[ci] = nearbyint(res->r[ci] * (double)res->nt[ci]);
        res->fp[ci] = nearbyint(res->tp[ci] / (res->p[ci] + AP_EPS) - res->tp[ci]);
        res->ap50[ci] = res->ap[(size_t)ci * YC_NIOU];
        res->ap5095[ci] = np_mean(res->ap + (size_t)ci * YC_NIOU, YC_NIOU, 1);
    }
    res->mp = np_mean(res->p, (size_t)n, 1);
    res->mr = np_mean(res->r, (size_t)n, 1);
    res->map50 = np_mean(res->ap, (size_t)n, YC_NIOU);
    res->map = np_mean(res->ap5095, (size_t)n, 1);
    status = YC_OK;
out:
    free(count);
    ap_work_free(&w);
    if (status != YC_OK) {
        yc_ap_result_free(res);
        return yc_error_context(status, "ap_per_class");
    }
    return YC_OK;
}

/* ---------------------------------------------------------------------------------------------
 * val.py's summary
 * ------------------------------------------------------------------------------------------- */

void yc_val_metrics_free(yc_val_metrics *m)
{
    if (!m)
        return;
    free(m->nt);
    free(m->maps);
    yc_ap_result_free(&m->ap);
    memset(m, 0, sizeof *m);
}

int yc_val_metrics_compute(const yc_val_stats *s, yc_val_metrics *out)
{
    return yc_val_metrics_compute_gated(s, s, out);
}

int yc_val_metrics_compute_gated(const yc_val_stats *s, const yc_val_stats *gate,
                                 yc_val_metrics *out)
{
    memset(out, 0, sizeof *out);
    out->nc = s->nc;
    out->seen = s->seen;
    out->nt = yc_calloc((size_t)s->nc, sizeof *out->nt, "validation metrics");
    out->maps = yc_calloc((size_t)s->nc, sizeof *out->maps, "validation metrics");
    if (!out->nt || !out->maps) {
        yc_val_metrics_free(out);
        return YC_ENOMEM;
    }
    for (size_t k = 0; k < s->n_label; k++)
        out->nt[s->label_cls[k]]++;
    /* if len(stats) and stats[0].any(): ap_per_class */
    bool any = false;
    for (size_t k = 0; k < gate->n_pred && !any; k++)
        any = gate->correct[k] != 0;
    if (any) {
        int st = yc_ap_per_class(s->correct, s->conf, s->pred_cls, s->n_pred, s->label_cls,
                                 s->n_label, s->nc, &out->ap);
        if (st != YC_OK) {
            yc_val_metrics_free(out);
            return st;
        }
        out->mp = out->ap.mp;
        out->mr = out->ap.mr;
        out->map50 = out->ap.map50;
        out->map = out->ap.map;
    }
    /* maps = np.zeros(nc) + map; maps[c] = ap[i] */
    for (int c = 0; c < s->nc; c++)
        out->maps[c] = 0.0 + out->map;
    for (int ci = 0; ci < out->ap.n; ci++)
        out->maps[out->ap.cls[ci]] = out->ap.ap5095[ci];
    out->fitness = yc_fitness(out->mp, out->mr, out->map50, out->map);
    return YC_OK;
}

void yc_val_print_header(FILE *f)
{
    fprintf(f, "%22s%11s%11s%11s%11s%11s%11s\n", "Class", "Images", "Instances", "P", "R",
            "mAP50", "mAP50-95");
}

void yc_val_print_results(FILE *f, const yc_val_metrics *m, const char *const *names,
                          bool per_class)
{
    int64_t total = 0;
    for (int c = 0; c < m->nc; c++)
        total += m->nt[c];
    fprintf(f, "%22s%11ld%11" PRId64 "%11.3g%11.3g%11.3g%11.3g\n", "all", m->seen, total, m->mp,
            m->mr, m->map50, m->map);
    if (!per_class)
        return;
    for (int ci = 0; ci < m->ap.n; ci++) {
        const int c = m->ap.cls[ci];
        char num[16];
        const char *name = names && names[c] ? names[c] : num;
        snprintf(num, sizeof num, "%d", c);
        fprintf(f, "%22s%11ld%11" PRId64 "%11.3g%11.3g%11.3g%11.3g\n", name, m->seen, m->nt[c],
                m->ap.p[ci], m->ap.r[ci], m->ap.ap50[ci], m->ap.ap5095[ci]);
    }
}
