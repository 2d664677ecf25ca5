/* Reading a results.csv as YOLOv5 writes it (results.png is plotted from it, see plots.h). */
#ifndef YC_RESULTS_CSV_H
#define YC_RESULTS_CSV_H

/* A results.csv as YOLOv5 writes it: a header of column names, then one row of numbers per
 * epoch. */
typedef struct yc_results {
    /* number of columns and of data rows */
    int n_cols, n_rows;
    /* column names, whitespace trimmed (n_cols) */
    char **names;
    /* values, row-major (n_rows x n_cols) */
    double *values;
} yc_results;

/* Reads a results.csv: fields separated by commas, surrounding spaces ignored, every row as many
 * fields as the header, every value a finite or nan/inf number.  Errors name the file and line. */
int yc_results_read(const char *csv_path, yc_results *out);
void yc_results_free(yc_results *r);
/* Index of a column by name, or -1. */
int yc_results_column(const yc_results *r, const char *name);

#endif
