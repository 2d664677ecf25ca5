/* Status codes, error messages and console output (see log.h). */
#include "log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define YC_ERRMSG_MAX 2048

static _Thread_local char errmsg[YC_ERRMSG_MAX];

int yc_verbosity = 1;

static void set_message(const char *fmt, va_list ap)
{
    vsnprintf(errmsg, sizeof errmsg, fmt, ap);
}

int yc_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return YC_ERR;
}

int yc_error_status(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return status;
}

int yc_error_context(int status, const char *fmt, ...)
{
    char prefix[YC_ERRMSG_MAX];
    char old[YC_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, errmsg, sizeof old);
    if (old[0])
        snprintf(errmsg, sizeof errmsg, "%.1000s: %.1000s", prefix, old);
    else
        snprintf(errmsg, sizeof errmsg, "%s", prefix);
    return status;
}

const char *yc_last_error(void)
{
    return errmsg;
}

void yc_error_clear(void)
{
    errmsg[0] = '\0';
}

void yc_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("yolocl: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void yc_info(const char *fmt, ...)
{
    if (yc_verbosity < 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
}

void yc_debug(const char *fmt, ...)
{
    if (yc_verbosity < 2)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

void *yc_malloc(size_t size, const char *what)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        yc_error_status(YC_ENOMEM, "out of memory: %zu bytes for %s", size, what);
    return p;
}

void *yc_calloc(size_t n, size_t size, const char *what)
{
    if (size && n > SIZE_MAX / size) {
        yc_error_status(YC_ENOMEM, "out of memory: %zu x %zu bytes for %s overflows", n, size, what);
        return NULL;
    }
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        yc_error_status(YC_ENOMEM, "out of memory: %zu bytes for %s", n * size, what);
    return p;
}

void *yc_realloc(void *p, size_t size, const char *what)
{
    void *q = realloc(p, size ? size : 1);
    if (!q)
        yc_error_status(YC_ENOMEM, "out of memory: %zu bytes for %s", size, what);
    return q;
}

char *yc_strdup(const char *s, const char *what)
{
    size_t n = strlen(s) + 1;
    char *p = yc_malloc(n, what);
    if (p)
        memcpy(p, s, n);
    return p;
}
