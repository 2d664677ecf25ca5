/* Tiles of huge images (issue 7): the window grid of sliced training and detection, the random
 * shift of a training window, labels clipped to a window, and detections mapped from a window back
 * to the whole image.
 *
 * The grid follows SAHI's get_slice_bboxes (sahi/slicing.py) with square windows: windows start
 * at 0, stride, 2*stride, ... and the last one of a row or column is moved back to end exactly at
 * the image border.  The one deliberate difference is the overlap in pixels, rounded to nearest
 * here where SAHI truncates with int() (see yc_tile_stride).
 *
 * Coordinates are pixels of the whole image with the origin at its top-left corner; a window
 * covers the pixels [x, x + w) x [y, y + h).  Pure computation: no I/O, no global state; library
 * functions return yc_status codes with a message (log.h) and never exit. */
#ifndef YC_TILE_H
#define YC_TILE_H

#include <stddef.h>

#include "dataset.h"

/* One window of an image, in whole-image pixels. */
typedef struct yc_tile_window {
    /* left column, 0 <= x <= img_w - w */
    int x;
    /* top row, 0 <= y <= img_h - h */
    int y;
    /* width: min(tile, img_w) */
    int w;
    /* height: min(tile, img_h) */
    int h;
} yc_tile_window;

/* The step between window origins for a tile of `tile` pixels overlapping its neighbour by the
 * fraction `overlap`: stride = tile - floor(tile * overlap + 0.5) computed in double (overlap
 * pixels rounded to nearest, halves up), at least 1.  SAHI truncates instead
 * (int(overlap * tile)); the two agree whenever the fractional part of tile * overlap is below
 * 0.5, e.g. tile 640 overlap 0.2: 128 overlap pixels, stride 512.  YC_EUSAGE naming the value when
 * tile < 1 or overlap is outside [0, 1) (NaN included). */
int yc_tile_stride(int tile, double overlap, int *stride);

/* The windows of an img_w x img_h image, row by row (y outer, x inner, both ascending), in a heap
 * array that the caller frees; *n gets their number (>= 1).
 * Along each axis of extent E (img_w or img_h) with window size t = min(tile, E) and s =
 * yc_tile_stride(tile, overlap): the starts are 0, s, 2s, ... while start + tile < E, then E - t
 * (which is past every earlier start, so no window repeats).  When E <= tile that axis has a single
 * window at 0 of extent E: an image smaller than a tile gives one window, the whole image, which
 * the caller letterboxes as usual.  Example: 1000 x 600, tile 640, overlap 0.2 (stride 512): x
 * starts 0, 360; y start 0 with h = 600.
 * YC_EUSAGE for img_w or img_h < 1 and for yc_tile_stride's errors, YC_ENOMEM, or YC_OK.  On
 * error *out is NULL and *n is 0. */
int yc_tile_grid(int img_w, int img_h, int tile, double overlap, yc_tile_window **out,
                 size_t *n);

/* A training window shifted at random by up to stride/2 pixels (integer division) each way,
 * then clamped so that it stays inside the img_w x img_h image; the size is unchanged.  u and v
 * are uniform draws in [0, 1) from the caller's generator (yc_rng), for x and y: the shift is
 * floor(u * (2m + 1)) - m with m = stride / 2, i.e. uniform over the integers -m..m.  Values
 * outside [0, 1) are clamped into it (NaN counts as 0).  A window already spanning an axis of the
 * image cannot move along it.  `win` must lie inside the image (as yc_tile_grid's windows do). */
yc_tile_window yc_tile_jitter(yc_tile_window win, int img_w, int img_h, int stride, double u,
                              double v);

/* Labels of a whole img_w x img_h image clipped to a window.
 * in: n boxes (class, centre x, centre y, width, height normalised to the whole image, as the
 * dataset stores them).  For each box, in pixels and double precision, its area A and the area I
 * of its intersection with the window are computed; the box is kept when A > 0, I > 0 and
 * I / A >= min_area (callers use 0.1, as SAHI's min_area_ratio).  A kept box is clipped to the
 * window and written to out in the input order, normalised to the window: centre and size in
 * [0, 1] of win.w and win.h, class unchanged.  So a box straddling two windows appears in both
 * whenever each part holds at least min_area of it; a box only touching the window (I == 0) or of
 * zero area never appears.
 * out holds n boxes (it must not overlap in); *n_out gets the number kept.  YC_EUSAGE for
 * min_area outside [0, 1] (naming it), img_w or img_h < 1, or a window of size < 1; otherwise
 * YC_OK. */
int yc_tile_clip_labels(const yc_box *in, size_t n, int img_w, int img_h, yc_tile_window win,
                        double min_area, yc_box *out, size_t *n_out);

/* Detections of a window mapped to whole-image pixels, in place: the window origin is added to
 * x1, x2 (win.x) and y1, y2 (win.y) of each row.  dets: n rows of `stride` floats (>= 4) with the
 * box (x1, y1, x2, y2) first, in pixels of the window at its own scale, e.g. yc_nms's rows
 * (x1, y1, x2, y2, conf, cls) after yc_scale_boxes to win.w x win.h. */
void yc_tile_dets_to_image(float *dets, size_t n, size_t stride, yc_tile_window win);

#endif
