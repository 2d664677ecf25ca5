/* val and detect for classifiers (classify/val.py, classify/predict.py): cmd_val.c and
 * cmd_detect.c hand a classifier's weights to these. */
#ifndef YC_CLASSIFY_CMDS_H
#define YC_CLASSIFY_CMDS_H

#include "modelcfg.h"

/* The task of the model `cfg` names, else of `weights`: YC_TASK_DETECT when they cannot be read
 * (the command then reports that itself).  For a segmentation model the error is set to the
 * refusal of yc_model_cfg_require_detection naming `what` (the command). */
yc_task yc_cli_model_task(const char *weights, const char *cfg, const char *what);

/* classify/val.py: accuracy over ROOT/test, else ROOT/val, at img (<= 0: 224) in batches. */
int yc_cli_classify_val(const char *weights, const char *cfg, const char *root, int img, int batch,
                        const char *device);

/* classify/predict.py: the top-5 classes of each image of `source` (an image, a folder or a .txt
 * list) at img (<= 0: 224). */
int yc_cli_classify_predict(const char *weights, const char *cfg, const char *source, int img,
                            const char *device);

#endif
