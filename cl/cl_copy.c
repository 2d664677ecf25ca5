/* Copies that overlap the ops (backend.h: buffer_write_async, host_alloc, read_start, marker and
 * the tokens), for gradients read while backward still runs (src/train/dist.c).
 *
 * The ops run on the context's one in-order queue.  A read enqueued there would start only after
 * every kernel submitted before it and hold back every kernel submitted after it, so read_start
 * puts a marker on that queue (clEnqueueMarkerWithWaitList: complete once everything submitted
 * before it is) and the read on a second in-order queue, the copy queue, waiting for the marker's
 * event; both queues are flushed so that the device starts them without a later wait.  The
 * read's event is the token: polled with clGetEventInfo (CL_EVENT_COMMAND_EXECUTION_STATUS),
 * waited for with clWaitForEvents.  The destination is best pinned memory (host_alloc: a
 * CL_MEM_ALLOC_HOST_PTR buffer mapped once), which the device reaches by DMA.  Writes back go on
 * the ops' queue, so the ops after them see the bytes. */
#include "cl_internal.h"

#include <stdlib.h>

#include "log.h"

/* The copy queue, made on first use. */
static int copy_queue(yc_cl_ctx *c, cl_command_queue *q)
{
    if (!c->copy_queue) {
        cl_int err;
        c->copy_queue = clCreateCommandQueue(c->context, c->device, 0, &err);
        if (err != CL_SUCCESS) {
            c->copy_queue = NULL;
            return yc_error_context(yc_cl_fail("clCreateCommandQueue", err),
                                    "the copy queue of %s", c->desc.info.name);
        }
    }
    *q = c->copy_queue;
    return YC_OK;
}

/* A token owning `ev` (released on failure). */
static int token(cl_event ev, yc_event **done)
{
    yc_event *t = yc_malloc(sizeof *t, "an OpenCL completion token");
    if (!t) {
        clReleaseEvent(ev);
        return YC_ENOMEM;
    }
    t->ev = ev;
    *done = t;
    return YC_OK;
}

int yc_cl_write_async(yc_cl_ctx *c, yc_buffer *buf, size_t offset, const void *src, size_t size)
{
    cl_int err = clEnqueueWriteBuffer(c->queue, buf->mem, CL_FALSE, offset, size, src, 0, NULL,
                                      NULL);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clEnqueueWriteBuffer (non-blocking)", err);
    c->count->bytes_to_device += size;
    return YC_OK;
}

yc_host_mem *yc_cl_host_alloc(yc_cl_ctx *c, size_t size, void **ptr)
{
    *ptr = NULL;
    yc_host_mem *h = yc_calloc(1, sizeof *h, "pinned host memory");
    if (!h)
        return NULL;
    cl_int err;
    h->mem = clCreateBuffer(c->context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                            size ? size : 1, NULL, &err);
    if (err != CL_SUCCESS) {
        yc_error_context(yc_cl_fail("clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)", err),
                         "%zu bytes of pinned host memory on %s", size, c->desc.info.name);
        free(h);
        return NULL;
    }
    h->map = clEnqueueMapBuffer(c->queue, h->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                size ? size : 1, 0, NULL, NULL, &err);
    c->count->host_waits++;
    c->syncs++;
    if (err != CL_SUCCESS || !h->map) {
        yc_error_context(yc_cl_fail("clEnqueueMapBuffer", err), "pinned host memory (%zu bytes)",
                         size);
        clReleaseMemObject(h->mem);
        free(h);
        return NULL;
    }
    *ptr = h->map;
    return h;
}

void yc_cl_host_free(yc_cl_ctx *c, yc_host_mem *h)
{
    if (!h)
        return;
    /* the unmap follows any write from it on the ops' queue; the memory goes once it is done */
    clEnqueueUnmapMemObject(c->queue, h->mem, h->map, 0, NULL, NULL);
    clReleaseMemObject(h->mem);
    free(h);
}

int yc_cl_marker(yc_cl_ctx *c, yc_event **done)
{
    *done = NULL;
    cl_event ev;
    cl_int err = clEnqueueMarkerWithWaitList(c->queue, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clEnqueueMarkerWithWaitList", err);
    if ((err = clFlush(c->queue)) != CL_SUCCESS) {
        clReleaseEvent(ev);
        return yc_cl_fail("clFlush", err);
    }
    return token(ev, done);
}

int yc_cl_read_start(yc_cl_ctx *c, const yc_buffer *buf, size_t offset, void *dst, size_t size,
                     yc_event **done)
{
    *done = NULL;
    cl_command_queue q = NULL;
    int st = copy_queue(c, &q);
    if (st)
        return st;
    cl_event after, ev;
    cl_int err = clEnqueueMarkerWithWaitList(c->queue, 0, NULL, &after);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clEnqueueMarkerWithWaitList", err);
    err = clEnqueueReadBuffer(q, buf->mem, CL_FALSE, offset, size, dst, 1, &after, &ev);
    /* the read holds its own reference to the marker's event */
    clReleaseEvent(after);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clEnqueueReadBuffer (on the copy queue)", err);
    c->count->bytes_from_device += size;
    if ((err = clFlush(c->queue)) != CL_SUCCESS || (err = clFlush(q)) != CL_SUCCESS) {
        clReleaseEvent(ev);
        return yc_cl_fail("clFlush", err);
    }
    return token(ev, done);
}

int yc_cl_event_query(yc_cl_ctx *c, yc_event *ev, bool *done)
{
    (void)c;
    *done = true;
    if (!ev)
        return YC_OK;
    cl_int status = CL_COMPLETE;
    cl_int err = clGetEventInfo(ev->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                                NULL);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)", err);
    /* a negative status is the error the command ended with */
    if (status < 0)
        return yc_error_context(yc_cl_fail("a copy or marker", status), "its event");
    *done = status == CL_COMPLETE;
    return YC_OK;
}

int yc_cl_event_wait(yc_cl_ctx *c, yc_event *ev)
{
    if (!ev)
        return YC_OK;
    cl_int err = clWaitForEvents(1, &ev->ev);
    c->count->host_waits++;
    if (err != CL_SUCCESS)
        return yc_cl_fail("clWaitForEvents", err);
    bool done;
    return yc_cl_event_query(c, ev, &done);
}

void yc_cl_event_release(yc_cl_ctx *c, yc_event *ev)
{
    (void)c;
    if (!ev)
        return;
    clReleaseEvent(ev->ev);
    free(ev);
}
