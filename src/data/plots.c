/* YOLOv5's plots (see plots.h), drawn on draw.h's canvases: axes with "nice" ticks on plot
 * panels, the train_batchN.jpg mosaics, labels.jpg (class counts, boxes, 2D histograms),
 * results.png from results.csv (results_csv.h; curves smoothed as scipy's gaussian_filter1d),
 * the PR/F1/P/R curves and the confusion matrix, in matplotlib's colours. */
#include "plots.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draw.h"
#include "loader.h"
#include "masks.h"
#include "log.h"
#include "results_csv.h"
#include "util.h"

/* ------------------------------------------------------------------------------------------------
 * Colours
 * ---------------------------------------------------------------------------------------------- */

static yc_rgb rgb(uint32_t hex)
{
    yc_rgb c = {(uint8_t)(hex >> 16), (uint8_t)(hex >> 8), (uint8_t)hex};
    return c;
}

static const yc_rgb WHITE = {255, 255, 255};
static const yc_rgb BLACK = {0, 0, 0};

/* matplotlib's tab10 cycle (the default line colours). */
static yc_rgb tab10(int i)
{
    static const uint32_t t[10] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                   0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
    return rgb(t[(i < 0 ? -i : i) % 10]);
}

/* matplotlib's "Blues" colour map at t in [0, 1]. */
static yc_rgb cmap_blues(double t)
{
    static const uint32_t stops[9] = {0xf7fbff, 0xdeebf7, 0xc6dbef, 0x9ecae1, 0x6baed6,
                                      0x4292c6, 0x2171b5, 0x08519c, 0x08306b};
    if (!(t > 0))
        t = 0;
    if (t > 1)
        t = 1;
    double f = t * 8;
    int i = (int)f;
    if (i >= 8)
        i = 7;
    f -= i;
    yc_rgb a = rgb(stops[i]), b = rgb(stops[i + 1]);
    yc_rgb c = {(uint8_t)lround(a.r + (b.r - a.r) * f), (uint8_t)lround(a.g + (b.g - a.g) * f),
                (uint8_t)lround(a.b + (b.b - a.b) * f)};
    return c;
}

/* ------------------------------------------------------------------------------------------------
 * Axes
 * ---------------------------------------------------------------------------------------------- */

/* A plot area: its pixel rectangle and the data ranges it shows. */
typedef struct panel {
    /* top-left pixel and size of the plot area */
    int x, y, w, h;
    /* data range along x and y */
    double x0, x1, y0, y1;
} panel;

static double map_x(const panel *p, double v)
{
    return p->x + (v - p->x0) / (p->x1 - p->x0) * (p->w - 1) + 0.5;
}

static double map_y(const panel *p, double v)
{
    return p->y + p->h - 1 - (v - p->y0) / (p->y1 - p->y0) * (p->h - 1) + 0.5;
}

/* Tick values at 1, 2, 2.5 or 5 times a power of ten covering [lo, hi]; returns the count and
 * the number of decimals to print them with. */
static int nice_ticks(double lo, double hi, int target, double *ticks, int cap, int *decimals)
{
    double span = hi - lo;
    if (!(span > 0) || !isfinite(span)) {
        *decimals = 2;
        return 0;
    }
    double raw = span / target;
    double mag = pow(10, floor(log10(raw)));
    double norm = raw / mag, mult;
    int extra = 0;
    if (norm <= 1)
        mult = 1;
    else if (norm <= 2)
        mult = 2;
    else if (norm <= 2.5) {
        mult = 2.5;
        extra = 1;
    } else if (norm <= 5)
        mult = 5;
    else
        mult = 10;
    double step = mult * mag;
    int d = (int)-floor(log10(step) + 1e-9) + extra;
    *decimals = d < 0 ? 0 : d > 8 ? 8 : d;
    int n = 0;
    for (double v = ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9 && n < cap; v += step)
        ticks[n++] = fabs(v) < step * 1e-9 ? 0.0 : v;
    return n;
}

/* Frame, ticks with labels on both axes, the title centred above, and optional axis labels. */
static void draw_axes(yc_canvas *c, const panel *p, const char *title, const char *xlabel,
                      const char *ylabel, int scale)
{
    const yc_rgb grey = {90, 90, 90};
    double t[32];
    int dec;
    char buf[64];
    int th = yc_text_height(scale);
    int n = nice_ticks(p->x0, p->x1, 5, t, 32, &dec);
    for (int i = 0; i < n; i++) {
        int px = (int)map_x(p, t[i]);
        yc_draw_fill_rect(c, px, p->y + p->h, px, p->y + p->h + 4, grey);
        snprintf(buf, sizeof buf, "%.*f", dec, t[i]);
        yc_draw_text(c, px - yc_text_width(buf, scale) / 2, p->y + p->h + 8, buf, scale, BLACK);
    }
    n = nice_ticks(p->y0, p->y1, 5, t, 32, &dec);
    for (int i = 0; i < n; i++) {
        int py = (int)map_y(p, t[i]);
        yc_draw_fill_rect(c, p->x - 5, py, p->x - 1, py, grey);
        snprintf(buf, sizeof buf, "%.*f", dec, t[i]);
        yc_draw_text(c, p->x - 9 - yc_text_width(buf, scale), py - th / 2, buf, scale, BLACK);
    }
    yc_draw_box(c, p->x - 1, p->y - 1, p->x + p->w, p->y + p->h, 1, BLACK);
    if (title) {
        int ts = scale + 1;
        while (ts > 1 && yc_text_width(title, ts) > p->w + 40)
            ts--;
        yc_draw_text(c, p->x + (p->w - yc_text_width(title, ts)) / 2,
                     p->y - yc_text_height(ts) - 10, title, ts, BLACK);
    }
    if (xlabel)
        yc_draw_text(c, p->x + (p->w - yc_text_width(xlabel, scale)) / 2,
                     p->y + p->h + 16 + th, xlabel, scale, BLACK);
    if (ylabel) {
        int wmax = 0;
        for (int i = 0; i < n; i++) {
            snprintf(buf, sizeof buf, "%.*f", dec, t[i]);
            int w = yc_text_width(buf, scale);
            wmax = w > wmax ? w : wmax;
        }
        yc_draw_text_up(c, p->x - 18 - wmax - th, p->y + (p->h + yc_text_width(ylabel, scale)) / 2,
                        ylabel, scale, BLACK);
    }
}

/* Expands [lo, hi] by 5% on both sides as matplotlib's autoscale does (a point becomes a small
 * range around it). */
static void auto_range(double lo, double hi, double *a, double *b)
{
    if (!isfinite(lo) || !isfinite(hi)) {
        *a = 0;
        *b = 1;
        return;
    }
    double span = hi - lo;
    if (span <= fabs(hi) * 1e-9 || span <= 1e-12) {
        double d = fabs(hi) > 1e-9 ? fabs(hi) * 0.05 : 0.05;
        *a = lo - d;
        *b = hi + d;
        return;
    }
    *a = lo - 0.05 * span;
    *b = hi + 0.05 * span;
}

/* ------------------------------------------------------------------------------------------------
 * train_batch mosaics
 * ---------------------------------------------------------------------------------------------- */

/* Channel ch (0 = R) of pixel (x, y) of a batch image, 0..255. */
static double sample_px(const yc_plot_image *im, int x, int y, int ch)
{
    size_t plane = (size_t)im->w * im->h;
    switch (im->layout) {
    case YC_PIX_U8_CHW:
        return ((const uint8_t *)im->px)[ch * plane + (size_t)y * im->w + x];
    case YC_PIX_F32_CHW: {
        double v = ((const float *)im->px)[ch * plane + (size_t)y * im->w + x] * 255.0;
        return v < 0 ? 0 : v > 255 ? 255 : v;
    }
    case YC_PIX_U8_HWC:
    default:
        return ((const uint8_t *)im->px)[((size_t)y * im->w + x) * 3 + ch];
    }
}

/* Resizes image `im` by `scale` (bilinear, as cv2.resize INTER_LINEAR with half-pixel centres)
 * into the canvas with its top-left at (ox, oy), covering at most tw x th pixels. */
static void blit_scaled(yc_canvas *c, const yc_plot_image *im, double scale, int ox, int oy,
                        int tw, int th)
{
    int dw = (int)ceil(im->w * scale), dh = (int)ceil(im->h * scale);
    if (dw > tw)
        dw = tw;
    if (dh > th)
        dh = th;
    for (int y = 0; y < dh; y++) {
        double sy = (y + 0.5) / scale - 0.5;
        sy = sy < 0 ? 0 : sy > im->h - 1 ? im->h - 1 : sy;
        int y0 = (int)sy, y1 = y0 + 1 < im->h ? y0 + 1 : y0;
        double fy = sy - y0;
        for (int x = 0; x < dw; x++) {
            double sx = (x + 0.5) / scale - 0.5;
            sx = sx < 0 ? 0 : sx > im->w - 1 ? im->w - 1 : sx;
            int x0 = (int)sx, x1 = x0 + 1 < im->w ? x0 + 1 : x0;
            double fx = sx - x0;
            uint8_t v[3];
            for (int ch = 0; ch < 3; ch++) {
                double a = sample_px(im, x0, y0, ch) * (1 - fx) + sample_px(im, x1, y0, ch) * fx;
                double b = sample_px(im, x0, y1, ch) * (1 - fx) + sample_px(im, x1, y1, ch) * fx;
                v[ch] = (uint8_t)lround(a * (1 - fy) + b * fy);
            }
            yc_rgb col = {v[0], v[1], v[2]};
            yc_draw_pixel(c, ox + x, oy + y, col);
        }
    }
}

/* The class id stored in a float label, or -1 when it is not a usable id (negative, huge, NaN). */
static int label_class(float v)
{
    return v >= 0 && v < 100000 ? (int)v : -1;
}

/* "name" or the class id when there is no name for it. */
static const char *class_name(int cls, const char *const *names, int nc, char *buf, size_t len)
{
    if (names && cls >= 0 && cls < nc && names[cls])
        return names[cls];
    snprintf(buf, len, "%d", cls);
    return buf;
}

/* plot_images_and_masks' blend of one mask over its tile (origin ox, oy, tw x th pixels): the
 * mask resized to the tile when its size differs (cv2.resize INTER_LINEAR of the uint8 mask,
 * yc_resize_u8_linear, then astype(bool)), and im[mask] = im[mask] * 0.4 + colour * 0.6 in
 * float, truncated back to uint8 as numpy assigns.  tmp holds tw * th bytes. */
static int blend_mask(yc_canvas *c, const yc_plot_mask *mk, int ox, int oy, int tw, int th,
                      yc_rgb col, uint8_t *tmp)
{
    if (!mk->m || mk->w < 1 || mk->h < 1)
        return YC_OK;
    const uint8_t *m = mk->m;
    if (mk->w != tw || mk->h != th) {
        int st = yc_resize_u8_linear(mk->m, mk->h, mk->w, (size_t)mk->w, tmp, th, tw);
        if (st)
            return st;
        m = tmp;
    }
    for (int y = 0; y < th; y++)
        for (int x = 0; x < tw; x++) {
            int px = ox + x, py = oy + y;
            if (px >= c->w || py >= c->h || !m[(size_t)y * tw + x])
                continue;
            uint8_t *p = c->px + ((size_t)py * c->w + px) * 3;
            p[0] = (uint8_t)(p[0] * 0.4 + col.r * 0.6);
            p[1] = (uint8_t)(p[1] * 0.4 + col.g * 0.6);
            p[2] = (uint8_t)(p[2] * 0.4 + col.b * 0.6);
        }
    return YC_OK;
}

int yc_plot_batch(const char *out_path, const yc_plot_image *images, int n,
                  const yc_plot_box *boxes, int n_boxes, const char *const *names, int nc)
{
    return yc_plot_batch_masks(out_path, images, n, boxes, n_boxes, NULL, names, nc);
}

/* One imshow_cls title: `a`, then when b is not NULL an em dash (drawn as a line one character
 * wide, the font being ASCII) and `b`, centred on column cx with its top at y, cut to the
 * characters that fit in maxw pixels. */
static void draw_cls_title(yc_canvas *c, int cx, int y, const char *a, const char *b, int maxw,
                           int scale)
{
    int adv = 6 * scale;
    size_t na = strlen(a), nb = b ? strlen(b) + 1 : 0, n = na + nb;
    size_t fit = (size_t)((maxw + scale) / adv);
    if (n > fit)
        n = fit;
    int x = cx - ((int)n * adv - scale) / 2;
    for (size_t i = 0; i < n; i++, x += adv) {
        if (i < na) {
            yc_draw_text(c, x, y, (char[2]){a[i], 0}, scale, BLACK);
        } else if (i == na) {
            int mid = y + yc_text_height(scale) / 2;
            yc_draw_fill_rect(c, x, mid, x + 5 * scale - 1, mid + scale - 1, BLACK);
        } else {
            yc_draw_text(c, x, y, (char[2]){b[i - na - 1], 0}, scale, BLACK);
        }
    }
}

int yc_plot_cls_images(const char *out_path, const yc_plot_image *images, int n,
                       const int *labels, const int *pred, const char *const *names, int nc)
{
    if (n > YC_CLS_PLOT_MAX)
        n = YC_CLS_PLOT_MAX;
    if (n < 1 || !images || !labels)
        return yc_error_status(YC_ERR, "%s: no images to plot", out_path);
    int size = 0;
    for (int i = 0; i < n; i++) {
        if (!images[i].px || images[i].w < 1 || images[i].h < 1)
            return yc_error_status(YC_ERR, "%s: image %d has no pixels", out_path, i);
        int side = images[i].w > images[i].h ? images[i].w : images[i].h;
        size = side > size ? side : size;
    }
    /* m = min(8, round(n ** 0.5)): sqrt of an integer below 26 is never halfway */
    int m = (int)lround(sqrt((double)n));
    m = m > 8 ? 8 : m < 1 ? 1 : m;
    int rows = (n + m - 1) / m;
    int tile = size > YC_CLS_PLOT_MIN_TILE ? size : YC_CLS_PLOT_MIN_TILE;
    int scale = 1 + tile / 256, pad = YC_CLS_PLOT_PAD;
    int title_h = yc_text_height(scale) + pad;
    int cw = tile + 2 * pad, chh = tile + 2 * pad + title_h;
    yc_canvas c = {0};
    int st = yc_canvas_init(&c, m * cw, rows * chh, WHITE);
    if (st)
        return st;
    for (int i = 0; i < n; i++) {
        const yc_plot_image *im = &images[i];
        int ox = (i % m) * cw + pad, oy = (i / m) * chh + pad;
        int side = im->w > im->h ? im->w : im->h;
        blit_scaled(&c, im, (double)tile / side, ox, oy + title_h, tile, tile);
        char ba[24], bb[24];
        const char *a = class_name(labels[i], names, nc, ba, sizeof ba);
        const char *b = pred ? class_name(pred[i], names, nc, bb, sizeof bb) : NULL;
        draw_cls_title(&c, ox + tile / 2, oy, a, b, tile, scale);
    }
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* Whether box b is drawn: a ground truth box, or a prediction above 0.25, with finite sane
 * coordinates on one of the n images. */
static bool box_drawn(const yc_plot_box *b, int n)
{
    if (b->image < 0 || b->image >= n || !isfinite(b->cx) || !isfinite(b->cy) ||
        !isfinite(b->w) || !isfinite(b->h) || fabsf(b->cx) > 100 || fabsf(b->cy) > 100 ||
        fabsf(b->w) > 100 || fabsf(b->h) > 100)
        return false;
    return b->conf < 0 || b->conf > 0.25f;
}

int yc_plot_batch_masks(const char *out_path, const yc_plot_image *images, int n,
                        const yc_plot_box *boxes, int n_boxes, const yc_plot_mask *masks,
                        const char *const *names, int nc)
{
    if (n < 1)
        return yc_error_status(YC_EFORMAT, "%s: no images to plot", out_path);
    if (n > 16)
        n = 16;
    int W = 0, H = 0;
    for (int i = 0; i < n; i++) {
        if (!images[i].px || images[i].w < 1 || images[i].h < 1)
            return yc_error_status(YC_EFORMAT, "%s: batch image %d is empty", out_path, i);
        W = images[i].w > W ? images[i].w : W;
        H = images[i].h > H ? images[i].h : H;
    }
    int ns = (int)ceil(sqrt((double)n));
    double scale = 1920.0 / ns / (W > H ? W : H);
    int tw = W, th = H;
    if (scale < 1) {
        tw = (int)ceil(scale * W);
        th = (int)ceil(scale * H);
    } else {
        scale = 1;
    }
    yc_canvas c;
    int st = yc_canvas_init(&c, ns * tw, ns * th, WHITE);
    if (st)
        return yc_error_context(st, "%s", out_path);
    /* a mask resized to a tile */
    uint8_t *tmp = NULL;
    if (masks && !(tmp = yc_malloc((size_t)tw * th, "batch plot masks"))) {
        yc_canvas_free(&c);
        return YC_ENOMEM;
    }
    int fs = (int)((th + tw) * ns * 0.01);
    int lw = (int)lround(fs / 10.0);
    lw = lw < 1 ? 1 : lw;
    int ts = fs / 9 < 1 ? 1 : fs / 9;
    for (int i = 0; i < n; i++) {
        int ox = tw * (i % ns), oy = th * (i / ns);
        blit_scaled(&c, &images[i], scale, ox, oy, tw, th);
        yc_draw_box(&c, ox, oy, ox + tw - 1, oy + th - 1, 2, WHITE);
        if (images[i].path) {
            char name[41];
            snprintf(name, sizeof name, "%s", yc_path_basename(images[i].path));
            yc_draw_text(&c, ox + 5, oy + 5, name, ts, (yc_rgb){220, 220, 220});
        }
    }
    /* image by image as plot_images_and_masks: the boxes and labels, then the masks over them */
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n_boxes; j++) {
            const yc_plot_box *b = &boxes[j];
            if (b->image != i || !box_drawn(b, n))
                continue;
            const yc_plot_image *im = &images[b->image];
            double sw = im->w * scale, sh = im->h * scale;
            int ox = tw * (b->image % ns), oy = th * (b->image / ns);
            int x0 = ox + (int)((b->cx - b->w / 2) * sw), y0 = oy + (int)((b->cy - b->h / 2) * sh);
            int x1 = ox + (int)((b->cx + b->w / 2) * sw), y1 = oy + (int)((b->cy + b->h / 2) * sh);
            char buf[32], label[96];
            const char *nm = class_name(b->cls, names, nc, buf, sizeof buf);
            if (b->conf < 0)
                snprintf(label, sizeof label, "%s", nm);
            else
                snprintf(label, sizeof label, "%s %.1f", nm, b->conf);
            yc_draw_label(&c, x0, y0, x1, y1, label, lw, ts, yc_color_class(b->cls));
        }
        if (!masks)
            continue;
        for (int j = 0; j < n_boxes && !st; j++)
            if (boxes[j].image == i && box_drawn(&boxes[j], n))
                st = blend_mask(&c, &masks[j], tw * (i % ns), th * (i / ns), tw, th,
                                yc_color_class(boxes[j].cls), tmp);
    }
    if (!st)
        st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    free(tmp);
    return st;
}

int yc_plot_batch_seg_labels(const char *out_path, const yc_batch *b, const yc_dataset *ds,
                             bool overlap, bool single_cls, const char *const *names, int nc)
{
    const int n = b->n < 16 ? b->n : 16;
    if (n < 1)
        return yc_error_status(YC_EFORMAT, "%s: no images to plot", out_path);
    yc_plot_image im[16];
    const size_t img = 3 * (size_t)b->h * (size_t)b->w;
    for (int i = 0; i < n; i++)
        im[i] = (yc_plot_image){.px = b->images + (size_t)i * img, .layout = YC_PIX_U8_CHW,
                                .w = b->w, .h = b->h,
                                .path = ds ? ds->samples[b->sample[i]].image : NULL};
    const size_t gplane = b->masks ? (size_t)b->mask_h * b->mask_w : 0;
    const size_t nt = b->nt > 0 ? (size_t)b->nt : 1;
    yc_plot_box *boxes = yc_malloc(nt * sizeof *boxes, "batch plot");
    yc_plot_mask *masks = yc_calloc(nt, sizeof *masks, "batch plot");
    uint8_t *gt = yc_malloc(nt * (gplane ? gplane : 1), "batch plot");
    int st = YC_OK;
    if (!boxes || !masks || !gt) {
        st = YC_ENOMEM;
        goto done;
    }
    int nb = 0, seen[16] = {0};
    for (int t = 0; t < b->nt; t++) {
        const float *r = b->targets + (size_t)t * 6;
        const int i = (int)r[0];
        if (!(r[0] >= 0) || i >= n)
            continue;
        boxes[nb] = (yc_plot_box){.image = i, .cls = single_cls ? 0 : (int)r[1], .cx = r[2],
                                  .cy = r[3], .w = r[4], .h = r[5], .conf = -1};
        /* the target's mask: its image's index map == its place there + 1, or its own mask */
        const float *src = NULL;
        const float want = (float)(seen[i] + 1);
        if (gplane && overlap && i < b->mask_n)
            src = b->masks + (size_t)i * gplane;
        else if (gplane && !overlap && t < b->mask_n)
            src = b->masks + (size_t)t * gplane;
        seen[i]++;
        if (src) {
            uint8_t *g = gt + (size_t)nb * gplane;
            for (size_t k = 0; k < gplane; k++)
                g[k] = overlap ? src[k] == want : src[k] > 0.5f;
            masks[nb] = (yc_plot_mask){.m = g, .w = b->mask_w, .h = b->mask_h};
        }
        nb++;
    }
    st = yc_plot_batch_masks(out_path, im, n, boxes, nb, masks, names, nc);
done:
    free(boxes);
    free(masks);
    free(gt);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * labels.jpg
 * ---------------------------------------------------------------------------------------------- */

/* A 50 x 50 histogram of (a, b) pairs in [0, 1]^2, coloured with Blues up to the 90th percentile of
 * the non-empty bins (seaborn's pmax=0.9). */
static int hist2d(yc_canvas *c, const panel *p, const float *labels, int n, int ca, int cb)
{
    enum { BINS = 50 };
    unsigned *cnt = yc_calloc(BINS * BINS, sizeof *cnt, "label histogram");
    if (!cnt)
        return YC_ENOMEM;
    for (int i = 0; i < n; i++) {
        double a = labels[5 * i + ca], b = labels[5 * i + cb];
        if (!(a >= 0 && a <= 1 && b >= 0 && b <= 1))
            continue;
        int ia = a >= 1 ? BINS - 1 : (int)(a * BINS), ib = b >= 1 ? BINS - 1 : (int)(b * BINS);
        cnt[ib * BINS + ia]++;
    }
    unsigned sorted[BINS * BINS];
    int m = 0;
    for (int i = 0; i < BINS * BINS; i++)
        if (cnt[i])
            sorted[m++] = cnt[i];
    for (int i = 1; i < m; i++) {
        unsigned v = sorted[i];
        int j = i;
        for (; j > 0 && sorted[j - 1] > v; j--)
            sorted[j] = sorted[j - 1];
        sorted[j] = v;
    }
    double vmax = m ? sorted[(int)floor(0.9 * (m - 1))] : 1;
    if (vmax < 1)
        vmax = 1;
    for (int ib = 0; ib < BINS; ib++) {
        for (int ia = 0; ia < BINS; ia++) {
            unsigned v = cnt[ib * BINS + ia];
            if (!v)
                continue;
            int x0 = (int)map_x(p, (double)ia / BINS), x1 = (int)map_x(p, (double)(ia + 1) / BINS);
            int y1 = (int)map_y(p, (double)ib / BINS), y0 = (int)map_y(p, (double)(ib + 1) / BINS);
            yc_draw_fill_rect(c, x0, y0, x1 - 1, y1 - 1, cmap_blues(0.25 + 0.75 * fmin(v / vmax, 1)));
        }
    }
    free(cnt);
    return YC_OK;
}

int yc_plot_labels(const char *out_path, const float *labels, int n, const char *const *names,
                   int nc)
{
    if (n < 0 || nc < 0)
        return yc_error_status(YC_EFORMAT, "%s: bad label statistics input", out_path);
    int ncls = nc;
    for (int i = 0; i < n; i++) {
        int k = label_class(labels[5 * i]);
        if (k + 1 > ncls)
            ncls = k + 1;
    }
    if (ncls < 1)
        ncls = 1;
    if (ncls > 10000)
        return yc_error_status(YC_EFORMAT, "%s: class ids up to %d are too many to plot", out_path,
                               ncls - 1);
    yc_canvas c;
    int st = yc_canvas_init(&c, YC_LABELS_PLOT_SIZE, YC_LABELS_PLOT_SIZE, WHITE);
    if (st)
        return yc_error_context(st, "%s", out_path);
    const int S = 2;
    long *hist = yc_calloc((size_t)ncls, sizeof *hist, "class histogram");
    if (!hist) {
        yc_canvas_free(&c);
        return YC_ENOMEM;
    }
    long hmax = 1;
    for (int i = 0; i < n; i++) {
        int k = label_class(labels[5 * i]);
        if (k >= 0 && ++hist[k] > hmax)
            hmax = hist[k];
    }

    /* instances per class, names written upwards under the bars */
    panel p0 = {90, 40, 390, 330, -0.5, ncls - 0.5, 0, hmax * 1.05};
    for (int k = 0; k < ncls; k++) {
        if (!hist[k])
            continue;
        int x0 = (int)map_x(&p0, k - 0.4), x1 = (int)map_x(&p0, k + 0.4);
        int y0 = (int)map_y(&p0, (double)hist[k]);
        yc_draw_fill_rect(&c, x0, y0, x1 > x0 ? x1 - 1 : x0, p0.y + p0.h - 1, yc_color_class(k));
    }
    {
        double t[32];
        int dec;
        int m = nice_ticks(p0.y0, p0.y1, 5, t, 32, &dec);
        char buf[64];
        for (int i = 0; i < m; i++) {
            int yy = (int)map_y(&p0, t[i]);
            yc_draw_fill_rect(&c, p0.x - 5, yy, p0.x - 1, yy, BLACK);
            snprintf(buf, sizeof buf, "%.0f", t[i]);
            yc_draw_text(&c, p0.x - 9 - yc_text_width(buf, S), yy - yc_text_height(S) / 2, buf, S,
                         BLACK);
        }
        yc_draw_box(&c, p0.x - 1, p0.y - 1, p0.x + p0.w, p0.y + p0.h, 1, BLACK);
        yc_draw_text_up(&c, 8, p0.y + (p0.h + yc_text_width("instances", S)) / 2, "instances", S,
                        BLACK);
        if (ncls < 30) {
            int s = ncls <= 12 ? S : 1;
            int room = 110 / (6 * s);
            for (int k = 0; k < ncls; k++) {
                char nb[32], txt[64];
                snprintf(txt, sizeof txt, "%.*s", room, class_name(k, names, nc, nb, sizeof nb));
                int xx = (int)map_x(&p0, k) - yc_text_height(s) / 2;
                yc_draw_text_up(&c, xx, p0.y + p0.h + 6 + yc_text_width(txt, s), txt, s, BLACK);
            }
        } else {
            yc_draw_text(&c, p0.x + (p0.w - yc_text_width("classes", S)) / 2, p0.y + p0.h + 12,
                         "classes", S, BLACK);
        }
    }
    free(hist);

    /* up to 1000 boxes drawn centred, in class colours */
    panel p1 = {560, 40, 400, 400, 0, 1, 0, 1};
    for (int i = 0; i < n && i < 1000; i++) {
        double w = labels[5 * i + 3], h = labels[5 * i + 4];
        if (!(w >= 0 && w <= 1 && h >= 0 && h <= 1))
            continue;
        int x0 = (int)map_x(&p1, 0.5 - w / 2), x1 = (int)map_x(&p1, 0.5 + w / 2);
        int y0 = (int)map_y(&p1, 0.5 + h / 2), y1 = (int)map_y(&p1, 0.5 - h / 2);
        yc_draw_box(&c, x0, y0, x1, y1, 1, yc_color_class(label_class(labels[5 * i])));
    }

    /* box centres and sizes */
    panel p2 = {90, 540, 390, 390, 0, 1, 0, 1};
    panel p3 = {590, 540, 390, 390, 0, 1, 0, 1};
    st = hist2d(&c, &p2, labels, n, 1, 2);
    if (!st)
        st = hist2d(&c, &p3, labels, n, 3, 4);
    if (st) {
        yc_canvas_free(&c);
        return yc_error_context(st, "%s", out_path);
    }
    draw_axes(&c, &p2, NULL, "x", "y", S);
    draw_axes(&c, &p3, NULL, "width", "height", S);

    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * results.png
 * ---------------------------------------------------------------------------------------------- */

/* scipy.ndimage.gaussian_filter1d(y, sigma) with mode 'reflect' and truncate 4. */
static void gaussian_smooth(const double *y, double *out, int n, double sigma)
{
    int rad = (int)(4 * sigma + 0.5);
    double wts[64];
    double sum = 0;
    for (int k = -rad; k <= rad; k++)
        sum += wts[k + rad] = exp(-0.5 * k * k / (sigma * sigma));
    for (int i = 0; i < n; i++) {
        double acc = 0;
        for (int k = -rad; k <= rad; k++) {
            long m = ((long)(i + k) % (2L * n) + 2L * n) % (2L * n);
            if (m >= n)
                m = 2L * n - 1 - m;
            acc += wts[k + rad] * y[m];
        }
        out[i] = acc / sum;
    }
}

/* Column col of r's rows into y (r.n_rows values) and the ranges of the points (x[i], y[i])
 * where both are finite (+inf and -inf, lo above hi, where none is). */
static void results_column(const yc_results *r, int col, const double *x, double *y,
                           double *xlo, double *xhi, double *ylo, double *yhi)
{
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (int i = 0; i < r->n_rows; i++) {
        y[i] = r->values[(size_t)i * r->n_cols + col];
        if (isfinite(y[i]) && isfinite(x[i])) {
            *ylo = fmin(*ylo, y[i]);
            *yhi = fmax(*yhi, y[i]);
            *xlo = fmin(*xlo, x[i]);
            *xhi = fmax(*xhi, x[i]);
        }
    }
}

int yc_plot_results(const char *csv_path, const char *out_path)
{
    static const char *const cols[10] = {
        "train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/precision",
        "metrics/recall", "val/box_loss",   "val/obj_loss",   "val/cls_loss",
        "metrics/mAP_0.5", "metrics/mAP_0.5:0.95",
    };
    yc_results r;
    int st = yc_results_read(csv_path, &r);
    if (st)
        return st;
    /* a segmentation run's file (segment/train.py's columns): plot_results_with_masks */
    if (yc_results_column(&r, "train/seg_loss") >= 0) {
        yc_results_free(&r);
        return yc_plot_results_seg(csv_path, out_path);
    }
    if (r.n_rows < 1) {
        yc_results_free(&r);
        return yc_error_status(YC_EFORMAT, "%s: no epochs (only a header line)", csv_path);
    }
    int idx[10];
    for (int k = 0; k < 10; k++) {
        idx[k] = yc_results_column(&r, cols[k]);
        if (idx[k] < 0) {
            yc_results_free(&r);
            return yc_error_status(YC_EFORMAT, "%s:1: no column '%s' in the header", csv_path,
                                   cols[k]);
        }
    }
    int ex = yc_results_column(&r, "epoch");
    if (ex < 0)
        ex = 0;
    int n = r.n_rows;
    double *x = yc_malloc(sizeof(double) * 4 * n, "results plot");
    if (!x) {
        yc_results_free(&r);
        return YC_ENOMEM;
    }
    double *y = x + n, *sm = y + n, *px = sm + n;
    yc_canvas c;
    st = yc_canvas_init(&c, YC_RESULTS_PLOT_W, YC_RESULTS_PLOT_H, WHITE);
    if (st) {
        free(x);
        yc_results_free(&r);
        return yc_error_context(st, "%s", out_path);
    }
    const yc_rgb line_col = tab10(0), smooth_col = tab10(1);
    const int cw = YC_RESULTS_PLOT_W / 5, ch = YC_RESULTS_PLOT_H / 2;
    for (int i = 0; i < n; i++)
        x[i] = r.values[(size_t)i * r.n_cols + ex];
    for (int k = 0; k < 10; k++) {
        double xlo, xhi, ylo, yhi;
        results_column(&r, idx[k], x, y, &xlo, &xhi, &ylo, &yhi);
        gaussian_smooth(y, sm, n, 3.0);
        panel p = {(k % 5) * cw + 95, (k / 5) * ch + 50, cw - 120, ch - 100, 0, 1, 0, 1};
        auto_range(xlo, xhi, &p.x0, &p.x1);
        auto_range(ylo, yhi, &p.y0, &p.y1);
        draw_axes(&c, &p, cols[k], NULL, NULL, 2);
        for (int i = 0; i < n; i++) {
            px[i] = map_x(&p, x[i]);
            y[i] = isfinite(y[i]) ? map_y(&p, y[i]) : NAN;
            sm[i] = isfinite(sm[i]) ? map_y(&p, sm[i]) : NAN;
        }
        yc_draw_polyline(&c, px, y, n, 2, 0, line_col);
        for (int i = 0; i < n; i++)
            yc_draw_disc(&c, px[i], y[i], 4, line_col);
        yc_draw_polyline(&c, px, sm, n, 2, 3, smooth_col);
        if (k == 1) {
            int lx = p.x + p.w - 140, ly = p.y + 12;
            yc_draw_fill_rect(&c, lx - 8, ly - 8, lx + 132, ly + 44, WHITE);
            yc_draw_box(&c, lx - 8, ly - 8, lx + 132, ly + 44, 1, (yc_rgb){200, 200, 200});
            yc_draw_line(&c, lx, ly + 7, lx + 30, ly + 7, 2, line_col);
            yc_draw_disc(&c, lx + 15, ly + 7, 4, line_col);
            yc_draw_text(&c, lx + 40, ly, "results", 2, BLACK);
            double dx[2] = {lx, lx + 30}, dy[2] = {ly + 30, ly + 30};
            yc_draw_polyline(&c, dx, dy, 2, 2, 3, smooth_col);
            yc_draw_text(&c, lx + 40, ly + 23, "smooth", 2, BLACK);
        }
    }
    free(x);
    yc_results_free(&r);
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* Python's str(round(v, 5)) for the titles of plot_results_with_masks (fixed notation between
 * 1e-4 and 1e16, trailing zeros dropped but one decimal kept; %g outside). */
static void round5_text(double v, char *buf, size_t len)
{
    double r = round(v * 1e5) / 1e5;
    if (!isfinite(r) || (r != 0 && (fabs(r) < 1e-4 || fabs(r) >= 1e16))) {
        snprintf(buf, len, "%g", isfinite(r) ? r : v);
        return;
    }
    snprintf(buf, len, "%.5f", r == 0 ? 0.0 : r);
    char *e = buf + strlen(buf) - 1;
    while (e > buf && *e == '0' && e[-1] != '.')
        *e-- = 0;
}

int yc_plot_results_seg(const char *csv_path, const char *out_path)
{
    /* plot_results_with_masks' panels: data columns [1, 2, 3, 4, 5, 6, 9, 10, 13, 14, 15, 16, 7,
     * 8, 11, 12] of segment/train.py's results.csv, by name */
    static const char *const cols[16] = {
        "train/box_loss",          "train/seg_loss",         "train/obj_loss",
        "train/cls_loss",          "metrics/precision(B)",   "metrics/recall(B)",
        "metrics/precision(M)",    "metrics/recall(M)",      "val/box_loss",
        "val/seg_loss",            "val/obj_loss",           "val/cls_loss",
        "metrics/mAP_0.5(B)",      "metrics/mAP_0.5:0.95(B)", "metrics/mAP_0.5(M)",
        "metrics/mAP_0.5:0.95(M)",
    };
    yc_results r;
    int st = yc_results_read(csv_path, &r);
    if (st)
        return st;
    if (r.n_rows < 1) {
        yc_results_free(&r);
        return yc_error_status(YC_EFORMAT, "%s: no epochs (only a header line)", csv_path);
    }
    int idx[16];
    for (int k = 0; k < 16; k++) {
        idx[k] = yc_results_column(&r, cols[k]);
        if (idx[k] < 0) {
            yc_results_free(&r);
            return yc_error_status(YC_EFORMAT, "%s:1: no column '%s' in the header (not "
                                   "segment/train.py's results.csv?)", csv_path, cols[k]);
        }
    }
    int ex = yc_results_column(&r, "epoch");
    if (ex < 0)
        ex = 0;
    const int n = r.n_rows;
    /* the best row: argmax(0.9 * mAP(B) + 0.1 * mAP50(B) + 0.9 * mAP(M) + 0.1 * mAP50(M)),
     * numpy's first maximum */
    int best = 0;
    double best_v = -INFINITY;
    for (int i = 0; i < n; i++) {
        const double *row = r.values + (size_t)i * r.n_cols;
        double v = 0.9 * row[idx[13]] + 0.1 * row[idx[12]] + 0.9 * row[idx[15]] +
                   0.1 * row[idx[14]];
        if (v > best_v) {
            best_v = v;
            best = i;
        }
    }
    double *x = yc_malloc(sizeof(double) * 3 * n, "results plot");
    if (!x) {
        yc_results_free(&r);
        return YC_ENOMEM;
    }
    double *y = x + n, *px = y + n;
    yc_canvas c;
    st = yc_canvas_init(&c, YC_RESULTS_PLOT_SEG_W, YC_RESULTS_PLOT_SEG_H, WHITE);
    if (st) {
        free(x);
        yc_results_free(&r);
        return yc_error_context(st, "%s", out_path);
    }
    const yc_rgb line_col = tab10(0), best_col = {255, 0, 0};
    const int cw = YC_RESULTS_PLOT_SEG_W / 8, ch = YC_RESULTS_PLOT_SEG_H / 2;
    for (int i = 0; i < n; i++)
        x[i] = r.values[(size_t)i * r.n_cols + ex];
    for (int k = 0; k < 16; k++) {
        double xlo, xhi, ylo, yhi;
        results_column(&r, idx[k], x, y, &xlo, &xhi, &ylo, &yhi);
        /* the best marker is drawn at x = its row index, as ax.scatter(index, y[index]) */
        xlo = fmin(xlo, best);
        xhi = fmax(xhi, best);
        double yb = y[best];
        panel p = {(k % 8) * cw + 95, (k / 8) * ch + 90, cw - 120, ch - 150, 0, 1, 0, 1};
        auto_range(xlo, xhi, &p.x0, &p.x1);
        auto_range(ylo, yhi, &p.y0, &p.y1);
        draw_axes(&c, &p, NULL, NULL, NULL, 2);
        /* the title: the column name, then the best row's value rounded to 5 decimals */
        char val[48];
        round5_text(yb, val, sizeof val);
        int ts = 2;
        while (ts > 1 && yc_text_width(cols[k], ts) > p.w + 40)
            ts--;
        yc_draw_text(&c, p.x + (p.w - yc_text_width(cols[k], ts)) / 2,
                     p.y - 2 * yc_text_height(ts) - 16, cols[k], ts, BLACK);
        yc_draw_text(&c, p.x + (p.w - yc_text_width(val, ts)) / 2, p.y - yc_text_height(ts) - 8,
                     val, ts, BLACK);
        for (int i = 0; i < n; i++) {
            px[i] = map_x(&p, x[i]);
            y[i] = isfinite(y[i]) ? map_y(&p, y[i]) : NAN;
        }
        yc_draw_polyline(&c, px, y, n, 3, 0, line_col);
        for (int i = 0; i < n; i++)
            yc_draw_disc(&c, px[i], y[i], 2, line_col);
        if (isfinite(yb))
            yc_draw_disc(&c, map_x(&p, best), map_y(&p, yb), 7, best_col);
        if (k == 1) {
            char lb[32];
            snprintf(lb, sizeof lb, "best:%d", best);
            int lx = p.x + p.w - 150, ly = p.y + 12;
            yc_draw_fill_rect(&c, lx - 8, ly - 8, lx + 142, ly + 44, WHITE);
            yc_draw_box(&c, lx - 8, ly - 8, lx + 142, ly + 44, 1, (yc_rgb){200, 200, 200});
            yc_draw_line(&c, lx, ly + 7, lx + 30, ly + 7, 3, line_col);
            yc_draw_text(&c, lx + 40, ly, "results", 2, BLACK);
            yc_draw_disc(&c, lx + 15, ly + 30, 7, best_col);
            yc_draw_text(&c, lx + 40, ly + 23, lb, 2, BLACK);
        }
    }
    free(x);
    yc_results_free(&r);
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * PR / F1 / P / R curves
 * ---------------------------------------------------------------------------------------------- */

int yc_plot_curves(const char *out_path, const yc_curve_plot *p)
{
    if (p->n_points < 1 || !p->x || (p->n_series > 0 && !p->y) || p->n_series < 0)
        return yc_error_status(YC_EFORMAT, "%s: no curve points to plot", out_path);
    int n = p->n_points;
    double *bx = yc_malloc(sizeof(double) * 2 * n, "curve plot");
    if (!bx)
        return YC_ENOMEM;
    double *by = bx + n;
    yc_canvas c;
    int st = yc_canvas_init(&c, YC_CURVE_PLOT_W, YC_CURVE_PLOT_H, WHITE);
    if (st) {
        free(bx);
        return yc_error_context(st, "%s", out_path);
    }
    panel pl = {110, 60, 760, 740, p->xmin, p->xmax, p->ymin, p->ymax};
    if (!(pl.x0 < pl.x1)) {
        pl.x0 = 0;
        pl.x1 = 1;
    }
    if (!(pl.y0 < pl.y1)) {
        pl.y0 = 0;
        pl.y1 = 1;
    }
    draw_axes(&c, &pl, p->title, p->xlabel, p->ylabel, 2);
    bool legend = p->series_labels && p->n_series < 21;
    const yc_rgb grey = {128, 128, 128};
    int lx = pl.x + pl.w + 30, ly = pl.y, row = 24;
    for (int s = 0; s < p->n_series + (p->mean ? 1 : 0); s++) {
        const float *ys = s < p->n_series ? p->y + (size_t)s * n : p->mean;
        for (int i = 0; i < n; i++) {
            double xv = fmin(fmax(p->x[i], pl.x0), pl.x1), yv = fmin(fmax(ys[i], pl.y0), pl.y1);
            bx[i] = isfinite(p->x[i]) ? map_x(&pl, xv) : NAN;
            by[i] = isfinite(ys[i]) ? map_y(&pl, yv) : NAN;
        }
        bool is_mean = s == p->n_series;
        yc_rgb col = is_mean ? (yc_rgb){0, 0, 255} : p->n_series < 21 ? tab10(s) : grey;
        yc_draw_polyline(&c, bx, by, n, is_mean ? 4 : 1, 0, col);
        const char *text = is_mean ? p->mean_label : legend ? p->series_labels[s] : NULL;
        if (text && ly + row <= YC_CURVE_PLOT_H) {
            yc_draw_line(&c, lx, ly + 7, lx + 30, ly + 7, is_mean ? 4 : 2, col);
            char buf[40];
            snprintf(buf, sizeof buf, "%s", text);
            yc_draw_text(&c, lx + 40, ly, buf, 2, BLACK);
            ly += row;
        }
    }
    free(bx);
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Confusion matrix
 * ---------------------------------------------------------------------------------------------- */

int yc_plot_confusion(const char *out_path, const float *matrix, int nc, const char *const *names,
                      bool normalize)
{
    if (nc < 1 || nc > 1000)
        return yc_error_status(YC_EFORMAT, "%s: %d classes cannot be plotted", out_path, nc);
    int m = nc + 1;
    double *v = yc_malloc(sizeof(double) * m * m, "confusion matrix");
    if (!v)
        return YC_ENOMEM;
    double vmax = 0;
    for (int j = 0; j < m; j++) {
        double col = 0;
        for (int i = 0; i < m; i++)
            col += matrix[i * m + j];
        for (int i = 0; i < m; i++) {
            double e = normalize ? matrix[i * m + j] / (col + 1e-9) : matrix[i * m + j];
            v[i * m + j] = e < 0.005 ? NAN : e;
            if (e >= 0.005 && e > vmax)
                vmax = e;
        }
    }
    if (normalize || vmax <= 0)
        vmax = 1;
    int cs = 800 / m;
    cs = cs < 6 ? 6 : cs > 60 ? 60 : cs;
    int ls = cs >= 20 ? 2 : 1;
    int maxch = 14;
    int lab = 0;
    if (names && nc < 30) {
        for (int k = 0; k < m; k++) {
            char nb[32], txt[64];
            const char *nm = k < nc ? class_name(k, names, nc, nb, sizeof nb) : "background";
            snprintf(txt, sizeof txt, "%.*s", maxch, nm);
            int tw = yc_text_width(txt, ls);
            lab = tw > lab ? tw : lab;
        }
        lab += 10;
    }
    int left = 50 + lab, top = 70, bottom = 60 + lab, right = 160;
    yc_canvas c;
    int st = yc_canvas_init(&c, left + m * cs + right, top + m * cs + bottom, WHITE);
    if (st) {
        free(v);
        return yc_error_context(st, "%s", out_path);
    }
    int as = nc < 30 ? (cs >= 56 ? 2 : cs >= 30 ? 1 : 0) : 0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            double e = v[i * m + j];
            if (!isfinite(e))
                continue;
            double t = e / vmax;
            int x0 = left + j * cs, y0 = top + i * cs;
            yc_draw_fill_rect(&c, x0, y0, x0 + cs - 1, y0 + cs - 1, cmap_blues(t));
            if (as) {
                char buf[32];
                if (normalize)
                    snprintf(buf, sizeof buf, "%.2f", e);
                else
                    snprintf(buf, sizeof buf, "%.0f", e);
                int tw = yc_text_width(buf, as);
                if (tw <= cs - 2)
                    yc_draw_text(&c, x0 + (cs - tw) / 2, y0 + (cs - yc_text_height(as)) / 2, buf,
                                 as, t > 0.5 ? WHITE : BLACK);
            }
        }
    }
    yc_draw_box(&c, left - 1, top - 1, left + m * cs, top + m * cs, 1, BLACK);
    if (lab) {
        for (int k = 0; k < m; k++) {
            char nb[32], txt[64];
            const char *nm = k < nc ? class_name(k, names, nc, nb, sizeof nb) : "background";
            snprintf(txt, sizeof txt, "%.*s", maxch, nm);
            int tw = yc_text_width(txt, ls), th = yc_text_height(ls);
            yc_draw_text(&c, left - 8 - tw, top + k * cs + (cs - th) / 2, txt, ls, BLACK);
            yc_draw_text_up(&c, left + k * cs + (cs - th) / 2, top + m * cs + 8 + tw, txt, ls,
                            BLACK);
        }
    }
    const char *title = "Confusion Matrix";
    yc_draw_text(&c, left + (m * cs - yc_text_width(title, 3)) / 2, 20, title, 3, BLACK);
    yc_draw_text(&c, left + (m * cs - yc_text_width("True", 2)) / 2, top + m * cs + lab + 25,
                 "True", 2, BLACK);
    yc_draw_text_up(&c, 14, top + (m * cs + yc_text_width("Predicted", 2)) / 2, "Predicted", 2,
                    BLACK);
    /* colour bar */
    int bx = left + m * cs + 30, bh = m * cs;
    for (int yy = 0; yy < bh; yy++)
        yc_draw_fill_rect(&c, bx, top + yy, bx + 24, top + yy, cmap_blues(1.0 - (double)yy / (bh - 1 > 0 ? bh - 1 : 1)));
    yc_draw_box(&c, bx - 1, top - 1, bx + 25, top + bh, 1, BLACK);
    panel pb = {bx, top, 25, bh, 0, 1, 0, vmax};
    double t[32];
    int dec;
    int nt = nice_ticks(0, vmax, 5, t, 32, &dec);
    for (int i = 0; i < nt; i++) {
        char buf[32];
        int yy = (int)map_y(&pb, t[i]);
        yc_draw_fill_rect(&c, bx + 26, yy, bx + 30, yy, BLACK);
        snprintf(buf, sizeof buf, "%.*f", dec, t[i]);
        yc_draw_text(&c, bx + 34, yy - yc_text_height(2) / 2, buf, 2, BLACK);
    }
    free(v);
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}
