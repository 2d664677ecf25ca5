/* Greedy NMS and NMM of sliced detections (slice_merge.h). */
#include "slice_merge.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
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

yc_merge_params yc_merge_params_nms_ios(void)
{
    return (yc_merge_params){.method = YC_MERGE_NMS, .metric = YC_MERGE_IOS, .threshold = 0.5};
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

/* Row indices and processing positions (32 bits: the grid's entries stay small). */
typedef uint32_t pos_t;
/* the most detections merged at once: the grid's entry count fits pos_t */
#define MERGE_MAX_N ((size_t)(UINT32_MAX / 8))

/* A row's place in the processing order. */
typedef struct order_key {
    /* score of the row */
    float score;
    /* row index in the input */
    pos_t index;
} order_key;

/* qsort order: score descending, then input index ascending (a stable order). */
static int cmp_key(const void *pa, const void *pb)
{
    const order_key *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* A uniform grid over the finite boxes, so that a kept box meets only the boxes that can
 * overlap it.  Two boxes whose intersection has positive area share an interior point, and the
 * cells under that point are in the cell ranges of both: a pair sharing no cell has metric 0 and
 * never matches (threshold >= 0, and the metric must exceed it).  Boxes whose range spans more
 * than GRID_MAX_CELLS cells, or with a coordinate that is not finite, are "wide": every kept box
 * checks them, and a wide kept box checks every box. */
#define GRID_MAX_CELLS 16
/* at most this many entries per box on average; coarser cells until it holds */
#define GRID_ENTRIES_PER_BOX 4

typedef struct grid {
    /* origin, cell sizes and cells along x and y */
    double x0, y0, cw, ch;
    size_t gx, gy;
    /* CSR: the boxes (processing positions, ascending) of cell c are
     * entry[start[c]] .. entry[start[c + 1] - 1] */
    pos_t *start, *entry;
    /* positions of the wide boxes, ascending */
    pos_t *wide;
    size_t n_wide;
} grid;

static bool box_finite(const float *b)
{
    return isfinite(b[0]) && isfinite(b[1]) && isfinite(b[2]) && isfinite(b[3]);
}

/* The cell range [*c0, *c1] of [lo, hi] along an axis of n cells of size c from o. */
static void cell_range(double lo, double hi, double o, double c, size_t n, size_t *c0, size_t *c1)
{
    double a = floor((lo - o) / c), b = floor((hi - o) / c);
    double top = (double)(n - 1);
    a = a < 0 ? 0 : a > top ? top : a;
    b = b < a ? a : b > top ? top : b;
    *c0 = (size_t)a;
    *c1 = (size_t)b;
}

/* The cells of box b (its x range [*x0, *x1] and y range); false when b is wide. */
static bool box_cells(const grid *g, const float *b, size_t *x0, size_t *x1, size_t *y0,
                      size_t *y1)
{
    if (!box_finite(b))
        return false;
    cell_range(fmin(b[0], b[2]), fmax(b[0], b[2]), g->x0, g->cw, g->gx, x0, x1);
    cell_range(fmin(b[1], b[3]), fmax(b[1], b[3]), g->y0, g->ch, g->gy, y0, y1);
    return (*x1 - *x0 + 1) * (*y1 - *y0 + 1) <= GRID_MAX_CELLS;
}

static void grid_free(grid *g)
{
    free(g->start);
    free(g->entry);
    free(g->wide);
    memset(g, 0, sizeof *g);
}

/* Entries the boxes would take on g's cells. */
static size_t grid_entries(const grid *g, const float *dets, const order_key *key, size_t n)
{
    size_t total = 0, x0, x1, y0, y1;
    for (size_t k = 0; k < n; k++)
        if (box_cells(g, dets + key[k].index * YC_MERGE_DET_STRIDE, &x0, &x1, &y0, &y1))
            total += (x1 - x0 + 1) * (y1 - y0 + 1);
    return total;
}

/* Cells a side at most (about sqrt(n)). */
static double grid_side(size_t n)
{
    double side = n ? ceil(sqrt((double)n)) : 1;
    return side > 4096 ? 4096 : side;
}

size_t yc_slice_merge_scratch_bytes(size_t n)
{
    size_t side = (size_t)grid_side(n) + 1, cells = side * side;
    /* order, gone, seen; start and the fill cursors; entries; wide */
    return n * (sizeof(order_key) + 1 + sizeof(pos_t)) + 2 * (cells + 1) * sizeof(pos_t) +
           (GRID_ENTRIES_PER_BOX * n + 1) * sizeof(pos_t) + n * sizeof(pos_t);
}

/* Builds the grid of the n boxes in processing order key: about sqrt(n) cells a side, no
 * smaller than the mean box, coarser while the entries exceed GRID_ENTRIES_PER_BOX per box. */
static int grid_build(grid *g, const float *dets, const order_key *key, size_t n)
{
    memset(g, 0, sizeof *g);
    double lx = INFINITY, ly = INFINITY, hx = -INFINITY, hy = -INFINITY, sw = 0, sh = 0;
    size_t nf = 0;
    for (size_t k = 0; k < n; k++) {
        const float *b = dets + key[k].index * YC_MERGE_DET_STRIDE;
        if (!box_finite(b))
            continue;
        lx = fmin(lx, fmin(b[0], b[2]));
        hx = fmax(hx, fmax(b[0], b[2]));
        ly = fmin(ly, fmin(b[1], b[3]));
        hy = fmax(hy, fmax(b[1], b[3]));
        sw += fabs((double)b[2] - b[0]);
        sh += fabs((double)b[3] - b[1]);
        nf++;
    }
    double side = grid_side(nf);
    double ew = nf ? hx - lx : 1, eh = nf ? hy - ly : 1;
    g->x0 = nf ? lx : 0;
    g->y0 = nf ? ly : 0;
    g->cw = fmax(fmax(ew / side, nf ? sw / (double)nf : 1), 1e-6);
    g->ch = fmax(fmax(eh / side, nf ? sh / (double)nf : 1), 1e-6);
    for (;;) {
        g->gx = (size_t)fmin(floor(ew / g->cw) + 1, side + 1);
        g->gy = (size_t)fmin(floor(eh / g->ch) + 1, side + 1);
        if (g->gx * g->gy <= 4 || grid_entries(g, dets, key, n) <= GRID_ENTRIES_PER_BOX * n)
            break;
        g->cw *= 2;
        g->ch *= 2;
    }
    size_t cells = g->gx * g->gy, x0, x1, y0, y1;
    g->start = yc_calloc(cells + 1, sizeof *g->start, "slice merge grid");
    g->entry = yc_malloc((GRID_ENTRIES_PER_BOX * n + 1) * sizeof *g->entry, "slice merge grid");
    g->wide = yc_malloc(n * sizeof *g->wide, "slice merge grid");
    if (!g->start || !g->entry || !g->wide) {
        grid_free(g);
        return YC_ENOMEM;
    }
    /* count, prefix sums, then fill in processing order (each cell's list ascending) */
    for (size_t k = 0; k < n; k++)
        if (box_cells(g, dets + key[k].index * YC_MERGE_DET_STRIDE, &x0, &x1, &y0, &y1))
            for (size_t y = y0; y <= y1; y++)
                for (size_t x = x0; x <= x1; x++)
                    g->start[y * g->gx + x + 1]++;
    for (size_t c = 0; c < cells; c++)
        g->start[c + 1] += g->start[c];
    pos_t *fill = yc_malloc((cells ? cells : 1) * sizeof *fill, "slice merge grid");
    if (!fill) {
        grid_free(g);
        return YC_ENOMEM;
    }
    memcpy(fill, g->start, cells * sizeof *fill);
    for (size_t k = 0; k < n; k++) {
        if (!box_cells(g, dets + key[k].index * YC_MERGE_DET_STRIDE, &x0, &x1, &y0, &y1)) {
            g->wide[g->n_wide++] = (pos_t)k;
            continue;
        }
        for (size_t y = y0; y <= y1; y++)
            for (size_t x = x0; x <= x1; x++)
                g->entry[fill[y * g->gx + x]++] = (pos_t)k;
    }
    free(fill);
    return YC_OK;
}

/* What the greedy pass keeps while it runs. */
typedef struct merge_pass {
    const float *dets;
    const order_key *key;
    const yc_merge_params *p;
    /* per position: removed (absorbed or suppressed) */
    unsigned char *gone;
    /* per position: the last kept position + 1 that examined it */
    pos_t *seen;
} merge_pass;

/* Kept position a against position b (b > a, not gone): removes b when it matches, growing the
 * kept row o with NMM. */
static void consider(merge_pass *m, size_t a, size_t b, float *o)
{
    if (m->gone[b] || m->seen[b] == (pos_t)(a + 1))
        return;
    m->seen[b] = (pos_t)(a + 1);
    const float *da = m->dets + m->key[a].index * YC_MERGE_DET_STRIDE;
    const float *db = m->dets + m->key[b].index * YC_MERGE_DET_STRIDE;
    if ((!m->p->agnostic && db[5] != da[5]) ||
        !(yc_merge_overlap(da, db, m->p->metric) > m->p->threshold))
        return;
    m->gone[b] = 1;
    if (m->p->method == YC_MERGE_NMM) {
        o[0] = fminf(o[0], db[0]);
        o[1] = fminf(o[1], db[1]);
        o[2] = fmaxf(o[2], db[2]);
        o[3] = fmaxf(o[3], db[3]);
    }
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
    if (n > MERGE_MAX_N)
        return yc_error_status(YC_EUSAGE, "slice merge: %zu detections, at most %zu", n,
                               MERGE_MAX_N);
    order_key *key = yc_calloc(n, sizeof *key, "slice merge order");
    unsigned char *gone = yc_calloc(n, 1, "slice merge flags");
    pos_t *seen = yc_calloc(n, sizeof *seen, "slice merge flags");
    grid g;
    memset(&g, 0, sizeof g);
    int st = key && gone && seen ? YC_OK : YC_ENOMEM;
    if (!st) {
        for (size_t i = 0; i < n; i++)
            key[i] = (order_key){.score = dets[i * YC_MERGE_DET_STRIDE + 4], .index = (pos_t)i};
        /* NaN scores would break the comparison's ordering: they sort last, as -infinity */
        for (size_t i = 0; i < n; i++)
            if (isnan(key[i].score))
                key[i].score = -INFINITY;
        qsort(key, n, sizeof *key, cmp_key);
        st = grid_build(&g, dets, key, n);
    }
    if (st) {
        free(key);
        free(gone);
        free(seen);
        return st;
    }
    merge_pass m = {.dets = dets, .key = key, .p = p, .gone = gone, .seen = seen};
    size_t k = 0, x0, x1, y0, y1;
    for (size_t a = 0; a < n; a++) {
        if (gone[a])
            continue;
        const float *da = dets + key[a].index * YC_MERGE_DET_STRIDE;
        float *o = out + k++ * YC_MERGE_DET_STRIDE;
        memcpy(o, da, sizeof(float) * YC_MERGE_DET_STRIDE);
        if (!box_cells(&g, da, &x0, &x1, &y0, &y1)) {
            for (size_t b = a + 1; b < n; b++)
                consider(&m, a, b, o);
            continue;
        }
        for (size_t y = y0; y <= y1; y++)
            for (size_t x = x0; x <= x1; x++) {
                size_t c = y * g.gx + x;
                for (size_t e = g.start[c]; e < g.start[c + 1]; e++)
                    if (g.entry[e] > a)
                        consider(&m, a, g.entry[e], o);
            }
        for (size_t w = 0; w < g.n_wide; w++)
            if (g.wide[w] > a)
                consider(&m, a, g.wide[w], o);
    }
    grid_free(&g);
    free(key);
    free(gone);
    free(seen);
    *n_out = k;
    return YC_OK;
}

bool yc_merge_params_parse(const char *name, bool with_ios, yc_merge_params *p)
{
    if (!strcmp(name, "nmm")) {
        p->method = YC_MERGE_NMM;
        p->metric = YC_MERGE_IOS;
    } else if (!strcmp(name, "nms")) {
        p->method = YC_MERGE_NMS;
        p->metric = YC_MERGE_IOU;
    } else if (with_ios && !strcmp(name, "nms-ios")) {
        p->method = YC_MERGE_NMS;
        p->metric = YC_MERGE_IOS;
    } else {
        return false;
    }
    return true;
}
