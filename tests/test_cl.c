/* Tests of the OpenCL backend beyond the op parity of test_ops.c:
 *
 *  1. device selection (--device): the choice on made-up device lists (auto prefers the GPU with
 *     the most memory; opencl, opencl:N, name substrings; errors listing the devices), then
 *     yc_device_open on this machine's devices;
 *  2. the program cache: miss then hit, YOLOCL_CL_CACHE=0, corrupt and truncated files rebuilt,
 *     YOLOCL_CL_KERNELS (sources from a directory, a new cache key, a missing file, a build error
 *     with its log);
 *  3. the backend: device info, buffers, error paths (placement, workspace, unsupported ops,
 *     allocation limits, status names), validation's decode, confidence filter and loss on the
 *     device against the host's, a large convolution's three passes against the CPU
 *     backend by the implicit GEMMs (the default, with every tile of the tile table) and by
 *     im2col + CLBlast (whose GEMMs need CLBlast's temporary buffer), with the workspace at byte
 *     0 and at an unaligned offset; the tile table's tuning round trip; a step's counts of
 *     launches, host waits and bytes;
 *  4. the golden step (tests/golden.c, shared with test_golden): one training step of
 *     tests/data/tiny on the OpenCL backend against PyTorch with the CPU backend's tolerances
 *     (1e-4 heads and loss, 1e-3 gradients), the BatchNorm running statistics after it and the
 *     optimizer iteration after it (warmup, clipping, SGD, EMA); the step again with SiLU outputs
 *     recomputed by the fused BN+SiLU ops (the same gradient bits), and with FP16 storage (every
 *     gradient tensor's direction and size against PyTorch's and against the CPU backend's FP16
 *     step).
 *
 * OpenCL objects are created inside the tests only (Check forks each test, and a forked child of
 * a process that has started the OpenCL platform hangs); main counts the devices in a child
 * process (yc_harness_opencl_devices).  Without any OpenCL device (or in a build without OpenCL)
 * only part 1 runs, and the program exits 77 (skipped) when that passes, 99 with
 * YOLOCL_REQUIRE_OPENCL=1.
 *
 * test_cl_ref (YC_TEST_SHARED) runs ../shared/ref's YOLOv5n at 320 on OpenCL against PyTorch
 * with the same tolerances; it exits 77 without ../shared or an OpenCL device. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "bench.h"
#include "cl_backend.h"
#include "cl_devices.h"
#include "device.h"
#include "half.h"
#include "hyp.h"
#include "log.h"
#include "loss_device.h"
#include "model.h"
#include "nms.h"
#include "safetensors.h"
#include "step.h"
#include "util.h"
#include "val.h"
#include "golden.h"
#include "harness.h"
#include "yctest.h"

#ifdef YC_HAVE_OPENCL
#include "cl_kernels.h"
#endif

#define TOL_OUT 1e-4
#define TOL_GRAD 1e-3

/* OpenCL devices on this machine (counted by main in a child process) */
static int cl_devices;

#ifndef YC_TEST_SHARED

static bool err_has(const char *s)
{
    return strstr(yc_last_error(), s) != NULL;
}

/* ---------------------------------------------------------------------------------------------
 * 1. Device selection.
 * ------------------------------------------------------------------------------------------- */
static yc_device_info fake(const char *name, bool gpu, size_t mem)
{
    yc_device_info d = {.kind = YC_DEVICE_OPENCL, .is_gpu = gpu, .mem_total = mem};
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.platform, sizeof d.platform, "Test Platform");
    return d;
}

START_TEST(pick_device)
{
    yc_device_info devs[4] = {
        fake("pthread-skylake-avx512", false, (size_t)64 << 30),
        fake("Intel(R) Arc(TM) A770 Graphics", true, (size_t)16 << 30),
        fake("NVIDIA H100 80GB HBM3", true, (size_t)80 << 30),
        fake("NVIDIA GeForce RTX 4090", true, (size_t)24 << 30),
    };
    int idx = 99;
    /* auto: the GPU with the most memory, not the (larger) CPU device */
    ck_assert_int_eq(yc_device_pick("auto", devs, 4, true, &idx), YC_OK);
    ck_assert_int_eq(idx, 2);
    ck_assert_int_eq(yc_device_pick(NULL, devs, 4, true, &idx), YC_OK);
    ck_assert_int_eq(idx, 2);
    ck_assert_int_eq(yc_device_pick("", devs, 2, true, &idx), YC_OK);
    ck_assert_int_eq(idx, 1);
    /* auto without a GPU: the CPU backend */
    ck_assert_int_eq(yc_device_pick("auto", devs, 1, true, &idx), YC_OK);
    ck_assert_int_eq(idx, -1);
    ck_assert_int_eq(yc_device_pick("auto", NULL, 0, false, &idx), YC_OK);
    ck_assert_int_eq(idx, -1);
    ck_assert_int_eq(yc_device_pick("cpu", devs, 4, true, &idx), YC_OK);
    ck_assert_int_eq(idx, -1);
    /* opencl, opencl:N */
    ck_assert_int_eq(yc_device_pick("opencl", devs, 4, true, &idx), YC_OK);
    ck_assert_int_eq(idx, 0);
    ck_assert_int_eq(yc_device_pick("opencl:3", devs, 4, true, &idx), YC_OK);
    ck_assert_int_eq(idx, 3);
    ck_assert_int_eq(yc_device_pick("opencl:4", devs, 4, true, &idx), YC_EUSAGE);
    ck_assert_msg(err_has("no device opencl:4") && err_has("opencl:2 NVIDIA H100 80GB HBM3 (Test Platform)") &&
                      err_has("cpu"),
                  "%s", yc_last_error());
    ck_assert_int_eq(yc_device_pick("opencl:x", devs, 4, true, &idx), YC_EUSAGE);
    ck_assert_msg(err_has("opencl:N"), "%s", yc_last_error());
    ck_assert_int_eq(yc_device_pick("opencl:", devs, 4, true, &idx), YC_EUSAGE);
    ck_assert_int_eq(yc_device_pick("opencl:-1", devs, 4, true, &idx), YC_EUSAGE);
    ck_assert_int_eq(yc_device_pick("opencl", NULL, 0, true, &idx), YC_EUSAGE);
    ck_assert_msg(err_has("no OpenCL device found") && err_has("--device cpu"), "%s", yc_last_error());
    /* a name substring, case ignored: the first device that matches */
    ck_assert_int_eq(yc_device_pick("h100", devs, 4, true, &idx), YC_OK);
    ck_assert_int_eq(idx, 2);
    ck_assert_int_eq(yc_device_pick("NVIDIA", devs, 4, true, &idx), YC_OK);
    ck_assert_int_eq(idx, 2);
    ck_assert_int_eq(yc_device_pick("arc(tm)", devs, 4, true, &idx), YC_OK);
    ck_assert_int_eq(idx, 1);
    ck_assert_int_eq(yc_device_pick("radeon", devs, 4, true, &idx), YC_EUSAGE);
    ck_assert_msg(err_has("unknown device 'radeon'") && err_has("opencl:0 pthread-skylake-avx512") &&
                      err_has("opencl:3 NVIDIA GeForce RTX 4090"),
                  "%s", yc_last_error());
    /* a build without OpenCL */
    ck_assert_int_eq(yc_device_pick("opencl:0", NULL, 0, false, &idx), YC_EUSAGE);
    ck_assert_msg(err_has("built without OpenCL"), "%s", yc_last_error());
    ck_assert_int_eq(yc_device_pick("h100", NULL, 0, false, &idx), YC_EUSAGE);
    ck_assert_msg(err_has("unknown device 'h100'") && err_has("built without OpenCL"), "%s", yc_last_error());
}
END_TEST

START_TEST(open_cpu_and_errors)
{
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_device_open("cpu", 2, false, &be), YC_OK);
    ck_assert_int_eq(be->info.kind, YC_DEVICE_CPU);
    yc_backend_free(be);
    be = NULL;
    ck_assert_int_eq(yc_device_open("no-such-device-anywhere", 0, false, &be), YC_EUSAGE);
    ck_assert_ptr_null(be);
    ck_assert_msg(err_has("no-such-device-anywhere") && err_has("cpu"), "%s", yc_last_error());
    ck_assert_int_eq(yc_device_open("opencl:999", 0, false, &be), YC_EUSAGE);
    ck_assert_ptr_null(be);
    /* auto: an OpenCL GPU if there is one, else the CPU backend */
    ck_assert_int_eq(yc_device_open("auto", 0, false, &be), YC_OK);
    ck_assert(be->info.kind == YC_DEVICE_CPU || be->info.is_gpu);
    yc_backend_free(be);
}
END_TEST

#ifdef YC_HAVE_OPENCL

START_TEST(open_opencl)
{
    yc_device_info *devs = NULL;
    int n = 0;
    ck_assert_int_eq(yc_cl_list_devices(&devs, &n), YC_OK);
    ck_assert_int_ge(n, 1);
    yc_backend *be = NULL;
    ck_assert_msg(yc_device_open("opencl", 0, false, &be) == YC_OK, "%s", yc_last_error());
    ck_assert_str_eq(be->iface->name, "opencl");
    ck_assert_str_eq(be->info.name, devs[0].name);
    yc_backend_free(be);
    /* the first six characters of device 0's name, in upper case, select it (or an earlier
     * device with the same text) */
    char sub[8] = {0};
    for (int i = 0; i < 6 && devs[0].name[i]; i++)
        sub[i] = (char)((devs[0].name[i] >= 'a' && devs[0].name[i] <= 'z') ? devs[0].name[i] - 32 : devs[0].name[i]);
    ck_assert_msg(yc_device_open(sub, 0, false, &be) == YC_OK, "%s: %s", sub, yc_last_error());
    ck_assert_str_eq(be->info.name, devs[0].name);
    yc_backend_free(be);
    char spec[32];
    snprintf(spec, sizeof spec, "opencl:%d", n - 1);
    ck_assert_msg(yc_device_open(spec, 0, false, &be) == YC_OK, "%s", yc_last_error());
    yc_backend_free(be);
    snprintf(spec, sizeof spec, "opencl:%d", n);
    ck_assert_int_eq(yc_device_open(spec, 0, false, &be), YC_EUSAGE);
    ck_assert_msg(err_has("opencl:0 ") && err_has(devs[0].name), "%s", yc_last_error());
    /* the backend constructor itself */
    ck_assert_int_eq(yc_backend_opencl_new(&be, n), YC_EUNSUPPORTED);
    ck_assert_msg(err_has("the devices are opencl:0"), "%s", yc_last_error());
    ck_assert_int_eq(yc_backend_opencl_new(&be, -1), YC_EUNSUPPORTED);
    free(devs);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 2. The program cache and kernel sources.
 * ------------------------------------------------------------------------------------------- */

/* A fresh temporary directory as XDG_CACHE_HOME (cache on); returns the cache directory. */
static char *fresh_cache(char *tmp, size_t len)
{
    const char *made = yc_harness_tmpdir_make("cl");
    ck_assert_ptr_nonnull(made);
    snprintf(tmp, len, "%s", made);
    setenv("XDG_CACHE_HOME", tmp, 1);
    unsetenv("YOLOCL_CL_CACHE");
    unsetenv("YOLOCL_CL_KERNELS");
    char *dir = yc_cl_cache_dir();
    ck_assert_ptr_nonnull(dir);
    return dir;
}

/* Entries of a directory other than . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* The first *.bin file of the cache directory (heap path), NULL if none. */
static char *first_entry(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    struct dirent *e;
    char *found = NULL;
    while (!found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".bin") == 0)
            found = yc_path_join(dir, e->d_name);
    }
    closedir(d);
    return found;
}

/* Opens device 0, fills 5 floats with `value` (the elementwise program) and checks them against
 * `want`; returns the backend's cache counters.  Fails the test with the backend's message when
 * exec fails and `expect_ok`; otherwise returns the status in *status. */
static yc_cl_program_stats fill_once(float value, float want, bool expect_ok, int *status)
{
    yc_backend *be = NULL;
    ck_assert_msg(yc_backend_opencl_new(&be, 0) == YC_OK, "%s", yc_last_error());
    yc_tensor t = yc_tensor_make(1, 5, 1, 1, YC_F32, "t");
    t.buf = yc_buffer_alloc(be, 5 * sizeof(float));
    ck_assert_ptr_nonnull(t.buf);
    yc_op op = {.kind = YC_OP_FILL, .dst = {&t}, .name = "fill"};
    op.p.fill.value = value;
    int st = yc_backend_exec(be, &op, (yc_span){0});
    if (status)
        *status = st;
    if (expect_ok) {
        ck_assert_msg(st == YC_OK, "%s", yc_last_error());
        float got[5];
        ck_assert_int_eq(yc_tensor_get_f32(be, &t, got), YC_OK);
        for (int i = 0; i < 5; i++)
            ck_assert_float_eq(got[i], want);
    }
    yc_cl_program_stats s = yc_cl_backend_stats(be);
    yc_buffer_free(be, t.buf);
    yc_backend_free(be);
    return s;
}

START_TEST(cache_miss_then_hit)
{
    char tmp[512];
    char *dir = fresh_cache(tmp, sizeof tmp);
    ck_assert_msg(strstr(dir, tmp) == dir && strstr(dir, "/yolocl/cl") != NULL, "%s", dir);
    yc_cl_program_stats s = fill_once(1.5f, 1.5f, true, NULL);
    ck_assert_int_eq(s.built, 1);
    ck_assert_int_eq(s.loaded, 0);
    ck_assert_int_eq(s.stored, 1);
    ck_assert_int_eq(s.rejected, 0);
    ck_assert_int_eq(yc_count_files(dir, ".bin"), 1);
    s = fill_once(-2.0f, -2.0f, true, NULL);
    ck_assert_int_eq(s.built, 0);
    ck_assert_int_eq(s.loaded, 1);
    ck_assert_int_eq(s.stored, 0);
    ck_assert_int_eq(yc_count_files(dir, ".bin"), 1);
    /* no temporary files left behind */
    ck_assert_int_eq(count_entries(dir), 1);
    free(dir);
    yc_harness_tmpdir_remove();
}
END_TEST

START_TEST(cache_disabled)
{
    char tmp[512];
    char *dir = fresh_cache(tmp, sizeof tmp);
    setenv("YOLOCL_CL_CACHE", "0", 1);
    ck_assert_ptr_null(yc_cl_cache_dir());
    yc_cl_program_stats s = fill_once(3.0f, 3.0f, true, NULL);
    ck_assert_int_eq(s.built, 1);
    ck_assert_int_eq(s.stored, 0);
    s = fill_once(3.0f, 3.0f, true, NULL);
    ck_assert_int_eq(s.built, 1);
    ck_assert_int_eq(s.loaded, 0);
    ck_assert(!yc_is_dir(dir));
    /* any other value keeps it on */
    setenv("YOLOCL_CL_CACHE", "1", 1);
    char *again = yc_cl_cache_dir();
    ck_assert_str_eq(again, dir);
    /* HOME when XDG_CACHE_HOME is unset */
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/someone", 1);
    char *home = yc_cl_cache_dir();
    ck_assert_str_eq(home, "/home/someone/.cache/yolocl/cl");
    free(home);
    free(again);
    free(dir);
    yc_harness_tmpdir_remove();
}
END_TEST

/* Overwrites a cache file with a damaged copy: flips a byte at `at` (from the end when negative)
 * or, with at == 0, truncates it to half. */
static void damage(const char *path, long at)
{
    char *data = NULL;
    size_t n = 0;
    ck_assert_int_eq(yc_read_file(path, &data, &n), YC_OK);
    if (at == 0)
        n /= 2;
    else
        data[at > 0 ? (size_t)at : n - (size_t)(-at)] ^= 0x5a;
    ck_assert_int_eq(yc_write_file_atomic(path, data, n), YC_OK);
    free(data);
}

START_TEST(cache_corrupt_rebuilt)
{
    char tmp[512];
    char *dir = fresh_cache(tmp, sizeof tmp);
    fill_once(1.0f, 1.0f, true, NULL);
    char *entry = first_entry(dir);
    ck_assert_ptr_nonnull(entry);
    /* a byte of the binary (checksum mismatch), the magic, the checksum, half the file */
    const long where[] = {-100, 3, -1, 0};
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        damage(entry, where[i]);
        yc_cl_program_stats s = fill_once(7.0f, 7.0f, true, NULL);
        ck_assert_msg(s.rejected == 1 && s.built == 1 && s.stored == 1 && s.loaded == 0,
                      "damage %zu: rejected %d built %d stored %d loaded %d", i, s.rejected, s.built, s.stored,
                      s.loaded);
        /* rewritten: the next backend loads it */
        s = fill_once(8.0f, 8.0f, true, NULL);
        ck_assert_int_eq(s.loaded, 1);
        ck_assert_int_eq(s.rejected, 0);
    }
    /* an empty file */
    ck_assert_int_eq(yc_write_file_atomic(entry, "", 0), YC_OK);
    yc_cl_program_stats s = fill_once(9.0f, 9.0f, true, NULL);
    ck_assert_int_eq(s.rejected, 1);
    ck_assert_int_eq(yc_count_files(dir, ".bin"), 1);
    free(entry);
    free(dir);
    yc_harness_tmpdir_remove();
}
END_TEST

/* Writes every embedded kernel source to `dir`, with elementwise.cl passed through `edit`. */
static void write_sources(const char *dir, void (*edit)(char *text, size_t cap))
{
    ck_assert_int_eq(yc_mkdirs(dir), YC_OK);
    for (int i = 0; i < yc_cl_nsources; i++) {
        const yc_cl_source *s = &yc_cl_sources[i];
        size_t cap = s->len + 4096;
        char *text = calloc(cap, 1);
        ck_assert_ptr_nonnull(text);
        memcpy(text, s->text, s->len);
        if (edit && strcmp(s->name, "elementwise.cl") == 0)
            edit(text, cap);
        char *path = yc_path_join(dir, s->name);
        ck_assert_int_eq(yc_write_file_atomic(path, text, strlen(text)), YC_OK);
        free(path);
        free(text);
    }
}

/* fill writes value + 1 */
static void fill_plus_one(char *text, size_t cap)
{
    (void)cap;
    char *p = strstr(text, "ST(y, n, i, value);");
    ck_assert_ptr_nonnull(p);
    const char *repl = "ST(y, n, i, value+1);";
    ck_assert_uint_eq(strlen(repl), strlen("ST(y, n, i, value);") + 2);
    memmove(p + strlen(repl), p + strlen("ST(y, n, i, value);"), strlen(p + strlen("ST(y, n, i, value);")) + 1);
    memcpy(p, repl, strlen(repl));
}

/* a syntax error at the end */
static void broken(char *text, size_t cap)
{
    strncat(text, "\n__kernel void broken(__global float *p) { p[0] = undeclared_name; }\n",
            cap - strlen(text) - 1);
}

START_TEST(kernels_from_directory)
{
    char tmp[512];
    char *dir = fresh_cache(tmp, sizeof tmp);
    fill_once(1.0f, 1.0f, true, NULL);
    ck_assert_int_eq(yc_count_files(dir, ".bin"), 1);

    /* the same sources from a directory: the same key, a cache hit */
    char *src = yc_path_join(tmp, "kernels");
    write_sources(src, NULL);
    setenv("YOLOCL_CL_KERNELS", src, 1);
    yc_cl_program_stats s = fill_once(2.0f, 2.0f, true, NULL);
    ck_assert_int_eq(s.loaded, 1);
    ck_assert_int_eq(s.built, 0);

    /* an edited source: used (fill writes value + 1), a new key, a second cache file */
    write_sources(src, fill_plus_one);
    s = fill_once(2.0f, 3.0f, true, NULL);
    ck_assert_int_eq(s.built, 1);
    ck_assert_int_eq(yc_count_files(dir, ".bin"), 2);
    s = fill_once(4.0f, 5.0f, true, NULL);
    ck_assert_int_eq(s.loaded, 1);

    /* a build error: the file, the status and the compiler's log in the message */
    write_sources(src, broken);
    int st = YC_OK;
    s = fill_once(1.0f, 1.0f, false, &st);
    ck_assert_int_eq(st, YC_EDEVICE);
    ck_assert_msg(err_has("building elementwise.cl") && err_has("CL_BUILD_PROGRAM_FAILURE") &&
                      err_has("undeclared_name") && err_has("fill 'fill'"),
                  "%s", yc_last_error());
    ck_assert_int_eq(s.stored, 0);

    /* a directory without the files */
    char *empty = yc_path_join(tmp, "empty");
    ck_assert_int_eq(yc_mkdirs(empty), YC_OK);
    setenv("YOLOCL_CL_KERNELS", empty, 1);
    s = fill_once(1.0f, 1.0f, false, &st);
    ck_assert_int_ne(st, YC_OK);
    ck_assert_msg(err_has("YOLOCL_CL_KERNELS=") && err_has("common.cl"), "%s", yc_last_error());

    /* unset: the embedded sources again, from the cache */
    unsetenv("YOLOCL_CL_KERNELS");
    s = fill_once(6.0f, 6.0f, true, NULL);
    ck_assert_int_eq(s.loaded, 1);
    free(empty);
    free(src);
    free(dir);
    yc_harness_tmpdir_remove();
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 3. The backend.
 * ------------------------------------------------------------------------------------------- */
START_TEST(backend_basics)
{
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_opencl_new(&be, 0), YC_OK);
    const yc_device_info *info = &be->info;
    ck_assert_int_eq(info->kind, YC_DEVICE_OPENCL);
    ck_assert_str_eq(be->iface->name, "opencl");
    ck_assert(info->fp16_storage);
    ck_assert(info->max_alloc > 0 && info->mem_total >= info->max_alloc);
    ck_assert(info->mem_free <= info->mem_total); /* 0 when the device cannot tell */
    ck_assert(info->alignment >= 4 && (info->alignment & (info->alignment - 1)) == 0);
    ck_assert_int_ge(info->cl_platform, 0);
    ck_assert_ptr_null(be->iface->buffer_host_ptr);

    yc_buffer *buf = yc_buffer_alloc(be, 1000);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(be->iface->buffer_size(be, buf), 1000);
    char bytes[16] = "abcdefghijklmno", back[16];
    ck_assert_int_eq(be->iface->buffer_write(be, buf, 984, bytes, 16), YC_OK);
    ck_assert_int_eq(be->iface->buffer_write(be, buf, 985, bytes, 16), YC_EFORMAT);
    ck_assert_int_eq(be->iface->buffer_memset(be, buf, 990, 'z', 2), YC_OK);
    ck_assert_int_eq(be->iface->buffer_read(be, buf, 984, back, 16), YC_OK);
    ck_assert(memcmp(back, "abcdefzzijklmno", 16) == 0);
    ck_assert_int_eq(be->iface->buffer_read(be, buf, SIZE_MAX, back, 2), YC_EFORMAT);
    ck_assert_int_eq(be->iface->buffer_memset(be, buf, 999, 0, 2), YC_EFORMAT);
    ck_assert_ptr_null(yc_buffer_alloc(be, info->max_alloc + 1));
    ck_assert_msg(err_has("largest allocation"), "%s", yc_last_error());

    /* tensors: get/set with nstride, ops at odd (element-aligned) offsets */
    yc_tensor t = yc_tensor_make(3, 2, 2, 3, YC_F32, "t");
    t.buf = buf, t.offset = 44, t.nstride = 20;
    float v[36], r[36];
    for (int i = 0; i < 36; i++)
        v[i] = (float)i;
    ck_assert_int_eq(yc_tensor_set_f32(be, &t, v), YC_OK);
    yc_op op = {.kind = YC_OP_SILU, .src = {&t}, .dst = {&t}, .name = "s"};
    ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    ck_assert_int_eq(yc_tensor_get_f32(be, &t, r), YC_OK);
    for (int i = 0; i < 36; i++)
        ck_assert_float_eq_tol(r[i], v[i] / (1.0f + expf(-v[i])), 1e-5f);

    /* placement errors */
    yc_tensor bad = t;
    bad.offset = 46;
    op.src[0] = op.dst[0] = &bad;
    ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_EFORMAT);
    ck_assert_msg(err_has("silu 's'") && err_has("aligned to its element size"), "%s", yc_last_error());
    bad.offset = 960;
    ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_EFORMAT);
    bad.buf = NULL;
    ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_EFORMAT);
    ck_assert_msg(err_has("no buffer"), "%s", yc_last_error());

    /* unsupported: grouped convolution, FP16 gradients into a GEMM */
    yc_tensor x = yc_tensor_make(1, 4, 4, 4, YC_F32, "x"), w = yc_tensor_make(4, 2, 1, 1, YC_F32, "w");
    yc_tensor y = yc_tensor_make(1, 4, 4, 4, YC_F32, "y");
    x.buf = y.buf = w.buf = buf;
    y.offset = 256, w.offset = 512;
    yc_op cv = {.kind = YC_OP_CONV2D, .src = {&x, &w}, .dst = {&y}};
    cv.p.conv.kh = cv.p.conv.kw = cv.p.conv.stride_h = cv.p.conv.stride_w = 1;
    cv.p.conv.groups = 2;
    ck_assert(!be->iface->supports(be, &cv));
    ck_assert_int_eq(yc_backend_exec(be, &cv, (yc_span){0}), YC_EUNSUPPORTED);
    yc_tensor dyh = y, w4 = yc_tensor_make(4, 4, 1, 1, YC_F32, "w4");
    dyh.type = YC_F16;
    w4.buf = buf, w4.offset = 512;
    yc_op bd = {.kind = YC_OP_CONV2D_BWD_DATA, .src = {&dyh, &w4}, .dst = {&x}};
    bd.p.conv = cv.p.conv;
    bd.p.conv.groups = 1;
    ck_assert(!be->iface->supports(be, &bd));
    bd.src[0] = &y;
    ck_assert(be->iface->supports(be, &bd));

    /* a 3x3 convolution's forward pass needs no workspace; its backward-filter pass over a
     * 32x32 image splits its reduction over 1024 pixels, needs room for the partial sums, and
     * refuses to run without it */
    yc_tensor w3 = yc_tensor_make(4, 4, 3, 3, YC_F32, "w3");
    w3.buf = yc_buffer_alloc(be, 4 * 4 * 9 * sizeof(float));
    ck_assert_ptr_nonnull(w3.buf);
    yc_op f3 = {.kind = YC_OP_CONV2D, .src = {&x, &w3}, .dst = {&y}, .name = "f3"};
    f3.p.conv.kh = f3.p.conv.kw = 3, f3.p.conv.stride_h = f3.p.conv.stride_w = 1;
    f3.p.conv.pad_h = f3.p.conv.pad_w = 1, f3.p.conv.groups = 1;
    ck_assert_uint_eq(be->iface->workspace(be, &f3), 0);
    yc_buffer *big = yc_buffer_alloc(be, 2 * 4 * 32 * 32 * sizeof(float));
    ck_assert_ptr_nonnull(big);
    yc_tensor x32 = yc_tensor_make(1, 4, 32, 32, YC_F32, "x32"), dy32 = x32;
    x32.buf = dy32.buf = big;
    dy32.offset = 4 * 32 * 32 * sizeof(float);
    yc_op c3 = {.kind = YC_OP_CONV2D_BWD_FILTER, .src = {&x32, &dy32}, .dst = {&w3}, .name = "c3"};
    c3.p.conv = f3.p.conv;
    size_t need = be->iface->workspace(be, &c3);
    ck_assert_uint_ge(need, 2 * 4 * 36 * sizeof(float));
    ck_assert_int_eq(yc_backend_exec(be, &c3, (yc_span){0}), YC_EFORMAT);
    ck_assert_msg(err_has("conv2d_bwd_filter 'c3'") && err_has("workspace"), "%s", yc_last_error());
    yc_buffer *wsb = yc_buffer_alloc(be, need + 64);
    ck_assert_int_eq(yc_backend_exec(be, &c3, (yc_span){wsb, 0, need - 4}), YC_EFORMAT);
    ck_assert_int_eq(yc_backend_exec(be, &c3, (yc_span){wsb, 64, need}), YC_OK);
    ck_assert_int_eq(yc_backend_exec(be, &c3, (yc_span){wsb, 66, need}), YC_EFORMAT);
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    ck_assert_uint_eq(be->iface->workspace(be, &op), 0);

    /* max-pool's backward keeps its windows' maxima (an int per pooled element) in the op's
     * workspace, which the memory plan counts, and refuses to run without it */
    yc_tensor px = yc_tensor_make(1, 4, 32, 32, YC_F32, "px"), pdx = px;
    yc_tensor pdy = yc_tensor_make(1, 4, 16, 16, YC_F32, "pdy");
    px.buf = pdx.buf = big;
    pdx.offset = 4 * 32 * 32 * sizeof(float);
    pdy.buf = yc_buffer_alloc(be, 4 * 16 * 16 * sizeof(float));
    ck_assert_ptr_nonnull(pdy.buf);
    yc_op mpb = {.kind = YC_OP_MAXPOOL_BWD, .src = {&pdy, &px}, .dst = {&pdx}, .name = "mpb"};
    mpb.p.pool.k = 2, mpb.p.pool.stride = 2, mpb.p.pool.pad = 0;
    ck_assert_int_eq(yc_op_check(&mpb), YC_OK);
    const size_t mp_need = be->iface->workspace(be, &mpb);
    ck_assert_uint_eq(mp_need, 4 * 16 * 16 * sizeof(int));
    ck_assert_int_eq(yc_backend_exec(be, &mpb, (yc_span){0}), YC_EFORMAT);
    ck_assert_msg(err_has("maxpool_bwd 'mpb'") && err_has("workspace"), "%s", yc_last_error());
    yc_buffer *mpw = yc_buffer_alloc(be, mp_need + 8);
    ck_assert_ptr_nonnull(mpw);
    ck_assert_int_eq(yc_backend_exec(be, &mpb, (yc_span){mpw, 8, mp_need}), YC_OK);
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    yc_buffer_free(be, mpw);
    yc_buffer_free(be, pdy.buf);
    yc_buffer_free(be, wsb);
    yc_buffer_free(be, big);
    yc_buffer_free(be, w3.buf);
    yc_buffer_free(be, buf);
    yc_buffer_free(be, NULL);
    yc_backend_free(be);

    /* status names */
    ck_assert_str_eq(yc_clblast_status_name(-2050), "CLBlastInsufficientMemoryTemp");
    ck_assert_str_eq(yc_clblast_status_name(-2045), "CLBlastNoHalfPrecision");
    ck_assert_str_eq(yc_clblast_status_name(-1017), "CLBlastInvalidDimension");
    ck_assert_str_eq(yc_clblast_status_name(-11), "CL_BUILD_PROGRAM_FAILURE");
    ck_assert_str_eq(yc_clblast_status_name(0), "CLBlastSuccess");
    ck_assert_str_eq(yc_clblast_status_name(12345), "unknown CLBlast status");
    ck_assert_str_eq(yc_cl_error_name(-54), "CL_INVALID_WORK_GROUP_SIZE");
}
END_TEST

/* Runs one convolution op (kind, with bias / db) on a backend with the workspace at `ws_off` bytes
 * into its buffer; inputs from `in`, dst[0] out into `out`.  Shapes: x (1,32,160,160), W
 * (64,32,3,3), stride 1, padding 1: GEMMs of 64 x 25600 x 288 and the like. */
static void run_big_conv(yc_backend *be, yc_op_kind kind, size_t ws_off, const float *xv, const float *wv,
                         const float *yv, float *out, size_t *ws_need)
{
    yc_tensor x = yc_tensor_make(1, 32, 160, 160, YC_F32, "x"), w = yc_tensor_make(64, 32, 3, 3, YC_F32, "w");
    yc_tensor y = yc_tensor_make(1, 64, 160, 160, YC_F32, "y");
    x.buf = yc_buffer_alloc(be, yc_tensor_elems(&x) * 4);
    w.buf = yc_buffer_alloc(be, yc_tensor_elems(&w) * 4);
    y.buf = yc_buffer_alloc(be, yc_tensor_elems(&y) * 4);
    ck_assert(x.buf && w.buf && y.buf);
    ck_assert_int_eq(yc_tensor_set_f32(be, &x, xv), YC_OK);
    ck_assert_int_eq(yc_tensor_set_f32(be, &w, wv), YC_OK);
    ck_assert_int_eq(yc_tensor_set_f32(be, &y, yv), YC_OK);
    yc_op op = {.kind = kind, .name = "big"};
    if (kind == YC_OP_CONV2D)
        op.src[0] = &x, op.src[1] = &w, op.dst[0] = &y;
    else if (kind == YC_OP_CONV2D_BWD_DATA)
        op.src[0] = &y, op.src[1] = &w, op.dst[0] = &x;
    else
        op.src[0] = &x, op.src[1] = &y, op.dst[0] = &w;
    op.p.conv.kh = op.p.conv.kw = 3, op.p.conv.stride_h = op.p.conv.stride_w = 1;
    op.p.conv.pad_h = op.p.conv.pad_w = 1, op.p.conv.groups = 1;
    size_t need = be->iface->workspace(be, &op);
    *ws_need = need;
    yc_buffer *ws = yc_buffer_alloc(be, ws_off + need);
    ck_assert_ptr_nonnull(ws);
    int st = yc_backend_exec(be, &op, (yc_span){ws, ws_off, need});
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_tensor_get_f32(be, op.dst[0], out), YC_OK);
    yc_buffer_free(be, ws);
    yc_buffer_free(be, x.buf);
    yc_buffer_free(be, w.buf);
    yc_buffer_free(be, y.buf);
}

/* The three passes of the big convolution on OpenCL (im2col + CLBlast when `clblast`, else the
 * implicit GEMMs) against the CPU backend, with the workspace at byte 0 of its buffer and at an
 * offset below the base address alignment. */
static void check_big_convs(bool clblast)
{
    size_t nx = 32 * 160 * 160, nw = 64 * 32 * 9, ny = 64 * 160 * 160;
    float *xv = malloc(nx * 4), *wv = malloc(nw * 4), *yv = malloc(ny * 4);
    float *ref = malloc(ny * 4), *got = malloc(ny * 4);
    ck_assert(xv && wv && yv && ref && got);
    unsigned s = 12345;
    for (size_t i = 0; i < ny; i++) {
        s = s * 1103515245u + 12345u;
        float v = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
        yv[i] = v;
        if (i < nx)
            xv[i] = -v;
        if (i < nw)
            wv[i] = v * 0.5f;
    }
    yc_backend *cpu = NULL, *cl = NULL;
    ck_assert_int_eq(yc_backend_cpu_new(&cpu, 0), YC_OK);
    /* the implementation is chosen when the backend is made (the test runs in a process of its
     * own) */
    if (clblast)
        ck_assert_int_eq(setenv("YOLOCL_CL_CONV", "clblast", 1), 0);
    ck_assert_int_eq(yc_backend_opencl_new(&cl, 0), YC_OK);
    const yc_op_kind kinds[3] = {YC_OP_CONV2D, YC_OP_CONV2D_BWD_DATA, YC_OP_CONV2D_BWD_FILTER};
    const size_t nout[3] = {ny, nx, nw};
    for (int k = 0; k < 3; k++) {
        size_t need, col = (size_t)288 * 25600 * 4;
        run_big_conv(cpu, kinds[k], 0, xv, wv, yv, ref, &need);
        const size_t offs[2] = {0, 64};
        for (int o = 0; o < 2; o++) {
            run_big_conv(cl, kinds[k], offs[o], xv, wv, yv, got, &need);
            double e = yc_test_rel_error(got, ref, nout[k]);
            ck_assert_msg(e < 1e-5, "%s at workspace offset %zu: error %.3g", yc_op_kind_name(kinds[k]), offs[o], e);
            if (clblast)
                printf("  %s: workspace %zu bytes (columns %zu), error %.2e\n",
                       yc_op_kind_name(kinds[k]), need, col, e);
            else
                printf("  %s (implicit GEMM): workspace %zu bytes, error %.2e\n",
                       yc_op_kind_name(kinds[k]), need, e);
        }
    }
    yc_backend_free(cpu);
    yc_backend_free(cl);
    unsetenv("YOLOCL_CL_CONV");
    free(xv), free(wv), free(yv), free(ref), free(got);
}

/* yc_tensor_set_u8_scaled on each of its three paths: in place in host memory (CPU), converted
 * on the device (OpenCL, dense tensors), through host floats (OpenCL, an image stride wider than
 * the image); FP32 and FP16; every value v/255, rounded to FP16 where stored so. */
START_TEST(u8_scaled_paths)
{
    enum { N = 2, C = 3, H = 5, W = 7, E = N * C * H * W, IMG = C * H * W };
    uint8_t px[E];
    float back[E];
    for (int i = 0; i < E; i++)
        px[i] = (uint8_t)(i * 37 + 11);
    for (int b = 0; b < 2; b++) {
        yc_backend *be = NULL;
        ck_assert_int_eq(b ? yc_backend_opencl_new(&be, 0) : yc_backend_cpu_new(&be, 1), YC_OK);
        yc_buffer *buf = yc_buffer_alloc(be, 4 * (E + 2 * IMG));
        ck_assert_ptr_nonnull(buf);
        for (int half = 0; half < 2; half++)
            for (int strided = 0; strided < 2; strided++) {
                yc_tensor t = yc_tensor_make(N, C, H, W, half ? YC_F16 : YC_F32, "input");
                t.buf = buf;
                if (strided)
                    t.nstride = IMG + 8;
                ck_assert_int_eq(yc_tensor_set_u8_scaled(be, &t, px), YC_OK);
                ck_assert_int_eq(yc_tensor_get_f32(be, &t, back), YC_OK);
                for (int i = 0; i < E; i++) {
                    float want = (float)px[i] / 255.0f;
                    if (half)
                        want = yc_half_to_float(yc_float_to_half(want));
                    ck_assert_msg(back[i] == want, "%s backend, %s%s: element %d is %g, not %g",
                                  be->iface->name, half ? "FP16" : "FP32", strided ? ", strided" : "",
                                  i, back[i], want);
                }
            }
        yc_buffer_free(be, buf);
        yc_backend_free(be);
    }
}
END_TEST

START_TEST(conv_with_clblast_temp)
{
    check_big_convs(true);
}
END_TEST

/* The implicit GEMMs on the same convolution: a 64 x 25600 x 288 forward GEMM over 400 tiles,
 * backward-filter's reduction over 25600 pixels split for the device's compute units. */
START_TEST(conv_igemm_big)
{
    check_big_convs(false);
}
END_TEST

/* One convolution pass (kind) with x (2,5,13,11), W (7,5,r,r), stride and padding as given, dy
 * shaped to match, FP16 x when `half`, on a backend: dst[0] into `out` (its element count in
 * *n).  Inputs are deterministic. */
static void small_conv(yc_backend *be, yc_op_kind kind, int r, int stride, int pad, bool half,
                       float *out, size_t *n)
{
    int P = (13 + 2 * pad - r) / stride + 1, Q = (11 + 2 * pad - r) / stride + 1;
    yc_tensor x = yc_tensor_make(2, 5, 13, 11, half ? YC_F16 : YC_F32, "x");
    yc_tensor w = yc_tensor_make(7, 5, r, r, YC_F32, "w"), b = yc_tensor_make(1, 7, 1, 1, YC_F32, "b");
    yc_tensor y = yc_tensor_make(2, 7, P, Q, YC_F32, "y");
    yc_tensor *ts[4] = {&x, &w, &b, &y};
    for (int i = 0; i < 4; i++) {
        size_t e = yc_tensor_elems(ts[i]);
        ts[i]->buf = yc_buffer_alloc(be, e * 4);
        ck_assert_ptr_nonnull(ts[i]->buf);
        float *v = malloc(e * 4);
        for (size_t j = 0; j < e; j++)
            v[j] = (float)((j * 7919 + (size_t)i * 104729) % 2001) / 1000.0f - 1.0f;
        ck_assert_int_eq(yc_tensor_set_f32(be, ts[i], v), YC_OK);
        free(v);
    }
    yc_op op = {.kind = kind, .name = "small"};
    if (kind == YC_OP_CONV2D)
        op.src[0] = &x, op.src[1] = &w, op.src[2] = &b, op.dst[0] = &y;
    else if (kind == YC_OP_CONV2D_BWD_DATA)
        op.src[0] = &y, op.src[1] = &w, op.dst[0] = &x, op.accumulate = 1;
    else
        op.src[0] = &x, op.src[1] = &y, op.dst[0] = &w;
    op.p.conv.kh = op.p.conv.kw = r, op.p.conv.stride_h = op.p.conv.stride_w = stride;
    op.p.conv.pad_h = op.p.conv.pad_w = pad, op.p.conv.groups = 1;
    if (half && kind == YC_OP_CONV2D_BWD_DATA)
        op.accumulate = 0;
    size_t need = be->iface->workspace(be, &op);
    yc_buffer *ws = need ? yc_buffer_alloc(be, need) : NULL;
    ck_assert_msg(yc_backend_exec(be, &op, (yc_span){ws, 0, need}) == YC_OK, "%s", yc_last_error());
    *n = yc_tensor_elems(op.dst[0]);
    ck_assert_int_eq(yc_tensor_get_f32(be, op.dst[0], out), YC_OK);
    yc_buffer_free(be, ws);
    for (int i = 0; i < 4; i++)
        yc_buffer_free(be, ts[i]->buf);
}

/* Every tile of the implicit GEMMs computes the three passes as the CPU backend does: 3x3 with
 * stride 2 and padding, 1x1, 6x6 with stride 2 (YOLOv5's first layer), and FP16 input storage. */
START_TEST(igemm_tiles)
{
    yc_backend *cpu = NULL, *cl = NULL;
    ck_assert_int_eq(yc_backend_cpu_new(&cpu, 0), YC_OK);
    ck_assert_int_eq(yc_backend_opencl_new(&cl, 0), YC_OK);
    static const struct {
        int r, stride, pad;
        bool half;
    } shapes[] = {{3, 2, 1, false}, {1, 1, 0, false}, {6, 2, 2, false}, {3, 1, 1, true}};
    const yc_op_kind kinds[3] = {YC_OP_CONV2D, YC_OP_CONV2D_BWD_DATA, YC_OP_CONV2D_BWD_FILTER};
    float *ref = malloc(2 * 7 * 13 * 11 * 4), *got = malloc(2 * 7 * 13 * 11 * 4);
    for (int t = 0; t < yc_cl_tile_count(); t++) {
        yc_cl_force_tile(cl, t);
        double worst = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int k = 0; k < 3; k++) {
                if (shapes[s].half && k == 1)
                    continue; /* an FP16 x is an activation; its gradient is never FP16 here */
                size_t n, n2;
                small_conv(cpu, kinds[k], shapes[s].r, shapes[s].stride, shapes[s].pad,
                           false, ref, &n);
                small_conv(cl, kinds[k], shapes[s].r, shapes[s].stride, shapes[s].pad,
                           shapes[s].half, got, &n2);
                ck_assert_uint_eq(n, n2);
                double e = yc_test_rel_error(got, ref, n);
                ck_assert_msg(e < (shapes[s].half ? 2e-3 : 2e-6),
                              "tile %d, %s %dx%d stride %d%s: error %.3g", t,
                              yc_op_kind_name(kinds[k]), shapes[s].r, shapes[s].r, shapes[s].stride,
                              shapes[s].half ? " fp16 x" : "", e);
                if (!shapes[s].half)
                    worst = fmax(worst, e);
            }
        int tm, tn, tk;
        yc_cl_tile_size(t, &tm, &tn, &tk);
        printf("  tile %dx%d k%d: worst FP32 error %.2e\n", tm, tn, tk, worst);
    }
    free(ref);
    free(got);
    yc_backend_free(cpu);
    yc_backend_free(cl);
}
END_TEST

/* The limits under which a device's convolutions go to CLBlast: work-groups of 256 and the
 * default tile's 8 KiB of local memory (64x64, 16 steps). */
START_TEST(igemm_limits)
{
    ck_assert(yc_cl_igemm_admits(256, 8192));
    ck_assert(yc_cl_igemm_admits(1024, 48 * 1024));
    ck_assert(!yc_cl_igemm_admits(128, 64 * 1024));
    ck_assert(!yc_cl_igemm_admits(1024, 4096));
}
END_TEST

/* yolocl tune on two convolutions: the fastest tile of each kept in the device's tiles file, which
 * the next backend on the device reads and uses. */
START_TEST(tune_round_trip)
{
    const char *dir = yc_harness_tmpdir_make("tune");
    ck_assert_ptr_nonnull(dir);
    ck_assert_int_eq(setenv("XDG_CACHE_HOME", dir, 1), 0);
    ck_assert_int_eq(unsetenv("YOLOCL_CL_CACHE"), 0);
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_opencl_new(&be, 0), YC_OK);
    yc_tensor x = yc_tensor_make(2, 8, 16, 16, YC_F32, "x"), w = yc_tensor_make(16, 8, 3, 3, YC_F32, "w");
    yc_tensor y = yc_tensor_make(2, 16, 16, 16, YC_F32, "y");
    yc_tensor *ts[3] = {&x, &w, &y};
    for (int i = 0; i < 3; i++) {
        ts[i]->buf = yc_buffer_alloc(be, yc_tensor_elems(ts[i]) * 4);
        ck_assert_ptr_nonnull(ts[i]->buf);
        ck_assert_int_eq(be->iface->buffer_memset(be, ts[i]->buf, 0, 0, yc_tensor_elems(ts[i]) * 4), YC_OK);
    }
    yc_op fwd = {.kind = YC_OP_CONV2D, .src = {&x, &w}, .dst = {&y}, .name = "fwd"};
    fwd.p.conv.kh = fwd.p.conv.kw = 3, fwd.p.conv.stride_h = fwd.p.conv.stride_w = 1;
    fwd.p.conv.pad_h = fwd.p.conv.pad_w = 1, fwd.p.conv.groups = 1;
    yc_op bf = {.kind = YC_OP_CONV2D_BWD_FILTER, .src = {&x, &y}, .dst = {&w}, .name = "bf"};
    bf.p.conv = fwd.p.conv;
    const yc_op *ops[3] = {&fwd, &bf, &fwd};
    char *path = yc_cl_tune_path(be);
    ck_assert_ptr_nonnull(path);
    ck_assert_ptr_nonnull(strstr(path, dir));
    int tuned = 0;
    ck_assert_msg(yc_cl_tune(be, ops, 3, 1, path, &tuned) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(tuned, 2); /* the repeated forward once */
    int tf = yc_cl_conv_tile_of(be, &fwd), tb = yc_cl_conv_tile_of(be, &bf);
    ck_assert(tf >= 0 && tf < yc_cl_tile_count() && tb >= 0 && tb < yc_cl_tile_count());
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(yc_read_file(path, &text, &len), YC_OK);
    ck_assert_msg(strncmp(text, "yolocl convolution tiles 1\n", 27) == 0, "%s", text);
    free(text);
    yc_backend *again = NULL;
    ck_assert_int_eq(yc_backend_opencl_new(&again, 0), YC_OK);
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &fwd), tf);
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &bf), tb);
    /* another filter geometry is not in the file: the default tile */
    yc_op other = fwd;
    other.p.conv.pad_h = other.p.conv.pad_w = 0;
    yc_tensor y2 = yc_tensor_make(2, 16, 14, 14, YC_F32, "y2");
    other.dst[0] = &y2;
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &other), 0);
    yc_backend_free(again);

    /* a file naming tile 2 for the forward at batch 2 and 16x16: the same forward at batch 4 or
     * at 32x32 takes it (the nearest size), the other padding does not */
    int tm, tn, tk;
    yc_cl_tile_size(2, &tm, &tn, &tk);
    char line[512];
    snprintf(line, sizeof line, "yolocl convolution tiles 1\n0 2 8 16 16 16 3 3 1 1 1 1 0 0 %d %d %d 1.5\n", tm, tn, tk);
    ck_assert_int_eq(yc_write_file_atomic(path, line, strlen(line)), YC_OK);
    ck_assert_int_eq(yc_backend_opencl_new(&again, 0), YC_OK);
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &fwd), 2);
    yc_tensor x4 = yc_tensor_make(4, 8, 32, 32, YC_F32, "x4"), y4 = yc_tensor_make(4, 16, 32, 32, YC_F32, "y4");
    yc_op big = fwd;
    big.src[0] = &x4;
    big.dst[0] = &y4;
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &big), 2);
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &other), 0);
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &bf), 0);
    /* tuning the backward-filter on that backend keeps the forward's line in the file */
    yc_buffer *bufs[3];
    for (int i = 0; i < 3; i++) {
        bufs[i] = ts[i]->buf;
        ts[i]->buf = yc_buffer_alloc(again, yc_tensor_elems(ts[i]) * 4);
        ck_assert_ptr_nonnull(ts[i]->buf);
        ck_assert_int_eq(again->iface->buffer_memset(again, ts[i]->buf, 0, 0, yc_tensor_elems(ts[i]) * 4), YC_OK);
    }
    const yc_op *only_bf[1] = {&bf};
    ck_assert_msg(yc_cl_tune(again, only_bf, 1, 1, path, &tuned) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(tuned, 1);
    const int tb2 = yc_cl_conv_tile_of(again, &bf);
    for (int i = 0; i < 3; i++) {
        yc_buffer_free(again, ts[i]->buf);
        ts[i]->buf = bufs[i];
    }
    yc_backend_free(again);
    ck_assert_int_eq(yc_read_file(path, &text, &len), YC_OK);
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    ck_assert_msg(lines == 3, "%s", text);
    free(text);
    ck_assert_int_eq(yc_backend_opencl_new(&again, 0), YC_OK);
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &fwd), 2);
    ck_assert_int_eq(yc_cl_conv_tile_of(again, &bf), tb2);
    yc_backend_free(again);
    for (int i = 0; i < 3; i++)
        yc_buffer_free(be, ts[i]->buf);
    yc_backend_free(be);
    free(path);
    yc_harness_tmpdir_remove();
}
END_TEST

/* The training step as yolocl bench times it (step, optimizer, EMA, and its two waits) on the
 * tiny model: the same kernel launches for batches 2 and 4 (nothing runs once per image), at most
 * the two waits of the benchmark itself, and between host and device the uint8 batch and at most
 * 1 MiB more (the assignments, the loss sums, the gradient norm). */
START_TEST(step_counts)
{
    yc_tiny_files tiny;
    yc_tiny_files_get(&tiny);
    const char *cfg = tiny.cfg;
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_opencl_new(&be, 0), YC_OK);
    double launches[2];
    for (int k = 0; k < 2; k++) {
        yc_bench_config c = {.cfg_path = cfg, .batch = 2 + 2 * k, .img = 64, .warmup = 1,
                             .iters = 2};
        yc_bench_result r;
        ck_assert_msg(yc_bench_run(&c, be, &r) == YC_OK, "%s", yc_last_error());
        double u8 = (double)c.batch * 3 * 64 * 64;
        printf("  batch %d: %.0f launches, %.1f host waits, %.0f bytes (uint8 batch %.0f) per "
               "training step\n", c.batch, r.launches_per_step, r.host_waits_per_step,
               r.transfer_bytes_per_step, u8);
        fflush(stdout);
        launches[k] = r.launches_per_step;
        ck_assert_msg(r.host_waits_per_step <= 2.0, "%.1f host waits per step",
                      r.host_waits_per_step);
        ck_assert_msg(r.transfer_bytes_per_step >= u8 &&
                          r.transfer_bytes_per_step <= u8 + (1 << 20),
                      "%.0f bytes per step for a uint8 batch of %.0f", r.transfer_bytes_per_step, u8);
        ck_assert(isfinite(r.loss));
    }
    ck_assert_msg(launches[0] == launches[1], "%.0f launches at batch 2, %.0f at batch 4",
                  launches[0], launches[1]);
    ck_assert(launches[0] <= 600);
    yc_backend_free(be);
}
END_TEST

static int cmp_float(const void *pa, const void *pb)
{
    float a = *(const float *)pa, b = *(const float *)pb;
    return (a > b) - (a < b);
}

/* The tiny model's eval heads on `be` for the tiny batch (graph in *g, model in *m; free both). */
static void tiny_eval(yc_backend *be, yc_model **m, yc_graph **g, float **images, float **targets,
                      int *nt)
{
    yc_tiny_files tiny;
    yc_tiny_files_get(&tiny);
    yc_model_cfg *cfg = NULL;
    ck_assert_msg(yc_model_cfg_load(&cfg, tiny.cfg, 0) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_new(m, cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_alloc(*m, be) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_load(*m, tiny.weights) == YC_OK, "%s", yc_last_error());
    yc_st_file *f = NULL;
    ck_assert_msg(yc_st_open(&f, tiny.batch) == YC_OK, "%s", yc_last_error());
    const yc_st_tensor *im = yc_st_find(f, "images");
    ck_assert_ptr_nonnull(im);
    int b = (int)im->shape[0], h = (int)im->shape[2], w = (int)im->shape[3];
    size_t nt6 = 0;
    *images = yc_golden_read(f, "images", NULL);
    *targets = yc_golden_read(f, "targets", &nt6);
    *nt = (int)(nt6 / 6);
    yc_st_close(f);
    ck_assert_msg(yc_graph_new(g, *m, b, h, w, YC_GRAPH_EVAL) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_graph_alloc(*g) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_tensor_set_f32(be, yc_graph_input(*g), *images), YC_OK);
    ck_assert_msg(yc_graph_forward(*g) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
}

/* Validation's work on the device (detect_filter, and yolo_loss without a gradient) against the
 * host's on the same heads: the rows kept are those whose objectness the host finds above the
 * threshold (but within 1e-6 of it, where the device's exp may round the sigmoid the other way),
 * each once and within 1e-5 of the host's decoded values (the sigmoid's exp is the device's);
 * too little room is reported as such; the loss without a gradient is the loss with one, and the
 * host's yc_loss_compute to 1e-5. */
START_TEST(val_on_device)
{
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_opencl_new(&be, 0), YC_OK);
    ck_assert_ptr_nonnull(be->iface->detect_filter);
    yc_model *m = NULL;
    yc_graph *g = NULL;
    float *images = NULL, *targets = NULL;
    int nt = 0;
    tiny_eval(be, &m, &g, &images, &targets, &nt);
    const int b = yc_graph_input(g)->n, no = m->no;

    /* the host decode of the heads read back */
    yc_detect_level lv[YC_MAX_LEVELS];
    yc_loss_head lh[YC_MAX_LEVELS];
    float *heads[YC_MAX_LEVELS];
    yc_detect_filter f = {.batch = b, .nl = m->nl, .na = m->na, .no = no, .anchors = m->anchors};
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(g, l);
        heads[l] = malloc(yc_tensor_elems(t) * sizeof(float));
        ck_assert_ptr_nonnull(heads[l]);
        ck_assert_int_eq(yc_tensor_get_f32(be, t, heads[l]), YC_OK);
        lv[l] = (yc_detect_level){.p = heads[l], .ny = t->h, .nx = t->w,
                                  .img_stride = yc_tensor_image_elems(t), .stride = m->stride[l]};
        lh[l] = (yc_loss_head){.p = heads[l], .ny = t->h, .nx = t->w,
                               .img_stride = yc_tensor_image_elems(t)};
        f.head[l] = t;
        f.stride[l] = m->stride[l];
    }
    size_t per_image = yc_detect_rows(lv, m->nl, m->na), total = per_image * (size_t)b;
    float *host = malloc(total * (size_t)no * sizeof *host);
    ck_assert_ptr_nonnull(host);
    for (int i = 0; i < b; i++)
        ck_assert_int_eq(yc_detect_decode(lv, m->nl, m->na, no, m->anchors, i,
                                          host + (size_t)i * per_image * no),
                         YC_OK);

    /* thresholds: val.py's, and the median objectness (about half the rows kept) */
    float *obj = malloc(total * sizeof *obj);
    ck_assert_ptr_nonnull(obj);
    for (size_t r = 0; r < total; r++)
        obj[r] = host[r * no + 4];
    qsort(obj, total, sizeof *obj, cmp_float);
    float thresholds[2] = {0.001f, obj[total / 2]};
    f.rows = malloc(total * (size_t)no * sizeof *f.rows);
    f.ids = malloc(total * sizeof *f.ids);
    char *seen = malloc(total);
    ck_assert(f.rows && f.ids && seen);
    for (int k = 0; k < 2; k++) {
        f.conf_thres = thresholds[k];
        f.cap = total;
        size_t n = 0;
        ck_assert_msg(be->iface->detect_filter(be, &f, &n) == YC_OK, "%s", yc_last_error());
        memset(seen, 0, total);
        double worst = 0;
        for (size_t j = 0; j < n; j++) {
            ck_assert_uint_lt(f.ids[j], total);
            ck_assert_msg(!seen[f.ids[j]], "row %u kept twice", f.ids[j]);
            seen[f.ids[j]] = 1;
            const float *h = host + (size_t)f.ids[j] * no, *d = f.rows + j * (size_t)no;
            ck_assert_msg(h[4] > f.conf_thres - 1e-6f, "row %u kept with objectness %.9g <= %.9g",
                          f.ids[j], (double)h[4], (double)f.conf_thres);
            for (int c = 0; c < no; c++) {
                double e = fabs((double)d[c] - h[c]) / fmax(fabs((double)h[c]), 1e-3);
                worst = fmax(worst, e);
                ck_assert_msg(e < 1e-5, "row %u value %d: device %.9g, host %.9g", f.ids[j], c,
                              (double)d[c], (double)h[c]);
            }
        }
        size_t expected = 0;
        for (size_t r = 0; r < total; r++) {
            expected += host[r * no + 4] > f.conf_thres;
            ck_assert_msg(seen[r] || !(host[r * no + 4] > f.conf_thres + 1e-6f),
                          "row %zu (objectness %.9g) not kept at %.9g", r,
                          (double)host[r * no + 4], (double)f.conf_thres);
        }
        printf("  detect filter at %.4g: %zu of %zu rows kept (host %zu), worst relative "
               "difference %.2e\n", (double)f.conf_thres, n, total, expected, worst);
        ck_assert_uint_gt(n, 0);
        if (n >= 2) {
            f.cap = n / 2;
            size_t n2 = 0;
            ck_assert_int_eq(be->iface->detect_filter(be, &f, &n2), YC_OK);
            ck_assert_uint_eq(n2, n);
        }
    }
    fflush(stdout);

    /* the loss without a gradient against the host's */
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_step_loss_params(m, &hyp, yc_graph_input(g)->w, 0.0f, &lp);
    yc_loss_ctx *loss = yc_loss_new(&lp);
    ck_assert_ptr_nonnull(loss);
    yc_loss_result ref, got;
    ck_assert_int_eq(yc_loss_compute(loss, b, lh, targets, nt, &ref), YC_OK);
    const yc_tensor *ht[YC_MAX_LEVELS];
    for (int l = 0; l < m->nl; l++)
        ht[l] = yc_graph_head(g, l);
    yc_device_loss dl;
    ck_assert_msg(yc_device_loss_submit(&dl, loss, be, b, ht, NULL, targets, nt, NULL) == YC_OK,
                  "%s", yc_last_error());
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    yc_device_loss_result(&dl, &lp, &got);
    double parts[3][2] = {{got.box, ref.box}, {got.obj, ref.obj}, {got.cls, ref.cls}};
    for (int k = 0; k < 3; k++) {
        double e = yc_test_rel_diff(parts[k][0], parts[k][1]);
        printf("  validation loss %s on the device %.8g, host %.8g, relative error %.2e\n",
               k == 0 ? "box" : k == 1 ? "obj" : "cls", parts[k][0], parts[k][1], e);
        ck_assert_msg(e < 1e-5, "validation loss part %d: device %.9g, host %.9g", k, parts[k][0],
                      parts[k][1]);
    }
    /* the heads were not written to */
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(g, l);
        float *again = malloc(yc_tensor_elems(t) * sizeof *again);
        ck_assert_ptr_nonnull(again);
        ck_assert_int_eq(yc_tensor_get_f32(be, t, again), YC_OK);
        ck_assert(memcmp(again, heads[l], yc_tensor_elems(t) * sizeof *again) == 0);
        free(again);
        free(heads[l]);
    }
    yc_loss_free(loss);
    free(seen);
    free(f.rows);
    free(f.ids);
    free(obj);
    free(host);
    free(images);
    free(targets);
    yc_graph_free(g);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

/* yc_val_detect_batch (validation's forward, decode and NMS of a batch) on OpenCL against the
 * CPU backend for the tiny model: at val.py's threshold (nearly every row of an untrained model
 * passes it: more than the device keeps room for, so the heads are read back and decoded on the
 * host) and at the score (objectness x class) that a twentieth of the rows exceed (the rows
 * filtered on the device, sorted back into order on the host); the same detections, with boxes within 1e-3 pixels
 * and scores within 1e-5 (the forward passes differ by float round-off). */
START_TEST(val_batch_on_device)
{
    yc_backend *be[2] = {NULL, NULL};
    ck_assert_int_eq(yc_backend_opencl_new(&be[0], 0), YC_OK);
    ck_assert_msg(yc_device_open("cpu", 0, false, &be[1]) == YC_OK, "%s", yc_last_error());
    yc_model *m[2] = {NULL, NULL};
    yc_graph *g = NULL;
    float *images = NULL, *targets = NULL;
    int nt = 0;
    tiny_eval(be[0], &m[0], &g, &images, &targets, &nt);
    yc_graph_free(g);
    free(images);
    free(targets);
    tiny_eval(be[1], &m[1], &g, &images, &targets, &nt);
    const int b = yc_graph_input(g)->n, h = yc_graph_input(g)->h, w = yc_graph_input(g)->w;

    /* objectness of the CPU's rows, for the second threshold */
    yc_detect_level lv[YC_MAX_LEVELS];
    for (int l = 0; l < m[1]->nl; l++) {
        const yc_tensor *t = yc_graph_head(g, l);
        lv[l] = (yc_detect_level){
            .p = (const float *)((const char *)be[1]->iface->buffer_host_ptr(be[1], t->buf) +
                                 t->offset),
            .ny = t->h, .nx = t->w, .img_stride = t->nstride, .stride = m[1]->stride[l]};
    }
    size_t per_image = yc_detect_rows(lv, m[1]->nl, m[1]->na), total = per_image * (size_t)b;
    const int no = m[1]->no;
    float *rows = malloc(total * (size_t)no * sizeof *rows), *obj = malloc(total * sizeof *obj);
    ck_assert(rows && obj);
    for (int i = 0; i < b; i++)
        ck_assert_int_eq(yc_detect_decode(lv, m[1]->nl, m[1]->na, no, m[1]->anchors, i,
                                          rows + (size_t)i * per_image * no),
                         YC_OK);
    /* the best score obj * cls of each row */
    for (size_t r = 0; r < total; r++) {
        float best = 0;
        for (int c = 5; c < no; c++)
            best = fmaxf(best, rows[r * no + 4] * rows[r * no + c]);
        obj[r] = best;
    }
    qsort(obj, total, sizeof *obj, cmp_float);
    yc_graph_free(g);

    uint8_t *u8 = malloc((size_t)b * 3 * h * w);
    ck_assert_ptr_nonnull(u8);
    for (size_t i = 0; i < (size_t)b * 3 * h * w; i++)
        u8[i] = (uint8_t)lrintf(fminf(fmaxf(images[i], 0.0f), 1.0f) * 255.0f);
    yc_nms_params np = yc_nms_params_val();
    /* the untrained model gives whole levels one score: the threshold goes halfway to the next
     * score up, so that a few ulps (the device's exp) cannot move a row across it */
    size_t q = total - total / 20;
    while (q + 1 < total && obj[q + 1] == obj[q])
        q++;
    float thresholds[2] = {np.conf_thres, q + 1 < total ? 0.5f * (obj[q] + obj[q + 1]) : obj[q]};
    float *dets[2];
    int *ndet[2];
    for (int k = 0; k < 2; k++) {
        dets[k] = malloc((size_t)b * np.max_det * 6 * sizeof(float));
        ndet[k] = malloc((size_t)b * sizeof(int));
        ck_assert(dets[k] && ndet[k]);
    }
    for (int t = 0; t < 2; t++) {
        np.conf_thres = thresholds[t];
        size_t above = 0;
        for (size_t r = 0; r < total; r++)
            above += rows[r * no + 4] > np.conf_thres;
        for (int k = 0; k < 2; k++)
            ck_assert_msg(yc_val_detect_batch(m[k], u8, b, h, w, &np, dets[k], ndet[k]) == YC_OK,
                          "%s", yc_last_error());
        /* the first threshold overflows the device's room, the second fits it */
        ck_assert(t == 0 ? above > yc_val_candidate_cap(per_image, b)
                         : above <= yc_val_candidate_cap(per_image, b));
        printf("  validation batch at %.4g (%zu of %zu rows above, room for %zu on the device):",
               (double)np.conf_thres, above, total, yc_val_candidate_cap(per_image, b));
        for (int i = 0; i < b; i++) {
            printf(" image %d: %d and %d detections", i, ndet[0][i], ndet[1][i]);
            ck_assert_int_eq(ndet[0][i], ndet[1][i]);
            for (int j = 0; j < ndet[0][i]; j++) {
                const float *d0 = dets[0] + ((size_t)i * np.max_det + j) * 6,
                            *d1 = dets[1] + ((size_t)i * np.max_det + j) * 6;
                for (int c = 0; c < 4; c++)
                    ck_assert_msg(fabsf(d0[c] - d1[c]) < 1e-3f,
                                  "image %d detection %d: box %g on OpenCL, %g on the CPU", i, j,
                                  (double)d0[c], (double)d1[c]);
                ck_assert_msg(fabsf(d0[4] - d1[4]) < 1e-5f,
                              "image %d detection %d: score %.8g on OpenCL, %.8g on the CPU", i, j,
                              (double)d0[4], (double)d1[4]);
                ck_assert(d0[5] == d1[5]);
            }
        }
        printf("\n");
        fflush(stdout);
        ck_assert_int_gt(ndet[0][0] + ndet[0][1], 0);
    }
    for (int k = 0; k < 2; k++) {
        free(dets[k]);
        free(ndet[k]);
        yc_model_free(m[k]);
        yc_backend_free(be[k]);
    }
    free(u8);
    free(rows);
    free(obj);
    free(images);
    free(targets);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 4. The golden step on the OpenCL backend.
 * ------------------------------------------------------------------------------------------- */

/* The tiny fixture's step on `device` with storage options `go` against PyTorch; returns the
 * gradients.  FP32: heads, loss, gradients, BatchNorm statistics and the optimizer iteration
 * after the step; FP16 storage: heads, loss and every gradient tensor's direction and size. */
static float *tiny_step(const char *device, const yc_graph_options *go, size_t *nparams)
{
    yc_tiny_files tiny;
    yc_tiny_files_get(&tiny);
    yc_golden gd;
    yc_golden_step(&gd, device, tiny.cfg, 0, tiny.weights, tiny.batch, "images", go);
    bool half = go && go->half;
    yc_golden_check_tiny_outputs(&gd, &tiny, half ? YC_GOLDEN_HALF_TOL_OUT : TOL_OUT,
                                 half ? YC_GOLDEN_HALF_TOL_LOSS : TOL_OUT);
    float *g;
    if (half) {
        yc_golden_check_grads_similar(&gd, tiny.grads, YC_GOLDEN_HALF_ANGLE, YC_GOLDEN_HALF_RATIO);
        g = yc_golden_grads(&gd);
    } else {
        g = yc_golden_check_grads(&gd, tiny.grads, TOL_GRAD);
        yc_golden_check_update(&gd, &tiny, YC_GOLDEN_TOL_UPDATE, TOL_OUT);
    }
    *nparams = gd.m->param_elems;
    yc_golden_free(&gd);
    return g;
}

START_TEST(golden_tiny)
{
    size_t n, n2;
    printf("tiny (yolov5n, width 0.0625, nc 3, 64x64, batch 2) on OpenCL:\n");
    float *plain = tiny_step("opencl:0", NULL, &n);
    /* SiLU outputs recomputed in backward (the fused BN+SiLU ops): the same bits */
    printf("the same with recomputed SiLU outputs (fused BN+SiLU):\n");
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .recompute = true};
    float *fused = tiny_step("opencl:0", &go, &n2);
    ck_assert_uint_eq(n, n2);
    ck_assert_msg(memcmp(plain, fused, n * sizeof *plain) == 0,
                  "gradients differ with recomputed SiLU outputs");
    free(plain);
    free(fused);
}
END_TEST

/* FP16 storage of the input and the saved activations, judged against PyTorch's FP32 step on
 * both backends; on OpenCL stored and recomputed SiLU outputs give the same bits, and OpenCL is
 * compared with the CPU backend per gradient tensor. */
START_TEST(golden_tiny_half)
{
    size_t n;
    printf("tiny on OpenCL with FP16 storage:\n");
    yc_graph_options stored = {.mode = YC_GRAPH_TRAIN, .half = true};
    float *cl_stored = tiny_step("opencl:0", &stored, &n);
    printf("the same with recomputed SiLU outputs:\n");
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .half = true, .recompute = true};
    float *cl = tiny_step("opencl:0", &go, &n);
    ck_assert_msg(memcmp(cl, cl_stored, n * sizeof *cl) == 0,
                  "FP16 gradients differ with recomputed SiLU outputs");
    free(cl_stored);
    printf("the same on the CPU backend:\n");
    float *cpu = tiny_step("cpu", &go, &n);
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    yc_tiny_files tiny;
    yc_tiny_files_get(&tiny);
    ck_assert_msg(yc_model_cfg_load(&cfg, tiny.cfg, 0) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_new(&m, cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_uint_eq(m->param_elems, n);
    double worst_angle = 0, worst_ratio = 0;
    for (int i = 0; i < m->nparams; i++) {
        const yc_param *p = &m->params[i];
        yc_test_similarity sim = yc_test_similar(cl + p->offset, cpu + p->offset, p->numel);
        worst_angle = fmax(worst_angle, 1 - sim.cosine);
        worst_ratio = fmax(worst_ratio, fabs(sim.norm_ratio - 1));
        ck_assert_msg(1 - sim.cosine < YC_GOLDEN_HALF_CL_CPU_ANGLE &&
                          fabs(sim.norm_ratio - 1) < YC_GOLDEN_HALF_CL_CPU_RATIO,
                      "FP16 gradient of %s: OpenCL against CPU cosine %.6f, norm ratio %.4f", p->name,
                      sim.cosine, sim.norm_ratio);
    }
    printf("  OpenCL against CPU: worst 1 - cosine %.2e, worst |norm ratio - 1| %.2e\n", worst_angle,
           worst_ratio);
    yc_model_free(m);
    free(cl);
    free(cpu);
}
END_TEST

#endif /* YC_HAVE_OPENCL */
#endif /* !YC_TEST_SHARED */

#if defined(YC_HAVE_OPENCL) && defined(YC_TEST_SHARED)

static const char *const ref_files[] = {"ref/yolov5n_init_state_dict.safetensors",
                                        "ref/train_step_io.safetensors",
                                        "ref/yolov5n_init_grads.safetensors", NULL};

/* ../shared/ref's YOLOv5n at 320 on OpenCL against PyTorch, with the CPU backend's tolerances. */
START_TEST(golden_yolov5n_320)
{
    char weights[1200], io[1200], grads[1200], cfg[1024];
    yc_test_shared_path(ref_files[0], weights, sizeof weights);
    yc_test_shared_path(ref_files[1], io, sizeof io);
    yc_test_shared_path(ref_files[2], grads, sizeof grads);
    ck_assert_int_eq(yc_data_path("models/yolov5n.yaml", cfg, sizeof cfg), YC_OK);
    printf("yolov5n (80 classes, 320x320, batch 2) on OpenCL:\n");
    yc_golden gd;
    yc_golden_step(&gd, "opencl:0", cfg, 0, weights, io, "input", NULL);
    static const char *const heads[] = {"head0_stride8", "head1_stride16", "head2_stride32"};
    yc_golden_check_heads(&gd, io, heads, TOL_OUT);
    yc_st_file *f = NULL;
    ck_assert_msg(yc_st_open(&f, io) == YC_OK, "%s", yc_last_error());
    float *total = yc_golden_read(f, "loss_total", NULL),
          *items = yc_golden_read(f, "loss_items_box_obj_cls", NULL);
    ck_assert(total && items);
    float loss[4] = {total[0], items[0], items[1], items[2]};
    yc_golden_check_loss(&gd, loss, TOL_OUT);
    free(total);
    free(items);
    yc_st_close(f);
    free(yc_golden_check_grads(&gd, grads, TOL_GRAD));
    yc_golden_free(&gd);
}
END_TEST

#endif



int main(void)
{
#ifdef YC_TEST_SHARED
    /* before anything is allocated: a sanitizer build counts what a skip leaves as a leak */
#ifdef YC_HAVE_OPENCL
    char missing[2048];
    if (!yc_test_have_shared(ref_files, missing, sizeof missing))
        return yc_test_skip(YC_TEST_NEEDS_SHARED,
                            "%s not found (the PyTorch reference dumps live in ../shared)",
                            missing);
    if ((cl_devices = yc_harness_opencl_devices()) == 0)
        return yc_test_skip(YC_TEST_NEEDS_OPENCL, "no OpenCL device");
    Suite *s = suite_create("opencl_ref");
    TCase *gold = tcase_create("golden");
    tcase_set_timeout(gold, 600);
    tcase_add_test(gold, golden_yolov5n_320);
    suite_add_tcase(s, gold);
#else
    return yc_test_skip(YC_TEST_NEEDS_OPENCL, "built without OpenCL (./configure --disable-opencl)");
#endif
#else
    cl_devices = yc_harness_opencl_devices();
    Suite *s = suite_create("opencl");
    TCase *sel = tcase_create("device_selection");
    tcase_set_timeout(sel, 120);
    tcase_add_test(sel, pick_device);
    tcase_add_test(sel, open_cpu_and_errors);
    suite_add_tcase(s, sel);
#ifdef YC_HAVE_OPENCL
    if (cl_devices > 0) {
        tcase_add_test(sel, open_opencl);
        TCase *cache = tcase_create("program_cache");
        tcase_set_timeout(cache, 300);
        tcase_add_test(cache, cache_miss_then_hit);
        tcase_add_test(cache, cache_disabled);
        tcase_add_test(cache, cache_corrupt_rebuilt);
        tcase_add_test(cache, kernels_from_directory);
        suite_add_tcase(s, cache);
        TCase *be = tcase_create("backend");
        tcase_set_timeout(be, 300);
        tcase_add_test(be, backend_basics);
        tcase_add_test(be, conv_with_clblast_temp);
        tcase_add_test(be, u8_scaled_paths);
        tcase_add_test(be, conv_igemm_big);
        tcase_add_test(be, step_counts);
        tcase_add_test(be, val_on_device);
        tcase_add_test(be, val_batch_on_device);
        tcase_add_test(be, igemm_tiles);
        tcase_add_test(be, tune_round_trip);
        tcase_add_test(be, igemm_limits);
        suite_add_tcase(s, be);
        TCase *gold = tcase_create("golden");
        tcase_set_timeout(gold, 600);
        tcase_add_test(gold, golden_tiny);
        tcase_add_test(gold, golden_tiny_half);
        suite_add_tcase(s, gold);
    }
#endif
#endif
#if !defined(YC_TEST_SHARED) || defined(YC_HAVE_OPENCL)
    int failed = yc_harness_run(s, false);
    if (failed)
        return EXIT_FAILURE;
    if (cl_devices == 0)
        return yc_test_skip(YC_TEST_NEEDS_OPENCL,
                            "no OpenCL device (only device selection was tested)");
    return EXIT_SUCCESS;
#endif
}
