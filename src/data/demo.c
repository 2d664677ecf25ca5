/* The built-in demo dataset: rendering, writing and the cache directory (see demo.h). */
#include "demo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "draw.h"
#include "image.h"
#include "log.h"
#include "rng.h"
#include "util.h"

const char *const yc_demo_names[YC_DEMO_NC] = {"circle", "square", "triangle", "star"};

/* Hue (degrees) of each class's colour band. */
static const double class_hue[YC_DEMO_NC] = {0, 120, 220, 55};

enum { SHAPE_CIRCLE, SHAPE_SQUARE, SHAPE_TRIANGLE, SHAPE_STAR };

/* Image file name prefix; only files starting with it are ever removed. */
#define PREFIX "shapes_"

static const char *const split_dir[2] = {"train", "val"};

static const char *const task_names[3] = {"detect", "segment", "classify"};

const char *yc_demo_task_name(yc_demo_task task)
{
    return task >= YC_DEMO_DETECT && task <= YC_DEMO_CLASSIFY ? task_names[task] : "unknown";
}

int yc_demo_task_parse(const char *name, yc_demo_task *task)
{
    for (int t = 0; t < 3; t++)
        if (name && strcmp(name, task_names[t]) == 0) {
            *task = (yc_demo_task)t;
            return YC_OK;
        }
    return yc_error_status(YC_EUSAGE, "demo dataset: unknown task '%s': use detect, segment or "
                           "classify", name ? name : "");
}

void yc_demo_options_default(yc_demo_options *opt)
{
    opt->task = YC_DEMO_DETECT;
    opt->crop = 64;
    opt->seed = 0;
    opt->n_train = 320;
    opt->n_val = 80;
    opt->min_side = 256;
    opt->max_side = 480;
    opt->max_objects = 6;
    opt->quality = 90;
}

static int check_options(const yc_demo_options *o)
{
    if (o->task < YC_DEMO_DETECT || o->task > YC_DEMO_CLASSIFY)
        return yc_error_status(YC_EUSAGE, "demo dataset: task %d: must be detect (0), segment (1) "
                               "or classify (2)", (int)o->task);
    if (o->task == YC_DEMO_CLASSIFY && (o->crop < 16 || o->crop > 1024))
        return yc_error_status(YC_EUSAGE, "demo dataset: crop side %d: must be 16 to 1024",
                               o->crop);
    if (o->n_train < 1 || o->n_val < 1 || o->n_train > 1000000 || o->n_val > 1000000)
        return yc_error_status(YC_EUSAGE, "demo dataset: %d train and %d val images: each must be "
                               "1 to 1000000", o->n_train, o->n_val);
    if (o->min_side < 64 || o->max_side > 8192 || o->min_side > o->max_side)
        return yc_error_status(YC_EUSAGE, "demo dataset: image sides %d-%d: need 64 <= min <= max "
                               "<= 8192", o->min_side, o->max_side);
    if (o->max_objects < 1 || o->max_objects > YC_DEMO_MAX_OBJECTS)
        return yc_error_status(YC_EUSAGE, "demo dataset: max_objects %d: must be 1 to %d",
                               o->max_objects, YC_DEMO_MAX_OBJECTS);
    if (o->quality < 1 || o->quality > 100)
        return yc_error_status(YC_EUSAGE, "demo dataset: JPEG quality %d: must be 1 to 100",
                               o->quality);
    return YC_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Rendering
 * ---------------------------------------------------------------------------------------------- */

/* HSV (h in degrees, s and v in [0, 1]) to RGB in [0, 255]. */
static void hsv_to_rgb(double h, double s, double v, double out[3])
{
    h = fmod(h, 360.0);
    if (h < 0)
        h += 360.0;
    double c = v * s, hp = h / 60.0, x = c * (1 - fabs(fmod(hp, 2.0) - 1)), m = v - c;
    double r = 0, g = 0, b = 0;
    switch ((int)hp) {
    case 0: r = c; g = x; break;
    case 1: r = x; g = c; break;
    case 2: g = c; b = x; break;
    case 3: g = x; b = c; break;
    case 4: r = x; b = c; break;
    default: r = c; b = x; break;
    }
    out[0] = (r + m) * 255;
    out[1] = (g + m) * 255;
    out[2] = (b + m) * 255;
}

static uint8_t clamp_u8(double v)
{
    return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)(v + 0.5);
}

/* A shape placed in the image: its kind, circumradius, centre and vertices. */
typedef struct shape {
    /* SHAPE_* (equal to the class id) */
    int kind;
    /* centre and circumradius in pixels */
    double cx, cy, r;
    /* polygon vertices (none for a circle drawn as a circle) */
    int nv;
    double vx[YC_DEMO_MAX_VERTICES], vy[YC_DEMO_MAX_VERTICES];
    /* exact extents */
    double x0, y0, x1, y1;
} shape;

/* Builds the shape's vertices (relative to the centre) and extents; a circle becomes a regular
 * polygon of YC_DEMO_CIRCLE_VERTICES vertices when `circle_polygon` is set. */
static void shape_geometry(shape *s, double rot, bool circle_polygon)
{
    s->nv = 0;
    switch (s->kind) {
    case SHAPE_CIRCLE:
        if (!circle_polygon)
            break;
        s->nv = YC_DEMO_CIRCLE_VERTICES;
        for (int k = 0; k < s->nv; k++) {
            s->vx[k] = s->r * cos(rot + k * 2 * M_PI / s->nv);
            s->vy[k] = s->r * sin(rot + k * 2 * M_PI / s->nv);
        }
        break;
    case SHAPE_SQUARE:
        s->nv = 4;
        for (int k = 0; k < 4; k++) {
            s->vx[k] = s->r * cos(rot + k * M_PI / 2);
            s->vy[k] = s->r * sin(rot + k * M_PI / 2);
        }
        break;
    case SHAPE_TRIANGLE:
        s->nv = 3;
        for (int k = 0; k < 3; k++) {
            s->vx[k] = s->r * cos(rot + k * 2 * M_PI / 3);
            s->vy[k] = s->r * sin(rot + k * 2 * M_PI / 3);
        }
        break;
    case SHAPE_STAR:
        s->nv = 10;
        for (int k = 0; k < 10; k++) {
            double rr = k % 2 ? 0.45 * s->r : s->r;
            s->vx[k] = rr * cos(rot + k * M_PI / 5);
            s->vy[k] = rr * sin(rot + k * M_PI / 5);
        }
        break;
    default:
        break;
    }
    if (s->nv == 0) {
        s->x0 = s->y0 = -s->r;
        s->x1 = s->y1 = s->r;
        return;
    }
    s->x0 = s->y0 = INFINITY;
    s->x1 = s->y1 = -INFINITY;
    for (int k = 0; k < s->nv; k++) {
        s->x0 = fmin(s->x0, s->vx[k]);
        s->x1 = fmax(s->x1, s->vx[k]);
        s->y0 = fmin(s->y0, s->vy[k]);
        s->y1 = fmax(s->y1, s->vy[k]);
    }
}

/* Point (px, py), relative to the centre, inside the shape (even-odd rule for polygons). */
static bool shape_inside(const shape *s, double px, double py)
{
    if (s->nv == 0)
        return px * px + py * py <= s->r * s->r;
    bool in = false;
    for (int i = 0, j = s->nv - 1; i < s->nv; j = i++) {
        if ((s->vy[i] > py) != (s->vy[j] > py) &&
            px < (s->vx[j] - s->vx[i]) * (py - s->vy[i]) / (s->vy[j] - s->vy[i]) + s->vx[i])
            in = !in;
    }
    return in;
}

/* Paints the shape with anti-aliased edges and a linear shading of +-15% along (ux, uy), and
 * marks `id` in the ids map where it covers at least half of a pixel.  The inside test runs once
 * per pixel corner; a pixel whose four corners agree is taken as wholly in or out, the others (the
 * outline) are supersampled 4x4. */
static int paint_shape(float *img, uint8_t *ids, int w, int h, const shape *s, const double col[3],
                       double ux, double uy, uint8_t id)
{
    int xa = (int)floor(s->cx + s->x0), xb = (int)ceil(s->cx + s->x1);
    int ya = (int)floor(s->cy + s->y0), yb = (int)ceil(s->cy + s->y1);
    xa = xa < 0 ? 0 : xa;
    ya = ya < 0 ? 0 : ya;
    xb = xb > w - 1 ? w - 1 : xb;
    yb = yb > h - 1 ? h - 1 : yb;
    int cw = xb - xa + 2;
    uint8_t *corner = yc_malloc((size_t)cw * 2, "demo shape");
    if (!corner)
        return YC_ENOMEM;
    uint8_t *above = corner, *below = corner + cw;
    for (int i = 0; i < cw; i++)
        above[i] = shape_inside(s, xa + i - s->cx, ya - s->cy);
    for (int y = ya; y <= yb; y++) {
        for (int i = 0; i < cw; i++)
            below[i] = shape_inside(s, xa + i - s->cx, y + 1 - s->cy);
        for (int x = xa; x <= xb; x++) {
            int i = x - xa;
            int n = above[i] + above[i + 1] + below[i] + below[i + 1];
            double cov;
            if (n == 0 || n == 4) {
                cov = n ? 1.0 : 0.0;
            } else {
                int hits = 0;
                for (int sy = 0; sy < 4; sy++)
                    for (int sx = 0; sx < 4; sx++)
                        hits += shape_inside(s, x + (sx + 0.5) / 4 - s->cx,
                                             y + (sy + 0.5) / 4 - s->cy);
                cov = hits / 16.0;
            }
            if (cov <= 0)
                continue;
            if (cov >= 0.5)
                ids[(size_t)y * w + x] = id;
            double px = x + 0.5 - s->cx, py = y + 0.5 - s->cy;
            double shade = 1 + 0.15 * (px * ux + py * uy) / s->r;
            float *p = img + 3 * ((size_t)y * w + x);
            for (int ch = 0; ch < 3; ch++)
                p[ch] = (float)(p[ch] * (1 - cov) + col[ch] * shade * cov);
        }
        uint8_t *t = above;
        above = below;
        below = t;
    }
    free(corner);
    return YC_OK;
}

/* Desaturated random colour for backgrounds. */
static void muted_color(yc_rng *r, double out[3])
{
    hsv_to_rgb(yc_rng_range(r, 0, 360), yc_rng_range(r, 0, 0.25), yc_rng_range(r, 0.3, 0.9), out);
}

/* Fills the float image with a textured, desaturated background. */
static int paint_background(float *img, int w, int h, yc_rng *r)
{
    double c1[3], c2[3];
    muted_color(r, c1);
    muted_color(r, c2);
    double ga = yc_rng_range(r, 0, 2 * M_PI), gc = cos(ga), gs = sin(ga);
    double half = 0.5 * sqrt((double)w * w + (double)h * h);

    bool stripes = yc_rng_uniform(r) < 0.5;
    double s_amp = yc_rng_range(r, 8, 30), s_period = yc_rng_range(r, 6, 40);
    double sa = yc_rng_range(r, 0, M_PI), s_phase = yc_rng_range(r, 0, 1);
    double s_kx = cos(sa) / s_period, s_ky = sin(sa) / s_period;
    float lut[1024];
    for (int i = 0; i < 1024; i++)
        lut[i] = (float)(s_amp * sin(2 * M_PI * i / 1024.0));

    bool blotches = yc_rng_uniform(r) < 0.6;
    int cell = 16 + (int)yc_rng_below(r, 49);
    double b_amp = yc_rng_range(r, 10, 35);
    int gw = w / cell + 2, gh = h / cell + 2;
    float *grid = NULL;
    if (blotches) {
        grid = yc_malloc(sizeof(float) * gw * gh, "demo background");
        if (!grid)
            return YC_ENOMEM;
        for (int i = 0; i < gw * gh; i++)
            grid[i] = (float)yc_rng_range(r, -b_amp, b_amp);
    }

    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            double t = ((x - w / 2.0) * gc + (y - h / 2.0) * gs) / half * 0.5 + 0.5;
            double off = 0;
            if (stripes) {
                double ph = x * s_kx + y * s_ky + s_phase;
                off += lut[(int)((ph - floor(ph)) * 1024) & 1023];
            }
            if (blotches) {
                double gx = (double)x / cell, gy = (double)y / cell;
                int ix = (int)gx, iy = (int)gy;
                double fx = gx - ix, fy = gy - iy;
                const float *g0 = grid + iy * gw + ix, *g1 = g0 + gw;
                off += (g0[0] * (1 - fx) + g0[1] * fx) * (1 - fy) + (g1[0] * (1 - fx) + g1[1] * fx) * fy;
            }
            float *p = img + 3 * ((size_t)y * w + x);
            for (int ch = 0; ch < 3; ch++)
                p[ch] = (float)(c1[ch] * (1 - t) + c2[ch] * t + off);
        }
    }
    free(grid);
    return YC_OK;
}

/* Up to five thin clutter lines in muted colours, rasterised one at a time into a scratch mask
 * and copied into the float image. */
static int paint_clutter(float *img, int w, int h, yc_rng *r)
{
    int n = (int)yc_rng_below(r, 6);
    if (!n)
        return YC_OK;
    uint8_t *mask = yc_calloc((size_t)w * h, 3, "demo clutter");
    if (!mask)
        return YC_ENOMEM;
    yc_canvas c = yc_canvas_wrap(mask, w, h);
    const yc_rgb on = {255, 255, 255};
    double col[3];
    for (int i = 0; i < n; i++) {
        memset(mask, 0, (size_t)w * h * 3);
        muted_color(r, col);
        double x0 = yc_rng_range(r, 0, w), y0 = yc_rng_range(r, 0, h);
        double x1 = yc_rng_range(r, 0, w), y1 = yc_rng_range(r, 0, h);
        yc_draw_line(&c, x0, y0, x1, y1, 1 + (int)yc_rng_below(r, 3), on);
        for (size_t k = 0; k < (size_t)w * h; k++)
            if (mask[3 * k])
                for (int ch = 0; ch < 3; ch++)
                    img[3 * k + ch] = (float)col[ch];
    }
    free(mask);
    return YC_OK;
}

int yc_demo_render(const yc_demo_options *opt, int split, int index, yc_demo_sample *out)
{
    memset(out, 0, sizeof *out);
    yc_demo_options def;
    if (!opt) {
        yc_demo_options_default(&def);
        opt = &def;
    }
    int st = check_options(opt);
    if (st)
        return st;
    if (split < 0 || split > 1 || index < 0)
        return yc_error_status(YC_EUSAGE, "demo dataset: no image %d of split %d", index, split);
    yc_rng r;
    yc_rng_seed(&r, opt->seed, ((uint64_t)split << 32 | (uint64_t)index) + 1);
    int steps = (opt->max_side - opt->min_side) / 32 + 1;
    int w = opt->min_side + 32 * (int)yc_rng_below(&r, (uint32_t)steps);
    int h = opt->min_side + 32 * (int)yc_rng_below(&r, (uint32_t)steps);
    float *img = yc_malloc(sizeof(float) * 3 * w * h, "demo image");
    out->ids = yc_calloc((size_t)w * h, 1, "demo image");
    if (!img || !out->ids) {
        free(img);
        yc_demo_sample_free(out);
        return YC_ENOMEM;
    }
    st = paint_background(img, w, h, &r);
    if (!st)
        st = paint_clutter(img, w, h, &r);
    if (st) {
        free(img);
        yc_demo_sample_free(out);
        return st;
    }

    /* segmentation and classification place shapes apart (circumcircles 2 px apart or more) */
    bool apart = opt->task != YC_DEMO_DETECT;
    double placed_x[YC_DEMO_MAX_OBJECTS], placed_y[YC_DEMO_MAX_OBJECTS], placed_r[YC_DEMO_MAX_OBJECTS];
    int want = 1 + (int)yc_rng_below(&r, (uint32_t)opt->max_objects);
    int side = w < h ? w : h;
    for (int k = 0; k < want; k++) {
        for (int attempt = 0; attempt < 40; attempt++) {
            shape s;
            s.kind = (int)yc_rng_below(&r, YC_DEMO_NC);
            s.r = yc_rng_range(&r, 0.08, 0.40) * side / 2;
            shape_geometry(&s, yc_rng_range(&r, 0, 2 * M_PI), opt->task == YC_DEMO_SEGMENT);
            s.cx = yc_rng_range(&r, 1 - s.x0, w - 1 - s.x1);
            s.cy = yc_rng_range(&r, 1 - s.y0, h - 1 - s.y1);
            double bx0 = s.cx + s.x0, bx1 = s.cx + s.x1, by0 = s.cy + s.y0, by1 = s.cy + s.y1;
            double area = (bx1 - bx0) * (by1 - by0);
            bool ok = true;
            for (int j = 0; j < out->n && ok; j++) {
                const yc_demo_object *o = &out->obj[j];
                double iw = fmin(bx1, o->x1) - fmax(bx0, o->x0);
                double ih = fmin(by1, o->y1) - fmax(by0, o->y0);
                double inter = iw > 0 && ih > 0 ? iw * ih : 0;
                double oarea = (o->x1 - o->x0) * (o->y1 - o->y0);
                ok = inter <= 0.25 * fmin(area, oarea);
                if (apart)
                    ok = ok && hypot(s.cx - placed_x[j], s.cy - placed_y[j]) >= s.r + placed_r[j] + 2;
            }
            double col[3];
            /* classification: any hue, so that the shape, not the colour, tells the class */
            double hue = opt->task == YC_DEMO_CLASSIFY ? yc_rng_range(&r, 0, 360)
                                                       : class_hue[s.kind] + yc_rng_range(&r, -15, 15);
            hsv_to_rgb(hue, yc_rng_range(&r, 0.7, 1.0),
                       yc_rng_range(&r, 0.7, 1.0), col);
            double sa = yc_rng_range(&r, 0, 2 * M_PI);
            if (!ok)
                continue;
            st = paint_shape(img, out->ids, w, h, &s, col, cos(sa), sin(sa),
                             (uint8_t)(out->n + 1));
            if (st) {
                free(img);
                yc_demo_sample_free(out);
                return st;
            }
            placed_x[out->n] = s.cx;
            placed_y[out->n] = s.cy;
            placed_r[out->n] = s.r;
            yc_demo_object *o = &out->obj[out->n++];
            o->nv = s.nv;
            for (int v = 0; v < s.nv; v++) {
                o->px[v] = s.cx + s.vx[v];
                o->py[v] = s.cy + s.vy[v];
            }
            o->cls = s.kind;
            o->x0 = bx0;
            o->x1 = bx1;
            o->y0 = by0;
            o->y1 = by1;
            break;
        }
    }

    out->rgb = yc_malloc((size_t)3 * w * h, "demo image");
    if (!out->rgb) {
        free(img);
        yc_demo_sample_free(out);
        return YC_ENOMEM;
    }
    double namp = yc_rng_range(&r, 4, 12) / 15.0;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        uint32_t u = yc_rng_u32(&r);
        for (int ch = 0; ch < 3; ch++) {
            int b = (int)(u >> (8 * ch) & 0xff);
            double noise = ((b & 15) + (b >> 4) - 15) * namp;
            out->rgb[3 * i + ch] = clamp_u8(img[3 * i + ch] + noise);
        }
    }
    free(img);
    out->w = w;
    out->h = h;
    return YC_OK;
}

void yc_demo_sample_free(yc_demo_sample *s)
{
    free(s->rgb);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------------------------------- */

/* Writes a file under a temporary name and renames it into place.  Unlike yc_write_file_atomic
 * it does not fsync each file: the writer syncs the file system once before the marker. */
static int write_renamed(const char *path, const void *data, size_t len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return yc_error_status(YC_EIO, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return yc_error_status(YC_EIO, "cannot create %s: %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t k = write(fd, p, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            close(fd);
            unlink(tmp);
            return yc_error_status(YC_EIO, "cannot write %s: %s", tmp, strerror(e));
        }
        p += k;
        left -= (size_t)k;
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return yc_error_status(YC_EIO, "cannot close %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return yc_error_status(YC_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    return YC_OK;
}

/* The label file of a scene: one box per object (detection) or one outline (segmentation), in
 * YOLO's normalised format with 6 decimals (heap string in *text, *len bytes). */
static int label_text(const yc_demo_sample *s, yc_demo_task task, char **text, size_t *len)
{
    size_t cap = (size_t)s->n * (64 + 20 * YC_DEMO_MAX_VERTICES) + 1, n = 0;
    char *t = yc_malloc(cap, "demo labels");
    if (!t)
        return YC_ENOMEM;
    t[0] = '\0';
    for (int i = 0; i < s->n; i++) {
        const yc_demo_object *o = &s->obj[i];
        if (task == YC_DEMO_DETECT) {
            n += (size_t)snprintf(t + n, cap - n, "%d %.6f %.6f %.6f %.6f\n", o->cls,
                                  (o->x0 + o->x1) / 2 / s->w, (o->y0 + o->y1) / 2 / s->h,
                                  (o->x1 - o->x0) / s->w, (o->y1 - o->y0) / s->h);
            continue;
        }
        n += (size_t)snprintf(t + n, cap - n, "%d", o->cls);
        for (int v = 0; v < o->nv; v++)
            n += (size_t)snprintf(t + n, cap - n, " %.6f %.6f", o->px[v] / s->w, o->py[v] / s->h);
        n += (size_t)snprintf(t + n, cap - n, "\n");
    }
    *text = t;
    *len = n;
    return YC_OK;
}

/* The square crop of object `o` the classification task writes: 1.3 times the box's larger side,
 * centred on the box, moved inside the image and at most its shorter side; resized to side x side
 * PNG bytes in *png. */
static int crop_png(const yc_demo_sample *s, const yc_demo_object *o, int side, void **png,
                    size_t *len)
{
    int shorter = s->w < s->h ? s->w : s->h;
    int c = (int)lround(1.3 * fmax(o->x1 - o->x0, o->y1 - o->y0));
    c = c < 1 ? 1 : c > shorter ? shorter : c;
    int x0 = (int)lround((o->x0 + o->x1) / 2 - c / 2.0), y0 = (int)lround((o->y0 + o->y1) / 2 - c / 2.0);
    x0 = x0 < 0 ? 0 : x0 > s->w - c ? s->w - c : x0;
    y0 = y0 < 0 ? 0 : y0 > s->h - c ? s->h - c : y0;
    yc_image cut = YC_IMAGE_INIT, small = YC_IMAGE_INIT;
    int st = yc_image_reserve(&cut, c, c);
    for (int y = 0; y < c && !st; y++)
        memcpy(cut.data + (size_t)3 * y * c, s->rgb + 3 * ((size_t)(y0 + y) * s->w + x0),
               (size_t)3 * c);
    if (!st)
        st = yc_image_resize(&cut, &small, side, side, c > side ? YC_INTERP_AREA : YC_INTERP_LINEAR);
    if (!st)
        st = yc_encode_rgb(small.data, side, side, YC_IMAGE_PNG, 0, png, len);
    yc_image_free(&cut);
    yc_image_free(&small);
    return st;
}

/* Classification: writes every object of scene `index` of `split` as a crop into its class
 * folder. */
static int write_crops(const char *dir, const yc_demo_options *opt, const yc_demo_sample *s,
                       int split, int index)
{
    char path[4096];
    for (int i = 0; i < s->n; i++) {
        void *png = NULL;
        size_t len = 0;
        int st = crop_png(s, &s->obj[i], opt->crop, &png, &len);
        if (st)
            return st;
        snprintf(path, sizeof path, "%s/%s/%s/" PREFIX "%05d_%d.png", dir, split_dir[split],
                 yc_demo_names[s->obj[i].cls], index, i);
        st = write_renamed(path, png, len);
        yc_encoded_free(png);
        if (st)
            return st;
    }
    return YC_OK;
}

/* Renders, encodes and writes image `index` of `split` with its label file (detection,
 * segmentation) or its crops (classification). */
static int write_sample(const char *dir, const yc_demo_options *opt, int split, int index)
{
    yc_demo_sample s;
    int st = yc_demo_render(opt, split, index, &s);
    if (st)
        return st;
    if (opt->task == YC_DEMO_CLASSIFY) {
        st = write_crops(dir, opt, &s, split, index);
        yc_demo_sample_free(&s);
        return st;
    }
    void *jpg = NULL;
    size_t len = 0;
    st = yc_encode_rgb(s.rgb, s.w, s.h, YC_IMAGE_JPEG, opt->quality, &jpg, &len);
    char path[4096];
    if (!st) {
        snprintf(path, sizeof path, "%s/images/%s/" PREFIX "%05d.jpg", dir, split_dir[split],
                 index);
        st = write_renamed(path, jpg, len);
        yc_encoded_free(jpg);
    }
    char *text = NULL;
    size_t n = 0;
    if (!st)
        st = label_text(&s, opt->task, &text, &n);
    if (!st) {
        snprintf(path, sizeof path, "%s/labels/%s/" PREFIX "%05d.txt", dir, split_dir[split],
                 index);
        st = write_renamed(path, text, n);
    }
    free(text);
    yc_demo_sample_free(&s);
    return st;
}

/* The marker's content: everything that determines the files. */
static void signature(const yc_demo_options *o, char *buf, size_t len)
{
    snprintf(buf, len,
             "yolocl demo dataset 1\nseed %llu\ntrain %d\nval %d\nsides %d %d\nmax_objects %d\n"
             "quality %d\n",
             (unsigned long long)o->seed, o->n_train, o->n_val, o->min_side, o->max_side,
             o->max_objects, o->quality);
    /* detection's marker is unchanged from before the tasks, so existing caches stay valid */
    size_t n = strlen(buf);
    if (o->task == YC_DEMO_SEGMENT)
        snprintf(buf + n, len - n, "task segment\n");
    else if (o->task == YC_DEMO_CLASSIFY)
        snprintf(buf + n, len - n, "task classify\ncrop %d\n", o->crop);
}

/* Removes a file if it exists. */
static int remove_if_present(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return yc_error_status(YC_EIO, "cannot remove %s: %s", path, strerror(errno));
    return YC_OK;
}

/* Removes this generator's files (PREFIX*) from one directory, which need not exist. */
static int remove_own_files(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT)
            return YC_OK;
        return yc_error_status(YC_EIO, "cannot list %s: %s", path, strerror(errno));
    }
    int st = YC_OK;
    struct dirent *e;
    char full[4096];
    while (!st && (e = readdir(d))) {
        if (strncmp(e->d_name, PREFIX, strlen(PREFIX)) != 0)
            continue;
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        st = remove_if_present(full);
    }
    closedir(d);
    return st;
}

/* Takes an exclusive lock on DIR/.yolocl_demo.lock; returns the descriptor or -1 with an error. */
static int lock_dir(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.yolocl_demo.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        yc_error_status(YC_EIO, "cannot open lock file %s: %s", path, strerror(errno));
        return -1;
    }
    while (flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR)
            continue;
        yc_error_status(YC_EIO, "cannot lock %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void unlock_dir(int fd)
{
    flock(fd, LOCK_UN);
    close(fd);
}

/* The writer proper; the caller holds the directory lock. */
static int write_locked(const char *dir, const yc_demo_options *opt)
{
    double t0 = yc_now();
    char path[4096];
    snprintf(path, sizeof path, "%s/" YC_DEMO_MARKER, dir);
    int st = remove_if_present(path);
    for (int s = 0; s < 2 && !st && opt->task == YC_DEMO_CLASSIFY; s++)
        for (int k = 0; k < YC_DEMO_NC && !st; k++) {
            snprintf(path, sizeof path, "%s/%s/%s", dir, split_dir[s], yc_demo_names[k]);
            st = yc_mkdirs(path);
            if (!st)
                st = remove_own_files(path);
        }
    for (int s = 0; s < 2 && !st && opt->task != YC_DEMO_CLASSIFY; s++) {
        snprintf(path, sizeof path, "%s/images/%s", dir, split_dir[s]);
        st = yc_mkdirs(path);
        if (!st)
            st = remove_own_files(path);
        snprintf(path, sizeof path, "%s/labels/%s", dir, split_dir[s]);
        if (!st)
            st = yc_mkdirs(path);
        if (!st)
            st = remove_own_files(path);
        snprintf(path, sizeof path, "%s/labels/%s.yolocl.cache", dir, split_dir[s]);
        if (!st)
            st = remove_if_present(path);
    }
    if (st)
        return yc_error_context(st, "demo dataset in %s", dir);

    int total = opt->n_train + opt->n_val;
    int failed = 0;
    char message[1024] = "";
#pragma omp parallel for schedule(dynamic, 4)
    for (int i = 0; i < total; i++) {
        int done;
#pragma omp atomic read
        done = failed;
        if (done)
            continue;
        int split = i < opt->n_train ? 0 : 1;
        int index = split ? i - opt->n_train : i;
        if (write_sample(dir, opt, split, index) != YC_OK) {
#pragma omp critical(yc_demo_error)
            {
                if (!failed) {
                    snprintf(message, sizeof message, "%s", yc_last_error());
#pragma omp atomic write
                    failed = 1;
                }
            }
        }
    }
    if (failed)
        return yc_error_status(YC_EIO, "demo dataset in %s: %s", dir, message);

    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return yc_error_status(YC_EIO, "cannot open %s: %s", dir, strerror(errno));
    int sr = syncfs(fd);
    int se = errno;
    close(fd);
    if (sr != 0)
        return yc_error_status(YC_EIO, "cannot sync %s to disk: %s", dir, strerror(se));

    if (opt->task != YC_DEMO_CLASSIFY) {
        char yaml[1024];
        size_t n = (size_t)snprintf(yaml, sizeof yaml,
                                    "# yolocl built-in demo dataset: synthetic coloured shapes%s\n"
                                    "# seed %llu, %d train and %d val images (yolocl demo-data)\n"
                                    "path: .\n"
                                    "train: images/train\n"
                                    "val: images/val\n"
                                    "names:\n",
                                    opt->task == YC_DEMO_SEGMENT ? ", outlines as polygons" : "",
                                    (unsigned long long)opt->seed, opt->n_train, opt->n_val);
        for (int k = 0; k < YC_DEMO_NC; k++)
            n += (size_t)snprintf(yaml + n, sizeof yaml - n, "  - %s\n", yc_demo_names[k]);
        snprintf(path, sizeof path, "%s/" YC_DEMO_YAML, dir);
        st = yc_write_file_atomic(path, yaml, n);
        if (st)
            return st;
    }
    char sig[512];
    signature(opt, sig, sizeof sig);
    snprintf(path, sizeof path, "%s/" YC_DEMO_MARKER, dir);
    st = yc_write_file_atomic(path, sig, strlen(sig));
    if (st)
        return st;
    yc_info("demo dataset (%s): %d train and %d val %s written to %s in %.1f s\n",
            yc_demo_task_name(opt->task), opt->n_train, opt->n_val,
            opt->task == YC_DEMO_CLASSIFY ? "scenes' crops" : "images", dir, yc_now() - t0);
    return YC_OK;
}

/* Validates the options and prepares the directory; fills *o with the options to use. */
static int prepare(const char *dir, const yc_demo_options *opt, yc_demo_options *o)
{
    if (opt)
        *o = *opt;
    else
        yc_demo_options_default(o);
    int st = check_options(o);
    if (st)
        return st;
    if (!dir || !dir[0])
        return yc_error_status(YC_EUSAGE, "demo dataset: no directory given");
    if (strlen(dir) > 3000)
        return yc_error_status(YC_EUSAGE, "demo dataset: directory name too long");
    st = yc_mkdirs(dir);
    if (st)
        return yc_error_context(st, "demo dataset");
    return yc_vips_init();
}

int yc_demo_write(const char *dir, const yc_demo_options *opt)
{
    yc_demo_options o;
    int st = prepare(dir, opt, &o);
    if (st)
        return st;
    int fd = lock_dir(dir);
    if (fd < 0)
        return YC_EIO;
    st = write_locked(dir, &o);
    unlock_dir(fd);
    return st;
}

bool yc_demo_is_complete(const char *dir, const yc_demo_options *opt)
{
    yc_demo_options o;
    if (opt)
        o = *opt;
    else
        yc_demo_options_default(&o);
    char path[4096], want[512];
    snprintf(path, sizeof path, "%s/" YC_DEMO_YAML, dir);
    if (o.task != YC_DEMO_CLASSIFY && !yc_file_exists(path))
        return false;
    snprintf(path, sizeof path, "%s/" YC_DEMO_MARKER, dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char have[512];
    size_t n = fread(have, 1, sizeof have - 1, f);
    fclose(f);
    have[n] = '\0';
    signature(&o, want, sizeof want);
    return strcmp(have, want) == 0;
}

char *yc_demo_default_dir(void)
{
    return yc_demo_task_dir(YC_DEMO_DETECT);
}

int yc_demo_ensure_opts(const char *dir, const yc_demo_options *opt)
{
    char *own = NULL;
    if (!dir) {
        own = yc_demo_default_dir();
        if (!own)
            return YC_EUSAGE;
        dir = own;
    }
    yc_demo_options o;
    int st = prepare(dir, opt, &o);
    if (!st) {
        int fd = lock_dir(dir);
        if (fd < 0) {
            st = YC_EIO;
        } else {
            if (yc_demo_is_complete(dir, &o))
                yc_debug("demo dataset: reusing %s\n", dir);
            else
                st = write_locked(dir, &o);
            unlock_dir(fd);
        }
    }
    free(own);
    return st;
}

int yc_demo_ensure(const char *dir)
{
    return yc_demo_ensure_opts(dir, NULL);
}

char *yc_demo_task_dir(yc_demo_task task)
{
    static const char *const leaf[3] = {"yolocl/demo", "yolocl/demo-seg", "yolocl/demo-cls"};
    if (task < YC_DEMO_DETECT || task > YC_DEMO_CLASSIFY) {
        yc_error_status(YC_EUSAGE, "demo dataset: task %d: must be detect, segment or classify",
                        (int)task);
        return NULL;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/')
        return yc_path_join(xdg, leaf[task]);
    const char *home = getenv("HOME");
    if (home && home[0]) {
        char base[4096];
        snprintf(base, sizeof base, ".cache/%s", leaf[task]);
        return yc_path_join(home, base);
    }
    yc_error_status(YC_EUSAGE, "no cache directory for the demo dataset: neither XDG_CACHE_HOME "
                    "nor HOME is set (give a directory with yolocl demo-data DIR)");
    return NULL;
}

int yc_demo_ensure_task(yc_demo_task task, char **data)
{
    *data = NULL;
    char *dir = yc_demo_task_dir(task);
    if (!dir)
        return YC_EUSAGE;
    yc_demo_options o;
    yc_demo_options_default(&o);
    o.task = task;
    int st = yc_demo_ensure_opts(dir, &o);
    if (!st && task != YC_DEMO_CLASSIFY) {
        *data = yc_path_join(dir, YC_DEMO_YAML);
        if (!*data)
            st = YC_ENOMEM;
        free(dir);
    } else if (!st) {
        *data = dir;
    } else {
        free(dir);
    }
    return st;
}
