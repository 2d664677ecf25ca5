/* yolocl detect: YOLOv5 v7.0 detect.py on image files (see detect.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "dataset.h"
#include "detect.h"
#include "device.h"
#include "graph.h"
#include "log.h"
#include "rundir.h"
#include "slice.h"
#include "val.h"

static void print_usage(void)
{
    fputs("Usage: yolocl detect --weights W [--cfg MODEL] --source PATH [options]\n"
          "Detect objects in images as YOLOv5's detect.py; results in runs/detect/expN.\n"
          "\n"
          "  -w, --weights FILE       weights (safetensors with YOLOv5 state-dict names)\n"
          "  -c, --cfg MODEL          model config of the weights: a bundled name (yolov5n, ...)\n"
          "                           or a model yaml\n"
          "  -s, --source PATH        an image, a directory of images or a glob ('dir/*.jpg')\n"
          "      --data FILE          dataset yaml whose names label the classes (when the\n"
          "                           weights carry none)\n"
          "      --img H [W]          inference size (default 640; rounded up to a multiple of\n"
          "                           the largest stride)\n"
          "      --conf-thres X       confidence threshold (default 0.25)\n"
          "      --iou-thres X        NMS IoU threshold (default 0.45)\n"
          "      --max-det N          maximum detections per image (default 1000)\n"
          "      --classes C [C ...]  keep only these classes\n"
          "      --agnostic-nms       class-agnostic NMS\n"
          "      --save-txt           save labels/*.txt (class x y w h, normalised)\n"
          "      --save-conf          with --save-txt, add the confidence\n"
          "      --save-crop          save each box's crop in crops/<class>/\n"
          "      --nosave             do not save annotated images\n"
          "      --line-thickness N   box line width in pixels (default 3)\n"
          "      --hide-labels        draw boxes without labels\n"
          "      --hide-conf          labels without confidences\n"
          "      --project DIR        parent of the run directory (default runs/detect)\n"
          "      --name NAME          run directory name (default exp; exp2, exp3... when taken)\n"
          "      --exist-ok           reuse an existing run directory\n"
          "      --device D           auto, cpu, opencl, opencl:N or a device name substring\n"
          "      --max-pixels N|WxH   most pixels one image read may decode (default 2^30);\n"
          "                           larger images are skipped: detect them with --slice\n"
          "\n"
          "Images larger than 4096x4096 pixels are read reduced to --img while they decode, never\n"
          "whole, and their annotated copy is drawn strip by strip.\n"
          "\n"
          "Sliced detection of large images (SAHI):\n"
          "      --slice SIZE         detect in SIZE x SIZE windows of each image and merge the\n"
          "                           results; --img defaults to SIZE (rounded to the stride)\n"
          "      --slice-overlap X    fraction of a window shared with its neighbour (default\n"
          "                           0.2, below 1)\n"
          "      --slice-merge M      nmm (merge overlapping boxes, intersection over smaller;\n"
          "                           default) or nms (suppress, intersection over union)\n"
          "      --slice-thres X      overlap above which boxes of one class merge (default 0.5)\n"
          "      --slice-full         also detect on the whole image reduced to --img\n"
          "  -h, --help               show this help\n",
          stdout);
}

enum {
    OPT_IMG = 256,
    OPT_CONF,
    OPT_IOU,
    OPT_MAXDET,
    OPT_CLASSES,
    OPT_AGNOSTIC,
    OPT_TXT,
    OPT_SCONF,
    OPT_CROP,
    OPT_NOSAVE,
    OPT_LINE,
    OPT_HIDE_LABELS,
    OPT_HIDE_CONF,
    OPT_PROJECT,
    OPT_NAME,
    OPT_EXIST,
    OPT_DEVICE,
    OPT_DATA,
    OPT_SLICE,
    OPT_SLICE_OVERLAP,
    OPT_SLICE_MERGE,
    OPT_SLICE_THRES,
    OPT_SLICE_FULL,
    OPT_MAX_PIXELS,
};

/* True when s is a plain non-negative integer. */
static bool is_uint(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

#define MAX_CLASSES 4096

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

int yc_cmd_detect(int argc, char **argv)
{
    static const char *const cmd = "detect";
    static const struct option opts[] = {
        {"weights", required_argument, NULL, 'w'},
        {"cfg", required_argument, NULL, 'c'},
        {"source", required_argument, NULL, 's'},
        {"data", required_argument, NULL, OPT_DATA},
        {"img", required_argument, NULL, OPT_IMG},
        {"imgsz", required_argument, NULL, OPT_IMG},
        {"img-size", required_argument, NULL, OPT_IMG},
        {"conf-thres", required_argument, NULL, OPT_CONF},
        {"iou-thres", required_argument, NULL, OPT_IOU},
        {"max-det", required_argument, NULL, OPT_MAXDET},
        {"classes", required_argument, NULL, OPT_CLASSES},
        {"agnostic-nms", no_argument, NULL, OPT_AGNOSTIC},
        {"save-txt", no_argument, NULL, OPT_TXT},
        {"save-conf", no_argument, NULL, OPT_SCONF},
        {"save-crop", no_argument, NULL, OPT_CROP},
        {"nosave", no_argument, NULL, OPT_NOSAVE},
        {"line-thickness", required_argument, NULL, OPT_LINE},
        {"hide-labels", no_argument, NULL, OPT_HIDE_LABELS},
        {"hide-conf", no_argument, NULL, OPT_HIDE_CONF},
        {"project", required_argument, NULL, OPT_PROJECT},
        {"name", required_argument, NULL, OPT_NAME},
        {"exist-ok", no_argument, NULL, OPT_EXIST},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"slice", required_argument, NULL, OPT_SLICE},
        {"slice-overlap", required_argument, NULL, OPT_SLICE_OVERLAP},
        {"slice-merge", required_argument, NULL, OPT_SLICE_MERGE},
        {"slice-thres", required_argument, NULL, OPT_SLICE_THRES},
        {"slice-full", no_argument, NULL, OPT_SLICE_FULL},
        {"max-pixels", required_argument, NULL, OPT_MAX_PIXELS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *weights = NULL, *cfg = NULL, *source = NULL, *data = NULL;
    const char *project = "runs/detect", *name = "exp", *device = "auto";
    int img_h = 640, img_w = 640, max_det = 1000, line = 3, c, st;
    float conf = 0.25f, iou = 0.45f;
    bool agnostic = false, save_txt = false, save_conf = false, save_crop = false;
    bool nosave = false, hide_labels = false, hide_conf = false, exist_ok = false;
    static int classes[MAX_CLASSES];
    int n_classes = 0;
    bool img_given = false, slice_opts = false;
    yc_slice_options so;
    yc_slice_options_default(&so);
    so.tile = 0;
    float fval;
    size_t max_pixels = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":w:c:s:h", opts, NULL)) != -1) {
        switch (c) {
        case 'w':
            weights = optarg;
            break;
        case 'c':
            cfg = optarg;
            break;
        case 's':
            source = optarg;
            break;
        case OPT_DATA:
            data = optarg;
            break;
        case OPT_IMG:
            if ((st = yc_cli_int(cmd, "--img", optarg, 32, 16384, &img_h)))
                return st;
            img_w = img_h;
            img_given = true;
            if (optind < argc && is_uint(argv[optind])) {
                if ((st = yc_cli_int(cmd, "--img", argv[optind], 32, 16384, &img_w)))
                    return st;
                optind++;
            }
            break;
        case OPT_CONF:
            if ((st = yc_cli_float(cmd, "--conf-thres", optarg, 0, 1, &conf)))
                return st;
            break;
        case OPT_IOU:
            if ((st = yc_cli_float(cmd, "--iou-thres", optarg, 0, 1, &iou)))
                return st;
            break;
        case OPT_MAXDET:
            if ((st = yc_cli_int(cmd, "--max-det", optarg, 1, 100000, &max_det)))
                return st;
            break;
        case OPT_CLASSES:
            if ((st = add_classes(cmd, optarg, classes, &n_classes)))
                return st;
            while (optind < argc && is_uint(argv[optind]))
                if ((st = add_classes(cmd, argv[optind++], classes, &n_classes)))
                    return st;
            break;
        case OPT_AGNOSTIC:
            agnostic = true;
            break;
        case OPT_TXT:
            save_txt = true;
            break;
        case OPT_SCONF:
            save_conf = true;
            break;
        case OPT_CROP:
            save_crop = true;
            break;
        case OPT_NOSAVE:
            nosave = true;
            break;
        case OPT_LINE:
            if ((st = yc_cli_int(cmd, "--line-thickness", optarg, 1, 100, &line)))
                return st;
            break;
        case OPT_HIDE_LABELS:
            hide_labels = true;
            break;
        case OPT_HIDE_CONF:
            hide_conf = true;
            break;
        case OPT_PROJECT:
            project = optarg;
            break;
        case OPT_NAME:
            name = optarg;
            break;
        case OPT_EXIST:
            exist_ok = true;
            break;
        case OPT_DEVICE:
            device = optarg;
            break;
        case OPT_SLICE:
            if ((st = yc_cli_int(cmd, "--slice", optarg, 32, 16384, &so.tile)))
                return st;
            break;
        case OPT_SLICE_OVERLAP:
            if ((st = yc_cli_float(cmd, "--slice-overlap", optarg, 0, 1, &fval)))
                return st;
            if (fval >= 1)
                return yc_usage_error(cmd, "--slice-overlap %s must be below 1", optarg);
            so.overlap = strtod(optarg, NULL);
            slice_opts = true;
            break;
        case OPT_SLICE_MERGE:
            if (!yc_merge_params_parse(optarg, false, &so.merge))
                return yc_usage_error(cmd, "--slice-merge '%s': use nmm or nms", optarg);
            slice_opts = true;
            break;
        case OPT_SLICE_THRES:
            if ((st = yc_cli_float(cmd, "--slice-thres", optarg, 0, 1, &fval)))
                return st;
            so.merge.threshold = strtod(optarg, NULL);
            slice_opts = true;
            break;
        case OPT_SLICE_FULL:
            so.full = true;
            slice_opts = true;
            break;
        case OPT_MAX_PIXELS:
            if ((st = yc_cli_pixels(cmd, "--max-pixels", optarg, &max_pixels)))
                return st;
            break;
        case 'h':
            print_usage();
            return YC_EXIT_OK;
        default:
            return yc_cli_bad_option(cmd, argc, argv);
        }
    }
    if (optind < argc)
        return yc_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!weights || !source)
        return yc_usage_error(cmd, "--weights and --source are required");
    if ((st = yc_cli_run_name(cmd, project, name)))
        return st;
    if (slice_opts && !so.tile)
        return yc_usage_error(cmd, "--slice-overlap, --slice-merge, --slice-thres and "
                                   "--slice-full need --slice SIZE");
    if (so.tile && !img_given)
        img_h = img_w = so.tile;

    yc_backend *be = NULL;
    yc_infer_model im;
    memset(&im, 0, sizeof im);
    yc_data_yaml y;
    memset(&y, 0, sizeof y);
    yc_path_list files;
    memset(&files, 0, sizeof files);
    yc_detector *det = NULL;
    if ((st = yc_detect_sources(source, &files)))
        goto done;
    if (data && (st = yc_data_yaml_load(data, &y)))
        goto done;
    if ((st = yc_device_open(device, 0, true, &be)) ||
        (st = yc_infer_model_load(&im, weights, cfg, be)))
        goto done;
    yc_model *m = im.m;
    size_t np = yc_model_count_params(m);
    printf("%s summary: %d layers, %zu parameters, 0 gradients, %.1f GFLOPs\n", m->cfg->name,
           yc_model_count_modules(m), np, yc_model_gflops(m, 640));
    for (int i = 0; i < n_classes; i++)
        if (classes[i] >= m->nc)
            yc_warn("--classes %d: the model has only %d classes", classes[i], m->nc);
    int h = yc_check_img_size(img_h, im.stride, 0), w = yc_check_img_size(img_w, im.stride, 0);
    if (h != img_h || w != img_w)
        yc_warn("--img-size %dx%d must be multiple of max stride %d, updating to %dx%d", img_h,
                img_w, im.stride, h, w);
    const char *const *names = (const char *const *)im.names;
    if (!names && data) {
        if (y.nc == m->nc)
            names = (const char *const *)y.names;
        else
            yc_warn("%s has %d names but the model %d classes; using class numbers", data, y.nc,
                    m->nc);
    }
    yc_detect_options dopt;
    yc_detect_options_default(&dopt);
    dopt.img_h = h;
    dopt.img_w = w;
    dopt.conf_thres = conf;
    dopt.iou_thres = iou;
    dopt.max_det = max_det;
    dopt.classes = n_classes ? classes : NULL;
    dopt.n_classes = n_classes;
    dopt.agnostic = agnostic;
    /* sliced: every window and the full pass letterboxed to h x w, one graph planned for it */
    dopt.fixed_shape = so.tile > 0;
    if ((st = yc_detector_new(&det, &im, &dopt)))
        goto done;
    char save_dir[4096];
    if ((st = yc_run_dir(project, name, exist_ok, NULL, save_dir, sizeof save_dir)))
        goto done;
    yc_detect_save sv = {.save_dir = save_dir, .save_img = !nosave, .save_txt = save_txt,
                         .save_conf = save_conf, .save_crop = save_crop, .line_thickness = line,
                         .hide_labels = hide_labels, .hide_conf = hide_conf, .print = true,
                         .limits = {.max_pixels = max_pixels}};
    yc_detect_summary sum;
    if (so.tile)
        st = yc_detect_files_sliced(det, &files, names, m->nc, &sv, &so, &sum);
    else
        st = yc_detect_files(det, &files, names, m->nc, &sv, &sum);
    if (!st && sum.images == 0 && files.n > 0)
        st = yc_error_status(YC_EFORMAT, "none of the %zu image%s of %s could be read (see the "
                             "warnings above)", files.n, files.n == 1 ? "" : "s", source);
done:
    yc_detector_free(det);
    yc_infer_model_free(&im);
    yc_backend_free(be);
    yc_data_yaml_free(&y);
    yc_path_list_free(&files);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
