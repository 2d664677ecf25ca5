/* Detect's decode with the confidence filter on the OpenCL device (yc_backend_i.detect_filter;
 * kernel in detect.cl): validation reads back the few thousand rows that pass val.py's
 * confidence threshold instead of every head output (25,200 rows of 85 floats per image for a
 * P5 model at 640).
 *
 * Per call: a fill of the counter, the write of the anchor grids, one detect_filter launch per
 * level, then the blocking read of the counter (a host wait) and, when the rows fit, the reads of
 * the rows and their ids (a second wait). */
#include "cl_internal.h"

#include <string.h>

#include "log.h"

void yc_cl_detect_release(yc_cl_ctx *c)
{
    yc_cl_detect_state *s = &c->detect;
    cl_mem mems[] = {s->count, s->anch, s->rows, s->ids};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i])
            clReleaseMemObject(mems[i]);
    memset(s, 0, sizeof *s);
}

/* A device buffer of at least `bytes` in *m (kept when it is large enough). */
static int ensure(yc_cl_ctx *c, cl_mem *m, size_t *cap, size_t bytes, const char *what)
{
    if (*m && *cap >= bytes)
        return YC_OK;
    if (*m)
        clReleaseMemObject(*m);
    cl_int err;
    *m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        *m = NULL;
        *cap = 0;
        return yc_error_context(yc_cl_fail("clCreateBuffer", err), "%s (%zu bytes)", what, bytes);
    }
    *cap = bytes;
    return YC_OK;
}

int yc_cl_detect_filter(yc_cl_ctx *c, const yc_detect_filter *f, size_t *n)
{
    yc_cl_detect_state *s = &c->detect;
    *n = 0;
    if (f->nl < 1 || f->nl > 8 || f->na < 1 || f->na > 16 || f->no < 6 || f->batch < 1 ||
        f->cap < 1 || !f->rows || !f->ids || !f->anchors)
        return yc_error_status(YC_EFORMAT, "opencl detect filter: %d levels, %d anchors, %d "
                               "values, batch %d, room for %zu rows",
                               f->nl, f->na, f->no, f->batch, f->cap);
    size_t per_image = 0;
    for (int l = 0; l < f->nl; l++)
        per_image += (size_t)f->na * (size_t)f->head[l]->h * (size_t)f->head[l]->w;
    if (per_image * (size_t)f->batch > UINT32_MAX)
        return yc_error_status(YC_EUNSUPPORTED, "opencl detect filter: %d images of %zu rows "
                               "have more rows than 32-bit ids can number (use a smaller batch)",
                               f->batch, per_image);
    /* anchor_grid = anchors * stride in float32, as Detect._make_grid and the host decode */
    for (int l = 0; l < f->nl; l++)
        for (int k = 0; k < 2 * f->na; k++)
            s->h_anch[l * 2 * f->na + k] = f->anchors[l * 2 * f->na + k] * f->stride[l];
    size_t anch_bytes = (size_t)f->nl * 2 * (size_t)f->na * sizeof(float);
    int st;
    if ((st = ensure(c, &s->count, &s->count_cap, sizeof(cl_uint), "the detection counter")) ||
        (st = ensure(c, &s->anch, &s->anch_cap, sizeof s->h_anch, "the anchor grids")) ||
        (st = ensure(c, &s->rows, &s->rows_cap, f->cap * (size_t)f->no * sizeof(float),
                     "the candidate rows")) ||
        (st = ensure(c, &s->ids, &s->ids_cap, f->cap * sizeof(cl_uint), "the candidate ids")))
        return st;
    cl_uint zero = 0;
    cl_int err = clEnqueueFillBuffer(c->queue, s->count, &zero, sizeof zero, 0, sizeof zero, 0,
                                     NULL, NULL);
    c->count->launches++;
    if (err != CL_SUCCESS)
        return yc_cl_fail("clEnqueueFillBuffer (detection counter)", err);
    /* h_anch stays as it is until the blocking read below has waited for this write */
    err = clEnqueueWriteBuffer(c->queue, s->anch, CL_FALSE, 0, anch_bytes, s->h_anch, 0, NULL, NULL);
    c->count->bytes_to_device += anch_bytes;
    if (err != CL_SUCCESS)
        return yc_cl_fail("clEnqueueWriteBuffer (anchor grids)", err);
    size_t row0 = 0;
    for (int l = 0; l < f->nl; l++) {
        const yc_tensor *h = f->head[l];
        yc_cl_args a;
        if ((st = yc_cl_begin(c, YC_K_DETECT_FILTER, &a)))
            return st;
        yc_cl_arg_tensor(&a, h);
        yc_cl_arg_int(&a, f->batch);
        yc_cl_arg_int(&a, f->na);
        yc_cl_arg_int(&a, f->no);
        yc_cl_arg_int(&a, h->h);
        yc_cl_arg_int(&a, h->w);
        yc_cl_arg_float(&a, f->stride[l]);
        yc_cl_arg_at(&a, s->anch, (size_t)l * 2 * (size_t)f->na * sizeof(float));
        yc_cl_arg_float(&a, f->conf_thres);
        yc_cl_arg_uint(&a, (unsigned)row0);
        yc_cl_arg_uint(&a, (unsigned)per_image);
        yc_cl_arg_uint(&a, (unsigned)(f->cap > UINT32_MAX ? UINT32_MAX : f->cap));
        yc_cl_arg_mem(&a, s->count);
        yc_cl_arg_mem(&a, s->rows);
        yc_cl_arg_mem(&a, s->ids);
        size_t g[1] = {(size_t)f->batch * (size_t)f->na * (size_t)h->h * (size_t)h->w};
        if ((st = yc_cl_run(&a, 1, g, false)))
            return st;
        row0 += (size_t)f->na * (size_t)h->h * (size_t)h->w;
    }
    cl_uint kept = 0;
    err = clEnqueueReadBuffer(c->queue, s->count, CL_TRUE, 0, sizeof kept, &kept, 0, NULL, NULL);
    c->count->host_waits++;
    c->syncs++;
    c->count->bytes_from_device += sizeof kept;
    if (err != CL_SUCCESS)
        return yc_cl_fail("clEnqueueReadBuffer (detection counter)", err);
    *n = kept;
    if (kept == 0 || kept > f->cap)
        return YC_OK;
    size_t row_bytes = (size_t)kept * (size_t)f->no * sizeof(float);
    err = clEnqueueReadBuffer(c->queue, s->rows, CL_FALSE, 0, row_bytes, f->rows, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(c->queue, s->ids, CL_TRUE, 0, (size_t)kept * sizeof(cl_uint),
                                  f->ids, 0, NULL, NULL);
    c->count->host_waits++;
    c->syncs++;
    c->count->bytes_from_device += row_bytes + (size_t)kept * sizeof(cl_uint);
    return err == CL_SUCCESS ? YC_OK : yc_cl_fail("clEnqueueReadBuffer (candidate rows)", err);
}
