/* A classifier on images: classify/val.py's accuracy over an ImageFolder split, and
 * classify/predict.py's top-5 classes of single images.  Both read images with CenterCrop
 * (classify_aug.h) and run the model's evaluation graph. */
#ifndef YC_CLASSIFY_EVAL_H
#define YC_CLASSIFY_EVAL_H

#include <stddef.h>
#include <stdio.h>

#include "imagefolder.h"
#include "model.h"

typedef struct yc_cls_metrics {
    /* images, and the share whose label is the top class or among the top five */
    size_t n;
    double top1, top5;
    /* the mean over batches of the batch's mean loss (classify/val.py) */
    double loss;
    /* per class: images, top-1 and top-5 hits (nc entries each, malloc'd; NULL when not asked) */
    size_t *class_n, *class_top1, *class_top5;
} yc_cls_metrics;

/* Runs classifier m (allocated) over every image of ds in batches of `batch` at imgsz, with the
 * loss's label smoothing; per_class fills the per-class counts.  An image that cannot be read
 * fails the run, naming it. */
int yc_classify_evaluate(yc_model *m, const yc_imagefolder *ds, int imgsz, int batch,
                         double label_smoothing, bool per_class, yc_cls_metrics *out);
void yc_cls_metrics_free(yc_cls_metrics *r);

/* The top class of each of n images (n x 3 x imgsz x imgsz normalised floats, as yc_cls_read
 * gives them) under classifier m (allocated), run in one evaluation batch: torch.max(model(x),
 * 1)[1], the first index of the largest logit. */
int yc_classify_top1(yc_model *m, const float *images, int n, int imgsz, int *pred);

/* classify/val.py's table on `out`: "Class Images top1_acc top5_acc", all, then each class. */
void yc_cls_metrics_print(const yc_cls_metrics *r, const yc_imagefolder *ds, FILE *out);

/* classify/predict.py for the n images at paths: one line each on `out`, "image i/n PATH: HxW "
 * then the top five "name probability" and the inference time.  names (nc entries) may be NULL
 * (class indices are printed).  An image that cannot be read is reported and skipped; returns
 * the number of images predicted through *done. */
int yc_classify_predict(yc_model *m, char *const *paths, size_t n, int imgsz,
                        const char *const *names, FILE *out, size_t *done);

#endif
