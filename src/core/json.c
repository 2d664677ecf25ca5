/* A small, strict JSON parser and a string escaper (see json.h).
 *
 * The whole tree of a document lives in one arena (a list of blocks) that yc_json_free releases at
 * once.  Containers are parsed recursively (depth bounded by YC_JSON_MAX_DEPTH); their children are
 * collected on a shared growable stack and copied into the arena when the container closes, so
 * every array and object is one contiguous allocation. */
#include "json.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Objects with more members than this get a sorted index (duplicate check and lookup by binary
 * search); smaller ones are compared pairwise and searched linearly. */
#define SMALL_OBJECT 8
/* Arena block size (larger requests get a block of their own). */
#define BLOCK_SIZE ((size_t)64 << 10)

typedef struct member {
    /* key (NUL-terminated; NULL for array elements while on the stack) */
    const char *key;
    /* key length in bytes */
    size_t key_len;
    /* byte offset of the key's opening quote */
    size_t key_offset;
    /* the value */
    yc_json *value;
} member;

struct yc_json {
    yc_json_type type;
    /* byte offset of the first character */
    size_t offset;
    union {
        bool b;
        struct {
            double value;
            const char *text;
        } num;
        struct {
            const char *s;
            size_t len;
        } str;
        struct {
            yc_json **items;
            size_t n;
        } arr;
        struct {
            member *m;
            size_t n;
            /* members sorted by key, or NULL for small objects */
            const member **sorted;
        } obj;
    } u;
};

typedef struct block {
    struct block *next;
    size_t size, used;
    max_align_t data[];
} block;

/* A document: its arena and its root value (what yc_json_parse hands out). */
typedef struct doc {
    block *blocks;
    yc_json root;
} doc;

typedef struct parser {
    const unsigned char *s;
    size_t len, pos;
    doc *d;
    /* children of the containers being parsed */
    member *stack;
    size_t top, cap;
} parser;

/* Allocates n bytes (aligned for any type) from the document's arena; NULL with YC_ENOMEM
 * recorded on failure. */
static void *arena_alloc(doc *d, size_t n)
{
    const size_t align = _Alignof(max_align_t);
    if (n > SIZE_MAX - align)
        goto oom;
    n = (n + align - 1) / align * align;
    block *b = d->blocks;
    if (!b || b->size - b->used < n) {
        size_t size = n > BLOCK_SIZE ? n : BLOCK_SIZE;
        if (size > SIZE_MAX - sizeof(block))
            goto oom;
        block *nb = yc_malloc(sizeof(block) + size, "JSON document");
        if (!nb)
            return NULL;
        nb->size = size;
        nb->used = 0;
        if (b && n > BLOCK_SIZE) {
            /* keep filling the current block; the big one goes behind it */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            d->blocks = nb;
        }
        b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
oom:
    yc_error_status(YC_ENOMEM, "out of memory: JSON document too large");
    return NULL;
}

/* Records "invalid JSON at byte `at`: <message>" and returns YC_EFORMAT. */
static int fail(size_t at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(size_t at, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return yc_error_status(YC_EFORMAT, "invalid JSON at byte %zu: %s", at, msg);
}

/* Describes the byte at p->pos for an error message ("'x'", "byte 0x01", "end of input"). */
static const char *describe(const parser *p, char *buf, size_t cap)
{
    if (p->pos >= p->len) {
        snprintf(buf, cap, "end of input");
    } else {
        unsigned c = p->s[p->pos];
        if (c >= 0x20 && c < 0x7f)
            snprintf(buf, cap, "'%c'", (char)c);
        else
            snprintf(buf, cap, "byte 0x%02x", c);
    }
    return buf;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0 if it is not valid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c < 0xc2)
        return 0;
    if (c < 0xe0)
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c < 0xf0) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))
            return 0;
        return 3;
    }
    if (c < 0xf5) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

bool yc_json_utf8_valid(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t k = utf8_seq(u + i, len - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

/* Writes code point cp as UTF-8 at out; returns the number of bytes. */
static size_t utf8_put(unsigned char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Reads 4 hex digits at s[i..i+4) (all before `end`) into *cp; false if there are not 4. */
static bool hex4(const unsigned char *s, size_t i, size_t end, uint32_t *cp)
{
    if (end < 4 || i > end - 4)
        return false;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; k++) {
        unsigned c = s[i + k];
        uint32_t d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return false;
        v = v * 16 + d;
    }
    *cp = v;
    return true;
}

/* Parses the string whose opening quote is at p->pos into the arena. */
static int parse_string(parser *p, const char **out, size_t *out_len)
{
    const unsigned char *s = p->s;
    size_t open = p->pos, start = open + 1, end = start;
    while (end < p->len && s[end] != '"')
        end += s[end] == '\\' ? 2 : 1;
    if (end >= p->len)
        return fail(open, "unterminated string");
    unsigned char *dst = arena_alloc(p->d, end - start + 1);
    if (!dst)
        return YC_ENOMEM;
    size_t n = 0, i = start;
    while (i < end) {
        unsigned c = s[i];
        if (c < 0x20)
            return fail(i, "control character 0x%02x in a string (it must be escaped)", c);
        if (c >= 0x80) {
            size_t k = utf8_seq(s + i, end - i);
            if (!k)
                return fail(i, "invalid UTF-8 in a string");
            memcpy(dst + n, s + i, k);
            n += k;
            i += k;
            continue;
        }
        if (c != '\\') {
            dst[n++] = (unsigned char)c;
            i++;
            continue;
        }
        unsigned e = s[i + 1];
        switch (e) {
        case '"': dst[n++] = '"'; break;
        case '\\': dst[n++] = '\\'; break;
        case '/': dst[n++] = '/'; break;
        case 'b': dst[n++] = '\b'; break;
        case 'f': dst[n++] = '\f'; break;
        case 'n': dst[n++] = '\n'; break;
        case 'r': dst[n++] = '\r'; break;
        case 't': dst[n++] = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (!hex4(s, i + 2, end, &cp))
                return fail(i, "\\u must be followed by 4 hexadecimal digits");
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return fail(i, "unpaired low surrogate \\u%04X", (unsigned)cp);
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (i + 7 >= end || s[i + 6] != '\\' || s[i + 7] != 'u' ||
                    !hex4(s, i + 8, end, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return fail(i, "high surrogate \\u%04X not followed by a low surrogate",
                                (unsigned)cp);
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            }
            n += utf8_put(dst + n, cp);
            i += 6;
            continue;
        }
        default:
            if (e >= 0x20 && e < 0x7f)
                return fail(i, "invalid escape \\%c", (char)e);
            return fail(i, "invalid escape (backslash followed by byte 0x%02x)", e);
        }
        i += 2;
    }
    dst[n] = '\0';
    *out = (const char *)dst;
    *out_len = n;
    p->pos = end + 1;
    return YC_OK;
}

/* Converts the number text (valid JSON syntax) with strtod, whatever the current locale's decimal
 * point is. */
static int convert_number(const char *text, size_t len, size_t at, double *out)
{
    const char *dp = localeconv()->decimal_point;
    double v;
    if (!dp || strcmp(dp, ".") == 0 || !memchr(text, '.', len)) {
        v = strtod(text, NULL);
    } else {
        size_t dl = strlen(dp);
        char *tmp = yc_malloc(len + dl + 1, "JSON number");
        if (!tmp)
            return YC_ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
            if (text[i] == '.') {
                memcpy(tmp + n, dp, dl);
                n += dl;
            } else {
                tmp[n++] = text[i];
            }
        }
        tmp[n] = '\0';
        v = strtod(tmp, NULL);
        free(tmp);
    }
    if (isinf(v))
        return fail(at, "number %.40s%s is out of range", text, len > 40 ? "..." : "");
    *out = v;
    return YC_OK;
}

static bool is_digit(const parser *p)
{
    return p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9';
}

/* Parses a number at p->pos (which holds '-' or a digit). */
static int parse_number(parser *p, yc_json *v)
{
    char what[16];
    size_t start = p->pos;
    if (p->s[p->pos] == '-')
        p->pos++;
    if (!is_digit(p))
        return fail(p->pos, "expected a digit, found %s", describe(p, what, sizeof what));
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (is_digit(p))
            return fail(start, "numbers must not have leading zeros");
    } else {
        while (is_digit(p))
            p->pos++;
    }
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        if (!is_digit(p))
            return fail(p->pos, "expected a digit after the decimal point, found %s",
                        describe(p, what, sizeof what));
        while (is_digit(p))
            p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        if (!is_digit(p))
            return fail(p->pos, "expected a digit in the exponent, found %s",
                        describe(p, what, sizeof what));
        while (is_digit(p))
            p->pos++;
    }
    size_t len = p->pos - start;
    char *text = arena_alloc(p->d, len + 1);
    if (!text)
        return YC_ENOMEM;
    memcpy(text, p->s + start, len);
    text[len] = '\0';
    v->type = YC_JSON_NUMBER;
    v->u.num.text = text;
    return convert_number(text, len, start, &v->u.num.value);
}

/* Parses the literal `word` (true, false, null) at p->pos. */
static int parse_literal(parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p->pos, "invalid literal (expected '%s')", word);
    p->pos += n;
    return YC_OK;
}

/* Pushes a child onto the parser's stack. */
static int push(parser *p, const member *m)
{
    if (p->top == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        member *ns = yc_realloc(p->stack, cap * sizeof *ns, "JSON parser stack");
        if (!ns)
            return YC_ENOMEM;
        p->stack = ns;
        p->cap = cap;
    }
    p->stack[p->top++] = *m;
    return YC_OK;
}

static int key_cmp(const char *a, size_t la, const char *b, size_t lb)
{
    int c = memcmp(a, b, la < lb ? la : lb);
    if (c)
        return c;
    return la < lb ? -1 : la > lb;
}

static int member_ptr_cmp(const void *a, const void *b)
{
    const member *x = *(const member *const *)a, *y = *(const member *const *)b;
    return key_cmp(x->key, x->key_len, y->key, y->key_len);
}

static int parse_value(parser *p, yc_json *v, int depth);

/* Moves the children pushed since `base` into the arena as the container's storage. */
static int close_array(parser *p, yc_json *v, size_t base)
{
    size_t n = p->top - base;
    v->type = YC_JSON_ARRAY;
    v->u.arr.n = n;
    v->u.arr.items = NULL;
    if (n) {
        v->u.arr.items = arena_alloc(p->d, n * sizeof(yc_json *));
        if (!v->u.arr.items)
            return YC_ENOMEM;
        for (size_t i = 0; i < n; i++)
            v->u.arr.items[i] = p->stack[base + i].value;
    }
    p->top = base;
    return YC_OK;
}

/* Reports a duplicate key (the later occurrence). */
static int duplicate_key(const member *a, const member *b)
{
    const member *later = a->key_offset > b->key_offset ? a : b;
    return fail(later->key_offset, "duplicate key \"%.60s\"", later->key);
}

static int close_object(parser *p, yc_json *v, size_t base)
{
    size_t n = p->top - base;
    v->type = YC_JSON_OBJECT;
    v->u.obj.n = n;
    v->u.obj.m = NULL;
    v->u.obj.sorted = NULL;
    if (!n)
        return YC_OK;
    member *m = arena_alloc(p->d, n * sizeof *m);
    if (!m)
        return YC_ENOMEM;
    memcpy(m, p->stack + base, n * sizeof *m);
    p->top = base;
    v->u.obj.m = m;
    if (n <= SMALL_OBJECT) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (key_cmp(m[i].key, m[i].key_len, m[j].key, m[j].key_len) == 0)
                    return duplicate_key(&m[j], &m[i]);
        return YC_OK;
    }
    const member **sorted = arena_alloc(p->d, n * sizeof *sorted);
    if (!sorted)
        return YC_ENOMEM;
    for (size_t i = 0; i < n; i++)
        sorted[i] = &m[i];
    qsort(sorted, n, sizeof *sorted, member_ptr_cmp);
    for (size_t i = 1; i < n; i++)
        if (member_ptr_cmp(&sorted[i - 1], &sorted[i]) == 0)
            return duplicate_key(sorted[i - 1], sorted[i]);
    v->u.obj.sorted = sorted;
    return YC_OK;
}

/* Parses an array or object whose opening bracket is at p->pos; depth counts this container. */
static int parse_container(parser *p, yc_json *v, int depth)
{
    char what[16];
    bool obj = p->s[p->pos] == '{';
    char close = obj ? '}' : ']';
    if (depth > YC_JSON_MAX_DEPTH)
        return fail(p->pos, "nesting deeper than %d levels", YC_JSON_MAX_DEPTH);
    size_t base = p->top;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return obj ? close_object(p, v, base) : close_array(p, v, base);
    }
    for (;;) {
        member m = {NULL, 0, 0, NULL};
        int st;
        if (obj) {
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fail(p->pos, "expected a string key, found %s",
                            describe(p, what, sizeof what));
            m.key_offset = p->pos;
            if ((st = parse_string(p, &m.key, &m.key_len)))
                return st;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return fail(p->pos, "expected ':' after a key, found %s",
                            describe(p, what, sizeof what));
            p->pos++;
        }
        m.value = arena_alloc(p->d, sizeof(yc_json));
        if (!m.value)
            return YC_ENOMEM;
        if ((st = parse_value(p, m.value, depth)) || (st = push(p, &m)))
            return st;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return obj ? close_object(p, v, base) : close_array(p, v, base);
        }
        return fail(p->pos, "expected ',' or '%c', found %s", close,
                    describe(p, what, sizeof what));
    }
}

/* Parses one value (after optional whitespace) into v; depth is that of the enclosing
 * container. */
static int parse_value(parser *p, yc_json *v, int depth)
{
    char what[16];
    skip_ws(p);
    memset(v, 0, sizeof *v);
    v->offset = p->pos;
    if (p->pos >= p->len)
        return fail(p->pos, "expected a value, found end of input");
    unsigned char c = p->s[p->pos];
    switch (c) {
    case '{':
    case '[':
        return parse_container(p, v, depth + 1);
    case '"':
        v->type = YC_JSON_STRING;
        return parse_string(p, &v->u.str.s, &v->u.str.len);
    case 't':
        v->type = YC_JSON_BOOL;
        v->u.b = true;
        return parse_literal(p, "true");
    case 'f':
        v->type = YC_JSON_BOOL;
        return parse_literal(p, "false");
    case 'n':
        v->type = YC_JSON_NULL;
        return parse_literal(p, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return parse_number(p, v);
        return fail(p->pos, "expected a value, found %s", describe(p, what, sizeof what));
    }
}

static void free_doc(doc *d)
{
    block *b = d->blocks;
    while (b) {
        block *next = b->next;
        free(b);
        b = next;
    }
    free(d);
}

int yc_json_parse(yc_json **root, const char *text, size_t len)
{
    *root = NULL;
    if (!text && len)
        return yc_error_status(YC_EFORMAT, "invalid JSON: no text");
    if (len > YC_JSON_MAX_TEXT)
        return yc_error_status(YC_EFORMAT, "invalid JSON: %zu bytes is more than the limit of %zu",
                               len, YC_JSON_MAX_TEXT);
    const unsigned char *s = (const unsigned char *)text;
    if (len >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf)
        return fail(0, "byte order mark is not allowed");
    doc *d = yc_calloc(1, sizeof *d, "JSON document");
    if (!d)
        return YC_ENOMEM;
    parser p = {.s = s, .len = len, .d = d};
    int st = parse_value(&p, &d->root, 0);
    if (st == YC_OK) {
        char what[16];
        skip_ws(&p);
        if (p.pos < p.len)
            st = fail(p.pos, "unexpected %s after the value", describe(&p, what, sizeof what));
    }
    free(p.stack);
    if (st != YC_OK) {
        free_doc(d);
        return st;
    }
    *root = &d->root;
    return YC_OK;
}

void yc_json_free(yc_json *root)
{
    if (root)
        free_doc((doc *)(void *)((char *)root - offsetof(doc, root)));
}

yc_json_type yc_json_typeof(const yc_json *v)
{
    return v ? v->type : YC_JSON_NULL;
}

const char *yc_json_type_name(yc_json_type t)
{
    switch (t) {
    case YC_JSON_NULL: return "null";
    case YC_JSON_BOOL: return "boolean";
    case YC_JSON_NUMBER: return "number";
    case YC_JSON_STRING: return "string";
    case YC_JSON_ARRAY: return "array";
    case YC_JSON_OBJECT: return "object";
    }
    return "unknown";
}

size_t yc_json_offset(const yc_json *v)
{
    return v ? v->offset : 0;
}

size_t yc_json_len(const yc_json *v)
{
    if (!v)
        return 0;
    if (v->type == YC_JSON_ARRAY)
        return v->u.arr.n;
    if (v->type == YC_JSON_OBJECT)
        return v->u.obj.n;
    return 0;
}

const yc_json *yc_json_at(const yc_json *v, size_t i)
{
    if (!v)
        return NULL;
    if (v->type == YC_JSON_ARRAY)
        return i < v->u.arr.n ? v->u.arr.items[i] : NULL;
    if (v->type == YC_JSON_OBJECT)
        return i < v->u.obj.n ? v->u.obj.m[i].value : NULL;
    return NULL;
}

const char *yc_json_key_at(const yc_json *v, size_t i, size_t *len)
{
    if (len)
        *len = 0;
    if (!v || v->type != YC_JSON_OBJECT || i >= v->u.obj.n)
        return NULL;
    if (len)
        *len = v->u.obj.m[i].key_len;
    return v->u.obj.m[i].key;
}

const yc_json *yc_json_get(const yc_json *obj, const char *key)
{
    if (!obj || !key || obj->type != YC_JSON_OBJECT)
        return NULL;
    size_t kl = strlen(key), n = obj->u.obj.n;
    if (!obj->u.obj.sorted) {
        for (size_t i = 0; i < n; i++)
            if (key_cmp(obj->u.obj.m[i].key, obj->u.obj.m[i].key_len, key, kl) == 0)
                return obj->u.obj.m[i].value;
        return NULL;
    }
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const member *m = obj->u.obj.sorted[mid];
        int c = key_cmp(m->key, m->key_len, key, kl);
        if (c == 0)
            return m->value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *yc_json_string(const yc_json *v)
{
    return v && v->type == YC_JSON_STRING ? v->u.str.s : NULL;
}

size_t yc_json_string_len(const yc_json *v)
{
    return v && v->type == YC_JSON_STRING ? v->u.str.len : 0;
}

bool yc_json_bool(const yc_json *v)
{
    return v && v->type == YC_JSON_BOOL && v->u.b;
}

double yc_json_number(const yc_json *v)
{
    return v && v->type == YC_JSON_NUMBER ? v->u.num.value : 0.0;
}

const char *yc_json_number_text(const yc_json *v)
{
    return v && v->type == YC_JSON_NUMBER ? v->u.num.text : NULL;
}

/* Reads an integer-syntax number as sign and magnitude; fails for anything else or when the
 * magnitude exceeds `limit`. */
static int get_integer(const yc_json *v, uint64_t limit, bool *neg, uint64_t *mag)
{
    if (!v || v->type != YC_JSON_NUMBER)
        return yc_error_status(YC_EFORMAT, "expected an integer at byte %zu, found %s",
                               yc_json_offset(v), v ? yc_json_type_name(v->type) : "nothing");
    const char *t = v->u.num.text;
    const char *d = t;
    *neg = *d == '-';
    if (*neg)
        d++;
    uint64_t x = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9')
            return yc_error_status(YC_EFORMAT, "expected an integer at byte %zu, found %.40s",
                                   v->offset, t);
        unsigned digit = (unsigned)(*d - '0');
        if (x > (limit - digit) / 10)
            return yc_error_status(YC_EFORMAT, "integer %.40s at byte %zu is out of range", t,
                                   v->offset);
        x = x * 10 + digit;
    }
    *mag = x;
    return YC_OK;
}

int yc_json_get_i64(const yc_json *v, int64_t *out)
{
    bool neg = false;
    uint64_t mag = 0;
    uint64_t limit = (uint64_t)INT64_MAX + 1;
    int st = get_integer(v, limit, &neg, &mag);
    if (st)
        return st;
    if (!neg && mag == limit)
        return yc_error_status(YC_EFORMAT, "integer %.40s at byte %zu is out of range",
                               v->u.num.text, v->offset);
    if (neg)
        *out = mag == limit ? INT64_MIN : -(int64_t)mag;
    else
        *out = (int64_t)mag;
    return YC_OK;
}

int yc_json_get_u64(const yc_json *v, uint64_t *out)
{
    bool neg = false;
    uint64_t mag = 0;
    int st = get_integer(v, UINT64_MAX, &neg, &mag);
    if (st)
        return st;
    if (neg && mag != 0)
        return yc_error_status(YC_EFORMAT, "integer %.40s at byte %zu must not be negative",
                               v->u.num.text, v->offset);
    *out = mag;
    return YC_OK;
}

size_t yc_json_escape(char *dst, size_t cap, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t n = 0;
#define PUT(ch)                          \
    do {                                 \
        if (n + 1 < cap)                 \
            dst[n] = (char)(ch);         \
        n++;                             \
    } while (0)
    PUT('"');
    size_t i = 0;
    while (i < len) {
        unsigned c = u[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) {
            for (; *esc; esc++)
                PUT(*esc);
            i++;
        } else if (c < 0x20) {
            PUT('\\');
            PUT('u');
            PUT('0');
            PUT('0');
            PUT(hex[c >> 4]);
            PUT(hex[c & 15]);
            i++;
        } else if (c < 0x80) {
            PUT(c);
            i++;
        } else {
            size_t k = utf8_seq(u + i, len - i);
            if (!k) {
                for (esc = "\\ufffd"; *esc; esc++)
                    PUT(*esc);
                i++;
            } else {
                for (size_t j = 0; j < k; j++)
                    PUT(u[i + j]);
                i += k;
            }
        }
    }
    PUT('"');
#undef PUT
    if (cap)
        dst[n < cap ? n : cap - 1] = '\0';
    return n;
}

char *yc_json_quote(const char *s, size_t len)
{
    size_t n = yc_json_escape(NULL, 0, s, len);
    char *buf = yc_malloc(n + 1, "JSON string");
    if (buf)
        yc_json_escape(buf, n + 1, s, len);
    return buf;
}
