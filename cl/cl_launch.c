/* Kernel arguments and launches of the OpenCL backend (see cl_internal.h).
 *
 * Arguments are set in the order the kernel declares them; the first clSetKernelArg failure is
 * kept and reported, with the kernel and the argument index, when the launch is attempted.  Global
 * sizes are rounded up to the local size (OpenCL 1.2 has no non-uniform work-groups): the kernels
 * check their bounds. */
#include "cl_internal.h"

#include <stdio.h>

#include "log.h"

int yc_cl_begin(yc_cl_ctx *c, yc_cl_kid kid, yc_cl_args *a)
{
    *a = (yc_cl_args){.c = c, .name = yc_cl_kernel_name(kid), .err = CL_SUCCESS};
    return yc_cl_kernel(c, kid, &a->k, &a->local);
}

int yc_cl_begin_igemm(yc_cl_ctx *c, int tile, yc_cl_igemm_kid which, yc_cl_args *a)
{
    *a = (yc_cl_args){.c = c, .name = yc_cl_igemm_kernel_name(which), .err = CL_SUCCESS};
    return yc_cl_igemm_kernel(c, tile, which, &a->k, &a->local);
}

/* Sets the next argument. */
static void set(yc_cl_args *a, size_t size, const void *value)
{
    cl_int err = clSetKernelArg(a->k, a->next, size, value);
    if (err != CL_SUCCESS && a->err == CL_SUCCESS) {
        a->err = err;
        a->bad = a->next;
    }
    a->next++;
}

void yc_cl_arg_mem(yc_cl_args *a, cl_mem m)
{
    set(a, sizeof m, &m);
}

void yc_cl_arg_ulong(yc_cl_args *a, unsigned long long v)
{
    cl_ulong x = (cl_ulong)v;
    set(a, sizeof x, &x);
}

void yc_cl_arg_uint(yc_cl_args *a, unsigned v)
{
    cl_uint x = (cl_uint)v;
    set(a, sizeof x, &x);
}

void yc_cl_arg_int(yc_cl_args *a, int v)
{
    cl_int x = (cl_int)v;
    set(a, sizeof x, &x);
}

void yc_cl_arg_float(yc_cl_args *a, float v)
{
    cl_float x = (cl_float)v;
    set(a, sizeof x, &x);
}

void yc_cl_arg_local(yc_cl_args *a, size_t bytes)
{
    set(a, bytes, NULL);
}

void yc_cl_arg_at(yc_cl_args *a, cl_mem m, size_t offset)
{
    yc_cl_arg_mem(a, m);
    yc_cl_arg_ulong(a, offset);
}

void yc_cl_arg_tensor(yc_cl_args *a, const yc_tensor *t)
{
    yc_cl_arg_at(a, t->buf->mem, t->offset);
    yc_cl_arg_ulong(a, t->n > 1 ? t->nstride : yc_tensor_image_elems(t));
    yc_cl_arg_int(a, t->type == YC_F16);
}

void yc_cl_arg_param(yc_cl_args *a, const yc_tensor *t)
{
    yc_cl_arg_at(a, t->buf->mem, t->offset);
}

int yc_cl_run(yc_cl_args *a, cl_uint dims, const size_t *global, bool groups)
{
    char what[96];
    if (a->err != CL_SUCCESS) {
        snprintf(what, sizeof what, "%s: clSetKernelArg(argument %u)", a->name,
                 (unsigned)a->bad);
        return yc_cl_fail(what, a->err);
    }
    size_t g[3] = {1, 1, 1}, l[3] = {a->local, 1, 1};
    for (cl_uint d = 0; d < dims; d++)
        g[d] = global[d];
    if (groups)
        g[0] *= a->local;
    else
        g[0] = (g[0] + a->local - 1) / a->local * a->local;
    for (cl_uint d = 0; d < dims; d++)
        if (g[d] == 0)
            return YC_OK;
    cl_int err = clEnqueueNDRangeKernel(a->c->queue, a->k, dims, NULL, g, l, 0, NULL, NULL);
    if (err == CL_SUCCESS) {
        a->c->count->launches++;
        return YC_OK;
    }
    snprintf(what, sizeof what, "%s: clEnqueueNDRangeKernel", a->name);
    return yc_cl_fail(what, err);
}
