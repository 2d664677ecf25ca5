/* PyTorch checkpoint reading (see ptfile.h).  References: torch/serialization.py (_save,
 * _load), torch/_utils.py (_rebuild_tensor_v2), torch/nn/modules/module.py (state_dict order),
 * YOLOv5 models/experimental.py (attempt_load). */
#include "ptfile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pickle.h"
#include "zip.h"

/* Deepest module nesting followed (YOLOv5 nests four deep). */
#define MAX_MODULE_DEPTH 64
/* Most nodes of the converted model yaml (shared sub-lists are expanded, so this is capped). */
#define MAX_YAML_NODES 100000
/* Largest data.pkl read, and the most class names. */
#define MAX_PICKLE_BYTES ((size_t)1 << 30)
#define MAX_NAMES 100000
/* Longest storage key (torch numbers them). */
#define MAX_KEY 64

/* A storage as read from the archive (loaded on first use). */
typedef struct storage_slot {
    char *raw;
    yc_pt_dtype dtype;
    size_t numel;
    bool loaded;
} storage_slot;

typedef struct loader {
    const char *path;
    yc_zip *zip;
    /* the archive's top folder ("archive") */
    char prefix[256];
    /* storages are big-endian (the archive's byteorder entry says "big") */
    bool big_endian;
    /* one slot per zip entry, indexed like yc_zip_get */
    storage_slot *slots;
    /* elements that may still be materialised (cap against stride-0 blow-up) */
    size_t elem_budget;
    /* yaml nodes created so far */
    size_t yaml_nodes;
    /* the state-dict name being built while walking modules */
    char name[YC_PT_MAX_NAME];
    /* the result being filled in */
    yc_pt_checkpoint *ck;
    int tensor_cap;
} loader;

static const struct {
    const char *name;
    yc_pt_dtype dtype;
} storage_types[] = {
    {"HalfStorage", YC_PT_F16},    {"BFloat16Storage", YC_PT_BF16}, {"FloatStorage", YC_PT_F32},
    {"DoubleStorage", YC_PT_F64},  {"LongStorage", YC_PT_I64},      {"IntStorage", YC_PT_I32},
    {"ShortStorage", YC_PT_I16},   {"CharStorage", YC_PT_I8},       {"ByteStorage", YC_PT_U8},
    {"BoolStorage", YC_PT_BOOL},   {"UntypedStorage", YC_PT_U8},
};

const char *yc_pt_dtype_name(yc_pt_dtype dt)
{
    static const char *const names[] = {"Half", "BFloat16", "Float", "Double", "Long",
                                        "Int",  "Short",    "Char",  "Byte",   "Bool"};
    return (unsigned)dt < sizeof names / sizeof *names ? names[dt] : "?";
}

static size_t dtype_size(yc_pt_dtype dt)
{
    switch (dt) {
    case YC_PT_F64:
    case YC_PT_I64:
        return 8;
    case YC_PT_F32:
    case YC_PT_I32:
        return 4;
    case YC_PT_F16:
    case YC_PT_BF16:
    case YC_PT_I16:
        return 2;
    default:
        return 1;
    }
}

static bool dtype_is_int(yc_pt_dtype dt)
{
    return dt >= YC_PT_I64;
}

/* ---- element conversion -------------------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3FF) << 13);
        }
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Element `i` of a storage as float and, for integer dtypes, as int64. */
static void convert_element(const unsigned char *raw, yc_pt_dtype dt, size_t i, bool swap,
                            float *f, int64_t *iv)
{
    size_t es = dtype_size(dt);
    unsigned char b[8];
    for (size_t k = 0; k < es; k++)
        b[k] = raw[i * es + (swap ? es - 1 - k : k)];
    uint64_t u = 0;
    for (size_t k = 0; k < es; k++)
        u |= (uint64_t)b[k] << (8 * k);
    int64_t x = 0;
    switch (dt) {
    case YC_PT_F16:
        *f = half_to_float((uint16_t)u);
        return;
    case YC_PT_BF16: {
        uint32_t bits = (uint32_t)u << 16;
        memcpy(f, &bits, sizeof *f);
        return;
    }
    case YC_PT_F32: {
        uint32_t bits = (uint32_t)u;
        memcpy(f, &bits, sizeof *f);
        return;
    }
    case YC_PT_F64: {
        double d;
        memcpy(&d, &u, sizeof d);
        *f = (float)d;
        return;
    }
    case YC_PT_I64:
        memcpy(&x, &u, sizeof x);
        break;
    case YC_PT_I32:
        x = (int32_t)(uint32_t)u;
        break;
    case YC_PT_I16:
        x = (int16_t)(uint16_t)u;
        break;
    case YC_PT_I8:
        x = (int8_t)(uint8_t)u;
        break;
    case YC_PT_U8:
        x = (int64_t)u;
        break;
    case YC_PT_BOOL:
        x = u != 0;
        break;
    }
    *f = (float)x;
    *iv = x;
}

/* ---- storages and tensors ------------------------------------------------------------------ */

static int format_error(const loader *L, const yc_pk_value *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "PATH: <message> (pickle byte N)" as YC_EFORMAT. */
static int format_error(const loader *L, const yc_pk_value *at, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at)
        return yc_error_status(YC_EFORMAT, "%s: %s (pickle byte %zu)", L->path, msg, at->pos);
    return yc_error_status(YC_EFORMAT, "%s: %s", L->path, msg);
}

static bool valid_key(const char *s, size_t len)
{
    if (len == 0 || len > MAX_KEY || strlen(s) != len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

/* Resolves a persistent id ('storage', torch.XStorage, key, location, numel) to its loaded
 * storage. */
static int resolve_storage(loader *L, const yc_pk_value *sv, const char *what, storage_slot **out)
{
    const yc_pk_value *pid = sv->kind == YC_PK_PERSID ? sv->u.persid : NULL;
    if (!pid || pid->kind != YC_PK_TUPLE || pid->u.seq.n != 5 ||
        !yc_pk_is_str(pid->u.seq.items[0], "storage"))
        return format_error(L, sv, "%s: storage is not a torch storage reference", what);
    const yc_pk_value *cls = pid->u.seq.items[1], *key = pid->u.seq.items[2],
                      *numel = pid->u.seq.items[4];
    int t = -1;
    if (cls->kind == YC_PK_GLOBAL && strcmp(cls->u.global.module, "torch") == 0)
        for (size_t i = 0; i < sizeof storage_types / sizeof *storage_types; i++)
            if (strcmp(cls->u.global.name, storage_types[i].name) == 0)
                t = (int)i;
    if (t < 0) {
        char d[160];
        yc_pk_describe(cls, d, sizeof d);
        return yc_error_status(YC_EUNSUPPORTED, "%s: %s: unsupported storage type (%s)", L->path,
                               what, d);
    }
    if (key->kind != YC_PK_STR || !valid_key(key->u.str.data, key->u.str.len))
        return format_error(L, sv, "%s: bad storage key", what);
    if (numel->kind != YC_PK_INT || numel->u.i < 0)
        return format_error(L, sv, "%s: bad storage size", what);
    yc_pt_dtype dt = storage_types[t].dtype;
    char entry_name[sizeof L->prefix + MAX_KEY + 16];
    snprintf(entry_name, sizeof entry_name, "%s/data/%s", L->prefix, key->u.str.data);
    const yc_zip_entry *e = yc_zip_find(L->zip, entry_name);
    if (!e)
        return format_error(L, sv, "%s: storage '%s' is missing from the archive", what,
                            key->u.str.data);
    uint64_t n = (uint64_t)numel->u.i, es = dtype_size(dt);
    if (n > UINT64_MAX / es || n * es != e->size)
        return format_error(L, sv, "%s: storage '%s' holds %llu bytes, not %llu %s elements",
                            what, key->u.str.data, (unsigned long long)e->size,
                            (unsigned long long)n, yc_pt_dtype_name(dt));
    storage_slot *s = &L->slots[e - yc_zip_get(L->zip, 0)];
    if (s->loaded) {
        if (s->dtype != dt)
            return format_error(L, sv, "%s: storage '%s' is used as %s and as %s", what,
                                key->u.str.data, yc_pt_dtype_name(s->dtype),
                                yc_pt_dtype_name(dt));
        *out = s;
        return YC_OK;
    }
    size_t size;
    int status = yc_zip_read_all(L->zip, e, (size_t)e->size, &s->raw, &size);
    if (status)
        return status;
    s->dtype = dt;
    s->numel = (size_t)n;
    s->loaded = true;
    *out = s;
    return YC_OK;
}

/* Copies a tensor view out of its storage into a dense float array (and int64 for integers). */
static int materialize(loader *L, const yc_pk_value *tv, const char *what, yc_pt_tensor *out)
{
    const yc_pk_tensor *t = tv->u.tensor;
    storage_slot *s = NULL;
    int status = resolve_storage(L, t->storage, what, &s);
    if (status)
        return status;
    size_t numel = 1;
    uint64_t last = (uint64_t)t->offset;
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t sz = (uint64_t)t->size[d], st = (uint64_t)t->stride[d];
        if (sz == 0)
            empty = true;
        if (sz && numel > SIZE_MAX / sz)
            return format_error(L, tv, "%s: tensor too large", what);
        numel *= (size_t)sz;
        if (sz && (st && sz - 1 > (UINT64_MAX - last) / st))
            return format_error(L, tv, "%s: tensor strides overflow", what);
        if (sz)
            last += (sz - 1) * st;
    }
    if (empty)
        numel = 0;
    if (numel > L->elem_budget)
        return format_error(L, tv, "%s: tensor of %zu elements exceeds what the file can hold "
                            "(a hostile view of a small storage?)", what, numel);
    L->elem_budget -= numel;
    if (numel && last >= s->numel)
        return format_error(L, tv, "%s: tensor view (offset %lld) reaches element %llu of a "
                            "storage of %zu", what, (long long)t->offset,
                            (unsigned long long)last, s->numel);
    out->dtype = s->dtype;
    out->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++)
        out->shape[d] = t->size[d];
    out->numel = numel;
    if (!(out->data = yc_malloc((numel ? numel : 1) * sizeof *out->data, "tensor")))
        return YC_ENOMEM;
    if (dtype_is_int(s->dtype) &&
        !(out->idata = yc_malloc((numel ? numel : 1) * sizeof *out->idata, "tensor")))
        return YC_ENOMEM;
    int64_t idx[YC_PK_MAX_DIMS] = {0};
    size_t pos = (size_t)t->offset;
    for (size_t i = 0; i < numel; i++) {
        int64_t iv = 0;
        convert_element((const unsigned char *)s->raw, s->dtype, pos, L->big_endian,
                        &out->data[i], &iv);
        if (out->idata)
            out->idata[i] = iv;
        for (int d = t->ndim - 1; d >= 0; d--) {
            pos += (size_t)t->stride[d];
            if (++idx[d] < t->size[d])
                break;
            pos -= (size_t)((uint64_t)t->stride[d] * (uint64_t)t->size[d]);
            idx[d] = 0;
        }
    }
    return YC_OK;
}

/* Appends a state-dict entry named `name`. */
static int add_tensor(loader *L, const char *name, const yc_pk_value *v)
{
    yc_pt_checkpoint *ck = L->ck;
    if (v->kind != YC_PK_TENSOR) {
        char d[160];
        yc_pk_describe(v, d, sizeof d);
        return format_error(L, v, "state-dict entry %s is a %s, not a tensor", name, d);
    }
    if (ck->ntensors >= YC_PT_MAX_TENSORS)
        return format_error(L, v, "more than %d tensors", YC_PT_MAX_TENSORS);
    if (ck->ntensors == L->tensor_cap) {
        int cap = L->tensor_cap ? 2 * L->tensor_cap : 256;
        yc_pt_tensor *t = yc_realloc(ck->tensors, (size_t)cap * sizeof *t, "tensor list");
        if (!t)
            return YC_ENOMEM;
        ck->tensors = t;
        L->tensor_cap = cap;
    }
    yc_pt_tensor *t = &ck->tensors[ck->ntensors++];
    memset(t, 0, sizeof *t);
    if (!(t->name = yc_strdup(name, "tensor name")))
        return YC_ENOMEM;
    return materialize(L, v, name, t);
}

/* A dict key usable in a name: a string without NUL or '.' (torch forbids both). */
static bool name_key(const yc_pk_value *k)
{
    return k->kind == YC_PK_STR && k->u.str.len > 0 && strlen(k->u.str.data) == k->u.str.len &&
           !strchr(k->u.str.data, '.');
}

/* ---- modules ------------------------------------------------------------------------------- */

/* The __dict__ of a pickled nn.Module (an object whose state has the three registries), or
 * NULL. */
static const yc_pk_value *module_dict(const yc_pk_value *v)
{
    if (!v || v->kind != YC_PK_OBJECT || !v->u.obj.state || v->u.obj.state->kind != YC_PK_DICT)
        return NULL;
    const yc_pk_value *st = v->u.obj.state;
    const yc_pk_value *p = yc_pk_dict_get(st, "_parameters"), *b = yc_pk_dict_get(st, "_buffers"),
                      *m = yc_pk_dict_get(st, "_modules");
    if (!p || !b || !m || p->kind != YC_PK_DICT || b->kind != YC_PK_DICT || m->kind != YC_PK_DICT)
        return NULL;
    return st;
}

static bool in_set(const yc_pk_value *set, const yc_pk_value *key)
{
    if (!set || (set->kind != YC_PK_SET && set->kind != YC_PK_LIST && set->kind != YC_PK_TUPLE))
        return false;
    for (size_t i = 0; i < set->u.seq.n; i++)
        if (yc_pk_is_str(set->u.seq.items[i], key->u.str.data))
            return true;
    return false;
}

/* Appends "key" (and a dot when `dot`) to L->name; false when the name would be too long. */
static bool name_push(loader *L, size_t at, const yc_pk_value *key, bool dot)
{
    size_t len = key->u.str.len;
    if (at + len + 2 > sizeof L->name)
        return false;
    memcpy(L->name + at, key->u.str.data, len);
    if (dot)
        L->name[at + len++] = '.';
    L->name[at + len] = '\0';
    return true;
}

/* Module.state_dict(): own parameters, own persistent buffers, then the children. */
static int walk_module(loader *L, const yc_pk_value *mod, size_t at, int depth)
{
    const yc_pk_value *st = module_dict(mod);
    if (!st) {
        char d[160];
        yc_pk_describe(mod, d, sizeof d);
        return format_error(L, mod, "module '%.*s' is a %s, not a torch module", (int)at, L->name,
                            d);
    }
    if (depth > MAX_MODULE_DEPTH)
        return format_error(L, mod, "modules nested deeper than %d (a cycle?)", MAX_MODULE_DEPTH);
    const yc_pk_value *params = yc_pk_dict_get(st, "_parameters"),
                      *buffers = yc_pk_dict_get(st, "_buffers"),
                      *children = yc_pk_dict_get(st, "_modules"),
                      *non_persistent = yc_pk_dict_get(st, "_non_persistent_buffers_set");
    const yc_pk_value *regs[2] = {params, buffers};
    for (int r = 0; r < 2; r++) {
        for (size_t i = 0; i < regs[r]->u.dict.n; i++) {
            const yc_pk_value *k = regs[r]->u.dict.keys[i], *v = regs[r]->u.dict.values[i];
            if (!name_key(k))
                return format_error(L, k, "bad %s name in module '%.*s'",
                                    r ? "buffer" : "parameter", (int)at, L->name);
            if (yc_pk_is_none(v) || (r == 1 && in_set(non_persistent, k)))
                continue;
            if (!name_push(L, at, k, false))
                return format_error(L, k, "state-dict name longer than %d bytes", YC_PT_MAX_NAME);
            int status = add_tensor(L, L->name, v);
            if (status)
                return status;
        }
    }
    for (size_t i = 0; i < children->u.dict.n; i++) {
        const yc_pk_value *k = children->u.dict.keys[i], *v = children->u.dict.values[i];
        if (!name_key(k))
            return format_error(L, k, "bad submodule name in module '%.*s'", (int)at, L->name);
        if (yc_pk_is_none(v))
            continue;
        if (!name_push(L, at, k, true))
            return format_error(L, k, "state-dict name longer than %d bytes", YC_PT_MAX_NAME);
        int status = walk_module(L, v, at + k->u.str.len + 1, depth + 1);
        if (status)
            return status;
    }
    L->name[at] = '\0';
    return YC_OK;
}

/* ---- the model's attributes ---------------------------------------------------------------- */

/* Python's repr(float), as PyYAML writes it (".0" before a bare exponent, .inf, .nan). */
static void float_text(double v, char *buf, size_t len)
{
    if (isnan(v)) {
        snprintf(buf, len, ".nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, len, v > 0 ? ".inf" : "-.inf");
        return;
    }
    char e[40];
    int prec;
    for (prec = 1; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    snprintf(e, sizeof e, "%.*e", prec - 1, v);
    /* e = "[-]d[.ddd]e[+-]XX": split into sign, digits and the decimal exponent */
    const char *p = e;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.' && nd + 1 < sizeof digits)
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int x = atoi(p + 1);
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (x >= -4 && x < 16) {
        if (x < 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "0.");
            for (int i = 0; i < -x - 1; i++)
                out[o++] = '0';
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", digits);
        } else {
            for (int i = 0; i <= x; i++)
                out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)x + 1 < nd)
                o += (size_t)snprintf(out + o, sizeof out - o, "%s", digits + x + 1);
            else
                out[o++] = '0';
        }
        out[o] = '\0';
    } else {
        /* repr gives "1e-05"; PyYAML writes "1.0e-05" so that YAML reads a float back */
        snprintf(out + o, sizeof out - o, "%c.%se%c%02d", digits[0], nd > 1 ? digits + 1 : "0",
                 x < 0 ? '-' : '+', x < 0 ? -x : x);
    }
    snprintf(buf, len, "%s", out);
}

static yc_yaml_node *new_node(loader *L, yc_yaml_kind kind)
{
    if (L->yaml_nodes >= MAX_YAML_NODES) {
        yc_error_status(YC_EFORMAT, "%s: the model yaml has more than %d nodes", L->path,
                        MAX_YAML_NODES);
        return NULL;
    }
    yc_yaml_node *n = yc_calloc(1, sizeof *n, "yaml node");
    if (n) {
        n->kind = kind;
        L->yaml_nodes++;
    }
    return n;
}

static int scalar_node(loader *L, const char *text, bool quoted, yc_yaml_node **out)
{
    yc_yaml_node *n = new_node(L, YC_YAML_SCALAR);
    if (!n)
        return L->yaml_nodes >= MAX_YAML_NODES ? YC_EFORMAT : YC_ENOMEM;
    if (!(n->value = yc_strdup(text, "yaml scalar"))) {
        free(n);
        return YC_ENOMEM;
    }
    n->quoted = quoted;
    *out = n;
    return YC_OK;
}

/* A Python string is written plain unless YAML would read it back as null, a bool or a number
 * (or it is empty): then it is marked quoted. */
static bool needs_quotes(const char *s)
{
    yc_yaml_node tmp = {.kind = YC_YAML_SCALAR, .value = (char *)s};
    long l;
    double d;
    bool b;
    return !s[0] || yc_yaml_is_null(&tmp) || yc_yaml_int(&tmp, &l) == YC_OK ||
           yc_yaml_double(&tmp, &d) == YC_OK || yc_yaml_bool(&tmp, &b) == YC_OK;
}

/* Converts the pickled yaml dict (str, int, float, bool, None, lists, tuples, dicts) to a tree. */
static int to_yaml(loader *L, const yc_pk_value *v, int depth, yc_yaml_node **out)
{
    *out = NULL;
    if (depth > YC_PK_MAX_DEPTH)
        return format_error(L, v, "model yaml nested deeper than %d", YC_PK_MAX_DEPTH);
    char text[64];
    switch (v->kind) {
    case YC_PK_NONE:
        return scalar_node(L, "null", false, out);
    case YC_PK_BOOL:
        return scalar_node(L, v->u.b ? "True" : "False", false, out);
    case YC_PK_INT:
        snprintf(text, sizeof text, "%lld", (long long)v->u.i);
        return scalar_node(L, text, false, out);
    case YC_PK_FLOAT:
        float_text(v->u.f, text, sizeof text);
        return scalar_node(L, text, false, out);
    case YC_PK_STR:
        if (strlen(v->u.str.data) != v->u.str.len)
            return format_error(L, v, "model yaml string contains a NUL byte");
        return scalar_node(L, v->u.str.data, needs_quotes(v->u.str.data), out);
    case YC_PK_LIST:
    case YC_PK_TUPLE:
    case YC_PK_DICT: {
        bool map = v->kind == YC_PK_DICT;
        size_t n = map ? v->u.dict.n : v->u.seq.n;
        if (n > MAX_YAML_NODES)
            return format_error(L, v, "model yaml has a %s of %zu items", yc_pk_kind_name(v->kind),
                                n);
        yc_yaml_node *node = new_node(L, map ? YC_YAML_MAP : YC_YAML_SEQ);
        if (!node)
            return L->yaml_nodes >= MAX_YAML_NODES ? YC_EFORMAT : YC_ENOMEM;
        int status = YC_OK;
        if (n && (!(node->items = yc_calloc(n, sizeof *node->items, "yaml node")) ||
                  (map && !(node->keys = yc_calloc(n, sizeof *node->keys, "yaml node")))))
            status = YC_ENOMEM;
        for (size_t i = 0; i < n && !status; i++) {
            if (map) {
                const yc_pk_value *k = v->u.dict.keys[i];
                if (k->kind == YC_PK_INT)
                    snprintf(text, sizeof text, "%lld", (long long)k->u.i);
                else if (k->kind != YC_PK_STR || strlen(k->u.str.data) != k->u.str.len) {
                    status = format_error(L, k, "model yaml has a key that is not a string");
                    break;
                }
                if (!(node->keys[i] = yc_strdup(k->kind == YC_PK_INT ? text : k->u.str.data,
                                                "yaml key"))) {
                    status = YC_ENOMEM;
                    break;
                }
            }
            status = to_yaml(L, map ? v->u.dict.values[i] : v->u.seq.items[i], depth + 1,
                             &node->items[i]);
            node->n = (int)i + 1;
        }
        if (status) {
            yc_yaml_free(node);
            return status;
        }
        node->n = (int)n;
        *out = node;
        return YC_OK;
    }
    default: {
        char d[160];
        yc_pk_describe(v, d, sizeof d);
        return format_error(L, v, "model yaml holds a %s (only plain values are expected)", d);
    }
    }
}

static int read_names(loader *L, const yc_pk_value *v)
{
    yc_pt_checkpoint *ck = L->ck;
    bool dict = v->kind == YC_PK_DICT;
    if (!dict && v->kind != YC_PK_LIST && v->kind != YC_PK_TUPLE)
        return format_error(L, v, "model.names is a %s, not a list or dict",
                            yc_pk_kind_name(v->kind));
    size_t n = dict ? v->u.dict.n : v->u.seq.n;
    if (n > MAX_NAMES)
        return format_error(L, v, "model.names has %zu entries", n);
    if (n && !(ck->names = yc_calloc(n, sizeof *ck->names, "class names")))
        return YC_ENOMEM;
    ck->nnames = (int)n;
    for (size_t i = 0; i < n; i++) {
        size_t idx = i;
        const yc_pk_value *s = dict ? v->u.dict.values[i] : v->u.seq.items[i];
        if (dict) {
            const yc_pk_value *k = v->u.dict.keys[i];
            if (k->kind != YC_PK_INT || k->u.i < 0 || (uint64_t)k->u.i >= n)
                return format_error(L, k, "model.names keys must be the indices 0..%zu", n - 1);
            idx = (size_t)k->u.i;
        }
        if (s->kind != YC_PK_STR || strlen(s->u.str.data) != s->u.str.len)
            return format_error(L, s, "class name %zu is not a string", idx);
        if (ck->names[idx])
            return format_error(L, s, "class index %zu is named twice", idx);
        if (!(ck->names[idx] = yc_strdup(s->u.str.data, "class name")))
            return YC_ENOMEM;
    }
    return YC_OK;
}

static int read_stride(loader *L, const yc_pk_value *v)
{
    yc_pt_checkpoint *ck = L->ck;
    if (v->kind == YC_PK_TENSOR) {
        yc_pt_tensor t = {0};
        int status = materialize(L, v, "model.stride", &t);
        if (!status && (t.numel > YC_PT_MAX_STRIDES || t.ndim > 1))
            status = format_error(L, v, "model.stride has %zu values", t.numel);
        if (!status) {
            ck->nstride = (int)t.numel;
            memcpy(ck->stride, t.data, t.numel * sizeof *t.data);
        }
        free(t.data);
        free(t.idata);
        return status;
    }
    if ((v->kind != YC_PK_LIST && v->kind != YC_PK_TUPLE) || v->u.seq.n > YC_PT_MAX_STRIDES)
        return format_error(L, v, "model.stride is not a tensor or a short list");
    for (size_t i = 0; i < v->u.seq.n; i++) {
        const yc_pk_value *s = v->u.seq.items[i];
        if (s->kind == YC_PK_INT)
            ck->stride[i] = (float)s->u.i;
        else if (s->kind == YC_PK_FLOAT)
            ck->stride[i] = (float)s->u.f;
        else
            return format_error(L, s, "model.stride holds a %s", yc_pk_kind_name(s->kind));
    }
    ck->nstride = (int)v->u.seq.n;
    return YC_OK;
}

/* The module's yaml, yaml_file, nc, names and stride attributes. */
static int read_attributes(loader *L, const yc_pk_value *st)
{
    yc_pt_checkpoint *ck = L->ck;
    const yc_pk_value *yaml = yc_pk_dict_get(st, "yaml"), *file = yc_pk_dict_get(st, "yaml_file"),
                      *nc = yc_pk_dict_get(st, "nc"), *names = yc_pk_dict_get(st, "names"),
                      *stride = yc_pk_dict_get(st, "stride");
    int status;
    if (!yc_pk_is_none(yaml)) {
        if (yaml->kind != YC_PK_DICT)
            return format_error(L, yaml, "model.yaml is a %s, not a dict",
                                yc_pk_kind_name(yaml->kind));
        if ((status = to_yaml(L, yaml, 0, &ck->yaml)))
            return status;
    }
    if (file && file->kind == YC_PK_STR && strlen(file->u.str.data) == file->u.str.len &&
        !(ck->yaml_file = yc_strdup(file->u.str.data, "yaml file")))
        return YC_ENOMEM;
    if (nc && nc->kind == YC_PK_INT) {
        if (nc->u.i < 1 || nc->u.i > MAX_NAMES)
            return format_error(L, nc, "model.nc is %lld", (long long)nc->u.i);
        ck->nc = (int)nc->u.i;
    } else {
        long v;
        if (yc_yaml_int(yc_yaml_get(ck->yaml, "nc"), &v) == YC_OK && v >= 1 && v <= MAX_NAMES)
            ck->nc = (int)v;
    }
    if (!yc_pk_is_none(names) && (status = read_names(L, names)))
        return status;
    if (!yc_pk_is_none(stride) && (status = read_stride(L, stride)))
        return status;
    return YC_OK;
}

/* ---- finding the model --------------------------------------------------------------------- */

static int read_state_dict(loader *L, const yc_pk_value *d)
{
    for (size_t i = 0; i < d->u.dict.n; i++) {
        const yc_pk_value *k = d->u.dict.keys[i];
        if (k->kind != YC_PK_STR || !k->u.str.len || strlen(k->u.str.data) != k->u.str.len ||
            k->u.str.len >= YC_PT_MAX_NAME)
            return format_error(L, k, "not a YOLOv5 checkpoint: a state-dict key is not a name");
        int status = add_tensor(L, k->u.str.data, d->u.dict.values[i]);
        if (status)
            return status;
    }
    return YC_OK;
}

static bool all_tensors(const yc_pk_value *d)
{
    if (d->kind != YC_PK_DICT || d->u.dict.n == 0)
        return false;
    for (size_t i = 0; i < d->u.dict.n; i++)
        if (d->u.dict.values[i]->kind != YC_PK_TENSOR)
            return false;
    return true;
}

static int read_module(loader *L, const yc_pk_value *mod, yc_pt_source source)
{
    yc_pt_checkpoint *ck = L->ck;
    ck->source = source;
    const yc_pk_value *cls = mod->u.obj.cls;
    if (cls && cls->kind == YC_PK_GLOBAL)
        snprintf(ck->model_class, sizeof ck->model_class, "%s.%s", cls->u.global.module,
                 cls->u.global.name);
    if (!module_dict(mod))
        return format_error(L, mod, "not a YOLOv5 checkpoint: the model is a %s, not a torch "
                            "module", ck->model_class[0] ? ck->model_class : "object");
    L->name[0] = '\0';
    int status = walk_module(L, mod, 0, 0);
    if (!status)
        status = read_attributes(L, module_dict(mod));
    return status;
}

static int find_model(loader *L, const yc_pk_value *root)
{
    const char *what = "the file";
    const yc_pk_value *m = root;
    yc_pt_source source = YC_PT_SOURCE_MODULE;
    if (root->kind == YC_PK_DICT) {
        const yc_pk_value *ema = yc_pk_dict_get(root, "ema"), *model = yc_pk_dict_get(root, "model"),
                          *sd = yc_pk_dict_get(root, "state_dict");
        if (!yc_pk_is_none(ema)) {
            m = ema;
            what = "ckpt['ema']";
            source = YC_PT_SOURCE_EMA;
        } else if (!yc_pk_is_none(model)) {
            m = model;
            what = "ckpt['model']";
            source = YC_PT_SOURCE_MODEL;
        } else if (!yc_pk_is_none(sd)) {
            m = sd;
            what = "ckpt['state_dict']";
        } else if (!all_tensors(root)) {
            char keys[256] = "";
            size_t used = 0;
            for (size_t i = 0; i < root->u.dict.n && i < 6 && used < sizeof keys; i++) {
                char d[80];
                yc_pk_describe(root->u.dict.keys[i], d, sizeof d);
                used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s", i ? ", " : "",
                                         d);
            }
            return format_error(L, NULL, "not a YOLOv5 checkpoint: a dict (%s%s) with no 'model' "
                                "or 'ema' entry and not a state dict", root->u.dict.n ? keys
                                : "empty", root->u.dict.n > 6 ? ", ..." : "");
        }
    }
    if (m->kind == YC_PK_OBJECT)
        return read_module(L, m, source);
    if (all_tensors(m)) {
        L->ck->source = YC_PT_SOURCE_STATE_DICT;
        return read_state_dict(L, m);
    }
    char d[160];
    yc_pk_describe(m, d, sizeof d);
    return format_error(L, m, "not a YOLOv5 checkpoint: %s is a %s", what, d);
}

/* ---- the archive --------------------------------------------------------------------------- */

/* Explains files that are not torch.save zip archives. */
static int check_magic(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
    unsigned char m[4] = {0};
    size_t n = fread(m, 1, sizeof m, f);
    fclose(f);
    if (n >= 2 && m[0] == 0x80 && m[1] >= 2 && m[1] <= 5)
        return yc_error_status(YC_EUNSUPPORTED, "%s is in torch's legacy (pre-1.6) format; "
                               "re-save it with a recent torch: torch.save(torch.load(f), f)",
                               path);
    if (n < 4 || memcmp(m, "PK\3\4", 4) != 0)
        return yc_error_status(YC_EFORMAT, "%s is not a torch checkpoint (not a zip archive)",
                               path);
    return YC_OK;
}

/* Finds "<prefix>/data.pkl" and the prefix; refuses TorchScript archives. */
static int find_pickle(loader *L, const yc_zip_entry **pkl)
{
    *pkl = NULL;
    for (int i = 0; i < yc_zip_count(L->zip); i++) {
        const yc_zip_entry *e = yc_zip_get(L->zip, i);
        const char *slash = strchr(e->name, '/');
        if (!slash || (size_t)(slash - e->name) >= sizeof L->prefix)
            continue;
        if (strcmp(slash + 1, "constants.pkl") == 0 || strncmp(slash + 1, "code/", 5) == 0)
            return yc_error_status(YC_EUNSUPPORTED, "%s is a TorchScript archive "
                                   "(torch.jit.save), not a checkpoint: save the model with "
                                   "torch.save instead", L->path);
        if (strcmp(slash + 1, "data.pkl") != 0)
            continue;
        if (*pkl)
            return yc_error_status(YC_EFORMAT, "%s holds two pickles (%s and %s)", L->path,
                                   (*pkl)->name, e->name);
        *pkl = e;
        snprintf(L->prefix, sizeof L->prefix, "%.*s", (int)(slash - e->name), e->name);
    }
    if (!*pkl)
        return yc_error_status(YC_EFORMAT, "%s is a zip archive but not a torch checkpoint (no "
                               "<name>/data.pkl)", L->path);
    return YC_OK;
}

static int read_byteorder(loader *L)
{
    char name[sizeof L->prefix + 16];
    snprintf(name, sizeof name, "%s/byteorder", L->prefix);
    const yc_zip_entry *e = yc_zip_find(L->zip, name);
    if (!e)
        return YC_OK;
    char *text;
    size_t len;
    int status = yc_zip_read_all(L->zip, e, 16, &text, &len);
    if (status)
        return status;
    if (strcmp(text, "little") == 0)
        L->big_endian = false;
    else if (strcmp(text, "big") == 0)
        L->big_endian = true;
    else
        status = yc_error_status(YC_EFORMAT, "%s: unknown byte order '%.16s'", L->path, text);
    free(text);
    return status;
}

int yc_pt_load(yc_pt_checkpoint **out, const char *path)
{
    *out = NULL;
    int status = check_magic(path);
    if (status)
        return status;
    loader L = {.path = path};
    yc_pickle *pk = NULL;
    char *pkl_data = NULL;
    if (!(L.ck = yc_calloc(1, sizeof *L.ck, "checkpoint")))
        return YC_ENOMEM;
    L.ck->nc = -1;
    if ((status = yc_zip_open(&L.zip, path)))
        goto done;
    L.elem_budget = (size_t)1 << 20;
    for (int i = 0; i < yc_zip_count(L.zip); i++)
        L.elem_budget += 4 * (size_t)yc_zip_get(L.zip, i)->size;
    const yc_zip_entry *pkl;
    size_t pkl_len;
    const yc_pk_value *root;
    if ((status = find_pickle(&L, &pkl)) || (status = read_byteorder(&L)))
        goto done;
    if (!(L.slots = yc_calloc((size_t)yc_zip_count(L.zip), sizeof *L.slots, "storages"))) {
        status = YC_ENOMEM;
        goto done;
    }
    if ((status = yc_zip_read_all(L.zip, pkl, MAX_PICKLE_BYTES, &pkl_data, &pkl_len)))
        goto done;
    if ((status = yc_pk_load(&pk, &root, pkl_data, pkl_len, NULL))) {
        yc_error_context(status, "%s: %s", path, pkl->name);
        goto done;
    }
    status = find_model(&L, root);
    if (!status && L.ck->ntensors == 0)
        status = format_error(&L, NULL, "not a YOLOv5 checkpoint: the model has no tensors");
done:
    yc_pk_free(pk);
    free(pkl_data);
    if (L.slots)
        for (int i = 0; i < yc_zip_count(L.zip); i++)
            free(L.slots[i].raw);
    free(L.slots);
    yc_zip_close(L.zip);
    if (status) {
        yc_pt_free(L.ck);
        return status;
    }
    *out = L.ck;
    return YC_OK;
}

void yc_pt_free(yc_pt_checkpoint *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->ntensors; i++) {
        free(c->tensors[i].name);
        free(c->tensors[i].data);
        free(c->tensors[i].idata);
    }
    free(c->tensors);
    yc_yaml_free(c->yaml);
    free(c->yaml_file);
    for (int i = 0; i < c->nnames; i++)
        free(c->names[i]);
    free(c->names);
    free(c);
}

const yc_pt_tensor *yc_pt_find(const yc_pt_checkpoint *c, const char *name)
{
    for (int i = 0; i < c->ntensors; i++)
        if (strcmp(c->tensors[i].name, name) == 0)
            return &c->tensors[i];
    return NULL;
}
