/* The CPU backend's convolutions: each op goes to the algorithm that computes it fastest, Winograd
 * (winograd.c: 3x3, stride 1, padding 1, with enough channels; yc_cpu_winograd_applies) or the
 * GEMM over direct columns (conv.c) for the rest. */
#include "cpu_ops.h"

size_t yc_cpu_conv2d_workspace(const yc_op *op, int threads)
{
    return yc_cpu_winograd_applies(op) ? yc_cpu_winograd_workspace(op, threads)
                                       : yc_cpu_gemm_conv_workspace(op, threads);
}

void yc_cpu_conv2d_fwd(const yc_cpu_args *a)
{
    if (yc_cpu_winograd_applies(a->op))
        yc_cpu_winograd_fwd(a);
    else
        yc_cpu_gemm_conv_fwd(a);
}

void yc_cpu_conv2d_bwd_data(const yc_cpu_args *a)
{
    if (yc_cpu_winograd_applies(a->op))
        yc_cpu_winograd_bwd_data(a);
    else
        yc_cpu_gemm_conv_bwd_data(a);
}

void yc_cpu_conv2d_bwd_filter(const yc_cpu_args *a)
{
    if (yc_cpu_winograd_applies(a->op))
        yc_cpu_winograd_bwd_filter(a);
    else
        yc_cpu_gemm_conv_bwd_filter(a);
}
