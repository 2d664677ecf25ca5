/* The ops of the OpenCL backend other than convolutions: batch norm (with the fused SiLU
 * variants), SiLU, add, copy, fill, max pooling, upsampling, the optimizer steps and the sum of
 * squares.  Each is one kernel launch (kernels in cl/kernels/); none needs a workspace. */
#include "cl_internal.h"

#include <limits.h>
#include <math.h>

#include "log.h"

/* An elementwise launch: dimension 0 over one image of `t`, dimension 1 over its images. */
static int run_images(yc_cl_args *a, const yc_tensor *t)
{
    size_t global[2] = {yc_tensor_image_elems(t), (size_t)t->n};
    return yc_cl_run(a, 2, global, false);
}

static int silu(yc_cl_ctx *c, const yc_op *op)
{
    yc_cl_args a;
    int st;
    if (op->kind == YC_OP_SILU) {
        if ((st = yc_cl_begin(c, YC_K_SILU_FWD, &a)))
            return st;
        yc_cl_arg_tensor(&a, op->src[0]);
        yc_cl_arg_tensor(&a, op->dst[0]);
        yc_cl_arg_uint(&a, (unsigned)yc_tensor_image_elems(op->dst[0]));
    } else {
        if ((st = yc_cl_begin(c, YC_K_SILU_BWD, &a)))
            return st;
        yc_cl_arg_tensor(&a, op->src[0]);
        yc_cl_arg_tensor(&a, op->src[1]);
        yc_cl_arg_tensor(&a, op->dst[0]);
        yc_cl_arg_uint(&a, (unsigned)yc_tensor_image_elems(op->dst[0]));
        yc_cl_arg_int(&a, op->accumulate);
    }
    return run_images(&a, op->dst[0]);
}

static int elementwise(yc_cl_ctx *c, const yc_op *op)
{
    yc_cl_args a;
    int st;
    const yc_tensor *y = op->dst[0];
    unsigned chw = (unsigned)yc_tensor_image_elems(y);
    switch (op->kind) {
    case YC_OP_ADD:
        if ((st = yc_cl_begin(c, YC_K_ADD, &a)))
            return st;
        yc_cl_arg_tensor(&a, op->src[0]);
        yc_cl_arg_tensor(&a, op->src[1]);
        yc_cl_arg_tensor(&a, y);
        yc_cl_arg_uint(&a, chw);
        break;
    case YC_OP_COPY:
        if ((st = yc_cl_begin(c, YC_K_COPY, &a)))
            return st;
        yc_cl_arg_tensor(&a, op->src[0]);
        yc_cl_arg_tensor(&a, y);
        yc_cl_arg_uint(&a, chw);
        yc_cl_arg_int(&a, op->accumulate);
        break;
    case YC_OP_DROPOUT:
        if ((st = yc_cl_begin(c, YC_K_DROPOUT, &a)))
            return st;
        yc_cl_arg_tensor(&a, op->src[0]);
        yc_cl_arg_tensor(&a, y);
        yc_cl_arg_uint(&a, chw);
        yc_cl_arg_uint(&a, op->p.drop.threshold);
        yc_cl_arg_uint(&a, op->p.drop.seed);
        yc_cl_arg_float(&a, op->p.drop.scale);
        yc_cl_arg_int(&a, op->accumulate);
        break;
    default:
        if ((st = yc_cl_begin(c, YC_K_FILL, &a)))
            return st;
        yc_cl_arg_tensor(&a, y);
        yc_cl_arg_uint(&a, chw);
        yc_cl_arg_float(&a, op->p.fill.value);
        break;
    }
    return run_images(&a, y);
}

/* The context's reduction scratch, at least `bytes` (made or grown on first need; a buffer that
 * enqueued work still uses is released only once that work is done). */
static int scratch(yc_cl_ctx *c, size_t bytes, cl_mem *out)
{
    if (!c->scratch || c->scratch_size < bytes) {
        size_t size = bytes > YC_CL_SCRATCH ? bytes : YC_CL_SCRATCH;
        if (c->scratch)
            clReleaseMemObject(c->scratch);
        cl_int err;
        c->scratch = clCreateBuffer(c->context, CL_MEM_READ_WRITE, size, NULL, &err);
        if (err != CL_SUCCESS) {
            c->scratch = NULL;
            c->scratch_size = 0;
            return yc_error_context(yc_cl_fail("clCreateBuffer", err), "reduction scratch (%zu bytes)",
                                    size);
        }
        c->scratch_size = size;
    }
    *out = c->scratch;
    return YC_OK;
}

/* Chunks of a batch norm's channels: about four work-groups per compute unit over the C
 * channels, each work item with at least 4 values; the chunk length in values. */
static void bn_chunks(const yc_cl_ctx *c, size_t M, size_t C, size_t local, unsigned *chunks,
                      unsigned *len)
{
    size_t cus = (size_t)(c->desc.info.compute_units > 0 ? c->desc.info.compute_units : 1);
    size_t n = (4 * cus + C - 1) / C, most = M / (4 * local);
    if (n > most)
        n = most;
    if (n > 1024)
        n = 1024;
    if (n < 1)
        n = 1;
    size_t l = (M + n - 1) / n;
    *len = (unsigned)l;
    *chunks = (unsigned)((M + l - 1) / l);
}

/* The kernels count a channel's N*H*W values in 32 bits. */
static int bn_count_fits(const yc_tensor *x)
{
    if ((size_t)x->n * (size_t)x->h * (size_t)x->w < UINT_MAX)
        return YC_OK;
    return yc_error_status(YC_EUNSUPPORTED, "opencl: batch norm over more than 2^32 values per channel");
}

/* BN_TRAIN and BN_SILU_TRAIN: bn_part then bn_train over chunks x channels */
static int bn_train(yc_cl_ctx *c, const yc_op *op)
{
    const yc_tensor *x = op->src[0];
    yc_cl_args a;
    int st = bn_count_fits(x);
    if (!st)
        st = yc_cl_begin(c, YC_K_BN_PART, &a);
    if (st)
        return st;
    size_t M = (size_t)x->n * x->h * x->w;
    unsigned chunks, len;
    bn_chunks(c, M, (size_t)x->c, a.local, &chunks, &len);
    cl_mem part = NULL;
    if ((st = scratch(c, (size_t)x->c * chunks * 2 * sizeof(cl_float2), &part)))
        return st;
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_mem(&a, part);
    yc_cl_arg_uint(&a, (unsigned)x->n);
    yc_cl_arg_uint(&a, (unsigned)(x->h * x->w));
    yc_cl_arg_uint(&a, len);
    yc_cl_arg_local(&a, a.local * sizeof(cl_float2));
    size_t groups[2] = {chunks, (size_t)x->c};
    if ((st = yc_cl_run(&a, 2, groups, true)) || (st = yc_cl_begin(c, YC_K_BN_TRAIN, &a)))
        return st;
    float mom = op->p.bn.momentum;
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_tensor(&a, op->dst[0]);
    yc_cl_arg_param(&a, op->src[1]);
    yc_cl_arg_param(&a, op->src[2]);
    yc_cl_arg_param(&a, op->dst[1]);
    yc_cl_arg_param(&a, op->dst[2]);
    yc_cl_arg_param(&a, op->dst[3]);
    yc_cl_arg_mem(&a, part);
    yc_cl_arg_uint(&a, (unsigned)x->n);
    yc_cl_arg_uint(&a, (unsigned)x->c);
    yc_cl_arg_uint(&a, (unsigned)(x->h * x->w));
    yc_cl_arg_uint(&a, len);
    yc_cl_arg_float(&a, op->p.bn.eps);
    yc_cl_arg_float(&a, mom);
    yc_cl_arg_float(&a, (float)(1.0 - (double)mom));
    yc_cl_arg_int(&a, op->kind == YC_OP_BN_SILU_TRAIN);
    return yc_cl_run(&a, 2, groups, true);
}

/* BN_SILU_APPLY (src x, gamma, beta, stats): elementwise */
static int bn_silu_apply(yc_cl_ctx *c, const yc_op *op)
{
    const yc_tensor *x = op->src[0];
    yc_cl_args a;
    int st = yc_cl_begin(c, YC_K_BN_SILU_APPLY, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_tensor(&a, op->dst[0]);
    for (int i = 1; i <= 3; i++)
        yc_cl_arg_param(&a, op->src[i]);
    yc_cl_arg_uint(&a, (unsigned)x->c);
    yc_cl_arg_uint(&a, (unsigned)(x->h * x->w));
    return run_images(&a, x);
}

static int bn_eval(yc_cl_ctx *c, const yc_op *op)
{
    const yc_tensor *x = op->src[0];
    yc_cl_args a;
    int st = yc_cl_begin(c, YC_K_BN_EVAL, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_tensor(&a, op->dst[0]);
    for (int i = 1; i <= 4; i++)
        yc_cl_arg_param(&a, op->src[i]);
    yc_cl_arg_uint(&a, (unsigned)x->c);
    yc_cl_arg_uint(&a, (unsigned)(x->h * x->w));
    yc_cl_arg_float(&a, op->p.bn.eps);
    yc_cl_arg_uint(&a, op->p.bn.silu ? 1u : 0u);
    return run_images(&a, x);
}

/* BN_BWD (src dy, x, gamma, stats) and BN_SILU_BWD (src da, x, gamma, beta, stats):
 * bn_bwd_part then bn_bwd over the forward's chunks */
static int bn_bwd(yc_cl_ctx *c, const yc_op *op)
{
    bool fused = op->kind == YC_OP_BN_SILU_BWD;
    const yc_tensor *x = op->src[1], *stats = fused ? op->src[4] : op->src[3];
    const yc_tensor *beta = fused ? op->src[3] : op->src[2];
    yc_cl_args a;
    int st = bn_count_fits(x);
    if (!st)
        st = yc_cl_begin(c, YC_K_BN_BWD_PART, &a);
    if (st)
        return st;
    size_t M = (size_t)x->n * x->h * x->w;
    unsigned chunks, len;
    bn_chunks(c, M, (size_t)x->c, a.local, &chunks, &len);
    cl_mem part = NULL;
    if ((st = scratch(c, (size_t)x->c * chunks * 2 * sizeof(cl_float2), &part)))
        return st;
    yc_cl_arg_tensor(&a, op->src[0]);
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_param(&a, op->src[2]);
    yc_cl_arg_param(&a, beta);
    yc_cl_arg_param(&a, stats);
    yc_cl_arg_mem(&a, part);
    yc_cl_arg_uint(&a, (unsigned)x->n);
    yc_cl_arg_uint(&a, (unsigned)x->c);
    yc_cl_arg_uint(&a, (unsigned)(x->h * x->w));
    yc_cl_arg_uint(&a, len);
    yc_cl_arg_int(&a, fused);
    yc_cl_arg_local(&a, a.local * sizeof(cl_float2));
    size_t groups[2] = {chunks, (size_t)x->c};
    if ((st = yc_cl_run(&a, 2, groups, true)) || (st = yc_cl_begin(c, YC_K_BN_BWD, &a)))
        return st;
    yc_cl_arg_tensor(&a, op->src[0]);
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_param(&a, op->src[2]);
    yc_cl_arg_param(&a, beta);
    yc_cl_arg_param(&a, stats);
    yc_cl_arg_tensor(&a, op->dst[0]);
    yc_cl_arg_param(&a, op->dst[1]);
    yc_cl_arg_param(&a, op->dst[2]);
    yc_cl_arg_mem(&a, part);
    yc_cl_arg_uint(&a, (unsigned)x->n);
    yc_cl_arg_uint(&a, (unsigned)x->c);
    yc_cl_arg_uint(&a, (unsigned)(x->h * x->w));
    yc_cl_arg_uint(&a, len);
    yc_cl_arg_int(&a, op->accumulate);
    yc_cl_arg_int(&a, fused);
    return yc_cl_run(&a, 2, groups, true);
}

size_t yc_cl_op_workspace(const yc_op *op)
{
    if (op->kind != YC_OP_MAXPOOL_BWD)
        return 0;
    const yc_tensor *pooled = op->src[0];
    return yc_tensor_image_elems(pooled) * (size_t)pooled->n * sizeof(cl_int);
}

/* MAXPOOL (y from x) and MAXPOOL_BWD (dx from dy, x and the workspace's window maxima) */
static int pool(yc_cl_ctx *c, const yc_op *op, yc_span ws)
{
    bool fwd = op->kind == YC_OP_MAXPOOL;
    const yc_tensor *x = fwd ? op->src[0] : op->src[1], *pooled = fwd ? op->dst[0] : op->src[0];
    int v[] = {x->c, x->h, x->w, pooled->h, pooled->w, op->p.pool.k, op->p.pool.stride, op->p.pool.pad};
    yc_cl_args a;
    int st;
    if (fwd) {
        if ((st = yc_cl_begin(c, YC_K_MAXPOOL_FWD, &a)))
            return st;
        yc_cl_arg_tensor(&a, x);
        yc_cl_arg_tensor(&a, op->dst[0]);
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            yc_cl_arg_int(&a, v[i]);
        return run_images(&a, op->dst[0]);
    }
    /* the windows' maxima once, in the op's workspace, then the gather */
    if ((st = yc_cl_begin(c, YC_K_MAXPOOL_ARGMAX, &a)))
        return st;
    yc_cl_arg_tensor(&a, x);
    yc_cl_arg_mem(&a, ws.buf->mem);
    yc_cl_arg_ulong(&a, ws.offset);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        yc_cl_arg_int(&a, v[i]);
    if ((st = run_images(&a, pooled)) || (st = yc_cl_begin(c, YC_K_MAXPOOL_BWD, &a)))
        return st;
    yc_cl_arg_tensor(&a, op->src[0]);
    yc_cl_arg_mem(&a, ws.buf->mem);
    yc_cl_arg_ulong(&a, ws.offset);
    yc_cl_arg_tensor(&a, op->dst[0]);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        yc_cl_arg_int(&a, v[i]);
    yc_cl_arg_int(&a, op->accumulate);
    return run_images(&a, op->dst[0]);
}

static int upsample(yc_cl_ctx *c, const yc_op *op)
{
    bool fwd = op->kind == YC_OP_UPSAMPLE;
    const yc_tensor *lo = fwd ? op->src[0] : op->dst[0];
    yc_cl_args a;
    int st = yc_cl_begin(c, fwd ? YC_K_UPSAMPLE_FWD : YC_K_UPSAMPLE_BWD, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, op->src[0]);
    yc_cl_arg_tensor(&a, op->dst[0]);
    int v[] = {lo->c, lo->h, lo->w, op->p.up.factor};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        yc_cl_arg_int(&a, v[i]);
    if (!fwd)
        yc_cl_arg_int(&a, op->accumulate);
    return run_images(&a, op->dst[0]);
}

/* Global average pooling: a work-item per channel forward, per pixel backward */
static int avgpool(yc_cl_ctx *c, const yc_op *op)
{
    bool fwd = op->kind == YC_OP_AVGPOOL;
    const yc_tensor *img = fwd ? op->src[0] : op->dst[0];
    yc_cl_args a;
    int st = yc_cl_begin(c, fwd ? YC_K_AVGPOOL_FWD : YC_K_AVGPOOL_BWD, &a);
    if (st)
        return st;
    yc_cl_arg_tensor(&a, op->src[0]);
    yc_cl_arg_tensor(&a, op->dst[0]);
    yc_cl_arg_int(&a, img->c);
    yc_cl_arg_int(&a, img->h * img->w);
    if (!fwd)
        yc_cl_arg_int(&a, op->accumulate);
    return run_images(&a, op->dst[0]);
}

/* The optimizer ops' optional sum of squares: its buffer (the gradient's when absent, unread),
 * the flag and the clipping norm. */
static void sumsq_args(yc_cl_args *a, const yc_op *op, float max_norm)
{
    const yc_tensor *s = op->src[1] ? op->src[1] : op->src[0];
    yc_cl_arg_param(a, s);
    yc_cl_arg_int(a, op->src[1] != NULL);
    yc_cl_arg_float(a, max_norm);
}

/* SGD, Adam and EMA: coefficients as cpu/optim.c computes them (double, rounded once) */
static int optim(yc_cl_ctx *c, const yc_op *op)
{
    size_t count = yc_tensor_elems(op->dst[0]);
    yc_cl_args a;
    int st;
    if (op->kind == YC_OP_SGD) {
        if ((st = yc_cl_begin(c, YC_K_SGD, &a)))
            return st;
        yc_cl_arg_param(&a, op->src[0]);
        yc_cl_arg_param(&a, op->dst[0]);
        yc_cl_arg_param(&a, op->dst[1]);
        yc_cl_arg_ulong(&a, count);
        yc_cl_arg_float(&a, op->p.sgd.scale);
        yc_cl_arg_float(&a, op->p.sgd.wd);
        yc_cl_arg_float(&a, op->p.sgd.momentum);
        yc_cl_arg_float(&a, -op->p.sgd.lr);
        yc_cl_arg_int(&a, op->p.sgd.wd != 0.0f);
        yc_cl_arg_int(&a, op->p.sgd.nesterov);
        sumsq_args(&a, op, op->p.sgd.max_norm);
    } else if (op->kind == YC_OP_ADAM) {
        double lr = op->p.adam.lr, b1 = op->p.adam.beta1, b2 = op->p.adam.beta2, wd = op->p.adam.wd;
        double t = op->p.adam.step, bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
        if ((st = yc_cl_begin(c, YC_K_ADAM, &a)))
            return st;
        yc_cl_arg_param(&a, op->src[0]);
        for (int i = 0; i < 3; i++)
            yc_cl_arg_param(&a, op->dst[i]);
        yc_cl_arg_ulong(&a, count);
        yc_cl_arg_float(&a, op->p.adam.scale);
        yc_cl_arg_float(&a, op->p.adam.wd);
        yc_cl_arg_float(&a, (float)(1.0 - lr * wd));
        yc_cl_arg_float(&a, op->p.adam.beta1);
        yc_cl_arg_float(&a, (float)(1.0 - b1));
        yc_cl_arg_float(&a, op->p.adam.beta2);
        yc_cl_arg_float(&a, (float)(1.0 - b2));
        yc_cl_arg_float(&a, (float)sqrt(bc2));
        yc_cl_arg_float(&a, op->p.adam.eps);
        yc_cl_arg_float(&a, (float)-(lr / bc1));
        yc_cl_arg_int(&a, op->p.adam.wd != 0.0f);
        yc_cl_arg_int(&a, op->p.adam.decoupled);
        sumsq_args(&a, op, op->p.adam.max_norm);
    } else {
        float d = op->p.ema.decay;
        if ((st = yc_cl_begin(c, YC_K_EMA, &a)))
            return st;
        yc_cl_arg_param(&a, op->src[0]);
        yc_cl_arg_param(&a, op->dst[0]);
        yc_cl_arg_ulong(&a, count);
        yc_cl_arg_float(&a, d);
        yc_cl_arg_float(&a, (float)(1.0 - (double)d));
    }
    size_t global[1] = {count};
    return yc_cl_run(&a, 1, global, false);
}

/* SUMSQ in two stages: enough work-groups of sumsq_part to give each work item about 16 values (at most
 * YC_CL_SCRATCH / 8 of them), then sumsq_total. */
static int sumsq(yc_cl_ctx *c, const yc_op *op)
{
    cl_mem part = NULL;
    yc_cl_args a;
    int st = scratch(c, YC_CL_SCRATCH, &part);
    if (!st)
        st = yc_cl_begin(c, YC_K_SUMSQ_PART, &a);
    if (st)
        return st;
    size_t count = yc_tensor_elems(op->src[0]), per = a.local * 16;
    size_t groups = (count + per - 1) / per;
    if (groups > YC_CL_SCRATCH / sizeof(cl_float2))
        groups = YC_CL_SCRATCH / sizeof(cl_float2);
    if (groups < 1)
        groups = 1;
    size_t slice = (count + groups - 1) / groups;
    yc_cl_arg_tensor(&a, op->src[0]);
    yc_cl_arg_ulong(&a, count);
    yc_cl_arg_ulong(&a, slice);
    yc_cl_arg_mem(&a, part);
    yc_cl_arg_local(&a, a.local * sizeof(cl_float2));
    size_t g1[1] = {groups};
    if ((st = yc_cl_run(&a, 1, g1, true)) || (st = yc_cl_begin(c, YC_K_SUMSQ_TOTAL, &a)))
        return st;
    yc_cl_arg_mem(&a, part);
    yc_cl_arg_uint(&a, (unsigned)groups);
    yc_cl_arg_param(&a, op->dst[0]);
    yc_cl_arg_int(&a, op->accumulate);
    yc_cl_arg_local(&a, a.local * sizeof(cl_float2));
    size_t g2[1] = {1};
    return yc_cl_run(&a, 1, g2, true);
}

int yc_cl_op(yc_cl_ctx *c, const yc_op *op, yc_span ws)
{
    switch (op->kind) {
    case YC_OP_BN_TRAIN:
    case YC_OP_BN_SILU_TRAIN:
        return bn_train(c, op);
    case YC_OP_BN_SILU_APPLY:
        return bn_silu_apply(c, op);
    case YC_OP_BN_EVAL:
        return bn_eval(c, op);
    case YC_OP_BN_BWD:
    case YC_OP_BN_SILU_BWD:
        return bn_bwd(c, op);
    case YC_OP_SILU:
    case YC_OP_SILU_BWD:
        return silu(c, op);
    case YC_OP_ADD:
    case YC_OP_COPY:
    case YC_OP_FILL:
    case YC_OP_DROPOUT:
        return elementwise(c, op);
    case YC_OP_MAXPOOL:
    case YC_OP_MAXPOOL_BWD:
        return pool(c, op, ws);
    case YC_OP_UPSAMPLE:
    case YC_OP_UPSAMPLE_BWD:
        return upsample(c, op);
    case YC_OP_AVGPOOL:
    case YC_OP_AVGPOOL_BWD:
        return avgpool(c, op);
    case YC_OP_SGD:
    case YC_OP_ADAM:
    case YC_OP_EMA:
        return optim(c, op);
    case YC_OP_SUMSQ:
        return sumsq(c, op);
    default:
        return yc_error_status(YC_EUNSUPPORTED, "opencl: %s is not an elementwise or reduction op",
                               yc_op_kind_name(op->kind));
    }
}
