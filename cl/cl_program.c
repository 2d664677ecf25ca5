/* Programs and kernels of the OpenCL backend, and their disk cache.
 *
 * Each file of cl/kernels/ but common.cl is one program, with common.cl prepended; a program is
 * built when an op first needs one of its kernels.  Sources come from the copy embedded at build
 * time (cl_kernels.c), or from $YOLOCL_CL_KERNELS/<file>.cl when that variable names a directory.
 *
 * Cache: a built program's binary is kept in <cache dir>/<hash>.bin, hash being a 128-bit hash of
 * the key: the source (its own hash and length), the build options, the device name and version,
 * the driver version and the platform name and version; any change to one of them makes a new
 * key.  The file holds a magic line, the key itself, the binary and a checksum; on load all are
 * checked (a hash collision or a torn, truncated or corrupt file is not used), the binary goes
 * through clCreateProgramWithBinary + clBuildProgram, and whatever fails there is counted as
 * rejected and the program is rebuilt from source and the file rewritten.  Files are written to a
 * temporary name and renamed (yc_atomic_*), so concurrent processes never see a partial file.
 * YOLOCL_CL_CACHE=0 turns the cache off. */
#include "cl_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_kernels.h"
#include "log.h"
#include "util.h"

/* The source file of each program. */
static const char *const prog_files[YC_CL_NPROGS] = {
    [YC_CL_PROG_ELEMENTWISE] = "elementwise.cl",
    [YC_CL_PROG_BATCHNORM] = "batchnorm.cl",
    [YC_CL_PROG_POOL] = "pool.cl",
    [YC_CL_PROG_CONV] = "conv.cl",
    [YC_CL_PROG_OPTIM] = "optim.cl",
    [YC_CL_PROG_LOSS] = "loss.cl",
    [YC_CL_PROG_DETECT] = "detect.cl",
};

/* Each kernel's name in its program. */
static const struct {
    const char *name;
    yc_cl_prog prog;
} kernel_table[YC_K_COUNT] = {
    [YC_K_SILU_FWD] = {"silu_fwd", YC_CL_PROG_ELEMENTWISE},
    [YC_K_SILU_BWD] = {"silu_bwd", YC_CL_PROG_ELEMENTWISE},
    [YC_K_ADD] = {"add", YC_CL_PROG_ELEMENTWISE},
    [YC_K_COPY] = {"copy", YC_CL_PROG_ELEMENTWISE},
    [YC_K_FILL] = {"fill", YC_CL_PROG_ELEMENTWISE},
    [YC_K_DROPOUT] = {"dropout", YC_CL_PROG_ELEMENTWISE},
    [YC_K_U8_SCALED] = {"u8_scaled", YC_CL_PROG_ELEMENTWISE},
    [YC_K_BN_PART] = {"bn_part", YC_CL_PROG_BATCHNORM},
    [YC_K_BN_TRAIN] = {"bn_train", YC_CL_PROG_BATCHNORM},
    [YC_K_BN_SILU_APPLY] = {"bn_silu_apply", YC_CL_PROG_BATCHNORM},
    [YC_K_BN_EVAL] = {"bn_eval", YC_CL_PROG_BATCHNORM},
    [YC_K_BN_BWD_PART] = {"bn_bwd_part", YC_CL_PROG_BATCHNORM},
    [YC_K_BN_BWD] = {"bn_bwd", YC_CL_PROG_BATCHNORM},
    [YC_K_MAXPOOL_FWD] = {"maxpool_fwd", YC_CL_PROG_POOL},
    [YC_K_MAXPOOL_ARGMAX] = {"maxpool_argmax", YC_CL_PROG_POOL},
    [YC_K_MAXPOOL_BWD] = {"maxpool_bwd", YC_CL_PROG_POOL},
    [YC_K_UPSAMPLE_FWD] = {"upsample_fwd", YC_CL_PROG_POOL},
    [YC_K_UPSAMPLE_BWD] = {"upsample_bwd", YC_CL_PROG_POOL},
    [YC_K_AVGPOOL_FWD] = {"avgpool_fwd", YC_CL_PROG_POOL},
    [YC_K_AVGPOOL_BWD] = {"avgpool_bwd", YC_CL_PROG_POOL},
    [YC_K_IM2COL] = {"im2col", YC_CL_PROG_CONV},
    [YC_K_COL2IM] = {"col2im", YC_CL_PROG_CONV},
    [YC_K_BIAS_STORE] = {"bias_store", YC_CL_PROG_CONV},
    [YC_K_BIAS_GRAD] = {"bias_grad", YC_CL_PROG_CONV},
    [YC_K_SGD] = {"sgd", YC_CL_PROG_OPTIM},
    [YC_K_ADAM] = {"adam", YC_CL_PROG_OPTIM},
    [YC_K_EMA] = {"ema", YC_CL_PROG_OPTIM},
    [YC_K_SUMSQ_PART] = {"sumsq_part", YC_CL_PROG_OPTIM},
    [YC_K_SUMSQ_TOTAL] = {"sumsq_total", YC_CL_PROG_OPTIM},
    [YC_K_LOSS_CELLS] = {"loss_cells", YC_CL_PROG_LOSS},
    [YC_K_LOSS_OBJ] = {"loss_obj", YC_CL_PROG_LOSS},
    [YC_K_LOSS_SUMS] = {"loss_sums", YC_CL_PROG_LOSS},
    [YC_K_DETECT_FILTER] = {"detect_filter", YC_CL_PROG_DETECT},
};

#define CACHE_MAGIC "yolocl OpenCL program cache 1\n"

int yc_cl_fail(const char *call, cl_int err)
{
    return yc_error_status(YC_EDEVICE, "opencl: %s: %s (%d)", call, yc_cl_error_name(err), (int)err);
}

void yc_cl_build_options(cl_device_id dev, char *buf, size_t len)
{
    cl_device_fp_config fp = 0;
    bool exact = clGetDeviceInfo(dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS &&
                 (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT);
    snprintf(buf, len, "-cl-std=CL1.2%s", exact ? " -cl-fp32-correctly-rounded-divide-sqrt" : "");
}

/* ---- hashing -------------------------------------------------------------------------------- */

/* FNV-1a, 64 bits, continuing from `h`. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* 128 bits as 32 hex digits: FNV-1a from two offset bases. */
static void hash128(const void *data, size_t len, char out[33])
{
    uint64_t a = fnv1a(0xcbf29ce484222325ull, data, len);
    uint64_t b = fnv1a(0x84222325cbf29ce4ull ^ (uint64_t)len, data, len);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

/* ---- sources -------------------------------------------------------------------------------- */

/* The embedded file `name` (NULL if absent). */
static const yc_cl_source *embedded(const char *name)
{
    for (int i = 0; i < yc_cl_nsources; i++)
        if (strcmp(yc_cl_sources[i].name, name) == 0)
            return &yc_cl_sources[i];
    return NULL;
}

/* Appends file `name` to *text (heap, *len bytes so far): from $YOLOCL_CL_KERNELS when set, else
 * the embedded copy. */
static int append_source(const char *name, char **text, size_t *len)
{
    const char *dir = getenv("YOLOCL_CL_KERNELS");
    char *data = NULL;
    size_t size = 0;
    const char *src;
    if (dir && dir[0]) {
        char *path = yc_path_join(dir, name);
        if (!path)
            return YC_ENOMEM;
        int st = yc_read_file(path, &data, &size);
        free(path);
        if (st)
            return yc_error_context(st, "YOLOCL_CL_KERNELS=%s", dir);
        src = data;
    } else {
        const yc_cl_source *s = embedded(name);
        if (!s)
            return yc_error_status(YC_ERR, "internal: kernel source %s is not embedded", name);
        src = s->text;
        size = s->len;
    }
    char *grown = yc_realloc(*text, *len + size + 2, "OpenCL program source");
    if (!grown) {
        free(data);
        return YC_ENOMEM;
    }
    memcpy(grown + *len, src, size);
    *len += size;
    grown[(*len)++] = '\n';
    grown[*len] = '\0';
    *text = grown;
    free(data);
    return YC_OK;
}

/* common.cl followed by the program's file. */
static int program_source(const char *file, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    int st = append_source("common.cl", text, len);
    if (!st)
        st = append_source(file, text, len);
    if (st) {
        free(*text);
        *text = NULL;
    }
    return st;
}

int yc_cl_source_hash(const char *file, char out[33])
{
    char *src = NULL;
    size_t len = 0;
    int st = program_source(file, &src, &len);
    if (!st)
        hash128(src, len, out);
    free(src);
    return st;
}

void yc_cl_hash_text(const char *text, char out[33])
{
    hash128(text, strlen(text), out);
}

/* ---- the cache ------------------------------------------------------------------------------ */

char *yc_cl_cache_dir(void)
{
    const char *off = getenv("YOLOCL_CL_CACHE");
    if (off && strcmp(off, "0") == 0)
        return NULL;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char *base = NULL;
    if (xdg && xdg[0] == '/')
        base = yc_strdup(xdg, "cache directory");
    else if (home && home[0])
        base = yc_path_join(home, ".cache");
    if (!base)
        return NULL;
    char *dir = yc_path_join(base, "yolocl/cl");
    free(base);
    return dir;
}

/* The cache key of a program built with `options` (heap text). */
static char *cache_key(const yc_cl_ctx *c, const char *src, size_t len, const char *options)
{
    char h[33];
    hash128(src, len, h);
    const yc_cl_device_desc *d = &c->desc;
    size_t cap = 2048;
    char *key = yc_malloc(cap, "OpenCL cache key");
    if (key)
        snprintf(key, cap,
                 "source %s %zu\noptions %s\ndevice %s\ndevice version %s\ndriver %s\nplatform %s\n"
                 "platform version %s\n",
                 h, len, options, d->info.name, d->device_version, d->driver_version, d->info.platform,
                 d->info.version);
    return key;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The binary stored under `key` in file `path`: *bin (heap) and *size, or NULL when the file is
 * absent (*bad false) or unusable (*bad true). */
static void cache_read(const char *path, const char *key, unsigned char **bin, size_t *size, bool *bad)
{
    *bin = NULL;
    *size = 0;
    *bad = false;
    if (!yc_file_exists(path))
        return;
    char *data = NULL;
    size_t n = 0;
    if (yc_read_file(path, &data, &n)) {
        yc_error_clear();
        *bad = true;
        return;
    }
    const unsigned char *p = (const unsigned char *)data, *end = p + n;
    size_t ml = strlen(CACHE_MAGIC), kl = strlen(key);
    *bad = true;
    if ((size_t)(end - p) < ml + 8 || memcmp(p, CACHE_MAGIC, ml) != 0)
        goto out;
    p += ml;
    uint64_t klen = get_u64(p);
    p += 8;
    if (klen != kl || (size_t)(end - p) < kl + 8 || memcmp(p, key, kl) != 0)
        goto out;
    p += kl;
    uint64_t blen = get_u64(p);
    p += 8;
    if (blen == 0 || blen > (uint64_t)(end - p) || (size_t)(end - p) - blen != 8)
        goto out;
    uint64_t sum = fnv1a(0xcbf29ce484222325ull, data, (size_t)(p + blen - (const unsigned char *)data));
    if (sum != get_u64(p + blen))
        goto out;
    *bin = yc_malloc((size_t)blen, "OpenCL program binary");
    if (*bin) {
        memcpy(*bin, p, (size_t)blen);
        *size = (size_t)blen;
        *bad = false;
    }
out:
    free(data);
}

/* Writes the binary of `prog` under `key` to `path` (atomically).  Failures only cost a rebuild
 * next time: they are reported at verbosity 2. */
static bool cache_write(cl_program prog, const char *dir, const char *path, const char *key)
{
    size_t bsize = 0;
    cl_int err = clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bsize, &bsize, NULL);
    if (err != CL_SUCCESS || bsize == 0) {
        yc_debug("opencl: no program binary to cache (%s)\n", yc_cl_error_name(err));
        return false;
    }
    size_t ml = strlen(CACHE_MAGIC), kl = strlen(key), total = ml + 8 + kl + 8 + bsize + 8;
    unsigned char *buf = yc_malloc(total, "OpenCL program cache file");
    if (!buf)
        return false;
    unsigned char *bin = buf + ml + 8 + kl + 8;
    err = clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
    if (err != CL_SUCCESS) {
        yc_debug("opencl: clGetProgramInfo(CL_PROGRAM_BINARIES): %s\n", yc_cl_error_name(err));
        free(buf);
        return false;
    }
    memcpy(buf, CACHE_MAGIC, ml);
    put_u64(buf + ml, kl);
    memcpy(buf + ml + 8, key, kl);
    put_u64(buf + ml + 8 + kl, bsize);
    put_u64(buf + total - 8, fnv1a(0xcbf29ce484222325ull, buf, total - 8));
    int st = yc_mkdirs(dir);
    if (!st)
        st = yc_write_file_atomic(path, buf, total);
    free(buf);
    if (st) {
        yc_debug("opencl: program cache not written: %s\n", yc_last_error());
        yc_error_clear();
        return false;
    }
    return true;
}

/* ---- building ------------------------------------------------------------------------------- */

/* Records the build failure of program `file` with the start of its build log (the first errors;
 * messages hold 2 KiB). */
static int build_failed(yc_cl_ctx *c, cl_program prog, const char *file, cl_int err)
{
    size_t n = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(prog, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS && n > 1 &&
        (log = malloc(n + 1)) != NULL &&
        clGetProgramBuildInfo(prog, c->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS)
        log[n] = '\0';
    else if (log)
        log[0] = '\0';
    const char *text = log ? log : "";
    int st = yc_error_status(YC_EDEVICE, "opencl: building %s for %s: %s (%d)%s%.1200s", file,
                             c->desc.info.name, yc_cl_error_name(err), (int)err, text[0] ? "\n" : "", text);
    free(log);
    return st;
}

/* A program from a cached binary, or NULL when the driver refuses it. */
static cl_program from_binary(yc_cl_ctx *c, const unsigned char *bin, size_t size, const char *options)
{
    cl_int err, status = CL_SUCCESS;
    cl_program prog = clCreateProgramWithBinary(c->context, 1, &c->device, &size, &bin, &status, &err);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
        yc_debug("opencl: cached binary refused: %s\n", yc_cl_error_name(err != CL_SUCCESS ? err : status));
        if (prog)
            clReleaseProgram(prog);
        return NULL;
    }
    err = clBuildProgram(prog, 1, &c->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        yc_debug("opencl: cached binary did not build: %s\n", yc_cl_error_name(err));
        clReleaseProgram(prog);
        return NULL;
    }
    return prog;
}

/* Builds (or loads from the cache) the program of `file` with the device's options followed by
 * `extra` (defines; "" for none). */
static int program_build(yc_cl_ctx *c, const char *file, const char *extra, cl_program *out)
{
    *out = NULL;
    char options[512];
    snprintf(options, sizeof options, "%s%s%s", c->options, extra[0] ? " " : "", extra);
    char *src = NULL, *key = NULL, *dir = NULL, *path = NULL;
    size_t len = 0;
    int st = program_source(file, &src, &len);
    if (st)
        return yc_error_context(st, "opencl: source of %s", file);
    key = cache_key(c, src, len, options);
    if (!key) {
        free(src);
        return YC_ENOMEM;
    }
    dir = yc_cl_cache_dir();
    if (dir) {
        char h[33], name[40];
        hash128(key, strlen(key), h);
        snprintf(name, sizeof name, "%s.bin", h);
        path = yc_path_join(dir, name);
    }
    cl_program prog = NULL;
    if (path) {
        unsigned char *bin;
        size_t bsize;
        bool bad;
        cache_read(path, key, &bin, &bsize, &bad);
        if (bin) {
            prog = from_binary(c, bin, bsize, options);
            bad = prog == NULL;
            free(bin);
        }
        if (prog)
            c->stats.loaded++;
        if (bad) {
            c->stats.rejected++;
            yc_debug("opencl: program cache file %s is unusable: rebuilding %s\n", path, file);
        }
    }
    if (!prog) {
        cl_int err;
        const char *text = src;
        prog = clCreateProgramWithSource(c->context, 1, &text, &len, &err);
        if (err != CL_SUCCESS) {
            st = yc_cl_fail("clCreateProgramWithSource", err);
        } else {
            double t0 = yc_now();
            err = clBuildProgram(prog, 1, &c->device, options, NULL, NULL);
            if (err != CL_SUCCESS) {
                st = build_failed(c, prog, file, err);
                clReleaseProgram(prog);
                prog = NULL;
            } else {
                c->stats.built++;
                yc_debug("opencl: built %s%s%s in %.2f s\n", file, extra[0] ? " " : "", extra,
                         yc_now() - t0);
                if (path && cache_write(prog, dir, path, key))
                    c->stats.stored++;
            }
        }
    }
    *out = prog;
    free(src);
    free(key);
    free(dir);
    free(path);
    return st;
}

/* Builds (or loads) program p. */
static int program_get(yc_cl_ctx *c, yc_cl_prog p)
{
    if (c->progs[p])
        return YC_OK;
    return program_build(c, prog_files[p], "", &c->progs[p]);
}

const char *yc_cl_kernel_name(yc_cl_kid k)
{
    return (int)k >= 0 && k < YC_K_COUNT ? kernel_table[k].name : "unknown kernel";
}

/* A kernel's launch size: the largest power of two within its work-group limit and ours. */
static int kernel_local(yc_cl_ctx *c, cl_kernel kern, size_t *local)
{
    size_t wg = 0;
    cl_int err = clGetKernelWorkGroupInfo(kern, c->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    if (err != CL_SUCCESS)
        return yc_cl_fail("clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)", err);
    size_t l = 1;
    while (l * 2 <= wg && l * 2 <= YC_CL_MAX_LOCAL)
        l *= 2;
    *local = l;
    return YC_OK;
}

int yc_cl_kernel(yc_cl_ctx *c, yc_cl_kid k, cl_kernel *out, size_t *local)
{
    if (!c->kernels[k]) {
        yc_cl_prog p = kernel_table[k].prog;
        int st = program_get(c, p);
        if (st)
            return st;
        cl_int err;
        cl_kernel kern = clCreateKernel(c->progs[p], kernel_table[k].name, &err);
        if (err != CL_SUCCESS)
            return yc_error_context(yc_cl_fail("clCreateKernel", err), "kernel %s of %s", kernel_table[k].name,
                                    prog_files[p]);
        if ((st = kernel_local(c, kern, &c->local[k]))) {
            clReleaseKernel(kern);
            return st;
        }
        c->kernels[k] = kern;
    }
    *out = c->kernels[k];
    *local = c->local[k];
    return YC_OK;
}

const yc_cl_tile yc_cl_tiles[YC_CL_NTILES] = {
    {64, 64, 16}, {32, 64, 16}, {64, 32, 16}, {128, 64, 8}, {64, 128, 8}, {32, 32, 16},
    {128, 128, 8},
};

const char *yc_cl_igemm_kernel_name(yc_cl_igemm_kid which)
{
    static const char *const names[YC_IG_NKERNELS] = {"conv_fwd_igemm", "conv_bwd_data_igemm",
                                                      "conv_bwd_filter_igemm",
                                                      "conv_bwd_filter_reduce"};
    return (int)which >= 0 && which < YC_IG_NKERNELS ? names[which] : "unknown kernel";
}

int yc_cl_igemm_kernel(yc_cl_ctx *c, int tile, yc_cl_igemm_kid which, cl_kernel *out, size_t *local)
{
    const char *name = yc_cl_igemm_kernel_name(which);
    if (tile < 0 || tile >= YC_CL_NTILES)
        return yc_error_status(YC_ERR, "internal: igemm tile %d", tile);
    if (!c->igemm_kernels[tile][which]) {
        if (!c->igemm_progs[tile]) {
            char defs[64];
            const yc_cl_tile *t = &yc_cl_tiles[tile];
            snprintf(defs, sizeof defs, "-DTM=%d -DTN=%d -DTK=%d", t->tm, t->tn, t->tk);
            int st = program_build(c, "igemm.cl", defs, &c->igemm_progs[tile]);
            if (st)
                return st;
        }
        cl_int err;
        cl_kernel kern = clCreateKernel(c->igemm_progs[tile], name, &err);
        if (err != CL_SUCCESS)
            return yc_error_context(yc_cl_fail("clCreateKernel", err), "kernel %s of igemm.cl",
                                    name);
        int st = kernel_local(c, kern, &c->igemm_local[tile][which]);
        if (st) {
            clReleaseKernel(kern);
            return st;
        }
        c->igemm_kernels[tile][which] = kern;
    }
    *out = c->igemm_kernels[tile][which];
    *local = c->igemm_local[tile][which];
    return YC_OK;
}

void yc_cl_programs_release(yc_cl_ctx *c)
{
    for (int t = 0; t < YC_CL_NTILES; t++) {
        for (int k = 0; k < YC_IG_NKERNELS; k++)
            if (c->igemm_kernels[t][k]) {
                clReleaseKernel(c->igemm_kernels[t][k]);
                c->igemm_kernels[t][k] = NULL;
            }
        if (c->igemm_progs[t]) {
            clReleaseProgram(c->igemm_progs[t]);
            c->igemm_progs[t] = NULL;
        }
    }
    for (int k = 0; k < YC_K_COUNT; k++)
        if (c->kernels[k]) {
            clReleaseKernel(c->kernels[k]);
            c->kernels[k] = NULL;
        }
    for (int p = 0; p < YC_CL_NPROGS; p++)
        if (c->progs[p]) {
            clReleaseProgram(c->progs[p]);
            c->progs[p] = NULL;
        }
}
