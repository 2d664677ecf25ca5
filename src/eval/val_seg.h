/* Validation of a segmentation model: YOLOv5 v7.0 segment/val.py's run(), which yc_validate
 * (val.h) runs for a model with a Segment head (m->nm > 0).  Reference: /tmp/y5 segment/val.py,
 * utils/segment/general.py, utils/segment/metrics.py.
 *
 * Per batch (the loader must give the batch's masks: yc_batch.masks, loader.h):
 *   inference   eval forward; the heads and Proto's output read back; each image's rows decoded
 *               with their nm raw mask coefficients (yc_detect_decode_nm), on the host;
 *   val loss    with loss parameters: yc_seg_loss_compute on the raw heads, Proto and the batch's
 *               masks (overlap maps, or one per target without opt->mask_overlap, as
 *               ComputeLoss(overlap=...)) (box, seg, obj, cls summed over batches, divided by
 *               their number);
 *   NMS         non_max_suppression(..., nm) as val.py (multi-label, agnostic with single_cls),
 *               each detection keeping its row's coefficients (yc_nms_src);
 *   masks       process_mask (YC_MASK_PROTO: at the prototypes' size, cropped to the box), or
 *               process_mask_upsample (YC_MASK_UPSAMPLE_CROP) with save_json, as val.py chooses;
 *   statistics  the box matching as detection's (yc_val_sink_add: also the confusion matrix with
 *               plots, save_txt's labels and the JSON's boxes), and the mask matching of
 *               process_batch(masks=True): the image's ground truth masks (opt->mask_overlap:
 *               one index map per image, else one mask per target) resampled bilinearly to the
 *               predicted masks' size and thresholded at 0.5 when the sizes differ, mask IoU,
 *               the same matching over IoU 0.5:0.95 (yc_match_iou);
 * then ap_per_class for the boxes and for the masks, both skipped (zeros) unless some mask
 * prediction is correct (val.py tests stats[0], the mask column), and the table
 *   Class Images Instances Box(P R mAP50 mAP50-95) Mask(P R mAP50 mAP50-95)
 * ('%22s' + '%11i' * 2 + '%11.3g' * 8), per class as val.py prints it.
 *
 * Saved, as segment/val.py saves them:
 *   plots       ap_per_class_box_and_mask's curves, BoxPR_curve.png, BoxF1_curve.png,
 *               BoxP_curve.png, BoxR_curve.png and MaskPR_curve.png ... MaskR_curve.png (only when
 *               some mask is correct), the boxes' confusion_matrix.png, and
 *               val_batch{0,1,2}_labels.jpg / _pred.jpg as plot_images_and_masks draws them: the
 *               labels with their ground truth masks, the first 15 detections of each image with
 *               their masks at process_mask's size (plots.h yc_plot_batch_masks);
 *   save_json   each detection's entry gets "segmentation": its process_mask_upsample mask brought
 *               to the original image (scale_image: the letterbox cropped off, cv2.resize of the
 *               uint8 mask, yc_scale_mask_u8) and COCO-RLE encoded as pycocotools' mask.encode
 *               (coco_rle.h).
 * Test-time augmentation (augment) and save_hybrid are refused.  Differences in the mosaics:
 * YOLOv5 tells overlap masks from per-target ones by their largest value (> 1); yolocl from
 * opt->mask_overlap (a batch whose masks are all 0/1 is one mask a target for YOLOv5 even in
 * the overlap format, which fails its plot thread when the counts differ). */
#ifndef YC_VAL_SEG_H
#define YC_VAL_SEG_H

#include <stdio.h>

#include "val.h"

/* yc_validate for a model with a Segment head (m->nm > 0), as described above; called by
 * yc_validate, whose arguments and result it takes.  lp: loss parameters with lp->nm = m->nm
 * (yc_seg_step_loss_params), or NULL; the loss reads the masks in the format opt->mask_overlap
 * says.
 * YC_EUSAGE when the batches have no masks or options it cannot honour are set. */
int yc_validate_seg(yc_model *m, yc_loader *loader, const yc_dataset *ds,
                    const char *const *names, const yc_val_options *opt,
                    const yc_loss_params *lp, yc_val_result *res);

/* segment/val.py's header line: ('%22s' + '%11s' * 10) of Class Images Instances Box(P R mAP50
 * mAP50-95) Mask(P R mAP50 mAP50-95). */
void yc_val_seg_print_header(FILE *f);

/* segment/val.py's result lines: "all", the images seen, the labels, the box P R mAP50 mAP50-95
 * then the mask ones ('%22s%11i%11i' + '%11.3g' * 8); with per_class one line per class that
 * has labels and a result (ap_per_class's classes). */
void yc_val_seg_print_results(FILE *f, const yc_val_metrics *box, const yc_val_metrics *mask,
                              const char *const *names, bool per_class);

#endif
