/* Instance masks on the host (mask_eval.h): YOLOv5 v7.0 utils/segment/general.py. */
#include "mask_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "masks.h"
#include "util.h"

void yc_mask_size(yc_mask_mode mode, int mh, int mw, int ih, int iw, int *h, int *w)
{
    *h = mode == YC_MASK_PROTO ? mh : ih;
    *w = mode == YC_MASK_PROTO ? mw : iw;
}

/* PyTorch's area_pixel_compute_source_index for align_corners=False: scale * (dst + 0.5) - 0.5,
 * clamped at 0, in float32 (opmath of a float tensor). */
static inline float source_index(float scale, int dst)
{
    float s = scale * ((float)dst + 0.5f) - 0.5f;
    return s < 0.0f ? 0.0f : s;
}

void yc_interp_bilinear(const float *in, int n, int ih, int iw, float *out, int oh, int ow)
{
    /* area_pixel_compute_scale: input_size / output_size in float32 */
    const float sh = (float)ih / (float)oh, sw = (float)iw / (float)ow;
    for (int k = 0; k < n; k++) {
        const float *src = in + (size_t)k * ih * iw;
        float *dst = out + (size_t)k * oh * ow;
        for (int y = 0; y < oh; y++) {
            const float hr = source_index(sh, y);
            const int h1 = (int)hr;
            const int h1p = h1 < ih - 1 ? 1 : 0;
            const float h1l = hr - (float)h1, h0l = 1.0f - h1l;
            const float *r0 = src + (size_t)h1 * iw, *r1 = r0 + (size_t)h1p * iw;
            for (int x = 0; x < ow; x++) {
                const float wr = source_index(sw, x);
                const int w1 = (int)wr;
                const int w1p = w1 < iw - 1 ? 1 : 0;
                const float w1l = wr - (float)w1, w0l = 1.0f - w1l;
                dst[(size_t)y * ow + x] = h0l * (w0l * r0[w1] + w1l * r0[w1 + w1p]) +
                                          h1l * (w0l * r1[w1] + w1l * r1[w1 + w1p]);
            }
        }
    }
}

void yc_crop_mask(float *masks, int n, int h, int w, const float *boxes, size_t box_stride)
{
    for (int k = 0; k < n; k++) {
        const float *b = boxes + (size_t)k * box_stride;
        float *m = masks + (size_t)k * h * w;
        for (int y = 0; y < h; y++) {
            /* (r >= x1) * (r < x2) * (c >= y1) * (c < y2) with r, c float aranges */
            const bool row = (float)y >= b[1] && (float)y < b[3];
            for (int x = 0; x < w; x++)
                if (!(row && (float)x >= b[0] && (float)x < b[2]))
                    m[(size_t)y * w + x] = 0.0f;
        }
    }
}

int yc_process_mask(const float *proto, int nm, int mh, int mw, const float *coef,
                    size_t coef_stride, const float *boxes, size_t box_stride, int n, int ih,
                    int iw, yc_mask_mode mode, uint8_t *out)
{
    if (n < 0 || nm < 1 || mh < 1 || mw < 1 || ih < 1 || iw < 1 ||
        (n > 0 && (!proto || !coef || !boxes || !out)))
        return yc_error_status(YC_EFORMAT,
                               "process_mask: %d masks of %d prototypes %dx%d for a %dx%d input",
                               n, nm, mh, mw, ih, iw);
    if (n == 0)
        return YC_OK;
    const size_t plane = (size_t)mh * mw;
    int oh, ow;
    yc_mask_size(mode, mh, mw, ih, iw, &oh, &ow);
    float *m = yc_malloc((size_t)n * plane * sizeof *m, "masks");
    float *up = NULL, *bx = yc_malloc((size_t)n * 4 * sizeof *bx, "mask boxes");
    if (mode != YC_MASK_PROTO)
        up = yc_malloc((size_t)n * oh * ow * sizeof *up, "upsampled masks");
    if (!m || !bx || (mode != YC_MASK_PROTO && !up)) {
        free(m);
        free(up);
        free(bx);
        return YC_ENOMEM;
    }
    /* (masks_in @ protos.view(c, -1)).sigmoid() */
#pragma omp parallel for schedule(static) if (n * plane > 65536)
    for (int k = 0; k < n; k++) {
        const float *c = coef + (size_t)k * coef_stride;
        float *dst = m + (size_t)k * plane;
        for (size_t i = 0; i < plane; i++)
            dst[i] = 0.0f;
        for (int j = 0; j < nm; j++) {
            const float cj = c[j];
            const float *p = proto + (size_t)j * plane;
            for (size_t i = 0; i < plane; i++)
                dst[i] += cj * p[i];
        }
        for (size_t i = 0; i < plane; i++)
            dst[i] = 1.0f / (1.0f + expf(-dst[i]));
    }
    /* the boxes in the cropped planes' pixels: downsampled_bboxes[:, 0] *= mw / iw, ... (the
     * Python float ratio applied to a float32 tensor) */
    const float rx = mode == YC_MASK_UPSAMPLE_CROP ? 1.0f : (float)((double)mw / iw);
    const float ry = mode == YC_MASK_UPSAMPLE_CROP ? 1.0f : (float)((double)mh / ih);
    for (int k = 0; k < n; k++) {
        const float *b = boxes + (size_t)k * box_stride;
        bx[k * 4 + 0] = b[0] * rx;
        bx[k * 4 + 1] = b[1] * ry;
        bx[k * 4 + 2] = b[2] * rx;
        bx[k * 4 + 3] = b[3] * ry;
    }
    const float *res = m;
    if (mode == YC_MASK_PROTO) {
        yc_crop_mask(m, n, mh, mw, bx, 4);
    } else if (mode == YC_MASK_UPSAMPLE) {
        yc_crop_mask(m, n, mh, mw, bx, 4);
        yc_interp_bilinear(m, n, mh, mw, up, oh, ow);
        res = up;
    } else {
        yc_interp_bilinear(m, n, mh, mw, up, oh, ow);
        yc_crop_mask(up, n, oh, ow, bx, 4);
        res = up;
    }
    /* masks.gt_(0.5) */
    const size_t total = (size_t)n * oh * ow;
    for (size_t i = 0; i < total; i++)
        out[i] = res[i] > 0.5f;
    free(m);
    free(up);
    free(bx);
    return YC_OK;
}

int yc_mask_iou(const float *gt, bool overlap, int nl, int gh, int gw, const uint8_t *pred,
                int nd, int ph, int pw, float *iou)
{
    if (nl < 0 || nd < 0 || gh < 1 || gw < 1 || ph < 1 || pw < 1 ||
        (nl > 0 && (!gt || !iou)) || (nd > 0 && !pred))
        return yc_error_status(YC_EFORMAT,
                               "mask IoU: %d ground truth masks of %dx%d, %d predictions of %dx%d",
                               nl, gh, gw, nd, ph, pw);
    if (nl == 0 || nd == 0)
        return YC_OK;
    const size_t gplane = (size_t)gh * gw, pplane = (size_t)ph * pw;
    const bool resize = gh != ph || gw != pw;
    float *g = yc_malloc(gplane * sizeof *g, "ground truth mask");
    float *r = resize ? yc_malloc(pplane * sizeof *r, "resized ground truth mask") : NULL;
    uint8_t *bin = yc_malloc(pplane, "ground truth mask");
    int64_t *parea = yc_calloc((size_t)nd, sizeof *parea, "mask areas");
    if (!g || (resize && !r) || !bin || !parea) {
        free(g);
        free(r);
        free(bin);
        free(parea);
        return YC_ENOMEM;
    }
    for (int d = 0; d < nd; d++)
        for (size_t i = 0; i < pplane; i++)
            parea[d] += pred[(size_t)d * pplane + i] != 0;
    for (int l = 0; l < nl; l++) {
        /* torch.where(gt_masks == index, 1.0, 0.0), or the label's own mask */
        const float *src = overlap ? gt : gt + (size_t)l * gplane;
        for (size_t i = 0; i < gplane; i++)
            g[i] = overlap ? (src[i] == (float)(l + 1) ? 1.0f : 0.0f) : src[i];
        if (resize) {
            yc_interp_bilinear(g, 1, gh, gw, r, ph, pw);
            for (size_t i = 0; i < pplane; i++)
                bin[i] = r[i] > 0.5f;
        } else {
            for (size_t i = 0; i < pplane; i++)
                bin[i] = g[i] > 0.5f;
        }
        int64_t garea = 0;
        for (size_t i = 0; i < pplane; i++)
            garea += bin[i];
        for (int d = 0; d < nd; d++) {
            const uint8_t *p = pred + (size_t)d * pplane;
            int64_t inter = 0;
            for (size_t i = 0; i < pplane; i++)
                inter += bin[i] & (p[i] != 0);
            /* intersection / ((area1 + area2) - intersection + eps), float32 */
            const float fi = (float)inter;
            const float uni = ((float)garea + (float)parea[d]) - fi;
            iou[(size_t)l * nd + d] = fi / (uni + 1e-7f);
        }
    }
    free(g);
    free(r);
    free(bin);
    free(parea);
    return YC_OK;
}

int yc_scale_mask_u8(const uint8_t *mask, int h1, int w1, double pad_w, double pad_h, int h0,
                     int w0, uint8_t *out)
{
    int top = (int)pad_h, left = (int)pad_w;
    int bottom = (int)(h1 - pad_h), right = (int)(w1 - pad_w);
    if (bottom <= top || right <= left) {
        memset(out, 0, (size_t)h0 * w0);
        return YC_OK;
    }
    return yc_resize_u8_linear(mask + (size_t)top * w1 + left, bottom - top, right - left,
                               (size_t)w1, out, h0, w0);
}

void yc_scale_mask(const uint8_t *mask, int h1, int w1, double pad_w, double pad_h, int h0,
                   int w0, float *out)
{
    int top = (int)pad_h, left = (int)pad_w;
    int bottom = (int)(h1 - pad_h), right = (int)(w1 - pad_w);
    if (bottom <= top || right <= left) {
        memset(out, 0, (size_t)h0 * w0 * sizeof *out);
        return;
    }
    const int ch = bottom - top, cw = right - left;
    /* cv2.resize INTER_LINEAR: src = (dst + 0.5) * (in / out) - 0.5, the fraction and the index
     * clamped to the edges */
    const double sy = (double)ch / h0, sx = (double)cw / w0;
    for (int y = 0; y < h0; y++) {
        double fy = (y + 0.5) * sy - 0.5;
        int y0 = (int)floor(fy);
        float ly = (float)(fy - y0);
        if (y0 < 0) {
            y0 = 0;
            ly = 0.0f;
        }
        if (y0 >= ch - 1) {
            y0 = ch - 1;
            ly = 0.0f;
        }
        const int y1 = y0 + 1 < ch ? y0 + 1 : y0;
        const uint8_t *r0 = mask + (size_t)(top + y0) * w1 + left;
        const uint8_t *r1 = mask + (size_t)(top + y1) * w1 + left;
        for (int x = 0; x < w0; x++) {
            double fx = (x + 0.5) * sx - 0.5;
            int x0 = (int)floor(fx);
            float lx = (float)(fx - x0);
            if (x0 < 0) {
                x0 = 0;
                lx = 0.0f;
            }
            if (x0 >= cw - 1) {
                x0 = cw - 1;
                lx = 0.0f;
            }
            const int x1 = x0 + 1 < cw ? x0 + 1 : x0;
            out[(size_t)y * w0 + x] =
                (1.0f - ly) * ((1.0f - lx) * r0[x0] + lx * r0[x1]) +
                ly * ((1.0f - lx) * r1[x0] + lx * r1[x1]);
        }
    }
}

void yc_mask_color(int c, uint8_t rgb[3])
{
    /* utils/plots.py Colors.palette */
    static const uint32_t hex[20] = {0xFF3838, 0xFF9D97, 0xFF701F, 0xFFB21D, 0xCFD231,
                                     0x48F90A, 0x92CC17, 0x3DDB86, 0x1A9334, 0x00D4BB,
                                     0x2C99A8, 0x00C2FF, 0x344593, 0x6473FF, 0x0018EC,
                                     0x8438FF, 0x520085, 0xCB38FF, 0xFF95C8, 0xFF37C7};
    uint32_t h = hex[(c % 20 + 20) % 20];
    rgb[0] = (uint8_t)(h >> 16);
    rgb[1] = (uint8_t)(h >> 8);
    rgb[2] = (uint8_t)h;
}

void yc_mask_overlay_init(float *acc, int h, int w, bool retina)
{
    const size_t n = (size_t)h * w;
    for (size_t i = 0; i < n; i++) {
        acc[i * 4] = retina ? 0.0f : 1.0f;
        acc[i * 4 + 1] = acc[i * 4 + 2] = acc[i * 4 + 3] = 0.0f;
    }
}

void yc_mask_overlay_add(float *acc, int h, int w, bool retina, const float *mask,
                         const uint8_t rgb[3], float alpha)
{
    const size_t n = (size_t)h * w;
    for (size_t i = 0; i < n; i++) {
        if (!(mask[i] >= 0.5f))
            continue;
        float *a = acc + i * 4;
        if (retina) {
            a[0] += 1.0f;
            for (int c = 0; c < 3; c++)
                a[1 + c] += (float)rgb[c];
        } else {
            /* inv_alph_masks = (1 - masks * alpha).cumprod(0); mcs = sum(masks_color * inv) */
            a[0] *= 1.0f - alpha;
            for (int c = 0; c < 3; c++)
                a[1 + c] += (float)rgb[c] / 255.0f * alpha * a[0];
        }
    }
}

void yc_mask_overlay_blend(uint8_t *rgb, int h, int w, size_t stride, const float *acc,
                           bool retina, float alpha)
{
    for (int y = 0; y < h; y++) {
        uint8_t *row = rgb + (size_t)y * stride;
        for (int x = 0; x < w; x++) {
            const float *a = acc + ((size_t)y * w + x) * 4;
            if (retina ? a[0] == 0.0f : a[0] == 1.0f)
                continue;
            for (int c = 0; c < 3; c++) {
                float o;
                if (retina) {
                    const float col = a[1 + c] > 255.0f ? 255.0f : a[1 + c];
                    const float s = a[0] > 1.0f ? 1.0f : a[0];
                    o = col * alpha + (float)row[x * 3 + c] * (1.0f - s * alpha);
                } else {
                    o = ((float)row[x * 3 + c] / 255.0f * a[0] + a[1 + c] * 2.0f) * 255.0f;
                }
                row[x * 3 + c] = (uint8_t)(o < 0.0f ? 0.0f : o > 255.0f ? 255.0f : o);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------------
 * cv2.findContours(RETR_EXTERNAL, CHAIN_APPROX_SIMPLE): OpenCV's contours.cpp (cvFindNextContour,
 * icvFetchContour) on a copy of the mask with a zero border, values 0/1 as signed chars; a
 * visited border pixel is marked NBD, or NBD | -128 where the pixel to its right was examined and
 * is 0 (a right boundary).
 * ---------------------------------------------------------------------------------------------- */

#define CONTOUR_NBD 2

/* One contour found: its points (padded image coordinates) in the growing array. */
typedef struct contour_list {
    int *xy;
    size_t n, cap;
    /* per contour: first point and point count */
    size_t *first, *count;
    size_t nc, ccap;
} contour_list;

static int push_point(contour_list *L, int x, int y)
{
    if (L->n + 1 > L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        int *q = yc_realloc(L->xy, cap * 2 * sizeof *q, "contour points");
        if (!q)
            return YC_ENOMEM;
        L->xy = q;
        L->cap = cap;
    }
    L->xy[L->n * 2] = x;
    L->xy[L->n * 2 + 1] = y;
    L->n++;
    return YC_OK;
}

/* icvFetchContour with CHAIN_APPROX_SIMPLE from the outer border pixel at index i0 = (x, y). */
static int fetch_contour(int8_t *img, int step, size_t i0, int x, int y, contour_list *L)
{
    static const int code_dx[8] = {1, 1, 0, -1, -1, -1, 0, 1};
    static const int code_dy[8] = {0, -1, -1, -1, 0, 1, 1, 1};
    ptrdiff_t deltas[16];
    for (int k = 0; k < 8; k++)
        deltas[k] = deltas[k + 8] = (ptrdiff_t)code_dy[k] * step + code_dx[k];
    const int8_t nbd = CONTOUR_NBD, nbd_right = (int8_t)(CONTOUR_NBD | -128);
    int st;
    int s = 4, s_end = 4;
    size_t i1;
    do {
        s = (s - 1) & 7;
        i1 = (size_t)((ptrdiff_t)i0 + deltas[s]);
    } while (img[i1] == 0 && s != s_end);
    if (s == s_end) {
        /* a single pixel */
        img[i0] = nbd_right;
        return push_point(L, x, y);
    }
    size_t i3 = i0, i4;
    int prev_s = s ^ 4;
    for (;;) {
        s_end = s;
        while (s < 15) {
            i4 = (size_t)((ptrdiff_t)i3 + deltas[++s]);
            if (img[i4] != 0)
                break;
        }
        s &= 7;
        /* the pixel to the right was examined and is 0: a right boundary */
        if ((unsigned)(s - 1) < (unsigned)s_end)
            img[i3] = nbd_right;
        else if (img[i3] == 1)
            img[i3] = nbd;
        if (s != prev_s) {
            if ((st = push_point(L, x, y)))
                return st;
            prev_s = s;
        }
        x += code_dx[s];
        y += code_dy[s];
        if (i4 == i0 && i3 == i1)
            break;
        i3 = i4;
        s = (s + 4) & 7;
    }
    return YC_OK;
}

int yc_mask_largest_contour(const uint8_t *mask, int h, int w, float **pts, int *n)
{
    *pts = NULL;
    *n = 0;
    if (h < 1 || w < 1)
        return YC_OK;
    const int step = w + 2;
    int8_t *img = yc_calloc((size_t)(h + 2) * step, 1, "contour image");
    if (!img)
        return YC_ENOMEM;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            img[(size_t)(y + 1) * step + x + 1] = mask[(size_t)y * w + x] != 0;
    contour_list L;
    memset(&L, 0, sizeof L);
    int st = YC_OK;
    /* cvFindNextContour's raster scan, RETR_EXTERNAL */
    for (int y = 1; y < h + 1 && !st; y++) {
        int8_t *row = img + (size_t)y * step;
        int lnbd_x = 0;
        int8_t prev = 0;
        for (int x = 1; x < w + 1 && !st; x++) {
            int8_t p = row[x];
            if (p == prev)
                continue;
            if (!(prev == 0 && p == 1)) {
                /* not an outer border: a hole's border (p == 0 after a pixel of a component)
                 * moves lnbd to the marked pixel before it; RETR_EXTERNAL skips holes */
                if (p == 0 && prev >= 1 && (prev & -2))
                    lnbd_x = x - 1;
            } else if (!(row[lnbd_x] > 0)) {
                /* an outer border not inside another component's hole */
                if (L.nc + 1 > L.ccap) {
                    size_t cap = L.ccap ? L.ccap * 2 : 16;
                    size_t *f = yc_realloc(L.first, cap * sizeof *f, "contours");
                    if (!f) {
                        st = YC_ENOMEM;
                        break;
                    }
                    L.first = f;
                    size_t *c = yc_realloc(L.count, cap * sizeof *c, "contours");
                    if (!c) {
                        st = YC_ENOMEM;
                        break;
                    }
                    L.count = c;
                    L.ccap = cap;
                }
                lnbd_x = x;
                L.first[L.nc] = L.n;
                if ((st = fetch_contour(img, step, (size_t)y * step + x, x, y, &L)))
                    break;
                L.count[L.nc] = L.n - L.first[L.nc];
                L.nc++;
                /* the scan resumes after the start pixel, its marking as prev */
                prev = row[x];
                continue;
            }
            prev = p;
            if (prev & -2)
                lnbd_x = x;
        }
    }
    if (!st && L.nc > 0) {
        /* cv2 lists the contours last found first; argmax takes the first longest */
        size_t best = L.nc - 1;
        for (size_t k = L.nc; k-- > 0;)
            if (L.count[k] > L.count[best])
                best = k;
        float *out = yc_malloc(L.count[best] * 2 * sizeof *out, "contour");
        if (!out) {
            st = YC_ENOMEM;
        } else {
            for (size_t k = 0; k < L.count[best]; k++) {
                out[k * 2] = (float)(L.xy[(L.first[best] + k) * 2] - 1);
                out[k * 2 + 1] = (float)(L.xy[(L.first[best] + k) * 2 + 1] - 1);
            }
            *pts = out;
            *n = (int)L.count[best];
        }
    }
    free(img);
    free(L.xy);
    free(L.first);
    free(L.count);
    return st;
}
