/* Test-time augmentation (val --augment, detect --augment): YOLOv5 v7.0 models/yolo.py
 * _forward_augment, exactly.
 *
 * For an input batch x (n, 3, h, w) already letterboxed and divided by 255:
 *   for (scale, flip) in (1, none), (0.83, left-right), (0.67, none):
 *     xi = scale_img(flip(x), scale, gs)   bilinear resize to (int(h*s), int(w*s)) with PyTorch's
 *                                          align_corners=False sampling, then padded right and
 *                                          bottom to (ceil(h*s/gs)*gs, ceil(w*s/gs)*gs) with 0.447
 *                                          (scale 1: x unchanged);
 *     yi = Detect's eval rows of xi        (cx, cy, w, h, obj, cls...) in xi's pixels;
 *     _descale_pred: cx, cy, w, h /= s;  flipped: cx = w - cx  (w: the unscaled input width);
 *   _clip_augmented: with g = sum(4^k, k < nl) (21 for P3-P5), the first output loses its last
 *     rows/g rows (the largest-stride level: large objects at full scale), the last output its
 *     first (rows/g) * 4^(nl-1) rows (the smallest-stride level: small objects at 0.67);
 *   the rows of the three, in that order, go to NMS as one prediction.
 * gs is the model's largest stride (at least 32).  The input shape is a multiple of gs, so the
 * clipped row counts are exactly whole levels. */
#ifndef YC_TTA_H
#define YC_TTA_H

#include <stdbool.h>
#include <stddef.h>

#include "graph.h"
#include "model.h"

/* The three passes: scales and whether the input is flipped left-right. */
#define YC_TTA_PASSES 3
extern const double yc_tta_scales[YC_TTA_PASSES];
extern const bool yc_tta_flip_lr[YC_TTA_PASSES];

/* scale_img's sizes for an h x w input at `ratio`: the resized size (*rh, *rw) = (int(h*ratio),
 * int(w*ratio)) and the padded size (*ph, *pw) = (ceil(h*ratio/gs)*gs, ...).  Ratio 1: all h, w. */
void yc_tta_shape(int h, int w, double ratio, int gs, int *rh, int *rw, int *ph, int *pw);

/* scale_img(flip(src), ratio, gs=gs) of one CHW float image (c x h x w) into dst (c x ph x pw of
 * yc_tta_shape): flip_lr mirrors columns first; PyTorch's bilinear interpolation (align_corners
 * False: source coordinate (i + 0.5) * in/out - 0.5, clamped at 0; the upper neighbour clamped at
 * the edge) computed in float32; the padding 0.447.  YC_ENOMEM (index tables) or YC_EUSAGE
 * (an empty scaled size). */
int yc_tta_scale_img(const float *src, int c, int h, int w, double ratio, bool flip_lr, int gs,
                     float *dst);

/* _descale_pred over n rows of `no` floats (cx, cy, w, h first): divided by ratio, and cx
 * mirrored about img_w (the unscaled input width) when flip_lr. */
void yc_tta_descale(float *rows, size_t n, int no, double ratio, bool flip_lr, int img_w);

/* _clip_augmented's cut of pass `pass` (0 .. YC_TTA_PASSES-1) of nl levels with `rows` rows:
 * the rows kept are [*first, *first + *count). */
void yc_tta_clip(size_t rows, int nl, int pass, size_t *first, size_t *count);

/* The state of augmented inference for one model: one evaluation graph per pass, placed in one
 * arena (they run one after the other), host buffers for the scaled input, the heads and the
 * rows. */
typedef struct yc_tta yc_tta;

/* half: FP16 storage of the graphs' activations (yc_graph_options.half).  arena: shared with
 * other graphs, or NULL for one of its own. */
int yc_tta_new(yc_tta **out, yc_model *m, bool half, yc_arena *arena);
void yc_tta_free(yc_tta *t);

/* The augmented prediction of a batch: input is n x 3 x h x w float (0..1) on the host, h and w
 * multiples of gs.  *rows receives n blocks of *rows_per_image rows of m->no floats (image i's at
 * i * *rows_per_image * no), in _forward_augment's order, valid until the next call. */
int yc_tta_predict(yc_tta *t, const float *input, int n, int h, int w, const float **rows,
                   size_t *rows_per_image);

#endif
