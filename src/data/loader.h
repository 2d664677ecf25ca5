/* The batch loader: a pool of threads that build training or validation batches (decode,
 * augment, collate) into a ring of slots while the device computes.
 *
 * Samples are the images of a dataset, or with a tile set (tileset.h) the tiles of its images: a
 * tile sample is its window read through the thread's yc_tile_reader (tile_reader.h), then treated
 * as load_image treats an image (long side resized to imgsz), its labels clipped to the window.
 * A thread building a batch of tiles first reads the batch's windows sorted by image and row (one
 * top-to-bottom pass per sequentially read image), keeps them for the batch (batch x tile^2 x 3
 * bytes), then builds the samples from them; in training the window of each tile is jittered
 * (yc_tileset_jitter, draws seeded by the epoch and the tile) and the three mosaic partners of a
 * sample are drawn from the batch's own tiles (YOLOv5 draws them from the whole dataset), so a
 * mosaic reads no window beyond the batch's.  An epoch is all tiles in a seeded shuffle, or
 * tiles_per_epoch of them: the first tiles_per_epoch of that shuffle, a different random subset
 * each epoch.
 *
 * Reproducible: the epoch's order is a shuffle seeded by (seed, epoch) and every sample's
 * augmentation draws from a generator seeded by (seed, epoch, position in the epoch), so a run
 * and its resumed continuation see the same data whatever the thread count.  Memory is bounded:
 * workers + 1 batches of uint8 pixels (one per thread being built, one held by the consumer) plus
 * per-thread scratch, all sized at creation and reused from epoch to epoch.  Segmentation batches
 * add their masks as floats: batch x (h / ratio) x (w / ratio) x 4 bytes per slot with overlap
 * (6.5 MB at batch 16, 640, ratio 4; 16 times that at ratio 1, segment/val.py's), one such mask
 * per target without (grown as needed and kept).
 *
 * Images that disappear or turn out corrupt after the label scan (a sample's own image, a mosaic
 * or mixup partner, or a tile's window) are skipped for the rest of the run with one warning
 * naming the file.  In training the sample is drawn again in its place (a replacement sample from
 * the epoch's samples, seeded by the epoch, the position and the attempt, so reproducible), so
 * batches stay full; YOLOv5 stops with an exception instead.  After 16 failed replacement draws
 * the batch is left one image short (a batch left empty stops the training).  Validation leaves the image out (its labels are not
 * counted) rather than count another image twice. */
#ifndef YC_LOADER_H
#define YC_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "augment.h"
#include "augment_seg.h"
#include "dataset.h"
#include "hyp.h"
#include "image_read.h"
#include "imgcache.h"
#include "tile_reader.h"
#include "tileset.h"

typedef struct yc_batch {
    /* batch number within the epoch */
    int index;
    /* images in the batch (training: the batch size but in the last batch, failed samples being
     * replaced; validation: images that failed to load are left out) */
    int n;
    /* image size of every image in the batch */
    int h, w;
    /* n x 3 x h x w CHW RGB pixels */
    uint8_t *images;
    /* nt rows of (image in batch, class, x, y, w, h), xywh normalised */
    float *targets;
    int nt;
    /* per image: the sample index (in the dataset, or in the tile set's view with tiles) and
     * (validation) how to map predictions back */
    int *sample;
    yc_val_info *info;
    /* segmentation datasets (polygon labels) with masks requested: mask_n masks of mask_h x
     * mask_w pixels (the image size / the mask ratio), as floats.  Overlap format (the default):
     * mask_n = n, one index map per image, pixel value k >= 1 marks the k-th target row of that
     * image in `targets` order (loss_seg.h's yc_seg_masks), 0 the background.  Without overlap
     * (--no-overlap): mask_n = nt, one 0/1 mask per target row.  NULL and zeros otherwise. */
    float *masks;
    int mask_n, mask_h, mask_w;
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
    /* optional: the tiles of ds (made from this dataset, not owned, must outlive the loader);
     * samples are then tiles, rect is ignored in training, and yc_loader_start takes no indices */
    const yc_tileset *tiles;
    /* training with tiles: tiles per epoch (0 or >= the number of tiles: all of them) */
    int tiles_per_epoch;
    /* with tiles: images at most this many pixels wide and high are decoded whole
     * (tile_reader.h); 0 = YC_SLICE_DECODE_MAX, negative = none (every image read lazily) */
    int tile_decode_max;
    /* whole images (no tiles): the read limits (image_read.h; zeros: the defaults).  An image
     * they refuse is skipped as a corrupt one, its warning naming --tile */
    yc_read_limits limits;
    /* whole images: --cache ram or disk (imgcache.h; ignored with tiles), and the disk cache's
     * directory (NULL: beside the dataset) */
    yc_cache_kind cache;
    const char *cache_dir;
    /* training across `world` processes (0 or 1: one): this loader reads shard `rank` of each
     * epoch, as PyTorch's DistributedSampler does: every rank draws the same shuffled order of
     * the epoch's samples (seeded by seed and epoch alone), pads it to a multiple of world by
     * repeating its first samples, and takes positions rank, rank + world, ...  Rank r > 0 draws
     * its augmentation from streams of its own (rank 0's are a single process's).  Not with
     * rect batches (their shapes follow the whole order): YC_EUSAGE. */
    int rank, world;
    /* training: YOLOv5's quad collate (quad.h): each batch of `batch` images becomes batch / 4
     * images of twice the size, the group's choice drawn per (seed, epoch, batch) */
    bool quad;
    /* segmentation (YOLOv5's LoadImagesAndLabelsAndMasks, augment_seg.h): batches carry masks
     * (yc_batch.masks).  The dataset must have polygon labels (YC_EFORMAT otherwise); not with
     * tiles, nor with quad in training (YC_EUSAGE).  false: detection batches, masks NULL */
    bool masks;
    /* with masks: the masks' downsample ratio (segment/train.py --mask-ratio; 0 = 4), at most 64,
     * dividing imgsz and stride; and one 0/1 mask per target instead of one index map per image
     * (segment/train.py --no-overlap) */
    int mask_ratio;
    bool no_overlap;
} yc_loader_options;

typedef struct yc_loader yc_loader;

/* Starts the threads (idle until an epoch starts). */
int yc_loader_new(yc_loader **out, const yc_loader_options *opt);
/* Stops the threads and frees everything. */
void yc_loader_free(yc_loader *l);

/* The image cache's counts (all zero without one).  Waits for the batches being built, as
 * yc_loader_tile_stats. */
yc_img_cache_stats yc_loader_cache_stats(yc_loader *l);

/* The directory of the loader's disk cache, or NULL. */
const char *yc_loader_cache_dir(const yc_loader *l);

/* The bytes one loader thread's whole-image read takes beyond its output for the costliest image
 * of ds at imgsz (yc_image_read_bytes), and that image's index (-1 for an empty dataset). */
size_t yc_loader_read_bytes(const yc_dataset *ds, int imgsz, const yc_read_limits *lim,
                            long *which);

/* Batches per epoch (of this rank's shard when sharded). */
int yc_loader_nbatches(const yc_loader *l);

/* With tiles: what the threads' readers did so far, summed (all zero without tiles).  Waits for
 * the batches being built to finish, so the counts are those of the batches built. */
yc_tile_reader_stats yc_loader_tile_stats(yc_loader *l);

/* Begins epoch `epoch` at batch `first` (0 normally; later when resuming inside an epoch): the
 * order is a seeded shuffle (training without rect), the rect order, or the dataset order;
 * `indices` (n entries, may be NULL) replaces the image list, as YOLOv5's image weights do (not
 * with tiles: YC_EUSAGE).  Any epoch in progress is abandoned first. */
int yc_loader_start(yc_loader *l, int epoch, const int *indices, int first);

/* The next batch of the epoch in order, or NULL after the last one.  The batch stays valid until
 * the next call (its slot is then reused). */
int yc_loader_next(yc_loader *l, const yc_batch **out);

#endif
