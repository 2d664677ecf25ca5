/* SiLU forward and backward, and the vectorised exp they use (both in vec16.h, shared with the
 * fused batch norm + SiLU ops of batchnorm.c; on CPUs with AVX-512, the versions of
 * silu_avx512.c, which differ from these in the last bits).
 *
 * Semantics are PyTorch's CPU kernels, operation for operation:
 *   silu(x)        = x / (1 + exp(-x))
 *   silu_bwd(dy,x) = dy * s * (1 + x * (1 - s)),  s = 1 / (1 + exp(-x))
 * hence silu(-inf) = NaN (-inf / inf), silu(+inf) = +inf, silu(x) = -0 for x < -88.7 (exp(-x)
 * overflows), silu(NaN) = NaN; silu_bwd at x = +-inf is NaN (inf * 0), at large finite |x| it is
 * dy (x > 0) or -0 * dy (x < 0), on either path.  The exp is faithfully rounded on both. */
#include "cpu_ops.h"
#include "vec16.h"

YC_CPU_CLONES
void yc_cpu_exp(const float *x, float *y, size_t n)
{
#if defined(__x86_64__)
    if (yc_cpu_silu_avx512()) {
        yc_cpu_exp_avx512(x, y, n);
        return;
    }
#endif
    vf v;
    FOR_VECTORS(n, i, len, {
        load_n(&v, x + i, len);
        exp_v(&v);
        store_n(y + i, &v, len);
    });
}

/* y = silu(x) = x / (1 + exp(-x)) over one contiguous span. */
YC_CPU_CLONES
void yc_cpu_silu_span(float *y, const float *x, size_t n)
{
#if defined(__x86_64__)
    if (yc_cpu_silu_avx512()) {
        yc_cpu_silu_span_avx512(y, x, n);
        return;
    }
#endif
    vf v;
    FOR_VECTORS(n, i, len, {
        load_n(&v, x + i, len);
        silu_v(&v);
        store_n(y + i, &v, len);
    });
}

static void silu_span(float *y, const float *x, const float *unused, size_t n, const void *ctx)
{
    (void)unused;
    (void)ctx;
    yc_cpu_silu_span(y, x, n);
}

/* y (N,C,H,W) = x * sigmoid(x) */
void yc_cpu_silu_fwd(const yc_cpu_args *a)
{
    yc_cpu_for_spans(a, &a->dst[0], &a->src[0], NULL, false, silu_span, NULL);
}

/* dx (= or +=) dy * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)), over one contiguous span. */
YC_CPU_CLONES
void yc_cpu_silu_bwd_span(float *dx, const float *dy, const float *x, size_t n, int acc)
{
#if defined(__x86_64__)
    if (yc_cpu_silu_avx512()) {
        yc_cpu_silu_bwd_span_avx512(dx, dy, x, n, acc);
        return;
    }
#endif
    vf v, g, d;
    FOR_VECTORS(n, i, len, {
        load_n(&v, x + i, len);
        load_n(&g, dy + i, len);
        silu_bwd_v(&g, &v);
        if (acc) {
            load_n(&d, dx + i, len);
            g = d + g;
        }
        store_n(dx + i, &g, len);
    });
}

/* ctx points to the accumulate flag */
static void silu_bwd_span(float *dx, const float *dy, const float *x, size_t n, const void *ctx)
{
    yc_cpu_silu_bwd_span(dx, dy, x, n, *(const int *)ctx);
}

/* dx (N,C,H,W) (=|+=) dy * sigmoid(x) * (1 + x * (1 - sigmoid(x))) */
void yc_cpu_silu_bwd(const yc_cpu_args *a)
{
    int acc = a->op->accumulate;
    yc_cpu_for_spans(a, &a->dst[0], &a->src[0], &a->src[1], acc, silu_bwd_span, &acc);
}
