/* Sliced detection (see slice.h). */
#include "slice.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "val.h"

void yc_slice_options_default(yc_slice_options *o)
{
    memset(o, 0, sizeof *o);
    o->tile = 640;
    o->overlap = 0.2;
    o->merge = yc_merge_params_nmm();
    o->full = false;
    o->decode_max = YC_SLICE_DECODE_MAX;
    o->plain_max = YC_SLICE_PLAIN_MAX;
}

/* ------------------------------------------------------------------------------------------------
 * Detections of one image
 * ---------------------------------------------------------------------------------------------- */

void yc_slice_dets_clear(yc_slice_dets *a)
{
    a->n = 0;
}

void yc_slice_dets_free(yc_slice_dets *a)
{
    free(a->rows);
    a->rows = NULL;
    a->n = a->cap = 0;
}

/* Room for n more rows; returns the first of them. */
static float *dets_extend(yc_slice_dets *a, size_t n)
{
    if (a->n + n > a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->n + n)
            cap *= 2;
        float *p = yc_realloc(a->rows, cap * YC_MERGE_DET_STRIDE * sizeof *p, "detections");
        if (!p)
            return NULL;
        a->rows = p;
        a->cap = cap;
    }
    float *first = a->rows + a->n * YC_MERGE_DET_STRIDE;
    a->n += n;
    return first;
}

int yc_slice_dets_add_window(yc_slice_dets *a, const float *dets, size_t n, yc_tile_window win)
{
    if (n == 0)
        return YC_OK;
    float *dst = dets_extend(a, n);
    if (!dst)
        return YC_ENOMEM;
    memcpy(dst, dets, n * YC_MERGE_DET_STRIDE * sizeof *dst);
    yc_tile_dets_to_image(dst, n, YC_MERGE_DET_STRIDE, win);
    return YC_OK;
}

static float clampf(float v, float hi)
{
    return v < 0 ? 0 : v > hi ? hi : v;
}

int yc_slice_dets_add_scaled(yc_slice_dets *a, const float *dets, size_t n, double sx, double sy,
                             int img_w, int img_h)
{
    if (n == 0)
        return YC_OK;
    float *dst = dets_extend(a, n);
    if (!dst)
        return YC_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const float *r = dets + i * YC_MERGE_DET_STRIDE;
        float *o = dst + i * YC_MERGE_DET_STRIDE;
        o[0] = clampf((float)nearbyint(r[0] * sx), (float)img_w);
        o[1] = clampf((float)nearbyint(r[1] * sy), (float)img_h);
        o[2] = clampf((float)nearbyint(r[2] * sx), (float)img_w);
        o[3] = clampf((float)nearbyint(r[3] * sy), (float)img_h);
        o[4] = r[4];
        o[5] = r[5];
    }
    return YC_OK;
}

int yc_slice_dets_merge(const yc_slice_dets *a, const yc_merge_params *p, int max_det,
                        yc_slice_dets *out)
{
    if (max_det < 1)
        return yc_error_status(YC_EUSAGE, "slice merge: max_det %d must be at least 1", max_det);
    yc_slice_dets_clear(out);
    if (a->n == 0)
        return YC_OK;
    if (!dets_extend(out, a->n))
        return YC_ENOMEM;
    size_t kept = 0;
    int st = yc_slice_merge(a->rows, a->n, p, out->rows, &kept);
    if (st) {
        yc_slice_dets_clear(out);
        return st;
    }
    out->n = kept < (size_t)max_det ? kept : (size_t)max_det;
    return YC_OK;
}

/* ------------------------------------------------------------------------------------------------
 * One image
 * ---------------------------------------------------------------------------------------------- */

static void add_times(yc_detect_times *sum, const yc_detect_times *t)
{
    sum->pre += t->pre;
    sum->inf += t->inf;
    sum->nms += t->nms;
}

int yc_slice_detect_image(yc_detector *d, yc_slice_source *src, const char *path,
                          const yc_slice_options *o, yc_slice_dets *scratch, yc_slice_dets *out,
                          yc_slice_info *info)
{
    yc_slice_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    yc_slice_dets_clear(scratch);
    yc_slice_dets_clear(out);
    const int w = yc_slice_source_width(src), h = yc_slice_source_height(src);
    yc_tile_window *win = NULL;
    size_t nw = 0;
    int st = yc_tile_grid(w, h, o->tile, o->overlap, &win, &nw);
    if (st)
        return st;
    yc_image wimg = YC_IMAGE_INIT;
    const float *dets;
    int nd;
    yc_detect_times tm;
    for (size_t i = 0; i < nw && !st; i++) {
        if ((st = yc_slice_source_read(src, win[i], &wimg)))
            break;
        if ((st = yc_detector_run(d, &wimg, &dets, &nd, &info->in_h, &info->in_w, &tm)))
            break;
        add_times(&info->times, &tm);
        info->windows++;
        st = yc_slice_dets_add_window(scratch, dets, (size_t)nd, win[i]);
    }
    free(win);
    if (!st && o->full) {
        const yc_image *whole = yc_slice_source_image(src);
        if (whole) {
            /* decoded whole: the letterbox reduces it, as normal detection does */
            st = yc_detector_run(d, whole, &dets, &nd, &info->in_h, &info->in_w, &tm);
            if (!st)
                st = yc_slice_dets_add_window(scratch, dets, (size_t)nd,
                                              (yc_tile_window){0, 0, w, h});
        } else {
            const yc_detect_options *opt = yc_detector_options(d);
            st = yc_slice_read_thumbnail(path, opt->img_w, opt->img_h, &wimg);
            if (!st)
                st = yc_detector_run(d, &wimg, &dets, &nd, &info->in_h, &info->in_w, &tm);
            if (!st)
                st = yc_slice_dets_add_scaled(scratch, dets, (size_t)nd, (double)w / wimg.w,
                                              (double)h / wimg.h, w, h);
        }
        if (!st) {
            add_times(&info->times, &tm);
            info->full = true;
        }
    }
    yc_image_free(&wimg);
    if (st)
        return st;
    info->raw = scratch->n;
    double t0 = yc_now();
    int max_det = o->max_det > 0 ? o->max_det : yc_detector_options(d)->max_det;
    st = yc_slice_dets_merge(scratch, &o->merge, max_det, out);
    info->times.nms += (yc_now() - t0) * 1e3;
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Files
 * ---------------------------------------------------------------------------------------------- */

/* What the strip-by-strip drawing of an annotated image needs. */
typedef struct draw_args {
    /* detections in image pixels, best first, and their count */
    const float *dets;
    int n;
    /* names and line settings */
    const yc_detect_style *style;
} draw_args;

static void draw_part(yc_canvas *c, int ox, int oy, void *user)
{
    const draw_args *a = user;
    yc_detect_draw(c, ox, oy, a->dets, a->n, a->style);
}

/* The annotated image of a source that is not held whole: drawn while libvips writes it. */
static int save_annotated_lazy(const char *src, int w, int h, const draw_args *args,
                               const char *save_dir, int plain_max);

int yc_detect_save_annotated_lazy(const char *src, int w, int h, const float *dets, int nd,
                                  const yc_detect_style *style, const char *save_dir,
                                  int plain_max)
{
    draw_args args = {dets, nd, style};
    return save_annotated_lazy(src, w, h, &args, save_dir, plain_max);
}

static int save_annotated_lazy(const char *src, int w, int h, const draw_args *args,
                               const char *save_dir, int plain_max)
{
    char path[PATH_MAX + 64], stem[512];
    yc_path_stem(src, stem, sizeof stem);
    if (w > plain_max || h > plain_max) {
        snprintf(path, sizeof path, "%s/%s.tif", save_dir, stem);
        return yc_slice_write_annotated(src, draw_part, (void *)args, path,
                                        YC_ANNOTATED_PYRAMID);
    }
    snprintf(path, sizeof path, "%s/%s", save_dir, yc_path_basename(src));
    if (!yc_slice_can_save(path)) {
        yc_warn("%s: libvips cannot write this format; writing %s/%s.jpg instead", path,
                save_dir, stem);
        snprintf(path, sizeof path, "%s/%s.jpg", save_dir, stem);
    }
    return yc_slice_write_annotated(src, draw_part, (void *)args, path, YC_ANNOTATED_SUFFIX);
}

int yc_detect_files_sliced(yc_detector *d, const yc_path_list *files, const char *const *names,
                           int nc, const yc_detect_save *save, const yc_slice_options *o,
                           yc_detect_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    int st = yc_detect_make_dirs(save);
    if (st)
        return st;
    const yc_detect_style style = yc_detect_style_of(save, names, nc);
    yc_slice_dets raw = YC_SLICE_DETS_INIT, merged = YC_SLICE_DETS_INIT;
    yc_image ann = YC_IMAGE_INIT, crop = YC_IMAGE_INIT;
    double t_pre = 0, t_inf = 0, t_nms = 0;
    long passes = 0;
    bool warned_crops = false;
    int in_h = yc_detector_options(d)->img_h, in_w = yc_detector_options(d)->img_w;
    for (size_t f = 0; f < files->n && !st; f++) {
        const char *src = files->paths[f];
        yc_slice_source *s = NULL;
        yc_slice_info info;
        if ((st = yc_slice_source_open(&s, src, o->decode_max, o->tile)) == YC_OK)
            st = yc_slice_detect_image(d, s, src, o, &raw, &merged, &info);
        if (st == YC_EFORMAT || st == YC_EIO) {
            yc_warn("skipping %s: %s", src, yc_last_error());
            sum->skipped++;
            yc_slice_source_free(s);
            st = YC_OK;
            continue;
        }
        if (st) {
            yc_slice_source_free(s);
            break;
        }
        const int w = yc_slice_source_width(s), h = yc_slice_source_height(s);
        const yc_image *whole = yc_slice_source_image(s);
        const float *dets = merged.rows;
        const int nd = (int)merged.n;
        sum->images++;
        sum->detections += merged.n;
        t_pre += info.times.pre;
        t_inf += info.times.inf;
        t_nms += info.times.nms;
        passes += info.windows + (info.full ? 1 : 0);
        in_h = info.in_h;
        in_w = info.in_w;
        if (save->save_txt && save->save_dir)
            st = yc_detect_write_labels(save->save_dir, src, dets, nd, w, h, save->save_conf);
        if (!st && save->save_crop && save->save_dir && nd > 0) {
            if (whole) {
                for (int i = nd - 1; i >= 0 && !st; i--) {
                    const float *r = dets + (size_t)i * YC_MERGE_DET_STRIDE;
                    char num[24];
                    const char *name = yc_detect_class_name(&style, (int)r[5], num, sizeof num);
                    st = yc_detect_save_crop(whole, r, save->save_dir, name, src, &crop);
                }
            } else if (!warned_crops) {
                yc_warn("%s: %dx%d is larger than %dx%d and is never held whole: no crops are "
                        "saved for such images",
                        src, w, h, o->decode_max, o->decode_max);
                warned_crops = true;
            }
        }
        if (!st && save->save_img && save->save_dir) {
            if (whole) {
                if (!(st = yc_image_copy(&ann, whole))) {
                    yc_canvas cv = yc_canvas_wrap(ann.data, ann.w, ann.h);
                    yc_detect_draw(&cv, 0, 0, dets, nd, &style);
                    st = yc_detect_save_annotated(&ann, save->save_dir, src);
                }
            } else {
                draw_args args = {dets, nd, &style};
                st = save_annotated_lazy(src, w, h, &args, save->save_dir, o->plain_max);
            }
        }
        yc_slice_source_free(s);
        if (!st && save->print) {
            char desc[2048], *real = realpath(src, NULL);
            yc_detect_describe(desc, sizeof desc, dets, nd, names, nc);
            printf("image %zu/%zu %s: %dx%d in %d slice%s%s at %dx%d %s%s%.1fms\n", f + 1,
                   files->n, real ? real : src, h, w, info.windows, info.windows == 1 ? "" : "s",
                   info.full ? " (+ full)" : "", info.in_h, info.in_w, desc,
                   nd ? "" : "(no detections), ", info.times.inf);
            free(real);
            fflush(stdout);
        }
    }
    if (!st && passes > 0) {
        sum->t_pre = t_pre / (double)passes;
        sum->t_inf = t_inf / (double)passes;
        sum->t_nms = t_nms / (double)passes;
    }
    if (!st && save->save_txt && save->save_dir)
        sum->n_label_files = yc_count_label_files(save->save_dir);
    if (!st && save->print) {
        printf("Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS and merging per slice at "
               "shape (1, 3, %d, %d), %ld slice%s\n",
               sum->t_pre, sum->t_inf, sum->t_nms, in_h, in_w, passes, passes == 1 ? "" : "s");
        if (save->save_dir) {
            printf("Results saved to %s\n", save->save_dir);
            if (save->save_txt)
                printf("%d labels saved to %s/labels\n", sum->n_label_files, save->save_dir);
        }
    }
    yc_slice_dets_free(&raw);
    yc_slice_dets_free(&merged);
    yc_image_free(&ann);
    yc_image_free(&crop);
    return st;
}
