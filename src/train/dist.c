/* Data-parallel training across processes (dist.h). */
#include <config.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "dist.h"
#include "log.h"

static struct {
    bool mpi; /* MPI_Init_thread was called by yc_dist_init */
    int rank, size, local_rank, local_size;
    char library[256];
    /* the host copy of an OpenCL device's gradient arena */
    float *host;
    size_t host_bytes;
    /* seconds a collective may wait for the other ranks before the run is ended */
    double timeout;
    /* the gradient allreduces so far: how many, their bytes and seconds (yc_dist_stats) */
    long grad_reduces;
    size_t grad_bytes;
    double grad_seconds;
} g = {false, 0, 1, 0, 1, "", NULL, 0, YC_DIST_TIMEOUT_DEFAULT, 0, 0, 0.0};

/* The number of processes an MPI launcher says it started, or 0 when none did: Open MPI's
 * mpirun (OMPI_COMM_WORLD_SIZE), MPICH's hydra and Intel MPI (PMI_SIZE), PMIx launchers
 * (PMIX_RANK, size unknown: 1), Slurm's srun (SLURM_NTASKS with SLURM_PROCID). */
static int launcher_size(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && atoi(v) > 0)
            return atoi(v);
    }
    if (getenv("PMIX_RANK"))
        return 1;
    const char *s = getenv("SLURM_NTASKS");
    if (s && getenv("SLURM_PROCID") && atoi(s) > 0)
        return atoi(s);
    return 0;
}

bool yc_dist_active(void)
{
    return g.mpi;
}

bool yc_dist_built(void)
{
#ifdef HAVE_MPI
    return true;
#else
    return false;
#endif
}

const char *yc_dist_library(void)
{
#ifdef HAVE_MPI
    if (!g.library[0]) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        if (MPI_Get_library_version(v, &len) != MPI_SUCCESS)
            return "MPI (library version unknown)";
        v[len < (int)sizeof v ? len : (int)sizeof v - 1] = '\0';
        char *nl = strchr(v, '\n');
        if (nl)
            *nl = '\0';
        snprintf(g.library, sizeof g.library, "%s", v);
    }
    return g.library;
#else
    return NULL;
#endif
}

int yc_dist_rank(void) { return g.rank; }
int yc_dist_size(void) { return g.size; }
int yc_dist_local_rank(void) { return g.local_rank; }
int yc_dist_local_size(void) { return g.local_size; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef HAVE_MPI
static int mpi_status(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    return yc_error_status(YC_ERR, "rank %d of %d: %s failed: %s (another rank may have died: "
                           "see its messages above)", g.rank, g.size, what, msg);
}

/* Waits for a non-blocking request, sleeping 100 us between tests so that an idle rank leaves its
 * core to the ranks still computing, for at most g.timeout seconds: a rank that hangs (or a
 * machine that vanished without its connections closing) must not hold the others forever.  The
 * request is left pending on a timeout: the caller ends the run (MPI_Abort). */
static int wait_polling(MPI_Request *req, const char *what)
{
    double start = now_s();
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_status(rc, what);
        if (done)
            return YC_OK;
        if (now_s() - start > g.timeout)
            return yc_error_status(YC_ERR, "rank %d of %d: %s waited %.0f s for the other ranks "
                                   "(" YC_DIST_TIMEOUT_ENV "): one of them has stopped or hangs; "
                                   "see its messages, or raise " YC_DIST_TIMEOUT_ENV " if a rank "
                                   "legitimately works that long alone (validation on rank 0)",
                                   g.rank, g.size, what, g.timeout);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}
#endif

int yc_dist_init(int *argc, char ***argv)
{
    int launched = launcher_size();
#ifdef HAVE_MPI
    if (launched == 0)
        return YC_OK;
    const char *tv = getenv(YC_DIST_TIMEOUT_ENV);
    if (tv && tv[0]) {
        char *end = NULL;
        double v = strtod(tv, &end);
        if (end == tv || *end || !(v > 0) || v > 1e9)
            return yc_error_status(YC_EUSAGE, YC_DIST_TIMEOUT_ENV "=%s: expected a number of "
                                   "seconds above 0", tv);
        g.timeout = v;
    }
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS)
        return yc_error_status(YC_ERR, "MPI_Init_thread failed (error %d): is this process "
                               "started by the mpirun of the MPI yolocl was built with?", rc);
    g.mpi = true;
    if (provided < MPI_THREAD_FUNNELED)
        return yc_error_status(YC_ERR, "the MPI library gives thread level %d, yolocl needs "
                               "MPI_THREAD_FUNNELED (%d): use an MPI built with thread support",
                               provided, MPI_THREAD_FUNNELED);
    if ((rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (rc = MPI_Comm_rank(MPI_COMM_WORLD, &g.rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(MPI_COMM_WORLD, &g.size)) != MPI_SUCCESS)
        return mpi_status(rc, "MPI_Comm_rank/size");
    MPI_Comm local;
    if ((rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL,
                                  &local)) != MPI_SUCCESS)
        return mpi_status(rc, "MPI_Comm_split_type (the ranks of this machine)");
    if ((rc = MPI_Comm_rank(local, &g.local_rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(local, &g.local_size)) != MPI_SUCCESS)
        return mpi_status(rc, "MPI_Comm_rank/size of the machine's ranks");
    MPI_Comm_free(&local);
    return YC_OK;
#else
    (void)argc;
    (void)argv;
    if (launched > 1)
        return yc_error_status(YC_EUSAGE, "started by an MPI launcher as one of %d processes, "
                               "but this yolocl is built without MPI: each would train alone; "
                               "rebuild with MPI (Debian: libopenmpi-dev openmpi-bin, then "
                               "./configure) or run one process", launched);
    return YC_OK;
#endif
}

/* Frees the gradient buckets (below). */
static void overlap_free(void);

void yc_dist_finalize(void)
{
    overlap_free();
    free(g.host);
    g.host = NULL;
    g.host_bytes = 0;
#ifdef HAVE_MPI
    if (g.mpi) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized)
            MPI_Finalize();
        g.mpi = false;
    }
#endif
}

int yc_dist_rank_device(const char *spec, bool auto_gpu, int local, int local_size, char *out,
                        size_t len)
{
    const char *d = spec ? spec : "";
    int n = 0;
    if (strncmp(d, "opencl:", 7) == 0 && strchr(d, ',')) {
        /* the local-th of the listed numbers */
        const char *p = d + 7, *item = NULL;
        size_t item_len = 0;
        for (;;) {
            size_t k = strcspn(p, ",");
            if (k == 0)
                return yc_error_status(YC_EUSAGE, "--device %s: an empty entry in the list of "
                                       "devices (write opencl:A,B,... with device numbers)", d);
            if (n == local) {
                item = p;
                item_len = k;
            }
            n++;
            if (!p[k])
                break;
            p += k + 1;
        }
        if (n < local_size)
            return yc_error_status(YC_EUSAGE, "--device %s lists %d device%s for the %d ranks of "
                                   "this machine: list one per rank (or start %d ranks per "
                                   "machine)", d, n, n == 1 ? "" : "s", local_size, n);
        if (item_len > 16 || snprintf(out, len, "opencl:%.*s", (int)item_len, item) >= (int)len)
            return yc_error_status(YC_EUSAGE, "--device %s: entry %d is not a device number", d,
                                   local);
        return YC_OK;
    }
    if (strcmp(d, "opencl") == 0 ||
        (local_size > 1 && auto_gpu && (strcmp(d, "") == 0 || strcmp(d, "auto") == 0)))
        n = snprintf(out, len, "opencl:%d", local);
    else
        n = snprintf(out, len, "%s", d);
    if (n < 0 || (size_t)n >= len)
        return yc_error_status(YC_EUSAGE, "--device %.100s...: too long", d);
    return YC_OK;
}

int yc_dist_allreduce_sum_f32(float *buf, size_t n)
{
#ifdef HAVE_MPI
    if (!g.mpi || g.size == 1)
        return YC_OK;
    const size_t chunk = (size_t)1 << 28;
    for (size_t i = 0; i < n; i += chunk) {
        int count = (int)(n - i < chunk ? n - i : chunk);
        MPI_Request req;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + i, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                &req);
        if (rc != MPI_SUCCESS)
            return mpi_status(rc, "MPI_Iallreduce (a sum over the ranks)");
        if ((rc = wait_polling(&req, "MPI_Iallreduce (a sum over the ranks)")))
            return rc;
    }
    return YC_OK;
#else
    (void)buf;
    (void)n;
    return YC_OK;
#endif
}

int yc_dist_bn_sync(void *ctx, double *v, size_t n)
{
    (void)ctx;
#ifdef HAVE_MPI
    if (!g.mpi || g.size == 1)
        return YC_OK;
    if (n > INT_MAX)
        return yc_error_status(YC_EUNSUPPORTED, "SyncBatchNorm: %zu sums in one allreduce", n);
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return mpi_status(rc, "MPI_Iallreduce (SyncBatchNorm's sums)");
    /* a few kB, one per BatchNorm and pass: tested without sleeping first (the ranks arrive
     * together but for the noise of the machine), then waited for as every collective is */
    for (int i = 0; i < 2000; i++) {
        int done = 0;
        if ((rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
            return mpi_status(rc, "MPI_Iallreduce (SyncBatchNorm's sums)");
        if (done)
            return YC_OK;
    }
    return wait_polling(&req, "MPI_Iallreduce (SyncBatchNorm's sums)");
#else
    (void)v;
    (void)n;
    return YC_OK;
#endif
}

int yc_dist_allreduce_max_int(int *v)
{
#ifdef HAVE_MPI
    if (!g.mpi || g.size == 1)
        return YC_OK;
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return mpi_status(rc, "MPI_Iallreduce of a flag");
    return wait_polling(&req, "MPI_Iallreduce of a flag");
#else
    (void)v;
    return YC_OK;
#endif
}

int yc_dist_bcast(void *buf, size_t bytes, int root)
{
#ifdef HAVE_MPI
    if (!g.mpi || g.size == 1)
        return YC_OK;
    const size_t chunk = (size_t)1 << 30;
    for (size_t i = 0; i < bytes; i += chunk) {
        int count = (int)(bytes - i < chunk ? bytes - i : chunk);
        MPI_Request req;
        int rc = MPI_Ibcast((char *)buf + i, count, MPI_BYTE, root, MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS)
            return mpi_status(rc, "MPI_Ibcast");
        if ((rc = wait_polling(&req, "MPI_Ibcast")))
            return rc;
    }
    return YC_OK;
#else
    (void)buf;
    (void)bytes;
    (void)root;
    return YC_OK;
#endif
}

int yc_dist_barrier(void)
{
#ifdef HAVE_MPI
    if (!g.mpi || g.size == 1)
        return YC_OK;
    MPI_Request req;
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return mpi_status(rc, "MPI_Ibarrier");
    return wait_polling(&req, "MPI_Ibarrier");
#else
    return YC_OK;
#endif
}

_Noreturn void yc_dist_abort(int code, const char *msg)
{
    fflush(stdout);
    if (g.size > 1)
        fprintf(stderr, "yolocl: rank %d of %d: %s\n", g.rank, g.size, msg);
    else
        fprintf(stderr, "yolocl: %s\n", msg);
#ifdef HAVE_MPI
    if (g.mpi)
        MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}

/* The gradient allreduce proper (yc_dist_allreduce_grads times and counts it). */
static int allreduce_grads(yc_model *m);

/* ---- gradients summed while backward runs ------------------------------------------------- */

/* The gradient arena cut into buckets at parameter boundaries (in arena order, each at least
 * the bucket size but the last), summed by one MPI_Iallreduce each as soon as every parameter in
 * it is final (yc_dist_grads_ready) and waited for by yc_dist_allreduce_grads.
 *
 * Two ways, by the backend.  Host memory (the CPU backend: its ops have finished when the hook
 * runs): each bucket is summed in place in the arena, started by the hook.  A device (OpenCL: its
 * ops are only submitted when the hook runs): each bucket has a pinned host buffer
 * (yc_backend_i.host_alloc), the hook starts the bucket's read into it (read_start: after the
 * ops submitted so far, without holding back the later ones) and polls the reads (event_query)
 * after every op; a bucket's sum starts once its read has finished, in the order the reads were
 * started (the same on every rank, as MPI requires of collectives); yc_dist_allreduce_grads
 * waits for the rest and enqueues each bucket's write back from the same buffer as its sum
 * finishes (buffer_write_async), before the optimizer's ops. */
static struct {
    /* the model the buckets were cut for, its backend, gradient buffer and element count, and
     * the arena's host address (NULL: a device's arena, read through the pinned buffers) */
    const yc_model *m;
    yc_backend *be;
    yc_buffer *grad_buf;
    size_t elems;
    float *arena;
    int nb;
    /* bucket b: elements [off[b], off[b + 1]) of the arena */
    size_t *off;
    /* the bucket of each parameter, and each bucket's parameters */
    int *bucket_of, *params;
    /* per bucket in the armed backward: parameters not yet final, whether its sum started */
    int *left;
    bool *started;
    /* a device's arena: per bucket its pinned host buffer and that buffer's address, whether its
     * read was started in the armed backward and the read's token until its sum starts; the
     * buckets in the order their reads started, of which the first nsum have their sums started
     * and the first nwritten their sums written back */
    yc_host_mem **pin;
    float **host;
    bool *read;
    yc_event **ev;
    int *order, nread, nsum, nwritten;
    /* once every bucket's read has started: a token of the backward's end on the device (a
     * marker after the last read, so after the last op that writes a parameter gradient) */
    yc_event *end;
#ifdef HAVE_MPI
    MPI_Request *req;
#endif
    /* this backward ends in an optimizer step (yc_dist_overlap_arm), and its hook has run */
    bool armed, active;
    /* over the run (yc_dist_overlap_counts_get) */
    yc_dist_overlap_counts n;
} ov;

/* The device side of the buckets: the tokens and the pinned buffers, after the device has
 * finished every copy (the backend must still be open). */
static void overlap_release_device(void)
{
    yc_backend *be = ov.be;
    if (!be || !ov.pin || ov.arena)
        return;
    be->iface->synchronize(be);
    for (int b = 0; b < ov.nb; b++) {
        be->iface->event_release(be, ov.ev[b]);
        ov.ev[b] = NULL;
        be->iface->host_free(be, ov.pin[b]);
        ov.pin[b] = NULL;
    }
    be->iface->event_release(be, ov.end);
    ov.end = NULL;
}

static void overlap_free(void)
{
    overlap_release_device();
    free(ov.off);
    free(ov.bucket_of);
    free(ov.params);
    free(ov.left);
    free(ov.started);
    free(ov.pin);
    free(ov.host);
    free(ov.read);
    free(ov.ev);
    free(ov.order);
#ifdef HAVE_MPI
    free(ov.req);
#endif
    yc_dist_overlap_counts n = ov.n;
    memset(&ov, 0, sizeof ov);
    ov.n = n;
}

void yc_dist_overlap_release(void)
{
    overlap_free();
}

/* Bytes per bucket: YC_DIST_BUCKET_ENV (MiB), else YC_DIST_BUCKET_DEFAULT; at most 2^28 floats
 * (one MPI count). */
static size_t bucket_bytes(void)
{
    const char *v = getenv(YC_DIST_BUCKET_ENV);
    double mb = v && *v ? atof(v) : YC_DIST_BUCKET_DEFAULT;
    if (!(mb > 0.0))
        mb = YC_DIST_BUCKET_DEFAULT;
    if (mb > 1024.0)
        mb = 1024.0;
    return (size_t)(mb * 1048576.0);
}

/* Cuts m's gradient arena into buckets (see above); a device's (arena NULL) gets a pinned host
 * buffer per bucket. */
static int overlap_build(yc_model *m, float *arena)
{
    overlap_free();
    int np = m->nparams;
    size_t cap = bucket_bytes() / sizeof(float), n1 = (size_t)np + 1;
    ov.off = yc_malloc(n1 * sizeof *ov.off, "gradient buckets");
    ov.bucket_of = yc_malloc(n1 * sizeof *ov.bucket_of, "gradient buckets");
    ov.params = yc_malloc(n1 * sizeof *ov.params, "gradient buckets");
    ov.left = yc_calloc(n1, sizeof *ov.left, "gradient buckets");
    ov.started = yc_calloc(n1, sizeof *ov.started, "gradient buckets");
    ov.pin = yc_calloc(n1, sizeof *ov.pin, "gradient buckets");
    ov.host = yc_calloc(n1, sizeof *ov.host, "gradient buckets");
    ov.read = yc_calloc(n1, sizeof *ov.read, "gradient buckets");
    ov.ev = yc_calloc(n1, sizeof *ov.ev, "gradient buckets");
    ov.order = yc_calloc(n1, sizeof *ov.order, "gradient buckets");
    bool ok = ov.off && ov.bucket_of && ov.params && ov.left && ov.started && ov.pin && ov.host &&
              ov.read && ov.ev && ov.order;
#ifdef HAVE_MPI
    ov.req = yc_calloc(n1, sizeof *ov.req, "gradient buckets");
    ok = ok && ov.req;
#endif
    if (!ok) {
        overlap_free();
        return YC_ENOMEM;
    }
    /* the parameters in arena order (insertion sort: a few hundred, mostly in order already) */
    for (int i = 0; i < np; i++) {
        int j = i;
        while (j > 0 && m->params[ov.params[j - 1]].offset > m->params[i].offset) {
            ov.params[j] = ov.params[j - 1];
            j--;
        }
        ov.params[j] = i;
    }
    ov.nb = 0;
    ov.off[0] = 0;
    size_t start = 0;
    for (int k = 0; k < np; k++) {
        const yc_param *p = &m->params[ov.params[k]];
        if (p->offset - start >= cap && k > 0) { /* close the bucket before this parameter */
            ov.off[++ov.nb] = p->offset;
            start = p->offset;
        }
        ov.bucket_of[ov.params[k]] = ov.nb;
    }
    ov.off[++ov.nb] = m->param_elems;
    ov.m = m;
    ov.be = m->be;
    ov.grad_buf = m->grad_buf;
    ov.elems = m->param_elems;
    ov.arena = arena;
    for (int b = 0; !arena && b < ov.nb; b++) {
        void *p = NULL;
        size_t bytes = (ov.off[b + 1] - ov.off[b]) * sizeof(float);
        if (!(ov.pin[b] = m->be->iface->host_alloc(m->be, bytes, &p))) {
            int st = yc_error_context(YC_ENOMEM, "the pinned host buffer of gradient bucket %d of "
                                      "%d", b + 1, ov.nb);
            overlap_free();
            return st;
        }
        ov.host[b] = p;
    }
    return YC_OK;
}

#ifdef HAVE_MPI
/* Starts bucket b's sum: in place in the arena, or in its pinned buffer. */
static int overlap_start(int b)
{
    ov.started[b] = true;
    float *p = ov.arena ? ov.arena + ov.off[b] : ov.host[b];
    int rc = MPI_Iallreduce(MPI_IN_PLACE, p, (int)(ov.off[b + 1] - ov.off[b]), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD, &ov.req[b]);
    return rc == MPI_SUCCESS ? YC_OK : mpi_status(rc, "MPI_Iallreduce of a gradient bucket");
}

/* Lets MPI progress the sums in flight (Open MPI moves a non-blocking collective on only inside
 * MPI calls); *pending: whether one is still in flight. */
static int overlap_progress(bool *pending)
{
    *pending = false;
    for (int b = 0; b < ov.nb; b++) {
        int done = 0;
        if (!ov.started[b] || ov.req[b] == MPI_REQUEST_NULL)
            continue;
        int rc = MPI_Test(&ov.req[b], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_status(rc, "MPI_Test of a gradient bucket");
        *pending = *pending || !done;
    }
    return YC_OK;
}
#endif

/* Starts the read of a device's bucket b into its pinned buffer; after the last bucket's, the
 * token of the backward's end. */
static int overlap_read(int b)
{
    yc_backend *be = ov.be;
    ov.read[b] = true;
    ov.order[ov.nread++] = b;
    int st = be->iface->read_start(be, ov.grad_buf, ov.off[b] * sizeof(float), ov.host[b],
                                   (ov.off[b + 1] - ov.off[b]) * sizeof(float), &ov.ev[b]);
    if (!st && ov.nread == ov.nb)
        st = be->iface->marker(be, &ov.end);
    return st;
}

/* Starts the sums of the buckets whose reads have finished, in the order the reads started,
 * up to the first read still running; *next: that read's bucket, -1 when every started read
 * has its sum started. */
static int overlap_start_read(int *next)
{
    yc_backend *be = ov.be;
    *next = -1;
    while (ov.nsum < ov.nread) {
        int b = ov.order[ov.nsum];
        bool done = false;
        int st = be->iface->event_query(be, ov.ev[b], &done);
        if (st)
            return st;
        if (!done) {
            *next = b;
            return YC_OK;
        }
        be->iface->event_release(be, ov.ev[b]);
        ov.ev[b] = NULL;
        /* before the backward ended on the device: while a bucket is still to become final (the
         * token of the end is made with its read), or while that token has not completed */
        bool ended = false;
        if (ov.end && (st = be->iface->event_query(be, ov.end, &ended)))
            return st;
#ifdef HAVE_MPI
        if ((st = overlap_start(b)))
            return st;
#endif
        ov.nsum++;
        if (ended)
            ov.n.late++;
        else
            ov.n.early++;
    }
    return YC_OK;
}

int yc_dist_overlap_arm(yc_model *m, bool step)
{
    if (ov.active)
        return yc_error_status(YC_ERR, "internal: gradient buckets still in flight");
    ov.armed = false;
    if (!step || g.size == 1 || !m->grad_buf)
        return YC_OK;
    const char *env = getenv(YC_DIST_OVERLAP_ENV);
    if (env && strcmp(env, "0") == 0)
        return YC_OK;
    yc_backend *be = m->be;
    /* the CPU backend's ops run synchronously: a gradient is final in memory once its op returns;
     * a device's is read to the host per bucket */
    float *arena = be->iface->buffer_host_ptr ? be->iface->buffer_host_ptr(be, m->grad_buf) : NULL;
    int st;
    if ((ov.m != m || ov.be != be || ov.grad_buf != m->grad_buf || ov.elems != m->param_elems ||
         ov.arena != arena || !ov.off) && (st = overlap_build(m, arena)))
        return st;
    for (int b = 0; b < ov.nb; b++) {
        ov.left[b] = 0;
        ov.started[b] = ov.read[b] = false;
        /* the tokens a failed finish left */
        if (ov.ev[b]) {
            be->iface->event_release(be, ov.ev[b]);
            ov.ev[b] = NULL;
        }
    }
    if (ov.end) {
        be->iface->event_release(be, ov.end);
        ov.end = NULL;
    }
    ov.nread = ov.nsum = ov.nwritten = 0;
    for (int i = 0; i < m->nparams; i++)
        ov.left[ov.bucket_of[i]]++;
    ov.armed = true;
    return YC_OK;
}

bool yc_dist_overlap_armed(void)
{
    return ov.armed;
}

int yc_dist_grads_ready(void *ctx, const int *params, int n)
{
    (void)ctx;
    if (!ov.armed)
        return YC_OK;
#ifdef HAVE_MPI
    ov.active = true;
    int st;
    for (int i = 0; i < n; i++) {
        int b = ov.bucket_of[params[i]];
        if (--ov.left[b] == 0) {
            if (!ov.arena) {
                if ((st = overlap_read(b)))
                    return st;
                ov.n.reads_early++;
            } else {
                if ((st = overlap_start(b)))
                    return st;
                ov.n.early++;
            }
        }
    }
    int next;
    bool pending;
    if ((!ov.arena && (st = overlap_start_read(&next))) || (st = overlap_progress(&pending)))
        return st;
#else
    (void)params;
    (void)n;
#endif
    return YC_OK;
}

void yc_dist_overlap_counts_get(yc_dist_overlap_counts *c)
{
    *c = ov.n;
}

/* A device's bucket b: its sum back from the pinned buffer to the arena, without waiting (after
 * every op submitted so far, the backward's: before the optimizer's). */
static int overlap_write(int b)
{
    return ov.be->iface->buffer_write_async(ov.be, ov.grad_buf, ov.off[b] * sizeof(float),
                                            ov.host[b],
                                            (ov.off[b + 1] - ov.off[b]) * sizeof(float));
}

/* Writes back the sums that have finished, in the order the reads started, up to the first sum
 * still in flight: the device copies them while the host waits for the rest. */
static int overlap_write_done(void)
{
    int st = YC_OK;
    while (!st && ov.nwritten < ov.nsum && ov.req[ov.order[ov.nwritten]] == MPI_REQUEST_NULL)
        st = overlap_write(ov.order[ov.nwritten++]);
    return st;
}

/* Waits for the buckets of the armed backward, starting (in bucket order, the same on every
 * rank) any its hook did not; a device's buckets are written back as their sums finish. */
static int overlap_finish(void)
{
    ov.armed = false;
    ov.n.steps++;
#ifdef HAVE_MPI
    int st = YC_OK;
    yc_backend *be = ov.be;
    if (ov.arena) {
        for (int b = 0; b < ov.nb && !st; b++)
            if (!ov.started[b] && !(st = overlap_start(b)))
                ov.n.late++;
    } else {
        for (int b = 0; b < ov.nb && !st; b++)
            if (!ov.read[b] && !(st = overlap_read(b)))
                ov.n.reads_late++;
        while (!st && ov.nsum < ov.nread) {
            int next;
            bool pending;
            if ((st = overlap_start_read(&next)) || next < 0 || (st = overlap_progress(&pending)) ||
                (st = overlap_write_done()))
                continue;
            if (pending) { /* sums in flight: poll both, leaving the core to the others */
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            } else { /* nothing to progress: block until the next read lands */
                ov.n.read_waits++;
                st = be->iface->event_wait(be, ov.ev[next]);
            }
        }
        be->iface->event_release(be, ov.end);
        ov.end = NULL;
    }
    for (int b = 0; b < ov.nb && !st && ov.arena; b++)
        if (ov.req[b] != MPI_REQUEST_NULL)
            st = wait_polling(&ov.req[b], "MPI_Iallreduce of a gradient bucket");
    /* a device's: each sum, as it finishes, back where the optimizer's ops read it */
    while (!st && !ov.arena && ov.nwritten < ov.nb) {
        int b = ov.order[ov.nwritten];
        if (ov.req[b] == MPI_REQUEST_NULL ||
            !(st = wait_polling(&ov.req[b], "MPI_Iallreduce of a gradient bucket"))) {
            st = overlap_write(b);
            ov.nwritten++;
        }
    }
    ov.active = false;
    return st;
#else
    ov.active = false;
    return YC_OK;
#endif
}

int yc_dist_allreduce_grads(yc_model *m)
{
    if (g.size == 1)
        return YC_OK;
    double start = now_s();
    int st = ov.active && ov.m == m ? overlap_finish() : allreduce_grads(m);
    if (!st) {
        g.grad_reduces++;
        g.grad_bytes += m->param_elems * sizeof(float);
        g.grad_seconds += now_s() - start;
    }
    return st;
}

static int allreduce_grads(yc_model *m)
{
    if (!m->grad_buf)
        return yc_error_status(YC_EUSAGE, "internal: the model has no gradients to reduce");
    yc_backend *be = m->be;
    size_t n = m->param_elems, bytes = n * sizeof(float);
    float *p = be->iface->buffer_host_ptr ? be->iface->buffer_host_ptr(be, m->grad_buf) : NULL;
    if (p) /* the CPU backend runs ops synchronously: the arena is complete */
        return yc_dist_allreduce_sum_f32(p, n);
    /* one host buffer kept for the run (freed by yc_dist_finalize) */
    if (g.host_bytes < bytes) {
        float *h = yc_realloc(g.host, bytes, "host copy of the gradients for the allreduce");
        if (!h)
            return YC_ENOMEM;
        g.host = h;
        g.host_bytes = bytes;
    }
    float *host = g.host;
    int st = be->iface->synchronize(be);
    if (!st)
        st = be->iface->buffer_read(be, m->grad_buf, 0, host, bytes);
    if (!st)
        st = yc_dist_allreduce_sum_f32(host, n);
    if (!st)
        st = be->iface->buffer_write(be, m->grad_buf, 0, host, bytes);
    return st;
}

/* bytes of a buffer of m's backend from rank 0 to every rank, through a host copy. */
static int bcast_buffer(yc_model *m, yc_buffer *buf, size_t bytes, const char *what)
{
    if (!buf || bytes == 0)
        return YC_OK;
    yc_backend *be = m->be;
    void *host = yc_malloc(bytes, what);
    if (!host)
        return YC_ENOMEM;
    int st = be->iface->synchronize(be);
    if (!st && g.rank == 0)
        st = be->iface->buffer_read(be, buf, 0, host, bytes);
    if (!st)
        st = yc_dist_bcast(host, bytes, 0);
    if (!st && g.rank != 0)
        st = be->iface->buffer_write(be, buf, 0, host, bytes);
    free(host);
    return st;
}

int yc_dist_bcast_model(yc_model *m)
{
    if (g.size == 1)
        return YC_OK;
    int st = bcast_buffer(m, m->param_buf, m->param_elems * sizeof(float),
                          "host copy of the parameters for their broadcast");
    if (!st)
        st = bcast_buffer(m, m->state_buf, m->state_elems * sizeof(float),
                          "host copy of the running statistics for their broadcast");
    if (!st && m->nbn > 0)
        st = yc_dist_bcast(m->num_batches, (size_t)m->nbn * sizeof *m->num_batches, 0);
    if (!st)
        st = yc_dist_bcast(m->anchors, sizeof m->anchors, 0);
    return st;
}

int yc_dist_check_weights(yc_model *m, int epoch)
{
    if (g.size == 1)
        return YC_OK;
    yc_backend *be = m->be;
    size_t bytes = m->param_elems * sizeof(float);
    unsigned char *host = yc_malloc(bytes, "host copy of the parameters for their checksum");
    if (!host)
        return YC_ENOMEM;
    int st = be->iface->synchronize(be);
    if (!st)
        st = be->iface->buffer_read(be, m->param_buf, 0, host, bytes);
    /* FNV-1a over the bytes */
    unsigned long long sum = 0xcbf29ce484222325ull, root = 0;
    for (size_t i = 0; !st && i < bytes; i++)
        sum = (sum ^ host[i]) * 0x100000001b3ull;
    free(host);
    root = sum;
    if (!st)
        st = yc_dist_bcast(&root, sizeof root, 0);
    /* the lowest differing rank + 1, then how many differ */
    int differ = !st && root != sum, first = differ ? g.size - g.rank : 0, count = differ;
    if (!st)
        st = yc_dist_allreduce_max_int(&first);
    if (!st) {
        float c = (float)count;
        st = yc_dist_allreduce_sum_f32(&c, 1);
        count = (int)c;
    }
    if (!st && first > 0)
        st = yc_error_status(YC_ERR, "after epoch %d the weights of %d rank%s differ from rank "
                             "0's (rank %d first; parameter checksums %016llx here, %016llx on "
                             "rank 0): the ranks no longer train the same model", epoch, count,
                             count == 1 ? "" : "s", g.size - first, sum, root);
    return st;
}

void yc_dist_stats(long *count, size_t *bytes, double *seconds)
{
    *count = g.grad_reduces;
    *bytes = g.grad_bytes;
    *seconds = g.grad_seconds;
}
