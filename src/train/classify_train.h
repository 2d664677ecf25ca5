/* Training a classifier as YOLOv5's classify/train.py does: an ImageFolder dataset
 * (imagefolder.h) with the training transforms of classify_aug.h, cross-entropy with label
 * smoothing, the optimizer of smart_optimizer (Adam by default, lr0 0.001, decay 5e-5 on the
 * weights, betas (0.9, 0.999)), the linear LR schedule to lrf = 0.01 stepped per epoch, gradient
 * clipping at norm 10, the EMA, and after every epoch the EMA's top-1 and top-5 accuracy and loss
 * on ROOT/val (classify/val.py), results.csv (GenericLogger's columns) and weights/last and best
 * (the EMA's weights as safetensors). */
#ifndef YC_CLASSIFY_TRAIN_H
#define YC_CLASSIFY_TRAIN_H

#include <stdbool.h>

#include "train.h"

/* classify/train.py's defaults where they differ from train.py's */
#define YC_CLS_IMGSZ 224
#define YC_CLS_LR0 0.001
#define YC_CLS_DECAY 5e-5
#define YC_CLS_LABEL_SMOOTHING 0.1f

/* The classification demo's (no --data) image size: its crops are 64 pixels */
#define YC_CLS_DEMO_IMGSZ 64

/* Trains o->cfg (a classifier config, or a detection config cut at YOLOv5's cutoff 10) on the
 * ImageFolder dataset at o->data (NULL or empty: the built-in classification demo, demo.h's
 * yc_demo_ensure_task) for o->epochs epochs of o->batch images of o->imgsz pixels;
 * o->optimizer, o->label_smoothing, o->seed, o->device, o->project, o->name, o->exist_ok and
 * o->nosave are honoured, and o->mem, o->half and o->recompute through the memory fit (memplan.h:
 * FP16 storage and recomputation; a batch that would need micro-batches is refused, naming the
 * batch that fits).  weights/last.safetensors is a checkpoint (checkpoint.h) after every epoch
 * and the EMA's weights alone at the end; weights/best.safetensors the EMA's weights.
 * Like classify/train.py's run directory it also holds opt.yaml (its key names, written when a
 * new run starts), train_images.jpg (the first training batch, plots.h's yc_plot_cls_images)
 * and at the end test_images.jpg (validation images with the EMA's top class); o->noplots skips
 * the two images.
 * The first SIGINT or SIGTERM ends the run after the current batch with a resumable
 * last.safetensors (the model, the EMA, the optimizer, the epoch and batch to continue from, the
 * epoch's running loss, the best top-1, the options incl. cutoff and dropout); *interrupted says
 * so.  o->resume (non-NULL: "" for the newest run of o->project, a run directory or a checkpoint)
 * continues such a run with its saved options (device, workers, threads, mem, half and recompute
 * as given now) to the uninterrupted run's weights and results.csv: each epoch's order is drawn
 * from (seed, epoch) and each image's augmentation from (seed, epoch, place in that order).
 * Under N MPI ranks (dist.h) it is classify/train.py's DDP: o->batch is the global batch (a
 * multiple of N), each rank trains on DistributedSampler's shard of every epoch with its logit
 * gradients scaled by 1/N and summed over the ranks, rank 0 alone validates, logs and saves, a
 * stop request on any rank stops all after the same batch, and a run resumes only on N ranks. */
int yc_classify_train(const yc_train_opts *o, bool *interrupted);

#endif
