/* yc_sgemm against a double-accumulated reference: all transpose combinations, awkward shapes, padded
 * strides, alpha/beta, beta == 0 over NaN, K == 0, long K (split-K, the unpacked NT path), calls
 * from inside a parallel region; and yc_transpose.  Every case runs once per micro-kernel this CPU supports (forced
 * through YOLOCL_GEMM_KERNEL in a checked fixture, so each test is forked with its own kernel choice);
 * the shapes include row counts that select the AVX-512 kernel's narrow (8-row) tile.
 *
 * Two kinds of data: small integers, for which every partial sum is exact in float so the result
 * must match exactly whatever the blocking and summation order; and uniform reals, checked against
 * the error bound of a blocked float sum relative to |alpha| sum|a||b| + |beta c|. */
#include "gemm.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float SENTINEL = 12345.0f;

struct gemm_case {
    bool ta, tb;
    int M, N, K;
    float alpha, beta;
    int pad;    /* added to every leading dimension */
    bool exact; /* small-integer data */
    bool nan_c; /* C starts as NaN (only meaningful with beta == 0) */
    int lda, ldb, ldc;
    float *A, *B, *C, *C0;
};

static uint32_t rng_state;

static uint32_t rng_next(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

static float rand_value(bool exact)
{
    if (exact)
        return (float)((int)(rng_next() % 9) - 4);
    return (float)rng_next() / 8388608.0f - 1.0f;
}

static float *alloc_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Rows [0, rows) of src (row stride ld, len floats each) copied in reverse order among NaNs: row r at
 * offset (rows - 1 - r) * (len + gap) + r % shift, with `tail` more NaNs after the last slot (the
 * offset GEMMs may read past a row's end but must not bring those values into C).  *offs gets the
 * offsets; both are the caller's to free. */
static float *scatter_rows(const float *src, int ld, int rows, int len, int gap, int shift, int tail,
                           ptrdiff_t **offs)
{
    const size_t ldo = (size_t)len + (size_t)gap, no = (size_t)rows * ldo + (size_t)tail;
    float *bo = alloc_floats(no);
    *offs = malloc((size_t)rows * sizeof **offs);
    ck_assert_ptr_nonnull(*offs);
    for (size_t i = 0; i < no; i++)
        bo[i] = NAN;
    for (int r = 0; r < rows; r++) {
        (*offs)[r] = (ptrdiff_t)((size_t)(rows - 1 - r) * ldo) + r % shift;
        memcpy(bo + (*offs)[r], src + (size_t)r * ld, (size_t)len * sizeof(float));
    }
    return bo;
}

static void case_prepare(struct gemm_case *c, uint32_t seed)
{
    rng_state = seed;
    c->lda = (c->ta ? c->M : c->K) + c->pad;
    c->ldb = (c->tb ? c->K : c->N) + c->pad;
    c->ldc = c->N + c->pad;
    const size_t na = (size_t)(c->ta ? c->K : c->M) * c->lda, nb = (size_t)(c->tb ? c->N : c->K) * c->ldb;
    const size_t nc = (size_t)c->M * c->ldc;
    c->A = alloc_floats(na);
    c->B = alloc_floats(nb);
    c->C = alloc_floats(nc);
    c->C0 = alloc_floats(nc);
    for (size_t i = 0; i < na; i++)
        c->A[i] = rand_value(c->exact);
    for (size_t i = 0; i < nb; i++)
        c->B[i] = rand_value(c->exact);
    for (int i = 0; i < c->M; i++)
        for (int j = 0; j < c->ldc; j++)
            c->C[(size_t)i * c->ldc + j] = j >= c->N  ? SENTINEL
                                           : c->nan_c ? NAN
                                                      : 2.0f * rand_value(c->exact);
    memcpy(c->C0, c->C, nc * sizeof(float));
}

static void case_run(struct gemm_case *c)
{
    yc_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, c->A, c->lda, c->B, c->ldb, c->beta, c->C, c->ldc);
}

static float op_a(const struct gemm_case *c, int i, int k)
{
    return c->ta ? c->A[(size_t)k * c->lda + i] : c->A[(size_t)i * c->lda + k];
}

static float op_b(const struct gemm_case *c, int k, int j)
{
    return c->tb ? c->B[(size_t)j * c->ldb + k] : c->B[(size_t)k * c->ldb + j];
}

static void case_verify(const struct gemm_case *c)
{
    /* First-order bound of the float sums used: sequential runs of at most 512 terms (a packed K
     * block), or K/16 (one vector lane along K), plus the merges of blocks, lanes and alpha/beta. */
    const double tol = c->exact ? 0.0 : ((c->K < 512 ? c->K : 512) + c->K / 16 + 16) * (double)FLT_EPSILON;
    for (int i = 0; i < c->M; i++)
        for (int j = 0; j < c->ldc; j++) {
            const size_t at = (size_t)i * c->ldc + j;
            const float got = c->C[at];
            if (j >= c->N) {
                ck_assert_msg(got == SENTINEL, "C[%d][%d] beyond N was written", i, j);
                continue;
            }
            double sum = 0.0, mag = 0.0;
            for (int k = 0; k < c->K; k++) {
                const double p = (double)op_a(c, i, k) * op_b(c, k, j);
                sum += p;
                mag += fabs(p);
            }
            double want = c->alpha * sum, bound = fabs(c->alpha) * mag;
            if (c->beta != 0.0f) {
                want += (double)c->beta * c->C0[at];
                bound += fabs((double)c->beta * c->C0[at]);
            }
            bound = bound * tol + (c->exact ? 0.0 : 1e-30);
            ck_assert_msg(fabs(got - want) <= bound,
                          "%c%c M=%d N=%d K=%d alpha=%g beta=%g: C[%d][%d] = %.9g, want %.9g (bound %.3g)",
                          c->ta ? 'T' : 'N', c->tb ? 'T' : 'N', c->M, c->N, c->K, c->alpha, c->beta, i, j,
                          got, want, bound);
        }
}

static void case_free(struct gemm_case *c)
{
    free(c->A);
    free(c->B);
    free(c->C);
    free(c->C0);
}

static void check_case(bool ta, bool tb, int M, int N, int K, float alpha, float beta, int pad, bool exact,
                       bool nan_c)
{
    struct gemm_case c = {.ta = ta,
                          .tb = tb,
                          .M = M,
                          .N = N,
                          .K = K,
                          .alpha = alpha,
                          .beta = beta,
                          .pad = pad,
                          .exact = exact,
                          .nan_c = nan_c};
    case_prepare(&c, (uint32_t)M * 7919u + (uint32_t)N * 104729u + (uint32_t)K * 1299709u + (ta ? 2u : 0u) +
                         (tb ? 1u : 0u));
    case_run(&c);
    case_verify(&c);
    case_free(&c);
}

/* ---- forcing the micro-kernel */

static const char *forced_kernel;

static void force(const char *name)
{
    forced_kernel = name;
    setenv("YOLOCL_GEMM_KERNEL", name, 1);
}

static void use_generic(void)
{
    force("generic");
}

#if defined(__x86_64__)
static void use_avx2(void)
{
    force("avx2");
}

static void use_avx512(void)
{
    force("avx512");
}
#endif

static void use_default(void)
{
    forced_kernel = NULL;
    unsetenv("YOLOCL_GEMM_KERNEL");
}

static void assert_kernel(void)
{
    const char *name = yc_sgemm_kernel_name();
    if (forced_kernel)
        ck_assert_str_eq(name, forced_kernel);
}

/* ---- tests */

static const int shapes[][3] = {
    {1, 1, 1},     {2, 3, 5},      {7, 13, 17},   {11, 1, 29},  {1, 37, 9},    {13, 31, 47}, {12, 32, 256},
    {17, 33, 257}, {6, 16, 40},    {4, 8, 3},     {5, 100, 3},  {100, 5, 3},   {64, 64, 64}, {37, 200, 1},
    {3, 3, 700},   {129, 67, 300}, {25, 49, 520}, {97, 41, 13}, {16, 96, 600}, {9, 65, 31},
};

START_TEST(test_shapes)
{
    assert_kernel();
    const int n = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < n; s++)
        for (int t = 0; t < 4; t++) {
            const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            check_case(t & 2, t & 1, M, N, K, 1.0f, 0.0f, 0, true, false);
            check_case(t & 2, t & 1, M, N, K, 1.0f, 0.0f, 0, false, false);
            check_case(t & 2, t & 1, M, N, K, -0.5f, 2.0f, 3, false, false);
        }
}
END_TEST

START_TEST(test_alpha_beta)
{
    assert_kernel();
    static const float ab[][2] = {{1.0f, 1.0f}, {2.0f, -1.0f}, {-0.5f, 0.5f}, {0.25f, 0.0f}, {3.0f, -2.0f}};
    for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++)
        for (int t = 0; t < 4; t++) {
            check_case(t & 2, t & 1, 29, 45, 70, ab[i][0], ab[i][1], 5, true, false);
            check_case(t & 2, t & 1, 29, 45, 70, ab[i][0], ab[i][1], 1, false, false);
        }
}
END_TEST

START_TEST(test_strides)
{
    assert_kernel();
    static const int pads[] = {1, 7, 16, 61};
    for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++)
        for (int t = 0; t < 4; t++) {
            check_case(t & 2, t & 1, 23, 51, 33, 1.0f, 1.0f, pads[i], true, false);
            check_case(t & 2, t & 1, 40, 70, 300, 1.5f, -1.0f, pads[i], false, false);
        }
}
END_TEST

/* beta == 0 must not read C: NaN there must not reach the result (full tiles, edges, split-K). */
START_TEST(test_beta0_nan)
{
    assert_kernel();
    for (int t = 0; t < 4; t++) {
        check_case(t & 2, t & 1, 1, 1, 1, 1.0f, 0.0f, 0, true, true);
        check_case(t & 2, t & 1, 31, 67, 45, 2.0f, 0.0f, 3, true, true);
        check_case(t & 2, t & 1, 130, 300, 64, 1.0f, 0.0f, 0, false, true);
        check_case(t & 2, t & 1, 16, 20, 5000, -1.0f, 0.0f, 2, true, true);
    }
}
END_TEST

/* K == 0 and alpha == 0 give C = beta * C without touching A and B (NaN there does not leak). */
START_TEST(test_k0_alpha0)
{
    assert_kernel();
    static const float betas[] = {0.0f, 1.0f, -2.5f};
    for (size_t b = 0; b < sizeof betas / sizeof betas[0]; b++) {
        const int M = 19, N = 23, ldc = 29;
        float C[19 * 29], A[19 * 7], B[7 * 23];
        for (int i = 0; i < M * ldc; i++)
            C[i] = betas[b] == 0.0f ? NAN : (float)(i % 11) - 5.0f;
        for (int i = 0; i < 19 * 7; i++)
            A[i] = NAN;
        for (int i = 0; i < 7 * 23; i++)
            B[i] = NAN;
        float C1[19 * 29], C2[19 * 29];
        memcpy(C1, C, sizeof C);
        memcpy(C2, C, sizeof C);
        yc_sgemm(false, false, M, N, 0, 1.0f, NULL, 1, NULL, N, betas[b], C1, ldc);
        yc_sgemm(true, true, M, N, 7, 0.0f, A, M, B, 7, betas[b], C2, ldc);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < ldc; j++) {
                const float c = C[i * ldc + j];
                const float want = j >= N ? c : betas[b] == 0.0f ? 0.0f : betas[b] * c;
                if (j >= N && isnan(c)) {
                    ck_assert(isnan(C1[i * ldc + j]) && isnan(C2[i * ldc + j]));
                    continue;
                }
                ck_assert_float_eq(C1[i * ldc + j], want);
                ck_assert_float_eq(C2[i * ldc + j], want);
            }
    }
    /* empty outputs do nothing */
    float c = 7.0f;
    yc_sgemm(false, false, 0, 5, 5, 1.0f, NULL, 5, NULL, 5, 0.0f, NULL, 5);
    yc_sgemm(false, false, 1, 0, 5, 1.0f, NULL, 5, NULL, 1, 0.0f, &c, 1);
    ck_assert_float_eq(c, 7.0f);
}
END_TEST

/* Long K with small outputs (the weight-gradient shapes: split-K), and shapes large enough to be
 * partitioned along N or along M. */
START_TEST(test_large)
{
    assert_kernel();
    for (int t = 0; t < 4; t++) {
        check_case(t & 2, t & 1, 8, 12, 20000, 1.0f, 0.0f, 0, true, false);
        check_case(t & 2, t & 1, 32, 27, 9000, 0.5f, 1.0f, 4, true, false);
        check_case(t & 2, t & 1, 5, 3, 40000, 1.0f, -1.0f, 0, false, false);
        check_case(t & 2, t & 1, 33, 1100, 40, 1.0f, 0.5f, 0, true, false);
        check_case(t & 2, t & 1, 700, 30, 70, -2.0f, 0.0f, 1, true, false);
        check_case(t & 2, t & 1, 15, 29, 1500, 1.0f, 0.5f, 2, true, false);
        check_case(t & 2, t & 1, 7, 31, 1100, -1.0f, 0.0f, 0, false, true);
    }
    check_case(false, true, 32, 108, 30000, 1.0f, 0.0f, 0, true, false);
    check_case(false, false, 260, 1030, 300, 1.0f, 1.0f, 3, false, false);
}
END_TEST

/* Same inputs, same thread count: bit-identical results (split-K and partitioned shapes). */
START_TEST(test_deterministic)
{
    assert_kernel();
    static const int dims[][3] = {{24, 40, 30000}, {200, 900, 100}, {900, 30, 100}};
    for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++) {
        struct gemm_case c = {.tb = true, .M = dims[s][0], .N = dims[s][1], .K = dims[s][2], .alpha = 1.0f};
        case_prepare(&c, 99);
        case_run(&c);
        const size_t n = (size_t)c.M * c.ldc;
        float *first = alloc_floats(n);
        memcpy(first, c.C, n * sizeof(float));
        for (int r = 0; r < 3; r++) {
            case_run(&c);
            ck_assert_msg(memcmp(first, c.C, n * sizeof(float)) == 0, "run %d differs", r);
        }
        free(first);
        case_free(&c);
    }
}
END_TEST

/* op(A) packed once (yc_sgemm_pack + yc_sgemm_packed, the convolutions' path) gives yc_sgemm's
 * bits, for both orientations of A, narrow and wide row tiles, several K blocks and edge panels,
 * on all threads and inside a parallel region (one thread), for shapes yc_sgemm does not split
 * along K; the packed floats are what
 * yc_sgemm_packed_floats says (guarded by sentinels). */
START_TEST(test_packed_a)
{
    assert_kernel();
    static const int dims[][3] = {{32, 300, 288}, {64, 1000, 576}, {128, 600, 1152}, {5, 77, 600},
                                  {255, 130, 128}, {13, 40, 1}, {96, 1200, 2304}};
    for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int par = 0; par < 2; par++) {
                struct gemm_case c = {.ta = ta, .M = dims[s][0], .N = dims[s][1], .K = dims[s][2],
                                      .alpha = 1.0f, .beta = par ? 0.0f : 1.0f, .pad = 3};
                case_prepare(&c, 7 + (uint32_t)s);
                const size_t np = yc_sgemm_packed_floats(c.M, c.K), nc = (size_t)c.M * c.ldc;
                float *packed = alloc_floats(np + 16), *want = alloc_floats(nc);
                for (int i = 0; i < 16; i++)
                    packed[np + i] = SENTINEL;
                memcpy(want, c.C, nc * sizeof(float));
                yc_sgemm(c.ta, false, c.M, c.N, c.K, c.alpha, c.A, c.lda, c.B, c.ldb, c.beta, want, c.ldc);
#pragma omp parallel num_threads(2) if (par)
#pragma omp single
                {
                    yc_sgemm_pack(c.ta, c.M, c.K, c.A, c.lda, packed);
                    yc_sgemm_packed(c.ta, c.M, c.N, c.K, c.alpha, c.A, c.lda, packed, c.B, c.ldb, c.beta, c.C,
                                    c.ldc);
                }
                for (int i = 0; i < 16; i++)
                    ck_assert_msg(packed[np + i] == SENTINEL, "packing wrote past %zu floats", np);
                ck_assert_msg(memcmp(want, c.C, nc * sizeof(float)) == 0, "%dx%dx%d ta %d in parallel %d differs",
                              c.M, c.N, c.K, ta, par);
                free(packed);
                free(want);
                case_free(&c);
            }
}
END_TEST

/* op(B) read in place at offsets (yc_sgemm_offsets, the implicit convolution's path) gives
 * yc_sgemm_packed's bits, with B's rows scattered (reversed and shifted) among NaNs that the
 * columns past N read but must not bring into C, on all threads and inside a parallel region. */
START_TEST(test_offsets)
{
    assert_kernel();
    static const int dims[][3] = {{32, 300, 288}, {64, 1000, 576}, {128, 600, 1152}, {5, 77, 600},
                                  {255, 130, 128}, {13, 40, 1}, {96, 1200, 2304}};
    const int nr = yc_sgemm_nr();
    ck_assert(nr == 8 || nr == 16 || nr == 32);
    for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++)
        for (int par = 0; par < 2; par++) {
            struct gemm_case c = {.M = dims[s][0], .N = dims[s][1], .K = dims[s][2], .alpha = 1.0f,
                                  .beta = par ? 0.0f : 1.0f, .pad = 3};
            case_prepare(&c, 11 + (uint32_t)s);
            const size_t np = yc_sgemm_packed_floats(c.M, c.K), nc = (size_t)c.M * c.ldc;
            float *pa = alloc_floats(np), *want = alloc_floats(nc), *got = alloc_floats(nc);
            memcpy(want, c.C, nc * sizeof(float));
            memcpy(got, c.C, nc * sizeof(float));
            yc_sgemm_pack(false, c.M, c.K, c.A, c.lda, pa);
            yc_sgemm_packed(false, c.M, c.N, c.K, c.alpha, c.A, c.lda, pa, c.B, c.ldb, c.beta, want, c.ldc);
            /* the K rows of B among NaNs; N rounded up to nr is read */
            ptrdiff_t *offs;
            float *bo = scatter_rows(c.B, c.ldb, c.K, c.N, 40, 3, nr, &offs);
#pragma omp parallel num_threads(2) if (par)
#pragma omp single
            yc_sgemm_offsets(c.M, c.N, c.K, c.alpha, c.A, c.lda, pa, bo, offs, c.beta, got, c.ldc);
            ck_assert_msg(memcmp(want, got, nc * sizeof(float)) == 0, "%dx%dx%d in parallel %d differs", c.M, c.N,
                          c.K, par);
            free(bo);
            free(offs);
            free(pa);
            free(want);
            free(got);
            case_free(&c);
        }
}
END_TEST

/* The transposed case (yc_sgemm_nt_offsets, the weight gradient's path): rows of B^T at scattered
 * offsets, NaN around, give yc_sgemm's bits with trans_b, packed (several K blocks, edge panels,
 * split-K for the long K with a small output) and, with AVX-512, unpacked for small outputs with a
 * long K (YOLOv5s's first two layers: 32 x 108 and 64 x 288, and edge tiles of the dot product's
 * 8 x 3 tiles), on all threads and inside a parallel region. */
START_TEST(test_nt_offsets)
{
    assert_kernel();
    static const int dims[][3] = {{32, 288, 300}, {64, 576, 1000}, {128, 1152, 600}, {5, 600, 77},
                                  {255, 128, 130}, {13, 1, 40}, {64, 576, 6400}, {32, 108, 5796},
                                  {64, 288, 3000}, {13, 7, 1500}};
    for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++)
        for (int par = 0; par < 2; par++) {
            struct gemm_case c = {.tb = true, .M = dims[s][0], .N = dims[s][1], .K = dims[s][2], .alpha = 1.0f,
                                  .beta = par ? 0.0f : 1.0f, .pad = 3};
            case_prepare(&c, 23 + (uint32_t)s);
            const size_t nc = (size_t)c.M * c.ldc;
            float *want = alloc_floats(nc), *got = alloc_floats(nc);
            memcpy(want, c.C, nc * sizeof(float));
            memcpy(got, c.C, nc * sizeof(float));
            /* the same threading on both sides: split-K only outside a parallel region */
#pragma omp parallel num_threads(2) if (par)
#pragma omp single
            yc_sgemm(false, true, c.M, c.N, c.K, c.alpha, c.A, c.lda, c.B, c.ldb, c.beta, want, c.ldc);
            /* the N rows of B^T among NaNs */
            ptrdiff_t *offs;
            float *bo = scatter_rows(c.B, c.ldb, c.N, c.K, 24, 5, 0, &offs);
#pragma omp parallel num_threads(2) if (par)
#pragma omp single
            yc_sgemm_nt_offsets(c.M, c.N, c.K, c.alpha, c.A, c.lda, bo, offs, c.beta, got, c.ldc);
            ck_assert_msg(memcmp(want, got, nc * sizeof(float)) == 0, "%dx%dx%d in parallel %d differs", c.M, c.N,
                          c.K, par);
            free(bo);
            free(offs);
            free(want);
            free(got);
            case_free(&c);
        }
}
END_TEST

/* Called from inside a parallel region each call runs on its own thread; concurrent calls with
 * different shapes (packed and, for NT with K = 2500, unpacked) must not disturb each other. */
START_TEST(test_in_parallel)
{
    assert_kernel();
    enum { NCASE = 8 };
    struct gemm_case cs[NCASE];
    for (int i = 0; i < NCASE; i++) {
        cs[i] = (struct gemm_case){.ta = i & 2,
                                   .tb = i & 1,
                                   .M = 20 + 13 * i,
                                   .N = 150 - 11 * i,
                                   .K = i % 4 == 1 ? 2500 : 60 + 200 * (i % 3),
                                   .alpha = 1.0f,
                                   .beta = i % 2 ? 0.5f : 0.0f,
                                   .pad = i % 3,
                                   .exact = i % 2 == 0};
        case_prepare(&cs[i], 1000u + (uint32_t)i);
    }
#pragma omp parallel for num_threads(2) schedule(dynamic, 1)
    for (int i = 0; i < NCASE; i++)
        case_run(&cs[i]);
    for (int i = 0; i < NCASE; i++) {
        case_verify(&cs[i]);
        case_free(&cs[i]);
    }
}
END_TEST

/* yc_transpose: every element lands at its place, whole and partial 16 x 16 tiles, padded strides;
 * the destination's padding is left alone. */
START_TEST(test_transpose)
{
    assert_kernel();
    static const int shapes[][2] = {{16, 16}, {1, 1}, {16, 37}, {33, 16}, {5, 70}, {48, 161}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int rows = shapes[t][0], cols = shapes[t][1], lds = cols + 3, ldd = rows + (int)t;
        float *src = alloc_floats((size_t)rows * lds), *dst = alloc_floats((size_t)cols * ldd);
        for (int i = 0; i < rows * lds; i++)
            src[i] = (float)i;
        for (int i = 0; i < cols * ldd; i++)
            dst[i] = SENTINEL;
        yc_transpose(rows, cols, src, lds, dst, ldd);
        for (int j = 0; j < cols; j++)
            for (int i = 0; i < ldd; i++) {
                float want = i < rows ? (float)(i * lds + j) : SENTINEL;
                ck_assert_msg(dst[j * ldd + i] == want, "%dx%d: dst[%d][%d] = %g, want %g", rows, cols, j, i,
                              (double)dst[j * ldd + i], (double)want);
            }
        free(src);
        free(dst);
    }
}
END_TEST

static void add_tests(TCase *tc)
{
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_shapes);
    tcase_add_test(tc, test_alpha_beta);
    tcase_add_test(tc, test_strides);
    tcase_add_test(tc, test_beta0_nan);
    tcase_add_test(tc, test_k0_alpha0);
    tcase_add_test(tc, test_large);
    tcase_add_test(tc, test_deterministic);
    tcase_add_test(tc, test_in_parallel);
    tcase_add_test(tc, test_packed_a);
    tcase_add_test(tc, test_offsets);
    tcase_add_test(tc, test_nt_offsets);
    tcase_add_test(tc, test_transpose);
}

START_TEST(test_default_kernel)
{
    const char *name = yc_sgemm_kernel_name();
    const char *best = "generic";
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f"))
        best = "avx512";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        best = "avx2";
#endif
    ck_assert_str_eq(name, best);
    check_case(false, false, 50, 60, 70, 1.0f, 0.0f, 0, true, false);
}
END_TEST

static Suite *gemm_suite(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("default");
    tcase_add_checked_fixture(tc, use_default, NULL);
    tcase_add_test(tc, test_default_kernel);
    suite_add_tcase(s, tc);

    tc = tcase_create("generic");
    tcase_add_checked_fixture(tc, use_generic, NULL);
    add_tests(tc);
    suite_add_tcase(s, tc);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        tc = tcase_create("avx2");
        tcase_add_checked_fixture(tc, use_avx2, NULL);
        add_tests(tc);
        suite_add_tcase(s, tc);
    } else {
        fprintf(stderr, "test_gemm: no AVX2+FMA on this CPU, avx2 kernel not tested\n");
    }
    if (__builtin_cpu_supports("avx512f")) {
        tc = tcase_create("avx512");
        tcase_add_checked_fixture(tc, use_avx512, NULL);
        add_tests(tc);
        suite_add_tcase(s, tc);
    } else {
        fprintf(stderr, "test_gemm: no AVX-512 on this CPU, avx512 kernel not tested\n");
    }
#endif
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gemm_suite());
    /* Each test must start with no kernel chosen yet, so that its fixture's choice applies. */
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
