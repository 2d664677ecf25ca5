/* The test harness: scratch directories, files, tests/data, synthetic images, datasets, backends
 * and models for the Check test programs.  What each function does is in tests/harness.h. */
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
#include <sys/wait.h>
#include <unistd.h>

#include <vips/vips.h>

#ifdef YC_HAVE_OPENCL
#include "cl_devices.h"
#endif
#include "device.h"
#include "log.h"
#include "modelcfg.h"
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

const char *yc_harness_tmp(const char *fmt, ...)
{
    static _Thread_local char bufs[8][1600];
    static _Thread_local unsigned next;
    char rel[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, rel);
    return b;
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
    return failed;
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
    static _Thread_local char bufs[4][1600];
    static _Thread_local unsigned next;
    char rel[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    const char *d = getenv("YOLOCL_TEST_DATA");
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", d && d[0] ? d : "tests/data", rel);
    return b;
}

const char *yc_harness_tiny_cfg(void)
{
    static char path[1024];
    if (!path[0])
        snprintf(path, sizeof path, "%s", yc_harness_test_data(YC_HARNESS_TINY_CFG));
    return path;
}

/* ---------------------------------------------------------------------------------------------
 * Images.
 * ------------------------------------------------------------------------------------------- */

void yc_harness_pattern(yc_image *im, int h, int w, int which)
{
    ck_assert_int_eq(yc_image_reserve(im, h, w), YC_OK);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im->data + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 3 + y + which * 50);
            p[1] = (uint8_t)(x ^ y);
            p[2] = (uint8_t)((x * y) >> 4);
        }
}

void yc_harness_paint(yc_image *im, const yc_harness_rect *rects, size_t n)
{
    for (size_t r = 0; r < n; r++)
        for (int y = rects[r].y1; y <= rects[r].y2; y++)
            for (int x = rects[r].x1; x <= rects[r].x2; x++) {
                uint8_t *p = im->data + ((size_t)y * im->w + x) * 3;
                p[0] = (uint8_t)rects[r].r;
                p[1] = (uint8_t)rects[r].g;
                p[2] = (uint8_t)rects[r].b;
            }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t l = strlen(s), ls = strlen(suffix);
    return l > ls && !strcmp(s + l - ls, suffix);
}

void yc_harness_write_image(const char *path, const yc_image *im)
{
    yc_harness_make_parent(path);
    if (!ends_with(path, ".tif")) {
        ck_assert_msg(yc_image_save(im, path, 0) == YC_OK, "%s", yc_last_error());
        return;
    }
    ck_assert_int_eq(yc_vips_init(), YC_OK);
    VipsImage *v = vips_image_new_from_memory(im->data, (size_t)im->w * im->h * 3, im->w, im->h, 3,
                                              VIPS_FORMAT_UCHAR);
    ck_assert_ptr_nonnull(v);
    int r = ends_with(path, "_strip.tif")
                ? vips_tiffsave(v, path, "compression", VIPS_FOREIGN_TIFF_COMPRESSION_DEFLATE, NULL)
                : vips_tiffsave(v, path, "tile", TRUE, "tile_width", 128, "tile_height", 128, NULL);
    ck_assert_msg(r == 0, "writing %s: %s", path, vips_error_buffer());
    g_object_unref(v);
}

/* ---------------------------------------------------------------------------------------------
 * Datasets.
 * ------------------------------------------------------------------------------------------- */

int yc_harness_demo(const char *dir, const yc_demo_options *opt, char *yaml, size_t len)
{
    yc_demo_options small;
    if (!opt) {
        yc_demo_options_default(&small);
        small.n_train = 16;
        small.n_val = 8;
        small.min_side = 64;
        small.max_side = 96;
        opt = &small;
    }
    int st = yc_demo_write(dir, opt);
    if (st == YC_OK)
        snprintf(yaml, len, "%s/%s", dir, YC_DEMO_YAML);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Backends and models.
 * ------------------------------------------------------------------------------------------- */

void yc_harness_cpu(yc_backend **be, int threads)
{
    ck_assert_msg(yc_device_open("cpu", threads, false, be) == YC_OK, "%s", yc_last_error());
}

yc_model *yc_harness_tiny_model(yc_backend *be, int nc, int seed)
{
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    ck_assert_msg(yc_model_cfg_load(&cfg, yc_harness_tiny_cfg(), nc) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_msg(yc_model_new(&m, cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_alloc(m, be) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_init_weights(m, (uint64_t)seed) == YC_OK, "%s", yc_last_error());
    return m;
}

void yc_harness_tiny_infer(yc_backend **be, yc_infer_model *im)
{
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS),
               *cfg = yc_harness_test_data(YC_HARNESS_TINY_CFG);
    ck_assert_msg(yc_file_exists(w) && yc_file_exists(cfg),
                  "%s not found (set YOLOCL_TEST_DATA to the source tree's tests/data)", w);
    yc_harness_cpu(be, 1);
    ck_assert_msg(yc_infer_model_load(im, w, cfg, *be) == YC_OK, "%s", yc_last_error());
}

int yc_harness_opencl_devices(void)
{
#ifdef YC_HAVE_OPENCL
    int fd[2], n = 0;
    if (pipe(fd) != 0)
        return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        yc_device_info *devs = NULL;
        int count = 0;
        if (yc_cl_list_devices(&devs, &count) != YC_OK)
            count = 0;
        _exit(write(fd[1], &count, sizeof count) == (ssize_t)sizeof count ? 0 : 1);
    }
    close(fd[1]);
    if (pid < 0 || read(fd[0], &n, sizeof n) != (ssize_t)sizeof n)
        n = 0;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return n;
#else
    return 0;
#endif
}
