/* yolocl export: YOLOv5's export.py for the formats yolocl writes.  --include safetensors (the
 * default) converts weights (an Ultralytics YOLOv5 .pt file, or any safetensors file yolocl reads)
 * to a yolocl safetensors file with the model config, class names, nc and strides in its metadata
 * (weights.h); --include onnx writes the fused model as ONNX with Detect in export mode
 * (export/onnx.h).
 *
 * Entry point, declared in commands.h:
 *   int yc_cmd_export(int argc, char **argv); */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "commands.h"
#include "detect.h"
#include "device.h"
#include "log.h"
#include "onnx.h"
#include "options.h"
#include "util.h"
#include "weights.h"

/* The command line. */
typedef struct export_cli {
    const char *weights, *out, *cfg;
    bool half, dynamic;
    /* the formats of --include */
    bool onnx, safetensors;
    int img_h, img_w, batch, opset;
} export_cli;

static int include(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);
static int img_size(const yc_option *row, const char *arg, void *obj, yc_opt_state *s);

#define T export_cli
static const yc_option rows[] = {
    YC_OPT_STRING('w', "weights", "FILE", T, weights, "the weights to export (.pt or .safetensors)"),
    YC_OPT_CALLBACK(0, "include", "FORMAT [FORMAT ...]", T, onnx, include,
                    "formats to write: safetensors (the default), onnx;\n"
                    "several as separate words or comma-separated"),
    YC_OPT_STRING('o', "out", "FILE", T, out,
                  "the file to write (default: the weights' name with the\n"
                  "format's suffix, beside them; with several formats, the\n"
                  "suffix of FILE is replaced by each format's)"),
    YC_OPT_STRING('c', "cfg", "MODEL", T, cfg,
                  "model config of weights that carry none (a bundled name\nor a model yaml)"),
    YC_OPT_BOOL(0, "half", T, half,
                "FP16: safetensors tensors; ONNX weights, input and output\n(default FP32)"),
    {.type = YC_OPT_T_CALLBACK, .name = "img", .aliases = {"imgsz", "img-size"},
     .metavar = "H [W]", .fn = img_size,
     .help = "ONNX input size (default 640; rounded up to a multiple\nof the largest stride)"},
    YC_OPT_INT(0, "batch", "N", T, batch, 1, 65536, "ONNX batch size (default 1)"),
    YC_OPT_BOOL(0, "dynamic", T, dynamic, "ONNX: batch, height and width dynamic"),
    YC_OPT_INT(0, "opset", "N", T, opset, YC_ONNX_OPSET_MIN, YC_ONNX_OPSET_MAX,
               "ONNX opset version (default 12, 11 to 17)"),
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "export",
    .head = "Usage: yolocl export --weights FILE [--include FORMAT ...] [--out FILE] [options]\n"
            "Export YOLOv5 weights (a .pt checkpoint or a safetensors file): as a yolocl\n"
            "safetensors file carrying the model config, class names and strides, or as an\n"
            "ONNX model (Conv and BatchNorm fused, Detect decoding boxes, no NMS) as\n"
            "YOLOv5's export.py writes it.\n"
            "\n",
    .rows = rows,
    .help_col = 24,
};

/* --img H [W] (YOLOv5's --imgsz nargs='+'): one size for both sides, or height then width. */
static int img_size(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    export_cli *c = obj;
    return yc_opt_img_hw(arg, s, &c->img_h, &c->img_w);
}

/* One word of --include, possibly a comma-separated list. */
static int include_word(export_cli *c, const char *cmd, const char *w)
{
    const char *p = w;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 4 && !strncmp(p, "onnx", 4))
            c->onnx = true;
        else if (n == 11 && !strncmp(p, "safetensors", 11))
            c->safetensors = true;
        else if (n)
            return yc_usage_error(cmd, "--include: unknown format '%.*s' (expected safetensors "
                                  "or onnx)", (int)n, p);
        p += n + (p[n] == ',');
    }
    return 0;
}

/* --include FORMAT [FORMAT ...] (YOLOv5's nargs='+'): this value and the following arguments
 * that are not options. */
static int include(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    export_cli *c = obj;
    int st = include_word(c, s->spec->cmd, arg);
    while (!st && optind < s->argc && s->argv[optind][0] != '-')
        st = include_word(c, s->spec->cmd, s->argv[optind++]);
    return st;
}

/* The file a format is written to: --out as it is for a single format; else the stem of --out
 * or of the weights with the format's suffix.  A malloc'ed path, or NULL (YC_ENOMEM). */
static char *out_path(const export_cli *o, int nformats, const char *suffix)
{
    const char *base = o->out ? o->out : o->weights;
    if (o->out && nformats == 1)
        return yc_strdup(o->out, "the output path");
    const char *slash = strrchr(base, '/'), *dot = strrchr(base, '.');
    size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - base) : strlen(base);
    char *p = yc_malloc(stem + strlen(suffix) + 1, "the output path");
    if (p) {
        memcpy(p, base, stem);
        strcpy(p + stem, suffix);
    }
    return p;
}

/* The weights as a yolocl safetensors file, and three lines saying what was written. */
static int export_safetensors(const export_cli *c, const char *out)
{
    yc_weights *w = NULL;
    int st = yc_weights_read(c->weights, &w);
    bool inferred = false;
    if (!st && w->nc < 1)
        inferred = yc_weights_infer_nc(w, &w->nc) == YC_OK;
    if (!st)
        st = yc_weights_write_safetensors(w, out, c->half);
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
    printf("%s: %s, %d tensors, %zu values\n", c->weights, w->source, w->ntensors, elems);
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
    printf("wrote %s (%s, %s)\n", out, c->half ? "FP16" : "FP32", size);
    yc_weights_free(w);
    return YC_EXIT_OK;
}

/* The model on the CPU backend, its weights loaded, written as ONNX, and three lines saying what
 * was written. */
static int export_onnx(const export_cli *c, const char *out)
{
    yc_backend *be = NULL;
    yc_infer_model im = {0};
    int st = yc_device_open("cpu", 1, false, &be);
    if (!st)
        st = yc_infer_model_load_any(&im, c->weights, c->cfg, be);
    if (st) {
        yc_infer_model_free(&im);
        yc_backend_free(be);
        return yc_report_failure(st);
    }
    yc_onnx_options o;
    yc_onnx_options_default(&o);
    o.h = yc_check_img_size(c->img_h, im.stride, 0);
    o.w = yc_check_img_size(c->img_w, im.stride, 0);
    if (o.h != c->img_h || o.w != c->img_w)
        yc_warn("--img-size %dx%d must be multiple of max stride %d, updating to %dx%d", c->img_h,
                c->img_w, im.stride, o.h, o.w);
    o.batch = c->batch;
    o.dynamic = c->dynamic;
    o.half = c->half;
    o.opset = c->opset;
    o.names = (const char *const *)im.names;
    o.nnames = im.names ? im.m->nc : 0;
    o.version = PACKAGE_VERSION;
    size_t bytes = 0;
    st = yc_onnx_export(im.m, &o, out, &bytes);
    if (!st) {
        char size[32];
        yc_format_size(bytes, size, sizeof size);
        const yc_model *m = im.m;
        size_t rows = 0;
        for (int l = 0; l < m->nl; l++)
            rows += (size_t)m->na * (size_t)(o.h / (int)m->stride[l]) *
                    (size_t)(o.w / (int)m->stride[l]);
        printf("%s: %s, %d classes, Conv and BatchNorm fused\n", c->weights, m->cfg->name, m->nc);
        int nm = m->cfg->layers[m->cfg->nlayers - 1].nm, s0 = m->nl ? (int)m->stride[0] / 2 : 1;
        if (m->cfg->task == YC_TASK_CLASSIFY && o.dynamic)
            printf("  images (batch, 3, height, width) -> output0 (batch, %d) logits, dynamic\n",
                   m->nc);
        else if (m->cfg->task == YC_TASK_CLASSIFY)
            printf("  images (%d, 3, %d, %d) -> output0 (%d, %d) logits\n", o.batch, o.h, o.w,
                   o.batch, m->nc);
        else if (o.dynamic)
            printf("  images (batch, 3, height, width) -> output0 (batch, anchors, %d)%s, "
                   "dynamic\n", m->no, nm > 0 ? ", output1 (batch, 32, mask_height, mask_width)"
                                               : "");
        else if (nm > 0)
            printf("  images (%d, 3, %d, %d) -> output0 (%d, %zu, %d), output1 (%d, %d, %d, "
                   "%d)\n", o.batch, o.h, o.w, o.batch, rows, m->no, o.batch, nm, o.h / s0,
                   o.w / s0);
        else
            printf("  images (%d, 3, %d, %d) -> output0 (%d, %zu, %d)\n", o.batch, o.h, o.w,
                   o.batch, rows, m->no);
        printf("wrote %s (ONNX opset %d, %s, %s)\n", out, o.opset, o.half ? "FP16" : "FP32",
               size);
    }
    yc_infer_model_free(&im);
    yc_backend_free(be);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}

int yc_cmd_export(int argc, char **argv)
{
    static const char *const cmd = "export";
    export_cli o = {.img_h = 640, .img_w = 640, .batch = 1, .opset = 12};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &o, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    if (!o.weights)
        return yc_usage_error(cmd, "--weights is required (for example --weights yolov5n.pt)");
    if (!o.onnx && !o.safetensors)
        o.safetensors = true;
    int nformats = o.onnx + o.safetensors;
    struct {
        bool on;
        const char *suffix;
        int (*run)(const export_cli *, const char *);
    } fmts[] = {
        {o.safetensors, ".safetensors", export_safetensors},
        {o.onnx, ".onnx", export_onnx},
    };
    char *paths[2] = {NULL, NULL};
    for (int i = 0; i < 2 && !st; i++) {
        if (!fmts[i].on)
            continue;
        if (!(paths[i] = out_path(&o, nformats, fmts[i].suffix)))
            st = yc_report_failure(YC_ENOMEM);
        else if (!strcmp(paths[i], o.weights))
            st = yc_usage_error(cmd, "the %s file would replace the weights %s: give --out",
                                fmts[i].suffix + 1, o.weights);
    }
    for (int i = 0; i < 2 && !st; i++)
        if (fmts[i].on)
            st = fmts[i].run(&o, paths[i]);
    free(paths[0]);
    free(paths[1]);
    return st;
}
