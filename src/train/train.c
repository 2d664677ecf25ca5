/* yolocl train: YOLOv5's train.py (see train.h). */
#include "train.h"
#include "train_opts.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "autoanchor.h"
#include "checkpoint.h"
#include "dataset.h"
#include "demo.h"
#include "device.h"
#include "draw.h"
#include "dist.h"
#include "ema.h"
#include "half.h"
#include "hyp.h"
#include "json.h"
#include "loader.h"
#include "tileset.h"
#include "memplan.h"
#include "log.h"
#include "model.h"
#include "rng.h"
#include "rundir.h"
#include "stop.h"
#include "segment_step.h"
#include "step.h"
#include "util.h"
#include "val.h"
#include "val_full.h"
#include "waitpolicy.h"
#include "weights.h"
#include "yamltree.h"

/* Forward GFLOPs per image at the training size from which OpenMP threads spin between ops on the
 * CPU backend (see choose_wait_policy). */
#define SPIN_MIN_GFLOPS 8.0

#define NBS 64            /* nominal batch size */
#define MAX_GRAD_NORM 10.0 /* clip_grad_norm_ max_norm */
#define STEP_CACHE 2      /* training graphs kept for different batch shapes */

/* snprintf into a path buffer; paths longer than the buffer are an error, not a silent cut. */
static int path_fmt(char *dst, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int path_fmt(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len)
        return yc_error_status(YC_EUSAGE, "path too long: %.200s...", dst);
    return YC_OK;
}

/* ---- the trainer ------------------------------------------------------------------------------- */

typedef struct trainer {
    yc_train_opts o;
    yc_train_opt_strings kept;
    char save_dir[2048], wdir[2200], last[2300], best[2300], csv[2300];
    char *opt_json, *hyp_json, *names_json;
    yc_hyp hyp;
    /* data */
    yc_data_yaml data;
    bool have_data;
    yc_dataset train_ds, val_ds;
    bool have_train_ds, have_val_ds;
    /* tiled training: the tiles of both splits (when o.tile > 0) */
    yc_tileset train_tiles, val_tiles;
    /* the samples as the run sees them: the datasets, or the tiles' views */
    const yc_dataset *train_view, *val_view;
    int nc;
    char **names;
    bool own_names;
    /* model and training state */
    yc_backend *be;
    yc_model *m;
    yc_ema *ema;
    yc_optim *opt;
    bool *frozen;
    yc_loss_params lp;
    int gs;
    /* the activation arena every graph of the run shares, and the storage choices */
    yc_arena arena;
    bool have_arena;
    yc_graph_options go;
    /* loaders and training graphs per batch shape (most recently used first) */
    yc_loader *train_loader, *val_loader;
    yc_step *steps[STEP_CACHE];
    /* a segmentation model (its last layer is Segment): segment/train.py's run, with these
     * steps in place of `steps`, four losses (box, seg, obj, cls) in place of three, and the
     * masks of a micro-batch's targets (no overlap) gathered here */
    bool seg;
    yc_seg_step *seg_steps[STEP_CACHE];
    float *mmasks;
    size_t mmasks_cap;
    /* the losses logged: 3 (box, obj, cls) or, segmenting, 4 (box, seg, obj, cls) */
    int nloss;
    float *input;
    size_t input_cap;
    /* progress */
    int start_epoch, epochs;
    double best_fitness;
    /* global batch index of the last optimizer step (-1: none yet) */
    long last_opt_step;
    /* --resume: the checkpoint continued from ("" for a new run), and the running means of the
     * interrupted epoch's losses over its first resume_batches batches */
    char resume_path[2300];
    double resume_loss[4];
    int resume_batches;
    /* what an interruption saves with the state: the running means of the epoch's losses over
     * its first epoch_batches batches, and whether gradients were added since the last
     * optimizer step */
    double epoch_loss[4];
    int epoch_batches;
    bool epoch_grads;
    /* the resumed checkpoint holds gradients: the resumed epoch starts with them */
    bool resume_grads;
    /* the working directory the run was started in (a resumed run's: from its checkpoint) */
    char cwd[2048];
    /* images per training step (the memory fit's micro-batch; o.batch when the batch fits) and
     * the targets of the micro-batch being run, renumbered from its first image */
    int micro_batch;
    float *mtargets;
    size_t mtargets_cap;
    /* resident memory before the model was built (the plan's baseline) */
    size_t baseline_rss;
    /* data-parallel training (dist.h): this process's rank of `world`, and its share of the
     * global batch o.batch (o.batch when world is 1) */
    int rank, world, rank_batch;
    /* the device spec this rank opens (its local rank's GPU under several ranks) */
    char device[64];
} trainer;

static void trainer_free(trainer *t)
{
    for (int i = 0; i < STEP_CACHE; i++) {
        yc_step_free(t->steps[i]);
        yc_seg_step_free(t->seg_steps[i]);
    }
    free(t->mmasks);
    yc_loader_free(t->train_loader);
    yc_loader_free(t->val_loader);
    if (t->have_arena)
        yc_arena_release(&t->arena);
    yc_optim_free(t->opt);
    yc_ema_free(t->ema);
    /* the gradient buckets' pinned buffers belong to the backend */
    yc_dist_overlap_release();
    yc_model_free(t->m);
    yc_backend_free(t->be);
    yc_tileset_free(&t->train_tiles);
    yc_tileset_free(&t->val_tiles);
    if (t->have_train_ds)
        yc_dataset_free(&t->train_ds);
    if (t->have_val_ds)
        yc_dataset_free(&t->val_ds);
    if (t->own_names) {
        for (int i = 0; i < t->nc; i++)
            free(t->names[i]);
        free(t->names);
    }
    if (t->have_data)
        yc_data_yaml_free(&t->data);
    free(t->frozen);
    free(t->input);
    free(t->mtargets);
    free(t->opt_json);
    free(t->hyp_json);
    free(t->names_json);
    yc_train_opt_strings_free(&t->kept);
}

/* JSON array of the class names. */
char *yc_train_names_json(char *const *names, int nc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputc('[', f);
    for (int i = 0; i < nc; i++) {
        char *q = yc_json_quote(names[i], strlen(names[i]));
        fprintf(f, "%s%s", i ? ", " : "", q ? q : "\"\"");
        free(q);
    }
    fputc(']', f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void json_num(FILE *f, const char *key, double v, bool *first)
{
    fprintf(f, "%s\"%s\": %.17g", *first ? "" : ", ", key, v);
    *first = false;
}

/* The hyperparameters as a JSON object, for checkpoints and hyp.yaml. */
static char *hyp_to_json(const yc_hyp *h)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    bool first = true;
    fputc('{', f);
#define YC_HYP_JSON(name, def) json_num(f, #name, h->name, &first);
    YC_HYP_KEYS(YC_HYP_JSON)
#undef YC_HYP_JSON
    fputc('}', f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Finds the checkpoint to resume: a file, a run directory, or the most recently written
 * PROJECT/<run>/weights/last.safetensors (YOLOv5's get_latest_run); with the default project,
 * runs/train, also runs/train-seg's (segment/train.py's project), as get_latest_run finds the
 * last checkpoint of either. */
int yc_train_find_resume(const char *spec, const char *project, char *out, size_t len)
{
    if (spec[0] && yc_file_exists(spec)) {
        snprintf(out, len, "%s", spec);
        return YC_OK;
    }
    if (spec[0]) {
        snprintf(out, len, "%s/weights/last.safetensors", spec);
        if (yc_file_exists(out))
            return YC_OK;
        return yc_error_status(YC_EIO, "--resume %s: neither a checkpoint nor a run directory "
                               "with weights/last.safetensors", spec);
    }
    char pattern[2200];
    snprintf(pattern, sizeof pattern, "%s/*/weights/last.safetensors", project);
    glob_t g;
    memset(&g, 0, sizeof g);
    int found = glob(pattern, 0, NULL, &g);
    if (strcmp(project, "runs/train") == 0)
        found &= glob("runs/train-seg/*/weights/last.safetensors", found ? 0 : GLOB_APPEND, NULL,
                      &g);
    if (found != 0 || g.gl_pathc == 0) {
        globfree(&g);
        return yc_error_status(YC_EIO, "--resume: no %s to resume", pattern);
    }
    time_t newest = 0;
    out[0] = '\0';
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct stat sb;
        if (stat(g.gl_pathv[i], &sb) == 0 && (out[0] == '\0' || sb.st_mtime > newest)) {
            newest = sb.st_mtime;
            snprintf(out, len, "%s", g.gl_pathv[i]);
        }
    }
    globfree(&g);
    return YC_OK;
}

/* Tiled training: the options from the command line, else the dataset yaml (written back into the
 * run's options, so opt.yaml and a resumed run hold the values used), then the tiles of both
 * splits, reported as the scan reports images. */
static int setup_tiles(trainer *t)
{
    yc_train_opts *o = &t->o;
    if (o->tile < 0)
        o->tile = t->data.tile;
    if (o->tile_overlap < 0)
        o->tile_overlap = t->data.tile_overlap;
    if (o->tile_min_area < 0)
        o->tile_min_area = t->data.tile_min_area;
    yc_tile_options to = {.tile = o->tile, .overlap = o->tile_overlap,
                          .min_area = o->tile_min_area};
    int st = yc_tile_options_check(&to, "tiles");
    if (!st && o->val_full && o->tile == 0)
        st = yc_error_status(YC_EUSAGE, "--val-full validates tiled runs per whole image: it "
                             "needs --tile SIZE or tile: in %s", o->data);
    if (st || o->tile == 0)
        return st;
    if (o->rect) {
        yc_warn("--rect does not apply to tiles (square windows): rect disabled");
        o->rect = false;
    }
    if (o->image_weights) {
        yc_warn("--image-weights does not apply to tiles: image weights disabled");
        o->image_weights = false;
    }
    if ((st = yc_tileset_make(&t->train_ds, &to, &t->train_tiles)))
        return yc_error_context(st, "train");
    yc_tileset_report(&t->train_tiles, "train: ");
    t->train_view = &t->train_tiles.view;
    if (o->tiles_per_epoch > 0 && (size_t)o->tiles_per_epoch < t->train_tiles.n)
        yc_info("train: %d of the %zu tiles per epoch, drawn at random each epoch\n",
                o->tiles_per_epoch, t->train_tiles.n);
    if (t->val_ds.n > 0 && o->val_full) {
        yc_info("val: whole images, detected by slices of %d px (overlap %g), merged by NMS "
                "(intersection over the smaller box 0.5)\n", o->tile, o->tile_overlap);
    } else if (t->val_ds.n > 0) {
        if ((st = yc_tileset_make(&t->val_ds, &to, &t->val_tiles)))
            return yc_error_context(st, "val");
        yc_tileset_report(&t->val_tiles, "val: ");
        t->val_view = &t->val_tiles.view;
    }
    return YC_OK;
}

/* ---- setup ------------------------------------------------------------------------------------ */

/* The task of the run's model, from --cfg or else the --weights' config, without a device
 * (YC_TASK_DETECT when neither can be read: setup_model reports why). */
static yc_task run_task(const yc_train_opts *o)
{
    yc_weights *w = NULL;
    yc_model_cfg *cfg = NULL;
    bool from_weights = !(o->cfg && o->cfg[0]) && o->weights && o->weights[0];
    int st = from_weights ? yc_weights_read(o->weights, &w) : YC_OK;
    if (!st)
        st = yc_model_cfg_open(o->cfg, w, 0, &cfg, NULL, 0);
    yc_weights_free(w);
    yc_task task = st ? YC_TASK_DETECT : cfg->task;
    if (st)
        yc_error_clear();
    yc_model_cfg_free(cfg);
    return task;
}

static int setup_data(trainer *t)
{
    const yc_train_opts *o = &t->o;
    char demo_yaml[2048];
    const char *data = o->data;
    int st;
    if ((!data || !data[0]) && run_task(o) == YC_TASK_SEGMENT) {
        /* a segmentation model: the demo's polygon labels (demo.h) */
        char *yaml = NULL;
        if ((st = yc_demo_ensure_task(YC_DEMO_SEGMENT, &yaml)))
            return st;
        snprintf(demo_yaml, sizeof demo_yaml, "%s", yaml);
        free(yaml);
        yc_info("data: the built-in demo segmentation dataset (%s; `yolocl demo-data --task "
                "segment DIR` writes a copy)\n", demo_yaml);
        data = demo_yaml;
        free(t->kept.data);
        if (!(t->kept.data = yc_strdup(demo_yaml, "options")))
            return YC_ENOMEM;
        t->o.data = t->kept.data;
    } else if (!data || !data[0]) {
        char *dir = yc_demo_default_dir();
        if (!dir)
            return YC_ENOMEM;
        if ((st = yc_demo_ensure(dir))) {
            free(dir);
            return st;
        }
        snprintf(demo_yaml, sizeof demo_yaml, "%s/%s", dir, YC_DEMO_YAML);
        yc_info("data: the built-in demo dataset (%s; `yolocl demo-data DIR` writes a copy)\n", dir);
        free(dir);
        data = demo_yaml;
        free(t->kept.data);
        if (!(t->kept.data = yc_strdup(demo_yaml, "options")))
            return YC_ENOMEM;
        t->o.data = t->kept.data;
    }
    if ((st = yc_data_yaml_load(data, &t->data)))
        return st;
    t->have_data = true;
    t->nc = t->data.nc;
    t->names = t->data.names;
    if (o->single_cls) {
        /* names = ['item'] unless the dataset already has exactly one name */
        t->nc = 1;
        if (t->data.nc != 1) {
            t->names = yc_calloc(1, sizeof *t->names, "names");
            if (!t->names || !(t->names[0] = yc_strdup("item", "names")))
                return YC_ENOMEM;
            t->own_names = true;
        }
    }
    yc_dataset_options dopt = {.nc = t->nc, .single_cls = o->single_cls, .prefix = "train: "};
    if ((st = yc_dataset_load_split(&t->data, YC_SPLIT_TRAIN, &dopt, &t->train_ds)))
        return st;
    t->have_train_ds = true;
    if (t->train_ds.n == 0)
        return yc_error_status(YC_EFORMAT, "%s: no usable training images", data);
    dopt.prefix = "val: ";
    if ((st = yc_dataset_load_split(&t->data, YC_SPLIT_VAL, &dopt, &t->val_ds)))
        return st;
    t->have_val_ds = true;
    t->train_view = &t->train_ds;
    t->val_view = &t->val_ds;
    if ((st = setup_tiles(t)))
        return st;
    if (!(t->names_json = yc_train_names_json(t->names, t->nc)))
        return YC_ENOMEM;
    return YC_OK;
}

/* What segment/train.py cannot do, or yolocl does not do for segmentation models: refused before
 * anything is read or allocated. */
static int seg_options_check(trainer *t)
{
    const yc_train_opts *o = &t->o;
    if (o->quad)
        return yc_error_status(YC_EUNSUPPORTED, "--quad is not supported for segmentation models "
                               "(segment/train.py's loader has no quad collate for masks): train "
                               "without --quad");
    if (o->tile > 0 || o->val_full)
        return yc_error_status(YC_EUNSUPPORTED, "tiled training (--tile, --val-full) is not "
                               "supported for segmentation models: train on whole images "
                               "(--tile 0)");
    if (o->mask_ratio < 1)
        return yc_error_status(YC_EUSAGE, "--mask-ratio %d: must be at least 1", o->mask_ratio);
    return YC_OK;
}

/* The model: config from --cfg or the weights; nc from the dataset; YOLOv5's init; the weights'
 * matching tensors transferred (intersect_dicts). */
static int setup_model(trainer *t, bool resuming)
{
    const yc_train_opts *o = &t->o;
    yc_weights *w = NULL;
    yc_model_cfg *cfg = NULL;
    int st = YC_OK;
    bool have_weights = !resuming && o->weights && o->weights[0];
    if (have_weights && (st = yc_weights_read(o->weights, &w)))
        return st;
    if (resuming) {
        /* the checkpoint's own config: the run may have taken its model from --weights alone,
         * and the files it was started from may be gone */
        st = yc_checkpoint_model_cfg(t->resume_path, t->nc, &cfg);
    } else {
        st = yc_model_cfg_open(o->cfg, w, t->nc, &cfg, NULL, 0);
    }
    if (!st)
        st = yc_model_new(&t->m, cfg);
    /* detection and segmentation models; a classifier trains through classify_train.h */
    if (!st && t->m->cfg->task != YC_TASK_SEGMENT)
        st = yc_model_require_detection(t->m, "yolocl train");
    if (!st && t->m->cfg->task == YC_TASK_SEGMENT) {
        t->seg = true;
        st = seg_options_check(t);
    }
    t->nloss = t->seg ? 4 : 3;
    if (!st)
        st = yc_device_open(t->device[0] ? t->device : o->device, o->threads, t->rank == 0,
                            &t->be);
    /* what the process holds before the run's own memory: the libraries (with the OpenCL
     * drivers the device probe loaded: PoCL alone touches ~55 MiB of LLVM), the dataset index */
    t->baseline_rss = yc_current_rss();
    if (!st)
        st = yc_model_alloc(t->m, t->be);
    if (!st)
        st = yc_model_init_weights(t->m, (uint64_t)o->seed);
    if (!st && w) {
        bool exclude_anchors = (o->cfg && o->cfg[0]) || t->hyp.anchors > 0;
        yc_weights_report rep;
        st = yc_weights_apply(w, t->m, YC_WEIGHTS_TRANSFER, exclude_anchors, &rep);
        if (!st)
            yc_info("Transferred %d/%d items from %s\n", rep.transferred, rep.total, o->weights);
    }
    yc_weights_free(w);
    if (st)
        return st;
    /* --freeze: layers whose parameters get no gradient step */
    t->frozen = yc_calloc((size_t)t->m->cfg->nlayers, sizeof *t->frozen, "freeze");
    if (!t->frozen)
        return YC_ENOMEM;
    if (o->nfreeze == 1) {
        for (int i = 0; i < o->freeze[0] && i < t->m->cfg->nlayers; i++)
            t->frozen[i] = true;
    } else {
        for (int i = 0; i < o->nfreeze; i++)
            if (o->freeze[i] >= 0 && o->freeze[i] < t->m->cfg->nlayers)
                t->frozen[o->freeze[i]] = true;
    }
    for (int i = 0; i < t->m->cfg->nlayers; i++)
        if (t->frozen[i])
            yc_info("freezing model.%d.\n", i);
    /* gs = max(max stride, 32); imgsz rounded up to a multiple, at least 2 gs */
    float smax = 32;
    for (int l = 0; l < t->m->nl; l++)
        smax = t->m->stride[l] > smax ? t->m->stride[l] : smax;
    t->gs = (int)smax;
    int img = (t->o.imgsz + t->gs - 1) / t->gs * t->gs;
    if (img < 2 * t->gs)
        img = 2 * t->gs;
    if (img != t->o.imgsz)
        yc_warn("--img-size %d must be multiple of max stride %d, updating to %d", t->o.imgsz,
                t->gs, img);
    t->o.imgsz = img;
    return YC_OK;
}

/* Forward GFLOPs per image of the run's model at its image size with the dataset's classes (the
 * model config's without --data), as setup_model will build it, without a device; -1 when the
 * dataset yaml or the model cannot be read (setup_data and setup_model report why later). */
static double run_gflops(const yc_train_opts *o)
{
    int nc = 0;
    if (o->data && o->data[0]) {
        yc_data_yaml y;
        if (yc_data_yaml_load(o->data, &y))
            return -1.0;
        nc = o->single_cls ? 1 : y.nc;
        yc_data_yaml_free(&y);
    }
    yc_weights *w = NULL;
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    bool from_weights = !(o->cfg && o->cfg[0]) && o->weights && o->weights[0];
    int st = from_weights ? yc_weights_read(o->weights, &w) : YC_OK;
    if (!st)
        st = yc_model_cfg_open(o->cfg, w, nc, &cfg, NULL, 0);
    yc_weights_free(w);
    if (st || yc_model_new(&m, cfg))
        return -1.0;
    double gflops = yc_model_gflops(m, o->imgsz);
    yc_model_free(m);
    return gflops;
}

/* The OpenMP wait policy of a CPU training (waitpolicy.h): with PASSIVE, every op's parallel
 * region first wakes the sleeping threads, which costs a YOLOv5s step at 640 about 15% on a 2-core
 * virtual machine; with ACTIVE, threads spinning between ops take the cores the image loaders
 * need, which costs more than that when the model is cheap per image (yolov5s at 160: 10%).  So a
 * run spins when a forward pass costs at least SPIN_MIN_GFLOPS per image (80 classes: yolov5n
 * from 864 px, yolov5s from 448, yolov5m from 288) and the user chose no policy.  The device is
 * resolved first, so that a GPU run reads no model file for this.  Re-executes yolocl, so it runs
 * before anything is printed or written; errors are left for setup_data and setup_model to
 * report. */
static void choose_wait_policy(const yc_train_opts *o)
{
    bool cpu = false;
    /* not under MPI: an initialised MPI process must not re-execute itself */
    if (!yc_dist_active() && yc_wait_policy_adjustable() &&
        yc_device_is_cpu(o->device, &cpu) == YC_OK && cpu && run_gflops(o) >= SPIN_MIN_GFLOPS)
        yc_wait_policy_spin();
    yc_error_clear();
}

/* model.half().float(): YOLOv5 rounds every parameter and buffer to FP16 once before training. */
static int round_to_half(yc_model *m)
{
    size_t n = m->param_elems > m->state_elems ? m->param_elems : m->state_elems;
    float *buf = yc_malloc((n + 1) * sizeof *buf, "rounding");
    if (!buf)
        return YC_ENOMEM;
    yc_backend *be = m->be;
    int st = be->iface->buffer_read(be, m->param_buf, 0, buf, m->param_elems * sizeof *buf);
    if (!st) {
        yc_round_to_half(buf, m->param_elems);
        st = be->iface->buffer_write(be, m->param_buf, 0, buf, m->param_elems * sizeof *buf);
    }
    if (!st && m->state_elems)
        st = be->iface->buffer_read(be, m->state_buf, 0, buf, m->state_elems * sizeof *buf);
    if (!st && m->state_elems) {
        yc_round_to_half(buf, m->state_elems);
        st = be->iface->buffer_write(be, m->state_buf, 0, buf, m->state_elems * sizeof *buf);
    }
    yc_round_to_half(m->anchors, (size_t)m->nl * m->na * 2);
    free(buf);
    return st;
}

/* ---- batches ---------------------------------------------------------------------------------- */

/* Moves slot i of the step caches (both: a trainer fills only its task's) to the front, the
 * slots before it one back. */
static void steps_to_front(trainer *t, int i)
{
    yc_step *s = t->steps[i];
    yc_seg_step *g = t->seg_steps[i];
    for (int j = i; j > 0; j--) {
        t->steps[j] = t->steps[j - 1];
        t->seg_steps[j] = t->seg_steps[j - 1];
    }
    t->steps[0] = s;
    t->seg_steps[0] = g;
}

/* The step caches for batch shape b x h x w, most recent first: true when slot 0 now holds the
 * step for that shape; otherwise the least recent step is freed and slot 0 is empty for a new
 * one. */
static bool steps_pick(trainer *t, int b, int h, int w)
{
    for (int i = 0; i < STEP_CACHE; i++) {
        const yc_step *s = t->steps[i];
        const yc_seg_step *g = t->seg_steps[i];
        if ((s && s->batch == b && s->h == h && s->w == w) ||
            (g && g->batch == b && g->h == h && g->w == w)) {
            steps_to_front(t, i);
            return true;
        }
    }
    yc_step_free(t->steps[STEP_CACHE - 1]);
    yc_seg_step_free(t->seg_steps[STEP_CACHE - 1]);
    t->steps[STEP_CACHE - 1] = NULL;
    t->seg_steps[STEP_CACHE - 1] = NULL;
    steps_to_front(t, STEP_CACHE - 1);
    return false;
}

/* The training graph for this batch shape (cached for the most recent shapes). */
static int step_for(trainer *t, int b, int h, int w, yc_step **out)
{
    int st = YC_OK;
    if (!steps_pick(t, b, h, w))
        st = yc_step_new_in(&t->steps[0], t->m, b, h, w, &t->lp, &t->go, &t->arena);
    *out = t->steps[0];
    return st;
}

/* The segmentation step for this batch shape (cached as step_for's). */
static int seg_step_for(trainer *t, int b, int h, int w, yc_seg_step **out)
{
    int st = YC_OK;
    if (!steps_pick(t, b, h, w))
        st = yc_seg_step_new_in(&t->seg_steps[0], t->m, b, h, w, &t->lp, &t->go, &t->arena);
    *out = t->seg_steps[0];
    return st;
}

/* *p grown to hold n floats (*cap: what it holds, updated); the contents are kept. */
static int grow_floats(float **p, size_t *cap, size_t n, const char *what)
{
    if (n <= *cap)
        return YC_OK;
    float *q = yc_realloc(*p, n * sizeof *q, what);
    if (!q)
        return YC_ENOMEM;
    *p = q;
    *cap = n;
    return YC_OK;
}

/* Multi-scale: uint8 CHW -> float / 255, then the bilinear resize to h x w. */
static int batch_input(trainer *t, const yc_batch *b, int h, int w)
{
    size_t n = (size_t)b->n * 3 * (size_t)h * (size_t)w;
    size_t src_n = (size_t)b->n * 3 * (size_t)b->h * (size_t)b->w;
    size_t need = n + src_n;
    int st = grow_floats(&t->input, &t->input_cap, need, "input batch");
    if (st)
        return st;
    float *src = (h == b->h && w == b->w) ? t->input : t->input + n;
    for (size_t i = 0; i < src_n; i++)
        src[i] = (float)b->images[i] / 255.0f;
    if (src != t->input)
        yc_resize_bilinear_f32(src, b->n * 3, b->h, b->w, t->input, h, w);
    return YC_OK;
}

/* ---- validation and checkpoints -------------------------------------------------------------- */

typedef struct epoch_results {
    /* detection: P, R, mAP@0.5, mAP@0.5:0.95, val box, obj, cls losses (7 values);
     * segmentation: the box P, R, mAP@0.5, mAP@0.5:0.95, the mask ones, val box, seg, obj, cls
     * losses (12 values, segment/val.py's order) */
    double r[12];
    /* the fitness best.safetensors is chosen by: detection's 0.1 mAP@0.5 + 0.9 mAP@0.5:0.95,
     * segmentation's the same of boxes plus masks (utils/segment/metrics.py) */
    double fitness;
} epoch_results;

static int validate(trainer *t, yc_model *model, bool final, epoch_results *res, double *maps)
{
    yc_val_options vo;
    yc_val_options_default(&vo);
    vo.single_cls = t->o.single_cls;
    vo.training = !final;
    vo.verbose = final;
    vo.print = true;
    vo.imgsz = t->o.imgsz;
    vo.batch = t->micro_batch * 2;
    vo.plots = final && !t->o.noplots;
    vo.save_dir = vo.plots ? t->save_dir : NULL;
    vo.arena = &t->arena;
    vo.mask_overlap = !t->o.no_overlap;
    if (final && t->nc == 80 && strcmp(t->names[0], "person") == 0)
        vo.iou_thres = 0.65; /* YOLOv5 re-validates COCO's best weights at 0.65 */
    yc_val_result vr;
    int st;
    if (t->o.val_full) {
        yc_slice_options so;
        yc_slice_options_default(&so);
        so.tile = t->o.tile;
        so.overlap = t->o.tile_overlap;
        so.merge = yc_merge_params_nms_ios();
        vo.batch = 1;
        st = yc_validate_full(model, t->gs, &t->val_ds, (const char *const *)t->names, &vo, &so,
                              &vr);
    } else {
        st = yc_validate(model, t->val_loader, t->val_view, (const char *const *)t->names, &vo,
                         &t->lp, &vr);
    }
    if (st)
        return yc_error_context(st, "validation");
    if (t->seg && !vr.seg) {
        yc_val_result_free(&vr);
        return yc_error_status(YC_ERR, "validation: the segmentation model was validated as a "
                               "detection model (no mask metrics)");
    }
    memset(res, 0, sizeof *res);
    res->r[0] = vr.metrics.mp;
    res->r[1] = vr.metrics.mr;
    res->r[2] = vr.metrics.map50;
    res->r[3] = vr.metrics.map;
    int k = 4;
    if (t->seg) {
        res->r[k++] = vr.mask_metrics.mp;
        res->r[k++] = vr.mask_metrics.mr;
        res->r[k++] = vr.mask_metrics.map50;
        res->r[k++] = vr.mask_metrics.map;
    }
    res->r[k++] = vr.loss[0];
    if (t->seg)
        res->r[k++] = vr.loss_seg;
    res->r[k++] = vr.loss[1];
    res->r[k++] = vr.loss[2];
    res->fitness = t->seg ? yc_val_seg_fitness(&vr) : 0.1 * res->r[2] + 0.9 * res->r[3];
    /* per-class mAPs for --image-weights: segment/val.py returns the sum of the box and the mask
     * ones */
    for (int c = 0; maps && c < t->nc; c++) {
        maps[c] = vr.metrics.maps ? vr.metrics.maps[c] : vr.metrics.map;
        if (t->seg)
            maps[c] += vr.mask_metrics.maps ? vr.mask_metrics.maps[c] : vr.mask_metrics.map;
    }
    yc_val_result_free(&vr);
    return YC_OK;
}

/* Saves a checkpoint: `epoch` is the last completed epoch and `next_batch` the batch of the
 * following epoch to continue from (0 at epoch ends; later after an interruption). */
static int save_checkpoint(trainer *t, const char *path, int epoch, int next_batch, bool final)
{
    yc_ckpt_meta meta = {0};
    meta.epoch = final ? -1 : epoch;
    meta.next_batch = final ? 0 : next_batch;
    meta.cwd = t->cwd[0] ? t->cwd : NULL;
    if (!final && next_batch > 0) {
        memcpy(meta.epoch_loss, t->epoch_loss, sizeof meta.epoch_loss);
        meta.epoch_nloss = t->nloss;
        meta.epoch_batches = t->epoch_batches;
        meta.grads = t->epoch_grads;
    }
    meta.best_fitness = t->best_fitness;
    meta.last_opt_step = t->last_opt_step;
    meta.updates = t->ema->updates;
    meta.names_json = t->names_json;
    meta.opt_json = t->opt_json;
    meta.hyp_json = t->hyp_json;
    return yc_checkpoint_save(path, t->ema->ema, final ? NULL : t->m, final ? NULL : t->opt,
                              &meta);
}

/* Turns the error `st` that stops the run into a message saying so, what is left on disk (the
 * last good checkpoint: the run's last.safetensors, never overwritten by a failed or non-finite
 * save) and what to do: `fix`, then --resume when `resumable` (the failure came from outside the
 * training: disk, memory, files) and there is a checkpoint, else a new start. */
static int training_stopped(trainer *t, int st, const char *fix, bool resumable)
{
    char why[1200];
    snprintf(why, sizeof why, "%s", yc_last_error());
    yc_ckpt_meta meta;
    char have[2600], then[2600];
    bool saved = yc_file_exists(t->last) && yc_checkpoint_read_meta(t->last, &meta) == YC_OK;
    if (saved) {
        snprintf(have, sizeof have, "the last good checkpoint is %s (epoch %d)", t->last,
                 meta.epoch);
        yc_ckpt_meta_free(&meta);
    } else {
        snprintf(have, sizeof have, "no checkpoint was saved yet");
    }
    if (saved && resumable)
        snprintf(then, sizeof then, "continue with: yolocl train --resume %s", t->save_dir);
    else if (saved)
        snprintf(then, sizeof then, "start again, or fine-tune from that checkpoint with "
                 "--weights");
    else
        snprintf(then, sizeof then, "start the training again");
    return yc_error_status(st, "%s: training stopped; %s: %s, then %s", why, have, fix, then);
}

/* What to fix after the loss or the gradients stopped being finite. */
#define YC_FIX_NAN "lower lr0 (or warmup_bias_lr) in the hyp file or check the labels"
/* ... and after a file could not be written. */
#define YC_FIX_DISK "free disk space (or fix the error above)"

/* Saves the checkpoints of a completed epoch: best and the --save-period one first,
 * last.safetensors last, so that last (what --resume continues from) is only replaced once the
 * others are on disk; a run killed before that repeats the epoch.  A failure stops the run, the previous
 * checkpoints left intact. */
static int save_epoch(trainer *t, int epoch, double fi)
{
    int st = YC_OK;
    if (t->best_fitness == fi)
        st = save_checkpoint(t, t->best, epoch, 0, false);
    if (!st && t->o.save_period > 0 && epoch % t->o.save_period == 0) {
        char path[2400];
        if (!(st = path_fmt(path, sizeof path, "%s/epoch%d.safetensors", t->wdir, epoch)))
            st = save_checkpoint(t, path, epoch, 0, false);
    }
    if (!st)
        st = save_checkpoint(t, t->last, epoch, 0, false);
    if (!st)
        return YC_OK;
    if (st == YC_EIO)
        return training_stopped(t, st, YC_FIX_DISK, true);
    if (st == YC_ENOMEM)
        return training_stopped(t, st, "free memory", true);
    return training_stopped(t, st, YC_FIX_NAN, false);
}

/* train_batch{ni}.jpg: the augmented batch with its labels (and a segmentation batch's
 * masks). */
static int plot_batch(trainer *t, const yc_batch *b, long ni)
{
    int n = b->n < 16 ? b->n : 16;
    yc_plot_image im[16];
    yc_plot_box *boxes = yc_malloc((size_t)(b->nt ? b->nt : 1) * sizeof *boxes, "plot");
    if (!boxes)
        return YC_ENOMEM;
    size_t plane = 3 * (size_t)b->h * (size_t)b->w;
    for (int i = 0; i < n; i++) {
        im[i].px = b->images + (size_t)i * plane;
        im[i].layout = YC_PIX_U8_CHW;
        im[i].w = b->w;
        im[i].h = b->h;
        im[i].path = t->train_view->samples[b->sample[i]].image;
    }
    int nbox = 0;
    for (int j = 0; j < b->nt; j++) {
        const float *r = b->targets + (size_t)j * 6;
        if ((int)r[0] >= n)
            continue;
        boxes[nbox].image = (int)r[0];
        boxes[nbox].cls = (int)r[1];
        boxes[nbox].cx = r[2];
        boxes[nbox].cy = r[3];
        boxes[nbox].w = r[4];
        boxes[nbox].h = r[5];
        boxes[nbox].conf = -1;
        nbox++;
    }
    char path[2400];
    snprintf(path, sizeof path, "%s/train_batch%ld.jpg", t->save_dir, ni);
    /* segment/train.py: plot_images_and_masks, the batch's masks over its labels */
    int st = t->seg ? yc_plot_batch_seg_labels(path, b, t->train_view, !t->o.no_overlap, false,
                                               (const char *const *)t->names, t->nc)
                    : yc_plot_batch(path, im, n, boxes, nbox, (const char *const *)t->names,
                                    t->nc);
    free(boxes);
    return st;
}

/* ---- image weights (YOLOv5.md 3.6) ------------------------------------------------------------ */

static int image_weights_indices(trainer *t, const double *maps, int epoch, int *indices)
{
    const yc_dataset *ds = &t->train_ds;
    int nc = t->nc, n = (int)ds->n;
    double *cw = yc_calloc((size_t)nc, sizeof *cw, "image weights");
    double *iw = yc_calloc((size_t)n + 1, sizeof *iw, "image weights");
    if (!cw || !iw) {
        free(cw);
        free(iw);
        return YC_ENOMEM;
    }
    double total = 0;
    for (int c = 0; c < nc; c++) {
        double count = (double)ds->class_counts[c];
        cw[c] = 1.0 / (count > 0 ? count : 1.0);
        total += cw[c];
    }
    for (int c = 0; c < nc; c++)
        cw[c] = cw[c] / total * nc * (1 - maps[c]) * (1 - maps[c]) / nc;
    for (int i = 0; i < n; i++) {
        const yc_box *b = yc_dataset_boxes(ds, (size_t)i);
        for (uint32_t j = 0; j < ds->samples[i].n_boxes; j++)
            iw[i + 1] += cw[b[j].cls];
        iw[i + 1] += iw[i];
    }
    yc_rng rng;
    yc_rng_seed(&rng, (uint64_t)t->o.seed, 0x1AC3E000ull + (uint64_t)epoch);
    for (int k = 0; k < n; k++) {
        double r = yc_rng_uniform(&rng) * iw[n];
        int lo = 0, hi = n - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (iw[mid + 1] > r)
                hi = mid;
            else
                lo = mid + 1;
        }
        indices[k] = lo;
    }
    free(cw);
    free(iw);
    return YC_OK;
}

/* ---- progress -------------------------------------------------------------------------------- */

/* train.py's header; segment/train.py's has seg_loss after box_loss. */
static void print_header(bool seg)
{
    if (seg)
        yc_info("\n%11s%11s%11s%11s%11s%11s%11s%11s\n", "Epoch", "mem", "box_loss", "seg_loss",
                "obj_loss", "cls_loss", "Instances", "Size");
    else
        yc_info("\n%11s%11s%11s%11s%11s%11s%11s\n", "Epoch", "mem", "box_loss", "obj_loss",
                "cls_loss", "Instances", "Size");
}

/* The progress line: the nloss running means (3, or 4 segmenting) as '%11.4g' each. */
static void print_progress(int epoch, int epochs, const double *mloss, int nloss, int instances,
                           int size, int i, int nb, double seconds, int images, bool tty,
                           bool done)
{
    char ep[32], mem[32];
    snprintf(ep, sizeof ep, "%d/%d", epoch, epochs - 1);
    snprintf(mem, sizeof mem, "%.3gG", (double)yc_peak_rss() / 1e9);
    double rate = seconds > 0 ? images / seconds : 0;
    double eta = rate > 0 ? (double)(nb - i - 1) * (images / (double)(i + 1)) / rate : 0;
    if (yc_verbosity < 1)
        return;
    printf("%s%11s%11s", tty ? "\r" : "", ep, mem);
    for (int k = 0; k < nloss; k++)
        printf("%11.4g", mloss[k]);
    printf("%11d%11d: %3d%% %d/%d, %.2f img/s, %s %.0fs%s", instances, size,
           (i + 1) * 100 / nb, i + 1, nb, rate, done ? "elapsed" : "ETA", done ? seconds : eta,
           tty && !done ? "" : "\n");
    fflush(stdout);
}

/* ---- memory: plan the run, fit it into the limit, reserve the arena ---------------------------- */

/* The costliest whole-image read of ds (loader.h) into rs when it costs more than what rs has. */
static void costliest_read(const yc_dataset *ds, int imgsz, const yc_read_limits *lim,
                           yc_run_shape *rs)
{
    long which;
    size_t b = yc_loader_read_bytes(ds, imgsz, lim, &which);
    if (which >= 0 && (!rs->read_image || b > rs->read_bytes)) {
        rs->read_bytes = b;
        rs->read_image = ds->samples[which].image;
        rs->read_image_w = ds->samples[which].w;
        rs->read_image_h = ds->samples[which].h;
    }
}

static int fit_memory(trainer *t)
{
    yc_train_opts *o = &t->o;
    int max_w = 0, max_h = 0;
    for (size_t i = 0; i < t->train_ds.n; i++) {
        max_w = t->train_ds.samples[i].w > max_w ? t->train_ds.samples[i].w : max_w;
        max_h = t->train_ds.samples[i].h > max_h ? t->train_ds.samples[i].h : max_h;
    }
    int val_w = 0, val_h = 0;
    for (size_t i = 0; t->have_val_ds && i < t->val_ds.n; i++) {
        val_w = t->val_ds.samples[i].w > val_w ? t->val_ds.samples[i].w : val_w;
        val_h = t->val_ds.samples[i].h > val_h ? t->val_ds.samples[i].h : val_h;
    }
    max_w = val_w > max_w ? val_w : max_w;
    max_h = val_h > max_h ? val_h : max_h;
    int img = o->imgsz;
    if (o->multi_scale) /* the largest multi-scale size */
        img = (int)((o->imgsz * 1.5 + t->gs - 1) / t->gs) * t->gs;
    int workers = o->workers > 0 ? o->workers : yc_physical_cores();
    bool val = t->val_ds.n > 0;
    yc_run_shape rs = {.m = t->m, .train = true, .batch = t->rank_batch, .val_batch = 0,
                       .imgsz = img, .optimizer = o->optimizer, .workers = workers,
                       .max_image_w = max_w, .max_image_h = max_h, .tile = o->tile,
                       .baseline = t->baseline_rss, .recompute = o->recompute,
                       .mask_ratio = o->mask_ratio, .masks_per_image = 1};
    if (t->seg && o->no_overlap) {
        /* one mask per target: a mosaic holds the targets of four images */
        uint32_t most = 1;
        for (size_t i = 0; i < t->train_ds.n; i++)
            most = t->train_ds.samples[i].n_boxes > most ? t->train_ds.samples[i].n_boxes : most;
        rs.masks_per_image = (int)(4 * most < 100000 ? 4 * most : 100000);
    }
    rs.val_batch = val ? 2 : 0; /* yc_memfit doubles the micro-batch for validation */
    yc_read_limits lim = {.max_pixels = o->max_pixels};
    costliest_read(&t->train_ds, img, &lim, &rs);
    if (val)
        costliest_read(&t->val_ds, img, &lim, &rs);
    if (o->cache == YC_CACHE_RAM && o->tile == 0) {
        /* the training loader's images and the validation loader's (YOLOv5 caches both) */
        rs.cache_bytes = yc_img_cache_ram_bytes(&t->train_ds, o->imgsz);
        if (t->val_ds.n > 0 && !o->val_full)
            rs.cache_bytes += yc_img_cache_ram_bytes(&t->val_ds, o->imgsz);
    }
    yc_backend *be = t->m->be;
    if (val && o->val_full) {
        yc_val_options vo;
        yc_val_options_default(&vo);
        rs.val_full_bytes = yc_val_full_host_bytes(t->m, o->imgsz, o->tile, o->tile_overlap,
                                                   vo.max_det, val_w, val_h, YC_SLICE_DECODE_MAX,
                                                   be->iface->buffer_host_ptr != NULL);
    }
    /* OpenCL cannot tell free memory on most GPUs (mem_free 0): then the total */
    size_t avail = be->info.mem_free ? be->info.mem_free : be->info.mem_total;
    size_t limit = o->mem ? o->mem : (size_t)(0.9 * (double)avail);
    /* the ranks of one machine share its memory on the CPU backend */
    if (!o->mem && be->iface->buffer_host_ptr && yc_dist_local_size() > 1)
        limit /= (size_t)yc_dist_local_size();
    int max_batch = (int)(t->train_view->n < 1024 ? t->train_view->n : 1024);
    yc_mem_fit fit;
    int st = yc_memfit(&rs, limit, yc_half_default((yc_half_policy)o->half, be), NBS, max_batch,
                       &fit);
    if (st)
        return yc_error_context(st, "fitting the run into %s",
                                o->mem ? "--mem" : "the device's free memory");
    /* AutoBatch takes the batch found; a requested batch stays the loader's, run in micro-batches
     * when it does not fit whole */
    if (o->batch == -1)
        o->batch = t->rank_batch = fit.micro_batch;
    t->micro_batch = fit.micro_batch;
    /* SyncBatchNorm sums every BatchNorm of every micro-batch over the ranks: they must run the
     * same micro-batches (each fits its own memory): the smallest */
    if (o->sync_bn && t->world > 1) {
        int neg = -(t->micro_batch > 0 ? t->micro_batch : t->rank_batch);
        if ((st = yc_dist_allreduce_max_int(&neg)))
            return st;
        t->micro_batch = -neg;
    }
    t->go.half = fit.half;
    t->go.recompute = fit.recompute;
    /* several ranks: the gradients summed in buckets while backward runs (dist.h) */
    if (t->world > 1)
        t->go.grads_ready = yc_dist_grads_ready;
    /* --sync-bn: train.py converts the model to SyncBatchNorm only under DDP */
    if (o->sync_bn && t->world > 1) {
        t->go.bn_sync = yc_dist_bn_sync;
        yc_info("Using SyncBatchNorm()\n");
    } else if (o->sync_bn) {
        yc_warn("--sync-bn does nothing in one process: SyncBatchNorm is for runs of several ranks "
                "(mpirun -np N yolocl train), as in YOLOv5 (only available in DDP mode)");
    }
    char peak[32];
    yc_info("memory: %s planned peak, %zu bytes (%s)\n",
            yc_format_size(fit.peak_bytes, peak, sizeof peak), fit.peak_bytes, fit.reason);
    /* reserve the arena for the chosen shapes now: after this nothing grows */
    rs.batch = t->micro_batch;
    rs.loader_batch = t->rank_batch;
    rs.val_batch = val ? 2 * t->micro_batch : 0;
    rs.half = fit.half;
    rs.recompute = fit.recompute;
    yc_mem_report r;
    if ((st = yc_memplan(&rs, &r)))
        return st;
    yc_arena_init(&t->arena, be);
    t->have_arena = true;
    st = yc_arena_reserve(&t->arena, &r.train_plan, r.workspace_bytes);
    if (!st)
        st = yc_arena_reserve(&t->arena, &r.val_plan, r.workspace_bytes);
    yc_mem_report_free(&r);
    if (st) {
        char lim[32];
        return yc_error_context(st, "the device refused the planned activation arena (planned "
                                "peak %s, limit %s): free device memory or give a smaller --mem",
                                peak, yc_format_size(limit, lim, sizeof lim));
    }
    return YC_OK;
}

/* ---- the run ---------------------------------------------------------------------------------- */

/* --quad: the accumulated gradients times 4 before the optimizer step, as train.py's `if
 * opt.quad: loss *= 4.` gives them (gradients are linear in the loss); two in-place additions
 * g = g + g, exact in float. */
static int quad_scale_grads(yc_model *m)
{
    yc_tensor g = yc_tensor_make(1, (int)m->param_elems, 1, 1, YC_F32, NULL);
    g.buf = m->grad_buf;
    yc_op op = {.kind = YC_OP_ADD, .src = {&g, &g}, .dst = {&g}, .name = "quad gradient x4"};
    yc_span none = {0};
    int st = yc_backend_exec(m->be, &op, none);
    if (!st)
        st = yc_backend_exec(m->be, &op, none);
    return st ? yc_error_context(st, "--quad: scaling the gradients") : YC_OK;
}

/* Forward, loss and backward of one loader batch at h x w, its gradients added to the model's:
 * in one step, submitted without waiting (*pending is then the step whose yc_step_result gives
 * the loss after the next synchronize), or, when the batch is larger than the memory fit's
 * micro-batch, in micro-batches run one after the other, whose losses are shares of the whole
 * batch's (step.h), so that *res and the gradients are the whole batch's as YOLOv5 computes them
 * (BatchNorm's batch statistics aside: per micro-batch). */
static int train_batch(trainer *t, const yc_batch *b, int h, int w, yc_loss_result *res,
                       yc_step **pending)
{
    *pending = NULL;
    bool resized = h != b->h || w != b->w;
    int st = resized ? batch_input(t, b, h, w) : YC_OK;
    /* the memory fit's micro-batch is of imgsz images; a quad image is 4 of them */
    int fit = t->o.quad && t->micro_batch > 0 ? (t->micro_batch >= 4 ? t->micro_batch / 4 : 1)
                                               : t->micro_batch;
    int micro = fit > 0 && fit < b->n ? fit : b->n;
    yc_step *s = NULL;
    if (st || (st = step_for(t, micro, h, w, &s)))
        return st;
    if (micro == b->n) {
        *pending = s;
        return resized ? yc_step_submit(s, t->input, b->targets, b->nt)
                       : yc_step_submit_u8(s, b->images, b->targets, b->nt);
    }
    yc_loss_part part;
    if ((st = yc_step_batch_part(s, b->n, b->targets, b->nt, &part)))
        return st;
    if ((st = grow_floats(&t->mtargets, &t->mtargets_cap, (size_t)b->nt * 6,
                          "micro-batch targets")))
        return st;
    memset(res, 0, sizeof *res);
    /* the gradients are final, and their buckets summed while backward runs, in the last
     * micro-batch only */
    bool summed = yc_dist_overlap_armed();
    for (int first = 0; first < b->n && !st; first += micro) {
        int n = b->n - first < micro ? b->n - first : micro;
        int nt = yc_micro_targets(b->targets, b->nt, first, n, t->mtargets);
        if ((st = step_for(t, n, h, w, &s)) ||
            (summed && (st = yc_dist_overlap_arm(t->m, first + n >= b->n))))
            break;
        yc_loss_result r;
        s->part = &part;
        if (resized)
            st = yc_step_run(s, t->input + (size_t)first * 3 * (size_t)h * (size_t)w, t->mtargets,
                             nt, &r);
        else
            st = yc_step_run_u8(s, b->images + (size_t)first * 3 * (size_t)b->h * (size_t)b->w,
                                t->mtargets, nt, &r);
        s->part = NULL;
        res->total += r.total;
        res->box += r.box;
        res->obj += r.obj;
        res->cls += r.cls;
    }
    return st;
}

/* train_batch for a segmentation model: the batch's masks go to the loss with its targets
 * (multi-scale resizes the images only: the loss resizes the masks to the prototypes, as
 * segment/train.py's does).  The step waits for the device, so *res is known on return. */
static int seg_train_batch(trainer *t, const yc_batch *b, int h, int w, yc_seg_loss_result *res)
{
    if (b->nt > 0 && !b->masks)
        return yc_error_status(YC_EFORMAT, "%s: the training batches have no masks: a "
                               "segmentation model trains on polygon labels (class x1 y1 x2 y2 "
                               "...), not boxes", t->o.data);
    yc_seg_masks all = {.m = b->masks, .h = b->mask_h, .w = b->mask_w,
                        .per_target = t->o.no_overlap};
    bool resized = h != b->h || w != b->w;
    int st = resized ? batch_input(t, b, h, w) : YC_OK;
    int micro = t->micro_batch > 0 && t->micro_batch < b->n ? t->micro_batch : b->n;
    yc_seg_step *s = NULL;
    if (st || (st = seg_step_for(t, micro, h, w, &s)))
        return st;
    if (micro == b->n)
        return resized ? yc_seg_step_run(s, t->input, b->targets, b->nt, &all, res)
                       : yc_seg_step_run_u8(s, b->images, b->targets, b->nt, &all, res);
    yc_loss_part part;
    if ((st = yc_seg_step_batch_part(s, b->n, b->targets, b->nt, &part)))
        return st;
    if ((st = grow_floats(&t->mtargets, &t->mtargets_cap, (size_t)b->nt * 6,
                          "micro-batch targets")))
        return st;
    size_t mask_elems = all.per_target ? (size_t)b->nt * (size_t)b->mask_h * (size_t)b->mask_w : 0;
    if ((st = grow_floats(&t->mmasks, &t->mmasks_cap, mask_elems, "micro-batch masks")))
        return st;
    memset(res, 0, sizeof *res);
    /* as train_batch: the buckets summed while backward runs in the last micro-batch only */
    bool summed = yc_dist_overlap_armed();
    for (int first = 0; first < b->n && !st; first += micro) {
        int n = b->n - first < micro ? b->n - first : micro;
        int nt = yc_micro_targets(b->targets, b->nt, first, n, t->mtargets);
        yc_seg_masks mm;
        yc_seg_micro_masks(&all, b->targets, b->nt, first, n, t->mmasks, &mm);
        if ((st = seg_step_for(t, n, h, w, &s)) ||
            (summed && (st = yc_dist_overlap_arm(t->m, first + n >= b->n))))
            break;
        yc_seg_loss_result r;
        s->part = &part;
        if (resized)
            st = yc_seg_step_run(s, t->input + (size_t)first * 3 * (size_t)h * (size_t)w,
                                 t->mtargets, nt, &mm, &r);
        else
            st = yc_seg_step_run_u8(s, b->images + (size_t)first * 3 * (size_t)b->h *
                                           (size_t)b->w, t->mtargets, nt, &mm, &r);
        s->part = NULL;
        res->total += r.total;
        res->box += r.box;
        res->seg += r.seg;
        res->obj += r.obj;
        res->cls += r.cls;
    }
    return st;
}

/* EarlyStopping (v7.0): best epoch moves on fitness >= best; stop after `patience` epochs. */
typedef struct stopper {
    double best_fitness;
    int best_epoch, patience;
    bool possible_stop;
} stopper;

static bool stopper_update(stopper *s, int epoch, double fitness)
{
    if (fitness >= s->best_fitness) {
        s->best_epoch = epoch;
        s->best_fitness = fitness;
    }
    int delta = epoch - s->best_epoch;
    s->possible_stop = s->patience > 0 && delta >= s->patience - 1;
    bool stop = s->patience > 0 && delta >= s->patience;
    if (stop)
        yc_info("Stopping training early as no improvement observed in last %d epochs. Best "
                "results observed at epoch %d, best model saved as best.safetensors.\n",
                s->patience, s->best_epoch);
    return stop;
}

/* YOLOv5's warmup at global batch ni of nw: sets the optimizer's learning rates and momentum;
 * returns the accumulate count of that batch. */
static int warmup(trainer *t, long ni, long nw, double lf)
{
    const yc_train_opts *o = &t->o;
    return yc_optim_warmup(t->opt, ni, nw, lf, t->hyp.warmup_bias_lr, t->hyp.warmup_momentum,
                           t->hyp.momentum,
                           o->accumulate > 0 ? o->accumulate : (double)NBS / o->batch);
}

static int run_epochs(trainer *t, int first_batch, bool *interrupted)
{
    const yc_train_opts *o = &t->o;
    yc_model *m = t->m;
    int nb = yc_loader_nbatches(t->train_loader);
    long nw = (long)yc_round_half_even(t->hyp.warmup_epochs * nb);
    if (nw < 100)
        nw = 100;
    int accumulate = o->accumulate > 0 ? o->accumulate
                                       : (int)fmax(yc_round_half_even((double)NBS / o->batch), 1);
    long last_opt_step = t->last_opt_step;
    double *maps = yc_calloc((size_t)t->nc, sizeof *maps, "maps");
    int *indices = o->image_weights ? yc_malloc(t->train_ds.n * sizeof *indices, "indices") : NULL;
    if (!maps || (o->image_weights && !indices)) {
        free(maps);
        free(indices);
        return YC_ENOMEM;
    }
    epoch_results results = {{0}, 0};
    stopper stop = {0.0, t->start_epoch, o->patience, false};
    bool tty = isatty(fileno(stdout));
    int st = YC_OK;
    for (int epoch = t->start_epoch; epoch < t->epochs && !st; epoch++) {
        double lf = yc_lr_factor(epoch, t->epochs, t->hyp.lrf, o->cos_lr);
        yc_optim_set_lf(t->opt, lf);
        if (o->image_weights && (st = image_weights_indices(t, maps, epoch, indices)))
            break;
        int first = epoch == t->start_epoch ? first_batch : 0;
        /* a resumed epoch starts with the learning rates of the batch before it, which its
         * results.csv row reports when no batch is left to run */
        long prev = (long)nb * epoch + first - 1;
        if (first > 0 && prev <= nw)
            accumulate = warmup(t, prev, nw, lf);
        if ((st = yc_loader_start(t->train_loader, epoch, indices, first)))
            break;
        /* optimizer.zero_grad() at every epoch start: gradients accumulated after the last step
         * of the previous epoch are dropped, as in YOLOv5; a resumed epoch continues with the
         * gradients its checkpoint saved */
        if (!(first > 0 && t->resume_grads) && (st = yc_model_zero_grad(m)))
            break;
        /* running means of the epoch's losses; a resumed epoch continues those saved with it */
        double mloss[4] = {0, 0, 0, 0};
        int seen_batches = 0, images = 0;
        if (first > 0 && t->resume_batches > 0) {
            memcpy(mloss, t->resume_loss, sizeof mloss);
            seen_batches = t->resume_batches;
        }
        double t0 = yc_now();
        print_header(t->seg);
        for (int i = first; i < nb && !st; i++) {
            const yc_batch *b = NULL;
            if ((st = yc_loader_next(t->train_loader, &b)))
                break;
            if (!b)
                break;
            long ni = (long)i + (long)nb * epoch;
            if (b->n == 0) {
                st = yc_error_status(YC_EIO, "epoch %d, batch %d: none of its images could be "
                                     "loaded (see the warnings above): are the dataset's files "
                                     "still there?", epoch, i);
                st = training_stopped(t, st, "make the images readable again", true);
                break;
            }
            if (ni <= nw)
                accumulate = warmup(t, ni, nw, lf);
            int h = b->h, w = b->w;
            if (o->multi_scale) {
                yc_rng rng;
                yc_rng_seed(&rng, (uint64_t)o->seed, 0x5CA1E000000ull + (uint64_t)ni);
                yc_multiscale_shape(&rng, o->imgsz, t->gs, b->h, b->w, &h, &w);
            }
            /* the batch, then the optimizer step when one is due, submitted together; one wait
             * for the device, then the loss and the gradient norm.  Under several ranks the
             * gradients are summed over the ranks first (an OpenCL device waits for its backward
             * there): every rank then steps its own optimizer with the same gradients, so the
             * weights stay identical.  Summing, not averaging, is YOLOv5's DDP result: its
             * loss is scaled by the per-rank batch (loss.c, as ComputeLoss's `* bs`) and train.py
             * multiplies it by WORLD_SIZE before DDP averages the gradients over the ranks, so
             * the gradient applied is the sum of the ranks' gradients.  The EMA runs on rank 0
             * alone, which alone validates and saves it (YOLOv5: `ema = ModelEMA(model) if RANK
             * in {-1, 0}`). */
            yc_loss_result res = {0};
            yc_seg_loss_result sres = {0};
            yc_step *pending = NULL;
            bool step_now = ni - last_opt_step >= accumulate;
            if ((t->world > 1 && (st = yc_dist_overlap_arm(m, step_now))) ||
                (st = t->seg ? seg_train_batch(t, b, h, w, &sres)
                             : train_batch(t, b, h, w, &res, &pending)) ||
                (step_now && ((t->world > 1 && (st = yc_dist_allreduce_grads(m))) ||
                              (o->quad && (st = quad_scale_grads(m))) ||
                              (st = yc_optim_step(t->opt, MAX_GRAD_NORM)) ||
                              (st = yc_model_zero_grad(m)) ||
                              (t->rank == 0 && (st = yc_ema_update(t->ema, m))))) ||
                (st = m->be->iface->synchronize(m->be)))
                break;
            if (pending)
                yc_step_result(pending, &res);
            /* the logged losses in their order: box, obj, cls; segmenting box, seg, obj, cls */
            double items[4] = {res.box, res.obj, res.cls, 0};
            if (t->seg) {
                res.total = sres.total;
                items[0] = sres.box, items[1] = sres.seg, items[2] = sres.obj;
                items[3] = sres.cls;
            }
            if (!isfinite(res.total)) {
                yc_error_status(YC_ERR, "the loss is %g at epoch %d, batch %d (step %ld)",
                                res.total, epoch, i, ni);
                st = training_stopped(t, YC_ERR, YC_FIX_NAN, false);
                break;
            }
            for (int k = 0; k < t->nloss; k++)
                mloss[k] = (mloss[k] * seen_batches + items[k]) / (seen_batches + 1);
            seen_batches++;
            /* the images of every rank (their shards are equal: DistributedSampler pads) */
            images += b->n * t->world;
            if (step_now) {
                if ((st = yc_optim_step_done(t->opt))) {
                    yc_error_context(st, "epoch %d, batch %d (step %ld)", epoch, i, ni);
                    st = training_stopped(t, st, YC_FIX_NAN, false);
                    break;
                }
                last_opt_step = ni;
                t->last_opt_step = ni;
            }
            print_progress(epoch, t->epochs, mloss, t->nloss, b->nt, b->w > b->h ? b->w : b->h, i, nb,
                           yc_now() - t0, images, tty, false);
            if (o->progress)
                o->progress(o->progress_ctx, epoch, i, res.total);
            if (t->rank == 0 && !o->noplots && ni < 3 && (st = plot_batch(t, b, ni)))
                break;
            /* SIGINT or SIGTERM reaching any rank stops every rank after the same batch */
            int stop_now = yc_stop_requested() ? 1 : 0;
            if (t->world > 1 && (st = yc_dist_allreduce_max_int(&stop_now)))
                break;
            if (stop_now) {
                /* the state after this batch, with the gradients added since the last optimizer
                 * step and the epoch's losses so far: resume continues at the next batch */
                memcpy(t->epoch_loss, mloss, sizeof mloss);
                t->epoch_batches = seen_batches;
                t->epoch_grads = ni != last_opt_step;
                /* under several ranks each holds its own gradients since the last step: rank 0
                 * saves their sum (a resumed run adds the later batches to it) */
                if (t->world > 1 && t->epoch_grads && (st = yc_dist_allreduce_grads(m)))
                    break;
                st = t->rank == 0 ? save_checkpoint(t, t->last, epoch - 1, i + 1, false) : YC_OK;
                if (!st)
                    yc_info("\ninterrupted: saved a resumable checkpoint (epoch %d, batch %d)\n",
                            epoch, i + 1);
                *interrupted = true;
                break;
            }
        }
        if (st || *interrupted)
            break;
        print_progress(epoch, t->epochs, mloss, t->nloss, 0, o->imgsz, nb - 1, nb, yc_now() - t0, images,
                       tty, true);
        /* lrs of the last batch, before the scheduler step (results.csv x/lr0..2) */
        double lr[3] = {t->opt->lr[0], t->opt->lr[1], t->opt->lr[2]};
        bool final_epoch = epoch + 1 == t->epochs || stop.possible_stop;
        /* validation, results.csv, checkpoints and early stopping on rank 0 alone, which then
         * tells the others whether to stop (they wait for it sleeping) */
        bool early = false;
        if (t->rank == 0) {
            if (!o->noval || final_epoch) {
                if ((st = validate(t, t->ema->ema, false, &results, maps)))
                    break;
            }
            double fi = results.fitness;
            early = stopper_update(&stop, epoch, fi);
            if (fi > t->best_fitness)
                t->best_fitness = fi;
            /* the losses, the validation's values, the learning rates */
            double row[YC_SEG_RESULTS_NCOLS];
            int ncols = 0;
            for (int k = 0; k < t->nloss; k++)
                row[ncols++] = mloss[k];
            for (int k = 0; k < (t->seg ? 12 : 7); k++)
                row[ncols++] = results.r[k];
            for (int k = 0; k < 3; k++)
                row[ncols++] = lr[k];
            if ((st = t->seg ? yc_seg_results_append(t->csv, epoch, row)
                             : yc_results_append(t->csv, epoch, row))) {
                st = training_stopped(t, st, YC_FIX_DISK, true);
                break;
            }
            if ((!o->nosave || final_epoch) && (st = save_epoch(t, epoch, fi)))
                break;
        }
        /* the ranks must still hold the same weights (they step identically) */
        if (t->world > 1 && (st = yc_dist_check_weights(m, epoch)))
            break;
        if (t->world > 1) {
            int e = early;
            if ((st = yc_dist_bcast(&e, sizeof e, 0)))
                break;
            early = e != 0;
        }
        if (early)
            break;
    }
    free(maps);
    free(indices);
    return st;
}

/* labels.jpg from the training labels. */
static int plot_labels(trainer *t)
{
    const yc_dataset *ds = t->train_view;
    float *rows = yc_malloc((ds->n_boxes ? ds->n_boxes : 1) * 5 * sizeof *rows, "plot");
    if (!rows)
        return YC_ENOMEM;
    for (size_t i = 0; i < ds->n_boxes; i++) {
        rows[i * 5] = (float)ds->boxes[i].cls;
        rows[i * 5 + 1] = ds->boxes[i].x;
        rows[i * 5 + 2] = ds->boxes[i].y;
        rows[i * 5 + 3] = ds->boxes[i].w;
        rows[i * 5 + 4] = ds->boxes[i].h;
    }
    char path[2400];
    snprintf(path, sizeof path, "%s/labels.jpg", t->save_dir);
    int st = yc_plot_labels(path, rows, (int)ds->n_boxes, (const char *const *)t->names, t->nc);
    free(rows);
    return st;
}

/* Rewrites checkpoint `path` as a final one (EMA weights only: strip_optimizer), through the
 * EMA model. */
static int strip_checkpoint(trainer *t, const char *path)
{
    yc_ckpt_meta meta;
    int st = yc_checkpoint_read_meta(path, &meta);
    if (st)
        return st;
    yc_ckpt_meta_free(&meta);
    if ((st = yc_checkpoint_load_weights(path, t->ema->ema)))
        return st;
    return save_checkpoint(t, path, -1, 0, true);
}

/* The end of training: final checkpoints without training state (strip_optimizer), best
 * re-validated with plots, results.png.  last.safetensors is stripped at the very end, so that a
 * run stopped anywhere in here (killed, a full disk) still has a resumable last checkpoint and
 * --resume runs the end again. */
static int finish(trainer *t)
{
    int st = YC_OK;
    if (yc_file_exists(t->best)) {
        if (!(st = strip_checkpoint(t, t->best))) {
            yc_info("\nValidating %s...\n", t->best);
            epoch_results res;
            st = validate(t, t->ema->ema, true, &res, NULL);
        }
    }
    if (!st && !t->o.noplots) {
        char png[2400];
        snprintf(png, sizeof png, "%s/results.png", t->save_dir);
        st = yc_plot_results(t->csv, png);
    }
    if (!st && yc_file_exists(t->last))
        st = strip_checkpoint(t, t->last);
    if (!st)
        yc_info("Results saved to %s\n", t->save_dir);
    return st;
}

/* The relative paths among a resumed run's options (the dataset yaml) are relative to the
 * directory the run was started in: found from here as they are, else there.  The working
 * directory of the run is kept for the checkpoints it writes. */
static int resolve_resumed_paths(trainer *t, const yc_ckpt_meta *meta)
{
    snprintf(t->cwd, sizeof t->cwd, "%s", meta->cwd ? meta->cwd : "");
    const char *data = t->o.data;
    if (!data || !data[0] || data[0] == '/' || yc_file_exists(data))
        return YC_OK;
    if (meta->cwd) {
        char *joined = yc_path_join(meta->cwd, data);
        if (!joined)
            return YC_ENOMEM;
        bool found = yc_file_exists(joined);
        if (found) {
            free(t->kept.data);
            t->kept.data = joined;
            t->o.data = joined;
            return YC_OK;
        }
        free(joined);
        return yc_error_status(YC_EIO, "the dataset yaml %s the run was started with is gone: not "
                               "found here nor in %s, where the run was started", data, meta->cwd);
    }
    return yc_error_status(YC_EIO, "the dataset yaml %s the run was started with is not found "
                           "from here: resume from the directory the run was started in", data);
}

/* Under several ranks, a failure of one rank's part (`st`, rank 0's alone for the steps it
 * does alone) becomes every rank's: the ranks agree whether any failed, and the others fail
 * naming `what`, instead of waiting in the next collective operation. */
static int dist_agree(trainer *t, int st, const char *what)
{
    if (t->world == 1)
        return st;
    int failed = st != YC_OK;
    int rc = yc_dist_allreduce_max_int(&failed);
    if (rc)
        return rc;
    if (failed && !st)
        return yc_error_status(YC_ERR, "rank %d of %d: another rank failed %s (see its message)",
                               t->rank, t->world, what);
    return st;
}

/* A run continues on as many ranks as it was trained on: the shards of each epoch, the per-rank
 * batch and the accumulated gradients of an interrupted step depend on the number. */
static int check_resumed_world(trainer *t, const yc_ckpt_meta *meta, const char *path)
{
    int saved = 1;
    int st = yc_train_saved_world(meta->opt_json, &saved);
    if (st)
        return yc_error_context(st, "%s", path);
    if (saved == t->world)
        return YC_OK;
    char now[64], then[64];
    if (t->world > 1)
        snprintf(now, sizeof now, "%d ranks (mpirun -np %d)", t->world, t->world);
    else
        snprintf(now, sizeof now, "1 process");
    if (saved > 1)
        snprintf(then, sizeof then, "mpirun -np %d yolocl train --resume", saved);
    else
        snprintf(then, sizeof then, "yolocl train --resume without mpirun");
    return yc_error_status(YC_EUSAGE, "%s was trained by %d rank%s, this is %s: the shards of "
                           "each epoch and the per-rank batch depend on the number of ranks, so "
                           "the run continues only on %d: resume it with %s", path, saved,
                           saved == 1 ? "" : "s", now, saved, then);
}

/* The device this process opens into t->device (yc_dist_rank_device: its entry of a list, its
 * local rank's device) and whether it is the CPU backend. */
static int rank_device(trainer *t, int local, int per_node, bool *cpu)
{
    /* whether --device auto would open a GPU matters only for automatic choices shared by
     * several ranks (listing the OpenCL devices starts the drivers: not for --device cpu) */
    const char *d = t->o.device ? t->o.device : "";
    bool auto_gpu = false;
    if (per_node > 1 && (!d[0] || strcmp(d, "auto") == 0)) {
        bool auto_cpu = true;
        if (yc_device_is_cpu("auto", &auto_cpu)) {
            yc_error_clear(); /* no OpenCL device could be listed: auto is the CPU backend */
            auto_cpu = true;
        }
        auto_gpu = !auto_cpu;
    }
    int st = yc_dist_rank_device(d, auto_gpu, local, per_node, t->device, sizeof t->device);
    if (st)
        return st;
    return yc_device_is_cpu(t->device, cpu);
}

/* The checks and choices of a run across several ranks (dist.h): --batch is the global batch,
 * split evenly; what YOLOv5's DDP refuses or yolocl does not shard yet is refused; each rank
 * takes its share of the machine: on the CPU backend cores / ranks-per-machine threads (and as
 * many loader threads by default), on OpenCL the local-rank-th device. */
static int setup_distributed(trainer *t)
{
    yc_train_opts *o = &t->o;
    int n = t->world, local = yc_dist_local_rank(), per_node = yc_dist_local_size();
    if (o->batch == -1)
        return yc_error_status(YC_EUSAGE, "--batch -1 (AutoBatch) is not supported under %d "
                               "ranks: give the global batch, a multiple of %d", n, n);
    if (o->batch % n != 0)
        return yc_error_status(YC_EUSAGE, "--batch %d is the global batch and must be a multiple "
                               "of the %d ranks (%d images per rank would leave %d over): use "
                               "--batch %d or %d", o->batch, n, o->batch / n, o->batch % n,
                               o->batch / n * n > 0 ? o->batch / n * n : n, (o->batch / n + 1) * n);
    if (o->image_weights)
        return yc_error_status(YC_EUSAGE, "--image-weights is not compatible with YOLOv5 "
                               "Multi-GPU DDP training (%d ranks)", n);
    if (o->rect)
        return yc_error_status(YC_EUNSUPPORTED, "--rect is not supported under %d ranks (the "
                               "rectangular batch shapes follow the whole epoch's order): train "
                               "without --rect", n);
    int cores = yc_physical_cores() / per_node;
    if (cores < 1)
        cores = 1;
    bool cpu = false;
    int st = rank_device(t, local, per_node, &cpu);
    if (st)
        return st;
    if (cpu && o->threads <= 0)
        o->threads = cores;
    if (o->workers <= 0)
        o->workers = cores;
    return YC_OK;
}

int yc_train(const yc_train_opts *opts, bool *interrupted)
{
    trainer tr;
    trainer *t = &tr;
    memset(t, 0, sizeof *t);
    t->o = *opts;
    t->last_opt_step = -1;
    *interrupted = false;
    int st = YC_OK;
    bool resuming = opts->resume != NULL;
    char resume_path[2300] = "";
    yc_ckpt_meta meta = {0};
    int first_batch = 0;
    int verbosity = yc_verbosity;
    t->rank = yc_dist_rank();
    t->world = yc_dist_size();
    /* progress and results from rank 0 alone; the others print warnings and errors */
    if (t->world > 1 && t->rank > 0)
        yc_verbosity = 0;
    /* (a resumed run's checks come once its options are restored) */
    if (t->world > 1 && !resuming && (st = setup_distributed(t)))
        goto done;
    /* one process given a list of devices (as for mpirun) takes the first */
    bool cpu = false;
    if (t->world == 1 && opts->device && strchr(opts->device, ',') &&
        (st = rank_device(t, 0, 1, &cpu)))
        goto done;
    if (resuming) {
        /* every rank continues from the checkpoint rank 0 finds (each reads it: the run
         * directory must be visible to every rank, as the dataset) */
        if (t->rank == 0)
            st = yc_train_find_resume(opts->resume, opts->project ? opts->project : "runs/train",
                             resume_path, sizeof resume_path);
        if ((st = dist_agree(t, st, "finding the checkpoint to resume")) ||
            (t->world > 1 && (st = yc_dist_bcast(resume_path, sizeof resume_path, 0))) ||
            (st = yc_checkpoint_read_meta(resume_path, &meta)))
            goto done;
        /* epoch -1 is a final checkpoint's, or an interruption's inside the first epoch (the
         * last completed epoch: none), which has a batch to continue from */
        if (meta.epoch == -1 && meta.next_batch == 0) {
            st = yc_error_status(YC_EUSAGE, "%s is a finished run's checkpoint: nothing to "
                                 "resume (fine-tune from it with --weights)", resume_path);
            goto done;
        }
        if (!meta.opt_json || (st = yc_train_opts_from_json(meta.opt_json, &t->o, &t->kept))) {
            if (!st)
                st = yc_error_status(YC_EFORMAT, "%s holds no run options", resume_path);
            goto done;
        }
        if ((st = check_resumed_world(t, &meta, resume_path)))
            goto done;
        t->o.device = opts->device;
        t->o.workers = opts->workers;
        t->o.threads = opts->threads;
        t->o.mem = opts->mem;
        t->o.half = opts->half;
        t->o.recompute = opts->recompute;
        t->o.cache = opts->cache;
        t->o.max_pixels = opts->max_pixels;
        if (t->world > 1 && (st = setup_distributed(t)))
            goto done;
        choose_wait_policy(&t->o);
        char *wdir = yc_path_dirname(resume_path);
        char *dir = wdir ? yc_path_dirname(wdir) : NULL;
        if (!dir) {
            free(wdir);
            st = YC_ENOMEM;
            goto done;
        }
        snprintf(t->save_dir, sizeof t->save_dir, "%s", dir);
        /* the temporary files of checkpoint and results writes a killed run left behind (rank
         * 0 writes them, and alone removes them) */
        int stale = t->rank == 0 ? yc_atomic_remove_stale(wdir) + yc_atomic_remove_stale(dir) : 0;
        if (stale)
            yc_info("removed %d temporary file%s an interrupted write left in %s\n", stale,
                    stale == 1 ? "" : "s", dir);
        free(dir);
        free(wdir);
        t->start_epoch = meta.epoch + 1;
        first_batch = meta.next_batch;
        t->last_opt_step = meta.last_opt_step;
        t->best_fitness = meta.best_fitness;
        snprintf(t->resume_path, sizeof t->resume_path, "%s", resume_path);
        if (first_batch > 0 && meta.epoch_batches > 0) {
            memcpy(t->resume_loss, meta.epoch_loss, sizeof t->resume_loss);
            t->resume_batches = meta.epoch_batches;
        }
        t->resume_grads = first_batch > 0 && meta.grads;
        if ((st = resolve_resumed_paths(t, &meta)))
            goto done;
        yc_info("Resuming training from %s from epoch %d%s\n", resume_path, t->start_epoch,
                first_batch ? " (inside the epoch)" : "");
    } else {
        choose_wait_policy(&t->o);
        if (t->rank == 0 && (st = yc_run_dir(t->o.project, t->o.name, t->o.exist_ok, "weights",
                                             t->save_dir, sizeof t->save_dir)))
            goto done;
        if (t->world > 1 && (st = yc_dist_bcast(t->save_dir, sizeof t->save_dir, 0)))
            goto done;
        if (!getcwd(t->cwd, sizeof t->cwd))
            t->cwd[0] = '\0';
    }
    if ((st = path_fmt(t->wdir, sizeof t->wdir, "%s/weights", t->save_dir)) ||
        (st = path_fmt(t->last, sizeof t->last, "%s/last.safetensors", t->wdir)) ||
        (st = path_fmt(t->best, sizeof t->best, "%s/best.safetensors", t->wdir)) ||
        (st = path_fmt(t->csv, sizeof t->csv, "%s/results.csv", t->save_dir)))
        goto done;
    t->epochs = t->o.epochs;

    /* a resumed run takes the hyperparameters its checkpoint carries, not the file again */
    if (resuming && meta.hyp_json)
        st = yc_hyp_parse(&t->hyp, meta.hyp_json, resume_path);
    else
        st = yc_hyp_load(&t->hyp, t->o.hyp);
    if (st)
        goto done;
    if (t->hyp.anchors > 0) {
        st = yc_error_status(YC_EUNSUPPORTED, "%s: the 'anchors' hyperparameter (placeholder "
                             "anchors for AutoAnchor) is not supported; remove it", t->o.hyp);
        goto done;
    }
    t->rank_batch = t->o.batch > 0 ? t->o.batch / t->world : t->o.batch;
    if ((st = setup_data(t)))
        goto done;
    if ((st = setup_model(t, resuming)))
        goto done;
    if ((st = fit_memory(t)))
        goto done;
    if (!(t->opt_json = yc_train_run_json(&t->o, t->micro_batch, t->world)) || !(t->hyp_json = hyp_to_json(&t->hyp))) {
        st = YC_ENOMEM;
        goto done;
    }
    if (!resuming && t->rank == 0) {
        char path[2400];
        if ((st = path_fmt(path, sizeof path, "%s/hyp.yaml", t->save_dir)) ||
            (st = yc_write_yaml_from_json(path, t->hyp_json)))
            goto done;
        if ((st = path_fmt(path, sizeof path, "%s/opt.yaml", t->save_dir)) ||
            (st = yc_write_yaml_from_json(path, t->opt_json)))
            goto done;
    }
    yc_info("hyperparameters: lr0=%g lrf=%g momentum=%g weight_decay=%g warmup_epochs=%g box=%g "
            "cls=%g obj=%g anchor_t=%g mosaic=%g mixup=%g\n", t->hyp.lr0, t->hyp.lrf,
            t->hyp.momentum, t->hyp.weight_decay, t->hyp.warmup_epochs, t->hyp.box, t->hyp.cls,
            t->hyp.obj, t->hyp.anchor_t, t->hyp.mosaic, t->hyp.mixup);

    int accumulate = t->o.accumulate > 0
                         ? t->o.accumulate
                         : (int)fmax(yc_round_half_even((double)NBS / t->o.batch), 1);
    double wd = t->hyp.weight_decay * t->o.batch * accumulate / NBS;
    if ((st = yc_optim_new(&t->opt, t->m, t->o.optimizer, t->hyp.lr0, t->hyp.momentum, wd,
                           t->frozen)) ||
        (st = yc_ema_new(&t->ema, t->m, resuming ? meta.updates : 0)))
        goto done;
    if (resuming && (st = yc_checkpoint_load_train_state(resume_path, t->m, t->ema->ema, t->opt)))
        goto done;
    /* the gradients an interruption saved are those of every rank, summed (run_epochs): rank 0
     * continues with the sum, the others from zero, so that the next allreduce adds each rank's
     * further batches once */
    if (resuming && t->rank > 0 && t->resume_grads && (st = yc_model_zero_grad(t->m)))
        goto done;
    if (resuming && t->epochs < t->start_epoch) {
        yc_info("%s has been trained for %d epochs. Fine-tuning for %d more epochs.\n",
                resume_path, t->start_epoch, t->epochs);
        t->epochs += t->start_epoch;
    }
    if (resuming && t->rank == 0 && (st = yc_results_truncate(t->csv, t->start_epoch)))
        goto done;

    int workers = t->o.workers > 0 ? t->o.workers : yc_physical_cores();
    if (workers > t->rank_batch)
        workers = t->rank_batch;
    yc_loader_options lo = {.ds = &t->train_ds, .train = true, .hyp = &t->hyp,
                            .imgsz = t->o.imgsz, .batch = t->rank_batch, .rect = t->o.rect,
                            .rank = t->rank, .world = t->world,
                            .pad = 0.0, .stride = t->gs, .workers = workers,
                            .seed = (uint64_t)t->o.seed,
                            .tiles = t->o.tile > 0 ? &t->train_tiles : NULL,
                            .tiles_per_epoch = t->o.tiles_per_epoch,
                            .limits = {.max_pixels = t->o.max_pixels},
                            .cache = (yc_cache_kind)t->o.cache, .quad = t->o.quad,
                            .masks = t->seg, .mask_ratio = t->o.mask_ratio,
                            .no_overlap = t->o.no_overlap};
    if (t->o.rect && t->o.image_weights) {
        yc_warn("--rect is incompatible with --image-weights: rect disabled");
        lo.rect = false;
        t->o.rect = false;
    }
    if (t->o.cache != YC_CACHE_NONE && t->o.tile > 0) {
        yc_warn("--cache does not apply to tiled training (windows are read from the images): "
                "ignored");
        lo.cache = YC_CACHE_NONE;
        t->o.cache = YC_CACHE_NONE;
    }
    if ((st = yc_loader_new(&t->train_loader, &lo)))
        goto done;
    if (t->o.cache == YC_CACHE_RAM) {
        char sz[32];
        size_t bytes = yc_img_cache_ram_bytes(&t->train_ds, t->o.imgsz) +
                       (t->val_ds.n > 0 && !t->o.val_full
                            ? yc_img_cache_ram_bytes(&t->val_ds, t->o.imgsz)
                            : 0);
        yc_info("--cache ram: the images are kept decoded at %d as they are first read (%s)\n",
                t->o.imgsz, yc_format_size(bytes, sz, sizeof sz));
    } else if (t->o.cache == YC_CACHE_DISK) {
        yc_info("--cache disk: training images at %d in %s\n", t->o.imgsz,
                yc_loader_cache_dir(t->train_loader));
    }
    if (t->val_ds.n > 0 && !t->o.val_full && t->rank == 0) {
        /* one thread: a letterbox is far cheaper than the inference that consumes it */
        yc_loader_options vo = {.ds = &t->val_ds, .train = false, .hyp = &t->hyp,
                                .imgsz = t->o.imgsz, .batch = t->micro_batch * 2, .rect = true,
                                .pad = 0.5, .stride = t->gs, .workers = 1,
                                .seed = (uint64_t)t->o.seed,
                                .tiles = t->o.tile > 0 ? &t->val_tiles : NULL,
                                .limits = {.max_pixels = t->o.max_pixels},
                                .cache = (yc_cache_kind)t->o.cache, .quad = t->o.quad,
                                .masks = t->seg, .mask_ratio = t->o.mask_ratio,
                                .no_overlap = t->o.no_overlap};
        if ((st = yc_loader_new(&t->val_loader, &vo)))
            goto done;
        if (t->o.cache == YC_CACHE_DISK)
            yc_info("--cache disk: validation images at %d in %s\n", t->o.imgsz,
                    yc_loader_cache_dir(t->val_loader));
    } else if (t->val_ds.n == 0 && !t->o.noval) {
        st = yc_error_status(YC_EFORMAT, "%s: no usable validation images (use --noval to train "
                             "without validation)", t->o.data);
        goto done;
    }
    if (!resuming) {
        if (t->rank == 0 && !t->o.noplots && (st = plot_labels(t)))
            goto done;
        if (t->rank == 0 && !t->o.noautoanchor &&
            (st = yc_check_anchors(t->train_view, t->m, t->hyp.anchor_t, t->o.imgsz,
                                   (uint64_t)t->o.seed, NULL)))
            goto done;
        if ((st = round_to_half(t->m)))
            goto done;
    }
    /* every rank starts from rank 0's weights and anchors (AutoAnchor ran there) */
    if (t->world > 1 && (st = yc_dist_bcast_model(t->m)))
        goto done;
    if (t->seg)
        yc_seg_step_loss_params(t->m, &t->hyp, t->o.imgsz, t->o.label_smoothing, &t->lp);
    else
        yc_step_loss_params(t->m, &t->hyp, t->o.imgsz, t->o.label_smoothing, &t->lp);
    if (yc_wait_policy_chosen_spin())
        yc_info("OpenMP threads spin between ops (OMP_WAIT_POLICY=ACTIVE: %.1f GFLOPs per image at "
                "%d outweigh the image loaders; OMP_WAIT_POLICY=PASSIVE keeps them asleep)\n",
                yc_model_gflops(t->m, t->o.imgsz), t->o.imgsz);
    yc_info("Image sizes %d train, %d val\nUsing %d dataloader workers\nLogging results to %s\n"
            "Starting training for %d epochs...\n", t->o.imgsz, t->o.imgsz, workers, t->save_dir,
            t->epochs);

    yc_stop_signals saved;
    yc_stop_install(&saved, t->world > 1);
    double t0 = yc_now();
    st = run_epochs(t, first_batch, interrupted);
    yc_stop_restore(&saved);
    if (!st && t->world > 1) {
        /* what the gradient sums cost this rank (rank 0's line; bench/mpi_bench.sh reads it) */
        long n = 0;
        size_t bytes = 0;
        double secs = 0, wall = yc_now() - t0;
        yc_dist_stats(&n, &bytes, &secs);
        char sz[32];
        size_t each = n > 0 ? bytes / (size_t)n : 0;
        yc_dist_overlap_counts oc;
        yc_dist_overlap_counts_get(&oc);
        char reads[160] = "";
        if (oc.reads_early + oc.reads_late > 0)
            snprintf(reads, sizeof reads, " (read to pinned host buffers: %ld reads started during "
                     "backward, %ld after it, %ld waits for a read)", oc.reads_early, oc.reads_late,
                     oc.read_waits);
        yc_info("data-parallel: %d ranks, %ld gradient allreduces of %zu bytes (%s) each, %.2f ms "
                "each on average, %.1f%% of the %.1f s of training; %ld gradient buckets started "
                "during backward, %ld after it%s\n", t->world, n, each,
                yc_format_size(each, sz, sizeof sz),
                n > 0 ? 1e3 * secs / (double)n : 0.0, wall > 0 ? 100.0 * secs / wall : 0.0, wall,
                oc.early, oc.late, reads);
    }
    if (!st && !*interrupted && t->rank == 0) {
        yc_info("\n%d epochs completed in %.3f hours.\n", t->epochs - t->start_epoch,
                (yc_now() - t0) / 3600.0);
        st = finish(t);
    }
    /* the other ranks wait (sleeping) for rank 0's final validation and checkpoints */
    if (!st && t->world > 1)
        st = yc_dist_barrier();
done:
    yc_verbosity = verbosity;
    yc_ckpt_meta_free(&meta);
    trainer_free(t);
    return st;
}
