/* The CPU backend (OpenMP): buffers are 64-byte aligned host memory, ops run synchronously on
 * the calling thread plus an OpenMP team of `threads` threads.
 *
 * exec only computes: yc_backend_exec has checked the op (slots, shapes, FP16 only in activation
 * slots, placement, workspace) and supports has refused grouped convolutions.  Kernels are in the
 * other files of cpu/ (see cpu_ops.h); every FP16 slot that yc_op_check accepts is supported
 * (converted on load and store). */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "backend.h"
#include "cpu_ops.h"
#include "log.h"
#include "util.h"

/* Alignment of buffers (a cache line; enough for any vector load). */
#define YC_CPU_ALIGN 64

struct yc_buffer {
    /* YC_CPU_ALIGN-aligned host memory */
    void *data;
    /* bytes requested */
    size_t size;
};

/* One entry of the transformed-weights cache: the weights at `offset` of `buf` in form `form`. */
typedef struct wcache_entry {
    const yc_buffer *buf;
    size_t offset, floats;
    const void *form;
    float *data;
} wcache_entry;

/* Weights of frozen convolutions kept transformed between runs (yc_cpu_wcache_get). */
struct yc_cpu_wcache {
    wcache_entry *e;
    int n, cap;
    /* bytes held, and the most it may hold */
    size_t bytes, budget;
};

typedef struct cpu_ctx {
    /* OpenMP threads per op */
    int threads;
    struct yc_cpu_wcache wcache;
} cpu_ctx;

static int ctx_threads(yc_backend *be)
{
    return ((cpu_ctx *)be->ctx)->threads;
}

/* Drops the cache's entries of buf (all of them when buf is NULL). */
static void wcache_drop(struct yc_cpu_wcache *c, const yc_buffer *buf)
{
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        if (!buf || c->e[i].buf == buf) {
            c->bytes -= c->e[i].floats * sizeof(float);
            free(c->e[i].data);
        } else {
            c->e[k++] = c->e[i];
        }
    }
    c->n = k;
}

float *yc_cpu_wcache_get(struct yc_cpu_wcache *c, const yc_tensor *w, const void *form,
                         size_t floats, bool *fill)
{
    *fill = false;
    if (!c || !w || !w->buf)
        return NULL;
    for (int i = 0; i < c->n; i++) {
        const wcache_entry *e = &c->e[i];
        if (e->buf == w->buf && e->offset == w->offset && e->form == form && e->floats == floats)
            return e->data;
    }
    size_t bytes = yc_align_up(floats * sizeof(float), YC_CPU_ALIGN);
    if (bytes > c->budget - c->bytes)
        return NULL;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        wcache_entry *e = realloc(c->e, (size_t)cap * sizeof *e);
        if (!e)
            return NULL;
        c->e = e;
        c->cap = cap;
    }
    float *data = aligned_alloc(YC_CPU_ALIGN, bytes);
    if (!data)
        return NULL;
    c->e[c->n++] = (wcache_entry){.buf = w->buf, .offset = w->offset, .floats = floats,
                                  .form = form, .data = data};
    c->bytes += floats * sizeof(float);
    *fill = true;
    return data;
}

static void cpu_free(yc_backend *be)
{
    cpu_ctx *ctx = be->ctx;
    wcache_drop(&ctx->wcache, NULL);
    free(ctx->wcache.e);
    free(be->ctx);
    free(be);
}

static yc_buffer *cpu_buffer_alloc(yc_backend *be, size_t size)
{
    if (size > be->info.max_alloc) {
        char a[32], b[32];
        yc_error_status(YC_ENOMEM, "cpu: cannot allocate %s: more than the host's %s",
                        yc_format_size(size, a, sizeof a), yc_format_size(be->info.max_alloc, b, sizeof b));
        return NULL;
    }
    yc_buffer *buf = yc_malloc(sizeof *buf, "cpu buffer");
    if (!buf)
        return NULL;
    size_t rounded = yc_align_up(size ? size : 1, YC_CPU_ALIGN);
    buf->data = aligned_alloc(YC_CPU_ALIGN, rounded);
    if (!buf->data) {
        char a[32];
        yc_error_status(YC_ENOMEM, "out of memory: %s for a cpu buffer", yc_format_size(size, a, sizeof a));
        free(buf);
        return NULL;
    }
    buf->size = size;
    return buf;
}

static void cpu_buffer_free(yc_backend *be, yc_buffer *buf)
{
    if (!buf)
        return;
    wcache_drop(&((cpu_ctx *)be->ctx)->wcache, buf);
    free(buf->data);
    free(buf);
}

static size_t cpu_buffer_size(yc_backend *be, const yc_buffer *buf)
{
    (void)be;
    return buf ? buf->size : 0;
}

/* [offset, offset + size) lies inside buf. */
static int check_range(const yc_buffer *buf, size_t offset, size_t size, const char *what)
{
    if (!buf)
        return yc_error_status(YC_EFORMAT, "cpu: %s: no buffer", what);
    if (offset > buf->size || size > buf->size - offset)
        return yc_error_status(YC_EFORMAT, "cpu: %s of %zu bytes at offset %zu outside a buffer of %zu bytes",
                               what, size, offset, buf->size);
    return YC_OK;
}

static int cpu_buffer_write(yc_backend *be, yc_buffer *buf, size_t offset, const void *src, size_t size)
{
    wcache_drop(&((cpu_ctx *)be->ctx)->wcache, buf);
    int rc = check_range(buf, offset, size, "write");
    if (rc == YC_OK && size)
        memcpy((char *)buf->data + offset, src, size);
    return rc;
}

static int cpu_buffer_read(yc_backend *be, const yc_buffer *buf, size_t offset, void *dst, size_t size)
{
    (void)be;
    int rc = check_range(buf, offset, size, "read");
    if (rc == YC_OK && size)
        memcpy(dst, (const char *)buf->data + offset, size);
    return rc;
}

static int cpu_buffer_memset(yc_backend *be, yc_buffer *buf, size_t offset, int byte, size_t size)
{
    wcache_drop(&((cpu_ctx *)be->ctx)->wcache, buf);
    int rc = check_range(buf, offset, size, "memset");
    if (rc == YC_OK && size)
        memset((char *)buf->data + offset, byte, size);
    return rc;
}

/* Pinned host memory is plain aligned host memory here: the buffers are host memory too. */
struct yc_host_mem {
    void *data;
};

static yc_host_mem *cpu_host_alloc(yc_backend *be, size_t size, void **ptr)
{
    *ptr = NULL;
    yc_buffer *buf = cpu_buffer_alloc(be, size);
    yc_host_mem *h = buf ? yc_malloc(sizeof *h, "cpu host memory") : NULL;
    if (!h) {
        cpu_buffer_free(be, buf);
        return NULL;
    }
    h->data = buf->data;
    free(buf);
    *ptr = h->data;
    return h;
}

static void cpu_host_free(yc_backend *be, yc_host_mem *h)
{
    (void)be;
    if (!h)
        return;
    free(h->data);
    free(h);
}

/* The ops have finished when exec returns: a copy started after them is done at once. */
static int cpu_read_start(yc_backend *be, const yc_buffer *buf, size_t offset, void *dst,
                          size_t size, yc_event **done)
{
    *done = NULL;
    return cpu_buffer_read(be, buf, offset, dst, size);
}

static int cpu_marker(yc_backend *be, yc_event **done)
{
    (void)be;
    *done = NULL;
    return YC_OK;
}

/* This backend makes no tokens: any but NULL is another backend's. */
static int cpu_event_query(yc_backend *be, yc_event *ev, bool *done)
{
    (void)be;
    *done = true;
    return ev ? yc_error_status(YC_EUSAGE, "internal: cpu: a token of another backend") : YC_OK;
}

static int cpu_event_wait(yc_backend *be, yc_event *ev)
{
    bool done;
    return cpu_event_query(be, ev, &done);
}

static void cpu_event_release(yc_backend *be, yc_event *ev)
{
    (void)be;
    (void)ev;
}

static void *cpu_buffer_host_ptr(yc_backend *be, yc_buffer *buf)
{
    (void)be;
    return buf ? buf->data : NULL;
}

static bool cpu_supports(yc_backend *be, const yc_op *op)
{
    (void)be;
    switch (op->kind) {
    case YC_OP_CONV2D:
    case YC_OP_CONV2D_BWD_DATA:
    case YC_OP_CONV2D_BWD_FILTER:
        return op->p.conv.groups == 1;
    default:
        return true;
    }
}

static size_t cpu_workspace(yc_backend *be, const yc_op *op)
{
    switch (op->kind) {
    case YC_OP_CONV2D:
    case YC_OP_CONV2D_BWD_DATA:
    case YC_OP_CONV2D_BWD_FILTER:
        return yc_cpu_conv2d_workspace(op, ctx_threads(be));
    case YC_OP_MAXPOOL:
    case YC_OP_MAXPOOL_BWD:
        return yc_cpu_maxpool_workspace(op, ctx_threads(be));
    case YC_OP_BN_SILU_BWD:
        return yc_cpu_bn_silu_bwd_workspace(op, ctx_threads(be));
    default:
        return 0;
    }
}

/* Resolves a placed tensor to host memory after checking that all its elements lie in its
 * buffer at addresses aligned to its element size. */
/* The host view of a tensor yc_backend_exec has checked. */
static yc_hv host_view(const yc_tensor *t)
{
    void *base = (char *)t->buf->data + t->offset;
    size_t img = yc_tensor_image_elems(t);
    return (yc_hv){.type = t->type,
                   .p = t->type == YC_F32 ? base : NULL,
                   .p16 = t->type == YC_F16 ? base : NULL,
                   .n = t->n,
                   .c = t->c,
                   .h = t->h,
                   .w = t->w,
                   .ns = t->n > 1 ? t->nstride : img};
}

static int cpu_exec(yc_backend *be, const yc_op *op, yc_span ws)
{
    yc_cpu_args a = {.op = op, .threads = ctx_threads(be)};
    if (op->kind == YC_OP_CONV2D && op->p.conv.frozen)
        a.wcache = &((cpu_ctx *)be->ctx)->wcache;
    be->counters.launches++;
    for (int i = 0; i < YC_OP_MAX_SRC; i++)
        if (op->src[i])
            a.src[i] = host_view(op->src[i]);
    for (int i = 0; i < YC_OP_MAX_DST; i++)
        if (op->dst[i])
            a.dst[i] = host_view(op->dst[i]);
    if (ws.buf) {
        a.ws = (char *)ws.buf->data + ws.offset;
        a.ws_size = ws.size;
    }
    /* yc_sgemm's own parallel regions use the default team size */
    omp_set_num_threads(a.threads);
    switch (op->kind) {
    case YC_OP_CONV2D:
        yc_cpu_conv2d_fwd(&a);
        break;
    case YC_OP_CONV2D_BWD_DATA:
        yc_cpu_conv2d_bwd_data(&a);
        break;
    case YC_OP_CONV2D_BWD_FILTER:
        yc_cpu_conv2d_bwd_filter(&a);
        break;
    case YC_OP_BN_TRAIN:
        return yc_cpu_bn_train(&a);
    case YC_OP_BN_EVAL:
        yc_cpu_bn_eval(&a);
        break;
    case YC_OP_BN_BWD:
        return yc_cpu_bn_bwd(&a);
    case YC_OP_BN_SILU_TRAIN:
        return yc_cpu_bn_silu_train(&a);
    case YC_OP_BN_SILU_APPLY:
        yc_cpu_bn_silu_apply(&a);
        break;
    case YC_OP_BN_SILU_BWD:
        return yc_cpu_bn_silu_bwd(&a);
    case YC_OP_SILU:
        yc_cpu_silu_fwd(&a);
        break;
    case YC_OP_SILU_BWD:
        yc_cpu_silu_bwd(&a);
        break;
    case YC_OP_ADD:
        yc_cpu_add(&a);
        break;
    case YC_OP_COPY:
        yc_cpu_copy(&a);
        break;
    case YC_OP_FILL:
        yc_cpu_fill(&a);
        break;
    case YC_OP_MAXPOOL:
        yc_cpu_maxpool_fwd(&a);
        break;
    case YC_OP_MAXPOOL_BWD:
        yc_cpu_maxpool_bwd(&a);
        break;
    case YC_OP_UPSAMPLE:
        yc_cpu_upsample_fwd(&a);
        break;
    case YC_OP_UPSAMPLE_BWD:
        yc_cpu_upsample_bwd(&a);
        break;
    case YC_OP_AVGPOOL:
        yc_cpu_avgpool_fwd(&a);
        break;
    case YC_OP_AVGPOOL_BWD:
        yc_cpu_avgpool_bwd(&a);
        break;
    case YC_OP_DROPOUT:
        yc_cpu_dropout(&a);
        break;
    case YC_OP_SGD:
        yc_cpu_sgd(&a);
        break;
    case YC_OP_ADAM:
        yc_cpu_adam(&a);
        break;
    case YC_OP_EMA:
        yc_cpu_ema(&a);
        break;
    case YC_OP_SUMSQ:
        yc_cpu_sumsq(&a);
        break;
    case YC_OP_COUNT:
        return yc_error_status(YC_EUNSUPPORTED, "unknown op kind");
    }
    return YC_OK;
}

static int cpu_synchronize(yc_backend *be)
{
    (void)be;
    return YC_OK;
}

static const struct yc_backend_i cpu_iface = {
    .name = "cpu",
    .free = cpu_free,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_size = cpu_buffer_size,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .buffer_read_async = cpu_buffer_read,
    .buffer_write_async = cpu_buffer_write,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .read_start = cpu_read_start,
    .marker = cpu_marker,
    .event_query = cpu_event_query,
    .event_wait = cpu_event_wait,
    .event_release = cpu_event_release,
    .buffer_memset = cpu_buffer_memset,
    .buffer_host_ptr = cpu_buffer_host_ptr,
    .supports = cpu_supports,
    .limits = "groups == 1 only",
    .workspace = cpu_workspace,
    .exec = cpu_exec,
    .synchronize = cpu_synchronize,
};

/* MemAvailable from /proc/meminfo in bytes, 0 when unknown. */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    fclose(f);
    return kib > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kib * 1024;
}

int yc_backend_cpu_new(yc_backend **out, int threads)
{
    *out = NULL;
    /* default: OMP_NUM_THREADS when the user set it, else the physical cores (hyper-threads
     * share the FMA units and only add contention) */
    const char *env = getenv("OMP_NUM_THREADS");
    if (threads <= 0 && env && atoi(env) > 0)
        threads = atoi(env);
    if (threads <= 0)
        threads = yc_physical_cores();
    if (threads <= 0)
        threads = 1;
    yc_backend *be = yc_calloc(1, sizeof *be, "cpu backend");
    cpu_ctx *ctx = yc_calloc(1, sizeof *ctx, "cpu backend");
    if (!be || !ctx) {
        free(be);
        free(ctx);
        return YC_ENOMEM;
    }
    ctx->threads = threads;
    be->iface = &cpu_iface;
    be->ctx = ctx;
    yc_device_info *info = &be->info;
    info->kind = YC_DEVICE_CPU;
    snprintf(info->name, sizeof info->name, "cpu (OpenMP, %d thread%s)", threads, threads == 1 ? "" : "s");
    info->cl_platform = -1;
    info->cl_device = -1;
    struct sysinfo si;
    if (sysinfo(&si) == 0) {
        unsigned long long unit = si.mem_unit ? si.mem_unit : 1;
        info->mem_total = (size_t)((unsigned long long)si.totalram * unit);
        info->mem_free = mem_available();
        if (!info->mem_free)
            info->mem_free = (size_t)(((unsigned long long)si.freeram + si.bufferram) * unit);
    }
    info->max_alloc = info->mem_total ? info->mem_total : SIZE_MAX;
    ctx->wcache.budget = info->mem_total / 8 < ((size_t)1 << 30) ? info->mem_total / 8
                                                                 : (size_t)1 << 30;
    info->alignment = YC_CPU_ALIGN;
    info->fp16_storage = true;
    info->conv_silu = true;
    info->fp16_arith = false;
    info->is_gpu = false;
    info->compute_units = threads;
    omp_set_num_threads(threads);
    *out = be;
    return YC_OK;
}
