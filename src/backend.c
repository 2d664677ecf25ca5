/* Backend-independent helpers over the interface (see backend.h). */
#include "backend.h"

#include <stdint.h>

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

int yc_tensor_get_f32(yc_backend *be, const yc_tensor *t, float *dst)
{
    int rc = check_placed(be, t, "reading");
    if (rc)
        return rc;
    if (t->type != YC_F32)
        return yc_error_status(YC_EUNSUPPORTED, "reading %s: only FP32 tensors can be read as floats so far",
                               t->name ? t->name : "tensor");
    size_t img = yc_tensor_image_elems(t);
    if (yc_tensor_dense(t))
        return be->iface->buffer_read(be, t->buf, t->offset, dst, yc_tensor_elems(t) * sizeof(float));
    for (int i = 0; i < t->n; i++) {
        rc = be->iface->buffer_read(be, t->buf, t->offset + (size_t)i * t->nstride * sizeof(float),
                                    dst + (size_t)i * img, img * sizeof(float));
        if (rc)
            return rc;
    }
    return YC_OK;
}

int yc_tensor_set_f32(yc_backend *be, const yc_tensor *t, const float *src)
{
    int rc = check_placed(be, t, "writing");
    if (rc)
        return rc;
    if (t->type != YC_F32)
        return yc_error_status(YC_EUNSUPPORTED,
                               "writing %s: only FP32 tensors can be written from floats so far",
                               t->name ? t->name : "tensor");
    size_t img = yc_tensor_image_elems(t);
    if (yc_tensor_dense(t))
        return be->iface->buffer_write(be, t->buf, t->offset, src, yc_tensor_elems(t) * sizeof(float));
    for (int i = 0; i < t->n; i++) {
        rc = be->iface->buffer_write(be, t->buf, t->offset + (size_t)i * t->nstride * sizeof(float),
                                     src + (size_t)i * img, img * sizeof(float));
        if (rc)
            return rc;
    }
    return YC_OK;
}
