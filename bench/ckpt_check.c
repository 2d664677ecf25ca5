/* ckpt_check: checks yolocl checkpoints completely, for bench/fault_test.sh.
 *
 *   ckpt_check FILE...
 *
 * Each file must open as a safetensors file (yc_st_open checks the header, dtypes, shapes and that
 * every tensor lies inside the file, so a torn file fails), carry yolocl's "format" yolocl-1 and
 * an integer "epoch", have every tensor readable and every float32 value finite, and, when its
 * epoch is >= 0 (a training checkpoint), hold the raw model and the optimizer state that
 * --resume loads.  Prints per file:
 *   FILE: ok: epoch E, next_batch B, T tensors, S bytes, resumable|final
 *   FILE: BAD: what is wrong
 * Exit status: 0 when every file is good, 1 otherwise, 2 on bad usage. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "safetensors.h"

/* Parses a decimal integer metadata value. */
static bool meta_int(const yc_st_file *f, const char *key, long *out)
{
    const char *v = yc_st_meta(f, key);
    if (!v)
        return false;
    char *end;
    long n = strtol(v, &end, 10);
    if (end == v || *end)
        return false;
    *out = n;
    return true;
}

/* Reads every tensor; F32 ones must be finite.  Returns false with a message in why. */
static bool check_tensors(yc_st_file *f, char *why, size_t len, bool *has_model, bool *has_optim)
{
    size_t cap = 0;
    unsigned char *buf = NULL;
    bool ok = true;
    for (int i = 0; ok && i < yc_st_count(f); i++) {
        const yc_st_tensor *t = yc_st_get(f, i);
        size_t n = t->end - t->begin;
        if (n > cap) {
            unsigned char *p = realloc(buf, n);
            if (!p) {
                snprintf(why, len, "out of memory reading %s", t->name);
                ok = false;
                break;
            }
            buf = p;
            cap = n;
        }
        if (yc_st_read_raw(f, t, buf) != YC_OK) {
            snprintf(why, len, "%s", yc_last_error());
            ok = false;
            break;
        }
        if (t->dtype == YC_ST_F32) {
            for (size_t k = 0; k < t->numel; k++) {
                float v;
                memcpy(&v, buf + 4 * k, 4);
                if (!isfinite(v)) {
                    snprintf(why, len, "tensor %s holds %g at element %zu", t->name, v, k);
                    ok = false;
                    break;
                }
            }
        }
        if (strncmp(t->name, "resume.model.", 13) == 0)
            *has_model = true;
        if (strncmp(t->name, "resume.optim.", 13) == 0)
            *has_optim = true;
    }
    free(buf);
    return ok;
}

static bool check_file(const char *path)
{
    yc_st_file *f = NULL;
    if (yc_st_open(&f, path) != YC_OK) {
        printf("%s: BAD: %s\n", path, yc_last_error());
        return false;
    }
    char why[2200] = "";
    long epoch = 0, next_batch = 0;
    bool has_model = false, has_optim = false, ok = true;
    const char *format = yc_st_meta(f, "format");
    if (!format || strcmp(format, "yolocl-1") != 0) {
        snprintf(why, sizeof why, "no metadata format yolocl-1");
        ok = false;
    } else if (!meta_int(f, "epoch", &epoch)) {
        snprintf(why, sizeof why, "no integer metadata epoch");
        ok = false;
    } else {
        if (!meta_int(f, "next_batch", &next_batch))
            next_batch = 0;
        ok = check_tensors(f, why, sizeof why, &has_model, &has_optim);
    }
    if (ok && epoch >= 0 && !(has_model && has_optim)) {
        snprintf(why, sizeof why, "epoch %ld but no %s", epoch,
                 has_model ? "optimizer state (resume.optim.*)" : "raw model (resume.model.*)");
        ok = false;
    }
    struct stat sb;
    long long size = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
    if (ok)
        printf("%s: ok: epoch %ld, next_batch %ld, %d tensors, %lld bytes, %s\n", path, epoch,
               next_batch, yc_st_count(f), size, epoch >= 0 ? "resumable" : "final");
    else
        printf("%s: BAD: %s\n", path, why);
    yc_st_close(f);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "Usage: ckpt_check FILE...\n");
        return 2;
    }
    bool all = true;
    for (int i = 1; i < argc; i++)
        all = check_file(argv[i]) && all;
    return all ? 0 : 1;
}
