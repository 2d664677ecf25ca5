/* The libvips side of image.c shared with the other libvips users of the data layer (sliced
 * reading of large images, slice_image.c).  Includes <vips/vips.h>, so only files compiled with
 * VIPS_CFLAGS include it; image.h stays free of libvips types.
 *
 * Functions returning int return 0 on success and -1 on a libvips failure, with libvips' error
 * buffer set (as libvips does); yc_vips_error_take turns that into text. */
#ifndef YC_IMAGE_VIPS_H
#define YC_IMAGE_VIPS_H

#include <stddef.h>

#include <vips/vips.h>

#include "image.h"

/* most images one chain holds */
#define YC_VIPS_CHAIN_MAX 16

/* Images created along a libvips pipeline, released together: each image is computed from the one
 * before it, and keeping every reference until the end keeps the whole pipeline alive. */
typedef struct yc_vips_chain {
    /* the images, in creation order; each holds one reference owned by the chain */
    VipsImage *im[YC_VIPS_CHAIN_MAX];
    /* how many */
    int n;
} yc_vips_chain;

/* An empty chain. */
#define YC_VIPS_CHAIN_INIT {{0}, 0}

/* The last image of a non-empty chain (a borrowed reference). */
VipsImage *yc_vips_chain_last(const yc_vips_chain *c);
/* Appends `im` (taking over its reference).  Returns -1 (libvips error set, im unreferenced) when
 * the chain is full. */
int yc_vips_chain_push(yc_vips_chain *c, VipsImage *im);
/* Unreferences every image, newest first, and empties the chain. */
void yc_vips_chain_free(yc_vips_chain *c);

/* Appends the conversions yc_image_decode applies after loading, so that the chain's last image is
 * 8-bit RGB with the same pixels the decoder would produce (before the EXIF orientation, which the
 * caller applies): CMYK/Lab/XYZ... converted to sRGB, 16-bit reduced to its high byte, other
 * sample formats cast to uchar with clipping, alpha dropped, gray replicated to three bands.  On
 * failure *step (may be NULL) names the failing conversion and libvips' error is set. */
int yc_vips_chain_rgb8(yc_vips_chain *c, const char **step);

/* Fills *h from an opened image (its size, EXIF orientation, loader and interlacing). */
void yc_vips_header_of(VipsImage *im, yc_image_header *h);

/* Warns that `path` is damaged (`why`: the decoder's message) the first time this process meets
 * it damaged; later calls for the same path say nothing.  Thread-safe. */
void yc_image_warn_damaged(const char *path, const char *why);

/* Copies an 8-bit RGB image of h x w pixels (the last of a chain) into dst, rows of w*3 bytes,
 * computing it `strip` rows at a time through one region, so that a sequential pipeline never
 * holds more than a strip.  Returns -1 with libvips' error set on failure. */
int yc_vips_copy_rgb8(VipsImage *im, int h, int w, int strip, uint8_t *dst);

/* Takes libvips' (process-wide) error text into buf on one line, without its trailing newline,
 * and clears libvips' error buffer. */
void yc_vips_error_take(char *buf, size_t len);

#endif
