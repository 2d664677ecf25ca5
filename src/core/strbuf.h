/* A growable NUL-terminated string for building text (YAML, JSON, reports).  A failed
 * allocation is remembered: later appends do nothing and yc_strbuf_finish returns NULL. */
#ifndef YC_STRBUF_H
#define YC_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct yc_strbuf {
    /* the text so far (NUL-terminated once anything was appended) */
    char *s;
    /* its length and the allocated size */
    size_t len, cap;
    /* an allocation failed */
    bool failed;
} yc_strbuf;

/* Appends n bytes. */
void yc_strbuf_put(yc_strbuf *b, const char *s, size_t n);
/* Appends a NUL-terminated string. */
void yc_strbuf_puts(yc_strbuf *b, const char *s);
/* The text (heap, owned by the caller), or NULL after a failed allocation (the buffer is freed
 * either way). */
char *yc_strbuf_finish(yc_strbuf *b);

#endif
