/* Validation per whole image by slices (see val_full.h). */
#include "val_full.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detect.h"
#include "log.h"
#include "util.h"

/* Windows along one axis of `extent` pixels (yc_tile_grid of a one-pixel-wide image). */
static size_t axis_windows(int extent, int tile, double overlap)
{
    yc_tile_window *win = NULL;
    size_t n = 0;
    if (yc_tile_grid(extent, 1, tile, overlap, &win, &n))
        return 0;
    free(win);
    return n;
}

size_t yc_val_full_host_bytes(const yc_model *m, int imgsz, int tile, double overlap,
                              int max_det, int max_w, int max_h, int decode_max,
                              bool host_device)
{
    if (!m || imgsz < 1 || tile < 1 || max_det < 1 || max_w < 1 || max_h < 1 || decode_max < 0)
        return 0;
    size_t nx = axis_windows(max_w, tile, overlap), ny = axis_windows(max_h, tile, overlap);
    if (!nx || !ny)
        return 0;
    const size_t t2 = 3 * (size_t)tile * (size_t)tile, s2 = (size_t)imgsz * (size_t)imgsz;
    /* pixels: an image decoded whole (twice while an EXIF-rotated one is turned), or a band of
     * tile rows of the widest image (or a window's region), and the window read */
    size_t dw = (size_t)(max_w < decode_max ? max_w : decode_max);
    size_t dh = (size_t)(max_h < decode_max ? max_h : decode_max);
    size_t pixels = 2 * 3 * dw * dh + t2;
    if (max_w > decode_max || max_h > decode_max)
        pixels += 3 * (size_t)tile * (size_t)max_w + t2;
    /* the detector: letterboxed window, decoded rows, NMS candidates (multi-label: a box per
     * class), the window's detections; staging of the input and heads */
    size_t rows = 0;
    for (int l = 0; l < m->nl; l++) {
        size_t g = (size_t)imgsz / (size_t)m->stride[l];
        rows += (size_t)m->na * g * g;
    }
    size_t det = 3 * s2 + rows * (size_t)m->no * sizeof(float) +
                 rows * (size_t)m->nc * 16 + (size_t)max_det * 6 * sizeof(float);
    if (!host_device)
        det += 3 * s2 * sizeof(float) + rows * (size_t)m->no * sizeof(float);
    /* the largest image's detections before and after merging, and the merge's scratch */
    size_t n = nx * ny * (size_t)max_det;
    size_t dets = 2 * n * YC_MERGE_DET_STRIDE * sizeof(float) + yc_slice_merge_scratch_bytes(n);
    return pixels + det + dets;
}

/* Everything yc_validate_full allocates. */
typedef struct full_state {
    yc_detector *det;
    yc_val_sink *sink;
    yc_slice_buffers bufs;
    yc_slice_dets raw, merged;
    float *labels;
    size_t labels_cap;
} full_state;

static void state_free(full_state *s)
{
    yc_detector_free(s->det);
    yc_val_sink_free(s->sink);
    yc_slice_buffers_free(&s->bufs);
    yc_slice_dets_free(&s->raw);
    yc_slice_dets_free(&s->merged);
    free(s->labels);
}

/* The labels of sample i in pixels: rows (cls, x1, y1, x2, y2). */
static int image_labels(full_state *s, const yc_dataset *ds, size_t i, bool single_cls, int *nl)
{
    const yc_sample *smp = &ds->samples[i];
    size_t n = smp->n_boxes;
    if (n > s->labels_cap) {
        float *p = yc_realloc(s->labels, n * 5 * sizeof *p, "labels");
        if (!p)
            return YC_ENOMEM;
        s->labels = p;
        s->labels_cap = n;
    }
    const float w = (float)smp->w, h = (float)smp->h;
    for (size_t k = 0; k < n; k++) {
        const yc_box *b = &ds->boxes[smp->first_box + k];
        float *o = s->labels + k * 5;
        o[0] = single_cls ? 0.0f : (float)b->cls;
        o[1] = b->x * w;
        o[2] = b->y * h;
        o[3] = b->w * w;
        o[4] = b->h * h;
    }
    yc_xywh2xyxy(s->labels + 1, n, 5);
    *nl = (int)n;
    return YC_OK;
}

static int validate_full(full_state *s, yc_model *m, int stride, const yc_dataset *ds,
                         const char *const *names, const yc_val_options *opt,
                         const yc_slice_options *so, yc_val_result *res)
{
    const int nc = opt->single_cls ? 1 : ds->nc;
    if (!opt->single_cls && m->nc > ds->nc)
        return yc_error_status(YC_EUSAGE, "the model predicts %d classes but the dataset has %d "
                               "(use weights trained on this dataset, or --single-cls)", m->nc,
                               ds->nc);
    if (opt->max_det < 1)
        return yc_error_status(YC_EUSAGE, "max_det must be at least 1");
    if (so->tile < 1)
        return yc_error_status(YC_EUSAGE, "whole-image validation needs a window size (--tile)");
    const yc_infer_model im = {.m = m, .names = NULL, .stride = stride};
    yc_detect_options dopt;
    yc_detect_options_default(&dopt);
    dopt.img_h = dopt.img_w = opt->imgsz;
    dopt.conf_thres = opt->conf_thres;
    dopt.iou_thres = opt->iou_thres;
    dopt.max_det = opt->max_det;
    dopt.agnostic = opt->single_cls;
    dopt.fixed_shape = true;
    dopt.val_mode = true;
    dopt.arena = opt->arena;
    dopt.half = opt->half;
    yc_slice_options sopt = *so;
    sopt.max_det = INT_MAX;
    sopt.merge.agnostic = opt->single_cls;
    int st;
    if ((st = yc_detector_new(&s->det, &im, &dopt)) ||
        (st = yc_val_sink_new(&s->sink, nc, opt)))
        return st;

    double t_pre = 0, t_inf = 0, t_nms = 0;
    long windows = 0;
    for (size_t i = 0; i < ds->n; i++) {
        const yc_sample *smp = &ds->samples[i];
        yc_slice_source *src = NULL;
        yc_slice_info info;
        if ((st = yc_slice_source_open_lent(&src, smp->image, sopt.decode_max, sopt.tile,
                                            &s->bufs)))
            return yc_error_context(st, "validating %s", smp->image);
        if (yc_slice_source_width(src) != smp->w || yc_slice_source_height(src) != smp->h) {
            st = yc_error_status(YC_EFORMAT, "%s is %dx%d, the label scan found %dx%d (changed "
                                 "since the scan?)", smp->image, yc_slice_source_width(src),
                                 yc_slice_source_height(src), (int)smp->w, (int)smp->h);
            yc_slice_source_free(src);
            return st;
        }
        st = yc_slice_detect_image(s->det, src, smp->image, &sopt, &s->raw, &s->merged, &info);
        yc_slice_source_free(src);
        if (st)
            return yc_error_context(st, "validating %s", smp->image);
        if (s->merged.n > INT_MAX)
            return yc_error_status(YC_EUSAGE, "%s: %zu detections after merging: too many",
                                   smp->image, s->merged.n);
        const int nd = (int)s->merged.n;
        if (opt->single_cls)
            for (int j = 0; j < nd; j++)
                s->merged.rows[(size_t)j * YC_MERGE_DET_STRIDE + 5] = 0;
        int nl = 0;
        if ((st = image_labels(s, ds, i, opt->single_cls, &nl)) ||
            (st = yc_val_sink_add(s->sink, smp->image, smp->w, smp->h, s->merged.rows, nd,
                                  s->labels, nl)))
            return st;
        t_pre += info.times.pre;
        t_inf += info.times.inf;
        t_nms += info.times.nms;
        windows += info.windows + (info.full ? 1 : 0);
        yc_debug("val: %s: %dx%d, %d windows%s, %zu detections, %d after merging, %d labels\n",
                 smp->image, (int)smp->w, (int)smp->h, info.windows,
                 info.full ? " (+ full)" : "", info.raw, nd, nl);
    }

    if ((st = yc_val_sink_metrics(s->sink, names, res)))
        return st;
    res->nbatches = windows > INT_MAX ? INT_MAX : (int)windows;
    res->t_pre = windows ? t_pre / (double)windows : 0;
    res->t_inf = windows ? t_inf / (double)windows : 0;
    res->t_nms = windows ? t_nms / (double)windows : 0;
    if (opt->print && !opt->training) {
        printf("Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS and merging per window "
               "at shape (1, 3, %d, %d), %ld windows of %d px\n",
               res->t_pre, res->t_inf, res->t_nms, opt->imgsz, opt->imgsz, windows, sopt.tile);
        fflush(stdout);
    }
    return yc_val_sink_save(s->sink, names, res);
}

int yc_validate_full(yc_model *m, int stride, const yc_dataset *ds, const char *const *names,
                     const yc_val_options *opt, const yc_slice_options *so, yc_val_result *res)
{
    memset(res, 0, sizeof *res);
    if (!m || !m->be || !ds || !opt || !so)
        return yc_error_status(YC_EUSAGE, "whole-image validation: missing model, dataset or "
                               "options");
    full_state s;
    memset(&s, 0, sizeof s);
    int st = validate_full(&s, m, stride, ds, names, opt, so, res);
    state_free(&s);
    if (st)
        yc_val_result_free(res);
    return st;
}
