/* YOLOv5's loss on a backend that computes it (yc_backend_i.yolo_loss): the assignments are made
 * on the host (src/nn/loss.c's build_targets, which is small work), the device computes the loss
 * over every cell, its gradient (training) and the sums, and only the sums come back, without a
 * host wait of their own.  The training step (step.c) and validation (val.c) use it. */
#ifndef YC_LOSS_DEVICE_H
#define YC_LOSS_DEVICE_H

#include "backend.h"
#include "loss.h"

typedef struct yc_device_loss {
    /* per level l, sums[6 l ..]: the box, objectness and class sums as float-float (hi, lo)
     * pairs, valid after the backend's next synchronize */
    float sums[YC_MAX_LEVELS * 6];
    /* what turns the sums into YOLOv5's loss: the images the batch factor is (a micro-batch's
     * whole batch), and per level the assignments and the cells the means are over */
    double mean_batch, mean_entries[YC_MAX_LEVELS], mean_cells[YC_MAX_LEVELS];
} yc_device_loss;

/* Submits the loss of `batch` images on the heads (nl tensors, (batch, na*no, ny, nx)) against
 * targets (nt rows of image, class, x, y, w, h).  grads: the heads' gradient tensors, written
 * whole (training), or NULL (validation: the loss only).  part: the whole batch this one is a
 * micro-batch of, or NULL.  The sums land in d after the backend's next synchronize. */
int yc_device_loss_submit(yc_device_loss *d, yc_loss_ctx *loss, yc_backend *be, int batch,
                          const yc_tensor *const *heads, const yc_tensor *const *grads,
                          const float *targets, int nt, const yc_loss_part *part);

/* The loss from the sums, as src/nn/loss.c computes it from its own (means, gains, batch factor);
 * call it after the synchronize. */
void yc_device_loss_result(const yc_device_loss *d, const yc_loss_params *lp,
                           yc_loss_result *result);

#endif
