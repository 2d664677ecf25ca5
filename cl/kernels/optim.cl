/* Optimizer steps over flat FP32 ranges of the parameter arena (SGD, Adam/AdamW, EMA) and the sum
 * of squares behind gradient clipping.  The steps are cpu/optim.c operation for operation: the
 * host computes the coefficients in double and rounds them once, each float operation of PyTorch
 * is one operation here, fma() where PyTorch fuses (see cpu/optim.c).  With correctly rounded
 * division and sqrt (the build option the host adds where the device has them) the results are
 * PyTorch's bits.  One work item per element (dimension 0, rounded up). */

/* The gradient scale: `scale`, or with use_sumsq the clipping coefficient of the sum of squares
 * s[0], min(1, max_norm / (sqrt(s) + 1e-6)) (yc_clip_scale in backend.h); *skip when s is not
 * finite. */
float grad_scale(__global const float *s, int use_sumsq, float scale, float max_norm, bool *skip)
{
    *skip = false;
    if (!use_sumsq)
        return scale;
    float v = s[0];
    if (!isfinite(v)) {
        *skip = true;
        return 0.0f;
    }
    float coef = max_norm / (sqrt(v) + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

/* g = grad*scale [+ wd*w];  buf = buf*momentum + g;  w -= lr * (nesterov ? g + momentum*buf : buf) */
__kernel void sgd(PARAM(grad), PARAM(w), PARAM(buf), ulong count, float scale, float wd, float mom,
                  float neg_lr, int use_wd, int nesterov, PARAM(sumsq), int use_sumsq,
                  float max_norm)
{
    ulong i = get_global_id(0);
    if (i >= count)
        return;
    bool skip;
    scale = grad_scale(P(sumsq), use_sumsq, scale, max_norm, &skip);
    if (skip)
        return;
    float wi = P(w)[i];
    float g = P(grad)[i] * scale;
    if (use_wd)
        g = fma(wd, wi, g);
    float b = P(buf)[i] * mom + g;
    P(buf)[i] = b;
    P(w)[i] = fma(neg_lr, nesterov ? fma(mom, b, g) : b, wi);
}

/* Adam / AdamW (cpu/optim.c): m = fma(1-b1, g, m*b1);  v = fma((1-b2)*g, g, v*b2);
 * w = w + (-lr/(1-b1^t) * m) / (sqrt(v) / sqrt(1-b2^t) + eps) */
__kernel void adam(PARAM(grad), PARAM(w), PARAM(m), PARAM(v), ulong count, float scale, float wd,
                   float w_mul, float b1, float omb1, float b2, float omb2, float bc2_sqrt, float eps,
                   float neg_step, int use_wd, int decoupled, PARAM(sumsq), int use_sumsq,
                   float max_norm)
{
    ulong i = get_global_id(0);
    if (i >= count)
        return;
    bool skip;
    scale = grad_scale(P(sumsq), use_sumsq, scale, max_norm, &skip);
    if (skip)
        return;
    float g = P(grad)[i] * scale, wi = P(w)[i];
    if (decoupled)
        wi = wi * w_mul;
    if (use_wd && !decoupled)
        g = fma(wd, wi, g);
    float mi = fma(omb1, g, P(m)[i] * b1);
    float vi = fma(omb2 * g, g, P(v)[i] * b2);
    P(m)[i] = mi;
    P(v)[i] = vi;
    P(w)[i] = wi + neg_step * mi / (sqrt(vi) / bc2_sqrt + eps);
}

/* e = e*decay + (1 - decay)*x */
__kernel void ema(PARAM(x), PARAM(e), ulong count, float decay, float one_minus_decay)
{
    ulong i = get_global_id(0);
    if (i >= count)
        return;
    P(e)[i] = P(e)[i] * decay + one_minus_decay * P(x)[i];
}

/* Sum of x^2 over `count` values of a dense tensor (FP16 storage allowed) in two stages, float-
 * float with exact squares: work-group g of sumsq_part sums the g-th of its slices of `slice`
 * values into part[g]; sumsq_total, one work-group, adds the `groups` partial sums and writes
 * s (=|+= with acc).  The order depends on the slice and local sizes only. */
__kernel void sumsq_part(TENSOR(x), ulong count, ulong slice, __global float2 *part,
                         __local float2 *red)
{
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong g = get_group_id(0), begin = g * slice, end = min(begin + slice, count);
    float2 q = (float2)(0.0f, 0.0f);
    for (ulong i = begin + lid; i < end; i += L) {
        float v = x_h ? vload_half(i, (__global const half *)(x_p + x_off))
                      : ((__global const float *)(x_p + x_off))[i];
        q = ff_add_prod(q, v, v);
    }
    q = ff_group_sum(q, red);
    if (lid == 0)
        part[g] = q;
}

__kernel void sumsq_total(__global const float2 *part, uint groups, PARAM(s), int acc,
                          __local float2 *red)
{
    uint lid = get_local_id(0), L = get_local_size(0);
    float2 q = (float2)(0.0f, 0.0f);
    for (uint g = lid; g < groups; g += L)
        q = ff_add2(q, part[g]);
    q = ff_group_sum(q, red);
    if (lid == 0)
        P(s)[0] = ff_value(acc ? ff_add(q, P(s)[0]) : q);
}
