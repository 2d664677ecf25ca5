/* Training a classifier (classify_train.h). */
#include "classify_train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_aug.h"
#include "classify_step.h"
#include "device.h"
#include "ema.h"
#include "imagefolder.h"
#include "image_read.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "rundir.h"
#include "util.h"
#include "weights.h"
#include "xent.h"

#define CLS_LRF 0.01
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
    /* one batch of normalised images, its labels and the decode scratch */
    float *images;
    int *labels;
    yc_image im, out, tmp;
    /* the training step for the full batch and for a smaller last one; validation graph */
    yc_classify_step *step, *last_step;
    yc_graph *vg;
    int vg_batch;
    float *vlogits;
    char save_dir[2048], last[2300], best[2300], csv[2300];
} cls_run;

/* Reads image `path` for the transforms: decoded whole up to the read limits' exact size, else
 * reduced while decoding to twice the output size on its short side (bounded memory). */
static int read_image(cls_run *r, const char *path)
{
    yc_image_header hdr;
    int st = yc_image_read_header(path, &hdr);
    if (st)
        return st;
    yc_read_limits lim = yc_read_limits_resolve(NULL);
    if ((size_t)hdr.w * hdr.h <= lim.exact_pixels)
        return yc_image_decode(path, &r->im, &r->tmp, NULL);
    int size = 2 * r->o->imgsz, h = hdr.h, w = hdr.w;
    double s = (double)size / (h < w ? h : w);
    return yc_image_read_reduced(path, &hdr, (int)fmax(1, lround(h * s)), (int)fmax(1, lround(w * s)),
                                 YC_INTERP_AREA, &lim, &r->im, &r->tmp, NULL);
}

/* Images idx[0..n) of set `ds` into r->images / r->labels, transformed for training or
 * validation.  An image that cannot be read is reported and replaced by the next one. */
static int load_batch(cls_run *r, const yc_imagefolder *ds, const size_t *idx, int n, bool augment,
                      yc_rng *rng)
{
    int size = r->o->imgsz;
    size_t plane = (size_t)3 * size * size;
    for (int i = 0; i < n; i++) {
        size_t k = idx[i];
        int st = read_image(r, ds->paths[k]);
        for (size_t tries = 1; st && tries < ds->n; tries++) {
            yc_warn("%s: skipped (%s)\n", ds->paths[k], yc_last_error());
            yc_error_clear();
            k = (k + 1) % ds->n;
            st = read_image(r, ds->paths[k]);
        }
        if (st)
            return yc_error_context(st, "no image of %s could be read", ds->paths[0]);
        st = augment ? yc_cls_augment(&r->im, size, &r->aug, rng, &r->out, &r->tmp)
                     : yc_cls_center_crop(&r->im, size, &r->out, &r->tmp);
        if (st)
            return st;
        yc_cls_normalize(&r->out, r->images + (size_t)i * plane);
        r->labels[i] = ds->labels[k];
    }
    return YC_OK;
}

/* classify/val.py over r->val with the EMA model: top-1, top-5 and the mean batch loss. */
static int validate(cls_run *r, yc_model *ema, double *top1, double *top5, double *loss)
{
    const yc_train_opts *o = r->o;
    int B = o->batch;
    size_t *idx = yc_malloc((size_t)B * sizeof *idx, "validation batch");
    if (!idx)
        return YC_ENOMEM;
    int st = YC_OK, c1 = 0, c5 = 0, batches = 0;
    double lsum = 0;
    for (size_t first = 0; first < r->val.n && !st; first += (size_t)B) {
        int n = (int)(r->val.n - first < (size_t)B ? r->val.n - first : (size_t)B);
        if (!r->vg || r->vg_batch != n) {
            yc_graph_free(r->vg);
            r->vg = NULL;
            if ((st = yc_graph_new(&r->vg, ema, n, o->imgsz, o->imgsz, YC_GRAPH_EVAL)) ||
                (st = yc_graph_alloc(r->vg)))
                break;
            r->vg_batch = n;
        }
        for (int i = 0; i < n; i++)
            idx[i] = first + (size_t)i;
        if ((st = load_batch(r, &r->val, idx, n, false, NULL)) ||
            (st = yc_tensor_set_f32(r->be, yc_graph_input(r->vg), r->images)) ||
            (st = yc_graph_forward(r->vg)) ||
            (st = yc_tensor_get_f32(r->be, yc_graph_head(r->vg, 0), r->vlogits)))
            break;
        lsum += yc_xent_loss(r->vlogits, r->labels, n, r->m->nc, o->label_smoothing, NULL);
        c1 += yc_xent_topk_correct(r->vlogits, r->labels, n, r->m->nc, 1);
        c5 += yc_xent_topk_correct(r->vlogits, r->labels, n, r->m->nc, 5);
        batches++;
    }
    free(idx);
    if (st)
        return yc_error_context(st, "validation");
    *top1 = (double)c1 / (double)r->val.n;
    *top5 = (double)c5 / (double)r->val.n;
    *loss = batches ? lsum / batches : 0.0;
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

    char path[1024];
    yc_model_cfg *cfg = NULL;
    if ((st = yc_model_cfg_find(o->cfg, path, sizeof path)) ||
        (st = yc_model_cfg_load(&cfg, path, r->train.nc)))
        return st;
    if (cfg->task == YC_TASK_DETECT && (st = yc_model_cfg_to_classifier(cfg, r->train.nc, 10))) {
        yc_model_cfg_free(cfg);
        return st;
    }
    if ((st = yc_model_new(&r->m, cfg)) ||
        (st = yc_device_open(o->device, o->threads, true, &r->be)) ||
        (st = yc_model_alloc(r->m, r->be)) ||
        (st = yc_model_init_weights(r->m, (uint64_t)o->seed)))
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
    r->vlogits = yc_malloc((size_t)o->batch * r->m->nc * sizeof *r->vlogits, "logits");
    if (!r->images || !r->labels || !r->vlogits)
        return YC_ENOMEM;
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN};
    int full = (int)(r->train.n < (size_t)o->batch ? r->train.n : (size_t)o->batch);
    return yc_classify_step_new(&r->step, r->m, full, o->imgsz, o->label_smoothing, &go);
}

static void close_run(cls_run *r)
{
    yc_classify_step_free(r->step);
    yc_classify_step_free(r->last_step);
    yc_graph_free(r->vg);
    yc_model_free(r->m);
    yc_backend_free(r->be);
    yc_imagefolder_free(&r->train);
    yc_imagefolder_free(&r->val);
    yc_image_free(&r->im);
    yc_image_free(&r->out);
    yc_image_free(&r->tmp);
    free(r->images);
    free(r->labels);
    free(r->vlogits);
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
                yc_graph_options go = {.mode = YC_GRAPH_TRAIN};
                if ((st = yc_classify_step_new(&r->last_step, r->m, b, o->imgsz,
                                               o->label_smoothing, &go)))
                    break;
            }
            s = r->last_step;
        }
        double loss = 0;
        if ((st = load_batch(r, &r->train, order + first, b, true, rng)) ||
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

int yc_classify_train(const yc_train_opts *o, bool *interrupted)
{
    *interrupted = false;
    if (!o->data || !o->data[0])
        return yc_error_status(YC_EUSAGE, "training a classifier needs --data ROOT, a folder "
                               "with ROOT/train/CLASS/*.jpg and ROOT/val/CLASS/*.jpg");
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
        double tloss = 0, top1 = 0, top5 = 0, vloss = 0;
        double lr = opt->lr[0];
        if (!(st = train_epoch(&r, opt, ema, &rng, order, &tloss)) && !cls_stop)
            st = validate(&r, ema->ema, &top1, &top5, &vloss);
        if (st || cls_stop)
            break;
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
    return st;
}
