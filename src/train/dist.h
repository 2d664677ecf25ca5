/* Data-parallel training across processes: the few MPI operations yolocl needs (issue 28).
 *
 * One process state: yc_dist_init once, early in main (before any thread starts), and
 * yc_dist_finalize before exit.  MPI is initialised (MPI_Init_thread, MPI_THREAD_FUNNELED: only
 * the main thread calls MPI) only when yolocl is built with MPI (HAVE_MPI) and was started by an
 * MPI launcher (mpirun, mpiexec, srun: their environment says so); otherwise the process is rank
 * 0 of 1 and every operation below is a no-op that returns YC_OK, so single-process runs behave
 * exactly as before.
 *
 * Every function returns a status (log.h) with a message naming the operation that failed;
 * MPI errors are returned, not fatal (MPI_ERRORS_RETURN on the world communicator). */
#ifndef YC_DIST_H
#define YC_DIST_H

#include <stdbool.h>
#include <stddef.h>

#include "graph.h"
#include "model.h"

/* The environment variable that bounds, in seconds, how long one collective operation waits for
 * the other ranks (default YC_DIST_TIMEOUT_DEFAULT, 3 hours, the timeout YOLOv5 gives its process
 * group: rank 0 may validate that long while the others wait); past it the operation fails and
 * the run ends on every rank instead of hanging. */
#define YC_DIST_TIMEOUT_ENV "YOLOCL_DIST_TIMEOUT"
#define YC_DIST_TIMEOUT_DEFAULT 10800.0

/* Initialises MPI when launched under an MPI launcher (see above).  A launch with several
 * processes of a yolocl built without MPI is an error (every process would train alone). */
int yc_dist_init(int *argc, char ***argv);
/* Finalizes MPI if yc_dist_init initialised it. */
void yc_dist_finalize(void);

/* Whether yc_dist_init initialised MPI (the process must not re-execute itself then). */
bool yc_dist_active(void);
/* Whether this build has MPI. */
bool yc_dist_built(void);
/* The MPI library's version line ("Open MPI v4.1.4, ..."), or NULL without MPI. */
const char *yc_dist_library(void);

/* This process's rank and the number of ranks (0 and 1 without MPI). */
int yc_dist_rank(void);
int yc_dist_size(void);
/* Rank among the ranks of this machine (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) and their
 * count (0 and 1 without MPI). */
int yc_dist_local_rank(void);
int yc_dist_local_size(void);

/* The device spec of local rank `local` of the `local_size` ranks of a machine, into out:
 * "opencl:A,B,..." lists one device per local rank (the local-th; an error when the list is
 * shorter than local_size), "opencl" takes opencl:<local> (the devices as `yolocl devices` numbers
 * them), and so does "auto" (or none) when several ranks share the machine and OpenCL has a GPU
 * (auto_gpu); any other spec is every rank's. */
int yc_dist_rank_device(const char *spec, bool auto_gpu, int local, int local_size, char *out,
                        size_t len);

/* In place, on every rank: buf[i] = the sum over ranks of buf[i]. */
int yc_dist_allreduce_sum_f32(float *buf, size_t n);
/* The gradient allreduces (yc_dist_allreduce_grads) of this process so far: how many, the
 * bytes of gradients they summed and the seconds they took, waiting for slower ranks and the
 * device's copies included (for the run's summary and bench/mpi_bench.sh). */
void yc_dist_stats(long *count, size_t *bytes, double *seconds);
/* SyncBatchNorm's sum (yc_bn_sync_fn, backend.h; ctx unused): v[i] = the sum over the ranks of
 * v[i], in place, for the n doubles of one BatchNorm op, waiting as yc_dist_bcast does.  Set as
 * yc_graph_options.bn_sync by `yolocl train --sync-bn` under several ranks. */
int yc_dist_bn_sync(void *ctx, double *v, size_t n);
/* In place, on every rank: *v = the largest *v of the ranks (a flag any rank may raise). */
int yc_dist_allreduce_max_int(int *v);
/* bytes of buf from rank `root` to every rank.  Ranks that arrive early wait by polling with
 * short sleeps, so that they leave the CPU to a root that is still computing (validation). */
int yc_dist_bcast(void *buf, size_t bytes, int root);
/* Waits until every rank arrives (polling as yc_dist_bcast). */
int yc_dist_barrier(void);
/* Prints msg (with the rank) and ends every rank with exit status code (MPI_Abort); without MPI,
 * prints msg and exits. */
_Noreturn void yc_dist_abort(int code, const char *msg);

/* Copies the model's parameters, running statistics and anchors from rank 0 to every rank, as
 * PyTorch's DDP does when it wraps a model: every rank starts from rank 0's weights. */
int yc_dist_bcast_model(yc_model *m);

/* Compares a checksum of the model's parameters with rank 0's: YC_OK when every rank holds
 * the same bits, else YC_ERR on every rank, naming `epoch` and the ranks that differ. */
int yc_dist_check_weights(yc_model *m, int epoch);

/* Gradients summed while backward still runs (yc_dist_overlap_arm, yc_dist_grads_ready): the
 * arena is cut at parameter boundaries into buckets of YC_DIST_BUCKET_ENV MiB (default
 * YC_DIST_BUCKET_DEFAULT), each summed by its own MPI_Iallreduce as soon as every parameter in it
 * is final; YC_DIST_OVERLAP_ENV=0 turns it off (one allreduce after backward, for comparison). */
#define YC_DIST_BUCKET_ENV "YOLOCL_DIST_BUCKET_MB"
#define YC_DIST_BUCKET_DEFAULT 2.0
#define YC_DIST_OVERLAP_ENV "YOLOCL_DIST_OVERLAP"

/* Says whether the next backward of m is followed by yc_dist_allreduce_grads (step: an optimizer
 * step follows it): then its buckets are summed while that backward runs, through
 * yc_dist_grads_ready: on a backend whose gradient arena the host addresses (CPU) in place; on a
 * device (OpenCL) each bucket read into its own pinned host buffer (yc_backend_i.host_alloc,
 * made on the first armed backward of m and kept until yc_dist_overlap_release) as soon as it is
 * final, without waiting (read_start), summed there once its read has finished and written back
 * by yc_dist_allreduce_grads.  Otherwise (not a step, one rank, the environment variable 0)
 * yc_dist_allreduce_grads sums the arena in one piece afterwards. */
int yc_dist_overlap_arm(yc_model *m, bool step);
/* Whether the last yc_dist_overlap_arm armed the next backward. */
bool yc_dist_overlap_armed(void);
/* yc_grads_ready_fn (graph.h; ctx unused), set as yc_graph_options.grads_ready of the training
 * graphs under several ranks: in an armed backward, starts the sum of every bucket whose last
 * parameter became final and lets MPI progress the ones in flight. */
int yc_dist_grads_ready(void *ctx, const int *params, int n);
/* What the buckets did over the process so far (yc_dist_overlap_counts_get). */
typedef struct yc_dist_overlap_counts {
    /* armed backwards whose buckets yc_dist_allreduce_grads finished */
    long steps;
    /* buckets whose sum started before the backward ended (from the hook; on a device also in
     * yc_dist_allreduce_grads while the device still ran the backward's ops) and after it (on
     * the CPU: only when yc_dist_allreduce_grads came, their parameters' last op had not told
     * the hook; on a device: its backward had finished first) */
    long early, late;
    /* on a device: bucket reads started by the hook, and by yc_dist_allreduce_grads (parameters
     * the hook never reported final) */
    long reads_early, reads_late;
    /* on a device: times yc_dist_allreduce_grads blocked on a bucket's read (event_wait), when no
     * sum was in flight to progress meanwhile (else it polls) */
    long read_waits;
} yc_dist_overlap_counts;
/* The counts so far (for the run's summary and bench/mpi_overlap). */
void yc_dist_overlap_counts_get(yc_dist_overlap_counts *c);
/* Frees the buckets (a device's pinned host buffers): call it before the model or its backend
 * is freed (yc_dist_finalize frees them too, so the backend must then still be open).  The next
 * armed backward cuts them again. */
void yc_dist_overlap_release(void);

/* Sums the model's gradient arena over the ranks, in place, before an optimizer step.  A device
 * whose memory the host cannot address (OpenCL) is read to a host buffer, reduced, and written
 * back; on the CPU backend the arena is reduced where it lies.  After an armed backward it
 * finishes the buckets instead: on a device it starts each bucket's sum as its read lands
 * (polling the reads and the sums in flight, blocking on a read only when no sum is in flight)
 * and enqueues each bucket's write back from its pinned buffer as its sum finishes, without
 * waiting: ops submitted after it see the sums.  The seconds yc_dist_stats counts are then those the sum adds
 * after backward's submission, not the whole sum's. */
int yc_dist_allreduce_grads(yc_model *m);

#endif
