/* See fuzz_weights_common.h. */
#include "fuzz_weights_common.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "fuzz.h"
#include "log.h"
#include "modelcfg.h"
#include "weights.h"

void fuzz_weights_file(const char *path)
{
    yc_weights *w = NULL;
    fuzz_begin();
    int st = yc_weights_read(path, &w);
    fuzz_check(st, "yc_weights_read");
    if (st) {
        if (w)
            fuzz_fail("yc_weights_read failed but returned weights");
        return;
    }
    for (int i = 0; i < w->ntensors; i++) {
        const yc_weights_tensor *t = &w->tensors[i];
        size_t numel = 1;
        if (!t->name || t->ndim < 0 || t->ndim > YC_WEIGHTS_MAX_DIMS)
            fuzz_fail("weights tensor without a name or with a bad rank");
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                fuzz_fail("weights tensor with a negative dimension");
            numel *= (size_t)t->shape[d];
        }
        if (numel != t->numel)
            fuzz_fail("weights tensor whose numel is not the product of its shape");
        /* every value must be readable (ASan checks the extent) */
        volatile float sink = 0;
        for (size_t k = 0; k < t->numel; k++)
            sink += t->data[k];
        (void)sink;
        if (yc_weights_find(w, t->name) == NULL)
            fuzz_fail("yc_weights_find misses a tensor of the file");
    }
    int nc = 0;
    fuzz_begin();
    st = yc_weights_infer_nc(w, &nc);
    fuzz_check(st, "yc_weights_infer_nc");
    if (!st && nc < 1)
        fuzz_fail("yc_weights_infer_nc returned no classes");
    yc_model_cfg *cfg = NULL;
    fuzz_begin();
    st = yc_weights_model_cfg(w, 0, &cfg);
    fuzz_check(st, "yc_weights_model_cfg");
    yc_model_cfg_free(cfg);
    yc_weights_free(w);
}
