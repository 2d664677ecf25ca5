/* val and detect for classifiers (classify/val.py, classify/predict.py): cmd_val.c and
 * cmd_detect.c hand a classifier's weights to these. */
#ifndef YC_CLASSIFY_CMDS_H
#define YC_CLASSIFY_CMDS_H

#include <stdbool.h>

/* Whether `weights` (with `cfg` when given) hold a classifier; false when they cannot be read
 * (the command then reports that itself). */
bool yc_cli_is_classifier(const char *weights, const char *cfg);

/* classify/val.py: accuracy over ROOT/test, else ROOT/val, at img (<= 0: 224) in batches. */
int yc_cli_classify_val(const char *weights, const char *cfg, const char *root, int img, int batch,
                        const char *device);

/* classify/predict.py: the top-5 classes of each image of `source` (an image, a folder or a .txt
 * list) at img (<= 0: 224). */
int yc_cli_classify_predict(const char *weights, const char *cfg, const char *source, int img,
                            const char *device);

#endif
