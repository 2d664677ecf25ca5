/* The torch checkpoint reader (zip.c, pickle.c, ptfile.c) and the weights interface (weights.c):
 * small .pt files written here byte by byte (strides, offsets, dtypes, nested modules,
 * attributes), a battery of malformed and hostile files (each must fail cleanly), and a model's
 * weights written and loaded back.  test_ptfile_ref (this file built with YC_TEST_SHARED) reads
 * the released yolov5n.pt from ../shared: against yolov5n.safetensors, truncated and corrupted,
 * and loaded into models (STRICT and TRANSFER); it exits 77 without them. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "pickle.h"
#include "ptfile.h"
#include "safetensors.h"
#include "util.h"
#include "weights.h"
#include "yamltree.h"
#include "zip.h"
#include "harness.h"
#include "yctest.h"

#ifdef YC_TEST_SHARED
static const char *const ref_files[] = {"weights/yolov5n.pt", "weights/yolov5n.safetensors", NULL};

/* ../shared/weights/yolov5n.pt or .safetensors */
static const char *shared_weights(const char *ext)
{
    static char buf[2][2048];
    return yc_test_shared_path(ref_files[strcmp(ext, "pt") != 0], buf[strcmp(ext, "pt") != 0],
                               sizeof buf[0]);
}
#endif

#ifndef YC_TEST_SHARED

/* ---- byte buffers, pickles and zips written by hand ----------------------------------------- */

typedef struct buf {
    unsigned char *d;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->d = realloc(b->d, b->cap);
        ck_assert_ptr_nonnull(b->d);
    }
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void put1(buf *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(b, &c, 1);
}

static void put_le(buf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        put1(b, (unsigned)(v >> (8 * i)) & 0xFF);
}

static void p_str(buf *b, const char *s)
{
    put1(b, 'X');
    put_le(b, strlen(s), 4);
    put(b, s, strlen(s));
}

static void p_int(buf *b, long v)
{
    put1(b, 'J');
    put_le(b, (uint64_t)(uint32_t)(int32_t)v, 4);
}

static void p_float(buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put1(b, 'G');
    for (int i = 7; i >= 0; i--)
        put1(b, (unsigned)(u >> (8 * i)) & 0xFF);
}

static void p_global(buf *b, const char *module, const char *name)
{
    put1(b, 'c');
    put(b, module, strlen(module));
    put1(b, '\n');
    put(b, name, strlen(name));
    put1(b, '\n');
}

static void p_odict(buf *b)
{
    p_global(b, "collections", "OrderedDict");
    put1(b, ')');
    put1(b, 'R');
}

/* _rebuild_tensor_v2(('storage', torch.<type>, key, 'cpu', numel), offset, size, stride, False,
 * OrderedDict()) */
static void p_tensor(buf *b, const char *type, const char *key, long numel, long offset,
                     int ndim, const long *size, const long *stride)
{
    p_global(b, "torch._utils", "_rebuild_tensor_v2");
    put1(b, '(');
    put1(b, '(');
    p_str(b, "storage");
    p_global(b, "torch", type);
    p_str(b, key);
    p_str(b, "cpu");
    p_int(b, numel);
    put1(b, 't');
    put1(b, 'Q');
    p_int(b, offset);
    put1(b, '(');
    for (int d = 0; d < ndim; d++)
        p_int(b, size[d]);
    put1(b, 't');
    put1(b, '(');
    for (int d = 0; d < ndim; d++)
        p_int(b, stride[d]);
    put1(b, 't');
    put1(b, 0x89);
    p_odict(b);
    put1(b, 't');
    put1(b, 'R');
}

/* The start of a module: cls(), then BUILD's state dict opened with MARK. */
static void p_module_begin(buf *b, const char *module, const char *cls)
{
    p_global(b, module, cls);
    put1(b, ')');
    put1(b, 0x81);
    put1(b, '}');
    put1(b, '(');
    p_str(b, "training");
    put1(b, 0x89);
}

static void p_module_end(buf *b)
{
    put1(b, 'u');
    put1(b, 'b');
}

typedef struct zentry {
    const char *name;
    const void *data;
    size_t len;
} zentry;

/* A zip archive of stored entries (method as given), optionally with ZIP64 end records and
 * ZIP64 extra fields in the central directory. */
static void write_zip(const char *path, const zentry *e, int n, unsigned method, bool zip64)
{
    buf z = {0}, cd = {0};
    for (int i = 0; i < n; i++) {
        uint32_t crc = yc_zip_crc32(0, e[i].data, e[i].len);
        size_t off = z.n, nl = strlen(e[i].name);
        put_le(&z, 0x04034b50, 4);
        put_le(&z, 20, 2);
        put_le(&z, 0, 2);
        put_le(&z, method, 2);
        put_le(&z, 0, 4);
        put_le(&z, crc, 4);
        put_le(&z, e[i].len, 4);
        put_le(&z, e[i].len, 4);
        put_le(&z, nl, 2);
        put_le(&z, 3, 2);
        put(&z, e[i].name, nl);
        put(&z, "pad", 3);
        put(&z, e[i].data, e[i].len);
        put_le(&cd, 0x02014b50, 4);
        put_le(&cd, 45, 2);
        put_le(&cd, 45, 2);
        put_le(&cd, 0, 2);
        put_le(&cd, method, 2);
        put_le(&cd, 0, 4);
        put_le(&cd, crc, 4);
        put_le(&cd, zip64 ? 0xFFFFFFFFu : e[i].len, 4);
        put_le(&cd, zip64 ? 0xFFFFFFFFu : e[i].len, 4);
        put_le(&cd, nl, 2);
        put_le(&cd, zip64 ? 28 : 0, 2);
        put_le(&cd, 0, 2);
        put_le(&cd, 0, 2);
        put_le(&cd, 0, 2);
        put_le(&cd, 0, 4);
        put_le(&cd, zip64 ? 0xFFFFFFFFu : off, 4);
        put(&cd, e[i].name, nl);
        if (zip64) {
            put_le(&cd, 1, 2);
            put_le(&cd, 24, 2);
            put_le(&cd, e[i].len, 8);
            put_le(&cd, e[i].len, 8);
            put_le(&cd, off, 8);
        }
    }
    size_t cd_off = z.n;
    put(&z, cd.d, cd.n);
    if (zip64) {
        size_t rec = z.n;
        put_le(&z, 0x06064b50, 4);
        put_le(&z, 44, 8);
        put_le(&z, 45, 2);
        put_le(&z, 45, 2);
        put_le(&z, 0, 4);
        put_le(&z, 0, 4);
        put_le(&z, (uint64_t)n, 8);
        put_le(&z, (uint64_t)n, 8);
        put_le(&z, cd.n, 8);
        put_le(&z, cd_off, 8);
        put_le(&z, 0x07064b50, 4);
        put_le(&z, 0, 4);
        put_le(&z, rec, 8);
        put_le(&z, 1, 4);
    }
    put_le(&z, 0x06054b50, 4);
    put_le(&z, 0, 2);
    put_le(&z, 0, 2);
    put_le(&z, zip64 ? 0xFFFF : (unsigned)n, 2);
    put_le(&z, zip64 ? 0xFFFF : (unsigned)n, 2);
    put_le(&z, zip64 ? 0xFFFFFFFFu : cd.n, 4);
    put_le(&z, zip64 ? 0xFFFFFFFFu : cd_off, 4);
    put_le(&z, 0, 2);
    ck_assert_int_eq(yc_write_file_atomic(path, z.d, z.n), YC_OK);
    free(z.d);
    free(cd.d);
}

/* A .pt file: archive/data.pkl plus storages and optional extra entries. */
static void write_pt(const char *path, const buf *pkl, const zentry *storages, int n, bool zip64)
{
    zentry e[16];
    e[0] = (zentry){"archive/data.pkl", pkl->d, pkl->n};
    e[1] = (zentry){"archive/version", "3\n", 2};
    for (int i = 0; i < n; i++)
        e[2 + i] = storages[i];
    write_zip(path, e, n + 2, 0, zip64);
}

/* ---- the synthetic checkpoint --------------------------------------------------------------- */

static float f32_store[24];
static unsigned char half_store[10], bf16_store[4], f64_store[16], i64_store[8], f32_be[8];

static void fill_storages(void)
{
    for (int i = 0; i < 24; i++)
        f32_store[i] = (float)i;
    /* 1.0, -2.5, 65504, the smallest subnormal, +inf */
    const uint16_t h[5] = {0x3C00, 0xC100, 0x7BFF, 0x0001, 0x7C00};
    for (int i = 0; i < 5; i++) {
        half_store[2 * i] = h[i] & 0xFF;
        half_store[2 * i + 1] = h[i] >> 8;
    }
    /* 1.0, -3.0 */
    const unsigned char bf[4] = {0x80, 0x3F, 0x40, 0xC0};
    memcpy(bf16_store, bf, 4);
    const double d[2] = {0.1, 1e300};
    memcpy(f64_store, d, sizeof d);
    int64_t big = 123456789012LL;
    memcpy(i64_store, &big, 8);
    /* big-endian floats 1.5, -2.0 */
    const unsigned char be[8] = {0x3F, 0xC0, 0, 0, 0xC0, 0, 0, 0};
    memcpy(f32_be, be, 8);
}

/* {'epoch': -1, 'model': Model(...), 'ema': None}: a root module with parameter w, buffers e and
 * np (non-persistent), a submodule with parameters t, o, h (None skipped) and buffers d, b, n,
 * and a None submodule; attributes yaml, yaml_file, nc, names (a dict), stride (a list). */
static void synthetic_pickle(buf *b)
{
    put1(b, 0x80);
    put1(b, 2);
    put1(b, '}');
    put1(b, '(');
    p_str(b, "epoch");
    p_int(b, -1);
    p_str(b, "model");
    p_module_begin(b, "models.yolo", "Model");
    p_str(b, "_parameters");
    p_odict(b);
    put1(b, 'q');
    put1(b, 9);
    put1(b, '(');
    p_str(b, "w");
    p_tensor(b, "FloatStorage", "0", 24, 0, 3, (long[]){2, 3, 4}, (long[]){12, 4, 1});
    put1(b, 'u');
    p_str(b, "_buffers");
    p_odict(b);
    put1(b, '(');
    p_str(b, "e");
    p_tensor(b, "FloatStorage", "0", 24, 1, 2, (long[]){2, 3}, (long[]){0, 1});
    p_str(b, "np");
    p_tensor(b, "FloatStorage", "0", 24, 0, 1, (long[]){2}, (long[]){1});
    put1(b, 'u');
    p_str(b, "_non_persistent_buffers_set");
    p_global(b, "__builtin__", "set");
    put1(b, ']');
    p_str(b, "np");
    put1(b, 'a');
    put1(b, 0x85);
    put1(b, 'R');
    p_str(b, "_modules");
    p_odict(b);
    put1(b, '(');
    p_str(b, "sub");
    p_module_begin(b, "models.common", "Conv");
    p_str(b, "_parameters");
    p_odict(b);
    put1(b, '(');
    p_str(b, "t");
    p_tensor(b, "FloatStorage", "0", 24, 0, 2, (long[]){4, 3}, (long[]){1, 4});
    p_str(b, "o");
    p_global(b, "torch._utils", "_rebuild_parameter");
    put1(b, '(');
    p_tensor(b, "FloatStorage", "0", 24, 5, 1, (long[]){3}, (long[]){2});
    put1(b, 0x88);
    p_odict(b);
    put1(b, 't');
    put1(b, 'R');
    p_str(b, "none");
    put1(b, 'N');
    p_str(b, "h");
    p_tensor(b, "HalfStorage", "1", 5, 0, 1, (long[]){5}, (long[]){1});
    put1(b, 'u');
    p_str(b, "_buffers");
    p_odict(b);
    put1(b, '(');
    p_str(b, "d");
    p_tensor(b, "DoubleStorage", "2", 2, 0, 1, (long[]){2}, (long[]){1});
    p_str(b, "b");
    p_tensor(b, "BFloat16Storage", "3", 2, 0, 1, (long[]){2}, (long[]){1});
    p_str(b, "n");
    p_tensor(b, "LongStorage", "4", 1, 0, 0, NULL, NULL);
    put1(b, 'u');
    p_str(b, "_modules");
    p_odict(b);
    p_module_end(b);
    p_str(b, "gone");
    put1(b, 'N');
    put1(b, 'u');
    p_str(b, "yaml_file");
    p_str(b, "tiny.yaml");
    p_str(b, "yaml");
    put1(b, '}');
    put1(b, '(');
    p_str(b, "nc");
    p_int(b, 2);
    p_str(b, "floats");
    put1(b, ']');
    put1(b, '(');
    p_float(b, 0.33);
    p_float(b, 1e-05);
    p_float(b, 100000.0);
    p_float(b, 1e16);
    p_float(b, 0.1 + 0.2);
    p_float(b, -2.5);
    put1(b, 'e');
    p_str(b, "odd");
    put1(b, ']');
    put1(b, '(');
    p_str(b, "True");
    p_str(b, "12");
    p_str(b, "nearest");
    put1(b, 'N');
    put1(b, 0x88);
    put1(b, 'e');
    put1(b, 'u');
    p_str(b, "nc");
    p_int(b, 2);
    p_str(b, "names");
    put1(b, '}');
    put1(b, '(');
    p_int(b, 1);
    p_str(b, "dog");
    p_int(b, 0);
    p_str(b, "cat");
    put1(b, 'u');
    p_str(b, "stride");
    put1(b, ']');
    put1(b, '(');
    p_int(b, 8);
    p_float(b, 16.0);
    put1(b, 'e');
    p_module_end(b);
    p_str(b, "ema");
    put1(b, 'N');
    put1(b, 'u');
    put1(b, '.');
}

static void synthetic_storages(zentry *s)
{
    fill_storages();
    s[0] = (zentry){"archive/data/0", f32_store, sizeof f32_store};
    s[1] = (zentry){"archive/data/1", half_store, sizeof half_store};
    s[2] = (zentry){"archive/data/2", f64_store, sizeof f64_store};
    s[3] = (zentry){"archive/data/3", bf16_store, sizeof bf16_store};
    s[4] = (zentry){"archive/data/4", i64_store, sizeof i64_store};
}

static void write_synthetic(const char *path, bool zip64)
{
    buf b = {0};
    zentry s[5];
    synthetic_pickle(&b);
    synthetic_storages(s);
    write_pt(path, &b, s, 5, zip64);
    free(b.d);
}

static void assert_floats(const yc_pt_tensor *t, const float *want, size_t n)
{
    ck_assert_msg(t != NULL, "tensor missing");
    ck_assert_uint_eq(t->numel, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&t->data[i], &want[i], sizeof(float)) == 0,
                      "%s[%zu] = %.9g, expected %.9g", t->name, i, t->data[i], want[i]);
}

START_TEST(synthetic_strides_offsets_dtypes)
{
    const char *path = yc_harness_tmp("%s", _i ? "synthetic64.pt" : "synthetic.pt");
    write_synthetic(path, _i == 1);
    yc_pt_checkpoint *ck = NULL;
    ck_assert_msg(yc_pt_load(&ck, path) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(ck->source, YC_PT_SOURCE_MODEL);
    ck_assert_str_eq(ck->model_class, "models.yolo.Model");
    /* state-dict order: own parameters, own persistent buffers, children */
    const char *order[] = {"w", "e", "sub.t", "sub.o", "sub.h", "sub.d", "sub.b", "sub.n"};
    ck_assert_int_eq(ck->ntensors, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_str_eq(ck->tensors[i].name, order[i]);
    float w[24];
    for (int i = 0; i < 24; i++)
        w[i] = (float)i;
    assert_floats(&ck->tensors[0], w, 24);
    ck_assert_int_eq(ck->tensors[0].ndim, 3);
    ck_assert_int_eq(ck->tensors[0].shape[2], 4);
    assert_floats(yc_pt_find(ck, "e"), (float[]){1, 2, 3, 1, 2, 3}, 6);
    /* transposed: t[i][j] = storage[j*4 + i] */
    assert_floats(yc_pt_find(ck, "sub.t"), (float[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, 12);
    assert_floats(yc_pt_find(ck, "sub.o"), (float[]){5, 7, 9}, 3);
    assert_floats(yc_pt_find(ck, "sub.h"), (float[]){1.0f, -2.5f, 65504.0f, ldexpf(1, -24),
                                                     INFINITY}, 5);
    assert_floats(yc_pt_find(ck, "sub.d"), (float[]){(float)0.1, INFINITY}, 2);
    assert_floats(yc_pt_find(ck, "sub.b"), (float[]){1.0f, -3.0f}, 2);
    const yc_pt_tensor *n = yc_pt_find(ck, "sub.n");
    ck_assert_int_eq(n->ndim, 0);
    ck_assert_uint_eq(n->numel, 1);
    ck_assert_ptr_nonnull(n->idata);
    ck_assert(n->idata[0] == 123456789012LL);
    ck_assert_ptr_null(yc_pt_find(ck, "np"));
    /* attributes */
    ck_assert_int_eq(ck->nc, 2);
    ck_assert_int_eq(ck->nnames, 2);
    ck_assert_str_eq(ck->names[0], "cat");
    ck_assert_str_eq(ck->names[1], "dog");
    ck_assert_int_eq(ck->nstride, 2);
    ck_assert(ck->stride[0] == 8 && ck->stride[1] == 16);
    ck_assert_str_eq(ck->yaml_file, "tiny.yaml");
    const yc_yaml_node *fl = yc_yaml_get(ck->yaml, "floats");
    ck_assert_ptr_nonnull(fl);
    const char *ftext[] = {"0.33", "1.0e-05", "100000.0", "1.0e+16", "0.30000000000000004", "-2.5"};
    ck_assert_int_eq(fl->n, 6);
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(fl->items[i]->value, ftext[i]);
    const yc_yaml_node *odd = yc_yaml_get(ck->yaml, "odd");
    ck_assert(odd->items[0]->quoted && odd->items[1]->quoted && !odd->items[2]->quoted);
    ck_assert(yc_yaml_is_null(odd->items[3]));
    bool bv;
    ck_assert_int_eq(yc_yaml_bool(odd->items[4], &bv), YC_OK);
    ck_assert(bv);
    long nc;
    ck_assert_int_eq(yc_yaml_int(yc_yaml_get(ck->yaml, "nc"), &nc), YC_OK);
    ck_assert_int_eq(nc, 2);
    yc_pt_free(ck);

    /* the same through the weights interface, and its yaml text reads back the same */
    yc_weights *wt = NULL;
    ck_assert_msg(yc_weights_read(path, &wt) == YC_OK, "%s", yc_last_error());
    ck_assert(wt->from_pt);
    ck_assert_int_eq(wt->ntensors, 8);
    ck_assert_ptr_nonnull(wt->model_yaml);
    yc_yaml_node *again = NULL;
    ck_assert_int_eq(yc_yaml_load_string(wt->model_yaml, strlen(wt->model_yaml), "t", &again),
                     YC_OK);
    const yc_yaml_node *odd2 = yc_yaml_get(again, "odd");
    ck_assert_str_eq(odd2->items[0]->value, "True");
    ck_assert(odd2->items[0]->quoted);
    ck_assert_str_eq(odd2->items[2]->value, "nearest");
    const yc_yaml_node *fl2 = yc_yaml_get(again, "floats");
    for (int i = 0; i < 6; i++) {
        double d;
        ck_assert_int_eq(yc_yaml_double(fl2->items[i], &d), YC_OK);
    }
    yc_yaml_free(again);
    yc_model_cfg *cfg = NULL;
    ck_assert_int_ne(yc_weights_model_cfg(wt, 0, &cfg), YC_OK);
    ck_assert_ptr_null(cfg);
    yc_weights_free(wt);
}
END_TEST

/* Storages written big-endian, as a byteorder entry of "big" declares. */
START_TEST(big_endian_storages)
{
    fill_storages();
    buf b = {0};
    put1(&b, 0x80);
    put1(&b, 2);
    p_odict(&b);
    put1(&b, '(');
    p_str(&b, "x");
    p_tensor(&b, "FloatStorage", "0", 2, 0, 1, (long[]){2}, (long[]){1});
    put1(&b, 'u');
    put1(&b, '.');
    zentry s[2] = {{"archive/byteorder", "big", 3}, {"archive/data/0", f32_be, 8}};
    write_pt(yc_harness_tmp("be.pt"), &b, s, 2, false);
    free(b.d);
    yc_pt_checkpoint *ck = NULL;
    ck_assert_msg(yc_pt_load(&ck, yc_harness_tmp("be.pt")) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(ck->source, YC_PT_SOURCE_STATE_DICT);
    assert_floats(&ck->tensors[0], (float[]){1.5f, -2.0f}, 2);
    ck_assert_ptr_null(ck->yaml);
    yc_pt_free(ck);
}
END_TEST

/* A module with one parameter `name` viewing storage "0". */
static void p_small_module(buf *b, const char *name)
{
    p_module_begin(b, "models.yolo", "DetectionModel");
    p_str(b, "_parameters");
    p_odict(b);
    p_str(b, name);
    p_tensor(b, "FloatStorage", "0", 24, 3, 1, (long[]){2}, (long[]){1});
    put1(b, 's');
    p_str(b, "_buffers");
    p_odict(b);
    p_str(b, "_modules");
    p_odict(b);
    p_module_end(b);
}

/* ckpt['ema'] is preferred to ckpt['model'] (attempt_load); a state dict under 'model' is read as
 * one. */
START_TEST(ema_preferred_and_state_dicts)
{
    fill_storages();
    zentry s[1] = {{"archive/data/0", f32_store, sizeof f32_store}};
    buf b = {0};
    put1(&b, 0x80);
    put1(&b, 2);
    put1(&b, '}');
    put1(&b, '(');
    p_str(&b, "model");
    p_small_module(&b, "from_model");
    p_str(&b, "ema");
    p_small_module(&b, "from_ema");
    put1(&b, 'u');
    put1(&b, '.');
    write_pt(yc_harness_tmp("ema.pt"), &b, s, 1, false);
    yc_pt_checkpoint *ck = NULL;
    ck_assert_msg(yc_pt_load(&ck, yc_harness_tmp("ema.pt")) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(ck->source, YC_PT_SOURCE_EMA);
    ck_assert_str_eq(ck->model_class, "models.yolo.DetectionModel");
    ck_assert_int_eq(ck->ntensors, 1);
    ck_assert_str_eq(ck->tensors[0].name, "from_ema");
    assert_floats(&ck->tensors[0], (float[]){3, 4}, 2);
    ck_assert_int_eq(ck->nc, -1);
    yc_pt_free(ck);
    b.n = 0;
    put1(&b, 0x80);
    put1(&b, 2);
    put1(&b, '}');
    p_str(&b, "model");
    p_odict(&b);
    p_str(&b, "model.0.conv.weight");
    p_tensor(&b, "FloatStorage", "0", 24, 0, 4, (long[]){1, 2, 3, 4}, (long[]){24, 12, 4, 1});
    put1(&b, 's');
    put1(&b, 's');
    put1(&b, '.');
    write_pt(yc_harness_tmp("sd.pt"), &b, s, 1, false);
    free(b.d);
    yc_weights *w = NULL;
    ck_assert_msg(yc_weights_read(yc_harness_tmp("sd.pt"), &w) == YC_OK, "%s", yc_last_error());
    ck_assert_str_eq(w->source, "a state dict");
    ck_assert_int_eq(w->ntensors, 1);
    ck_assert_int_eq(w->tensors[0].ndim, 4);
    yc_model_cfg *cfg = NULL;
    ck_assert_int_eq(yc_weights_model_cfg(w, 0, &cfg), YC_EUSAGE);
    ck_assert(strstr(yc_last_error(), "sd.pt has no embedded model config: give --cfg"));
    yc_weights_free(w);
}
END_TEST

#endif /* !YC_TEST_SHARED */

/* ---- hostile and malformed files ------------------------------------------------------------ */

/* The load must fail with a message (and, under valgrind, touch nothing out of bounds). */
static void expect_failure(const char *path, const char *needle)
{
    yc_error_clear();
    yc_pt_checkpoint *ck = NULL;
    int st = yc_pt_load(&ck, path);
    ck_assert_msg(st != YC_OK, "%s loaded, expected an error containing '%s'", path,
                  needle ? needle : "");
    ck_assert_ptr_null(ck);
    ck_assert(yc_last_error()[0] != '\0');
    if (needle)
        ck_assert_msg(strstr(yc_last_error(), needle), "message '%s' lacks '%s'", yc_last_error(),
                      needle);
    yc_weights *w = NULL;
    ck_assert_int_ne(yc_weights_read(path, &w), YC_OK);
    ck_assert_ptr_null(w);
}

#ifndef YC_TEST_SHARED

/* A .pt whose data.pkl is `pkl` (PROTO 2 prepended) and whose only storage is the float one. */
static void expect_pickle_failure(const char *name, const void *pkl, size_t len,
                                  const char *needle)
{
    buf b = {0};
    put1(&b, 0x80);
    put1(&b, 2);
    put(&b, pkl, len);
    fill_storages();
    zentry s[1] = {{"archive/data/0", f32_store, sizeof f32_store}};
    write_pt(yc_harness_tmp("%s", name), &b, s, 1, false);
    free(b.d);
    expect_failure(yc_harness_tmp("%s", name), needle);
}

START_TEST(truncated_and_corrupted_archives)
{
    const char *good = yc_harness_tmp("good.pt");
    write_synthetic(good, false);
    char *data;
    size_t size;
    ck_assert_int_eq(yc_read_file(good, &data, &size), YC_OK);
    /* every truncation fails cleanly */
    for (size_t len = 0; len < size; len += (len + 100 > size ? 1 : 7)) {
        ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("cut.pt"), data, len), YC_OK);
        expect_failure(yc_harness_tmp("cut.pt"), NULL);
    }
    /* the end record's central directory offset and an entry's local header offset */
    size_t eocd = size - 22;
    char *bad = malloc(size);
    ck_assert_ptr_nonnull(bad);
    memcpy(bad, data, size);
    memcpy(bad + eocd + 16, "\xff\xff\xff\x7f", 4);
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("badcd.pt"), bad, size), YC_OK);
    expect_failure(yc_harness_tmp("badcd.pt"), "central directory");
    uint32_t cd_off;
    memcpy(&cd_off, data + eocd + 16, 4);
    memcpy(bad, data, size);
    memcpy(bad + cd_off + 42, "\x00\x00\x00\x70", 4);
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("badlocal.pt"), bad, size), YC_OK);
    expect_failure(yc_harness_tmp("badlocal.pt"), "outside the file");
    /* a huge entry size */
    memcpy(bad, data, size);
    memcpy(bad + cd_off + 20, "\xf0\xff\xff\xff", 4);
    memcpy(bad + cd_off + 24, "\xf0\xff\xff\xff", 4);
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("huge.pt"), bad, size), YC_OK);
    expect_failure(yc_harness_tmp("huge.pt"), "runs past");
    /* a flipped storage byte: CRC mismatch (the float storage holds 1.0f at byte 4) */
    memcpy(bad, data, size);
    unsigned char one[4] = {0, 0, 0x80, 0x3F};
    char *hit = memmem(bad, size, one, 4);
    ck_assert_ptr_nonnull(hit);
    hit[0] ^= 1;
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("crc.pt"), bad, size), YC_OK);
    expect_failure(yc_harness_tmp("crc.pt"), "CRC");
    /* random byte flips: success or a clean error, never a crash */
    uint64_t rng = 12345;
    for (int iter = 0; iter < 400; iter++) {
        memcpy(bad, data, size);
        for (int k = 0; k < 1 + iter % 4; k++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            bad[(rng >> 33) % size] ^= (char)(1 + ((rng >> 20) & 0xFE));
        }
        ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("fuzz.pt"), bad, size), YC_OK);
        yc_pt_checkpoint *ck = NULL;
        if (yc_pt_load(&ck, yc_harness_tmp("fuzz.pt")) == YC_OK)
            yc_pt_free(ck);
        else
            ck_assert(yc_last_error()[0] != '\0');
    }
    free(bad);
    free(data);
}
END_TEST

START_TEST(archive_kinds_refused)
{
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("empty.pt"), "", 0), YC_OK);
    expect_failure(yc_harness_tmp("empty.pt"), "not a torch checkpoint");
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("text.pt"), "hello world\n", 12), YC_OK);
    expect_failure(yc_harness_tmp("text.pt"), "not a torch checkpoint");
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("legacy.pt"), "\x80\x02\x8a\x0a", 4),
                     YC_OK);
    expect_failure(yc_harness_tmp("legacy.pt"), "legacy");
    expect_failure(yc_harness_tmp("does-not-exist.pt"), "cannot open");
    /* TorchScript */
    zentry ts[2] = {{"m/data.pkl", "\x80\x02N.", 4}, {"m/constants.pkl", "\x80\x02N.", 4}};
    write_zip(yc_harness_tmp("script.pt"), ts, 2, 0, false);
    expect_failure(yc_harness_tmp("script.pt"), "TorchScript");
    /* a zip without data.pkl, and a compressed entry */
    zentry other[1] = {{"readme.txt", "hi", 2}};
    write_zip(yc_harness_tmp("other.pt"), other, 1, 0, false);
    expect_failure(yc_harness_tmp("other.pt"), "data.pkl");
    zentry packed[1] = {{"archive/data.pkl", "\x80\x02N.", 4}};
    write_zip(yc_harness_tmp("deflate.pt"), packed, 1, 8, false);
    expect_failure(yc_harness_tmp("deflate.pt"), "compressed");
    /* duplicate entry names */
    zentry dup[2] = {{"archive/data.pkl", "\x80\x02N.", 4}, {"archive/data.pkl", "\x80\x02N.", 4}};
    write_zip(yc_harness_tmp("dup.pt"), dup, 2, 0, false);
    expect_failure(yc_harness_tmp("dup.pt"), "twice");
}
END_TEST

#define PICKLE_FAILS(name, lit, needle) expect_pickle_failure(name, lit, sizeof(lit) - 1, needle)

START_TEST(hostile_pickles)
{
    /* not checkpoints */
    PICKLE_FAILS("none.pt", "N.", "not a YOLOv5 checkpoint");
    PICKLE_FAILS("list.pt", "]K\x01" "a.", "not a YOLOv5 checkpoint");
    PICKLE_FAILS("dict.pt", "}X\x05\x00\x00\x00" "epochK\x01s.", "not a YOLOv5 checkpoint");
    /* opcode-level errors name the byte offset */
    PICKLE_FAILS("unknown.pt", "N\xff.", "pickle byte 3");
    PICKLE_FAILS("nostop.pt", "]]", "before STOP");
    PICKLE_FAILS("memo.pt", "h\x07.", "memo entry 7");
    PICKLE_FAILS("bigmemo.pt", "Nr\xff\xff\xff\xff.", "memo index");
    PICKLE_FAILS("underflow.pt", "\x85.", "underflow");
    PICKLE_FAILS("hugestr.pt", "X\xff\xff\xff\xff" "abc.", "string of");
    PICKLE_FAILS("trunc.pt", "X\x10\x00\x00\x00" "abc", "truncated");
    PICKLE_FAILS("text.pt", "I01\n.", "not supported");
    PICKLE_FAILS("proto.pt", "\x80\x09N.", "protocol 9");
    PICKLE_FAILS("oddict.pt", "(Nd.", "odd number");
    PICKLE_FAILS("listkey.pt", "}]Ns.", "cannot be a dict key");
    PICKLE_FAILS("appendint.pt", "NNa.", "not a list");
    /* os.system is refused, not run */
    char marker[1024];
    snprintf(marker, sizeof marker, "%s", yc_harness_tmp("pwned"));
    buf b = {0};
    p_global(&b, "posix", "system");
    put1(&b, '(');
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "touch %s", marker);
    p_str(&b, cmd);
    put1(&b, 't');
    put1(&b, 'R');
    put1(&b, '.');
    expect_pickle_failure("system.pt", b.d, b.n, "refusing to call posix.system");
    b.n = 0;
    p_global(&b, "os", "system");
    p_str(&b, cmd);
    put1(&b, 0x85);
    put1(&b, 'R');
    put1(&b, '.');
    expect_pickle_failure("os.pt", b.d, b.n, "refusing to call os.system");
    b.n = 0;
    p_str(&b, "builtins");
    p_str(&b, "eval");
    put1(&b, 0x93);
    p_str(&b, "1");
    put1(&b, 0x85);
    put1(&b, 'R');
    put1(&b, '.');
    expect_pickle_failure("eval.pt", b.d, b.n, "refusing to call builtins.eval");
    ck_assert(!yc_file_exists(marker));
    /* getattr is refused but on a class of YOLOv5's models package with a plain name: how a
     * segmentation checkpoint stores Segment.detect = Detect.forward (an opaque object) */
    const char *const getattr_cases[][3] = {{"posix", "system", "x"},
                                            {"models.yolo", "Detect", "__init__"},
                                            {"models.yolo", "Detect", "forward"}};
    for (int k = 0; k < 3; k++) {
        b.n = 0;
        p_global(&b, "builtins", "getattr");
        p_global(&b, getattr_cases[k][0], getattr_cases[k][1]);
        p_str(&b, getattr_cases[k][2]);
        put1(&b, 0x86);
        put1(&b, 'R');
        put1(&b, '.');
        yc_pickle *gp = NULL;
        const yc_pk_value *gr = NULL;
        int gst = yc_pk_load(&gp, &gr, b.d, b.n, NULL);
        if (k < 2) {
            ck_assert_int_ne(gst, YC_OK);
            ck_assert_msg(strstr(yc_last_error(), "refusing to call builtins.getattr"), "%s",
                          yc_last_error());
        } else {
            ck_assert_msg(gst == YC_OK, "%s", yc_last_error());
            char gd[100];
            yc_pk_describe(gr, gd, sizeof gd);
            ck_assert_str_eq(gd, "object builtins.getattr");
        }
        yc_pk_free(gp);
    }
    /* deep MARK nesting, and deeply nested lists as a model yaml */
    b.n = 0;
    for (int i = 0; i < 100000; i++)
        put1(&b, '(');
    put1(&b, '.');
    expect_pickle_failure("marks.pt", b.d, b.n, "nested MARKs");
    b.n = 0;
    p_module_begin(&b, "models.yolo", "Model");
    p_str(&b, "_parameters");
    put1(&b, '}');
    p_str(&b, "_buffers");
    put1(&b, '}');
    p_str(&b, "_modules");
    put1(&b, '}');
    p_str(&b, "yaml");
    put1(&b, '}');
    p_str(&b, "deep");
    for (int i = 0; i < 50000; i++)
        put1(&b, ']');
    for (int i = 0; i < 49999; i++)
        put1(&b, 'a');
    put1(&b, 's');
    p_module_end(&b);
    put1(&b, '.');
    expect_pickle_failure("deep.pt", b.d, b.n, "nested deeper");
    /* a module that contains itself (memo recursion) */
    b.n = 0;
    p_global(&b, "models.yolo", "Model");
    put1(&b, ')');
    put1(&b, 0x81);
    put1(&b, 'q');
    put1(&b, 1);
    put1(&b, '}');
    put1(&b, '(');
    p_str(&b, "_parameters");
    put1(&b, '}');
    p_str(&b, "_buffers");
    put1(&b, '}');
    p_str(&b, "_modules");
    put1(&b, '}');
    p_str(&b, "self");
    put1(&b, 'h');
    put1(&b, 1);
    put1(&b, 's');
    p_module_end(&b);
    put1(&b, '.');
    expect_pickle_failure("selfref.pt", b.d, b.n, "nested deeper");
    /* a list containing itself as a checkpoint */
    PICKLE_FAILS("cycle.pt", "]q\x00h\x00" "a.", "not a YOLOv5 checkpoint");
    free(b.d);
}
END_TEST

/* {'x': tensor} with a chosen persistent id and view. */
static void tensor_case(const char *name, const char *type, const char *key, long numel,
                        long offset, int ndim, const long *size, const long *stride,
                        const char *needle)
{
    buf b = {0};
    put1(&b, '}');
    p_str(&b, "x");
    p_tensor(&b, type, key, numel, offset, ndim, size, stride);
    put1(&b, 's');
    put1(&b, '.');
    expect_pickle_failure(name, b.d, b.n, needle);
    free(b.d);
}

START_TEST(hostile_tensors)
{
    tensor_case("t1.pt", "FloatStorage", "0", 24, 20, 1, (long[]){8}, (long[]){1}, "reaches");
    tensor_case("t2.pt", "FloatStorage", "0", 24, 0, 2, (long[]){5, 5}, (long[]){5, 1},
                "reaches");
    tensor_case("t3.pt", "FloatStorage", "0", 2000000000, 0, 1, (long[]){1}, (long[]){1},
                "bytes, not");
    tensor_case("t4.pt", "FloatStorage", "9", 24, 0, 1, (long[]){1}, (long[]){1}, "missing");
    tensor_case("t5.pt", "FloatStorage", "..", 24, 0, 1, (long[]){1}, (long[]){1},
                "bad storage key");
    tensor_case("t6.pt", "ComplexFloatStorage", "0", 24, 0, 1, (long[]){1}, (long[]){1},
                "unsupported storage type");
    tensor_case("t7.pt", "FloatStorage", "0", 24, 0, 3, (long[]){100000, 100000, 100000},
                (long[]){0, 0, 0}, "exceeds");
    tensor_case("t8.pt", "FloatStorage", "0", 24, 0, 2, (long[]){3, 2000000000},
                (long[]){2000000000, 2000000000}, NULL);
    tensor_case("t9.pt", "HalfStorage", "0", 24, 0, 1, (long[]){1}, (long[]){1}, "bytes, not");
    /* negative sizes and strides */
    tensor_case("t10.pt", "FloatStorage", "0", 24, 0, 1, (long[]){-1}, (long[]){1}, "bad size");
    /* a storage used with two types */
    buf b = {0};
    put1(&b, '}');
    put1(&b, '(');
    p_str(&b, "x");
    p_tensor(&b, "FloatStorage", "0", 24, 0, 1, (long[]){1}, (long[]){1});
    p_str(&b, "y");
    p_tensor(&b, "IntStorage", "0", 24, 0, 1, (long[]){1}, (long[]){1});
    put1(&b, 'u');
    put1(&b, '.');
    expect_pickle_failure("twotypes.pt", b.d, b.n, "used as");
    /* a persistent id that is not a storage */
    b.n = 0;
    put1(&b, '}');
    p_str(&b, "x");
    p_global(&b, "torch._utils", "_rebuild_tensor_v2");
    put1(&b, '(');
    p_str(&b, "nope");
    put1(&b, 'Q');
    p_int(&b, 0);
    put1(&b, ')');
    put1(&b, ')');
    put1(&b, 0x89);
    put1(&b, 'N');
    put1(&b, 't');
    put1(&b, 'R');
    put1(&b, 's');
    put1(&b, '.');
    expect_pickle_failure("persid.pt", b.d, b.n, "not a torch storage");
    free(b.d);
}
END_TEST

/* The pickle VM alone on random mutations of a real pickle: never a crash. */
START_TEST(pickle_mutations)
{
    buf b = {0};
    synthetic_pickle(&b);
    unsigned char *m = malloc(b.n);
    ck_assert_ptr_nonnull(m);
    uint64_t rng = 99;
    yc_pk_limits lim;
    yc_pk_default_limits(&lim);
    lim.max_values = 20000;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(m, b.d, b.n);
        size_t len = b.n;
        for (int k = 0; k < 1 + iter % 3; k++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            m[(rng >> 33) % b.n] = (unsigned char)(rng >> 13);
        }
        if (iter % 5 == 0)
            len = (size_t)((rng >> 7) % b.n);
        yc_pickle *p = NULL;
        const yc_pk_value *root = NULL;
        if (yc_pk_load(&p, &root, m, len, &lim) == YC_OK) {
            char d[200];
            yc_pk_describe(root, d, sizeof d);
            yc_pk_free(p);
        } else {
            ck_assert_ptr_null(p);
            ck_assert(strstr(yc_last_error(), "pickle byte"));
        }
    }
    /* the same mutations inside .pt files (valid CRCs, so the checkpoint layer sees them) */
    fill_storages();
    zentry s[5];
    synthetic_storages(s);
    for (int iter = 0; iter < 300; iter++) {
        buf mb = {0};
        put(&mb, b.d, b.n);
        for (int k = 0; k < 1 + iter % 3; k++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            mb.d[(rng >> 33) % mb.n] = (unsigned char)(rng >> 13);
        }
        write_pt(yc_harness_tmp("mut.pt"), &mb, s, 5, false);
        free(mb.d);
        yc_pt_checkpoint *ck = NULL;
        if (yc_pt_load(&ck, yc_harness_tmp("mut.pt")) == YC_OK)
            yc_pt_free(ck);
        else
            ck_assert(yc_last_error()[0] != '\0');
    }
    /* the value limit */
    yc_pickle *p = NULL;
    const yc_pk_value *root = NULL;
    lim.max_values = 50;
    ck_assert_int_ne(yc_pk_load(&p, &root, b.d, b.n, &lim), YC_OK);
    ck_assert(strstr(yc_last_error(), "values"));
    free(m);
    free(b.d);
}
END_TEST

static void p_short_str(buf *b, const char *s)
{
    put1(b, 0x8c);
    put1(b, (unsigned)strlen(s));
    put(b, s, strlen(s));
}

/* Protocol 4/5 opcodes: FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL, LONG1, sets, bytes,
 * NEWOBJ_EX, and the values they make. */
START_TEST(pickle_protocol4_opcodes)
{
    buf b = {0};
    put1(&b, 0x80);
    put1(&b, 4);
    put1(&b, 0x95);
    put_le(&b, 0, 8);
    p_short_str(&b, "collections");
    put1(&b, 0x94);
    p_short_str(&b, "OrderedDict");
    put1(&b, 0x94);
    put1(&b, 0x93);
    put1(&b, ')');
    put1(&b, 'R');
    p_short_str(&b, "a");
    put1(&b, 'K');
    put1(&b, 1);
    put1(&b, 's');
    p_short_str(&b, "b");
    put1(&b, 0x8a);
    put1(&b, 8);
    put(&b, "\xfe\xff\xff\xff\xff\xff\xff\xff", 8);
    put1(&b, 's');
    p_short_str(&b, "c");
    put1(&b, 0x8a);
    put1(&b, 9);
    put(&b, "\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9);
    put1(&b, 's');
    p_short_str(&b, "d");
    put1(&b, 0x8f);
    put1(&b, '(');
    put1(&b, 'K');
    put1(&b, 1);
    put1(&b, 'K');
    put1(&b, 2);
    put1(&b, 0x90);
    put1(&b, 's');
    p_short_str(&b, "e");
    put1(&b, '(');
    put1(&b, 'N');
    put1(&b, 0x91);
    put1(&b, 's');
    p_short_str(&b, "f");
    put1(&b, 'C');
    put1(&b, 3);
    put(&b, "xyz", 3);
    put1(&b, 's');
    p_short_str(&b, "g");
    put1(&b, 'N');
    put1(&b, 0x88);
    put1(&b, 0x86);
    put1(&b, 's');
    p_short_str(&b, "h");
    p_short_str(&b, "m");
    p_short_str(&b, "C");
    put1(&b, 0x93);
    put1(&b, ')');
    put1(&b, '}');
    put1(&b, 0x92);
    put1(&b, 's');
    p_short_str(&b, "i");
    put1(&b, 'h');
    put1(&b, 0);
    put1(&b, 's');
    put1(&b, '.');
    /* the frame covers the rest */
    uint64_t frame = b.n - 11;
    for (int i = 0; i < 8; i++)
        b.d[3 + i] = (unsigned char)(frame >> (8 * i));
    yc_pickle *p = NULL;
    const yc_pk_value *r = NULL;
    ck_assert_msg(yc_pk_load(&p, &r, b.d, b.n, NULL) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(r->kind, YC_PK_DICT);
    ck_assert_int_eq(r->u.dict.n, 9);
    ck_assert_int_eq(yc_pk_dict_get(r, "a")->u.i, 1);
    ck_assert_int_eq(yc_pk_dict_get(r, "b")->u.i, -2);
    ck_assert_int_eq(yc_pk_dict_get(r, "c")->kind, YC_PK_BIGINT);
    ck_assert_int_eq(yc_pk_dict_get(r, "d")->kind, YC_PK_SET);
    ck_assert_uint_eq(yc_pk_dict_get(r, "d")->u.seq.n, 2);
    ck_assert_uint_eq(yc_pk_dict_get(r, "e")->u.seq.n, 1);
    ck_assert_int_eq(yc_pk_dict_get(r, "f")->kind, YC_PK_BYTES);
    ck_assert_uint_eq(yc_pk_dict_get(r, "g")->u.seq.n, 2);
    char d[100];
    yc_pk_describe(yc_pk_dict_get(r, "h"), d, sizeof d);
    ck_assert_str_eq(d, "object m.C");
    ck_assert(yc_pk_is_str(yc_pk_dict_get(r, "i"), "collections"));
    yc_pk_free(p);
    /* a frame longer than the data */
    b.d[3] = 0xff;
    b.d[10] = 0x7f;
    ck_assert_int_ne(yc_pk_load(&p, &r, b.d, b.n, NULL), YC_OK);
    ck_assert(strstr(yc_last_error(), "pickle byte 2 (FRAME)"));
    free(b.d);
}
END_TEST

#else /* YC_TEST_SHARED */

/* ---- the released yolov5n.pt ---------------------------------------------------------------- */

START_TEST(yolov5n_pt_matches_safetensors)
{
    const char *pt = shared_weights("pt"), *st = shared_weights("safetensors");
    yc_weights *w = NULL;
    ck_assert_msg(yc_weights_read(pt, &w) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(w->ntensors, 349);
    ck_assert_str_eq(w->source, "ckpt['model'] (models.yolo.Model)");
    yc_st_file *f = NULL;
    ck_assert_int_eq(yc_st_open(&f, st), YC_OK);
    ck_assert_int_eq(yc_st_count(f), 349);
    for (int i = 0; i < yc_st_count(f); i++) {
        const yc_st_tensor *r = yc_st_get(f, i);
        const yc_weights_tensor *t = yc_weights_find(w, r->name);
        ck_assert_msg(t != NULL, "%s missing from the .pt", r->name);
        ck_assert_int_eq(t->ndim, r->ndim);
        for (int d = 0; d < r->ndim; d++)
            ck_assert_int_eq(t->shape[d], r->shape[d]);
        float *ref = malloc((r->numel ? r->numel : 1) * sizeof *ref);
        ck_assert_ptr_nonnull(ref);
        ck_assert_int_eq(yc_st_read_f32(f, r, ref, r->numel), YC_OK);
        ck_assert_msg(memcmp(ref, t->data, r->numel * sizeof *ref) == 0, "%s differs", r->name);
        free(ref);
        ck_assert((r->dtype == YC_ST_I64) == (t->idata != NULL));
    }
    yc_st_close(f);
    ck_assert_int_eq(w->nc, 80);
    ck_assert_int_eq(w->nnames, 80);
    ck_assert_str_eq(w->names[0], "person");
    ck_assert_str_eq(w->names[79], "toothbrush");
    ck_assert_int_eq(w->nstride, 3);
    ck_assert(w->stride[0] == 8 && w->stride[1] == 16 && w->stride[2] == 32);
    ck_assert_str_eq(w->model_name, "yolov5n.yaml");

    /* the embedded config gives yolov5n's layer table */
    yc_model_cfg *cfg = NULL, *ref_cfg = NULL;
    ck_assert_msg(yc_weights_model_cfg(w, 0, &cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_ptr_nonnull(cfg->text);
    char path[1024];
    ck_assert_int_eq(yc_model_cfg_find("yolov5n", path, sizeof path), YC_OK);
    ck_assert_int_eq(yc_model_cfg_load(&ref_cfg, path, 0), YC_OK);
    ck_assert_int_eq(cfg->nlayers, ref_cfg->nlayers);
    ck_assert_str_eq(cfg->name, "YOLOv5n");
    for (int i = 0; i < cfg->nlayers; i++) {
        ck_assert_str_eq(cfg->layers[i].args_text, ref_cfg->layers[i].args_text);
        ck_assert_int_eq(cfg->layers[i].n, ref_cfg->layers[i].n);
        ck_assert_int_eq(cfg->layers[i].c2, ref_cfg->layers[i].c2);
        ck_assert_int_eq(cfg->layers[i].from[0], ref_cfg->layers[i].from[0]);
    }
    yc_model_cfg_free(ref_cfg);
    yc_model *m = NULL;
    ck_assert_int_eq(yc_model_new(&m, cfg), YC_OK);
    ck_assert_uint_eq(yc_model_count_params(m), 1872157);
    yc_model_free(m);
    /* the yaml text of the metadata gives the same config */
    ck_assert_int_eq(yc_model_cfg_parse(&cfg, w->model_yaml, strlen(w->model_yaml), "x.yaml", 0),
                     YC_OK);
    ck_assert_int_eq(yc_model_new(&m, cfg), YC_OK);
    ck_assert_uint_eq(yc_model_count_params(m), 1872157);
    yc_model_free(m);
    yc_weights_free(w);

    /* the plain safetensors file: no config, nc from the Detect head */
    ck_assert_int_eq(yc_weights_read(st, &w), YC_OK);
    ck_assert_int_eq(w->nc, -1);
    int nc = 0;
    ck_assert_int_eq(yc_weights_infer_nc(w, &nc), YC_OK);
    ck_assert_int_eq(nc, 80);
    ck_assert_int_eq(yc_weights_model_cfg(w, 0, &cfg), YC_EUSAGE);
    ck_assert(strstr(yc_last_error(), "has no embedded model config: give --cfg"));
    yc_weights_free(w);
}
END_TEST

/* Truncated copies of the real file fail cleanly. */
START_TEST(yolov5n_pt_truncated)
{
    const char *pt = shared_weights("pt");
    char *data;
    size_t size;
    ck_assert_int_eq(yc_read_file(pt, &data, &size), YC_OK);
    const size_t cuts[] = {10, 1000, 82000, 90000, size / 2, size - 1000, size - 100, size - 23,
                           size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("cut5n.pt"), data, cuts[i]), YC_OK);
        expect_failure(yc_harness_tmp("cut5n.pt"), NULL);
    }
    /* a corrupted pickle byte inside data.pkl (stored first, after a 30+16+pad header) */
    data[200] = (char)0xff;
    ck_assert_int_eq(yc_write_file_atomic(yc_harness_tmp("bad5n.pt"), data, size), YC_OK);
    expect_failure(yc_harness_tmp("bad5n.pt"), "CRC");
    free(data);
}
END_TEST

#endif /* YC_TEST_SHARED */

/* ---- loading into a model ------------------------------------------------------------------- */

static yc_model *new_model(const char *name, int nc, yc_backend *be)
{
    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    ck_assert_int_eq(yc_model_cfg_find(name, path, sizeof path), YC_OK);
    ck_assert_int_eq(yc_model_cfg_load(&cfg, path, nc), YC_OK);
    ck_assert_int_eq(yc_model_new(&m, cfg), YC_OK);
    ck_assert_int_eq(yc_model_alloc(m, be), YC_OK);
    return m;
}

#ifdef YC_TEST_SHARED

START_TEST(apply_strict_and_transfer)
{
    const char *pt = shared_weights("pt");
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_cpu_new(&be, 1), YC_OK);
    yc_weights *w = NULL;
    ck_assert_int_eq(yc_weights_read(pt, &w), YC_OK);
    yc_model *m = new_model("yolov5n", 0, be);
    yc_weights_report rep;
    ck_assert_msg(yc_weights_apply(w, m, YC_WEIGHTS_STRICT, false, &rep) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_int_eq(rep.transferred, 349);
    ck_assert_int_eq(rep.total, 349);
    ck_assert_int_eq(rep.unexpected, 0);
    /* every parameter reads back as written */
    for (int i = 0; i < m->nparams; i++) {
        const yc_weights_tensor *t = yc_weights_find(w, m->params[i].name);
        float *got = malloc(m->params[i].numel * sizeof *got);
        ck_assert_ptr_nonnull(got);
        ck_assert_int_eq(yc_tensor_get_f32(be, &m->params[i].t, got), YC_OK);
        ck_assert(memcmp(got, t->data, m->params[i].numel * sizeof *got) == 0);
        free(got);
    }
    const float grid[] = {1.25f, 1.625f, 2.0f, 3.75f, 4.125f, 2.875f};
    for (int i = 0; i < 6; i++)
        ck_assert(m->anchors[i] == grid[i]);
    const yc_weights_tensor *nb = yc_weights_find(w, "model.0.bn.num_batches_tracked");
    ck_assert(m->num_batches[0] == nb->idata[0]);
    yc_model_free(m);

    /* another class count: the Detect convolutions are skipped */
    m = new_model("yolov5n", 20, be);
    ck_assert_int_eq(yc_weights_apply(w, m, YC_WEIGHTS_TRANSFER, false, &rep), YC_OK);
    ck_assert_int_eq(rep.transferred, 343);
    ck_assert_int_eq(rep.total, 349);
    ck_assert_int_eq(rep.mismatched, 6);
    ck_assert_int_eq(rep.unexpected, 0);
    ck_assert_str_eq(rep.first_skipped, "model.24.m.0.weight");
    ck_assert_int_eq(yc_weights_apply(w, m, YC_WEIGHTS_TRANSFER, true, &rep), YC_OK);
    ck_assert_int_eq(rep.transferred, 342);
    ck_assert_int_eq(rep.excluded, 1);
    ck_assert_int_ne(yc_weights_apply(w, m, YC_WEIGHTS_STRICT, false, &rep), YC_OK);
    ck_assert(strstr(yc_last_error(), "model.24.m.0.weight"));
    yc_model_free(m);

    /* another model size: nothing with another shape is copied */
    m = new_model("yolov5s", 0, be);
    ck_assert_int_eq(yc_weights_apply(w, m, YC_WEIGHTS_TRANSFER, false, &rep), YC_OK);
    ck_assert_int_eq(rep.total, 349);
    ck_assert(rep.transferred < 349 && rep.mismatched > 0);
    yc_model_free(m);

    /* export (FP32 and FP16) and read back: identical values, the same metadata */
    for (int half = 0; half < 2; half++) {
        const char *out = yc_harness_tmp("%s", half ? "n16.safetensors" : "n32.safetensors");
        ck_assert_int_eq(yc_weights_write_safetensors(w, out, half), YC_OK);
        yc_weights *e = NULL;
        ck_assert_msg(yc_weights_read(out, &e) == YC_OK, "%s", yc_last_error());
        ck_assert_int_eq(e->ntensors, 349);
        for (int i = 0; i < w->ntensors; i++) {
            const yc_weights_tensor *a = &w->tensors[i], *b = &e->tensors[i];
            ck_assert_str_eq(a->name, b->name);
            ck_assert(memcmp(a->data, b->data, a->numel * sizeof *a->data) == 0);
        }
        ck_assert_int_eq(e->nc, 80);
        ck_assert_int_eq(e->nnames, 80);
        ck_assert_str_eq(e->names[5], "bus");
        ck_assert_int_eq(e->nstride, 3);
        ck_assert(e->stride[2] == 32);
        ck_assert_str_eq(e->model_name, "yolov5n.yaml");
        yc_model_cfg *cfg = NULL;
        ck_assert_int_eq(yc_weights_model_cfg(e, 0, &cfg), YC_OK);
        ck_assert_str_eq(cfg->name, "YOLOv5n");
        m = NULL;
        ck_assert_int_eq(yc_model_new(&m, cfg), YC_OK);
        ck_assert_int_eq(yc_model_alloc(m, be), YC_OK);
        ck_assert_int_eq(yc_weights_apply(e, m, YC_WEIGHTS_STRICT, false, &rep), YC_OK);
        ck_assert_int_eq(rep.transferred, 349);
        yc_model_free(m);
        yc_weights_free(e);
    }
    yc_weights_free(w);
    yc_backend_free(be);
}
END_TEST

#else /* YC_TEST_SHARED */

/* Without shared files: a model's weights written, read back and loaded into another model. */
START_TEST(model_roundtrip_and_half_rounding)
{
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_cpu_new(&be, 1), YC_OK);
    yc_model *a = new_model("yolov5n", 3, be), *b = new_model("yolov5n", 3, be);
    ck_assert_int_eq(yc_model_init_weights(a, 7), YC_OK);
    a->num_batches[2] = 41;
    const char *names[] = {"a", "b\"quoted\"", "c"};
    yc_weights *w = NULL;
    ck_assert_int_eq(yc_weights_from_model(a, names, 3, &w), YC_OK);
    ck_assert_int_eq(w->ntensors, a->ndict + 1);
    ck_assert_str_eq(w->tensors[w->ntensors - 7].name, "model.24.anchors");
    ck_assert_int_eq(yc_weights_write_safetensors(w, yc_harness_tmp("rt.safetensors"), false),
                     YC_OK);
    yc_weights_free(w);
    ck_assert_int_eq(yc_weights_read(yc_harness_tmp("rt.safetensors"), &w), YC_OK);
    ck_assert_int_eq(w->nnames, 3);
    ck_assert_str_eq(w->names[1], "b\"quoted\"");
    ck_assert_int_eq(w->nc, 3);
    yc_weights_report rep;
    ck_assert_int_eq(yc_weights_apply(w, b, YC_WEIGHTS_STRICT, false, &rep), YC_OK);
    ck_assert_int_eq(rep.transferred, rep.total);
    ck_assert(b->num_batches[2] == 41);
    for (int i = 0; i < a->nparams; i += 17) {
        size_t n = a->params[i].numel;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        ck_assert(x && y);
        ck_assert_int_eq(yc_tensor_get_f32(be, &a->params[i].t, x), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &b->params[i].t, y), YC_OK);
        ck_assert(memcmp(x, y, n * sizeof *x) == 0);
        free(x);
        free(y);
    }
    /* a shape mismatch fails STRICT and leaves the model as it was */
    yc_model *c = new_model("yolov5n", 4, be);
    ck_assert_int_eq(yc_model_init_weights(c, 1), YC_OK);
    size_t n0 = c->params[0].numel;
    float *before = malloc(n0 * sizeof *before), *after = malloc(n0 * sizeof *after);
    ck_assert(before && after);
    ck_assert_int_eq(yc_tensor_get_f32(be, &c->params[0].t, before), YC_OK);
    ck_assert_int_ne(yc_weights_apply(w, c, YC_WEIGHTS_STRICT, false, &rep), YC_OK);
    ck_assert(strstr(yc_last_error(), "model.24.m.0.weight"));
    ck_assert_int_eq(yc_tensor_get_f32(be, &c->params[0].t, after), YC_OK);
    ck_assert(memcmp(before, after, n0 * sizeof *before) == 0);
    free(before);
    free(after);
    yc_model_free(c);
    yc_weights_free(w);
    yc_model_free(a);
    yc_model_free(b);

    /* FP16 export rounding: nearest even, subnormals, overflow */
    yc_weights h = {0};
    yc_weights_tensor ht = {0};
    float v[] = {1.0f, 65520.0f, 1e-8f, ldexpf(1, -24), 0.1f, 2049.0f, 2051.0f, -3.0e-5f};
    float want[] = {1.0f, INFINITY, 0.0f, ldexpf(1, -24), 0.0999755859375f, 2048.0f, 2052.0f,
                    -503.0f * ldexpf(1, -24)};
    ht.name = "h";
    ht.ndim = 1;
    ht.shape[0] = 8;
    ht.numel = 8;
    ht.data = v;
    h.ntensors = 1;
    h.tensors = &ht;
    h.nc = -1;
    ck_assert_int_eq(yc_weights_write_safetensors(&h, yc_harness_tmp("h.safetensors"), true),
                     YC_OK);
    yc_st_file *f = NULL;
    ck_assert_int_eq(yc_st_open(&f, yc_harness_tmp("h.safetensors")), YC_OK);
    ck_assert_int_eq(yc_st_get(f, 0)->dtype, YC_ST_F16);
    float got[8];
    ck_assert_int_eq(yc_st_read_f32(f, yc_st_get(f, 0), got, 8), YC_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(got[i] == want[i], "%g -> %.9g, expected %.9g", v[i], got[i], want[i]);
    ck_assert_str_eq(yc_st_meta(f, "format"), "yolocl-1");
    yc_st_close(f);
    yc_backend_free(be);
}
END_TEST

/* Metadata errors and a newer format are refused with the key named. */
START_TEST(safetensors_metadata_errors)
{
    float x = 1;
    const struct {
        const char *key, *value, *needle;
    } cases[] = {
        {"nc", "eighty", "metadata nc"},
        {"names", "[\"a\", 3]", "names[1]"},
        {"names", "{not json", "metadata names"},
        {"stride", "[8, \"x\"]", "stride[1]"},
        {"format", "yolocl-9", "newer yolocl"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        yc_st_writer *wr = yc_st_writer_new();
        int64_t shape[1] = {1};
        ck_assert_int_eq(yc_st_writer_add(wr, "x", YC_ST_F32, 1, shape, &x), YC_OK);
        ck_assert_int_eq(yc_st_writer_meta(wr, cases[i].key, cases[i].value), YC_OK);
        ck_assert_int_eq(yc_st_writer_write(wr, yc_harness_tmp("meta.safetensors")), YC_OK);
        yc_st_writer_free(wr);
        yc_weights *w = NULL;
        ck_assert_int_ne(yc_weights_read(yc_harness_tmp("meta.safetensors"), &w), YC_OK);
        ck_assert_ptr_null(w);
        ck_assert_msg(strstr(yc_last_error(), cases[i].needle), "'%s' lacks '%s'", yc_last_error(),
                      cases[i].needle);
    }
}
END_TEST

#endif /* YC_TEST_SHARED */

static Suite *suite(void)
{
    Suite *s = suite_create("ptfile");
#ifdef YC_TEST_SHARED
    TCase *tc = tcase_create("yolov5n");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, yolov5n_pt_matches_safetensors);
    tcase_add_test(tc, yolov5n_pt_truncated);
    tcase_add_test(tc, apply_strict_and_transfer);
    suite_add_tcase(s, tc);
#else
    TCase *tc = tcase_create("synthetic");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, synthetic_strides_offsets_dtypes, 0, 2);
    tcase_add_test(tc, big_endian_storages);
    tcase_add_test(tc, ema_preferred_and_state_dicts);
    tcase_add_test(tc, safetensors_metadata_errors);
    tcase_add_test(tc, model_roundtrip_and_half_rounding);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, truncated_and_corrupted_archives);
    tcase_add_test(tc, archive_kinds_refused);
    tcase_add_test(tc, hostile_pickles);
    tcase_add_test(tc, hostile_tensors);
    tcase_add_test(tc, pickle_mutations);
    tcase_add_test(tc, pickle_protocol4_opcodes);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void)
{
#ifdef YC_TEST_SHARED
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED, "%s not found (the released YOLOv5n weights)",
                            missing);
#endif
    return yc_harness_main(suite(), "ptfile");
}
