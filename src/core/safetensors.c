/* safetensors files: read and write (see safetensors.h).
 *
 * The reader validates the whole header when the file is opened and keeps the descriptor open;
 * tensors are read later with pread, so reads of different tensors may run on different threads.
 * Tensor bytes are little-endian in the file and are decoded portably, whatever the host's byte
 * order. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "util.h"

/* Largest header the reader accepts (the reference implementation's limit is 100 MB). */
#define MAX_HEADER ((uint64_t)100 << 20)
/* Bytes converted per pread in yc_st_read_f32. */
#define CHUNK ((size_t)1 << 20)

struct yc_st_file {
    /* the path, for messages */
    char *path;
    int fd;
    /* file offset of the data section (8 + header length) and its size */
    uint64_t data_start, data_size;
    /* tensors in header order */
    yc_st_tensor *t;
    int n;
    /* tensors sorted by name, for yc_st_find */
    const yc_st_tensor **by_name;
    /* metadata in header order */
    char **meta_key, **meta_val;
    int nmeta;
};

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [YC_ST_F32] = {"F32", 4}, [YC_ST_F16] = {"F16", 2}, [YC_ST_BF16] = {"BF16", 2},
    [YC_ST_F64] = {"F64", 8}, [YC_ST_I64] = {"I64", 8}, [YC_ST_I32] = {"I32", 4},
    [YC_ST_I16] = {"I16", 2}, [YC_ST_I8] = {"I8", 1},   [YC_ST_U8] = {"U8", 1},
    [YC_ST_BOOL] = {"BOOL", 1},
};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

/* safetensors dtypes that are valid in the format but that yolocl does not read. */
static const char *const unsupported_dtypes[] = {
    "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64",
};

size_t yc_st_dtype_size(yc_st_dtype dt)
{
    return (int)dt >= 0 && (int)dt < NDTYPES ? dtypes[dt].size : 0;
}

const char *yc_st_dtype_name(yc_st_dtype dt)
{
    return (int)dt >= 0 && (int)dt < NDTYPES ? dtypes[dt].name : "?";
}

/* ------------------------------------------------------------------------------------------------
 * Element decoding
 * ---------------------------------------------------------------------------------------------- */

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static uint16_t le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static float bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE 754 binary16 to binary32, exact for every input: subnormals are normalized, infinities
 * kept, NaN payloads carried over (shifted into the top of the float mantissa). */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f)
        return bits_to_float(sign | 0x7f800000u | mant << 13);
    if (exp != 0)
        return bits_to_float(sign | (exp + 112) << 23 | mant << 13);
    if (mant == 0)
        return bits_to_float(sign);
    /* subnormal: mant * 2^-24; shift the leading 1 up to the implicit-bit position */
    uint32_t e = 113;
    while (!(mant & 0x400)) {
        mant <<= 1;
        e--;
    }
    return bits_to_float(sign | e << 23 | (mant & 0x3ff) << 13);
}

/* Two's-complement reinterpretation without implementation-defined conversions. */
static int64_t to_signed(uint64_t u, int bits)
{
    uint64_t top = (uint64_t)1 << (bits - 1);
    if (!(u & top))
        return (int64_t)u;
    uint64_t mag = ((~u) & (top - 1 + top)) + 1;
    return mag == ((uint64_t)1 << 63) ? INT64_MIN : -(int64_t)mag;
}

/* Decodes n little-endian elements of dtype dt at src into floats. */
static void decode_f32(yc_st_dtype dt, const unsigned char *src, size_t n, float *dst)
{
    switch (dt) {
    case YC_ST_F32:
        for (size_t i = 0; i < n; i++)
            dst[i] = bits_to_float(le32(src + 4 * i));
        break;
    case YC_ST_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = half_to_float(le16(src + 2 * i));
        break;
    case YC_ST_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = bits_to_float((uint32_t)le16(src + 2 * i) << 16);
        break;
    case YC_ST_F64:
        for (size_t i = 0; i < n; i++) {
            uint64_t u = le64(src + 8 * i);
            double d;
            memcpy(&d, &u, sizeof d);
            dst[i] = (float)d;
        }
        break;
    case YC_ST_I64:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)to_signed(le64(src + 8 * i), 64);
        break;
    case YC_ST_I32:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)to_signed(le32(src + 4 * i), 32);
        break;
    case YC_ST_I16:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)to_signed(le16(src + 2 * i), 16);
        break;
    case YC_ST_I8:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)to_signed(src[i], 8);
        break;
    case YC_ST_U8:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)src[i];
        break;
    case YC_ST_BOOL:
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i] ? 1.0f : 0.0f;
        break;
    }
}

/* ------------------------------------------------------------------------------------------------
 * Reading
 * ---------------------------------------------------------------------------------------------- */

/* Reads exactly n bytes at file offset off. */
static int read_at(int fd, const char *path, void *dst, size_t n, uint64_t off)
{
    unsigned char *p = dst;
    while (n) {
        size_t want = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
        if (off > (uint64_t)INT64_MAX)
            return yc_error_status(YC_EIO, "%s: offset %" PRIu64 " is too large", path, off);
        ssize_t got = pread(fd, p, want, (off_t)off);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return yc_error_status(YC_EIO, "cannot read %s at offset %" PRIu64 ": %s", path, off,
                                   strerror(errno));
        }
        if (got == 0)
            return yc_error_status(YC_EIO, "%s: unexpected end of file at offset %" PRIu64
                                   " (was it truncated while open?)", path, off);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return YC_OK;
}

void yc_st_close(yc_st_file *f)
{
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    for (int i = 0; i < f->n; i++)
        free(f->t[i].name);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_key[i]);
        free(f->meta_val[i]);
    }
    free(f->t);
    free(f->by_name);
    free(f->meta_key);
    free(f->meta_val);
    free(f->path);
    free(f);
}

/* Copies a JSON string or key (which must not contain NUL bytes) into *out. */
static int copy_text(char **out, const char *s, size_t len, const char *path, const char *what)
{
    *out = NULL;
    if (strlen(s) != len)
        return yc_error_status(YC_EFORMAT, "%s: %s \"%.100s\" contains a NUL character", path,
                               what, s);
    *out = yc_strdup(s, what);
    return *out ? YC_OK : YC_ENOMEM;
}

/* Reads "__metadata__" (an object of strings). */
static int parse_metadata(yc_st_file *f, const yc_json *meta)
{
    if (yc_json_typeof(meta) != YC_JSON_OBJECT)
        return yc_error_status(YC_EFORMAT, "%s: __metadata__ must be an object, found %s",
                               f->path, yc_json_type_name(yc_json_typeof(meta)));
    size_t n = yc_json_len(meta);
    if (n > INT_MAX)
        return yc_error_status(YC_EFORMAT, "%s: too many metadata entries", f->path);
    f->meta_key = yc_calloc(n, sizeof(char *), "safetensors metadata");
    f->meta_val = yc_calloc(n, sizeof(char *), "safetensors metadata");
    if (!f->meta_key || !f->meta_val)
        return YC_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t klen;
        const char *key = yc_json_key_at(meta, i, &klen);
        const yc_json *v = yc_json_at(meta, i);
        if (yc_json_typeof(v) != YC_JSON_STRING)
            return yc_error_status(YC_EFORMAT,
                                   "%s: metadata value of \"%.100s\" must be a string, found %s",
                                   f->path, key, yc_json_type_name(yc_json_typeof(v)));
        f->nmeta = (int)i + 1;
        int st = copy_text(&f->meta_key[i], key, klen, f->path, "metadata key");
        if (!st)
            st = copy_text(&f->meta_val[i], yc_json_string(v), yc_json_string_len(v), f->path,
                           "metadata value");
        if (st)
            return st;
    }
    return YC_OK;
}

/* Parses the dtype string of tensor `name`. */
static int parse_dtype(const yc_st_file *f, const char *name, const yc_json *v, yc_st_dtype *out)
{
    const char *s = yc_json_string(v);
    if (!s)
        return yc_error_status(YC_EFORMAT, "%s: tensor '%s': dtype must be a string, found %s",
                               f->path, name, v ? yc_json_type_name(yc_json_typeof(v)) : "nothing");
    for (int i = 0; i < NDTYPES; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *out = (yc_st_dtype)i;
            return YC_OK;
        }
    for (size_t i = 0; i < sizeof unsupported_dtypes / sizeof unsupported_dtypes[0]; i++)
        if (strcmp(s, unsupported_dtypes[i]) == 0)
            return yc_error_status(YC_EUNSUPPORTED,
                                   "%s: tensor '%s': dtype %s is not supported (yolocl reads F32, "
                                   "F16, BF16, F64, I64, I32, I16, I8, U8 and BOOL)",
                                   f->path, name, s);
    return yc_error_status(YC_EFORMAT, "%s: tensor '%s': unknown dtype \"%.40s\"", f->path, name,
                           s);
}

/* Parses the shape of tensor t and computes its element count. */
static int parse_shape(const yc_st_file *f, yc_st_tensor *t, const yc_json *v)
{
    if (yc_json_typeof(v) != YC_JSON_ARRAY)
        return yc_error_status(YC_EFORMAT, "%s: tensor '%s': shape must be an array, found %s",
                               f->path, t->name,
                               v ? yc_json_type_name(yc_json_typeof(v)) : "nothing");
    size_t ndim = yc_json_len(v);
    if (ndim > YC_ST_MAX_DIMS)
        return yc_error_status(YC_EUNSUPPORTED,
                               "%s: tensor '%s' has %zu dimensions; at most %d are supported",
                               f->path, t->name, ndim, YC_ST_MAX_DIMS);
    t->ndim = (int)ndim;
    /* the product of the non-zero dimensions (times the element size) must fit, so that strides
     * and byte sizes can be computed even when some dimension is zero */
    size_t nonzero = 1, esize = yc_st_dtype_size(t->dtype);
    bool empty = false;
    for (size_t i = 0; i < ndim; i++) {
        uint64_t d;
        int st = yc_json_get_u64(yc_json_at(v, i), &d);
        if (st)
            return yc_error_context(st, "%s: tensor '%s': shape", f->path, t->name);
        if (d > (uint64_t)INT64_MAX)
            return yc_error_status(YC_EFORMAT, "%s: tensor '%s': dimension %" PRIu64
                                   " is too large", f->path, t->name, d);
        t->shape[i] = (int64_t)d;
        if (d == 0) {
            empty = true;
            continue;
        }
        if (d > SIZE_MAX / esize / nonzero)
            return yc_error_status(YC_EFORMAT, "%s: tensor '%s': shape has too many elements",
                                   f->path, t->name);
        nonzero *= (size_t)d;
    }
    t->numel = empty ? 0 : nonzero;
    return YC_OK;
}

/* Parses data_offsets of tensor t and checks them against its size and the data section. */
static int parse_offsets(const yc_st_file *f, yc_st_tensor *t, const yc_json *v)
{
    if (yc_json_typeof(v) != YC_JSON_ARRAY || yc_json_len(v) != 2)
        return yc_error_status(YC_EFORMAT,
                               "%s: tensor '%s': data_offsets must be an array [begin, end]",
                               f->path, t->name);
    uint64_t b, e;
    int st = yc_json_get_u64(yc_json_at(v, 0), &b);
    if (!st)
        st = yc_json_get_u64(yc_json_at(v, 1), &e);
    if (st)
        return yc_error_context(st, "%s: tensor '%s': data_offsets", f->path, t->name);
    if (b > e)
        return yc_error_status(YC_EFORMAT,
                               "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                               "] end before they begin", f->path, t->name, b, e);
    if (e > f->data_size || e > SIZE_MAX)
        return yc_error_status(YC_EFORMAT,
                               "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                               "] run past the end of the data (%" PRIu64 " bytes)",
                               f->path, t->name, b, e, f->data_size);
    size_t want = t->numel * yc_st_dtype_size(t->dtype);
    if (e - b != want)
        return yc_error_status(YC_EFORMAT,
                               "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %"
                               PRIu64 " bytes, but %zu elements of %s need %zu",
                               f->path, t->name, b, e, e - b, t->numel,
                               yc_st_dtype_name(t->dtype), want);
    t->begin = (size_t)b;
    t->end = (size_t)e;
    return YC_OK;
}

/* Parses one tensor entry of the header. */
static int parse_tensor(yc_st_file *f, yc_st_tensor *t, const yc_json *v)
{
    if (yc_json_typeof(v) != YC_JSON_OBJECT)
        return yc_error_status(YC_EFORMAT, "%s: tensor '%s': expected an object, found %s",
                               f->path, t->name, yc_json_type_name(yc_json_typeof(v)));
    int st = parse_dtype(f, t->name, yc_json_get(v, "dtype"), &t->dtype);
    if (!st)
        st = parse_shape(f, t, yc_json_get(v, "shape"));
    if (!st)
        st = parse_offsets(f, t, yc_json_get(v, "data_offsets"));
    return st;
}

static int cmp_by_begin(const void *a, const void *b)
{
    const yc_st_tensor *x = *(const yc_st_tensor *const *)a, *y = *(const yc_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static int cmp_by_name(const void *a, const void *b)
{
    const yc_st_tensor *x = *(const yc_st_tensor *const *)a, *y = *(const yc_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

/* Checks that no two non-empty tensors share a byte, and builds the by-name index. */
static int check_overlaps(yc_st_file *f)
{
    f->by_name = yc_calloc((size_t)f->n, sizeof *f->by_name, "safetensors index");
    if (!f->by_name)
        return YC_ENOMEM;
    for (int i = 0; i < f->n; i++)
        f->by_name[i] = &f->t[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_by_begin);
    const yc_st_tensor *prev = NULL;
    for (int i = 0; i < f->n; i++) {
        const yc_st_tensor *t = f->by_name[i];
        if (t->begin == t->end)
            continue;
        if (prev && t->begin < prev->end)
            return yc_error_status(YC_EFORMAT,
                                   "%s: tensors '%s' [%zu, %zu] and '%s' [%zu, %zu] overlap",
                                   f->path, prev->name, prev->begin, prev->end, t->name,
                                   t->begin, t->end);
        prev = t;
    }
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_by_name);
    return YC_OK;
}

/* Parses and validates the header JSON. */
static int parse_header(yc_st_file *f, const char *text, size_t len)
{
    yc_json *root;
    int st = yc_json_parse(&root, text, len);
    if (st)
        return yc_error_context(st, "%s: header", f->path);
    if (yc_json_typeof(root) != YC_JSON_OBJECT) {
        st = yc_error_status(YC_EFORMAT, "%s: header must be a JSON object, found %s", f->path,
                             yc_json_type_name(yc_json_typeof(root)));
        yc_json_free(root);
        return st;
    }
    size_t n = yc_json_len(root);
    const yc_json *meta = yc_json_get(root, "__metadata__");
    if (meta)
        n--;
    if (n > INT_MAX) {
        yc_json_free(root);
        return yc_error_status(YC_EFORMAT, "%s: too many tensors", f->path);
    }
    f->t = yc_calloc(n, sizeof *f->t, "safetensors tensors");
    if (!f->t) {
        yc_json_free(root);
        return YC_ENOMEM;
    }
    if (meta)
        st = parse_metadata(f, meta);
    for (size_t i = 0; !st && i < yc_json_len(root); i++) {
        size_t klen;
        const char *key = yc_json_key_at(root, i, &klen);
        if (strcmp(key, "__metadata__") == 0 && klen == strlen(key))
            continue;
        yc_st_tensor *t = &f->t[f->n];
        st = copy_text(&t->name, key, klen, f->path, "tensor name");
        if (st)
            break;
        f->n++;
        st = parse_tensor(f, t, yc_json_at(root, i));
    }
    yc_json_free(root);
    if (!st)
        st = check_overlaps(f);
    return st;
}

int yc_st_open(yc_st_file **out, const char *path)
{
    *out = NULL;
    yc_st_file *f = yc_calloc(1, sizeof *f, "safetensors file");
    if (!f)
        return YC_ENOMEM;
    f->fd = -1;
    f->path = yc_strdup(path, "path");
    if (!f->path) {
        yc_st_close(f);
        return YC_ENOMEM;
    }
    int st = YC_OK;
    char *header = NULL;
    struct stat sb;
    unsigned char lenbuf[8];
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        st = yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
    } else if (fstat(f->fd, &sb) != 0) {
        st = yc_error_status(YC_EIO, "cannot stat %s: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = yc_error_status(YC_EIO, "%s is not a regular file", path);
    } else if (sb.st_size < 8) {
        st = yc_error_status(YC_EFORMAT,
                             "%s: file is too short (%lld bytes) to be a safetensors file", path,
                             (long long)sb.st_size);
    } else if (!(st = read_at(f->fd, path, lenbuf, 8, 0))) {
        uint64_t size = (uint64_t)sb.st_size;
        uint64_t hlen = le64(lenbuf);
        if (hlen > size - 8)
            st = yc_error_status(YC_EFORMAT,
                                 "%s: header length %" PRIu64 " is larger than the rest of the "
                                 "file (%" PRIu64 " bytes); is it a safetensors file?",
                                 path, hlen, size - 8);
        else if (hlen > MAX_HEADER)
            st = yc_error_status(YC_EFORMAT,
                                 "%s: header length %" PRIu64 " exceeds the limit of %" PRIu64
                                 " bytes", path, hlen, MAX_HEADER);
        else if (hlen < 2)
            st = yc_error_status(YC_EFORMAT, "%s: header length %" PRIu64 " is too short", path,
                                 hlen);
        else if (!(header = yc_malloc((size_t)hlen, "safetensors header")))
            st = YC_ENOMEM;
        else if (!(st = read_at(f->fd, path, header, (size_t)hlen, 8))) {
            f->data_start = 8 + hlen;
            f->data_size = size - 8 - hlen;
            st = parse_header(f, header, (size_t)hlen);
        }
    }
    free(header);
    if (st) {
        yc_st_close(f);
        return st;
    }
    *out = f;
    return YC_OK;
}

int yc_st_count(const yc_st_file *f)
{
    return f ? f->n : 0;
}

const yc_st_tensor *yc_st_get(const yc_st_file *f, int i)
{
    return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const yc_st_tensor *yc_st_find(const yc_st_file *f, const char *name)
{
    if (!f || !name)
        return NULL;
    size_t lo = 0, hi = (size_t)f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0)
            return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int yc_st_read_raw(yc_st_file *f, const yc_st_tensor *t, void *dst)
{
    if (!f || !t)
        return yc_error_status(YC_ERR, "safetensors: no file or tensor to read");
    if (t->end == t->begin)
        return YC_OK;
    int st = read_at(f->fd, f->path, dst, t->end - t->begin, f->data_start + t->begin);
    return st ? yc_error_context(st, "tensor '%s'", t->name) : YC_OK;
}

int yc_st_read_f32(yc_st_file *f, const yc_st_tensor *t, float *dst, size_t count)
{
    if (!f || !t)
        return yc_error_status(YC_ERR, "safetensors: no file or tensor to read");
    if (count != t->numel)
        return yc_error_status(YC_EFORMAT, "%s: tensor '%s' has %zu elements, not %zu", f->path,
                               t->name, t->numel, count);
    if (count == 0)
        return YC_OK;
    if (t->dtype == YC_ST_F32 && host_little_endian())
        return yc_st_read_raw(f, t, dst);
    size_t esize = yc_st_dtype_size(t->dtype);
    size_t per = CHUNK / esize;
    size_t bufsize = (count < per ? count : per) * esize;
    unsigned char *buf = yc_malloc(bufsize, "safetensors read buffer");
    if (!buf)
        return YC_ENOMEM;
    int st = YC_OK;
    for (size_t done = 0; done < count && !st;) {
        size_t n = count - done < per ? count - done : per;
        st = read_at(f->fd, f->path, buf, n * esize, f->data_start + t->begin + done * esize);
        if (st) {
            st = yc_error_context(st, "tensor '%s'", t->name);
            break;
        }
        decode_f32(t->dtype, buf, n, dst + done);
        done += n;
    }
    free(buf);
    return st;
}

const char *yc_st_meta(const yc_st_file *f, const char *key)
{
    if (!f || !key)
        return NULL;
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_key[i], key) == 0)
            return f->meta_val[i];
    return NULL;
}

int yc_st_meta_count(const yc_st_file *f)
{
    return f ? f->nmeta : 0;
}

void yc_st_meta_get(const yc_st_file *f, int i, const char **key, const char **value)
{
    bool ok = f && i >= 0 && i < f->nmeta;
    if (key)
        *key = ok ? f->meta_key[i] : NULL;
    if (value)
        *value = ok ? f->meta_val[i] : NULL;
}

/* ------------------------------------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------------------------------- */

typedef struct wtensor {
    char *name;
    yc_st_dtype dtype;
    int ndim;
    int64_t shape[YC_ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} wtensor;

struct yc_st_writer {
    wtensor *t;
    size_t n, cap;
    /* open-addressing set of tensor indices by name (-1 = empty), nslots a power of two */
    int *slots;
    size_t nslots;
    char **meta_key, **meta_val;
    size_t nmeta, capmeta;
};

/* FNV-1a. */
static size_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

/* Slot of `name` in the name set, or of the empty slot where it would go. */
static size_t find_slot(const yc_st_writer *w, const char *name)
{
    size_t mask = w->nslots - 1, i = hash_name(name) & mask;
    while (w->slots[i] >= 0 && strcmp(w->t[w->slots[i]].name, name) != 0)
        i = (i + 1) & mask;
    return i;
}

/* Doubles the name set (kept at most half full). */
static int grow_slots(yc_st_writer *w)
{
    size_t ns = w->nslots ? w->nslots * 2 : 64;
    int *slots = yc_malloc(ns * sizeof *slots, "safetensors writer");
    if (!slots)
        return YC_ENOMEM;
    free(w->slots);
    w->slots = slots;
    w->nslots = ns;
    for (size_t i = 0; i < ns; i++)
        slots[i] = -1;
    for (size_t k = 0; k < w->n; k++)
        slots[find_slot(w, w->t[k].name)] = (int)k;
    return YC_OK;
}

yc_st_writer *yc_st_writer_new(void)
{
    yc_st_writer *w = yc_calloc(1, sizeof *w, "safetensors writer");
    if (w && grow_slots(w)) {
        free(w);
        return NULL;
    }
    return w;
}

void yc_st_writer_free(yc_st_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->t[i].name);
    for (size_t i = 0; i < w->nmeta; i++) {
        free(w->meta_key[i]);
        free(w->meta_val[i]);
    }
    free(w->t);
    free(w->slots);
    free(w->meta_key);
    free(w->meta_val);
    free(w);
}

int yc_st_writer_add(yc_st_writer *w, const char *name, yc_st_dtype dtype, int ndim,
                     const int64_t *shape, const void *data)
{
    if (!w || !name)
        return yc_error_status(YC_ERR, "safetensors writer: no writer or tensor name");
    if (!name[0] || strcmp(name, "__metadata__") == 0)
        return yc_error_status(YC_EFORMAT, "safetensors writer: invalid tensor name \"%s\"",
                               name);
    if (!yc_json_utf8_valid(name, strlen(name)))
        return yc_error_status(YC_EFORMAT,
                               "safetensors writer: tensor name \"%.100s\" is not valid UTF-8",
                               name);
    if ((int)dtype < 0 || (int)dtype >= NDTYPES)
        return yc_error_status(YC_EFORMAT, "safetensors writer: tensor '%s': invalid dtype %d",
                               name, (int)dtype);
    if (ndim < 0 || ndim > YC_ST_MAX_DIMS || (ndim > 0 && !shape))
        return yc_error_status(YC_EFORMAT,
                               "safetensors writer: tensor '%s': invalid number of dimensions %d",
                               name, ndim);
    if (w->n >= (size_t)INT_MAX / 2)
        return yc_error_status(YC_EFORMAT, "safetensors writer: too many tensors");
    size_t esize = yc_st_dtype_size(dtype), nonzero = 1;
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return yc_error_status(YC_EFORMAT,
                                   "safetensors writer: tensor '%s': negative dimension %lld",
                                   name, (long long)shape[i]);
        if (shape[i] == 0) {
            empty = true;
            continue;
        }
        if ((uint64_t)shape[i] > SIZE_MAX / esize / nonzero)
            return yc_error_status(YC_EFORMAT,
                                   "safetensors writer: tensor '%s': shape has too many elements",
                                   name);
        nonzero *= (size_t)shape[i];
    }
    size_t nbytes = empty ? 0 : nonzero * esize;
    if (nbytes && !data)
        return yc_error_status(YC_ERR, "safetensors writer: tensor '%s': no data", name);
    size_t slot = find_slot(w, name);
    if (w->slots[slot] >= 0)
        return yc_error_status(YC_EFORMAT, "safetensors writer: duplicate tensor name '%s'",
                               name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        wtensor *nt = yc_realloc(w->t, cap * sizeof *nt, "safetensors writer");
        if (!nt)
            return YC_ENOMEM;
        w->t = nt;
        w->cap = cap;
    }
    wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = yc_strdup(name, "tensor name");
    if (!t->name)
        return YC_ENOMEM;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->data = data;
    t->nbytes = nbytes;
    w->slots[slot] = (int)w->n;
    w->n++;
    if (2 * w->n > w->nslots)
        return grow_slots(w);
    return YC_OK;
}

int yc_st_writer_meta(yc_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value)
        return yc_error_status(YC_ERR, "safetensors writer: no writer, key or value");
    if (!yc_json_utf8_valid(key, strlen(key)) || !yc_json_utf8_valid(value, strlen(value)))
        return yc_error_status(YC_EFORMAT,
                               "safetensors writer: metadata \"%.100s\" is not valid UTF-8", key);
    for (size_t i = 0; i < w->nmeta; i++)
        if (strcmp(w->meta_key[i], key) == 0)
            return yc_error_status(YC_EFORMAT, "safetensors writer: duplicate metadata key '%s'",
                                   key);
    if (w->nmeta == w->capmeta) {
        size_t cap = w->capmeta ? w->capmeta * 2 : 16;
        char **nk = yc_realloc(w->meta_key, cap * sizeof *nk, "safetensors metadata");
        if (!nk)
            return YC_ENOMEM;
        w->meta_key = nk;
        char **nv = yc_realloc(w->meta_val, cap * sizeof *nv, "safetensors metadata");
        if (!nv)
            return YC_ENOMEM;
        w->meta_val = nv;
        w->capmeta = cap;
    }
    char *k = yc_strdup(key, "metadata key");
    char *v = k ? yc_strdup(value, "metadata value") : NULL;
    if (!v) {
        free(k);
        return YC_ENOMEM;
    }
    w->meta_key[w->nmeta] = k;
    w->meta_val[w->nmeta] = v;
    w->nmeta++;
    return YC_OK;
}

/* A growable text buffer; the first failure sticks. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int status;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len)
{
    if (b->status)
        return;
    if (len > SIZE_MAX / 2 - b->n) {
        b->status = yc_error_status(YC_ENOMEM, "safetensors header too large");
        return;
    }
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *np = yc_realloc(b->p, cap, "safetensors header");
        if (!np) {
            b->status = YC_ENOMEM;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* Appends s as a quoted JSON string. */
static void sb_quoted(sbuf *b, const char *s)
{
    if (b->status)
        return;
    char *q = yc_json_quote(s, strlen(s));
    if (!q) {
        b->status = YC_ENOMEM;
        return;
    }
    sb_str(b, q);
    free(q);
}

/* Appends an unsigned integer. */
static void sb_u64(sbuf *b, uint64_t v)
{
    char num[24];
    int len = snprintf(num, sizeof num, "%" PRIu64, v);
    sb_put(b, num, (size_t)len);
}

/* Builds the header (padded with spaces to a multiple of 8 bytes). */
static int build_header(const yc_st_writer *w, sbuf *b)
{
    sb_str(b, "{");
    if (w->nmeta) {
        sb_str(b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->nmeta; i++) {
            if (i)
                sb_str(b, ",");
            sb_quoted(b, w->meta_key[i]);
            sb_str(b, ":");
            sb_quoted(b, w->meta_val[i]);
        }
        sb_str(b, "}");
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n; i++) {
        const wtensor *t = &w->t[i];
        if (i || w->nmeta)
            sb_str(b, ",");
        sb_quoted(b, t->name);
        sb_str(b, ":{\"dtype\":\"");
        sb_str(b, yc_st_dtype_name(t->dtype));
        sb_str(b, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d)
                sb_str(b, ",");
            sb_u64(b, (uint64_t)t->shape[d]);
        }
        sb_str(b, "],\"data_offsets\":[");
        if (t->nbytes > UINT64_MAX - offset)
            return yc_error_status(YC_EFORMAT, "safetensors writer: total size overflows");
        sb_u64(b, offset);
        sb_str(b, ",");
        offset += t->nbytes;
        sb_u64(b, offset);
        sb_str(b, "]}");
    }
    sb_str(b, "}");
    while (!b->status && b->n % 8)
        sb_str(b, " ");
    return b->status;
}

int yc_st_writer_write(yc_st_writer *w, const char *path)
{
    if (!w || !path)
        return yc_error_status(YC_ERR, "safetensors writer: no writer or path");
    sbuf b = {0};
    int st = build_header(w, &b);
    if (st) {
        free(b.p);
        return yc_error_context(st, "cannot write %s", path);
    }
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)((uint64_t)b.n >> (8 * i));
    yc_atomic_file af;
    st = yc_atomic_open(&af, path);
    if (st) {
        free(b.p);
        return st;
    }
    bool ok = fwrite(lenbuf, 1, 8, af.f) == 8 && fwrite(b.p, 1, b.n, af.f) == b.n;
    for (size_t i = 0; ok && i < w->n; i++)
        if (w->t[i].nbytes)
            ok = fwrite(w->t[i].data, 1, w->t[i].nbytes, af.f) == w->t[i].nbytes;
    free(b.p);
    if (!ok) {
        int e = errno;
        yc_atomic_abort(&af);
        return yc_error_status(YC_EIO, "cannot write %s: %s", path, strerror(e));
    }
    return yc_atomic_commit(&af);
}
