/* Model configs in YOLOv5's yaml format, resolved as parse_model does (see modelcfg.h). */
#include "modelcfg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "yamltree.h"

/* ---- locating configs ------------------------------------------------------------------------ */

int yc_model_cfg_find(const char *name, char *path, size_t len)
{
    if (!name || !name[0])
        return yc_error_status(YC_EUSAGE, "no model config given (--cfg yolov5s, or a yaml path)");
    if (yc_file_exists(name)) {
        if (strlen(name) >= len)
            return yc_error_status(YC_EUSAGE, "model config path too long: %s", name);
        strcpy(path, name);
        return YC_OK;
    }
    if (strchr(name, '/'))
        return yc_error_status(YC_EIO, "model config %s does not exist", name);
    char rel[512];
    size_t n = strlen(name);
    bool has_ext = n > 5 && (strcmp(name + n - 5, ".yaml") == 0 || strcmp(name + n - 4, ".yml") == 0);
    snprintf(rel, sizeof rel, "models/%s%s", name, has_ext ? "" : ".yaml");
    int status = yc_data_path(rel, path, len);
    if (status)
        return yc_error_context(status, "model config '%s' is neither a file nor a bundled model "
                                "(yolov5n/s/m/l/x, yolov5n6/s6/m6/l6/x6)", name);
    return YC_OK;
}

/* ---- argument values (YOLOv5 eval()s each string argument) ------------------------------------ */

typedef struct cfg_ctx {
    yc_model_cfg *cfg;
    const char *path;
    const yc_yaml_node *anchors_node;
    int row;
    int line;
} cfg_ctx;

static int row_error(const cfg_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int row_error(const cfg_ctx *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return yc_error_status(YC_EFORMAT, "%s:%d: layer %d: %s", c->path, c->line, c->row, msg);
}

/* An unquoted name that YOLOv5's eval() turns into a value. */
static bool is_name(const yc_yaml_node *n, const char *name)
{
    return n && n->kind == YC_YAML_SCALAR && !n->quoted && strcmp(n->value, name) == 0;
}

static bool is_none(const yc_yaml_node *n)
{
    return is_name(n, "None") || yc_yaml_is_null(n);
}

/* Integer argument; `nc` evaluates to the class count. */
static int arg_int(const cfg_ctx *c, const yc_yaml_node *n, const char *what, long *out)
{
    if (is_name(n, "nc")) {
        *out = c->cfg->nc;
        return YC_OK;
    }
    double d;
    if (yc_yaml_int(n, out) == YC_OK)
        return YC_OK;
    if (yc_yaml_double(n, &d) == YC_OK && d == floor(d) && fabs(d) < 1e9) {
        *out = (long)d;
        return YC_OK;
    }
    return row_error(c, "%s must be an integer, got '%s'", what,
                     n && n->kind == YC_YAML_SCALAR ? n->value : "a list");
}

static int arg_bool(const cfg_ctx *c, const yc_yaml_node *n, const char *what, bool *out)
{
    if (yc_yaml_bool(n, out) == YC_OK)
        return YC_OK;
    long v;
    if (yc_yaml_int(n, &v) == YC_OK) {
        *out = v != 0;
        return YC_OK;
    }
    return row_error(c, "%s must be True or False, got '%s'", what,
                     n && n->kind == YC_YAML_SCALAR ? n->value : "a list");
}

static int arg_double(const cfg_ctx *c, const yc_yaml_node *n, const char *what, double *out)
{
    if (yc_yaml_double(n, out) == YC_OK && isfinite(*out))
        return YC_OK;
    return row_error(c, "%s must be a number, got '%s'", what,
                     n && n->kind == YC_YAML_SCALAR ? n->value : "a list");
}

/* Appends Python's repr() of a value to buf (ints, floats, bools, None, strings, lists), with `nc`
 * and `anchors` evaluated as YOLOv5 does. */
static void repr_append(const cfg_ctx *c, char *buf, size_t len, const yc_yaml_node *n);

static void cat(char *buf, size_t len, const char *s)
{
    size_t used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, "%s", s);
}

static void repr_float(char *buf, size_t len, double d)
{
    char tmp[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    if (!strpbrk(tmp, ".eEn"))
        strcat(tmp, ".0");
    cat(buf, len, tmp);
}

static void repr_append(const cfg_ctx *c, char *buf, size_t len, const yc_yaml_node *n)
{
    char tmp[64];
    if (!n) {
        cat(buf, len, "None");
        return;
    }
    if (n->kind == YC_YAML_SEQ) {
        cat(buf, len, "[");
        for (int i = 0; i < n->n; i++) {
            if (i)
                cat(buf, len, ", ");
            repr_append(c, buf, len, n->items[i]);
        }
        cat(buf, len, "]");
        return;
    }
    if (n->kind == YC_YAML_MAP) {
        cat(buf, len, "{...}");
        return;
    }
    long v;
    double d;
    bool b;
    if (n->quoted) {
        cat(buf, len, "'");
        cat(buf, len, n->value);
        cat(buf, len, "'");
    } else if (is_name(n, "nc")) {
        snprintf(tmp, sizeof tmp, "%d", c->cfg->nc);
        cat(buf, len, tmp);
    } else if (is_name(n, "anchors")) {
        repr_append(c, buf, len, c->anchors_node);
    } else if (is_none(n)) {
        cat(buf, len, "None");
    } else if (yc_yaml_int(n, &v) == YC_OK) {
        snprintf(tmp, sizeof tmp, "%ld", v);
        cat(buf, len, tmp);
    } else if (yc_yaml_double(n, &d) == YC_OK) {
        repr_float(buf, len, d);
    } else if (yc_yaml_bool(n, &b) == YC_OK) {
        cat(buf, len, b ? "True" : "False");
    } else {
        cat(buf, len, "'");
        cat(buf, len, n->value);
        cat(buf, len, "'");
    }
}

/* "[c1, c2, <extra>, <args from index `from`>]" into layer->args_text. */
static void format_args(const cfg_ctx *c, yc_layer_cfg *l, const char *lead,
                        const yc_yaml_node *args, int from, const char *tail)
{
    char *buf = l->args_text;
    size_t len = sizeof l->args_text;
    buf[0] = '\0';
    cat(buf, len, "[");
    cat(buf, len, lead);
    bool first = !lead[0];
    for (int i = from; args && i < args->n; i++) {
        if (!first)
            cat(buf, len, ", ");
        first = false;
        repr_append(c, buf, len, args->items[i]);
    }
    if (tail && tail[0]) {
        if (!first)
            cat(buf, len, ", ");
        cat(buf, len, tail);
    }
    cat(buf, len, "]");
}

/* make_divisible(c2 * width_multiple, divisor) = ceil(x / divisor) * divisor */
static int round_channels(const yc_model_cfg *cfg, long c2)
{
    double x = (double)c2 * cfg->width_multiple;
    return (int)(ceil(x / cfg->channel_multiple) * cfg->channel_multiple);
}

/* ---- anchors -------------------------------------------------------------------------------- */

static int parse_anchors(yc_model_cfg *cfg, const char *path, const yc_yaml_node *an)
{
    long count;
    if (!an)
        return yc_error_status(YC_EFORMAT, "%s: the key 'anchors' is missing", path);
    if (yc_yaml_int(an, &count) == YC_OK) {
        if (count < 1 || count > YC_CFG_MAX_ANCHORS)
            return yc_error_status(YC_EFORMAT, "%s:%d: anchors: %ld anchors per level is out of "
                                   "range 1..%d", path, an->line, count, YC_CFG_MAX_ANCHORS);
        cfg->na = (int)count;
        cfg->nl = 0; /* set from the Detect row */
        cfg->anchors_placeholder = true;
        return YC_OK;
    }
    if (an->kind != YC_YAML_SEQ || an->n < 1 || an->n > YC_CFG_MAX_LEVELS)
        return yc_error_status(YC_EFORMAT, "%s:%d: anchors must be a list of 1..%d levels, each a "
                               "list of w,h pairs in pixels (or a count)", path, an->line,
                               YC_CFG_MAX_LEVELS);
    cfg->nl = an->n;
    for (int l = 0; l < an->n; l++) {
        const yc_yaml_node *row = an->items[l];
        if (row->kind != YC_YAML_SEQ || row->n < 2 || row->n % 2 ||
            row->n > 2 * YC_CFG_MAX_ANCHORS)
            return yc_error_status(YC_EFORMAT, "%s:%d: anchors level %d must hold w,h pairs",
                                   path, row->line, l);
        if (l == 0)
            cfg->na = row->n / 2;
        else if (row->n / 2 != cfg->na)
            return yc_error_status(YC_EFORMAT, "%s:%d: anchors level %d has %d anchors, level 0 "
                                   "has %d", path, row->line, l, row->n / 2, cfg->na);
        for (int i = 0; i < row->n; i++) {
            double v;
            if (yc_yaml_double(row->items[i], &v) || !(v > 0) || !isfinite(v))
                return yc_error_status(YC_EFORMAT, "%s:%d: anchors level %d: '%s' is not a "
                                       "positive number", path, row->line, l,
                                       row->items[i]->kind == YC_YAML_SCALAR
                                           ? row->items[i]->value : "a list");
            cfg->anchors[l * cfg->na * 2 + i] = (float)v;
        }
    }
    return YC_OK;
}

/* ---- rows --------------------------------------------------------------------------------- */

static int resolve_from(cfg_ctx *c, const yc_yaml_node *fn, yc_layer_cfg *l, int index)
{
    const yc_yaml_node *single[1] = {fn};
    const yc_yaml_node *const *items = single;
    int count = 1;
    if (fn->kind == YC_YAML_SEQ) {
        items = (const yc_yaml_node *const *)fn->items;
        count = fn->n;
    }
    if (count < 1 || count > YC_MAX_FROM)
        return row_error(c, "'from' must be a layer index or a list of 1..%d indices", YC_MAX_FROM);
    for (int i = 0; i < count; i++) {
        long f;
        if (yc_yaml_int(items[i], &f))
            return row_error(c, "'from' entry '%s' is not an integer",
                             items[i]->kind == YC_YAML_SCALAR ? items[i]->value : "a list");
        long abs = f < 0 ? index + f : f;
        if (index == 0 && f == -1)
            abs = -1;
        else if (abs < 0 || abs >= index)
            return row_error(c, "'from' entry %ld does not name an earlier layer", f);
        l->from[i] = (int)abs;
        l->from_raw[i] = (int)f;
    }
    l->nfrom = count;
    return YC_OK;
}

/* Channels of layer `f`'s output (-1: the network input). */
static int channels_of(const yc_model_cfg *cfg, int f)
{
    return f < 0 ? cfg->ch : cfg->layers[f].c2;
}

static int need_single_input(cfg_ctx *c, const yc_layer_cfg *l, const char *module)
{
    if (l->nfrom != 1)
        return row_error(c, "%s takes one input, 'from' lists %d", module, l->nfrom);
    return YC_OK;
}

static int resolve_conv_family(cfg_ctx *c, yc_layer_cfg *l, const yc_yaml_node *args,
                               const char *module)
{
    yc_model_cfg *cfg = c->cfg;
    int status = need_single_input(c, l, module);
    if (status)
        return status;
    if (!args || args->n < 1)
        return row_error(c, "%s needs at least the output channels as its first argument", module);
    long c2;
    if ((status = arg_int(c, args->items[0], "output channels", &c2)))
        return status;
    if (c2 < 1 || c2 > 65536)
        return row_error(c, "output channels %ld out of range", c2);
    int no = cfg->na * (cfg->nc + 5);
    l->c1 = channels_of(cfg, l->from[0]);
    l->c2 = c2 != no ? round_channels(cfg, c2) : (int)c2;
    l->k = 1;
    l->s = 1;
    l->p = -1;
    l->g = 1;
    l->shortcut = true;
    l->e = 0.5;
    char lead[128];
    snprintf(lead, sizeof lead, "%d, %d", l->c1, l->c2);
    long v;
    switch (l->module) {
    case YC_MOD_CONV:
        /* Conv(c1, c2, k=1, s=1, p=None, g=1, d=1, act=True) */
        if (args->n > 7)
            return row_error(c, "Conv takes at most 7 arguments [c2, k, s, p, g, d, act]");
        if (args->n > 1 && (status = arg_int(c, args->items[1], "kernel size", &v)))
            return status;
        if (args->n > 1)
            l->k = (int)v;
        if (args->n > 2 && (status = arg_int(c, args->items[2], "stride", &v)))
            return status;
        if (args->n > 2)
            l->s = (int)v;
        if (args->n > 3 && !is_none(args->items[3])) {
            if ((status = arg_int(c, args->items[3], "padding", &v)))
                return status;
            l->p = (int)v;
        }
        if (args->n > 4 && (status = arg_int(c, args->items[4], "groups", &v)))
            return status;
        if (args->n > 4)
            l->g = (int)v;
        if (args->n > 5) {
            if ((status = arg_int(c, args->items[5], "dilation", &v)))
                return status;
            if (v != 1)
                return row_error(c, "Conv dilation %ld is not supported (only 1)", v);
        }
        if (args->n > 6) {
            bool act;
            if ((status = arg_bool(c, args->items[6], "act", &act)))
                return status;
            if (!act)
                return row_error(c, "Conv with act=False is not supported");
        }
        if (l->k < 1 || l->k > 15 || l->s < 1 || l->s > 8)
            return row_error(c, "Conv kernel %d / stride %d out of range", l->k, l->s);
        if (l->p < 0)
            l->p = l->k / 2;
        if (l->p > l->k)
            return row_error(c, "Conv padding %d larger than the kernel %d", l->p, l->k);
        if (l->g != 1)
            return row_error(c, "grouped convolutions (g=%d) are not supported", l->g);
        format_args(c, l, lead, args, 1, NULL);
        break;
    case YC_MOD_C3:
    case YC_MOD_BOTTLENECK:
        /* C3(c1, c2, n=1, shortcut=True, g=1, e=0.5); Bottleneck(c1, c2, shortcut, g, e) */
        if (args->n > 4)
            return row_error(c, "%s takes at most 4 arguments [c2, shortcut, g, e]", module);
        if (args->n > 1 && (status = arg_bool(c, args->items[1], "shortcut", &l->shortcut)))
            return status;
        if (args->n > 2) {
            if ((status = arg_int(c, args->items[2], "groups", &v)))
                return status;
            if (v != 1)
                return row_error(c, "grouped convolutions (g=%ld) are not supported", v);
        }
        if (args->n > 3 && (status = arg_double(c, args->items[3], "expansion e", &l->e)))
            return status;
        if (!(l->e > 0) || l->e > 16)
            return row_error(c, "expansion e=%g out of range", l->e);
        if (l->module == YC_MOD_C3) {
            char lead3[160];
            snprintf(lead3, sizeof lead3, "%s, %d", lead, l->n);
            format_args(c, l, lead3, args, 1, NULL);
        } else {
            format_args(c, l, lead, args, 1, NULL);
        }
        break;
    case YC_MOD_SPPF:
        /* SPPF(c1, c2, k=5) */
        l->pool[0] = 5;
        l->npool = 1;
        if (args->n > 2)
            return row_error(c, "SPPF takes at most 2 arguments [c2, k]");
        if (args->n > 1 && (status = arg_int(c, args->items[1], "pool size", &v)))
            return status;
        if (args->n > 1)
            l->pool[0] = (int)v;
        if (l->pool[0] < 1 || l->pool[0] % 2 == 0 || l->pool[0] > 31)
            return row_error(c, "SPPF pool size %d must be odd and at most 31", l->pool[0]);
        format_args(c, l, lead, args, 1, NULL);
        break;
    case YC_MOD_SPP:
        /* SPP(c1, c2, k=(5, 9, 13)) */
        l->pool[0] = 5;
        l->pool[1] = 9;
        l->pool[2] = 13;
        l->npool = 3;
        if (args->n > 2)
            return row_error(c, "SPP takes at most 2 arguments [c2, [k1, k2, k3]]");
        if (args->n > 1) {
            const yc_yaml_node *k = args->items[1];
            if (k->kind != YC_YAML_SEQ || k->n < 1 || k->n > 4)
                return row_error(c, "SPP pool sizes must be a list of 1..4 odd integers");
            l->npool = k->n;
            for (int i = 0; i < k->n; i++) {
                if ((status = arg_int(c, k->items[i], "pool size", &v)))
                    return status;
                if (v < 1 || v % 2 == 0 || v > 31)
                    return row_error(c, "SPP pool size %ld must be odd and at most 31", v);
                l->pool[i] = (int)v;
            }
        }
        format_args(c, l, lead, args, 1, NULL);
        break;
    default:
        break;
    }
    return YC_OK;
}

static int resolve_upsample(cfg_ctx *c, yc_layer_cfg *l, const yc_yaml_node *args)
{
    int status = need_single_input(c, l, "nn.Upsample");
    if (status)
        return status;
    if (!args || args->n < 2 || args->n > 3)
        return row_error(c, "nn.Upsample arguments must be [None, factor, 'nearest']");
    if (!is_none(args->items[0]))
        return row_error(c, "nn.Upsample with a fixed size is not supported; use [None, factor, "
                         "'nearest']");
    double f;
    if ((status = arg_double(c, args->items[1], "scale factor", &f)))
        return status;
    if (f != floor(f) || f < 1 || f > 16)
        return row_error(c, "nn.Upsample scale factor %g must be an integer 1..16", f);
    if (args->n == 3 && strcmp(args->items[2]->value ? args->items[2]->value : "", "nearest") != 0)
        return row_error(c, "nn.Upsample mode '%s' is not supported (only 'nearest')",
                         args->items[2]->value ? args->items[2]->value : "?");
    l->factor = (int)f;
    l->c1 = l->c2 = channels_of(c->cfg, l->from[0]);
    format_args(c, l, "", args, 0, NULL);
    return YC_OK;
}

static int resolve_concat(cfg_ctx *c, yc_layer_cfg *l, const yc_yaml_node *args)
{
    if (args && args->n > 0) {
        long dim;
        int status = arg_int(c, args->items[0], "dimension", &dim);
        if (status)
            return status;
        if (dim != 1)
            return row_error(c, "Concat along dimension %ld is not supported (only 1)", dim);
    }
    l->c2 = 0;
    for (int i = 0; i < l->nfrom; i++)
        l->c2 += channels_of(c->cfg, l->from[i]);
    l->c1 = l->c2;
    format_args(c, l, "", args, 0, NULL);
    return YC_OK;
}

/* Detect(nc, anchors, ch) and Segment(nc, anchors, nm, npr, ch): args [nc, anchors] and
 * [nc, anchors, nm, npr] (parse_model needs all four: it replaces npr by
 * make_divisible(npr * gw, 8), Proto's width) and the inputs' channels appended. */
static int resolve_detect(cfg_ctx *c, yc_layer_cfg *l, const yc_yaml_node *args)
{
    yc_model_cfg *cfg = c->cfg;
    const bool segment = strcmp(l->type_name, "models.yolo.Segment") == 0;
    const char *what = segment ? "Segment" : "Detect";
    if (!args || args->n != (segment ? 4 : 2))
        return row_error(c, "%s arguments must be [nc, anchors%s]", what,
                         segment ? ", masks, protos" : "");
    long nc;
    int status = arg_int(c, args->items[0], segment ? "Segment nc" : "Detect nc", &nc);
    if (status)
        return status;
    if (nc != cfg->nc)
        return row_error(c, "%s nc %ld differs from the model's nc %d", what, nc, cfg->nc);
    if (!is_name(args->items[1], "anchors"))
        return row_error(c, "%s anchors must be the name 'anchors'", what);
    if (segment) {
        long nm, npr;
        if ((status = arg_int(c, args->items[2], "Segment masks", &nm)) ||
            (status = arg_int(c, args->items[3], "Segment protos", &npr)))
            return status;
        if (nm < 1 || nm > 1024 || npr < 1 || npr > 65536)
            return row_error(c, "Segment masks %ld and protos %ld must be in 1..1024 and "
                             "1..65536", nm, npr);
        l->nm = (int)nm;
        l->npr = round_channels(cfg, npr);
    }
    if (cfg->anchors_placeholder) {
        cfg->nl = l->nfrom;
        for (int lv = 0; lv < cfg->nl; lv++)
            for (int i = 0; i < 2 * cfg->na; i++)
                cfg->anchors[lv * cfg->na * 2 + i] = (float)i;
    }
    if (l->nfrom != cfg->nl)
        return row_error(c, "%s has %d inputs but anchors has %d levels", what, l->nfrom, cfg->nl);
    l->c2 = cfg->na * (cfg->nc + 5 + l->nm);
    l->c1 = 0;
    char tail[256] = "[";
    if (segment) /* the rounded npr before the channels */
        snprintf(tail, sizeof tail, "%d, [", l->npr);
    for (int i = 0; i < l->nfrom; i++) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%s%d", i ? ", " : "", channels_of(cfg, l->from[i]));
        cat(tail, sizeof tail, tmp);
    }
    cat(tail, sizeof tail, "]");
    yc_yaml_node head = *args;
    head.n = args->n < 3 ? args->n : 3;
    format_args(c, l, "", &head, 0, tail);
    return YC_OK;
}

/* Classify(c1, c2): args [c2] (usually nc); c1 is the input's channels */
static int resolve_classify(cfg_ctx *c, yc_layer_cfg *l, const yc_yaml_node *args)
{
    if (!args || args->n != 1)
        return row_error(c, "Classify arguments must be [classes]");
    if (l->nfrom != 1)
        return row_error(c, "Classify takes one input, not %d", l->nfrom);
    long c2;
    int status = arg_int(c, args->items[0], "Classify classes", &c2);
    if (status)
        return status;
    if (c2 != c->cfg->nc)
        return row_error(c, "Classify classes %ld differ from the model's nc %d", c2, c->cfg->nc);
    l->c1 = channels_of(c->cfg, l->from[0]);
    l->c2 = (int)c2;
    l->k = l->s = l->g = 1;
    snprintf(l->args_text, sizeof l->args_text, "[%d, %d]", l->c1, l->c2);
    return YC_OK;
}

static const struct {
    const char *yaml_name;
    yc_module module;
    const char *type_name;
} module_table[] = {
    {"Conv", YC_MOD_CONV, "models.common.Conv"},
    {"Bottleneck", YC_MOD_BOTTLENECK, "models.common.Bottleneck"},
    {"C3", YC_MOD_C3, "models.common.C3"},
    {"SPP", YC_MOD_SPP, "models.common.SPP"},
    {"SPPF", YC_MOD_SPPF, "models.common.SPPF"},
    {"nn.Upsample", YC_MOD_UPSAMPLE, "torch.nn.modules.upsampling.Upsample"},
    {"Concat", YC_MOD_CONCAT, "models.common.Concat"},
    {"Detect", YC_MOD_DETECT, "models.yolo.Detect"},
    {"Segment", YC_MOD_DETECT, "models.yolo.Segment"},
    {"Classify", YC_MOD_CLASSIFY, "models.common.Classify"},
};

static int resolve_row(cfg_ctx *c, const yc_yaml_node *row, int index)
{
    yc_model_cfg *cfg = c->cfg;
    yc_layer_cfg *l = &cfg->layers[index];
    memset(l, 0, sizeof *l);
    l->line = row->line;
    c->row = index;
    c->line = row->line;
    if (row->kind != YC_YAML_SEQ || row->n != 4)
        return row_error(c, "a row must be [from, number, module, args]");
    int status = resolve_from(c, row->items[0], l, index);
    if (status)
        return status;
    long number;
    if (yc_yaml_int(row->items[1], &number) || number < 1 || number > 1000)
        return row_error(c, "'number' must be an integer 1..1000");
    const yc_yaml_node *mod = row->items[2];
    if (mod->kind != YC_YAML_SCALAR)
        return row_error(c, "'module' must be a module name");
    size_t m;
    for (m = 0; m < sizeof module_table / sizeof *module_table; m++)
        if (strcmp(mod->value, module_table[m].yaml_name) == 0)
            break;
    if (m == sizeof module_table / sizeof *module_table)
        return row_error(c, "module '%s' is not supported (supported: Conv, Bottleneck, C3, SPP, "
                         "SPPF, nn.Upsample, Concat, Detect, Segment, Classify)", mod->value);
    l->module = module_table[m].module;
    l->type_name = module_table[m].type_name;
    const yc_yaml_node *args = row->items[3];
    if (args->kind != YC_YAML_SEQ)
        return row_error(c, "'args' must be a list");
    /* n' = max(round(n * depth_multiple), 1) if n > 1; Python's round is half-to-even (rint) */
    l->n = number > 1 ? (int)fmax(rint((double)number * cfg->depth_multiple), 1.0) : (int)number;
    l->repeats = l->n;
    switch (l->module) {
    case YC_MOD_CONV:
    case YC_MOD_BOTTLENECK:
    case YC_MOD_SPP:
    case YC_MOD_SPPF:
        status = resolve_conv_family(c, l, args, module_table[m].yaml_name);
        break;
    case YC_MOD_C3:
        l->repeats = 1;
        status = resolve_conv_family(c, l, args, "C3");
        break;
    case YC_MOD_UPSAMPLE:
        status = resolve_upsample(c, l, args);
        break;
    case YC_MOD_CONCAT:
        status = resolve_concat(c, l, args);
        break;
    case YC_MOD_DETECT:
        l->repeats = 1;
        status = resolve_detect(c, l, args);
        break;
    case YC_MOD_CLASSIFY:
        l->repeats = 1;
        status = resolve_classify(c, l, args);
        break;
    }
    if (status)
        return status;
    if (l->repeats > 1 && l->c1 != l->c2 && l->module != YC_MOD_DETECT &&
        l->module != YC_MOD_CLASSIFY)
        return row_error(c, "repeating %s %d times needs equal input and output channels (%d, %d)",
                         module_table[m].yaml_name, l->repeats, l->c1, l->c2);
    if ((l->module == YC_MOD_DETECT || l->module == YC_MOD_CLASSIFY) && index != cfg->nlayers - 1)
        return row_error(c, "%s must be the last layer", module_table[m].yaml_name);
    return YC_OK;
}

/* Whether a row of the backbone or head names Classify (a classifier, which has no anchors;
 * resolve_row checks that it is the last). */
static bool classifier_rows(const yc_yaml_node *root)
{
    const char *parts[2] = {"backbone", "head"};
    for (int p = 0; p < 2; p++) {
        const yc_yaml_node *rows = yc_yaml_get(root, parts[p]);
        for (int i = 0; rows && rows->kind == YC_YAML_SEQ && i < rows->n; i++) {
            const yc_yaml_node *row = rows->items[i];
            if (row->kind == YC_YAML_SEQ && row->n == 4 && is_name(row->items[2], "Classify"))
                return true;
        }
    }
    return false;
}

static int get_number(const char *path, const yc_yaml_node *root, const char *key, double *out,
                      double lo, double hi)
{
    const yc_yaml_node *n = yc_yaml_get(root, key);
    if (!n)
        return yc_error_status(YC_EFORMAT, "%s: the key '%s' is missing", path, key);
    if (yc_yaml_double(n, out) || !(*out >= lo && *out <= hi))
        return yc_error_status(YC_EFORMAT, "%s:%d: %s must be a number in [%g, %g]", path,
                               n->line, key, lo, hi);
    return YC_OK;
}

int yc_model_cfg_from_yaml(yc_model_cfg **out, const yc_yaml_node *root, const char *path,
                           int nc_override)
{
    *out = NULL;
    int status = YC_OK;
    yc_model_cfg *cfg = yc_calloc(1, sizeof *cfg, "model config");
    if (!cfg)
        return YC_ENOMEM;
    snprintf(cfg->path, sizeof cfg->path, "%s", path);
    /* Path(yaml_file).stem.replace('yolov5', 'YOLOv5') */
    const char *base = yc_path_basename(path);
    const char *dot = strrchr(base, '.');
    size_t stem = dot ? (size_t)(dot - base) : strlen(base);
    char stem_buf[128];
    snprintf(stem_buf, sizeof stem_buf, "%.*s", (int)stem, base);
    const char *yv = strstr(stem_buf, "yolov5");
    if (yv)
        snprintf(cfg->name, sizeof cfg->name, "%.*sYOLOv5%s", (int)(yv - stem_buf), stem_buf,
                 yv + 6);
    else
        snprintf(cfg->name, sizeof cfg->name, "%s", stem_buf);

    double v;
    if (root->kind != YC_YAML_MAP) {
        status = yc_error_status(YC_EFORMAT, "%s: a model config must be a mapping", path);
        goto done;
    }
    if ((status = get_number(path, root, "nc", &v, 1, 100000)))
        goto done;
    cfg->nc = nc_override > 0 ? nc_override : (int)v;
    if (v != floor(v)) {
        status = yc_error_status(YC_EFORMAT, "%s: nc must be an integer", path);
        goto done;
    }
    if ((status = get_number(path, root, "depth_multiple", &cfg->depth_multiple, 1e-3, 100)) ||
        (status = get_number(path, root, "width_multiple", &cfg->width_multiple, 1e-3, 100)))
        goto done;
    cfg->ch = 3;
    if (yc_yaml_get(root, "ch")) {
        if ((status = get_number(path, root, "ch", &v, 1, 64)))
            goto done;
        cfg->ch = (int)v;
    }
    cfg->channel_multiple = 8;
    if (yc_yaml_get(root, "channel_multiple")) {
        if ((status = get_number(path, root, "channel_multiple", &v, 1, 1024)))
            goto done;
        cfg->channel_multiple = (int)v;
    }
    const yc_yaml_node *act = yc_yaml_get(root, "activation");
    if (act && !yc_yaml_is_null(act) &&
        !(act->kind == YC_YAML_SCALAR && strcmp(act->value, "nn.SiLU()") == 0)) {
        status = yc_error_status(YC_EFORMAT, "%s:%d: activation '%s' is not supported (only "
                                 "nn.SiLU())", path, act->line,
                                 act->kind == YC_YAML_SCALAR ? act->value : "?");
        goto done;
    }
    /* a classifier (its last row Classify) has no anchors */
    const yc_yaml_node *anchors = yc_yaml_get(root, "anchors");
    if ((anchors || !classifier_rows(root)) && (status = parse_anchors(cfg, path, anchors)))
        goto done;
    const yc_yaml_node *parts[2] = {yc_yaml_get(root, "backbone"), yc_yaml_get(root, "head")};
    const char *part_names[2] = {"backbone", "head"};
    int total = 0;
    for (int p = 0; p < 2; p++) {
        if (!parts[p] || parts[p]->kind != YC_YAML_SEQ) {
            status = yc_error_status(YC_EFORMAT, "%s: '%s' must be a list of rows [from, number, "
                                     "module, args]", path, part_names[p]);
            goto done;
        }
        total += parts[p]->n;
    }
    if (total < 2 || total > YC_MAX_LAYERS) {
        status = yc_error_status(YC_EFORMAT, "%s: %d layers (must be 2..%d)", path, total,
                                 YC_MAX_LAYERS);
        goto done;
    }
    cfg->nlayers = total;
    cfg_ctx c = {cfg, path, anchors, 0, 0};
    int index = 0;
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < parts[p]->n; i++, index++)
            if ((status = resolve_row(&c, parts[p]->items[i], index)))
                goto done;
    if (cfg->layers[total - 1].module != YC_MOD_DETECT &&
        cfg->layers[total - 1].module != YC_MOD_CLASSIFY) {
        status = yc_error_status(YC_EFORMAT, "%s: the last layer must be Detect, Segment or "
                                 "Classify", path);
        goto done;
    }
    if (cfg->layers[total - 1].nm > 0)
        cfg->task = YC_TASK_SEGMENT;
    if (cfg->layers[total - 1].module == YC_MOD_CLASSIFY) {
        cfg->task = YC_TASK_CLASSIFY;
        cfg->nl = cfg->na = 0;
    }
done:
    if (status) {
        free(cfg);
        return status;
    }
    *out = cfg;
    return YC_OK;
}

int yc_model_cfg_load(yc_model_cfg **out, const char *path, int nc_override)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    int status = yc_read_file(path, &text, &len);
    if (status)
        return status;
    status = yc_model_cfg_parse(out, text, len, path, nc_override);
    free(text);
    return status;
}

int yc_model_cfg_parse(yc_model_cfg **out, const char *text, size_t len, const char *name,
                       int nc_override)
{
    *out = NULL;
    yc_yaml_node *root = NULL;
    int status = yc_yaml_load_string(text, len, name, &root);
    if (status)
        return status;
    status = yc_model_cfg_from_yaml(out, root, name, nc_override);
    yc_yaml_free(root);
    if (status == YC_OK && !((*out)->text = yc_malloc(len + 1, "model config"))) {
        yc_model_cfg_free(*out);
        *out = NULL;
        return YC_ENOMEM;
    }
    if (status == YC_OK) {
        memcpy((*out)->text, text, len);
        (*out)->text[len] = '\0';
    }
    return status;
}

void yc_model_cfg_free(yc_model_cfg *cfg)
{
    if (cfg)
        free(cfg->text);
    free(cfg);
}

int yc_model_cfg_detect(const yc_model_cfg *cfg)
{
    return cfg->nlayers - 1;
}

int yc_model_cfg_to_classifier(yc_model_cfg *cfg, int nc, int cutoff)
{
    /* a segmentation model's backbone is a detection model's: it is cut the same way */
    if (cfg->task == YC_TASK_CLASSIFY)
        return yc_error_status(YC_EFORMAT, "%s is a classifier already", cfg->path);
    if (cutoff < 2 || cutoff >= cfg->nlayers)
        return yc_error_status(YC_EFORMAT, "cutoff %d is out of range 2..%d for %s (%d layers)",
                               cutoff, cfg->nlayers - 1, cfg->path, cfg->nlayers);
    if (nc < 1)
        return yc_error_status(YC_EFORMAT, "a classifier needs at least one class, not %d", nc);
    yc_layer_cfg *l = &cfg->layers[cutoff - 1];
    bool conv = l->module == YC_MOD_CONV || l->module == YC_MOD_C3 ||
                l->module == YC_MOD_BOTTLENECK || l->module == YC_MOD_SPP ||
                l->module == YC_MOD_SPPF;
    if (!conv || l->nfrom != 1)
        return yc_error_status(YC_EFORMAT, "cutoff %d: layer %d (%s) has no convolution to take "
                               "the input channels of Classify from; choose another --cutoff",
                               cutoff, cutoff - 1, l->type_name);
    /* Classify(ch, nc) with ch = the replaced module's first convolution's input channels */
    int c1 = l->c1;
    int from = l->from[0], from_raw = l->from_raw[0], line = l->line;
    memset(l, 0, sizeof *l);
    l->from[0] = from, l->from_raw[0] = from_raw, l->nfrom = 1, l->line = line;
    l->module = YC_MOD_CLASSIFY;
    l->type_name = "models.common.Classify";
    l->n = l->repeats = 1;
    l->c1 = c1, l->c2 = nc;
    l->k = l->s = l->g = 1;
    snprintf(l->args_text, sizeof l->args_text, "[%d, %d]", c1, nc);
    cfg->nlayers = cutoff;
    cfg->task = YC_TASK_CLASSIFY;
    cfg->nc = nc;
    cfg->nl = cfg->na = 0;
    cfg->anchors_placeholder = false;
    /* the yaml text describes the detection model, not this one */
    free(cfg->text);
    cfg->text = NULL;
    return YC_OK;
}

int yc_model_cfg_require_detection(const yc_model_cfg *cfg, const char *what)
{
    if (cfg->task == YC_TASK_DETECT)
        return YC_OK;
    if (cfg->task == YC_TASK_SEGMENT)
        return yc_error_status(YC_EUSAGE, "%s is a segmentation model: %s works on detection "
                               "models (segmentation models are trained by yolocl train and run "
                               "by yolocl val and yolocl detect)", cfg->name, what);
    return yc_error_status(YC_EUSAGE, "%s is a classification model: %s works on detection "
                           "models (classifiers are trained by yolocl train and run by yolocl val "
                           "and yolocl detect)", cfg->name, what);
}
