/* detect --visualize: feature_visualization (see visualize.h). */
#include "visualize.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "draw.h"
#include "log.h"
#include "modelcfg.h"
#include "util.h"

int yc_write_npy(const char *path, const float *data, const int *shape, int ndim)
{
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1)
        return yc_error_status(YC_EUNSUPPORTED, "%s: .npy files are written little-endian only",
                               path);
    if (ndim < 1 || ndim > 4)
        return yc_error_status(YC_EUSAGE, "%s: %d dimensions", path, ndim);
    /* the header: a Python dict literal padded with spaces and ended by '\n' so that the magic
     * (6), version (2), length (2) and header take a multiple of 64 bytes */
    char dict[192], shp[96] = "";
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        size_t len = strlen(shp);
        snprintf(shp + len, sizeof shp - len, "%d,%s", shape[i], i + 1 < ndim ? " " : "");
        count *= (size_t)shape[i];
    }
    if (ndim > 1) /* (3, 4, 5): no trailing comma; (7,): one */
        shp[strlen(shp) - 1] = '\0';
    int dl = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }",
                      shp);
    size_t total = 10 + (size_t)dl + 1, pad = (64 - total % 64) % 64;
    char header[256];
    memcpy(header, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = (uint16_t)(dl + pad + 1);
    header[8] = (char)(hl & 0xff);
    header[9] = (char)(hl >> 8);
    memcpy(header + 10, dict, (size_t)dl);
    memset(header + 10 + dl, ' ', pad);
    header[10 + dl + pad] = '\n';
    yc_atomic_file af;
    int st = yc_atomic_open(&af, path);
    if (st)
        return st;
    if (fwrite(header, 1, total + pad, af.f) != total + pad ||
        fwrite(data, sizeof *data, count, af.f) != count) {
        int e = errno;
        yc_atomic_abort(&af);
        return yc_error_status(YC_EIO, "writing %s: %s", path, strerror(e));
    }
    return yc_atomic_commit(&af);
}

/* matplotlib's viridis at t in [0, 1]: 9 of its points, linear between them */
static yc_rgb viridis(float t)
{
    static const uint8_t p[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                                    {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                                    {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    float x = t * 8;
    int i = x >= 8 ? 7 : (int)x;
    float f = x - (float)i;
    yc_rgb c = {(uint8_t)(p[i][0] + f * (p[i + 1][0] - p[i][0]) + 0.5f),
                (uint8_t)(p[i][1] + f * (p[i + 1][1] - p[i][1]) + 0.5f),
                (uint8_t)(p[i][2] + f * (p[i + 1][2] - p[i][2]) + 0.5f)};
    return c;
}

/* The png of the first n channels of x (c x h x w). */
static int write_png(const char *path, const float *x, int n, int h, int w)
{
    enum { COLS = 8, GAP = 4, MIN_SIDE = 128 };
    int side = h > w ? h : w, z = side >= MIN_SIDE ? 1 : (MIN_SIDE + side - 1) / side;
    int th = h * z, tw = w * z, rows = (n + COLS - 1) / COLS, cols = n < COLS ? n : COLS;
    yc_canvas cv;
    yc_rgb white = {255, 255, 255};
    int st = yc_canvas_init(&cv, cols * tw + (cols - 1) * GAP, rows * th + (rows - 1) * GAP,
                            white);
    if (st)
        return st;
    const size_t plane = (size_t)h * (size_t)w;
    for (int k = 0; k < n; k++) {
        const float *p = x + (size_t)k * plane;
        float lo = p[0], hi = p[0];
        for (size_t i = 1; i < plane; i++) {
            lo = p[i] < lo ? p[i] : lo;
            hi = p[i] > hi ? p[i] : hi;
        }
        float scale = hi > lo ? 1.0f / (hi - lo) : 0.0f;
        int ox = (k % COLS) * (tw + GAP), oy = (k / COLS) * (th + GAP);
        for (int y = 0; y < th; y++)
            for (int xx = 0; xx < tw; xx++)
                yc_draw_pixel(&cv, ox + xx, oy + y,
                              viridis((p[(size_t)(y / z) * w + xx / z] - lo) * scale));
    }
    st = yc_canvas_save(&cv, path);
    yc_canvas_free(&cv);
    return st;
}

int yc_visualize_dir(const char *parent, const char *stem, char *out, size_t len)
{
    int st = yc_mkdirs(parent);
    if (st)
        return st;
    int w = snprintf(out, len, "%s/%s", parent, stem);
    if (w < 0 || (size_t)w >= len)
        return yc_error_status(YC_EUSAGE, "path too long: %s/%s", parent, stem);
    /* increment_path(save_dir / stem, mkdir=True): stem, stem2, stem3, ... */
    for (int n = 2; mkdir(out, 0777) != 0; n++) {
        if (errno != EEXIST || n > 9999)
            return yc_error_status(YC_EIO, "cannot create %s: %s", out,
                                   errno == EEXIST ? "too many taken" : strerror(errno));
        snprintf(out, len, "%s/%s%d", parent, stem, n);
    }
    return YC_OK;
}

int yc_visualize_features(yc_model *m, yc_graph *g, const char *dir)
{
    const yc_model_cfg *cfg = m->cfg;
    float *buf = NULL;
    size_t cap = 0;
    int st = YC_OK;
    for (int i = 0; i < cfg->nlayers && !st; i++) {
        const yc_layer_cfg *l = &cfg->layers[i];
        if (l->module == YC_MOD_DETECT)
            continue;
        const yc_tensor *t = yc_graph_layer_output(g, i);
        if (t->h <= 1 || t->w <= 1)
            continue;
        size_t elems = yc_tensor_elems(t);
        if (elems > cap) {
            float *p = yc_realloc(buf, elems * sizeof *p, "feature maps");
            if (!p) {
                st = YC_ENOMEM;
                break;
            }
            buf = p;
            cap = elems;
        }
        if ((st = yc_tensor_get_f32(m->be, t, buf))) {
            yc_error_context(st, "reading layer %d's output", i);
            break;
        }
        /* module_type.split('.')[-1] */
        const char *type = strrchr(l->type_name, '.');
        type = type ? type + 1 : l->type_name;
        char png[4200], npy[4200];
        snprintf(png, sizeof png, "%s/stage%d_%s_features.png", dir, i, type);
        snprintf(npy, sizeof npy, "%s/stage%d_%s_features.npy", dir, i, type);
        int n = t->c < 32 ? t->c : 32;
        printf("Saving %s... (%d/%d)\n", png, n, t->c);
        const int shape[3] = {t->c, t->h, t->w};
        if ((st = write_png(png, buf, n, t->h, t->w)) ||
            (st = yc_write_npy(npy, buf, shape, 3)))
            yc_error_context(st, "detect --visualize");
    }
    free(buf);
    return st;
}
