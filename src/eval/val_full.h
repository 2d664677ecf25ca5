/* Validation per whole image (issue 7: `yolocl val --val-full`, `yolocl train --val-full`).
 *
 * Tiled validation (val.h over a tile set) scores each window against the labels clipped to it.
 * Here each image of the dataset is detected by slices as `yolocl detect --slice` does
 * (yc_slice_detect_image, slice.h: the windows of the tile grid streamed from the file, the
 * whole image never decoded when it is larger than decode_max, boxes moved to image pixels and
 * merged across windows), and the merged detections are matched against the image's own labels
 * with val.py's matching and ap_per_class (the sink of val.h), so P, R and mAP are per whole
 * image, as a user of sliced detection sees them.
 *
 *   windows  letterboxed to imgsz x imgsz (auto=False: one inference graph, batch 1), eval
 *            forward, val.py's NMS (conf_thres, iou_thres, multi-label, at most max_det per
 *            window, class-agnostic with single_cls), boxes scaled back to the window unrounded;
 *   merge    the slice options' method, metric and threshold (yolocl val and train use
 *            yc_merge_params_nms_ios: NMM, detect's default, lets the best box of an object
 *            absorb the low-scored boxes around it at conf 0.001 and grow past the object),
 *            optionally with the reduced whole image (full); every merged detection is kept (at
 *            most windows x max_det per image), best first; with single_cls the merge is
 *            class-agnostic and the classes are set to 0 after it;
 *   labels   the image's boxes of the dataset, (x, y, w, h) * (w0, h0, w0, h0) in float32, then
 *            corners.
 * Validation losses are not computed (res->loss is zero).  Speeds are per window.
 *
 * Memory: one image open at a time, its pixel buffers reused from image to image, one window,
 * the detector's input and outputs, and the detections of one image before and after merging;
 * yc_val_full_host_bytes bounds them for the planner. */
#ifndef YC_VAL_FULL_H
#define YC_VAL_FULL_H

#include <stdbool.h>
#include <stddef.h>

#include "dataset.h"
#include "model.h"
#include "slice.h"
#include "val.h"

/* Validates `m` (allocated, weights loaded; `stride` its YOLOv5 gs) on the images of `ds` (the
 * whole images, not a tile set).  opt: thresholds, max_det (per window), single_cls, printing,
 * imgsz (the window's input size, a multiple of stride), save_dir with plots, save_txt and
 * save_json (whole-image predictions), arena (the inference graph goes there when set) as for
 * yc_validate; opt->batch is not used (batch 1).  so: the windows (tile, overlap), the merge,
 * the full pass and decode_max; its max_det is ignored.  names as yc_validate.  res is
 * overwritten (free with yc_val_result_free); res->nbatches counts the windows.
 * An image that cannot be read, or whose size differs from the scan's, fails the validation
 * with YC_EIO or YC_EFORMAT naming it. */
int yc_validate_full(yc_model *m, int stride, const yc_dataset *ds, const char *const *names,
                     const yc_val_options *opt, const yc_slice_options *so, yc_val_result *res);

/* The host memory yc_validate_full needs at most, besides the statistics that grow with the
 * dataset and the inference graph's activations: pixel buffers for images up to max_w x max_h
 * (the largest of the dataset; decoded whole up to decode_max a side), windows of `tile` with
 * `overlap` letterboxed to imgsz, max_det detections per window and the merge of the largest
 * image's, the decoded rows and NMS candidates, and staging copies of the input and heads when
 * the device does not share host memory (host_device false).  0 when the sizes are invalid. */
size_t yc_val_full_host_bytes(const yc_model *m, int imgsz, int tile, double overlap,
                              int max_det, int max_w, int max_h, int decode_max,
                              bool host_device);

#endif
