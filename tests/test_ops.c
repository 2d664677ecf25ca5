/* Tests of the ops (src/backend/backend.h) and the CPU backend, after ggml's test-backend-ops:
 *
 *  1. finite differences: every naive backward of tests/ref_ops.c against its naive forward, in
 *     double (central differences);
 *  2. a table of cases (every op, several shapes and parameters, batch 1 and more, accumulate 0
 *     and 1, tensors as views with nstride > c*h*w) run on every backend in `backends` and
 *     compared with the naive reference (normalised error max|a-b| / max|b| under a per-op
 *     tolerance); every tensor sits in its own buffer between guard bytes, which must be
 *     untouched afterwards, as must the gaps between the images of views, the inputs, and the
 *     guards around the workspace.  Outputs start as NaN unless the op reads them (accumulate),
 *     so an op that reads what it should overwrite fails.
 *     FP16 variants of every op with activation slots (inputs, outputs or both FP16): the
 *     reference runs on the FP16 values; FP32 outputs keep the FP32 tolerance, FP16 outputs may
 *     be off by a further half FP16 ulp of each value (half_err); and each result must have the
 *     bits of the same case run with FP32 tensors holding the same values, rounded to FP16 where
 *     the output is FP16 (the kernels compute exactly as in FP32);
 *  3. batch-norm running statistics against values worked out by hand;
 *  4. the vectorised exp over a sweep of all floats, SiLU and its gradient over a wide range and
 *     at inf, NaN and huge inputs;
 *  5. max-pool tie-breaking (first maximum, NaN as maximum, windows of -inf);
 *  6. optimizer steps (SGD with Nesterov, Adam, AdamW) and EMA updates in sequence, bit for bit
 *     against numbers from PyTorch 1.13.1 and to 1e-5 against the double references;
 *  7. the fused batch norm + SiLU ops bit for bit against the unfused sequence, and
 *     BN_SILU_APPLY against the output of BN_SILU_TRAIN on every backend;
 *  8. FP16 conversion on every path (portable, F16C, AVX-512) against exact values;
 *  4, 7, the in-place test and the cases of 2 that apply exp or SiLU run on both paths of those
 *  kernels where the CPU has AVX-512 (cpu/silu_avx512.c, and the generic vectors of vec16.h
 *  selected through YOLOCL_GEMM_KERNEL);
 *  and the op checker (FP16 accepted exactly in activation slots), buffers, tensor get/set with
 *  nstride and FP16, device info, error paths. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "gemm.h"
#include "cl_backend.h"
#include "cl_devices.h"
#include "cpu_ops.h"
#include "half.h"
#include "log.h"
#include "ref_ops.h"
#include "rng.h"
#include "winograd.h"
#include "harness.h"
#include "yctest.h"

/* ---------------------------------------------------------------------------------------------
 * Backends under test.  A backend that is not available here (no device) is skipped.
 * ------------------------------------------------------------------------------------------- */
typedef struct backend_entry {
    const char *name;
    int (*create)(yc_backend **out, int arg);
    int arg;
} backend_entry;

static int create_cpu(yc_backend **out, int threads)
{
    return yc_backend_cpu_new(out, threads);
}

/* Opens OpenCL device `index`.  The device was listed before the tests started: failing to open
 * it is an error, not a skip. */
static int create_opencl(yc_backend **out, int index)
{
#ifdef YC_HAVE_OPENCL
    int rc = yc_backend_opencl_new(out, index);
    return rc == YC_EUNSUPPORTED || rc == YC_EDEVICE ? YC_ERR : rc;
#else
    (void)out;
    (void)index;
    return YC_EUNSUPPORTED;
#endif
}

/* The CPU backend twice, then every OpenCL device (add_opencl_backends). */
#define MAX_CL_BACKENDS 8
static backend_entry backends[2 + MAX_CL_BACKENDS] = {
    {"cpu", create_cpu, 0},          /* default threads (physical cores) */
    {"cpu-3threads", create_cpu, 3}, /* another team size: other image splits in conv */
};
static int nbackends = 2;
#define NBACKENDS nbackends

/* Appends every OpenCL device to `backends` (none when YOLOCL_TEST_OPENCL=0, only device N with
 * YOLOCL_TEST_OPENCL_DEVICE=N).  The devices are counted in a child process
 * (yc_harness_opencl_devices): Check's forked tests hang when their parent has started the OpenCL
 * platform. */
static void add_opencl_backends(void)
{
#ifdef YC_HAVE_OPENCL
    static char names[MAX_CL_BACKENDS][16];
    const char *env = getenv("YOLOCL_TEST_OPENCL");
    if (env && strcmp(env, "0") == 0)
        return;
    int n = yc_harness_opencl_devices();
    const char *only = getenv("YOLOCL_TEST_OPENCL_DEVICE");
    for (int i = 0; i < n && i < MAX_CL_BACKENDS; i++) {
        if (only && *only && atoi(only) != i)
            continue;
        snprintf(names[i], sizeof names[i], "opencl:%d", i);
        backends[nbackends++] = (backend_entry){names[i], create_opencl, i};
    }
    if (n == 0 && yc_test_required(YC_TEST_NEEDS_OPENCL))
        exit(yc_test_skip(YC_TEST_NEEDS_OPENCL, "test_ops: no OpenCL device"));
    if (n == 0)
        fprintf(stderr, "test_ops: no OpenCL device: the OpenCL cases are skipped\n");
#endif
}

/* Backends kept open across the cases of one forked test (op_cases, op_cases_silu) when it runs
 * more than one: each OpenCL backend is a new context whose kernels are loaded again, which on a
 * GPU driver costs more than the case (released by backends_release at the test's end). */
static yc_backend *kept[2 + MAX_CL_BACKENDS];

/* Cases per forked test: 1, or 8 in a sanitizer build (YOLOCL_SANITIZED set by make check), where
 * LeakSanitizer's check at the exit of every forked test costs 0.15-0.3 s (850 cases: 2 to 4
 * minutes), or $YOLOCL_TEST_CASES_PER_FORK (bench/gpu_check.sh: a GPU driver's start in every
 * fork costs more than the case).  Set in main. */
static int cases_per_test = 1;

static void backends_release(void)
{
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        yc_backend_free(kept[i]);
        kept[i] = NULL;
    }
}

/* Creates backend `i`; NULL when it does not exist on this machine. */
static yc_backend *backend_open(int i)
{
    yc_backend *be = NULL;
    int rc = backends[i].create(&be, backends[i].arg);
    if (rc == YC_EUNSUPPORTED || rc == YC_EDEVICE)
        return NULL;
    ck_assert_msg(rc == YC_OK && be, "creating backend %s: %s", backends[i].name, yc_last_error());
    return be;
}

/* ---------------------------------------------------------------------------------------------
 * Small helpers.
 * ------------------------------------------------------------------------------------------- */

/* ck_assert_msg for inner loops: Check records the location of every passing ck_assert (a write
 * to its message file), which costs seconds over millions of elements; this only acts on failure. */
#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond))                                                                                         \
            ck_abort_msg(__VA_ARGS__);                                                                       \
    } while (0)
static double *dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

static float *falloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* max|a - b| / max(max|b|, floor, tiny); infinite when a NaN appears on one side only */
static double norm_err(const double *a, const double *b, size_t n, double floor)
{
    double num = 0.0, den = floor > 1e-30 ? floor : 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i]))
            return INFINITY;
        if (isnan(b[i]))
            continue;
        double d = fabs(a[i] - b[i]);
        if (d > num)
            num = d;
        if (fabs(b[i]) > den)
            den = fabs(b[i]);
    }
    return num / den;
}

/* ---------------------------------------------------------------------------------------------
 * 1. Finite differences of the naive reference (double).  L = sum(g * forward(...)).
 * ------------------------------------------------------------------------------------------- */
typedef double (*loss_fn)(void *ctx);

/* Compares analytic dL/dv with central differences over every element of v. */
static double fd_check(double *v, size_t n, const double *analytic, double h, loss_fn f, void *ctx)
{
    double *num = dalloc(n);
    for (size_t i = 0; i < n; i++) {
        double o = v[i];
        v[i] = o + h;
        double lp = f(ctx);
        v[i] = o - h;
        double lm = f(ctx);
        v[i] = o;
        num[i] = (lp - lm) / (2.0 * h);
    }
    double e = norm_err(analytic, num, n, 0.0);
    free(num);
    return e;
}

static void fill_uniform(yc_rng *r, double *v, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        v[i] = yc_rng_range(r, lo, hi);
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

typedef struct conv_fd {
    ref_conv g;
    double *x, *w, *b, *gy, *y;
} conv_fd;

static double conv_loss(void *ctx)
{
    conv_fd *c = ctx;
    ref_conv2d_fwd(&c->g, c->x, c->w, c->b, c->y);
    return dot(c->gy, c->y, (size_t)c->g.N * c->g.K * ref_conv_P(&c->g) * ref_conv_Q(&c->g));
}

START_TEST(fd_conv)
{
    static const ref_conv geoms[] = {
        {2, 3, 7, 6, 4, 3, 3, 2, 2, 1, 1}, /* 3x3 s2 p1 */
        {1, 2, 9, 8, 3, 6, 6, 2, 2, 2, 2}, /* 6x6 s2 p2 */
        {2, 3, 5, 4, 2, 3, 3, 1, 1, 1, 1}, /* 3x3 s1 p1 */
        {2, 4, 3, 5, 3, 1, 1, 1, 1, 0, 0}, /* 1x1 */
        {1, 2, 7, 5, 2, 5, 3, 2, 1, 2, 0}, /* 5x3, strides 2x1, padding 2x0 */
    };
    yc_rng r;
    yc_rng_seed(&r, 11, 1);
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        conv_fd c = {.g = geoms[gi]};
        const ref_conv *g = &c.g;
        size_t nx = (size_t)g->N * g->C * g->H * g->W, nw = (size_t)g->K * g->C * g->R * g->S;
        size_t ny = (size_t)g->N * g->K * ref_conv_P(g) * ref_conv_Q(g);
        c.x = dalloc(nx), c.w = dalloc(nw), c.b = dalloc(g->K), c.gy = dalloc(ny), c.y = dalloc(ny);
        fill_uniform(&r, c.x, nx, -1, 1);
        fill_uniform(&r, c.w, nw, -1, 1);
        fill_uniform(&r, c.b, g->K, -1, 1);
        fill_uniform(&r, c.gy, ny, -1, 1);
        double *dx = dalloc(nx), *dw = dalloc(nw), *db = dalloc(g->K);
        ref_conv2d_bwd_data(g, c.gy, c.w, dx);
        ref_conv2d_bwd_filter(g, c.x, c.gy, dw, db);
        /* L is linear in each argument: central differences are exact up to rounding */
        double ex = fd_check(c.x, nx, dx, 1e-3, conv_loss, &c);
        double ew = fd_check(c.w, nw, dw, 1e-3, conv_loss, &c);
        double eb = fd_check(c.b, g->K, db, 1e-3, conv_loss, &c);
        ck_assert_msg(ex < 1e-9 && ew < 1e-9 && eb < 1e-9, "conv geometry %zu: dx %g dW %g db %g", gi, ex, ew,
                      eb);
        free(c.x), free(c.w), free(c.b), free(c.gy), free(c.y), free(dx), free(dw), free(db);
    }
}
END_TEST

typedef struct bn_fd {
    int N, C, HW;
    double eps;
    double *x, *gamma, *beta, *gy, *y, *mean, *var;
} bn_fd;

static double bn_loss(void *ctx)
{
    bn_fd *b = ctx;
    ref_bn_train(b->x, b->N, b->C, b->HW, b->gamma, b->beta, b->eps, b->y, b->mean, b->var);
    return dot(b->gy, b->y, (size_t)b->N * b->C * b->HW);
}

START_TEST(fd_bn)
{
    yc_rng r;
    yc_rng_seed(&r, 12, 1);
    bn_fd b = {.N = 3, .C = 4, .HW = 5, .eps = 1e-3};
    size_t n = (size_t)b.N * b.C * b.HW;
    b.x = dalloc(n), b.gy = dalloc(n), b.y = dalloc(n);
    b.gamma = dalloc(b.C), b.beta = dalloc(b.C), b.mean = dalloc(b.C), b.var = dalloc(b.C);
    fill_uniform(&r, b.x, n, -2, 3);
    fill_uniform(&r, b.gy, n, -1, 1);
    fill_uniform(&r, b.gamma, b.C, 0.5, 1.5);
    fill_uniform(&r, b.beta, b.C, -1, 1);
    double *dx = dalloc(n), *dg = dalloc(b.C), *dbeta = dalloc(b.C), *invstd = dalloc(b.C);
    bn_loss(&b);
    for (int c = 0; c < b.C; c++)
        invstd[c] = 1.0 / sqrt(b.var[c] + b.eps);
    ref_bn_bwd(b.gy, b.x, b.N, b.C, b.HW, b.gamma, b.mean, invstd, dx, dg, dbeta);
    double ex = fd_check(b.x, n, dx, 1e-5, bn_loss, &b);
    double eg = fd_check(b.gamma, b.C, dg, 1e-5, bn_loss, &b);
    double eb = fd_check(b.beta, b.C, dbeta, 1e-5, bn_loss, &b);
    ck_assert_msg(ex < 1e-7 && eg < 1e-7 && eb < 1e-7, "bn: dx %g dgamma %g dbeta %g", ex, eg, eb);
    free(b.x), free(b.gy), free(b.y), free(b.gamma), free(b.beta), free(b.mean), free(b.var);
    free(dx), free(dg), free(dbeta), free(invstd);
}
END_TEST

typedef struct simple_fd {
    /* forward of the op under test on x into y (n_out values) */
    void (*fwd)(const struct simple_fd *s);
    double *x, *gy, *y;
    size_t nx, ny;
    int N, C, H, W, k, stride, pad, f;
} simple_fd;

static double simple_loss(void *ctx)
{
    simple_fd *s = ctx;
    s->fwd(s);
    return dot(s->gy, s->y, s->ny);
}

static void silu_fwd_fd(const simple_fd *s)
{
    ref_silu(s->x, s->nx, s->y);
}

static void pool_fwd_fd(const simple_fd *s)
{
    ref_maxpool_fwd(s->x, s->N, s->C, s->H, s->W, s->k, s->stride, s->pad, s->y);
}

static void up_fwd_fd(const simple_fd *s)
{
    ref_upsample_fwd(s->x, s->N, s->C, s->H, s->W, s->f, s->y);
}

static void avg_fwd_fd(const simple_fd *s)
{
    ref_avgpool_fwd(s->x, s->N, s->C, s->H, s->W, s->y);
}

START_TEST(fd_silu)
{
    yc_rng r;
    yc_rng_seed(&r, 13, 1);
    simple_fd s = {.fwd = silu_fwd_fd, .nx = 200, .ny = 200};
    s.x = dalloc(s.nx), s.gy = dalloc(s.ny), s.y = dalloc(s.ny);
    fill_uniform(&r, s.x, s.nx, -12, 12);
    fill_uniform(&r, s.gy, s.ny, -1, 1);
    double *dx = dalloc(s.nx);
    ref_silu_bwd(s.gy, s.x, s.nx, dx);
    double e = fd_check(s.x, s.nx, dx, 1e-5, simple_loss, &s);
    ck_assert_msg(e < 1e-8, "silu: %g", e);
    free(s.x), free(s.gy), free(s.y), free(dx);
}
END_TEST

START_TEST(fd_maxpool)
{
    static const int params[][3] = {{5, 1, 2}, {2, 2, 0}, {3, 2, 1}, {3, 1, 1}};
    yc_rng r;
    yc_rng_seed(&r, 14, 1);
    for (size_t pi = 0; pi < sizeof params / sizeof params[0]; pi++) {
        simple_fd s = {.fwd = pool_fwd_fd, .N = 2, .C = 2, .H = 7, .W = 6};
        s.k = params[pi][0], s.stride = params[pi][1], s.pad = params[pi][2];
        int P = ref_pool_out(s.H, s.k, s.stride, s.pad), Q = ref_pool_out(s.W, s.k, s.stride, s.pad);
        s.nx = (size_t)s.N * s.C * s.H * s.W, s.ny = (size_t)s.N * s.C * P * Q;
        s.x = dalloc(s.nx), s.gy = dalloc(s.ny), s.y = dalloc(s.ny);
        /* distinct values 0.01 apart (a random permutation): no ties within 2h */
        for (size_t i = 0; i < s.nx; i++)
            s.x[i] = 0.01 * (double)i;
        for (size_t i = s.nx - 1; i > 0; i--) {
            size_t j = yc_rng_below(&r, (uint32_t)(i + 1));
            double t = s.x[i];
            s.x[i] = s.x[j], s.x[j] = t;
        }
        fill_uniform(&r, s.gy, s.ny, -1, 1);
        double *dx = dalloc(s.nx);
        ref_maxpool_bwd(s.gy, s.x, s.N, s.C, s.H, s.W, s.k, s.stride, s.pad, dx);
        double e = fd_check(s.x, s.nx, dx, 1e-4, simple_loss, &s);
        ck_assert_msg(e < 1e-9, "maxpool k%d s%d p%d: %g", s.k, s.stride, s.pad, e);
        free(s.x), free(s.gy), free(s.y), free(dx);
    }
}
END_TEST

START_TEST(fd_upsample)
{
    yc_rng r;
    yc_rng_seed(&r, 15, 1);
    for (int f = 1; f <= 3; f++) {
        simple_fd s = {.fwd = up_fwd_fd, .N = 2, .C = 3, .H = 4, .W = 3, .f = f};
        s.nx = (size_t)s.N * s.C * s.H * s.W, s.ny = s.nx * f * f;
        s.x = dalloc(s.nx), s.gy = dalloc(s.ny), s.y = dalloc(s.ny);
        fill_uniform(&r, s.x, s.nx, -1, 1);
        fill_uniform(&r, s.gy, s.ny, -1, 1);
        double *dx = dalloc(s.nx);
        ref_upsample_bwd(s.gy, s.N, s.C, s.H, s.W, f, dx);
        double e = fd_check(s.x, s.nx, dx, 1e-3, simple_loss, &s);
        ck_assert_msg(e < 1e-9, "upsample f%d: %g", f, e);
        free(s.x), free(s.gy), free(s.y), free(dx);
    }
}
END_TEST

START_TEST(fd_avgpool)
{
    static const int shapes[][2] = {{1, 1}, {4, 3}, {5, 7}};
    yc_rng r;
    yc_rng_seed(&r, 16, 1);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        simple_fd s = {.fwd = avg_fwd_fd, .N = 2, .C = 3, .H = shapes[k][0], .W = shapes[k][1]};
        s.nx = (size_t)s.N * s.C * s.H * s.W, s.ny = (size_t)s.N * s.C;
        s.x = dalloc(s.nx), s.gy = dalloc(s.ny), s.y = dalloc(s.ny);
        fill_uniform(&r, s.x, s.nx, -1, 1);
        fill_uniform(&r, s.gy, s.ny, -1, 1);
        double *dx = dalloc(s.nx);
        ref_avgpool_bwd(s.gy, s.N, s.C, s.H, s.W, dx);
        double e = fd_check(s.x, s.nx, dx, 1e-3, simple_loss, &s);
        ck_assert_msg(e < 1e-9, "avgpool %dx%d: %g", s.H, s.W, e);
        free(s.x), free(s.gy), free(s.y), free(dx);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 2. The table of cases, on every backend.
 * ------------------------------------------------------------------------------------------- */
typedef struct op_case {
    yc_op_kind kind;
    /* the op's input x (N,C,H,W); for backward ops, the forward input */
    int n, c, h, w;
    /* conv: filters, window, strides, padding.  maxpool: kh = kernel, sh = stride, ph = padding.
     * upsample: kh = factor.  bn: kh = 0 for (eps 1e-3, momentum 0.03), 1 for (1e-5, 0.1). */
    int k, kh, kw, sh, sw, ph, pw;
    /* conv: with b (forward) or db (backward-filter); BN_EVAL: with SiLU */
    int bias;
    /* op->accumulate */
    int acc;
    /* activations are views: nstride > c*h*w and offsets that are not 64-byte aligned */
    int view;
    /* inputs drawn from {-1, -0.5, 0, 0.5, 1} (max-pool ties) */
    int ties;
    /* sgd, adam, ema: index into sgd_pars, adam_pars, ema_decays */
    int opt;
    /* FP16 storage: F16_IN makes the activation inputs FP16, F16_OUT the activation outputs (the
     * slots that may be FP16, see f16_slot) */
    int f16;
} op_case;

#define F16_IN 1
#define F16_OUT 2
#define F16_BOTH (F16_IN | F16_OUT)

#define MAX_CASES 1200
static op_case cases[MAX_CASES];
static int ncases;

static void add_case(op_case c)
{
    if (ncases >= MAX_CASES) {
        fprintf(stderr, "test_ops: more than %d cases: raise MAX_CASES\n", MAX_CASES);
        exit(EXIT_FAILURE);
    }
    cases[ncases++] = c;
}

/* Sets a case's x to (n, chw[0], chw[1], chw[2]). */
static void set_shape(op_case *c, int n, const int *chw)
{
    c->n = n;
    c->c = chw[0];
    c->h = chw[1];
    c->w = chw[2];
}

/* Parameters of the optimizer cases. */
typedef struct sgd_par {
    float lr, momentum, wd, scale;
    int nesterov;
} sgd_par;
static const sgd_par sgd_pars[] = {
    {0.01f, 0.937f, 5e-4f, 1.0f, 1}, /* YOLOv5's default: Nesterov, decayed weights */
    {0.01f, 0.937f, 0.0f, 1.0f, 0},  /* plain momentum, no decay (biases, BN weights) */
    {0.1f, 0.8f, 1e-3f, 0.25f, 1},   /* warmup momentum, clipped gradients */
    {0.05f, 0.0f, 5e-4f, 0.5f, 0},   /* momentum 0: plain SGD, clipped */
    {0.02f, 0.0f, 0.0f, 1.0f, 1},    /* momentum 0 with Nesterov: plain SGD too */
};
typedef struct adam_par {
    float lr, beta1, beta2, eps, wd, scale;
    int step, decoupled;
} adam_par;
static const adam_par adam_pars[] = {
    {1e-3f, 0.937f, 0.999f, 1e-8f, 5e-4f, 1.0f, 1, 0}, /* first step: m and v start at 0 */
    {1e-3f, 0.937f, 0.999f, 1e-8f, 0.0f, 0.6f, 2, 0},  /* no decay, clipped */
    {0.5f, 0.9f, 0.99f, 0.1f, 5e-4f, 1.0f, 10, 0},     /* large eps and lr: eps placement shows */
    {1e-3f, 0.937f, 0.999f, 1e-8f, 0.05f, 1.0f, 10, 1}, /* AdamW */
    {1e-2f, 0.937f, 0.999f, 1e-8f, 0.0f, 0.3f, 1, 1},  /* AdamW without decay, first step, clipped */
};
/* 0, 1, between, and YOLOv5's decay after 1 and 10000 updates */
static const float ema_decays[] = {0.0f, 1.0f, 0.5f, 4.99825e-4f, 0.99316275f};
/* dropout probabilities (none, Classify's usual ones, most) and the seed of each case */
static const double drop_ps[] = {0.0, 0.2, 0.5, 0.9};
#define DROP_SEED 1234u
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Whether slot i of an op kind may hold FP16 (the activation slots: backend.h; src/backend/op.c enforces
 * them, this is the test's own statement of the rule). */
static bool f16_slot(yc_op_kind kind, bool dst, int i)
{
    switch (kind) {
    case YC_OP_CONV2D:
    case YC_OP_BN_TRAIN:
    case YC_OP_BN_EVAL:
    case YC_OP_BN_SILU_TRAIN:
    case YC_OP_BN_SILU_APPLY:
    case YC_OP_SILU:
    case YC_OP_COPY:
    case YC_OP_MAXPOOL:
    case YC_OP_UPSAMPLE:
    case YC_OP_AVGPOOL:
        return i == 0; /* x and y */
    case YC_OP_CONV2D_BWD_FILTER:
    case YC_OP_SUMSQ:
        return !dst && i == 0; /* x */
    case YC_OP_BN_BWD:
    case YC_OP_BN_SILU_BWD:
    case YC_OP_SILU_BWD:
    case YC_OP_MAXPOOL_BWD:
        return !dst && i == 1; /* the forward input x */
    case YC_OP_ADD:
        return true;
    case YC_OP_FILL:
        return dst;
    default:
        return false;
    }
}

/* FP16 variants of the FP32 cases built so far: every case of an op with FP16 slots (every other
 * convolution and every third max-pool case), the FP16 slots cycling through inputs and outputs,
 * inputs only, and outputs only. */
static void add_f16_cases(void)
{
    int n0 = ncases, seen[YC_OP_COUNT] = {0};
    for (int i = 0; i < n0; i++) {
        op_case c = cases[i];
        bool in = f16_slot(c.kind, false, 0) || f16_slot(c.kind, false, 1);
        bool out = f16_slot(c.kind, true, 0);
        if (!in && !out)
            continue;
        int k = seen[c.kind]++;
        bool conv = c.kind == YC_OP_CONV2D || c.kind == YC_OP_CONV2D_BWD_FILTER;
        bool pool = c.kind == YC_OP_MAXPOOL || c.kind == YC_OP_MAXPOOL_BWD;
        if ((conv && k % 2) || (pool && k % 3))
            continue;
        static const int masks[] = {F16_BOTH, F16_IN, F16_OUT};
        c.f16 = in && out ? masks[k % 3] : in ? F16_IN : F16_OUT;
        add_case(c);
    }
    /* upsampling by more than a conversion chunk (cpu/upsample.c), FP16 to FP32 and back */
    for (int m = F16_IN; m <= F16_OUT; m++) {
        op_case c = {.kind = YC_OP_UPSAMPLE, .n = 1, .c = 2, .h = 1, .w = 2, .kh = 520, .f16 = m};
        add_case(c);
    }
}

/* Fills `cases`: every op over shapes, parameters and the accumulate/view/batch variants. */
static void build_cases(void)
{
    /* -, c, h, w, K, kh, kw, sh, sw, ph, pw (the batch comes from the variants) */
    static const int convs[][11] = {
        {0, 3, 13, 12, 4, 6, 6, 2, 2, 2, 2},   /* the YOLOv5 stem: 6x6 s2 p2 */
        {0, 5, 9, 8, 6, 3, 3, 2, 2, 1, 1},     /* 3x3 s2 p1 (downsampling) */
        {0, 4, 7, 7, 5, 3, 3, 1, 1, 1, 1},     /* 3x3 s1 p1 (bottlenecks) */
        {0, 6, 5, 7, 3, 1, 1, 1, 1, 0, 0},     /* 1x1: no im2col */
        {0, 2, 7, 5, 3, 3, 3, 1, 1, 0, 0},     /* 3x3 without padding, odd sizes */
        {0, 3, 9, 6, 2, 5, 3, 2, 1, 2, 0},     /* asymmetric window, strides and padding */
        {0, 4, 6, 5, 3, 1, 1, 2, 2, 0, 0},     /* 1x1 with stride 2: im2col */
        {0, 16, 20, 19, 24, 3, 3, 1, 1, 1, 1}, /* larger: several GEMM blocks */
        /* more than one column block per image (cpu/conv.c: YC_CONV_BLOCK = 2^18 floats) */
        {0, 16, 90, 90, 3, 3, 3, 1, 1, 1, 1},
        {0, 8, 130, 129, 3, 6, 6, 2, 2, 2, 2},
        {0, 64, 130, 130, 3, 1, 1, 1, 1, 0, 0},
        /* backward-filter with channel-minor phases (cpu/conv.c's tapwise: C a multiple of 16, >= 32,
         * and K*C*R*S above 20480): 32 channels (whole panels of columns), 48 (a half panel read past
         * each position), and two blocks per image */
        {0, 32, 11, 10, 72, 3, 3, 1, 1, 1, 1},
        {0, 48, 9, 12, 48, 3, 3, 2, 2, 1, 1},
        {0, 32, 40, 62, 72, 3, 3, 1, 1, 1, 1},
        /* Winograd (cpu/winograd.c: 3x3 s1 p1).  F(4x4, 3x3) where K*C <= 128*128, forward and
         * backward-data from 32 channels (the shapes above with 32 take it), backward-filter from 64
         * in multiples of 16: odd sizes (partial 4 x 4 tiles) in one block, blocks of 32 tiles that
         * start inside tile rows and span images, 72 channels (backward-filter falls back).
         * F(2x2, 3x3) above that (forward, backward-data from 64 and 32 channels, backward-filter
         * from 128): odd sizes in one block, and blocks that start inside tile rows and span images;
         * backward-filter's blocks are one per thread (with 2 threads, 8 and 23 tiles for the
         * first, which start inside tile rows of 5 and span images) */
        {0, 64, 9, 11, 64, 3, 3, 1, 1, 1, 1},
        {0, 64, 20, 19, 80, 3, 3, 1, 1, 1, 1},
        {0, 72, 7, 6, 64, 3, 3, 1, 1, 1, 1},
        {0, 128, 6, 9, 144, 3, 3, 1, 1, 1, 1},
        {0, 128, 20, 19, 144, 3, 3, 1, 1, 1, 1},
    };
    /* batch, bias, accumulate, view */
    static const int variants[][4] = {{1, 1, 0, 0}, {3, 0, 1, 1}, {3, 1, 0, 1}, {4, 1, 1, 0}, {2, 0, 0, 0}};
    static const yc_op_kind conv_kinds[] = {YC_OP_CONV2D, YC_OP_CONV2D_BWD_DATA, YC_OP_CONV2D_BWD_FILTER};
    for (size_t g = 0; g < sizeof convs / sizeof convs[0]; g++)
        for (size_t k = 0; k < 3; k++)
            for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
                const int *p = convs[g];
                if (p[1] * p[5] * p[6] * p[2] * p[3] > 1 << 20 && (v == 0 || v == 3 || v == 4))
                    continue; /* the big ones: two variants are enough */
                op_case c = {
                    .kind = conv_kinds[k], .k = p[4], .kh = p[5], .kw = p[6], .sh = p[7], .sw = p[8]};
                set_shape(&c, variants[v][0], p + 1);
                c.ph = p[9], c.pw = p[10], c.bias = variants[v][1], c.view = variants[v][3];
                c.acc = conv_kinds[k] == YC_OP_CONV2D_BWD_DATA ? variants[v][2] : 0;
                add_case(c);
            }

    /* batch norm: shapes x (acc, view) x parameter sets */
    static const int bns[][4] = {{3, 5, 7, 6}, {1, 3, 1, 2}, {2, 4, 1, 1}, {3, 6, 30, 31}};
    static const yc_op_kind bn_kinds[] = {YC_OP_BN_TRAIN,      YC_OP_BN_EVAL,       YC_OP_BN_BWD,
                                          YC_OP_BN_SILU_TRAIN, YC_OP_BN_SILU_APPLY, YC_OP_BN_SILU_BWD};
    for (size_t s = 0; s < sizeof bns / sizeof bns[0]; s++)
        for (size_t k = 0; k < sizeof bn_kinds / sizeof bn_kinds[0]; k++)
            for (int v = 0; v < 4; v++) {
                op_case c = {.kind = bn_kinds[k]};
                set_shape(&c, bns[s][0], bns[s] + 1);
                c.acc = bn_kinds[k] == YC_OP_BN_BWD || bn_kinds[k] == YC_OP_BN_SILU_BWD ? v & 1 : 0;
                c.bias = bn_kinds[k] == YC_OP_BN_EVAL ? v & 1 : 0; /* BN_EVAL: with SiLU */
                c.view = v >> 1 & 1;
                c.kh = (int)(s + v) & 1;
                add_case(c);
            }

    /* elementwise: shapes x kinds x (acc, view) */
    static const int ews[][4] = {{3, 4, 5, 7}, {1, 1, 1, 1}, {1, 3, 2, 9}, {3, 8, 40, 41}};
    static const yc_op_kind ew_kinds[] = {YC_OP_SILU, YC_OP_SILU_BWD, YC_OP_ADD, YC_OP_COPY, YC_OP_FILL};
    for (size_t s = 0; s < sizeof ews / sizeof ews[0]; s++)
        for (size_t k = 0; k < sizeof ew_kinds / sizeof ew_kinds[0]; k++)
            for (int v = 0; v < 4; v++) {
                yc_op_kind kind = ew_kinds[k];
                bool acc_op = kind == YC_OP_SILU_BWD || kind == YC_OP_COPY;
                if (!acc_op && (v & 1))
                    continue;
                op_case c = {.kind = kind};
                set_shape(&c, ews[s][0], ews[s] + 1);
                c.acc = v & 1;
                c.view = v >> 1 & 1;
                add_case(c);
            }

    /* max pooling: kernel, stride, padding x shapes x (acc, view, ties) */
    static const int pools[][3] = {{5, 1, 2}, {2, 2, 0}, {3, 2, 1}, {3, 1, 1}, {1, 1, 0}, {3, 3, 0}};
    static const int pshapes[][4] = {{3, 4, 7, 6}, {1, 2, 5, 9}, {3, 4, 33, 31}};
    for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++)
        for (size_t s = 0; s < sizeof pshapes / sizeof pshapes[0]; s++)
            for (int k = 0; k < 2; k++)
                for (int v = 0; v < 4; v++) {
                    op_case c = {.kind = k ? YC_OP_MAXPOOL_BWD : YC_OP_MAXPOOL};
                    set_shape(&c, pshapes[s][0], pshapes[s] + 1);
                    c.kh = pools[p][0], c.sh = pools[p][1], c.ph = pools[p][2];
                    c.acc = k ? v & 1 : 0;
                    c.view = v >> 1 & 1;
                    c.ties = (v == 0 || v == 3);
                    add_case(c);
                }

    /* nearest upsampling: factor x shapes x (acc, view) */
    static const int ups[][4] = {{3, 4, 5, 6}, {1, 2, 3, 1}, {2, 5, 21, 20}};
    for (int f = 1; f <= 3; f++)
        for (size_t s = 0; s < sizeof ups / sizeof ups[0]; s++)
            for (int k = 0; k < 2; k++)
                for (int v = 0; v < 4; v++) {
                    if (!k && (v & 1))
                        continue;
                    op_case c = {.kind = k ? YC_OP_UPSAMPLE_BWD : YC_OP_UPSAMPLE, .kh = f};
                    set_shape(&c, ups[s][0], ups[s] + 1);
                    c.acc = v & 1;
                    c.view = v >> 1 & 1;
                    add_case(c);
                }

    /* global average pooling: shapes (a 1x1 plane, odd planes, one larger than a conversion chunk)
     * x (acc, view) */
    static const int avgs[][4] = {{3, 4, 1, 1}, {2, 5, 7, 3}, {1, 3, 23, 29}, {4, 1280, 2, 2}};
    for (size_t s = 0; s < sizeof avgs / sizeof avgs[0]; s++)
        for (int k = 0; k < 2; k++)
            for (int v = 0; v < 4; v++) {
                if (!k && (v & 1))
                    continue;
                op_case c = {.kind = k ? YC_OP_AVGPOOL_BWD : YC_OP_AVGPOOL};
                set_shape(&c, avgs[s][0], avgs[s] + 1);
                c.acc = v & 1;
                c.view = v >> 1 & 1;
                add_case(c);
            }

    /* dropout: shapes x probabilities x (acc, view); one shape larger than 2^16 elements */
    static const int drops[][4] = {{3, 4, 5, 7}, {1, 1, 1, 1}, {4, 1280, 1, 1}, {2, 3, 111, 101}};
    for (size_t s = 0; s < sizeof drops / sizeof drops[0]; s++)
        for (int k = 0; k < NELEMS(drop_ps); k++)
            for (int v = 0; v < 4; v++) {
                op_case c = {.kind = YC_OP_DROPOUT, .opt = k};
                set_shape(&c, drops[s][0], drops[s] + 1);
                c.acc = v & 1;
                c.view = v >> 1 & 1;
                add_case(c);
            }

    /* optimizer steps and sums of squares: dense tensors of 1, odd, many (several threads) elements
     * and a 4-D parameter shape x parameter sets (accumulate 0 and 1 for sumsq) */
    static const int opts[][4] = {{1, 1, 1, 1}, {1, 7, 1, 1}, {1, 1000, 1, 1}, {1, 100003, 1, 1}, {16, 3, 3, 3}};
    for (size_t s = 0; s < sizeof opts / sizeof opts[0]; s++) {
        for (int k = 0; k < NELEMS(sgd_pars) + NELEMS(adam_pars) + NELEMS(ema_decays); k++) {
            op_case c = {.kind = YC_OP_SGD, .opt = k};
            if (k >= NELEMS(sgd_pars) + NELEMS(adam_pars))
                c.kind = YC_OP_EMA, c.opt = k - NELEMS(sgd_pars) - NELEMS(adam_pars);
            else if (k >= NELEMS(sgd_pars))
                c.kind = YC_OP_ADAM, c.opt = k - NELEMS(sgd_pars);
            set_shape(&c, opts[s][0], opts[s] + 1);
            add_case(c);
        }
        for (int acc = 0; acc < 2; acc++) {
            op_case c = {.kind = YC_OP_SUMSQ, .acc = acc};
            set_shape(&c, opts[s][0], opts[s] + 1);
            add_case(c);
        }
    }
    add_f16_cases();
}

static float bn_eps(const op_case *c)
{
    return c->kh ? 1e-5f : 1e-3f;
}

static float bn_momentum(const op_case *c)
{
    return c->kh ? 0.1f : 0.03f;
}

static const char *case_label(const op_case *c, char *buf, size_t len)
{
    char par[128] = "";
    switch (c->kind) {
    case YC_OP_CONV2D:
    case YC_OP_CONV2D_BWD_DATA:
    case YC_OP_CONV2D_BWD_FILTER:
        snprintf(par, sizeof par, " K%d %dx%d s%dx%d p%dx%d%s", c->k, c->kh, c->kw, c->sh, c->sw, c->ph,
                 c->pw, c->bias ? " bias" : "");
        break;
    case YC_OP_BN_TRAIN:
    case YC_OP_BN_EVAL:
    case YC_OP_BN_BWD:
    case YC_OP_BN_SILU_TRAIN:
    case YC_OP_BN_SILU_BWD:
        snprintf(par, sizeof par, " eps %g momentum %g%s", (double)bn_eps(c), (double)bn_momentum(c),
                 c->kind == YC_OP_BN_EVAL && c->bias ? " silu" : "");
        break;
    case YC_OP_MAXPOOL:
    case YC_OP_MAXPOOL_BWD:
        snprintf(par, sizeof par, " k%d s%d p%d%s", c->kh, c->sh, c->ph, c->ties ? " ties" : "");
        break;
    case YC_OP_UPSAMPLE:
    case YC_OP_UPSAMPLE_BWD:
        snprintf(par, sizeof par, " f%d", c->kh);
        break;
    case YC_OP_SGD: {
        const sgd_par *q = &sgd_pars[c->opt];
        snprintf(par, sizeof par, " lr %g momentum %g wd %g scale %g%s", (double)q->lr, (double)q->momentum,
                 (double)q->wd, (double)q->scale, q->nesterov ? " nesterov" : "");
        break;
    }
    case YC_OP_ADAM: {
        const adam_par *q = &adam_pars[c->opt];
        snprintf(par, sizeof par, "%s lr %g betas %g %g eps %g wd %g scale %g t %d", q->decoupled ? "w" : "",
                 (double)q->lr, (double)q->beta1, (double)q->beta2, (double)q->eps, (double)q->wd,
                 (double)q->scale, q->step);
        break;
    }
    case YC_OP_DROPOUT:
        snprintf(par, sizeof par, " p %g seed %u", drop_ps[c->opt], DROP_SEED + (unsigned)c->opt);
        break;
    case YC_OP_EMA:
        snprintf(par, sizeof par, " decay %g", (double)ema_decays[c->opt]);
        break;
    default:
        break;
    }
    static const char *const f16[] = {"", " f16-in", " f16-out", " f16"};
    snprintf(buf, len, "%s x(%d,%d,%d,%d)%s%s%s%s", yc_op_kind_name(c->kind), c->n, c->c, c->h, c->w, par,
             c->acc ? " acc" : "", c->view ? " view" : "", f16[c->f16]);
    return buf;
}

/* What a tensor of a case is. */
enum role {
    R_IN,    /* read only: must be unchanged */
    R_OUT,   /* overwritten: starts as NaN */
    R_ACC,   /* honours accumulate: starts as NaN (acc 0) or values (acc 1) */
    R_PGRAD, /* parameter gradient: always added to */
    R_RW,    /* read and written (running statistics) */
};
enum init {
    I_UNIFORM, /* uniform in [-1, 1) (or ties values) */
    I_POS,     /* uniform in [0.5, 1.5) */
    I_WIDE,    /* uniform in [-8, 8) (SiLU inputs) */
    I_SHIFTED, /* 3 + uniform in [-2, 2) (batch-norm inputs with a nonzero mean) */
    I_STATS,   /* [mean; invstd] of the BN input x (src[1]; src[0] for bn_silu_apply) */
    I_ZERO,    /* 0 (Adam's moments before the first step) */
};

typedef struct tdesc {
    const char *name;
    /* shape; n == 0 for an unused slot */
    int n, c, h, w;
    int role, init;
    /* an activation: a view when the case asks for views */
    bool act;
} tdesc;

typedef struct tspec {
    tdesc src[YC_OP_MAX_SRC], dst[YC_OP_MAX_DST];
} tspec;

static tdesc td(const char *name, int n, int c, int h, int w, int role, int init, bool act)
{
    return (tdesc){name, n, c, h, w, role, init, act};
}

static ref_conv case_conv(const op_case *c)
{
    return (ref_conv){c->n, c->c, c->h, c->w, c->k, c->kh, c->kw, c->sh, c->sw, c->ph, c->pw};
}

#define FILL_VALUE (-2.75f)

/* The op and its tensors' shapes and roles for a case. */
static void case_spec(const op_case *c, tspec *sp, yc_op *op)
{
    memset(sp, 0, sizeof *sp);
    memset(op, 0, sizeof *op);
    op->kind = c->kind;
    op->accumulate = c->acc;
    op->name = "case";
    int N = c->n, C = c->c, H = c->h, W = c->w;
    switch (c->kind) {
    case YC_OP_CONV2D:
    case YC_OP_CONV2D_BWD_DATA:
    case YC_OP_CONV2D_BWD_FILTER: {
        ref_conv g = case_conv(c);
        int P = ref_conv_P(&g), Q = ref_conv_Q(&g);
        op->p.conv.kh = c->kh, op->p.conv.kw = c->kw, op->p.conv.stride_h = c->sh,
        op->p.conv.stride_w = c->sw;
        op->p.conv.pad_h = c->ph, op->p.conv.pad_w = c->pw, op->p.conv.groups = 1;
        if (c->kind == YC_OP_CONV2D) {
            sp->src[0] = td("x", N, C, H, W, R_IN, I_UNIFORM, true);
            sp->src[1] = td("W", c->k, C, c->kh, c->kw, R_IN, I_UNIFORM, false);
            if (c->bias)
                sp->src[2] = td("b", 1, c->k, 1, 1, R_IN, I_UNIFORM, false);
            sp->dst[0] = td("y", N, c->k, P, Q, R_OUT, I_UNIFORM, true);
        } else if (c->kind == YC_OP_CONV2D_BWD_DATA) {
            sp->src[0] = td("dy", N, c->k, P, Q, R_IN, I_UNIFORM, true);
            sp->src[1] = td("W", c->k, C, c->kh, c->kw, R_IN, I_UNIFORM, false);
            sp->dst[0] = td("dx", N, C, H, W, R_ACC, I_UNIFORM, true);
        } else {
            sp->src[0] = td("x", N, C, H, W, R_IN, I_UNIFORM, true);
            sp->src[1] = td("dy", N, c->k, P, Q, R_IN, I_UNIFORM, true);
            sp->dst[0] = td("dW", c->k, C, c->kh, c->kw, R_PGRAD, I_UNIFORM, false);
            if (c->bias)
                sp->dst[1] = td("db", 1, c->k, 1, 1, R_PGRAD, I_UNIFORM, false);
        }
        break;
    }
    case YC_OP_BN_TRAIN:
        op->p.bn.eps = bn_eps(c), op->p.bn.momentum = bn_momentum(c);
        sp->src[0] = td("x", N, C, H, W, R_IN, I_SHIFTED, true);
        sp->src[1] = td("gamma", 1, C, 1, 1, R_IN, I_POS, false);
        sp->src[2] = td("beta", 1, C, 1, 1, R_IN, I_UNIFORM, false);
        sp->dst[0] = td("y", N, C, H, W, R_OUT, I_UNIFORM, true);
        sp->dst[1] = td("stats", 2, C, 1, 1, R_OUT, I_UNIFORM, false);
        sp->dst[2] = td("running_mean", 1, C, 1, 1, R_RW, I_UNIFORM, false);
        sp->dst[3] = td("running_var", 1, C, 1, 1, R_RW, I_POS, false);
        break;
    case YC_OP_BN_SILU_TRAIN:
        op->p.bn.eps = bn_eps(c), op->p.bn.momentum = bn_momentum(c);
        sp->src[0] = td("x", N, C, H, W, R_IN, I_SHIFTED, true);
        sp->src[1] = td("gamma", 1, C, 1, 1, R_IN, I_POS, false);
        sp->src[2] = td("beta", 1, C, 1, 1, R_IN, I_UNIFORM, false);
        sp->dst[0] = td("a", N, C, H, W, R_OUT, I_UNIFORM, true);
        sp->dst[1] = td("stats", 2, C, 1, 1, R_OUT, I_UNIFORM, false);
        sp->dst[2] = td("running_mean", 1, C, 1, 1, R_RW, I_UNIFORM, false);
        sp->dst[3] = td("running_var", 1, C, 1, 1, R_RW, I_POS, false);
        break;
    case YC_OP_BN_SILU_APPLY:
        sp->src[0] = td("x", N, C, H, W, R_IN, I_SHIFTED, true);
        sp->src[1] = td("gamma", 1, C, 1, 1, R_IN, I_POS, false);
        sp->src[2] = td("beta", 1, C, 1, 1, R_IN, I_UNIFORM, false);
        sp->src[3] = td("stats", 2, C, 1, 1, R_IN, I_STATS, false);
        sp->dst[0] = td("a", N, C, H, W, R_OUT, I_UNIFORM, true);
        break;
    case YC_OP_BN_SILU_BWD:
        op->p.bn.eps = bn_eps(c), op->p.bn.momentum = bn_momentum(c);
        sp->src[0] = td("da", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->src[1] = td("x", N, C, H, W, R_IN, I_SHIFTED, true);
        sp->src[2] = td("gamma", 1, C, 1, 1, R_IN, I_POS, false);
        sp->src[3] = td("beta", 1, C, 1, 1, R_IN, I_UNIFORM, false);
        sp->src[4] = td("stats", 2, C, 1, 1, R_IN, I_STATS, false);
        sp->dst[0] = td("dx", N, C, H, W, R_ACC, I_UNIFORM, true);
        sp->dst[1] = td("dgamma", 1, C, 1, 1, R_PGRAD, I_UNIFORM, false);
        sp->dst[2] = td("dbeta", 1, C, 1, 1, R_PGRAD, I_UNIFORM, false);
        break;
    case YC_OP_BN_EVAL:
        op->p.bn.eps = bn_eps(c), op->p.bn.momentum = bn_momentum(c);
        op->p.bn.silu = c->bias;
        sp->src[0] = td("x", N, C, H, W, R_IN, I_SHIFTED, true);
        sp->src[1] = td("gamma", 1, C, 1, 1, R_IN, I_POS, false);
        sp->src[2] = td("beta", 1, C, 1, 1, R_IN, I_UNIFORM, false);
        sp->src[3] = td("running_mean", 1, C, 1, 1, R_IN, I_UNIFORM, false);
        sp->src[4] = td("running_var", 1, C, 1, 1, R_IN, I_POS, false);
        sp->dst[0] = td("y", N, C, H, W, R_OUT, I_UNIFORM, true);
        break;
    case YC_OP_BN_BWD:
        op->p.bn.eps = bn_eps(c), op->p.bn.momentum = bn_momentum(c);
        sp->src[0] = td("dy", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->src[1] = td("x", N, C, H, W, R_IN, I_SHIFTED, true);
        sp->src[2] = td("gamma", 1, C, 1, 1, R_IN, I_POS, false);
        sp->src[3] = td("stats", 2, C, 1, 1, R_IN, I_STATS, false);
        sp->dst[0] = td("dx", N, C, H, W, R_ACC, I_UNIFORM, true);
        sp->dst[1] = td("dgamma", 1, C, 1, 1, R_PGRAD, I_UNIFORM, false);
        sp->dst[2] = td("dbeta", 1, C, 1, 1, R_PGRAD, I_UNIFORM, false);
        break;
    case YC_OP_SILU:
        sp->src[0] = td("x", N, C, H, W, R_IN, I_WIDE, true);
        sp->dst[0] = td("y", N, C, H, W, R_OUT, I_UNIFORM, true);
        break;
    case YC_OP_SILU_BWD:
        sp->src[0] = td("dy", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->src[1] = td("x", N, C, H, W, R_IN, I_WIDE, true);
        sp->dst[0] = td("dx", N, C, H, W, R_ACC, I_UNIFORM, true);
        break;
    case YC_OP_ADD:
        sp->src[0] = td("a", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->src[1] = td("b", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->dst[0] = td("y", N, C, H, W, R_OUT, I_UNIFORM, true);
        break;
    case YC_OP_COPY:
        sp->src[0] = td("a", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->dst[0] = td("y", N, C, H, W, R_ACC, I_UNIFORM, true);
        break;
    case YC_OP_FILL:
        op->p.fill.value = FILL_VALUE;
        sp->dst[0] = td("y", N, C, H, W, R_OUT, I_UNIFORM, true);
        break;
    case YC_OP_MAXPOOL:
    case YC_OP_MAXPOOL_BWD: {
        op->p.pool.k = c->kh, op->p.pool.stride = c->sh, op->p.pool.pad = c->ph;
        int P = ref_pool_out(H, c->kh, c->sh, c->ph), Q = ref_pool_out(W, c->kh, c->sh, c->ph);
        if (c->kind == YC_OP_MAXPOOL) {
            sp->src[0] = td("x", N, C, H, W, R_IN, I_UNIFORM, true);
            sp->dst[0] = td("y", N, C, P, Q, R_OUT, I_UNIFORM, true);
        } else {
            sp->src[0] = td("dy", N, C, P, Q, R_IN, I_UNIFORM, true);
            sp->src[1] = td("x", N, C, H, W, R_IN, I_UNIFORM, true);
            sp->dst[0] = td("dx", N, C, H, W, R_ACC, I_UNIFORM, true);
        }
        break;
    }
    case YC_OP_UPSAMPLE:
        op->p.up.factor = c->kh;
        sp->src[0] = td("x", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->dst[0] = td("y", N, C, H * c->kh, W * c->kh, R_OUT, I_UNIFORM, true);
        break;
    case YC_OP_UPSAMPLE_BWD:
        op->p.up.factor = c->kh;
        sp->src[0] = td("dy", N, C, H * c->kh, W * c->kh, R_IN, I_UNIFORM, true);
        sp->dst[0] = td("dx", N, C, H, W, R_ACC, I_UNIFORM, true);
        break;
    case YC_OP_AVGPOOL:
        sp->src[0] = td("x", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->dst[0] = td("y", N, C, 1, 1, R_OUT, I_UNIFORM, true);
        break;
    case YC_OP_AVGPOOL_BWD:
        sp->src[0] = td("dy", N, C, 1, 1, R_IN, I_UNIFORM, true);
        sp->dst[0] = td("dx", N, C, H, W, R_ACC, I_UNIFORM, true);
        break;
    case YC_OP_DROPOUT:
        yc_dropout_params(op, drop_ps[c->opt], DROP_SEED + (uint32_t)c->opt);
        sp->src[0] = td("x", N, C, H, W, R_IN, I_UNIFORM, true);
        sp->dst[0] = td("y", N, C, H, W, R_ACC, I_UNIFORM, true);
        break;
    case YC_OP_SGD: {
        const sgd_par *q = &sgd_pars[c->opt];
        op->p.sgd.lr = q->lr, op->p.sgd.momentum = q->momentum, op->p.sgd.wd = q->wd;
        op->p.sgd.scale = q->scale, op->p.sgd.nesterov = q->nesterov;
        sp->src[0] = td("grad", N, C, H, W, R_IN, I_UNIFORM, false);
        sp->dst[0] = td("w", N, C, H, W, R_RW, I_UNIFORM, false);
        sp->dst[1] = td("buf", N, C, H, W, R_RW, I_UNIFORM, false);
        break;
    }
    case YC_OP_ADAM: {
        const adam_par *q = &adam_pars[c->opt];
        op->p.adam.lr = q->lr, op->p.adam.beta1 = q->beta1, op->p.adam.beta2 = q->beta2;
        op->p.adam.eps = q->eps, op->p.adam.wd = q->wd, op->p.adam.scale = q->scale;
        op->p.adam.step = q->step, op->p.adam.decoupled = q->decoupled;
        bool first = q->step == 1;
        sp->src[0] = td("grad", N, C, H, W, R_IN, I_UNIFORM, false);
        sp->dst[0] = td("w", N, C, H, W, R_RW, I_UNIFORM, false);
        sp->dst[1] = td("m", N, C, H, W, R_RW, first ? I_ZERO : I_UNIFORM, false);
        sp->dst[2] = td("v", N, C, H, W, R_RW, first ? I_ZERO : I_POS, false);
        break;
    }
    case YC_OP_EMA:
        op->p.ema.decay = ema_decays[c->opt];
        sp->src[0] = td("x", N, C, H, W, R_IN, I_UNIFORM, false);
        sp->dst[0] = td("e", N, C, H, W, R_RW, I_UNIFORM, false);
        break;
    case YC_OP_SUMSQ:
        sp->src[0] = td("x", N, C, H, W, R_IN, I_UNIFORM, false);
        sp->dst[0] = td("s", 1, 1, 1, 1, R_ACC, I_UNIFORM, false);
        break;
    case YC_OP_COUNT:
        break;
    }
}

/* Normalised-error tolerance per op (FP32 kernels against the double reference). */
static double case_tol(yc_op_kind kind)
{
    switch (kind) {
    case YC_OP_CONV2D:
    case YC_OP_CONV2D_BWD_DATA:
    case YC_OP_CONV2D_BWD_FILTER:
        return 2e-6; /* sums of up to a few hundred products */
    case YC_OP_BN_TRAIN:
    case YC_OP_BN_EVAL:
    case YC_OP_BN_BWD:
        return 5e-7; /* FP32 formulas of a few roundings, statistics and sums gathered in double */
    case YC_OP_SILU:
    case YC_OP_SILU_BWD:
    case YC_OP_BN_SILU_TRAIN:
    case YC_OP_BN_SILU_APPLY:
    case YC_OP_BN_SILU_BWD:
        return 2e-6; /* FP32 formula with the vectorised exp (after batch norm) */
    case YC_OP_MAXPOOL_BWD:
    case YC_OP_UPSAMPLE_BWD:
        return 1e-6; /* FP32 sums of a few gradients */
    case YC_OP_AVGPOOL:
        return 2e-6; /* an FP32 sum of up to 667 values, then a division */
    case YC_OP_AVGPOOL_BWD:
        return 2e-7; /* one division (and one addition with acc) */
    case YC_OP_DROPOUT:
        return 2e-7; /* the scale rounded to float, one product (and one addition with acc) */
    case YC_OP_SGD:
    case YC_OP_EMA:
        return 2e-7; /* FP32 formulas of a few roundings */
    case YC_OP_ADAM:
        return 4e-7; /* FP32 formula with a square root and two divisions */
    default:
        return 1e-7; /* one rounding (add) or exact */
    }
}

/* The tolerance of an op on backend `bi`: case_tol, or the OpenCL backend's where its kernels
 * round differently (cl/kernels/: float-float sums where the CPU sums in double, CLBlast's GEMM),
 * or the CPU's Winograd F(4x4, 3x3), whose transforms multiply by up to 8 and by 1/6, 1/12 and
 * 1/24 (cpu/winograd_f43.c: about 4 times F(2x2, 3x3)'s error; up to 1.1e-5 on these cases). */
static double backend_tol(const op_case *c, const yc_op *op, int bi)
{
    /* BN_EVAL with SiLU: the SiLU's tolerance, as for the fused training ops */
    yc_op_kind kind = c->kind == YC_OP_BN_EVAL && c->bias ? YC_OP_BN_SILU_APPLY : c->kind;
    bool conv = kind == YC_OP_CONV2D || kind == YC_OP_CONV2D_BWD_DATA || kind == YC_OP_CONV2D_BWD_FILTER;
    if (backends[bi].create != create_opencl) {
        return conv && yc_cpu_winograd_name(op) == yc_wino_f43.name ? 2e-5 : case_tol(kind);
    }
    switch (kind) {
    case YC_OP_CONV2D:
    case YC_OP_CONV2D_BWD_DATA:
    case YC_OP_CONV2D_BWD_FILTER:
        return 1e-5; /* CLBlast's float dot products: up to 3*130*130 terms in one chain */
    default:
        return case_tol(kind);
    }
}

/* Guard patterns around and between tensors, and the NaNs that outputs start as (FP32, FP16). */
#define GUARD_BITS 0x7FBADBADu
#define GARBAGE_BITS 0xFFC0FFEEu
#define GUARD_BITS16 0x7DADu
#define GARBAGE_BITS16 0xFE0Eu
#define GUARD_FLOATS 16

/* A tensor of a case in its own buffer: [guard][view gap][images with gaps][guard]. */
typedef struct tbuf {
    yc_tensor t;
    /* elements in the buffer, and their size in bytes */
    size_t nelems, es;
    /* the whole buffer as uploaded */
    unsigned char *before;
    /* dense logical values: inputs, or initial values (NaN for outputs that start as garbage);
     * exactly representable in the tensor's type */
    float *vals;
} tbuf;

/* Element index in the buffer of logical element i. */
static size_t tb_logical(const tbuf *b, size_t i)
{
    size_t img = yc_tensor_image_elems(&b->t);
    return b->t.offset / b->es + i / img * b->t.nstride + i % img;
}

/* Bits of buffer element k (FP32 or FP16). */
static uint32_t tb_bits(const tbuf *b, const unsigned char *buf, size_t k)
{
    if (b->es == 2) {
        uint16_t h;
        memcpy(&h, buf + 2 * k, 2);
        return h;
    }
    uint32_t u;
    memcpy(&u, buf + 4 * k, 4);
    return u;
}

static void tb_set_bits(const tbuf *b, unsigned char *buf, size_t k, uint32_t bits)
{
    if (b->es == 2) {
        uint16_t h = (uint16_t)bits;
        memcpy(buf + 2 * k, &h, 2);
    } else {
        memcpy(buf + 4 * k, &bits, 4);
    }
}

/* Value of buffer element k. */
static double tb_value(const tbuf *b, const unsigned char *buf, size_t k)
{
    uint32_t u = tb_bits(b, buf, k);
    return b->es == 2 ? yc_half_to_float((uint16_t)u) : bitsf(u);
}

/* Lays the tensor out (no buffer yet) and fills the host image of its buffer with guards. */
static void tb_create(tbuf *b, const tdesc *d, bool view, yc_dtype type)
{
    memset(b, 0, sizeof *b);
    b->t = yc_tensor_make(d->n, d->c, d->h, d->w, type, d->name);
    b->es = yc_dtype_size(type);
    size_t img = yc_tensor_image_elems(&b->t);
    size_t lead = GUARD_FLOATS;
    if (view && d->act) {
        /* a channel range of a wider tensor, with an odd extra gap to catch stride mix-ups (and,
         * for FP16, an offset that is not a multiple of 4 bytes) */
        b->t.nstride = img + 2 * (size_t)d->h * d->w + 5;
        lead += 5;
    }
    b->t.offset = lead * b->es;
    b->nelems = lead + (size_t)(d->n - 1) * b->t.nstride + img + GUARD_FLOATS;
    b->before = calloc(b->nelems, b->es);
    ck_assert_ptr_nonnull(b->before);
    b->vals = falloc(yc_tensor_elems(&b->t));
    for (size_t i = 0; i < b->nelems; i++)
        tb_set_bits(b, b->before, i, b->es == 2 ? GUARD_BITS16 : GUARD_BITS);
}

/* Places the values in the host image. */
static void tb_place(tbuf *b)
{
    for (size_t i = 0; i < yc_tensor_elems(&b->t); i++)
        tb_set_bits(b, b->before, tb_logical(b, i),
                    b->es == 2 ? yc_float_to_half(b->vals[i]) : fbits(b->vals[i]));
}

/* Allocates the tensor's buffer on a backend and uploads the host image. */
static void tb_upload(yc_backend *be, tbuf *b)
{
    b->t.buf = yc_buffer_alloc(be, b->nelems * b->es);
    ck_assert_msg(b->t.buf != NULL, "buffer: %s", yc_last_error());
    ck_assert_int_eq(be->iface->buffer_write(be, b->t.buf, 0, b->before, b->nelems * b->es), YC_OK);
}

static void tb_release(yc_backend *be, tbuf *b)
{
    if (b->t.buf)
        yc_buffer_free(be, b->t.buf);
    b->t.buf = NULL;
}

static void tb_free(tbuf *b)
{
    free(b->before);
    free(b->vals);
}

/* Reads the buffer back; checks that everything outside the logical elements (and everything,
 * for inputs) kept its bits; returns the logical elements as doubles. */
static double *tb_check(yc_backend *be, const tbuf *b, bool input, const char *label, const char *bname)
{
    unsigned char *after = calloc(b->nelems, b->es);
    ck_assert_ptr_nonnull(after);
    ck_assert_int_eq(be->iface->buffer_read(be, b->t.buf, 0, after, b->nelems * b->es), YC_OK);
    size_t n = yc_tensor_elems(&b->t);
    char *logical = calloc(b->nelems, 1);
    ck_assert_ptr_nonnull(logical);
    for (size_t i = 0; i < n; i++)
        logical[tb_logical(b, i)] = 1;
    for (size_t i = 0; i < b->nelems; i++)
        if (input || !logical[i])
            CHECK(tb_bits(b, after, i) == tb_bits(b, b->before, i),
                  "%s on %s: %s %s changed at element %zu of its buffer (%08x -> %08x)", label, bname,
                  input ? "input" : "guard or gap of", b->t.name, i, tb_bits(b, b->before, i),
                  tb_bits(b, after, i));
    double *out = dalloc(n);
    for (size_t i = 0; i < n; i++)
        out[i] = tb_value(b, after, tb_logical(b, i));
    free(logical);
    free(after);
    return out;
}

static void fill_init(yc_rng *r, float *v, size_t n, int init, bool ties)
{
    for (size_t i = 0; i < n; i++) {
        switch (init) {
        case I_POS:
            v[i] = (float)yc_rng_range(r, 0.5, 1.5);
            break;
        case I_WIDE:
            v[i] = (float)yc_rng_range(r, -8, 8);
            break;
        case I_SHIFTED:
            v[i] = (float)(3.0 + yc_rng_range(r, -2, 2));
            break;
        case I_ZERO:
            v[i] = 0.0f;
            break;
        default:
            v[i] = ties ? (float)((int)yc_rng_below(r, 5) - 2) * 0.5f : (float)yc_rng_range(r, -1, 1);
            break;
        }
    }
}

static double *to_double(const float *v, size_t n)
{
    double *d = dalloc(n);
    for (size_t i = 0; i < n; i++)
        d[i] = v[i];
    return d;
}

/* d = acc ? d + t : t */
static void acc_into(double *d, const double *t, size_t n, bool acc)
{
    for (size_t i = 0; i < n; i++)
        d[i] = acc ? d[i] + t[i] : t[i];
}

/* Expected final dst contents: `s` are the inputs, `d` hold the initial dst values (0 where the
 * dst starts as garbage) and receive the expected values. */
static void ref_run(const op_case *c, double *const s[], double *const d[])
{
    int N = c->n, C = c->c, H = c->h, W = c->w, HW = H * W;
    size_t nx = (size_t)N * C * HW;
    switch (c->kind) {
    case YC_OP_CONV2D: {
        ref_conv g = case_conv(c);
        ref_conv2d_fwd(&g, s[0], s[1], c->bias ? s[2] : NULL, d[0]);
        break;
    }
    case YC_OP_CONV2D_BWD_DATA: {
        ref_conv g = case_conv(c);
        double *t = dalloc(nx);
        ref_conv2d_bwd_data(&g, s[0], s[1], t);
        acc_into(d[0], t, nx, c->acc);
        free(t);
        break;
    }
    case YC_OP_CONV2D_BWD_FILTER: {
        ref_conv g = case_conv(c);
        size_t nw = (size_t)c->k * C * c->kh * c->kw;
        double *tw = dalloc(nw), *tb = dalloc(c->k);
        ref_conv2d_bwd_filter(&g, s[0], s[1], tw, tb);
        acc_into(d[0], tw, nw, true);
        if (c->bias)
            acc_into(d[1], tb, c->k, true);
        free(tw), free(tb);
        break;
    }
    case YC_OP_BN_TRAIN:
    case YC_OP_BN_SILU_TRAIN: {
        /* the output is normalised with the statistics the op saves, rounded to FP32 (what the
         * backward pass and the fused backward's recomputation see) */
        double eps = bn_eps(c), m = bn_momentum(c), M = (double)N * HW;
        double *mean = dalloc(C), *var = dalloc(C), *mf = dalloc(C), *isf = dalloc(C);
        ref_bn_train(s[0], N, C, HW, s[1], s[2], eps, d[0], mean, var);
        for (int i = 0; i < C; i++) {
            d[1][i] = mean[i];
            d[1][C + i] = 1.0 / sqrt(var[i] + eps);
            d[2][i] = (1.0 - m) * d[2][i] + m * mean[i];
            d[3][i] = (1.0 - m) * d[3][i] + m * var[i] * M / (M - 1.0);
            mf[i] = (float)d[1][i];
            isf[i] = (float)d[1][C + i];
        }
        ref_bn_apply(s[0], N, C, HW, s[1], s[2], mf, isf, d[0]);
        if (c->kind == YC_OP_BN_SILU_TRAIN)
            ref_silu(d[0], nx, d[0]);
        free(mean), free(var), free(mf), free(isf);
        break;
    }
    case YC_OP_BN_SILU_APPLY:
        ref_bn_apply(s[0], N, C, HW, s[1], s[2], s[3], s[3] + C, d[0]);
        ref_silu(d[0], nx, d[0]);
        break;
    case YC_OP_BN_SILU_BWD: {
        double *z = dalloc(nx), *dz = dalloc(nx), *t = dalloc(nx), *dg = dalloc(C), *db = dalloc(C);
        ref_bn_apply(s[1], N, C, HW, s[2], s[3], s[4], s[4] + C, z);
        ref_silu_bwd(s[0], z, nx, dz);
        ref_bn_bwd(dz, s[1], N, C, HW, s[2], s[4], s[4] + C, t, dg, db);
        acc_into(d[0], t, nx, c->acc);
        acc_into(d[1], dg, C, true);
        acc_into(d[2], db, C, true);
        free(z), free(dz), free(t), free(dg), free(db);
        break;
    }
    case YC_OP_BN_EVAL:
        ref_bn_eval(s[0], N, C, HW, s[1], s[2], s[3], s[4], bn_eps(c), d[0]);
        if (c->bias)
            ref_silu(d[0], nx, d[0]);
        break;
    case YC_OP_BN_BWD: {
        double *t = dalloc(nx), *dg = dalloc(C), *db = dalloc(C);
        ref_bn_bwd(s[0], s[1], N, C, HW, s[2], s[3], s[3] + C, t, dg, db);
        acc_into(d[0], t, nx, c->acc);
        acc_into(d[1], dg, C, true);
        acc_into(d[2], db, C, true);
        free(t), free(dg), free(db);
        break;
    }
    case YC_OP_SILU:
        ref_silu(s[0], nx, d[0]);
        break;
    case YC_OP_SILU_BWD: {
        double *t = dalloc(nx);
        ref_silu_bwd(s[0], s[1], nx, t);
        acc_into(d[0], t, nx, c->acc);
        free(t);
        break;
    }
    case YC_OP_ADD:
        ref_add(s[0], s[1], nx, d[0]);
        break;
    case YC_OP_COPY: {
        double *t = dalloc(nx);
        ref_copy(s[0], nx, t);
        acc_into(d[0], t, nx, c->acc);
        free(t);
        break;
    }
    case YC_OP_FILL:
        ref_fill(FILL_VALUE, nx, d[0]);
        break;
    case YC_OP_MAXPOOL:
        ref_maxpool_fwd(s[0], N, C, H, W, c->kh, c->sh, c->ph, d[0]);
        break;
    case YC_OP_MAXPOOL_BWD: {
        double *t = dalloc(nx);
        ref_maxpool_bwd(s[0], s[1], N, C, H, W, c->kh, c->sh, c->ph, t);
        acc_into(d[0], t, nx, c->acc);
        free(t);
        break;
    }
    case YC_OP_UPSAMPLE:
        ref_upsample_fwd(s[0], N, C, H, W, c->kh, d[0]);
        break;
    case YC_OP_UPSAMPLE_BWD: {
        double *t = dalloc(nx);
        ref_upsample_bwd(s[0], N, C, H, W, c->kh, t);
        acc_into(d[0], t, nx, c->acc);
        free(t);
        break;
    }
    case YC_OP_AVGPOOL:
        ref_avgpool_fwd(s[0], N, C, H, W, d[0]);
        break;
    case YC_OP_AVGPOOL_BWD: {
        double *t = dalloc(nx);
        ref_avgpool_bwd(s[0], N, C, H, W, t);
        acc_into(d[0], t, nx, c->acc);
        free(t);
        break;
    }
    case YC_OP_DROPOUT: {
        double *t = dalloc(nx);
        ref_dropout(s[0], nx, drop_ps[c->opt], DROP_SEED + (uint32_t)c->opt, t);
        acc_into(d[0], t, nx, c->acc);
        free(t);
        break;
    }
    case YC_OP_SGD: {
        const sgd_par *q = &sgd_pars[c->opt];
        ref_sgd(s[0], nx, q->lr, q->momentum, q->wd, q->scale, q->nesterov, d[0], d[1]);
        break;
    }
    case YC_OP_ADAM: {
        const adam_par *q = &adam_pars[c->opt];
        ref_adam(s[0], nx, q->lr, q->beta1, q->beta2, q->eps, q->wd, q->scale, q->step, q->decoupled, d[0], d[1],
                 d[2]);
        break;
    }
    case YC_OP_EMA:
        ref_ema(s[0], nx, ema_decays[c->opt], d[0]);
        break;
    case YC_OP_SUMSQ:
        d[0][0] = (c->acc ? d[0][0] : 0.0) + ref_sumsq(s[0], nx);
        break;
    case YC_OP_COUNT:
        break;
    }
}

/* Scale below which an output's error is not normalised further.  Batch-norm's dx (the fused op's
 * too) is a difference of terms of size gamma * invstd * |dy| that cancels exactly when a channel
 * has two values (it is zero then): its error is measured against those terms.  An optimizer's new
 * state (w, buf, m, v, e) is decay * old + a step that can cancel it: its error is measured against
 * the old values `init` (n of them). */
static double err_floor(const op_case *c, double *const s[], int dst, const float *init, size_t n)
{
    if (c->kind == YC_OP_SGD || c->kind == YC_OP_ADAM || c->kind == YC_OP_EMA) {
        double m = 0.0;
        for (size_t i = 0; i < n; i++)
            m = fmax(m, fabs((double)init[i]));
        return m;
    }
    if ((c->kind != YC_OP_BN_BWD && c->kind != YC_OP_BN_SILU_BWD) || dst != 0)
        return 0.0;
    /* the fused op's dy is da * silu'(z), |silu'| < 1.1 */
    const double *stats = c->kind == YC_OP_BN_BWD ? s[3] : s[4];
    double gmax = 0.0, dymax = 0.0, dz = c->kind == YC_OP_BN_BWD ? 1.0 : 1.1;
    for (int k = 0; k < c->c; k++)
        gmax = fmax(gmax, fabs(s[2][k] * stats[c->c + k]));
    for (size_t i = 0; i < (size_t)c->n * c->c * c->h * c->w; i++)
        dymax = fmax(dymax, fabs(s[0][i]));
    return gmax * dymax * dz;
}

/* A case ready to run: tensors with their host images, inputs and expected outputs (double). */
typedef struct prepared {
    tspec sp;
    yc_op op;
    tbuf src[YC_OP_MAX_SRC], dst[YC_OP_MAX_DST];
    /* inputs, and expected final dst contents (NULL for unused slots) */
    double *rs[YC_OP_MAX_SRC], *rd[YC_OP_MAX_DST];
    char label[192];
} prepared;

/* Type of slot i of a case: FP16 where the case asks for it and the slot allows it. */
static yc_dtype slot_type(const op_case *c, bool dst, int i, bool as_f32)
{
    if (as_f32 || !(c->f16 & (dst ? F16_OUT : F16_IN)) || !f16_slot(c->kind, dst, i))
        return YC_F32;
    return YC_F16;
}

/* Draws the inputs and initial outputs of case `c` and computes the expected results.  Values of
 * the case's FP16 slots are rounded to FP16; as_f32 makes every tensor FP32 with the same values
 * (the FP32 twin of an FP16 case). */
static void case_prepare(const op_case *c, prepared *pc, bool as_f32)
{
    memset(pc, 0, sizeof *pc);
    case_label(c, pc->label, sizeof pc->label);
    case_spec(c, &pc->sp, &pc->op);
    yc_rng r;
    yc_rng_seed(&r, 1000 + (uint64_t)(c - cases), (uint64_t)c->kind);
    for (int i = 0; i < YC_OP_MAX_SRC; i++) {
        const tdesc *d = &pc->sp.src[i];
        if (!d->n)
            continue;
        tbuf *b = &pc->src[i];
        tb_create(b, d, c->view, slot_type(c, false, i, as_f32));
        size_t n = yc_tensor_elems(&b->t);
        if (d->init == I_STATS) {
            /* [mean; invstd] of x (prepared before the stats slot), as FP32 */
            const tbuf *xb = &pc->src[c->kind == YC_OP_BN_SILU_APPLY ? 0 : 1];
            double *x = to_double(xb->vals, yc_tensor_elems(&xb->t));
            double *y = dalloc(yc_tensor_elems(&xb->t)), *g1 = dalloc(c->c), *b0 = dalloc(c->c);
            double *mean = dalloc(c->c), *var = dalloc(c->c);
            for (int k = 0; k < c->c; k++)
                g1[k] = 1.0;
            ref_bn_train(x, c->n, c->c, c->h * c->w, g1, b0, bn_eps(c), y, mean, var);
            for (int k = 0; k < c->c; k++) {
                b->vals[k] = (float)mean[k];
                b->vals[c->c + k] = (float)(1.0 / sqrt(var[k] + bn_eps(c)));
            }
            free(x), free(y), free(g1), free(b0), free(mean), free(var);
        } else {
            fill_init(&r, b->vals, n, d->init, c->ties);
        }
        if (slot_type(c, false, i, false) == YC_F16)
            yc_round_to_half(b->vals, n);
        tb_place(b);
        pc->rs[i] = to_double(b->vals, n);
        pc->op.src[i] = &b->t;
    }
    for (int i = 0; i < YC_OP_MAX_DST; i++) {
        const tdesc *d = &pc->sp.dst[i];
        if (!d->n)
            continue;
        tbuf *b = &pc->dst[i];
        tb_create(b, d, c->view, slot_type(c, true, i, as_f32));
        size_t n = yc_tensor_elems(&b->t);
        bool reads = d->role == R_PGRAD || d->role == R_RW || (d->role == R_ACC && c->acc);
        if (reads) {
            fill_init(&r, b->vals, n, d->init, false);
            if (slot_type(c, true, i, false) == YC_F16)
                yc_round_to_half(b->vals, n);
            pc->rd[i] = to_double(b->vals, n);
        } else {
            for (size_t k = 0; k < n; k++)
                b->vals[k] = bitsf(GARBAGE_BITS);
            pc->rd[i] = dalloc(n);
        }
        tb_place(b);
        if (!reads && b->es == 2)
            for (size_t k = 0; k < n; k++)
                tb_set_bits(b, b->before, tb_logical(b, k), GARBAGE_BITS16);
        pc->op.dst[i] = &b->t;
    }
    ref_run(c, pc->rs, pc->rd);
}

static void case_release(prepared *pc)
{
    for (int i = 0; i < YC_OP_MAX_SRC; i++)
        if (pc->rs[i]) {
            free(pc->rs[i]);
            tb_free(&pc->src[i]);
        }
    for (int i = 0; i < YC_OP_MAX_DST; i++)
        if (pc->rd[i]) {
            free(pc->rd[i]);
            tb_free(&pc->dst[i]);
        }
}

/* Error of an FP16 output against the reference: the largest |got - want| over
 * tol * scale + 2^-11 * |want| + 2^-25 (the FP32 kernel's tolerance, then half an FP16 ulp of the
 * value, relative in the normal range and absolute in the subnormal one); <= 1 passes. */
static double half_err(const double *got, const double *want, size_t n, double tol, double floor)
{
    double scale = floor, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(want[i]))
            scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i]))
            return INFINITY;
        if (isnan(want[i]))
            continue;
        double e = fabs(got[i] - want[i]) / (tol * scale + 0x1p-11 * fabs(want[i]) + 0x1p-25);
        worst = fmax(worst, e);
    }
    return worst;
}

/* Runs a prepared case on backend `bi`, compares it with the expected results and returns the
 * outputs (out[i] for each dst, NULL for unused slots; the caller frees them).  Returns false when
 * the backend does not exist here. */
static bool case_run(const op_case *c, prepared *pc, int bi, double *out[YC_OP_MAX_DST])
{
    yc_backend *be = cases_per_test > 1 ? kept[bi] : NULL;
    if (!be && !(be = backend_open(bi)))
        return false;
    if (cases_per_test > 1)
        kept[bi] = be;
    const char *bname = backends[bi].name, *label = pc->label;
    ck_assert_msg(be->iface->supports(be, &pc->op), "%s: not supported by %s", label, bname);
    for (int i = 0; i < YC_OP_MAX_SRC; i++)
        if (pc->rs[i])
            tb_upload(be, &pc->src[i]);
    for (int i = 0; i < YC_OP_MAX_DST; i++)
        if (pc->rd[i])
            tb_upload(be, &pc->dst[i]);

    /* the workspace, between guards */
    size_t wsz = be->iface->workspace(be, &pc->op);
    size_t wfloats = 2 * GUARD_FLOATS + (wsz + sizeof(float) - 1) / sizeof(float);
    float *wbefore = falloc(wfloats), *wafter = falloc(wfloats);
    for (size_t i = 0; i < wfloats; i++)
        wbefore[i] = bitsf(GUARD_BITS);
    yc_buffer *wbuf = yc_buffer_alloc(be, wfloats * sizeof(float));
    ck_assert_ptr_nonnull(wbuf);
    ck_assert_int_eq(be->iface->buffer_write(be, wbuf, 0, wbefore, wfloats * sizeof(float)), YC_OK);
    yc_span ws = {wbuf, GUARD_FLOATS * sizeof(float), wsz};

    int rc = yc_backend_exec(be, &pc->op, ws);
    ck_assert_msg(rc == YC_OK, "%s on %s: exec failed: %s", label, bname, yc_last_error());
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);

    ck_assert_int_eq(be->iface->buffer_read(be, wbuf, 0, wafter, wfloats * sizeof(float)), YC_OK);
    for (size_t i = 0; i < wfloats; i++)
        if (i < GUARD_FLOATS || i >= GUARD_FLOATS + (wsz + 3) / 4)
            CHECK(fbits(wafter[i]) == GUARD_BITS, "%s on %s: workspace guard changed at float %zu", label,
                  bname, i);

    double tol = backend_tol(c, &pc->op, bi);
    for (int i = 0; i < YC_OP_MAX_DST; i++) {
        out[i] = NULL;
        if (!pc->rd[i])
            continue;
        size_t n = yc_tensor_elems(&pc->dst[i].t);
        double *got = tb_check(be, &pc->dst[i], false, label, bname);
        double floor = err_floor(c, pc->rs, i, pc->dst[i].vals, n);
        if (pc->dst[i].t.type == YC_F16) {
            double e = half_err(got, pc->rd[i], n, tol, floor);
            ck_assert_msg(e <= 1.0, "%s on %s: FP16 %s error %.3g of the allowed", label, bname,
                          pc->sp.dst[i].name, e);
        } else {
            double e = norm_err(got, pc->rd[i], n, floor);
            ck_assert_msg(e <= tol, "%s on %s: %s error %.3g > %.3g", label, bname, pc->sp.dst[i].name, e,
                          tol);
        }
        out[i] = got;
        tb_release(be, &pc->dst[i]);
    }
    for (int i = 0; i < YC_OP_MAX_SRC; i++)
        if (pc->rs[i]) {
            free(tb_check(be, &pc->src[i], true, label, bname));
            tb_release(be, &pc->src[i]);
        }
    yc_buffer_free(be, wbuf);
    free(wbefore), free(wafter);
    if (cases_per_test == 1)
        yc_backend_free(be);
    return true;
}

/* Bits of a double that holds an FP32 value, rounded to FP16 when `half`, as FP32 bits. */
static uint32_t value_bits(double v, bool half)
{
    float f = (float)v;
    return fbits(half ? yc_half_to_float(yc_float_to_half(f)) : f);
}


static void run_op_case(const op_case *c)
{
    prepared pc, twin;
    case_prepare(c, &pc, false);
    if (c->f16)
        case_prepare(c, &twin, true);
    for (int bi = 0; bi < NBACKENDS; bi++) {
        double *got[YC_OP_MAX_DST], *want[YC_OP_MAX_DST];
        if (!case_run(c, &pc, bi, got))
            continue;
        if (c->f16) {
            /* an FP16 case gives the bits of its FP32 twin (the same values in FP32 tensors),
             * rounded to FP16 where the output is FP16 */
            case_run(c, &twin, bi, want);
            for (int i = 0; i < YC_OP_MAX_DST; i++) {
                if (!got[i])
                    continue;
                bool half = pc.dst[i].t.type == YC_F16;
                for (size_t k = 0; k < yc_tensor_elems(&pc.dst[i].t); k++)
                    CHECK(value_bits(got[i][k], false) == value_bits(want[i][k], half),
                          "%s on %s: %s[%zu] = %.9g, the FP32 twin gives %.9g", pc.label, backends[bi].name,
                          pc.sp.dst[i].name, k, got[i][k], want[i][k]);
                free(want[i]);
            }
        }
        for (int i = 0; i < YC_OP_MAX_DST; i++)
            free(got[i]);
    }
    case_release(&pc);
    if (c->f16)
        case_release(&twin);
}

START_TEST(op_cases)
{
    for (int i = _i * cases_per_test; i < (_i + 1) * cases_per_test && i < ncases; i++)
        run_op_case(&cases[i]);
    backends_release();
}
END_TEST

/* The cases of the ops that apply exp or SiLU (indices into `cases`), run again on the generic-vector
 * path of cpu/activation.c and cpu/batchnorm.c (the exp_paths test case). */
static int silu_cases[MAX_CASES];
static int nsilu_cases;

static bool uses_silu(const op_case *c)
{
    switch (c->kind) {
    case YC_OP_SILU:
    case YC_OP_SILU_BWD:
    case YC_OP_BN_SILU_TRAIN:
    case YC_OP_BN_SILU_APPLY:
    case YC_OP_BN_SILU_BWD:
        return true;
    case YC_OP_BN_EVAL:
        return c->bias; /* with SiLU */
    default:
        return false;
    }
}

START_TEST(op_cases_silu)
{
    for (int i = _i * cases_per_test; i < (_i + 1) * cases_per_test && i < nsilu_cases; i++)
        run_op_case(&cases[silu_cases[i]]);
    backends_release();
}
END_TEST

/* In-place elementwise ops: the output is the input tensor itself. */
START_TEST(in_place)
{
    for (int bi = 0; bi < NBACKENDS; bi++) {
        yc_backend *be = backend_open(bi);
        if (!be)
            continue;
        yc_tensor t = yc_tensor_make(2, 3, 5, 7, YC_F32, "t");
        t.nstride = 3 * 5 * 7 + 9;
        size_t n = yc_tensor_elems(&t);
        t.buf = yc_buffer_alloc(be, (t.nstride * 2) * sizeof(float));
        yc_tensor u = t;
        u.buf = yc_buffer_alloc(be, (t.nstride * 2) * sizeof(float));
        ck_assert(t.buf && u.buf);
        float *x = falloc(n), *b = falloc(n), *got = falloc(n);
        yc_rng r;
        yc_rng_seed(&r, 77, 1);
        fill_init(&r, x, n, I_WIDE, false);
        fill_init(&r, b, n, I_UNIFORM, false);
        double *dx = to_double(x, n), *want = dalloc(n);

        yc_op op = {.kind = YC_OP_SILU, .src = {&t}, .dst = {&t}};
        ck_assert_int_eq(yc_tensor_set_f32(be, &t, x), YC_OK);
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &t, got), YC_OK);
        ref_silu(dx, n, want);
        double *g = to_double(got, n);
        ck_assert_msg(norm_err(g, want, n, 0.0) < 1e-6, "in-place silu on %s", backends[bi].name);
        free(g);

        op = (yc_op){.kind = YC_OP_ADD, .src = {&t, &u}, .dst = {&t}};
        ck_assert_int_eq(yc_tensor_set_f32(be, &t, x), YC_OK);
        ck_assert_int_eq(yc_tensor_set_f32(be, &u, b), YC_OK);
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &t, got), YC_OK);
        for (size_t i = 0; i < n; i++)
            CHECK(got[i] == x[i] + b[i], "in-place add on %s at %zu", backends[bi].name, i);

        op = (yc_op){.kind = YC_OP_COPY, .accumulate = 1, .src = {&u}, .dst = {&u}};
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &u, got), YC_OK);
        for (size_t i = 0; i < n; i++)
            CHECK(got[i] == 2.0f * b[i], "in-place accumulate on %s at %zu", backends[bi].name, i);

        /* the same on FP16 tensors (in the same buffers): the FP32 results on the FP16 values,
         * rounded to FP16 */
        yc_tensor th = t, uh = u;
        th.type = uh.type = YC_F16;
        float *e = falloc(n);
        yc_round_to_half(x, n);
        yc_round_to_half(b, n);
        op = (yc_op){.kind = YC_OP_SILU, .src = {&th}, .dst = {&th}};
        ck_assert_int_eq(yc_tensor_set_f32(be, &th, x), YC_OK);
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &th, got), YC_OK);
        yc_cpu_silu_span(e, x, n);
        yc_round_to_half(e, n);
        for (size_t i = 0; i < n; i++)
            CHECK(fbits(got[i]) == fbits(e[i]), "in-place FP16 silu on %s at %zu", backends[bi].name, i);
        op = (yc_op){.kind = YC_OP_ADD, .src = {&th, &uh}, .dst = {&th}};
        ck_assert_int_eq(yc_tensor_set_f32(be, &th, x), YC_OK);
        ck_assert_int_eq(yc_tensor_set_f32(be, &uh, b), YC_OK);
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &th, got), YC_OK);
        for (size_t i = 0; i < n; i++)
            CHECK(fbits(got[i]) == fbits(yc_half_to_float(yc_float_to_half(x[i] + b[i]))),
                  "in-place FP16 add on %s at %zu", backends[bi].name, i);
        op = (yc_op){.kind = YC_OP_COPY, .accumulate = 1, .src = {&uh}, .dst = {&uh}};
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &uh, got), YC_OK);
        for (size_t i = 0; i < n; i++)
            CHECK(got[i] == 2.0f * b[i], "in-place FP16 accumulate on %s at %zu", backends[bi].name, i);
        free(e);

        free(x), free(b), free(got), free(dx), free(want);
        yc_buffer_free(be, t.buf);
        yc_buffer_free(be, u.buf);
        yc_backend_free(be);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 3. Batch-norm running statistics, worked out by hand.
 * ------------------------------------------------------------------------------------------- */
START_TEST(bn_running_stats)
{
    for (int bi = 0; bi < NBACKENDS; bi++) {
        yc_backend *be = backend_open(bi);
        if (!be)
            continue;
        /* x (2,2,1,2): channel 0 = {1,2},{3,4}: mean 2.5, biased var 1.25, unbiased 5/3;
         *              channel 1 = {-1,-1},{-1,3}: mean 0, biased var 3, unbiased 4 */
        const float xv[] = {1, 2, -1, -1, 3, 4, -1, 3};
        const float gv[] = {1, 2}, bv[] = {0, 0.5f};
        float rm[] = {0.5f, -1}, rv[] = {1, 2};
        yc_buffer *buf = yc_buffer_alloc(be, 64 * sizeof(float));
        ck_assert_ptr_nonnull(buf);
        yc_tensor x = yc_tensor_make(2, 2, 1, 2, YC_F32, "x"), y = x,
                  g = yc_tensor_make(1, 2, 1, 1, YC_F32, "g");
        yc_tensor b = g, m = g, v = g, st = yc_tensor_make(2, 2, 1, 1, YC_F32, "stats");
        x.buf = y.buf = g.buf = b.buf = m.buf = v.buf = st.buf = buf;
        y.offset = 8 * 4, g.offset = 16 * 4, b.offset = 18 * 4, m.offset = 20 * 4, v.offset = 22 * 4;
        st.offset = 24 * 4;
        ck_assert_int_eq(yc_tensor_set_f32(be, &x, xv), YC_OK);
        ck_assert_int_eq(yc_tensor_set_f32(be, &g, gv), YC_OK);
        ck_assert_int_eq(yc_tensor_set_f32(be, &b, bv), YC_OK);
        ck_assert_int_eq(yc_tensor_set_f32(be, &m, rm), YC_OK);
        ck_assert_int_eq(yc_tensor_set_f32(be, &v, rv), YC_OK);
        yc_op op = {.kind = YC_OP_BN_TRAIN, .src = {&x, &g, &b}, .dst = {&y, &st, &m, &v}};
        op.p.bn.eps = 1e-3f, op.p.bn.momentum = 0.1f;
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        float s[4], om[2], ov[2], oy[8];
        ck_assert_int_eq(yc_tensor_get_f32(be, &st, s), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &m, om), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &v, ov), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &y, oy), YC_OK);
        ck_assert_float_eq_tol(s[0], 2.5f, 1e-6f);
        ck_assert_float_eq_tol(s[1], 0.0f, 1e-6f);
        ck_assert_float_eq_tol(s[2], (float)(1 / sqrt(1.251)), 1e-6f);
        ck_assert_float_eq_tol(s[3], (float)(1 / sqrt(3.001)), 1e-6f);
        ck_assert_float_eq_tol(om[0], 0.9f * 0.5f + 0.1f * 2.5f, 1e-6f);
        ck_assert_float_eq_tol(om[1], -0.9f, 1e-6f);
        ck_assert_float_eq_tol(ov[0], (float)(0.9 + 0.1 * 5.0 / 3.0), 1e-6f);
        ck_assert_float_eq_tol(ov[1], (float)(0.9 * 2 + 0.1 * 4), 1e-6f);
        /* y = (x - mean) * invstd * gamma + beta: x = 1 in channel 0, x = 3 in channel 1 */
        ck_assert_float_eq_tol(oy[0], (float)(-1.5 / sqrt(1.251)), 1e-6f);
        ck_assert_float_eq_tol(oy[7], (float)(3 / sqrt(3.001) * 2 + 0.5), 1e-6f);
        /* a second step starts from the updated estimates */
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &m, om), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &v, ov), YC_OK);
        ck_assert_float_eq_tol(om[0], 0.9f * 0.7f + 0.25f, 1e-6f);
        ck_assert_float_eq_tol(ov[1], (float)(0.9 * 2.2 + 0.4), 1e-6f);
        /* evaluation mode uses them */
        yc_op ev = {.kind = YC_OP_BN_EVAL, .src = {&x, &g, &b, &m, &v}, .dst = {&y}};
        ev.p.bn.eps = 1e-3f;
        ck_assert_int_eq(yc_backend_exec(be, &ev, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &y, oy), YC_OK);
        ck_assert_float_eq_tol(oy[0], (float)((1 - om[0]) / sqrt(ov[0] + 1e-3)), 1e-6f);
        yc_buffer_free(be, buf);
        yc_backend_free(be);
    }
}
END_TEST

static yc_tensor fz_tensor(yc_backend *be, int n, int c, int h, int w, bool view, const char *name);
static void fz_exec(yc_backend *be, const yc_op *op);

/* Batch-norm statistics of values whose FP32 block sums overflow (the CPU redoes such blocks in
 * double, cpu/batchnorm.c): channel 0 spreads over +-3e19 (squared deviations above FLT_MAX, the
 * variance below), channel 1 over 3e37 +- 1e37 (sums above FLT_MAX too; its variance is not an
 * FP32 number, its invstd is); mean, invstd, channel 0's running variance and y against the double
 * reference.  Planes of 930: whole blocks of 512 and tails. */
START_TEST(bn_large_values)
{
    enum { N = 2, C = 2, H = 30, W = 31, HW = H * W, NX = N * C * HW };
    float *x = falloc(NX), *y = falloc(NX), pv[8] = {1, 0.5f, 0, 0.25f, 0, 0, 1, 1};
    double *xd = dalloc(NX), *yd = dalloc(NX), g[C] = {1, 0.5}, b[C] = {0, 0.25}, mean[C], var[C];
    yc_rng r;
    yc_rng_seed(&r, 77, 1);
    fill_init(&r, x, NX, I_UNIFORM, false);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < HW; k++) {
            x[(i * C + 0) * HW + k] *= 3e19f;
            x[(i * C + 1) * HW + k] = 3e37f + 1e37f * x[(i * C + 1) * HW + k];
        }
    for (int i = 0; i < NX; i++)
        xd[i] = x[i];
    double eps = 1e-3;
    ref_bn_train(xd, N, C, HW, g, b, eps, yd, mean, var);
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_cpu_new(&be, 2), YC_OK);
    yc_tensor tx = fz_tensor(be, N, C, H, W, false, "x"), ty = fz_tensor(be, N, C, H, W, false, "y");
    yc_tensor st = fz_tensor(be, 2, C, 1, 1, false, "stats"), v[4];
    for (int k = 0; k < 4; k++) {
        v[k] = fz_tensor(be, 1, C, 1, 1, false, "vec");
        ck_assert_int_eq(yc_tensor_set_f32(be, &v[k], pv + 2 * k), YC_OK);
    }
    ck_assert_int_eq(yc_tensor_set_f32(be, &tx, x), YC_OK);
    yc_op op = {.kind = YC_OP_BN_TRAIN, .src = {&tx, &v[0], &v[1]}, .dst = {&ty, &st, &v[2], &v[3]}};
    op.p.bn.eps = (float)eps, op.p.bn.momentum = 0.5f;
    fz_exec(be, &op);
    float s[2 * C], rv[C];
    ck_assert_int_eq(yc_tensor_get_f32(be, &st, s), YC_OK);
    ck_assert_int_eq(yc_tensor_get_f32(be, &v[3], rv), YC_OK);
    ck_assert_int_eq(yc_tensor_get_f32(be, &ty, y), YC_OK);
    for (int c = 0; c < C; c++) {
        double sd = sqrt(var[c]), m = (double)NX / C;
        CHECK(fabs(s[c] - mean[c]) <= 1e-6 * sd, "channel %d: mean %.9g, expected %.9g", c, (double)s[c],
              mean[c]);
        CHECK(fabs(s[C + c] * sd - 1.0) <= 1e-6, "channel %d: invstd %.9g, expected %.9g", c, (double)s[C + c],
              1.0 / sd);
        double want = 0.5 + 0.5 * var[c] * m / (m - 1.0);
        CHECK(c == 1 || fabs(rv[c] - want) <= 1e-6 * want, "channel %d: running var %.9g, expected %.9g", c,
              (double)rv[c], want);
    }
    double *got = to_double(y, NX), e = norm_err(got, yd, NX, 0.0);
    CHECK(e < 5e-7, "y: error %g", e);
    free(got);
    yc_tensor *all[] = {&tx, &ty, &st, &v[0], &v[1], &v[2], &v[3]};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        yc_buffer_free(be, all[k]->buf);
    yc_backend_free(be);
    free(x), free(y), free(xd), free(yd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 4. exp and SiLU accuracy.
 * ------------------------------------------------------------------------------------------- */

/* |y - ref| in units of the float spacing at ref (subnormal spacing below FLT_MIN) */
static double ulps(double y, double ref)
{
    double a = fabs(ref);
    double u = a < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(a) - 23);
    return fabs(y - ref) / u;
}

START_TEST(exp_sweep)
{
    /* every 61st float bit pattern: about 70 million inputs, all exponents and signs */
    const size_t chunk = 1 << 16;
    float *x = falloc(chunk), *y = falloc(chunk);
    double worst = 0.0;
    float worst_x = 0.0f;
    for (uint64_t base = 0; base < (1ull << 32); base += chunk * 61) {
        size_t n = 0;
        for (; n < chunk && base + n * 61 < (1ull << 32); n++)
            x[n] = bitsf((uint32_t)(base + n * 61));
        yc_cpu_exp(x, y, n);
        for (size_t i = 0; i < n; i++) {
            if (isnan(x[i])) {
                CHECK(isnan(y[i]), "exp(NaN) = %g", (double)y[i]);
                continue;
            }
            double ref = exp((double)x[i]);
            if (ref > 0x1.fffffep127) {
                CHECK(isinf(y[i]) && y[i] > 0, "exp(%.9g) = %.9g, not +inf", (double)x[i], (double)y[i]);
                continue;
            }
            double e = ulps(y[i], ref);
            if (e > worst)
                worst = e, worst_x = x[i];
        }
    }
    ck_assert_msg(worst < 1.0, "exp: %.3f ulp at x = %.9g", worst, (double)worst_x);
    /* exactly known results, and the edges of the range against double exp */
    const float sx[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 88.72284f, 89.0f, 1e30f, -104.5f, -1e30f};
    const float sy[] = {INFINITY, 0.0f, NAN, 1.0f, 1.0f, INFINITY, INFINITY, INFINITY, 0.0f, 0.0f};
    const float ex[] = {88.7228f, 88.72283f, -87.33654f, -87.5f, -100.0f, -103.27893f, 1e-30f, -1e-30f};
    float out[10];
    yc_cpu_exp(sx, out, 10);
    for (int i = 0; i < 10; i++)
        ck_assert_msg(isnan(sy[i]) ? isnan(out[i]) : out[i] == sy[i], "exp(%g) = %.9g, expected %.9g",
                      (double)sx[i], (double)out[i], (double)sy[i]);
    yc_cpu_exp(ex, out, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(ulps(out[i], exp((double)ex[i])) < 1.0, "exp(%.9g) = %.9g, expected %.9g",
                      (double)ex[i], (double)out[i], exp((double)ex[i]));
    free(x), free(y);
}
END_TEST

/* Runs SiLU (bwd: SiLU backward with dy) on the values x[0..n) on a backend. */
static void run_silu(yc_backend *be, bool bwd, const float *x, const float *dy, float *out, size_t n)
{
    yc_tensor tx = yc_tensor_make(1, 1, 1, (int)n, YC_F32, "x"), ty = tx, td = tx;
    yc_buffer *buf = yc_buffer_alloc(be, 3 * n * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    tx.buf = ty.buf = td.buf = buf;
    ty.offset = n * sizeof(float), td.offset = 2 * n * sizeof(float);
    ck_assert_int_eq(yc_tensor_set_f32(be, &tx, x), YC_OK);
    yc_op op = {.kind = YC_OP_SILU, .src = {&tx}, .dst = {&ty}};
    if (bwd) {
        ck_assert_int_eq(yc_tensor_set_f32(be, &td, dy), YC_OK);
        op = (yc_op){.kind = YC_OP_SILU_BWD, .src = {&td, &tx}, .dst = {&ty}};
    }
    ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
    ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
    ck_assert_int_eq(yc_tensor_get_f32(be, &ty, out), YC_OK);
    yc_buffer_free(be, buf);
}

START_TEST(silu_accuracy)
{
    /* x from -120 to 120 in steps of about 1e-3, plus the ends of the float range */
    const size_t n = 240001;
    float *x = falloc(n + 8), *dy = falloc(n + 8), *y = falloc(n + 8), *g = falloc(n + 8);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(-120.0 + 240.0 * (double)i / (double)(n - 1)), dy[i] = 1.0f - (float)(i % 7) * 0.25f;
    for (int bi = 0; bi < NBACKENDS; bi++) {
        yc_backend *be = backend_open(bi);
        if (!be)
            continue;
        run_silu(be, false, x, NULL, y, n);
        run_silu(be, true, x, dy, g, n);
        double worst = 0.0, worst_g = 0.0;
        for (size_t i = 0; i < n; i++) {
            double xv = x[i], s = 1.0 / (1.0 + exp(-xv));
            double ref = xv * s, gref = dy[i] * (s + xv * s * (1.0 - s));
            /* below -88.7, exp(-x) overflows in FP32 and PyTorch's formula gives -0 */
            if (xv < -88.0) {
                CHECK(fabs(y[i]) <= 1e-36, "silu(%.9g) = %g", xv, (double)y[i]);
            } else {
                double e = ulps(y[i], ref);
                if (e > worst)
                    worst = e;
            }
            /* the gradient: relative to |dy| (the factor in brackets cancels near x = -1.28) */
            double eg = fabs(g[i] - gref) / (fabs(dy[i]) + 1e-30);
            if (eg > worst_g)
                worst_g = eg;
        }
        ck_assert_msg(worst <= 4.0, "silu on %s: %.2f ulp", backends[bi].name, worst);
        ck_assert_msg(worst_g <= 1e-6, "silu_bwd on %s: error %.3g", backends[bi].name, worst_g);

        /* special values: PyTorch's x / (1 + exp(-x)) and dy * s * (1 + x * (1 - s)) */
        const float sx[] = {-INFINITY, INFINITY, NAN,    -0.0f,    0.0f,   -1e30f,
                            1e30f,     -100.0f,  100.0f, -FLT_MAX, FLT_MAX};
        const size_t ns = sizeof sx / sizeof sx[0];
        float sd[sizeof sx / sizeof sx[0]], sy[sizeof sx / sizeof sx[0]], sg[sizeof sx / sizeof sx[0]];
        for (size_t i = 0; i < ns; i++)
            sd[i] = 2.0f;
        run_silu(be, false, sx, NULL, sy, ns);
        run_silu(be, true, sx, sd, sg, ns);
        ck_assert(isnan(sy[0]));                     /* -inf / inf */
        ck_assert(isinf(sy[1]) && sy[1] > 0);        /* inf / 1 */
        ck_assert(isnan(sy[2]));                     /* NaN */
        ck_assert(sy[3] == 0.0f && signbit(sy[3]));  /* -0 / 2 */
        ck_assert(sy[4] == 0.0f && !signbit(sy[4])); /* +0 / 2 */
        ck_assert(sy[5] == 0.0f && signbit(sy[5]));  /* -1e30 / inf */
        ck_assert(sy[6] == 1e30f);                   /* 1e30 / 1 */
        ck_assert(sy[7] == 0.0f && signbit(sy[7]));  /* exp(100) overflows */
        ck_assert(sy[8] == 100.0f);
        ck_assert(sy[9] == 0.0f && signbit(sy[9]));
        ck_assert(sy[10] == FLT_MAX);
        ck_assert(isnan(sg[0]) && isnan(sg[1]) && isnan(sg[2])); /* inf * 0 */
        ck_assert(sg[3] == 1.0f && sg[4] == 1.0f);               /* dy * 0.5 * 1 */
        ck_assert(sg[5] == 0.0f && signbit(sg[5]));              /* (2 * 0) * (1 - 1e30) */
        ck_assert(sg[6] == 2.0f && sg[8] == 2.0f && sg[10] == 2.0f);
        ck_assert(sg[7] == 0.0f && signbit(sg[7]));
        yc_backend_free(be);
    }
    free(x), free(dy), free(y), free(g);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 5. Max-pool tie-breaking, worked out by hand.
 * ------------------------------------------------------------------------------------------- */

static void fz_exec(yc_backend *be, const yc_op *op);

/* One plane x (1,1,H,W) pooled with (k, s, p), dy = 1 everywhere; compares y and dx. */
static void pool_case(yc_backend *be, const char *bname, const char *what, int H, int W, int k, int s, int p,
                      const float *x, const float *ywant, const float *dxwant)
{
    int P = ref_pool_out(H, k, s, p), Q = ref_pool_out(W, k, s, p);
    yc_buffer *buf = yc_buffer_alloc(be, (size_t)(3 * H * W + 2 * P * Q) * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    yc_tensor tx = yc_tensor_make(1, 1, H, W, YC_F32, "x"), ty = yc_tensor_make(1, 1, P, Q, YC_F32, "y");
    yc_tensor tdy = ty, tdx = tx;
    tx.buf = ty.buf = tdy.buf = tdx.buf = buf;
    ty.offset = (size_t)H * W * 4, tdy.offset = ty.offset + (size_t)P * Q * 4,
    tdx.offset = tdy.offset + (size_t)P * Q * 4;
    float *ones = falloc((size_t)P * Q), *got = falloc((size_t)H * W);
    for (int i = 0; i < P * Q; i++)
        ones[i] = 1.0f;
    ck_assert_int_eq(yc_tensor_set_f32(be, &tx, x), YC_OK);
    ck_assert_int_eq(yc_tensor_set_f32(be, &tdy, ones), YC_OK);
    yc_op op = {.kind = YC_OP_MAXPOOL, .src = {&tx}, .dst = {&ty}};
    op.p.pool.k = k, op.p.pool.stride = s, op.p.pool.pad = p;
    fz_exec(be, &op);
    ck_assert_int_eq(yc_tensor_get_f32(be, &ty, got), YC_OK);
    for (int i = 0; i < P * Q; i++)
        CHECK((isnan(ywant[i]) && isnan(got[i])) || got[i] == ywant[i], "%s on %s: y[%d] = %g, expected %g",
              what, bname, i, (double)got[i], (double)ywant[i]);
    op.kind = YC_OP_MAXPOOL_BWD;
    op.src[0] = &tdy, op.src[1] = &tx, op.dst[0] = &tdx;
    fz_exec(be, &op);
    ck_assert_int_eq(yc_tensor_get_f32(be, &tdx, got), YC_OK);
    for (int i = 0; i < H * W; i++)
        CHECK(got[i] == dxwant[i], "%s on %s: dx[%d] = %g, expected %g", what, bname, i, (double)got[i],
              (double)dxwant[i]);
    free(ones), free(got);
    yc_buffer_free(be, buf);
}

START_TEST(maxpool_ties)
{
    const float ones16[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int bi = 0; bi < NBACKENDS; bi++) {
        yc_backend *be = backend_open(bi);
        if (!be)
            continue;
        const char *bn = backends[bi].name;
        /* all equal, k2 s2: each window's first element */
        const float y1[4] = {1, 1, 1, 1};
        const float dx1[16] = {1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0};
        pool_case(be, bn, "constant k2 s2", 4, 4, 2, 2, 0, ones16, y1, dx1);
        /* all equal, k3 s1 p1: the first position inside the image of each window */
        const float y2[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        const float dx2[9] = {4, 2, 0, 2, 1, 0, 0, 0, 0};
        pool_case(be, bn, "constant k3 s1 p1", 3, 3, 3, 1, 1, ones16, y2, dx2);
        /* ties below a larger value elsewhere: the first of the maxima */
        const float x3[4] = {3, 1, 3, 3}, y3[1] = {3}, dx3[4] = {1, 0, 0, 0};
        pool_case(be, bn, "ties", 2, 2, 2, 2, 0, x3, y3, dx3);
        const float x4[4] = {1, 3, 2, 3}, dx4[4] = {0, 1, 0, 0};
        pool_case(be, bn, "later ties", 2, 2, 2, 2, 0, x4, y3, dx4);
        /* NaN is the maximum; with two NaNs the last one (PyTorch) */
        const float x5[4] = {NAN, 5, NAN, 1}, y5[1] = {NAN}, dx5[4] = {0, 0, 1, 0};
        pool_case(be, bn, "two NaNs", 2, 2, 2, 2, 0, x5, y5, dx5);
        const float x6[4] = {1, NAN, 7, 3}, dx6[4] = {0, 1, 0, 0};
        pool_case(be, bn, "NaN before a larger value", 2, 2, 2, 2, 0, x6, y5, dx6);
        /* a window of -inf: its first position */
        const float x7[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, y7[1] = {-INFINITY},
                    dx7[4] = {1, 0, 0, 0};
        pool_case(be, bn, "-inf window", 2, 2, 2, 2, 0, x7, y7, dx7);
        /* the same with stride 1 (the CPU backend's vector path): k3 p1 on 2x2, every window the
         * whole plane */
        const float y8[4] = {NAN, NAN, NAN, NAN}, dx8[4] = {0, 0, 4, 0}, dx9[4] = {0, 4, 0, 0};
        pool_case(be, bn, "two NaNs k3 s1 p1", 2, 2, 3, 1, 1, x5, y8, dx8);
        pool_case(be, bn, "NaN before a larger value k3 s1 p1", 2, 2, 3, 1, 1, x6, y8, dx9);
        const float y10[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, dx10[4] = {4, 0, 0, 0};
        pool_case(be, bn, "-inf plane k3 s1 p1", 2, 2, 3, 1, 1, x7, y10, dx10);
        /* k5 s1 p2 on a row of 20 (past one vector of 16 lanes): -inf but a NaN at 18, so
         * outputs 16..19 take the NaN and the others their window's first column, max(q - 2, 0) */
        float x11[20], y11[20], dx11[20] = {3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 4, 0};
        for (int i = 0; i < 20; i++) {
            x11[i] = i == 18 ? NAN : -INFINITY;
            y11[i] = i >= 16 ? NAN : -INFINITY;
        }
        pool_case(be, bn, "-inf row with a NaN k5 s1 p2", 1, 20, 5, 1, 2, x11, y11, dx11);
        yc_backend_free(be);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 6. Optimizer sequences against PyTorch 1.13.1.
 *
 * Five steps with fixed gradients (seq_grad[k] scaled by seq_scale[k], as clip_grad_norm_ scales
 * them) from seq_w0 and zero optimizer state; three EMA updates of seq_w0 towards seq_grad[0..2].
 * The expected values are what PyTorch 1.13.1 (Debian python3-torch, CPU) printed (shortest
 * round-trip decimals of its float32 results) with every parameter a float32 value,
 * f(x) = float(numpy.float32(x)):
 *   SGD:   p = torch.nn.Parameter(torch.tensor(seq_w0))
 *          opt = torch.optim.SGD([p], lr=f(0.01), momentum=f(0.937), weight_decay=f(5e-4),
 *                                nesterov=True)
 *          for k in range(5): p.grad = torch.tensor(seq_grad[k])
 *                             p.grad.mul_(torch.tensor(f(seq_scale[k]))); opt.step()
 *          -> p, opt.state[p]["momentum_buffer"]
 *   Adam:  the same with torch.optim.Adam([p], lr=f(0.01), betas=(f(0.937), f(0.999)), eps=f(1e-8),
 *          weight_decay=f(5e-4), foreach=False) -> p, exp_avg, exp_avg_sq (step 5)
 *   AdamW: the same with torch.optim.AdamW and weight_decay=f(0.05)
 *   EMA:   e = torch.tensor(seq_w0)
 *          for k, u in enumerate((1, 2000, 10000)): d = f(0.9999 * (1 - math.exp(-u / 2000)))
 *                                                   e *= d; e += (1 - d) * torch.tensor(seq_grad[k])
 *          (YOLOv5's ModelEMA.update)
 * The kernels must give these bits on every backend, and the double references of tests/ref_ops.c
 * (sgd.py's and adam.py's formulas in double) must agree with them to 1e-6.
 * ------------------------------------------------------------------------------------------- */
#define SEQ_N 5
#define SEQ_STEPS 5
#define SEQ_EMA 3
static const float seq_w0[SEQ_N] = {0.5f, -1.25f, 2.0f, 0.0f, 0.003f};
static const float seq_grad[SEQ_STEPS][SEQ_N] = {
    {0.1f, -0.2f, 0.3f, 0.0f, 1.5f},   {0.05f, 0.4f, -0.1f, 0.0f, -2.0f}, {-0.3f, 0.1f, 0.2f, 0.0f, 0.7f},
    {0.2f, -0.05f, -0.4f, 0.0f, 0.01f}, {0.0f, 0.25f, 0.15f, 0.0f, -0.9f},
};
static const float seq_scale[SEQ_STEPS] = {1.0f, 1.0f, 0.5f, 1.0f, 0.8f};
static const int seq_ema_updates[SEQ_EMA] = {1, 2000, 10000};

/* PyTorch's results: w, then the state (SGD: buf; Adam and AdamW: m, v) */
static const float seq_sgd_want[2][SEQ_N] = {
    {0.49244693f, -1.2615455f, 1.9941353f, 0.0f, 0.01514202f},
    {0.17501612f, 0.3691854f, -0.013623871f, 0.0f, -0.8924214f},
};
static const float seq_adam_want[3][SEQ_N] = {
    {0.4741146f, -1.2528304f, 1.9823886f, 0.0f, -0.0026329504f},
    {0.011024359f, 0.023259543f, -0.0008593042f, 0.0f, -0.056222413f},
    {7.4965326e-05f, 0.00024385694f, 0.00028387562f, 0.0f, 0.0068697124f},
};
static const float seq_adamw_want[3][SEQ_N] = {
    {0.47296023f, -1.2498081f, 1.9775778f, 0.0f, -0.0026238076f},
    {0.010956992f, 0.023432564f, -0.0011352557f, 0.0f, -0.056221876f},
    {7.486663e-05f, 0.00024435006f, 0.00028382693f, 0.0f, 0.006869692f},
};
static const float seq_ema_want[SEQ_N] = {0.07911926f, 0.020977886f, 0.1536789f, 0.0f, 0.2150663f};

/* YOLOv5's EMA decay after u updates, as a float */
static float seq_ema_decay(int u)
{
    return (float)(0.9999 * (1.0 - exp(-(double)u / 2000.0)));
}

/* Runs the sequence of `op` (kind and fixed parameters set) on a backend: src[0] is the gradient
 * (EMA: x), dst[0] starts as seq_w0 and dst[1..nd-1] as zeros; returns the nd dst tensors in out. */
static void seq_run(yc_backend *be, yc_op *op, int nd, float out[][SEQ_N])
{
    yc_buffer *buf = yc_buffer_alloc(be, 4 * SEQ_N * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    yc_tensor t[4];
    const float zero[SEQ_N] = {0};
    for (int i = 0; i < 4; i++) {
        t[i] = yc_tensor_make(1, SEQ_N, 1, 1, YC_F32, "seq");
        t[i].buf = buf;
        t[i].offset = (size_t)i * SEQ_N * sizeof(float);
        ck_assert_int_eq(yc_tensor_set_f32(be, &t[i], i == 1 ? seq_w0 : zero), YC_OK);
    }
    op->src[0] = &t[0];
    for (int d = 0; d < nd; d++)
        op->dst[d] = &t[1 + d];
    int steps = op->kind == YC_OP_EMA ? SEQ_EMA : SEQ_STEPS;
    for (int k = 0; k < steps; k++) {
        ck_assert_int_eq(yc_tensor_set_f32(be, &t[0], seq_grad[k]), YC_OK);
        if (op->kind == YC_OP_SGD)
            op->p.sgd.scale = seq_scale[k];
        else if (op->kind == YC_OP_ADAM)
            op->p.adam.scale = seq_scale[k], op->p.adam.step = k + 1;
        else
            op->p.ema.decay = seq_ema_decay(seq_ema_updates[k]);
        int rc = yc_backend_exec(be, op, (yc_span){0});
        ck_assert_msg(rc == YC_OK, "%s step %d: %s", yc_op_kind_name(op->kind), k, yc_last_error());
    }
    for (int d = 0; d < nd; d++)
        ck_assert_int_eq(yc_tensor_get_f32(be, &t[1 + d], out[d]), YC_OK);
    yc_buffer_free(be, buf);
}

/* got must equal want bit for bit, and lie within 1e-6 (normalised) of the double reference */
static void seq_compare(const char *what, const char *bname, int nd, float got[][SEQ_N],
                        const float want[][SEQ_N], double ref[][SEQ_N])
{
    for (int d = 0; d < nd; d++) {
        double w[SEQ_N];
        for (int i = 0; i < SEQ_N; i++) {
            CHECK(fbits(got[d][i]) == fbits(want[d][i]), "%s on %s: tensor %d [%d] = %.9g, PyTorch %.9g", what,
                  bname, d, i, (double)got[d][i], (double)want[d][i]);
            w[i] = want[d][i];
        }
        double e = norm_err(w, ref[d], SEQ_N, 0.0);
        ck_assert_msg(e < 1e-6, "%s: tensor %d: PyTorch's values and the double reference differ by %.3g", what, d,
                      e);
    }
}

START_TEST(optim_sequences)
{
    /* the double references, step by step */
    double sgd_ref[2][SEQ_N] = {{0}}, adam_ref[3][SEQ_N] = {{0}}, adamw_ref[3][SEQ_N] = {{0}}, ema_ref[1][SEQ_N];
    for (int i = 0; i < SEQ_N; i++)
        sgd_ref[0][i] = adam_ref[0][i] = adamw_ref[0][i] = ema_ref[0][i] = seq_w0[i];
    for (int k = 0; k < SEQ_STEPS; k++) {
        double g[SEQ_N];
        for (int i = 0; i < SEQ_N; i++)
            g[i] = seq_grad[k][i];
        ref_sgd(g, SEQ_N, 0.01f, 0.937f, 5e-4f, seq_scale[k], 1, sgd_ref[0], sgd_ref[1]);
        ref_adam(g, SEQ_N, 0.01f, 0.937f, 0.999f, 1e-8f, 5e-4f, seq_scale[k], k + 1, 0, adam_ref[0], adam_ref[1],
                 adam_ref[2]);
        ref_adam(g, SEQ_N, 0.01f, 0.937f, 0.999f, 1e-8f, 0.05f, seq_scale[k], k + 1, 1, adamw_ref[0],
                 adamw_ref[1], adamw_ref[2]);
        if (k < SEQ_EMA)
            ref_ema(g, SEQ_N, seq_ema_decay(seq_ema_updates[k]), ema_ref[0]);
    }
    /* the decays PyTorch used */
    ck_assert(seq_ema_decay(1) == 0.00049982505f && seq_ema_decay(2000) == 0.63205737f &&
              seq_ema_decay(10000) == 0.99316275f);
    for (int bi = 0; bi < NBACKENDS; bi++) {
        yc_backend *be = backend_open(bi);
        if (!be)
            continue;
        const char *bn = backends[bi].name;
        float got[3][SEQ_N];
        yc_op op = {.kind = YC_OP_SGD, .name = "seq"};
        op.p.sgd.lr = 0.01f, op.p.sgd.momentum = 0.937f, op.p.sgd.wd = 5e-4f, op.p.sgd.nesterov = 1;
        seq_run(be, &op, 2, got);
        seq_compare("sgd nesterov", bn, 2, got, seq_sgd_want, sgd_ref);

        op = (yc_op){.kind = YC_OP_ADAM, .name = "seq"};
        op.p.adam.lr = 0.01f, op.p.adam.beta1 = 0.937f, op.p.adam.beta2 = 0.999f, op.p.adam.eps = 1e-8f;
        op.p.adam.wd = 5e-4f;
        seq_run(be, &op, 3, got);
        seq_compare("adam", bn, 3, got, seq_adam_want, adam_ref);
        op.p.adam.wd = 0.05f, op.p.adam.decoupled = 1;
        seq_run(be, &op, 3, got);
        seq_compare("adamw", bn, 3, got, seq_adamw_want, adamw_ref);

        op = (yc_op){.kind = YC_OP_EMA, .name = "seq"};
        seq_run(be, &op, 1, got);
        seq_compare("ema", bn, 1, got, &seq_ema_want, ema_ref);
        yc_backend_free(be);
    }
}
END_TEST

/* SGD and Adam given the gradients' sum of squares compute the clipping coefficient on the
 * device as yc_clip_scale does (a clipped and an unclipped norm, against the reference with that
 * scale), and leave the weights and state as they were when the sum is NaN or infinite. */
START_TEST(optim_clip_on_device)
{
    enum { N = 1031 };
    float *grad = falloc(N), *w = falloc(N), *b = falloc(N), *m2 = falloc(N);
    yc_rng r;
    yc_rng_seed(&r, 91, 1);
    fill_init(&r, grad, N, I_UNIFORM, false);
    fill_init(&r, w, N, I_UNIFORM, false);
    fill_init(&r, b, N, I_UNIFORM, false);
    fill_init(&r, m2, N, I_POS, false);
    const float sums[4] = {400.0f, 0.25f, NAN, INFINITY};
    for (int bi = 0; bi < NBACKENDS; bi++) {
        yc_backend *be = backend_open(bi);
        if (!be)
            continue;
        yc_buffer *buf = yc_buffer_alloc(be, (5 * N + 1) * sizeof(float));
        ck_assert_ptr_nonnull(buf);
        yc_tensor t[5];
        for (int i = 0; i < 5; i++) {
            t[i] = yc_tensor_make(1, N, 1, 1, YC_F32, "t");
            t[i].buf = buf;
            t[i].offset = (size_t)i * N * sizeof(float);
        }
        yc_tensor ts = yc_tensor_make(1, 1, 1, 1, YC_F32, "sumsq");
        ts.buf = buf;
        ts.offset = 5 * (size_t)N * sizeof(float);
        for (int k = 0; k < 4; k++) {
            for (int adam = 0; adam < 2; adam++) {
                ck_assert_int_eq(yc_tensor_set_f32(be, &t[0], grad), YC_OK);
                ck_assert_int_eq(yc_tensor_set_f32(be, &t[1], w), YC_OK);
                ck_assert_int_eq(yc_tensor_set_f32(be, &t[2], b), YC_OK);
                ck_assert_int_eq(yc_tensor_set_f32(be, &t[3], m2), YC_OK);
                ck_assert_int_eq(yc_tensor_set_f32(be, &ts, &sums[k]), YC_OK);
                yc_op op = {.kind = adam ? YC_OP_ADAM : YC_OP_SGD, .src = {&t[0], &ts},
                            .dst = {&t[1], &t[2], adam ? &t[3] : NULL}, .name = "clip"};
                if (adam) {
                    op.p.adam.lr = 1e-3f, op.p.adam.beta1 = 0.937f, op.p.adam.beta2 = 0.999f;
                    op.p.adam.eps = 1e-8f, op.p.adam.wd = 5e-4f, op.p.adam.scale = 1.0f;
                    op.p.adam.max_norm = 10.0f, op.p.adam.step = 3;
                } else {
                    op.p.sgd.lr = 0.01f, op.p.sgd.momentum = 0.937f, op.p.sgd.wd = 5e-4f;
                    op.p.sgd.scale = 1.0f, op.p.sgd.max_norm = 10.0f, op.p.sgd.nesterov = 1;
                }
                ck_assert_msg(yc_backend_exec(be, &op, (yc_span){0}) == YC_OK, "%s", yc_last_error());
                float got[3][N];
                for (int i = 0; i < (adam ? 3 : 2); i++)
                    ck_assert_int_eq(yc_tensor_get_f32(be, &t[1 + i], got[i]), YC_OK);
                const float *init[3] = {w, b, m2};
                if (!isfinite(sums[k])) {
                    for (int i = 0; i < (adam ? 3 : 2); i++)
                        ck_assert_msg(memcmp(got[i], init[i], sizeof got[i]) == 0,
                                      "%s on %s with sumsq %g changed its tensor %d",
                                      adam ? "adam" : "sgd", backends[bi].name, (double)sums[k], i);
                    continue;
                }
                float scale = yc_clip_scale(sums[k], 10.0f);
                ck_assert(k == 0 ? scale < 0.6f : scale == 1.0f);
                double *g = to_double(grad, N), *rw = to_double(w, N), *rb = to_double(b, N);
                double *rv = to_double(m2, N);
                if (adam)
                    ref_adam(g, N, 1e-3f, 0.937f, 0.999f, 1e-8f, 5e-4f, scale, 3, 0, rw, rb, rv);
                else
                    ref_sgd(g, N, 0.01f, 0.937f, 5e-4f, scale, 1, rw, rb);
                double worst = 0, big = 0;
                for (int i = 0; i < N; i++) {
                    worst = fmax(worst, fabs(got[0][i] - rw[i]));
                    big = fmax(big, fabs(w[i]));
                }
                ck_assert_msg(worst <= 4e-7 * big, "%s on %s, sumsq %g: weights off by %.3g",
                              adam ? "adam" : "sgd", backends[bi].name, (double)sums[k], worst);
                free(g), free(rw), free(rb), free(rv);
            }
        }
        yc_buffer_free(be, buf);
        yc_backend_free(be);
    }
    free(grad), free(w), free(b), free(m2);
}
END_TEST

/* SUMSQ over many elements gives the same bits every time (fixed order), and accumulates. */
START_TEST(sumsq_repeat)
{
    const size_t n = 300007;
    float *x = falloc(n);
    yc_rng r;
    yc_rng_seed(&r, 78, 1);
    fill_init(&r, x, n, I_WIDE, false);
    double *xd = to_double(x, n);
    double want = ref_sumsq(xd, n);
    for (int bi = 0; bi < NBACKENDS; bi++) {
        yc_backend *be = backend_open(bi);
        if (!be)
            continue;
        yc_buffer *buf = yc_buffer_alloc(be, (n + 1) * sizeof(float));
        ck_assert_ptr_nonnull(buf);
        yc_tensor tx = yc_tensor_make(1, (int)n, 1, 1, YC_F32, "x"), ts = yc_tensor_make(1, 1, 1, 1, YC_F32, "s");
        tx.buf = ts.buf = buf;
        ts.offset = n * sizeof(float);
        ck_assert_int_eq(yc_tensor_set_f32(be, &tx, x), YC_OK);
        yc_op op = {.kind = YC_OP_SUMSQ, .src = {&tx}, .dst = {&ts}};
        float s[3];
        for (int k = 0; k < 2; k++) {
            ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
            ck_assert_int_eq(yc_tensor_get_f32(be, &ts, &s[k]), YC_OK);
        }
        ck_assert_msg(fbits(s[0]) == fbits(s[1]), "sumsq on %s: %.9g then %.9g", backends[bi].name, (double)s[0],
                      (double)s[1]);
        ck_assert_msg(fabs(s[0] - want) <= 1e-7 * want, "sumsq on %s: %.9g, expected %.9g", backends[bi].name,
                      (double)s[0], want);
        op.accumulate = 1;
        ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_OK);
        ck_assert_int_eq(yc_tensor_get_f32(be, &ts, &s[2]), YC_OK);
        ck_assert_msg(fabs(s[2] - 2.0 * want) <= 2e-7 * want, "sumsq accumulate on %s: %.9g, expected %.9g",
                      backends[bi].name, (double)s[2], 2.0 * want);
        yc_buffer_free(be, buf);
        yc_backend_free(be);
    }
    free(x), free(xd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The op checker, buffers, tensors, device info, errors.
 * ------------------------------------------------------------------------------------------- */
static bool err_has(const char *s)
{
    return strstr(yc_last_error(), s) != NULL;
}

START_TEST(op_check)
{
    yc_tensor x = yc_tensor_make(2, 4, 8, 8, YC_F32, "x"), w = yc_tensor_make(16, 4, 3, 3, YC_F32, "w");
    yc_tensor b = yc_tensor_make(1, 16, 1, 1, YC_F32, "b"), y = yc_tensor_make(2, 16, 4, 4, YC_F32, "y");
    yc_op op = {.kind = YC_OP_CONV2D, .src = {&x, &w, &b}, .dst = {&y}, .name = "layer"};
    op.p.conv.kh = 3, op.p.conv.kw = 3, op.p.conv.stride_h = 2, op.p.conv.stride_w = 2;
    op.p.conv.pad_h = 1, op.p.conv.pad_w = 1, op.p.conv.groups = 1;
    ck_assert_int_eq(yc_op_check(&op), YC_OK);
    op.src[2] = NULL;
    ck_assert_int_eq(yc_op_check(&op), YC_OK); /* the bias is optional */

    yc_tensor w3 = yc_tensor_make(16, 3, 3, 3, YC_F32, "w");
    op.src[1] = &w3;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT);
    ck_assert_msg(err_has("conv2d 'layer'") && err_has("(16,3,3,3)") && err_has("(2,4,8,8)"), "%s",
                  yc_last_error());
    op.src[1] = &w;
    yc_tensor ybad = yc_tensor_make(2, 16, 5, 4, YC_F32, "y");
    op.dst[0] = &ybad;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT);
    ck_assert_msg(err_has("(2,16,5,4)") && err_has("(2,16,4,4)"), "%s", yc_last_error());
    op.dst[0] = &y;
    op.accumulate = 1;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT);
    ck_assert_msg(err_has("accumulate"), "%s", yc_last_error());
    op.accumulate = 0;
    op.dst[1] = &b;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT);
    ck_assert_msg(err_has("dst[1]"), "%s", yc_last_error());
    op.dst[1] = NULL;
    op.src[0] = NULL;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT);
    ck_assert_msg(err_has("src[0] (x) is missing"), "%s", yc_last_error());
    op.src[0] = &x;
    yc_tensor xs = x;
    xs.nstride = 10;
    op.src[0] = &xs;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT);
    ck_assert_msg(err_has("nstride"), "%s", yc_last_error());
    op.src[0] = &x;
    yc_tensor wh = w;
    wh.type = YC_F16;
    op.src[1] = &wh;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT); /* parameters are FP32 */
    op.src[1] = &w;
    yc_tensor xh = x, yh = y, bh = b;
    xh.type = yh.type = bh.type = YC_F16;
    op.src[0] = &xh, op.dst[0] = &yh;
    ck_assert_int_eq(yc_op_check(&op), YC_OK); /* activations may be FP16 */
    op.src[2] = &bh;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT);
    op.src[2] = &b, op.src[0] = &x, op.dst[0] = &y;
    op.p.conv.kh = 5;
    ck_assert_int_eq(yc_op_check(&op), YC_EFORMAT);

    /* bwd-filter: db shape */
    yc_tensor dbb = yc_tensor_make(1, 15, 1, 1, YC_F32, "db");
    yc_op f = {.kind = YC_OP_CONV2D_BWD_FILTER, .src = {&x, &y}, .dst = {&w, &dbb}};
    f.p.conv = op.p.conv;
    f.p.conv.kh = 3;
    ck_assert_int_eq(yc_op_check(&f), YC_EFORMAT);
    ck_assert_msg(err_has("db (1,15,1,1)"), "%s", yc_last_error());
    f.dst[1] = &b;
    ck_assert_int_eq(yc_op_check(&f), YC_OK);

    /* max pool: padding at most half the kernel */
    yc_tensor py = yc_tensor_make(2, 4, 8, 8, YC_F32, "py");
    yc_op mp = {.kind = YC_OP_MAXPOOL, .src = {&x}, .dst = {&py}};
    mp.p.pool.k = 5, mp.p.pool.stride = 1, mp.p.pool.pad = 2;
    ck_assert_int_eq(yc_op_check(&mp), YC_OK);
    mp.p.pool.k = 3;
    ck_assert_int_eq(yc_op_check(&mp), YC_EFORMAT);

    /* batch norm training needs two values per channel */
    yc_tensor x1 = yc_tensor_make(1, 4, 1, 1, YC_F32, "x1"), v4 = yc_tensor_make(1, 4, 1, 1, YC_F32, "v");
    yc_tensor s4 = yc_tensor_make(2, 4, 1, 1, YC_F32, "s");
    yc_op bn = {.kind = YC_OP_BN_TRAIN, .src = {&x1, &v4, &v4}, .dst = {&x1, &s4, &v4, &v4}};
    bn.p.bn.eps = 1e-3f, bn.p.bn.momentum = 0.03f;
    ck_assert_int_eq(yc_op_check(&bn), YC_EFORMAT);
    ck_assert_msg(err_has("bn_train"), "%s", yc_last_error());

    /* bn_silu_apply: the statistics are given (one value per channel will do), shaped (2,C,1,1) */
    yc_tensor a1 = x1, a2 = yc_tensor_make(1, 4, 1, 2, YC_F32, "a");
    yc_op ap = {.kind = YC_OP_BN_SILU_APPLY, .src = {&x1, &v4, &v4, &s4}, .dst = {&a1}, .name = "cv"};
    ck_assert_int_eq(yc_op_check(&ap), YC_OK);
    ap.src[3] = &v4;
    ck_assert_int_eq(yc_op_check(&ap), YC_EFORMAT);
    ck_assert_msg(err_has("bn_silu_apply 'cv'") && err_has("stats (1,4,1,1)"), "%s", yc_last_error());
    ap.src[3] = &s4, ap.dst[0] = &a2;
    ck_assert_int_eq(yc_op_check(&ap), YC_EFORMAT);
    ck_assert_msg(err_has("a (1,4,1,2)"), "%s", yc_last_error());
    ap.dst[0] = &a1, ap.dst[1] = &s4;
    ck_assert_int_eq(yc_op_check(&ap), YC_EFORMAT);
    ck_assert_msg(err_has("dst[1]"), "%s", yc_last_error());

    /* upsample shapes */
    yc_tensor up = yc_tensor_make(2, 4, 16, 15, YC_F32, "up");
    yc_op u = {.kind = YC_OP_UPSAMPLE, .src = {&x}, .dst = {&up}};
    u.p.up.factor = 2;
    ck_assert_int_eq(yc_op_check(&u), YC_EFORMAT);
    ck_assert_msg(err_has("upsample") && err_has("(2,4,16,16)"), "%s", yc_last_error());

    /* optimizer ops: dense FP32 tensors of one element count, parameters in range */
    yc_tensor g10 = yc_tensor_make(1, 10, 1, 1, YC_F32, "g"), w10 = yc_tensor_make(2, 5, 1, 1, YC_F32, "w");
    yc_tensor b10 = yc_tensor_make(1, 10, 1, 1, YC_F32, "b"), b9 = yc_tensor_make(1, 9, 1, 1, YC_F32, "b9");
    yc_op sg = {.kind = YC_OP_SGD, .src = {&g10}, .dst = {&w10, &b10}, .name = "group"};
    sg.p.sgd.lr = 0.01f, sg.p.sgd.momentum = 0.937f, sg.p.sgd.wd = 5e-4f, sg.p.sgd.scale = 1.0f;
    sg.p.sgd.nesterov = 1;
    ck_assert_int_eq(yc_op_check(&sg), YC_OK);
    sg.dst[1] = &b9;
    ck_assert_int_eq(yc_op_check(&sg), YC_EFORMAT);
    ck_assert_msg(err_has("sgd 'group'") && err_has("buf (1,9,1,1) has 9 elements"), "%s", yc_last_error());
    sg.dst[1] = NULL;
    ck_assert_int_eq(yc_op_check(&sg), YC_EFORMAT);
    ck_assert_msg(err_has("dst[1] (buf) is missing"), "%s", yc_last_error());
    sg.dst[1] = &b10;
    sg.accumulate = 1;
    ck_assert_int_eq(yc_op_check(&sg), YC_EFORMAT);
    sg.accumulate = 0;
    yc_tensor w16 = w10, wv = w10;
    w16.type = YC_F16;
    wv.nstride = 6;
    sg.dst[0] = &w16;
    ck_assert_int_eq(yc_op_check(&sg), YC_EFORMAT);
    sg.dst[0] = &wv;
    ck_assert_int_eq(yc_op_check(&sg), YC_EFORMAT);
    ck_assert_msg(err_has("dense"), "%s", yc_last_error());
    sg.dst[0] = &w10;
    const float sgd_bad[][4] = {{-0.01f, 0.9f, 0, 1}, {NAN, 0.9f, 0, 1},     {0.01f, 1.0f, 0, 1},
                                {0.01f, -0.1f, 0, 1}, {0.01f, 0.9f, -1e-4f, 1}, {0.01f, 0.9f, 0, INFINITY}};
    for (size_t i = 0; i < sizeof sgd_bad / sizeof sgd_bad[0]; i++) {
        yc_op o = sg;
        o.p.sgd.lr = sgd_bad[i][0], o.p.sgd.momentum = sgd_bad[i][1], o.p.sgd.wd = sgd_bad[i][2];
        o.p.sgd.scale = sgd_bad[i][3];
        ck_assert_int_eq(yc_op_check(&o), YC_EFORMAT);
        ck_assert_msg(err_has("invalid parameters"), "%s", yc_last_error());
    }
    sg.p.sgd.nesterov = 2;
    ck_assert_int_eq(yc_op_check(&sg), YC_EFORMAT);
    sg.p.sgd.nesterov = 0, sg.p.sgd.momentum = 0.0f, sg.p.sgd.scale = 0.0f;
    ck_assert_int_eq(yc_op_check(&sg), YC_OK);

    yc_tensor m10 = b10, v10 = b10;
    yc_op ad = {.kind = YC_OP_ADAM, .src = {&g10}, .dst = {&w10, &m10, &v10}};
    ad.p.adam.lr = 1e-3f, ad.p.adam.beta1 = 0.937f, ad.p.adam.beta2 = 0.999f, ad.p.adam.eps = 1e-8f;
    ad.p.adam.wd = 5e-4f, ad.p.adam.scale = 0.5f, ad.p.adam.step = 1, ad.p.adam.decoupled = 1;
    ck_assert_int_eq(yc_op_check(&ad), YC_OK);
    ad.dst[2] = NULL;
    ck_assert_int_eq(yc_op_check(&ad), YC_EFORMAT);
    ad.dst[2] = &v10;
    yc_op adam_bad[7];
    for (int i = 0; i < 7; i++)
        adam_bad[i] = ad;
    adam_bad[0].p.adam.step = 0;
    adam_bad[1].p.adam.eps = 0.0f;
    adam_bad[2].p.adam.beta2 = 1.0f;
    adam_bad[3].p.adam.beta1 = -0.5f;
    adam_bad[4].p.adam.decoupled = 2;
    adam_bad[5].p.adam.wd = NAN;
    adam_bad[6].p.adam.lr = INFINITY;
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(yc_op_check(&adam_bad[i]), YC_EFORMAT);
        ck_assert_msg(err_has("adam") && err_has("invalid parameters"), "%s", yc_last_error());
    }

    yc_op em = {.kind = YC_OP_EMA, .src = {&g10}, .dst = {&w10}};
    em.p.ema.decay = 1.0f;
    ck_assert_int_eq(yc_op_check(&em), YC_OK);
    em.p.ema.decay = 0.0f;
    ck_assert_int_eq(yc_op_check(&em), YC_OK);
    em.p.ema.decay = 1.5f;
    ck_assert_int_eq(yc_op_check(&em), YC_EFORMAT);
    ck_assert_msg(err_has("ema") && err_has("decay"), "%s", yc_last_error());
    em.p.ema.decay = NAN;
    ck_assert_int_eq(yc_op_check(&em), YC_EFORMAT);
    em.p.ema.decay = 0.5f;
    em.dst[0] = &b9;
    ck_assert_int_eq(yc_op_check(&em), YC_EFORMAT);

    /* sumsq: any dense tensor (FP16 too) into one value, accumulate allowed */
    yc_tensor one = yc_tensor_make(1, 1, 1, 1, YC_F32, "s"), xh16 = x;
    xh16.type = YC_F16;
    yc_op sq = {.kind = YC_OP_SUMSQ, .src = {&x}, .dst = {&one}, .accumulate = 1};
    ck_assert_int_eq(yc_op_check(&sq), YC_OK);
    sq.src[0] = &xh16;
    ck_assert_int_eq(yc_op_check(&sq), YC_OK);
    yc_tensor xgap = x;
    xgap.nstride = 300;
    sq.src[0] = &xgap;
    ck_assert_int_eq(yc_op_check(&sq), YC_EFORMAT);
    ck_assert_msg(err_has("sumsq") && err_has("dense"), "%s", yc_last_error());
    sq.src[0] = &x;
    sq.dst[0] = &b10;
    ck_assert_int_eq(yc_op_check(&sq), YC_EFORMAT);
    ck_assert_msg(err_has("(1,1,1,1)"), "%s", yc_last_error());

    for (int k = 0; k < YC_OP_COUNT; k++)
        ck_assert_str_ne(yc_op_kind_name((yc_op_kind)k), "unknown");
    ck_assert_str_eq(yc_op_kind_name(YC_OP_SGD), "sgd");
    ck_assert_str_eq(yc_op_kind_name(YC_OP_ADAM), "adam");
    ck_assert_str_eq(yc_op_kind_name(YC_OP_EMA), "ema");
    ck_assert_str_eq(yc_op_kind_name(YC_OP_SUMSQ), "sumsq");
    ck_assert_str_eq(yc_op_kind_name(YC_OP_CONV2D_BWD_FILTER), "conv2d_bwd_filter");
    ck_assert_str_eq(yc_op_kind_name(YC_OP_BN_SILU_APPLY), "bn_silu_apply");
    ck_assert_str_eq(yc_op_kind_name(YC_OP_COUNT), "unknown");
    ck_assert_int_eq(yc_op_check(NULL), YC_EFORMAT);
}
END_TEST

/* The copies that overlap the ops (backend.h: read_start, marker, the tokens, host_alloc,
 * buffer_write_async) on every backend: a read started after ops sees what they wrote while an op
 * submitted after the read writes the rest of the buffer; the tokens finish (NULL on the CPU,
 * whose copies finish at once); a write back from pinned memory reaches the buffer; ranges outside
 * the buffer are refused. */
START_TEST(async_copies)
{
    enum { N = 1 << 18 };
    const size_t half = (size_t)N / 2 * sizeof(float);
    for (int bi = 0; bi < NBACKENDS; bi++) {
        yc_backend *be = backend_open(bi);
        if (!be)
            continue;
        const struct yc_backend_i *f = be->iface;
        bool device = !f->buffer_host_ptr;
        yc_buffer *buf = yc_buffer_alloc(be, 2 * half);
        void *p = NULL;
        yc_host_mem *h = f->host_alloc(be, half, &p);
        ck_assert_msg(buf && h && p, "%s: %s", backends[bi].name, yc_last_error());
        float *pin = p;
        for (int i = 0; i < N / 2; i++)
            pin[i] = -1.0f;
        yc_tensor lo = yc_tensor_make(1, N / 2, 1, 1, YC_F32, "lo"), hi = lo;
        lo.buf = hi.buf = buf;
        hi.offset = half;
        /* 32 fills, the last of 3: a read not waiting for them would see another value */
        yc_op fill = {.kind = YC_OP_FILL, .dst = {&lo}};
        for (int k = 31; k >= 0; k--) {
            fill.p.fill.value = 3.0f + (float)k;
            ck_assert_int_eq(yc_backend_exec(be, &fill, (yc_span){0}), YC_OK);
        }
        yc_backend_counters c0 = be->counters;
        yc_event *ev = NULL, *mark = NULL;
        ck_assert_int_eq(f->read_start(be, buf, 0, pin, half, &ev), YC_OK);
        fill.dst[0] = &hi;
        fill.p.fill.value = 5.0f;
        ck_assert_int_eq(yc_backend_exec(be, &fill, (yc_span){0}), YC_OK);
        ck_assert_int_eq(f->marker(be, &mark), YC_OK);
        ck_assert_msg(device ? ev && mark : !ev && !mark, "%s: tokens %p %p", backends[bi].name,
                      (void *)ev, (void *)mark);
        ck_assert_int_eq(f->event_wait(be, ev), YC_OK);
        bool done = false;
        ck_assert_int_eq(f->event_query(be, ev, &done), YC_OK);
        ck_assert(done);
        for (int i = 0; i < N / 2; i++)
            CHECK(pin[i] == 3.0f, "%s: read value %d is %g, the op before it wrote 3",
                  backends[bi].name, i, pin[i]);
        ck_assert_int_eq(f->event_wait(be, mark), YC_OK);
        ck_assert_int_eq(f->event_query(be, mark, &done), YC_OK);
        ck_assert(done);
        f->event_release(be, ev);
        f->event_release(be, mark);
        ck_assert_uint_eq(be->counters.bytes_from_device - c0.bytes_from_device,
                          device ? half : 0);
        /* the pinned values back into the upper half, seen by a blocking read after them */
        for (int i = 0; i < N / 2; i++)
            pin[i] = (float)i;
        ck_assert_int_eq(f->buffer_write_async(be, buf, half, pin, half), YC_OK);
        float *back = falloc((size_t)N);
        ck_assert_int_eq(f->buffer_read(be, buf, 0, back, 2 * half), YC_OK);
        for (int i = 0; i < N; i++)
            CHECK(back[i] == (i < N / 2 ? 3.0f : (float)(i - N / 2)), "%s: value %d is %g",
                  backends[bi].name, i, back[i]);
        free(back);
        ev = (yc_event *)&ev;
        ck_assert_int_eq(f->read_start(be, buf, 2 * half - 4, pin, 8, &ev), YC_EFORMAT);
        ck_assert_ptr_null(ev);
        ck_assert_int_eq(f->buffer_write_async(be, buf, 2 * half - 4, pin, 8), YC_EFORMAT);
        ck_assert_int_eq(f->synchronize(be), YC_OK);
        f->host_free(be, h);
        f->host_free(be, NULL);
        f->event_release(be, NULL);
        yc_buffer_free(be, buf);
        yc_backend_free(be);
    }
}
END_TEST

START_TEST(cpu_backend_basics)
{
    yc_backend *be = NULL;
    ck_assert_int_eq(yc_backend_cpu_new(&be, 3), YC_OK);
    const yc_device_info *info = &be->info;
    ck_assert_int_eq(info->kind, YC_DEVICE_CPU);
    ck_assert_str_eq(be->iface->name, "cpu");
    ck_assert_msg(strstr(info->name, "cpu (OpenMP, 3 threads)") != NULL, "%s", info->name);
    ck_assert_int_eq(info->compute_units, 3);
    ck_assert(info->mem_total > 0 && info->mem_free > 0 && info->mem_free <= info->mem_total);
    ck_assert(info->max_alloc == info->mem_total);
    ck_assert_uint_eq(info->alignment, 64);
    ck_assert(info->fp16_storage && !info->fp16_arith && !info->is_gpu);
    ck_assert_int_eq(info->cl_platform, -1);

    yc_buffer *buf = yc_buffer_alloc(be, 1000);
    ck_assert_ptr_nonnull(buf);
    void *hp = be->iface->buffer_host_ptr(be, buf);
    ck_assert_ptr_nonnull(hp);
    ck_assert_uint_eq((uintptr_t)hp % 64, 0);
    ck_assert_uint_eq(be->iface->buffer_size(be, buf), 1000);
    char bytes[16] = "abcdefghijklmno";
    ck_assert_int_eq(be->iface->buffer_write(be, buf, 984, bytes, 16), YC_OK);
    ck_assert_int_eq(be->iface->buffer_write(be, buf, 985, bytes, 16), YC_EFORMAT);
    ck_assert_int_eq(be->iface->buffer_memset(be, buf, 990, 'z', 2), YC_OK);
    char back[16];
    ck_assert_int_eq(be->iface->buffer_read(be, buf, 984, back, 16), YC_OK);
    ck_assert(memcmp(back, "abcdefzzijklmno", 16) == 0);
    ck_assert_int_eq(be->iface->buffer_read(be, buf, SIZE_MAX, back, 2), YC_EFORMAT);
    ck_assert_int_eq(be->iface->buffer_memset(be, buf, 999, 0, 2), YC_EFORMAT);
    ck_assert_ptr_null(yc_buffer_alloc(be, info->max_alloc + 1));
    ck_assert(err_has("cannot allocate"));

    /* tensor get/set with nstride: only the images' elements are touched */
    yc_tensor t = yc_tensor_make(3, 2, 2, 3, YC_F32, "t");
    t.buf = buf, t.offset = 40, t.nstride = 20;
    ck_assert_int_eq(be->iface->buffer_memset(be, buf, 0, 0xff, 1000), YC_OK);
    float v[36], r[36];
    for (int i = 0; i < 36; i++)
        v[i] = (float)i;
    ck_assert_int_eq(yc_tensor_set_f32(be, &t, v), YC_OK);
    ck_assert_int_eq(yc_tensor_get_f32(be, &t, r), YC_OK);
    ck_assert(memcmp(v, r, sizeof v) == 0);
    const float *hf = (const float *)((const char *)hp + 40);
    ck_assert(hf[11] == 11.0f && hf[20] == 12.0f && fbits(hf[12]) == 0xffffffffu &&
              fbits(hf[19]) == 0xffffffffu);
    t.nstride = 300;
    ck_assert_int_eq(yc_tensor_get_f32(be, &t, r), YC_EFORMAT);
    t.nstride = 20;

    /* FP16 get/set with nstride: values rounded to nearest even, gaps untouched */
    yc_tensor th = t;
    th.type = YC_F16, th.offset = 42;
    ck_assert_int_eq(be->iface->buffer_memset(be, buf, 0, 0xff, 1000), YC_OK);
    for (int i = 0; i < 36; i++)
        v[i] = (float)i / 3.0f + 1000.0f * (float)(i == 5);
    v[7] = 65520.0f; /* rounds to +inf */
    ck_assert_int_eq(yc_tensor_set_f32(be, &th, v), YC_OK);
    ck_assert_int_eq(yc_tensor_get_f32(be, &th, r), YC_OK);
    for (int i = 0; i < 36; i++)
        ck_assert_msg(fbits(r[i]) == fbits(yc_half_to_float(yc_float_to_half(v[i]))), "FP16 get/set [%d]: %.9g",
                      i, (double)r[i]);
    ck_assert(isinf(r[7]));
    const uint16_t *hh = (const uint16_t *)((const char *)hp + 42);
    ck_assert(hh[11] == yc_float_to_half(v[11]) && hh[20] == yc_float_to_half(v[12]) && hh[12] == 0xffffu &&
              hh[19] == 0xffffu && ((const unsigned char *)hp)[41] == 0xff);
    th.offset = 1000 - 2 * (2 * 20 + 12) + 2;
    ck_assert_int_eq(yc_tensor_get_f32(be, &th, r), YC_EFORMAT);
    yc_tensor unplaced = yc_tensor_make(1, 1, 1, 1, YC_F32, NULL);
    ck_assert_int_eq(yc_tensor_set_f32(be, &unplaced, v), YC_EFORMAT);

    /* supports: groups == 1 only; yc_backend_exec refuses the rest, FP16 outside activation slots
     * and bad placements */
    yc_tensor x = yc_tensor_make(1, 4, 4, 4, YC_F32, "x"), w = yc_tensor_make(4, 2, 1, 1, YC_F32, "w");
    yc_tensor y = yc_tensor_make(1, 4, 4, 4, YC_F32, "y");
    x.buf = y.buf = w.buf = buf;
    y.offset = 256, w.offset = 512;
    yc_op op = {.kind = YC_OP_CONV2D, .src = {&x, &w}, .dst = {&y}};
    op.p.conv.kh = op.p.conv.kw = op.p.conv.stride_h = op.p.conv.stride_w = 1;
    op.p.conv.groups = 2;
    ck_assert_int_eq(yc_op_check(&op), YC_OK);
    ck_assert(!be->iface->supports(be, &op));
    ck_assert_int_eq(yc_backend_exec(be, &op, (yc_span){0}), YC_EUNSUPPORTED);
    yc_tensor xh = x;
    xh.type = YC_F16;
    yc_op s = {.kind = YC_OP_SILU, .src = {&xh}, .dst = {&y}};
    ck_assert(be->iface->supports(be, &s)); /* FP16 activations */
    yc_op sb = {.kind = YC_OP_SILU_BWD, .src = {&xh, &x}, .dst = {&y}};
    /* an FP16 gradient: refused by yc_op_check, for every backend, before exec sees it */
    ck_assert_int_ne(yc_op_check(&sb), YC_OK);
    ck_assert_int_ne(yc_backend_exec(be, &sb, (yc_span){0}), YC_OK);
    sb.src[0] = &x, sb.src[1] = &xh;
    ck_assert(be->iface->supports(be, &sb));
    xh.buf = buf, xh.offset = 601;
    ck_assert_int_eq(yc_backend_exec(be, &s, (yc_span){0}), YC_EFORMAT); /* not 2-byte aligned */
    xh.offset = 602;
    ck_assert_int_eq(yc_backend_exec(be, &s, (yc_span){0}), YC_OK);
    s.src[0] = &x;
    ck_assert(be->iface->supports(be, &s));
    ck_assert_int_eq(yc_backend_exec(be, &s, (yc_span){0}), YC_OK);
    y.offset = 996;
    ck_assert_int_eq(yc_backend_exec(be, &s, (yc_span){0}), YC_EFORMAT);
    y.offset = 258;
    ck_assert_int_eq(yc_backend_exec(be, &s, (yc_span){0}), YC_EFORMAT);
    y.offset = 256;
    y.buf = NULL;
    ck_assert_int_eq(yc_backend_exec(be, &s, (yc_span){0}), YC_EFORMAT);
    y.buf = buf;

    /* a 3x3 conv needs a workspace and refuses to run without */
    yc_tensor w3 = yc_tensor_make(4, 4, 3, 3, YC_F32, "w3");
    w3.buf = yc_buffer_alloc(be, 4 * 4 * 9 * sizeof(float));
    ck_assert_ptr_nonnull(w3.buf);
    yc_op c3 = {.kind = YC_OP_CONV2D, .src = {&x, &w3}, .dst = {&y}};
    c3.p.conv.kh = c3.p.conv.kw = 3, c3.p.conv.stride_h = c3.p.conv.stride_w = 1;
    c3.p.conv.pad_h = c3.p.conv.pad_w = 1, c3.p.conv.groups = 1;
    size_t need = be->iface->workspace(be, &c3);
    /* stride 1: the implicit forward (cpu/conv.c) - the block's padded input (C 4 planes of 4 + 2 rows
     * of 6, then S + 64 floats of slack: 211, rounded up to 224), its GEMM output (K 4 x 4 rows x 6
     * columns: 96), the 36 column offsets (ptrdiff_t: 72 floats, rounded up to 80) and the weights
     * packed for the GEMM; one set of buffers, as the one block is fewer items than the 3 threads */
    ck_assert_uint_eq(need, (224 + 96 + 80 + (yc_sgemm_packed_floats(4, 36) + 15) / 16 * 16) * sizeof(float));
    ck_assert_int_eq(yc_backend_exec(be, &c3, (yc_span){0}), YC_EFORMAT);
    yc_buffer *wsb = yc_buffer_alloc(be, need);
    ck_assert_int_eq(yc_backend_exec(be, &c3, (yc_span){wsb, 0, need - 4}), YC_EFORMAT);
    ck_assert_int_eq(yc_backend_exec(be, &c3, (yc_span){wsb, 0, need}), YC_OK);
    ck_assert_int_eq(be->iface->synchronize(be), YC_OK);
    yc_buffer_free(be, wsb);
    yc_buffer_free(be, w3.buf);

    yc_buffer_free(be, buf);
    yc_buffer_free(be, NULL);
    yc_backend_free(be);

    ck_assert_int_eq(yc_backend_cpu_new(&be, 0), YC_OK);
    ck_assert_int_ge(be->info.compute_units, 1);
    yc_backend_free(be);
}
END_TEST

/* FP16 in each slot of one valid op of every kind: yc_op_check accepts it exactly in the activation
 * slots (f16_slot) and names the slot otherwise; all activation slots FP16 at once pass. */
START_TEST(op_check_f16)
{
    bool done[YC_OP_COUNT] = {false};
    for (int ci = 0; ci < ncases; ci++) {
        const op_case *c = &cases[ci];
        if (done[c->kind] || c->f16)
            continue;
        done[c->kind] = true;
        tspec sp;
        yc_op op;
        case_spec(c, &sp, &op);
        yc_tensor ts[YC_OP_MAX_SRC], tdst[YC_OP_MAX_DST];
        for (int i = 0; i < YC_OP_MAX_SRC; i++)
            if (sp.src[i].n) {
                const tdesc *d = &sp.src[i];
                ts[i] = yc_tensor_make(d->n, d->c, d->h, d->w, YC_F32, d->name);
                op.src[i] = &ts[i];
            }
        for (int i = 0; i < YC_OP_MAX_DST; i++)
            if (sp.dst[i].n) {
                const tdesc *d = &sp.dst[i];
                tdst[i] = yc_tensor_make(d->n, d->c, d->h, d->w, YC_F32, d->name);
                op.dst[i] = &tdst[i];
            }
        const char *kname = yc_op_kind_name(c->kind);
        ck_assert_msg(yc_op_check(&op) == YC_OK, "%s: %s", kname, yc_last_error());
        for (int dst = 0; dst < 2; dst++)
            for (int i = 0; i < (dst ? YC_OP_MAX_DST : YC_OP_MAX_SRC); i++) {
                yc_tensor *t = dst ? (op.dst[i] ? &tdst[i] : NULL) : (op.src[i] ? &ts[i] : NULL);
                if (!t)
                    continue;
                t->type = YC_F16;
                int rc = yc_op_check(&op);
                bool ok = f16_slot(c->kind, dst, i);
                ck_assert_msg(rc == (ok ? YC_OK : YC_EFORMAT), "%s: FP16 %s: %s", kname, t->name,
                              rc ? yc_last_error() : "accepted");
                if (!ok)
                    ck_assert_msg(err_has(t->name) && err_has("FP32"), "%s: %s", kname, yc_last_error());
                t->type = YC_F32;
            }
        for (int i = 0; i < YC_OP_MAX_SRC; i++)
            if (op.src[i] && f16_slot(c->kind, false, i))
                ts[i].type = YC_F16;
        for (int i = 0; i < YC_OP_MAX_DST; i++)
            if (op.dst[i] && f16_slot(c->kind, true, i))
                tdst[i].type = YC_F16;
        ck_assert_msg(yc_op_check(&op) == YC_OK, "%s with every activation FP16: %s", kname, yc_last_error());
    }
    for (int k = 0; k < YC_OP_COUNT; k++)
        ck_assert_msg(done[k], "no case of %s", yc_op_kind_name((yc_op_kind)k));
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 7. The fused batch norm + SiLU ops against the unfused sequence, bit for bit (FP32):
 *    BN_SILU_TRAIN = BN_TRAIN then SILU (a, stats, running statistics), and
 *    BN_SILU_BWD = SILU_BWD (on the stored BN output) then BN_BWD (dx with accumulate 0 and 1,
 *    dgamma, dbeta added to), with 1 and 3 threads and views.
 * ------------------------------------------------------------------------------------------- */

/* A tensor of type `type` in its own buffer; a view (nstride > c*h*w, offset 12 bytes) when
 * asked. */
static yc_tensor fz_tensor_typed(yc_backend *be, int n, int c, int h, int w, bool view, yc_dtype type,
                                 const char *name)
{
    yc_tensor t = yc_tensor_make(n, c, h, w, type, name);
    if (view) {
        t.nstride += 7;
        t.offset = 12;
    }
    t.buf = yc_buffer_alloc(be, t.offset + ((size_t)(n - 1) * t.nstride + yc_tensor_image_elems(&t)) *
                                               yc_dtype_size(type));
    ck_assert_ptr_nonnull(t.buf);
    return t;
}

static yc_tensor fz_tensor(yc_backend *be, int n, int c, int h, int w, bool view, const char *name)
{
    return fz_tensor_typed(be, n, c, h, w, view, YC_F32, name);
}

/* Reads a tensor back and compares it bit for bit with `want` (read the same way). */
static void fz_same(yc_backend *be, const yc_tensor *got, const yc_tensor *want, const char *what)
{
    size_t n = yc_tensor_elems(got);
    float *a = falloc(n), *b = falloc(n);
    ck_assert_int_eq(yc_tensor_get_f32(be, got, a), YC_OK);
    ck_assert_int_eq(yc_tensor_get_f32(be, want, b), YC_OK);
    for (size_t i = 0; i < n; i++)
        CHECK(fbits(a[i]) == fbits(b[i]), "%s: fused %.9g, unfused %.9g at %zu", what, (double)a[i], (double)b[i],
              i);
    free(a), free(b);
}

/* Runs an op with the workspace it asks for. */
static void fz_exec(yc_backend *be, const yc_op *op)
{
    yc_span ws = {NULL, 0, be->iface->workspace(be, op)};
    if (ws.size) {
        ws.buf = yc_buffer_alloc(be, ws.size);
        ck_assert_ptr_nonnull(ws.buf);
    }
    int rc = yc_backend_exec(be, op, ws);
    ck_assert_msg(rc == YC_OK, "%s: %s", yc_op_kind_name(op->kind), yc_last_error());
    yc_buffer_free(be, ws.buf);
}

START_TEST(fused_bn_silu)
{
    static const int shapes[][5] = {
        /* n, c, h, w, view */
        {1, 3, 1, 2, 0},    /* two values per channel */
        {2, 4, 5, 7, 1},    /* planes of 35: not a multiple of the 16 lanes */
        {3, 6, 30, 31, 0},  /* planes of 930: chunks of 512 and a tail */
        {2, 5, 33, 40, 1},  /* views, planes of 1320 */
        {4, 16, 13, 13, 0}, /* more channels than threads */
        {2, 2, 600, 900, 1}, /* 1.08 million values per channel: more than the fused backward caches */
    };
    for (int threads = 1; threads <= 3; threads += 2) {
        yc_backend *be = NULL;
        ck_assert_int_eq(yc_backend_cpu_new(&be, threads), YC_OK);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int *sh = shapes[si];
            int N = sh[0], C = sh[1], H = sh[2], W = sh[3];
            bool view = sh[4];
            size_t n = (size_t)N * C * H * W;
            yc_rng r;
            yc_rng_seed(&r, 90 + si, (uint64_t)threads);
            float *x = falloc(n), *da = falloc(n), *dx0 = falloc(n), *pv[6];
            fill_init(&r, x, n, I_SHIFTED, false);
            fill_init(&r, da, n, I_UNIFORM, false);
            fill_init(&r, dx0, n, I_UNIFORM, false);
            for (int k = 0; k < 6; k++) {
                pv[k] = falloc((size_t)C);
                fill_init(&r, pv[k], (size_t)C, k == 0 || k == 3 ? I_POS : I_UNIFORM, false);
            }
            /* gamma, beta, running_mean, running_var, dgamma, dbeta: one copy for each path */
            yc_tensor tx = fz_tensor(be, N, C, H, W, view, "x"), tda = fz_tensor(be, N, C, H, W, view, "da");
            yc_tensor ty = fz_tensor(be, N, C, H, W, view, "y"), ta1 = fz_tensor(be, N, C, H, W, view, "a");
            yc_tensor ta2 = fz_tensor(be, N, C, H, W, view, "a"), tdz = fz_tensor(be, N, C, H, W, view, "dz");
            yc_tensor tdx1 = fz_tensor(be, N, C, H, W, view, "dx"), tdx2 = fz_tensor(be, N, C, H, W, view, "dx");
            yc_tensor st1 = fz_tensor(be, 2, C, 1, 1, false, "stats");
            yc_tensor st2 = fz_tensor(be, 2, C, 1, 1, false, "stats");
            yc_tensor v1[6], v2[6];
            for (int k = 0; k < 6; k++) {
                v1[k] = fz_tensor(be, 1, C, 1, 1, false, "vec");
                v2[k] = fz_tensor(be, 1, C, 1, 1, false, "vec");
                ck_assert_int_eq(yc_tensor_set_f32(be, &v1[k], pv[k]), YC_OK);
                ck_assert_int_eq(yc_tensor_set_f32(be, &v2[k], pv[k]), YC_OK);
            }
            ck_assert_int_eq(yc_tensor_set_f32(be, &tx, x), YC_OK);
            ck_assert_int_eq(yc_tensor_set_f32(be, &tda, da), YC_OK);
            float eps = si % 2 ? 1e-5f : 1e-3f, mom = si % 2 ? 0.1f : 0.03f;

            yc_op bn = {.kind = YC_OP_BN_TRAIN, .src = {&tx, &v1[0], &v1[1]}, .dst = {&ty, &st1, &v1[2], &v1[3]}};
            yc_op silu = {.kind = YC_OP_SILU, .src = {&ty}, .dst = {&ta1}};
            yc_op fused = {.kind = YC_OP_BN_SILU_TRAIN, .src = {&tx, &v2[0], &v2[1]},
                           .dst = {&ta2, &st2, &v2[2], &v2[3]}};
            bn.p.bn.eps = fused.p.bn.eps = eps;
            bn.p.bn.momentum = fused.p.bn.momentum = mom;
            fz_exec(be, &bn);
            fz_exec(be, &silu);
            fz_exec(be, &fused);
            char what[96];
            snprintf(what, sizeof what, "bn_silu_train x(%d,%d,%d,%d)%s, %d threads", N, C, H, W,
                     view ? " view" : "", threads);
            fz_same(be, &ta2, &ta1, what);
            fz_same(be, &st2, &st1, what);
            fz_same(be, &v2[2], &v1[2], what);
            fz_same(be, &v2[3], &v1[3], what);

            for (int acc = 0; acc < 2; acc++) {
                ck_assert_int_eq(yc_tensor_set_f32(be, &tdx1, dx0), YC_OK);
                ck_assert_int_eq(yc_tensor_set_f32(be, &tdx2, dx0), YC_OK);
                yc_op sb = {.kind = YC_OP_SILU_BWD, .src = {&tda, &ty}, .dst = {&tdz}};
                yc_op bb = {.kind = YC_OP_BN_BWD, .src = {&tdz, &tx, &v1[0], &st1}, .dst = {&tdx1, &v1[4], &v1[5]},
                            .accumulate = acc};
                yc_op fb = {.kind = YC_OP_BN_SILU_BWD, .src = {&tda, &tx, &v2[0], &v2[1], &st1},
                            .dst = {&tdx2, &v2[4], &v2[5]}, .accumulate = acc};
                bb.p.bn.eps = fb.p.bn.eps = eps;
                fz_exec(be, &sb);
                fz_exec(be, &bb);
                fz_exec(be, &fb);
                snprintf(what, sizeof what, "bn_silu_bwd x(%d,%d,%d,%d)%s%s, %d threads", N, C, H, W,
                         view ? " view" : "", acc ? " acc" : "", threads);
                fz_same(be, &tdx2, &tdx1, what);
                fz_same(be, &v2[4], &v1[4], what);
                fz_same(be, &v2[5], &v1[5], what);
            }
            yc_tensor *all[] = {&tx, &tda, &ty, &ta1, &ta2, &tdz, &tdx1, &tdx2, &st1, &st2};
            for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
                yc_buffer_free(be, all[k]->buf);
            for (int k = 0; k < 6; k++) {
                yc_buffer_free(be, v1[k].buf);
                yc_buffer_free(be, v2[k].buf);
                free(pv[k]);
            }
            free(x), free(da), free(dx0);
        }
        yc_backend_free(be);
    }
}
END_TEST

/* BN_SILU_APPLY with the statistics BN_SILU_TRAIN saved gives the bytes of BN_SILU_TRAIN's `a`
 * (the whole buffers compared, gaps of views included): on the CPU with 1 and 3 threads and on
 * every OpenCL device, x and a each FP32 or FP16, dense tensors and views.  gamma spans [-8, 8)
 * so that z reaches SiLU's saturated ranges. */
START_TEST(bn_silu_apply_bits)
{
    static const int shapes[][5] = {
        /* n, c, h, w, view */
        {1, 3, 1, 2, 0},     /* two values per channel */
        {2, 4, 5, 7, 1},     /* planes of 35: not a multiple of the 16 lanes */
        {3, 6, 30, 31, 0},   /* planes of 930: chunks of 512 and a tail */
        {2, 5, 33, 40, 1},   /* views, planes of 1320 */
        {4, 16, 13, 13, 0},  /* more planes than threads */
        {2, 3, 130, 131, 1}, /* planes of 17030 */
    };
    backend_entry runs[2 + MAX_CL_BACKENDS] = {{"cpu-1thread", create_cpu, 1}, {"cpu-3threads", create_cpu, 3}};
    int nruns = 2;
    for (int bi = 0; bi < NBACKENDS; bi++)
        if (backends[bi].create == create_opencl)
            runs[nruns++] = backends[bi];
    for (int ri = 0; ri < nruns; ri++) {
        yc_backend *be = NULL;
        int rc = runs[ri].create(&be, runs[ri].arg);
        ck_assert_msg(rc == YC_OK && be, "creating backend %s: %s", runs[ri].name, yc_last_error());
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int *sh = shapes[si];
            int N = sh[0], C = sh[1], H = sh[2], W = sh[3];
            bool view = sh[4];
            size_t n = (size_t)N * C * H * W;
            for (int types = 0; types < 4; types++) {
                yc_dtype xt = types & 1 ? YC_F16 : YC_F32, at = types & 2 ? YC_F16 : YC_F32;
                yc_rng r;
                yc_rng_seed(&r, 190 + si, (uint64_t)types);
                float *x = falloc(n), *pv[4];
                fill_init(&r, x, n, I_SHIFTED, false);
                for (int k = 0; k < 4; k++) {
                    pv[k] = falloc((size_t)C);
                    fill_init(&r, pv[k], (size_t)C, k == 0 ? I_WIDE : k == 3 ? I_POS : I_UNIFORM, false);
                }
                yc_tensor tx = fz_tensor_typed(be, N, C, H, W, view, xt, "x");
                yc_tensor ta1 = fz_tensor_typed(be, N, C, H, W, view, at, "a");
                yc_tensor ta2 = fz_tensor_typed(be, N, C, H, W, view, at, "a");
                yc_tensor st = fz_tensor(be, 2, C, 1, 1, false, "stats"), v[4];
                for (int k = 0; k < 4; k++) {
                    v[k] = fz_tensor(be, 1, C, 1, 1, false, "vec");
                    ck_assert_int_eq(yc_tensor_set_f32(be, &v[k], pv[k]), YC_OK);
                }
                ck_assert_int_eq(yc_tensor_set_f32(be, &tx, x), YC_OK);
                /* both outputs start as the same NaN bytes, so that the gaps compare too */
                size_t abytes = be->iface->buffer_size(be, ta1.buf);
                ck_assert_int_eq(be->iface->buffer_memset(be, ta1.buf, 0, 0xff, abytes), YC_OK);
                ck_assert_int_eq(be->iface->buffer_memset(be, ta2.buf, 0, 0xff, abytes), YC_OK);

                yc_op tr = {.kind = YC_OP_BN_SILU_TRAIN, .src = {&tx, &v[0], &v[1]},
                            .dst = {&ta1, &st, &v[2], &v[3]}};
                tr.p.bn.eps = si % 2 ? 1e-5f : 1e-3f, tr.p.bn.momentum = si % 2 ? 0.1f : 0.03f;
                yc_op ap = {.kind = YC_OP_BN_SILU_APPLY, .src = {&tx, &v[0], &v[1], &st}, .dst = {&ta2}};
                ap.p.bn = tr.p.bn;
                fz_exec(be, &tr);
                fz_exec(be, &ap);
                ck_assert_int_eq(be->iface->synchronize(be), YC_OK);

                unsigned char *b1 = malloc(abytes), *b2 = malloc(abytes);
                ck_assert(b1 && b2);
                ck_assert_int_eq(be->iface->buffer_read(be, ta1.buf, 0, b1, abytes), YC_OK);
                ck_assert_int_eq(be->iface->buffer_read(be, ta2.buf, 0, b2, abytes), YC_OK);
                if (memcmp(b1, b2, abytes) != 0) {
                    size_t es = yc_dtype_size(at), k = 0;
                    while (memcmp(b1 + k * es, b2 + k * es, es) == 0)
                        k++;
                    ck_abort_msg("bn_silu_apply x(%d,%d,%d,%d)%s x %s a %s on %s: byte %zu of a (element %zu "
                                 "of its buffer) differs from bn_silu_train's",
                                 N, C, H, W, view ? " view" : "", xt == YC_F16 ? "FP16" : "FP32",
                                 at == YC_F16 ? "FP16" : "FP32",
                                 runs[ri].name, k * es, k);
                }
                /* and a holds values, not the NaN it started as */
                float *got = falloc(n);
                ck_assert_int_eq(yc_tensor_get_f32(be, &ta2, got), YC_OK);
                for (size_t k = 0; k < n; k++)
                    CHECK(!isnan(got[k]), "bn_silu_apply on %s: a[%zu] is NaN", runs[ri].name, k);
                free(got), free(b1), free(b2);
                yc_tensor *all[] = {&tx, &ta1, &ta2, &st, &v[0], &v[1], &v[2], &v[3]};
                for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
                    yc_buffer_free(be, all[k]->buf);
                for (int k = 0; k < 4; k++)
                    free(pv[k]);
                free(x);
            }
        }
        yc_backend_free(be);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 8. FP16 conversion (src/core/half.h): every path against the portable scalar functions, which are
 *    checked against exact arithmetic: all 65536 halves; floats every 61st bit pattern (70 million,
 *    every exponent), every tie between neighbouring halves and the floats next to it, the
 *    subnormal and overflow ranges, infinities and NaN payloads.
 * ------------------------------------------------------------------------------------------- */

/* The half nearest to f as a float (ties to even) by exact arithmetic in double: |f| / ulp is an
 * exact double, rint rounds it to nearest even. */
static float half_round_exact(float f)
{
    if (isnan(f) || isinf(f))
        return f;
    double a = fabs((double)f);
    if (a >= 65520.0) /* halfway between 65504 and 2^16, and above: inf */
        return copysignf(INFINITY, f);
    int e = a < 0x1p-14 ? -14 : ilogb(a);
    double ulp = ldexp(1.0, e - 10);
    return (float)copysign(rint(a / ulp) * ulp, (double)f);
}

/* Converts x[0, n) on every supported path and checks the bits against the scalar functions (and,
 * when `exact`, the scalar results against half_round_exact). */
static void half_check_floats(const float *x, size_t n, bool exact, uint16_t *h, float *back)
{
    for (int p = 0; p < YC_HALF_NPATHS; p++) {
        if (!yc_half_path_supported((yc_half_path)p))
            continue;
        yc_float_to_half_path((yc_half_path)p, x, h, n);
        for (size_t i = 0; i < n; i++)
            CHECK(h[i] == yc_float_to_half(x[i]), "float %08x -> half on %s: %04x, portable %04x", fbits(x[i]),
                  yc_half_path_name((yc_half_path)p), h[i], yc_float_to_half(x[i]));
    }
    if (!exact)
        return;
    yc_half_to_float_path(YC_HALF_PORTABLE, h, back, n);
    for (size_t i = 0; i < n; i++) {
        float want = half_round_exact(x[i]);
        if (isnan(x[i]))
            CHECK(isnan(back[i]) && (fbits(back[i]) & 0x803fe000u) == (fbits(x[i]) & 0x803fe000u),
                  "NaN %08x -> %04x", fbits(x[i]), h[i]);
        else
            CHECK(fbits(back[i]) == fbits(want), "float %.9g (%08x) -> half %.9g, nearest even is %.9g",
                  (double)x[i], fbits(x[i]), (double)back[i], (double)want);
    }
}

START_TEST(half_conversion)
{
    /* every half, on every path, against its exact value */
    uint16_t *hs = calloc(65536, sizeof *hs);
    float *f = falloc(65536), *g = falloc(65536);
    ck_assert_ptr_nonnull(hs);
    for (uint32_t i = 0; i < 65536; i++)
        hs[i] = (uint16_t)i;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t e = i >> 10 & 0x1f, m = i & 0x3ff;
        double v = e ? ldexp(1024.0 + m, (int)e - 25) : ldexp((double)m, -24);
        float want = (float)(i & 0x8000 ? -v : v);
        float got = yc_half_to_float((uint16_t)i);
        if (e == 31 && m)
            CHECK(isnan(got) && fbits(got) == ((i & 0x8000u) << 16 | 0x7fc00000u | m << 13),
                  "half %04x -> %08x (a quiet NaN with the payload)", i, fbits(got));
        else if (e == 31)
            CHECK(isinf(got) && !!signbit(got) == !!(i & 0x8000), "half %04x -> %g", i, (double)got);
        else
            CHECK(fbits(got) == fbits(want), "half %04x -> %.9g, exact %.9g", i, (double)got, (double)want);
        /* and back */
        CHECK(yc_float_to_half(got) == (e == 31 && m ? (uint16_t)(i | 0x200u) : (uint16_t)i),
              "half %04x -> float -> %04x", i, yc_float_to_half(got));
    }
    for (int p = 0; p < YC_HALF_NPATHS; p++) {
        if (!yc_half_path_supported((yc_half_path)p))
            continue;
        yc_half_to_float_path((yc_half_path)p, hs, f, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            CHECK(fbits(f[i]) == fbits(yc_half_to_float((uint16_t)i)), "half %04x -> float on %s: %08x", i,
                  yc_half_path_name((yc_half_path)p), fbits(f[i]));
        /* odd lengths: the tails */
        for (size_t len = 1; len < 40; len += 3) {
            memset(g, 0xab, 41 * sizeof *g);
            yc_half_to_float_path((yc_half_path)p, hs + 0x3c00, g, len);
            for (size_t i = 0; i < 41; i++)
                CHECK(i < len ? fbits(g[i]) == fbits(yc_half_to_float((uint16_t)(0x3c00 + i)))
                              : fbits(g[i]) == 0xababababu,
                      "%s, length %zu: element %zu", yc_half_path_name((yc_half_path)p), len, i);
        }
    }
    ck_assert(yc_half_path_supported(yc_half_path_selected()));
    ck_assert(yc_half_path_supported(YC_HALF_PORTABLE));

    /* ties: for every pair of neighbouring finite halves, the float halfway between them and the
     * floats one ulp either side; and every float of the half-subnormal and overflow ranges'
     * edges */
    size_t cap = 65536 * 3 + 4096, n = 0;
    float *x = falloc(cap), *back = falloc(cap);
    uint16_t *h = calloc(cap, sizeof *h);
    ck_assert_ptr_nonnull(h);
    for (uint32_t i = 0; i < 0x7c00; i++) {
        for (int sgn = 0; sgn < 2; sgn++) {
            if ((i & 1) != (uint32_t)sgn)
                continue; /* half the pairs each sign: the tie set stays within cap */
            double lo = yc_half_to_float((uint16_t)i), hi = i + 1 < 0x7c00 ? yc_half_to_float((uint16_t)(i + 1))
                                                                            : 65536.0;
            float mid = (float)((lo + hi) / 2);
            float s = sgn ? -1.0f : 1.0f;
            x[n++] = s * mid;
            x[n++] = s * nextafterf(mid, 0.0f);
            x[n++] = s * nextafterf(mid, INFINITY);
        }
    }
    for (uint32_t k = 0; k < 2048 && n < cap; k++) {
        x[n++] = bitsf(0x33000000u + k * 0x400u); /* around 2^-25, the smallest half's half */
        x[n++] = bitsf(0x477fe000u + k);          /* 65504 upwards to the overflow */
    }
    half_check_floats(x, n, true, h, back);
    const float specials[] = {0.0f,      -0.0f,     INFINITY,     -INFINITY,   NAN,       -NAN,
                              bitsf(0x7f800001u), bitsf(0xffa00000u), bitsf(0x7fc01234u), FLT_MIN, -FLT_MIN,
                              FLT_TRUE_MIN, 65504.0f, 65519.996f, 65520.0f,    FLT_MAX,   -FLT_MAX};
    half_check_floats(specials, sizeof specials / sizeof specials[0], true, h, back);

    /* every 61st float bit pattern */
    const size_t chunk = 1 << 16;
    float *y = falloc(chunk), *yb = falloc(chunk);
    uint16_t *yh = calloc(chunk, sizeof *yh);
    ck_assert_ptr_nonnull(yh);
    for (uint64_t base = 0; base < (1ull << 32); base += chunk * 61) {
        size_t m = 0;
        for (; m < chunk && base + m * 61 < (1ull << 32); m++)
            y[m] = bitsf((uint32_t)(base + m * 61));
        half_check_floats(y, m, base % (chunk * 61 * 64) == 0, yh, yb);
    }
    free(hs), free(f), free(g), free(x), free(back), free(h), free(y), free(yb), free(yh);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The two paths of the exp and SiLU kernels: AVX-512 (cpu/silu_avx512.c) where the CPU has it,
 * the generic vectors (vec16.h) otherwise or when YOLOCL_GEMM_KERNEL names another GEMM kernel.
 * The exp, SiLU and batch norm + SiLU tests run once per path this CPU has: in a forked test, the
 * fixture sets the variable before anything reads it.
 * ------------------------------------------------------------------------------------------- */

static bool cpu_has_avx512(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

/* Without YOLOCL_GEMM_KERNEL, the AVX-512 path exactly where the CPU has AVX-512F. */
START_TEST(exp_default_path)
{
    unsetenv("YOLOCL_GEMM_KERNEL");
    ck_assert_int_eq(yc_cpu_silu_avx512(), cpu_has_avx512());
    ck_assert_int_eq(yc_cpu_silu_avx512(), strcmp(yc_sgemm_kernel_name(), "avx512") == 0);
}
END_TEST

static void use_generic_vectors(void)
{
    setenv("YOLOCL_GEMM_KERNEL", "generic", 1);
    ck_assert_msg(!yc_cpu_silu_avx512(), "the AVX-512 exp path was chosen before the fixture ran");
}

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *fd = tcase_create("finite_differences");
    tcase_add_test(fd, fd_conv);
    tcase_add_test(fd, fd_bn);
    tcase_add_test(fd, fd_silu);
    tcase_add_test(fd, fd_maxpool);
    tcase_add_test(fd, fd_upsample);
    tcase_add_test(fd, fd_avgpool);
    suite_add_tcase(s, fd);

    TCase *tc = tcase_create("backend_vs_reference");
    tcase_set_timeout(tc, 120);
    const char *san = getenv("YOLOCL_SANITIZED"), *per = getenv("YOLOCL_TEST_CASES_PER_FORK");
    if (san && *san && strcmp(san, "0") != 0)
        cases_per_test = 8;
    if (per && atoi(per) >= 1)
        cases_per_test = atoi(per);
    tcase_add_loop_test(tc, op_cases, 0, (ncases + cases_per_test - 1) / cases_per_test);
    tcase_add_test(tc, in_place);
    suite_add_tcase(s, tc);

    TCase *sp = tcase_create("special");
    tcase_set_timeout(sp, 120);
    tcase_add_test(sp, bn_running_stats);
    tcase_add_test(sp, bn_large_values);
    tcase_add_test(sp, exp_sweep);
    tcase_add_test(sp, silu_accuracy);
    tcase_add_test(sp, maxpool_ties);
    tcase_add_test(sp, optim_sequences);
    tcase_add_test(sp, sumsq_repeat);
    tcase_add_test(sp, optim_clip_on_device);
    tcase_add_test(sp, fused_bn_silu);
    tcase_add_test(sp, bn_silu_apply_bits);
    tcase_add_test(sp, half_conversion);
    suite_add_tcase(s, sp);

    /* the default path is tested above; the generic one again here where the CPU has AVX-512
     * (needs forked tests: the path is chosen once per process) */
    for (int i = 0; i < ncases; i++)
        if (uses_silu(&cases[i]))
            silu_cases[nsilu_cases++] = i;
    TCase *ep = tcase_create("exp_paths");
    tcase_set_timeout(ep, 120);
    tcase_add_test(ep, exp_default_path);
    suite_add_tcase(s, ep);
    const char *fork = getenv("CK_FORK");
    if (cpu_has_avx512() && !(fork && strcmp(fork, "no") == 0)) {
        TCase *gv = tcase_create("generic_vectors");
        tcase_set_timeout(gv, 120);
        tcase_add_checked_fixture(gv, use_generic_vectors, NULL);
        tcase_add_test(gv, exp_sweep);
        tcase_add_test(gv, silu_accuracy);
        tcase_add_test(gv, in_place);
        tcase_add_test(gv, fused_bn_silu);
        tcase_add_test(gv, bn_silu_apply_bits);
        tcase_add_loop_test(gv, op_cases_silu, 0, (nsilu_cases + cases_per_test - 1) / cases_per_test);
        suite_add_tcase(s, gv);
    } else if (cpu_has_avx512()) {
        fprintf(stderr, "test_ops: CK_FORK=no: the generic-vector exp and SiLU path is not tested\n");
    }

    TCase *api = tcase_create("api");
    tcase_add_test(api, op_check);
    tcase_add_test(api, op_check_f16);
    tcase_add_test(api, cpu_backend_basics);
    tcase_add_test(api, async_copies);
    suite_add_tcase(s, api);
    return s;
}

int main(void)
{
    build_cases();
    add_opencl_backends();
    return yc_harness_run(ops_suite(), false);
}
