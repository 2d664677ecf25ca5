#!/usr/bin/env bash
# The mutation check: do the tests catch errors?  Each mutation below is a one-line change (a few
# lines at most) to the loss, NMS, metrics, BatchNorm, the optimizer, the EMA, FP16 conversion,
# augmentation geometry, the memory planner or one of the backends, with the test programs that
# should catch it.  The script copies the source tree to a scratch directory, configures and
# builds it once, checks that those tests pass there unchanged, then applies each mutation in
# turn, runs its tests (make check-TESTS, or the whole `make check` with --full), reverts it and
# prints whether it was caught.  The source tree is never touched.
#
#   tests/mutate.sh [--full] [--scratch DIR] [-j N] [--timeout S] [NAME...]
#   tests/mutate.sh --list | --check
#
# NAME... runs those mutations only (shell patterns: 'bn_*').  --scratch DIR keeps the configured
# scratch tree in DIR (reused, after copying the files that changed, by the next run with the same
# DIR); without it a temporary one is removed at the end.  -j N: make's parallelism (default the
# number of CPUs).  --timeout S: limit per mutation (default 1800 s; a timeout counts as caught).
# --list prints the mutations; --check only verifies that each one's text is in the tree exactly
# once.  Per-mutation logs go to DIR/mutate-logs/.  Exit status: 0 when every mutation was caught,
# 1 when one survived or did not apply, 2 on a setup error.
#
# A developer tool, not part of make check or CI: a full run took 34 minutes on 2 cores (most of it
# test_ops, 70 s a run) and caught 57 of the 58 mutations; nms_conf_at_threshold survives because
# it is equivalent: a row whose objectness equals conf_thres has every score obj * cls at most
# conf_thres, which the score test drops anyway (test_metrics checks that such rows are out).  The
# tests that need ../shared (test_*_ref) run when it is there ($YOLOCL_SHARED_DIR, else ../shared
# beside the source tree); without it they skip, and what only they catch survives.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
full=0
scratch=
keep=0
limit=1800
mode=run
names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --full) full=1 ;;
    --scratch) scratch=${2:?--scratch needs a directory}; keep=1; shift ;;
    -j) jobs=${2:?-j needs a number}; shift ;;
    -j*) jobs=${1#-j} ;;
    --timeout) limit=${2:?--timeout needs seconds}; shift ;;
    --list) mode=list ;;
    --check) mode=check ;;
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "mutate.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1") ;;
    esac
    shift
done

# ------------------------------------------------------------------------------------------------
# The mutations: mut NAME FILE "TESTS" FROM TO.  FROM must occur in FILE exactly once; TO replaces
# it.  TESTS are the test programs (tests/NAME) that should catch it.
# ------------------------------------------------------------------------------------------------
M_NAME=() M_FILE=() M_TESTS=() M_FROM=() M_TO=()
mut() {
    M_NAME+=("$1") M_FILE+=("$2") M_TESTS+=("$3") M_FROM+=("$4") M_TO+=("$5")
}

# loss (src/nn/loss.c)
mut loss_ciou_aspect src/nn/loss.c "test_loss test_loss_ref test_golden" \
    'const double k = 4.0 / (YC_PI * YC_PI);' \
    'const double k = 2.0 / (YC_PI * YC_PI);'
mut loss_ciou_grad src/nn/loss.c "test_loss test_golden" \
    'const double g_da = g_v * 2 * k * da;' \
    'const double g_da = g_v * k * da;'
mut loss_anchor_ratio_strict src/nn/loss.c "test_loss" \
    'if (!(m < lp->anchor_t))' \
    'if (!(m <= lp->anchor_t))'
mut loss_neighbour_cell src/nn/loss.c "test_loss test_loss_ref test_golden" \
    'if (frac1(gx) < g && gx > 1.0f)' \
    'if (frac1(gx) <= g && gx > 1.0f)'
mut loss_obj_balance src/nn/loss.c "test_loss test_golden" \
    'static const float b3[3] = {4.0f, 1.0f, 0.4f};' \
    'static const float b3[3] = {4.0f, 1.0f, 0.25f};'
mut loss_tobj_clamp src/nn/loss.c "test_loss test_loss_ref test_golden" \
    'ciou > 0 ? ciou : 0.0;' \
    'ciou;'
mut loss_label_smoothing src/nn/loss.c "test_loss" \
    'const double cn = (double)(float)(0.5 * (double)lp->label_smoothing);' \
    'const double cn = (double)(float)(1.0 * (double)lp->label_smoothing);'

# NMS (src/eval/nms.c)
mut nms_iou_at_threshold src/eval/nms.c "test_metrics test_metrics_ref" \
    'return (double)ovr > iou_thres;' \
    'return (double)ovr >= iou_thres;'
mut nms_conf_at_threshold src/eval/nms.c "test_metrics test_metrics_ref" \
    'if (!(obj > conf))' \
    'if (!(obj >= conf))'
mut nms_score_at_threshold_multilabel src/eval/nms.c "test_metrics test_metrics_ref" \
    'if (!(sc > conf) || !class_wanted(p, c))' \
    'if (!(sc >= conf) || !class_wanted(p, c))'
mut nms_union src/eval/nms.c "test_metrics test_metrics_ref" \
    'float ovr = inter / (k[4] + j[4] - inter);' \
    'float ovr = inter / (k[4] + j[4]);'
mut nms_class_offset src/eval/nms.c "test_metrics test_metrics_ref" \
    'const float off = p->agnostic ? 0.0f : (float)c * YC_NMS_MAX_WH;' \
    'const float off = 0.0f;'

# metrics (src/eval/metrics.c)
mut ap_11_points src/eval/metrics.c "test_metrics test_val_ref" \
    '#define AP_NX 101' \
    '#define AP_NX 11'
mut iouv_start src/eval/metrics.c "test_metrics test_val_ref" \
    'const float start = 0.5f, end = 0.95f;' \
    'const float start = 0.55f, end = 0.95f;'
mut match_iou_strict src/eval/metrics.c "test_metrics test_val_ref" \
    'if (v >= iouv[t] && lc == dets[(size_t)d * 6 + 5]) {' \
    'if (v > iouv[t] && lc == dets[(size_t)d * 6 + 5]) {'
mut fitness_weights src/eval/metrics.c "test_metrics test_train" \
    'res += map * 0.9;' \
    'res += map * 1.0;'
mut f1_smoothing src/eval/metrics.c "test_metrics test_val_ref" \
    'const int ns = yc_smooth(mean_f1, YC_NPX, 0.1, smoothed);' \
    'const int ns = yc_smooth(mean_f1, YC_NPX, 0.05, smoothed);'

# BatchNorm (src/nn/modules.c, cpu/batchnorm.c)
mut bn_momentum src/nn/modules.c "test_golden test_cl test_golden_ref" \
    'forward_conv_bn(g, prefix, x, c2, k, s, p, 1e-3f, 0.03f, out);' \
    'forward_conv_bn(g, prefix, x, c2, k, s, p, 1e-3f, 0.01f, out);'
mut bn_eps src/nn/modules.c "test_golden test_cl" \
    'forward_conv_bn(g, prefix, x, c2, k, s, p, 1e-3f, 0.03f, out);' \
    'forward_conv_bn(g, prefix, x, c2, k, s, p, 1e-5f, 0.03f, out);'
mut bn_biased_running_var cpu/batchnorm.c "test_golden test_ops" \
    'rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * var * M / (M - 1.0));' \
    'rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * var);'
mut bn_dgamma cpu/batchnorm.c "test_golden test_ops" \
    'dgamma[c] = (float)((double)dgamma[c] + sdyx * invstd);' \
    'dgamma[c] = (float)((double)dgamma[c] + sdyx);'
mut bn_fp16_grads_zero cpu/batchnorm.c "test_golden test_cl" \
    $'    dbeta[c] = (float)((double)dbeta[c] + sdy);\n    dgamma[c] = (float)((double)dgamma[c] + sdyx * invstd);' \
    $'    dbeta[c] = a->src[1].p16 ? 0.0f : (float)((double)dbeta[c] + sdy);\n    dgamma[c] = a->src[1].p16 ? 0.0f : (float)((double)dgamma[c] + sdyx * invstd);'

# optimizer (src/train/optim.c, cpu/optim.c, cl/kernels/optim.cl)
mut sgd_no_nesterov src/train/optim.c "test_golden test_cl test_train" \
    'op.p.sgd.nesterov = 1;' \
    'op.p.sgd.nesterov = 0;'
mut sgd_no_clip src/backend/backend.h "test_golden test_train" \
    'return coef < 1.0f ? coef : 1.0f;' \
    'return 1.0f;'
mut sgd_decay_all_groups src/train/optim.c "test_golden test_cl test_train" \
    'o->wd[g] = g == YC_PG_WEIGHT ? weight_decay : 0.0;' \
    'o->wd[g] = weight_decay;'
mut warmup_bias_lr src/train/optim.c "test_golden test_cl test_train" \
    'double start = g == YC_PG_BIAS ? warmup_bias_lr : 0.0;' \
    'double start = 0.0;'
mut sgd_no_decay_cpu cpu/optim.c "test_golden test_ops" \
    '.use_wd = op->p.sgd.wd != 0.0f,' \
    '.use_wd = 0,'
mut sgd_nesterov_buffer_cpu cpu/optim.c "test_golden test_ops test_train" \
    'w[i] = fmaf(nlr, fmaf(mom, b, g), w[i]);' \
    'w[i] = fmaf(nlr, fmaf(mom, g, g), w[i]);'
mut sgd_no_nesterov_cl cl/kernels/optim.cl "test_cl test_ops" \
    'P(w)[i] = fma(neg_lr, nesterov ? fma(mom, b, g) : b, wi);' \
    'P(w)[i] = fma(neg_lr, b, wi);'

# EMA (src/train/ema.c, cpu/optim.c, cl/kernels/optim.cl)
mut ema_tau src/train/ema.c "test_golden test_cl test_train" \
    'return 0.9999 * (1.0 - exp(-(double)updates / 2000.0));' \
    'return 0.9999 * (1.0 - exp(-(double)updates / 200.0));'
mut ema_skips_bn_stats src/train/ema.c "test_golden test_cl" \
    'status = average(be, e->ema->state_buf, m->state_buf, m->state_elems, d);' \
    'status = YC_OK;'
mut ema_swapped_cpu cpu/optim.c "test_golden test_ops" \
    'e[i] = e[i] * d + one_minus_d * x[i];' \
    'e[i] = x[i] * d + one_minus_d * e[i];'
mut ema_copies_cl cl/kernels/optim.cl "test_cl test_ops" \
    'P(e)[i] = P(e)[i] * decay + one_minus_decay * P(x)[i];' \
    'P(e)[i] = P(x)[i];'

# FP16 conversion (src/core/half.c, cl/kernels/common.cl)
mut half_truncates_avx512 src/core/half.c "test_core test_ops test_golden" \
    '_mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), 0));' \
    '_mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), 3));'
mut half_ties_away_scalar src/core/half.c "test_core test_ops" \
    'if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))' \
    'if (rem >= 0x1000u)'
mut half_truncates_cl cl/kernels/common.cl "test_ops test_cl" \
    'vstore_half_rte(v, e, (__global half *)(p + off));' \
    'vstore_half_rtz(v, e, (__global half *)(p + off));'

# augmentation geometry (src/data/image.c, src/data/augment.c)
mut letterbox_top_pad src/data/image.c "test_augment test_augment_ref" \
    'info->top = (int)py_round(dh - 0.1);' \
    'info->top = (int)py_round(dh);'
mut fliplr_labels src/data/augment.c "test_augment" \
    'labels->v[5 * (size_t)i + 1] = 1 - labels->v[5 * (size_t)i + 1];' \
    'labels->v[5 * (size_t)i + 1] = labels->v[5 * (size_t)i + 1];'
mut perspective_no_clip src/data/augment.c "test_augment" \
    'x1 = fmin(fmax(x1, 0), out_w);' \
    'x1 = fmin(x1, out_w);'
mut box_candidate_aspect src/data/augment.c "test_augment" \
    'return w2 > 2 && h2 > 2 && w2 * h2 / (w1 * h1 + eps) > area_thr && ar < 100;' \
    'return w2 > 2 && h2 > 2 && w2 * h2 / (w1 * h1 + eps) > area_thr && ar < 20;'
mut mosaic_centre_range src/data/augment.c "test_augment" \
    '*yc = (int)yc_rng_range(rng, -*border, 2 * sz + *border);' \
    '*yc = (int)yc_rng_range(rng, -*border, 2 * sz);'
mut hsv_table src/data/augment.c "test_augment" \
    'tab[2] = v * (1.0f - (s * h));' \
    'tab[2] = v * (1.0f - s);'

# segmentation data: polygon masks and polygon augmentation (src/data/masks.c, augment_seg.c)
mut fill_span_left_floor src/data/masks.c "test_seg_data" \
    '#define FILL_DELTA ((1 << XY_SHIFT) - 1)' \
    '#define FILL_DELTA 0'
mut mask_downsample_threshold src/data/masks.c "test_seg_data" \
    'd[x] = r0[c] + r0[c + 1] + r1[c] + r1[c + 1] >= 2;' \
    'd[x] = r0[c] + r0[c + 1] + r1[c] + r1[c + 1] >= 3;'
mut overlap_empty_masks_last src/data/masks.c "test_seg_data" \
    's->keys[k] = area ? -(double)area : -DBL_MAX;' \
    's->keys[k] = -(double)area;'
mut resample_not_closed src/data/augment_seg.c "test_seg_data" \
    'double f1 = j + 1 == len - 1 ? p[c] : p[2 * (j + 1) + c];' \
    'double f1 = j + 1 == len - 1 ? p[2 * j + c] : p[2 * (j + 1) + c];'
mut segment2box_zero_x src/data/augment_seg.c "test_seg_data" \
    'any_nonzero_x = any_nonzero_x || x != 0;' \
    'any_nonzero_x = true;'
mut seg_xyn2xy_no_padh src/data/augment_seg.c "test_seg_data" \
    'p[2 * i + 1] = (double)(fh * (float)p[2 * i + 1] + ph);' \
    'p[2 * i + 1] = (double)(fh * (float)p[2 * i + 1]);'
mut seg_labels_not_sorted src/data/augment_seg.c "test_seg_data" \
    'const float *v = labels->v + 5 * (size_t)s->order[k];' \
    'const float *v = labels->v + 5 * (size_t)k;'
mut copy_paste_mirror_off_by_one src/data/augment_seg.c "test_seg_data" \
    'mirror[2 * q] = (double)(fw - (float)src[2 * q]);' \
    'mirror[2 * q] = (double)(fw - 1 - (float)src[2 * q]);'
mut seg_mosaic_offset src/data/augment_seg.c "test_seg_data" \
    'yc_segs_xyn2xy(segs, segs->n - s->tile_segs.n, w, h, x1a - x1b, y1a - y1b);' \
    'yc_segs_xyn2xy(segs, segs->n - s->tile_segs.n, w, h, x1a - x1b + 2, y1a - y1b);'
mut seg_masks_not_flipped_lr src/data/augment_seg.c "test_seg_data" \
    'for (int x = 0; x < s->mask_w / 2; x++) {' \
    'for (int x = 0; x < 0; x++) {'

# segmentation inference and validation (src/eval/mask_eval.c, val_seg.c, nms.c)
mut seg_interp_no_clamp src/eval/mask_eval.c "test_masks" \
    'return s < 0.0f ? 0.0f : s;' \
    'return s;'
mut seg_crop_inclusive src/eval/mask_eval.c "test_masks" \
    'if (!(row && (float)x >= b[0] && (float)x < b[2]))' \
    'if (!(row && (float)x >= b[0] && (float)x <= b[2]))'
mut seg_gt_threshold src/eval/mask_eval.c "test_masks" \
    'bin[i] = r[i] > 0.5f;' \
    'bin[i] = r[i] > 0.25f;'
mut seg_contour_every_point src/eval/mask_eval.c "test_masks" \
    'if (s != prev_s) {' \
    'if (s != prev_s || true) {'
mut seg_coef_not_scaled src/eval/nms.c "test_masks" \
    'out[(size_t)k * nm + j] = row[no - nm + j] * row[4];' \
    'out[(size_t)k * nm + j] = row[no - nm + j];'
mut seg_decode_sigmoid_coef src/eval/nms.c "test_masks" \
    'const int nsig = no - nm;' \
    'const int nsig = no;'
mut seg_gate_on_boxes src/eval/val_seg.c "test_masks" \
    'if ((st = yc_val_metrics_compute_gated(bstats, &s->mstats, &res->metrics)) ||' \
    'if ((st = yc_val_metrics_compute_gated(bstats, bstats, &res->metrics)) ||'
mut seg_val_loss_order src/eval/val_seg.c "test_masks" \
    'res->loss_seg = nbatches ? loss[1] / nbatches : 0;' \
    'res->loss_seg = nbatches ? loss[2] / nbatches : 0;'

# segmentation outputs: COCO RLE (src/eval/coco_rle.c), mask mosaics (src/data/plots.c)
mut rle_row_major src/eval/coco_rle.c "test_seg_plots" \
    'uint8_t v = mask[(size_t)y * w + x] != 0;' \
    'uint8_t v = mask[(size_t)x * h + y] != 0;'
mut rle_delta_previous src/eval/coco_rle.c "test_seg_plots" \
    'x -= (long long)counts[i - 2];' \
    'x -= (long long)counts[i - 1];'
mut resize_u8_scalar_rounding src/data/masks.c "test_seg_plots" \
    'int v = ((((h0[x] >> 4) * b0) >> 16) + (((h1[x] >> 4) * b1) >> 16) + 2) >> 2;' \
    'int v = (h0[x] * b0 + h1[x] * b1 + (1 << 21)) >> 22;'
mut seg_plot_blend_weights src/data/plots.c "test_seg_plots" \
    'p[0] = (uint8_t)(p[0] * 0.4 + col.r * 0.6);' \
    'p[0] = (uint8_t)(p[0] * 0.5 + col.r * 0.5);'
mut seg_plot_overlap_index src/data/plots.c "test_seg_plots" \
    'const float want = (float)(seen[i] + 1);' \
    'const float want = (float)seen[i];'

# memory planner (src/nn/plan.c, src/train/memplan.c)
mut plan_overlapping_blocks src/nn/plan.c "test_memplan test_model test_golden" \
    'fl->r[best].offset += size;' \
    'fl->r[best].offset += size / 2;'
mut plan_worst_fit src/nn/plan.c "test_memplan test_model" \
    'if (fl->r[i].size >= size && (best < 0 || fl->r[i].size < fl->r[best].size))' \
    'if (fl->r[i].size >= size && (best < 0 || fl->r[i].size > fl->r[best].size))'
mut memplan_ema_without_stats src/train/memplan.c "test_memplan" \
    'add(r, "EMA (parameters and statistics)", P + S, true);' \
    'add(r, "EMA (parameters and statistics)", P, true);'
mut memplan_adam_state src/train/memplan.c "test_memplan" \
    'add(r, "optimizer state", rs->optimizer == YC_OPTIM_SGD ? P : 2 * P, true);' \
    'add(r, "optimizer state", P, true);'

# CPU backend (cpu/)
mut cpu_silu_bwd_avx512 cpu/silu_avx512.c "test_ops test_golden" \
    'return _mm512_mul_ps(_mm512_mul_ps(g, s), _mm512_fmadd_ps(x, _mm512_sub_ps(one, s), one));' \
    'return _mm512_mul_ps(g, s);'
mut cpu_upsample_bwd cpu/upsample.c "test_ops test_golden" \
    's += g[b];' \
    's = g[b];'
mut demo_outline_half_pixel src/data/demo.c "test_demo" \
    'o->px[v] = s.cx + s.vx[v];' \
    'o->px[v] = s.cx + s.vx[v] + 0.5;'
mut cpu_dropout_no_scale cpu/elementwise.c "test_ops" \
    'x->p[n * x->ns + k] * scale : 0.0f;' \
    'x->p[n * x->ns + k] : 0.0f;'
mut cl_dropout_mask_per_image cl/kernels/elementwise.cl "test_ops" \
    'yc_dropout_hash(seed, n * chw + i) >= threshold' \
    'yc_dropout_hash(seed, i) >= threshold'
mut cpu_avgpool_skips_last cpu/avgpool.c "test_ops" \
    'for (size_t k = 0; k < m; k++)' \
    'for (size_t k = 0; k + 1 < m; k++)'
mut cpu_maxpool_ties_last cpu/pool.c "test_ops test_golden" \
    $'bool take = v > m || isnan(v);\n        m = take ? v : m;\n        idx = take ? ih * W' \
    $'bool take = v >= m || isnan(v);\n        m = take ? v : m;\n        idx = take ? ih * W'
mut cpu_conv_bias_grad_overwrites cpu/conv_bias.c "test_ops test_golden" \
    'db[k] = (float)((double)db[k] + s);' \
    'db[k] = (float)s;'
mut cpu_winograd_f43_output cpu/winograd_f43.c "test_ops test_golden" \
    '    y[2] = s12 + 4.0f * s34;' \
    '    y[2] = s12 + 2.0f * s34;'
mut detect_bias_grad_fp16_skipped cpu/conv.c "test_golden test_cl" \
    $'    if (db)\n        yc_cpu_conv2d_bias_grad(dy, db, pl.T);\n}' \
    $'    if (db && !x->p16)\n        yc_cpu_conv2d_bias_grad(dy, db, pl.T);\n}'

# OpenCL backend (cl/kernels/)
mut cl_bn_biased_running_var cl/kernels/batchnorm.cl "test_cl test_ops" \
    '*var_unbiased = ff_value(ff_div_count(m2, M - 1));' \
    '*var_unbiased = ff_value(ff_div_count(m2, M));'
mut cl_bn_dgamma cl/kernels/batchnorm.cl "test_cl test_ops" \
    'P(dgamma)[c] = ff_value(ff_add(ff_mul(sgx, invstd), P(dgamma)[c]));' \
    'P(dgamma)[c] = ff_value(ff_add(sgx, P(dgamma)[c]));'
mut cl_silu_grad cl/kernels/common.cl "test_cl test_ops" \
    'return dy * s * (1.0f + x * (1.0f - s));' \
    'return dy * s;'
mut cl_maxpool_ties_last cl/kernels/pool.cl "test_cl test_ops" \
    'if (v > best || isnan(v)) {' \
    'if (v >= best || isnan(v)) {'
mut cl_upsample_bwd cl/kernels/pool.cl "test_cl test_ops" \
    's += LD(dy, n, (uint)((c * H * f + h * f + r) * Wo + w * f + b));' \
    's = LD(dy, n, (uint)((c * H * f + h * f + r) * Wo + w * f + b));'
mut cl_avgpool_bwd_scale cl/kernels/pool.cl "test_ops" \
    'float g = LD(dy, n, i / (uint)HW) / (float)HW;' \
    'float g = LD(dy, n, i / (uint)HW);'

# every gradient NaN after backward (src/nn/step.c)
mut nan_gradients src/nn/step.c "test_golden test_cl test_golden_ref test_cl_ref" \
    $'    return yc_graph_backward(s->g);\n}' \
    $'    return yc_graph_backward(s->g) ? YC_ERR\n                                   : m->be->iface->buffer_memset(m->be, m->grad_buf, 0, 0xff,\n                                                                 m->param_elems * sizeof(float));\n}'

# the segmentation loss (src/nn/loss_seg.c): without overlap, a target's mask read from its
# image's slot instead of its own row's; a micro-batch's share of the mask loss counted against
# its own batch instead of the whole batch
mut seg_nooverlap_wrong_mask src/nn/loss_seg.c "test_segment" \
    'const float *me = per_target ? mk + (size_t)s->t[e] * hw : mb;' \
    'const float *me = per_target ? mk + (size_t)b * hw : mb;'
mut seg_part_share src/nn/loss_seg.c "test_segment" \
    'const double whole = part ? (double)part->batch : bs;' \
    'const double whole = bs;'

# --resume (src/train/train.c): a checkpoint of an interruption inside the first epoch (last
# completed epoch -1, a batch to continue from) taken for a finished run's
mut resume_first_epoch_refused src/train/train.c "test_seg_train" \
    'if (meta.epoch == -1 && meta.next_batch == 0) {' \
    'if (meta.epoch == -1) {'

# data-parallel training (src/train/train.c): an interruption inside an accumulation cycle saves
# rank 0's gradients alone; a resumed rank other than 0 keeps the saved sum (counted twice); the
# ranks of a machine each take all its cores
mut mpi_interrupt_grads_not_summed src/train/train.c "test_mpi" \
    'if (t->world > 1 && t->epoch_grads && (st = yc_dist_allreduce_grads(m)))' \
    'if (0 && t->world > 1 && t->epoch_grads && (st = yc_dist_allreduce_grads(m)))'
mut mpi_resumed_grads_not_zeroed src/train/train.c "test_mpi" \
    'if (resuming && t->rank > 0 && t->resume_grads && (st = yc_model_zero_grad(t->m)))' \
    'if (0 && resuming && t->rank > 0 && t->resume_grads && (st = yc_model_zero_grad(t->m)))'
mut mpi_threads_all_cores src/train/train.c "test_mpi" \
    'int cores = yc_physical_cores() / per_node;' \
    'int cores = yc_physical_cores();'
# the local rank (src/train/dist.c) taken from the world rank: right on one machine, where
# tests/test_mpi.sh runs, wrong on every host but the first (tests/test_mpi_hosts.sh, root only)
mut mpi_local_rank_is_world_rank src/train/dist.c "test_mpi_hosts" \
    '(rc = MPI_Comm_rank(local, &g.local_rank)) != MPI_SUCCESS ||' \
    '(rc = MPI_Comm_rank(MPI_COMM_WORLD, &g.local_rank)) != MPI_SUCCESS ||'
mut cls_resume_ema_updates src/train/classify_train.c "test_classify" \
    'ema->updates = meta.updates;' \
    'ema->updates = 0;'
mut cls_ddp_grad_unscaled src/nn/classify_step.c "test_mpi" \
    's->grad[i] *= s->grad_scale;' \
    's->grad[i] *= 1.0f;'
mut cls_denormalize_mean src/data/classify_aug.c "test_classify" \
    'float v = p[i] * std[c] + mean[c];' \
    'float v = p[i] * std[c] - mean[c];'
mut cls_top1_argmin src/eval/classify_eval.c "test_classify" \
    'if (l[k] > l[best])' \
    'if (l[k] < l[best])'
mut cls_resume_epoch_loss src/train/classify_train.c "test_classify" \
    'cs->tloss = meta.epoch_batches > 0 ? meta.epoch_loss[0] : 0;' \
    'cs->tloss = 0;'

# SyncBatchNorm (src/backend/backend.c, cl/cl_ops.c): the summed second moments lose the means'
# part (a wrong global variance); the backward keeps this rank's sum of dy (dx from a local sum and
# the global count); OpenCL writes the global sums back without the shift's term (caught where an
# OpenCL device is there: PoCL here)
mut sync_bn_var_without_mean src/backend/backend.c "test_mpi" \
    'v[1 + C + c] = m2[c] + n * mean[c] * mean[c];' \
    'v[1 + C + c] = m2[c] + n * mean[c];'
mut sync_bn_grads_local_sum src/backend/backend.c "test_mpi" \
    'memcpy(sg, v + 1, (size_t)C * sizeof *v);' \
    'memcpy(sg + 1, v + 2, (size_t)(C - 1) * sizeof *v);'
# gradient buckets (src/nn/graph.c, src/train/dist.c): a gradient reported final one op before
# the op that writes it; a bucket started one parameter before its last gradient is final
# (summed while a later op still writes it)
mut grads_ready_before_writer src/nn/graph.c "test_model test_mpi" \
    'last[g->nodes[i].dst[d].idx] = i - g->nforward + 1;' \
    'last[g->nodes[i].dst[d].idx] = i - g->nforward;'
mut overlap_bucket_early src/train/dist.c "test_mpi" \
    'if (--ov.left[b] == 0) {' \
    'if (--ov.left[b] == 1) {'
# the same on a device (src/train/dist.c, cl/cl_copy.c; caught where an OpenCL device is there:
# PoCL here): the sums not written back from the pinned buffers (the optimizer would step with
# the rank's own gradients); each bucket's read one float short (its last gradient summed from
# what the pinned buffer held before); the read not waiting for the ops before it (a gradient
# read before backward has written it)
mut overlap_cl_no_writeback src/train/dist.c "test_mpi" \
    '(ov.off[b + 1] - ov.off[b]) * sizeof(float));' \
    '0 * sizeof(float));'
mut overlap_cl_read_short src/train/dist.c "test_mpi" \
    '(ov.off[b + 1] - ov.off[b]) * sizeof(float), &ov.ev[b]);' \
    '(ov.off[b + 1] - ov.off[b] - 1) * sizeof(float), &ov.ev[b]);'
mut overlap_cl_read_unordered cl/cl_copy.c "test_mpi" \
    'err = clEnqueueReadBuffer(q, buf->mem, CL_FALSE, offset, size, dst, 1, &after, &ev);' \
    'err = clEnqueueReadBuffer(q, buf->mem, CL_FALSE, offset, size, dst, 0, NULL, &ev);'
mut sync_bn_cl_shift cl/cl_ops.c "test_mpi" \
    'e[1] = ff_of(all * s2[ch] + d * d / all);' \
    'e[1] = ff_of(all * s2[ch]);'

# ------------------------------------------------------------------------------------------------

selected=()
for i in "${!M_NAME[@]}"; do
    if [ ${#names[@]} -eq 0 ]; then
        selected+=("$i")
        continue
    fi
    for pat in "${names[@]}"; do
        # shellcheck disable=SC2053
        if [[ ${M_NAME[$i]} == $pat ]]; then
            selected+=("$i")
            break
        fi
    done
done
if [ ${#selected[@]} -eq 0 ]; then
    echo "mutate.sh: no mutation matches ${names[*]}" >&2
    exit 2
fi

if [ "$mode" = list ]; then
    for i in "${selected[@]}"; do
        printf '%-34s %-26s %s\n' "${M_NAME[$i]}" "${M_FILE[$i]}" "${M_TESTS[$i]}"
    done
    exit 0
fi

# occurrences FILE FROM: how many times FROM occurs in FILE
occurrences() {
    FROM="$2" perl -0777 -ne 'BEGIN { $f = $ENV{FROM} } $n = () = /\Q$f\E/g; print $n' "$1"
}

# apply FILE FROM TO: replaces the one occurrence
apply() {
    FROM="$2" TO="$3" perl -0777 -i -pe 'BEGIN { $f = $ENV{FROM}; $t = $ENV{TO} } s/\Q$f\E/$t/' "$1"
}

if [ "$mode" = check ]; then
    bad=0
    for i in "${selected[@]}"; do
        n=$(occurrences "$top/${M_FILE[$i]}" "${M_FROM[$i]}")
        if [ "$n" != 1 ]; then
            echo "${M_NAME[$i]}: found $n times in ${M_FILE[$i]}"
            bad=1
        fi
    done
    [ "$bad" = 0 ] && echo "all ${#selected[@]} mutations apply"
    exit "$bad"
fi

# ------------------------------------------------------------------------------------------------
# The scratch tree: the source tree's files (tracked and untracked, not ignored), copied where they
# differ and touched so that make rebuilds what depends on them.
# ------------------------------------------------------------------------------------------------
if [ -z "$scratch" ]; then
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-mutate.XXXXXX") || exit 2
fi
mkdir -p "$scratch" || exit 2
scratch=$(cd "$scratch" && pwd)
case "$scratch/" in
"$top"/*) echo "mutate.sh: the scratch directory must be outside the source tree" >&2; exit 2 ;;
esac
cleanup() {
    [ "$keep" = 1 ] || rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

copied=0
while IFS= read -r -d '' f; do
    [ -f "$top/$f" ] || continue
    if ! cmp -s "$top/$f" "$scratch/$f"; then
        mkdir -p "$scratch/$(dirname "$f")"
        cp -p "$top/$f" "$scratch/$f" && touch "$scratch/$f"
        copied=$((copied + 1))
    fi
done < <(git -C "$top" ls-files -z --cached --others --exclude-standard)
echo "scratch tree $scratch: $copied files copied"

# the tests look for ../shared beside the source tree, not beside the scratch copy
if [ -z "${YOLOCL_SHARED_DIR:-}" ] && [ -d "$top/../shared" ]; then
    YOLOCL_SHARED_DIR=$(cd "$top/../shared" && pwd)
fi
export YOLOCL_SHARED_DIR=${YOLOCL_SHARED_DIR:-$top/../shared}
[ -d "$YOLOCL_SHARED_DIR/ref" ] ||
    echo "note: $YOLOCL_SHARED_DIR/ref not found: the test_*_ref programs skip"

mkdir -p "$scratch/mutate-logs"
cd "$scratch" || exit 2
if [ ! -f config.status ]; then
    echo "configuring..."
    { autoreconf -fi && ./configure; } >mutate-logs/configure.log 2>&1 ||
        { echo "mutate.sh: configure failed (mutate-logs/configure.log)" >&2; exit 2; }
fi

# run_tests TESTS LOG: builds yolocl and runs the tests (all of make check with --full); status
run_tests() {
    rm -f tests/*.trs tests/fuzz/*.trs
    if [ "$full" = 1 ]; then
        timeout "$limit" make -j"$jobs" check >>"$2" 2>&1
    else
        local list=
        for t in $1; do
            if [ -f "tests/$t.sh" ]; then
                list="$list tests/$t.sh"
            else
                list="$list tests/$t"
            fi
        done
        make -j"$jobs" yolocl >>"$2" 2>&1 &&
            timeout "$limit" make -j"$jobs" check-TESTS TESTS="${list# }" >>"$2" 2>&1
    fi
}

# failed_tests: the programs whose last run failed
failed_tests() {
    grep -l '^:test-result: \(FAIL\|ERROR\)' tests/*.trs tests/fuzz/*.trs 2>/dev/null |
        sed 's|^tests/||; s|\.trs$||' | tr '\n' ' '
}

# baseline: every selected mutation's tests pass on the unchanged tree
all_tests=
for i in "${selected[@]}"; do
    all_tests="$all_tests ${M_TESTS[$i]}"
done
all_tests=$(echo "$all_tests" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
echo "building and running the unchanged tree's tests: $all_tests"
make -j"$jobs" >mutate-logs/baseline.log 2>&1 ||
    { echo "mutate.sh: the build fails (mutate-logs/baseline.log)" >&2; exit 2; }
if ! run_tests "$all_tests" mutate-logs/baseline.log; then
    echo "mutate.sh: the unchanged tree fails: $(failed_tests) (mutate-logs/baseline.log)" >&2
    exit 2
fi

caught=0 survived=0 invalid=0
rows=()
for i in "${selected[@]}"; do
    name=${M_NAME[$i]} file=${M_FILE[$i]} tests=${M_TESTS[$i]}
    log=mutate-logs/$name.log
    : >"$log"
    n=$(occurrences "$file" "${M_FROM[$i]}")
    if [ "$n" != 1 ]; then
        rows+=("$(printf '%-34s %-9s %5s  %s' "$name" "NOT APPLIED" "" "found $n times in $file")")
        invalid=$((invalid + 1))
        continue
    fi
    cp -p "$file" "$file.mutate-orig"
    apply "$file" "${M_FROM[$i]}" "${M_TO[$i]}"
    start=$SECONDS
    if ! make -j"$jobs" >>"$log" 2>&1; then
        result="BUILD FAILED" why="(see $scratch/$log)"
        invalid=$((invalid + 1))
    else
        run_tests "$tests" "$log"
        st=$?
        if [ "$st" = 124 ]; then
            result=caught why="timed out after $limit s"
            caught=$((caught + 1))
        elif [ "$st" != 0 ]; then
            result=caught why="by $(failed_tests)"
            caught=$((caught + 1))
        else
            result=SURVIVED why="$tests pass"
            survived=$((survived + 1))
        fi
    fi
    mv "$file.mutate-orig" "$file" && touch "$file"
    row=$(printf '%-34s %-9s %5ss  %s' "$name" "$result" "$((SECONDS - start))" "$why")
    rows+=("$row")
    echo "$row"
done

echo
echo "mutation                           result     time  detail"
printf '%s\n' "${rows[@]}"
total=$((caught + survived))
echo "caught $caught of $total ($((total ? 100 * caught / total : 0))%), survived $survived," \
    "not applied or not built $invalid"
[ "$survived" = 0 ] && [ "$invalid" = 0 ]
