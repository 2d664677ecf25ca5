/* Model configs in YOLOv5's yaml format (nc, depth_multiple, width_multiple, anchors, backbone,
 * head), resolved as YOLOv5 v7.0's parse_model does: repeat rounding, channel rounding to
 * multiples of 8, input channels inserted, Concat widths summed, Detect inputs collected.
 * Reference: docs/YOLOV5.md section 1.1-1.3. */
#ifndef YC_MODELCFG_H
#define YC_MODELCFG_H

#include <stdbool.h>
#include <stddef.h>

#define YC_MAX_FROM 8
#define YC_MAX_LAYERS 512
#define YC_CFG_MAX_LEVELS 8
#define YC_CFG_MAX_ANCHORS 16

/* The modules yolocl builds (YOLOv5's models/common.py names). */
typedef enum yc_module {
    YC_MOD_CONV,       /* Conv: conv (no bias) + BatchNorm + SiLU */
    YC_MOD_BOTTLENECK, /* Bottleneck: 1x1 Conv, 3x3 Conv, optional residual */
    YC_MOD_C3,         /* C3: CSP bottleneck with 3 convolutions */
    YC_MOD_SPP,        /* SPP: Conv, max-pools k=(5,9,13) in parallel, concat, Conv */
    YC_MOD_SPPF,       /* SPPF: Conv, three chained k=5 max-pools, concat, Conv */
    YC_MOD_UPSAMPLE,   /* nn.Upsample(None, factor, 'nearest') */
    YC_MOD_CONCAT,     /* Concat along channels, in `from` order */
    YC_MOD_DETECT,     /* Detect: one 1x1 conv with bias per level; Segment: the same with nm mask
                        * coefficients per anchor, and Proto (nm > 0) */
    YC_MOD_CLASSIFY,   /* Classify: 1x1 Conv to 1280, global average pool, dropout, Linear */
} yc_module;

/* What a model predicts: boxes (its last layer is Detect), one class per image (Classify), or
 * boxes with instance masks (Segment). */
typedef enum yc_task {
    YC_TASK_DETECT,
    YC_TASK_CLASSIFY,
    YC_TASK_SEGMENT,
} yc_task;

/* Classify's hidden width (YOLOv5's c_ = 1280, efficientnet_b0's) */
#define YC_CLASSIFY_HIDDEN 1280

/* One resolved row: `from`, repeats, module and its arguments as YOLOv5 passes them. */
typedef struct yc_layer_cfg {
    /* absolute input layer indices (-1 = the network input) */
    int from[YC_MAX_FROM];
    /* the `from` entries as written (-1 = previous layer), for the summary table */
    int from_raw[YC_MAX_FROM];
    int nfrom;
    /* module kind and its name as YOLOv5 prints it ("models.common.Conv") */
    yc_module module;
    const char *type_name;
    /* effective repeat count n' = max(round(n*depth_multiple), 1) when n > 1 */
    int n;
    /* sequential repeats of the whole module (n' for modules other than C3; 1 for C3) */
    int repeats;
    /* input and output channels (Concat: sum of inputs; Detect: na*(nc+5) per level, Segment
     * na*(nc+5+nm)) */
    int c1, c2;
    /* Conv: kernel, stride, padding (autopad k/2 when the yaml gives none), groups */
    int k, s, p, g;
    /* SPP pool kernels (SPPF: pool[0] only) */
    int pool[4], npool;
    /* C3 and Bottleneck: residual connections; expansion e */
    bool shortcut;
    double e;
    /* nn.Upsample scale factor */
    int factor;
    /* Segment: mask coefficients per anchor (nm) and Proto's width (npr * width_multiple rounded
     * as parse_model does); 0 for Detect */
    int nm, npr;
    /* the resolved argument list as YOLOv5 prints it ("[3, 32, 6, 2, 2]") */
    char args_text[512];
    /* line of the row in the yaml, for messages */
    int line;
} yc_layer_cfg;

typedef struct yc_model_cfg {
    /* detection, classification or segmentation (from the last layer) */
    yc_task task;
    /* classes (after any override) */
    int nc;
    /* input channels (yaml `ch`, default 3) */
    int ch;
    double depth_multiple, width_multiple;
    /* channel rounding divisor (yaml `channel_multiple`, default 8) */
    int channel_multiple;
    /* detection levels and anchors per level (0 and 0 for a classifier) */
    int nl, na;
    /* anchors in input pixels, anchors[(l*na + a)*2 + {0: w, 1: h}], as written in the yaml
     * (YOLOv5 flips their order and divides by the stride when it builds Detect) */
    float anchors[YC_CFG_MAX_LEVELS * YC_CFG_MAX_ANCHORS * 2];
    /* anchors were given as a count (`anchors: 3`): placeholders AutoAnchor must replace */
    bool anchors_placeholder;
    /* resolved rows, backbone then head */
    int nlayers;
    yc_layer_cfg layers[YC_MAX_LAYERS];
    /* yaml path and the model's display name ("YOLOv5s") */
    char path[1024];
    char name[128];
    /* the yaml text the config came from (owned; NULL when built from a tree), for checkpoints */
    char *text;
} yc_model_cfg;

/* Finds a model config: an existing path is used as it is; a bare name ("yolov5s" or
 * "yolov5s.yaml") is looked up in $YOLOCL_DATA_DIR/models, the installed package data directory
 * and the source tree's data/models.  Writes the path found into `path`. */
int yc_model_cfg_find(const char *name, char *path, size_t len);

/* Reads and resolves a model yaml.  `nc_override` > 0 replaces the yaml's nc (as YOLOv5's
 * Model(cfg, nc=...) does).  Errors name the file, the row and what is wrong. */
int yc_model_cfg_load(yc_model_cfg **out, const char *path, int nc_override);
/* The same from yaml text (a checkpoint's embedded config); `name` is used in messages and as
 * the model's display name. */
int yc_model_cfg_parse(yc_model_cfg **out, const char *text, size_t len, const char *name,
                       int nc_override);
/* The same from a parsed tree (a .pt file's model.yaml dict converted to a tree). */
struct yc_yaml_node;
int yc_model_cfg_from_yaml(yc_model_cfg **out, const struct yc_yaml_node *root, const char *name,
                           int nc_override);
void yc_model_cfg_free(yc_model_cfg *cfg);

/* Index of the Detect (or Segment) row (the last row must be Detect or Segment). */
int yc_model_cfg_detect(const yc_model_cfg *cfg);

/* YC_OK for a detection model's config; for a classifier's or a segmentation model's an error
 * (YC_EUSAGE) naming the model and `what` (the command or job), which works on detection models
 * only. */
int yc_model_cfg_require_detection(const yc_model_cfg *cfg, const char *what);

/* YOLOv5's ClassificationModel(model=detection or segmentation model, nc, cutoff): keeps layers
 * 0..cutoff-1 and replaces the last of them by Classify(its input channels, nc), fed from the same
 * layer.  The replaced layer must hold a convolution (Conv, C3, Bottleneck, SPP, SPPF) and have
 * one input. */
int yc_model_cfg_to_classifier(yc_model_cfg *cfg, int nc, int cutoff);

#endif
