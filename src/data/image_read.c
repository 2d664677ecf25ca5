/* Whole images read at the size they are used at (see image_read.h). */
#include "image_read.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vips/vips.h>

#include "image_vips.h"
#include "log.h"

/* Source bytes the box shrink is asked for at once: output rows are read in strips whose input
 * rows (rows x vertical factor x stored width x 3) stay under this. */
#define STRIP_BYTES ((size_t)4 << 20)
/* Rows of the source libvips and the decoders keep in flight besides the strip (libvips'
 * sequential line cache, libjpeg's MCU rows, libpng's row): a PNG read top to bottom one row at a
 * time held about 515 rows of its width (libvips 8.14: 46, 58 and 80 MB peak at widths 8000,
 * 16000 and 30000), rounded up. */
#define LINE_ROWS 640

yc_read_limits yc_read_limits_resolve(const yc_read_limits *lim)
{
    yc_read_limits r = {YC_READ_MAX_PIXELS, YC_READ_EXACT_PIXELS};
    if (lim && lim->max_pixels)
        r.max_pixels = lim->max_pixels;
    if (lim && lim->exact_pixels)
        r.exact_pixels = lim->exact_pixels;
    if (r.exact_pixels > r.max_pixels)
        r.exact_pixels = r.max_pixels;
    return r;
}

int yc_image_read_header(const char *path, yc_image_header *hdr)
{
    int st = yc_vips_init();
    if (st)
        return st;
    if (access(path, R_OK) != 0)
        return yc_error_status(YC_EIO, "cannot read image %s: %s", path, strerror(errno));
    VipsImage *in = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on",
                                             VIPS_FAIL_ON_NONE, NULL);
    if (!in) {
        char msg[400];
        yc_vips_error_take(msg, sizeof msg);
        return yc_error_status(YC_EFORMAT, "cannot decode image %s: open: %s", path, msg);
    }
    yc_vips_header_of(in, hdr);
    g_object_unref(in);
    return YC_OK;
}

/* The JPEG shrink-on-load factor for a stored sw x sh image read to at least tw x th stored
 * pixels: the largest of 8, 4, 2 that keeps both sides at least that large, else 1. */
static int jpeg_shrink(int sw, int sh, int tw, int th)
{
    for (int s = 8; s > 1; s /= 2)
        if (sw / s >= tw && sh / s >= th)
            return s;
    return 1;
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* Checks the limits for a reduced read of hdr to stored tw x th; fills *shrink and *pixels.
 * Returns YC_OK or YC_EFORMAT with the reason (info->too_large set by the caller). */
static int check_limits(const char *path, const yc_image_header *hdr, int tw, int th,
                        const yc_read_limits *lim, int *shrink, size_t *pixels)
{
    size_t stored = (size_t)hdr->stored_w * (size_t)hdr->stored_h;
    *shrink = hdr->jpeg && !hdr->interlaced ? jpeg_shrink(hdr->stored_w, hdr->stored_h, tw, th)
                                            : 1;
    *pixels = ceil_div((size_t)hdr->stored_w, (size_t)*shrink) *
              ceil_div((size_t)hdr->stored_h, (size_t)*shrink);
    if (hdr->interlaced && stored > lim->exact_pixels)
        return yc_error_status(YC_EFORMAT, "%s: a %dx%d %s: its decoder would hold the whole "
                               "image (%zu pixels, more than the %zu read whole), however little "
                               "of it is used; save it without interlacing",
                               path, hdr->w, hdr->h,
                               hdr->jpeg ? "progressive JPEG" : "interlaced image", stored,
                               lim->exact_pixels);
    if (*pixels > lim->max_pixels)
        return yc_error_status(YC_EFORMAT, "%s: a %dx%d image: reading it decodes %zu pixels, "
                               "more than the limit of %zu (--max-pixels)",
                               path, hdr->w, hdr->h, *pixels, lim->max_pixels);
    return YC_OK;
}

/* One reading of the reducing pipeline into dst (stored orientation, between 1x and 2x of
 * tw x th).  On a libvips failure writes the step and libvips' message into err and returns
 * YC_EFORMAT. */
static int reduce_pass(const char *path, VipsFailOn fail_on, int shrink, int tw, int th,
                       yc_image *dst, char *err, size_t errlen)
{
    yc_vips_chain c = YC_VIPS_CHAIN_INIT;
    const char *step = "open";
    char msg[400];
    VipsImage *in, *out = NULL;
    if (shrink > 1)
        in = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", fail_on,
                                      "shrink", shrink, NULL);
    else
        in = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", fail_on,
                                      NULL);
    if (!in || yc_vips_chain_push(&c, in))
        goto vips_fail;
    if (yc_vips_chain_rgb8(&c, &step))
        goto vips_fail;
    int cw = vips_image_get_width(yc_vips_chain_last(&c));
    int ch = vips_image_get_height(yc_vips_chain_last(&c));
    int hk = cw / tw > 1 ? cw / tw : 1, vk = ch / th > 1 ? ch / th : 1;
    if (hk > 1 || vk > 1) {
        step = "box shrink";
        if (vips_shrink(yc_vips_chain_last(&c), &out, (double)hk, (double)vk, NULL) ||
            yc_vips_chain_push(&c, out))
            goto vips_fail;
    }
    VipsImage *fin = yc_vips_chain_last(&c);
    int w = vips_image_get_width(fin), h = vips_image_get_height(fin);
    int st = yc_image_reserve(dst, h, w);
    if (st) {
        yc_vips_chain_free(&c);
        return st;
    }
    size_t per_row = (size_t)vk * (size_t)cw * 3;
    int strip = (int)(STRIP_BYTES / (per_row ? per_row : 1));
    strip = strip < 1 ? 1 : strip > 64 ? 64 : strip;
    step = "pixel read";
    if (yc_vips_copy_rgb8(fin, h, w, strip, dst->data))
        goto vips_fail;
    yc_vips_chain_free(&c);
    return YC_OK;

vips_fail:
    yc_vips_error_take(msg, sizeof msg);
    snprintf(err, errlen, "%s: %s", step, msg);
    yc_vips_chain_free(&c);
    return YC_EFORMAT;
}

int yc_image_read_reduced(const char *path, const yc_image_header *hdr, int h, int w,
                          yc_interp interp, const yc_read_limits *limits, yc_image *out,
                          yc_image *scratch, yc_read_info *info)
{
    yc_read_limits lim = yc_read_limits_resolve(limits);
    yc_read_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    info->h0 = hdr->h;
    info->w0 = hdr->w;
    info->reduced = true;
    if (h < 1 || w < 1)
        return yc_error_status(YC_EUSAGE, "%s: cannot read to %dx%d", path, w, h);
    /* the output's size in the stored orientation */
    int tw = hdr->orientation >= 5 ? h : w, th = hdr->orientation >= 5 ? w : h;
    int st = yc_vips_init();
    if (st)
        return st;
    if ((st = check_limits(path, hdr, tw, th, &lim, &info->shrink, &info->decoded_pixels))) {
        info->too_large = true;
        return st;
    }
    yc_image own = YC_IMAGE_INIT, turned = YC_IMAGE_INIT;
    yc_image *red = scratch && scratch != out ? scratch : &own;
    char err1[480] = "", err2[480] = "";
    st = reduce_pass(path, VIPS_FAIL_ON_ERROR, info->shrink, tw, th, red, err1, sizeof err1);
    if (st == YC_EFORMAT) {
        st = reduce_pass(path, VIPS_FAIL_ON_NONE, info->shrink, tw, th, red, err2, sizeof err2);
        if (st == YC_OK) {
            vips_error_clear();
            yc_image_warn_damaged(path, err1);
        }
    }
    if (st == YC_EFORMAT) {
        st = yc_error_status(YC_EFORMAT, "cannot decode image %s: %s", path, *err2 ? err2 : err1);
    } else if (!st) {
        const yc_image *up = red;
        if (hdr->orientation != 1) {
            st = yc_image_orient(red, &turned, hdr->orientation);
            up = &turned;
        }
        if (!st)
            st = yc_image_resize(up, out, h, w, interp);
        if (st)
            yc_error_context(st, "reading %s", path);
    }
    yc_image_free(&own);
    yc_image_free(&turned);
    return st;
}

void yc_load_size(int h0, int w0, int imgsz, bool augment, int *h, int *w, yc_interp *interp)
{
    double r = (double)imgsz / (h0 > w0 ? h0 : w0);
    *h = h0;
    *w = w0;
    if (r != 1.0) {
        *w = (int)(w0 * r);
        *h = (int)(h0 * r);
        if (*w < 1)
            *w = 1;
        if (*h < 1)
            *h = 1;
    }
    *interp = (augment || r > 1) ? YC_INTERP_LINEAR : YC_INTERP_AREA;
}

int yc_load_image_limited(const char *path, int imgsz, bool augment, const yc_read_limits *limits,
                          yc_image *tmp, yc_image *out, yc_load_info *info,
                          yc_read_info *info_read)
{
    if (imgsz < 1)
        return yc_error_status(YC_EUSAGE, "image size %d must be positive", imgsz);
    yc_read_limits lim = yc_read_limits_resolve(limits);
    yc_read_info local;
    if (!info_read)
        info_read = &local;
    memset(info_read, 0, sizeof *info_read);
    yc_image own = YC_IMAGE_INIT;
    yc_image *full = tmp ? tmp : &own;
    yc_image_header hdr;
    int st = yc_image_decode_bounded(path, lim.exact_pixels, full, NULL, NULL, &hdr);
    if (st == YC_OK) {
        info_read->h0 = full->h;
        info_read->w0 = full->w;
        info_read->shrink = 1;
        info_read->decoded_pixels = (size_t)full->h * (size_t)full->w;
        st = yc_load_resize(full, imgsz, augment, out, info);
        if (st)
            yc_error_context(st, "resizing %s", path);
    } else if (st == YC_DECODE_OVER) {
        int h, w;
        yc_interp interp;
        yc_load_size(hdr.h, hdr.w, imgsz, augment, &h, &w, &interp);
        st = yc_image_read_reduced(path, &hdr, h, w, interp, &lim, out, full, info_read);
        if (!st && info)
            *info = (yc_load_info){hdr.h, hdr.w, h, w};
    }
    yc_image_free(&own);
    return st;
}

size_t yc_image_read_bytes(int w, int h, int out_h, int out_w, const yc_read_limits *limits)
{
    yc_read_limits lim = yc_read_limits_resolve(limits);
    if (w < 1 || h < 1 || out_h < 1 || out_w < 1)
        return 0;
    size_t px = (size_t)w * (size_t)h;
    size_t longest = (size_t)(w > h ? w : h), shortest = (size_t)(w > h ? h : w);
    size_t lines = 3 * longest * (shortest < LINE_ROWS ? shortest : LINE_ROWS);
    if (px <= lim.exact_pixels)
        return 2 * 3 * px + lines;
    /* the reduced image is under 2x the output per side: under 4x its pixels, twice (stored and
     * upright); the source: a strip of the box shrink's input and the rows in flight */
    size_t out = (size_t)out_h * (size_t)out_w;
    return 2 * 4 * 3 * out + STRIP_BYTES + lines;
}

int yc_load_image(const char *path, int imgsz, bool augment, yc_image *tmp, yc_image *out,
                  yc_load_info *info)
{
    return yc_load_image_limited(path, imgsz, augment, NULL, tmp, out, info, NULL);
}
