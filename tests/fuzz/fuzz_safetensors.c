/* Fuzz target: safetensors files (src/core/safetensors.c: the 8-byte header length, the JSON header,
 * dtypes, shapes and offsets; src/core/json.c), as yolocl reads them: every tensor and metadata entry
 * through the low-level API (yc_st_open, yc_st_read_f32, yc_st_read_raw, yc_st_meta_get), then
 * the whole file as weights (yc_weights_read: the yolocl metadata keys nc, names, stride,
 * model_yaml, format; the embedded model config resolved).  The input is the file. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_weights_common.h"
#include "log.h"
#include "safetensors.h"

static void low_level(const char *path)
{
    yc_st_file *f = NULL;
    fuzz_begin();
    int st = yc_st_open(&f, path);
    fuzz_check(st, "yc_st_open");
    if (st)
        return;
    for (int i = 0; i < yc_st_count(f); i++) {
        const yc_st_tensor *t = yc_st_get(f, i);
        if (!t || !t->name || t->end < t->begin ||
            t->end - t->begin != t->numel * yc_st_dtype_size(t->dtype))
            fuzz_fail("safetensors tensor with an inconsistent extent");
        if (yc_st_find(f, t->name) != t)
            fuzz_fail("yc_st_find does not find the tensor by its name");
        float *v = malloc((t->numel ? t->numel : 1) * sizeof *v);
        unsigned char *raw = malloc(t->end - t->begin + 1);
        if (!v || !raw)
            abort();
        fuzz_begin();
        fuzz_check(yc_st_read_f32(f, t, v, t->numel), "yc_st_read_f32");
        fuzz_begin();
        fuzz_check(yc_st_read_raw(f, t, raw), "yc_st_read_raw");
        free(raw);
        free(v);
    }
    for (int i = 0; i < yc_st_meta_count(f); i++) {
        const char *k = NULL, *v = NULL;
        yc_st_meta_get(f, i, &k, &v);
        if (!k || !v || yc_st_meta(f, k) == NULL)
            fuzz_fail("safetensors metadata entry unreadable");
    }
    yc_st_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    const char *path = fuzz_write("w.safetensors", data, size);
    if (!path)
        abort();
    low_level(path);
    fuzz_weights_file(path);
    return 0;
}
