/* The backend interface: what the model, the planner and the trainer ask of a device.
 *
 * Backends (cpu/, cl/) know buffers, tensors and ops, nothing else: they never include model,
 * loss, optimizer or data headers.  The struct layout follows ggml's backend headers: one
 * interface struct of function pointers, each member documented on the line above it.
 *
 * Adding an op (docs/ARCHITECTURE.md "Adding an op" has the details):
 *   1. the enum value below, with its slots in the comment; a member of yc_op.p for parameters;
 *   2. src/backend/op.c: its signature, shape checks and FP16 slots (yc_op_check, which
 *      yc_backend_exec runs for every backend: backends do not check again);
 *   3. per backend, its kernel and a dispatch case (cpu/cpu_backend.c, cl/cl_ops.c), and any
 *      restriction in supports or scratch in workspace;
 *   4. src/nn/modules.c: the builder that emits it; src/nn/autodiff.c: its case in the backward
 *      pass;
 *   5. tests/ref_ops.c (a naive reference) and tests/test_ops.c (every backend against it, finite
 *      differences for a backward op); bench/cl_smoke.c for oclgrind. */
#ifndef YC_BACKEND_H
#define YC_BACKEND_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/* ---------------------------------------------------------------------------------------------
 * Ops.  Every op reads src[] and writes dst[]; the roles of the slots are listed per op.
 * "acc" means the op honours yc_op.accumulate for dst[0]: 0 overwrites, 1 adds to what is there.
 * Parameter gradients (dW, dbias, dgamma, dbeta) are always added to (+=): the trainer zeroes
 * them after each optimizer step, so micro-batches accumulate for free.
 * Shapes: x (N,C,H,W), y (N,K,P,Q) for convolutions; vectors are (1,C,1,1).
 * FP16: forward activations (the x, y, z, a slots: conv input and output, BN input and output,
 * SiLU, add, copy, fill, max-pool and upsample values) may be YC_F16 where the device stores
 * half; the op converts on load and store and computes in FP32.  Gradients, parameters, their
 * gradients, BN statistics and optimizer state are always FP32 (src/backend/op.c's may_be_f16 is the
 * exact list, checked by yc_op_check).
 * ------------------------------------------------------------------------------------------- */
typedef enum yc_op_kind {
    /* y = conv(x, W) + b.        src: x (N,C,H,W), W (K,C,R,S), b (1,K,1,1) or NULL;  dst: y (N,K,P,Q)
     * P = (H + 2*pad_h - R) / stride_h + 1, Q likewise.  With p.conv.silu (backends whose
     * yc_device_info.conv_silu is set): y = silu(conv(x, W) + b), the evaluation graph's Conv with
     * its BatchNorm folded into W and b (yc_model_fuse) and its SiLU applied while the output is
     * in cache.  p.conv.frozen: W does not change between runs (an inference model's weights),
     * so a backend may keep it transformed for its kernels from one run to the next (the CPU
     * backend keeps its packed and Winograd-transformed copies until W's buffer is written or
     * freed). */
    YC_OP_CONV2D,
    /* dx (=|+=) conv^T(dy, W).   src: dy (N,K,P,Q), W (K,C,R,S);  dst: dx (N,C,H,W) [acc] */
    YC_OP_CONV2D_BWD_DATA,
    /* dW += dy (*) x; db += sum dy.  src: x (N,C,H,W), dy (N,K,P,Q);  dst: dW (K,C,R,S), db (1,K,1,1) or NULL */
    YC_OP_CONV2D_BWD_FILTER,
    /* Batch norm, training mode: batch statistics over (N,H,W), biased variance for normalising,
     * unbiased variance for the running estimate:  running = (1-momentum)*running + momentum*batch.
     * src: x, gamma (1,C,1,1), beta (1,C,1,1);  dst: y (N,C,H,W), stats (2,C,1,1) = [mean; 1/sqrt(var+eps)],
     * running_mean (1,C,1,1) (read and written), running_var (1,C,1,1) (read and written). */
    YC_OP_BN_TRAIN,
    /* Batch norm, evaluation mode: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta.
     * src: x, gamma, beta, running_mean, running_var;  dst: y */
    YC_OP_BN_EVAL,
    /* Batch norm backward (training mode).
     * src: dy, x (the BN input), gamma, stats (from YC_OP_BN_TRAIN);  dst: dx [acc], dgamma, dbeta */
    YC_OP_BN_BWD,
    /* Batch norm (training mode, as YC_OP_BN_TRAIN) then SiLU, without storing the BN output:
     *   z = (x - mean) * invstd * gamma + beta (computed exactly as YC_OP_BN_TRAIN computes y);
     *   a = z * sigmoid(z)
     * src: x, gamma, beta;  dst: a (N,C,H,W), stats (2,C,1,1), running_mean, running_var
     * (read and written). */
    YC_OP_BN_SILU_TRAIN,
    /* The output of YC_OP_BN_SILU_TRAIN recomputed from its input and the batch statistics it
     * saved (bit-identical to the `a` it wrote), for backward passes that did not keep `a`:
     * src: x (the BN input), gamma, beta, stats;  dst: a */
    YC_OP_BN_SILU_APPLY,
    /* Backward of YC_OP_BN_SILU_TRAIN, recomputing z from x and stats (bit-identical to
     * YC_OP_SILU_BWD on the stored z followed by YC_OP_BN_BWD):
     * src: da, x (the BN input), gamma, beta, stats;  dst: dx [acc], dgamma, dbeta */
    YC_OP_BN_SILU_BWD,
    /* y = x * sigmoid(x).        src: x;  dst: y (same shape) */
    YC_OP_SILU,
    /* dx (=|+=) dy * silu'(x).   src: dy, x (the SiLU input);  dst: dx [acc] */
    YC_OP_SILU_BWD,
    /* y = a + b.                 src: a, b (same shape);  dst: y */
    YC_OP_ADD,
    /* dst (=|+=) src: copies or accumulates a tensor (gradient plumbing, concat fallback).
     * src: a;  dst: y (same shape) [acc] */
    YC_OP_COPY,
    /* dst = value (usually 0).   dst: y */
    YC_OP_FILL,
    /* Max pooling, padding counts as -inf.  src: x;  dst: y (N,C,P,Q) */
    YC_OP_MAXPOOL,
    /* Max pooling backward: each dy goes to the first maximum of its window (row-major scan, as
     * PyTorch picks it).  src: dy, x (the pool input);  dst: dx [acc] */
    YC_OP_MAXPOOL_BWD,
    /* Nearest upsampling by an integer factor: y[h][w] = x[h/f][w/f].  src: x;  dst: y (N,C,H*f,W*f) */
    YC_OP_UPSAMPLE,
    /* Upsample backward: dx[h][w] = sum of dy over its f*f block.  src: dy;  dst: dx [acc] */
    YC_OP_UPSAMPLE_BWD,
    /* Global average pooling (nn.AdaptiveAvgPool2d(1)): y = the sum of x over (H,W), in row-major
     * order, divided by H*W.  src: x (N,C,H,W);  dst: y (N,C,1,1) */
    YC_OP_AVGPOOL,
    /* Its backward: dx[h][w] = dy / (H*W).  src: dy (N,C,1,1);  dst: dx (N,C,H,W) [acc] */
    YC_OP_AVGPOOL_BWD,
    /* Dropout (nn.Dropout(p) in training: Classify's): y = keep ? x * scale : 0, where element i
     * (its row-major index in (N,C,H,W)) is dropped when yc_dropout_hash(seed, i) <
     * threshold; with threshold = p * 2^32 and scale = 1 / (1 - p) (yc_dropout_params).  The same
     * op with the same parameters is its own backward (dx = dy * keep * scale): both passes, and
     * both backends, draw the same mask.  FP32 only.  src: x;  dst: y [acc] */
    YC_OP_DROPOUT,

    /* The optimizer ops below work on flat ranges of the parameter arena: dense FP32 tensors of
     * equal element count N (usually (1,N,1,1)).  They update their dst tensors in place. */

    /* SGD as PyTorch computes it (dampening 0), one step over a parameter group:
     *   g = scale*grad + wd*w;  buf = momentum*buf + g;  g = nesterov ? g + momentum*buf : buf;
     *   w = w - lr*g
     * src: grad [, sumsq];  dst: w (read and written), buf (read and written).
     * With sumsq, the gradients' sum of squares (1,1,1,1) as YC_OP_SUMSQ leaves it on the device,
     * scale is PyTorch's clip_grad_norm_ coefficient computed there in float,
     * min(1, max_norm / (sqrt(sumsq) + 1e-6)), and nothing is written when sumsq is not finite
     * (the caller learns of it from the sum it reads back). */
    YC_OP_SGD,
    /* Adam (decoupled = 0, L2 decay added to the gradient) or AdamW (decoupled = 1: w *= 1-lr*wd
     * first) as PyTorch computes them, step t >= 1:
     *   g = scale*grad [+ wd*w];  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
     *   w = w - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
     * src: grad [, sumsq] (as SGD's);  dst: w, m, v (all read and written). */
    YC_OP_ADAM,
    /* Exponential moving average: e = decay*e + (1-decay)*x.  src: x;  dst: e (read and written). */
    YC_OP_EMA,
    /* Sum of squares (accumulated in double), for gradient norms: dst[0] = sum of src[0]^2.
     * src: x (any dense tensor);  dst: s (1,1,1,1) [acc: adds to what is there] */
    YC_OP_SUMSQ,
    YC_OP_COUNT
} yc_op_kind;

#define YC_OP_MAX_SRC 5
#define YC_OP_MAX_DST 4

/* A sum over the processes of a data-parallel run (SyncBatchNorm, src/train/dist.c implements it
 * with MPI): v[i] = the sum over every process of its v[i], for i < n, in place, on every process;
 * the same call, with the same n, must be made by every process.  ctx is the pointer given with
 * it.  Returns a status (log.h) with a message naming what failed. */
typedef int (*yc_bn_sync_fn)(void *ctx, double *v, size_t n);

typedef struct yc_op {
    /* what to compute (roles of src/dst are listed at yc_op_kind) */
    yc_op_kind kind;
    /* inputs; unused slots are NULL */
    const yc_tensor *src[YC_OP_MAX_SRC];
    /* outputs; unused slots are NULL */
    const yc_tensor *dst[YC_OP_MAX_DST];
    /* 0: dst[0] = result; 1: dst[0] += result (only for ops marked [acc]) */
    int accumulate;
    /* op parameters; only the member of the op's family is meaningful */
    union {
        /* YC_OP_CONV2D* */
        struct { int kh, kw, stride_h, stride_w, pad_h, pad_w, groups, silu, frozen; } conv;
        /* YC_OP_BN_*; silu (YC_OP_BN_EVAL only): the output is silu of the normalised value, the
         * evaluation graph's BatchNorm + SiLU in one pass.  sync (YC_OP_BN_TRAIN,
         * YC_OP_BN_SILU_TRAIN, YC_OP_BN_BWD, YC_OP_BN_SILU_BWD; NULL: none), SyncBatchNorm as
         * torch.nn.SyncBatchNorm computes it: the op computes its per-channel sums over its own
         * images, calls sync(sync_ctx, ...) once to sum them over the processes
         * (yc_bn_sync_stats_pack and yc_bn_sync_grads_pack below say what it sums), then
         * normalises with the statistics of every process's images (the running estimates too,
         * unbiased over the total count), and in backward computes dx from the summed sums of
         * dy and dy * xhat and the total count; dgamma and dbeta get this process's own sums
         * (the gradient allreduce adds the processes' parts afterwards, as DDP does).  A failed
         * sync is the op's status. */
        struct { float eps, momentum; int silu; yc_bn_sync_fn sync; void *sync_ctx; } bn;
        /* YC_OP_MAXPOOL* */
        struct { int k, stride, pad; } pool;
        /* YC_OP_UPSAMPLE* */
        struct { int factor; } up;
        /* YC_OP_FILL */
        struct { float value; } fill;
        /* YC_OP_SGD */
        struct { float lr, momentum, wd, scale, max_norm; int nesterov; } sgd;
        /* YC_OP_ADAM */
        struct { float lr, beta1, beta2, eps, wd, scale, max_norm; int step, decoupled; } adam;
        /* YC_OP_EMA */
        struct { float decay; } ema;
        /* YC_OP_DROPOUT */
        struct { uint32_t threshold, seed; float scale; } drop;
    } p;
    /* for profiles and messages (e.g. "model.3.conv"); may be NULL */
    const char *name;
} yc_op;

/* YC_OP_DROPOUT's hash of an element: a 32-bit mix (lowbias32, Chris Wellons' constants) of the
 * element's index and then of the seed, the same on every backend (cl/kernels/elementwise.cl
 * repeats it). */
static inline uint32_t yc_dropout_hash(uint32_t seed, uint32_t index)
{
    uint32_t h = index;
    for (int round = 0; round < 2; round++) {
        h ^= h >> 16;
        h *= 0x7feb352dU;
        h ^= h >> 15;
        h *= 0x846ca68bU;
        h ^= h >> 16;
        h ^= round ? 0 : seed * 0x9e3779b9U;
    }
    return h;
}

/* Sets op->p.drop for dropout probability p in [0, 1) and a seed: threshold = min(p * 2^32,
 * 2^32 - 1) and scale = 1 / (1 - p) in float. */
void yc_dropout_params(yc_op *op, double p, uint32_t seed);

/* SyncBatchNorm's two sums over the processes (backend.c), for the backends' BN ops with
 * p.bn.sync set; each calls op->p.bn.sync once, with 1 + 2*C doubles.
 *
 * Forward: in, this process's statistics of each channel c < C over its n values: mean[c] and
 * m2[c], the sum of squared deviations from it; out, in place, the mean and the biased variance
 * over every process's values, and *total their count.  Summed are n, n*mean and
 * m2 + n*mean^2 in double (the variance as E[x^2] - mean^2 in double: its relative error is
 * about 1e-16 * mean^2 / var; torch.nn.SyncBatchNorm merges the gathered means and variances
 * instead, the same within float rounding). */
int yc_bn_sync_stats(const yc_op *op, int C, double n, double *mean, double *m2, double *total);
/* Backward: in, this process's sums of each channel c < C over its n values, sg[c] of the
 * incoming gradient g and sgx[c] of g * (x - mean) (mean: the forward's global one); out, in
 * place, their sums over the processes, and *total the count of every process's values. */
int yc_bn_sync_grads(const yc_op *op, int C, double n, double *sg, double *sgx, double *total);

/* Name of an op kind ("conv2d", "bn_bwd", ...). */
const char *yc_op_kind_name(yc_op_kind kind);

/* Checks that an op's tensors have consistent shapes and the slots its kind needs; used by every
 * backend before exec and by tests.  Returns YC_OK or YC_EFORMAT with a message naming the op. */
int yc_op_check(const yc_op *op);

/* ---------------------------------------------------------------------------------------------
 * Devices.
 * ------------------------------------------------------------------------------------------- */
typedef enum yc_device_kind {
    YC_DEVICE_CPU = 0,
    YC_DEVICE_OPENCL = 1,
} yc_device_kind;

typedef struct yc_device_info {
    /* which backend drives it */
    yc_device_kind kind;
    /* human-readable name ("cpu (OpenMP, 2 threads)", "NVIDIA H100 80GB HBM3") */
    char name[256];
    /* OpenCL platform name and version strings (empty for the CPU backend) */
    char platform[256];
    char version[128];
    /* OpenCL platform and device index (-1 for the CPU backend) */
    int cl_platform, cl_device;
    /* memory the device has, and what is free now (0 when unknown) */
    size_t mem_total, mem_free;
    /* largest single allocation the device accepts */
    size_t max_alloc;
    /* required alignment of buffer offsets passed to ops, in bytes */
    size_t alignment;
    /* can store FP16 (convert on load/store) */
    bool fp16_storage;
    /* YC_OP_CONV2D takes p.conv.silu (else a fused model's graph runs YC_OP_SILU after it) */
    bool conv_silu;
    /* has native half arithmetic (cl_khr_fp16) */
    bool fp16_arith;
    /* is an OpenCL GPU (used by --device auto) */
    bool is_gpu;
    /* number of compute units or threads */
    int compute_units;
} yc_device_info;

/* ---------------------------------------------------------------------------------------------
 * Backends.
 * ------------------------------------------------------------------------------------------- */
typedef struct yc_backend yc_backend;

/* The completion token of an asynchronous copy or marker (yc_backend_i.read_start, marker),
 * defined by each backend; NULL stands for work that has finished already. */
typedef struct yc_event yc_event;
/* Pinned host memory (yc_backend_i.host_alloc), defined by each backend. */
typedef struct yc_host_mem yc_host_mem;

/* A byte range of a buffer (op workspaces). */
typedef struct yc_span {
    yc_buffer *buf;
    size_t offset;
    size_t size;
} yc_span;

/* One detection level of YOLOv5's loss for yc_backend_i.yolo_loss (src/nn/loss.c is the reference). */
typedef struct yc_yolo_loss_level {
    /* the level's raw outputs (batch, na*no, ny, nx) and their gradient, written whole, or NULL
     * for the loss alone (validation) */
    const yc_tensor *head, *grad;
    /* the assignments, as loss.h's yc_target_set holds them (made on the host): n entries of
     * image, anchor, cell row and column, class, box target (4 each) and anchor size (2 each) */
    int n;
    const int *b, *a, *gj, *gi, *cls;
    const float *tbox, *anch;
    /* gradient scales, as src/nn/loss.c computes them: gbox = -bs * box_gain / n,
     * gcls = bs * cls_gain / (n * nc), gobj = bs * obj_gain * balance / (bs * na * ny * nx), bs
     * and n those of the whole batch when this is a micro-batch of it */
    float gbox, gcls, gobj;
} yc_yolo_loss_level;

/* YOLOv5's loss of one batch for yc_backend_i.yolo_loss. */
typedef struct yc_yolo_loss {
    /* images, levels, anchors per level, classes */
    int batch, nl, na, nc;
    /* BCE positive weights, focal gamma, and the smoothed positive and negative class targets */
    float cls_pw, obj_pw, fl_gamma, cp, cn;
    yc_yolo_loss_level level[8];
    /* out, once the work has finished (after the next synchronize): per level l, sums[6 l ..]
     * holds the sums of the entries' box loss (1 - CIoU), of the objectness BCE over every cell
     * and of the entries' class BCE, each as a float-float pair (hi, lo): nl x 3 x 2 floats that
     * must stay valid until then */
    float *sums;
} yc_yolo_loss;

/* Detect's eval decode with the confidence filter, for yc_backend_i.detect_filter (src/eval/nms.c's
 * yc_detect_decode is the reference). */
typedef struct yc_detect_filter {
    /* images, levels, anchors per level, values per anchor (5 + classes) */
    int batch, nl, na, no;
    /* per level: the raw outputs (batch, na*no, ny, nx) and the input pixels per cell */
    const yc_tensor *head[8];
    float stride[8];
    /* anchors in grid units of their level, anchors[(l na + a) 2 + {0: w, 1: h}] */
    const float *anchors;
    /* the rows whose objectness (after the sigmoid) is above conf_thres are kept */
    float conf_thres;
    /* out: room for `cap` rows of `no` floats (cx, cy, w, h, objectness, classes, decoded as
     * yc_detect_decode decodes them) and their ids, image * (rows per image) + the row's index
     * among the image's rows in yc_detect_decode's order; in no particular order */
    size_t cap;
    float *rows;
    uint32_t *ids;
} yc_detect_filter;

struct yc_backend_i {
    /* short name: "cpu" or "opencl" */
    const char *name;
    /* releases the backend (all its buffers must have been freed) */
    void (*free)(yc_backend *be);

    /* allocates `size` bytes; NULL with a message on failure (never more than info.max_alloc) */
    yc_buffer *(*buffer_alloc)(yc_backend *be, size_t size);
    /* frees a buffer (NULL is ignored) */
    void (*buffer_free)(yc_backend *be, yc_buffer *buf);
    /* size in bytes of a buffer */
    size_t (*buffer_size)(yc_backend *be, const yc_buffer *buf);
    /* host -> device: copies `size` bytes to buf at `offset` */
    int (*buffer_write)(yc_backend *be, yc_buffer *buf, size_t offset, const void *src, size_t size);
    /* device -> host: copies `size` bytes from buf at `offset` */
    int (*buffer_read)(yc_backend *be, const yc_buffer *buf, size_t offset, void *dst, size_t size);
    /* the same without waiting: the bytes are in `dst` once the work submitted before has
     * finished, at the latest after the next synchronize (dst must stay valid until then); the
     * CPU backend copies at once */
    int (*buffer_read_async)(yc_backend *be, const yc_buffer *buf, size_t offset, void *dst,
                             size_t size);
    /* host -> device without waiting: ops submitted after it see the bytes; src must stay
     * unchanged until the copy has finished (the next synchronize, or the token of a later
     * read_start or marker); the CPU backend copies at once */
    int (*buffer_write_async)(yc_backend *be, yc_buffer *buf, size_t offset, const void *src,
                              size_t size);
    /* `size` bytes of host memory the device copies to and from directly (OpenCL: a
     * CL_MEM_ALLOC_HOST_PTR buffer, mapped once, which drivers page-lock; the CPU backend: aligned
     * host memory), its address in *ptr until host_free; NULL with a message on failure */
    yc_host_mem *(*host_alloc)(yc_backend *be, size_t size, void **ptr);
    /* frees pinned host memory (NULL is ignored); every copy to or from it must have finished */
    void (*host_free)(yc_backend *be, yc_host_mem *h);
    /* device -> host without waiting, started once every op submitted before it has finished;
     * *done: the copy's token for event_query, event_wait and event_release, or NULL when the
     * copy has finished already (the CPU backend copies at once).  Ops submitted after it do not
     * wait for it (OpenCL: the copy runs on a second, copy queue, after a marker of the queue the
     * ops run on), so they must not write [offset, offset + size) of buf until it has finished
     * (they may write the rest of buf meanwhile); dst (best pinned memory, host_alloc) must stay
     * valid until then */
    int (*read_start)(yc_backend *be, const yc_buffer *buf, size_t offset, void *dst, size_t size,
                      yc_event **done);
    /* a token, as read_start's, of every op submitted so far having finished (NULL on the CPU
     * backend, whose ops finish before they return), without waiting */
    int (*marker)(yc_backend *be, yc_event **done);
    /* *done = whether the token's work has finished, without waiting (NULL: it has); work that
     * failed on the device is an error */
    int (*event_query)(yc_backend *be, yc_event *ev, bool *done);
    /* waits until the token's work has finished (a host wait; NULL returns at once) */
    int (*event_wait)(yc_backend *be, yc_event *ev);
    /* releases a token (NULL is ignored); its work still completes */
    void (*event_release)(yc_backend *be, yc_event *ev);
    /* sets `size` bytes at `offset` to `byte` */
    int (*buffer_memset)(yc_backend *be, yc_buffer *buf, size_t offset, int byte, size_t size);
    /* optional: host address of the buffer's first byte when the device shares host memory
     * (the CPU backend), else NULL */
    void *(*buffer_host_ptr)(yc_backend *be, yc_buffer *buf);

    /* whether exec can run this op (kind, dtypes, parameters), for an op yc_op_check accepts */
    bool (*supports)(yc_backend *be, const yc_op *op);
    /* what supports refuses, in words, for the message of an op it refuses ("FP32 tensors, FP16
     * in activation slots, and groups == 1 only") */
    const char *limits;
    /* scratch bytes exec needs for this op (0 if none); the planner reserves the maximum */
    size_t (*workspace)(yc_backend *be, const yc_op *op);
    /* runs the op, only ever called through yc_backend_exec, which has checked it first (the
     * slots its kind uses set, shapes, yc_op_check; supports; every tensor inside its buffer and
     * aligned to its element size; `ws` holds workspace(op) bytes inside its buffer, at a
     * float-aligned offset): the backend only computes.  May be asynchronous. */
    int (*exec)(yc_backend *be, const yc_op *op, yc_span ws);
    /* waits until all submitted work has finished */
    int (*synchronize)(yc_backend *be);
    /* optional: YOLOv5's loss of a batch computed where the heads are, its head gradients
     * written and its sums read back without waiting (NULL: the caller computes the loss on the
     * host, from the heads in place or copied) */
    int (*yolo_loss)(yc_backend *be, const yc_yolo_loss *l);
    /* optional: a batch of uint8 CHW images (packed, dst->c*h*w bytes each) into the FP32 or
     * FP16 tensor dst, each value divided by 255 on the device; returns without waiting and src
     * may be reused at once (NULL: the caller converts on the host and writes floats) */
    int (*write_u8_scaled)(yc_backend *be, const yc_tensor *dst, const uint8_t *src);
    /* optional: the rows of a batch's heads that pass the confidence filter, decoded where the
     * heads are and only those read back (NULL: the caller reads the heads and decodes them on
     * the host).  Waits for the device.  *n: the rows kept, more than f->cap when they did not
     * fit (then none is in f->rows and the caller decodes the heads itself) */
    int (*detect_filter)(yc_backend *be, const yc_detect_filter *f, size_t *n);
};

/* What a backend has done since it was made, for benchmarks (yolocl bench --json): kernel
 * launches (the CPU backend counts the ops it ran), host waits (the host blocked until the device
 * caught up: clFinish, blocking reads, writes and maps, clWaitForEvents), and bytes copied between
 * host and device memory (none on the CPU backend, whose buffers are host memory). */
typedef struct yc_backend_counters {
    uint64_t launches, host_waits, bytes_to_device, bytes_from_device;
} yc_backend_counters;

struct yc_backend {
    /* the implementation */
    const struct yc_backend_i *iface;
    /* the device this backend drives */
    yc_device_info info;
    /* implementation data */
    void *ctx;
    /* counted by the implementation */
    yc_backend_counters counters;
};

/* The gradient-clipping coefficient of the optimizer ops given a sum of squares (backend.h,
 * YC_OP_SGD): min(1, max_norm / (sqrtf(sumsq) + 1e-6f)) in float, as PyTorch computes it and as
 * every backend must; 0 when sumsq is not finite. */
static inline float yc_clip_scale(float sumsq, float max_norm)
{
    if (!isfinite(sumsq))
        return 0.0f;
    float coef = max_norm / (sqrtf(sumsq) + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

/* Creates the CPU backend (OpenMP).  `threads` <= 0 means the default (physical cores). */
int yc_backend_cpu_new(yc_backend **out, int threads);

/* Convenience wrappers over the interface. */
static inline yc_buffer *yc_buffer_alloc(yc_backend *be, size_t size) { return be->iface->buffer_alloc(be, size); }
static inline void yc_buffer_free(yc_backend *be, yc_buffer *b) { be->iface->buffer_free(be, b); }

static inline void yc_backend_free(yc_backend *be) { if (be) be->iface->free(be); }

/* Runs an op on a backend: checks it (yc_op_check, the backend's supports, every tensor placed
 * inside its buffer, the workspace `ws` large enough and float-aligned: YC_EFORMAT or
 * YC_EUNSUPPORTED with a message naming the op and what is wrong), then hands it to the backend's
 * exec; a failure there is reported with the op's kind, name and the device. */
int yc_backend_exec(yc_backend *be, const yc_op *op, yc_span ws);

/* Reads a tensor into a dense host float array of yc_tensor_elems(t) values (FP16 converted). */
int yc_tensor_get_f32(yc_backend *be, const yc_tensor *t, float *dst);
/* Writes a dense host float array into a tensor (FP16 converted). */
int yc_tensor_set_f32(yc_backend *be, const yc_tensor *t, const float *src);
/* Writes a batch of uint8 pixels (as many as the tensor has elements, in its dense order) into
 * an FP32 or FP16 tensor, each divided by 255: in place where the backend's memory is the host's,
 * on the device where the backend converts uint8 itself (a quarter of float32's bytes moved),
 * else converted on the host and written as floats. */
int yc_tensor_set_u8_scaled(yc_backend *be, const yc_tensor *t, const uint8_t *src);

#endif
