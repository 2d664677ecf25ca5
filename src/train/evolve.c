/* Hyperparameter evolution: YOLOv5 v7.0 train.py --evolve (see evolve.h). */
#include "evolve.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "draw.h"
#include "log.h"
#include "results_csv.h"
#include "rundir.h"
#include "util.h"
#include "val.h"

#define META(k, g, lo, hi) {#k, g, lo, hi, offsetof(yc_hyp, k)}
/* train.py's meta: (mutation scale 0-1, lower_limit, upper_limit), without 'anchors' */
const yc_evolve_meta yc_evolve_meta_table[YC_EVOLVE_NHYP] = {
    META(lr0, 1, 1e-5, 1e-1),          META(lrf, 1, 0.01, 1.0),
    META(momentum, 0.3, 0.6, 0.98),    META(weight_decay, 1, 0.0, 0.001),
    META(warmup_epochs, 1, 0.0, 5.0),  META(warmup_momentum, 1, 0.0, 0.95),
    META(warmup_bias_lr, 1, 0.0, 0.2), META(box, 1, 0.02, 0.2),
    META(cls, 1, 0.2, 4.0),            META(cls_pw, 1, 0.5, 2.0),
    META(obj, 1, 0.2, 4.0),            META(obj_pw, 1, 0.5, 2.0),
    META(iou_t, 0, 0.1, 0.7),          META(anchor_t, 1, 2.0, 8.0),
    META(fl_gamma, 0, 0.0, 2.0),       META(hsv_h, 1, 0.0, 0.1),
    META(hsv_s, 1, 0.0, 0.9),          META(hsv_v, 1, 0.0, 0.9),
    META(degrees, 1, 0.0, 45.0),       META(translate, 1, 0.0, 0.9),
    META(scale, 1, 0.0, 0.9),          META(shear, 1, 0.0, 10.0),
    META(perspective, 0, 0.0, 0.001),  META(flipud, 1, 0.0, 1.0),
    META(fliplr, 0, 0.0, 1.0),         META(mosaic, 1, 0.0, 1.0),
    META(mixup, 1, 0.0, 1.0),          META(copy_paste, 1, 0.0, 1.0),
};
#undef META

const char *const yc_evolve_result_keys[YC_EVOLVE_NRES] = {
    "metrics/precision", "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95",
    "val/box_loss",      "val/obj_loss",   "val/cls_loss"};

double yc_evolve_fitness(const double *row)
{
    /* w = [0.0, 0.0, 0.1, 0.9]: P, R, mAP@0.5, mAP@0.5:0.95 */
    return 0.0 * row[0] + 0.0 * row[1] + 0.1 * row[2] + 0.9 * row[3];
}

int yc_evolve_select(const double *rows, int n, double u)
{
    /* x[np.argsort(-fitness(x))][:n] with n = min(5, len(x)): the top rows by fitness, best
     * first (the earlier row first on ties) */
    int top[5], k = n < 5 ? n : 5;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int t = 0; t < j; t++)
                taken |= top[t] == i;
            if (!taken && (best < 0 || yc_evolve_fitness(rows + (size_t)i * YC_EVOLVE_NCOLS) >
                                           yc_evolve_fitness(rows + (size_t)best * YC_EVOLVE_NCOLS)))
                best = i;
        }
        top[j] = best;
    }
    /* w = fitness(x) - fitness(x).min() + 1e-6; random.choices(range(n), weights=w) */
    double fmin = INFINITY, cum[5], total = 0;
    for (int j = 0; j < k; j++) {
        double f = yc_evolve_fitness(rows + (size_t)top[j] * YC_EVOLVE_NCOLS);
        fmin = f < fmin ? f : fmin;
    }
    for (int j = 0; j < k; j++) {
        total += yc_evolve_fitness(rows + (size_t)top[j] * YC_EVOLVE_NCOLS) - fmin + 1e-6;
        cum[j] = total;
    }
    /* bisect(cum_weights, random() * total, 0, n - 1) */
    double x = u * total;
    int j = 0;
    while (j < k - 1 && !(x < cum[j]))
        j++;
    return top[j];
}

void yc_evolve_constrain(double *v)
{
    for (int i = 0; i < YC_EVOLVE_NHYP; i++) {
        const yc_evolve_meta *m = &yc_evolve_meta_table[i];
        double x = v[i] > m->lo ? v[i] : m->lo; /* max(hyp[k], v[1]) */
        x = x < m->hi ? x : m->hi;             /* min(hyp[k], v[2]) */
        v[i] = nearbyint(x * 1e5) / 1e5;       /* round(hyp[k], 5), half to even */
    }
}

void yc_evolve_mutate(const double *parent, yc_rng *rng, double *out)
{
    /* mp, s = 0.8, 0.2 */
    const double mp = 0.8, s = 0.2;
    double v[YC_EVOLVE_NHYP];
    bool changed = false;
    while (!changed) { /* while all(v == 1): mutate until a change occurs */
        double r[YC_EVOLVE_NHYP], z[YC_EVOLVE_NHYP];
        for (int i = 0; i < YC_EVOLVE_NHYP; i++) /* npr.random(ng) */
            r[i] = yc_rng_uniform(rng);
        for (int i = 0; i < YC_EVOLVE_NHYP; i++) /* npr.randn(ng) */
            z[i] = yc_rng_normal(rng);
        double one = yc_rng_uniform(rng); /* npr.random() */
        for (int i = 0; i < YC_EVOLVE_NHYP; i++) {
            double g = yc_evolve_meta_table[i].gain;
            double x = g * (r[i] < mp ? 1.0 : 0.0) * z[i] * one * s + 1;
            v[i] = x < 0.3 ? 0.3 : x > 3.0 ? 3.0 : x; /* .clip(0.3, 3.0) */
            changed |= v[i] != 1;
        }
    }
    for (int i = 0; i < YC_EVOLVE_NHYP; i++)
        out[i] = parent[i] * v[i]; /* hyp[k] = float(x[i + 7] * v[i]) */
    yc_evolve_constrain(out);
}

void yc_evolve_from_hyp(const yc_hyp *h, double *v)
{
    for (int i = 0; i < YC_EVOLVE_NHYP; i++)
        v[i] = *(const double *)(const void *)((const char *)h + yc_evolve_meta_table[i].offset);
}

void yc_evolve_to_hyp(const double *v, yc_hyp *h)
{
    for (int i = 0; i < YC_EVOLVE_NHYP; i++)
        *(double *)(void *)((char *)h + yc_evolve_meta_table[i].offset) = v[i];
}

static const char *column_name(int c)
{
    return c < YC_EVOLVE_NRES ? yc_evolve_result_keys[c]
                              : yc_evolve_meta_table[c - YC_EVOLVE_NRES].key;
}

int yc_evolve_csv_read(const char *path, double **rows, int *n)
{
    *rows = NULL;
    *n = 0;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return errno == ENOENT ? YC_OK
                               : yc_error_status(YC_EIO, "%s: %s", path, strerror(errno));
    yc_results r;
    int st = yc_results_read(path, &r);
    if (st)
        return yc_error_context(st, "reading the evolution state");
    if (r.n_cols != YC_EVOLVE_NCOLS) {
        st = yc_error_status(YC_EFORMAT, "%s has %d columns, not the %d yolocl writes (7 results "
                             "and %d hyperparameters): move it away to start a new evolution",
                             path, r.n_cols, YC_EVOLVE_NCOLS, YC_EVOLVE_NHYP);
    }
    for (int c = 0; !st && c < YC_EVOLVE_NCOLS; c++)
        if (strcmp(r.names[c], column_name(c)))
            st = yc_error_status(YC_EFORMAT, "%s: column %d is '%s', expected '%s'", path, c + 1,
                                 r.names[c], column_name(c));
    if (!st) {
        *rows = r.values;
        *n = r.n_rows;
        r.values = NULL;
    }
    yc_results_free(&r);
    return st;
}

int yc_evolve_csv_append(const char *path, const double *row)
{
    struct stat sb;
    bool fresh = stat(path, &sb) != 0 || sb.st_size == 0;
    FILE *f = fopen(path, "a");
    if (!f)
        return yc_error_status(YC_EIO, "cannot append to %s: %s", path, strerror(errno));
    /* ('%20s,' * n % keys).rstrip(','), then ('%20.5g,' * n % vals).rstrip(',') */
    for (int c = 0; fresh && c < YC_EVOLVE_NCOLS; c++)
        fprintf(f, "%20s%s", column_name(c), c + 1 < YC_EVOLVE_NCOLS ? "," : "\n");
    for (int c = 0; c < YC_EVOLVE_NCOLS; c++)
        fprintf(f, "%20.5g%s", row[c], c + 1 < YC_EVOLVE_NCOLS ? "," : "\n");
    if (fflush(f) != 0 || ferror(f)) {
        fclose(f);
        return yc_error_status(YC_EIO, "writing %s: %s (disk full?)", path, strerror(errno));
    }
    if (fclose(f) != 0)
        return yc_error_status(YC_EIO, "closing %s: %s", path, strerror(errno));
    return YC_OK;
}

/* np.argmax(fitness): the first best row. */
static int best_row(const double *rows, int n)
{
    int j = 0;
    for (int i = 1; i < n; i++)
        if (yc_evolve_fitness(rows + (size_t)i * YC_EVOLVE_NCOLS) >
            yc_evolve_fitness(rows + (size_t)j * YC_EVOLVE_NCOLS))
            j = i;
    return j;
}

/* PyYAML's float: repr(), with ".0" before an exponent that has no decimal point. */
static void yaml_float(double v, char *buf, size_t len)
{
    char r[64];
    yc_py_float_repr(v, r, sizeof r);
    char *e = strchr(r, 'e');
    if (e && !strchr(r, '.'))
        snprintf(buf, len, "%.*s.0%s", (int)(e - r), r, e);
    else
        snprintf(buf, len, "%s", r);
}

int yc_evolve_write_yaml(const char *path, const double *rows, int n)
{
    if (n < 1)
        return yc_error_status(YC_EUSAGE, "hyp_evolve.yaml: no generations");
    int i = best_row(rows, n);
    const double *row = rows + (size_t)i * YC_EVOLVE_NCOLS;
    yc_atomic_file af;
    int st = yc_atomic_open(&af, path);
    if (st)
        return st;
    fprintf(af.f, "# YOLOv5 Hyperparameter Evolution Results\n# Best generation: %d\n"
                  "# Last generation: %d\n# ", i, n - 1);
    for (int c = 0; c < YC_EVOLVE_NRES; c++)
        fprintf(af.f, "%s%20s", c ? ", " : "", yc_evolve_result_keys[c]);
    fputs("\n# ", af.f);
    for (int c = 0; c < YC_EVOLVE_NRES; c++)
        fprintf(af.f, "%s%20.5g", c ? ", " : "", row[c]);
    fputs("\n\n", af.f);
    for (int k = 0; k < YC_EVOLVE_NHYP; k++) {
        char v[64];
        yaml_float(row[YC_EVOLVE_NRES + k], v, sizeof v);
        fprintf(af.f, "%s: %s\n", yc_evolve_meta_table[k].key, v);
    }
    return yc_atomic_commit(&af);
}

/* viridis at t in [0, 1] (5 of matplotlib's points, linear between them) */
static yc_rgb viridis(double t)
{
    static const uint8_t p[5][3] = {
        {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double x = t * 4;
    int i = x >= 4 ? 3 : (int)x;
    double f = x - i;
    yc_rgb c;
    c.r = (uint8_t)lround(p[i][0] + f * (p[i + 1][0] - p[i][0]));
    c.g = (uint8_t)lround(p[i][1] + f * (p[i + 1][1] - p[i][1]));
    c.b = (uint8_t)lround(p[i][2] + f * (p[i + 1][2] - p[i][2]));
    return c;
}

/* The bin of v among 20 equal bins over [lo, hi] (hist2d's np.histogram2d bins). */
static int bin20(double v, double lo, double hi)
{
    if (!(hi > lo))
        return 0;
    int b = (int)((v - lo) / (hi - lo) * 20);
    return b < 0 ? 0 : b > 19 ? 19 : b;
}

int yc_evolve_plot(const char *path, const double *rows, int n)
{
    /* plt.figure(figsize=(10, 12)) at dpi 200 is 2000 x 2400; 6 x 5 panels of 400 x 400 */
    enum { PW = 400, PH = 400, COLS = 5, ROWS = 6, M = 40 };
    if (n < 1)
        return yc_error_status(YC_EUSAGE, "evolve.png: no generations");
    yc_canvas cv;
    yc_rgb white = {255, 255, 255}, black = {0, 0, 0}, grey = {160, 160, 160};
    int st = yc_canvas_init(&cv, PW * COLS, PH * ROWS, white);
    if (st)
        return st;
    double *f = yc_malloc((size_t)n * sizeof *f, "evolve.png fitness");
    if (!f) {
        yc_canvas_free(&cv);
        return YC_ENOMEM;
    }
    double fmin = INFINITY, fmax = -INFINITY;
    for (int i = 0; i < n; i++) {
        f[i] = yc_evolve_fitness(rows + (size_t)i * YC_EVOLVE_NCOLS);
        fmin = f[i] < fmin ? f[i] : fmin;
        fmax = f[i] > fmax ? f[i] : fmax;
    }
    if (!(fmax > fmin)) {
        fmin -= 0.5;
        fmax += 0.5;
    }
    int j = best_row(rows, n);
    for (int k = 0; k < YC_EVOLVE_NHYP; k++) {
        int ox = (k % COLS) * PW, oy = (k / COLS) * PH;
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < n; i++) {
            double v = rows[(size_t)i * YC_EVOLVE_NCOLS + YC_EVOLVE_NRES + k];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        double xlo = lo, xhi = hi;
        if (!(xhi > xlo)) {
            xlo -= fabs(lo) * 0.05 + 1e-3;
            xhi += fabs(hi) * 0.05 + 1e-3;
        }
        /* the panel: title "key = best value", a frame, the points coloured by their density in
         * a 20 x 20 histogram (hist2d), the best marked by a black + */
        char title[96], val[32];
        snprintf(val, sizeof val, "%.3g",
                 rows[(size_t)j * YC_EVOLVE_NCOLS + YC_EVOLVE_NRES + k]);
        snprintf(title, sizeof title, "%s = %s", yc_evolve_meta_table[k].key, val);
        yc_draw_text(&cv, ox + M, oy + 8, title, 2, black);
        int x0 = ox + M, y0 = oy + M, x1 = ox + PW - M / 2, y1 = oy + PH - M / 2;
        yc_draw_box(&cv, x0, y0, x1, y1, 1, grey);
        int hist[20][20];
        memset(hist, 0, sizeof hist);
        for (int i = 0; i < n; i++) {
            double v = rows[(size_t)i * YC_EVOLVE_NCOLS + YC_EVOLVE_NRES + k];
            hist[bin20(v, lo, hi)][bin20(f[i], fmin, fmax)]++;
        }
        int hmax = 1;
        for (int a = 0; a < 20; a++)
            for (int b = 0; b < 20; b++)
                hmax = hist[a][b] > hmax ? hist[a][b] : hmax;
        for (int i = 0; i < n; i++) {
            double v = rows[(size_t)i * YC_EVOLVE_NCOLS + YC_EVOLVE_NRES + k];
            double px = x0 + 8 + (v - xlo) / (xhi - xlo) * (x1 - x0 - 16);
            double py = y1 - 8 - (f[i] - fmin) / (fmax - fmin) * (y1 - y0 - 16);
            int h = hist[bin20(v, lo, hi)][bin20(f[i], fmin, fmax)];
            yc_draw_disc(&cv, px, py, 4, viridis(hmax > 1 ? log((double)h) / log((double)hmax)
                                                          : 0));
        }
        double bx = x0 + 8 + (rows[(size_t)j * YC_EVOLVE_NCOLS + YC_EVOLVE_NRES + k] - xlo) /
                                 (xhi - xlo) * (x1 - x0 - 16);
        double by = y1 - 8 - (f[j] - fmin) / (fmax - fmin) * (y1 - y0 - 16);
        yc_draw_line(&cv, bx - 12, by, bx + 12, by, 2, black);
        yc_draw_line(&cv, bx, by - 12, bx, by + 12, 2, black);
    }
    free(f);
    st = yc_canvas_save(&cv, path);
    yc_canvas_free(&cv);
    return st;
}

/* Writes the hyperparameters v as a hyp yaml ("key: value" lines) at path. */
static int write_hyp(const char *path, const double *v)
{
    yc_atomic_file af;
    int st = yc_atomic_open(&af, path);
    if (st)
        return st;
    for (int k = 0; k < YC_EVOLVE_NHYP; k++) {
        char s[64];
        yaml_float(v[k], s, sizeof s);
        fprintf(af.f, "%s: %s\n", yc_evolve_meta_table[k].key, s);
    }
    return yc_atomic_commit(&af);
}

/* The final results of a generation's training: the last row of its results.csv. */
static int generation_results(const char *csv, double *res)
{
    yc_results r;
    int st = yc_results_read(csv, &r);
    if (st)
        return yc_error_context(st, "reading the generation's results");
    if (r.n_rows < 1)
        st = yc_error_status(YC_EFORMAT, "%s has no epochs", csv);
    for (int c = 0; !st && c < YC_EVOLVE_NRES; c++) {
        int col = yc_results_column(&r, yc_evolve_result_keys[c]);
        if (col < 0)
            st = yc_error_status(YC_EFORMAT, "%s has no column %s", csv, yc_evolve_result_keys[c]);
        else
            res[c] = r.values[(size_t)(r.n_rows - 1) * r.n_cols + col];
    }
    yc_results_free(&r);
    return st;
}

/* The evolve: lines print_mutation prints. */
static void print_generation(int generations, const double *row)
{
    printf("evolve: %d generations finished, current result:\nevolve: ", generations);
    for (int c = 0; c < YC_EVOLVE_NCOLS; c++)
        printf("%s%20s", c ? ", " : "", column_name(c));
    printf("\nevolve: ");
    for (int c = 0; c < YC_EVOLVE_NCOLS; c++)
        printf("%s%20.5g", c ? ", " : "", row[c]);
    printf("\n\n");
    fflush(stdout);
}

int yc_evolve(const yc_train_opts *o, int generations, bool *interrupted)
{
    *interrupted = false;
    char save_dir[4096];
    const char *project = o->project && o->project[0] ? o->project : "runs/evolve";
    int st = yc_run_dir(project, o->name && o->name[0] ? o->name : "exp", o->exist_ok, NULL,
                        save_dir, sizeof save_dir);
    if (st)
        return st;
    yc_hyp base;
    if ((st = yc_hyp_load(&base, o->hyp)))
        return st;
    char csv[4200], yaml[4200], png[4200], hyp_path[4200], results[4300];
    snprintf(csv, sizeof csv, "%s/evolve.csv", save_dir);
    snprintf(yaml, sizeof yaml, "%s/hyp_evolve.yaml", save_dir);
    snprintf(png, sizeof png, "%s/evolve.png", save_dir);
    double *rows = NULL;
    int n = 0;
    for (int gen = 0; gen < generations; gen++) {
        free(rows);
        rows = NULL;
        if ((st = yc_evolve_csv_read(csv, &rows, &n)))
            break;
        /* generation K: a parent from evolve.csv's K rows mutated, or the --hyp values */
        double hyp[YC_EVOLVE_NHYP];
        if (n > 0) {
            yc_rng rng;
            yc_rng_seed(&rng, (uint64_t)o->seed, 0x65766f6c7665ull + (uint64_t)n);
            int p = yc_evolve_select(rows, n, yc_rng_uniform(&rng));
            yc_evolve_mutate(rows + (size_t)p * YC_EVOLVE_NCOLS + YC_EVOLVE_NRES, &rng, hyp);
            printf("evolve: generation %d: parent row %d (fitness %.5g)\n", n, p,
                   yc_evolve_fitness(rows + (size_t)p * YC_EVOLVE_NCOLS));
        } else {
            yc_evolve_from_hyp(&base, hyp);
            yc_evolve_constrain(hyp);
            printf("evolve: generation 0: the hyperparameters of %s\n", o->hyp);
        }
        char name[32];
        snprintf(name, sizeof name, "gen%d", n);
        snprintf(hyp_path, sizeof hyp_path, "%s/%s_hyp.yaml", save_dir, name);
        if ((st = write_hyp(hyp_path, hyp)))
            break;
        /* opt.noval, opt.nosave = True: validation and saving at the final epoch only */
        yc_train_opts g = *o;
        g.hyp = hyp_path;
        g.project = save_dir;
        g.name = name;
        g.exist_ok = true;
        g.noval = true;
        g.nosave = true;
        g.resume = NULL;
        if ((st = yc_train(&g, interrupted)) || *interrupted)
            break;
        double row[YC_EVOLVE_NCOLS];
        snprintf(results, sizeof results, "%s/%s/results.csv", save_dir, name);
        if ((st = generation_results(results, row)))
            break;
        memcpy(row + YC_EVOLVE_NRES, hyp, sizeof hyp);
        if ((st = yc_evolve_csv_append(csv, row)))
            break;
        free(rows);
        rows = NULL;
        if ((st = yc_evolve_csv_read(csv, &rows, &n)) || (st = yc_evolve_write_yaml(yaml, rows, n)))
            break;
        print_generation(n, row);
    }
    if (!st && !*interrupted) {
        free(rows);
        rows = NULL;
        if (!(st = yc_evolve_csv_read(csv, &rows, &n)) && n > 0 &&
            !(st = yc_evolve_plot(png, rows, n))) {
            int j = best_row(rows, n);
            printf("Best results from row %d of %s:\n", j, csv);
            for (int k = 0; k < YC_EVOLVE_NHYP; k++)
                printf("%15s: %.3g\n", yc_evolve_meta_table[k].key,
                       rows[(size_t)j * YC_EVOLVE_NCOLS + YC_EVOLVE_NRES + k]);
            printf("Saved %s\nHyperparameter evolution finished %d generations\nResults saved to "
                   "%s\nUsage example: $ yolocl train --hyp %s\n", png, generations, save_dir,
                   yaml);
        }
    }
    free(rows);
    return st;
}
