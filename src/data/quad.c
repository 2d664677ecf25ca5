/* train --quad: YOLOv5's collate_fn4 (see quad.h). */
#include "quad.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* PyTorch's source index and upper weight of output i for a 2x enlargement (scale 1/2):
 * src = 0.5 * (i + 0.5) - 0.5 clamped at 0; the upper neighbour clamped at the edge. */
static void up_index(int i, int in, int *lo, int *hi, float *lam)
{
    float src = (float)(0.5 * ((double)i + 0.5) - 0.5);
    if (src < 0)
        src = 0;
    int k = (int)floorf(src);
    if (k > in - 1)
        k = in - 1;
    *lo = k;
    *hi = k < in - 1 ? k + 1 : k;
    *lam = src - (float)k;
}

void yc_quad_upsample(const uint8_t *im, int c, int h, int w, uint8_t *out)
{
    const int oh = 2 * h, ow = 2 * w;
    for (int ch = 0; ch < c; ch++) {
        const uint8_t *p = im + (size_t)ch * h * w;
        uint8_t *q = out + (size_t)ch * oh * ow;
        for (int y = 0; y < oh; y++) {
            int y0, y1;
            float ly;
            up_index(y, h, &y0, &y1, &ly);
            const float hy0 = 1.0f - ly;
            for (int x = 0; x < ow; x++) {
                int x0, x1;
                float lx;
                up_index(x, w, &x0, &x1, &lx);
                const float wx0 = 1.0f - lx;
                /* the height weights outside, the width weights inside, as PyTorch's loop */
                float t0 = (float)p[(size_t)y0 * w + x0] * wx0 + (float)p[(size_t)y0 * w + x1] * lx;
                float t1 = (float)p[(size_t)y1 * w + x0] * wx0 + (float)p[(size_t)y1 * w + x1] * lx;
                float v = t0 * hy0 + t1 * ly;
                /* .type(uint8): truncation toward zero (v is within 0..255) */
                q[(size_t)y * ow + x] = (uint8_t)v;
            }
        }
    }
}

int yc_quad_collate(yc_batch *b, yc_rng *rng)
{
    const int n = b->n, h = b->h, w = b->w;
    if (n < 1)
        return yc_error_status(YC_EUSAGE, "quad collate: an empty batch");
    const int groups = n >= 4 ? n / 4 : 1;
    const size_t plane = 3 * (size_t)h * (size_t)w;
    uint8_t *scratch = yc_malloc(4 * plane, "quad batch scratch");
    if (!scratch)
        return YC_ENOMEM;
    int rt = 0, wt = 0; /* read and write rows of the targets (sorted by image) */
    for (int g = 0; g < groups; g++) {
        const int first = 4 * g, have = n - first < 4 ? n - first : 4;
        /* group g's output (12 h w bytes) starts where its input does: copy the input aside */
        memcpy(scratch, b->images + (size_t)first * plane, (size_t)have * plane);
        uint8_t *out = b->images + (size_t)g * 4 * plane;
        bool up = yc_rng_uniform(rng) < 0.5 || have < 4;
        if (up) {
            yc_quad_upsample(scratch, 3, h, w, out);
        } else {
            /* (3, 2h, 2w): quadrant q = (y >= h) + 2 (x >= w) holds image first + q */
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < 2 * h; y++)
                    for (int half = 0; half < 2; half++) {
                        int q = (y >= h) + 2 * half;
                        const uint8_t *src = scratch + (size_t)q * plane +
                                             (size_t)c * h * w + (size_t)(y % h) * w;
                        memcpy(out + (size_t)c * 4 * h * w + (size_t)y * 2 * w + (size_t)half * w,
                               src, (size_t)w);
                    }
        }
        /* the labels of the group's images: rows with image index < first + 4 */
        for (; rt < b->nt && (int)b->targets[(size_t)rt * 6] < first + 4; rt++) {
            const float *src = b->targets + (size_t)rt * 6;
            int q = (int)src[0] - first;
            if (q < 0 || (up && q != 0))
                continue; /* upsampled: lb = label[i] only */
            float r[6];
            memcpy(r, src, sizeof r);
            r[0] = (float)g;
            if (!up) {
                /* (label + ho / wo) * s: ho adds 1 to y, wo 1 to x; s halves x, y, w, h */
                r[2] = (r[2] + (q & 2 ? 1.0f : 0.0f)) * 0.5f;
                r[3] = (r[3] + (q & 1 ? 1.0f : 0.0f)) * 0.5f;
                r[4] *= 0.5f;
                r[5] *= 0.5f;
            }
            memcpy(b->targets + (size_t)wt * 6, r, sizeof r);
            wt++;
        }
        b->sample[g] = b->sample[first];
        b->info[g] = b->info[first];
    }
    free(scratch);
    b->n = groups;
    b->h = 2 * h;
    b->w = 2 * w;
    b->nt = wt;
    return YC_OK;
}
