/* Hyperparameter evolution (train --evolve [N]): YOLOv5 v7.0 train.py's genetic search.
 *
 * Each generation: when evolve.csv has rows, the parent is chosen among its top 5 rows by fitness
 * (0.1 mAP@0.5 + 0.9 mAP@0.5:0.95), with weights fitness - min + 1e-6 (random.choices: the
 * 'single' parent method YOLOv5 uses), and mutated: per hyperparameter a factor
 *     v = clip(gain * (U < 0.8) * N(0, 1) * U' * 0.2 + 1, 0.3, 3.0)
 * (U per key, U' one draw for all keys; drawn again while every v is 1), times the parent's value;
 * every value is then held to the meta table's limits and rounded to 5 decimals.  The first
 * generation trains the --hyp file's values (limited and rounded).  Keys with gain 0 never change
 * (iou_t, fl_gamma, perspective, fliplr).  Each generation is a normal training run with --noval
 * and --nosave (validation and checkpoint only at the end), in <save_dir>/gen<K>; its final
 * results (P, R, mAP@0.5, mAP@0.5:0.95, val box/obj/cls losses) and hyperparameters are appended
 * to <save_dir>/evolve.csv ('%20s,' header, '%20.5g,' values), hyp_evolve.yaml is rewritten with
 * the best row, and evolve.png is plotted at the end.  evolve.csv is the whole state: running
 * again into the same directory (--exist-ok with the same --project/--name) continues from it.
 *
 * Differences from YOLOv5: the mutation's random numbers come from PCG32 seeded with --seed and
 * the generation number (YOLOv5 seeds numpy with the clock), so a run is reproducible; the
 * 'anchors' hyperparameter is not evolved (yolocl does not train placeholder anchors: YOLOv5
 * behaves so with --noautoanchor). */
#ifndef YC_EVOLVE_H
#define YC_EVOLVE_H

#include <stdbool.h>
#include <stddef.h>

#include "hyp.h"
#include "rng.h"
#include "train.h"

/* One row of train.py's meta: mutation gain (0: fixed), lower and upper limit. */
typedef struct yc_evolve_meta {
    const char *key;
    double gain, lo, hi;
    size_t offset; /* of the double in yc_hyp */
} yc_evolve_meta;

/* The meta table in yc_hyp's key order (YC_EVOLVE_NHYP rows). */
#define YC_EVOLVE_NHYP 28
extern const yc_evolve_meta yc_evolve_meta_table[YC_EVOLVE_NHYP];

/* The 7 result columns before the hyperparameters in evolve.csv. */
#define YC_EVOLVE_NRES 7
#define YC_EVOLVE_NCOLS (YC_EVOLVE_NRES + YC_EVOLVE_NHYP)
extern const char *const yc_evolve_result_keys[YC_EVOLVE_NRES];

/* fitness(): 0.1 * mAP@0.5 + 0.9 * mAP@0.5:0.95 of a row (P, R, mAP@0.5, mAP@0.5:0.95, ...). */
double yc_evolve_fitness(const double *row);

/* The parent among n rows of YC_EVOLVE_NCOLS values (n >= 1): the top min(5, n) by fitness (a
 * stable sort, best first), chosen with weights fitness - min + 1e-6 by u in [0, 1) as Python's
 * random.choices does (the first whose cumulative weight exceeds u * total).  Returns the row's
 * index in rows. */
int yc_evolve_select(const double *rows, int n, double u);

/* The mutation of the parent's hyperparameters (YC_EVOLVE_NHYP values in meta order) into out,
 * limited and rounded: draws from rng as numpy does (U per key, then N per key, then one U'). */
void yc_evolve_mutate(const double *parent, yc_rng *rng, double *out);

/* Holds v (YC_EVOLVE_NHYP values) to the limits and rounds each to 5 decimals. */
void yc_evolve_constrain(double *v);

/* yc_hyp <-> the meta order. */
void yc_evolve_from_hyp(const yc_hyp *h, double *v);
void yc_evolve_to_hyp(const double *v, yc_hyp *h);

/* evolve.csv: reads its rows (NULL and 0 when the file does not exist) checking the header names
 * the columns yolocl writes; appends one row (with the header when the file is new). */
int yc_evolve_csv_read(const char *path, double **rows, int *n);
int yc_evolve_csv_append(const char *path, const double *row);

/* hyp_evolve.yaml of the rows as print_mutation writes it (the best row's hyperparameters). */
int yc_evolve_write_yaml(const char *path, const double *rows, int n);

/* evolve.png: one panel per hyperparameter, fitness against its value, the best marked. */
int yc_evolve_plot(const char *path, const double *rows, int n);

/* Runs `generations` generations from the options of one training (o: --hyp, --epochs, --data
 * ...; its project and name are the evolution's directory, default runs/evolve/exp).  *interrupted
 * is set when a generation's training was interrupted (the evolution stops there). */
int yc_evolve(const yc_train_opts *o, int generations, bool *interrupted);

#endif
