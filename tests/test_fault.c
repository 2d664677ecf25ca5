/* Faults during training (issue 9): a checkpoint write that fails (a file size limit standing in
 * for a full disk: RLIMIT_FSIZE with SIGXFSZ ignored, so no root is needed) leaves the previous
 * checkpoint intact and stops the run with a message naming the file, the cause and what to do;
 * images that vanish or turn corrupt after the label scan are skipped with one warning and
 * replaced in training; a loss that turns NaN stops the run naming the step, the last good
 * checkpoint staying on disk and resumable; stale temporary files of killed writes are removed.
 * bench/fault_test.sh kills whole runs with SIGKILL. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dataset.h"
#include "demo.h"
#include "device.h"
#include "ema.h"
#include "hyp.h"
#include "loader.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "rundir.h"
#include "safetensors.h"
#include "train.h"
#include "util.h"
#include "harness.h"

static bool err_has(const char *s)
{
    return strstr(yc_last_error(), s) != NULL;
}

/* Files in dir whose names contain ".tmp." (temporary files of atomic writes). */
static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* Occurrences of `needle` in the file at path. */
static int count_in_file(const char *path, const char *needle)
{
    size_t len;
    char *text = yc_harness_read(path, &len);
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(text);
    return n;
}

/* Standard error into a file, and back. */
static int stderr_to(const char *path)
{
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert(saved >= 0 && fd >= 0);
    ck_assert(dup2(fd, 2) == 2);
    close(fd);
    return saved;
}

static void stderr_back(int saved)
{
    fflush(stderr);
    ck_assert(dup2(saved, 2) == 2);
    close(saved);
}

/* The soft file size limit (the hard one is left alone: lowering it cannot be undone). */
static void set_fsize(rlim_t bytes)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
    rl.rlim_cur = bytes;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

static void no_fsize_limit(void)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
    rl.rlim_cur = rl.rlim_max;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

/* A checkpoint write cut short by a file size limit (EFBIG, as ENOSPC would): a message naming
 * the file and the cause, the previous file byte for byte, no temporary file left; weights that
 * are not finite are refused the same way. */
START_TEST(failed_checkpoint_write_keeps_the_previous_one)
{
    ck_assert_ptr_nonnull(yc_harness_tmpdir_make("fault"));
    signal(SIGXFSZ, SIG_IGN);
    yc_backend *be = NULL;
    yc_harness_cpu(&be, 0);
    yc_model *m = yc_harness_tiny_model(be, 4, 1);
    yc_optim *o = NULL;
    yc_ema *e = NULL;
    ck_assert_int_eq(yc_optim_new(&o, m, YC_OPTIM_SGD, 0.01, 0.9, 5e-4, NULL), YC_OK);
    ck_assert_int_eq(yc_ema_new(&e, m, 0), YC_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/last.safetensors", yc_harness_tmpdir());
    yc_ckpt_meta meta = {.epoch = 4, .last_opt_step = 9,
                         .names_json = "[\"a\", \"b\", \"c\", \"d\"]",
                         .opt_json = "{\"epochs\": 9}", .hyp_json = "{\"lr0\": 0.01}"};
    ck_assert_msg(yc_checkpoint_save(path, e->ema, m, o, &meta) == YC_OK, "%s", yc_last_error());
    size_t len0;
    char *before = yc_harness_read(path, &len0);

    /* the next save of other weights, into a file system that takes 64 KiB per file */
    ck_assert_int_eq(yc_ema_update(e, m), YC_OK);
    meta.epoch = 5;
    set_fsize(64 * 1024);
    int st = yc_checkpoint_save(path, e->ema, m, o, &meta);
    no_fsize_limit();
    ck_assert_int_eq(st, YC_EIO);
    ck_assert_msg(err_has(path) && err_has("File too large"), "%s", yc_last_error());
    size_t len1;
    char *after = yc_harness_read(path, &len1);
    ck_assert_uint_eq(len0, len1);
    ck_assert_msg(memcmp(before, after, len0) == 0, "the previous checkpoint changed");
    ck_assert_int_eq(count_tmp(yc_harness_tmpdir()), 0);
    yc_ckpt_meta back;
    ck_assert_int_eq(yc_checkpoint_read_meta(path, &back), YC_OK);
    ck_assert_int_eq(back.epoch, 4);
    yc_ckpt_meta_free(&back);
    ck_assert_msg(yc_checkpoint_load_train_state(path, m, e->ema, o) == YC_OK, "%s",
                  yc_last_error());

    /* a NaN in the raw model: refused, nothing written */
    float *w = be->iface->buffer_host_ptr(be, m->param_buf);
    ck_assert_ptr_nonnull(w);
    w[m->params[2].offset + 1] = NAN;
    ck_assert_int_ne(yc_checkpoint_save(path, e->ema, m, o, &meta), YC_OK);
    ck_assert_msg(err_has(m->params[2].name) && err_has("not finite") && err_has(path), "%s",
                  yc_last_error());
    free(after);
    after = yc_harness_read(path, &len1);
    ck_assert_msg(len0 == len1 && memcmp(before, after, len0) == 0, "the previous checkpoint "
                  "changed");
    ck_assert_int_eq(count_tmp(yc_harness_tmpdir()), 0);
    free(before);
    free(after);
    yc_optim_free(o);
    yc_ema_free(e);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

/* Temporary files of writes killed before their rename are removed once their process is gone;
 * a live process's (ours) and other names are left alone. */
START_TEST(stale_temporary_files_are_removed)
{
    ck_assert_ptr_nonnull(yc_harness_tmpdir_make("fault"));
    pid_t child = fork();
    ck_assert(child >= 0);
    if (child == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(child, NULL, 0), child);
    const char *names[4] = {"last.safetensors.tmp.%ld", "results.csv.tmp.%ld",
                            "best.safetensors.tmp.%ld", "epoch3.safetensors"};
    long pids[4] = {(long)child, (long)child, (long)getpid(), 0};
    for (int i = 0; i < 4; i++) {
        char name[128], path[512];
        snprintf(name, sizeof name, names[i], pids[i]);
        snprintf(path, sizeof path, "%s/%s", yc_harness_tmpdir(), name);
        ck_assert_int_eq(yc_write_file_atomic(path, "x", 1), YC_OK);
    }
    ck_assert_int_eq(count_tmp(yc_harness_tmpdir()), 3);
    ck_assert_int_eq(yc_atomic_remove_stale(yc_harness_tmpdir()), 2);
    ck_assert_int_eq(count_tmp(yc_harness_tmpdir()), 1);
    ck_assert_int_eq(yc_count_files(yc_harness_tmpdir(), ".safetensors"), 1);
}
END_TEST

/* results.csv after a write cut short: the torn row goes when resuming, and a file left with a
 * torn header gets a whole one back. */
START_TEST(results_csv_torn_rows_are_dropped)
{
    ck_assert_ptr_nonnull(yc_harness_tmpdir_make("fault"));
    char csv[512];
    snprintf(csv, sizeof csv, "%s/results.csv", yc_harness_tmpdir());
    double row[YC_RESULTS_NCOLS] = {0};
    for (int ep = 0; ep < 2; ep++)
        ck_assert_int_eq(yc_results_append(csv, ep, row), YC_OK);
    size_t len;
    char *whole = yc_harness_read(csv, &len);
    FILE *f = fopen(csv, "a");
    ck_assert_ptr_nonnull(f);
    fputs("                   2,             0.1", f);
    fclose(f);
    ck_assert_int_eq(yc_results_truncate(csv, 3), YC_OK);
    size_t len2;
    char *cut = yc_harness_read(csv, &len2);
    ck_assert_uint_eq(len, len2);
    ck_assert(memcmp(whole, cut, len) == 0);
    free(cut);
    /* a torn header alone */
    f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    fputs("               epoch,      train/bo", f);
    fclose(f);
    ck_assert_int_eq(yc_results_truncate(csv, 0), YC_OK);
    ck_assert_int_eq(yc_results_append(csv, 0, row), YC_OK);
    cut = yc_harness_read(csv, &len2);
    ck_assert_msg(strncmp(cut, whole, strchr(whole, '\n') - whole + 1) == 0, "no header: %s", cut);
    ck_assert_int_eq(count_in_file(csv, "epoch"), 1);
    free(cut);
    free(whole);
}
END_TEST

/* ---- whole runs ------------------------------------------------------------------------------ */

typedef struct fsize_trigger {
    int epoch;
    rlim_t bytes;
} fsize_trigger;

/* At the first batch of the given epoch the file system "fills up". */
static void limit_at_epoch(void *ctx, int epoch, int batch, double loss)
{
    const fsize_trigger *t = ctx;
    (void)loss;
    if (epoch == t->epoch && batch == 0)
        set_fsize(t->bytes);
}

static void train_opts(yc_train_opts *o, const char *yaml, const char *name)
{
    yc_train_opts_defaults(o);
    o->data = yaml;
    o->cfg = yc_harness_tiny_cfg();
    o->epochs = 2;
    o->batch = 4;
    o->imgsz = 64;
    o->workers = 2;
    o->noplots = true;
    o->noautoanchor = true;
    o->exist_ok = true;
    o->project = yc_harness_tmpdir();
    o->name = name;
    o->device = "cpu";
}

static int train_quiet(const yc_train_opts *o)
{
    bool interrupted = false;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    int st = yc_train(o, &interrupted);
    yc_verbosity = verbosity;
    ck_assert(!interrupted);
    return st;
}

/* Epoch 1's checkpoints cannot be written: the run stops with the file, the cause, the last good
 * checkpoint (epoch 0) and what to do; that checkpoint is intact, and --resume once the disk has
 * room finishes the run with one results.csv row per epoch. */
START_TEST(full_disk_stops_training_and_keeps_the_last_checkpoint)
{
    ck_assert_ptr_nonnull(yc_harness_tmpdir_make("fault"));
    signal(SIGXFSZ, SIG_IGN);
    char yaml[512];
    ck_assert_msg(yc_harness_demo(yc_harness_tmp("demo"), NULL, yaml, sizeof yaml) == YC_OK, "%s",
                  yc_last_error());
    yc_train_opts o;
    train_opts(&o, yaml, "full");
    fsize_trigger trig = {1, 64 * 1024};
    o.progress = limit_at_epoch;
    o.progress_ctx = &trig;
    int st = train_quiet(&o);
    no_fsize_limit();
    ck_assert_int_eq(st, YC_EIO);
    char run[400], last[500], wdir[450], csv[450];
    snprintf(run, sizeof run, "%s/full", yc_harness_tmpdir());
    snprintf(wdir, sizeof wdir, "%s/weights", run);
    snprintf(last, sizeof last, "%s/last.safetensors", wdir);
    snprintf(csv, sizeof csv, "%s/results.csv", run);
    ck_assert_msg(err_has("File too large") && err_has(".safetensors") &&
                      err_has("training stopped") && err_has(last) && err_has("(epoch 0)") &&
                      err_has("free disk space") && err_has("yolocl train --resume"),
                  "%s", yc_last_error());
    ck_assert_int_eq(count_tmp(wdir), 0);
    yc_ckpt_meta meta;
    ck_assert_msg(yc_checkpoint_read_meta(last, &meta) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(meta.epoch, 0);
    yc_ckpt_meta_free(&meta);

    yc_train_opts r;
    train_opts(&r, yaml, "full");
    r.resume = last;
    st = train_quiet(&r);
    ck_assert_msg(st == YC_OK, "resume: %s", yc_last_error());
    ck_assert_int_eq(yc_checkpoint_read_meta(last, &meta), YC_OK);
    ck_assert_int_eq(meta.epoch, -1);
    yc_ckpt_meta_free(&meta);
    ck_assert_int_eq(count_in_file(csv, "\n"), 3);
    ck_assert_int_eq(count_in_file(csv, "\n                   1,"), 1);
}
END_TEST

/* hyp lrf 1e20: epoch 0 trains normally, epoch 1's learning rate explodes and its loss turns
 * NaN.  The run stops naming the epoch, batch and step and the last good checkpoint (epoch 0),
 * which stays on disk with finite weights; --resume loads it and stops at the same step. */
START_TEST(nan_loss_stops_and_keeps_the_last_good_checkpoint)
{
    ck_assert_ptr_nonnull(yc_harness_tmpdir_make("fault"));
    char yaml[512], hyp[512];
    ck_assert_msg(yc_harness_demo(yc_harness_tmp("demo"), NULL, yaml, sizeof yaml) == YC_OK, "%s",
                  yc_last_error());
    snprintf(hyp, sizeof hyp, "%s/hyp.nan.yaml", yc_harness_tmpdir());
    const char *text = "lr0: 0.01\nlrf: 1.0e+20\n";
    ck_assert_int_eq(yc_write_file_atomic(hyp, text, strlen(text)), YC_OK);
    yc_train_opts o;
    train_opts(&o, yaml, "nan");
    o.epochs = 3;
    o.hyp = hyp;
    int st = train_quiet(&o);
    ck_assert_int_ne(st, YC_OK);
    char last[500], msg[2048];
    snprintf(last, sizeof last, "%s/nan/weights/last.safetensors", yc_harness_tmpdir());
    snprintf(msg, sizeof msg, "%s", yc_last_error());
    ck_assert_msg((err_has("the loss is") || err_has("gradients are not finite")) &&
                      err_has("epoch 1, batch") && err_has("(step ") &&
                      err_has("training stopped; the last good checkpoint is") && err_has(last) &&
                      err_has("(epoch 0)") && err_has("lr0"),
                  "%s", msg);
    yc_ckpt_meta meta;
    ck_assert_int_eq(yc_checkpoint_read_meta(last, &meta), YC_OK);
    ck_assert_int_eq(meta.epoch, 0);
    yc_ckpt_meta_free(&meta);
    yc_st_file *f = NULL;
    ck_assert_int_eq(yc_st_open(&f, last), YC_OK);
    float *v = NULL;
    for (int i = 0; i < yc_st_count(f); i++) {
        const yc_st_tensor *t = yc_st_get(f, i);
        if (t->dtype != YC_ST_F32)
            continue;
        v = realloc(v, (t->numel + 1) * sizeof *v);
        ck_assert_int_eq(yc_st_read_f32(f, t, v, t->numel), YC_OK);
        for (size_t k = 0; k < t->numel; k++)
            ck_assert_msg(isfinite(v[k]), "%s[%zu] = %g", t->name, k, v[k]);
    }
    free(v);
    yc_st_close(f);
    size_t len0;
    char *before = yc_harness_read(last, &len0);

    yc_train_opts r;
    train_opts(&r, yaml, "nan");
    r.resume = last;
    st = train_quiet(&r);
    ck_assert_int_ne(st, YC_OK);
    ck_assert_msg(strcmp(msg, yc_last_error()) == 0, "first: %s\nresumed: %s", msg,
                  yc_last_error());
    size_t len1;
    char *after = yc_harness_read(last, &len1);
    ck_assert_msg(len0 == len1 && memcmp(before, after, len0) == 0, "last.safetensors changed");
    free(before);
    free(after);
}
END_TEST

/* ---- images that go away after the label scan ------------------------------------------------ */

/* Pixels of every batch of one training epoch (batches must be full); samples used. */
static uint8_t *train_epoch(const yc_dataset *ds, const yc_hyp *hyp, int workers, int epoch,
                            const int *banned, int nbanned)
{
    yc_loader *l = NULL;
    yc_loader_options lo = {.ds = ds, .train = true, .hyp = hyp, .imgsz = 64, .batch = 4,
                            .stride = 32, .workers = workers, .seed = 3};
    ck_assert_msg(yc_loader_new(&l, &lo) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_loader_start(l, epoch, NULL, 0), YC_OK);
    size_t per = 4 * 3 * 64 * 64;
    int nb = yc_loader_nbatches(l);
    uint8_t *px = malloc((size_t)nb * per);
    const yc_batch *b = NULL;
    for (int k = 0; k < nb; k++) {
        ck_assert_int_eq(yc_loader_next(l, &b), YC_OK);
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(b->n, 4);
        for (int i = 0; i < b->n; i++)
            for (int j = 0; j < nbanned; j++)
                ck_assert_int_ne(b->sample[i], banned[j]);
        memcpy(px + (size_t)k * per, b->images, per);
    }
    ck_assert_int_eq(yc_loader_next(l, &b), YC_OK);
    ck_assert_ptr_null(b);
    yc_loader_free(l);
    return px;
}

/* One image deleted and one overwritten with garbage after the scan: training batches stay full
 * (replacement samples, the same whatever the thread count), each file is named in one warning,
 * and validation leaves the two out. */
START_TEST(vanished_and_corrupt_images_are_skipped)
{
    ck_assert_ptr_nonnull(yc_harness_tmpdir_make("fault"));
    char yaml[512];
    ck_assert_msg(yc_harness_demo(yc_harness_tmp("demo"), NULL, yaml, sizeof yaml) == YC_OK, "%s",
                  yc_last_error());
    yc_data_yaml y;
    yc_dataset ds, vds;
    ck_assert_int_eq(yc_data_yaml_load(yaml, &y), YC_OK);
    yc_dataset_options dopt = {.nc = y.nc, .quiet = true, .no_cache = true};
    ck_assert_int_eq(yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &dopt, &ds), YC_OK);
    ck_assert_int_eq(yc_dataset_load_split(&y, YC_SPLIT_VAL, &dopt, &vds), YC_OK);
    ck_assert_uint_eq(ds.n, 16);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    hyp.mixup = 0.5;

    int banned[2] = {3, 11};
    ck_assert_int_eq(unlink(ds.samples[banned[0]].image), 0);
    const char *garbage = "this is not an image\n";
    ck_assert_int_eq(yc_write_file_atomic(ds.samples[banned[1]].image, garbage, strlen(garbage)),
                     YC_OK);
    char log[512];
    snprintf(log, sizeof log, "%s/stderr.txt", yc_harness_tmpdir());
    int saved = stderr_to(log);
    uint8_t *two = train_epoch(&ds, &hyp, 2, 0, banned, 2);
    stderr_back(saved);
    for (int j = 0; j < 2; j++)
        ck_assert_msg(count_in_file(log, ds.samples[banned[j]].image) >= 1 &&
                          count_in_file(log, "skipping ") == 2,
                      "warnings: %s", yc_harness_read(log, &(size_t){0}));
    ck_assert_int_eq(count_in_file(log, "replacement samples take its place"), 2);
    saved = stderr_to(log);
    uint8_t *one = train_epoch(&ds, &hyp, 1, 0, banned, 2);
    stderr_back(saved);
    ck_assert_msg(memcmp(one, two, 4 * (size_t)4 * 3 * 64 * 64) == 0,
                  "replacements depend on the thread count");
    free(one);
    free(two);

    /* validation: the corrupt val image is left out */
    ck_assert_int_eq(yc_write_file_atomic(vds.samples[2].image, garbage, strlen(garbage)), YC_OK);
    yc_loader *l = NULL;
    yc_loader_options lo = {.ds = &vds, .train = false, .hyp = &hyp, .imgsz = 64, .batch = 4,
                            .pad = 0.5, .stride = 32, .workers = 2, .seed = 3};
    ck_assert_int_eq(yc_loader_new(&l, &lo), YC_OK);
    saved = stderr_to(log);
    int images = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        ck_assert_int_eq(yc_loader_start(l, epoch, NULL, 0), YC_OK);
        const yc_batch *b = NULL;
        while (yc_loader_next(l, &b) == YC_OK && b) {
            images += b->n;
            for (int i = 0; i < b->n; i++)
                ck_assert_int_ne(b->sample[i], 2);
        }
    }
    stderr_back(saved);
    yc_loader_free(l);
    ck_assert_int_eq(images, 2 * 7);
    ck_assert_int_ge(count_in_file(log, vds.samples[2].image), 1);
    ck_assert_int_eq(count_in_file(log, "skipping "), 1);
    ck_assert_int_eq(count_in_file(log, "left out of the validation"), 1);
    yc_dataset_free(&ds);
    yc_dataset_free(&vds);
    yc_data_yaml_free(&y);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fault");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, NULL, yc_harness_tmpdir_remove);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, failed_checkpoint_write_keeps_the_previous_one);
    tcase_add_test(tc, stale_temporary_files_are_removed);
    tcase_add_test(tc, results_csv_torn_rows_are_dropped);
    tcase_add_test(tc, vanished_and_corrupt_images_are_skipped);
    suite_add_tcase(s, tc);
    tc = tcase_create("runs");
    tcase_add_checked_fixture(tc, NULL, yc_harness_tmpdir_remove);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, full_disk_stops_training_and_keeps_the_last_checkpoint);
    tcase_add_test(tc, nan_loss_stops_and_keeps_the_last_good_checkpoint);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_run(suite(), false);
}
