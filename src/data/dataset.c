/* Loading a dataset in YOLOv5's layout (see dataset.h): the images listed (image_list.c), their
 * label paths, the records of the scan cache that still match (label_cache.c), the others
 * verified in parallel (labels.c), the cache saved again, then the class check and one pooled,
 * in-memory dataset with its notes.  Also the rectangular batch shapes of YOLOv5's rect mode
 * (images sorted by aspect ratio, one shape per batch). */
#include "dataset_internal.h"
#include "npsort.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <vips/vips.h>

#include "image.h"
#include "log.h"
#include "util.h"

/* Suffix of the cache file next to the labels directory or the .txt list. */
#define CACHE_SUFFIX ".yolocl.cache"

static bool ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

/* ------------------------------------------------------------------------------------------------
 * Loading a dataset
 * ---------------------------------------------------------------------------------------------- */

void yc_dataset_free(yc_dataset *ds)
{
    if (!ds)
        return;
    free(ds->samples);
    free(ds->boxes);
    free(ds->polygons);
    free(ds->points);
    free(ds->class_counts);
    free(ds->notes);
    free(ds->strings);
    free(ds->cache_path);
    memset(ds, 0, sizeof *ds);
}

static int scan_threads(const yc_dataset_options *opt)
{
    if (opt->threads > 0)
        return opt->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 2)
        n = 2;
    return n > 8 ? 8 : (int)n;
}

/* The base of the cache name: the last entry without .txt when it is a list file, else the
 * directory of the first label file. */
static char *cache_base(const char *const *entries, size_t n_entries, const char *first_label)
{
    const char *last = entries[n_entries - 1];
    struct stat st;
    if (stat(last, &st) == 0 && S_ISREG(st.st_mode) && !yc_is_image_path(last)) {
        char *b = yc_strdup(last, "path");
        if (b && ends_with(b, ".txt"))
            b[strlen(b) - 4] = '\0';
        return b;
    }
    return yc_path_dirname(first_label);
}

/* Number of '\n'-separated lines in s (0 for NULL). */
static size_t count_lines(const char *s)
{
    if (!s)
        return 0;
    size_t n = 1;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Copies s into the pool at *pos; returns where it went. */
static const char *pool_put(char *pool, size_t *pos, const char *s, size_t len)
{
    char *dst = pool + *pos;
    memcpy(dst, s, len);
    dst[len] = '\0';
    *pos += len + 1;
    return dst;
}

/* Builds the dataset from the records: applies the class check and single_cls, packs the pools. */
static int build_dataset(const yc_path_list *imgs, const char *const *labels, scan_rec *recs,
                         const yc_dataset_options *opt, yc_dataset *ds)
{
    size_t n_ok = 0, n_boxes = 0, n_notes = 0, text = 0;
    for (size_t i = 0; i < imgs->n; i++) {
        scan_rec *r = &recs[i];
        if (r->status != REC_CORRUPT && !opt->single_cls) {
            for (uint32_t k = 0; k < r->nb; k++) {
                if (r->boxes[k].cls >= opt->nc) {
                    char why[NOTE_MAX];
                    snprintf(why, sizeof why, "class %d >= nc = %d (classes are 0 to %d)",
                             (int)r->boxes[k].cls, opt->nc, opt->nc - 1);
                    free(r->reason);
                    r->reason = strdup(why);
                    if (!r->reason)
                        return yc_error_status(YC_ENOMEM, "out of memory for scan notes");
                    r->status = REC_CORRUPT;
                    break;
                }
            }
        }
        text += strlen(imgs->paths[i]) + 1;
        if (r->status != REC_CORRUPT) {
            n_ok++;
            n_boxes += r->nb;
            text += strlen(labels[i]) + 1;
        } else {
            n_notes++;
            text += strlen(r->reason) + 1;
        }
        n_notes += count_lines(r->warn);
        text += r->warn ? strlen(r->warn) + 1 : 0;
    }
    size_t n_points = 0;
    for (size_t i = 0; i < imgs->n; i++)
        if (recs[i].status != REC_CORRUPT && recs[i].counts)
            ds->has_polygons = true;
    for (size_t i = 0; ds->has_polygons && i < imgs->n; i++)
        if (recs[i].status != REC_CORRUPT)
            n_points += recs[i].counts ? recs[i].npts : 4 * (size_t)recs[i].nb;
    if (ds->has_polygons) {
        ds->polygons = yc_calloc(n_boxes ? n_boxes : 1, sizeof *ds->polygons, "dataset polygons");
        ds->points = yc_malloc(2 * (n_points ? n_points : 1) * sizeof *ds->points,
                               "dataset polygon points");
        if (!ds->polygons || !ds->points)
            return YC_ENOMEM;
    }
    ds->nc = opt->nc;
    ds->n_listed = imgs->n;
    ds->samples = yc_calloc(n_ok ? n_ok : 1, sizeof *ds->samples, "dataset samples");
    ds->boxes = yc_calloc(n_boxes ? n_boxes : 1, sizeof *ds->boxes, "dataset boxes");
    ds->class_counts = yc_calloc((size_t)opt->nc, sizeof *ds->class_counts, "class counts");
    ds->notes = yc_calloc(n_notes ? n_notes : 1, sizeof *ds->notes, "scan notes");
    ds->strings = yc_malloc(text ? text : 1, "dataset paths");
    if (!ds->samples || !ds->boxes || !ds->class_counts || !ds->notes || !ds->strings)
        return YC_ENOMEM;
    size_t pos = 0;
    for (size_t i = 0; i < imgs->n; i++) {
        scan_rec *r = &recs[i];
        const char *img = pool_put(ds->strings, &pos, imgs->paths[i], strlen(imgs->paths[i]));
        if (r->status == REC_CORRUPT) {
            ds->n_corrupt++;
            yc_scan_note *note = &ds->notes[ds->n_notes++];
            note->kind = YC_NOTE_CORRUPT;
            note->image = img;
            note->text = pool_put(ds->strings, &pos, r->reason, strlen(r->reason));
        } else {
            yc_sample *s = &ds->samples[ds->n++];
            s->image = img;
            s->label = pool_put(ds->strings, &pos, labels[i], strlen(labels[i]));
            s->w = r->w;
            s->h = r->h;
            s->first_box = ds->n_boxes;
            s->n_boxes = r->nb;
            const float *pts = r->pts;
            for (uint32_t k = 0; k < r->nb; k++) {
                yc_box b = r->boxes[k];
                if (opt->single_cls)
                    b.cls = 0;
                ds->class_counts[b.cls]++;
                if (ds->has_polygons) {
                    yc_polygon *pg = &ds->polygons[ds->n_boxes];
                    float *dst = ds->points + 2 * ds->n_points;
                    pg->first = ds->n_points;
                    if (r->counts) {
                        pg->n = r->counts[k];
                        memcpy(dst, pts, 2 * (size_t)pg->n * sizeof *dst);
                        pts += 2 * (size_t)pg->n;
                    } else {
                        /* a box file in a polygon dataset: the box's corners */
                        float x1 = b.x - b.w / 2, x2 = b.x + b.w / 2;
                        float y1 = b.y - b.h / 2, y2 = b.y + b.h / 2;
                        const float c[8] = {x1, y1, x2, y1, x2, y2, x1, y2};
                        pg->n = 4;
                        memcpy(dst, c, sizeof c);
                    }
                    ds->n_points += pg->n;
                }
                ds->boxes[ds->n_boxes++] = b;
            }
            ds->n_missing += r->status == REC_MISSING;
            ds->n_empty += r->status == REC_EMPTY;
        }
        if (r->warn) {
            const char *w = pool_put(ds->strings, &pos, r->warn, strlen(r->warn));
            for (;;) {
                yc_scan_note *note = &ds->notes[ds->n_notes++];
                note->kind = YC_NOTE_WARNING;
                note->image = img;
                note->text = w;
                char *nl = strchr(w, '\n');
                if (!nl)
                    break;
                *nl = '\0';
                w = nl + 1;
            }
        }
    }
    return YC_OK;
}

static void print_report(const yc_dataset *ds, const char *prefix, const char *what)
{
    yc_info("%sScanning %s... %zu images, %zu backgrounds, %zu corrupt\n", prefix, what, ds->n,
            yc_dataset_backgrounds(ds), ds->n_corrupt);
    for (size_t i = 0; i < ds->n_notes; i++) {
        const yc_scan_note *n = &ds->notes[i];
        yc_warn("%s%s: %s%s", prefix, n->image,
                n->kind == YC_NOTE_CORRUPT ? "ignoring corrupt image/label: " : "", n->text);
    }
    if (ds->n && ds->n_boxes == 0)
        yc_warn("%sno labels found in %s: every image is a background", prefix, what);
}

int yc_dataset_load(const char *const *entries, size_t n_entries, const yc_dataset_options *opt,
                    yc_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    if (!opt || opt->nc < 1)
        return yc_error_status(YC_ERR, "dataset: the number of classes must be at least 1");
    if (n_entries == 0)
        return yc_error_status(YC_ERR, "dataset: no image directories or lists given");
    int st = yc_vips_init();
    if (st)
        return st;
    const char *prefix = opt->prefix ? opt->prefix : "";
    yc_path_list imgs;
    st = yc_image_list(entries, n_entries, &imgs);
    if (st)
        return st;
    if (imgs.n == 0) {
        yc_path_list_free(&imgs);
        return yc_error_status(YC_EIO,
                               "no images found in %s%s (image suffixes: bmp dng jpeg jpg mpo png "
                               "tif tiff webp pfm)",
                               entries[0], n_entries > 1 ? " and the other entries" : "");
    }
    size_t n = imgs.n, n_todo = 0, total = 0;
    long long in_cache = 0;
    bool oom = false;
    int nt = scan_threads(opt);
    char **labels = yc_calloc(n, sizeof *labels, "label paths");
    scan_rec *recs = yc_calloc(n, sizeof *recs, "scan records");
    size_t *todo = yc_malloc(n * sizeof *todo, "scan list");
    char *label_pool = NULL, *base = NULL;
    if (!labels || !recs || !todo) {
        st = YC_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        total += yc_ds_label_path_into(imgs.paths[i], NULL, 0) + 1;
    label_pool = yc_malloc(total, "label paths");
    if (!label_pool) {
        st = YC_ENOMEM;
        goto done;
    }
    for (size_t i = 0, pos = 0; i < n; i++) {
        size_t need = yc_ds_label_path_into(imgs.paths[i], NULL, 0);
        labels[i] = label_pool + pos;
        yc_ds_label_path_into(imgs.paths[i], labels[i], need + 1);
        pos += need + 1;
    }
    base = cache_base(entries, n_entries, labels[0]);
    if (!base) {
        st = YC_ENOMEM;
        goto done;
    }
#pragma omp parallel for schedule(dynamic, 64) num_threads(nt)
    for (size_t i = 0; i < n; i++)
        recs[i].fp =
            yc_ds_stat_fingerprint(yc_ds_stat_fingerprint(FNV_OFFSET, imgs.paths[i]), labels[i]);

    if (!opt->no_cache) {
        size_t bl = strlen(base);
        ds->cache_path = yc_malloc(bl + sizeof CACHE_SUFFIX, "cache path");
        if (!ds->cache_path) {
            st = YC_ENOMEM;
            goto done;
        }
        memcpy(ds->cache_path, base, bl);
        memcpy(ds->cache_path + bl, CACHE_SUFFIX, sizeof CACHE_SUFFIX);
        in_cache = yc_ds_cache_load(ds->cache_path, &imgs, recs, prefix);
        if (in_cache < 0) {
            st = yc_error_status(YC_ENOMEM, "out of memory reading the scan cache");
            goto done;
        }
    }

    for (size_t i = 0; i < n; i++)
        if (!recs[i].cached)
            todo[n_todo++] = i;
#pragma omp parallel num_threads(nt)
    {
        bool my_oom = false;
#pragma omp for schedule(dynamic, 4)
        for (size_t k = 0; k < n_todo; k++)
            yc_ds_verify_one(imgs.paths[todo[k]], labels[todo[k]], &recs[todo[k]], &my_oom);
        if (my_oom) {
#pragma omp atomic write
            oom = true;
        }
#ifdef _OPENMP
        if (omp_get_thread_num() != 0)
            vips_thread_shutdown();
#endif
    }
    if (oom) {
        st = yc_error_status(YC_ENOMEM, "out of memory while scanning %zu images", n);
        goto done;
    }
    ds->n_verified = n_todo;
    if (ds->cache_path && (n_todo > 0 || (size_t)in_cache != n))
        yc_ds_cache_save(ds->cache_path, &imgs, recs, prefix);

    st = build_dataset(&imgs, (const char *const *)labels, recs, opt, ds);
    if (st)
        goto done;
    if (!opt->quiet)
        print_report(ds, prefix, n_todo == 0 && ds->cache_path ? ds->cache_path : base);
    if (ds->n == 0)
        st = yc_error_status(YC_EFORMAT, "no usable images: all %zu listed images are corrupt",
                             ds->n_listed);
done:
    if (recs)
        for (size_t i = 0; i < n; i++)
            yc_ds_rec_clear(&recs[i]);
    free(recs);
    free(todo);
    free(labels);
    free(label_pool);
    free(base);
    yc_path_list_free(&imgs);
    if (st)
        yc_dataset_free(ds);
    return st;
}

int yc_dataset_load_split(const yc_data_yaml *y, yc_split split, const yc_dataset_options *opt,
                          yc_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    if ((unsigned)split >= YC_SPLIT_COUNT)
        return yc_error_status(YC_ERR, "dataset: invalid split %d", (int)split);
    if (y->n_entries[split] == 0)
        return yc_error_status(YC_EFORMAT, "%s: %s: no entries", y->file, yc_split_name(split));
    yc_dataset_options o = opt ? *opt : (yc_dataset_options){0};
    o.nc = y->nc;
    int st = yc_dataset_load((const char *const *)y->entries[split], (size_t)y->n_entries[split],
                             &o, ds);
    if (st)
        return yc_error_context(st, "%s: %s", y->file, yc_split_name(split));
    return YC_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Rectangular batches
 * ---------------------------------------------------------------------------------------------- */

typedef struct ar_index {
    /* aspect ratio h/w */
    double ar;
    /* image index */
    size_t i;
} ar_index;

void yc_rect_batches_free(yc_rect_batches *rb)
{
    if (!rb)
        return;
    free(rb->order);
    free(rb->hw);
    memset(rb, 0, sizeof *rb);
}

int yc_rect_batches_make(const int32_t *w, const int32_t *h, size_t n, int batch, int imgsz,
                         int stride, double pad, yc_rect_batches *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0 || batch < 1 || imgsz < 1 || stride < 1 || !(pad >= 0 && pad < 1e6))
        return yc_error_status(YC_ERR,
                               "rect batches: invalid arguments (images %zu, batch %d, imgsz %d, "
                               "stride %d, pad %g)",
                               n, batch, imgsz, stride, pad);
    ar_index *a = yc_malloc(n * sizeof *a, "aspect ratios");
    double *ar = yc_malloc(n * sizeof *ar, "aspect ratios");
    ptrdiff_t *idx = yc_malloc(n * sizeof *idx, "aspect ratios");
    if (!a || !ar || !idx) {
        free(a);
        free(ar);
        free(idx);
        return YC_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (w[i] < 1 || h[i] < 1) {
            free(a);
            free(ar);
            free(idx);
            return yc_error_status(YC_ERR, "rect batches: image %zu has size %dx%d", i,
                                   (int)w[i], (int)h[i]);
        }
        ar[i] = (double)h[i] / (double)w[i];
    }
    /* irect = ar.argsort(): numpy's default (unstable) sort, whose order of equal ratios decides
     * which batch, and so which shape, an image gets */
    yc_np_argsort_f64(ar, idx, (ptrdiff_t)n);
    for (size_t i = 0; i < n; i++) {
        a[i].ar = ar[idx[i]];
        a[i].i = (size_t)idx[i];
    }
    free(ar);
    free(idx);
    size_t nb = (n + (size_t)batch - 1) / (size_t)batch;
    out->order = yc_malloc(n * sizeof *out->order, "rect order");
    out->hw = yc_malloc(nb * 2 * sizeof *out->hw, "rect shapes");
    if (!out->order || !out->hw) {
        free(a);
        yc_rect_batches_free(out);
        return YC_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        out->order[i] = a[i].i;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * (size_t)batch, hi = lo + (size_t)batch < n ? lo + (size_t)batch : n;
        double mini = a[lo].ar, maxi = a[hi - 1].ar;
        double s[2] = {1, 1};
        if (maxi < 1)
            s[0] = maxi;
        else if (mini > 1)
            s[1] = 1 / mini;
        for (int k = 0; k < 2; k++) {
            double v = ceil(s[k] * imgsz / stride + pad);
            if (v * stride > INT32_MAX) {
                free(a);
                yc_rect_batches_free(out);
                return yc_error_status(YC_ERR, "rect batches: shape too large for imgsz %d",
                                       imgsz);
            }
            out->hw[2 * b + (size_t)k] = (int32_t)v * stride;
        }
    }
    free(a);
    out->n = n;
    out->n_batches = nb;
    return YC_OK;
}

int yc_dataset_rect_batches(const yc_dataset *ds, int batch, int imgsz, int stride, double pad,
                            yc_rect_batches *out)
{
    memset(out, 0, sizeof *out);
    if (ds->n == 0)
        return yc_error_status(YC_ERR, "rect batches: the dataset is empty");
    int32_t *wh = yc_malloc(ds->n * 2 * sizeof *wh, "image sizes");
    if (!wh)
        return YC_ENOMEM;
    for (size_t i = 0; i < ds->n; i++) {
        wh[i] = ds->samples[i].w;
        wh[ds->n + i] = ds->samples[i].h;
    }
    int st = yc_rect_batches_make(wh, wh + ds->n, ds->n, batch, imgsz, stride, pad, out);
    free(wh);
    return st;
}
