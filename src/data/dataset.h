/* Datasets in YOLOv5's layout: the dataset yaml, image lists, label paths, the label scan with its
 * cache, the in-memory dataset (images, sizes and boxes in pools) and rectangular batch shapes.
 *
 * Behaviour follows Ultralytics YOLOv5 v7.0 (utils/general.py check_dataset, utils/dataloaders.py
 * LoadImagesAndLabels and verify_image_label) with these deliberate differences:
 *   - a relative `path:` is resolved against the yaml file's directory (YOLOv5: its repo root);
 *   - a class id >= nc marks that image corrupt (reported, skipped) where YOLOv5 aborts;
 *   - a JPEG without its end marker is reported and decoded as far as possible, never rewritten;
 *   - EXIF orientations 5 to 8 all swap width and height (YOLOv5's exif_size swaps only 6 and 8,
 *     although OpenCV decodes 5 and 7 transposed too);
 *   - in a dataset with polygon labels, an image whose label file has boxes only gets each box
 *     as a 4-point polygon (its corners), where YOLOv5 gives it no segments (its segment loader
 *     then fails on it with overlapping masks, the default);
 *   - the cache is our own file, `<labels dir>.yolocl.cache`, checked per image (sizes and times
 *     of the image and its label file), so a changed file is re-verified alone;
 *   - "N images" in the scan summary counts the usable images (backgrounds included, corrupt
 *     ones excluded); YOLOv5 counts the label files it found.
 *
 * libvips is set up on first use through yc_vips_init() (image.h).  Image headers are read with the
 * loader that matches the file's signature, built directly (sequential access, header only: no
 * pixel is decoded), so the scan neither fills nor trusts libvips' operation cache.  Library
 * functions return yc_status codes with a message (log.h) and never exit.
 *
 * One header for the files that implement it, named at each section: data_yaml.c, image_list.c,
 * labels.c (the label parser and the verification of one image), label_cache.c (the scan cache)
 * and dataset.c (loading a dataset, rectangular batches); dataset_internal.h is what they share. */
#ifndef YC_DATASET_H
#define YC_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------------
 * Dataset yaml (data_yaml.c)
 * ---------------------------------------------------------------------------------------------- */

typedef enum yc_split {
    YC_SPLIT_TRAIN,
    YC_SPLIT_VAL,
    YC_SPLIT_TEST,
    YC_SPLIT_COUNT,
} yc_split;

/* A dataset yaml as check_dataset leaves it: paths resolved, nc = len(names). */
typedef struct yc_data_yaml {
    /* the yaml file's path as given (for messages) */
    char *file;
    /* the dataset root (`path:` resolved against the yaml's directory), absolute */
    char *root;
    /* per split: number of entries (0 for an absent or empty `test:`) */
    int n_entries[YC_SPLIT_COUNT];
    /* per split: the entries (directories, .txt lists or image files), absolute; train and val
     * entries exist (checked on load), test entries are checked when the split is loaded */
    char **entries[YC_SPLIT_COUNT];
    /* number of classes, len(names) */
    int nc;
    /* class names, nc entries, index = class id */
    char **names;
    /* `tile:` window side in pixels for tiled training and validation (tileset.h); 0 when absent
     * or null (whole images) */
    int tile;
    /* `tile_overlap:` in [0, 1) and `tile_min_area:` in [0, 1]; 0.2 and 0.1 when absent */
    double tile_overlap, tile_min_area;
} yc_data_yaml;

/* "train", "val" or "test". */
const char *yc_split_name(yc_split s);

/* Reads a dataset yaml.  Keys: path, train, val, test, names (a list, or a mapping of the integers
 * 0..N-1 to names), nc (warned about when it differs from len(names), then ignored), download
 * (ignored with a note), and yolocl's tile, tile_overlap, tile_min_area (tiled training: an
 * integer 32..16384 or null, and two numbers in [0, 1) and [0, 1]).  A relative train/val/test
 * entry that does not exist and starts with ../ is retried without it.  Errors name the file,
 * the key and what is wrong. */
int yc_data_yaml_load(const char *file, yc_data_yaml *out);
void yc_data_yaml_free(yc_data_yaml *y);

/* ------------------------------------------------------------------------------------------------
 * Image lists and label paths (image_list.c)
 * ---------------------------------------------------------------------------------------------- */

/* A sorted list of unique paths: pointers into one pool. */
typedef struct yc_path_list {
    /* number of paths */
    size_t n;
    /* the paths, in strcmp order (Python's sorted()) */
    char **paths;
    /* the pool the paths point into */
    char *pool;
} yc_path_list;

/* True when the path's suffix is an image format YOLOv5 trains on (case-insensitive): bmp dng
 * jpeg jpg mpo png tif tiff webp pfm. */
bool yc_is_image_path(const char *path);

/* The images named by `entries`: a directory is searched recursively (hidden files and
 * directories skipped, symbolic links followed, loops cut); a .txt file lists one path per line
 * (a line starting with ./ is relative to the list's directory, as in YOLOv5; another relative
 * line is taken relative to the list's directory too, or to the current directory, YOLOv5's
 * reading, when only that one exists); an image file is itself.  Only image suffixes are kept;
 * the result is sorted and duplicates removed.  An entry that does not exist is an error. */
int yc_image_list(const char *const *entries, size_t n_entries, yc_path_list *out);
void yc_path_list_free(yc_path_list *l);

/* The label file of an image (heap): the last "/images/" becomes "/labels/" and the extension
 * ".txt"; with no "/images/" the image's own path with ".txt".  NULL when out of memory. */
char *yc_label_path(const char *image);

/* ------------------------------------------------------------------------------------------------
 * The scanned dataset (labels.c: yc_labels_parse; dataset.c: the rest)
 * ---------------------------------------------------------------------------------------------- */

/* One object. */
typedef struct yc_box {
    /* class id, 0-based (0 for every box with single_cls) */
    int32_t cls;
    /* box centre x, normalised by the EXIF-corrected image width */
    float x;
    /* box centre y, normalised by the EXIF-corrected image height */
    float y;
    /* box width, normalised */
    float w;
    /* box height, normalised */
    float h;
} yc_box;

/* Reads the text of a YOLO label file (len bytes; NUL bytes are invalid values), as YOLOv5's
 * verify_image_label: when any row has more than 6 values the file is a segment file and every
 * row is a polygon "class x1 y1 x2 y2 ..." (normalised; an odd number of coordinates or none
 * makes the file invalid) reduced to its extent (segments2boxes); otherwise every row is a box
 * "class x y w h" normalised to [0, 1].  Blank lines skipped; exact duplicate rows (class and
 * box) dropped (the first kept, with its polygon) and counted in *n_removed.  Returns YC_OK with
 * *boxes (heap, NULL when *n is 0) and *n; YC_EFORMAT with the reason, naming the line, in why (as
 * the scan reports it: "negative label value -0.1 (line 2)"); YC_ENOMEM.  Nothing is kept on
 * failure.  The file's size bounds the memory (the scan reads files up to 16 MiB). */
int yc_labels_parse(const char *text, size_t len, yc_box **boxes, size_t *n, size_t *n_removed,
                    char *why, size_t why_len);
/* The same keeping the polygons of a segment file: *counts (points per box, *n entries) and
 * *points (*n_points x, y pairs, box by box), both heap; NULL and 0 for a box file or no rows.
 * counts, points and n_points may be NULL (polygons dropped, as yc_labels_parse). */
int yc_labels_parse_polygons(const char *text, size_t len, yc_box **boxes, size_t *n,
                             size_t *n_removed, uint32_t **counts, float **points,
                             size_t *n_points, char *why, size_t why_len);

/* The polygon of one box (segment labels): n points from point `first` of the dataset's point
 * pool. */
typedef struct yc_polygon {
    /* index of the first (x, y) pair in yc_dataset.points */
    size_t first;
    /* number of points (>= 1) */
    uint32_t n;
} yc_polygon;

/* One usable image. */
typedef struct yc_sample {
    /* image path (in the dataset's string pool) */
    const char *image;
    /* label path (in the pool); the file may not exist (a background) */
    const char *label;
    /* width after EXIF orientation, pixels (>= 10) */
    int32_t w;
    /* height after EXIF orientation, pixels (>= 10) */
    int32_t h;
    /* index of the image's first box in the dataset's box pool */
    size_t first_box;
    /* number of boxes (0 for a background) */
    uint32_t n_boxes;
} yc_sample;

typedef enum yc_note_kind {
    /* the image is kept (duplicate rows dropped, JPEG without end marker) */
    YC_NOTE_WARNING,
    /* the image is corrupt and excluded */
    YC_NOTE_CORRUPT,
} yc_note_kind;

/* One line of the scan report: "image: text". */
typedef struct yc_scan_note {
    /* warning or corrupt */
    yc_note_kind kind;
    /* the image path (in the pool) */
    const char *image;
    /* what is wrong (in the pool), e.g. "negative label value -0.1 (line 2)" */
    const char *text;
} yc_scan_note;

typedef struct yc_dataset_options {
    /* number of classes (len(names)), >= 1; a class id >= nc marks its image corrupt */
    int nc;
    /* map every class to 0 (--single-cls); then no class id is checked against nc, as in YOLOv5
     * (which zeroes the classes before its max-class check) */
    bool single_cls;
    /* neither read nor write the scan cache */
    bool no_cache;
    /* scanning threads; 0 = min(8, online CPUs), at least 2 */
    int threads;
    /* printed before "Scanning", e.g. "train: "; NULL for none */
    const char *prefix;
    /* do not print the summary and notes (they stay in the dataset) */
    bool quiet;
} yc_dataset_options;

/* The usable images of a split, their sizes and boxes.  Three pools: samples, boxes, strings. */
typedef struct yc_dataset {
    /* number of usable images (corrupt ones excluded) */
    size_t n;
    /* the usable images, sorted by path */
    yc_sample *samples;
    /* total number of boxes (instances) */
    size_t n_boxes;
    /* all boxes, image by image (yc_sample.first_box indexes it) */
    yc_box *boxes;
    /* polygon labels: true when any usable image has a segment label file; then polygons has
     * n_boxes entries, parallel to boxes (an image with a box label file has each box's 4
     * corners, clockwise from the top left), and points n_points (x, y) pairs, normalised as
     * in the label files.  false: NULL and 0 */
    bool has_polygons;
    yc_polygon *polygons;
    size_t n_points;
    float *points;
    /* number of classes the dataset was checked against */
    int nc;
    /* boxes per class (after single_cls), nc entries */
    size_t *class_counts;
    /* images listed before the scan excluded the corrupt ones */
    size_t n_listed;
    /* usable images without a label file */
    size_t n_missing;
    /* usable images with an empty label file */
    size_t n_empty;
    /* corrupt images (excluded) */
    size_t n_corrupt;
    /* report lines: warnings and corrupt reasons, in path order */
    size_t n_notes;
    yc_scan_note *notes;
    /* the pool of paths and note texts */
    char *strings;
    /* the cache file used or written (heap), NULL with no_cache */
    char *cache_path;
    /* images verified by this load; the others came from the cache (0: the scan was skipped) */
    size_t n_verified;
} yc_dataset;

/* Lists, scans and loads the images of `entries` (as yc_image_list).  Prints the summary
 * "<prefix>Scanning <labels dir>... N images, M backgrounds, K corrupt" and one line per note
 * unless opt->quiet.  Fails when no image is listed or none is usable. */
int yc_dataset_load(const char *const *entries, size_t n_entries, const yc_dataset_options *opt,
                    yc_dataset *ds);
/* The same for one split of a dataset yaml; opt->nc is replaced by the yaml's nc, and errors name
 * the yaml file and the key. */
int yc_dataset_load_split(const yc_data_yaml *y, yc_split split, const yc_dataset_options *opt,
                          yc_dataset *ds);
void yc_dataset_free(yc_dataset *ds);

/* Boxes of sample i (n_boxes of them). */
static inline const yc_box *yc_dataset_boxes(const yc_dataset *ds, size_t i)
{
    return ds->boxes + ds->samples[i].first_box;
}

/* Polygons of sample i (n_boxes of them; has_polygons datasets only). */
static inline const yc_polygon *yc_dataset_polygons(const yc_dataset *ds, size_t i)
{
    return ds->polygons + ds->samples[i].first_box;
}

/* Number of background images (missing or empty label file). */
static inline size_t yc_dataset_backgrounds(const yc_dataset *ds)
{
    return ds->n_missing + ds->n_empty;
}

/* Aspect ratio h/w of sample i (EXIF-corrected). */
static inline double yc_dataset_aspect(const yc_dataset *ds, size_t i)
{
    return (double)ds->samples[i].h / (double)ds->samples[i].w;
}

/* ------------------------------------------------------------------------------------------------
 * Rectangular batches (YOLOv5.md 5.5; dataset.c)
 * ---------------------------------------------------------------------------------------------- */

/* Images ordered by aspect ratio and the letterbox shape of each batch. */
typedef struct yc_rect_batches {
    /* number of images */
    size_t n;
    /* image indices by ascending aspect ratio h/w, in np.argsort's order (ties as numpy) */
    size_t *order;
    /* number of batches, ceil(n / batch) */
    size_t n_batches;
    /* per batch: height, width (2 entries per batch), multiples of stride */
    int32_t *hw;
} yc_rect_batches;

/* Batch b covers order[b*batch .. (b+1)*batch); its shape is ceil(s * imgsz / stride + pad) *
 * stride per side, s = [max ar, 1] when every ar < 1, [1, 1 / min ar] when every ar > 1, else
 * [1, 1].  640x480 images at imgsz 640, stride 32, pad 0.5 give 512x672 (h x w). */
int yc_rect_batches_make(const int32_t *w, const int32_t *h, size_t n, int batch, int imgsz,
                         int stride, double pad, yc_rect_batches *out);
/* The same over a dataset's samples. */
int yc_dataset_rect_batches(const yc_dataset *ds, int batch, int imgsz, int stride, double pad,
                            yc_rect_batches *out);
void yc_rect_batches_free(yc_rect_batches *rb);

#endif
