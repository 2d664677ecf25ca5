/* Drawing primitives, the built-in font, image encoding and YOLOv5's plots (see draw.h). */
#include "draw.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <vips/vips.h>

#include "image.h"
#include "log.h"
#include "util.h"

/* ------------------------------------------------------------------------------------------------
 * libvips start-up and encoding
 * ---------------------------------------------------------------------------------------------- */

/* Records libvips' error text after "what: " and clears it. */
static int vips_fail(int status, const char *what)
{
    char *e = vips_error_buffer_copy();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", e && *e ? e : "libvips error");
    g_free(e);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    return yc_error_status(status, "%s: %s", what, msg);
}

int yc_encode_rgb(const uint8_t *px, int w, int h, yc_image_format format, int quality,
                  void **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (w < 1 || h < 1)
        return yc_error_status(YC_EFORMAT, "cannot encode a %dx%d image", w, h);
    int st = yc_vips_init();
    if (st)
        return st;
    VipsImage *im = vips_image_new_from_memory(px, (size_t)w * h * 3, w, h, 3, VIPS_FORMAT_UCHAR);
    if (!im)
        return vips_fail(YC_ERR, "cannot wrap pixels for encoding");
    int r;
    if (format == YC_IMAGE_PNG)
        r = vips_pngsave_buffer(im, buf, len, "compression", 6, NULL);
    else
        r = vips_jpegsave_buffer(im, buf, len, "Q", quality, NULL);
    g_object_unref(im);
    if (r != 0) {
        *buf = NULL;
        *len = 0;
        return vips_fail(YC_ERR, format == YC_IMAGE_PNG ? "PNG encoding failed"
                                                        : "JPEG encoding failed");
    }
    return YC_OK;
}

void yc_encoded_free(void *buf)
{
    g_free(buf);
}

/* The format from a file name's extension (case-insensitive). */
static int format_of(const char *path, yc_image_format *fmt)
{
    const char *dot = strrchr(path, '.');
    if (dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"))) {
        *fmt = YC_IMAGE_JPEG;
        return YC_OK;
    }
    if (dot && !strcasecmp(dot, ".png")) {
        *fmt = YC_IMAGE_PNG;
        return YC_OK;
    }
    return yc_error_status(YC_EUNSUPPORTED, "%s: images are saved as .jpg or .png", path);
}

/* ------------------------------------------------------------------------------------------------
 * Canvas
 * ---------------------------------------------------------------------------------------------- */

int yc_canvas_init(yc_canvas *c, int w, int h, yc_rgb fill)
{
    memset(c, 0, sizeof *c);
    if (w < 1 || h < 1 || w > 65535 || h > 65535)
        return yc_error_status(YC_EFORMAT, "canvas size %dx%d out of range", w, h);
    size_t n = (size_t)w * h;
    c->px = yc_malloc(n * 3, "canvas pixels");
    if (!c->px)
        return YC_ENOMEM;
    c->w = w;
    c->h = h;
    c->owned = true;
    for (size_t i = 0; i < n; i++) {
        c->px[3 * i] = fill.r;
        c->px[3 * i + 1] = fill.g;
        c->px[3 * i + 2] = fill.b;
    }
    return YC_OK;
}

yc_canvas yc_canvas_wrap(uint8_t *px, int w, int h)
{
    yc_canvas c = {.px = px, .w = w, .h = h, .owned = false};
    return c;
}

void yc_canvas_free(yc_canvas *c)
{
    if (c->owned)
        free(c->px);
    memset(c, 0, sizeof *c);
}

int yc_canvas_save(const yc_canvas *c, const char *path)
{
    yc_image_format fmt = YC_IMAGE_JPEG;
    int st = format_of(path, &fmt);
    if (st)
        return st;
    void *buf;
    size_t len;
    st = yc_encode_rgb(c->px, c->w, c->h, fmt, 90, &buf, &len);
    if (st)
        return yc_error_context(st, "%s", path);
    st = yc_write_file_atomic(path, buf, len);
    g_free(buf);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Colours
 * ---------------------------------------------------------------------------------------------- */

static const char *const yolov5_palette[20] = {
    "FF3838", "FF9D97", "FF701F", "FFB21D", "CFD231", "48F90A", "92CC17", "3DDB86", "1A9334", "00D4BB",
    "2C99A8", "00C2FF", "344593", "6473FF", "0018EC", "8438FF", "520085", "CB38FF", "FF95C8", "FF37C7",
};

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = tolower(ch);
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

int yc_color_parse(const char *hex, yc_rgb *out)
{
    const char *s = hex[0] == '#' ? hex + 1 : hex;
    if (strlen(s) != 6)
        return yc_error_status(YC_EFORMAT, "colour '%s' is not RRGGBB hex", hex);
    uint8_t v[3];
    for (int i = 0; i < 3; i++) {
        int hi = hexval((unsigned char)s[2 * i]), lo = hexval((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return yc_error_status(YC_EFORMAT, "colour '%s' is not RRGGBB hex", hex);
        v[i] = (uint8_t)(hi * 16 + lo);
    }
    out->r = v[0];
    out->g = v[1];
    out->b = v[2];
    return YC_OK;
}

static yc_rgb rgb(uint32_t hex)
{
    yc_rgb c = {(uint8_t)(hex >> 16), (uint8_t)(hex >> 8), (uint8_t)hex};
    return c;
}

yc_rgb yc_color_class(int cls)
{
    if (cls < 0)
        cls = -cls;
    yc_rgb c = {0, 0, 0};
    yc_color_parse(yolov5_palette[cls % 20], &c);
    return c;
}

static const yc_rgb WHITE = {255, 255, 255};
static const yc_rgb BLACK = {0, 0, 0};

/* matplotlib's tab10 cycle (the default line colours). */
static yc_rgb tab10(int i)
{
    static const uint32_t t[10] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                   0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
    return rgb(t[(i < 0 ? -i : i) % 10]);
}

/* matplotlib's "Blues" colour map at t in [0, 1]. */
static yc_rgb cmap_blues(double t)
{
    static const uint32_t stops[9] = {0xf7fbff, 0xdeebf7, 0xc6dbef, 0x9ecae1, 0x6baed6,
                                      0x4292c6, 0x2171b5, 0x08519c, 0x08306b};
    if (!(t > 0))
        t = 0;
    if (t > 1)
        t = 1;
    double f = t * 8;
    int i = (int)f;
    if (i >= 8)
        i = 7;
    f -= i;
    yc_rgb a = rgb(stops[i]), b = rgb(stops[i + 1]);
    yc_rgb c = {(uint8_t)lround(a.r + (b.r - a.r) * f), (uint8_t)lround(a.g + (b.g - a.g) * f),
                (uint8_t)lround(a.b + (b.b - a.b) * f)};
    return c;
}

/* ------------------------------------------------------------------------------------------------
 * Primitives
 * ---------------------------------------------------------------------------------------------- */

static inline void put(yc_canvas *c, int x, int y, yc_rgb color)
{
    uint8_t *p = c->px + 3 * ((size_t)y * c->w + x);
    p[0] = color.r;
    p[1] = color.g;
    p[2] = color.b;
}

void yc_draw_pixel(yc_canvas *c, int x, int y, yc_rgb color)
{
    if (x >= 0 && y >= 0 && x < c->w && y < c->h)
        put(c, x, y, color);
}

static void swap_int(int *a, int *b)
{
    int t = *a;
    *a = *b;
    *b = t;
}

void yc_draw_fill_rect(yc_canvas *c, int x0, int y0, int x1, int y1, yc_rgb color)
{
    if (x0 > x1)
        swap_int(&x0, &x1);
    if (y0 > y1)
        swap_int(&y0, &y1);
    if (x0 < 0)
        x0 = 0;
    if (y0 < 0)
        y0 = 0;
    if (x1 >= c->w)
        x1 = c->w - 1;
    if (y1 >= c->h)
        y1 = c->h - 1;
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++)
            put(c, x, y, color);
}

void yc_draw_box(yc_canvas *c, int x0, int y0, int x1, int y1, int thickness, yc_rgb color)
{
    if (x0 > x1)
        swap_int(&x0, &x1);
    if (y0 > y1)
        swap_int(&y0, &y1);
    int t = thickness < 1 ? 1 : thickness;
    if (2 * t > x1 - x0 || 2 * t > y1 - y0) {
        yc_draw_fill_rect(c, x0, y0, x1, y1, color);
        return;
    }
    yc_draw_fill_rect(c, x0, y0, x1, y0 + t - 1, color);
    yc_draw_fill_rect(c, x0, y1 - t + 1, x1, y1, color);
    yc_draw_fill_rect(c, x0, y0 + t, x0 + t - 1, y1 - t, color);
    yc_draw_fill_rect(c, x1 - t + 1, y0 + t, x1, y1 - t, color);
}

void yc_draw_disc(yc_canvas *c, double cx, double cy, double r, yc_rgb color)
{
    if (!isfinite(cx) || !isfinite(cy) || !(r > 0))
        return;
    if (r < 0.5) {
        yc_draw_pixel(c, (int)floor(cx), (int)floor(cy), color);
        return;
    }
    int y0 = (int)floor(cy - r), y1 = (int)ceil(cy + r);
    int x0 = (int)floor(cx - r), x1 = (int)ceil(cx + r);
    if (y0 < 0)
        y0 = 0;
    if (x0 < 0)
        x0 = 0;
    if (y1 >= c->h)
        y1 = c->h - 1;
    if (x1 >= c->w)
        x1 = c->w - 1;
    double r2 = r * r;
    for (int y = y0; y <= y1; y++) {
        double dy = y + 0.5 - cy;
        for (int x = x0; x <= x1; x++) {
            double dx = x + 0.5 - cx;
            if (dx * dx + dy * dy <= r2)
                put(c, x, y, color);
        }
    }
}

/* A capsule: every pixel whose centre lies within r of the segment (x0,y0)-(x1,y1).  Rows are
 * scanned only over the x span the segment can reach on them. */
static void capsule(yc_canvas *c, double x0, double y0, double x1, double y1, double r,
                    yc_rgb color)
{
    double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
    int ya = (int)floor(fmin(y0, y1) - r), yb = (int)ceil(fmax(y0, y1) + r);
    if (ya < 0)
        ya = 0;
    if (yb >= c->h)
        yb = c->h - 1;
    double r2 = r * r;
    for (int y = ya; y <= yb; y++) {
        double py = y + 0.5;
        double xa, xb;
        if (fabs(dy) < 1e-12) {
            xa = fmin(x0, x1);
            xb = fmax(x0, x1);
        } else {
            double ta = (py - r - y0) / dy, tb = (py + r - y0) / dy;
            if (ta > tb) {
                double t = ta;
                ta = tb;
                tb = t;
            }
            ta = fmax(ta, 0.0);
            tb = fmin(tb, 1.0);
            if (ta > tb)
                continue;
            xa = fmin(x0 + dx * ta, x0 + dx * tb);
            xb = fmax(x0 + dx * ta, x0 + dx * tb);
        }
        int xs = (int)floor(xa - r), xe = (int)ceil(xb + r);
        if (xs < 0)
            xs = 0;
        if (xe >= c->w)
            xe = c->w - 1;
        for (int x = xs; x <= xe; x++) {
            double px = x + 0.5;
            double t = len2 > 0 ? ((px - x0) * dx + (py - y0) * dy) / len2 : 0;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            double ex = x0 + dx * t - px, ey = y0 + dy * t - py;
            if (ex * ex + ey * ey <= r2)
                put(c, x, y, color);
        }
    }
}

void yc_draw_line(yc_canvas *c, double x0, double y0, double x1, double y1, int thickness,
                  yc_rgb color)
{
    if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1))
        return;
    double r = (thickness < 1 ? 1 : thickness) / 2.0;
    capsule(c, x0, y0, x1, y1, r, color);
}

void yc_draw_polyline(yc_canvas *c, const double *x, const double *y, int n, int thickness,
                      int dash, yc_rgb color)
{
    double along = 0;
    for (int i = 0; i + 1 < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i]) || !isfinite(x[i + 1]) || !isfinite(y[i + 1]))
            continue;
        if (dash <= 0) {
            yc_draw_line(c, x[i], y[i], x[i + 1], y[i + 1], thickness, color);
            continue;
        }
        double dx = x[i + 1] - x[i], dy = y[i + 1] - y[i];
        double len = sqrt(dx * dx + dy * dy);
        double s = 0;
        while (s < len) {
            double phase = fmod(along, 2.0 * dash);
            double room = (phase < dash ? dash - phase : 2.0 * dash - phase);
            double e = fmin(len, s + room);
            if (phase < dash && len > 0)
                yc_draw_line(c, x[i] + dx * s / len, y[i] + dy * s / len, x[i] + dx * e / len,
                             y[i] + dy * e / len, thickness, color);
            along += e - s;
            s = e;
        }
    }
}

/* ------------------------------------------------------------------------------------------------
 * The built-in 5x7 font: printable ASCII 32..126, five column bytes per character, bit k of a
 * column byte is row k (top row = bit 0).
 * ---------------------------------------------------------------------------------------------- */

static const uint8_t font5x7[95][5] = {
    {0x00, 0x00, 0x00, 0x00, 0x00}, /*   */
    {0x00, 0x00, 0x5F, 0x00, 0x00}, /* ! */
    {0x00, 0x07, 0x00, 0x07, 0x00}, /* " */
    {0x14, 0x7F, 0x14, 0x7F, 0x14}, /* # */
    {0x24, 0x2A, 0x7F, 0x2A, 0x12}, /* $ */
    {0x23, 0x13, 0x08, 0x64, 0x62}, /* % */
    {0x36, 0x49, 0x55, 0x22, 0x50}, /* & */
    {0x00, 0x05, 0x03, 0x00, 0x00}, /* ' */
    {0x00, 0x1C, 0x22, 0x41, 0x00}, /* ( */
    {0x00, 0x41, 0x22, 0x1C, 0x00}, /* ) */
    {0x14, 0x08, 0x3E, 0x08, 0x14}, /* * */
    {0x08, 0x08, 0x3E, 0x08, 0x08}, /* + */
    {0x00, 0x50, 0x30, 0x00, 0x00}, /* , */
    {0x08, 0x08, 0x08, 0x08, 0x08}, /* - */
    {0x00, 0x60, 0x60, 0x00, 0x00}, /* . */
    {0x20, 0x10, 0x08, 0x04, 0x02}, /* / */
    {0x3E, 0x51, 0x49, 0x45, 0x3E}, /* 0 */
    {0x00, 0x42, 0x7F, 0x40, 0x00}, /* 1 */
    {0x42, 0x61, 0x51, 0x49, 0x46}, /* 2 */
    {0x21, 0x41, 0x45, 0x4B, 0x31}, /* 3 */
    {0x18, 0x14, 0x12, 0x7F, 0x10}, /* 4 */
    {0x27, 0x45, 0x45, 0x45, 0x39}, /* 5 */
    {0x3C, 0x4A, 0x49, 0x49, 0x30}, /* 6 */
    {0x01, 0x71, 0x09, 0x05, 0x03}, /* 7 */
    {0x36, 0x49, 0x49, 0x49, 0x36}, /* 8 */
    {0x06, 0x49, 0x49, 0x29, 0x1E}, /* 9 */
    {0x00, 0x36, 0x36, 0x00, 0x00}, /* : */
    {0x00, 0x56, 0x36, 0x00, 0x00}, /* ; */
    {0x08, 0x14, 0x22, 0x41, 0x00}, /* < */
    {0x14, 0x14, 0x14, 0x14, 0x14}, /* = */
    {0x00, 0x41, 0x22, 0x14, 0x08}, /* > */
    {0x02, 0x01, 0x51, 0x09, 0x06}, /* ? */
    {0x32, 0x49, 0x79, 0x41, 0x3E}, /* @ */
    {0x7E, 0x11, 0x11, 0x11, 0x7E}, /* A */
    {0x7F, 0x49, 0x49, 0x49, 0x36}, /* B */
    {0x3E, 0x41, 0x41, 0x41, 0x22}, /* C */
    {0x7F, 0x41, 0x41, 0x22, 0x1C}, /* D */
    {0x7F, 0x49, 0x49, 0x49, 0x41}, /* E */
    {0x7F, 0x09, 0x09, 0x09, 0x01}, /* F */
    {0x3E, 0x41, 0x49, 0x49, 0x7A}, /* G */
    {0x7F, 0x08, 0x08, 0x08, 0x7F}, /* H */
    {0x00, 0x41, 0x7F, 0x41, 0x00}, /* I */
    {0x20, 0x40, 0x41, 0x3F, 0x01}, /* J */
    {0x7F, 0x08, 0x14, 0x22, 0x41}, /* K */
    {0x7F, 0x40, 0x40, 0x40, 0x40}, /* L */
    {0x7F, 0x02, 0x0C, 0x02, 0x7F}, /* M */
    {0x7F, 0x04, 0x08, 0x10, 0x7F}, /* N */
    {0x3E, 0x41, 0x41, 0x41, 0x3E}, /* O */
    {0x7F, 0x09, 0x09, 0x09, 0x06}, /* P */
    {0x3E, 0x41, 0x51, 0x21, 0x5E}, /* Q */
    {0x7F, 0x09, 0x19, 0x29, 0x46}, /* R */
    {0x46, 0x49, 0x49, 0x49, 0x31}, /* S */
    {0x01, 0x01, 0x7F, 0x01, 0x01}, /* T */
    {0x3F, 0x40, 0x40, 0x40, 0x3F}, /* U */
    {0x1F, 0x20, 0x40, 0x20, 0x1F}, /* V */
    {0x3F, 0x40, 0x38, 0x40, 0x3F}, /* W */
    {0x63, 0x14, 0x08, 0x14, 0x63}, /* X */
    {0x07, 0x08, 0x70, 0x08, 0x07}, /* Y */
    {0x61, 0x51, 0x49, 0x45, 0x43}, /* Z */
    {0x00, 0x7F, 0x41, 0x41, 0x00}, /* [ */
    {0x02, 0x04, 0x08, 0x10, 0x20}, /* \ */
    {0x00, 0x41, 0x41, 0x7F, 0x00}, /* ] */
    {0x04, 0x02, 0x01, 0x02, 0x04}, /* ^ */
    {0x40, 0x40, 0x40, 0x40, 0x40}, /* _ */
    {0x00, 0x01, 0x02, 0x04, 0x00}, /* ` */
    {0x20, 0x54, 0x54, 0x54, 0x78}, /* a */
    {0x7F, 0x48, 0x44, 0x44, 0x38}, /* b */
    {0x38, 0x44, 0x44, 0x44, 0x20}, /* c */
    {0x38, 0x44, 0x44, 0x48, 0x7F}, /* d */
    {0x38, 0x54, 0x54, 0x54, 0x18}, /* e */
    {0x08, 0x7E, 0x09, 0x01, 0x02}, /* f */
    {0x0C, 0x52, 0x52, 0x52, 0x3E}, /* g */
    {0x7F, 0x08, 0x04, 0x04, 0x78}, /* h */
    {0x00, 0x44, 0x7D, 0x40, 0x00}, /* i */
    {0x20, 0x40, 0x44, 0x3D, 0x00}, /* j */
    {0x7F, 0x10, 0x28, 0x44, 0x00}, /* k */
    {0x00, 0x41, 0x7F, 0x40, 0x00}, /* l */
    {0x7C, 0x04, 0x18, 0x04, 0x78}, /* m */
    {0x7C, 0x08, 0x04, 0x04, 0x78}, /* n */
    {0x38, 0x44, 0x44, 0x44, 0x38}, /* o */
    {0x7C, 0x14, 0x14, 0x14, 0x08}, /* p */
    {0x08, 0x14, 0x14, 0x18, 0x7C}, /* q */
    {0x7C, 0x08, 0x04, 0x04, 0x08}, /* r */
    {0x48, 0x54, 0x54, 0x54, 0x20}, /* s */
    {0x04, 0x3F, 0x44, 0x40, 0x20}, /* t */
    {0x3C, 0x40, 0x40, 0x20, 0x7C}, /* u */
    {0x1C, 0x20, 0x40, 0x20, 0x1C}, /* v */
    {0x3C, 0x40, 0x30, 0x40, 0x3C}, /* w */
    {0x44, 0x28, 0x10, 0x28, 0x44}, /* x */
    {0x0C, 0x50, 0x50, 0x50, 0x3C}, /* y */
    {0x44, 0x64, 0x54, 0x4C, 0x44}, /* z */
    {0x00, 0x08, 0x36, 0x41, 0x00}, /* { */
    {0x00, 0x00, 0x7F, 0x00, 0x00}, /* | */
    {0x00, 0x41, 0x36, 0x08, 0x00}, /* } */
    {0x08, 0x04, 0x08, 0x10, 0x08}, /* ~ */
};

static const uint8_t *glyph(unsigned char ch)
{
    if (ch < 32 || ch > 126)
        ch = '?';
    return font5x7[ch - 32];
}

int yc_text_width(const char *text, int scale)
{
    if (scale < 1)
        scale = 1;
    size_t n = strlen(text);
    return n ? (int)(6 * n - 1) * scale : 0;
}

int yc_text_height(int scale)
{
    return 7 * (scale < 1 ? 1 : scale);
}

/* Draws the text; `up` rotates it 90 degrees counter-clockwise about (x, y) as in draw.h. */
static void text_impl(yc_canvas *c, int x, int y, const char *text, int scale, yc_rgb color,
                      bool up)
{
    int s = scale < 1 ? 1 : scale;
    for (int i = 0; text[i]; i++) {
        const uint8_t *g = glyph((unsigned char)text[i]);
        for (int col = 0; col < 5; col++) {
            for (int row = 0; row < 7; row++) {
                if (!(g[col] >> row & 1))
                    continue;
                int u = (6 * i + col) * s, v = row * s;
                if (up)
                    yc_draw_fill_rect(c, x + v, y - u - s + 1, x + v + s - 1, y - u, color);
                else
                    yc_draw_fill_rect(c, x + u, y + v, x + u + s - 1, y + v + s - 1, color);
            }
        }
    }
}

void yc_draw_text(yc_canvas *c, int x, int y, const char *text, int scale, yc_rgb color)
{
    text_impl(c, x, y, text, scale, color, false);
}

void yc_draw_text_up(yc_canvas *c, int x, int y, const char *text, int scale, yc_rgb color)
{
    text_impl(c, x, y, text, scale, color, true);
}

/* Corners of the label box of a box whose top-left corner is (x0, y0) (picture pixels, x0 <= x1,
 * y0 <= y1): above the box when it fits below the picture's row 0, else inside the box's top. */
static void label_rect(int x0, int y0, const char *label, int text_scale, int *lx1, int *ly0,
                       int *ly1)
{
    int s = text_scale < 1 ? 1 : text_scale;
    int pad = s + 1;
    int tw = yc_text_width(label, s) + 2 * pad, th = yc_text_height(s) + 2 * pad;
    *ly0 = y0 - th >= 0 ? y0 - th : y0;
    *ly1 = *ly0 + th - 1;
    *lx1 = x0 + tw - 1;
}

void yc_draw_label_at(yc_canvas *c, int ox, int oy, int x0, int y0, int x1, int y1,
                      const char *label, int thickness, int text_scale, yc_rgb color)
{
    if (x0 > x1)
        swap_int(&x0, &x1);
    if (y0 > y1)
        swap_int(&y0, &y1);
    yc_draw_box(c, x0 - ox, y0 - oy, x1 - ox, y1 - oy, thickness, color);
    if (!label || !label[0])
        return;
    int s = text_scale < 1 ? 1 : text_scale;
    int pad = s + 1, lx1, ly0, ly1;
    label_rect(x0, y0, label, s, &lx1, &ly0, &ly1);
    yc_draw_fill_rect(c, x0 - ox, ly0 - oy, lx1 - ox, ly1 - oy, color);
    yc_draw_text(c, x0 + pad - ox, ly0 + pad - oy, label, s, WHITE);
}

void yc_draw_label(yc_canvas *c, int x0, int y0, int x1, int y1, const char *label, int thickness,
                   int text_scale, yc_rgb color)
{
    yc_draw_label_at(c, 0, 0, x0, y0, x1, y1, label, thickness, text_scale, color);
}

void yc_label_bounds(int x0, int y0, int x1, int y1, const char *label, int text_scale,
                     int bounds[4])
{
    if (x0 > x1)
        swap_int(&x0, &x1);
    if (y0 > y1)
        swap_int(&y0, &y1);
    bounds[0] = x0;
    bounds[1] = y0;
    bounds[2] = x1;
    bounds[3] = y1;
    if (!label || !label[0])
        return;
    int lx1, ly0, ly1;
    label_rect(x0, y0, label, text_scale, &lx1, &ly0, &ly1);
    if (ly0 < bounds[1])
        bounds[1] = ly0;
    if (lx1 > bounds[2])
        bounds[2] = lx1;
    if (ly1 > bounds[3])
        bounds[3] = ly1;
}

/* ------------------------------------------------------------------------------------------------
 * Axes
 * ---------------------------------------------------------------------------------------------- */

/* A plot area: its pixel rectangle and the data ranges it shows. */
typedef struct panel {
    /* top-left pixel and size of the plot area */
    int x, y, w, h;
    /* data range along x and y */
    double x0, x1, y0, y1;
} panel;

static double map_x(const panel *p, double v)
{
    return p->x + (v - p->x0) / (p->x1 - p->x0) * (p->w - 1) + 0.5;
}

static double map_y(const panel *p, double v)
{
    return p->y + p->h - 1 - (v - p->y0) / (p->y1 - p->y0) * (p->h - 1) + 0.5;
}

/* Tick values at 1, 2, 2.5 or 5 times a power of ten covering [lo, hi]; returns the count and
 * the number of decimals to print them with. */
static int nice_ticks(double lo, double hi, int target, double *ticks, int cap, int *decimals)
{
    double span = hi - lo;
    if (!(span > 0) || !isfinite(span)) {
        *decimals = 2;
        return 0;
    }
    double raw = span / target;
    double mag = pow(10, floor(log10(raw)));
    double norm = raw / mag, mult;
    int extra = 0;
    if (norm <= 1)
        mult = 1;
    else if (norm <= 2)
        mult = 2;
    else if (norm <= 2.5) {
        mult = 2.5;
        extra = 1;
    } else if (norm <= 5)
        mult = 5;
    else
        mult = 10;
    double step = mult * mag;
    int d = (int)-floor(log10(step) + 1e-9) + extra;
    *decimals = d < 0 ? 0 : d > 8 ? 8 : d;
    int n = 0;
    for (double v = ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9 && n < cap; v += step)
        ticks[n++] = fabs(v) < step * 1e-9 ? 0.0 : v;
    return n;
}

/* Frame, ticks with labels on both axes, the title centred above, and optional axis labels. */
static void draw_axes(yc_canvas *c, const panel *p, const char *title, const char *xlabel,
                      const char *ylabel, int scale)
{
    const yc_rgb grey = {90, 90, 90};
    double t[32];
    int dec;
    char buf[64];
    int th = yc_text_height(scale);
    int n = nice_ticks(p->x0, p->x1, 5, t, 32, &dec);
    for (int i = 0; i < n; i++) {
        int px = (int)map_x(p, t[i]);
        yc_draw_fill_rect(c, px, p->y + p->h, px, p->y + p->h + 4, grey);
        snprintf(buf, sizeof buf, "%.*f", dec, t[i]);
        yc_draw_text(c, px - yc_text_width(buf, scale) / 2, p->y + p->h + 8, buf, scale, BLACK);
    }
    n = nice_ticks(p->y0, p->y1, 5, t, 32, &dec);
    for (int i = 0; i < n; i++) {
        int py = (int)map_y(p, t[i]);
        yc_draw_fill_rect(c, p->x - 5, py, p->x - 1, py, grey);
        snprintf(buf, sizeof buf, "%.*f", dec, t[i]);
        yc_draw_text(c, p->x - 9 - yc_text_width(buf, scale), py - th / 2, buf, scale, BLACK);
    }
    yc_draw_box(c, p->x - 1, p->y - 1, p->x + p->w, p->y + p->h, 1, BLACK);
    if (title) {
        int ts = scale + 1;
        while (ts > 1 && yc_text_width(title, ts) > p->w + 40)
            ts--;
        yc_draw_text(c, p->x + (p->w - yc_text_width(title, ts)) / 2,
                     p->y - yc_text_height(ts) - 10, title, ts, BLACK);
    }
    if (xlabel)
        yc_draw_text(c, p->x + (p->w - yc_text_width(xlabel, scale)) / 2,
                     p->y + p->h + 16 + th, xlabel, scale, BLACK);
    if (ylabel) {
        int wmax = 0;
        for (int i = 0; i < n; i++) {
            snprintf(buf, sizeof buf, "%.*f", dec, t[i]);
            int w = yc_text_width(buf, scale);
            wmax = w > wmax ? w : wmax;
        }
        yc_draw_text_up(c, p->x - 18 - wmax - th, p->y + (p->h + yc_text_width(ylabel, scale)) / 2,
                        ylabel, scale, BLACK);
    }
}

/* Expands [lo, hi] by 5% on both sides as matplotlib's autoscale does (a point becomes a small
 * range around it). */
static void auto_range(double lo, double hi, double *a, double *b)
{
    if (!isfinite(lo) || !isfinite(hi)) {
        *a = 0;
        *b = 1;
        return;
    }
    double span = hi - lo;
    if (span <= fabs(hi) * 1e-9 || span <= 1e-12) {
        double d = fabs(hi) > 1e-9 ? fabs(hi) * 0.05 : 0.05;
        *a = lo - d;
        *b = hi + d;
        return;
    }
    *a = lo - 0.05 * span;
    *b = hi + 0.05 * span;
}

/* ------------------------------------------------------------------------------------------------
 * train_batch mosaics
 * ---------------------------------------------------------------------------------------------- */

/* Channel ch (0 = R) of pixel (x, y) of a batch image, 0..255. */
static double sample_px(const yc_plot_image *im, int x, int y, int ch)
{
    size_t plane = (size_t)im->w * im->h;
    switch (im->layout) {
    case YC_PIX_U8_CHW:
        return ((const uint8_t *)im->px)[ch * plane + (size_t)y * im->w + x];
    case YC_PIX_F32_CHW: {
        double v = ((const float *)im->px)[ch * plane + (size_t)y * im->w + x] * 255.0;
        return v < 0 ? 0 : v > 255 ? 255 : v;
    }
    case YC_PIX_U8_HWC:
    default:
        return ((const uint8_t *)im->px)[((size_t)y * im->w + x) * 3 + ch];
    }
}

/* Resizes image `im` by `scale` (bilinear, as cv2.resize INTER_LINEAR with half-pixel centres)
 * into the canvas with its top-left at (ox, oy), covering at most tw x th pixels. */
static void blit_scaled(yc_canvas *c, const yc_plot_image *im, double scale, int ox, int oy,
                        int tw, int th)
{
    int dw = (int)ceil(im->w * scale), dh = (int)ceil(im->h * scale);
    if (dw > tw)
        dw = tw;
    if (dh > th)
        dh = th;
    for (int y = 0; y < dh; y++) {
        double sy = (y + 0.5) / scale - 0.5;
        sy = sy < 0 ? 0 : sy > im->h - 1 ? im->h - 1 : sy;
        int y0 = (int)sy, y1 = y0 + 1 < im->h ? y0 + 1 : y0;
        double fy = sy - y0;
        for (int x = 0; x < dw; x++) {
            double sx = (x + 0.5) / scale - 0.5;
            sx = sx < 0 ? 0 : sx > im->w - 1 ? im->w - 1 : sx;
            int x0 = (int)sx, x1 = x0 + 1 < im->w ? x0 + 1 : x0;
            double fx = sx - x0;
            uint8_t v[3];
            for (int ch = 0; ch < 3; ch++) {
                double a = sample_px(im, x0, y0, ch) * (1 - fx) + sample_px(im, x1, y0, ch) * fx;
                double b = sample_px(im, x0, y1, ch) * (1 - fx) + sample_px(im, x1, y1, ch) * fx;
                v[ch] = (uint8_t)lround(a * (1 - fy) + b * fy);
            }
            yc_rgb col = {v[0], v[1], v[2]};
            yc_draw_pixel(c, ox + x, oy + y, col);
        }
    }
}

/* The class id stored in a float label, or -1 when it is not a usable id (negative, huge, NaN). */
static int label_class(float v)
{
    return v >= 0 && v < 100000 ? (int)v : -1;
}

/* "name" or the class id when there is no name for it. */
static const char *class_name(int cls, const char *const *names, int nc, char *buf, size_t len)
{
    if (names && cls >= 0 && cls < nc && names[cls])
        return names[cls];
    snprintf(buf, len, "%d", cls);
    return buf;
}

int yc_plot_batch(const char *out_path, const yc_plot_image *images, int n,
                  const yc_plot_box *boxes, int n_boxes, const char *const *names, int nc)
{
    if (n < 1)
        return yc_error_status(YC_EFORMAT, "%s: no images to plot", out_path);
    if (n > 16)
        n = 16;
    int W = 0, H = 0;
    for (int i = 0; i < n; i++) {
        if (!images[i].px || images[i].w < 1 || images[i].h < 1)
            return yc_error_status(YC_EFORMAT, "%s: batch image %d is empty", out_path, i);
        W = images[i].w > W ? images[i].w : W;
        H = images[i].h > H ? images[i].h : H;
    }
    int ns = (int)ceil(sqrt((double)n));
    double scale = 1920.0 / ns / (W > H ? W : H);
    int tw = W, th = H;
    if (scale < 1) {
        tw = (int)ceil(scale * W);
        th = (int)ceil(scale * H);
    } else {
        scale = 1;
    }
    yc_canvas c;
    int st = yc_canvas_init(&c, ns * tw, ns * th, WHITE);
    if (st)
        return yc_error_context(st, "%s", out_path);
    int fs = (int)((th + tw) * ns * 0.01);
    int lw = (int)lround(fs / 10.0);
    lw = lw < 1 ? 1 : lw;
    int ts = fs / 9 < 1 ? 1 : fs / 9;
    for (int i = 0; i < n; i++) {
        int ox = tw * (i % ns), oy = th * (i / ns);
        blit_scaled(&c, &images[i], scale, ox, oy, tw, th);
        yc_draw_box(&c, ox, oy, ox + tw - 1, oy + th - 1, 2, WHITE);
        if (images[i].path) {
            char name[41];
            snprintf(name, sizeof name, "%s", yc_path_basename(images[i].path));
            yc_draw_text(&c, ox + 5, oy + 5, name, ts, (yc_rgb){220, 220, 220});
        }
    }
    for (int j = 0; j < n_boxes; j++) {
        const yc_plot_box *b = &boxes[j];
        if (b->image < 0 || b->image >= n || !isfinite(b->cx) || !isfinite(b->cy) ||
            !isfinite(b->w) || !isfinite(b->h) || fabsf(b->cx) > 100 || fabsf(b->cy) > 100 ||
            fabsf(b->w) > 100 || fabsf(b->h) > 100)
            continue;
        bool truth = b->conf < 0;
        if (!truth && !(b->conf > 0.25f))
            continue;
        const yc_plot_image *im = &images[b->image];
        double sw = im->w * scale, sh = im->h * scale;
        int ox = tw * (b->image % ns), oy = th * (b->image / ns);
        int x0 = ox + (int)((b->cx - b->w / 2) * sw), y0 = oy + (int)((b->cy - b->h / 2) * sh);
        int x1 = ox + (int)((b->cx + b->w / 2) * sw), y1 = oy + (int)((b->cy + b->h / 2) * sh);
        char buf[32], label[96];
        const char *nm = class_name(b->cls, names, nc, buf, sizeof buf);
        if (truth)
            snprintf(label, sizeof label, "%s", nm);
        else
            snprintf(label, sizeof label, "%s %.1f", nm, b->conf);
        yc_draw_label(&c, x0, y0, x1, y1, label, lw, ts, yc_color_class(b->cls));
    }
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * labels.jpg
 * ---------------------------------------------------------------------------------------------- */

/* A 50 x 50 histogram of (a, b) pairs in [0, 1]^2, coloured with Blues up to the 90th percentile of
 * the non-empty bins (seaborn's pmax=0.9). */
static int hist2d(yc_canvas *c, const panel *p, const float *labels, int n, int ca, int cb)
{
    enum { BINS = 50 };
    unsigned *cnt = yc_calloc(BINS * BINS, sizeof *cnt, "label histogram");
    if (!cnt)
        return YC_ENOMEM;
    for (int i = 0; i < n; i++) {
        double a = labels[5 * i + ca], b = labels[5 * i + cb];
        if (!(a >= 0 && a <= 1 && b >= 0 && b <= 1))
            continue;
        int ia = a >= 1 ? BINS - 1 : (int)(a * BINS), ib = b >= 1 ? BINS - 1 : (int)(b * BINS);
        cnt[ib * BINS + ia]++;
    }
    unsigned sorted[BINS * BINS];
    int m = 0;
    for (int i = 0; i < BINS * BINS; i++)
        if (cnt[i])
            sorted[m++] = cnt[i];
    for (int i = 1; i < m; i++) {
        unsigned v = sorted[i];
        int j = i;
        for (; j > 0 && sorted[j - 1] > v; j--)
            sorted[j] = sorted[j - 1];
        sorted[j] = v;
    }
    double vmax = m ? sorted[(int)floor(0.9 * (m - 1))] : 1;
    if (vmax < 1)
        vmax = 1;
    for (int ib = 0; ib < BINS; ib++) {
        for (int ia = 0; ia < BINS; ia++) {
            unsigned v = cnt[ib * BINS + ia];
            if (!v)
                continue;
            int x0 = (int)map_x(p, (double)ia / BINS), x1 = (int)map_x(p, (double)(ia + 1) / BINS);
            int y1 = (int)map_y(p, (double)ib / BINS), y0 = (int)map_y(p, (double)(ib + 1) / BINS);
            yc_draw_fill_rect(c, x0, y0, x1 - 1, y1 - 1, cmap_blues(0.25 + 0.75 * fmin(v / vmax, 1)));
        }
    }
    free(cnt);
    return YC_OK;
}

int yc_plot_labels(const char *out_path, const float *labels, int n, const char *const *names,
                   int nc)
{
    if (n < 0 || nc < 0)
        return yc_error_status(YC_EFORMAT, "%s: bad label statistics input", out_path);
    int ncls = nc;
    for (int i = 0; i < n; i++) {
        int k = label_class(labels[5 * i]);
        if (k + 1 > ncls)
            ncls = k + 1;
    }
    if (ncls < 1)
        ncls = 1;
    if (ncls > 10000)
        return yc_error_status(YC_EFORMAT, "%s: class ids up to %d are too many to plot", out_path,
                               ncls - 1);
    yc_canvas c;
    int st = yc_canvas_init(&c, YC_LABELS_PLOT_SIZE, YC_LABELS_PLOT_SIZE, WHITE);
    if (st)
        return yc_error_context(st, "%s", out_path);
    const int S = 2;
    long *hist = yc_calloc((size_t)ncls, sizeof *hist, "class histogram");
    if (!hist) {
        yc_canvas_free(&c);
        return YC_ENOMEM;
    }
    long hmax = 1;
    for (int i = 0; i < n; i++) {
        int k = label_class(labels[5 * i]);
        if (k >= 0 && ++hist[k] > hmax)
            hmax = hist[k];
    }

    /* instances per class, names written upwards under the bars */
    panel p0 = {90, 40, 390, 330, -0.5, ncls - 0.5, 0, hmax * 1.05};
    for (int k = 0; k < ncls; k++) {
        if (!hist[k])
            continue;
        int x0 = (int)map_x(&p0, k - 0.4), x1 = (int)map_x(&p0, k + 0.4);
        int y0 = (int)map_y(&p0, (double)hist[k]);
        yc_draw_fill_rect(&c, x0, y0, x1 > x0 ? x1 - 1 : x0, p0.y + p0.h - 1, yc_color_class(k));
    }
    {
        double t[32];
        int dec;
        int m = nice_ticks(p0.y0, p0.y1, 5, t, 32, &dec);
        char buf[64];
        for (int i = 0; i < m; i++) {
            int yy = (int)map_y(&p0, t[i]);
            yc_draw_fill_rect(&c, p0.x - 5, yy, p0.x - 1, yy, BLACK);
            snprintf(buf, sizeof buf, "%.0f", t[i]);
            yc_draw_text(&c, p0.x - 9 - yc_text_width(buf, S), yy - yc_text_height(S) / 2, buf, S,
                         BLACK);
        }
        yc_draw_box(&c, p0.x - 1, p0.y - 1, p0.x + p0.w, p0.y + p0.h, 1, BLACK);
        yc_draw_text_up(&c, 8, p0.y + (p0.h + yc_text_width("instances", S)) / 2, "instances", S,
                        BLACK);
        if (ncls < 30) {
            int s = ncls <= 12 ? S : 1;
            int room = 110 / (6 * s);
            for (int k = 0; k < ncls; k++) {
                char nb[32], txt[64];
                snprintf(txt, sizeof txt, "%.*s", room, class_name(k, names, nc, nb, sizeof nb));
                int xx = (int)map_x(&p0, k) - yc_text_height(s) / 2;
                yc_draw_text_up(&c, xx, p0.y + p0.h + 6 + yc_text_width(txt, s), txt, s, BLACK);
            }
        } else {
            yc_draw_text(&c, p0.x + (p0.w - yc_text_width("classes", S)) / 2, p0.y + p0.h + 12,
                         "classes", S, BLACK);
        }
    }
    free(hist);

    /* up to 1000 boxes drawn centred, in class colours */
    panel p1 = {560, 40, 400, 400, 0, 1, 0, 1};
    for (int i = 0; i < n && i < 1000; i++) {
        double w = labels[5 * i + 3], h = labels[5 * i + 4];
        if (!(w >= 0 && w <= 1 && h >= 0 && h <= 1))
            continue;
        int x0 = (int)map_x(&p1, 0.5 - w / 2), x1 = (int)map_x(&p1, 0.5 + w / 2);
        int y0 = (int)map_y(&p1, 0.5 + h / 2), y1 = (int)map_y(&p1, 0.5 - h / 2);
        yc_draw_box(&c, x0, y0, x1, y1, 1, yc_color_class(label_class(labels[5 * i])));
    }

    /* box centres and sizes */
    panel p2 = {90, 540, 390, 390, 0, 1, 0, 1};
    panel p3 = {590, 540, 390, 390, 0, 1, 0, 1};
    st = hist2d(&c, &p2, labels, n, 1, 2);
    if (!st)
        st = hist2d(&c, &p3, labels, n, 3, 4);
    if (st) {
        yc_canvas_free(&c);
        return yc_error_context(st, "%s", out_path);
    }
    draw_axes(&c, &p2, NULL, "x", "y", S);
    draw_axes(&c, &p3, NULL, "width", "height", S);

    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * results.csv and results.png
 * ---------------------------------------------------------------------------------------------- */

void yc_results_free(yc_results *r)
{
    if (r->names)
        for (int i = 0; i < r->n_cols; i++)
            free(r->names[i]);
    free(r->names);
    free(r->values);
    memset(r, 0, sizeof *r);
}

int yc_results_column(const yc_results *r, const char *name)
{
    for (int i = 0; i < r->n_cols; i++)
        if (!strcmp(r->names[i], name))
            return i;
    return -1;
}

/* Trims spaces and tabs at both ends of [s, e) in place; returns the start. */
static char *trim(char *s, char *e)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    *e = '\0';
    return s;
}

/* Splits a line at commas into trimmed fields (pointers into the line); returns the count. */
static int split_fields(char *line, char **fields, int cap)
{
    int n = 0;
    char *s = line;
    for (;;) {
        char *comma = strchr(s, ',');
        char *e = comma ? comma : s + strlen(s);
        if (n < cap)
            fields[n] = trim(s, e);
        n++;
        if (!comma)
            break;
        s = comma + 1;
    }
    return n;
}

int yc_results_read(const char *csv_path, yc_results *out)
{
    enum { MAXCOLS = 256 };
    memset(out, 0, sizeof *out);
    char *text;
    size_t size;
    int st = yc_read_file(csv_path, &text, &size);
    if (st)
        return st;
    if (strlen(text) != size) {
        free(text);
        return yc_error_status(YC_EFORMAT, "%s: binary data (a NUL byte) in a CSV file", csv_path);
    }
    char *fields[MAXCOLS];
    char *line = text;
    int lineno = 0;
    int cap_rows = 0;
    st = YC_OK;
    while (line && *line) {
        lineno++;
        char *nl = strchr(line, '\n');
        char *next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        char *probe = line;
        while (*probe == ' ' || *probe == '\t' || *probe == '\r')
            probe++;
        if (!*probe) {
            line = next;
            continue;
        }
        int nf = split_fields(line, fields, MAXCOLS);
        if (!out->names) {
            if (nf > MAXCOLS) {
                st = yc_error_status(YC_EFORMAT, "%s:%d: more than %d columns", csv_path, lineno,
                                     MAXCOLS);
                break;
            }
            out->names = yc_calloc((size_t)nf, sizeof *out->names, "results.csv columns");
            if (!out->names) {
                st = YC_ENOMEM;
                break;
            }
            out->n_cols = nf;
            for (int i = 0; i < nf; i++) {
                if (!fields[i][0]) {
                    st = yc_error_status(YC_EFORMAT, "%s:%d: column %d of the header is empty",
                                         csv_path, lineno, i + 1);
                    break;
                }
                out->names[i] = yc_strdup(fields[i], "results.csv column name");
                if (!out->names[i]) {
                    st = YC_ENOMEM;
                    break;
                }
            }
            if (st)
                break;
            line = next;
            continue;
        }
        if (nf != out->n_cols) {
            st = yc_error_status(YC_EFORMAT, "%s:%d: %d fields where the header has %d", csv_path,
                                 lineno, nf, out->n_cols);
            break;
        }
        if (out->n_rows == cap_rows) {
            cap_rows = cap_rows ? 2 * cap_rows : 64;
            double *v = yc_realloc(out->values, (size_t)cap_rows * out->n_cols * sizeof *v,
                                   "results.csv values");
            if (!v) {
                st = YC_ENOMEM;
                break;
            }
            out->values = v;
        }
        double *row = out->values + (size_t)out->n_rows * out->n_cols;
        for (int i = 0; i < nf; i++) {
            char *end;
            errno = 0;
            row[i] = strtod(fields[i], &end);
            if (!fields[i][0] || *end) {
                st = yc_error_status(YC_EFORMAT, "%s:%d: field %d (%s) is not a number: '%s'",
                                     csv_path, lineno, i + 1, out->names[i], fields[i]);
                break;
            }
        }
        if (st)
            break;
        out->n_rows++;
        line = next;
    }
    free(text);
    if (!st && !out->names)
        st = yc_error_status(YC_EFORMAT, "%s: empty file (no header line)", csv_path);
    if (st)
        yc_results_free(out);
    return st;
}

/* scipy.ndimage.gaussian_filter1d(y, sigma) with mode 'reflect' and truncate 4. */
static void gaussian_smooth(const double *y, double *out, int n, double sigma)
{
    int rad = (int)(4 * sigma + 0.5);
    double wts[64];
    double sum = 0;
    for (int k = -rad; k <= rad; k++)
        sum += wts[k + rad] = exp(-0.5 * k * k / (sigma * sigma));
    for (int i = 0; i < n; i++) {
        double acc = 0;
        for (int k = -rad; k <= rad; k++) {
            long m = ((long)(i + k) % (2L * n) + 2L * n) % (2L * n);
            if (m >= n)
                m = 2L * n - 1 - m;
            acc += wts[k + rad] * y[m];
        }
        out[i] = acc / sum;
    }
}

int yc_plot_results(const char *csv_path, const char *out_path)
{
    static const char *const cols[10] = {
        "train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/precision",
        "metrics/recall", "val/box_loss",   "val/obj_loss",   "val/cls_loss",
        "metrics/mAP_0.5", "metrics/mAP_0.5:0.95",
    };
    yc_results r;
    int st = yc_results_read(csv_path, &r);
    if (st)
        return st;
    if (r.n_rows < 1) {
        yc_results_free(&r);
        return yc_error_status(YC_EFORMAT, "%s: no epochs (only a header line)", csv_path);
    }
    int idx[10];
    for (int k = 0; k < 10; k++) {
        idx[k] = yc_results_column(&r, cols[k]);
        if (idx[k] < 0) {
            yc_results_free(&r);
            return yc_error_status(YC_EFORMAT, "%s:1: no column '%s' in the header", csv_path,
                                   cols[k]);
        }
    }
    int ex = yc_results_column(&r, "epoch");
    if (ex < 0)
        ex = 0;
    int n = r.n_rows;
    double *x = yc_malloc(sizeof(double) * 4 * n, "results plot");
    if (!x) {
        yc_results_free(&r);
        return YC_ENOMEM;
    }
    double *y = x + n, *sm = y + n, *px = sm + n;
    yc_canvas c;
    st = yc_canvas_init(&c, YC_RESULTS_PLOT_W, YC_RESULTS_PLOT_H, WHITE);
    if (st) {
        free(x);
        yc_results_free(&r);
        return yc_error_context(st, "%s", out_path);
    }
    const yc_rgb line_col = tab10(0), smooth_col = tab10(1);
    const int cw = YC_RESULTS_PLOT_W / 5, ch = YC_RESULTS_PLOT_H / 2;
    for (int i = 0; i < n; i++)
        x[i] = r.values[(size_t)i * r.n_cols + ex];
    for (int k = 0; k < 10; k++) {
        double ylo = INFINITY, yhi = -INFINITY, xlo = INFINITY, xhi = -INFINITY;
        for (int i = 0; i < n; i++) {
            y[i] = r.values[(size_t)i * r.n_cols + idx[k]];
            if (isfinite(y[i]) && isfinite(x[i])) {
                ylo = fmin(ylo, y[i]);
                yhi = fmax(yhi, y[i]);
                xlo = fmin(xlo, x[i]);
                xhi = fmax(xhi, x[i]);
            }
        }
        gaussian_smooth(y, sm, n, 3.0);
        panel p = {(k % 5) * cw + 95, (k / 5) * ch + 50, cw - 120, ch - 100, 0, 1, 0, 1};
        auto_range(xlo, xhi, &p.x0, &p.x1);
        auto_range(ylo, yhi, &p.y0, &p.y1);
        draw_axes(&c, &p, cols[k], NULL, NULL, 2);
        for (int i = 0; i < n; i++) {
            px[i] = map_x(&p, x[i]);
            y[i] = isfinite(y[i]) ? map_y(&p, y[i]) : NAN;
            sm[i] = isfinite(sm[i]) ? map_y(&p, sm[i]) : NAN;
        }
        yc_draw_polyline(&c, px, y, n, 2, 0, line_col);
        for (int i = 0; i < n; i++)
            yc_draw_disc(&c, px[i], y[i], 4, line_col);
        yc_draw_polyline(&c, px, sm, n, 2, 3, smooth_col);
        if (k == 1) {
            int lx = p.x + p.w - 140, ly = p.y + 12;
            yc_draw_fill_rect(&c, lx - 8, ly - 8, lx + 132, ly + 44, WHITE);
            yc_draw_box(&c, lx - 8, ly - 8, lx + 132, ly + 44, 1, (yc_rgb){200, 200, 200});
            yc_draw_line(&c, lx, ly + 7, lx + 30, ly + 7, 2, line_col);
            yc_draw_disc(&c, lx + 15, ly + 7, 4, line_col);
            yc_draw_text(&c, lx + 40, ly, "results", 2, BLACK);
            double dx[2] = {lx, lx + 30}, dy[2] = {ly + 30, ly + 30};
            yc_draw_polyline(&c, dx, dy, 2, 2, 3, smooth_col);
            yc_draw_text(&c, lx + 40, ly + 23, "smooth", 2, BLACK);
        }
    }
    free(x);
    yc_results_free(&r);
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * PR / F1 / P / R curves
 * ---------------------------------------------------------------------------------------------- */

int yc_plot_curves(const char *out_path, const yc_curve_plot *p)
{
    if (p->n_points < 1 || !p->x || (p->n_series > 0 && !p->y) || p->n_series < 0)
        return yc_error_status(YC_EFORMAT, "%s: no curve points to plot", out_path);
    int n = p->n_points;
    double *bx = yc_malloc(sizeof(double) * 2 * n, "curve plot");
    if (!bx)
        return YC_ENOMEM;
    double *by = bx + n;
    yc_canvas c;
    int st = yc_canvas_init(&c, YC_CURVE_PLOT_W, YC_CURVE_PLOT_H, WHITE);
    if (st) {
        free(bx);
        return yc_error_context(st, "%s", out_path);
    }
    panel pl = {110, 60, 760, 740, p->xmin, p->xmax, p->ymin, p->ymax};
    if (!(pl.x0 < pl.x1)) {
        pl.x0 = 0;
        pl.x1 = 1;
    }
    if (!(pl.y0 < pl.y1)) {
        pl.y0 = 0;
        pl.y1 = 1;
    }
    draw_axes(&c, &pl, p->title, p->xlabel, p->ylabel, 2);
    bool legend = p->series_labels && p->n_series < 21;
    const yc_rgb grey = {128, 128, 128};
    int lx = pl.x + pl.w + 30, ly = pl.y, row = 24;
    for (int s = 0; s < p->n_series + (p->mean ? 1 : 0); s++) {
        const float *ys = s < p->n_series ? p->y + (size_t)s * n : p->mean;
        for (int i = 0; i < n; i++) {
            double xv = fmin(fmax(p->x[i], pl.x0), pl.x1), yv = fmin(fmax(ys[i], pl.y0), pl.y1);
            bx[i] = isfinite(p->x[i]) ? map_x(&pl, xv) : NAN;
            by[i] = isfinite(ys[i]) ? map_y(&pl, yv) : NAN;
        }
        bool is_mean = s == p->n_series;
        yc_rgb col = is_mean ? (yc_rgb){0, 0, 255} : p->n_series < 21 ? tab10(s) : grey;
        yc_draw_polyline(&c, bx, by, n, is_mean ? 4 : 1, 0, col);
        const char *text = is_mean ? p->mean_label : legend ? p->series_labels[s] : NULL;
        if (text && ly + row <= YC_CURVE_PLOT_H) {
            yc_draw_line(&c, lx, ly + 7, lx + 30, ly + 7, is_mean ? 4 : 2, col);
            char buf[40];
            snprintf(buf, sizeof buf, "%s", text);
            yc_draw_text(&c, lx + 40, ly, buf, 2, BLACK);
            ly += row;
        }
    }
    free(bx);
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Confusion matrix
 * ---------------------------------------------------------------------------------------------- */

int yc_plot_confusion(const char *out_path, const float *matrix, int nc, const char *const *names,
                      bool normalize)
{
    if (nc < 1 || nc > 1000)
        return yc_error_status(YC_EFORMAT, "%s: %d classes cannot be plotted", out_path, nc);
    int m = nc + 1;
    double *v = yc_malloc(sizeof(double) * m * m, "confusion matrix");
    if (!v)
        return YC_ENOMEM;
    double vmax = 0;
    for (int j = 0; j < m; j++) {
        double col = 0;
        for (int i = 0; i < m; i++)
            col += matrix[i * m + j];
        for (int i = 0; i < m; i++) {
            double e = normalize ? matrix[i * m + j] / (col + 1e-9) : matrix[i * m + j];
            v[i * m + j] = e < 0.005 ? NAN : e;
            if (e >= 0.005 && e > vmax)
                vmax = e;
        }
    }
    if (normalize || vmax <= 0)
        vmax = 1;
    int cs = 800 / m;
    cs = cs < 6 ? 6 : cs > 60 ? 60 : cs;
    int ls = cs >= 20 ? 2 : 1;
    int maxch = 14;
    int lab = 0;
    if (names && nc < 30) {
        for (int k = 0; k < m; k++) {
            char nb[32], txt[64];
            const char *nm = k < nc ? class_name(k, names, nc, nb, sizeof nb) : "background";
            snprintf(txt, sizeof txt, "%.*s", maxch, nm);
            int tw = yc_text_width(txt, ls);
            lab = tw > lab ? tw : lab;
        }
        lab += 10;
    }
    int left = 50 + lab, top = 70, bottom = 60 + lab, right = 160;
    yc_canvas c;
    int st = yc_canvas_init(&c, left + m * cs + right, top + m * cs + bottom, WHITE);
    if (st) {
        free(v);
        return yc_error_context(st, "%s", out_path);
    }
    int as = nc < 30 ? (cs >= 56 ? 2 : cs >= 30 ? 1 : 0) : 0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            double e = v[i * m + j];
            if (!isfinite(e))
                continue;
            double t = e / vmax;
            int x0 = left + j * cs, y0 = top + i * cs;
            yc_draw_fill_rect(&c, x0, y0, x0 + cs - 1, y0 + cs - 1, cmap_blues(t));
            if (as) {
                char buf[32];
                if (normalize)
                    snprintf(buf, sizeof buf, "%.2f", e);
                else
                    snprintf(buf, sizeof buf, "%.0f", e);
                int tw = yc_text_width(buf, as);
                if (tw <= cs - 2)
                    yc_draw_text(&c, x0 + (cs - tw) / 2, y0 + (cs - yc_text_height(as)) / 2, buf,
                                 as, t > 0.5 ? WHITE : BLACK);
            }
        }
    }
    yc_draw_box(&c, left - 1, top - 1, left + m * cs, top + m * cs, 1, BLACK);
    if (lab) {
        for (int k = 0; k < m; k++) {
            char nb[32], txt[64];
            const char *nm = k < nc ? class_name(k, names, nc, nb, sizeof nb) : "background";
            snprintf(txt, sizeof txt, "%.*s", maxch, nm);
            int tw = yc_text_width(txt, ls), th = yc_text_height(ls);
            yc_draw_text(&c, left - 8 - tw, top + k * cs + (cs - th) / 2, txt, ls, BLACK);
            yc_draw_text_up(&c, left + k * cs + (cs - th) / 2, top + m * cs + 8 + tw, txt, ls,
                            BLACK);
        }
    }
    const char *title = "Confusion Matrix";
    yc_draw_text(&c, left + (m * cs - yc_text_width(title, 3)) / 2, 20, title, 3, BLACK);
    yc_draw_text(&c, left + (m * cs - yc_text_width("True", 2)) / 2, top + m * cs + lab + 25,
                 "True", 2, BLACK);
    yc_draw_text_up(&c, 14, top + (m * cs + yc_text_width("Predicted", 2)) / 2, "Predicted", 2,
                    BLACK);
    /* colour bar */
    int bx = left + m * cs + 30, bh = m * cs;
    for (int yy = 0; yy < bh; yy++)
        yc_draw_fill_rect(&c, bx, top + yy, bx + 24, top + yy, cmap_blues(1.0 - (double)yy / (bh - 1 > 0 ? bh - 1 : 1)));
    yc_draw_box(&c, bx - 1, top - 1, bx + 25, top + bh, 1, BLACK);
    panel pb = {bx, top, 25, bh, 0, 1, 0, vmax};
    double t[32];
    int dec;
    int nt = nice_ticks(0, vmax, 5, t, 32, &dec);
    for (int i = 0; i < nt; i++) {
        char buf[32];
        int yy = (int)map_y(&pb, t[i]);
        yc_draw_fill_rect(&c, bx + 26, yy, bx + 30, yy, BLACK);
        snprintf(buf, sizeof buf, "%.*f", dec, t[i]);
        yc_draw_text(&c, bx + 34, yy - yc_text_height(2) / 2, buf, 2, BLACK);
    }
    free(v);
    st = yc_canvas_save(&c, out_path);
    yc_canvas_free(&c);
    return st;
}
