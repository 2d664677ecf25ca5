/* The OpenCL backend: the backend interface (backend.h) on any OpenCL 1.2 device, through our
 * kernels (the .cl files of cl/kernels/, embedded at build time) and CLBlast's SGEMM.
 *
 * One context and one in-order queue per backend; buffers are cl_mem (no host pointer); tensors
 * are (cl_mem, byte offset) pairs handed to kernels as arguments, never sub-buffers, so offsets
 * need only be element-aligned.  exec enqueues and returns; synchronize waits (clFinish).
 *
 * Programs are built on first use per backend and cached on disk (see cl_program.c):
 *   YOLOCL_CL_KERNELS=DIR  read the kernel sources from DIR/<file>.cl instead of the embedded copy
 *   YOLOCL_CL_CACHE=0      no disk cache
 *   cache directory        $XDG_CACHE_HOME/yolocl/cl, else $HOME/.cache/yolocl/cl
 *
 * Like cl_devices.h, this header needs no OpenCL headers; the functions exist only in builds with
 * YC_HAVE_OPENCL. */
#ifndef YC_CL_BACKEND_H
#define YC_CL_BACKEND_H

#include "backend.h"

/* Creates the backend of OpenCL device `index` in the global numbering of yc_cl_list_devices
 * ("opencl:N").  YC_EUNSUPPORTED when there is no such device (the message lists the devices),
 * YC_EDEVICE when the device exists but a context or queue cannot be made. */
int yc_backend_opencl_new(yc_backend **out, int index);

/* What the program cache did in one backend. */
typedef struct yc_cl_program_stats {
    /* programs compiled from source */
    int built;
    /* programs loaded from a cache file */
    int loaded;
    /* cache files written */
    int stored;
    /* cache files found unusable (corrupt, truncated, rejected by the driver) and rebuilt */
    int rejected;
} yc_cl_program_stats;

/* The counters of an OpenCL backend (zeros for any other backend). */
yc_cl_program_stats yc_cl_backend_stats(const yc_backend *be);

/* The directory of the program cache (heap string), or NULL when YOLOCL_CL_CACHE=0 turns it off
 * or no directory can be named (neither XDG_CACHE_HOME nor HOME set). */
char *yc_cl_cache_dir(void);

/* The file the convolution tiles tuned for the device of an OpenCL backend are kept in (heap
 * string: <cache dir>/tiles-<hash of device, driver and igemm.cl>.txt), or NULL when there is no
 * cache directory.  Each backend reads it when it opens, if it exists. */
char *yc_cl_tune_path(yc_backend *be);

/* yolocl tune: times every tile of the implicit GEMMs on each distinct convolution op of `ops`
 * (forward, backward-data, backward-filter; their tensors placed on `be`'s buffers: the values do
 * not matter), `iters` runs each after one untimed run, keeps the fastest per pass, shape and
 * storage for this backend, prints a line per op, and writes its whole table (the choices it
 * loaded for other passes and those just made) to `path` (atomically; NULL: nowhere).  A tile the
 * device cannot build or launch is passed over.  *tuned: the passes tuned. */
int yc_cl_tune(yc_backend *be, const yc_op *const *ops, int nops, int iters, const char *path,
               int *tuned);

/* The tiles the implicit-GEMM convolutions can run with (tile 0 is the default): how many, and
 * tile t's output tile (tm x tn) and reduction step (tk). */
int yc_cl_tile_count(void);
void yc_cl_tile_size(int t, int *tm, int *tn, int *tk);
/* The tile a convolution op would run with on this backend: the forced one, the tuned one of its
 * pass, shape and storage, else the tuned one of the same pass, filter and storage at the nearest
 * number of input pixels (N*H*W), else 0. */
int yc_cl_conv_tile_of(yc_backend *be, const yc_op *op);
/* Whether a device with these limits (CL_DEVICE_MAX_WORK_GROUP_SIZE, CL_DEVICE_LOCAL_MEM_SIZE)
 * can run the implicit-GEMM convolutions' default tile; a backend on one that cannot computes its
 * convolutions with CLBlast (as YOLOCL_CL_CONV=clblast asks) and says so when it opens. */
bool yc_cl_igemm_admits(size_t max_work_group, size_t local_mem);
/* Makes every convolution run with tile t (-1: back to the tuned or default ones); for the tests
 * of each tile. */
void yc_cl_force_tile(yc_backend *be, int t);

/* Name of a CLBlast status code ("CLBlastInsufficientMemoryTemp"), OpenCL's name for the codes
 * CLBlast shares with OpenCL, "unknown CLBlast status" otherwise. */
const char *yc_clblast_status_name(int status);

#endif
