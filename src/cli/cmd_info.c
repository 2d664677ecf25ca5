/* yolocl info: a model's layer table, parameter count and GFLOPs, printed like YOLOv5's model
 * summary (parse_model's table, then "YOLOv5s summary: 214 layers, ... GFLOPs"). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "graph.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"

static void print_usage(void)
{
    fputs("Usage: yolocl info --cfg MODEL [--nc N] [--img SIZE]\n"
          "Print a model's layers, parameters and GFLOPs like YOLOv5's model summary.\n"
          "\n"
          "  -c, --cfg MODEL   model config: a bundled name (yolov5n, yolov5s, ..., yolov5x6)\n"
          "                    or the path of a YOLOv5-format model yaml\n"
          "      --nc N        number of classes (default: the yaml's nc)\n"
          "      --img SIZE    image size for the GFLOPs figure (default 640)\n"
          "  -h, --help        show this help\n",
          stdout);
}

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

int yc_cmd_info(int argc, char **argv)
{
    static const char *const cmd = "info";
    static const struct option opts[] = {
        {"cfg", required_argument, NULL, 'c'},
        {"nc", required_argument, NULL, 'n'},
        {"img", required_argument, NULL, 'i'},
        {"imgsz", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cfg_name = NULL;
    int nc = 0, img = 640, c, st;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg_name = optarg;
            break;
        case 'n':
            if ((st = yc_cli_int(cmd, "--nc", optarg, 1, 100000, &nc)))
                return st;
            break;
        case 'i':
            if ((st = yc_cli_int(cmd, "--img", optarg, 32, 16384, &img)))
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
    if (!cfg_name)
        return yc_usage_error(cmd, "--cfg is required (for example --cfg yolov5s)");

    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    if ((st = yc_model_cfg_find(cfg_name, path, sizeof path)) ||
        (st = yc_model_cfg_load(&cfg, path, nc)) || (st = yc_model_new(&m, cfg)))
        return yc_report_failure(st);

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
    printf("strides:");
    for (int l = 0; l < m->nl; l++)
        printf(" %g", m->stride[l]);
    printf("  anchors per level: %d  classes: %d  config: %s\n", m->na, m->nc, path);
    yc_model_free(m);
    return YC_EXIT_OK;
}
