/* Weights from any source yolocl reads, behind one interface: Ultralytics YOLOv5 .pt checkpoints
 * (ptfile.h) and safetensors files (yolocl checkpoints and exports, or plain state dicts such as
 * yolov5n.safetensors converted from the v7.0 release).
 *
 * yolocl safetensors metadata ("__metadata__", all values strings):
 *   format      "yolocl-1"
 *   model_yaml  the model config as YAML text
 *   model_name  the config's file name ("yolov5s.yaml")
 *   nc          classes, decimal
 *   names       class names, a JSON array of strings
 *   stride      the strides of the detection levels, a JSON array of numbers
 * Tensors use YOLOv5 state-dict names; tensors named "resume.*" (a training checkpoint's resume
 * state) are not weights and are skipped.  Every key is optional: a file without metadata is a
 * plain state dict (no embedded config, no names).
 *
 * Loading into a model follows YOLOv5: STRICT is load_state_dict(strict=True) for what yolocl
 * models hold (every parameter, BatchNorm running statistic and the anchors, with the same
 * shapes; num_batches_tracked is copied when present); TRANSFER is train.py's intersect_dicts
 * (copy where name and shape match, "Transferred N/M items"), optionally without the anchors. */
#ifndef YC_WEIGHTS_H
#define YC_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "modelcfg.h"
#include "yamltree.h"

#define YC_WEIGHTS_MAX_DIMS 8
#define YC_WEIGHTS_MAX_STRIDES 8

/* One tensor, in memory as float32. */
typedef struct yc_weights_tensor {
    /* state-dict name */
    char *name;
    /* dimensions (0 for a scalar) */
    int ndim;
    int64_t shape[YC_WEIGHTS_MAX_DIMS];
    /* product of the shape (1 for a scalar) */
    size_t numel;
    /* numel values, row-major */
    float *data;
    /* tensors stored with an integer type (num_batches_tracked): the exact values; else NULL */
    int64_t *idata;
} yc_weights_tensor;

typedef struct yc_weights {
    /* the file read (owned) */
    char *path;
    /* a torch .pt file (else safetensors) */
    bool from_pt;
    /* tensors in file order */
    int ntensors;
    yc_weights_tensor *tensors;
    /* the embedded model config as YAML text, or NULL */
    char *model_yaml;
    /* the same as a tree (set for .pt files, whose config is a pickled dict), or NULL */
    yc_yaml_node *model_tree;
    /* the config's file name ("yolov5n.yaml"), or NULL */
    char *model_name;
    /* classes, or -1 when the file does not say */
    int nc;
    /* class names, or none */
    int nnames;
    char **names;
    /* detection-level strides, or none */
    int nstride;
    float stride[YC_WEIGHTS_MAX_STRIDES];
    /* safetensors metadata as read (all keys, file order); none for .pt files */
    int nmeta;
    char **meta_keys, **meta_values;
    /* what the weights are, for messages ("ckpt['model'] (models.yolo.Model)", "safetensors") */
    char source[300];
    /* tensors sorted by name, for yc_weights_find */
    yc_weights_tensor **by_name;
} yc_weights;

/* Reads every tensor (as float32) and the metadata of a .pt or safetensors file (told apart by
 * their first bytes).  Duplicate names and a "format" of a newer yolocl are errors. */
int yc_weights_read(const char *path, yc_weights **out);
void yc_weights_free(yc_weights *w);

/* Tensor by name, or NULL. */
const yc_weights_tensor *yc_weights_find(const yc_weights *w, const char *name);

/* Classes from the Detect head: the bias of "<detect>.m.0.bias" has na*(nc + 5) values, na from
 * "<detect>.anchors" (nl, na, 2).  YC_EFORMAT when the file has no Detect head. */
int yc_weights_infer_nc(const yc_weights *w, int *nc);

/* The embedded model config, resolved (nc_override > 0 replaces its nc).  The config's text is
 * set, so checkpoints written from the model carry it.  Without one, a classifier's state dict
 * (classify/train.py's .pt files pickle a ClassificationModel without a yaml) gives its config by
 * its shapes: Classify's Linear "model.K.linear.weight" (nc, 1280) the classes and the cutoff
 * K + 1, model.0.conv.weight (c0, 3, 6, 6) the width c0 / 64, the Bottlenecks model.2.m.N of the
 * first C3 the depth N / 3 of YOLOv5's P5 backbone; cut at 10 at the multiples of yolov5n ... x
 * it is that bundled -cls config (its text set), otherwise yolov5n.yaml's rows at those multiples
 * cut by yc_model_cfg_to_classifier (no text; named "YOLOv5 classifier (width W, depth D, cutoff
 * C)").  Shapes that do not fit are YC_EFORMAT naming the tensor; a state dict that is not a
 * classifier's: YC_EUSAGE and "PATH has no embedded model config: give --cfg". */
int yc_weights_model_cfg(const yc_weights *w, int nc_override, yc_model_cfg **cfg);

typedef enum yc_weights_mode {
    /* everything the model holds must be present with its shape */
    YC_WEIGHTS_STRICT,
    /* intersect_dicts: copy matching names and shapes, skip the rest */
    YC_WEIGHTS_TRANSFER,
} yc_weights_mode;

/* What yc_weights_apply did, counted over the model's state dict (parameters, running
 * statistics, num_batches_tracked counters and the anchors: 349 entries for yolov5n). */
typedef struct yc_weights_report {
    /* entries copied (YOLOv5's "Transferred N/M items": N = transferred, M = total) */
    int transferred, total;
    /* entries the file lacks, has with another shape, or that were excluded as anchors */
    int missing, mismatched, excluded;
    /* tensors of the file that the model does not have ("resume.*" not counted) */
    int unexpected;
    /* the first missing or mismatched entry's name ("" if none), for messages */
    char first_skipped[YC_NAME_MAX];
} yc_weights_report;

/* Copies the weights into an allocated model through its backend (parameters, running
 * statistics, num_batches_tracked, anchors in grid units).  `exclude_anchors` skips names
 * containing "anchor" (train.py's exclude list with --cfg or hyp anchors; in STRICT mode the
 * model then keeps its own anchors).  Everything is checked before anything is written, so on
 * failure the model is unchanged; the error names the tensor.  `report` may be NULL. */
int yc_weights_apply(const yc_weights *w, yc_model *m, yc_weights_mode mode, bool exclude_anchors,
                     yc_weights_report *report);

/* Weights from an allocated model (read back through its backend): the state dict in YOLOv5's
 * order (the anchors before the Detect convolutions), the model's config text, nc and strides,
 * and the given class names (may be NULL / 0). */
int yc_weights_from_model(const yc_model *m, const char *const *names, int nnames,
                          yc_weights **out);

/* Writes the weights as a safetensors file (atomically) with the yolocl metadata above and any
 * other metadata keys read from a safetensors source.  Floating tensors are stored as F32, or F16
 * (round to nearest even) when `half`; integer tensors as I64. */
int yc_weights_write_safetensors(const yc_weights *w, const char *path, bool half);


/* ---- a model from --cfg, --weights and --nc, on a device -------------------------------------- */

/* The config of a model: `cfg` (a bundled name or a yaml path: modelcfg.h) with nc > 0 replacing
 * its class count, else the one embedded in the weights `w`.  Neither: YC_EUSAGE "give --cfg (a
 * model config) or --weights (a model to start from)".  When path is not NULL it receives the
 * config file's path ("" for an embedded config). */
int yc_model_cfg_open(const char *cfg, const yc_weights *w, int nc, yc_model_cfg **out,
                      char *path, size_t len);

/* What a model is opened for. */
typedef enum yc_model_use {
    YC_MODEL_SHAPE, /* built, nothing allocated: plans, GFLOPs, layer tables */
    YC_MODEL_TRAIN, /* parameters, gradients and buffers allocated on the device (yc_model_alloc) */
    YC_MODEL_INFER, /* the weights alone allocated (yc_model_alloc_weights) and loaded strictly
                       from --weights, which is required */
} yc_model_use;

/* Where a model comes from and where it runs: the command line's --cfg, --weights, --nc,
 * --device and --threads. */
typedef struct yc_model_spec {
    const char *cfg;     /* NULL or "": the config embedded in the weights */
    const char *weights; /* NULL or "": none (YC_MODEL_INFER needs them) */
    /* classes: > 0 replaces the config's; 0 takes the weights' (their metadata, else their
     * Detect head) when there are weights, else the config's */
    int nc;
    const char *device;  /* yc_device_open's spec; NULL: no device is opened (YC_MODEL_SHAPE) */
    yc_backend *backend; /* or: a backend already open, used (not owned) */
    int threads;         /* compute threads of the CPU backend (<= 0: physical cores) */
    bool announce;       /* print the device chosen */
    yc_model_use use;
    /* the job, for the refusal of a classifier ("yolocl val"); NULL: classifiers are opened too */
    const char *detection_only;
} yc_model_spec;

typedef struct yc_opened_model {
    yc_model *m;         /* owned */
    yc_backend *be;      /* owned unless it is spec->backend; NULL without a device */
    bool own_be;
    yc_weights *w;       /* the weights read (owned; their names, metadata), or NULL */
    char cfg_path[1024]; /* the config file ("" when embedded in the weights) */
} yc_opened_model;

/* Opens a model: reads the weights, resolves the config (yc_model_cfg_open), builds the model,
 * opens the device and allocates on it what `use` asks (and loads the weights strictly for
 * YC_MODEL_INFER).  On an error *out is empty. */
int yc_model_open(const yc_model_spec *spec, yc_opened_model *out);
/* Frees the model (detached from its backend first), the backend and the weights. */
void yc_opened_model_free(yc_opened_model *om);

#endif
