/* Weights from .pt and safetensors files, and loading them into a model (see weights.h). */
#include "weights.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "device.h"
#include "json.h"
#include "log.h"
#include "ptfile.h"
#include "safetensors.h"
#include "util.h"

#define FORMAT "yolocl-1"
/* Most class names accepted from metadata. */
#define MAX_NAMES 100000

/* ---- reading ------------------------------------------------------------------------------- */

void yc_weights_free(yc_weights *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->ntensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
        free(w->tensors[i].idata);
    }
    free(w->tensors);
    free(w->model_yaml);
    yc_yaml_free(w->model_tree);
    free(w->model_name);
    for (int i = 0; i < w->nnames; i++)
        free(w->names[i]);
    free(w->names);
    for (int i = 0; i < w->nmeta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->meta_keys);
    free(w->meta_values);
    free(w->by_name);
    free(w->path);
    free(w);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(yc_weights_tensor *const *)a)->name, (*(yc_weights_tensor *const *)b)->name);
}

/* Sorted name index; duplicate names are an error. */
static int index_tensors(yc_weights *w)
{
    if (!w->ntensors)
        return YC_OK;
    if (!(w->by_name = yc_malloc((size_t)w->ntensors * sizeof *w->by_name, "weights index")))
        return YC_ENOMEM;
    for (int i = 0; i < w->ntensors; i++)
        w->by_name[i] = &w->tensors[i];
    qsort(w->by_name, (size_t)w->ntensors, sizeof *w->by_name, cmp_tensor_name);
    for (int i = 1; i < w->ntensors; i++)
        if (strcmp(w->by_name[i - 1]->name, w->by_name[i]->name) == 0)
            return yc_error_status(YC_EFORMAT, "%s: tensor %s appears twice", w->path,
                                   w->by_name[i]->name);
    return YC_OK;
}

const yc_weights_tensor *yc_weights_find(const yc_weights *w, const char *name)
{
    int lo = 0, hi = w->ntensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, w->by_name[mid]->name);
        if (c == 0)
            return w->by_name[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Takes over the tensors and attributes of a loaded checkpoint. */
static int from_checkpoint(yc_weights *w, yc_pt_checkpoint *ck)
{
    static const char *const sources[] = {"ckpt['ema']", "ckpt['model']", "a pickled module",
                                          "a state dict"};
    snprintf(w->source, sizeof w->source, "%s%s%s%s", sources[ck->source],
             ck->model_class[0] ? " (" : "", ck->model_class, ck->model_class[0] ? ")" : "");
    if (!(w->tensors = yc_calloc((size_t)ck->ntensors, sizeof *w->tensors, "weights")))
        return YC_ENOMEM;
    for (int i = 0; i < ck->ntensors; i++) {
        yc_pt_tensor *s = &ck->tensors[i];
        yc_weights_tensor *t = &w->tensors[i];
        t->name = s->name;
        t->ndim = s->ndim;
        memcpy(t->shape, s->shape, sizeof t->shape);
        t->numel = s->numel;
        t->data = s->data;
        t->idata = s->idata;
        s->name = NULL;
        s->data = NULL;
        s->idata = NULL;
        w->ntensors++;
    }
    w->model_tree = ck->yaml;
    ck->yaml = NULL;
    w->model_name = ck->yaml_file;
    ck->yaml_file = NULL;
    w->names = ck->names;
    w->nnames = ck->nnames;
    ck->names = NULL;
    ck->nnames = 0;
    w->nc = ck->nc;
    w->nstride = ck->nstride;
    memcpy(w->stride, ck->stride, sizeof w->stride);
    if (w->model_tree && !(w->model_yaml = yc_yaml_dump(w->model_tree)))
        return YC_ENOMEM;
    return YC_OK;
}

/* Integer tensors keep their exact values next to the float copy. */
static int read_int_values(yc_st_file *f, const yc_st_tensor *t, int64_t **out)
{
    size_t es = yc_st_dtype_size(t->dtype);
    unsigned char *raw = yc_malloc(t->end - t->begin + 1, "tensor");
    int64_t *v = yc_malloc((t->numel ? t->numel : 1) * sizeof *v, "tensor");
    int status = raw && v ? yc_st_read_raw(f, t, raw) : YC_ENOMEM;
    for (size_t i = 0; !status && i < t->numel; i++) {
        uint64_t u = 0;
        for (size_t k = 0; k < es; k++)
            u |= (uint64_t)raw[i * es + k] << (8 * k);
        switch (t->dtype) {
        case YC_ST_I64:
            memcpy(&v[i], &u, sizeof v[i]);
            break;
        case YC_ST_I32:
            v[i] = (int32_t)(uint32_t)u;
            break;
        case YC_ST_I16:
            v[i] = (int16_t)(uint16_t)u;
            break;
        case YC_ST_I8:
            v[i] = (int8_t)(uint8_t)u;
            break;
        case YC_ST_BOOL:
            v[i] = u != 0;
            break;
        default:
            v[i] = (int64_t)u;
            break;
        }
    }
    free(raw);
    if (status) {
        free(v);
        return status;
    }
    *out = v;
    return YC_OK;
}

static bool is_int_dtype(yc_st_dtype dt)
{
    return dt == YC_ST_I64 || dt == YC_ST_I32 || dt == YC_ST_I16 || dt == YC_ST_I8 ||
           dt == YC_ST_U8 || dt == YC_ST_BOOL;
}

/* The yolocl metadata keys (nc, names, stride, model_yaml, model_name). */
static int read_metadata(yc_weights *w, const yc_st_file *f)
{
    int n = yc_st_meta_count(f);
    if (n && (!(w->meta_keys = yc_calloc((size_t)n, sizeof *w->meta_keys, "metadata")) ||
              !(w->meta_values = yc_calloc((size_t)n, sizeof *w->meta_values, "metadata"))))
        return YC_ENOMEM;
    for (int i = 0; i < n; i++) {
        const char *k, *v;
        yc_st_meta_get(f, i, &k, &v);
        if (!(w->meta_keys[i] = yc_strdup(k, "metadata")) ||
            !(w->meta_values[i] = yc_strdup(v, "metadata")))
            return YC_ENOMEM;
        w->nmeta = i + 1;
    }
    const char *format = yc_st_meta(f, "format");
    if (format && strncmp(format, "yolocl-", 7) == 0 && strcmp(format, FORMAT) != 0)
        return yc_error_status(YC_EUNSUPPORTED, "%s was written by a newer yolocl (format %s; "
                               "this one reads %s)", w->path, format, FORMAT);
    const char *v;
    if ((v = yc_st_meta(f, "model_yaml")) && !(w->model_yaml = yc_strdup(v, "metadata")))
        return YC_ENOMEM;
    if ((v = yc_st_meta(f, "model_name")) && !(w->model_name = yc_strdup(v, "metadata")))
        return YC_ENOMEM;
    if ((v = yc_st_meta(f, "nc"))) {
        char *end;
        errno = 0;
        long nc = strtol(v, &end, 10);
        if (errno || end == v || *end || nc < 1 || nc > MAX_NAMES)
            return yc_error_status(YC_EFORMAT, "%s: metadata nc '%.40s' is not a class count",
                                   w->path, v);
        w->nc = (int)nc;
    }
    yc_json *j = NULL;
    int status = YC_OK;
    if ((v = yc_st_meta(f, "names"))) {
        if ((status = yc_json_parse(&j, v, strlen(v))))
            return yc_error_context(status, "%s: metadata names", w->path);
        size_t nn = yc_json_len(j);
        if (yc_json_typeof(j) != YC_JSON_ARRAY || nn > MAX_NAMES)
            status = yc_error_status(YC_EFORMAT, "%s: metadata names is not an array of class "
                                     "names", w->path);
        if (!status && nn && !(w->names = yc_calloc(nn, sizeof *w->names, "class names")))
            status = YC_ENOMEM;
        for (size_t i = 0; !status && i < nn; i++) {
            const yc_json *s = yc_json_at(j, i);
            if (yc_json_typeof(s) != YC_JSON_STRING ||
                strlen(yc_json_string(s)) != yc_json_string_len(s))
                status = yc_error_status(YC_EFORMAT, "%s: metadata names[%zu] is not a string",
                                         w->path, i);
            else if (!(w->names[i] = yc_strdup(yc_json_string(s), "class name")))
                status = YC_ENOMEM;
            else
                w->nnames = (int)i + 1;
        }
        yc_json_free(j);
        j = NULL;
        if (status)
            return status;
    }
    if ((v = yc_st_meta(f, "stride"))) {
        if ((status = yc_json_parse(&j, v, strlen(v))))
            return yc_error_context(status, "%s: metadata stride", w->path);
        size_t ns = yc_json_len(j);
        if (yc_json_typeof(j) != YC_JSON_ARRAY || ns > YC_WEIGHTS_MAX_STRIDES)
            status = yc_error_status(YC_EFORMAT, "%s: metadata stride is not a short array",
                                     w->path);
        for (size_t i = 0; !status && i < ns; i++) {
            if (yc_json_typeof(yc_json_at(j, i)) != YC_JSON_NUMBER)
                status = yc_error_status(YC_EFORMAT, "%s: metadata stride[%zu] is not a number",
                                         w->path, i);
            w->stride[i] = (float)yc_json_number(yc_json_at(j, i));
        }
        if (!status)
            w->nstride = (int)ns;
        yc_json_free(j);
    }
    return status;
}

static int read_safetensors(yc_weights *w)
{
    yc_st_file *f = NULL;
    int status = yc_st_open(&f, w->path);
    if (status)
        return status;
    int n = yc_st_count(f);
    snprintf(w->source, sizeof w->source, "safetensors");
    if (n && !(w->tensors = yc_calloc((size_t)n, sizeof *w->tensors, "weights")))
        status = YC_ENOMEM;
    for (int i = 0; i < n && !status; i++) {
        const yc_st_tensor *s = yc_st_get(f, i);
        if (strncmp(s->name, "resume.", 7) == 0)
            continue;
        yc_weights_tensor *t = &w->tensors[w->ntensors++];
        t->ndim = s->ndim;
        for (int d = 0; d < s->ndim; d++)
            t->shape[d] = s->shape[d];
        t->numel = s->numel;
        if (!(t->name = yc_strdup(s->name, "tensor name")) ||
            !(t->data = yc_malloc((s->numel ? s->numel : 1) * sizeof *t->data, "tensor")))
            status = YC_ENOMEM;
        if (!status)
            status = yc_st_read_f32(f, s, t->data, s->numel);
        if (!status && is_int_dtype(s->dtype))
            status = read_int_values(f, s, &t->idata);
    }
    if (!status)
        status = read_metadata(w, f);
    if (!status && !yc_st_meta(f, "format"))
        snprintf(w->source, sizeof w->source, "safetensors state dict");
    else if (!status)
        snprintf(w->source, sizeof w->source, "safetensors (%.200s)", yc_st_meta(f, "format"));
    yc_st_close(f);
    return status;
}

/* A torch file starts a zip archive ("PK\3\4") or, in the legacy format, a pickle (0x80). */
static int is_torch_file(const char *path, bool *torch)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
    unsigned char m[4] = {0};
    size_t n = fread(m, 1, sizeof m, f);
    fclose(f);
    *torch = (n == 4 && memcmp(m, "PK\3\4", 4) == 0) || (n >= 2 && m[0] == 0x80 && m[1] <= 5);
    return YC_OK;
}

int yc_weights_read(const char *path, yc_weights **out)
{
    *out = NULL;
    yc_weights *w = yc_calloc(1, sizeof *w, "weights");
    if (!w)
        return YC_ENOMEM;
    w->nc = -1;
    bool torch = false;
    int status = (w->path = yc_strdup(path, "weights path")) ? is_torch_file(path, &torch)
                                                              : YC_ENOMEM;
    if (!status && torch) {
        yc_pt_checkpoint *ck = NULL;
        w->from_pt = true;
        if (!(status = yc_pt_load(&ck, path)))
            status = from_checkpoint(w, ck);
        yc_pt_free(ck);
    } else if (!status) {
        status = read_safetensors(w);
    }
    if (!status)
        status = index_tensors(w);
    if (status) {
        yc_weights_free(w);
        return status;
    }
    *out = w;
    return YC_OK;
}

/* ---- the model config ---------------------------------------------------------------------- */

int yc_weights_infer_nc(const yc_weights *w, int *nc)
{
    for (int i = w->ntensors - 1; i >= 0; i--) {
        const yc_weights_tensor *a = &w->tensors[i];
        size_t len = strlen(a->name);
        if (len < 7 || strcmp(a->name + len - 7, "anchors") != 0 || a->ndim != 3 ||
            a->shape[2] != 2 || a->shape[1] < 1)
            continue;
        char bias[YC_NAME_MAX + 16];
        snprintf(bias, sizeof bias, "%.*sm.0.bias", (int)(len - 7), a->name);
        const yc_weights_tensor *b = yc_weights_find(w, bias);
        int64_t na = a->shape[1];
        if (!b || b->ndim != 1 || b->shape[0] % na != 0 || b->shape[0] / na <= 5)
            continue;
        /* a Segment head's outputs also hold its Proto's nm mask coefficients */
        snprintf(bias, sizeof bias, "%.*sproto.cv3.conv.weight", (int)(len - 7), a->name);
        const yc_weights_tensor *pr = yc_weights_find(w, bias);
        int64_t nm = pr && pr->ndim == 4 ? pr->shape[0] : 0;
        if (b->shape[0] / na - 5 - nm < 1)
            continue;
        *nc = (int)(b->shape[0] / na - 5 - nm);
        return YC_OK;
    }
    return yc_error_status(YC_EFORMAT, "%s: no YOLOv5 Detect or Segment head (anchors and "
                           "m.0.bias) to take the class count from", w->path);
}

/* The Linear of a classifier's state dict: "model.K.linear.weight" of shape (nc, 1280), the
 * last such; -1 when there is none. */
static int classifier_linear(const yc_weights *w, const yc_weights_tensor **linear)
{
    int layer = -1;
    for (int i = 0; i < w->ntensors; i++) {
        const yc_weights_tensor *t = &w->tensors[i];
        int k, n = 0;
        if (sscanf(t->name, "model.%d.linear.weight%n", &k, &n) == 1 && n > 0 &&
            t->name[n] == '\0' && t->ndim == 2 && t->shape[1] == YC_CLASSIFY_HIDDEN &&
            t->shape[0] >= 1 && k > layer) {
            layer = k;
            *linear = t;
        }
    }
    return layer;
}

/* yolov5n.yaml's text with depth_multiple and width_multiple replaced (heap, *len bytes). */
static int backbone_text(double gd, double gw, char **text, size_t *len)
{
    char path[1024];
    char *src = NULL;
    size_t n = 0;
    int st = yc_model_cfg_find("yolov5n", path, sizeof path);
    if (!st)
        st = yc_read_file(path, &src, &n);
    if (st)
        return yc_error_context(st, "the backbone of a classifier without a config");
    size_t cap = n + 128, out = 0;
    char *t = yc_malloc(cap, "model config");
    if (!t) {
        free(src);
        return YC_ENOMEM;
    }
    for (const char *line = src; line < src + n;) {
        const char *end = memchr(line, '\n', (size_t)(src + n - line));
        size_t ll = end ? (size_t)(end - line) + 1 : (size_t)(src + n - line);
        if (strncmp(line, "depth_multiple:", 15) == 0)
            out += (size_t)snprintf(t + out, cap - out, "depth_multiple: %.17g\n", gd);
        else if (strncmp(line, "width_multiple:", 15) == 0)
            out += (size_t)snprintf(t + out, cap - out, "width_multiple: %.17g\n", gw);
        else if (out + ll < cap) {
            memcpy(t + out, line, ll);
            out += ll;
        }
        line += ll;
    }
    free(src);
    t[out < cap ? out : cap - 1] = '\0';
    *text = t;
    *len = out;
    return YC_OK;
}

/* A classifier's config from the shapes of its state dict, for classify/train.py's .pt files
 * (ClassificationModel pickled without a yaml) and yolocl's own classifiers cut from a detection
 * config.  Classify's Linear "model.K.linear.weight" (nc, 1280) gives the classes and the cutoff
 * K + 1; the first Conv (model.0.conv.weight, (c0, 3, 6, 6)) the width c0 / 64; the Bottlenecks
 * of the first C3 (model.2.m.N) the depth N / 3 of YOLOv5's P5 backbone (yolov5n.yaml's rows).
 * Cut at 10 with the multiples of yolov5n, s, m, l or x it is that bundled -cls config.  *found
 * is false (and nothing is set) when the state dict has no such Linear. */
static int classifier_cfg(const yc_weights *w, int nc_override, yc_model_cfg **cfg, bool *found)
{
    static const struct {
        int c0, bottlenecks;
        const char *name;
    } sizes[] = {{16, 1, "yolov5n-cls"}, {32, 1, "yolov5s-cls"}, {48, 2, "yolov5m-cls"},
                 {64, 3, "yolov5l-cls"}, {80, 4, "yolov5x-cls"}};
    const yc_weights_tensor *linear = NULL;
    int k = classifier_linear(w, &linear);
    *found = k >= 0;
    if (k < 0)
        return YC_OK;
    const yc_weights_tensor *first = yc_weights_find(w, "model.0.conv.weight");
    if (k < 2 || !first || first->ndim != 4 || first->shape[1] != 3 || first->shape[0] < 8 ||
        first->shape[0] % 8 != 0)
        return yc_error_status(YC_EFORMAT, "%s: a classifier (%s of %lld classes) whose first "
                               "layer is not YOLOv5's Conv (model.0.conv.weight of shape (8k, 3, "
                               "6, 6)): give --cfg", w->path, linear->name,
                               (long long)linear->shape[0]);
    int c0 = (int)first->shape[0], nb = 0;
    char name[YC_NAME_MAX];
    for (;; nb++) {
        snprintf(name, sizeof name, "model.2.m.%d.cv1.conv.weight", nb);
        if (!yc_weights_find(w, name))
            break;
    }
    if (k > 2 && nb == 0)
        return yc_error_status(YC_EFORMAT, "%s: a classifier cut at %d whose layer 2 is not "
                               "YOLOv5's C3 (no model.2.m.0): give --cfg", w->path, k + 1);
    nb = nb ? nb : 1;
    int nc = nc_override > 0 ? nc_override : (int)linear->shape[0];
    int st;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (k != 9 || c0 != sizes[i].c0 || nb != sizes[i].bottlenecks)
            continue;
        char path[1024];
        if ((st = yc_model_cfg_find(sizes[i].name, path, sizeof path)) ||
            (st = yc_model_cfg_load(cfg, path, nc)))
            return yc_error_context(st, "%s: the config of its classifier", w->path);
        return YC_OK;
    }
    char *text = NULL;
    size_t len = 0;
    if ((st = backbone_text(nb / 3.0, c0 / 64.0, &text, &len)))
        return st;
    snprintf(name, sizeof name, "YOLOv5 classifier (width %g, depth %g, cutoff %d)", c0 / 64.0,
             nb / 3.0, k + 1);
    st = yc_model_cfg_parse(cfg, text, len, name, 0);
    free(text);
    if (!st && (st = yc_model_cfg_to_classifier(*cfg, nc, k + 1))) {
        yc_model_cfg_free(*cfg);
        *cfg = NULL;
    }
    if (st)
        return yc_error_context(st, "%s: the classifier its shapes describe", w->path);
    snprintf((*cfg)->name, sizeof (*cfg)->name, "%s", name);
    return YC_OK;
}

int yc_weights_model_cfg(const yc_weights *w, int nc_override, yc_model_cfg **cfg)
{
    *cfg = NULL;
    const char *name = w->model_name ? w->model_name : w->path;
    int status;
    if (w->model_tree)
        status = yc_model_cfg_from_yaml(cfg, w->model_tree, name, nc_override);
    else if (w->model_yaml)
        status = yc_model_cfg_parse(cfg, w->model_yaml, strlen(w->model_yaml), name, nc_override);
    else {
        bool found = false;
        status = classifier_cfg(w, nc_override, cfg, &found);
        if (found || status)
            return status;
        return yc_error_status(YC_EUSAGE, "%s has no embedded model config: give --cfg",
                               w->path);
    }
    if (status)
        return yc_error_context(status, "%s: embedded model config", w->path);
    if (!(*cfg)->text && w->model_yaml && !((*cfg)->text = yc_strdup(w->model_yaml, "config"))) {
        yc_model_cfg_free(*cfg);
        *cfg = NULL;
        return YC_ENOMEM;
    }
    return YC_OK;
}

/* ---- loading into a model ------------------------------------------------------------------ */

/* One entry of the model's state dict: name, expected shape, and where it goes. */
typedef struct target {
    const char *name;
    int ndim;
    int64_t shape[4];
    /* a parameter, a running statistic (yc_state), a counter, or the anchors */
    const yc_param *param;
    const yc_state *state;
    bool anchors;
    /* the file's tensor (after matching), or NULL */
    const yc_weights_tensor *src;
} target;

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", d ? ", " : "",
                                 (long long)shape[d]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

static bool same_shape(const target *t, const yc_weights_tensor *s)
{
    if (t->state && t->state->kind == YC_STATE_NUM_BATCHES)
        return s->numel == 1 && (s->ndim == 0 || s->ndim == 1);
    if (s->ndim != t->ndim)
        return false;
    for (int d = 0; d < t->ndim; d++)
        if (s->shape[d] != t->shape[d])
            return false;
    return true;
}

/* The model's state dict in YOLOv5's order (anchors before the Detect layer's parameters; a
 * classifier has none). */
static target *model_targets(const yc_model *m, int *count)
{
    target *t = yc_calloc((size_t)m->ndict + 1, sizeof *t, "weights targets");
    if (!t)
        return NULL;
    int n = 0;
    bool anchors_done = false;
    for (int i = 0; i < m->ndict; i++) {
        const yc_param *p = m->dict[i].is_state ? NULL : &m->params[m->dict[i].idx];
        if (p && p->layer == m->detect_layer && !anchors_done) {
            t[n].name = m->anchors_name;
            t[n].ndim = 3;
            t[n].shape[0] = m->nl;
            t[n].shape[1] = m->na;
            t[n].shape[2] = 2;
            t[n++].anchors = true;
            anchors_done = true;
        }
        if (p) {
            t[n].name = p->name;
            t[n].ndim = p->ndim;
            for (int d = 0; d < p->ndim; d++)
                t[n].shape[d] = p->shape[d];
            t[n++].param = p;
        } else {
            const yc_state *s = &m->state[m->dict[i].idx];
            t[n].name = s->name;
            t[n].ndim = s->kind == YC_STATE_NUM_BATCHES ? 0 : 1;
            t[n].shape[0] = s->numel;
            t[n++].state = s;
        }
    }
    if (!anchors_done && m->nl > 0) {
        t[n].name = m->anchors_name;
        t[n].ndim = 3;
        t[n].shape[0] = m->nl;
        t[n].shape[1] = m->na;
        t[n].shape[2] = 2;
        t[n++].anchors = true;
    }
    *count = n;
    return t;
}

int yc_weights_apply(const yc_weights *w, yc_model *m, yc_weights_mode mode, bool exclude_anchors,
                     yc_weights_report *report)
{
    yc_weights_report rep = {0};
    if (!m->be)
        return yc_error("weights: the model has no storage yet (allocate it first)");
    int n;
    target *t = model_targets(m, &n);
    if (!t)
        return YC_ENOMEM;
    int status = YC_OK;
    bool *used = yc_calloc((size_t)w->ntensors + 1, sizeof *used, "weights");
    if (!used)
        status = YC_ENOMEM;
    rep.total = n;
    for (int i = 0; i < n && !status; i++) {
        const yc_weights_tensor *s = yc_weights_find(w, t[i].name);
        bool counter = t[i].state && t[i].state->kind == YC_STATE_NUM_BATCHES;
        if (s)
            used[s - w->tensors] = true;
        if (exclude_anchors && strstr(t[i].name, "anchor")) {
            rep.excluded++;
            continue;
        }
        char want[96], got[96];
        if (!s) {
            rep.missing++;
            if (!rep.first_skipped[0])
                snprintf(rep.first_skipped, sizeof rep.first_skipped, "%s", t[i].name);
            if (mode == YC_WEIGHTS_STRICT && !counter)
                status = yc_error_status(YC_EFORMAT, "%s has no tensor %s (is it a weights file "
                                         "for this model and class count?)", w->path, t[i].name);
            continue;
        }
        if (!same_shape(&t[i], s)) {
            rep.mismatched++;
            if (!rep.first_skipped[0])
                snprintf(rep.first_skipped, sizeof rep.first_skipped, "%s", t[i].name);
            if (mode == YC_WEIGHTS_STRICT) {
                shape_text(t[i].ndim, t[i].shape, want, sizeof want);
                shape_text(s->ndim, s->shape, got, sizeof got);
                status = yc_error_status(YC_EFORMAT, "%s: tensor %s has shape %s, the model "
                                         "expects %s (another model size or class count?)",
                                         w->path, t[i].name, got, want);
            }
            continue;
        }
        t[i].src = s;
        rep.transferred++;
    }
    for (int i = 0; i < w->ntensors && !status; i++)
        if (!used[i] && strncmp(w->tensors[i].name, "resume.", 7) != 0)
            rep.unexpected++;
    for (int i = 0; i < n && !status; i++) {
        const yc_weights_tensor *s = t[i].src;
        if (!s)
            continue;
        if (t[i].param)
            status = yc_tensor_set_f32(m->be, &t[i].param->t, s->data);
        else if (t[i].anchors)
            memcpy(m->anchors, s->data, s->numel * sizeof *s->data);
        else if (t[i].state->kind == YC_STATE_NUM_BATCHES)
            m->num_batches[t[i].state->offset] = s->idata ? s->idata[0] : (int64_t)s->data[0];
        else
            status = yc_tensor_set_f32(m->be, &t[i].state->t, s->data);
        if (status)
            yc_error_context(status, "loading %s from %s", t[i].name, w->path);
    }
    free(used);
    free(t);
    if (report)
        *report = rep;
    return status;
}

/* ---- from a model -------------------------------------------------------------------------- */

int yc_weights_from_model(const yc_model *m, const char *const *names, int nnames,
                          yc_weights **out)
{
    *out = NULL;
    if (!m->be)
        return yc_error("weights: the model has no storage yet (allocate it first)");
    int n;
    target *t = model_targets(m, &n);
    yc_weights *w = yc_calloc(1, sizeof *w, "weights");
    int status = t && w ? YC_OK : YC_ENOMEM;
    if (!status && !(w->tensors = yc_calloc((size_t)n, sizeof *w->tensors, "weights")))
        status = YC_ENOMEM;
    for (int i = 0; i < n && !status; i++) {
        yc_weights_tensor *d = &w->tensors[w->ntensors++];
        bool counter = t[i].state && t[i].state->kind == YC_STATE_NUM_BATCHES;
        d->ndim = t[i].ndim;
        d->numel = 1;
        for (int k = 0; k < t[i].ndim; k++) {
            d->shape[k] = t[i].shape[k];
            d->numel *= (size_t)t[i].shape[k];
        }
        if (!(d->name = yc_strdup(t[i].name, "tensor name")) ||
            !(d->data = yc_malloc(d->numel * sizeof *d->data, "tensor")) ||
            (counter && !(d->idata = yc_malloc(sizeof *d->idata, "tensor")))) {
            status = YC_ENOMEM;
            break;
        }
        if (t[i].param)
            status = yc_tensor_get_f32(m->be, &t[i].param->t, d->data);
        else if (t[i].anchors)
            memcpy(d->data, m->anchors, d->numel * sizeof *d->data);
        else if (counter) {
            d->idata[0] = m->num_batches[t[i].state->offset];
            d->data[0] = (float)d->idata[0];
        } else
            status = yc_tensor_get_f32(m->be, &t[i].state->t, d->data);
    }
    free(t);
    if (!status && !(w->path = yc_strdup(m->cfg->path[0] ? m->cfg->path : "model", "weights")))
        status = YC_ENOMEM;
    if (!status && m->cfg->text && !(w->model_yaml = yc_strdup(m->cfg->text, "weights")))
        status = YC_ENOMEM;
    if (!status && m->cfg->path[0] &&
        !(w->model_name = yc_strdup(yc_path_basename(m->cfg->path), "weights")))
        status = YC_ENOMEM;
    if (!status && nnames > 0 && !(w->names = yc_calloc((size_t)nnames, sizeof *w->names,
                                                          "class names")))
        status = YC_ENOMEM;
    for (int i = 0; i < nnames && !status; i++) {
        if (!(w->names[i] = yc_strdup(names[i], "class name")))
            status = YC_ENOMEM;
        else
            w->nnames = i + 1;
    }
    if (w) {
        w->nc = m->nc;
        w->nstride = m->nl < YC_WEIGHTS_MAX_STRIDES ? m->nl : YC_WEIGHTS_MAX_STRIDES;
        memcpy(w->stride, m->stride, (size_t)w->nstride * sizeof *w->stride);
        snprintf(w->source, sizeof w->source, "model %s", m->cfg->name);
    }
    if (!status)
        status = index_tensors(w);
    if (status) {
        yc_weights_free(w);
        return status;
    }
    *out = w;
    return YC_OK;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* IEEE binary16 from binary32, round to nearest even (overflow to infinity, NaN kept). */
static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xFF, man = x & 0x7FFFFF;
    if (exp == 0xFF)
        return (uint16_t)(sign | 0x7C00 | (man ? 0x200 | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7C00);
    if (e <= 0) {
        if (e < -10)
            return sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

/* A JSON number for a stride, as Python's json writes a float ("8.0"). */
static void json_float(float v, char *buf, size_t len)
{
    snprintf(buf, len, "%.9g", (double)v);
    if (!strpbrk(buf, ".eEn"))
        snprintf(buf + strlen(buf), len - strlen(buf), ".0");
}

static char *names_json(const yc_weights *w)
{
    size_t cap = 3, used = 0;
    for (int i = 0; i < w->nnames; i++)
        cap += yc_json_escape(NULL, 0, w->names[i], strlen(w->names[i])) + 2;
    char *s = yc_malloc(cap, "names");
    if (!s)
        return NULL;
    s[used++] = '[';
    for (int i = 0; i < w->nnames; i++) {
        if (i) {
            s[used++] = ',';
            s[used++] = ' ';
        }
        used += yc_json_escape(s + used, cap - used, w->names[i], strlen(w->names[i]));
    }
    s[used++] = ']';
    s[used] = '\0';
    return s;
}

static bool standard_key(const char *k)
{
    static const char *const keys[] = {"format", "model_yaml", "model_name", "nc", "names",
                                       "stride"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (strcmp(k, keys[i]) == 0)
            return true;
    return false;
}

int yc_weights_write_safetensors(const yc_weights *w, const char *path, bool half)
{
    yc_st_writer *wr = yc_st_writer_new();
    uint16_t *h = NULL;
    char *names = NULL;
    int status = wr ? YC_OK : YC_ENOMEM;
    size_t total = 0;
    for (int i = 0; i < w->ntensors; i++)
        if (!w->tensors[i].idata)
            total += w->tensors[i].numel;
    if (!status && half && total && !(h = yc_malloc(total * sizeof *h, "half weights")))
        status = YC_ENOMEM;
    size_t at = 0;
    for (int i = 0; i < w->ntensors && !status; i++) {
        const yc_weights_tensor *t = &w->tensors[i];
        const void *data = t->data;
        yc_st_dtype dt = YC_ST_F32;
        if (t->idata) {
            data = t->idata;
            dt = YC_ST_I64;
        } else if (half) {
            for (size_t k = 0; k < t->numel; k++)
                h[at + k] = float_to_half(t->data[k]);
            data = h + at;
            at += t->numel;
            dt = YC_ST_F16;
        }
        status = yc_st_writer_add(wr, t->name, dt, t->ndim, t->shape, data);
    }
    char num[32], stride[YC_WEIGHTS_MAX_STRIDES * 24 + 4];
    if (!status)
        status = yc_st_writer_meta(wr, "format", FORMAT);
    if (!status && w->model_yaml)
        status = yc_st_writer_meta(wr, "model_yaml", w->model_yaml);
    if (!status && w->model_name)
        status = yc_st_writer_meta(wr, "model_name", w->model_name);
    if (!status && w->nc > 0) {
        snprintf(num, sizeof num, "%d", w->nc);
        status = yc_st_writer_meta(wr, "nc", num);
    }
    if (!status && w->nnames > 0)
        status = (names = names_json(w)) ? yc_st_writer_meta(wr, "names", names) : YC_ENOMEM;
    if (!status && w->nstride > 0) {
        size_t used = (size_t)snprintf(stride, sizeof stride, "[");
        for (int i = 0; i < w->nstride; i++) {
            json_float(w->stride[i], num, sizeof num);
            used += (size_t)snprintf(stride + used, sizeof stride - used, "%s%s", i ? ", " : "",
                                     num);
        }
        snprintf(stride + used, sizeof stride - used, "]");
        status = yc_st_writer_meta(wr, "stride", stride);
    }
    for (int i = 0; i < w->nmeta && !status; i++)
        if (!standard_key(w->meta_keys[i]))
            status = yc_st_writer_meta(wr, w->meta_keys[i], w->meta_values[i]);
    if (!status)
        status = yc_st_writer_write(wr, path);
    yc_st_writer_free(wr);
    free(h);
    free(names);
    return status ? yc_error_context(status, "writing %s", path) : YC_OK;
}

/* ---- yaml text ----------------------------------------------------------------------------- */

/* A growing text; `failed` once an allocation failed (the text is then incomplete). */

/* ---- a model from --cfg, --weights and --nc, on a device -------------------------------------- */

int yc_model_cfg_open(const char *cfg, const yc_weights *w, int nc, yc_model_cfg **out,
                      char *path, size_t len)
{
    char buf[1024];
    if (!path) {
        path = buf;
        len = sizeof buf;
    }
    path[0] = '\0';
    *out = NULL;
    if (cfg && cfg[0]) {
        int st = yc_model_cfg_find(cfg, path, len);
        return st ? st : yc_model_cfg_load(out, path, nc > 0 ? nc : 0);
    }
    if (w)
        return yc_weights_model_cfg(w, nc > 0 ? nc : 0, out);
    return yc_error_status(YC_EUSAGE, "give --cfg (a model config) or --weights (a model to "
                           "start from)");
}

int yc_model_open(const yc_model_spec *spec, yc_opened_model *out)
{
    memset(out, 0, sizeof *out);
    bool have_weights = spec->weights && spec->weights[0];
    if (spec->use == YC_MODEL_INFER && !have_weights)
        return yc_error_status(YC_EUSAGE, "no weights given");
    int st = YC_OK;
    int nc = spec->nc;
    if (have_weights) {
        if ((st = yc_weights_read(spec->weights, &out->w)))
            return st;
        /* the class count of the weights: their metadata, else their Detect head */
        if (nc <= 0)
            nc = out->w->nc;
        if (nc < 1 && yc_weights_infer_nc(out->w, &nc) != YC_OK) {
            yc_error_clear();
            nc = 0;
        }
    }
    yc_model_cfg *cfg = NULL;
    if (!(st = yc_model_cfg_open(spec->cfg, out->w, nc, &cfg, out->cfg_path,
                                 sizeof out->cfg_path)))
        st = yc_model_new(&out->m, cfg); /* takes cfg, also on an error */
    if (!st && spec->detection_only)
        st = yc_model_require_detection(out->m, spec->detection_only);
    if (!st && spec->backend) {
        out->be = spec->backend;
    } else if (!st && spec->device) {
        st = yc_device_open(spec->device, spec->threads, spec->announce, &out->be);
        out->own_be = true;
    }
    if (!st && spec->use == YC_MODEL_TRAIN)
        st = yc_model_alloc(out->m, out->be);
    if (!st && spec->use == YC_MODEL_INFER) {
        if (!(st = yc_model_alloc_weights(out->m, out->be)))
            st = yc_weights_apply(out->w, out->m, YC_WEIGHTS_STRICT, false, NULL);
    }
    if (st)
        yc_opened_model_free(out);
    return st;
}

void yc_opened_model_free(yc_opened_model *om)
{
    if (om->m && om->m->be && om->m->be != om->be)
        om->m->be = NULL;
    yc_model_free(om->m);
    if (om->own_be)
        yc_backend_free(om->be);
    yc_weights_free(om->w);
    memset(om, 0, sizeof *om);
}
