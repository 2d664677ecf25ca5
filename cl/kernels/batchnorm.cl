/* Batch normalisation: training forward (optionally followed by SiLU, YC_OP_BN_SILU_TRAIN), the
 * fused forward's output from saved statistics (YC_OP_BN_SILU_APPLY), evaluation forward,
 * backward (optionally through SiLU first, YC_OP_BN_SILU_BWD).
 *
 * Training and backward run one work-group per channel (local size a power of two): each work
 * item walks its share of the channel's N*H*W values, the sums are float-float (the CPU backend
 * sums in double) and the work-group adds them in a fixed tree, so results do not depend on
 * scheduling.  Two passes for the statistics (the mean as a float-float, then the squared
 * deviations from it), then the normalisation.  No workspace.
 *
 * Normalising uses the statistics as saved (FP32 mean and invstd: what the backward pass reads),
 * as the CPU backend does: z = (x - mean) * (gamma * invstd) + beta evaluated in float-float and
 * rounded once (the CPU evaluates it exactly in double and rounds once: the same bits but for
 * rare near-ties).  bn_apply() is that formula for every kernel here, so the fused backward and
 * bn_silu_apply recompute the bits the training forward produced. */

/* gamma * invstd as a float-float (exact) */
float2 bn_scale(float gamma, float invstd)
{
    float s = gamma * invstd;
    return (float2)(s, fma(gamma, invstd, -s));
}

/* (x - mean) * scale + beta, rounded once (scale from bn_scale) */
float bn_apply(float x, float mean, float2 scale, float beta)
{
    float2 d = ff_sub_exact(x, mean);
    float p = d.x * scale.x;
    float pe = fma(d.x, scale.x, -p) + (d.x * scale.y + d.y * scale.x);
    return ff_value(ff_add((float2)(p, pe), beta));
}

/* Moves (n, j) on by `step` values of a channel with `hw` values per image. */
#define BN_NEXT(n, j, step, hw)                                                                            \
    do {                                                                                                   \
        (j) += (step);                                                                                     \
        while ((j) >= (hw)) {                                                                              \
            (j) -= (hw);                                                                                   \
            (n)++;                                                                                         \
        }                                                                                                  \
    } while (0)

/* One work-group per channel c: stats = [mean; invstd], running estimates updated with momentum
 * (unbiased variance), y = bn_apply(x) or silu of it.  omm = 1 - momentum (rounded once on the
 * host). */
__kernel void bn_train(TENSOR(x), TENSOR(y), PARAM(gamma), PARAM(beta), PARAM(stats), PARAM(rmean),
                       PARAM(rvar), uint N, uint C, uint HW, float eps, float mom, float omm, int silu,
                       __local float2 *red)
{
    uint c = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    uint M = N * HW, base = c * HW;
    float2 s = (float2)(0.0f, 0.0f);
    for (uint n = lid / HW, j = lid % HW; n < N;) {
        s = ff_add(s, LD(x, n, base + j));
        BN_NEXT(n, j, L, HW);
    }
    float2 mean2 = ff_div_count(ff_group_sum(s, red), M);
    float2 q = (float2)(0.0f, 0.0f);
    for (uint n = lid / HW, j = lid % HW; n < N;) {
        float2 d = ff_sub_exact(LD(x, n, base + j), mean2.x);
        float dv = d.x + (d.y - mean2.y);
        q = ff_add_prod(q, dv, dv);
        BN_NEXT(n, j, L, HW);
    }
    float2 ss = ff_group_sum(q, red);
    float mean = ff_value(mean2);
    float invstd = 1.0f / sqrt(ff_value(ff_div_count(ss, M)) + eps);
    if (lid == 0) {
        float var_unbiased = ff_value(ff_div_count(ss, M - 1));
        P(stats)[c] = mean;
        P(stats)[C + c] = invstd;
        P(rmean)[c] = fma(mom, mean, omm * P(rmean)[c]);
        P(rvar)[c] = fma(mom, var_unbiased, omm * P(rvar)[c]);
    }
    float2 scale = bn_scale(P(gamma)[c], invstd);
    float b = P(beta)[c];
    for (uint n = lid / HW, j = lid % HW; n < N;) {
        float z = bn_apply(LD(x, n, base + j), mean, scale, b);
        ST(y, n, base + j, silu ? yc_silu(z) : z);
        BN_NEXT(n, j, L, HW);
    }
}

/* a = silu(bn_apply(x)) with the saved stats = [mean; invstd]: the `a` of bn_train with silu set,
 * elementwise (dimension 0 over the image's C*HW values, dimension 1 over images) */
__kernel void bn_silu_apply(TENSOR(x), TENSOR(a), PARAM(gamma), PARAM(beta), PARAM(stats), uint C, uint HW)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= C * HW)
        return;
    uint c = i / HW;
    float2 scale = bn_scale(P(gamma)[c], P(stats)[C + c]);
    ST(a, n, i, yc_silu(bn_apply(LD(x, n, i), P(stats)[c], scale, P(beta)[c])));
}

/* y = (x - running_mean) * (gamma / sqrt(running_var + eps)) + beta, then y = silu(y) when `silu`,
 * elementwise (dimension 0 over the image's C*HW values, dimension 1 over images) */
__kernel void bn_eval(TENSOR(x), TENSOR(y), PARAM(gamma), PARAM(beta), PARAM(rmean), PARAM(rvar), uint C,
                      uint HW, float eps, uint silu)
{
    uint i = get_global_id(0), n = get_global_id(1);
    if (i >= C * HW)
        return;
    uint c = i / HW;
    float invstd = 1.0f / sqrt(P(rvar)[c] + eps);
    float z = bn_apply(LD(x, n, i), P(rmean)[c], bn_scale(P(gamma)[c], invstd), P(beta)[c]);
    ST(y, n, i, silu ? yc_silu(z) : z);
}

/* One work-group per channel.  With g the incoming gradient (silu: the SiLU gradient of da at
 * z = bn_apply(x)) and xc = x - mean:
 *   dbeta += sum g;  dgamma += invstd * sum g*xc;
 *   dx (=|+=) gamma*invstd * (g - sum(g)/M - xc * invstd^2 * sum(g*xc)/M) */
__kernel void bn_bwd(TENSOR(dy), TENSOR(x), PARAM(gamma), PARAM(beta), PARAM(stats), TENSOR(dx),
                     PARAM(dgamma), PARAM(dbeta), uint N, uint C, uint HW, int acc, int silu,
                     __local float2 *red)
{
    uint c = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    uint M = N * HW, base = c * HW;
    float mean = P(stats)[c], invstd = P(stats)[C + c];
    float2 scale = bn_scale(P(gamma)[c], invstd);
    float b = silu ? P(beta)[c] : 0.0f;
    float2 sg = (float2)(0.0f, 0.0f), sgx = (float2)(0.0f, 0.0f);
    for (uint n = lid / HW, j = lid % HW; n < N;) {
        float xv = LD(x, n, base + j), g = LD(dy, n, base + j);
        if (silu)
            g = yc_silu_grad(g, bn_apply(xv, mean, scale, b));
        float2 xc = ff_sub_exact(xv, mean);
        sg = ff_add(sg, g);
        sgx = ff_add_prod(sgx, g, xc.x);
        sgx.y = sgx.y + g * xc.y;
        BN_NEXT(n, j, L, HW);
    }
    sg = ff_group_sum(sg, red);
    sgx = ff_group_sum(sgx, red);
    if (lid == 0) {
        P(dbeta)[c] = ff_value(ff_add(sg, P(dbeta)[c]));
        P(dgamma)[c] = ff_value(ff_add(ff_mul(sgx, invstd), P(dgamma)[c]));
    }
    float k = scale.x, mg = ff_value(ff_div_count(sg, M));
    float coef = ff_value(ff_div_count(sgx, M)) * invstd * invstd;
    for (uint n = lid / HW, j = lid % HW; n < N;) {
        float xv = LD(x, n, base + j), g = LD(dy, n, base + j);
        if (silu)
            g = yc_silu_grad(g, bn_apply(xv, mean, scale, b));
        float v = k * ((g - mg) - (xv - mean) * coef);
        ST(dx, n, base + j, acc ? LD(dx, n, base + j) + v : v);
        BN_NEXT(n, j, L, HW);
    }
}
