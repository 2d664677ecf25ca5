/* A small, strict JSON (RFC 8259) parser into a read-only tree, and a string escaper for writers.
 *
 * Strict means: exactly one value surrounded by optional whitespace (space, tab, CR, LF); no
 * comments, trailing commas, single quotes, NaN/Infinity, leading zeros or byte order mark; the
 * text must be valid UTF-8 (no overlong forms, no encoded surrogates); \u escapes must form valid
 * code points (surrogate pairs are joined, lone surrogates rejected); objects must not repeat a
 * key.  Nesting is limited to YC_JSON_MAX_DEPTH arrays/objects and the text to YC_JSON_MAX_TEXT
 * bytes.  The parser reads only the `len` bytes it is given (the text need not be NUL-terminated).
 *
 * Objects keep their members in document order; strings are decoded to NUL-terminated UTF-8 (a
 * string may contain "\u0000", so its length is available separately); numbers keep both their
 * double value and their original text, so that 64-bit integers are read exactly with
 * yc_json_get_i64 / yc_json_get_u64.
 *
 * Every accessor accepts NULL and values of the wrong type, and then returns NULL, 0 or false, so
 * lookups can be chained: yc_json_at(yc_json_get(root, "shape"), 0). */
#ifndef YC_JSON_H
#define YC_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deepest nesting of arrays and objects that yc_json_parse accepts. */
#define YC_JSON_MAX_DEPTH 64
/* Longest text that yc_json_parse accepts, bytes. */
#define YC_JSON_MAX_TEXT ((size_t)1 << 30)

typedef enum yc_json_type {
    YC_JSON_NULL,
    YC_JSON_BOOL,
    YC_JSON_NUMBER,
    YC_JSON_STRING,
    YC_JSON_ARRAY,
    YC_JSON_OBJECT,
} yc_json_type;

/* A value in a parsed document (owned by the document; see yc_json_free). */
typedef struct yc_json yc_json;

/* Parses `len` bytes of `text`.  On success *root is the document's top value; on failure *root is
 * NULL, the status is YC_EFORMAT (or YC_ENOMEM) and the recorded message reads
 * "invalid JSON at byte N: what is wrong" (callers add the file name with yc_error_context). */
int yc_json_parse(yc_json **root, const char *text, size_t len);
/* Frees a whole document; `root` must be the value yc_json_parse returned (or NULL). */
void yc_json_free(yc_json *root);

/* Type of a value (YC_JSON_NULL for a NULL pointer) and a type's name ("object"). */
yc_json_type yc_json_typeof(const yc_json *v);
const char *yc_json_type_name(yc_json_type t);
/* Byte offset of the value's first character in the parsed text (0 for NULL). */
size_t yc_json_offset(const yc_json *v);

/* Number of elements of an array or members of an object (0 for anything else). */
size_t yc_json_len(const yc_json *v);
/* The i-th element of an array or the i-th member's value of an object (document order); NULL
 * when out of range or not a container. */
const yc_json *yc_json_at(const yc_json *v, size_t i);
/* The i-th member's key of an object (NUL-terminated), or NULL; its length in bytes goes to *len
 * when len is not NULL (a key may contain "\u0000"). */
const char *yc_json_key_at(const yc_json *v, size_t i, size_t *len);
/* Member `key` of an object, or NULL (no such key, or not an object). */
const yc_json *yc_json_get(const yc_json *obj, const char *key);

/* A string's decoded UTF-8 bytes, NUL-terminated (NULL if not a string), and its length in bytes
 * (may be shorter than strlen suggests when it contains "\u0000"). */
const char *yc_json_string(const yc_json *v);
size_t yc_json_string_len(const yc_json *v);

/* A boolean's value (false if not a boolean). */
bool yc_json_bool(const yc_json *v);

/* A number's value as double (0 if not a number) and its original text, NUL-terminated (NULL if
 * not a number). */
double yc_json_number(const yc_json *v);
const char *yc_json_number_text(const yc_json *v);
/* A number written as an integer (no fraction, no exponent) that fits the type, exactly.
 * Otherwise YC_EFORMAT with a message naming the value and the byte offset. */
int yc_json_get_i64(const yc_json *v, int64_t *out);
int yc_json_get_u64(const yc_json *v, uint64_t *out);

/* ------------------------------------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------------------------------- */

/* True when s[0..len) is valid UTF-8 (same rules as the parser). */
bool yc_json_utf8_valid(const char *s, size_t len);

/* Writes s[0..len) as a quoted JSON string ("a\"b\n") into dst, snprintf style: at most cap bytes
 * including a terminating NUL (written when cap > 0).  Returns the length the whole quoted string
 * needs, without the NUL.  Escapes '"', '\\' and control characters; bytes that are not valid
 * UTF-8 are written as \ufffd, so the output is always valid JSON (check yc_json_utf8_valid first
 * where such a replacement must be an error). */
size_t yc_json_escape(char *dst, size_t cap, const char *s, size_t len);
/* The same into a new heap string (free with free()); NULL with YC_ENOMEM recorded on failure. */
char *yc_json_quote(const char *s, size_t len);

#endif
