/* Training a classifier (classify_train.h). */
#include "classify_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_aug.h"
#include "classify_eval.h"
#include "checkpoint.h"
#include "classify_step.h"
#include "demo.h"
#include "device.h"
#include "dist.h"
#include "draw.h"
#include "ema.h"
#include "imagefolder.h"
#include "json.h"
#include "log.h"
#include "memplan.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "rundir.h"
#include "stop.h"
#include "strbuf.h"
#include "train_opts.h"
#include "util.h"
#include "weights.h"

#define CLS_LRF 0.01
/* ClassificationModel's cutoff when --cutoff is not given (classify/train.py: opt.cutoff or 10) */
#define CLS_CUTOFF 10
#define CLS_MAX_NORM 10.0

typedef struct cls_run {
    const yc_train_opts *o;
    /* data parallelism (dist.h): this rank, the ranks, each rank's batch (the global batch
     * / world) and the images of each rank's shard of an epoch (DistributedSampler's
     * ceil(n / world)) */
    int rank, world, rank_batch;
    size_t shard;
    /* the device this rank opens (its entry of a --device list, dist.h) */
    char device[256];
    yc_backend *be;
    yc_model *m;
    yc_imagefolder train, val;
    yc_cls_aug aug;
    /* one batch of normalised images, its labels and the image reader */
    float *images;
    int *labels;
    yc_cls_reader rd;
    /* the training graphs' options: dropout and the memory fit's storage choices */
    yc_graph_options go;
    /* the training step for the full batch and for a smaller last one */
    yc_classify_step *step, *last_step;
    /* training steps run so far: each draws its dropout mask from (seed, steps) */
    uint32_t steps;
    /* the checkpoint a resumed run continues from ("" for a new run) */
    const char *resume_path;
    /* checkpoint metadata: the class names and the run's options as JSON (owned) */
    char *names_json, *opt_json;
    char save_dir[2048], last[2300], best[2300], csv[2300];
} cls_run;

/* splitmix64's finaliser: a 64-bit hash */
static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The random stream of the training image at `pos` of epoch `epoch`'s order: a function of the
 * seed and that place alone, so that an epoch resumed at any batch draws what it drew straight
 * (and a rank of a distributed run what one process draws for the same place). */
static void image_rng(yc_rng *rng, int seed, int epoch, size_t pos)
{
    /* one stream, seeds hashed apart (PCG's neighbouring streams are correlated) */
    yc_rng_seed(rng, mix64(mix64(mix64((uint64_t)seed) ^ (uint64_t)epoch) ^ (uint64_t)pos),
                0xC1A5);
}

/* This rank's training images first..first+n of epoch `epoch` (DistributedSampler's shard of
 * the epoch's order: places rank, rank + world, ... of the order padded to a multiple of world
 * by its first images) into r->images / r->labels, transformed.  An image that cannot be read is
 * reported and replaced by the next one. */
static int load_batch(cls_run *r, const size_t *order, size_t first, int n, int epoch)
{
    const yc_imagefolder *ds = &r->train;
    size_t plane = (size_t)3 * r->o->imgsz * r->o->imgsz;
    for (int i = 0; i < n; i++) {
        size_t place = (size_t)r->rank + (size_t)r->world * (first + (size_t)i);
        size_t k = order[place % ds->n];
        float *dst = r->images + (size_t)i * plane;
        yc_rng rng;
        image_rng(&rng, r->o->seed, epoch, place);
        int st = yc_cls_read(&r->rd, ds->paths[k], r->o->imgsz, &r->aug, &rng, dst);
        for (size_t tries = 1; st && tries < ds->n; tries++) {
            yc_warn("%s: skipped (%s)\n", ds->paths[k], yc_last_error());
            yc_error_clear();
            k = (k + 1) % ds->n;
            st = yc_cls_read(&r->rd, ds->paths[k], r->o->imgsz, &r->aug, &rng, dst);
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

/* A number as PyYAML's safe_dump writes a float: a mantissa without a dot gets ".0" (5e-05 ->
 * 5.0e-05), which YAML 1.1 resolvers need to read the value back as a number. */
static void put_yaml_number(yc_strbuf *b, double v)
{
    char t[48];
    snprintf(t, sizeof t, "%g", v);
    char *e = strchr(t, 'e');
    if (e && !strchr(t, '.')) {
        char tail[24];
        snprintf(tail, sizeof tail, "%s", e);
        snprintf(e, sizeof t - (size_t)(e - t), ".0%s", tail);
    }
    yc_strbuf_puts(b, t);
}

/* One `"key": value` member of the opt.yaml JSON: a string (NULL: null). */
static void put_str(yc_strbuf *b, const char *key, const char *v)
{
    yc_strbuf_puts(b, b->len > 1 ? ", \"" : "\"");
    yc_strbuf_puts(b, key);
    yc_strbuf_puts(b, "\": ");
    char *q = v ? yc_json_quote(v, strlen(v)) : NULL;
    if (v && !q)
        b->failed = true;
    yc_strbuf_puts(b, v ? (q ? q : "") : "null");
    free(q);
}

/* The same for a number (a NaN: null) or a boolean (`text` non-NULL). */
static void put_num(yc_strbuf *b, const char *key, double v, const char *text)
{
    yc_strbuf_puts(b, b->len > 1 ? ", \"" : "\"");
    yc_strbuf_puts(b, key);
    yc_strbuf_puts(b, "\": ");
    if (text)
        yc_strbuf_puts(b, text);
    else if (isnan(v))
        yc_strbuf_puts(b, "null");
    else
        put_yaml_number(b, v);
}

/* classify/train.py's opt.yaml (yaml.safe_dump(vars(opt))) in r->save_dir: its keys in its order
 * for the options this trainer has, with the values the run uses (--model is --weights when
 * given, else --cfg; lr0 and decay are classify/train.py's defaults, which this trainer uses;
 * cutoff and dropout null when not given, as there). */
static int write_opt_yaml(const cls_run *r)
{
    const yc_train_opts *o = r->o;
    yc_strbuf b = {0};
    yc_strbuf_puts(&b, "{");
    put_str(&b, "model", o->weights && o->weights[0] ? o->weights : o->cfg);
    put_str(&b, "data", o->data);
    put_num(&b, "epochs", o->epochs, NULL);
    put_num(&b, "batch_size", o->batch, NULL);
    put_num(&b, "imgsz", o->imgsz, NULL);
    put_num(&b, "nosave", 0, o->nosave ? "true" : "false");
    put_str(&b, "device", o->device ? o->device : "");
    put_num(&b, "workers", o->workers, NULL);
    put_str(&b, "project", o->project ? o->project : "runs/train");
    put_str(&b, "name", o->name ? o->name : "exp");
    put_num(&b, "exist_ok", 0, o->exist_ok ? "true" : "false");
    put_str(&b, "optimizer", yc_optim_kind_name(o->optimizer));
    put_num(&b, "lr0", YC_CLS_LR0, NULL);
    put_num(&b, "decay", YC_CLS_DECAY, NULL);
    put_num(&b, "label_smoothing", o->label_smoothing, NULL);
    put_num(&b, "cutoff", o->cutoff > 0 ? o->cutoff : NAN, NULL);
    put_num(&b, "dropout", o->dropout > 0 ? o->dropout : NAN, NULL);
    put_num(&b, "seed", o->seed, NULL);
    put_str(&b, "save_dir", r->save_dir);
    yc_strbuf_puts(&b, "}");
    char *json = yc_strbuf_finish(&b);
    if (!json)
        return yc_error_status(YC_ENOMEM, "out of memory for opt.yaml");
    char path[2300];
    snprintf(path, sizeof path, "%s/opt.yaml", r->save_dir);
    int st = yc_write_yaml_from_json(path, json);
    free(json);
    return st ? yc_error_context(st, "writing %s", path) : YC_OK;
}

/* imshow_cls of the first YC_CLS_PLOT_MAX of n normalised images (3 x imgsz x imgsz floats,
 * copied: the caller's stay as they are) with their labels and, when pred is not NULL, the
 * predicted classes, to save_dir/`file`. */
static int plot_cls(const cls_run *r, const float *images, const int *labels, const int *pred,
                    int n, const char *file)
{
    int s = r->o->imgsz;
    size_t plane = (size_t)3 * s * s;
    if (n > YC_CLS_PLOT_MAX)
        n = YC_CLS_PLOT_MAX;
    float *px = yc_malloc((size_t)n * plane * sizeof *px, "plotted images");
    if (!px)
        return YC_ENOMEM;
    memcpy(px, images, (size_t)n * plane * sizeof *px);
    yc_cls_denormalize(px, n, s, s);
    yc_plot_image im[YC_CLS_PLOT_MAX];
    for (int i = 0; i < n; i++)
        im[i] = (yc_plot_image){.px = px + (size_t)i * plane, .layout = YC_PIX_F32_CHW, .w = s,
                                .h = s};
    char path[2300];
    snprintf(path, sizeof path, "%s/%s", r->save_dir, file);
    int st = yc_plot_cls_images(path, im, n, labels, pred, (const char *const *)r->train.classes,
                                r->train.nc);
    free(px);
    return st ? yc_error_context(st, "writing %s", path) : YC_OK;
}

/* classify/train.py's test_images.jpg: the first images of the validation loader (which
 * shuffles: here an order drawn from the seed) under CenterCrop, up to YC_CLS_PLOT_MAX and the
 * loader's batch of twice the training batch, titled with their class and the EMA's top class. */
static int plot_test_images(cls_run *r, yc_model *ema)
{
    const yc_train_opts *o = r->o;
    size_t nv = r->val.n;
    int n = YC_CLS_PLOT_MAX;
    if ((size_t)n > nv)
        n = (int)nv;
    if (n > 2 * r->rank_batch)
        n = 2 * r->rank_batch;
    size_t plane = (size_t)3 * o->imgsz * o->imgsz;
    size_t *order = yc_malloc(nv * sizeof *order, "validation order");
    float *images = yc_malloc((size_t)n * plane * sizeof *images, "validation images");
    int *labels = yc_malloc((size_t)n * sizeof *labels, "validation labels");
    int *pred = yc_malloc((size_t)n * sizeof *pred, "predictions");
    int st = order && images && labels && pred ? YC_OK : YC_ENOMEM;
    if (!st) {
        /* the first n places of a shuffle (Fisher-Yates from the front) */
        yc_rng rng;
        yc_rng_seed(&rng, mix64(mix64((uint64_t)o->seed) ^ 0x7E57), 0xC1A7);
        for (size_t i = 0; i < nv; i++)
            order[i] = i;
        for (int i = 0; i < n; i++) {
            size_t j = (size_t)i + yc_rng_below(&rng, (uint32_t)(nv - (size_t)i)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
    }
    for (int i = 0; i < n && !st; i++) {
        st = yc_cls_read(&r->rd, r->val.paths[order[i]], o->imgsz, NULL, NULL,
                         images + (size_t)i * plane);
        labels[i] = r->val.labels[order[i]];
    }
    if (!st)
        st = yc_classify_top1(ema, images, n, o->imgsz, pred);
    if (!st)
        st = plot_cls(r, images, labels, pred, n, "test_images.jpg");
    free(order);
    free(images);
    free(labels);
    free(pred);
    return st;
}

/* The memory fit (memplan.h) of a batch of `full` images: FP16 storage of the activations
 * (--half, or by the policy of yc_half_default when it is needed to fit) and recomputation
 * (--recompute, or when needed) into r->go.  A batch that does not fit even so is refused, naming
 * the batch that fits: micro-batches are detection's only (a classifier's BatchNorm would see
 * the statistics of each part, not of the batch classify/train.py normalises). */
static int fit_memory(cls_run *r, int full)
{
    const yc_train_opts *o = r->o;
    yc_backend *be = r->be;
    int workers = o->workers > 0 ? o->workers : yc_physical_cores();
    yc_run_shape rs = {.m = r->m, .train = true, .batch = full, .val_batch = 2,
                       .imgsz = o->imgsz, .optimizer = o->optimizer, .workers = workers,
                       .recompute = o->recompute};
    size_t avail = be->info.mem_free ? be->info.mem_free : be->info.mem_total;
    size_t limit = o->mem ? o->mem : (size_t)(0.9 * (double)avail);
    /* the ranks of one machine share its memory on the CPU backend */
    if (!o->mem && be->iface->buffer_host_ptr && yc_dist_local_size() > 1)
        limit /= (size_t)yc_dist_local_size();
    /* Classify's dropout has no FP16 form (graph.h): with --dropout the fit stores FP32 unless
     * --half asks (which the graph then refuses, saying so) */
    yc_half_policy half = yc_half_default((yc_half_policy)o->half, be);
    if (o->dropout > 0 && half == YC_HALF_AUTO)
        half = YC_HALF_OFF;
    yc_mem_fit fit;
    int st = yc_memfit(&rs, limit, half, full, full, &fit);
    if (st)
        return yc_error_context(st, "fitting the classifier's run into %s",
                                o->mem ? "--mem" : "the device's free memory");
    if (fit.micro_batch < full) {
        char lim[32];
        return yc_error_status(YC_ENOMEM, "batch %d of %dx%d images does not fit in %s even "
                               "with FP16 storage and recomputation (%s); a classifier is not "
                               "trained in micro-batches: give --batch %d or less", full,
                               o->imgsz, o->imgsz, yc_format_size(limit, lim, sizeof lim),
                               fit.reason, fit.micro_batch);
    }
    r->go = (yc_graph_options){.mode = YC_GRAPH_TRAIN, .dropout = o->dropout, .half = fit.half,
                               .recompute = fit.recompute};
    char peak[32];
    yc_info("memory: %s planned peak (%s)\n", yc_format_size(fit.peak_bytes, peak, sizeof peak),
            fit.reason);
    return YC_OK;
}

/* Under several ranks, a failure of one rank's part (`st`) becomes every rank's, as in
 * train.c: the ranks agree whether any failed, and the others fail naming `what` instead of
 * waiting in the next collective operation. */
static int agree(const cls_run *r, int st, const char *what)
{
    if (r->world == 1)
        return st;
    int failed = st != YC_OK;
    int rc = yc_dist_allreduce_max_int(&failed);
    if (rc)
        return rc;
    if (failed && !st)
        return yc_error_status(YC_ERR, "rank %d of %d: another rank failed %s (see its message)",
                               r->rank, r->world, what);
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

    /* the model: --cfg, else the config the --weights carry, with the dataset's classes; a
     * resumed run's --cfg as it was given, else the config its checkpoint carries (its weights
     * come from the checkpoint, yc_checkpoint_load_train_state) */
    yc_weights *w = NULL;
    yc_model_cfg *cfg = NULL;
    const char *wpath = r->resume_path[0] ? (o->cfg && o->cfg[0] ? NULL : r->resume_path)
                                          : o->weights;
    if (wpath && wpath[0] && (st = yc_weights_read(wpath, &w)))
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
        !(st = yc_device_open(r->device, o->threads, true, &r->be)) &&
        !(st = yc_model_alloc(r->m, r->be)))
        st = yc_model_init_weights(r->m, (uint64_t)o->seed);
    if (!st && w && !r->resume_path[0]) {
        /* train.py's intersect_dicts: the tensors whose names and shapes match (a checkpoint with
         * other classes keeps its backbone and Conv; the Linear layer starts anew) */
        yc_weights_report rep;
        if (!(st = yc_weights_apply(w, r->m, YC_WEIGHTS_TRANSFER, false, &rep)))
            yc_info("Transferred %d/%d items from %s\n", rep.transferred, rep.total, o->weights);
    }
    yc_weights_free(w);
    /* every rank starts from rank 0's weights (DDP broadcasts them) */
    if ((st = agree(r, st, "opening the model")) ||
        (r->world > 1 && (st = yc_dist_bcast_model(r->m))))
        return st;
    /* the run directory: rank 0 makes it, the others learn its name */
    if (!r->resume_path[0]) {
        if (r->rank == 0)
            st = yc_run_dir(o->project, o->name, o->exist_ok, "weights", r->save_dir,
                            sizeof r->save_dir);
        if ((st = agree(r, st, "making the run directory")) ||
            (r->world > 1 && (st = yc_dist_bcast(r->save_dir, sizeof r->save_dir, 0))))
            return st;
    }
    /* the options saved with the checkpoints: whole images (a classifier does not tile) */
    yc_train_opts saved = *o;
    saved.tile = 0;
    if (!(r->names_json = yc_train_names_json(r->train.classes, r->train.nc)) ||
        !(r->opt_json = yc_train_run_json(&saved, r->rank_batch, r->world)))
        return yc_error_status(YC_ENOMEM, "out of memory for the run's options");
    if (!r->resume_path[0] && r->rank == 0 && (st = write_opt_yaml(r)))
        return st;
    snprintf(r->last, sizeof r->last, "%s/weights/last.safetensors", r->save_dir);
    snprintf(r->best, sizeof r->best, "%s/weights/best.safetensors", r->save_dir);
    snprintf(r->csv, sizeof r->csv, "%s/results.csv", r->save_dir);
    size_t plane = (size_t)3 * o->imgsz * o->imgsz;
    r->shard = (r->train.n + (size_t)r->world - 1) / (size_t)r->world;
    r->images = yc_malloc((size_t)r->rank_batch * plane * sizeof *r->images, "image batch");
    r->labels = yc_malloc((size_t)r->rank_batch * sizeof *r->labels, "labels");
    if (!r->images || !r->labels)
        return YC_ENOMEM;
    int full = (int)(r->shard < (size_t)r->rank_batch ? r->shard : (size_t)r->rank_batch);
    if ((st = agree(r, fit_memory(r, full), "fitting its memory")) ||
        (st = yc_classify_step_new(&r->step, r->m, full, o->imgsz, o->label_smoothing, &r->go)))
        return st;
    r->step->grad_scale = 1.0f / (float)r->world;
    return YC_OK;
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
    free(r->names_json);
    free(r->opt_json);
}

/* The training state that a checkpoint carries besides the models and the optimizer. */
typedef struct cls_state {
    /* the last completed epoch and the batch of the next one to continue from (0 at an epoch's
     * end) */
    int epoch, next_batch;
    /* inside an epoch: the running mean of its batch losses over its first next_batch batches */
    double tloss;
    /* the best top-1 accuracy so far (-1: none yet) */
    double best;
} cls_state;

/* Writes checkpoint `path` (checkpoint.h, atomically): the EMA's weights under YOLOv5's names,
 * and unless `final` the raw model, the optimizer and the state to resume from. */
static int save_checkpoint(cls_run *r, const char *path, yc_ema *ema, yc_optim *opt,
                           const cls_state *cs, bool final)
{
    yc_ckpt_meta meta = {0};
    meta.epoch = final ? -1 : cs->epoch;
    meta.next_batch = final ? 0 : cs->next_batch;
    if (!final && cs->next_batch > 0) {
        meta.epoch_loss[0] = cs->tloss;
        meta.epoch_batches = cs->next_batch;
    }
    meta.best_fitness = cs->best;
    meta.updates = ema->updates;
    meta.last_opt_step = -1;
    meta.names_json = r->names_json;
    meta.opt_json = r->opt_json;
    return yc_checkpoint_save(path, ema->ema, final ? NULL : r->m, final ? NULL : opt, &meta);
}

/* Epoch `epoch` from its batch cs->next_batch on (0: the whole epoch; later: a resumed one,
 * cs->tloss the running mean of its earlier batches): the training images in the order of a
 * shuffle drawn from (seed, epoch), in batches (the last one smaller), each a step, a clipped
 * optimizer step and an EMA update.  On return cs->tloss is the running mean of the batch losses
 * (classify/train.py's tloss) and cs->next_batch the batches done; a stop request (Ctrl-C) ends
 * the epoch after the current batch. */
static int train_epoch(cls_run *r, yc_optim *opt, yc_ema *ema, int epoch, size_t *order,
                       cls_state *cs)
{
    const yc_train_opts *o = r->o;
    size_t n = r->train.n;
    yc_rng rng;
    /* the same order on every rank */
    yc_rng_seed(&rng, mix64(mix64((uint64_t)o->seed) + 1 + (uint64_t)epoch), 0xC1A6);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = yc_rng_below(&rng, (uint32_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    /* this rank's shard of the order, in batches of rank_batch (the whole order in one process) */
    size_t shard = r->shard, rb = (size_t)r->rank_batch;
    int st = YC_OK, batch = cs->next_batch;
    double tloss = batch > 0 ? cs->tloss : 0;
    for (size_t first = (size_t)batch * rb; first < shard && !st && !yc_stop_requested();
         first += rb, batch++) {
        int b = (int)(shard - first < rb ? shard - first : rb);
        yc_classify_step *s = r->step;
        if (b != r->step->batch) {
            if (!r->last_step) {
                if ((st = yc_classify_step_new(&r->last_step, r->m, b, o->imgsz,
                                               o->label_smoothing, &r->go)))
                    break;
                r->last_step->grad_scale = 1.0f / (float)r->world;
            }
            s = r->last_step;
        }
        double loss = 0;
        /* each rank its own dropout masks (rank 0's are one process's) */
        uint32_t dseed = (uint32_t)o->seed + (uint32_t)r->rank * 0x9E3779B9u;
        yc_graph_set_dropout_seed(s->g, yc_dropout_hash(dseed, r->steps++));
        /* DDP: the ranks' gradients (each scaled by 1/world) summed before the step */
        /* train_images.jpg: the first batch of the run, as classify/train.py draws it */
        bool plot = epoch == 0 && batch == 0 && r->rank == 0 && !o->noplots;
        if ((st = load_batch(r, order, first, b, epoch)) ||
            (plot && (st = plot_cls(r, r->images, r->labels, NULL, b, "train_images.jpg"))) ||
            (st = yc_classify_step_run(s, r->images, r->labels, &loss)) ||
            (r->world > 1 && (st = yc_dist_allreduce_grads(r->m))) ||
            (st = yc_optim_step(opt, CLS_MAX_NORM)) || (st = yc_model_zero_grad(r->m)) ||
            (st = yc_ema_update(ema, r->m)) || (st = r->be->iface->synchronize(r->be)) ||
            (st = yc_optim_step_done(opt)))
            break;
        /* tloss = (tloss * i + loss.item()) / (i + 1) */
        tloss = (tloss * batch + loss) / (batch + 1);
        cs->tloss = tloss;
        cs->next_batch = batch + 1;
        if (o->progress)
            o->progress(o->progress_ctx, epoch, batch, loss);
        /* a Ctrl-C on any rank stops every rank after the same batch */
        if (r->world > 1) {
            int stop = yc_stop_requested();
            if ((st = yc_dist_allreduce_max_int(&stop)))
                break;
            if (stop)
                yc_stop_request();
        }
    }
    return st;
}

/* --resume: the checkpoint (r->resume_path, set), the options of the run restored from it into
 * *ro (those of where and how it runs as given now, `given`) with their strings in *kept, the
 * run directory, and the state to continue from. */
static int resume_options(cls_run *r, const yc_train_opts *given, char *path, size_t len,
                          yc_train_opts *ro, yc_train_opt_strings *kept, cls_state *cs)
{
    yc_ckpt_meta meta = {0};
    /* every rank continues from the checkpoint rank 0 finds */
    int st = YC_OK, saved_world = 1;
    if (r->rank == 0)
        st = yc_train_find_resume(given->resume, given->project ? given->project : "runs/train",
                                  path, len);
    if ((st = agree(r, st, "finding the checkpoint to resume")) ||
        (r->world > 1 && (st = yc_dist_bcast(path, len, 0))) ||
        (st = yc_checkpoint_read_meta(path, &meta)))
        return st;
    if ((st = yc_train_saved_world(meta.opt_json, &saved_world)) || saved_world != r->world) {
        if (!st)
            st = yc_error_status(YC_EUSAGE, "%s was trained by %d rank%s, this is %d: each "
                                 "epoch's shards and the per-rank batch depend on the number, so "
                                 "the run continues only on %d (%s)", path, saved_world,
                                 saved_world == 1 ? "" : "s", r->world, saved_world,
                                 saved_world > 1 ? "mpirun -np N yolocl train --resume"
                                                 : "yolocl train --resume without mpirun");
        yc_ckpt_meta_free(&meta);
        return st;
    }
    if (meta.epoch == -1 && !meta.optimizer[0])
        st = yc_error_status(YC_EUSAGE, "%s is a finished run's checkpoint: nothing to resume "
                             "(fine-tune from it with --weights)", path);
    else if (!meta.opt_json)
        st = yc_error_status(YC_EFORMAT, "%s holds no run options", path);
    else if (!(st = yc_train_opts_from_json(meta.opt_json, ro, kept))) {
        ro->device = given->device;
        ro->workers = given->workers;
        ro->threads = given->threads;
        ro->mem = given->mem;
        ro->half = given->half;
        ro->recompute = given->recompute;
        ro->progress = given->progress;
        ro->progress_ctx = given->progress_ctx;
        ro->resume = given->resume;
        cs->epoch = meta.epoch;
        cs->next_batch = meta.next_batch;
        cs->tloss = meta.epoch_batches > 0 ? meta.epoch_loss[0] : 0;
        cs->best = meta.best_fitness;
        char *wdir = yc_path_dirname(path);
        char *dir = wdir ? yc_path_dirname(wdir) : NULL;
        if (!dir)
            st = YC_ENOMEM;
        else
            snprintf(r->save_dir, sizeof r->save_dir, "%s", dir);
        free(dir);
        free(wdir);
    }
    yc_ckpt_meta_free(&meta);
    return st;
}

int yc_classify_train(const yc_train_opts *given, bool *interrupted)
{
    *interrupted = false;
    if (!(given->dropout >= 0 && given->dropout < 1))
        return yc_error_status(YC_EUSAGE, "--dropout %g: the probability must be at least 0 and "
                               "below 1", (double)given->dropout);
    cls_run r = {.o = given, .resume_path = "", .rank = yc_dist_rank(), .world = yc_dist_size()};
    cls_state cs = {.epoch = -1, .next_batch = 0, .tloss = 0, .best = -1.0};
    /* --resume: the options the run was started with, from its checkpoint */
    char resume_path[2300] = "";
    yc_train_opts resumed = *given;
    yc_train_opt_strings kept = {0};
    if (given->resume) {
        int st = resume_options(&r, given, resume_path, sizeof resume_path, &resumed, &kept, &cs);
        if (st) {
            yc_train_opt_strings_free(&kept);
            return st;
        }
        r.resume_path = resume_path;
        yc_info("Resuming training from %s from epoch %d%s\n", resume_path, cs.epoch + 1,
                cs.next_batch ? " (inside the epoch)" : "");
    }
    /* without --data: the classification demo (demo.h), written on first use */
    yc_train_opts demo_opts = resumed;
    const yc_train_opts *o = &resumed;
    char *demo_root = NULL;
    if (!resumed.data || !resumed.data[0]) {
        int st = yc_demo_ensure_task(YC_DEMO_CLASSIFY, &demo_root);
        if (st) {
            yc_train_opt_strings_free(&kept);
            return yc_error_context(st, "the built-in classification demo (give --data ROOT, a "
                                    "folder with ROOT/train/CLASS/*.jpg and ROOT/val/CLASS/*.jpg, "
                                    "to train on your own)");
        }
        yc_info("data: the built-in classification demo (%s; `yolocl demo-data --task classify "
                "DIR` writes a copy)\n", demo_root);
        demo_opts.data = demo_root;
        o = &demo_opts;
    }
    r.o = o;
    /* data parallelism: --batch is the global batch, split evenly; each rank takes its share of
     * the machine (dist.h), and progress and results come from rank 0 alone */
    int verbosity = yc_verbosity;
    int st0 = YC_OK;
    r.rank_batch = o->batch;
    snprintf(r.device, sizeof r.device, "%s", o->device ? o->device : "auto");
    if (r.world > 1) {
        int per_node = yc_dist_local_size();
        if (o->batch < 1 || o->batch % r.world != 0)
            st0 = yc_error_status(YC_EUSAGE, "--batch %d is the global batch and must be a "
                                  "positive multiple of the %d ranks", o->batch, r.world);
        else
            st0 = yc_dist_rank_device(o->device ? o->device : "", false, yc_dist_local_rank(),
                                      per_node, r.device, sizeof r.device);
        r.rank_batch = o->batch / r.world;
        if (!st0 && o->threads <= 0) {
            int cores = yc_physical_cores() / per_node;
            demo_opts.threads = resumed.threads = cores > 0 ? cores : 1;
        }
        if (r.rank > 0)
            yc_verbosity = 0;
    }
    if (st0) {
        yc_verbosity = verbosity;
        free(demo_root);
        yc_train_opt_strings_free(&kept);
        return st0;
    }
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
    int start_epoch = cs.epoch + 1;
    if (!st && r.resume_path[0]) {
        /* the raw model, the EMA and the optimizer as they were; the EMA's update count, the
         * learning rate of the epoch and the steps run (the dropout masks' stream) follow */
        yc_ckpt_meta meta = {0};
        if (!(st = yc_checkpoint_read_meta(r.resume_path, &meta)))
            ema->updates = meta.updates;
        yc_ckpt_meta_free(&meta);
        if (!st)
            st = yc_checkpoint_load_train_state(r.resume_path, r.m, ema->ema, opt);
        double f = yc_lr_factor(start_epoch, o->epochs, CLS_LRF, o->cos_lr);
        for (int g = 0; g < YC_PG_COUNT; g++)
            opt->lr[g] = opt->initial_lr[g] * f;
        size_t nb = (r.shard + (size_t)r.rank_batch - 1) / (size_t)r.rank_batch;
        r.steps = (uint32_t)((size_t)start_epoch * nb + (size_t)cs.next_batch);
    }
    yc_stop_signals saved;
    yc_stop_install(&saved, r.world > 1);
    if (!st)
        yc_info("Starting %s training on %s with %d classes for %d epochs...\n\n%10s%12s%12s%12s%12s\n",
                r.m->cfg->name, o->data, r.m->nc, o->epochs, "Epoch", "train_loss", "val_loss",
                "top1_acc", "top5_acc");
    double t0 = yc_now();
    for (int epoch = start_epoch; epoch < o->epochs && !st && !yc_stop_requested(); epoch++) {
        yc_cls_metrics v = {0};
        /* validation, results.csv and the checkpoints on rank 0 alone */
        if (!(st = train_epoch(&r, opt, ema, epoch, order, &cs)) && !yc_stop_requested() && r.rank == 0)
            st = yc_classify_evaluate(ema->ema, &r.val, o->imgsz, o->batch, o->label_smoothing,
                                      false, &v);
        if (st || yc_stop_requested())
            break;
        double tloss = cs.tloss, top1 = v.top1, top5 = v.top5, vloss = v.loss;
        cs.epoch = epoch;
        cs.next_batch = 0;
        /* scheduler.step(): the linear factor of the next epoch */
        double f = yc_lr_factor(epoch + 1, o->epochs, CLS_LRF, o->cos_lr);
        for (int g = 0; g < YC_PG_COUNT; g++)
            opt->lr[g] = opt->initial_lr[g] * f;
        if (r.rank > 0)
            continue;
        char e[32];
        snprintf(e, sizeof e, "%d/%d", epoch + 1, o->epochs);
        yc_info("%10s%12.3g%12.3g%12.3g%12.3g\n", e, tloss, vloss, top1, top5);
        /* lr/0 is logged after scheduler.step(), as classify/train.py logs it */
        double row[5] = {tloss, vloss, top1, top5, opt->lr[0]};
        if ((st = results_row(r.csv, epoch, row)))
            break;
        bool final = epoch + 1 == o->epochs;
        bool better = top1 >= cs.best;
        if (better)
            cs.best = top1;
        /* best first, then last (what --resume continues from): a run stopped between the two
         * repeats the epoch */
        if (better && (!o->nosave || final) && (st = save_weights(&r, ema->ema, r.best)))
            break;
        if (!o->nosave || final)
            st = save_checkpoint(&r, r.last, ema, opt, &cs, false);
    }
    if (!st && yc_stop_requested()) {
        /* the batches done of the interrupted epoch (cs.next_batch, after the last optimizer
         * step: classify/train.py does not accumulate) are continued by --resume */
        *interrupted = true;
        st = r.rank == 0 ? save_checkpoint(&r, r.last, ema, opt, &cs, false) : YC_OK;
        if (!st)
            yc_info("\ninterrupted: saved a resumable checkpoint (epoch %d, batch %d)\n",
                    cs.epoch + 1, cs.next_batch);
    } else if (!st && r.rank == 0) {
        /* strip_optimizer: the final last holds the EMA's weights alone */
        st = save_checkpoint(&r, r.last, ema, opt, &cs, true);
        if (!st && !o->noplots)
            st = plot_test_images(&r, ema->ema);
        if (!st)
            yc_info("\nTraining complete (%.3f hours)\nResults saved to %s\n",
                    (yc_now() - t0) / 3600, r.save_dir);
    }
    yc_stop_restore(&saved);
    free(order);
    yc_ema_free(ema);
    yc_optim_free(opt);
    close_run(&r);
    free(demo_root);
    yc_train_opt_strings_free(&kept);
    yc_verbosity = verbosity;
    return st;
}
