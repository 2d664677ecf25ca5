/* Internals of the OpenCL backend, shared by cl_backend.c (the interface), cl_program.c (programs,
 * kernels and their disk cache), cl_launch.c (kernel arguments and launches), cl_blast.c
 * (CLBlast), cl_conv.c (convolutions) and cl_ops.c (every other op).  Not for code outside cl/. */
#ifndef YC_CL_INTERNAL_H
#define YC_CL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif

#include <CL/cl.h>
#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "cl_backend.h"
#include "cl_devices.h"

/* Device memory: one cl_mem. */
struct yc_buffer {
    /* the allocation */
    cl_mem mem;
    /* bytes requested */
    size_t size;
};

/* A completion token (yc_event, backend.h): the event of a copy or marker. */
struct yc_event {
    cl_event ev;
};

/* Pinned host memory (yc_host_mem, backend.h): a CL_MEM_ALLOC_HOST_PTR buffer mapped for reading
 * and writing as long as it lives. */
struct yc_host_mem {
    cl_mem mem;
    void *map;
};

/* The programs: one per file of cl/kernels/ (common.cl is prepended to each). */
typedef enum yc_cl_prog {
    YC_CL_PROG_ELEMENTWISE,
    YC_CL_PROG_BATCHNORM,
    YC_CL_PROG_POOL,
    YC_CL_PROG_CONV,
    YC_CL_PROG_OPTIM,
    YC_CL_PROG_LOSS,
    YC_CL_PROG_DETECT,
    YC_CL_NPROGS
} yc_cl_prog;

/* The kernels, each in one program (table in cl_program.c). */
typedef enum yc_cl_kid {
    YC_K_SILU_FWD,
    YC_K_SILU_BWD,
    YC_K_ADD,
    YC_K_COPY,
    YC_K_FILL,
    YC_K_DROPOUT,
    YC_K_U8_SCALED,
    YC_K_BN_PART,
    YC_K_BN_TRAIN,
    YC_K_BN_SILU_APPLY,
    YC_K_BN_EVAL,
    YC_K_BN_BWD_PART,
    YC_K_BN_BWD,
    YC_K_MAXPOOL_FWD,
    YC_K_MAXPOOL_ARGMAX,
    YC_K_MAXPOOL_BWD,
    YC_K_UPSAMPLE_FWD,
    YC_K_UPSAMPLE_BWD,
    YC_K_AVGPOOL_FWD,
    YC_K_AVGPOOL_BWD,
    YC_K_IM2COL,
    YC_K_COL2IM,
    YC_K_BIAS_STORE,
    YC_K_BIAS_GRAD,
    YC_K_SGD,
    YC_K_ADAM,
    YC_K_EMA,
    YC_K_SUMSQ_PART,
    YC_K_SUMSQ_TOTAL,
    YC_K_LOSS_CELLS,
    YC_K_LOSS_OBJ,
    YC_K_LOSS_SUMS,
    YC_K_DETECT_FILTER,
    YC_K_COUNT
} yc_cl_kid;

/* Bytes the context's reduction scratch starts with (it grows to what an op needs): the partial
 * sums of up to 4096 work-groups. */
#define YC_CL_SCRATCH (4096 * 8)

/* Largest work-group the kernels are launched with (a power of two; smaller where the device or
 * the kernel allows less).  Reductions add in an order fixed by it. */
#define YC_CL_MAX_LOCAL 256

/* The buffers of the loss (cl_loss.c): the assignments staged on the host and their device copies,
 * the objectness targets of one level, the entries' losses and the partial and final sums; each
 * grows to the largest batch seen. */
typedef struct yc_cl_loss_state {
    cl_mem ent_i, ent_f, cell_first, ranges, tobj, ebox, ecls, part;
    size_t ent_i_cap, ent_f_cap, cell_first_cap, ranges_cap, tobj_cap, ebox_cap, ecls_cap, part_cap;
    int *h_ent_i;
    float *h_ent_f;
    int *h_cell_first;
    int h_ranges[4 * 8];
    size_t h_ent_i_cap, h_ent_f_cap, h_cell_first_cap;
    /* sort keys of one level */
    struct entry_key *keys;
    size_t keys_cap;
    /* what the staging holds */
    size_t staged_entries, staged_cells;
    /* the event of the staging's last write and the synchronize count it was made at */
    cl_event written;
    unsigned long written_at;
} yc_cl_loss_state;

/* The buffers of the detection filter (cl_detect.c): the counter of kept rows, the anchor grids
 * (and their host copy, which must outlive the non-blocking write), the rows and their ids; each
 * grows to the largest request seen. */
typedef struct yc_cl_detect_state {
    cl_mem count, anch, rows, ids;
    size_t count_cap, anch_cap, rows_cap, ids_cap;
    float h_anch[8 * 16 * 2];
} yc_cl_detect_state;

/* One slot of the input upload (cl_upload.c): pinned host memory (CL_MEM_ALLOC_HOST_PTR, mapped
 * once), its device copy, the event of the last copy and the synchronize count it was made at. */
typedef struct yc_cl_upload_slot {
    cl_mem pinned, dev;
    void *map;
    size_t cap;
    cl_event copied;
    unsigned long copied_at;
} yc_cl_upload_slot;

/* The tiles the implicit-GEMM convolutions can be built with (igemm.cl's TM x TN output tile,
 * TK reduction steps per local-memory load); tile 0 is the default. */
typedef struct yc_cl_tile {
    int tm, tn, tk;
} yc_cl_tile;
#define YC_CL_NTILES 7
extern const yc_cl_tile yc_cl_tiles[YC_CL_NTILES];
/* The work-group size of every igemm.cl GEMM kernel (16 x 16 work items, each a TM/16 x TN/16
 * block of the tile). */
#define YC_CL_IGEMM_WG 256

/* The kernels of igemm.cl, in each tile's program. */
typedef enum yc_cl_igemm_kid {
    YC_IG_FWD,
    YC_IG_BWD_DATA,
    YC_IG_BWD_FILTER,
    YC_IG_REDUCE,
    YC_IG_NKERNELS
} yc_cl_igemm_kid;

/* A convolution pass of one shape and storage, as the tiles file names it (cl_tune.c). */
typedef struct yc_cl_conv_key {
    int pass, n, c, h, w, k, r, s, sh, sw, ph, pw, half_in, half_out;
} yc_cl_conv_key;

/* One tuned choice: the pass, the tile that ran it fastest and its time. */
typedef struct yc_cl_tuned {
    yc_cl_conv_key key;
    int tile;
    double ms;
} yc_cl_tuned;

/* The same pass, shape and storage. */
bool yc_cl_conv_key_equal(const yc_cl_conv_key *a, const yc_cl_conv_key *b);

/* The backend's state (yc_backend.ctx). */
typedef struct yc_cl_ctx {
    /* the device, its description (names and driver version: the program cache key) */
    cl_platform_id platform;
    cl_device_id device;
    yc_cl_device_desc desc;
    /* context and in-order queue */
    cl_context context;
    cl_command_queue queue;
    /* the second, in-order queue of the reads that overlap the ops (cl_copy.c; made on first
     * use, NULL until then) */
    cl_command_queue copy_queue;
    /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes (sub-buffer origins) */
    size_t base_align;
    /* build options of every program */
    char options[256];
    /* programs built so far (NULL until an op needs one) */
    cl_program progs[YC_CL_NPROGS];
    /* kernels created so far, and the local size each is launched with */
    cl_kernel kernels[YC_K_COUNT];
    size_t local[YC_K_COUNT];
    /* igemm.cl built per tile (on first use) and its kernels */
    cl_program igemm_progs[YC_CL_NTILES];
    cl_kernel igemm_kernels[YC_CL_NTILES][YC_IG_NKERNELS];
    size_t igemm_local[YC_CL_NTILES][YC_IG_NKERNELS];
    /* the tuned tiles (from the tuning cache, or being measured), and a tile forced on every
     * convolution (-1: none; the tuner's) */
    yc_cl_tuned *tuned;
    int ntuned;
    int force_tile;
    /* what the program cache did */
    yc_cl_program_stats stats;
    /* convolutions through im2col + CLBlast (YOLOCL_CL_CONV=clblast) instead of the implicit
     * GEMMs of igemm.cl */
    bool conv_clblast;
    /* the backend's counters (yc_backend.counters) */
    yc_backend_counters *count;
    /* scratch of the two-stage reductions (made on first use, at least YC_CL_SCRATCH bytes):
     * ops on the in-order queue use it one after the other */
    cl_mem scratch;
    size_t scratch_size;
    /* CLBlast's temporary buffer (YOLOCL_CL_CONV=clblast), grown to the largest an op needs */
    cl_mem blast_temp;
    size_t blast_temp_size;
    /* the loss's buffers */
    yc_cl_loss_state loss;
    /* the detection filter's buffers */
    yc_cl_detect_state detect;
    /* the input upload's two slots, used in turn */
    yc_cl_upload_slot upload[2];
    int upload_next;
    /* the times the host has waited for the whole queue (clFinish, blocking reads and writes) */
    unsigned long syncs;
} yc_cl_ctx;

/* ---- cl_memfree.c ------------------------------------------------------------------------- */

/* Free memory of a described device in bytes, 0 when unknown (see cl_memfree.c); `ext` is its
 * CL_DEVICE_EXTENSIONS. */
size_t yc_cl_free_memory(cl_device_id dev, const yc_cl_device_desc *d, const char *ext);

/* Records "opencl: CALL: NAME (code)" and returns YC_EDEVICE. */
int yc_cl_fail(const char *call, cl_int err);

/* ---- cl_program.c ------------------------------------------------------------------------- */

/* The kernel `k`, building (or loading from the disk cache) its program on first use; its launch
 * local size in *local. */
int yc_cl_kernel(yc_cl_ctx *c, yc_cl_kid k, cl_kernel *out, size_t *local);
/* The kernel's name in its .cl file. */
const char *yc_cl_kernel_name(yc_cl_kid k);
/* The name of an igemm.cl kernel. */
const char *yc_cl_igemm_kernel_name(yc_cl_igemm_kid which);
/* Kernel `which` of igemm.cl built with tile `tile` (its program built or loaded on first use),
 * and its local size. */
int yc_cl_igemm_kernel(yc_cl_ctx *c, int tile, yc_cl_igemm_kid which, cl_kernel *out, size_t *local);
/* Releases the kernels and programs. */
void yc_cl_programs_release(yc_cl_ctx *c);
/* The 128-bit hash (32 hex digits) of a program's source (common.cl and `file`, as it is built),
 * and of a text. */
int yc_cl_source_hash(const char *file, char out[33]);
void yc_cl_hash_text(const char *text, char out[33]);

/* ---- cl_tune.c ---------------------------------------------------------------------------- */

/* Loads the tuning cache of the device, if there is one (at backend creation). */
void yc_cl_tune_load(yc_cl_ctx *c);
/* The tuning cache's path for the context's device (heap), or NULL. */
char *yc_cl_tune_path_of(yc_cl_ctx *c);
/* Build options for a device: "-cl-std=CL1.2", plus correctly rounded division and sqrt where the
 * device has them. */
void yc_cl_build_options(cl_device_id dev, char *buf, size_t len);

/* ---- cl_launch.c -------------------------------------------------------------------------- */

/* The arguments of one kernel launch, set in order; the first failure is kept and reported by
 * yc_cl_run. */
typedef struct yc_cl_args {
    yc_cl_ctx *c;
    /* the kernel's name, for messages */
    const char *name;
    cl_kernel k;
    size_t local;
    /* next argument index */
    cl_uint next;
    /* first failing clSetKernelArg status and its index (CL_SUCCESS when none) */
    cl_int err;
    cl_uint bad;
} yc_cl_args;

/* Starts the arguments of kernel `kid` (builds its program when needed). */
int yc_cl_begin(yc_cl_ctx *c, yc_cl_kid kid, yc_cl_args *a);
/* The same for kernel `which` of igemm.cl built with tile `tile`. */
int yc_cl_begin_igemm(yc_cl_ctx *c, int tile, yc_cl_igemm_kid which, yc_cl_args *a);
void yc_cl_arg_mem(yc_cl_args *a, cl_mem m);
void yc_cl_arg_ulong(yc_cl_args *a, unsigned long long v);
void yc_cl_arg_uint(yc_cl_args *a, unsigned v);
void yc_cl_arg_int(yc_cl_args *a, int v);
void yc_cl_arg_float(yc_cl_args *a, float v);
/* local memory of `bytes` */
void yc_cl_arg_local(yc_cl_args *a, size_t bytes);
/* an activation: buffer, byte offset, elements between images, half flag (TENSOR in common.cl) */
void yc_cl_arg_tensor(yc_cl_args *a, const yc_tensor *t);
/* a dense FP32 array: buffer and byte offset (PARAM in common.cl) */
void yc_cl_arg_param(yc_cl_args *a, const yc_tensor *t);
/* a buffer and byte offset (PARAM in common.cl) */
void yc_cl_arg_at(yc_cl_args *a, cl_mem m, size_t offset);
/* Enqueues the kernel over `global` work items in `dims` (1 to 3) dimensions: dimension 0 is
 * rounded up to the local size (the kernels check bounds), the others use local size 1.  With
 * `groups` set, global[0] is a number of work-groups of the local size instead. */
int yc_cl_run(yc_cl_args *a, cl_uint dims, const size_t *global, bool groups);

/* ---- cl_blast.c --------------------------------------------------------------------------- */

/* Row-major SGEMM C = alpha * op(A) * op(B) + beta * C (offsets and leading dimensions in
 * elements), with `temp` as CLBlast's temporary buffer (NULL when temp_size says none). */
typedef struct yc_cl_gemm {
    bool ta, tb;
    size_t m, n, k;
    float alpha, beta;
    cl_mem a, b, c;
    size_t a_off, lda, b_off, ldb, c_off, ldc;
} yc_cl_gemm;
/* Bytes of temporary buffer CLBlast needs for `g` (its offsets are used: nonzero offsets give the
 * largest size). */
int yc_cl_gemm_temp_size(yc_cl_ctx *c, const yc_cl_gemm *g, size_t *bytes);
/* Runs `g` on the queue with `temp` (at least yc_cl_gemm_temp_size(g) bytes, at offset 0), or with
 * no temporary buffer (NULL) when that size is 0. */
int yc_cl_gemm_run(yc_cl_ctx *c, const yc_cl_gemm *g, cl_mem temp);
/* Drops CLBlast's compiled kernels (before the context goes). */
void yc_cl_blast_release(void);

/* ---- cl_conv.c ---------------------------------------------------------------------------- */

/* Workspace bytes of a convolution op (with the tile it will run with). */
int yc_cl_conv_workspace(yc_cl_ctx *c, const yc_op *op, size_t *bytes);
/* The most workspace a convolution op needs with any tile (the tuner's). */
size_t yc_cl_conv_workspace_max(yc_cl_ctx *c, const yc_op *op);
/* 0 forward, 1 backward-data, 2 backward-filter. */
int yc_cl_conv_pass(const yc_op *op);
/* Local memory of tile t's GEMM kernels (their A and B blocks). */
size_t yc_cl_igemm_local_bytes(int t);
/* A convolution op's tuning key (pass, shape, storage), as the tiles file holds it. */
yc_cl_conv_key yc_cl_conv_key_of(const yc_op *op);
/* YC_OP_CONV2D, YC_OP_CONV2D_BWD_DATA, YC_OP_CONV2D_BWD_FILTER (op checked and placed). */
int yc_cl_conv(yc_cl_ctx *c, const yc_op *op, yc_span ws);

/* ---- cl_loss.c ---------------------------------------------------------------------------- */

/* yc_backend_i.yolo_loss. */
int yc_cl_yolo_loss(yc_cl_ctx *c, const yc_yolo_loss *l);
/* Releases the loss's buffers. */
void yc_cl_loss_release(yc_cl_ctx *c);

/* ---- cl_detect.c -------------------------------------------------------------------------- */

/* yc_backend_i.detect_filter. */
int yc_cl_detect_filter(yc_cl_ctx *c, const yc_detect_filter *f, size_t *n);
/* Releases the detection filter's buffers. */
void yc_cl_detect_release(yc_cl_ctx *c);

/* ---- cl_upload.c -------------------------------------------------------------------------- */

/* yc_backend_i.write_u8_scaled. */
int yc_cl_write_u8_scaled(yc_cl_ctx *c, const yc_tensor *dst, const uint8_t *src);
/* Releases the upload slots. */
void yc_cl_upload_release(yc_cl_ctx *c);

/* ---- cl_copy.c ---------------------------------------------------------------------------- */

/* yc_backend_i.buffer_write_async, host_alloc, host_free, read_start, marker, event_query,
 * event_wait and event_release (see backend.h). */
int yc_cl_write_async(yc_cl_ctx *c, yc_buffer *buf, size_t offset, const void *src, size_t size);
yc_host_mem *yc_cl_host_alloc(yc_cl_ctx *c, size_t size, void **ptr);
void yc_cl_host_free(yc_cl_ctx *c, yc_host_mem *h);
int yc_cl_read_start(yc_cl_ctx *c, const yc_buffer *buf, size_t offset, void *dst, size_t size,
                     yc_event **done);
int yc_cl_marker(yc_cl_ctx *c, yc_event **done);
int yc_cl_event_query(yc_cl_ctx *c, yc_event *ev, bool *done);
int yc_cl_event_wait(yc_cl_ctx *c, yc_event *ev);
void yc_cl_event_release(yc_cl_ctx *c, yc_event *ev);

/* ---- cl_ops.c ----------------------------------------------------------------------------- */

/* Every other op (checked and placed); `ws` holds yc_cl_op_workspace(op) bytes. */
int yc_cl_op(yc_cl_ctx *c, const yc_op *op, yc_span ws);
/* The workspace an op other than a convolution needs: MAXPOOL_BWD's window maxima (an int per
 * pooled element); 0 for the rest. */
size_t yc_cl_op_workspace(const yc_op *op);

#endif
