/* The tile samples of a dataset (see tileset.h). */
#include "tileset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void yc_tile_options_default(yc_tile_options *o)
{
    o->tile = 0;
    o->overlap = YC_TILE_OVERLAP;
    o->min_area = YC_TILE_MIN_AREA;
}

int yc_tile_options_check(const yc_tile_options *o, const char *what)
{
    if (o->tile != 0 && (o->tile < 32 || o->tile > 16384))
        return yc_error_status(YC_EUSAGE, "%s: tile size %d: must be 32 to 16384 pixels", what,
                               o->tile);
    if (!(o->overlap >= 0.0 && o->overlap < 1.0))
        return yc_error_status(YC_EUSAGE, "%s: tile overlap %g: must be in [0, 1)", what,
                               o->overlap);
    if (!(o->min_area >= 0.0 && o->min_area <= 1.0))
        return yc_error_status(YC_EUSAGE, "%s: tile minimum area %g: must be in [0, 1]", what,
                               o->min_area);
    return YC_OK;
}

void yc_tileset_free(yc_tileset *ts)
{
    if (!ts)
        return;
    free(ts->tiles);
    free(ts->first);
    /* the view's paths belong to the dataset: only its own arrays are freed */
    ts->view.strings = NULL;
    ts->view.cache_path = NULL;
    ts->view.notes = NULL;
    yc_dataset_free(&ts->view);
    memset(ts, 0, sizeof *ts);
}

/* Counts the tiles of every image into ts->first and fills ts->tiles. */
static int make_tiles(yc_tileset *ts)
{
    const yc_dataset *ds = ts->ds;
    if (!(ts->first = yc_malloc((ds->n + 1) * sizeof *ts->first, "tiles")))
        return YC_ENOMEM;
    size_t cap = ds->n, n = 0;
    if (!(ts->tiles = yc_malloc(cap * sizeof *ts->tiles, "tiles")))
        return YC_ENOMEM;
    for (size_t i = 0; i < ds->n; i++) {
        const yc_sample *s = &ds->samples[i];
        yc_tile_window *win = NULL;
        size_t nw = 0;
        int st = yc_tile_grid(s->w, s->h, ts->opt.tile, ts->opt.overlap, &win, &nw);
        if (st)
            return yc_error_context(st, "%s", s->image);
        if (n + nw > cap) {
            size_t c = cap * 2 > n + nw ? cap * 2 : n + nw;
            yc_tile_ref *t = yc_realloc(ts->tiles, c * sizeof *t, "tiles");
            if (!t) {
                free(win);
                return YC_ENOMEM;
            }
            ts->tiles = t;
            cap = c;
        }
        ts->first[i] = n;
        for (size_t k = 0; k < nw; k++)
            ts->tiles[n + k] = (yc_tile_ref){.sample = (uint32_t)i, .win = win[k]};
        n += nw;
        if (nw > 1 || s->w > ts->opt.tile || s->h > ts->opt.tile)
            ts->n_tiled++;
        free(win);
    }
    ts->first[ds->n] = n;
    ts->n = n;
    return YC_OK;
}

/* The view: one sample per tile with its clipped boxes (no jitter). */
static int make_view(yc_tileset *ts)
{
    const yc_dataset *ds = ts->ds;
    yc_dataset *v = &ts->view;
    v->n = ts->n;
    v->nc = ds->nc;
    v->n_listed = ts->n;
    v->samples = yc_calloc(ts->n, sizeof *v->samples, "tile view");
    v->class_counts = yc_calloc((size_t)(ds->nc > 0 ? ds->nc : 1), sizeof *v->class_counts,
                                "tile view");
    /* a box lands in at most a few windows; the pool grows when needed */
    size_t cap = ds->n_boxes + 16;
    v->boxes = yc_malloc(cap * sizeof *v->boxes, "tile view");
    if (!v->samples || !v->class_counts || !v->boxes)
        return YC_ENOMEM;
    for (size_t t = 0; t < ts->n; t++) {
        const yc_tile_ref *r = &ts->tiles[t];
        const yc_sample *s = &ds->samples[r->sample];
        if (v->n_boxes + s->n_boxes > cap) {
            size_t c = cap * 2 > v->n_boxes + s->n_boxes ? cap * 2 : v->n_boxes + s->n_boxes;
            yc_box *b = yc_realloc(v->boxes, c * sizeof *b, "tile view");
            if (!b)
                return YC_ENOMEM;
            v->boxes = b;
            cap = c;
        }
        size_t kept = 0;
        int st = yc_tile_clip_labels(yc_dataset_boxes(ds, r->sample), s->n_boxes, s->w, s->h,
                                     r->win, ts->opt.min_area, v->boxes + v->n_boxes, &kept);
        if (st)
            return yc_error_context(st, "%s", s->image);
        v->samples[t] = (yc_sample){.image = s->image, .label = s->label, .w = r->win.w,
                                    .h = r->win.h, .first_box = v->n_boxes,
                                    .n_boxes = (uint32_t)kept};
        for (size_t k = 0; k < kept; k++) {
            int c = v->boxes[v->n_boxes + k].cls;
            if (c >= 0 && c < ds->nc)
                v->class_counts[c]++;
        }
        v->n_boxes += kept;
        if (kept == 0)
            v->n_empty++;
    }
    return YC_OK;
}

int yc_tileset_make(const yc_dataset *ds, const yc_tile_options *o, yc_tileset *out)
{
    memset(out, 0, sizeof *out);
    int st = yc_tile_options_check(o, "tiles");
    if (st)
        return st;
    if (o->tile < 1)
        return yc_error_status(YC_EUSAGE, "tiles: no tile size");
    if (!ds || ds->n == 0)
        return yc_error_status(YC_EUSAGE, "tiles: the dataset has no images");
    out->ds = ds;
    out->opt = *o;
    if ((st = yc_tile_stride(o->tile, o->overlap, &out->stride)))
        return st;
    if (!(st = make_tiles(out)))
        st = make_view(out);
    if (st)
        yc_tileset_free(out);
    return st;
}

void yc_tileset_report(const yc_tileset *ts, const char *prefix)
{
    const char *p = prefix ? prefix : "";
    const yc_dataset *ds = ts->ds;
    yc_info("%stiles of %d px (overlap %g, min area %g): %zu tiles from %zu images, %zu of them "
            "larger than a tile\n",
            p, ts->opt.tile, ts->opt.overlap, ts->opt.min_area, ts->n, ds->n, ts->n_tiled);
    size_t small = 0, listed = 0, more = 0, more_tiles = 0;
    for (size_t i = 0; i < ds->n; i++) {
        const yc_sample *s = &ds->samples[i];
        size_t n = ts->first[i + 1] - ts->first[i];
        if (s->w <= ts->opt.tile && s->h <= ts->opt.tile) {
            small++;
        } else if (ts->n_tiled <= YC_TILE_REPORT_ALL || listed < YC_TILE_REPORT_FIRST) {
            yc_info("%s  %s: %dx%d, %zu tiles\n", p, s->image, s->w, s->h, n);
            listed++;
        } else {
            yc_debug("%s  %s: %dx%d, %zu tiles\n", p, s->image, s->w, s->h, n);
            more++;
            more_tiles += n;
        }
    }
    if (more)
        yc_info("%s  ... and %zu more images larger than a tile, %zu tiles (-v lists them)\n", p,
                more, more_tiles);
    if (small)
        yc_info("%s  %zu images no larger than %d px: one tile each, letterboxed whole\n", p,
                small, ts->opt.tile);
}

yc_tile_window yc_tileset_jitter(const yc_tileset *ts, size_t t, double u, double v)
{
    const yc_tile_ref *r = &ts->tiles[t];
    const yc_sample *s = &ts->ds->samples[r->sample];
    return yc_tile_jitter(r->win, s->w, s->h, ts->stride, u, v);
}

int yc_tileset_labels(const yc_tileset *ts, size_t t, yc_tile_window win, yc_labels *out)
{
    const yc_tile_ref *r = &ts->tiles[t];
    const yc_sample *s = &ts->ds->samples[r->sample];
    const yc_box *b = yc_dataset_boxes(ts->ds, r->sample);
    int st = yc_labels_reserve(out, out->n + (int)s->n_boxes);
    /* box by box, so that nothing is allocated past the reserve */
    for (uint32_t k = 0; !st && k < s->n_boxes; k++) {
        yc_box c;
        size_t kept = 0;
        st = yc_tile_clip_labels(b + k, 1, s->w, s->h, win, ts->opt.min_area, &c, &kept);
        if (!st && kept)
            st = yc_labels_push(out, (float)c.cls, c.x, c.y, c.w, c.h);
    }
    return st ? yc_error_context(st, "%s", s->image) : YC_OK;
}
