/* Single-precision GEMM (see gemm.h).  Simple OpenMP loop version; a packed, register-blocked
 * implementation replaces it. */
#include "gemm.h"

#include <omp.h>
#include <stddef.h>

const char *yc_sgemm_kernel_name(void)
{
    return "simple";
}

void yc_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && (long)M * N * K > 32768)
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++)
            c[j] = beta == 0.0f ? 0.0f : beta * c[j];
        for (int k = 0; k < K; k++) {
            float a = alpha * (trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
            if (!trans_b) {
                const float *b = B + (size_t)k * ldb;
                for (int j = 0; j < N; j++)
                    c[j] += a * b[j];
            } else {
                for (int j = 0; j < N; j++)
                    c[j] += a * B[(size_t)j * ldb + k];
            }
        }
    }
}
