/* Kernels of the CPU backend.
 *
 * cpu_backend.c validates an op (yc_op_check, supports), resolves every tensor to host memory and
 * calls one kernel below; kernels cannot fail.  One file per concern, forward and backward next
 * to each other: conv.c (with winograd.c for the 3x3 stride-1 ones), batchnorm.c (with the fused
 * batch norm + SiLU ops), activation.c (with silu_avx512.c, the AVX-512 exp and SiLU of both),
 * pool.c, upsample.c, elementwise.c, optim.c.
 *
 * Every kernel honours nstride for each tensor (images are `ns` elements apart; a tensor may be a
 * channel range of a concat output) and writes nothing outside the logical elements of its
 * outputs.  Activation gradients honour op->accumulate, parameter gradients are always added to.
 * Threads: each kernel does its work in one OpenMP parallel region of `threads` threads (conv:
 * one for the bulk of the work items, and a few per item left over when they do not divide
 * evenly, see conv.c); reductions are done in a fixed order, so results depend on the thread count
 * but not on scheduling.
 *
 * FP16 storage: the activation slots (see cpu_supports in cpu_backend.c) may hold YC_F16 tensors.
 * Kernels load them converted to FP32 (exactly), compute exactly as for FP32 tensors and store
 * FP16 outputs rounded to nearest even (src/core/half.h), mostly a chunk of YC_CPU_CHUNK elements at a
 * time (whole planes for max-pool, through the workspace; column blocks for convolutions).  So an
 * op on FP16 tensors gives the FP16-rounded result of the same op on FP32 tensors holding the FP16
 * values (tests/test_ops.c checks this bit for bit): the chunks never change the order of a
 * reduction (see batchnorm.c; the convolutions' GEMMs block K the same way whatever the width of
 * an FP16 sub-block, conv.c), and FP16-to-FP16 copies (copy, upsample) copy the bits.
 *
 * Aliasing: the elementwise kernels (silu, silu_bwd, add, copy, fill) may run in place (an output
 * identical to an input: same offset, nstride and type); every other kernel needs outputs that
 * overlap no input (the optimizer kernels update their outputs in place, and these overlap neither
 * their input nor each other). */
#ifndef YC_CPU_OPS_H
#define YC_CPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "half.h"

/* Function multi-versioning for the vectorised loops: AVX-512 and AVX2 clones selected at load
 * time, the baseline build otherwise.  The clones compute bit-identical results (no contraction
 * into FMA under -std=c11; the same operations, wider).  Intrinsics cannot go in them: code
 * written for one ISA is a function of its own with a run-time choice (gemm.c, silu_avx512.c).
 * Not under ThreadSanitizer: the clones' ifunc resolvers run during relocation, before the TSan
 * runtime is set up, and their instrumented entry crashes the program before main
 * (bench/tsan.sh). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) &&        \
    !defined(__SANITIZE_THREAD__)
#define YC_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define YC_CPU_CLONES
#endif

/* A tensor resolved to host memory. */
typedef struct yc_hv {
    /* element (0,0,0,0) of an FP32 tensor; NULL for an FP16 tensor or an unused slot */
    float *p;
    /* element (0,0,0,0) of an FP16 tensor (binary16 bits); NULL for an FP32 tensor or an unused
     * slot */
    uint16_t *p16;
    /* element type */
    yc_dtype type;
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

/* Elements that kernels convert from or to FP16 at a time (one stack buffer of floats each; a
 * multiple of every lane count of the kernels, so chunks never change a reduction's order). */
#define YC_CPU_CHUNK 512

/* dst[0, n) = elements [off, off + n) of t, converted to FP32. */
static inline void yc_hv_load(const yc_hv *t, size_t off, float *dst, size_t n)
{
    if (t->p16)
        yc_half_to_float_n(t->p16 + off, dst, n);
    else
        memcpy(dst, t->p + off, n * sizeof *dst);
}

/* Elements [off, off + n) of t = src[0, n) (rounded to nearest even for FP16). */
static inline void yc_hv_store(const yc_hv *t, size_t off, const float *src, size_t n)
{
    if (t->p16)
        yc_float_to_half_n(src, t->p16 + off, n);
    else
        memcpy(t->p + off, src, n * sizeof *src);
}

/* Elements [off, off + n) of t as FP32: a pointer into t for an FP32 tensor, else converted into
 * buf (n floats). */
static inline const float *yc_hv_read(const yc_hv *t, size_t off, float *buf, size_t n)
{
    if (!t->p16)
        return t->p + off;
    yc_half_to_float_n(t->p16 + off, buf, n);
    return buf;
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
    /* a forward convolution with frozen weights (op.p.conv.frozen): the backend's cache of
     * transformed weights (yc_cpu_wcache_get); NULL otherwise */
    struct yc_cpu_wcache *wcache;
} yc_cpu_args;

/* cpu_backend.c: weights kept transformed across runs of ops with frozen weights.  The floats
 * kept for the weights tensor w in the form `form` (an address that names it: the GEMM's packing,
 * a Winograd algorithm), `floats` of them, 64-byte aligned; *fill is true when they were just
 * made and the caller must write them (false: they hold what an earlier call wrote).  NULL when
 * the cache's budget (an eighth of the host's memory, at most 1 GiB) is spent or the memory
 * cannot be had: the kernel then transforms the weights in its workspace as without a cache.
 * Entries of a buffer are dropped when it is written, set or freed. */
struct yc_cpu_wcache;
float *yc_cpu_wcache_get(struct yc_cpu_wcache *c, const yc_tensor *w, const void *form,
                         size_t floats, bool *fill);

/* conv_dispatch.c: YC_OP_CONV2D, YC_OP_CONV2D_BWD_DATA, YC_OP_CONV2D_BWD_FILTER, each by
 * Winograd where it applies, else by the GEMM algorithm; the scratch bytes of an op run with
 * `threads` threads. */
size_t yc_cpu_conv2d_workspace(const yc_op *op, int threads);
void yc_cpu_conv2d_fwd(const yc_cpu_args *a);
void yc_cpu_conv2d_bwd_data(const yc_cpu_args *a);
void yc_cpu_conv2d_bwd_filter(const yc_cpu_args *a);
/* conv.c: the GEMM algorithm (any convolution), likewise */
size_t yc_cpu_gemm_conv_workspace(const yc_op *op, int threads);
void yc_cpu_gemm_conv_fwd(const yc_cpu_args *a);
void yc_cpu_gemm_conv_bwd_data(const yc_cpu_args *a);
void yc_cpu_gemm_conv_bwd_filter(const yc_cpu_args *a);
/* conv_bias.c: db[k] += the sum of dy's channel k over images and positions, in double (FP32
 * dy; the bias gradient of both algorithms) */
void yc_cpu_conv2d_bias_grad(const yc_hv *dy, float *db, int threads);

/* colrows.c: d[j] += s[j];  d[j] = x[2j] (reads nothing past x[2n-2]);  d[2j] += s[j]
 * (touches nothing past d[2n-2]); for j < n, n <= 0 doing nothing. */
void yc_cpu_add_row(float *d, const float *s, int n);
void yc_cpu_gather2(float *d, const float *x, int n);
void yc_cpu_scatter_add2(float *d, const float *s, int n);

/* winograd.c: whether a convolution op runs as Winograd (3x3, stride 1, padding 1, enough channels
 * for its pass, not turned off by YOLOCL_WINOGRAD=0), and which algorithm ("F(2x2, 3x3)" or
 * "F(4x4, 3x3)", NULL when none); its scratch bytes with `threads` threads; its three passes
 * (conv.c hands such ops over). */
bool yc_cpu_winograd_applies(const yc_op *op);
const char *yc_cpu_winograd_name(const yc_op *op);
size_t yc_cpu_winograd_workspace(const yc_op *op, int threads);
void yc_cpu_winograd_fwd(const yc_cpu_args *a);
void yc_cpu_winograd_bwd_data(const yc_cpu_args *a);
void yc_cpu_winograd_bwd_filter(const yc_cpu_args *a);

/* batchnorm.c: YC_OP_BN_TRAIN, YC_OP_BN_EVAL, YC_OP_BN_BWD, and the fused YC_OP_BN_SILU_TRAIN and
 * YC_OP_BN_SILU_BWD (bit-identical to BN_TRAIN then SILU, and SILU_BWD then BN_BWD, on FP32) and
 * YC_OP_BN_SILU_APPLY (bit-identical to the `a` of BN_SILU_TRAIN, FP16 too, any thread count) */
void yc_cpu_bn_train(const yc_cpu_args *a);
void yc_cpu_bn_eval(const yc_cpu_args *a);
void yc_cpu_bn_bwd(const yc_cpu_args *a);
void yc_cpu_bn_silu_train(const yc_cpu_args *a);
void yc_cpu_bn_silu_apply(const yc_cpu_args *a);
void yc_cpu_bn_silu_bwd(const yc_cpu_args *a);
/* batchnorm.c: scratch bytes of YC_OP_BN_SILU_BWD run with `threads` threads (a cache of dz) */
size_t yc_cpu_bn_silu_bwd_workspace(const yc_op *op, int threads);

/* activation.c: YC_OP_SILU, YC_OP_SILU_BWD */
void yc_cpu_silu_fwd(const yc_cpu_args *a);
void yc_cpu_silu_bwd(const yc_cpu_args *a);
/* activation.c: the same over n contiguous floats: y = silu(x);  dx (acc ? += : =) dy * silu'(x).
 * Elementwise (a value's result does not depend on its position or on n); y may be x, dx may be
 * dy or x. */
void yc_cpu_silu_span(float *y, const float *x, size_t n);
void yc_cpu_silu_bwd_span(float *dx, const float *dy, const float *x, size_t n, int acc);
/* activation.c: y[i] = exp(x[i]), the vectorised exp the SiLU kernels use (exported for tests):
 * under 1 ulp from the true value over the whole float range, subnormal results included;
 * exp(+inf) = +inf, exp(-inf) = +0, exp(NaN) = NaN, overflow to +inf above 88.72284. */
void yc_cpu_exp(const float *x, float *y, size_t n);

/* silu_avx512.c: whether the exp, SiLU and batch norm + SiLU kernels take their AVX-512 versions
 * below (when the GEMM's micro-kernel is "avx512": gemm.h's yc_sgemm_kernel_name(), so that
 * YOLOCL_GEMM_KERNEL selects the generic-vector code too).  The AVX-512 versions use FMA: their
 * results differ from the generic code's in the last bits (see silu_avx512.c). */
bool yc_cpu_silu_avx512(void);
#if defined(__x86_64__)
/* yc_cpu_exp, yc_cpu_silu_span, yc_cpu_silu_bwd_span */
void yc_cpu_exp_avx512(const float *x, float *y, size_t n);
void yc_cpu_silu_span_avx512(float *y, const float *x, size_t n);
void yc_cpu_silu_bwd_span_avx512(float *dx, const float *dy, const float *x, size_t n, int acc);
/* batchnorm.c's kernels: a = silu((x - mean) * scale + beta);  dz = silu_bwd(da, z) for that z;
 * the same dz for one block of at most YC_CPU_CHUNK values with its sums added to sg and sgx */
void yc_cpu_bn_silu_avx512(float *a, const float *x, size_t n, float mean, float scale, float beta);
void yc_cpu_silu_bwd_of_bn_avx512(float *dz, const float *da, const float *x, size_t n, float mean,
                                  float scale, float beta);
void yc_cpu_bn_silu_bwd_block_avx512(double *sg, double *sgx, float *dz, const float *da, const float *x,
                                     size_t m, float mean, float scale, float beta);
#endif

/* pool.c: scratch bytes of a max-pool op run with `threads` threads (FP16 planes as FP32). */
size_t yc_cpu_maxpool_workspace(const yc_op *op, int threads);
/* pool.c: YC_OP_MAXPOOL, YC_OP_MAXPOOL_BWD */
void yc_cpu_maxpool_fwd(const yc_cpu_args *a);
void yc_cpu_maxpool_bwd(const yc_cpu_args *a);

/* upsample.c: YC_OP_UPSAMPLE, YC_OP_UPSAMPLE_BWD */
void yc_cpu_upsample_fwd(const yc_cpu_args *a);
void yc_cpu_upsample_bwd(const yc_cpu_args *a);

/* avgpool.c: YC_OP_AVGPOOL, YC_OP_AVGPOOL_BWD */
void yc_cpu_avgpool_fwd(const yc_cpu_args *a);
void yc_cpu_avgpool_bwd(const yc_cpu_args *a);

/* elementwise.c: YC_OP_ADD, YC_OP_COPY, YC_OP_FILL, YC_OP_DROPOUT */
void yc_cpu_dropout(const yc_cpu_args *a);
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
 * nstride and type.  fn always sees FP32: FP16 tensors go through chunk buffers (converted on
 * load; d converted back after fn, and loaded before fn when `reads_dst`). */
typedef void (*yc_span_fn)(float *d, const float *s0, const float *s1, size_t len, const void *ctx);
void yc_cpu_for_spans(const yc_cpu_args *a, const yc_hv *d, const yc_hv *s0, const yc_hv *s1, bool reads_dst,
                      yc_span_fn fn, const void *ctx);

#endif
