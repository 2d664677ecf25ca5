/* yolocl val: YOLOv5 v7.0 val.py on a dataset split (see val.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "classify_cmds.h"
#include "cli.h"
#include "commands.h"
#include "dataset.h"
#include "detect.h"
#include "device.h"
#include "graph.h"
#include "loader.h"
#include "log.h"
#include "options.h"
#include "plots.h"
#include "rundir.h"
#include "tileset.h"
#include "util.h"
#include "val.h"
#include "val_full.h"

/* The command line. */
typedef struct val_cli {
    const char *data, *weights, *cfg, *project, *name, *device;
    int img, batch, max_det, workers, tile, split;
    float conf, iou;
    bool single_cls, verbose, save_txt, save_conf, save_json, exist_ok, val_full;
    yc_slice_options so;
    size_t max_pixels;
    /* YOLOv5 v7.0 val.py's --augment, --half, --save-hybrid (issue 31) */
    bool augment, half, save_hybrid;
    /* --task speed or study (the split is then val) */
    int task;
    /* --img was given (a classifier's default is 224, not 640) */
    bool img_given;
} val_cli;

/* --task beyond the splits: val.py's speed benchmark and its mAP/time study over image sizes */
enum { TASK_SPLIT = 0, TASK_SPEED, TASK_STUDY };

/* val.py's study: image sizes 256 to 1536 in steps of 128 */
#define STUDY_FIRST 256
#define STUDY_LAST 1536
#define STUDY_STEP 128
#define STUDY_SIZES ((STUDY_LAST - STUDY_FIRST) / STUDY_STEP + 1)

static int task_option(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    val_cli *c = obj;
    c->task = TASK_SPLIT;
    c->split = YC_SPLIT_VAL;
    if (!strcmp(arg, "speed") || !strcmp(arg, "study")) {
        c->task = arg[1] == 'p' ? TASK_SPEED : TASK_STUDY;
        return 0;
    }
    for (int k = 0; k < YC_SPLIT_COUNT; k++)
        if (!strcmp(arg, yc_split_name((yc_split)k))) {
            c->split = k;
            return 0;
        }
    return yc_usage_error(s->spec->cmd, "invalid value '%s' for --task: expected val, test, "
                          "train, speed or study", arg);
}

#define T val_cli
static const yc_option rows[] = {
    YC_OPT_STRING('d', "data", "FILE", T, data, "dataset yaml"),
    YC_OPT_STRING('w', "weights", "FILE", T, weights,
                  "weights (safetensors with YOLOv5 state-dict names)"),
    YC_OPT_STRING('c', "cfg", "MODEL", T, cfg,
                  "model config of the weights: a bundled name (yolov5n, ...) or\na model yaml"),
    {.type = YC_OPT_T_INT, .name = "img", .aliases = {"imgsz", "img-size"}, .metavar = "SIZE",
     .offset = offsetof(T, img), .lo = 32, .hi = 16384,
     .help = "inference size, pixels (default 640; rounded up to a multiple\n"
             "of the largest stride)"},
    {.type = YC_OPT_T_INT, .short_name = 'b', .name = "batch", .aliases = {"batch-size"},
     .metavar = "N", .offset = offsetof(T, batch), .lo = 1, .hi = 4096,
     .help = "batch size (default 32)"},
    YC_OPT_FLOAT(0, "conf-thres", "X", T, conf, 0, 1, "confidence threshold (default 0.001)"),
    YC_OPT_FLOAT(0, "iou-thres", "X", T, iou, 0, 1, "NMS IoU threshold (default 0.6)"),
    YC_OPT_INT(0, "max-det", "N", T, max_det, 1, 100000,
               "maximum detections per image (default 300)"),
    YC_OPT_CALLBACK(0, "task", "T", T, task, task_option,
                    "split: val, test or train (default val); speed: val with\n"
                    "conf 0.25, IoU 0.45, no plots or JSON, for the speed line;\n"
                    "study: mAP and times at --img 256 to 1536 (step 128)\n"
                    "into study_<data>_<weights>.txt and study.png"),
    YC_OPT_BOOL(0, "augment", T, augment,
                "test-time augmentation: scales 1, 0.83, 0.67, the second\n"
                "flipped left-right, merged before NMS (YOLOv5's)"),
    YC_OPT_BOOL(0, "half", T, half,
                "FP16 storage of the activations (arithmetic stays FP32)"),
    YC_OPT_BOOL(0, "save-hybrid", T, save_hybrid,
                "labels join the predictions before NMS (autolabelling);\n"
                "implies --save-txt; the mAP is then not the model's"),
    YC_OPT_BOOL(0, "single-cls", T, single_cls, "treat every class as one"),
    YC_OPT_BOOL(0, "verbose", T, verbose, "per-class results for any number of classes"),
    YC_OPT_BOOL(0, "save-txt", T, save_txt, "save detections to labels/*.txt"),
    YC_OPT_BOOL(0, "save-conf", T, save_conf, "with --save-txt, add the confidence"),
    YC_OPT_BOOL(0, "save-json", T, save_json, "save a COCO-style predictions JSON"),
    YC_OPT_TILE(T, tile, "evaluate SIZE x SIZE windows of the images, each with its\n"
                         "clipped labels (default: the dataset yaml's tile:, else\n"
                         "whole images; 0 = whole images)"),
    YC_OPT_BOOL(0, "val-full", T, val_full, "with tiles: evaluate whole images, detected by SIZE x SIZE\n"
                                            "slices merged as detect --slice does"),
    YC_OPTS_SLICE(T, so,
                  "with --val-full: overlap of the slices (default the\n"
                  "dataset yaml's tile_overlap, 0.2)",
                  1, "nms-ios, nms or nmm",
                  "with --val-full: nms-ios (default; suppression by\n"
                  "intersection over the smaller box), nms (by IoU) or nmm\n"
                  "(merging by intersection over the smaller box), as detect",
                  "with --val-full: merge overlap threshold (default 0.5)",
                  "with --val-full: add a pass on the whole image reduced to\n--img"),
    YC_OPTS_RUN_DIR(T, project, name, exist_ok, "parent of the run directory (default runs/val)",
                    "run directory name (default exp; exp2, exp3... when taken)",
                    "reuse an existing run directory"),
    YC_OPT_INT(0, "workers", "N", T, workers, 0, 256,
               "loader threads (default 8, at most the batch size and CPUs)"),
    YC_OPTS_DEVICE(T, device),
    YC_OPT_PIXELS("max-pixels", "N|WxH", T, max_pixels,
                  "most pixels one image read may decode (default 2^30);\n"
                  "larger images are left out: validate them with --tile"),
    YC_OPT_HELP(),
    YC_OPT_TEXT("\n"
                "Images larger than 4096x4096 pixels are read reduced to --img while they decode,\n"
                "never whole.\n"),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "val",
    .head = "Usage: yolocl val --data DATA.yaml --weights W [--cfg MODEL] [options]\n"
            "Validate a model on a dataset split as YOLOv5's val.py: P, R, mAP@0.5, mAP@0.5:0.95,\n"
            "per-class results, speed, plots in runs/val/expN.\n"
            "\n",
    .rows = rows,
    .help_col = 25,
};

/* The options, with the checks across them: 0, YC_OPT_DONE (--help) or a usage error. */
static int parse(int argc, char **argv, val_cli *c)
{
    *c = (val_cli){.project = "runs/val", .name = "exp", .device = "auto", .img = 640,
                   .batch = 32, .max_det = 300, .workers = 8, .tile = -1,
                   .split = YC_SPLIT_VAL, .conf = 0.001f, .iou = 0.6f};
    yc_slice_options_default(&c->so);
    c->so.merge = yc_merge_params_nms_ios();
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, c, &s);
    if (st)
        return st;
    if (!yc_opt_given(&s, "slice-overlap"))
        c->so.overlap = -1; /* the dataset yaml's */
    c->img_given = yc_opt_given(&s, "img");
    if (!c->data || !c->weights)
        return yc_usage_error(spec.cmd, "--data and --weights are required");
    if (yc_opt_slice_given(&s) && !c->val_full)
        return yc_usage_error(spec.cmd, "--slice-overlap, --slice-merge, --slice-thres and "
                                        "--slice-full need --val-full");
    if (c->val_full && c->tile == 0)
        return yc_usage_error(spec.cmd, "--val-full needs tiles: --tile SIZE (not 0)");
    if ((st = yc_cli_run_name(spec.cmd, c->project, c->name)))
        return st;
    if (c->augment && c->val_full)
        return yc_usage_error(spec.cmd, "--augment with --val-full is not supported: the slices "
                                        "are already a multi-scale view (use one or the other)");
    if (c->save_hybrid && (c->tile > 0 || c->val_full))
        return yc_usage_error(spec.cmd, "--save-hybrid needs whole images (not --tile or "
                                        "--val-full)");
    c->save_txt |= c->save_hybrid; /* opt.save_txt |= opt.save_hybrid */
    if (c->task == TASK_SPLIT) {
        if (c->conf > 0.001f)
            yc_warn("confidence threshold %g > 0.001 produces invalid results", (double)c->conf);
        if (c->save_hybrid)
            yc_warn("--save-hybrid will return high mAP from hybrid labels, not from predictions "
                    "alone");
    } else if (c->task == TASK_SPEED) {
        /* opt.conf_thres, opt.iou_thres, opt.save_json = 0.25, 0.45, False */
        c->conf = 0.25f;
        c->iou = 0.45f;
        c->save_json = false;
    }
    return 0;
}

/* What a validation holds. */
typedef struct val_run {
    yc_data_yaml y;
    bool have_yaml;
    yc_dataset ds;
    yc_backend *be;
    yc_infer_model im;
    yc_loader *loader;
    yc_tileset tiles;
    yc_val_result res;
    int imgsz;
    char save_dir[4096];
} val_run;

static void val_run_free(val_run *r)
{
    yc_val_result_free(&r->res);
    yc_loader_free(r->loader);
    yc_tileset_free(&r->tiles);
    yc_dataset_free(&r->ds);
    yc_infer_model_free(&r->im);
    yc_backend_free(r->be);
    if (r->have_yaml)
        yc_data_yaml_free(&r->y);
}

/* The dataset yaml and what it settles: the tile size, the checks of the options against it. */
static int open_data(val_cli *c, val_run *r)
{
    int st = yc_data_yaml_load(c->data, &r->y);
    if (st)
        return st;
    r->have_yaml = true;
    if (c->tile < 0)
        c->tile = r->y.tile;
    if (c->val_full && c->tile <= 0)
        return yc_error_status(YC_EUSAGE, "--val-full needs tiles: --tile SIZE or tile: in %s",
                               c->data);
    if (c->tile > 0 && !c->val_full && (c->save_txt || c->save_json))
        return yc_error_status(YC_EUSAGE, "--save-txt and --save-json write whole-image "
                               "results: with tiles (--tile %d) add --val-full, or use yolocl "
                               "detect --slice", c->tile);
    if (c->task == TASK_STUDY && (c->tile > 0 || c->val_full))
        return yc_error_status(YC_EUSAGE, "--task study needs whole images (not --tile or "
                               "--val-full)");
    if (r->y.n_entries[c->split] == 0)
        return yc_error_status(YC_EUSAGE, "%s has no '%s' images", c->data,
                               yc_split_name((yc_split)c->split));
    return YC_OK;
}

/* The device and the model of the weights, checked against the dataset. */
static int open_model(const val_cli *c, val_run *r)
{
    int st = yc_open_infer_model(c->device, c->weights, c->cfg, &r->be, &r->im);
    if (st)
        return st;
    yc_model *m = r->im.m;
    if (!c->single_cls && m->nc != r->y.nc)
        return yc_error_status(YC_EUSAGE, "%s (%d classes) trained on different --data than "
                               "what you passed (%d classes). Pass correct combination of "
                               "--weights and --data that are trained together.", c->weights,
                               m->nc, r->y.nc);
    if (c->half && (st = yc_half_check(r->be, spec.cmd)))
        return st;
    r->imgsz = yc_check_img_size(c->img, r->im.stride, 0);
    if (r->imgsz != c->img)
        yc_warn("--img-size %d must be multiple of max stride %d, updating to %d", c->img,
                r->im.stride, r->imgsz);
    return YC_OK;
}

/* The split's images, their tiles, and the loader (not for --val-full). */
static int open_images(const val_cli *c, val_run *r, const char *prefix)
{
    yc_dataset_options dopt = {.nc = r->y.nc, .single_cls = c->single_cls, .prefix = prefix};
    int st = yc_dataset_load_split(&r->y, (yc_split)c->split, &dopt, &r->ds);
    if (st)
        return st;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nw = c->workers;
    if (cpus > 0 && nw > cpus)
        nw = (int)cpus;
    if (nw > c->batch)
        nw = c->batch;
    if (nw < 1)
        nw = 1;
    if (c->tile > 0 && !c->val_full) {
        yc_tile_options to = {.tile = c->tile, .overlap = r->y.tile_overlap,
                              .min_area = r->y.tile_min_area};
        if ((st = yc_tileset_make(&r->ds, &to, &r->tiles)))
            return st;
        yc_tileset_report(&r->tiles, prefix);
    }
    yc_loader_options lo = {.ds = &r->ds, .train = false, .imgsz = r->imgsz, .batch = c->batch,
                            .rect = true, .pad = 0.5, .stride = r->im.stride, .workers = nw,
                            .tiles = c->tile > 0 ? &r->tiles : NULL,
                            .limits = {.max_pixels = c->max_pixels}};
    if (r->im.m->nm > 0) {
        /* segment/val.py run alone: overlap=False, mask_downsample_ratio=1 (one mask per label
         * at the batch image's size) */
        if (!r->ds.has_polygons)
            return yc_error_status(YC_EUSAGE, "%s is a segmentation model and the '%s' labels "
                                   "of %s have no polygons: validate it on a segmentation "
                                   "dataset", c->weights, yc_split_name((yc_split)c->split),
                                   c->data);
        lo.masks = true;
        lo.mask_ratio = 1;
        lo.no_overlap = true;
    }
    return c->val_full ? YC_OK : yc_loader_new(&r->loader, &lo);
}

/* Validates into the run directory. */
static int run(val_cli *c, val_run *r)
{
    int st = yc_run_dir(c->project, c->name, c->exist_ok, NULL, r->save_dir, sizeof r->save_dir);
    if (st)
        return st;
    char stem[256], json_name[300];
    yc_path_stem(c->weights, stem, sizeof stem);
    snprintf(json_name, sizeof json_name, "%s_predictions.json", stem);
    yc_model *m = r->im.m;
    const char *const *names = r->im.names ? (const char *const *)r->im.names
                                           : (const char *const *)r->y.names;
    yc_val_options vo;
    yc_val_options_default(&vo);
    vo.conf_thres = c->conf;
    vo.iou_thres = c->iou;
    vo.max_det = c->max_det;
    vo.single_cls = c->single_cls;
    vo.verbose = c->verbose;
    vo.imgsz = r->imgsz;
    vo.batch = c->batch;
    vo.save_dir = r->save_dir;
    vo.plots = c->task == TASK_SPLIT; /* run(..., plots=False) for speed and study */
    vo.augment = c->augment;
    vo.half = c->half;
    vo.save_hybrid = c->save_hybrid;
    vo.save_txt = c->save_txt;
    vo.save_conf = c->save_conf;
    vo.save_json = c->save_json;
    vo.json_name = json_name;
    vo.coco91 = m->nc == 80 && names && names[0] && !strcmp(names[0], "person");
    vo.mask_overlap = false; /* as open_images made the loader for a segmentation model */
    if (c->val_full) {
        c->so.tile = c->tile;
        if (c->so.overlap < 0)
            c->so.overlap = r->y.tile_overlap;
        vo.batch = 1;
        return yc_validate_full(m, r->im.stride, &r->ds, names, &vo, &c->so, &r->res);
    }
    const yc_dataset *view = c->tile > 0 ? &r->tiles.view : &r->ds;
    return yc_validate(m, r->loader, view, names, &vo, NULL, &r->res);
}

/* val.py's study: one validation per image size (each its own run directory), the rows
 * (P, R, mAP@0.5, mAP@0.5:0.95, the three losses, the three times) written as np.savetxt(f, y,
 * fmt='%10.4g') into study_<data stem>_<weights stem>.txt in the current directory, then
 * plot_val_study's study.png beside it. */
static int study(val_cli *c, val_run *r, const char *prefix)
{
    char dstem[256], wstem[256], file[600];
    yc_path_stem(c->data, dstem, sizeof dstem);
    yc_path_stem(c->weights, wstem, sizeof wstem);
    snprintf(file, sizeof file, "study_%s_%s.txt", dstem, wstem);
    double y[STUDY_SIZES][10];
    int st = YC_OK, n = 0;
    for (int sz = STUDY_FIRST; sz <= STUDY_LAST; sz += STUDY_STEP, n++) {
        printf("\nRunning %s --imgsz %d...\n", file, sz);
        c->img = sz;
        r->imgsz = yc_check_img_size(sz, r->im.stride, 0);
        yc_loader_free(r->loader);
        r->loader = NULL;
        yc_dataset_free(&r->ds);
        yc_val_result_free(&r->res);
        if ((st = open_images(c, r, prefix)) || (st = run(c, r)))
            return st;
        const yc_val_metrics *mt = &r->res.metrics;
        double row[10] = {mt->mp, mt->mr, mt->map50, mt->map, r->res.loss[0], r->res.loss[1],
                          r->res.loss[2], r->res.t_pre, r->res.t_inf, r->res.t_nms};
        memcpy(y[n], row, sizeof row);
    }
    yc_atomic_file af;
    if ((st = yc_atomic_open(&af, file)))
        return yc_error_context(st, "writing %s", file);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 10; k++)
            fprintf(af.f, "%10.4g%s", y[i][k], k < 9 ? " " : "\n");
    if ((st = yc_atomic_commit(&af)))
        return yc_error_context(st, "writing %s", file);
    /* plot_val_study: mAP@0.5:0.95 * 100 against the inference time, up to its best size */
    float x[STUDY_SIZES], ym[STUDY_SIZES], xmax = 0, ymax = 0;
    int j = 0;
    for (int i = 1; i < n; i++)
        if (y[i][3] > y[j][3])
            j = i;
    int np = 0;
    for (int i = 1; i <= j; i++, np++) {
        x[np] = (float)y[i][8];
        ym[np] = (float)(y[i][3] * 100);
        xmax = x[np] > xmax ? x[np] : xmax;
        ymax = ym[np] > ymax ? ym[np] : ymax;
    }
    const char *label = wstem;
    yc_curve_plot p = {.xlabel = "Speed (ms/img)", .ylabel = "AP val", .n_points = np, .x = x,
                       .n_series = 1, .y = ym, .series_labels = &label, .xmin = 0,
                       .xmax = xmax > 0 ? xmax * 1.1f : 1, .ymin = 0,
                       .ymax = ymax > 0 ? ymax * 1.1f : 1};
    printf("Saving study.png...\n");
    if ((st = yc_plot_curves("study.png", &p)))
        return yc_error_context(st, "plotting study.png");
    printf("Study saved to %s and study.png\n", file);
    return YC_OK;
}

int yc_cmd_val(int argc, char **argv)
{
    val_cli c;
    int st = parse(argc, argv, &c);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    yc_task task = yc_cli_model_task(c.weights, c.cfg, "yolocl val");
    if (task == YC_TASK_SEGMENT) {
        /* segment/val.py: validated here; the refusal it set is not ours */
        yc_error_clear();
        if (c.tile > 0 || c.val_full || c.augment || c.save_hybrid || c.task == TASK_STUDY)
            return yc_report_failure(yc_error_status(
                YC_EUSAGE, "%s is a segmentation model: it is validated on whole images "
                           "without --tile, --val-full, --augment, --save-hybrid and --task study",
                c.weights));
    }
    if (task == YC_TASK_CLASSIFY) {
        st = yc_cli_classify_val(c.weights, c.cfg, c.data, c.img_given ? c.img : 0, c.batch,
                                 c.device);
        return st ? yc_report_failure(st) : YC_EXIT_OK;
    }
    val_run r;
    memset(&r, 0, sizeof r);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s: ", yc_split_name((yc_split)c.split));
    if (c.task == TASK_STUDY) {
        if (!(st = open_data(&c, &r)) && !(st = open_model(&c, &r)))
            st = study(&c, &r, prefix);
    } else if (!(st = open_data(&c, &r)) && !(st = open_model(&c, &r)) &&
        !(st = open_images(&c, &r, prefix)) && !(st = run(&c, &r))) {
        printf("Results saved to %s\n", r.save_dir);
        if (c.save_txt)
            printf("%d labels saved to %s/labels\n", r.res.n_label_files, r.save_dir);
    }
    val_run_free(&r);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
