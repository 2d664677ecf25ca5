/* Training hyperparameters (the yaml files in YOLOv5's data/hyps): the same keys, the same defaults
 * (hyp.scratch-low.yaml). */
#ifndef YC_HYP_H
#define YC_HYP_H

/* X-macro list of every key: name, default (hyp.scratch-low). */
#define YC_HYP_KEYS(X)                                                                             \
    X(lr0, 0.01) X(lrf, 0.01) X(momentum, 0.937) X(weight_decay, 0.0005) X(warmup_epochs, 3.0)    \
    X(warmup_momentum, 0.8) X(warmup_bias_lr, 0.1) X(box, 0.05) X(cls, 0.5) X(cls_pw, 1.0)        \
    X(obj, 1.0) X(obj_pw, 1.0) X(iou_t, 0.20) X(anchor_t, 4.0) X(fl_gamma, 0.0) X(hsv_h, 0.015)   \
    X(hsv_s, 0.7) X(hsv_v, 0.4) X(degrees, 0.0) X(translate, 0.1) X(scale, 0.5) X(shear, 0.0)     \
    X(perspective, 0.0) X(flipud, 0.0) X(fliplr, 0.5) X(mosaic, 1.0) X(mixup, 0.0)                \
    X(copy_paste, 0.0)

typedef struct yc_hyp {
#define YC_HYP_FIELD(name, def) double name;
    YC_HYP_KEYS(YC_HYP_FIELD)
#undef YC_HYP_FIELD
    /* optional `anchors` key: anchors per level for AutoAnchor-style placeholders (0 = unset) */
    double anchors;
} yc_hyp;

/* The defaults (hyp.scratch-low.yaml). */
void yc_hyp_defaults(yc_hyp *h);

/* Reads a hyp yaml: a path, or a bundled name ("hyp.scratch-low", "hyp.scratch-low.yaml").
 * Keys not in the file keep their defaults; an unknown key or a non-numeric value is an error
 * naming the key. */
int yc_hyp_load(yc_hyp *h, const char *name_or_path);

/* The same from YAML (or JSON) text, such as the hyp a checkpoint carries; `name` is used in
 * messages. */
int yc_hyp_parse(yc_hyp *h, const char *text, const char *name);

#endif
