/* The bias gradient of a convolution, shared by its algorithms (conv.c, winograd.c). */
#include "cpu_ops.h"

#include <stdbool.h>

void yc_cpu_conv2d_bias_grad(const yc_hv *dy, float *db, int threads)
{
    size_t hw = (size_t)dy->h * (size_t)dy->w;
    bool par = (size_t)dy->n * (size_t)dy->c * hw > 16384;
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static) if (par)
    for (int k = 0; k < dy->c; k++) {
        double s = 0.0;
        for (int i = 0; i < dy->n; i++) {
            const float *d = dy->p + (size_t)i * dy->ns + (size_t)k * hw;
#pragma omp simd reduction(+ : s)
            for (size_t j = 0; j < hw; j++)
                s += d[j];
        }
        db[k] = (float)((double)db[k] + s);
    }
}
