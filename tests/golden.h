/* The golden training step, shared by test_golden.c (CPU backend) and test_cl.c (OpenCL): load a
 * model, its weights and a batch, run one step, and compare with PyTorch YOLOv5 v7.0's dumps:
 * head outputs, the four loss numbers, every parameter gradient (FP32: relative error
 * max|a-b| / max|b| per tensor; FP16 storage: cosine and norm ratio per tensor), the BatchNorm
 * running statistics after the step, and one optimizer iteration after it (warmup, clipping,
 * SGD, EMA) against tests/data/tiny/update.safetensors.  Every comparison fails on NaN or
 * infinity (yctest.h).  The functions fail the running Check test case. */
#ifndef YC_GOLDEN_H
#define YC_GOLDEN_H

#include <stddef.h>

#include "backend.h"
#include "graph.h"
#include "loss.h"
#include "model.h"
#include "safetensors.h"
#include "step.h"

/* Bounds on the tiny fixture, about twice the worst measured on the CPU backend and on PoCL's
 * OpenCL device (AMD EPYC, AVX-512; the same on both unless two are given).
 *  - the optimizer iteration, by yc_test_change_error: measured 1.2e-4 (a BatchNorm weight's
 *    EMA);
 *  - FP16 storage against PyTorch's FP32 step: heads 2.4e-2 (CPU) and 2.1e-2 (OpenCL), loss parts
 *    4.3e-3 and 2.7e-3; per gradient tensor, 1 - cosine 3.9e-2 and 3.5e-2 (BatchNorm biases and
 *    weights of the last C3) and |norm ratio - 1| 0.137 and 0.134 (model.4.cv1.bn.weight): a
 *    model 0.0625 wide has 8 to 64 channels, so FP16 rounding of one activation shows;
 *  - FP16 storage, OpenCL against the CPU backend per gradient tensor: 1 - cosine 1.9e-3,
 *    |norm ratio - 1| 4.8e-2. */
#define YC_GOLDEN_TOL_UPDATE 3e-4
#define YC_GOLDEN_HALF_TOL_OUT 5e-2
#define YC_GOLDEN_HALF_TOL_LOSS 1e-2
#define YC_GOLDEN_HALF_ANGLE 8e-2
#define YC_GOLDEN_HALF_RATIO 0.27
#define YC_GOLDEN_HALF_CL_CPU_ANGLE 4e-3
#define YC_GOLDEN_HALF_CL_CPU_RATIO 0.1

typedef struct yc_golden {
    yc_backend *be;
    yc_model *m;
    yc_step *step;
    float *images, *targets;
    int batch, nt;
    yc_loss_result res;
} yc_golden;

/* The files of tests/data/tiny ($YOLOCL_TEST_DATA/tiny). */
typedef struct yc_tiny_files {
    char cfg[1100], weights[1100], batch[1100], expected[1100], grads[1100], update[1100];
} yc_tiny_files;
void yc_tiny_files_get(yc_tiny_files *t);

/* A float tensor read whole from a safetensors file (malloc'd; NULL when the name is absent). */
float *yc_golden_read(yc_st_file *f, const char *name, size_t *numel);

/* Loads the model (cfg with nc classes, 0: the config's), its weights and the batch (images
 * under images_name, "targets") on `device` ("cpu", "opencl:0") and runs one training step with
 * storage options `go` (NULL: FP32, nothing recomputed).  The heads are kept on the host. */
void yc_golden_step(yc_golden *gd, const char *device, const char *cfg, int nc, const char *weights,
                    const char *batch, const char *images_name, const yc_graph_options *go);
void yc_golden_free(yc_golden *gd);

/* The whole gradient arena, read to the host (malloc'd). */
float *yc_golden_grads(const yc_golden *gd);

/* The tiny fixture's heads (relative error below tol_out) and loss parts (below tol_loss)
 * against expected.safetensors. */
void yc_golden_check_tiny_outputs(const yc_golden *gd, const yc_tiny_files *tiny, double tol_out,
                                  double tol_loss);

/* Heads (permuted to PyTorch's (B, na, ny, nx, no)) against the tensors names[l] of a file. */
void yc_golden_check_heads(const yc_golden *gd, const char *path, const char *const *names,
                           double tol);

/* Loss (total, box, obj, cls) against ref, relative error each. */
void yc_golden_check_loss(const yc_golden *gd, const float ref[4], double tol);

/* Every parameter gradient against the file's tensor of the same name, relative error per
 * tensor; returns the gradients (malloc'd). */
float *yc_golden_check_grads(const yc_golden *gd, const char *path, double tol);

/* Every gradient tensor's direction and size against the file's: 1 - cosine below
 * max_angle_err and |norm ratio - 1| below max_ratio_err, per tensor (for FP16 storage, whose
 * rounding makes the largest relative errors meaningless on small tensors).  Prints the worst. */
void yc_golden_check_grads_similar(const yc_golden *gd, const char *path, double max_angle_err,
                                   double max_ratio_err);

/* BatchNorm running means and variances against the file's (relative error per tensor) and the
 * batch counters exactly. */
void yc_golden_check_bn_stats(const yc_golden *gd, const char *path, double tol);

/* The tiny fixture's optimizer iteration after the step (tiny->update's metadata: ni, nw,
 * max_norm, the EMA's updates before): PyTorch's gradients (tiny->grads) in place of ours, so the
 * update is compared to round-off rather than to the gradients' tolerance; the warmup's learning
 * rates and momentum from yc_hyp_defaults; the clipped SGD step; an EMA of the weights before the
 * step updated once.  Parameters and the EMA's parameters and running statistics against PyTorch
 * by yc_test_change_error (the error relative to the change from before the iteration), below
 * tol.  Also the BatchNorm running statistics of the step (relative error below tol_bn). */
void yc_golden_check_update(yc_golden *gd, const yc_tiny_files *tiny, double tol, double tol_bn);

#endif
