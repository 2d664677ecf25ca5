/* The golden training step (see golden.h). */
#include "golden.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "ema.h"
#include "hyp.h"
#include "log.h"
#include "optim.h"
#include "yctest.h"

/* YOLOv5's nominal batch (train.py's nbs), for the weight decay's scaling */
#define NBS 64

void yc_tiny_files_get(yc_tiny_files *t)
{
    const char *d = getenv("YOLOCL_TEST_DATA");
    if (!d || !d[0])
        d = "tests/data";
    snprintf(t->cfg, sizeof t->cfg, "%s/tiny/yolov5n-tiny.yaml", d);
    snprintf(t->weights, sizeof t->weights, "%s/tiny/weights.safetensors", d);
    snprintf(t->batch, sizeof t->batch, "%s/tiny/batch.safetensors", d);
    snprintf(t->expected, sizeof t->expected, "%s/tiny/expected.safetensors", d);
    snprintf(t->grads, sizeof t->grads, "%s/tiny/grads.safetensors", d);
    snprintf(t->update, sizeof t->update, "%s/tiny/update.safetensors", d);
}

float *yc_golden_read(yc_st_file *f, const char *name, size_t *numel)
{
    const yc_st_tensor *t = yc_st_find(f, name);
    if (!t)
        return NULL;
    float *v = malloc((t->numel ? t->numel : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(yc_st_read_f32(f, t, v, t->numel) == YC_OK, "%s", yc_last_error());
    if (numel)
        *numel = t->numel;
    return v;
}

static yc_st_file *open_st(const char *path)
{
    yc_st_file *f = NULL;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    return f;
}

void yc_golden_step(yc_golden *gd, const char *device, const char *cfg_path, int nc,
                    const char *weights, const char *batch, const char *images_name,
                    const yc_graph_options *go)
{
    memset(gd, 0, sizeof *gd);
    yc_model_cfg *cfg = NULL;
    ck_assert_msg(yc_model_cfg_load(&cfg, cfg_path, nc) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_new(&gd->m, cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_device_open(device, 0, false, &gd->be) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_alloc(gd->m, gd->be) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_load(gd->m, weights) == YC_OK, "%s", yc_last_error());
    yc_st_file *f = open_st(batch);
    const yc_st_tensor *im = yc_st_find(f, images_name);
    ck_assert_ptr_nonnull(im);
    int b = (int)im->shape[0], h = (int)im->shape[2], w = (int)im->shape[3];
    size_t nt6 = 0;
    gd->images = yc_golden_read(f, images_name, NULL);
    gd->targets = yc_golden_read(f, "targets", &nt6);
    ck_assert_ptr_nonnull(gd->targets);
    gd->batch = b;
    gd->nt = (int)(nt6 / 6);
    yc_st_close(f);
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loss_params lp;
    yc_step_loss_params(gd->m, &hyp, h > w ? h : w, 0.0f, &lp);
    int st = go ? yc_step_new_in(&gd->step, gd->m, b, h, w, &lp, go, NULL)
                : yc_step_new(&gd->step, gd->m, b, h, w, &lp);
    ck_assert_msg(st == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_step_keep_heads(gd->step), YC_OK);
    ck_assert_msg(yc_step_run(gd->step, gd->images, gd->targets, gd->nt, &gd->res) == YC_OK, "%s",
                  yc_last_error());
}

void yc_golden_free(yc_golden *gd)
{
    yc_step_free(gd->step);
    yc_model_free(gd->m);
    yc_backend_free(gd->be);
    free(gd->images);
    free(gd->targets);
    memset(gd, 0, sizeof *gd);
}

float *yc_golden_grads(const yc_golden *gd)
{
    const yc_model *m = gd->m;
    float *g = malloc(m->param_elems * sizeof *g);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(m->be->iface->buffer_read(m->be, m->grad_buf, 0, g,
                                               m->param_elems * sizeof *g),
                     YC_OK);
    return g;
}

void yc_golden_check_heads(const yc_golden *gd, const char *path, const char *const *names,
                           double tol)
{
    yc_st_file *f = open_st(path);
    int na = gd->m->na, no = gd->m->no;
    for (int l = 0; l < gd->m->nl; l++) {
        const yc_tensor *t = yc_graph_head(gd->step->g, l);
        size_t plane = (size_t)t->h * t->w, n = yc_tensor_elems(t), nref = 0;
        float *ref = yc_golden_read(f, names[l], &nref);
        ck_assert_msg(ref != NULL, "%s: no tensor %s", path, names[l]);
        ck_assert_uint_eq(nref, n);
        float *perm = malloc(n * sizeof *perm);
        ck_assert_ptr_nonnull(perm);
        for (int b = 0; b < t->n; b++)
            for (int a = 0; a < na; a++)
                for (size_t yx = 0; yx < plane; yx++)
                    for (int k = 0; k < no; k++)
                        perm[(((size_t)b * na + a) * plane + yx) * no + k] =
                            gd->step->head[l][((size_t)b * na * no + (size_t)a * no + k) * plane +
                                              yx];
        double e = yc_test_rel_error(perm, ref, n);
        printf("  head%d: relative error %.2e\n", l, e);
        ck_assert_msg(e < tol, "head%d: relative error %.3g", l, e);
        free(perm);
        free(ref);
    }
    yc_st_close(f);
}

void yc_golden_check_loss(const yc_golden *gd, const float ref[4], double tol)
{
    const double ours[4] = {gd->res.total, gd->res.box, gd->res.obj, gd->res.cls};
    const char *names[4] = {"total", "box", "obj", "cls"};
    for (int i = 0; i < 4; i++) {
        double e = yc_test_rel_diff(ours[i], ref[i]);
        printf("  loss %-5s %.8g (reference %.8g, relative error %.2e)\n", names[i], ours[i],
               (double)ref[i], e);
        ck_assert_msg(e < tol, "loss %s: %.8g vs %.8g", names[i], ours[i], (double)ref[i]);
    }
}

void yc_golden_check_tiny_outputs(const yc_golden *gd, const yc_tiny_files *tiny, double tol_out,
                                  double tol_loss)
{
    static const char *const heads[] = {"head0", "head1", "head2"};
    yc_golden_check_heads(gd, tiny->expected, heads, tol_out);
    yc_st_file *f = open_st(tiny->expected);
    float *loss = yc_golden_read(f, "loss", NULL);
    ck_assert_ptr_nonnull(loss);
    yc_golden_check_loss(gd, loss, tol_loss);
    free(loss);
    yc_st_close(f);
}

float *yc_golden_check_grads(const yc_golden *gd, const char *path, double tol)
{
    const yc_model *m = gd->m;
    float *grads = yc_golden_grads(gd);
    yc_st_file *f = open_st(path);
    ck_assert_int_eq(yc_st_count(f), m->nparams);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < m->nparams; i++) {
        const yc_param *p = &m->params[i];
        size_t n = 0;
        float *ref = yc_golden_read(f, p->name, &n);
        ck_assert_msg(ref != NULL, "no reference gradient for %s", p->name);
        ck_assert_uint_eq(n, p->numel);
        double e = yc_test_rel_error(grads + p->offset, ref, n);
        if (!(e <= worst)) {
            worst = e;
            worst_name = p->name;
        }
        ck_assert_msg(e < tol, "gradient of %s: relative error %.3g", p->name, e);
        free(ref);
    }
    printf("  %d gradients: worst relative error %.2e (%s)\n", m->nparams, worst, worst_name);
    yc_st_close(f);
    return grads;
}

void yc_golden_check_grads_similar(const yc_golden *gd, const char *path, double max_angle_err,
                                   double max_ratio_err)
{
    const yc_model *m = gd->m;
    float *grads = yc_golden_grads(gd);
    yc_st_file *f = open_st(path);
    double worst_angle = 0, worst_ratio = 0;
    const char *angle_name = "", *ratio_name = "";
    for (int i = 0; i < m->nparams; i++) {
        const yc_param *p = &m->params[i];
        size_t n = 0;
        float *ref = yc_golden_read(f, p->name, &n);
        ck_assert_msg(ref != NULL, "no reference gradient for %s", p->name);
        ck_assert_uint_eq(n, p->numel);
        yc_test_similarity s = yc_test_similar(grads + p->offset, ref, n);
        double angle = 1 - s.cosine, ratio = fabs(s.norm_ratio - 1);
        if (!(angle <= worst_angle))
            worst_angle = angle, angle_name = p->name;
        if (!(ratio <= worst_ratio))
            worst_ratio = ratio, ratio_name = p->name;
        ck_assert_msg(angle < max_angle_err && ratio < max_ratio_err,
                      "gradient of %s: cosine %.6f, norm ratio %.4f", p->name, s.cosine,
                      s.norm_ratio);
        free(ref);
    }
    printf("  %d gradients against PyTorch: worst 1 - cosine %.2e (%s), worst |norm ratio - 1| "
           "%.2e (%s)\n",
           m->nparams, worst_angle, angle_name, worst_ratio, ratio_name);
    yc_st_close(f);
    free(grads);
}

void yc_golden_check_bn_stats(const yc_golden *gd, const char *path, double tol)
{
    const yc_model *m = gd->m;
    yc_st_file *f = open_st(path);
    double worst = 0;
    const char *worst_name = "";
    int stats = 0;
    for (int i = 0; i < m->nstate; i++) {
        const yc_state *s = &m->state[i];
        size_t n = 0;
        float *ref = yc_golden_read(f, s->name, &n);
        ck_assert_msg(ref != NULL, "no reference for %s", s->name);
        if (s->kind == YC_STATE_NUM_BATCHES) {
            ck_assert_msg(m->num_batches[s->offset] == (int64_t)ref[0], "%s: %lld, PyTorch %g",
                          s->name, (long long)m->num_batches[s->offset], (double)ref[0]);
        } else {
            ck_assert_uint_eq(n, (size_t)s->numel);
            float *ours = malloc(n * sizeof *ours);
            ck_assert_ptr_nonnull(ours);
            ck_assert_int_eq(yc_tensor_get_f32(gd->be, &s->t, ours), YC_OK);
            double e = yc_test_rel_error(ours, ref, n);
            if (!(e <= worst))
                worst = e, worst_name = s->name;
            ck_assert_msg(e < tol, "%s: relative error %.3g", s->name, e);
            free(ours);
            stats++;
        }
        free(ref);
    }
    ck_assert_int_gt(stats, 0);
    printf("  %d BatchNorm running statistics: worst relative error %.2e (%s)\n", stats, worst,
           worst_name);
    yc_st_close(f);
}

static double meta_number(yc_st_file *f, const char *key)
{
    const char *v = yc_st_meta(f, key);
    ck_assert_msg(v != NULL, "update.safetensors has no metadata '%s'", key);
    return strtod(v, NULL);
}

/* Compares every float entry of m's state dict (parameters, running statistics) with the file's
 * `prefix` + name, relative to the change from the tensors of `before` (same names). */
static void check_changed(const yc_model *m, yc_st_file *f, const char *prefix,
                          yc_st_file *before, double tol, const char *what)
{
    double worst = 0;
    const char *worst_name = "";
    int compared = 0;
    for (int i = 0; i < m->ndict; i++) {
        const yc_tensor *t;
        const char *name;
        size_t numel;
        if (m->dict[i].is_state) {
            const yc_state *s = &m->state[m->dict[i].idx];
            if (s->kind == YC_STATE_NUM_BATCHES)
                continue;
            t = &s->t, name = s->name, numel = (size_t)s->numel;
        } else {
            const yc_param *p = &m->params[m->dict[i].idx];
            t = &p->t, name = p->name, numel = p->numel;
        }
        char key[YC_NAME_MAX + 16];
        snprintf(key, sizeof key, "%s%s", prefix, name);
        size_t n = 0, n0 = 0;
        float *ref = yc_golden_read(f, key, &n), *b = yc_golden_read(before, name, &n0);
        ck_assert_msg(ref && b, "no reference for %s", key);
        ck_assert(n == numel && n0 == numel);
        float *ours = malloc(numel * sizeof *ours);
        ck_assert_ptr_nonnull(ours);
        ck_assert_int_eq(yc_tensor_get_f32(m->be, t, ours), YC_OK);
        double e = yc_test_change_error(ours, ref, b, numel);
        if (!(e <= worst))
            worst = e, worst_name = name;
        ck_assert_msg(e < tol, "%s %s: error %.3g of the change", what, name, e);
        compared++;
        free(ours);
        free(ref);
        free(b);
    }
    ck_assert_int_gt(compared, 0);
    printf("  %s: %d tensors, worst error %.2e of the change (%s)\n", what, compared, worst,
           worst_name);
}

void yc_golden_check_update(yc_golden *gd, const yc_tiny_files *tiny, double tol, double tol_bn)
{
    yc_model *m = gd->m;
    yc_st_file *up = open_st(tiny->update), *w0 = open_st(tiny->weights);

    /* the step's train-mode forward moved the running statistics */
    yc_golden_check_bn_stats(gd, tiny->update, tol_bn);

    /* PyTorch's gradients in place of ours */
    yc_st_file *gf = open_st(tiny->grads);
    for (int i = 0; i < m->nparams; i++) {
        float *g = yc_golden_read(gf, m->params[i].name, NULL);
        ck_assert_ptr_nonnull(g);
        ck_assert_int_eq(yc_tensor_set_f32(gd->be, &m->params[i].grad, g), YC_OK);
        free(g);
    }
    yc_st_close(gf);

    /* train.py's optimizer and the warmup at global batch ni (epoch 0: lf = 1) */
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    int accumulate = (int)fmax(1.0, yc_round_half_even((double)NBS / gd->batch));
    double wd = hyp.weight_decay * gd->batch * accumulate / NBS;
    yc_optim *opt = NULL;
    ck_assert_msg(yc_optim_new(&opt, m, YC_OPTIM_SGD, hyp.lr0, hyp.momentum, wd, NULL) == YC_OK,
                  "%s", yc_last_error());
    long ni = (long)meta_number(up, "ni"), nw = (long)meta_number(up, "nw");
    yc_optim_warmup(opt, ni, nw, meta_number(up, "lf"), hyp.warmup_bias_lr, hyp.warmup_momentum,
                    hyp.momentum, (double)NBS / gd->batch);
    printf("  SGD at batch %ld of the warmup: lr %.4g (biases) %.4g (weights) %.4g (BN weights), "
           "momentum %.4g, weight decay %.4g\n",
           ni, opt->lr[YC_PG_BIAS], opt->lr[YC_PG_WEIGHT], opt->lr[YC_PG_BN_WEIGHT],
           opt->momentum[YC_PG_WEIGHT], wd);
    ck_assert_msg(yc_optim_step(opt, meta_number(up, "max_norm")) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_int_eq(gd->be->iface->synchronize(gd->be), YC_OK);
    ck_assert_msg(yc_optim_step_done(opt) == YC_OK, "%s", yc_last_error());
    double norm_err = yc_test_rel_diff(opt->last_grad_norm, meta_number(up, "grad_norm"));
    printf("  gradient norm %.7g (PyTorch %s, relative error %.2e), clipped to %s\n",
           opt->last_grad_norm, yc_st_meta(up, "grad_norm"), norm_err, yc_st_meta(up, "max_norm"));
    ck_assert_msg(norm_err < 1e-6, "gradient norm %.8g, PyTorch %s", opt->last_grad_norm,
                  yc_st_meta(up, "grad_norm"));

    /* the EMA of the weights before the step, after `ema_updates_before` updates */
    yc_ema *ema = NULL;
    ck_assert_msg(yc_ema_new(&ema, m, (long)meta_number(up, "ema_updates_before")) == YC_OK, "%s",
                  yc_last_error());
    ck_assert_msg(yc_model_load(ema->ema, tiny->weights) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_ema_update(ema, m), YC_OK);

    check_changed(m, up, "", w0, tol, "SGD step");
    check_changed(ema->ema, up, "ema.", w0, tol, "EMA");
    yc_ema_free(ema);
    yc_optim_free(opt);
    yc_st_close(up);
    yc_st_close(w0);
}
