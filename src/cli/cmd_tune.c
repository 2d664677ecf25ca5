/* yolocl tune: the convolution tiles of an OpenCL device measured on a model's training step and
 * kept for every later run on that device (cl/cl_tune.c). */
#include "config.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"
#include "device.h"
#include "graph.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"

#ifdef YC_HAVE_OPENCL
#include "cl_backend.h"
#endif

static void print_usage(void)
{
    fputs("Usage: yolocl tune [--device D] [--cfg MODEL] [--img SIZE] [--batch N] [--half]\n"
          "                   [--iters N]\n"
          "Measure every tile of the OpenCL convolutions on each convolution of a model's\n"
          "training step on one device, and keep the fastest for that device: train, val,\n"
          "detect and bench then use them (and say so).  Defaults: yolov5s at 640, batch 16.\n"
          "\n"
          "      --device D    opencl, opencl:N or a device name substring (default: auto)\n"
          "  -c, --cfg MODEL   model config (bundled name or yaml path)\n"
          "      --img SIZE    image size, a multiple of the model's stride\n"
          "  -b, --batch N     images per batch\n"
          "      --half        FP16 storage of activations (as training chooses on OpenCL)\n"
          "      --iters N     timed runs of each tile on each convolution (default 3)\n"
          "  -h, --help        show this help\n",
          stdout);
}

int yc_cmd_tune(int argc, char **argv)
{
    static const char *const cmd = "tune";
    enum { OPT_IMG = 256, OPT_DEVICE, OPT_HALF, OPT_ITERS };
    static const struct option opts[] = {
        {"cfg", required_argument, NULL, 'c'},
        {"img", required_argument, NULL, OPT_IMG},
        {"imgsz", required_argument, NULL, OPT_IMG},
        {"batch", required_argument, NULL, 'b'},
        {"batch-size", required_argument, NULL, 'b'},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"half", no_argument, NULL, OPT_HALF},
        {"iters", required_argument, NULL, OPT_ITERS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cfg_name = "yolov5s", *device = "auto";
    int img = 640, batch = 16, iters = 3, c, st;
    bool half = false;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg_name = optarg;
            break;
        case OPT_IMG:
            if ((st = yc_cli_int(cmd, "--img", optarg, 32, 16384, &img)))
                return st;
            break;
        case 'b':
            if ((st = yc_cli_int(cmd, "--batch", optarg, 1, 4096, &batch)))
                return st;
            break;
        case OPT_DEVICE:
            device = optarg;
            break;
        case OPT_HALF:
            half = true;
            break;
        case OPT_ITERS:
            if ((st = yc_cli_int(cmd, "--iters", optarg, 1, 1000, &iters)))
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
#ifndef YC_HAVE_OPENCL
    (void)half, (void)iters, (void)batch, (void)img, (void)cfg_name, (void)device;
    return yc_report_failure(yc_error_status(YC_EUNSUPPORTED, "tune: this yolocl was built "
                                             "without OpenCL (./configure --disable-opencl)"));
#else
    bool cpu = false;
    if ((st = yc_device_is_cpu(device, &cpu)))
        return yc_report_failure(st);
    if (cpu)
        return yc_usage_error(cmd, "tune measures OpenCL devices: give --device opencl, "
                              "opencl:N or a device name (the CPU backend has no tiles to tune)");
    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    yc_backend *be = NULL;
    yc_graph *g = NULL;
    char *file = NULL;
    const yc_op **ops = NULL;
    if ((st = yc_model_cfg_find(cfg_name, path, sizeof path)) ||
        (st = yc_model_cfg_load(&cfg, path, 0)) || (st = yc_model_new(&m, cfg)) ||
        (st = yc_device_open(device, 0, true, &be)) || (st = yc_model_alloc(m, be)))
        goto done;
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .half = half};
    if ((st = yc_graph_new_opts(&g, m, batch, img, img, &go)) || (st = yc_graph_alloc(g)))
        goto done;
    int n = yc_graph_nops(g), nconv = 0;
    if (!(ops = yc_calloc((size_t)n + 1, sizeof *ops, "convolution list"))) {
        st = YC_ENOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const yc_op *op = yc_graph_op(g, i);
        if (op->kind == YC_OP_CONV2D || op->kind == YC_OP_CONV2D_BWD_DATA ||
            op->kind == YC_OP_CONV2D_BWD_FILTER)
            ops[nconv++] = op;
    }
    file = yc_cl_tune_path(be);
    yc_info("tuning %d convolution passes of %s at %d, batch %d%s on %s (%d runs of each tile)\n",
            nconv, m->cfg->name, img, batch, half ? ", FP16 storage" : "", be->info.name, iters);
    int tuned = 0;
    if ((st = yc_cl_tune(be, ops, nconv, iters, file, &tuned)))
        goto done;
    if (file)
        yc_info("%d passes tuned; kept in %s for every run on %s\n", tuned, file, be->info.name);
    else
        yc_info("%d passes tuned; not kept: no cache directory (YOLOCL_CL_CACHE=0, or neither "
                "XDG_CACHE_HOME nor HOME set)\n", tuned);
done:
    free(ops);
    free(file);
    yc_graph_free(g);
    yc_model_free(m);
    yc_backend_free(be);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
#endif
}
