/* The batch loader (see loader.h).
 *
 * Threads claim batch numbers in order; batch k goes to slot k % nslots once the consumer has
 * released batch k - nslots.  The consumer takes batches strictly in order, so the sequence of
 * batches never depends on thread timing.  Starting an epoch bumps a generation counter and
 * waits for in-flight builds to finish, so no stale batch can land in a slot. */
#include "loader.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "log.h"
#include "quad.h"
#include "rng.h"

typedef struct slot {
    yc_batch b;
    /* batch number this slot holds when ready, -1 otherwise */
    int ready;
    /* pixel and target capacities */
    size_t cap_images;
    int cap_targets, cap_images_n;
    /* mask floats allocated at b.masks */
    size_t cap_masks;
} slot;

typedef struct worker {
    yc_loader *l;
    pthread_t thread;
    bool started;
    yc_aug_scratch scratch;
    /* segmentation samples (opt.masks): their own scratch (the masks of the sample built) */
    yc_seg_scratch seg;
    yc_labels labels;
    /* tiles: the reader, and the windows of the batch being built: store_n windows read ahead
     * (store[i] holds tile store_tile[i]; batch entries allocated), the batch's tiles as the
     * mosaic partners' pool, and the read order */
    yc_tile_reader *reader;
    yc_image *store;
    int *store_tile;
    int store_n;
    int *pool;
    int *read_order;
    /* the sample whose image failed to load in the sample being built (-1: none) */
    int failed;
} worker;

struct yc_loader {
    yc_loader_options opt;
    const yc_dataset *ds; /* the samples: opt.ds, or the tile set's view */
    int total;         /* samples in ds */
    int n;             /* samples per epoch (this rank's shard when sharded) */
    int epoch_n;       /* samples per epoch over all ranks */
    int *shard;        /* sharded: scratch for this rank's positions */
    int nbatches;
    int *order;        /* epoch order: positions -> dataset indices */
    int *pool;         /* image-weights pool for the mosaic partners (NULL: all) */
    yc_rect_batches rb;
    bool have_rb;
    uint64_t epoch_seed;

    pthread_mutex_t mu;
    pthread_cond_t cv; /* any state change */
    bool stop, active;
    int generation;
    int next_claim, next_consume, released, busy;
    bool outstanding;

    int nslots;
    slot *slots;
    int nworkers;
    worker *workers;
    /* per sample: its image (or window) failed to load, so it is skipped from then on; per image
     * of opt.ds: the failure was reported */
    atomic_uchar *bad, *warned;
    /* --cache (whole images only), or NULL */
    yc_img_cache *cache;
    /* segmentation batches: the masks' ratio and format (opt.masks) */
    yc_mask_params mask;
};

/* Replacement draws for a training sample whose images cannot be loaded. */
#define MAX_REPLACEMENTS 16

/* splitmix64: decorrelates (seed, epoch) into one generator seed. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* yc_sample_loader: image `index` resized as load_image, and its labels in xywhn. */
/* A sample known to fail: fails at once (the reason was reported with the first failure). */
static int known_bad(worker *wk, int index)
{
    const yc_loader *l = wk->l;
    if (!atomic_load_explicit(&l->bad[index], memory_order_relaxed))
        return YC_OK;
    wk->failed = index;
    return yc_error_status(YC_EIO, "%s failed to load before", l->ds->samples[index].image);
}

static int load_cb(void *ctx, int index, bool augment, yc_image *img, yc_image *tmp,
                   yc_load_info *info, yc_labels *labels)
{
    worker *wk = ctx;
    const yc_loader *l = wk->l;
    const yc_dataset *ds = l->opt.ds;
    const yc_sample *s = &ds->samples[index];
    int status = known_bad(wk, index);
    if (status)
        return status;
    bool cached = false, use_cache = l->cache && augment == l->opt.train;
    uint64_t fp = use_cache ? yc_img_cache_fingerprint(s->image) : 0;
    if (use_cache && (status = yc_img_cache_get(l->cache, (size_t)index, fp, img, info, &cached)))
        return status;
    if (!cached) {
        yc_read_info ri;
        status = yc_load_image_limited(s->image, l->opt.imgsz, augment, &l->opt.limits, tmp, img,
                                       info, &ri);
        if (status && ri.too_large) {
            char why[1024];
            snprintf(why, sizeof why, "%s", yc_last_error());
            status = yc_error_status(status, "%s: %s on windows of it with --tile SIZE (or "
                                     "raise --max-pixels)", why,
                                     l->opt.train ? "train" : "validate");
        }
        if (status) {
            if (status != YC_ENOMEM)
                wk->failed = index;
            return status;
        }
        if (use_cache)
            yc_img_cache_put(l->cache, (size_t)index, fp, img, info);
    }
    labels->n = 0;
    if ((status = yc_labels_reserve(labels, (int)s->n_boxes)))
        return status;
    const yc_box *b = yc_dataset_boxes(ds, (size_t)index);
    for (uint32_t i = 0; i < s->n_boxes; i++)
        if ((status = yc_labels_push(labels, (float)b[i].cls, b[i].x, b[i].y, b[i].w, b[i].h)))
            return status;
    return YC_OK;
}

/* yc_seg_sample_loader: load_cb, and the polygons of the image's labels. */
static int seg_load_cb(void *ctx, int index, bool augment, yc_image *img, yc_image *tmp,
                       yc_load_info *info, yc_labels *labels, yc_segs *segs)
{
    worker *wk = ctx;
    const yc_dataset *ds = wk->l->opt.ds;
    int status = load_cb(ctx, index, augment, img, tmp, info, labels);
    if (status)
        return status;
    segs->n = 0;
    segs->npts = 0;
    const yc_polygon *pg = yc_dataset_polygons(ds, (size_t)index);
    for (uint32_t i = 0; i < ds->samples[index].n_boxes && !status; i++)
        status = yc_segs_push_f32(segs, ds->points + 2 * pg[i].first, pg[i].n);
    return status;
}

/* The sample at epoch position pos: the rect order in validation, else the epoch's order. */
static int sample_at(const yc_loader *l, int pos)
{
    return l->have_rb && !l->opt.train ? (int)l->rb.order[pos] : l->order[pos];
}

/* The window of tile t this epoch: the grid window, jittered in training with draws seeded by the
 * epoch and the tile (the same window whenever the tile is read during the epoch). */
static yc_tile_window tile_window(const yc_loader *l, int t)
{
    const yc_tileset *ts = l->opt.tiles;
    if (!l->opt.train)
        return ts->tiles[t].win;
    yc_rng rng;
    yc_rng_seed(&rng, mix64(l->epoch_seed ^ 0x711E5ull), (uint64_t)t);
    double u = yc_rng_uniform(&rng);
    double v = yc_rng_uniform(&rng);
    return yc_tileset_jitter(ts, (size_t)t, u, v);
}

/* yc_sample_loader for tiles: the window of tile `index` (read ahead for the batch, or read now
 * into tmp) resized as load_image resizes an image, and the image's labels clipped to it. */
static int tile_load_cb(void *ctx, int index, bool augment, yc_image *img, yc_image *tmp,
                        yc_load_info *info, yc_labels *labels)
{
    worker *wk = ctx;
    const yc_loader *l = wk->l;
    const yc_tileset *ts = l->opt.tiles;
    const yc_tile_ref *r = &ts->tiles[index];
    const yc_sample *s = &ts->ds->samples[r->sample];
    yc_tile_window win = tile_window(l, index);
    const yc_image *src = NULL;
    for (int i = 0; i < wk->store_n && !src; i++)
        if (wk->store_tile[i] == index)
            src = &wk->store[i];
    int status = known_bad(wk, index);
    if (status)
        return status;
    if (!src) {
        if ((status = yc_tile_reader_read(wk->reader, s->image, s->w, s->h, win, tmp))) {
            if (status != YC_ENOMEM)
                wk->failed = index;
            return status;
        }
        src = tmp;
    }
    if ((status = yc_load_resize(src, l->opt.imgsz, augment, img, info)))
        return status;
    labels->n = 0;
    return yc_tileset_labels(ts, (size_t)index, win, labels);
}

/* Reads the windows of the `count` tiles at epoch positions first.. into the worker's store,
 * sorted by image and top row.  A window that cannot be read is left out of the store: the
 * sample reads it again and reports the error. */
static int prefetch_tiles(worker *wk, int first, int count)
{
    const yc_loader *l = wk->l;
    const yc_tileset *ts = l->opt.tiles;
    wk->store_n = 0;
    for (int i = 0; i < count; i++) {
        wk->pool[i] = sample_at(l, first + i);
        wk->read_order[i] = wk->pool[i];
    }
    /* insertion sort by (image, top row, left column): batches are small */
    for (int i = 1; i < count; i++) {
        int t = wk->read_order[i], j = i - 1;
        yc_tile_window wt = tile_window(l, t);
        while (j >= 0) {
            int u = wk->read_order[j];
            yc_tile_window wu = tile_window(l, u);
            uint32_t st = ts->tiles[t].sample, su = ts->tiles[u].sample;
            bool before = st < su || (st == su && (wt.y < wu.y || (wt.y == wu.y && wt.x < wu.x)));
            if (!before)
                break;
            wk->read_order[j + 1] = u;
            j--;
        }
        wk->read_order[j + 1] = t;
    }
    for (int i = 0; i < count; i++) {
        int t = wk->read_order[i];
        if (atomic_load_explicit(&l->bad[t], memory_order_relaxed))
            continue;
        const yc_sample *s = &ts->ds->samples[ts->tiles[t].sample];
        int st = yc_tile_reader_read(wk->reader, s->image, s->w, s->h, tile_window(l, t),
                                     &wk->store[wk->store_n]);
        if (st == YC_ENOMEM)
            return st;
        if (st) {
            yc_error_clear();
            continue;
        }
        wk->store_tile[wk->store_n++] = t;
    }
    return YC_OK;
}

static int ensure_capacity(slot *s, int n, int h, int w, int nt)
{
    size_t need = (size_t)n * 3 * (size_t)h * (size_t)w;
    if (need > s->cap_images) {
        uint8_t *p = yc_realloc(s->b.images, need, "batch images");
        if (!p)
            return YC_ENOMEM;
        s->b.images = p;
        s->cap_images = need;
    }
    if (n > s->cap_images_n) {
        int *sm = yc_realloc(s->b.sample, (size_t)n * sizeof *sm, "batch");
        if (!sm)
            return YC_ENOMEM;
        s->b.sample = sm;
        yc_val_info *vi = yc_realloc(s->b.info, (size_t)n * sizeof *vi, "batch");
        if (!vi)
            return YC_ENOMEM;
        s->b.info = vi;
        s->cap_images_n = n;
    }
    if (nt > s->cap_targets) {
        int cap = s->cap_targets ? s->cap_targets : 64;
        while (cap < nt)
            cap *= 2;
        float *t = yc_realloc(s->b.targets, (size_t)cap * 6 * sizeof *t, "batch targets");
        if (!t)
            return YC_ENOMEM;
        s->b.targets = t;
        s->cap_targets = cap;
    }
    return YC_OK;
}

/* Flags the sample that made the last attempt fail (the failing image, which may be a mosaic
 * partner, else the sample itself) and warns once per image. */
static void report_failure(worker *wk, int index)
{
    yc_loader *l = wk->l;
    const yc_loader_options *o = &l->opt;
    int bad = wk->failed >= 0 ? wk->failed : index;
    if (atomic_exchange(&l->bad[bad], 1))
        return;
    int image = o->tiles ? (int)o->tiles->tiles[bad].sample : bad;
    if (atomic_exchange(&l->warned[image], 1))
        return;
    const char *then = o->train ? "replacement samples take its place"
                                : "left out of the validation";
    if (o->tiles) {
        const yc_tile_window *tw = &o->tiles->tiles[bad].win;
        yc_warn("skipping tile %d (%dx%d at %d,%d) of %s and any other of its tiles that fails: "
                "%s; %s", bad, tw->w, tw->h, tw->x, tw->y, l->ds->samples[bad].image,
                yc_last_error(), then);
    } else {
        yc_warn("skipping %s from now on: %s; %s", l->ds->samples[bad].image, yc_last_error(),
                then);
    }
}

/* A training sample for epoch position pos in place of one that failed (attempt >= 1): drawn
 * from the epoch's samples with a generator seeded by the epoch, the position and the attempt,
 * so the replacement does not depend on thread timing. */
static int replacement(const yc_loader *l, int pos, int attempt)
{
    yc_rng rng;
    yc_rng_seed(&rng, mix64(l->epoch_seed ^ 0x5EB1ACEull),
                (uint64_t)pos * (MAX_REPLACEMENTS + 1) + (uint64_t)attempt);
    return sample_at(l, (int)yc_rng_below(&rng, (uint32_t)l->n));
}

/* Builds the sample of epoch position pos into chw and wk->labels (validation: with *vi).  A
 * sample whose image (or a mosaic partner's) cannot be loaded is skipped with a warning; in
 * training a replacement sample is drawn in its place, up to MAX_REPLACEMENTS times.  Returns
 * YC_OK with the sample used in *used, YC_ENOMEM, or YC_EIO when no sample could be built. */
static int build_sample(worker *wk, const yc_sample_params *sp, yc_sample_loader load, int pos,
                        int h, int w, uint8_t *chw, yc_val_info *vi, int *used)
{
    yc_loader *l = wk->l;
    const yc_loader_options *o = &l->opt;
    int index = sample_at(l, pos);
    for (int attempt = 0; attempt <= (o->train ? MAX_REPLACEMENTS : 0); attempt++) {
        if (attempt > 0)
            index = replacement(l, pos, attempt);
        wk->labels.n = 0;
        wk->failed = -1;
        int status;
        if (o->train) {
            yc_rng rng;
            yc_rng_seed(&rng, attempt ? mix64(l->epoch_seed + (uint64_t)attempt) : l->epoch_seed,
                        (uint64_t)pos);
            int oh, ow;
            if (o->masks)
                status = yc_seg_train_sample(&wk->seg, sp, &l->mask, index, seg_load_cb, wk, &rng,
                                             chw, &oh, &ow, &wk->labels);
            else
                status = yc_train_sample(&wk->scratch, sp, index, load, wk, &rng, chw, &oh, &ow,
                                         &wk->labels);
            if (!status && (oh != h || ow != w))
                status = yc_error_status(YC_ERR, "internal: sample %dx%d in a %dx%d batch", oh, ow,
                                         h, w);
        } else if (o->masks) {
            status = yc_seg_val_sample(&wk->seg, &l->mask, index, h, w, seg_load_cb, wk, chw,
                                       &wk->labels, vi);
        } else {
            status = yc_val_sample(&wk->scratch, index, h, w, load, wk, chw, &wk->labels, vi);
        }
        if (status == YC_ENOMEM)
            return status;
        if (!status) {
            *used = index;
            return YC_OK;
        }
        report_failure(wk, index);
    }
    if (o->train)
        yc_warn("no sample could be built for position %d of the epoch after %d replacements: "
                "the batch is one image short", pos, MAX_REPLACEMENTS);
    return YC_EIO;
}

/* Makes room for n floats of masks in slot s. */
static int ensure_masks(slot *s, size_t n)
{
    if (n <= s->cap_masks)
        return YC_OK;
    size_t cap = s->cap_masks ? s->cap_masks : n;
    while (cap < n)
        cap *= 2;
    float *p = yc_realloc(s->b.masks, cap * sizeof *p, "batch masks");
    if (!p)
        return YC_ENOMEM;
    s->b.masks = p;
    s->cap_masks = cap;
    return YC_OK;
}

/* Appends the masks of the sample just built (wk->seg) to the batch: one map per image
 * (overlap) or one mask per target. */
static int add_masks(worker *wk, slot *s)
{
    yc_batch *b = &s->b;
    const yc_seg_scratch *g = &wk->seg;
    size_t m = (size_t)g->mask_h * (size_t)g->mask_w;
    if (g->mask_h != b->mask_h || g->mask_w != b->mask_w)
        return yc_error_status(YC_ERR, "internal: %dx%d masks in a batch of %dx%d masks",
                               g->mask_w, g->mask_h, b->mask_w, b->mask_h);
    int status = ensure_masks(s, ((size_t)b->mask_n + (size_t)g->mask_n) * m);
    if (status)
        return status;
    memcpy(b->masks + (size_t)b->mask_n * m, g->masks, (size_t)g->mask_n * m * sizeof *b->masks);
    b->mask_n += g->mask_n;
    return YC_OK;
}

/* Builds batch k into slot s.  Images that fail are skipped with a warning (training: replaced,
 * see build_sample). */
static int build_batch(worker *wk, int k, slot *s)
{
    yc_loader *l = wk->l;
    const yc_loader_options *o = &l->opt;
    int first = k * o->batch, count = o->batch;
    if (first + count > l->n)
        count = l->n - first;
    yc_sample_loader load = o->tiles ? tile_load_cb : load_cb;
    int h = o->imgsz, w = o->imgsz;
    if (l->have_rb) {
        h = l->rb.hw[2 * k];
        w = l->rb.hw[2 * k + 1];
    }
    /* quad: room for the 4 images a group's output takes even in a short last batch */
    int status = ensure_capacity(s, o->quad && count < 4 ? 4 : count, h, w, 0);
    if (status)
        return status;
    yc_sample_params sp = {.hyp = o->hyp, .imgsz = o->imgsz, .n = l->total, .pool = l->pool,
                           .pool_n = l->pool ? l->n : 0};
    if (o->tiles) {
        if ((status = prefetch_tiles(wk, first, count)))
            return status;
        sp.pool = wk->pool;
        sp.pool_n = count;
    }
    if (o->train && o->rect) {
        sp.rect_h = h;
        sp.rect_w = w;
    }
    yc_batch *b = &s->b;
    b->index = k;
    b->h = h;
    b->w = w;
    b->n = 0;
    b->nt = 0;
    b->mask_n = 0;
    b->mask_h = o->masks ? h / l->mask.ratio : 0;
    b->mask_w = o->masks ? w / l->mask.ratio : 0;
    size_t plane = 3 * (size_t)h * (size_t)w;
    for (int i = 0; i < count; i++) {
        int index;
        uint8_t *chw = b->images + (size_t)b->n * plane;
        status = build_sample(wk, &sp, load, first + i, h, w, chw, &b->info[b->n], &index);
        if (status == YC_ENOMEM)
            return status;
        if (status)
            continue;
        if ((status = ensure_capacity(s, count, h, w, b->nt + wk->labels.n)))
            return status;
        if (o->masks && (status = add_masks(wk, s)))
            return status;
        for (int j = 0; j < wk->labels.n; j++) {
            float *t = b->targets + (size_t)(b->nt + j) * 6;
            t[0] = (float)b->n;
            memcpy(t + 1, wk->labels.v + (size_t)j * 5, 5 * sizeof(float));
        }
        b->nt += wk->labels.n;
        b->sample[b->n] = index;
        b->n++;
    }
    if (o->quad && o->train && b->n > 0) {
        yc_rng rng;
        yc_rng_seed(&rng, mix64(l->epoch_seed ^ 0x90AD0000ull), (uint64_t)k);
        return yc_quad_collate(b, &rng);
    }
    return YC_OK;
}

static void *worker_main(void *arg)
{
    worker *wk = arg;
    yc_loader *l = wk->l;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->stop)
            break;
        if (!l->active || l->next_claim >= l->nbatches ||
            l->next_claim >= l->released + l->nslots) {
            pthread_cond_wait(&l->cv, &l->mu);
            continue;
        }
        int k = l->next_claim++, gen = l->generation;
        slot *s = &l->slots[k % l->nslots];
        l->busy++;
        pthread_mutex_unlock(&l->mu);
        int status = build_batch(wk, k, s);
        if (status) {
            yc_warn("batch %d could not be built: %s", k, yc_last_error());
            s->b.n = 0;
            s->b.nt = 0;
            s->b.mask_n = 0;
            s->b.index = k;
        }
        pthread_mutex_lock(&l->mu);
        l->busy--;
        if (gen == l->generation)
            s->ready = k;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int yc_loader_new(yc_loader **out, const yc_loader_options *opt)
{
    *out = NULL;
    if (!opt->ds || opt->ds->n == 0)
        return yc_error_status(YC_EFORMAT, "the dataset has no usable images");
    if (opt->batch < 1 || opt->workers < 1 || opt->imgsz < 32)
        return yc_error_status(YC_EUSAGE, "loader: batch %d, workers %d, image size %d", opt->batch,
                               opt->workers, opt->imgsz);
    if (opt->world > 1 && (opt->rank < 0 || opt->rank >= opt->world || !opt->train ||
                           (opt->rect && !opt->tiles)))
        return yc_error_status(YC_EUSAGE, "loader: rank %d of %d%s", opt->rank, opt->world,
                               opt->train ? " with rectangular batches (not supported with "
                                            "several ranks)" : " for validation");
    if (opt->masks && !opt->ds->has_polygons)
        return yc_error_status(YC_EFORMAT, "the dataset has no polygon labels (class x1 y1 x2 y2 "
                               "... per line): segmentation needs them");
    if (opt->masks && opt->tiles)
        return yc_error_status(YC_EUSAGE, "segmentation does not train or validate on tiles "
                               "(--tile): use whole images");
    if (opt->masks && opt->quad && opt->train)
        return yc_error_status(YC_EUSAGE, "--quad is not supported with segmentation (YOLOv5's "
                               "segment loader has no quad collate)");
    if (opt->masks && (opt->mask_ratio < 0 || opt->mask_ratio > 64 ||
                       opt->stride % (opt->mask_ratio ? opt->mask_ratio : 4) != 0 ||
                       opt->imgsz % (opt->mask_ratio ? opt->mask_ratio : 4) != 0))
        return yc_error_status(YC_EUSAGE, "mask ratio %d must divide the image size %d and the "
                               "stride %d", opt->mask_ratio, opt->imgsz, opt->stride);
    if (opt->tiles && opt->tiles->ds != opt->ds)
        return yc_error_status(YC_EUSAGE, "loader: the tiles were made from another dataset");
    if (opt->tiles && opt->tiles->n > (size_t)INT_MAX)
        return yc_error_status(YC_EUSAGE, "loader: %zu tiles (at most %d)", opt->tiles->n,
                               INT_MAX);
    yc_loader *l = yc_calloc(1, sizeof *l, "loader");
    if (!l)
        return YC_ENOMEM;
    l->opt = *opt;
    l->ds = opt->tiles ? &opt->tiles->view : opt->ds;
    l->mask.ratio = opt->mask_ratio ? opt->mask_ratio : 4;
    l->mask.overlap = !opt->no_overlap;
    if (opt->tiles && opt->train)
        l->opt.rect = false;
    l->total = (int)l->ds->n;
    l->n = l->total;
    if (opt->tiles && opt->train && opt->tiles_per_epoch > 0 && opt->tiles_per_epoch < l->total)
        l->n = opt->tiles_per_epoch;
    /* the whole epoch's samples, and this rank's share of them (DistributedSampler: ceil) */
    l->epoch_n = l->n;
    if (opt->world > 1)
        l->n = (l->epoch_n + opt->world - 1) / opt->world;
    l->nbatches = (l->n + opt->batch - 1) / opt->batch;
    /* one batch per thread being built plus the one the step holds */
    l->nslots = opt->workers + 1;
    l->nworkers = opt->workers;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->order = yc_malloc((size_t)l->total * sizeof *l->order, "loader");
    l->shard = opt->world > 1 ? yc_malloc((size_t)l->n * sizeof *l->shard, "loader shard") : NULL;
    l->slots = yc_calloc((size_t)l->nslots, sizeof *l->slots, "loader");
    l->workers = yc_calloc((size_t)l->nworkers, sizeof *l->workers, "loader");
    l->bad = yc_calloc((size_t)l->total, sizeof *l->bad, "loader");
    l->warned = yc_calloc(opt->ds->n, sizeof *l->warned, "loader");
    int status = l->order && l->slots && l->workers && l->bad && l->warned &&
                         (opt->world <= 1 || l->shard)
                     ? YC_OK
                     : YC_ENOMEM;
    if (!status && (l->opt.rect || !opt->train)) {
        status = yc_dataset_rect_batches(l->ds, opt->batch, opt->imgsz, opt->stride,
                                         opt->train ? 0.0 : opt->pad, &l->rb);
        l->have_rb = status == YC_OK;
    }
    /* every slot is sized now for the largest batch shape, so none grows during training */
    int max_h = opt->imgsz, max_w = opt->imgsz;
    for (int k = 0; l->have_rb && k < l->nbatches; k++) {
        max_h = l->rb.hw[2 * k] > max_h ? l->rb.hw[2 * k] : max_h;
        max_w = l->rb.hw[2 * k + 1] > max_w ? l->rb.hw[2 * k + 1] : max_w;
    }
    for (int i = 0; !status && i < l->nslots; i++) {
        l->slots[i].ready = -1;
        status = ensure_capacity(&l->slots[i], opt->batch, max_h, max_w, 64 * opt->batch);
        /* overlap masks: one map per image, the most a batch takes */
        if (!status && opt->masks)
            status = ensure_masks(&l->slots[i], (size_t)opt->batch * (size_t)(max_h / l->mask.ratio)
                                                    * (size_t)(max_w / l->mask.ratio));
    }
    yc_vips_init();
    if (!status && !opt->tiles && opt->cache != YC_CACHE_NONE)
        status = yc_img_cache_new(&l->cache, opt->cache, opt->ds, opt->imgsz, opt->train,
                                  opt->cache_dir);
    for (int i = 0; !status && opt->tiles && i < l->nworkers; i++) {
        worker *wk = &l->workers[i];
        wk->store = yc_calloc((size_t)opt->batch, sizeof *wk->store, "tile windows");
        wk->store_tile = yc_malloc((size_t)opt->batch * sizeof *wk->store_tile, "tile windows");
        wk->pool = yc_malloc((size_t)opt->batch * sizeof *wk->pool, "tile windows");
        wk->read_order = yc_malloc((size_t)opt->batch * sizeof *wk->read_order, "tile windows");
        status = wk->store && wk->store_tile && wk->pool && wk->read_order ? YC_OK : YC_ENOMEM;
        if (!status)
            status = yc_tile_reader_new(&wk->reader, opt->tiles->opt.tile,
                                        opt->tile_decode_max == 0  ? YC_SLICE_DECODE_MAX
                                        : opt->tile_decode_max < 0 ? 0
                                                                   : opt->tile_decode_max);
    }
    for (int i = 0; !status && i < l->nworkers; i++) {
        l->workers[i].l = l;
        if (pthread_create(&l->workers[i].thread, NULL, worker_main, &l->workers[i]) != 0)
            status = yc_error_status(YC_ERR, "cannot start loader thread %d", i);
        else
            l->workers[i].started = true;
    }
    if (status) {
        yc_loader_free(l);
        return status;
    }
    *out = l;
    return YC_OK;
}

void yc_loader_free(yc_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; l->workers && i < l->nworkers; i++) {
        if (l->workers[i].started)
            pthread_join(l->workers[i].thread, NULL);
        worker *wk = &l->workers[i];
        yc_aug_scratch_free(&wk->scratch);
        yc_seg_scratch_free(&wk->seg);
        yc_labels_free(&wk->labels);
        yc_tile_reader_free(wk->reader);
        for (int j = 0; wk->store && j < l->opt.batch; j++)
            yc_image_free(&wk->store[j]);
        free(wk->store);
        free(wk->store_tile);
        free(wk->pool);
        free(wk->read_order);
    }
    for (int i = 0; l->slots && i < l->nslots; i++) {
        free(l->slots[i].b.images);
        free(l->slots[i].b.targets);
        free(l->slots[i].b.sample);
        free(l->slots[i].b.info);
        free(l->slots[i].b.masks);
    }
    if (l->have_rb)
        yc_rect_batches_free(&l->rb);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l->workers);
    free(l->slots);
    free(l->order);
    free(l->shard);
    free(l->pool);
    free(l->bad);
    free(l->warned);
    yc_img_cache_free(l->cache);
    free(l);
}

int yc_loader_nbatches(const yc_loader *l)
{
    return l->nbatches;
}

yc_tile_reader_stats yc_loader_tile_stats(yc_loader *l)
{
    yc_tile_reader_stats sum = {0, 0, 0};
    pthread_mutex_lock(&l->mu);
    while (l->busy > 0)
        pthread_cond_wait(&l->cv, &l->mu);
    for (int i = 0; i < l->nworkers; i++) {
        if (!l->workers[i].reader)
            continue;
        yc_tile_reader_stats st = yc_tile_reader_get_stats(l->workers[i].reader);
        sum.opens += st.opens;
        sum.windows += st.windows;
        sum.rewinds += st.rewinds;
    }
    pthread_mutex_unlock(&l->mu);
    return sum;
}

yc_img_cache_stats yc_loader_cache_stats(yc_loader *l)
{
    yc_img_cache_stats st = {0, 0, 0};
    pthread_mutex_lock(&l->mu);
    while (l->busy > 0)
        pthread_cond_wait(&l->cv, &l->mu);
    if (l->cache)
        st = yc_img_cache_get_stats(l->cache);
    pthread_mutex_unlock(&l->mu);
    return st;
}

const char *yc_loader_cache_dir(const yc_loader *l)
{
    return l->cache ? yc_img_cache_dir(l->cache) : NULL;
}

size_t yc_loader_read_bytes(const yc_dataset *ds, int imgsz, const yc_read_limits *lim,
                            long *which)
{
    size_t most = 0;
    *which = -1;
    for (size_t i = 0; i < ds->n; i++) {
        int h, w;
        yc_interp interp;
        yc_load_size(ds->samples[i].h, ds->samples[i].w, imgsz, true, &h, &w, &interp);
        size_t b = yc_image_read_bytes(ds->samples[i].w, ds->samples[i].h, h, w, lim);
        if (*which < 0 || b > most) {
            most = b;
            *which = (long)i;
        }
    }
    return most;
}

int yc_loader_start(yc_loader *l, int epoch, const int *indices, int first)
{
    if (indices && l->opt.tiles)
        return yc_error_status(YC_EUSAGE, "loader: image weights do not apply to tiles");
    pthread_mutex_lock(&l->mu);
    l->active = false;
    l->generation++;
    while (l->busy > 0)
        pthread_cond_wait(&l->cv, &l->mu);
    for (int i = 0; i < l->nslots; i++)
        l->slots[i].ready = -1;
    l->epoch_seed = mix64(l->opt.seed ^ mix64((uint64_t)epoch + 1));
    const yc_loader_options *o = &l->opt;
    free(l->pool);
    l->pool = NULL;
    if (indices) {
        l->pool = yc_malloc((size_t)l->n * sizeof *l->pool, "loader");
        if (!l->pool) {
            pthread_mutex_unlock(&l->mu);
            return YC_ENOMEM;
        }
        memcpy(l->pool, indices, (size_t)l->n * sizeof *l->pool);
    }
    for (int i = 0; i < l->total; i++)
        l->order[i] = indices ? indices[i] : i;
    if (o->train && o->rect && l->have_rb) {
        for (int i = 0; i < l->n; i++)
            l->order[i] = (int)l->rb.order[i];
    } else if (o->train && !indices) {
        /* Fisher-Yates with the epoch's generator (over all tiles: the epoch's subset is the
         * first n) */
        yc_rng rng;
        yc_rng_seed(&rng, l->epoch_seed, 0xE90C5ull);
        for (int i = l->total - 1; i > 0; i--) {
            int j = (int)yc_rng_below(&rng, (uint32_t)i + 1);
            int t = l->order[i];
            l->order[i] = l->order[j];
            l->order[j] = t;
        }
    }
    if (o->world > 1) {
        /* this rank's shard of the epoch's first epoch_n samples, then its own augmentation
         * streams (the shuffle above used the seed common to all ranks) */
        for (int i = 0; i < l->n; i++)
            l->shard[i] = l->order[(o->rank + (long)i * o->world) % l->epoch_n];
        memcpy(l->order, l->shard, (size_t)l->n * sizeof *l->order);
        if (o->rank > 0)
            l->epoch_seed = mix64(l->epoch_seed ^ mix64(0xD157000000ull + (uint64_t)o->rank));
    }
    if (first < 0 || first > l->nbatches)
        first = l->nbatches;
    l->next_claim = l->next_consume = l->released = first;
    l->outstanding = false;
    l->active = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return YC_OK;
}

int yc_loader_next(yc_loader *l, const yc_batch **out)
{
    *out = NULL;
    pthread_mutex_lock(&l->mu);
    if (!l->active) {
        pthread_mutex_unlock(&l->mu);
        return yc_error_status(YC_ERR, "internal: loader epoch not started");
    }
    if (l->outstanding) {
        l->released++;
        l->outstanding = false;
        pthread_cond_broadcast(&l->cv);
    }
    if (l->next_consume >= l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        return YC_OK;
    }
    int k = l->next_consume;
    slot *s = &l->slots[k % l->nslots];
    while (s->ready != k && !l->stop)
        pthread_cond_wait(&l->cv, &l->mu);
    l->next_consume++;
    l->outstanding = true;
    pthread_mutex_unlock(&l->mu);
    *out = &s->b;
    return YC_OK;
}
