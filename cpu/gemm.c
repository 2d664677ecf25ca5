/* Single-precision GEMM (see gemm.h).
 *
 * Structure (the BLIS/GotoBLAS scheme): op(B) is packed in blocks of KC x NC into NR-column panels
 * and op(A) in blocks of MC x KC into MR-row panels, both zero-padded to whole panels; a
 * register-blocked micro-kernel multiplies one MR x KC A panel by one KC x NR B panel and merges the
 * MR x NR result into C (alpha, beta, partial edge tiles).  Loop order per packed block: B panel
 * outer, A panels inner, so a B panel stays in L1 while the A panels stream from L2.
 * Micro-kernels and packing routines exist for AVX-512, AVX2+FMA (x86-64, chosen at run time) and
 * portable C; with AVX-512, A * B^T with a small output (weight gradients) skips packing (nt_dot).
 * B may also be given by row offsets into one buffer (the implicit convolutions): read in place by
 * offset variants of the micro-kernels (yc_sgemm_offsets), or, transposed, gathered row by row and
 * packed (yc_sgemm_nt_offsets; read in place by nt_dot when the output is small).
 *
 * Parallelism: the output is cut into tasks along N, M or (small outputs with a long K) along K
 * (split-K: each K chunk writes its own partial C, summed in chunk order afterwards).  Tasks are
 * dynamically scheduled and pack their own panels, so the only synchronisation is the end of the task
 * loop (plus one pass for the split-K sum).  Each C element is computed by one task in a fixed
 * order: results depend on the thread count only through the split-K decision.
 *
 * Each thread keeps its packing buffer (about 1.2 MiB) between calls. */
#include "gemm.h"

#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Blocking.  KC: depth of one packed block; an MR x KC A panel (12 x 256 floats = 12 KiB for the
 * AVX-512 kernel) stays in the 32-48 KiB L1.  NC: width of a packed B block; KC x NC floats (1 MiB)
 * fit the 1-2 MiB per-core L2 beside the A block.  MC: rows of A packed at a time (192 KiB with
 * KC = 256), small enough to still be in L2 when its panels are used. */
enum { GEMM_KC = 256, GEMM_NC = 1024, GEMM_MC = 192 };

/* The unpacked NT path (nt_dot) is used for blocks with M*N at most DOT_MAX_MN (its partial sums take
 * 64 bytes per element of C: 1.25 MiB, within the scratch floor; 20480 takes in YOLOv5s's 64 x 288
 * weight gradient at 160 x 160) and K at least DOT_MIN_K. */
enum { DOT_MAX_MN = 20480, DOT_MIN_K = 1024 };

/* One thread per this many flops (2*M*N*K), up to the OpenMP maximum: small products stay on the
 * calling thread. */
#define GEMM_PARALLEL_MIN_FLOPS 2.0e6

/* c[0:mr, 0:nr] = alpha * (A panel a) * (B panel b) + beta * c over kc steps (see the micro-kernels). */
typedef void (*kernel_fn)(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, float alpha,
                          float beta, int mr, int nr);

/* The same product with the B panel read in place: row k of it is b + offs[k] (NR floats, unaligned;
 * the columns past nr are read but not stored). */
typedef void (*kernel_off_fn)(int kc, const float *a, const float *b, const ptrdiff_t *offs, float *c, ptrdiff_t ldc,
                              float alpha, float beta, int mr, int nr);

/* Packing of element (r, k) = src[r*rs + k*ks], r < n, k < kc, into panels of R rows: element (r, k)
 * goes to dst[(r/R)*R*kc + k*R + r%R], rows n.. of the last panel are zero.  pack_copy handles rs == 1
 * (each k is a contiguous run of r; all panels, k outer, so each source row is read once, in order),
 * pack_trans ks == 1 (each r is a run of k; one panel). */
typedef void (*pack_fn)(const float *src, ptrdiff_t stride, int n, int R, int kc, float *dst);

struct gemm_args;

/* C[m0:m1, n0:n1] = alpha * A[m0:m1, k0:k1] * B[n0:n1, k0:k1]^T + beta * C on one thread. */
typedef void (*block_fn)(const struct gemm_args *g, int m0, int m1, int n0, int n1, int k0, int k1,
                         float beta, float *C, ptrdiff_t ldc);

struct kernel {
    const char *name;
    int mr, nr;
    kernel_fn fn;
    int mr_narrow; /* a kernel with fewer rows, for outputs that mr does not divide (0: none) */
    kernel_fn fn_narrow;
    kernel_off_fn fn_off, fn_off_narrow; /* fn and fn_narrow reading B in place */
    pack_fn pack_copy, pack_trans;
    block_fn nt_dot; /* unpacked path for !trans_a, trans_b with a small output (NULL: none) */
};

struct gemm_args {
    bool ta, tb;
    int M, N, K;
    float alpha;
    const float *A, *B;
    ptrdiff_t lda, ldb;
    /* op(A) already packed (yc_sgemm_pack), or NULL: K block b (of the KC blocking of K) starts at
     * apk + b*kcb*mpad, its panel of rows [i, i + MR) at + i*kc */
    const float *apk;
    int mpad;
    /* op(B) at offsets, or NULL: element (k, j) is bpk[boff[k] + j], read in place (!tb,
     * yc_sgemm_offsets; only with apk), or bpk[boff[j] + k], packed from there (tb,
     * yc_sgemm_nt_offsets) */
    const float *bpk;
    const ptrdiff_t *boff;
};

static int imin(int a, int b)
{
    return a < b ? a : b;
}

static int round_up(int x, int m)
{
    return (x + m - 1) / m * m;
}

/* c[i][j] = alpha * acc[i][j] + beta * c[i][j] for the valid mr x nr corner; beta == 0 never reads c. */
static void store_tile(const float *acc, int ld_acc, float *c, ptrdiff_t ldc, float alpha, float beta, int mr,
                       int nr)
{
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float v = alpha * acc[i * ld_acc + j];
            c[i * ldc + j] = beta == 0.0f ? v : v + beta * c[i * ldc + j];
        }
}

/* ---- micro-kernels: a points to an MR x kc panel stored k-major (a[k*MR + i]), b to a kc x NR panel
 * (b[k*NR + j]); both are zero-padded and 64-byte aligned (the B loads are unaligned ones all the same,
 * as the offset kernels read B in place). */

enum { GEN_MR = 4, GEN_NR = 8 };

static void kernel_generic(int kc, const float *restrict a, const float *restrict b, float *restrict c,
                           ptrdiff_t ldc, float alpha, float beta, int mr, int nr)
{
    float acc[GEN_MR][GEN_NR] = {{0}};
    for (int k = 0; k < kc; k++, a += GEN_MR, b += GEN_NR)
#pragma GCC unroll 8
        for (int i = 0; i < GEN_MR; i++)
#pragma GCC unroll 8
            for (int j = 0; j < GEN_NR; j++)
                acc[i][j] += a[i] * b[j];
    store_tile(&acc[0][0], GEN_NR, c, ldc, alpha, beta, mr, nr);
}

static void kernel_generic_off(int kc, const float *restrict a, const float *restrict b, const ptrdiff_t *restrict offs,
                               float *restrict c, ptrdiff_t ldc, float alpha, float beta, int mr, int nr)
{
    float acc[GEN_MR][GEN_NR] = {{0}};
    for (int k = 0; k < kc; k++, a += GEN_MR) {
        const float *bk = b + offs[k];
#pragma GCC unroll 8
        for (int i = 0; i < GEN_MR; i++)
#pragma GCC unroll 8
            for (int j = 0; j < GEN_NR; j++)
                acc[i][j] += a[i] * bk[j];
    }
    store_tile(&acc[0][0], GEN_NR, c, ldc, alpha, beta, mr, nr);
}

static void pack_copy_generic(const float *src, ptrdiff_t ks, int n, int R, int kc, float *restrict dst)
{
    for (int k = 0; k < kc; k++, src += ks)
        for (int p = 0; p < n; p += R) {
            float *d = dst + (ptrdiff_t)p * kc + (ptrdiff_t)k * R;
            for (int r = 0; r < R; r++)
                d[r] = p + r < n ? src[p + r] : 0.0f;
        }
}

static void pack_trans_generic(const float *src, ptrdiff_t rs, int n, int R, int kc, float *restrict dst)
{
    for (int r = 0; r < n; r++)
        for (int k = 0; k < kc; k++)
            dst[(ptrdiff_t)k * R + r] = src[r * rs + k];
    for (int k = 0; k < kc && n < R; k++)
        for (int r = n; r < R; r++)
            dst[(ptrdiff_t)k * R + r] = 0.0f;
}

#if defined(__x86_64__)

/* The copy packs prefetch the source row this many k ahead: rows are far apart (one image row or
 * more), so the hardware prefetcher sees a new stream at every k. */
enum { PACK_PREFETCH = 2 };

/* AVX2: 6 x 16 tile = 12 ymm accumulators + 2 B vectors + 1 broadcast of the 16 registers. */
enum { AVX2_MR = 6, AVX2_NV = 2, AVX2_NR = 8 * AVX2_NV };

__attribute__((target("avx2,fma"), always_inline)) static inline void
kernel_avx2_body(const bool OFF, int kc, const float *restrict a, const float *restrict b,
                 const ptrdiff_t *restrict offs, float *restrict c, ptrdiff_t ldc, float alpha, float beta, int mr, int nr)
{
    __m256 acc[AVX2_MR][AVX2_NV];
#pragma GCC unroll 16
    for (int i = 0; i < AVX2_MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < AVX2_NV; v++)
            acc[i][v] = _mm256_setzero_ps();
    for (int k = 0; k < kc; k++, a += AVX2_MR) {
        const float *bk = OFF ? b + offs[k] : b + (ptrdiff_t)k * AVX2_NR;
        __m256 bv[AVX2_NV];
#pragma GCC unroll 4
        for (int v = 0; v < AVX2_NV; v++)
            bv[v] = _mm256_loadu_ps(bk + 8 * v);
#pragma GCC unroll 16
        for (int i = 0; i < AVX2_MR; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 4
            for (int v = 0; v < AVX2_NV; v++)
                acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 16
    for (int i = 0; i < AVX2_MR; i++) {
        if (i >= mr)
            break;
#pragma GCC unroll 4
        for (int v = 0; v < AVX2_NV; v++) {
            int rem = nr - 8 * v;
            float *p = c + i * ldc + 8 * v;
            __m256 r = _mm256_mul_ps(va, acc[i][v]);
            if (rem >= 8) {
                if (beta != 0.0f)
                    r = _mm256_fmadd_ps(vb, _mm256_loadu_ps(p), r);
                _mm256_storeu_ps(p, r);
            } else if (rem > 0) {
                __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), iota);
                if (beta != 0.0f)
                    r = _mm256_fmadd_ps(vb, _mm256_maskload_ps(p, m), r);
                _mm256_maskstore_ps(p, m, r);
            }
        }
    }
}

__attribute__((target("avx2,fma"))) static void kernel_avx2(int kc, const float *restrict a,
                                                            const float *restrict b, float *restrict c,
                                                            ptrdiff_t ldc, float alpha, float beta, int mr,
                                                            int nr)
{
    kernel_avx2_body(false, kc, a, b, NULL, c, ldc, alpha, beta, mr, nr);
}

__attribute__((target("avx2,fma"))) static void kernel_avx2_off(int kc, const float *restrict a,
                                                                const float *restrict b, const ptrdiff_t *restrict offs,
                                                                float *restrict c, ptrdiff_t ldc, float alpha,
                                                                float beta, int mr, int nr)
{
    kernel_avx2_body(true, kc, a, b, offs, c, ldc, alpha, beta, mr, nr);
}

/* Transpose the 8 x 8 block held in v[0..7] (row i in v[i]) in place. */
__attribute__((target("avx2"), always_inline)) static inline void transpose8(__m256 v[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* Lanes [0, n) of a 256-bit mask, n clamped to [0, 8]. */
__attribute__((target("avx2"))) static inline __m256i mask8(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

__attribute__((target("avx2"))) static void pack_copy_avx2(const float *src, ptrdiff_t ks, int n, int R,
                                                           int kc, float *restrict dst)
{
    for (int k = 0; k < kc; k++, src += ks)
        for (int p = 0; p < n; p += R) {
            float *d = dst + (ptrdiff_t)p * kc + (ptrdiff_t)k * R;
            for (int r0 = 0; r0 < R; r0 += 8) {
                const int left = n - p - r0;
                const __m256 v = left >= 8  ? _mm256_loadu_ps(src + p + r0)
                                 : left > 0 ? _mm256_maskload_ps(src + p + r0, mask8(left))
                                            : _mm256_setzero_ps();
                if (R - r0 >= 8)
                    _mm256_storeu_ps(d + r0, v);
                else
                    _mm256_maskstore_ps(d + r0, mask8(R - r0), v);
            }
        }
}

/* 8 x 8 blocks: 8 rows of 8 consecutive k are loaded, transposed and stored as 8 k rows. */
__attribute__((target("avx2"))) static void pack_trans_avx2(const float *src, ptrdiff_t rs, int n, int R,
                                                            int kc, float *restrict dst)
{
    for (int r0 = 0; r0 < R; r0 += 8) {
        const int rows = n - r0;
        const __m256i w = mask8(R - r0);
        for (int k0 = 0; k0 < kc; k0 += 8) {
            const int kk = imin(8, kc - k0);
            const __m256i km = mask8(kk);
            __m256 v[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                v[i] = i < rows ? _mm256_maskload_ps(src + (r0 + i) * rs + k0, km) : _mm256_setzero_ps();
            transpose8(v);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++)
                if (j < kk)
                    _mm256_maskstore_ps(dst + (ptrdiff_t)(k0 + j) * R + r0, w, v[j]);
        }
    }
}

/* Lanes [0, n) of a 16-lane mask, n clamped to [0, 16]. */
static inline __mmask16 mask16(int n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* AVX-512: MR x 32 tiles.  12 rows: 24 zmm accumulators + 2 B vectors + 1 broadcast of the 32
 * registers, 24 FMAs per 2 vector loads and 12 broadcasts.  8 rows (16 accumulators, still enough to
 * cover the FMA latency on two ports) for outputs with few rows that 12 does not divide, such as 32
 * or 64 channels.  The C tile is prefetched at the start, the B panel 8 steps ahead (it streams from
 * L2). */
enum { AVX512_MR = 12, AVX512_MR_NARROW = 8, AVX512_NV = 2, AVX512_NR = 16 * AVX512_NV };

__attribute__((target("avx512f"), always_inline)) static inline void
kernel_avx512_body(const int MR, const bool OFF, int kc, const float *restrict a, const float *restrict b,
                   const ptrdiff_t *restrict offs, float *restrict c, ptrdiff_t ldc, float alpha, float beta, int mr,
                   int nr)
{
    __m512 acc[AVX512_MR][AVX512_NV];
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nr; v += 16)
            _mm_prefetch((const char *)(c + i * ldc + v), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < AVX512_NV; v++)
            acc[i][v] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++, a += MR) {
        const float *bk = OFF ? b + offs[k] : b + (ptrdiff_t)k * AVX512_NR;
        __m512 bv[AVX512_NV];
#pragma GCC unroll 4
        for (int v = 0; v < AVX512_NV; v++)
            bv[v] = _mm512_loadu_ps(bk + 16 * v);
        if (OFF) {
            const float *bn = b + offs[k + 8 < kc ? k + 8 : k];
            _mm_prefetch((const char *)bn, _MM_HINT_T0);
            _mm_prefetch((const char *)(bn + AVX512_NR - 1), _MM_HINT_T0);
        } else {
            _mm_prefetch((const char *)(bk + 8 * AVX512_NR), _MM_HINT_T0);
            _mm_prefetch((const char *)(bk + 8 * AVX512_NR + 16), _MM_HINT_T0);
        }
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
            for (int v = 0; v < AVX512_NV; v++)
                acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        if (i >= mr)
            break;
#pragma GCC unroll 4
        for (int v = 0; v < AVX512_NV; v++) {
            if (nr <= 16 * v)
                break;
            const __mmask16 m = mask16(nr - 16 * v);
            float *p = c + i * ldc + 16 * v;
            __m512 r = _mm512_mul_ps(va, acc[i][v]);
            if (beta != 0.0f)
                r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, p), r);
            _mm512_mask_storeu_ps(p, m, r);
        }
    }
}

__attribute__((target("avx512f"))) static void kernel_avx512(int kc, const float *restrict a,
                                                             const float *restrict b, float *restrict c,
                                                             ptrdiff_t ldc, float alpha, float beta, int mr,
                                                             int nr)
{
    kernel_avx512_body(AVX512_MR, false, kc, a, b, NULL, c, ldc, alpha, beta, mr, nr);
}

__attribute__((target("avx512f"))) static void kernel_avx512_off(int kc, const float *restrict a,
                                                                 const float *restrict b,
                                                                 const ptrdiff_t *restrict offs, float *restrict c,
                                                                 ptrdiff_t ldc, float alpha, float beta, int mr,
                                                                 int nr)
{
    kernel_avx512_body(AVX512_MR, true, kc, a, b, offs, c, ldc, alpha, beta, mr, nr);
}

__attribute__((target("avx512f"))) static void kernel_avx512_narrow_off(int kc, const float *restrict a,
                                                                        const float *restrict b,
                                                                        const ptrdiff_t *restrict offs,
                                                                        float *restrict c, ptrdiff_t ldc,
                                                                        float alpha, float beta, int mr, int nr)
{
    kernel_avx512_body(AVX512_MR_NARROW, true, kc, a, b, offs, c, ldc, alpha, beta, mr, nr);
}

__attribute__((target("avx512f"))) static void kernel_avx512_narrow(int kc, const float *restrict a,
                                                                    const float *restrict b,
                                                                    float *restrict c, ptrdiff_t ldc,
                                                                    float alpha, float beta, int mr, int nr)
{
    kernel_avx512_body(AVX512_MR_NARROW, false, kc, a, b, NULL, c, ldc, alpha, beta, mr, nr);
}

/* Transpose the 16 x 16 block held in v[0..15] (row i in v[i]) in place. */
__attribute__((target("avx512f"), always_inline)) static inline void transpose16(__m512 v[16])
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        v[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        v[i + 2] =
            _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        v[i + 3] =
            _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(v[h + i], v[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(v[h + i], v[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

__attribute__((target("avx512f"))) static void pack_copy_avx512(const float *src, ptrdiff_t ks, int n, int R,
                                                                int kc, float *restrict dst)
{
    for (int k = 0; k < kc; k++, src += ks)
        for (int p = 0; p < n; p += R) {
            float *d = dst + (ptrdiff_t)p * kc + (ptrdiff_t)k * R;
            for (int r0 = 0; r0 < R; r0 += 16) {
                const int left = n - p - r0;
                if (k + PACK_PREFETCH < kc && left > 0)
                    _mm_prefetch((const char *)(src + PACK_PREFETCH * ks + p + r0), _MM_HINT_T0);
                const __m512 v =
                    left > 0 ? _mm512_maskz_loadu_ps(mask16(left), src + p + r0) : _mm512_setzero_ps();
                _mm512_mask_storeu_ps(d + r0, mask16(R - r0), v);
            }
        }
}

/* dst[k*ldd + r] = src[r*rs + k] for r < width (zero for r >= n), k < kc, in 16 x 16 blocks: 16 rows of
 * 16 consecutive k are loaded, transposed and stored as 16 k rows; the rows are read 4 lines ahead,
 * as 16 or 32 concurrent streams are more than the prefetcher follows. */
__attribute__((target("avx512f"))) static void trans_blocks_avx512(const float *src, ptrdiff_t rs, int n, int width,
                                                                   int kc, float *restrict dst, ptrdiff_t ldd)
{
    for (int r0 = 0; r0 < width; r0 += 16) {
        const int rows = n - r0;
        const __mmask16 w = mask16(width - r0);
        for (int k0 = 0; k0 < kc; k0 += 16) {
            const int kk = imin(16, kc - k0);
            const __mmask16 km = mask16(kk);
            __m512 v[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                if (k0 + 4 * 16 < kc && i < rows)
                    _mm_prefetch((const char *)(src + (r0 + i) * rs + k0 + 4 * 16), _MM_HINT_T0);
                v[i] = i < rows ? _mm512_maskz_loadu_ps(km, src + (r0 + i) * rs + k0) : _mm512_setzero_ps();
            }
            transpose16(v);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                if (j < kk)
                    _mm512_mask_storeu_ps(dst + (ptrdiff_t)(k0 + j) * ldd + r0, w, v[j]);
        }
    }
}

__attribute__((target("avx512f"))) static void pack_trans_avx512(const float *src, ptrdiff_t rs, int n, int R,
                                                                 int kc, float *restrict dst)
{
    trans_blocks_avx512(src, rs, n, R, kc, dst, R);
}

static void nt_dot_avx512(const struct gemm_args *g, int m0, int m1, int n0, int n1, int k0, int k1,
                          float beta, float *C, ptrdiff_t ldc);

#endif

static const struct kernel kernels[] = {
    {"generic", GEN_MR, GEN_NR, kernel_generic, 0, NULL, kernel_generic_off, NULL, pack_copy_generic,
     pack_trans_generic, NULL},
#if defined(__x86_64__)
    {"avx2", AVX2_MR, AVX2_NR, kernel_avx2, 0, NULL, kernel_avx2_off, NULL, pack_copy_avx2, pack_trans_avx2, NULL},
    {"avx512", AVX512_MR, AVX512_NR, kernel_avx512, AVX512_MR_NARROW, kernel_avx512_narrow, kernel_avx512_off,
     kernel_avx512_narrow_off, pack_copy_avx512, pack_trans_avx512, nt_dot_avx512},
#endif
};

/* The best kernel this CPU runs, or the one YOLOCL_GEMM_KERNEL names if the CPU runs it. */
static int choose_kernel(void)
{
    int best = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        best = 1;
    if (__builtin_cpu_supports("avx512f"))
        best = 2;
#endif
    const char *want = getenv("YOLOCL_GEMM_KERNEL");
    if (want)
        for (int i = 0; i <= best; i++)
            if (strcmp(want, kernels[i].name) == 0)
                return i;
    return best;
}

static const struct kernel *get_kernel(void)
{
    static atomic_int selected = -1;
    int s = atomic_load_explicit(&selected, memory_order_relaxed);
    if (s < 0) {
        s = choose_kernel();
        atomic_store_explicit(&selected, s, memory_order_relaxed);
    }
    return &kernels[s];
}

const char *yc_sgemm_kernel_name(void)
{
    return get_kernel()->name;
}

/* The kernel with its narrow tile in place of the wide one when M is small and the wide tile would
 * pad it by 5% or more (32 or 64 rows with 12-row tiles) while the narrow one pads it less. */
static struct kernel kernel_for_rows(const struct kernel *kr, int M)
{
    struct kernel k = *kr;
    if (kr->mr_narrow) {
        const int pad = round_up(M, kr->mr) - M, pad_narrow = round_up(M, kr->mr_narrow) - M;
        if (pad * 20 >= M && pad_narrow < pad) {
            k.mr = kr->mr_narrow;
            k.fn = kr->fn_narrow;
            k.fn_off = kr->fn_off_narrow;
        }
    }
    return k;
}

/* ---- packing */

/* Pack n rows (R at a time) by kc of a matrix whose element (r, k) is src[r*rs + k*ks]; one of the
 * strides is 1. */
static void pack_block(const struct kernel *kr, const float *src, ptrdiff_t rs, ptrdiff_t ks, int n, int R,
                       int kc, float *dst)
{
    if (rs == 1)
        kr->pack_copy(src, ks, n, R, kc, dst);
    else
        for (int p = 0; p < n; p += R)
            kr->pack_trans(src + p * rs, rs, imin(R, n - p), R, kc, dst + (ptrdiff_t)p * kc);
}

/* ---- per-thread scratch: the packed A and B blocks of the task the thread is running */

static _Thread_local float *scratch_buf;
static _Thread_local size_t scratch_cap;

/* The buffer is also the value of a thread-specific key whose destructor frees it when the thread
 * exits (OpenMP retires pool threads when a region asks for fewer threads). */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_key_ok;

static void scratch_key_init(void)
{
    scratch_key_ok = pthread_key_create(&scratch_key, free) == 0;
}

/* Every packed block fits in KC x (NC + MC) plus a micro-tile of rounding on each side and the
 * prefetch distance (MR, NR <= 32 for every kernel), and the unpacked weight-gradient path needs
 * less (DOT_MAX_MN * 16 + DOT_TM * DOT_LDA): the first call takes this much at once, so a
 * thread's scratch never grows again once training has started. */
enum { SCRATCH_FLOOR = GEMM_KC * (GEMM_NC + 32 + GEMM_MC + 32 + 32) + 8 * 32 };

static float *scratch(size_t nfloat)
{
    if (nfloat > scratch_cap) {
        free(scratch_buf);
        if (nfloat < SCRATCH_FLOOR)
            nfloat = SCRATCH_FLOOR;
        size_t bytes = (nfloat * sizeof(float) + 63) / 64 * 64;
        scratch_buf = aligned_alloc(64, bytes);
        scratch_cap = scratch_buf ? bytes / sizeof(float) : 0;
        pthread_once(&scratch_once, scratch_key_init);
        if (scratch_key_ok && pthread_setspecific(scratch_key, scratch_buf) != 0) {
            free(scratch_buf);
            scratch_buf = NULL;
            scratch_cap = 0;
        }
    }
    return scratch_buf;
}

/* op(A)[i][k] and op(B)[k][j] as (row, k) element strides of the packing source. */
static const float *a_at(const struct gemm_args *g, int i, int k, ptrdiff_t *rs, ptrdiff_t *ks)
{
    *rs = g->ta ? 1 : g->lda;
    *ks = g->ta ? g->lda : 1;
    return g->A + i * *rs + k * *ks;
}

static const float *b_at(const struct gemm_args *g, int k, int j, ptrdiff_t *rs, ptrdiff_t *ks)
{
    *rs = g->tb ? g->ldb : 1;
    *ks = g->tb ? 1 : g->ldb;
    return g->B + j * *rs + k * *ks;
}

/* Unpacked fallback for when scratch memory cannot be had. */
static void naive_block(const struct gemm_args *g, int m0, int m1, int n0, int n1, int k0, int k1, float beta,
                        float *C, ptrdiff_t ldc)
{
    ptrdiff_t ars, aks, brs = 0, bks = 0;
    const float *A = a_at(g, 0, 0, &ars, &aks), *B = g->boff ? NULL : b_at(g, 0, 0, &brs, &bks);
    for (int i = m0; i < m1; i++)
        for (int j = n0; j < n1; j++) {
            float s = 0.0f;
            for (int k = k0; k < k1; k++)
                s += A[i * ars + k * aks] * (B ? B[j * brs + k * bks] : g->bpk[g->boff[j] + k]);
            store_tile(&s, 1, C + i * ldc + j, ldc, g->alpha, beta, 1, 1);
        }
}

/* C[m0:m1, n0:n1] = alpha * op(A)[m0:m1, k0:k1] * op(B)[k0:k1, n0:n1] + beta * C on one thread. */
static void gemm_block(const struct kernel *kr, const struct gemm_args *g, int m0, int m1, int n0, int n1,
                       int k0, int k1, float beta, float *C, ptrdiff_t ldc)
{
    const int MR = kr->mr, NR = kr->nr;
    const int nkb = (k1 - k0 + GEMM_KC - 1) / GEMM_KC;
    const int kcb = (k1 - k0 + nkb - 1) / nkb; /* equal K blocks rather than a short last one */
    const int ncb = imin(round_up(GEMM_NC, NR), round_up(n1 - n0, NR));
    const int mcb = imin(round_up(GEMM_MC, MR), round_up(m1 - m0, MR));
    float *bp = NULL, *ap = NULL, *rows = NULL;
    const bool in_place = g->boff && !g->tb;
    if (!in_place) {
        /* + the kernels' prefetch distance, + NR gathered rows for B at offsets */
        bp = scratch((size_t)kcb * (ncb + mcb + NR) + 8 * NR);
        if (!bp) {
            naive_block(g, m0, m1, n0, n1, k0, k1, beta, C, ldc);
            return;
        }
        ap = bp + (size_t)kcb * ncb;
        rows = ap + (size_t)kcb * mcb;
    }
    for (int jc = n0; jc < n1; jc += ncb) {
        const int nc = imin(ncb, n1 - jc);
        for (int pc = k0; pc < k1; pc += kcb) {
            const int kc = imin(kcb, k1 - pc);
            const float bb = pc == k0 ? beta : 1.0f;
            ptrdiff_t rs, ks;
            const float *src;
            if (in_place) {
                bp = (float *)g->bpk + jc;
            } else if (g->boff) {
                /* NR rows of B^T at a time: gathered from their offsets, then transposed */
                for (int p = 0; p < nc; p += NR) {
                    const int nrow = imin(NR, nc - p);
                    for (int r = 0; r < nrow; r++)
                        memcpy(rows + (ptrdiff_t)r * kc, g->bpk + g->boff[jc + p + r] + pc,
                               (size_t)kc * sizeof(float));
                    kr->pack_trans(rows, kc, nrow, NR, kc, bp + (ptrdiff_t)p * kc);
                }
            } else {
                src = b_at(g, pc, jc, &rs, &ks);
                pack_block(kr, src, rs, ks, nc, NR, kc, bp);
            }
            for (int ic = m0; ic < m1; ic += mcb) {
                const int mc = imin(mcb, m1 - ic);
                const float *apk = ap;
                if (g->apk) {
                    apk = g->apk + (ptrdiff_t)pc * g->mpad + (ptrdiff_t)ic * kc;
                } else {
                    src = a_at(g, ic, pc, &rs, &ks);
                    pack_block(kr, src, rs, ks, mc, MR, kc, ap);
                }
                for (int jr = 0; jr < nc; jr += NR) {
                    const int nr = imin(NR, nc - jr);
                    if (in_place) {
                        for (int ir = 0; ir < mc; ir += MR)
                            kr->fn_off(kc, apk + (ptrdiff_t)ir * kc, bp + jr, g->boff + pc,
                                       C + (ic + ir) * ldc + jc + jr, ldc, g->alpha, bb, imin(MR, mc - ir), nr);
                        continue;
                    }
                    const float *bpan = bp + (ptrdiff_t)jr * kc;
                    for (int ir = 0; ir < mc; ir += MR)
                        kr->fn(kc, apk + (ptrdiff_t)ir * kc, bpan, C + (ic + ir) * ldc + jc + jr, ldc, g->alpha,
                               bb, imin(MR, mc - ir), nr);
                }
            }
        }
    }
}

#if defined(__x86_64__)

/* ---- NT with a small output (the weight gradients of the early layers: M = Cout and N = Cin*k*k
 * small, K = H*W long).  Packing would cost as much as the product, so the rows of B are read in
 * place (from their offsets for yc_sgemm_nt_offsets): a DOT_TM x DOT_TN tile of dot products is
 * accumulated in vectors along K (24 zmm accumulators, 11 loads per 24 FMAs), over chunks of DOT_KD;
 * the A tile (8 rows x 2 KiB) is copied to a buffer that stays in L1 while the B rows come from L2.  The vector partial sums of all tiles
 * stay in scratch (16 floats per element of C) between chunks and are reduced at the end. */
enum { DOT_TM = 8, DOT_TN = 3, DOT_KD = 512 };

/* Row stride of the copied A tile: 16 floats more than a chunk, so that its rows do not all fall in
 * the same L1 sets (rows of A itself are often a multiple of 4 KiB apart). */
enum { DOT_LDA = DOT_KD + 16 };
_Static_assert(DOT_MAX_MN * 16 + DOT_TM * DOT_LDA <= SCRATCH_FLOOR,
               "the unpacked path must fit in the scratch floor");

__attribute__((target("avx512f"), always_inline)) static inline void
dot_tile(const int TM, const int TN, const float *A, ptrdiff_t lda, const float *const *B, int kd, float *acc,
         ptrdiff_t ld_acc, bool first, bool prefetch)
{
    __m512 s[DOT_TM][DOT_TN];
#pragma GCC unroll 8
    for (int i = 0; i < TM; i++)
#pragma GCC unroll 4
        for (int j = 0; j < TN; j++)
            s[i][j] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + (i * ld_acc + j) * 16);
    int k = 0;
    for (; k + 16 <= kd; k += 16) {
        __m512 b[DOT_TN];
#pragma GCC unroll 4
        for (int j = 0; j < TN; j++) {
            b[j] = _mm512_loadu_ps(B[j] + k);
            if (prefetch)
                _mm_prefetch((const char *)(B[j] + k + DOT_KD), _MM_HINT_T1);
        }
#pragma GCC unroll 8
        for (int i = 0; i < TM; i++) {
            __m512 a = _mm512_loadu_ps(A + i * lda + k);
            __asm__("" : "+v"(a)); /* one load, not one folded into each FMA */
#pragma GCC unroll 4
            for (int j = 0; j < TN; j++)
                s[i][j] = _mm512_fmadd_ps(a, b[j], s[i][j]);
        }
    }
    if (k < kd) {
        const __mmask16 m = mask16(kd - k);
        __m512 b[DOT_TN];
#pragma GCC unroll 4
        for (int j = 0; j < TN; j++)
            b[j] = _mm512_maskz_loadu_ps(m, B[j] + k);
#pragma GCC unroll 8
        for (int i = 0; i < TM; i++) {
            const __m512 a = _mm512_maskz_loadu_ps(m, A + i * lda + k);
#pragma GCC unroll 4
            for (int j = 0; j < TN; j++)
                s[i][j] = _mm512_fmadd_ps(a, b[j], s[i][j]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < TM; i++)
#pragma GCC unroll 4
        for (int j = 0; j < TN; j++)
            _mm512_store_ps(acc + (i * ld_acc + j) * 16, s[i][j]);
}

/* The tile sizes in use: rows 8, 4, 2, 1 and columns 3, 2, 1 (edges are cut into smaller tiles). */
#define DOT_TILE_CASE(TM, TN)                                                                                \
    case TM * 4 + TN:                                                                                        \
        dot_tile(TM, TN, A, lda, B, kd, acc, ld_acc, first, prefetch);                                       \
        break;

__attribute__((target("avx512f"))) static void dot_tile_any(int tm, int tn, const float *A, ptrdiff_t lda,
                                                            const float *const *B, int kd, float *acc,
                                                            ptrdiff_t ld_acc, bool first, bool prefetch)
{
    switch (tm * 4 + tn) {
        DOT_TILE_CASE(8, 3)
        DOT_TILE_CASE(8, 2)
        DOT_TILE_CASE(8, 1)
        DOT_TILE_CASE(4, 3)
        DOT_TILE_CASE(4, 2)
        DOT_TILE_CASE(4, 1)
        DOT_TILE_CASE(2, 3)
        DOT_TILE_CASE(2, 2)
        DOT_TILE_CASE(2, 1)
        DOT_TILE_CASE(1, 3)
        DOT_TILE_CASE(1, 2)
        DOT_TILE_CASE(1, 1)
    default:
        break;
    }
}

#undef DOT_TILE_CASE

static int dot_rows(int left)
{
    return left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
}

__attribute__((target("avx512f"))) static void nt_dot_avx512(const struct gemm_args *g, int m0, int m1,
                                                             int n0, int n1, int k0, int k1, float beta,
                                                             float *C, ptrdiff_t ldc)
{
    const int M = m1 - m0, N = n1 - n0;
    float *acc = scratch((size_t)M * N * 16 + DOT_TM * DOT_LDA);
    if (!acc) {
        naive_block(g, m0, m1, n0, n1, k0, k1, beta, C, ldc);
        return;
    }
    /* The rows are too many and too short for the hardware prefetcher: the next chunk of each row is
     * prefetched into L2 as the current one is read (B rows in the first pass over them). */
    float *atile = acc + (size_t)M * N * 16;
    for (int kc = k0; kc < k1; kc += DOT_KD) {
        const int kd = imin(DOT_KD, k1 - kc);
        const bool more = k1 - kc >= 2 * DOT_KD;
        for (int i = 0, tm; i < M; i += tm) {
            tm = dot_rows(M - i);
            for (int r = 0; r < tm; r++) {
                const float *src = g->A + (m0 + i + r) * g->lda + kc;
                for (int k = 0; more && k < kd; k += 16)
                    _mm_prefetch((const char *)(src + k + DOT_KD), _MM_HINT_T1);
                memcpy(atile + r * DOT_LDA, src, (size_t)kd * sizeof(float));
            }
            for (int j = 0, tn; j < N; j += tn) {
                tn = imin(DOT_TN, N - j);
                const float *brows[DOT_TN];
                for (int u = 0; u < tn; u++)
                    brows[u] = (g->boff ? g->bpk + g->boff[n0 + j + u] : g->B + (n0 + j + u) * g->ldb) + kc;
                dot_tile_any(tm, tn, atile, DOT_LDA, brows, kd, acc + ((ptrdiff_t)i * N + j) * 16, N, kc == k0,
                             more && i == 0);
            }
        }
    }
    for (int i = 0; i < M; i++) {
        float *c = C + (m0 + i) * ldc + n0;
        for (int j = 0; j < N; j++) {
            const float v =
                g->alpha * _mm512_reduce_add_ps(_mm512_load_ps(acc + ((ptrdiff_t)i * N + j) * 16));
            c[j] = beta == 0.0f ? v : v + beta * c[j];
        }
    }
}

#endif

/* Packed or unpacked (nt_dot) path for one task. */
static void run_block(const struct kernel *kr, const struct gemm_args *g, int m0, int m1, int n0, int n1,
                      int k0, int k1, float beta, float *C, ptrdiff_t ldc)
{
    if (kr->nt_dot && !g->apk && !g->ta && g->tb && (double)(m1 - m0) * (n1 - n0) <= DOT_MAX_MN &&
        k1 - k0 >= DOT_MIN_K)
        kr->nt_dot(g, m0, m1, n0, n1, k0, k1, beta, C, ldc);
    else
        gemm_block(kr, g, m0, m1, n0, n1, k0, k1, beta, C, ldc);
}

/* C = beta * C (K == 0 or alpha == 0: A and B are not read). */
static void scale_c(int M, int N, float beta, float *C, ptrdiff_t ldc)
{
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && (double)M * N > 65536.0)
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

/* Tasks per thread, at most: the task loop is scheduled dynamically, so a thread slowed down by
 * another process on its core holds up only a small piece.  A task is at least TASK_MIN columns
 * (rows) wide, so that re-packing A (B) per task stays cheap, or 2 KC deep for split-K. */
enum { TASKS_PER_THREAD = 4, TASK_MIN = 512 };

/* Split-K partial outputs are limited to this many floats in all. */
#define SPLITK_MAX_FLOATS 4.0e6

static int task_count(int T, int extent, int min_each)
{
    const int per = extent / (T * min_each);
    return T * (per < 1 ? 1 : per > TASKS_PER_THREAD ? TASKS_PER_THREAD : per);
}

/* Task grid: nu[0] x nu[1] x nu[2] pieces along M, N, K. */
static void plan(const struct kernel *kr, int M, int N, int K, int T, int nu[3])
{
    nu[0] = nu[1] = nu[2] = 1;
    if (T <= 1)
        return;
    const int pm = (M + kr->mr - 1) / kr->mr, pn = (N + kr->nr - 1) / kr->nr;
    const int big = M > N ? M : N;
    if (K >= 2 * GEMM_KC * T && K >= 2 * big && (double)M * N * (T - 1) <= SPLITK_MAX_FLOATS) {
        /* split-K: a small output with a long K */
        nu[2] = task_count(T, K, 2 * GEMM_KC);
        while (nu[2] > T && (double)M * N * (nu[2] - 1) > SPLITK_MAX_FLOATS)
            nu[2] -= T;
    } else if (pn >= 4 * T) {
        nu[1] = imin(pn, task_count(T, N, TASK_MIN));
    } else if (pm >= 8 * T) {
        nu[0] = imin(pm, task_count(T, M, TASK_MIN));
    } else if (pn >= pm) {
        nu[1] = imin(T, pn);
    } else {
        nu[0] = imin(T, pm);
    }
}

/* The task grid and loop of yc_sgemm and yc_sgemm_packed over g (g->apk set: no split-K, whose K
 * chunks would not match the packed K blocks). */
static void sgemm_run(const struct kernel *kr, struct gemm_args g, float beta, float *C, int ldc)
{
    const int M = g.M, N = g.N, K = g.K;
    int T = omp_in_parallel() ? 1 : omp_get_max_threads();
    const double flops = 2.0 * M * N * K;
    if (flops < GEMM_PARALLEL_MIN_FLOPS * T)
        T = imin(T, (int)(flops / GEMM_PARALLEL_MIN_FLOPS) + 1);
    int nu[3];
    plan(kr, M, N, K, T, nu);
    if (g.apk && nu[2] > 1) {
        nu[1] = imin(nu[2], (N + kr->nr - 1) / kr->nr);
        nu[2] = 1;
    }
    const int ntask = nu[0] * nu[1] * nu[2];
    if (ntask == 1) {
        run_block(kr, &g, 0, M, 0, N, 0, K, beta, C, ldc);
        return;
    }
    float *part = NULL;
    if (nu[2] > 1) {
        part = malloc(sizeof(float) * (size_t)M * N * (nu[2] - 1));
        if (!part) { /* no memory for partial outputs: the same number of tasks along N */
            nu[1] = nu[2];
            nu[2] = 1;
        }
    }
    const int pm = (M + kr->mr - 1) / kr->mr, pn = (N + kr->nr - 1) / kr->nr;
#pragma omp parallel num_threads(T)
    {
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntask; t++) {
            const int im = t % nu[0], in = t / nu[0] % nu[1], ik = t / (nu[0] * nu[1]);
            const int m0 = imin(M, pm * im / nu[0] * kr->mr), m1 = imin(M, pm * (im + 1) / nu[0] * kr->mr);
            const int n0 = imin(N, pn * in / nu[1] * kr->nr), n1 = imin(N, pn * (in + 1) / nu[1] * kr->nr);
            const int k0 = (int)((long long)K * ik / nu[2]), k1 = (int)((long long)K * (ik + 1) / nu[2]);
            if (m0 >= m1 || n0 >= n1)
                continue;
            if (ik == 0)
                run_block(kr, &g, m0, m1, n0, n1, k0, k1, beta, C, ldc);
            else
                run_block(kr, &g, m0, m1, n0, n1, k0, k1, 0.0f, part + (size_t)M * N * (ik - 1), N);
        }
        if (part) {
#pragma omp for schedule(static)
            for (int i = 0; i < M; i++)
                for (int s = 0; s < nu[2] - 1; s++) {
                    const float *p = part + (size_t)M * N * s + (size_t)i * N;
                    for (int j = 0; j < N; j++)
                        C[(ptrdiff_t)i * ldc + j] += p[j];
                }
        }
    }
    free(part);
}

void yc_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    const struct kernel kv = kernel_for_rows(get_kernel(), M);
    const struct gemm_args g = {trans_a, trans_b, M, N, K, alpha, A, B, lda, ldb, NULL, 0, NULL, NULL};
    sgemm_run(&kv, g, beta, C, ldc);
}

/* ---- op(A) packed once */

/* Depth of the K blocks gemm_block cuts K into (equal blocks of at most GEMM_KC). */
static int k_block(int K)
{
    const int nkb = (K + GEMM_KC - 1) / GEMM_KC;
    return (K + nkb - 1) / nkb;
}

size_t yc_sgemm_packed_floats(int M, int K)
{
    if (M <= 0 || K <= 0)
        return 0;
    const struct kernel kv = kernel_for_rows(get_kernel(), M);
    return (size_t)round_up(M, kv.mr) * (size_t)K;
}

void yc_sgemm_pack(bool trans_a, int M, int K, const float *A, int lda, float *packed)
{
    if (M <= 0 || K <= 0)
        return;
    const struct kernel kv = kernel_for_rows(get_kernel(), M);
    const int MR = kv.mr, mpad = round_up(M, MR), kcb = k_block(K);
    const int nkb = (K + kcb - 1) / kcb, np = mpad / MR;
    const ptrdiff_t rs = trans_a ? 1 : lda, ks = trans_a ? lda : 1;
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && (double)M * K > 65536.0)
    for (int t = 0; t < nkb * np; t++) {
        const int b = t / np, i = t % np * MR;
        const int pc = b * kcb, kc = imin(kcb, K - pc);
        pack_block(&kv, A + i * rs + pc * ks, rs, ks, imin(MR, M - i), MR, kc,
                   packed + (ptrdiff_t)pc * mpad + (ptrdiff_t)i * kc);
    }
}

void yc_sgemm_packed(bool trans_a, int M, int N, int K, float alpha, const float *A, int lda, const float *packed,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    const struct kernel kv = kernel_for_rows(get_kernel(), M);
    const struct gemm_args g = {trans_a, false, M, N, K, alpha, A, B, lda, ldb, packed, round_up(M, kv.mr),
                                NULL, NULL};
    sgemm_run(&kv, g, beta, C, ldc);
}

/* ---- op(B) read in place */

int yc_sgemm_nr(void)
{
    return get_kernel()->nr;
}

void yc_sgemm_offsets(int M, int N, int K, float alpha, const float *A, int lda, const float *apacked,
                      const float *b, const ptrdiff_t *offs, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    const struct kernel kv = kernel_for_rows(get_kernel(), M);
    const struct gemm_args g = {false, false, M, N, K, alpha, A, NULL, lda, 0, apacked, round_up(M, kv.mr),
                                b, offs};
    sgemm_run(&kv, g, beta, C, ldc);
}

void yc_sgemm_nt_offsets(int M, int N, int K, float alpha, const float *A, int lda, const float *b,
                         const ptrdiff_t *offs, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    const struct kernel kv = kernel_for_rows(get_kernel(), M);
    const struct gemm_args g = {false, true, M, N, K, alpha, A, NULL, lda, 0, NULL, 0, b, offs};
    sgemm_run(&kv, g, beta, C, ldc);
}

void yc_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst, ptrdiff_t ldd)
{
#if defined(__x86_64__)
    if (strcmp(get_kernel()->name, "avx512") == 0) {
        trans_blocks_avx512(src, lds, rows, rows, cols, dst, ldd);
        return;
    }
#endif
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            dst[(ptrdiff_t)j * ldd + i] = src[(ptrdiff_t)i * lds + j];
}
