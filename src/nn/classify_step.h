/* One training step of a classifier (a model whose last layer is Classify): input upload,
 * forward, classify/train.py's loss (cross-entropy with label smoothing, xent.h) on the host
 * over the logits it reads back (batch x nc floats), their gradient written back, backward.
 * Parameter gradients are added to the model's gradient arena, as yc_step does. */
#ifndef YC_CLASSIFY_STEP_H
#define YC_CLASSIFY_STEP_H

#include "graph.h"
#include "model.h"

typedef struct yc_classify_step {
    /* the model (not owned) and the training graph for this batch shape (owned) */
    yc_model *m;
    yc_graph *g;
    /* batch, image size, classes */
    int batch, img, nc;
    /* label smoothing of the loss (classify/train.py: 0.1) */
    double label_smoothing;
    /* the factor of the logits' gradient before backward (1 after yc_classify_step_new): 1/N
     * on each of N data-parallel ranks, whose summed gradients are then DDP's average */
    float grad_scale;
    /* the last step's logits (batch x nc) and their gradient (owned) */
    float *logits, *grad;
} yc_classify_step;

/* Builds and allocates the training graph of a classifier for batch x img x img (go: storage
 * options, NULL for FP32 with nothing recomputed; go->mode is forced to training) in an arena of
 * its own. */
int yc_classify_step_new(yc_classify_step **out, yc_model *m, int batch, int img,
                         double label_smoothing, const yc_graph_options *go);
void yc_classify_step_free(yc_classify_step *s);

/* Runs a step on `images` (batch x 3 x img x img floats, normalised as the model expects) with
 * class `labels`; *loss receives the batch's mean loss (its gradient is scaled by grad_scale).
 * Waits for the device. */
int yc_classify_step_run(yc_classify_step *s, const float *images, const int *labels,
                         double *loss);

#endif
