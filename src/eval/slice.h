/* Sliced detection (issue 7, `yolocl detect --slice SIZE`), after SAHI's sliced inference
 * (sahi/predict.py get_sliced_prediction):
 *
 *   1. the image is cut into the windows of yc_tile_grid(w, h, SIZE, overlap) (tile.h);
 *   2. each window is read through libvips without decoding the whole image when it is large
 *      (slice_image.h), letterboxed to the detector's input size, run through the model, decoded,
 *      NMS'd with the usual detect thresholds and its boxes scaled back to the window and rounded
 *      (yc_detector_run), then moved to image pixels (yc_tile_dets_to_image);
 *   3. optionally (full) the whole image, reduced to the input size through libvips' shrink-on-load
 *      (yc_slice_read_thumbnail; an image decoded whole is passed as it is and the letterbox
 *      reduces it, as normal detection), is run too and its boxes scaled to image pixels;
 *   4. all detections are merged with yc_slice_merge (slice_merge.h: NMM with IoS 0.5 as SAHI by
 *      default, or NMS with IoU) and the best max_det are kept (the slice options' max_det, else
 *      the detector's).
 *
 * One window at a time goes through the model (batch 1), and the detector should be made with
 * fixed_shape so that every window and the full pass share one inference graph planned for the
 * input size.  Host memory for pixels: one window, one letterboxed input, and the source's band
 * or region (slice_image.h). */
#ifndef YC_SLICE_H
#define YC_SLICE_H

#include <stdbool.h>
#include <stddef.h>

#include "detect.h"
#include "slice_image.h"
#include "slice_merge.h"
#include "tile.h"

/* Settings of sliced detection. */
typedef struct yc_slice_options {
    /* window side in pixels (>= 1) */
    int tile;
    /* fraction of a window shared with its neighbour, in [0, 1) (SAHI's overlap ratio, 0.2) */
    double overlap;
    /* how the windows' detections are merged (yc_merge_params_nmm(): NMM, IoS, 0.5) */
    yc_merge_params merge;
    /* add a pass on the whole image reduced to the input size (SAHI's perform_standard_pred) */
    bool full;
    /* images at most this many pixels wide and high are decoded whole (YC_SLICE_DECODE_MAX) */
    int decode_max;
    /* annotated images larger than this on either side are written as tiled pyramidal TIFF
     * (<stem>.tif), others in the source's format as detect does (YC_SLICE_PLAIN_MAX) */
    int plain_max;
    /* detections kept per image after merging; 0: the detector's max_det (which also bounds
     * each window's) */
    int max_det;
} yc_slice_options;

/* Default plain_max: annotated images up to 8192 x 8192 keep the source's format. */
#define YC_SLICE_PLAIN_MAX 8192

/* tile 640, overlap 0.2, NMM IoS 0.5, no full pass, decode_max YC_SLICE_DECODE_MAX, plain_max
 * YC_SLICE_PLAIN_MAX, max_det 0. */
void yc_slice_options_default(yc_slice_options *o);

/* Detections of one image in image pixels, gathered from its windows. */
typedef struct yc_slice_dets {
    /* n rows of YC_MERGE_DET_STRIDE floats (x1, y1, x2, y2, conf, cls) */
    float *rows;
    /* rows used */
    size_t n;
    /* rows allocated */
    size_t cap;
} yc_slice_dets;

/* An empty set (no buffer). */
#define YC_SLICE_DETS_INIT {NULL, 0, 0}

/* Empties the set, keeping its buffer. */
void yc_slice_dets_clear(yc_slice_dets *a);
/* Frees the buffer and empties the set. */
void yc_slice_dets_free(yc_slice_dets *a);

/* Appends n detections of window `win` (rows in pixels of the window, as yc_detector_run gives
 * them for the window's pixels) moved to image pixels by the window origin. */
int yc_slice_dets_add_window(yc_slice_dets *a, const float *dets, size_t n, yc_tile_window win);

/* Appends n detections of a reduced copy of an img_w x img_h image (rows in pixels of the copy):
 * x coordinates times sx, y coordinates times sy, rounded to the nearest pixel (halves to even,
 * as detect rounds), clipped to [0, img_w] x [0, img_h]. */
int yc_slice_dets_add_scaled(yc_slice_dets *a, const float *dets, size_t n, double sx, double sy,
                             int img_w, int img_h);

/* out = the detections of `a` merged with p (yc_slice_merge), best first, at most max_det (>= 1)
 * of them.  out must differ from a; its buffer is reused. */
int yc_slice_dets_merge(const yc_slice_dets *a, const yc_merge_params *p, int max_det,
                        yc_slice_dets *out);

/* What sliced detection of one image did. */
typedef struct yc_slice_info {
    /* windows run through the model, not counting the full pass */
    int windows;
    /* true when the full pass ran */
    bool full;
    /* letterboxed input size of the last pass (h x w) */
    int in_h, in_w;
    /* detections before merging */
    size_t raw;
    /* summed times of every pass, milliseconds */
    yc_detect_times times;
} yc_slice_info;

/* Sliced detection of the image open in src (its file is `path`, read again for the full pass):
 * steps 1-4 above with d's thresholds and max_det.  out gets the merged detections, best first,
 * in image pixels; `scratch` holds the unmerged ones (both reused between images).  info may be
 * NULL. */
int yc_slice_detect_image(yc_detector *d, yc_slice_source *src, const char *path,
                          const yc_slice_options *o, yc_slice_dets *scratch, yc_slice_dets *out,
                          yc_slice_info *info);

/* yc_detect_files with sliced detection: for each file, yc_slice_detect_image, then the outputs of
 * `save` as detect writes them (labels normalised to the whole image, crops, the annotated image)
 * with these differences:
 *   - the annotated image of an image decoded whole is drawn in memory and written as detect
 *     writes it; that of a larger image is drawn strip by strip while libvips writes it
 *     (yc_slice_write_annotated), in the source's format up to plain_max on both sides, else as
 *     a tiled pyramidal TIFF save_dir/<stem>.tif;
 *   - crops (save_crop) are cut from images decoded whole; larger images are never held whole
 *     (and a JPEG or PNG would need one more pass over the file per crop), so their crops are
 *     not written and a warning says so once per run;
 *   - the per-image line reads "image 1/2 PATH: 1100x1500 in 12 slices (+ full) at 640x640
 *     2 persons, 1 bus, 812.4ms" (image size, windows, input size, classes, summed inference
 *     time) and the speed line gives times per slice.
 * A file that cannot be opened or read is reported (warning) and skipped. */
int yc_detect_files_sliced(yc_detector *d, const yc_path_list *files, const char *const *names,
                           int nc, const yc_detect_save *save, const yc_slice_options *o,
                           yc_detect_summary *sum);

/* The annotated image of a w x h source that is never held whole: `src` read again and drawn on
 * strip by strip as libvips writes it (yc_slice_write_annotated) into save_dir, in the source's
 * format, or as a tiled pyramidal TIFF <stem>.tif when either side exceeds plain_max. */
int yc_detect_save_annotated_lazy(const char *src, int w, int h, const float *dets, int nd,
                                  const yc_detect_style *style, const char *save_dir,
                                  int plain_max);

#endif
