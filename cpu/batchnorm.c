/* Batch normalisation on the CPU: training forward, evaluation forward, backward, and the fused
 * batch norm + SiLU pair that recomputes the BN output in backward instead of storing it.
 *
 * Statistics are per channel over (N, H, W), M = N*H*W values.  Normalising uses the biased
 * variance, the running estimate the unbiased one (PyTorch).  Per-element arithmetic is FP32, on
 * vectors of 16 floats (vec16.h), without FMA (-std=c11 does not contract; silu_avx512.c's
 * kernels, which the SiLU parts of the fused ops call on CPUs with AVX-512, compute z and the
 * sums with the same operations, and only SiLU with FMA):
 *   z  = (x - mean) * scale + beta,          scale = gamma * invstd rounded to FP32,
 *   dx = (dy - mdy) * k - (x - mean) * kc,   k = gamma * invstd, mdy = sum(dy) / M,
 *                                            kc = k * sum(dy * (x - mean)) * invstd^2 / M,
 * the per-channel constants worked out in double and rounded to FP32 (a few roundings per value
 * where there was one from double before; tests/test_ops.c's tolerances hold with room).  The
 * forward pass normalises with the statistics it saves, rounded to FP32 ([mean; invstd], what the
 * backward pass reads), so that the BN output can be recomputed from x and the saved statistics
 * bit for bit; the rounding of the mean costs up to |mean|/std * 2^-24 of the normalised value
 * (PyTorch's x * scale + shift in float loses a few times that).
 *
 * Reductions go block by block: a block is the YC_CPU_CHUNK (512) elements of an image plane
 * starting at a multiple of 512 (the last block of a plane may be shorter).  Within a block the
 * sums are FP32 in 4 x 16 lanes, vector v of the block (elements 16v .. 16v+15) going to
 * accumulator v % 4, lane by lane (at most 8 values per lane); at the block's end the four are
 * added as (a0 + a1) + (a2 + a3) and the result goes into double:
 *   - training statistics: a first pass over the block (in L1 by then) sums it for a shift
 *     c = its mean rounded to FP32, a second sums x - c and (x - c)^2, which give the block's mean
 *     and its sum of squared deviations (sum (x-c)^2 - (sum (x-c))^2 / m: c is close to the mean,
 *     so nothing cancels); the blocks are combined in order in double with Chan et al.'s update
 *     (mean += delta * m / n, M2 += M2_b + delta^2 * n_a * m / n).  One pass over x in memory
 *     where a mean pass then a squared-deviation pass took two, and as accurate.  A block whose
 *     FP32 sums overflow (|x - c| above 2^64) or that holds Inf or NaN is redone in double;
 *   - backward sums (dy, dy * (x - mean)): the 16 lanes of each block are added to 16 double
 *     partial sums, which a fixed tree adds at the end.
 * The results are a function of the values alone: they do not depend on the vector width (the
 * clones of YC_CPU_CLONES: the lanes are fixed at 16 and the trees written out), nor on the
 * pieces a plane is processed in (FP16 chunks, the fused ops' chunks: whole blocks), which is
 * what makes the fused ops bit-identical to the unfused sequence and FP16 inputs identical to FP32
 * ones of equal value.  Where SiLU enters (the fused ops' outputs, their backward's dz and hence
 * its sums), they depend on the path as well: AVX-512 or generic vectors (vec16.h), which differ
 * in the last bits; the identities above hold within either.
 *
 * Fused ops: YC_OP_BN_SILU_TRAIN computes z as YC_OP_BN_TRAIN computes y and applies SiLU to it in
 * registers (vec16.h's silu_v, or silu_avx512.c's silu16, as the SILU op does);
 * YC_OP_BN_SILU_APPLY is the per-element half of it alone (z from x and the saved statistics, then
 * SiLU: both elementwise, so its bits are those of BN_SILU_TRAIN's `a` however the work is
 * split); YC_OP_BN_SILU_BWD recomputes z, applies the SiLU backward (silu_bwd_v, or silu_bwd16) to
 * get dz (what YC_OP_SILU_BWD would store) and runs the batch-norm backward on it: the sums in a
 * first pass over the channel (dz computed and summed in registers, block_silu_bwd), dx in a
 * second.  The first pass keeps up to YC_BN_CACHE values of the channel's dz in the thread's part
 * of the workspace, and the second pass recomputes only the rest (the exp and division of SiLU's
 * gradient cost more than the rest of the backward); nothing of the size of x is ever stored.
 *
 * Threads split channels (evaluation and BN_SILU_APPLY: (image, channel) planes): one parallel
 * region per op, no barrier but its end.
 *
 * SyncBatchNorm (op.p.bn.sync set, backend.h): the training and backward ops run as two parallel
 * regions, the per-channel sums of the first (the moments, or the backward's sums of dy and
 * dy * (x - mean)) summed over the processes between them on the calling thread
 * (yc_bn_sync_stats, yc_bn_sync_grads), the second normalising or computing dx with the global
 * values and count; the fused backward computes dz again in its second region. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu_ops.h"
#include "log.h"
#include "vec16.h"

/* Below this many elements an op runs on one thread. */
#define YC_BN_SERIAL_MAX 16384

/* Values of dz that YC_OP_BN_SILU_BWD keeps per thread (4 MiB, a convolution's column block). */
#define YC_BN_CACHE ((size_t)1 << 20)

size_t yc_cpu_bn_silu_bwd_workspace(const yc_op *op, int threads)
{
    const yc_tensor *x = op->src[1];
    size_t m = (size_t)x->n * (size_t)x->h * (size_t)x->w;
    m = m < YC_BN_CACHE ? (m + 15) / 16 * 16 : YC_BN_CACHE;
    return (size_t)(threads > 0 ? threads : 1) * m * sizeof(float);
}

/* ---------------------------------------------------------------------------------------------
 * Block kernels (a block: at most YC_CPU_CHUNK elements, see the header).
 * ------------------------------------------------------------------------------------------- */

/* Runs step(k, j, len) over the vectors of a block of m elements: j the vector's first element,
 * len its length (VL but for the last), k = (j / VL) % 4 as a literal 0..3 (the accumulator). */
#define FOR_BLOCK(m, step)                                                                                   \
    do {                                                                                                     \
        size_t j_ = 0;                                                                                       \
        for (; j_ + 4 * VL <= (m); j_ += 4 * VL) {                                                           \
            step(0, j_, VL);                                                                                 \
            step(1, j_ + VL, VL);                                                                            \
            step(2, j_ + 2 * VL, VL);                                                                        \
            step(3, j_ + 3 * VL, VL);                                                                        \
        }                                                                                                    \
        if (j_ < (m)) {                                                                                      \
            step(0, j_, (m)-j_ < VL ? (m)-j_ : VL);                                                          \
            j_ += VL;                                                                                        \
        }                                                                                                    \
        if (j_ < (m)) {                                                                                      \
            step(1, j_, (m)-j_ < VL ? (m)-j_ : VL);                                                          \
            j_ += VL;                                                                                        \
        }                                                                                                    \
        if (j_ < (m)) {                                                                                      \
            step(2, j_, (m)-j_ < VL ? (m)-j_ : VL);                                                          \
            j_ += VL;                                                                                        \
        }                                                                                                    \
        if (j_ < (m))                                                                                        \
            step(3, j_, (m)-j_);                                                                             \
    } while (0)

/* The sum of the lanes of *v in double, in a fixed tree. */
static inline __attribute__((always_inline)) double hsum(const vf *v)
{
    float f[VL];
    memcpy(f, v, sizeof f);
    double d[VL / 2];
    for (int l = 0; l < VL / 2; l++)
        d[l] = (double)f[l] + (double)f[l + VL / 2];
    return ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
}

/* acc[l] += lane l of *v, for the VL lanes. */
static inline __attribute__((always_inline)) void add_lanes(double *acc, const vf *v)
{
    float f[VL];
    memcpy(f, v, sizeof f);
    for (int l = 0; l < VL; l++)
        acc[l] += f[l];
}

/* The sum of VL double partial sums, in a fixed tree. */
static double lanes_total(const double *acc)
{
    double d[VL / 2];
    for (int l = 0; l < VL / 2; l++)
        d[l] = acc[l] + acc[l + VL / 2];
    return ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
}

/* Count, mean and sum of squared deviations of the values seen so far. */
typedef struct moments {
    double n, mean, m2;
} moments;

/* Adds the m values of a block to *mo (see the header). */
YC_CPU_CLONES
static void block_moments(moments *mo, const float *x, size_t m)
{
    vf v, s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    /* zero padding adds nothing */
#define SUM_STEP(k, j, len)                                                                                  \
    do {                                                                                                     \
        load_n(&v, x + (j), len);                                                                            \
        s##k += v;                                                                                           \
    } while (0)
    FOR_BLOCK(m, SUM_STEP);
#undef SUM_STEP
    vf t = (s0 + s1) + (s2 + s3);
    double nb = (double)m;
    float c = (float)(hsum(&t) / nb);
    vf d0 = {0}, d1 = {0}, d2 = {0}, d3 = {0}, q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0};
#define DEV_STEP(k, j, len)                                                                                  \
    do {                                                                                                     \
        load_n(&v, x + (j), len);                                                                            \
        v = v - c;                                                                                           \
        if ((len) < VL)                                                                                      \
            v = SELECT(LANES_BELOW(len), v, SPLAT(0.0f));                                                    \
        d##k += v;                                                                                           \
        q##k += v * v;                                                                                       \
    } while (0)
    FOR_BLOCK(m, DEV_STEP);
#undef DEV_STEP
    vf dt = (d0 + d1) + (d2 + d3), qt = (q0 + q1) + (q2 + q3);
    double sd = hsum(&dt), sq = hsum(&qt);
    double mean_b = (double)c + sd / nb, m2_b = sq - sd * sd / nb;
    if (!isfinite(sq)) {
        /* FP32 overflow (|x - c| above 2^64, or sums above FLT_MAX) or Inf / NaN in x: the block
         * in double, as a function of its values alone still (Inf and NaN give NaN) */
        double s = 0.0, q = 0.0;
        for (size_t j = 0; j < m; j++)
            s += x[j];
        mean_b = s / nb;
        for (size_t j = 0; j < m; j++)
            q += ((double)x[j] - mean_b) * ((double)x[j] - mean_b);
        m2_b = q;
    }
    double n = mo->n + nb, delta = mean_b - mo->mean;
    mo->mean += delta * (nb / n);
    mo->m2 += m2_b + delta * delta * (mo->n * nb / n);
    mo->n = n;
}

/* y = (x - mean) * scale + beta over n values (any position), then y = silu(y) when `silu`. */
YC_CPU_CLONES
static void normalise(float *y, const float *x, size_t n, float mean, float scale, float beta, int silu)
{
    vf v;
#if defined(__x86_64__)
    if (silu && yc_cpu_silu_avx512()) {
        yc_cpu_bn_silu_avx512(y, x, n, mean, scale, beta);
        return;
    }
#endif
    if (silu) {
        FOR_VECTORS(n, i, len, {
            load_n(&v, x + i, len);
            v = (v - mean) * scale + beta;
            silu_v(&v);
            store_n(y + i, &v, len);
        });
    } else {
        FOR_VECTORS(n, i, len, {
            load_n(&v, x + i, len);
            v = (v - mean) * scale + beta;
            store_n(y + i, &v, len);
        });
    }
}

/* dz = silu_bwd(da, z), z = (x - mean) * scale + beta, over n values (any position). */
YC_CPU_CLONES
static void silu_bwd_of_bn(float *dz, const float *da, const float *x, size_t n, float mean, float scale,
                           float beta)
{
#if defined(__x86_64__)
    if (yc_cpu_silu_avx512()) {
        yc_cpu_silu_bwd_of_bn_avx512(dz, da, x, n, mean, scale, beta);
        return;
    }
#endif
    vf v, g;
    FOR_VECTORS(n, i, len, {
        load_n(&v, x + i, len);
        load_n(&g, da + i, len);
        v = (v - mean) * scale + beta;
        silu_bwd_v(&g, &v);
        store_n(dz + i, &g, len);
    });
}

/* The backward reductions' step tail: a##k += v and b##k += w over the first len lanes. */
#define ADD_VW(k, len)                                                                                       \
    do {                                                                                                     \
        if ((len) < VL) {                                                                                    \
            vi in_ = LANES_BELOW(len);                                                                       \
            v = SELECT(in_, v, SPLAT(0.0f));                                                                 \
            w = SELECT(in_, w, SPLAT(0.0f));                                                                 \
        }                                                                                                    \
        a##k += v;                                                                                           \
        b##k += w;                                                                                           \
    } while (0)

/* sg[l] += the block's FP32 sum of g in lane l;  sgx[l] += that of g * (x - mean) (see the
 * header). */
YC_CPU_CLONES
static void block_bwd(double *sg, double *sgx, const float *g, const float *x, size_t m, float mean)
{
    vf v, w, a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
#define BWD_STEP(k, j, len)                                                                                  \
    do {                                                                                                     \
        load_n(&v, g + (j), len);                                                                            \
        load_n(&w, x + (j), len);                                                                            \
        w = (w - mean) * v;                                                                                  \
        ADD_VW(k, len);                                                                                      \
    } while (0)
    FOR_BLOCK(m, BWD_STEP);
#undef BWD_STEP
    vf at = (a0 + a1) + (a2 + a3), bt = (b0 + b1) + (b2 + b3);
    add_lanes(sg, &at);
    add_lanes(sgx, &bt);
}

/* block_bwd of g = dz = silu_bwd(da, z), z = (x - mean) * scale + beta, fused: dz is computed in
 * registers and stored (the same operations, lanes and accumulators as silu_bwd_of_bn then
 * block_bwd, hence the same bits). */
YC_CPU_CLONES
static void block_silu_bwd(double *sg, double *sgx, float *dz, const float *da, const float *x, size_t m,
                           float mean, float scale, float beta)
{
#if defined(__x86_64__)
    if (yc_cpu_silu_avx512()) {
        yc_cpu_bn_silu_bwd_block_avx512(sg, sgx, dz, da, x, m, mean, scale, beta);
        return;
    }
#endif
    vf v, w, a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
#define SBWD_STEP(k, j, len)                                                                                 \
    do {                                                                                                     \
        load_n(&w, x + (j), len);                                                                            \
        load_n(&v, da + (j), len);                                                                           \
        w = w - mean;                                                                                        \
        vf z_ = w * scale + beta;                                                                            \
        silu_bwd_v(&v, &z_);                                                                                 \
        store_n(dz + (j), &v, len);                                                                          \
        w = w * v;                                                                                           \
        ADD_VW(k, len);                                                                                      \
    } while (0)
    FOR_BLOCK(m, SBWD_STEP);
#undef SBWD_STEP
    vf at = (a0 + a1) + (a2 + a3), bt = (b0 + b1) + (b2 + b3);
    add_lanes(sg, &at);
    add_lanes(sgx, &bt);
}

/* The constants of dx for one channel, FP32: dx = k * (dy - mdy) - (x - mean) * kc. */
typedef struct bwd_chan {
    float mean, k, mdy, kc;
} bwd_chan;

/* dx (acc ? += : =) k * (g - mdy) - (x - mean) * kc over n values (any position). */
YC_CPU_CLONES
static void bwd_dx(float *dx, const float *g, const float *x, size_t n, const bwd_chan *b, int acc)
{
    const float k = b->k, mdy = b->mdy, mean = b->mean, kc = b->kc;
    vf v, w, d;
    if (acc) {
        FOR_VECTORS(n, i, len, {
            load_n(&v, g + i, len);
            load_n(&w, x + i, len);
            v = (v - mdy) * k - (w - mean) * kc;
            load_n(&d, dx + i, len);
            v = d + v;
            store_n(dx + i, &v, len);
        });
    } else {
        FOR_VECTORS(n, i, len, {
            load_n(&v, g + i, len);
            load_n(&w, x + i, len);
            v = (v - mdy) * k - (w - mean) * kc;
            store_n(dx + i, &v, len);
        });
    }
}

/* Offset of plane (image i, channel c) of t. */
static size_t plane(const yc_hv *t, int i, int c, size_t hw)
{
    return (size_t)i * t->ns + (size_t)c * hw;
}

/* Elements an elementwise kernel takes from a plane at a time: whole planes when every tensor
 * involved is FP32, chunks otherwise. */
static size_t step_of(const yc_hv *x, const yc_hv *y, size_t hw)
{
    return x->p16 || y->p16 ? YC_CPU_CHUNK : hw;
}

/* ---------------------------------------------------------------------------------------------
 * Training forward: statistics of one channel, shared by BN_TRAIN and BN_SILU_TRAIN.
 * ------------------------------------------------------------------------------------------- */

/* What the training forward pass uses of one channel's statistics: the saved mean, gamma times
 * the saved invstd, beta. */
typedef struct chan {
    float mean, scale, beta;
} chan;

/* Moments of channel c of x over its images (block by block, see the header). */
static moments channel_moments(const yc_hv *x, int c)
{
    size_t hw = (size_t)x->h * x->w;
    float buf[YC_CPU_CHUNK];
    moments mo = {0.0, 0.0, 0.0};
    for (int i = 0; i < x->n; i++)
        for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
            size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
            block_moments(&mo, yc_hv_read(x, plane(x, i, c, hw) + k, buf, m), m);
        }
    return mo;
}

/* Channel c's batch mean and biased variance over M values stored as stats = [mean; invstd] and
 * into the running estimates with momentum m: running = (1 - m) * running + m * batch, variance
 * unbiased; the normalising constants. */
static chan channel_set(const yc_cpu_args *a, int c, double mean, double var, double M)
{
    const float *gamma = a->src[1].p, *beta = a->src[2].p;
    float *stats = a->dst[1].p, *rmean = a->dst[2].p, *rvar = a->dst[3].p;
    int C = a->src[0].c;
    double eps = a->op->p.bn.eps, mom = a->op->p.bn.momentum;
    if (var < 0.0) /* rounding, for (nearly) constant channels; NaN stays */
        var = 0.0;
    double invstd = 1.0 / sqrt(var + eps);
    stats[c] = (float)mean;
    stats[C + c] = (float)invstd;
    rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mean);
    rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * var * M / (M - 1.0));
    return (chan){.mean = stats[c], .scale = gamma[c] * stats[C + c], .beta = beta[c]};
}

/* y = the normalised channel c of x (silu of it when `silu`), over every image. */
static void channel_normalise(const yc_cpu_args *a, int c, chan ch, int silu)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    size_t hw = (size_t)x->h * x->w, step = step_of(x, y, hw);
    float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
    for (int i = 0; i < x->n; i++)
        for (size_t k = 0; k < hw; k += step) {
            size_t m = hw - k < step ? hw - k : step;
            const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
            float *z = y->p16 ? zb : y->p + plane(y, i, c, hw) + k;
            normalise(z, xp, m, ch.mean, ch.scale, ch.beta, silu);
            if (y->p16)
                yc_hv_store(y, plane(y, i, c, hw) + k, zb, m);
        }
}

/* SyncBatchNorm's training forward (op.p.bn.sync): every channel's moments over this process's
 * images in one parallel pass, their sums over the processes (yc_bn_sync_stats, on the calling
 * thread, between the parallel regions), then the statistics and the output in a second pass. */
static int bn_train_sync(const yc_cpu_args *a, int silu)
{
    const yc_hv *x = &a->src[0];
    int C = x->c;
    double M = (double)x->n * (double)x->h * (double)x->w, total = 0.0;
    double *mean = malloc(2 * (size_t)C * sizeof *mean), *m2 = mean + C;
    if (!mean)
        return yc_error_status(YC_ENOMEM, "out of memory for the statistics of %d channels", C);
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        moments mo = channel_moments(x, c);
        mean[c] = mo.mean;
        m2[c] = mo.m2;
    }
    int st = yc_bn_sync_stats(a->op, C, M, mean, m2, &total);
    if (!st) {
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
        for (int c = 0; c < C; c++)
            channel_normalise(a, c, channel_set(a, c, mean[c], m2[c], total), silu);
    }
    free(mean);
    return st;
}

/* Training: x (N,C,H,W), gamma, beta (1,C,1,1) -> y (N,C,H,W), stats (2,C,1,1), running_mean and
 * running_var (1,C,1,1) updated.  silu: y = silu(z) (BN_SILU_TRAIN). */
static int bn_train(const yc_cpu_args *a, int silu)
{
    if (a->op->p.bn.sync)
        return bn_train_sync(a, silu);
    const yc_hv *x = &a->src[0];
    int C = x->c;
    double M = (double)x->n * (double)x->h * (double)x->w;
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        moments mo = channel_moments(x, c);
        channel_normalise(a, c, channel_set(a, c, mo.mean, mo.m2 / M, M), silu);
    }
    return YC_OK;
}

int yc_cpu_bn_train(const yc_cpu_args *a)
{
    return bn_train(a, 0);
}

/* Training, fused with SiLU: a = silu(z), z as yc_cpu_bn_train computes y (never stored). */
int yc_cpu_bn_silu_train(const yc_cpu_args *a)
{
    return bn_train(a, 1);
}

/* The output of the fused training forward from x and the statistics it saved:
 * src: x, gamma, beta, stats [mean; invstd];  dst: a.  Every (image, channel) plane is a work item;
 * z and a exactly as yc_cpu_bn_silu_train computes them. */
void yc_cpu_bn_silu_apply(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    const float *gamma = a->src[1].p, *beta = a->src[2].p, *stats = a->src[3].p;
    int N = x->n, C = x->c;
    size_t hw = (size_t)x->h * x->w, step = step_of(x, y, hw);
    bool par = (double)N * C * hw > YC_BN_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            float mean = stats[c], scale = gamma[c] * stats[C + c];
            float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
            for (size_t k = 0; k < hw; k += step) {
                size_t m = hw - k < step ? hw - k : step;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                float *z = y->p16 ? zb : y->p + plane(y, i, c, hw) + k;
                normalise(z, xp, m, mean, scale, beta[c], 1);
                if (y->p16)
                    yc_hv_store(y, plane(y, i, c, hw) + k, zb, m);
            }
        }
    }
}

/* Evaluation: y = (x - running_mean) * scale + beta, scale = gamma / sqrt(running_var + eps)
 * worked out in double and rounded to FP32. */
void yc_cpu_bn_eval(const yc_cpu_args *a)
{
    const yc_hv *x = &a->src[0], *y = &a->dst[0];
    const float *gamma = a->src[1].p, *beta = a->src[2].p, *rmean = a->src[3].p, *rvar = a->src[4].p;
    int N = x->n, C = x->c;
    size_t hw = (size_t)x->h * x->w, step = step_of(x, y, hw);
    double eps = a->op->p.bn.eps;
    bool par = (double)N * C * hw > YC_BN_SERIAL_MAX;
#pragma omp parallel for collapse(2) num_threads(a->threads) schedule(static) if (par)
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            float scale = (float)((double)gamma[c] / sqrt((double)rvar[c] + eps));
            float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
            for (size_t k = 0; k < hw; k += step) {
                size_t m = hw - k < step ? hw - k : step;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                float *z = y->p16 ? zb : y->p + plane(y, i, c, hw) + k;
                normalise(z, xp, m, rmean[c], scale, beta[c], a->op->p.bn.silu);
                if (y->p16)
                    yc_hv_store(y, plane(y, i, c, hw) + k, zb, m);
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Backward (training mode), with xhat = (x - mean) * invstd and sums over (N, H, W):
 *   dbeta  += sum dy
 *   dgamma += sum dy * xhat
 *   dx (=|+=) gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
 * ------------------------------------------------------------------------------------------- */

/* The constants of dx for one channel from its sums over M values, sdy of dy and sdyx of
 * dy * (x - mean). */
static bwd_chan bwd_consts(const yc_cpu_args *a, int c, float mean, double invstd, double sdy,
                           double sdyx, double M)
{
    const float *gamma = a->src[2].p;
    double k = (double)gamma[c] * invstd;
    return (bwd_chan){
        .mean = mean, .k = (float)k, .mdy = (float)(sdy / M), .kc = (float)(k * sdyx * invstd * invstd / M)};
}

/* Adds a channel's sums (this process's) to dgamma and dbeta. */
static void bwd_params(const yc_cpu_args *a, int c, double invstd, double sdy, double sdyx)
{
    float *dgamma = a->dst[1].p, *dbeta = a->dst[2].p;
    dbeta[c] = (float)((double)dbeta[c] + sdy);
    dgamma[c] = (float)((double)dgamma[c] + sdyx * invstd);
}

/* The constants of dx for one channel, once its sums are known; adds to dgamma and dbeta.  The
 * sums sg, sgx are of dy and dy * (x - mean). */
static bwd_chan bwd_finish(const yc_cpu_args *a, int c, float mean, double invstd, const double *sg,
                           const double *sgx, double M)
{
    double sdy = lanes_total(sg), sdyx = lanes_total(sgx);
    bwd_params(a, c, invstd, sdy, sdyx);
    return bwd_consts(a, c, mean, invstd, sdy, sdyx, M);
}

/* SyncBatchNorm's backward (op.p.bn.sync), BN_BWD and (silu) BN_SILU_BWD: every channel's sums
 * over this process's images in one parallel pass (dgamma and dbeta get them), their sums over
 * the processes (yc_bn_sync_grads, between the parallel regions), then dx in a second pass from
 * the summed sums and the total count; the fused op computes dz again in the second pass (its
 * per-thread cache holds one channel, and the passes are separate regions). */
static int bn_bwd_sync(const yc_cpu_args *a, int silu)
{
    const yc_hv *dy = &a->src[0], *x = &a->src[1], *dx = &a->dst[0];
    const float *gamma = a->src[2].p, *beta = silu ? a->src[3].p : NULL;
    const float *stats = silu ? a->src[4].p : a->src[3].p;
    int N = x->n, C = x->c, acc = a->op->accumulate;
    size_t hw = (size_t)x->h * x->w;
    double M = (double)N * (double)hw, total = 0.0;
    double *sdy = malloc(2 * (size_t)C * sizeof *sdy), *sdyx = sdy + C;
    if (!sdy)
        return yc_error_status(YC_ENOMEM, "out of memory for the gradient sums of %d channels", C);
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        float mean = stats[c], scale = gamma[c] * stats[C + c];
        double sg[VL] = {0}, sgx[VL] = {0};
        float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                const float *g = dy->p + plane(dy, i, c, hw) + k;
                if (silu)
                    block_silu_bwd(sg, sgx, zb, g, xp, m, mean, scale, beta[c]);
                else
                    block_bwd(sg, sgx, g, xp, m, mean);
            }
        sdy[c] = lanes_total(sg);
        sdyx[c] = lanes_total(sgx);
        bwd_params(a, c, stats[C + c], sdy[c], sdyx[c]);
    }
    int st = yc_bn_sync_grads(a->op, C, M, sdy, sdyx, &total);
    if (!st) {
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
        for (int c = 0; c < C; c++) {
            float mean = stats[c], scale = gamma[c] * stats[C + c];
            bwd_chan b = bwd_consts(a, c, mean, stats[C + c], sdy[c], sdyx[c], total);
            float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
            for (int i = 0; i < N; i++)
                for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                    size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                    const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                    const float *g = dy->p + plane(dy, i, c, hw) + k;
                    if (silu) {
                        silu_bwd_of_bn(zb, g, xp, m, mean, scale, beta[c]);
                        g = zb;
                    }
                    bwd_dx(dx->p + plane(dx, i, c, hw) + k, g, xp, m, &b, acc);
                }
        }
    }
    free(sdy);
    return st;
}

/* src: dy, x, gamma, stats [mean; invstd];  dst: dx [acc], dgamma, dbeta. */
int yc_cpu_bn_bwd(const yc_cpu_args *a)
{
    if (a->op->p.bn.sync)
        return bn_bwd_sync(a, 0);
    const yc_hv *dy = &a->src[0], *x = &a->src[1], *dx = &a->dst[0];
    const float *stats = a->src[3].p;
    int N = x->n, C = x->c, acc = a->op->accumulate;
    size_t hw = (size_t)x->h * x->w, step = step_of(x, x, hw);
    double M = (double)N * (double)hw;
#pragma omp parallel for num_threads(a->threads) schedule(static) if (M * C > YC_BN_SERIAL_MAX)
    for (int c = 0; c < C; c++) {
        float mean = stats[c];
        double sg[VL] = {0}, sgx[VL] = {0};
        float xb[YC_CPU_CHUNK];
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                block_bwd(sg, sgx, dy->p + plane(dy, i, c, hw) + k, xp, m, mean);
            }
        bwd_chan b = bwd_finish(a, c, mean, stats[C + c], sg, sgx, M);
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < hw; k += step) {
                size_t m = hw - k < step ? hw - k : step;
                const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                bwd_dx(dx->p + plane(dx, i, c, hw) + k, dy->p + plane(dy, i, c, hw) + k, xp, m, &b, acc);
            }
    }
    return YC_OK;
}

/* Backward of the fused op.  src: da, x, gamma, beta, stats;  dst: dx [acc], dgamma, dbeta.
 * dz = silu_bwd(da, z) goes to the thread's cache (the first `cap` values of the channel) in the
 * first pass; the second pass reads it from there or computes it again. */
int yc_cpu_bn_silu_bwd(const yc_cpu_args *a)
{
    if (a->op->p.bn.sync)
        return bn_bwd_sync(a, 1);
    const yc_hv *da = &a->src[0], *x = &a->src[1], *dx = &a->dst[0];
    const float *gamma = a->src[2].p, *beta = a->src[3].p, *stats = a->src[4].p;
    int N = x->n, C = x->c, acc = a->op->accumulate;
    size_t hw = (size_t)x->h * x->w;
    double M = (double)N * (double)hw;
    size_t cap = yc_cpu_bn_silu_bwd_workspace(a->op, 1) / sizeof(float);
#pragma omp parallel num_threads(a->threads) if (M * C > YC_BN_SERIAL_MAX)
    {
        float *cache = (float *)a->ws + (size_t)omp_get_thread_num() * cap;
#pragma omp for schedule(static)
        for (int c = 0; c < C; c++) {
            float mean = stats[c], scale = gamma[c] * stats[C + c];
            double sg[VL] = {0}, sgx[VL] = {0};
            float xb[YC_CPU_CHUNK], zb[YC_CPU_CHUNK];
            size_t pos = 0; /* values of the channel seen so far */
            for (int i = 0; i < N; i++)
                for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                    size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                    const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                    float *dz = pos + m <= cap ? cache + pos : zb;
                    block_silu_bwd(sg, sgx, dz, da->p + plane(da, i, c, hw) + k, xp, m, mean, scale, beta[c]);
                    pos += m;
                }
            bwd_chan b = bwd_finish(a, c, mean, stats[C + c], sg, sgx, M);
            pos = 0;
            for (int i = 0; i < N; i++)
                for (size_t k = 0; k < hw; k += YC_CPU_CHUNK) {
                    size_t m = hw - k < YC_CPU_CHUNK ? hw - k : YC_CPU_CHUNK;
                    const float *xp = yc_hv_read(x, plane(x, i, c, hw) + k, xb, m);
                    const float *dz = cache + pos;
                    if (pos + m > cap) {
                        silu_bwd_of_bn(zb, da->p + plane(da, i, c, hw) + k, xp, m, mean, scale, beta[c]);
                        dz = zb;
                    }
                    bwd_dx(dx->p + plane(dx, i, c, hw) + k, dz, xp, m, &b, acc);
                    pos += m;
                }
        }
    }
    return YC_OK;
}
