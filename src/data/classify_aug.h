/* The image transforms of YOLOv5's classify/train.py (utils/augmentations.py), on 8-bit RGB:
 *  - validation and prediction, classify_transforms: CenterCrop (the centred square of the
 *    short side, resized to size x size with INTER_LINEAR);
 *  - training, classify_albumentations' defaults: RandomResizedCrop(size, scale (0.08, 1), ratio
 *    (3/4, 4/3)), HorizontalFlip(0.5), VerticalFlip(0), ColorJitter(0.4, 0.4, 0.4, 0);
 *  - then Normalize(ImageNet mean and std) into CHW floats.
 * YOLOv5 runs the training ones through albumentations when it is installed; these are this
 * project's own implementation of the same definitions (torchvision's RandomResizedCrop
 * sampling, OpenCV's gray weights for contrast and saturation). */
#ifndef YC_CLASSIFY_AUG_H
#define YC_CLASSIFY_AUG_H

#include "image.h"
#include "rng.h"

typedef struct yc_cls_aug {
    /* RandomResizedCrop: area fraction and aspect ratio ranges */
    double scale_min, scale_max, ratio_min, ratio_max;
    /* flip probabilities */
    double hflip, vflip;
    /* ColorJitter strength for brightness, contrast and saturation (0: off) */
    double jitter;
} yc_cls_aug;

/* classify_albumentations' defaults (above). */
void yc_cls_aug_defaults(yc_cls_aug *a);

/* out = CenterCrop(size) of src. */
int yc_cls_center_crop(const yc_image *src, int size, yc_image *out, yc_image *tmp);

/* out = the training transforms of src at size x size, drawn from rng (tmp: scratch). */
int yc_cls_augment(const yc_image *src, int size, const yc_cls_aug *a, yc_rng *rng,
                   yc_image *out, yc_image *tmp);

/* dst (3 x h x w floats, CHW) = (pixel / 255 - mean) / std per channel, ImageNet's mean
 * (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225). */
void yc_cls_normalize(const yc_image *im, float *dst);

/* utils/augmentations.py denormalize, in place on n images of 3 x h x w floats: x * std + mean
 * per channel (ImageNet's, above), clipped to [0, 1] as imshow_cls clips them. */
void yc_cls_denormalize(float *chw, int n, int w, int h);

/* The images a reader decodes and transforms, reused from one read to the next. */
typedef struct yc_cls_reader {
    yc_image im, out, tmp;
} yc_cls_reader;

/* Reads image `path` and writes its size x size normalised CHW floats to dst: the training
 * transforms `aug` drawn from rng, or CenterCrop when aug is NULL.  The image is decoded whole
 * up to the read limits' exact size (image_read.h), else reduced while it decodes to twice the
 * output size on its short side, so memory stays bounded for any image.  Errors name the file. */
int yc_cls_read(yc_cls_reader *rd, const char *path, int size, const yc_cls_aug *aug, yc_rng *rng,
                float *dst);
void yc_cls_reader_free(yc_cls_reader *rd);

#endif
