/* Classification datasets in torchvision's ImageFolder layout, as YOLOv5's classify/train.py reads
 * them: ROOT/train/CLASS/image.jpg and ROOT/val/CLASS/image.jpg (or ROOT/test/CLASS/...), one folder per class,
 * the classes in sorted order (their index is the label). */
#ifndef YC_IMAGEFOLDER_H
#define YC_IMAGEFOLDER_H

#include <stddef.h>

#include "dataset.h"

typedef struct yc_imagefolder {
    /* class names (folder names, sorted) and their number */
    char **classes;
    int nc;
    /* the images, class by class, and each one's class index */
    size_t n;
    char **paths;
    int *labels;
    /* the lists the paths point into, one per class */
    yc_path_list *lists;
} yc_imagefolder;

/* Reads the split folder `dir` (ROOT/train, say): every subfolder a class, every image file below
 * it (yc_image_list) a sample.  An error names the folder when it does not exist, holds no class
 * folder, or a class folder holds no image. */
int yc_imagefolder_open(const char *dir, yc_imagefolder *out);
void yc_imagefolder_free(yc_imagefolder *f);

/* The validation folder of a dataset root: ROOT/test, else ROOT/val (classify/train.py's order);
 * writes it into buf and returns 0, or an error naming both. */
int yc_imagefolder_val_dir(const char *root, char *buf, size_t len);

#endif
