/* Tests of the core file formats: the JSON parser and escaper, and safetensors reading and writing
 * (round trips, every half-precision value, malformed files, the tiny fixture). */
#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "safetensors.h"
#include "util.h"
#include "harness.h"

/* Parses a NUL-terminated text; returns the root (or NULL) and the status through *st. */
static yc_json *parse(const char *text, int *st)
{
    yc_json *root = NULL;
    *st = yc_json_parse(&root, text, strlen(text));
    return root;
}

/* ------------------------------------------------------------------------------------------------
 * JSON
 * ---------------------------------------------------------------------------------------------- */

START_TEST(json_basic)
{
    int st;
    yc_json *root = parse(" {\"b\": 1, \"a\": [true, false, null, \"x\", -1.5e2, 0], \"c\": {}}\n",
                          &st);
    ck_assert_int_eq(st, YC_OK);
    ck_assert_ptr_nonnull(root);
    ck_assert_int_eq(yc_json_typeof(root), YC_JSON_OBJECT);
    ck_assert_uint_eq(yc_json_offset(root), 1);
    ck_assert_uint_eq(yc_json_len(root), 3);
    ck_assert_str_eq(yc_json_key_at(root, 0, NULL), "b");
    ck_assert_str_eq(yc_json_key_at(root, 1, NULL), "a");
    ck_assert_str_eq(yc_json_key_at(root, 2, NULL), "c");
    ck_assert_ptr_null(yc_json_key_at(root, 3, NULL));
    ck_assert_ptr_eq(yc_json_at(root, 0), yc_json_get(root, "b"));
    ck_assert_ptr_null(yc_json_get(root, "d"));
    ck_assert_ptr_null(yc_json_get(root, ""));
    const yc_json *a = yc_json_get(root, "a");
    ck_assert_int_eq(yc_json_typeof(a), YC_JSON_ARRAY);
    ck_assert_uint_eq(yc_json_len(a), 6);
    ck_assert_int_eq(yc_json_typeof(yc_json_at(a, 0)), YC_JSON_BOOL);
    ck_assert(yc_json_bool(yc_json_at(a, 0)));
    ck_assert(!yc_json_bool(yc_json_at(a, 1)));
    ck_assert_int_eq(yc_json_typeof(yc_json_at(a, 2)), YC_JSON_NULL);
    ck_assert_str_eq(yc_json_string(yc_json_at(a, 3)), "x");
    ck_assert(yc_json_number(yc_json_at(a, 4)) == -150.0);
    ck_assert_str_eq(yc_json_number_text(yc_json_at(a, 4)), "-1.5e2");
    ck_assert(yc_json_number(yc_json_at(a, 5)) == 0.0);
    ck_assert_ptr_null(yc_json_at(a, 6));
    ck_assert_uint_eq(yc_json_offset(yc_json_at(a, 3)), 35);
    const yc_json *c = yc_json_get(root, "c");
    ck_assert_int_eq(yc_json_typeof(c), YC_JSON_OBJECT);
    ck_assert_uint_eq(yc_json_len(c), 0);
    /* wrong types and NULL give neutral answers */
    ck_assert_ptr_null(yc_json_string(a));
    ck_assert_ptr_null(yc_json_get(a, "x"));
    ck_assert_ptr_null(yc_json_at(yc_json_at(a, 3), 0));
    ck_assert_uint_eq(yc_json_len(NULL), 0);
    ck_assert_ptr_null(yc_json_number_text(NULL));
    ck_assert_str_eq(yc_json_type_name(YC_JSON_OBJECT), "object");
    yc_json_free(root);
    yc_json_free(NULL);

    /* scalars at the top level */
    root = parse("  \"top\"  ", &st);
    ck_assert_int_eq(st, YC_OK);
    ck_assert_str_eq(yc_json_string(root), "top");
    yc_json_free(root);
    root = parse("-0.25E-1", &st);
    ck_assert_int_eq(st, YC_OK);
    ck_assert(yc_json_number(root) == -0.025);
    yc_json_free(root);
    root = parse("1e-400", &st);
    ck_assert_int_eq(st, YC_OK);
    ck_assert(yc_json_number(root) == 0.0);
    yc_json_free(root);
}
END_TEST

START_TEST(json_locale)
{
    /* numbers parse the same under a locale whose decimal point is a comma (when one exists) */
    const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "de_DE"};
    bool found = false;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !found; i++)
        found = setlocale(LC_NUMERIC, names[i]) != NULL;
    if (!found)
        return;
    int st;
    yc_json *root = parse("[0.5, -1.25e1]", &st);
    setlocale(LC_NUMERIC, "C");
    ck_assert_int_eq(st, YC_OK);
    ck_assert(yc_json_number(yc_json_at(root, 0)) == 0.5);
    ck_assert(yc_json_number(yc_json_at(root, 1)) == -12.5);
    yc_json_free(root);
}
END_TEST

START_TEST(json_escapes)
{
    int st;
    yc_json *root = parse("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20AC\\ud83d\\ude00\xc3\xa9\"",
                          &st);
    ck_assert_int_eq(st, YC_OK);
    const char want[] = "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xc3\xa9";
    ck_assert_uint_eq(yc_json_string_len(root), sizeof want - 1);
    ck_assert_mem_eq(yc_json_string(root), want, sizeof want);
    yc_json_free(root);

    root = parse("{\"k\\u0000ey\": \"a\\u0000b\"}", &st);
    ck_assert_int_eq(st, YC_OK);
    size_t klen;
    const char *key = yc_json_key_at(root, 0, &klen);
    ck_assert_uint_eq(klen, 4);
    ck_assert_mem_eq(key, "k\0ey", 5);
    ck_assert_uint_eq(yc_json_string_len(yc_json_at(root, 0)), 3);
    ck_assert_mem_eq(yc_json_string(yc_json_at(root, 0)), "a\0b", 4);
    ck_assert_ptr_null(yc_json_get(root, "k"));
    yc_json_free(root);

    /* the largest code point, and U+FFFF */
    root = parse("[\"\\udbff\\udfff\", \"\\uffff\", \"\xf4\x8f\xbf\xbf\"]", &st);
    ck_assert_int_eq(st, YC_OK);
    ck_assert_str_eq(yc_json_string(yc_json_at(root, 0)), "\xf4\x8f\xbf\xbf");
    ck_assert_str_eq(yc_json_string(yc_json_at(root, 1)), "\xef\xbf\xbf");
    ck_assert_str_eq(yc_json_string(yc_json_at(root, 2)), "\xf4\x8f\xbf\xbf");
    yc_json_free(root);
}
END_TEST

/* Inputs the parser must reject, with the byte offset the message must name (or -1). */
static const struct {
    const char *text;
    long at;
} bad_json[] = {
    {"", 0},
    {"   ", 3},
    {"{", 1},
    {"[", 1},
    {"[1,]", 3},
    {"[1 2]", 3},
    {"{\"a\" 1}", 5},
    {"{\"a\":1,}", 7},
    {"{a:1}", 1},
    {"{'a':1}", 1},
    {"{\"a\":1}}", 7},
    {"[1]x", 3},
    {"01", 0},
    {"-", 1},
    {"-a", 1},
    {"1.", 2},
    {".5", 0},
    {"+1", 0},
    {"1e", 2},
    {"1e+", 3},
    {"NaN", 0},
    {"Infinity", 0},
    {"-Infinity", 1},
    {"1e400", 0},
    {"tru", 0},
    {"nul", 0},
    {"True", 0},
    {"\"abc", 0},
    {"\"a\tb\"", 2},
    {"\"a\nb\"", 2},
    {"\"\\x\"", 1},
    {"\"\\u12\"", 1},
    {"\"\\u12G4\"", 1},
    {"\"\\ud800\"", 1},
    {"\"\\ud800\\u0041\"", 1},
    {"\"\\udc00\"", 1},
    {"\"\\ud800x\"", 1},
    {"\"\xc0\x80\"", 1},
    {"\"\xc3\"", 1},
    {"\"\xed\xa0\x80\"", 1},
    {"\"\xf5\x80\x80\x80\"", 1},
    {"\"\xf4\x90\x80\x80\"", 1},
    {"\"\xe0\x80\xaf\"", 1},
    {"\"\x80\"", 1},
    {"\xef\xbb\xbf{}", 0},
    {"{\"a\":1,\"a\":2}", 7},
    {"{\"a\":1,\"b\":{\"x\":1,\"x\":1}}", 18},
    {"[1] // comment", 4},
    {"/* c */ 1", 0},
    {"[1,\x01]", 3},
    {"\x00", 0},
};

START_TEST(json_bad)
{
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        const char *text = bad_json[i].text;
        size_t len = strlen(text);
        if (len == 0 && i > 0)
            len = 1; /* "\x00": one NUL byte */
        yc_error_clear();
        yc_json *root = (yc_json *)1;
        int st = yc_json_parse(&root, text, len);
        ck_assert_msg(st == YC_EFORMAT, "input %zu (%s) was accepted", i, text);
        ck_assert_ptr_null(root);
        char want[64];
        snprintf(want, sizeof want, "invalid JSON at byte %ld: ", bad_json[i].at);
        ck_assert_msg(strncmp(yc_last_error(), want, strlen(want)) == 0,
                      "input %zu (%s): message '%s', expected it to start with '%s'", i, text,
                      yc_last_error(), want);
    }
    yc_json *root;
    /* the size limit is checked before anything is read */
    ck_assert_int_eq(yc_json_parse(&root, "1", YC_JSON_MAX_TEXT + 1), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "limit"));
    ck_assert_int_eq(yc_json_parse(&root, NULL, 0), YC_EFORMAT);
    ck_assert_int_eq(yc_json_parse(&root, NULL, 5), YC_EFORMAT);
    ck_assert_ptr_null(root);
}
END_TEST

/* Parses `text` copied into a buffer of exactly `len` bytes (no NUL after it), so that a read past
 * the end is caught by memory checkers. */
static int parse_exact(const char *text, size_t len)
{
    char *buf = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, text, len);
    yc_json *root;
    int st = yc_json_parse(&root, buf, len);
    yc_json_free(root);
    free(buf);
    return st;
}

START_TEST(json_bounds)
{
    /* every proper prefix of these documents is invalid and must be rejected without reading past
     * the given length; the whole document is valid */
    const char *docs[] = {
        "{\"name\": [1.5e-3, -2, true, false, null, \"\\ud83d\\ude00\\n\", {\"k\": []}]}",
        "\"\xf0\x9f\x98\x80\\u00e9\"",
        "[0.5e+10]",
    };
    for (size_t d = 0; d < sizeof docs / sizeof docs[0]; d++) {
        size_t len = strlen(docs[d]);
        for (size_t n = 0; n < len; n++) {
            int st = parse_exact(docs[d], n);
            ck_assert_msg(st == YC_EFORMAT, "doc %zu prefix %zu accepted", d, n);
        }
        ck_assert_int_eq(parse_exact(docs[d], len), YC_OK);
    }
    /* a number at the very end of the buffer */
    ck_assert_int_eq(parse_exact("12345", 5), YC_OK);
    ck_assert_int_eq(parse_exact("12345", 3), YC_OK);
    /* a NUL inside the given length is data, not the end */
    ck_assert_int_eq(parse_exact("[1]\0", 4), YC_EFORMAT);
}
END_TEST

START_TEST(json_depth)
{
    char buf[400];
    for (int depth = 1; depth <= 66; depth++) {
        /* alternately {"k": and [ down to the given depth, then 1 and the closing brackets */
        size_t n = 0;
        for (int i = 0; i < depth; i++) {
            if (i % 2) {
                buf[n++] = '[';
            } else {
                memcpy(buf + n, "{\"k\":", 5);
                n += 5;
            }
        }
        buf[n++] = '1';
        for (int i = depth - 1; i >= 0; i--)
            buf[n++] = i % 2 ? ']' : '}';
        int st = parse_exact(buf, n);
        if (depth <= YC_JSON_MAX_DEPTH)
            ck_assert_msg(st == YC_OK, "depth %d rejected: %s", depth, yc_last_error());
        else
            ck_assert_msg(st == YC_EFORMAT && strstr(yc_last_error(), "nesting"),
                          "depth %d: %s", depth, yc_last_error());
    }
    /* very deep input fails quickly without exhausting the stack */
    size_t n = 1 << 20;
    char *deep = malloc(n);
    ck_assert_ptr_nonnull(deep);
    memset(deep, '[', n);
    ck_assert_int_eq(parse_exact(deep, n), YC_EFORMAT);
    free(deep);
}
END_TEST

START_TEST(json_integers)
{
    static const struct {
        const char *text;
        int i64_ok;
        int64_t i64;
        int u64_ok;
        uint64_t u64;
    } cases[] = {
        {"0", 1, 0, 1, 0},
        {"-0", 1, 0, 1, 0},
        {"42", 1, 42, 1, 42},
        {"-42", 1, -42, 0, 0},
        {"9007199254740993", 1, 9007199254740993LL, 1, 9007199254740993ULL},
        {"9223372036854775807", 1, INT64_MAX, 1, 9223372036854775807ULL},
        {"9223372036854775808", 0, 0, 1, 9223372036854775808ULL},
        {"-9223372036854775808", 1, INT64_MIN, 0, 0},
        {"-9223372036854775809", 0, 0, 0, 0},
        {"18446744073709551615", 0, 0, 1, UINT64_MAX},
        {"18446744073709551616", 0, 0, 0, 0},
        {"99999999999999999999999", 0, 0, 0, 0},
        {"1.0", 0, 0, 0, 0},
        {"1.5", 0, 0, 0, 0},
        {"1e3", 0, 0, 0, 0},
        {"\"1\"", 0, 0, 0, 0},
        {"true", 0, 0, 0, 0},
        {"null", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st;
        yc_json *v = parse(cases[i].text, &st);
        ck_assert_int_eq(st, YC_OK);
        int64_t a = 7;
        uint64_t b = 7;
        st = yc_json_get_i64(v, &a);
        ck_assert_msg((st == YC_OK) == cases[i].i64_ok, "i64 of %s: %d", cases[i].text, st);
        if (cases[i].i64_ok)
            ck_assert_msg(a == cases[i].i64, "i64 of %s gave %" PRId64, cases[i].text, a);
        else
            ck_assert_int_eq(st, YC_EFORMAT);
        st = yc_json_get_u64(v, &b);
        ck_assert_msg((st == YC_OK) == cases[i].u64_ok, "u64 of %s: %d", cases[i].text, st);
        if (cases[i].u64_ok)
            ck_assert_msg(b == cases[i].u64, "u64 of %s gave %" PRIu64, cases[i].text, b);
        yc_json_free(v);
    }
    int64_t x;
    ck_assert_int_eq(yc_json_get_i64(NULL, &x), YC_EFORMAT);
    int st;
    yc_json *v = parse(" [1, 2.5]", &st);
    ck_assert_int_eq(yc_json_get_i64(yc_json_at(v, 1), &x), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "byte 5"));
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "2.5"));
    yc_json_free(v);
}
END_TEST

START_TEST(json_large_object)
{
    size_t n = 2000, cap = n * 32 + 16, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    text[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\"key.%zu\":%zu", i ? "," : "",
                                (i * 7919) % n, i);
    text[len++] = '}';
    yc_json *root;
    ck_assert_int_eq(yc_json_parse(&root, text, len), YC_OK);
    ck_assert_uint_eq(yc_json_len(root), n);
    for (size_t i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "key.%zu", (i * 7919) % n);
        ck_assert_str_eq(yc_json_key_at(root, i, NULL), key);
        uint64_t v;
        ck_assert_int_eq(yc_json_get_u64(yc_json_get(root, key), &v), YC_OK);
        ck_assert_uint_eq(v, i);
    }
    ck_assert_ptr_null(yc_json_get(root, "key."));
    ck_assert_ptr_null(yc_json_get(root, "key.2000"));
    yc_json_free(root);
    /* the same with one key repeated far from its first occurrence */
    len -= 1;
    len += (size_t)snprintf(text + len, cap - len, ",\"key.0\":1}");
    ck_assert_int_eq(yc_json_parse(&root, text, len), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "duplicate key \"key.0\""));
    free(text);
}
END_TEST

START_TEST(json_escaper)
{
    char buf[64];
    ck_assert_uint_eq(yc_json_escape(buf, sizeof buf, "a\"b\\c\n\x01\x1f", 8), 23);
    ck_assert_str_eq(buf, "\"a\\\"b\\\\c\\n\\u0001\\u001f\"");
    /* snprintf semantics */
    ck_assert_uint_eq(yc_json_escape(buf, 4, "abcdef", 6), 8);
    ck_assert_str_eq(buf, "\"ab");
    ck_assert_uint_eq(yc_json_escape(NULL, 0, "abc", 3), 5);
    /* invalid UTF-8 becomes U+FFFD; valid multi-byte sequences pass through */
    ck_assert_uint_eq(yc_json_escape(buf, sizeof buf, "\xff" "a\xc3\xa9", 4), 11);
    ck_assert_str_eq(buf, "\"\\ufffda\xc3\xa9\"");
    ck_assert(yc_json_utf8_valid("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10));
    ck_assert(!yc_json_utf8_valid("\xc3", 1));
    ck_assert(!yc_json_utf8_valid("\xed\xa0\x80", 3));
    ck_assert(!yc_json_utf8_valid("\xc1\xbf", 2));
    ck_assert(yc_json_utf8_valid("", 0));

    /* every code unit of a string with all ASCII bytes and some UTF-8 survives a round trip */
    char src[160];
    size_t n = 0;
    for (int c = 1; c < 128; c++)
        src[n++] = (char)c;
    memcpy(src + n, "\xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80\0tail", 14);
    n += 14;
    char *q = yc_json_quote(src, n);
    ck_assert_ptr_nonnull(q);
    yc_json *root;
    ck_assert_int_eq(yc_json_parse(&root, q, strlen(q)), YC_OK);
    ck_assert_uint_eq(yc_json_string_len(root), n);
    ck_assert_mem_eq(yc_json_string(root), src, n);
    yc_json_free(root);
    free(q);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * safetensors
 * ---------------------------------------------------------------------------------------------- */

/* Writes a file: the 8-byte length `hlen` (little-endian), `header`, then `data`. */
static void write_file(const char *path, uint64_t hlen, const char *header, const void *data,
                       size_t ndata)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)(hlen >> (8 * i));
    ck_assert_uint_eq(fwrite(lenbuf, 1, 8, f), 8);
    size_t hl = strlen(header);
    ck_assert_uint_eq(fwrite(header, 1, hl, f), hl);
    if (ndata)
        ck_assert_uint_eq(fwrite(data, 1, ndata, f), ndata);
    ck_assert_int_eq(fclose(f), 0);
}

/* Writes a file whose length field is the header's true length. */
static void write_st(const char *path, const char *header, const void *data, size_t ndata)
{
    write_file(path, strlen(header), header, data, ndata);
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

START_TEST(st_roundtrip)
{
    const char *path = yc_harness_tmp("roundtrip.safetensors");
    float f32[6] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f};
    unsigned char f16[8], bf16[4], f64[24], i64[24], i32[12], i16[6];
    put_le(f16, 0x3c00, 2);     /* 1 */
    put_le(f16 + 2, 0xc000, 2); /* -2 */
    put_le(f16 + 4, 0x0001, 2); /* 2^-24 */
    put_le(f16 + 6, 0x7bff, 2); /* 65504 */
    put_le(bf16, 0x3f80, 2);    /* 1 */
    put_le(bf16 + 2, 0xc0a0, 2); /* -5 */
    double dv[3] = {0.1, -1e300, 12345.5};
    for (int i = 0; i < 3; i++) {
        uint64_t u;
        memcpy(&u, &dv[i], 8);
        put_le(f64 + 8 * i, u, 8);
    }
    put_le(i64, (uint64_t)-3, 8);
    put_le(i64 + 8, (uint64_t)1 << 40, 8);
    put_le(i64 + 16, (uint64_t)INT64_MIN, 8);
    put_le(i32, (uint64_t)-7, 4);
    put_le(i32 + 4, 2147483647u, 4);
    put_le(i32 + 8, 0x80000000u, 4);
    put_le(i16, 0xffff, 2);
    put_le(i16 + 2, 0x7fff, 2);
    put_le(i16 + 4, 0x8000, 2);
    signed char i8[3] = {-128, 127, -1};
    unsigned char u8[3] = {0, 200, 255};
    unsigned char bools[3] = {0, 1, 1};
    float scalar = 42.0f;

    yc_st_writer *w = yc_st_writer_new();
    ck_assert_ptr_nonnull(w);
    int64_t s23[] = {2, 3}, s4[] = {4}, s12[] = {1, 2}, s3[] = {3}, s05[] = {0, 5}, s30[] = {3, 0};
    ck_assert_int_eq(yc_st_writer_add(w, "f32", YC_ST_F32, 2, s23, f32), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "f16", YC_ST_F16, 1, s4, f16), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "bf16", YC_ST_BF16, 2, s12, bf16), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "empty.a", YC_ST_F32, 2, s05, NULL), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "f64", YC_ST_F64, 1, s3, f64), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "i64", YC_ST_I64, 1, s3, i64), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "i32", YC_ST_I32, 1, s3, i32), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "i16", YC_ST_I16, 1, s3, i16), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "i8", YC_ST_I8, 1, s3, i8), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "u8", YC_ST_U8, 1, s3, u8), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "bool", YC_ST_BOOL, 1, s3, bools), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "scalar", YC_ST_F32, 0, NULL, &scalar), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "name \"quoted\" \xc3\xa9", YC_ST_U8, 1, s3, u8), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "empty.b", YC_ST_I64, 2, s30, NULL), YC_OK);
    const char *meta_val = "line1\nline2\t\"q\" \\ \xe2\x98\x83 \xf0\x9f\x98\x80 \x01";
    ck_assert_int_eq(yc_st_writer_meta(w, "format", "pt"), YC_OK);
    ck_assert_int_eq(yc_st_writer_meta(w, "odd \"key\"", meta_val), YC_OK);
    ck_assert_int_eq(yc_st_writer_meta(w, "empty", ""), YC_OK);
    ck_assert_int_eq(yc_st_writer_write(w, path), YC_OK);
    yc_st_writer_free(w);

    /* the layout: 8-byte length, header padded to a multiple of 8, data packed */
    char *raw;
    size_t size;
    ck_assert_int_eq(yc_read_file(path, &raw, &size), YC_OK);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)(unsigned char)raw[i] << (8 * i);
    ck_assert_uint_eq(hlen % 8, 0);
    ck_assert_int_eq(raw[8], '{');
    size_t data_bytes = 24 + 8 + 4 + 24 + 24 + 12 + 6 + 3 + 3 + 3 + 4 + 3;
    ck_assert_uint_eq(size, 8 + hlen + data_bytes);
    ck_assert_mem_eq(raw + 8 + hlen, f32, 24);
    free(raw);

    yc_st_file *f;
    ck_assert_int_eq(yc_st_open(&f, path), YC_OK);
    ck_assert_int_eq(yc_st_count(f), 14);
    const char *order[] = {"f32", "f16", "bf16", "empty.a", "f64", "i64", "i32",
                           "i16", "i8", "u8", "bool", "scalar", "name \"quoted\" \xc3\xa9",
                           "empty.b"};
    for (int i = 0; i < 14; i++) {
        ck_assert_str_eq(yc_st_get(f, i)->name, order[i]);
        ck_assert_ptr_eq(yc_st_find(f, order[i]), yc_st_get(f, i));
    }
    ck_assert_ptr_null(yc_st_get(f, 14));
    ck_assert_ptr_null(yc_st_get(f, -1));
    ck_assert_ptr_null(yc_st_find(f, "missing"));
    ck_assert_ptr_null(yc_st_find(f, "__metadata__"));

    const yc_st_tensor *t = yc_st_find(f, "f32");
    ck_assert_int_eq(t->dtype, YC_ST_F32);
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_int_eq(t->shape[0], 2);
    ck_assert_int_eq(t->shape[1], 3);
    ck_assert_uint_eq(t->numel, 6);
    ck_assert_uint_eq(t->begin, 0);
    ck_assert_uint_eq(t->end, 24);
    float out[8];
    ck_assert_int_eq(yc_st_read_f32(f, t, out, 6), YC_OK);
    ck_assert_mem_eq(out, f32, sizeof f32);
    ck_assert_int_eq(yc_st_read_f32(f, t, out, 5), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "f32"));

    static const struct {
        const char *name;
        int n;
        float v[4];
    } want[] = {
        {"f16", 4, {1.0f, -2.0f, 5.9604644775390625e-8f, 65504.0f}},
        {"bf16", 2, {1.0f, -5.0f}},
        {"f64", 3, {0.1f, -INFINITY, 12345.5f}},
        {"i64", 3, {-3.0f, 1099511627776.0f, -9223372036854775808.0f}},
        {"i32", 3, {-7.0f, 2147483648.0f, -2147483648.0f}},
        {"i16", 3, {-1.0f, 32767.0f, -32768.0f}},
        {"i8", 3, {-128.0f, 127.0f, -1.0f}},
        {"u8", 3, {0.0f, 200.0f, 255.0f}},
        {"bool", 3, {0.0f, 1.0f, 1.0f}},
        {"scalar", 1, {42.0f}},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        t = yc_st_find(f, want[k].name);
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(t->numel, (size_t)want[k].n);
        ck_assert_int_eq(yc_st_read_f32(f, t, out, t->numel), YC_OK);
        for (int i = 0; i < want[k].n; i++)
            ck_assert_msg(out[i] == want[k].v[i], "%s[%d] = %g, expected %g", want[k].name, i,
                          out[i], want[k].v[i]);
    }
    t = yc_st_find(f, "scalar");
    ck_assert_int_eq(t->ndim, 0);
    ck_assert_uint_eq(t->end - t->begin, 4);
    t = yc_st_find(f, "i64");
    unsigned char rawbuf[24];
    ck_assert_int_eq(yc_st_read_raw(f, t, rawbuf), YC_OK);
    ck_assert_mem_eq(rawbuf, i64, 24);
    t = yc_st_find(f, "i8");
    ck_assert_int_eq(t->dtype, YC_ST_I8);
    for (int k = 0; k < 2; k++) {
        t = yc_st_find(f, k ? "empty.b" : "empty.a");
        ck_assert_uint_eq(t->numel, 0);
        ck_assert_uint_eq(t->begin, t->end);
        ck_assert_int_eq(t->ndim, 2);
        ck_assert_int_eq(yc_st_read_f32(f, t, out, 0), YC_OK);
        ck_assert_int_eq(yc_st_read_raw(f, t, rawbuf), YC_OK);
    }
    ck_assert_int_eq(yc_st_find(f, "empty.b")->shape[0], 3);

    ck_assert_int_eq(yc_st_meta_count(f), 3);
    const char *k, *v;
    yc_st_meta_get(f, 0, &k, &v);
    ck_assert_str_eq(k, "format");
    ck_assert_str_eq(v, "pt");
    yc_st_meta_get(f, 1, &k, &v);
    ck_assert_str_eq(k, "odd \"key\"");
    ck_assert_str_eq(v, meta_val);
    yc_st_meta_get(f, 2, &k, &v);
    ck_assert_str_eq(k, "empty");
    ck_assert_str_eq(v, "");
    yc_st_meta_get(f, 3, &k, &v);
    ck_assert_ptr_null(k);
    ck_assert_ptr_null(v);
    ck_assert_str_eq(yc_st_meta(f, "odd \"key\""), meta_val);
    ck_assert_ptr_null(yc_st_meta(f, "nope"));
    yc_st_close(f);
    yc_st_close(NULL);

    /* an empty writer makes a valid file; writing again replaces the old file */
    w = yc_st_writer_new();
    ck_assert_int_eq(yc_st_writer_write(w, path), YC_OK);
    yc_st_writer_free(w);
    ck_assert_int_eq(yc_st_open(&f, path), YC_OK);
    ck_assert_int_eq(yc_st_count(f), 0);
    ck_assert_int_eq(yc_st_meta_count(f), 0);
    yc_st_close(f);
    ck_assert_int_eq(yc_read_file(path, &raw, &size), YC_OK);
    ck_assert_uint_eq(size, 16);
    ck_assert_mem_eq(raw + 8, "{}      ", 8);
    free(raw);
}
END_TEST

/* binary16 -> double by the textbook formula */
static double half_ref(unsigned h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v;
    if (exp == 0)
        v = ldexp(mant, -24);
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

START_TEST(st_f16_all)
{
    const char *path = yc_harness_tmp("f16.safetensors");
    unsigned char *data = malloc(65536 * 2);
    float *out = malloc(65536 * sizeof(float));
    ck_assert(data && out);
    for (unsigned h = 0; h < 65536; h++)
        put_le(data + 2 * h, h, 2);
    yc_st_writer *w = yc_st_writer_new();
    int64_t shape[] = {256, 256};
    ck_assert_int_eq(yc_st_writer_add(w, "h", YC_ST_F16, 2, shape, data), YC_OK);
    ck_assert_int_eq(yc_st_writer_write(w, path), YC_OK);
    yc_st_writer_free(w);
    yc_st_file *f;
    ck_assert_int_eq(yc_st_open(&f, path), YC_OK);
    ck_assert_int_eq(yc_st_read_f32(f, yc_st_find(f, "h"), out, 65536), YC_OK);
    yc_st_close(f);
    for (unsigned h = 0; h < 65536; h++) {
        double ref = half_ref(h);
        float got = out[h];
        if (isnan(ref)) {
            uint32_t bits;
            memcpy(&bits, &got, 4);
            uint32_t want = (uint32_t)(h & 0x8000) << 16 | 0x7f800000u | (uint32_t)(h & 0x3ff) << 13;
            ck_assert_msg(isnan(got) && bits == want, "half 0x%04x: got bits 0x%08x", h, bits);
        } else {
            ck_assert_msg((double)got == ref && !signbit(got) == !signbit(ref),
                          "half 0x%04x: got %.9g, expected %.9g", h, got, ref);
        }
    }
    free(data);
    free(out);
}
END_TEST

/* Malformed files: each must be rejected with the expected status and a message that names the
 * file and contains `what`. */
static const struct {
    const char *label;
    const char *header;
    size_t ndata;
    int status;
    const char *what;
} bad_st[] = {
    {"not json", "hello, world", 0, YC_EFORMAT, "invalid JSON"},
    {"truncated json", "{\"a\":{\"dtype\":\"F32\"", 0, YC_EFORMAT, "invalid JSON"},
    {"array header", "[]      ", 0, YC_EFORMAT, "must be a JSON object"},
    {"entry not object", "{\"a\":[1]}", 0, YC_EFORMAT, "expected an object"},
    {"wrong dtype", "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     YC_EFORMAT, "unknown dtype"},
    {"lowercase dtype", "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     YC_EFORMAT, "unknown dtype"},
    {"unsupported dtype", "{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
     YC_EUNSUPPORTED, "not supported"},
    {"dtype not string", "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     YC_EFORMAT, "dtype must be a string"},
    {"missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, YC_EFORMAT, "dtype"},
    {"missing shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, YC_EFORMAT,
     "shape must be an array"},
    {"missing offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, YC_EFORMAT,
     "data_offsets"},
    {"negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
     YC_EFORMAT, "negative"},
    {"fractional dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
     YC_EFORMAT, "shape"},
    {"too many dims",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
     YC_EUNSUPPORTED, "9 dimensions"},
    {"shape overflow",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}",
     4, YC_EFORMAT, "too many elements"},
    {"shape overflow with zero",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}",
     4, YC_EFORMAT, "too many elements"},
    {"dim too large",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808],\"data_offsets\":[0,4]}}", 4,
     YC_EFORMAT, "too large"},
    {"offsets out of range", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
     YC_EFORMAT, "past the end"},
    {"offsets huge",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[18446744073709551614,"
     "18446744073709551615]}}", 8, YC_EFORMAT, "past the end"},
    {"offsets reversed", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 8,
     YC_EFORMAT, "before they begin"},
    {"offsets one number", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0]}}", 8,
     YC_EFORMAT, "[begin, end]"},
    {"offsets three numbers",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0,0]}}", 8, YC_EFORMAT,
     "[begin, end]"},
    {"offsets negative", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[-1,0]}}", 8,
     YC_EFORMAT, "negative"},
    {"offsets string", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[\"0\",0]}}", 8,
     YC_EFORMAT, "data_offsets"},
    {"numel mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8,
     YC_EFORMAT, "need 8"},
    {"overlap",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 16, YC_EFORMAT,
     "overlap"},
    {"same range",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, YC_EFORMAT,
     "overlap"},
    {"overlap out of order",
     "{\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[12,16]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[7,15]}}", 16, YC_EFORMAT,
     "overlap"},
    {"metadata not object", "{\"__metadata__\":[\"a\"]}", 0, YC_EFORMAT, "must be an object"},
    {"metadata number", "{\"__metadata__\":{\"k\":1}}", 0, YC_EFORMAT, "must be a string"},
    {"metadata nested", "{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0, YC_EFORMAT,
     "must be a string"},
    {"metadata null", "{\"__metadata__\":{\"k\":null}}", 0, YC_EFORMAT, "must be a string"},
    {"metadata duplicate", "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, YC_EFORMAT,
     "duplicate key"},
    {"duplicate tensors",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
     "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, YC_EFORMAT,
     "duplicate key"},
    {"two metadata blocks", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, YC_EFORMAT,
     "duplicate key"},
    {"NUL in name", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
     YC_EFORMAT, "NUL"},
    {"NUL in metadata", "{\"__metadata__\":{\"k\":\"a\\u0000\"}}", 0, YC_EFORMAT, "NUL"},
    {"bad UTF-8", "{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
     YC_EFORMAT, "UTF-8"},
    {"NUL padding", "{}\0\0\0\0\0\0", 0, YC_EFORMAT, "invalid JSON"},
    {"empty header", "", 0, YC_EFORMAT, "too short"},
};

START_TEST(st_malformed)
{
    unsigned char data[16] = {0};
    const char *path = yc_harness_tmp("bad.safetensors");
    for (size_t i = 0; i < sizeof bad_st / sizeof bad_st[0]; i++) {
        if (strcmp(bad_st[i].label, "NUL padding") == 0) {
            FILE *fp = fopen(path, "wb");
            ck_assert_ptr_nonnull(fp);
            ck_assert_uint_eq(fwrite("\x08\0\0\0\0\0\0\0{}\0\0\0\0\0\0", 1, 16, fp), 16);
            ck_assert_int_eq(fclose(fp), 0);
        } else {
            write_st(path, bad_st[i].header, data, bad_st[i].ndata);
        }
        yc_error_clear();
        yc_st_file *f = (yc_st_file *)1;
        int st = yc_st_open(&f, path);
        ck_assert_msg(st == bad_st[i].status, "%s: status %d, expected %d (%s)", bad_st[i].label,
                      st, bad_st[i].status, yc_last_error());
        ck_assert_ptr_null(f);
        ck_assert_msg(strstr(yc_last_error(), path) && strstr(yc_last_error(), bad_st[i].what),
                      "%s: message '%s' should name the file and say '%s'", bad_st[i].label,
                      yc_last_error(), bad_st[i].what);
    }
}
END_TEST

START_TEST(st_bad_length)
{
    const char *path = yc_harness_tmp("len.safetensors");
    yc_st_file *f;
    const char *hdr = "{}      ";
    /* missing, short and empty files */
    ck_assert_int_eq(yc_st_open(&f, yc_harness_tmp("does-not-exist")), YC_EIO);
    ck_assert_ptr_null(f);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "does-not-exist"));
    ck_assert_int_eq(yc_st_open(&f, yc_harness_tmpdir()), YC_EIO);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "not a regular file"));
    for (size_t n = 0; n < 8; n++) {
        FILE *fp = fopen(path, "wb");
        ck_assert_ptr_nonnull(fp);
        ck_assert_uint_eq(fwrite("\x08\0\0\0\0\0\0", 1, n, fp), n);
        ck_assert_int_eq(fclose(fp), 0);
        ck_assert_int_eq(yc_st_open(&f, path), YC_EFORMAT);
        ck_assert_ptr_nonnull(strstr(yc_last_error(), "too short"));
    }
    /* a huge length, one byte more than the file holds, and the maximum value */
    const uint64_t lens[] = {(uint64_t)1 << 63, 9, UINT64_MAX, 1ull << 32};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        write_file(path, lens[i], hdr, NULL, 0);
        ck_assert_int_eq(yc_st_open(&f, path), YC_EFORMAT);
        ck_assert_ptr_null(f);
        ck_assert_ptr_nonnull(strstr(yc_last_error(), "larger than the rest of the file"));
    }
    /* a length that fits the (sparse) file but exceeds the header limit */
    write_file(path, (uint64_t)101 << 20, hdr, NULL, 0);
    ck_assert_int_eq(truncate(path, ((off_t)101 << 20) + 8), 0);
    ck_assert_int_eq(yc_st_open(&f, path), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "exceeds the limit"));
    /* a length shorter than the JSON: the rest counts as data, the header is cut */
    write_file(path, 4, "{\"a\":{}}", NULL, 0);
    ck_assert_int_eq(yc_st_open(&f, path), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "invalid JSON"));
}
END_TEST

/* Writes a small valid file with several tensors and returns its bytes. */
static char *small_file(const char *path, size_t *size)
{
    static float a[6] = {1, 2, 3, 4, 5, 6};
    static unsigned char b[3] = {1, 2, 3};
    static int64_t c = 5;
    int64_t sa[] = {2, 3}, sb[] = {3}, se[] = {0};
    yc_st_writer *w = yc_st_writer_new();
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(yc_st_writer_add(w, "a", YC_ST_F32, 2, sa, a), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "b", YC_ST_U8, 1, sb, b), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "c", YC_ST_I64, 0, NULL, &c), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "e", YC_ST_F16, 1, se, NULL), YC_OK);
    ck_assert_int_eq(yc_st_writer_meta(w, "k", "v"), YC_OK);
    ck_assert_int_eq(yc_st_writer_write(w, path), YC_OK);
    yc_st_writer_free(w);
    char *raw;
    ck_assert_int_eq(yc_read_file(path, &raw, size), YC_OK);
    return raw;
}

START_TEST(st_truncated)
{
    const char *path = yc_harness_tmp("trunc.safetensors");
    size_t size;
    char *raw = small_file(path, &size);
    yc_st_file *f;
    ck_assert_int_eq(yc_st_open(&f, path), YC_OK);
    yc_st_close(f);
    /* every truncation of the file is caught: the header no longer fits or a tensor runs past
     * the end of the data */
    for (size_t n = 0; n < size; n++) {
        yc_harness_write(path, raw, n);
        f = (yc_st_file *)1;
        ck_assert_msg(yc_st_open(&f, path) != YC_OK, "file truncated to %zu bytes accepted", n);
        ck_assert_ptr_null(f);
    }
    free(raw);
}
END_TEST

START_TEST(st_fuzz)
{
    const char *path = yc_harness_tmp("fuzz.safetensors");
    size_t size;
    char *raw = small_file(path, &size);
    char *buf = malloc(size);
    float out[64];
    ck_assert_ptr_nonnull(buf);
    uint64_t state = 0x9e3779b97f4a7c15ull;
    int opened = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, raw, size);
        int edits = 1 + iter % 4;
        for (int e = 0; e < edits; e++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = 8 + (size_t)(state >> 33) % 120;
            static const char alphabet[] = "0123456789[]{},:\"\\-.eE \x80\xffu";
            char c = alphabet[(state >> 20) % (sizeof alphabet - 1)];
            if (pos < size)
                buf[pos] = c;
        }
        yc_harness_write(path, buf, size);
        yc_st_file *f;
        if (yc_st_open(&f, path) != YC_OK) {
            ck_assert_ptr_null(f);
            ck_assert(yc_last_error()[0] != '\0');
            continue;
        }
        opened++;
        for (int i = 0; i < yc_st_count(f); i++) {
            const yc_st_tensor *t = yc_st_get(f, i);
            ck_assert(t->end <= size && t->begin <= t->end);
            if (t->numel <= 64)
                ck_assert_int_eq(yc_st_read_f32(f, t, out, t->numel), YC_OK);
        }
        yc_st_close(f);
    }
    ck_assert_int_gt(opened, 0);
    free(buf);
    free(raw);
}
END_TEST

START_TEST(st_accepted_oddities)
{
    /* gaps between tensors, trailing data, an empty tensor inside another's range, whitespace,
     * unknown keys in an entry, and an empty __metadata__ are all valid */
    const char *path = yc_harness_tmp("odd.safetensors");
    unsigned char data[32] = {0};
    data[4] = 1;
    write_st(path,
             " {\"__metadata__\":{},\n\"b\":{\"shape\":[2],\"dtype\":\"U8\",\"data_offsets\":[4,6],"
             "\"extra\":[1,{\"x\":null}]},\"a\":{\"dtype\":\"F32\",\"shape\":[1,1],"
             "\"data_offsets\":[0,4]},\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[2,2]}}"
             "   \t\r\n",
             data, sizeof data);
    yc_st_file *f;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_st_count(f), 3);
    ck_assert_int_eq(yc_st_meta_count(f), 0);
    ck_assert_str_eq(yc_st_get(f, 0)->name, "b");
    float out[2];
    ck_assert_int_eq(yc_st_read_f32(f, yc_st_find(f, "b"), out, 2), YC_OK);
    ck_assert(out[0] == 1.0f && out[1] == 0.0f);
    yc_st_close(f);
}
END_TEST

START_TEST(st_writer_errors)
{
    float x[4] = {0};
    int64_t s2[] = {2}, sneg[] = {-1}, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int64_t sbig[] = {INT64_MAX, INT64_MAX};
    yc_st_writer *w = yc_st_writer_new();
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(yc_st_writer_add(w, "a", YC_ST_F32, 1, s2, x), YC_OK);
    ck_assert_int_eq(yc_st_writer_add(w, "a", YC_ST_F32, 1, s2, x), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "duplicate tensor name 'a'"));
    ck_assert_int_eq(yc_st_writer_add(w, "n", YC_ST_F32, 1, sneg, x), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "negative"));
    ck_assert_int_eq(yc_st_writer_add(w, "n", YC_ST_F32, 9, s9, x), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_add(w, "n", YC_ST_F32, -1, s2, x), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_add(w, "n", YC_ST_F32, 1, NULL, x), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_add(w, "n", YC_ST_F32, 2, sbig, x), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_add(w, "n", (yc_st_dtype)99, 1, s2, x), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_add(w, "n", YC_ST_F32, 1, s2, NULL), YC_ERR);
    ck_assert_int_eq(yc_st_writer_add(w, "__metadata__", YC_ST_F32, 1, s2, x), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_add(w, "", YC_ST_F32, 1, s2, x), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_add(w, "bad\xff", YC_ST_F32, 1, s2, x), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "UTF-8"));
    ck_assert_int_eq(yc_st_writer_add(NULL, "n", YC_ST_F32, 1, s2, x), YC_ERR);
    ck_assert_int_eq(yc_st_writer_meta(w, "k", "v"), YC_OK);
    ck_assert_int_eq(yc_st_writer_meta(w, "k", "w"), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_meta(w, "k2", "\xc3"), YC_EFORMAT);
    ck_assert_int_eq(yc_st_writer_meta(w, NULL, "v"), YC_ERR);

    /* many names: the name set grows and still finds duplicates */
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "model.%d.conv.weight", i);
        ck_assert_int_eq(yc_st_writer_add(w, name, YC_ST_F32, 1, s2, x), YC_OK);
    }
    for (int i = 0; i < 5000; i += 97) {
        snprintf(name, sizeof name, "model.%d.conv.weight", i);
        ck_assert_int_eq(yc_st_writer_add(w, name, YC_ST_F32, 1, s2, x), YC_EFORMAT);
    }

    /* a directory that does not exist: EIO naming the path, nothing left behind */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/w.safetensors", yc_harness_tmpdir());
    ck_assert_int_eq(yc_st_writer_write(w, bad), YC_EIO);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), "no/such/dir/w.safetensors"));
    yc_st_writer_free(w);
    yc_st_writer_free(NULL);

    /* the tensors written are exactly the ones accepted */
    const char *path = yc_harness_tmp("many.safetensors");
    w = yc_st_writer_new();
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "t.%d", i);
        ck_assert_int_eq(yc_st_writer_add(w, name, YC_ST_F32, 1, s2, x), YC_OK);
    }
    ck_assert_int_eq(yc_st_writer_write(w, path), YC_OK);
    yc_st_writer_free(w);
    yc_st_file *f;
    ck_assert_int_eq(yc_st_open(&f, path), YC_OK);
    ck_assert_int_eq(yc_st_count(f), 3000);
    ck_assert_str_eq(yc_st_get(f, 2999)->name, "t.2999");
    ck_assert_uint_eq(yc_st_find(f, "t.1234")->begin, 1234 * 8);
    yc_st_close(f);
    /* no temporary files remain in the scratch directory */
    DIR *d = opendir(yc_harness_tmpdir());
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)))
        ck_assert_msg(!strstr(e->d_name, ".tmp."), "temporary file %s left", e->d_name);
    closedir(d);
}
END_TEST

START_TEST(st_dtype_names)
{
    ck_assert_str_eq(yc_st_dtype_name(YC_ST_F32), "F32");
    ck_assert_str_eq(yc_st_dtype_name(YC_ST_BF16), "BF16");
    ck_assert_str_eq(yc_st_dtype_name(YC_ST_BOOL), "BOOL");
    ck_assert_str_eq(yc_st_dtype_name((yc_st_dtype)42), "?");
    ck_assert_uint_eq(yc_st_dtype_size(YC_ST_F64), 8);
    ck_assert_uint_eq(yc_st_dtype_size(YC_ST_F16), 2);
    ck_assert_uint_eq(yc_st_dtype_size(YC_ST_I8), 1);
    ck_assert_uint_eq(yc_st_dtype_size((yc_st_dtype)-1), 0);
}
END_TEST

/* The directory with the test fixtures, or NULL when it cannot be found. */
static const char *test_data_dir(void)
{
    static char buf[1024];
    const char *env = getenv("YOLOCL_TEST_DATA");
    if (env && env[0])
        return env;
#ifdef YC_SRCDATADIR
    snprintf(buf, sizeof buf, "%s/../tests/data", YC_SRCDATADIR);
    if (yc_is_dir(buf))
        return buf;
#endif
    if (yc_is_dir("../tests/data"))
        return "../tests/data";
    return NULL;
}

START_TEST(st_fixture)
{
    const char *dir = test_data_dir();
    ck_assert_msg(dir != NULL, "tests/data not found (set YOLOCL_TEST_DATA)");
    char path[1200];
    snprintf(path, sizeof path, "%s/tiny/weights.safetensors", dir);
    yc_st_file *f;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_st_count(f), 349);
    const yc_st_tensor *t = yc_st_find(f, "model.0.conv.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(t, yc_st_get(f, 0));
    ck_assert_int_eq(t->dtype, YC_ST_F32);
    ck_assert_int_eq(t->ndim, 4);
    ck_assert_int_eq(t->shape[0], 8);
    ck_assert_int_eq(t->shape[1], 3);
    ck_assert_int_eq(t->shape[2], 6);
    ck_assert_int_eq(t->shape[3], 6);
    ck_assert_uint_eq(t->numel, 864);
    ck_assert_uint_eq(t->begin, 0);
    ck_assert_uint_eq(t->end, 3456);
    float *w = malloc(864 * sizeof(float));
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(yc_st_read_f32(f, t, w, 864), YC_OK);
    double sum = 0;
    for (int i = 0; i < 864; i++) {
        ck_assert(isfinite(w[i]));
        sum += fabs(w[i]);
    }
    ck_assert(sum > 0);
    free(w);
    t = yc_st_find(f, "model.0.bn.num_batches_tracked");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, YC_ST_I64);
    ck_assert_uint_eq(t->numel, 1);
    float nb;
    ck_assert_int_eq(yc_st_read_f32(f, t, &nb, 1), YC_OK);
    ck_assert(nb >= 0 && nb == floorf(nb));
    yc_st_close(f);

    const char *others[] = {"batch", "expected", "grads"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/tiny/%s.safetensors", dir, others[i]);
        ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
        ck_assert_int_gt(yc_st_count(f), 0);
        yc_st_close(f);
    }
    snprintf(path, sizeof path, "%s/tiny/batch.safetensors", dir);
    ck_assert_int_eq(yc_st_open(&f, path), YC_OK);
    t = yc_st_find(f, "images");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ndim, 4);
    ck_assert_int_eq(t->shape[2], 64);
    yc_st_close(f);
}
END_TEST

static Suite *core_suite(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("json");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, json_basic);
    tcase_add_test(tc, json_locale);
    tcase_add_test(tc, json_escapes);
    tcase_add_test(tc, json_bad);
    tcase_add_test(tc, json_bounds);
    tcase_add_test(tc, json_depth);
    tcase_add_test(tc, json_integers);
    tcase_add_test(tc, json_large_object);
    tcase_add_test(tc, json_escaper);
    suite_add_tcase(s, tc);
    tc = tcase_create("safetensors");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, st_roundtrip);
    tcase_add_test(tc, st_f16_all);
    tcase_add_test(tc, st_malformed);
    tcase_add_test(tc, st_bad_length);
    tcase_add_test(tc, st_truncated);
    tcase_add_test(tc, st_fuzz);
    tcase_add_test(tc, st_accepted_oddities);
    tcase_add_test(tc, st_writer_errors);
    tcase_add_test(tc, st_dtype_names);
    tcase_add_test(tc, st_fixture);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_main(core_suite(), "core");
}
