/* The test harness, its part that needs the core layer only: the scratch directory, files, a
 * captured descriptor, the runner, tests/data.  The other parts are in harness_*.c, one file per
 * layer they need, so that a test program links the libraries of the layers it uses only (a static
 * library gives whole object files).  What each function does is in tests/harness.h. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------------
 * The scratch directory.
 * ------------------------------------------------------------------------------------------- */

static char tmpdir[512];

const char *yc_harness_tmpdir_make(const char *name)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/yolocl-test-%s-XXXXXX", base && base[0] ? base : "/tmp",
             name);
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "cannot create %s: %s\n", tmpdir, strerror(errno));
        tmpdir[0] = '\0';
        return NULL;
    }
    return tmpdir;
}

const char *yc_harness_tmpdir(void)
{
    return tmpdir;
}

/* dir/<fmt, ...> in the next of 8 rotating buffers of this thread. */
static const char *path_in(const char *dir, const char *fmt, va_list ap)
{
    static _Thread_local char bufs[8][1600];
    static _Thread_local unsigned next;
    char rel[1024];
    vsnprintf(rel, sizeof rel, fmt, ap);
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, rel);
    return b;
}

const char *yc_harness_tmp(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *p = path_in(tmpdir, fmt, ap);
    va_end(ap);
    return p;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

int yc_harness_remove_tree(const char *path)
{
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

void yc_harness_tmpdir_remove(void)
{
    if (!tmpdir[0])
        return;
    if (getenv("YOLOCL_TEST_KEEP"))
        printf("files kept in %s\n", tmpdir);
    else if (yc_harness_remove_tree(tmpdir) != 0)
        fprintf(stderr, "could not remove %s: %s\n", tmpdir, strerror(errno));
    tmpdir[0] = '\0';
}

int yc_harness_run(Suite *s, bool nofork)
{
    SRunner *sr = srunner_create(s);
    if (nofork)
        srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

int yc_harness_main(Suite *s, const char *name)
{
    if (!yc_harness_tmpdir_make(name)) {
        srunner_free(srunner_create(s));
        return YC_TEST_HARD_ERROR;
    }
    int st = yc_harness_run(s, false);
    yc_harness_tmpdir_remove();
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Files.
 * ------------------------------------------------------------------------------------------- */

void yc_harness_make_parent(const char *path)
{
    char *d = yc_path_dirname(path);
    ck_assert_ptr_nonnull(d);
    if (!yc_is_dir(d))
        ck_assert_msg(yc_mkdirs(d) == YC_OK, "%s", yc_last_error());
    free(d);
}

void yc_harness_write(const char *path, const void *data, size_t n)
{
    yc_harness_make_parent(path);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

void yc_harness_write_text(const char *path, const char *text)
{
    yc_harness_write(path, text, strlen(text));
}

char *yc_harness_read(const char *path, size_t *len)
{
    char *data = NULL;
    ck_assert_msg(yc_read_file(path, &data, len) == YC_OK, "cannot read %s: %s", path,
                  yc_last_error());
    return data;
}

int yc_harness_count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    size_t ls = strlen(suffix);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l >= ls && !strcmp(e->d_name + l - ls, suffix))
            n++;
    }
    closedir(d);
    return n;
}

void yc_harness_capture_start(yc_harness_capture *c, int fd)
{
    fflush(stdout);
    fflush(stderr);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    c->f = f;
    c->fd = fd;
    c->saved = dup(fd);
    ck_assert_int_ge(c->saved, 0);
    ck_assert_int_ge(dup2(fileno(f), fd), 0);
}

char *yc_harness_capture_end(yc_harness_capture *c)
{
    fflush(stdout);
    fflush(stderr);
    FILE *f = c->f;
    ck_assert_int_ge(dup2(c->saved, c->fd), 0);
    close(c->saved);
    /* the descriptor wrote past the FILE's own position: ask the descriptor */
    off_t n = lseek(fileno(f), 0, SEEK_END);
    ck_assert_int_ge(n, 0);
    char *s = calloc((size_t)n + 1, 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    c->f = NULL;
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * tests/data.
 * ------------------------------------------------------------------------------------------- */

const char *yc_harness_test_data(const char *fmt, ...)
{
    const char *d = getenv("YOLOCL_TEST_DATA");
    va_list ap;
    va_start(ap, fmt);
    const char *p = path_in(d && d[0] ? d : "tests/data", fmt, ap);
    va_end(ap);
    return p;
}

const char *yc_harness_tiny_cfg(void)
{
    static char path[1024];
    if (!path[0])
        snprintf(path, sizeof path, "%s", yc_harness_test_data(YC_HARNESS_TINY_CFG));
    return path;
}
