/* ONNX export of a YOLOv5 model, as YOLOv5 v7.0's export.py writes it (export_onnx with
 * torch.onnx.export of the fused model, Detect in export mode).
 *
 * The graph:
 *   input  `images`  (N, 3, H, W), float32 (float16 with half), RGB in [0, 1];
 *   output `output0` (N, anchors, 5 + nc): rows ordered level, anchor, y, x (YOLOv5's Detect
 *          torch.cat(z, 1)); per row cx, cy, w, h in input pixels, objectness and the nc class
 *          scores after the sigmoid; no NMS:
 *            y = sigmoid(conv);  xy = (2*y_xy + grid) * stride, grid = cell - 0.5;
 *            wh = (2*y_wh)^2 * anchor_grid (anchors in input pixels).
 * Each Conv + BatchNorm is one Conv with a bias (YOLOv5's fuse_conv_and_bn: w * gamma /
 * sqrt(var + eps), beta - gamma * mean / sqrt(var + eps), computed in float32 as PyTorch does),
 * SiLU is Sigmoid then Mul (these opsets have no SiLU operator; torch writes it so),
 * nn.Upsample is Resize (nearest, asymmetric, floor: torch's export of the nearest upsample),
 * SPPF/SPP are MaxPool and Concat, Detect's view/permute are Reshape and Transpose.
 * With `dynamic` the batch, height and width are symbolic (dim_params "batch", "height",
 * "width"; the output's "batch", "anchors") and each level's grid is computed from the feature
 * map's shape in the graph (Shape, Gather, Range), as Detect does when dynamic is set.
 * Metadata properties (YOLOv5's): "stride" the largest stride as an integer ("32"), "names" the
 * class names as Python prints a dict ("{0: 'person', 1: 'bicycle'}"). */
#ifndef YC_ONNX_H
#define YC_ONNX_H

#include <stdbool.h>

#include "model.h"

/* The opsets the graph is valid for: 11 (the first with Resize's roi/scales inputs and Range)
 * to 17 (onnx 1.12's newest). */
#define YC_ONNX_OPSET_MIN 11
#define YC_ONNX_OPSET_MAX 17

typedef struct yc_onnx_options {
    /* images per batch (>= 1; ignored with dynamic) */
    int batch;
    /* input height and width, multiples of the model's largest stride (with dynamic: the size
     * the file is checked with, any multiple of the stride runs) */
    int h, w;
    /* batch, height and width symbolic */
    bool dynamic;
    /* FP16 weights, input and output (YOLOv5's --half) */
    bool half;
    /* the default domain's opset (YOLOv5: 12) */
    int opset;
    /* class names (nnames == the model's nc), or NULL: "class0", "class1", ... */
    const char *const *names;
    int nnames;
    /* producer_version written in the file (yolocl's version), or NULL */
    const char *version;
} yc_onnx_options;

/* YOLOv5's defaults: batch 1, 640x640, static, FP32, opset 12. */
void yc_onnx_options_default(yc_onnx_options *o);

/* Writes the model (allocated on a backend, weights loaded) as an ONNX file at `path`
 * (atomically).  YC_EUSAGE for a classifier (detection models only) and options out of range (a size that is not a multiple of the
 * stride, an opset outside [YC_ONNX_OPSET_MIN, YC_ONNX_OPSET_MAX]); YC_ENOMEM, YC_EIO with
 * messages naming what failed.  *bytes (may be NULL) gets the file's size. */
int yc_onnx_export(yc_model *m, const yc_onnx_options *o, const char *path, size_t *bytes);

/* YOLOv5's metadata "names" value: Python's str() of {0: 'name0', 1: 'name1', ...} (each name
 * as Python's repr() of a str writes it).  A malloc'ed string, or NULL (YC_ENOMEM recorded). */
char *yc_onnx_names_repr(const char *const *names, int n);

#endif
