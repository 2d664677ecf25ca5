/* train --quad: YOLOv5 v7.0's quad collate (LoadImagesAndLabels.collate_fn4).
 *
 * A batch of n images of h x w becomes n / 4 images of 2h x 2w (the images beyond the last whole
 * group of 4 are dropped, as collate_fn4 drops them).  For group g (images 4g .. 4g+3), with
 * probability 0.5 (random.random() < 0.5):
 *   upsampled   image 4g alone, enlarged 2x by bilinear interpolation (F.interpolate with
 *               scale_factor 2, align_corners False, computed in float32 and truncated back to
 *               uint8 as .type(uint8) does), with its labels unchanged (they are normalised);
 *   else tiled  the four images 2 x 2: 4g top left, 4g+1 below it, 4g+2 right of it, 4g+3 bottom
 *               right (torch.cat along height, then width), labels offset by (0, 1), (1, 0) and
 *               (1, 1) and all of x, y, w, h halved (in float32).
 * Every label's image index becomes g.  YOLOv5 multiplies the training loss by 4 for quad batches
 * (train.py: `if opt.quad: loss *= 4.`): yolocl scales the accumulated gradients by 4 before each
 * optimizer step, the same result (the printed losses are not scaled, as YOLOv5's loss_items).
 *
 * Difference: a batch of fewer than 4 images (the last of an epoch) would make an empty batch in
 * YOLOv5 (an error); here it becomes one upsampled image, its first. */
#ifndef YC_QUAD_H
#define YC_QUAD_H

#include "loader.h"
#include "rng.h"

/* The quad collate of b in place (its image buffer must hold 4 images of h x w at least, which
 * the loader ensures): one uniform draw from rng per group, in group order.  YC_ENOMEM (the
 * group's scratch copy) or YC_EUSAGE (an empty batch). */
int yc_quad_collate(yc_batch *b, yc_rng *rng);

/* The 2x bilinear enlargement of one CHW uint8 image (c x h x w) into out (c x 2h x 2w). */
void yc_quad_upsample(const uint8_t *im, int c, int h, int w, uint8_t *out);

#endif
