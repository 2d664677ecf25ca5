/* Batch normalisation: training forward (optionally followed by SiLU, YC_OP_BN_SILU_TRAIN), the
 * fused forward's output from saved statistics (YC_OP_BN_SILU_APPLY), evaluation forward,
 * backward (optionally through SiLU first, YC_OP_BN_SILU_BWD).
 *
 * Training and backward run in two launches over a grid of chunks x channels (chunks chosen by
 * the host so that the device has enough work-groups): the first sums each chunk, the second
 * adds the chunks' sums in chunk order (every work-group of a channel the same way, so all get
 * the same bits) and normalises its chunk.  The sums are float-float (the CPU backend sums in
 * double) and each work-group adds its values in a fixed tree, so results do not depend on
 * scheduling.  The statistics are one pass over the values shifted by the channel's first value,
 * which keeps the variance free of cancellation.  The chunks' sums live in the backend's
 * reduction scratch.
 *
 * SyncBatchNorm (the host's op.p.bn.sync, cl_ops.c): after the first launch the host reads the
 * chunks' sums, sums them over the processes and writes the global sums behind the chunks'
 * (2 float2 per channel at part[C*chunks*2 + 2c]: sum (x - k) and sum (x - k)^2 with this
 * process's shift k, which bn_part leaves there, or sum g and sum g*xc); the second launch, with
 * `sync` set, reads those and divides by the total count `Mstat`, while dgamma and dbeta still
 * get this process's chunks' sums.
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

/* Work-group (g, c) of a grid of `chunks` x C work-groups owns values [g*len, (g+1)*len) of
 * channel c's N*HW (image-major): its first image and offset, and its end. */
#define BN_CHUNK(g, len, M, HW, n0, j0, count)                                                            \
    uint count = min((uint)(len), (M) - min((M), (g) * (uint)(len)));                                     \
    uint n0 = (g) * (uint)(len) / (HW), j0 = (g) * (uint)(len) % (HW)

/* Training statistics, first of two launches: work-group (g, c) sums its chunk of channel c,
 * shifted by the channel's first value k (so that the one-pass variance loses nothing to
 * cancellation), as float-floats: part[(c*chunks + g)*2 + 0] = sum (x - k), [.. + 1] =
 * sum (x - k)^2. */
__kernel void bn_part(TENSOR(x), __global float2 *part, uint N, uint HW, uint len,
                      __local float2 *red)
{
    uint g = get_group_id(0), c = get_group_id(1), chunks = get_num_groups(0);
    uint lid = get_local_id(0), L = get_local_size(0), M = N * HW, base = c * HW;
    BN_CHUNK(g, len, M, HW, n0, j0, count);
    float k = LD(x, 0, base);
    float2 s1 = (float2)(0.0f, 0.0f), s2 = s1;
    uint n = n0, j = j0;
    BN_NEXT(n, j, lid, HW);
    for (uint i = lid; i < count; i += L) {
        float2 d = ff_sub_exact(LD(x, n, base + j), k);
        s1 = ff_add2(s1, d);
        s2 = ff_add_prod(s2, d.x, d.x);
        s2.y = s2.y + 2.0f * d.x * d.y;
        BN_NEXT(n, j, L, HW);
    }
    s1 = ff_group_sum(s1, red);
    s2 = ff_group_sum(s2, red);
    if (lid == 0) {
        part[(c * chunks + g) * 2] = s1;
        part[(c * chunks + g) * 2 + 1] = s2;
        if (g == 0) /* the shift, for SyncBatchNorm's host */
            part[get_num_groups(1) * chunks * 2 + 2 * c] = (float2)(k, 0.0f);
    }
}

/* The channel's statistics from its chunks' sums, in chunk order (every work-group of the
 * channel computes the same bits), or from the global sums behind them (sync): mean, biased and
 * unbiased variance over M values. */
void bn_finish(__global const float2 *part, uint c, uint chunks, uint M, float k, int sync,
               float *mean, float *var, float *var_unbiased)
{
    float2 s1 = (float2)(0.0f, 0.0f), s2 = s1;
    if (sync) {
        uint e = get_num_groups(1) * chunks * 2 + 2 * c;
        s1 = part[e];
        s2 = part[e + 1];
    }
    for (uint g = 0; g < chunks && !sync; g++) {
        s1 = ff_add2(s1, part[(c * chunks + g) * 2]);
        s2 = ff_add2(s2, part[(c * chunks + g) * 2 + 1]);
    }
    /* m2 = s2 - s1^2 / M: the squared deviations from the mean */
    float2 m1 = ff_div_count(s1, M);
    float2 sq = ff_mul(s1, m1.x);
    sq.y = sq.y + s1.x * m1.y;
    float2 m2 = ff_add2(s2, (float2)(-sq.x, -sq.y));
    *mean = ff_value(ff_add(m1, k));
    *var = ff_value(ff_div_count(m2, M));
    *var_unbiased = ff_value(ff_div_count(m2, M - 1));
}

/* Training forward, second launch (the same grid as bn_part): stats = [mean; invstd] and the
 * running estimates with momentum (unbiased variance) written by the channel's first
 * work-group, y = bn_apply(x) or silu of it over the work-group's chunk.  omm = 1 - momentum
 * (rounded once on the host).  sync: the statistics of the global sums over Mstat values (see the
 * head). */
__kernel void bn_train(TENSOR(x), TENSOR(y), PARAM(gamma), PARAM(beta), PARAM(stats), PARAM(rmean),
                       PARAM(rvar), __global const float2 *part, uint N, uint C, uint HW,
                       uint len, float eps, float mom, float omm, int silu, int sync, uint Mstat)
{
    uint g = get_group_id(0), c = get_group_id(1), chunks = get_num_groups(0);
    uint lid = get_local_id(0), L = get_local_size(0), M = N * HW, base = c * HW;
    float mean, var, var_unbiased;
    bn_finish(part, c, chunks, Mstat, LD(x, 0, base), sync, &mean, &var, &var_unbiased);
    float invstd = 1.0f / sqrt(var + eps);
    if (g == 0 && lid == 0) {
        P(stats)[c] = mean;
        P(stats)[C + c] = invstd;
        P(rmean)[c] = fma(mom, mean, omm * P(rmean)[c]);
        P(rvar)[c] = fma(mom, var_unbiased, omm * P(rvar)[c]);
    }
    float2 scale = bn_scale(P(gamma)[c], invstd);
    float b = P(beta)[c];
    BN_CHUNK(g, len, M, HW, n0, j0, count);
    uint n = n0, j = j0;
    BN_NEXT(n, j, lid, HW);
    for (uint i = lid; i < count; i += L) {
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

/* Backward, first of two launches (the same chunks as the forward): with g the incoming
 * gradient (silu: the SiLU gradient of da at z = bn_apply(x)) and xc = x - mean, work-group
 * (g, c) sums g and g*xc over its chunk: part[(c*chunks + g)*2 + 0, 1]. */
__kernel void bn_bwd_part(TENSOR(dy), TENSOR(x), PARAM(gamma), PARAM(beta), PARAM(stats),
                          __global float2 *part, uint N, uint C, uint HW, uint len, int silu,
                          __local float2 *red)
{
    uint g = get_group_id(0), c = get_group_id(1), chunks = get_num_groups(0);
    uint lid = get_local_id(0), L = get_local_size(0), M = N * HW, base = c * HW;
    float mean = P(stats)[c], invstd = P(stats)[C + c];
    float2 scale = bn_scale(P(gamma)[c], invstd);
    float b = silu ? P(beta)[c] : 0.0f;
    float2 sg = (float2)(0.0f, 0.0f), sgx = sg;
    BN_CHUNK(g, len, M, HW, n0, j0, count);
    uint n = n0, j = j0;
    BN_NEXT(n, j, lid, HW);
    for (uint i = lid; i < count; i += L) {
        float xv = LD(x, n, base + j), gv = LD(dy, n, base + j);
        if (silu)
            gv = yc_silu_grad(gv, bn_apply(xv, mean, scale, b));
        float2 xc = ff_sub_exact(xv, mean);
        sg = ff_add(sg, gv);
        sgx = ff_add_prod(sgx, gv, xc.x);
        sgx.y = sgx.y + gv * xc.y;
        BN_NEXT(n, j, L, HW);
    }
    sg = ff_group_sum(sg, red);
    sgx = ff_group_sum(sgx, red);
    if (lid == 0) {
        part[(c * chunks + g) * 2] = sg;
        part[(c * chunks + g) * 2 + 1] = sgx;
    }
}

/* Backward, second launch: the chunks' sums added in chunk order, then
 *   dbeta += sum g;  dgamma += invstd * sum g*xc  (the channel's first work-group)
 *   dx (=|+=) gamma*invstd * (g - sum(g)/M - xc * invstd^2 * sum(g*xc)/M)  (every chunk)
 * sync: dx from the global sums and their count Mstat instead (see the head). */
__kernel void bn_bwd(TENSOR(dy), TENSOR(x), PARAM(gamma), PARAM(beta), PARAM(stats), TENSOR(dx),
                     PARAM(dgamma), PARAM(dbeta), __global const float2 *part, uint N, uint C,
                     uint HW, uint len, int acc, int silu, int sync, uint Mstat)
{
    uint g = get_group_id(0), c = get_group_id(1), chunks = get_num_groups(0);
    uint lid = get_local_id(0), L = get_local_size(0), M = N * HW, base = c * HW;
    float mean = P(stats)[c], invstd = P(stats)[C + c];
    float2 scale = bn_scale(P(gamma)[c], invstd);
    float b = silu ? P(beta)[c] : 0.0f;
    float2 sg = (float2)(0.0f, 0.0f), sgx = sg;
    for (uint h = 0; h < chunks; h++) {
        sg = ff_add2(sg, part[(c * chunks + h) * 2]);
        sgx = ff_add2(sgx, part[(c * chunks + h) * 2 + 1]);
    }
    if (g == 0 && lid == 0) {
        P(dbeta)[c] = ff_value(ff_add(sg, P(dbeta)[c]));
        P(dgamma)[c] = ff_value(ff_add(ff_mul(sgx, invstd), P(dgamma)[c]));
    }
    if (sync) {
        sg = part[C * chunks * 2 + 2 * c];
        sgx = part[C * chunks * 2 + 2 * c + 1];
    }
    float k = scale.x, mg = ff_value(ff_div_count(sg, Mstat));
    float coef = ff_value(ff_div_count(sgx, Mstat)) * invstd * invstd;
    BN_CHUNK(g, len, M, HW, n0, j0, count);
    uint n = n0, j = j0;
    BN_NEXT(n, j, lid, HW);
    for (uint i = lid; i < count; i += L) {
        float xv = LD(x, n, base + j), gv = LD(dy, n, base + j);
        if (silu)
            gv = yc_silu_grad(gv, bn_apply(xv, mean, scale, b));
        float v = k * ((gv - mg) - (xv - mean) * coef);
        ST(dx, n, base + j, acc ? LD(dx, n, base + j) + v : v);
        BN_NEXT(n, j, L, HW);
    }
}
