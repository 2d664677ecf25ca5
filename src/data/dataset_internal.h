/* The private side of dataset.h, shared by the files that load a dataset:
 *
 *   data_yaml.c    the data yaml (splits, class names, tile keys)
 *   image_list.c   image lists from directories and .txt lists, label paths
 *   labels.c       the label parser and the verification of one image and its labels
 *   label_cache.c  the scan cache file and the fingerprints that validate it
 *   dataset.c      loading a dataset (scan, cache, pooled samples) and rectangular batch shapes
 *
 * Nothing outside those files includes it. */
#ifndef YC_DATASET_INTERNAL_H
#define YC_DATASET_INTERNAL_H

#include "dataset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest text kept for one note (reason or warnings of one image). */
#define NOTE_MAX 512
/* Seed of the FNV-1a hashes (fingerprints, the cache checksum). */
#define FNV_OFFSET 0xcbf29ce484222325ULL

typedef enum rec_status {
    REC_LABELS = 0,  /* label file with boxes */
    REC_MISSING = 1, /* no label file: background */
    REC_EMPTY = 2,   /* empty label file: background */
    REC_CORRUPT = 3, /* excluded */
} rec_status;

/* What the scan (or the cache) knows about one listed image. */
typedef struct scan_rec {
    /* hash of the image's and the label file's size and times (0 bytes mixed in when absent) */
    uint64_t fp;
    /* a rec_status */
    int status;
    /* EXIF-corrected size (0 when corrupt) */
    int32_t w, h;
    /* number of boxes and the boxes (heap, class ids as in the file) */
    uint32_t nb;
    yc_box *boxes;
    /* segment label files: points per box (nb entries, heap) and the points, npts (x, y) pairs
     * normalised, box by box (heap); both NULL for a box file */
    uint32_t *counts;
    float *pts;
    size_t npts;
    /* why the image is corrupt (heap), NULL otherwise */
    char *reason;
    /* warnings, '\n'-separated (heap), NULL when none */
    char *warn;
    /* filled from the cache rather than verified */
    bool cached;
} scan_rec;

/* image_list.c: whether p exists; an absolute form of p (heap: p itself when absolute, else
 * joined to the current directory); the label path of `image` into out (capacity cap), returning
 * the length it needs (without NUL) */
bool yc_ds_path_exists(const char *p);
char *yc_ds_absolute_path(const char *p);
size_t yc_ds_label_path_into(const char *image, char *out, size_t cap);

/* labels.c: frees a record's heap parts, keeping its fingerprint; verifies one image and its
 * labels into *r (*oom set when out of memory) */
void yc_ds_rec_clear(scan_rec *r);
void yc_ds_verify_one(const char *image, const char *label, scan_rec *r, bool *oom);

/* label_cache.c: a hash of the size, times and inode of `path` mixed into h (0 bytes mixed in
 * when absent); the scan cache, read into recs[] (the number of records in the file, 0 when none
 * was used, -1 when out of memory) and written */
uint64_t yc_ds_stat_fingerprint(uint64_t h, const char *path);
long long yc_ds_cache_load(const char *cache_path, const yc_path_list *imgs, scan_rec *recs,
                           const char *prefix);
void yc_ds_cache_save(const char *cache_path, const yc_path_list *imgs, const scan_rec *recs,
                      const char *prefix);

#endif
