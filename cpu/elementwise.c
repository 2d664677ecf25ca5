/* Elementwise ops of the CPU backend: add, copy (with accumulate), fill, dropout; and the span
 * walker that every elementwise kernel (SiLU included) runs on. */
#include <omp.h>
#include <string.h>

#include "cpu_ops.h"

/* Below this many elements one thread does the whole op (a parallel region costs microseconds). */
#define YC_SPAN_SERIAL_MAX 16384

/* The part [*b, *e) of the calling thread when `total` elements are split evenly over its team. */
static void thread_range(size_t total, size_t *b, size_t *e)
{
    size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    *b = total / nt * t + (total % nt) * t / nt;
    *e = total / nt * (t + 1) + (total % nt) * (t + 1) / nt;
}

/* fn over one span of `len` elements starting at element offsets od, o0, o1 of d, s0, s1, through
 * chunk buffers for the FP16 tensors. */
static void run_span(const yc_hv *d, const yc_hv *s0, const yc_hv *s1, size_t od, size_t o0, size_t o1,
                     size_t len, bool reads_dst, yc_span_fn fn, const void *ctx)
{
    if (!d->p16 && (!s0 || !s0->p16) && (!s1 || !s1->p16)) {
        fn(d->p + od, s0 ? s0->p + o0 : NULL, s1 ? s1->p + o1 : NULL, len, ctx);
        return;
    }
    float b0[YC_CPU_CHUNK], b1[YC_CPU_CHUNK], bd[YC_CPU_CHUNK];
    for (size_t k = 0; k < len; k += YC_CPU_CHUNK) {
        size_t m = len - k < YC_CPU_CHUNK ? len - k : YC_CPU_CHUNK;
        const float *x0 = s0 ? yc_hv_read(s0, o0 + k, b0, m) : NULL;
        const float *x1 = s1 ? yc_hv_read(s1, o1 + k, b1, m) : NULL;
        float *y = d->p16 ? bd : d->p + od + k;
        if (d->p16 && reads_dst)
            yc_hv_load(d, od + k, bd, m);
        fn(y, x0, x1, m, ctx);
        if (d->p16)
            yc_hv_store(d, od + k, bd, m);
    }
}

void yc_cpu_for_spans(const yc_cpu_args *a, const yc_hv *d, const yc_hv *s0, const yc_hv *s1, bool reads_dst,
                      yc_span_fn fn, const void *ctx)
{
    size_t img = yc_hv_image(d);
    size_t total = (size_t)d->n * img;
#pragma omp parallel num_threads(a->threads) if (total > YC_SPAN_SERIAL_MAX)
    {
        /* each thread owns one contiguous part of the flattened (n, c, h, w) index */
        size_t b, e;
        thread_range(total, &b, &e);
        while (b < e) {
            size_t i = b / img, off = b % img;
            size_t len = img - off < e - b ? img - off : e - b;
            run_span(d, s0, s1, i * d->ns + off, s0 ? i * s0->ns + off : 0, s1 ? i * s1->ns + off : 0, len,
                     reads_dst, fn, ctx);
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
    yc_cpu_for_spans(a, &a->dst[0], &a->src[0], &a->src[1], false, add_span, NULL);
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

/* FP16 y = FP16 a: the bits are copied (converting and rounding back gives the same values; it
 * would only make signalling NaNs quiet). */
static void copy_f16(const yc_cpu_args *a, const yc_hv *y, const yc_hv *x)
{
    size_t img = yc_hv_image(y), total = (size_t)y->n * img;
#pragma omp parallel num_threads(a->threads) if (total > YC_SPAN_SERIAL_MAX)
    {
        size_t b, e;
        thread_range(total, &b, &e);
        while (b < e) {
            size_t i = b / img, off = b % img;
            size_t len = img - off < e - b ? img - off : e - b;
            uint16_t *dp = y->p16 + i * y->ns + off;
            const uint16_t *sp = x->p16 + i * x->ns + off;
            if (dp != sp)
                memmove(dp, sp, len * sizeof *dp);
            b += len;
        }
    }
}

/* y (N,C,H,W) (=|+=) a */
void yc_cpu_copy(const yc_cpu_args *a)
{
    int acc = a->op->accumulate;
    if (!acc && a->dst[0].p16 && a->src[0].p16)
        copy_f16(a, &a->dst[0], &a->src[0]);
    else
        yc_cpu_for_spans(a, &a->dst[0], &a->src[0], NULL, acc, acc ? acc_span : copy_span, NULL);
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
    yc_cpu_for_spans(a, &a->dst[0], NULL, NULL, false, fill_span, &v);
}

/* y (=|+=) x * scale where yc_dropout_hash(seed, i) >= threshold, 0 elsewhere; i the element's
 * row-major index in (N,C,H,W), so the mask does not depend on strides or threads.  FP32. */
void yc_cpu_dropout(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    uint32_t thr = a->op->p.drop.threshold, seed = a->op->p.drop.seed;
    float scale = a->op->p.drop.scale;
    int acc = a->op->accumulate;
    size_t img = yc_hv_image(y), total = (size_t)y->n * img;
#pragma omp parallel for num_threads(a->threads) schedule(static) if (total > YC_SPAN_SERIAL_MAX)
    for (size_t i = 0; i < total; i++) {
        size_t n = i / img, k = i % img;
        float v = yc_dropout_hash(seed, (uint32_t)i) >= thr ? x->p[n * x->ns + k] * scale : 0.0f;
        float *d = y->p + n * y->ns + k;
        *d = acc ? *d + v : v;
    }
}
