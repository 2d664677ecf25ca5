/* Polygon rasterisation and YOLOv5's polygon masks (see masks.h): a port of OpenCV 4.6's
 * cv::fillPoly for 8-connected lines without shift (drawing.cpp: clipLine, LineIterator, Line,
 * CollectPolyEdges, FillEdgeCollection), and cv2.resize INTER_LINEAR of 0/1 images by an integer
 * ratio. */
#include "masks.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "npsort.h"
#include "util.h"

/* OpenCV's fixed point for polygon edges: 16 fractional bits. */
#define XY_SHIFT 16
/* FillEdgeCollection rounds each span's left end up (x + XY_ONE - 1), its right end down */
#define FILL_DELTA ((1 << XY_SHIFT) - 1)

typedef struct poly_edge {
    /* first and last (excluded) scanline */
    int y0, y1;
    /* x at the current scanline and its increment per line, 16.16 */
    int64_t x, dx;
    /* next edge in the active list */
    struct poly_edge *next;
} poly_edge;

void yc_mask_scratch_free(yc_mask_scratch *s)
{
    free(s->full);
    free(s->ipts);
    free(s->edges);
    free(s->keys);
    free(s->order);
    free(s->small);
    memset(s, 0, sizeof *s);
}

/* Grows *p to hold n elements of `size` bytes (capacity *cap). */
static int reserve(void **p, size_t *cap, size_t n, size_t size, const char *what)
{
    if (n <= *cap)
        return YC_OK;
    void *q = yc_realloc(*p, n * size, what);
    if (!q)
        return YC_ENOMEM;
    *p = q;
    *cap = n;
    return YC_OK;
}

/* cv::clipLine(Size2l, Point2l&, Point2l&): clips the segment to [0, w-1] x [0, h-1]; false when
 * it lies outside. */
static bool clip_line(int64_t w, int64_t h, int64_t *x1, int64_t *y1, int64_t *x2, int64_t *y2)
{
    int64_t right = w - 1, bottom = h - 1;
    if (w <= 0 || h <= 0)
        return false;
    int c1 = (*x1 < 0) + (*x1 > right) * 2 + (*y1 < 0) * 4 + (*y1 > bottom) * 8;
    int c2 = (*x2 < 0) + (*x2 > right) * 2 + (*y2 < 0) * 4 + (*y2 > bottom) * 8;
    if ((c1 & c2) == 0 && (c1 | c2) != 0) {
        int64_t a;
        if (c1 & 12) {
            a = c1 < 8 ? 0 : bottom;
            *x1 += (int64_t)((double)(a - *y1) * (double)(*x2 - *x1) / (double)(*y2 - *y1));
            *y1 = a;
            c1 = (*x1 < 0) + (*x1 > right) * 2;
        }
        if (c2 & 12) {
            a = c2 < 8 ? 0 : bottom;
            *x2 += (int64_t)((double)(a - *y2) * (double)(*x2 - *x1) / (double)(*y2 - *y1));
            *y2 = a;
            c2 = (*x2 < 0) + (*x2 > right) * 2;
        }
        if ((c1 & c2) == 0 && (c1 | c2) != 0) {
            if (c1) {
                a = c1 == 1 ? 0 : right;
                *y1 += (int64_t)((double)(a - *x1) * (double)(*y2 - *y1) / (double)(*x2 - *x1));
                *x1 = a;
                c1 = 0;
            }
            if (c2) {
                a = c2 == 1 ? 0 : right;
                *y2 += (int64_t)((double)(a - *x2) * (double)(*y2 - *y1) / (double)(*x2 - *x1));
                *x2 = a;
                c2 = 0;
            }
        }
    }
    return (c1 | c2) == 0;
}

/* cv::Line with 8-connectivity: cv::LineIterator (left to right, clipped to the image) setting
 * every pixel it visits. */
static void draw_line(uint8_t *img, int h, int w, int64_t x1, int64_t y1, int64_t x2, int64_t y2,
                      uint8_t color)
{
    if ((uint64_t)x1 >= (uint64_t)w || (uint64_t)x2 >= (uint64_t)w || (uint64_t)y1 >= (uint64_t)h ||
        (uint64_t)y2 >= (uint64_t)h) {
        if (!clip_line(w, h, &x1, &y1, &x2, &y2))
            return;
    }
    int px = (int)x1, py = (int)y1;
    int dx = (int)(x2 - x1), dy = (int)(y2 - y1);
    if (dx < 0) {
        /* left to right: start from the other end */
        dx = -dx;
        dy = -dy;
        px = (int)x2;
        py = (int)y2;
    }
    int sy = 1;
    if (dy < 0) {
        dy = -dy;
        sy = -1;
    }
    bool vert = dy > dx;
    int major = vert ? dy : dx, minor = vert ? dx : dy;
    /* per step: the major axis always advances, the minor one when err < 0 */
    int err = major - 2 * minor, plus = 2 * major, minus = -2 * minor;
    for (int i = 0; i <= major; i++) {
        img[(size_t)py * (size_t)w + (size_t)px] = color;
        bool step_minor = err < 0;
        err += minus + (step_minor ? plus : 0);
        if (vert) {
            py += sy;
            px += step_minor ? 1 : 0;
        } else {
            px += 1;
            py += step_minor ? sy : 0;
        }
    }
}

/* CmpEdges: by y0, then x, then dx. */
static int cmp_edges(const void *pa, const void *pb)
{
    const poly_edge *a = pa, *b = pb;
    if (a->y0 != b->y0)
        return a->y0 < b->y0 ? -1 : 1;
    if (a->x != b->x)
        return a->x < b->x ? -1 : 1;
    if (a->dx != b->dx)
        return a->dx < b->dx ? -1 : 1;
    return 0;
}

int yc_fill_poly(yc_mask_scratch *s, uint8_t *img, int h, int w, const int32_t *pts, size_t n,
                 uint8_t color)
{
    if (n == 0 || h <= 0 || w <= 0)
        return YC_OK;
    int st = reserve(&s->edges, &s->cap_edges, n + 1, sizeof(poly_edge), "polygon edges");
    if (st)
        return st;
    poly_edge *edges = s->edges;
    size_t total = 0;
    /* CollectPolyEdges: each edge's outline, and the non-horizontal edges for the fill */
    /* x in 16.16 fixed point, by multiplication: a negative vertex (outside the image) shifted
     * left would be undefined behaviour in C */
    int64_t x0 = (int64_t)pts[2 * (n - 1)] * (1 << XY_SHIFT), y0 = pts[2 * (n - 1) + 1];
    for (size_t i = 0; i < n; i++) {
        int64_t x1 = (int64_t)pts[2 * i] * (1 << XY_SHIFT), y1 = pts[2 * i + 1];
        draw_line(img, h, w, (x0 + (1 << (XY_SHIFT - 1))) >> XY_SHIFT, y0,
                  (x1 + (1 << (XY_SHIFT - 1))) >> XY_SHIFT, y1, color);
        if (y0 != y1) {
            poly_edge *e = &edges[total++];
            if (y0 < y1) {
                e->y0 = (int)y0;
                e->y1 = (int)y1;
                e->x = x0;
            } else {
                e->y0 = (int)y1;
                e->y1 = (int)y0;
                e->x = x1;
            }
            e->dx = (x1 - x0) / (y1 - y0);
            e->next = NULL;
        }
        x0 = x1;
        y0 = y1;
    }
    /* FillEdgeCollection */
    if (total < 2)
        return YC_OK;
    int y_max = INT32_MIN, y_min = INT32_MAX;
    int64_t x_max = INT64_MIN, x_min = INT64_MAX;
    for (size_t i = 0; i < total; i++) {
        poly_edge *e1 = &edges[i];
        int64_t xe = e1->x + (int64_t)(e1->y1 - e1->y0) * e1->dx;
        y_min = e1->y0 < y_min ? e1->y0 : y_min;
        y_max = e1->y1 > y_max ? e1->y1 : y_max;
        x_min = e1->x < x_min ? e1->x : x_min;
        x_max = e1->x > x_max ? e1->x : x_max;
        x_min = xe < x_min ? xe : x_min;
        x_max = xe > x_max ? xe : x_max;
    }
    if (y_max < 0 || y_min >= h || x_max < 0 || x_min >= ((int64_t)w << XY_SHIFT))
        return YC_OK;
    qsort(edges, total, sizeof *edges, cmp_edges);
    poly_edge tmp = {INT32_MAX, 0, 0, 0, NULL};
    edges[total] = tmp;
    size_t i = 0;
    poly_edge *e = &edges[0];
    if (y_max > h)
        y_max = h;
    for (int y = e->y0; y < y_max; y++) {
        poly_edge *last, *prelast, *keep_prelast;
        int draw = 0;
        bool clipline = y < 0;
        prelast = &tmp;
        last = tmp.next;
        while (last || e->y0 == y) {
            if (last && last->y1 == y) {
                /* the edge ends at this line */
                prelast->next = last->next;
                last = last->next;
                continue;
            }
            keep_prelast = prelast;
            if (last && (e->y0 > y || last->x < e->x)) {
                prelast = last;
                last = last->next;
            } else if (i < total) {
                /* the next edge starts here: into the active list */
                prelast->next = e;
                e->next = last;
                prelast = e;
                e = &edges[++i];
            } else {
                break;
            }
            if (draw) {
                if (!clipline) {
                    int64_t xa, xb;
                    if (keep_prelast->x > prelast->x) {
                        xa = (prelast->x + FILL_DELTA) >> XY_SHIFT;
                        xb = keep_prelast->x >> XY_SHIFT;
                    } else {
                        xa = (keep_prelast->x + FILL_DELTA) >> XY_SHIFT;
                        xb = prelast->x >> XY_SHIFT;
                    }
                    if (xa < w && xb >= 0) {
                        if (xa < 0)
                            xa = 0;
                        if (xb >= w)
                            xb = w - 1;
                        memset(img + (size_t)y * (size_t)w + (size_t)xa, color,
                               (size_t)(xb - xa + 1));
                    }
                }
                keep_prelast->x += keep_prelast->dx;
                prelast->x += prelast->dx;
            }
            draw ^= 1;
        }
        /* bubble sort of the active list by x */
        keep_prelast = NULL;
        do {
            prelast = &tmp;
            last = tmp.next;
            poly_edge *last_exchange = NULL;
            while (last != keep_prelast && last->next != NULL) {
                poly_edge *te = last->next;
                if (last->x > te->x) {
                    prelast->next = te;
                    last->next = te->next;
                    te->next = last;
                    prelast = te;
                    last_exchange = prelast;
                } else {
                    prelast = last;
                    last = te;
                }
            }
            if (last_exchange == NULL)
                break;
            keep_prelast = last_exchange;
        } while (keep_prelast != tmp.next && keep_prelast != &tmp);
    }
    return YC_OK;
}

void yc_mask_downsample(const uint8_t *src, int h, int w, int ratio, uint8_t *dst)
{
    int nh = h / ratio, nw = w / ratio;
    for (int y = 0; y < nh; y++) {
        uint8_t *d = dst + (size_t)y * nw;
        if (ratio % 2) {
            const uint8_t *r = src + (size_t)(ratio * y + (ratio - 1) / 2) * w;
            for (int x = 0; x < nw; x++)
                d[x] = r[ratio * x + (ratio - 1) / 2];
        } else {
            const uint8_t *r0 = src + (size_t)(ratio * y + ratio / 2 - 1) * w;
            const uint8_t *r1 = r0 + w;
            for (int x = 0; x < nw; x++) {
                int c = ratio * x + ratio / 2 - 1;
                d[x] = r0[c] + r0[c + 1] + r1[c] + r1[c + 1] >= 2;
            }
        }
    }
}

/* numpy's float64 -> int32 astype on x86: truncation, INT32_MIN when NaN or out of range; then
 * clamped to +-VERTEX_LIMIT (see masks.h). */
#define VERTEX_LIMIT (1 << 22)
static int32_t to_i32(double v)
{
    int32_t i = !(v > -2147483649.0 && v < 2147483648.0) ? INT32_MIN : (int32_t)v;
    return i < -VERTEX_LIMIT ? -VERTEX_LIMIT : i > VERTEX_LIMIT ? VERTEX_LIMIT : i;
}

int yc_polygon2mask(yc_mask_scratch *s, int h, int w, int ratio, const double *xy, size_t n,
                    uint8_t *dst)
{
    if (ratio < 1 || h % ratio || w % ratio || h < 1 || w < 1)
        return yc_error_status(YC_EUSAGE, "mask ratio %d does not divide the image size %dx%d",
                               ratio, w, h);
    size_t px = (size_t)h * (size_t)w;
    int st = reserve((void **)&s->full, &s->cap_px, px, 1, "polygon mask");
    if (!st)
        st = reserve((void **)&s->ipts, &s->cap_pts, 2 * (n ? n : 1), sizeof(int32_t),
                     "polygon points");
    if (st)
        return st;
    for (size_t i = 0; i < 2 * n; i++)
        s->ipts[i] = to_i32(xy[i]);
    memset(s->full, 0, px);
    if ((st = yc_fill_poly(s, s->full, h, w, s->ipts, n, 1)))
        return st;
    yc_mask_downsample(s->full, h, w, ratio, dst);
    return YC_OK;
}

int yc_polygons2masks(yc_mask_scratch *s, int h, int w, int ratio, const double *xy,
                      const size_t *firsts, const uint32_t *counts, int np, float *dst)
{
    size_t m = (size_t)(h / (ratio > 0 ? ratio : 1)) * (size_t)(w / (ratio > 0 ? ratio : 1));
    int st = reserve((void **)&s->small, &s->cap_small, m ? m : 1, 1, "polygon masks");
    for (int k = 0; !st && k < np; k++) {
        st = yc_polygon2mask(s, h, w, ratio, xy + 2 * firsts[k], counts[k], s->small);
        for (size_t i = 0; !st && i < m; i++)
            dst[(size_t)k * m + i] = s->small[i];
    }
    return st;
}

int yc_polygons2masks_overlap(yc_mask_scratch *s, int h, int w, int ratio, const double *xy,
                              const size_t *firsts, const uint32_t *counts, int np, float *dst,
                              int *order)
{
    if (ratio < 1 || h % ratio || w % ratio || h < 1 || w < 1)
        return yc_error_status(YC_EUSAGE, "mask ratio %d does not divide the image size %dx%d",
                               ratio, w, h);
    size_t m = (size_t)(h / ratio) * (size_t)(w / ratio);
    size_t cap = np > 0 ? (size_t)np : 1;
    int st = reserve((void **)&s->small, &s->cap_small, m * cap, 1, "polygon masks");
    if (!st && cap > s->cap_polys) {
        double *k = yc_realloc(s->keys, cap * sizeof *k, "mask areas");
        if (k)
            s->keys = k;
        ptrdiff_t *o = k ? yc_realloc(s->order, cap * sizeof *o, "mask order") : NULL;
        if (o)
            s->order = o;
        if (!k || !o)
            st = YC_ENOMEM;
        else
            s->cap_polys = cap;
    }
    if (st)
        return st;
    for (int k = 0; k < np; k++) {
        uint8_t *mk = s->small + (size_t)k * m;
        if ((st = yc_polygon2mask(s, h, w, ratio, xy + 2 * firsts[k], counts[k], mk)))
            return st;
        size_t area = 0;
        for (size_t i = 0; i < m; i++)
            area += mk[i];
        /* np.argsort(-areas) on uint64 areas: -0 is 0, the smallest; -a wraps to 2^64 - a, so
         * larger areas sort first.  -DBL_MAX and -a order the same way in a double. */
        s->keys[k] = area ? -(double)area : -DBL_MAX;
    }
    yc_np_argsort_f64(s->keys, s->order, np);
    if (np <= 255) {
        /* uint8 arithmetic as numpy does it: masks + ms[i] * (i + 1), clipped to i + 1 */
        for (size_t p = 0; p < m; p++) {
            uint8_t v = 0;
            for (int i = 0; i < np; i++) {
                uint8_t add = (uint8_t)(s->small[(size_t)s->order[i] * m + p] * (i + 1));
                v = (uint8_t)(v + add);
                if (v > i + 1)
                    v = (uint8_t)(i + 1);
            }
            dst[p] = v;
        }
    } else {
        for (size_t p = 0; p < m; p++) {
            int32_t v = 0;
            for (int i = 0; i < np; i++) {
                v += s->small[(size_t)s->order[i] * m + p] * (i + 1);
                if (v > i + 1)
                    v = i + 1;
            }
            dst[p] = (float)v;
        }
    }
    for (int i = 0; order && i < np; i++)
        order[i] = (int)s->order[i];
    return YC_OK;
}

/* cv2.resize INTER_LINEAR's coefficients along one axis (resize.cpp): the source coordinate
 * (float)((d + 0.5) * scale - 0.5) with scale = 1 / (dsize / ssize) in double, its floor and
 * fraction in float; along x (clamp) the fraction is 0 and the index the edge's outside the
 * source, along y the two rows are clipped to the source separately, their weights kept; weights
 * 1 - f and f times 2048, rounded to nearest even (saturate_cast<short>). */
static void cv_linear_coefs(int ssize, int dsize, bool clamp, int *i0, int *i1, int *a0, int *a1)
{
    const double scale = 1.0 / ((double)dsize / ssize);
    for (int d = 0; d < dsize; d++) {
        float f = (float)((d + 0.5) * scale - 0.5);
        int sx = (int)floorf(f);
        f -= (float)sx;
        if (clamp && sx < 0) {
            f = 0;
            sx = 0;
        }
        if (clamp && sx >= ssize - 1) {
            f = 0;
            sx = ssize - 1;
        }
        i0[d] = sx < 0 ? 0 : sx > ssize - 1 ? ssize - 1 : sx;
        i1[d] = sx + 1 < 0 ? 0 : sx + 1 > ssize - 1 ? ssize - 1 : sx + 1;
        a0[d] = (int)lrintf((1.0f - f) * 2048.0f);
        a1[d] = (int)lrintf(f * 2048.0f);
    }
}

int yc_resize_u8_linear(const uint8_t *src, int h, int w, size_t stride, uint8_t *dst, int oh,
                        int ow)
{
    if (h < 1 || w < 1 || oh < 1 || ow < 1)
        return yc_error_status(YC_EFORMAT, "resize of a %d x %d image to %d x %d", h, w, oh, ow);
    int *xi = yc_malloc((size_t)ow * 4 * sizeof *xi, "mask resize");
    int *yi = yc_malloc((size_t)oh * 4 * sizeof *yi, "mask resize");
    int32_t *rows = yc_malloc((size_t)ow * 2 * sizeof *rows, "mask resize");
    if (!xi || !yi || !rows) {
        free(xi);
        free(yi);
        free(rows);
        return YC_ENOMEM;
    }
    cv_linear_coefs(w, ow, true, xi, xi + ow, xi + 2 * ow, xi + 3 * ow);
    cv_linear_coefs(h, oh, false, yi, yi + oh, yi + 2 * oh, yi + 3 * oh);
    int32_t *h0 = rows, *h1 = rows + ow;
    for (int y = 0; y < oh; y++) {
        /* the horizontal pass of the two source rows (exact integers, weights x 2048) */
        const uint8_t *r0 = src + (size_t)yi[y] * stride, *r1 = src + (size_t)yi[oh + y] * stride;
        for (int x = 0; x < ow; x++) {
            const int s0 = xi[x], s1 = xi[ow + x], a0 = xi[2 * ow + x], a1 = xi[3 * ow + x];
            h0[x] = r0[s0] * a0 + r0[s1] * a1;
            h1[x] = r1[s0] * a0 + r1[s1] * a1;
        }
        /* the vertical pass as VResizeLinearVec_32s8u computes it: each row >> 4, times its
         * weight, >> 16 (v_mul_hi), summed, + 2, >> 2, saturated to uint8 */
        const int b0 = yi[2 * oh + y], b1 = yi[3 * oh + y];
        uint8_t *o = dst + (size_t)y * ow;
        for (int x = 0; x < ow; x++) {
            int v = ((((h0[x] >> 4) * b0) >> 16) + (((h1[x] >> 4) * b1) >> 16) + 2) >> 2;
            o[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    free(xi);
    free(yi);
    free(rows);
    return YC_OK;
}
