/* Tests of hyperparameter evolution (evolve.h) with fixed seeds and hand-computed cases: the
 * meta table against train.py's, fitness, the parent selection (top 5, weights fitness - min +
 * 1e-6, random.choices' cumulative bisection), the mutation (fixed keys never move, limits, 5
 * decimals, reproducible for a seed, different across seeds), and evolve.csv / hyp_evolve.yaml as
 * print_mutation writes them, read back. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve.h"
#include "hyp.h"
#include "log.h"
#include "rng.h"
#include "harness.h"
#include "yctest.h"

static int meta_index(const char *key)
{
    for (int i = 0; i < YC_EVOLVE_NHYP; i++)
        if (!strcmp(yc_evolve_meta_table[i].key, key))
            return i;
    return -1;
}

START_TEST(test_meta)
{
    /* a few rows of train.py's meta, and the keys in the hyp's order */
    int i = meta_index("momentum");
    ck_assert(i == 2 && yc_evolve_meta_table[i].gain == 0.3 && yc_evolve_meta_table[i].lo == 0.6 &&
              yc_evolve_meta_table[i].hi == 0.98);
    i = meta_index("degrees");
    ck_assert(yc_evolve_meta_table[i].gain == 1 && yc_evolve_meta_table[i].hi == 45.0);
    i = meta_index("perspective");
    ck_assert(yc_evolve_meta_table[i].gain == 0 && yc_evolve_meta_table[i].hi == 0.001);
    ck_assert_int_eq(meta_index("anchors"), -1);
    ck_assert_int_eq(meta_index("lr0"), 0);
    ck_assert_int_eq(meta_index("copy_paste"), YC_EVOLVE_NHYP - 1);
    yc_hyp h;
    yc_hyp_defaults(&h);
    double v[YC_EVOLVE_NHYP];
    yc_evolve_from_hyp(&h, v);
    ck_assert(v[0] == 0.01 && v[2] == 0.937 && v[meta_index("fliplr")] == 0.5);
    v[0] = 0.02;
    yc_evolve_to_hyp(v, &h);
    ck_assert(h.lr0 == 0.02 && h.momentum == 0.937);
}
END_TEST

static void set_row(double *rows, int i, double map50, double map)
{
    double *r = rows + (size_t)i * YC_EVOLVE_NCOLS;
    memset(r, 0, YC_EVOLVE_NCOLS * sizeof *r);
    r[0] = 0.9; /* P and R do not count */
    r[1] = 0.8;
    r[2] = map50;
    r[3] = map;
}

START_TEST(test_select)
{
    double rows[7 * YC_EVOLVE_NCOLS];
    ck_assert(fabs(yc_evolve_fitness((set_row(rows, 0, 0.5, 0.3), rows)) - 0.32) < 1e-12);
    /* one row: always it */
    ck_assert_int_eq(yc_evolve_select(rows, 1, 0.99), 0);
    /* fitness 0.1 (row 0), 0.3 (1), 0.2 (2): top 3 sorted 1, 2, 0; weights 0.2+1e-6, 0.1+1e-6,
     * 1e-6 -> cumulative 0.200001, 0.300002, 0.300003 */
    set_row(rows, 0, 1.0, 0.0);
    set_row(rows, 1, 3.0, 0.0);
    set_row(rows, 2, 2.0, 0.0);
    const double total = 0.300003;
    ck_assert_int_eq(yc_evolve_select(rows, 3, 0.0), 1);
    ck_assert_int_eq(yc_evolve_select(rows, 3, 0.2000009 / total), 1);
    ck_assert_int_eq(yc_evolve_select(rows, 3, 0.2000011 / total), 2);
    ck_assert_int_eq(yc_evolve_select(rows, 3, 0.3000019 / total), 2);
    ck_assert_int_eq(yc_evolve_select(rows, 3, 0.3000021 / total), 0);
    ck_assert_int_eq(yc_evolve_select(rows, 3, 0.9999999), 0);
    /* 7 rows: only the top 5 (fitness 0.7 .. 0.3: rows 6..2) are candidates; the lowest of them
     * (row 2) has weight 1e-6, rows 0 and 1 none */
    for (int i = 0; i < 7; i++)
        set_row(rows, i, (double)(i + 1), 0.0);
    int seen[7] = {0};
    yc_rng rng;
    yc_rng_seed(&rng, 7, 1);
    for (int k = 0; k < 2000; k++)
        seen[yc_evolve_select(rows, 7, yc_rng_uniform(&rng))]++;
    ck_assert(seen[0] == 0 && seen[1] == 0 && seen[2] == 0);
    /* weights 0.4, 0.3, 0.2, 0.1 for rows 6, 5, 4, 3: about 800, 600, 400, 200 */
    ck_assert(seen[6] > 700 && seen[6] < 900 && seen[3] > 130 && seen[3] < 270);
    ck_assert(seen[6] > seen[5] && seen[5] > seen[4] && seen[4] > seen[3]);
}
END_TEST

START_TEST(test_mutate)
{
    yc_hyp h;
    yc_hyp_defaults(&h);
    double parent[YC_EVOLVE_NHYP], a[YC_EVOLVE_NHYP], b[YC_EVOLVE_NHYP], c[YC_EVOLVE_NHYP];
    yc_evolve_from_hyp(&h, parent);
    yc_rng r1, r2, r3;
    yc_rng_seed(&r1, 0, 42);
    yc_rng_seed(&r2, 0, 42);
    yc_rng_seed(&r3, 1, 42);
    yc_evolve_mutate(parent, &r1, a);
    yc_evolve_mutate(parent, &r2, b);
    yc_evolve_mutate(parent, &r3, c);
    ck_assert(memcmp(a, b, sizeof a) == 0); /* the same seed: the same child */
    ck_assert(memcmp(a, c, sizeof a) != 0); /* another seed: another child */
    int changed = 0;
    for (int i = 0; i < YC_EVOLVE_NHYP; i++) {
        const yc_evolve_meta *m = &yc_evolve_meta_table[i];
        ck_assert_msg(a[i] >= m->lo && a[i] <= m->hi, "%s = %g outside its limits", m->key, a[i]);
        ck_assert_msg(fabs(a[i] * 1e5 - nearbyint(a[i] * 1e5)) < 1e-6, "%s = %.17g not rounded",
                      m->key, a[i]);
        if (m->gain == 0)
            ck_assert_msg(a[i] == parent[i], "%s has gain 0 but changed", m->key);
        /* a factor in [0.3, 3] (before the limits and rounding) */
        if (parent[i] > 0 && a[i] > m->lo && a[i] < m->hi)
            ck_assert(a[i] / parent[i] > 0.3 - 1e-3 && a[i] / parent[i] < 3 + 1e-3);
        changed += a[i] != parent[i];
    }
    ck_assert_int_gt(changed, 0);
    /* many generations from one parent: values of gain-1 keys spread, fixed keys never move */
    double lo = 1, hi = 0;
    for (int g = 0; g < 200; g++) {
        yc_rng r;
        yc_rng_seed(&r, 3, (uint64_t)g);
        yc_evolve_mutate(parent, &r, a);
        lo = a[0] < lo ? a[0] : lo;
        hi = a[0] > hi ? a[0] : hi;
        ck_assert(a[meta_index("iou_t")] == 0.2 && a[meta_index("fliplr")] == 0.5 &&
                  a[meta_index("fl_gamma")] == 0 && a[meta_index("perspective")] == 0);
    }
    ck_assert(lo < 0.0095 && hi > 0.0105);
    /* constrain: limits, then 5 decimals */
    double v[YC_EVOLVE_NHYP];
    memcpy(v, parent, sizeof v);
    v[0] = 0.5;       /* lr0 above 0.1 */
    v[1] = 0.001;     /* lrf below 0.01 */
    v[2] = 0.9123456; /* momentum: 0.91235 */
    yc_evolve_constrain(v);
    ck_assert(v[0] == 0.1 && v[1] == 0.01 && v[2] == 0.91235);
}
END_TEST

START_TEST(test_files)
{
    yc_harness_tmpdir_make("evolve");
    const char *csv = yc_harness_tmp("evolve.csv"), *yaml = yc_harness_tmp("hyp_evolve.yaml");
    double *rows = NULL;
    int n = -1;
    ck_assert_int_eq(yc_evolve_csv_read(csv, &rows, &n), YC_OK);
    ck_assert(rows == NULL && n == 0);
    yc_hyp h;
    yc_hyp_defaults(&h);
    double row[YC_EVOLVE_NCOLS] = {0.5, 0.4, 0.3, 0.2, 0.05, 0.04, 0.03};
    yc_evolve_from_hyp(&h, row + YC_EVOLVE_NRES);
    ck_assert_int_eq(yc_evolve_csv_append(csv, row), YC_OK);
    row[2] = 0.6;
    row[3] = 0.323456789;
    row[YC_EVOLVE_NRES] = 1e-5; /* lr0 */
    ck_assert_int_eq(yc_evolve_csv_append(csv, row), YC_OK);
    size_t len;
    char *text = yc_harness_read(csv, &len);
    /* the header ('%20s,') and the values ('%20.5g,') */
    ck_assert(strncmp(text, "   metrics/precision,      metrics/recall,     metrics/mAP_0.5,"
                            "metrics/mAP_0.5:0.95,", 84) == 0);
    ck_assert_ptr_nonnull(strstr(text, "\n                 0.5,                 0.4,"));
    ck_assert_ptr_nonnull(strstr(text, "             0.32346,"));
    ck_assert_ptr_nonnull(strstr(text, "          copy_paste\n"));
    free(text);
    ck_assert_int_eq(yc_evolve_csv_read(csv, &rows, &n), YC_OK);
    ck_assert_int_eq(n, 2);
    ck_assert(rows[YC_EVOLVE_NCOLS + 3] == 0.32346 && rows[YC_EVOLVE_NCOLS + 7] == 1e-5);
    ck_assert_int_eq(yc_evolve_write_yaml(yaml, rows, n), YC_OK);
    text = yc_harness_read(yaml, &len);
    ck_assert_ptr_nonnull(strstr(text, "# YOLOv5 Hyperparameter Evolution Results\n"
                                       "# Best generation: 1\n# Last generation: 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n\nlr0: 1.0e-05\nlrf: 0.01\nmomentum: 0.937\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nwarmup_epochs: 3.0\n"));
    free(text);
    /* the yaml is a hyp file yolocl reads */
    yc_hyp back;
    ck_assert_int_eq(yc_hyp_load(&back, yaml), YC_OK);
    ck_assert(back.lr0 == 1e-5 && back.momentum == 0.937);
    ck_assert_int_eq(yc_evolve_plot(yc_harness_tmp("evolve.png"), rows, n), YC_OK);
    ck_assert_int_eq(yc_harness_count_files(yc_harness_tmpdir(), ".png"), 1);
    free(rows);
    /* a csv of other columns is refused */
    const char *bad = yc_harness_tmp("bad.csv");
    yc_harness_write_text(bad, "a,b\n1,2\n");
    ck_assert_int_eq(yc_evolve_csv_read(bad, &rows, &n), YC_EFORMAT);
    yc_harness_tmpdir_remove();
}
END_TEST

static Suite *evolve_suite(void)
{
    Suite *s = suite_create("evolve");
    TCase *tc = tcase_create("evolve");
    tcase_add_test(tc, test_meta);
    tcase_add_test(tc, test_select);
    tcase_add_test(tc, test_mutate);
    tcase_add_test(tc, test_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_run(evolve_suite(), false);
}
