/* `--cache ram|disk`: the images of a dataset kept as load_image returns them (decoded, EXIF
 * orientation applied, long side resized to the training size), so that later epochs skip the
 * decode.  As YOLOv5's LoadImagesAndLabels.cache_images, with these differences:
 *   - ram holds exactly what load_image returns (YOLOv5 too); its size is known before training
 *     (the resized sizes follow from the label scan's image sizes) and is counted by the memory
 *     plan, which refuses the run when it does not fit (YOLOv5 samples 30 images and guesses);
 *   - disk writes the resized image, not the full-resolution one (YOLOv5's .npy), once per image
 *     and training size, into one directory per split beside the dataset: `<labels dir>.yolocl-
 *     images/` (the scan cache's name with -images), or, when that cannot be written, under
 *     $XDG_CACHE_HOME/yolocl/images/ (else $HOME/.cache/yolocl/images/), one directory per
 *     dataset.  A file holds a header (the image's fingerprint, sizes, training size, resampling)
 *     and the pixels with a checksum; it is written under a temporary name and renamed, and one
 *     that does not check out is decoded and written again.
 * Both are filled as the images are first read (the first epoch) and are invalidated per image
 * when the image changes: each read compares the file's size, modification time and inode with
 * those it was cached with, and decodes the image again when they differ.
 *
 * Thread safety: get and put may run concurrently from the loader's threads. */
#ifndef YC_IMGCACHE_H
#define YC_IMGCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "image.h"

typedef enum yc_cache_kind {
    YC_CACHE_NONE,
    YC_CACHE_RAM,
    YC_CACHE_DISK,
} yc_cache_kind;

/* "ram" or "disk" (NULL or "": ram, as a bare --cache in YOLOv5).  Returns false for anything
 * else. */
bool yc_cache_kind_parse(const char *s, yc_cache_kind *out);
/* "ram", "disk" or "none". */
const char *yc_cache_kind_name(yc_cache_kind k);

/* Bytes --cache ram holds for the images of ds at imgsz (the sum of their load_image sizes). */
size_t yc_img_cache_ram_bytes(const yc_dataset *ds, int imgsz);

typedef struct yc_img_cache yc_img_cache;

/* A cache of the images of ds (not owned, must outlive the cache) as load_image returns them at
 * imgsz with `augment` (its resampling).  kind RAM allocates all of yc_img_cache_ram_bytes now;
 * kind DISK creates the directory (dir_override when not NULL, else as above).  YC_ENOMEM, YC_EIO
 * when no directory can be made, naming the ones tried. */
int yc_img_cache_new(yc_img_cache **out, yc_cache_kind kind, const yc_dataset *ds, int imgsz,
                     bool augment, const char *dir_override);
void yc_img_cache_free(yc_img_cache *c);

/* The directory of a disk cache (NULL for ram). */
const char *yc_img_cache_dir(const yc_img_cache *c);

/* The file's fingerprint now (size, modification time, inode, device), 0 when it cannot be
 * stat'ed.  The caller takes it before decoding and gives it to yc_img_cache_put, so that an
 * image changed while it was decoded is never cached under its new fingerprint. */
uint64_t yc_img_cache_fingerprint(const char *path);

/* Sample i's cached image into out and its load_image sizes into *info, when the cache holds one
 * with fingerprint fp (*hit).  YC_ENOMEM; a disk entry that cannot be read or does not check out
 * is a miss. */
int yc_img_cache_get(yc_img_cache *c, size_t i, uint64_t fp, yc_image *out, yc_load_info *info,
                     bool *hit);

/* Keeps `img` (load_image's result for sample i, sizes *info) under fingerprint fp.  An image
 * whose sizes differ from those the scan gave (it changed since) is not kept.  A disk write that
 * fails is reported once (yc_warn) and the cache stops writing; never an error. */
void yc_img_cache_put(yc_img_cache *c, size_t i, uint64_t fp, const yc_image *img,
                      const yc_load_info *info);

/* Reads served from the cache, images decoded and kept, disk files written. */
typedef struct yc_img_cache_stats {
    size_t hits, stores, writes;
} yc_img_cache_stats;
yc_img_cache_stats yc_img_cache_get_stats(const yc_img_cache *c);

#endif
