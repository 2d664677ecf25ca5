/* Elementwise ops of the CPU backend: add, copy (with accumulate), fill; and the span walker that
 * every elementwise kernel (SiLU included) runs on. */
#include <omp.h>
#include <string.h>

#include "cpu_ops.h"

/* Below this many elements one thread does the whole op (a parallel region costs microseconds). */
#define YC_SPAN_SERIAL_MAX 16384

void yc_cpu_for_spans(const yc_cpu_args *a, const yc_hv *d, const yc_hv *s0, const yc_hv *s1, yc_span_fn fn,
                      const void *ctx)
{
    size_t img = yc_hv_image(d);
    size_t total = (size_t)d->n * img;
#pragma omp parallel num_threads(a->threads) if (total > YC_SPAN_SERIAL_MAX)
    {
        /* thread t owns [total*t/T, total*(t+1)/T) of the flattened (n, c, h, w) index */
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t b = total / nt * t + (total % nt) * t / nt;
        size_t e = total / nt * (t + 1) + (total % nt) * (t + 1) / nt;
        while (b < e) {
            size_t i = b / img, off = b % img;
            size_t len = img - off < e - b ? img - off : e - b;
            fn(d->p + i * d->ns + off, s0 ? s0->p + i * s0->ns + off : NULL,
               s1 ? s1->p + i * s1->ns + off : NULL, len, ctx);
            b += len;
        }
    }
}

/* y = a + b */
static void add_span(float *y, const float *a, const float *b, size_t n, const void *ctx)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

/* y (N,C,H,W) = a + b */
void yc_cpu_add(const yc_cpu_args *a)
{
    yc_cpu_for_spans(a, &a->dst[0], &a->src[0], &a->src[1], add_span, NULL);
}

/* y = a (memmove: an in-place copy is a no-op) */
static void copy_span(float *y, const float *a, const float *unused, size_t n, const void *ctx)
{
    (void)unused;
    (void)ctx;
    if (y != a)
        memmove(y, a, n * sizeof *y);
}

/* y += a */
static void acc_span(float *y, const float *a, const float *unused, size_t n, const void *ctx)
{
    (void)unused;
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        y[i] += a[i];
}

/* y (N,C,H,W) (=|+=) a */
void yc_cpu_copy(const yc_cpu_args *a)
{
    yc_cpu_for_spans(a, &a->dst[0], &a->src[0], NULL, a->op->accumulate ? acc_span : copy_span, NULL);
}

/* y = value */
static void fill_span(float *y, const float *unused0, const float *unused1, size_t n, const void *ctx)
{
    (void)unused0;
    (void)unused1;
    float v = *(const float *)ctx;
    for (size_t i = 0; i < n; i++)
        y[i] = v;
}

/* y (N,C,H,W) = value */
void yc_cpu_fill(const yc_cpu_args *a)
{
    float v = a->op->p.fill.value;
    yc_cpu_for_spans(a, &a->dst[0], NULL, NULL, fill_span, &v);
}
