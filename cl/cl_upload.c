/* The input batch to the OpenCL device as uint8 (yc_backend_i.write_u8_scaled): a quarter of the
 * bytes of float32.  The host copies the batch into pinned memory (a CL_MEM_ALLOC_HOST_PTR buffer
 * mapped once), the device copies it from there without the host waiting (DMA from pinned
 * memory), and u8_scaled (elementwise.cl) divides by 255 into the graph's input.  Two slots are
 * used in turn, so that a batch can be copied in while the previous one is still being sent; a
 * slot is only waited for when no synchronize has happened since its copy was queued. */
#include "cl_internal.h"

#include <string.h>

#include "log.h"

static void slot_release(yc_cl_ctx *c, yc_cl_upload_slot *s)
{
    if (s->copied)
        clReleaseEvent(s->copied);
    if (s->map)
        clEnqueueUnmapMemObject(c->queue, s->pinned, s->map, 0, NULL, NULL);
    if (s->pinned)
        clReleaseMemObject(s->pinned);
    if (s->dev)
        clReleaseMemObject(s->dev);
    memset(s, 0, sizeof *s);
}

void yc_cl_upload_release(yc_cl_ctx *c)
{
    for (int i = 0; i < 2; i++)
        slot_release(c, &c->upload[i]);
}

/* A slot of at least `bytes`: pinned memory mapped for writing, and its device copy. */
static int slot_grow(yc_cl_ctx *c, yc_cl_upload_slot *s, size_t bytes)
{
    if (s->cap >= bytes)
        return YC_OK;
    slot_release(c, s);
    cl_int err;
    s->pinned = clCreateBuffer(c->context, CL_MEM_READ_ONLY | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        s->pinned = NULL;
        return yc_error_context(yc_cl_fail("clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)", err),
                                "pinned memory for the input batch (%zu bytes)", bytes);
    }
    s->map = clEnqueueMapBuffer(c->queue, s->pinned, CL_TRUE, CL_MAP_WRITE, 0, bytes, 0, NULL, NULL, &err);
    c->count->host_waits++;
    c->syncs++;
    if (err != CL_SUCCESS) {
        s->map = NULL;
        slot_release(c, s);
        return yc_error_context(yc_cl_fail("clEnqueueMapBuffer", err), "pinned input memory");
    }
    s->dev = clCreateBuffer(c->context, CL_MEM_READ_ONLY, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        s->dev = NULL;
        slot_release(c, s);
        return yc_error_context(yc_cl_fail("clCreateBuffer", err), "the input batch on the device");
    }
    s->cap = bytes;
    return YC_OK;
}

/* Makes a slot's pinned memory free to write: its last copy is done (waited for only when no
 * synchronize has happened since it was queued). */
static int slot_ready(yc_cl_ctx *c, yc_cl_upload_slot *s)
{
    if (!s->copied)
        return YC_OK;
    if (s->copied_at == c->syncs) {
        cl_int err = clWaitForEvents(1, &s->copied);
        c->count->host_waits++;
        if (err != CL_SUCCESS)
            return yc_cl_fail("clWaitForEvents (input upload)", err);
    }
    clReleaseEvent(s->copied);
    s->copied = NULL;
    return YC_OK;
}

int yc_cl_write_u8_scaled(yc_cl_ctx *c, const yc_tensor *dst, const uint8_t *src)
{
    size_t chw = yc_tensor_image_elems(dst), bytes = chw * (size_t)dst->n;
    if (!bytes)
        return YC_OK;
    yc_cl_upload_slot *s = &c->upload[c->upload_next], *other = &c->upload[c->upload_next ^ 1];
    c->upload_next ^= 1;
    int st = slot_ready(c, s);
    /* both slots grow together, so that a larger batch costs one pause */
    if (!st && s->cap < bytes)
        st = slot_ready(c, other);
    if (!st && s->cap < bytes && !(st = slot_grow(c, s, bytes)))
        st = slot_grow(c, other, bytes);
    if (st)
        return st;
    memcpy(s->map, src, bytes);
    cl_int err = clEnqueueWriteBuffer(c->queue, s->dev, CL_FALSE, 0, bytes, s->map, 0, NULL, &s->copied);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clEnqueueWriteBuffer (input batch)", err);
    s->copied_at = c->syncs;
    c->count->bytes_to_device += bytes;
    yc_cl_args a;
    if ((st = yc_cl_begin(c, YC_K_U8_SCALED, &a)))
        return st;
    yc_cl_arg_mem(&a, s->dev);
    yc_cl_arg_tensor(&a, dst);
    yc_cl_arg_uint(&a, (unsigned)chw);
    size_t global[2] = {chw, (size_t)dst->n};
    return yc_cl_run(&a, 2, global, false);
}
