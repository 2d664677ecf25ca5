/* yolocl detect: YOLOv5 v7.0 detect.py on images, videos and streams (see detect.h). */
#include <getopt.h>
#include <signal.h>
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
#include "log.h"
#include "options.h"
#include "rundir.h"
#include "slice.h"
#include "val.h"
#include "video.h"

#define MAX_CLASSES 4096

/* The command line. */
typedef struct detect_cli {
    const char *weights, *cfg, *source, *data, *project, *name, *device;
    int img_h, img_w, max_det, line, vid_stride;
    float conf, iou;
    bool agnostic, save_txt, save_conf, save_crop, nosave, hide_labels, hide_conf, exist_ok;
    int classes[MAX_CLASSES];
    int n_classes;
    yc_slice_options so;
    size_t max_pixels;
    /* --img was given (a classifier's default is 224, not 640) */
    bool img_given;
    /* YOLOv5 v7.0 detect.py's --augment, --half, --view-img (issue 31) */
    bool augment, half, view_img, visualize;
    /* segment/predict.py's --retina-masks (segmentation models) */
    bool retina_masks;
} detect_cli;

static int img_size(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
static int classes(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);

#define T detect_cli
static const yc_option rows[] = {
    YC_OPT_STRING('w', "weights", "FILE", T, weights,
                  "weights (safetensors with YOLOv5 state-dict names)"),
    YC_OPT_STRING('c', "cfg", "MODEL", T, cfg,
                  "model config of the weights: a bundled name (yolov5n, ...)\nor a model yaml"),
    YC_OPT_STRING('s', "source", "PATH", T, source,
                  "an image or video, a directory of them, a glob\n"
                  "('dir/*.jpg'), a stream URL (rtsp, rtmp, http) or a\n"
                  "webcam number (0)"),
    YC_OPT_STRING(0, "data", "FILE", T, data,
                  "dataset yaml whose names label the classes (when the\nweights carry none)"),
    {.type = YC_OPT_T_CALLBACK, .name = "img", .aliases = {"imgsz", "img-size"},
     .metavar = "H [W]", .fn = img_size,
     .help = "inference size (default 640; rounded up to a multiple of\nthe largest stride)"},
    YC_OPT_FLOAT(0, "conf-thres", "X", T, conf, 0, 1, "confidence threshold (default 0.25)"),
    YC_OPT_FLOAT(0, "iou-thres", "X", T, iou, 0, 1, "NMS IoU threshold (default 0.45)"),
    YC_OPT_INT(0, "max-det", "N", T, max_det, 1, 100000,
               "maximum detections per image (default 1000)"),
    YC_OPT_CALLBACK(0, "classes", "C [C ...]", T, classes, classes, "keep only these classes"),
    YC_OPT_BOOL(0, "agnostic-nms", T, agnostic, "class-agnostic NMS"),
    YC_OPT_BOOL(0, "save-txt", T, save_txt, "save labels/*.txt (class x y w h, normalised)"),
    YC_OPT_BOOL(0, "save-conf", T, save_conf, "with --save-txt, add the confidence"),
    YC_OPT_BOOL(0, "save-crop", T, save_crop, "save each box's crop in crops/<class>/"),
    YC_OPT_BOOL(0, "nosave", T, nosave, "do not save annotated images"),
    YC_OPT_INT(0, "line-thickness", "N", T, line, 1, 100, "box line width in pixels (default 3)"),
    YC_OPT_BOOL(0, "hide-labels", T, hide_labels, "draw boxes without labels"),
    YC_OPT_BOOL(0, "hide-conf", T, hide_conf, "labels without confidences"),
    YC_OPT_INT(0, "vid-stride", "N", T, vid_stride, 1, 100000,
               "detect in every Nth frame of a video (default 1)"),
    YC_OPTS_RUN_DIR(T, project, name, exist_ok,
                    "parent of the run directory (default runs/detect)",
                    "run directory name (default exp; exp2, exp3... when taken)",
                    "reuse an existing run directory"),
    YC_OPTS_DEVICE(T, device),
    YC_OPT_PIXELS("max-pixels", "N|WxH", T, max_pixels,
                  "most pixels one image read may decode (default 2^30);\n"
                  "larger images are skipped: detect them with --slice"),
    YC_OPT_BOOL(0, "augment", T, augment,
                "test-time augmentation: scales 1, 0.83, 0.67, the second\n"
                "flipped left-right, merged before NMS (YOLOv5's)"),
    YC_OPT_BOOL(0, "half", T, half,
                "FP16 storage of the activations (arithmetic stays FP32)"),
    YC_OPT_BOOL(0, "visualize", T, visualize,
                "save every layer's feature maps per image: <stem>/stage*\n"
                "png (32 channels) and .npy (the whole output)"),
    YC_OPT_BOOL(0, "retina-masks", T, retina_masks,
                "segmentation models: blend the masks over the picture at\n"
                "its own resolution (segment/predict.py --retina-masks)"),
    YC_OPT_BOOL(0, "view-img", T, view_img,
                "accepted with a warning: no display library is built in;\n"
                "open the saved images instead"),
    YC_OPT_TEXT("\n"
                "Images larger than 4096x4096 pixels are read reduced to --img while they decode, never\n"
                "whole, and their annotated copy is drawn strip by strip.\n"
                "\n"
                "Sliced detection of large images (SAHI):\n"),
    YC_OPT_INT(0, "slice", "SIZE", T, so.tile, 32, 16384,
               "detect in SIZE x SIZE windows of each image and merge the\n"
               "results; --img defaults to SIZE (rounded to the stride)"),
    YC_OPTS_SLICE(T, so,
                  "fraction of a window shared with its neighbour (default\n0.2, below 1)",
                  0, "nmm or nms",
                  "nmm (merge overlapping boxes, intersection over smaller;\n"
                  "default) or nms (suppress, intersection over union)",
                  "overlap above which boxes of one class merge (default 0.5)",
                  "also detect on the whole image reduced to --img"),
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "detect",
    .head = "Usage: yolocl detect --weights W [--cfg MODEL] --source PATH [options]\n"
            "Detect objects in images and videos as YOLOv5's detect.py; results in\n"
            "runs/detect/expN.\n"
            "\n",
    .rows = rows,
    .help_col = 27,
};

/* Parses one --classes value (a number or a comma-separated list) into classes[]. */
static int add_classes(const char *cmd, const char *arg, int *classes, int *n)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", arg);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= MAX_CLASSES)
            return yc_usage_error(cmd, "too many --classes");
        int st = yc_cli_int(cmd, "--classes", tok, 0, 100000, &classes[*n]);
        if (st)
            return st;
        (*n)++;
    }
    return 0;
}

/* --img H [W]: a second value when the next argument is a number */
static int img_size(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    detect_cli *c = obj;
    return yc_opt_img_hw(arg, s, &c->img_h, &c->img_w);
}

/* --classes C [C ...]: numbers or comma-separated lists, also in the following arguments */
static int classes(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    detect_cli *c = obj;
    int st = add_classes(s->spec->cmd, arg, c->classes, &c->n_classes);
    while (!st && optind < s->argc && yc_opt_is_uint(s->argv[optind]))
        st = add_classes(s->spec->cmd, s->argv[optind++], c->classes, &c->n_classes);
    return st;
}

/* The options, with the checks across them: 0, YC_OPT_DONE (--help) or a usage error. */
static int parse(int argc, char **argv, detect_cli *c)
{
    memset(c, 0, sizeof *c);
    c->project = "runs/detect";
    c->name = "exp";
    c->device = "auto";
    c->img_h = c->img_w = 640;
    c->max_det = 1000;
    c->line = 3;
    c->vid_stride = 1;
    c->conf = 0.25f;
    c->iou = 0.45f;
    yc_slice_options_default(&c->so);
    c->so.tile = 0;
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, c, &s);
    if (st)
        return st;
    if (!c->weights || !c->source)
        return yc_usage_error(spec.cmd, "--weights and --source are required");
    if ((st = yc_cli_run_name(spec.cmd, c->project, c->name)))
        return st;
    if (yc_opt_slice_given(&s) && !c->so.tile)
        return yc_usage_error(spec.cmd, "--slice-overlap, --slice-merge, --slice-thres and "
                                        "--slice-full need --slice SIZE");
    c->img_given = yc_opt_given(&s, "img");
    if (c->so.tile && !yc_opt_given(&s, "img"))
        c->img_h = c->img_w = c->so.tile;
    if (c->augment && c->so.tile)
        return yc_usage_error(spec.cmd, "--augment with --slice is not supported: the slices are "
                                        "already a multi-scale view (use one or the other)");
    if (c->visualize && (c->augment || c->so.tile))
        yc_warn("--visualize does nothing with %s (YOLOv5's augmented forward does not "
                "visualize)", c->augment ? "--augment" : "--slice");
    if (c->view_img)
        yc_warn("--view-img: yolocl has no display library built in; the annotated images are "
                "saved in the run directory%s", c->nosave ? " (not with --nosave)" : "");
    return 0;
}

/* What a detection run holds. */
typedef struct detect_run {
    yc_backend *be;
    yc_infer_model im;
    yc_data_yaml y;
    yc_path_list files;
    yc_detector *det;
    const char *const *names;
} detect_run;

static void detect_run_free(detect_run *r)
{
    yc_detector_free(r->det);
    yc_infer_model_free(&r->im);
    yc_backend_free(r->be);
    yc_data_yaml_free(&r->y);
    yc_path_list_free(&r->files);
}

/* The images, the class names, the model and its detector. */
static int open_detector(const detect_cli *c, detect_run *r)
{
    int st;
    if ((st = yc_detect_sources(c->source, &r->files)) ||
        (c->data && (st = yc_data_yaml_load(c->data, &r->y))) ||
        (st = yc_open_infer_model(c->device, c->weights, c->cfg, &r->be, &r->im)))
        return st;
    const yc_model *m = r->im.m;
    for (int i = 0; i < c->n_classes; i++)
        if (c->classes[i] >= m->nc)
            yc_warn("--classes %d: the model has only %d classes", c->classes[i], m->nc);
    int h = yc_check_img_size(c->img_h, r->im.stride, 0);
    int w = yc_check_img_size(c->img_w, r->im.stride, 0);
    if (h != c->img_h || w != c->img_w)
        yc_warn("--img-size %dx%d must be multiple of max stride %d, updating to %dx%d", c->img_h,
                c->img_w, r->im.stride, h, w);
    r->names = (const char *const *)r->im.names;
    if (!r->names && c->data) {
        if (r->y.nc == m->nc)
            r->names = (const char *const *)r->y.names;
        else
            yc_warn("%s has %d names but the model %d classes; using class numbers", c->data,
                    r->y.nc, m->nc);
    }
    yc_detect_options dopt;
    yc_detect_options_default(&dopt);
    dopt.img_h = h;
    dopt.img_w = w;
    dopt.conf_thres = c->conf;
    dopt.iou_thres = c->iou;
    dopt.max_det = c->max_det;
    dopt.classes = c->n_classes ? c->classes : NULL;
    dopt.n_classes = c->n_classes;
    dopt.agnostic = c->agnostic;
    /* sliced: every window and the full pass letterboxed to h x w, one graph planned for it */
    dopt.fixed_shape = c->so.tile > 0;
    dopt.augment = c->augment;
    if (c->half && (st = yc_half_check(r->be, spec.cmd)))
        return st;
    dopt.half = c->half;
    dopt.visualize = c->visualize && !c->augment && !c->so.tile;
    return yc_detector_new(&r->det, &r->im, &dopt);
}

/* A first SIGINT or SIGTERM ends detection after the frame in hand, finishing the annotated
 * video (a live source runs until then); a second one exits at once. */
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    if (stop_requested)
        _exit(128 + sig);
    stop_requested = 1;
}

/* Whether the sources hold a video or a live source. */
static bool has_video(const yc_path_list *files)
{
    for (size_t i = 0; i < files->n; i++)
        if (yc_is_video_path(files->paths[i]) || yc_is_live_source(files->paths[i]))
            return true;
    return false;
}

/* Detects in every image and video into the run directory. */
static int run(const detect_cli *c, detect_run *r)
{
    if (c->so.tile && has_video(&r->files))
        return yc_error_status(YC_EUSAGE, "--slice detects in images only, and %s holds videos "
                               "or is a stream: leave --slice out for them", c->source);
    if (r->im.m->nm > 0 && (c->so.tile || c->augment))
        return yc_error_status(YC_EUSAGE, "%s is a segmentation model: it is run without "
                               "--slice and --augment", c->weights);
    char save_dir[4096];
    int st = yc_run_dir(c->project, c->name, c->exist_ok, NULL, save_dir, sizeof save_dir);
    if (st)
        return st;
    yc_detect_save sv = {.save_dir = save_dir, .save_img = !c->nosave, .save_txt = c->save_txt,
                         .save_conf = c->save_conf, .save_crop = c->save_crop,
                         .line_thickness = c->line, .hide_labels = c->hide_labels,
                         .hide_conf = c->hide_conf, .print = true,
                         .limits = {.max_pixels = c->max_pixels},
                         .vid_stride = c->vid_stride, .stop = &stop_requested,
                         .visualize = c->visualize && !c->augment && !c->so.tile,
                         .retina_masks = c->retina_masks};
    yc_detect_summary sum;
    int nc = r->im.m->nc;
    if (c->so.tile) {
        st = yc_detect_files_sliced(r->det, &r->files, r->names, nc, &sv, &c->so, &sum);
    } else {
        struct sigaction sa, old_int, old_term;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        stop_requested = 0;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        st = yc_detect_files(r->det, &r->files, r->names, nc, &sv, &sum);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    if (!st && sum.images == 0 && r->files.n > 0 && !stop_requested)
        st = yc_error_status(YC_EFORMAT, "none of the %zu %s%s of %s could be read (see the "
                             "warnings above)", r->files.n,
                             has_video(&r->files) ? "source" : "image",
                             r->files.n == 1 ? "" : "s", c->source);
    return st;
}

int yc_cmd_detect(int argc, char **argv)
{
    /* static: the --classes list is large */
    static detect_cli c;
    int st = parse(argc, argv, &c);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    yc_task task = yc_cli_model_task(c.weights, c.cfg, "yolocl detect");
    /* segmentation models are run here (segment/predict.py); the refusal it set is not ours */
    if (task == YC_TASK_SEGMENT)
        yc_error_clear();
    if (task == YC_TASK_CLASSIFY) {
        st = yc_cli_classify_predict(c.weights, c.cfg, c.source, c.img_given ? c.img_h : 0,
                                     c.device);
        return st ? yc_report_failure(st) : YC_EXIT_OK;
    }
    detect_run r;
    memset(&r, 0, sizeof r);
    if (!(st = open_detector(&c, &r)))
        st = run(&c, &r);
    detect_run_free(&r);
    if (st)
        return yc_report_failure(st);
    if (stop_requested) {
        fprintf(stderr, "yolocl: detection interrupted; the results so far are saved\n");
        return 130;
    }
    return YC_EXIT_OK;
}
