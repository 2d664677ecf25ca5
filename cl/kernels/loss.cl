/* YOLOv5 v7.0's loss on the device, level by level: src/nn/loss.c is the reference, and the
 * assignments (build_targets) come from it, made on the host.  Per level:
 *
 *   the objectness targets tobj (batch x na x ny x nx) are filled with -1 (no assignment);
 *   loss_cells, one work item per assigned cell (the entries with the same image, anchor and cell,
 *     consecutive and in assignment order): CIoU box loss and class BCE of each entry, with their
 *     gradients added up over the cell's entries, written to the head gradient's box and class
 *     channels; the cell's objectness target, the CIoU of its last entry clamped at 0; each
 *     entry's box and class loss into ebox / ecls (at the entry's index);
 *   loss_obj, one work item per cell of every image: objectness BCE against max(tobj, 0), its
 *     gradient into the objectness channel, zeros into the box and class channels of cells without
 *     an assignment; the work-group's sum into part;
 *   loss_sums (after every level), one work-group per level: the sums of ebox, ecls and part,
 *     float-float, into sums[l] = (box, obj, cls) as (hi, lo) pairs for the host, which divides
 *     by the counts and applies the gains and the batch size as src/nn/loss.c does.
 *
 * Without a gradient tensor (validation: write_grad 0, grad is head and never written) only the
 * loss is computed.
 *
 * The gradient scales gbox = -batch * box_gain / n, gcls = batch * cls_gain / (n nc) and gobj =
 * batch * obj_gain * balance / (batch na ny nx) come from the host (for a micro-batch, n and batch
 * are its whole batch's: loss.h, yc_loss_part).  Arithmetic is float (src/nn/loss.c uses double):
 * the parts agree with the host's to float precision. */

#define FOCAL_ALPHA 0.25f
#define CIOU_EPS 1e-7f

/* the BCE of ComputeLoss with pos_weight pw and optional focal modulation (loss.c, bce_elem) */
float bce_elem(float x, float y, float pw, float gamma, float *dx)
{
    float e = exp(-fabs(x));
    float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    float sn = x >= 0.0f ? e / (1.0f + e) : 1.0f / (1.0f + e);
    float spn = log1p(e) + (x < 0.0f ? -x : 0.0f);
    float lw = (pw - 1.0f) * y + 1.0f;
    float l = (1.0f - y) * x + lw * spn;
    float d = (1.0f - y) - lw * sn;
    if (gamma > 0.0f) {
        float q = y * sn + (1.0f - y) * s;
        float at = y * FOCAL_ALPHA + (1.0f - y) * (1.0f - FOCAL_ALPHA);
        float mf = pow(q, gamma);
        float dmf = q > 0.0f ? gamma * pow(q, gamma - 1.0f) * (1.0f - 2.0f * y) * s * sn : 0.0f;
        d = at * (d * mf + l * dmf);
        l = l * at * mf;
    }
    *dx = d;
    return l;
}

/* PyTorch's minimum / maximum backward: 1 to the chosen side, 1/2 to each on a tie */
float dmin_a(float a, float b)
{
    return a < b ? 1.0f : (a == b ? 0.5f : 0.0f);
}

float dmax_a(float a, float b)
{
    return a > b ? 1.0f : (a == b ? 0.5f : 0.0f);
}

/* CIoU of prediction p and target t (cx, cy, w, h) and its gradient with respect to p
 * (loss.c, yc_loss_ciou) */
float ciou_grad(const float *p, const float *t, float *dp)
{
    float x1 = p[0], y1 = p[1], w1 = p[2], h1 = p[3];
    float x2 = t[0], y2 = t[1], w2 = t[2], h2 = t[3];
    float eps = CIOU_EPS;
    float w1_ = w1 / 2, h1_ = h1 / 2, w2_ = w2 / 2, h2_ = h2 / 2;
    float b1x1 = x1 - w1_, b1x2 = x1 + w1_, b1y1 = y1 - h1_, b1y2 = y1 + h1_;
    float b2x1 = x2 - w2_, b2x2 = x2 + w2_, b2y1 = y2 - h2_, b2y2 = y2 + h2_;
    float iwr = fmin(b1x2, b2x2) - fmax(b1x1, b2x1);
    float ihr = fmin(b1y2, b2y2) - fmax(b1y1, b2y1);
    float iw = iwr > 0.0f ? iwr : 0.0f, ih = ihr > 0.0f ? ihr : 0.0f;
    float inter = iw * ih;
    float uni = w1 * h1 + w2 * h2 - inter + eps;
    float iou = inter / uni;
    float cw = fmax(b1x2, b2x2) - fmin(b1x1, b2x1);
    float ch = fmax(b1y2, b2y2) - fmin(b1y1, b2y1);
    float c2 = cw * cw + ch * ch + eps;
    float dx = b2x1 + b2x2 - b1x1 - b1x2, dy = b2y1 + b2y2 - b1y1 - b1y2;
    float rho2 = (dx * dx + dy * dy) / 4;
    float k = 4.0f / (M_PI_F * M_PI_F);
    float da = atan(w2 / h2) - atan(w1 / h1);
    float v = k * da * da;
    float alpha = v / (v - iou + (1 + eps));
    float ciou = iou - (rho2 / c2 + v * alpha);

    float g_rho2 = -1.0f / c2, g_c2 = rho2 / (c2 * c2), g_v = -alpha;
    float g_inter = 1.0f / uni;
    float g_uni = -inter / (uni * uni);
    float g_w1 = g_uni * h1, g_h1 = g_uni * w1;
    g_inter -= g_uni;
    float g_iwr = iwr >= 0.0f ? g_inter * ih : 0.0f;
    float g_ihr = ihr >= 0.0f ? g_inter * iw : 0.0f;
    float g_b1x1 = 0, g_b1x2 = 0, g_b1y1 = 0, g_b1y2 = 0;
    g_b1x2 += g_iwr * dmin_a(b1x2, b2x2);
    g_b1x1 -= g_iwr * dmax_a(b1x1, b2x1);
    g_b1y2 += g_ihr * dmin_a(b1y2, b2y2);
    g_b1y1 -= g_ihr * dmax_a(b1y1, b2y1);
    float g_cw = g_c2 * 2 * cw, g_ch = g_c2 * 2 * ch;
    g_b1x2 += g_cw * dmax_a(b1x2, b2x2);
    g_b1x1 -= g_cw * dmin_a(b1x1, b2x1);
    g_b1y2 += g_ch * dmax_a(b1y2, b2y2);
    g_b1y1 -= g_ch * dmin_a(b1y1, b2y1);
    g_b1x1 -= g_rho2 * dx / 2;
    g_b1x2 -= g_rho2 * dx / 2;
    g_b1y1 -= g_rho2 * dy / 2;
    g_b1y2 -= g_rho2 * dy / 2;
    float g_da = g_v * 2 * k * da;
    float r2 = w1 * w1 + h1 * h1;
    g_w1 -= g_da * h1 / r2;
    g_h1 += g_da * w1 / r2;
    dp[0] = g_b1x1 + g_b1x2;
    dp[1] = g_b1y1 + g_b1y2;
    dp[2] = g_w1 + (g_b1x2 - g_b1x1) / 2;
    dp[3] = g_h1 + (g_b1y2 - g_b1y1) / 2;
    return ciou;
}

/* sigmoid(x) and 1 - sigmoid(x) */
void sigmoid2(float x, float *s, float *sn)
{
    float e = exp(-fabs(x));
    *s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    *sn = x >= 0.0f ? e / (1.0f + e) : 1.0f / (1.0f + e);
}

/* Entry e (of every level, level after level): ent_i[5e..5e+4] = image, anchor, cell row, cell
 * column, class; ent_f[6e..6e+5] = tbox (4) and the anchor's w, h in grid units.  This level's
 * cell g holds entries cell_first[cell_off + g] to cell_first[cell_off + g + 1] - 1. */
__kernel void loss_cells(TENSOR(head), TENSOR(grad), __global const int *ent_i,
                         __global const float *ent_f, __global const int *cell_first,
                         uint cell_off, uint ncells,
                         __global float *tobj, __global float *ebox, __global float *ecls, int na,
                         int nc, int ny, int nx, float gbox, float gcls, float cp, float cn,
                         float cls_pw, float gamma, int write_grad)
{
    uint g = get_global_id(0);
    if (g >= ncells)
        return;
    const uint plane = (uint)(ny * nx), no = (uint)nc + 5;
    const int first = cell_first[cell_off + g], last = cell_first[cell_off + g + 1];
    const int b = ent_i[5 * first], a = ent_i[5 * first + 1];
    const uint cell = (uint)(ent_i[5 * first + 2] * nx + ent_i[5 * first + 3]);
    const uint base = (uint)a * no * plane + cell;
    float sg[4], sgn[4];
    for (int k = 0; k < 4; k++)
        sigmoid2(LD(head, b, base + (uint)k * plane), &sg[k], &sgn[k]);
    float gsum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float t = 0.0f;
    for (int e = first; e < last; e++) {
        __global const float *f = ent_f + 6 * e;
        float aw = f[4], ah = f[5];
        float pb[4] = {2 * sg[0] - 0.5f, 2 * sg[1] - 0.5f, 4 * sg[2] * sg[2] * aw,
                       4 * sg[3] * sg[3] * ah};
        float tb[4] = {f[0], f[1], f[2], f[3]};
        float dpb[4];
        float ciou = ciou_grad(pb, tb, dpb);
        ebox[e] = 1.0f - ciou;
        t = ciou > 0.0f ? ciou : 0.0f;
        float dt[4] = {2 * sg[0] * sgn[0], 2 * sg[1] * sgn[1], 8 * sg[2] * sg[2] * sgn[2] * aw,
                       8 * sg[3] * sg[3] * sgn[3] * ah};
        for (int k = 0; k < 4; k++)
            gsum[k] += gbox * dpb[k] * dt[k];
    }
    for (int k = 0; k < 4 && write_grad; k++)
        ST(grad, b, base + (uint)k * plane, gsum[k]);
    /* classes: each entry's BCE over the classes, gradients added per class in entry order */
    for (int c = 0; c < nc; c++) {
        float x = LD(head, b, base + (uint)(5 + c) * plane), gc = 0.0f;
        if (nc > 1)
            for (int e = first; e < last; e++) {
                float d;
                float l = bce_elem(x, c == ent_i[5 * e + 4] ? cp : cn, cls_pw, gamma, &d);
                ecls[e] = (c == 0 ? 0.0f : ecls[e]) + l;
                gc += gcls * d;
            }
        if (write_grad)
            ST(grad, b, base + (uint)(5 + c) * plane, gc);
    }
    if (nc == 1)
        for (int e = first; e < last; e++)
            ecls[e] = 0.0f;
    tobj[((uint)b * (uint)na + (uint)a) * plane + cell] = t;
}

/* Objectness over every cell of `batch` images; part[part_off + group] = the work-group's
 * float-float sum. */
__kernel void loss_obj(TENSOR(head), TENSOR(grad), __global const float *tobj, int batch, int na,
                       int nc, int ny, int nx, float gobj, float obj_pw, float gamma,
                       int write_grad, __global float2 *part, uint part_off,
                       __local float2 *red)
{
    const uint plane = (uint)(ny * nx), no = (uint)nc + 5;
    const uint total = (uint)batch * (uint)na * plane;
    uint i = get_global_id(0);
    float2 q = (float2)(0.0f, 0.0f);
    if (i < total) {
        uint b = i / ((uint)na * plane), r = i - b * (uint)na * plane;
        uint a = r / plane, cell = r - a * plane;
        float t = tobj[i];
        uint base = a * no * plane + cell;
        float d;
        float l = bce_elem(LD(head, b, base + 4 * plane), t > 0.0f ? t : 0.0f, obj_pw, gamma, &d);
        q.x = l;
        if (write_grad)
            ST(grad, b, base + 4 * plane, gobj * d);
        if (t < 0.0f && write_grad)
            for (uint k = 0; k < no; k++)
                if (k != 4)
                    ST(grad, b, base + k * plane, 0.0f);
    }
    q = ff_group_sum(q, red);
    if (get_local_id(0) == 0)
        part[part_off + get_group_id(0)] = q;
}

/* Work-group l: sums of ebox[eoff[l] .. + n[l]), ecls (the same range) and part[poff[l] ..
 * + np[l]) into sums[3 l + 0..2] = box, obj, cls. */
__kernel void loss_sums(__global const float *ebox, __global const float *ecls,
                        __global const float2 *part, __global const int *ranges, PARAM(out),
                        __local float2 *red)
{
    uint l = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    int eoff = ranges[4 * l], n = ranges[4 * l + 1], poff = ranges[4 * l + 2], np = ranges[4 * l + 3];
    float2 sb = (float2)(0.0f, 0.0f), sc = sb, so = sb;
    for (int i = (int)lid; i < n; i += (int)L) {
        sb = ff_add(sb, ebox[eoff + i]);
        sc = ff_add(sc, ecls[eoff + i]);
    }
    for (int i = (int)lid; i < np; i += (int)L)
        so = ff_add2(so, part[poff + i]);
    sb = ff_group_sum(sb, red);
    so = ff_group_sum(so, red);
    sc = ff_group_sum(sc, red);
    __global float2 *sums = (__global float2 *)(out_p + out_off);
    if (lid == 0) {
        sums[3 * l] = sb;
        sums[3 * l + 1] = so;
        sums[3 * l + 2] = sc;
    }
}
