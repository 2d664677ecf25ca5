/* Single-precision GEMM for the CPU backend: packed panels, register-blocked micro-kernels
 * chosen at run time (AVX-512, AVX2+FMA, portable C), OpenMP-parallel.
 *
 *   C[M x N] = alpha * op(A)[M x K] * op(B)[K x N] + beta * C
 *
 * All matrices are row-major; lda/ldb/ldc are row strides in elements.  op(A) = A (M x K, lda >= K)
 * or A^T (A stored K x M, lda >= M); likewise for B.  beta == 0 overwrites C without reading it
 * (NaN in C does not leak).  Called from inside an OpenMP parallel region it runs on the calling
 * thread only. */
#ifndef YC_GEMM_H
#define YC_GEMM_H

#include <stdbool.h>
#include <stddef.h>

void yc_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

/* op(A) packed once for many products with the same A (a convolution's weights, used for every
 * block of columns): yc_sgemm_pack writes op(A) (M x K, as for yc_sgemm) into `packed`, which holds
 * yc_sgemm_packed_floats(M, K) floats (float-aligned); yc_sgemm_packed then computes
 * C = alpha * op(A) * B + beta * C (B not transposed) from it, bit-identical to yc_sgemm with the same
 * arguments except that it never splits K across threads.  A and lda are still passed (a fallback
 * when the thread's packing memory cannot be had reads them). */
size_t yc_sgemm_packed_floats(int M, int K);
void yc_sgemm_pack(bool trans_a, int M, int K, const float *A, int lda, float *packed);
void yc_sgemm_packed(bool trans_a, int M, int N, int K, float alpha, const float *A, int lda, const float *packed,
                     const float *B, int ldb, float beta, float *C, int ldc);

/* op(B) read in place, without packing (a convolution's input with its padding, whose column
 * matrix is the image at shifted offsets): element (k, j) of B is b[offs[k] + j].
 * yc_sgemm_offsets computes C[M x N] = alpha * op(A) * B + beta * C from op(A) packed by
 * yc_sgemm_pack (trans_a either way: only `apacked` is read, A and lda never); it reads
 * b[offs[k] + j] for j up to N rounded up to yc_sgemm_nr() (the columns past N are read but not
 * used), and gives the bits yc_sgemm_packed gives for the same B. */
int yc_sgemm_nr(void);
void yc_sgemm_offsets(int M, int N, int K, float alpha, const float *A, int lda, const float *apacked,
                      const float *b, const ptrdiff_t *offs, float beta, float *C, int ldc);

/* The transposed case, B^T's rows at offsets (a convolution's weight gradient, the columns of its
 * input read from the padded input): C[M x N] = alpha * A[M x K] * B + beta * C where element (k, j)
 * of B is b[offs[j] + k] (row j of B^T is K floats from b + offs[j]).  B is packed from there, so
 * the result is yc_sgemm's with trans_b for the same values except that the unpacked small-output
 * path (nt_dot) is not used. */
void yc_sgemm_nt_offsets(int M, int N, int K, float alpha, const float *A, int lda, const float *b,
                         const ptrdiff_t *offs, float beta, float *C, int ldc);

/* dst[j*ldd + i] = src[i*lds + j] for i < rows, j < cols (the arrays do not overlap): a
 * convolution's input block made channel-minor for its weight gradient (cpu/conv.c).  With the
 * AVX-512 kernel selected, in 16 x 16 register tiles. */
void yc_transpose(int rows, int cols, const float *src, ptrdiff_t lds, float *dst, ptrdiff_t ldd);

/* Name of the micro-kernel selected for this CPU ("avx512", "avx2", "generic").  The environment
 * variable YOLOCL_GEMM_KERNEL, read once at the first call, can select a lesser one than the CPU's best
 * (tests use it to cover every path); a name the CPU cannot run is ignored.  The AVX-512 exp and
 * SiLU kernels (silu_avx512.c) run when this is "avx512". */
const char *yc_sgemm_kernel_name(void);

#endif
