/* Windows of dataset images for tiled training (issue 7): one reader per loader thread, keeping
 * the last image it read open so that several windows of one image cost one open.
 *
 * The image is opened as sliced detection opens it (yc_slice_source_open, slice_image.h):
 *   - images at most decode_max pixels wide and high are decoded whole, and the whole image is
 *     kept while windows of the same image follow;
 *   - larger images whose libvips loader reads parts on demand (tiled TIFF, BigTIFF, .v) are read
 *     window by window through one libvips region: only the tiles under the window are read;
 *   - other large images (JPEG, PNG, striped TIFF) are read top to bottom through a band of
 *     band_rows rows: windows of the open image whose top row is not above the previous window's
 *     continue the same pass; a window higher up closes the image and decodes it again from its
 *     first row.  Callers read the windows of an image in ascending rows (the loader sorts each
 *     batch's windows by image and row) to keep one pass per image and batch.
 * So the whole image is never decoded into memory when it is larger than decode_max.  The pixel
 * buffers (yc_slice_buffers) are kept from image to image and only grow: host memory is at most
 * 3 x decode_max^2 bytes for decoded images plus 3 x band_rows x width of the widest sequentially
 * read image for the band, plus one region of the window for a random-access image and libvips'
 * line buffers; once they have grown, reading allocates nothing large.
 *
 * Not thread-safe: one reader per thread.  Library functions return yc_status codes with a
 * message (log.h) naming the file. */
#ifndef YC_TILE_READER_H
#define YC_TILE_READER_H

#include <stddef.h>

#include "image.h"
#include "slice_image.h"
#include "tile.h"

/* What a reader did since it was made (for benchmarks and tests). */
typedef struct yc_tile_reader_stats {
    /* images opened (an image read again from its first row counts again) */
    size_t opens;
    /* windows read */
    size_t windows;
    /* opens of a sequentially read image caused by a window above the previous one */
    size_t rewinds;
} yc_tile_reader_stats;

typedef struct yc_tile_reader yc_tile_reader;

/* A reader whose sequential bands hold band_rows rows (the tile size, >= 1) and which decodes
 * images of at most decode_max pixels on both sides whole (YC_SLICE_DECODE_MAX in training).
 * YC_EUSAGE for band_rows < 1 or decode_max < 0, YC_ENOMEM. */
int yc_tile_reader_new(yc_tile_reader **out, int band_rows, int decode_max);
/* Closes the open image and frees the reader (NULL is allowed). */
void yc_tile_reader_free(yc_tile_reader *r);

/* Reads window `win` of the image at `path`, whose upright size the dataset scan found to be
 * img_w x img_h, into out (resized to win.h x win.w, 8-bit RGB as yc_image_decode gives).  The
 * open image is reused when it is `path` (compared as a string) and the window can be read from
 * it; otherwise it is closed and `path` opened.  An image whose size differs from img_w x img_h
 * (changed since the scan) gives YC_EFORMAT; unreadable or corrupt files YC_EIO or YC_EFORMAT
 * naming the file (the reader stays usable); a window outside the image YC_EUSAGE. */
int yc_tile_reader_read(yc_tile_reader *r, const char *path, int img_w, int img_h,
                        yc_tile_window win, yc_image *out);

/* Closes the open image, releasing its pixels (the next read opens again). */
void yc_tile_reader_close(yc_tile_reader *r);

/* How the open image is read, or -1 when none is open. */
int yc_tile_reader_access(const yc_tile_reader *r);

/* Counters since the reader was made. */
yc_tile_reader_stats yc_tile_reader_get_stats(const yc_tile_reader *r);

#endif
