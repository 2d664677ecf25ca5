/* yolocl info: a model's layer table, parameter count and GFLOPs, printed like YOLOv5's model
 * summary (parse_model's table, then "YOLOv5s summary: 214 layers, ... GFLOPs"). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "graph.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "options.h"
#include "weights.h"

/* The command line. */
typedef struct info_cli {
    const char *cfg;
    int nc, img;
} info_cli;

#define T info_cli
static const yc_option rows[] = {
    YC_OPT_STRING('c', "cfg", "MODEL", T, cfg,
                  "model config: a bundled name (yolov5n, yolov5s, ..., yolov5x6)\n"
                  "or the path of a YOLOv5-format model yaml"),
    YC_OPT_INT(0, "nc", "N", T, nc, 1, 100000, "number of classes (default: the yaml's nc)"),
    {.type = YC_OPT_T_INT, .name = "img", .aliases = {"imgsz"}, .metavar = "SIZE",
     .offset = offsetof(T, img), .lo = 32, .hi = 16384,
     .help = "image size for the GFLOPs figure (default 640)"},
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "info",
    .head = "Usage: yolocl info --cfg MODEL [--nc N] [--img SIZE]\n"
            "Print a model's layers, parameters and GFLOPs like YOLOv5's model summary.\n"
            "\n",
    .rows = rows,
    .help_col = 20,
};

/* str(f) as Python prints the `from` entry: -1, or [-1, 6]. */
static void format_from(const yc_layer_cfg *l, char *buf, size_t len)
{
    if (l->nfrom == 1) {
        snprintf(buf, len, "%d", l->from_raw[0]);
        return;
    }
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < l->nfrom && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", l->from_raw[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

/* The layer table and the summary lines. */
static void print_summary(yc_model *m, int img, const char *path)
{
    printf("\n%3s%18s%3s%10s  %-40s%-30s\n", "", "from", "n", "params", "module", "arguments");
    for (int i = 0; i < m->cfg->nlayers; i++) {
        const yc_layer_cfg *l = &m->cfg->layers[i];
        char from[64];
        format_from(l, from, sizeof from);
        printf("%3d%18s%3d%10zu  %-40s%-30s\n", i, from, l->n, yc_model_layer_params(m, i),
               l->type_name, l->args_text);
    }
    size_t np = yc_model_count_params(m);
    double gflops = yc_model_gflops(m, img);
    printf("%s summary: %d layers, %zu parameters, %zu gradients, %.1f GFLOPs\n", m->cfg->name,
           yc_model_count_modules(m), np, np, gflops);
    if (m->cfg->task == YC_TASK_CLASSIFY) {
        printf("classifier: %d classes  config: %s\n", m->nc, path);
        return;
    }
    printf("strides:");
    for (int l = 0; l < m->nl; l++)
        printf(" %g", m->stride[l]);
    printf("  anchors per level: %d  classes: %d", m->na, m->nc);
    if (m->cfg->task == YC_TASK_SEGMENT)
        printf("  masks: %d prototypes at stride %g", m->nm, m->stride[0] / 2);
    printf("  config: %s\n", path);
}

int yc_cmd_info(int argc, char **argv)
{
    info_cli c = {.img = 640};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &c, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    if (!c.cfg)
        return yc_usage_error(spec.cmd, "--cfg is required (for example --cfg yolov5s)");
    yc_model_spec ms = {.cfg = c.cfg, .nc = c.nc, .use = YC_MODEL_SHAPE};
    yc_opened_model om;
    if ((st = yc_model_open(&ms, &om)))
        return yc_report_failure(st);
    print_summary(om.m, c.img, om.cfg_path);
    yc_opened_model_free(&om);
    return YC_EXIT_OK;
}
