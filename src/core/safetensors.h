/* safetensors files: read and write (https://github.com/huggingface/safetensors format).
 *
 * Layout: u64 little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "string value", ...}}
 * then the raw little-endian, row-major tensor bytes; offsets are relative to the first byte after
 * the header.  yolocl uses them for weights (YOLOv5 state-dict names), checkpoints, and the
 * inspect command's input and output.
 *
 * The reader trusts nothing: header length, JSON, dtypes, shapes (product overflow), offsets
 * (within the file, matching dtype*numel, no overlap) are all checked before any tensor is read. */
#ifndef YC_SAFETENSORS_H
#define YC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum yc_st_dtype {
    YC_ST_F32,
    YC_ST_F16,
    YC_ST_BF16,
    YC_ST_F64,
    YC_ST_I64,
    YC_ST_I32,
    YC_ST_I16,
    YC_ST_I8,
    YC_ST_U8,
    YC_ST_BOOL,
} yc_st_dtype;

#define YC_ST_MAX_DIMS 8

typedef struct yc_st_tensor {
    /* tensor name (NUL-terminated, owned by the file) */
    char *name;
    /* element type */
    yc_st_dtype dtype;
    /* number of dimensions (0 for a scalar) */
    int ndim;
    /* dimensions */
    int64_t shape[YC_ST_MAX_DIMS];
    /* number of elements (product of shape; 1 for a scalar) */
    size_t numel;
    /* byte range of the data, relative to the start of the data section */
    size_t begin, end;
} yc_st_tensor;

typedef struct yc_st_file yc_st_file;

/* Opens and validates a file.  On failure *out is NULL and the message names the file and what
 * is wrong with it (YC_EIO: cannot be read; YC_EFORMAT: malformed; YC_EUNSUPPORTED: a valid dtype
 * or rank yolocl does not read).  Accepted as the format allows: gaps and trailing bytes in the
 * data section, empty tensors at any offset, unknown fields in a tensor entry.  The file stays
 * open until yc_st_close; tensors are read with pread, so reads may run on several threads. */
int yc_st_open(yc_st_file **out, const char *path);
void yc_st_close(yc_st_file *f);

/* Number of tensors and the i-th (in header order). */
int yc_st_count(const yc_st_file *f);
const yc_st_tensor *yc_st_get(const yc_st_file *f, int i);
/* Tensor by name, or NULL. */
const yc_st_tensor *yc_st_find(const yc_st_file *f, const char *name);

/* Reads a tensor as float32 into dst (which holds `count` floats); converts F16 (exactly, with
 * subnormals, infinities and NaN), BF16, F64 (rounded) and the integer types (BOOL as 0 or 1).
 * Fails if count != numel. */
int yc_st_read_f32(yc_st_file *f, const yc_st_tensor *t, float *dst, size_t count);
/* Reads a tensor's raw bytes (dst holds t->end - t->begin bytes). */
int yc_st_read_raw(yc_st_file *f, const yc_st_tensor *t, void *dst);

/* Metadata value for `key` (a string), or NULL. */
const char *yc_st_meta(const yc_st_file *f, const char *key);
/* Number of metadata entries and the i-th key/value. */
int yc_st_meta_count(const yc_st_file *f);
void yc_st_meta_get(const yc_st_file *f, int i, const char **key, const char **value);

/* Size of one element of a dtype in bytes; its name ("F32"). */
size_t yc_st_dtype_size(yc_st_dtype dt);
const char *yc_st_dtype_name(yc_st_dtype dt);

/* ----------------------------------------------------------------------------------------------
 * Writing.  Tensors are referenced, not copied: their data must stay valid until
 * yc_st_writer_write returns.  The file is written atomically (temporary file + rename).
 * -------------------------------------------------------------------------------------------- */
typedef struct yc_st_writer yc_st_writer;

yc_st_writer *yc_st_writer_new(void);
void yc_st_writer_free(yc_st_writer *w);
/* Adds a tensor (data: numel * dtype size bytes, little-endian; may be NULL when numel is 0).
 * Names must be unique, non-empty, valid UTF-8 and not "__metadata__". */
int yc_st_writer_add(yc_st_writer *w, const char *name, yc_st_dtype dtype, int ndim,
                     const int64_t *shape, const void *data);
/* Adds a metadata string (copied); keys must be unique, key and value valid UTF-8. */
int yc_st_writer_meta(yc_st_writer *w, const char *key, const char *value);
/* Writes everything to `path`: header padded with spaces to a multiple of 8, then the tensors
 * packed back to back in the order they were added. */
int yc_st_writer_write(yc_st_writer *w, const char *path);

#endif
