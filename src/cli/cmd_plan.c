/* yolocl plan: the memory a training run needs, computed before anything is allocated, and how
 * yolocl would fit it into the device (or --mem). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "dataset.h"
#include "device.h"
#include "dist.h"
#include "image_read.h"
#include "imgcache.h"
#include "loader.h"
#include "json.h"
#include "log.h"
#include "memplan.h"
#include "model.h"
#include "modelcfg.h"
#include "optim.h"
#include "options.h"
#include "util.h"
#include "val_full.h"
#include "weights.h"

/* The command line. */
typedef struct plan_cli {
    const char *cfg, *device, *data;
    int nc, img, batch, workers, max_w, max_h, tile, half, optim, cache;
    /* data-parallel training: ranks in all and per machine; the global batch they share */
    int ranks, per_node, global_batch;
    /* --device as given, whether auto would open a GPU, and the device local rank 0 opens
     * (--device as yc_dist_rank_device maps it), which the plan uses */
    const char *device_arg;
    bool auto_gpu;
    char rank_device[64];
    size_t mem;
    bool json, noval, recompute, val_full;
    yc_read_limits lim;
} plan_cli;

static int max_image(const yc_option *row, const char *arg, void *obj, yc_opt_state *s)
{
    (void)row;
    plan_cli *c = obj;
    if (sscanf(arg, "%dx%d", &c->max_w, &c->max_h) != 2 || c->max_w < 1 || c->max_h < 1)
        return yc_usage_error(s->spec->cmd, "invalid value '%s' for --max-image: expected WxH, "
                              "e.g. 1920x1080", arg);
    return 0;
}

#define T plan_cli
static const yc_option rows[] = {
    YC_OPT_STRING('c', "cfg", "MODEL", T, cfg, "model config (bundled name or yaml path)"),
    YC_OPT_INT(0, "nc", "N", T, nc, 1, 100000, "number of classes (default: the yaml's nc)"),
    {.type = YC_OPT_T_INT, .short_name = 'i', .name = "img", .aliases = {"imgsz"},
     .metavar = "N", .offset = offsetof(T, img), .lo = 32, .hi = 16384,
     .help = "training image size (default 640)"},
    {.type = YC_OPT_T_INT, .short_name = 'b', .name = "batch", .aliases = {"batch-size"},
     .metavar = "N", .offset = offsetof(T, batch), .lo = -1, .hi = 65536,
     .zero = "--batch must be positive or -1",
     .help = "images per batch (default 16; -1: the largest that fits)"},
    YC_OPTS_HALF(T, half, NULL, "FP16 storage of activations", 0,
                 "never FP16 storage (default: on OpenCL devices that can\n"
                 "store FP16, on the CPU only when needed to fit)"),
    YC_OPTS_RECOMPUTE(T, recompute, "recompute SiLU outputs in backward"),
    YC_OPTS_MEM(T, mem, "memory limit (default: 90% of the device's free memory)"),
    {.type = YC_OPT_T_ENUM, .name = "optimizer", .metavar = "NAME", .offset = offsetof(T, optim),
     .parse = yc_opt_parse_optimizer, .choices = "SGD, Adam or AdamW",
     .help = "SGD (default), Adam or AdamW"},
    YC_OPT_INT('j', "workers", "N", T, workers, 1, 256, "loader threads (default: physical cores)"),
    YC_OPT_STRING('d', "data", "FILE", T, data,
                  "dataset yaml: its class count, largest image and validation"),
    YC_OPT_CALLBACK(0, "max-image", "WxH", T, max_w, max_image,
                    "largest dataset image without --data (default IMGxIMG)"),
    YC_OPT_CACHE("[ram]", T, cache, "count the images --cache ram keeps (needs --data)"),
    YC_OPT_PIXELS("max-pixels", "N", T, lim.max_pixels,
                  "most pixels one image read may decode (default 2^30)"),
    YC_OPT_TILE(T, tile, "tiled training with SIZE x SIZE windows (default: the\n"
                         "dataset yaml's tile:, else none; 0 = whole images)"),
    YC_OPT_BOOL(0, "val-full", T, val_full, "with tiles: validation per whole image by slices (see\n"
                                            "yolocl-val(1)) in place of the validation loader"),
    YC_OPT_BOOL(0, "noval", T, noval, "no validation graph"),
    YC_OPTS_DEVICE(T, device),
    YC_OPT_INT(0, "ranks", "N", T, ranks, 1, 65536,
               "plan one of N data-parallel ranks (mpirun -np N): --batch\n"
               "is the global batch, batch / N per rank (default 1)"),
    YC_OPT_INT(0, "ranks-per-node", "M", T, per_node, 1, 65536,
               "of those, ranks per machine: they share its cores and\n"
               "memory, and take its devices in turn (default N)"),
    YC_OPT_BOOL(0, "json", T, json, "one JSON object for scripts"),
    YC_OPT_HELP(),
    YC_OPT_END(),
};
#undef T

static const yc_command_options spec = {
    .cmd = "plan",
    .head = "Usage: yolocl plan --cfg MODEL [--nc N] [--img 640] [--batch 16] [OPTION]...\n"
            "Print the memory plan of a training run and what yolocl would choose to fit it.\n"
            "\n",
    .rows = rows,
    .help_col = 24,
};

/* Why the plan shows a micro-batch instead of the requested batch ("" when it does not). */
static char micro_note[1400];

/* The command line, for the printers (set by yc_cmd_plan). */
static const plan_cli *cli;

/* With --ranks: whose plan this is, and the devices and threads of the ranks of a machine. */
static void print_ranks(const yc_backend *be)
{
    const plan_cli *c = cli;
    if (c->ranks == 1)
        return;
    printf("one of %d data-parallel ranks (%d per machine): global batch %d, %d per rank\n",
           c->ranks, c->per_node, c->global_batch, c->batch);
    if (be->iface->buffer_host_ptr) {
        /* the CPU backend: the machine's cores and memory shared */
        int threads = yc_physical_cores() / c->per_node;
        printf("each rank computes on the CPU with %d thread%s (%d physical cores / %d ranks per "
               "machine) and plans within 1/%d of the memory\n", threads > 0 ? threads : 1,
               threads > 1 ? "s" : "", yc_physical_cores(), c->per_node, c->per_node);
        return;
    }
    printf("devices of the local ranks:");
    for (int r = 0; r < c->per_node; r++) {
        char d[64];
        if (yc_dist_rank_device(c->device_arg, c->auto_gpu, r, c->per_node, d, sizeof d))
            snprintf(d, sizeof d, "?");
        printf("%s %d: %s", r ? "," : "", r, d);
        if (r == 7 && c->per_node > 9) {
            printf(", ... (%d in all)", c->per_node);
            break;
        }
    }
    printf("; this plan is local rank 0's\n");
}

static void print_text(const yc_run_shape *rs, const yc_mem_report *r, const yc_mem_fit *fit,
                       size_t limit, const yc_backend *be)
{
    char a[32], b[32];
    if (*micro_note)
        printf("%s at %dx%d, micro-batch %d of batch %d%s%s, %s\n(%s)\n", rs->m->cfg->name,
               rs->imgsz, rs->imgsz, rs->batch, rs->loader_batch,
               rs->half ? ", FP16 storage" : "", rs->recompute ? ", recomputation" : "",
               yc_optim_kind_name(rs->optimizer), micro_note);
    else
        printf("%s at %dx%d, batch %d%s%s, %s\n", rs->m->cfg->name, rs->imgsz, rs->imgsz,
               rs->batch, rs->half ? ", FP16 storage" : "", rs->recompute ? ", recomputation" : "",
               yc_optim_kind_name(rs->optimizer));
    print_ranks(be);
    printf("\n%-44s %12s  %s\n", "item", "bytes", "where");
    for (int i = 0; i < r->nitems; i++)
        printf("%-44s %12s  %s\n", r->items[i].what,
               yc_format_size(r->items[i].bytes, a, sizeof a),
               r->items[i].device ? "device" : "host");
    printf("\nactivation arena: %d chunk%s (training step)", r->train_plan.nchunks,
           r->train_plan.nchunks == 1 ? "" : "s");
    for (int c = 0; c < r->train_plan.nchunks; c++)
        printf("%s%s", c ? ", " : ": ", yc_format_size(r->train_plan.chunk_bytes[c], a, sizeof a));
    printf("; validation %s\n", yc_format_size(r->val_plan.arena_bytes, a, sizeof a));
    printf("training activations: planned %s, lower bound %s (largest sum of live tensors, at "
           "schedule position %d)\n", yc_format_size(r->train_plan.arena_bytes, a, sizeof a),
           yc_format_size(r->train_plan.lower_bound_bytes, b, sizeof b),
           r->train_plan.peak_position);
    printf("peak: %s planned, lower bound %s\n", yc_format_size(r->peak_bytes, a, sizeof a),
           yc_format_size(r->lower_bound_bytes, b, sizeof b));
    int top[10];
    int n = yc_plan_largest(&r->train_plan, top, 10);
    printf("\n%-48s %12s  %s\n", "largest tensors", "bytes", "alive (schedule positions)");
    for (int i = 0; i < n; i++) {
        const yc_plan_block *bl = &r->train_plan.blocks[top[i]];
        printf("%-48s %12s  %d-%d\n", bl->name ? bl->name : "?",
               yc_format_size(bl->size, a, sizeof a), bl->first, bl->last);
    }
    printf("\ndevice: %s, %s total, %s free, largest allocation %s\n", be->info.name,
           yc_format_size(be->info.mem_total, a, sizeof a),
           yc_format_size(be->info.mem_free, b, sizeof b),
           yc_format_size(be->info.max_alloc, (char[32]){0}, 32));
    printf("limit %s: %s\n", yc_format_size(limit, a, sizeof a), fit->reason);
}

static void print_json(const yc_run_shape *rs, const yc_mem_report *r, const yc_mem_fit *fit,
                       size_t limit, const yc_backend *be)
{
    char *name = yc_json_quote(rs->m->cfg->name, strlen(rs->m->cfg->name));
    char *dev = yc_json_quote(be->info.name, strlen(be->info.name));
    printf("{\"model\": %s, \"img\": %d, \"batch\": %d, \"peak_bytes\": %zu, "
           "\"lower_bound_bytes\": %zu, \"device_bytes\": %zu, \"host_bytes\": %zu, "
           "\"activation_bytes\": %zu, \"activation_lower_bound_bytes\": %zu, "
           "\"workspace_bytes\": %zu, \"micro_batch\": %d, \"micro_batches\": %d, "
           "\"last_micro_batch\": %d, \"accumulate\": %d, \"half\": %s, "
           "\"recompute\": %s, \"fit_peak_bytes\": %zu, \"limit_bytes\": %zu, \"device\": %s, "
           "\"planned_batch\": %d, \"ranks\": %d, \"ranks_per_node\": %d, "
           "\"global_batch\": %d, \"chunks\": [",
           name ? name : "\"\"", rs->imgsz, rs->loader_batch ? rs->loader_batch : rs->batch,
           r->peak_bytes, r->lower_bound_bytes,
           r->device_bytes, r->host_bytes, r->train_plan.arena_bytes,
           r->train_plan.lower_bound_bytes, r->workspace_bytes, fit->micro_batch,
           fit->micro_batches, fit->last_micro, fit->accumulate,
           fit->half ? "true" : "false", fit->recompute ? "true" : "false", fit->peak_bytes, limit,
           dev ? dev : "\"\"", rs->batch, cli->ranks, cli->per_node, cli->global_batch);
    for (int c = 0; c < r->train_plan.nchunks; c++)
        printf("%s%zu", c ? ", " : "", r->train_plan.chunk_bytes[c]);
    printf("], \"items\": [");
    for (int i = 0; i < r->nitems; i++) {
        char *w = yc_json_quote(r->items[i].what, strlen(r->items[i].what));
        printf("%s{\"what\": %s, \"bytes\": %zu, \"device\": %s}", i ? ", " : "", w ? w : "\"\"",
               r->items[i].bytes, r->items[i].device ? "true" : "false");
        free(w);
    }
    printf("]}\n");
    free(name);
    free(dev);
}

/* The options, with the checks across them: 0, YC_OPT_DONE (--help) or a usage error. */
static int parse(int argc, char **argv, plan_cli *c)
{
    *c = (plan_cli){.device = "auto", .img = 640, .batch = 16, .tile = -1, .half = YC_HALF_AUTO,
                    .optim = YC_OPTIM_SGD, .cache = YC_CACHE_NONE, .ranks = 1};
    yc_opt_state s;
    int st = yc_options_parse(&spec, argc, argv, c, &s);
    if (st)
        return st;
    /* as yolocl train under mpirun -np N (setup_distributed in src/train/train.c) */
    if (!c->per_node)
        c->per_node = c->ranks;
    if (c->per_node > c->ranks)
        return yc_usage_error(spec.cmd, "--ranks-per-node %d is more than the %d ranks",
                              c->per_node, c->ranks);
    c->global_batch = c->batch;
    if (c->ranks > 1) {
        if (c->batch == -1)
            return yc_usage_error(spec.cmd, "--batch -1 (the largest that fits) is not "
                                  "supported with --ranks %d: give the global batch, a multiple "
                                  "of %d", c->ranks, c->ranks);
        if (c->batch % c->ranks)
            return yc_usage_error(spec.cmd, "--batch %d is the global batch and must be a "
                                  "multiple of the %d ranks (%d images per rank would leave %d "
                                  "over)", c->batch, c->ranks, c->batch / c->ranks,
                                  c->batch % c->ranks);
        c->batch /= c->ranks;
    }
    if (!c->cfg)
        return yc_usage_error(spec.cmd, "--cfg is required (for example --cfg yolov5s)");
    if (c->cache == YC_CACHE_RAM && !c->data)
        return yc_usage_error(spec.cmd, "--cache needs --data (the images it would keep)");
    return 0;
}

/* What a plan holds. */
typedef struct plan_run {
    yc_data_yaml y;
    bool have_yaml;
    yc_dataset sets[2]; /* train, val */
    int nsets;
    int val_w, val_h;
    yc_opened_model om;
} plan_run;

static void plan_run_free(plan_run *r)
{
    for (int i = 0; i < r->nsets; i++)
        yc_dataset_free(&r->sets[i]);
    if (r->have_yaml)
        yc_data_yaml_free(&r->y);
    if (r->om.m)
        r->om.m->be = NULL;
    yc_opened_model_free(&r->om);
}

/* What training would scan: the class count, the largest image, the validation set. */
static int open_data(plan_cli *c, plan_run *r)
{
    int st = yc_data_yaml_load(c->data, &r->y);
    if (st)
        return st;
    r->have_yaml = true;
    c->nc = r->y.nc;
    for (int i = 0; i < 2; i++) {
        yc_dataset_options dopt = {.nc = r->y.nc, .quiet = c->json};
        if ((st = yc_dataset_load_split(&r->y, i ? YC_SPLIT_VAL : YC_SPLIT_TRAIN, &dopt,
                                        &r->sets[i])))
            return st;
        r->nsets++;
        for (size_t k = 0; k < r->sets[i].n; k++) {
            const yc_sample *sm = &r->sets[i].samples[k];
            c->max_w = sm->w > c->max_w ? sm->w : c->max_w;
            c->max_h = sm->h > c->max_h ? sm->h : c->max_h;
            if (i == 1) {
                r->val_w = sm->w > r->val_w ? sm->w : r->val_w;
                r->val_h = sm->h > r->val_h ? sm->h : r->val_h;
            }
        }
    }
    c->noval = c->noval || r->sets[1].n == 0;
    return YC_OK;
}

/* The run's shape: the model at the image size on the device, the costliest image read, the
 * cache and the whole-image validation. */
static int run_shape(plan_cli *c, plan_run *r, yc_run_shape *rs)
{
    yc_model *m = r->om.m;
    yc_backend *be = r->om.be;
    /* the libraries, the OpenCL drivers the device probe loaded and the dataset index */
    size_t baseline = yc_current_rss();
    m->be = be; /* for workspace queries; nothing is allocated */
    int gs = 32;
    for (int l = 0; l < m->nl; l++)
        gs = m->stride[l] > gs ? (int)m->stride[l] : gs;
    int img = c->img = (c->img + gs - 1) / gs * gs;
    int batch = c->batch > 0 ? c->batch : 16;
    *rs = (yc_run_shape){.m = m, .train = true, .batch = batch,
                         .val_batch = c->noval ? 0 : 2 * batch, .imgsz = img,
                         .half = c->half == YC_HALF_ON && be->info.fp16_storage,
                         .recompute = c->recompute,
                         .optimizer = (yc_optim_kind)c->optim,
                         .workers = c->workers > 0 ? c->workers : yc_physical_cores(),
                         .max_image_w = c->max_w ? c->max_w : img,
                         .max_image_h = c->max_h ? c->max_h : img,
                         .tile = c->tile >= 0 ? c->tile : r->have_yaml ? r->y.tile : 0,
                         .baseline = baseline};
    if (rs->tile == 0) {
        /* whole images: the costliest read of the dataset, else of the --max-image */
        for (int i = 0; i < r->nsets; i++) {
            long which;
            size_t bytes = yc_loader_read_bytes(&r->sets[i], img, &c->lim, &which);
            if (which >= 0 && (!rs->read_image || bytes > rs->read_bytes)) {
                rs->read_bytes = bytes;
                rs->read_image = r->sets[i].samples[which].image;
                rs->read_image_w = r->sets[i].samples[which].w;
                rs->read_image_h = r->sets[i].samples[which].h;
            }
        }
        if (!rs->read_image) {
            double f = (double)img / (rs->max_image_w > rs->max_image_h ? rs->max_image_w
                                                                         : rs->max_image_h);
            int oh = (int)(rs->max_image_h * f), ow = (int)(rs->max_image_w * f);
            rs->read_bytes = yc_image_read_bytes(rs->max_image_w, rs->max_image_h,
                                                 oh > 0 ? oh : 1, ow > 0 ? ow : 1, &c->lim);
        }
        if (c->cache == YC_CACHE_RAM)
            for (int i = 0; i < r->nsets; i++)
                if (i == 0 || !c->noval)
                    rs->cache_bytes += yc_img_cache_ram_bytes(&r->sets[i], img);
    }
    if (c->val_full && rs->tile == 0)
        return yc_error_status(YC_EUSAGE, "--val-full needs tiles: --tile SIZE or tile: in the "
                               "dataset yaml");
    if (c->val_full && !c->noval) {
        yc_val_options vo;
        yc_val_options_default(&vo);
        rs->val_full_bytes = yc_val_full_host_bytes(
            m, img, rs->tile, r->have_yaml ? r->y.tile_overlap : 0.2, vo.max_det,
            r->val_w ? r->val_w : rs->max_image_w, r->val_h ? r->val_h : rs->max_image_h,
            YC_SLICE_DECODE_MAX, be->iface->buffer_host_ptr != NULL);
    }
    return YC_OK;
}

/* The plan of the run and its fit into the limit, printed. */
static int plan_and_fit(const plan_cli *c, yc_run_shape *rs, const yc_backend *be)
{
    size_t avail = be->info.mem_free ? be->info.mem_free : be->info.mem_total;
    size_t limit = c->mem ? c->mem : (size_t)(0.9 * (double)avail);
    /* the ranks of one machine share its memory on the CPU backend (as fit_memory in train.c) */
    if (!c->mem && be->iface->buffer_host_ptr && c->per_node > 1)
        limit /= (size_t)c->per_node;
    yc_mem_report r;
    yc_mem_fit fit;
    yc_run_shape fs = *rs;
    fs.batch = c->batch;
    int st = yc_memplan(rs, &r);
    if (st == YC_ENOMEM) {
        /* a tensor of this batch exceeds the device's largest allocation: train runs the batch
         * in the micro-batches the fit picks, so that is the plan shown */
        snprintf(micro_note, sizeof micro_note, "%s", yc_last_error());
        yc_error_clear();
        if ((st = yc_memfit(&fs, limit, (yc_half_policy)c->half, 64, 1024, &fit)))
            return st;
        rs->loader_batch = rs->batch;
        rs->batch = fit.micro_batch;
        rs->val_batch = c->noval ? 0 : 2 * fit.micro_batch;
        rs->half = fit.half;
        rs->recompute = fit.recompute;
        if ((st = yc_memplan(rs, &r)))
            return st;
    } else if (st) {
        return st;
    } else if ((st = yc_memfit(&fs, limit, (yc_half_policy)c->half, 64, 1024, &fit))) {
        yc_mem_report_free(&r);
        return st;
    }
    /* YOLOv5's accumulate is that of the global batch, which the ranks' batches make up */
    if (c->ranks > 1) {
        double a = yc_round_half_even(64.0 / c->global_batch);
        fit.accumulate = a > 1 ? (int)a : 1;
    }
    if (c->json)
        print_json(rs, &r, &fit, limit, be);
    else
        print_text(rs, &r, &fit, limit, be);
    yc_mem_report_free(&r);
    return YC_OK;
}

int yc_cmd_plan(int argc, char **argv)
{
    plan_cli c;
    int st = parse(argc, argv, &c);
    if (st)
        return st == YC_OPT_DONE ? YC_EXIT_OK : st;
    micro_note[0] = '\0';
    plan_run r;
    memset(&r, 0, sizeof r);
    yc_run_shape rs;
    cli = &c;
    /* local rank 0's device and share of the cores, as yolocl train gives it under mpirun */
    int threads = 0;
    if (c.ranks > 1 || strchr(c.device, ',')) {
        /* (whether auto opens a GPU matters only when several ranks share the machine) */
        bool auto_cpu = true, cpu = false;
        if (c.per_node > 1 && strcmp(c.device, "auto") == 0 &&
            yc_device_is_cpu("auto", &auto_cpu)) {
            yc_error_clear(); /* no OpenCL device could be listed: auto is the CPU backend */
            auto_cpu = true;
        }
        c.device_arg = c.device;
        c.auto_gpu = !auto_cpu;
        if ((st = yc_dist_rank_device(c.device, c.auto_gpu, 0, c.per_node, c.rank_device,
                                      sizeof c.rank_device)) ||
            (st = yc_device_is_cpu(c.rank_device, &cpu)))
            return yc_report_failure(st);
        c.device = c.rank_device;
        if (cpu)
            threads = yc_physical_cores() / c.per_node > 0 ? yc_physical_cores() / c.per_node : 1;
        if (!c.workers && c.ranks > 1)
            c.workers = yc_physical_cores() / c.per_node > 0 ? yc_physical_cores() / c.per_node : 1;
    }
    if (!(c.data && (st = open_data(&c, &r)))) {
        yc_model_spec ms = {.cfg = c.cfg, .nc = c.nc, .device = c.device, .announce = !c.json,
                            .use = YC_MODEL_SHAPE, .threads = threads};
        /* every task: a segmentation run's masks and Proto are counted (memplan.h, at
         * segment/train.py's default mask ratio with overlap masks); a classifier is planned as
         * yolocl train fits it */
        st = yc_model_open(&ms, &r.om);
        if (!st) {
            c.half = yc_half_default((yc_half_policy)c.half, r.om.be);
            if (!(st = run_shape(&c, &r, &rs)))
                st = plan_and_fit(&c, &rs, r.om.be);
        }
    }
    plan_run_free(&r);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
