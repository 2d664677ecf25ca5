/* Reading PyTorch checkpoints (torch.save zip files) without Python: Ultralytics YOLOv5 .pt
 * files and plain state dicts.
 *
 * A torch.save file is a zip archive "<name>/data.pkl" (a pickle), "<name>/data/<key>" (one raw
 * storage per key) and optionally "<name>/byteorder" ("little" or "big").  The pickle is run by
 * pickle.c (nothing is executed); persistent ids ('storage', torch.HalfStorage, key, location,
 * numel) name the storages, and torch._utils._rebuild_tensor_v2(storage, offset, size, stride)
 * views into them.  Half, bfloat16, float, double and the integer storage types are converted to
 * float32; any strides (views, transposes, expanded dimensions) are copied out densely.
 *
 * The model is found as YOLOv5's attempt_load finds it: ckpt['ema'] when present and not None,
 * else ckpt['model'] (a pickled nn.Module, normally a DetectionModel).  Its state dict is rebuilt
 * as torch's Module.state_dict() orders it: per module its parameters, then its persistent
 * buffers, then its children (`_modules`) recursively, skipping None entries.  The model's yaml
 * (a dict), yaml_file, nc, names and stride attributes are read when present.  A file holding a
 * plain state dict (a dict of tensors, at the top level or under 'model' or 'state_dict') is read
 * too; it carries no model config.  Anything else is refused: "not a YOLOv5 checkpoint: ...".
 *
 * Hostile files: the zip reader and the pickle reader check every offset and size; storages
 * must have exactly the size their persistent id announces; every tensor view must lie within
 * its storage; module nesting, the number of tensors and the elements materialised (at most
 * four per byte of the file, plus 1M, so stride-0 views cannot blow up memory) are capped. */
#ifndef YC_PTFILE_H
#define YC_PTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pickle.h"
#include "yamltree.h"

/* Most tensors read from one file, and the longest tensor name. */
#define YC_PT_MAX_TENSORS 1000000
#define YC_PT_MAX_NAME 1024
/* Most entries of the model's stride attribute. */
#define YC_PT_MAX_STRIDES 8

/* Element type of a storage (torch.<Name>Storage). */
typedef enum yc_pt_dtype {
    YC_PT_F16,
    YC_PT_BF16,
    YC_PT_F32,
    YC_PT_F64,
    YC_PT_I64,
    YC_PT_I32,
    YC_PT_I16,
    YC_PT_I8,
    YC_PT_U8,
    YC_PT_BOOL,
} yc_pt_dtype;

/* One state-dict entry, converted. */
typedef struct yc_pt_tensor {
    /* state-dict name ("model.0.conv.weight") */
    char *name;
    /* the storage's element type in the file */
    yc_pt_dtype dtype;
    /* dimensions (0 for a scalar such as num_batches_tracked) */
    int ndim;
    int64_t shape[YC_PK_MAX_DIMS];
    /* product of the shape (1 for a scalar) */
    size_t numel;
    /* numel values in row-major order, as float32 */
    float *data;
    /* integer dtypes only: the exact values (NULL for floating dtypes) */
    int64_t *idata;
} yc_pt_tensor;

/* Where the weights came from. */
typedef enum yc_pt_source {
    YC_PT_SOURCE_EMA,        /* ckpt['ema'], a module */
    YC_PT_SOURCE_MODEL,      /* ckpt['model'], a module */
    YC_PT_SOURCE_MODULE,     /* the file is a pickled module itself (torch.save(model)) */
    YC_PT_SOURCE_STATE_DICT, /* a plain state dict: no model config */
} yc_pt_source;

typedef struct yc_pt_checkpoint {
    /* where the weights came from, and the module's class ("models.yolo.Model"; "" for a state
     * dict) */
    yc_pt_source source;
    char model_class[256];
    /* the state dict in torch's order */
    int ntensors;
    yc_pt_tensor *tensors;
    /* the model's `yaml` attribute (a dict) as a yaml tree, or NULL.  Strings that would read
     * back as another type are marked quoted; None is written "null", floats as PyYAML writes
     * them. */
    yc_yaml_node *yaml;
    /* the model's `yaml_file` attribute ("yolov5n.yaml"), or NULL */
    char *yaml_file;
    /* classes: the model's `nc` attribute, else the yaml's nc, else -1 */
    int nc;
    /* class names (the model's `names`, a list or a {index: name} dict), or none */
    int nnames;
    char **names;
    /* the model's `stride` attribute (a tensor or a list), or none */
    int nstride;
    float stride[YC_PT_MAX_STRIDES];
} yc_pt_checkpoint;

/* Reads a checkpoint.  On failure *out is NULL and the message names the file and the problem
 * (YC_EIO, YC_EFORMAT: malformed or not a YOLOv5 checkpoint, YC_EUNSUPPORTED: a valid file of a
 * kind yolocl does not read, such as TorchScript or the pre-1.6 torch format). */
int yc_pt_load(yc_pt_checkpoint **out, const char *path);
void yc_pt_free(yc_pt_checkpoint *c);

/* Tensor by name, or NULL. */
const yc_pt_tensor *yc_pt_find(const yc_pt_checkpoint *c, const char *name);

/* "HalfStorage"-style name of a dtype ("Half"). */
const char *yc_pt_dtype_name(yc_pt_dtype dt);

#endif
