/* Host images: libvips decoding and OpenCV-exact resampling (see image.h). */
#include "image.h"

#include "image_vips.h"
#include "log.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vips/vips.h>

/* ------------------------------------------------------------------------------------------------
 * libvips set-up
 * ---------------------------------------------------------------------------------------------- */

static pthread_once_t vips_once = PTHREAD_ONCE_INIT;
static int vips_status = YC_ERR;
static char vips_init_msg[512];

/* The file being decoded on this thread, for libvips warnings raised while reading it. */
static _Thread_local const char *tl_current_path;

static void vips_log_handler(const gchar *domain, GLogLevelFlags level, const gchar *message,
                             gpointer data)
{
    (void)domain;
    (void)level;
    (void)data;
    if (tl_current_path)
        yc_debug("libvips: %s: %s", tl_current_path, message);
    else
        yc_debug("libvips: %s", message);
}

static void vips_init_once(void)
{
    if (VIPS_INIT("yolocl")) {
        snprintf(vips_init_msg, sizeof vips_init_msg, "%s", vips_error_buffer());
        vips_error_clear();
        return;
    }
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    if (!getenv("VIPS_CONCURRENCY"))
        vips_concurrency_set(1);
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE, vips_log_handler, NULL);
    vips_status = YC_OK;
}

int yc_vips_init(void)
{
    pthread_once(&vips_once, vips_init_once);
    if (vips_status != YC_OK)
        return yc_error("libvips: initialisation failed: %s", vips_init_msg);
    return YC_OK;
}

void yc_vips_error_take(char *buf, size_t len)
{
    char *e = vips_error_buffer_copy();
    size_t n;
    snprintf(buf, len, "%s", e && *e ? e : "unknown libvips error");
    g_free(e);
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\n')
            buf[i] = ' ';
}

/* ------------------------------------------------------------------------------------------------
 * The image type
 * ---------------------------------------------------------------------------------------------- */

int yc_image_reserve(yc_image *im, int h, int w)
{
    if (h < 1 || w < 1)
        return yc_error_status(YC_EFORMAT, "image size %dx%d is invalid", w, h);
    size_t need = (size_t)h * (size_t)w * 3;
    if (need > im->cap) {
        uint8_t *p = yc_realloc(im->data, need, "image pixels");
        if (!p)
            return YC_ENOMEM;
        im->data = p;
        im->cap = need;
    }
    im->h = h;
    im->w = w;
    return YC_OK;
}

void yc_image_free(yc_image *im)
{
    free(im->data);
    im->data = NULL;
    im->h = im->w = 0;
    im->cap = 0;
}

int yc_image_copy(yc_image *dst, const yc_image *src)
{
    if (dst == src)
        return YC_OK;
    int st = yc_image_reserve(dst, src->h, src->w);
    if (st)
        return st;
    memcpy(dst->data, src->data, (size_t)src->h * src->w * 3);
    return YC_OK;
}

void yc_image_fill(yc_image *im, uint8_t value)
{
    memset(im->data, value, (size_t)im->h * im->w * 3);
}

void yc_image_to_chw(const yc_image *im, uint8_t *dst)
{
    size_t plane = (size_t)im->h * im->w;
    const uint8_t *s = im->data;
    uint8_t *r = dst, *g = dst + plane, *b = dst + 2 * plane;
    for (size_t i = 0; i < plane; i++) {
        r[i] = s[3 * i];
        g[i] = s[3 * i + 1];
        b[i] = s[3 * i + 2];
    }
}

/* ------------------------------------------------------------------------------------------------
 * Resampling, as OpenCV 4.x's cv::resize for CV_8UC3 (modules/imgproc/src/resize.cpp)
 * ---------------------------------------------------------------------------------------------- */

/* OpenCV's saturate_cast<short>(float): round half to even, then clamp. */
static inline short sat_short_f(float v)
{
    long r = lrintf(v);
    return (short)(r < SHRT_MIN ? SHRT_MIN : r > SHRT_MAX ? SHRT_MAX : r);
}

/* OpenCV's saturate_cast<uchar>(float). */
static inline uint8_t sat_u8_f(float v)
{
    long r = lrintf(v);
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

static inline uint8_t sat_u8_i(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Integer-factor box average (cv::resizeAreaFast_): used by INTER_AREA for integer scales and by
 * INTER_LINEAR for an exact 2x downscale.  For 2x2 OpenCV computes (a + b + c + d + 2) >> 2;
 * otherwise saturate_cast<uchar>(sum * (1.f / area)). */
static void resize_area_fast(const yc_image *src, uint8_t *dst, size_t stride, int dh, int dw,
                             int kx, int ky)
{
    const int cn = 3;
    const size_t sstep = (size_t)src->w * cn;
    const float scale = 1.f / (float)(kx * ky);
    for (int dy = 0; dy < dh; dy++) {
        uint8_t *d = dst + (size_t)dy * stride;
        const uint8_t *s0 = src->data + (size_t)dy * ky * sstep;
        for (int dx = 0; dx < dw; dx++) {
            for (int c = 0; c < cn; c++) {
                const uint8_t *s = s0 + (size_t)dx * kx * cn + c;
                if (kx == 2 && ky == 2) {
                    d[dx * cn + c] = (uint8_t)((s[0] + s[cn] + s[sstep] + s[sstep + cn] + 2) >> 2);
                } else {
                    int sum = 0;
                    for (int y = 0; y < ky; y++)
                        for (int x = 0; x < kx; x++)
                            sum += s[y * sstep + (size_t)x * cn];
                    d[dx * cn + c] = sat_u8_f((float)sum * scale);
                }
            }
        }
    }
}

/* One entry of OpenCV's DecimateAlpha table: source index, destination index, weight. */
typedef struct area_tab {
    /* source element offset (pixel * channels) or row */
    int si;
    /* destination element offset (pixel * channels) or row */
    int di;
    /* coverage weight */
    float alpha;
} area_tab;

/* computeResizeAreaTab: for destination cell [dx*scale, (dx+1)*scale), the covered fraction of
 * each source pixel divided by the cell width.  Returns the number of entries. */
static int area_table(int ssize, int dsize, int cn, double scale, area_tab *tab)
{
    int k = 0;
    for (int dx = 0; dx < dsize; dx++) {
        double fsx1 = dx * scale;
        double fsx2 = fsx1 + scale;
        double cell = fmin(scale, ssize - fsx1);
        int sx1 = (int)ceil(fsx1), sx2 = (int)floor(fsx2);
        if (sx2 > ssize - 1)
            sx2 = ssize - 1;
        if (sx1 > sx2)
            sx1 = sx2;
        if (sx1 - fsx1 > 1e-3) {
            tab[k].di = dx * cn;
            tab[k].si = (sx1 - 1) * cn;
            tab[k++].alpha = (float)((sx1 - fsx1) / cell);
        }
        for (int sx = sx1; sx < sx2; sx++) {
            tab[k].di = dx * cn;
            tab[k].si = sx * cn;
            tab[k++].alpha = (float)(1.0 / cell);
        }
        if (fsx2 - sx2 > 1e-3) {
            tab[k].di = dx * cn;
            tab[k].si = sx2 * cn;
            tab[k++].alpha = (float)(fmin(fmin(fsx2 - sx2, 1.), cell) / cell);
        }
    }
    return k;
}

/* INTER_AREA for fractional downscales (cv::resizeArea_<uchar, float>): each source row is
 * reduced horizontally with the x table into `buf` (float), rows are accumulated into `sum` with
 * the y weights, and each finished destination row is rounded half to even. */
static int resize_area_frac(const yc_image *src, uint8_t *dst, size_t stride, int dh, int dw,
                            double scale_x, double scale_y)
{
    const int cn = 3, sw = src->w, sh = src->h, width = dw * cn;
    area_tab *xtab = yc_malloc(sizeof(area_tab) * (size_t)(sw * 2 + sh * 2), "area resize tables");
    float *buf = yc_malloc(sizeof(float) * (size_t)width * 2, "area resize rows");
    if (!xtab || !buf) {
        free(xtab);
        free(buf);
        return YC_ENOMEM;
    }
    area_tab *ytab = xtab + sw * 2;
    float *sum = buf + width;
    int nx = area_table(sw, dw, cn, scale_x, xtab);
    int ny = area_table(sh, dh, 1, scale_y, ytab);
    int prev_dy = ny > 0 ? ytab[0].di : 0;
    for (int i = 0; i < width; i++)
        sum[i] = 0.f;
    for (int j = 0; j < ny; j++) {
        float beta = ytab[j].alpha;
        int dy = ytab[j].di;
        const uint8_t *s = src->data + (size_t)ytab[j].si * sw * cn;
        for (int i = 0; i < width; i++)
            buf[i] = 0.f;
        for (int k = 0; k < nx; k++) {
            int sxn = xtab[k].si, dxn = xtab[k].di;
            float a = xtab[k].alpha;
            float t0 = buf[dxn] + (float)s[sxn] * a;
            float t1 = buf[dxn + 1] + (float)s[sxn + 1] * a;
            float t2 = buf[dxn + 2] + (float)s[sxn + 2] * a;
            buf[dxn] = t0;
            buf[dxn + 1] = t1;
            buf[dxn + 2] = t2;
        }
        if (dy != prev_dy) {
            uint8_t *d = dst + (size_t)prev_dy * stride;
            for (int i = 0; i < width; i++) {
                d[i] = sat_u8_f(sum[i]);
                sum[i] = beta * buf[i];
            }
            prev_dy = dy;
        } else {
            for (int i = 0; i < width; i++)
                sum[i] += beta * buf[i];
        }
    }
    uint8_t *d = dst + (size_t)prev_dy * stride;
    for (int i = 0; i < width; i++)
        d[i] = sat_u8_f(sum[i]);
    free(xtab);
    free(buf);
    return YC_OK;
}

/* Horizontal pass of INTER_LINEAR for one source row: D = S[sx] * a0 + S[sx + 3] * a1 with
 * 11-bit coefficients (exact integers); beyond xmax only the last pixel (times 2048). */
static void hresize_row(const uint8_t *s, int *d, const int *xofs, const short *alpha, int dw,
                        int xmax)
{
    int dx = 0;
    for (; dx < xmax; dx++) {
        int sx = xofs[dx], a0 = alpha[2 * dx], a1 = alpha[2 * dx + 1];
        d[3 * dx] = s[sx] * a0 + s[sx + 3] * a1;
        d[3 * dx + 1] = s[sx + 1] * a0 + s[sx + 4] * a1;
        d[3 * dx + 2] = s[sx + 2] * a0 + s[sx + 5] * a1;
    }
    for (; dx < dw; dx++) {
        int sx = xofs[dx];
        d[3 * dx] = s[sx] * 2048;
        d[3 * dx + 1] = s[sx + 1] * 2048;
        d[3 * dx + 2] = s[sx + 2] * 2048;
    }
}

/* INTER_LINEAR (and OpenCV's linear emulation of INTER_AREA for upscales), cv::resizeGeneric_
 * with HResizeLinear / VResizeLinear<uchar, int, short>:
 *   destination pixel centre dx + 0.5 maps to source x = (dx + 0.5) * sw/dw - 0.5 (the inverse
 *   of x_dst = (x_src + 0.5) * dw/sw - 0.5); sx = floor(x), fx = x - sx (in float), clamped to
 *   the edge pixels; coefficients round((1 - fx) * 2048), round(fx * 2048).  Rows likewise, with
 *   the source rows clamped and their weights kept.
 *   The vertical pass is OpenCV's SIMD (VResizeLinearVec_32s8u) rounding
 *     ((((S0 >> 4) * b0) >> 16) + (((S1 >> 4) * b1) >> 16) + 2) >> 2
 *   on every element: with it the result is bit-exact against cv2.resize in the reference dumps
 *   (381x500 -> 487x640), row tails included; the scalar (S0 b0 + S1 b1 + 2^21) >> 22 was not. */
static int resize_linear(const yc_image *src, uint8_t *dst, size_t stride, int dh, int dw,
                         bool area_mode)
{
    const int cn = 3, sw = src->w, sh = src->h, width = dw * cn;
    double inv_x = (double)dw / sw, inv_y = (double)dh / sh;
    double scale_x = 1. / inv_x, scale_y = 1. / inv_y;
    size_t ints = (size_t)dw + (size_t)dh + (size_t)width * 2;
    int *ibuf = yc_malloc(sizeof(int) * ints, "linear resize tables");
    short *coef = yc_malloc(sizeof(short) * ((size_t)dw * 2 + (size_t)dh * 2),
                            "linear resize coefficients");
    if (!ibuf || !coef) {
        free(ibuf);
        free(coef);
        return YC_ENOMEM;
    }
    int *xofs = ibuf, *yofs = xofs + dw, *rowbuf[2] = {yofs + dh, yofs + dh + width};
    short *alpha = coef, *beta = coef + 2 * dw;
    int xmax = dw;
    for (int dx = 0; dx < dw; dx++) {
        float fx;
        int sx;
        if (!area_mode) {
            fx = (float)((dx + 0.5) * scale_x - 0.5);
            sx = (int)floorf(fx);
            fx -= (float)sx;
        } else {
            sx = (int)floor(dx * scale_x);
            fx = (float)((dx + 1) - (sx + 1) * inv_x);
            fx = fx <= 0 ? 0.f : fx - floorf(fx);
        }
        if (sx < 0) {
            fx = 0.f;
            sx = 0;
        }
        if (sx + 1 >= sw) {
            if (xmax > dx)
                xmax = dx;
            if (sx >= sw - 1) {
                fx = 0.f;
                sx = sw - 1;
            }
        }
        xofs[dx] = sx * cn;
        alpha[2 * dx] = sat_short_f((1.f - fx) * 2048);
        alpha[2 * dx + 1] = sat_short_f(fx * 2048);
    }
    for (int dy = 0; dy < dh; dy++) {
        float fy;
        int sy;
        if (!area_mode) {
            fy = (float)((dy + 0.5) * scale_y - 0.5);
            sy = (int)floorf(fy);
            fy -= (float)sy;
        } else {
            sy = (int)floor(dy * scale_y);
            fy = (float)((dy + 1) - (sy + 1) * inv_y);
            fy = fy <= 0 ? 0.f : fy - floorf(fy);
        }
        yofs[dy] = sy;
        beta[2 * dy] = sat_short_f((1.f - fy) * 2048);
        beta[2 * dy + 1] = sat_short_f(fy * 2048);
    }

    int cached[2] = {-1, -1};
    const size_t sstep = (size_t)sw * cn;
    for (int dy = 0; dy < dh; dy++) {
        int sy[2], slot[2];
        for (int k = 0; k < 2; k++) {
            int v = yofs[dy] + k;
            sy[k] = v < 0 ? 0 : v >= sh ? sh - 1 : v;
        }
        for (int k = 0; k < 2; k++) {
            if (cached[0] == sy[k]) {
                slot[k] = 0;
            } else if (cached[1] == sy[k]) {
                slot[k] = 1;
            } else {
                /* a slot that does not hold the other row this output row needs */
                if (k == 0)
                    slot[k] = cached[0] == sy[1] ? 1 : 0;
                else
                    slot[k] = 1 - slot[0];
                hresize_row(src->data + (size_t)sy[k] * sstep, rowbuf[slot[k]], xofs, alpha, dw,
                            xmax);
                cached[slot[k]] = sy[k];
            }
        }
        const int *s0 = rowbuf[slot[0]], *s1 = rowbuf[slot[1]];
        int b0 = beta[2 * dy], b1 = beta[2 * dy + 1];
        uint8_t *d = dst + (size_t)dy * stride;
        for (int x = 0; x < width; x++) {
            int t = (((s0[x] >> 4) * b0) >> 16) + (((s1[x] >> 4) * b1) >> 16);
            d[x] = sat_u8_i((t + 2) >> 2);
        }
    }
    free(ibuf);
    free(coef);
    return YC_OK;
}

int yc_image_resize_into(const yc_image *src, uint8_t *dst, size_t stride, int h, int w,
                         yc_interp interp)
{
    if (h < 1 || w < 1 || src->h < 1 || src->w < 1)
        return yc_error_status(YC_EFORMAT, "resize: invalid size %dx%d -> %dx%d", src->w, src->h,
                               w, h);
    if (h == src->h && w == src->w) {
        for (int y = 0; y < h; y++)
            memcpy(dst + (size_t)y * stride, src->data + (size_t)y * w * 3, (size_t)w * 3);
        return YC_OK;
    }
    double inv_x = (double)w / src->w, inv_y = (double)h / src->h;
    double scale_x = 1. / inv_x, scale_y = 1. / inv_y;
    int ix = (int)lrint(scale_x), iy = (int)lrint(scale_y);
    bool area_fast = fabs(scale_x - ix) < DBL_EPSILON && fabs(scale_y - iy) < DBL_EPSILON;
    if (interp == YC_INTERP_LINEAR && area_fast && ix == 2 && iy == 2)
        interp = YC_INTERP_AREA;
    if (interp == YC_INTERP_AREA && scale_x >= 1 && scale_y >= 1) {
        if (area_fast) {
            resize_area_fast(src, dst, stride, h, w, ix, iy);
            return YC_OK;
        }
        return resize_area_frac(src, dst, stride, h, w, scale_x, scale_y);
    }
    return resize_linear(src, dst, stride, h, w, interp == YC_INTERP_AREA);
}

int yc_image_resize(const yc_image *src, yc_image *dst, int h, int w, yc_interp interp)
{
    if (src == dst)
        return yc_error("resize: source and destination are the same image");
    int st = yc_image_reserve(dst, h, w);
    if (st)
        return st;
    return yc_image_resize_into(src, dst->data, (size_t)w * 3, h, w, interp);
}

/* ------------------------------------------------------------------------------------------------
 * Decoding
 * ---------------------------------------------------------------------------------------------- */

/* The display image of EXIF orientation o from the stored image s (sh x sw):
 *   1 as stored         2 mirrored left-right     3 rotated 180     4 mirrored top-bottom
 *   5 transposed        6 rotated 90 clockwise    7 transversed     8 rotated 90 anticlockwise
 * For display pixel (y, x) the stored pixel (sy, sx) is:
 *   2: (y, sw-1-x)  3: (sh-1-y, sw-1-x)  4: (sh-1-y, x)
 *   5: (x, y)       6: (sh-1-x, y)       7: (sh-1-x, sw-1-y)  8: (x, sw-1-y)
 * and orientations 5-8 swap width and height. */
int yc_image_orient(const yc_image *s, yc_image *d, int o)
{
    int sh = s->h, sw = s->w;
    int dh = o >= 5 ? sw : sh, dw = o >= 5 ? sh : sw;
    int st = yc_image_reserve(d, dh, dw);
    if (st)
        return st;
    for (int y = 0; y < dh; y++) {
        uint8_t *row = d->data + (size_t)y * dw * 3;
        for (int x = 0; x < dw; x++) {
            int sy, sx;
            switch (o) {
            case 2: sy = y; sx = sw - 1 - x; break;
            case 3: sy = sh - 1 - y; sx = sw - 1 - x; break;
            case 4: sy = sh - 1 - y; sx = x; break;
            case 5: sy = x; sx = y; break;
            case 6: sy = sh - 1 - x; sx = y; break;
            case 7: sy = sh - 1 - x; sx = sw - 1 - y; break;
            case 8: sy = x; sx = sw - 1 - y; break;
            default: sy = y; sx = x; break;
            }
            const uint8_t *p = s->data + ((size_t)sy * sw + sx) * 3;
            row[3 * x] = p[0];
            row[3 * x + 1] = p[1];
            row[3 * x + 2] = p[2];
        }
    }
    return YC_OK;
}

void yc_vips_header_of(VipsImage *im, yc_image_header *h)
{
    int o = vips_image_get_orientation(im);
    const char *loader = NULL;
    int interlaced = 0;
    h->orientation = o >= 1 && o <= 8 ? o : 1;
    h->stored_w = vips_image_get_width(im);
    h->stored_h = vips_image_get_height(im);
    h->w = h->orientation >= 5 ? h->stored_h : h->stored_w;
    h->h = h->orientation >= 5 ? h->stored_w : h->stored_h;
    h->jpeg = vips_image_get_typeof(im, VIPS_META_LOADER) &&
              !vips_image_get_string(im, VIPS_META_LOADER, &loader) && loader &&
              strncmp(loader, "jpegload", 8) == 0;
    h->interlaced = vips_image_get_typeof(im, "interlaced") &&
                    !vips_image_get_int(im, "interlaced", &interlaced) && interlaced;
}

/* The files warned about as damaged: 64-bit hashes of their paths in an open-addressing set
 * (0 marks a free slot), grown by doubling at half full. */
static pthread_mutex_t damaged_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *damaged_set;
static size_t damaged_cap, damaged_n;

static uint64_t path_hash(const char *path)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h ? h : 1;
}

/* Adds h to the set (of capacity cap, a power of two); true when it was not there. */
static bool set_add(uint64_t *set, size_t cap, uint64_t h)
{
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (set[i] == h)
            return false;
        if (set[i] == 0) {
            set[i] = h;
            return true;
        }
    }
}

void yc_image_warn_damaged(const char *path, const char *why)
{
    uint64_t h = path_hash(path);
    bool first = true;
    pthread_mutex_lock(&damaged_lock);
    if (2 * (damaged_n + 1) > damaged_cap) {
        size_t cap = damaged_cap ? 2 * damaged_cap : 64;
        uint64_t *set = calloc(cap, sizeof *set);
        if (set) {
            for (size_t i = 0; i < damaged_cap; i++)
                if (damaged_set[i])
                    set_add(set, cap, damaged_set[i]);
            free(damaged_set);
            damaged_set = set;
            damaged_cap = cap;
        }
    }
    /* without room to remember it (out of memory), the file is reported again next time */
    if (2 * (damaged_n + 1) <= damaged_cap) {
        first = set_add(damaged_set, damaged_cap, h);
        damaged_n += first;
    }
    pthread_mutex_unlock(&damaged_lock);
    if (first)
        yc_warn("%s: damaged or truncated image data (%s); decoded as far as possible (reported "
                "once)", path, why);
}

VipsImage *yc_vips_chain_last(const yc_vips_chain *c)
{
    return c->im[c->n - 1];
}

int yc_vips_chain_push(yc_vips_chain *c, VipsImage *im)
{
    if (c->n >= YC_VIPS_CHAIN_MAX) {
        g_object_unref(im);
        vips_error("yolocl", "%s", "image pipeline too long");
        return -1;
    }
    c->im[c->n++] = im;
    return 0;
}

void yc_vips_chain_free(yc_vips_chain *c)
{
    while (c->n > 0)
        g_object_unref(c->im[--c->n]);
}

static bool is_colour_managed_space(VipsInterpretation t)
{
    switch (t) {
    case VIPS_INTERPRETATION_CMYK:
    case VIPS_INTERPRETATION_LAB:
    case VIPS_INTERPRETATION_LABQ:
    case VIPS_INTERPRETATION_LABS:
    case VIPS_INTERPRETATION_LCH:
    case VIPS_INTERPRETATION_CMC:
    case VIPS_INTERPRETATION_XYZ:
    case VIPS_INTERPRETATION_YXY:
    case VIPS_INTERPRETATION_HSV:
    case VIPS_INTERPRETATION_scRGB:
        return true;
    default:
        return false;
    }
}

int yc_vips_chain_rgb8(yc_vips_chain *c, const char **step)
{
    const char *dummy;
    VipsImage *out = NULL;
    if (!step)
        step = &dummy;
    if (is_colour_managed_space(vips_image_guess_interpretation(yc_vips_chain_last(c)))) {
        *step = "colourspace to sRGB";
        if (vips_colourspace(yc_vips_chain_last(c), &out, VIPS_INTERPRETATION_sRGB, NULL) ||
            yc_vips_chain_push(c, out))
            return -1;
    }
    if (yc_vips_chain_last(c)->BandFmt == VIPS_FORMAT_USHORT) {
        *step = "16-bit to 8-bit";
        if (vips_rshift_const1(yc_vips_chain_last(c), &out, 8, NULL) || yc_vips_chain_push(c, out))
            return -1;
    }
    if (yc_vips_chain_last(c)->BandFmt != VIPS_FORMAT_UCHAR) {
        *step = "cast to 8-bit";
        if (vips_cast_uchar(yc_vips_chain_last(c), &out, NULL) || yc_vips_chain_push(c, out))
            return -1;
    }
    int bands = yc_vips_chain_last(c)->Bands;
    if (bands == 2 || bands > 3) {
        *step = "band extraction";
        if (vips_extract_band(yc_vips_chain_last(c), &out, 0, "n", bands == 2 ? 1 : 3, NULL) ||
            yc_vips_chain_push(c, out))
            return -1;
        bands = bands == 2 ? 1 : 3;
    }
    if (bands == 1) {
        *step = "gray to RGB";
        VipsImage *g = yc_vips_chain_last(c);
        VipsImage *three[3] = {g, g, g};
        if (vips_bandjoin(three, &out, 3, NULL) || yc_vips_chain_push(c, out))
            return -1;
    }
    return 0;
}

int yc_vips_copy_rgb8(VipsImage *im, int h, int w, int strip, uint8_t *dst)
{
    VipsRegion *reg = vips_region_new(im);
    if (!reg)
        return -1;
    const size_t row = (size_t)w * 3;
    for (int y = 0; y < h; y += strip) {
        VipsRect r = {0, y, w, y + strip <= h ? strip : h - y};
        if (vips_region_prepare(reg, &r)) {
            g_object_unref(reg);
            return -1;
        }
        for (int i = 0; i < r.height; i++)
            memcpy(dst + (size_t)(y + i) * row, VIPS_REGION_ADDR(reg, 0, y + i), row);
    }
    g_object_unref(reg);
    return 0;
}

/* Opens `path` and reads its pixels (stored orientation, 8-bit RGB) into `upright` when the file
 * has no EXIF rotation, else into `rotated` (for yc_image_orient); *used says which.  On failure
 * writes the failing step and libvips' message into err and returns YC_EFORMAT (YC_ENOMEM for our
 * own allocations, with yc_error set). */
static int decode_pass(const char *path, VipsFailOn fail_on, int shrink, size_t max_pixels,
                       yc_image *upright, yc_image *rotated, yc_image **used, int *orientation,
                       yc_image_header *over, char *err, size_t errlen)
{
    yc_vips_chain c = YC_VIPS_CHAIN_INIT;
    VipsImage *in;
    const char *step = "open";
    int st = YC_EFORMAT;
    char msg[400];

    if (shrink > 1)
        in = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", fail_on,
                                      "shrink", shrink, NULL);
    else
        in = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", fail_on,
                                      NULL);
    if (!in)
        goto vips_fail;
    c.im[c.n++] = in;
    *orientation = vips_image_get_orientation(in);
    if (*orientation < 1 || *orientation > 8)
        *orientation = 1;
    if (max_pixels > 0 &&
        (size_t)vips_image_get_width(in) * (size_t)vips_image_get_height(in) > max_pixels) {
        /* larger than the caller decodes whole: nothing is decoded, the header is returned */
        yc_vips_header_of(in, over);
        yc_vips_chain_free(&c);
        return YC_DECODE_OVER;
    }

    if (yc_vips_chain_rgb8(&c, &step))
        goto vips_fail;

    VipsImage *fin = yc_vips_chain_last(&c);
    int w = vips_image_get_width(fin), h = vips_image_get_height(fin);
    yc_image *dst = *orientation == 1 ? upright : rotated;
    *used = dst;
    st = yc_image_reserve(dst, h, w);
    if (st) {
        yc_vips_chain_free(&c);
        return st;
    }
    step = "pixel read";
    if (yc_vips_copy_rgb8(fin, h, w, 64, dst->data))
        goto vips_fail;
    yc_vips_chain_free(&c);
    return YC_OK;

vips_fail:
    yc_vips_error_take(msg, sizeof msg);
    snprintf(err, errlen, "%s: %s", step, msg);
    yc_vips_chain_free(&c);
    return YC_EFORMAT;
}

static int decode_common(const char *path, int shrink, size_t max_pixels, yc_image *out,
                         yc_image *tmp, yc_decode_info *info, yc_image_header *over)
{
    int st = yc_vips_init();
    if (st)
        return st;
    if (!path || !*path)
        return yc_error_status(YC_EIO, "cannot decode an image: empty file name");
    if (access(path, R_OK) != 0)
        return yc_error_status(YC_EIO, "cannot read image %s: %s", path, strerror(errno));

    yc_image own = YC_IMAGE_INIT;
    yc_image *rotated = tmp && tmp != out ? tmp : &own, *used = out;
    char err1[480] = "", err2[480] = "";
    int orient = 1;
    bool damaged = false;

    yc_image_header hdr;
    tl_current_path = path;
    st = decode_pass(path, VIPS_FAIL_ON_ERROR, shrink, max_pixels, out, rotated, &used, &orient,
                     &hdr, err1, sizeof err1);
    if (st == YC_EFORMAT) {
        st = decode_pass(path, VIPS_FAIL_ON_NONE, shrink, max_pixels, out, rotated, &used,
                         &orient, &hdr, err2, sizeof err2);
        if (st == YC_OK) {
            /* the lenient pass leaves libvips' warnings in its error buffer */
            vips_error_clear();
            damaged = true;
            yc_image_warn_damaged(path, err1);
        }
    }
    tl_current_path = NULL;
    if (st == YC_DECODE_OVER) {
        yc_image_free(&own);
        if (over)
            *over = hdr;
        return YC_DECODE_OVER;
    }
    if (st == YC_EFORMAT) {
        yc_image_free(&own);
        return yc_error_status(YC_EFORMAT, "cannot decode image %s: %s", path,
                               *err2 ? err2 : err1);
    }
    if (st) {
        yc_image_free(&own);
        return yc_error_context(st, "decoding %s", path);
    }
    if (used != out)
        st = yc_image_orient(used, out, orient);
    yc_image_free(&own);
    if (st)
        return yc_error_context(st, "decoding %s", path);
    if (info) {
        info->orientation = orient;
        info->damaged = damaged;
    }
    return YC_OK;
}

int yc_image_decode(const char *path, yc_image *out, yc_image *tmp, yc_decode_info *info)
{
    return decode_common(path, 1, 0, out, tmp, info, NULL);
}

int yc_image_decode_bounded(const char *path, size_t max_pixels, yc_image *out, yc_image *tmp,
                            yc_decode_info *info, yc_image_header *over)
{
    return decode_common(path, 1, max_pixels, out, tmp, info, over);
}

int yc_image_decode_shrunk(const char *path, int factor, yc_image *out, yc_image *tmp,
                           yc_decode_info *info)
{
    if (factor != 1 && factor != 2 && factor != 4 && factor != 8)
        return yc_error_status(YC_EUSAGE, "shrink-on-load factor %d (use 1, 2, 4 or 8)", factor);
    int st = yc_vips_init();
    if (st)
        return st;
    const char *loader = factor > 1 ? vips_foreign_find_load(path) : NULL;
    if (!loader)
        vips_error_clear();
    bool native = loader && (strstr(loader, "Jpeg") || strstr(loader, "jpeg"));
    if (factor == 1 || native)
        return decode_common(path, native ? factor : 1, 0, out, tmp, info, NULL);
    yc_image full = YC_IMAGE_INIT;
    st = decode_common(path, 1, 0, &full, tmp, info, NULL);
    if (!st)
        st = yc_image_resize(&full, out, (full.h + factor - 1) / factor,
                             (full.w + factor - 1) / factor, YC_INTERP_AREA);
    yc_image_free(&full);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * load_image and letterbox
 * ---------------------------------------------------------------------------------------------- */

int yc_load_resize(const yc_image *full, int imgsz, bool augment, yc_image *out,
                   yc_load_info *info)
{
    if (imgsz < 1)
        return yc_error_status(YC_EUSAGE, "image size %d must be positive", imgsz);
    int h0 = full->h, w0 = full->w;
    double r = (double)imgsz / (h0 > w0 ? h0 : w0);
    int h = h0, w = w0, st;
    if (r != 1.0) {
        w = (int)(w0 * r);
        h = (int)(h0 * r);
        if (w < 1)
            w = 1;
        if (h < 1)
            h = 1;
        st = yc_image_resize(full, out, h, w,
                             (augment || r > 1) ? YC_INTERP_LINEAR : YC_INTERP_AREA);
    } else {
        st = yc_image_copy(out, full);
    }
    if (st)
        return st;
    if (info) {
        info->h0 = h0;
        info->w0 = w0;
        info->h = h;
        info->w = w;
    }
    return YC_OK;
}

/* Python's round() of a float: half to even (rint in the default rounding mode). */
static inline double py_round(double x)
{
    return rint(x);
}

void yc_letterbox_geometry(int h, int w, int new_h, int new_w, bool auto_, bool scale_fill,
                           bool scaleup, int stride, yc_letterbox_info *info)
{
    double r = fmin((double)new_h / h, (double)new_w / w);
    if (!scaleup)
        r = fmin(r, 1.0);
    double ratio_w = r, ratio_h = r;
    int unpad_w = (int)py_round(w * r), unpad_h = (int)py_round(h * r);
    int dwi = new_w - unpad_w, dhi = new_h - unpad_h;
    if (auto_ && stride > 0) {
        dwi = ((dwi % stride) + stride) % stride;
        dhi = ((dhi % stride) + stride) % stride;
    } else if (scale_fill) {
        dwi = dhi = 0;
        unpad_w = new_w;
        unpad_h = new_h;
        ratio_w = (double)new_w / w;
        ratio_h = (double)new_h / h;
    }
    double dw = dwi / 2.0, dh = dhi / 2.0;
    info->ratio_w = ratio_w;
    info->ratio_h = ratio_h;
    info->pad_w = dw;
    info->pad_h = dh;
    info->top = (int)py_round(dh - 0.1);
    info->bottom = (int)py_round(dh + 0.1);
    info->left = (int)py_round(dw - 0.1);
    info->right = (int)py_round(dw + 0.1);
    info->unpad_h = unpad_h;
    info->unpad_w = unpad_w;
    info->out_h = unpad_h + info->top + info->bottom;
    info->out_w = unpad_w + info->left + info->right;
}

/* dst = the letterbox of geometry g around src resized to the unpadded size (a copy when it has
 * that size already), borders 114. */
static int letterbox_into(const yc_image *src, const yc_letterbox_info *gp, yc_image *dst)
{
    const yc_letterbox_info g = *gp;
    int st = yc_image_reserve(dst, g.out_h, g.out_w);
    if (st)
        return st;
    size_t stride_b = (size_t)g.out_w * 3;
    uint8_t *d = dst->data;
    memset(d, 114, (size_t)g.top * stride_b);
    memset(d + (size_t)(g.top + g.unpad_h) * stride_b, 114, (size_t)g.bottom * stride_b);
    for (int y = 0; y < g.unpad_h; y++) {
        uint8_t *row = d + (size_t)(g.top + y) * stride_b;
        memset(row, 114, (size_t)g.left * 3);
        memset(row + (size_t)(g.left + g.unpad_w) * 3, 114, (size_t)g.right * 3);
    }
    return yc_image_resize_into(src, d + (size_t)g.top * stride_b + (size_t)g.left * 3,
                                stride_b, g.unpad_h, g.unpad_w, YC_INTERP_LINEAR);
}

int yc_letterbox(const yc_image *src, yc_image *dst, int new_h, int new_w, bool auto_,
                 bool scale_fill, bool scaleup, int stride, yc_letterbox_info *info)
{
    yc_letterbox_info g;
    if (src == dst)
        return yc_error("letterbox: source and destination are the same image");
    if (new_h < 1 || new_w < 1)
        return yc_error_status(YC_EUSAGE, "letterbox: invalid target %dx%d", new_w, new_h);
    yc_letterbox_geometry(src->h, src->w, new_h, new_w, auto_, scale_fill, scaleup, stride, &g);
    if (g.unpad_h < 1 || g.unpad_w < 1)
        return yc_error_status(YC_EFORMAT, "letterbox: %dx%d image shrinks to nothing in %dx%d",
                               src->w, src->h, new_w, new_h);
    int st = letterbox_into(src, &g, dst);
    if (st)
        return st;
    if (info)
        *info = g;
    return YC_OK;
}

int yc_letterbox_fill(const yc_image *content, const yc_letterbox_info *g, yc_image *dst)
{
    if (content == dst)
        return yc_error("letterbox: source and destination are the same image");
    if (content->h != g->unpad_h || content->w != g->unpad_w)
        return yc_error_status(YC_EUSAGE, "letterbox: content %dx%d, expected %dx%d", content->w,
                               content->h, g->unpad_w, g->unpad_h);
    return letterbox_into(content, g, dst);
}

/* ------------------------------------------------------------------------------------------------
 * Saving
 * ---------------------------------------------------------------------------------------------- */

int yc_image_save(const yc_image *im, const char *path, int orientation)
{
    int st = yc_vips_init();
    if (st)
        return st;
    char msg[400];
    VipsImage *v = vips_image_new_from_memory(im->data, (size_t)im->h * im->w * 3, im->w, im->h,
                                              3, VIPS_FORMAT_UCHAR);
    if (!v) {
        yc_vips_error_take(msg, sizeof msg);
        return yc_error_status(YC_EIO, "cannot save image %s: wrapping pixels: %s", path, msg);
    }
    if (orientation >= 2 && orientation <= 8)
        vips_image_set_int(v, VIPS_META_ORIENTATION, orientation);
    if (vips_image_write_to_file(v, path, NULL)) {
        yc_vips_error_take(msg, sizeof msg);
        g_object_unref(v);
        return yc_error_status(YC_EIO, "cannot save image %s: %s", path, msg);
    }
    g_object_unref(v);
    return YC_OK;
}
