/* The options of yolocl train: defaults, and their JSON for checkpoints, opt.yaml and --resume
 * (see train_opts.h). */
#include "train_opts.h"

#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "image_read.h"
#include "imgcache.h"
#include "json.h"
#include "log.h"
#include "memplan.h"
#include "optim.h"

void yc_train_opts_defaults(yc_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->hyp = "hyp.scratch-low";
    o->epochs = 100;
    o->batch = 16;
    o->imgsz = 640;
    o->optimizer = YC_OPTIM_SGD;
    o->workers = 0;
    o->project = "runs/train";
    o->name = "exp";
    o->device = "auto";
    o->patience = 100;
    o->save_period = -1;
    o->half = YC_HALF_AUTO;
    o->tile = -1;
    o->tile_overlap = -1;
    o->tile_min_area = -1;
    o->mask_ratio = 4;
}

static const char *optim_name(int v)
{
    return yc_optim_kind_name((yc_optim_kind)v);
}

static int optim_parse(const char *s, int *v)
{
    yc_optim_kind k;
    int st = yc_optim_kind_parse(s, &k);
    if (!st)
        *v = (int)k;
    return st;
}

/* null without --cache */
static const char *cache_name(int v)
{
    return v == YC_CACHE_NONE ? NULL : yc_cache_kind_name((yc_cache_kind)v);
}

static int cache_parse(const char *s, int *v)
{
    yc_cache_kind k;
    if (!yc_cache_kind_parse(s, &k))
        return yc_error_status(YC_EUSAGE, "'%s' is not a --cache kind: expected ram or disk", s);
    *v = (int)k;
    return YC_OK;
}

#define OFF(field) offsetof(yc_train_saved, o.field)
#define R YC_FIELD_RESTORE
#define OPT (YC_FIELD_RESTORE | YC_FIELD_OPTIONAL)
#define STR(k_, f_, fl_, def_)                                                                  \
    {.key = k_, .type = YC_FIELD_STR, .offset = OFF(f_), .flags = fl_, .str_def = def_}
#define BOOL(k_, f_, fl_) {.key = k_, .type = YC_FIELD_BOOL, .offset = OFF(f_), .flags = fl_}
#define INT(k_, f_, fl_, lo_, hi_)                                                               \
    {.key = k_, .type = YC_FIELD_INT, .offset = OFF(f_), .flags = fl_, .lo = lo_, .hi = hi_}
#define INT_OR(k_, f_, lo_, hi_, def_)                                                           \
    {.key = k_, .type = YC_FIELD_INT, .offset = OFF(f_), .flags = OPT, .lo = lo_, .hi = hi_,    \
     .def = def_}
#define DOUBLE_OR(k_, f_, lo_, hi_, def_)                                                        \
    {.key = k_, .type = YC_FIELD_DOUBLE, .offset = OFF(f_), .flags = OPT, .lo = lo_, .hi = hi_, \
     .def = def_}

/* Restored by --resume (R): what the run is (train.py restores opt.yaml); written only: the
 * starting weights (the checkpoint holds the model), and where and how it runs (device, workers,
 * --cache, --max-pixels: as given now).  The ranges are the command line's, with the "unset"
 * value accumulate 0, tile_overlap and tile_min_area -1, tiles_per_epoch 0; tiling is absent
 * from checkpoints of runs that had none (whole images). */
const yc_field yc_train_fields[] = {
    STR("data", data, R, NULL),
    STR("cfg", cfg, R, NULL),
    STR("weights", weights, 0, NULL),
    STR("hyp", hyp, R, "hyp.scratch-low"),
    INT("epochs", epochs, R, 1, 1000000),
    INT("batch_size", batch, R, -1, 65536),
    {.key = "micro_batch", .type = YC_FIELD_INT, .offset = offsetof(yc_train_saved, micro_batch)},
    {.key = "world_size", .type = YC_FIELD_INT, .offset = offsetof(yc_train_saved, world_size),
     .flags = YC_FIELD_OPTIONAL, .lo = 1, .hi = 1 << 24, .def = 1},
    INT("imgsz", imgsz, R, 32, 16384),
    INT("accumulate", accumulate, R, 0, 65536),
    BOOL("rect", rect, R),
    BOOL("nosave", nosave, R),
    BOOL("noval", noval, R),
    BOOL("noautoanchor", noautoanchor, R),
    BOOL("noplots", noplots, R),
    BOOL("cos_lr", cos_lr, R),
    BOOL("single_cls", single_cls, R),
    BOOL("multi_scale", multi_scale, R),
    BOOL("image_weights", image_weights, R),
    BOOL("quad", quad, R),
    {.key = "sync_bn", .type = YC_FIELD_BOOL, .offset = OFF(sync_bn), .flags = OPT, .def = 0},
    BOOL("exist_ok", exist_ok, 0),
    {.key = "optimizer", .type = YC_FIELD_ENUM, .offset = OFF(optimizer), .flags = R,
     .enum_name = optim_name, .enum_parse = optim_parse},
    INT("workers", workers, 0, 0, 256),
    STR("project", project, R, "runs/train"),
    STR("name", name, R, "exp"),
    STR("device", device, 0, NULL),
    {.key = "label_smoothing", .type = YC_FIELD_FLOAT, .offset = OFF(label_smoothing), .flags = R,
     .lo = 0, .hi = 1},
    INT("patience", patience, R, 0, 1000000),
    /* classifiers (classify/train.py's opt): the cutoff of a detection --cfg (0: none given) and
     * Classify's dropout; absent from checkpoints of yolocl before classifier resume */
    INT_OR("cutoff", cutoff, 0, 1000, 0),
    {.key = "dropout", .type = YC_FIELD_FLOAT, .offset = OFF(dropout), .flags = OPT, .lo = 0,
     .hi = 1, .def = 0},
    {.key = "freeze", .type = YC_FIELD_INTS, .offset = OFF(freeze), .flags = R, .lo = 0,
     .hi = 10000, .count_offset = OFF(nfreeze), .max_count = YC_MAX_FREEZE},
    INT("save_period", save_period, R, -1, 1000000),
    INT("seed", seed, R, 0, INT_MAX),
    INT_OR("tile", tile, 0, 16384, 0),
    DOUBLE_OR("tile_overlap", tile_overlap, -1, 1, -1),
    DOUBLE_OR("tile_min_area", tile_min_area, -1, 1, -1),
    INT_OR("tiles_per_epoch", tiles_per_epoch, 0, INT_MAX, 0),
    BOOL("val_full", val_full, R),
    {.key = "cache", .type = YC_FIELD_ENUM, .offset = OFF(cache), .enum_name = cache_name,
     .enum_parse = cache_parse},
    {.key = "max_pixels", .type = YC_FIELD_SIZE, .offset = OFF(max_pixels), .lo = 1,
     .hi = (double)((size_t)1 << 40)},
    /* segmentation (absent from the checkpoints of runs before them: the defaults) */
    INT_OR("mask_ratio", mask_ratio, 1, 64, 4),
    {.key = "no_overlap", .type = YC_FIELD_BOOL, .offset = OFF(no_overlap), .flags = OPT},
    {.key = NULL, .type = YC_FIELD_END},
};

char *yc_train_opts_json(const yc_train_opts *o, int micro_batch)
{
    return yc_train_run_json(o, micro_batch, 1);
}

int yc_train_saved_world(const char *json, int *world_size)
{
    *world_size = 1;
    if (!json)
        return YC_OK;
    yc_json *root = NULL;
    int st = yc_json_parse(&root, json, strlen(json));
    if (st)
        return yc_error_context(st, "checkpoint options");
    const yc_json *v = yc_json_get(root, "world_size");
    int64_t n = 1;
    if (v && (yc_json_get_i64(v, &n) || n < 1 || n > (1 << 24)))
        st = yc_error_status(YC_EFORMAT, "checkpoint options: world_size is not a number of "
                             "ranks");
    else
        *world_size = (int)n;
    yc_json_free(root);
    return st;
}

char *yc_train_run_json(const yc_train_opts *o, int micro_batch, int world_size)
{
    yc_train_saved s = {.o = *o, .micro_batch = micro_batch, .world_size = world_size};
    if (!s.o.max_pixels)
        s.o.max_pixels = YC_READ_MAX_PIXELS;
    return yc_fields_to_json(yc_train_fields, &s);
}

/* Restores the options of an interrupted run (train.py --resume restores opt.yaml; the fields
 * not marked R stay as given now). */
int yc_train_opts_from_json(const char *text, yc_train_opts *o, yc_train_opt_strings *keep)
{
    memset(keep, 0, sizeof *keep);
    yc_train_saved s = {.o = *o};
    /* the restored strings in table order: data, cfg, hyp, project, name */
    char *str[5];
    int st = yc_fields_from_json(yc_train_fields, &s, text, "checkpoint options", str, 5);
    if (st)
        return st;
    if (s.o.batch == 0 || (s.o.tile > 0 && s.o.tile < 32) || s.o.tile_overlap >= 1) {
        for (int i = 0; i < 5; i++)
            free(str[i]);
        return yc_error_status(YC_EFORMAT, "checkpoint options: invalid %s",
                               s.o.batch == 0 ? "batch_size 0"
                               : s.o.tile_overlap >= 1 ? "tile_overlap 1"
                                                       : "tile below 32");
    }
    keep->data = str[0];
    keep->cfg = str[1];
    keep->hyp = str[2];
    keep->project = str[3];
    keep->name = str[4];
    *o = s.o;
    return YC_OK;
}

void yc_train_opt_strings_free(yc_train_opt_strings *s)
{
    free(s->data);
    free(s->cfg);
    free(s->hyp);
    free(s->project);
    free(s->name);
    memset(s, 0, sizeof *s);
}
