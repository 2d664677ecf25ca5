/* Inference on image files: YOLOv5 v7.0 detect.py for images (LoadImages, letterbox with
 * auto=True, batch 1, eval forward, single-label NMS, scale_boxes(...).round(), Annotator), and the
 * weights loading shared by `yolocl val` and `yolocl detect`.  Reference: docs/YOLOV5.md 5.4,
 * 6.1 and 7.
 *
 * Sources: an image or video file, a directory (its image and video files, not recursive, as
 * Python's sorted(glob('*.*'))), a glob(3) pattern (matches sorted by name; '**' is not recursive
 * as in Python's glob(recursive=True)), each the images first, then the videos, as LoadImages
 * orders them; or a live source (video.h): an rtsp/rtmp/http(s) stream or a webcam number.  Video
 * needs a build with FFmpeg (video.h); screenshots and lists of streams (.txt) are not supported.
 *
 * Outputs in save_dir, as detect.py writes them:
 *   <image name>                  the image with boxes and "name conf" labels (JPEG quality 95 for
 *                                 .jpg/.jpeg, PNG for .png, other suffixes through libvips, or
 *                                 <stem>.jpg when libvips cannot write that format);
 *   labels/<stem>.txt             with save_txt: "class x y w h [conf]" normalised to the image,
 *                                 lowest confidence first (detect.py writes reversed(det)),
 *                                 appended;
 *   crops/<class name>/<stem>.jpg with save_crop: each box grown by 2% + 10 pixels (save_one_box),
 *                                 later crops of the same image numbered <stem>2.jpg, <stem>3.jpg;
 *   <stem>.mp4                    for a video or live source, its annotated frames (video.h);
 *   labels/<stem>_<frame>.txt     with save_txt, per frame of a video (numbered from 1; from 0
 *                                 for a live source, as detect.py numbers them).
 * and prints "image 1/3 path: 480x640 2 persons, 1 bus, 43.2ms" per image (the letterboxed input
 * size h x w, the class counts in class order, the inference time), "video 3/3 (12/300) path:
 * ..." per frame of a video (frame and int(frame count / vid_stride)), "0: ..." per frame of a
 * live source, then the speed line. */
#ifndef YC_DETECT_H
#define YC_DETECT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "dataset.h"
#include "draw.h"
#include "image.h"
#include "image_read.h"
#include "model.h"

/* ------------------------------------------------------------------------------------------------
 * Weights for inference
 * ---------------------------------------------------------------------------------------------- */

/* A model ready for inference and what came with its weights. */
typedef struct yc_infer_model {
    /* the model, allocated on the backend with its weights loaded (owned) */
    yc_model *m;
    /* class names that came with the weights (m->nc entries, owned), or NULL */
    char **names;
    /* YOLOv5's gs: max(32, the model's largest stride) */
    int stride;
} yc_infer_model;

/* Loads `weights` (a YOLOv5 .pt file, a yolocl checkpoint or export, or a plain safetensors state
 * dict: weights.h) for inference on `be`, strictly (every tensor the model holds, same shapes).
 * The architecture is `cfg` (a bundled model name or a yaml path) when given, else the config
 * embedded in the weights (.pt files and yolocl checkpoints have one; a plain state dict needs
 * cfg).  The class count is the weights' (metadata, else their Detect head), overriding the
 * config's; class names come from the weights when they have nc of them. */
int yc_infer_model_load(yc_infer_model *out, const char *weights, const char *cfg,
                        yc_backend *be);
void yc_infer_model_free(yc_infer_model *im);

/* YOLOv5's check_img_size: `size` rounded up to a multiple of `stride`, at least `floor`. */
int yc_check_img_size(int size, int stride, int floor);

/* ------------------------------------------------------------------------------------------------
 * Detection on one image
 * ---------------------------------------------------------------------------------------------- */

typedef struct yc_detect_options {
    /* inference size h x w (multiples of the stride; the letterbox pads only to the next stride
     * multiple of the resized image, auto=True) */
    int img_h, img_w;
    /* NMS: confidence (0.25), IoU (0.45), detections per image (1000), best class only */
    float conf_thres;
    double iou_thres;
    int max_det;
    /* keep only these classes (n_classes 0: all) */
    const int *classes;
    int n_classes;
    /* class-agnostic NMS */
    bool agnostic;
    /* letterbox every input to exactly img_h x img_w (YOLOv5's letterbox with auto=False) instead
     * of padding only to the next stride multiple (auto=True, detect.py): every input then has
     * one shape and the inference graph is planned once (sliced detection); false by default */
    bool fixed_shape;
    /* val.py's NMS and boxes instead of detect.py's: every class above conf_thres of a box is a
     * detection (multi_label), and boxes are not rounded to whole pixels; false by default (whole
     * image validation by slices, val_full.h) */
    bool val_mode;
    /* an activation arena the inference graph is placed in (shared with other graphs, e.g. the
     * trainer's), or NULL for one of the detector's own */
    struct yc_arena *arena;
    /* test-time augmentation (detect.py --augment: tta.h) */
    bool augment;
    /* FP16 storage of the input and activations, FP32 arithmetic (detect.py --half; the backend
     * must store FP16: yc_device_info.fp16_storage) */
    bool half;
    /* keep every layer's output for yc_detector_visualize (detect.py --visualize) */
    bool visualize;
} yc_detect_options;

/* detect.py's defaults: 640x640, conf 0.25, IoU 0.45, max_det 1000. */
void yc_detect_options_default(yc_detect_options *o);

/* Times of one image, milliseconds. */
typedef struct yc_detect_times {
    /* uint8 -> float / 255 and upload; forward, read-back and decoding; NMS */
    double pre, inf, nms;
} yc_detect_times;

typedef struct yc_detector yc_detector;

/* A detector over an inference model (not owned; it must outlive the detector). */
int yc_detector_new(yc_detector **out, const yc_infer_model *im, const yc_detect_options *opt);
void yc_detector_free(yc_detector *d);
/* The options the detector was made with. */
const yc_detect_options *yc_detector_options(const yc_detector *d);

/* Detects objects in `img` (the decoded image, RGB): letterbox, forward, NMS, boxes scaled back to
 * img's pixels and rounded (half to even) as detect.py (not rounded with val_mode).  *dets points
 * to *n rows (x1, y1, x2, y2, conf, cls), best first, valid until the next call.  in_h/in_w (may
 * be NULL) receive the letterboxed input size; times may be NULL. */
int yc_detector_run(yc_detector *d, const yc_image *img, const float **dets, int *n, int *in_h,
                    int *in_w, yc_detect_times *times);

/* Segmentation models (m->nm > 0: segment/predict.py), after yc_detector_run: the masks of its
 * *n detections in the letterboxed input (process_mask(..., upsample=True): each cropped to its
 * box at Proto's size, resampled bilinearly to the input, > 0.5), *n planes of *h x *w bytes in
 * detection order; NULL (and *n 0) for a detection model, for no detections, and for
 * yc_detector_run_reduced. */
const uint8_t *yc_detector_masks(const yc_detector *d, int *n, int *h, int *w);

/* segment/predict.py's annotator.masks over the picture of the last yc_detector_run (im: that
 * picture, RGB, before its boxes are drawn): each of the nd detections' masks
 * (yc_detector_masks) resampled to the picture (scale_image: cropped to the letterbox content,
 * cv2.resize-style bilinear) and blended in its class's colour at alpha 0.5
 * (yc_mask_overlay_*: retina selects --retina-masks' blend).  Nothing without masks. */
int yc_detect_draw_masks(const yc_detector *d, yc_image *im, const float *dets, int nd,
                         bool retina);

/* segment/predict.py's --save-txt after yc_detector_run: appends to save_dir/labels/<stem>.txt,
 * lowest confidence first, "class x1 y1 x2 y2 ... [conf]" (%g), the points the largest outer
 * contour of each mask in the input (masks2segments, yc_mask_largest_contour) scaled to the
 * img_w x img_h picture (scale_segments: minus the letterbox pad, divided by the gain, clipped,
 * normalised; float32).  A mask without a contour gives a line with the class alone.  Nothing
 * without masks. */
int yc_detect_write_segments(const yc_detector *d, const char *save_dir, const char *src,
                             const float *dets, int nd, int img_w, int img_h, bool save_conf);

/* detect.py --visualize after yc_detector_run: the feature maps of the last image's forward
 * (visualize.h) into save_dir/<stem of src> (stem2, ... when taken).  Nothing with augment
 * (YOLOv5's augmented forward does not visualize).  Needs opt.visualize. */
int yc_detector_visualize(yc_detector *d, const char *save_dir, const char *src);

/* The letterbox geometry of an h0 x w0 image in the detector's input (its unpadded size is the
 * size to read a large image reduced to, image_read.h). */
void yc_detector_geometry(const yc_detector *d, int h0, int w0, yc_letterbox_info *g);

/* yc_detector_run for an h0 x w0 image read reduced: `content` is it already resized to the
 * unpadded size of yc_detector_geometry (it is padded, not resized again); boxes are scaled back
 * to h0 x w0 pixels as for the whole image. */
int yc_detector_run_reduced(yc_detector *d, const yc_image *content, int h0, int w0,
                            const float **dets, int *n, int *in_h, int *in_w,
                            yc_detect_times *times);

/* ------------------------------------------------------------------------------------------------
 * detect.py over files
 * ---------------------------------------------------------------------------------------------- */

/* The image and video files of a source (file, directory or glob), in LoadImages's order, or the
 * live source itself.  YC_EIO when the path does not exist, YC_EFORMAT when it names no image or
 * video. */
int yc_detect_sources(const char *source, yc_path_list *out);

typedef struct yc_detect_save {
    /* run directory (created if needed) */
    const char *save_dir;
    /* annotated images (detect.py without --nosave) */
    bool save_img;
    /* labels/<stem>.txt, with confidences when save_conf */
    bool save_txt, save_conf;
    /* crops/<name>/<stem>.jpg */
    bool save_crop;
    /* box line width in pixels (detect.py --line-thickness, 3) */
    int line_thickness;
    /* labels without class names (no label at all), or without the confidence */
    bool hide_labels, hide_conf;
    /* print the per-image lines, the speed line and where the results went */
    bool print;
    /* detect.py --visualize: the feature maps of each image (yc_detector_visualize; the
     * detector made with opt.visualize) */
    bool visualize;
    /* whole-image detection: the read limits (image_read.h; zeros: the defaults).  Images larger
     * than their exact_pixels are read reduced to the input size and their annotated copy drawn
     * strip by strip; those they refuse are skipped with a warning naming --slice */
    yc_read_limits limits;
    /* videos: every vid_stride-th frame (detect.py --vid-stride; < 2: every frame) */
    int vid_stride;
    /* when set and *stop becomes nonzero (a signal handler's flag), the loop ends after the frame
     * or image in hand, finishing the annotated video (a live source runs until then) */
    const volatile sig_atomic_t *stop;
    /* segmentation models: segment/predict.py --retina-masks (the masks blended over the
     * picture as Annotator.masks does with im_gpu=None; yc_detect_draw_masks) */
    bool retina_masks;
} yc_detect_save;

/* Totals of a run. */
typedef struct yc_detect_summary {
    /* images processed and detections kept */
    int images;
    size_t detections;
    /* milliseconds per image: pre-process, inference, NMS */
    double t_pre, t_inf, t_nms;
    /* label files in save_dir/labels (save_txt) */
    int n_label_files;
    /* files skipped because they could not be read (videos that did not open included) */
    int skipped;
    /* videos that ended early: a read error part way, or fewer frames than their header gives */
    int videos_cut;
} yc_detect_summary;

/* Runs the detector on every file, writing what `save` asks for.  names: m->nc class names (NULL:
 * "class0", "class1", ...).  A file that cannot be decoded, or that the read limits refuse, is
 * reported (warning) and skipped (counted in sum->skipped); a video that fails or ends part way
 * is reported and ends there (sum->videos_cut), its annotated video holding the frames before.
 * Videos are read frame by frame and written as they go, never held whole.  Images larger than the limits'
 * exact_pixels are read reduced to the input size (image_read.h), never whole: their labels and
 * annotated copy are in their own pixels as for any image (the copy drawn strip by strip, a tiled
 * pyramidal TIFF beyond 8192 pixels a side), and no crops are saved for them (warned once). */
int yc_detect_files(yc_detector *d, const yc_path_list *files, const char *const *names, int nc,
                    const yc_detect_save *save, yc_detect_summary *sum);

/* ------------------------------------------------------------------------------------------------
 * Pieces of detect.py's loop, shared with sliced detection (slice.h)
 * ---------------------------------------------------------------------------------------------- */

/* Creates save_dir and, with save_txt, save_dir/labels (nothing when save_dir is NULL). */
int yc_detect_make_dirs(const yc_detect_save *save);

/* How detections are drawn on annotated images (YOLOv5's Annotator.box_label). */
typedef struct yc_detect_style {
    /* class names (nc entries, NULL entries allowed) or NULL: "class0", "class1", ... */
    const char *const *names;
    /* number of names */
    int nc;
    /* box line width and label text scale in pixels (< 1: 3, detect.py's default) */
    int line_thickness;
    /* boxes without labels; labels without the confidence */
    bool hide_labels, hide_conf;
} yc_detect_style;

/* The drawing settings of `save` with these class names. */
yc_detect_style yc_detect_style_of(const yc_detect_save *save, const char *const *names, int nc);

/* The name of class cls: s->names[cls] when there is one, else "class<cls>" written into buf. */
const char *yc_detect_class_name(const yc_detect_style *s, int cls, char *buf, size_t len);

/* Draws nd detections (rows x1, y1, x2, y2, conf, cls in pixels of the picture, best first) as
 * detect.py does, last row first so that the best box ends on top, with the label "name 0.87"
 * (or as style hides it).  The canvas holds the part of the picture whose top-left pixel is
 * (ox, oy) (0, 0 for the whole picture); boxes whose drawing misses it are skipped, so drawing a
 * picture part by part gives the same pixels as drawing it whole (yc_draw_label_at). */
void yc_detect_draw(yc_canvas *c, int ox, int oy, const float *dets, int nd,
                    const yc_detect_style *s);

/* Appends nd detections (best first) to save_dir/labels/<stem of src>.txt as detect.py: lowest
 * confidence first, "class x y w h [conf]" normalised to img_w x img_h.  Nothing when nd is 0. */
int yc_detect_write_labels(const char *save_dir, const char *src, const float *dets, int nd,
                           int img_w, int img_h, bool save_conf);

/* Writes the annotated image `im` to save_dir under the basename of src (JPEG quality 95 for .jpg
 * and .jpeg, PNG for .png, other suffixes through libvips, <stem>.jpg when libvips cannot write
 * that format). */
int yc_detect_save_annotated(const yc_image *im, const char *save_dir, const char *src);

/* detect.py's save_one_box: the box xyxy grown by 2% + 10 pixels, clipped to im, written to
 * save_dir/crops/<name>/<stem>.jpg (<stem>2.jpg, ... when taken).  tmp holds the crop. */
int yc_detect_save_crop(const yc_image *im, const float *xyxy, const char *save_dir,
                        const char *name, const char *src, yc_image *tmp);

/* The class counts of nd detections in class order, "2 persons, 1 bus, " (as detect.py prints
 * them), into buf (len bytes). */
void yc_detect_describe(char *buf, size_t len, const float *dets, int nd,
                        const char *const *names, int nc);

#endif
