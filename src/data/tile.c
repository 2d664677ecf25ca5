/* Window grid, training jitter, label clipping and detection mapping of tiled images (tile.h). */
#include "tile.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "log.h"

int yc_tile_stride(int tile, double overlap, int *stride)
{
    if (tile < 1)
        return yc_error_status(YC_EUSAGE, "tile size %d: must be at least 1 pixel", tile);
    if (!(overlap >= 0.0 && overlap < 1.0))
        return yc_error_status(YC_EUSAGE, "tile overlap %g: must be in [0, 1)", overlap);
    double px = floor((double)tile * overlap + 0.5);
    int s = tile - (int)px;
    *stride = s < 1 ? 1 : s;
    return YC_OK;
}

/* Number of windows along an axis of extent e > 0 (see yc_tile_grid): one when e <= tile, else
 * the starts k*stride < e - tile plus the final start e - tile. */
static size_t axis_count(int e, int tile, int stride)
{
    if (e <= tile)
        return 1;
    long long span = (long long)e - tile;
    return (size_t)((span + stride - 1) / stride) + 1;
}

/* Start of window k of `count` along an axis of extent e. */
static int axis_start(int e, int tile, int stride, size_t k, size_t count)
{
    if (e <= tile)
        return 0;
    if (k + 1 == count)
        return e - tile;
    return (int)((long long)k * stride);
}

int yc_tile_grid(int img_w, int img_h, int tile, double overlap, yc_tile_window **out,
                 size_t *n)
{
    *out = NULL;
    *n = 0;
    if (img_w < 1 || img_h < 1)
        return yc_error_status(YC_EUSAGE, "tile grid: invalid image size %dx%d", img_w, img_h);
    int stride;
    int st = yc_tile_stride(tile, overlap, &stride);
    if (st)
        return st;
    size_t nx = axis_count(img_w, tile, stride), ny = axis_count(img_h, tile, stride);
    if (nx > SIZE_MAX / sizeof(yc_tile_window))
        return yc_error_status(YC_ENOMEM, "tile grid: %zu windows per row", nx);
    yc_tile_window *w = yc_calloc(ny, nx * sizeof *w, "tile windows");
    if (!w)
        return YC_ENOMEM;
    const int ww = img_w < tile ? img_w : tile, wh = img_h < tile ? img_h : tile;
    for (size_t j = 0; j < ny; j++)
        for (size_t i = 0; i < nx; i++)
            w[j * nx + i] = (yc_tile_window){
                .x = axis_start(img_w, tile, stride, i, nx),
                .y = axis_start(img_h, tile, stride, j, ny),
                .w = ww,
                .h = wh,
            };
    *out = w;
    *n = nx * ny;
    return YC_OK;
}

/* A uniform integer in -m..m from u in [0, 1) (clamped into it; NaN is 0). */
static int jitter_shift(double u, int m)
{
    if (!(u >= 0.0))
        u = 0.0;
    if (u >= 1.0)
        u = nextafter(1.0, 0.0);
    long long k = (long long)floor(u * (2.0 * m + 1.0));
    if (k > 2LL * m)
        k = 2LL * m;
    return (int)(k - m);
}

/* v + dv clamped to [lo, hi] (lo <= hi), without overflow. */
static int clamp_shift(int v, int dv, int lo, int hi)
{
    long long r = (long long)v + dv;
    return r < lo ? lo : r > hi ? hi : (int)r;
}

yc_tile_window yc_tile_jitter(yc_tile_window win, int img_w, int img_h, int stride, double u,
                              double v)
{
    const int m = stride > 1 ? stride / 2 : 0;
    const int max_x = img_w > win.w ? img_w - win.w : 0;
    const int max_y = img_h > win.h ? img_h - win.h : 0;
    win.x = clamp_shift(win.x, jitter_shift(u, m), 0, max_x);
    win.y = clamp_shift(win.y, jitter_shift(v, m), 0, max_y);
    return win;
}

int yc_tile_clip_labels(const yc_box *in, size_t n, int img_w, int img_h, yc_tile_window win,
                        double min_area, yc_box *out, size_t *n_out)
{
    *n_out = 0;
    if (!(min_area >= 0.0 && min_area <= 1.0))
        return yc_error_status(YC_EUSAGE, "tile label clipping: min_area %g must be in [0, 1]",
                               min_area);
    if (img_w < 1 || img_h < 1 || win.w < 1 || win.h < 1)
        return yc_error_status(YC_EUSAGE,
                               "tile label clipping: invalid image %dx%d or window %dx%d", img_w,
                               img_h, win.w, win.h);
    /* window edges in pixels */
    const double wx1 = win.x, wy1 = win.y, wx2 = wx1 + win.w, wy2 = wy1 + win.h;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const yc_box *b = &in[i];
        /* box corners in pixels */
        const double bw = (double)b->w * img_w, bh = (double)b->h * img_h;
        const double x1 = (double)b->x * img_w - bw / 2, y1 = (double)b->y * img_h - bh / 2;
        const double x2 = x1 + bw, y2 = y1 + bh;
        const double area = bw * bh;
        /* zero, negative or NaN sizes (fmax and fmin below would ignore a NaN corner) */
        if (!(area > 0.0))
            continue;
        /* intersection with the window */
        const double ix1 = fmax(x1, wx1), iy1 = fmax(y1, wy1);
        const double ix2 = fmin(x2, wx2), iy2 = fmin(y2, wy2);
        const double iw = ix2 - ix1, ih = iy2 - iy1;
        if (!(iw > 0.0 && ih > 0.0) || iw * ih / area < min_area)
            continue;
        out[k++] = (yc_box){
            .cls = b->cls,
            .x = (float)(((ix1 + ix2) / 2 - wx1) / win.w),
            .y = (float)(((iy1 + iy2) / 2 - wy1) / win.h),
            .w = (float)(iw / win.w),
            .h = (float)(ih / win.h),
        };
    }
    *n_out = k;
    return YC_OK;
}

void yc_tile_dets_to_image(float *dets, size_t n, size_t stride, yc_tile_window win)
{
    const float ox = (float)win.x, oy = (float)win.y;
    for (size_t i = 0; i < n; i++) {
        float *d = dets + i * stride;
        d[0] += ox;
        d[1] += oy;
        d[2] += ox;
        d[3] += oy;
    }
}
