/* YOLOv5's plots, drawn with draw.h's primitives and saved as images (docs/YOLOV5.md 3.8):
 * train_batchN.jpg mosaics, labels.jpg statistics, results.png from results.csv, PR/F1/P/R curves
 * and the confusion matrix.  Like all drawing here they are byte-identical from run to run. */
#ifndef YC_PLOTS_H
#define YC_PLOTS_H

#include <stdbool.h>

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
 * gets plot_results_with_masks' 2 x 8 panels instead (train box/seg/obj/cls loss, box and mask
 * precision and recall; val box/seg/obj/cls loss, box and mask mAP@0.5 and mAP@0.5:0.95), drawn
 * as the others, YC_RESULTS_PLOT_SEG_W wide. */
#define YC_RESULTS_PLOT_W 2000
#define YC_RESULTS_PLOT_SEG_W 3200
#define YC_RESULTS_PLOT_H 1000
int yc_plot_results(const char *csv_path, const char *out_path);

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
