/* ModelEMA as YOLOv5 keeps it: an exponential moving average of every floating-point entry of
 * the state dict (parameters, BatchNorm running statistics, anchors), updated after each optimizer
 * step with decay 0.9999 * (1 - exp(-updates / 2000)).  Validation and the saved weights use it.
 * Reference: docs/YOLOV5.md section 3.3. */
#ifndef YC_EMA_H
#define YC_EMA_H

#include "model.h"

typedef struct yc_ema {
    /* the averaged model: same config and registry, its own storage on the same backend (owned) */
    yc_model *ema;
    /* optimizer steps averaged so far */
    long updates;
} yc_ema;

/* A copy of m (allocated on m's backend) with `updates` already done (0 for a new run). */
int yc_ema_new(yc_ema **out, yc_model *m, long updates);
void yc_ema_free(yc_ema *e);

/* The decay after `updates` updates. */
double yc_ema_decay(long updates);

/* One update: updates++, ema = d * ema + (1 - d) * model over parameters, running statistics
 * and anchors (num_batches_tracked is an integer and is not averaged). */
int yc_ema_update(yc_ema *e, const yc_model *m);

#endif
