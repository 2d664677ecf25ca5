/* Validation: YOLOv5 v7.0 val.py's run() over a validation loader, shared by `yolocl val` and the
 * per-epoch validation of `yolocl train`.  Reference: docs/YOLOV5.md 5.5, 6 and 11 item 14.
 *
 * For each batch of the loader (rectangular batches, pad 0.5, letterboxed with auto=False):
 *   pre-process   uint8 CHW -> float / 255 into the eval graph's input (one graph per batch shape,
 *                 kept while the shape repeats), on the device where the backend converts uint8;
 *   inference     eval-mode forward (BatchNorm with running statistics, not folded into the
 *                 convolutions as val.py's fused model: the same to float round-off), the heads
 *                 decoded to YOLOv5's rows (yc_detect_decode: Detect's eval output).  Where the
 *                 backend decodes on the device (detect_filter: OpenCL), only the rows whose
 *                 objectness passes conf_thres come back, sorted back into yc_detect_decode's
 *                 order (NMS's only use of the others is to drop them); when more pass than
 *                 yc_val_candidate_cap rows, the heads are read back and decoded here;
 *   val loss      optional: YOLOv5's loss on the raw heads and the batch targets (no gradient:
 *                 yc_loss_compute, or the backend's own, loss_device.h), box/obj/cls summed over
 *                 batches and divided by the number of batches;
 *   NMS           yc_nms per image (conf 0.001, IoU 0.6, multi-label, class-agnostic only with
 *                 single_cls, max_det 300, at most 30000 boxes into NMS) with NO time limit:
 *                 detections are never dropped because the machine is slow (YOLOv5 v7.0 drops the
 *                 rest of a batch after 0.5 + 0.05 * batch seconds);
 *   statistics    predictions and labels scaled to original-image pixels (scale_boxes with the
 *                 image's load ratio and letterbox pad), matched over IoU 0.5:0.95
 *                 (yc_val_stats_add), confusion matrix (only when plotting, as val.py);
 * then ap_per_class: P and R at the maximum of the smoothed mean F1, mAP@0.5, mAP@0.5:0.95,
 * per-class mAP (nc values, for image weights) and fitness.
 *
 * Timing is YOLOv5's speed line: milliseconds per image of pre-process (conversion and upload),
 * inference (forward, head read-back and Detect decoding, which YOLOv5 runs inside the model) and
 * NMS.  Loading and letterboxing happen in the loader threads and are not counted, as in val.py.
 *
 * Outputs in save_dir, as val.py writes them:
 *   plots      PR_curve.png, F1_curve.png, P_curve.png, R_curve.png, confusion_matrix.png
 *              (a segmentation model: Box* and Mask* curves, val_seg.h)
 *              (normalised, conf 0.25, IoU 0.45), val_batch{0,1,2}_labels.jpg and _pred.jpg;
 *   save_txt   labels/<image stem>.txt, one line per detection, "class x y w h [conf]" with the
 *              box normalised to the original image, printed with %g, appended (as YOLOv5 opens
 *              the file in append mode); images without detections get no file;
 *   save_json  <json_name> (default predictions.json): a COCO-style list of
 *              {"image_id", "category_id", "bbox" [x, y, w, h] original pixels rounded to 3
 *              decimals, "score" rounded to 5}, formatted as Python's json.dump writes it.
 *              image_id is the image file's stem, as a number when it is all digits.
 *              category_id is the class index, except with coco91 (set by `yolocl val` when the
 *              dataset looks like COCO: 80 names, the first "person"), where YOLOv5's
 *              coco80_to_coco91_class() maps it to COCO's 1..90 ids.  (YOLOv5 maps only when the
 *              val entry ends in coco/val2017.txt; yolocl decides from the names.)
 *
 * Library code: prints only when options.print is set, returns status codes, never exits. */
#ifndef YC_VAL_H
#define YC_VAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "graph.h"
#include "loader.h"
#include "loss.h"
#include "metrics.h"
#include "model.h"
#include "nms.h"

typedef struct yc_val_options {
    /* NMS: confidence threshold (0.001), IoU threshold (0.6), detections per image (300) */
    float conf_thres;
    double iou_thres;
    int max_det;
    /* every class is 0: agnostic NMS and one-class statistics (the dataset must have been loaded
     * with single_cls too) */
    bool single_cls;
    /* per-epoch validation of training: per-class lines only with verbose (val.py's `training`) */
    bool training;
    /* per-class lines in the table (printed anyway when nc < 50 outside training) */
    bool verbose;
    /* print the results table and the speed line on stdout */
    bool print;
    /* image size and batch size, only for the speed line's "at shape (batch, 3, imgsz, imgsz)" */
    int imgsz, batch;
    /* run directory for plots and saved predictions (created if needed); NULL when nothing is
     * saved */
    const char *save_dir;
    /* write the curves, the confusion matrix and the first three batches' label/prediction
     * mosaics into save_dir */
    bool plots;
    /* labels/<stem>.txt with the detections; with save_conf the confidence is appended */
    bool save_txt, save_conf;
    /* COCO-style JSON of the detections, file name json_name (NULL: "predictions.json") */
    bool save_json;
    const char *json_name;
    /* map class indices to COCO's 91-category ids in the JSON */
    bool coco91;
    /* an activation arena shared with other graphs (the trainer's), or NULL for one of its own */
    struct yc_arena *arena;
    /* test-time augmentation (val.py --augment: tta.h), only without a loss (as val.py, whose
     * model(im) with compute_loss ignores augment) */
    bool augment;
    /* FP16 storage of the input and activations, FP32 arithmetic (val.py --half; the backend
     * must store FP16: yc_device_info.fp16_storage) */
    bool half;
    /* val.py --save-hybrid: each image's labels join its predictions before NMS as boxes of
     * confidence 1 (non_max_suppression(labels=lb)), so the saved labels and the metrics are of
     * labels and predictions merged (autolabelling; the mAP is not the model's) */
    bool save_hybrid;
    /* segmentation models (val_seg.h): the batches' ground truth masks are in the overlap format
     * (one index map per image, loader.h; segment/train.py's default) rather than one mask per
     * target (segment/val.py run alone: overlap=False).  Set it as the loader was made. */
    bool mask_overlap;
} yc_val_options;

/* val.py's defaults: conf 0.001, IoU 0.6, max_det 300, imgsz 640, batch 32, print on, nothing
 * saved, overlap masks. */
void yc_val_options_default(yc_val_options *o);

typedef struct yc_val_result {
    /* P, R, mAP@0.5, mAP@0.5:0.95, fitness, per-class maps (metrics.nc values), labels per class,
     * images seen, and ap_per_class's curves (metrics.ap) */
    yc_val_metrics metrics;
    /* validation losses box, obj, cls (sum over batches / number of batches); zero without loss
     * parameters */
    double loss[3];
    /* milliseconds per image: pre-process, inference, NMS */
    double t_pre, t_inf, t_nms;
    /* batches run and detections kept in total */
    int nbatches;
    size_t n_det;
    /* label files in save_dir/labels after the run (save_txt) */
    int n_label_files;
    /* segmentation models (m->nm > 0, val_seg.h): seg is true, `metrics` holds the box metrics
     * (Box(P R mAP50 mAP50-95) of the table) and mask_metrics the mask ones (Mask(...)), their
     * maps per class each (segment/val.py returns their sum per class as its maps); loss_seg is
     * the validation seg loss (sum over batches / number of batches; zero without loss
     * parameters), loss[] keeping box, obj, cls as for detection (segment/val.py's loss vector
     * is box, seg, obj, cls).  The fitness of metrics and mask_metrics is each one's own
     * (yc_fitness); segment/train.py's is yc_val_seg_fitness.  For detection models seg is false
     * and mask_metrics and loss_seg are zero. */
    bool seg;
    yc_val_metrics mask_metrics;
    double loss_seg;
} yc_val_result;

void yc_val_result_free(yc_val_result *r);

/* utils/segment/metrics.py fitness of a segmentation model's validation (segment/train.py's
 * best.pt criterion): the dot product of [0, 0, 0.1, 0.9, 0, 0, 0.1, 0.9] with the box
 * (P, R, mAP50, mAP50-95) then the mask ones, summed as numpy sums 8 values (pairwise:
 * ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))).  For a detection result (seg false) the
 * box fitness, metrics.fitness. */
double yc_val_seg_fitness(const yc_val_result *r);

/* The checks yc_validate and yc_validate_seg make before a run: a model predicting more classes
 * than the dataset has (without single_cls) and max_det under 1 are usage errors. */
int yc_val_check(const yc_model *m, const yc_dataset *ds, const yc_val_options *opt);

/* The evaluation graph of m for a batch of n x h x w in *g (yc_validate's, yc_validate_seg's):
 * kept when shape (the n, h, w of *g) already is that, else built (FP16 storage when half) and
 * allocated in arena (NULL: one of its own) in place of the old one, and shape updated.  On
 * failure *g is NULL and the error names the shape. */
int yc_val_graph_for(yc_graph **g, int shape[3], yc_model *m, int n, int h, int w, bool half,
                     struct yc_arena *arena);

/* Validates `m` (allocated on its backend, weights loaded) over every batch of `loader` (a
 * validation loader: train = false; it is restarted, epoch 0) whose images are `ds`'s.  A model
 * with a Segment head (m->nm > 0) is validated as segment/val.py does (val_seg.h): its loader
 * must give masks (loader.h) and lp, if any, be yc_seg_step_loss_params's.
 * names: the class names (ds->nc entries, or one with single_cls), for tables and plots; may be
 * NULL.  lp: loss parameters for the validation loss (yc_step_loss_params), or NULL.
 * res is overwritten; free it with yc_val_result_free. */
int yc_validate(yc_model *m, yc_loader *loader, const yc_dataset *ds, const char *const *names,
                const yc_val_options *opt, const yc_loss_params *lp, yc_val_result *res);

/* ------------------------------------------------------------------------------------------------
 * The statistics side of yc_validate, fed one image at a time by callers that detect by other
 * means (whole-image validation by slices, val_full.h): val.py's statistics and confusion matrix,
 * saved predictions, the results table and the plots, as yc_validate makes them
 * ---------------------------------------------------------------------------------------------- */

typedef struct yc_val_sink yc_val_sink;

/* A sink for a validation of nc classes (1 with single_cls) with opt (copied; its strings must
 * outlive the sink): creates save_dir (and save_dir/labels with save_txt) when something is
 * saved.  YC_ENOMEM or a directory error. */
int yc_val_sink_new(yc_val_sink **out, int nc, const yc_val_options *opt);
/* Frees the sink (NULL is allowed). */
void yc_val_sink_free(yc_val_sink *s);

/* One image, in validation order: `image` is its path (for labels/<stem>.txt and the JSON's
 * image_id), w0 x h0 its size in pixels; dets: nd rows (x1, y1, x2, y2, conf, cls) in image
 * pixels sorted by confidence, best first (classes 0 with single_cls); labels: nl rows
 * (cls, x1, y1, x2, y2) in image pixels.  As yc_val_stats_add, plus the saved predictions. */
int yc_val_sink_add(yc_val_sink *s, const char *image, int w0, int h0, const float *dets, int nd,
                    const float *labels, int nl);
/* yc_val_sink_add with, for save_json, each detection's "segmentation" as JSON text (segs: nd
 * strings, an entry NULL for none; segs may be NULL), written after its "score" as
 * segment/val.py's save_one_json does (yc_rle_json, coco_rle.h). */
int yc_val_sink_add_seg(yc_val_sink *s, const char *image, int w0, int h0, const float *dets,
                        int nd, const float *labels, int nl, const char *const *segs);

/* The end of a validation, first part: res->metrics and res->n_det (the other fields are left
 * to the caller) and, with opt->print, the results table on stdout.  The caller prints its speed
 * line after it, as val.py does, then calls yc_val_sink_save. */
int yc_val_sink_metrics(yc_val_sink *s, const char *const *names, yc_val_result *res);
/* Second part: the curves and the confusion matrix (opt->plots), the JSON (opt->save_json) and
 * res->n_label_files (opt->save_txt).  The curves are PR_curve.png, F1_curve.png, P_curve.png
 * and R_curve.png of res->metrics; for a segmentation result (res->seg) those of res->metrics
 * named BoxPR_curve.png ... and those of res->mask_metrics named MaskPR_curve.png ..., as
 * segment/val.py's ap_per_class_box_and_mask writes them. */
int yc_val_sink_save(yc_val_sink *s, const char *const *names, yc_val_result *res);

/* The statistics the sink gathered so far (the box statistics of a segmentation validation) and
 * the number of detections added. */
const yc_val_stats *yc_val_sink_stats(const yc_val_sink *s);
size_t yc_val_sink_detections(const yc_val_sink *s);

/* ------------------------------------------------------------------------------------------------
 * Pieces, exposed for tests and for detect
 * ---------------------------------------------------------------------------------------------- */

/* The eval forward, Detect decoding and NMS of one batch, as yc_validate runs them: images are
 * n x 3 x h x w uint8 CHW RGB (h, w multiples of the largest stride).  dets receives
 * n * np->max_det rows (x1, y1, x2, y2, conf, cls) in the batch image's pixels, image i's first
 * at i * max_det * 6, ndet the count of each image.  Detection models only (YC_EUSAGE for a
 * segmentation model). */
int yc_val_detect_batch(yc_model *m, const uint8_t *images, int n, int h, int w,
                        const yc_nms_params *np, float *dets, int *ndet);

/* Where the backend decodes and filters the heads itself (yc_backend_i.detect_filter), the rows
 * of a batch it keeps room for: 1/YC_VAL_CANDIDATE_SHARE of the batch's rows (at least 1).  A
 * trained model leaves far fewer above val.py's 0.001; when more pass (an untrained model, whose
 * objectness is near 0.001 everywhere), the heads are read back and decoded on the host. */
#define YC_VAL_CANDIDATE_SHARE 4
static inline size_t yc_val_candidate_cap(size_t rows_per_image, int batch)
{
    size_t cap = rows_per_image * (size_t)(batch > 0 ? batch : 1) / YC_VAL_CANDIDATE_SHARE;
    return cap > 0 ? cap : 1;
}

/* Predictions of one image in a letterboxed batch image -> original pixels: rows of `stride`
 * floats starting (x1, y1, x2, y2), scaled in place as val.py's scale_boxes(im.shape, box, shape0,
 * ratio_pad) with gain = info->ratio_h and pad = the letterbox's (pad_w, pad_h), then clipped to
 * the original image. */
void yc_val_scale_to_original(float *boxes, size_t n, size_t stride, const yc_val_info *info);

/* Batch targets of image `image` (rows of 6: image, class, x, y, w, h normalised to the batch
 * image of batch_h x batch_w) -> labels (class, x1, y1, x2, y2) in original pixels, as val.py:
 * xywh * (w, h, w, h) in float32, xywh2xyxy, scale_boxes.  With single_cls the class is 0.
 * out holds 5 floats per target row of the image; returns the number written. */
int yc_val_targets_to_original(const float *targets, int nt, int image, int batch_h, int batch_w,
                               const yc_val_info *info, bool single_cls, float *out);

/* One line of a YOLO txt label as YOLOv5 writes it: "cls x y w h" or "cls x y w h conf" with %g,
 * the xyxy box (original pixels) converted to xywh in float32 and divided by (w0, h0, w0, h0).
 * Writes at most len bytes (with NUL) and a trailing newline. */
void yc_format_txt_line(char *buf, size_t len, const float *xyxy, float conf, int cls, int w0,
                        int h0, bool save_conf);

/* val_batch{k}_labels.jpg and val_batch{k}_pred.jpg in opt->save_dir (val.py's plot_images of
 * the first 16 images of batch k): the batch's targets, and the detections of each image i
 * (ndet[i] rows (x1, y1, x2, y2, conf, cls) in the batch image's pixels at dets + i * max_det * 6),
 * at most max_plot of them per image (<= 0: all; segment/val.py's output_to_target(max_det=15)
 * plots 15). */
int yc_val_plot_batch(const yc_val_options *opt, const yc_batch *b, const yc_dataset *ds,
                      const float *dets, const int *ndet, int max_det, int max_plot,
                      const char *const *names, int nc, int k);

/* Python's Path(path).stem: the last component without its last suffix ("a/b.tar.gz" ->
 * "b.tar"; a leading dot is not a suffix), into buf. */
void yc_path_stem(const char *path, char *buf, size_t len);

/* Python's repr() of a float (shortest round-trip text: "0.1", "473.0", "5e-05"). */
void yc_py_float_repr(double v, char *buf, size_t len);

/* YOLOv5's coco80_to_coco91_class(): COCO category id (1..90) of class i (0..79), or i + 1
 * outside that range. */
int yc_coco80_to_91(int i);

/* YOLO txt label files written into DIR/labels (save_txt of val and detect). */
int yc_count_label_files(const char *dir);

#endif
