/* Drawing on RGB canvases (see draw.h): encoding through libvips (JPEG, PNG), canvases and
 * their saving, colours (YOLOv5's class palette), primitives (pixels, boxes, discs, thick lines
 * and polylines as capsules) and text in the built-in 5x7 bitmap font, with YOLOv5's box labels.
 * The plots drawn with them are in plots.c. */
#include "draw.h"

#include <ctype.h>
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


yc_rgb yc_color_class(int cls)
{
    if (cls < 0)
        cls = -cls;
    yc_rgb c = {0, 0, 0};
    yc_color_parse(yolov5_palette[cls % 20], &c);
    return c;
}

static const yc_rgb WHITE = {255, 255, 255};

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
