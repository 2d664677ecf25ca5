/* Backend-independent helpers over the interface (see backend.h): FP32 tensors are copied,
 * FP16 tensors converted through a staging buffer (src/core/half.h). */
#include "backend.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "log.h"

/* Checks that `t` is placed and that its last element lies inside its buffer. */
static int check_placed(yc_backend *be, const yc_tensor *t, const char *what)
{
    const char *name = t->name ? t->name : "tensor";
    if (!t->buf)
        return yc_error_status(YC_EFORMAT, "%s %s: no buffer (not placed)", what, name);
    if (t->n < 1 || t->c < 1 || t->h < 1 || t->w < 1)
        return yc_error_status(YC_EFORMAT, "%s %s: empty shape (%d,%d,%d,%d)", what, name, t->n, t->c, t->h,
                               t->w);
    size_t img = yc_tensor_image_elems(t);
    if (t->n > 1 && t->nstride < img)
        return yc_error_status(YC_EFORMAT, "%s %s: nstride %zu < c*h*w = %zu", what, name, t->nstride, img);
    size_t es = yc_dtype_size(t->type);
    if (t->n > 1 && t->nstride > (SIZE_MAX / es - img) / (size_t)(t->n - 1))
        return yc_error_status(YC_EFORMAT, "%s %s: nstride %zu is too large", what, name, t->nstride);
    size_t last = (size_t)(t->n - 1) * t->nstride + img; /* elements spanned */
    size_t bufsize = be->iface->buffer_size(be, t->buf);
    if (last > (SIZE_MAX - t->offset) / es || t->offset + last * es > bufsize)
        return yc_error_status(YC_EFORMAT, "%s %s: %zu bytes at offset %zu exceed its buffer of %zu bytes",
                               what, name, last * es, t->offset, bufsize);
    return YC_OK;
}

/* ---- running an op ------------------------------------------------------------------------- */

/* A tensor of an op lies in a buffer, aligned to its element size, every element inside. */
static int check_slot(yc_backend *be, const yc_op *op, const yc_tensor *t, const char *slot, int i)
{
    const char *kind = yc_op_kind_name(op->kind), *name = op->name ? op->name : "";
    const char *tn = t->name ? t->name : "";
    if (!t->buf)
        return yc_error_status(YC_EFORMAT, "%s '%s': %s[%d] %s has no buffer", kind, name, slot, i,
                               tn);
    size_t es = yc_dtype_size(t->type), img = yc_tensor_image_elems(t);
    if (t->n > 1 && t->nstride > (SIZE_MAX / es - img) / (size_t)(t->n - 1))
        return yc_error_status(YC_EFORMAT, "%s '%s': %s[%d] %s has an nstride of %zu elements",
                               kind, name, slot, i, tn, t->nstride);
    size_t span = t->n > 1 ? (size_t)(t->n - 1) * t->nstride + img : img;
    size_t size = be->iface->buffer_size(be, t->buf);
    if (t->offset % es != 0 || t->offset > size || span > (size - t->offset) / es)
        return yc_error_status(YC_EFORMAT,
                               "%s '%s': %s[%d] %s (offset %zu, %zu elements of %zu bytes) does not "
                               "fit its buffer of %zu bytes or is not aligned to its element size",
                               kind, name, slot, i, tn, t->offset, span, es, size);
    return YC_OK;
}

int yc_backend_exec(yc_backend *be, const yc_op *op, yc_span ws)
{
    int st = yc_op_check(op);
    if (st)
        return st;
    const char *kind = yc_op_kind_name(op->kind), *name = op->name ? op->name : "";
    if (!be->iface->supports(be, op))
        return yc_error_status(YC_EUNSUPPORTED, "%s '%s': the %s backend cannot run it with these "
                               "element types or parameters (%s)", kind, name, be->iface->name,
                               be->iface->limits);
    for (int i = 0; i < YC_OP_MAX_SRC; i++)
        if (op->src[i] && (st = check_slot(be, op, op->src[i], "src", i)))
            return st;
    for (int i = 0; i < YC_OP_MAX_DST; i++)
        if (op->dst[i] && (st = check_slot(be, op, op->dst[i], "dst", i)))
            return st;
    const size_t need = be->iface->workspace(be, op);
    if (need) {
        const size_t size = ws.buf ? be->iface->buffer_size(be, ws.buf) : 0;
        if (!ws.buf || ws.size < need || ws.offset % sizeof(float) != 0 || ws.offset > size ||
            ws.size > size - ws.offset)
            return yc_error_status(YC_EFORMAT, "%s '%s': needs a float-aligned workspace of %zu "
                                   "bytes inside its buffer, got %zu bytes at offset %zu", kind,
                                   name, need, ws.size, ws.offset);
    }
    st = be->iface->exec(be, op, ws);
    if (st)
        return yc_error_context(st, "%s '%s' on %s", kind, name, be->info.name);
    return YC_OK;
}

/* ---- tensors to and from the host ------------------------------------------------------------ */

/* Elements converted per buffer transfer for FP16 tensors (through a 2 MiB host buffer). */
#define YC_HALF_CHUNK ((size_t)1 << 20)

/* A transfer: the host floats (dst when reading, src when writing) and, for FP16 tensors, the
 * staging buffer of half bits. */
typedef struct xfer {
    float *dst;
    const float *src;
    uint16_t *stage;
} xfer;

/* Calls fn on each contiguous run of t's elements: (byte offset in t->buf, first logical element,
 * count); runs are whole images (the whole tensor when dense), cut into pieces of at most `max`
 * elements when max > 0. */
typedef int (*run_fn)(yc_backend *be, const yc_tensor *t, size_t off, size_t first, size_t count, xfer *x);

static int for_runs(yc_backend *be, const yc_tensor *t, size_t max, run_fn fn, xfer *x)
{
    size_t img = yc_tensor_image_elems(t), es = yc_dtype_size(t->type);
    bool dense = yc_tensor_dense(t);
    size_t runs = dense ? 1 : (size_t)t->n, len = dense ? yc_tensor_elems(t) : img;
    for (size_t r = 0; r < runs; r++) {
        size_t base = t->offset + r * t->nstride * es;
        for (size_t k = 0; k < len; k += max ? max : len) {
            size_t m = max && len - k > max ? max : len - k;
            int rc = fn(be, t, base + k * es, r * len + k, m, x);
            if (rc)
                return rc;
        }
    }
    return YC_OK;
}

static int read_run(yc_backend *be, const yc_tensor *t, size_t off, size_t first, size_t count, xfer *x)
{
    if (t->type == YC_F32)
        return be->iface->buffer_read(be, t->buf, off, x->dst + first, count * sizeof(float));
    int rc = be->iface->buffer_read(be, t->buf, off, x->stage, count * sizeof *x->stage);
    if (rc == YC_OK)
        yc_half_to_float_n(x->stage, x->dst + first, count);
    return rc;
}

static int write_run(yc_backend *be, const yc_tensor *t, size_t off, size_t first, size_t count, xfer *x)
{
    if (t->type == YC_F32)
        return be->iface->buffer_write(be, t->buf, off, x->src + first, count * sizeof(float));
    yc_float_to_half_n(x->src + first, x->stage, count);
    return be->iface->buffer_write(be, t->buf, off, x->stage, count * sizeof *x->stage);
}

/* Runs a transfer of tensor t (already checked): reading into dst or writing from src. */
static int transfer(yc_backend *be, const yc_tensor *t, float *dst, const float *src, run_fn fn,
                    const char *what)
{
    if (t->type == YC_F32) {
        xfer x = {dst, src, NULL};
        return for_runs(be, t, 0, fn, &x);
    }
    if (t->type != YC_F16)
        return yc_error_status(YC_EUNSUPPORTED, "%s %s: unknown element type", what, t->name ? t->name : "tensor");
    size_t n = yc_tensor_elems(t), chunk = n < YC_HALF_CHUNK ? n : YC_HALF_CHUNK;
    xfer x = {dst, src, yc_malloc(chunk * sizeof *x.stage, "FP16 staging buffer")};
    if (!x.stage)
        return YC_ENOMEM;
    int rc = for_runs(be, t, chunk, fn, &x);
    free(x.stage);
    return rc;
}

int yc_tensor_get_f32(yc_backend *be, const yc_tensor *t, float *dst)
{
    int rc = check_placed(be, t, "reading");
    return rc ? rc : transfer(be, t, dst, NULL, read_run, "reading");
}

int yc_tensor_set_f32(yc_backend *be, const yc_tensor *t, const float *src)
{
    int rc = check_placed(be, t, "writing");
    return rc ? rc : transfer(be, t, NULL, src, write_run, "writing");
}

int yc_tensor_set_u8_scaled(yc_backend *be, const yc_tensor *t, const uint8_t *src)
{
    int rc = check_placed(be, t, "writing");
    if (rc)
        return rc;
    const long long n = (long long)yc_tensor_elems(t);
    char *base = be->iface->buffer_host_ptr ? be->iface->buffer_host_ptr(be, t->buf) : NULL;
    if (base && yc_tensor_dense(t)) {
        if (t->type == YC_F32) {
            float *dst = (float *)(void *)(base + t->offset);
#pragma omp parallel for schedule(static)
            for (long long i = 0; i < n; i++)
                dst[i] = (float)src[i] / 255.0f;
        } else {
            uint16_t *dst = (uint16_t *)(void *)(base + t->offset);
#pragma omp parallel for schedule(static)
            for (long long i = 0; i < n; i++)
                dst[i] = yc_float_to_half((float)src[i] / 255.0f);
        }
        return YC_OK;
    }
    if (be->iface->write_u8_scaled && yc_tensor_dense(t))
        return be->iface->write_u8_scaled(be, t, src);
    float *tmp = yc_malloc((size_t)n * sizeof *tmp, "the input batch as floats");
    if (!tmp)
        return YC_ENOMEM;
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < n; i++)
        tmp[i] = (float)src[i] / 255.0f;
    rc = yc_tensor_set_f32(be, t, tmp);
    free(tmp);
    return rc;
}

/* ---- SyncBatchNorm ----------------------------------------------------------------------- */

/* Sums v[0 .. 2C] over the processes through op->p.bn.sync, naming the op when it fails. */
static int bn_sync(const yc_op *op, double *v, int C)
{
    int st = op->p.bn.sync(op->p.bn.sync_ctx, v, 1 + 2 * (size_t)C);
    if (st)
        return yc_error_context(st, "SyncBatchNorm of %s", op->name ? op->name : "a BatchNorm");
    if (!(v[0] > 0.0))
        return yc_error_status(YC_ERR, "SyncBatchNorm of %s: the processes hold %g values per "
                               "channel in all", op->name ? op->name : "a BatchNorm", v[0]);
    return YC_OK;
}

int yc_bn_sync_stats(const yc_op *op, int C, double n, double *mean, double *m2, double *total)
{
    double *v = malloc((1 + 2 * (size_t)C) * sizeof *v);
    if (!v)
        return yc_error_status(YC_ENOMEM, "out of memory for the SyncBatchNorm sums of %d channels",
                               C);
    v[0] = n;
    for (int c = 0; c < C; c++) {
        v[1 + c] = n * mean[c];
        v[1 + C + c] = m2[c] + n * mean[c] * mean[c];
    }
    int st = bn_sync(op, v, C);
    if (!st) {
        *total = v[0];
        for (int c = 0; c < C; c++) {
            double mu = v[1 + c] / v[0], var = v[1 + C + c] / v[0] - mu * mu;
            mean[c] = mu;
            m2[c] = var < 0.0 ? 0.0 : var; /* rounding, for (nearly) constant channels; NaN stays */
        }
    }
    free(v);
    return st;
}

int yc_bn_sync_grads(const yc_op *op, int C, double n, double *sg, double *sgx, double *total)
{
    double *v = malloc((1 + 2 * (size_t)C) * sizeof *v);
    if (!v)
        return yc_error_status(YC_ENOMEM, "out of memory for the SyncBatchNorm sums of %d channels",
                               C);
    v[0] = n;
    memcpy(v + 1, sg, (size_t)C * sizeof *v);
    memcpy(v + 1 + C, sgx, (size_t)C * sizeof *v);
    int st = bn_sync(op, v, C);
    if (!st) {
        *total = v[0];
        memcpy(sg, v + 1, (size_t)C * sizeof *v);
        memcpy(sgx, v + 1 + C, (size_t)C * sizeof *v);
    }
    free(v);
    return st;
}
