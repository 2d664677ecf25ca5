/* The built-in demo dataset: synthetic coloured shapes with exact labels, in YOLOv5's layout.
 *
 * `yolocl train` with no arguments trains on it and `yolocl demo-data DIR` writes it.  The
 * dataset is generated, not downloaded, so a fresh machine without network access can train.
 *
 * Design (chosen so that yolov5n reaches mAP@0.5 > 0.5 in a few epochs at --img 320 on a CPU):
 *   - four classes, one per shape: circle, square, triangle, star (5 points).  Each class also
 *     has its own hue band (red, green, blue, yellow, +-15 degrees, saturation and value
 *     0.7-1.0), so colour and shape agree: the model picks up colour in the first epoch and
 *     shape refines it.  Squares, triangles and stars are rotated at random.
 *   - objects are 8%-40% of the shorter image side, 1-6 per image; two boxes may share at most
 *     25% of the smaller one's area (mild occlusion, later objects on top), otherwise the new
 *     object is placed again (40 tries, then dropped).
 *   - backgrounds are textured but desaturated (saturation <= 0.25): a two-colour gradient,
 *     sinusoidal stripes, smooth blotches and thin clutter lines, with per-pixel noise over the
 *     whole image (objects included).
 *   - image sides are multiples of 32 in [256, 480], width and height drawn independently, so
 *     letterboxing and rectangular batches are exercised.
 *   - labels are the exact extents of the drawn geometry (circle centre +- radius, polygon vertex
 *     min/max) in YOLO format with 6 decimals; every object lies wholly inside its image.
 *
 * Layout: DIR/images/{train,val}/shapes_NNNNN.jpg (JPEG quality 90), DIR/labels/{train,val}/
 * shapes_NNNNN.txt, DIR/demo.yaml (path: ., train/val directories, names).  Every file is written
 * under a temporary name and renamed; the marker file DIR/.yolocl_demo_complete, holding the
 * options, is written last, so a half-written directory is detected and rewritten.  Generation is
 * deterministic: the same options give byte-identical files, whatever the thread count (images
 * are rendered in parallel with OpenMP, each from its own random stream).  The default 400
 * images (about 16 MB) take about 2 s on two cores. */
#ifndef YC_DEMO_H
#define YC_DEMO_H

#include <stdbool.h>
#include <stdint.h>

/* Number of classes and their names (index = class id). */
#define YC_DEMO_NC 4
extern const char *const yc_demo_names[YC_DEMO_NC];

/* Most objects one image may hold. */
#define YC_DEMO_MAX_OBJECTS 16

/* Name of the dataset yaml inside the dataset directory. */
#define YC_DEMO_YAML "demo.yaml"

/* Name of the completion marker inside the dataset directory. */
#define YC_DEMO_MARKER ".yolocl_demo_complete"

/* What to generate; yc_demo_options_default() gives the built-in dataset. */
typedef struct yc_demo_options {
    /* master seed: every image is generated from (seed, split, index) */
    uint64_t seed;
    /* number of training and validation images (default 320 and 80) */
    int n_train, n_val;
    /* image sides are multiples of 32 in [min_side, max_side] pixels (default 256 and 480) */
    int min_side, max_side;
    /* objects per image, uniform in [1, max_objects] (default 6, at most YC_DEMO_MAX_OBJECTS) */
    int max_objects;
    /* JPEG quality 1-100 (default 90) */
    int quality;
} yc_demo_options;

void yc_demo_options_default(yc_demo_options *opt);

/* One object of a rendered sample: class and exact box in pixels (x0 <= x < x1). */
typedef struct yc_demo_object {
    /* class id (index into yc_demo_names) */
    int cls;
    /* box corners in pixel coordinates, pixel i covering [i, i + 1) */
    double x0, y0, x1, y1;
} yc_demo_object;

/* A rendered image and its objects, before JPEG encoding. */
typedef struct yc_demo_sample {
    /* size in pixels */
    int w, h;
    /* RGB HWC pixels (3 * w * h bytes, heap) */
    uint8_t *rgb;
    /* number of objects and the objects, in drawing order (later ones on top) */
    int n;
    yc_demo_object obj[YC_DEMO_MAX_OBJECTS];
} yc_demo_sample;

/* Renders image `index` of a split (0 = train, 1 = val) as the writer does.  opt NULL means the
 * defaults. */
int yc_demo_render(const yc_demo_options *opt, int split, int index, yc_demo_sample *out);
void yc_demo_sample_free(yc_demo_sample *s);

/* Writes the dataset into `dir` (created if needed; opt NULL means the defaults), replacing an
 * earlier demo dataset there (only its own files: shapes_* images and labels, the label caches
 * labels/train.cache and labels/val.cache, demo.yaml and the marker).  Holds a lock on
 * DIR/.yolocl_demo.lock so concurrent writers take turns. */
int yc_demo_write(const char *dir, const yc_demo_options *opt);

/* True when `dir` holds a complete dataset written with exactly these options (NULL: defaults). */
bool yc_demo_is_complete(const char *dir, const yc_demo_options *opt);

/* The cache directory for the built-in dataset: $XDG_CACHE_HOME/yolocl/demo when XDG_CACHE_HOME
 * is an absolute path, else $HOME/.cache/yolocl/demo (heap string; NULL with an error when
 * neither variable is usable). */
char *yc_demo_default_dir(void);

/* Makes sure `dir` (NULL: yc_demo_default_dir()) holds the complete default dataset: reuses it
 * when complete, writes it otherwise.  The yaml is then DIR/demo.yaml. */
int yc_demo_ensure(const char *dir);
/* The same with explicit options (NULL: defaults). */
int yc_demo_ensure_opts(const char *dir, const yc_demo_options *opt);

#endif
