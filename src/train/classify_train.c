/* Training a classifier (classify_train.h). */
#include "classify_train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_aug.h"
#include "classify_eval.h"
#include "classify_step.h"
#include "demo.h"
#include "device.h"
#include "ema.h"
#include "imagefolder.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "rundir.h"
#include "util.h"
#include "weights.h"

#define CLS_LRF 0.01
/* ClassificationModel's cutoff when --cutoff is not given (classify/train.py: opt.cutoff or 10) */
#define CLS_CUTOFF 10
#define CLS_MAX_NORM 10.0

static volatile sig_atomic_t cls_stop;

static void on_signal(int sig)
{
    if (cls_stop)
        _exit(128 + sig);
    cls_stop = 1;
}

typedef struct cls_run {
    const yc_train_opts *o;
    yc_backend *be;
    yc_model *m;
    yc_imagefolder train, val;
    yc_cls_aug aug;
    /* one batch of normalised images, its labels and the image reader */
    float *images;
    int *labels;
    yc_cls_reader rd;
    /* the training step for the full batch and for a smaller last one */
    yc_classify_step *step, *last_step;
    /* training steps run so far: each draws its dropout mask from (seed, steps) */
    uint32_t steps;
    char save_dir[2048], last[2300], best[2300], csv[2300];
} cls_run;

/* Training images idx[0..n) into r->images / r->labels, transformed.  An image that cannot be
 * read is reported and replaced by the next one. */
static int load_batch(cls_run *r, const size_t *idx, int n, yc_rng *rng)
{
    const yc_imagefolder *ds = &r->train;
    size_t plane = (size_t)3 * r->o->imgsz * r->o->imgsz;
    for (int i = 0; i < n; i++) {
        size_t k = idx[i];
        float *dst = r->images + (size_t)i * plane;
        int st = yc_cls_read(&r->rd, ds->paths[k], r->o->imgsz, &r->aug, rng, dst);
        for (size_t tries = 1; st && tries < ds->n; tries++) {
            yc_warn("%s: skipped (%s)\n", ds->paths[k], yc_last_error());
            yc_error_clear();
            k = (k + 1) % ds->n;
            st = yc_cls_read(&r->rd, ds->paths[k], r->o->imgsz, &r->aug, rng, dst);
        }
        if (st)
            return yc_error_context(st, "no image of %s could be read", ds->paths[0]);
        r->labels[i] = ds->labels[k];
    }
    return YC_OK;
}

/* GenericLogger.log_metrics: header '%23s', values '%23.5g', epoch first */
static int results_row(const char *path, int epoch, const double v[5])
{
    static const char *const keys[5] = {"train/loss", "val/loss", "metrics/accuracy_top1",
                                        "metrics/accuracy_top5", "lr/0"};
    FILE *f = fopen(path, "a");
    if (!f)
        return yc_error_status(YC_EIO, "cannot write %s", path);
    if (ftell(f) == 0) {
        fprintf(f, "%23s", "epoch");
        for (int i = 0; i < 5; i++)
            fprintf(f, ",%23s", keys[i]);
        fputc('\n', f);
    }
    fprintf(f, "%23.5g", (double)epoch);
    for (int i = 0; i < 5; i++)
        fprintf(f, ",%23.5g", v[i]);
    fputc('\n', f);
    return fclose(f) ? yc_error_status(YC_EIO, "cannot write %s", path) : YC_OK;
}

/* The EMA's weights with the class names as a safetensors file. */
static int save_weights(cls_run *r, yc_model *ema, const char *path)
{
    yc_weights *w = NULL;
    int st = yc_weights_from_model(ema, (const char *const *)r->train.classes, r->train.nc, &w);
    if (!st)
        st = yc_weights_write_safetensors(w, path, false);
    yc_weights_free(w);
    return st;
}

static int open_run(cls_run *r)
{
    const yc_train_opts *o = r->o;
    char val_dir[2100], train_dir[2100];
    snprintf(train_dir, sizeof train_dir, "%s/train", o->data);
    int st = yc_imagefolder_open(train_dir, &r->train);
    if (!st)
        st = yc_imagefolder_val_dir(o->data, val_dir, sizeof val_dir);
    if (!st)
        st = yc_imagefolder_open(val_dir, &r->val);
    if (st)
        return st;
    if (r->val.nc != r->train.nc)
        return yc_error_status(YC_EFORMAT, "%s has %d classes but %s has %d", train_dir,
                               r->train.nc, val_dir, r->val.nc);
    yc_info("train: %s: %zu images, %d classes\nval: %s: %zu images\n", train_dir, r->train.n,
            r->train.nc, val_dir, r->val.n);

    /* the model: --cfg, else the config the --weights carry, with the dataset's classes */
    yc_weights *w = NULL;
    yc_model_cfg *cfg = NULL;
    if (o->weights && o->weights[0] && (st = yc_weights_read(o->weights, &w)))
        return st;
    st = yc_model_cfg_open(o->cfg, w, r->train.nc, &cfg, NULL, 0);
    if (!st && cfg->task == YC_TASK_CLASSIFY && o->cutoff > 0) {
        /* classify/train.py applies --cutoff only when it converts a detection model */
        st = yc_error_status(YC_EUSAGE, "--cutoff %d: %s is already a classifier (--cutoff cuts a "
                             "detection model, e.g. --cfg yolov5s --cutoff 8)", o->cutoff,
                             cfg->name);
        yc_model_cfg_free(cfg);
    } else if (!st && cfg->task != YC_TASK_CLASSIFY &&
               (st = yc_model_cfg_to_classifier(cfg, r->train.nc,
                                                o->cutoff > 0 ? o->cutoff : CLS_CUTOFF))) {
        yc_model_cfg_free(cfg);
    }
    if (!st && !(st = yc_model_new(&r->m, cfg)) &&
        !(st = yc_device_open(o->device, o->threads, true, &r->be)) &&
        !(st = yc_model_alloc(r->m, r->be)))
        st = yc_model_init_weights(r->m, (uint64_t)o->seed);
    if (!st && w) {
        /* train.py's intersect_dicts: the tensors whose names and shapes match (a checkpoint with
         * other classes keeps its backbone and Conv; the Linear layer starts anew) */
        yc_weights_report rep;
        if (!(st = yc_weights_apply(w, r->m, YC_WEIGHTS_TRANSFER, false, &rep)))
            yc_info("Transferred %d/%d items from %s\n", rep.transferred, rep.total, o->weights);
    }
    yc_weights_free(w);
    if (st)
        return st;
    if ((st = yc_run_dir(o->project, o->name, o->exist_ok, "weights", r->save_dir,
                         sizeof r->save_dir)))
        return st;
    snprintf(r->last, sizeof r->last, "%s/weights/last.safetensors", r->save_dir);
    snprintf(r->best, sizeof r->best, "%s/weights/best.safetensors", r->save_dir);
    snprintf(r->csv, sizeof r->csv, "%s/results.csv", r->save_dir);
    size_t plane = (size_t)3 * o->imgsz * o->imgsz;
    r->images = yc_malloc((size_t)o->batch * plane * sizeof *r->images, "image batch");
    r->labels = yc_malloc((size_t)o->batch * sizeof *r->labels, "labels");
    if (!r->images || !r->labels)
        return YC_ENOMEM;
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .dropout = o->dropout};
    int full = (int)(r->train.n < (size_t)o->batch ? r->train.n : (size_t)o->batch);
    return yc_classify_step_new(&r->step, r->m, full, o->imgsz, o->label_smoothing, &go);
}

static void close_run(cls_run *r)
{
    yc_classify_step_free(r->step);
    yc_classify_step_free(r->last_step);
    yc_model_free(r->m);
    yc_backend_free(r->be);
    yc_imagefolder_free(&r->train);
    yc_imagefolder_free(&r->val);
    yc_cls_reader_free(&r->rd);
    free(r->images);
    free(r->labels);
}

/* One epoch: shuffled batches (the last one smaller), each a step, a clipped optimizer step and
 * an EMA update.  *tloss: the mean batch loss. */
static int train_epoch(cls_run *r, yc_optim *opt, yc_ema *ema, yc_rng *rng, size_t *order,
                       double *tloss)
{
    const yc_train_opts *o = r->o;
    size_t n = r->train.n;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = yc_rng_below(rng, (uint32_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    int st = YC_OK, batches = 0;
    double sum = 0;
    for (size_t first = 0; first < n && !st && !cls_stop; first += (size_t)o->batch) {
        int b = (int)(n - first < (size_t)o->batch ? n - first : (size_t)o->batch);
        yc_classify_step *s = r->step;
        if (b != r->step->batch) {
            if (!r->last_step) {
                yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .dropout = o->dropout};
                if ((st = yc_classify_step_new(&r->last_step, r->m, b, o->imgsz,
                                               o->label_smoothing, &go)))
                    break;
            }
            s = r->last_step;
        }
        double loss = 0;
        yc_graph_set_dropout_seed(s->g, yc_dropout_hash((uint32_t)o->seed, r->steps++));
        if ((st = load_batch(r, order + first, b, rng)) ||
            (st = yc_classify_step_run(s, r->images, r->labels, &loss)) ||
            (st = yc_optim_step(opt, CLS_MAX_NORM)) || (st = yc_model_zero_grad(r->m)) ||
            (st = yc_ema_update(ema, r->m)) || (st = r->be->iface->synchronize(r->be)) ||
            (st = yc_optim_step_done(opt)))
            break;
        sum += loss;
        batches++;
    }
    *tloss = batches ? sum / batches : NAN;
    return st;
}

int yc_classify_train(const yc_train_opts *given, bool *interrupted)
{
    *interrupted = false;
    if (!(given->dropout >= 0 && given->dropout < 1))
        return yc_error_status(YC_EUSAGE, "--dropout %g: the probability must be at least 0 and "
                               "below 1", (double)given->dropout);
    /* without --data: the classification demo (demo.h), written on first use */
    yc_train_opts demo_opts = *given;
    const yc_train_opts *o = given;
    char *demo_root = NULL;
    if (!given->data || !given->data[0]) {
        int st = yc_demo_ensure_task(YC_DEMO_CLASSIFY, &demo_root);
        if (st)
            return yc_error_context(st, "the built-in classification demo (give --data ROOT, a "
                                    "folder with ROOT/train/CLASS/*.jpg and ROOT/val/CLASS/*.jpg, "
                                    "to train on your own)");
        yc_info("data: the built-in classification demo (%s; `yolocl demo-data --task classify "
                "DIR` writes a copy)\n", demo_root);
        demo_opts.data = demo_root;
        o = &demo_opts;
    }
    cls_run r = {.o = o};
    yc_cls_aug_defaults(&r.aug);
    yc_optim *opt = NULL;
    yc_ema *ema = NULL;
    size_t *order = NULL;
    int st = open_run(&r);
    if (!st) {
        /* smart_optimizer(model, name, lr0, momentum=0.9, decay): SGD's momentum, Adam's beta1 */
        st = yc_optim_new(&opt, r.m, o->optimizer, YC_CLS_LR0, 0.9, YC_CLS_DECAY, NULL);
    }
    if (!st)
        st = yc_ema_new(&ema, r.m, 0);
    if (!st && !(order = yc_malloc(r.train.n * sizeof *order, "sample order")))
        st = YC_ENOMEM;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    cls_stop = 0;
    if (!st) {
        for (size_t i = 0; i < r.train.n; i++)
            order[i] = i;
        yc_info("Starting %s training on %s with %d classes for %d epochs...\n\n%10s%12s%12s%12s%12s\n",
                r.m->cfg->name, o->data, r.m->nc, o->epochs, "Epoch", "train_loss", "val_loss",
                "top1_acc", "top5_acc");
    }
    yc_rng rng;
    yc_rng_seed(&rng, (uint64_t)o->seed, 0xC1A5);
    double best = -1.0, t0 = yc_now();
    for (int epoch = 0; epoch < o->epochs && !st && !cls_stop; epoch++) {
        double tloss = 0, lr = opt->lr[0];
        yc_cls_metrics v = {0};
        if (!(st = train_epoch(&r, opt, ema, &rng, order, &tloss)) && !cls_stop)
            st = yc_classify_evaluate(ema->ema, &r.val, o->imgsz, o->batch, o->label_smoothing,
                                      false, &v);
        if (st || cls_stop)
            break;
        double top1 = v.top1, top5 = v.top5, vloss = v.loss;
        /* scheduler.step(): the linear factor of the next epoch */
        double f = yc_lr_factor(epoch + 1, o->epochs, CLS_LRF, o->cos_lr);
        for (int g = 0; g < YC_PG_COUNT; g++)
            opt->lr[g] = opt->initial_lr[g] * f;
        char e[32];
        snprintf(e, sizeof e, "%d/%d", epoch + 1, o->epochs);
        yc_info("%10s%12.3g%12.3g%12.3g%12.3g\n", e, tloss, vloss, top1, top5);
        double row[5] = {tloss, vloss, top1, top5, lr};
        if ((st = results_row(r.csv, epoch, row)))
            break;
        bool final = epoch + 1 == o->epochs;
        if ((!o->nosave || final) && !(st = save_weights(&r, ema->ema, r.last)) && top1 >= best) {
            best = top1;
            st = save_weights(&r, ema->ema, r.best);
        }
    }
    if (!st && cls_stop) {
        *interrupted = true;
        st = save_weights(&r, ema->ema, r.last);
    }
    if (!st)
        yc_info("\nTraining complete (%.3f hours)\nResults saved to %s\n", (yc_now() - t0) / 3600,
                r.save_dir);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(order);
    yc_ema_free(ema);
    yc_optim_free(opt);
    close_run(&r);
    free(demo_root);
    return st;
}
