/* Pixels of large images for sliced detection (issue 7): windows of an image read through libvips
 * without decoding the whole image, a reduced copy of the whole image for the optional full pass,
 * and the annotated image written strip by strip.
 *
 * How a window is read depends on the image (yc_slice_access):
 *   - images at most decode_max pixels wide and high are decoded whole with yc_image_decode, so
 *     their windows are exactly the pixels normal detection sees;
 *   - larger images whose libvips loader reads parts on demand (VIPS_FOREIGN_PARTIAL: tiled TIFF,
 *     libvips' own .v, ...) are opened with random access and each window is one libvips region:
 *     only the tiles under the window are read and decompressed;
 *   - other large images (JPEG, PNG, striped TIFF...) can only be decoded top to bottom
 *     without a temporary copy of the whole image (JPEG and PNG decode everything to a temporary
 *     on the first random read).  They are read in one top-to-bottom pass
 *     through a single region into a band of rows as tall as the tallest window, so windows must
 *     be read in the order of yc_tile_grid (rows of windows top to bottom); host memory is
 *     band_rows x width x 3 bytes plus libvips' line buffers.
 * In every case pixels are 8-bit RGB converted from the stored samples as yc_image_decode does
 * (image_vips.h) and the EXIF orientation is applied, so coordinates are those of the upright
 * image, as labels are.  A large image of a sequential format with an EXIF rotation (orientation
 * 2-8) cannot be turned upright in one pass: it is opened with random access and libvips decodes
 * it once into a temporary image (in memory up to VIPS_DISC_THRESHOLD, 100 MB by default, on disk
 * under $TMPDIR above); a warning says so.
 *
 * Library functions return yc_status codes with a message (log.h); libvips' errors are reported
 * with the file name and the step that failed. */
#ifndef YC_SLICE_IMAGE_H
#define YC_SLICE_IMAGE_H

#include <stdbool.h>

#include "draw.h"
#include "image.h"
#include "tile.h"

/* Default decode_max: images up to 4096 x 4096 are decoded whole (48 MiB of RGB at most). */
#define YC_SLICE_DECODE_MAX 4096

/* How the windows of a source are read. */
typedef enum yc_slice_access {
    /* the whole image decoded in memory (yc_slice_source_image) */
    YC_SLICE_DECODED,
    /* libvips regions of an image opened with random access, any window in any order */
    YC_SLICE_RANDOM,
    /* one top-to-bottom pass through a band of rows; windows in grid order */
    YC_SLICE_SEQUENTIAL,
} yc_slice_access;

typedef struct yc_slice_source yc_slice_source;

/* Opens `path` for reading windows.  Images whose upright width and height are both at most
 * decode_max are decoded whole (decode_max 0 never decodes whole).  band_rows (>= 1) is the
 * tallest window that will be read (the tile size); it sizes the band of a sequential source.
 * YC_EIO when the file cannot be read, YC_EFORMAT when libvips cannot open or decode it,
 * YC_EUSAGE for band_rows < 1, YC_ENOMEM. */
int yc_slice_source_open(yc_slice_source **out, const char *path, int decode_max, int band_rows);
/* Closes the source (NULL is allowed). */
void yc_slice_source_free(yc_slice_source *s);

/* Pixel buffers a caller lends to the sources it opens one after the other, so that opening the
 * next image reuses the memory of the last: the whole image of a YC_SLICE_DECODED source and the
 * band of a YC_SLICE_SEQUENTIAL one.  Zero-initialise (YC_SLICE_BUFFERS_INIT); free with
 * yc_slice_buffers_free when no open source holds them. */
typedef struct yc_slice_buffers {
    /* the decoded image (its buffer, reused when large enough) */
    yc_image full;
    /* the band's buffer, band_bytes allocated */
    uint8_t *band;
    size_t band_bytes;
} yc_slice_buffers;

#define YC_SLICE_BUFFERS_INIT {YC_IMAGE_INIT, NULL, 0}

/* yc_slice_source_open with the buffers of `lend` (NULL: the source allocates its own): the
 * source takes them while it is open (`lend` is left empty; lend one set to one source at a time)
 * and yc_slice_source_free gives them back, grown when the image needed more. */
int yc_slice_source_open_lent(yc_slice_source **out, const char *path, int decode_max,
                              int band_rows, yc_slice_buffers *lend);
/* Frees the buffers (not while a source holds them). */
void yc_slice_buffers_free(yc_slice_buffers *b);

/* Upright size of the image in pixels. */
int yc_slice_source_width(const yc_slice_source *s);
int yc_slice_source_height(const yc_slice_source *s);
/* How windows are read. */
yc_slice_access yc_slice_source_access(const yc_slice_source *s);
/* The whole decoded image of a YC_SLICE_DECODED source (owned by the source), else NULL. */
const yc_image *yc_slice_source_image(const yc_slice_source *s);

/* Reads the pixels of `win` (inside the image, win.h <= band_rows) into out, resized to win.h x
 * win.w.  A sequential source needs windows whose top rows never decrease (yc_tile_grid's order);
 * an earlier row gives YC_EUSAGE.  Decoding errors give YC_EFORMAT naming the file. */
int yc_slice_source_read(yc_slice_source *s, yc_tile_window win, yc_image *out);

/* The whole upright image of `path` reduced to fit inside max_w x max_h, keeping its aspect ratio
 * and never enlarged, through vips_thumbnail: JPEGs shrink while they decode (DCT scaling), pyramid
 * TIFFs use their nearest level, other formats stream through libvips' resize, so the image is not
 * held at full size.  Pixels in 8-bit RGB as yc_image_decode converts them.  Errors as
 * yc_slice_source_open. */
int yc_slice_read_thumbnail(const char *path, int max_w, int max_h, yc_image *out);

/* Draws on one part of the annotated image: c holds the source pixels of the rectangle whose
 * top-left pixel is (ox, oy) of the whole upright image; coordinates given to yc_draw_label_at
 * with (ox, oy) land where they would on the whole image.  It may be called from several libvips
 * worker threads at once, for different parts. */
typedef void (*yc_slice_draw_fn)(yc_canvas *c, int ox, int oy, void *user);

/* Formats of yc_slice_write_annotated. */
typedef enum yc_annotated_format {
    /* chosen by the suffix of the output path as detect writes images: JPEG quality 95 for .jpg
     * and .jpeg, PNG compression 6 for .png, libvips' defaults for other suffixes */
    YC_ANNOTATED_SUFFIX,
    /* tiled pyramidal TIFF: 256 x 256 tiles, JPEG compression quality 85, every level halved down
     * to one tile, BigTIFF when the full level exceeds 2 GiB of pixels */
    YC_ANNOTATED_PYRAMID,
} yc_annotated_format;

/* True when libvips has a saver for the suffix of `path` (.jpg, .png, .tif, .webp, ...). */
bool yc_slice_can_save(const char *path);

/* Writes the image at src_path with `draw` applied to every part of it, to out_path (written under
 * a temporary name in the same directory, then renamed).  The source is read again as
 * yc_slice_source_open reads a lazily read image, and libvips computes the output strip by strip:
 * each strip's source pixels are copied into the strip's buffer and `draw` draws on that buffer
 * (a libvips region generate function), so memory stays a few strips of the width whatever the
 * image size; the whole image is never held.  YC_EFORMAT (naming the file) when libvips cannot
 * read the source or write the output; YC_EIO when the output cannot be renamed. */
int yc_slice_write_annotated(const char *src_path, yc_slice_draw_fn draw, void *user,
                             const char *out_path, yc_annotated_format format);

#endif
