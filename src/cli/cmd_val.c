/* yolocl val: YOLOv5 v7.0 val.py on a dataset split (see val.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "dataset.h"
#include "detect.h"
#include "device.h"
#include "graph.h"
#include "loader.h"
#include "log.h"
#include "rundir.h"
#include "tileset.h"
#include "util.h"
#include "val.h"
#include "val_full.h"

static void print_usage(void)
{
    fputs("Usage: yolocl val --data DATA.yaml --weights W [--cfg MODEL] [options]\n"
          "Validate a model on a dataset split as YOLOv5's val.py: P, R, mAP@0.5, mAP@0.5:0.95,\n"
          "per-class results, speed, plots in runs/val/expN.\n"
          "\n"
          "  -d, --data FILE        dataset yaml\n"
          "  -w, --weights FILE     weights (safetensors with YOLOv5 state-dict names)\n"
          "  -c, --cfg MODEL        model config of the weights: a bundled name (yolov5n, ...) or\n"
          "                         a model yaml\n"
          "      --img SIZE         inference size, pixels (default 640; rounded up to a multiple\n"
          "                         of the largest stride)\n"
          "  -b, --batch N          batch size (default 32)\n"
          "      --conf-thres X     confidence threshold (default 0.001)\n"
          "      --iou-thres X      NMS IoU threshold (default 0.6)\n"
          "      --max-det N        maximum detections per image (default 300)\n"
          "      --task T           split: val, test or train (default val)\n"
          "      --single-cls       treat every class as one\n"
          "      --verbose          per-class results for any number of classes\n"
          "      --save-txt         save detections to labels/*.txt\n"
          "      --save-conf        with --save-txt, add the confidence\n"
          "      --save-json        save a COCO-style predictions JSON\n"
          "      --tile SIZE        evaluate SIZE x SIZE windows of the images, each with its\n"
          "                         clipped labels (default: the dataset yaml's tile:, else\n"
          "                         whole images; 0 = whole images)\n"
          "      --val-full         with tiles: evaluate whole images, detected by SIZE x SIZE\n"
          "                         slices merged as detect --slice does\n"
          "      --slice-overlap X  with --val-full: overlap of the slices (default the\n"
          "                         dataset yaml's tile_overlap, 0.2)\n"
          "      --slice-merge M    with --val-full: nms-ios (default; suppression by\n"
          "                         intersection over the smaller box), nms (by IoU) or nmm\n"
          "                         (merging by intersection over the smaller box), as detect\n"
          "      --slice-thres X    with --val-full: merge overlap threshold (default 0.5)\n"
          "      --slice-full       with --val-full: add a pass on the whole image reduced to\n"
          "                         --img\n"
          "      --project DIR      parent of the run directory (default runs/val)\n"
          "      --name NAME        run directory name (default exp; exp2, exp3... when taken)\n"
          "      --exist-ok         reuse an existing run directory\n"
          "      --workers N        loader threads (default 8, at most the batch size and CPUs)\n"
          "      --device D         auto, cpu, opencl, opencl:N or a device name substring\n"
          "      --max-pixels N|WxH most pixels one image read may decode (default 2^30);\n"
          "                         larger images are left out: validate them with --tile\n"
          "  -h, --help             show this help\n"
          "\n"
          "Images larger than 4096x4096 pixels are read reduced to --img while they decode,\n"
          "never whole.\n",
          stdout);
}

enum {
    OPT_IMG = 256,
    OPT_CONF,
    OPT_IOU,
    OPT_MAXDET,
    OPT_TASK,
    OPT_SINGLE,
    OPT_VERBOSE,
    OPT_TXT,
    OPT_SCONF,
    OPT_JSON,
    OPT_PROJECT,
    OPT_NAME,
    OPT_EXIST,
    OPT_WORKERS,
    OPT_DEVICE,
    OPT_TILE,
    OPT_VAL_FULL,
    OPT_SLICE_OVERLAP,
    OPT_SLICE_MERGE,
    OPT_SLICE_THRES,
    OPT_SLICE_FULL,
    OPT_MAX_PIXELS,
};

int yc_cmd_val(int argc, char **argv)
{
    static const char *const cmd = "val";
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"weights", required_argument, NULL, 'w'},
        {"cfg", required_argument, NULL, 'c'},
        {"img", required_argument, NULL, OPT_IMG},
        {"imgsz", required_argument, NULL, OPT_IMG},
        {"img-size", required_argument, NULL, OPT_IMG},
        {"batch", required_argument, NULL, 'b'},
        {"batch-size", required_argument, NULL, 'b'},
        {"conf-thres", required_argument, NULL, OPT_CONF},
        {"iou-thres", required_argument, NULL, OPT_IOU},
        {"max-det", required_argument, NULL, OPT_MAXDET},
        {"task", required_argument, NULL, OPT_TASK},
        {"single-cls", no_argument, NULL, OPT_SINGLE},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"save-txt", no_argument, NULL, OPT_TXT},
        {"save-conf", no_argument, NULL, OPT_SCONF},
        {"save-json", no_argument, NULL, OPT_JSON},
        {"project", required_argument, NULL, OPT_PROJECT},
        {"name", required_argument, NULL, OPT_NAME},
        {"exist-ok", no_argument, NULL, OPT_EXIST},
        {"workers", required_argument, NULL, OPT_WORKERS},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"tile", required_argument, NULL, OPT_TILE},
        {"val-full", no_argument, NULL, OPT_VAL_FULL},
        {"slice-overlap", required_argument, NULL, OPT_SLICE_OVERLAP},
        {"slice-merge", required_argument, NULL, OPT_SLICE_MERGE},
        {"slice-thres", required_argument, NULL, OPT_SLICE_THRES},
        {"slice-full", no_argument, NULL, OPT_SLICE_FULL},
        {"max-pixels", required_argument, NULL, OPT_MAX_PIXELS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *data = NULL, *weights = NULL, *cfg = NULL, *project = "runs/val", *name = "exp";
    const char *device = "auto";
    int img = 640, batch = 32, max_det = 300, workers = 8, tile = -1, c, st;
    float conf = 0.001f, iou = 0.6f;
    bool single_cls = false, verbose = false, save_txt = false, save_conf = false;
    bool save_json = false, exist_ok = false, val_full = false, slice_opts = false;
    bool overlap_given = false;
    yc_slice_options so;
    yc_slice_options_default(&so);
    so.merge = yc_merge_params_nms_ios();
    float fval;
    size_t max_pixels = 0;
    yc_split split = YC_SPLIT_VAL;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":d:w:c:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            data = optarg;
            break;
        case 'w':
            weights = optarg;
            break;
        case 'c':
            cfg = optarg;
            break;
        case OPT_IMG:
            if ((st = yc_cli_int(cmd, "--img", optarg, 32, 16384, &img)))
                return st;
            break;
        case 'b':
            if ((st = yc_cli_int(cmd, "--batch", optarg, 1, 4096, &batch)))
                return st;
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
        case OPT_TASK:
            if (!strcmp(optarg, "val"))
                split = YC_SPLIT_VAL;
            else if (!strcmp(optarg, "test"))
                split = YC_SPLIT_TEST;
            else if (!strcmp(optarg, "train"))
                split = YC_SPLIT_TRAIN;
            else
                return yc_usage_error(cmd, "invalid value '%s' for --task: expected val, test or "
                                      "train", optarg);
            break;
        case OPT_SINGLE:
            single_cls = true;
            break;
        case OPT_VERBOSE:
            verbose = true;
            break;
        case OPT_TXT:
            save_txt = true;
            break;
        case OPT_SCONF:
            save_conf = true;
            break;
        case OPT_JSON:
            save_json = true;
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
        case OPT_WORKERS:
            if ((st = yc_cli_int(cmd, "--workers", optarg, 0, 256, &workers)))
                return st;
            break;
        case OPT_DEVICE:
            device = optarg;
            break;
        case OPT_MAX_PIXELS:
            if ((st = yc_cli_pixels(cmd, "--max-pixels", optarg, &max_pixels)))
                return st;
            break;
        case OPT_TILE:
            if ((st = yc_cli_int(cmd, "--tile", optarg, 0, 16384, &tile)))
                return st;
            if (tile > 0 && tile < 32)
                return yc_usage_error(cmd, "invalid value '%s' for --tile: expected 0 (whole "
                                      "images) or a window of 32 to 16384 pixels", optarg);
            break;
        case OPT_VAL_FULL:
            val_full = true;
            break;
        case OPT_SLICE_OVERLAP:
            if ((st = yc_cli_float(cmd, "--slice-overlap", optarg, 0, 1, &fval)))
                return st;
            if (fval >= 1)
                return yc_usage_error(cmd, "--slice-overlap %s must be below 1", optarg);
            so.overlap = strtod(optarg, NULL);
            overlap_given = slice_opts = true;
            break;
        case OPT_SLICE_MERGE:
            if (!yc_merge_params_parse(optarg, true, &so.merge))
                return yc_usage_error(cmd, "--slice-merge '%s': use nms-ios, nms or nmm", optarg);
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
        case 'h':
            print_usage();
            return YC_EXIT_OK;
        default:
            return yc_cli_bad_option(cmd, argc, argv);
        }
    }
    if (optind < argc)
        return yc_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!data || !weights)
        return yc_usage_error(cmd, "--data and --weights are required");
    if (slice_opts && !val_full)
        return yc_usage_error(cmd, "--slice-overlap, --slice-merge, --slice-thres and "
                                   "--slice-full need --val-full");
    if (val_full && tile == 0)
        return yc_usage_error(cmd, "--val-full needs tiles: --tile SIZE (not 0)");
    if ((st = yc_cli_run_name(cmd, project, name)))
        return st;
    if (conf > 0.001f)
        yc_warn("confidence threshold %g > 0.001 produces invalid results", (double)conf);

    yc_data_yaml y;
    memset(&y, 0, sizeof y);
    yc_dataset ds;
    memset(&ds, 0, sizeof ds);
    yc_backend *be = NULL;
    yc_infer_model im;
    memset(&im, 0, sizeof im);
    yc_loader *loader = NULL;
    yc_tileset tiles;
    memset(&tiles, 0, sizeof tiles);
    yc_val_result res;
    memset(&res, 0, sizeof res);
    if ((st = yc_data_yaml_load(data, &y)))
        goto done;
    if (tile < 0)
        tile = y.tile;
    if (val_full && tile <= 0) {
        st = yc_error_status(YC_EUSAGE, "--val-full needs tiles: --tile SIZE or tile: in %s",
                             data);
        goto done;
    }
    if (tile > 0 && !val_full && (save_txt || save_json)) {
        st = yc_error_status(YC_EUSAGE, "--save-txt and --save-json write whole-image results: "
                             "with tiles (--tile %d) add --val-full, or use yolocl detect "
                             "--slice", tile);
        goto done;
    }
    if (y.n_entries[split] == 0) {
        st = yc_error_status(YC_EUSAGE, "%s has no '%s' images", data, yc_split_name(split));
        goto done;
    }
    if ((st = yc_device_open(device, 0, true, &be)) ||
        (st = yc_infer_model_load(&im, weights, cfg, be)))
        goto done;
    yc_model *m = im.m;
    size_t np = yc_model_count_params(m);
    printf("%s summary: %d layers, %zu parameters, 0 gradients, %.1f GFLOPs\n", m->cfg->name,
           yc_model_count_modules(m), np, yc_model_gflops(m, 640));
    if (!single_cls && m->nc != y.nc) {
        st = yc_error_status(YC_EUSAGE, "%s (%d classes) trained on different --data than what "
                             "you passed (%d classes). Pass correct combination of --weights and "
                             "--data that are trained together.", weights, m->nc, y.nc);
        goto done;
    }
    int imgsz = yc_check_img_size(img, im.stride, 0);
    if (imgsz != img)
        yc_warn("--img-size %d must be multiple of max stride %d, updating to %d", img, im.stride,
                imgsz);

    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s: ", yc_split_name(split));
    yc_dataset_options dopt = {.nc = y.nc, .single_cls = single_cls, .prefix = prefix};
    if ((st = yc_dataset_load_split(&y, split, &dopt, &ds)))
        goto done;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nw = workers;
    if (cpus > 0 && nw > cpus)
        nw = (int)cpus;
    if (nw > batch)
        nw = batch;
    if (nw < 1)
        nw = 1;
    const yc_dataset *view = &ds;
    if (tile > 0 && !val_full) {
        yc_tile_options to = {.tile = tile, .overlap = y.tile_overlap,
                              .min_area = y.tile_min_area};
        if ((st = yc_tileset_make(&ds, &to, &tiles)))
            goto done;
        yc_tileset_report(&tiles, prefix);
        view = &tiles.view;
    }
    yc_loader_options lo = {.ds = &ds, .train = false, .imgsz = imgsz, .batch = batch,
                            .rect = true, .pad = 0.5, .stride = im.stride, .workers = nw,
                            .tiles = tile > 0 ? &tiles : NULL,
                            .limits = {.max_pixels = max_pixels}};
    if (!val_full && (st = yc_loader_new(&loader, &lo)))
        goto done;

    char save_dir[4096];
    if ((st = yc_run_dir(project, name, exist_ok, NULL, save_dir, sizeof save_dir)))
        goto done;
    char stem[256], json_name[300];
    yc_path_stem(weights, stem, sizeof stem);
    snprintf(json_name, sizeof json_name, "%s_predictions.json", stem);

    const char *const *names = im.names ? (const char *const *)im.names
                                        : (const char *const *)y.names;
    yc_val_options vo;
    yc_val_options_default(&vo);
    vo.conf_thres = conf;
    vo.iou_thres = iou;
    vo.max_det = max_det;
    vo.single_cls = single_cls;
    vo.verbose = verbose;
    vo.imgsz = imgsz;
    vo.batch = batch;
    vo.save_dir = save_dir;
    vo.plots = true;
    vo.save_txt = save_txt;
    vo.save_conf = save_conf;
    vo.save_json = save_json;
    vo.json_name = json_name;
    vo.coco91 = m->nc == 80 && names && names[0] && !strcmp(names[0], "person");
    if (val_full) {
        so.tile = tile;
        if (!overlap_given)
            so.overlap = y.tile_overlap;
        vo.batch = 1;
        if ((st = yc_validate_full(m, im.stride, &ds, names, &vo, &so, &res)))
            goto done;
    } else if ((st = yc_validate(m, loader, view, names, &vo, NULL, &res))) {
        goto done;
    }
    printf("Results saved to %s\n", save_dir);
    if (save_txt)
        printf("%d labels saved to %s/labels\n", res.n_label_files, save_dir);
done:
    yc_val_result_free(&res);
    yc_loader_free(loader);
    yc_tileset_free(&tiles);
    yc_dataset_free(&ds);
    yc_infer_model_free(&im);
    yc_backend_free(be);
    yc_data_yaml_free(&y);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
