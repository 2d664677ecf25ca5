/* The pickle virtual machine subset (see pickle.h).  Opcode reference: CPython's
 * Lib/pickletools.py and Lib/pickle.py (protocol 5); torch's use of it: torch/serialization.py
 * and torch/_utils.py. */
#include "pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"

/* Values are allocated in blocks of this many. */
#define BLOCK_VALUES 512
/* Longest module or attribute name a GLOBAL may give. */
#define MAX_GLOBAL_NAME 256

/* A block of values; blocks form a list, newest first. */
typedef struct value_block {
    struct value_block *next;
    size_t used;
    yc_pk_value v[BLOCK_VALUES];
} value_block;

struct yc_pickle {
    /* every value, in blocks (newest first) */
    value_block *blocks;
    size_t nvalues;
    yc_pk_limits lim;

    /* the input and the reader's position; op_pos and op are the opcode being run */
    const unsigned char *data;
    size_t len, pos, op_pos;
    unsigned char op;
    /* the stack, and the stack heights saved by MARK */
    yc_pk_value **stack;
    size_t sp, stack_cap;
    size_t *marks;
    size_t nmarks, marks_cap;
    /* the memo: memo[i] or NULL, and how many entries are set (MEMOIZE's next index) */
    yc_pk_value **memo;
    size_t memo_cap, memo_count;
    /* the status of the first failure recorded with fail() (0 while none) */
    int err;
    /* shared constants */
    yc_pk_value *none, *true_v, *false_v;
    yc_pk_value *small_int[256];
};

void yc_pk_default_limits(yc_pk_limits *limits)
{
    limits->max_values = (size_t)8 << 20;
    limits->max_memo = (size_t)4 << 20;
    limits->max_stack = (size_t)4 << 20;
    limits->max_marks = 1000;
    limits->max_string = (size_t)256 << 20;
}

/* ---- messages ------------------------------------------------------------------------------ */

static const char *op_name(unsigned char op)
{
    switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'N': return "NONE";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'G': return "BINFLOAT";
    case 'X': return "BINUNICODE";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8e: return "BINBYTES8";
    case 0x96: return "BYTEARRAY8";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case ')': return "EMPTY_TUPLE";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case ']': return "EMPTY_LIST";
    case 'l': return "LIST";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    case '}': return "EMPTY_DICT";
    case 'd': return "DICT";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'b': return "BUILD";
    case 'Q': return "BINPERSID";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 0x94: return "MEMOIZE";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 0x80: return "PROTO";
    case 0x95: return "FRAME";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'P': return "PERSID";
    case 'p': return "PUT";
    case 'g': return "GET";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

static int fail(yc_pickle *p, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records "pickle byte N (OPCODE): message" and returns `status`. */
static int fail(yc_pickle *p, int status, const char *fmt, ...)
{
    p->err = status;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *name = op_name(p->op);
    if (name)
        return yc_error_status(status, "pickle byte %zu (%s): %s", p->op_pos, name, msg);
    return yc_error_status(status, "pickle byte %zu (opcode 0x%02x): %s", p->op_pos, p->op, msg);
}

/* The status for a NULL from a constructor: the limit it hit, or out of memory. */
static int null_status(const yc_pickle *p)
{
    return p->err ? p->err : YC_ENOMEM;
}

/* ---- values -------------------------------------------------------------------------------- */

static yc_pk_value *new_value(yc_pickle *p, yc_pk_kind kind)
{
    if (p->nvalues >= p->lim.max_values) {
        fail(p, YC_EFORMAT, "more than %zu values (limit against hostile files)",
             p->lim.max_values);
        return NULL;
    }
    if (!p->blocks || p->blocks->used == BLOCK_VALUES) {
        value_block *b = yc_malloc(sizeof *b, "pickle values");
        if (!b)
            return NULL;
        b->next = p->blocks;
        b->used = 0;
        p->blocks = b;
    }
    yc_pk_value *v = &p->blocks->v[p->blocks->used++];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->pos = p->op_pos;
    p->nvalues++;
    return v;
}

static void free_value_data(yc_pk_value *v)
{
    switch (v->kind) {
    case YC_PK_STR:
    case YC_PK_BYTES:
        free(v->u.str.data);
        break;
    case YC_PK_TUPLE:
    case YC_PK_LIST:
    case YC_PK_SET:
        free(v->u.seq.items);
        break;
    case YC_PK_DICT:
        free(v->u.dict.keys);
        free(v->u.dict.values);
        break;
    case YC_PK_GLOBAL:
        free(v->u.global.module);
        free(v->u.global.name);
        break;
    case YC_PK_TENSOR:
        free(v->u.tensor);
        break;
    default:
        break;
    }
}

void yc_pk_free(yc_pickle *p)
{
    if (!p)
        return;
    value_block *b = p->blocks;
    while (b) {
        value_block *next = b->next;
        for (size_t i = 0; i < b->used; i++)
            free_value_data(&b->v[i]);
        free(b);
        b = next;
    }
    free(p->stack);
    free(p->marks);
    free(p->memo);
    free(p);
}

/* Grows an array of `*cap` elements of `size` bytes to hold at least `need`. */
static int grow(void **arr, size_t *cap, size_t need, size_t size, const char *what)
{
    if (need <= *cap)
        return YC_OK;
    size_t n = *cap ? *cap : 8;
    while (n < need)
        n *= 2;
    if (n > SIZE_MAX / size)
        return yc_error_status(YC_ENOMEM, "out of memory: %s", what);
    void *a = yc_realloc(*arr, n * size, what);
    if (!a)
        return YC_ENOMEM;
    *arr = a;
    *cap = n;
    return YC_OK;
}

static int seq_append(yc_pk_value *seq, yc_pk_value *item)
{
    int status = grow((void **)&seq->u.seq.items, &seq->u.seq.cap, seq->u.seq.n + 1,
                      sizeof *seq->u.seq.items, "pickle list");
    if (status)
        return status;
    seq->u.seq.items[seq->u.seq.n++] = item;
    return YC_OK;
}

/* Python refuses mutable containers as dict keys and set items. */
static bool hashable(const yc_pk_value *v)
{
    return v->kind != YC_PK_LIST && v->kind != YC_PK_DICT && v->kind != YC_PK_SET;
}

static int dict_set(yc_pickle *p, yc_pk_value *dict, yc_pk_value *key, yc_pk_value *value)
{
    if (!hashable(key))
        return fail(p, YC_EFORMAT, "a %s cannot be a dict key", yc_pk_kind_name(key->kind));
    size_t cap = dict->u.dict.cap;
    int status = grow((void **)&dict->u.dict.keys, &cap, dict->u.dict.n + 1,
                      sizeof *dict->u.dict.keys, "pickle dict");
    if (!status)
        status = grow((void **)&dict->u.dict.values, &dict->u.dict.cap, dict->u.dict.n + 1,
                      sizeof *dict->u.dict.values, "pickle dict");
    if (status)
        return status;
    dict->u.dict.keys[dict->u.dict.n] = key;
    dict->u.dict.values[dict->u.dict.n++] = value;
    return YC_OK;
}

static int set_add(yc_pickle *p, yc_pk_value *set, yc_pk_value *item)
{
    if (!hashable(item))
        return fail(p, YC_EFORMAT, "a %s cannot be a set item", yc_pk_kind_name(item->kind));
    return seq_append(set, item);
}

/* ---- reading the input --------------------------------------------------------------------- */

static int need(yc_pickle *p, size_t n)
{
    if (p->len - p->pos < n)
        return fail(p, YC_EFORMAT, "truncated: %zu more bytes needed, %zu left", n,
                    p->len - p->pos);
    return YC_OK;
}

static uint64_t read_le(yc_pickle *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p->data[p->pos + (size_t)i] << (8 * i);
    p->pos += (size_t)bytes;
    return v;
}

/* An unsigned little-endian length or index of `bytes` bytes. */
static int read_uint(yc_pickle *p, int bytes, uint64_t *out)
{
    int status = need(p, (size_t)bytes);
    if (status)
        return status;
    *out = read_le(p, bytes);
    return YC_OK;
}

/* ---- the stack ----------------------------------------------------------------------------- */

static int push(yc_pickle *p, yc_pk_value *v)
{
    if (!v)
        return null_status(p);
    if (p->sp >= p->lim.max_stack)
        return fail(p, YC_EFORMAT, "stack holds more than %zu items (limit against hostile files)",
                    p->lim.max_stack);
    int status = grow((void **)&p->stack, &p->stack_cap, p->sp + 1, sizeof *p->stack,
                      "pickle stack");
    if (status)
        return status;
    p->stack[p->sp++] = v;
    return YC_OK;
}

static size_t floor_of(const yc_pickle *p)
{
    return p->nmarks ? p->marks[p->nmarks - 1] : 0;
}

static int pop(yc_pickle *p, yc_pk_value **out)
{
    if (p->sp <= floor_of(p))
        return fail(p, YC_EFORMAT, "stack underflow");
    *out = p->stack[--p->sp];
    return YC_OK;
}

static int peek(yc_pickle *p, yc_pk_value **out)
{
    if (p->sp <= floor_of(p))
        return fail(p, YC_EFORMAT, "stack underflow");
    *out = p->stack[p->sp - 1];
    return YC_OK;
}

/* Removes the items above the last MARK and the MARK: they are stack[*start .. *start + *n). The
 * pointers stay valid until the next push. */
static int pop_mark(yc_pickle *p, size_t *start, size_t *n)
{
    if (p->nmarks == 0)
        return fail(p, YC_EFORMAT, "no MARK to pop to");
    *start = p->marks[--p->nmarks];
    *n = p->sp - *start;
    p->sp = *start;
    return YC_OK;
}

/* ---- opcode helpers ------------------------------------------------------------------------ */

static yc_pk_value *make_int(yc_pickle *p, int64_t i)
{
    if (i >= 0 && i < 256 && p->small_int[i])
        return p->small_int[i];
    yc_pk_value *v = new_value(p, YC_PK_INT);
    if (!v)
        return NULL;
    v->u.i = i;
    if (i >= 0 && i < 256)
        p->small_int[i] = v;
    return v;
}

/* LONG1 / LONG4 payload: n bytes of little-endian two's complement. */
static int push_long(yc_pickle *p, uint64_t n)
{
    if (n > p->len - p->pos)
        return fail(p, YC_EFORMAT, "truncated: %llu more bytes needed, %zu left",
                    (unsigned long long)n, p->len - p->pos);
    const unsigned char *b = p->data + p->pos;
    p->pos += (size_t)n;
    if (n == 0)
        return push(p, make_int(p, 0));
    unsigned char fill = (b[n - 1] & 0x80) ? 0xFF : 0x00;
    bool fits = true;
    for (uint64_t i = 8; i < n && fits; i++)
        fits = b[i] == fill;
    if (n >= 8 && ((b[7] & 0x80) ? 0xFF : 0x00) != fill)
        fits = false;
    if (!fits) {
        yc_pk_value *v = new_value(p, YC_PK_BIGINT);
        return push(p, v);
    }
    uint64_t u = 0;
    for (uint64_t i = 0; i < 8; i++)
        u |= (uint64_t)(i < n ? b[i] : fill) << (8 * i);
    int64_t i;
    memcpy(&i, &u, sizeof i);
    return push(p, make_int(p, i));
}

static int push_string(yc_pickle *p, uint64_t n, bool text, bool py2_string)
{
    if (n > p->lim.max_string)
        return fail(p, YC_EFORMAT, "string of %llu bytes (at most %zu accepted)",
                    (unsigned long long)n, p->lim.max_string);
    int status = need(p, (size_t)n);
    if (status)
        return status;
    const char *src = (const char *)p->data + p->pos;
    bool utf8 = yc_json_utf8_valid(src, (size_t)n);
    if (text && !utf8)
        return fail(p, YC_EFORMAT, "string is not valid UTF-8");
    yc_pk_value *v = new_value(p, text || (py2_string && utf8) ? YC_PK_STR : YC_PK_BYTES);
    if (!v)
        return YC_ENOMEM;
    if (!(v->u.str.data = yc_malloc((size_t)n + 1, "pickle string")))
        return YC_ENOMEM;
    memcpy(v->u.str.data, src, (size_t)n);
    v->u.str.data[n] = '\0';
    v->u.str.len = (size_t)n;
    p->pos += (size_t)n;
    return push(p, v);
}

/* Builds a tuple/list/set from `n` values. */
static yc_pk_value *make_seq(yc_pickle *p, yc_pk_kind kind, yc_pk_value **items, size_t n)
{
    yc_pk_value *v = new_value(p, kind);
    if (!v)
        return NULL;
    if (n) {
        if (!(v->u.seq.items = yc_malloc(n * sizeof *items, "pickle tuple")))
            return NULL;
        memcpy(v->u.seq.items, items, n * sizeof *items);
        v->u.seq.n = v->u.seq.cap = n;
    }
    if (kind == YC_PK_SET)
        for (size_t i = 0; i < n; i++)
            if (!hashable(items[i])) {
                fail(p, YC_EFORMAT, "a %s cannot be a set item", yc_pk_kind_name(items[i]->kind));
                return NULL;
            }
    return v;
}

/* Callables that no checkpoint calls: only a malicious file asks for them. */
static bool refused_callable(const char *module, const char *name)
{
    static const char *const roots[] = {
        "os", "posix", "nt", "subprocess", "sys", "shutil", "socket", "importlib", "pty",
        "runpy", "code", "codeop", "ctypes", "multiprocessing", "signal", "webbrowser", "pickle",
        "_pickle", "marshal", "types", "tempfile", "pathlib", "io", "_io", "asyncio",
        "threading", "_thread", "platform", "commands", "popen2", "pdb", "timeit", "bdb",
        "operator", "functools", "inspect", "gc", "ssl", "http", "urllib", "ftplib", "smtplib",
        "telnetlib", "zipimport", "pkgutil", "site", "sysconfig", "_posixsubprocess",
    };
    static const char *const builtins[] = {
        "eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr",
        "globals", "locals", "vars", "input", "breakpoint", "exit", "quit", "help", "execfile",
        "file", "reload", "apply", "memoryview", "__loader__", "__builtins__", "classmethod",
        "staticmethod", "property", "super", "type",
    };
    size_t root_len = strcspn(module, ".");
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++)
        if (strlen(roots[i]) == root_len && strncmp(module, roots[i], root_len) == 0)
            return true;
    if (strcmp(module, "builtins") == 0)
        for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
            if (strcmp(name, builtins[i]) == 0)
                return true;
    if (strncmp(module, "torch", 5) == 0 &&
        (strstr(module, "hub") || strstr(module, "jit") || strstr(module, "package") ||
         strcmp(name, "load") == 0 || strcmp(name, "compile") == 0))
        return true;
    return strstr(name, "__") != NULL && strcmp(name, "__newobj__") != 0 &&
           strcmp(name, "__newobj_ex__") != 0;
}

static bool valid_global_text(const char *s, size_t n)
{
    if (n == 0 || n > MAX_GLOBAL_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
              (c >= 'A' && c <= 'Z')))
            return false;
    }
    return true;
}

static int push_global(yc_pickle *p, const char *module, size_t mlen, const char *name,
                       size_t nlen)
{
    if (!valid_global_text(module, mlen) || !valid_global_text(name, nlen))
        return fail(p, YC_EFORMAT, "bad module or attribute name in a global");
    char mod[MAX_GLOBAL_NAME + 1], nm[MAX_GLOBAL_NAME + 1];
    memcpy(mod, module, mlen);
    mod[mlen] = '\0';
    memcpy(nm, name, nlen);
    nm[nlen] = '\0';
    /* Python 2 module names, as pickle's fix_imports maps them */
    if (strcmp(mod, "__builtin__") == 0)
        snprintf(mod, sizeof mod, "builtins");
    else if (strcmp(mod, "copy_reg") == 0)
        snprintf(mod, sizeof mod, "copyreg");
    yc_pk_value *v = new_value(p, YC_PK_GLOBAL);
    if (!v)
        return YC_ENOMEM;
    if (!(v->u.global.module = yc_strdup(mod, "pickle global")) ||
        !(v->u.global.name = yc_strdup(nm, "pickle global")))
        return YC_ENOMEM;
    return push(p, v);
}

/* GLOBAL: "module\nname\n". */
static int op_global(yc_pickle *p)
{
    const char *s[2];
    size_t n[2];
    for (int k = 0; k < 2; k++) {
        const char *start = (const char *)p->data + p->pos;
        size_t left = p->len - p->pos;
        const char *nl = memchr(start, '\n', left < MAX_GLOBAL_NAME + 1 ? left : MAX_GLOBAL_NAME + 1);
        if (!nl)
            return fail(p, YC_EFORMAT, "global name is not terminated by a newline");
        s[k] = start;
        n[k] = (size_t)(nl - start);
        p->pos += n[k] + 1;
    }
    return push_global(p, s[0], n[0], s[1], n[1]);
}

static bool is_int(const yc_pk_value *v)
{
    return v->kind == YC_PK_INT || v->kind == YC_PK_BOOL;
}

static int64_t int_of(const yc_pk_value *v)
{
    return v->kind == YC_PK_BOOL ? v->u.b : v->u.i;
}

/* torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 * backward_hooks[, metadata]) and _rebuild_tensor(storage, storage_offset, size, stride). */
static yc_pk_value *rebuild_tensor(yc_pickle *p, const yc_pk_value *args, bool v2)
{
    size_t n = args->u.seq.n;
    yc_pk_value *const *a = args->u.seq.items;
    if (v2 ? n != 6 && n != 7 : n != 4) {
        fail(p, YC_EFORMAT, "torch tensor with %zu arguments (expected %s)", n, v2 ? "6 or 7" : "4");
        return NULL;
    }
    if (!is_int(a[1]) || int_of(a[1]) < 0) {
        fail(p, YC_EFORMAT, "torch tensor with a bad storage offset");
        return NULL;
    }
    const yc_pk_value *size = a[2], *stride = a[3];
    if ((size->kind != YC_PK_TUPLE && size->kind != YC_PK_LIST) ||
        (stride->kind != YC_PK_TUPLE && stride->kind != YC_PK_LIST) ||
        size->u.seq.n != stride->u.seq.n || size->u.seq.n > YC_PK_MAX_DIMS) {
        fail(p, YC_EFORMAT, "torch tensor with bad sizes or strides (at most %d dimensions)",
             YC_PK_MAX_DIMS);
        return NULL;
    }
    yc_pk_tensor *t = yc_calloc(1, sizeof *t, "pickle tensor");
    if (!t)
        return NULL;
    t->storage = a[0];
    t->offset = int_of(a[1]);
    t->ndim = (int)size->u.seq.n;
    for (int d = 0; d < t->ndim; d++) {
        const yc_pk_value *sz = size->u.seq.items[d], *st = stride->u.seq.items[d];
        if (!is_int(sz) || !is_int(st) || int_of(sz) < 0 || int_of(st) < 0) {
            free(t);
            fail(p, YC_EFORMAT, "torch tensor with a bad size or stride in dimension %d", d);
            return NULL;
        }
        t->size[d] = int_of(sz);
        t->stride[d] = int_of(st);
    }
    t->requires_grad = v2 && a[4]->kind == YC_PK_BOOL && a[4]->u.b;
    yc_pk_value *v = new_value(p, YC_PK_TENSOR);
    if (!v) {
        free(t);
        return NULL;
    }
    v->u.tensor = t;
    return v;
}

/* A new dict from an iterable of (key, value) pairs (OrderedDict([...])). */
static yc_pk_value *dict_from_pairs(yc_pickle *p, const yc_pk_value *pairs)
{
    yc_pk_value *d = new_value(p, YC_PK_DICT);
    if (!d)
        return NULL;
    if (!pairs)
        return d;
    if (pairs->kind != YC_PK_LIST && pairs->kind != YC_PK_TUPLE) {
        fail(p, YC_EFORMAT, "OrderedDict of a %s", yc_pk_kind_name(pairs->kind));
        return NULL;
    }
    for (size_t i = 0; i < pairs->u.seq.n; i++) {
        const yc_pk_value *kv = pairs->u.seq.items[i];
        if ((kv->kind != YC_PK_TUPLE && kv->kind != YC_PK_LIST) || kv->u.seq.n != 2) {
            fail(p, YC_EFORMAT, "OrderedDict item is not a pair");
            return NULL;
        }
        if (dict_set(p, d, kv->u.seq.items[0], kv->u.seq.items[1]))
            return NULL;
    }
    return d;
}

/* Refuses a call of a dangerous global (nothing is ever called; refusing tells the user). */
static int check_callable(yc_pickle *p, const yc_pk_value *fn)
{
    if (fn->kind == YC_PK_GLOBAL && refused_callable(fn->u.global.module, fn->u.global.name))
        return fail(p, YC_EUNSUPPORTED, "refusing to call %s.%s: a checkpoint has no use for it, "
                    "so the file may be malicious (nothing was executed)", fn->u.global.module,
                    fn->u.global.name);
    return YC_OK;
}

/* getattr(<a class of YOLOv5's models package>, "<public name>"): how a YOLOv5 segmentation
 * checkpoint pickles Segment's `self.detect = Detect.forward` (a method of a class, looked up by
 * name).  Nothing is looked up here either: the call becomes an opaque object like any other
 * unknown call. */
static bool models_method(const yc_pk_value *fn, const yc_pk_value *args)
{
    if (!yc_pk_is_global(fn, "builtins", "getattr") || args->kind != YC_PK_TUPLE ||
        args->u.seq.n != 2)
        return false;
    const yc_pk_value *cls = args->u.seq.items[0], *name = args->u.seq.items[1];
    return cls->kind == YC_PK_GLOBAL && strncmp(cls->u.global.module, "models.", 7) == 0 &&
           name->kind == YC_PK_STR && strlen(name->u.str.data) == name->u.str.len &&
           valid_global_text(name->u.str.data, name->u.str.len) &&
           !strstr(name->u.str.data, "__");
}

/* REDUCE: callable(*args), interpreted for the callables torch checkpoints use. */
static int op_reduce(yc_pickle *p)
{
    yc_pk_value *args, *fn;
    int status;
    if ((status = pop(p, &args)) || (status = pop(p, &fn)))
        return status;
    if (!models_method(fn, args) && (status = check_callable(p, fn)))
        return status;
    if (args->kind != YC_PK_TUPLE)
        return fail(p, YC_EFORMAT, "arguments are a %s, not a tuple", yc_pk_kind_name(args->kind));
    size_t n = args->u.seq.n;
    yc_pk_value *const *a = args->u.seq.items;
    yc_pk_value *v = NULL;
    if (yc_pk_is_global(fn, "collections", "OrderedDict") ||
        yc_pk_is_global(fn, "builtins", "dict")) {
        if (n > 1)
            return fail(p, YC_EFORMAT, "OrderedDict with %zu arguments", n);
        v = dict_from_pairs(p, n ? a[0] : NULL);
    } else if (yc_pk_is_global(fn, "builtins", "set") ||
               yc_pk_is_global(fn, "builtins", "frozenset")) {
        if (n > 1)
            return fail(p, YC_EFORMAT, "set with %zu arguments", n);
        if (n && a[0]->kind != YC_PK_LIST && a[0]->kind != YC_PK_TUPLE && a[0]->kind != YC_PK_SET)
            return fail(p, YC_EFORMAT, "set of a %s", yc_pk_kind_name(a[0]->kind));
        v = n ? make_seq(p, YC_PK_SET, a[0]->u.seq.items, a[0]->u.seq.n)
              : make_seq(p, YC_PK_SET, NULL, 0);
    } else if (yc_pk_is_global(fn, "torch._utils", "_rebuild_tensor_v2")) {
        v = rebuild_tensor(p, args, true);
    } else if (yc_pk_is_global(fn, "torch._utils", "_rebuild_tensor")) {
        v = rebuild_tensor(p, args, false);
    } else if (yc_pk_is_global(fn, "torch._utils", "_rebuild_parameter") ||
               yc_pk_is_global(fn, "torch._utils", "_rebuild_parameter_with_state")) {
        if (n < 3 || n > 4)
            return fail(p, YC_EFORMAT, "torch parameter with %zu arguments", n);
        v = a[0];
    } else if (yc_pk_is_global(fn, "copyreg", "_reconstructor")) {
        if (n != 3)
            return fail(p, YC_EFORMAT, "copyreg._reconstructor with %zu arguments", n);
        if ((status = check_callable(p, a[0])))
            return status;
        if ((v = new_value(p, YC_PK_OBJECT))) {
            v->u.obj.cls = a[0];
            v->u.obj.args = args;
        }
    } else if ((v = new_value(p, YC_PK_OBJECT))) {
        v->u.obj.cls = fn;
        v->u.obj.args = args;
    }
    return v ? push(p, v) : null_status(p);
}

/* NEWOBJ and NEWOBJ_EX: cls.__new__(cls, *args). */
static int op_newobj(yc_pickle *p, bool ex)
{
    yc_pk_value *kwargs = NULL, *args, *cls;
    int status;
    if ((ex && (status = pop(p, &kwargs))) || (status = pop(p, &args)) ||
        (status = pop(p, &cls)) || (status = check_callable(p, cls)))
        return status;
    if (args->kind != YC_PK_TUPLE)
        return fail(p, YC_EFORMAT, "arguments are a %s, not a tuple", yc_pk_kind_name(args->kind));
    if (kwargs && kwargs->kind != YC_PK_DICT)
        return fail(p, YC_EFORMAT, "keyword arguments are a %s, not a dict",
                    yc_pk_kind_name(kwargs->kind));
    yc_pk_value *v;
    if (yc_pk_is_global(cls, "collections", "OrderedDict"))
        v = new_value(p, YC_PK_DICT);
    else if ((v = new_value(p, YC_PK_OBJECT))) {
        v->u.obj.cls = cls;
        v->u.obj.args = args;
    }
    return push(p, v);
}

/* BUILD: obj.__setstate__(state) or obj.__dict__.update(state).  Objects keep the state; the
 * state of a dict or tensor (attributes of an OrderedDict subclass or a Parameter) is dropped. */
static int op_build(yc_pickle *p)
{
    yc_pk_value *state, *obj;
    int status;
    if ((status = pop(p, &state)) || (status = peek(p, &obj)))
        return status;
    if (obj->kind == YC_PK_OBJECT) {
        /* (dict_state, slot_state) as object.__reduce_ex__ writes it for classes with slots */
        if (state->kind == YC_PK_TUPLE && state->u.seq.n == 2 &&
            state->u.seq.items[0]->kind == YC_PK_DICT)
            state = state->u.seq.items[0];
        obj->u.obj.state = state;
    } else if (obj->kind != YC_PK_DICT && obj->kind != YC_PK_TENSOR) {
        return fail(p, YC_EFORMAT, "cannot set the state of a %s", yc_pk_kind_name(obj->kind));
    }
    return YC_OK;
}

static int memo_put(yc_pickle *p, uint64_t idx)
{
    if (idx >= p->lim.max_memo)
        return fail(p, YC_EFORMAT, "memo index %llu is too large (at most %zu entries)",
                    (unsigned long long)idx, p->lim.max_memo);
    yc_pk_value *top;
    int status = peek(p, &top);
    if (status)
        return status;
    size_t old = p->memo_cap;
    if ((status = grow((void **)&p->memo, &p->memo_cap, (size_t)idx + 1, sizeof *p->memo,
                       "pickle memo")))
        return status;
    if (p->memo_cap > old)
        memset(p->memo + old, 0, (p->memo_cap - old) * sizeof *p->memo);
    if (!p->memo[idx])
        p->memo_count++;
    p->memo[idx] = top;
    return YC_OK;
}

static int memo_get(yc_pickle *p, uint64_t idx)
{
    if (idx >= p->memo_cap || !p->memo[idx])
        return fail(p, YC_EFORMAT, "memo entry %llu is not defined", (unsigned long long)idx);
    return push(p, p->memo[idx]);
}

/* APPEND/APPENDS, SETITEM/SETITEMS, ADDITEMS: add the items to the container under them. */
static int add_items(yc_pickle *p, yc_pk_value **items, size_t n)
{
    yc_pk_value *target;
    int status = peek(p, &target);
    if (status)
        return status;
    bool dict = p->op == 's' || p->op == 'u';
    yc_pk_kind want = dict ? YC_PK_DICT : p->op == 0x90 ? YC_PK_SET : YC_PK_LIST;
    if (target->kind != want)
        return fail(p, YC_EFORMAT, "target is a %s, not a %s", yc_pk_kind_name(target->kind),
                    yc_pk_kind_name(want));
    if (dict && n % 2)
        return fail(p, YC_EFORMAT, "odd number of items for a dict");
    for (size_t i = 0; i < n && !status; i += dict ? 2 : 1)
        status = dict ? dict_set(p, target, items[i], items[i + 1])
                 : want == YC_PK_SET ? set_add(p, target, items[i])
                                     : seq_append(target, items[i]);
    return status;
}

/* ---- the machine --------------------------------------------------------------------------- */

static int step(yc_pickle *p, const yc_pk_value **root, bool *stop)
{
    p->op_pos = p->pos;
    p->op = p->data[p->pos++];
    uint64_t u;
    int status = YC_OK;
    size_t start = 0, n = 0;
    yc_pk_value *a, *b, *v;
    switch (p->op) {
    case 0x80: /* PROTO */
        if ((status = read_uint(p, 1, &u)))
            return status;
        if (u < 2 || u > 5)
            return fail(p, YC_EUNSUPPORTED, "pickle protocol %llu (2 to 5 are supported)",
                        (unsigned long long)u);
        return YC_OK;
    case 0x95: /* FRAME: a hint for buffered readers */
        if ((status = read_uint(p, 8, &u)))
            return status;
        if (u > p->len - p->pos)
            return fail(p, YC_EFORMAT, "frame of %llu bytes runs past the end of the data",
                        (unsigned long long)u);
        return YC_OK;
    case '.':
        if ((status = pop(p, &v)))
            return status;
        *root = v;
        *stop = true;
        return YC_OK;
    case '(':
        if (p->nmarks >= p->lim.max_marks)
            return fail(p, YC_EFORMAT, "more than %zu nested MARKs (limit against hostile files)",
                        p->lim.max_marks);
        if ((status = grow((void **)&p->marks, &p->marks_cap, p->nmarks + 1, sizeof *p->marks,
                           "pickle marks")))
            return status;
        p->marks[p->nmarks++] = p->sp;
        return YC_OK;
    case '0':
        if (p->sp > floor_of(p))
            return pop(p, &v);
        return pop_mark(p, &start, &n);
    case '1':
        return pop_mark(p, &start, &n);
    case '2':
        if ((status = peek(p, &v)))
            return status;
        return push(p, v);
    case 'N':
        return push(p, p->none);
    case 0x88:
        return push(p, p->true_v);
    case 0x89:
        return push(p, p->false_v);
    case 'J':
        if ((status = read_uint(p, 4, &u)))
            return status;
        return push(p, make_int(p, u >= 0x80000000u ? (int64_t)u - ((int64_t)1 << 32) : (int64_t)u));
    case 'K':
    case 'M':
        if ((status = read_uint(p, p->op == 'K' ? 1 : 2, &u)))
            return status;
        return push(p, make_int(p, (int64_t)u));
    case 0x8a:
    case 0x8b:
        if ((status = read_uint(p, p->op == 0x8a ? 1 : 4, &u)))
            return status;
        if (p->op == 0x8b && u > INT32_MAX)
            return fail(p, YC_EFORMAT, "negative length");
        return push_long(p, u);
    case 'G': {
        if ((status = need(p, 8)))
            return status;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits = bits << 8 | p->data[p->pos + (size_t)i];
        p->pos += 8;
        if (!(v = new_value(p, YC_PK_FLOAT)))
            return YC_ENOMEM;
        memcpy(&v->u.f, &bits, sizeof v->u.f);
        return push(p, v);
    }
    case 'X':
    case 0x8c:
    case 0x8d:
        if ((status = read_uint(p, p->op == 'X' ? 4 : p->op == 0x8c ? 1 : 8, &u)))
            return status;
        return push_string(p, u, true, false);
    case 'B':
    case 'C':
    case 0x8e:
    case 0x96:
        if ((status = read_uint(p, p->op == 'B' ? 4 : p->op == 'C' ? 1 : 8, &u)))
            return status;
        return push_string(p, u, false, false);
    case 'T':
    case 'U':
        if ((status = read_uint(p, p->op == 'T' ? 4 : 1, &u)))
            return status;
        if (p->op == 'T' && u > INT32_MAX)
            return fail(p, YC_EFORMAT, "negative length");
        return push_string(p, u, false, true);
    case ')':
        return push(p, make_seq(p, YC_PK_TUPLE, NULL, 0));
    case ']':
        return push(p, make_seq(p, YC_PK_LIST, NULL, 0));
    case '}':
        return push(p, new_value(p, YC_PK_DICT));
    case 0x8f:
        return push(p, make_seq(p, YC_PK_SET, NULL, 0));
    case 't':
    case 'l':
    case 0x91:
        if ((status = pop_mark(p, &start, &n)))
            return status;
        return push(p, make_seq(p, p->op == 't' ? YC_PK_TUPLE : p->op == 'l' ? YC_PK_LIST
                                                                            : YC_PK_SET,
                                n ? p->stack + start : NULL, n));
    case 0x85:
    case 0x86:
    case 0x87:
        n = (size_t)(p->op - 0x84);
        if (p->sp - floor_of(p) < n)
            return fail(p, YC_EFORMAT, "stack underflow");
        p->sp -= n;
        return push(p, make_seq(p, YC_PK_TUPLE, p->stack + p->sp, n));
    case 'd':
        if ((status = pop_mark(p, &start, &n)))
            return status;
        if (n % 2)
            return fail(p, YC_EFORMAT, "odd number of items for a dict");
        if (!(v = new_value(p, YC_PK_DICT)))
            return YC_ENOMEM;
        for (size_t i = 0; i < n && !status; i += 2)
            status = dict_set(p, v, p->stack[start + i], p->stack[start + i + 1]);
        return status ? status : push(p, v);
    case 'a':
        if ((status = pop(p, &a)))
            return status;
        return add_items(p, &a, 1);
    case 's': {
        yc_pk_value *kv[2];
        if ((status = pop(p, &kv[1])) || (status = pop(p, &kv[0])))
            return status;
        return add_items(p, kv, 2);
    }
    case 'e':
    case 'u':
    case 0x90:
        if ((status = pop_mark(p, &start, &n)))
            return status;
        /* n may be 0 with no stack allocated yet: no pointer arithmetic on NULL */
        return add_items(p, n ? p->stack + start : NULL, n);
    case 'c':
        return op_global(p);
    case 0x93:
        if ((status = pop(p, &b)) || (status = pop(p, &a)))
            return status;
        if (a->kind != YC_PK_STR || b->kind != YC_PK_STR)
            return fail(p, YC_EFORMAT, "module and name must be strings");
        return push_global(p, a->u.str.data, a->u.str.len, b->u.str.data, b->u.str.len);
    case 'R':
        return op_reduce(p);
    case 0x81:
    case 0x92:
        return op_newobj(p, p->op == 0x92);
    case 'b':
        return op_build(p);
    case 'Q':
        if ((status = pop(p, &a)))
            return status;
        if (!(v = new_value(p, YC_PK_PERSID)))
            return YC_ENOMEM;
        v->u.persid = a;
        return push(p, v);
    case 'q':
    case 'r':
        if ((status = read_uint(p, p->op == 'q' ? 1 : 4, &u)))
            return status;
        return memo_put(p, u);
    case 0x94:
        return memo_put(p, p->memo_count);
    case 'h':
    case 'j':
        if ((status = read_uint(p, p->op == 'h' ? 1 : 4, &u)))
            return status;
        return memo_get(p, u);
    default:
        if (op_name(p->op))
            return fail(p, YC_EUNSUPPORTED, "opcode not supported (torch.save does not write it)");
        return fail(p, YC_EFORMAT, "unknown opcode (not a pickle, or a damaged one)");
    }
}

int yc_pk_load(yc_pickle **out, const yc_pk_value **root, const void *data, size_t len,
               const yc_pk_limits *limits)
{
    *out = NULL;
    *root = NULL;
    yc_pickle *p = yc_calloc(1, sizeof *p, "pickle");
    if (!p)
        return YC_ENOMEM;
    if (limits)
        p->lim = *limits;
    else
        yc_pk_default_limits(&p->lim);
    p->data = data;
    p->len = len;
    int status = YC_OK;
    if (!(p->none = new_value(p, YC_PK_NONE)) || !(p->true_v = new_value(p, YC_PK_BOOL)) ||
        !(p->false_v = new_value(p, YC_PK_BOOL)))
        status = null_status(p);
    if (!status)
        p->true_v->u.b = true;
    bool stop = false;
    while (!status && !stop) {
        if (p->pos >= p->len) {
            p->op_pos = p->pos;
            p->op = '.';
            status = fail(p, YC_EFORMAT, "data ends before STOP (truncated file?)");
            break;
        }
        status = step(p, root, &stop);
    }
    free(p->stack);
    free(p->marks);
    free(p->memo);
    p->stack = NULL;
    p->marks = NULL;
    p->memo = NULL;
    if (status) {
        *root = NULL;
        yc_pk_free(p);
        return status < 0 ? status : YC_EFORMAT;
    }
    *out = p;
    return YC_OK;
}

/* ---- accessors ----------------------------------------------------------------------------- */

bool yc_pk_is_str(const yc_pk_value *v, const char *s)
{
    return v && v->kind == YC_PK_STR && strlen(v->u.str.data) == v->u.str.len &&
           strcmp(v->u.str.data, s) == 0;
}

bool yc_pk_is_global(const yc_pk_value *v, const char *module, const char *name)
{
    return v && v->kind == YC_PK_GLOBAL && strcmp(v->u.global.module, module) == 0 &&
           strcmp(v->u.global.name, name) == 0;
}

bool yc_pk_is_none(const yc_pk_value *v)
{
    return !v || v->kind == YC_PK_NONE;
}

const yc_pk_value *yc_pk_dict_get(const yc_pk_value *dict, const char *key)
{
    if (!dict || dict->kind != YC_PK_DICT)
        return NULL;
    for (size_t i = dict->u.dict.n; i-- > 0;)
        if (yc_pk_is_str(dict->u.dict.keys[i], key))
            return dict->u.dict.values[i];
    return NULL;
}

const char *yc_pk_kind_name(yc_pk_kind kind)
{
    switch (kind) {
    case YC_PK_NONE: return "None";
    case YC_PK_BOOL: return "bool";
    case YC_PK_INT: return "int";
    case YC_PK_BIGINT: return "int";
    case YC_PK_FLOAT: return "float";
    case YC_PK_STR: return "str";
    case YC_PK_BYTES: return "bytes";
    case YC_PK_TUPLE: return "tuple";
    case YC_PK_LIST: return "list";
    case YC_PK_SET: return "set";
    case YC_PK_DICT: return "dict";
    case YC_PK_GLOBAL: return "global";
    case YC_PK_OBJECT: return "object";
    case YC_PK_PERSID: return "persistent id";
    case YC_PK_TENSOR: return "tensor";
    }
    return "value";
}

void yc_pk_describe(const yc_pk_value *v, char *buf, size_t len)
{
    if (!len)
        return;
    if (!v) {
        snprintf(buf, len, "nothing");
        return;
    }
    switch (v->kind) {
    case YC_PK_NONE:
        snprintf(buf, len, "None");
        break;
    case YC_PK_BOOL:
        snprintf(buf, len, "%s", v->u.b ? "True" : "False");
        break;
    case YC_PK_INT:
        snprintf(buf, len, "int %lld", (long long)v->u.i);
        break;
    case YC_PK_BIGINT:
        snprintf(buf, len, "int (wider than 64 bits)");
        break;
    case YC_PK_FLOAT:
        snprintf(buf, len, "float %g", v->u.f);
        break;
    case YC_PK_STR:
        snprintf(buf, len, "str '%.40s%s'", v->u.str.data, v->u.str.len > 40 ? "..." : "");
        break;
    case YC_PK_BYTES:
        snprintf(buf, len, "bytes (%zu)", v->u.str.len);
        break;
    case YC_PK_TUPLE:
    case YC_PK_LIST:
    case YC_PK_SET:
        snprintf(buf, len, "%s of %zu items", yc_pk_kind_name(v->kind), v->u.seq.n);
        break;
    case YC_PK_DICT:
        snprintf(buf, len, "dict of %zu items", v->u.dict.n);
        break;
    case YC_PK_GLOBAL:
        snprintf(buf, len, "global %s.%s", v->u.global.module, v->u.global.name);
        break;
    case YC_PK_OBJECT:
        if (v->u.obj.cls && v->u.obj.cls->kind == YC_PK_GLOBAL)
            snprintf(buf, len, "object %s.%s", v->u.obj.cls->u.global.module,
                     v->u.obj.cls->u.global.name);
        else
            snprintf(buf, len, "object");
        break;
    case YC_PK_PERSID:
        snprintf(buf, len, "persistent id");
        break;
    case YC_PK_TENSOR: {
        size_t used = (size_t)snprintf(buf, len, "tensor [");
        for (int d = 0; d < v->u.tensor->ndim && used < len; d++)
            used += (size_t)snprintf(buf + used, len - used, "%s%lld", d ? ", " : "",
                                     (long long)v->u.tensor->size[d]);
        if (used < len)
            snprintf(buf + used, len - used, "]");
        break;
    }
    }
}
