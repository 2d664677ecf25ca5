/* Whole images read at the size they are used at, in memory bounded by that size.
 *
 * YOLOv5 reads every image with cv2.imread (the whole image decoded, EXIF orientation applied)
 * and then resizes it (load_image: long side to --img; detect: the letterbox).  yolocl does the
 * same, bit for bit, for images of at most `exact_pixels` stored pixels (default 4096 x 4096,
 * 48 MiB of RGB): they are decoded whole and resized with OpenCV's arithmetic (image.h).
 *
 * Larger images are read the way vips_thumbnail reads them, never whole:
 *   - a JPEG is shrunk while it decodes (libjpeg's DCT scaling) by the largest of 8, 4, 2 that
 *     keeps it at least as large as the output;
 *   - every format is then read top to bottom (sequential access: PNG, TIFF and WebP stream row
 *     by row) through libvips' box shrink by whole factors to between 1x and 2x the output size;
 *   - that reduced image (in its stored orientation) is turned upright and resized to the output
 *     size with OpenCV's arithmetic.
 * Memory is then a few rows of the source plus a few copies of the output, whatever the source's
 * size (yc_image_read_bytes).  The pixels are not those of a whole decode followed by
 * cv2.resize (the box shrink averages where cv2.INTER_LINEAR samples) but an image of the same
 * content and size.
 *
 * Limits, so that a decompression bomb (a small file whose header says 60000 x 60000) or a scan
 * too large to use whole costs neither the machine's memory nor minutes per read:
 *   - `max_pixels` (default 2^30, OpenCV's CV_IO_MAX_IMAGE_PIXELS, beyond which cv2.imread refuses
 *     an image): an image whose read would decode more pixels (after the JPEG shrink) is refused
 *     from its header, nothing decoded;
 *   - a progressive JPEG or an interlaced PNG larger than exact_pixels is refused too: its decoder
 *     holds the whole image (every DCT coefficient, every row) however little is read.
 * Both give YC_EFORMAT, info->too_large set, and a message naming the file, its size and the
 * limit; the caller adds what to use instead (--tile for training, --slice for detection).
 *
 * Damaged files are decoded as far as possible and reported once per file per process (image.h).
 * Thread safety: any function may run concurrently on different images. */
#ifndef YC_IMAGE_READ_H
#define YC_IMAGE_READ_H

#include <stdbool.h>
#include <stddef.h>

#include "image.h"

/* Default max_pixels: 2^30, as OpenCV's imread. */
#define YC_READ_MAX_PIXELS ((size_t)1 << 30)
/* Default exact_pixels: 4096 x 4096. */
#define YC_READ_EXACT_PIXELS ((size_t)4096 * 4096)

typedef struct yc_read_limits {
    /* most pixels one read may decode (0: YC_READ_MAX_PIXELS) */
    size_t max_pixels;
    /* images of at most this many stored pixels are decoded whole (0: YC_READ_EXACT_PIXELS; never
     * more than max_pixels) */
    size_t exact_pixels;
} yc_read_limits;

/* What a read did. */
typedef struct yc_read_info {
    /* the image's upright size (labels are normalised to it) */
    int h0, w0;
    /* read through the reducing pipeline (not decoded whole) */
    bool reduced;
    /* JPEG shrink-on-load factor used (1: none) */
    int shrink;
    /* pixels decoded */
    size_t decoded_pixels;
    /* refused by the limits (the status is YC_EFORMAT) */
    bool too_large;
} yc_read_info;

/* The limits with 0s replaced by the defaults (and exact_pixels capped at max_pixels). */
yc_read_limits yc_read_limits_resolve(const yc_read_limits *lim);

/* Reads the header of `path` (nothing decoded).  YC_EIO when it cannot be read, YC_EFORMAT when
 * libvips cannot open it; messages name the file. */
int yc_image_read_header(const char *path, yc_image_header *hdr);

/* Reads the image (header `hdr`, as yc_image_read_header gives it) reduced to h x w upright
 * pixels through the reducing pipeline above, resized at the end with `interp`, into out
 * (scratch holds the reduced image; it may be NULL).  The limits are checked first. */
int yc_image_read_reduced(const char *path, const yc_image_header *hdr, int h, int w,
                          yc_interp interp, const yc_read_limits *lim, yc_image *out,
                          yc_image *scratch, yc_read_info *info);

/* YOLOv5's load_image (yc_load_image) within the limits: decoded whole and resized as OpenCV up
 * to exact_pixels, else read reduced straight to the load_image size.  tmp holds the whole
 * decode between calls (may be NULL).  info_read (may be NULL) tells how it was read. */
int yc_load_image_limited(const char *path, int imgsz, bool augment, const yc_read_limits *lim,
                          yc_image *tmp, yc_image *out, yc_load_info *info,
                          yc_read_info *info_read);

/* The load_image size of an h0 x w0 image at imgsz (YOLOv5: int(w0 r), int(h0 r), r = imgsz /
 * max(h0, w0), at least 1) and its interpolation. */
void yc_load_size(int h0, int w0, int imgsz, bool augment, int *h, int *w, yc_interp *interp);

/* Host bytes one read of an upright w x h image to an output of at most out_h x out_w takes
 * beyond the output itself, under the limits: the whole decode (twice, for a rotated image) up to
 * exact_pixels; above, the reduced image and its upright copy plus the source rows in flight
 * (libvips' line buffers, a strip of the box shrink's input).  Images the limits refuse are
 * counted as if read (a JPEG may shrink under max_pixels: w and h do not tell). */
size_t yc_image_read_bytes(int w, int h, int out_h, int out_w, const yc_read_limits *lim);

#endif
