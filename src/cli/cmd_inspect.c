/* yolocl inspect: one training step (train-mode forward, YOLOv5 loss, backward) on a given batch
 * with given weights, written to a safetensors file for comparison with PyTorch YOLOv5. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "device.h"
#include "hyp.h"
#include "log.h"
#include "model.h"
#include "safetensors.h"
#include "step.h"
#include "util.h"

static void print_usage(void)
{
    fputs("Usage: yolocl inspect --cfg MODEL --batch IO.safetensors --out OUT.safetensors\n"
          "                      [--weights W.safetensors | --seed N] [--nc N] [--hyp HYP]\n"
          "                      [--device D]\n"
          "Run one training step (train-mode forward, YOLOv5 loss, backward) and write the head\n"
          "outputs, the loss and every parameter gradient to OUT.safetensors.\n"
          "\n"
          "  -c, --cfg MODEL          model config (bundled name or yaml path)\n"
          "      --nc N               number of classes (default: the yaml's nc)\n"
          "  -w, --weights FILE       weights with YOLOv5 state-dict names (safetensors);\n"
          "                           without it the model starts from YOLOv5's random init\n"
          "      --seed N             seed of that random init (default 0)\n"
          "  -b, --batch FILE         safetensors with `images` (B,3,H,W float32 in [0,1], RGB;\n"
          "                           also accepted under the name `input`) and `targets`\n"
          "                           (N,6: image index, class, x, y, w, h normalised)\n"
          "  -o, --out FILE           where to write head0.., loss and grad.<name>\n"
          "      --hyp HYP            hyperparameters (default hyp.scratch-low)\n"
          "      --label-smoothing E  class label smoothing epsilon (default 0)\n"
          "      --device D           auto, cpu, opencl, opencl:N or a device name substring\n"
          "  -h, --help               show this help\n",
          stdout);
}

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

int yc_cmd_inspect(int argc, char **argv)
{
    static const char *const cmd = "inspect";
    static const struct option opts[] = {
        {"cfg", required_argument, NULL, 'c'},
        {"nc", required_argument, NULL, 'n'},
        {"weights", required_argument, NULL, 'w'},
        {"batch", required_argument, NULL, 'b'},
        {"out", required_argument, NULL, 'o'},
        {"hyp", required_argument, NULL, 'y'},
        {"label-smoothing", required_argument, NULL, 'l'},
        {"device", required_argument, NULL, 'd'},
        {"seed", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cfg_name = NULL, *weights = NULL, *batch = NULL, *out = NULL;
    const char *hyp_name = "hyp.scratch-low", *device = "auto";
    int nc = 0, seed = 0, c, st;
    float smoothing = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:w:b:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg_name = optarg;
            break;
        case 'n':
            if ((st = yc_cli_int(cmd, "--nc", optarg, 1, 100000, &nc)))
                return st;
            break;
        case 'w':
            weights = optarg;
            break;
        case 'b':
            batch = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'y':
            hyp_name = optarg;
            break;
        case 'l':
            if ((st = yc_cli_float(cmd, "--label-smoothing", optarg, 0, 1, &smoothing)))
                return st;
            break;
        case 'd':
            device = optarg;
            break;
        case 's':
            if ((st = yc_cli_int(cmd, "--seed", optarg, 0, 2147483647, &seed)))
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
    if (!cfg_name || !batch || !out)
        return yc_usage_error(cmd, "--cfg, --batch and --out are required");

    yc_hyp hyp;
    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    yc_backend *be = NULL;
    yc_step *step = NULL;
    batch_data b = {0};
    if ((st = yc_hyp_load(&hyp, hyp_name)) || (st = yc_model_cfg_find(cfg_name, path, sizeof path)) ||
        (st = yc_model_cfg_load(&cfg, path, nc)))
        goto done;
    if ((st = yc_model_new(&m, cfg)) || (st = read_batch(batch, &b)))
        goto done;
    if (b.ch != m->cfg->ch) {
        st = yc_error_status(YC_EFORMAT, "%s: images have %d channels, the model takes %d", batch,
                             b.ch, m->cfg->ch);
        goto done;
    }
    if ((st = yc_device_open(device, 0, true, &be)) || (st = yc_model_alloc(m, be)))
        goto done;
    if (weights && weights[0])
        st = yc_model_load(m, weights);
    else if (!(st = yc_model_init_weights(m, (uint64_t)seed)))
        yc_info("weights: YOLOv5 random initialisation, seed %d\n", seed);
    if (st)
        goto done;
    yc_loss_params lp;
    yc_step_loss_params(m, &hyp, b.h > b.w ? b.h : b.w, smoothing, &lp);
    if ((st = yc_step_new(&step, m, b.n, b.h, b.w, &lp)) || (st = yc_step_keep_heads(step)))
        goto done;
    yc_loss_result res;
    double t0 = yc_now();
    if ((st = yc_step_run(step, b.images, b.targets, b.nt, &res)))
        goto done;
    double seconds = yc_now() - t0;
    if ((st = write_result(out, step, &res, seconds)))
        goto done;
    char rss[32], arena[32];
    yc_info("%s %dx%d batch %d: loss %.7g (box %.7g, obj %.7g, cls %.7g)\n", m->cfg->name, b.h,
            b.w, b.n, res.total, res.box, res.obj, res.cls);
    yc_info("step %.3f s, activation arena %s, peak RSS %s; wrote %s\n", seconds,
            yc_format_size(yc_graph_plan(step->g)->arena_bytes, arena, sizeof arena),
            yc_format_size(yc_peak_rss(), rss, sizeof rss), out);
done:
    free(b.images);
    free(b.targets);
    yc_step_free(step);
    yc_model_free(m);
    yc_backend_free(be);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
