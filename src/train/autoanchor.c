/* AutoAnchor (see autoanchor.h): YOLOv5 v7.0 utils/autoanchor.py in C. */
#include "autoanchor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define PREFIX "AutoAnchor: "

/* PCG32 streams of the seed reserved for AutoAnchor (other modules use small stream ids). */
enum {
    STREAM_SCALE = 0x41410001, /* check_anchors' per-image scale */
    STREAM_KMEANS = 0x41410002, /* k-means starts and the random-init fallback */
    STREAM_EVOLVE = 0x41410003, /* the genetic algorithm's mutations */
};

/* kmean_anchors' k-means: scipy kmeans(wh / s, n, iter=30) with its default thresh. */
#define KMEANS_RESTARTS 30
#define KMEANS_THRESH 1e-5
/* Lloyd steps per restart at most (scipy has no cap; Lloyd's iteration stops far earlier). */
#define KMEANS_MAX_STEPS 1000
/* The genetic algorithm: mutation probability, sigma, factor range, smallest anchor (pixels). */
#define GA_MP 0.9
#define GA_SIGMA 0.1
#define GA_V_MIN 0.3
#define GA_V_MAX 3.0
#define GA_K_MIN 2.0

/* ------------------------------------------------------------------------------------------------
 * Label sizes and the metric
 * ---------------------------------------------------------------------------------------------- */

int yc_anchor_label_wh(const yc_dataset *ds, int imgsz, yc_rng *scale_rng, double **wh, size_t *n)
{
    *wh = NULL;
    *n = 0;
    if (imgsz < 1)
        return yc_error(PREFIX "image size %d must be at least 1", imgsz);
    size_t total = 0;
    for (size_t i = 0; i < ds->n; i++)
        total += ds->samples[i].n_boxes;
    double *out = NULL;
    if (total) {
        out = yc_calloc(total, 2 * sizeof *out, "AutoAnchor label sizes");
        if (!out)
            return YC_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < ds->n; i++) {
        const yc_sample *s = &ds->samples[i];
        double w = s->w, h = s->h, mx = w > h ? w : h;
        double sw = imgsz * w / mx, sh = imgsz * h / mx;
        if (scale_rng) {
            double scale = yc_rng_range(scale_rng, 0.9, 1.1);
            sw *= scale;
            sh *= scale;
        }
        const yc_box *b = yc_dataset_boxes(ds, i);
        for (uint32_t j = 0; j < s->n_boxes; j++, k++) {
            out[2 * k] = (double)b[j].w * sw;
            out[2 * k + 1] = (double)b[j].h * sh;
        }
    }
    *wh = out;
    *n = total;
    return YC_OK;
}

/* min(r, 1/r) of one ratio, as torch.min(r, 1 / r). */
static inline double fold(double r)
{
    double q = 1.0 / r;
    return q < r ? q : r;
}

/* The ratio metric of label (w, h) and anchor (aw, ah): min over w and h of min(r, 1/r). */
static inline double ratio_metric(double w, double h, double aw, double ah)
{
    double xw = fold(w / aw), xh = fold(h / ah);
    return xh < xw ? xh : xw;
}

void yc_anchor_metric(const double *wh, size_t n, const double *anchors, int na, double thr,
                      double *bpr, double *aat)
{
    const double t = 1.0 / thr;
    size_t recalled = 0, above = 0;
    for (size_t i = 0; i < n; i++) {
        double w = wh[2 * i], h = wh[2 * i + 1], best = 0.0;
        for (int j = 0; j < na; j++) {
            double x = ratio_metric(w, h, anchors[2 * j], anchors[2 * j + 1]);
            above += x > t;
            if (x > best)
                best = x;
        }
        recalled += best > t;
    }
    *bpr = n ? (double)recalled / (double)n : NAN;
    *aat = n ? (double)above / (double)n : NAN;
}

double yc_anchor_fitness(const double *wh, size_t n, const double *anchors, int na, double thr)
{
    if (!n)
        return 0.0;
    const double t = 1.0 / thr;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        double w = wh[2 * i], h = wh[2 * i + 1], best = 0.0;
        for (int j = 0; j < na; j++) {
            double x = ratio_metric(w, h, anchors[2 * j], anchors[2 * j + 1]);
            if (x > best)
                best = x;
        }
        if (best > t)
            sum += best;
    }
    return sum / (double)n;
}

void yc_anchor_sort_by_area(double *anchors, int na)
{
    for (int i = 1; i < na; i++) {
        double w = anchors[2 * i], h = anchors[2 * i + 1], area = w * h;
        int j = i;
        while (j > 0 && anchors[2 * (j - 1)] * anchors[2 * (j - 1) + 1] > area) {
            anchors[2 * j] = anchors[2 * (j - 1)];
            anchors[2 * j + 1] = anchors[2 * (j - 1) + 1];
            j--;
        }
        anchors[2 * j] = w;
        anchors[2 * j + 1] = h;
    }
}

/* ------------------------------------------------------------------------------------------------
 * k-means (scipy.cluster.vq.kmeans)
 * ---------------------------------------------------------------------------------------------- */

/* One restart of scipy's _kmeans from the k codes in `code`: Lloyd steps until the mean
 * distance changes by no more than thresh.  Leaves the final codes in `code`, their number in
 * *kc and returns the mean distance of the last assignment.  `sums` (2k) and `counts` (k) are
 * scratch. */
static double lloyd(const double *obs, size_t n, double *code, int *kc, double thresh,
                    double *sums, size_t *counts)
{
    double prev = INFINITY, diff = INFINITY;
    for (int step = 0; diff > thresh && step < KMEANS_MAX_STEPS; step++) {
        int k = *kc;
        memset(sums, 0, (size_t)k * 2 * sizeof *sums);
        memset(counts, 0, (size_t)k * sizeof *counts);
        double total = 0.0;
        for (size_t i = 0; i < n; i++) {
            double x = obs[2 * i], y = obs[2 * i + 1];
            int c = 0;
            double bd = INFINITY;
            for (int j = 0; j < k; j++) {
                double dx = x - code[2 * j], dy = y - code[2 * j + 1];
                double d = dx * dx + dy * dy;
                if (d < bd) {
                    bd = d;
                    c = j;
                }
            }
            total += sqrt(bd);
            sums[2 * c] += x;
            sums[2 * c + 1] += y;
            counts[c]++;
        }
        double cur = total / (double)n;
        int m = 0;
        for (int j = 0; j < k; j++) {
            if (!counts[j])
                continue;
            code[2 * m] = sums[2 * j] / (double)counts[j];
            code[2 * m + 1] = sums[2 * j + 1] / (double)counts[j];
            m++;
        }
        *kc = m;
        diff = fabs(prev - cur);
        prev = cur;
    }
    return prev;
}

int yc_kmeans(const double *obs, size_t n, int k, int iter, double thresh, yc_rng *rng,
              double *book, int *k_out, double *distortion)
{
    *k_out = 0;
    *distortion = NAN;
    if (k < 1 || (size_t)k > n)
        return yc_error(PREFIX "k-means: %d clusters asked of %zu observations", k, n);
    if (iter < 1)
        return yc_error(PREFIX "k-means: %d restarts (must be at least 1)", iter);
    if (n > UINT32_MAX)
        return yc_error(PREFIX "k-means: %zu observations are too many", n);
    uint32_t *idx = yc_calloc(n, sizeof *idx, "k-means indices");
    double *code = yc_calloc((size_t)k, 4 * sizeof *code, "k-means codes");
    size_t *counts = yc_calloc((size_t)k, sizeof *counts, "k-means counts");
    if (!idx || !code || !counts) {
        free(idx);
        free(code);
        free(counts);
        return YC_ENOMEM;
    }
    double *sums = code + 2 * k;
    double best = INFINITY;
    for (int it = 0; it < iter; it++) {
        /* _kpoints: k distinct observations in random order (partial Fisher-Yates) */
        for (size_t i = 0; i < n; i++)
            idx[i] = (uint32_t)i;
        for (int j = 0; j < k; j++) {
            uint32_t r = (uint32_t)j + yc_rng_below(rng, (uint32_t)(n - (size_t)j));
            uint32_t t = idx[j];
            idx[j] = idx[r];
            idx[r] = t;
            code[2 * j] = obs[2 * (size_t)idx[j]];
            code[2 * j + 1] = obs[2 * (size_t)idx[j] + 1];
        }
        int kc = k;
        double d = lloyd(obs, n, code, &kc, thresh, sums, counts);
        if (d < best) {
            best = d;
            memcpy(book, code, (size_t)kc * 2 * sizeof *book);
            *k_out = kc;
        }
    }
    *distortion = best;
    free(idx);
    free(code);
    free(counts);
    return YC_OK;
}

/* ------------------------------------------------------------------------------------------------
 * kmean_anchors
 * ---------------------------------------------------------------------------------------------- */

/* kmean_anchors' print_results(k) over the unfiltered sizes wh0: sorts a copy of k by area and
 * prints the two summary lines. */
static int print_results(const double *k, int n, const double *wh0, size_t n0, double thr,
                         int img_size)
{
    double *kk = yc_calloc((size_t)n, 2 * sizeof *kk, "AutoAnchor anchors");
    if (!kk)
        return YC_ENOMEM;
    memcpy(kk, k, (size_t)n * 2 * sizeof *kk);
    yc_anchor_sort_by_area(kk, n);
    const double t = 1.0 / thr;
    size_t recalled = 0, past = 0;
    double sum_x = 0.0, sum_best = 0.0, sum_past = 0.0;
    for (size_t i = 0; i < n0; i++) {
        double best = 0.0;
        for (int j = 0; j < n; j++) {
            double x = ratio_metric(wh0[2 * i], wh0[2 * i + 1], kk[2 * j], kk[2 * j + 1]);
            sum_x += x;
            if (x > t) {
                past++;
                sum_past += x;
            }
            if (x > best)
                best = x;
        }
        sum_best += best;
        recalled += best > t;
    }
    double cells = (double)n0 * n;
    yc_info(PREFIX "thr=%.2f: %.4f best possible recall, %.2f anchors past thr\n", t,
            (double)recalled / (double)n0, (double)past / cells * n);
    char past_s[32];
    if (past)
        snprintf(past_s, sizeof past_s, "%.3f", sum_past / (double)past);
    else
        snprintf(past_s, sizeof past_s, "nan");
    yc_info(PREFIX "n=%d, img_size=%d, metric_all=%.3f/%.3f-mean/best, past_thr=%s-mean: ", n,
            img_size, sum_x / cells, sum_best / (double)n0, past_s);
    for (int j = 0; j < n; j++)
        yc_info("%s%.0f,%.0f", j ? ", " : "", rint(kk[2 * j]), rint(kk[2 * j + 1]));
    yc_info("\n");
    free(kk);
    return YC_OK;
}

/* Population standard deviation of column c of n rows of 2 (numpy's std, ddof 0). */
static double column_std(const double *wh, size_t n, size_t c)
{
    double mean = 0.0, var = 0.0;
    for (size_t i = 0; i < n; i++)
        mean += wh[2 * i + c];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = wh[2 * i + c] - mean;
        var += d * d;
    }
    return sqrt(var / (double)n);
}

/* Step 2 of yc_kmean_anchors: k-means on the whitened sizes, times the deviations.  Sets *ok
 * false (anchors untouched) when k-means cannot give n anchors. */
static int kmeans_start(const double *wh, size_t nf, int n, yc_rng *rng, double *k, bool *ok)
{
    *ok = false;
    if ((size_t)n > nf)
        return YC_OK;
    double s[2] = {column_std(wh, nf, 0), column_std(wh, nf, 1)};
    double *obs = yc_calloc(nf, 2 * sizeof *obs, "k-means observations");
    double *book = yc_calloc((size_t)n, 2 * sizeof *book, "k-means codes");
    if (!obs || !book) {
        free(obs);
        free(book);
        return YC_ENOMEM;
    }
    bool finite = true;
    for (size_t i = 0; i < 2 * nf; i++) {
        obs[i] = wh[i] / s[i & 1];
        finite = finite && isfinite(obs[i]);
    }
    int st = YC_OK;
    if (finite) {
        int kc;
        double dist;
        st = yc_kmeans(obs, nf, n, KMEANS_RESTARTS, KMEANS_THRESH, rng, book, &kc, &dist);
        if (st == YC_OK && kc == n) {
            for (int j = 0; j < n; j++) {
                k[2 * j] = book[2 * j] * s[0];
                k[2 * j + 1] = book[2 * j + 1] * s[1];
            }
            *ok = true;
        }
    }
    free(obs);
    free(book);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One mutation factor per value (see yc_kmean_anchors, step 3), redrawn until one differs from
 * 1.  Draws in numpy's evaluation order: the mask uniforms, the one scalar, the normals. */
static void mutation(yc_rng *rng, double *v, int m)
{
    bool all_one = true;
    while (all_one) {
        for (int i = 0; i < m; i++)
            v[i] = yc_rng_uniform(rng) < GA_MP ? 1.0 : 0.0;
        double u = yc_rng_uniform(rng);
        all_one = true;
        for (int i = 0; i < m; i++) {
            double x = v[i] * u * yc_rng_normal(rng) * GA_SIGMA + 1.0;
            x = x < GA_V_MIN ? GA_V_MIN : x > GA_V_MAX ? GA_V_MAX : x;
            v[i] = x;
            all_one = all_one && x == 1.0;
        }
    }
}

int yc_kmean_anchors(const yc_dataset *ds, int n, int img_size, double thr, int gen, uint64_t seed,
                     bool verbose, double *anchors)
{
    if (n < 1 || img_size < 1 || gen < 0 || !(thr > 0.0) || !isfinite(thr))
        return yc_error(PREFIX "kmean_anchors: bad arguments n=%d img_size=%d thr=%g gen=%d", n,
                        img_size, thr, gen);
    double *wh0;
    size_t n0;
    int st = yc_anchor_label_wh(ds, img_size, NULL, &wh0, &n0);
    if (st)
        return st;
    if (!n0)
        return yc_error(PREFIX "no labels to compute anchors from");
    const size_t m = (size_t)n * 2;
    double *wh = yc_calloc(n0, 2 * sizeof *wh, "AutoAnchor label sizes");
    double *k = yc_calloc(m, 3 * sizeof *k, "AutoAnchor anchors");
    if (!wh || !k) {
        free(wh0);
        free(wh);
        free(k);
        return YC_ENOMEM;
    }
    double *kg = k + m, *v = k + 2 * m;

    /* 1. filter */
    size_t small = 0, nf = 0;
    for (size_t i = 0; i < n0; i++) {
        double w = wh0[2 * i], h = wh0[2 * i + 1];
        small += w < 3.0 || h < 3.0;
        if (w >= 2.0 || h >= 2.0) {
            wh[2 * nf] = w;
            wh[2 * nf + 1] = h;
            nf++;
        }
    }
    if (small)
        yc_info(PREFIX "WARNING Extremely small objects found: %zu of %zu labels are <3 pixels in "
                       "size\n",
                small, n0);

    /* 2. k-means, or sorted random anchors */
    yc_info(PREFIX "Running kmeans for %d anchors on %zu points...\n", n, nf);
    yc_rng rng;
    yc_rng_seed(&rng, seed, STREAM_KMEANS);
    bool ok;
    st = kmeans_start(wh, nf, n, &rng, k, &ok);
    if (st)
        goto done;
    if (!ok) {
        yc_info(PREFIX "WARNING switching strategies from kmeans to random init\n");
        for (size_t i = 0; i < m; i++)
            k[i] = yc_rng_uniform(&rng);
        qsort(k, m, sizeof *k, cmp_double);
        for (size_t i = 0; i < m; i++)
            k[i] *= img_size;
    }
    yc_anchor_sort_by_area(k, n);

    /* 3. evolve */
    yc_rng_seed(&rng, seed, STREAM_EVOLVE);
    double f = yc_anchor_fitness(wh, nf, k, n, thr);
    for (int g = 0; g < gen; g++) {
        mutation(&rng, v, (int)m);
        for (size_t i = 0; i < m; i++) {
            double x = k[i] * v[i];
            kg[i] = x < GA_K_MIN ? GA_K_MIN : x;
        }
        double fg = yc_anchor_fitness(wh, nf, kg, n, thr);
        if (fg > f) {
            f = fg;
            memcpy(k, kg, m * sizeof *k);
            if (verbose && (st = print_results(k, n, wh0, n0, thr, img_size)) != YC_OK)
                goto done;
        }
    }
    yc_info(PREFIX "Evolving anchors with Genetic Algorithm: fitness = %.4f (%d generations)\n", f,
            gen);

    /* 4. report and return sorted */
    st = print_results(k, n, wh0, n0, thr, img_size);
    if (st == YC_OK) {
        yc_anchor_sort_by_area(k, n);
        memcpy(anchors, k, m * sizeof *k);
    }
done:
    free(wh0);
    free(wh);
    free(k);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * check_anchors
 * ---------------------------------------------------------------------------------------------- */

static int sign(double x)
{
    return (x > 0) - (x < 0);
}

int yc_check_anchors_report(const yc_dataset *ds, yc_model *m, double thr, int imgsz,
                            uint64_t seed, yc_anchor_check *out)
{
    yc_anchor_check rep = {.bpr = NAN, .aat = NAN, .new_bpr = NAN};
    if (out)
        *out = rep;
    const int nl = m->nl, na = m->na, n = nl * na;
    if (nl < 1 || na < 1 || nl > YC_CFG_MAX_LEVELS || na > YC_CFG_MAX_ANCHORS)
        return yc_error(PREFIX "the model has %d levels of %d anchors", nl, na);
    for (int l = 0; l < nl; l++)
        if (!(m->stride[l] > 0.0f))
            return yc_error(PREFIX "level %d has stride %g", l, (double)m->stride[l]);
    if (!(thr > 0.0) || !isfinite(thr))
        return yc_error(PREFIX "anchor_t = %g, must be > 0", thr);
    if (imgsz < 1)
        return yc_error(PREFIX "image size %d must be at least 1", imgsz);

    yc_rng rng;
    yc_rng_seed(&rng, seed, STREAM_SCALE);
    double *wh;
    size_t nwh;
    int st = yc_anchor_label_wh(ds, imgsz, &rng, &wh, &nwh);
    if (st)
        return st;
    rep.n_labels = nwh;
    if (!nwh) {
        yc_info(PREFIX "no labels in the dataset, anchors left unchanged\n");
        if (out)
            *out = rep;
        return YC_OK;
    }

    double cur[YC_CFG_MAX_LEVELS * YC_CFG_MAX_ANCHORS * 2];
    double nk[YC_CFG_MAX_LEVELS * YC_CFG_MAX_ANCHORS * 2];
    for (int l = 0; l < nl; l++)
        for (int i = 0; i < na * 2; i++)
            cur[l * na * 2 + i] = (double)m->anchors[l * na * 2 + i] * m->stride[l];
    yc_anchor_metric(wh, nwh, cur, n, thr, &rep.bpr, &rep.aat);
    yc_info("\n" PREFIX "%.2f anchors/target, %.3f Best Possible Recall (BPR). ", rep.aat, rep.bpr);
    if (rep.bpr > YC_AUTOANCHOR_BPR_MIN) {
        yc_info("Current anchors are a good fit to dataset\n");
        goto done;
    }
    yc_info("Anchors are a poor fit to dataset, attempting to improve...\n");
    st = yc_kmean_anchors(ds, n, imgsz, thr, YC_AUTOANCHOR_GENERATIONS, seed, false, nk);
    if (st)
        goto done;
    double aat_new;
    yc_anchor_metric(wh, nwh, nk, n, thr, &rep.new_bpr, &aat_new);
    if (!(rep.new_bpr > rep.bpr)) {
        yc_info(PREFIX "Done (original anchors better than new anchors, proceeding with original "
                       "anchors)\n");
        goto done;
    }
    /* check_anchor_order in pixel space: mean anchor area of the first and the last level */
    double a0 = 0.0, a1 = 0.0;
    for (int j = 0; j < na; j++) {
        a0 += (double)(float)nk[2 * j] * (double)(float)nk[2 * j + 1];
        a1 += (double)(float)nk[((nl - 1) * na + j) * 2] *
              (double)(float)nk[((nl - 1) * na + j) * 2 + 1];
    }
    double da = (a1 - a0) / na, dstride = (double)m->stride[nl - 1] - (double)m->stride[0];
    if (da != 0.0 && sign(da) != sign(dstride)) {
        yc_info(PREFIX "Reversing anchor order\n");
        for (int l = 0; l < nl / 2; l++)
            for (int i = 0; i < na * 2; i++) {
                double t = nk[l * na * 2 + i];
                nk[l * na * 2 + i] = nk[(nl - 1 - l) * na * 2 + i];
                nk[(nl - 1 - l) * na * 2 + i] = t;
            }
    }
    for (int l = 0; l < nl; l++)
        for (int i = 0; i < na * 2; i++)
            m->anchors[l * na * 2 + i] = (float)nk[l * na * 2 + i] / m->stride[l];
    rep.changed = true;
    yc_info(PREFIX "Done (optional: update model *.yaml to use these anchors in the future)\n");
done:
    free(wh);
    if (out)
        *out = rep;
    return st;
}

int yc_check_anchors(const yc_dataset *ds, yc_model *m, double thr, int imgsz, uint64_t seed,
                     bool *changed)
{
    yc_anchor_check rep;
    int st = yc_check_anchors_report(ds, m, thr, imgsz, seed, &rep);
    if (changed)
        *changed = st == YC_OK && rep.changed;
    return st;
}
