/* yolocl train: the options of YOLOv5's train.py (same names, same defaults, except that with
 * no --data the built-in demo dataset is used, with settings that finish in minutes). */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_cmds.h"
#include "classify_train.h"
#include "cli.h"
#include "commands.h"
#include "dist.h"
#include "evolve.h"
#include "imgcache.h"
#include "log.h"
#include "memplan.h"
#include "modelcfg.h"
#include "optim.h"
#include "options.h"
#include "train.h"
#include "train_opts.h"

/* Without --data: the demo run (yolov5n from scratch on the built-in shapes dataset). */
#define DEMO_EPOCHS 20
#define DEMO_IMGSZ 320
#define DEMO_CFG "yolov5n"

/* The command line: the run's options and --resume's value. */
typedef struct train_cli {
    yc_train_opts o; /* first: the saved fields' offsets are offsets into it */
    const char *resume;
    /* --evolve [N]: generations of hyperparameter evolution (evolve.h); 0: a plain run */
    int evolve;
} train_cli;

static int freeze_layers(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
static int resume_run(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
static int evolve(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
static int resume_value(void *obj, yc_opt_state *s);

#define T train_cli
/* A saved option (train_opts.c): its type and field come from the row of that key, which also
 * says whether --resume restores it. */
#define SAVED(type_, s, n, meta, k, h) {.type = type_, .short_name = s, .name = n, .metavar = meta, .key = k, .help = h}
#define SAVED_NUM(type_, s, n, meta, k, lo_, hi_, h)                                             \
    {.type = type_, .short_name = s, .name = n, .metavar = meta, .key = k, .lo = lo_, .hi = hi_, \
     .help = h}

static const yc_option rows[] = {
    SAVED(YC_OPT_T_STRING, 'd', "data", "FILE", "data", "dataset yaml (YOLOv5 format)"),
    SAVED(YC_OPT_T_STRING, 'c', "cfg", "MODEL", "cfg",
          "model config: bundled name (yolov5n ... yolov5x6) or yaml"),
    SAVED(YC_OPT_T_STRING, 'w', "weights", "FILE", "weights",
          "initial weights (.safetensors or Ultralytics .pt); '' = scratch"),
    SAVED(YC_OPT_T_STRING, 0, "hyp", "HYP", "hyp", "hyperparameters (default hyp.scratch-low)"),
    SAVED_NUM(YC_OPT_T_INT, 'e', "epochs", "N", "epochs", 1, 1000000,
              "epochs (default 100; demo 20)"),
    {.type = YC_OPT_T_INT, .short_name = 'b', .name = "batch-size", .aliases = {"batch"},
     .metavar = "N", .key = "batch_size", .lo = -1, .hi = 65536,
     .zero = "--batch-size must be positive or -1 (AutoBatch)",
     .help = "images per batch (default 16; -1 = AutoBatch); also --batch"},
    {.type = YC_OPT_T_INT, .short_name = 'i', .name = "imgsz", .aliases = {"img", "img-size"},
     .metavar = "N", .key = "imgsz", .lo = 32, .hi = 16384,
     .help = "train and val image size (default 640; demo 320); also --img"},
    SAVED_NUM(YC_OPT_T_INT, 0, "accumulate", "N", "accumulate", 1, 65536,
              "batches per optimizer step (default round(64 / batch))"),
    SAVED(YC_OPT_T_BOOL, 0, "rect", NULL, "rect", "rectangular training"),
    {.type = YC_OPT_T_CALLBACK, .name = "resume", .metavar = "[RUN]",
     .flags = YC_OPT_OPTIONAL_ARG, .fn = resume_run,
     .help = "resume the latest run, a run directory or a checkpoint"},
    SAVED(YC_OPT_T_BOOL, 0, "nosave", NULL, "nosave", "only save the final checkpoint"),
    SAVED(YC_OPT_T_BOOL, 0, "noval", NULL, "noval", "only validate the final epoch"),
    SAVED(YC_OPT_T_BOOL, 0, "noautoanchor", NULL, "noautoanchor", "disable AutoAnchor"),
    SAVED(YC_OPT_T_BOOL, 0, "noplots", NULL, "noplots", "save no plot files"),
    SAVED(YC_OPT_T_BOOL, 0, "image-weights", NULL, "image_weights",
          "sample images by class-weighted mAP"),
    SAVED(YC_OPT_T_BOOL, 0, "multi-scale", NULL, "multi_scale", "vary image size +/- 50%"),
    SAVED(YC_OPT_T_BOOL, 0, "quad", NULL, "quad",
          "quad batches: each 4 images become one of twice the size\n"
          "(2x2 tiles or the first enlarged), gradients x4"),
    SAVED(YC_OPT_T_BOOL, 0, "sync-bn", NULL, "sync_bn",
          "SyncBatchNorm: BatchNorm statistics over every rank's\n"
          "images (only under mpirun with several ranks)"),
    SAVED(YC_OPT_T_BOOL, 0, "single-cls", NULL, "single_cls",
          "train multi-class data as one class"),
    {.type = YC_OPT_T_ENUM, .name = "optimizer", .metavar = "NAME", .key = "optimizer",
     .choices = "SGD, Adam or AdamW", .help = "SGD (default), Adam or AdamW"},
    SAVED(YC_OPT_T_BOOL, 0, "cos-lr", NULL, "cos_lr", "cosine LR schedule"),
    SAVED_NUM(YC_OPT_T_FLOAT, 0, "label-smoothing", "E", "label_smoothing", 0, 1,
              "label smoothing epsilon (default 0)"),
    YC_OPT_INT(0, "cutoff", "N", T, o.cutoff, 2, 1000,
               "classifier: cut a detection --cfg to layers 0..N-1,\n"
               "the last replaced by Classify (default 10)"),
    YC_OPT_FLOAT(0, "dropout", "P", T, o.dropout, 0, 1,
                 "classifier: Classify's dropout probability, below 1\n(default 0)"),
    SAVED_NUM(YC_OPT_T_INT, 0, "patience", "N", "patience", 0, 1000000,
              "early stopping patience in epochs (default 100; 0 = off)"),
    {.type = YC_OPT_T_CALLBACK, .name = "freeze", .metavar = "N [M ...]", .key = "freeze",
     .fn = freeze_layers, .help = "freeze layers 0..N-1, or the listed layers"},
    SAVED_NUM(YC_OPT_T_INT, 0, "save-period", "N", "save_period", -1, 1000000,
              "save a checkpoint every N epochs"),
    SAVED_NUM(YC_OPT_T_INT, 0, "seed", "N", "seed", 0, 2147483647, "global seed (default 0)"),
    SAVED_NUM(YC_OPT_T_INT, 'j', "workers", "N", "workers", 0, 256,
              "data loader threads (default: physical cores)"),
    YC_OPT_INT(0, "threads", "N", T, o.threads, 0, 1024,
               "compute threads (default: physical cores)"),
    SAVED(YC_OPT_T_STRING, 0, "device", "D", "device",
          "auto, cpu, opencl, opencl:N or a device name substring"),
    YC_OPTS_MEM(T, o.mem, "memory limit (default 90% of the device's free memory)"),
    YC_OPTS_HALF(T, o.half, "--half, --no-half",
                 "FP16 storage of activations: always, or never (default:\n"
                 "on OpenCL devices that can store FP16; on the CPU\n"
                 "only when needed to fit the memory limit)",
                 YC_OPT_HIDDEN, NULL),
    YC_OPTS_RECOMPUTE(T, o.recompute, "recompute SiLU outputs in backward instead\n"
                                      "of storing them (default: only when needed to fit)"),
    {.type = YC_OPT_T_CALLBACK, .name = "tile", .metavar = "SIZE", .key = "tile",
     .fn = yc_opt_tile,
     .help = "train on SIZE x SIZE windows of the images, read without\n"
             "decoding large images whole (default: the dataset yaml's\n"
             "tile:, else whole images; 0 = whole images)"},
    {.type = YC_OPT_T_DOUBLE, .name = "tile-overlap", .metavar = "F", .key = "tile_overlap",
     .lo = 0, .hi = 1, .flags = YC_OPT_BELOW_HI,
     .help = "fraction shared by neighbouring windows (default 0.2)"},
    SAVED_NUM(YC_OPT_T_DOUBLE, 0, "tile-min-area", "F", "tile_min_area", 0, 1,
              "keep a box in a window when this fraction of it is inside\n(default 0.1)"),
    SAVED_NUM(YC_OPT_T_INT, 0, "tiles-per-epoch", "N", "tiles_per_epoch", 1, 2147483647,
              "a random subset of N tiles per epoch (default: all)"),
    SAVED(YC_OPT_T_BOOL, 0, "val-full", NULL, "val_full",
          "with tiles: validate whole images, detected by slices\n"
          "merged as detect --slice (default: per tile)"),
    SAVED(YC_OPT_T_STRING, 0, "project", "DIR", "project",
          "save to DIR/NAME (default runs/train; segmentation\nmodels runs/train-seg)"),
    SAVED(YC_OPT_T_STRING, 0, "name", "NAME", "name",
          "run name (default exp; exp2, exp3... when taken)"),
    SAVED(YC_OPT_T_BOOL, 0, "exist-ok", NULL, "exist_ok", "reuse an existing DIR/NAME"),
    {.type = YC_OPT_T_CALLBACK, .name = "cache", .metavar = "[ram|disk]", .key = "cache",
     .flags = YC_OPT_OPTIONAL_ARG, .fn = yc_opt_cache,
     .help = "keep the images decoded and resized to --img, in memory\n"
             "(counted by the memory plan) or in files beside the\n"
             "dataset, so that later epochs skip decoding (bare: ram)"},
    SAVED(YC_OPT_T_PIXELS, 0, "max-pixels", "N|WxH", "max_pixels",
          "most pixels one image read may decode (default 2^30);\n"
          "larger images are skipped: train them with --tile"),
    SAVED_NUM(YC_OPT_T_INT, 0, "mask-ratio", "N", "mask_ratio", 1, 64,
              "segmentation models: masks at 1/N of the image size\n(default 4)"),
    SAVED(YC_OPT_T_BOOL, 0, "no-overlap", NULL, "no_overlap",
          "segmentation models: one mask per object instead of one\n"
          "index map per image (slower, slightly higher mAP)"),
    {.type = YC_OPT_T_CALLBACK, .name = "evolve", .metavar = "[N]", .flags = YC_OPT_OPTIONAL_ARG,
     .fn = evolve,
     .help = "evolve the hyperparameters for N generations (bare: 300),\n"
             "each a training run; evolve.csv and hyp_evolve.yaml in\n"
             "runs/evolve/expN (yolocl-train(1) EVOLUTION)"},
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "train",
    .head = "Usage: yolocl train [--data D.yaml] [--cfg MODEL] [--weights W] [OPTION]...\n"
            "Train a YOLOv5 model as Ultralytics' train.py does (a segmentation model, --cfg\n"
            "yolov5n-seg ..., as segment/train.py does).  With no --data, train yolov5n on the\n"
            "built-in demo dataset (20 epochs at 320; a few minutes on a laptop).\n"
            "\n",
    .rows = rows,
    .help_col = 27,
    .fields = yc_train_fields,
    .after = resume_value,
};

static int freeze_layers(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    (void)arg;
    yc_train_opts *o = &((train_cli *)obj)->o;
    /* nargs='+': this value and the following non-option arguments */
    o->nfreeze = 0;
    optind--;
    while (optind < s->argc && s->argv[optind][0] != '-' && o->nfreeze < YC_MAX_FREEZE) {
        int st = yc_cli_int(s->spec->cmd, "--freeze", s->argv[optind], 0, 10000,
                            &o->freeze[o->nfreeze]);
        if (st)
            return st;
        o->nfreeze++;
        optind++;
    }
    return 0;
}

static int resume_run(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    (void)s;
    ((train_cli *)obj)->resume = arg;
    return 0;
}

/* --resume takes an optional value, also as the next argument (argparse nargs='?') */
static int resume_value(void *obj, yc_opt_state *s)
{
    train_cli *c = obj;
    if (yc_opt_given(s, "resume") && !c->resume && optind < s->argc)
        c->resume = s->argv[optind++];
    return 0;
}

/* --evolve [N]: N generations, 300 when bare (argparse's const=300) */
static int evolve(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    train_cli *c = obj;
    c->evolve = 300;
    /* the value may also be the next argument (argparse nargs='?') */
    if (!arg && optind < s->argc && s->argv[optind][0] != '-')
        arg = s->argv[optind++];
    return arg ? yc_cli_int(s->spec->cmd, "--evolve", arg, 1, 1000000, &c->evolve) : 0;
}

/* train.py's main with --evolve: its checks, the runs/evolve project, the generations. */
static int run_evolve(train_cli *c, const yc_opt_state *s)
{
    if (c->o.resume)
        return yc_usage_error(s->spec->cmd, "--resume is not allowed with --evolve (evolve.csv "
                              "is the state: rerun --evolve with --exist-ok into the same "
                              "--project/--name to continue)");
    if (yc_dist_size() > 1)
        return yc_usage_error(s->spec->cmd, "--evolve is not compatible with distributed "
                              "training (mpirun)");
    if (!yc_opt_given(s, "project"))
        c->o.project = "runs/evolve"; /* opt.project = str(ROOT / 'runs/evolve') */
    bool interrupted = false;
    int st = yc_evolve(&c->o, c->evolve, &interrupted);
    if (st)
        return yc_report_failure(st);
    if (interrupted) {
        fprintf(stderr, "yolocl: evolution interrupted; continue it with --evolve N --exist-ok "
                        "and the same --project/--name\n");
        return 130;
    }
    return YC_EXIT_OK;
}

/* The checks across options, and the demo's settings without --data. */
static int finish_options(train_cli *c, const yc_opt_state *s)
{
    yc_train_opts *o = &c->o;
    bool resume = yc_opt_given(s, "resume");
    int st;
    if ((st = yc_cli_run_name(s->spec->cmd, o->project, o->name)))
        return st;
    if (!resume && o->data && o->data[0] && !(o->cfg && o->cfg[0]) &&
        !(o->weights && o->weights[0]))
        return yc_usage_error(s->spec->cmd, "give --cfg (a model config) or --weights (a model to "
                              "start from)");
    if (resume)
        o->resume = c->resume ? c->resume : "";
    if (!resume && (!o->data || !o->data[0])) {
        /* the demo: yolov5n from scratch unless told otherwise */
        if (!o->cfg && !o->weights)
            o->cfg = DEMO_CFG;
        if (!yc_opt_given(s, "epochs"))
            o->epochs = DEMO_EPOCHS;
        if (!yc_opt_given(s, "imgsz"))
            o->imgsz = DEMO_IMGSZ;
    }
    return 0;
}

/* The task of the model --cfg names, or of --weights given alone (YC_TASK_DETECT when there is
 * none or it does not load:
 * train reports a bad config itself).  A classifier's run takes classify/train.py's defaults for
 * the options not given, a segmentation model's segment/train.py's (--project runs/train-seg). */
static yc_task cfg_task(train_cli *c, const yc_opt_state *s)
{
    yc_train_opts *o = &c->o;
    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_task task;
    if (o->resume) {
        /* --resume: the task of the model the checkpoint holds (classifier checkpoints carry
         * their options too: classify_train.h); none found: train reports it */
        char ckpt[2300];
        if (yc_train_find_resume(o->resume, o->project ? o->project : "runs/train", ckpt,
                                 sizeof ckpt)) {
            yc_error_clear();
            return YC_TASK_DETECT;
        }
        task = yc_cli_model_task(ckpt, NULL, "yolocl train");
        yc_error_clear();
        return task == YC_TASK_CLASSIFY ? task : YC_TASK_DETECT;
    }
    if (!c->resume && (!o->cfg || !o->cfg[0]) && o->weights && o->weights[0]) {
        /* --weights alone: a classifier's weights train a classifier (a .pt of classify/train.py
         * has no config: the state dict's shapes tell) */
        task = yc_cli_model_task(o->weights, NULL, "yolocl train");
        yc_error_clear(); /* its message for a segmentation model: train takes them */
    } else if (c->resume || !o->cfg || !o->cfg[0] || yc_model_cfg_find(o->cfg, path, sizeof path) ||
               yc_model_cfg_load(&cfg, path, 0)) {
        yc_error_clear();
        return YC_TASK_DETECT;
    } else {
        task = cfg->task;
    }
    /* --cutoff makes a classifier of a detection config, as classify/train.py does */
    if (task == YC_TASK_DETECT && yc_opt_given(s, "cutoff"))
        task = YC_TASK_CLASSIFY;
    yc_model_cfg_free(cfg);
    if (task == YC_TASK_SEGMENT && !yc_opt_given(s, "project"))
        o->project = "runs/train-seg";
    if (task == YC_TASK_CLASSIFY) {
        if (!yc_opt_given(s, "imgsz"))
            o->imgsz = o->data && o->data[0] ? YC_CLS_IMGSZ : YC_CLS_DEMO_IMGSZ;
        if (!yc_opt_given(s, "optimizer"))
            o->optimizer = YC_OPTIM_ADAM;
        if (!yc_opt_given(s, "label-smoothing"))
            o->label_smoothing = YC_CLS_LABEL_SMOOTHING;
    }
    return task;
}

/* The exit status of a training run (yc_train's or yc_classify_train's status st, interrupted
 * when SIGINT stopped it), after ending MPI: a failing rank of several ends them all
 * (MPI_Abort), as the others may be waiting in a collective operation for it; an interrupted
 * run says how to resume and exits 130. */
static int train_exit(int st, bool interrupted)
{
    if (st && yc_dist_size() > 1) {
        int code = yc_report_failure(st);
        yc_dist_abort(code, "this rank failed (see above): stopping every rank");
    }
    /* said before MPI_Finalize: its barrier keeps every rank until all have said it, and the first
     * rank to exit with 130 makes mpirun kill the others */
    if (!st && interrupted)
        fprintf(stderr, "yolocl: training interrupted; resume it with: yolocl train --resume\n");
    yc_dist_finalize();
    if (st)
        return yc_report_failure(st);
    return interrupted ? 130 : YC_EXIT_OK;
}

int yc_cmd_train(int argc, char **argv)
{
    train_cli c = {.resume = NULL};
    yc_train_opts_defaults(&c.o);
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &c, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    if ((st = finish_options(&c, &s)))
        return st;
    yc_task task = cfg_task(&c, &s);
    if (task != YC_TASK_CLASSIFY && (yc_opt_given(&s, "cutoff") || yc_opt_given(&s, "dropout")))
        return yc_usage_error(s.spec->cmd, "--cutoff and --dropout apply to classifiers (a -cls "
                              "--cfg, or --cutoff with a detection --cfg)");
    /* MPI when started by mpirun (dist.h); otherwise rank 0 of 1 */
    if ((st = yc_dist_init(NULL, NULL))) {
        yc_dist_finalize();
        return yc_report_failure(st);
    }
    if (task == YC_TASK_CLASSIFY) {
        /* classify/train.py, under mpirun its DDP (classify_train.h) */
        bool stopped = false;
        st = yc_classify_train(&c.o, &stopped);
        return train_exit(st, stopped);
    }
    if (c.evolve > 0 && task == YC_TASK_SEGMENT) {
        yc_dist_finalize();
        return yc_usage_error(s.spec->cmd, "--evolve is not supported for segmentation models "
                              "yet (evolve.csv has train.py's detection columns)");
    }
    if (c.evolve > 0) {
        st = run_evolve(&c, &s);
        yc_dist_finalize();
        return st;
    }
    bool interrupted = false;
    st = yc_train(&c.o, &interrupted);
    return train_exit(st, interrupted);
}
