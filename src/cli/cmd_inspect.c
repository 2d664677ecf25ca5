/* yolocl inspect: one training step (train-mode forward, loss, backward) on a given batch with
 * given weights, written to a safetensors file for comparison with PyTorch YOLOv5.  The model's
 * task picks the step and what is read and written:
 *   detection      batch images, targets           -> head0.., loss [total, box, obj, cls]
 *   segmentation   batch images, targets, masks    -> head0.., proto,
 *                                                     loss [total, box, seg, obj, cls]
 *   classification batch images, labels            -> logits, loss [1]
 * and grad.<name> for every parameter. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_step.h"
#include "classify_train.h"
#include "cli.h"
#include "commands.h"
#include "device.h"
#include "hyp.h"
#include "log.h"
#include "model.h"
#include "options.h"
#include "safetensors.h"
#include "segment_step.h"
#include "step.h"
#include "util.h"
#include "weights.h"

/* The command line. */
typedef struct inspect_cli {
    const char *cfg, *weights, *batch, *out, *hyp, *device;
    int nc, seed;
    float smoothing;
} inspect_cli;

#define T inspect_cli
static const yc_option rows[] = {
    YC_OPT_STRING('c', "cfg", "MODEL", T, cfg, "model config (bundled name or yaml path)"),
    YC_OPT_INT(0, "nc", "N", T, nc, 1, 100000, "number of classes (default: the yaml's nc)"),
    YC_OPT_STRING('w', "weights", "FILE", T, weights,
                  "weights with YOLOv5 state-dict names (safetensors);\n"
                  "without it the model starts from YOLOv5's random init"),
    YC_OPT_INT(0, "seed", "N", T, seed, 0, 2147483647, "seed of that random init (default 0)"),
    YC_OPT_STRING('b', "batch", "FILE", T, batch,
                  "safetensors with `images` (B,3,H,W float32, RGB: in [0,1],\n"
                  "a classifier's normalised; also accepted as `input`) and\n"
                  "`targets` (N,6: image index, class, x, y, w, h normalised);\n"
                  "segmentation adds `masks` (B,h,w overlap format), and a\n"
                  "classifier takes `labels` (B) instead of targets"),
    YC_OPT_STRING('o', "out", "FILE", T, out,
                  "where to write head0.. (and proto) or logits, loss and\n"
                  "grad.<name>"),
    YC_OPT_STRING(0, "hyp", "HYP", T, hyp, "hyperparameters (default hyp.scratch-low)"),
    YC_OPT_FLOAT(0, "label-smoothing", "E", T, smoothing, 0, 1,
                 "class label smoothing epsilon (default 0; a classifier's 0.1,\n"
                 "classify/train.py's)"),
    YC_OPTS_DEVICE(T, device),
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "inspect",
    .head = "Usage: yolocl inspect --cfg MODEL --batch IO.safetensors --out OUT.safetensors\n"
            "                      [--weights W.safetensors | --seed N] [--nc N] [--hyp HYP]\n"
            "                      [--device D]\n"
            "Run one training step (train-mode forward, YOLOv5 loss, backward) of a detection,\n"
            "segmentation or classification model and write its outputs, the loss and every\n"
            "parameter gradient to OUT.safetensors.\n"
            "\n",
    .rows = rows,
    .help_col = 27,
};

/* The batch of one step: images (n x ch x h x w), and the targets (nt rows of 6) of a detection
 * or segmentation model, the masks (mask_n x mh x mw) of a segmentation model, or the class
 * labels (n) of a classifier. */
typedef struct batch_data {
    float *images, *targets, *masks;
    int *labels;
    int n, ch, h, w, nt, mask_n, mh, mw;
} batch_data;

static void batch_free(batch_data *b)
{
    free(b->images);
    free(b->targets);
    free(b->masks);
    free(b->labels);
}

/* Tensor `name` of f as floats into *dst (heap; one float at least), or YC_EFORMAT naming what the
 * batch lacks. */
static int read_f32(yc_st_file *f, const char *path, const yc_st_tensor *t, const char *what,
                    float **dst)
{
    if (!t)
        return yc_error_status(YC_EFORMAT, "%s: no %s", path, what);
    *dst = yc_malloc((t->numel ? t->numel : 1) * sizeof(float), what);
    return *dst ? yc_st_read_f32(f, t, *dst, t->numel) : YC_ENOMEM;
}

static int read_batch(const char *path, yc_task task, batch_data *b)
{
    memset(b, 0, sizeof *b);
    yc_st_file *f = NULL;
    int st = yc_st_open(&f, path);
    if (st)
        return st;
    const yc_st_tensor *im = yc_st_find(f, "images");
    if (!im)
        im = yc_st_find(f, "input");
    if (!im || im->ndim != 4 || im->shape[0] < 1 || im->shape[1] < 1 || im->shape[2] < 1 ||
        im->shape[3] < 1) {
        yc_st_close(f);
        return yc_error_status(YC_EFORMAT, "%s: no 'images' tensor of shape (B, 3, H, W)", path);
    }
    b->n = (int)im->shape[0];
    b->ch = (int)im->shape[1];
    b->h = (int)im->shape[2];
    b->w = (int)im->shape[3];
    st = read_f32(f, path, im, "input images", &b->images);
    if (!st && task == YC_TASK_CLASSIFY) {
        const yc_st_tensor *lb = yc_st_find(f, "labels");
        if (!lb || lb->ndim != 1 || lb->shape[0] != b->n)
            st = yc_error_status(YC_EFORMAT, "%s: no 'labels' tensor of shape (%d): a "
                                 "classifier's batch has one class index per image", path, b->n);
        float *lf = NULL;
        if (!st)
            st = read_f32(f, path, lb, "labels", &lf);
        if (!st && !(b->labels = yc_malloc((size_t)b->n * sizeof(int), "labels")))
            st = YC_ENOMEM;
        for (int i = 0; i < b->n && !st; i++)
            b->labels[i] = (int)lf[i];
        free(lf);
    } else if (!st) {
        const yc_st_tensor *tg = yc_st_find(f, "targets");
        if (!tg || tg->ndim != 2 || tg->shape[1] != 6)
            st = yc_error_status(YC_EFORMAT, "%s: no 'targets' tensor of shape (N, 6)", path);
        else
            b->nt = (int)tg->shape[0];
        if (!st)
            st = read_f32(f, path, tg, "targets", &b->targets);
        if (!st && task == YC_TASK_SEGMENT) {
            const yc_st_tensor *mk = yc_st_find(f, "masks");
            if (!mk || mk->ndim != 3 || mk->shape[0] != b->n || mk->shape[1] < 1 ||
                mk->shape[2] < 1)
                st = yc_error_status(YC_EFORMAT, "%s: no 'masks' tensor of shape (%d, h, w): a "
                                     "segmentation batch has one overlap mask per image", path,
                                     b->n);
            else {
                b->mask_n = (int)mk->shape[0];
                b->mh = (int)mk->shape[1];
                b->mw = (int)mk->shape[2];
                st = read_f32(f, path, mk, "masks", &b->masks);
            }
        }
    }
    yc_st_close(f);
    return st;
}

/* (B, na*no, ny, nx) -> (B, na, ny, nx, no), the layout of YOLOv5's train-mode outputs. */
static void permute_head(const float *src, float *dst, int b, int na, int no, int ny, int nx)
{
    size_t plane = (size_t)ny * nx;
    for (int i = 0; i < b; i++)
        for (int a = 0; a < na; a++)
            for (size_t yx = 0; yx < plane; yx++)
                for (int k = 0; k < no; k++)
                    dst[(((size_t)i * na + a) * plane + yx) * no + k] =
                        src[((size_t)i * na * no + (size_t)a * no + k) * plane + yx];
}

/* What one step writes: tensors added by name to a safetensors writer, their data kept until it
 * is written (the writer holds pointers). */
typedef struct out_file {
    yc_st_writer *w;
    void *keep[YC_MAX_LEVELS + 2];
    int nkeep;
    char names[YC_MAX_LEVELS + 2][16];
} out_file;

/* Adds `data` (heap, owned by o from now on, freed with it) as F32 tensor `name`. */
static int out_add(out_file *o, const char *name, int ndim, const int64_t *shape, float *data)
{
    if (!data)
        return YC_ENOMEM;
    o->keep[o->nkeep] = data;
    snprintf(o->names[o->nkeep], sizeof o->names[0], "%s", name);
    return yc_st_writer_add(o->w, o->names[o->nkeep++], YC_ST_F32, ndim, shape, data);
}

/* The train-mode head outputs of a detection or segmentation step (per level (B, na*no, ny, nx))
 * as head0.. in YOLOv5's layout. */
static int out_heads(out_file *o, const yc_model *m, yc_graph *g, float *const *head)
{
    int st = YC_OK;
    for (int l = 0; l < m->nl && !st; l++) {
        const yc_tensor *t = yc_graph_head(g, l);
        float *p = yc_malloc(yc_tensor_elems(t) * sizeof(float), "head output");
        if (p)
            permute_head(head[l], p, t->n, m->na, m->no, t->h, t->w);
        int64_t shape[5] = {t->n, m->na, t->h, t->w, m->no};
        char name[16];
        snprintf(name, sizeof name, "head%d", l);
        st = out_add(o, name, 5, shape, p);
    }
    return st;
}

/* The loss, every parameter's gradient (grad.<name>) and the metadata, then the file. */
static int out_finish(out_file *o, const char *path, yc_model *m, const float *loss, int nloss,
                      double seconds)
{
    float *grads = yc_malloc(m->param_elems * sizeof(float), "gradients");
    char *names = yc_calloc((size_t)m->nparams, YC_NAME_MAX + 8, "names");
    int st = grads && names ? YC_OK : YC_ENOMEM;
    int64_t n = nloss;
    if (!st)
        st = yc_st_writer_add(o->w, "loss", YC_ST_F32, 1, &n, loss);
    if (!st)
        st = m->be->iface->buffer_read(m->be, m->grad_buf, 0, grads,
                                       m->param_elems * sizeof(float));
    for (int i = 0; i < m->nparams && !st; i++) {
        const yc_param *p = &m->params[i];
        int64_t shape[4];
        for (int d = 0; d < p->ndim; d++)
            shape[d] = p->shape[d];
        char *name = names + (size_t)i * (YC_NAME_MAX + 8);
        snprintf(name, YC_NAME_MAX + 8, "grad.%s", p->name);
        st = yc_st_writer_add(o->w, name, YC_ST_F32, p->ndim, shape, grads + p->offset);
    }
    char meta[64];
    snprintf(meta, sizeof meta, "%.3f", seconds);
    if (!st)
        st = yc_st_writer_meta(o->w, "step_seconds", meta);
    if (!st)
        st = yc_st_writer_meta(o->w, "model", m->cfg->name);
    if (!st)
        st = yc_st_writer_write(o->w, path);
    free(names);
    free(grads);
    return st;
}

static void out_free(out_file *o)
{
    for (int i = 0; i < o->nkeep; i++)
        free(o->keep[i]);
    yc_st_writer_free(o->w);
}

/* A copy of n floats (NULL when memory runs out). */
static float *copy_f32(const float *src, size_t n, const char *what)
{
    float *p = yc_malloc(n * sizeof(float), what);
    if (p)
        memcpy(p, src, n * sizeof(float));
    return p;
}

/* The model, the batch it must take, then the model on the device with its weights or YOLOv5's
 * random initialisation. */
static int read_batch_and_model(const inspect_cli *c, batch_data *b, yc_opened_model *om)
{
    yc_model_spec ms = {.cfg = c->cfg, .nc = c->nc, .use = YC_MODEL_SHAPE};
    int st = yc_model_open(&ms, om);
    if (st || (st = read_batch(c->batch, om->m->cfg->task, b)))
        return st;
    yc_model *m = om->m;
    if (b->ch != m->cfg->ch)
        return yc_error_status(YC_EFORMAT, "%s: images have %d channels, the model takes %d",
                               c->batch, b->ch, m->cfg->ch);
    if (m->cfg->task == YC_TASK_CLASSIFY && b->h != b->w)
        return yc_error_status(YC_EFORMAT, "%s: a classifier takes square images, these are "
                               "%dx%d", c->batch, b->w, b->h);
    if ((st = yc_device_open(c->device, 0, true, &om->be)))
        return st;
    om->own_be = true;
    if ((st = yc_model_alloc(m, om->be)))
        return st;
    if (c->weights && c->weights[0])
        return yc_model_load(m, c->weights);
    if (!(st = yc_model_init_weights(m, (uint64_t)c->seed)))
        yc_info("weights: YOLOv5 random initialisation, seed %d\n", c->seed);
    return st;
}

/* The step's line: what it computed, its time and memory. */
static void report(const yc_model *m, const batch_data *b, yc_graph *g, const char *losses,
                   double seconds, const char *out)
{
    char rss[32], arena[32];
    yc_info("%s %dx%d batch %d: %s\n", m->cfg->name, b->h, b->w, b->n, losses);
    yc_info("step %.3f s, activation arena %s, peak RSS %s; wrote %s\n", seconds,
            yc_format_size(yc_graph_plan(g)->arena_bytes, arena, sizeof arena),
            yc_format_size(yc_peak_rss(), rss, sizeof rss), out);
}

/* One detection training step on the batch, written to --out. */
static int run_detect(const inspect_cli *c, const yc_hyp *hyp, const batch_data *b, yc_model *m)
{
    yc_step *step = NULL;
    yc_loss_params lp;
    yc_step_loss_params(m, hyp, b->h > b->w ? b->h : b->w, c->smoothing, &lp);
    out_file o = {.w = yc_st_writer_new()};
    int st = o.w ? YC_OK : YC_ENOMEM;
    yc_loss_result res;
    double seconds = 0;
    if (!st && !(st = yc_step_new(&step, m, b->n, b->h, b->w, &lp)) &&
        !(st = yc_step_keep_heads(step))) {
        double t0 = yc_now();
        if (!(st = yc_step_run(step, b->images, b->targets, b->nt, &res))) {
            seconds = yc_now() - t0;
            float loss[4] = {(float)res.total, (float)res.box, (float)res.obj, (float)res.cls};
            if (!(st = out_heads(&o, m, step->g, step->head)))
                st = out_finish(&o, c->out, m, loss, 4, seconds);
        }
    }
    if (!st) {
        char line[160];
        snprintf(line, sizeof line, "loss %.7g (box %.7g, obj %.7g, cls %.7g)", res.total,
                 res.box, res.obj, res.cls);
        report(m, b, step->g, line, seconds, c->out);
    }
    out_free(&o);
    yc_step_free(step);
    return st;
}

/* One segmentation training step (segment_step.h) on the batch, written to --out with the proto
 * output (B, nm, h/4, w/4). */
static int run_segment(const inspect_cli *c, const yc_hyp *hyp, const batch_data *b, yc_model *m)
{
    yc_seg_step *step = NULL;
    yc_loss_params lp;
    yc_seg_step_loss_params(m, hyp, b->h > b->w ? b->h : b->w, c->smoothing, &lp);
    out_file o = {.w = yc_st_writer_new()};
    int st = o.w ? YC_OK : YC_ENOMEM;
    yc_seg_loss_result res;
    double seconds = 0;
    yc_seg_masks mk = {.m = b->masks, .h = b->mh, .w = b->mw};
    if (!st && !(st = yc_seg_step_new(&step, m, b->n, b->h, b->w, &lp, NULL))) {
        double t0 = yc_now();
        if (!(st = yc_seg_step_run(step, b->images, b->targets, b->nt, &mk, &res))) {
            seconds = yc_now() - t0;
            float loss[5] = {(float)res.total, (float)res.box, (float)res.seg, (float)res.obj,
                             (float)res.cls};
            int nm = lp.nm;
            int64_t pshape[4] = {b->n, nm, step->proto_h, step->proto_w};
            size_t pn = (size_t)b->n * nm * step->proto_h * step->proto_w;
            if (!(st = out_heads(&o, m, step->g, step->head)) &&
                !(st = out_add(&o, "proto", 4, pshape, copy_f32(step->proto, pn, "proto"))))
                st = out_finish(&o, c->out, m, loss, 5, seconds);
        }
    }
    if (!st) {
        char line[200];
        snprintf(line, sizeof line, "loss %.7g (box %.7g, seg %.7g, obj %.7g, cls %.7g)",
                 res.total, res.box, res.seg, res.obj, res.cls);
        report(m, b, step->g, line, seconds, c->out);
    }
    out_free(&o);
    yc_seg_step_free(step);
    return st;
}

/* One classifier training step (classify_step.h) on the batch, written to --out with the logits
 * (B, nc). */
static int run_classify(const inspect_cli *c, const batch_data *b, yc_model *m)
{
    yc_classify_step *step = NULL;
    out_file o = {.w = yc_st_writer_new()};
    int st = o.w ? YC_OK : YC_ENOMEM;
    double loss = 0, seconds = 0;
    if (!st && !(st = yc_classify_step_new(&step, m, b->n, b->h, c->smoothing, NULL))) {
        double t0 = yc_now();
        if (!(st = yc_classify_step_run(step, b->images, b->labels, &loss))) {
            seconds = yc_now() - t0;
            float l = (float)loss;
            int64_t shape[2] = {b->n, step->nc};
            if (!(st = out_add(&o, "logits", 2, shape,
                               copy_f32(step->logits, (size_t)b->n * step->nc, "logits"))))
                st = out_finish(&o, c->out, m, &l, 1, seconds);
        }
    }
    if (!st) {
        char line[80];
        snprintf(line, sizeof line, "loss %.7g (label smoothing %g)", loss, c->smoothing);
        report(m, b, step->g, line, seconds, c->out);
    }
    out_free(&o);
    yc_classify_step_free(step);
    return st;
}

int yc_cmd_inspect(int argc, char **argv)
{
    inspect_cli c = {.hyp = "hyp.scratch-low", .device = "auto", .smoothing = -1};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, &c, &s);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    if (!c.cfg || !c.batch || !c.out)
        return yc_usage_error(spec.cmd, "--cfg, --batch and --out are required");
    yc_hyp hyp;
    yc_opened_model om;
    memset(&om, 0, sizeof om);
    batch_data b = {0};
    if (!(st = yc_hyp_load(&hyp, c.hyp)) && !(st = read_batch_and_model(&c, &b, &om))) {
        yc_task task = om.m->cfg->task;
        if (c.smoothing < 0)
            c.smoothing = task == YC_TASK_CLASSIFY ? YC_CLS_LABEL_SMOOTHING : 0.0f;
        if (task == YC_TASK_SEGMENT)
            st = run_segment(&c, &hyp, &b, om.m);
        else if (task == YC_TASK_CLASSIFY)
            st = run_classify(&c, &b, om.m);
        else
            st = run_detect(&c, &hyp, &b, om.m);
    }
    batch_free(&b);
    yc_opened_model_free(&om);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
