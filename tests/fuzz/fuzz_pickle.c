/* Fuzz target: the pickle reader (src/core/pickle.c) and the .pt checkpoint interpreter on top of it
 * (src/core/ptfile.c: persistent ids, _rebuild_tensor_v2 views, modules, state dicts, yaml, names,
 * stride).  The input is data.pkl: it is run by yc_pk_load directly (its value tree is walked and
 * described), then wrapped in a valid torch.save archive (archive/data.pkl, archive/version,
 * archive/byteorder "little", and storages archive/data/0..3 of 64, 16, 8 and 2 bytes) and read
 * as weights (yc_weights_read), so that mutations reach the interpreter without having to fix
 * the zip's CRC-32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_weights_common.h"
#include "log.h"
#include "pickle.h"
#include "zip.h"

/* Visits every value reachable within YC_PK_MAX_DEPTH, as yolocl's walkers do. */
static void walk(const yc_pk_value *v, int depth, size_t *visits)
{
    if (!v || depth > YC_PK_MAX_DEPTH || ++*visits > 100000)
        return;
    char desc[200];
    yc_pk_describe(v, desc, sizeof desc);
    if (strlen(desc) >= sizeof desc)
        fuzz_fail("yc_pk_describe overran its buffer");
    switch (v->kind) {
    case YC_PK_TUPLE:
    case YC_PK_LIST:
    case YC_PK_SET:
        for (size_t i = 0; i < v->u.seq.n; i++)
            walk(v->u.seq.items[i], depth + 1, visits);
        break;
    case YC_PK_DICT:
        for (size_t i = 0; i < v->u.dict.n; i++) {
            walk(v->u.dict.keys[i], depth + 1, visits);
            walk(v->u.dict.values[i], depth + 1, visits);
        }
        (void)yc_pk_dict_get(v, "model");
        break;
    case YC_PK_OBJECT:
        walk(v->u.obj.cls, depth + 1, visits);
        walk(v->u.obj.args, depth + 1, visits);
        walk(v->u.obj.state, depth + 1, visits);
        break;
    case YC_PK_PERSID:
        walk(v->u.persid, depth + 1, visits);
        break;
    case YC_PK_TENSOR:
        if (v->u.tensor->ndim < 0 || v->u.tensor->ndim > YC_PK_MAX_DIMS)
            fuzz_fail("pickled tensor with a bad rank");
        walk(v->u.tensor->storage, depth + 1, visits);
        break;
    case YC_PK_STR:
    case YC_PK_BYTES:
        if (v->u.str.data[v->u.str.len] != '\0')
            fuzz_fail("pickled string not NUL-terminated");
        break;
    default:
        break;
    }
}

/* ---- a stored zip archive in memory ------------------------------------------------------- */

typedef struct zbuf {
    unsigned char *d;
    size_t n, cap;
} zbuf;

static void put(zbuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2;
        unsigned char *d = realloc(b->d, cap);
        if (!d)
            abort();
        b->d = d;
        b->cap = cap;
    }
    if (n)
        memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void le(zbuf *b, uint64_t v, int bytes)
{
    unsigned char x[8];
    for (int i = 0; i < bytes; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    put(b, x, (size_t)bytes);
}

typedef struct zentry {
    const char *name;
    const void *data;
    size_t size;
} zentry;

static void zip_archive(zbuf *b, const zentry *e, int n)
{
    uint64_t offsets[8];
    uint32_t crcs[8];
    for (int i = 0; i < n; i++) {
        offsets[i] = b->n;
        crcs[i] = yc_zip_crc32(0, e[i].data, e[i].size);
        le(b, 0x04034b50, 4);
        le(b, 20, 2);
        le(b, 0, 2);
        le(b, 0, 2);
        le(b, 0, 4);
        le(b, crcs[i], 4);
        le(b, e[i].size, 4);
        le(b, e[i].size, 4);
        le(b, strlen(e[i].name), 2);
        le(b, 0, 2);
        put(b, e[i].name, strlen(e[i].name));
        put(b, e[i].data, e[i].size);
    }
    uint64_t cd = b->n;
    for (int i = 0; i < n; i++) {
        le(b, 0x02014b50, 4);
        le(b, 20, 2);
        le(b, 20, 2);
        le(b, 0, 2);
        le(b, 0, 2);
        le(b, 0, 4);
        le(b, crcs[i], 4);
        le(b, e[i].size, 4);
        le(b, e[i].size, 4);
        le(b, strlen(e[i].name), 2);
        le(b, 0, 2);
        le(b, 0, 2);
        le(b, 0, 2);
        le(b, 0, 2);
        le(b, 0, 4);
        le(b, offsets[i], 4);
        put(b, e[i].name, strlen(e[i].name));
    }
    uint64_t cd_size = b->n - cd;
    le(b, 0x06054b50, 4);
    le(b, 0, 2);
    le(b, 0, 2);
    le(b, (uint64_t)n, 2);
    le(b, (uint64_t)n, 2);
    le(b, cd_size, 4);
    le(b, cd, 4);
    le(b, 0, 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    yc_pickle *p = NULL;
    const yc_pk_value *root = NULL;
    fuzz_begin();
    int st = yc_pk_load(&p, &root, data, size, NULL);
    fuzz_check(st, "yc_pk_load");
    if (!st) {
        size_t visits = 0;
        walk(root, 0, &visits);
        yc_pk_free(p);
    } else if (p) {
        fuzz_fail("yc_pk_load failed but returned a pickle");
    }

    static float f32[16];
    static unsigned char b16[16], b8[8], b2[2];
    for (int i = 0; i < 16; i++)
        f32[i] = (float)i - 4.5f;
    for (int i = 0; i < 16; i++)
        b16[i] = (unsigned char)(0x3C + i);
    memset(b8, 0x40, sizeof b8);
    memset(b2, 0x01, sizeof b2);
    zentry e[] = {
        {"archive/data.pkl", data, size}, {"archive/version", "3\n", 2},
        {"archive/byteorder", "little", 6}, {"archive/data/0", f32, sizeof f32},
        {"archive/data/1", b16, sizeof b16}, {"archive/data/2", b8, sizeof b8},
        {"archive/data/3", b2, sizeof b2},
    };
    zbuf b = {0};
    zip_archive(&b, e, (int)(sizeof e / sizeof *e));
    const char *path = fuzz_write("w.pt", b.d, b.n);
    free(b.d);
    if (!path)
        abort();
    fuzz_weights_file(path);
    return 0;
}
