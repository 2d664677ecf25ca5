/* Inference on image files and weights loading (see detect.h). */
#include "detect.h"
#include "slice.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "draw.h"
#include "graph.h"
#include "log.h"
#include "modelcfg.h"
#include "nms.h"
#include "tta.h"
#include "util.h"
#include "val.h"
#include "video.h"
#include "mask_eval.h"
#include "visualize.h"
#include "weights.h"

/* ------------------------------------------------------------------------------------------------
 * Weights
 * ---------------------------------------------------------------------------------------------- */

int yc_infer_model_load(yc_infer_model *out, const char *weights, const char *cfg_name,
                        yc_backend *be)
{
    memset(out, 0, sizeof *out);
    /* detection and segmentation models; a classifier is refused (below) */
    yc_model_spec spec = {.cfg = cfg_name, .weights = weights, .backend = be,
                          .use = YC_MODEL_INFER};
    yc_opened_model om;
    int st = yc_model_open(&spec, &om);
    if (st)
        return st;
    if (om.m->nm == 0 && (st = yc_model_require_detection(om.m, "this command"))) {
        yc_opened_model_free(&om);
        return st;
    }
    out->m = om.m;
    om.m = NULL;
    const yc_weights *w = om.w;
    if (w->nnames == out->m->nc) {
        if (!(out->names = yc_calloc((size_t)w->nnames, sizeof *out->names, "class names")))
            st = YC_ENOMEM;
        for (int i = 0; !st && i < w->nnames; i++)
            if (!(out->names[i] = yc_strdup(w->names[i], "class names")))
                st = YC_ENOMEM;
    }
    yc_opened_model_free(&om);
    if (st) {
        yc_infer_model_free(out);
        return st;
    }
    out->stride = 32;
    for (int l = 0; l < out->m->nl; l++)
        if ((int)out->m->stride[l] > out->stride)
            out->stride = (int)out->m->stride[l];
    return YC_OK;
}

void yc_infer_model_free(yc_infer_model *im)
{
    if (!im)
        return;
    if (im->names && im->m)
        for (int i = 0; i < im->m->nc; i++)
            free(im->names[i]);
    free(im->names);
    yc_model_free(im->m);
    memset(im, 0, sizeof *im);
}

int yc_check_img_size(int size, int stride, int floor)
{
    int s = (size + stride - 1) / stride * stride;
    return s > floor ? s : floor;
}

/* ------------------------------------------------------------------------------------------------
 * The detector
 * ---------------------------------------------------------------------------------------------- */

struct yc_detector {
    const yc_infer_model *im;
    yc_detect_options opt;
    yc_graph *g;
    int gh, gw;
    yc_image lb;
    float *input, *heads[YC_MAX_LEVELS], *rows, *dets;
    size_t input_cap, heads_cap[YC_MAX_LEVELS], rows_cap;
    yc_nms_scratch *nms;
    /* test-time augmentation's graphs (opt.augment) */
    struct yc_tta *tta;
    /* segmentation models: Proto's output of the last image (nm x ph x pw), each detection's
     * source row and coefficients (max_det), and the last run's masks in the letterboxed input
     * (n_masks planes of mask_h x mask_w) */
    float *proto, *coef;
    size_t proto_cap;
    int ph, pw;
    uint32_t *src;
    uint8_t *masks;
    size_t masks_cap;
    int n_masks, mask_h, mask_w;
};

void yc_detect_options_default(yc_detect_options *o)
{
    memset(o, 0, sizeof *o);
    o->img_h = o->img_w = 640;
    o->conf_thres = 0.25f;
    o->iou_thres = 0.45;
    o->max_det = 1000;
}

int yc_detector_new(yc_detector **out, const yc_infer_model *im, const yc_detect_options *opt)
{
    *out = NULL;
    if (!im || !im->m || !im->m->be)
        return yc_error_status(YC_EUSAGE, "detector: no model");
    if (opt->max_det < 1 || opt->img_h < im->stride || opt->img_w < im->stride ||
        opt->img_h % im->stride || opt->img_w % im->stride)
        return yc_error_status(YC_EUSAGE, "detector: image size %dx%d must be a multiple of %d; "
                               "max_det %d must be at least 1", opt->img_h, opt->img_w,
                               im->stride, opt->max_det);
    yc_detector *d = yc_calloc(1, sizeof *d, "detector");
    if (!d)
        return YC_ENOMEM;
    d->im = im;
    d->opt = *opt;
    const int nm = im->m->nm;
    if (nm > 0 && opt->augment) {
        yc_detector_free(d);
        return yc_error_status(YC_EUSAGE, "segmentation models are run without --augment");
    }
    d->nms = yc_nms_scratch_new();
    d->dets = yc_malloc((size_t)opt->max_det * 6 * sizeof *d->dets, "detections");
    if (nm > 0) {
        d->src = yc_malloc((size_t)opt->max_det * sizeof *d->src, "detections");
        d->coef = yc_malloc((size_t)opt->max_det * nm * sizeof *d->coef, "mask coefficients");
    }
    if (!d->nms || !d->dets || (nm > 0 && (!d->src || !d->coef))) {
        yc_detector_free(d);
        return yc_error_status(YC_ENOMEM, "out of memory: detector");
    }
    *out = d;
    return YC_OK;
}

void yc_detector_free(yc_detector *d)
{
    if (!d)
        return;
    yc_graph_free(d->g);
    yc_image_free(&d->lb);
    free(d->input);
    for (int l = 0; l < YC_MAX_LEVELS; l++)
        free(d->heads[l]);
    free(d->rows);
    free(d->dets);
    free(d->proto);
    free(d->coef);
    free(d->src);
    free(d->masks);
    yc_nms_scratch_free(d->nms);
    yc_tta_free(d->tta);
    free(d);
}

const yc_detect_options *yc_detector_options(const yc_detector *d)
{
    return &d->opt;
}

static int grow(float **p, size_t *cap, size_t n, const char *what)
{
    if (n <= *cap)
        return YC_OK;
    float *q = yc_realloc(*p, n * sizeof *q, what);
    if (!q)
        return YC_ENOMEM;
    *p = q;
    *cap = n;
    return YC_OK;
}

static float *host_f32(yc_backend *be, const yc_tensor *t)
{
    if (!be->iface->buffer_host_ptr || t->type != YC_F32 || !t->buf)
        return NULL;
    char *base = be->iface->buffer_host_ptr(be, t->buf);
    return base ? (float *)(void *)(base + t->offset) : NULL;
}

static int nms_scale(yc_detector *d, int h, int w, int img_h, int img_w, size_t rows,
                     const float **dets, int *n, yc_detect_times *times, double t0, double t1);

/* yc_detector_run after the letterbox: d->lb holds the input of an img_h x img_w image. */
static int run_letterboxed(yc_detector *d, int img_h, int img_w, const float **dets, int *n,
                           int *in_h, int *in_w, yc_detect_times *times)
{
    yc_model *m = d->im->m;
    int st;
    const int h = d->lb.h, w = d->lb.w;
    if (in_h)
        *in_h = h;
    if (in_w)
        *in_w = w;
    yc_graph_options go = {.mode = YC_GRAPH_EVAL, .half = d->opt.half,
                           .keep_layers = d->opt.visualize};
    if (d->opt.augment) {
        if (!d->tta && (st = yc_tta_new(&d->tta, m, d->opt.half, d->opt.arena)))
            return st;
    } else if (!d->g || d->gh != h || d->gw != w) {
        yc_graph_free(d->g);
        d->g = NULL;
        if ((st = yc_graph_new_opts(&d->g, m, 1, h, w, &go)) ||
            (st = d->opt.arena ? yc_graph_alloc_in(d->g, d->opt.arena) : yc_graph_alloc(d->g))) {
            yc_graph_free(d->g);
            d->g = NULL;
            return yc_error_context(st, "building the %dx%d inference graph", h, w);
        }
        d->gh = h;
        d->gw = w;
    }

    /* pre-process: HWC uint8 -> CHW float / 255 (into the graph's input where it is host
     * memory) */
    double t0 = yc_now();
    const yc_tensor *in = d->opt.augment ? NULL : yc_graph_input(d->g);
    float *dst = in ? host_f32(m->be, in) : NULL;
    bool direct = dst != NULL;
    size_t plane = (size_t)h * (size_t)w;
    if (!direct) {
        if ((st = grow(&d->input, &d->input_cap, 3 * plane, "input image")))
            return st;
        dst = d->input;
    }
    const uint8_t *px = d->lb.data;
    for (size_t i = 0; i < plane; i++) {
        dst[i] = (float)px[3 * i] / 255.0f;
        dst[plane + i] = (float)px[3 * i + 1] / 255.0f;
        dst[2 * plane + i] = (float)px[3 * i + 2] / 255.0f;
    }
    size_t rows;
    double t1 = yc_now();
    if (d->opt.augment) {
        /* inference: the three passes of _forward_augment, decoded, descaled and clipped */
        const float *trows;
        if ((st = yc_tta_predict(d->tta, dst, 1, h, w, &trows, &rows)) ||
            (st = grow(&d->rows, &d->rows_cap, rows * (size_t)m->no, "augmented rows")))
            return st;
        memcpy(d->rows, trows, rows * (size_t)m->no * sizeof *d->rows);
        return nms_scale(d, h, w, img_h, img_w, rows, dets, n, times, t0, t1);
    }
    if (!direct && (st = yc_tensor_set_f32(m->be, in, dst)))
        return st;

    /* inference: forward, heads, decoding */
    t1 = yc_now();
    if ((st = yc_graph_forward(d->g)) || (st = m->be->iface->synchronize(m->be)))
        return st;
    yc_detect_level lv[YC_MAX_LEVELS];
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(d->g, l);
        const float *p = host_f32(m->be, t);
        if (!p) {
            if ((st = grow(&d->heads[l], &d->heads_cap[l], yc_tensor_elems(t), "head outputs")) ||
                (st = yc_tensor_get_f32(m->be, t, d->heads[l])))
                return st;
            p = d->heads[l];
        }
        lv[l] = (yc_detect_level){.p = p, .ny = t->h, .nx = t->w,
                                  .img_stride = yc_tensor_image_elems(t), .stride = m->stride[l]};
    }
    if (m->nm > 0) {
        /* Segment: Proto's output, and rows with their raw mask coefficients */
        const yc_tensor *t = yc_graph_head(d->g, m->nl);
        if ((st = grow(&d->proto, &d->proto_cap, yc_tensor_elems(t), "Proto output")) ||
            (st = yc_tensor_get_f32(m->be, t, d->proto)))
            return st;
        d->ph = t->h;
        d->pw = t->w;
    }
    rows = yc_detect_rows(lv, m->nl, m->na);
    if ((st = grow(&d->rows, &d->rows_cap, rows * (size_t)m->no, "decoded rows")) ||
        (st = yc_detect_decode_nm(lv, m->nl, m->na, m->no, m->nm, m->anchors, 0, d->rows)))
        return st;
    return nms_scale(d, h, w, img_h, img_w, rows, dets, n, times, t0, t1);
}

/* The end of yc_detector_run: NMS over the `rows` decoded rows in d->rows of the h x w input,
 * boxes scaled back to the img_h x img_w image; t0, t1: when pre-processing and inference
 * started. */
static int nms_scale(yc_detector *d, int h, int w, int img_h, int img_w, size_t rows,
                     const float **dets, int *n, yc_detect_times *times, double t0, double t1)
{
    yc_model *m = d->im->m;
    int st;
    /* NMS */
    double t2 = yc_now();
    yc_nms_params np = yc_nms_params_detect();
    np.conf_thres = d->opt.conf_thres;
    np.iou_thres = d->opt.iou_thres;
    np.max_det = d->opt.max_det;
    np.agnostic = d->opt.agnostic;
    np.classes = d->opt.classes;
    np.n_classes = d->opt.n_classes;
    np.multi_label = d->opt.val_mode;
    np.nm = m->nm;
    int nd = 0;
    if ((st = yc_nms_src(d->rows, rows, m->no, &np, d->nms, d->dets, &nd, d->src)))
        return st;
    double t3 = yc_now();
    d->n_masks = 0;
    if (m->nm > 0 && nd > 0) {
        /* process_mask(proto[i], det[:, 6:], det[:, :4], im.shape[2:], upsample=True), on the
         * boxes in input pixels */
        yc_nms_coefficients(d->rows, m->no, m->nm, d->src, nd, d->coef);
        size_t need = (size_t)nd * h * w;
        if (need > d->masks_cap) {
            uint8_t *q = yc_realloc(d->masks, need, "masks");
            if (!q)
                return YC_ENOMEM;
            d->masks = q;
            d->masks_cap = need;
        }
        if ((st = yc_process_mask(d->proto, m->nm, d->ph, d->pw, d->coef, (size_t)m->nm,
                                  d->dets, 6, nd, h, w, YC_MASK_UPSAMPLE, d->masks)))
            return st;
        d->n_masks = nd;
        d->mask_h = h;
        d->mask_w = w;
    }

    /* scale_boxes(im.shape[2:], det[:, :4], im0.shape).round() (val.py does not round) */
    double gain, pw, ph;
    yc_letterbox_gain_pad(h, w, img_h, img_w, &gain, &pw, &ph);
    yc_scale_boxes(d->dets, (size_t)nd, 6, gain, pw, ph, img_h, img_w);
    for (int i = 0; i < nd && !d->opt.val_mode; i++)
        for (int k = 0; k < 4; k++)
            d->dets[(size_t)i * 6 + k] = nearbyintf(d->dets[(size_t)i * 6 + k]);
    if (times) {
        times->pre = (t1 - t0) * 1e3;
        times->inf = (t2 - t1) * 1e3;
        times->nms = (t3 - t2) * 1e3;
    }
    *dets = d->dets;
    *n = nd;
    return YC_OK;
}

const uint8_t *yc_detector_masks(const yc_detector *d, int *n, int *h, int *w)
{
    *n = d->n_masks;
    *h = d->mask_h;
    *w = d->mask_w;
    return d->n_masks > 0 ? d->masks : NULL;
}

int yc_detect_draw_masks(const yc_detector *d, yc_image *im, const float *dets, int nd,
                         bool retina)
{
    int n, mh, mw;
    const uint8_t *masks = yc_detector_masks(d, &n, &mh, &mw);
    if (!masks || nd <= 0)
        return YC_OK;
    if (nd > n)
        return yc_error_status(YC_EUSAGE, "%d detections for %d masks", nd, n);
    const size_t plane = (size_t)im->h * im->w;
    float *acc = yc_malloc(plane * 4 * sizeof *acc, "mask overlay");
    float *one = yc_malloc(plane * sizeof *one, "mask");
    if (!acc || !one) {
        free(acc);
        free(one);
        return YC_ENOMEM;
    }
    double gain, pw, ph;
    yc_letterbox_gain_pad(mh, mw, im->h, im->w, &gain, &pw, &ph);
    yc_mask_overlay_init(acc, im->h, im->w, retina);
    for (int k = 0; k < nd; k++) {
        uint8_t rgb[3];
        yc_mask_color((int)dets[(size_t)k * 6 + 5], rgb);
        yc_scale_mask(masks + (size_t)k * mh * mw, mh, mw, pw, ph, im->h, im->w, one);
        yc_mask_overlay_add(acc, im->h, im->w, retina, one, rgb, 0.5f);
    }
    yc_mask_overlay_blend(im->data, im->h, im->w, (size_t)im->w * 3, acc, retina, 0.5f);
    free(acc);
    free(one);
    return YC_OK;
}

/* yc_detect_write_segments into save_dir/labels/<name>.txt */
static int write_segments_named(const yc_detector *d, const char *save_dir, const char *name,
                                const float *dets, int nd, int img_w, int img_h, bool save_conf)
{
    int n, mh, mw;
    const uint8_t *masks = yc_detector_masks(d, &n, &mh, &mw);
    if (!masks || nd <= 0)
        return YC_OK;
    if (nd > n)
        return yc_error_status(YC_EUSAGE, "%d detections for %d masks", nd, n);
    char path[PATH_MAX * 2 + 16];
    snprintf(path, sizeof path, "%s/labels/%s.txt", save_dir, name);
    FILE *fp = fopen(path, "a");
    if (!fp)
        return yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
    double gain, pw, ph;
    yc_letterbox_gain_pad(mh, mw, img_h, img_w, &gain, &pw, &ph);
    /* scale_segments in float32: (x - pad) / gain, clipped, / (w, h) */
    const float fpw = (float)pw, fph = (float)ph, fg = (float)gain;
    int st = YC_OK;
    /* reversed(det) with reversed(masks2segments(masks)): lowest confidence first */
    for (int k = nd - 1; k >= 0 && !st; k--) {
        float *xy = NULL;
        int np = 0;
        if ((st = yc_mask_largest_contour(masks + (size_t)k * mh * mw, mh, mw, &xy, &np)))
            break;
        fprintf(fp, "%g", (double)dets[(size_t)k * 6 + 5]);
        for (int i = 0; i < np; i++) {
            float x = (xy[i * 2] - fpw) / fg, y = (xy[i * 2 + 1] - fph) / fg;
            x = x < 0.0f ? 0.0f : x > (float)img_w ? (float)img_w : x;
            y = y < 0.0f ? 0.0f : y > (float)img_h ? (float)img_h : y;
            fprintf(fp, " %g %g", (double)(x / (float)img_w), (double)(y / (float)img_h));
        }
        if (save_conf)
            fprintf(fp, " %g", (double)dets[(size_t)k * 6 + 4]);
        fputc('\n', fp);
        free(xy);
    }
    if ((ferror(fp) | (fclose(fp) != 0)) && !st)
        st = yc_error_status(YC_EIO, "cannot write %s", path);
    return st;
}

int yc_detect_write_segments(const yc_detector *d, const char *save_dir, const char *src,
                             const float *dets, int nd, int img_w, int img_h, bool save_conf)
{
    char stem[PATH_MAX];
    yc_path_stem(src, stem, sizeof stem);
    return write_segments_named(d, save_dir, stem, dets, nd, img_w, img_h, save_conf);
}

int yc_detector_run(yc_detector *d, const yc_image *img, const float **dets, int *n, int *in_h,
                    int *in_w, yc_detect_times *times)
{
    *dets = NULL;
    *n = 0;
    int st = yc_letterbox(img, &d->lb, d->opt.img_h, d->opt.img_w, !d->opt.fixed_shape, false,
                          true, d->im->stride, NULL);
    if (st)
        return st;
    return run_letterboxed(d, img->h, img->w, dets, n, in_h, in_w, times);
}

int yc_detector_visualize(yc_detector *d, const char *save_dir, const char *src)
{
    if (d->opt.augment)
        return YC_OK;
    if (!d->opt.visualize || !d->g)
        return yc_error_status(YC_EUSAGE, "visualize: the detector was made without visualize, "
                               "or has not run");
    char stem[256], dir[4400];
    yc_path_stem(src, stem, sizeof stem);
    int st = yc_visualize_dir(save_dir, stem, dir, sizeof dir);
    if (!st)
        st = yc_visualize_features(d->im->m, d->g, dir);
    return st;
}

void yc_detector_geometry(const yc_detector *d, int h0, int w0, yc_letterbox_info *g)
{
    yc_letterbox_geometry(h0, w0, d->opt.img_h, d->opt.img_w, !d->opt.fixed_shape, false, true,
                          d->im->stride, g);
}

int yc_detector_run_reduced(yc_detector *d, const yc_image *content, int h0, int w0,
                            const float **dets, int *n, int *in_h, int *in_w,
                            yc_detect_times *times)
{
    *dets = NULL;
    *n = 0;
    yc_letterbox_info g;
    yc_detector_geometry(d, h0, w0, &g);
    int st = yc_letterbox_fill(content, &g, &d->lb);
    if (!st)
        st = run_letterboxed(d, h0, w0, dets, n, in_h, in_w, times);
    /* the masks of a reduced read are not offered (their letterbox is not the picture's) */
    d->n_masks = 0;
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Sources
 * ---------------------------------------------------------------------------------------------- */

/* LoadImages's order: the images, then the videos, each sorted by name */
static int cmp_source(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int vx = yc_is_video_path(x), vy = yc_is_video_path(y);
    return vx != vy ? vx - vy : strcmp(x, y);
}

/* Builds a path list from n heap strings (taken over and freed), images first (cmp_source). */
static int make_list(char **items, size_t n, yc_path_list *out)
{
    memset(out, 0, sizeof *out);
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(items[i]) + 1;
    qsort(items, n, sizeof *items, cmp_source);
    int st = YC_OK;
    out->paths = yc_malloc((n ? n : 1) * sizeof *out->paths, "image list");
    out->pool = yc_malloc(bytes ? bytes : 1, "image list");
    if (!out->paths || !out->pool) {
        st = YC_ENOMEM;
        yc_path_list_free(out);
    } else {
        char *p = out->pool;
        for (size_t i = 0; i < n; i++) {
            size_t l = strlen(items[i]) + 1;
            memcpy(p, items[i], l);
            out->paths[i] = p;
            p += l;
        }
        out->n = n;
    }
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
    return st;
}

static bool is_regular(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int yc_detect_sources(const char *source, yc_path_list *out)
{
    memset(out, 0, sizeof *out);
    char **items = NULL;
    size_t n = 0, cap = 0;
    int st = YC_OK;
    bool dir = false;
    glob_t gl;
    memset(&gl, 0, sizeof gl);
    bool have_glob = false;
    const char **cand = NULL;
    size_t ncand = 0;
    DIR *dp = NULL;
    char **dir_names = NULL;
    size_t ndir = 0;

    if (yc_is_url(source) && yc_is_image_path(source)) {
        return yc_error_status(YC_EUNSUPPORTED, "%s: images are read from files only: download "
                               "it first", source);
    } else if (yc_is_url(source) || yc_is_live_source(source)) {
        /* a stream, a video's URL (FFmpeg reads it as it downloads) or a webcam number */
        cand = &source;
        ncand = 1;
    } else if (strpbrk(source, "*?[") && !yc_file_exists(source)) {
        int rc = glob(source, 0, NULL, &gl);
        if (rc != 0 && rc != GLOB_NOMATCH) {
            globfree(&gl);
            return yc_error_status(YC_EIO, "%s: glob failed", source);
        }
        have_glob = true;
        cand = (const char **)gl.gl_pathv;
        ncand = gl.gl_pathc;
    } else if (yc_is_dir(source)) {
        dir = true;
        if (!(dp = opendir(source)))
            return yc_error_status(YC_EIO, "cannot read directory %s: %s", source,
                                   strerror(errno));
        struct dirent *e;
        size_t dcap = 0;
        while ((e = readdir(dp))) {
            /* glob('*.*'): names with a dot that do not start with one */
            if (e->d_name[0] == '.' || !strchr(e->d_name, '.'))
                continue;
            if (ndir == dcap) {
                dcap = dcap ? 2 * dcap : 64;
                char **q = yc_realloc(dir_names, dcap * sizeof *q, "image list");
                if (!q) {
                    st = YC_ENOMEM;
                    break;
                }
                dir_names = q;
            }
            if (!(dir_names[ndir] = yc_path_join(source, e->d_name))) {
                st = yc_error_status(YC_ENOMEM, "out of memory: image list");
                break;
            }
            ndir++;
        }
        closedir(dp);
        cand = (const char **)dir_names;
        ncand = ndir;
    } else if (yc_file_exists(source)) {
        cand = &source;
        ncand = 1;
    } else {
        return yc_error_status(YC_EIO, "%s does not exist", source);
    }
    for (size_t i = 0; i < ncand && !st; i++) {
        if (yc_is_url(cand[i]) || yc_is_live_source(cand[i])) {
            if (cand[i] != source)
                continue;
        } else if ((!yc_is_image_path(cand[i]) && !yc_is_video_path(cand[i])) ||
                   !is_regular(cand[i])) {
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **q = yc_realloc(items, cap * sizeof *q, "image list");
            if (!q) {
                st = YC_ENOMEM;
                break;
            }
            items = q;
        }
        if (!(items[n] = yc_strdup(cand[i], "image list")))
            st = YC_ENOMEM;
        else
            n++;
    }
    if (have_glob)
        globfree(&gl);
    for (size_t i = 0; i < ndir; i++)
        free(dir_names[i]);
    free(dir_names);
    if (st) {
        for (size_t i = 0; i < n; i++)
            free(items[i]);
        free(items);
        return st;
    }
    if (n == 0) {
        free(items);
        return yc_error_status(YC_EFORMAT,
                               "no images or videos found in %s%s (supported formats: images: "
                               "bmp dng jpeg jpg mpo png tif tiff webp pfm; videos: asf avi gif "
                               "m4v mkv mov mp4 mpeg mpg ts wmv webm)",
                               source, dir ? "/" : "");
    }
    return make_list(items, n, out);
}

/* ------------------------------------------------------------------------------------------------
 * detect.py's loop
 * ---------------------------------------------------------------------------------------------- */

static bool has_suffix_ci(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

int yc_detect_save_annotated(const yc_image *im, const char *save_dir, const char *src)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", save_dir, yc_path_basename(src));
    bool jpg = has_suffix_ci(path, ".jpg") || has_suffix_ci(path, ".jpeg");
    bool png = has_suffix_ci(path, ".png");
    if (jpg || png) {
        void *buf = NULL;
        size_t len = 0;
        int st = yc_encode_rgb(im->data, im->w, im->h, jpg ? YC_IMAGE_JPEG : YC_IMAGE_PNG, 95,
                               &buf, &len);
        if (!st)
            st = yc_write_file_atomic(path, buf, len);
        yc_encoded_free(buf);
        return st;
    }
    if (yc_image_save(im, path, 0) == YC_OK)
        return YC_OK;
    char stem[512];
    yc_path_stem(src, stem, sizeof stem);
    yc_warn("%s: %s; writing %s/%s.jpg instead", path, yc_last_error(), save_dir, stem);
    snprintf(path, sizeof path, "%s/%s.jpg", save_dir, stem);
    void *buf = NULL;
    size_t len = 0;
    int st = yc_encode_rgb(im->data, im->w, im->h, YC_IMAGE_JPEG, 95, &buf, &len);
    if (!st)
        st = yc_write_file_atomic(path, buf, len);
    yc_encoded_free(buf);
    return st;
}

int yc_detect_save_crop(const yc_image *im, const float *xyxy, const char *save_dir,
                        const char *name, const char *src, yc_image *tmp)
{
    float b[4] = {xyxy[0], xyxy[1], xyxy[2], xyxy[3]};
    yc_xyxy2xywh(b, 1, 4);
    b[2] = b[2] * 1.02f + 10.0f;
    b[3] = b[3] * 1.02f + 10.0f;
    yc_xywh2xyxy(b, 1, 4);
    long c[4];
    for (int k = 0; k < 4; k++)
        c[k] = (long)b[k]; /* .long(): truncation */
    for (int k = 0; k < 4; k += 2) {
        c[k] = c[k] < 0 ? 0 : c[k] > im->w ? im->w : c[k];
        c[k + 1] = c[k + 1] < 0 ? 0 : c[k + 1] > im->h ? im->h : c[k + 1];
    }
    int cw = (int)(c[2] - c[0]), ch = (int)(c[3] - c[1]);
    if (cw < 1 || ch < 1)
        return YC_OK;
    int st = yc_image_reserve(tmp, ch, cw);
    if (st)
        return st;
    for (int y = 0; y < ch; y++)
        memcpy(tmp->data + (size_t)y * cw * 3,
               im->data + ((size_t)(c[1] + y) * im->w + (size_t)c[0]) * 3, (size_t)cw * 3);
    char dir[PATH_MAX], stem[512], path[PATH_MAX + 600];
    snprintf(dir, sizeof dir, "%s/crops/%s", save_dir, name);
    if ((st = yc_mkdirs(dir)))
        return st;
    yc_path_stem(src, stem, sizeof stem);
    snprintf(path, sizeof path, "%s/%s.jpg", dir, stem);
    for (int k = 2; yc_file_exists(path) && k < 10000; k++)
        snprintf(path, sizeof path, "%s/%s%d.jpg", dir, stem, k);
    char opts[PATH_MAX + 700];
    snprintf(opts, sizeof opts, "%s[Q=95,subsample-mode=off]", path);
    return yc_image_save(tmp, opts, 0);
}

void yc_detect_describe(char *buf, size_t len, const float *dets, int nd,
                        const char *const *names, int nc)
{
    size_t used = 0;
    buf[0] = 0;
    int prev = -1;
    for (;;) {
        int c = INT_MAX, count = 0;
        for (int i = 0; i < nd; i++) {
            int k = (int)dets[(size_t)i * 6 + 5];
            if (k > prev && k < c)
                c = k;
        }
        if (c == INT_MAX)
            break;
        for (int i = 0; i < nd; i++)
            count += (int)dets[(size_t)i * 6 + 5] == c;
        char num[24];
        snprintf(num, sizeof num, "class%d", c);
        const char *name = names && c >= 0 && c < nc && names[c] ? names[c] : num;
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%d %s%s, ", count, name,
                                     count > 1 ? "s" : "");
        prev = c;
    }
}

/* yc_detect_write_labels into save_dir/labels/<name>.txt */
static int write_labels_named(const char *save_dir, const char *name, const float *dets, int nd,
                              int img_w, int img_h, bool save_conf)
{
    if (nd <= 0)
        return YC_OK;
    char path[PATH_MAX + 600], line[256];
    snprintf(path, sizeof path, "%s/labels/%s.txt", save_dir, name);
    FILE *fp = fopen(path, "a");
    if (!fp)
        return yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
    for (int i = nd - 1; i >= 0; i--) {
        const float *r = dets + (size_t)i * 6;
        yc_format_txt_line(line, sizeof line, r, r[4], (int)r[5], img_w, img_h, save_conf);
        fputs(line, fp);
    }
    if (ferror(fp) | (fclose(fp) != 0))
        return yc_error_status(YC_EIO, "cannot write %s", path);
    return YC_OK;
}

int yc_detect_write_labels(const char *save_dir, const char *src, const float *dets, int nd,
                           int img_w, int img_h, bool save_conf)
{
    char stem[512];
    yc_path_stem(src, stem, sizeof stem);
    return write_labels_named(save_dir, stem, dets, nd, img_w, img_h, save_conf);
}

const char *yc_detect_class_name(const yc_detect_style *s, int cls, char *buf, size_t len)
{
    if (s->names && cls >= 0 && cls < s->nc && s->names[cls])
        return s->names[cls];
    snprintf(buf, len, "class%d", cls);
    return buf;
}

/* The label text of one detection ("" with hide_labels). */
static void label_text(const float *r, const yc_detect_style *s, char *label, size_t len)
{
    char num[24];
    const char *name = yc_detect_class_name(s, (int)r[5], num, sizeof num);
    label[0] = 0;
    if (!s->hide_labels) {
        if (s->hide_conf)
            snprintf(label, len, "%s", name);
        else
            snprintf(label, len, "%s %.2f", name, (double)r[4]);
    }
}

static int style_width(const yc_detect_style *s)
{
    return s->line_thickness > 0 ? s->line_thickness : 3;
}

void yc_detect_draw(yc_canvas *c, int ox, int oy, const float *dets, int nd,
                    const yc_detect_style *s)
{
    const int lw = style_width(s);
    for (int i = nd - 1; i >= 0; i--) {
        const float *r = dets + (size_t)i * 6;
        char label[160];
        int b[4];
        label_text(r, s, label, sizeof label);
        yc_label_bounds((int)r[0], (int)r[1], (int)r[2], (int)r[3], label, lw, b);
        if (b[2] < ox || b[3] < oy || b[0] >= ox + c->w || b[1] >= oy + c->h)
            continue;
        yc_draw_label_at(c, ox, oy, (int)r[0], (int)r[1], (int)r[2], (int)r[3], label, lw, lw,
                         yc_color_class((int)r[5]));
    }
}

int yc_detect_make_dirs(const yc_detect_save *save)
{
    int st = YC_OK;
    char dir[PATH_MAX];
    if (save->save_dir && (st = yc_mkdirs(save->save_dir)))
        return st;
    if (save->save_txt && save->save_dir) {
        snprintf(dir, sizeof dir, "%s/labels", save->save_dir);
        st = yc_mkdirs(dir);
    }
    return st;
}

yc_detect_style yc_detect_style_of(const yc_detect_save *save, const char *const *names, int nc)
{
    return (yc_detect_style){.names = names, .nc = nc, .line_thickness = save->line_thickness,
                             .hide_labels = save->hide_labels, .hide_conf = save->hide_conf};
}

/* The stem detect.py names a source's outputs by: Path(p).stem, where p is the source itself
 * for a file and, for a live source, the source with clean_str's characters replaced by '_'
 * ("rtsp://host/cam.sdp" -> "cam"; "0" -> "0"). */
static void source_stem(const char *src, bool live, char *stem, size_t len)
{
    char clean[PATH_MAX];
    snprintf(clean, sizeof clean, "%s", src);
    for (char *c = clean; live && *c; c++)
        if (strchr("|@#!$%&()=?^*;:,><+", *c))
            *c = '_';
    yc_path_stem(clean, stem, len);
}

/* What the loop over the sources carries from one to the next. */
typedef struct detect_loop {
    yc_detector *d;
    const yc_detect_save *save;
    yc_detect_style style;
    yc_detect_summary *sum;
    const char *const *names;
    int nc;
    /* the decoded picture, scratch for crops */
    yc_image img, crop;
    /* totals of the three stages, milliseconds */
    double t_pre, t_inf, t_nms;
    /* the encoder has been named once */
    bool codec_said;
} detect_loop;

/* Adds a frame's or an image's times and detections to the totals. */
static void count_picture(detect_loop *L, int nd, const yc_detect_times *tm)
{
    L->sum->images++;
    L->sum->detections += (size_t)nd;
    L->t_pre += tm->pre;
    L->t_inf += tm->inf;
    L->t_nms += tm->nms;
}

/* The annotated video of src: save_dir/<stem>.mp4 (detect.py's with_suffix('.mp4')), w x h at
 * fps. */
static int open_video_out(detect_loop *L, const char *stem, int w, int h, double fps,
                          yc_video_writer **vw)
{
    char path[PATH_MAX + 600];
    snprintf(path, sizeof path, "%s/%s.mp4", L->save->save_dir, stem);
    const char *codec = NULL;
    int st = yc_video_writer_open(vw, path, w, h, fps, &codec);
    if (st)
        return st;
    if (!L->codec_said && strcmp(codec, "libx264") && strcmp(codec, "libopenh264"))
        yc_info("%s: this FFmpeg has no H.264 encoder: the annotated videos are %s", path,
                codec);
    L->codec_said = true;
    return YC_OK;
}

/* One video file or live source through detect.py's loop: LoadImages's frames of a file (every
 * vid_stride-th, numbered from 1, of int(frame count / vid_stride)), LoadStreams's of a live
 * source (the newest each time, numbered from 0); labels/<stem>_<frame>.txt, crops, the annotated
 * video save_dir/<stem>.mp4 at the file's frame rate (30 for a live source, as detect.py) and a
 * line per frame.  A source that does not open is skipped with a warning, one that fails part way
 * ends there with one (its annotated video keeps the frames before). */
static int detect_video(detect_loop *L, const char *src, size_t index, size_t nfiles)
{
    const yc_detect_save *save = L->save;
    const bool live = yc_is_live_source(src);
    const int stride = save->vid_stride > 1 ? save->vid_stride : 1;
    yc_video_reader *vr = NULL;
    yc_video_info info;
    int st = yc_video_open(&vr, src, live, &info);
    /* a live source is the whole run: one that does not open fails it (detect.py asserts) */
    if (st == YC_ENOMEM || (st && live))
        return st;
    if (st) {
        yc_warn("skipping a video: %s", yc_last_error());
        L->sum->skipped++;
        return YC_OK;
    }
    char stem[512], *real = live || yc_is_url(src) ? NULL : realpath(src, NULL);
    const char *shown = real ? real : src;
    source_stem(src, live, stem, sizeof stem);
    /* crops are named by yc_detect_save_crop after the stem of what it is given */
    char crop_name[600];
    snprintf(crop_name, sizeof crop_name, "%s.mp4", stem);
    const long long total = live ? 0 : info.frames / stride;
    yc_video_writer *vw = NULL;
    long long frame = live ? -1 : 0;
    while (!st && !(save->stop && *save->stop)) {
        bool got;
        int rd = yc_video_read(vr, stride - 1, &L->img, &got);
        if (rd == YC_ENOMEM) {
            st = rd;
            break;
        }
        if (rd) {
            yc_warn("%s; the video ends there", yc_last_error());
            L->sum->videos_cut++;
            break;
        }
        if (!got)
            break;
        frame++;
        const float *dets;
        int nd, ih, iw;
        yc_detect_times tm;
        if ((st = yc_detector_run(L->d, &L->img, &dets, &nd, &ih, &iw, &tm)))
            break;
        count_picture(L, nd, &tm);
        const int w0 = L->img.w, h0 = L->img.h;
        if (save->save_txt && save->save_dir) {
            char name[600];
            snprintf(name, sizeof name, "%s_%lld", stem, frame);
            if ((st = L->d->im->m->nm > 0
                          ? write_segments_named(L->d, save->save_dir, name, dets, nd, w0, h0,
                                                 save->save_conf)
                          : write_labels_named(save->save_dir, name, dets, nd, w0, h0,
                                               save->save_conf)))
                break;
        }
        for (int i = nd - 1; i >= 0 && !st && save->save_crop && save->save_dir; i--) {
            const float *r = dets + (size_t)i * 6;
            char num[24];
            const char *name = yc_detect_class_name(&L->style, (int)r[5], num, sizeof num);
            st = yc_detect_save_crop(&L->img, r, save->save_dir, name, crop_name, &L->crop);
        }
        if (!st && save->save_img && save->save_dir) {
            /* drawn on the frame itself: its crops are saved already */
            if ((st = yc_detect_draw_masks(L->d, &L->img, dets, nd, save->retina_masks)))
                break;
            yc_canvas cv = yc_canvas_wrap(L->img.data, w0, h0);
            yc_detect_draw(&cv, 0, 0, dets, nd, &L->style);
            if (!vw)
                st = open_video_out(L, stem, w0, h0, live || !(info.fps > 0) ? 30 : info.fps,
                                    &vw);
            if (!st)
                st = yc_video_write(vw, &L->img);
        }
        if (!st && save->print) {
            char desc[2048];
            yc_detect_describe(desc, sizeof desc, dets, nd, L->names, L->nc);
            if (live)
                printf("0: %dx%d %s%s%.1fms\n", ih, iw, desc, nd ? "" : "(no detections), ",
                       tm.inf);
            else
                printf("video %zu/%zu (%lld/%lld) %s: %dx%d %s%s%.1fms\n", index + 1, nfiles,
                       frame, total, shown, ih, iw, desc, nd ? "" : "(no detections), ", tm.inf);
            fflush(stdout);
        }
    }
    int cst = yc_video_writer_close(vw);
    if (!st)
        st = cst;
    if (!st && !live && info.frames_exact && yc_video_frames_read(vr) < total &&
        !(save->stop && *save->stop)) {
        yc_warn("%s: %lld of its %lld frames read: the file is cut short or corrupt", shown,
                yc_video_frames_read(vr), total);
        L->sum->videos_cut++;
    }
    yc_video_close(vr);
    free(real);
    return st;
}

int yc_detect_files(yc_detector *d, const yc_path_list *files, const char *const *names, int nc,
                    const yc_detect_save *save, yc_detect_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    int st = yc_detect_make_dirs(save);
    if (st)
        return st;
    detect_loop L = {.d = d, .save = save, .style = yc_detect_style_of(save, names, nc),
                     .sum = sum, .names = names, .nc = nc, .img = YC_IMAGE_INIT,
                     .crop = YC_IMAGE_INIT};
    yc_image tmp = YC_IMAGE_INIT, ann = YC_IMAGE_INIT;
    const yc_read_limits lim = yc_read_limits_resolve(&save->limits);
    bool warned_crops = false;
    for (size_t f = 0; f < files->n && !st && !(save->stop && *save->stop); f++) {
        const char *src = files->paths[f];
        if (yc_is_video_path(src) || yc_is_live_source(src)) {
            st = detect_video(&L, src, f, files->n);
            continue;
        }
        yc_image_header hdr;
        int rd = yc_image_decode_bounded(src, lim.exact_pixels, &L.img, &tmp, NULL, &hdr);
        bool reduced = rd == YC_DECODE_OVER;
        if (reduced) {
            /* too large to hold whole: read straight to the letterbox's unpadded size */
            yc_letterbox_info g;
            yc_read_info ri;
            yc_detector_geometry(d, hdr.h, hdr.w, &g);
            rd = yc_image_read_reduced(src, &hdr, g.unpad_h, g.unpad_w, YC_INTERP_LINEAR, &lim,
                                       &L.img, &tmp, &ri);
            if (rd && ri.too_large) {
                char why[1024];
                snprintf(why, sizeof why, "%s", yc_last_error());
                rd = yc_error_status(rd, "%s: detect it in windows with --slice SIZE (or raise "
                                     "--max-pixels)", why);
            }
        }
        if (rd == YC_ENOMEM) {
            st = rd;
            break;
        }
        if (rd != YC_OK) {
            /* the reader's messages begin with the file's name already */
            const char *e = yc_last_error();
            size_t n = strlen(src);
            if (!strncmp(e, src, n) && e[n] == ':')
                yc_warn("skipping %s", e);
            else
                yc_warn("skipping %s: %s", src, e);
            sum->skipped++;
            continue;
        }
        const yc_image *img = &L.img;
        const int h0 = reduced ? hdr.h : img->h, w0 = reduced ? hdr.w : img->w;
        const float *dets;
        int nd, ih, iw;
        yc_detect_times tm;
        if ((st = reduced ? yc_detector_run_reduced(d, img, h0, w0, &dets, &nd, &ih, &iw, &tm)
                          : yc_detector_run(d, img, &dets, &nd, &ih, &iw, &tm)))
            break;
        count_picture(&L, nd, &tm);
        if (save->visualize && save->save_dir &&
            (st = yc_detector_visualize(d, save->save_dir, src)))
            break;
        if (reduced && d->im->m->nm > 0 && nd > 0)
            yc_warn("%s: %dx%d is read reduced: its masks are neither drawn nor saved", src, w0,
                    h0);
        if (save->save_txt && save->save_dir &&
            (st = d->im->m->nm > 0 && !reduced
                      ? yc_detect_write_segments(d, save->save_dir, src, dets, nd, w0, h0,
                                                 save->save_conf)
                      : yc_detect_write_labels(save->save_dir, src, dets, nd, w0, h0,
                                               save->save_conf)))
            break;
        if (reduced && save->save_crop && save->save_dir && nd > 0 && !warned_crops) {
            yc_warn("%s: %dx%d is read reduced, never held whole: no crops are saved for such "
                    "images", src, w0, h0);
            warned_crops = true;
        }
        if (reduced && save->save_img && save->save_dir) {
            if ((st = yc_detect_save_annotated_lazy(src, w0, h0, dets, nd, &L.style,
                                                    save->save_dir, YC_SLICE_PLAIN_MAX)))
                break;
        }
        if (!reduced && save->save_crop && save->save_dir)
            for (int i = nd - 1; i >= 0 && !st; i--) {
                const float *r = dets + (size_t)i * 6;
                char num[24];
                const char *name = yc_detect_class_name(&L.style, (int)r[5], num, sizeof num);
                st = yc_detect_save_crop(img, r, save->save_dir, name, src, &L.crop);
            }
        if (!st && !reduced && save->save_img && save->save_dir) {
            if ((st = yc_image_copy(&ann, img)) ||
                (st = yc_detect_draw_masks(d, &ann, dets, nd, save->retina_masks)))
                break;
            yc_canvas cv = yc_canvas_wrap(ann.data, ann.w, ann.h);
            yc_detect_draw(&cv, 0, 0, dets, nd, &L.style);
            st = yc_detect_save_annotated(&ann, save->save_dir, src);
        }
        if (save->print) {
            char desc[2048], *real = realpath(src, NULL);
            yc_detect_describe(desc, sizeof desc, dets, nd, names, nc);
            printf("image %zu/%zu %s: %dx%d %s%s%.1fms\n", f + 1, files->n, real ? real : src, ih,
                   iw, desc, nd ? "" : "(no detections), ", tm.inf);
            free(real);
            fflush(stdout);
        }
    }
    if (!st && sum->images) {
        sum->t_pre = L.t_pre / sum->images;
        sum->t_inf = L.t_inf / sum->images;
        sum->t_nms = L.t_nms / sum->images;
    }
    if (!st && save->save_txt && save->save_dir)
        sum->n_label_files = yc_count_label_files(save->save_dir);
    if (!st && save->print) {
        printf("Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape "
               "(1, 3, %d, %d)\n",
               sum->t_pre, sum->t_inf, sum->t_nms, d->opt.img_h, d->opt.img_w);
        if (save->save_dir) {
            printf("Results saved to %s\n", save->save_dir);
            if (save->save_txt)
                printf("%d labels saved to %s/labels\n", sum->n_label_files, save->save_dir);
        }
    }
    yc_image_free(&L.img);
    yc_image_free(&L.crop);
    yc_image_free(&tmp);
    yc_image_free(&ann);
    return st;
}
