/* YOLOv5 v7.0's segmentation samples (utils/segment/dataloaders.py LoadImagesAndLabelsAndMasks,
 * utils/segment/augmentations.py): the polygons of each label carried through mosaic, random
 * perspective, mixup, copy-paste and letterbox, the masks made from them (masks.h), and the flips
 * applied to the masks.  Pixels, HSV and the random draws follow augment.h: the same generator
 * calls in YOLOv5's order, with these segment-loader differences:
 *   - load_mosaic draws its 3 partners with random.choices and does not shuffle them (the
 *     detection loader does),
 *   - random_perspective resamples each polygon to 1000 points (resample_segments: the polygon
 *     closed, np.interp at np.linspace(0, n, 1000)), transforms them (float64), takes each box
 *     from the transformed points inside the output (segment2box: (0, 0, 0, 0) when none is, or
 *     when all their x are 0) and keeps the candidates with area_thr 0.01 (not 0.10); the
 *     polygons are not clipped,
 *   - copy_paste (hyp copy_paste > 0, in load_mosaic before random_perspective): round(p n) of
 *     the n polygons drawn without replacement (random.sample); each mirrored left-right is added
 *     (label and polygon) when its box covers under 30% of every existing box (bbox_ioa), its
 *     pixels copied from the flipped mosaic through the filled polygon (cv2.drawContours),
 *   - mixup concatenates the polygons too (YOLOv5's np.concatenate fails when one of the two
 *     mosaics kept no label; here the other's are kept),
 *   - random.sample in copy_paste is drawn as its pool method (k draws below n, n - 1, ...),
 *     whatever n is (Python switches to set selection for larger n).
 * Polygons are doubles: float32 while YOLOv5 holds them in float32 (xyn2xy, the mosaic clip: the
 * arithmetic is done in float), float64 after resampling.  The transform multiplies in plain
 * double (YOLOv5's xy @ M.T goes through BLAS, which may fuse; a point can differ in its last
 * bit, which matters only where a coordinate truncates to another integer in the mask).
 *
 * Threads: as augment.h; one yc_seg_scratch per loader thread. */
#ifndef YC_AUGMENT_SEG_H
#define YC_AUGMENT_SEG_H

#include "augment.h"
#include "masks.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The polygons of one sample, in the order of its label rows: polygon k has count[k] points at
 * xy + 2 * first[k] ((x, y) pairs). */
typedef struct yc_segs {
    /* number of polygons, and entries allocated in first and count */
    int n, cap;
    size_t *first;
    uint32_t *count;
    /* points used and allocated at xy */
    size_t npts, cap_pts;
    double *xy;
} yc_segs;

#define YC_SEGS_INIT {0, 0, NULL, NULL, 0, 0, NULL}

/* Appends one polygon of n points (2n values), from floats or doubles. */
int yc_segs_push_f32(yc_segs *s, const float *xy, uint32_t n);
int yc_segs_push(yc_segs *s, const double *xy, uint32_t n);
/* dst += src (np.concatenate); dst = src. */
int yc_segs_append(yc_segs *dst, const yc_segs *src);
int yc_segs_copy(yc_segs *dst, const yc_segs *src);
/* Keeps the polygons whose keep[k] is true, in order. */
void yc_segs_keep(yc_segs *s, const bool *keep);
void yc_segs_free(yc_segs *s);

/* xyn2xy on polygons from..n-1, in float32: x = w x + padw, y = h y + padh. */
void yc_segs_xyn2xy(yc_segs *s, int from, double w, double h, double padw, double padh);

/* resample_segments(segments, n): each polygon of src closed and linearly interpolated at n
 * points evenly spaced along its vertex index, into dst (float64 as numpy's interp). */
int yc_segs_resample(const yc_segs *src, yc_segs *dst, int n);

/* segment2box of n points (xy) with the output size: the min/max of the points inside
 * [0, width] x [0, height]; (0, 0, 0, 0) when no point is inside or all their x are 0. */
void yc_segment2box(const double *xy, size_t n, double width, double height, double box[4]);

/* The segment random_perspective's label part for a matrix M (augment.h) already drawn with
 * scale `scale` and output size out_h x out_w: labels (pixel xyxy, one polygon each in segs) are
 * replaced by the boxes of their resampled, transformed polygons, those failing box_candidates
 * (area_thr 0.01) removed with their polygons; segs become the transformed 1000-point polygons.
 * `tmp` is scratch. */
int yc_seg_warp_labels(yc_labels *labels, yc_segs *segs, yc_segs *tmp, const double M[9],
                       bool perspective, double scale, int out_h, int out_w);

/* random_perspective with segments: draws, warps the image (augment.h yc_random_perspective's
 * rules) and applies yc_seg_warp_labels when there are labels. */
int yc_seg_random_perspective(const yc_image *src, yc_image *dst, yc_labels *labels,
                              yc_segs *segs, yc_segs *tmp, const yc_hyp *hyp, int border_y,
                              int border_x, yc_rng *rng);

/* copy_paste(im, labels, segments, p) as described above; labels pixel xyxy, one polygon each. */
int yc_seg_copy_paste(yc_image *im, yc_labels *labels, yc_segs *segs, double p, yc_rng *rng,
                      yc_mask_scratch *ms);
/* Its deterministic part: the k polygons chosen (indices, in random.sample's order) tried in
 * turn. */
int yc_seg_copy_paste_at(yc_image *im, yc_labels *labels, yc_segs *segs, const int *chosen,
                         int k, yc_mask_scratch *ms);

/* Fetches image `index` as yc_sample_loader does, and its polygons, normalised as in the label
 * files, one per label row, into segs. */
typedef int (*yc_seg_sample_loader)(void *ctx, int index, bool augment, yc_image *img,
                                    yc_image *tmp, yc_load_info *info, yc_labels *labels,
                                    yc_segs *segs);

/* Per-thread buffers (zero-initialise with YC_SEG_SCRATCH_INIT, free with
 * yc_seg_scratch_free). */
typedef struct yc_seg_scratch {
    /* images and labels as the detection pipeline uses them */
    yc_aug_scratch a;
    /* polygons of the current image, the sample, the mixup partner, and resampling scratch */
    yc_segs tile_segs, segs, mix_segs, tmp;
    /* the rasteriser's scratch */
    yc_mask_scratch ms;
    /* the sample's masks: mask_n of mask_h x mask_w floats (cap_masks allocated) */
    float *masks;
    size_t cap_masks;
    int mask_n, mask_h, mask_w;
    /* the overlap order (cap_order entries) and the reordered labels */
    int *order;
    int cap_order;
    yc_labels sorted;
} yc_seg_scratch;

#define YC_SEG_SCRATCH_INIT                                                                     \
    {YC_AUG_SCRATCH_INIT, YC_SEGS_INIT, YC_SEGS_INIT, YC_SEGS_INIT, YC_SEGS_INIT,              \
     YC_MASK_SCRATCH_INIT, NULL, 0, 0, 0, 0, NULL, 0, YC_LABELS_INIT}

void yc_seg_scratch_free(yc_seg_scratch *s);

/* What the masks look like: the downsample ratio (segment/train.py --mask-ratio, >= 1, dividing
 * the image sides) and overlap (one index map per image, YOLOv5's default) or one mask per
 * label. */
typedef struct yc_mask_params {
    int ratio;
    bool overlap;
} yc_mask_params;

/* The masks of a sample of h x w pixels with labels (xywhn, in rows order) and their polygons
 * (pixels), as __getitem__ makes them: overlap: polygons2masks_overlap and the labels reordered
 * to its order (labels[sorted_idx]); else polygons2masks.  With no labels: one zero map
 * (overlap) or no mask.  Into s->masks, mask_n, mask_h, mask_w. */
int yc_seg_make_masks(yc_seg_scratch *s, const yc_mask_params *mp, int h, int w,
                      yc_labels *labels, const yc_segs *segs);

/* load_mosaic of the segment loader (see above): s x s image in dst, pixel xyxy labels and their
 * polygons. */
int yc_seg_load_mosaic(yc_seg_scratch *s, const yc_sample_params *p, int index,
                       yc_seg_sample_loader load, void *ctx, yc_rng *rng, yc_image *dst,
                       yc_labels *labels, yc_segs *segs);

/* One segmentation training sample, __getitem__ with augment=True: mosaic (and mixup) or the
 * letterboxed image with random_perspective, labels to xywhn (clip, eps 1e-3), the masks
 * (yc_seg_make_masks), HSV, flipud and fliplr of the image, labels and masks.  Image as
 * yc_train_sample; labels (class, x, y, w, h) to out; masks in s. */
int yc_seg_train_sample(yc_seg_scratch *s, const yc_sample_params *p, const yc_mask_params *mp,
                        int index, yc_seg_sample_loader load, void *ctx, yc_rng *rng,
                        uint8_t *chw, int *out_h, int *out_w, yc_labels *out);

/* A segmentation validation sample (augment=False): yc_val_sample's image and labels, polygons
 * scaled and padded as the labels (xyn2xy with ratio and pad, not clipped), then the masks. */
int yc_seg_val_sample(yc_seg_scratch *s, const yc_mask_params *mp, int index, int shape_h,
                      int shape_w, yc_seg_sample_loader load, void *ctx, uint8_t *chw,
                      yc_labels *out, yc_val_info *info);

#endif
