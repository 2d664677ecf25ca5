/* val and detect for classifiers (classify_cmds.h). */
#include "classify_cmds.h"

#include <stdio.h>
#include <stdlib.h>

#include "classify_eval.h"
#include "classify_train.h"
#include "dataset.h"
#include "imagefolder.h"
#include "log.h"
#include "weights.h"

yc_task yc_cli_model_task(const char *weights, const char *cfg, const char *what)
{
    yc_weights *w = NULL;
    yc_model_cfg *mc = NULL;
    char path[1024];
    yc_task task = YC_TASK_DETECT;
    if (cfg && cfg[0]) {
        if (!yc_model_cfg_find(cfg, path, sizeof path) && !yc_model_cfg_load(&mc, path, 0))
            task = mc->task;
    } else if (weights && weights[0] && !yc_weights_read(weights, &w) &&
               !yc_weights_model_cfg(w, w->nc, &mc)) {
        task = mc->task;
    }
    yc_error_clear();
    if (task == YC_TASK_SEGMENT)
        yc_model_cfg_require_detection(mc, what);
    yc_model_cfg_free(mc);
    yc_weights_free(w);
    return task;
}

/* The classifier of `weights` loaded on `device`, and its class names (the weights' names, NULL
 * when they have none). */
static int open_classifier(const char *weights, const char *cfg, const char *device,
                           yc_opened_model *om)
{
    yc_model_spec spec = {.cfg = cfg, .weights = weights, .device = device, .announce = true,
                          .use = YC_MODEL_INFER};
    return yc_model_open(&spec, om);
}

int yc_cli_classify_val(const char *weights, const char *cfg, const char *root, int img, int batch,
                        const char *device)
{
    img = img > 0 ? img : YC_CLS_IMGSZ;
    char dir[2100];
    yc_imagefolder ds = {0};
    yc_opened_model om = {0};
    yc_cls_metrics r = {0};
    int st = yc_imagefolder_val_dir(root, dir, sizeof dir);
    if (!st)
        st = yc_imagefolder_open(dir, &ds);
    if (!st)
        st = open_classifier(weights, cfg, device, &om);
    if (!st)
        st = yc_classify_evaluate(om.m, &ds, img, batch, 0.0, true, &r);
    if (!st) {
        printf("%s: %zu images, %d classes, %dx%d\n", dir, ds.n, ds.nc, img, img);
        yc_cls_metrics_print(&r, &ds, stdout);
    }
    yc_cls_metrics_free(&r);
    yc_opened_model_free(&om);
    yc_imagefolder_free(&ds);
    return st;
}

int yc_cli_classify_predict(const char *weights, const char *cfg, const char *source, int img,
                            const char *device)
{
    img = img > 0 ? img : YC_CLS_IMGSZ;
    yc_path_list list = {0};
    yc_opened_model om = {0};
    int st = yc_image_list(&source, 1, &list);
    if (!st && list.n == 0)
        st = yc_error_status(YC_EFORMAT, "no images in %s", source);
    if (!st)
        st = open_classifier(weights, cfg, device, &om);
    size_t done = 0;
    if (!st) {
        const char *const *names = om.w && om.w->nnames == om.m->nc ? (const char *const *)om.w->names : NULL;
        st = yc_classify_predict(om.m, list.paths, list.n, img, names, stdout, &done);
    }
    if (!st && done == 0)
        st = yc_error_status(YC_ERR, "none of the %zu images of %s could be read", list.n, source);
    yc_opened_model_free(&om);
    yc_path_list_free(&list);
    return st;
}
