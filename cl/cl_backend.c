/* The OpenCL backend's interface (see cl_backend.h): device and context, buffers and dispatch.
 * The kernels are launched from cl_conv.c and cl_ops.c.
 *
 * exec only enqueues: yc_backend_exec has checked the op (slots, shapes, placement, workspace)
 * and supports has refused what the kernels do not compute (groups > 1, FP16 gradients into the
 * convolutions' GEMMs). */
#include "cl_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* The largest buffer the backend allocates (see yc_backend_opencl_new). */
#define YC_CL_MAX_BUFFER ((size_t)1 << 33)

static yc_cl_ctx *ctx_of(yc_backend *be)
{
    return be->ctx;
}

/* Releases what a (possibly partly made) context holds. */
static void ctx_release(yc_cl_ctx *c)
{
    if (c->queue)
        clFinish(c->queue);
    yc_cl_programs_release(c);
    if (c->scratch)
        clReleaseMemObject(c->scratch);
    yc_cl_loss_release(c);
    yc_cl_detect_release(c);
    free(c->tuned);
    if (c->blast_temp)
        clReleaseMemObject(c->blast_temp);
    yc_cl_upload_release(c);
    if (c->copy_queue) {
        clFinish(c->copy_queue);
        clReleaseCommandQueue(c->copy_queue);
    }
    /* CLBlast keeps compiled programs per context: drop them before the context goes */
    yc_cl_blast_release();
    if (c->queue)
        clReleaseCommandQueue(c->queue);
    if (c->context)
        clReleaseContext(c->context);
    free(c);
}

static void cl_free(yc_backend *be)
{
    if (!be)
        return;
    ctx_release(ctx_of(be));
    free(be);
}

static yc_buffer *cl_buffer_alloc(yc_backend *be, size_t size)
{
    if (size > be->info.max_alloc) {
        char a[32], b[32];
        yc_error_status(YC_ENOMEM, "opencl: cannot allocate %s: the largest allocation %s accepts is %s",
                        yc_format_size(size, a, sizeof a), be->info.name,
                        yc_format_size(be->info.max_alloc, b, sizeof b));
        return NULL;
    }
    yc_buffer *buf = yc_calloc(1, sizeof *buf, "opencl buffer");
    if (!buf)
        return NULL;
    cl_int err;
    buf->mem = clCreateBuffer(ctx_of(be)->context, CL_MEM_READ_WRITE, size ? size : 1, NULL, &err);
    if (err != CL_SUCCESS) {
        char a[32];
        yc_error_context(yc_cl_fail("clCreateBuffer", err), "%s on %s", yc_format_size(size, a, sizeof a),
                         be->info.name);
        free(buf);
        return NULL;
    }
    buf->size = size;
    return buf;
}

static void cl_buffer_free(yc_backend *be, yc_buffer *buf)
{
    (void)be;
    if (!buf)
        return;
    clReleaseMemObject(buf->mem);
    free(buf);
}

static size_t cl_buffer_size(yc_backend *be, const yc_buffer *buf)
{
    (void)be;
    return buf ? buf->size : 0;
}

/* [offset, offset + size) lies inside buf. */
static int check_range(const yc_buffer *buf, size_t offset, size_t size, const char *what)
{
    if (!buf)
        return yc_error_status(YC_EFORMAT, "opencl: %s: no buffer", what);
    if (offset > buf->size || size > buf->size - offset)
        return yc_error_status(YC_EFORMAT, "opencl: %s of %zu bytes at offset %zu outside a buffer of %zu bytes",
                               what, size, offset, buf->size);
    return YC_OK;
}

static int cl_buffer_write(yc_backend *be, yc_buffer *buf, size_t offset, const void *src, size_t size)
{
    int st = check_range(buf, offset, size, "write");
    if (st || !size)
        return st;
    cl_int err = clEnqueueWriteBuffer(ctx_of(be)->queue, buf->mem, CL_TRUE, offset, size, src, 0, NULL, NULL);
    be->counters.host_waits++;
    ctx_of(be)->syncs++;
    be->counters.bytes_to_device += size;
    return err == CL_SUCCESS ? YC_OK : yc_cl_fail("clEnqueueWriteBuffer", err);
}

static int cl_buffer_read(yc_backend *be, const yc_buffer *buf, size_t offset, void *dst, size_t size)
{
    int st = check_range(buf, offset, size, "read");
    if (st || !size)
        return st;
    cl_int err = clEnqueueReadBuffer(ctx_of(be)->queue, buf->mem, CL_TRUE, offset, size, dst, 0, NULL, NULL);
    be->counters.host_waits++;
    ctx_of(be)->syncs++;
    be->counters.bytes_from_device += size;
    return err == CL_SUCCESS ? YC_OK : yc_cl_fail("clEnqueueReadBuffer", err);
}

static int cl_buffer_read_async(yc_backend *be, const yc_buffer *buf, size_t offset, void *dst,
                                size_t size)
{
    int st = check_range(buf, offset, size, "read");
    if (st || !size)
        return st;
    cl_int err = clEnqueueReadBuffer(ctx_of(be)->queue, buf->mem, CL_FALSE, offset, size, dst, 0, NULL,
                                     NULL);
    be->counters.bytes_from_device += size;
    return err == CL_SUCCESS ? YC_OK : yc_cl_fail("clEnqueueReadBuffer (non-blocking)", err);
}

static int cl_buffer_write_async(yc_backend *be, yc_buffer *buf, size_t offset, const void *src,
                                 size_t size)
{
    int st = check_range(buf, offset, size, "write");
    return st || !size ? st : yc_cl_write_async(ctx_of(be), buf, offset, src, size);
}

static yc_host_mem *cl_host_alloc(yc_backend *be, size_t size, void **ptr)
{
    return yc_cl_host_alloc(ctx_of(be), size, ptr);
}

static void cl_host_free(yc_backend *be, yc_host_mem *h)
{
    yc_cl_host_free(ctx_of(be), h);
}

static int cl_read_start(yc_backend *be, const yc_buffer *buf, size_t offset, void *dst,
                         size_t size, yc_event **done)
{
    *done = NULL;
    int st = check_range(buf, offset, size, "read");
    return st || !size ? st : yc_cl_read_start(ctx_of(be), buf, offset, dst, size, done);
}

static int cl_marker(yc_backend *be, yc_event **done)
{
    return yc_cl_marker(ctx_of(be), done);
}

static int cl_event_query(yc_backend *be, yc_event *ev, bool *done)
{
    return yc_cl_event_query(ctx_of(be), ev, done);
}

static int cl_event_wait(yc_backend *be, yc_event *ev)
{
    return yc_cl_event_wait(ctx_of(be), ev);
}

static void cl_event_release(yc_backend *be, yc_event *ev)
{
    yc_cl_event_release(ctx_of(be), ev);
}

static int cl_buffer_memset(yc_backend *be, yc_buffer *buf, size_t offset, int byte, size_t size)
{
    int st = check_range(buf, offset, size, "memset");
    if (st || !size)
        return st;
    cl_uchar pattern = (cl_uchar)byte;
    cl_int err = clEnqueueFillBuffer(ctx_of(be)->queue, buf->mem, &pattern, 1, offset, size, 0, NULL, NULL);
    be->counters.launches++;
    return err == CL_SUCCESS ? YC_OK : yc_cl_fail("clEnqueueFillBuffer", err);
}

static bool cl_supports(yc_backend *be, const yc_op *op)
{
    (void)be;
    if (!op || (int)op->kind < 0 || op->kind >= YC_OP_COUNT)
        return false;
    switch (op->kind) {
    case YC_OP_CONV2D:
        /* no SiLU epilogue (yc_device_info.conv_silu is false): a fused model's graph runs
         * YC_OP_SILU after the convolution */
        return op->p.conv.groups == 1 && !op->p.conv.silu;
    case YC_OP_CONV2D_BWD_DATA:
        /* dy goes into the GEMM as it is */
        return op->p.conv.groups == 1 && (!op->src[0] || op->src[0]->type == YC_F32);
    case YC_OP_CONV2D_BWD_FILTER:
        return op->p.conv.groups == 1 && (!op->src[1] || op->src[1]->type == YC_F32);
    default:
        return true;
    }
}

static bool is_conv(yc_op_kind k)
{
    return k == YC_OP_CONV2D || k == YC_OP_CONV2D_BWD_DATA || k == YC_OP_CONV2D_BWD_FILTER;
}

static size_t cl_workspace(yc_backend *be, const yc_op *op)
{
    if (!op || yc_op_check(op))
        return 0;
    if (!is_conv(op->kind))
        return yc_cl_op_workspace(op);
    size_t bytes = 0;
    if (yc_cl_conv_workspace(ctx_of(be), op, &bytes))
        return 0;
    return bytes;
}

static int cl_exec(yc_backend *be, const yc_op *op, yc_span ws)
{
    return is_conv(op->kind) ? yc_cl_conv(ctx_of(be), op, ws) : yc_cl_op(ctx_of(be), op, ws);
}

static int cl_synchronize(yc_backend *be)
{
    yc_cl_ctx *c = ctx_of(be);
    cl_int err = clFinish(c->queue);
    const char *what = "clFinish";
    /* the copy queue's reads (cl_copy.c) wait for markers of the ops' queue: finished after it */
    if (err == CL_SUCCESS && c->copy_queue) {
        err = clFinish(c->copy_queue);
        what = "clFinish (the copy queue)";
    }
    be->counters.host_waits++;
    c->syncs++;
    return err == CL_SUCCESS ? YC_OK : yc_cl_fail(what, err);
}

static int cl_yolo_loss(yc_backend *be, const yc_yolo_loss *l)
{
    return yc_cl_yolo_loss(ctx_of(be), l);
}

static int cl_detect_filter(yc_backend *be, const yc_detect_filter *f, size_t *n)
{
    return yc_cl_detect_filter(ctx_of(be), f, n);
}

static int cl_write_u8_scaled(yc_backend *be, const yc_tensor *dst, const uint8_t *src)
{
    return yc_cl_write_u8_scaled(ctx_of(be), dst, src);
}

static const struct yc_backend_i cl_iface = {
    .name = "opencl",
    .free = cl_free,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_free = cl_buffer_free,
    .buffer_size = cl_buffer_size,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .buffer_read_async = cl_buffer_read_async,
    .buffer_write_async = cl_buffer_write_async,
    .host_alloc = cl_host_alloc,
    .host_free = cl_host_free,
    .read_start = cl_read_start,
    .marker = cl_marker,
    .event_query = cl_event_query,
    .event_wait = cl_event_wait,
    .event_release = cl_event_release,
    .yolo_loss = cl_yolo_loss,
    .write_u8_scaled = cl_write_u8_scaled,
    .detect_filter = cl_detect_filter,
    .buffer_memset = cl_buffer_memset,
    .buffer_host_ptr = NULL,
    .supports = cl_supports,
    .limits = "groups == 1 only, FP32 output gradients of convolutions",
    .workspace = cl_workspace,
    .exec = cl_exec,
    .synchronize = cl_synchronize,
};

yc_cl_program_stats yc_cl_backend_stats(const yc_backend *be)
{
    yc_cl_program_stats none = {0};
    if (!be || be->iface != &cl_iface)
        return none;
    return ((const yc_cl_ctx *)be->ctx)->stats;
}

/* "no OpenCL device opencl:N: the devices are opencl:0 NAME (PLATFORM), ..." */
static int no_such_device(int index, const yc_cl_device_desc *devs, int nd)
{
    if (nd == 0)
        return yc_error_status(YC_EUNSUPPORTED, "no OpenCL device opencl:%d: no OpenCL device was found", index);
    char list[1024] = "";
    size_t used = 0;
    for (int i = 0; i < nd && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%sopencl:%d %s (%s)", i ? ", " : "", i,
                                 devs[i].info.name, devs[i].info.platform);
    return yc_error_status(YC_EUNSUPPORTED, "no OpenCL device opencl:%d: the devices are %s", index, list);
}

/* The platform and device handles of a described device. */
static int device_handles(const yc_cl_device_desc *d, cl_platform_id *pid, cl_device_id *did)
{
    cl_uint np = 0, ndev = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clGetPlatformIDs", err);
    if ((cl_uint)d->info.cl_platform >= np)
        return yc_error_status(YC_EDEVICE, "opencl: platform %d has gone", d->info.cl_platform);
    cl_platform_id *plats = yc_calloc(np, sizeof *plats, "OpenCL platform ids");
    if (!plats)
        return YC_ENOMEM;
    err = clGetPlatformIDs(np, plats, NULL);
    *pid = plats[d->info.cl_platform];
    free(plats);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clGetPlatformIDs", err);
    if ((err = clGetDeviceIDs(*pid, CL_DEVICE_TYPE_ALL, 0, NULL, &ndev)) != CL_SUCCESS)
        return yc_cl_fail("clGetDeviceIDs", err);
    if ((cl_uint)d->info.cl_device >= ndev)
        return yc_error_status(YC_EDEVICE, "opencl: device %d of platform %d has gone", d->info.cl_device,
                               d->info.cl_platform);
    cl_device_id *ids = yc_calloc(ndev, sizeof *ids, "OpenCL device ids");
    if (!ids)
        return YC_ENOMEM;
    err = clGetDeviceIDs(*pid, CL_DEVICE_TYPE_ALL, ndev, ids, NULL);
    *did = ids[d->info.cl_device];
    free(ids);
    return err == CL_SUCCESS ? YC_OK : yc_cl_fail("clGetDeviceIDs", err);
}

int yc_backend_opencl_new(yc_backend **out, int index)
{
    *out = NULL;
    yc_cl_platform_desc *plats = NULL;
    yc_cl_device_desc *devs = NULL;
    int np = 0, nd = 0;
    int st = yc_cl_enumerate(&plats, &np, &devs, &nd);
    free(plats);
    if (st)
        return st;
    if (index < 0 || index >= nd) {
        st = no_such_device(index, devs, nd);
        free(devs);
        return st;
    }
    yc_cl_ctx *c = yc_calloc(1, sizeof *c, "opencl backend");
    yc_backend *be = yc_calloc(1, sizeof *be, "opencl backend");
    if (!c || !be) {
        free(c);
        free(be);
        free(devs);
        return YC_ENOMEM;
    }
    c->desc = devs[index];
    free(devs);
    st = device_handles(&c->desc, &c->platform, &c->device);
    cl_int err = CL_SUCCESS;
    if (!st) {
        cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)c->platform, 0};
        c->context = clCreateContext(props, 1, &c->device, NULL, NULL, &err);
        if (err != CL_SUCCESS)
            st = yc_cl_fail("clCreateContext", err);
    }
    if (!st) {
        c->queue = clCreateCommandQueue(c->context, c->device, 0, &err);
        if (err != CL_SUCCESS)
            st = yc_cl_fail("clCreateCommandQueue", err);
    }
    if (st) {
        st = yc_error_context(st, "opening opencl:%d (%s)", index, c->desc.info.name);
        ctx_release(c);
        free(be);
        return st;
    }
    c->base_align = c->desc.info.alignment ? c->desc.info.alignment : 128;
    yc_cl_build_options(c->device, c->options, sizeof c->options);
    const char *conv = getenv("YOLOCL_CL_CONV");
    c->conv_clblast = conv && strcmp(conv, "clblast") == 0;
    if (!c->conv_clblast && !yc_cl_igemm_admits(c->desc.max_work_group, c->desc.local_mem)) {
        yc_info("opencl: %s allows work-groups of %zu and %zu bytes of local memory, less than the "
                "implicit-GEMM convolutions need (%d, %zu): its convolutions use CLBlast's GEMMs\n",
                c->desc.info.name, c->desc.max_work_group, c->desc.local_mem, YC_CL_IGEMM_WG,
                yc_cl_igemm_local_bytes(0));
        c->conv_clblast = true;
    }
    be->iface = &cl_iface;
    be->ctx = c;
    c->count = &be->counters;
    c->force_tile = -1;
    if (!c->conv_clblast)
        yc_cl_tune_load(c);
    be->info = c->desc.info;
    /* CLBlast's direct GEMM kernel takes element offsets as int: no buffer beyond 2^31 floats */
    if (be->info.max_alloc > YC_CL_MAX_BUFFER)
        be->info.max_alloc = YC_CL_MAX_BUFFER;
    *out = be;
    return YC_OK;
}
