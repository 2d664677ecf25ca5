/* Global average pooling on the CPU (nn.AdaptiveAvgPool2d(1), Classify's pool), forward and
 * backward.  Threads split the (n, c) planes.  The forward pass takes FP16 x and y; the backward
 * pass works on gradients, always FP32. */
#include "cpu_ops.h"

/* Below this many input elements an op runs on one thread. */
#define YC_AVG_SERIAL_MAX 16384

/* y (N,C,1,1) = the sum of each (H,W) plane of x (N,C,H,W), row-major, over H*W */
void yc_cpu_avgpool_fwd(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    int N = x->n, C = x->c;
    size_t plane = (size_t)x->h * (size_t)x->w;
    bool par = yc_hv_image(x) * (size_t)N > YC_AVG_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            float buf[YC_CPU_CHUNK], s = 0.0f;
            size_t xo = (size_t)i * x->ns + (size_t)c * plane;
            for (size_t o = 0; o < plane; o += YC_CPU_CHUNK) {
                size_t m = plane - o < YC_CPU_CHUNK ? plane - o : YC_CPU_CHUNK;
                const float *v = yc_hv_read(x, xo + o, buf, m);
                for (size_t k = 0; k < m; k++)
                    s += v[k];
            }
            float mean = s / (float)plane;
            yc_hv_store(y, (size_t)i * y->ns + (size_t)c, &mean, 1);
        }
    }
}

/* dx (N,C,H,W) (=|+=) dy (N,C,1,1) / (H*W) at every pixel of its plane */
void yc_cpu_avgpool_bwd(const yc_cpu_args *a)
{
    const yc_hv *dy = &a->src[0], *dx = &a->dst[0];
    int N = dx->n, C = dx->c, acc = a->op->accumulate;
    size_t plane = (size_t)dx->h * (size_t)dx->w;
    bool par = yc_hv_image(dx) * (size_t)N > YC_AVG_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            float g = dy->p[(size_t)i * dy->ns + (size_t)c] / (float)plane;
            float *d = dx->p + (size_t)i * dx->ns + (size_t)c * plane;
            for (size_t k = 0; k < plane; k++)
                d[k] = acc ? d[k] + g : g;
        }
    }
}
