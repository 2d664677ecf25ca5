/* Windows, thumbnails and annotated output of large images through libvips (see slice_image.h). */
#include "slice_image.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "image_read.h"
#include "image_vips.h"
#include "log.h"
#include "util.h"

struct yc_slice_source {
    /* the file, for messages */
    char *path;
    /* how windows are read */
    yc_slice_access access;
    /* upright size */
    int w, h;
    /* YC_SLICE_DECODED: the whole image */
    yc_image full;
    /* lazily read sources: the pipeline up to the upright 8-bit RGB image (the chain's last), and
     * the one region every read goes through */
    yc_vips_chain chain;
    VipsRegion *reg;
    /* YC_SLICE_SEQUENTIAL: rows band_y .. band_y + band_n - 1 of the image, band_cap rows of
     * w * 3 bytes used at band (band_bytes allocated) */
    uint8_t *band;
    size_t band_bytes;
    int band_y, band_n, band_cap;
    /* the caller's buffers full and band came from, given back on free (NULL: owned) */
    yc_slice_buffers *lent;
};

/* A libvips failure while `step` ran on `path`: YC_EFORMAT with libvips' message. */
static int vips_failure(const char *path, const char *step)
{
    char msg[480];
    yc_vips_error_take(msg, sizeof msg);
    return yc_error_status(YC_EFORMAT, "%s: %s: %s", path, step, msg);
}

static int upright_w(VipsImage *im, int orientation)
{
    return orientation >= 5 ? vips_image_get_height(im) : vips_image_get_width(im);
}

static int upright_h(VipsImage *im, int orientation)
{
    return orientation >= 5 ? vips_image_get_width(im) : vips_image_get_height(im);
}

static int orientation_of(VipsImage *im)
{
    int o = vips_image_get_orientation(im);
    return o >= 1 && o <= 8 ? o : 1;
}

/* Builds the lazily read pipeline of `path` into c: the loader (random access when the format
 * reads parts on demand or the image must be rotated, else sequential), the EXIF rotation and
 * the 8-bit RGB conversion.  `header` (may be NULL) is an already opened sequential image of the
 * file, taken over.  *access gets YC_SLICE_RANDOM or YC_SLICE_SEQUENTIAL. */
static int open_lazy(const char *path, VipsImage *header, yc_vips_chain *c,
                     yc_slice_access *access)
{
    const char *step = "open";
    const char *loader = vips_foreign_find_load(path);
    if (!loader) {
        if (header)
            g_object_unref(header);
        return vips_failure(path, "finding a loader");
    }
    bool partial = (vips_foreign_flags(loader, path) & VIPS_FOREIGN_PARTIAL) != 0;
    if (!header) {
        header = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on",
                                          VIPS_FAIL_ON_ERROR, NULL);
        if (!header)
            return vips_failure(path, step);
    }
    int orientation = orientation_of(header);
    VipsImage *in = header;
    if (partial || orientation != 1) {
        if (!partial)
            yc_warn("%s: a %dx%d image with EXIF orientation %d: libvips decodes it whole into a "
                    "temporary image to turn it upright (memory up to VIPS_DISC_THRESHOLD, a file "
                    "under $TMPDIR above)",
                    path, vips_image_get_width(header), vips_image_get_height(header),
                    orientation);
        g_object_unref(header);
        in = vips_image_new_from_file(path, "access", VIPS_ACCESS_RANDOM, "fail_on",
                                      VIPS_FAIL_ON_ERROR, NULL);
        if (!in)
            return vips_failure(path, step);
    }
    if (yc_vips_chain_push(c, in))
        return vips_failure(path, step);
    if (yc_vips_chain_rgb8(c, &step))
        return vips_failure(path, step);
    if (orientation != 1) {
        VipsImage *up = NULL;
        if (vips_autorot(yc_vips_chain_last(c), &up, NULL) || yc_vips_chain_push(c, up))
            return vips_failure(path, "EXIF rotation");
    }
    *access = partial || orientation != 1 ? YC_SLICE_RANDOM : YC_SLICE_SEQUENTIAL;
    return YC_OK;
}

int yc_slice_source_open(yc_slice_source **out, const char *path, int decode_max, int band_rows)
{
    return yc_slice_source_open_lent(out, path, decode_max, band_rows, NULL);
}

void yc_slice_buffers_free(yc_slice_buffers *b)
{
    yc_image_free(&b->full);
    free(b->band);
    b->band = NULL;
    b->band_bytes = 0;
}

int yc_slice_source_open_lent(yc_slice_source **out, const char *path, int decode_max,
                              int band_rows, yc_slice_buffers *lend)
{
    *out = NULL;
    if (band_rows < 1)
        return yc_error_status(YC_EUSAGE, "slice source: band of %d rows", band_rows);
    int st = yc_vips_init();
    if (st)
        return st;
    if (!path || !*path)
        return yc_error_status(YC_EIO, "cannot read an image: empty file name");
    if (access(path, R_OK) != 0)
        return yc_error_status(YC_EIO, "cannot read image %s: %s", path, strerror(errno));
    yc_slice_source *s = yc_calloc(1, sizeof *s, "slice source");
    if (!s)
        return YC_ENOMEM;
    s->chain = (yc_vips_chain)YC_VIPS_CHAIN_INIT;
    if (!(s->path = yc_strdup(path, "slice source"))) {
        free(s);
        return YC_ENOMEM;
    }
    if (lend) {
        /* borrow the buffers: they go back to `lend` when the source is freed */
        s->lent = lend;
        s->full = lend->full;
        lend->full = (yc_image)YC_IMAGE_INIT;
        s->band = lend->band;
        s->band_bytes = lend->band_bytes;
        lend->band = NULL;
        lend->band_bytes = 0;
    }
    VipsImage *header = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL,
                                                 "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    if (!header) {
        st = vips_failure(path, "open");
        goto fail;
    }
    int orientation = orientation_of(header);
    s->w = upright_w(header, orientation);
    s->h = upright_h(header, orientation);
    if (s->w <= decode_max && s->h <= decode_max) {
        g_object_unref(header);
        s->access = YC_SLICE_DECODED;
        if ((st = yc_image_decode(path, &s->full, NULL, NULL)))
            goto fail;
        s->w = s->full.w;
        s->h = s->full.h;
        *out = s;
        return YC_OK;
    }
    yc_image_header hdr;
    yc_vips_header_of(header, &hdr);
    if (hdr.interlaced && (size_t)s->w * (size_t)s->h > YC_READ_EXACT_PIXELS) {
        /* a progressive JPEG's or an interlaced PNG's decoder holds the whole image whatever
         * part of it is read: refused from its header above the size read whole anywhere
         * (image_read.h), so that such a decompression bomb costs nothing */
        g_object_unref(header);
        st = yc_error_status(YC_EFORMAT, "%s: a %dx%d %s: its decoder would hold the whole "
                             "image (%zu pixels, more than the %zu read whole), however little of it "
                             "is read; save it without interlacing", path, s->w, s->h,
                             hdr.jpeg ? "progressive JPEG" : "interlaced image",
                             (size_t)s->w * (size_t)s->h, YC_READ_EXACT_PIXELS);
        goto fail;
    }
    if ((st = open_lazy(path, header, &s->chain, &s->access)))
        goto fail;
    VipsImage *rgb = yc_vips_chain_last(&s->chain);
    if (vips_image_get_width(rgb) != s->w || vips_image_get_height(rgb) != s->h) {
        st = yc_error_status(YC_EFORMAT, "%s: upright image is %dx%d, expected %dx%d", path,
                             vips_image_get_width(rgb), vips_image_get_height(rgb), s->w, s->h);
        goto fail;
    }
    if (!(s->reg = vips_region_new(rgb))) {
        st = vips_failure(path, "region");
        goto fail;
    }
    s->band_cap = band_rows < s->h ? band_rows : s->h;
    *out = s;
    return YC_OK;
fail:
    yc_slice_source_free(s);
    return st;
}

void yc_slice_source_free(yc_slice_source *s)
{
    if (!s)
        return;
    if (s->reg)
        g_object_unref(s->reg);
    yc_vips_chain_free(&s->chain);
    if (s->lent) {
        yc_slice_buffers_free(s->lent);
        s->lent->full = s->full;
        s->lent->band = s->band;
        s->lent->band_bytes = s->band_bytes;
    } else {
        yc_image_free(&s->full);
        free(s->band);
    }
    free(s->path);
    free(s);
}

int yc_slice_source_width(const yc_slice_source *s)
{
    return s->w;
}

int yc_slice_source_height(const yc_slice_source *s)
{
    return s->h;
}

yc_slice_access yc_slice_source_access(const yc_slice_source *s)
{
    return s->access;
}

const yc_image *yc_slice_source_image(const yc_slice_source *s)
{
    return s->access == YC_SLICE_DECODED ? &s->full : NULL;
}

/* Reads rect of the region's image into dst, rows dst_stride bytes apart. */
static int read_rect(VipsRegion *reg, VipsRect rect, uint8_t *dst, size_t dst_stride,
                     const char *path)
{
    if (vips_region_prepare(reg, &rect))
        return vips_failure(path, "pixel read");
    size_t row = (size_t)rect.width * 3;
    for (int y = 0; y < rect.height; y++)
        memcpy(dst + (size_t)y * dst_stride, VIPS_REGION_ADDR(reg, rect.left, rect.top + y), row);
    return YC_OK;
}

/* Makes the band hold rows y0 .. y1 - 1 (y0 never below the band's first row), reading the rows
 * not held yet top to bottom in strips of at most 64 rows. */
static int band_fill(yc_slice_source *s, int y0, int y1)
{
    const size_t row = (size_t)s->w * 3;
    const size_t need = (size_t)s->band_cap * row;
    if (s->band_bytes < need) {
        /* only before the first rows are held: nothing to keep */
        free(s->band);
        s->band_bytes = 0;
        if (!(s->band = yc_malloc(need, "slice band")))
            return YC_ENOMEM;
        s->band_bytes = need;
    }
    int next = s->band_y + s->band_n;
    if (y0 >= next) {
        /* nothing held is needed: the rows up to y0 are read through the band in strips and
         * dropped, then the band restarts at y0.  Asking libvips for rows far below the last
         * ones read would make its sequential reader keep every row in between in its cache
         * (measured: 150 MB for a jump of 7000 rows of an 8000-pixel-wide JPEG) */
        while (next < y0) {
            int n = y0 - next < 64 ? y0 - next : 64;
            n = n < s->band_cap ? n : s->band_cap;
            VipsRect r = {0, next, s->w, n};
            int st = read_rect(s->reg, r, s->band, row, s->path);
            if (st)
                return st;
            next += n;
        }
        s->band_y = y0;
        s->band_n = 0;
    } else if (y0 > s->band_y) {
        memmove(s->band, s->band + (size_t)(y0 - s->band_y) * row,
                (size_t)(next - y0) * row);
        s->band_n = next - y0;
        s->band_y = y0;
    }
    while (next < y1) {
        int n = y1 - next < 64 ? y1 - next : 64;
        VipsRect r = {0, next, s->w, n};
        int st = read_rect(s->reg, r, s->band + (size_t)(next - s->band_y) * row, row, s->path);
        if (st)
            return st;
        next += n;
        s->band_n += n;
    }
    return YC_OK;
}

int yc_slice_source_read(yc_slice_source *s, yc_tile_window win, yc_image *out)
{
    if (win.w < 1 || win.h < 1 || win.x < 0 || win.y < 0 || win.x > s->w - win.w ||
        win.y > s->h - win.h)
        return yc_error_status(YC_EUSAGE, "%s: window %dx%d at (%d, %d) outside the %dx%d image",
                               s->path, win.w, win.h, win.x, win.y, s->w, s->h);
    int st = yc_image_reserve(out, win.h, win.w);
    if (st)
        return st;
    const size_t row = (size_t)win.w * 3;
    switch (s->access) {
    case YC_SLICE_DECODED:
        for (int y = 0; y < win.h; y++)
            memcpy(out->data + (size_t)y * row,
                   s->full.data + ((size_t)(win.y + y) * s->full.w + (size_t)win.x) * 3, row);
        return YC_OK;
    case YC_SLICE_RANDOM: {
        VipsRect r = {win.x, win.y, win.w, win.h};
        return read_rect(s->reg, r, out->data, row, s->path);
    }
    case YC_SLICE_SEQUENTIAL:
        break;
    }
    if (win.h > s->band_cap)
        return yc_error_status(YC_EUSAGE, "%s: window of %d rows taller than the band (%d)",
                               s->path, win.h, s->band_cap);
    if (win.y < s->band_y)
        return yc_error_status(YC_EUSAGE,
                               "%s: window at row %d after row %d: windows of a sequentially read "
                               "image must come top to bottom",
                               s->path, win.y, s->band_y);
    if ((st = band_fill(s, win.y, win.y + win.h)))
        return st;
    const size_t band_row = (size_t)s->w * 3;
    for (int y = 0; y < win.h; y++)
        memcpy(out->data + (size_t)y * row,
               s->band + (size_t)(win.y - s->band_y + y) * band_row + (size_t)win.x * 3, row);
    return YC_OK;
}

int yc_slice_read_thumbnail(const char *path, int max_w, int max_h, yc_image *out)
{
    if (max_w < 1 || max_h < 1)
        return yc_error_status(YC_EUSAGE, "thumbnail of %dx%d pixels", max_w, max_h);
    int st = yc_vips_init();
    if (st)
        return st;
    if (access(path, R_OK) != 0)
        return yc_error_status(YC_EIO, "cannot read image %s: %s", path, strerror(errno));
    yc_vips_chain c = YC_VIPS_CHAIN_INIT;
    const char *step = "thumbnail";
    VipsImage *t = NULL;
    if (vips_thumbnail(path, &t, max_w, "height", max_h, "size", VIPS_SIZE_DOWN, NULL) ||
        yc_vips_chain_push(&c, t) || yc_vips_chain_rgb8(&c, &step)) {
        st = vips_failure(path, step);
        yc_vips_chain_free(&c);
        return st;
    }
    VipsImage *rgb = yc_vips_chain_last(&c);
    int w = vips_image_get_width(rgb), h = vips_image_get_height(rgb);
    VipsRegion *reg = NULL;
    if (!(st = yc_image_reserve(out, h, w))) {
        if (!(reg = vips_region_new(rgb)))
            st = vips_failure(path, "region");
        else
            st = read_rect(reg, (VipsRect){0, 0, w, h}, out->data, (size_t)w * 3, path);
    }
    if (reg)
        g_object_unref(reg);
    yc_vips_chain_free(&c);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Annotated output
 *
 * The boxes are drawn by a libvips generate function between the lazily read source and the
 * saver: for each region libvips asks for, the source pixels of the region are prepared and
 * copied into the region's buffer, then the caller's draw function draws the boxes crossing it.
 * The saver pulls regions strip by strip (JPEG and PNG top to bottom, TIFF one row of tiles at a
 * time while it builds the pyramid), so memory is a few strips of the width, never the image.
 * ---------------------------------------------------------------------------------------------- */

/* What the generate function needs. */
typedef struct draw_ctx {
    /* the caller's drawing and its argument */
    yc_slice_draw_fn draw;
    void *user;
} draw_ctx;

static int draw_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop)
{
    (void)a;
    (void)stop;
    VipsRegion *in = seq;
    const draw_ctx *ctx = b;
    const VipsRect r = out->valid;
    if (vips_region_prepare(in, &r))
        return -1;
    const size_t row = (size_t)r.width * 3;
    const bool packed = (size_t)VIPS_REGION_LSKIP(out) == row;
    uint8_t *px = packed ? (uint8_t *)VIPS_REGION_ADDR(out, r.left, r.top)
                         : g_try_malloc(row * (size_t)r.height);
    if (!px) {
        vips_error("yolocl", "out of memory: %zu bytes drawing boxes", row * (size_t)r.height);
        return -1;
    }
    for (int y = 0; y < r.height; y++)
        memcpy(px + (size_t)y * row, VIPS_REGION_ADDR(in, r.left, r.top + y), row);
    yc_canvas c = yc_canvas_wrap(px, r.width, r.height);
    ctx->draw(&c, r.left, r.top, ctx->user);
    if (!packed) {
        for (int y = 0; y < r.height; y++)
            memcpy(VIPS_REGION_ADDR(out, r.left, r.top + y), px + (size_t)y * row, row);
        g_free(px);
    }
    return 0;
}

static bool has_suffix_ci(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

bool yc_slice_can_save(const char *path)
{
    if (yc_vips_init() != YC_OK) {
        yc_error_clear();
        return false;
    }
    const char *saver = vips_foreign_find_save(path);
    if (!saver)
        vips_error_clear();
    return saver != NULL;
}

int yc_slice_write_annotated(const char *src_path, yc_slice_draw_fn draw, void *user,
                             const char *out_path, yc_annotated_format format)
{
    int st = yc_vips_init();
    if (st)
        return st;
    if (access(src_path, R_OK) != 0)
        return yc_error_status(YC_EIO, "cannot read image %s: %s", src_path, strerror(errno));
    /* the temporary keeps the suffix (libvips picks the saver by it) */
    char *dir = yc_path_dirname(out_path);
    if (!dir)
        return YC_ENOMEM;
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s/.yolocl-%ld-%s", dir, (long)getpid(),
             yc_path_basename(out_path));
    free(dir);

    yc_vips_chain c = YC_VIPS_CHAIN_INIT;
    yc_slice_access acc;
    if ((st = open_lazy(src_path, NULL, &c, &acc)))
        return st;
    VipsImage *src = yc_vips_chain_last(&c);
    draw_ctx ctx = {draw, user};
    VipsImage *drawn = vips_image_new();
    int r = vips_image_pipelinev(drawn, VIPS_DEMAND_STYLE_THINSTRIP, src, NULL);
    if (!r)
        r = vips_image_generate(drawn, vips_start_one, draw_generate, vips_stop_one, src, &ctx);
    if (r || yc_vips_chain_push(&c, drawn)) {
        if (r)
            g_object_unref(drawn);
        st = vips_failure(src_path, "drawing boxes");
        yc_vips_chain_free(&c);
        return st;
    }
    if (format == YC_ANNOTATED_PYRAMID) {
        double bytes = (double)vips_image_get_width(drawn) * vips_image_get_height(drawn) * 3;
        r = vips_tiffsave(drawn, tmp, "tile", TRUE, "tile_width", 256, "tile_height", 256,
                          "pyramid", TRUE, "compression", VIPS_FOREIGN_TIFF_COMPRESSION_JPEG, "Q",
                          85, "bigtiff", bytes > 2147483648.0, "strip", TRUE, NULL);
    } else if (has_suffix_ci(out_path, ".jpg") || has_suffix_ci(out_path, ".jpeg")) {
        r = vips_jpegsave(drawn, tmp, "Q", 95, "strip", TRUE, NULL);
    } else if (has_suffix_ci(out_path, ".png")) {
        r = vips_pngsave(drawn, tmp, "compression", 6, "strip", TRUE, NULL);
    } else {
        r = vips_image_write_to_file(drawn, tmp, NULL);
    }
    if (r) {
        char step[PATH_MAX + 64];
        snprintf(step, sizeof step, "writing the annotated image %s", out_path);
        st = vips_failure(src_path, step);
        unlink(tmp);
    } else if (rename(tmp, out_path) != 0) {
        st = yc_error_status(YC_EIO, "cannot rename %s to %s: %s", tmp, out_path,
                             strerror(errno));
        unlink(tmp);
    }
    yc_vips_chain_free(&c);
    return st;
}
