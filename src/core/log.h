/* Status codes, error messages and console output.
 *
 * Library code never exits: a failing function records a message with yc_error() (or adds context
 * to the message already recorded with yc_error_context()) and returns a negative status.  main
 * prints yc_last_error() and chooses the exit status.  Messages are per thread. */
#ifndef YC_LOG_H
#define YC_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum yc_status {
    YC_OK = 0,
    YC_ERR = -1,          /* generic failure */
    YC_ENOMEM = -2,       /* an allocation failed */
    YC_EIO = -3,          /* a file could not be read or written */
    YC_EFORMAT = -4,      /* malformed input: a file, a config key, a tensor shape */
    YC_EUNSUPPORTED = -5, /* valid input that this build or device cannot run */
    YC_EDEVICE = -6,      /* a backend (OpenCL, CLBlast) call failed */
    YC_EUSAGE = -7,       /* bad command-line usage (exit status 2) */
};

/* Records `fmt` as this thread's error message (replacing the previous one). Returns YC_ERR so
 * that callers can write `return yc_error(...)` where a generic status suits. */
int yc_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Like yc_error() but returns `status`. */
int yc_error_status(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the recorded message with "context: ". Returns `status` unchanged. */
int yc_error_context(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The message recorded last on this thread ("" if none). */
const char *yc_last_error(void);

/* Clears this thread's message. */
void yc_error_clear(void);

/* Console verbosity: 0 = errors and warnings only, 1 = normal (default), 2 = verbose. */
extern int yc_verbosity;

/* "yolocl: warning: ..." on stderr (always shown). */
void yc_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Progress and results on stdout when yc_verbosity >= 1. */
void yc_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Extra detail on stderr when yc_verbosity >= 2. */
void yc_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Allocation that records "out of memory: N bytes for WHAT" on failure.  yc_calloc zeroes and
 * checks n*size for overflow. */
void *yc_malloc(size_t size, const char *what);
void *yc_calloc(size_t n, size_t size, const char *what);
void *yc_realloc(void *p, size_t size, const char *what);
char *yc_strdup(const char *s, const char *what);

#endif
