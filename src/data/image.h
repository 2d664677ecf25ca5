/* Host images: decoding through libvips, and the resampling YOLOv5 does with OpenCV.
 *
 * An image here is always 8-bit RGB, 3 channels, row-major HWC with no row padding (YOLOv5 works
 * in BGR and flips to RGB at the end; every operation used is symmetric in the channel order, so
 * working in RGB from the start gives the same bytes).
 *
 * Decoding uses libvips (any format it loads); resizing, letterboxing and the affine warp are
 * implemented here in C so that they reproduce OpenCV's fixed-point arithmetic:
 *   - INTER_LINEAR: 11-bit coefficients, half-pixel centres, OpenCV's SIMD rounding of the
 *     vertical pass, and its rule that an exact 2x downscale is computed as a 2x2 box average;
 *   - INTER_AREA: OpenCV's exact-coverage float tables for fractional scales and the integer box
 *     average for integer scales.
 * libvips' own resamplers are not used for this because vips_resize() with a linear kernel
 * anti-aliases when downscaling (its kernel widens with the scale), which cv2.INTER_LINEAR does
 * not: the results would differ by several levels on every edge.
 *
 * Measured against the reference dumps (cv2 4.x + YOLOv5 v7.0): libvips' JPEG decode (the same
 * libjpeg-turbo IDCT) followed by these resamplers reproduces `input_uint8` / `eval{320,640}_input`
 * of coco128 000000000009.jpg and 000000000049.jpg bit for bit (INTER_AREA 2x and fractional,
 * INTER_LINEAR upscale, letterbox).
 *
 * Shrink-on-load (JPEG DCT scaling, as vips_thumbnail uses) is not used by yc_load_image: measured
 * on six coco128 JPEGs at factor 2 against a full decode + INTER_AREA to the same size it is not
 * equal within rounding (mean |diff| 0.35-0.53 levels, max 4-12 on 640-wide images; 3.1 / 97 on
 * the 381-wide one, where the sizes also round differently).  It is offered separately
 * (yc_image_decode_shrunk) for callers that prefer speed on very large photos, never for
 * training or validation.
 *
 * Thread safety: every function may run concurrently on different images.  libvips is set up
 * once per process by yc_vips_init() (called implicitly by the decoders). */
#ifndef YC_IMAGE_H
#define YC_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Starts libvips once per process (pthread_once; later calls return the first call's status) and
 * caps it so that the data path's host memory is bounded and known:
 *   - the operation cache is off (vips_cache_set_max 0, max_mem 0, max_files 0): each training
 *     image is decoded once per epoch in random order, so a cache could only hold memory and file
 *     descriptors;
 *   - vips_concurrency_set(1), unless the user set VIPS_CONCURRENCY: yolocl's own loader threads
 *     parallelise over images, and a libvips worker pool per loader thread would oversubscribe
 *     the cores.  (The decoders below read pixels on the calling thread anyway.)
 *   - libvips warnings (domain "VIPS") are routed to yc_debug, prefixed with the file being
 *     decoded on that thread; damaged files are reported once by the decoder with yc_warn.
 * Returns YC_OK or YC_ERR with the libvips message. */
int yc_vips_init(void);

typedef struct yc_image {
    /* pixels: h rows of w RGB triplets, 8 bits each, no row padding (h * w * 3 bytes used) */
    uint8_t *data;
    /* height in pixels */
    int h;
    /* width in pixels */
    int w;
    /* bytes allocated at data (>= h * w * 3); kept when the image is reused for a smaller one */
    size_t cap;
} yc_image;

/* An empty image (no buffer). */
#define YC_IMAGE_INIT {NULL, 0, 0, 0}

/* Sets the size to h x w, growing the buffer when needed (contents are not preserved). */
int yc_image_reserve(yc_image *im, int h, int w);
/* Frees the buffer and empties the image. */
void yc_image_free(yc_image *im);
/* dst = a copy of src (dst's buffer reused when large enough). */
int yc_image_copy(yc_image *dst, const yc_image *src);
/* Fills every channel of every pixel with `value`. */
void yc_image_fill(yc_image *im, uint8_t value);
/* Writes HWC RGB as CHW RGB planes (3 * h * w bytes at dst). */
void yc_image_to_chw(const yc_image *im, uint8_t *dst);

/* Resampling methods, as OpenCV's cv2.INTER_LINEAR and cv2.INTER_AREA. */
typedef enum yc_interp {
    YC_INTERP_LINEAR,
    YC_INTERP_AREA,
} yc_interp;

/* dst = cv2.resize(src, (w, h), interpolation).  h, w >= 1.  A same-size resize is a copy. */
int yc_image_resize(const yc_image *src, yc_image *dst, int h, int w, yc_interp interp);

/* Same, writing into a caller-owned h x w RGB block whose rows are `stride` bytes apart (used by
 * the letterbox to resize straight into the padded image). */
int yc_image_resize_into(const yc_image *src, uint8_t *dst, size_t stride, int h, int w,
                         yc_interp interp);

/* What the decoder found. */
typedef struct yc_decode_info {
    /* EXIF orientation found (1..8; 1 when absent) and applied */
    int orientation;
    /* true when the file was damaged or truncated and decoded as far as possible */
    bool damaged;
} yc_decode_info;

/* Decodes any file libvips can load to 8-bit RGB, as cv2.imread(path, IMREAD_COLOR) does:
 * alpha dropped, gray replicated to 3 channels, 16-bit reduced to its high byte (OpenCV's
 * png_set_strip_16), other sample formats cast with clipping, CMYK/Lab/XYZ... converted to sRGB
 * by libvips, embedded ICC profiles ignored, and the EXIF orientation applied (width and height
 * swap for orientations 5-8).  Pixels are read top to bottom with one region on the calling
 * thread (sequential access: the file is never decoded twice into a temporary).
 *
 * Damaged files: the first decode stops at any serious error or truncation; the file is then
 * decoded again leniently (libvips fail-on "none") and, if that succeeds, info->damaged is set
 * and one yc_warn names the file and the problem, the first time this process meets that file
 * damaged (a training run reads it every epoch; it is reported once) (a truncated JPEG keeps its decoded rows, the
 * rest is libjpeg's gray fill, as with OpenCV).  A file that cannot be decoded at all returns
 * YC_EFORMAT (YC_EIO when it cannot be read) with a message naming the file; nothing crashes.
 * Files without EXIF rotation are read straight into `out` (its buffer reused); `tmp` (may be
 * NULL, must differ from out) holds the stored pixels of rotated files between calls.  `info`
 * may be NULL. */
int yc_image_decode(const char *path, yc_image *out, yc_image *tmp, yc_decode_info *info);

/* What an image file's header says (nothing decoded). */
typedef struct yc_image_header {
    /* size after the EXIF orientation (width and height swapped for orientations 5-8) */
    int w, h;
    /* size as stored */
    int stored_w, stored_h;
    /* EXIF orientation, 1..8 (1 when absent) */
    int orientation;
    /* a JPEG: libjpeg can shrink it by 2, 4 or 8 while decoding */
    bool jpeg;
    /* a progressive JPEG or an interlaced PNG: its decoder holds the whole image (all its DCT
     * coefficients, all its rows) whatever is read of it */
    bool interlaced;
} yc_image_header;

/* yc_image_decode for images of at most max_pixels stored pixels (0: any size).  A larger image
 * is not decoded: YC_DECODE_OVER is returned (a positive value, not an error) with its header in
 * *over (may be NULL). */
#define YC_DECODE_OVER 1
int yc_image_decode_bounded(const char *path, size_t max_pixels, yc_image *out, yc_image *tmp,
                            yc_decode_info *info, yc_image_header *over);

/* d = s turned upright as EXIF orientation o (1..8) says (width and height swap for 5-8); d must
 * differ from s. */
int yc_image_orient(const yc_image *s, yc_image *d, int o);

/* Decodes with libvips' JPEG shrink-on-load (DCT scaling) by a factor 1, 2, 4 or 8, then applies
 * the EXIF orientation; other formats are decoded fully and reduced with INTER_AREA to
 * ceil(size / factor).  Faster on large JPEGs but NOT equal to a full decode + INTER_AREA (see
 * the measurements above); for callers that accept that.  Same error rules as yc_image_decode. */
int yc_image_decode_shrunk(const char *path, int factor, yc_image *out, yc_image *tmp,
                           yc_decode_info *info);

/* Sizes produced by yc_load_image. */
typedef struct yc_load_info {
    /* decoded size (EXIF-corrected): labels are normalised to it */
    int h0, w0;
    /* size after the long-side resize */
    int h, w;
} yc_load_info;

/* YOLOv5's load_image after the decode: r = imgsz / max(h0, w0); if r != 1 the image is resized
 * to (int(w0 * r), int(h0 * r)) (truncation, at least 1) with INTER_LINEAR when augmenting or
 * upscaling (r > 1) and INTER_AREA when downscaling for validation.  `full` is the decoded image;
 * out must differ from full. */
int yc_load_resize(const yc_image *full, int imgsz, bool augment, yc_image *out,
                   yc_load_info *info);

/* yc_image_decode + yc_load_resize, within image_read.h's default limits: images larger than
 * 4096 x 4096 are read reduced, never whole (yc_load_image_limited, image_read.c).  `tmp` (may be
 * NULL) holds the full-resolution decode between calls (a per-thread scratch image; with NULL a
 * temporary is allocated and freed). */
int yc_load_image(const char *path, int imgsz, bool augment, yc_image *tmp, yc_image *out,
                  yc_load_info *info);

/* Geometry of a letterbox (YOLOv5.md 5.4), in YOLOv5's own terms. */
typedef struct yc_letterbox_info {
    /* scale applied to width and height (equal unless scale_fill) */
    double ratio_w, ratio_h;
    /* dw, dh as letterbox() returns them: half the total padding (may end in .5) */
    double pad_w, pad_h;
    /* border rows/columns added: top = round(dh - 0.1), bottom = round(dh + 0.1), left/right
     * likewise, with Python's round-half-to-even */
    int top, bottom, left, right;
    /* size of the resized content (new_unpad) */
    int unpad_h, unpad_w;
    /* output size: unpad + borders */
    int out_h, out_w;
} yc_letterbox_info;

/* Computes the letterbox of an h x w image into new_h x new_w:
 *   r = min(new_h / h, new_w / w), capped at 1 unless scaleup;
 *   unpad = (round(w r), round(h r)) (half to even); dw = new_w - unpad_w, dh = new_h - unpad_h;
 *   auto_: dw %= stride, dh %= stride; else scale_fill: stretch to the new shape, no padding;
 *   then dw /= 2, dh /= 2 and the borders as in yc_letterbox_info. */
void yc_letterbox_geometry(int h, int w, int new_h, int new_w, bool auto_, bool scale_fill,
                           bool scaleup, int stride, yc_letterbox_info *info);

/* dst = letterbox(src, (new_h, new_w), color=114, auto_, scale_fill, scaleup, stride): the
 * content resized with INTER_LINEAR when its size changes, borders filled with 114.  dst must
 * differ from src.  `info` may be NULL. */
int yc_letterbox(const yc_image *src, yc_image *dst, int new_h, int new_w, bool auto_,
                 bool scale_fill, bool scaleup, int stride, yc_letterbox_info *info);

/* dst = the letterbox of geometry g (yc_letterbox_geometry of the original image) around
 * `content`, the original already resized to g's unpadded size (an image read reduced,
 * image_read.h): borders filled with 114, content copied.  YC_EUSAGE when the sizes differ. */
int yc_letterbox_fill(const yc_image *content, const yc_letterbox_info *g, yc_image *dst);

/* Writes an image with libvips (format from the suffix: .png, .jpg, ...; options may follow in
 * brackets as libvips allows, e.g. "x.jpg[Q=95]").  `orientation` 2..8 stores that EXIF
 * orientation tag (for tests of the decoder); 0 or 1 stores none. */
int yc_image_save(const yc_image *im, const char *path, int orientation);

#endif
