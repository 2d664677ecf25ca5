/* YOLOv5's sample pipeline: mosaic, random perspective, mixup, HSV, flips (see augment.h). */
#include "augment.h"

#include "log.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Arithmetic shift right (floor division by 2^n) for negative values too. */
static inline int asr(int v, int n)
{
    return v >= 0 ? v >> n : -((-v - 1) >> n) - 1;
}

/* Python's a // b for b > 0. */
static inline int floor_div(int a, int b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* ------------------------------------------------------------------------------------------------
 * Labels
 * ---------------------------------------------------------------------------------------------- */

int yc_labels_reserve(yc_labels *l, int n)
{
    if (n <= l->cap)
        return YC_OK;
    int cap = l->cap ? l->cap : 16;
    while (cap < n)
        cap *= 2;
    float *v = yc_realloc(l->v, sizeof(float) * 5 * (size_t)cap, "labels");
    if (!v)
        return YC_ENOMEM;
    l->v = v;
    l->cap = cap;
    return YC_OK;
}

int yc_labels_push(yc_labels *l, float cls, float b0, float b1, float b2, float b3)
{
    int st = yc_labels_reserve(l, l->n + 1);
    if (st)
        return st;
    float *r = l->v + 5 * (size_t)l->n++;
    r[0] = cls;
    r[1] = b0;
    r[2] = b1;
    r[3] = b2;
    r[4] = b3;
    return YC_OK;
}

int yc_labels_copy(yc_labels *dst, const yc_labels *src)
{
    if (dst == src)
        return YC_OK;
    dst->n = 0;
    return yc_labels_append(dst, src);
}

int yc_labels_append(yc_labels *dst, const yc_labels *src)
{
    if (src->n == 0)
        return YC_OK;
    int st = yc_labels_reserve(dst, dst->n + src->n);
    if (st)
        return st;
    memcpy(dst->v + 5 * (size_t)dst->n, src->v, sizeof(float) * 5 * (size_t)src->n);
    dst->n += src->n;
    return YC_OK;
}

void yc_labels_free(yc_labels *l)
{
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

void yc_labels_xywhn_to_xyxy(yc_labels *l, double w, double h, double padw, double padh)
{
    const float fw = (float)w, fh = (float)h, pw = (float)padw, ph = (float)padh;
    for (int i = 0; i < l->n; i++) {
        float *r = l->v + 5 * (size_t)i;
        float x = r[1], y = r[2], bw = r[3], bh = r[4];
        r[1] = fw * (x - bw / 2) + pw;
        r[2] = fh * (y - bh / 2) + ph;
        r[3] = fw * (x + bw / 2) + pw;
        r[4] = fh * (y + bh / 2) + ph;
    }
}

static inline float clipf(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void yc_labels_xyxy_to_xywhn(yc_labels *l, double w, double h, bool clip, double eps)
{
    const float fw = (float)w, fh = (float)h;
    const float xmax = (float)(w - eps), ymax = (float)(h - eps);
    for (int i = 0; i < l->n; i++) {
        float *r = l->v + 5 * (size_t)i;
        float x1 = r[1], y1 = r[2], x2 = r[3], y2 = r[4];
        if (clip) {
            x1 = clipf(x1, 0.f, xmax);
            x2 = clipf(x2, 0.f, xmax);
            y1 = clipf(y1, 0.f, ymax);
            y2 = clipf(y2, 0.f, ymax);
        }
        r[1] = ((x1 + x2) / 2) / fw;
        r[2] = ((y1 + y2) / 2) / fh;
        r[3] = (x2 - x1) / fw;
        r[4] = (y2 - y1) / fh;
    }
}

/* ------------------------------------------------------------------------------------------------
 * Random perspective
 * ---------------------------------------------------------------------------------------------- */

void yc_persp_sample(const yc_hyp *hyp, yc_rng *rng, yc_persp_draw *d)
{
    d->px = yc_rng_range(rng, -hyp->perspective, hyp->perspective);
    d->py = yc_rng_range(rng, -hyp->perspective, hyp->perspective);
    d->angle = yc_rng_range(rng, -hyp->degrees, hyp->degrees);
    d->scale = yc_rng_range(rng, 1 - hyp->scale, 1 + hyp->scale);
    d->shx = yc_rng_range(rng, -hyp->shear, hyp->shear);
    d->shy = yc_rng_range(rng, -hyp->shear, hyp->shear);
    d->tx = yc_rng_range(rng, 0.5 - hyp->translate, 0.5 + hyp->translate);
    d->ty = yc_rng_range(rng, 0.5 - hyp->translate, 0.5 + hyp->translate);
}

/* c = a * b for row-major 3x3 matrices (numpy's a @ b). */
static void mat3_mul(const double a[9], const double b[9], double c[9])
{
    double t[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            t[3 * i + j] = a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j];
    memcpy(c, t, sizeof t);
}

void yc_persp_matrix(const yc_persp_draw *d, int in_h, int in_w, int out_h, int out_w,
                     double M[9])
{
    const double deg = M_PI / 180;
    double C[9] = {1, 0, -in_w / 2.0, 0, 1, -in_h / 2.0, 0, 0, 1};
    double P[9] = {1, 0, 0, 0, 1, 0, d->px, d->py, 1};
    double a = d->scale * cos(d->angle * deg), b = d->scale * sin(d->angle * deg);
    double R[9] = {a, b, 0, -b, a, 0, 0, 0, 1};
    double S[9] = {1, tan(d->shx * deg), 0, tan(d->shy * deg), 1, 0, 0, 0, 1};
    double T[9] = {1, 0, d->tx * out_w, 0, 1, d->ty * out_h, 0, 0, 1};
    mat3_mul(T, S, M);
    mat3_mul(M, R, M);
    mat3_mul(M, P, M);
    mat3_mul(M, C, M);
}

/* Bilinear sample at fixed-point source position (X, Y) in 1/32 pixels, cv::remapBilinear for
 * CV_8UC3 with BORDER_CONSTANT 114: weights w = (32 - fx | fx) x (32 - fy | fy) * 32 (sum 2^15),
 * result (sum + 2^14) >> 15.  Taps outside the image read the border value. */
static inline void sample_bilinear(const yc_image *src, int X, int Y, uint8_t *out)
{
    const int sw = src->w, sh = src->h;
    int ix = asr(X, 5), iy = asr(Y, 5);
    int fx = X & 31, fy = Y & 31;
    int w00 = (32 - fy) * (32 - fx) * 32, w01 = (32 - fy) * fx * 32;
    int w10 = fy * (32 - fx) * 32, w11 = fy * fx * 32;
    if ((unsigned)ix < (unsigned)(sw - 1) && (unsigned)iy < (unsigned)(sh - 1)) {
        const uint8_t *p0 = src->data + ((size_t)iy * sw + ix) * 3;
        const uint8_t *p1 = p0 + (size_t)sw * 3;
        for (int c = 0; c < 3; c++)
            out[c] = (uint8_t)((p0[c] * w00 + p0[c + 3] * w01 + p1[c] * w10 + p1[c + 3] * w11 +
                                (1 << 14)) >> 15);
        return;
    }
    if (ix >= sw || ix + 1 < 0 || iy >= sh || iy + 1 < 0) {
        out[0] = out[1] = out[2] = 114;
        return;
    }
    bool x0 = ix >= 0, x1 = ix + 1 < sw, y0 = iy >= 0, y1 = iy + 1 < sh;
    const uint8_t *r0 = y0 ? src->data + (size_t)iy * sw * 3 : NULL;
    const uint8_t *r1 = y1 ? src->data + (size_t)(iy + 1) * sw * 3 : NULL;
    for (int c = 0; c < 3; c++) {
        int v00 = (y0 && x0) ? r0[ix * 3 + c] : 114;
        int v01 = (y0 && x1) ? r0[(ix + 1) * 3 + c] : 114;
        int v10 = (y1 && x0) ? r1[ix * 3 + c] : 114;
        int v11 = (y1 && x1) ? r1[(ix + 1) * 3 + c] : 114;
        out[c] = (uint8_t)((v00 * w00 + v01 * w01 + v10 * w10 + v11 * w11 + (1 << 14)) >> 15);
    }
}

/* OpenCV's saturate_cast<int>(double): round half to even, saturated. */
static inline int sat_int(double v)
{
    if (!(v > (double)INT_MIN))
        return INT_MIN;
    if (!(v < (double)INT_MAX))
        return INT_MAX;
    return (int)lrint(v);
}

/* The 1/32-pixel coordinates are stored as shorts by OpenCV (saturate_cast<short>) before
 * sampling; positions that far out read the border either way, clamping keeps the shifts
 * defined. */
static inline int clamp_coord(long long v)
{
    const long long lim = 32767LL * 32;
    return (int)(v < -lim ? -lim : v > lim ? lim : v);
}

/* floor(v / 2^n) for 64-bit values. */
static inline long long asr_ll(long long v, int n)
{
    return v >= 0 ? v >> n : -((-v - 1) >> n) - 1;
}

int yc_warp(const yc_image *src, yc_image *dst, int out_h, int out_w, const double M[9],
            bool perspective)
{
    if (src == dst)
        return yc_error("warp: source and destination are the same image");
    int st = yc_image_reserve(dst, out_h, out_w);
    if (st)
        return st;
    if (!perspective) {
        /* cv2.warpAffine inverts the 2x3 forward matrix [a b c; d e f]:
         *   D = 1/(a e - b d); A = [e -b; -d a] D; (c', f') = -A (c, f)
         * so that source (x_s, y_s) = A (x, y) + (c', f') for destination (x, y).  Coordinates
         * are accumulated in fixed point with AB_BITS = 10 and rounded to 1/32 pixel:
         *   X = (round((A01 y + c') 1024) + 16 + round(A00 x 1024)) >> 5. */
        double D = M[0] * M[4] - M[1] * M[3];
        D = D != 0 ? 1. / D : 0;
        double i0 = M[4] * D, i1 = -M[1] * D, i3 = -M[3] * D, i4 = M[0] * D;
        double i2 = -i0 * M[2] - i1 * M[5], i5 = -i3 * M[2] - i4 * M[5];
        int *delta = yc_malloc(sizeof(int) * 2 * (size_t)out_w, "warp coordinates");
        if (!delta)
            return YC_ENOMEM;
        int *adelta = delta, *bdelta = delta + out_w;
        for (int x = 0; x < out_w; x++) {
            adelta[x] = sat_int(i0 * x * 1024);
            bdelta[x] = sat_int(i3 * x * 1024);
        }
        for (int y = 0; y < out_h; y++) {
            int X0 = sat_int((i1 * y + i2) * 1024) + 16;
            int Y0 = sat_int((i4 * y + i5) * 1024) + 16;
            uint8_t *row = dst->data + (size_t)y * out_w * 3;
            for (int x = 0; x < out_w; x++) {
                int X = clamp_coord(asr_ll((long long)X0 + adelta[x], 5));
                int Y = clamp_coord(asr_ll((long long)Y0 + bdelta[x], 5));
                sample_bilinear(src, X, Y, row + 3 * x);
            }
        }
        free(delta);
        return YC_OK;
    }
    /* cv2.warpPerspective inverts M (here by the adjugate: M^-1 = adj(M) / det(M)) and maps each
     * destination pixel to source (X/W, Y/W) with (X, Y, W) = M^-1 (x, y, 1), scaled by 32 and
     * rounded half to even. */
    double a = M[0], b = M[1], c = M[2], d = M[3], e = M[4], f = M[5], g = M[6], h = M[7],
           k = M[8];
    double det = a * (e * k - f * h) - b * (d * k - f * g) + c * (d * h - e * g);
    double idet = det != 0 ? 1. / det : 0;
    double I[9] = {(e * k - f * h) * idet, (c * h - b * k) * idet, (b * f - c * e) * idet,
                   (f * g - d * k) * idet, (a * k - c * g) * idet, (c * d - a * f) * idet,
                   (d * h - e * g) * idet, (b * g - a * h) * idet, (a * e - b * d) * idet};
    for (int y = 0; y < out_h; y++) {
        double X0 = I[1] * y + I[2], Y0 = I[4] * y + I[5], W0 = I[7] * y + I[8];
        uint8_t *row = dst->data + (size_t)y * out_w * 3;
        for (int x = 0; x < out_w; x++) {
            double W = W0 + I[6] * x;
            W = W != 0 ? 32. / W : 0;
            double fX = fmax((double)INT_MIN, fmin((double)INT_MAX, (X0 + I[0] * x) * W));
            double fY = fmax((double)INT_MIN, fmin((double)INT_MAX, (Y0 + I[3] * x) * W));
            sample_bilinear(src, clamp_coord(sat_int(fX)), clamp_coord(sat_int(fY)), row + 3 * x);
        }
    }
    return YC_OK;
}

bool yc_box_candidate(double w1, double h1, double w2, double h2, double area_thr)
{
    const double eps = 1e-16;
    double ar = fmax(w2 / (h2 + eps), h2 / (w2 + eps));
    return w2 > 2 && h2 > 2 && w2 * h2 / (w1 * h1 + eps) > area_thr && ar < 100;
}

void yc_warp_boxes(yc_labels *l, const double M[9], bool perspective, double scale, int out_h,
                   int out_w)
{
    int kept = 0;
    const float fs = (float)scale;
    for (int i = 0; i < l->n; i++) {
        const float *r = l->v + 5 * (size_t)i;
        double xs[4] = {r[1], r[3], r[1], r[3]}, ys[4] = {r[2], r[4], r[4], r[2]};
        double nx[4], ny[4];
        for (int j = 0; j < 4; j++) {
            double x = M[0] * xs[j] + M[1] * ys[j] + M[2];
            double y = M[3] * xs[j] + M[4] * ys[j] + M[5];
            if (perspective) {
                double z = M[6] * xs[j] + M[7] * ys[j] + M[8];
                x /= z;
                y /= z;
            }
            nx[j] = x;
            ny[j] = y;
        }
        double x1 = fmin(fmin(nx[0], nx[1]), fmin(nx[2], nx[3]));
        double x2 = fmax(fmax(nx[0], nx[1]), fmax(nx[2], nx[3]));
        double y1 = fmin(fmin(ny[0], ny[1]), fmin(ny[2], ny[3]));
        double y2 = fmax(fmax(ny[0], ny[1]), fmax(ny[2], ny[3]));
        x1 = fmin(fmax(x1, 0), out_w);
        x2 = fmin(fmax(x2, 0), out_w);
        y1 = fmin(fmax(y1, 0), out_h);
        y2 = fmin(fmax(y2, 0), out_h);
        /* YOLOv5 scales the float32 targets by s in float32 before taking w1, h1 */
        double w1 = (double)(r[3] * fs - r[1] * fs), h1 = (double)(r[4] * fs - r[2] * fs);
        if (!yc_box_candidate(w1, h1, x2 - x1, y2 - y1, 0.10))
            continue;
        float *o = l->v + 5 * (size_t)kept++;
        o[0] = r[0];
        o[1] = (float)x1;
        o[2] = (float)y1;
        o[3] = (float)x2;
        o[4] = (float)y2;
    }
    l->n = kept;
}

int yc_persp_image(const yc_image *src, yc_image *dst, const yc_hyp *hyp, int border_y,
                   int border_x, yc_rng *rng, double M[9], double *scale)
{
    int out_h = src->h + 2 * border_y, out_w = src->w + 2 * border_x;
    if (out_h < 1 || out_w < 1)
        return yc_error_status(YC_EUSAGE, "random_perspective: %dx%d image with border %d,%d",
                               src->w, src->h, border_x, border_y);
    yc_persp_draw d;
    yc_persp_sample(hyp, rng, &d);
    yc_persp_matrix(&d, src->h, src->w, out_h, out_w, M);
    *scale = d.scale;
    const double I[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    bool identity = true;
    for (int i = 0; i < 9 && identity; i++)
        identity = M[i] == I[i];
    if (border_y != 0 || border_x != 0 || !identity)
        return yc_warp(src, dst, out_h, out_w, M, hyp->perspective != 0);
    return yc_image_copy(dst, src);
}

int yc_random_perspective(const yc_image *src, yc_image *dst, yc_labels *labels,
                          const yc_hyp *hyp, int border_y, int border_x, yc_rng *rng)
{
    int out_h = src->h + 2 * border_y, out_w = src->w + 2 * border_x;
    double M[9], scale;
    int st = yc_persp_image(src, dst, hyp, border_y, border_x, rng, M, &scale);
    if (st)
        return st;
    if (labels && labels->n)
        yc_warp_boxes(labels, M, hyp->perspective != 0, scale, out_h, out_w);
    return YC_OK;
}

/* ------------------------------------------------------------------------------------------------
 * HSV
 * ---------------------------------------------------------------------------------------------- */

/* OpenCV's tables: sdiv[v] = round((255 << 12) / v), hdiv[d] = round((180 << 12) / (6 d)),
 * rounded half to even (saturate_cast<int>(double)), entry 0 = 0. */
typedef struct hsv_tables {
    /* saturation divisors */
    int sdiv[256];
    /* hue divisors for the 0..179 range */
    int hdiv[256];
} hsv_tables;

static void hsv_tables_init(hsv_tables *t)
{
    t->sdiv[0] = t->hdiv[0] = 0;
    for (int i = 1; i < 256; i++) {
        t->sdiv[i] = (int)lrint((255 << 12) / (1. * i));
        t->hdiv[i] = (int)lrint((180 << 12) / (6. * i));
    }
}

/* RGB2HSV_b: v = max, diff = v - min, s = (diff sdiv[v] + 2^11) >> 12,
 * h = (g - b | b - r + 2 diff | r - g + 4 diff by which channel is the max, red first)
 *     * hdiv[diff] rounded the same way, + 180 when negative. */
static inline void rgb_to_hsv_t(const hsv_tables *t, const uint8_t *p, uint8_t *o)
{
    int r = p[0], g = p[1], b = p[2];
    int v = r > g ? r : g, vmin = r < g ? r : g;
    v = v > b ? v : b;
    vmin = vmin < b ? vmin : b;
    int diff = v - vmin;
    int vr = v == r ? -1 : 0, vg = v == g ? -1 : 0;
    int s = (diff * t->sdiv[v] + (1 << 11)) >> 12;
    int h = (vr & (g - b)) + (~vr & ((vg & (b - r + 2 * diff)) + (~vg & (r - g + 4 * diff))));
    h = asr(h * t->hdiv[diff] + (1 << 11), 12);
    h += h < 0 ? 180 : 0;
    o[0] = (uint8_t)(h > 255 ? 255 : h);
    o[1] = (uint8_t)s;
    o[2] = (uint8_t)v;
}

/* HSV2RGB_b's SIMD body (OpenCV's HSV2RGB_simd):
 *   h' = H * (6.f / 180), sector = trunc(h') mod 6, f = h' - trunc(h'), s = S / 255, v = V / 255
 *   tab = (v, v (1 - s), v (1 - s f), v (1 - s (1 - f)))
 *   (r, g, b) = tab[sel[sector]] with sel = (0,3,1) (2,0,1) (1,0,3) (1,2,0) (3,1,0) (0,1,2)
 *   each channel * 255 truncated (v_trunc) and saturated.
 * The per-value parts (f, sector, x / 255) are tabulated once per call with the same float
 * operations, so the result is identical to computing them per pixel. */
typedef struct hsv_back {
    /* fractional hue f for H = 0..255 */
    float frac[256];
    /* sector (0..5) for H = 0..255 */
    uint8_t sector[256];
    /* x * (1.f / 255.f) for x = 0..255 */
    float unit[256];
} hsv_back;

static const uint8_t hsv_sel[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3},
                                      {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};

static void hsv_back_init(hsv_back *t)
{
    const float hscale = 6.0f / 180;
    for (int x = 0; x < 256; x++) {
        float h = (float)x * hscale;
        float pre = truncf(h);
        float sector = pre - truncf(pre * (1.0f / 6.0f)) * 6.0f;
        t->frac[x] = h - pre;
        t->sector[x] = (uint8_t)sector;
        t->unit[x] = (float)x * (1.0f / 255.0f);
    }
}

static inline uint8_t trunc_u8(float v)
{
    int q = (int)v;
    return (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
}

static inline void hsv_to_rgb_t(const hsv_back *t, const uint8_t *p, uint8_t *o)
{
    float h = t->frac[p[0]], s = t->unit[p[1]], v = t->unit[p[2]];
    float tab[4];
    tab[0] = v;
    tab[1] = v * (1.0f - s);
    tab[2] = v * (1.0f - (s * h));
    tab[3] = v * (1.0f - (s * (1.0f - h)));
    const uint8_t *sel = hsv_sel[t->sector[p[0]]];
    o[0] = trunc_u8(tab[sel[0]] * 255.0f);
    o[1] = trunc_u8(tab[sel[1]] * 255.0f);
    o[2] = trunc_u8(tab[sel[2]] * 255.0f);
}

void yc_rgb_to_hsv8(const uint8_t rgb[3], uint8_t hsv[3])
{
    hsv_tables t;
    hsv_tables_init(&t);
    rgb_to_hsv_t(&t, rgb, hsv);
}

void yc_hsv8_to_rgb(const uint8_t hsv[3], uint8_t rgb[3])
{
    hsv_back t;
    hsv_back_init(&t);
    hsv_to_rgb_t(&t, hsv, rgb);
}

void yc_hsv_luts(const double gain[3], uint8_t lut[3][256])
{
    for (int x = 0; x < 256; x++) {
        double hue = fmod(x * gain[0], 180.0);
        if (hue < 0)
            hue += 180.0;
        double sat = fmin(fmax(x * gain[1], 0.0), 255.0);
        double val = fmin(fmax(x * gain[2], 0.0), 255.0);
        lut[0][x] = (uint8_t)hue;
        lut[1][x] = (uint8_t)sat;
        lut[2][x] = (uint8_t)val;
    }
}

void yc_hsv_apply(yc_image *im, const double gain[3])
{
    hsv_tables t;
    hsv_back back;
    uint8_t lut[3][256];
    hsv_tables_init(&t);
    hsv_back_init(&back);
    yc_hsv_luts(gain, lut);
    size_t n = (size_t)im->h * im->w;
    uint8_t *p = im->data;
    for (size_t i = 0; i < n; i++, p += 3) {
        uint8_t hsv[3];
        rgb_to_hsv_t(&t, p, hsv);
        hsv[0] = lut[0][hsv[0]];
        hsv[1] = lut[1][hsv[1]];
        hsv[2] = lut[2][hsv[2]];
        hsv_to_rgb_t(&back, hsv, p);
    }
}

void yc_augment_hsv(yc_image *im, double hgain, double sgain, double vgain, yc_rng *rng)
{
    if (hgain == 0 && sgain == 0 && vgain == 0)
        return;
    double g[3];
    g[0] = yc_rng_range(rng, -1, 1) * hgain + 1;
    g[1] = yc_rng_range(rng, -1, 1) * sgain + 1;
    g[2] = yc_rng_range(rng, -1, 1) * vgain + 1;
    yc_hsv_apply(im, g);
}

/* ------------------------------------------------------------------------------------------------
 * Flips
 * ---------------------------------------------------------------------------------------------- */

void yc_flip_ud(yc_image *im, yc_labels *labels)
{
    size_t row = (size_t)im->w * 3;
    for (int y = 0; y < im->h / 2; y++) {
        uint8_t *a = im->data + (size_t)y * row, *b = im->data + (size_t)(im->h - 1 - y) * row;
        for (size_t i = 0; i < row; i++) {
            uint8_t t = a[i];
            a[i] = b[i];
            b[i] = t;
        }
    }
    if (labels)
        for (int i = 0; i < labels->n; i++)
            labels->v[5 * (size_t)i + 2] = 1 - labels->v[5 * (size_t)i + 2];
}

void yc_flip_lr(yc_image *im, yc_labels *labels)
{
    for (int y = 0; y < im->h; y++) {
        uint8_t *r = im->data + (size_t)y * im->w * 3;
        for (int x = 0; x < im->w / 2; x++) {
            uint8_t *a = r + 3 * x, *b = r + 3 * (im->w - 1 - x);
            for (int c = 0; c < 3; c++) {
                uint8_t t = a[c];
                a[c] = b[c];
                b[c] = t;
            }
        }
    }
    if (labels)
        for (int i = 0; i < labels->n; i++)
            labels->v[5 * (size_t)i + 1] = 1 - labels->v[5 * (size_t)i + 1];
}

/* ------------------------------------------------------------------------------------------------
 * MixUp
 * ---------------------------------------------------------------------------------------------- */

double yc_rng_gamma(yc_rng *rng, double shape)
{
    if (shape < 1) {
        double u = yc_rng_uniform(rng);
        return yc_rng_gamma(rng, shape + 1) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = yc_rng_normal(rng);
            v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        double u = yc_rng_uniform(rng);
        if (u < 1.0 - 0.0331 * (x * x) * (x * x))
            return d * v;
        if (u > 0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

double yc_rng_beta(yc_rng *rng, double a, double b)
{
    double x = yc_rng_gamma(rng, a), y = yc_rng_gamma(rng, b);
    return x / (x + y);
}

int yc_mixup(yc_image *im, yc_labels *labels, const yc_image *im2, const yc_labels *labels2,
             double r)
{
    if (im->h != im2->h || im->w != im2->w)
        return yc_error_status(YC_EUSAGE, "mixup: image sizes differ (%dx%d and %dx%d)", im->w,
                               im->h, im2->w, im2->h);
    size_t n = (size_t)im->h * im->w * 3;
    double q = 1 - r;
    for (size_t i = 0; i < n; i++) {
        double v = im->data[i] * r + im2->data[i] * q;
        im->data[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    return yc_labels_append(labels, labels2);
}

/* ------------------------------------------------------------------------------------------------
 * Mosaic
 * ---------------------------------------------------------------------------------------------- */

static inline int imax(int a, int b)
{
    return a > b ? a : b;
}

static inline int imin(int a, int b)
{
    return a < b ? a : b;
}

int yc_mosaic_place(yc_image *canvas, int s, int xc, int yc, int i, const yc_image *tile,
                    const yc_labels *tile_labels, yc_labels *out)
{
    const int w = tile->w, h = tile->h, s2 = 2 * s;
    int x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b;
    if (canvas->h != s2 || canvas->w != s2)
        return yc_error_status(YC_EUSAGE, "mosaic: canvas is %dx%d, expected %dx%d", canvas->w,
                               canvas->h, s2, s2);
    switch (i) {
    case 0:
        x1a = imax(xc - w, 0), y1a = imax(yc - h, 0), x2a = xc, y2a = yc;
        x1b = w - (x2a - x1a), y1b = h - (y2a - y1a), x2b = w, y2b = h;
        break;
    case 1:
        x1a = xc, y1a = imax(yc - h, 0), x2a = imin(xc + w, s2), y2a = yc;
        x1b = 0, y1b = h - (y2a - y1a), x2b = imin(w, x2a - x1a), y2b = h;
        break;
    case 2:
        x1a = imax(xc - w, 0), y1a = yc, x2a = xc, y2a = imin(s2, yc + h);
        x1b = w - (x2a - x1a), y1b = 0, x2b = w, y2b = imin(y2a - y1a, h);
        break;
    case 3:
        x1a = xc, y1a = yc, x2a = imin(xc + w, s2), y2a = imin(s2, yc + h);
        x1b = 0, y1b = 0, x2b = imin(w, x2a - x1a), y2b = imin(y2a - y1a, h);
        break;
    default:
        return yc_error_status(YC_EUSAGE, "mosaic: tile index %d", i);
    }
    int cw = x2a - x1a, ch = y2a - y1a;
    if (cw > 0 && ch > 0 && x2b - x1b == cw && y2b - y1b == ch && x1b >= 0 && y1b >= 0) {
        for (int y = 0; y < ch; y++)
            memcpy(canvas->data + ((size_t)(y1a + y) * s2 + x1a) * 3,
                   tile->data + ((size_t)(y1b + y) * w + x1b) * 3, (size_t)cw * 3);
    }
    int padw = x1a - x1b, padh = y1a - y1b;
    if (!tile_labels || tile_labels->n == 0)
        return YC_OK;
    int first = out->n;
    int st = yc_labels_append(out, tile_labels);
    if (st)
        return st;
    yc_labels part = {out->n - first, out->n - first, out->v + 5 * (size_t)first};
    yc_labels_xywhn_to_xyxy(&part, w, h, padw, padh);
    for (int k = 0; k < part.n; k++)
        for (int j = 1; j < 5; j++)
            part.v[5 * k + j] = clipf(part.v[5 * k + j], 0.f, (float)s2);
    return YC_OK;
}

void yc_aug_scratch_free(yc_aug_scratch *s)
{
    yc_image_free(&s->tile);
    yc_image_free(&s->decode);
    yc_image_free(&s->canvas);
    yc_image_free(&s->img);
    yc_image_free(&s->mix);
    yc_labels_free(&s->tile_labels);
    yc_labels_free(&s->labels);
    yc_labels_free(&s->mix_labels);
}

static int call_loader(yc_aug_scratch *s, yc_sample_loader load, void *ctx, int index,
                       bool augment, yc_load_info *info)
{
    s->tile_labels.n = 0;
    int st = load(ctx, index, augment, &s->tile, &s->decode, info, &s->tile_labels);
    if (st)
        return yc_error_context(st, "sample %d", index);
    if (s->tile.h < 1 || s->tile.w < 1 || !s->tile.data)
        return yc_error_status(YC_ERR, "sample %d: the loader returned no image", index);
    return YC_OK;
}

int yc_mosaic_begin(yc_image *canvas, const yc_sample_params *p, int index, yc_rng *rng,
                    int *border, int *xc, int *yc, int idx[4])
{
    const int sz = p->imgsz;
    if (sz < 1 || p->n < 1)
        return yc_error_status(YC_EUSAGE, "mosaic: image size %d, dataset of %d images", sz,
                               p->n);
    *border = floor_div(-sz, 2);
    *yc = (int)yc_rng_range(rng, -*border, 2 * sz + *border);
    *xc = (int)yc_rng_range(rng, -*border, 2 * sz + *border);
    idx[0] = index;
    for (int k = 1; k < 4; k++)
        idx[k] = p->pool && p->pool_n > 0 ? p->pool[yc_rng_below(rng, (uint32_t)p->pool_n)]
                                          : (int)yc_rng_below(rng, (uint32_t)p->n);
    int st = yc_image_reserve(canvas, 2 * sz, 2 * sz);
    if (!st)
        yc_image_fill(canvas, 114);
    return st;
}

int yc_load_mosaic(yc_aug_scratch *s, const yc_sample_params *p, int index,
                   yc_sample_loader load, void *ctx, yc_rng *rng, yc_image *dst,
                   yc_labels *labels)
{
    const int sz = p->imgsz;
    int border, xc, yc, idx[4];
    int st = yc_mosaic_begin(&s->canvas, p, index, rng, &border, &xc, &yc, idx);
    if (st)
        return st;
    for (int k = 3; k >= 1; k--) {
        int j = (int)yc_rng_below(rng, (uint32_t)(k + 1));
        int t = idx[k];
        idx[k] = idx[j];
        idx[j] = t;
    }
    labels->n = 0;
    for (int k = 0; k < 4; k++) {
        yc_load_info li;
        st = call_loader(s, load, ctx, idx[k], true, &li);
        if (!st)
            st = yc_mosaic_place(&s->canvas, sz, xc, yc, k, &s->tile, &s->tile_labels, labels);
        if (st)
            return st;
    }
    return yc_random_perspective(&s->canvas, dst, labels, p->hyp, border, border, rng);
}

int yc_train_sample(yc_aug_scratch *s, const yc_sample_params *p, int index,
                    yc_sample_loader load, void *ctx, yc_rng *rng, uint8_t *chw, int *out_h,
                    int *out_w, yc_labels *out)
{
    const yc_hyp *hyp = p->hyp;
    bool rect = p->rect_h > 0 && p->rect_w > 0;
    bool mosaic = !rect && yc_rng_uniform(rng) < hyp->mosaic;
    int st;
    yc_image *img = &s->img;
    if (mosaic) {
        st = yc_load_mosaic(s, p, index, load, ctx, rng, img, &s->labels);
        if (st)
            return st;
        if (yc_rng_uniform(rng) < hyp->mixup) {
            int j = (int)yc_rng_below(rng, (uint32_t)p->n);
            st = yc_load_mosaic(s, p, j, load, ctx, rng, &s->mix, &s->mix_labels);
            if (st)
                return st;
            double r = yc_rng_beta(rng, 32.0, 32.0);
            st = yc_mixup(img, &s->labels, &s->mix, &s->mix_labels, r);
            if (st)
                return st;
        }
    } else {
        yc_load_info li;
        yc_letterbox_info lb;
        int sh = rect ? p->rect_h : p->imgsz, sw = rect ? p->rect_w : p->imgsz;
        st = call_loader(s, load, ctx, index, true, &li);
        if (st)
            return st;
        st = yc_letterbox(&s->tile, &s->canvas, sh, sw, false, false, true, 32, &lb);
        if (st)
            return yc_error_context(st, "sample %d", index);
        st = yc_labels_copy(&s->labels, &s->tile_labels);
        if (st)
            return st;
        yc_labels_xywhn_to_xyxy(&s->labels, lb.ratio_w * s->tile.w, lb.ratio_h * s->tile.h,
                                lb.pad_w, lb.pad_h);
        st = yc_random_perspective(&s->canvas, img, &s->labels, hyp, 0, 0, rng);
        if (st)
            return st;
    }
    yc_labels_xyxy_to_xywhn(&s->labels, img->w, img->h, true, 1e-3);
    yc_augment_hsv(img, hyp->hsv_h, hyp->hsv_s, hyp->hsv_v, rng);
    if (yc_rng_uniform(rng) < hyp->flipud)
        yc_flip_ud(img, &s->labels);
    if (yc_rng_uniform(rng) < hyp->fliplr)
        yc_flip_lr(img, &s->labels);
    yc_image_to_chw(img, chw);
    if (out_h)
        *out_h = img->h;
    if (out_w)
        *out_w = img->w;
    return yc_labels_copy(out, &s->labels);
}

int yc_val_sample(yc_aug_scratch *s, int index, int shape_h, int shape_w,
                  yc_sample_loader load, void *ctx, uint8_t *chw, yc_labels *out,
                  yc_val_info *info)
{
    yc_load_info li;
    yc_letterbox_info lb;
    int st = call_loader(s, load, ctx, index, false, &li);
    if (st)
        return st;
    st = yc_letterbox(&s->tile, &s->canvas, shape_h, shape_w, false, false, false, 32, &lb);
    if (st)
        return yc_error_context(st, "sample %d", index);
    st = yc_labels_copy(out, &s->tile_labels);
    if (st)
        return st;
    yc_labels_xywhn_to_xyxy(out, lb.ratio_w * s->tile.w, lb.ratio_h * s->tile.h, lb.pad_w,
                            lb.pad_h);
    yc_labels_xyxy_to_xywhn(out, s->canvas.w, s->canvas.h, true, 1e-3);
    yc_image_to_chw(&s->canvas, chw);
    if (info) {
        info->h0 = li.h0;
        info->w0 = li.w0;
        info->h = li.h;
        info->w = li.w;
        info->lb = lb;
        info->ratio_h = (double)li.h / li.h0;
        info->ratio_w = (double)li.w / li.w0;
    }
    return YC_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Multi-scale
 * ---------------------------------------------------------------------------------------------- */

void yc_multiscale_shape(yc_rng *rng, int imgsz, int gs, int h, int w, int *new_h, int *new_w)
{
    int lo = (int)(imgsz * 0.5), hi = (int)(imgsz * 1.5) + gs;
    int sz = (lo + (int)yc_rng_below(rng, (uint32_t)(hi - lo))) / gs * gs;
    double sf = (double)sz / (h > w ? h : w);
    if (sf != 1) {
        *new_h = (int)ceil(h * sf / gs) * gs;
        *new_w = (int)ceil(w * sf / gs) * gs;
    } else {
        *new_h = h;
        *new_w = w;
    }
}

/* Source index and weights of one output coordinate (PyTorch's
 * compute_source_index_and_lambda, float opmath). */
static void bilinear_index(int out, int in, int o, int *i0, int *i1, float *l0, float *l1)
{
    if (out == in) {
        *i0 = *i1 = o;
        *l0 = 1.f;
        *l1 = 0.f;
        return;
    }
    float scale = (float)in / (float)out;
    float src = scale * ((float)o + 0.5f) - 0.5f;
    if (src < 0)
        src = 0;
    int idx = (int)floorf(src);
    if (idx > in - 1)
        idx = in - 1;
    float lam = src - (float)idx;
    lam = lam < 0 ? 0 : lam > 1 ? 1 : lam;
    *i0 = idx;
    *i1 = idx + (idx < in - 1 ? 1 : 0);
    *l1 = lam;
    *l0 = 1.f - lam;
}

void yc_resize_bilinear_f32(const float *src, int planes, int h, int w, float *dst, int nh,
                            int nw)
{
    for (int p = 0; p < planes; p++) {
        const float *s = src + (size_t)p * h * w;
        float *d = dst + (size_t)p * nh * nw;
        for (int y = 0; y < nh; y++) {
            int y0, y1;
            float h0, h1;
            bilinear_index(nh, h, y, &y0, &y1, &h0, &h1);
            const float *r0 = s + (size_t)y0 * w, *r1 = s + (size_t)y1 * w;
            for (int x = 0; x < nw; x++) {
                int x0, x1;
                float w0, w1;
                bilinear_index(nw, w, x, &x0, &x1, &w0, &w1);
                float t0 = r0[x0] * w0 + r0[x1] * w1;
                float t1 = r1[x0] * w0 + r1[x1] * w1;
                d[(size_t)y * nw + x] = t0 * h0 + t1 * h1;
            }
        }
    }
}
