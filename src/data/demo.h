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
 * Three tasks (yc_demo_task) share the renderer:
 *   - detection (the above; the dataset `yolocl train` uses without --data);
 *   - segmentation: the same scenes with YOLOv5's segment labels (class x1 y1 x2 y2 ...,
 *     normalised, 6 decimals) giving each shape's outline exactly: the vertices of squares (4),
 *     triangles (3) and stars (10), and for circles a regular polygon of YC_DEMO_CIRCLE_VERTICES
 *     vertices, which is what is drawn in this task (a 64-gon: within 0.12 px of the circle at the
 *     largest radius), so the label is the drawn outline, not an approximation of it.  Shapes do
 *     not overlap here (their circumcircles are at least 2 px apart): the visible region of every
 *     object is its whole polygon, whatever order a loader draws the masks in.
 *   - classification: an ImageFolder dataset of crops: every object of every rendered scene
 *     (shapes placed without overlap, as for segmentation, circles drawn as circles, and each
 *     shape's hue drawn from the whole circle, not its class's band, so that only the shape tells
 *     the class), cut out as a
 *     square of 1.3 times the larger side of its box centred on it (moved inside the image,
 *     shrunk to the image's shorter side when larger), resized to crop x crop pixels (cv2's
 *     INTER_AREA) and written as PNG.
 *
 * Layout: DIR/images/{train,val}/shapes_NNNNN.jpg (JPEG quality 90), DIR/labels/{train,val}/
 * shapes_NNNNN.txt, DIR/demo.yaml (path: ., train/val directories, names).  Every file is written
 * under a temporary name and renamed; the marker file DIR/.yolocl_demo_complete, holding the
 * options, is written last, so a half-written directory is detected and rewritten.  Generation is
 * deterministic: the same options give byte-identical files, whatever the thread count (images
 * are rendered in parallel with OpenMP, each from its own random stream).  The default 400
 * images (about 16 MB) take about 2 s on two cores.  The segmentation task has the same layout (its
 * labels polygons); the classification task writes DIR/{train,val}/CLASS/shapes_NNNNN_K.png (K the
 * object's index in scene NNNNN), no yaml (the directory is the --data root), and the marker. */
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

/* Vertices of a circle's outline in the segmentation task; most vertices of one outline. */
#define YC_DEMO_CIRCLE_VERTICES 64
#define YC_DEMO_MAX_VERTICES 64

/* What the dataset is for (see the head of this file). */
typedef enum yc_demo_task {
    YC_DEMO_DETECT,
    YC_DEMO_SEGMENT,
    YC_DEMO_CLASSIFY,
} yc_demo_task;

/* The task's name: "detect", "segment", "classify". */
const char *yc_demo_task_name(yc_demo_task task);
/* The task named `name` (as yc_demo_task_name spells it) into *task; YC_EUSAGE otherwise. */
int yc_demo_task_parse(const char *name, yc_demo_task *task);

/* What to generate; yc_demo_options_default() gives the built-in dataset. */
typedef struct yc_demo_options {
    /* what the dataset is for (default YC_DEMO_DETECT) */
    yc_demo_task task;
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
    /* classification: side of the square crops in pixels, 16-1024 (default 64) */
    int crop;
} yc_demo_options;

void yc_demo_options_default(yc_demo_options *opt);

/* One object of a rendered sample: class and exact box in pixels (x0 <= x < x1). */
typedef struct yc_demo_object {
    /* class id (index into yc_demo_names) */
    int cls;
    /* box corners in pixel coordinates, pixel i covering [i, i + 1) */
    double x0, y0, x1, y1;
    /* the drawn outline in pixel coordinates, nv vertices in order; nv is 0 for a circle drawn as
     * a circle (detection and classification), YC_DEMO_CIRCLE_VERTICES for one drawn as that
     * polygon (segmentation) */
    int nv;
    double px[YC_DEMO_MAX_VERTICES], py[YC_DEMO_MAX_VERTICES];
} yc_demo_object;

/* A rendered image and its objects, before JPEG encoding. */
typedef struct yc_demo_sample {
    /* size in pixels */
    int w, h;
    /* RGB HWC pixels (3 * w * h bytes, heap) */
    uint8_t *rgb;
    /* which object each pixel shows (w * h bytes, heap): k + 1 where object k, the topmost one
     * there, covers at least half of the pixel (its anti-aliased coverage), 0 elsewhere */
    uint8_t *ids;
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
/* The same for a task: .../demo (detect), .../demo-seg (segment), .../demo-cls (classify). */
char *yc_demo_task_dir(yc_demo_task task);

/* Makes sure `dir` (NULL: yc_demo_default_dir()) holds the complete default dataset: reuses it
 * when complete, writes it otherwise.  The yaml is then DIR/demo.yaml. */
int yc_demo_ensure(const char *dir);
/* The same with explicit options (NULL: defaults). */
int yc_demo_ensure_opts(const char *dir, const yc_demo_options *opt);

/* Makes sure the default dataset of `task` is complete in yc_demo_task_dir(task), writing it when
 * not, and gives what --data should name in *data (heap string): DIR/demo.yaml for detection and
 * segmentation, DIR itself (the ImageFolder root) for classification.  This is what `yolocl train`
 * without --data uses. */
int yc_demo_ensure_task(yc_demo_task task, char **data);

#endif
