/* A growable string (see strbuf.h). */
#include "strbuf.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

void yc_strbuf_put(yc_strbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = yc_realloc(b->s, cap, "text");
        if (!ns) {
            b->failed = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void yc_strbuf_puts(yc_strbuf *b, const char *s)
{
    yc_strbuf_put(b, s, strlen(s));
}

char *yc_strbuf_finish(yc_strbuf *b)
{
    yc_strbuf_put(b, "", 0);
    char *s = b->failed ? NULL : b->s;
    if (!s)
        free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}
