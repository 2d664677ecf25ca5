/* YOLOv5's training and validation samples (utils/dataloaders.py __getitem__, load_mosaic,
 * utils/augmentations.py): mosaic, random perspective, mixup, HSV jitter, flips, letterbox, label
 * conversions, and the multi-scale batch resize.
 *
 * Everything is a pure function of its inputs and an explicit yc_rng: the caller seeds the
 * generator per sample (e.g. from seed, epoch and index) and gets the same bytes on any thread
 * and in any order.  Random draws happen in YOLOv5's order (Python's random / numpy draws mapped
 * one to one onto yc_rng), although the numbers themselves differ from Python's generator.
 *
 * Pixel arithmetic follows OpenCV where YOLOv5 uses it: the warp is cv2.warpAffine /
 * warpPerspective with INTER_LINEAR (1/32-pixel fixed-point coordinates, 15-bit weights, border
 * 114), HSV conversions are OpenCV's 8-bit RGB<->HSV (H in 0..179), resizes are image.h's.
 *
 * Segments (polygon labels) are not used here: boxes are warped by their 4 corners as YOLOv5's
 * detection loader does; the segmentation loader's pipeline, copy_paste included, is
 * augment_seg.h.  Albumentations
 * (off in YOLOv5 unless the package is installed) is not reproduced.
 *
 * Threads: nothing here uses OpenMP or global state; run one sample per loader thread, each with
 * its own yc_aug_scratch. */
#ifndef YC_AUGMENT_H
#define YC_AUGMENT_H

#include "hyp.h"
#include "image.h"
#include "rng.h"

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------------
 * Labels
 * ---------------------------------------------------------------------------------------------- */

/* Labels of one image: rows of 5 floats, (class, b0, b1, b2, b3), as YOLOv5's (n, 5) float32
 * arrays.  The box convention is stated by each function: "xywhn" = centre x, centre y, width,
 * height normalised to the image (the label files); "xyxy" = corners in pixels. */
typedef struct yc_labels {
    /* number of rows */
    int n;
    /* rows allocated at v */
    int cap;
    /* n * 5 floats, row-major */
    float *v;
} yc_labels;

/* No labels, no buffer. */
#define YC_LABELS_INIT {0, 0, NULL}

/* Makes room for n rows in total (contents kept). */
int yc_labels_reserve(yc_labels *l, int n);
/* Appends one row. */
int yc_labels_push(yc_labels *l, float cls, float b0, float b1, float b2, float b3);
/* dst = src (dst's buffer reused). */
int yc_labels_copy(yc_labels *dst, const yc_labels *src);
/* Appends src's rows to dst (np.concatenate). */
int yc_labels_append(yc_labels *dst, const yc_labels *src);
/* Frees the buffer. */
void yc_labels_free(yc_labels *l);

/* xywhn -> pixel xyxy in an image of w x h with an offset (YOLOv5's xywhn2xyxy, float32):
 * x1 = w (x - bw / 2) + padw, y1 = h (y - bh / 2) + padh, x2 = w (x + bw / 2) + padw, ... */
void yc_labels_xywhn_to_xyxy(yc_labels *l, double w, double h, double padw, double padh);
/* pixel xyxy -> xywhn of a w x h image (YOLOv5's xyxy2xywhn); with clip, corners are first
 * clipped to [0, w - eps] x [0, h - eps] (YOLOv5 uses eps = 1e-3). */
void yc_labels_xyxy_to_xywhn(yc_labels *l, double w, double h, bool clip, double eps);

/* ------------------------------------------------------------------------------------------------
 * Random perspective (utils/augmentations.py random_perspective)
 * ---------------------------------------------------------------------------------------------- */

/* The random values of one perspective draw, in the order they are drawn. */
typedef struct yc_persp_draw {
    /* P[2][0], P[2][1] ~ U(-perspective, perspective) */
    double px, py;
    /* rotation angle in degrees ~ U(-degrees, degrees), counter-clockwise on screen */
    double angle;
    /* scale ~ U(1 - scale, 1 + scale) */
    double scale;
    /* shear angles in degrees ~ U(-shear, shear): S[0][1] = tan(shx), S[1][0] = tan(shy) */
    double shx, shy;
    /* translation fractions ~ U(0.5 - translate, 0.5 + translate) of the output width, height */
    double tx, ty;
} yc_persp_draw;

/* Draws the values above from rng in YOLOv5's order. */
void yc_persp_sample(const yc_hyp *hyp, yc_rng *rng, yc_persp_draw *d);

/* The composite matrix, row-major 3x3, mapping input pixel coordinates (x, y, 1) to output ones:
 *   M = T * S * R * P * C   (applied right to left)
 *   C = [1 0 -w/2; 0 1 -h/2; 0 0 1]            centre the input (w, h: input size)
 *   P = [1 0 0; 0 1 0; px py 1]                perspective
 *   R = [a b 0; -b a 0; 0 0 1], a = s cos(angle), b = s sin(angle)
 *                                              cv2.getRotationMatrix2D(centre (0,0), angle, s)
 *   S = [1 tan(shx) 0; tan(shy) 1 0; 0 0 1]    shear
 *   T = [1 0 tx*W; 0 1 ty*H; 0 0 1]            translate (W, H: output size)
 * With perspective the output point is (x'/z', y'/z'); otherwise the last row is (0, 0, 1). */
void yc_persp_matrix(const yc_persp_draw *d, int in_h, int in_w, int out_h, int out_w,
                     double M[9]);

/* dst (out_h x out_w) = cv2.warpAffine(src, M[:2]) or, with perspective, cv2.warpPerspective(src,
 * M), INTER_LINEAR, BORDER_CONSTANT 114.  The warp runs over destination pixels with the inverse
 * matrix: for output pixel (x, y) the source point is M^-1 (x, y, 1), quantised to 1/32 pixel as
 * OpenCV does (affine: 10-bit fixed-point increments rounded half to even; perspective: rounded
 * per pixel), sampled bilinearly with weights (32 - fx)(32 - fy) ... scaled to 2^15 and rounded
 * with + 2^14 >> 15; taps outside the source read 114.  dst must differ from src. */
int yc_warp(const yc_image *src, yc_image *dst, int out_h, int out_w, const double M[9],
            bool perspective);

/* YOLOv5's box_candidates for one box: w1, h1 the original size times the scale draw, w2, h2 the
 * warped size; true iff w2 > 2, h2 > 2, w2 h2 / (w1 h1 + 1e-16) > area_thr and
 * max(w2 / (h2 + 1e-16), h2 / (w2 + 1e-16)) < 100. */
bool yc_box_candidate(double w1, double h1, double w2, double h2, double area_thr);

/* Warps pixel-xyxy labels with M: the 4 corners (x1,y1) (x2,y2) (x1,y2) (x2,y1) are transformed
 * (divided by z' with perspective), the new box is their min/max clipped to [0, out_w] x
 * [0, out_h], and rows failing yc_box_candidate (old box scaled by `scale`, area_thr 0.10) are
 * removed, keeping the order of the others. */
void yc_warp_boxes(yc_labels *l, const double M[9], bool perspective, double scale, int out_h,
                   int out_w);

/* The image half of random_perspective (yc_random_perspective's, yc_seg_random_perspective's):
 * draws the transform (yc_persp_sample), makes its matrix into M and its scale into *scale, and
 * warps src into dst of (h + 2 border_y) x (w + 2 border_x), a plain copy when both borders are 0
 * and M is the identity.  A border leaving no pixel is a usage error. */
int yc_persp_image(const yc_image *src, yc_image *dst, const yc_hyp *hyp, int border_y,
                   int border_x, yc_rng *rng, double M[9], double *scale);

/* random_perspective(img, labels, degrees, translate, scale, shear, perspective, border): output
 * size (h + 2 border_y) x (w + 2 border_x); the warp is skipped (plain copy) when both borders
 * are 0 and M is the identity.  labels are pixel xyxy, updated in place. */
int yc_random_perspective(const yc_image *src, yc_image *dst, yc_labels *labels,
                          const yc_hyp *hyp, int border_y, int border_x, yc_rng *rng);

/* ------------------------------------------------------------------------------------------------
 * Colour and flips
 * ---------------------------------------------------------------------------------------------- */

/* OpenCV's 8-bit RGB -> HSV (COLOR_RGB2HSV, H in 0..179, fixed point with 12-bit tables). */
void yc_rgb_to_hsv8(const uint8_t rgb[3], uint8_t hsv[3]);
/* OpenCV's 8-bit HSV -> RGB as its SIMD path computes it (used for every pixel of rows whose
 * width is a multiple of 16, e.g. 640): float sector arithmetic, values * 255 truncated. */
void yc_hsv8_to_rgb(const uint8_t hsv[3], uint8_t rgb[3]);
/* augment_hsv's tables for gains g = (g_h, g_s, g_v):
 *   hue[x] = uint8((x g_h) mod 180), sat[x] = uint8(clip(x g_s, 0, 255)),
 *   val[x] = uint8(clip(x g_v, 0, 255))   (truncation), x = 0..255. */
void yc_hsv_luts(const double gain[3], uint8_t lut[3][256]);
/* RGB -> HSV, the tables, HSV -> RGB, in place. */
void yc_hsv_apply(yc_image *im, const double gain[3]);
/* augment_hsv: if any gain is non-zero, g = U(-1, 1)^3 * (hgain, sgain, vgain) + 1 (drawn h, s,
 * v) and yc_hsv_apply. */
void yc_augment_hsv(yc_image *im, double hgain, double sgain, double vgain, yc_rng *rng);

/* np.flipud / np.fliplr of the image; xywhn labels get y = 1 - y / x = 1 - x.  labels may be
 * NULL. */
void yc_flip_ud(yc_image *im, yc_labels *labels);
void yc_flip_lr(yc_image *im, yc_labels *labels);

/* ------------------------------------------------------------------------------------------------
 * MixUp
 * ---------------------------------------------------------------------------------------------- */

/* Gamma(shape, 1) by Marsaglia and Tsang (2000) from rng's normal and uniform draws; shape > 0
 * (shape < 1 uses the boost Gamma(shape + 1) * U^(1/shape)). */
double yc_rng_gamma(yc_rng *rng, double shape);
/* Beta(a, b) = X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b). */
double yc_rng_beta(yc_rng *rng, double a, double b);
/* mixup with ratio r: im = uint8(im r + im2 (1 - r)) (truncation, computed in double as numpy
 * does), labels = concat(labels, labels2).  Images must have the same size. */
int yc_mixup(yc_image *im, yc_labels *labels, const yc_image *im2, const yc_labels *labels2,
             double r);

/* ------------------------------------------------------------------------------------------------
 * Mosaic
 * ---------------------------------------------------------------------------------------------- */

/* Places tile i of a 4-image mosaic on canvas (2s x 2s, already filled with 114) around the
 * centre (xc, yc), exactly as load_mosaic:
 *   i = 0 top-left:     a = (max(xc - w, 0), max(yc - h, 0), xc, yc)
 *                       b = (w - (a.x2 - a.x1), h - (a.y2 - a.y1), w, h)
 *   i = 1 top-right:    a = (xc, max(yc - h, 0), min(xc + w, 2s), yc)
 *                       b = (0, h - (a.y2 - a.y1), min(w, a.x2 - a.x1), h)
 *   i = 2 bottom-left:  a = (max(xc - w, 0), yc, xc, min(2s, yc + h))
 *                       b = (w - (a.x2 - a.x1), 0, w, min(a.y2 - a.y1, h))
 *   i = 3 bottom-right: a = (xc, yc, min(xc + w, 2s), min(2s, yc + h))
 *                       b = (0, 0, min(w, a.x2 - a.x1), min(a.y2 - a.y1, h))
 *   canvas[a] = tile[b]; the tile's xywhn labels become pixel xyxy with (w, h) and the offset
 *   (padw, padh) = (a.x1 - b.x1, a.y1 - b.y1), are clipped to [0, 2s] and appended to out. */
int yc_mosaic_place(yc_image *canvas, int s, int xc, int yc, int i, const yc_image *tile,
                    const yc_labels *tile_labels, yc_labels *out);

/* Fetches image `index` for a sample: `img` resized as load_image does (long side imgsz, the
 * run's image size held in ctx,
 * INTER_LINEAR when augment, INTER_AREA when downscaling without), `info` its sizes, `labels` its
 * rows in xywhn (normalised to the image, as in the label files).  `tmp` is per-thread scratch the
 * loader may use for the full-resolution decode (kept across calls).  Returns a status; a
 * failing loader fails the sample with its message. */
typedef int (*yc_sample_loader)(void *ctx, int index, bool augment, yc_image *img,
                                yc_image *tmp, yc_load_info *info, yc_labels *labels);

/* Per-thread buffers reused from sample to sample (after the first few samples nothing is
 * allocated).  Zero-initialise (YC_AUG_SCRATCH_INIT) and free with yc_aug_scratch_free. */
typedef struct yc_aug_scratch {
    /* the current tile / non-mosaic image as the loader returns it */
    yc_image tile;
    /* the loader's full-resolution decode scratch */
    yc_image decode;
    /* the 2s x 2s mosaic canvas, or the letterboxed image */
    yc_image canvas;
    /* the sample being built (after random_perspective) */
    yc_image img;
    /* the second mosaic for mixup */
    yc_image mix;
    /* labels of the current tile (xywhn) */
    yc_labels tile_labels;
    /* labels of the sample being built */
    yc_labels labels;
    /* labels of the second mosaic */
    yc_labels mix_labels;
} yc_aug_scratch;

#define YC_AUG_SCRATCH_INIT                                                                     \
    {YC_IMAGE_INIT, YC_IMAGE_INIT, YC_IMAGE_INIT, YC_IMAGE_INIT, YC_IMAGE_INIT, YC_LABELS_INIT,  \
     YC_LABELS_INIT, YC_LABELS_INIT}

void yc_aug_scratch_free(yc_aug_scratch *s);

/* What a training sample needs to know about the dataset and the run. */
typedef struct yc_sample_params {
    /* hyperparameters (mosaic, mixup, degrees, translate, scale, shear, perspective, hsv_*,
     * flipud, fliplr are used) */
    const yc_hyp *hyp;
    /* training image size s (a multiple of 32 in practice) */
    int imgsz;
    /* number of images in the dataset (mixup's second mosaic index is U{0..n-1}) */
    int n;
    /* optional: indices the 3 extra mosaic images are drawn from (YOLOv5's self.indices, which
     * image weights resample); NULL means 0..n-1 */
    const int *pool;
    /* entries in pool */
    int pool_n;
    /* rectangular training (--rect): batch shape of this image (rect_h x rect_w); mosaic off.
     * 0 for square training */
    int rect_h, rect_w;
} yc_sample_params;

/* The start of load_mosaic (yc_load_mosaic's, segment's yc_seg_load_mosaic's): *border =
 * -s // 2, the centre yc then xc = int(U(-border, 2s + border)), idx = the index plus 3 draws
 * from p's pool (or the whole dataset), not shuffled; canvas made 2s x 2s of 114.  A size or
 * dataset under 1 is a usage error. */
int yc_mosaic_begin(yc_image *canvas, const yc_sample_params *p, int index, yc_rng *rng,
                    int *border, int *xc, int *yc, int idx[4]);

/* load_mosaic(index): centre yc then xc = int(U(s/2, 3s/2)) (floor division as YOLOv5's
 * -s // 2 border), the index plus 3 draws from the pool, shuffled (Python's random.shuffle),
 * each loaded with augment on and placed (yc_mosaic_place), then random_perspective with border
 * -s/2, giving an s x s image in dst and pixel xyxy labels. */
int yc_load_mosaic(yc_aug_scratch *s, const yc_sample_params *p, int index,
                   yc_sample_loader load, void *ctx, yc_rng *rng, yc_image *dst,
                   yc_labels *labels);

/* One training sample, YOLOv5's __getitem__ with augment=True:
 *   mosaic = not rect and U < hyp.mosaic
 *   mosaic:  load_mosaic(index); if U < hyp.mixup: mixup with load_mosaic(U{0..n-1}),
 *            r ~ Beta(32, 32)
 *   else:    load_image(index, augment), letterbox to imgsz (or the rect shape) with auto=False,
 *            scaleup=True, labels to pixels (ratio, pad), random_perspective with border 0
 *   labels -> xywhn (clip, eps 1e-3); augment_hsv; flipud with p = hyp.flipud; fliplr with p =
 *   hyp.fliplr.
 * Writes the image as CHW RGB uint8 to chw (3 * out_h * out_w bytes: imgsz x imgsz, or the rect
 * shape) and the labels (class, x, y, w, h normalised) to out.  out_h/out_w may be NULL. */
int yc_train_sample(yc_aug_scratch *s, const yc_sample_params *p, int index,
                    yc_sample_loader load, void *ctx, yc_rng *rng, uint8_t *chw, int *out_h,
                    int *out_w, yc_labels *out);

/* What validation needs to map predictions back to the original image (YOLOv5's `shapes`). */
typedef struct yc_val_info {
    /* original (EXIF-corrected) size */
    int h0, w0;
    /* size after load_image */
    int h, w;
    /* the letterbox into the batch shape (pad_w, pad_h are YOLOv5's pad) */
    yc_letterbox_info lb;
    /* YOLOv5's ratio_pad[0]: (h / h0, w / w0) */
    double ratio_h, ratio_w;
} yc_val_info;

/* A validation sample (augment=False): the loader's load_image without augmentation (INTER_AREA
 * when downscaling, long side = the run's imgsz, which the loader knows), then a letterbox into
 * shape_h x shape_w (the rect batch shape, or imgsz x imgsz) with auto=False, scaleup=False;
 * labels as YOLOv5 (pixels with ratio and pad, then xywhn, clip, eps 1e-3).  Writes CHW RGB
 * uint8 (3 * shape_h * shape_w bytes) to chw.  `info` may be NULL. */
int yc_val_sample(yc_aug_scratch *s, int index, int shape_h, int shape_w,
                  yc_sample_loader load, void *ctx, uint8_t *chw, yc_labels *out,
                  yc_val_info *info);

/* ------------------------------------------------------------------------------------------------
 * Multi-scale training (train.py --multi-scale)
 * ---------------------------------------------------------------------------------------------- */

/* sz = randrange(int(imgsz * 0.5), int(imgsz * 1.5) + gs) // gs * gs; sf = sz / max(h, w);
 * if sf != 1 the new batch shape is ceil(h sf / gs) gs x ceil(w sf / gs) gs, else (h, w). */
void yc_multiscale_shape(yc_rng *rng, int imgsz, int gs, int h, int w, int *new_h, int *new_w);

/* F.interpolate(x, size=(nh, nw), mode='bilinear', align_corners=False) on `planes` planes of
 * h x w floats (a batch is batch * channels planes): source coordinate (d + 0.5) * in/out - 0.5,
 * clamped at 0, neighbours clamped at the edge, as PyTorch's CPU kernel. */
void yc_resize_bilinear_f32(const float *src, int planes, int h, int w, float *dst, int nh,
                            int nw);

#endif
