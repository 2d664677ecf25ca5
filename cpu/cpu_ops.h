/* Kernels of the CPU backend.
 *
 * cpu_backend.c validates an op (yc_op_check, supports), resolves every tensor to host memory and
 * calls one kernel below; kernels cannot fail.  One file per concern, forward and backward next
 * to each other: conv.c, batchnorm.c, activation.c, pool.c, upsample.c, elementwise.c, optim.c.
 *
 * Every kernel honours nstride for each tensor (images are `ns` elements apart; a tensor may be a
 * channel range of a concat output) and writes nothing outside the logical elements of its
 * outputs.  Activation gradients honour op->accumulate, parameter gradients are always added to.
 * Threads: each kernel does its work in one OpenMP parallel region of `threads` threads (conv:
 * one for the bulk of the work items, and a few per item left over when they do not divide
 * evenly, see conv.c); reductions are done in a fixed order, so results depend on the thread count
 * but not on scheduling.
 *
 * Aliasing: the elementwise kernels (silu, silu_bwd, add, copy, fill) may run in place (an output
 * identical to an input, same offset and nstride); every other kernel needs outputs that overlap
 * no input (the optimizer kernels update their outputs in place, and these overlap neither their
 * input nor each other). */
#ifndef YC_CPU_OPS_H
#define YC_CPU_OPS_H

#include <stddef.h>

#include "backend.h"

/* Function multi-versioning for the vectorised loops: AVX-512 and AVX2 clones selected at load
 * time, the baseline build otherwise.  The clones compute bit-identical results (no contraction
 * into FMA under -std=c11; the same operations, wider). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define YC_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define YC_CPU_CLONES
#endif

/* A tensor resolved to host memory. */
typedef struct yc_hv {
    /* element (0,0,0,0); NULL for an unused slot */
    float *p;
    /* shape: images, channels, rows, columns */
    int n, c, h, w;
    /* elements between image i and image i+1 */
    size_t ns;
} yc_hv;

/* Elements of one image of a resolved tensor. */
static inline size_t yc_hv_image(const yc_hv *t)
{
    return (size_t)t->c * (size_t)t->h * (size_t)t->w;
}

/* Everything a kernel gets. */
typedef struct yc_cpu_args {
    /* the op: kind, parameters, accumulate */
    const yc_op *op;
    /* op->src[i] and op->dst[i] in host memory (p == NULL for unused slots) */
    yc_hv src[YC_OP_MAX_SRC];
    yc_hv dst[YC_OP_MAX_DST];
    /* scratch memory of ws_size >= workspace(op) bytes (NULL when 0); float-aligned, and
     * 64-byte aligned whenever the caller's workspace offset is (the planner aligns to
     * info.alignment), which the conv kernels keep for each thread's buffer */
    void *ws;
    size_t ws_size;
    /* threads of each parallel region */
    int threads;
} yc_cpu_args;

/* conv.c: scratch bytes of a convolution op run with `threads` threads. */
size_t yc_cpu_conv2d_workspace(const yc_op *op, int threads);
/* conv.c: YC_OP_CONV2D, YC_OP_CONV2D_BWD_DATA, YC_OP_CONV2D_BWD_FILTER */
void yc_cpu_conv2d_fwd(const yc_cpu_args *a);
void yc_cpu_conv2d_bwd_data(const yc_cpu_args *a);
void yc_cpu_conv2d_bwd_filter(const yc_cpu_args *a);

/* batchnorm.c: YC_OP_BN_TRAIN, YC_OP_BN_EVAL, YC_OP_BN_BWD */
void yc_cpu_bn_train(const yc_cpu_args *a);
void yc_cpu_bn_eval(const yc_cpu_args *a);
void yc_cpu_bn_bwd(const yc_cpu_args *a);

/* activation.c: YC_OP_SILU, YC_OP_SILU_BWD */
void yc_cpu_silu_fwd(const yc_cpu_args *a);
void yc_cpu_silu_bwd(const yc_cpu_args *a);
/* activation.c: y[i] = exp(x[i]), the vectorised exp the SiLU kernels use (exported for tests):
 * under 1 ulp from the true value over the whole float range, subnormal results included;
 * exp(+inf) = +inf, exp(-inf) = +0, exp(NaN) = NaN, overflow to +inf above 88.72284. */
void yc_cpu_exp(const float *x, float *y, size_t n);

/* pool.c: YC_OP_MAXPOOL, YC_OP_MAXPOOL_BWD */
void yc_cpu_maxpool_fwd(const yc_cpu_args *a);
void yc_cpu_maxpool_bwd(const yc_cpu_args *a);

/* upsample.c: YC_OP_UPSAMPLE, YC_OP_UPSAMPLE_BWD */
void yc_cpu_upsample_fwd(const yc_cpu_args *a);
void yc_cpu_upsample_bwd(const yc_cpu_args *a);

/* elementwise.c: YC_OP_ADD, YC_OP_COPY, YC_OP_FILL */
void yc_cpu_add(const yc_cpu_args *a);
void yc_cpu_copy(const yc_cpu_args *a);
void yc_cpu_fill(const yc_cpu_args *a);

/* optim.c: YC_OP_SGD, YC_OP_ADAM, YC_OP_EMA, YC_OP_SUMSQ.  The first three give PyTorch 1.13's bits
 * for the same float32 parameters (see optim.c); sumsq adds in double, in an order fixed by the
 * element count and the thread count. */
void yc_cpu_sgd(const yc_cpu_args *a);
void yc_cpu_adam(const yc_cpu_args *a);
void yc_cpu_ema(const yc_cpu_args *a);
void yc_cpu_sumsq(const yc_cpu_args *a);

/* elementwise.c: runs fn over the elements of `d` (and the same elements of s0 and s1, which may
 * be NULL) in contiguous spans, the flattened index range split evenly over the threads: one
 * parallel region, no barrier but its end.  `d` and the sources share a shape; each has its own
 * nstride. */
typedef void (*yc_span_fn)(float *d, const float *s0, const float *s1, size_t len, const void *ctx);
void yc_cpu_for_spans(const yc_cpu_args *a, const yc_hv *d, const yc_hv *s0, const yc_hv *s1, yc_span_fn fn,
                      const void *ctx);

#endif
