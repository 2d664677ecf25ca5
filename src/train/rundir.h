/* Run directories and their files as YOLOv5 lays them out: runs/train/exp, exp2, exp3...;
 * results.csv with YOLOv5's columns and number format, appended and synced every epoch. */
#ifndef YC_RUNDIR_H
#define YC_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>

/* increment_path(project/name, exist_ok): "runs/train/exp" if free (or exist_ok), else exp2,
 * exp3, ...; the directory is created (with `sub`, e.g. "weights", inside when not NULL). */
int yc_run_dir(const char *project, const char *name, bool exist_ok, const char *sub, char *out,
               size_t len);

/* YOLOv5's results.csv columns after "epoch". */
#define YC_RESULTS_NCOLS 13
extern const char *const yc_results_columns[YC_RESULTS_NCOLS];

/* Appends one epoch's row (writing the header first when the file is new or empty): header fields
 * '%20s', values '%20.5g', comma-separated; flushed and fsynced. */
int yc_results_append(const char *path, int epoch, const double values[YC_RESULTS_NCOLS]);

/* segment/train.py's results.csv columns after "epoch" (utils/segment/metrics.py's KEYS): box
 * (B) and mask (M) metrics, and four losses. */
#define YC_SEG_RESULTS_NCOLS 19
extern const char *const yc_seg_results_columns[YC_SEG_RESULTS_NCOLS];

/* The same for a segmentation run, as its GenericLogger writes it: header fields '%23s', values
 * '%23.5g'. */
int yc_seg_results_append(const char *path, int epoch,
                          const double values[YC_SEG_RESULTS_NCOLS]);

/* Keeps only the rows of epochs < `epochs` (used when resuming after an interruption that
 * happened after a row was written but before its checkpoint), and drops a last line that lacks
 * its newline (a write cut short by a full disk or a crash). */
int yc_results_truncate(const char *path, int epochs);

/* Writes a flat JSON object's members as "key: value" YAML lines in their order, atomically
 * (opt.yaml, hyp.yaml): strings single-quoted, numbers as the JSON writes them, booleans, arrays
 * of numbers in brackets, null for anything else. */
int yc_write_yaml_from_json(const char *path, const char *json);

#endif
