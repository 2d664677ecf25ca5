/* CLBlast for the OpenCL backend: SGEMM with our temporary buffer, its size, status names.
 *
 * CLBlast's indirect GEMM copies (pads, transposes) A, B and C into a temporary buffer; with the
 * ...WithTempBuffer call it uses the one we pass instead of allocating it, and
 * CLBlastSGemmTempBufferSize says how large it must be.  A matrix that needs no copy (no padding,
 * no transposition, offset 0) takes no room, so the size depends on the offsets: nonzero offsets
 * give the largest size, which is what workspace() reserves.  HGEMM is not used (it fails on PoCL;
 * FP16 is a storage format here). */
#include "cl_internal.h"

#include <clblast_c.h>
#include <stdio.h>

#include "log.h"

const char *yc_clblast_status_name(int status)
{
    static const struct {
        int code;
        const char *name;
    } names[] = {
        {CLBlastNotImplemented, "CLBlastNotImplemented"},
        {CLBlastInvalidMatrixA, "CLBlastInvalidMatrixA"},
        {CLBlastInvalidMatrixB, "CLBlastInvalidMatrixB"},
        {CLBlastInvalidMatrixC, "CLBlastInvalidMatrixC"},
        {CLBlastInvalidVectorX, "CLBlastInvalidVectorX"},
        {CLBlastInvalidVectorY, "CLBlastInvalidVectorY"},
        {CLBlastInvalidDimension, "CLBlastInvalidDimension"},
        {CLBlastInvalidLeadDimA, "CLBlastInvalidLeadDimA"},
        {CLBlastInvalidLeadDimB, "CLBlastInvalidLeadDimB"},
        {CLBlastInvalidLeadDimC, "CLBlastInvalidLeadDimC"},
        {CLBlastInvalidIncrementX, "CLBlastInvalidIncrementX"},
        {CLBlastInvalidIncrementY, "CLBlastInvalidIncrementY"},
        {CLBlastInsufficientMemoryA, "CLBlastInsufficientMemoryA"},
        {CLBlastInsufficientMemoryB, "CLBlastInsufficientMemoryB"},
        {CLBlastInsufficientMemoryC, "CLBlastInsufficientMemoryC"},
        {CLBlastInsufficientMemoryX, "CLBlastInsufficientMemoryX"},
        {CLBlastInsufficientMemoryY, "CLBlastInsufficientMemoryY"},
        {CLBlastInsufficientMemoryTemp, "CLBlastInsufficientMemoryTemp"},
        {CLBlastInvalidBatchCount, "CLBlastInvalidBatchCount"},
        {CLBlastInvalidOverrideKernel, "CLBlastInvalidOverrideKernel"},
        {CLBlastMissingOverrideParameter, "CLBlastMissingOverrideParameter"},
        {CLBlastInvalidLocalMemUsage, "CLBlastInvalidLocalMemUsage"},
        {CLBlastNoHalfPrecision, "CLBlastNoHalfPrecision"},
        {CLBlastNoDoublePrecision, "CLBlastNoDoublePrecision"},
        {CLBlastInvalidVectorScalar, "CLBlastInvalidVectorScalar"},
        {CLBlastInsufficientMemoryScalar, "CLBlastInsufficientMemoryScalar"},
        {CLBlastDatabaseError, "CLBlastDatabaseError"},
        {CLBlastUnknownError, "CLBlastUnknownError"},
        {CLBlastUnexpectedError, "CLBlastUnexpectedError"},
    };
    if (status == CLBlastSuccess)
        return "CLBlastSuccess";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == status)
            return names[i].name;
    /* the codes above -1000 are OpenCL's */
    if (status < 0 && status > -1000) {
        const char *cl = yc_cl_error_name(status);
        if (cl[0] == 'C')
            return cl;
    }
    return "unknown CLBlast status";
}

/* Records "clblast: CALL: NAME (code) for an MxNxK GEMM" and returns YC_EDEVICE. */
static int blast_fail(const char *call, int status, const yc_cl_gemm *g)
{
    return yc_error_status(YC_EDEVICE, "clblast: %s: %s (%d) for a %zux%zux%zu GEMM%s%s", call,
                           yc_clblast_status_name(status), status, g->m, g->n, g->k, g->ta ? ", A transposed" : "",
                           g->tb ? ", B transposed" : "");
}

static CLBlastTranspose trans(bool t)
{
    return t ? CLBlastTransposeYes : CLBlastTransposeNo;
}

int yc_cl_gemm_temp_size(yc_cl_ctx *c, const yc_cl_gemm *g, size_t *bytes)
{
    *bytes = 0;
    CLBlastStatusCode st =
        CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, trans(g->ta), trans(g->tb), g->m, g->n, g->k, g->a_off,
                                   g->lda, g->b_off, g->ldb, g->c_off, g->ldc, &c->queue, bytes);
    return st == CLBlastSuccess ? YC_OK : blast_fail("CLBlastSGemmTempBufferSize", st, g);
}

int yc_cl_gemm_run(yc_cl_ctx *c, const yc_cl_gemm *g, cl_mem temp)
{
    /* CLBlast's GEMM is one to four kernels: counted as one launch */
    c->count->launches++;
    CLBlastStatusCode st;
    if (!temp) {
        /* CLBlast allocates nothing when the GEMM needs no temporary buffer (and it refuses a NULL
         * one) */
        st = CLBlastSgemm(CLBlastLayoutRowMajor, trans(g->ta), trans(g->tb), g->m, g->n, g->k, g->alpha, g->a,
                          g->a_off, g->lda, g->b, g->b_off, g->ldb, g->beta, g->c, g->c_off, g->ldc, &c->queue,
                          NULL);
        return st == CLBlastSuccess ? YC_OK : blast_fail("CLBlastSgemm", st, g);
    }
    st = CLBlastSgemmWithTempBuffer(CLBlastLayoutRowMajor, trans(g->ta), trans(g->tb), g->m, g->n, g->k,
                                    g->alpha, g->a, g->a_off, g->lda, g->b, g->b_off, g->ldb, g->beta, g->c,
                                    g->c_off, g->ldc, &c->queue, NULL, temp);
    return st == CLBlastSuccess ? YC_OK : blast_fail("CLBlastSgemmWithTempBuffer", st, g);
}

void yc_cl_blast_release(void)
{
    CLBlastClearCache();
}
