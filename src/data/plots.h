/* YOLOv5's plots, drawn with draw.h's primitives and saved as images (docs/YOLOV5.md 3.8):
 * train_batchN.jpg mosaics, labels.jpg statistics, results.png from results.csv, PR/F1/P/R curves
 * and the confusion matrix.  Like all drawing here they are byte-identical from run to run. */
#ifndef YC_PLOTS_H
#define YC_PLOTS_H

#include <stdbool.h>
#include <stdint.h>

/* loader.h's batch and dataset.h's dataset (declared here: draw.h includes this header and
 * loader.h includes draw.h) */
struct yc_batch;
struct yc_dataset;

/* Pixel layouts accepted for batch images. */
typedef enum yc_pixel_layout {
    /* uint8 RGB, height x width x 3 */
    YC_PIX_U8_HWC,
    /* uint8 RGB planes, 3 x height x width (YOLOv5's batch tensor) */
    YC_PIX_U8_CHW,
    /* float RGB planes in [0, 1], 3 x height x width */
    YC_PIX_F32_CHW,
} yc_pixel_layout;

/* One image of a batch, for yc_plot_batch. */
typedef struct yc_plot_image {
    /* pixels in `layout` (const uint8_t * or const float *) */
    const void *px;
    /* how px is laid out */
    yc_pixel_layout layout;
    /* size in pixels */
    int w, h;
    /* file name written on the tile (first 40 characters of its basename); may be NULL */
    const char *path;
} yc_plot_image;

/* One box of yc_plot_batch, in normalised coordinates of its image. */
typedef struct yc_plot_box {
    /* index of the image in the batch */
    int image;
    /* class id */
    int cls;
    /* centre and size, fractions of the image width and height */
    float cx, cy, w, h;
    /* confidence for a prediction (drawn only above 0.25, labelled "name 0.8"); negative for a
     * ground-truth box (labelled with the class name) */
    float conf;
} yc_plot_box;

/* YOLOv5's plot_images: up to 16 images tiled in a ceil(sqrt(n)) grid on white, the mosaic at
 * most 1920 pixels on its longer side, white tile borders, the file names, and the boxes in
 * class colours.  `names` (nc entries) may be NULL: class ids are written instead. */
int yc_plot_batch(const char *out_path, const yc_plot_image *images, int n,
                  const yc_plot_box *boxes, int n_boxes, const char *const *names, int nc);

/* The mask of one box of yc_plot_batch_masks: h x w bytes, nonzero inside, covering the box's
 * whole image at any resolution (the loader's masks at 1/4 of the image, process_mask's at the
 * prototypes' size, or the image's own).  m may be NULL: no mask. */
typedef struct yc_plot_mask {
    const uint8_t *m;
    int w, h;
} yc_plot_mask;

/* YOLOv5 v7.0 utils/segment/plots.py plot_images_and_masks: yc_plot_batch with masks[j] (one a
 * box, n_boxes entries; masks NULL draws none) drawn over image by image after its boxes: each
 * mask of a drawn box (ground truth, or a prediction above 0.25) is resized to the tile as
 * cv2.resize INTER_LINEAR of the uint8 mask then astype(bool) (masks.h yc_resize_u8_linear) and
 * blended im * 0.4 + class colour * 0.6, truncated to uint8.  The caller splits overlap index
 * maps into one mask a box (index == the box's place among its image's targets + 1), as
 * plot_images_and_masks does. */
int yc_plot_batch_masks(const char *out_path, const yc_plot_image *images, int n,
                        const yc_plot_box *boxes, int n_boxes, const yc_plot_mask *masks,
                        const char *const *names, int nc);

/* plot_images_and_masks of a segmentation batch with its labels (segment/train.py's
 * train_batch{0,1,2}.jpg, segment/val.py's val_batch{k}_labels.jpg): the first 16 images of b,
 * its targets (classes 0 with single_cls) and their masks: with `overlap` (b's masks are index
 * maps, loader.h) a target's mask is where its image's map equals its place among that image's
 * targets + 1, else its own mask (> 0.5); a batch without masks is drawn with boxes only.  ds
 * gives the file names written on the tiles (NULL: none). */
int yc_plot_batch_seg_labels(const char *out_path, const struct yc_batch *b,
                             const struct yc_dataset *ds,
                             bool overlap, bool single_cls, const char *const *names, int nc);

/* utils/plots.py imshow_cls, classify/train.py's train_images.jpg and test_images.jpg: the first
 * YC_CLS_PLOT_MAX of n images in a grid of m = min(8, round(sqrt(n))) columns and ceil(n / m)
 * rows, in row order on white, each under its title: the class name of labels[i], followed when
 * pred is not NULL by an em dash and the name of pred[i] ("true—pred").  Every image is resized
 * (bilinear) to a square tile of T = max(size, YC_CLS_PLOT_MIN_TILE) pixels, its largest side
 * (images are size x size as the classifier reads them); a cell is that tile and a title line of
 * yc_text_height(s) + YC_CLS_PLOT_PAD pixels above it, with YC_CLS_PLOT_PAD pixels around both,
 * where the text scale s is 1 + T / 256: the image is m * (T + 2 * pad) pixels wide and
 * rows * (T + 2 * pad + yc_text_height(s) + pad) high.  A title wider than its tile is cut to the
 * characters that fit.  `names` (nc entries) may be NULL or short: class ids are written instead.
 * The images' pixels are float RGB planes in [0, 1] (YC_PIX_F32_CHW: the caller undoes the
 * classifier's normalisation) or any yc_pixel_layout. */
#define YC_CLS_PLOT_MAX 25
#define YC_CLS_PLOT_MIN_TILE 128
#define YC_CLS_PLOT_PAD 6
int yc_plot_cls_images(const char *out_path, const yc_plot_image *images, int n,
                       const int *labels, const int *pred, const char *const *names, int nc);

/* The labels.jpg statistics (YOLOv5 plot_labels): instances per class, up to 1000 boxes drawn
 * centred, and 2D histograms of box centres (x, y) and sizes (width, height).  `labels` holds n
 * rows of (class, cx, cy, w, h), coordinates normalised.  The image is YC_LABELS_PLOT_SIZE square. */
#define YC_LABELS_PLOT_SIZE 1000
int yc_plot_labels(const char *out_path, const float *labels, int n, const char *const *names,
                   int nc);

/* YOLOv5's plot_results: a 2 x 5 grid (train box/obj/cls loss, precision, recall; val box/obj/cls
 * loss, mAP@0.5, mAP@0.5:0.95) against epoch, each with its points and a Gaussian-smoothed dotted
 * line (sigma 3, as gaussian_filter1d).  Columns are found by name.  The image is
 * YC_RESULTS_PLOT_W x YC_RESULTS_PLOT_H.  A segmentation run's file (a train/seg_loss column)
 * is drawn by yc_plot_results_seg instead, as segment/train.py does. */
#define YC_RESULTS_PLOT_W 2000
#define YC_RESULTS_PLOT_H 1000
int yc_plot_results(const char *csv_path, const char *out_path);

/* utils/segment/plots.py plot_results_with_masks (segment/train.py's results.png, best=True): a
 * 2 x 8 grid of segment/train.py's results.csv columns against epoch (train box/seg/obj/cls
 * loss, P(B), R(B), P(M), R(M); val box/seg/obj/cls loss, mAP50(B), mAP50-95(B), mAP50(M),
 * mAP50-95(M)), each with its points, no smoothing, a red marker at the best row (the first
 * maximum of 0.9 mAP50-95(B) + 0.1 mAP50(B) + 0.9 mAP50-95(M) + 0.1 mAP50(M), drawn at x = its
 * row index as YOLOv5 does) and a title of the column name over the best row's value rounded to
 * 5 decimals; the legend ("results", "best:N") on the second panel.  Columns are found by name;
 * YC_EFORMAT when one is missing.  The image is YC_RESULTS_PLOT_SEG_W x YC_RESULTS_PLOT_SEG_H
 * (figsize 18 x 6 at dpi 200). */
#define YC_RESULTS_PLOT_SEG_W 3600
#define YC_RESULTS_PLOT_SEG_H 1200
int yc_plot_results_seg(const char *csv_path, const char *out_path);

/* A family of curves on a shared x axis (PR, F1, P and R curves of val). */
typedef struct yc_curve_plot {
    /* title above the plot and axis labels; any may be NULL */
    const char *title, *xlabel, *ylabel;
    /* number of points of every series, and their x values */
    int n_points;
    const float *x;
    /* n_series thin curves, row-major n_series x n_points; may be 0 / NULL */
    int n_series;
    const float *y;
    /* legend text of each series (n_series entries); NULL for no per-series legend.  As in
     * YOLOv5, with 21 or more series the curves are grey and not in the legend. */
    const char *const *series_labels;
    /* the bold mean curve (n_points) and its legend text; both may be NULL */
    const float *mean;
    const char *mean_label;
    /* axis ranges; a range with min >= max is taken as [0, 1] */
    float xmin, xmax, ymin, ymax;
} yc_curve_plot;

/* Size of yc_plot_curves images. */
#define YC_CURVE_PLOT_W 1350
#define YC_CURVE_PLOT_H 900
int yc_plot_curves(const char *out_path, const yc_curve_plot *p);

/* YOLOv5's confusion matrix: `matrix` is (nc + 1) x (nc + 1) counts, row = predicted class,
 * column = true class, the last row and column being background.  When `normalize` is true each
 * column is divided by its sum; cells below 0.005 stay blank, values are written when nc < 30,
 * and ticks are the names plus "background" when `names` is given.  The image size grows with
 * nc. */
int yc_plot_confusion(const char *out_path, const float *matrix, int nc, const char *const *names,
                      bool normalize);

#endif
