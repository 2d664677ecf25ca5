/* Fuzz target: what `yolocl train --resume` reads from a run directory, and the plots it draws
 * from it.  The first input byte picks the reader, the rest is the file:
 *   0: results.csv cut back to the epochs of the checkpoint (yc_results_truncate, src/train/rundir.c;
 *      the second byte is the epoch count) and read as a table (yc_results_read, src/data/results_csv.c);
 *   1: a checkpoint's metadata (yc_checkpoint_read_meta, src/train/checkpoint.c: epoch, next_batch,
 *      best_fitness, updates, optimizer steps over the safetensors reader) and the run options
 *      stored in it (yc_train_opts_from_json, src/train/train_opts.c);
 *   2: the run options JSON alone (yc_train_opts_from_json), the text opt.yaml is written from;
 *   3: a hyperparameter yaml (yc_hyp_load, src/core/hyp.c), which a resumed run reloads;
 *   4: results.csv plotted as at the end of training (yc_plot_results: parsing, axis ranges,
 *      smoothing and drawing of any finite, infinite or NaN values; a JPEG is written).
 * Checked besides crashes: truncation keeps a prefix of the file (the header and whole rows),
 * and restored options lie in the ranges the command line accepts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "draw.h"
#include "fuzz.h"
#include "hyp.h"
#include "log.h"
#include "rundir.h"
#include "train.h"
#include "util.h"

static void check_opts(const char *text)
{
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    yc_train_opt_strings keep;
    fuzz_begin();
    int st = yc_train_opts_from_json(text, &o, &keep);
    fuzz_check(st, "yc_train_opts_from_json");
    if (st) {
        if (keep.data || keep.cfg || keep.hyp || keep.project || keep.name)
            fuzz_fail("options failed but kept strings");
        return;
    }
    if (o.epochs < 1 || o.batch == 0 || o.batch < -1 || o.imgsz < 32 || o.accumulate < 0 ||
        !(o.label_smoothing >= 0 && o.label_smoothing <= 1) || o.patience < 0 ||
        o.nfreeze < 0 || o.nfreeze > YC_MAX_FREEZE || o.tile < 0 || !o.hyp || !o.project ||
        !o.name)
        fuzz_fail("restored options out of the command line's ranges");
    for (int i = 0; i < o.nfreeze; i++)
        if (o.freeze[i] < 0)
            fuzz_fail("restored a negative freeze layer");
    yc_train_opt_strings_free(&keep);
}

static void results(const uint8_t *data, size_t size, int epochs)
{
    const char *path = fuzz_write("results.csv", data, size);
    if (!path)
        abort();
    fuzz_begin();
    int st = yc_results_truncate(path, epochs);
    fuzz_check(st, "yc_results_truncate");
    if (!st) {
        char *text = NULL;
        size_t len = 0;
        if (yc_read_file(path, &text, &len) != YC_OK)
            fuzz_fail("results.csv unreadable after truncation");
        if (len > size || memcmp(text, data, len) != 0)
            fuzz_fail("yc_results_truncate did not keep a prefix of the file");
        if (len < size && len && text[len - 1] != '\n')
            fuzz_fail("yc_results_truncate cut a line");
        free(text);
    }
    if (!fuzz_write("results.csv", data, size))
        abort();
    yc_results r;
    fuzz_begin();
    st = yc_results_read(path, &r);
    fuzz_check(st, "yc_results_read");
    if (!st) {
        if (r.n_cols < 1 || r.n_rows < 0 || !r.names)
            fuzz_fail("results table without columns");
        yc_results_free(&r);
    }
}

static void checkpoint(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("last.safetensors", data, size);
    if (!path)
        abort();
    yc_ckpt_meta meta;
    fuzz_begin();
    int st = yc_checkpoint_read_meta(path, &meta);
    fuzz_check(st, "yc_checkpoint_read_meta");
    if (st)
        return;
    if (meta.epoch < -1 || meta.next_batch < 0 || meta.updates < 0 || meta.last_opt_step < -1)
        fuzz_fail("checkpoint metadata out of range");
    if (meta.opt_json)
        check_opts(meta.opt_json);
    yc_ckpt_meta_free(&meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    if (size < 1)
        return 0;
    int mode = data[0] % 5;
    data++;
    size--;
    switch (mode) {
    case 0: {
        if (size < 1)
            return 0;
        results(data + 1, size - 1, data[0]);
        break;
    }
    case 1:
        checkpoint(data, size);
        break;
    case 2: {
        char *text = malloc(size + 1);
        if (!text)
            abort();
        memcpy(text, data, size);
        text[size] = '\0';
        check_opts(text);
        free(text);
        break;
    }
    case 3: {
        const char *path = fuzz_write("hyp.yaml", data, size);
        if (!path)
            abort();
        yc_hyp h;
        fuzz_begin();
        fuzz_check(yc_hyp_load(&h, path), "yc_hyp_load");
        break;
    }
    default: {
        const char *csv = fuzz_write("results.csv", data, size);
        const char *d = fuzz_dir();
        if (!csv || !d)
            abort();
        char out[1200];
        snprintf(out, sizeof out, "%s/results.jpg", d);
        fuzz_begin();
        fuzz_check(yc_plot_results(csv, out), "yc_plot_results");
        break;
    }
    }
    return 0;
}
