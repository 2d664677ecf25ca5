/* The batch loader (see loader.h).
 *
 * Threads claim batch numbers in order; batch k goes to slot k % nslots once the consumer has
 * released batch k - nslots.  The consumer takes batches strictly in order, so the sequence of
 * batches never depends on thread timing.  Starting an epoch bumps a generation counter and
 * waits for in-flight builds to finish, so no stale batch can land in a slot. */
#include "loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "log.h"
#include "rng.h"

typedef struct slot {
    yc_batch b;
    /* batch number this slot holds when ready, -1 otherwise */
    int ready;
    /* pixel and target capacities */
    size_t cap_images;
    int cap_targets, cap_images_n;
} slot;

typedef struct worker {
    yc_loader *l;
    pthread_t thread;
    bool started;
    yc_aug_scratch scratch;
    yc_labels labels;
} worker;

struct yc_loader {
    yc_loader_options opt;
    int n;             /* images per epoch */
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
};

/* splitmix64: decorrelates (seed, epoch) into one generator seed. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* yc_sample_loader: image `index` resized as load_image, and its labels in xywhn. */
static int load_cb(void *ctx, int index, bool augment, yc_image *img, yc_image *tmp,
                   yc_load_info *info, yc_labels *labels)
{
    const yc_loader *l = ctx;
    const yc_dataset *ds = l->opt.ds;
    const yc_sample *s = &ds->samples[index];
    int status = yc_load_image(s->image, l->opt.imgsz, augment, tmp, img, info);
    if (status)
        return status;
    labels->n = 0;
    if ((status = yc_labels_reserve(labels, (int)s->n_boxes)))
        return status;
    const yc_box *b = yc_dataset_boxes(ds, (size_t)index);
    for (uint32_t i = 0; i < s->n_boxes; i++)
        if ((status = yc_labels_push(labels, (float)b[i].cls, b[i].x, b[i].y, b[i].w, b[i].h)))
            return status;
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

/* Builds batch k into slot s.  Images that fail are skipped with a warning. */
static int build_batch(worker *wk, int k, slot *s)
{
    yc_loader *l = wk->l;
    const yc_loader_options *o = &l->opt;
    int first = k * o->batch, count = o->batch;
    if (first + count > l->n)
        count = l->n - first;
    int h = o->imgsz, w = o->imgsz;
    if (l->have_rb) {
        h = l->rb.hw[2 * k];
        w = l->rb.hw[2 * k + 1];
    }
    int status = ensure_capacity(s, count, h, w, 0);
    if (status)
        return status;
    yc_sample_params sp = {.hyp = o->hyp, .imgsz = o->imgsz, .n = (int)o->ds->n, .pool = l->pool,
                           .pool_n = l->pool ? l->n : 0};
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
    size_t plane = 3 * (size_t)h * (size_t)w;
    for (int i = 0; i < count; i++) {
        int pos = first + i;
        int index = l->have_rb && !o->train ? (int)l->rb.order[pos] : l->order[pos];
        uint8_t *chw = b->images + (size_t)b->n * plane;
        wk->labels.n = 0;
        if (o->train) {
            yc_rng rng;
            yc_rng_seed(&rng, l->epoch_seed, (uint64_t)pos);
            int oh, ow;
            status = yc_train_sample(&wk->scratch, &sp, index, load_cb, l, &rng, chw, &oh, &ow,
                                     &wk->labels);
            if (!status && (oh != h || ow != w))
                status = yc_error_status(YC_ERR, "internal: sample %dx%d in a %dx%d batch", oh, ow,
                                         h, w);
        } else {
            status = yc_val_sample(&wk->scratch, index, h, w, load_cb, l, chw, &wk->labels,
                                   &b->info[b->n]);
        }
        if (status == YC_ENOMEM)
            return status;
        if (status) {
            yc_warn("skipping %s: %s", o->ds->samples[index].image, yc_last_error());
            continue;
        }
        if ((status = ensure_capacity(s, count, h, w, b->nt + wk->labels.n)))
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
    yc_loader *l = yc_calloc(1, sizeof *l, "loader");
    if (!l)
        return YC_ENOMEM;
    l->opt = *opt;
    l->n = (int)opt->ds->n;
    l->nbatches = (l->n + opt->batch - 1) / opt->batch;
    /* one batch per thread being built plus the one the step holds */
    l->nslots = opt->workers + 1;
    l->nworkers = opt->workers;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->order = yc_malloc((size_t)l->n * sizeof *l->order, "loader");
    l->slots = yc_calloc((size_t)l->nslots, sizeof *l->slots, "loader");
    l->workers = yc_calloc((size_t)l->nworkers, sizeof *l->workers, "loader");
    int status = l->order && l->slots && l->workers ? YC_OK : YC_ENOMEM;
    if (!status && (opt->rect || !opt->train)) {
        status = yc_dataset_rect_batches(opt->ds, opt->batch, opt->imgsz, opt->stride,
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
    }
    yc_vips_init();
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
        yc_aug_scratch_free(&l->workers[i].scratch);
        yc_labels_free(&l->workers[i].labels);
    }
    for (int i = 0; l->slots && i < l->nslots; i++) {
        free(l->slots[i].b.images);
        free(l->slots[i].b.targets);
        free(l->slots[i].b.sample);
        free(l->slots[i].b.info);
    }
    if (l->have_rb)
        yc_rect_batches_free(&l->rb);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l->workers);
    free(l->slots);
    free(l->order);
    free(l->pool);
    free(l);
}

int yc_loader_nbatches(const yc_loader *l)
{
    return l->nbatches;
}

int yc_loader_start(yc_loader *l, int epoch, const int *indices, int first)
{
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
    for (int i = 0; i < l->n; i++)
        l->order[i] = indices ? indices[i] : i;
    if (o->train && o->rect && l->have_rb) {
        for (int i = 0; i < l->n; i++)
            l->order[i] = (int)l->rb.order[i];
    } else if (o->train && !indices) {
        /* Fisher-Yates with the epoch's generator */
        yc_rng rng;
        yc_rng_seed(&rng, l->epoch_seed, 0xE90C5ull);
        for (int i = l->n - 1; i > 0; i--) {
            int j = (int)yc_rng_below(&rng, (uint32_t)i + 1);
            int t = l->order[i];
            l->order[i] = l->order[j];
            l->order[j] = t;
        }
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
