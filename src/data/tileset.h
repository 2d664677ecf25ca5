/* The tile samples of a dataset for training and validation on large images (issue 7,
 * `yolocl train --tile SIZE`).
 *
 * Every image of a scanned dataset is cut into the windows of yc_tile_grid (tile.h): images larger
 * than the tile on some side give several SIZE x SIZE windows (a side shorter than the tile keeps
 * its length), an image no larger than the tile on both sides gives one window, the whole image,
 * which is letterboxed as usual.  A tile sample is one window of one image with the image's labels
 * clipped to it (yc_tile_clip_labels with min_area).  Tiles are numbered image by image (dataset
 * order), each image's windows in grid order (rows top to bottom, left to right within a row).
 *
 * The tile set also carries a view of the tiles as a dataset (`view`): one yc_sample per tile,
 * with the image's path, the window's size and the clipped labels of the window without jitter,
 * so that everything that reads a dataset (AutoAnchor, label plots, rectangular validation
 * shapes, validation statistics) sees tiles.  Pure computation over the scanned dataset: no pixel
 * is read here.  Library functions return yc_status codes with a message (log.h). */
#ifndef YC_TILESET_H
#define YC_TILESET_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "dataset.h"
#include "tile.h"

/* Default overlap and minimum kept area of tiling (SAHI's overlap ratio and min_area_ratio). */
#define YC_TILE_OVERLAP 0.2
#define YC_TILE_MIN_AREA 0.1

/* How images are cut into tiles. */
typedef struct yc_tile_options {
    /* window side in pixels; 0 = no tiling (whole images, as YOLOv5) */
    int tile;
    /* fraction of a window shared with its neighbour, in [0, 1) (YC_TILE_OVERLAP) */
    double overlap;
    /* a box is kept in a window when at least this fraction of its area lies inside, in [0, 1]
     * (YC_TILE_MIN_AREA) */
    double min_area;
} yc_tile_options;

/* tile 0 (off), overlap YC_TILE_OVERLAP, min_area YC_TILE_MIN_AREA. */
void yc_tile_options_default(yc_tile_options *o);

/* YC_EUSAGE naming the value when tile is not 0 and outside [32, 16384], overlap outside [0, 1)
 * or min_area outside [0, 1]; `what` prefixes the message (e.g. "--tile" or "data.yaml"). */
int yc_tile_options_check(const yc_tile_options *o, const char *what);

/* One tile: a window of an image of the dataset. */
typedef struct yc_tile_ref {
    /* index of the image in the dataset */
    uint32_t sample;
    /* the window on the grid, in whole-image pixels */
    yc_tile_window win;
} yc_tile_ref;

/* The tiles of a dataset. */
typedef struct yc_tileset {
    /* the dataset cut into tiles (not owned; it must outlive the tile set) */
    const yc_dataset *ds;
    /* the options the tiles were made with (tile >= 1) */
    yc_tile_options opt;
    /* step between window origins, yc_tile_stride(tile, overlap) (the jitter's range) */
    int stride;
    /* number of tiles (>= ds->n: every image gives at least one) */
    size_t n;
    /* the tiles, image by image in dataset order, grid order within an image */
    yc_tile_ref *tiles;
    /* per image: index of its first tile; ds->n + 1 entries (first[ds->n] == n), so image i has
     * first[i + 1] - first[i] tiles */
    size_t *first;
    /* images larger than the tile on at least one side (cut into windows) */
    size_t n_tiled;
    /* the tiles as a dataset: sample t is tile t (image and label paths of its image, w and h of
     * its window, its clipped boxes without jitter), class_counts over the clipped boxes, nc of
     * the dataset, n_listed = n, n_empty = tiles without boxes, no notes, no cache; the paths
     * point into ds's pool.  Free it only through yc_tileset_free. */
    yc_dataset view;
} yc_tileset;

/* Cuts every image of ds into tiles with o (o->tile >= 1; checked as yc_tile_options_check).
 * YC_EUSAGE for bad options, YC_ENOMEM, or YC_OK; on error *out is empty. */
int yc_tileset_make(const yc_dataset *ds, const yc_tile_options *o, yc_tileset *out);
/* Frees the tiles and the view (the dataset is not touched); an emptied tile set may be freed
 * again. */
void yc_tileset_free(yc_tileset *ts);

/* Images larger than a tile listed one per line by yc_tileset_report: all of them up to
 * YC_TILE_REPORT_ALL, else the first YC_TILE_REPORT_FIRST and a summary of the others. */
#define YC_TILE_REPORT_ALL 50
#define YC_TILE_REPORT_FIRST 20

/* Prints what the scan found about tiles (yc_info):
 *   "<prefix>tiles of 640 px (overlap 0.2, min area 0.1): 3488 tiles from 3 images, 2 of them
 *    larger than a tile"
 * then one line per image larger than a tile, "<prefix>  PATH: 30000x30000, 3481 tiles" (width x
 * height; beyond YC_TILE_REPORT_ALL such images, the first YC_TILE_REPORT_FIRST, the others with
 * yc_debug and one "... and N more" line), and one summary line for the images no larger than a
 * tile (one tile each, letterboxed whole). */
void yc_tileset_report(const yc_tileset *ts, const char *prefix);

/* The window of tile t moved by yc_tile_jitter with the uniform draws u, v in [0, 1) (up to
 * stride / 2 pixels each way, kept inside the image). */
yc_tile_window yc_tileset_jitter(const yc_tileset *ts, size_t t, double u, double v);

/* The labels of tile t's image clipped to `win` (a window of that image, e.g. the tile's window or
 * its jittered copy) with the tile set's min_area, as rows (class, x, y, w, h) normalised to the
 * window (xywhn), appended to out in the order of the label file. */
int yc_tileset_labels(const yc_tileset *ts, size_t t, yc_tile_window win, yc_labels *out);

#endif
