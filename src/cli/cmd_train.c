/* yolocl train: the options of YOLOv5's train.py (same names, same defaults, except that with
 * no --data the built-in demo dataset is used, with settings that finish in minutes). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "imgcache.h"
#include "log.h"
#include "memplan.h"
#include "optim.h"
#include "train.h"

/* Without --data: the demo run (yolov5n from scratch on the built-in shapes dataset). */
#define DEMO_EPOCHS 20
#define DEMO_IMGSZ 320
#define DEMO_CFG "yolov5n"

static void print_usage(void)
{
    fputs("Usage: yolocl train [--data D.yaml] [--cfg MODEL] [--weights W] [OPTION]...\n"
          "Train a YOLOv5 model as Ultralytics' train.py does.  With no --data, train yolov5n on\n"
          "the built-in demo dataset (20 epochs at 320; a few minutes on a laptop).\n"
          "\n"
          "  -d, --data FILE          dataset yaml (YOLOv5 format)\n"
          "  -c, --cfg MODEL          model config: bundled name (yolov5n ... yolov5x6) or yaml\n"
          "  -w, --weights FILE       initial weights (.safetensors or Ultralytics .pt); '' = scratch\n"
          "      --hyp HYP            hyperparameters (default hyp.scratch-low)\n"
          "  -e, --epochs N           epochs (default 100; demo 20)\n"
          "  -b, --batch-size N       images per batch (default 16; -1 = AutoBatch); also --batch\n"
          "  -i, --imgsz N            train and val image size (default 640; demo 320); also --img\n"
          "      --accumulate N       batches per optimizer step (default round(64 / batch))\n"
          "      --rect               rectangular training\n"
          "      --resume [RUN]       resume the latest run, a run directory or a checkpoint\n"
          "      --nosave             only save the final checkpoint\n"
          "      --noval              only validate the final epoch\n"
          "      --noautoanchor       disable AutoAnchor\n"
          "      --noplots            save no plot files\n"
          "      --image-weights      sample images by class-weighted mAP\n"
          "      --multi-scale        vary image size +/- 50%\n"
          "      --single-cls         train multi-class data as one class\n"
          "      --optimizer NAME     SGD (default), Adam or AdamW\n"
          "      --cos-lr             cosine LR schedule\n"
          "      --label-smoothing E  label smoothing epsilon (default 0)\n"
          "      --patience N         early stopping patience in epochs (default 100; 0 = off)\n"
          "      --freeze N [M ...]   freeze layers 0..N-1, or the listed layers\n"
          "      --save-period N      save a checkpoint every N epochs\n"
          "      --seed N             global seed (default 0)\n"
          "  -j, --workers N          data loader threads (default: physical cores)\n"
          "      --threads N          compute threads (default: physical cores)\n"
          "      --device D           auto, cpu, opencl, opencl:N or a device name substring\n"
          "      --mem SIZE           memory limit (default 90% of the device's free memory)\n"
          "      --half, --no-half    FP16 storage of activations: always, or never (default:\n"
          "                           on OpenCL devices that can store FP16; on the CPU\n"
          "                           only when needed to fit the memory limit)\n"
          "      --recompute          recompute SiLU outputs in backward instead\n"
          "                           of storing them (default: only when needed to fit)\n"
          "      --tile SIZE          train on SIZE x SIZE windows of the images, read without\n"
          "                           decoding large images whole (default: the dataset yaml's\n"
          "                           tile:, else whole images; 0 = whole images)\n"
          "      --tile-overlap F     fraction shared by neighbouring windows (default 0.2)\n"
          "      --tile-min-area F    keep a box in a window when this fraction of it is inside\n"
          "                           (default 0.1)\n"
          "      --tiles-per-epoch N  a random subset of N tiles per epoch (default: all)\n"
          "      --val-full           with tiles: validate whole images, detected by slices\n"
          "                           merged as detect --slice (default: per tile)\n"
          "      --project DIR        save to DIR/NAME (default runs/train)\n"
          "      --name NAME          run name (default exp; exp2, exp3... when taken)\n"
          "      --exist-ok           reuse an existing DIR/NAME\n"
          "      --cache [ram|disk]   keep the images decoded and resized to --img, in memory\n"
          "                           (counted by the memory plan) or in files beside the\n"
          "                           dataset, so that later epochs skip decoding (bare: ram)\n"
          "      --max-pixels N|WxH   most pixels one image read may decode (default 2^30);\n"
          "                           larger images are skipped: train them with --tile\n"
          "  -h, --help               show this help\n",
          stdout);
}

enum {
    OPT_HYP = 256, OPT_ACCUMULATE, OPT_RECT, OPT_RESUME, OPT_NOSAVE, OPT_NOVAL, OPT_NOAUTOANCHOR,
    OPT_NOPLOTS, OPT_IMAGE_WEIGHTS, OPT_MULTI_SCALE, OPT_SINGLE_CLS, OPT_OPTIMIZER, OPT_COS_LR,
    OPT_LABEL_SMOOTHING, OPT_PATIENCE, OPT_FREEZE, OPT_SAVE_PERIOD, OPT_SEED, OPT_THREADS,
    OPT_DEVICE, OPT_PROJECT, OPT_NAME, OPT_EXIST_OK, OPT_CACHE, OPT_EVOLVE, OPT_MEM, OPT_HALF,
    OPT_NOHALF,
    OPT_RECOMPUTE, OPT_TILE, OPT_TILE_OVERLAP, OPT_TILE_MIN_AREA, OPT_TILES_PER_EPOCH,
    OPT_VAL_FULL, OPT_MAX_PIXELS,
};

/* A number in [0, 1] (below 1 when `below_one`) as a double: --tile-overlap, --tile-min-area. */
static int unit_value(const char *cmd, const char *opt, const char *arg, bool below_one,
                      double *out)
{
    float f;
    int st = yc_cli_float(cmd, opt, arg, 0, 1, &f);
    if (st)
        return st;
    double v = strtod(arg, NULL);
    if (below_one && v >= 1)
        return yc_usage_error(cmd, "invalid value '%s' for %s: expected a number from 0 to "
                              "below 1", arg, opt);
    *out = v;
    return 0;
}

int yc_cmd_train(int argc, char **argv)
{
    static const char *const cmd = "train";
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"cfg", required_argument, NULL, 'c'},
        {"weights", required_argument, NULL, 'w'},
        {"hyp", required_argument, NULL, OPT_HYP},
        {"epochs", required_argument, NULL, 'e'},
        {"batch-size", required_argument, NULL, 'b'},
        {"batch", required_argument, NULL, 'b'},
        {"imgsz", required_argument, NULL, 'i'},
        {"img", required_argument, NULL, 'i'},
        {"img-size", required_argument, NULL, 'i'},
        {"accumulate", required_argument, NULL, OPT_ACCUMULATE},
        {"rect", no_argument, NULL, OPT_RECT},
        {"resume", optional_argument, NULL, OPT_RESUME},
        {"nosave", no_argument, NULL, OPT_NOSAVE},
        {"noval", no_argument, NULL, OPT_NOVAL},
        {"noautoanchor", no_argument, NULL, OPT_NOAUTOANCHOR},
        {"noplots", no_argument, NULL, OPT_NOPLOTS},
        {"image-weights", no_argument, NULL, OPT_IMAGE_WEIGHTS},
        {"multi-scale", no_argument, NULL, OPT_MULTI_SCALE},
        {"single-cls", no_argument, NULL, OPT_SINGLE_CLS},
        {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
        {"cos-lr", no_argument, NULL, OPT_COS_LR},
        {"label-smoothing", required_argument, NULL, OPT_LABEL_SMOOTHING},
        {"patience", required_argument, NULL, OPT_PATIENCE},
        {"freeze", required_argument, NULL, OPT_FREEZE},
        {"save-period", required_argument, NULL, OPT_SAVE_PERIOD},
        {"seed", required_argument, NULL, OPT_SEED},
        {"workers", required_argument, NULL, 'j'},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"project", required_argument, NULL, OPT_PROJECT},
        {"name", required_argument, NULL, OPT_NAME},
        {"exist-ok", no_argument, NULL, OPT_EXIST_OK},
        {"cache", optional_argument, NULL, OPT_CACHE},
        {"max-pixels", required_argument, NULL, OPT_MAX_PIXELS},
        {"mem", required_argument, NULL, OPT_MEM},
        {"half", no_argument, NULL, OPT_HALF},
        {"no-half", no_argument, NULL, OPT_NOHALF},
        {"recompute", no_argument, NULL, OPT_RECOMPUTE},
        {"tile", required_argument, NULL, OPT_TILE},
        {"tile-overlap", required_argument, NULL, OPT_TILE_OVERLAP},
        {"tile-min-area", required_argument, NULL, OPT_TILE_MIN_AREA},
        {"tiles-per-epoch", required_argument, NULL, OPT_TILES_PER_EPOCH},
        {"val-full", no_argument, NULL, OPT_VAL_FULL},
        {"evolve", optional_argument, NULL, OPT_EVOLVE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    yc_train_opts o;
    yc_train_opts_defaults(&o);
    bool have_epochs = false, have_img = false, resume = false;
    const char *resume_arg = NULL;
    int c, st;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":d:c:w:e:b:i:j:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o.data = optarg;
            break;
        case 'c':
            o.cfg = optarg;
            break;
        case 'w':
            o.weights = optarg;
            break;
        case OPT_HYP:
            o.hyp = optarg;
            break;
        case 'e':
            if ((st = yc_cli_int(cmd, "--epochs", optarg, 1, 1000000, &o.epochs)))
                return st;
            have_epochs = true;
            break;
        case 'b':
            if ((st = yc_cli_int(cmd, "--batch-size", optarg, -1, 65536, &o.batch)))
                return st;
            if (o.batch == 0)
                return yc_usage_error(cmd, "--batch-size must be positive or -1 (AutoBatch)");
            break;
        case 'i':
            if ((st = yc_cli_int(cmd, "--imgsz", optarg, 32, 16384, &o.imgsz)))
                return st;
            have_img = true;
            break;
        case OPT_ACCUMULATE:
            if ((st = yc_cli_int(cmd, "--accumulate", optarg, 1, 65536, &o.accumulate)))
                return st;
            break;
        case OPT_RECT:
            o.rect = true;
            break;
        case OPT_RESUME:
            resume = true;
            resume_arg = optarg;
            break;
        case OPT_NOSAVE:
            o.nosave = true;
            break;
        case OPT_NOVAL:
            o.noval = true;
            break;
        case OPT_NOAUTOANCHOR:
            o.noautoanchor = true;
            break;
        case OPT_NOPLOTS:
            o.noplots = true;
            break;
        case OPT_IMAGE_WEIGHTS:
            o.image_weights = true;
            break;
        case OPT_MULTI_SCALE:
            o.multi_scale = true;
            break;
        case OPT_SINGLE_CLS:
            o.single_cls = true;
            break;
        case OPT_OPTIMIZER:
            if (yc_optim_kind_parse(optarg, &o.optimizer))
                return yc_usage_error(cmd, "invalid value '%s' for --optimizer: expected SGD, "
                                      "Adam or AdamW", optarg);
            break;
        case OPT_COS_LR:
            o.cos_lr = true;
            break;
        case OPT_LABEL_SMOOTHING:
            if ((st = yc_cli_float(cmd, "--label-smoothing", optarg, 0, 1, &o.label_smoothing)))
                return st;
            break;
        case OPT_PATIENCE:
            if ((st = yc_cli_int(cmd, "--patience", optarg, 0, 1000000, &o.patience)))
                return st;
            break;
        case OPT_FREEZE:
            /* nargs='+': this value and the following non-option arguments */
            o.nfreeze = 0;
            optind--;
            while (optind < argc && argv[optind][0] != '-' && o.nfreeze < YC_MAX_FREEZE) {
                if ((st = yc_cli_int(cmd, "--freeze", argv[optind], 0, 10000,
                                     &o.freeze[o.nfreeze])))
                    return st;
                o.nfreeze++;
                optind++;
            }
            break;
        case OPT_SAVE_PERIOD:
            if ((st = yc_cli_int(cmd, "--save-period", optarg, -1, 1000000, &o.save_period)))
                return st;
            break;
        case OPT_SEED:
            if ((st = yc_cli_int(cmd, "--seed", optarg, 0, 2147483647, &o.seed)))
                return st;
            break;
        case 'j':
            if ((st = yc_cli_int(cmd, "--workers", optarg, 0, 256, &o.workers)))
                return st;
            break;
        case OPT_THREADS:
            if ((st = yc_cli_int(cmd, "--threads", optarg, 0, 1024, &o.threads)))
                return st;
            break;
        case OPT_DEVICE:
            o.device = optarg;
            break;
        case OPT_PROJECT:
            o.project = optarg;
            break;
        case OPT_NAME:
            o.name = optarg;
            break;
        case OPT_EXIST_OK:
            o.exist_ok = true;
            break;
        case OPT_MEM:
            if ((st = yc_cli_size(cmd, "--mem", optarg, &o.mem)))
                return st;
            break;
        case OPT_HALF:
            o.half = YC_HALF_ON;
            break;
        case OPT_NOHALF:
            o.half = YC_HALF_OFF;
            break;
        case OPT_RECOMPUTE:
            o.recompute = true;
            break;
        case OPT_TILE:
            if ((st = yc_cli_int(cmd, "--tile", optarg, 0, 16384, &o.tile)))
                return st;
            if (o.tile > 0 && o.tile < 32)
                return yc_usage_error(cmd, "invalid value '%s' for --tile: expected 0 (whole "
                                      "images) or a window of 32 to 16384 pixels", optarg);
            break;
        case OPT_TILE_OVERLAP:
            if ((st = unit_value(cmd, "--tile-overlap", optarg, true, &o.tile_overlap)))
                return st;
            break;
        case OPT_TILE_MIN_AREA:
            if ((st = unit_value(cmd, "--tile-min-area", optarg, false, &o.tile_min_area)))
                return st;
            break;
        case OPT_TILES_PER_EPOCH:
            if ((st = yc_cli_int(cmd, "--tiles-per-epoch", optarg, 1, 2147483647,
                                 &o.tiles_per_epoch)))
                return st;
            break;
        case OPT_VAL_FULL:
            o.val_full = true;
            break;
        case OPT_CACHE: {
            /* an optional value, also as the next argument (argparse nargs='?'), as --resume */
            const char *v = optarg;
            if (!v && optind < argc && argv[optind][0] != '-')
                v = argv[optind++];
            yc_cache_kind k;
            if (!yc_cache_kind_parse(v, &k))
                return yc_usage_error(cmd, "invalid value '%s' for --cache: expected ram or disk",
                                      v);
            o.cache = (int)k;
            break;
        }
        case OPT_MAX_PIXELS:
            if ((st = yc_cli_pixels(cmd, "--max-pixels", optarg, &o.max_pixels)))
                return st;
            break;
        case OPT_EVOLVE:
            return yc_usage_error(cmd, "--evolve (hyperparameter evolution) is not supported");
        case 'h':
            print_usage();
            return YC_EXIT_OK;
        default:
            return yc_cli_bad_option(cmd, argc, argv);
        }
    }
    /* --resume takes an optional value, also as the next argument (argparse nargs='?') */
    if (resume && !resume_arg && optind < argc)
        resume_arg = argv[optind++];
    if (optind < argc)
        return yc_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if ((st = yc_cli_run_name(cmd, o.project, o.name)))
        return st;
    if (!resume && o.data && o.data[0] && !(o.cfg && o.cfg[0]) && !(o.weights && o.weights[0]))
        return yc_usage_error(cmd, "give --cfg (a model config) or --weights (a model to start "
                              "from)");
    if (resume)
        o.resume = resume_arg ? resume_arg : "";
    if (!resume && (!o.data || !o.data[0])) {
        /* the demo: yolov5n from scratch unless told otherwise */
        if (!o.cfg && !o.weights)
            o.cfg = DEMO_CFG;
        if (!have_epochs)
            o.epochs = DEMO_EPOCHS;
        if (!have_img)
            o.imgsz = DEMO_IMGSZ;
    }
    bool interrupted = false;
    st = yc_train(&o, &interrupted);
    if (st)
        return yc_report_failure(st);
    if (interrupted) {
        fprintf(stderr, "yolocl: training interrupted; resume it with: yolocl train --resume\n");
        return 130;
    }
    return YC_EXIT_OK;
}
