/* classify/train.py's image transforms (classify_aug.h). */
#include "classify_aug.h"

#include <math.h>
#include <string.h>

#include "image_read.h"
#include "log.h"

void yc_cls_aug_defaults(yc_cls_aug *a)
{
    *a = (yc_cls_aug){.scale_min = 0.08, .scale_max = 1.0, .ratio_min = 3.0 / 4.0,
                      .ratio_max = 4.0 / 3.0, .hflip = 0.5, .vflip = 0.0, .jitter = 0.4};
}

/* dst = the h x w window of src at (top, left) */
static int crop(const yc_image *src, int top, int left, int h, int w, yc_image *dst)
{
    int st = yc_image_reserve(dst, h, w);
    if (st)
        return st;
    for (int y = 0; y < h; y++)
        memcpy(dst->data + (size_t)y * w * 3, src->data + ((size_t)(top + y) * src->w + left) * 3,
               (size_t)w * 3);
    return YC_OK;
}

int yc_cls_center_crop(const yc_image *src, int size, yc_image *out, yc_image *tmp)
{
    int m = src->h < src->w ? src->h : src->w;
    int st = crop(src, (src->h - m) / 2, (src->w - m) / 2, m, m, tmp);
    return st ? st : yc_image_resize(tmp, out, size, size, YC_INTERP_LINEAR);
}

/* OpenCV's RGB2GRAY: 0.299 R + 0.587 G + 0.114 B, rounded */
static inline float gray_of(const uint8_t *p)
{
    return roundf(0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]);
}

static inline uint8_t clip8(float v)
{
    return (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : roundf(v));
}

/* ColorJitter's brightness (x * f), contrast (blend with the mean gray) and saturation (blend
 * with each pixel's gray), with factors drawn from [1 - j, 1 + j], in a random order. */
static void color_jitter(yc_image *im, double j, yc_rng *rng)
{
    size_t n = (size_t)im->h * im->w;
    int order[3] = {0, 1, 2};
    for (int i = 2; i > 0; i--) {
        int k = (int)yc_rng_below(rng, (uint32_t)(i + 1)), t = order[i];
        order[i] = order[k], order[k] = t;
    }
    double lo = fmax(0.0, 1.0 - j);
    float f[3];
    for (int i = 0; i < 3; i++)
        f[i] = (float)yc_rng_range(rng, lo, 1.0 + j);
    for (int s = 0; s < 3; s++) {
        int kind = order[s];
        float fk = f[kind];
        uint8_t *p = im->data;
        if (kind == 0) {
            for (size_t i = 0; i < 3 * n; i++)
                p[i] = clip8(p[i] * fk);
        } else if (kind == 1) {
            double mean = 0.0;
            for (size_t i = 0; i < n; i++)
                mean += gray_of(p + 3 * i);
            float m = (float)(mean / (double)n) * (1.0f - fk);
            for (size_t i = 0; i < 3 * n; i++)
                p[i] = clip8(p[i] * fk + m);
        } else {
            for (size_t i = 0; i < n; i++) {
                float g = gray_of(p + 3 * i) * (1.0f - fk);
                for (int c = 0; c < 3; c++)
                    p[3 * i + c] = clip8(p[3 * i + c] * fk + g);
            }
        }
    }
}

/* Mirrors im left-right (horizontal) or top-bottom. */
static void flip(yc_image *im, bool horizontal)
{
    int h = im->h, w = im->w;
    if (horizontal) {
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w / 2; x++)
                for (int c = 0; c < 3; c++) {
                    uint8_t *a = im->data + ((size_t)y * w + x) * 3 + c;
                    uint8_t *b = im->data + ((size_t)y * w + (w - 1 - x)) * 3 + c;
                    uint8_t t = *a;
                    *a = *b, *b = t;
                }
        return;
    }
    size_t row = (size_t)w * 3;
    for (int y = 0; y < h / 2; y++)
        for (size_t i = 0; i < row; i++) {
            uint8_t *a = im->data + (size_t)y * row + i, *b = im->data + (size_t)(h - 1 - y) * row + i;
            uint8_t t = *a;
            *a = *b, *b = t;
        }
}

int yc_cls_augment(const yc_image *src, int size, const yc_cls_aug *a, yc_rng *rng,
                   yc_image *out, yc_image *tmp)
{
    /* RandomResizedCrop.get_params: ten tries at a window of the drawn area and aspect ratio,
     * else the whole image clamped to the ratio range, centred */
    int H = src->h, W = src->w, top = 0, left = 0, h = H, w = W;
    double area = (double)H * W, lr0 = log(a->ratio_min), lr1 = log(a->ratio_max);
    bool found = false;
    for (int t = 0; t < 10 && !found; t++) {
        double target = area * yc_rng_range(rng, a->scale_min, a->scale_max);
        double ratio = exp(yc_rng_range(rng, lr0, lr1));
        int cw = (int)lround(sqrt(target * ratio)), ch = (int)lround(sqrt(target / ratio));
        if (cw > 0 && ch > 0 && cw <= W && ch <= H) {
            top = (int)yc_rng_below(rng, (uint32_t)(H - ch + 1));
            left = (int)yc_rng_below(rng, (uint32_t)(W - cw + 1));
            h = ch, w = cw, found = true;
        }
    }
    if (!found) {
        double in_ratio = (double)W / H;
        if (in_ratio < a->ratio_min) {
            w = W, h = (int)lround(W / a->ratio_min);
        } else if (in_ratio > a->ratio_max) {
            h = H, w = (int)lround(H * a->ratio_max);
        }
        h = h < 1 ? 1 : h > H ? H : h;
        w = w < 1 ? 1 : w > W ? W : w;
        top = (H - h) / 2, left = (W - w) / 2;
    }
    int st = crop(src, top, left, h, w, tmp);
    if (!st)
        st = yc_image_resize(tmp, out, size, size, YC_INTERP_LINEAR);
    if (st)
        return st;
    if (a->hflip > 0 && yc_rng_uniform(rng) < a->hflip)
        flip(out, true);
    if (a->vflip > 0 && yc_rng_uniform(rng) < a->vflip)
        flip(out, false);
    if (a->jitter > 0)
        color_jitter(out, a->jitter, rng);
    return YC_OK;
}

void yc_cls_normalize(const yc_image *im, float *dst)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    size_t n = (size_t)im->h * im->w;
    for (int c = 0; c < 3; c++)
        for (size_t i = 0; i < n; i++)
            dst[(size_t)c * n + i] = ((float)im->data[3 * i + c] / 255.0f - mean[c]) / std[c];
}

int yc_cls_read(yc_cls_reader *rd, const char *path, int size, const yc_cls_aug *aug, yc_rng *rng,
                float *dst)
{
    yc_image_header hdr;
    int st = yc_image_read_header(path, &hdr);
    if (st)
        return st;
    yc_read_limits lim = yc_read_limits_resolve(NULL);
    if ((size_t)hdr.w * hdr.h <= lim.exact_pixels) {
        st = yc_image_decode(path, &rd->im, &rd->tmp, NULL);
    } else {
        double s = 2.0 * size / (hdr.h < hdr.w ? hdr.h : hdr.w);
        int h = (int)fmax(1, lround(hdr.h * s)), w = (int)fmax(1, lround(hdr.w * s));
        st = yc_image_read_reduced(path, &hdr, h, w, YC_INTERP_AREA, &lim, &rd->im, &rd->tmp, NULL);
    }
    if (!st)
        st = aug ? yc_cls_augment(&rd->im, size, aug, rng, &rd->out, &rd->tmp)
                 : yc_cls_center_crop(&rd->im, size, &rd->out, &rd->tmp);
    if (st)
        return st;
    yc_cls_normalize(&rd->out, dst);
    return YC_OK;
}

void yc_cls_reader_free(yc_cls_reader *rd)
{
    yc_image_free(&rd->im);
    yc_image_free(&rd->out);
    yc_image_free(&rd->tmp);
}

void yc_cls_denormalize(float *chw, int n, int w, int h)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    size_t plane = (size_t)w * h;
    for (int k = 0; k < n; k++)
        for (int c = 0; c < 3; c++) {
            float *p = chw + ((size_t)k * 3 + c) * plane;
            for (size_t i = 0; i < plane; i++) {
                float v = p[i] * std[c] + mean[c];
                p[i] = v < 0 ? 0 : v > 1 ? 1 : v;
            }
        }
}
