/* yolocl inspect: one training step (train-mode forward, YOLOv5 loss, backward) on a given batch
 * with given weights, written to a safetensors file for comparison with PyTorch YOLOv5. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "device.h"
#include "hyp.h"
#include "log.h"
#include "model.h"
#include "options.h"
#include "safetensors.h"
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
                  "safetensors with `images` (B,3,H,W float32 in [0,1], RGB;\n"
                  "also accepted under the name `input`) and `targets`\n"
                  "(N,6: image index, class, x, y, w, h normalised)"),
    YC_OPT_STRING('o', "out", "FILE", T, out, "where to write head0.., loss and grad.<name>"),
    YC_OPT_STRING(0, "hyp", "HYP", T, hyp, "hyperparameters (default hyp.scratch-low)"),
    YC_OPT_FLOAT(0, "label-smoothing", "E", T, smoothing, 0, 1,
                 "class label smoothing epsilon (default 0)"),
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
            "Run one training step (train-mode forward, YOLOv5 loss, backward) and write the head\n"
            "outputs, the loss and every parameter gradient to OUT.safetensors.\n"
            "\n",
    .rows = rows,
    .help_col = 27,
};

typedef struct batch_data {
    float *images, *targets;
    int n, ch, h, w, nt;
} batch_data;

static int read_batch(const char *path, batch_data *b)
{
    memset(b, 0, sizeof *b);
    yc_st_file *f = NULL;
    int st = yc_st_open(&f, path);
    if (st)
        return st;
    const yc_st_tensor *im = yc_st_find(f, "images");
    if (!im)
        im = yc_st_find(f, "input");
    const yc_st_tensor *tg = yc_st_find(f, "targets");
    if (!im || im->ndim != 4 || im->shape[0] < 1 || im->shape[1] < 1) {
        yc_st_close(f);
        return yc_error_status(YC_EFORMAT, "%s: no 'images' tensor of shape (B, 3, H, W)", path);
    }
    if (!tg || tg->ndim != 2 || tg->shape[1] != 6) {
        yc_st_close(f);
        return yc_error_status(YC_EFORMAT, "%s: no 'targets' tensor of shape (N, 6)", path);
    }
    b->n = (int)im->shape[0];
    b->ch = (int)im->shape[1];
    b->h = (int)im->shape[2];
    b->w = (int)im->shape[3];
    b->nt = (int)tg->shape[0];
    b->images = yc_malloc(im->numel * sizeof(float), "input images");
    b->targets = yc_malloc((tg->numel ? tg->numel : 1) * sizeof(float), "targets");
    if (!b->images || !b->targets)
        st = YC_ENOMEM;
    if (!st)
        st = yc_st_read_f32(f, im, b->images, im->numel);
    if (!st)
        st = yc_st_read_f32(f, tg, b->targets, tg->numel);
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

static int write_result(const char *out, yc_step *s, const yc_loss_result *res, double seconds)
{
    yc_model *m = s->m;
    yc_st_writer *w = yc_st_writer_new();
    float *grads = yc_malloc(m->param_elems * sizeof(float), "gradients");
    float *heads[YC_MAX_LEVELS] = {0};
    char *names = yc_calloc((size_t)m->nparams + YC_MAX_LEVELS, YC_NAME_MAX + 8, "names");
    int st = w && grads && names ? YC_OK : YC_ENOMEM;
    float loss[4] = {(float)res->total, (float)res->box, (float)res->obj, (float)res->cls};
    for (int l = 0; l < m->nl && !st; l++) {
        const yc_tensor *t = yc_graph_head(s->g, l);
        heads[l] = yc_malloc(yc_tensor_elems(t) * sizeof(float), "head output");
        if (!heads[l]) {
            st = YC_ENOMEM;
            break;
        }
        permute_head(s->head[l], heads[l], t->n, m->na, m->no, t->h, t->w);
        int64_t shape[5] = {t->n, m->na, t->h, t->w, m->no};
        char *name = names + (size_t)(m->nparams + l) * (YC_NAME_MAX + 8);
        snprintf(name, YC_NAME_MAX + 8, "head%d", l);
        st = yc_st_writer_add(w, name, YC_ST_F32, 5, shape, heads[l]);
    }
    int64_t four = 4;
    if (!st)
        st = yc_st_writer_add(w, "loss", YC_ST_F32, 1, &four, loss);
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
        st = yc_st_writer_add(w, name, YC_ST_F32, p->ndim, shape, grads + p->offset);
    }
    char meta[64];
    snprintf(meta, sizeof meta, "%.3f", seconds);
    if (!st)
        st = yc_st_writer_meta(w, "step_seconds", meta);
    if (!st)
        st = yc_st_writer_meta(w, "model", m->cfg->name);
    if (!st)
        st = yc_st_writer_write(w, out);
    for (int l = 0; l < YC_MAX_LEVELS; l++)
        free(heads[l]);
    free(names);
    free(grads);
    yc_st_writer_free(w);
    return st;
}

/* The model, the batch it must take, then the model on the device with its weights or YOLOv5's
 * random initialisation. */
static int read_batch_and_model(const inspect_cli *c, batch_data *b, yc_opened_model *om)
{
    yc_model_spec ms = {.cfg = c->cfg, .nc = c->nc, .use = YC_MODEL_SHAPE,
                        .detection_only = "yolocl inspect"};
    int st = yc_model_open(&ms, om);
    if (st || (st = read_batch(c->batch, b)))
        return st;
    yc_model *m = om->m;
    if (b->ch != m->cfg->ch)
        return yc_error_status(YC_EFORMAT, "%s: images have %d channels, the model takes %d",
                               c->batch, b->ch, m->cfg->ch);
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

/* One training step on the batch, written to --out. */
static int run(const inspect_cli *c, const yc_hyp *hyp, const batch_data *b, yc_model *m)
{
    yc_step *step = NULL;
    yc_loss_params lp;
    yc_step_loss_params(m, hyp, b->h > b->w ? b->h : b->w, c->smoothing, &lp);
    int st;
    yc_loss_result res;
    double t0 = 0, seconds = 0;
    if (!(st = yc_step_new(&step, m, b->n, b->h, b->w, &lp)) &&
        !(st = yc_step_keep_heads(step))) {
        t0 = yc_now();
        if (!(st = yc_step_run(step, b->images, b->targets, b->nt, &res))) {
            seconds = yc_now() - t0;
            st = write_result(c->out, step, &res, seconds);
        }
    }
    if (!st) {
        char rss[32], arena[32];
        yc_info("%s %dx%d batch %d: loss %.7g (box %.7g, obj %.7g, cls %.7g)\n", m->cfg->name,
                b->h, b->w, b->n, res.total, res.box, res.obj, res.cls);
        yc_info("step %.3f s, activation arena %s, peak RSS %s; wrote %s\n", seconds,
                yc_format_size(yc_graph_plan(step->g)->arena_bytes, arena, sizeof arena),
                yc_format_size(yc_peak_rss(), rss, sizeof rss), c->out);
    }
    yc_step_free(step);
    return st;
}

int yc_cmd_inspect(int argc, char **argv)
{
    inspect_cli c = {.hyp = "hyp.scratch-low", .device = "auto"};
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
    if (!(st = yc_hyp_load(&hyp, c.hyp)) && !(st = read_batch_and_model(&c, &b, &om)))
        st = run(&c, &hyp, &b, om.m);
    free(b.images);
    free(b.targets);
    yc_opened_model_free(&om);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
