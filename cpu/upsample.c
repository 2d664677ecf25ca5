/* Nearest-neighbour upsampling by an integer factor f on the CPU, forward and backward.
 * Threads split the (n, c) planes. */
#include <string.h>

#include "cpu_ops.h"

/* Below this many output elements an op runs on one thread. */
#define YC_UP_SERIAL_MAX 16384

/* y (N,C,H*f,W*f): y[h][w] = x (N,C,H,W)[h/f][w/f] */
void yc_cpu_upsample_fwd(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    int f = a->op->p.up.factor, N = x->n, C = x->c, H = x->h, W = x->w, Wo = W * f;
    bool par = yc_hv_image(y) * (size_t)N > YC_UP_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            const float *xp = x->p + (size_t)i * x->ns + (size_t)c * H * W;
            float *yp = y->p + (size_t)i * y->ns + (size_t)c * H * f * Wo;
            for (int h = 0; h < H; h++) {
                const float *xr = xp + (size_t)h * W;
                float *yr = yp + (size_t)h * f * Wo;
                for (int w = 0; w < W; w++)
                    for (int b = 0; b < f; b++)
                        yr[w * f + b] = xr[w];
                for (int r = 1; r < f; r++)
                    memcpy(yr + (size_t)r * Wo, yr, (size_t)Wo * sizeof *yr);
            }
        }
    }
}

/* dx (N,C,H,W) (=|+=) sum of dy (N,C,H*f,W*f) over each f x f block (row-major order) */
void yc_cpu_upsample_bwd(const yc_cpu_args *a)
{
    const yc_hv *dy = &a->src[0], *dx = &a->dst[0];
    int f = a->op->p.up.factor, N = dx->n, C = dx->c, H = dx->h, W = dx->w, Wo = W * f;
    int acc = a->op->accumulate;
    bool par = yc_hv_image(dy) * (size_t)N > YC_UP_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            const float *gp = dy->p + (size_t)i * dy->ns + (size_t)c * H * f * Wo;
            float *dp = dx->p + (size_t)i * dx->ns + (size_t)c * H * W;
            for (int h = 0; h < H; h++) {
                float *dr = dp + (size_t)h * W;
                for (int w = 0; w < W; w++) {
                    float s = 0.0f;
                    for (int r = 0; r < f; r++) {
                        const float *g = gp + ((size_t)h * f + r) * Wo + (size_t)w * f;
                        for (int b = 0; b < f; b++)
                            s += g[b];
                    }
                    dr[w] = acc ? dr[w] + s : s;
                }
            }
        }
    }
}
