/* YOLOv5 v7.0 inference post-processing on the host: Detect decoding (models/yolo.py Detect.forward
 * in eval mode), non_max_suppression (utils/general.py) and the box helpers around it
 * (xywh2xyxy, xyxy2xywh, clip_boxes, scale_boxes).  Reference: docs/YOLOV5.md sections 1.7
 * and 6.1.
 *
 * Everything is float32 in PyTorch's operation order.  yc_nms matches YOLOv5 on PyTorch 1.13 +
 * torchvision 0.14 (CPU) bit for bit, including the order of detections with equal scores;
 * decoding matches within a few float32 ulps (PyTorch's vectorised exp is not libm's expf). */
#ifndef YC_NMS_H
#define YC_NMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* YOLOv5's constants of non_max_suppression. */
#define YC_NMS_MAX_WH 7680.0f /* class offset (pixels) of the batched NMS */
#define YC_NMS_MAX_NMS 30000  /* at most this many boxes (best scores) go into NMS */

/* ---------------------------------------------------------------------------------------------
 * Detect decoding
 * ------------------------------------------------------------------------------------------- */

/* One level of raw Detect output in the model's layout (the 1x1 conv output, before any permute):
 * value k (0..no-1: tx, ty, tw, th, obj, class logits) of anchor a at cell (y, x) of image b is
 * p[b*img_stride + (a*no + k)*ny*nx + y*nx + x]. */
typedef struct yc_detect_level {
    /* raw (pre-sigmoid) outputs, image 0 */
    const float *p;
    /* grid size */
    int ny, nx;
    /* elements between consecutive images (>= na*no*ny*nx) */
    size_t img_stride;
    /* input pixels per cell (8, 16, 32, ...) */
    float stride;
} yc_detect_level;

/* Rows of the decoded output of one image: sum over levels of na*ny*nx (25,200 for a P5 model at
 * 640x640). */
size_t yc_detect_rows(const yc_detect_level *levels, int nl, int na);

/* Decodes image b to YOLOv5's eval rows (cx, cy, w, h, obj, cls_0..cls_{nc-1}) in input pixels,
 * `no` floats per row, rows ordered level, anchor, y, x (as Detect's torch.cat(z, 1)):
 *   y = sigmoid(raw) for all no values;
 *   xy = (2*y_xy + (cell - 0.5)) * stride;  wh = (2*y_wh)^2 * (anchor * stride).
 * anchors: [nl][na][2] (w, h) in grid units of their level, as Detect.anchors stores them.
 * out holds yc_detect_rows() * no floats.  YC_EFORMAT for invalid sizes (no < 6, na < 1, a grid
 * dimension < 1, img_stride too small, a NULL pointer). */
int yc_detect_decode(const yc_detect_level *levels, int nl, int na, int no, const float *anchors,
                     int b, float *out);

/* yc_detect_decode for a Segment head (models/yolo.py Detect.forward's Segment branch): the last
 * nm of the no values of a row (the mask coefficients) are copied raw, not passed through the
 * sigmoid; nm = 0 is yc_detect_decode.  YC_EFORMAT also when nm < 0 or no - nm < 6. */
int yc_detect_decode_nm(const yc_detect_level *levels, int nl, int na, int no, int nm,
                        const float *anchors, int b, float *out);

/* ---------------------------------------------------------------------------------------------
 * Non-maximum suppression
 * ------------------------------------------------------------------------------------------- */

/* Settings of non_max_suppression. */
typedef struct yc_nms_params {
    /* candidates need obj > conf_thres and obj*cls > conf_thres (compared in float32, as torch
     * compares a float32 tensor with a Python float) */
    float conf_thres;
    /* a box is suppressed by a kept one when IoU > iou_thres (compared in double, as
     * torchvision's CPU kernel compares its float IoU with its double threshold) */
    double iou_thres;
    /* one detection per (box, class) with score > conf_thres instead of the best class only;
     * ignored (best class only) when nc == 1, as YOLOv5's `multi_label &= nc > 1` */
    bool multi_label;
    /* class-agnostic NMS (no class offset) */
    bool agnostic;
    /* keep only these classes (YOLOv5 --classes); NULL or n_classes == 0: all */
    const int *classes;
    int n_classes;
    /* at most this many detections per image (>= 1) */
    int max_det;
    /* at most this many candidates into NMS, best scores first (YC_NMS_MAX_NMS) */
    int max_nms;
    /* mask coefficients at the end of each row (non_max_suppression's nm: 32 for a Segment head,
     * 0 otherwise): the classes are the no - 5 - nm values after obj */
    int nm;
} yc_nms_params;

/* val.py settings: conf 0.001, IoU 0.6, multi-label, max_det 300, not agnostic. */
yc_nms_params yc_nms_params_val(void);
/* detect.py settings: conf 0.25, IoU 0.45, best class only, max_det 1000, not agnostic. */
yc_nms_params yc_nms_params_detect(void);

/* Scratch memory of yc_nms, kept by the caller and reused across images (it grows to the largest
 * candidate count seen).  Not shared between threads. */
typedef struct yc_nms_scratch yc_nms_scratch;
yc_nms_scratch *yc_nms_scratch_new(void);
void yc_nms_scratch_free(yc_nms_scratch *s);

/* non_max_suppression for one image, exactly as YOLOv5 v7.0 with no time limit:
 *  1. rows with obj > conf_thres; score = cls * obj (float32); box = xywh2xyxy;
 *  2. multi_label: every (row, class) with score > conf_thres, in row-major order; otherwise the
 *     first class of maximal score, kept if its score > conf_thres; then the class filter;
 *  3. sort by score, descending, and keep the first max_nms.  Equal scores are ordered as
 *     torch.argsort(descending=True) orders them on CPU in PyTorch 1.13: libstdc++'s std::sort
 *     (introsort: median of three, unguarded partition, threshold 16, heapsort past depth
 *     2*floor(log2 n), final insertion sort) on (score, candidate number) pairs comparing scores
 *     only; this is reproduced exactly, so ties come out in PyTorch's order;
 *  4. greedy NMS as torchvision.ops.nms on the boxes offset by class*7680 (0 if agnostic), all in
 *     float32: areas (x2-x1)*(y2-y1), inter = max(0, w)*max(0, h),
 *     iou = inter / (area_i + area_j - inter), suppressed when iou > iou_thres; processing stops
 *     once max_det boxes are kept (the result is the same as running to the end and truncating);
 *  5. output rows (x1, y1, x2, y2, conf, cls) in input pixels (without the offset), best first.
 * pred: n_rows rows of `no` floats (cx, cy, w, h, obj, classes), e.g. one image of
 * yc_detect_decode's output.  out holds max_det*6 floats; *n_out gets the number of rows.
 * Time O(n log n) for n candidates plus O(max_nms * max_det) for the suppression (a box is
 * compared only with kept boxes of its class when boxes of different classes cannot overlap);
 * memory O(n). */
int yc_nms(const float *pred, size_t n_rows, int no, const yc_nms_params *p, yc_nms_scratch *s,
           float *out, int *n_out);

/* yc_nms, and src (max_det entries, or NULL) receives the input row of each detection, from
 * which yc_nms_coefficients gives the mask coefficients YOLOv5 keeps as columns 6.. of its
 * output. */
int yc_nms_src(const float *pred, size_t n_rows, int no, const yc_nms_params *p,
               yc_nms_scratch *s, float *out, int *n_out, uint32_t *src);

/* The mask coefficients of n detections as non_max_suppression(nm) returns them: detection k's
 * nm values are the last nm of row src[k] of pred (rows of `no` floats) times that row's
 * objectness, in float32 (YOLOv5 v7.0's `x[:, 5:] *= x[:, 4:5]` scales the mask columns along
 * with the classes, and process_mask uses the scaled values).  out: n * nm floats. */
void yc_nms_coefficients(const float *pred, int no, int nm, const uint32_t *src, int n,
                         float *out);

/* ---------------------------------------------------------------------------------------------
 * Box helpers (float32, in place; `stride` floats between consecutive boxes, the 4 box values
 * first)
 * ------------------------------------------------------------------------------------------- */

/* (cx, cy, w, h) -> (x1, y1, x2, y2): x1 = cx - w/2, x2 = cx + w/2 (YOLOv5 xywh2xyxy). */
void yc_xywh2xyxy(float *boxes, size_t n, size_t stride);
/* (x1, y1, x2, y2) -> (cx, cy, w, h): cx = (x1 + x2)/2, w = x2 - x1 (YOLOv5 xyxy2xywh). */
void yc_xyxy2xywh(float *boxes, size_t n, size_t stride);
/* Clamps x to [0, w] and y to [0, h] (YOLOv5 clip_boxes; NaN stays NaN). */
void yc_clip_boxes(float *boxes, size_t n, size_t stride, int h, int w);

/* The gain and padding that scale_boxes derives when it is given no ratio_pad: for an image of
 * h0 x w0 letterboxed into h1 x w1, gain = min(h1/h0, w1/w0), pad = ((w1 - w0*gain)/2,
 * (h1 - h0*gain)/2), in double (detect.py's path). */
void yc_letterbox_gain_pad(int h1, int w1, int h0, int w0, double *gain, double *pad_w,
                           double *pad_h);

/* scale_boxes: letterboxed input coordinates back to the original h0 x w0 image:
 * x = (x - pad_w) / gain, y = (y - pad_h) / gain, in float32 with gain and pads rounded to
 * float32 (as torch applies Python floats to a float32 tensor), then clipped.  val.py passes the
 * dataset's ratio (h/h0) and letterbox pad; detect.py the values of yc_letterbox_gain_pad. */
void yc_scale_boxes(float *boxes, size_t n, size_t stride, double gain, double pad_w,
                    double pad_h, int h0, int w0);

#endif
