/* Instance masks of a segmentation model's detections on the host: YOLOv5 v7.0
 * utils/segment/general.py (process_mask, process_mask_upsample, crop_mask, scale_image,
 * mask_iou) and the mask side of segment/val.py's process_batch(masks=True).
 *
 * A detection's mask is sigmoid(its nm coefficients @ Proto's nm prototypes), a mh x mw map (the
 * model input / 4), zeroed outside the detection's box and thresholded at 0.5.  Arithmetic is
 * float32 in PyTorch's operation order except the dot product over the nm prototypes, summed
 * in coefficient order (torch's sgemm may sum in another order: a pixel whose logit is within
 * float round-off of 0 can come out the other way).  Bilinear resampling is F.interpolate's
 * (align_corners=False) on CPU, float32. */
#ifndef YC_MASK_EVAL_H
#define YC_MASK_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How the masks of detections are made (the three ways YOLOv5 v7.0 calls them). */
typedef enum yc_mask_mode {
    /* process_mask(upsample=False): cropped to the box scaled to the prototypes' size, mh x mw
     * (segment/val.py without --save-json) */
    YC_MASK_PROTO,
    /* process_mask(upsample=True): cropped as YC_MASK_PROTO, then upsampled bilinearly to the
     * input size ih x iw (segment/predict.py) */
    YC_MASK_UPSAMPLE,
    /* process_mask_upsample: upsampled to ih x iw, then cropped to the box in input pixels
     * (segment/val.py with --save-json) */
    YC_MASK_UPSAMPLE_CROP
} yc_mask_mode;

/* The size of the masks of `mode`: mh x mw for YC_MASK_PROTO, else ih x iw. */
void yc_mask_size(yc_mask_mode mode, int mh, int mw, int ih, int iw, int *h, int *w);

/* F.interpolate(x[None], (oh, ow), mode="bilinear", align_corners=False) of n planes of ih x iw
 * floats into n planes of oh x ow (out must not alias in): source coordinate
 * (dst + 0.5) * (in / out) - 0.5 (the scale in float32), clamped at 0, the two neighbours weighted
 * by the fraction, all float32. */
void yc_interp_bilinear(const float *in, int n, int ih, int iw, float *out, int oh, int ow);

/* crop_mask: n planes of h x w floats, pixel (y, x) of plane k kept where
 * x1 <= x < x2 and y1 <= y < y2 (box k: boxes + k * box_stride, x1 y1 x2 y2 in the planes'
 * pixels), else set to 0. */
void yc_crop_mask(float *masks, int n, int h, int w, const float *boxes, size_t box_stride);

/* The masks of n detections (process_mask / process_mask_upsample per `mode`):
 *   proto   the image's prototypes, nm planes of mh x mw (Proto's output for that image);
 *   coef    detection k's nm coefficients at coef + k * coef_stride;
 *   boxes   detection k's box x1 y1 x2 y2 in input pixels at boxes + k * box_stride;
 *   ih, iw  the input (letterboxed) image size.
 * out receives n planes of yc_mask_size bytes, 1 inside the mask, 0 outside.  YC_EFORMAT for
 * invalid sizes, YC_ENOMEM. */
int yc_process_mask(const float *proto, int nm, int mh, int mw, const float *coef,
                    size_t coef_stride, const float *boxes, size_t box_stride, int n, int ih,
                    int iw, yc_mask_mode mode, uint8_t *out);

/* mask_iou(gt, pred) of segment/val.py's process_batch(masks=True): iou[l * nd + d] of ground
 * truth mask l and predicted mask d.
 *   gt      overlap: one gh x gw map of the image, value l + 1 marking label l (loader.h's overlap
 *           format); otherwise nl planes of gh x gw, 1 inside label l's mask;
 *   pred    nd planes of ph x pw bytes (yc_process_mask's).
 * When gh x gw differs from ph x pw, each ground truth mask (as 0/1 floats) is resampled with
 * yc_interp_bilinear to ph x pw and thresholded (> 0.5), as val.py does.  The IoU is YOLOv5's in
 * float32: inter / ((area_gt + area_pred - inter) + 1e-7).  YC_EFORMAT, YC_ENOMEM. */
int yc_mask_iou(const float *gt, bool overlap, int nl, int gh, int gw, const uint8_t *pred,
                int nd, int ph, int pw, float *iou);

/* scale_image for one mask: the h1 x w1 mask (of the letterboxed input) cropped to the letterbox
 * content (top = int(pad_h), left = int(pad_w), bottom = int(h1 - pad_h), right =
 * int(w1 - pad_w)) and resized to h0 x w0 as cv2.resize(INTER_LINEAR) does (half-pixel centres,
 * clamped at the edges), float32 out (h0 * w0 values, 0..1 for a 0/1 mask).  pad_w and pad_h are
 * the letterbox's (yc_letterbox_gain_pad). */
void yc_scale_mask(const uint8_t *mask, int h1, int w1, double pad_w, double pad_h, int h0,
                   int w0, float *out);

/* scale_image for one uint8 mask as segment/val.py's save_json calls it: the letterbox cropped
 * off as yc_scale_mask does, then yc_resize_u8_linear (masks.h) to h0 x w0 (out: h0 * w0 bytes, 0/1 for
 * a 0/1 mask).  YC_ENOMEM. */
int yc_scale_mask_u8(const uint8_t *mask, int h1, int w1, double pad_w, double pad_h, int h0,
                     int w0, uint8_t *out);

/* masks2segments(strategy='largest') for one mask: cv2.findContours(mask, RETR_EXTERNAL,
 * CHAIN_APPROX_SIMPLE) reproduced (OpenCV's border following over the mask padded with a zero
 * border: 8-connected outer borders, a border inside another component's hole skipped, a point
 * kept where the chain turns), then the contour with the most points (the first of equal ones in
 * cv2's order, which lists the contours last found first).  mask: h x w bytes, nonzero inside.
 * *pts receives 2 * *n floats x0 y0 x1 y1 ... (pixel indices; malloc'd, free it; NULL with
 * *n = 0 when the mask is empty).  YC_ENOMEM. */
int yc_mask_largest_contour(const uint8_t *mask, int h, int w, float **pts, int *n);

/* The colour of class c in YOLOv5's palette (utils/plots.py Colors), RGB. */
void yc_mask_color(int c, uint8_t rgb[3]);

/* Annotator.masks over an RGB picture, a mask at a time: acc holds 4 floats a pixel (h x w
 * pixels), set by yc_mask_overlay_init, each mask (h x w floats, inside where >= 0.5, as
 * scale_image's uint8 resize rounds a 0/1 mask) is added with yc_mask_overlay_add in detection
 * order, then yc_mask_overlay_blend draws them (alpha 0.5 in YOLOv5):
 *   retina   (im_gpu=None, segment/predict.py --retina-masks): acc = (count, colour sums);
 *            im = clip(colour sum, 0, 255) * alpha + im * (1 - min(count, 1) * alpha);
 *   default  (im_gpu given): acc = (running product of (1 - alpha) over the masks covering the
 *            pixel, colour terms); im = im * product + 2 * sum_k colour_k * alpha * (product over
 *            masks j <= k), as YOLOv5 composites on the letterboxed input.  YOLOv5 then resamples
 *            the whole composited input back to the picture (scale_image); here the masks are
 *            resampled (yc_scale_mask) and the picture's own pixels blended, so pixels outside
 *            the masks are the picture's.
 * Results are truncated to uint8 as numpy's and torch's conversions do. */
void yc_mask_overlay_init(float *acc, int h, int w, bool retina);
void yc_mask_overlay_add(float *acc, int h, int w, bool retina, const float *mask,
                         const uint8_t rgb[3], float alpha);
void yc_mask_overlay_blend(uint8_t *rgb, int h, int w, size_t stride, const float *acc,
                           bool retina, float alpha);

#endif
