/* yolocl export: converts weights (an Ultralytics YOLOv5 .pt file, or any safetensors file yolocl
 * reads) to a yolocl safetensors file with the model config, class names, nc and strides in its
 * metadata (weights.h).
 *
 * Entry point, declared in commands.h:
 *   int yc_cmd_export(int argc, char **argv); */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "log.h"
#include "options.h"
#include "util.h"
#include "weights.h"

/* The command line. */
typedef struct export_cli {
    const char *weights, *out;
    bool half;
} export_cli;

#define T export_cli
static const yc_option rows[] = {
    YC_OPT_STRING('w', "weights", "FILE", T, weights, "the weights to convert (.pt or .safetensors)"),
    YC_OPT_STRING('o', "out", "FILE", T, out, "the safetensors file to write"),
    YC_OPT_BOOL(0, "half", T, half, "store floating tensors as FP16 (default FP32)"),
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "export",
    .head = "Usage: yolocl export --weights FILE --out FILE.safetensors [--half]\n"
            "Convert YOLOv5 weights (a .pt checkpoint or a safetensors file) to a yolocl\n"
            "safetensors file carrying the model config, class names and strides.\n"
            "\n",
    .rows = rows,
    .help_col = 22,
};

int yc_cmd_export(int argc, char **argv)
{
    static const char *const cmd = "export";
    export_cli o = {.weights = NULL};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &o, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    const char *weights = o.weights, *out = o.out;
    bool half = o.half;
    if (!weights)
        return yc_usage_error(cmd, "--weights is required (for example --weights yolov5n.pt)");
    if (!out)
        return yc_usage_error(cmd, "--out is required (for example --out yolov5n.safetensors)");

    yc_weights *w = NULL;
    st = yc_weights_read(weights, &w);
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
