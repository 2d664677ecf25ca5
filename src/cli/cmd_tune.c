/* yolocl tune: the convolution tiles of an OpenCL device measured on a model's training step and
 * kept for every later run on that device (cl/cl_tune.c). */
#include "config.h"

#include <stddef.h>
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
#include "options.h"
#include "weights.h"

#ifdef YC_HAVE_OPENCL
#include "cl_backend.h"
#endif

/* The command line. */
typedef struct tune_cli {
    const char *cfg, *device;
    int img, batch, iters;
    bool half;
} tune_cli;

#define T tune_cli
static const yc_option rows[] = {
    YC_OPT_STRING(0, "device", "D", T, device,
                  "opencl, opencl:N or a device name substring (default: auto)"),
    YC_OPT_STRING('c', "cfg", "MODEL", T, cfg, "model config (bundled name or yaml path)"),
    {.type = YC_OPT_T_INT, .name = "img", .aliases = {"imgsz"}, .metavar = "SIZE",
     .offset = offsetof(T, img), .lo = 32, .hi = 16384,
     .help = "image size, a multiple of the model's stride"},
    {.type = YC_OPT_T_INT, .short_name = 'b', .name = "batch", .aliases = {"batch-size"},
     .metavar = "N", .offset = offsetof(T, batch), .lo = 1, .hi = 4096,
     .help = "images per batch"},
    YC_OPT_BOOL(0, "half", T, half, "FP16 storage of activations (as training chooses on OpenCL)"),
    YC_OPT_INT(0, "iters", "N", T, iters, 1, 1000,
               "timed runs of each tile on each convolution (default 3)"),
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "tune",
    .head = "Usage: yolocl tune [--device D] [--cfg MODEL] [--img SIZE] [--batch N] [--half]\n"
            "                   [--iters N]\n"
            "Measure every tile of the OpenCL convolutions on each convolution of a model's\n"
            "training step on one device, and keep the fastest for that device: train, val,\n"
            "detect and bench then use them (and say so).  Defaults: yolov5s at 640, batch 16.\n"
            "\n",
    .rows = rows,
    .help_col = 20,
};

int yc_cmd_tune(int argc, char **argv)
{
    static const char *const cmd = "tune";
    tune_cli c = {.cfg = "yolov5s", .device = "auto", .img = 640, .batch = 16, .iters = 3};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &c, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    const char *cfg_name = c.cfg, *device = c.device;
    int img = c.img, batch = c.batch, iters = c.iters;
    bool half = c.half;
#ifndef YC_HAVE_OPENCL
    (void)half, (void)iters, (void)batch, (void)img, (void)cfg_name, (void)device, (void)cmd;
    return yc_report_failure(yc_error_status(YC_EUNSUPPORTED, "tune: this yolocl was built "
                                             "without OpenCL (./configure --disable-opencl)"));
#else
    bool cpu = false;
    if ((st = yc_device_is_cpu(device, &cpu)))
        return yc_report_failure(st);
    if (cpu)
        return yc_usage_error(cmd, "tune measures OpenCL devices: give --device opencl, "
                              "opencl:N or a device name (the CPU backend has no tiles to tune)");
    yc_opened_model om;
    yc_graph *g = NULL;
    char *file = NULL;
    const yc_op **ops = NULL;
    yc_model_spec ms = {.cfg = cfg_name, .device = device, .announce = true,
                        .use = YC_MODEL_TRAIN, .detection_only = "yolocl tune"};
    if ((st = yc_model_open(&ms, &om)))
        return yc_report_failure(st);
    yc_model *m = om.m;
    yc_backend *be = om.be;
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
    yc_opened_model_free(&om);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
#endif
}
