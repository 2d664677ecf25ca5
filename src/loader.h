/* The batch loader: a pool of threads that build training or validation batches (decode,
 * augment, collate) into a ring of slots while the device computes.
 *
 * Reproducible: the epoch's order is a shuffle seeded by (seed, epoch) and every sample's
 * augmentation draws from a generator seeded by (seed, epoch, position in the epoch), so a run
 * and its resumed continuation see the same data whatever the thread count.  Memory is bounded:
 * workers + 1 batches of uint8 pixels (one per thread being built, one held by the consumer) plus
 * per-thread scratch, all sized at creation and reused from epoch to epoch. */
#ifndef YC_LOADER_H
#define YC_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "augment.h"
#include "dataset.h"
#include "hyp.h"

typedef struct yc_batch {
    /* batch number within the epoch */
    int index;
    /* images in the batch (images that failed to load are left out, with a warning) */
    int n;
    /* image size of every image in the batch */
    int h, w;
    /* n x 3 x h x w CHW RGB pixels */
    uint8_t *images;
    /* nt rows of (image in batch, class, x, y, w, h), xywh normalised */
    float *targets;
    int nt;
    /* per image: the dataset index and (validation) how to map predictions back */
    int *sample;
    yc_val_info *info;
} yc_batch;

typedef struct yc_loader_options {
    /* the images (not owned; must outlive the loader) */
    const yc_dataset *ds;
    /* training samples (augmented, mosaic...) or validation samples (letterbox only) */
    bool train;
    /* hyperparameters for augmentation (training) */
    const yc_hyp *hyp;
    /* image size (training: square imgsz; validation: the long side) */
    int imgsz;
    /* images per batch */
    int batch;
    /* rectangular batches (validation always; training with --rect), with this padding */
    bool rect;
    double pad;
    /* the model's largest stride (rect shapes are multiples of it) */
    int stride;
    /* loader threads (>= 1) */
    int workers;
    /* base seed */
    uint64_t seed;
} yc_loader_options;

typedef struct yc_loader yc_loader;

/* Starts the threads (idle until an epoch starts). */
int yc_loader_new(yc_loader **out, const yc_loader_options *opt);
/* Stops the threads and frees everything. */
void yc_loader_free(yc_loader *l);

/* Batches per epoch. */
int yc_loader_nbatches(const yc_loader *l);

/* Begins epoch `epoch` at batch `first` (0 normally; later when resuming inside an epoch): the
 * order is a seeded shuffle (training without rect), the rect order, or the dataset order;
 * `indices` (n entries, may be NULL) replaces the image list, as YOLOv5's image weights do.  Any
 * epoch in progress is abandoned first. */
int yc_loader_start(yc_loader *l, int epoch, const int *indices, int first);

/* The next batch of the epoch in order, or NULL after the last one.  The batch stays valid until
 * the next call (its slot is then reused). */
int yc_loader_next(yc_loader *l, const yc_batch **out);

#endif
