/* Nearest-neighbour upsampling by an integer factor f on the CPU, forward and backward.
 * Threads split the (n, c) planes.  The forward pass takes FP16 x and y; the backward pass works on
 * gradients, always FP32. */
#include <string.h>

#include "cpu_ops.h"

/* Below this many output elements an op runs on one thread. */
#define YC_UP_SERIAL_MAX 16384

/* Output row yo (W*f elements of y) from input row xo (W elements of x) when x and y have
 * different types: input chunks converted to FP32, repeated, stored in y's type. */
static void row_mixed(const yc_hv *x, size_t xo, const yc_hv *y, size_t yo, int W, int f)
{
    float in[YC_CPU_CHUNK], out[YC_CPU_CHUNK];
    if (f > YC_CPU_CHUNK) {
        /* one input value at a time, its copies in pieces */
        for (int w = 0; w < W; w++) {
            yc_hv_load(x, xo + (size_t)w, in, 1);
            for (int o = 0; o < f; o += YC_CPU_CHUNK) {
                int m = f - o < YC_CPU_CHUNK ? f - o : YC_CPU_CHUNK;
                for (int k = 0; k < m; k++)
                    out[k] = in[0];
                yc_hv_store(y, yo + (size_t)w * f + o, out, (size_t)m);
            }
        }
        return;
    }
    int wc = YC_CPU_CHUNK / f; /* input columns per chunk */
    for (int w0 = 0; w0 < W; w0 += wc) {
        int m = W - w0 < wc ? W - w0 : wc;
        yc_hv_load(x, xo + (size_t)w0, in, (size_t)m);
        for (int w = 0; w < m; w++)
            for (int b = 0; b < f; b++)
                out[w * f + b] = in[w];
        yc_hv_store(y, yo + (size_t)w0 * f, out, (size_t)m * f);
    }
}

/* y (N,C,H*f,W*f): y[h][w] = x (N,C,H,W)[h/f][w/f].  FP16 to FP16 copies the bits (converting and
 * rounding back gives the same values; it would only make signalling NaNs quiet). */
void yc_cpu_upsample_fwd(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    int f = a->op->p.up.factor, N = x->n, C = x->c, H = x->h, W = x->w, Wo = W * f;
    size_t es = y->p16 ? sizeof(uint16_t) : sizeof(float);
    bool par = yc_hv_image(y) * (size_t)N > YC_UP_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            size_t xo = (size_t)i * x->ns + (size_t)c * H * W;
            size_t yo = (size_t)i * y->ns + (size_t)c * H * f * Wo;
            for (int h = 0; h < H; h++) {
                size_t xr = xo + (size_t)h * W, yr = yo + (size_t)h * f * Wo;
                if (x->p && y->p) {
                    for (int w = 0; w < W; w++)
                        for (int b = 0; b < f; b++)
                            y->p[yr + (size_t)w * f + b] = x->p[xr + w];
                } else if (x->p16 && y->p16) {
                    for (int w = 0; w < W; w++)
                        for (int b = 0; b < f; b++)
                            y->p16[yr + (size_t)w * f + b] = x->p16[xr + w];
                } else {
                    row_mixed(x, xr, y, yr, W, f);
                }
                char *row = y->p16 ? (char *)(y->p16 + yr) : (char *)(y->p + yr);
                for (int r = 1; r < f; r++)
                    memcpy(row + (size_t)r * Wo * es, row, (size_t)Wo * es);
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
