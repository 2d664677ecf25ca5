/* Windows of dataset images for tiled training (see tile_reader.h). */
#include "tile_reader.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct yc_tile_reader {
    /* rows of a sequential band, and the largest side decoded whole */
    int band_rows, decode_max;
    /* the open image (NULL: none) and its path (heap) */
    yc_slice_source *src;
    char *path;
    /* the pixel buffers lent to every image opened, so that reopening allocates nothing */
    yc_slice_buffers buffers;
    /* top row of the last window read from a sequential image */
    int last_y;
    /* counters */
    yc_tile_reader_stats stats;
};

int yc_tile_reader_new(yc_tile_reader **out, int band_rows, int decode_max)
{
    *out = NULL;
    if (band_rows < 1 || decode_max < 0)
        return yc_error_status(YC_EUSAGE, "tile reader: band of %d rows, decode_max %d",
                               band_rows, decode_max);
    yc_tile_reader *r = yc_calloc(1, sizeof *r, "tile reader");
    if (!r)
        return YC_ENOMEM;
    r->band_rows = band_rows;
    r->decode_max = decode_max;
    *out = r;
    return YC_OK;
}

void yc_tile_reader_close(yc_tile_reader *r)
{
    yc_slice_source_free(r->src);
    r->src = NULL;
    free(r->path);
    r->path = NULL;
    r->last_y = 0;
}

void yc_tile_reader_free(yc_tile_reader *r)
{
    if (!r)
        return;
    yc_tile_reader_close(r);
    yc_slice_buffers_free(&r->buffers);
    free(r);
}

int yc_tile_reader_access(const yc_tile_reader *r)
{
    return r->src ? (int)yc_slice_source_access(r->src) : -1;
}

yc_tile_reader_stats yc_tile_reader_get_stats(const yc_tile_reader *r)
{
    return r->stats;
}

/* True when the open image is `path` and `win` can be read from it without starting over. */
static bool can_reuse(const yc_tile_reader *r, const char *path, yc_tile_window win)
{
    if (!r->src || strcmp(r->path, path) != 0)
        return false;
    return yc_slice_source_access(r->src) != YC_SLICE_SEQUENTIAL || win.y >= r->last_y;
}

int yc_tile_reader_read(yc_tile_reader *r, const char *path, int img_w, int img_h,
                        yc_tile_window win, yc_image *out)
{
    if (!can_reuse(r, path, win)) {
        if (r->src && strcmp(r->path, path) == 0)
            r->stats.rewinds++;
        yc_tile_reader_close(r);
        if (!(r->path = yc_strdup(path, "tile reader")))
            return YC_ENOMEM;
        int st = yc_slice_source_open_lent(&r->src, path, r->decode_max, r->band_rows,
                                           &r->buffers);
        if (st) {
            yc_tile_reader_close(r);
            return st;
        }
        r->stats.opens++;
        int w = yc_slice_source_width(r->src), h = yc_slice_source_height(r->src);
        if (w != img_w || h != img_h) {
            yc_tile_reader_close(r);
            return yc_error_status(YC_EFORMAT, "%s: the image is %dx%d, the label scan found "
                                   "%dx%d (changed since the scan?)",
                                   path, w, h, img_w, img_h);
        }
    }
    int st = yc_slice_source_read(r->src, win, out);
    if (st) {
        /* a failed decode leaves the libvips pipeline in an unknown state */
        yc_tile_reader_close(r);
        return st;
    }
    r->last_y = win.y;
    r->stats.windows++;
    return YC_OK;
}
