/* Tensors as backends see them: a typed 4-D view (n, c, h, w) into a backend buffer.
 *
 * Layout: each image is dense CHW (w fastest); consecutive images are `nstride` elements apart.
 * nstride > c*h*w describes a channel range of a larger tensor, which is how concat works without
 * copies: the inputs of a concat are views (same buffer, offset of their first channel, nstride of
 * the concat output).  Parameters use the same struct: a conv weight is (cout, cin, kh, kw), a
 * per-channel vector is (1, c, 1, 1). */
#ifndef YC_TENSOR_H
#define YC_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Element types.  FP16 is a storage format only: ops load it, compute in FP32 and store it. */
typedef enum yc_dtype {
    YC_F32 = 0,
    YC_F16 = 1,
} yc_dtype;

/* Device memory owned by a backend (opaque; see backend.h). */
typedef struct yc_buffer yc_buffer;

typedef struct yc_tensor {
    /* buffer holding the data; NULL until the planner places the tensor */
    yc_buffer *buf;
    /* byte offset of element (0, 0, 0, 0) in buf */
    size_t offset;
    /* shape: images, channels, rows, columns */
    int n, c, h, w;
    /* elements between image i and image i+1 (== c*h*w when the tensor is dense) */
    size_t nstride;
    /* element type */
    yc_dtype type;
    /* name for plans and messages (e.g. "model.3.conv.out"); may be NULL */
    const char *name;
} yc_tensor;

static inline size_t yc_dtype_size(yc_dtype t)
{
    return t == YC_F16 ? 2 : 4;
}

/* Elements per image (c*h*w). */
static inline size_t yc_tensor_image_elems(const yc_tensor *t)
{
    return (size_t)t->c * (size_t)t->h * (size_t)t->w;
}

/* Elements in the logical shape (n*c*h*w). */
static inline size_t yc_tensor_elems(const yc_tensor *t)
{
    return (size_t)t->n * yc_tensor_image_elems(t);
}

/* True when the images follow each other without gaps. */
static inline bool yc_tensor_dense(const yc_tensor *t)
{
    return t->n <= 1 || t->nstride == yc_tensor_image_elems(t);
}

/* A dense tensor description (no storage). */
static inline yc_tensor yc_tensor_make(int n, int c, int h, int w, yc_dtype type, const char *name)
{
    yc_tensor t = {0};
    t.n = n;
    t.c = c;
    t.h = h;
    t.w = w;
    t.nstride = (size_t)c * (size_t)h * (size_t)w;
    t.type = type;
    t.name = name;
    return t;
}

#endif
