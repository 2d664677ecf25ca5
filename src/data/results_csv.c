/* The results.csv reader (see results_csv.h): the file read whole, lines split at commas into
 * trimmed fields, the header's names kept, every other field parsed as a number (nan and inf
 * included); errors name the file and line. */
#include "results_csv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

void yc_results_free(yc_results *r)
{
    if (r->names)
        for (int i = 0; i < r->n_cols; i++)
            free(r->names[i]);
    free(r->names);
    free(r->values);
    memset(r, 0, sizeof *r);
}

int yc_results_column(const yc_results *r, const char *name)
{
    for (int i = 0; i < r->n_cols; i++)
        if (!strcmp(r->names[i], name))
            return i;
    return -1;
}

/* Trims spaces and tabs at both ends of [s, e) in place; returns the start. */
static char *trim(char *s, char *e)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    *e = '\0';
    return s;
}

/* Splits a line at commas into trimmed fields (pointers into the line); returns the count. */
static int split_fields(char *line, char **fields, int cap)
{
    int n = 0;
    char *s = line;
    for (;;) {
        char *comma = strchr(s, ',');
        char *e = comma ? comma : s + strlen(s);
        if (n < cap)
            fields[n] = trim(s, e);
        n++;
        if (!comma)
            break;
        s = comma + 1;
    }
    return n;
}

int yc_results_read(const char *csv_path, yc_results *out)
{
    enum { MAXCOLS = 256 };
    memset(out, 0, sizeof *out);
    char *text;
    size_t size;
    int st = yc_read_file(csv_path, &text, &size);
    if (st)
        return st;
    if (strlen(text) != size) {
        free(text);
        return yc_error_status(YC_EFORMAT, "%s: binary data (a NUL byte) in a CSV file", csv_path);
    }
    char *fields[MAXCOLS];
    char *line = text;
    int lineno = 0;
    int cap_rows = 0;
    st = YC_OK;
    while (line && *line) {
        lineno++;
        char *nl = strchr(line, '\n');
        char *next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        char *probe = line;
        while (*probe == ' ' || *probe == '\t' || *probe == '\r')
            probe++;
        if (!*probe) {
            line = next;
            continue;
        }
        int nf = split_fields(line, fields, MAXCOLS);
        if (!out->names) {
            if (nf > MAXCOLS) {
                st = yc_error_status(YC_EFORMAT, "%s:%d: more than %d columns", csv_path, lineno,
                                     MAXCOLS);
                break;
            }
            out->names = yc_calloc((size_t)nf, sizeof *out->names, "results.csv columns");
            if (!out->names) {
                st = YC_ENOMEM;
                break;
            }
            out->n_cols = nf;
            for (int i = 0; i < nf; i++) {
                if (!fields[i][0]) {
                    st = yc_error_status(YC_EFORMAT, "%s:%d: column %d of the header is empty",
                                         csv_path, lineno, i + 1);
                    break;
                }
                out->names[i] = yc_strdup(fields[i], "results.csv column name");
                if (!out->names[i]) {
                    st = YC_ENOMEM;
                    break;
                }
            }
            if (st)
                break;
            line = next;
            continue;
        }
        if (nf != out->n_cols) {
            st = yc_error_status(YC_EFORMAT, "%s:%d: %d fields where the header has %d", csv_path,
                                 lineno, nf, out->n_cols);
            break;
        }
        if (out->n_rows == cap_rows) {
            cap_rows = cap_rows ? 2 * cap_rows : 64;
            double *v = yc_realloc(out->values, (size_t)cap_rows * out->n_cols * sizeof *v,
                                   "results.csv values");
            if (!v) {
                st = YC_ENOMEM;
                break;
            }
            out->values = v;
        }
        double *row = out->values + (size_t)out->n_rows * out->n_cols;
        for (int i = 0; i < nf; i++) {
            char *end;
            errno = 0;
            row[i] = strtod(fields[i], &end);
            if (!fields[i][0] || *end) {
                st = yc_error_status(YC_EFORMAT, "%s:%d: field %d (%s) is not a number: '%s'",
                                     csv_path, lineno, i + 1, out->names[i], fields[i]);
                break;
            }
        }
        if (st)
            break;
        out->n_rows++;
        line = next;
    }
    free(text);
    if (!st && !out->names)
        st = yc_error_status(YC_EFORMAT, "%s: empty file (no header line)", csv_path);
    if (st)
        yc_results_free(out);
    return st;
}
