/* yolocl export: converts weights (an Ultralytics YOLOv5 .pt file, or any safetensors file yolocl
 * reads) to a yolocl safetensors file with the model config, class names, nc and strides in its
 * metadata (weights.h).
 *
 * Entry point, declared in commands.h:
 *   int yc_cmd_export(int argc, char **argv); */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "log.h"
#include "util.h"
#include "weights.h"

static void print_usage(void)
{
    fputs("Usage: yolocl export --weights FILE --out FILE.safetensors [--half]\n"
          "Convert YOLOv5 weights (a .pt checkpoint or a safetensors file) to a yolocl\n"
          "safetensors file carrying the model config, class names and strides.\n"
          "\n"
          "  -w, --weights FILE  the weights to convert (.pt or .safetensors)\n"
          "  -o, --out FILE      the safetensors file to write\n"
          "      --half          store floating tensors as FP16 (default FP32)\n"
          "  -h, --help          show this help\n",
          stdout);
}

int yc_cmd_export(int argc, char **argv)
{
    static const char *const cmd = "export";
    static const struct option opts[] = {
        {"weights", required_argument, NULL, 'w'},
        {"out", required_argument, NULL, 'o'},
        {"half", no_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *weights = NULL, *out = NULL;
    bool half = false;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":w:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'w':
            weights = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'H':
            half = true;
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
    if (!weights)
        return yc_usage_error(cmd, "--weights is required (for example --weights yolov5n.pt)");
    if (!out)
        return yc_usage_error(cmd, "--out is required (for example --out yolov5n.safetensors)");

    yc_weights *w = NULL;
    int st = yc_weights_read(weights, &w);
    bool inferred = false;
    if (!st && w->nc < 1)
        inferred = yc_weights_infer_nc(w, &w->nc) == YC_OK;
    if (!st)
        st = yc_weights_write_safetensors(w, out, half);
    if (st) {
        yc_weights_free(w);
        return yc_report_failure(st);
    }
    size_t elems = 0;
    for (int i = 0; i < w->ntensors; i++)
        elems += w->tensors[i].numel;
    struct stat sb;
    char size[32] = "?";
    if (stat(out, &sb) == 0)
        yc_format_size((size_t)sb.st_size, size, sizeof size);
    printf("%s: %s, %d tensors, %zu values\n", weights, w->source, w->ntensors, elems);
    printf("  config: %s, nc: ", w->model_yaml ? (w->model_name ? w->model_name : "embedded")
                                                : "none (loading needs --cfg)");
    if (w->nc > 0)
        printf("%d%s", w->nc, inferred ? " (from the Detect head)" : "");
    else
        printf("unknown");
    printf(", names: %d, strides:", w->nnames);
    for (int i = 0; i < w->nstride; i++)
        printf(" %g", w->stride[i]);
    printf("%s\n", w->nstride ? "" : " none");
    printf("wrote %s (%s, %s)\n", out, half ? "FP16" : "FP32", size);
    yc_weights_free(w);
    return YC_EXIT_OK;
}
