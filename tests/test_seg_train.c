/* Training a segmentation model (yc_train with a Segment model, segment/train.py's run) on a small
 * demo segmentation dataset (polygon labels: yc_demo_write with YC_DEMO_SEGMENT, 16 training and 8
 * validation images of 64 to 96 px) with the 0.0625-wide yolov5n-seg of tests/data/seg/tiny:
 *  - a few epochs whose mask loss falls, results.csv with segment/train.py's header (KEYS of
 *    utils/segment/metrics.py, '%23s' fields) and one row of 20 values per epoch, the
 *    checkpoints and opt.yaml's mask options;
 *  - an interruption inside an epoch (SIGINT from the progress callback; in epoch 1 between
 *    optimizer steps, and in epoch 0) then --resume: the same final weights, bit for bit, and the
 *    same results.csv, byte for byte (the interrupted epoch's four running losses included),
 *    with overlap masks and with one mask per target (--no-overlap), which the resumed run takes
 *    from the checkpoint;
 *  - the segmentation options refused where segment/train.py has no counterpart (--quad). */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "demo.h"
#include "log.h"
#include "plots.h"
#include "rundir.h"
#include "safetensors.h"
#include "train.h"
#include "util.h"
#include "harness.h"

/* the runs' project folder and the dataset's yaml, in the scratch directory */
static char tmpdir[512];
static char demo_yaml[512];

/* The demo segmentation dataset and the project folder, made once (in a test case: it runs
 * OpenMP threads; the cases run in this process, one after the other). */
static void make_demo(void)
{
    if (demo_yaml[0])
        return;
    snprintf(tmpdir, sizeof tmpdir, "%s", yc_harness_tmp("runs"));
    ck_assert_msg(yc_mkdirs(tmpdir) == YC_OK, "%s", yc_last_error());
    yc_demo_options opt;
    yc_demo_options_default(&opt);
    opt.task = YC_DEMO_SEGMENT;
    opt.n_train = 16;
    opt.n_val = 8;
    opt.min_side = 64;
    opt.max_side = 96;
    ck_assert_msg(yc_harness_demo(yc_harness_tmp("segdemo"), &opt, demo_yaml, sizeof demo_yaml) ==
                  YC_OK, "%s", yc_last_error());
}

static const char *seg_cfg(void)
{
    static char path[1024];
    if (!path[0])
        snprintf(path, sizeof path, "%s", yc_harness_test_data("seg/tiny/yolov5n-seg-tiny.yaml"));
    return path;
}

/* Where the progress callback raises SIGINT, as Ctrl-C would. */
typedef struct interrupt_at {
    int epoch, batch;
} interrupt_at;

static void interrupt_cb(void *ctx, int epoch, int batch, double loss)
{
    (void)loss;
    const interrupt_at *at = ctx;
    if (epoch == at->epoch && batch == at->batch)
        raise(SIGINT);
}

/* A training of the tiny segmentation model on the demo data at 64 from scratch, with the options
 * of *o_in (its batch, hyp, accumulate, noval) and: `epochs` epochs, one mask per target with
 * no_overlap, interrupted at `at` when not NULL; `resume` continues a run (everything else then
 * from its checkpoint).  Returns whether it was interrupted; *st its status. */
static bool seg_run_opts(yc_train_opts *o_in, const char *name, int epochs, bool no_overlap,
                         const interrupt_at *at, const char *resume, int *st)
{
    yc_train_opts o = *o_in;
    if (!resume) {
        o.data = demo_yaml;
        o.cfg = seg_cfg();
        o.epochs = epochs;
        o.imgsz = 64;
        o.noplots = true;
        o.exist_ok = true;
        o.project = tmpdir;
        o.name = name;
        o.seed = 3;
        o.no_overlap = no_overlap;
    }
    o.device = "cpu";
    o.workers = 2;
    o.resume = resume;
    o.progress = at ? interrupt_cb : NULL;
    o.progress_ctx = (void *)at;
    bool interrupted = false;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    *st = yc_train(&o, &interrupted);
    yc_verbosity = verbosity;
    return interrupted;
}

static bool seg_run(const char *name, int epochs, bool no_overlap, const interrupt_at *at,
                    const char *resume, int *st)
{
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    o.batch = 4;
    o.noval = true; /* the last epoch is validated all the same */
    return seg_run_opts(&o, name, epochs, no_overlap, at, resume, st);
}

static void seg_run_ok(const char *name, int epochs, bool no_overlap, const char *resume)
{
    int st;
    ck_assert(!seg_run(name, epochs, no_overlap, NULL, resume, &st));
    ck_assert_msg(st == YC_OK, "training %s: %s", name, yc_last_error());
}

/* Every tensor of a safetensors file, concatenated. */
static float *read_all(const char *path, size_t *total)
{
    yc_st_file *f = NULL;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    size_t n = 0;
    for (int i = 0; i < yc_st_count(f); i++)
        n += yc_st_get(f, i)->numel;
    float *v = malloc((n + 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    size_t off = 0;
    for (int i = 0; i < yc_st_count(f); i++) {
        const yc_st_tensor *t = yc_st_get(f, i);
        ck_assert_int_eq(yc_st_read_f32(f, t, v + off, t->numel), YC_OK);
        off += t->numel;
    }
    yc_st_close(f);
    *total = n;
    return v;
}

/* Fitting the training images: no augmentation (a hyp file without mosaic, scaling,
 * translation, flips or HSV; lr0 0.03), the 16 images in one batch and an optimizer step per
 * batch (accumulate 1), validation of the final epoch only (noval), EPOCHS epochs: the mask loss
 * of the last three epochs 15% below the first three's (measured FALL_MEASURED; a mask gradient
 * that does not reach Proto or the coefficients leaves it flat), every value finite; results.csv's header is
 * segment/train.py's, field for field, and it has a row of 20 numbers per epoch; the best and
 * last checkpoints are written, last stripped (epoch -1); opt.yaml has the mask options; its
 * results.png has the segmentation panels (YC_RESULTS_PLOT_SEG_W wide). */
#define EPOCHS 16
#define FALL_MEASURED "0.148 -> 0.114; 0.244 -> 0.132 with the demo's colours before its hues " \
                      "were drawn in another order"
START_TEST(seg_loss_falls_and_results_have_segment_columns)
{
    make_demo();
    const int epochs = EPOCHS;
    char hyp[700];
    snprintf(hyp, sizeof hyp, "%s/fit.yaml", tmpdir);
    FILE *f = fopen(hyp, "w");
    ck_assert_ptr_nonnull(f);
    fputs("hsv_h: 0.0\nhsv_s: 0.0\nhsv_v: 0.0\ntranslate: 0.0\nscale: 0.0\nfliplr: 0.0\n"
          "mosaic: 0.0\nlr0: 0.03\nwarmup_epochs: 0.0\n", f);
    ck_assert_int_eq(fclose(f), 0);
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    o.hyp = hyp;
    o.accumulate = 1;
    o.batch = 16;
    o.noval = true;
    int st;
    ck_assert(!seg_run_opts(&o, "falls", epochs, false, NULL, NULL, &st));
    ck_assert_msg(st == YC_OK, "training: %s", yc_last_error());
    char path[1200];
    snprintf(path, sizeof path, "%s/falls/results.csv", tmpdir);
    size_t len = 0;
    char *csv = yc_harness_read(path, &len);
    ck_assert_ptr_nonnull(csv);
    /* the header: '%23s,' * 20 with the trailing comma dropped */
    char header[2048];
    int k = snprintf(header, sizeof header, "%23s", "epoch");
    for (int i = 0; i < YC_SEG_RESULTS_NCOLS; i++)
        k += snprintf(header + k, sizeof header - (size_t)k, ",%23s", yc_seg_results_columns[i]);
    snprintf(header + k, sizeof header - (size_t)k, "\n");
    ck_assert_msg(strncmp(csv, header, strlen(header)) == 0, "results.csv header:\n%.*s\nexpected:"
                  "\n%s", (int)(strchr(csv, '\n') - csv), csv, header);
    ck_assert_str_eq(yc_seg_results_columns[1], "train/seg_loss");
    ck_assert_str_eq(yc_seg_results_columns[11], "metrics/mAP_0.5:0.95(M)");
    ck_assert_str_eq(yc_seg_results_columns[13], "val/seg_loss");
    double seg[EPOCHS + 1];
    int rows = 0;
    for (char *line = strchr(csv, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        double v[21];
        int n = 0;
        char *p = line;
        while (n < 21) {
            char *end;
            v[n] = strtod(p, &end);
            if (end == p)
                break;
            n++;
            p = end;
            if (*p != ',')
                break;
            p++;
        }
        ck_assert_msg(n == 20 && rows < EPOCHS, "row %d has %d values", rows, n);
        ck_assert_int_eq((int)v[0], rows);
        for (int i = 1; i < 20; i++)
            ck_assert_msg(isfinite(v[i]), "row %d column %d: %g", rows, i, v[i]);
        seg[rows++] = v[2];
    }
    ck_assert_int_eq(rows, epochs);
    printf("seg_loss per epoch:");
    for (int i = 0; i < rows; i++)
        printf(" %.4f", seg[i]);
    printf("\n");
    /* the means of the first and the last three epochs (an epoch's mean wanders by a few % from
     * the next) */
    const double first = (seg[0] + seg[1] + seg[2]) / 3;
    const double last = (seg[rows - 1] + seg[rows - 2] + seg[rows - 3]) / 3;
    ck_assert_msg(last < 0.85 * first, "the mask loss did not fall: %g -> %g (measured "
                  FALL_MEASURED ")", first, last);
    free(csv);
    /* results.png of a segmentation run: plot_results_with_masks' 2 x 8 panels, wider */
    char png[1300];
    snprintf(png, sizeof png, "%s/falls/results.png", tmpdir);
    ck_assert_msg(yc_plot_results(path, png) == YC_OK, "%s", yc_last_error());
    size_t plen = 0;
    unsigned char *pb = (unsigned char *)yc_harness_read(png, &plen);
    ck_assert(pb && plen > 24 && memcmp(pb + 1, "PNG", 3) == 0);
    const unsigned pw = (unsigned)pb[16] << 24 | (unsigned)pb[17] << 16 | (unsigned)pb[18] << 8 |
                        pb[19];
    ck_assert_uint_eq(pw, YC_RESULTS_PLOT_SEG_W);
    free(pb);
    yc_ckpt_meta meta;
    snprintf(path, sizeof path, "%s/falls/weights/last.safetensors", tmpdir);
    ck_assert_int_eq(yc_checkpoint_read_meta(path, &meta), YC_OK);
    ck_assert_int_eq(meta.epoch, -1);
    yc_ckpt_meta_free(&meta);
    snprintf(path, sizeof path, "%s/falls/weights/best.safetensors", tmpdir);
    ck_assert_int_eq(yc_checkpoint_read_meta(path, &meta), YC_OK);
    yc_ckpt_meta_free(&meta);
    snprintf(path, sizeof path, "%s/falls/opt.yaml", tmpdir);
    char *opt = yc_harness_read(path, &len);
    ck_assert_ptr_nonnull(opt);
    ck_assert_msg(strstr(opt, "\nmask_ratio: 4\n") && strstr(opt, "\nno_overlap: false\n"), "%s",
                  opt);
    free(opt);
}
END_TEST

/* The run straight, and the same run interrupted at `epoch`, batch 2 (warmup's accumulate steps
 * the optimizer after batches 1 and 3 from epoch 1 on, so that checkpoint holds batch 2's
 * gradients; in epoch 0 every batch steps) then resumed with --resume alone: bit-identical final
 * weights, byte-identical results.csv.  An interruption inside epoch 0 saves "last completed
 * epoch" -1 with a batch to continue from, which is not a finished run's checkpoint. */
static void check_resume_inside(const char *name, bool no_overlap, int epoch)
{
    make_demo();
    char sname[64], iname[64];
    snprintf(sname, sizeof sname, "%s_straight", name);
    snprintf(iname, sizeof iname, "%s_interrupted", name);
    seg_run_ok(sname, 3, no_overlap, NULL);
    interrupt_at at = {epoch, 2};
    int st;
    ck_assert_msg(seg_run(iname, 3, no_overlap, &at, NULL, &st), "%s: not interrupted", name);
    ck_assert_msg(st == YC_OK, "%s: %s", name, yc_last_error());
    char dir[700], last[800];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, iname);
    snprintf(last, sizeof last, "%s/weights/last.safetensors", dir);
    yc_ckpt_meta meta;
    ck_assert_int_eq(yc_checkpoint_read_meta(last, &meta), YC_OK);
    ck_assert_int_eq(meta.epoch, epoch - 1);
    ck_assert_int_eq(meta.next_batch, 3);
    ck_assert_int_eq(meta.epoch_batches, 3);
    ck_assert_msg(meta.epoch_nloss == 4, "%s: %d epoch losses saved, not box, seg, obj, cls", name,
                  meta.epoch_nloss);
    ck_assert(meta.grads == (epoch > 0));
    ck_assert(meta.epoch_loss[1] > 0);
    yc_ckpt_meta_free(&meta);
    seg_run_ok(iname, 0, false, dir);

    char fa[800], fb[800];
    snprintf(fa, sizeof fa, "%s/%s/weights/last.safetensors", tmpdir, sname);
    size_t na, nb;
    float *wa = read_all(fa, &na), *wb = read_all(last, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_msg(memcmp(wa, wb, na * sizeof *wa) == 0, "%s: resumed weights differ from the "
                  "straight run's", name);
    free(wa);
    free(wb);
    snprintf(fa, sizeof fa, "%s/%s/results.csv", tmpdir, sname);
    snprintf(fb, sizeof fb, "%s/results.csv", dir);
    size_t la, lb;
    char *ca = yc_harness_read(fa, &la), *cb = yc_harness_read(fb, &lb);
    ck_assert(ca && cb);
    ck_assert_msg(la == lb && memcmp(ca, cb, la) == 0, "%s: results.csv differs:\n%s\nresumed:\n%s",
                  name, ca, cb);
    free(ca);
    free(cb);
}

START_TEST(resume_inside_epoch_overlap)
{
    check_resume_inside("overlap", false, 1);
}
END_TEST

START_TEST(resume_inside_epoch_no_overlap)
{
    check_resume_inside("nooverlap", true, 0);
}
END_TEST

/* --quad has no segmentation counterpart: refused before a run directory is made, saying why. */
START_TEST(quad_is_refused)
{
    make_demo();
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    o.data = demo_yaml;
    o.cfg = seg_cfg();
    o.epochs = 1;
    o.batch = 4;
    o.imgsz = 64;
    o.project = tmpdir;
    o.name = "quad";
    o.device = "cpu";
    o.quad = true;
    bool interrupted = false;
    int verbosity = yc_verbosity;
    yc_verbosity = 0;
    int st = yc_train(&o, &interrupted);
    yc_verbosity = verbosity;
    ck_assert_int_eq(st, YC_EUNSUPPORTED);
    ck_assert_msg(strstr(yc_last_error(), "--quad") && strstr(yc_last_error(), "segmentation"),
                  "%s", yc_last_error());
}
END_TEST

int main(void)
{
    if (!yc_harness_tmpdir_make("seg_train"))
        return YC_TEST_HARD_ERROR;
    Suite *s = suite_create("seg_train");
    TCase *tc = tcase_create("seg_train");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, seg_loss_falls_and_results_have_segment_columns);
    tcase_add_test(tc, resume_inside_epoch_overlap);
    tcase_add_test(tc, resume_inside_epoch_no_overlap);
    tcase_add_test(tc, quad_is_refused);
    suite_add_tcase(s, tc);
    /* in this process: the dataset is made once, by the first case (yc_train installs its own
     * SIGINT handler for the interrupted runs) */
    int failed = yc_harness_run(s, true);
    yc_harness_tmpdir_remove();
    return failed;
}
