/* yolocl plan: the memory a training run needs, computed before anything is allocated, and how
 * yolocl would fit it into the device (or --mem). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "dataset.h"
#include "device.h"
#include "image_read.h"
#include "imgcache.h"
#include "loader.h"
#include "json.h"
#include "log.h"
#include "memplan.h"
#include "model.h"
#include "modelcfg.h"
#include "util.h"
#include "val_full.h"

static void print_usage(void)
{
    fputs("Usage: yolocl plan --cfg MODEL [--nc N] [--img 640] [--batch 16] [OPTION]...\n"
          "Print the memory plan of a training run and what yolocl would choose to fit it.\n"
          "\n"
          "  -c, --cfg MODEL       model config (bundled name or yaml path)\n"
          "      --nc N            number of classes (default: the yaml's nc)\n"
          "  -i, --img N           training image size (default 640)\n"
          "  -b, --batch N         images per batch (default 16; -1: the largest that fits)\n"
          "      --half            FP16 storage of activations\n"
          "      --no-half         never FP16 storage (default: on OpenCL devices that can\n"
          "                        store FP16, on the CPU only when needed to fit)\n"
          "      --recompute       recompute SiLU outputs in backward\n"
          "      --mem SIZE        memory limit (default: 90% of the device's free memory)\n"
          "      --optimizer NAME  SGD (default), Adam or AdamW\n"
          "  -j, --workers N       loader threads (default: physical cores)\n"
          "  -d, --data FILE       dataset yaml: its class count, largest image and validation\n"
          "      --max-image WxH   largest dataset image without --data (default IMGxIMG)\n"
          "      --cache [ram]     count the images --cache ram keeps (needs --data)\n"
          "      --max-pixels N    most pixels one image read may decode (default 2^30)\n"
          "      --tile SIZE       tiled training with SIZE x SIZE windows (default: the\n"
          "                        dataset yaml's tile:, else none; 0 = whole images)\n"
          "      --val-full        with tiles: validation per whole image by slices (see\n"
          "                        yolocl-val(1)) in place of the validation loader\n"
          "      --noval           no validation graph\n"
          "      --device D        auto, cpu, opencl, opencl:N or a device name substring\n"
          "      --json            one JSON object for scripts\n"
          "  -h, --help            show this help\n",
          stdout);
}

enum { OPT_NC = 256, OPT_HALF, OPT_NOHALF, OPT_RECOMPUTE, OPT_MEM, OPT_OPTIM, OPT_MAXIMG, OPT_NOVAL, OPT_DEVICE,
       OPT_JSON, OPT_TILE, OPT_VAL_FULL, OPT_CACHE, OPT_MAX_PIXELS };

/* Why the plan shows a micro-batch instead of the requested batch ("" when it does not). */
static char micro_note[1400];

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
           "\"planned_batch\": %d, \"chunks\": [",
           name ? name : "\"\"", rs->imgsz, rs->loader_batch ? rs->loader_batch : rs->batch,
           r->peak_bytes, r->lower_bound_bytes,
           r->device_bytes, r->host_bytes, r->train_plan.arena_bytes,
           r->train_plan.lower_bound_bytes, r->workspace_bytes, fit->micro_batch,
           fit->micro_batches, fit->last_micro, fit->accumulate,
           fit->half ? "true" : "false", fit->recompute ? "true" : "false", fit->peak_bytes, limit,
           dev ? dev : "\"\"", rs->batch);
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

int yc_cmd_plan(int argc, char **argv)
{
    static const char *const cmd = "plan";
    static const struct option opts[] = {
        {"cfg", required_argument, NULL, 'c'},
        {"data", required_argument, NULL, 'd'},
        {"nc", required_argument, NULL, OPT_NC},
        {"img", required_argument, NULL, 'i'},
        {"imgsz", required_argument, NULL, 'i'},
        {"batch", required_argument, NULL, 'b'},
        {"batch-size", required_argument, NULL, 'b'},
        {"half", no_argument, NULL, OPT_HALF},
        {"no-half", no_argument, NULL, OPT_NOHALF},
        {"recompute", no_argument, NULL, OPT_RECOMPUTE},
        {"mem", required_argument, NULL, OPT_MEM},
        {"optimizer", required_argument, NULL, OPT_OPTIM},
        {"workers", required_argument, NULL, 'j'},
        {"max-image", required_argument, NULL, OPT_MAXIMG},
        {"cache", optional_argument, NULL, OPT_CACHE},
        {"max-pixels", required_argument, NULL, OPT_MAX_PIXELS},
        {"tile", required_argument, NULL, OPT_TILE},
        {"val-full", no_argument, NULL, OPT_VAL_FULL},
        {"noval", no_argument, NULL, OPT_NOVAL},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cfg_name = NULL, *device = "auto", *data = NULL;
    int nc = 0, img = 640, batch = 16, workers = 0, c, st;
    int max_w = 0, max_h = 0, tile = -1;
    size_t mem = 0;
    bool json = false, noval = false, recompute = false, val_full = false, cache_ram = false;
    yc_read_limits lim = {0, 0};
    int val_w = 0, val_h = 0;
    yc_half_policy half = YC_HALF_AUTO;
    yc_optim_kind optim = YC_OPTIM_SGD;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:d:i:b:j:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg_name = optarg;
            break;
        case 'd':
            data = optarg;
            break;
        case OPT_NC:
            if ((st = yc_cli_int(cmd, "--nc", optarg, 1, 100000, &nc)))
                return st;
            break;
        case 'i':
            if ((st = yc_cli_int(cmd, "--img", optarg, 32, 16384, &img)))
                return st;
            break;
        case 'b':
            if ((st = yc_cli_int(cmd, "--batch", optarg, -1, 65536, &batch)))
                return st;
            if (batch == 0)
                return yc_usage_error(cmd, "--batch must be positive or -1");
            break;
        case OPT_HALF:
            half = YC_HALF_ON;
            break;
        case OPT_NOHALF:
            half = YC_HALF_OFF;
            break;
        case OPT_RECOMPUTE:
            recompute = true;
            break;
        case OPT_MEM:
            if ((st = yc_cli_size(cmd, "--mem", optarg, &mem)))
                return st;
            break;
        case OPT_OPTIM:
            if (yc_optim_kind_parse(optarg, &optim))
                return yc_usage_error(cmd, "invalid value '%s' for --optimizer: expected SGD, "
                                      "Adam or AdamW", optarg);
            break;
        case 'j':
            if ((st = yc_cli_int(cmd, "--workers", optarg, 1, 256, &workers)))
                return st;
            break;
        case OPT_MAXIMG:
            if (sscanf(optarg, "%dx%d", &max_w, &max_h) != 2 || max_w < 1 || max_h < 1)
                return yc_usage_error(cmd, "invalid value '%s' for --max-image: expected WxH, "
                                      "e.g. 1920x1080", optarg);
            break;
        case OPT_TILE:
            if ((st = yc_cli_int(cmd, "--tile", optarg, 0, 16384, &tile)))
                return st;
            if (tile > 0 && tile < 32)
                return yc_usage_error(cmd, "invalid value '%s' for --tile: expected 0 (whole "
                                      "images) or a window of 32 to 16384 pixels", optarg);
            break;
        case OPT_NOVAL:
            noval = true;
            break;
        case OPT_CACHE: {
            const char *v = optarg;
            if (!v && optind < argc && argv[optind][0] != '-')
                v = argv[optind++];
            yc_cache_kind k;
            if (!yc_cache_kind_parse(v, &k))
                return yc_usage_error(cmd, "invalid value '%s' for --cache: expected ram or disk",
                                      v);
            cache_ram = k == YC_CACHE_RAM;
            break;
        }
        case OPT_MAX_PIXELS:
            if ((st = yc_cli_pixels(cmd, "--max-pixels", optarg, &lim.max_pixels)))
                return st;
            break;
        case OPT_VAL_FULL:
            val_full = true;
            break;
        case OPT_DEVICE:
            device = optarg;
            break;
        case OPT_JSON:
            json = true;
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
    if (cache_ram && !data)
        return yc_usage_error(cmd, "--cache needs --data (the images it would keep)");
    micro_note[0] = '\0';

    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    yc_backend *be = NULL;
    yc_data_yaml y;
    yc_dataset sets[2];
    int nsets = 0;
    bool have_yaml = false;
    if (data) {
        /* what training would scan: the class count, the largest image, the validation set */
        if ((st = yc_data_yaml_load(data, &y)))
            goto done;
        have_yaml = true;
        nc = y.nc;
        for (int i = 0; i < 2; i++) {
            yc_dataset_options dopt = {.nc = y.nc, .quiet = json};
            if ((st = yc_dataset_load_split(&y, i ? YC_SPLIT_VAL : YC_SPLIT_TRAIN, &dopt,
                                            &sets[i])))
                goto done;
            nsets++;
            for (size_t k = 0; k < sets[i].n; k++) {
                max_w = sets[i].samples[k].w > max_w ? sets[i].samples[k].w : max_w;
                max_h = sets[i].samples[k].h > max_h ? sets[i].samples[k].h : max_h;
                if (i == 1) {
                    val_w = sets[i].samples[k].w > val_w ? sets[i].samples[k].w : val_w;
                    val_h = sets[i].samples[k].h > val_h ? sets[i].samples[k].h : val_h;
                }
            }
        }
        noval = noval || sets[1].n == 0;
    }
    if ((st = yc_model_cfg_find(cfg_name, path, sizeof path)) ||
        (st = yc_model_cfg_load(&cfg, path, nc)) || (st = yc_model_new(&m, cfg)) ||
        (st = yc_device_open(device, 0, !json, &be)))
        goto done;
    half = yc_half_default(half, be);
    /* the libraries, the OpenCL drivers the device probe loaded and the dataset index */
    size_t baseline = yc_current_rss();
    m->be = be; /* for workspace queries; nothing is allocated */
    int gs = 32;
    for (int l = 0; l < m->nl; l++)
        gs = m->stride[l] > gs ? (int)m->stride[l] : gs;
    img = (img + gs - 1) / gs * gs;
    yc_run_shape rs = {.m = m, .train = true, .batch = batch > 0 ? batch : 16,
                       .val_batch = noval ? 0 : 2 * (batch > 0 ? batch : 16), .imgsz = img,
                       .half = half == YC_HALF_ON && be->info.fp16_storage,
                       .recompute = recompute,
                       .optimizer = optim,
                       .workers = workers > 0 ? workers : yc_physical_cores(),
                       .max_image_w = max_w ? max_w : img, .max_image_h = max_h ? max_h : img,
                       .tile = tile >= 0 ? tile : have_yaml ? y.tile : 0,
                       .baseline = baseline};
    if (rs.tile == 0) {
        /* whole images: the costliest read of the dataset, else of the --max-image */
        for (int i = 0; i < nsets; i++) {
            long which;
            size_t bytes = yc_loader_read_bytes(&sets[i], img, &lim, &which);
            if (which >= 0 && (!rs.read_image || bytes > rs.read_bytes)) {
                rs.read_bytes = bytes;
                rs.read_image = sets[i].samples[which].image;
                rs.read_image_w = sets[i].samples[which].w;
                rs.read_image_h = sets[i].samples[which].h;
            }
        }
        if (!rs.read_image) {
            double r = (double)img / (rs.max_image_w > rs.max_image_h ? rs.max_image_w
                                                                      : rs.max_image_h);
            int oh = (int)(rs.max_image_h * r), ow = (int)(rs.max_image_w * r);
            rs.read_bytes = yc_image_read_bytes(rs.max_image_w, rs.max_image_h, oh > 0 ? oh : 1,
                                                ow > 0 ? ow : 1, &lim);
        }
        if (cache_ram)
            for (int i = 0; i < nsets; i++)
                if (i == 0 || !noval)
                    rs.cache_bytes += yc_img_cache_ram_bytes(&sets[i], img);
    }
    if (val_full && rs.tile == 0) {
        st = yc_error_status(YC_EUSAGE, "--val-full needs tiles: --tile SIZE or tile: in the "
                             "dataset yaml");
        goto done;
    }
    if (val_full && !noval) {
        yc_val_options vo;
        yc_val_options_default(&vo);
        rs.val_full_bytes = yc_val_full_host_bytes(
            m, img, rs.tile, have_yaml ? y.tile_overlap : 0.2, vo.max_det,
            val_w ? val_w : rs.max_image_w, val_h ? val_h : rs.max_image_h, YC_SLICE_DECODE_MAX,
            be->iface->buffer_host_ptr != NULL);
    }
    size_t avail = be->info.mem_free ? be->info.mem_free : be->info.mem_total;
    size_t limit = mem ? mem : (size_t)(0.9 * (double)avail);
    yc_mem_report r;
    yc_mem_fit fit;
    yc_run_shape fs = rs;
    fs.batch = batch;
    st = yc_memplan(&rs, &r);
    if (st == YC_ENOMEM) {
        /* a tensor of this batch exceeds the device's largest allocation: train runs the batch
         * in the micro-batches the fit picks, so that is the plan shown */
        snprintf(micro_note, sizeof micro_note, "%s", yc_last_error());
        yc_error_clear();
        if ((st = yc_memfit(&fs, limit, half, 64, 1024, &fit)))
            goto done;
        rs.loader_batch = rs.batch;
        rs.batch = fit.micro_batch;
        rs.val_batch = noval ? 0 : 2 * fit.micro_batch;
        rs.half = fit.half;
        rs.recompute = fit.recompute;
        if ((st = yc_memplan(&rs, &r)))
            goto done;
    } else if (st) {
        goto done;
    } else if ((st = yc_memfit(&fs, limit, half, 64, 1024, &fit))) {
        yc_mem_report_free(&r);
        goto done;
    }
    if (json)
        print_json(&rs, &r, &fit, limit, be);
    else
        print_text(&rs, &r, &fit, limit, be);
    yc_mem_report_free(&r);
done:
    for (int i = 0; i < nsets; i++)
        yc_dataset_free(&sets[i]);
    if (have_yaml)
        yc_data_yaml_free(&y);
    if (m)
        m->be = NULL;
    yc_model_free(m);
    yc_backend_free(be);
    return st ? yc_report_failure(st) : YC_EXIT_OK;
}
